/* SPDX-License-Identifier: MIT */
/*
 * mem_tasks: A2A tasks of the in-memory store (store.h 1.5): one row per
 * (app, id) holding the task's JSON and the columns reads filter on,
 * found by a hash and kept in one store-wide array in ascending (app,
 * updated_us, id) order for task_list's keyset walk, under the store's
 * one lock like the rest of the store.
 */
#ifndef MEMD_MEMORY_MEM_TASKS_H
#define MEMD_MEMORY_MEM_TASKS_H

#include "mem_store.h"

/* A stored task (the strings are owned). */
typedef struct mem_task {
	char *app;
	char *id;
	char *context_id;
	char *user;            /* NULL = linked to no session */
	char *state;
	char *task_json;
	int64_t created_us;
	int64_t updated_us;
	int64_t version;
} mem_task;

/* Commit steps of session_delete and user_delete (cannot fail; lock
 * held): remove the tasks of app whose user is user and, when session is
 * not NULL, whose context id is session. Returns the rows removed. */
uint64_t mem_tasks_forget(mem_store *st, const char *app, const char *user, const char *session);
/* Free every task (fini). */
void mem_tasks_fini(mem_store *st);

/* memd_store_ops members; see api/memd/store.h. inst is the mem_store. */
int32_t mem_task_put(void *inst, const memd_call *call, const memd_task *t, uint32_t flags,
		     int64_t expected_version, int64_t now_us, const memd_task_sink *out,
		     memd_error *err);
int32_t mem_task_get(void *inst, const memd_call *call, const char *app, const char *id,
		     const memd_task_sink *out, memd_error *err);
int32_t mem_task_list(void *inst, const memd_call *call, const memd_task_query *q,
		      const memd_task_sink *out, memd_error *err);
int32_t mem_task_delete(void *inst, const memd_call *call, const char *app, const char *id,
			int64_t expected_version, memd_error *err);

#endif
