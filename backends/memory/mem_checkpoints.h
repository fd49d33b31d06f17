/* SPDX-License-Identifier: MIT */
/*
 * mem_checkpoints: run checkpoints of the in-memory store (store.h 1.5):
 * each session keeps its checkpoints, with their pending writes, under
 * the store's one lock like the rest of the store.
 */
#ifndef MEMD_MEMORY_MEM_CHECKPOINTS_H
#define MEMD_MEMORY_MEM_CHECKPOINTS_H

#include "mem_store.h"

/* Free every checkpoint of s (s is being freed). */
void mem_checkpoints_session_free(mem_session *s);

/* memd_store_ops members; see api/memd/store.h. inst is the mem_store. */
int32_t mem_checkpoint_put(void *inst, const memd_call *call, const memd_checkpoint *c,
			   int create_session, int64_t now_us, int *ret_created_session,
			   memd_error *err);
int32_t mem_checkpoint_put_writes(void *inst, const memd_call *call, const memd_scope *scope,
				  const memd_checkpoint_writes *w, memd_error *err);
int32_t mem_checkpoint_get(void *inst, const memd_call *call, const memd_scope *scope,
			   const char *ns, const char *id, int64_t now_us,
			   const memd_checkpoint_sink *out, memd_error *err);
int32_t mem_checkpoint_list(void *inst, const memd_call *call, const memd_scope *scope,
			    const memd_checkpoint_query *q, const memd_checkpoint_sink *out,
			    memd_error *err);
int32_t mem_checkpoint_delete(void *inst, const memd_call *call, const memd_scope *scope,
			      const char *ns, uint32_t *ret_count, memd_error *err);
int32_t mem_checkpoint_resumable(void *inst, const memd_call *call,
				 const memd_resumable_query *q, const memd_checkpoint_sink *out,
				 memd_error *err);
int32_t mem_checkpoint_expire(void *inst, const memd_call *call, int64_t now_us,
			      uint32_t limit, uint32_t *ret_count, memd_error *err);

#endif
