/* SPDX-License-Identifier: MIT */
/*
 * index: the search indexes of one memd (docs/architecture.md, Search). Owns
 * the keyword index (keyword.h) and the vector indexer (vector.h) as
 * configured, each fed by its own feed tailer thread (feed.h) from the
 * session store's change feed; answers searches (search.h) after making sure
 * the indexes have caught up with the feed head as it was when the search
 * began (so a client reads its own writes); rebuilds.
 *
 * The keyword index lives in memory. With index.keyword.snapshot set it
 * is saved to that file (kw_snapshot.h) in the background and at close,
 * and a start loads the file and replays only the feed after it; without
 * a usable snapshot it is rebuilt from the whole feed. A snapshot is used
 * only if it fits the store: the store's id (durable cursor
 * INDEX_SNAPSHOT_ID_CURSOR, a random number set by the first snapshot)
 * matches, its feed position is not past the store's feed head, the
 * events it names as anchors are where it says in the feed, and the
 * analyzer is the same; otherwise one line is logged and the index is
 * rebuilt. The vector index keeps its position in the session store's
 * durable cursor "vector:<store>". Indexing never fails an append: a
 * failing indexer retries with backoff, and searches that need it report
 * MEMD_EUNAVAIL (retryable) meanwhile.
 */
#ifndef MEMD_INDEX_INDEX_H
#define MEMD_INDEX_INDEX_H

#include <memd/memd.h>
#include <memd/plugin.h>

#include "plugins/hostsvc.h"
#include "keyword.h"
#include "plugins/loader.h"
#include "config/settings.h"
#include "plugins/store.h"
#include "vector.h"

/* How long a search waits for the indexes to catch up when its call has
 * no deadline. */
#define INDEX_WAIT_MS 10000
/* How long closing waits for the vector index to catch up. */
#define INDEX_CLOSE_FLUSH_MS 5000
/* How often a rebuild reports progress. */
#define INDEX_PROGRESS_MS 200
/* Feed records per batch of the keyword tailer; the vector tailer reads
 * the embedder's batch times INDEX_VECTOR_BATCHES. */
#define INDEX_KEYWORD_BATCH 512
#define INDEX_VECTOR_BATCHES 4
/* Events per page a scoped rebuild loads; sessions per page it lists. */
#define INDEX_REBUILD_PAGE 256
#define INDEX_REBUILD_SESSIONS 1000

/* Keyword snapshots. The background writer saves the index when at
 * least INDEX_SNAPSHOT_RECORDS feed records were applied since the last
 * snapshot and INDEX_SNAPSHOT_MIN_INTERVAL_MS passed since it, or when
 * any were and INDEX_SNAPSHOT_MAX_AGE_MS passed; it looks every
 * INDEX_SNAPSHOT_CHECK_MS. Indexing (not searching) pauses while the
 * index is copied to the file; the fsyncs happen after. Closing saves
 * it when it is ahead of the file. */
#define INDEX_SNAPSHOT_RECORDS 100000
#define INDEX_SNAPSHOT_MIN_INTERVAL_MS 30000
#define INDEX_SNAPSHOT_MAX_AGE_MS 600000
#define INDEX_SNAPSHOT_CHECK_MS 1000
/* The session store's durable cursor holding its snapshot identity. */
#define INDEX_SNAPSHOT_ID_CURSOR "keyword:snapshot-id"

typedef struct indexer indexer;

/* Open the indexes set configures and start their tailers. vector_store
 * is the instance named by index.vector.store (borrowed; ignored unless
 * index.vector.enabled); sessions, svc and set must outlive the indexer.
 * Fails (nothing left running) on a bad embedder config, a vector store
 * of the wrong kind or dimension (MEMD_ECONFLICT), ENOMEM, or if a
 * thread cannot start. */
int32_t index_open(const settings *set, store *sessions, const loader_instance *vector_store,
		   hostsvc *svc, indexer **ret, memd_error *err);
/* Let the vector index catch up (at most INDEX_CLOSE_FLUSH_MS), stop the
 * tailers, save the keyword snapshot (when configured and the index is
 * ahead of the file; a failure is logged), free. Accepts NULL. */
void index_close(indexer *ix);
/* Something was written: wake the tailers. Accepts NULL. */
void index_notify(indexer *ix);

/* The session name under which memories' vectors are stored (see
 * vector.h): no session id can contain '/'. */
#define INDEX_MEMORY_SESSION VEC_MEMORY_SESSION

/* memd_search (api/memd/memd.h) in scope (app, user), validated by the
 * caller. call may carry a deadline for the catch-up wait and a
 * rows_read counter (keyword postings examined are added). now_us: the
 * facade's clock (memories expired then never come out). */
int32_t index_search(indexer *ix, const memd_call *call, const char *app, const char *user,
		     const char *body_json, int64_t now_us, char **ret_json, memd_error *err);

/* index_query.sources */
#define INDEX_SOURCE_EVENTS   0x1u
#define INDEX_SOURCE_MEMORIES 0x2u

/* A search from inside memd (recall into a context, the neighbours of a
 * candidate memory in extraction). */
typedef struct index_query {
	const char *query;           /* required, non-empty */
	uint32_t k;                  /* 1..1000 */
	const char *mode;            /* "keyword" | "vector" | "hybrid"; NULL = index.default_mode */
	uint32_t sources;            /* INDEX_SOURCE_*; 0 = both */
	/* Events left out (those already in a context): events of
	 * exclude_session (NULL = of any session) whose id is one of
	 * exclude_ids[0..n_exclude). Borrowed. */
	const char *exclude_session;
	const char *const *exclude_ids;
	size_t n_exclude;
	/* Results scoring below are left out (0 = none). Scores are the
	 * mode's: BM25 (keyword), cosine similarity (vector) or the fused
	 * score (hybrid, 0..1; search.h). */
	double min_score;
	int64_t now_us;              /* the facade's clock: expired memories never come out */
} index_query;

/* Search (app, user) as memd_search does (waiting for the indexes to
 * catch up, the same errors), but from a struct: *ret_results gets the
 * results as a JSON array (a json_t * the caller json_decrefs) of
 * memd_search's result objects, best first, at most k: {"source":
 * "event", "session_id", "event_id", "seq", "author", "role", "text",
 * "timestamp", "score"} or {"source": "memory", "memory_id", "text",
 * "kind", "topics", "entities", "updated", "score"}. MEMD_EINVAL for a
 * bad query, k or mode (the message names the field), or a mode whose
 * index is not enabled. */
int32_t index_search_results(indexer *ix, const memd_call *call, const char *app,
			     const char *user, const index_query *q, void **ret_results,
			     memd_error *err);

/* memd_index_rebuild: app and user both set (validated) or both NULL.
 * A user's rebuild re-reads the user's sessions' events and the user's
 * memories (a store without memories has none); it pauses the tailers only while it reads and applies a
 * page (INDEX_REBUILD_PAGE events), so that other users' searches do not
 * wait for it; the user's searches fail with MEMD_EUNAVAIL (retryable)
 * until it ends.
 * cancel (may be NULL): once nonzero, the rebuild gives up with
 * MEMD_ECANCELED at its next progress check (its store calls see it
 * too), as when progress returns nonzero. A canceled full rebuild has
 * reset the cursors: the indexes go on catching up from the feed. A
 * canceled user rebuild makes the keyword index, and the vector index
 * (its durable cursor set to 0), replay the feed, so they end up whole,
 * as after a full rebuild. */
int32_t index_rebuild(indexer *ix, const char *app, const char *user,
		      const volatile int32_t *cancel, memd_progress_fn progress, void *userdata,
		      memd_error *err);

/* Change the background snapshot schedule (for tests and benchmarks; the
 * defaults are the INDEX_SNAPSHOT_* above): a snapshot is due when at
 * least records feed records were applied since the last one and
 * min_interval_ms passed, or when any were and max_age_ms passed; the
 * writer looks every check_ms (> 0). Accepts NULL (and an indexer
 * without snapshots: nothing to do). */
void index_snapshot_schedule(indexer *ix, uint64_t records, int64_t min_interval_ms,
			     int64_t max_age_ms, int64_t check_ms);

/* Keyword index size (zeros when keyword search is disabled). */
void index_keyword_stats(indexer *ix, kw_stats *ret);

#endif
