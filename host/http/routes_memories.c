/* SPDX-License-Identifier: MIT */
/*
 * Long-term memories of a user (the facade's memd_memory_*): create (201,
 * or 200 when a retry with a client-made id matched the stored memory),
 * list with filters and cursor paging, get, update (PATCH), delete and
 * the history. A memory's version is its ETag; PATCH and DELETE take the
 * version they mean from If-Match ("<version>", or * for any) as well as
 * from the body's "version" (PATCH) or ?version= (DELETE).
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
#define USER(rq) http_req_param(rq, 1)
#define MID(rq) http_req_param(rq, 2)

/* "/v1/apps/{app}/users/{user}/memories/{id}" with each part encoded. */
static char *memory_location(const char *app, const char *user, const char *id)
{
	char *a = http_uri_encode_segment(app), *u = http_uri_encode_segment(user);
	char *i = http_uri_encode_segment(id), *loc = NULL;
	if (a && u && i && asprintf(&loc, "/v1/apps/%s/users/%s/memories/%s", a, u, i) < 0)
		loc = NULL;
	free(a);
	free(u);
	free(i);
	return loc;
}

/* Reply status with memory text out (consumed), its version as ETag and,
 * with location, its Location. */
static void reply_memory(http_req *rq, unsigned status, char *out, int location)
{
	char *loc = NULL;

	if (location && out) {
		json_t *o = json_loads(out, 0, NULL);
		json_t *id = json_object_get(o, "id");
		if (json_is_string(id))
			loc = memory_location(APP(rq), USER(rq), json_string_value(id));
		json_decref(o);
	}
	http_reply_versioned(rq, status, out, loc);
	free(loc);
}

void http_h_memory_create(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int created = 0;
	int64_t t0 = http_now_ns();
	int32_t r = memd_memory_create(rq->ctx->m, APP(rq), USER(rq),
				       rq->body_len ? rq->body : NULL, &out, &created, &err);

	http_op_done(rq, t0, r, &err);
	if (r < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	reply_memory(rq, created ? 201 : 200, out, 1);
}

void http_h_memory_list(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	memd_memory_list_options o = { .struct_size = sizeof(o) };
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
	o.kind = http_req_query(rq, "kind");
	o.topic = http_req_query(rq, "topic");
	o.entity = http_req_query(rq, "entity");
	o.session_id = http_req_query(rq, "session_id");
	t0 = http_now_ns();
	r = memd_memory_list(rq->ctx->m, APP(rq), USER(rq), &o, &out, &err);
	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_memory_get(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_memory_get(rq->ctx->m, APP(rq), USER(rq), MID(rq), &out, &err);

	http_op_done(rq, t0, r, &err);
	if (r < 0)
		http_reply_memd_error(rq, &err);
	else
		reply_memory(rq, 200, out, 0);
}

/* The PATCH body with If-Match's version put in as "version" (text
 * malloc'd into *ret; NULL when the body stays as it is). MEMD_EINVAL when
 * the body names another version than If-Match or is not an object. */
static int32_t patch_body(http_req *rq, char **ret, memd_error *err)
{
	json_t *body, *v;
	int64_t version;
	int32_t r;

	*ret = NULL;
	if ((r = http_req_if_match(rq, "memory", &version, err)) < 0 || !version)
		return r;
	body = rq->body_len ? json_loadb(rq->body, rq->body_len, 0, NULL) : json_object();
	if (!json_is_object(body)) {
		json_decref(body);
		return memd_error_set(err, MEMD_EINVAL, 0, "body: must be a JSON object");
	}
	v = json_object_get(body, "version");
	if (v && !json_is_null(v) &&
	    (!json_is_integer(v) || json_integer_value(v) != (json_int_t)version)) {
		json_decref(body);
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "version: the body and If-Match name different versions");
	}
	if (json_object_set_new(body, "version", json_integer(version)) < 0 ||
	    !(*ret = json_dumps(body, JSON_COMPACT))) {
		json_decref(body);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	json_decref(body);
	return 0;
}

void http_h_memory_update(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL, *body = NULL;
	int64_t t0;
	int32_t r;

	if (patch_body(rq, &body, &err) < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	t0 = http_now_ns();
	r = memd_memory_update(rq->ctx->m, APP(rq), USER(rq), MID(rq),
			       body ? body : rq->body_len ? rq->body : NULL, &out, &err);
	free(body);
	http_op_done(rq, t0, r, &err);
	if (r < 0)
		http_reply_memd_error(rq, &err);
	else
		reply_memory(rq, 200, out, 0);
}

void http_h_memory_delete(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	uint64_t version;
	int64_t matched, t0;
	int32_t r;

	if (http_req_query_u64(rq, "version", 0, INT64_MAX, &version, &err) < 0 ||
	    http_req_if_match(rq, "memory", &matched, &err) < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	if (matched && version && (uint64_t)matched != version) {
		http_reply_error(rq, MEMD_EINVAL, 0,
				 "version: the query and If-Match name different versions");
		return;
	}
	t0 = http_now_ns();
	r = memd_memory_delete(rq->ctx->m, APP(rq), USER(rq), MID(rq),
			       matched ? matched : (int64_t)version, &err);
	http_op_reply(rq, t0, r, &err, HTTP_STATUS_NO_CONTENT, NULL);
}

void http_h_memory_history(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_memory_history(rq->ctx->m, APP(rq), USER(rq), MID(rq), &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}
