/* SPDX-License-Identifier: MIT */
/*
 * The after-append worker (host/util/worker.c): runs are single-flight per
 * session (never two at once for one session, while different sessions
 * run in parallel), a submit during a run gets exactly one more run after
 * it, bursts coalesce, and worker_free finishes what is queued. An
 * exclusive run (a strategy's finalize) waits for the session's run in
 * progress, never overlaps one, and a submit meanwhile runs after it.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "util/worker.h"

#define SESSIONS 3
#define SUBMITS 200
#define RUN_NS 2000000L
/* How long the first runs wait for each other (see job). */
#define MEET_NS 2000000000LL
/* How long a run waits for the test to open the gate (see job). */
#define GATE_NS 30000000000LL
#define NS_PER_SEC 1000000000LL

typedef struct state {
	atomic_int running[SESSIONS];
	atomic_int runs[SESSIONS];
	atomic_int overlap;
	atomic_int max_parallel;
	atomic_int parallel;
	atomic_int met;
	atomic_int gate;     /* runs go on once the test has submitted its burst */
} state;

static long long mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

static void job(void *ud, const memd_scope *sc)
{
	state *s = ud;
	int k = sc->session[0] - 'a';
	cr_assert(k >= 0 && k < SESSIONS && strcmp(sc->app, "app") == 0 && strcmp(sc->user, "u") == 0);
	if (atomic_fetch_add(&s->running[k], 1) != 0)
		atomic_fetch_add(&s->overlap, 1);
	int p = atomic_fetch_add(&s->parallel, 1) + 1;
	int seen = atomic_load(&s->max_parallel);
	while (p > seen && !atomic_compare_exchange_weak(&s->max_parallel, &seen, p))
		;
	/* Until runs have overlapped once, a run waits (a bounded time) for
	 * the other worker threads to join it, so a loaded machine's
	 * scheduling cannot hide parallelism; a serial worker never gets
	 * there and the test sees max_parallel 1. */
	for (long long until = mono_ns() + MEET_NS;
	     !atomic_load(&s->met) && mono_ns() < until;) {
		if (atomic_load(&s->parallel) >= WORKER_THREADS_DEFAULT)
			atomic_store(&s->met, 1);
		else
			sched_yield();
	}
	atomic_store(&s->met, 1);
	/* The burst's runs stay in progress until every submit is in, so
	 * the burst coalesces however the test's thread is scheduled. */
	for (long long until = mono_ns() + GATE_NS; !atomic_load(&s->gate) && mono_ns() < until;)
		sched_yield();
	struct timespec ts = { 0, RUN_NS };
	nanosleep(&ts, NULL);
	atomic_fetch_sub(&s->parallel, 1);
	atomic_fetch_sub(&s->running[k], 1);
	atomic_fetch_add(&s->runs[k], 1);
}

static memd_scope scope_of(const char *sid)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = "app", .user = "u", .session = sid };
	return sc;
}

Test(worker, single_flight_per_session_and_coalescing)
{
	static state s;
	worker *w = NULL;
	memd_error err = { 0 };
	static const char *const sids[SESSIONS] = { "a", "b", "c" };

	cr_assert_eq(worker_new(WORKER_THREADS_DEFAULT, job, &s, &w, &err), 0, "%s", err.msg);
	for (int i = 0; i < SUBMITS; i++) {
		memd_scope sc = scope_of(sids[i % SESSIONS]);
		cr_assert_eq(worker_submit(w, &sc), 0);
	}
	atomic_store(&s.gate, 1);
	worker_drain(w);
	cr_assert_eq(worker_pending(w), 0);
	cr_assert_eq(atomic_load(&s.overlap), 0, "two runs for one session overlapped");
	for (int k = 0; k < SESSIONS; k++) {
		int runs = atomic_load(&s.runs[k]);
		cr_assert(runs >= 1 && runs < SUBMITS / SESSIONS, "session %d ran %d times", k, runs);
	}
	cr_assert_eq(atomic_load(&s.max_parallel), WORKER_THREADS_DEFAULT,
		     "different sessions run in parallel");

	/* A submit while a run is in progress gets one more run after it. */
	int before = atomic_load(&s.runs[0]);
	memd_scope a = scope_of("a");
	cr_assert_eq(worker_submit(w, &a), 0);
	while (atomic_load(&s.running[0]) == 0 && atomic_load(&s.runs[0]) == before)
		;
	cr_assert_eq(worker_submit(w, &a), 0);
	worker_drain(w);
	cr_assert_eq(atomic_load(&s.runs[0]), before + 2);

	/* worker_free finishes what is queued. */
	before = atomic_load(&s.runs[1]);
	memd_scope b = scope_of("b");
	cr_assert_eq(worker_submit(w, &b), 0);
	worker_free(w);
	cr_assert_eq(atomic_load(&s.runs[1]), before + 1);
}

Test(worker, bad_arguments)
{
	worker *w = NULL;
	memd_error err = { 0 };
	cr_assert_eq(worker_new(0, job, NULL, &w, &err), MEMD_EINVAL);
	cr_assert_null(w);
	worker_free(NULL);
}

/* ---- worker_run_exclusive ---- */

typedef struct excl_state {
	atomic_int running;   /* runs of session "a" in progress (worker or exclusive) */
	atomic_int overlap;
	atomic_int runs;      /* worker runs finished */
	atomic_int excl_ran;  /* the exclusive run has started */
	atomic_int submitted; /* the test submitted during the exclusive run */
	worker *w;
} excl_state;

static void enter(excl_state *s)
{
	if (atomic_fetch_add(&s->running, 1) != 0)
		atomic_fetch_add(&s->overlap, 1);
}

/* A worker run: the first waits (bounded, MEET_NS) for the exclusive run
 * to start, which it must not while this run is in progress. */
static void excl_job(void *ud, const memd_scope *sc)
{
	excl_state *s = ud;
	(void)sc;
	enter(s);
	if (atomic_load(&s->runs) == 0)
		for (long long until = mono_ns() + MEET_NS;
		     !atomic_load(&s->excl_ran) && mono_ns() < until;)
			sched_yield();
	atomic_fetch_sub(&s->running, 1);
	atomic_fetch_add(&s->runs, 1);
}

/* The exclusive run: stays in progress until the test has submitted. */
static void excl_fn(void *ud, const memd_scope *sc)
{
	excl_state *s = ud;
	(void)sc;
	enter(s);
	atomic_store(&s->excl_ran, 1);
	for (long long until = mono_ns() + GATE_NS; !atomic_load(&s->submitted) && mono_ns() < until;)
		sched_yield();
	atomic_fetch_sub(&s->running, 1);
}

static void *excl_thread(void *arg)
{
	excl_state *s = arg;
	memd_scope a = scope_of("a");
	intptr_t r = worker_run_exclusive(s->w, &a, excl_fn, s);
	return (void *)r;
}

Test(worker, exclusive_run_waits_and_is_never_overlapped, .timeout = 60)
{
	static excl_state s;
	memd_error err = { 0 };
	memd_scope a = scope_of("a");
	pthread_t t;
	void *rv;

	cr_assert_eq(worker_new(WORKER_THREADS_DEFAULT, excl_job, &s, &s.w, &err), 0, "%s", err.msg);
	cr_assert_eq(worker_submit(s.w, &a), 0);
	for (long long until = mono_ns() + GATE_NS; !atomic_load(&s.running) && mono_ns() < until;)
		sched_yield();
	cr_assert_eq(atomic_load(&s.running), 1, "the worker run did not start");
	cr_assert_eq(pthread_create(&t, NULL, excl_thread, &s), 0);
	for (long long until = mono_ns() + GATE_NS; !atomic_load(&s.excl_ran) && mono_ns() < until;)
		sched_yield();
	cr_assert_eq(atomic_load(&s.excl_ran), 1, "the exclusive run never started");
	cr_assert_eq(atomic_load(&s.runs), 1, "the exclusive run started before the worker's ended");
	/* A submit during the exclusive run: one more worker run, after it. */
	cr_assert_eq(worker_submit(s.w, &a), 0);
	cr_assert_eq(worker_pending(s.w), 1);
	atomic_store(&s.submitted, 1);
	cr_assert_eq(pthread_join(t, &rv), 0);
	cr_assert_eq((intptr_t)rv, 0);
	worker_drain(s.w);
	cr_assert_eq(atomic_load(&s.runs), 2);
	cr_assert_eq(atomic_load(&s.overlap), 0, "a run overlapped the exclusive run");
	worker_free(s.w);
}
