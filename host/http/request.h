/* SPDX-License-Identifier: MIT */
/*
 * http request: what a route handler sees of one request (the server
 * context, path parameters, query, body) and how it replies. A handler
 * sets exactly one reply; the dispatcher (dispatch.c) sends it, logs the
 * request and counts it in the metrics.
 */
#ifndef MEMD_HTTP_REQUEST_H
#define MEMD_HTTP_REQUEST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <memd/memd.h>

#include "auth.h"
#include "log.h"
#include "metrics.h"
#include "router.h"
#include "config/settings.h"

#define HTTP_REQUEST_ID_MAX 128
#define HTTP_MAX_EXTRA_HEADERS 6
#define HTTP_CONTENT_TYPE_MAX 256
#define HTTP_ERROR_LOG_MAX 256

#define HTTP_JSON_TYPE "application/json"

/* What every request shares: owned by the server (server.c). */
typedef struct http_ctx {
	memd *m;
	const settings *set;
	http_hosts hosts;              /* the Host values answered (auth.h) */
	http_log *log;
	http_metrics *mt;
	const char *openapi_json;      /* the spec served at /openapi.json */
	size_t openapi_len;
	atomic_int draining;           /* nonzero once shutdown began */
	struct http_watchdog *wd;      /* receive deadlines (watchdog.h) */
	struct http_conns *conns;      /* request head deadlines (conns.h) */
	struct mcp_sessions *mcp;      /* the sessions of /mcp (mcp/mcp_sessions.h) */
	struct http_workers *workers;  /* run the requests that may block on a commit (workers.h) */
} http_ctx;

typedef struct http_header {
	const char *name;              /* static */
	char *value;                   /* owned */
} http_header;

struct http_req {
	http_ctx *ctx;
	void *conn;                    /* struct MHD_Connection */
	const http_route *route;       /* NULL when unmatched */
	size_t route_index;            /* n_routes when unmatched */
	http_match match;              /* path parameters */
	char *query[HTTP_MAX_QUERY];   /* decoded values, aligned with route->query */
	int has_query[HTTP_MAX_QUERY];

	char method[16];
	char *path;                    /* raw path, for the log */
	size_t target_len;             /* raw request target with the query, up to a NUL; 0: unknown */
	int begun;                     /* the access handler saw the headers */
	int by_library;                /* libmicrohttpd sent the answer itself */
	char request_id[HTTP_REQUEST_ID_MAX + 1];
	char content_type[HTTP_CONTENT_TYPE_MAX];
	int64_t start_ns;              /* CLOCK_MONOTONIC */
	int64_t deadline_ns;           /* the whole request must be received by then */

	/* body (receive state is guarded by lock: the watchdog reads it) */
	pthread_mutex_t lock;
	char *body;
	size_t body_len, body_cap;
	int receiving;                 /* registered with the watchdog */
	int aborted;                   /* a raw error was sent; the connection is closing */
	int too_big;                   /* the body went over max_body_bytes */
	int unexpected_body;           /* a body came for a route that takes none */
	int fd;                        /* the connection's socket */
	struct http_req *wd_prev, *wd_next;

	/* hand-off to a worker (workers.h; dispatch.c): the connection is
	 * suspended from submit until the worker (or whoever drops the
	 * request) resumes it with the reply set */
	int handed_off;                /* submitted to the workers */
	int work_queued;               /* in the workers' queue (under its lock) */
	struct http_req *work_next;    /* the workers' queue (under its lock) */
	atomic_int work_done;          /* the reply is set: queue it on the next access call */

	/* reply */
	unsigned status;               /* 0 until set */
	char *out;                     /* malloc'd */
	size_t out_len;
	char out_type[HTTP_CONTENT_TYPE_MAX];
	http_header extra[HTTP_MAX_EXTRA_HEADERS];
	size_t n_extra;
	int retryable;
	const char *error_name;        /* for the log: the error body's code */
	char error_msg[HTTP_ERROR_LOG_MAX];
	size_t bytes_out;
	int queued;                    /* a reply was handed to the HTTP library */
};

/* ---- inputs ------------------------------------------------------------- */

/* The i-th path parameter (in pattern order). */
const char *http_req_param(const http_req *rq, size_t i);
/* The decoded value of query parameter name (one the route accepts), or
 * NULL if absent. A parameter given without "=value" reads as "". */
const char *http_req_query(const http_req *rq, const char *name);
/* Typed query values. Absent: *ret = dflt and 0. Present but not a
 * number in [0, max] (or true/false/1/0 for bools): MEMD_EINVAL with a
 * message naming the parameter. */
int32_t http_req_query_u64(const http_req *rq, const char *name, uint64_t dflt, uint64_t max,
			   uint64_t *ret, memd_error *err);
int32_t http_req_query_bool(const http_req *rq, const char *name, int dflt, int *ret,
			    memd_error *err);
/* The version an If-Match header names into *ret (0: no header, or
 * "*"). A version is a quoted ("3", the ETag) or bare (3) integer >= 1;
 * else MEMD_EINVAL with a message saying it must be a version of what
 * (e.g. "memory"). */
int32_t http_req_if_match(const http_req *rq, const char *what, int64_t *ret,
			  memd_error *err);

/* Does the request's API key also have scope (a scope above its route's,
 * for a query parameter that shows more, e.g. include_hidden)? 0, or
 * MEMD_EFORBIDDEN with a message naming what (e.g. "query parameter
 * include_hidden") needs which scope. With no keys configured: 0. */
int32_t http_req_need_scope(const http_req *rq, int32_t scope, const char *what,
			    memd_error *err);

/* Monotonic clock in ns. */
int64_t http_now_ns(void);

/* ---- replies (each replaces any earlier one) ----------------------------- */

/* Reply with JSON text (malloc'd; taken over). NULL json = ENOMEM reply. */
void http_reply_json(http_req *rq, unsigned status, char *json);
/* Reply with bytes (malloc'd, taken over) of the given Content-Type. */
void http_reply_bytes(http_req *rq, unsigned status, void *data, size_t len, const char *type);
/* Reply with no body (204 and the like). */
void http_reply_empty(http_req *rq, unsigned status);
/* Reply with the error body for code (MEMD_E* or HTTP_E*). */
void http_reply_error(http_req *rq, int32_t code, uint32_t flags, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Reply with a failed facade call's error. */
void http_reply_memd_error(http_req *rq, const memd_error *err);
/* Add a response header (value copied). Ignored past HTTP_MAX_EXTRA_HEADERS. */
void http_reply_header(http_req *rq, const char *name, const char *value);
/* Reply status with a versioned record's JSON text (taken over, as
 * http_reply_json), its top-level "version" as a quoted ETag, and, when
 * location is not NULL, a Location header (copied). */
void http_reply_versioned(http_req *rq, unsigned status, char *json, const char *location);

/* ---- store operation timing -------------------------------------------------- */

/* Count one facade call of rq's route's op, started at t0_ns (from
 * http_now_ns), that returned rc (err filled when rc < 0). */
void http_op_done(http_req *rq, int64_t t0_ns, int32_t rc, const memd_error *err);

#define HTTP_STATUS_NO_CONTENT 204u

/* The usual end of a route: count the facade call (http_op_done), then
 * reply with its error when rc < 0, else with json (taken over; NULL is
 * an out-of-memory reply) and status, or with no body when status is
 * HTTP_STATUS_NO_CONTENT (json is then ignored: pass NULL). */
void http_op_reply(http_req *rq, int64_t t0_ns, int32_t rc, const memd_error *err,
		   unsigned status, char *json);

/* ---- lifecycle (dispatch.c) ------------------------------------------------------ */

/* Free rq and everything it owns; accepts NULL. */
void http_req_free(http_req *rq);
/* Clear the reply (body and headers). */
void http_reply_clear(http_req *rq);

#endif
