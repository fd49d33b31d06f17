/* SPDX-License-Identifier: MIT */
/*
 * sq_lanes: lanes and their inboxes in the SQLite store (since ABI 1.2),
 * the usage sums of sessions and lanes, and the listing of ended
 * sessions. Every write goes through group commit (sq_group.h): one
 * BEGIN IMMEDIATE transaction holds the writer lock of the database
 * file, so a conditional lane_write and an inbox_take are serialized
 * with every other writer, in this process and in others.
 */
#ifndef MEMD_SQ_LANES_H
#define MEMD_SQ_LANES_H

#include "sq_db.h"

/* MEMD_EINVAL unless every member of u is >= 0 (u may be NULL). */
int32_t sq_usage_check(const memd_usage *u, memd_error *err);
/* Add u to the sums of scope's session (none: nothing happens), and to
 * the lane (app, user, the session's lane_key) whose current session it
 * is, if with_lane; inside the write transaction on c. last_prompt_tokens
 * replaces the stored one when > 0. */
int32_t sq_usage_add(sq_conn *c, const memd_scope *scope, const memd_usage *u, int with_lane,
		     memd_error *err);

/* memd_store_ops members; see api/memd/store.h. inst is the sq_store. */
int32_t sq_lane_get(void *inst, const memd_call *call, const memd_scope *scope, const char *key,
		    const memd_lane_sink *out,
		    const memd_session_sink *session_out, memd_error *err);
int32_t sq_lane_write(void *inst, const memd_call *call, const memd_lane_write *w,
		      const memd_lane_sink *out, memd_error *err);
int32_t sq_lane_list(void *inst, const memd_call *call, const memd_lane_query *q,
		     const memd_lane_sink *out, memd_error *err);
int32_t sq_lane_delete(void *inst, const memd_call *call, const memd_scope *scope,
		       const char *key, memd_error *err);
int32_t sq_lane_prune(void *inst, const memd_call *call, int64_t updated_before_us,
		      uint32_t limit, uint32_t *ret_count, memd_error *err);
int32_t sq_inbox_put(void *inst, const memd_call *call, const memd_scope *scope, const char *key,
		     const memd_inbox_item *item, uint32_t *ret_depth, memd_error *err);
int32_t sq_inbox_take(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *key, const char *turn_id, int64_t now_us,
		      const memd_inbox_sink *out, uint32_t *ret_depth, memd_error *err);
int32_t sq_inbox_list(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *key, const memd_inbox_sink *out, memd_error *err);
int32_t sq_session_list_ended(void *inst, const memd_call *call, int64_t ended_before_us,
			      uint32_t limit, const memd_session_sink *out, memd_error *err);

#endif
