/* SPDX-License-Identifier: MIT */
/* Events (append, with ?return=context the context right after it), state
 * (get, patch) and invocation end; event pages and the context are in
 * routes_transcripts.c (roles, hidden events, OpenAI). */
#include <stdint.h>

#include <memd/memd.h>

#include "request.h"
#include "routes.h"

#define APP(rq) http_req_param(rq, 0)
#define USER(rq) http_req_param(rq, 1)
#define SID(rq) http_req_param(rq, 2)

static const char *json_body(const http_req *rq)
{
	return rq->body_len ? rq->body : NULL;
}

/* Reply 200 with out, or the error. */
static void finish(http_req *rq, int64_t t0, int32_t r, char *out, const memd_error *err)
{
	http_op_done(rq, t0, r, err);
	if (r < 0)
		http_reply_memd_error(rq, err);
	else
		http_reply_json(rq, 200, out);
}

void http_h_events_append(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	http_return_context rc;
	char *out = NULL;
	int64_t t0;
	int32_t r;

	if (http_req_return_context(rq, &rc) < 0)
		return;
	t0 = http_now_ns();
	r = rc.asked ? memd_events_append_context(rq->ctx->m, APP(rq), USER(rq), SID(rq),
						  json_body(rq), rc.flags, rc.query, &out, &err)
		     : memd_events_append(rq->ctx->m, APP(rq), USER(rq), SID(rq), json_body(rq), &out,
					  &err);
	finish(rq, t0, r, out, &err);
}

void http_h_state_get(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_state_get(rq->ctx->m, APP(rq), USER(rq), SID(rq), &out, &err);
	finish(rq, t0, r, out, &err);
}

void http_h_state_patch(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_state_patch(rq->ctx->m, APP(rq), USER(rq), SID(rq), json_body(rq), &out,
				     &err);
	finish(rq, t0, r, out, &err);
}

void http_h_invocation_end(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	int64_t t0 = http_now_ns();
	int32_t r = memd_invocation_end(rq->ctx->m, APP(rq), USER(rq), SID(rq), http_req_param(rq, 3),
					&err);
	http_op_reply(rq, t0, r, &err, HTTP_STATUS_NO_CONTENT, NULL);
}
