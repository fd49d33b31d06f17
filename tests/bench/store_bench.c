/* SPDX-License-Identifier: MIT */
/*
 * store_bench: a server-backed store plugin's append throughput and
 * context latency, each beside the raw client library running the same
 * statements in the same run (the store's part, store_bench.h), so the
 * plugin's overhead reads as a ratio.
 *
 * Runs (on a fresh schema or database of the test server):
 *  1. append, batch 1 and batch 32, one thread;
 *  2. concurrent single-event appends, N threads on their own sessions
 *     (raw: one connection per thread; plugin: pool N, or -p P; with
 *     P < N appends queue for a connection and share transactions by
 *     group commit), and the plugin once more with group commit off;
 *  3. context: the newest 20 events of a 1,024-event session (the
 *     plugin's events_load against the same SELECT over the raw client),
 *     latency per call.
 * Each figure is the median of -r rounds (default 5) of -s seconds, raw
 * and plugin alternating, so a machine whose load changes during the run
 * skews both sides alike. Not a pass/fail test.
 */
#include "store_bench.h"

#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <memd/plugin.h>

#include "config/config.h"
#include "plugins/loader.h"

#define DEFAULT_THREADS 8
#define DEFAULT_SECONDS 2.0
#define DEFAULT_ROUNDS 5
#define MAX_THREADS 64
#define MAX_ROUNDS 15
#define MAX_SEARCH_DIRS 16
#define YAML_LEN 1024
#define OPTION_LEN 48         /* ", group_commit: N" */
#define CONTEXT_BATCHES 32
#define GROUP_COMMIT_OFF 1
#define NS_PER_SEC 1e9
#define US_PER_SEC 1e6

/* What the runs share (set once by bench_main, before any thread). */
typedef struct bench {
	const bench_store *store;
	char ns[BENCH_ID_LEN];
	double seconds;          /* per round */
	int rounds;
} bench;

static const char *die_prog = "store_bench";

void bench_die(const char *what, const char *msg)
{
	fprintf(stderr, "%s: %s: %s\n", die_prog, what, msg);
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / NS_PER_SEC;
}

/* ---- the plugin ----------------------------------------------------- */

typedef struct plugin_store {
	loader_plugin *plugin;
	loader_instance *inst;
	config_node *cfg;
	const memd_store_ops *ops;
	void *h;
} plugin_store;

static void plugin_open(const bench *b, plugin_store *ps, int pool, int group_commit)
{
	char yaml[YAML_LEN], gc[OPTION_LEN] = "";
	const char *search[MAX_SEARCH_DIRS + 1];
	char *paths = strdup(getenv("MEMD_PLUGIN_PATH") ? getenv("MEMD_PLUGIN_PATH") : "plugins");
	char *save = NULL;
	size_t n = 0;
	memd_error err = { .struct_size = sizeof(err) };

	if (!paths)
		bench_die("plugin", "out of memory");
	for (char *t = strtok_r(paths, ":", &save); t && n < MAX_SEARCH_DIRS;
	     t = strtok_r(NULL, ":", &save))
		search[n++] = t;
	search[n] = NULL;
	if (group_commit > 0)
		snprintf(gc, sizeof(gc), ", group_commit: %d", group_commit);
	snprintf(yaml, sizeof(yaml), "%s, %s: %s, pool: %d%s}", b->store->yaml_head,
		 b->store->ns_key, b->ns, pool, gc);
	if (config_parse_string(yaml, strlen(yaml), "bench", &ps->cfg, &err) < 0 ||
	    loader_open(b->store->plugin, search, &ps->plugin, &err) < 0 ||
	    loader_instance_create(ps->plugin, "stores.bench", ps->cfg, "plugin", NULL, &ps->inst,
				   &err) < 0)
		bench_die("plugin", err.msg);
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
	memd_session s = { .struct_size = sizeof(s), .app = BENCH_APP, .user = BENCH_USER,
			   .id = id, .metadata_json = "{}", .created_us = BENCH_T0 };
	memd_session_sink sink = { .struct_size = sizeof(sink), .session = ignore_session };
	memd_error err = { .struct_size = sizeof(err) };

	if (ps->ops->session_create(ps->h, &call, &s, NULL, &sink, &err) < 0)
		bench_die("session_create", err.msg);
}

static void plugin_append(plugin_store *ps, const char *session, const char *prefix, long k,
			  int batch)
{
	char ids[BENCH_MAX_BATCH][BENCH_ID_LEN];
	memd_event evs[BENCH_MAX_BATCH];
	const memd_event *ptrs[BENCH_MAX_BATCH];
	int64_t seqs[BENCH_MAX_BATCH];
	memd_scope sc = { .struct_size = sizeof(sc), .app = BENCH_APP, .user = BENCH_USER,
			  .session = session };
	memd_append a = { .struct_size = sizeof(a), .events = ptrs, .n_events = (uint32_t)batch,
			  .now_us = BENCH_T0 + k };
	memd_append_result res = { .struct_size = sizeof(res), .seqs = seqs };
	memd_call call = { .struct_size = sizeof(call) };
	memd_error err = { .struct_size = sizeof(err) };

	for (int j = 0; j < batch; j++) {
		snprintf(ids[j], BENCH_ID_LEN, "%s-%ld-%d", prefix, k, j);
		evs[j] = (memd_event){ .struct_size = sizeof(memd_event), .id = ids[j],
				       .author = "bench", .role = "user",
				       .content_json = BENCH_EVENT_CONTENT, .text = BENCH_EVENT_TEXT,
				       .tokens = BENCH_EVENT_TOKENS, .timestamp_us = BENCH_T0 + k };
		ptrs[j] = &evs[j];
	}
	if (ps->ops->append(ps->h, &call, &sc, &a, &res, &err) < 0)
		bench_die("append", err.msg);
}

/* ---- runs ----------------------------------------------------------- */

typedef struct run_arg {
	const bench *b;
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
	const bench_store *st = a->b->store;
	raw_conn *c = NULL;
	char session[BENCH_ID_LEN];
	double end;

	snprintf(session, sizeof(session), "%s-%d", a->tag, a->thread);
	if (a->raw)
		c = st->raw_open(a->b->ns);
	end = now_s() + a->b->seconds;
	while (now_s() < end) {
		if (a->raw)
			st->raw_append(c, session, session, a->count, a->batch);
		else
			plugin_append(a->ps, session, session, a->count, a->batch);
		a->count++;
	}
	if (a->raw)
		st->raw_close(c);
	return NULL;
}

/* events/s of `threads` threads appending batches to their own sessions. */
static double run(const bench *b, plugin_store *ps, int raw, int batch, int threads,
		  const char *tag)
{
	pthread_t th[MAX_THREADS];
	run_arg args[MAX_THREADS];
	long total = 0;
	double t0, t1;

	for (int t = 0; t < threads; t++) {
		char session[BENCH_ID_LEN];
		snprintf(session, sizeof(session), "%s-%d", tag, t);
		plugin_session(ps, session);
		args[t] = (run_arg){ .b = b, .raw = raw, .batch = batch, .thread = t, .ps = ps,
				     .tag = tag };
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
static double context_latency(const bench *b, plugin_store *ps, int raw, const char *session)
{
	raw_conn *c = NULL;
	memd_scope sc = { .struct_size = sizeof(sc), .app = BENCH_APP, .user = BENCH_USER,
			  .session = session };
	memd_event_query q = { .struct_size = sizeof(q), .flags = MEMD_EVQ_NEWEST,
			       .limit = BENCH_CONTEXT_LIMIT };
	memd_event_sink sink = { .struct_size = sizeof(sink), .event = ignore_event };
	long n = 0;
	double t0, end;

	if (raw)
		c = b->store->raw_open(b->ns);
	t0 = now_s();
	end = t0 + b->seconds;
	while (now_s() < end) {
		if (raw) {
			b->store->raw_context(c, session);
		} else {
			memd_call call = { .struct_size = sizeof(call) };
			memd_error err = { .struct_size = sizeof(err) };
			if (ps->ops->events_load(ps->h, &call, &sc, &q, &sink, &err) < 0)
				bench_die("events_load", err.msg);
		}
		n++;
	}
	if (raw)
		b->store->raw_close(c);
	return (now_s() - t0) * US_PER_SEC / (double)n;
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
static void compare_appends(const bench *b, plugin_store *ps, int batch, int threads,
			    const char *tag, double *ret_raw, double *ret_plugin)
{
	double raw[MAX_ROUNDS], plugin[MAX_ROUNDS];

	for (int i = 0; i < b->rounds; i++) {
		char rt[BENCH_ID_LEN], pt[BENCH_ID_LEN];
		snprintf(rt, sizeof(rt), "r%s-%d", tag, i);
		snprintf(pt, sizeof(pt), "p%s-%d", tag, i);
		if (i % 2) {
			plugin[i] = run(b, ps, 0, batch, threads, pt);
			raw[i] = run(b, ps, 1, batch, threads, rt);
		} else {
			raw[i] = run(b, ps, 1, batch, threads, rt);
			plugin[i] = run(b, ps, 0, batch, threads, pt);
		}
	}
	*ret_raw = median(raw, b->rounds);
	*ret_plugin = median(plugin, b->rounds);
}

/* Median events/s of the plugin alone over the rounds. */
static double plugin_appends(const bench *b, plugin_store *ps, int batch, int threads,
			     const char *tag)
{
	double v[MAX_ROUNDS];

	for (int i = 0; i < b->rounds; i++) {
		char pt[BENCH_ID_LEN];
		snprintf(pt, sizeof(pt), "p%s-%d", tag, i);
		v[i] = run(b, ps, 0, batch, threads, pt);
	}
	return median(v, b->rounds);
}

int main(int argc, char **argv)
{
	const bench_store *store = &bench_the_store;
	bench b = { .store = store, .seconds = DEFAULT_SECONDS, .rounds = DEFAULT_ROUNDS };
	int threads = DEFAULT_THREADS, pool = 0, opt;
	plugin_store ps = { 0 }, ps_off = { 0 };
	double raw1, plug1, raw32, plug32, rawn, plugn, plugn_off, rawc, plugc;
	double rawcs[MAX_ROUNDS], plugcs[MAX_ROUNDS];
	char usage[BENCH_ID_LEN * 2];

	die_prog = store->prog;
	snprintf(usage, sizeof(usage), "%s [-t threads] [-p pool] [-s seconds] [-r rounds]",
		 store->prog);
	while ((opt = getopt(argc, argv, "t:p:s:r:")) != -1) {
		if (opt == 't')
			threads = atoi(optarg);
		else if (opt == 'p')
			pool = atoi(optarg);
		else if (opt == 's')
			b.seconds = atof(optarg);
		else if (opt == 'r')
			b.rounds = atoi(optarg);
		else
			bench_die("usage", usage);
	}
	if (threads < 1 || threads > MAX_THREADS || b.seconds <= 0 || b.rounds < 1 ||
	    b.rounds > MAX_ROUNDS || pool < 0 || pool > MAX_THREADS)
		bench_die("usage", "bad -t, -p, -s or -r");
	if (pool == 0)
		pool = threads;
	if (!getenv(store->env_var))
		bench_die("setup", "the test server's variables are not set (run under "
			  "tests/services/with-services.sh)");
	snprintf(b.ns, sizeof(b.ns), "%s%ld", store->ns_prefix, (long)getpid());
	plugin_open(&b, &ps, pool, 0);

	printf("%s (medians of %d rounds of %.1f s; plugin pool %d)\n", store->title, b.rounds,
	       b.seconds, pool);
	compare_appends(&b, &ps, 1, 1, "1", &raw1, &plug1);
	printf("append batch 1, 1 thread:   raw %9.0f ev/s   plugin %9.0f ev/s   ratio %.2f\n",
	       raw1, plug1, plug1 / raw1);
	compare_appends(&b, &ps, BENCH_MAX_BATCH, 1, "32", &raw32, &plug32);
	printf("append batch 32, 1 thread:  raw %9.0f ev/s   plugin %9.0f ev/s   ratio %.2f\n",
	       raw32, plug32, plug32 / raw32);
	compare_appends(&b, &ps, 1, threads, "n", &rawn, &plugn);
	plugin_open(&b, &ps_off, pool, GROUP_COMMIT_OFF);
	plugn_off = plugin_appends(&b, &ps_off, 1, threads, "n1");
	plugin_close(&ps_off);
	printf("append batch 1, %2d threads: raw %9.0f ev/s   plugin %9.0f ev/s   ratio %.2f"
	       "   (group commit off: %.0f ev/s, ratio %.2f)\n",
	       threads, rawn, plugn, plugn / rawn, plugn_off, plugn_off / rawn);

	plugin_session(&ps, "ctx");
	for (long k = 0; k < CONTEXT_BATCHES; k++)
		plugin_append(&ps, "ctx", "c", k, BENCH_MAX_BATCH);
	for (int i = 0; i < b.rounds; i++) {
		rawcs[i] = context_latency(&b, &ps, 1, "ctx");
		plugcs[i] = context_latency(&b, &ps, 0, "ctx");
	}
	rawc = median(rawcs, b.rounds);
	plugc = median(plugcs, b.rounds);
	printf("context (newest %d of %d):  raw %9.1f us      plugin %9.1f us      ratio %.2f "
	       "(throughput)\n", BENCH_CONTEXT_LIMIT, CONTEXT_BATCHES * BENCH_MAX_BATCH, rawc,
	       plugc, rawc / plugc);
	plugin_close(&ps);
	if (store->drop)
		store->drop(b.ns);
	return 0;
}
