/* SPDX-License-Identifier: MIT */
/*
 * lanes_bench: what a chat gateway's calls cost over HTTP, against the
 * calls they replace, in one run against one `memd serve` on SQLite (WAL,
 * synchronous=FULL, a fresh database in a temp directory).
 *
 * A C load generator (keep-alive HTTP/1.1 on raw sockets, one connection
 * per thread, each on its own lane and session) runs each phase for the
 * same time:
 *   1. GET session (a read of one session)
 *   2. POST /v1/apps/{app}/lanes:open with a message source: resolve and
 *      open in one call (the lane exists: the usual case, activity marked)
 *   3. single-event POST events (a durable append)
 *   4. a turn: POST .../turns then POST .../turns/{turn}:end (ok), the
 *      pair timed as one
 * It prints requests/s, p50 and p99 latency per phase, and the ratios the
 * lanes work aims at: an open costs at most 1.5 session reads, a turn's
 * begin and end at most 2 durable appends (cost = 1 / rate at the same
 * concurrency). It never asserts timing: meson builds it, `meson test`
 * never runs it. From a build directory:
 *   tests/http/lanes_bench [-c connections] [-s seconds] [-d dir] [-t server threads]
 * (memd and the plugins are found from the binary's place in the build
 * tree; MEMD_PLUGIN_PATH overrides the plugins).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_http.h"

#define PATH_LEN 512
/* A turn's lease in the bench: far longer than any phase. */
#define TURN_BODY "{\"lease_ms\":600000}"
#define END_BODY "{\"outcome\":\"ok\"}"
#define APPEND_BODY "{\"events\":[{\"role\":\"user\",\"content\":\"hello from the lanes bench\"}]}"
#define OPEN_TARGET 1.5 /* an open costs at most this many session reads */
#define TURN_TARGET 2.0 /* a turn's begin + end cost at most this many appends */

/* ---- the lanes: one per connection ---------------------------------------------- */

typedef struct lane_ctx {
	bench_conn *conns;
	char source[BENCH_MAX_CONNS][BENCH_REQ_MAX]; /* the source body of connection i */
	char lane[BENCH_MAX_CONNS][PATH_LEN];  /* /v1/apps/bench/users/{user}/lanes/{key}, encoded */
	char session[BENCH_MAX_CONNS][PATH_LEN];
} lane_ctx;

/* The JSON body of the response in c (after the head), parsed. */
static json_t *body_json(const bench_conn *c)
{
	const char *b = strstr(c->buf, "\r\n\r\n");
	return b ? json_loads(b + 4, 0, NULL) : NULL;
}

static int one_get_session(bench_phase *p, int i)
{
	lane_ctx *x = p->ctx;
	return bench_call(&x->conns[i], "GET", x->session[i], NULL, 200);
}

static int one_open(bench_phase *p, int i)
{
	lane_ctx *x = p->ctx;
	return bench_call(&x->conns[i], "POST", "/v1/apps/bench/lanes:open", x->source[i], 200);
}

static int one_append(bench_phase *p, int i)
{
	lane_ctx *x = p->ctx;
	char path[PATH_LEN + 16];
	snprintf(path, sizeof(path), "%s/events", x->session[i]);
	return bench_call(&x->conns[i], "POST", path, APPEND_BODY, 200);
}

static int one_turn(bench_phase *p, int i)
{
	lane_ctx *x = p->ctx;
	char path[PATH_LEN * 2];
	json_t *t;
	int r;

	snprintf(path, sizeof(path), "%s/turns", x->lane[i]);
	if (bench_call(&x->conns[i], "POST", path, TURN_BODY, 200) < 0)
		return -1;
	t = body_json(&x->conns[i]);
	if (!json_is_string(json_object_get(t, "turn_id"))) {
		json_decref(t);
		fprintf(stderr, "lanes_bench: a turn begin without turn_id: %.300s\n", x->conns[i].buf);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/turns/%s:end", x->lane[i],
		 json_string_value(json_object_get(t, "turn_id")));
	json_decref(t);
	r = bench_call(&x->conns[i], "POST", path, END_BODY, 200);
	return r;
}

/* Open each connection's lane once (creating it and its session) and
 * note its paths. */
static void setup_lanes(lane_ctx *x)
{
	for (int i = 0; i < bench.conns; i++) {
		char user[PATH_LEN / 4], key[PATH_LEN / 4], sid[PATH_LEN / 4];
		json_t *o;
		x->conns[i].fd = -1;
		snprintf(x->source[i], BENCH_REQ_MAX,
			 "{\"platform\":\"bench\",\"chat_type\":\"dm\",\"chat_id\":\"c%d\","
			 "\"user_id\":\"c%d\",\"user_name\":\"Bench %d\"}", i, i, i);
		if (bench_call(&x->conns[i], "POST", "/v1/apps/bench/lanes:open", x->source[i], 200) < 0)
			bench_die("setup", "lanes:open");
		o = body_json(&x->conns[i]);
		if (!json_is_string(json_object_get(o, "user")) ||
		    !json_is_string(json_object_get(o, "key")) ||
		    !json_is_string(json_object_get(json_object_get(o, "session"), "id")))
			bench_die("setup", "lanes:open answered without user, key or session");
		bench_encode_segment(json_string_value(json_object_get(o, "user")), user,
				     sizeof(user));
		bench_encode_segment(json_string_value(json_object_get(o, "key")), key, sizeof(key));
		bench_encode_segment(
			json_string_value(json_object_get(json_object_get(o, "session"), "id")), sid,
			sizeof(sid));
		json_decref(o);
		snprintf(x->lane[i], PATH_LEN, "/v1/apps/bench/users/%s/lanes/%s", user, key);
		snprintf(x->session[i], PATH_LEN, "/v1/apps/bench/users/%s/sessions/%s", user, sid);
	}
}

/* ---- main ------------------------------------------------------------------------------------ */

static void print_row(const char *op, bench_result r, const char *note)
{
	printf("%-36s %5d %12.0f %9.3f %9.3f %9.1f  %s\n", op, bench.conns, r.rate, r.p50_ms, r.p99_ms,
	       r.cpu_server_us, note);
}

int main(int argc, char **argv)
{
	lane_ctx *x;
	bench_result get, open, append, turn;
	double open_cost, turn_cost;
	char note[160];

	bench_init(argc, argv, "lanes_bench");
	x = calloc(1, sizeof(*x));
	if (!x || !(x->conns = calloc((size_t)bench.conns, sizeof(*x->conns))))
		bench_die("setup", "out of memory");
	bench_start_memd("lanes.yaml", "lanes.db");
	setup_lanes(x);
	get = bench_run_phase(one_get_session, x, bench.conns);
	open = bench_run_phase(one_open, x, bench.conns);
	append = bench_run_phase(one_append, x, bench.conns);
	turn = bench_run_phase(one_turn, x, bench.conns);
	for (int i = 0; i < bench.conns; i++)
		if (x->conns[i].fd >= 0)
			close(x->conns[i].fd);
	bench_stop_memd();

	/* Cost of an operation: 1 / its rate at the same concurrency. */
	open_cost = get.rate / open.rate;
	turn_cost = append.rate / turn.rate;
	printf("memd lanes_bench: %d connections, %.1f s per run, server.threads %d, "
	       "SQLite WAL synchronous=FULL, over HTTP keep-alive, in %s\n\n", bench.conns, bench.seconds,
	       bench.server_threads, bench.work_dir);
	printf("%-36s %5s %12s %9s %9s %9s  %s\n", "operation", "conns", "per s", "p50 ms", "p99 ms",
	       "srv us", "");
	print_row("GET session", get, "reference (a read)");
	snprintf(note, sizeof(note), "= %.2f session reads (p50 %.2fx; target <= %.1f)", open_cost,
		 open.p50_ms / (get.p50_ms > 0 ? get.p50_ms : 1), OPEN_TARGET);
	print_row("POST lanes:open (resolve + open)", open, note);
	print_row("POST events (1 event, durable)", append, "reference (a durable append)");
	snprintf(note, sizeof(note), "= %.2f appends (p50 %.2fx; target <= %.1f)", turn_cost,
		 turn.p50_ms / (append.p50_ms > 0 ? append.p50_ms : 1), TURN_TARGET);
	print_row("turn begin + end (pair)", turn, note);
	printf("\nper s: operations per second (a turn pair counts once); srv us: CPU time of "
	       "memd serve per operation.\n");
	printf("open: %.2f x GET session (%s target 1.5); turn: %.2f x append (%s target 2)\n",
	       open_cost, open_cost <= OPEN_TARGET ? "within" : "over", turn_cost,
	       turn_cost <= TURN_TARGET ? "within" : "over");
	bench_cleanup();
	free(x->conns);
	free(x);
	return 0;
}
