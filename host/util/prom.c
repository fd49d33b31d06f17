/* SPDX-License-Identifier: MIT */
#include "util/prom.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define NS_PER_SEC 1e9
#define PROM_CHUNK 65536

static const double bucket_le[PROM_N_BUCKETS] = { 0.0001, 0.00025, 0.0005, 0.001,
						  0.0025, 0.005,   0.01,   0.025,
						  0.05,   0.1,     0.25,   0.5,
						  1,      2.5,     5,      10 };

void prom_observe(prom_histogram *h, int64_t ns)
{
	uint64_t v = ns < 0 ? 0 : (uint64_t)ns;
	double s = (double)v / NS_PER_SEC;
	size_t b = 0;

	while (b < PROM_N_BUCKETS && s > bucket_le[b])
		b++;
	atomic_fetch_add_explicit(&h->buckets[b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum_ns, v, memory_order_relaxed);
}

uint64_t prom_count(const prom_histogram *h)
{
	return atomic_load_explicit(&((prom_histogram *)h)->count, memory_order_relaxed);
}

void prom_printf(prom_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		size_t room = b->cap - b->len;
		char *np;

		va_start(ap, fmt);
		n = b->p ? vsnprintf(b->p + b->len, room, fmt, ap) : 0;
		va_end(ap);
		if (n < 0) {
			b->oom = 1;
			return;
		}
		if (b->p && (size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		np = realloc(b->p, b->cap + (size_t)n + PROM_CHUNK);
		if (!np) {
			b->oom = 1;
			return;
		}
		if (!b->p)
			np[0] = '\0';
		b->p = np;
		b->cap += (size_t)n + PROM_CHUNK;
	}
}

void prom_render_histogram(prom_buf *b, const char *name, const char *labels,
			   const prom_histogram *h)
{
	prom_histogram *m = (prom_histogram *)h; /* atomic loads take non-const */
	uint64_t cum = 0;

	for (size_t i = 0; i < PROM_N_BUCKETS; i++) {
		cum += atomic_load_explicit(&m->buckets[i], memory_order_relaxed);
		prom_printf(b, "%s_bucket{%s,le=\"%g\"} %" PRIu64 "\n", name, labels, bucket_le[i],
			    cum);
	}
	cum += atomic_load_explicit(&m->buckets[PROM_N_BUCKETS], memory_order_relaxed);
	prom_printf(b, "%s_bucket{%s,le=\"+Inf\"} %" PRIu64 "\n", name, labels, cum);
	prom_printf(b, "%s_sum{%s} %.9f\n", name, labels,
		    (double)atomic_load_explicit(&m->sum_ns, memory_order_relaxed) / NS_PER_SEC);
	prom_printf(b, "%s_count{%s} %" PRIu64 "\n", name, labels,
		    atomic_load_explicit(&m->count, memory_order_relaxed));
}
