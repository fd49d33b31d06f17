/* SPDX-License-Identifier: MIT */
/*
 * mysql_bench: the MariaDB store's append throughput and context latency,
 * each beside the raw client library (libmariadb prepared statements)
 * running the same statements in the same run, so the plugin's overhead
 * reads as a ratio.
 *
 * Runs (each for the same time, on a fresh database of the server in
 * MEMD_MYSQL_HOST/PORT/USER/PASSWORD, e.g. under
 * tests/services/with-services.sh):
 *  1. append, batch 1 and batch 32, one thread: the raw client sends
 *     exactly the plugin's statements for an append (START TRANSACTION,
 *     the session row lock, the session update, the feed counter, the
 *     INSERT - one row, or 32 in one array-bound execution - and COMMIT);
 *  2. concurrent single-event appends, N threads on their own sessions
 *     (raw: one connection per thread; plugin: pool N, or -p P; with
 *     P < N appends queue for a connection and share transactions by
 *     group commit);
 *  3. context: the newest 20 events of a 1,024-event session (the
 *     plugin's events_load against the same SELECT over the raw client),
 *     latency per call.
 * Each figure is the median of -r rounds (default 5) of -s seconds, raw
 * and plugin alternating, so a machine whose load changes during the run
 * skews both sides alike.
 * Not a pass/fail test. Run from a build dir:
 *   ../tests/services/with-services.sh --only mariadb \
 *       env MEMD_PLUGIN_PATH=plugins tests/multiproc/mysql_bench [-t threads] [-p pool] \
 *       [-s seconds] [-r rounds]
 */
#include <getopt.h>
#include <mysql.h>
#include <pthread.h>
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
#define DEFAULT_ROUNDS 5
#define MAX_THREADS 64
#define MAX_ROUNDS 15
#define MAX_BATCH 32
#define MAX_SEARCH_DIRS 16
#define ID_LEN 64
#define YAML_LEN 1024
#define CONTEXT_BATCHES 32
#define CONTEXT_LIMIT_N 20
#define NS_PER_SEC 1e9
#define US_PER_SEC 1e6
#define APP "bench"
#define USER "u"
#define T0 1700000000000000LL
#define EVENT_TEXT "hello from the mariadb bench"
#define EVENT_CONTENT "{\"parts\":[{\"type\":\"text\",\"text\":\"" EVENT_TEXT "\"}]}"
#define EVENT_TOKENS 6
#define INSERT_PARAMS 18
#define STRING_COLS 12
#define CONTEXT_COLS 17
#define RESULT_BUF 4096

/* The plugin's statements (backends/mysql), verbatim. */
static const char SQL_SETUP[] =
	"SET SESSION max_statement_time = 30, innodb_lock_wait_timeout = 30,"
	" sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION,ERROR_FOR_DIVISION_BY_ZERO'";
static const char SQL_ISOLATION[] = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";
static const char SQL_BEGIN[] = "START TRANSACTION";
static const char SQL_COMMIT[] = "COMMIT";
static const char SQL_LOCK[] =
	"SELECT version, last_seq, summary_seq FROM memd_sessions"
	" WHERE app = ? AND user = ? AND id = ? FOR UPDATE";
static const char SQL_APPENDED[] =
	"UPDATE memd_sessions SET version = version + 1, last_seq = ?, summary_seq = ?,"
	" updated_us = ?, title = COALESCE(title, ?)"
	" WHERE app = ? AND user = ? AND id = ?";
static const char SQL_ADVANCE[] =
	"UPDATE memd_feed_counter SET last = LAST_INSERT_ID(last + ?) WHERE id = 1";
static const char SQL_INSERT[] =
	"INSERT INTO memd_events (position, app, user, session, seq, id, invocation_id, author,"
	" role, branch, content, actions, metadata, timestamp_us, text, tokens, covers_seq,"
	" is_summary) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
/* The newest rows, newest first (the plugin also copies them to hand
 * them out oldest first; the raw side only reads them). */
static const char SQL_CONTEXT[] =
	"SELECT position, app, user, session, seq, id, invocation_id, author,"
	" role, branch, content, actions, metadata, timestamp_us, text, tokens, covers_seq"
	" FROM memd_events FORCE INDEX (memd_events_by_seq)"
	" WHERE app = ? AND user = ? AND session = ? AND seq > ? AND seq < ?"
	" ORDER BY seq DESC LIMIT ?";

static double bench_seconds = DEFAULT_SECONDS; /* per round */
static int bench_rounds = DEFAULT_ROUNDS;
static char dbname[ID_LEN];

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / NS_PER_SEC;
}

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "mysql_bench: %s: %s\n", what, msg);
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

static void plugin_open(plugin_store *ps, int pool)
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
		 "{plugin: mysql, host: \"${MEMD_MYSQL_HOST}\", port: \"${MEMD_MYSQL_PORT}\","
		 " user: \"${MEMD_MYSQL_USER}\", password: \"${MEMD_MYSQL_PASSWORD}\","
		 " database: %s, create_database: true, sslmode: disabled, pool: %d}", dbname, pool);
	if (config_parse_string(yaml, strlen(yaml), "bench", &ps->cfg, &err) < 0 ||
	    loader_open("mysql", search, &ps->plugin, &err) < 0 ||
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
				       .tokens = EVENT_TOKENS, .timestamp_us = T0 + k };
		ptrs[j] = &evs[j];
	}
	if (ps->ops->append(ps->h, &call, &sc, &a, &res, &err) < 0)
		die("append", err.msg);
}

/* ---- the raw client ------------------------------------------------- */

typedef struct raw_conn {
	MYSQL *m;
	MYSQL_STMT *begin, *commit, *lock, *appended, *advance, *insert, *insert1, *context;
	unsigned bulk;               /* array size set on insert */
} raw_conn;

static MYSQL_STMT *raw_prepare(raw_conn *c, const char *sql)
{
	MYSQL_STMT *st = mysql_stmt_init(c->m);

	if (!st || mysql_stmt_prepare(st, sql, strlen(sql)))
		die(sql, st ? mysql_stmt_error(st) : "out of memory");
	return st;
}

static void raw_run(MYSQL_STMT *st, const char *what)
{
	if (mysql_stmt_execute(st))
		die(what, mysql_stmt_error(st));
}

static void raw_open(raw_conn *c)
{
	const char *port = getenv("MEMD_MYSQL_PORT");

	memset(c, 0, sizeof(*c));
	c->m = mysql_init(NULL);
	if (!c->m || mysql_optionsv(c->m, MYSQL_SET_CHARSET_NAME, "utf8mb4") ||
	    !mysql_real_connect(c->m, getenv("MEMD_MYSQL_HOST"), getenv("MEMD_MYSQL_USER"),
				getenv("MEMD_MYSQL_PASSWORD"), dbname,
				port ? (unsigned)atoi(port) : 0, NULL, CLIENT_FOUND_ROWS))
		die("connect", c->m ? mysql_error(c->m) : "out of memory");
	raw_run(raw_prepare(c, SQL_SETUP), "setup");
	raw_run(raw_prepare(c, SQL_ISOLATION), "isolation");
	c->begin = raw_prepare(c, SQL_BEGIN);
	c->commit = raw_prepare(c, SQL_COMMIT);
	c->lock = raw_prepare(c, SQL_LOCK);
	c->appended = raw_prepare(c, SQL_APPENDED);
	c->advance = raw_prepare(c, SQL_ADVANCE);
	c->insert = raw_prepare(c, SQL_INSERT);
	c->insert1 = raw_prepare(c, SQL_INSERT);
	c->context = raw_prepare(c, SQL_CONTEXT);
}

static void raw_close(raw_conn *c)
{
	MYSQL_STMT *all[] = { c->begin, c->commit, c->lock, c->appended, c->advance, c->insert,
			      c->insert1, c->context };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		mysql_stmt_close(all[i]);
	mysql_close(c->m);
}

static void bind_str(MYSQL_BIND *b, const char *s, unsigned long *len)
{
	memset(b, 0, sizeof(*b));
	b->buffer_type = MYSQL_TYPE_STRING;
	b->buffer = (void *)s;
	*len = (unsigned long)strlen(s);
	b->length = len;
}

static void bind_i64(MYSQL_BIND *b, long long *v)
{
	memset(b, 0, sizeof(*b));
	b->buffer_type = MYSQL_TYPE_LONGLONG;
	b->buffer = v;
}

static void raw_append(raw_conn *c, const char *session, const char *prefix, long k, int batch)
{
	char ids[MAX_BATCH][ID_LEN];
	MYSQL_BIND b[INSERT_PARAMS], r[3];
	unsigned long lens[INSERT_PARAMS];
	long long v[INSERT_PARAMS], head[3];
	/* Column arrays for the insert (array binding, as the plugin). */
	char *strs[STRING_COLS][MAX_BATCH];
	unsigned long slens[STRING_COLS][MAX_BATCH];
	char ind[INSERT_PARAMS][MAX_BATCH];
	long long ints[6][MAX_BATCH];
	long long first;
	unsigned array = (unsigned)batch;
	my_bool is_null_yes = 1;

	raw_run(c->begin, "begin");
	/* The session row lock and its counters. */
	bind_str(&b[0], APP, &lens[0]);
	bind_str(&b[1], USER, &lens[1]);
	bind_str(&b[2], session, &lens[2]);
	mysql_stmt_bind_param(c->lock, b);
	raw_run(c->lock, "lock");
	for (int i = 0; i < 3; i++)
		bind_i64(&r[i], &head[i]);
	mysql_stmt_bind_result(c->lock, r);
	if (mysql_stmt_fetch(c->lock) != 0)
		die("lock", "no session row");
	mysql_stmt_free_result(c->lock);
	/* The session's new counters. */
	v[0] = head[1] + batch;
	v[1] = head[2];
	v[2] = T0 + k;
	bind_i64(&b[0], &v[0]);
	bind_i64(&b[1], &v[1]);
	bind_i64(&b[2], &v[2]);
	memset(&b[3], 0, sizeof(b[3]));
	b[3].buffer_type = MYSQL_TYPE_NULL;
	bind_str(&b[4], APP, &lens[4]);
	bind_str(&b[5], USER, &lens[5]);
	bind_str(&b[6], session, &lens[6]);
	mysql_stmt_bind_param(c->appended, b);
	raw_run(c->appended, "appended");
	/* Positions. */
	v[0] = batch;
	bind_i64(&b[0], &v[0]);
	mysql_stmt_bind_param(c->advance, b);
	raw_run(c->advance, "advance");
	first = (long long)mysql_stmt_insert_id(c->advance) - batch + 1;
	/* The rows. */
	for (int j = 0; j < batch; j++) {
		const char *col[STRING_COLS] = { APP, USER, session, NULL, NULL, "bench", "user",
						 NULL, EVENT_CONTENT, NULL, NULL, EVENT_TEXT };
		snprintf(ids[j], ID_LEN, "%s-%ld-%d", prefix, k, j);
		col[3] = ids[j];
		for (int s = 0; s < STRING_COLS; s++) {
			strs[s][j] = (char *)(col[s] ? col[s] : "");
			slens[s][j] = col[s] ? (unsigned long)strlen(col[s]) : 0;
		}
		ints[0][j] = first + j;            /* position */
		ints[1][j] = head[1] + 1 + j;      /* seq */
		ints[2][j] = T0 + k;               /* timestamp_us */
		ints[3][j] = EVENT_TOKENS;         /* tokens */
		ints[4][j] = 0;                    /* covers_seq */
		ints[5][j] = 0;                    /* is_summary */
	}
	{
		/* Column order: position, app, user, session, seq, id,
		 * invocation_id, author, role, branch, content, actions,
		 * metadata, timestamp_us, text, tokens, covers_seq, is_summary. */
		static const int kind[INSERT_PARAMS] = { -1, 0, 1, 2, -2, 3, 4, 5, 6, 7, 8, 9, 10,
							 -3, 11, -4, -5, -6 };
		for (int p = 0; p < INSERT_PARAMS; p++) {
			memset(&b[p], 0, sizeof(b[p]));
			if (kind[p] < 0) {
				b[p].buffer_type = MYSQL_TYPE_LONGLONG;
				b[p].buffer = ints[-kind[p] - 1];
				memset(ind[p], STMT_INDICATOR_NONE, MAX_BATCH);
			} else {
				int s = kind[p];
				int null = s == 4 || s == 7 || s == 9 || s == 10;
				b[p].buffer_type = MYSQL_TYPE_STRING;
				b[p].buffer = strs[s];
				b[p].length = slens[s];
				memset(ind[p], null ? STMT_INDICATOR_NULL : STMT_INDICATOR_NONE,
				       MAX_BATCH);
			}
			b[p].u.indicator = ind[p];
		}
	}
	if (batch == 1) {
		/* One row: a plain execution, as the plugin does. */
		for (int p = 0; p < INSERT_PARAMS; p++) {
			b[p].buffer = b[p].buffer_type == MYSQL_TYPE_STRING
					      ? (void *)((char **)b[p].buffer)[0] : b[p].buffer;
			b[p].is_null = ind[p][0] == STMT_INDICATOR_NULL ? &is_null_yes : NULL;
			b[p].u.indicator = NULL;
		}
		mysql_stmt_bind_param(c->insert1, b);
		raw_run(c->insert1, "insert");
	} else {
		if (c->bulk != array) {
			mysql_stmt_attr_set(c->insert, STMT_ATTR_ARRAY_SIZE, &array);
			c->bulk = array;
		}
		mysql_stmt_bind_param(c->insert, b);
		raw_run(c->insert, "insert");
	}
	raw_run(c->commit, "commit");
}

static void raw_context(raw_conn *c, const char *session)
{
	MYSQL_BIND b[6], r[CONTEXT_COLS];
	unsigned long lens[3], rlen[CONTEXT_COLS];
	long long v[3] = { 0, INT64_MAX, CONTEXT_LIMIT_N };
	static char bufs[CONTEXT_COLS][RESULT_BUF];
	my_bool isnull[CONTEXT_COLS];
	int rows = 0;

	bind_str(&b[0], APP, &lens[0]);
	bind_str(&b[1], USER, &lens[1]);
	bind_str(&b[2], session, &lens[2]);
	for (int i = 0; i < 3; i++)
		bind_i64(&b[3 + i], &v[i]);
	mysql_stmt_bind_param(c->context, b);
	raw_run(c->context, "context");
	memset(r, 0, sizeof(r));
	for (int i = 0; i < CONTEXT_COLS; i++) {
		r[i].buffer_type = MYSQL_TYPE_STRING;
		r[i].buffer = bufs[i];
		r[i].buffer_length = RESULT_BUF;
		r[i].length = &rlen[i];
		r[i].is_null = &isnull[i];
	}
	mysql_stmt_bind_result(c->context, r);
	while (mysql_stmt_fetch(c->context) == 0)
		rows++;
	mysql_stmt_free_result(c->context);
	if (rows != CONTEXT_LIMIT_N)
		die("context", "wrong row count");
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
		raw_close(&c);
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
		raw_close(&c);
	return (now_s() - t0) * US_PER_SEC / (double)n;
}

static void drop_database(void)
{
	raw_conn c;
	char sql[ID_LEN * 2];

	raw_open(&c);
	/* A constant name of our own making ("memd_bench_<pid>"). */
	snprintf(sql, sizeof(sql), "DROP DATABASE `%s`", dbname);
	if (mysql_real_query(c.m, sql, strlen(sql)))
		fprintf(stderr, "mysql_bench: could not drop %s: %s\n", dbname, mysql_error(c.m));
	raw_close(&c);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Median events/s of raw and plugin over the rounds, alternating. */
static void compare_appends(plugin_store *ps, int batch, int threads, const char *tag,
			    double *ret_raw, double *ret_plugin)
{
	double raw[MAX_ROUNDS], plugin[MAX_ROUNDS];

	for (int i = 0; i < bench_rounds; i++) {
		char rt[ID_LEN], pt[ID_LEN];
		snprintf(rt, sizeof(rt), "r%s-%d", tag, i);
		snprintf(pt, sizeof(pt), "p%s-%d", tag, i);
		if (i % 2) {
			plugin[i] = run(ps, 0, batch, threads, pt);
			raw[i] = run(ps, 1, batch, threads, rt);
		} else {
			raw[i] = run(ps, 1, batch, threads, rt);
			plugin[i] = run(ps, 0, batch, threads, pt);
		}
	}
	*ret_raw = median(raw, bench_rounds);
	*ret_plugin = median(plugin, bench_rounds);
}

int main(int argc, char **argv)
{
	int threads = DEFAULT_THREADS, pool = 0, opt;
	plugin_store ps = { 0 };
	double raw1, plug1, raw32, plug32, rawn, plugn, rawc, plugc;
	double rawcs[MAX_ROUNDS], plugcs[MAX_ROUNDS];

	while ((opt = getopt(argc, argv, "t:p:s:r:")) != -1) {
		if (opt == 't')
			threads = atoi(optarg);
		else if (opt == 'p')
			pool = atoi(optarg);
		else if (opt == 's')
			bench_seconds = atof(optarg);
		else if (opt == 'r')
			bench_rounds = atoi(optarg);
		else
			die("usage", "mysql_bench [-t threads] [-p pool] [-s seconds] [-r rounds]");
	}
	if (threads < 1 || threads > MAX_THREADS || bench_seconds <= 0 || bench_rounds < 1 ||
	    bench_rounds > MAX_ROUNDS || pool < 0 || pool > MAX_THREADS)
		die("usage", "bad -t, -p, -s or -r");
	if (pool == 0)
		pool = threads;
	if (!getenv("MEMD_MYSQL_HOST"))
		die("setup", "MEMD_MYSQL_HOST is not set (run under tests/services/with-services.sh)");
	snprintf(dbname, sizeof(dbname), "memd_bench_%ld", (long)getpid());
	plugin_open(&ps, pool);

	printf("MariaDB store vs raw libmariadb, same statements (medians of %d rounds of "
	       "%.1f s; plugin pool %d)\n", bench_rounds, bench_seconds, pool);
	compare_appends(&ps, 1, 1, "1", &raw1, &plug1);
	printf("append batch 1, 1 thread:   raw %9.0f ev/s   plugin %9.0f ev/s   ratio %.2f\n",
	       raw1, plug1, plug1 / raw1);
	compare_appends(&ps, MAX_BATCH, 1, "32", &raw32, &plug32);
	printf("append batch 32, 1 thread:  raw %9.0f ev/s   plugin %9.0f ev/s   ratio %.2f\n",
	       raw32, plug32, plug32 / raw32);
	compare_appends(&ps, 1, threads, "n", &rawn, &plugn);
	printf("append batch 1, %2d threads: raw %9.0f ev/s   plugin %9.0f ev/s   ratio %.2f\n",
	       threads, rawn, plugn, plugn / rawn);

	plugin_session(&ps, "ctx");
	for (long k = 0; k < CONTEXT_BATCHES; k++)
		plugin_append(&ps, "ctx", "c", k, MAX_BATCH);
	for (int i = 0; i < bench_rounds; i++) {
		rawcs[i] = context_latency(&ps, 1, "ctx");
		plugcs[i] = context_latency(&ps, 0, "ctx");
	}
	rawc = median(rawcs, bench_rounds);
	plugc = median(plugcs, bench_rounds);
	printf("context (newest %d of %d):  raw %9.1f us      plugin %9.1f us      ratio %.2f "
	       "(throughput)\n", CONTEXT_LIMIT_N, CONTEXT_BATCHES * MAX_BATCH, rawc, plugc,
	       rawc / plugc);
	plugin_close(&ps);
	drop_database();
	return 0;
}
