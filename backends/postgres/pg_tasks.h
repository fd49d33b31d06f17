/* SPDX-License-Identifier: MIT */
/*
 * pg_tasks: A2A tasks of the PostgreSQL store (since ABI 1.5): the
 * conditional put (its checks on the row locked FOR UPDATE, so of two
 * puts expecting one version exactly one applies), get, list and delete.
 * session_delete and user_delete remove a session's or user's tasks in
 * pg_sessions.c.
 */
#ifndef MEMD_PG_TASKS_H
#define MEMD_PG_TASKS_H

#include "pg_db.h"

/* memd_store_ops members; see api/memd/store.h for each contract. inst is
 * the pg_store. */
int32_t pg_task_put(void *inst, const memd_call *call, const memd_task *t, uint32_t flags,
		    int64_t expected_version, int64_t now_us, const memd_task_sink *out,
		    memd_error *err);
int32_t pg_task_get(void *inst, const memd_call *call, const char *app, const char *id,
		    const memd_task_sink *out, memd_error *err);
int32_t pg_task_list(void *inst, const memd_call *call, const memd_task_query *q,
		     const memd_task_sink *out, memd_error *err);
int32_t pg_task_delete(void *inst, const memd_call *call, const char *app, const char *id,
		       int64_t expected_version, memd_error *err);

#endif
