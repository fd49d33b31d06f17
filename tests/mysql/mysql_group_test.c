/* SPDX-License-Identifier: MIT */
/*
 * Group commit of the MariaDB store: many threads append single events at
 * once, each to a session of its own, through a small pool, so appends
 * queue and are written several to a transaction. Some appends fail on
 * purpose - a wrong expected_version (refused before writing), an event
 * id stored already in a batch with a new one, content that is not UTF-8
 * (both refused by the server in the shared write, so the group is run
 * again one by one) - and some are retries of stored events (answered
 * REPLAYED with the stored seq). Every answer must be what a solo append
 * gives: the failures fail alone, the others get the next seq and
 * version, and afterwards each session holds exactly the events that
 * succeeded, with gapless seqs, and the feed positions of all events are
 * exactly 1..N. The plugin's close log ("group commit: A appends written
 * in T transactions") proves the batching (T < A); group_commit: 1 writes
 * every append alone (T == A).
 *
 * Needs the server of tests/services/mariadb.sh ($MEMD_MYSQL_*; run under
 * tests/services/with-services.sh). Every test works in a database of its
 * own (memd_g<pid>_<n>, created by the plugin, dropped at the end).
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <mysql.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <memd/plugin.h>

#include "config.h"
#include "hostsvc.h"
#include "loader.h"

#define LOG_MAX 64
#define LINE_MAX_LEN 512
#define TEXT_MAX 1024
#define MAX_SEARCH 16
#define ID_MAX 64
#define SESSION_MAX 16
#define T0 1700000000000000LL
#define THREADS 12
#define ROUNDS 36
#define POOL "pool: 2"
#define WRONG_VERSION_BY 100  /* how far off a wrong expected_version is */
#define KINDS 6               /* round i does kind i % KINDS */
#define KIND_WRONG_VERSION 1
#define KIND_REPLAY 3
#define KIND_PARTLY_STORED 4
#define KIND_BAD_UTF8 5
#define SOLO_THREADS 4
#define SOLO_ROUNDS 6

/* ---- a plugin instance with its log captured ---------------------------- */

typedef struct log_buf {
	pthread_mutex_t lock;
	char lines[LOG_MAX][LINE_MAX_LEN];
	int n;
} log_buf;

static void capture(void *ud, int32_t level, const char *component, const char *line)
{
	log_buf *b = ud;
	(void)level;
	pthread_mutex_lock(&b->lock);
	if (b->n < LOG_MAX)
		snprintf(b->lines[b->n++], LINE_MAX_LEN, "%s: %s", component, line);
	pthread_mutex_unlock(&b->lock);
}

typedef struct inst {
	loader_plugin *plugin;
	loader_instance *inst;
	config_node *cfg;
	hostsvc *svc;
	const memd_store_ops *ops;
	void *h;
	memd_error err;
} inst;

static log_buf logs = { .lock = PTHREAD_MUTEX_INITIALIZER };
static char dbname[64];
static int db_counter;

static void open_inst(inst *in, const char *extra)
{
	const char *search[MAX_SEARCH + 1];
	char *paths = strdup(getenv("MEMD_PLUGIN_PATH") ? getenv("MEMD_PLUGIN_PATH") : "");
	char yaml[TEXT_MAX];
	char *save = NULL;
	size_t n = 0;
	int32_t r;

	memset(in, 0, sizeof(*in));
	in->err.struct_size = sizeof(in->err);
	cr_assert_not_null(paths);
	for (char *t = strtok_r(paths, ":", &save); t && n < MAX_SEARCH; t = strtok_r(NULL, ":", &save))
		search[n++] = t;
	search[n] = NULL;
	snprintf(yaml, sizeof(yaml),
		 "{plugin: mysql, host: \"${MEMD_MYSQL_HOST}\", port: \"${MEMD_MYSQL_PORT}\","
		 " user: \"${MEMD_MYSQL_USER}\", password: \"${MEMD_MYSQL_PASSWORD}\","
		 " database: %s, create_database: true, %s}", dbname, extra);
	logs.n = 0;
	in->svc = hostsvc_new(capture, &logs, MEMD_LOG_DEBUG);
	cr_assert_not_null(in->svc);
	r = config_parse_string(yaml, strlen(yaml), "test", &in->cfg, &in->err);
	cr_assert_eq(r, 0, "config: %s", in->err.msg);
	r = loader_open("mysql", search, &in->plugin, &in->err);
	free(paths);
	cr_assert_eq(r, 0, "loader_open: %s", in->err.msg);
	r = loader_instance_create(in->plugin, "stores.test", in->cfg, "plugin", in->svc, &in->inst,
				   &in->err);
	cr_assert_eq(r, 0, "open: %s", in->err.msg);
	in->ops = loader_store_ops(in->plugin);
	in->h = loader_instance_handle(in->inst);
}

static void close_inst(inst *in)
{
	loader_instance_destroy(in->inst);
	loader_close(in->plugin);
	config_free(in->cfg);
	hostsvc_free(in->svc);
	memset(in, 0, sizeof(*in));
}

/* The plugin's statistics from its close log; fails if it logged none. */
static void group_stats(uint64_t *ret_appends, uint64_t *ret_txns, unsigned *ret_max)
{
	for (int i = 0; i < logs.n; i++) {
		const char *p = strstr(logs.lines[i], "group commit: ");
		unsigned long long a, t;
		unsigned m;
		if (p && sscanf(p, "group commit: %llu appends written in %llu transactions "
				"(at most %u in one)", &a, &t, &m) == 3) {
			*ret_appends = a;
			*ret_txns = t;
			*ret_max = m;
			return;
		}
	}
	cr_assert_fail("the plugin logged no group commit statistics (%d lines)", logs.n);
}

static void setup(void)
{
	cr_assert(getenv("MEMD_MYSQL_HOST"), "MEMD_MYSQL_HOST is not set: run under "
		  "tests/services/with-services.sh");
	snprintf(dbname, sizeof(dbname), "memd_g%ld_%d", (long)getpid(), db_counter++);
}

static void teardown(void)
{
	const char *port = getenv("MEMD_MYSQL_PORT");
	MYSQL *m = mysql_init(NULL);
	char sql[128];

	if (!m)
		return;
	if (mysql_real_connect(m, getenv("MEMD_MYSQL_HOST"), getenv("MEMD_MYSQL_USER"),
			       getenv("MEMD_MYSQL_PASSWORD"), NULL, port ? (unsigned)atoi(port) : 0,
			       NULL, 0)) {
		snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS `%s`", dbname);
		(void)mysql_real_query(m, sql, strlen(sql));
	}
	mysql_close(m);
}

TestSuite(mysql_group, .init = setup, .fini = teardown, .timeout = 60);

/* ---- the appending threads ------------------------------------------------ */

typedef struct worker {
	inst *in;
	pthread_barrier_t *start;
	int index;
	int rounds;
	char session[SESSION_MAX];
	/* what was stored, in seq order */
	char ids[ROUNDS][ID_MAX];
	int n_stored;
	int64_t version;
	int n_written;               /* appends that wrote */
	char failure[TEXT_MAX];      /* the first wrong answer; "" = none */
} worker;

static void event_init(memd_event *e, const char *id, const char *content)
{
	memset(e, 0, sizeof(*e));
	e->struct_size = sizeof(*e);
	e->id = id;
	e->author = "agent";
	e->role = "user";
	e->content_json = content;
	e->timestamp_us = T0;
	e->text = "hello";
	e->tokens = 1;
}

static int32_t append(worker *w, const memd_event *const *events, uint32_t n, uint32_t flags,
		      int64_t expected, int64_t *seqs, memd_append_result *res, memd_error *err)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u",
			  .session = w->session };
	memd_append a = { .struct_size = sizeof(a), .flags = flags, .expected_version = expected,
			  .events = events, .n_events = n, .now_us = T0 };

	memset(res, 0, sizeof(*res));
	res->struct_size = sizeof(*res);
	res->seqs = seqs;
	memset(err, 0, sizeof(*err));
	err->struct_size = sizeof(*err);
	return w->in->ops->append(w->in->h, &call, &sc, &a, res, err);
}

#define WRONG(...) \
	do { \
		if (!w->failure[0]) \
			snprintf(w->failure, sizeof(w->failure), __VA_ARGS__); \
	} while (0)

/* One round: kind i % KINDS (see the defines), or a plain append (with
 * the right expected_version on even rounds). */
static void one_round(worker *w, int i)
{
	char id[ID_MAX], id2[ID_MAX];
	memd_event e1, e2;
	const memd_event *evs[2] = { &e1, &e2 };
	int64_t seqs[2] = { 0, 0 };
	memd_append_result res;
	memd_error err;
	int kind = i % KINDS;
	int32_t r;

	snprintf(id, sizeof(id), "%s-e%d", w->session, i);
	snprintf(id2, sizeof(id2), "%s-f%d", w->session, i);
	if (kind == KIND_WRONG_VERSION) {
		event_init(&e1, id, "{\"n\":1}");
		r = append(w, evs, 1, MEMD_APPEND_EXPECT_VERSION, w->version + WRONG_VERSION_BY, seqs,
			   &res, &err);
		if (r != MEMD_ECONFLICT || !strstr(err.msg, "not the expected"))
			WRONG("round %d: a wrong expected_version gave %d (%s)", i, r, err.msg);
		return;
	}
	if (kind == KIND_REPLAY && w->n_stored > 0) {
		int k = w->n_stored / 2; /* an earlier event, resent alone */
		event_init(&e1, w->ids[k], "{\"n\":1}");
		r = append(w, evs, 1, 0, 0, seqs, &res, &err);
		if (r != 0 || !(res.flags & MEMD_APPEND_REPLAYED) || seqs[0] != k + 1 ||
		    res.version != w->version)
			WRONG("round %d: a retry of '%s' gave %d (%s) seq %" PRId64 " version %" PRId64
			      " flags %u, not seq %d version %" PRId64 " REPLAYED", i, w->ids[k], r,
			      err.msg, seqs[0], res.version, (unsigned)res.flags, k + 1, w->version);
		return;
	}
	if (kind == KIND_PARTLY_STORED && w->n_stored > 0) {
		event_init(&e1, id, "{\"n\":1}");
		event_init(&e2, w->ids[w->n_stored - 1], "{\"n\":2}");
		r = append(w, evs, 2, 0, 0, seqs, &res, &err);
		if (r != MEMD_ECONFLICT || !strstr(err.msg, "already exist"))
			WRONG("round %d: a batch with a stored id gave %d (%s)", i, r, err.msg);
		return;
	}
	if (kind == KIND_BAD_UTF8) {
		event_init(&e1, id, "{\"t\":\"\xff\xfe\"}");
		r = append(w, evs, 1, 0, 0, seqs, &res, &err);
		if (r >= 0)
			WRONG("round %d: content that is not UTF-8 was stored (seq %" PRId64 ")", i,
			      seqs[0]);
		return;
	}
	event_init(&e1, id, "{\"n\":1}");
	r = append(w, evs, 1, i % 2 == 0 ? MEMD_APPEND_EXPECT_VERSION : 0, w->version, seqs, &res,
		   &err);
	if (r != 0 || seqs[0] != w->n_stored + 1 || res.version != w->version + 1 || res.flags) {
		WRONG("round %d: append gave %d (%s) seq %" PRId64 " version %" PRId64
		      ", not seq %d version %" PRId64, i, r, err.msg, seqs[0], res.version,
		      w->n_stored + 1, w->version + 1);
		return;
	}
	snprintf(w->ids[w->n_stored++], ID_MAX, "%s", id);
	w->version++;
	w->n_written++;
}

static void *work(void *arg)
{
	worker *w = arg;

	pthread_barrier_wait(w->start);
	for (int i = 0; i < w->rounds && !w->failure[0]; i++)
		one_round(w, i);
	return NULL;
}

static int32_t noop_session(void *ud, const memd_session *s)
{
	(void)ud;
	(void)s;
	return 0;
}

/* What a session holds, checked against its worker. */
typedef struct loaded {
	const worker *w;
	int n;
	int64_t *positions;       /* of every session, appended here */
	int *n_positions;
	char failure[TEXT_MAX];
} loaded;

static int32_t check_event(void *ud, const memd_event *e)
{
	loaded *l = ud;

	if (!l->failure[0] && (l->n >= l->w->n_stored || e->seq != l->n + 1 ||
			       strcmp(e->id, l->w->ids[l->n]) != 0))
		snprintf(l->failure, sizeof(l->failure),
			 "%s: event %d is seq %" PRId64 " id '%s', expected seq %d id '%s'",
			 l->w->session, l->n, e->seq, e->id, l->n + 1,
			 l->n < l->w->n_stored ? l->w->ids[l->n] : "(none)");
	l->positions[(*l->n_positions)++] = e->position;
	l->n++;
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* Run n threads of rounds each on in; returns the appends that wrote. */
static uint64_t run_workers(inst *in, worker *ws, int n, int rounds)
{
	pthread_t th[THREADS];
	pthread_barrier_t start;
	int64_t *positions = calloc((size_t)n * rounds, sizeof(*positions));
	int n_positions = 0;
	uint64_t written = 0;

	cr_assert_not_null(positions);
	cr_assert_leq(n, THREADS);
	pthread_barrier_init(&start, NULL, (unsigned)n);
	for (int t = 0; t < n; t++) {
		memd_call call = { .struct_size = sizeof(call) };
		memd_session s = { .struct_size = sizeof(s), .app = "a", .user = "u",
				   .created_us = T0 };
		memd_session_sink sink = { .struct_size = sizeof(sink), .session = noop_session };
		ws[t] = (worker){ .in = in, .start = &start, .index = t, .rounds = rounds };
		snprintf(ws[t].session, sizeof(ws[t].session), "g%02d", t);
		s.id = ws[t].session;
		cr_assert_eq(in->ops->session_create(in->h, &call, &s, NULL, &sink, &in->err), 0,
			     "session_create: %s", in->err.msg);
	}
	for (int t = 0; t < n; t++)
		cr_assert_eq(pthread_create(&th[t], NULL, work, &ws[t]), 0);
	for (int t = 0; t < n; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&start);
	for (int t = 0; t < n; t++) {
		memd_call call = { .struct_size = sizeof(call) };
		memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u",
				  .session = ws[t].session };
		memd_event_query q = { .struct_size = sizeof(q) };
		loaded l = { .w = &ws[t], .positions = positions, .n_positions = &n_positions };
		memd_event_sink sink = { .struct_size = sizeof(sink), .userdata = &l,
					 .event = check_event };
		cr_assert_eq(ws[t].failure[0], 0, "thread %d: %s", t, ws[t].failure);
		cr_assert_eq(in->ops->events_load(in->h, &call, &sc, &q, &sink, &in->err), 0,
			     "events_load: %s", in->err.msg);
		cr_assert_eq(l.failure[0], 0, "%s", l.failure);
		cr_assert_eq(l.n, ws[t].n_stored, "%s holds %d events, %d were appended",
			     ws[t].session, l.n, ws[t].n_stored);
		written += (uint64_t)ws[t].n_written;
	}
	/* Positions: one per event, 1..N without a gap (a rolled-back group
	 * gave its positions back). */
	qsort(positions, (size_t)n_positions, sizeof(*positions), cmp_i64);
	for (int k = 0; k < n_positions; k++)
		cr_assert_eq(positions[k], k + 1, "feed position %d is %" PRId64, k + 1, positions[k]);
	free(positions);
	return written;
}

Test(mysql_group, concurrent_appends_share_commits_and_failures_stay_alone)
{
	static worker ws[THREADS];
	uint64_t written, appends = 0, txns = 0;
	unsigned most = 0;
	inst in;

	open_inst(&in, POOL);
	written = run_workers(&in, ws, THREADS, ROUNDS);
	close_inst(&in);
	group_stats(&appends, &txns, &most);
	cr_log_info("%" PRIu64 " appends in %" PRIu64 " transactions, at most %u in one", appends,
		    txns, most);
	cr_assert_eq(appends, written, "the plugin wrote %" PRIu64 " appends, the threads %" PRIu64,
		     appends, written);
	cr_assert_lt(txns, appends, "no batching: %" PRIu64 " transactions for %" PRIu64 " appends",
		     txns, appends);
	cr_assert_gt(most, 1, "no transaction wrote more than one append");
}

Test(mysql_group, group_commit_1_writes_every_append_alone)
{
	static worker ws[SOLO_THREADS];
	uint64_t written, appends = 0, txns = 0;
	unsigned most = 0;
	inst in;

	open_inst(&in, POOL ", group_commit: 1");
	written = run_workers(&in, ws, SOLO_THREADS, SOLO_ROUNDS);
	close_inst(&in);
	group_stats(&appends, &txns, &most);
	cr_assert_eq(appends, written);
	cr_assert_eq(txns, appends, "%" PRIu64 " transactions for %" PRIu64 " appends", txns,
		     appends);
	cr_assert_eq(most, 1);
}
