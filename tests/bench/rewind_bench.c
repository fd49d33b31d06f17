/* SPDX-License-Identifier: MIT */
/*
 * rewind_bench [DIR]: what a chat UI's undo costs as a session grows,
 * through the facade on sqlite with the summary_buffer strategy
 * (extractive summarizer). For sessions of 1,000 and 100,000 events:
 * the latency of a rewind of 10 user turns (memd_session_rewind with
 * {"turns": 10}; each timed rewind follows an untimed append of the 10
 * turns it hides), and the latency of the context (memd_context_read)
 * before any rewind and after the rewinds. Prints the rewind's 100k / 1k
 * ratio (target <= 1.2: hiding walks only the rows from the first hidden
 * seq on) and the context's after / before ratio in each size (target:
 * flat, as today). Prints, never asserts: timings are the reader's to
 * judge.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>
#include <memd/memd.h>

#define EVENTS_PER_APPEND 100
#define REWIND_TURNS 10       /* user turns a rewind hides (a turn: user + assistant) */
#define REWINDS 100           /* timed rewinds per size */
#define CONTEXT_CALLS 300     /* timed context reads per size and phase */
#define WARMUP 10
#define MAX_TOKENS 2000
#define TARGET_RATIO 1.2
#define N_SIZES 2
#define TEXT_MAX 128

static const int sizes[N_SIZES] = { 1000, 100000 };

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

static double p50(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(v[0]), cmp_double);
	return v[n / 2];
}

static memd *open_memd(const char *dir, memd_error *err)
{
	char cfg[1024], yaml[2048];
	memd_options o = { .struct_size = sizeof(o), .config_path = cfg };
	memd *m = NULL;
	FILE *f;

	snprintf(cfg, sizeof(cfg), "%s/memd.yaml", dir);
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db, synchronous: normal}\n"
		 "summarizer: {type: extractive}\n"
		 "apps:\n  '*': {working_memory: {strategy: summary_buffer, max_tokens: %d}}\n",
		 dir, MAX_TOKENS);
	if (!(f = fopen(cfg, "w")))
		return NULL;
	fputs(yaml, f);
	fclose(f);
	if (memd_open(&o, &m, err) < 0)
		return NULL;
	return m;
}

/* Append n events (user and assistant in turn) from number first on, in
 * appends of at most EVENTS_PER_APPEND. */
static int append_turns(memd *m, const char *sid, int first, int n, memd_error *err)
{
	for (int done = 0; done < n; done += EVENTS_PER_APPEND) {
		int batch = n - done < EVENTS_PER_APPEND ? n - done : EVENTS_PER_APPEND;
		json_t *events = json_array(), *body;
		char *req, *out = NULL;
		int32_t r;

		for (int i = 0; i < batch; i++) {
			int k = first + done + i;
			char text[TEXT_MAX];
			if (k % 2 == 0)
				snprintf(text, sizeof(text), "Can you check the status of order %d for me?", k);
			else
				snprintf(text, sizeof(text),
					 "Order %d shipped on 2024-05-%02d from the Rotterdam warehouse.", k,
					 1 + k % 28);
			json_array_append_new(events, json_pack("{s:s,s:s}", "role",
								k % 2 ? "assistant" : "user", "content",
								text));
		}
		body = json_pack("{s:o}", "events", events);
		req = json_dumps(body, JSON_COMPACT);
		json_decref(body);
		r = memd_events_append(m, "bench", "u", sid, req, &out, err);
		free(req);
		if (r < 0)
			return -1;
		memd_free(out);
	}
	return 0;
}

/* p50 of CONTEXT_CALLS context reads of sid, in microseconds; -1 on error. */
static double context_p50(memd *m, const char *sid, memd_error *err)
{
	double lat[CONTEXT_CALLS];

	for (int i = 0; i < WARMUP + CONTEXT_CALLS; i++) {
		char *out = NULL;
		double t0 = now();
		if (memd_context_read(m, "bench", "u", sid, MEMD_READ_NO_TEXT, &out, err) < 0)
			return -1;
		if (i >= WARMUP)
			lat[i - WARMUP] = (now() - t0) * 1e6;
		memd_free(out);
	}
	return p50(lat, CONTEXT_CALLS);
}

int main(int argc, char **argv)
{
	char dir[512];
	memd_error err = { .struct_size = sizeof(err) };
	double rewind_p50[N_SIZES], ctx_before[N_SIZES], ctx_after[N_SIZES];
	int next[N_SIZES];
	memd *m;

	if (argc > 1)
		snprintf(dir, sizeof(dir), "%s", argv[1]);
	else
		snprintf(dir, sizeof(dir), "%s/memd-rewind-bench-XXXXXX",
			 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
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
		char sid[32], body[64], *out = NULL;
		double t0 = now();
		snprintf(sid, sizeof(sid), "s%d", sizes[s]);
		snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
		if (memd_session_create(m, "bench", "u", body, &out, &err) < 0 ||
		    append_turns(m, sid, 0, sizes[s], &err) < 0) {
			fprintf(stderr, "fill: %s\n", err.msg);
			return 1;
		}
		memd_free(out);
		next[s] = sizes[s];
		fprintf(stderr, "filled %d events in %.1f s\n", sizes[s], now() - t0);
	}
	/* Reopen: memd_close waits for the background folds to finish. */
	memd_close(m);
	if (!(m = open_memd(dir, &err))) {
		fprintf(stderr, "memd_open: %s\n", err.msg);
		return 1;
	}
	for (int s = 0; s < N_SIZES; s++) {
		char sid[32];
		snprintf(sid, sizeof(sid), "s%d", sizes[s]);
		if ((ctx_before[s] = context_p50(m, sid, &err)) < 0) {
			fprintf(stderr, "context: %s\n", err.msg);
			return 1;
		}
	}
	for (int s = 0; s < N_SIZES; s++) {
		char sid[32], body[64];
		double lat[REWINDS];
		snprintf(sid, sizeof(sid), "s%d", sizes[s]);
		snprintf(body, sizeof(body), "{\"turns\":%d}", REWIND_TURNS);
		for (int i = 0; i < REWINDS; i++) {
			char *out = NULL;
			double t0;
			if (append_turns(m, sid, next[s], 2 * REWIND_TURNS, &err) < 0) {
				fprintf(stderr, "append: %s\n", err.msg);
				return 1;
			}
			next[s] += 2 * REWIND_TURNS;
			t0 = now();
			if (memd_session_rewind(m, "bench", "u", sid, body, &out, &err) < 0) {
				fprintf(stderr, "rewind: %s\n", err.msg);
				return 1;
			}
			lat[i] = (now() - t0) * 1e6;
			memd_free(out);
		}
		rewind_p50[s] = p50(lat, REWINDS);
	}
	memd_close(m);
	if (!(m = open_memd(dir, &err))) {
		fprintf(stderr, "memd_open: %s\n", err.msg);
		return 1;
	}
	for (int s = 0; s < N_SIZES; s++) {
		char sid[32];
		snprintf(sid, sizeof(sid), "s%d", sizes[s]);
		if ((ctx_after[s] = context_p50(m, sid, &err)) < 0) {
			fprintf(stderr, "context: %s\n", err.msg);
			return 1;
		}
	}

	printf("rewind of %d user turns and context, sqlite, summary_buffer max_tokens %d\n",
	       REWIND_TURNS, MAX_TOKENS);
	printf("%10s %14s %18s %17s %12s\n", "events", "rewind p50 us", "context before us",
	       "context after us", "after/before");
	for (int s = 0; s < N_SIZES; s++)
		printf("%10d %14.0f %18.0f %17.0f %12.2f\n", sizes[s], rewind_p50[s], ctx_before[s],
		       ctx_after[s], ctx_after[s] / ctx_before[s]);
	{
		double r = rewind_p50[N_SIZES - 1] / rewind_p50[0];
		double c = ctx_after[N_SIZES - 1] / ctx_after[0];
		printf("rewind p50 ratio %dk / %dk: %.2f (target <= %.1f: %s)\n",
		       sizes[N_SIZES - 1] / 1000, sizes[0] / 1000, r, TARGET_RATIO,
		       r <= TARGET_RATIO ? "met" : "NOT met");
		printf("context after rewinds p50 ratio %dk / %dk: %.2f (target <= %.1f: %s)\n",
		       sizes[N_SIZES - 1] / 1000, sizes[0] / 1000, c, TARGET_RATIO,
		       c <= TARGET_RATIO ? "met" : "NOT met");
	}
	memd_close(m);
	if (argc <= 1) {
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	return 0;
}
