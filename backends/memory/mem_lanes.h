/* SPDX-License-Identifier: MIT */
/*
 * mem_lanes: lanes of the in-memory store (store.h 1.2): the lane rows,
 * their inboxes, usage sums and the index of ended sessions, under the
 * store's one lock, beside the sessions of memory.c.
 */
#ifndef MEMD_MEMORY_MEM_LANES_H
#define MEMD_MEMORY_MEM_LANES_H

#include "mem_store.h"

/* Commit steps of memory.c's writes (cannot fail; lock held): */
/* An append's usage reaches the lane (app, user, s->lane_key) when s is
 * that lane's current session. */
void mem_lanes_add_usage(mem_store *st, const mem_session *s, const mem_usage *usage);
/* Remove and free every lane of u with its inbox; returns the rows removed
 * (lanes and items). */
uint64_t mem_lanes_user_forget(mem_store *st, mem_user *u);
/* Take s out of the ended-session index if it is there. */
void mem_ended_unlink(mem_store *st, const mem_session *s);

/* Free every lane (fini; the sessions, users and apps are freed after). */
void mem_lanes_fini(mem_store *st);

/* memd_store_ops members; see api/memd/store.h. inst is the mem_store. */
int32_t mem_lane_get(void *inst, const memd_call *call, const memd_scope *scope,
		     const char *key, const memd_lane_sink *out,
		     const memd_session_sink *session_out, memd_error *err);
int32_t mem_lane_write(void *inst, const memd_call *call, const memd_lane_write *w,
		       const memd_lane_sink *out, memd_error *err);
int32_t mem_lane_list(void *inst, const memd_call *call, const memd_lane_query *q,
		      const memd_lane_sink *out, memd_error *err);
int32_t mem_lane_delete(void *inst, const memd_call *call, const memd_scope *scope,
			const char *key, memd_error *err);
int32_t mem_lane_prune(void *inst, const memd_call *call, int64_t updated_before_us,
		       uint32_t limit, uint32_t *ret_count, memd_error *err);
int32_t mem_inbox_put(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *key, const memd_inbox_item *item, uint32_t *ret_depth,
		      memd_error *err);
int32_t mem_inbox_take(void *inst, const memd_call *call, const memd_scope *scope,
		       const char *key, const char *turn_id, int64_t now_us,
		       const memd_inbox_sink *out, uint32_t *ret_depth, memd_error *err);
int32_t mem_inbox_list(void *inst, const memd_call *call, const memd_scope *scope,
		       const char *key, const memd_inbox_sink *out, memd_error *err);
int32_t mem_session_list_ended(void *inst, const memd_call *call, int64_t ended_before_us,
			       uint32_t limit, const memd_session_sink *out, memd_error *err);

#endif
