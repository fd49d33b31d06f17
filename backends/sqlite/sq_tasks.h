/* SPDX-License-Identifier: MIT */
/*
 * sq_tasks: A2A tasks of the SQLite store (ABI 1.5): one row per (app,
 * id) of tasks, holding the whole task as JSON beside the columns reads
 * filter on (context id, state, user) and a version. task_put and
 * task_delete run in the writer's group-commit transaction; session and
 * user deletes take their tasks through sq_tasks_session_delete and
 * sq_tasks_user_delete, in their own transactions.
 */
#ifndef MEMD_SQ_TASKS_H
#define MEMD_SQ_TASKS_H

#include "sq_db.h"

/* Delete the tasks of scope's user whose context id is scope's session
 * (session_delete), inside the caller's write transaction on c. */
int32_t sq_tasks_session_delete(sq_conn *c, const memd_scope *scope, memd_error *err);
/* Delete every task of scope's (app, user) (user_delete), inside the
 * caller's write transaction on c; *ret_count gets how many went. */
int32_t sq_tasks_user_delete(sq_conn *c, const memd_scope *scope, int64_t *ret_count,
			     memd_error *err);

/* memd_store_ops members; see api/memd/store.h for each contract. inst is
 * the sq_store. task_put's out may be NULL (nothing is delivered). */
int32_t sq_task_put(void *inst, const memd_call *call, const memd_task *t, uint32_t flags,
		    int64_t expected_version, int64_t now_us, const memd_task_sink *out,
		    memd_error *err);
int32_t sq_task_get(void *inst, const memd_call *call, const char *app, const char *id,
		    const memd_task_sink *out, memd_error *err);
int32_t sq_task_list(void *inst, const memd_call *call, const memd_task_query *q,
		     const memd_task_sink *out, memd_error *err);
int32_t sq_task_delete(void *inst, const memd_call *call, const char *app, const char *id,
		       int64_t expected_version, memd_error *err);

#endif
