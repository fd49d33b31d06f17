/* SPDX-License-Identifier: MIT */
/*
 * http dispatch: the life of one request on libmicrohttpd. Before the
 * body: drain check, header limit, route, auth, path parameters, query,
 * Content-Length limit (each answered at once, nothing read or written).
 * While the body arrives: the body limit and, through the watchdog, the request timeout.
 * Then the route's handler (for a write, on a worker while the connection
 * is suspended: workers.h), the reply, one log line and the metrics.
 */
#ifndef MEMD_HTTP_DISPATCH_H
#define MEMD_HTTP_DISPATCH_H

#include <microhttpd.h>

#include "request.h"

/* MHD_AccessHandlerCallback; cls is the http_ctx. */
enum MHD_Result http_dispatch_access(void *cls, struct MHD_Connection *conn, const char *url,
				     const char *method, const char *version,
				     const char *upload_data, size_t *upload_data_size,
				     void **con_cls);
/* MHD_OPTION_URI_LOG_CALLBACK; cls is the http_ctx. Creates the request
 * (its id, start time and raw target length) as soon as the request line
 * is read, so that a request libmicrohttpd refuses by itself later is
 * logged and counted too. Returns the http_req (*con_cls), or NULL when
 * out of memory (http_dispatch_access then creates it). */
void *http_dispatch_uri_log(void *cls, const char *uri, struct MHD_Connection *conn);
/* MHD_RequestCompletedCallback; cls is the http_ctx. Logs, counts and
 * frees the request. */
void http_dispatch_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			     enum MHD_RequestTerminationCode toe);
/* MHD unescape callback: leaves the URL and arguments as sent (memd
 * decodes each path segment and query value itself). */
size_t http_dispatch_unescape(void *cls, struct MHD_Connection *conn, char *s);
/* http_watchdog_fire_fn: for a request receiving its body, answer 408 on
 * the raw socket and close it; for one whose work waits in the workers'
 * queue, take it out and answer 503 (MEMD_ETIMEDOUT, retryable). */
void http_dispatch_timeout(void *ud, http_req *rq);
/* http_workers_run_fn: run a handed-off request's handler on a worker
 * (503 without running it when its deadline passed in the queue), then
 * resume its connection to send the reply. */
void http_dispatch_work(void *ud, http_req *rq);
/* http_workers_drop_fn: answer a handed-off request that never ran (503:
 * shutting down, or its deadline passed in the queue) and resume its
 * connection. */
void http_dispatch_drop(void *ud, http_req *rq, int stopping);

#endif
