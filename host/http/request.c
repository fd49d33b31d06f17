/* SPDX-License-Identifier: MIT */
#include "request.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <memd/plugin.h>
#include <microhttpd.h>

#include "errors.h"

#define NS_PER_SEC 1000000000LL
#define ERROR_MSG_MAX 1024
/* Room for an ETag: a quoted int64. */
#define ETAG_MAX 32

int64_t http_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

const char *http_req_param(const http_req *rq, size_t i)
{
	return i < rq->match.n_params ? rq->match.params[i] : NULL;
}

const char *http_req_query(const http_req *rq, const char *name)
{
	if (!rq->route || !rq->route->query)
		return NULL;
	for (size_t i = 0; rq->route->query[i] && i < HTTP_MAX_QUERY; i++)
		if (strcmp(rq->route->query[i], name) == 0)
			return rq->has_query[i] ? rq->query[i] : NULL;
	return NULL;
}

int32_t http_req_query_u64(const http_req *rq, const char *name, uint64_t dflt, uint64_t max,
			   uint64_t *ret, memd_error *err)
{
	const char *v = http_req_query(rq, name);
	unsigned long long n;
	char *end;

	if (!v) {
		*ret = dflt;
		return 0;
	}
	errno = 0;
	n = strtoull(v, &end, 10);
	if (!*v || *v < '0' || *v > '9' || *end || errno || n > max)
		return memd_error_set(err, MEMD_EINVAL, 0, "query parameter %s: must be an integer from 0 to %llu",
				      name, (unsigned long long)max);
	*ret = n;
	return 0;
}

int32_t http_req_query_bool(const http_req *rq, const char *name, int dflt, int *ret,
			    memd_error *err)
{
	const char *v = http_req_query(rq, name);
	if (!v) {
		*ret = dflt;
		return 0;
	}
	if (!*v || strcmp(v, "true") == 0 || strcmp(v, "1") == 0) {
		*ret = 1;
		return 0;
	}
	if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0) {
		*ret = 0;
		return 0;
	}
	return memd_error_set(err, MEMD_EINVAL, 0, "query parameter %s: must be true or false", name);
}

void http_reply_clear(http_req *rq)
{
	free(rq->out);
	rq->out = NULL;
	rq->out_len = 0;
	rq->out_type[0] = '\0';
	for (size_t i = 0; i < rq->n_extra; i++)
		free(rq->extra[i].value);
	rq->n_extra = 0;
	rq->retryable = 0;
	rq->error_name = NULL;
	rq->error_msg[0] = '\0';
}

void http_reply_json(http_req *rq, unsigned status, char *json)
{
	if (!json) {
		http_reply_error(rq, MEMD_ENOMEM, 0, "out of memory");
		return;
	}
	http_reply_bytes(rq, status, json, strlen(json), HTTP_JSON_TYPE);
}

void http_reply_bytes(http_req *rq, unsigned status, void *data, size_t len, const char *type)
{
	http_reply_clear(rq);
	rq->status = status;
	rq->out = data;
	rq->out_len = len;
	snprintf(rq->out_type, sizeof(rq->out_type), "%s", type);
}

void http_reply_empty(http_req *rq, unsigned status)
{
	http_reply_clear(rq);
	rq->status = status;
}

static void reply_error_text(http_req *rq, int32_t code, uint32_t flags, const char *msg)
{
	const http_error_kind *k = http_error_lookup(code, flags);
	char *body = http_error_body(k, msg);
	char retry[16];

	http_reply_clear(rq);
	rq->status = k->status;
	rq->error_name = k->name;
	{
		/* Kept for the log line; a longer message is cut. */
		size_t n = strnlen(msg, sizeof(rq->error_msg) - 1);
		memcpy(rq->error_msg, msg, n);
		rq->error_msg[n] = '\0';
	}
	if (body) {
		rq->out = body;
		rq->out_len = strlen(body);
		snprintf(rq->out_type, sizeof(rq->out_type), "%s", HTTP_JSON_TYPE);
	}
	if (k->retryable) {
		rq->retryable = 1;
		snprintf(retry, sizeof(retry), "%d", HTTP_RETRY_AFTER_SECONDS);
		http_reply_header(rq, "Retry-After", retry);
	}
}

void http_reply_error(http_req *rq, int32_t code, uint32_t flags, const char *fmt, ...)
{
	char msg[ERROR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	reply_error_text(rq, code, flags, msg);
}

void http_reply_versioned(http_req *rq, unsigned status, char *json, const char *location)
{
	json_t *o = json ? json_loads(json, 0, NULL) : NULL;
	json_t *v = json_object_get(o, "version");

	http_reply_json(rq, status, json);
	if (json_is_integer(v)) {
		char etag[ETAG_MAX];
		snprintf(etag, sizeof(etag), "\"%lld\"", (long long)json_integer_value(v));
		http_reply_header(rq, "ETag", etag);
	}
	if (location)
		http_reply_header(rq, "Location", location);
	json_decref(o);
}

int32_t http_req_if_match(const http_req *rq, const char *what, int64_t *ret,
			  memd_error *err)
{
	const char *h = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_IF_MATCH);
	char *end;
	long long v;
	size_t n;

	*ret = 0;
	if (!h || strcmp(h, "*") == 0)
		return 0;
	n = strlen(h);
	if (n >= 2 && h[0] == '"' && h[n - 1] == '"') {
		h++;
		n -= 2;
	}
	if (n == 0 || h[0] < '0' || h[0] > '9')
		goto bad;
	v = strtoll(h, &end, 10);
	if ((size_t)(end - h) != n || v < 1)
		goto bad;
	*ret = v;
	return 0;
bad:
	return memd_error_set(err, MEMD_EINVAL, 0,
			      "If-Match: must be a %s version (the ETag, e.g. \"3\") or *", what);
}

void http_reply_memd_error(http_req *rq, const memd_error *err)
{
	reply_error_text(rq, err->code, err->flags, err->msg);
}

void http_reply_header(http_req *rq, const char *name, const char *value)
{
	char *v;
	if (rq->n_extra == HTTP_MAX_EXTRA_HEADERS || !(v = strdup(value)))
		return;
	rq->extra[rq->n_extra].name = name;
	rq->extra[rq->n_extra].value = v;
	rq->n_extra++;
}

void http_op_done(http_req *rq, int64_t t0_ns, int32_t rc, const memd_error *err)
{
	if (!rq->route || rq->route->op < 0)
		return;
	http_metrics_op(rq->ctx->mt, (size_t)rq->route->op, rc, rc < 0 && err ? err->flags : 0,
			http_now_ns() - t0_ns);
}

void http_op_reply(http_req *rq, int64_t t0_ns, int32_t rc, const memd_error *err,
		   unsigned status, char *json)
{
	http_op_done(rq, t0_ns, rc, err);
	if (rc < 0)
		http_reply_memd_error(rq, err);
	else if (status == HTTP_STATUS_NO_CONTENT)
		http_reply_empty(rq, status);
	else
		http_reply_json(rq, status, json);
}

void http_req_free(http_req *rq)
{
	if (!rq)
		return;
	http_reply_clear(rq);
	http_match_clear(&rq->match);
	for (size_t i = 0; i < HTTP_MAX_QUERY; i++)
		free(rq->query[i]);
	free(rq->path);
	free(rq->body);
	pthread_mutex_destroy(&rq->lock);
	free(rq);
}
