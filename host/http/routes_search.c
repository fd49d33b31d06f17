/* SPDX-License-Identifier: MIT */
/* Search and index rebuild of one (app, user): the facade's memd_search
 * and memd_index_rebuild (host/index/). */
#include <jansson.h>
#include <stdint.h>

#include <memd/memd.h>

#include "request.h"
#include "routes.h"

#define APP(rq) http_req_param(rq, 0)
#define USER(rq) http_req_param(rq, 1)
#define NS_PER_SEC 1e9

void http_h_search(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_search(rq->ctx->m, APP(rq), USER(rq), rq->body_len ? rq->body : NULL, &out,
				&err);

	http_op_done(rq, t0, r, &err);
	if (r < 0)
		http_reply_memd_error(rq, &err);
	else
		http_reply_json(rq, 200, out);
}

void http_h_index_rebuild(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	int64_t t0 = http_now_ns();
	int32_t r = memd_index_rebuild(rq->ctx->m, APP(rq), USER(rq), NULL, NULL, &err);
	json_t *o;

	http_op_done(rq, t0, r, &err);
	if (r < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	o = json_pack("{s:s,s:s,s:f}", "app", APP(rq), "user", USER(rq), "seconds",
		      (double)(http_now_ns() - t0) / NS_PER_SEC);
	http_reply_json(rq, 200, o ? json_dumps(o, JSON_COMPACT) : NULL);
	json_decref(o);
}
