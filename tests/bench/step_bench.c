/* SPDX-License-Identifier: MIT */
/*
 * step_bench: an agent's step over HTTP, the way it was (three requests)
 * against one round trip for the append and its context (two requests),
 * in one run against one `memd serve` on SQLite (WAL, synchronous=FULL,
 * a fresh database in a temp directory, the default buffer_window of 20).
 *
 * A C load generator (keep-alive HTTP/1.1 on raw sockets, one connection
 * per thread, 16 by default, each on its own session) runs each phase for
 * the same time, a step timed as one unit:
 *   before: POST events (the user's turn), GET context, POST events (the
 *           assistant's answer): 3 requests
 *   after:  POST events?return=context (the user's turn and the context
 *           right after it), POST events (the answer): 2 requests
 * The two phases alternate for ROUNDS rounds. It prints, per round and
 * as the mean, steps/s, requests/s, p50/p99 per step, the server's CPU per
 * step and what one core of it does (steps and requests per CPU-second
 * of memd serve), and the after/before ratios. It never asserts timing:
 * meson builds it, `meson test` never runs it. From a build directory:
 *   tests/bench/step_bench [-c connections] [-s seconds] [-d dir] [-t server threads]
 * (memd and the plugins are found from the binary's place in the build
 * tree; MEMD_PLUGIN_PATH overrides the plugins).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_http.h"

#define PATH_LEN 256
#define USER_TURN "{\"events\":[{\"role\":\"user\",\"content\":\"Plan a three-day trip to " \
		  "Lisbon in May: museums, food and a day by the sea.\"}]}"
#define ANSWER "{\"events\":[{\"role\":\"assistant\",\"content\":\"Day one: Belem and the " \
	       "Jeronimos monastery; day two: Alfama, the castle and fado; day three: " \
	       "Cascais by train.\"}]}"
#define BEFORE_REQUESTS 3
#define AFTER_REQUESTS 2
/* Rounds of (before, after), alternated so that a drift of the machine
 * (other load, the database growing) falls on both alike. */
#define ROUNDS 2

typedef struct step_ctx {
	bench_conn *conns;
	char session[BENCH_MAX_CONNS][PATH_LEN];
} step_ctx;

static int call(step_ctx *x, int i, const char *method, const char *suffix, const char *body)
{
	char path[PATH_LEN + 32];
	snprintf(path, sizeof(path), "%s%s", x->session[i], suffix);
	return bench_call(&x->conns[i], method, path, body, 200);
}

static int one_before(bench_phase *p, int i)
{
	step_ctx *x = p->ctx;
	if (call(x, i, "POST", "/events", USER_TURN) < 0 || call(x, i, "GET", "/context", NULL) < 0)
		return -1;
	return call(x, i, "POST", "/events", ANSWER);
}

static int one_after(bench_phase *p, int i)
{
	step_ctx *x = p->ctx;
	if (call(x, i, "POST", "/events?return=context", USER_TURN) < 0)
		return -1;
	if (!strstr(x->conns[i].buf, "\"context\":{")) {
		fprintf(stderr, "step_bench: an append with return=context without its context: %.300s\n",
			x->conns[i].buf);
		return -1;
	}
	return call(x, i, "POST", "/events", ANSWER);
}

/* One session per connection. */
static void setup_sessions(step_ctx *x)
{
	for (int i = 0; i < bench.conns; i++) {
		char body[64];
		x->conns[i].fd = -1;
		snprintf(body, sizeof(body), "{\"id\":\"s%d\"}", i);
		snprintf(x->session[i], PATH_LEN, "/v1/apps/bench/users/u%d/sessions", i);
		if (bench_call(&x->conns[i], "POST", x->session[i], body, 201) < 0)
			bench_die("setup", "session create");
		snprintf(x->session[i], PATH_LEN, "/v1/apps/bench/users/u%d/sessions/s%d", i, i);
	}
}

static void print_row(const char *what, bench_result r, int requests)
{
	double per_core = r.cpu_server_us > 0 ? BENCH_US_PER_SEC / r.cpu_server_us : 0;
	printf("%-44s %9.0f %9.0f %9.3f %9.3f %9.1f %10.0f %10.0f\n", what, r.rate, r.rate * requests,
	       r.p50_ms, r.p99_ms, r.cpu_server_us, per_core, per_core * requests);
}

/* The mean of n results (p99: the highest). */
static bench_result mean(const bench_result *r, int n)
{
	bench_result m = { 0 };
	for (int i = 0; i < n; i++) {
		m.rate += r[i].rate / n;
		m.p50_ms += r[i].p50_ms / n;
		m.p99_ms = r[i].p99_ms > m.p99_ms ? r[i].p99_ms : m.p99_ms;
		m.cpu_self_us += r[i].cpu_self_us / n;
		m.cpu_server_us += r[i].cpu_server_us / n;
	}
	return m;
}

int main(int argc, char **argv)
{
	step_ctx *x;
	bench_result before, after, b[ROUNDS], a[ROUNDS];
	char what[64];

	bench_init(argc, argv, "step_bench");
	x = calloc(1, sizeof(*x));
	if (!x || !(x->conns = calloc((size_t)bench.conns, sizeof(*x->conns))))
		bench_die("setup", "out of memory");
	bench_start_memd("step.yaml", "step.db");
	setup_sessions(x);
	for (int r = 0; r < ROUNDS; r++) {
		b[r] = bench_run_phase(one_before, x, bench.conns);
		a[r] = bench_run_phase(one_after, x, bench.conns);
	}
	before = mean(b, ROUNDS);
	after = mean(a, ROUNDS);
	for (int i = 0; i < bench.conns; i++)
		if (x->conns[i].fd >= 0)
			close(x->conns[i].fd);
	bench_stop_memd();

	printf("memd step_bench: %d connections, %.1f s per phase, server.threads %d, "
	       "SQLite WAL synchronous=FULL, over HTTP keep-alive, in %s\n\n", bench.conns,
	       bench.seconds, bench.server_threads, bench.work_dir);
	printf("%-44s %9s %9s %9s %9s %9s %10s %10s\n", "agent step", "steps/s", "req/s",
	       "p50 ms", "p99 ms", "srv us", "steps/core", "req/core");
	for (int r = 0; r < ROUNDS; r++) {
		snprintf(what, sizeof(what), "round %d before (3 requests)", r + 1);
		print_row(what, b[r], BEFORE_REQUESTS);
		snprintf(what, sizeof(what), "round %d after (2 requests)", r + 1);
		print_row(what, a[r], AFTER_REQUESTS);
	}
	print_row("before: append + GET context + append (3)", before, BEFORE_REQUESTS);
	print_row("after: append?return=context + append (2)", after, AFTER_REQUESTS);
	printf("\nsteps/s, req/s: per second of the run; p50/p99: one whole step; srv us: CPU time "
	       "of memd serve per step; steps/core, req/core: per CPU-second of memd serve; the "
	       "last two rows: the mean of the rounds (p99: the highest).\n");
	printf("after / before: steps/s %.2fx, steps per server core %.2fx, server CPU per step "
	       "%.2fx, p50 %.2fx\n",
	       before.rate > 0 ? after.rate / before.rate : 0,
	       after.cpu_server_us > 0 ? before.cpu_server_us / after.cpu_server_us : 0,
	       before.cpu_server_us > 0 ? after.cpu_server_us / before.cpu_server_us : 0,
	       before.p50_ms > 0 ? after.p50_ms / before.p50_ms : 0);
	bench_cleanup();
	free(x->conns);
	free(x);
	return 0;
}
