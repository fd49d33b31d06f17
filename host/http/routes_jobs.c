/* SPDX-License-Identifier: MIT */
/*
 * Background jobs of an app (the facade's memd_job_*): get, list,
 * cancel; and POST .../index:rebuild, which starts one. A job is seen
 * only under the app it belongs to: the path names the app, so a key's
 * access to the app is its access to the app's jobs, and a job id under
 * another app's path is not found.
 */
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
#define JOB(rq) http_req_param(rq, 1)

/* "/v1/apps/{app}/jobs/{id}" with each part encoded; NULL on ENOMEM. */
static char *job_location(const char *app, const char *id)
{
	char *a = http_uri_encode_segment(app), *j = http_uri_encode_segment(id), *loc = NULL;
	if (a && j && asprintf(&loc, "/v1/apps/%s/jobs/%s", a, j) < 0)
		loc = NULL;
	free(a);
	free(j);
	return loc;
}

/* 202 Accepted with the new job, or 200 with the rebuild of this user
 * that is queued or running already; Location names the job either way. */
void http_h_index_rebuild(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL, *loc = NULL;
	int32_t existing = 0;
	int64_t t0 = http_now_ns();
	int32_t r = memd_index_rebuild_start(rq->ctx->m, APP(rq), USER(rq), &out, &existing, &err);
	json_t *o;

	http_op_done(rq, t0, r, &err);
	if (r < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	o = json_loads(out, 0, NULL);
	if (o && json_is_string(json_object_get(o, "id")))
		loc = job_location(APP(rq), json_string_value(json_object_get(o, "id")));
	json_decref(o);
	http_reply_json(rq, existing ? 200 : 202, out);
	if (loc)
		http_reply_header(rq, "Location", loc);
	else
		http_reply_error(rq, MEMD_ENOMEM, 0, "out of memory");
	free(loc);
}

void http_h_job_list(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_job_list(rq->ctx->m, APP(rq), &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_job_get(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_job_get(rq->ctx->m, APP(rq), JOB(rq), &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_job_cancel(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_job_cancel(rq->ctx->m, APP(rq), JOB(rq), &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}
