/* SPDX-License-Identifier: MIT */
/*
 * http_bench: memd over HTTP against the same work without HTTP, in one run.
 *
 * A C load generator (keep-alive HTTP/1.1 on raw sockets, one connection
 * per thread) drives a real `memd serve` on a loopback port, then the same
 * operations go through the libmemd facade in this process, then raw
 * sqlite3 does one transaction per insert. All on SQLite, WAL,
 * synchronous=FULL, fresh databases in a temp directory, each phase for
 * the same time:
 *   1. GET context over HTTP, C connections (each on its own 20-event session)
 *   2. memd_context through the facade, C threads (same shape)
 *   3. single-event POST events over HTTP, C connections (own session each)
 *   4. single-event memd_events_append through the facade, C threads
 *   5. raw sqlite3, one INSERT per transaction, 1 thread: the naive
 *      one-transaction-per-append rate of this disk
 * Both memd runs use the same store config (readers: one per connection).
 * It prints requests/s, p50 and p99 latency, and the ratios. Not a
 * pass/fail test: meson builds it, `meson test` never runs it. From a
 * build directory:
 *   tests/http/http_bench [-c connections] [-s seconds] [-d dir] [-t server threads]
 * (memd and the plugins are found from the binary's place in the build
 * tree; MEMD_PLUGIN_PATH overrides the plugins). With MEMD_BENCH_BASE set
 * to another build directory (say, of the commit before a change), its
 * memd serve runs the two HTTP phases too, in the same run, and the rows
 * are printed side by side.
 *
 * The POST phase also prints the mean commit group: the store's writes
 * over the commits they shared, from memd_store_write_requests_total and
 * memd_store_write_groups_total in /metrics before and after the phase
 * ("n/a" for a memd without them).
 */
#include <limits.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <memd/memd.h>

#include "bench_http.h"

#define CONTEXT_EVENTS 20
#define PERCENT 100.0
#define APPEND_BODY "{\"events\":[{\"role\":\"user\",\"content\":\"hello from the http bench\"}]}"

typedef struct http_ctx {
	bench_conn *conns;
	char req[BENCH_MAX_CONNS][BENCH_REQ_MAX];
	size_t len[BENCH_MAX_CONNS];
	int want;
} http_ctx;

static int http_one(bench_phase *p, int i)
{
	http_ctx *h = p->ctx;
	int status = bench_http_call(&h->conns[i], h->req[i], h->len[i]);
	if (status != h->want) {
		fprintf(stderr, "http_bench: status %d, want %d: %.300s\n", status, h->want, h->conns[i].buf);
		return -1;
	}
	return 0;
}

/* ---- the facade ------------------------------------------------------------------------- */

static void log_nothing(void *ud, int32_t level, const char *component, const char *line)
{
	(void)ud;
	(void)level;
	(void)component;
	(void)line;
}

typedef struct facade_ctx {
	memd *m;
} facade_ctx;

static int facade_context(bench_phase *p, int i)
{
	facade_ctx *f = p->ctx;
	char sid[32], *out = NULL;
	memd_error err = { .struct_size = sizeof(err) };
	snprintf(sid, sizeof(sid), "ctx%d", i);
	if (memd_context(f->m, "bench", "u", sid, &out, &err) < 0) {
		fprintf(stderr, "http_bench: memd_context: %s\n", err.msg);
		return -1;
	}
	memd_free(out);
	return 0;
}

static int facade_append(bench_phase *p, int i)
{
	facade_ctx *f = p->ctx;
	char sid[32], *out = NULL;
	memd_error err = { .struct_size = sizeof(err) };
	snprintf(sid, sizeof(sid), "app%d", i);
	if (memd_events_append(f->m, "bench", "u", sid, APPEND_BODY, &out, &err) < 0) {
		fprintf(stderr, "http_bench: memd_events_append: %s\n", err.msg);
		return -1;
	}
	memd_free(out);
	return 0;
}

static void facade_setup(memd *m)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out;
	for (int i = 0; i < bench.conns; i++) {
		char body[64], sid[32];
		snprintf(sid, sizeof(sid), "ctx%d", i);
		snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
		if (memd_session_create(m, "bench", "u", body, &out, &err) < 0)
			bench_die("memd_session_create", err.msg);
		memd_free(out);
		for (int k = 0; k < CONTEXT_EVENTS; k++) {
			if (memd_events_append(m, "bench", "u", sid, APPEND_BODY, &out, &err) < 0)
				bench_die("memd_events_append", err.msg);
			memd_free(out);
		}
		snprintf(body, sizeof(body), "{\"id\":\"app%d\"}", i);
		if (memd_session_create(m, "bench", "u", body, &out, &err) < 0)
			bench_die("memd_session_create", err.msg);
		memd_free(out);
	}
}

/* ---- naive: one transaction per insert --------------------------------------------------- */

typedef struct naive_ctx {
	sqlite3 *db;
	sqlite3_stmt *begin, *insert, *commit;
	int64_t n;
} naive_ctx;

static int naive_one(bench_phase *p, int i)
{
	naive_ctx *x = p->ctx;
	(void)i;
	sqlite3_bind_int64(x->insert, 1, ++x->n);
	if (sqlite3_step(x->begin) != SQLITE_DONE || sqlite3_step(x->insert) != SQLITE_DONE ||
	    sqlite3_step(x->commit) != SQLITE_DONE) {
		fprintf(stderr, "http_bench: sqlite: %s\n", sqlite3_errmsg(x->db));
		return -1;
	}
	sqlite3_reset(x->begin);
	sqlite3_reset(x->insert);
	sqlite3_reset(x->commit);
	return 0;
}

static bench_result bench_naive(void)
{
	char path[PATH_MAX + 16];
	naive_ctx x = { 0 };
	bench_result r;

	snprintf(path, sizeof(path), "%s/naive.db", bench.work_dir);
	if (sqlite3_open(path, &x.db) != SQLITE_OK ||
	    sqlite3_exec(x.db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
			       "CREATE TABLE e(seq INTEGER PRIMARY KEY, body TEXT NOT NULL)",
			 NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(x.db, "BEGIN", -1, &x.begin, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(x.db, "INSERT INTO e(seq, body) VALUES (?1, '" APPEND_BODY "')", -1,
			       &x.insert, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(x.db, "COMMIT", -1, &x.commit, NULL) != SQLITE_OK)
		bench_die("naive sqlite", sqlite3_errmsg(x.db));
	r = bench_run_phase(naive_one, &x, 1);
	sqlite3_finalize(x.begin);
	sqlite3_finalize(x.insert);
	sqlite3_finalize(x.commit);
	sqlite3_close(x.db);
	return r;
}

/* The store's writes and commits so far, from memd's /metrics: 1, or 0
 * when memd has no such metrics. */
static int store_writes(bench_conn *c, long long *ret_writes, long long *ret_groups)
{
	const char *w, *g;

	if (bench_call(c, "GET", "/metrics", NULL, 200) < 0)
		bench_die("GET /metrics", "failed (see above)");
	w = strstr(c->buf, "\nmemd_store_write_requests_total{");
	g = strstr(c->buf, "\nmemd_store_write_groups_total{");
	if (!w || !g || !(w = strchr(w, '}')) || !(g = strchr(g, '}')))
		return 0;
	*ret_writes = atoll(w + 1);
	*ret_groups = atoll(g + 1);
	return 1;
}

/* memd serve (bench.memd_exe) with config cfg on database db: GET context
 * and single-event POST events over HTTP, and the POST phase's mean
 * commit group (0: unknown). */
static void http_phases(http_ctx *h, const char *cfg, const char *db, bench_result *ret_ctx,
			bench_result *ret_app, double *ret_group)
{
	long long w0 = 0, g0 = 0, w1 = 0, g1 = 0;
	int have;

	bench_start_memd(cfg, db);
	for (int i = 0; i < bench.conns; i++) {
		char path[128], body[64];
		h->conns[i].fd = -1;
		snprintf(body, sizeof(body), "{\"id\":\"ctx%d\"}", i);
		if (bench_call(&h->conns[i], "POST", "/v1/apps/bench/users/u/sessions", body, 201) < 0)
			bench_die("setup", "create session");
		snprintf(path, sizeof(path), "/v1/apps/bench/users/u/sessions/ctx%d/events", i);
		for (int k = 0; k < CONTEXT_EVENTS; k++)
			if (bench_call(&h->conns[i], "POST", path, APPEND_BODY, 200) < 0)
				bench_die("setup", "append");
		snprintf(body, sizeof(body), "{\"id\":\"app%d\"}", i);
		if (bench_call(&h->conns[i], "POST", "/v1/apps/bench/users/u/sessions", body, 201) < 0)
			bench_die("setup", "create session");
		h->len[i] = (size_t)snprintf(h->req[i], BENCH_REQ_MAX,
					     "GET /v1/apps/bench/users/u/sessions/ctx%d/context HTTP/1.1\r\n"
					     "Host: 127.0.0.1\r\n\r\n", i);
	}
	h->want = 200;
	*ret_ctx = bench_run_phase(http_one, h, bench.conns);
	for (int i = 0; i < bench.conns; i++)
		h->len[i] = (size_t)snprintf(h->req[i], BENCH_REQ_MAX,
					     "POST /v1/apps/bench/users/u/sessions/app%d/events HTTP/1.1\r\n"
					     "Host: 127.0.0.1\r\nContent-Type: application/json\r\n"
					     "Content-Length: %zu\r\n\r\n%s", i, strlen(APPEND_BODY), APPEND_BODY);
	have = store_writes(&h->conns[0], &w0, &g0);
	*ret_app = bench_run_phase(http_one, h, bench.conns);
	have = have && store_writes(&h->conns[0], &w1, &g1);
	*ret_group = have && g1 > g0 ? (double)(w1 - w0) / (double)(g1 - g0) : 0;
	for (int i = 0; i < bench.conns; i++)
		if (h->conns[i].fd >= 0)
			close(h->conns[i].fd);
	bench_stop_memd();
}

/* ---- main ------------------------------------------------------------------------------------ */

/* A mean commit group as text ("n/a" when unknown). */
static const char *group_text(double group)
{
	static char buf[2][32];
	static int k;

	k ^= 1;
	if (group <= 0)
		return "n/a";
	snprintf(buf[k], sizeof(buf[k]), "%.1f", group);
	return buf[k];
}

static void print_row(const char *op, const char *via, int threads, bench_result r, const char *note)
{
	printf("%-30s %-16s %5d %12.0f %9.3f %9.3f %9.1f %9.1f %7.2f  %s\n", op, via, threads, r.rate,
	       r.p50_ms, r.p99_ms, r.cpu_server_us, r.cpu_self_us,
	       r.cpu_server_us > 0 ? r.sw_server : r.sw_self, note);
}

int main(int argc, char **argv)
{
	http_ctx *h;
	bench_conn *cs;
	bench_result ctx_http, ctx_facade, app_http, app_facade, naive, ctx_base = { 0 },
		     app_base = { 0 };
	double group = 0, group_base = 0;
	const char *base = getenv("MEMD_BENCH_BASE");
	char note[160];

	bench_init(argc, argv, "http_bench");
	/* HTTP. */
	h = calloc(1, sizeof(*h));
	cs = calloc((size_t)bench.conns, sizeof(*cs));
	if (!h || !cs)
		bench_die("setup", "out of memory");
	h->conns = cs;
	http_phases(h, "http.yaml", "http.db", &ctx_http, &app_http, &group);
	if (base && *base) {
		bench_use_build(base);
		http_phases(h, "base.yaml", "base.db", &ctx_base, &app_base, &group_base);
		bench_use_build(NULL);
	}

	/* The facade, in this process, on its own database. */
	{
		const char *path[] = { bench.plugin_dir, NULL };
		char cfg[PATH_MAX + 64];
		memd_options o = { .struct_size = sizeof(o), .config_path = cfg, .plugin_path = path,
				   .log = log_nothing, .log_level = MEMD_LOG_ERROR };
		memd_error err = { .struct_size = sizeof(err) };
		facade_ctx f;
		bench_write_config("facade.yaml", "facade.db");
		snprintf(cfg, sizeof(cfg), "%s/facade.yaml", bench.work_dir);
		if (memd_open(&o, &f.m, &err) < 0)
			bench_die("memd_open", err.msg);
		facade_setup(f.m);
		ctx_facade = bench_run_phase(facade_context, &f, bench.conns);
		app_facade = bench_run_phase(facade_append, &f, bench.conns);
		memd_close(f.m);
	}
	naive = bench_naive();

	printf("memd http_bench: %d connections/threads, %.1f s per run, server.threads %d, "
	       "SQLite WAL synchronous=FULL, in %s\n\n", bench.conns, bench.seconds,
	       bench.server_threads, bench.work_dir);
	printf("%-30s %-16s %5s %12s %9s %9s %9s %9s %7s  %s\n", "operation", "via", "conns", "req/s",
	       "p50 ms", "p99 ms", "srv us", "cli us", "sleeps", "ratio");
	snprintf(note, sizeof(note), "HTTP = %.0f%% of the facade", PERCENT * ctx_http.rate / ctx_facade.rate);
	print_row("GET context (20 events)", "HTTP", bench.conns, ctx_http, note);
	if (base && *base) {
		snprintf(note, sizeof(note), "HTTP = %.0f%% of the facade", PERCENT * ctx_base.rate / ctx_facade.rate);
		print_row("GET context (20 events)", "HTTP, base", bench.conns, ctx_base, note);
	}
	print_row("memd_context", "facade", bench.conns, ctx_facade, "reference");
	snprintf(note, sizeof(note), "HTTP = %.0f%% of the facade, %.1fx naive, mean group %s",
		 PERCENT * app_http.rate / app_facade.rate, app_http.rate / naive.rate,
		 group_text(group));
	print_row("POST events (1 event)", "HTTP", bench.conns, app_http, note);
	if (base && *base) {
		snprintf(note, sizeof(note), "HTTP = %.0f%% of the facade, %.1fx naive, mean group %s",
			 PERCENT * app_base.rate / app_facade.rate, app_base.rate / naive.rate,
			 group_text(group_base));
		print_row("POST events (1 event)", "HTTP, base", bench.conns, app_base, note);
	}
	snprintf(note, sizeof(note), "%.1fx naive", app_facade.rate / naive.rate);
	print_row("memd_events_append (1 event)", "facade", bench.conns, app_facade, note);
	print_row("INSERT, 1 txn each (naive)", "raw sqlite3", 1, naive, "reference");
	printf("\nsrv us / cli us: CPU time (user + system, all threads) per request of memd serve "
	       "and of this process (the load generator, or the facade in-process); sleeps: "
	       "voluntary context switches per request (each a wake-up) of memd serve's threads, "
	       "or of this process's for the in-process rows.\n");
	{
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		double http_cpu = app_http.cpu_server_us + app_http.cpu_self_us;

		if (cpus < 1)
			cpus = 1;
		printf("bounds on this machine: %ld CPUs at %.1f us per HTTP append (server + "
		       "client) allow at most %.0f/s; %d callers each waiting for a durable commit "
		       "allow at most %d x the one-commit rate = %.0f/s\n",
		       cpus, http_cpu, http_cpu > 0 ? (double)cpus * BENCH_US_PER_SEC / http_cpu : 0, bench.conns,
		       bench.conns, bench.conns * naive.rate);
	}
	if (base && *base)
		printf("against the base (%s) in this run: POST events %.2fx the rate, %.0f%% of the "
		       "server CPU per request; GET context %.2fx the rate\n", base,
		       app_base.rate > 0 ? app_http.rate / app_base.rate : 0,
		       app_base.cpu_server_us > 0 ? PERCENT * app_http.cpu_server_us / app_base.cpu_server_us : 0,
		       ctx_base.rate > 0 ? ctx_http.rate / ctx_base.rate : 0);
	printf("targets: server CPU <= 50 us per durable POST, >= 2x the base's append rate, "
	       "mean commit group >= 8 with 16 connections, GET context over HTTP >= 60%% of the "
	       "facade\n");
	bench_cleanup();
	free(h);
	free(cs);
	return 0;
}
