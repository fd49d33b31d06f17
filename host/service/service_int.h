/* SPDX-License-Identifier: MIT */
/*
 * service_int: what the files of the libmemd facade share, and nobody
 * else uses: the memd handle itself and the helpers every memd_* call is
 * built from. The files, one a resource:
 *   service.c               memd_open / memd_close, plugin registry, wiring
 *   service_request.c       request plumbing (deadline, scope, body, answer)
 *   service_sessions.c      sessions
 *   service_events.c        event append and list
 *   service_transcripts.c   transcript operations: rewind, rewrite, clear,
 *                           undo (soft delete with an audit trail, state
 *                           restored from its history), operations and
 *                           state history, event pages by role
 *   service_after_append.c  strategies' after_append hook, on the worker
 *   service_lanes.c         lanes: resolve, open (get-or-create), get, list,
 *                           reset, switch, suspend, delete; the clock
 *   service_lanes_turns.c   turns: begin, heartbeat, end (leases, interruptions)
 *   service_lanes_inbox.c   a lane's inbox: put, take, list
 *   service_lanes_watch.c   the lane watcher: expired leases, finalize,
 *                           prune, retention (memd_lanes_sweep)
 *   service_memories.c      long-term memories: create, get, list, update,
 *                           delete, history; expired ones deleted
 *   service_memory_extract.c  memories extracted from sessions
 *                           (memd_memory_extract), the memory worker and
 *                           memd_memories_sweep
 *   service_checkpoints.c   run checkpoints: put, writes, get, list, delete,
 *                           resumable runs; the expiry sweep
 *   service_tasks.c         A2A tasks: put (conditional), get, list, delete
 *   service_context.c       working memory (memd_context)
 *   service_step.c          writes that answer the context after them
 *                           (one round trip per agent step)
 *   service_messages.c      OpenAI chat messages: append, get, context
 *   service_delta.c         a state delta split into stored and temp: keys
 *   service_state.c         state, temp: keys, invocation end
 *   service_artifacts.c     artifacts
 *   service_search.c        search and index rebuild (blocking, or as a job)
 *   service_jobs.c          background jobs: get, list, cancel
 *   service_admin.c         user delete, plugin listing, readiness, metrics
 *   service_config_check.c  `memd config check`, `memd plugins list/check`
 *
 * Errors follow the facade's rule: a negative MEMD_E* code, with err
 * filled (memd_error_set); outputs ret_* are written only on success.
 */
#ifndef MEMD_HOST_SERVICE_INT_H
#define MEMD_HOST_SERVICE_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "json/event_json.h"
#include "plugins/hostsvc.h"
#include "index/index.h"
#include "service/jobs.h"
#include "json/json_out.h"
#include "plugins/loader.h"
#include "service/service.h"
#include "plugins/strategy.h"
#include "service/temp_state.h"
#include "util/prom.h"
#include "util/worker.h"
#include "lanes/lane_policy.h"
#include "lanes/lane_tz.h"

#define US_PER_SEC 1000000LL
/* Room for a config slot's name: "stores.<name>", "apps.<app>.working_memory". */
#define SLOT_NAME_MAX 600

typedef struct lanes_watch lanes_watch;
typedef struct memory_work memory_work;
typedef struct checkpoint_sweep checkpoint_sweep;

typedef struct app_strategy {
	char *app;
	strategy *st;
	const loader_instance *inst; /* borrowed from st, for listings */
} app_strategy;

typedef struct named_store {
	char *name;
	store *st;                   /* session stores */
	loader_instance *other;      /* instances of other kinds, kept for later use */
	const loader_instance *inst; /* borrowed: st's or other */
} named_store;

struct memd {
	settings set;           /* vector_enabled cleared by MEMD_OPEN_NO_VECTOR */
	uint32_t open_flags;    /* memd_options.flags */
	hostsvc *svc;
	temp_state *temp;
	char **search;          /* NULL-terminated plugin search path */
	/* registry of loaded plugins: each .so once, closed last */
	loader_plugin **plugins;
	size_t n_plugins;
	named_store *stores;
	size_t n_stores;
	store *sessions;
	app_strategy *apps;
	size_t n_apps;
	indexer *index;         /* search indexes (host/index/) */
	worker *worker;         /* strategies' after_append, after the append */
	jobs *jobs;             /* background jobs (index rebuilds) */
	lanes_watch *watch;     /* the lane watcher (service_lanes_watch.c) */
	memory_work *memwork;   /* memory extraction (service_memory_extract.c) */
	checkpoint_sweep *ckpt_sweep; /* the checkpoint expiry sweep (service_checkpoints.c) */
	/* memd_set_clock: lane decisions and lane/session times read it */
	pthread_mutex_t clock_lock;
	memd_clock_fn clock_fn; /* NULL = the system clock */
	void *clock_userdata;
	lane_tz_cache *zones;   /* the lanes' reset time zones, loaded at open */
	/* service_set_between_hook (tests): runs between a write and the
	 * context read that answers it */
	service_between_fn between_fn;
	void *between_userdata;
};

/* ---- service.c: plugins and apps ----------------------------------------- */

/* The plugin search path: MEMD_PLUGIN_PATH entries, then extra, then
 * config's (configured), then the install dir; either list may be NULL.
 * NULL-terminated and malloc'd (free with service_free_strv); NULL on
 * ENOMEM. */
char **service_build_search(const char *const *extra, const char *const *configured);
/* Free a NULL-terminated string vector and its strings. Accepts NULL. */
void service_free_strv(char **v);

/* ---- service_admin.c ------------------------------------------------------ */

/* The MEMD_KIND_* bits as a new JSON array of words ("store", "vector",
 * ...); NULL on ENOMEM. */
json_t *service_kinds_json(uint32_t kind);

/* ---- service_request.c: request plumbing --------------------------------- */

/* Wall-clock time, microseconds since the epoch. */
int64_t service_now_us(void);

/* The time every lane decision and lane/session timestamp reads: the
 * clock memd_set_clock set, else service_now_us(). */
int64_t service_clock_us(memd *m);

/* The strategy of app (borrowed from m): its own, else the default app's
 * (SETTINGS_DEFAULT_APP), else NULL. *ret_app is set, always, to the name
 * of the app whose strategy that is (borrowed, the default's name when
 * there is none). */
strategy *service_strategy_for(memd *m, const char *app, const char **ret_app);

/* A call for one facade request: the plugins it reaches get the deadline
 * server.request_timeout_ms from now, so a store that cannot answer in
 * time (a queue behind a stuck writer, an exhausted pool) fails the
 * request with MEMD_ETIMEDOUT (retryable) instead of holding it. */
memd_call service_call_for_request(const memd *m);

/* Sets err to MEMD_ENOMEM "out of memory"; returns MEMD_ENOMEM. */
int32_t service_oom(memd_error *err);

/* Check app and user (and sid unless NULL) as ids, and make them the
 * scope *ret (which borrows the strings). MEMD_EINVAL naming the bad one. */
int32_t service_check_scope(const char *app, const char *user, const char *sid, memd_scope *ret,
			    memd_error *err);

/* Hand o (consumed, NULL meaning a failed build: ENOMEM) to the caller as
 * compact JSON text in *ret_json (malloc'd). */
int32_t service_finish(json_t *o, char **ret_json, memd_error *err);

/* Parse a request body: an object, or {} for NULL/empty. *ret is a new
 * reference. MEMD_EINVAL for text that is not JSON or not an object. */
int32_t service_parse_body(const char *body, json_t **ret, memd_error *err);

/* MEMD_EINVAL "unknown field" for a key of o not in allowed (NULL-ended). */
int32_t service_check_fields(json_t *o, const char *const *allowed, memd_error *err);

/* o's member key: *ret is NULL when it is absent or null, else borrowed
 * from o. MEMD_EINVAL when it is of another type. *ret is set even then
 * (NULL) so a caller may read it after a failure in a chain. */
int32_t service_opt_string_field(json_t *o, const char *key, const char **ret, memd_error *err);
int32_t service_opt_object_field(json_t *o, const char *key, json_t **ret, memd_error *err);

/* The outcome of a read that failed (r < 0) or whose writer jo refused a
 * record. A refused record has a string that is not valid UTF-8: the
 * store returned data memd cannot put in JSON (MEMD_EIO naming the
 * field); the writer's ENOMEM is ENOMEM; its MEMD_ETOOBIG (the answer
 * went over server.max_response_bytes) is MEMD_ETOOBIG with how_to_page,
 * the way to ask for less, in the message; else r, or MEMD_EINTERNAL when
 * r is not negative. Always returns a negative code. */
int32_t service_read_failed(memd *m, const json_out *jo, int32_t r, const char *how_to_page,
			    memd_error *err);

/* ---- service_sessions.c -------------------------------------------------- */

/* The next_cursor of a list ordered newest first by (at_us, id):
 * "<at_us>.<hex of id>", or with activity "a<at_us>.<hex of id>" (the
 * sessions' activity order; a cursor of one order is refused by the
 * other). malloc'd; NULL on ENOMEM. */
char *service_list_cursor_encode(int activity, int64_t at_us, const char *id);
/* Decode cursor c of that order into *ret_created and *ret_id (malloc'd).
 * MEMD_EINVAL "cursor: not a cursor memd returned", MEMD_ENOMEM. */
int32_t service_list_cursor_decode(int activity, const char *c, int64_t *ret_created,
				   char **ret_id, memd_error *err);

/* The session of sc (sc->session set) as a new JSON object in *ret.
 * The store's error (MEMD_ENOTFOUND when there is none), or
 * MEMD_EINTERNAL when the store delivered nothing. */
int32_t service_session_json(memd *m, const memd_call *call, const memd_scope *sc, json_t **ret,
			     memd_error *err);

/* ---- service_events.c: the append shared with memd_state_patch ----------- */

/* Everything an append request owns while it runs. Zero-initialize;
 * service_append_req_clear frees what is set. */
typedef struct service_append_req {
	json_t *body;
	json_t *keep, *temp;
	ej_event_in *in;
	const memd_event **evp;
	size_t n;
	char *delta_text;
	char *title;
	int64_t *seqs;
	memd_usage usage;       /* added to the session's and its lane's sums */
	int has_usage;
	/* A transcript operation done by the append (borrowed; NULL = none);
	 * service_append refuses it (MEMD_ENOTSUP) for a store before 1.2. */
	const memd_transcript_op *op;
	int64_t hidden_count;   /* output: events op hid */
	int64_t unhidden_count; /* output: events op (an undo) made visible */
	int replayed;           /* output: every event id existed, nothing written */
} service_append_req;

/* Free what q holds (not q itself). */
void service_append_req_clear(service_append_req *q);

/* memd_events_append with the result as a new JSON object in *ret. */
int32_t service_events_append(memd *m, const char *app, const char *user, const char *sid,
			      const char *body_json, json_t **ret, memd_error *err);
/* memd_messages_append with the result as a new JSON object in *ret. */
int32_t service_messages_append(memd *m, const char *app, const char *user, const char *sid,
				const char *body_json, json_t **ret, memd_error *err);

/* Append q's n events (evp) with q->delta_text and q->title (title if
 * unset), and q->op when set, to the session of sc in one store
 * transaction, expecting version expected when has_version; then set
 * q->temp's keys for invocation inv (NULL = none), and, unless the append
 * was a replay or changed no event (none added, hidden or unhidden), wake
 * the indexes and queue the strategy's after_append. *ret is a new
 * {"version","seqs","replayed"} object; q->hidden_count, unhidden_count
 * and replayed are set. Allocates q->seqs (q owns it). */
int32_t service_append(memd *m, const memd_scope *sc, service_append_req *q, const char *inv,
		       int has_version, int64_t expected, json_t **ret, memd_error *err);

/* Fill q from a request's events (an array of client events, or NULL)
 * and state delta (an object, or NULL): each event parsed and checked
 * (ej_event_parse; ids unique in the batch; at most
 * server.max_batch_events), the title from the first user message, the
 * delta split into stored and temp: keys. *inout_inv is the request's
 * invocation (may be NULL); when NULL it becomes the first event's.
 * MEMD_EINVAL, MEMD_ETOOBIG, MEMD_ENOMEM; q keeps what it filled either
 * way (service_append_req_clear frees it). */
int32_t service_append_prepare(memd *m, service_append_req *q, json_t *events, json_t *delta,
			       const char **inout_inv, memd_error *err);

/* ---- service_transcripts.c ------------------------------------------------ */

/* Replace the whole transcript of session sid of (app, user) atomically
 * (memd_messages_put): create the session if it does not exist (empty,
 * title and state from the append), then one append that hides every
 * visible event (an operation of kind rewrite, id made here) and adds q's
 * events (q filled as memd_events_append fills it: in/evp/n, delta_text,
 * temp, title), expecting version expected_version when has_version
 * (version 0 for a session this call creates). call: the request's (its
 * deadline); inv: the invocation of q's temp: keys (NULL = none).
 * *ret is a new {"operation": operation | null (a replay: every event id
 * existed, nothing written), "version", "seqs", "hidden_count",
 * "created": bool} object. MEMD_ECONFLICT on a version mismatch (nothing
 * done but the session's creation), MEMD_ENOTSUP for a store before 1.2,
 * the store's other errors. q stays the caller's (service_append_req_clear). */
int32_t service_transcript_rewrite(memd *m, const memd_call *call, const char *app,
				   const char *user, const char *sid, service_append_req *q,
				   const char *inv, int has_version, int64_t expected_version,
				   json_t **ret, memd_error *err);

/* The role names of a comma-separated list ("user,assistant") as a
 * MEMD_ROLE_* mask into *ret (0 for NULL or ""). MEMD_EINVAL naming an
 * unknown role. */
int32_t service_parse_roles(const char *roles, uint32_t *ret, memd_error *err);

/* ---- service_after_append.c ----------------------------------------------- */

/* Where a strategy's hook (after_append, on_session_finalize) puts the
 * events it asks to persist: each is appended to the session of sc on
 * its own (an id made if it has none, author its role if unset, tokens
 * counted), stamped now_us (0 = the wall clock). A failure is logged and
 * returned to the strategy. */
typedef struct service_persist_ctx {
	memd *m;
	const memd_scope *sc;
	int64_t now_us;
} service_persist_ctx;

/* The sink over pc (borrowed: pc must outlive the sink's use). */
memd_event_sink service_persist_sink(service_persist_ctx *pc);

/* The strategy's hook for one session, on a worker thread (single-flight
 * per session): the worker_fn memd_open gives the worker, with m as
 * userdata. Failures are logged and lose nothing: the append is already
 * durable, and the next append runs the hook again. */
void service_after_append_job(void *userdata, const memd_scope *sc);

/* After an acknowledged append: queue the strategy's hook (it runs after
 * the caller has its answer). Does nothing when the app's strategy has
 * none; a failure to queue is logged. */
void service_run_after_append(memd *m, const memd_scope *sc);

/* ---- service_lanes_watch.c ------------------------------------------------ */

/* The app strategy's on_session_finalize for the session of sc (set),
 * on the calling thread but exclusive with the worker's after_append runs
 * for the session; the events it asks for are persisted stamped now_us
 * (0 = the wall clock). 0 when the strategy has no such op (or answers
 * MEMD_ENOTSUP); else its error, or MEMD_ECANCELED once memd is closing. */
int32_t service_finalize_strategy(memd *m, const memd_scope *sc, int64_t now_us, memd_error *err);

/* memd_open: the watcher's state, and its thread running a pass every
 * lanes.watch_interval_s (none when 0). MEMD_ENOMEM, MEMD_EIO (no
 * thread), a zone cache or HTTP client failure; service_watch_free
 * cleans up what was set up. */
int32_t service_watch_start(memd *m, memd_error *err);
/* Stop the thread (a pass in progress gives up at its next store or
 * network call) and wait for it. Accepts a memd without a watcher. */
void service_watch_stop(memd *m);
/* service_watch_stop, then free the state. Accepts a memd without one. */
void service_watch_free(memd *m);
/* The watcher's counters (memd_lanes_*_total) in Prometheus text. */
void service_watch_metrics(memd *m, prom_buf *b);

/* ---- service_memories.c: long-term memories ------------------------------- */

/* Who changed a memory, as its history says (memd_memory_change.actor). */
#define SERVICE_ACTOR_API "api"             /* memd_memory_* and REST */
#define SERVICE_ACTOR_MCP "mcp"             /* the MCP tools */
#define SERVICE_ACTOR_EXTRACTOR "extractor" /* memory extraction */
#define SERVICE_ACTOR_RETENTION "retention" /* memory_expire (the store writes it) */

/* memd_memory_create, _update and _delete (api/memd/memd.h: same bodies,
 * checks, results and errors) with the history's actor given (borrowed;
 * one of SERVICE_ACTOR_*, or another non-empty name), and for a delete
 * the history's reason (NULL = none; an update takes it from its body's
 * "reason"). Each is one conditional store commit stamped with the facade
 * clock (memd_set_clock) and wakes the indexes. MEMD_ENOTSUP naming the
 * store when it has no memories (ABI below 1.3). */
int32_t service_memory_create(memd *m, const char *app, const char *user, const char *body_json,
			      const char *actor, char **ret_json, int *ret_created,
			      memd_error *err);
int32_t service_memory_update(memd *m, const char *app, const char *user, const char *id,
			      const char *body_json, const char *actor, char **ret_json,
			      memd_error *err);
int32_t service_memory_delete(memd *m, const char *app, const char *user, const char *id,
			      int64_t expected_version, const char *actor, const char *reason,
			      memd_error *err);

/* Delete one bounded batch of the memories (of every app and user) that
 * have expired by the facade clock: history op "expire" by "retention",
 * a MEMORY_DELETE feed record each (the indexes are woken). *ret_count
 * is how many. MEMD_ENOTSUP naming the store when it has no memories;
 * the store's other errors (nothing counted then). */
int32_t service_memories_expire(memd *m, uint32_t *ret_count, memd_error *err);

/* ---- service_memory_extract.c ----------------------------------------------- */

/* memd_open: the extraction state (each app's openai extractor client)
 * and, when some app extracts and the session store has memories, the
 * memory worker's thread. MEMD_ENOMEM, MEMD_EIO (no thread), a client's
 * MEMD_EINVAL; service_memory_free cleans up what was set up. */
int32_t service_memory_start(memd *m, memd_error *err);
/* Stop the worker (a run in progress gives up at its next store or
 * network call) and wait for it. Accepts a memd without one. */
void service_memory_stop(memd *m);
/* service_memory_stop, then free the state. Accepts a memd without one. */
void service_memory_free(memd *m);
/* After an acknowledged append of the seqs first_seq..last_seq to the
 * session of sc: when they pass a multiple of the app's every_events, ask
 * the worker to look at it (extracted when every_events are unread). A
 * queue push at most: never a store call, never a failure. */
void service_memory_after_append(memd *m, const memd_scope *sc, int64_t first_seq,
				 int64_t last_seq);
/* A lane's session of sc was finalized: ask the worker to extract what
 * is unread when the app's memory.extract.on_finalize is set. */
void service_memory_on_finalize(memd *m, const memd_scope *sc);
/* The extraction counters (memd_memory_*_total) in Prometheus text. */
void service_memory_metrics(memd *m, prom_buf *b);

/* ---- service_checkpoints.c: run checkpoints --------------------------------- */

/* memd_open: when checkpoints.sweep_interval_s > 0 and the session store
 * is of ABI 1.5 or later, the expiry sweep's thread, deleting expired
 * checkpoints every interval. 0, or the thread's start failure. */
int32_t service_checkpoints_start(memd *m, memd_error *err);
/* Stop the sweep's thread (a pass in progress gives up at its next store
 * call) and free it. Accepts a memd without one. */
void service_checkpoints_free(memd *m);

/* ---- service_lanes.c: lanes (shared with turns, inbox and the watcher) ---- */

/* Conditional lane writes that lose a race are re-read and re-decided up
 * to this many times; then the call fails with MEMD_ECONFLICT, retryable. */
#define SERVICE_LANE_TRIES 16
/* Consecutive interrupted turns that suspend a lane (stuck-loop escalation). */
#define SERVICE_LANE_MAX_INTERRUPTIONS 3
/* The resume reason of a turn whose lease ran out (its holder died). */
#define SERVICE_LANE_LEASE_EXPIRED "restart_interrupted"

/* A lane as the store delivered it, with copies of its strings (l's
 * pointers point at them). Zero-initialize; service_lane_clear frees. */
typedef struct service_lane {
	memd_lane l;
	char *own[9];
} service_lane;

/* Free what sl holds and zero it; accepts NULL. */
void service_lane_clear(service_lane *sl);

/* Read the lane (app, user of sc; key) into *ret (cleared first).
 * MEMD_ENOTFOUND (message naming the lane and what to do) when there is
 * none; MEMD_ENOTSUP naming the store when it has no lanes. */
int32_t service_lane_read(memd *m, const memd_call *call, const memd_scope *sc, const char *key,
			  service_lane *ret, memd_error *err);

/* The lanes settings of app (its own, else the default app's). */
const settings_lanes *service_lanes_settings(memd *m, const char *app);

/* The reset policy of a lane of app whose origin is platform and
 * chat_type (either may be NULL: no override on it matches) into *ret
 * (strings and zone borrowed from m). MEMD_ENOTFOUND/MEMD_EINVAL if its
 * time zone cannot be loaded (the zones are loaded at memd_open, so only
 * a zone file removed since then gets here). */
int32_t service_lane_policy(memd *m, const char *app, const char *platform,
			    const char *chat_type, lane_reset_policy *ret, memd_error *err);

/* service_lane_policy for lane l, by its origin's platform and chat_type. */
int32_t service_lane_policy_of(memd *m, const memd_lane *l, lane_reset_policy *ret,
			       memd_error *err);

/* The lane JSON object of l (memd.h "lane"); NULL on ENOMEM. */
json_t *service_lane_json(const memd_lane *l);

/* Record an interrupted turn on w (a lane about to be written): the turn
 * is cleared; unless the lane is suspended (never marked pending), the
 * interruption is counted and the lane is marked resume_pending with
 * reason (borrowed: must outlive w's write) at now_us, or, at the
 * SERVICE_LANE_MAX_INTERRUPTIONS-th in a row, suspended instead. */
void service_lane_interrupt(memd_lane *w, const char *reason, int64_t now_us);

/* If lane cur (as read, version cur->version) has a turn whose lease
 * ended at or before now_us, record it as interrupted
 * (SERVICE_LANE_LEASE_EXPIRED) with one conditional lane write, and set
 * *ret_written to 1; else write nothing and set it to 0. MEMD_ECONFLICT
 * when the lane changed since it was read (re-read it and decide again);
 * the store's other errors. */
int32_t service_lane_record_expired(memd *m, const memd_call *call, const memd_lane *cur,
				    int64_t now_us, int *ret_written, memd_error *err);

/* The last activity of lane l as open judges it: the later of the
 * lane's updated_us (opens, turns) and its session's (appends), into
 * *ret_us; the lane's alone when the session is gone. The store's
 * errors. */
int32_t service_lane_last_activity(memd *m, const memd_call *call, const memd_lane *l,
				   int64_t *ret_us, memd_error *err);

/* One conditional lane write of w (expected_version etc. set by the
 * caller): the stored lane into *ret (cleared first; may be NULL). */
int32_t service_lane_write(memd *m, const memd_call *call, const memd_lane_write *w,
			   service_lane *ret, memd_error *err);

/* What a lane change decides from the lane as read (cur) at now: l starts
 * as a copy of cur (its strings borrowed from cur, or from ctx) and w as
 * an empty write; the decider changes them and returns 0 to write, or a
 * negative code (said in err) that ends the change without writing and
 * without a retry. service_lane_change sets w's expected_version, lane
 * and now_us. */
typedef int32_t (*service_lane_decide_fn)(void *ctx, const memd_lane *cur, memd_lane *l,
					  memd_lane_write *w, int64_t now, memd_error *err);

/* One change of lane key of sc: read it, decide (decide, ctx), write it
 * expecting the version read; a write that lost a race is re-read and
 * re-decided, at most SERVICE_LANE_TRIES times, then MEMD_ECONFLICT
 * (retryable). The stored lane into *ret (cleared first; may be NULL).
 * The decider's errors, the store's. */
int32_t service_lane_change(memd *m, const memd_call *call, const memd_scope *sc,
			    const char *key, service_lane_decide_fn decide, void *ctx,
			    service_lane *ret, memd_error *err);

/* Check the time zone of every reset policy in s (every app's and its
 * overrides') loads into zones; each one that does not is added to d as
 * "file:line: <key>.timezone: <why>". Returns the number of problems. */
size_t service_lanes_check_zones(const settings *s, lane_tz_cache *zones, config_diag *d);

/* ---- service_messages.c: OpenAI chat messages ------------------------------ */

/* The events of a messages body ({"messages": [...], "format"?:
 * "openai" (default) | "events"}) as a new array of client event objects
 * in *ret_events: the messages mapped (json/openai_msgs.h), or, with
 * format "events", the messages array itself. MEMD_EINVAL naming the
 * message and field, MEMD_ENOMEM. */
int32_t service_messages_events(json_t *body, json_t **ret_events, memd_error *err);

/* The context strategy st makes of the session of sc (as of view; NULL
 * = now, strategy_context_view) as OpenAI messages:
 * a new {"format": "openai", "strategy", "tokens", "messages"} object in
 * *ret; tool results whose call is outside the window are left out (and
 * their tokens). tee (may be NULL) sees every summary and event the
 * strategy delivers, before they are gathered; its error stops the read.
 * The strategy's or the store's errors, MEMD_ENOMEM. */
int32_t service_context_openai(memd *m, const memd_call *call, const memd_scope *sc,
			       strategy *st, const strategy_view *view,
			       const memd_context_sink *tee, json_t **ret, memd_error *err);

/* o (consumed; NULL = ENOMEM) as compact JSON text in *ret_json, unless
 * it is longer than server.max_response_bytes: MEMD_ETOOBIG naming the
 * size and the limit, then how_to_page. */
int32_t service_finish_bounded(memd *m, json_t *o, const char *how_to_page, char **ret_json,
			       memd_error *err);

/* ---- service_delta.c: state deltas --------------------------------------- */

/* Split a state delta object into what the store keeps and temp: keys.
 * Both outputs are new objects (caller decrefs), written only on success.
 * MEMD_EINVAL for a key that is empty, too long, not UTF-8, or a bare
 * "temp:". */
int32_t service_split_delta(json_t *delta, json_t **ret_store, json_t **ret_temp,
			    memd_error *err);

/* Set temp's keys (borrowed) in m's temp: state for the session of sc,
 * written by invocation inv (NULL = none: only the TTL drops them).
 * 0 or MEMD_ENOMEM; keys set before a failure stay set. */
int32_t service_apply_temp(memd *m, const memd_scope *sc, const char *inv, json_t *temp,
			   memd_error *err);

#endif
