/* SPDX-License-Identifier: MIT */
/*
 * context_bench [DIR]: latency of GET context (memd_context) with the
 * summary_buffer strategy on sqlite (extractive summarizer) for sessions of
 * 1,000, 10,000 and 100,000 events, and the ratio of the largest to the
 * smallest (target: 100k <= 1.2 x 1k: the context is read from the latest
 * summary's checkpoint, so its cost must not grow with the session). Also
 * prints the rows the store examined per call. Sessions are filled by
 * appends of EVENTS_PER_APPEND events, folded in the background as they
 * grow; the bench waits for memd to finish folding before timing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <memd/memd.h>

#include "service/service.h"

#define EVENTS_PER_APPEND 100
#define CALLS 300
#define WARMUP 20
#define MAX_TOKENS 2000
#define TARGET_RATIO 1.2
#define N_SIZES 3

static const int sizes[N_SIZES] = { 1000, 10000, 100000 };

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static memd *open_memd(const char *dir, memd_error *err)
{
	char cfg[1024], yaml[2048];
	memd *m = NULL;
	FILE *f;
	snprintf(cfg, sizeof(cfg), "%s/memd.yaml", dir);
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db, synchronous: normal}\n"
		 "summarizer: {type: extractive}\n"
		 "apps:\n  '*': {working_memory: {strategy: summary_buffer, max_tokens: %d}}\n",
		 dir, MAX_TOKENS);
	f = fopen(cfg, "w");
	if (!f)
		return NULL;
	fputs(yaml, f);
	fclose(f);
	memd_options o = { .struct_size = sizeof(o), .config_path = cfg };
	if (memd_open(&o, &m, err) < 0)
		return NULL;
	return m;
}

static int fill(memd *m, const char *sid, int n, memd_error *err)
{
	char *out = NULL, body[64];
	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	if (memd_session_create(m, "bench", "u", body, &out, err) < 0)
		return -1;
	memd_free(out);
	for (int done = 0; done < n; done += EVENTS_PER_APPEND) {
		size_t cap = EVENTS_PER_APPEND * 160 + 64, o = 0;
		char *req = malloc(cap);
		o += (size_t)snprintf(req + o, cap - o, "{\"events\":[");
		for (int i = 0; i < EVENTS_PER_APPEND; i++) {
			int k = done + i;
			char text[128];
			switch (k % 4) {
			case 0:
				snprintf(text, sizeof(text), "Can you check the status of order %d for me?", k);
				break;
			case 1:
				snprintf(text, sizeof(text),
					 "Order %d shipped on 2024-05-%02d from the Rotterdam warehouse.", k,
					 1 + k % 28);
				break;
			case 2:
				snprintf(text, sizeof(text),
					 "Please remind me to call Priya about invoice %d tomorrow.", k);
				break;
			default:
				snprintf(text, sizeof(text), "Noted: invoice %d is due on the %dth.", k,
					 1 + k % 28);
			}
			o += (size_t)snprintf(req + o, cap - o, "%s{\"role\":\"%s\",\"content\":\"%s\"}",
					      i ? "," : "", k % 2 ? "assistant" : "user", text);
		}
		snprintf(req + o, cap - o, "]}");
		int32_t r = memd_events_append(m, "bench", "u", sid, req, &out, err);
		free(req);
		if (r < 0)
			return -1;
		memd_free(out);
	}
	return 0;
}

int main(int argc, char **argv)
{
	char dir[512];
	memd_error err = { 0 };
	double p50[N_SIZES];
	memd *m;

	if (argc > 1)
		snprintf(dir, sizeof(dir), "%s", argv[1]);
	else
		snprintf(dir, sizeof(dir), "%s/memd-context-bench-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (argc <= 1 && !mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	mkdir(dir, 0700);
	if (!(m = open_memd(dir, &err))) {
		fprintf(stderr, "memd_open: %s\n", err.msg);
		return 1;
	}
	for (int s = 0; s < N_SIZES; s++) {
		char sid[32];
		double t0 = now();
		snprintf(sid, sizeof(sid), "s%d", sizes[s]);
		if (fill(m, sid, sizes[s], &err) < 0) {
			fprintf(stderr, "fill: %s\n", err.msg);
			return 1;
		}
		fprintf(stderr, "filled %d events in %.1f s\n", sizes[s], now() - t0);
	}
	/* Reopen: memd_close waits for the background folds to finish. */
	memd_close(m);
	if (!(m = open_memd(dir, &err))) {
		fprintf(stderr, "memd_open: %s\n", err.msg);
		return 1;
	}
	printf("summary_buffer context latency, sqlite, max_tokens %d, %d calls each\n", MAX_TOKENS,
	       CALLS);
	printf("%10s %10s %10s %10s %8s %8s\n", "events", "p50 us", "p90 us", "mean us", "rows",
	       "tokens");
	for (int s = 0; s < N_SIZES; s++) {
		char sid[32], *out = NULL;
		double lat[CALLS], sum = 0;
		uint64_t rows = 0;
		snprintf(sid, sizeof(sid), "s%d", sizes[s]);
		for (int i = 0; i < WARMUP + CALLS; i++) {
			memd_call call = { .struct_size = sizeof(call), .rows_read = &rows };
			double t0 = now();
			rows = 0;
			if (service_context(m, &call, "bench", "u", sid, &out, &err) < 0) {
				fprintf(stderr, "context: %s\n", err.msg);
				return 1;
			}
			double t = (now() - t0) * 1e6;
			if (i >= WARMUP) {
				lat[i - WARMUP] = t;
				sum += t;
			}
			if (i + 1 < WARMUP + CALLS)
				memd_free(out);
		}
		json_t *ctx = json_loads(out, 0, NULL);
		long long tokens = (long long)json_integer_value(json_object_get(ctx, "tokens"));
		json_decref(ctx);
		memd_free(out);
		qsort(lat, CALLS, sizeof(lat[0]), cmp_double);
		p50[s] = lat[CALLS / 2];
		printf("%10d %10.0f %10.0f %10.0f %8llu %8lld\n", sizes[s], p50[s], lat[CALLS * 9 / 10],
		       sum / CALLS, (unsigned long long)rows, tokens);
	}
	double ratio = p50[N_SIZES - 1] / p50[0];
	printf("p50 ratio %dk / %dk: %.2f (target <= %.1f: %s)\n", sizes[N_SIZES - 1] / 1000,
	       sizes[0] / 1000, ratio, TARGET_RATIO, ratio <= TARGET_RATIO ? "met" : "NOT met");
	memd_close(m);
	if (argc <= 1) {
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	return 0;
}
