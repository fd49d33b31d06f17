/* SPDX-License-Identifier: MIT */
/*
 * my_lanes: lanes and their inboxes in the MariaDB store (lane_get,
 * lane_write, lane_list, lane_delete, lane_prune, inbox_put, inbox_take,
 * inbox_list), and the usage sums an append adds to its session and lane.
 *
 * Locking. Every write of a lane or of its inbox starts by locking the
 * lane's row (SELECT ... FOR UPDATE), so the writes of one lane, in any
 * process, run one after another: lane_write's version check, inbox_take's
 * holder check and the inbox positions all rely on it. A lane that does
 * not exist yet has no row to lock (READ COMMITTED takes no gap locks):
 * two creates race on the primary key, the second INSERT waits for the
 * first transaction and then fails with a duplicate key, which is
 * MEMD_ECONFLICT. Lock order: the lane row, then session rows, then the
 * feed counter, last as for every feed writer (my_feed.h). An append
 * takes its session's row and then its lane's; should it meet a
 * lane_write taking them the other way, InnoDB picks a deadlock victim and
 * my_run runs that one again.
 */
#ifndef MEMD_MY_LANES_H
#define MEMD_MY_LANES_H

#include "my_db.h"

/* SQL that adds the usage of my_param_usage to a row's sums (sessions and
 * lanes have the same columns): 7 parameters. */
#define MY_USAGE_ADD \
	"input_tokens = input_tokens + ?, output_tokens = output_tokens + ?," \
	" cache_read_tokens = cache_read_tokens + ?, cache_write_tokens = cache_write_tokens + ?," \
	" cost_micro_usd = cost_micro_usd + ?, last_prompt_tokens = IF(? > 0, ?, last_prompt_tokens)"

/* Bind u (checked by my_usage_check) for MY_USAGE_ADD. */
void my_param_usage(my_params *p, const memd_usage *u);
/* 0 if u is a usage a store takes (struct_size covers every member, no
 * negative value), else MEMD_EINVAL saying what (what names it). */
int32_t my_usage_check(const char *what, const memd_usage *u, memd_error *err);
/* a's usage, or NULL when it has none or a->struct_size does not cover
 * the member (a host below 1.2). */
const memd_usage *my_append_usage(const memd_append *a);
/* Inside an append's transaction on c, with scope's session row locked:
 * add u to the session's sums and to the sums of the lane of (app, user)
 * whose current session it is, if there is one. */
int32_t my_usage_appended(my_conn *c, const memd_scope *scope, const memd_usage *u,
			  memd_error *err);

/* memd_store_ops members (since 1.2); see api/memd/store.h. inst is the
 * my_store. */
int32_t my_lane_get(void *inst, const memd_call *call, const memd_scope *scope,
		    const char *key, const memd_lane_sink *out,
		    const memd_session_sink *session_out, memd_error *err);
int32_t my_lane_write(void *inst, const memd_call *call, const memd_lane_write *w,
		      const memd_lane_sink *out, memd_error *err);
int32_t my_lane_list(void *inst, const memd_call *call, const memd_lane_query *q,
		     const memd_lane_sink *out, memd_error *err);
int32_t my_lane_delete(void *inst, const memd_call *call, const memd_scope *scope,
		       const char *key, memd_error *err);
int32_t my_lane_prune(void *inst, const memd_call *call, int64_t updated_before_us,
		      uint32_t limit, uint32_t *ret_count, memd_error *err);
int32_t my_inbox_put(void *inst, const memd_call *call, const memd_scope *scope,
		     const char *key, const memd_inbox_item *item, uint32_t *ret_depth,
		     memd_error *err);
int32_t my_inbox_take(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *key, const char *turn_id, int64_t now_us,
		      const memd_inbox_sink *out, uint32_t *ret_depth, memd_error *err);
int32_t my_inbox_list(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *key, const memd_inbox_sink *out, memd_error *err);

#endif
