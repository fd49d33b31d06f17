/* SPDX-License-Identifier: MIT */
/*
 * Run checkpoints (the facade's memd_checkpoint_*): put (200 with the
 * summary; creates the session), pending writes (204), get by id and the
 * latest, list of a session or of a user (metadata filter, cursor
 * paging), delete (204), and an app's resumable runs. ?checkpoint_ns=
 * names the namespace ("" when absent, but for list and delete, where
 * absent means every namespace).
 */
#include <microhttpd.h>
#include <stdint.h>
#include <stdlib.h>

#include <memd/memd.h>

#include "request.h"
#include "routes.h"

#define APP(rq) http_req_param(rq, 0)
#define USER(rq) http_req_param(rq, 1)
#define SID(rq) http_req_param(rq, 2)
#define CID(rq) http_req_param(rq, 3)
#define NS(rq) http_req_query(rq, "checkpoint_ns")

void http_h_checkpoint_put(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_checkpoint_put(rq->ctx->m, APP(rq), USER(rq), SID(rq), NS(rq), CID(rq),
					rq->body_len ? rq->body : NULL, &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_checkpoint_writes(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	int64_t t0 = http_now_ns();
	int32_t r = memd_checkpoint_put_writes(rq->ctx->m, APP(rq), USER(rq), SID(rq), NS(rq),
					       CID(rq), rq->body_len ? rq->body : NULL, &err);

	http_op_reply(rq, t0, r, &err, HTTP_STATUS_NO_CONTENT, NULL);
}

void http_h_checkpoint_get(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_checkpoint_get(rq->ctx->m, APP(rq), USER(rq), SID(rq), NS(rq), CID(rq),
					&out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_checkpoint_latest(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_checkpoint_get(rq->ctx->m, APP(rq), USER(rq), SID(rq), NS(rq), NULL, &out,
					&err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

/* A list of the session sid (NULL: the user's, ?session_id= naming one). */
static void checkpoint_list(http_req *rq, const char *sid)
{
	memd_error err = { .struct_size = sizeof(err) };
	memd_checkpoint_list_options o = { .struct_size = sizeof(o) };
	char *out = NULL;
	uint64_t limit;
	int full = 0;
	int64_t t0;
	int32_t r;

	if (http_req_query_u64(rq, "limit", 0, MEMD_LIST_LIMIT_MAX, &limit, &err) < 0 ||
	    http_req_query_bool(rq, "full", 0, &full, &err) < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	o.limit = (uint32_t)limit;
	o.full = full;
	o.cursor = http_req_query(rq, "cursor");
	o.session_id = sid ? sid : http_req_query(rq, "session_id");
	o.ns = NS(rq);
	o.before = http_req_query(rq, "before");
	o.metadata_json = http_req_query(rq, "metadata");
	t0 = http_now_ns();
	r = memd_checkpoint_list(rq->ctx->m, APP(rq), USER(rq), &o, &out, &err);
	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_checkpoint_list(http_req *rq)
{
	checkpoint_list(rq, SID(rq));
}

void http_h_checkpoint_list_user(http_req *rq)
{
	checkpoint_list(rq, NULL);
}

void http_h_checkpoint_delete(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	int64_t t0 = http_now_ns();
	int32_t r = memd_checkpoint_delete(rq->ctx->m, APP(rq), USER(rq), SID(rq), NS(rq), &err);

	http_op_reply(rq, t0, r, &err, HTTP_STATUS_NO_CONTENT, NULL);
}

void http_h_checkpoint_resumable(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	memd_checkpoint_resumable_options o = { .struct_size = sizeof(o) };
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
	o.resume = http_req_query(rq, "resume");
	t0 = http_now_ns();
	r = memd_checkpoint_resumable(rq->ctx->m, APP(rq), &o, &out, &err);
	http_op_reply(rq, t0, r, &err, 200, out);
}
