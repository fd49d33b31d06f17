/* SPDX-License-Identifier: MIT */
/*
 * Memory extraction (the facade's memd_memory_extract and
 * memd_memories_sweep): extract a session's unread events into long-term
 * memories now, and run one pass of the memory worker. The memory
 * records themselves have their own routes.
 */
#include <stdint.h>

#include <memd/memd.h>
#include <memd/plugin.h>

#include "request.h"
#include "routes.h"

#define APP(rq) http_req_param(rq, 0)
#define USER(rq) http_req_param(rq, 1)
#define SID(rq) http_req_param(rq, 2)

void http_h_memory_extract(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_memory_extract(rq->ctx->m, APP(rq), USER(rq), SID(rq), &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_memories_sweep(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_memories_sweep(rq->ctx->m, &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}
