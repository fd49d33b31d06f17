/* SPDX-License-Identifier: MIT */
/*
 * http metrics: lock-free counters and histograms, rendered as the
 * Prometheus text format (version 0.0.4):
 *   memd_http_requests_total{route,method,status}     counter
 *   memd_http_request_duration_seconds{route,method}  histogram
 *   memd_http_requests_in_flight                      gauge
 *   memd_http_connections                             gauge
 *   memd_http_header_timeouts_total                   counter
 *   memd_http_idle_closes_total                       counter
 *   memd_op_duration_seconds{op}                      histogram
 *   memd_op_errors_total{op,code}                     counter
 *   memd_build_info{version}                          gauge (1)
 * followed by the facade's own metrics (memd_metrics_text: the store
 * plugins' calls). Requests that matched no route count under
 * route="unmatched"; an op is the libmemd facade call behind a request.
 */
#ifndef MEMD_HTTP_METRICS_H
#define MEMD_HTTP_METRICS_H

#include <stddef.h>
#include <stdint.h>

typedef struct http_metrics http_metrics;

/* Metrics for n_routes routes (labels: methods[i], patterns[i]) and n_ops
 * facade operations (op_names[i]); the arrays must outlive the metrics.
 * NULL on ENOMEM. */
http_metrics *http_metrics_new(size_t n_routes, const char *const *methods,
			       const char *const *patterns, size_t n_ops,
			       const char *const *op_names);
/* Accepts NULL. */
void http_metrics_free(http_metrics *mt);

/* One finished request: route index, or n_routes for "unmatched"; status
 * 0 when no response was sent (client gone, connection closed). */
void http_metrics_request(http_metrics *mt, size_t route, unsigned status, int64_t duration_ns);
/* One facade call of op index op; rc 0 or a negative code (counted in
 * memd_op_errors_total under its error name). */
void http_metrics_op(http_metrics *mt, size_t op, int32_t rc, uint32_t err_flags,
		     int64_t duration_ns);
/* Requests currently being handled. */
void http_metrics_in_flight_add(http_metrics *mt, int64_t delta);
int64_t http_metrics_in_flight(const http_metrics *mt);
/* Client connections open now (accepted, not yet closed). */
void http_metrics_connections_add(http_metrics *mt, int64_t delta);
/* One connection closed for not sending a request head in time. */
void http_metrics_head_timeout(http_metrics *mt);
/* One kept-alive connection closed for sending no next request in time. */
void http_metrics_idle_close(http_metrics *mt);

/* The text exposition (malloc'd, NUL-terminated), with facade_text (the
 * facade's own exposition, or NULL) appended; NULL on ENOMEM. */
char *http_metrics_render(http_metrics *mt, const char *version, const char *facade_text,
			  size_t *ret_len);

#endif
