/* SPDX-License-Identifier: MIT */
#include "metrics.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"

#define NS_PER_SEC 1e9
#define RENDER_CHUNK 65536

/* Upper bounds of the histogram buckets, in seconds (+Inf is implied). */
static const double bucket_le[] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
				    0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };
#define N_BUCKETS (sizeof(bucket_le) / sizeof(bucket_le[0]))

/* Statuses with their own counter; anything else counts as "other". */
static const unsigned statuses[] = { 0, 200, 201, 204, 400, 401, 403, 404, 405,
				     408, 409, 413, 431, 500, 501, 503 };
#define N_STATUS (sizeof(statuses) / sizeof(statuses[0]) + 1)

typedef struct histogram {
	_Atomic uint64_t buckets[N_BUCKETS + 1]; /* last: above every bound */
	_Atomic uint64_t count;
	_Atomic uint64_t sum_ns;
} histogram;

struct http_metrics {
	size_t n_routes, n_ops, n_codes;
	const char *const *methods;
	const char *const *patterns;
	const char *const *op_names;
	const http_error_kind *codes;
	_Atomic uint64_t *requests;   /* (n_routes + 1) * N_STATUS */
	histogram *latency;          /* n_routes + 1 */
	histogram *ops;              /* n_ops */
	_Atomic uint64_t *op_errors;  /* n_ops * (n_codes + 1) */
	_Atomic int64_t in_flight;
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

static void observe(histogram *h, int64_t ns)
{
	double s = (double)(ns < 0 ? 0 : ns) / NS_PER_SEC;
	size_t b = 0;
	while (b < N_BUCKETS && s > bucket_le[b])
		b++;
	atomic_fetch_add_explicit(&h->buckets[b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum_ns, (uint64_t)(ns < 0 ? 0 : ns), memory_order_relaxed);
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
	observe(&mt->latency[route], duration_ns);
}

void http_metrics_op(http_metrics *mt, size_t op, int32_t rc, uint32_t err_flags,
		     int64_t duration_ns)
{
	if (op >= mt->n_ops)
		return;
	observe(&mt->ops[op], duration_ns);
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

/* ---- rendering ------------------------------------------------------------- */

typedef struct outbuf {
	char *p;
	size_t len, cap;
	int oom;
} outbuf;

static void out(outbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out(outbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = 1;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		{
			size_t cap = b->cap + (size_t)n + RENDER_CHUNK;
			char *np = realloc(b->p, cap);
			if (!np) {
				b->oom = 1;
				return;
			}
			b->p = np;
			b->cap = cap;
		}
	}
}

static void render_histogram(outbuf *b, const char *name, const char *labels, histogram *h)
{
	uint64_t cum = 0;
	for (size_t i = 0; i < N_BUCKETS; i++) {
		cum += atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
		out(b, "%s_bucket{%s,le=\"%g\"} %" PRIu64 "\n", name, labels, bucket_le[i], cum);
	}
	cum += atomic_load_explicit(&h->buckets[N_BUCKETS], memory_order_relaxed);
	out(b, "%s_bucket{%s,le=\"+Inf\"} %" PRIu64 "\n", name, labels, cum);
	out(b, "%s_sum{%s} %.9f\n", name, labels,
	    (double)atomic_load_explicit(&h->sum_ns, memory_order_relaxed) / NS_PER_SEC);
	out(b, "%s_count{%s} %" PRIu64 "\n", name, labels,
	    atomic_load_explicit(&h->count, memory_order_relaxed));
}

static void route_labels(const http_metrics *mt, size_t r, char *buf, size_t cap)
{
	if (r < mt->n_routes)
		snprintf(buf, cap, "route=\"%s\",method=\"%s\"", mt->patterns[r], mt->methods[r]);
	else
		snprintf(buf, cap, "route=\"unmatched\",method=\"\"");
}

char *http_metrics_render(http_metrics *mt, const char *version, size_t *ret_len)
{
	outbuf b = { 0 };
	char labels[512];

	b.p = malloc(RENDER_CHUNK);
	if (!b.p)
		return NULL;
	b.cap = RENDER_CHUNK;
	b.p[0] = '\0';

	out(&b, "# HELP memd_build_info memd version.\n# TYPE memd_build_info gauge\n");
	out(&b, "memd_build_info{version=\"%s\"} 1\n", version);

	out(&b, "# HELP memd_http_requests_total HTTP requests by route, method and status "
		"(status 0: no response was sent).\n# TYPE memd_http_requests_total counter\n");
	for (size_t r = 0; r <= mt->n_routes; r++) {
		route_labels(mt, r, labels, sizeof(labels));
		for (size_t s = 0; s < N_STATUS; s++) {
			uint64_t v = atomic_load_explicit(&mt->requests[r * N_STATUS + s],
							  memory_order_relaxed);
			if (!v)
				continue;
			if (s == N_STATUS - 1)
				out(&b, "memd_http_requests_total{%s,status=\"other\"} %" PRIu64 "\n", labels, v);
			else
				out(&b, "memd_http_requests_total{%s,status=\"%u\"} %" PRIu64 "\n", labels,
				    statuses[s], v);
		}
	}

	out(&b, "# HELP memd_http_request_duration_seconds Time from a request's headers to its "
		"completion.\n# TYPE memd_http_request_duration_seconds histogram\n");
	for (size_t r = 0; r <= mt->n_routes; r++) {
		if (!atomic_load_explicit(&mt->latency[r].count, memory_order_relaxed))
			continue;
		route_labels(mt, r, labels, sizeof(labels));
		render_histogram(&b, "memd_http_request_duration_seconds", labels, &mt->latency[r]);
	}

	out(&b, "# HELP memd_http_requests_in_flight Requests being handled now.\n"
		"# TYPE memd_http_requests_in_flight gauge\n");
	out(&b, "memd_http_requests_in_flight %" PRId64 "\n", http_metrics_in_flight(mt));

	out(&b, "# HELP memd_store_op_duration_seconds Time in the store operation behind a request "
		"(the libmemd facade call).\n# TYPE memd_store_op_duration_seconds histogram\n");
	for (size_t o = 0; o < mt->n_ops; o++) {
		if (!atomic_load_explicit(&mt->ops[o].count, memory_order_relaxed))
			continue;
		snprintf(labels, sizeof(labels), "op=\"%s\"", mt->op_names[o]);
		render_histogram(&b, "memd_store_op_duration_seconds", labels, &mt->ops[o]);
	}

	out(&b, "# HELP memd_store_op_errors_total Failed store operations by error code.\n"
		"# TYPE memd_store_op_errors_total counter\n");
	for (size_t o = 0; o < mt->n_ops; o++)
		for (size_t c = 0; c <= mt->n_codes; c++) {
			uint64_t v = atomic_load_explicit(&mt->op_errors[o * (mt->n_codes + 1) + c],
							  memory_order_relaxed);
			if (v)
				out(&b, "memd_store_op_errors_total{op=\"%s\",code=\"%s\"} %" PRIu64 "\n",
				    mt->op_names[o], c < mt->n_codes ? mt->codes[c].name : "other", v);
		}
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	*ret_len = b.len;
	return b.p;
}
