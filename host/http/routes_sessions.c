/* SPDX-License-Identifier: MIT */
/* Sessions: create, list (cursor paging), get (with events), patch, delete. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/memd.h>

#include "json/event_json.h"
#include "errors.h"
#include "request.h"
#include "routes.h"
#include "uri.h"

#define APP(rq) http_req_param(rq, 0)
#define USER(rq) http_req_param(rq, 1)
#define SID(rq) http_req_param(rq, 2)

/* active_within is in seconds and becomes microseconds in the store. */
#define ACTIVE_WITHIN_MAX_S (INT64_MAX / 1000000)

/* The request body as the facade takes it: NULL when empty. */
static const char *json_body(const http_req *rq)
{
	return rq->body_len ? rq->body : NULL;
}

/* "/v1/apps/{app}/users/{user}/sessions/{id}" with each part encoded. */
static char *session_location(const char *app, const char *user, const char *sid)
{
	char *a = http_uri_encode_segment(app), *u = http_uri_encode_segment(user);
	char *s = http_uri_encode_segment(sid), *loc = NULL;
	if (a && u && s && asprintf(&loc, "/v1/apps/%s/users/%s/sessions/%s", a, u, s) < 0)
		loc = NULL;
	free(a);
	free(u);
	free(s);
	return loc;
}

void http_h_session_create(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_session_create(rq->ctx->m, APP(rq), USER(rq), json_body(rq), &out, &err);
	json_t *o;

	http_op_done(rq, t0, r, &err);
	if (r < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	o = json_loads(out, 0, NULL);
	if (o && json_is_string(json_object_get(o, "id"))) {
		char *loc = session_location(APP(rq), USER(rq), json_string_value(json_object_get(o, "id")));
		http_reply_json(rq, 201, out);
		if (loc)
			http_reply_header(rq, "Location", loc);
		free(loc);
	} else {
		http_reply_json(rq, 201, out);
	}
	json_decref(o);
}

void http_h_session_list(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	memd_session_list_options o = { .struct_size = sizeof(o) };
	char *out = NULL;
	const char *order = http_req_query(rq, "order");
	uint64_t limit, within;
	int archived;
	int64_t t0;
	int32_t r;

	if (http_req_query_u64(rq, "limit", 0, MEMD_LIST_LIMIT_MAX, &limit, &err) < 0 ||
	    http_req_query_u64(rq, "active_within", 0, ACTIVE_WITHIN_MAX_S, &within, &err) < 0 ||
	    http_req_query_bool(rq, "archived", 0, &archived, &err) < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	if (order && strcmp(order, "activity") == 0) {
		o.order = MEMD_ORDER_ACTIVITY;
	} else if (order && strcmp(order, "created") != 0) {
		http_reply_error(rq, MEMD_EINVAL, 0,
				 "query parameter order: must be activity (newest activity first) or "
				 "created (newest created first, the default)");
		return;
	}
	o.active_within_s = (int64_t)within;
	o.flags = archived ? MEMD_LIST_INCLUDE_ARCHIVED : 0;
	o.limit = (uint32_t)limit;
	o.cursor = http_req_query(rq, "cursor");
	o.origin_platform = http_req_query(rq, "origin_platform");
	o.lane_key = http_req_query(rq, "lane");
	t0 = http_now_ns();
	r = memd_session_list_filtered(rq->ctx->m, APP(rq), USER(rq), &o, &out, &err);
	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_session_get(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	memd_get_options g = { .struct_size = sizeof(g) };
	const char *after_time = http_req_query(rq, "after_time");
	uint64_t events, after_seq;
	char *out = NULL;
	int64_t t0;
	int32_t r;
	int text;

	if (http_req_query_u64(rq, "events", 0, UINT32_MAX, &events, &err) < 0 ||
	    http_req_query_u64(rq, "after_seq", 0, INT64_MAX, &after_seq, &err) < 0 ||
	    http_req_query_bool(rq, "include_text", 0, &text, &err) < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	if (after_time && ej_parse_time(after_time, &g.after_time_us) < 0) {
		http_reply_error(rq, MEMD_EINVAL, 0,
				 "query parameter after_time: must be an RFC 3339 time "
				 "(e.g. 2025-01-31T12:00:00Z; send '+' as %%2B)");
		return;
	}
	if (http_req_query(rq, "events") || http_req_query(rq, "after_seq") || after_time)
		g.flags = MEMD_GET_EVENTS;
	if (!text)
		g.flags |= MEMD_READ_NO_TEXT;
	g.events = (uint32_t)events;
	g.after_seq = (int64_t)after_seq;
	t0 = http_now_ns();
	r = memd_session_get(rq->ctx->m, APP(rq), USER(rq), SID(rq), &g, &out, &err);
	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_session_patch(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_session_patch(rq->ctx->m, APP(rq), USER(rq), SID(rq), json_body(rq), &out,
				       &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_session_delete(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	int64_t t0 = http_now_ns();
	int32_t r = memd_session_delete(rq->ctx->m, APP(rq), USER(rq), SID(rq), &err);

	http_op_reply(rq, t0, r, &err, HTTP_STATUS_NO_CONTENT, NULL);
}
