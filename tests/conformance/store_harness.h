/* SPDX-License-Identifier: MIT */
/*
 * store_harness: what the store conformance suite needs around one
 * session-store plugin instance, created exactly as the host creates it
 * (host/plugins/loader.h + host/config/config.h), plus sinks that copy what they receive.
 *
 * Environment:
 *   MEMD_CONFORMANCE_PLUGIN   plugin name (e.g. memory, sqlite); required
 *   MEMD_CONFORMANCE_CONFIG   YAML map for the instance; "@TMPDIR@" is
 *                             replaced by a fresh directory per test and
 *                             "@TESTID@" by a token unique to the test
 *                             ([a-z0-9_], for a database or schema name
 *                             of a server-backed store: every test expects
 *                             an empty store). Default "{plugin: <name>}".
 *   MEMD_CONFORMANCE_DURABLE  "1" if data must survive closing and
 *                             reopening the instance on the same config
 *   MEMD_PLUGIN_PATH          ':'-separated plugin directories
 *
 * Every helper that fails an expectation fails the running Criterion test;
 * the op wrappers instead return the op's code and leave the message in
 * st->err, so tests can assert on error codes.
 */
#ifndef MEMD_TESTS_STORE_HARNESS_H
#define MEMD_TESTS_STORE_HARNESS_H

#include <memd/plugin.h>
#include <pthread.h>

#include "config/config.h"
#include "plugins/loader.h"

/* One instance of the plugin under test. */
typedef struct conf_store {
	loader_plugin *plugin;
	loader_instance *inst;
	config_node *cfg;
	const memd_store_ops *ops;
	void *h;                 /* loader_instance_handle() */
	char *tmpdir;            /* removed by conf_close */
	char *config_text;       /* after @TMPDIR@ substitution */
	int durable;             /* MEMD_CONFORMANCE_DURABLE=1 */
	int threadsafe;          /* descriptor has MEMD_PLUGIN_THREADSAFE */
	memd_error err;          /* of the last wrapped op */
	uint64_t rows_read;      /* every wrapped op adds to this */
} conf_store;

/* 1 when a and b are both NULL or the same string, else 0. */
int conf_str_eq(const char *a, const char *b);

/* Fail the running Criterion test unless got and want (either may be
 * NULL) are the same string; what names the value in the message. */
#define conf_assert_str_or_null(got, want, what)                                          \
	cr_assert(conf_str_eq((got), (want)), "%s is '%s', expected '%s'", (what),        \
		  (got) ? (got) : "(null)", (want) ? (want) : "(null)")

/* Load the plugin, make a temp dir and create an instance; fails the test
 * on any error. conf_close undoes everything (accepts NULL). */
conf_store *conf_open(void);
void conf_close(conf_store *st);
/* Destroy and recreate the instance on the same config (and temp dir). */
void conf_reopen(conf_store *st);

/* A call context whose rows_read adds to st->rows_read. */
memd_call conf_call(conf_store *st);
memd_scope conf_scope(const char *app, const char *user, const char *session);

/* ---- copies of delivered records -------------------------------------- */

typedef struct conf_session {
	uint32_t flags;
	char *app, *user, *id, *title, *metadata_json;
	int64_t created_us, updated_us, version, last_seq, summary_seq;
	/* since 1.2 (zero/NULL when the record is shorter) */
	char *lane_key, *origin_json, *origin_platform, *previous_session, *start_reason,
		*end_reason;
	int64_t ended_us;
	memd_usage usage;        /* the session's sums */
	int64_t message_count;   /* since 1.2 (transcripts) */
	int64_t memory_seq;      /* since 1.3 (memories) */
} conf_session;

typedef struct conf_sessions {
	conf_session *v;
	size_t n, cap;
} conf_sessions;

/* Deep copies of memd_event (strings owned, NULL kept NULL). */
typedef struct conf_events {
	memd_event *v;
	size_t n, cap;
} conf_events;

typedef struct conf_artifact {
	char *name, *mime_type;
	int64_t version, created_us;
	uint64_t size;
	void *data;              /* NULL when none was delivered */
} conf_artifact;

typedef struct conf_artifacts {
	conf_artifact *v;
	size_t n, cap;
} conf_artifacts;

typedef struct conf_feed_rec {
	uint32_t kind;
	int64_t position;
	char *app, *user, *session;
	memd_event event;        /* kind EVENT: deep copy; else zeroed */
	memd_memory memory;      /* kinds MEMORY, MEMORY_DELETE: deep copy; else zeroed */
} conf_feed_rec;

typedef struct conf_feed {
	conf_feed_rec *v;
	size_t n, cap;
} conf_feed;

/* A deep copy of memd_lane (strings owned, NULL kept NULL). */
typedef struct conf_lane {
	memd_lane l;
} conf_lane;

typedef struct conf_lanes {
	conf_lane *v;
	size_t n, cap;
} conf_lanes;

typedef struct conf_inbox_item {
	uint32_t mode, in_slot;
	char *id, *body_json;
	int64_t created_us, position;
} conf_inbox_item;

typedef struct conf_inbox {
	conf_inbox_item *v;
	size_t n, cap;
} conf_inbox;

void conf_session_clear(conf_session *s);
void conf_lane_clear(conf_lane *l);
void conf_lanes_clear(conf_lanes *l);
void conf_inbox_clear(conf_inbox *l);
void conf_sessions_clear(conf_sessions *l);
void conf_events_clear(conf_events *l);
void conf_artifacts_clear(conf_artifacts *l);
void conf_feed_clear(conf_feed *l);

/* ---- input events ----------------------------------------------------- */

/* A heap event: content_json {"parts":[{"type":"text","text":text}]},
 * author "tester", the given role, text and timestamp; other optional
 * fields NULL. Free with conf_event_free (accepts NULL). */
memd_event *conf_event_new(const char *id, const char *role, const char *text,
			   int64_t timestamp_us);
void conf_event_free(memd_event *e);

/* A feed_read limit larger than any feed a test builds. */
#define CONF_FEED_ALL 1000000u

/* ---- op wrappers (return the op's code; message in st->err) ----------- */

int32_t conf_session_create(conf_store *st, const char *app, const char *user, const char *id,
			    const char *title, int64_t created_us, const char *state_delta,
			    conf_session *ret);
int32_t conf_session_get(conf_store *st, const char *app, const char *user, const char *id,
			 conf_session *ret);
int32_t conf_session_list(conf_store *st, const char *app, const char *user, uint32_t flags,
			  uint32_t limit, int64_t before_created_us, const char *before_id,
			  conf_sessions *out);
int32_t conf_session_update(conf_store *st, const char *app, const char *user, const char *id,
			    const memd_session_update *p, conf_session *ret);
int32_t conf_session_delete(conf_store *st, const char *app, const char *user, const char *id);

/* Create s as given (every member, 1.2 ones included); ret may be NULL. */
int32_t conf_session_create_full(conf_store *st, const memd_session *s, conf_session *ret);
/* session_list with a full query (q->struct_size is set here). */
int32_t conf_session_list_q(conf_store *st, const char *app, const char *user,
			    const memd_session_query *q, conf_sessions *out);

typedef struct conf_append_opts {
	const char *delta;
	uint32_t flags;
	int64_t expected_version;
	const char *title_if_unset;
	int64_t now_us;
	const memd_usage *usage;  /* since 1.2 */
	uint32_t struct_size;     /* of the memd_append passed; 0 = sizeof */
	const memd_transcript_op *op; /* since 1.2 (transcripts) */
} conf_append_opts;

/* seqs has n slots (may be NULL when n is 0); o may be NULL. */
int32_t conf_append(conf_store *st, const memd_scope *sc, memd_event *const *evs, uint32_t n,
		    const conf_append_opts *o, int64_t *seqs, memd_append_result *ret);
/* Append count single-role "user" events with ids "<prefix><i>" for i in
 * [from, from + count), in one batch; asserts success. */
void conf_append_simple(conf_store *st, const memd_scope *sc, const char *prefix, int from,
			int count, int64_t now_us);

int32_t conf_events_load(conf_store *st, const memd_scope *sc, uint32_t flags, int64_t after_seq,
			 int64_t before_seq, int64_t after_time_us, uint32_t limit,
			 conf_events *out);
/* events_load with a full query (q->struct_size is set here). */
int32_t conf_events_load_q(conf_store *st, const memd_scope *sc, const memd_event_query *q,
			   conf_events *out);
/* *ret is malloc'd JSON text. */
int32_t conf_state_get(conf_store *st, const memd_scope *sc, char **ret);
/* Assert the merged state of sc equals expected_json (as JSON values). */
void conf_assert_state(conf_store *st, const memd_scope *sc, const char *expected_json);

int32_t conf_artifact_put(conf_store *st, const memd_scope *sc, const char *name,
			  const char *mime, const void *data, uint64_t size, int64_t created_us,
			  int64_t *ret_version);
int32_t conf_artifact_get(conf_store *st, const memd_scope *sc, const char *name,
			  int64_t version, conf_artifacts *out);
int32_t conf_artifact_list(conf_store *st, const memd_scope *sc, conf_artifacts *out);
int32_t conf_artifact_versions(conf_store *st, const memd_scope *sc, const char *name,
			       conf_artifacts *out);
int32_t conf_artifact_delete(conf_store *st, const memd_scope *sc, const char *name);

int32_t conf_user_delete(conf_store *st, const char *app, const char *user);
int32_t conf_feed_read(conf_store *st, int64_t after, uint32_t limit, conf_feed *out);
/* MEMD_ENOTSUP when the plugin has no feed_head. */
int32_t conf_feed_head(conf_store *st, int64_t *ret);
/* The highest position feed_read(0, CONF_FEED_ALL) delivers (0 = none);
 * asserts success and ascending positions. */
int64_t conf_feed_last(conf_store *st);
int32_t conf_cursor_get(conf_store *st, const char *name, int64_t *ret);
int32_t conf_cursor_set(conf_store *st, const char *name, int64_t position);

/* ---- lanes (since 1.2): MEMD_ENOTSUP when the plugin lacks the op ---- */

/* Does the plugin provide every lane op? When not: the test is skipped
 * for a plugin of ABI minor < 2 unless MEMD_CONFORMANCE_LANES=1 (this
 * repository's stores all must provide them), and fails otherwise. */
void conf_require_lanes(conf_store *st);

int32_t conf_lane_get(conf_store *st, const char *app, const char *user, const char *key,
		      conf_lane *ret);
/* lane_get with session_out: ret (may be NULL) gets the lane; *ret_session
 * the session delivered with it and *ret_delivered how many sessions were
 * delivered (0 or 1; more fails the test). */
int32_t conf_lane_get_session(conf_store *st, const char *app, const char *user,
			      const char *key, conf_lane *ret, conf_session *ret_session,
			      int *ret_delivered);
/* w->struct_size is set here; ret may be NULL. */
int32_t conf_lane_write(conf_store *st, memd_lane_write *w, conf_lane *ret);
/* q->struct_size is set here. */
int32_t conf_lane_list(conf_store *st, memd_lane_query *q, conf_lanes *out);
int32_t conf_lane_delete(conf_store *st, const char *app, const char *user, const char *key);
int32_t conf_lane_prune(conf_store *st, int64_t updated_before_us, uint32_t limit,
			uint32_t *ret_count);
int32_t conf_inbox_put(conf_store *st, const char *app, const char *user, const char *key,
		       const char *id, uint32_t mode, const char *body_json, int64_t created_us,
		       uint32_t *ret_depth);
/* ret gets the item taken (ret->id NULL when the inbox was empty). */
int32_t conf_inbox_take(conf_store *st, const char *app, const char *user, const char *key,
			const char *turn_id, int64_t now_us, conf_inbox_item *ret,
			uint32_t *ret_depth);
int32_t conf_inbox_list(conf_store *st, const char *app, const char *user, const char *key,
			conf_inbox *out);
int32_t conf_session_list_ended(conf_store *st, int64_t ended_before_us, uint32_t limit,
				conf_sessions *out);

/* ---- transcripts (since 1.2): MEMD_ENOTSUP when the plugin lacks the op */

/* Does the plugin provide operation_list, operation_get and
 * state_history? A store with none of them is skipped (its transcript
 * operations are not there yet) unless MEMD_CONFORMANCE_TRANSCRIPTS=1
 * says it must have them; one with only some of them fails. */
void conf_require_transcripts(conf_store *st);

/* A deep copy of memd_operation (strings owned, NULL kept NULL). */
typedef struct conf_operation {
	memd_operation o;
} conf_operation;

typedef struct conf_operations {
	conf_operation *v;
	size_t n, cap;
} conf_operations;

/* A deep copy of memd_state_change. */
typedef struct conf_state_change {
	memd_state_change c;
} conf_state_change;

typedef struct conf_state_changes {
	conf_state_change *v;
	size_t n, cap;
} conf_state_changes;

void conf_operation_clear(conf_operation *o);
void conf_operations_clear(conf_operations *l);
void conf_state_changes_clear(conf_state_changes *l);

int32_t conf_operation_list(conf_store *st, const memd_scope *sc, uint32_t limit,
			    conf_operations *out);
/* ret gets the operation (cleared first). */
int32_t conf_operation_get(conf_store *st, const memd_scope *sc, const char *id,
			   conf_operation *ret);
/* q->struct_size is set here. */
int32_t conf_state_history(conf_store *st, const memd_scope *sc, memd_state_history_query *q,
			   conf_state_changes *out);

/* ---- memories (since 1.3): MEMD_ENOTSUP when the plugin lacks the op -- */

/* Does the plugin provide every memory op (memory_commit, memory_get,
 * memory_list, memory_history, memory_expire, session_list_pending)? A
 * store with none of them is skipped unless MEMD_CONFORMANCE_MEMORIES=1
 * says it must have them; one with only some of them fails. */
void conf_require_memories(conf_store *st);

/* A deep copy of memd_memory (strings owned, NULL kept NULL). */
typedef struct conf_memory {
	memd_memory m;
} conf_memory;

typedef struct conf_memories {
	conf_memory *v;
	size_t n, cap;
} conf_memories;

/* A deep copy of memd_memory_change (memory, actor, reason owned). */
typedef struct conf_memory_change {
	uint32_t op;
	memd_memory memory;
	char *actor, *reason;
	int64_t at_us;
} conf_memory_change;

typedef struct conf_memory_changes {
	conf_memory_change *v;
	size_t n, cap;
} conf_memory_changes;

void conf_memory_clear(conf_memory *m);
void conf_memories_clear(conf_memories *l);
void conf_memory_changes_clear(conf_memory_changes *l);

/* memory_commit on (app, user); c->struct_size is set here; out (may be
 * NULL) gets every memory delivered, in order. */
int32_t conf_memory_commit(conf_store *st, const char *app, const char *user,
			   memd_memory_commit *c, conf_memories *out);
/* ret (may be NULL) gets the memory (cleared first); exactly one must be
 * delivered on success. */
int32_t conf_memory_get(conf_store *st, const char *app, const char *user, const char *id,
			int64_t now_us, conf_memory *ret);
/* q->struct_size is set here. */
int32_t conf_memory_list(conf_store *st, const char *app, const char *user,
			 memd_memory_query *q, conf_memories *out);
int32_t conf_memory_history(conf_store *st, const char *app, const char *user, const char *id,
			    conf_memory_changes *out);
int32_t conf_memory_expire(conf_store *st, int64_t now_us, uint32_t limit,
			   uint32_t *ret_count);
/* q->struct_size is set here. */
int32_t conf_session_list_pending(conf_store *st, memd_pending_query *q, conf_sessions *out);

/* ---- checkpoints (since 1.5): MEMD_ENOTSUP when the plugin lacks the op */

/* Does the plugin provide every checkpoint op (checkpoint_put,
 * checkpoint_put_writes, checkpoint_get, checkpoint_list,
 * checkpoint_delete, checkpoint_resumable, checkpoint_expire)? A store
 * with none of them is skipped unless MEMD_CONFORMANCE_CHECKPOINTS=1 says
 * it must have them; one with only some of them fails. */
void conf_require_checkpoints(conf_store *st);

/* Does the plugin keep the task paths of pending writes (ABI 1.6)? A
 * plugin of ABI minor < 6 keeps none and is skipped unless
 * MEMD_CONFORMANCE_TASK_PATHS=1 says it must keep them. */
void conf_require_task_paths(conf_store *st);

/* A deep copy of memd_checkpoint_write (strings and value owned). The
 * sinks of these wrappers set both write and task_write: task_path is the
 * path a store delivered through task_write (since 1.6), NULL when it
 * called write. */
typedef struct conf_ckwrite {
	char *task_id, *channel, *type;
	char *task_path;
	int64_t idx;
	void *value;             /* value_size bytes (+ a NUL), never NULL */
	uint64_t value_size;
} conf_ckwrite;

/* A deep copy of memd_checkpoint (strings and payload owned, NULL kept
 * NULL) with the writes delivered after it. */
typedef struct conf_checkpoint {
	memd_checkpoint c;
	conf_ckwrite *w;
	size_t n_w, cap_w;
} conf_checkpoint;

typedef struct conf_checkpoints {
	conf_checkpoint *v;
	size_t n, cap;
} conf_checkpoints;

void conf_checkpoint_clear(conf_checkpoint *c);
void conf_checkpoints_clear(conf_checkpoints *l);

/* c->struct_size must be set by the caller; ret_created may be NULL. */
int32_t conf_checkpoint_put(conf_store *st, const memd_checkpoint *c, int create_session,
			    int64_t now_us, int *ret_created);
/* w->struct_size is set here. */
int32_t conf_checkpoint_put_writes(conf_store *st, const memd_scope *sc,
				   memd_checkpoint_writes *w);
/* ret (may be NULL) gets the checkpoint (cleared first), with its writes
 * when with_writes (else the sink's write and task_write are NULL and none
 * may come);
 * exactly one checkpoint must be delivered on success. */
int32_t conf_checkpoint_get(conf_store *st, const memd_scope *sc, const char *ns,
			    const char *id, int64_t now_us, int with_writes, conf_checkpoint *ret);
/* q->struct_size is set here. */
int32_t conf_checkpoint_list(conf_store *st, const char *app, const char *user,
			     memd_checkpoint_query *q, int with_writes, conf_checkpoints *out);
/* ret_count may be NULL (the op then gets NULL). */
int32_t conf_checkpoint_delete(conf_store *st, const memd_scope *sc, const char *ns,
			       uint32_t *ret_count);
/* q->struct_size is set here; the sink's write and task_write are NULL. */
int32_t conf_checkpoint_resumable(conf_store *st, memd_resumable_query *q,
				  conf_checkpoints *out);
int32_t conf_checkpoint_expire(conf_store *st, int64_t now_us, uint32_t limit,
			       uint32_t *ret_count);

/* ---- tasks (since 1.5): MEMD_ENOTSUP when the plugin lacks the op ----- */

/* Does the plugin provide task_put, task_get, task_list and task_delete?
 * A store with none of them is skipped unless MEMD_CONFORMANCE_TASKS=1
 * says it must have them; one with only some of them fails. */
void conf_require_tasks(conf_store *st);

/* A deep copy of memd_task (strings owned, NULL kept NULL). */
typedef struct conf_task {
	memd_task t;
} conf_task;

typedef struct conf_tasks {
	conf_task *v;
	size_t n, cap;
} conf_tasks;

void conf_task_clear(conf_task *t);
void conf_tasks_clear(conf_tasks *l);

/* t->struct_size must be set by the caller; ret (may be NULL) gets the
 * task delivered (cleared first); exactly one must come on success. */
int32_t conf_task_put(conf_store *st, const memd_task *t, uint32_t flags,
		      int64_t expected_version, int64_t now_us, conf_task *ret);
/* ret as for conf_task_put. */
int32_t conf_task_get(conf_store *st, const char *app, const char *id, conf_task *ret);
/* q->struct_size is set here. */
int32_t conf_task_list(conf_store *st, memd_task_query *q, conf_tasks *out);
int32_t conf_task_delete(conf_store *st, const char *app, const char *id,
			 int64_t expected_version);

/* A text sink that keeps a malloc'd copy of the last text delivered in
 * *dst (freeing the one before); the caller frees *dst. */
memd_text_sink conf_text_sink(char **dst);

/* A second instance of the plugin on the same config (and temp dir): for
 * a durable store it sees the same data, as a second memd process would.
 * conf_twin_close destroys it (accepts NULL). */
void *conf_twin_open(conf_store *st);
void conf_twin_close(void *twin);
/* The op handle of a twin (for calling st->ops->* on it). */
void *conf_twin_handle(void *twin);

/* One thread of a race (conf_race_round): the instance it calls and who
 * it is; it waits on start right before its op and leaves the op's code
 * and error in result and err. */
typedef struct conf_racer {
	void *h;                 /* the instance this thread calls */
	const memd_store_ops *ops;
	pthread_barrier_t *start;
	int thread;
	int round;
	int32_t result;
	memd_error err;
} conf_racer;

/* Instances for racing threads in h: for a durable store a second
 * instance on the same data (another process, in effect, *ret_twin, for
 * conf_twin_close) beside the first; else the one instance twice
 * (*ret_twin NULL), which must then be THREADSAFE (the test is skipped
 * when it is not). */
void conf_race_instances(conf_store *st, void **ret_twin, void *h[2]);
/* Most threads in one round of a race. */
#define CONF_RACE_MAX 8
/* Round round of a race: n (<= CONF_RACE_MAX) threads run fn on racers[0, n) (racer t calls
 * h[t % 2]), released together by the barrier fn waits on; returns once
 * every one has finished, their results in racers. */
void conf_race_round(conf_store *st, void *h[2], int round, void *(*fn)(void *),
		     conf_racer *racers, int n);

/* JSON equality of two texts (both must parse). */
int conf_json_equal(const char *a, const char *b);

#endif
