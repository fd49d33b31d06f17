/* SPDX-License-Identifier: MIT */
/*
 * prom: pieces of the Prometheus text exposition format (version 0.0.4)
 * shared by the facade's own metrics and the HTTP server's: a growable
 * text buffer and a lock-free latency histogram with fixed buckets.
 */
#ifndef MEMD_HOST_PROM_H
#define MEMD_HOST_PROM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Upper bounds of the histogram buckets, in seconds: 100 us .. 10 s
 * (+Inf is implied). */
#define PROM_N_BUCKETS 16

/* A latency histogram. Zero-initialised (calloc or = { 0 }) it is empty;
 * observe and render may run concurrently from any thread. */
typedef struct prom_histogram {
	_Atomic uint64_t buckets[PROM_N_BUCKETS + 1]; /* last: above every bound */
	_Atomic uint64_t count;
	_Atomic uint64_t sum_ns;
} prom_histogram;

/* A text being rendered. Zero-initialised it is empty; after an
 * allocation failure every later write is dropped and oom is set. Free p
 * with free(). */
typedef struct prom_buf {
	char *p;
	size_t len, cap;
	int oom;
} prom_buf;

/* Count one observation of ns nanoseconds (negative counts as 0). */
void prom_observe(prom_histogram *h, int64_t ns);
/* The number of observations so far. */
uint64_t prom_count(const prom_histogram *h);

/* Append printf-style text to b (NUL-terminated at b->p[b->len]). */
void prom_printf(prom_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append h as the _bucket (cumulative), _sum (seconds) and _count series
 * of name, each with labels (`key="value",...`, without braces). */
void prom_render_histogram(prom_buf *b, const char *name, const char *labels,
			   const prom_histogram *h);

#endif
