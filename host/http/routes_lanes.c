/* SPDX-License-Identifier: MIT */
/*
 * Lanes of a chat gateway (the facade's memd_lane_*, memd_turn_*,
 * memd_inbox_*, memd_lanes_sweep): resolve a message source to a lane,
 * open it (get-or-create), list, get, reset, switch, suspend and delete
 * lanes, begin, extend and end turns, put into and take from a lane's
 * inbox, and run the watcher's sweep. Lane keys contain ':' ("telegram:
 * dm:42"): the router takes the action (":open") from the end of the raw
 * segment, so a key may be sent with its ':' raw or as %3A (router.h).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include <memd/memd.h>

#include "request.h"
#include "routes.h"

#define APP(rq) http_req_param(rq, 0)
#define USER(rq) http_req_param(rq, 1)
#define KEY(rq) http_req_param(rq, 2)
#define TURN(rq) http_req_param(rq, 3)

/* active_within is in seconds and becomes microseconds in the store. */
#define ACTIVE_WITHIN_MAX_S (INT64_MAX / 1000000)

static const char *json_body(const http_req *rq)
{
	return rq->body_len ? rq->body : NULL;
}

/* A tri-state filter: absent (no flag), true (if_true) or false
 * (if_false; 0 = refused, the filter has no negative). */
static int32_t query_filter(const http_req *rq, const char *name, uint32_t if_true,
			    uint32_t if_false, uint32_t *flags, memd_error *err)
{
	int v;
	int32_t r;

	if (!http_req_query(rq, name))
		return 0;
	if ((r = http_req_query_bool(rq, name, 0, &v, err)) < 0)
		return r;
	if (!v && !if_false)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "query parameter %s: only true filters (leave it out for every lane)",
				      name);
	*flags |= v ? if_true : if_false;
	return 0;
}

/* GET .../lanes of one user (user set) or of every user of the app. */
static void lane_list(http_req *rq, const char *user)
{
	memd_error err = { .struct_size = sizeof(err) };
	memd_lane_list_options o = { .struct_size = sizeof(o) };
	uint64_t limit, within;
	char *out = NULL;
	int64_t t0;
	int32_t r;

	if (http_req_query_u64(rq, "limit", 0, MEMD_LIST_LIMIT_MAX, &limit, &err) < 0 ||
	    http_req_query_u64(rq, "active_within", 0, ACTIVE_WITHIN_MAX_S, &within, &err) < 0 ||
	    query_filter(rq, "suspended", MEMD_LANES_SUSPENDED, MEMD_LANES_NOT_SUSPENDED, &o.flags,
			 &err) < 0 ||
	    query_filter(rq, "resume_pending", MEMD_LANES_RESUME_PENDING,
			 MEMD_LANES_NOT_RESUME_PENDING, &o.flags, &err) < 0 ||
	    query_filter(rq, "in_turn", MEMD_LANES_IN_TURN, 0, &o.flags, &err) < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	o.limit = (uint32_t)limit;
	o.active_within_s = (int64_t)within;
	o.cursor = http_req_query(rq, "cursor");
	t0 = http_now_ns();
	r = memd_lane_list(rq->ctx->m, APP(rq), user, &o, &out, &err);
	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_lane_resolve(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_lane_resolve(rq->ctx->m, APP(rq), json_body(rq), &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_lane_open_source(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	http_return_context rc;
	char *out = NULL;
	int64_t t0;
	int32_t r;

	if (http_req_return_context(rq, &rc) < 0)
		return;
	t0 = http_now_ns();
	r = rc.asked ? memd_lane_open_source_context(rq->ctx->m, APP(rq), json_body(rq), rc.flags,
						     rc.query, &out, &err)
		     : memd_lane_open_source(rq->ctx->m, APP(rq), json_body(rq), &out, &err);
	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_lane_list_app(http_req *rq)
{
	lane_list(rq, NULL);
}

void http_h_lane_list(http_req *rq)
{
	lane_list(rq, USER(rq));
}

void http_h_lane_get(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_lane_get(rq->ctx->m, APP(rq), USER(rq), KEY(rq), &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_lane_delete(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	int64_t t0 = http_now_ns();
	int32_t r = memd_lane_delete(rq->ctx->m, APP(rq), USER(rq), KEY(rq), &err);

	http_op_reply(rq, t0, r, &err, HTTP_STATUS_NO_CONTENT, NULL);
}

void http_h_lane_open(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	http_return_context rc;
	char *out = NULL;
	int64_t t0;
	int32_t r;

	if (http_req_return_context(rq, &rc) < 0)
		return;
	t0 = http_now_ns();
	r = rc.asked ? memd_lane_open_context(rq->ctx->m, APP(rq), USER(rq), KEY(rq), json_body(rq),
					      rc.flags, rc.query, &out, &err)
		     : memd_lane_open(rq->ctx->m, APP(rq), USER(rq), KEY(rq), json_body(rq), &out,
				      &err);
	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_lane_reset(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_lane_reset(rq->ctx->m, APP(rq), USER(rq), KEY(rq), json_body(rq), &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_lane_switch(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_lane_switch(rq->ctx->m, APP(rq), USER(rq), KEY(rq), json_body(rq), &out,
				     &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_lane_suspend(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_lane_suspend(rq->ctx->m, APP(rq), USER(rq), KEY(rq), &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

/* The 409 of a turn begin names who holds the lane: the error body gets
 * "holder": {"lease_until", "inbox_depth"} from the lane as read after
 * the conflict (lease_until null when that turn ended meanwhile: retry).
 * When the lane cannot be read, the plain error stays. */
static void add_holder(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *lane_text = NULL, *text;
	json_t *body, *lane, *turn, *holder;

	if (memd_lane_get(rq->ctx->m, APP(rq), USER(rq), KEY(rq), &lane_text, &err) < 0)
		return;
	lane = json_loads(lane_text, 0, NULL);
	memd_free(lane_text);
	body = rq->out ? json_loadb(rq->out, rq->out_len, 0, NULL) : NULL;
	turn = json_object_get(lane, "turn");
	holder = json_pack("{s:O,s:O}", "lease_until",
			   json_is_object(turn) ? json_object_get(turn, "lease_until") : json_null(),
			   "inbox_depth", json_object_get(lane, "inbox_depth"));
	if (body && holder && json_is_integer(json_object_get(lane, "inbox_depth")) &&
	    json_object_set(body, "holder", holder) == 0 &&
	    (text = json_dumps(body, JSON_COMPACT))) {
		free(rq->out);
		rq->out = text;
		rq->out_len = strlen(text);
	}
	json_decref(holder);
	json_decref(body);
	json_decref(lane);
}

void http_h_turn_begin(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_turn_begin(rq->ctx->m, APP(rq), USER(rq), KEY(rq), json_body(rq), &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
	if (r == MEMD_ECONFLICT)
		add_holder(rq);
}

void http_h_turn_heartbeat(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_turn_heartbeat(rq->ctx->m, APP(rq), USER(rq), KEY(rq), TURN(rq),
					json_body(rq), &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_turn_end(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_turn_end(rq->ctx->m, APP(rq), USER(rq), KEY(rq), TURN(rq), json_body(rq),
				  &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_inbox_put(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_inbox_put(rq->ctx->m, APP(rq), USER(rq), KEY(rq), json_body(rq), &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_inbox_list(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_inbox_list(rq->ctx->m, APP(rq), USER(rq), KEY(rq), &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_inbox_take(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_inbox_take(rq->ctx->m, APP(rq), USER(rq), KEY(rq), json_body(rq), &out,
				    &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_lanes_sweep(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_lanes_sweep(rq->ctx->m, &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}
