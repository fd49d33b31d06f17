/* SPDX-License-Identifier: MIT */
/*
 * A server-backed store's change feed under out-of-order commits (the
 * store is $MEMD_STRESS_PLUGIN; this file is built once per store, with
 * that store's part: pg_feed_order.c or mysql_feed_order.c, see
 * feed_order.h).
 *
 * stalled_commit_is_never_skipped: a slow append takes its feed position
 * and then stalls before COMMIT (a trigger sleeps inside its INSERT); once
 * the server shows it sleeping there, a second store instance (as a
 * second memd process) appends to another session, while a reader tails
 * the feed. The reader must never move past the slow append's position
 * before it commits: it sees both events, the slow one first. With
 * positions from a plain sequence or AUTO_INCREMENT this fails (the fast
 * event commits first at a higher position, the reader's cursor passes
 * it, and the slow event is skipped forever).
 *
 * delete_record_follows_the_events: a session is deleted while appends
 * and a reader run: the reader sees every event that survives and the
 * DELETE record after the session's events, never an event of the
 * deleted session after it. The appenders write until they are told to
 * stop; the delete comes once both have acknowledged appends, and the
 * other session's appender goes on until it has more after the delete
 * (each wait bounded by WAIT_S), so the delete always falls amid appends.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "feed_order.h"
#include "stress_util.h"

#define APP "order"
#define USER "u"
#define T0 1700000000000000LL
#define POLL_MS 10
#define PAGE 100
#define WAIT_S 30              /* bound on every wait for a condition */
#define DEL_ACKS_BEFORE 5      /* acks each appender has before the delete */
#define DEL_ACKS_AFTER 5       /* acks the kept session gets after the delete */

typedef struct appender {
	stress_store *s;
	const char *session, *id;
	int64_t started_us, ended_us;
	int32_t rc;
	memd_error err;
	atomic_int done;       /* the append returned */
} appender;

static void *append_main(void *arg)
{
	appender *a = arg;
	memd_scope sc = stress_scope(APP, USER, a->session);
	memd_event ev;
	const memd_event *ptr = &ev;
	int64_t seq = 0;
	memd_append ap = { .struct_size = sizeof(ap), .n_events = 1, .events = &ptr,
			   .now_us = T0 };
	memd_append_result res = { .struct_size = sizeof(res), .seqs = &seq };
	memd_call call = stress_call();

	stress_event(&ev, a->id, a->id, T0);
	a->started_us = stress_now_us();
	a->rc = a->s->ops->append(a->s->h, &call, &sc, &ap, &res, &a->err);
	a->ended_us = stress_now_us();
	atomic_store(&a->done, 1);
	return NULL;
}

typedef struct reader {
	stress_store *s;
	stress_recs seen;
	volatile int stop;
	int32_t rc;
	memd_error err;
} reader;

static void *reader_main(void *arg)
{
	reader *x = arg;
	int64_t cursor = 0;

	for (;;) {
		int stopping = x->stop;
		size_t got = 0;

		x->rc = stress_feed_read(x->s, cursor, PAGE, &x->seen, &got, &x->err);
		if (x->rc < 0)
			return NULL;
		if (got)
			cursor = x->seen.v[x->seen.n - 1].position;
		else if (stopping)
			return NULL;
		else
			stress_sleep_ms(POLL_MS);
	}
}

/* Two instances of the store over namespace name (as two memd
 * processes), with extra_yaml (may be NULL), and sessions s1 and s2. */
static void open_two(const char *name, const char *extra_yaml, const memd_scope *s1,
		     const memd_scope *s2, stress_store **ret_a, stress_store **ret_b)
{
	memd_error err = { .struct_size = sizeof(err) };
	stress_store *a, *b;

	cr_assert_not_null(name);
	a = stress_open(NULL, name, extra_yaml, &err);
	cr_assert_not_null(a, "open: %s", err.msg);
	b = stress_open(NULL, name, extra_yaml, &err);
	cr_assert_not_null(b, "open: %s", err.msg);
	cr_assert_eq(stress_session_ensure(a, s1, &err), 0, "%s", err.msg);
	cr_assert_eq(stress_session_ensure(a, s2, &err), 0, "%s", err.msg);
	*ret_a = a;
	*ret_b = b;
}

Test(feed_order, stalled_commit_is_never_skipped, .timeout = 60)
{
	char *name = stress_unique_name("order");
	stress_store *a, *b;
	appender slow, fast;
	reader rd = { 0 };
	pthread_t ts, tf, tr;
	memd_scope s1 = stress_scope(APP, USER, "s1"), s2 = stress_scope(APP, USER, "s2");
	int64_t deadline;
	int stalled;

	/* No group commit, so the two appends are separate transactions. */
	open_two(name, "group_commit: 1", &s1, &s2, &a, &b);
	feed_order_install_stall(name);

	rd.s = a;
	cr_assert_eq(pthread_create(&tr, NULL, reader_main, &rd), 0);
	slow = (appender){ .s = a, .session = "s1", .id = "slow-1" };
	fast = (appender){ .s = b, .session = "s2", .id = "fast-1" };
	cr_assert_eq(pthread_create(&ts, NULL, append_main, &slow), 0);
	/* The fast append starts once the slow one holds its position: the
	 * server shows its insert inside the stall. */
	deadline = stress_now_us() + (int64_t)WAIT_S * 1000000;
	while (!(stalled = feed_order_stalling(name)) && !atomic_load(&slow.done) &&
	       stress_now_us() < deadline)
		stress_sleep_ms(POLL_MS);
	cr_assert_eq(pthread_create(&tf, NULL, append_main, &fast), 0);
	pthread_join(ts, NULL);
	pthread_join(tf, NULL);
	rd.stop = 1;
	pthread_join(tr, NULL);

	cr_assert_eq(slow.rc, 0, "slow append: %s", slow.err.msg);
	cr_assert_eq(fast.rc, 0, "fast append: %s", fast.err.msg);
	cr_assert(stalled, "the slow append was never seen inside its stall (it %s)",
		  atomic_load(&slow.done) ? "returned first" : "did not get there in time");
	cr_assert_eq(rd.rc, 0, "feed: %s", rd.err.msg);
	/* The race really happened: the fast append ran while the slow one
	 * held its position. */
	cr_assert_lt(fast.started_us, slow.ended_us, "the appends did not overlap");
	cr_assert_eq(rd.seen.n, 2, "the reader saw %zu records, not both events (one was "
		     "skipped)", rd.seen.n);
	cr_assert_str_eq(rd.seen.v[0].id, "slow-1", "the fast event came first in the feed");
	cr_assert_str_eq(rd.seen.v[1].id, "fast-1");
	cr_assert_lt(rd.seen.v[0].position, rd.seen.v[1].position);

	stress_recs_clear(&rd.seen);
	stress_close(b);
	stress_close(a);
	free(name);
}

typedef struct churner {
	stress_store *s;
	const char *session;
	atomic_int *stop;
	atomic_int n_acked;
	atomic_int gone;       /* an append found the session deleted */
	atomic_int done;       /* the appender returned */
	int32_t rc;
	memd_error err;
} churner;

/* Append single events to a session ("<session>-<k>") until told to stop,
 * the session is gone or an append fails. */
static void *churn_main(void *arg)
{
	churner *c = arg;
	memd_scope sc = stress_scope(APP, USER, c->session);

	for (int k = 0; !atomic_load(c->stop); k++) {
		char id[32];
		memd_event ev;
		const memd_event *ptr = &ev;
		int64_t seq = 0;
		memd_append ap = { .struct_size = sizeof(ap), .n_events = 1, .events = &ptr,
				   .now_us = T0 + k };
		memd_append_result res = { .struct_size = sizeof(res), .seqs = &seq };
		memd_call call = stress_call();

		snprintf(id, sizeof(id), "%s-%d", c->session, k);
		stress_event(&ev, id, id, T0 + k);
		c->rc = c->s->ops->append(c->s->h, &call, &sc, &ap, &res, &c->err);
		if (c->rc == MEMD_ENOTFOUND) {
			c->rc = 0; /* the session was deleted under us */
			atomic_store(&c->gone, 1);
			break;
		}
		if (c->rc < 0)
			break;
		atomic_fetch_add(&c->n_acked, 1);
	}
	atomic_store(&c->done, 1);
	return NULL;
}

/* Waits (bounded by WAIT_S) until c has want acks or has returned;
 * returns 1 if it has them. */
static int churn_wait_acks(churner *c, int want)
{
	int64_t deadline = stress_now_us() + (int64_t)WAIT_S * 1000000;

	while (atomic_load(&c->n_acked) < want && !atomic_load(&c->done) &&
	       stress_now_us() < deadline)
		stress_sleep_ms(POLL_MS);
	return atomic_load(&c->n_acked) >= want;
}

Test(feed_order, delete_record_follows_the_events, .timeout = 60)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *name = stress_unique_name("del");
	stress_store *a, *b;
	churner keep, gone;
	reader rd = { 0 };
	pthread_t tk, tg, tr;
	memd_scope sk = stress_scope(APP, USER, "keep"), sg = stress_scope(APP, USER, "gone");
	memd_call call = stress_call();
	int64_t delete_pos = 0, deadline;
	int kept = 0, started, kept_after = 0, at_delete = 0;
	atomic_int stop = 0;

	open_two(name, NULL, &sk, &sg, &a, &b);

	rd.s = a;
	cr_assert_eq(pthread_create(&tr, NULL, reader_main, &rd), 0);
	memset(&keep, 0, sizeof(keep));
	memset(&gone, 0, sizeof(gone));
	keep.s = a;
	keep.session = "keep";
	keep.stop = &stop;
	gone.s = b;
	gone.session = "gone";
	gone.stop = &stop;
	cr_assert_eq(pthread_create(&tk, NULL, churn_main, &keep), 0);
	cr_assert_eq(pthread_create(&tg, NULL, churn_main, &gone), 0);
	/* The delete comes amid the appends: once both have acks. */
	started = churn_wait_acks(&keep, DEL_ACKS_BEFORE) && churn_wait_acks(&gone, DEL_ACKS_BEFORE);
	if (started) {
		cr_assert_eq(a->ops->session_delete(a->h, &call, &sg, &err), 0, "delete: %s",
			     err.msg);
		/* The kept session's appends go on after the delete; the
		 * deleted one's appender finds its session gone. */
		at_delete = atomic_load(&keep.n_acked);
		kept_after = churn_wait_acks(&keep, at_delete + DEL_ACKS_AFTER);
		deadline = stress_now_us() + (int64_t)WAIT_S * 1000000;
		while (!atomic_load(&gone.done) && stress_now_us() < deadline)
			stress_sleep_ms(POLL_MS);
	}
	atomic_store(&stop, 1);
	pthread_join(tk, NULL);
	pthread_join(tg, NULL);
	rd.stop = 1;
	pthread_join(tr, NULL);

	cr_assert_eq(keep.rc, 0, "append: %s", keep.err.msg);
	cr_assert_eq(gone.rc, 0, "append: %s", gone.err.msg);
	cr_assert_eq(rd.rc, 0, "feed: %s", rd.err.msg);
	cr_assert(started, "the appenders did not get %d acks each within %d s", DEL_ACKS_BEFORE,
		  WAIT_S);
	cr_assert(kept_after, "the kept session got %d acks after the delete within %d s, not %d",
		  atomic_load(&keep.n_acked) - at_delete, WAIT_S, DEL_ACKS_AFTER);
	cr_assert(atomic_load(&gone.gone), "appends to the deleted session did not fail with "
		  "not found within %d s", WAIT_S);
	for (size_t i = 0; i < rd.seen.n; i++) {
		const stress_rec *r = &rd.seen.v[i];
		if (i > 0)
			cr_assert_gt(r->position, rd.seen.v[i - 1].position, "feed went backwards");
		if (r->kind == MEMD_FEED_DELETE_SESSION) {
			cr_assert_str_eq(r->session, "gone");
			cr_assert_eq(delete_pos, 0, "two DELETE records");
			delete_pos = r->position;
		} else if (strcmp(r->session, "keep") == 0) {
			kept++;
		} else {
			/* An event of the deleted session is only ever seen before
			 * its DELETE record; the ones appended after the delete
			 * failed. */
			cr_assert_eq(delete_pos, 0, "event %s of the deleted session after its "
				     "DELETE record", r->id);
		}
	}
	cr_assert_gt(delete_pos, 0, "the reader never saw the DELETE record");
	cr_assert_eq(kept, atomic_load(&keep.n_acked), "the reader saw %d of %d events of the "
		     "kept session", kept, atomic_load(&keep.n_acked));

	stress_recs_clear(&rd.seen);
	stress_close(b);
	stress_close(a);
	free(name);
}
