/* SPDX-License-Identifier: MIT */
/*
 * feed: a tailer follows the session store's change feed (store.h:
 * feed_read/feed_head) for one indexer on its own thread. It reads
 * batches after its position, hands each batch to the consumer's apply,
 * and advances only when apply succeeded (a failed batch is retried
 * whole, with backoff), so a consumer sees every record at least once
 * and, within one process run, in order and exactly once. The position
 * can come from, and be saved to, a durable cursor (the consumer's load
 * and save). Idle, the tailer sleeps until kicked (after a local write)
 * or for FEED_POLL_MS (to see other processes' writes).
 *
 * Readers ask a tailer to catch up with a feed position (feed_wait), so a
 * search sees the caller's own writes; rebuilds pause it, reset its
 * position, and watch its progress.
 */
#ifndef MEMD_INDEX_FEED_H
#define MEMD_INDEX_FEED_H

#include <stdint.h>

#include <memd/plugin.h>

#include "plugins/hostsvc.h"
#include "plugins/store.h"

/* How long an idle tailer sleeps before looking at the feed again. */
#define FEED_POLL_MS 1000
/* Backoff after a failed batch: doubles from MIN up to MAX. */
#define FEED_BACKOFF_MIN_MS 100
#define FEED_BACKOFF_MAX_MS 30000
/* Waiters give up early after this many failures in a row. */
#define FEED_FAIL_FAST 2

/* One feed record, copied out of the store (strings owned by the batch). */
typedef struct feed_rec {
	uint32_t kind;               /* MEMD_FEED_* */
	int64_t position;
	const char *app, *user;
	const char *session;         /* NULL for MEMD_FEED_DELETE_USER */
	/* MEMD_FEED_EVENT and MEMD_FEED_HIDE (the hidden event) only (else
	 * NULL / 0): */
	const char *event_id, *author, *role;
	const char *text;            /* never NULL for events and memories ("" if none) */
	int64_t seq, timestamp_us;   /* a memory's timestamp_us: its updated_us */
	/* MEMD_FEED_MEMORY (with text) and MEMD_FEED_MEMORY_DELETE (the id
	 * only) (else NULL / 0): */
	const char *memory_id;
	const char *memory_kind;     /* fact|preference|instruction|episode */
	const char *topics, *entities; /* JSON arrays of strings ("[]" if none) */
	int64_t expires_us;          /* 0 = never */
} feed_rec;

/* A growable list of records with their strings. */
typedef struct feed_batch feed_batch;
/* NULL on ENOMEM. */
feed_batch *feed_batch_new(void);
/* Accepts NULL. */
void feed_batch_free(feed_batch *b);
/* Drop every record (keeps the memory for reuse). */
void feed_batch_reset(feed_batch *b);
/* Copy one store record in. 0 or MEMD_ENOMEM. */
int32_t feed_batch_add(feed_batch *b, const memd_feed_record *r);
/* Copy an event (from events_load) in as a MEMD_FEED_EVENT record of
 * scope (app, user, session). 0 or MEMD_ENOMEM. */
int32_t feed_batch_add_event(feed_batch *b, const char *app, const char *user,
			     const char *session, const memd_event *e);
/* Copy a stored memory (from memory_list) in as a MEMD_FEED_MEMORY
 * record at its position. 0 or MEMD_ENOMEM. */
int32_t feed_batch_add_memory(feed_batch *b, const memd_memory *m);
size_t feed_batch_count(const feed_batch *b);
/* The records, in the order added; valid until the next add/reset. */
const feed_rec *feed_batch_records(const feed_batch *b);

/* What an indexer plugs into a tailer. Called on the tailer's thread
 * (and on a rebuilding thread while the tailer is paused), never two at
 * once. Every op returns 0 or a negative MEMD_E* with err filled. */
typedef struct feed_consumer {
	void *userdata;
	/* Apply records in feed order. On failure the whole batch is applied
	 * again later: apply must be idempotent per record. */
	int32_t (*apply)(void *userdata, const feed_rec *recs, size_t n, memd_error *err);
	/* Optional: set-up before the first batch (retried until it works). */
	int32_t (*start)(void *userdata, memd_error *err);
	/* Optional: where to start (a durable cursor). NULL = 0. */
	int32_t (*load)(void *userdata, int64_t *ret_position, memd_error *err);
	/* Optional: persist the position after a batch. A failure is logged
	 * and does not stop the tailer (the work is only repeated later). */
	int32_t (*save)(void *userdata, int64_t position, memd_error *err);
	/* Optional: before a batch, outside a rebuild: the position to go on
	 * from, >= position (another process's progress on a shared durable
	 * cursor); the consumer takes care of what lies between. */
	int32_t (*skip)(void *userdata, int64_t position, int64_t *ret_position,
			memd_error *err);
} feed_consumer;

typedef struct feed_tailer feed_tailer;

/* A tailer named name (for logs, e.g. "index.keyword") over store s,
 * reading batch records at a time. It starts at once on its own thread.
 * s, svc and the consumer's userdata must outlive it. */
int32_t feed_tailer_start(store *s, hostsvc *svc, const char *name, uint32_t batch,
			  const feed_consumer *c, feed_tailer **ret, memd_error *err);
/* Stop the thread (it finishes the batch in hand) and free; accepts NULL. */
void feed_tailer_stop(feed_tailer *t);
/* The first half of feed_tailer_stop, without waiting: the batch in hand
 * gives up (its store calls see the cancel flag) and no other starts, so
 * a feed_tailer_pause waiting for it returns soon. The tailer must still
 * be stopped. Accepts NULL. */
void feed_tailer_cancel(feed_tailer *t);
/* Wake the tailer: something was written. */
void feed_tailer_kick(feed_tailer *t);

/* Wait until the tailer has applied every record up to head (a value of
 * feed_head read after the writes to be seen), or, with head < 0, until a
 * full pass over the feed that began after this call has ended.
 * deadline_us: CLOCK_MONOTONIC us, 0 = none. Returns 0; MEMD_ETIMEDOUT
 * (RETRYABLE) when the deadline passed, MEMD_EUNAVAIL (RETRYABLE) when
 * the tailer keeps failing (FEED_FAIL_FAST times in a row; the message
 * says why); MEMD_ECANCELED if the tailer is stopping. */
int32_t feed_tailer_wait(feed_tailer *t, int64_t head, int64_t deadline_us, memd_error *err);

/* Pause after the batch in hand; returns the position (every record up
 * to it is applied, none after). Pauses nest. */
int64_t feed_tailer_pause(feed_tailer *t);
void feed_tailer_resume(feed_tailer *t);
/* While paused: go on from position instead, as a rebuild (skip is not
 * consulted until the tailer reaches until). */
void feed_tailer_reset(feed_tailer *t, int64_t position, int64_t until);
/* The position applied so far. */
int64_t feed_tailer_position(feed_tailer *t);

/* Milliseconds of CLOCK_MONOTONIC, as us (for deadlines). */
int64_t feed_monotonic_us(void);

#endif
