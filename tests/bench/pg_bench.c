/* SPDX-License-Identifier: MIT */
/*
 * pg_bench: the PostgreSQL store's append throughput and context latency,
 * each beside raw libpq running the same statements in the same run, so
 * the plugin's overhead reads as a ratio.
 *
 * Runs (each for the same time, on a fresh schema of the server in
 * MEMD_PG_DSN / MEMD_PG_PASSWORD, e.g. under tests/services/with-services.sh):
 *  1. append, batch 1 and batch 32, one thread: raw libpq sends exactly the
 *     plugin's statements for an append (BEGIN, the session row lock, the
 *     id lookups; then the feed counter, the INSERTs, the session update,
 *     COMMIT), prepared and pipelined into the same two round trips;
 *  2. concurrent single-event appends, N threads: raw libpq with one
 *     connection and one transaction per append per thread, against the
 *     plugin with group commit (pool N) and without it;
 *  3. context: the newest 20 events of a 1,000-event session (the
 *     plugin's events_load against the same SELECT over raw libpq),
 *     latency per call.
 * Not a pass/fail test. Run from a build dir:
 *   ../tests/services/with-services.sh --only postgres \
 *       env MEMD_PLUGIN_PATH=plugins tests/bench/pg_bench [-t threads] [-s seconds]
 */
#include <getopt.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <memd/plugin.h>

#include "config.h"
#include "loader.h"

#define DEFAULT_THREADS 8
#define DEFAULT_SECONDS 2.0
#define MAX_THREADS 64
#define MAX_BATCH 32
#define MAX_SEARCH_DIRS 16
#define ID_LEN 64
#define YAML_LEN 1024
#define NUM_LEN 24
#define CONTEXT_EVENTS 1000
#define CONTEXT_LIMIT "20"
#define CONTEXT_LIMIT_N 20
#define NS_PER_SEC 1e9
#define US_PER_SEC 1e6
#define APP "bench"
#define USER "u"
#define T0 1700000000000000LL
#define EVENT_TEXT "hello from the postgres bench"
#define EVENT_CONTENT "{\"parts\":[{\"type\":\"text\",\"text\":\"" EVENT_TEXT "\"}]}"

/* The plugin's statements (backends/postgres), verbatim. */
static const char SQL_LOCK[] =
	"SELECT version, last_seq, summary_seq FROM sessions"
	" WHERE app = $1 AND \"user\" = $2 AND id = $3 FOR NO KEY UPDATE";
static const char SQL_IDS[] =
	"SELECT id, seq FROM events WHERE app = $1 AND \"user\" = $2 AND session = $3"
	" AND id IN ($4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,"
	" $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35)";
static const char SQL_ALLOC[] = "UPDATE feed_counter SET last = last + $1::bigint WHERE id = 1";
static const char SQL_INSERT[] =
	"INSERT INTO events (app, \"user\", session, seq, id, position, invocation_id, author,"
	" role, branch, content, actions, metadata, timestamp_us, text, tokens, covers_seq)"
	" VALUES ($1, $2, $3, $4, $5, (SELECT last FROM feed_counter WHERE id = 1) - $6::bigint,"
	" $7, $8, $9, $10, $11::jsonb, $12::jsonb, $13::jsonb, $14, $15, $16, $17)";
static const char SQL_APPENDED[] =
	"UPDATE sessions SET version = version + 1, last_seq = $4, summary_seq = $5,"
	" updated_us = $6, title = coalesce(title, $7)"
	" WHERE app = $1 AND \"user\" = $2 AND id = $3";
static const char SQL_CONTEXT[] =
	"SELECT position, app, \"user\", session, seq, id, invocation_id, author, role, branch,"
	" content::text, actions::text, metadata::text, timestamp_us, text, tokens, covers_seq"
	" FROM events WHERE app = $1 AND \"user\" = $2 AND session = $3 AND seq > $4"
	" AND seq < $5 ORDER BY seq DESC LIMIT $6";
static const char SQL_EXISTS[] =
	"SELECT version, last_seq, summary_seq FROM sessions"
	" WHERE app = $1 AND \"user\" = $2 AND id = $3";

static double bench_seconds = DEFAULT_SECONDS;
static char schema[ID_LEN];

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / NS_PER_SEC;
}

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "pg_bench: %s: %s\n", what, msg);
	exit(1);
}

/* ---- the plugin ----------------------------------------------------- */

typedef struct plugin_store {
	loader_plugin *plugin;
	loader_instance *inst;
	config_node *cfg;
	const memd_store_ops *ops;
	void *h;
} plugin_store;

static void plugin_open(plugin_store *ps, int pool, int group_commit)
{
	char yaml[YAML_LEN];
	const char *search[MAX_SEARCH_DIRS + 1];
	char *paths = strdup(getenv("MEMD_PLUGIN_PATH") ? getenv("MEMD_PLUGIN_PATH") : "plugins");
	char *save = NULL;
	size_t n = 0;
	memd_error err = { .struct_size = sizeof(err) };

	for (char *t = strtok_r(paths, ":", &save); t && n < MAX_SEARCH_DIRS;
	     t = strtok_r(NULL, ":", &save))
		search[n++] = t;
	search[n] = NULL;
	snprintf(yaml, sizeof(yaml),
		 "{plugin: postgres, dsn: \"${MEMD_PG_DSN}\", password: \"${MEMD_PG_PASSWORD}\","
		 " schema: %s, pool: %d, group_commit: %d}", schema, pool, group_commit);
	if (config_parse_string(yaml, strlen(yaml), "bench", &ps->cfg, &err) < 0 ||
	    loader_open("postgres", search, &ps->plugin, &err) < 0 ||
	    loader_instance_create(ps->plugin, "stores.bench", ps->cfg, "plugin", NULL, &ps->inst,
				   &err) < 0)
		die("plugin", err.msg);
	free(paths);
	ps->ops = loader_store_ops(ps->plugin);
	ps->h = loader_instance_handle(ps->inst);
}

static void plugin_close(plugin_store *ps)
{
	loader_instance_destroy(ps->inst);
	loader_close(ps->plugin);
	config_free(ps->cfg);
}

static int32_t ignore_session(void *ud, const memd_session *s)
{
	(void)ud;
	(void)s;
	return 0;
}

static void plugin_session(plugin_store *ps, const char *id)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_session s = { .struct_size = sizeof(s), .app = APP, .user = USER, .id = id,
			   .metadata_json = "{}", .created_us = T0 };
	memd_session_sink sink = { .struct_size = sizeof(sink), .session = ignore_session };
	memd_error err = { .struct_size = sizeof(err) };

	if (ps->ops->session_create(ps->h, &call, &s, NULL, &sink, &err) < 0)
		die("session_create", err.msg);
}

static void plugin_append(plugin_store *ps, const char *session, const char *prefix, long k,
			  int batch)
{
	char ids[MAX_BATCH][ID_LEN];
	memd_event evs[MAX_BATCH];
	const memd_event *ptrs[MAX_BATCH];
	int64_t seqs[MAX_BATCH];
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = session };
	memd_append a = { .struct_size = sizeof(a), .events = ptrs, .n_events = (uint32_t)batch,
			  .now_us = T0 + k };
	memd_append_result res = { .struct_size = sizeof(res), .seqs = seqs };
	memd_call call = { .struct_size = sizeof(call) };
	memd_error err = { .struct_size = sizeof(err) };

	for (int j = 0; j < batch; j++) {
		snprintf(ids[j], ID_LEN, "%s-%ld-%d", prefix, k, j);
		evs[j] = (memd_event){ .struct_size = sizeof(memd_event), .id = ids[j],
				       .author = "bench", .role = "user",
				       .content_json = EVENT_CONTENT, .text = EVENT_TEXT,
				       .tokens = 6, .timestamp_us = T0 + k };
		ptrs[j] = &evs[j];
	}
	if (ps->ops->append(ps->h, &call, &sc, &a, &res, &err) < 0)
		die("append", err.msg);
}

/* ---- raw libpq ------------------------------------------------------ */

typedef struct raw_conn {
	PGconn *pg;
} raw_conn;

static void raw_check(PGconn *pg, PGresult *r, ExecStatusType want, const char *what)
{
	if (!r || PQresultStatus(r) != want)
		die(what, r ? PQresultErrorMessage(r) : PQerrorMessage(pg));
	PQclear(r);
}

static void raw_open(raw_conn *c)
{
	const char *keys[] = { "dbname", "password", "client_encoding", NULL };
	const char *vals[] = { getenv("MEMD_PG_DSN"), getenv("MEMD_PG_PASSWORD"), "UTF8", NULL };
	const char *p[1] = { schema };
	PGresult *r;

	c->pg = PQconnectdbParams(keys, vals, 1);
	if (PQstatus(c->pg) != CONNECTION_OK)
		die("connect", PQerrorMessage(c->pg));
	r = PQexecParams(c->pg, "SELECT pg_catalog.set_config('search_path',"
			 " pg_catalog.quote_ident($1::text), false)", 1, NULL, p, NULL, NULL, 0);
	raw_check(c->pg, r, PGRES_TUPLES_OK, "search_path");
	raw_check(c->pg, PQprepare(c->pg, "lock", SQL_LOCK, 3, NULL), PGRES_COMMAND_OK, "prepare");
	raw_check(c->pg, PQprepare(c->pg, "ids", SQL_IDS, 35, NULL), PGRES_COMMAND_OK, "prepare");
	raw_check(c->pg, PQprepare(c->pg, "alloc", SQL_ALLOC, 1, NULL), PGRES_COMMAND_OK, "prepare");
	raw_check(c->pg, PQprepare(c->pg, "insert", SQL_INSERT, 17, NULL), PGRES_COMMAND_OK,
		  "prepare");
	raw_check(c->pg, PQprepare(c->pg, "appended", SQL_APPENDED, 7, NULL), PGRES_COMMAND_OK,
		  "prepare");
	raw_check(c->pg, PQprepare(c->pg, "context", SQL_CONTEXT, 6, NULL), PGRES_COMMAND_OK,
		  "prepare");
	raw_check(c->pg, PQprepare(c->pg, "exists", SQL_EXISTS, 3, NULL), PGRES_COMMAND_OK,
		  "prepare");
	raw_check(c->pg, PQprepare(c->pg, "begin", "BEGIN", 0, NULL), PGRES_COMMAND_OK, "prepare");
	raw_check(c->pg, PQprepare(c->pg, "begin_read",
				   "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL),
		  PGRES_COMMAND_OK, "prepare");
	raw_check(c->pg, PQprepare(c->pg, "commit", "COMMIT", 0, NULL), PGRES_COMMAND_OK,
		  "prepare");
	if (PQenterPipelineMode(c->pg) != 1)
		die("pipeline", PQerrorMessage(c->pg));
}

/* Collect n statement results (keeping the one at keep_at, if >= 0) and
 * the sync. */
static PGresult *raw_collect(raw_conn *c, int n, int keep_at)
{
	PGresult *kept = NULL, *r;

	if (PQpipelineSync(c->pg) != 1)
		die("sync", PQerrorMessage(c->pg));
	for (int i = 0; i < n; i++) {
		r = PQgetResult(c->pg);
		if (!r || (PQresultStatus(r) != PGRES_COMMAND_OK &&
			   PQresultStatus(r) != PGRES_TUPLES_OK))
			die("raw statement", r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
		if (i == keep_at)
			kept = r;
		else
			PQclear(r);
		r = PQgetResult(c->pg);
		if (r)
			die("raw", "extra result");
	}
	r = PQgetResult(c->pg);
	if (!r || PQresultStatus(r) != PGRES_PIPELINE_SYNC)
		die("raw", "no sync");
	PQclear(r);
	return kept;
}

static void raw_send(raw_conn *c, const char *stmt, int n, const char *const *vals)
{
	if (!PQsendQueryPrepared(c->pg, stmt, n, vals, NULL, NULL, 0))
		die("send", PQerrorMessage(c->pg));
}

/* The plugin's append, statement for statement, in its two round trips. */
static void raw_append(raw_conn *c, const char *session, const char *prefix, long k, int batch)
{
	char ids[MAX_BATCH][ID_LEN], seq[MAX_BATCH][NUM_LEN], back[MAX_BATCH][NUM_LEN];
	char ts[NUM_LEN], n[NUM_LEN], last[NUM_LEN];
	const char *idv[35] = { APP, USER, session };
	const char *sess[3] = { APP, USER, session };
	PGresult *head;
	long last_seq;
	int sent = 0;

	for (int j = 0; j < batch; j++) {
		snprintf(ids[j], ID_LEN, "%s-%ld-%d", prefix, k, j);
		idv[3 + j] = ids[j];
	}
	raw_send(c, "begin", 0, NULL);
	raw_send(c, "lock", 3, sess);
	raw_send(c, "ids", 35, idv);
	head = raw_collect(c, 3, 1);
	last_seq = strtol(PQgetvalue(head, 0, 1), NULL, 10);
	PQclear(head);

	snprintf(n, sizeof(n), "%d", batch);
	snprintf(ts, sizeof(ts), "%lld", (long long)(T0 + k));
	{
		const char *v[1] = { n };
		raw_send(c, "alloc", 1, v);
		sent++;
	}
	for (int j = 0; j < batch; j++) {
		const char *v[17];
		snprintf(seq[j], NUM_LEN, "%ld", last_seq + 1 + j);
		snprintf(back[j], NUM_LEN, "%d", batch - 1 - j);
		v[0] = APP; v[1] = USER; v[2] = session; v[3] = seq[j]; v[4] = ids[j];
		v[5] = back[j]; v[6] = NULL; v[7] = "bench"; v[8] = "user"; v[9] = NULL;
		v[10] = EVENT_CONTENT; v[11] = NULL; v[12] = NULL; v[13] = ts; v[14] = EVENT_TEXT;
		v[15] = "6"; v[16] = "0";
		raw_send(c, "insert", 17, v);
		sent++;
	}
	snprintf(last, sizeof(last), "%ld", last_seq + batch);
	{
		const char *v[7] = { APP, USER, session, last, "0", ts, NULL };
		raw_send(c, "appended", 7, v);
		sent++;
	}
	raw_send(c, "commit", 0, NULL);
	sent++;
	raw_collect(c, sent, -1);
}

/* The plugin's context query: session check and the newest N. */
static void raw_context(raw_conn *c, const char *session)
{
	const char *sess[3] = { APP, USER, session };
	const char *v[6] = { APP, USER, session, "0", "9223372036854775807", CONTEXT_LIMIT };
	PGresult *r;

	raw_send(c, "begin_read", 0, NULL);
	raw_send(c, "exists", 3, sess);
	raw_send(c, "context", 6, v);
	raw_send(c, "commit", 0, NULL);
	r = raw_collect(c, 4, 2);
	if (PQntuples(r) != CONTEXT_LIMIT_N)
		die("context", "wrong row count");
	PQclear(r);
}

/* ---- runs ----------------------------------------------------------- */

typedef struct run_arg {
	int raw;
	int batch;
	int thread;
	plugin_store *ps;
	long count;
	const char *tag;
} run_arg;

static void *run_appends(void *p)
{
	run_arg *a = p;
	raw_conn c = { 0 };
	char session[ID_LEN], prefix[ID_LEN];
	double end;

	snprintf(session, sizeof(session), "%s-%d", a->tag, a->thread);
	snprintf(prefix, sizeof(prefix), "%s-%d", a->tag, a->thread);
	if (a->raw)
		raw_open(&c);
	end = now_s() + bench_seconds;
	while (now_s() < end) {
		if (a->raw)
			raw_append(&c, session, prefix, a->count, a->batch);
		else
			plugin_append(a->ps, session, prefix, a->count, a->batch);
		a->count++;
	}
	if (a->raw)
		PQfinish(c.pg);
	return NULL;
}

/* events/s of `threads` threads appending batches to their own sessions. */
static double run(plugin_store *ps, int raw, int batch, int threads, const char *tag)
{
	pthread_t th[MAX_THREADS];
	run_arg args[MAX_THREADS];
	long total = 0;
	double t0, t1;

	for (int t = 0; t < threads; t++) {
		char session[ID_LEN];
		snprintf(session, sizeof(session), "%s-%d", tag, t);
		plugin_session(ps, session);
		args[t] = (run_arg){ .raw = raw, .batch = batch, .thread = t, .ps = ps, .tag = tag };
	}
	t0 = now_s();
	for (int t = 0; t < threads; t++)
		pthread_create(&th[t], NULL, run_appends, &args[t]);
	for (int t = 0; t < threads; t++) {
		pthread_join(th[t], NULL);
		total += args[t].count * batch;
	}
	t1 = now_s();
	return (double)total / (t1 - t0);
}

static int32_t ignore_event(void *ud, const memd_event *e)
{
	(void)ud;
	(void)e;
	return 0;
}

/* Microseconds per context read, raw or through the plugin. */
static double context_latency(plugin_store *ps, int raw, const char *session)
{
	raw_conn c = { 0 };
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = session };
	memd_event_query q = { .struct_size = sizeof(q), .flags = MEMD_EVQ_NEWEST,
			       .limit = CONTEXT_LIMIT_N };
	memd_event_sink sink = { .struct_size = sizeof(sink), .event = ignore_event };
	long n = 0;
	double t0, end;

	if (raw)
		raw_open(&c);
	t0 = now_s();
	end = t0 + bench_seconds;
	while (now_s() < end) {
		if (raw) {
			raw_context(&c, session);
		} else {
			memd_call call = { .struct_size = sizeof(call) };
			memd_error err = { .struct_size = sizeof(err) };
			if (ps->ops->events_load(ps->h, &call, &sc, &q, &sink, &err) < 0)
				die("events_load", err.msg);
		}
		n++;
	}
	if (raw)
		PQfinish(c.pg);
	return (now_s() - t0) * US_PER_SEC / (double)n;
}

int main(int argc, char **argv)
{
	int threads = DEFAULT_THREADS, opt;
	plugin_store ps = { 0 }, ps1 = { 0 };
	double raw1, plug1, raw32, plug32, rawn, plugn, plugn1, rawc, plugc;

	while ((opt = getopt(argc, argv, "t:s:")) != -1) {
		if (opt == 't')
			threads = atoi(optarg);
		else if (opt == 's')
			bench_seconds = atof(optarg);
		else
			die("usage", "pg_bench [-t threads] [-s seconds]");
	}
	if (threads < 1 || threads > MAX_THREADS || bench_seconds <= 0)
		die("usage", "bad -t or -s");
	if (!getenv("MEMD_PG_DSN"))
		die("setup", "MEMD_PG_DSN is not set (run under tests/services/with-services.sh)");
	snprintf(schema, sizeof(schema), "bench_%ld", (long)getpid());
	plugin_open(&ps, threads, MAX_BATCH);

	printf("PostgreSQL store vs raw libpq, same statements (%.1f s per run)\n", bench_seconds);
	raw1 = run(&ps, 1, 1, 1, "r1");
	plug1 = run(&ps, 0, 1, 1, "p1");
	printf("append batch 1, 1 thread:   raw %9.0f ev/s   plugin %9.0f ev/s   ratio %.2f\n",
	       raw1, plug1, plug1 / raw1);
	raw32 = run(&ps, 1, MAX_BATCH, 1, "r32");
	plug32 = run(&ps, 0, MAX_BATCH, 1, "p32");
	printf("append batch 32, 1 thread:  raw %9.0f ev/s   plugin %9.0f ev/s   ratio %.2f\n",
	       raw32, plug32, plug32 / raw32);
	rawn = run(&ps, 1, 1, threads, "rn");
	plugn = run(&ps, 0, 1, threads, "pn");
	plugin_open(&ps1, threads, 1);
	plugn1 = run(&ps1, 0, 1, threads, "pn1");
	plugin_close(&ps1);
	printf("append batch 1, %2d threads: raw %9.0f ev/s   plugin %9.0f ev/s   ratio %.2f"
	       "   (group commit off: %.0f ev/s, ratio %.2f)\n",
	       threads, rawn, plugn, plugn / rawn, plugn1, plugn1 / rawn);

	plugin_session(&ps, "ctx");
	for (long k = 0; k < CONTEXT_EVENTS / MAX_BATCH + 1; k++)
		plugin_append(&ps, "ctx", "c", k, MAX_BATCH);
	rawc = context_latency(&ps, 1, "ctx");
	plugc = context_latency(&ps, 0, "ctx");
	printf("context (newest %d of %d):  raw %9.1f us      plugin %9.1f us      ratio %.2f "
	       "(throughput)\n", CONTEXT_LIMIT_N, (CONTEXT_EVENTS / MAX_BATCH + 1) * MAX_BATCH,
	       rawc, plugc, rawc / plugc);
	plugin_close(&ps);
	return 0;
}
