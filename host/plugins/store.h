/* SPDX-License-Identifier: MIT */
/*
 * store: the host's handle on one session-store plugin instance. Each
 * store_* call forwards to the plugin's op with the same arguments and:
 *  - returns MEMD_ENOTSUP with a message if the plugin lacks the op;
 *  - serializes calls when the plugin is not MEMD_PLUGIN_THREADSAFE;
 *  - guarantees err is filled (code, message prefixed with the instance
 *    name) whenever the result is negative;
 *  - times the call and counts failures by code (store_render_metrics);
 *  - hands the caller's sinks host-sized records: a session, event (also
 *    a feed record's), lane or inbox item a store of an older minor
 *    delivers shorter is copied
 *    into a zeroed host-sized record first (members it lacks read as
 *    NULL/0), so no reader looks past what the store wrote.
 * Argument contracts are those of memd_store_ops in api/memd/store.h.
 */
#ifndef MEMD_HOST_STORE_H
#define MEMD_HOST_STORE_H

#include <memd/plugin.h>

#include "plugins/loader.h"
#include "util/prom.h"

/* The metrics store_render_metrics writes. */
#define STORE_METRIC_DURATION "memd_store_call_duration_seconds"
#define STORE_METRIC_ERRORS "memd_store_call_errors_total"
/* Prefix of the usage counters: memd_lane_usage_input_tokens_total... */
#define STORE_METRIC_USAGE "memd_lane_usage_"
#define STORE_METRIC_WRITES "memd_store_write_requests_total"
#define STORE_METRIC_GROUPS "memd_store_write_groups_total"

typedef struct store store;

/* Wrap inst (which must be a store; MEMD_EABI otherwise). On success the
 * store owns inst. */
int32_t store_new(loader_instance *inst, store **ret, memd_error *err);
/* Destroy the instance; accepts NULL. */
void store_free(store *s);
const char *store_name(const store *s);
/* The ABI minor the store was built for (its descriptor's abi_minor):
 * members of call structs added in a later minor are not read by it, so
 * the host sets them only for a store that knows them (append usage and op:
 * minor >= 2). */
uint32_t store_minor(const store *s);

int32_t store_session_create(store *s, const memd_call *call, const memd_session *in,
			     const char *state_delta_json, const memd_session_sink *out,
			     memd_error *err);
int32_t store_session_get(store *s, const memd_call *call, const memd_scope *scope,
			  const memd_session_sink *out, memd_error *err);
int32_t store_session_list(store *s, const memd_call *call, const memd_scope *scope,
			   const memd_session_query *q, const memd_session_sink *out,
			   memd_error *err);
int32_t store_session_update(store *s, const memd_call *call, const memd_scope *scope,
			     const memd_session_update *p, const memd_session_sink *out,
			     memd_error *err);
int32_t store_session_delete(store *s, const memd_call *call, const memd_scope *scope,
			     memd_error *err);
int32_t store_append(store *s, const memd_call *call, const memd_scope *scope,
		     const memd_append *a, memd_append_result *res, memd_error *err);
int32_t store_events_load(store *s, const memd_call *call, const memd_scope *scope,
			  const memd_event_query *q, const memd_event_sink *out, memd_error *err);
int32_t store_state_get(store *s, const memd_call *call, const memd_scope *scope,
			const memd_text_sink *out, memd_error *err);
int32_t store_artifact_put(store *s, const memd_call *call, const memd_scope *scope,
			   const memd_artifact *a, int64_t *ret_version, memd_error *err);
int32_t store_artifact_get(store *s, const memd_call *call, const memd_scope *scope,
			   const char *name, int64_t version, const memd_artifact_sink *out,
			   memd_error *err);
int32_t store_artifact_list(store *s, const memd_call *call, const memd_scope *scope,
			    const memd_artifact_sink *out, memd_error *err);
int32_t store_artifact_versions(store *s, const memd_call *call, const memd_scope *scope,
				const char *name, const memd_artifact_sink *out, memd_error *err);
int32_t store_artifact_delete(store *s, const memd_call *call, const memd_scope *scope,
			      const char *name, memd_error *err);
int32_t store_user_delete(store *s, const memd_call *call, const memd_scope *scope,
			  memd_error *err);
int32_t store_feed_read(store *s, const memd_call *call, int64_t after, uint32_t limit,
			const memd_feed_sink *out, memd_error *err);
int32_t store_feed_head(store *s, const memd_call *call, int64_t *ret_position, memd_error *err);
int32_t store_cursor_get(store *s, const memd_call *call, const char *name,
			 int64_t *ret_position, memd_error *err);
int32_t store_cursor_set(store *s, const memd_call *call, const char *name, int64_t position,
			 memd_error *err);
/* A store without ping is taken to be reachable. */
int32_t store_ping(store *s, const memd_call *call, memd_error *err);

/* Lanes (since 1.2; MEMD_ENOTSUP naming the store and op when the store
 * lacks them, e.g. a 1.0 or 1.1 store). lane_write, lane_delete,
 * lane_prune, inbox_put and inbox_take count as writes for store_health
 * (a prune that removed nothing only when it fails). */
/* store_lane_get: session_out (NULL: not asked) gets the session the lane
 * names, read with the lane (see lane_get in store.h). */
int32_t store_lane_get(store *s, const memd_call *call, const memd_scope *scope,
		       const char *key, const memd_lane_sink *out,
		       const memd_session_sink *session_out, memd_error *err);
int32_t store_lane_write(store *s, const memd_call *call, const memd_lane_write *w,
			 const memd_lane_sink *out, memd_error *err);
int32_t store_lane_list(store *s, const memd_call *call, const memd_lane_query *q,
			const memd_lane_sink *out, memd_error *err);
int32_t store_lane_delete(store *s, const memd_call *call, const memd_scope *scope,
			  const char *key, memd_error *err);
int32_t store_lane_prune(store *s, const memd_call *call, int64_t updated_before_us,
			 uint32_t limit, uint32_t *ret_count, memd_error *err);
int32_t store_inbox_put(store *s, const memd_call *call, const memd_scope *scope,
			const char *key, const memd_inbox_item *item, uint32_t *ret_depth,
			memd_error *err);
int32_t store_inbox_take(store *s, const memd_call *call, const memd_scope *scope,
			 const char *key, const char *turn_id, int64_t now_us,
			 const memd_inbox_sink *out, uint32_t *ret_depth, memd_error *err);
int32_t store_inbox_list(store *s, const memd_call *call, const memd_scope *scope,
			 const char *key, const memd_inbox_sink *out, memd_error *err);
int32_t store_session_list_ended(store *s, const memd_call *call, int64_t ended_before_us,
				 uint32_t limit, const memd_session_sink *out, memd_error *err);

/* Transcripts (since 1.2; MEMD_ENOTSUP naming the store and op when the
 * store lacks them). store_append refuses an append with an op
 * (MEMD_ENOTSUP, nothing written) for a store of minor < 2, which would
 * not read it. */
int32_t store_operation_list(store *s, const memd_call *call, const memd_scope *scope,
			     uint32_t limit, const memd_operation_sink *out, memd_error *err);
int32_t store_operation_get(store *s, const memd_call *call, const memd_scope *scope,
			    const char *id, const memd_operation_sink *out, memd_error *err);
int32_t store_state_history(store *s, const memd_call *call, const memd_scope *scope,
			    const memd_state_history_query *q, const memd_state_change_sink *out,
			    memd_error *err);

/* Memories (since 1.3; MEMD_ENOTSUP naming the store and op when the
 * store lacks them, e.g. a 1.2 store). Each forwards to the op of the
 * same name in store.h. memory_commit and memory_expire count as writes
 * for store_health (an expire that removed nothing only when it fails:
 * its success says nothing about the storage). */
int32_t store_memory_commit(store *s, const memd_call *call, const memd_scope *scope,
			    const memd_memory_commit *c, const memd_memory_sink *out,
			    memd_error *err);
int32_t store_memory_get(store *s, const memd_call *call, const memd_scope *scope,
			 const char *id, int64_t now_us, const memd_memory_sink *out,
			 memd_error *err);
int32_t store_memory_list(store *s, const memd_call *call, const memd_scope *scope,
			  const memd_memory_query *q, const memd_memory_sink *out,
			  memd_error *err);
int32_t store_memory_history(store *s, const memd_call *call, const memd_scope *scope,
			     const char *id, const memd_memory_change_sink *out, memd_error *err);
int32_t store_memory_expire(store *s, const memd_call *call, int64_t now_us, uint32_t limit,
			    uint32_t *ret_count, memd_error *err);
/* store_session_list_pending: sessions with events memory extraction has
 * not read (see memd_pending_query). */
int32_t store_session_list_pending(store *s, const memd_call *call,
				   const memd_pending_query *q, const memd_session_sink *out,
				   memd_error *err);

/* Checkpoints and tasks (since 1.5; MEMD_ENOTSUP naming the store and op
 * when the store lacks them, e.g. a 1.4 store). Each forwards to the op
 * of the same name in store.h; records reach the sinks host-sized. The
 * puts and deletes count as writes for store_health (checkpoint_delete
 * and checkpoint_expire only when they removed something or failed).
 * store_checkpoint_delete's ret_count may be NULL. */
int32_t store_checkpoint_put(store *s, const memd_call *call, const memd_checkpoint *c,
			     int create_session, int64_t now_us, int *ret_created_session,
			     memd_error *err);
int32_t store_checkpoint_put_writes(store *s, const memd_call *call, const memd_scope *scope,
				    const memd_checkpoint_writes *w, memd_error *err);
int32_t store_checkpoint_get(store *s, const memd_call *call, const memd_scope *scope,
			     const char *ns, const char *id, int64_t now_us,
			     const memd_checkpoint_sink *out, memd_error *err);
int32_t store_checkpoint_list(store *s, const memd_call *call, const memd_scope *scope,
			      const memd_checkpoint_query *q, const memd_checkpoint_sink *out,
			      memd_error *err);
int32_t store_checkpoint_delete(store *s, const memd_call *call, const memd_scope *scope,
				const char *ns, uint32_t *ret_count, memd_error *err);
int32_t store_checkpoint_resumable(store *s, const memd_call *call,
				   const memd_resumable_query *q, const memd_checkpoint_sink *out,
				   memd_error *err);
int32_t store_checkpoint_expire(store *s, const memd_call *call, int64_t now_us,
				uint32_t limit, uint32_t *ret_count, memd_error *err);
int32_t store_task_put(store *s, const memd_call *call, const memd_task *t, uint32_t flags,
		       int64_t expected_version, int64_t now_us, const memd_task_sink *out,
		       memd_error *err);
int32_t store_task_get(store *s, const memd_call *call, const char *app, const char *id,
		       const memd_task_sink *out, memd_error *err);
int32_t store_task_list(store *s, const memd_call *call, const memd_task_query *q,
			const memd_task_sink *out, memd_error *err);
int32_t store_task_delete(store *s, const memd_call *call, const char *app, const char *id,
			  int64_t expected_version, memd_error *err);

/* Why the storage of a store is degraded. */
typedef struct store_health_report {
	uint32_t flags;                  /* MEMD_ERROR_STORAGE_* */
	int64_t since_ns;                /* store_clock_ns() when the write failed */
	char msg[MEMD_ERROR_MSG_MAX];    /* that write's error message */
} store_health_report;

/* 1 (and *ret filled) when the last write of s that said anything about
 * its storage failed with a MEMD_ERROR_STORAGE_* flag (full disk,
 * read-only, I/O error): s stays degraded until one of its writes
 * succeeds. 0 when healthy. Thread-safe. */
int store_health(store *s, store_health_report *ret);
/* The monotonic clock store_health_report.since_ns is read from (ns). */
int64_t store_clock_ns(void);

/* Append s's STORE_METRIC_DURATION{store,op} series to b: a histogram of
 * the time in each plugin op called so far (for ops with a sink, the time
 * includes the caller's sink). No HELP/TYPE lines: the caller writes them
 * once for all stores. */
void store_render_durations(const store *s, prom_buf *b);
/* Append the usage s took (the usage of appends and lane writes that
 * succeeded: turn ends, appends with usage) as counters
 * STORE_METRIC_USAGE<field>_total{app}, cost in USD; apps past a bound
 * share app="_other". */
void store_render_usage(store *s, prom_buf *b);
/* Append s's STORE_METRIC_WRITES{store} and STORE_METRIC_GROUPS{store}
 * samples to b (the store's stats op: its writes and the transactions
 * they shared; writes / groups is the mean commit group); nothing for a
 * store without the op or when it fails. */
void store_render_stats(store *s, prom_buf *b);
/* Append s's STORE_METRIC_ERRORS{store,op,code} series to b: failed calls
 * by error name. No HELP/TYPE lines. */
void store_render_errors(const store *s, prom_buf *b);

/* Fill err for a negative result r from a component named name, keeping a
 * message the callee wrote and prefixing it with name. Returns r. Shared
 * with the other plugin wrappers. */
int32_t store_fix_error(const char *name, const char *op, int32_t r, memd_error *err);

#endif
