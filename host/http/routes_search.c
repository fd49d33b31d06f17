/* SPDX-License-Identifier: MIT */
/* Search of one (app, user): the facade's memd_search (host/index/).
 * Its index rebuild is a background job (routes_jobs.c). */
#include <jansson.h>
#include <stdint.h>

#include <memd/memd.h>

#include "request.h"
#include "routes.h"

#define APP(rq) http_req_param(rq, 0)
#define USER(rq) http_req_param(rq, 1)

void http_h_search(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_search(rq->ctx->m, APP(rq), USER(rq), rq->body_len ? rq->body : NULL, &out,
				&err);

	http_op_reply(rq, t0, r, &err, 200, out);
}
