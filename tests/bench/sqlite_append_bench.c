/* SPDX-License-Identifier: MIT */
/*
 * sqlite_append_bench: durable single-event appends per second on the
 * SQLite store, against the naive limit of one transaction per append.
 *
 * Every case uses WAL and synchronous=FULL (an acknowledged append
 * survives power loss) on a database of its own in a temp directory:
 *  raw     raw sqlite3, one INSERT per transaction, one thread: the
 *          one-transaction-per-append limit of this disk;
 *  batch   raw sqlite3, one thread, N rows per transaction into a table
 *          shaped and indexed like the store's events (a row per session
 *          of N): what perfect batching of N appends could reach with
 *          this schema, with none of an append's other work (a ceiling
 *          for reference, not a store);
 *  plugin  the sqlite plugin called directly (loaded as the host loads
 *          it), 1 thread, and N threads each appending one event at a time
 *          to a session of its own;
 *  facade  libmemd (memd_open with a sqlite store, memd_events_append),
 *          N threads likewise.
 * A shared disk's speed drifts, so the cases take turns: R rounds, each
 * running every case for seconds/R. It prints each case's appends/s over
 * all rounds, its ratio to raw (overall and the range of the per-round
 * ratios), the CPU time (all threads, user + system) per append, and
 * the plugin's group-commit counters (from its log). Not a
 * pass/fail test: meson builds it, nobody times it in CI. From a build
 * directory:
 *   MEMD_PLUGIN_PATH=plugins tests/unit/sqlite_append_bench [-t threads]
 *       [-s seconds] [-r rounds] [-d dir] [-y full|normal] [-o]
 * -o makes every thread append to one shared session.
 */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <memd/memd.h>
#include <memd/plugin.h>

#include "config/config.h"
#include "plugins/hostsvc.h"
#include "plugins/loader.h"

#define DEFAULT_THREADS 16
#define DEFAULT_SECONDS 12.0
#define DEFAULT_ROUNDS 4
#define MAX_THREADS 256
#define MAX_ROUNDS 100
#define MAX_SEARCH_DIRS 16
#define ID_LEN 64
#define BODY_LEN 256
#define WHAT_LEN 96
#define LOG_LEN 512
#define BUSY_TIMEOUT_MS 5000
#define FTW_FDS 16
#define NS_PER_SEC 1e9
#define US_PER_SEC 1e6
#define EVENT_TEXT "hello from the append bench"
#define EVENT_CONTENT "{\"parts\":[{\"type\":\"text\",\"text\":\"" EVENT_TEXT "\"}]}"

static char work_dir[PATH_MAX];
/* The plugin's synchronous setting for the plugin and facade cases:
 * "full" unless -y says otherwise ("normal" shows what the CPU allows). */
static const char *plugin_sync = "full";
/* -o: every thread appends to one session (pages of the per-session
 * indexes are then shared by the whole group) instead of one each. */
static int one_session;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char group_log[LOG_LEN]; /* the last "group commit:" line logged */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / NS_PER_SEC;
}

/* CPU seconds (user + system) the process has used. */
static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / US_PER_SEC;
}

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "sqlite_append_bench: %s: %s\n", what, msg);
	exit(1);
}

static void keep_group_line(void *userdata, int32_t level, const char *component,
			    const char *line)
{
	const char *p = strstr(line, "group commit:");

	(void)userdata;
	(void)level;
	(void)component;
	if (!p)
		return;
	pthread_mutex_lock(&log_lock);
	snprintf(group_log, sizeof(group_log), "%s", p);
	pthread_mutex_unlock(&log_lock);
}

/* ---- a case: threads running `one` until the time is up ---------------- */

typedef struct bench_case {
	char what[WHAT_LEN];
	int threads;
	int per_call;                /* appends one call of `one` makes */
	int (*one)(struct bench_case *c, int thread, uint64_t i); /* 0 = appended */
	void *ctx;
	uint64_t next[MAX_THREADS];  /* each thread's next append number */
	uint64_t done[MAX_THREADS];  /* appended in the current turn */
	atomic_int stop, ready, go;
	uint64_t total;
	double seconds;
	double cpu;                  /* user + system seconds of the process */
	double rate[MAX_ROUNDS];
	char stats[LOG_LEN];
} bench_case;

typedef struct worker_arg {
	bench_case *c;
	int thread;
} worker_arg;

static void *worker(void *p)
{
	worker_arg *w = p;
	bench_case *c = w->c;
	uint64_t i = c->next[w->thread], first = i;

	atomic_fetch_add(&c->ready, 1);
	while (!atomic_load(&c->go))
		sched_yield();
	while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
		if (c->one(c, w->thread, i) != 0)
			break;
		i++;
	}
	c->next[w->thread] = i;
	c->done[w->thread] = i - first;
	return NULL;
}

/* One turn of c for the given time; its rate goes to c->rate[round]. */
static void take_turn(bench_case *c, double seconds, int round)
{
	pthread_t tid[MAX_THREADS];
	worker_arg args[MAX_THREADS];
	uint64_t n = 0;
	double t0, dt, cpu0;

	atomic_store(&c->stop, 0);
	atomic_store(&c->ready, 0);
	atomic_store(&c->go, 0);
	for (int i = 0; i < c->threads; i++) {
		args[i] = (worker_arg){ c, i };
		if (pthread_create(&tid[i], NULL, worker, &args[i]) != 0)
			die("pthread_create", strerror(errno));
	}
	while (atomic_load(&c->ready) < c->threads)
		sched_yield();
	t0 = now_s();
	cpu0 = cpu_s();
	atomic_store(&c->go, 1);
	usleep((useconds_t)(seconds * US_PER_SEC));
	atomic_store(&c->stop, 1);
	for (int i = 0; i < c->threads; i++)
		pthread_join(tid[i], NULL);
	dt = now_s() - t0;
	c->cpu += cpu_s() - cpu0;
	for (int i = 0; i < c->threads; i++)
		n += c->done[i] * (uint64_t)c->per_call;
	c->total += n;
	c->seconds += dt;
	c->rate[round] = (double)n / dt;
}

/* ---- raw sqlite3, one transaction per insert -------------------------- */

typedef struct raw_ctx {
	sqlite3 *db;
	sqlite3_stmt *begin, *insert, *commit;
	int batch;                   /* rows per transaction */
	int64_t seq[MAX_THREADS];    /* batch: each session's last seq */
} raw_ctx;

/* The store's events table and indexes (schema 3), for the batch case. */
static const char SQL_EVENTS_LIKE[] =
	"CREATE TABLE events (position INTEGER PRIMARY KEY, app TEXT NOT NULL,"
	" user TEXT NOT NULL, session TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL,"
	" invocation_id TEXT, author TEXT, role TEXT NOT NULL, branch TEXT, content TEXT,"
	" actions TEXT, metadata TEXT, timestamp_us INTEGER NOT NULL, text TEXT,"
	" tokens INTEGER NOT NULL DEFAULT 0, covers_seq INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX events_by_seq ON events (app, user, session, seq, timestamp_us, role);"
	"CREATE UNIQUE INDEX events_by_id ON events (id, app, user, session);"
	"CREATE INDEX events_summaries ON events (app, user, session, seq)"
	" WHERE role = 'summary';";

static void raw_exec(sqlite3 *db, const char *sql)
{
	char *msg = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		die(sql, msg ? msg : "failed");
}

static int raw_step(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : rc;
}

static int raw_one(bench_case *c, int thread, uint64_t i)
{
	raw_ctx *x = c->ctx;
	char id[ID_LEN];

	snprintf(id, sizeof(id), "t%d-e%llu", thread, (unsigned long long)i);
	if (raw_step(x->begin) != 0)
		die("raw BEGIN", sqlite3_errmsg(x->db));
	sqlite3_bind_text(x->insert, 1, id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(x->insert, 2, (sqlite3_int64)i + 1);
	if (raw_step(x->insert) != 0 || raw_step(x->commit) != 0)
		die("raw INSERT", sqlite3_errmsg(x->db));
	return 0;
}

static int batch_one(bench_case *c, int thread, uint64_t i)
{
	raw_ctx *x = c->ctx;
	char id[ID_LEN], sid[ID_LEN];

	(void)thread;
	if (raw_step(x->begin) != 0)
		die("batch BEGIN", sqlite3_errmsg(x->db));
	for (int k = 0; k < x->batch; k++) {
		/* Time-ordered ids, like the UUIDv7 ids the host makes. */
		snprintf(id, sizeof(id), "%016llx-%04d", (unsigned long long)i, k);
		snprintf(sid, sizeof(sid), "s%d", k);
		sqlite3_bind_text(x->insert, 1, sid, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(x->insert, 2, ++x->seq[k]);
		sqlite3_bind_text(x->insert, 3, id, -1, SQLITE_TRANSIENT);
		if (raw_step(x->insert) != 0)
			die("batch INSERT", sqlite3_errmsg(x->db));
	}
	if (raw_step(x->commit) != 0)
		die("batch COMMIT", sqlite3_errmsg(x->db));
	return 0;
}

/* raw (batch 0): one plain INSERT per transaction; batch n: n rows per
 * transaction into the store's events shape. */
static void raw_open(bench_case *c, int batch)
{
	char path[PATH_MAX + 16];
	raw_ctx *x = calloc(1, sizeof(*x));
	const char *insert =
		batch ? "INSERT INTO events (app, user, session, seq, id, author, role, content,"
			" timestamp_us, text, tokens) VALUES ('bench', 'u', ?1, ?2, ?3, 'bench',"
			" 'user', '" EVENT_CONTENT "', ?2, '" EVENT_TEXT "', 5)"
		      : "INSERT INTO events (id, seq, role, content, text)"
			" VALUES (?1, ?2, 'user', '" EVENT_CONTENT "', '" EVENT_TEXT "')";

	if (!x)
		die("bench", "out of memory");
	snprintf(path, sizeof(path), "%s/%s.db", work_dir, batch ? "batch" : "raw");
	if (sqlite3_open(path, &x->db) != SQLITE_OK)
		die("open the raw database", sqlite3_errmsg(x->db));
	sqlite3_busy_timeout(x->db, BUSY_TIMEOUT_MS);
	raw_exec(x->db, "PRAGMA journal_mode = WAL");
	raw_exec(x->db, "PRAGMA synchronous = FULL");
	raw_exec(x->db, batch ? SQL_EVENTS_LIKE
			      : "CREATE TABLE events (position INTEGER PRIMARY KEY, id TEXT NOT NULL,"
				" seq INTEGER NOT NULL, role TEXT NOT NULL, content TEXT, text TEXT)");
	if (sqlite3_prepare_v2(x->db, "BEGIN IMMEDIATE", -1, &x->begin, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(x->db, insert, -1, &x->insert, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(x->db, "COMMIT", -1, &x->commit, NULL) != SQLITE_OK)
		die("prepare", sqlite3_errmsg(x->db));
	x->batch = batch;
	if (batch)
		snprintf(c->what, sizeof(c->what), "batch: raw sqlite3, %d event rows per transaction",
			 batch);
	else
		snprintf(c->what, sizeof(c->what), "raw sqlite3, 1 INSERT per transaction, 1 thread");
	c->threads = 1;
	c->per_call = batch ? batch : 1;
	c->one = batch ? batch_one : raw_one;
	c->ctx = x;
}

static void raw_close(bench_case *c)
{
	raw_ctx *x = c->ctx;

	sqlite3_finalize(x->begin);
	sqlite3_finalize(x->insert);
	sqlite3_finalize(x->commit);
	sqlite3_close(x->db);
	free(x);
}

/* ---- the plugin, called directly ------------------------------------- */

typedef struct plugin_ctx {
	char *search_buf;
	config_node *cfg;
	loader_plugin *p;
	loader_instance *inst;
	hostsvc *svc;
	const memd_store_ops *ops;
	void *h;
	char sids[MAX_THREADS][ID_LEN];
} plugin_ctx;

static int plugin_one(bench_case *c, int thread, uint64_t i)
{
	plugin_ctx *x = c->ctx;
	char id[ID_LEN];
	int64_t seq = 0;
	memd_event e = { .struct_size = sizeof(e), .id = id, .author = "bench", .role = "user",
			 .content_json = EVENT_CONTENT, .text = EVENT_TEXT, .tokens = 5 };
	const memd_event *one[1] = { &e };
	memd_scope sc = { .struct_size = sizeof(sc), .app = "bench", .user = "u",
			  .session = x->sids[thread] };
	memd_append a = { .struct_size = sizeof(a), .events = one, .n_events = 1 };
	memd_append_result res = { .struct_size = sizeof(res), .seqs = &seq };
	memd_error err = { 0 };

	snprintf(id, sizeof(id), "t%d-e%llu", thread, (unsigned long long)i);
	e.timestamp_us = (int64_t)i + 1;
	a.now_us = (int64_t)i + 1;
	if (x->ops->append(x->h, NULL, &sc, &a, &res, &err) < 0)
		die("plugin append", err.msg);
	if (!one_session && seq != (int64_t)i + 1)
		die("plugin append", "seqs are not gapless");
	return 0;
}

static int32_t ignore_session(void *userdata, const memd_session *s)
{
	(void)userdata;
	(void)s;
	return 0;
}

static void plugin_open(bench_case *c, int threads, const char *name)
{
	const char *env = getenv("MEMD_PLUGIN_PATH");
	const char *dirs[MAX_SEARCH_DIRS + 1];
	char yaml[PATH_MAX + LOG_LEN];
	memd_session_sink sink = { .struct_size = sizeof(sink), .session = ignore_session };
	memd_error err = { 0 };
	plugin_ctx *x = calloc(1, sizeof(*x));
	size_t n = 0;

	if (!x || !(x->search_buf = strdup(env ? env : "plugins")) ||
	    !(x->svc = hostsvc_new(keep_group_line, NULL, MEMD_LOG_INFO)))
		die("bench", "out of memory");
	for (char *save = NULL, *d = strtok_r(x->search_buf, ":", &save);
	     d && n < MAX_SEARCH_DIRS; d = strtok_r(NULL, ":", &save))
		dirs[n++] = d;
	dirs[n] = NULL;
	snprintf(yaml, sizeof(yaml), "plugin: sqlite\npath: \"%s/%s.db\"\nsynchronous: %s\n",
		 work_dir, name, plugin_sync);
	if (config_parse_string(yaml, strlen(yaml), "bench", &x->cfg, &err) < 0 ||
	    loader_open("sqlite", dirs, &x->p, &err) < 0 ||
	    loader_instance_create(x->p, "stores.bench", x->cfg, "plugin", x->svc, &x->inst,
				   &err) < 0)
		die("open the sqlite plugin", err.msg);
	x->ops = loader_store_ops(x->p);
	x->h = loader_instance_handle(x->inst);
	for (int t = 0; t < threads; t++) {
		memd_session s = { .struct_size = sizeof(s), .app = "bench", .user = "u",
				   .id = x->sids[t], .created_us = 1, .updated_us = 1 };
		snprintf(x->sids[t], ID_LEN, "s%d", one_session ? 0 : t);
		if ((t == 0 || !one_session) &&
		    x->ops->session_create(x->h, NULL, &s, NULL, &sink, &err) < 0)
			die("session_create", err.msg);
	}
	snprintf(c->what, sizeof(c->what), "sqlite plugin append, %d thread%s", threads,
		 threads > 1 ? "s" : "");
	c->threads = threads;
	c->per_call = 1;
	c->one = plugin_one;
	c->ctx = x;
}

static void plugin_close(bench_case *c)
{
	plugin_ctx *x = c->ctx;

	group_log[0] = '\0';
	loader_instance_destroy(x->inst); /* logs the group-commit counters */
	snprintf(c->stats, sizeof(c->stats), "%s", group_log);
	loader_close(x->p);
	config_free(x->cfg);
	hostsvc_free(x->svc);
	free(x->search_buf);
	free(x);
}

/* ---- the facade -------------------------------------------------------- */

typedef struct facade_ctx {
	memd *m;
	char sids[MAX_THREADS][ID_LEN];
} facade_ctx;

static int facade_one(bench_case *c, int thread, uint64_t i)
{
	static const char body[] = "{\"events\":[{\"role\":\"user\",\"content\":\"" EVENT_TEXT
				   "\"}]}";
	facade_ctx *x = c->ctx;
	memd_error err = { 0 };
	char *out = NULL;

	(void)i;
	if (memd_events_append(x->m, "bench", "u", x->sids[thread], body, &out, &err) < 0)
		die("memd_events_append", err.msg);
	memd_free(out);
	return 0;
}

static void facade_open(bench_case *c, int threads)
{
	char cfg_path[PATH_MAX + 16];
	facade_ctx *x = calloc(1, sizeof(*x));
	memd_options o = { .struct_size = sizeof(o), .config_path = cfg_path,
			   .log = keep_group_line, .log_level = MEMD_LOG_INFO };
	memd_error err = { 0 };
	FILE *f;

	if (!x)
		die("bench", "out of memory");
	snprintf(cfg_path, sizeof(cfg_path), "%s/memd.yaml", work_dir);
	f = fopen(cfg_path, "w");
	if (!f)
		die(cfg_path, strerror(errno));
	fprintf(f,
		"stores:\n  main: {plugin: sqlite, path: \"%s/facade.db\", synchronous: %s}\n"
		"apps:\n  '*': {working_memory: {strategy: buffer_window, max_messages: 20}}\n",
		work_dir, plugin_sync);
	fclose(f);
	if (memd_open(&o, &x->m, &err) < 0)
		die("memd_open", err.msg);
	for (int t = 0; t < threads; t++) {
		char body[BODY_LEN], *out = NULL;
		snprintf(x->sids[t], ID_LEN, "s%d", one_session ? 0 : t);
		snprintf(body, sizeof(body), "{\"id\":\"%s\"}", x->sids[t]);
		if ((t == 0 || !one_session) &&
		    memd_session_create(x->m, "bench", "u", body, &out, &err) < 0)
			die("memd_session_create", err.msg);
		memd_free(out);
	}
	snprintf(c->what, sizeof(c->what), "facade memd_events_append, %d threads", threads);
	c->threads = threads;
	c->per_call = 1;
	c->one = facade_one;
	c->ctx = x;
}

static void facade_close(bench_case *c)
{
	facade_ctx *x = c->ctx;

	group_log[0] = '\0';
	memd_close(x->m);
	snprintf(c->stats, sizeof(c->stats), "%s", group_log);
	free(x);
}

/* ---- main -------------------------------------------------------------- */

#define CASE_RAW 0
#define CASE_BATCH 1
#define CASE_PLUGIN_1 2
#define CASE_PLUGIN_N 3
#define CASE_FACADE_N 4
#define N_CASES 5

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void report(const bench_case *c, const bench_case *raw, int rounds)
{
	double rate = (double)c->total / c->seconds;
	double raw_rate = (double)raw->total / raw->seconds;
	double lo = 0, hi = 0;

	for (int r = 0; r < rounds; r++) {
		double ratio = c->rate[r] / raw->rate[r];
		lo = r == 0 || ratio < lo ? ratio : lo;
		hi = r == 0 || ratio > hi ? ratio : hi;
	}
	printf("%-48s %9.0f appends/s %6.2fx raw (rounds %.2f..%.2fx), %5.1f us CPU each\n",
	       c->what, rate, rate / raw_rate, lo, hi,
	       c->total ? c->cpu / (double)c->total * US_PER_SEC : 0.0);
	if (c->stats[0])
		printf("    %s\n", c->stats);
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	const char *dir = NULL;
	int threads = DEFAULT_THREADS, rounds = DEFAULT_ROUNDS, opt;
	double seconds = DEFAULT_SECONDS;
	static bench_case cases[N_CASES];

	while ((opt = getopt(argc, argv, "t:s:r:d:y:o")) != -1) {
		if (opt == 't')
			threads = atoi(optarg);
		else if (opt == 's')
			seconds = atof(optarg);
		else if (opt == 'r')
			rounds = atoi(optarg);
		else if (opt == 'd')
			dir = optarg;
		else if (opt == 'y')
			plugin_sync = optarg;
		else if (opt == 'o')
			one_session = 1;
		else
			die("usage", "sqlite_append_bench [-t threads] [-s seconds] [-r rounds] "
				     "[-d dir] [-y full|normal] [-o]");
	}
	if (threads < 1 || threads > MAX_THREADS || seconds <= 0 || rounds < 1 ||
	    rounds > MAX_ROUNDS)
		die("usage", "threads must be 1..256, rounds 1..100 and seconds > 0");
	snprintf(work_dir, sizeof(work_dir), "%s/memd-append-bench-XXXXXX",
		 dir ? dir : tmp && tmp[0] ? tmp : "/tmp");
	if (!mkdtemp(work_dir))
		die("mkdtemp", strerror(errno));
	printf("sqlite_append_bench: WAL, synchronous=FULL (plugin and facade: %s), %d rounds of "
	       "%.2f s per case, %s, SQLite %s, in %s\n",
	       plugin_sync, rounds, seconds / rounds,
	       one_session ? "one shared session" : "a session per thread", sqlite3_libversion(),
	       work_dir);

	raw_open(&cases[CASE_RAW], 0);
	raw_open(&cases[CASE_BATCH], threads);
	plugin_open(&cases[CASE_PLUGIN_1], 1, "plugin1");
	plugin_open(&cases[CASE_PLUGIN_N], threads, "pluginN");
	facade_open(&cases[CASE_FACADE_N], threads);
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < N_CASES; k++)
			take_turn(&cases[k], seconds / rounds, r);
	raw_close(&cases[CASE_RAW]);
	raw_close(&cases[CASE_BATCH]);
	plugin_close(&cases[CASE_PLUGIN_1]);
	plugin_close(&cases[CASE_PLUGIN_N]);
	facade_close(&cases[CASE_FACADE_N]);

	for (int k = 0; k < N_CASES; k++)
		report(&cases[k], &cases[CASE_RAW], rounds);
	nftw(work_dir, rm_one, FTW_FDS, FTW_DEPTH | FTW_PHYS);
	return 0;
}
