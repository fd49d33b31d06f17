/* SPDX-License-Identifier: MIT */
/* Probes (/healthz, /readyz), /metrics, /openapi.json, /v1/plugins and
 * deleting a user. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/memd.h>

#include "errors.h"
#include "memd-build.h"
#include "request.h"
#include "routes.h"

#define PROMETHEUS_TYPE "text/plain; version=0.0.4; charset=utf-8"

void http_h_healthz(http_req *rq)
{
	http_reply_json(rq, 200, strdup("{\"status\":\"ok\"}"));
}

void http_h_readyz(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	int64_t t0 = http_now_ns();
	char *json = NULL, retry[16];
	int ready = 0;
	int32_t r = memd_ready_json(rq->ctx->m, &ready, &json, &err);

	http_op_done(rq, t0, r, &err);
	if (r < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	/* The report names every store that is not ready and why. */
	http_reply_json(rq, ready ? 200 : 503, strdup(json));
	memd_free(json);
	if (!ready) {
		/* Not ready is always worth retrying: a store comes back. */
		snprintf(retry, sizeof(retry), "%d", HTTP_RETRY_AFTER_SECONDS);
		http_reply_header(rq, "Retry-After", retry);
	}
}

void http_h_metrics(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *facade = NULL, *text;
	size_t len = 0;

	if (memd_metrics_text(rq->ctx->m, &facade, &err) < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	text = http_metrics_render(rq->ctx->mt, MEMD_VERSION, facade, &len);
	memd_free(facade);
	if (!text) {
		http_reply_error(rq, MEMD_ENOMEM, 0, "out of memory");
		return;
	}
	http_reply_bytes(rq, 200, text, len, PROMETHEUS_TYPE);
}

void http_h_openapi(http_req *rq)
{
	char *copy = malloc(rq->ctx->openapi_len + 1);
	if (!copy) {
		http_reply_error(rq, MEMD_ENOMEM, 0, "out of memory");
		return;
	}
	memcpy(copy, rq->ctx->openapi_json, rq->ctx->openapi_len + 1);
	http_reply_bytes(rq, 200, copy, rq->ctx->openapi_len, HTTP_JSON_TYPE);
}

void http_h_plugins(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_plugins_json(rq->ctx->m, &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_user_delete(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	int64_t t0 = http_now_ns();
	int32_t r = memd_user_delete(rq->ctx->m, http_req_param(rq, 0), http_req_param(rq, 1), &err);

	http_op_reply(rq, t0, r, &err, HTTP_STATUS_NO_CONTENT, NULL);
}
