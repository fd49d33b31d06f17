/* SPDX-License-Identifier: MIT */
/*
 * pg_lanes: lanes and their inboxes in the PostgreSQL store (the lane ops
 * of api/memd/store.h, since 1.2).
 *
 * Every write of a lane or its inbox locks the lane row first (SELECT ...
 * FOR UPDATE), then the sessions it touches, then the feed counter (last,
 * as every feed writer does): one lock order, so lane writes, inbox puts
 * and takes, and appends with usage (which lock the lane before their
 * session) do not deadlock. The lane row's lock is what makes an inbox
 * take exactly-once across processes: a second taker waits for the first
 * one's commit, and its statements (each with a new snapshot) see what the
 * first one removed. A lane write, an inbox put and an inbox take are one
 * round trip each: the statements after the lock write only when the
 * lane is as the caller expects (a guard in their WHERE), so no answer
 * has to come back before the rest is sent.
 */
#ifndef MEMD_PG_LANES_H
#define MEMD_PG_LANES_H

#include "pg_db.h"

/* memd_store_ops members; see api/memd/store.h. inst is the pg_store. */
int32_t pg_lane_get(void *inst, const memd_call *call, const memd_scope *scope, const char *key,
		    const memd_lane_sink *out,
		    const memd_session_sink *session_out, memd_error *err);
int32_t pg_lane_write(void *inst, const memd_call *call, const memd_lane_write *w,
		      const memd_lane_sink *out, memd_error *err);
int32_t pg_lane_list(void *inst, const memd_call *call, const memd_lane_query *q,
		     const memd_lane_sink *out, memd_error *err);
int32_t pg_lane_delete(void *inst, const memd_call *call, const memd_scope *scope,
		       const char *key, memd_error *err);
int32_t pg_lane_prune(void *inst, const memd_call *call, int64_t updated_before_us,
		      uint32_t limit, uint32_t *ret_count, memd_error *err);
int32_t pg_inbox_put(void *inst, const memd_call *call, const memd_scope *scope, const char *key,
		     const memd_inbox_item *item, uint32_t *ret_depth, memd_error *err);
int32_t pg_inbox_take(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *key, const char *turn_id, int64_t now_us,
		      const memd_inbox_sink *out, uint32_t *ret_depth, memd_error *err);
int32_t pg_inbox_list(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *key, const memd_inbox_sink *out, memd_error *err);

#endif
