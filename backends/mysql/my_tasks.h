/* SPDX-License-Identifier: MIT */
/*
 * my_tasks: A2A tasks of the MariaDB store (since ABI 1.5): task_put,
 * task_get, task_list and task_delete, plus the part of session_delete
 * and user_delete that removes a session's or a user's tasks.
 *
 * A task is a row of memd_tasks keyed by (app, id) with the whole task as
 * JSON text and the columns reads filter on (context_id, state, user),
 * its version and times. Every put and delete locks the task's row
 * (SELECT ... FOR UPDATE) before its checks, so two puts expecting one
 * version run one after the other and the second sees the first's
 * version (MEMD_ECONFLICT, nothing written). A task that does not exist
 * has no row to lock (READ COMMITTED takes no gap locks): two creates race
 * on the primary key, and the second INSERT waits for the first
 * transaction and then fails with a duplicate key, which is MEMD_ECONFLICT
 * for a create and a retry as a replace for an unconditional put.
 */
#ifndef MEMD_MY_TASKS_H
#define MEMD_MY_TASKS_H

#include "my_db.h"

/* Inside session_delete's transaction on c: delete the tasks whose
 * (app, user, context_id) is scope's session. */
int32_t my_tasks_session_delete(my_conn *c, const memd_scope *scope, memd_error *err);
/* Inside user_delete's transaction on c: delete every task of scope's
 * (app, user); *ret_rows is how many went. */
int32_t my_tasks_user_delete(my_conn *c, const memd_scope *scope, uint64_t *ret_rows,
			     memd_error *err);

/* memd_store_ops members (since 1.5); see api/memd/store.h. inst is the
 * my_store. task_put's sink may be NULL (nothing delivered). */
int32_t my_task_put(void *inst, const memd_call *call, const memd_task *t, uint32_t flags,
		    int64_t expected_version, int64_t now_us, const memd_task_sink *out,
		    memd_error *err);
int32_t my_task_get(void *inst, const memd_call *call, const char *app, const char *id,
		    const memd_task_sink *out, memd_error *err);
int32_t my_task_list(void *inst, const memd_call *call, const memd_task_query *q,
		     const memd_task_sink *out, memd_error *err);
int32_t my_task_delete(void *inst, const memd_call *call, const char *app, const char *id,
		       int64_t expected_version, memd_error *err);

#endif
