/* SPDX-License-Identifier: MIT */
#include "index.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "embed.h"
#include "feed.h"
#include "kw_feed.h"
#include "kw_snapshot.h"
#include "search.h"
#include "vector.h"

#define US_PER_MS 1000
#define US_PER_SEC 1000000
#define NS_PER_US 1000
#define BYTES_PER_MIB (1024.0 * 1024.0)
#define LOG_KEYWORD "index.keyword"
#define LOG_VECTOR "index.vector"
/* Store ids are positive int64s (cursor values). */
#define SNAPSHOT_ID_MASK 0x7FFFFFFFFFFFFFFFULL

struct indexer {
	store *sessions;
	hostsvc *svc;
	int default_mode;
	double vector_weight;    /* index.hybrid.vector_weight */
	kw_index *kw;
	feed_tailer *kw_tail;
	int64_t kw_applied;      /* last position applied to kw (see kw_apply) */
	embedder *emb;
	vec_index *vec;
	feed_tailer *vec_tail;
	pthread_mutex_t rebuild_lock;
	/* The user a rebuild is working on (their searches are refused
	 * meanwhile); NULL when none. Guarded by rb_mu. */
	pthread_mutex_t rb_mu;
	const char *rb_app, *rb_user;

	/* Keyword snapshots; snap_path NULL = none. The anchors (the newest
	 * events applied, a ring) are the tailer's like kw_applied. */
	char *snap_path;
	volatile int32_t closing;  /* index_close began: a load gives up */
	kws_anchor anchors[KWS_ANCHORS];
	uint32_t n_anchors, next_anchor;
	pthread_t snap_thread;
	int snap_running;
	pthread_mutex_t snap_mu;   /* guards what follows */
	pthread_cond_t snap_cond;  /* CLOCK_MONOTONIC */
	int snap_stop;
	uint64_t kw_records;       /* feed records applied by the tailer */
	uint64_t snap_records;     /* kw_records at the last snapshot */
	int64_t snap_last_us;      /* monotonic time of the last snapshot (or open) */
	int64_t snap_pos;          /* feed position of the file as last known; a
				    * snapshot is written only when ahead of it */
	uint64_t sched_records;    /* the schedule (INDEX_SNAPSHOT_* by default) */
	int64_t sched_min_ms, sched_max_ms, sched_check_ms;
};

/* ---- the keyword consumer ------------------------------------------------------- */

/* Remember an applied event as one of the newest (a snapshot's anchors). */
static void anchor_push(indexer *ix, const feed_rec *r)
{
	kws_anchor *a = &ix->anchors[ix->next_anchor];
	size_t len = strlen(r->event_id);

	if (!len || len > MEMD_ID_MAX)
		return;
	a->position = r->position;
	memcpy(a->event_id, r->event_id, len + 1);
	ix->next_anchor = (ix->next_anchor + 1) % KWS_ANCHORS;
	if (ix->n_anchors < KWS_ANCHORS)
		ix->n_anchors++;
}

/* A batch retried after a failure skips the records it already applied
 * (they are idempotent one by one, but the position and the anchors must
 * not go back). */
static int32_t kw_apply(void *ud, const feed_rec *recs, size_t n, memd_error *err)
{
	indexer *ix = ud;
	uint64_t applied = 0;
	size_t from = 0, done = 0;
	int32_t r;

	while (from < n && recs[from].position <= ix->kw_applied)
		from++;
	r = kw_feed_apply(ix->kw, recs + from, n - from, &done, err);
	for (size_t i = from; i < from + done; i++) {
		ix->kw_applied = recs[i].position;
		if (recs[i].kind == MEMD_FEED_EVENT && recs[i].event_id)
			anchor_push(ix, &recs[i]);
		applied++;
	}
	pthread_mutex_lock(&ix->snap_mu);
	ix->kw_records += applied;
	pthread_mutex_unlock(&ix->snap_mu);
	return r;
}

/* ---- keyword snapshots ----------------------------------------------------------------- */

static int64_t unix_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * US_PER_SEC + ts.tv_nsec / NS_PER_US;
}

/* The store's snapshot id; the first snapshot of a store sets a random
 * one. Two processes racing here both end up with the one stored last
 * (or one writes a snapshot the next start refuses and rebuilds). */
static int32_t snapshot_store_id(indexer *ix, const memd_call *call, int64_t *ret, memd_error *err)
{
	uint64_t rnd = 0;
	int64_t id = 0;
	int32_t r;

	if ((r = store_cursor_get(ix->sessions, call, INDEX_SNAPSHOT_ID_CURSOR, &id, err)) < 0)
		return r;
	if (id > 0) {
		*ret = id;
		return 0;
	}
	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return memd_error_set(err, MEMD_EIO, 0, "keyword snapshot: no random numbers for the store id");
	rnd &= SNAPSHOT_ID_MASK;
	if ((r = store_cursor_set(ix->sessions, call, INDEX_SNAPSHOT_ID_CURSOR,
				  rnd ? (int64_t)rnd : 1, err)) < 0 ||
	    (r = store_cursor_get(ix->sessions, call, INDEX_SNAPSHOT_ID_CURSOR, &id, err)) < 0)
		return r;
	if (id <= 0)
		return memd_error_set(err, MEMD_EIO, 0,
				      "keyword snapshot: the store did not keep cursor %s",
				      INDEX_SNAPSHOT_ID_CURSOR);
	*ret = id;
	return 0;
}

/* Save the keyword index. tailer_running: pause the tailer while the
 * index is copied (else the caller has stopped it). Returns 0 when
 * written, 1 when the file is as new as the index (nothing written), or
 * a negative MEMD_E* with err. */
static int32_t snapshot_write(indexer *ix, int tailer_running, memd_error *err)
{
	/* In the background, closing cuts the store calls short. */
	memd_call call = { .struct_size = sizeof(call),
			   .cancel = tailer_running ? &ix->closing : NULL };
	kws_meta meta = { 0 };
	kws_writer *w = NULL;
	uint64_t records, bytes = 0, docs = 0;
	int64_t id = 0, t0 = feed_monotonic_us(), t_paused, t_resumed;
	int32_t r;

	if (!tailer_running) {
		/* Stopped: kw_applied can be read now; most closes of a memd
		 * that changed nothing end here. */
		pthread_mutex_lock(&ix->snap_mu);
		r = ix->kw_applied > ix->snap_pos ? 0 : 1;
		pthread_mutex_unlock(&ix->snap_mu);
		if (r)
			return r;
	}
	if ((r = snapshot_store_id(ix, &call, &id, err)) < 0 ||
	    (r = kws_writer_open(ix->snap_path, &w, err)) < 0)
		return r;
	if (tailer_running)
		feed_tailer_pause(ix->kw_tail);
	t_paused = feed_monotonic_us();
	pthread_mutex_lock(&ix->snap_mu);
	records = ix->kw_records;
	r = ix->kw_applied > ix->snap_pos ? 0 : 1;
	pthread_mutex_unlock(&ix->snap_mu);
	if (r == 0) {
		meta.store_id = (uint64_t)id;
		meta.position = ix->kw_applied;
		meta.analyzer_version = KW_ANALYZER_VERSION;
		meta.analyzer = kw_analyzer_fingerprint();
		meta.written_us = unix_us();
		meta.n_anchors = ix->n_anchors;
		for (uint32_t i = 0; i < ix->n_anchors; i++) /* oldest first */
			meta.anchors[i] = ix->anchors[(ix->next_anchor + KWS_ANCHORS - ix->n_anchors + i) %
						      KWS_ANCHORS];
		r = kws_writer_dump(w, &meta, ix->kw, &bytes, &docs, err);
	}
	if (tailer_running)
		feed_tailer_resume(ix->kw_tail);
	t_resumed = feed_monotonic_us();
	if (r != 0) {
		kws_writer_abort(w);
		return r;
	}
	if ((r = kws_writer_commit(w, err)) < 0)
		return r;
	pthread_mutex_lock(&ix->snap_mu);
	ix->snap_records = records;
	ix->snap_pos = meta.position;
	pthread_mutex_unlock(&ix->snap_mu);
	hostsvc_log(ix->svc, MEMD_LOG_INFO, LOG_KEYWORD,
		    "snapshot written to %s: feed position %lld, %llu documents, %.1f MiB; indexing paused %lld ms, %lld ms in all",
		    ix->snap_path, (long long)meta.position, (unsigned long long)docs,
		    (double)bytes / BYTES_PER_MIB, (long long)((t_resumed - t_paused) / US_PER_MS),
		    (long long)((feed_monotonic_us() - t0) / US_PER_MS));
	return 0;
}

/* A periodic snapshot, unless a rebuild is running (then later). */
static void snapshot_periodic(indexer *ix)
{
	memd_error err = { 0 };
	int32_t r;

	if (pthread_mutex_trylock(&ix->rebuild_lock) != 0)
		return;
	r = snapshot_write(ix, 1, &err);
	pthread_mutex_unlock(&ix->rebuild_lock);
	if (r < 0)
		hostsvc_log(ix->svc, MEMD_LOG_WARN, LOG_KEYWORD, "cannot write the snapshot (retrying later): %s",
			    err.msg);
}

static void *snapshot_run(void *arg)
{
	indexer *ix = arg;

	pthread_mutex_lock(&ix->snap_mu);
	while (!ix->snap_stop) {
		int64_t now = feed_monotonic_us(), wake;
		uint64_t pending = ix->kw_records - ix->snap_records;
		int64_t age_ms = (now - ix->snap_last_us) / US_PER_MS;
		struct timespec ts;

		if ((pending >= ix->sched_records && age_ms >= ix->sched_min_ms) ||
		    (pending > 0 && age_ms >= ix->sched_max_ms)) {
			pthread_mutex_unlock(&ix->snap_mu);
			snapshot_periodic(ix);
			pthread_mutex_lock(&ix->snap_mu);
			/* Written, skipped or failed: not again before the
			 * interval is over. */
			ix->snap_last_us = feed_monotonic_us();
			continue;
		}
		wake = now + ix->sched_check_ms * US_PER_MS;
		ts.tv_sec = wake / US_PER_SEC;
		ts.tv_nsec = (wake % US_PER_SEC) * NS_PER_US;
		pthread_cond_timedwait(&ix->snap_cond, &ix->snap_mu, &ts);
	}
	pthread_mutex_unlock(&ix->snap_mu);
	return NULL;
}

static int32_t anchor_record(void *ud, const memd_feed_record *r)
{
	return feed_batch_add(ud, r);
}

/* Why meta does not fit this store, into why; 1 if it does not, 0 if it
 * does, or a negative MEMD_E* (the store failed: try again later). */
static int32_t snapshot_fits(indexer *ix, const memd_call *call, const kws_meta *meta, char *why,
			     size_t cap, memd_error *err)
{
	feed_batch *b = NULL;
	int64_t id = 0, head = 0;
	memd_error e2 = { 0 };
	int32_t r;

	if (meta->analyzer_version != KW_ANALYZER_VERSION || meta->analyzer != kw_analyzer_fingerprint()) {
		snprintf(why, cap, "written by another analyzer (version %u, this memd has %u)",
			 meta->analyzer_version, KW_ANALYZER_VERSION);
		return 1;
	}
	if (meta->position < 0) {
		snprintf(why, cap, "a negative feed position");
		return 1;
	}
	if ((r = store_cursor_get(ix->sessions, call, INDEX_SNAPSHOT_ID_CURSOR, &id, err)) < 0)
		return r;
	if (id <= 0) {
		snprintf(why, cap, "the session store has no snapshot id (a new or replaced database)");
		return 1;
	}
	if ((uint64_t)id != meta->store_id) {
		snprintf(why, cap, "written for another database (store id %llx, this one is %llx)",
			 (unsigned long long)meta->store_id, (unsigned long long)id);
		return 1;
	}
	r = store_feed_head(ix->sessions, call, &head, &e2);
	if (r < 0 && r != MEMD_ENOTSUP) {
		*err = e2;
		return r;
	}
	if (r == 0 && meta->position > head) {
		snprintf(why, cap, "covers feed position %lld, past the store's feed head %lld (a restored database?)",
			 (long long)meta->position, (long long)head);
		return 1;
	}
	if (!(b = feed_batch_new()))
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	for (uint32_t i = 0; i < meta->n_anchors; i++) {
		const kws_anchor *a = &meta->anchors[i];
		memd_feed_sink sink = { sizeof(sink), b, anchor_record };
		const feed_rec *rec;

		if (a->position <= 0 || a->position > meta->position) {
			snprintf(why, cap, "an anchor at feed position %lld is out of range",
				 (long long)a->position);
			r = 1;
			break;
		}
		feed_batch_reset(b);
		if ((r = store_feed_read(ix->sessions, call, a->position - 1, 1, &sink, err)) < 0)
			break;
		rec = feed_batch_records(b);
		/* Gone (its session was deleted since): nothing to compare. */
		if (!feed_batch_count(b) || rec->position != a->position)
			continue;
		if (rec->kind != MEMD_FEED_EVENT || !rec->event_id || strcmp(rec->event_id, a->event_id) != 0) {
			snprintf(why, cap, "feed position %lld holds another record than the snapshot's event %.64s (a restored or replaced database?)",
				 (long long)a->position, a->event_id);
			r = 1;
			break;
		}
	}
	feed_batch_free(b);
	return r;
}

static void snapshot_refused(indexer *ix, const char *why)
{
	hostsvc_log(ix->svc, MEMD_LOG_WARN, LOG_KEYWORD,
		    "snapshot %s not used (%s): rebuilding the keyword index from the feed", ix->snap_path,
		    why);
}

/* The tailer's start: load the snapshot if there is one that fits.
 * Fails only when the store cannot be asked (the tailer retries);
 * anything wrong with the file means a rebuild from the feed. */
static int32_t kw_start(void *ud, memd_error *err)
{
	indexer *ix = ud;
	memd_call call = { .struct_size = sizeof(call), .cancel = &ix->closing };
	memd_error e = { 0 };
	kws_reader *rd = NULL;
	kws_meta meta;
	char why[MEMD_ERROR_MSG_MAX];
	uint64_t docs = 0;
	int64_t t0 = feed_monotonic_us();
	int32_t r;

	if (!ix->snap_path)
		return 0;
	kws_remove_stale(ix->snap_path);
	r = kws_reader_open(ix->snap_path, &rd, &meta, &e);
	if (r == MEMD_ENOTFOUND) {
		hostsvc_log(ix->svc, MEMD_LOG_INFO, LOG_KEYWORD,
			    "no snapshot at %s yet: building the keyword index from the feed", ix->snap_path);
		return 0;
	}
	if (r < 0) {
		snapshot_refused(ix, e.msg);
		return 0;
	}
	r = snapshot_fits(ix, &call, &meta, why, sizeof(why), err);
	if (r == 1)
		snapshot_refused(ix, why);
	if (r != 0)
		goto out;
	/* The file stays the better one until the index passes it, even if
	 * this load is cut short. */
	pthread_mutex_lock(&ix->snap_mu);
	ix->snap_pos = meta.position;
	pthread_mutex_unlock(&ix->snap_mu);
	r = kws_reader_load(rd, ix->kw, &ix->closing, &docs, &e);
	if (r == MEMD_ECANCELED) {
		r = 0;
		goto out;
	}
	if (r < 0) {
		snapshot_refused(ix, e.msg);
		pthread_mutex_lock(&ix->snap_mu);
		ix->snap_pos = 0;
		pthread_mutex_unlock(&ix->snap_mu);
		r = 0;
		goto out;
	}
	ix->kw_applied = meta.position;
	memcpy(ix->anchors, meta.anchors, sizeof(ix->anchors));
	ix->n_anchors = meta.n_anchors;
	ix->next_anchor = meta.n_anchors % KWS_ANCHORS;
	hostsvc_log(ix->svc, MEMD_LOG_INFO, LOG_KEYWORD,
		    "loaded the snapshot %s (feed position %lld, %llu documents) in %lld ms; catching up from the feed",
		    ix->snap_path, (long long)meta.position, (unsigned long long)docs,
		    (long long)((feed_monotonic_us() - t0) / US_PER_MS));
out:
	kws_reader_close(rd);
	return r;
}

/* The tailer's starting position: the snapshot's, or 0. */
static int32_t kw_load(void *ud, int64_t *ret, memd_error *err)
{
	indexer *ix = ud;
	(void)err;
	*ret = ix->kw_applied;
	return 0;
}

/* ---- open / close --------------------------------------------------------------------- */

static void free_parts(indexer *ix)
{
	vec_free(ix->vec);
	embedder_free(ix->emb);
	kw_free(ix->kw);
	pthread_mutex_destroy(&ix->rebuild_lock);
	pthread_mutex_destroy(&ix->rb_mu);
	pthread_cond_destroy(&ix->snap_cond);
	pthread_mutex_destroy(&ix->snap_mu);
	free(ix->snap_path);
	free(ix);
}

/* Stop the snapshot thread; accepts one that never started. */
static void snapshot_stop(indexer *ix)
{
	if (!ix->snap_running)
		return;
	pthread_mutex_lock(&ix->snap_mu);
	ix->snap_stop = 1;
	pthread_cond_broadcast(&ix->snap_cond);
	pthread_mutex_unlock(&ix->snap_mu);
	pthread_join(ix->snap_thread, NULL);
	ix->snap_running = 0;
}

int32_t index_open(const settings *set, store *sessions, const loader_instance *vector_store,
		   hostsvc *svc, indexer **ret, memd_error *err)
{
	indexer *ix = calloc(1, sizeof(*ix));
	int32_t r;

	pthread_condattr_t cattr;

	if (!ix)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	pthread_mutex_init(&ix->rebuild_lock, NULL);
	pthread_mutex_init(&ix->snap_mu, NULL);
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&ix->snap_cond, &cattr);
	pthread_mutex_init(&ix->rb_mu, NULL);
	pthread_condattr_destroy(&cattr);
	ix->snap_last_us = feed_monotonic_us();
	ix->sched_records = INDEX_SNAPSHOT_RECORDS;
	ix->sched_min_ms = INDEX_SNAPSHOT_MIN_INTERVAL_MS;
	ix->sched_max_ms = INDEX_SNAPSHOT_MAX_AGE_MS;
	ix->sched_check_ms = INDEX_SNAPSHOT_CHECK_MS;
	ix->sessions = sessions;
	ix->svc = svc;
	ix->default_mode = set->search_mode_default ? search_mode(set->search_mode_default) : 0;
	if (!ix->default_mode)
		ix->default_mode = SEARCH_KEYWORD;
	ix->vector_weight = set->hybrid_vector_weight;
	if (set->keyword_enabled && (!(ix->kw = kw_new(set->keyword_k1, set->keyword_b)) ||
				     (set->keyword_snapshot &&
				      !(ix->snap_path = strdup(set->keyword_snapshot))))) {
		free_parts(ix);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	if (set->vector_enabled) {
		if (!vector_store) {
			free_parts(ix);
			return memd_error_set(err, MEMD_EINVAL, 0, "index.vector.store '%.64s' is not configured",
					      set->vector_store ? set->vector_store : "");
		}
		if ((r = embedder_open(set->embedder, svc, &ix->emb, err)) < 0 ||
		    (r = vec_open(vector_store, set->vector_store, sessions, ix->emb, svc, &ix->vec,
				  err)) < 0) {
			free_parts(ix);
			return r;
		}
	}
	if (ix->kw) {
		feed_consumer c = { .userdata = ix, .apply = kw_apply, .start = kw_start, .load = kw_load };
		if ((r = feed_tailer_start(sessions, svc, LOG_KEYWORD, INDEX_KEYWORD_BATCH, &c,
					   &ix->kw_tail, err)) < 0) {
			free_parts(ix);
			return r;
		}
	}
	if (ix->vec) {
		feed_consumer c;
		vec_consumer(ix->vec, &c);
		if ((r = feed_tailer_start(sessions, svc, LOG_VECTOR,
					   embedder_batch(ix->emb) * INDEX_VECTOR_BATCHES, &c,
					   &ix->vec_tail, err)) < 0) {
			feed_tailer_stop(ix->kw_tail);
			free_parts(ix);
			return r;
		}
	}
	if (ix->kw && ix->snap_path) {
		int rc = pthread_create(&ix->snap_thread, NULL, snapshot_run, ix);
		if (rc != 0) {
			ix->closing = 1;
			feed_tailer_stop(ix->vec_tail);
			feed_tailer_stop(ix->kw_tail);
			free_parts(ix);
			return memd_error_set(err, MEMD_EIO, 0, "%s: cannot start a thread: %s",
					      LOG_KEYWORD, strerror(rc));
		}
		ix->snap_running = 1;
	}
	*ret = ix;
	return 0;
}

/* The feed head, or -1 when the store cannot tell (feed_tailer_wait then
 * waits for a full pass). */
static int32_t read_head(indexer *ix, const memd_call *call, int64_t *ret, memd_error *err)
{
	memd_error e2 = { 0 };
	int64_t head = 0;
	int32_t r = store_feed_head(ix->sessions, call, &head, &e2);

	if (r == MEMD_ENOTSUP) {
		*ret = -1;
		return 0;
	}
	if (r < 0) {
		if (err)
			*err = e2;
		return r;
	}
	*ret = head;
	return 0;
}

void index_close(indexer *ix)
{
	if (!ix)
		return;
	if (ix->vec_tail) {
		memd_call call = { .struct_size = sizeof(call) };
		memd_error err = { 0 };
		int64_t head;
		if (read_head(ix, &call, &head, &err) < 0 ||
		    feed_tailer_wait(ix->vec_tail, head,
				     feed_monotonic_us() + (int64_t)INDEX_CLOSE_FLUSH_MS * US_PER_MS,
				     &err) < 0)
			hostsvc_log(ix->svc, MEMD_LOG_WARN, LOG_VECTOR,
				    "closing before the vector index caught up (it will go on at the next start): %s",
				    err.msg);
	}
	/* A snapshot still loading gives up (the file stays for the next
	 * start); a periodic one being written is finished first, and the
	 * keyword tailer's batch in hand is cut short so that its pause does
	 * not wait on a slow store. */
	ix->closing = 1;
	feed_tailer_cancel(ix->kw_tail);
	snapshot_stop(ix);
	/* What is still in flight (a hanging embeddings endpoint) gives up
	 * now; it is done again at the next start. */
	vec_stop(ix->vec);
	feed_tailer_stop(ix->vec_tail);
	feed_tailer_stop(ix->kw_tail);
	if (ix->kw && ix->snap_path) {
		memd_error err = { 0 };
		if (snapshot_write(ix, 0, &err) < 0)
			hostsvc_log(ix->svc, MEMD_LOG_WARN, LOG_KEYWORD,
				    "cannot write the snapshot at close (the next start replays more of the feed): %s",
				    err.msg);
	}
	free_parts(ix);
}

void index_notify(indexer *ix)
{
	if (!ix)
		return;
	if (ix->kw_tail)
		feed_tailer_kick(ix->kw_tail);
	if (ix->vec_tail)
		feed_tailer_kick(ix->vec_tail);
}

void index_snapshot_schedule(indexer *ix, uint64_t records, int64_t min_interval_ms,
			     int64_t max_age_ms, int64_t check_ms)
{
	if (!ix || check_ms <= 0)
		return;
	pthread_mutex_lock(&ix->snap_mu);
	ix->sched_records = records;
	ix->sched_min_ms = min_interval_ms;
	ix->sched_max_ms = max_age_ms;
	ix->sched_check_ms = check_ms;
	pthread_cond_broadcast(&ix->snap_cond);
	pthread_mutex_unlock(&ix->snap_mu);
}

void index_keyword_stats(indexer *ix, kw_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (ix && ix->kw)
		kw_get_stats(ix->kw, ret);
}

/* ---- search ------------------------------------------------------------------------ */

/* MEMD_EUNAVAIL (retryable) while a rebuild works on (app, user): their
 * entries are incomplete until it ends, and waiting for it would hold
 * the caller (a request thread) for as long as the rebuild takes. */
static int32_t check_not_rebuilding(indexer *ix, const char *app, const char *user,
				    memd_error *err)
{
	int busy;

	pthread_mutex_lock(&ix->rb_mu);
	busy = ix->rb_app && strcmp(ix->rb_app, app) == 0 && strcmp(ix->rb_user, user) == 0;
	pthread_mutex_unlock(&ix->rb_mu);
	if (busy)
		return memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
				      "the search index of %.64s/%.64s is being rebuilt; try again when the rebuild is done",
				      app, user);
	return 0;
}

/* Check that q's indexes are there and wait for them to catch up with
 * the feed head (a client reads its own writes). */
static int32_t search_ready(indexer *ix, memd_call *c, const char *app, const char *user,
			    const search_req *q, memd_error *err)
{
	int64_t head, deadline;
	int32_t r;

	if ((q->mode == SEARCH_KEYWORD || q->mode == SEARCH_HYBRID) && !ix->kw)
		return memd_error_set(err, MEMD_EINVAL, 0,
				   "mode %s: keyword search is not enabled (index.keyword.enabled)",
				   search_mode_name(q->mode));
	if ((q->mode == SEARCH_VECTOR || q->mode == SEARCH_HYBRID) && !ix->vec)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "mode %s: vector search is not enabled (index.vector.enabled)",
				      search_mode_name(q->mode));
	/* The embedder's endpoint has not answered since start: there is no
	 * vector index to wait for yet (keyword searches are unaffected). */
	if (q->mode != SEARCH_KEYWORD && !vec_ready(ix->vec))
		return vec_not_ready(ix->vec, err);
	deadline = c->deadline_us ? c->deadline_us
				  : feed_monotonic_us() + (int64_t)INDEX_WAIT_MS * US_PER_MS;
	if ((r = check_not_rebuilding(ix, app, user, err)) < 0 ||
	    (r = read_head(ix, c, &head, err)) < 0)
		return r;
	if (q->mode != SEARCH_VECTOR && (r = feed_tailer_wait(ix->kw_tail, head, deadline, err)) < 0)
		return r;
	if (q->mode != SEARCH_KEYWORD && (r = feed_tailer_wait(ix->vec_tail, head, deadline, err)) < 0)
		return r;
	return 0;
}

int32_t index_search(indexer *ix, const memd_call *call, const char *app, const char *user,
		     const char *body_json, int64_t now_us, char **ret_json, memd_error *err)
{
	memd_call c = { .struct_size = sizeof(c) };
	search_req q = { 0 };
	int32_t r;

	if (call)
		c = *call;
	if ((r = search_parse(body_json, ix->default_mode, &q, err)) < 0)
		return r;
	q.now_us = now_us;
	q.vector_weight = ix->vector_weight;
	if ((r = search_ready(ix, &c, app, user, &q, err)) == 0)
		r = search_run(ix->kw, ix->vec, ix->sessions, &c, app, user, &q, ret_json, err);
	search_req_clear(&q);
	return r;
}

int32_t index_search_results(indexer *ix, const memd_call *call, const char *app,
			     const char *user, const index_query *iq, void **ret_results,
			     memd_error *err)
{
	memd_call c = { .struct_size = sizeof(c) };
	search_req q = { 0 };
	int32_t r;

	if (call)
		c = *call;
	if (!iq->query || !*iq->query || strlen(iq->query) > SEARCH_QUERY_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "query: required, 1..%d bytes",
				      SEARCH_QUERY_MAX);
	if (iq->k < 1 || iq->k > SEARCH_K_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "k: must be 1..%d", SEARCH_K_MAX);
	q.mode = iq->mode ? search_mode(iq->mode) : ix->default_mode;
	if (!q.mode)
		return memd_error_set(err, MEMD_EINVAL, 0, "mode: must be keyword, vector or hybrid");
	q.query = iq->query;
	q.k = iq->k;
	q.sources = (iq->sources & INDEX_SOURCE_EVENTS ? SEARCH_EVENTS : 0) |
		    (iq->sources & INDEX_SOURCE_MEMORIES ? SEARCH_MEMORIES : 0);
	if (!q.sources)
		q.sources = SEARCH_EVENTS | SEARCH_MEMORIES;
	q.now_us = iq->now_us;
	q.exclude_session = iq->exclude_session;
	q.exclude_ids = iq->exclude_ids;
	q.n_exclude = iq->exclude_ids ? iq->n_exclude : 0;
	q.min_score = iq->min_score;
	if ((r = search_ready(ix, &c, app, user, &q, err)) < 0)
		return r;
	return search_results(ix->kw, ix->vec, ix->sessions, &c, app, user, &q, ret_results, err);
}

/* ---- rebuild ----------------------------------------------------------------------- */

typedef struct progress {
	memd_progress_fn fn;
	void *ud;
	const volatile int32_t *cancel; /* may be NULL */
	uint64_t done, total;
	int64_t next_us;
} progress;

/* Report now if due (or if force); nonzero if the caller asked to stop
 * (through the callback or the cancel flag, looked at every time). */
static int report(progress *p, int force)
{
	int64_t now = feed_monotonic_us();
	if (p->cancel && *p->cancel)
		return 1;
	if (!p->fn || (!force && now < p->next_us))
		return 0;
	p->next_us = now + (int64_t)INDEX_PROGRESS_MS * US_PER_MS;
	return p->fn(p->ud, p->done, p->total) != 0;
}

static int32_t rebuild_all(indexer *ix, progress *p, memd_error *err)
{
	memd_call call = { .struct_size = sizeof(call), .cancel = p->cancel };
	feed_tailer *tails[2] = { ix->kw_tail, ix->vec_tail };
	int64_t head;
	int32_t r;

	if ((r = read_head(ix, &call, &head, err)) < 0)
		return r;
	if (ix->vec_tail) {
		feed_tailer_pause(ix->vec_tail);
		r = vec_cursor_save(ix->vec, 0, err);
		if (r == 0)
			feed_tailer_reset(ix->vec_tail, 0, head);
		feed_tailer_resume(ix->vec_tail);
		if (r < 0)
			return r;
	}
	if (ix->kw_tail) {
		feed_tailer_pause(ix->kw_tail);
		kw_clear(ix->kw);
		ix->kw_applied = 0;
		ix->n_anchors = ix->next_anchor = 0;
		feed_tailer_reset(ix->kw_tail, 0, head);
		feed_tailer_resume(ix->kw_tail);
	}
	hostsvc_log(ix->svc, MEMD_LOG_INFO, "index", "rebuilding every index from the feed (head %lld)",
		    (long long)head);
	p->total = head > 0 ? (uint64_t)head * ((ix->kw_tail != NULL) + (ix->vec_tail != NULL)) : 0;
	for (;;) {
		int pending = 0;
		p->done = 0;
		for (size_t i = 0; i < 2; i++) {
			int64_t deadline = feed_monotonic_us() + (int64_t)INDEX_PROGRESS_MS * US_PER_MS;
			int64_t pos;
			if (!tails[i])
				continue;
			r = feed_tailer_wait(tails[i], head, deadline, err);
			if (r == MEMD_ETIMEDOUT)
				pending = 1;
			else if (r < 0)
				return r;
			pos = feed_tailer_position(tails[i]);
			p->done += r == 0 && head > 0 ? (uint64_t)head : pos > 0 ? (uint64_t)pos : 0;
		}
		if (!pending)
			break;
		if (report(p, 0))
			return memd_error_set(err, MEMD_ECANCELED, 0,
					      "rebuild canceled (the indexes go on catching up)");
	}
	p->done = p->total;
	report(p, 1);
	return 0;
}

/* Session ids of (app, user) and their event count (last_seq). */
typedef struct session_list {
	char **ids;
	size_t n, cap;
	int64_t last_created;
	uint64_t events;
	uint32_t page;
} session_list;

static int32_t collect_session(void *ud, const memd_session *s)
{
	session_list *l = ud;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : INDEX_REBUILD_SESSIONS;
		char **ids = realloc(l->ids, cap * sizeof(*ids));
		if (!ids)
			return MEMD_ENOMEM;
		l->ids = ids;
		l->cap = cap;
	}
	if (!(l->ids[l->n] = strdup(s->id)))
		return MEMD_ENOMEM;
	l->n++;
	l->page++;
	l->last_created = s->created_us;
	l->events += s->last_seq > 0 ? (uint64_t)s->last_seq : 0;
	return 0;
}

static void session_list_clear(session_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->ids[i]);
	free(l->ids);
}

static int32_t list_sessions(indexer *ix, const memd_scope *sc, session_list *l,
			     const volatile int32_t *cancel, memd_error *err)
{
	memd_call call = { .struct_size = sizeof(call), .cancel = cancel };
	memd_session_sink sink = { sizeof(sink), l, collect_session };

	for (;;) {
		memd_session_query q = {
			.struct_size = sizeof(q),
			.flags = MEMD_SQ_INCLUDE_ARCHIVED,
			.limit = INDEX_REBUILD_SESSIONS,
			.before_created_us = l->n ? l->last_created : 0,
			.before_id = l->n ? l->ids[l->n - 1] : NULL,
		};
		int32_t r;
		l->page = 0;
		if ((r = store_session_list(ix->sessions, &call, sc, &q, &sink, err)) < 0)
			return r == MEMD_ENOMEM ? memd_error_set(err, r, 0, "out of memory") : r;
		if (l->page < INDEX_REBUILD_SESSIONS)
			return 0;
	}
}

typedef struct load_ctx {
	feed_batch *b;
	const memd_scope *sc;
} load_ctx;

static int32_t collect_event(void *ud, const memd_event *e)
{
	load_ctx *c = ud;
	return feed_batch_add_event(c->b, c->sc->app, c->sc->user, c->sc->session, e);
}

/* The records of recs[0..n) at feed positions <= upto, in order: recs
 * itself when all are, else copied into scratch (n records); their count.
 * Not a prefix: an event made visible again after a hide has a newer
 * position than the events after it. The later ones are the tailers'. */
static size_t keep_upto(const feed_rec *recs, size_t n, int64_t upto, feed_rec *scratch,
			const feed_rec **ret)
{
	size_t k = 0;

	while (k < n && recs[k].position <= upto)
		k++;
	*ret = recs;
	if (k == n)
		return n;
	memcpy(scratch, recs, k * sizeof(*recs));
	for (size_t i = k + 1; i < n; i++)
		if (recs[i].position <= upto)
			scratch[k++] = recs[i];
	*ret = scratch;
	return k;
}

static void pause_tailers(indexer *ix)
{
	if (ix->kw_tail)
		feed_tailer_pause(ix->kw_tail);
	if (ix->vec_tail)
		feed_tailer_pause(ix->vec_tail);
}

static void resume_tailers(indexer *ix)
{
	if (ix->vec_tail)
		feed_tailer_resume(ix->vec_tail);
	if (ix->kw_tail)
		feed_tailer_resume(ix->kw_tail);
}

static int32_t rebuild_session(indexer *ix, const memd_scope *sc, int64_t kw_upto, int64_t vec_upto,
			       feed_batch *b, progress *p, memd_error *err)
{
	memd_call call = { .struct_size = sizeof(call), .cancel = p->cancel };
	load_ctx ctx = { b, sc };
	memd_event_sink sink = { sizeof(sink), &ctx, collect_event };
	int64_t after = 0;

	for (;;) {
		memd_event_query q = {
			.struct_size = sizeof(q),
			.after_seq = after,
			.limit = INDEX_REBUILD_PAGE,
		};
		const feed_rec *recs = NULL, *sel = NULL;
		feed_rec *scratch = NULL;
		size_t n = 0;
		int32_t r;

		/* A page is read and applied with the tailers paused: a delete
		 * of the session committed after the read has its feed record
		 * past their positions, so it is applied after the page and
		 * removes it; one committed before makes the read not find the
		 * session. Between pages the tailers go on (other users'
		 * searches need not wait for the whole rebuild). */
		pause_tailers(ix);
		feed_batch_reset(b);
		r = store_events_load(ix->sessions, &call, sc, &q, &sink, err);
		if (r == 0) {
			recs = feed_batch_records(b);
			n = feed_batch_count(b);
			if (n && !(scratch = malloc(n * sizeof(*scratch))))
				r = MEMD_ENOMEM;
		}
		if (r == 0 && n && ix->kw) {
			size_t k = keep_upto(recs, n, kw_upto, scratch, &sel), done = 0;
			r = kw_feed_apply(ix->kw, sel, k, &done, err);
		}
		if (r == 0 && n && ix->vec) {
			size_t k = keep_upto(recs, n, vec_upto, scratch, &sel);
			r = vec_apply(ix->vec, sel, k, err);
		}
		resume_tailers(ix);
		free(scratch);
		if (r == MEMD_ENOTFOUND)
			return 0; /* deleted meanwhile: its DELETE record follows */
		if (r < 0)
			return r == MEMD_ENOMEM ? memd_error_set(err, r, 0, "out of memory") : r;
		if (!n)
			return 0;
		/* Units are events times indexes, as the total counts them. */
		p->done += n * (uint64_t)((ix->kw != NULL) + (ix->vec != NULL));
		if (report(p, 0))
			return memd_error_set(err, MEMD_ECANCELED, 0, "rebuild canceled");
		after = recs[n - 1].seq;
		if (n < INDEX_REBUILD_PAGE)
			return 0;
	}
}

/* Memories of a user being listed for a rebuild: into b, the keyset of
 * the last one kept. */
typedef struct memory_page {
	feed_batch *b;
	uint32_t n;
	int64_t last_created;
	char last_id[MEMD_ID_MAX + 1];
} memory_page;

static int32_t collect_memory(void *ud, const memd_memory *m)
{
	memory_page *pg = ud;
	size_t len = m->id ? strlen(m->id) : 0;

	if (!len || len > MEMD_ID_MAX)
		return 0; /* a store bug; nothing to index it by */
	if (feed_batch_add_memory(pg->b, m) < 0)
		return MEMD_ENOMEM;
	pg->n++;
	pg->last_created = m->created_us;
	memcpy(pg->last_id, m->id, len + 1);
	return 0;
}

/* Re-read the memories of sc's (app, user) into the indexes, a page at a
 * time with the tailers paused as rebuild_session does; records past
 * kw_upto / vec_upto are the tailers'. Every memory is read, expired
 * ones too (searches leave those out by the clock). A store without
 * memories has none. */
static int32_t rebuild_memories(indexer *ix, const memd_scope *sc, int64_t kw_upto,
				int64_t vec_upto, feed_batch *b, progress *p, memd_error *err)
{
	memd_call call = { .struct_size = sizeof(call), .cancel = p->cancel };
	memory_page pg = { .b = b };
	memd_memory_sink sink = { sizeof(sink), &pg, collect_memory };
	char after_id[MEMD_ID_MAX + 1];

	for (;;) {
		memd_memory_query q = { .struct_size = sizeof(q), .limit = INDEX_REBUILD_PAGE };
		const feed_rec *recs = NULL, *sel = NULL;
		feed_rec *scratch = NULL;
		size_t n = 0;
		int32_t r;

		if (pg.n) {
			/* After the last page's last memory: a copy of its id,
			 * since collect_memory rewrites last_id while the store
			 * may still read the query's. */
			memcpy(after_id, pg.last_id, sizeof(after_id));
			q.before_created_us = pg.last_created;
			q.before_id = after_id;
		}
		pause_tailers(ix);
		feed_batch_reset(b);
		pg.n = 0;
		r = store_memory_list(ix->sessions, &call, sc, &q, &sink, err);
		if (r == 0) {
			recs = feed_batch_records(b);
			n = feed_batch_count(b);
			if (n && !(scratch = malloc(n * sizeof(*scratch))))
				r = MEMD_ENOMEM;
		}
		if (r == 0 && n && ix->kw) {
			size_t k = keep_upto(recs, n, kw_upto, scratch, &sel), done = 0;
			r = kw_feed_apply(ix->kw, sel, k, &done, err);
		}
		if (r == 0 && n && ix->vec) {
			size_t k = keep_upto(recs, n, vec_upto, scratch, &sel);
			r = vec_apply(ix->vec, sel, k, err);
		}
		resume_tailers(ix);
		free(scratch);
		if (r == MEMD_ENOTSUP)
			return 0;
		if (r < 0)
			return r == MEMD_ENOMEM ? memd_error_set(err, r, 0, "out of memory") : r;
		if (report(p, 0))
			return memd_error_set(err, MEMD_ECANCELED, 0, "rebuild canceled");
		if (pg.n < INDEX_REBUILD_PAGE)
			return 0;
	}
}

static int32_t rebuild_user(indexer *ix, const char *app, const char *user, progress *p,
			    memd_error *err)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = app, .user = user };
	session_list l = { 0 };
	feed_batch *b = feed_batch_new();
	int64_t kw_upto = 0, vec_upto = 0;
	int32_t r = 0;

	if (!b)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	/* The user's searches are refused until the rebuild ends. */
	pthread_mutex_lock(&ix->rb_mu);
	ix->rb_app = app;
	ix->rb_user = user;
	pthread_mutex_unlock(&ix->rb_mu);
	/* Paused tailers: every record up to their positions is applied, none
	 * after. The user's entries are dropped; their events up to there are
	 * rebuilt from the sessions, the tailers do the rest (they resume at
	 * once and go on between the pages). */
	if (ix->kw_tail)
		kw_upto = feed_tailer_pause(ix->kw_tail);
	if (ix->vec_tail)
		vec_upto = feed_tailer_pause(ix->vec_tail);
	if (ix->kw)
		kw_delete_user(ix->kw, app, user);
	if (ix->vec)
		r = vec_remove_user(ix->vec, app, user, err);
	resume_tailers(ix);
	if (r == 0)
		r = list_sessions(ix, &sc, &l, p->cancel, err);
	p->total = l.events * ((ix->kw != NULL) + (ix->vec != NULL));
	for (size_t i = 0; r == 0 && i < l.n; i++) {
		sc.session = l.ids[i];
		r = rebuild_session(ix, &sc, kw_upto, vec_upto, b, p, err);
	}
	sc.session = NULL;
	if (r == 0)
		r = rebuild_memories(ix, &sc, kw_upto, vec_upto, b, p, err);
	pause_tailers(ix);
	if (r < 0 && ix->kw) {
		/* The user's keyword entries are incomplete: replay the whole
		 * (in-memory) keyword index from the feed instead. */
		kw_clear(ix->kw);
		ix->kw_applied = 0;
		ix->n_anchors = ix->next_anchor = 0;
		feed_tailer_reset(ix->kw_tail, 0, 0);
	}
	if (r == MEMD_ECANCELED && ix->vec) {
		/* Canceled: the user's vector entries are incomplete too, and
		 * only the feed can make them whole without finishing the
		 * rebuild. Replay it as a full rebuild does (upserts are
		 * idempotent, so the other users' entries stay as they are). */
		memd_error e2 = { 0 };
		if (vec_cursor_save(ix->vec, 0, &e2) < 0)
			hostsvc_log(ix->svc, MEMD_LOG_WARN, "index",
				    "cannot reset the vector cursor (the replay is lost if memd stops before its first batch): %s",
				    e2.msg);
		feed_tailer_reset(ix->vec_tail, 0, feed_tailer_position(ix->vec_tail));
		hostsvc_log(ix->svc, MEMD_LOG_INFO, "index",
			    "rebuild of %.64s/%.64s canceled: the indexes replay the feed", app, user);
	} else if (r < 0) {
		hostsvc_log(ix->svc, MEMD_LOG_WARN, "index",
			    "rebuild of %.64s/%.64s failed (%s): replaying the keyword index; the vector index of this user is incomplete until a rebuild succeeds",
			    app, user, err->msg);
	}
	resume_tailers(ix);
	pthread_mutex_lock(&ix->rb_mu);
	ix->rb_app = ix->rb_user = NULL;
	pthread_mutex_unlock(&ix->rb_mu);
	if (r == 0) {
		p->done = p->total;
		report(p, 1);
	}
	session_list_clear(&l);
	feed_batch_free(b);
	return r;
}

int32_t index_rebuild(indexer *ix, const char *app, const char *user,
		      const volatile int32_t *cancel, memd_progress_fn fn, void *userdata,
		      memd_error *err)
{
	progress p = { fn, userdata, cancel, 0, 0, 0 };
	int32_t r;

	if (!ix->kw && !ix->vec)
		return memd_error_set(err, MEMD_EINVAL, 0, "no index is enabled (index.keyword, index.vector)");
	if ((app == NULL) != (user == NULL))
		return memd_error_set(err, MEMD_EINVAL, 0, "rebuild: give both app and user, or neither");
	pthread_mutex_lock(&ix->rebuild_lock);
	r = app ? rebuild_user(ix, app, user, &p, err) : rebuild_all(ix, &p, err);
	pthread_mutex_unlock(&ix->rebuild_lock);
	return r;
}
