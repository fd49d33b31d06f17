/* SPDX-License-Identifier: MIT */
/* Artifacts: PUT raw bytes (a new version), GET latest or ?version=N,
 * list, versions, delete. */
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <memd/memd.h>

#include "request.h"
#include "routes.h"
#include "uri.h"

#define APP(rq) http_req_param(rq, 0)
#define USER(rq) http_req_param(rq, 1)
#define SID(rq) http_req_param(rq, 2)
#define NAME(rq) http_req_param(rq, 3)
#define DEFAULT_MIME "application/octet-stream"

void http_h_artifact_list(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_artifact_list(rq->ctx->m, APP(rq), USER(rq), SID(rq), &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_artifact_versions(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_artifact_versions(rq->ctx->m, APP(rq), USER(rq), SID(rq), NAME(rq), &out,
					   &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_artifact_put(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	const char *mime = rq->content_type[0] ? rq->content_type : DEFAULT_MIME;
	int64_t t0 = http_now_ns();
	int32_t r = memd_artifact_put(rq->ctx->m, APP(rq), USER(rq), SID(rq), NAME(rq), mime,
				      rq->body, rq->body_len, &out, &err);
	json_t *o;

	http_op_done(rq, t0, r, &err);
	if (r < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	o = json_loads(out, 0, NULL);
	http_reply_json(rq, 201, out);
	if (json_is_integer(json_object_get(o, "version"))) {
		char *a = http_uri_encode_segment(APP(rq)), *u = http_uri_encode_segment(USER(rq));
		char *s = http_uri_encode_segment(SID(rq)), *n = http_uri_encode_segment(NAME(rq));
		char *loc = NULL;
		if (a && u && s && n &&
		    asprintf(&loc, "/v1/apps/%s/users/%s/sessions/%s/artifacts/%s?version=%" PRId64, a,
			     u, s, n, (int64_t)json_integer_value(json_object_get(o, "version"))) >= 0) {
			http_reply_header(rq, "Location", loc);
			free(loc);
		}
		free(a);
		free(u);
		free(s);
		free(n);
	}
	json_decref(o);
}

void http_h_artifact_get(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *meta = NULL;
	void *data = NULL;
	size_t size = 0;
	uint64_t version;
	json_t *o;
	int64_t t0;
	int32_t r;

	if (http_req_query_u64(rq, "version", 0, INT64_MAX, &version, &err) < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	if (http_req_query(rq, "version") && version == 0) {
		http_reply_error(rq, MEMD_EINVAL, 0, "query parameter version: must be 1 or more");
		return;
	}
	t0 = http_now_ns();
	r = memd_artifact_get(rq->ctx->m, APP(rq), USER(rq), SID(rq), NAME(rq), (int64_t)version,
			      &meta, &data, &size, &err);
	http_op_done(rq, t0, r, &err);
	if (r < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	o = json_loads(meta, 0, NULL);
	memd_free(meta);
	{
		const char *mime = json_string_value(json_object_get(o, "mime_type"));
		json_t *v = json_object_get(o, "version");
		json_t *c = json_object_get(o, "created");
		char num[32];

		http_reply_bytes(rq, 200, data, size, mime ? mime : DEFAULT_MIME);
		if (json_is_integer(v)) {
			snprintf(num, sizeof(num), "%" PRId64, (int64_t)json_integer_value(v));
			http_reply_header(rq, "X-Memd-Artifact-Version", num);
		}
		if (json_is_string(c))
			http_reply_header(rq, "X-Memd-Artifact-Created", json_string_value(c));
	}
	json_decref(o);
}

void http_h_artifact_delete(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	int64_t t0 = http_now_ns();
	int32_t r = memd_artifact_delete(rq->ctx->m, APP(rq), USER(rq), SID(rq), NAME(rq), &err);

	http_op_reply(rq, t0, r, &err, HTTP_STATUS_NO_CONTENT, NULL);
}
