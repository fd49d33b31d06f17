/* SPDX-License-Identifier: MIT */
/*
 * sqlite_append_bench: durable single-event appends per second on the
 * SQLite store, against the naive limit of one transaction per append.
 *
 * Every run uses WAL and synchronous=FULL (an acknowledged append survives
 * power loss) on a fresh database in a temp directory, for the same time:
 *  1. raw sqlite3, one INSERT per transaction, one thread: the
 *     one-transaction-per-append limit of this disk;
 *  2. the sqlite plugin directly (loaded as the host loads it), 1 thread
 *     and N threads, each appending one event at a time to its own session;
 *  3. the libmemd facade (memd_open with a sqlite store,
 *     memd_events_append), N threads likewise.
 * It prints appends/s, the ratio to (1) and the plugin's group-commit
 * counters (from its log). Not a pass/fail test: meson builds it, nobody
 * times it in CI. Run it from a build dir:
 *   MEMD_PLUGIN_PATH=plugins tests/bench/sqlite_append_bench [-t threads]
 *       [-s seconds] [-d dir] [-y full|normal]
 */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <memd/memd.h>
#include <memd/plugin.h>

#include "config.h"
#include "hostsvc.h"
#include "loader.h"

#define DEFAULT_THREADS 16
#define DEFAULT_SECONDS 3.0
#define MAX_THREADS 256
#define MAX_SEARCH_DIRS 16
#define ID_LEN 64
#define BODY_LEN 256
#define YAML_LEN (PATH_MAX + 256)
#define LOG_LEN 512
#define BUSY_TIMEOUT_MS 5000
#define FTW_FDS 16
#define NS_PER_SEC 1e9
#define EVENT_TEXT "hello from the append bench"
#define EVENT_CONTENT "{\"parts\":[{\"type\":\"text\",\"text\":\"" EVENT_TEXT "\"}]}"

static double bench_seconds = DEFAULT_SECONDS;
/* The plugin's synchronous setting for runs 2 and 3: "full" unless -y says
 * otherwise ("normal" shows what the CPU alone allows). */
static const char *plugin_sync = "full";
static char work_dir[PATH_MAX];
static char group_log[LOG_LEN]; /* the plugin's last "group commit:" line */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / NS_PER_SEC;
}

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "sqlite_append_bench: %s: %s\n", what, msg);
	exit(1);
}

static void keep_group_line(void *userdata, int32_t level, const char *component,
			    const char *line)
{
	(void)userdata;
	(void)level;
	(void)component;
	if (!strstr(line, "group commit:"))
		return;
	pthread_mutex_lock(&log_lock);
	snprintf(group_log, sizeof(group_log), "%s", line);
	pthread_mutex_unlock(&log_lock);
}

/* ---- the workers: run `one` until the time is up ---------------------- */

typedef struct run {
	int threads;
	int (*one)(struct run *r, int thread, uint64_t i); /* 0 = appended */
	void *ctx;
	atomic_int stop;
	atomic_int ready;
	atomic_int go;
	uint64_t done[MAX_THREADS];
	double elapsed;
} run;

typedef struct worker_arg {
	run *r;
	int thread;
} worker_arg;

static void *worker(void *p)
{
	worker_arg *w = p;
	run *r = w->r;
	uint64_t n = 0;

	atomic_fetch_add(&r->ready, 1);
	while (!atomic_load(&r->go))
		sched_yield();
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		if (r->one(r, w->thread, n) != 0)
			break;
		n++;
	}
	r->done[w->thread] = n;
	return NULL;
}

/* Appends per second of r->one over r->threads threads. */
static double run_for(run *r)
{
	pthread_t tid[MAX_THREADS];
	worker_arg args[MAX_THREADS];
	uint64_t total = 0;
	double t0;

	atomic_store(&r->stop, 0);
	atomic_store(&r->ready, 0);
	atomic_store(&r->go, 0);
	for (int i = 0; i < r->threads; i++) {
		args[i] = (worker_arg){ r, i };
		if (pthread_create(&tid[i], NULL, worker, &args[i]) != 0)
			die("pthread_create", strerror(errno));
	}
	while (atomic_load(&r->ready) < r->threads)
		sched_yield();
	t0 = now_s();
	atomic_store(&r->go, 1);
	usleep((useconds_t)(bench_seconds * 1e6));
	atomic_store(&r->stop, 1);
	for (int i = 0; i < r->threads; i++)
		pthread_join(tid[i], NULL);
	r->elapsed = now_s() - t0;
	for (int i = 0; i < r->threads; i++)
		total += r->done[i];
	return (double)total / r->elapsed;
}

/* ---- 1. raw sqlite3, one transaction per insert ------------------------ */

typedef struct raw_ctx {
	sqlite3 *db;
	sqlite3_stmt *begin, *insert, *commit;
} raw_ctx;

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

static int raw_one(run *r, int thread, uint64_t i)
{
	raw_ctx *x = r->ctx;
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

static double bench_raw(void)
{
	char path[PATH_MAX + 16];
	raw_ctx x = { 0 };
	run r = { .threads = 1, .one = raw_one, .ctx = &x };
	double rate;

	snprintf(path, sizeof(path), "%s/raw.db", work_dir);
	if (sqlite3_open(path, &x.db) != SQLITE_OK)
		die("open raw.db", sqlite3_errmsg(x.db));
	sqlite3_busy_timeout(x.db, BUSY_TIMEOUT_MS);
	raw_exec(x.db, "PRAGMA journal_mode = WAL");
	raw_exec(x.db, "PRAGMA synchronous = FULL");
	raw_exec(x.db, "CREATE TABLE events (position INTEGER PRIMARY KEY, id TEXT NOT NULL,"
		       " seq INTEGER NOT NULL, role TEXT NOT NULL, content TEXT, text TEXT)");
	if (sqlite3_prepare_v2(x.db, "BEGIN IMMEDIATE", -1, &x.begin, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(x.db,
			       "INSERT INTO events (id, seq, role, content, text)"
			       " VALUES (?1, ?2, 'user', '" EVENT_CONTENT "', '" EVENT_TEXT "')",
			       -1, &x.insert, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(x.db, "COMMIT", -1, &x.commit, NULL) != SQLITE_OK)
		die("prepare", sqlite3_errmsg(x.db));
	rate = run_for(&r);
	sqlite3_finalize(x.begin);
	sqlite3_finalize(x.insert);
	sqlite3_finalize(x.commit);
	sqlite3_close(x.db);
	return rate;
}

/* ---- 2. the plugin directly ------------------------------------------- */

typedef struct plugin_ctx {
	const memd_store_ops *ops;
	void *h;
	char sids[MAX_THREADS][ID_LEN];
} plugin_ctx;

static int plugin_one(run *r, int thread, uint64_t i)
{
	plugin_ctx *x = r->ctx;
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

	snprintf(id, sizeof(id), "e%llu", (unsigned long long)i);
	e.timestamp_us = (int64_t)i + 1;
	a.now_us = (int64_t)i + 1;
	if (x->ops->append(x->h, NULL, &sc, &a, &res, &err) < 0)
		die("plugin append", err.msg);
	if (seq != (int64_t)i + 1)
		die("plugin append", "seqs are not gapless");
	return 0;
}

static int32_t ignore_session(void *userdata, const memd_session *s)
{
	(void)userdata;
	(void)s;
	return 0;
}

/* MEMD_PLUGIN_PATH split on ':' (NULL-terminated). */
static void search_path(char *buf, const char **dirs)
{
	size_t n = 0;
	char *save = NULL;

	for (char *d = strtok_r(buf, ":", &save); d && n < MAX_SEARCH_DIRS;
	     d = strtok_r(NULL, ":", &save))
		dirs[n++] = d;
	dirs[n] = NULL;
}

static double bench_plugin(int threads, const char *name)
{
	const char *env = getenv("MEMD_PLUGIN_PATH");
	char *buf = strdup(env ? env : "plugins");
	const char *dirs[MAX_SEARCH_DIRS + 1];
	char yaml[YAML_LEN];
	memd_session_sink sink = { .struct_size = sizeof(sink), .session = ignore_session };
	memd_error err = { 0 };
	plugin_ctx *x = calloc(1, sizeof(*x));
	run r = { .threads = threads, .one = plugin_one };
	config_node *cfg = NULL;
	loader_plugin *p = NULL;
	loader_instance *inst = NULL;
	hostsvc *svc = hostsvc_new(keep_group_line, NULL, MEMD_LOG_INFO);
	double rate;

	if (!buf || !x || !svc)
		die("bench", "out of memory");
	r.ctx = x;
	search_path(buf, dirs);
	snprintf(yaml, sizeof(yaml), "plugin: sqlite\npath: \"%s/%s.db\"\nsynchronous: %s\n",
		 work_dir, name, plugin_sync);
	if (config_parse_string(yaml, strlen(yaml), "bench", &cfg, &err) < 0 ||
	    loader_open("sqlite", dirs, &p, &err) < 0 ||
	    loader_instance_create(p, "stores.bench", cfg, "plugin", svc, &inst, &err) < 0)
		die("open the sqlite plugin", err.msg);
	x->ops = loader_store_ops(p);
	x->h = loader_instance_handle(inst);
	for (int t = 0; t < threads; t++) {
		memd_session s = { .struct_size = sizeof(s), .app = "bench", .user = "u",
				   .id = x->sids[t], .created_us = 1, .updated_us = 1 };
		snprintf(x->sids[t], ID_LEN, "s%d", t);
		if (x->ops->session_create(x->h, NULL, &s, NULL, &sink, &err) < 0)
			die("session_create", err.msg);
	}
	rate = run_for(&r);
	loader_instance_destroy(inst); /* logs the group-commit counters */
	loader_close(p);
	config_free(cfg);
	hostsvc_free(svc);
	free(x);
	free(buf);
	return rate;
}

/* ---- 3. the facade ----------------------------------------------------- */

typedef struct facade_ctx {
	memd *m;
	char sids[MAX_THREADS][ID_LEN];
} facade_ctx;

static int facade_one(run *r, int thread, uint64_t i)
{
	facade_ctx *x = r->ctx;
	memd_error err = { 0 };
	char *out = NULL;
	static const char body[] = "{\"events\":[{\"role\":\"user\",\"content\":\"" EVENT_TEXT
				   "\"}]}";

	(void)i;
	if (memd_events_append(x->m, "bench", "u", x->sids[thread], body, &out, &err) < 0)
		die("memd_events_append", err.msg);
	memd_free(out);
	return 0;
}

static double bench_facade(int threads)
{
	char cfg_path[PATH_MAX + 16];
	facade_ctx *x = calloc(1, sizeof(*x));
	run r = { .threads = threads, .one = facade_one };
	memd_options o = { .struct_size = sizeof(o), .config_path = cfg_path,
			   .log = keep_group_line, .log_level = MEMD_LOG_INFO };
	memd_error err = { 0 };
	FILE *f;
	double rate;

	if (!x)
		die("bench", "out of memory");
	r.ctx = x;
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
		snprintf(x->sids[t], ID_LEN, "s%d", t);
		snprintf(body, sizeof(body), "{\"id\":\"%s\"}", x->sids[t]);
		if (memd_session_create(x->m, "bench", "u", body, &out, &err) < 0)
			die("memd_session_create", err.msg);
		memd_free(out);
	}
	rate = run_for(&r);
	memd_close(x->m);
	free(x);
	return rate;
}

/* ---- main -------------------------------------------------------------- */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void report(const char *what, double rate, double raw)
{
	printf("%-52s %10.0f appends/s  %6.2fx raw\n", what, rate, rate / raw);
	if (group_log[0])
		printf("    %s\n", group_log);
	group_log[0] = '\0';
	fflush(stdout);
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	const char *dir = NULL;
	int threads = DEFAULT_THREADS, opt;
	char what[128];
	double raw;

	while ((opt = getopt(argc, argv, "t:s:d:y:")) != -1) {
		if (opt == 't')
			threads = atoi(optarg);
		else if (opt == 's')
			bench_seconds = atof(optarg);
		else if (opt == 'd')
			dir = optarg;
		else if (opt == 'y')
			plugin_sync = optarg;
		else
			die("usage", "sqlite_append_bench [-t threads] [-s seconds] [-d dir] "
				    "[-y full|normal]");
	}
	if (threads < 1 || threads > MAX_THREADS || bench_seconds <= 0)
		die("usage", "threads must be 1..256 and seconds > 0");
	snprintf(work_dir, sizeof(work_dir), "%s/memd-append-bench-XXXXXX",
		 dir ? dir : tmp && tmp[0] ? tmp : "/tmp");
	if (!mkdtemp(work_dir))
		die("mkdtemp", strerror(errno));

	printf("sqlite_append_bench: WAL, synchronous=FULL (plugin and facade: %s), %.1f s per "
	       "run, SQLite %s, in %s\n",
	       plugin_sync, bench_seconds, sqlite3_libversion(), work_dir);
	raw = bench_raw();
	report("raw sqlite3, 1 INSERT per transaction, 1 thread", raw, raw);
	report("sqlite plugin append, 1 thread", bench_plugin(1, "plugin1"), raw);
	snprintf(what, sizeof(what), "sqlite plugin append, %d threads", threads);
	report(what, bench_plugin(threads, "pluginN"), raw);
	snprintf(what, sizeof(what), "facade memd_events_append, %d threads", threads);
	report(what, bench_facade(threads), raw);

	nftw(work_dir, rm_one, FTW_FDS, FTW_DEPTH | FTW_PHYS);
	return 0;
}
