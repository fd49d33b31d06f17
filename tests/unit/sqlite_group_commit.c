/* SPDX-License-Identifier: MIT */
/*
 * sqlite-group-commit: concurrent appends to the sqlite store share
 * transactions, and still behave exactly like appends made one at a time.
 *
 * The store is opened the way the host opens it (loader + config node),
 * with a log sink that keeps the plugin's group-commit counters (logged
 * when the instance is destroyed; the writer counts its commits with a
 * SQLite commit hook). Failures are injected for real: triggers added to
 * the database (with a connection of the test's own) abort an event
 * insert or a state write half-way through a request, and a deferred
 * foreign key makes COMMIT itself fail. A connection of the test's own
 * that holds the write lock (BEGIN IMMEDIATE) lets requests pile up
 * behind the writer, so tests can say which requests share a group. The
 * lock goes only once every request is seen waiting, never after a fixed
 * time: the leader sleeping in SQLite's busy handler, the others blocked
 * in the queue's wait (tc_thread_syscall reads what a thread is blocked
 * in).
 *
 * The same harness checks that the store's checkpoint reads keep their
 * prepared statements: the plugin logs at close how often SQLite prepared
 * its statements again, which a plan tied to a bound value does at every
 * step.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "plugins/hostsvc.h"
#include "plugins/loader.h"
#include "test_common.h"

#define APP "gc"
#define USER "u"
#define ID_MAX 96
#define TEXT_MAX 64
#define DELTA_MAX 256
#define LINE_MAX_LEN 512
#define MAX_EVENTS 4
#define MAX_SEARCH_DIRS 16
#define FTW_FDS 8
#define BUSY_TIMEOUT_MS 5000
#define US_PER_MS 1000
#define NS_PER_US 1000
#define US_PER_SEC 1000000

/* Text of an event that a trigger refuses (half-way through a request). */
#define POISON_TEXT "poison"
/* State key that a trigger refuses. */
#define POISON_KEY "poison"
/* Text of an event whose request makes COMMIT fail (deferred foreign key). */
#define COMMIT_POISON_TEXT "commit-poison"

static const char SQL_TRIGGERS[] =
	"CREATE TRIGGER gc_poison_event BEFORE INSERT ON events"
	"  WHEN NEW.text = '" POISON_TEXT "'"
	"  BEGIN SELECT RAISE(ABORT, 'poisoned event'); END;"
	"CREATE TRIGGER gc_poison_state BEFORE INSERT ON state_session"
	"  WHEN NEW.name = '" POISON_KEY "'"
	"  BEGIN SELECT RAISE(ABORT, 'poisoned state key'); END;"
	"CREATE TABLE gc_parent (id INTEGER PRIMARY KEY);"
	"CREATE TABLE gc_child (pid INTEGER"
	"  REFERENCES gc_parent (id) DEFERRABLE INITIALLY DEFERRED);"
	"CREATE TRIGGER gc_poison_commit AFTER INSERT ON events"
	"  WHEN NEW.text = '" COMMIT_POISON_TEXT "'"
	"  BEGIN INSERT INTO gc_child (pid) VALUES (42); END;";

/* ---- the store ---------------------------------------------------------- */

typedef struct gc_store {
	config_node *cfg;
	loader_plugin *plugin;
	loader_instance *inst;
	hostsvc *svc;
	const memd_store_ops *ops;
	void *h;
} gc_store;

/* The plugin's counters, from its last "group commit:" log line. */
typedef struct gc_stats {
	unsigned long long requests, groups, grouped, commits;
	unsigned largest;
} gc_stats;

static char tmp_dir[PATH_MAX];
static char db_path[PATH_MAX + 16];
static char *search_buf;
static const char *search_dirs[MAX_SEARCH_DIRS + 1];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char stats_line[LINE_MAX_LEN];
static char reprepare_line[LINE_MAX_LEN];

static void keep_stats(void *userdata, int32_t level, const char *component, const char *line)
{
	const char *p = strstr(line, "group commit:");
	const char *q = strstr(line, "statements prepared again:");

	(void)userdata;
	(void)level;
	(void)component;
	if (q) {
		pthread_mutex_lock(&log_lock);
		snprintf(reprepare_line, sizeof(reprepare_line), "%s", q);
		pthread_mutex_unlock(&log_lock);
	}
	if (!p)
		return;
	pthread_mutex_lock(&log_lock);
	snprintf(stats_line, sizeof(stats_line), "%s", p);
	pthread_mutex_unlock(&log_lock);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void setup(void)
{
	const char *env = getenv("MEMD_PLUGIN_PATH");
	const char *tmp = getenv("TMPDIR");
	size_t n = 0;

	cr_assert(env && env[0], "MEMD_PLUGIN_PATH must name the built plugins");
	search_buf = strdup(env);
	cr_assert(search_buf);
	for (char *save = NULL, *dir = strtok_r(search_buf, ":", &save);
	     dir && n < MAX_SEARCH_DIRS; dir = strtok_r(NULL, ":", &save))
		search_dirs[n++] = dir;
	search_dirs[n] = NULL;
	snprintf(tmp_dir, sizeof(tmp_dir), "%s/memd-sqlite-gc-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	cr_assert(mkdtemp(tmp_dir), "mkdtemp: %s", strerror(errno));
	snprintf(db_path, sizeof(db_path), "%s/gc.db", tmp_dir);
}

static void teardown(void)
{
	if (tmp_dir[0])
		nftw(tmp_dir, remove_entry, FTW_FDS, FTW_DEPTH | FTW_PHYS);
	tmp_dir[0] = '\0';
	free(search_buf);
	search_buf = NULL;
}

static void store_open(gc_store *s)
{
	char yaml[PATH_MAX + LINE_MAX_LEN];
	memd_error err = { 0 };

	memset(s, 0, sizeof(*s));
	snprintf(yaml, sizeof(yaml),
		 "plugin: sqlite\npath: \"%s\"\nsynchronous: full\nbusy_timeout_ms: %d\n", db_path,
		 BUSY_TIMEOUT_MS);
	s->svc = hostsvc_new(keep_stats, NULL, MEMD_LOG_INFO);
	cr_assert(s->svc);
	cr_assert_eq(config_parse_string(yaml, strlen(yaml), "sqlite-gc", &s->cfg, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(loader_open("sqlite", search_dirs, &s->plugin, &err), 0, "%s", err.msg);
	cr_assert_eq(loader_instance_create(s->plugin, "stores.gc", s->cfg, "plugin", s->svc,
					    &s->inst, &err),
		     0, "%s", err.msg);
	s->ops = loader_store_ops(s->plugin);
	s->h = loader_instance_handle(s->inst);
}

/* Destroy the instance (which logs its counters) and return them. */
static gc_stats store_close(gc_store *s)
{
	gc_stats st = { 0 };

	stats_line[0] = '\0';
	reprepare_line[0] = '\0';
	loader_instance_destroy(s->inst);
	loader_close(s->plugin);
	config_free(s->cfg);
	hostsvc_free(s->svc);
	memset(s, 0, sizeof(*s));
	cr_assert_eq(sscanf(stats_line,
			    "group commit: %llu requests in %llu transactions (%llu shared one, "
			    "largest group %u); the writer committed %llu transactions in all",
			    &st.requests, &st.groups, &st.grouped, &st.largest, &st.commits),
		     5, "no group-commit counters in the plugin's log: '%s'", stats_line);
	cr_log_info("%s", stats_line);
	return st;
}

/* Open the store once (so it makes its schema), add the fault-injection
 * triggers with a connection of our own, and open it again. */
static void store_open_poisoned(gc_store *s)
{
	sqlite3 *db = NULL;
	char *msg = NULL;

	store_open(s);
	store_close(s);
	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, SQL_TRIGGERS, NULL, NULL, &msg), SQLITE_OK, "triggers: %s",
		     msg ? msg : "?");
	sqlite3_close(db);
	store_open(s);
}

/* A connection of our own holding the database's write lock. */
static sqlite3 *block_writer(void)
{
	sqlite3 *db = NULL;

	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK, "%s",
		     sqlite3_errmsg(db));
	return db;
}

static void unblock_writer(sqlite3 *db)
{
	cr_assert_eq(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

static int32_t ignore_session(void *userdata, const memd_session *s)
{
	(void)userdata;
	(void)s;
	return 0;
}

static void create_session(gc_store *s, const char *sid)
{
	memd_session_sink sink = { .struct_size = sizeof(sink), .session = ignore_session };
	memd_session sess = { .struct_size = sizeof(sess), .app = APP, .user = USER, .id = sid,
			      .created_us = 1, .updated_us = 1 };
	memd_error err = { 0 };

	cr_assert_eq(s->ops->session_create(s->h, NULL, &sess, NULL, &sink, &err), 0, "%s",
		     err.msg);
}

static memd_scope scope_of(const char *sid)
{
	return (memd_scope){ .struct_size = sizeof(memd_scope), .app = APP, .user = USER,
			     .session = sid };
}

static int64_t monotonic_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * US_PER_SEC + ts.tv_nsec / NS_PER_US;
}

static void sleep_ms(int ms)
{
	usleep((useconds_t)ms * US_PER_MS);
}

#define WAIT_MS 30000     /* bound on waiting for requests to be waiting */
#define WAIT_POLL_MS 1
#define WAIT_SWEEPS 3     /* sweeps in a row that see every request waiting */

/* ---- one append request ------------------------------------------------- */

typedef struct gc_req {
	char sid[ID_MAX];
	char ids[MAX_EVENTS][ID_MAX];
	char texts[MAX_EVENTS][TEXT_MAX];
	memd_event ev[MAX_EVENTS];
	const memd_event *ptr[MAX_EVENTS];
	char delta[DELTA_MAX];
	int n;
	int has_version;
	int64_t expected;
	int64_t deadline_us;     /* 0 = none */
	/* outcome */
	int32_t r;
	memd_error err;
	int64_t seqs[MAX_EVENTS];
	int64_t version;
	uint32_t flags;
} gc_req;

static void req_init(gc_req *q, const char *sid)
{
	memset(q, 0, sizeof(*q));
	snprintf(q->sid, sizeof(q->sid), "%s", sid);
}

static void req_event(gc_req *q, const char *id, const char *text)
{
	int k = q->n++;

	cr_assert(k < MAX_EVENTS);
	snprintf(q->ids[k], ID_MAX, "%s", id);
	snprintf(q->texts[k], TEXT_MAX, "%s", text);
}

static void req_run(gc_store *s, gc_req *q)
{
	memd_call call = { .struct_size = sizeof(call), .deadline_us = q->deadline_us };
	memd_scope sc = scope_of(q->sid);
	memd_append_result res = { .struct_size = sizeof(res), .seqs = q->seqs };
	memd_append a = { .struct_size = sizeof(a) };

	for (int k = 0; k < q->n; k++) {
		q->ev[k] = (memd_event){ .struct_size = sizeof(memd_event), .id = q->ids[k],
					 .author = "tester", .role = k % 2 ? "assistant" : "user",
					 .content_json = "{\"parts\":[{\"type\":\"text\",\"text\":\"x\"}]}",
					 .text = q->texts[k], .tokens = 1, .timestamp_us = k + 1 };
		q->ptr[k] = &q->ev[k];
	}
	a.flags = q->has_version ? MEMD_APPEND_EXPECT_VERSION : 0;
	a.expected_version = q->expected;
	a.events = q->ptr;
	a.n_events = (uint32_t)q->n;
	a.state_delta_json = q->delta[0] ? q->delta : NULL;
	a.now_us = 1;
	memset(&q->err, 0, sizeof(q->err));
	q->r = s->ops->append(s->h, q->deadline_us ? &call : NULL, &sc, &a, &res, &q->err);
	if (q->r == 0) {
		q->version = res.version;
		q->flags = res.flags;
	}
}

/* A request on a thread of its own. */
typedef struct req_thread {
	gc_store *s;
	gc_req *q;
	atomic_int tid;          /* its thread's id, once started */
	atomic_int done;         /* the request returned */
} req_thread;

static void *req_thread_main(void *p)
{
	req_thread *t = p;
	atomic_store(&t->tid, (int)tc_gettid());
	req_run(t->s, t->q);
	atomic_store(&t->done, 1);
	return NULL;
}

static void req_thread_start(req_thread *t, pthread_t *th, gc_store *s, gc_req *q)
{
	t->s = s;
	t->q = q;
	atomic_init(&t->tid, 0);
	atomic_init(&t->done, 0);
	cr_assert_eq(pthread_create(th, NULL, req_thread_main, t), 0);
}

/* 1 when t's thread sleeps in SQLite's busy handler: it leads, and waits
 * for the write lock (nothing else on an append's way sleeps). */
static int req_leads(req_thread *t)
{
	long nr = atomic_load(&t->tid) ? tc_thread_syscall((pid_t)atomic_load(&t->tid)) : -1;

	return nr == SYS_clock_nanosleep || nr == SYS_nanosleep;
}

/* 1 when t's thread is blocked on a futex: it is queued (with no request
 * answered, nothing else blocks it for long). */
static int req_queued(req_thread *t)
{
	return atomic_load(&t->tid) &&
	       tc_thread_syscall((pid_t)atomic_load(&t->tid)) == SYS_futex;
}

/* Waits (bounded by WAIT_MS) until, WAIT_SWEEPS sweeps in a row, t[0]
 * leads (with first_leads; else any one of them may) and every other
 * request of t[0, n) is queued. Asserts that none returned meanwhile. */
static void wait_all_waiting(req_thread *t, int n, int first_leads)
{
	int64_t until = monotonic_us() + (int64_t)WAIT_MS * US_PER_MS;
	int sweeps = 0;

	while (sweeps < WAIT_SWEEPS) {
		int leaders = 0, all = 1;

		for (int i = 0; i < n && all; i++) {
			cr_assert(!atomic_load(&t[i].done), "request %d returned while the writer "
				  "was held: %d (%s)", i, t[i].q->r, t[i].q->err.msg);
			if (req_leads(&t[i]) && (!first_leads || i == 0))
				leaders++;
			else if (!req_queued(&t[i]))
				all = 0;
		}
		sweeps = all && leaders == 1 ? sweeps + 1 : 0;
		cr_assert_lt(monotonic_us(), until, "the requests were not all seen waiting behind "
			     "the held writer within %d ms", WAIT_MS);
		sleep_ms(WAIT_POLL_MS);
	}
}

/* Run requests on threads of their own, started one at a time while a
 * connection of ours holds the write lock, each once the ones before are
 * seen waiting; release the lock once all are. The first request leads
 * (it waits for the lock); the others queue behind it in start order. */
static void run_queued(gc_store *s, gc_req *reqs, int n)
{
	pthread_t tid[MAX_EVENTS * 8];
	req_thread args[MAX_EVENTS * 8];
	sqlite3 *blocker = block_writer();

	cr_assert(n <= (int)(sizeof(tid) / sizeof(tid[0])));
	for (int i = 0; i < n; i++) {
		req_thread_start(&args[i], &tid[i], s, &reqs[i]);
		wait_all_waiting(args, i + 1, 1);
	}
	unblock_writer(blocker);
	for (int i = 0; i < n; i++)
		pthread_join(tid[i], NULL);
}

/* ---- reading back ------------------------------------------------------- */

typedef struct session_seen {
	int64_t version, last_seq;
} session_seen;

static int32_t keep_session(void *userdata, const memd_session *s)
{
	session_seen *seen = userdata;
	seen->version = s->version;
	seen->last_seq = s->last_seq;
	return 0;
}

static session_seen get_session(gc_store *s, const char *sid)
{
	session_seen seen = { 0 };
	memd_session_sink sink = { .struct_size = sizeof(sink), .userdata = &seen,
				   .session = keep_session };
	memd_scope sc = scope_of(sid);
	memd_error err = { 0 };

	cr_assert_eq(s->ops->session_get(s->h, NULL, &sc, &sink, &err), 0, "%s", err.msg);
	return seen;
}

typedef struct ev_copy {
	char id[ID_MAX];
	char text[TEXT_MAX];
	char session[ID_MAX];
	int64_t seq, position;
} ev_copy;

typedef struct ev_list {
	ev_copy *v;
	size_t n, cap;
} ev_list;

static void ev_add(ev_list *l, const memd_event *e, const char *session, int64_t position)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		cr_assert(l->v);
	}
	snprintf(l->v[l->n].id, ID_MAX, "%s", e->id);
	snprintf(l->v[l->n].text, TEXT_MAX, "%s", e->text ? e->text : "");
	snprintf(l->v[l->n].session, ID_MAX, "%s", session ? session : "");
	l->v[l->n].seq = e->seq;
	l->v[l->n].position = position;
	l->n++;
}

static int32_t keep_event(void *userdata, const memd_event *e)
{
	ev_add(userdata, e, e->session, e->position);
	return 0;
}

static ev_list load_events(gc_store *s, const char *sid)
{
	ev_list l = { 0 };
	memd_event_sink sink = { .struct_size = sizeof(sink), .userdata = &l, .event = keep_event };
	memd_event_query q = { .struct_size = sizeof(q) };
	memd_scope sc = scope_of(sid);
	memd_error err = { 0 };

	cr_assert_eq(s->ops->events_load(s->h, NULL, &sc, &q, &sink, &err), 0, "%s", err.msg);
	return l;
}

static int32_t keep_feed(void *userdata, const memd_feed_record *r)
{
	if (r->kind == MEMD_FEED_EVENT)
		ev_add(userdata, r->event, r->session, r->position);
	return 0;
}

static ev_list read_feed(gc_store *s)
{
	ev_list l = { 0 };
	memd_feed_sink sink = { .struct_size = sizeof(sink), .userdata = &l, .record = keep_feed };
	memd_error err = { 0 };

	cr_assert_eq(s->ops->feed_read(s->h, NULL, 0, 0, &sink, &err), 0, "%s", err.msg);
	return l;
}

static int32_t keep_text(void *userdata, const char *text, size_t len)
{
	json_error_t jerr;
	*(json_t **)userdata = json_loadb(text, len, 0, &jerr);
	return 0;
}

static json_t *get_state(gc_store *s, const char *sid)
{
	json_t *state = NULL;
	memd_text_sink sink = { .struct_size = sizeof(sink), .userdata = &state, .text = keep_text };
	memd_scope sc = scope_of(sid);
	memd_error err = { 0 };

	cr_assert_eq(s->ops->state_get(s->h, NULL, &sc, &sink, &err), 0, "%s", err.msg);
	cr_assert(json_is_object(state));
	return state;
}

/* ---- many threads, a mix of good and failing requests -------------------- */

#define MIX_THREADS 8
#define MIX_ROUNDS 48
#define MIX_OWN_EVENTS 2
#define MIX_BAD_VERSION_SKEW 7

/* What each request of the mix is (round + thread picks one). */
#define K_OWN_GOOD      0 /* own session, expected_version right: stored */
#define K_SHARED        1 /* the shared session, no expected_version: stored */
#define K_BAD_VERSION   2 /* expected_version wrong: ECONFLICT */
#define K_POISON_EVENT  3 /* a trigger aborts the 2nd event's insert: ECONFLICT */
#define K_POISON_STATE  4 /* a trigger aborts the delta's 2nd key: ECONFLICT */
#define K_TEMP_KEY      5 /* temp: key in the delta: EINVAL */
#define K_DUP_IN_BATCH  6 /* one id twice in the batch: EINVAL or ECONFLICT */
#define K_PARTIAL       7 /* one stored id and one new: ECONFLICT */
#define K_NO_SESSION    8 /* a session that does not exist: ENOTFOUND */
#define K_REPLAY        9 /* resend a stored batch: REPLAYED, original seqs */
#define K_COUNT        10

typedef struct own_batch {
	char ids[MIX_OWN_EVENTS][ID_MAX];
	int64_t seqs[MIX_OWN_EVENTS];
	int64_t version;
	int round;
} own_batch;

typedef struct shared_rec {
	char id[ID_MAX];
	int64_t seq, version;
} shared_rec;

typedef struct mix_thread {
	gc_store *s;
	int t;
	own_batch own[MIX_ROUNDS];
	int n_own;
	shared_rec shared[MIX_ROUNDS];
	int n_shared;
	int queued;              /* requests that passed the up-front checks */
	int failures[K_COUNT];
	char wrong[LINE_MAX_LEN]; /* the first unexpected outcome */
} mix_thread;

static void mix_wrong(mix_thread *m, int round, const char *what, const gc_req *q)
{
	if (m->wrong[0])
		return;
	snprintf(m->wrong, sizeof(m->wrong), "thread %d round %d: %s (r=%d: %s)", m->t, round, what,
		 (int)q->r, q->err.msg);
}

static void mix_own_good(mix_thread *m, int round, gc_req *q)
{
	own_batch *b = &m->own[m->n_own];
	char sid[ID_MAX], id[ID_MAX];

	snprintf(sid, sizeof(sid), "own-%d", m->t);
	req_init(q, sid);
	for (int k = 0; k < MIX_OWN_EVENTS; k++) {
		snprintf(id, sizeof(id), "t%d-r%d-e%d", m->t, round, k);
		req_event(q, id, "good");
	}
	snprintf(q->delta, sizeof(q->delta), "{\"k%d\":%d,\"user:t%d\":%d}", round, round, m->t,
		 round);
	q->has_version = 1;
	q->expected = m->n_own;
	req_run(m->s, q);
	m->queued++;
	if (q->r != 0 || q->version != m->n_own + 1 || q->flags != 0) {
		mix_wrong(m, round, "a good append to the own session did not store", q);
		return;
	}
	for (int k = 0; k < MIX_OWN_EVENTS; k++) {
		snprintf(b->ids[k], ID_MAX, "%s", q->ids[k]);
		b->seqs[k] = q->seqs[k];
	}
	b->version = q->version;
	b->round = round;
	m->n_own++;
}

static void mix_failing(mix_thread *m, int round, int kind, gc_req *q)
{
	char sid[ID_MAX], id[ID_MAX];
	int32_t want = MEMD_ECONFLICT;
	int queued = 1;

	snprintf(sid, sizeof(sid), kind == K_NO_SESSION ? "missing-%d" : "own-%d", m->t);
	req_init(q, sid);
	q->has_version = 1;
	q->expected = m->n_own;
	snprintf(id, sizeof(id), "bad-t%d-r%d-a", m->t, round);
	switch (kind) {
	case K_BAD_VERSION:
		q->expected = m->n_own + MIX_BAD_VERSION_SKEW;
		req_event(q, id, "bad");
		break;
	case K_POISON_EVENT:
		req_event(q, id, "bad");
		snprintf(id, sizeof(id), "bad-t%d-r%d-b", m->t, round);
		req_event(q, id, POISON_TEXT);
		snprintf(id, sizeof(id), "bad-t%d-r%d-c", m->t, round);
		req_event(q, id, "bad");
		break;
	case K_POISON_STATE:
		req_event(q, id, "bad");
		snprintf(q->delta, sizeof(q->delta), "{\"ok%d\":1,\"" POISON_KEY "\":2}", round);
		break;
	case K_TEMP_KEY:
		req_event(q, id, "bad");
		snprintf(q->delta, sizeof(q->delta), "{\"ok%d\":1,\"temp:x\":2}", round);
		want = MEMD_EINVAL;
		queued = 0;
		break;
	case K_DUP_IN_BATCH:
		req_event(q, id, "bad");
		req_event(q, id, "bad");
		queued = 0;
		break;
	case K_PARTIAL:
		req_event(q, m->own[0].ids[0], "good");
		req_event(q, id, "bad");
		break;
	case K_NO_SESSION:
		req_event(q, id, "bad");
		want = MEMD_ENOTFOUND;
		break;
	default:
		cr_assert_fail("unknown kind %d", kind);
	}
	req_run(m->s, q);
	m->queued += queued;
	if (q->r == want || (kind == K_DUP_IN_BATCH && q->r == MEMD_EINVAL))
		m->failures[kind]++;
	else
		mix_wrong(m, round, "a failing request did not fail as it should", q);
}

static void mix_shared(mix_thread *m, int round, gc_req *q)
{
	shared_rec *rec = &m->shared[m->n_shared];
	char id[ID_MAX];

	req_init(q, "shared");
	snprintf(id, sizeof(id), "s-t%d-r%d", m->t, round);
	req_event(q, id, "shared");
	snprintf(q->delta, sizeof(q->delta), "{\"last-t%d\":%d}", m->t, round);
	req_run(m->s, q);
	m->queued++;
	/* One event per append: its seq is the session's new version. */
	if (q->r != 0 || q->seqs[0] != q->version) {
		mix_wrong(m, round, "a shared append did not store with seq == version", q);
		return;
	}
	snprintf(rec->id, ID_MAX, "%s", id);
	rec->seq = q->seqs[0];
	rec->version = q->version;
	m->n_shared++;
}

static void mix_replay(mix_thread *m, int round, gc_req *q)
{
	const own_batch *b = &m->own[(round * 7) % m->n_own];
	char sid[ID_MAX];

	snprintf(sid, sizeof(sid), "own-%d", m->t);
	req_init(q, sid);
	for (int k = 0; k < MIX_OWN_EVENTS; k++)
		req_event(q, b->ids[k], "replayed");
	/* A retry with a stale expected_version is still a replay. */
	q->has_version = 1;
	q->expected = b->version - 1;
	req_run(m->s, q);
	m->queued++;
	if (q->r != 0 || !(q->flags & MEMD_APPEND_REPLAYED) || q->version != m->n_own ||
	    q->seqs[0] != b->seqs[0] || q->seqs[1] != b->seqs[1])
		mix_wrong(m, round, "a replay did not return the original seqs", q);
}

static void *mix_main(void *p)
{
	mix_thread *m = p;
	gc_req *q = malloc(sizeof(*q));

	if (!q) {
		snprintf(m->wrong, sizeof(m->wrong), "out of memory");
		return NULL;
	}
	for (int round = 0; round < MIX_ROUNDS && !m->wrong[0]; round++) {
		int kind = (round + m->t) % K_COUNT;
		if ((kind == K_PARTIAL || kind == K_REPLAY) && m->n_own == 0)
			kind = K_OWN_GOOD;
		if (kind == K_OWN_GOOD)
			mix_own_good(m, round, q);
		else if (kind == K_SHARED)
			mix_shared(m, round, q);
		else if (kind == K_REPLAY)
			mix_replay(m, round, q);
		else
			mix_failing(m, round, kind, q);
	}
	free(q);
	return NULL;
}

/* Everything a thread had stored is there exactly, nothing else is. */
static void check_own(gc_store *s, const mix_thread *m)
{
	char sid[ID_MAX], key[ID_MAX];
	session_seen seen;
	ev_list l;
	json_t *state;
	const char *k;
	json_t *v;
	int n_k = 0;

	snprintf(sid, sizeof(sid), "own-%d", m->t);
	seen = get_session(s, sid);
	cr_assert_eq(seen.version, m->n_own, "%s: version %lld after %d stored appends", sid,
		     (long long)seen.version, m->n_own);
	cr_assert_eq(seen.last_seq, (int64_t)m->n_own * MIX_OWN_EVENTS);
	l = load_events(s, sid);
	cr_assert_eq(l.n, (size_t)m->n_own * MIX_OWN_EVENTS, "%s: %zu events", sid, l.n);
	for (int b = 0; b < m->n_own; b++) {
		cr_assert_eq(m->own[b].version, b + 1, "%s: append %d returned version %lld", sid,
			     b, (long long)m->own[b].version);
		for (int e = 0; e < MIX_OWN_EVENTS; e++) {
			const ev_copy *c = &l.v[b * MIX_OWN_EVENTS + e];
			cr_assert_eq(c->seq, (int64_t)b * MIX_OWN_EVENTS + e + 1, "%s: gap", sid);
			cr_assert_str_eq(c->id, m->own[b].ids[e]);
			cr_assert_eq(m->own[b].seqs[e], c->seq, "%s: %s returned seq %lld, stored %lld",
				     sid, c->id, (long long)m->own[b].seqs[e], (long long)c->seq);
		}
	}
	free(l.v);

	state = get_state(s, sid);
	json_object_foreach(state, k, v) {
		cr_assert(strcmp(k, POISON_KEY) != 0 && strncmp(k, "ok", 2) != 0,
			  "%s: state key %s of a failed append persisted", sid, k);
		if (k[0] == 'k')
			n_k++;
	}
	cr_assert_eq(n_k, m->n_own, "%s: %d k* keys for %d stored appends", sid, n_k, m->n_own);
	for (int b = 0; b < m->n_own; b++) {
		snprintf(key, sizeof(key), "k%d", m->own[b].round);
		cr_assert_eq(json_integer_value(json_object_get(state, key)), m->own[b].round,
			     "%s: key %s", sid, key);
	}
	if (m->n_own) {
		snprintf(key, sizeof(key), "user:t%d", m->t);
		cr_assert_eq(json_integer_value(json_object_get(state, key)),
			     m->own[m->n_own - 1].round);
	}
	json_decref(state);
}

Test(sqlite_group_commit, concurrent_appends_fail_alone, .init = setup, .fini = teardown,
     .timeout = 60)
{
	pthread_t tid[MIX_THREADS];
	mix_thread *m = calloc(MIX_THREADS, sizeof(*m));
	int queued = 0, total_shared = 0, total_events = 0, creates = 0;
	int failures[K_COUNT] = { 0 };
	char sid[ID_MAX];
	session_seen seen;
	ev_list l;
	gc_stats st;
	gc_store s;

	cr_assert(m);
	store_open_poisoned(&s);
	for (int t = 0; t < MIX_THREADS; t++) {
		snprintf(sid, sizeof(sid), "own-%d", t);
		create_session(&s, sid);
		creates++;
	}
	create_session(&s, "shared");
	creates++;
	for (int t = 0; t < MIX_THREADS; t++) {
		m[t].s = &s;
		m[t].t = t;
		cr_assert_eq(pthread_create(&tid[t], NULL, mix_main, &m[t]), 0);
	}
	for (int t = 0; t < MIX_THREADS; t++)
		pthread_join(tid[t], NULL);
	for (int t = 0; t < MIX_THREADS; t++) {
		cr_assert(!m[t].wrong[0], "%s", m[t].wrong);
		queued += m[t].queued;
		total_shared += m[t].n_shared;
		total_events += m[t].n_own * MIX_OWN_EVENTS + m[t].n_shared;
		for (int k = 0; k < K_COUNT; k++)
			failures[k] += m[t].failures[k];
	}
	for (int k = K_BAD_VERSION; k <= K_NO_SESSION; k++)
		cr_assert_gt(failures[k], 0, "no request of kind %d ran", k);

	for (int t = 0; t < MIX_THREADS; t++)
		check_own(&s, &m[t]);

	/* The shared session: gapless, each stored event where its append
	 * said, each version handed out once. */
	seen = get_session(&s, "shared");
	cr_assert_eq(seen.version, total_shared);
	l = load_events(&s, "shared");
	cr_assert_eq(l.n, (size_t)total_shared);
	for (size_t i = 0; i < l.n; i++) {
		int t = -1, found = 0;
		cr_assert_eq(l.v[i].seq, (int64_t)i + 1, "shared: gap at %zu", i);
		cr_assert_eq(sscanf(l.v[i].id, "s-t%d-", &t), 1);
		cr_assert(t >= 0 && t < MIX_THREADS);
		for (int j = 0; j < m[t].n_shared && !found; j++)
			found = strcmp(m[t].shared[j].id, l.v[i].id) == 0 &&
				m[t].shared[j].seq == l.v[i].seq;
		cr_assert(found, "shared: %s at seq %lld is not where its append said", l.v[i].id,
			  (long long)l.v[i].seq);
	}
	free(l.v);

	/* The feed holds exactly the stored events. This store hands out
	 * positions 1, 2, 3...: a failed request gives its positions back,
	 * so there is no gap either. */
	l = read_feed(&s);
	cr_assert_eq(l.n, (size_t)total_events, "feed has %zu events, %d were stored", l.n,
		     total_events);
	for (size_t i = 0; i < l.n; i++) {
		cr_assert(strncmp(l.v[i].id, "bad-", 4) != 0, "event %s of a failed append is stored",
			  l.v[i].id);
		cr_assert_eq(l.v[i].position, (int64_t)i + 1, "feed position %lld at #%zu",
			     (long long)l.v[i].position, i);
	}
	free(l.v);

	st = store_close(&s);
	cr_assert_eq(st.requests, (unsigned long long)queued);
	/* Concurrent requests shared transactions: fewer commits than
	 * appends (the session creates commit alone). */
	cr_assert_lt(st.groups, st.requests, "every request had a transaction of its own");
	cr_assert_lt(st.commits - (unsigned long long)creates, st.requests);
	cr_assert_gt(st.largest, 1u);
	free(m);
}

/* ---- which requests share a group --------------------------------------- */

#define PILE 16

Test(sqlite_group_commit, requests_queued_behind_the_writer_commit_together, .init = setup,
     .fini = teardown, .timeout = 60)
{
	gc_req *reqs = calloc(PILE, sizeof(*reqs));
	pthread_t tid[PILE];
	req_thread args[PILE];
	char sid[ID_MAX], id[ID_MAX];
	sqlite3 *blocker;
	gc_stats st;
	gc_store s;

	cr_assert(reqs);
	store_open(&s);
	for (int i = 0; i < PILE; i++) {
		snprintf(sid, sizeof(sid), "pile-%d", i);
		create_session(&s, sid);
		req_init(&reqs[i], sid);
		snprintf(id, sizeof(id), "p%d", i);
		req_event(&reqs[i], id, "piled");
	}
	blocker = block_writer();
	for (int i = 0; i < PILE; i++)
		req_thread_start(&args[i], &tid[i], &s, &reqs[i]);
	wait_all_waiting(args, PILE, 0);
	unblock_writer(blocker);
	for (int i = 0; i < PILE; i++) {
		pthread_join(tid[i], NULL);
		cr_assert_eq(reqs[i].r, 0, "%s", reqs[i].err.msg);
		cr_assert_eq(reqs[i].version, 1);
		cr_assert_eq(reqs[i].seqs[0], 1);
	}
	st = store_close(&s);
	cr_assert_eq(st.requests, PILE);
	/* The first request took the writer; everything that queued while
	 * it waited for the lock joined its transaction. */
	cr_assert_lt(st.groups, PILE / 2, "%llu transactions for %d piled-up appends", st.groups,
		     PILE);
	cr_assert_geq(st.largest, PILE / 2);
	free(reqs);
}

Test(sqlite_group_commit, one_group_sees_its_own_writes_in_order, .init = setup,
     .fini = teardown, .timeout = 60)
{
	gc_req reqs[5];
	session_seen seen;
	ev_list l;
	gc_stats st;
	gc_store s;

	store_open(&s);
	create_session(&s, "lead");
	create_session(&s, "same");
	/* 0 leads; 1..4 queue in order behind it, all on session "same". */
	req_init(&reqs[0], "lead");
	req_event(&reqs[0], "l1", "lead");
	req_init(&reqs[1], "same");
	req_event(&reqs[1], "a1", "first");
	req_event(&reqs[1], "a2", "first");
	reqs[1].has_version = 1;
	reqs[1].expected = 0;
	req_init(&reqs[2], "same"); /* stale: must see 1's bump */
	req_event(&reqs[2], "x1", "stale");
	reqs[2].has_version = 1;
	reqs[2].expected = 0;
	req_init(&reqs[3], "same"); /* right only after 1's bump */
	req_event(&reqs[3], "b1", "second");
	reqs[3].has_version = 1;
	reqs[3].expected = 1;
	snprintf(reqs[3].delta, sizeof(reqs[3].delta), "{\"after\":\"b\"}");
	req_init(&reqs[4], "same"); /* replay of 1 inside the same group */
	req_event(&reqs[4], "a1", "again");
	req_event(&reqs[4], "a2", "again");
	run_queued(&s, reqs, 5);

	cr_assert_eq(reqs[0].r, 0, "%s", reqs[0].err.msg);
	cr_assert_eq(reqs[1].r, 0, "%s", reqs[1].err.msg);
	cr_assert_eq(reqs[1].version, 1);
	cr_assert(reqs[1].seqs[0] == 1 && reqs[1].seqs[1] == 2);
	cr_assert_eq(reqs[2].r, MEMD_ECONFLICT, "a stale expected_version passed: %s",
		     reqs[2].err.msg);
	cr_assert_eq(reqs[3].r, 0, "%s", reqs[3].err.msg);
	cr_assert_eq(reqs[3].version, 2);
	cr_assert_eq(reqs[3].seqs[0], 3);
	cr_assert_eq(reqs[4].r, 0, "%s", reqs[4].err.msg);
	cr_assert(reqs[4].flags & MEMD_APPEND_REPLAYED);
	cr_assert(reqs[4].seqs[0] == 1 && reqs[4].seqs[1] == 2);
	cr_assert_eq(reqs[4].version, 2);

	seen = get_session(&s, "same");
	cr_assert_eq(seen.version, 2);
	cr_assert_eq(seen.last_seq, 3);
	l = load_events(&s, "same");
	cr_assert_eq(l.n, 3);
	cr_assert_str_eq(l.v[0].id, "a1");
	cr_assert_str_eq(l.v[2].id, "b1");
	free(l.v);
	st = store_close(&s);
	/* All five in one transaction: the checks above ran inside it. */
	cr_assert_eq(st.requests, 5);
	cr_assert_eq(st.groups, 1, "the queued requests did not share one transaction");
}

Test(sqlite_group_commit, failed_commit_fails_the_whole_group, .init = setup, .fini = teardown,
     .timeout = 60)
{
	gc_req reqs[4];
	const char *sids[4] = { "c0", "c1", "c2", "c3" };
	session_seen seen;
	ev_list l;
	gc_stats st;
	gc_store s;

	store_open_poisoned(&s);
	for (int i = 0; i < 4; i++) {
		char id[ID_MAX];
		create_session(&s, sids[i]);
		req_init(&reqs[i], sids[i]);
		snprintf(id, sizeof(id), "c%d-e", i);
		req_event(&reqs[i], id, i == 2 ? COMMIT_POISON_TEXT : "fine");
		snprintf(reqs[i].delta, sizeof(reqs[i].delta), "{\"c\":%d}", i);
	}
	/* Request 2 passes its savepoint but leaves a deferred foreign-key
	 * violation behind, so the group's COMMIT fails. */
	run_queued(&s, reqs, 4);
	for (int i = 0; i < 4; i++) {
		cr_assert_lt(reqs[i].r, 0, "request %d of a failed commit succeeded", i);
		cr_assert(reqs[i].err.flags & MEMD_ERROR_RETRYABLE,
			  "request %d: a failed group commit is not retryable: %s", i,
			  reqs[i].err.msg);
		seen = get_session(&s, sids[i]);
		cr_assert_eq(seen.version, 0, "request %d persisted", i);
	}
	l = read_feed(&s);
	cr_assert_eq(l.n, 0, "a failed commit left %zu events in the feed", l.n);
	free(l.v);

	/* The retries of the good ones succeed; the poisoned one fails alone
	 * again, retryably, and stores nothing. */
	for (int i = 0; i < 4; i++) {
		req_run(&s, &reqs[i]);
		if (i == 2) {
			cr_assert_lt(reqs[i].r, 0);
			cr_assert(reqs[i].err.flags & MEMD_ERROR_RETRYABLE);
		} else {
			cr_assert_eq(reqs[i].r, 0, "retry %d: %s", i, reqs[i].err.msg);
			cr_assert_eq(reqs[i].version, 1);
		}
	}
	l = read_feed(&s);
	cr_assert_eq(l.n, 3);
	free(l.v);
	st = store_close(&s);
	cr_assert_eq(st.requests, 8);
}

#define DEADLINE_MS 150
#define DEADLINE_SLACK_MS 1000 /* well below the leader's busy timeout */

Test(sqlite_group_commit, deadline_passes_while_queued, .init = setup, .fini = teardown,
     .timeout = 60)
{
	gc_req reqs[2];
	pthread_t tid[2];
	req_thread args[2];
	sqlite3 *blocker;
	int64_t t0, waited_ms;
	ev_list l;
	gc_store s;

	store_open(&s);
	create_session(&s, "d");
	req_init(&reqs[0], "d");
	req_event(&reqs[0], "leader", "leads");
	req_init(&reqs[1], "d");
	req_event(&reqs[1], "late", "gives up");

	blocker = block_writer();
	req_thread_start(&args[0], &tid[0], &s, &reqs[0]);
	wait_all_waiting(args, 1, 1);
	t0 = monotonic_us();
	reqs[1].deadline_us = t0 + DEADLINE_MS * US_PER_MS;
	req_thread_start(&args[1], &tid[1], &s, &reqs[1]);
	pthread_join(tid[1], NULL);
	waited_ms = (monotonic_us() - t0) / US_PER_MS;
	cr_assert_eq(reqs[1].r, MEMD_ETIMEDOUT, "%s", reqs[1].err.msg);
	cr_assert(reqs[1].err.flags & MEMD_ERROR_RETRYABLE);
	cr_assert_lt(waited_ms, DEADLINE_SLACK_MS, "the queued request waited %lld ms",
		     (long long)waited_ms);
	/* The leader is still waiting for the lock. */
	cr_assert(!atomic_load(&args[0].done), "the leader returned while the writer was held: "
		  "%d (%s)", reqs[0].r, reqs[0].err.msg);
	unblock_writer(blocker);
	pthread_join(tid[0], NULL);
	cr_assert_eq(reqs[0].r, 0, "%s", reqs[0].err.msg);
	l = load_events(&s, "d");
	cr_assert_eq(l.n, 1);
	cr_assert_str_eq(l.v[0].id, "leader");
	free(l.v);
	store_close(&s);
}

Test(sqlite_group_commit, lone_appends_commit_one_by_one, .init = setup, .fini = teardown,
     .timeout = 60)
{
	gc_req q;
	gc_stats st;
	gc_store s;
	const int n = 20;

	store_open(&s);
	create_session(&s, "lone");
	for (int i = 0; i < n; i++) {
		char id[ID_MAX];
		req_init(&q, "lone");
		snprintf(id, sizeof(id), "e%d", i);
		req_event(&q, id, "alone");
		q.has_version = 1;
		q.expected = i;
		req_run(&s, &q);
		cr_assert_eq(q.r, 0, "%s", q.err.msg);
		cr_assert_eq(q.seqs[0], i + 1);
	}
	st = store_close(&s);
	cr_assert_eq(st.requests, (unsigned long long)n);
	cr_assert_eq(st.groups, (unsigned long long)n);
	cr_assert_eq(st.largest, 1u);
	cr_assert_eq(st.commits, (unsigned long long)n + 1); /* + the session create */
}

/* ---- prepared statements ------------------------------------------------- */

#define CKPT_READS 20
#define CKPT_NOW_US 1700000000000000LL

static int32_t count_checkpoint(void *userdata, const memd_checkpoint *c)
{
	(void)c;
	(*(int *)userdata)++;
	return 0;
}

static int32_t ignore_write(void *userdata, const memd_checkpoint_write *w)
{
	(void)userdata;
	(void)w;
	return 0;
}

Test(sqlite_statements, checkpoint_reads_are_not_prepared_again, .init = setup,
     .fini = teardown)
{
	gc_store s;
	memd_scope sc = scope_of("ck");
	memd_checkpoint c = { .struct_size = sizeof(c), .app = APP, .user = USER, .session = "ck",
			      .ns = "", .id = "0001", .type = "json", .payload = "{}",
			      .payload_size = 2, .metadata_json = "{}",
			      .run_state = MEMD_RUN_RUNNING, .expires_us = CKPT_NOW_US * 2 };
	memd_checkpoint_query q = { .struct_size = sizeof(q), .session = "ck", .ns = "",
				    .limit = 10 };
	memd_error err = { 0 };
	unsigned long long again = 1;
	int seen = 0;
	memd_checkpoint_sink sink = { .struct_size = sizeof(sink), .userdata = &seen,
				      .checkpoint = count_checkpoint, .write = ignore_write };

	store_open(&s);
	create_session(&s, "ck");
	cr_assert_eq(s.ops->checkpoint_put(s.h, NULL, &c, 0, CKPT_NOW_US, NULL, &err), 0, "%s",
		     err.msg);
	/* Every read at another "now", as the facade's clock gives them. */
	for (int i = 0; i < CKPT_READS; i++) {
		cr_assert_eq(s.ops->checkpoint_get(s.h, NULL, &sc, "", "0001", CKPT_NOW_US + i,
						   &sink, &err),
			     0, "%s", err.msg);
		cr_assert_eq(s.ops->checkpoint_get(s.h, NULL, &sc, "", NULL, CKPT_NOW_US + i,
						   &sink, &err),
			     0, "%s", err.msg);
		q.now_us = CKPT_NOW_US + i;
		cr_assert_eq(s.ops->checkpoint_list(s.h, NULL, &sc, &q, &sink, &err), 0, "%s",
			     err.msg);
	}
	cr_assert_eq(seen, 3 * CKPT_READS);
	store_close(&s);
	cr_assert_eq(sscanf(reprepare_line, "statements prepared again: %llu", &again), 1,
		     "no count of statements prepared again in the plugin's log: '%s'",
		     reprepare_line);
	cr_assert_eq(again, 0, "SQLite prepared the store's statements again %llu times in %d "
		     "checkpoint reads", again, 3 * CKPT_READS);
}
