/* SPDX-License-Identifier: MIT */
#include "metrics.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "util/prom.h"

/* Statuses with their own counter; anything else counts as "other". */
static const unsigned statuses[] = { 0, 200, 201, 204, 400, 401, 403, 404, 405,
				     408, 409, 413, 431, 500, 501, 503 };
#define N_STATUS (sizeof(statuses) / sizeof(statuses[0]) + 1)

struct http_metrics {
	size_t n_routes, n_ops, n_codes;
	const char *const *methods;
	const char *const *patterns;
	const char *const *op_names;
	const http_error_kind *codes;
	_Atomic uint64_t *requests;   /* (n_routes + 1) * N_STATUS */
	prom_histogram *latency;     /* n_routes + 1 */
	prom_histogram *ops;         /* n_ops */
	_Atomic uint64_t *op_errors;  /* n_ops * (n_codes + 1) */
	_Atomic int64_t in_flight;
	_Atomic int64_t connections;
	_Atomic uint64_t head_timeouts;
	_Atomic uint64_t idle_closes;
};

http_metrics *http_metrics_new(size_t n_routes, const char *const *methods,
			       const char *const *patterns, size_t n_ops,
			       const char *const *op_names)
{
	http_metrics *mt = calloc(1, sizeof(*mt));
	if (!mt)
		return NULL;
	mt->n_routes = n_routes;
	mt->n_ops = n_ops;
	mt->methods = methods;
	mt->patterns = patterns;
	mt->op_names = op_names;
	mt->codes = http_error_table(&mt->n_codes);
	mt->requests = calloc((n_routes + 1) * N_STATUS, sizeof(*mt->requests));
	mt->latency = calloc(n_routes + 1, sizeof(*mt->latency));
	mt->ops = calloc(n_ops ? n_ops : 1, sizeof(*mt->ops));
	mt->op_errors = calloc((n_ops ? n_ops : 1) * (mt->n_codes + 1), sizeof(*mt->op_errors));
	if (!mt->requests || !mt->latency || !mt->ops || !mt->op_errors) {
		http_metrics_free(mt);
		return NULL;
	}
	return mt;
}

void http_metrics_free(http_metrics *mt)
{
	if (!mt)
		return;
	free(mt->requests);
	free(mt->latency);
	free(mt->ops);
	free(mt->op_errors);
	free(mt);
}

static size_t status_slot(unsigned status)
{
	for (size_t i = 0; i < N_STATUS - 1; i++)
		if (statuses[i] == status)
			return i;
	return N_STATUS - 1;
}

void http_metrics_request(http_metrics *mt, size_t route, unsigned status, int64_t duration_ns)
{
	if (route > mt->n_routes)
		route = mt->n_routes;
	atomic_fetch_add_explicit(&mt->requests[route * N_STATUS + status_slot(status)], 1,
				  memory_order_relaxed);
	prom_observe(&mt->latency[route], duration_ns);
}

void http_metrics_op(http_metrics *mt, size_t op, int32_t rc, uint32_t err_flags,
		     int64_t duration_ns)
{
	if (op >= mt->n_ops)
		return;
	prom_observe(&mt->ops[op], duration_ns);
	if (rc < 0) {
		const http_error_kind *k = http_error_lookup(rc, err_flags);
		size_t slot = mt->n_codes;
		for (size_t i = 0; i < mt->n_codes; i++)
			if (&mt->codes[i] == k || (mt->codes[i].code == k->code &&
						   strcmp(mt->codes[i].name, k->name) == 0)) {
				slot = i;
				break;
			}
		atomic_fetch_add_explicit(&mt->op_errors[op * (mt->n_codes + 1) + slot], 1,
					  memory_order_relaxed);
	}
}

void http_metrics_in_flight_add(http_metrics *mt, int64_t delta)
{
	atomic_fetch_add(&mt->in_flight, delta);
}

int64_t http_metrics_in_flight(const http_metrics *mt)
{
	return atomic_load(&((http_metrics *)mt)->in_flight);
}

void http_metrics_connections_add(http_metrics *mt, int64_t delta)
{
	atomic_fetch_add(&mt->connections, delta);
}

void http_metrics_head_timeout(http_metrics *mt)
{
	atomic_fetch_add_explicit(&mt->head_timeouts, 1, memory_order_relaxed);
}

void http_metrics_idle_close(http_metrics *mt)
{
	atomic_fetch_add_explicit(&mt->idle_closes, 1, memory_order_relaxed);
}

/* ---- rendering ------------------------------------------------------------- */

static void route_labels(const http_metrics *mt, size_t r, char *buf, size_t cap)
{
	if (r < mt->n_routes)
		snprintf(buf, cap, "route=\"%s\",method=\"%s\"", mt->patterns[r], mt->methods[r]);
	else
		snprintf(buf, cap, "route=\"unmatched\",method=\"\"");
}

char *http_metrics_render(http_metrics *mt, const char *version, const char *facade_text,
			  size_t *ret_len)
{
	prom_buf b = { 0 };
	char labels[512];

	prom_printf(&b, "# HELP memd_build_info memd version.\n# TYPE memd_build_info gauge\n");
	prom_printf(&b, "memd_build_info{version=\"%s\"} 1\n", version);

	prom_printf(&b, "# HELP memd_http_requests_total HTTP requests by route, method and status "
			"(status 0: no response was sent).\n# TYPE memd_http_requests_total counter\n");
	for (size_t r = 0; r <= mt->n_routes; r++) {
		route_labels(mt, r, labels, sizeof(labels));
		for (size_t s = 0; s < N_STATUS; s++) {
			uint64_t v = atomic_load_explicit(&mt->requests[r * N_STATUS + s],
							  memory_order_relaxed);
			if (!v)
				continue;
			if (s == N_STATUS - 1)
				prom_printf(&b, "memd_http_requests_total{%s,status=\"other\"} %" PRIu64 "\n",
					    labels, v);
			else
				prom_printf(&b, "memd_http_requests_total{%s,status=\"%u\"} %" PRIu64 "\n",
					    labels, statuses[s], v);
		}
	}

	prom_printf(&b, "# HELP memd_http_request_duration_seconds Time from a request's headers to "
			"its completion.\n# TYPE memd_http_request_duration_seconds histogram\n");
	for (size_t r = 0; r <= mt->n_routes; r++) {
		if (!prom_count(&mt->latency[r]))
			continue;
		route_labels(mt, r, labels, sizeof(labels));
		prom_render_histogram(&b, "memd_http_request_duration_seconds", labels,
				      &mt->latency[r]);
	}

	prom_printf(&b, "# HELP memd_http_requests_in_flight Requests being handled now.\n"
			"# TYPE memd_http_requests_in_flight gauge\n");
	prom_printf(&b, "memd_http_requests_in_flight %" PRId64 "\n", http_metrics_in_flight(mt));

	prom_printf(&b, "# HELP memd_http_connections Client connections open now.\n"
			"# TYPE memd_http_connections gauge\n");
	prom_printf(&b, "memd_http_connections %" PRId64 "\n", atomic_load(&mt->connections));
	prom_printf(&b, "# HELP memd_http_header_timeouts_total Connections closed because a "
			"request line and headers did not arrive within server.header_timeout_s.\n"
			"# TYPE memd_http_header_timeouts_total counter\n");
	prom_printf(&b, "memd_http_header_timeouts_total %" PRIu64 "\n",
		    atomic_load_explicit(&mt->head_timeouts, memory_order_relaxed));
	prom_printf(&b, "# HELP memd_http_idle_closes_total Kept-alive connections closed (without "
			"an answer) because no next request line arrived within "
			"server.header_timeout_s.\n"
			"# TYPE memd_http_idle_closes_total counter\n");
	prom_printf(&b, "memd_http_idle_closes_total %" PRIu64 "\n",
		    atomic_load_explicit(&mt->idle_closes, memory_order_relaxed));

	prom_printf(&b, "# HELP memd_op_duration_seconds Time in the libmemd facade call behind a "
			"request (parsing, strategy, store calls, rendering).\n"
			"# TYPE memd_op_duration_seconds histogram\n");
	for (size_t o = 0; o < mt->n_ops; o++) {
		if (!prom_count(&mt->ops[o]))
			continue;
		snprintf(labels, sizeof(labels), "op=\"%s\"", mt->op_names[o]);
		prom_render_histogram(&b, "memd_op_duration_seconds", labels, &mt->ops[o]);
	}

	prom_printf(&b, "# HELP memd_op_errors_total Failed facade calls by error code.\n"
			"# TYPE memd_op_errors_total counter\n");
	for (size_t o = 0; o < mt->n_ops; o++)
		for (size_t c = 0; c <= mt->n_codes; c++) {
			uint64_t v = atomic_load_explicit(&mt->op_errors[o * (mt->n_codes + 1) + c],
							  memory_order_relaxed);
			if (v)
				prom_printf(&b, "memd_op_errors_total{op=\"%s\",code=\"%s\"} %" PRIu64
						"\n",
					    mt->op_names[o],
					    c < mt->n_codes ? mt->codes[c].name : "other", v);
		}
	if (facade_text)
		prom_printf(&b, "%s", facade_text);
	if (b.oom || !b.p) {
		free(b.p);
		return NULL;
	}
	*ret_len = b.len;
	return b.p;
}
