/* SPDX-License-Identifier: MIT */
/*
 * The tasks part of the session-store conformance suite (since 1.5): the
 * "Tasks" paragraph at the top of api/memd/store.h and the contracts of
 * memd_task, memd_task_query and task_put / task_get / task_list /
 * task_delete, run unchanged against every store plugin (see
 * store_harness.h). A store without the task ops is skipped unless
 * MEMD_CONFORMANCE_TASKS=1.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_harness.h"

#define APP "tapp"
#define APP2 "tapp2"
#define USER "tu"
#define USER2 "tu2"
#define T0 1700000000000000LL /* a plausible unix time in us */
#define SUITE_TIMEOUT_S 180
#define LIST_ALL 1000u        /* a limit larger than any listing a test makes */
#define IDS_MAX 4096          /* room for a listing's ids */
#define JSON_MAX 256          /* room for a test task's JSON */
#define RACE_THREADS 4
#define RACE_ROUNDS 8

static conf_store *st;

static void setup(void)
{
	st = conf_open();
	conf_require_tasks(st);
}

static void teardown(void)
{
	conf_close(st);
	st = NULL;
}

TestSuite(tasks, .init = setup, .fini = teardown, .timeout = SUITE_TIMEOUT_S);

/* ---- helpers ---------------------------------------------------------- */

/* A task of app in context ctx with the given state; task_json is made in
 * buf (JSON_MAX bytes) from the same values plus note. */
static memd_task task(const char *app, const char *id, const char *ctx, const char *user,
		      const char *state, const char *note, char *buf)
{
	memd_task t = { .struct_size = sizeof(t), .app = app, .id = id, .context_id = ctx,
			.user = user, .state = state, .task_json = buf };

	snprintf(buf, JSON_MAX,
		 "{\"kind\":\"task\",\"id\":\"%s\",\"contextId\":\"%s\","
		 "\"status\":{\"state\":\"%s\"},\"metadata\":{\"note\":\"%s\"}}",
		 id, ctx, state, note);
	return t;
}

static conf_task put_ok(const memd_task *t, uint32_t flags, int64_t expected_version,
			int64_t now_us)
{
	conf_task got = { 0 };
	int32_t r = conf_task_put(st, t, flags, expected_version, now_us, &got);
	cr_assert_eq(r, 0, "task_put(%s/%s state %s): %s", t->app, t->id, t->state,
		     st->err.msg);
	return got;
}

/* Put a task (unconditionally) and drop the answer. */
static void put_simple(const char *app, const char *id, const char *ctx, const char *user,
		       const char *state, int64_t now_us)
{
	char buf[JSON_MAX];
	memd_task t = task(app, id, ctx, user, state, "", buf);
	conf_task got = put_ok(&t, 0, 0, now_us);
	conf_task_clear(&got);
}

static conf_task get_ok(const char *app, const char *id)
{
	conf_task got = { 0 };
	int32_t r = conf_task_get(st, app, id, &got);
	cr_assert_eq(r, 0, "task_get(%s/%s): %s", app, id, st->err.msg);
	return got;
}

static void assert_absent(const char *app, const char *id)
{
	int32_t r = conf_task_get(st, app, id, NULL);
	cr_assert_eq(r, MEMD_ENOTFOUND, "task_get(%s/%s) gave %d, expected ENOTFOUND", app, id,
		     r);
}

static int64_t version_of(const char *app, const char *id)
{
	conf_task t = get_ok(app, id);
	int64_t v = t.t.version;
	conf_task_clear(&t);
	return v;
}

/* Every field of got equals t's, and the store-kept ones are as given. */
static void assert_task(const conf_task *got, const memd_task *t, int64_t created_us,
			int64_t updated_us, int64_t version)
{
	cr_assert_str_eq(got->t.app, t->app);
	cr_assert_str_eq(got->t.id, t->id);
	cr_assert_str_eq(got->t.context_id, t->context_id);
	conf_assert_str_or_null(got->t.user, t->user, "user");
	cr_assert_str_eq(got->t.state, t->state);
	cr_assert(conf_json_equal(got->t.task_json, t->task_json), "task_json %s, expected %s",
		  got->t.task_json, t->task_json);
	cr_assert_eq(got->t.created_us, created_us, "created_us %lld, expected %lld",
		     (long long)got->t.created_us, (long long)created_us);
	cr_assert_eq(got->t.updated_us, updated_us, "updated_us %lld, expected %lld",
		     (long long)got->t.updated_us, (long long)updated_us);
	cr_assert_eq(got->t.version, version, "version %lld, expected %lld",
		     (long long)got->t.version, (long long)version);
}

static const char *ids_of(const conf_tasks *l, char *buf, size_t cap)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < l->n; i++) {
		int w = snprintf(buf + used, cap - used, "%s%s", i ? "," : "", l->v[i].t.id);
		cr_assert(w >= 0 && (size_t)w < cap - used, "id list too long");
		used += (size_t)w;
	}
	return buf;
}

static void assert_list(memd_task_query *q, const char *want, const char *what)
{
	conf_tasks l = { 0 };
	char buf[IDS_MAX];
	int32_t r;

	if (!q->limit)
		q->limit = LIST_ALL;
	r = conf_task_list(st, q, &l);
	cr_assert_eq(r, 0, "%s: task_list: %s", what, st->err.msg);
	cr_assert_str_eq(ids_of(&l, buf, sizeof(buf)), want, "%s: listed %s, expected %s", what,
			 buf, want);
	for (size_t i = 0; i < l.n; i++)
		cr_assert_str_eq(l.v[i].t.app, q->app, "%s: app", what);
	conf_tasks_clear(&l);
}

/* ---- put and get ------------------------------------------------------ */

Test(tasks, put_inserts_then_replaces_keeping_created_us)
{
	char b1[JSON_MAX], b2[JSON_MAX];
	memd_task t = task(APP, "task-1", "ctx-1", USER, "submitted", "first", b1);
	conf_task got;

	got = put_ok(&t, 0, 0, T0);
	assert_task(&got, &t, T0, T0, 1);
	conf_task_clear(&got);
	got = get_ok(APP, "task-1");
	assert_task(&got, &t, T0, T0, 1);
	conf_task_clear(&got);

	/* Every column but created_us is replaced; the version counts puts. */
	t = task(APP, "task-1", "ctx-2", NULL, "working", "second", b2);
	got = put_ok(&t, 0, 0, T0 + 10);
	assert_task(&got, &t, T0, T0 + 10, 2);
	conf_task_clear(&got);
	got = get_ok(APP, "task-1");
	assert_task(&got, &t, T0, T0 + 10, 2);
	conf_task_clear(&got);

	/* The user can come back; non-terminal states move freely. */
	t = task(APP, "task-1", "ctx-2", USER2, "submitted", "third", b1);
	got = put_ok(&t, 0, 0, T0 + 20);
	assert_task(&got, &t, T0, T0 + 20, 3);
	conf_task_clear(&got);

	/* Apps are separate: the same id elsewhere is another task. */
	assert_absent(APP2, "task-1");
	t = task(APP2, "task-1", "ctx-9", NULL, "working", "other app", b2);
	got = put_ok(&t, 0, 0, T0 + 30);
	assert_task(&got, &t, T0 + 30, T0 + 30, 1);
	conf_task_clear(&got);
	cr_assert_eq(version_of(APP, "task-1"), 3);
	assert_absent(APP, "task-2");
}

Test(tasks, create_only)
{
	char b1[JSON_MAX], b2[JSON_MAX];
	memd_task t = task(APP, "t1", "c1", USER, "submitted", "first", b1);
	memd_task again = task(APP, "t1", "c1", USER, "working", "again", b2);
	conf_task got;

	got = put_ok(&t, MEMD_TASK_CREATE, 0, T0);
	assert_task(&got, &t, T0, T0, 1);
	conf_task_clear(&got);

	cr_assert_eq(conf_task_put(st, &again, MEMD_TASK_CREATE, 0, T0 + 1, NULL),
		     MEMD_ECONFLICT);
	cr_assert(strstr(st->err.msg, "exists") != NULL, "message '%s' does not say it exists",
		  st->err.msg);
	/* Even with the right version, CREATE on a stored task conflicts. */
	cr_assert_eq(conf_task_put(st, &again, MEMD_TASK_CREATE, 1, T0 + 1, NULL),
		     MEMD_ECONFLICT);
	got = get_ok(APP, "t1");
	assert_task(&got, &t, T0, T0, 1);
	conf_task_clear(&got);
}

Test(tasks, expected_version)
{
	char b1[JSON_MAX], b2[JSON_MAX];
	memd_task t = task(APP, "t1", "c1", USER, "submitted", "first", b1);
	memd_task next = task(APP, "t1", "c1", USER, "working", "next", b2);
	conf_task got;

	/* A missing task with a version: ENOTFOUND, nothing written. */
	cr_assert_eq(conf_task_put(st, &t, 0, 1, T0, NULL), MEMD_ENOTFOUND, "gave: %s",
		     st->err.msg);
	assert_absent(APP, "t1");

	got = put_ok(&t, 0, 0, T0);
	conf_task_clear(&got);
	/* A stale or future version: ECONFLICT, nothing written. */
	cr_assert_eq(conf_task_put(st, &next, 0, 2, T0 + 1, NULL), MEMD_ECONFLICT);
	cr_assert_eq(conf_task_put(st, &next, 0, 7, T0 + 1, NULL), MEMD_ECONFLICT);
	got = get_ok(APP, "t1");
	assert_task(&got, &t, T0, T0, 1);
	conf_task_clear(&got);

	got = put_ok(&next, 0, 1, T0 + 2);
	assert_task(&got, &next, T0, T0 + 2, 2);
	conf_task_clear(&got);
	cr_assert_eq(conf_task_put(st, &t, 0, 1, T0 + 3, NULL), MEMD_ECONFLICT);
	got = put_ok(&t, 0, 2, T0 + 3);
	assert_task(&got, &t, T0, T0 + 3, 3);
	conf_task_clear(&got);
}

Test(tasks, terminal_states_are_kept)
{
	static const char *const terminal[] = { "completed", "canceled", "failed", "rejected" };
	static const char *const others[] = { "submitted", "working", "input-required",
					      "auth-required", "unknown" };

	for (size_t i = 0; i < sizeof(terminal) / sizeof(terminal[0]); i++) {
		char id[32], b1[JSON_MAX], b2[JSON_MAX];
		memd_task t, same, other;
		conf_task got;

		/* The id names no state: the message must. */
		snprintf(id, sizeof(id), "term-%zu", i);
		t = task(APP, id, "c1", USER, "working", "start", b1);
		got = put_ok(&t, 0, 0, T0);
		conf_task_clear(&got);
		t = task(APP, id, "c1", USER, terminal[i], "end", b1);
		got = put_ok(&t, 0, 1, T0 + 1);
		assert_task(&got, &t, T0, T0 + 1, 2);
		conf_task_clear(&got);

		/* Leaving it: ECONFLICT naming both states, nothing written. */
		for (size_t j = 0; j < sizeof(others) / sizeof(others[0]); j++) {
			other = task(APP, id, "c1", USER, others[j], "again", b2);
			cr_assert_eq(conf_task_put(st, &other, 0, 0, T0 + 2, NULL),
				     MEMD_ECONFLICT, "%s -> %s was allowed", terminal[i],
				     others[j]);
			cr_assert(strstr(st->err.msg, terminal[i]) != NULL,
				  "message '%s' does not name %s", st->err.msg, terminal[i]);
			cr_assert(strstr(st->err.msg, others[j]) != NULL,
				  "message '%s' does not name %s", st->err.msg, others[j]);
			/* With the right version too. */
			cr_assert_eq(conf_task_put(st, &other, 0, 2, T0 + 2, NULL),
				     MEMD_ECONFLICT);
		}
		for (size_t j = 0; j < sizeof(terminal) / sizeof(terminal[0]); j++) {
			if (j == i)
				continue;
			other = task(APP, id, "c1", USER, terminal[j], "again", b2);
			cr_assert_eq(conf_task_put(st, &other, 0, 0, T0 + 2, NULL),
				     MEMD_ECONFLICT, "%s -> %s was allowed", terminal[i],
				     terminal[j]);
		}
		got = get_ok(APP, id);
		assert_task(&got, &t, T0, T0 + 1, 2);
		conf_task_clear(&got);

		/* The same terminal state again is a put like any other. */
		same = task(APP, id, "c1", USER, terminal[i], "artifact added", b2);
		got = put_ok(&same, 0, 2, T0 + 3);
		assert_task(&got, &same, T0, T0 + 3, 3);
		conf_task_clear(&got);
	}
}

/* ---- list --------------------------------------------------------------- */

/* Tasks of APP (updated_us, id): a(10) b(20) c(20) d(20) e(30) f(40),
 * in contexts and states of their own; one of APP2. */
static void list_fixture(void)
{
	put_simple(APP, "a", "c1", USER, "working", T0 + 10);
	put_simple(APP, "c", "c1", USER, "completed", T0 + 20);
	put_simple(APP, "b", "c2", USER2, "working", T0 + 20);
	put_simple(APP, "d", "c2", NULL, "working", T0 + 20);
	put_simple(APP, "e", "c1", USER2, "submitted", T0 + 30);
	put_simple(APP, "f", "c3", USER, "working", T0 + 40);
	put_simple(APP2, "z", "c1", USER, "working", T0 + 50);
}

Test(tasks, list_order_filters_and_keyset)
{
	list_fixture();
	assert_list(&(memd_task_query){ .app = APP }, "f,e,d,c,b,a", "everything");
	assert_list(&(memd_task_query){ .app = APP2 }, "z", "another app");
	assert_list(&(memd_task_query){ .app = "noapp" }, "", "a missing app");
	assert_list(&(memd_task_query){ .app = APP, .context_id = "c1" }, "e,c,a", "context c1");
	assert_list(&(memd_task_query){ .app = APP, .context_id = "c9" }, "", "context c9");
	assert_list(&(memd_task_query){ .app = APP, .state = "working" }, "f,d,b,a", "working");
	assert_list(&(memd_task_query){ .app = APP, .user = USER }, "f,c,a", "user");
	assert_list(&(memd_task_query){ .app = APP, .user = USER2 }, "e,b", "user2");
	assert_list(&(memd_task_query){ .app = APP, .context_id = "c2", .state = "working" },
		    "d,b", "c2 working");
	assert_list(&(memd_task_query){ .app = APP, .context_id = "c1", .user = USER },
		    "c,a", "c1 user");
	assert_list(&(memd_task_query){ .app = APP, .context_id = "c1", .user = USER,
					.state = "working" },
		    "a", "c1 user working");
	assert_list(&(memd_task_query){ .app = APP, .limit = 2 }, "f,e", "limit 2");

	/* Keyset (before_updated_us, before_id), ties by id. */
	assert_list(&(memd_task_query){ .app = APP, .before_updated_us = T0 + 20,
					.before_id = "d" },
		    "c,b,a", "before (20, d)");
	assert_list(&(memd_task_query){ .app = APP, .before_updated_us = T0 + 20,
					.before_id = "c" },
		    "b,a", "before (20, c)");
	assert_list(&(memd_task_query){ .app = APP, .before_updated_us = T0 + 20,
					.before_id = "zz" },
		    "d,c,b,a", "before (20, zz)");
	assert_list(&(memd_task_query){ .app = APP, .before_updated_us = T0 + 30,
					.before_id = "e" },
		    "d,c,b,a", "before (30, e)");
	assert_list(&(memd_task_query){ .app = APP, .before_updated_us = T0 + 10,
					.before_id = "a" },
		    "", "before the last");
	assert_list(&(memd_task_query){ .app = APP, .state = "working",
					.before_updated_us = T0 + 20, .before_id = "d",
					.limit = 1 },
		    "b", "working before (20, d), limit 1");

	/* Paging with the keyset visits every task once. */
	for (uint32_t size = 1; size <= 4; size++) {
		char got[IDS_MAX], buf[IDS_MAX];
		char *before_id = NULL;
		int64_t before_us = 0;
		size_t used = 0;

		got[0] = '\0';
		for (unsigned pages = 0;; pages++) {
			memd_task_query q = { .app = APP, .limit = size,
					      .before_updated_us = before_us,
					      .before_id = before_id };
			conf_tasks l = { 0 };
			int w;

			cr_assert_lt(pages, 100u, "paging does not end");
			cr_assert_eq(conf_task_list(st, &q, &l), 0, "%s", st->err.msg);
			cr_assert_leq(l.n, size);
			if (!l.n) {
				conf_tasks_clear(&l);
				break;
			}
			w = snprintf(got + used, sizeof(got) - used, "%s%s", used ? "," : "",
				     ids_of(&l, buf, sizeof(buf)));
			cr_assert(w >= 0 && (size_t)w < sizeof(got) - used);
			used += (size_t)w;
			free(before_id);
			before_id = strdup(l.v[l.n - 1].t.id);
			before_us = l.v[l.n - 1].t.updated_us;
			conf_tasks_clear(&l);
		}
		free(before_id);
		cr_assert_str_eq(got, "f,e,d,c,b,a", "pages of %u: %s", size, got);
	}

	/* A put moves a task to the front. */
	put_simple(APP, "a", "c1", USER, "working", T0 + 60);
	assert_list(&(memd_task_query){ .app = APP, .limit = 2 }, "a,f", "after a put");
}

Test(tasks, list_delivers_every_field)
{
	char buf[JSON_MAX];
	memd_task t = task(APP, "t1", "c1", NULL, "input-required", "needs you", buf);
	memd_task_query q = { .app = APP, .limit = LIST_ALL };
	conf_tasks l = { 0 };
	conf_task got = put_ok(&t, 0, 0, T0);

	conf_task_clear(&got);
	got = put_ok(&t, 0, 0, T0 + 5);
	conf_task_clear(&got);
	cr_assert_eq(conf_task_list(st, &q, &l), 0, "%s", st->err.msg);
	cr_assert_eq(l.n, 1);
	assert_task(&l.v[0], &t, T0, T0 + 5, 2);
	conf_tasks_clear(&l);
}

/* ---- delete ------------------------------------------------------------- */

Test(tasks, delete_with_and_without_version)
{
	put_simple(APP, "t1", "c1", USER, "working", T0);
	put_simple(APP, "t1", "c1", USER, "working", T0 + 1);
	put_simple(APP, "t2", "c1", USER, "completed", T0);
	put_simple(APP2, "t1", "c1", USER, "working", T0);

	cr_assert_eq(conf_task_delete(st, APP, "t1", 1), MEMD_ECONFLICT);
	cr_assert_eq(conf_task_delete(st, APP, "t1", 3), MEMD_ECONFLICT);
	cr_assert_eq(version_of(APP, "t1"), 2);
	cr_assert_eq(conf_task_delete(st, APP, "t1", 2), 0, "%s", st->err.msg);
	assert_absent(APP, "t1");
	cr_assert_eq(conf_task_delete(st, APP, "t1", 0), MEMD_ENOTFOUND);
	cr_assert_eq(conf_task_delete(st, APP, "t1", 2), MEMD_ENOTFOUND);

	/* Without a version (a terminal task too). */
	cr_assert_eq(conf_task_delete(st, APP, "t2", 0), 0, "%s", st->err.msg);
	assert_absent(APP, "t2");
	assert_list(&(memd_task_query){ .app = APP }, "", "after the deletes");
	cr_assert_eq(version_of(APP2, "t1"), 1);

	/* A deleted task's id starts over. */
	put_simple(APP, "t2", "c1", USER, "working", T0 + 2);
	cr_assert_eq(version_of(APP, "t2"), 1);
}

/* ---- retention ---------------------------------------------------------- */

Test(tasks, session_and_user_delete_take_their_tasks)
{
	cr_assert_eq(conf_session_create(st, APP, USER, "s1", NULL, T0, NULL, NULL), 0);
	cr_assert_eq(conf_session_create(st, APP, USER, "s2", NULL, T0, NULL, NULL), 0);
	cr_assert_eq(conf_session_create(st, APP, USER2, "s1", NULL, T0, NULL, NULL), 0);
	put_simple(APP, "a", "s1", USER, "working", T0 + 1);     /* goes with s1 */
	put_simple(APP, "b", "s1", USER, "completed", T0 + 2);   /* goes with s1 */
	put_simple(APP, "c", "s2", USER, "working", T0 + 3);     /* goes with the user */
	put_simple(APP, "d", "s1", NULL, "working", T0 + 4);     /* no user: stays */
	put_simple(APP, "e", "s1", USER2, "working", T0 + 5);    /* another user: stays */
	put_simple(APP, "f", "other", USER, "working", T0 + 6);  /* no such session: with user */
	put_simple(APP2, "g", "s1", USER, "working", T0 + 7);    /* another app: stays */

	cr_assert_eq(conf_session_delete(st, APP, USER, "s1"), 0, "%s", st->err.msg);
	assert_list(&(memd_task_query){ .app = APP }, "f,e,d,c", "after session_delete");
	assert_list(&(memd_task_query){ .app = APP2 }, "g", "another app after session_delete");

	cr_assert_eq(conf_user_delete(st, APP, USER), 0, "%s", st->err.msg);
	assert_list(&(memd_task_query){ .app = APP }, "e,d", "after user_delete");
	assert_list(&(memd_task_query){ .app = APP2 }, "g", "another app after user_delete");
	assert_absent(APP, "f");
}

/* ---- bad input ---------------------------------------------------------- */

Test(tasks, bad_input_is_refused_and_writes_nothing)
{
	char buf[JSON_MAX];
	memd_task t = task(APP, "t1", "c1", USER, "working", "", buf);
	memd_task_query q = { .app = APP, .limit = 0 };
	conf_tasks l = { 0 };

	t.task_json = "[\"not an object\"]";
	cr_assert_eq(conf_task_put(st, &t, 0, 0, T0, NULL), MEMD_EINVAL, "task JSON an array");
	t.task_json = "{";
	cr_assert_eq(conf_task_put(st, &t, 0, 0, T0, NULL), MEMD_EINVAL, "task JSON cut short");
	t = task(APP, "t1", "c1", USER, "working", "", buf);
	t.state = NULL;
	cr_assert_eq(conf_task_put(st, &t, 0, 0, T0, NULL), MEMD_EINVAL, "no state");
	t.state = "working";
	cr_assert_eq(conf_task_put(st, &t, 0, -1, T0, NULL), MEMD_EINVAL, "a negative version");
	assert_absent(APP, "t1");
	cr_assert_eq(conf_task_list(st, &q, &l), MEMD_EINVAL, "limit 0");
	cr_assert_eq(l.n, 0);
}

/* ---- races -------------------------------------------------------------- */

static int32_t ignore_task(void *ud, const memd_task *t)
{
	(void)ud;
	(void)t;
	return 0;
}

#define NOTE_MAX 32

/* Each racer of a round puts the task "race" with the round's expected
 * version and a note naming it. */
static void *race_put(void *p)
{
	conf_racer *a = p;
	char buf[JSON_MAX], note[NOTE_MAX];
	memd_task t;
	memd_call call = { .struct_size = sizeof(call) };
	memd_task_sink sink = { sizeof(sink), NULL, ignore_task };

	snprintf(note, sizeof(note), "r%d-t%d", a->round, a->thread);
	t = task(APP, "race", "c1", NULL, "working", note, buf);
	a->err.struct_size = sizeof(a->err);
	pthread_barrier_wait(a->start);
	a->result = a->ops->task_put(a->h, &call, &t, 0, (int64_t)a->round + 1,
				     T0 + a->round + 1, &sink, &a->err);
	return NULL;
}

Test(tasks, racing_conditional_puts_have_one_winner)
{
	void *twin = NULL, *h[2];

	put_simple(APP, "race", "c1", NULL, "working", T0);
	conf_race_instances(st, &twin, h);
	for (int round = 0; round < RACE_ROUNDS; round++) {
		conf_racer args[RACE_THREADS];
		int won = 0;

		conf_race_round(st, h, round, race_put, args, RACE_THREADS);
		for (int i = 0; i < RACE_THREADS; i++) {
			if (args[i].result == 0) {
				char note[NOTE_MAX], buf[JSON_MAX];
				memd_task want;
				conf_task got = get_ok(APP, "race");

				won++;
				snprintf(note, sizeof(note), "r%d-t%d", round, i);
				want = task(APP, "race", "c1", NULL, "working", note, buf);
				cr_assert(conf_json_equal(got.t.task_json, want.task_json),
					  "round %d: stored %s, the winner put %s", round,
					  got.t.task_json, want.task_json);
				conf_task_clear(&got);
			} else
				cr_assert_eq(args[i].result, MEMD_ECONFLICT,
					     "round %d thread %d: %d %s", round, i,
					     args[i].result, args[i].err.msg);
		}
		cr_assert_eq(won, 1, "round %d: %d winners", round, won);
		cr_assert_eq(version_of(APP, "race"), round + 2);
	}
	conf_twin_close(twin);
}

Test(tasks, durable_across_reopen)
{
	char buf[JSON_MAX];
	memd_task t = task(APP, "t1", "c1", USER, "completed", "kept", buf);
	conf_task got;

	if (!st->durable)
		cr_skip_test("the store is not durable");
	got = put_ok(&t, 0, 0, T0);
	conf_task_clear(&got);
	conf_reopen(st);
	got = get_ok(APP, "t1");
	assert_task(&got, &t, T0, T0, 1);
	conf_task_clear(&got);
	cr_assert_eq(conf_task_put(st, &(memd_task){ .struct_size = sizeof(memd_task),
						     .app = APP, .id = "t1",
						     .context_id = "c1", .state = "working",
						     .task_json = "{}" },
				   0, 0, T0 + 1, NULL),
		     MEMD_ECONFLICT);
}
