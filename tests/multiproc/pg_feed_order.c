/* SPDX-License-Identifier: MIT */
/*
 * The PostgreSQL store's change feed under out-of-order commits: a slow
 * append takes its feed position and then stalls before COMMIT (a trigger
 * sleeps inside its INSERT), while a second store instance appends to
 * another session and a reader tails the feed. The reader must never move
 * past the slow append's position before it commits: it sees both events,
 * the slow one first. With positions from a plain sequence this fails
 * (the fast event commits first at a higher position, the reader's cursor
 * passes it, and the slow event is skipped forever).
 */
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "stress_util.h"

#define APP "order"
#define USER "u"
#define T0 1700000000000000LL
#define STALL_S "1.5"          /* how long the slow append sits on its position */
#define HEAD_START_MS 300      /* the fast append starts this long after the slow one */
#define POLL_MS 10
#define PAGE 100

static const char SQL_STALL_FN[] =
	"CREATE FUNCTION memd_test_stall() RETURNS trigger LANGUAGE plpgsql AS $f$"
	" BEGIN IF NEW.id LIKE 'slow%' THEN PERFORM pg_sleep(" STALL_S "); END IF;"
	" RETURN NEW; END $f$";
static const char SQL_STALL_TRIGGER[] =
	"CREATE TRIGGER memd_test_stall BEFORE INSERT ON events"
	" FOR EACH ROW EXECUTE FUNCTION memd_test_stall()";

/* Install the stalling trigger in the test's schema over a raw connection. */
static void install_trigger(const char *schema)
{
	const char *keys[] = { "dbname", "password", NULL };
	const char *vals[] = { getenv("MEMD_PG_DSN"), getenv("MEMD_PG_PASSWORD"), NULL };
	const char *p[1] = { schema };
	PGconn *c = PQconnectdbParams(keys, vals, 1);
	PGresult *r;

	cr_assert_eq(PQstatus(c), CONNECTION_OK, "connect: %s", PQerrorMessage(c));
	r = PQexecParams(c, "SELECT pg_catalog.set_config('search_path',"
			    " pg_catalog.quote_ident($1::text), false)", 1, NULL, p, NULL, NULL, 0);
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
	PQclear(r);
	r = PQexec(c, SQL_STALL_FN);
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
	PQclear(r);
	r = PQexec(c, SQL_STALL_TRIGGER);
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
}

typedef struct appender {
	stress_store *s;
	const char *session, *id;
	int64_t started_us, ended_us;
	int32_t rc;
	memd_error err;
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

Test(feed_order, stalled_commit_is_never_skipped, .timeout = 60)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *name = stress_unique_name("order");
	stress_store *a, *b;
	appender slow, fast;
	reader rd = { 0 };
	pthread_t ts, tf, tr;
	memd_scope s1 = stress_scope(APP, USER, "s1"), s2 = stress_scope(APP, USER, "s2");

	cr_assert_not_null(name);
	/* Two instances, as two memd processes; no group commit, so the two
	 * appends are separate transactions. */
	a = stress_open(NULL, name, "group_commit: 1", &err);
	cr_assert_not_null(a, "open: %s", err.msg);
	b = stress_open(NULL, name, "group_commit: 1", &err);
	cr_assert_not_null(b, "open: %s", err.msg);
	install_trigger(name);
	cr_assert_eq(stress_session_ensure(a, &s1, &err), 0, "%s", err.msg);
	cr_assert_eq(stress_session_ensure(a, &s2, &err), 0, "%s", err.msg);

	rd.s = a;
	cr_assert_eq(pthread_create(&tr, NULL, reader_main, &rd), 0);
	slow = (appender){ .s = a, .session = "s1", .id = "slow-1" };
	fast = (appender){ .s = b, .session = "s2", .id = "fast-1" };
	cr_assert_eq(pthread_create(&ts, NULL, append_main, &slow), 0);
	stress_sleep_ms(HEAD_START_MS);
	cr_assert_eq(pthread_create(&tf, NULL, append_main, &fast), 0);
	pthread_join(ts, NULL);
	pthread_join(tf, NULL);
	rd.stop = 1;
	pthread_join(tr, NULL);

	cr_assert_eq(slow.rc, 0, "slow append: %s", slow.err.msg);
	cr_assert_eq(fast.rc, 0, "fast append: %s", fast.err.msg);
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
