/* SPDX-License-Identifier: MIT */
/*
 * qd_http: the Qdrant REST client under the qdrant plugin: JSON requests
 * over libcurl with the api-key header, timeouts bounded by the call's
 * deadline, cancellation, a pool of easy handles (so connections are kept
 * alive and reused across threads), and Qdrant's error envelope
 * ({"status":{"error":"..."}}) mapped to MEMD_E* codes:
 *
 *   cannot connect, connection lost, no answer in time, HTTP 5xx or 429
 *                                   -> MEMD_EUNAVAIL, RETRYABLE
 *   the call's deadline passed      -> MEMD_ETIMEDOUT, RETRYABLE
 *   call->cancel raised             -> MEMD_ECANCELED
 *   HTTP 401 / 403                  -> MEMD_EAUTH
 *   HTTP 404                        -> MEMD_ENOTFOUND
 *   HTTP 409                        -> MEMD_ECONFLICT
 *   any other 4xx                   -> MEMD_EINVAL
 *   other status, unparsable body   -> MEMD_EIO
 *
 * Error messages carry the method, the path and Qdrant's own message,
 * never the api key.
 */
#ifndef MEMD_QD_HTTP_H
#define MEMD_QD_HTTP_H

#include <jansson.h>
#include <memd/plugin.h>

/* Longest response body accepted; more is MEMD_EIO. */
#define QD_HTTP_MAX_RESPONSE_BYTES (64u * 1024u * 1024u)
/* Connection set-up never waits longer than this (nor than the timeout). */
#define QD_HTTP_CONNECT_TIMEOUT_MS 5000
/* Idle easy handles (each with its live connection) kept for reuse. */
#define QD_HTTP_POOL_MAX 16

typedef struct qd_http qd_http;

typedef struct qd_http_config {
	const char *base_url;       /* http(s)://host:port[/prefix], no query */
	const char *api_key;        /* NULL or "" = no api-key header; secret */
	int64_t timeout_ms;         /* per request, > 0 */
	const memd_host *host;      /* for the monotonic clock; borrowed */
} qd_http_config;

/* Process-wide libcurl set-up and tear-down, paired (libcurl counts
 * them). Main thread only (plugin init/fini). MEMD_EINTERNAL if libcurl
 * cannot initialise. */
int32_t qd_http_global_init(memd_error *err);
void qd_http_global_cleanup(void);

/* A client for cfg (strings copied). MEMD_EINVAL if base_url is not
 * http:// or https:// or timeout_ms < 1; MEMD_ENOMEM. */
int32_t qd_http_new(const qd_http_config *cfg, qd_http **ret, memd_error *err);
/* Accepts NULL. No request may be running. */
void qd_http_free(qd_http *h);

/* Send method (GET, PUT, POST, DELETE) to base_url + path_and_query with
 * body (JSON text; NULL = no body). On a 2xx answer returns 0 and, if
 * ret_json is not NULL, *ret_json owns the parsed response (MEMD_EIO if
 * it is not JSON). On failure returns the mapped code (see above) with
 * the message in err. *ret_status (may be NULL) gets the HTTP status, 0
 * when none was received, also on failure. call may be NULL. Thread-safe. */
int32_t qd_http_request(qd_http *h, const memd_call *call, const char *method,
			const char *path_and_query, const char *body, json_t **ret_json,
			long *ret_status, memd_error *err);

#endif
