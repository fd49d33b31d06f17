/* SPDX-License-Identifier: MIT */
/*
 * Several memd processes over one database server (stress_util.h says
 * which plugin and server):
 *
 *  - multiproc: 4 processes x 8 threads append to the same sessions (a
 *    third of them with expected_version) while the parent tails the
 *    change feed like an indexer. Afterwards every acknowledged event is
 *    there exactly once at the seq it was acknowledged with, seqs are
 *    gapless, the acknowledged versions of a session are exactly 1..its
 *    version, every 409 lost a real race, and the indexer saw every event
 *    exactly once, in increasing positions. The processes also start at
 *    once on a fresh schema, so they race to run the migrations.
 *  - outage: a private server is killed while writers append without
 *    pause, and started again: calls fail fast with retryable errors, the
 *    same store instance recovers by itself, no acknowledged batch is
 *    lost and no batch is partly there. Each phase waits for what it
 *    needs (acks before, failures during, acks after), never for a time.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stress_util.h"

#define APP "stress"
#define USER "u"
#define N_PROCS 4
#define N_THREADS 8
#define N_APPENDS 20          /* per thread */
#define N_SESSIONS 3
#define MAX_BATCH 3
#define EXPECT_EVERY 3        /* every 3rd append sends expected_version */
#define ID_MAX 64
#define FEED_PAGE 200
#define IDLE_POLL_MS 5
#define T0 1700000000000000LL

static const char *const session_ids[N_SESSIONS] = { "hot-a", "hot-b", "hot-c" };

/* ---- multiproc ------------------------------------------------------ */

/* One acknowledged append or one 409, as a child reports it. */
typedef struct ack {
	int session;
	int n;               /* events; 0 = a 409 */
	int64_t seq0;        /* seq of the first event */
	int64_t version;     /* after (ack) or expected (409) */
	char id0[ID_MAX];    /* id of the first event: "<p>-<t>-<k>-<j>" */
} ack;

typedef struct worker {
	stress_store *s;
	int proc, thread;
	ack acks[N_APPENDS];
	int n_acks;
	int failed;
	memd_error err;
} worker;

static void *worker_main(void *arg)
{
	worker *w = arg;

	for (int k = 0; k < N_APPENDS && !w->failed; k++) {
		int si = (w->thread + k) % N_SESSIONS, n = 1 + k % MAX_BATCH;
		memd_scope sc = stress_scope(APP, USER, session_ids[si]);
		char ids[MAX_BATCH][ID_MAX];
		memd_event evs[MAX_BATCH];
		const memd_event *ptrs[MAX_BATCH];
		int64_t seqs[MAX_BATCH];
		memd_append a = { .struct_size = sizeof(a), .n_events = (uint32_t)n,
				  .events = ptrs, .now_us = T0 + k };
		memd_append_result res = { .struct_size = sizeof(res), .seqs = seqs };
		memd_call call = stress_call();
		ack *out = &w->acks[w->n_acks];
		int32_t r;

		for (int j = 0; j < n; j++) {
			snprintf(ids[j], ID_MAX, "%d-%d-%d-%d", w->proc, w->thread, k, j);
			stress_event(&evs[j], ids[j], ids[j], T0 + k);
			ptrs[j] = &evs[j];
		}
		if (k % EXPECT_EVERY == 0) {
			r = stress_session_head(w->s, &sc, &a.expected_version, NULL, &w->err);
			if (r < 0) {
				w->failed = 1;
				break;
			}
			a.flags = MEMD_APPEND_EXPECT_VERSION;
		}
		r = w->s->ops->append(w->s->h, &call, &sc, &a, &res, &w->err);
		*out = (ack){ .session = si };
		if (r == MEMD_ECONFLICT && (a.flags & MEMD_APPEND_EXPECT_VERSION)) {
			out->version = a.expected_version;
		} else if (r == 0 && !(res.flags & MEMD_APPEND_REPLAYED)) {
			out->n = n;
			out->seq0 = seqs[0];
			out->version = res.version;
			for (int j = 1; j < n; j++)
				if (seqs[j] != seqs[0] + j) {
					snprintf(w->err.msg, sizeof(w->err.msg),
						 "batch seqs not consecutive");
					w->failed = 1;
				}
		} else {
			if (r == 0)
				snprintf(w->err.msg, sizeof(w->err.msg), "a new batch was 'replayed'");
			w->failed = 1;
			break;
		}
		snprintf(out->id0, ID_MAX, "%s", ids[0]);
		w->n_acks++;
	}
	return NULL;
}

/* A child process: its own store instance, N_THREADS writers, acks to
 * file. Exit status 0 only if every call behaved. */
static int child_main(int proc, const char *name, const char *ack_file)
{
	memd_error err = { .struct_size = sizeof(err) };
	stress_store *s = stress_open(NULL, name, NULL, &err);
	pthread_t th[N_THREADS];
	worker *w;
	FILE *f;
	int bad = 0;

	if (!s) {
		fprintf(stderr, "child %d: open: %s\n", proc, err.msg);
		return 1;
	}
	for (int i = 0; i < N_SESSIONS; i++) {
		memd_scope sc = stress_scope(APP, USER, session_ids[i]);
		if (stress_session_ensure(s, &sc, &err) < 0) {
			fprintf(stderr, "child %d: create: %s\n", proc, err.msg);
			stress_close(s);
			return 1;
		}
	}
	w = calloc(N_THREADS, sizeof(*w));
	if (!w)
		return 1;
	for (int t = 0; t < N_THREADS; t++) {
		w[t] = (worker){ .s = s, .proc = proc, .thread = t };
		pthread_create(&th[t], NULL, worker_main, &w[t]);
	}
	for (int t = 0; t < N_THREADS; t++)
		pthread_join(th[t], NULL);
	f = fopen(ack_file, "w");
	for (int t = 0; t < N_THREADS; t++) {
		if (w[t].failed) {
			fprintf(stderr, "child %d thread %d: %s\n", proc, t, w[t].err.msg);
			bad = 1;
		}
		if (f)
			fwrite(w[t].acks, sizeof(ack), (size_t)w[t].n_acks, f);
	}
	if (!f || fclose(f) != 0)
		bad = 1;
	free(w);
	stress_close(s);
	return bad;
}

typedef struct indexer {
	stress_store *s;
	stress_recs seen;
	volatile int stop;
	int failed;
	memd_error err;
} indexer;

/* Tail the feed from position 0 as an indexer does: read after the last
 * position seen, never look back. */
static void *indexer_main(void *arg)
{
	indexer *x = arg;
	int64_t cursor = 0;

	for (;;) {
		int stopping = x->stop;
		size_t got = 0;
		int32_t r = stress_feed_read(x->s, cursor, FEED_PAGE, &x->seen, &got, &x->err);

		if (r < 0) {
			x->failed = 1;
			return NULL;
		}
		if (got)
			cursor = x->seen.v[x->seen.n - 1].position;
		else if (stopping)
			return NULL;
		else
			stress_sleep_ms(IDLE_POLL_MS);
	}
}

static int cmp_ack_version(const void *a, const void *b)
{
	const ack *x = a, *y = b;
	if (x->session != y->session)
		return x->session - y->session;
	return (x->version > y->version) - (x->version < y->version);
}

Test(stress, multiproc, .timeout = 120)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *name = stress_unique_name("mp");
	char dir[] = "/tmp/memd-stress-XXXXXX";
	pid_t pids[N_PROCS];
	indexer ix = { 0 };
	pthread_t ixt;
	ack *acks = NULL;
	size_t n_acks = 0, cap = (size_t)N_PROCS * N_THREADS * N_APPENDS;
	int64_t events_acked[N_SESSIONS] = { 0 };

	cr_assert_not_null(name);
	cr_assert_not_null(mkdtemp(dir));
	/* Start every process at once on a schema that does not exist yet. */
	for (int p = 0; p < N_PROCS; p++) {
		char file[sizeof(dir) + 32];
		snprintf(file, sizeof(file), "%s/acks.%d", dir, p);
		pids[p] = fork();
		cr_assert_geq(pids[p], 0, "fork failed");
		if (pids[p] == 0)
			_exit(child_main(p, name, file));
	}
	ix.s = stress_open(NULL, name, NULL, &err);
	cr_assert_not_null(ix.s, "open: %s", err.msg);
	cr_assert_eq(pthread_create(&ixt, NULL, indexer_main, &ix), 0);
	for (int p = 0; p < N_PROCS; p++) {
		int status = 0;
		cr_assert_eq(waitpid(pids[p], &status, 0), pids[p]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			  "child %d failed (status 0x%x): see its stderr", p, status);
	}
	ix.stop = 1;
	pthread_join(ixt, NULL);
	cr_assert_not(ix.failed, "indexer: %s", ix.err.msg);

	acks = calloc(cap, sizeof(*acks));
	cr_assert_not_null(acks);
	for (int p = 0; p < N_PROCS; p++) {
		char file[sizeof(dir) + 32];
		FILE *f;
		snprintf(file, sizeof(file), "%s/acks.%d", dir, p);
		f = fopen(file, "r");
		cr_assert_not_null(f, "no acks from child %d", p);
		n_acks += fread(acks + n_acks, sizeof(ack), cap - n_acks, f);
		fclose(f);
		unlink(file);
	}
	rmdir(dir);
	cr_assert_eq(n_acks, cap, "%zu answers for %zu appends", n_acks, cap);

	/* Versions: the acknowledged appends of a session hold versions
	 * 1..V exactly once each; a 409 expected a version someone else
	 * moved past. */
	qsort(acks, n_acks, sizeof(*acks), cmp_ack_version);
	for (int si = 0; si < N_SESSIONS; si++) {
		memd_scope sc = stress_scope(APP, USER, session_ids[si]);
		int64_t version = 0, last_seq = 0, want = 1;
		stress_evs evs = { 0 };

		cr_assert_eq(stress_session_head(ix.s, &sc, &version, &last_seq, &err), 0, "%s",
			     err.msg);
		for (size_t i = 0; i < n_acks; i++) {
			if (acks[i].session != si)
				continue;
			if (acks[i].n == 0) {
				cr_assert_lt(acks[i].version, version,
					     "409 for expected version %lld, but the session only "
					     "reached %lld", (long long)acks[i].version,
					     (long long)version);
				continue;
			}
			cr_assert_eq(acks[i].version, want,
				     "%s: acknowledged version %lld, expected %lld (duplicate or "
				     "missing version)", session_ids[si], (long long)acks[i].version,
				     (long long)want);
			want++;
			events_acked[si] += acks[i].n;
		}
		cr_assert_eq(version, want - 1, "%s: version %lld, %lld appends acknowledged",
			     session_ids[si], (long long)version, (long long)(want - 1));
		cr_assert_eq(last_seq, events_acked[si]);

		/* Every acknowledged event exactly once, at its seq; gapless. */
		cr_assert_eq(stress_events_all(ix.s, &sc, &evs, &err), 0, "%s", err.msg);
		cr_assert_eq((int64_t)evs.n, events_acked[si], "%s: %zu events stored, %lld acked",
			     session_ids[si], evs.n, (long long)events_acked[si]);
		for (size_t i = 0; i < evs.n; i++)
			cr_assert_eq(evs.v[i].seq, (int64_t)i + 1, "%s: seq gap at %zu",
				     session_ids[si], i);
		for (size_t i = 0; i < n_acks; i++) {
			const ack *a = &acks[i];
			char want_id[ID_MAX];
			if (a->session != si || a->n == 0)
				continue;
			for (int j = 0; j < a->n; j++) {
				const stress_ev *e = &evs.v[a->seq0 - 1 + j];
				snprintf(want_id, sizeof(want_id), "%.*s%d",
					 (int)(strrchr(a->id0, '-') - a->id0 + 1), a->id0, j);
				cr_assert_str_eq(e->id, want_id, "seq %lld holds %s, acked for %s",
						 (long long)e->seq, e->id, want_id);
			}
		}
		stress_evs_clear(&evs);
	}

	/* The indexer saw every event exactly once, in increasing positions. */
	{
		int64_t total = 0;
		for (int si = 0; si < N_SESSIONS; si++)
			total += events_acked[si];
		for (size_t i = 1; i < ix.seen.n; i++)
			cr_assert_gt(ix.seen.v[i].position, ix.seen.v[i - 1].position,
				     "feed went backwards at record %zu", i);
		cr_assert_eq((int64_t)ix.seen.n, total,
			     "the indexer saw %zu records, %lld events were acknowledged",
			     ix.seen.n, (long long)total);
		for (size_t i = 0; i < ix.seen.n; i++)
			cr_assert_eq(ix.seen.v[i].kind, MEMD_FEED_EVENT);
	}
	stress_recs_clear(&ix.seen);
	free(acks);
	stress_close(ix.s);
	free(name);
}

/* ---- outage --------------------------------------------------------- */

/* The writers append until the test tells them to stop, so the load is
 * there for as long as the test needs it, however fast or slow the machine
 * is; every phase waits for what it checks (bounded by OUT_WAIT_S), never
 * for a fixed time:
 *   1. every writer has OUT_ACKS_BEFORE acknowledged batches;
 *   2. the server is killed; every writer has seen a retryable failure;
 *   3. the server is started again; every writer gets OUT_AFTER_ACKS
 *      batches acknowledged after the restart, through the same instance. */
#define OUT_THREADS 4
#define OUT_BATCH 3
#define OUT_RETRY_MS 20
#define OUT_ACKS_BEFORE 3       /* acks each writer has before the outage */
#define OUT_AFTER_ACKS 5        /* acks each writer needs after the restart */
#define OUT_WAIT_S 30           /* bound on each phase */
#define OUT_POLL_MS 10
#define OUT_FAIL_FAST_US 5000000 /* a failing call returns within 5 s */

typedef struct out_worker {
	stress_store *s;
	int thread;
	atomic_int *stop;
	int64_t *acked_seq0;            /* per batch tried; 0 = not acknowledged */
	int n_batches, cap_batches;     /* batches tried; written by the writer only */
	atomic_int n_acked;
	atomic_int retryable_errors;
	atomic_int done;                /* the writer has returned */
	int64_t slowest_failure_us;
	int fatal;
	memd_error err;
} out_worker;

/* Room for one more batch in w->acked_seq0; 0 or -1 (out of memory). */
static int out_grow(out_worker *w)
{
	int64_t *v;
	int cap;

	if (w->n_batches < w->cap_batches)
		return 0;
	cap = w->cap_batches ? 2 * w->cap_batches : 256;
	v = realloc(w->acked_seq0, (size_t)cap * sizeof(*v));
	if (!v)
		return -1;
	memset(v + w->cap_batches, 0, (size_t)(cap - w->cap_batches) * sizeof(*v));
	w->acked_seq0 = v;
	w->cap_batches = cap;
	return 0;
}

static void *out_main(void *arg)
{
	out_worker *w = arg;
	char session[16];
	memd_scope sc;

	snprintf(session, sizeof(session), "o%d", w->thread);
	sc = stress_scope(APP, USER, session);
	for (int b = 0; !atomic_load(w->stop) && !w->fatal; b++) {
		char ids[OUT_BATCH][ID_MAX];
		memd_event evs[OUT_BATCH];
		const memd_event *ptrs[OUT_BATCH];
		int64_t seqs[OUT_BATCH];

		if (out_grow(w) < 0) {
			snprintf(w->err.msg, sizeof(w->err.msg), "out of memory");
			w->fatal = 1;
			break;
		}
		w->n_batches = b + 1;
		for (int j = 0; j < OUT_BATCH; j++) {
			snprintf(ids[j], ID_MAX, "b%d-%d", b, j);
			stress_event(&evs[j], ids[j], ids[j], T0 + b);
			ptrs[j] = &evs[j];
		}
		/* Retry the same batch (same ids) until it is acknowledged: a
		 * retry after an unknown outcome is answered as a replay. */
		while (!atomic_load(w->stop)) {
			memd_append a = { .struct_size = sizeof(a), .n_events = OUT_BATCH,
					  .events = ptrs, .now_us = T0 + b };
			memd_append_result res = { .struct_size = sizeof(res), .seqs = seqs };
			memd_call call = stress_call();
			memd_error err = { .struct_size = sizeof(err) };
			int64_t t0 = stress_now_us();
			int32_t r = w->s->ops->append(w->s->h, &call, &sc, &a, &res, &err);
			int64_t took = stress_now_us() - t0;

			if (r == 0) {
				w->acked_seq0[b] = seqs[0];
				atomic_fetch_add(&w->n_acked, 1);
				break;
			}
			if (!(err.flags & MEMD_ERROR_RETRYABLE) ||
			    (r != MEMD_EUNAVAIL && r != MEMD_ETIMEDOUT)) {
				w->err = err;
				w->fatal = 1;
				break;
			}
			atomic_fetch_add(&w->retryable_errors, 1);
			if (took > w->slowest_failure_us)
				w->slowest_failure_us = took;
			stress_sleep_ms(OUT_RETRY_MS);
		}
	}
	atomic_store(&w->done, 1);
	return NULL;
}

static int out_acks(out_worker *w)
{
	return atomic_load(&w->n_acked);
}

static int out_failures(out_worker *w)
{
	return atomic_load(&w->retryable_errors);
}

/* Waits (bounded by OUT_WAIT_S) until every writer t has count(t) >=
 * want[t], or has returned (it failed: the caller's checks say why).
 * Returns 1 if every writer got there, 0 on time-out. */
static int out_wait_all(out_worker *w, int (*count)(out_worker *), const int *want)
{
	int64_t deadline = stress_now_us() + (int64_t)OUT_WAIT_S * 1000000;

	for (;;) {
		int all = 1;
		for (int t = 0; t < OUT_THREADS; t++)
			if (count(&w[t]) < want[t] && !atomic_load(&w[t].done))
				all = 0;
		if (all)
			return 1;
		if (stress_now_us() > deadline)
			return 0;
		stress_sleep_ms(OUT_POLL_MS);
	}
}

static char out_dir[] = "/tmp/memd-outage-XXXXXX";
static int out_started;

static void out_teardown(void)
{
	if (out_started)
		stress_service(getenv("MEMD_STRESS_SERVICE"), "stop", out_dir);
}

Test(stress, outage, .timeout = 150, .fini = out_teardown)
{
	const char *service = getenv("MEMD_STRESS_SERVICE");
	memd_error err = { .struct_size = sizeof(err) };
	char env_file[sizeof(out_dir) + 8];
	out_worker *w;
	pthread_t th[OUT_THREADS];
	atomic_int stop = 0;
	stress_store *s;
	int want[OUT_THREADS], at_resume[OUT_THREADS];
	int started, down_seen, recovered;

	cr_assert(service && service[0], "MEMD_STRESS_SERVICE is not set");
	cr_assert_not_null(mkdtemp(out_dir));
	cr_assert_eq(stress_service(service, "start", out_dir), 0,
		     "the private %s server did not start", service);
	out_started = 1;
	snprintf(env_file, sizeof(env_file), "%s/env", out_dir);
	cr_assert_eq(stress_load_env(env_file), 0);
	s = stress_open(NULL, "outage", "connect_timeout_s: 2", &err);
	cr_assert_not_null(s, "open: %s", err.msg);
	w = calloc(OUT_THREADS, sizeof(*w));
	cr_assert_not_null(w);
	for (int t = 0; t < OUT_THREADS; t++) {
		char session[16];
		memd_scope sc;
		snprintf(session, sizeof(session), "o%d", t);
		sc = stress_scope(APP, USER, session);
		cr_assert_eq(stress_session_ensure(s, &sc, &err), 0, "%s", err.msg);
		w[t].s = s;
		w[t].thread = t;
		w[t].stop = &stop;
		cr_assert_eq(pthread_create(&th[t], NULL, out_main, &w[t]), 0);
	}

	/* 1. Load before the outage: every writer has acknowledged writes. */
	for (int t = 0; t < OUT_THREADS; t++)
		want[t] = OUT_ACKS_BEFORE;
	started = out_wait_all(w, out_acks, want);

	/* 2. The outage, while the writers are writing: it lasts until every
	 * writer has seen a call fail. */
	down_seen = 0;
	if (started) {
		cr_assert_eq(stress_service(service, "halt", out_dir), 0,
			     "could not stop the server");
		for (int t = 0; t < OUT_THREADS; t++)
			want[t] = atomic_load(&w[t].retryable_errors) + 1;
		down_seen = out_wait_all(w, out_failures, want);
		cr_assert_eq(stress_service(service, "resume", out_dir), 0,
			     "could not restart the server");
	}

	/* 3. Recovery without a new instance: every writer gets acks after
	 * the restart (nothing could be acknowledged while the server was
	 * down, so every ack counted from here came after it). */
	for (int t = 0; t < OUT_THREADS; t++) {
		at_resume[t] = atomic_load(&w[t].n_acked);
		want[t] = at_resume[t] + OUT_AFTER_ACKS;
	}
	recovered = started && out_wait_all(w, out_acks, want);
	atomic_store(&stop, 1);
	for (int t = 0; t < OUT_THREADS; t++)
		pthread_join(th[t], NULL);

	for (int t = 0; t < OUT_THREADS; t++) {
		cr_assert_not(w[t].fatal, "writer %d: a non-retryable error: %s", t, w[t].err.msg);
		cr_assert_lt(w[t].slowest_failure_us, OUT_FAIL_FAST_US,
			     "a failing call took %lld us", (long long)w[t].slowest_failure_us);
	}
	cr_assert(started, "the writers did not get %d acks each within %d s before the outage",
		  OUT_ACKS_BEFORE, OUT_WAIT_S);
	cr_assert(down_seen, "not every writer saw a call fail within %d s of the server's stop",
		  OUT_WAIT_S);
	for (int t = 0; t < OUT_THREADS; t++)
		cr_assert_geq(atomic_load(&w[t].n_acked), at_resume[t] + OUT_AFTER_ACKS,
			      "writer %d did not recover within %d s: %d acks before the restart, "
			      "%d after", t, OUT_WAIT_S, at_resume[t],
			      atomic_load(&w[t].n_acked) - at_resume[t]);
	cr_assert(recovered);

	/* Every acknowledged batch whole at its seqs, no partial batch,
	 * gapless seqs. */
	for (int t = 0; t < OUT_THREADS; t++) {
		char session[16];
		memd_scope sc;
		stress_evs evs = { 0 };
		snprintf(session, sizeof(session), "o%d", t);
		sc = stress_scope(APP, USER, session);
		cr_assert_eq(stress_events_all(s, &sc, &evs, &err), 0, "%s", err.msg);
		cr_assert_eq(evs.n % OUT_BATCH, 0, "writer %d: %zu events: a partial batch", t,
			     evs.n);
		for (size_t i = 0; i < evs.n; i++) {
			int b = -1, j = -1;
			cr_assert_eq(evs.v[i].seq, (int64_t)i + 1, "seq gap");
			cr_assert_eq(sscanf(evs.v[i].id, "b%d-%d", &b, &j), 2);
			cr_assert_eq(j, (int)(i % OUT_BATCH), "batch %d split at seq %lld", b,
				     (long long)evs.v[i].seq);
			cr_assert(b >= 0 && b < w[t].n_batches, "batch %d was never written", b);
			if (j == 0 && w[t].acked_seq0[b])
				cr_assert_eq(w[t].acked_seq0[b], evs.v[i].seq,
					     "batch %d acknowledged at seq %lld, stored at %lld", b,
					     (long long)w[t].acked_seq0[b], (long long)evs.v[i].seq);
		}
		for (int b = 0; b < w[t].n_batches; b++)
			if (w[t].acked_seq0[b])
				cr_assert_leq(w[t].acked_seq0[b] + OUT_BATCH - 1, (int64_t)evs.n,
					      "acknowledged batch %d of writer %d is lost", b, t);
		stress_evs_clear(&evs);
		free(w[t].acked_seq0);
	}
	free(w);
	stress_close(s);
}
