/* SPDX-License-Identifier: MIT */
/*
 * plugin_util: helpers shared by memd's own store plugins (linked
 * statically into each; not part of the ABI). State-delta parsing and the
 * merged-state view, so every store applies api/memd/store.h's key rules
 * identically.
 */
#ifndef MEMD_PLUGIN_UTIL_H
#define MEMD_PLUGIN_UTIL_H

#include <memd/plugin.h>
#include <pthread.h>

/* Where a state key lives. */
#define PU_SCOPE_SESSION 0 /* plain key */
#define PU_SCOPE_APP     1 /* "app:" */
#define PU_SCOPE_USER    2 /* "user:" */
#define PU_SCOPE_COUNT   3

/* Called once per key of a delta, in document order. key is the bare key
 * (prefix removed); value_json is the compact JSON value, or NULL when the
 * delta's value is null (delete). Return 0 or a negative MEMD_E* to stop. */
typedef int32_t (*pu_state_fn)(void *userdata, int32_t scope, const char *key,
			       const char *value_json);

/* Parse delta_json (a JSON object; NULL or "" means no delta) and call fn
 * for each key. Fails with MEMD_EINVAL (not an object, an empty key or bare
 * key, a "temp:" key) before calling fn at all, so a bad delta changes
 * nothing. Returns fn's first nonzero result otherwise. */
int32_t pu_state_delta_foreach(const char *delta_json, pu_state_fn fn, void *userdata,
			       memd_error *err);

/* Builds the merged state view: "app:" keys, then "user:" keys, then the
 * session's plain keys, each key once (the last add wins). */
typedef struct pu_state_builder pu_state_builder;

/* NULL on ENOMEM. */
pu_state_builder *pu_state_builder_new(void);
/* value_json must be valid JSON (as stored from a delta). MEMD_EINVAL if
 * not, MEMD_ENOMEM. */
int32_t pu_state_builder_add(pu_state_builder *b, int32_t scope, const char *key,
			     const char *value_json, memd_error *err);
/* Emit the merged object as compact JSON text to out. */
int32_t pu_state_builder_finish(pu_state_builder *b, const memd_text_sink *out,
				memd_error *err);
/* Accepts NULL. */
void pu_state_builder_free(pu_state_builder *b);

/* 0 if id is 1..MEMD_ID_MAX bytes without control characters (store.h's
 * id rule), else MEMD_EINVAL naming what ("app", "event 3 id", ...). */
int32_t pu_check_id(const char *what, const char *id, memd_error *err);

/* pu_check_id of scope's app and user, and of its session when
 * need_session; MEMD_EINVAL if scope is NULL or its struct_size does not
 * reach session. */
int32_t pu_check_scope(const memd_scope *scope, int need_session, memd_error *err);

/* pu_check_id, and no '/', backslash or ".." (store.h's artifact-name
 * rule: names stay safe as file names). */
int32_t pu_check_artifact_name(const char *name, memd_error *err);

/* The checks every store makes of an append before it takes a lock, so a
 * bad batch writes nothing: scope with a session, known flags, events and
 * result slots present, every event with a valid id, a role and
 * non-negative covers_seq and tokens, and no id twice in the batch
 * (MEMD_ECONFLICT). The state delta is the store's own to check. */
int32_t pu_check_append(const memd_scope *scope, const memd_append *a,
			const memd_append_result *res, memd_error *err);

/* The checks every store makes of an events_load before it reads: scope
 * with a session, query and sink (with its event callback) present, only
 * known flags (NEWEST, NO_SUMMARY, ONLY_SUMMARY, not both of these two,
 * INCLUDE_HIDDEN), no negative bound, only known MEMD_ROLE_* bits. 0, or
 * MEMD_EINVAL saying what is wrong. */
int32_t pu_check_event_query(const memd_scope *scope, const memd_event_query *q,
			     const memd_event_sink *out, memd_error *err);

/* Every MEMD_ROLE_* bit of store.h. */
#define PU_ROLES_KNOWN (MEMD_ROLE_USER | MEMD_ROLE_ASSISTANT | MEMD_ROLE_SYSTEM | \
			MEMD_ROLE_TOOL | MEMD_ROLE_SUMMARY)
/* q's roles mask (since 1.2), 0 (every role) when q's struct_size does not
 * reach it. */
uint32_t pu_event_query_roles(const memd_event_query *q);
/* The MEMD_ROLE_* bit of a role name, 0 for any other name (such events
 * match only a query without a roles mask). */
uint32_t pu_role_bit(const char *role);

/* The transcript operation of an append (since 1.2): NULL when there is
 * none or a's struct_size does not reach it. */
const memd_transcript_op *pu_append_op(const memd_append *a);

/* The task path of w's write i (since 1.6): "" when w has none (a 1.5
 * caller's record, which ends before task_paths, no array, or a NULL
 * entry). */
const char *pu_write_task_path(const memd_checkpoint_writes *w, uint32_t i);

/* Does out want a checkpoint's pending writes: write set, or task_write
 * (since 1.6, when out's struct_size reaches it)? */
int pu_sink_wants_writes(const memd_checkpoint_sink *out);

/* Deliver w, made by the task at task_path (NULL = none), to out:
 * through task_write with the path ("" for none) when out has it, else
 * through write. Returns the sink's answer. */
int32_t pu_sink_write(const memd_checkpoint_sink *out, const memd_checkpoint_write *w,
		      const char *task_path);

/* A roles mask as the values of a fixed `role IN (?, ?, ?, ?, ?)`:
 * names[i] is the role of bit i (MEMD_ROLE_USER first) when roles has
 * it, else NULL (binds SQL NULL, which matches nothing). */
#define PU_ROLES_COUNT 5
void pu_role_names(uint32_t roles, const char *names[PU_ROLES_COUNT]);

/* The refusals every store gives an append, with the same words:
 * pu_err_ids_stored when n_stored (>= 1) of the batch's n_events ids are
 * stored already but not all (some_id is one of them), pu_err_version when
 * MEMD_APPEND_EXPECT_VERSION expected a version the session is not at.
 * Both fill err and return MEMD_ECONFLICT. */
int32_t pu_err_ids_stored(uint32_t n_stored, uint32_t n_events, const char *some_id,
			  memd_error *err);
int32_t pu_err_version(const memd_scope *scope, int64_t version, int64_t expected,
		       memd_error *err);

/* True when a call's deadline has passed or it was cancelled; fills err. */
int32_t pu_call_check(const memd_call *call, int64_t now_monotonic_us, memd_error *err);

/* An event copied out of a statement row, to deliver after the read
 * (NEWEST reads meet rows newest first and deliver them oldest first). */
typedef struct pu_event_copy {
	memd_event e;  /* its strings point into buf */
	char *buf;     /* owned: free() it */
} pu_event_copy;

/* Copy src and every string it points to into *dst (dst->buf holds the
 * strings; free it with free()). MEMD_ENOMEM leaves dst->buf NULL. */
int32_t pu_event_copy_make(const memd_event *src, pu_event_copy *dst, memd_error *err);

/* A malloc'd copy of s (the caller frees it), NULL for a NULL s. When
 * the copy cannot be made, returns NULL and sets *failed (left alone
 * otherwise), so a record's strings can be copied one after another and
 * the failure checked once. */
char *pu_strdup_or_null(const char *s, int *failed);

/* Copy the strings at slots[0, n) (NULL ones stay NULL) into one buffer
 * and point the slots at the copies: a record read inside a transaction,
 * kept to deliver after the commit. On success *ret_buf is the buffer
 * (the caller frees it); MEMD_ENOMEM leaves the slots as they were. */
int32_t pu_copy_strings(const char **const *slots, size_t n, char **ret_buf, memd_error *err);

/* Wait on cond (created with CLOCK_MONOTONIC; mutex held by the caller)
 * until it is signalled or, when call has a deadline, until that deadline
 * (memd_call.deadline_us, CLOCK_MONOTONIC). Returns ETIMEDOUT when the
 * deadline passed, 0 otherwise (woken: the caller re-checks what it
 * waits for, wake-ups may be spurious). */
int pu_cond_wait_call(pthread_cond_t *cond, pthread_mutex_t *mutex, const memd_call *call);

/* Add n to call->rows_read if the caller asked for it. */
static inline void pu_rows_read(const memd_call *call, uint64_t n)
{
	if (call && call->struct_size >= offsetof(memd_call, rows_read) + sizeof(call->rows_read) &&
	    call->rows_read)
		*call->rows_read += n;
}

#endif
