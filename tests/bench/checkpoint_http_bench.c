/* SPDX-License-Identifier: MIT */
/*
 * checkpoint_http_bench: what LangGraph's checkpoint saver calls cost memd
 * serve, beside a single-event POST, in one run.
 *
 * A C load generator (keep-alive HTTP/1.1 on raw sockets, one connection
 * per thread, each on its own session) drives a real `memd serve` on
 * SQLite (WAL, synchronous=FULL, a fresh database in a temp directory)
 * with the requests MemdSaver (clients/typescript/src/langgraph.ts) sends,
 * shaped as it shapes them: ?checkpoint_ns= on every call, a put of a
 * checkpoint (2 KiB of serialized state in base64, its parent, LangGraph's
 * metadata), the writes of a task (two channels) and a read of the
 * latest. Each phase runs for the bench time:
 *   1. PUT .../checkpoints/{id}: a new checkpoint each time, the previous
 *      one its parent
 *   2. POST .../checkpoints/{id}/writes: a task's two writes to the
 *      connection's newest checkpoint, a new task each time
 *   3. GET .../checkpoints:latest: the newest checkpoint with its payload
 *      and its task's writes
 *   4. GET .../checkpoints/{id}: the same by id
 *   5. a saver step: the put, the writes and the latest, timed as one
 *   6. POST .../events with one event: the reference
 * It prints requests/s, p50 and p99 latency and the CPU time per request
 * of memd serve (its utime + stime over the phase, over the requests) and
 * of this process. From a build directory:
 *   tests/bench/checkpoint_http_bench [-c connections] [-s seconds] [-d dir] [-t server threads]
 * With MEMD_BENCH_BASE set to another build directory (say, of the commit
 * before a change), that build's memd serve runs the same phases in the
 * same run, the two taking turns MEMD_BENCH_ROUNDS times (default 2), and
 * the rows are printed side by side with the ratios of server CPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_http.h"

/* The serialized checkpoint's bytes (before base64): what the chain graph
 * of tests/bench/checkpoint puts a step, about 2 KiB. */
#define PAYLOAD_BYTES 2048
/* A task's write of a message and of a branch channel (before base64). */
#define WRITE_BYTES 192
#define BRANCH_BYTES 8
/* The request and the base64 text fit here. */
#define REQ_MAX 8192
/* Base64 of n bytes with its NUL. */
#define B64_LEN(n) (((n) + 2) / 3 * 4 + 1)
#define PATH_LEN 256
#define ID_LEN 64
#define PHASES 6
#define MAX_ROUNDS 16
#define DEFAULT_ROUNDS 2
#define PERCENT 100.0
#define APPEND_BODY "{\"events\":[{\"role\":\"user\",\"content\":\"hello from the checkpoint bench\"}]}"

/* What one connection does: its session, its newest checkpoint. */
typedef struct lane {
	char session[PATH_LEN];  /* /v1/apps/bench/users/u/sessions/cp{i} */
	char id[ID_LEN];         /* the newest checkpoint put; "" before the first */
	unsigned long long next; /* the next checkpoint's number */
	unsigned long long task; /* the next task's number */
	char req[REQ_MAX];
} lane;

typedef struct ckpt_ctx {
	bench_conn *conns;
	lane *lanes;
	char payload[B64_LEN(PAYLOAD_BYTES)]; /* base64 of the checkpoint's bytes */
	char value[B64_LEN(WRITE_BYTES)];     /* base64 of the message write */
	char branch[B64_LEN(BRANCH_BYTES)];   /* base64 of the branch write */
} ckpt_ctx;

static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* n bytes of JSON-like text as padded standard base64 into out. */
static void fill_b64(char *out, size_t n, unsigned seed)
{
	unsigned char in[PAYLOAD_BYTES];
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		in[i] = (unsigned char)(' ' + (seed >> 16) % 94);
	}
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
			     (i + 2 < n ? in[i + 2] : 0);
		out[o++] = abc[v >> 18 & 63];
		out[o++] = abc[v >> 12 & 63];
		out[o++] = i + 1 < n ? abc[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? abc[v & 63] : '=';
	}
	out[o] = '\0';
}

/* Send method path (with ?checkpoint_ns= as MemdSaver does) and body on
 * connection i: 0 when the status is want. */
static int call(ckpt_ctx *x, int i, const char *method, const char *path, const char *body,
		int want)
{
	lane *l = &x->lanes[i];
	int n, status;

	if (body)
		n = snprintf(l->req, sizeof(l->req),
			     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
			     "Content-Length: %zu\r\n\r\n%s",
			     method, path, strlen(body), body);
	else
		n = snprintf(l->req, sizeof(l->req), "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
			     method, path);
	if (n < 0 || (size_t)n >= sizeof(l->req))
		bench_die("request", "too long");
	status = bench_http_call(&x->conns[i], l->req, (size_t)n);
	if (status != want) {
		fprintf(stderr, "%s: %s %s: %d, want %d: %.300s\n", bench.name, method, path, status,
			want, x->conns[i].buf);
		return -1;
	}
	return 0;
}

/* A checkpoint id as LangGraph makes them (uuid6: time-ordered). */
static void checkpoint_id(lane *l, int i)
{
	snprintf(l->id, sizeof(l->id), "1ef4f797-8335-6428-%04x-%012llx", (unsigned)i, l->next++);
}

static int one_put(bench_phase *p, int i)
{
	ckpt_ctx *x = p->ctx;
	lane *l = &x->lanes[i];
	char parent[ID_LEN + 2], path[PATH_LEN * 2];
	static char body[BENCH_MAX_CONNS][REQ_MAX];
	unsigned long long step = l->next;

	if (l->id[0])
		snprintf(parent, sizeof(parent), "\"%s\"", l->id);
	else
		snprintf(parent, sizeof(parent), "null");
	checkpoint_id(l, i);
	snprintf(path, sizeof(path), "%s/checkpoints/%s?checkpoint_ns=", l->session, l->id);
	snprintf(body[i], sizeof(body[i]),
		 "{\"parent_checkpoint_id\":%s,\"type\":\"json\",\"checkpoint\":\"%s\","
		 "\"metadata\":{\"source\":\"loop\",\"step\":%llu,\"parents\":{},"
		 "\"thread_id\":\"cp%d\"}}",
		 parent, x->payload, step, i);
	return call(x, i, "PUT", path, body[i], 200);
}

static int one_writes(bench_phase *p, int i)
{
	ckpt_ctx *x = p->ctx;
	lane *l = &x->lanes[i];
	char path[PATH_LEN * 2];
	static char body[BENCH_MAX_CONNS][REQ_MAX];

	snprintf(path, sizeof(path), "%s/checkpoints/%s/writes?checkpoint_ns=", l->session, l->id);
	snprintf(body[i], sizeof(body[i]),
		 "{\"task_id\":\"5f7d2c1e-0c1b-5e4a-9d3e-%012llx\",\"writes\":["
		 "{\"idx\":0,\"channel\":\"messages\",\"type\":\"json\",\"value\":\"%s\","
		 "\"replace\":false},"
		 "{\"idx\":1,\"channel\":\"branch:to:agent\",\"type\":\"json\",\"value\":\"%s\","
		 "\"replace\":false}]}",
		 l->task++, x->value, x->branch);
	return call(x, i, "POST", path, body[i], 204);
}

static int one_latest(bench_phase *p, int i)
{
	ckpt_ctx *x = p->ctx;
	char path[PATH_LEN * 2];

	snprintf(path, sizeof(path), "%s/checkpoints:latest?checkpoint_ns=", x->lanes[i].session);
	return call(x, i, "GET", path, NULL, 200);
}

static int one_get(bench_phase *p, int i)
{
	ckpt_ctx *x = p->ctx;
	char path[PATH_LEN * 2];

	snprintf(path, sizeof(path), "%s/checkpoints/%s?checkpoint_ns=", x->lanes[i].session,
		 x->lanes[i].id);
	return call(x, i, "GET", path, NULL, 200);
}

static int one_step(bench_phase *p, int i)
{
	return one_put(p, i) < 0 || one_writes(p, i) < 0 || one_latest(p, i) < 0 ? -1 : 0;
}

static int one_event(bench_phase *p, int i)
{
	ckpt_ctx *x = p->ctx;
	char path[PATH_LEN];

	snprintf(path, sizeof(path), "/v1/apps/bench/users/u/sessions/ev%d/events", i);
	return call(x, i, "POST", path, APPEND_BODY, 200);
}

static const struct {
	const char *name;
	bench_one_fn one;
	int requests; /* a unit's requests */
} phases[PHASES] = {
	{ "PUT checkpoint", one_put, 1 },
	{ "POST checkpoint writes (2)", one_writes, 1 },
	{ "GET checkpoints:latest", one_latest, 1 },
	{ "GET checkpoint by id", one_get, 1 },
	{ "saver step (put+writes+get)", one_step, 3 },
	{ "POST events (1 event)", one_event, 1 },
};

/* One memd serve (bench.memd_exe) on a fresh database: every phase. */
static void run_phases(ckpt_ctx *x, const char *cfg, const char *db, bench_result *ret)
{
	bench_phase setup = { .ctx = x };

	bench_start_memd(cfg, db);
	for (int i = 0; i < bench.conns; i++) {
		char body[64];
		lane *l = &x->lanes[i];
		x->conns[i].fd = -1;
		snprintf(l->session, sizeof(l->session), "/v1/apps/bench/users/u/sessions/cp%d", i);
		l->id[0] = '\0';
		snprintf(body, sizeof(body), "{\"id\":\"ev%d\"}", i);
		if (call(x, i, "POST", "/v1/apps/bench/users/u/sessions", body, 201) < 0)
			bench_die("setup", "create session");
	}
	for (int k = 0; k < PHASES; k++) {
		/* The reads find a checkpoint with one task's writes, as a
		 * resumed thread does, not the pile the writes phase made. */
		if (phases[k].one == one_latest)
			for (int i = 0; i < bench.conns; i++)
				if (one_put(&setup, i) < 0 || one_writes(&setup, i) < 0)
					bench_die("setup", "put before the reads");
		ret[k] = bench_run_phase(phases[k].one, x, bench.conns);
		ret[k].rate *= phases[k].requests;
		ret[k].p50_ms /= phases[k].requests;
		ret[k].p99_ms /= phases[k].requests;
		ret[k].cpu_server_us /= phases[k].requests;
		ret[k].cpu_self_us /= phases[k].requests;
	}
	for (int i = 0; i < bench.conns; i++)
		if (x->conns[i].fd >= 0)
			close(x->conns[i].fd);
	bench_stop_memd();
}

/* acc += r / rounds, field by field. */
static void add_mean(bench_result *acc, const bench_result *r, int rounds)
{
	acc->rate += r->rate / rounds;
	acc->p50_ms += r->p50_ms / rounds;
	acc->p99_ms += r->p99_ms / rounds;
	acc->cpu_server_us += r->cpu_server_us / rounds;
	acc->cpu_self_us += r->cpu_self_us / rounds;
}

static void print_row(const char *op, const char *via, bench_result r, const char *note)
{
	printf("%-30s %-6s %12.0f %9.3f %9.3f %9.1f %9.1f  %s\n", op, via, r.rate, r.p50_ms,
	       r.p99_ms, r.cpu_server_us, r.cpu_self_us, note);
}

int main(int argc, char **argv)
{
	const char *base = getenv("MEMD_BENCH_BASE"), *env_rounds = getenv("MEMD_BENCH_ROUNDS");
	int have_base = base && *base;
	int rounds = env_rounds ? atoi(env_rounds) : have_base ? DEFAULT_ROUNDS : 1;
	bench_result now[PHASES] = { 0 }, was[PHASES] = { 0 }, r[PHASES];
	char note[160];
	ckpt_ctx *x;

	bench_init(argc, argv, "checkpoint_http_bench");
	if (rounds < 1 || rounds > MAX_ROUNDS)
		bench_die("MEMD_BENCH_ROUNDS", "must be 1..16");
	x = calloc(1, sizeof(*x));
	if (!x || !(x->conns = calloc((size_t)bench.conns, sizeof(*x->conns))) ||
	    !(x->lanes = calloc((size_t)bench.conns, sizeof(*x->lanes))))
		bench_die("setup", "out of memory");
	fill_b64(x->payload, PAYLOAD_BYTES, 1);
	fill_b64(x->value, WRITE_BYTES, 2);
	fill_b64(x->branch, BRANCH_BYTES, 3);
	for (int round = 0; round < rounds; round++) {
		char cfg[32], db[32];
		/* Take turns, each first in every other round. */
		for (int turn = 0; turn < (have_base ? 2 : 1); turn++) {
			int is_base = have_base && (turn ^ (round & 1));
			bench_use_build(is_base ? base : NULL);
			snprintf(cfg, sizeof(cfg), "%s%d.yaml", is_base ? "base" : "this", round);
			snprintf(db, sizeof(db), "%s%d.db", is_base ? "base" : "this", round);
			run_phases(x, cfg, db, r);
			for (int k = 0; k < PHASES; k++)
				add_mean(is_base ? &was[k] : &now[k], &r[k], rounds);
		}
	}

	printf("memd checkpoint_http_bench: %d connections/threads, %.1f s per phase, %d round(s), "
	       "server.threads %d, SQLite WAL synchronous=FULL, checkpoint %d B, in %s\n\n",
	       bench.conns, bench.seconds, rounds, bench.server_threads, PAYLOAD_BYTES,
	       bench.work_dir);
	printf("%-30s %-6s %12s %9s %9s %9s %9s  %s\n", "operation", "build", "req/s", "p50 ms",
	       "p99 ms", "srv us", "cli us", "note");
	for (int k = 0; k < PHASES; k++) {
		const bench_result *ev = &now[PHASES - 1];
		snprintf(note, sizeof(note), "%.2fx an event POST's server CPU",
			 ev->cpu_server_us > 0 ? now[k].cpu_server_us / ev->cpu_server_us : 0);
		print_row(phases[k].name, "this", now[k], k == PHASES - 1 ? "reference" : note);
		if (have_base) {
			snprintf(note, sizeof(note), "this = %.0f%% of the base's server CPU",
				 was[k].cpu_server_us > 0
					 ? PERCENT * now[k].cpu_server_us / was[k].cpu_server_us
					 : 0);
			print_row(phases[k].name, "base", was[k], note);
		}
	}
	printf("\nper request (a saver step's row: its 3 requests' mean); srv us / cli us: CPU time "
	       "(user + system, all threads) per request of memd serve and of this process.\n");
	if (have_base)
		printf("base: %s\n", base);
	bench_cleanup();
	free(x->conns);
	free(x->lanes);
	free(x);
	return 0;
}
