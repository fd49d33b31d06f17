/* SPDX-License-Identifier: MIT */
/*
 * vector: the vector indexer over a vector-store plugin instance
 * (api/memd/vector.h). It embeds events' text in batches (embed.h) and
 * upserts one record per event (idempotent by event, so an event made
 * visible again is simply upserted again) and per memory (MEMORY
 * records, replaced by a new version; see VEC_MEMORY_SESSION), removes a
 * memory's record when it is deleted, a session's or user's
 * records when the feed says they were deleted and an event's when it was
 * hidden (remove_events; a vector store below ABI 1.2 has none and keeps
 * hidden events' records: searches then drop those hits when they fetch
 * the events, which skips hidden ones, so they never show), and
 * keeps its feed position in the session store's durable cursor
 * "vector:<store name>:<embedder identity>" (saved after each applied
 * batch, so a crash repeats at most one batch, which the upserts make
 * harmless). Another embedder (type, dimension, model) starts a new
 * cursor at 0, so every event is embedded again with it; a vector store
 * emptied or moved under the same name needs `memd index rebuild`. Several
 * memd processes share that cursor: a tailer that finds it ahead of its
 * own position jumps there and applies only the deletes and hides in
 * between (the other process embedded the events). Calls into a plugin that is not
 * MEMD_PLUGIN_THREADSAFE are serialized.
 */
#ifndef MEMD_INDEX_VECTOR_H
#define MEMD_INDEX_VECTOR_H

#include <memd/plugin.h>

#include "embed.h"
#include "feed.h"
#include "plugins/hostsvc.h"
#include "plugins/loader.h"
#include "plugins/store.h"

/* The session name of memories' records: a user's memories are embedded
 * into the same vector store as events, each a record with this session
 * (no session id can contain '/'), event_id = the memory's id, seq = its
 * expires_us (0 = never) and timestamp_us = its updated_us. Event
 * searches leave these records out; memory searches ask for them. */
#define VEC_MEMORY_SESSION "memories/"

/* vec_search's sources */
#define VEC_SOURCE_EVENTS   0x1u
#define VEC_SOURCE_MEMORIES 0x2u
/* A search whose store answers are crowded by records it leaves out
 * (memories for an event search, expired memories) asks again for
 * VEC_FETCH_GROWTH times as many, up to VEC_FETCH_MAX. */
#define VEC_FETCH_GROWTH 4
#define VEC_FETCH_MAX 8192

/* Prefix of the durable cursor's name. */
#define VEC_CURSOR_PREFIX "vector:"
/* Feed records per batch read for the deletes a jump skips over. */
#define VEC_SKIP_BATCH 1024
/* Hidden events removed per remove_events call (a run of one session's
 * HIDE records). */
#define VEC_HIDE_RUN 256

typedef struct vec_index vec_index;

/* An indexer over inst (a vector store instance, borrowed; MEMD_EABI if
 * it is not one) named store_name in config, feeding from sessions, with
 * embedder emb (borrowed). If emb's dimension is known, calls the
 * plugin's prepare(dim) now: a MEMD_ECONFLICT (another dimension stored)
 * or other non-retryable failure is returned; a retryable one is retried
 * by the consumer's start later. If it is not known (the endpoint was
 * down at open), the indexer opens without it: the consumer learns it
 * before the first batch (each retryable failure makes the tailer back
 * off and retry), then names the cursor, allocates its batches and calls
 * prepare; until then vec_ready is 0 and vec_search fails with
 * MEMD_EUNAVAIL (retryable). */
int32_t vec_open(const loader_instance *inst, const char *store_name, store *sessions, embedder *emb,
		 hostsvc *svc, vec_index **ret, memd_error *err);
/* Accepts NULL. */
void vec_free(vec_index *v);
/* Make the calls the indexer has in flight (embedder, vector store,
 * cursor) and every later one give up with MEMD_ECANCELED: for close,
 * after the bounded catch-up. Accepts NULL. */
void vec_stop(vec_index *v);
/* The consumer ops for a feed tailer (userdata = v). */
void vec_consumer(vec_index *v, feed_consumer *ret);
/* The durable cursor's name; "" until vec_ready. */
const char *vec_cursor_name(const vec_index *v);
/* Nonzero once the dimension is known and the indexer set up (from then
 * on for good). Thread-safe. */
int vec_ready(const vec_index *v);
/* Set err to the retryable MEMD_EUNAVAIL a search gets before vec_ready
 * and return that code. */
int32_t vec_not_ready(const vec_index *v, memd_error *err);
const char *vec_store_name(const vec_index *v);

/* Apply feed records (also used by rebuilds; learns the dimension
 * first if needed, as vec_cursor_save). */
int32_t vec_apply(vec_index *v, const feed_rec *recs, size_t n, memd_error *err);
/* Remove every record of (app, user). */
int32_t vec_remove_user(vec_index *v, const char *app, const char *user, memd_error *err);
/* Nonzero if the vector store removes hidden events' records
 * (remove_events, ABI 1.2). */
int vec_removes_events(const vec_index *v);
/* Set the durable cursor (learning the dimension first if needed: the
 * embedder's retryable error while its endpoint is down). */
int32_t vec_cursor_save(vec_index *v, int64_t position, memd_error *err);

typedef struct vec_hit {
	char *session, *event_id;    /* malloc'd; a memory's: both its id */
	int64_t seq;                 /* a memory's: 0 */
	int64_t timestamp_us;        /* a memory's: updated_us */
	double score;
	uint32_t memory;             /* nonzero: the hit is a memory */
} vec_hit;

/* Embed query and return the best k records of sources
 * (VEC_SOURCE_*; 0 = both) into *ret_hits (free with vec_hits_free),
 * best first: events matching f (app and user set; the store is asked
 * for exactly that scope and every hit is checked against it), and
 * memories of f's app and user (f's session, authors and times narrow
 * events only) that have not expired at now_us. Hits with a similarity
 * <= 0 are left out: they do not match. */
int32_t vec_search(vec_index *v, const memd_call *call, const char *query,
		   const memd_vector_filter *f, uint32_t sources, int64_t now_us, uint32_t k,
		   vec_hit **ret_hits, size_t *ret_n, memd_error *err);
void vec_hits_free(vec_hit *hits, size_t n);

#endif
