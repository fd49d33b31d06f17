/* SPDX-License-Identifier: MIT */
/*
 * sq_checkpoints: run checkpoints of the SQLite store (ABI 1.5): one row
 * per (app, user, session, ns, id) of checkpoints, their pending writes
 * in checkpoint_writes and each session's head (its greatest root
 * checkpoint id, with that checkpoint's run state and expiry) in
 * checkpoint_heads. Puts, pending writes and deletes run in the writer's
 * group-commit transaction; a session's delete takes its checkpoints,
 * writes and head with it (ON DELETE CASCADE from sessions, and from
 * checkpoints to their writes).
 */
#ifndef MEMD_SQ_CHECKPOINTS_H
#define MEMD_SQ_CHECKPOINTS_H

#include "sq_db.h"

/* memd_store_ops members; see api/memd/store.h for each contract. inst is
 * the sq_store. */
int32_t sq_checkpoint_put(void *inst, const memd_call *call, const memd_checkpoint *c,
			  int create_session, int64_t now_us, int *ret_created_session,
			  memd_error *err);
int32_t sq_checkpoint_put_writes(void *inst, const memd_call *call, const memd_scope *scope,
				 const memd_checkpoint_writes *w, memd_error *err);
int32_t sq_checkpoint_get(void *inst, const memd_call *call, const memd_scope *scope,
			  const char *ns, const char *id, int64_t now_us,
			  const memd_checkpoint_sink *out, memd_error *err);
int32_t sq_checkpoint_list(void *inst, const memd_call *call, const memd_scope *scope,
			   const memd_checkpoint_query *q, const memd_checkpoint_sink *out,
			   memd_error *err);
int32_t sq_checkpoint_delete(void *inst, const memd_call *call, const memd_scope *scope,
			     const char *ns, uint32_t *ret_count, memd_error *err);
int32_t sq_checkpoint_resumable(void *inst, const memd_call *call,
				const memd_resumable_query *q, const memd_checkpoint_sink *out,
				memd_error *err);
int32_t sq_checkpoint_expire(void *inst, const memd_call *call, int64_t now_us,
			     uint32_t limit, uint32_t *ret_count, memd_error *err);

#endif
