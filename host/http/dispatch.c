/* SPDX-License-Identifier: MIT */
#include "dispatch.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <memd/plugin.h>

#include "auth.h"
#include "conns.h"
#include "errors.h"
#include "json/event_json.h"
#include "util/uuid.h"
#include "uri.h"
#include "watchdog.h"
#include "workers.h"

#define NS_PER_MS 1000000LL
#define NS_PER_MS_F 1e6
#define LOG_PATH_MAX 512
#define BODY_INITIAL_CAP 1024
#define REQUEST_ID_HEADER "X-Request-Id"
#define RAW_HEAD_MAX 512
#define SEC_FETCH_SITE_HEADER "Sec-Fetch-Site"
/* Routes under this prefix are about one app, their first parameter. */
#define APP_PATH_PREFIX "/v1/apps/{app}/"
/* Bytes a header line costs beyond its name and value (": " and CRLF). */
#define HEADER_LINE_OVERHEAD 4

/* ---- small helpers --------------------------------------------------------- */

static int request_id_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.' || c == ':';
}

/* A new UUIDv7 as the request id. */
static void new_request_id(http_req *rq)
{
	if (uuid_v7(rq->request_id) < 0)
		snprintf(rq->request_id, sizeof(rq->request_id), "%p", (void *)rq);
}

/* The client's X-Request-Id when it is 1..HTTP_REQUEST_ID_MAX safe
 * characters (the headers must have been read); else the id stays. */
static void client_request_id(http_req *rq, struct MHD_Connection *conn)
{
	const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, REQUEST_ID_HEADER);
	size_t len = v ? strlen(v) : 0;
	int ok = len > 0 && len <= HTTP_REQUEST_ID_MAX;

	for (size_t i = 0; ok && i < len; i++)
		ok = request_id_char(v[i]);
	if (ok)
		memcpy(rq->request_id, v, len + 1);
}

static size_t n_routes(void)
{
	size_t n;
	http_routes(&n);
	return n;
}

/* ---- sending -------------------------------------------------------------- */

static enum MHD_Result queue_reply(http_req *rq, struct MHD_Connection *conn)
{
	struct MHD_Response *resp;
	enum MHD_Result r;

	if (!rq->status)
		http_reply_error(rq, MEMD_EINTERNAL, 0, "the handler set no reply");
	if (rq->out)
		resp = MHD_create_response_from_buffer_with_free_callback(rq->out_len, rq->out, free);
	else
		resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	rq->out = NULL; /* the response owns it now */
	rq->bytes_out = rq->out_len;
	if (rq->out_type[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, rq->out_type);
	MHD_add_response_header(resp, REQUEST_ID_HEADER, rq->request_id);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	for (size_t i = 0; i < rq->n_extra; i++)
		MHD_add_response_header(resp, rq->extra[i].name, rq->extra[i].value);
	if (atomic_load(&rq->ctx->draining))
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	r = MHD_queue_response(conn, rq->status, resp);
	MHD_destroy_response(resp);
	rq->queued = r == MHD_YES;
	return r;
}

void http_dispatch_timeout(void *ud, http_req *rq)
{
	const http_error_kind *k = http_error_lookup(HTTP_E_TIMEOUT, 0);
	char msg[128], head[RAW_HEAD_MAX];
	char *body;
	int n;

	(void)ud;
	if (rq->handed_off) {
		/* Its work waited in the workers' queue past the deadline: out
		 * of the queue, answered on its connection. Once a worker has
		 * it, the facade call's own deadline applies. */
		http_workers_cancel(rq->ctx->workers, rq);
		return;
	}
	snprintf(msg, sizeof(msg), "the request was not received within %" PRId64 " ms",
		 rq->ctx->set->request_timeout_ms);
	body = http_error_body(k, msg);
	rq->aborted = 1;
	rq->status = k->status;
	rq->error_name = k->name;
	snprintf(rq->error_msg, sizeof(rq->error_msg), "%s", msg);
	if (!body)
		goto close;
	n = snprintf(head, sizeof(head),
		     "HTTP/1.1 %u %s\r\nContent-Type: " HTTP_JSON_TYPE "\r\nContent-Length: %zu\r\n"
		     "%s: %s\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
		     k->status, MHD_get_reason_phrase_for(k->status), strlen(body), REQUEST_ID_HEADER,
		     rq->request_id);
	/* Nothing else writes to the socket while a body is being received. */
	if (n > 0 && (size_t)n < sizeof(head) &&
	    send(rq->fd, head, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT | MSG_MORE) == n &&
	    send(rq->fd, body, strlen(body), MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)strlen(body))
		rq->bytes_out = strlen(body);
	free(body);
close:
	/* The connection's owner sees end of input and closes it. */
	shutdown(rq->fd, SHUT_RDWR);
}

/* ---- before the body -------------------------------------------------------- */

/* Does the request announce a body (chunked, or a Content-Length above 0)? */
static int has_body(struct MHD_Connection *conn)
{
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		return 1;
	return cl && strspn(cl, "0") != strlen(cl);
}

/* Is the Content-Type value v application/json, in any case, with or
 * without parameters ("application/json; charset=utf-8")? */
static int is_json_type(const char *v)
{
	size_t n = strlen(HTTP_JSON_TYPE);

	v += strspn(v, " \t");
	if (strncasecmp(v, HTTP_JSON_TYPE, n) != 0)
		return 0;
	v += n;
	v += strspn(v, " \t");
	return *v == '\0' || *v == ';';
}

/* Cross-site requests: a web page can make the browser POST to memd
 * without asking first (no CORS preflight) only with a body of type
 * text/plain, application/x-www-form-urlencoded or multipart/form-data,
 * or with no type at all. Every route that writes takes JSON, so a
 * request that may change something (any method but GET, HEAD and
 * DELETE, which a page cannot send with a body or at all cross-site)
 * must say application/json when it carries a type or a body. Artifact
 * bodies are any bytes with their own type; PUT is never sent
 * cross-site without a preflight, which memd does not answer. */
static int media_type_ok(const http_req *rq, struct MHD_Connection *conn)
{
	const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_CONTENT_TYPE);

	if (rq->route->body == HTTP_BODY_RAW || strcmp(rq->route->method, "GET") == 0 ||
	    strcmp(rq->route->method, "DELETE") == 0)
		return 1;
	if (v)
		return is_json_type(v);
	return !has_body(conn);
}


typedef struct query_ctx {
	http_req *rq;
	memd_error *err;
	int32_t r;
} query_ctx;

static enum MHD_Result query_item(void *cls, enum MHD_ValueKind kind, const char *key,
				  const char *value)
{
	query_ctx *q = cls;
	http_req *rq = q->rq;
	const char *const *allowed = rq->route->query;
	char *name = NULL;
	size_t i;

	(void)kind;
	if ((q->r = http_uri_decode(key, strlen(key), 0, "query parameter name", &name, q->err)) < 0)
		return MHD_NO;
	for (i = 0; allowed && allowed[i] && i < HTTP_MAX_QUERY; i++)
		if (strcmp(allowed[i], name) == 0)
			break;
	if (!allowed || !allowed[i] || i >= HTTP_MAX_QUERY) {
		q->r = memd_error_set(q->err, MEMD_EINVAL, 0, "unknown query parameter '%.64s'", name);
		free(name);
		return MHD_NO;
	}
	if (rq->has_query[i]) {
		q->r = memd_error_set(q->err, MEMD_EINVAL, 0, "query parameter %s given twice", name);
		free(name);
		return MHD_NO;
	}
	{
		char what[96];
		snprintf(what, sizeof(what), "query parameter %s", name);
		q->r = http_uri_decode(value ? value : "", value ? strlen(value) : 0, 0, what,
				       &rq->query[i], q->err);
	}
	free(name);
	if (q->r < 0)
		return MHD_NO;
	rq->has_query[i] = 1;
	return MHD_YES;
}

static enum MHD_Result header_size(void *cls, enum MHD_ValueKind kind, const char *key,
				   const char *value)
{
	size_t *total = cls;
	(void)kind;
	*total += strlen(key) + (value ? strlen(value) : 0) + HEADER_LINE_OVERHEAD;
	return MHD_YES;
}

/* The app a matched route is about (its first path parameter): NULL for
 * a route without one, "" when matching failed (r < 0) on a bad path
 * parameter, so that it is nobody's app. */
static const char *route_app(const http_req *rq, int32_t r)
{
	if (strncmp(rq->route->pattern, APP_PATH_PREFIX, strlen(APP_PATH_PREFIX)) != 0)
		return NULL;
	return r < 0 || rq->match.n_params == 0 ? "" : rq->match.params[0];
}

int32_t http_req_need_scope(const http_req *rq, int32_t scope, const char *what,
			    memd_error *err)
{
	const settings *set = rq->ctx->set;
	memd_error aerr = { .struct_size = sizeof(aerr) };
	int32_t r = http_auth_check(set->api_keys, set->n_api_keys,
				    MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
								MHD_HTTP_HEADER_AUTHORIZATION),
				    scope, route_app(rq, 0), &aerr);

	if (r < 0)
		return memd_error_set(err, MEMD_EFORBIDDEN, 0, "%s needs an API key of scope %s or above",
				      what, http_auth_scope_name(scope));
	return 0;
}

static enum MHD_Result count_length(void *cls, enum MHD_ValueKind kind, const char *key,
				    const char *value)
{
	size_t *n = cls;
	(void)kind;
	(void)value;
	*n += strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0;
	return MHD_YES;
}

/* Where the body ends must be beyond doubt (a proxy in front of memd
 * reading it otherwise is request smuggling): one Content-Length, and
 * not together with Transfer-Encoding (libmicrohttpd takes either). */
static int32_t body_framing_check(struct MHD_Connection *conn, memd_error *err)
{
	size_t lengths = 0;

	MHD_get_connection_values(conn, MHD_HEADER_KIND, count_length, &lengths);
	if (lengths > 1)
		return memd_error_set(err, MEMD_EINVAL, 0, "more than one Content-Length header");
	if (lengths && MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						   MHD_HTTP_HEADER_TRANSFER_ENCODING))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "both Content-Length and Transfer-Encoding: send one");
	return 0;
}

/* Everything decided from the request line and headers. Returns 0 to go
 * on, or -1 when a reply was set. */
static int begin(http_req *rq, struct MHD_Connection *conn, const char *url,
		 const char *version)
{
	http_ctx *ctx = rq->ctx;
	const settings *set = ctx->set;
	memd_error err = { .struct_size = sizeof(err) };
	size_t target = rq->target_len ? rq->target_len : strlen(url);
	size_t hdr = strlen(url) + strlen(rq->method);
	const char *v;
	int32_t r;

	/* libmicrohttpd ends the target at a NUL and serves what came before
	 * it ("GET /healthz\0/../v1/plugins"): the version follows the
	 * target's end, so a NUL inside the target leaves a gap before it. */
	if (rq->target_len && version[0] &&
	    (uintptr_t)version != (uintptr_t)url + rq->target_len + 1) {
		http_reply_error(rq, MEMD_EINVAL, 0, "the request target contains a NUL byte");
		return -1;
	}
	if (atomic_load(&ctx->draining)) {
		http_reply_error(rq, HTTP_E_DRAINING, 0, "memd is shutting down; retry on another instance");
		return -1;
	}
	if ((r = http_host_check(&ctx->hosts,
				 MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST),
				 strcmp(version, MHD_HTTP_VERSION_1_1) == 0, &err)) < 0) {
		http_reply_memd_error(rq, &err);
		return -1;
	}
	if (set->n_api_keys == 0 &&
	    (r = http_browser_check(
		     MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ORIGIN),
		     MHD_lookup_connection_value(conn, MHD_HEADER_KIND, SEC_FETCH_SITE_HEADER),
		     MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST),
		     &err)) < 0) {
		http_reply_memd_error(rq, &err);
		return -1;
	}
	if ((r = body_framing_check(conn, &err)) < 0) {
		http_reply_memd_error(rq, &err);
		return -1;
	}
	if ((int64_t)(target + strlen(rq->method)) > set->max_header_bytes) {
		http_reply_error(rq, HTTP_E_URI, 0,
				 "the request target is %zu bytes; the limit for the request line is %" PRId64
				 " (server.max_header_bytes)", target, set->max_header_bytes);
		return -1;
	}
	MHD_get_connection_values(conn, MHD_HEADER_KIND, header_size, &hdr);
	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, header_size, &hdr);
	if ((int64_t)hdr > set->max_header_bytes) {
		http_reply_error(rq, HTTP_E_HEADERS, 0,
				 "the request line and headers are %zu bytes; the limit is %" PRId64, hdr,
				 set->max_header_bytes);
		return -1;
	}
	r = http_router_match(rq->method, url, &rq->match, &err);
	if (r < 0 && r != MEMD_EINVAL) {
		http_reply_memd_error(rq, &err);
		if (r == HTTP_E_METHOD)
			http_reply_header(rq, MHD_HTTP_HEADER_ALLOW, rq->match.allow);
		return -1;
	}
	/* The route is known (even when a path parameter is bad): credentials
	 * are checked before anything about the request is judged. */
	rq->route_index = rq->match.index;
	rq->route = &http_routes(&(size_t){ 0 })[rq->match.index];
	{
		memd_error aerr = { .struct_size = sizeof(aerr) };
		int32_t ar = http_auth_check(set->api_keys, set->n_api_keys,
					     MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
									 MHD_HTTP_HEADER_AUTHORIZATION),
					     rq->route->scope, route_app(rq, r), &aerr);
		if (ar < 0) {
			http_reply_memd_error(rq, &aerr);
			if (ar == MEMD_EAUTH)
				http_reply_header(rq, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"memd\"");
			return -1;
		}
	}
	if (r < 0) {
		http_reply_memd_error(rq, &err);
		return -1;
	}
	{
		query_ctx q = { rq, &err, 0 };
		MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, query_item, &q);
		if (q.r < 0) {
			http_reply_memd_error(rq, &err);
			return -1;
		}
	}
	if (!media_type_ok(rq, conn)) {
		http_reply_error(rq, HTTP_E_MEDIA, 0,
				 "%s %s takes a body of Content-Type: " HTTP_JSON_TYPE, rq->method,
				 rq->route->pattern);
		return -1;
	}
	v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (v) {
		char *end;
		unsigned long long len = strtoull(v, &end, 10);
		if (len > 0 && rq->route->body == HTTP_BODY_NONE) {
			http_reply_error(rq, MEMD_EINVAL, 0, "%s %s takes no request body", rq->method,
					 rq->route->pattern);
			return -1;
		}
		if (len > (unsigned long long)set->max_body_bytes) {
			http_reply_error(rq, MEMD_ETOOBIG, 0,
					 "the body is %llu bytes; the limit is %" PRId64 " (server.max_body_bytes)",
					 len, set->max_body_bytes);
			return -1;
		}
	}
	v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	if (v && rq->route->body == HTTP_BODY_RAW) {
		if (strlen(v) >= sizeof(rq->content_type)) {
			http_reply_error(rq, MEMD_EINVAL, 0, "Content-Type: longer than %zu bytes",
					 sizeof(rq->content_type) - 1);
			return -1;
		}
		snprintf(rq->content_type, sizeof(rq->content_type), "%s", v);
	}
	return 0;
}

/* ---- the body ------------------------------------------------------------- */

static enum MHD_Result receive(http_req *rq, const char *data, size_t *size)
{
	const settings *set = rq->ctx->set;
	size_t n = *size;

	*size = 0;
	pthread_mutex_lock(&rq->lock);
	if (rq->aborted) {
		pthread_mutex_unlock(&rq->lock);
		return MHD_NO;
	}
	if (rq->route->body == HTTP_BODY_NONE) {
		/* Dropped: the route answers 400 once the request is in. */
		rq->unexpected_body = 1;
		pthread_mutex_unlock(&rq->lock);
		return MHD_YES;
	}
	if (rq->too_big || rq->body_len + n > (size_t)set->max_body_bytes) {
		/* Keep reading (and dropping) so that the 413 can be sent. */
		rq->too_big = 1;
		pthread_mutex_unlock(&rq->lock);
		return MHD_YES;
	}
	if (rq->body_len + n + 1 > rq->body_cap) {
		size_t cap = rq->body_cap ? rq->body_cap : BODY_INITIAL_CAP;
		char *nb;
		while (cap < rq->body_len + n + 1)
			cap *= 2;
		nb = realloc(rq->body, cap);
		if (!nb) {
			pthread_mutex_unlock(&rq->lock);
			return MHD_NO;
		}
		rq->body = nb;
		rq->body_cap = cap;
	}
	memcpy(rq->body + rq->body_len, data, n);
	rq->body_len += n;
	rq->body[rq->body_len] = '\0';
	pthread_mutex_unlock(&rq->lock);
	return MHD_YES;
}

/* The whole request is in: check what only its end can tell. Returns 0
 * to run the handler, or -1 when a reply was set. */
static int complete(http_req *rq)
{
	const settings *set = rq->ctx->set;

	if (rq->unexpected_body) {
		http_reply_error(rq, MEMD_EINVAL, 0, "%s %s takes no request body", rq->method,
				 rq->route->pattern);
		return -1;
	}
	if (rq->too_big) {
		http_reply_error(rq, MEMD_ETOOBIG, 0, "the body exceeds %" PRId64 " bytes (server.max_body_bytes)",
				 set->max_body_bytes);
		return -1;
	}
	if (rq->route->body != HTTP_BODY_NONE && http_now_ns() > rq->deadline_ns) {
		http_reply_error(rq, HTTP_E_TIMEOUT, 0, "the request was not received within %" PRId64 " ms",
				 set->request_timeout_ms);
		return -1;
	}
	if (rq->route->body == HTTP_BODY_JSON && rq->body_len &&
	    memchr(rq->body, '\0', rq->body_len)) {
		http_reply_error(rq, MEMD_EINVAL, 0, "body is not valid JSON: it contains a NUL byte");
		return -1;
	}
	return 0;
}

/* Does rq go to a worker? Every route but the reads (GET): a write may
 * sleep in the store's group commit, which must not hold up the other
 * connections of libmicrohttpd's thread. A read does not wait for a
 * commit, and runs where it is (a hand-off costs more than it saves). */
static int hand_off(const http_req *rq)
{
	return rq->ctx->workers && strcmp(rq->route->method, "GET") != 0;
}

/* The reply of a handed-off request is set: let its connection queue it.
 * The caller must not touch rq afterwards (libmicrohttpd may complete and
 * free it at once). */
static void hand_back(http_req *rq)
{
	struct MHD_Connection *conn = rq->conn;

	atomic_store(&rq->work_done, 1);
	MHD_resume_connection(conn);
}

/* The reply of a write whose deadline passed while it waited for a
 * worker: nothing was done, so it may be sent again. */
static void reply_no_worker(http_req *rq)
{
	http_reply_error(rq, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
			 "no worker was free within %" PRId64 " ms (server.request_timeout_ms); "
			 "nothing was done", rq->ctx->set->request_timeout_ms);
}

void http_dispatch_work(void *ud, http_req *rq)
{
	(void)ud;
	/* Out of the queue: the queue's deadline no longer applies (the
	 * facade calls have their own). */
	http_watchdog_remove(rq->ctx->wd, rq);
	if (http_now_ns() > rq->deadline_ns)
		reply_no_worker(rq);
	else
		rq->route->handler(rq);
	hand_back(rq);
}

void http_dispatch_drop(void *ud, http_req *rq, int stopping)
{
	(void)ud;
	if (stopping) {
		http_watchdog_remove(rq->ctx->wd, rq);
		http_reply_error(rq, HTTP_E_DRAINING, 0,
				 "memd is shutting down; nothing was done; retry on another instance");
	} else {
		/* From the watchdog, which took rq off its list. */
		reply_no_worker(rq);
	}
	hand_back(rq);
}

/* Run rq's handler on a worker: suspend the connection until the reply
 * is set (the next access call queues it). The watchdog bounds the time
 * in the queue by the request's deadline. */
static enum MHD_Result submit(http_req *rq, struct MHD_Connection *conn)
{
	rq->handed_off = 1;
	MHD_suspend_connection(conn);
	http_watchdog_add(rq->ctx->wd, rq);
	if (http_workers_submit(rq->ctx->workers, rq) < 0) {
		/* The pool stopped: shutdown is past its drain. */
		http_watchdog_remove(rq->ctx->wd, rq);
		http_reply_error(rq, HTTP_E_DRAINING, 0, "memd is shutting down; retry on another instance");
		hand_back(rq);
	}
	return MHD_YES;
}

/* ---- MHD callbacks ------------------------------------------------------------ */

/* A request for conn, its path (up to the query) from url. */
static http_req *req_new(http_ctx *ctx, struct MHD_Connection *conn, const char *url,
			 const char *method)
{
	http_req *rq = calloc(1, sizeof(*rq));
	const union MHD_ConnectionInfo *ci;

	if (!rq)
		return NULL;
	rq->ctx = ctx;
	rq->conn = conn;
	rq->fd = -1;
	rq->start_ns = http_now_ns();
	rq->deadline_ns = rq->start_ns + ctx->set->request_timeout_ms * NS_PER_MS;
	rq->route_index = n_routes();
	pthread_mutex_init(&rq->lock, NULL);
	snprintf(rq->method, sizeof(rq->method), "%s", method);
	{
		size_t n = strcspn(url, "?");
		rq->path = strndup(url, n < LOG_PATH_MAX ? n : LOG_PATH_MAX);
	}
	if (!rq->path) {
		http_req_free(rq);
		return NULL;
	}
	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci)
		rq->fd = ci->connect_fd;
	new_request_id(rq);
	http_metrics_in_flight_add(ctx->mt, 1);
	return rq;
}

void *http_dispatch_uri_log(void *cls, const char *uri, struct MHD_Connection *conn)
{
	http_ctx *ctx = cls;
	http_req *rq = req_new(ctx, conn, uri ? uri : "", "");
	if (rq) {
		rq->target_len = uri ? strlen(uri) : 0;
		http_conns_head_id(ctx->conns, conn, rq->request_id);
	}
	return rq;
}

enum MHD_Result http_dispatch_access(void *cls, struct MHD_Connection *conn, const char *url,
				     const char *method, const char *version,
				     const char *upload_data, size_t *upload_data_size,
				     void **con_cls)
{
	http_ctx *ctx = cls;
	http_req *rq = *con_cls;

	if (!rq || !rq->begun) {
		http_conns_head_done(ctx->conns, conn);
		if (!rq && !(rq = req_new(ctx, conn, url, method)))
			return MHD_NO;
		*con_cls = rq;
		rq->begun = 1;
		snprintf(rq->method, sizeof(rq->method), "%s", method);
		client_request_id(rq, conn);
		if (begin(rq, conn, url, version) < 0) {
			/* Without a body the answer waits for the next call, so that
			 * the connection can stay open; with one it goes now, and the
			 * body is never read. */
			if (!has_body(conn))
				return MHD_YES;
			return queue_reply(rq, conn);
		}
		if (rq->route->body != HTTP_BODY_NONE && has_body(conn))
			http_watchdog_add(ctx->wd, rq);
		return MHD_YES;
	}
	if (rq->queued) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (rq->handed_off) {
		/* Resumed: the worker set the reply. */
		*upload_data_size = 0;
		return atomic_load(&rq->work_done) ? queue_reply(rq, conn) : MHD_YES;
	}
	if (rq->status) {
		/* An answer decided before the body (see above). */
		*upload_data_size = 0;
		return queue_reply(rq, conn);
	}
	if (*upload_data_size)
		return receive(rq, upload_data, upload_data_size);
	http_watchdog_remove(ctx->wd, rq);
	pthread_mutex_lock(&rq->lock);
	if (rq->aborted) {
		pthread_mutex_unlock(&rq->lock);
		return MHD_NO;
	}
	pthread_mutex_unlock(&rq->lock);
	if (complete(rq) == 0) {
		if (hand_off(rq))
			return submit(rq, conn);
		rq->route->handler(rq);
	}
	return queue_reply(rq, conn);
}

static void client_address(struct MHD_Connection *conn, char *buf, size_t cap)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	buf[0] = '\0';
	if (!ci || !ci->client_addr)
		return;
	if (getnameinfo(ci->client_addr,
			ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
								: sizeof(struct sockaddr_in),
			buf, (socklen_t)cap, NULL, 0, NI_NUMERICHOST) != 0)
		buf[0] = '\0';
}

/* A printable copy of the raw path for the log. */
static void log_path(const char *path, char *buf, size_t cap)
{
	size_t n = 0;
	for (; path[n] && n + 1 < cap; n++) {
		unsigned char c = (unsigned char)path[n];
		buf[n] = c < 0x20 || c >= 0x7f ? '?' : (char)c;
	}
	buf[n] = '\0';
}

static void log_request(http_req *rq, struct MHD_Connection *conn, unsigned status,
			int64_t duration_ns, enum MHD_RequestTerminationCode toe)
{
	http_log *log = rq->ctx->log;
	int32_t level = status >= 500 ? MEMD_LOG_ERROR : MEMD_LOG_INFO;
	char path[LOG_PATH_MAX + 1], addr[NI_MAXHOST];
	json_t *f;

	if (!http_log_enabled(log, level))
		return;
	log_path(rq->path, path, sizeof(path));
	client_address(conn, addr, sizeof(addr));
	f = json_pack("{s:s,s:s,s:s,s:s,s:i,s:f,s:I,s:I,s:s}", "request_id", rq->request_id, "method",
		      ej_utf8_valid(rq->method, strlen(rq->method)) ? rq->method : "?", "path", path,
		      "route", rq->route ? rq->route->pattern : "unmatched", "status", (int)status,
		      "duration_ms", (double)duration_ns / NS_PER_MS_F, "bytes_in",
		      (json_int_t)rq->body_len, "bytes_out", (json_int_t)rq->bytes_out, "remote", addr);
	if (f && rq->error_name) {
		char msg[HTTP_ERROR_LOG_MAX];
		snprintf(msg, sizeof(msg), "%s", rq->error_msg);
		if (!ej_utf8_valid(msg, strlen(msg)))
			for (char *p = msg; *p; p++)
				if ((unsigned char)*p >= 0x80)
					*p = '?';
		json_object_set_new(f, "error", json_pack("{s:s,s:s}", "code", rq->error_name, "message", msg));
	}
	if (f && rq->by_library)
		json_object_set_new(f, "answered_by", json_string("libmicrohttpd"));
	if (f && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
		json_object_set_new(f, "closed",
				    json_string(toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "idle timeout"
						: toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN ? "shutdown"
						: toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT ? "client closed"
						: "error"));
	http_log_write(log, level, "request", f);
}

void http_dispatch_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			     enum MHD_RequestTerminationCode toe)
{
	http_ctx *ctx = cls;
	http_req *rq = *con_cls;
	unsigned status;
	int64_t duration;

	http_conns_head_next(ctx->conns, conn);
	if (!rq)
		return;
	*con_cls = NULL;
	http_watchdog_remove(ctx->wd, rq);
	duration = http_now_ns() - rq->start_ns;
	status = rq->queued || rq->aborted ? rq->status : 0;
	if (!status) {
		/* libmicrohttpd answered by itself (a malformed request, a bad
		 * Content-Length or chunk): log the status it sent. */
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS);
		if (ci && ci->http_status) {
			status = ci->http_status;
			rq->by_library = 1;
		} else if (http_conns_expired(ctx->conns, conn)) {
			/* The head deadline answered (conns.c), with this id. */
			status = http_error_lookup(HTTP_E_TIMEOUT, 0)->status;
			rq->error_name = http_error_lookup(HTTP_E_TIMEOUT, 0)->name;
			snprintf(rq->error_msg, sizeof(rq->error_msg), "%s",
				 "the request line and headers were not received within "
				 "server.header_timeout_s");
		}
		if (!rq->begun && !rq->error_name)
			client_request_id(rq, conn);
	}
	http_metrics_request(ctx->mt, rq->route_index, status, duration);
	log_request(rq, conn, status, duration, toe);
	http_metrics_in_flight_add(ctx->mt, -1);
	http_req_free(rq);
}

size_t http_dispatch_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
	(void)cls;
	(void)conn;
	return strlen(s);
}
