/* SPDX-License-Identifier: MIT */
/*
 * pg_checkpoints: run checkpoints of the PostgreSQL store (since ABI
 * 1.5): put (creating the session when asked), pending writes, get, list
 * (with writes), delete, the resumable listing over the sessions' heads
 * and expiry. Each op is one transaction; a session's head (its newest
 * root checkpoint) moves in the transaction of the change that moves it,
 * and only to a greater id, so that several memd processes putting one
 * session's checkpoints at once leave the greatest as head. Deleting a
 * session cascades to its checkpoints, their writes and its head (the
 * foreign keys of schema version 5). A pending write keeps the path of
 * the task that made it (schema version 6; "" for none), and a
 * checkpoint's writes are read in (task_path, task_id, idx) order, as
 * bytes.
 */
#ifndef MEMD_PG_CHECKPOINTS_H
#define MEMD_PG_CHECKPOINTS_H

#include "pg_db.h"

/* memd_store_ops members; see api/memd/store.h for each contract. inst is
 * the pg_store. */
int32_t pg_checkpoint_put(void *inst, const memd_call *call, const memd_checkpoint *c,
			  int create_session, int64_t now_us, int *ret_created_session,
			  memd_error *err);
int32_t pg_checkpoint_put_writes(void *inst, const memd_call *call, const memd_scope *scope,
				 const memd_checkpoint_writes *w, memd_error *err);
int32_t pg_checkpoint_get(void *inst, const memd_call *call, const memd_scope *scope,
			  const char *ns, const char *id, int64_t now_us,
			  const memd_checkpoint_sink *out, memd_error *err);
int32_t pg_checkpoint_list(void *inst, const memd_call *call, const memd_scope *scope,
			   const memd_checkpoint_query *q, const memd_checkpoint_sink *out,
			   memd_error *err);
int32_t pg_checkpoint_delete(void *inst, const memd_call *call, const memd_scope *scope,
			     const char *ns, uint32_t *ret_count, memd_error *err);
int32_t pg_checkpoint_resumable(void *inst, const memd_call *call,
				const memd_resumable_query *q, const memd_checkpoint_sink *out,
				memd_error *err);
int32_t pg_checkpoint_expire(void *inst, const memd_call *call, int64_t now_us, uint32_t limit,
			     uint32_t *ret_count, memd_error *err);

#endif
