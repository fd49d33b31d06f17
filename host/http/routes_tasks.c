/* SPDX-License-Identifier: MIT */
/*
 * A2A tasks of an app (the facade's memd_task_*): save (PUT: 201 when
 * created, 200 when replaced), get (with history_length), list with
 * filters and cursor paging, and delete. A task's version is its ETag;
 * a save takes the version it means from If-Match ("<version>", or * for
 * any) and create-only from If-None-Match: *; a delete takes If-Match.
 * A version that is not the task's, or a terminal state left, is 409 as
 * for memories.
 */
#include <jansson.h>
#include <microhttpd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/memd.h>

#include "request.h"
#include "routes.h"
#include "uri.h"

#define APP(rq) http_req_param(rq, 0)
#define TID(rq) http_req_param(rq, 1)

/* "/v1/apps/{app}/tasks/{id}" with each part encoded. */
static char *task_location(const char *app, const char *id)
{
	char *a = http_uri_encode_segment(app), *i = http_uri_encode_segment(id), *loc = NULL;

	if (a && i && asprintf(&loc, "/v1/apps/%s/tasks/%s", a, i) < 0)
		loc = NULL;
	free(a);
	free(i);
	return loc;
}

/* Reply status with the task record out (consumed), its version as ETag
 * and, with location, its Location. */
static void reply_task(http_req *rq, unsigned status, char *out, int location)
{
	char *loc = location ? task_location(APP(rq), TID(rq)) : NULL;

	http_reply_versioned(rq, status, out, loc);
	free(loc);
}

/* *ret = 1 when If-None-Match is *, 0 when absent; MEMD_EINVAL for
 * another value (a save can only ask that the task not exist). */
static int32_t if_none_match(const http_req *rq, int *ret, memd_error *err)
{
	const char *h = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_IF_NONE_MATCH);

	*ret = 0;
	if (!h)
		return 0;
	if (strcmp(h, "*") != 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "If-None-Match: only * (create the task only if it does not "
				      "exist)");
	*ret = 1;
	return 0;
}

void http_h_task_put(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t version, t0;
	int create_only, created = 0;
	int32_t r;

	if (http_req_if_match(rq, "task", &version, &err) < 0 ||
	    if_none_match(rq, &create_only, &err) < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	t0 = http_now_ns();
	r = memd_task_put(rq->ctx->m, APP(rq), TID(rq), http_req_query(rq, "user"),
			  rq->body_len ? rq->body : NULL, version, create_only, &out, &created,
			  &err);
	http_op_done(rq, t0, r, &err);
	if (r < 0)
		http_reply_memd_error(rq, &err);
	else
		reply_task(rq, created ? 201 : 200, out, created);
}

void http_h_task_get(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	uint64_t n;
	int64_t t0;
	int32_t r;

	if (http_req_query_u64(rq, "history_length", 0, INT64_MAX, &n, &err) < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	t0 = http_now_ns();
	r = memd_task_get(rq->ctx->m, APP(rq), TID(rq),
			  http_req_query(rq, "history_length") ? (int64_t)n : -1, &out, &err);
	http_op_done(rq, t0, r, &err);
	if (r < 0)
		http_reply_memd_error(rq, &err);
	else
		reply_task(rq, 200, out, 0);
}

void http_h_task_list(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	memd_task_list_options o = { .struct_size = sizeof(o) };
	char *out = NULL;
	uint64_t limit;
	int64_t t0;
	int32_t r;

	if (http_req_query_u64(rq, "limit", 0, MEMD_LIST_LIMIT_MAX, &limit, &err) < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	o.limit = (uint32_t)limit;
	o.cursor = http_req_query(rq, "cursor");
	o.context_id = http_req_query(rq, "context_id");
	o.state = http_req_query(rq, "state");
	o.user = http_req_query(rq, "user");
	t0 = http_now_ns();
	r = memd_task_list(rq->ctx->m, APP(rq), &o, &out, &err);
	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_task_delete(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	int64_t version, t0;
	int32_t r;

	if (http_req_if_match(rq, "task", &version, &err) < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	t0 = http_now_ns();
	r = memd_task_delete(rq->ctx->m, APP(rq), TID(rq), version, &err);
	http_op_reply(rq, t0, r, &err, HTTP_STATUS_NO_CONTENT, NULL);
}
