/* SPDX-License-Identifier: MIT */
/*
 * Group commit of a server-backed store (gc_store.plugin; this file is
 * built once per store, with that store's part: pg_group_commit.c or
 * mysql_group_commit.c, see group_commit.h). Both stores put concurrent
 * appends through the one queue of plugins/common/pu_group.c, each with
 * its own group transaction; every answer must be what a solo append
 * gives.
 *
 * many_sessions_share_transactions: threads append single events, each
 * to a session of its own, through a pool of fewer connections, while
 * other threads append to one shared session. Some appends fail on
 * purpose - a wrong expected_version, a batch with an id stored already,
 * content that is not UTF-8, a state delta that is not an object - and
 * some are retries of stored events (REPLAYED with the stored seq).
 * Afterwards every session holds exactly the events that succeeded, with
 * gapless seqs, its version and its state are those of its last
 * successful append, and the feed holds every event once at positions
 * 1..N. Fewer transactions than appends wrote them.
 * one_session_from_many_threads: all threads append to one session:
 * every event once, seqs and versions gapless, never two appends of the
 * session in one transaction.
 * group_commit_1_writes_every_append_alone: the same with group commit
 * off (group_commit: 1).
 *
 * The group tests make one group for certain: with one connection, held
 * by an append waiting for a session row lock that a foreign
 * transaction holds, appends queue; when the lock goes, one group takes
 * them all. Each step waits (bounded by WAIT_S) for what it needs, never
 * for a time: the held append is seen waiting for the lock on the server
 * (gc_store.lock_waited), and every append that queues is seen blocked in
 * the queue's wait (its thread waits on a futex: tc_thread_syscall) before
 * the lock goes. refusals_in_a_group_fail_alone: a wrong expected_version, a
 * replay and a bad state delta in the group are answered alone, and the
 * others are written together in one transaction.
 * server_refusals_in_a_group_fail_alone: a batch with a stored id,
 * content the server refuses (not UTF-8; its session sorts first, so the
 * others are written after its failure) and a replay without
 * expected_version in the group: each gets its solo answer, the others
 * are written, nothing of the failures is stored.
 * deadline_*: an append queued behind the held connection whose deadline
 * passes fails with MEMD_ETIMEDOUT, retryable, at the deadline, stores
 * nothing, and works when sent again; with group commit (waiting in the
 * queue) and without (waiting for the pool).
 *
 * Transactions are counted by the store's part (gc_store.count). Every
 * test works in a namespace of its own (stress_unique_name).
 *
 * Environment (tests/multiproc/meson.build): MEMD_GROUP_CONFIG, the
 * store's config template ("@NAME@" the namespace, ${VAR}s of the test
 * server of tests/services/, so run under with-services.sh), and
 * MEMD_PLUGIN_PATH.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "group_commit.h"
#include "plugins/hostsvc.h"
#include "stress_util.h"
#include "test_common.h"

#define APP "a"
#define USER "u"
#define T0 1700000000000000LL
#define US_PER_MS 1000
#define TEXT_MAX 2048
#define ID_MAX 64
#define SESSION_MAX 16
#define MAX_SEARCH 16
#define NAME_MARK "@NAME@"
#define INSTANCE_NAME "stores.test"

/* many_sessions_share_transactions */
#define THREADS 12             /* each with a session of its own */
#define ROUNDS 36
#define SHARED_THREADS 4       /* all on SHARED_SESSION */
#define SHARED_ROUNDS 30
#define SHARED_SESSION "shared"
#define SHARED_BAD_EVERY 5     /* every 5th shared round sends content that is not UTF-8 */
#define POOL_BUSY "pool: 2"    /* fewer connections than threads: appends queue */
#define WRONG_VERSION_BY 100   /* how far off a wrong expected_version is */
#define KINDS 7                /* round i of a thread does kind i % KINDS */
#define KIND_PLAIN_EXPECT 0
#define KIND_WRONG_VERSION 1
#define KIND_PLAIN 2
#define KIND_REPLAY 3
#define KIND_PARTLY_STORED 4
#define KIND_BAD_UTF8 5
#define KIND_BAD_STATE 6
/* group_commit_1_writes_every_append_alone */
#define SOLO_THREADS 4
#define SOLO_ROUNDS 8
#define SOLO_SHARED_THREADS 2
#define SOLO_SHARED_ROUNDS 6
/* one_session_from_many_threads */
#define ONE_THREADS 8
#define ONE_ROUNDS 20
#define MAX_THREADS (THREADS + SHARED_THREADS)

/* The group tests. */
#define POOL_ONE "pool: 1"
#define GROUP_OFF "group_commit: 1"
#define BLOCKER "blk"          /* the session whose row the foreign transaction locks */
#define WAIT_S 30              /* bound on every wait for a condition */
#define POLL_MS 2
#define QUEUED_SWEEPS 3        /* sweeps in a row that see every queued job waiting */
#define DEADLINE_MS 150
#define DEADLINE_SLACK_MS 1000 /* the lock is held until the late append returns */
#define MAX_JOBS 16

static const char BAD_UTF8[] = "{\"t\":\"\xff\xfe\"}";
static const char BAD_STATE[] = "[\"not an object\"]";

/* ---- a store instance with its log captured ------------------------------- */

typedef struct gc_inst {
	stress_store s;        /* the instance, as stress_util's helpers take it */
	hostsvc *svc;
	gc_log log;
} gc_inst;

static void capture(void *ud, int32_t level, const char *component, const char *line)
{
	gc_log *l = ud;
	int at;

	(void)level;
	pthread_mutex_lock(&l->lock);
	if (l->n < GC_LOG_MAX) {
		at = (l->first + l->n++) % GC_LOG_MAX;
	} else {
		at = l->first;
		l->first = (l->first + 1) % GC_LOG_MAX;
	}
	snprintf(l->lines[at], GC_LINE_MAX, "%s: %s", component, line);
	pthread_mutex_unlock(&l->lock);
}

/* $MEMD_GROUP_CONFIG with its "@NAME@" replaced by name and extra (may be
 * NULL) added to the map. */
static void render(const char *name, const char *extra, char *out, size_t cap)
{
	const char *tmpl = getenv("MEMD_GROUP_CONFIG");
	const char *mark, *end;
	size_t ml = strlen(NAME_MARK);
	int n;

	cr_assert(tmpl && tmpl[0], "MEMD_GROUP_CONFIG is not set: run through meson test "
		  "(tests/multiproc/meson.build)");
	mark = strstr(tmpl, NAME_MARK);
	end = strrchr(tmpl, '}');
	cr_assert(mark && end && mark < end && !strstr(mark + ml, NAME_MARK),
		  "MEMD_GROUP_CONFIG must be a {map} with one " NAME_MARK ": %s", tmpl);
	n = snprintf(out, cap, "%.*s%s%.*s%s%s}", (int)(mark - tmpl), tmpl, name,
		     (int)(end - mark - ml), mark + ml, extra ? ", " : "", extra ? extra : "");
	cr_assert(n > 0 && (size_t)n < cap, "config too long");
}

/* Open an instance of the store over namespace name, with extra config
 * (may be NULL). */
static gc_inst *gc_open(const char *name, const char *extra)
{
	memd_error err = { .struct_size = sizeof(err) };
	const char *search[MAX_SEARCH + 1];
	char text[TEXT_MAX];
	char *paths = strdup(getenv("MEMD_PLUGIN_PATH") ? getenv("MEMD_PLUGIN_PATH") : "");
	char *save = NULL;
	size_t n = 0;
	gc_inst *in = calloc(1, sizeof(*in));

	cr_assert(in && paths);
	pthread_mutex_init(&in->log.lock, NULL);
	render(name, extra, text, sizeof(text));
	for (char *t = strtok_r(paths, ":", &save); t && n < MAX_SEARCH; t = strtok_r(NULL, ":", &save))
		search[n++] = t;
	search[n] = NULL;
	in->svc = hostsvc_new(capture, &in->log, MEMD_LOG_DEBUG);
	cr_assert_not_null(in->svc);
	cr_assert_eq(config_parse_string(text, strlen(text), "MEMD_GROUP_CONFIG", &in->s.cfg, &err),
		     0, "config: %s", err.msg);
	cr_assert_eq(loader_open(gc_store.plugin, search, &in->s.plugin, &err), 0,
		     "loader_open: %s", err.msg);
	free(paths);
	cr_assert_eq(loader_instance_create(in->s.plugin, INSTANCE_NAME, in->s.cfg, "plugin",
					    in->svc, &in->s.inst, &err),
		     0, "open: %s", err.msg);
	in->s.ops = loader_store_ops(in->s.plugin);
	in->s.h = loader_instance_handle(in->s.inst);
	return in;
}

/* Close the instance; with ret_stats, then count the transactions that
 * wrote events since gc_store.count_begin. */
static void gc_close(gc_inst *in, const char *name, gc_stats *ret_stats)
{
	loader_instance_destroy(in->s.inst);
	loader_close(in->s.plugin);
	if (ret_stats)
		gc_store.count(name, &in->log, ret_stats);
	config_free(in->s.cfg);
	hostsvc_free(in->svc);
	pthread_mutex_destroy(&in->log.lock);
	free(in);
}

static void count_begin(const char *name)
{
	if (gc_store.count_begin)
		gc_store.count_begin(name);
}

static void create_session(gc_inst *in, const char *id)
{
	memd_error err = { .struct_size = sizeof(err) };
	memd_scope sc = stress_scope(APP, USER, id);
	int64_t version = -1, last_seq = -1;

	cr_assert_eq(stress_session_ensure(&in->s, &sc, &err), 0, "create %s: %s", id, err.msg);
	cr_assert_eq(stress_session_head(&in->s, &sc, &version, &last_seq, &err), 0, "%s",
		     err.msg);
	cr_assert(version == 0 && last_seq == 0, "session %s exists already", id);
}

/* ---- appending ------------------------------------------------------------ */

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

/* The answer to one append. */
typedef struct answer {
	int32_t rc;
	memd_error err;
	int64_t seqs[2];
	int64_t version;
	uint32_t flags;
} answer;

static void append(gc_inst *in, const char *session, const memd_event *const *events,
		   uint32_t n, uint32_t flags, int64_t expected, const char *delta,
		   int64_t deadline_us, answer *out)
{
	memd_call call = { .struct_size = sizeof(call), .deadline_us = deadline_us };
	memd_scope sc = stress_scope(APP, USER, session);
	memd_append a = { .struct_size = sizeof(a), .flags = flags, .expected_version = expected,
			  .events = events, .n_events = n, .state_delta_json = delta,
			  .now_us = T0 };
	memd_append_result res = { .struct_size = sizeof(res), .seqs = out->seqs };

	memset(out, 0, sizeof(*out));
	out->err.struct_size = sizeof(out->err);
	res.seqs = out->seqs;
	out->rc = in->s.ops->append(in->s.h, &call, &sc, &a, &res, &out->err);
	out->version = res.version;
	out->flags = res.flags;
}

/* One event, content {"n":1}, state delta {"last": id} (not when
 * delta_override is set). */
static void append_one(gc_inst *in, const char *session, const char *id, const char *content,
		       uint32_t flags, int64_t expected, const char *delta_override,
		       answer *out)
{
	memd_event e;
	const memd_event *evs[1] = { &e };
	char delta[ID_MAX + 16];

	snprintf(delta, sizeof(delta), "{\"last\":\"%s\"}", id);
	event_init(&e, id, content ? content : "{\"n\":1}");
	append(in, session, evs, 1, flags, expected, delta_override ? delta_override : delta, 0,
	       out);
}

/* ---- threads that each append to a session of their own ------------------ */

typedef struct worker {
	gc_inst *in;
	pthread_barrier_t *start;
	int rounds;
	char session[SESSION_MAX];
	char ids[ROUNDS][ID_MAX];    /* what was stored, in seq order */
	int n_stored;
	int64_t version;
	char failure[TEXT_MAX];      /* the first wrong answer; "" = none */
} worker;

#define WRONG(w, ...) \
	do { \
		if (!(w)->failure[0]) \
			snprintf((w)->failure, sizeof((w)->failure), __VA_ARGS__); \
	} while (0)

/* Round i: kind i % KINDS (see the defines). Every append but the bad
 * state one carries {"last": <its first id>}: only the successful ones
 * may leave it. */
static void one_round(worker *w, int i)
{
	char id[ID_MAX];
	memd_event e1, e2;
	const memd_event *evs[2] = { &e1, &e2 };
	char delta[ID_MAX + 16];
	answer a;
	int kind = i % KINDS;

	snprintf(id, sizeof(id), "%s-e%d", w->session, i);
	if (kind == KIND_WRONG_VERSION) {
		append_one(w->in, w->session, id, NULL, MEMD_APPEND_EXPECT_VERSION,
			   w->version + WRONG_VERSION_BY, NULL, &a);
		if (a.rc != MEMD_ECONFLICT || !strstr(a.err.msg, "not the expected"))
			WRONG(w, "round %d: a wrong expected_version gave %d (%s)", i, a.rc, a.err.msg);
		return;
	}
	if (kind == KIND_REPLAY && w->n_stored > 0) {
		/* An earlier event resent alone: every other time with the
		 * expected_version it was first sent with (now stale). */
		int k = w->n_stored / 2;
		int stale = (i / KINDS) % 2;
		append_one(w->in, w->session, w->ids[k], NULL, stale ? MEMD_APPEND_EXPECT_VERSION : 0,
			   k, NULL, &a);
		if (a.rc != 0 || a.flags != MEMD_APPEND_REPLAYED || a.seqs[0] != k + 1 ||
		    a.version != w->version)
			WRONG(w, "round %d: a retry of '%s'%s gave %d (%s) seq %" PRId64
			      " version %" PRId64 " flags %u, not seq %d version %" PRId64
			      " REPLAYED", i, w->ids[k], stale ? " (stale expected_version)" : "",
			      a.rc, a.err.msg, a.seqs[0], a.version, (unsigned)a.flags, k + 1,
			      w->version);
		return;
	}
	if (kind == KIND_PARTLY_STORED && w->n_stored > 0) {
		event_init(&e1, id, "{\"n\":1}");
		event_init(&e2, w->ids[w->n_stored - 1], "{\"n\":2}");
		snprintf(delta, sizeof(delta), "{\"last\":\"%s\"}", id);
		append(w->in, w->session, evs, 2, 0, 0, delta, 0, &a);
		if (a.rc != MEMD_ECONFLICT || !strstr(a.err.msg, "already exist"))
			WRONG(w, "round %d: a batch with a stored id gave %d (%s)", i, a.rc, a.err.msg);
		return;
	}
	if (kind == KIND_BAD_UTF8) {
		append_one(w->in, w->session, id, BAD_UTF8, 0, 0, NULL, &a);
		if (a.rc != MEMD_EINVAL)
			WRONG(w, "round %d: content that is not UTF-8 gave %d (%s) seq %" PRId64, i,
			      a.rc, a.err.msg, a.seqs[0]);
		return;
	}
	if (kind == KIND_BAD_STATE) {
		append_one(w->in, w->session, id, NULL, 0, 0, BAD_STATE, &a);
		if (a.rc != MEMD_EINVAL)
			WRONG(w, "round %d: a state delta that is not an object gave %d (%s)", i, a.rc,
			      a.err.msg);
		return;
	}
	append_one(w->in, w->session, id, NULL,
		   kind == KIND_PLAIN_EXPECT ? MEMD_APPEND_EXPECT_VERSION : 0, w->version, NULL, &a);
	if (a.rc != 0 || a.seqs[0] != w->n_stored + 1 || a.version != w->version + 1 || a.flags) {
		WRONG(w, "round %d: append gave %d (%s) seq %" PRId64 " version %" PRId64
		      " flags %u, not seq %d version %" PRId64, i, a.rc, a.err.msg, a.seqs[0],
		      a.version, (unsigned)a.flags, w->n_stored + 1, w->version + 1);
		return;
	}
	snprintf(w->ids[w->n_stored++], ID_MAX, "%s", id);
	w->version++;
}

static void *work(void *arg)
{
	worker *w = arg;

	pthread_barrier_wait(w->start);
	for (int i = 0; i < w->rounds && !w->failure[0]; i++)
		one_round(w, i);
	return NULL;
}

/* ---- threads that all append to one session ------------------------------- */

typedef struct sharer {
	gc_inst *in;
	pthread_barrier_t *start;
	int index, rounds;
	char ids[SHARED_ROUNDS][ID_MAX]; /* what was stored, with its seq */
	int64_t seqs[SHARED_ROUNDS];
	int n_ok;
	char failure[TEXT_MAX];
} sharer;

static void *share(void *arg)
{
	sharer *w = arg;

	pthread_barrier_wait(w->start);
	for (int i = 0; i < w->rounds && !w->failure[0]; i++) {
		char id[ID_MAX];
		int64_t last = w->n_ok ? w->seqs[w->n_ok - 1] : 0;
		answer a;

		snprintf(id, sizeof(id), "sh%02d-%d", w->index, i);
		if (i % SHARED_BAD_EVERY == SHARED_BAD_EVERY - 1) {
			append_one(w->in, SHARED_SESSION, id, BAD_UTF8, 0, 0, NULL, &a);
			if (a.rc != MEMD_EINVAL)
				WRONG(w, "round %d: content that is not UTF-8 gave %d (%s)", i, a.rc,
				      a.err.msg);
			continue;
		}
		append_one(w->in, SHARED_SESSION, id, NULL, 0, 0, NULL, &a);
		/* One event an append and nothing else: version == seq. */
		if (a.rc != 0 || a.flags || a.seqs[0] <= last || a.version != a.seqs[0]) {
			WRONG(w, "round %d: append gave %d (%s) seq %" PRId64 " version %" PRId64
			      " flags %u (this thread's last seq %" PRId64 ")", i, a.rc, a.err.msg,
			      a.seqs[0], a.version, (unsigned)a.flags, last);
			continue;
		}
		snprintf(w->ids[w->n_ok], ID_MAX, "%s", id);
		w->seqs[w->n_ok++] = a.seqs[0];
	}
	return NULL;
}

/* ---- checking what is stored ----------------------------------------------- */

/* Session holds exactly ids[0, n) at seqs 1..n, and has version. */
static void check_session(gc_inst *in, const char *session, const char *const *ids, size_t n,
			  int64_t version)
{
	memd_error err = { .struct_size = sizeof(err) };
	memd_scope sc = stress_scope(APP, USER, session);
	stress_evs l = { 0 };
	int64_t v = -1, last_seq = -1;

	cr_assert_eq(stress_events_all(&in->s, &sc, &l, &err), 0, "load %s: %s", session, err.msg);
	cr_assert_eq(l.n, n, "%s holds %zu events, not %zu", session, l.n, n);
	for (size_t k = 0; k < n; k++) {
		cr_assert_eq(l.v[k].seq, (int64_t)k + 1, "%s: event %zu has seq %" PRId64, session,
			     k, l.v[k].seq);
		cr_assert_str_eq(l.v[k].id, ids[k], "%s: seq %zu is '%s', not '%s'", session, k + 1,
				 l.v[k].id, ids[k]);
	}
	cr_assert_eq(stress_session_head(&in->s, &sc, &v, &last_seq, &err), 0, "%s", err.msg);
	cr_assert_eq(v, version, "%s has version %" PRId64 ", not %" PRId64, session, v, version);
	cr_assert_eq(last_seq, (int64_t)n, "%s has last_seq %" PRId64 ", not %zu", session,
		     last_seq, n);
	stress_evs_clear(&l);
}

static int32_t take_text(void *ud, const char *text, size_t len)
{
	char **out = ud;

	free(*out);
	*out = strndup(text, len);
	return *out ? 0 : MEMD_ENOMEM;
}

/* The session's state is {"last": last} (last NULL: empty). */
static void check_state(gc_inst *in, const char *session, const char *last)
{
	memd_error err = { .struct_size = sizeof(err) };
	memd_call call = stress_call();
	memd_scope sc = stress_scope(APP, USER, session);
	char *text = NULL;
	memd_text_sink sink = { .struct_size = sizeof(sink), .userdata = &text, .text = take_text };
	json_error_t jerr;
	json_t *root;

	cr_assert_eq(in->s.ops->state_get(in->s.h, &call, &sc, &sink, &err), 0, "state %s: %s",
		     session, err.msg);
	cr_assert_not_null(text);
	root = json_loads(text, 0, &jerr);
	cr_assert_not_null(root, "state of %s is not JSON: %s", session, text);
	if (last) {
		const char *got = json_string_value(json_object_get(root, "last"));
		cr_assert(json_object_size(root) == 1 && got && strcmp(got, last) == 0,
			  "state of %s is %s, not {\"last\":\"%s\"}", session, text, last);
	} else {
		cr_assert_eq(json_object_size(root), 0, "state of %s is %s, not empty", session, text);
	}
	json_decref(root);
	free(text);
}

/* The feed holds n_events events, at positions 1..n_events, and nothing
 * else (a rolled-back group gave its positions back). */
static void check_feed(gc_inst *in, size_t n_events)
{
	memd_error err = { .struct_size = sizeof(err) };
	stress_recs recs = { 0 };
	size_t got = 0;

	cr_assert_eq(stress_feed_read(&in->s, 0, 0, &recs, &got, &err), 0, "feed: %s", err.msg);
	cr_assert_eq(got, n_events, "the feed holds %zu records, not %zu", got, n_events);
	for (size_t k = 0; k < got; k++) {
		cr_assert_eq(recs.v[k].kind, MEMD_FEED_EVENT, "feed record %zu is of kind %u", k,
			     (unsigned)recs.v[k].kind);
		cr_assert_eq(recs.v[k].position, (int64_t)k + 1, "feed record %zu is at %" PRId64, k,
			     recs.v[k].position);
	}
	stress_recs_clear(&recs);
}

/* The shared session holds exactly the events the sharers got answers
 * for, at the seqs they were told; returns how many. */
static size_t check_shared(gc_inst *in, const sharer *sh, int n_sh)
{
	memd_error err = { .struct_size = sizeof(err) };
	memd_scope sc = stress_scope(APP, USER, SHARED_SESSION);
	stress_evs l = { 0 };
	size_t total = 0;
	int64_t v = -1, last_seq = -1;

	for (int t = 0; t < n_sh; t++)
		total += (size_t)sh[t].n_ok;
	cr_assert_eq(stress_events_all(&in->s, &sc, &l, &err), 0, "%s", err.msg);
	cr_assert_eq(l.n, total, "%s holds %zu events, %zu appends succeeded", SHARED_SESSION, l.n,
		     total);
	for (size_t k = 0; k < l.n; k++)
		cr_assert_eq(l.v[k].seq, (int64_t)k + 1, "%s: event %zu has seq %" PRId64,
			     SHARED_SESSION, k, l.v[k].seq);
	/* Each answered seq holds its event: with as many events as answers
	 * and distinct ids, every event is stored exactly once. */
	for (int t = 0; t < n_sh; t++)
		for (int j = 0; j < sh[t].n_ok; j++) {
			int64_t s = sh[t].seqs[j];
			cr_assert(s >= 1 && s <= (int64_t)l.n && strcmp(l.v[s - 1].id, sh[t].ids[j]) == 0,
				  "'%s' was answered seq %" PRId64 ", which holds '%s'", sh[t].ids[j], s,
				  s >= 1 && s <= (int64_t)l.n ? l.v[s - 1].id : "(nothing)");
		}
	cr_assert_eq(stress_session_head(&in->s, &sc, &v, &last_seq, &err), 0, "%s", err.msg);
	cr_assert(v == (int64_t)total && last_seq == (int64_t)total,
		  "%s: version %" PRId64 " last_seq %" PRId64 ", not %zu", SHARED_SESSION, v,
		  last_seq, total);
	/* Its appends were written one at a time: the state is the last's. */
	check_state(in, SHARED_SESSION, total ? l.v[total - 1].id : NULL);
	stress_evs_clear(&l);
	return total;
}

/* Run n workers of rounds each and n_sh sharers of sh_rounds each at
 * once on in, check what they stored; returns the appends that wrote. */
static uint64_t run_appenders(gc_inst *in, worker *ws, int n, int rounds, sharer *sh, int n_sh,
			      int sh_rounds)
{
	pthread_t th[MAX_THREADS];
	pthread_barrier_t start;
	uint64_t written = 0;

	cr_assert_leq(n + n_sh, MAX_THREADS);
	cr_assert_leq(rounds, ROUNDS);
	cr_assert_leq(sh_rounds, SHARED_ROUNDS);
	pthread_barrier_init(&start, NULL, (unsigned)(n + n_sh));
	for (int t = 0; t < n; t++) {
		ws[t] = (worker){ .in = in, .start = &start, .rounds = rounds };
		snprintf(ws[t].session, sizeof(ws[t].session), "g%02d", t);
		create_session(in, ws[t].session);
	}
	if (n_sh)
		create_session(in, SHARED_SESSION);
	for (int t = 0; t < n_sh; t++)
		sh[t] = (sharer){ .in = in, .start = &start, .index = t, .rounds = sh_rounds };
	for (int t = 0; t < n; t++)
		cr_assert_eq(pthread_create(&th[t], NULL, work, &ws[t]), 0);
	for (int t = 0; t < n_sh; t++)
		cr_assert_eq(pthread_create(&th[n + t], NULL, share, &sh[t]), 0);
	for (int t = 0; t < n + n_sh; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&start);

	for (int t = 0; t < n; t++) {
		const char *ids[ROUNDS];
		cr_assert_eq(ws[t].failure[0], 0, "%s: %s", ws[t].session, ws[t].failure);
		for (int k = 0; k < ws[t].n_stored; k++)
			ids[k] = ws[t].ids[k];
		check_session(in, ws[t].session, ids, (size_t)ws[t].n_stored, ws[t].version);
		check_state(in, ws[t].session,
			    ws[t].n_stored ? ws[t].ids[ws[t].n_stored - 1] : NULL);
		written += (uint64_t)ws[t].n_stored;
	}
	for (int t = 0; t < n_sh; t++)
		cr_assert_eq(sh[t].failure[0], 0, "sharer %d: %s", t, sh[t].failure);
	if (n_sh)
		written += check_shared(in, sh, n_sh);
	check_feed(in, (size_t)written);
	return written;
}

/* The statistics as a log line. */
static void log_stats(const char *what, const gc_stats *st)
{
	cr_log_info("%s: %" PRIu64 " appends in %" PRIu64 " transactions, at most %u in one", what,
		    st->appends, st->txns, (unsigned)st->most);
}

Test(group_commit, many_sessions_share_transactions, .timeout = 60)
{
	static worker ws[THREADS];
	static sharer sh[SHARED_THREADS];
	char *name = stress_unique_name("gc");
	gc_inst *in = gc_open(name, POOL_BUSY);
	uint64_t written;
	gc_stats st = { 0 };

	count_begin(name);
	written = run_appenders(in, ws, THREADS, ROUNDS, sh, SHARED_THREADS, SHARED_ROUNDS);
	gc_close(in, name, &st);
	log_stats("many sessions", &st);
	cr_assert_eq(st.appends, written, "%" PRIu64 " appends were written, %" PRIu64
		     " succeeded", st.appends, written);
	cr_assert_lt(st.txns, st.appends, "no batching: %" PRIu64 " transactions for %" PRIu64
		     " appends", st.txns, st.appends);
	cr_assert_gt(st.most, 1, "no transaction wrote more than one append");
	free(name);
}

Test(group_commit, one_session_from_many_threads, .timeout = 60)
{
	static sharer sh[ONE_THREADS];
	char *name = stress_unique_name("gc");
	gc_inst *in = gc_open(name, POOL_BUSY);
	uint64_t written;
	gc_stats st = { 0 };

	count_begin(name);
	written = run_appenders(in, NULL, 0, 0, sh, ONE_THREADS, ONE_ROUNDS);
	gc_close(in, name, &st);
	log_stats("one session", &st);
	cr_assert_eq(st.appends, written);
	/* A group takes one append per session. */
	cr_assert_eq(st.most, 1, "a transaction wrote %u appends of one session", st.most);
	cr_assert_eq(st.txns, st.appends);
	free(name);
}

Test(group_commit, group_commit_1_writes_every_append_alone, .timeout = 60)
{
	static worker ws[SOLO_THREADS];
	static sharer sh[SOLO_SHARED_THREADS];
	char *name = stress_unique_name("gc");
	gc_inst *in = gc_open(name, POOL_BUSY ", " GROUP_OFF);
	uint64_t written;
	gc_stats st = { 0 };

	count_begin(name);
	written = run_appenders(in, ws, SOLO_THREADS, SOLO_ROUNDS, sh, SOLO_SHARED_THREADS,
				SOLO_SHARED_ROUNDS);
	gc_close(in, name, &st);
	log_stats("group_commit: 1", &st);
	cr_assert_eq(st.appends, written);
	cr_assert_eq(st.txns, st.appends, "%" PRIu64 " transactions for %" PRIu64 " appends",
		     st.txns, st.appends);
	cr_assert_eq(st.most, 1);
	free(name);
}

/* ---- one group for certain ------------------------------------------------- */

/* One append on a thread of its own. */
typedef struct job {
	gc_inst *in;
	const char *session;
	memd_event ev[2];
	const memd_event *evs[2];
	uint32_t n_events;
	uint32_t flags;
	int64_t expected;
	const char *delta;
	char delta_buf[ID_MAX + 16]; /* {"last": the first event's id} */
	int deadline_ms;             /* 0: none */
	int queues;                  /* reaches the queue (the checks pass) */
	pthread_t th;
	atomic_int started, done;
	atomic_int tid;              /* its thread's id, once started */
	answer a;
	int64_t took_us;
} job;

static void *job_main(void *arg)
{
	job *j = arg;
	int64_t t0 = stress_now_us();

	atomic_store(&j->tid, (int)tc_gettid());
	atomic_store(&j->started, 1);
	append(j->in, j->session, j->evs, j->n_events, j->flags, j->expected, j->delta,
	       j->deadline_ms ? t0 + (int64_t)j->deadline_ms * US_PER_MS : 0, &j->a);
	j->took_us = stress_now_us() - t0;
	atomic_store(&j->done, 1);
	return NULL;
}

/* A job appending event id (content may be NULL) to session, with state
 * delta {"last": id}. */
static void job_init(job *j, gc_inst *in, const char *session, const char *id,
		     const char *content)
{
	memset(j, 0, sizeof(*j));
	atomic_init(&j->started, 0);
	atomic_init(&j->done, 0);
	atomic_init(&j->tid, 0);
	j->in = in;
	j->session = session;
	event_init(&j->ev[0], id, content ? content : "{\"n\":1}");
	j->evs[0] = &j->ev[0];
	j->evs[1] = &j->ev[1];
	j->n_events = 1;
	snprintf(j->delta_buf, sizeof(j->delta_buf), "{\"last\":\"%.*s\"}", ID_MAX - 1, id);
	j->delta = j->delta_buf;
	j->queues = 1;
}

static void job_start(job *j)
{
	cr_assert_eq(pthread_create(&j->th, NULL, job_main, j), 0);
}

static void job_join(job *j)
{
	pthread_join(j->th, NULL);
}

/* A namespace with the sessions, and one event "<s>-1" already stored in
 * each of prestored, written by an instance of its own; then the
 * instance the test counts, opened with extra. */
static gc_inst *group_setup(const char *name, const char *const *sessions, size_t n,
			    const char *const *prestored, size_t n_pre, const char *extra)
{
	gc_inst *in = gc_open(name, POOL_ONE);

	for (size_t i = 0; i < n; i++)
		create_session(in, sessions[i]);
	for (size_t i = 0; i < n_pre; i++) {
		char id[ID_MAX];
		answer a;
		snprintf(id, sizeof(id), "%s-1", prestored[i]);
		append_one(in, prestored[i], id, NULL, 0, 0, NULL, &a);
		cr_assert_eq(a.rc, 0, "prestore %s: %s", id, a.err.msg);
	}
	gc_close(in, name, NULL);
	count_begin(name);
	return gc_open(name, extra);
}

/* Lock BLOCKER's row from a foreign transaction and start leader (an
 * append to BLOCKER): it takes the one connection and waits for the
 * lock; returns once the server shows it waiting. */
static gc_lock *hold_the_connection(gc_inst *in, const char *name, job *leader)
{
	memd_scope sc = stress_scope(APP, USER, BLOCKER);
	gc_lock *l = gc_store.lock_session(name, &sc);
	int64_t deadline = stress_now_us() + (int64_t)WAIT_S * 1000000;
	int waited;

	job_init(leader, in, BLOCKER, BLOCKER "-1", NULL);
	job_start(leader);
	while (!(waited = gc_store.lock_waited(l)) && !atomic_load(&leader->done) &&
	       stress_now_us() < deadline)
		stress_sleep_ms(POLL_MS);
	cr_assert(!atomic_load(&leader->done), "the append to the locked session did not wait: "
		  "%d (%s)", leader->a.rc, leader->a.err.msg);
	cr_assert(waited, "the append to the locked session was not seen waiting for the lock "
		  "within %d s", WAIT_S);
	return l;
}

/* 1 when every job of jobs[0, n) that queues has a thread blocked on a
 * futex (the queue's wait: nothing else blocks before it) and every other
 * one has returned; -1 when one that queues has returned (it was answered
 * while the connection was held); else 0. Seen QUEUED_SWEEPS times in a
 * row, the queued ones are really in the queue rather than passing a
 * contended lock. */
static int all_queued(job *jobs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (jobs[i].queues && atomic_load(&jobs[i].done))
			return -1;
	for (size_t i = 0; i < n; i++) {
		if (!jobs[i].queues) {
			if (!atomic_load(&jobs[i].done))
				return 0;
		} else if (!atomic_load(&jobs[i].started) ||
			   tc_thread_syscall((pid_t)atomic_load(&jobs[i].tid)) != SYS_futex) {
			return 0;
		}
	}
	return 1;
}

/* Start jobs, wait until those that queue are queued (none answered),
 * then let the held connection go: the queued jobs become one group. */
static void run_group(job *leader, gc_lock *l, job *jobs, size_t n)
{
	int64_t deadline = stress_now_us() + (int64_t)WAIT_S * 1000000;
	int sweeps = 0;

	for (size_t i = 0; i < n; i++)
		job_start(&jobs[i]);
	while (sweeps < QUEUED_SWEEPS && stress_now_us() < deadline) {
		int q = all_queued(jobs, n);
		if (q < 0)
			break;
		sweeps = q ? sweeps + 1 : 0;
		stress_sleep_ms(POLL_MS);
	}
	for (size_t i = 0; i < n; i++)
		cr_assert(!jobs[i].queues || !atomic_load(&jobs[i].done),
			  "'%s' was answered while the connection was held: %d (%s)",
			  jobs[i].ev[0].id, jobs[i].a.rc, jobs[i].a.err.msg);
	cr_assert(!atomic_load(&leader->done), "the held append was answered: %d (%s)",
		  leader->a.rc, leader->a.err.msg);
	cr_assert_eq(sweeps, QUEUED_SWEEPS, "the appends were not all seen queued within %d s",
		     WAIT_S);
	gc_store.unlock(l);
	job_join(leader);
	for (size_t i = 0; i < n; i++)
		job_join(&jobs[i]);
	cr_assert_eq(leader->a.rc, 0, "the held append: %s", leader->a.err.msg);
	cr_assert(leader->a.seqs[0] == 1 && leader->a.version == 1);
}

/* j succeeded: seq, version, flags. */
static void check_ok(const job *j, int64_t seq, int64_t version, uint32_t flags)
{
	cr_assert(j->a.rc == 0 && j->a.seqs[0] == seq && j->a.version == version &&
		  j->a.flags == flags,
		  "'%s' to %s: %d (%s) seq %" PRId64 " version %" PRId64 " flags %u, not seq %"
		  PRId64 " version %" PRId64 " flags %u", j->ev[0].id, j->session, j->a.rc,
		  j->a.err.msg, j->a.seqs[0], j->a.version, (unsigned)j->a.flags, seq, version,
		  (unsigned)flags);
}

/* j failed with rc and a message containing what (may be NULL). */
static void check_failed(const job *j, int32_t rc, const char *what)
{
	cr_assert_eq(j->a.rc, rc, "'%s' to %s gave %d (%s), not %d", j->ev[0].id, j->session,
		     j->a.rc, j->a.err.msg, rc);
	cr_assert(!what || strstr(j->a.err.msg, what), "'%s' to %s: '%s' does not say '%s'",
		  j->ev[0].id, j->session, j->a.err.msg, what);
}

#define N_GOOD 6

Test(group_commit, refusals_in_a_group_fail_alone, .timeout = 60)
{
	static const char *const sessions[] = { BLOCKER, "g0", "g1", "g2", "g3", "g4", "g5",
						 "ver", "rep", "st" };
	static const char *const prestored[] = { "rep" };
	enum { J_G0B = N_GOOD, J_VER, J_REP, J_ST, N_JOBS };
	char *name = stress_unique_name("gc");
	gc_inst *in = group_setup(name, sessions, 10, prestored, 1, POOL_ONE);
	char ids[N_GOOD][ID_MAX];
	job leader, jobs[N_JOBS];
	gc_stats st = { 0 };
	gc_lock *l = hold_the_connection(in, name, &leader);
	const job *first, *second;

	for (int i = 0; i < N_GOOD; i++) {
		snprintf(ids[i], sizeof(ids[i]), "%s-a", sessions[1 + i]);
		job_init(&jobs[i], in, sessions[1 + i], ids[i], NULL);
	}
	/* A second append to g0: not in the same group as the first. */
	job_init(&jobs[J_G0B], in, "g0", "g0-b", NULL);
	job_init(&jobs[J_VER], in, "ver", "ver-a", NULL);
	jobs[J_VER].flags = MEMD_APPEND_EXPECT_VERSION;
	jobs[J_VER].expected = WRONG_VERSION_BY;
	/* A retry of a stored event with the version it first expected. */
	job_init(&jobs[J_REP], in, "rep", "rep-1", NULL);
	jobs[J_REP].flags = MEMD_APPEND_EXPECT_VERSION;
	jobs[J_REP].expected = 0;
	job_init(&jobs[J_ST], in, "st", "st-a", NULL);
	jobs[J_ST].delta = BAD_STATE;
	jobs[J_ST].queues = 0; /* refused before it queues */
	run_group(&leader, l, jobs, N_JOBS);

	/* g0's two appends, in the order they were written. */
	first = jobs[0].a.seqs[0] == 1 ? &jobs[0] : &jobs[J_G0B];
	second = first == &jobs[0] ? &jobs[J_G0B] : &jobs[0];
	check_ok(first, 1, 1, 0);
	check_ok(second, 2, 2, 0);
	for (int i = 1; i < N_GOOD; i++)
		check_ok(&jobs[i], 1, 1, 0);
	check_failed(&jobs[J_VER], MEMD_ECONFLICT, "not the expected");
	check_ok(&jobs[J_REP], 1, 1, MEMD_APPEND_REPLAYED);
	check_failed(&jobs[J_ST], MEMD_EINVAL, NULL);

	{
		const char *g0[] = { first->ev[0].id, second->ev[0].id };
		const char *blk[] = { BLOCKER "-1" };
		const char *rep[] = { "rep-1" };
		check_session(in, "g0", g0, 2, 2);
		check_state(in, "g0", second->ev[0].id);
		for (int i = 1; i < N_GOOD; i++) {
			const char *one[] = { ids[i] };
			check_session(in, sessions[1 + i], one, 1, 1);
			check_state(in, sessions[1 + i], ids[i]);
		}
		check_session(in, BLOCKER, blk, 1, 1);
		check_session(in, "ver", NULL, 0, 0);
		check_state(in, "ver", NULL);
		check_session(in, "rep", rep, 1, 1);
		check_state(in, "rep", "rep-1");
		check_session(in, "st", NULL, 0, 0);
		check_state(in, "st", NULL);
		check_feed(in, 1 + 1 + N_GOOD + 1);
	}
	gc_close(in, name, &st);
	log_stats("refusals in a group", &st);
	/* The held append, the group, g0's second append. */
	cr_assert_eq(st.appends, 1 + N_GOOD + 1);
	cr_assert_eq(st.txns, 3, "the group's appends were written in %" PRIu64 " transactions "
		     "(with the held append and g0's second)", st.txns);
	cr_assert_eq(st.most, N_GOOD, "the group wrote %u appends together, not %d", st.most,
		     N_GOOD);
	free(name);
}

#define N_GOOD_SERVER 4

Test(group_commit, server_refusals_in_a_group_fail_alone, .timeout = 60)
{
	/* "bad" sorts first: the others are written after its failure. */
	static const char *const sessions[] = { BLOCKER, "g0", "g1", "g2", "g3", "dup", "bad",
						 "rep" };
	static const char *const prestored[] = { "dup", "rep" };
	enum { J_DUP = N_GOOD_SERVER, J_UTF, J_REP, N_JOBS };
	char *name = stress_unique_name("gc");
	gc_inst *in = group_setup(name, sessions, 8, prestored, 2, POOL_ONE);
	char ids[N_GOOD_SERVER][ID_MAX];
	job leader, jobs[N_JOBS];
	gc_stats st = { 0 };
	gc_lock *l = hold_the_connection(in, name, &leader);

	for (int i = 0; i < N_GOOD_SERVER; i++) {
		snprintf(ids[i], sizeof(ids[i]), "%s-a", sessions[1 + i]);
		job_init(&jobs[i], in, sessions[1 + i], ids[i], NULL);
	}
	/* A batch of a new event and a stored one. */
	job_init(&jobs[J_DUP], in, "dup", "dup-2", NULL);
	event_init(&jobs[J_DUP].ev[1], "dup-1", "{\"n\":2}");
	jobs[J_DUP].n_events = 2;
	job_init(&jobs[J_UTF], in, "bad", "bad-a", BAD_UTF8);
	/* A retry without expected_version. */
	job_init(&jobs[J_REP], in, "rep", "rep-1", NULL);
	run_group(&leader, l, jobs, N_JOBS);

	for (int i = 0; i < N_GOOD_SERVER; i++)
		check_ok(&jobs[i], 1, 1, 0);
	check_failed(&jobs[J_DUP], MEMD_ECONFLICT, "already exist");
	check_failed(&jobs[J_UTF], MEMD_EINVAL, NULL);
	cr_assert(!(jobs[J_UTF].a.err.flags & MEMD_ERROR_RETRYABLE), "bad content is retryable");
	check_ok(&jobs[J_REP], 1, 1, MEMD_APPEND_REPLAYED);
	{
		const char *dup[] = { "dup-1" };
		const char *rep[] = { "rep-1" };
		for (int i = 0; i < N_GOOD_SERVER; i++) {
			const char *one[] = { ids[i] };
			check_session(in, sessions[1 + i], one, 1, 1);
			check_state(in, sessions[1 + i], ids[i]);
		}
		check_session(in, "dup", dup, 1, 1);
		check_state(in, "dup", "dup-1");
		check_session(in, "bad", NULL, 0, 0);
		check_state(in, "bad", NULL);
		check_session(in, "rep", rep, 1, 1);
		check_state(in, "rep", "rep-1");
		check_feed(in, 2 + 1 + N_GOOD_SERVER);
	}
	gc_close(in, name, &st);
	log_stats("server refusals in a group", &st);
	cr_assert_eq(st.appends, 1 + N_GOOD_SERVER);
	free(name);
}

/* An append queued behind the held connection gives up at its deadline. */
static void deadline_while_queued(const char *extra)
{
	static const char *const sessions[] = { BLOCKER, "late" };
	char *name = stress_unique_name("gc");
	gc_inst *in = group_setup(name, sessions, 2, NULL, 0, extra);
	job leader, late;
	gc_stats st = { 0 };
	gc_lock *l = hold_the_connection(in, name, &leader);
	answer again;
	const char *ids[] = { "late-1" };

	job_init(&late, in, "late", "late-1", NULL);
	late.deadline_ms = DEADLINE_MS;
	job_start(&late);
	job_join(&late);
	cr_assert(!atomic_load(&leader.done), "the held append was answered: %d (%s)",
		  leader.a.rc, leader.a.err.msg);
	gc_store.unlock(l);
	job_join(&leader);
	cr_assert_eq(leader.a.rc, 0, "the held append: %s", leader.a.err.msg);

	check_failed(&late, MEMD_ETIMEDOUT, NULL);
	cr_assert(late.a.err.flags & MEMD_ERROR_RETRYABLE, "not retryable: %s", late.a.err.msg);
	cr_assert_geq(late.took_us, (int64_t)DEADLINE_MS * US_PER_MS, "answered before its "
		      "deadline, after %" PRId64 " us", late.took_us);
	cr_assert_lt(late.took_us, (int64_t)(DEADLINE_MS + DEADLINE_SLACK_MS) * US_PER_MS,
		     "answered %" PRId64 " us after a deadline of %d ms", late.took_us,
		     DEADLINE_MS);
	check_session(in, "late", NULL, 0, 0);
	check_state(in, "late", NULL);
	/* Sent again, it is written as new (nothing of it was stored). */
	append_one(in, "late", "late-1", NULL, MEMD_APPEND_EXPECT_VERSION, 0, NULL, &again);
	cr_assert(again.rc == 0 && again.seqs[0] == 1 && again.version == 1 && again.flags == 0,
		  "sent again: %d (%s) seq %" PRId64 " version %" PRId64 " flags %u", again.rc,
		  again.err.msg, again.seqs[0], again.version, (unsigned)again.flags);
	check_session(in, "late", ids, 1, 1);
	check_feed(in, 2);
	gc_close(in, name, &st);
	cr_assert(st.appends == 2 && st.txns == 2, "%" PRIu64 " appends in %" PRIu64
		  " transactions, not the held one and the one sent again", st.appends, st.txns);
	free(name);
}

Test(group_commit, deadline_while_queued_times_out, .timeout = 60)
{
	deadline_while_queued(POOL_ONE);
}

Test(group_commit, deadline_without_group_commit_times_out, .timeout = 60)
{
	deadline_while_queued(POOL_ONE ", " GROUP_OFF);
}
