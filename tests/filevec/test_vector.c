/* SPDX-License-Identifier: MIT */
/*
 * The vector-store conformance suite: the contract of api/memd/vector.h,
 * written to run unchanged against every vector-store plugin (the plugin
 * and its config come from the environment: see vec_harness.h).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vec_harness.h"

#define APP "app1"
#define USER "u1"
#define DIM 8
#define SUITE_TIMEOUT_S 60
#define SCORE_EPS 1e-5      /* float32 scores of unit vectors */
#define ID_LEN 64
#define MANY 1000           /* "k larger than anything stored" */

static vec_store *vs;

static void setup(void)
{
	vs = vec_open();
	if (vs->ops->prepare)
		cr_assert_eq(vec_prepare(vs, DIM), 0, "prepare(%d): %s", DIM, vs->err.msg);
}

static void teardown(void)
{
	vec_close(vs);
	vs = NULL;
}

TestSuite(vector, .init = setup, .fini = teardown, .timeout = SUITE_TIMEOUT_S);

/* ---- helpers ---------------------------------------------------------- */

/* The unit vector e_i (i < DIM) tilted a little towards e_((i+1) % DIM):
 * distinct, unit length, known inner products. */
static void basis(float *v, int i, float tilt)
{
	memset(v, 0, DIM * sizeof(*v));
	v[i % DIM] = 1.0f;
	v[(i + 1) % DIM] = tilt;
	vec_normalize(v, DIM);
}

static void upsert_ok(const memd_vector_record *recs, uint32_t n)
{
	int32_t r = vec_upsert(vs, recs, n);
	cr_assert_eq(r, 0, "upsert of %u records: %s", n, vs->err.msg);
}

static void put_one(const char *app, const char *user, const char *session, const char *id,
		    const char *author, int64_t seq, int64_t ts, const float *v)
{
	memd_vector_record r = vec_record(app, user, session, id, author, seq, ts, v, DIM);
	upsert_ok(&r, 1);
}

static void query_ok(const float *q, const memd_vector_filter *f, uint32_t k, vec_hits *out)
{
	int32_t r = vec_query(vs, q, DIM, f, k, out);
	cr_assert_eq(r, 0, "query(%s/%s): %s", f->app, f->user, vs->err.msg);
}

static void assert_sorted(const vec_hits *h)
{
	for (size_t i = 1; i < h->n; i++)
		cr_assert_geq(h->v[i - 1].score, h->v[i].score, "hits not best first at %zu", i);
}

/* Every hit belongs to (app, user). */
static void assert_scope(const vec_hits *h, const char *app, const char *user)
{
	for (size_t i = 0; i < h->n; i++)
		cr_assert(strcmp(h->v[i].app, app) == 0 && strcmp(h->v[i].user, user) == 0,
			  "hit %s/%s/%s/%s in a query for %s/%s", h->v[i].app, h->v[i].user,
			  h->v[i].session, h->v[i].event_id, app, user);
}

static size_t count_user(const char *app, const char *user)
{
	memd_vector_filter f = vec_filter(app, user);
	vec_hits h = { 0 };
	float q[DIM];
	size_t n;

	basis(q, 0, 0.0f);
	query_ok(q, &f, MANY, &h);
	assert_scope(&h, app, user);
	n = h.n;
	vec_hits_clear(&h);
	return n;
}

/* ---- basic contract --------------------------------------------------- */

Test(vector, upsert_then_query_returns_every_field)
{
	float a[DIM], b[DIM], c[DIM];
	memd_vector_record recs[3];
	memd_vector_filter f = vec_filter(APP, USER);
	vec_hits h = { 0 };

	basis(a, 0, 0.1f);
	basis(b, 2, 0.1f);
	basis(c, 4, 0.1f);
	recs[0] = vec_record(APP, USER, "s1", "ev-a", "alice", 1, 1000, a, DIM);
	recs[1] = vec_record(APP, USER, "s1", "ev-b", "bob", 2, 2000, b, DIM);
	recs[2] = vec_record(APP, USER, "s2", "ev-c", NULL, 7, 3000, c, DIM);
	upsert_ok(recs, 3);

	query_ok(b, &f, 10, &h);
	cr_assert_eq(h.n, 3, "3 vectors stored, %zu hits", h.n);
	assert_sorted(&h);
	cr_assert_str_eq(h.v[0].event_id, "ev-b");
	cr_assert_float_eq(h.v[0].score, 1.0, SCORE_EPS, "self-similarity %f", h.v[0].score);
	cr_assert_str_eq(h.v[0].app, APP);
	cr_assert_str_eq(h.v[0].user, USER);
	cr_assert_str_eq(h.v[0].session, "s1");
	cr_assert_str_eq(h.v[0].author, "bob");
	cr_assert_eq(h.v[0].seq, 2);
	cr_assert_eq(h.v[0].timestamp_us, 2000);
	for (size_t i = 0; i < h.n; i++) {
		const float *v = strcmp(h.v[i].event_id, "ev-a") == 0 ? a
				 : strcmp(h.v[i].event_id, "ev-b") == 0 ? b : c;
		cr_assert_float_eq(h.v[i].score, vec_dot(b, v, DIM), SCORE_EPS, "score of %s",
				   h.v[i].event_id);
	}
	{
		long ic = vec_hits_find(&h, "s2", "ev-c");
		cr_assert_geq(ic, 0);
		cr_assert_null(h.v[ic].author, "a record without author came back with '%s'",
			       h.v[ic].author);
		cr_assert_eq(h.v[ic].seq, 7);
	}
	vec_hits_clear(&h);
}

Test(vector, upsert_replaces_by_scope_and_event_id)
{
	float v1[DIM], v2[DIM], q[DIM];
	memd_vector_filter f = vec_filter(APP, USER);
	vec_hits h = { 0 };

	basis(v1, 0, 0.0f);
	basis(v2, 3, 0.0f);
	put_one(APP, USER, "s1", "ev", "alice", 1, 100, v1);
	put_one(APP, USER, "s1", "ev", "bob", 2, 200, v2);
	basis(q, 3, 0.0f);
	query_ok(q, &f, 10, &h);
	cr_assert_eq(h.n, 1, "a replaced vector must not stay: %zu hits", h.n);
	cr_assert_str_eq(h.v[0].author, "bob");
	cr_assert_eq(h.v[0].seq, 2);
	cr_assert_eq(h.v[0].timestamp_us, 200);
	cr_assert_float_eq(h.v[0].score, 1.0, SCORE_EPS, "the new vector is stored");
	vec_hits_clear(&h);

	/* Same event id in another session is another record; a batch that
	 * names one key twice keeps the last. */
	{
		memd_vector_record recs[3] = {
			vec_record(APP, USER, "s2", "ev", "carol", 3, 300, v1, DIM),
			vec_record(APP, USER, "s3", "ev", "dave", 4, 400, v1, DIM),
			vec_record(APP, USER, "s3", "ev", "erin", 5, 500, v2, DIM),
		};
		upsert_ok(recs, 3);
	}
	query_ok(q, &f, 10, &h);
	cr_assert_eq(h.n, 3, "s1/ev, s2/ev, s3/ev: %zu hits", h.n);
	{
		long i3 = vec_hits_find(&h, "s3", "ev");
		cr_assert_geq(i3, 0);
		cr_assert_str_eq(h.v[i3].author, "erin");
		cr_assert_float_eq(h.v[i3].score, 1.0, SCORE_EPS);
	}
	vec_hits_clear(&h);
}

Test(vector, k_limits_and_order)
{
	float v[20][DIM], q[DIM];
	memd_vector_record recs[20];
	memd_vector_filter f = vec_filter(APP, USER);
	char ids[20][ID_LEN];
	vec_hits h = { 0 };
	uint64_t rng = 42;

	for (int i = 0; i < 20; i++) {
		vec_random_unit(&rng, v[i], DIM);
		snprintf(ids[i], ID_LEN, "e%d", i);
		recs[i] = vec_record(APP, USER, "s", ids[i], "a", i, i, v[i], DIM);
	}
	upsert_ok(recs, 20);
	vec_random_unit(&rng, q, DIM);
	query_ok(q, &f, 5, &h);
	cr_assert_eq(h.n, 5);
	assert_sorted(&h);
	/* The 5 hits are the 5 best. */
	{
		double fifth = h.v[4].score;
		int better = 0;
		for (int i = 0; i < 20; i++)
			better += vec_dot(q, v[i], DIM) > fifth + SCORE_EPS;
		cr_assert_leq(better, 4, "%d vectors beat the 5th hit", better);
	}
	vec_hits_clear(&h);
	query_ok(q, &f, MANY, &h);
	cr_assert_eq(h.n, 20, "k above the count returns everything: %zu", h.n);
	assert_sorted(&h);
	vec_hits_clear(&h);
	query_ok(q, &f, 1, &h);
	cr_assert_eq(h.n, 1);
	vec_hits_clear(&h);
}

Test(vector, empty_store_and_unknown_scope_return_nothing)
{
	float q[DIM];
	memd_vector_filter f = vec_filter(APP, "nobody");
	vec_hits h = { 0 };

	basis(q, 0, 0.0f);
	query_ok(q, &f, 10, &h);
	cr_assert_eq(h.n, 0);
	put_one(APP, USER, "s", "e", NULL, 1, 1, q);
	query_ok(q, &f, 10, &h);
	cr_assert_eq(h.n, 0, "another user's vector returned");
	f = vec_filter(APP, USER);
	f.session = "no-such-session";
	query_ok(q, &f, 10, &h);
	cr_assert_eq(h.n, 0);
}

/* ---- filters ---------------------------------------------------------- */

/* Four vectors: s1/e1 (alice, t=10), s1/e2 (bob, t=20), s2/e3 (alice,
 * t=30), s2/e4 (no author, t=40). */
static void put_four(float v[4][DIM])
{
	static const char *const ids[4] = { "e1", "e2", "e3", "e4" };
	static const char *const sessions[4] = { "s1", "s1", "s2", "s2" };
	static const char *const authors[4] = { "alice", "bob", "alice", NULL };
	memd_vector_record recs[4];

	for (int i = 0; i < 4; i++) {
		basis(v[i], i, 0.5f);
		recs[i] = vec_record(APP, USER, sessions[i], ids[i], authors[i], i + 1, (i + 1) * 10,
				     v[i], DIM);
	}
	upsert_ok(recs, 4);
}

/* The event ids of a query's hits, sorted, joined by ','. */
static void hit_ids(const memd_vector_filter *f, char *buf, size_t len)
{
	vec_hits h = { 0 };
	float q[DIM];
	char *ids[MANY];

	basis(q, 0, 0.0f);
	query_ok(q, f, MANY, &h);
	assert_scope(&h, f->app, f->user);
	assert_sorted(&h);
	cr_assert_leq(h.n, MANY);
	for (size_t i = 0; i < h.n; i++)
		ids[i] = h.v[i].event_id;
	for (size_t i = 1; i < h.n; i++)
		for (size_t j = i; j > 0 && strcmp(ids[j - 1], ids[j]) > 0; j--) {
			char *t = ids[j];
			ids[j] = ids[j - 1];
			ids[j - 1] = t;
		}
	buf[0] = '\0';
	for (size_t i = 0; i < h.n; i++) {
		strncat(buf, ids[i], len - strlen(buf) - 1);
		if (i + 1 < h.n)
			strncat(buf, ",", len - strlen(buf) - 1);
	}
	vec_hits_clear(&h);
}

#define IDS_MAX 256

Test(vector, filter_by_session)
{
	float v[4][DIM];
	memd_vector_filter f = vec_filter(APP, USER);
	char ids[IDS_MAX];

	put_four(v);
	f.session = "s1";
	hit_ids(&f, ids, sizeof(ids));
	cr_assert_str_eq(ids, "e1,e2");
	f.session = "s2";
	hit_ids(&f, ids, sizeof(ids));
	cr_assert_str_eq(ids, "e3,e4");
	f.session = NULL;
	hit_ids(&f, ids, sizeof(ids));
	cr_assert_str_eq(ids, "e1,e2,e3,e4");
}

Test(vector, filter_by_authors)
{
	float v[4][DIM];
	memd_vector_filter f = vec_filter(APP, USER);
	const char *alice[] = { "alice" }, *both[] = { "bob", "alice" }, *none[] = { "zed" };
	char ids[IDS_MAX];

	put_four(v);
	f.authors = alice;
	f.n_authors = 1;
	hit_ids(&f, ids, sizeof(ids));
	cr_assert_str_eq(ids, "e1,e3");
	f.authors = both;
	f.n_authors = 2;
	hit_ids(&f, ids, sizeof(ids));
	cr_assert_str_eq(ids, "e1,e2,e3", "a record without author never matches an author filter");
	f.authors = none;
	f.n_authors = 1;
	hit_ids(&f, ids, sizeof(ids));
	cr_assert_str_eq(ids, "");
	f.authors = alice;
	f.n_authors = 1;
	f.session = "s2";
	hit_ids(&f, ids, sizeof(ids));
	cr_assert_str_eq(ids, "e3", "session and authors combine");
}

Test(vector, filter_by_time_bounds_are_exclusive)
{
	float v[4][DIM];
	memd_vector_filter f = vec_filter(APP, USER);
	char ids[IDS_MAX];

	put_four(v);
	f.after_us = 20;
	hit_ids(&f, ids, sizeof(ids));
	cr_assert_str_eq(ids, "e3,e4");
	f.after_us = 0;
	f.before_us = 30;
	hit_ids(&f, ids, sizeof(ids));
	cr_assert_str_eq(ids, "e1,e2");
	f.after_us = 10;
	f.before_us = 40;
	hit_ids(&f, ids, sizeof(ids));
	cr_assert_str_eq(ids, "e2,e3");
	f.after_us = 40;
	f.before_us = 0;
	hit_ids(&f, ids, sizeof(ids));
	cr_assert_str_eq(ids, "");
}

/* ---- isolation -------------------------------------------------------- */

Test(vector, a_query_never_returns_another_users_or_apps_vectors)
{
	float q[DIM], mine[DIM];
	memd_vector_filter f;
	vec_hits h = { 0 };
	/* Scopes that share prefixes or concatenate to the same text. */
	static const char *const scopes[][2] = {
		{ "app1", "u1" }, { "app1", "u2" }, { "app2", "u1" }, { "app1", "u" },
		{ "app1", "u11" }, { "ab", "c" }, { "a", "bc" }, { "app", "1u1" },
	};
	size_t n = sizeof(scopes) / sizeof(scopes[0]);

	basis(q, 0, 0.0f);
	basis(mine, 5, 0.0f); /* orthogonal to q: every other scope is closer */
	for (size_t s = 0; s < n; s++) {
		char id[ID_LEN];
		snprintf(id, sizeof(id), "ev-%zu", s);
		/* The first scope gets a poor match; all others the query itself. */
		put_one(scopes[s][0], scopes[s][1], "shared-session", id, "a", 1, 1, s ? q : mine);
		put_one(scopes[s][0], scopes[s][1], "shared-session", "same-id", "a", 1, 1,
			s ? q : mine);
	}
	for (size_t s = 0; s < n; s++) {
		char id[ID_LEN];
		snprintf(id, sizeof(id), "ev-%zu", s);
		f = vec_filter(scopes[s][0], scopes[s][1]);
		query_ok(q, &f, MANY, &h);
		cr_assert_eq(h.n, 2, "%s/%s: %zu hits, it has 2 vectors", scopes[s][0], scopes[s][1],
			     h.n);
		assert_scope(&h, scopes[s][0], scopes[s][1]);
		cr_assert_geq(vec_hits_find(&h, "shared-session", id), 0);
		vec_hits_clear(&h);
		f.session = "shared-session";
		query_ok(q, &f, MANY, &h);
		cr_assert_eq(h.n, 2);
		assert_scope(&h, scopes[s][0], scopes[s][1]);
		vec_hits_clear(&h);
	}
}

/* ---- remove ----------------------------------------------------------- */

Test(vector, remove_session_removes_only_that_session)
{
	float v[4][DIM];
	memd_vector_filter f = vec_filter(APP, USER);
	char ids[IDS_MAX];

	put_four(v);
	put_one(APP, "u2", "s1", "other", "a", 1, 1, v[0]);
	put_one("app2", USER, "s1", "other", "a", 1, 1, v[0]);
	cr_assert_eq(vec_remove_scope(vs, APP, USER, "s1"), 0, "remove: %s", vs->err.msg);
	hit_ids(&f, ids, sizeof(ids));
	cr_assert_str_eq(ids, "e3,e4");
	cr_assert_eq(count_user(APP, "u2"), 1, "another user's session of the same name survives");
	cr_assert_eq(count_user("app2", USER), 1, "another app's session survives");
	/* Removing again, or a session that never existed, is fine. */
	cr_assert_eq(vec_remove_scope(vs, APP, USER, "s1"), 0, "%s", vs->err.msg);
	cr_assert_eq(vec_remove_scope(vs, APP, USER, "never"), 0, "%s", vs->err.msg);
	/* And the session can be written again. */
	put_one(APP, USER, "s1", "e9", "a", 9, 90, v[1]);
	hit_ids(&f, ids, sizeof(ids));
	cr_assert_str_eq(ids, "e3,e4,e9");
}

/* remove_events (since 1.2): a plugin without it is skipped, or fails
 * with MEMD_VECTOR_REMOVE_EVENTS=1 (set for the plugins that have it). */
static void need_remove_events(void)
{
	const char *must = getenv("MEMD_VECTOR_REMOVE_EVENTS");

	if (vs->ops->remove_events)
		return;
	cr_assert(!must || strcmp(must, "1") != 0, "the plugin has no remove_events");
	cr_skip_test("the plugin has no remove_events (ABI below 1.2)");
}

static void remove_events_ok(const char *session, const char *const *ids, uint32_t n)
{
	cr_assert_eq(vec_remove_events(vs, APP, USER, session, ids, n), 0, "remove_events: %s",
		     vs->err.msg);
}

static void session_ids(const char *session, char *buf, size_t len)
{
	memd_vector_filter f = vec_filter(APP, USER);
	f.session = session;
	hit_ids(&f, buf, len);
}

Test(vector, remove_events_removes_only_those_events)
{
	static const char *const gone[] = { "e1", "never-stored" };
	float v[4][DIM];
	char ids[IDS_MAX];

	need_remove_events();
	put_four(v);
	put_one(APP, USER, "s2", "e1", "a", 5, 50, v[1]);   /* the same id in another session */
	put_one(APP, "u2", "s1", "e1", "a", 1, 1, v[0]);    /* another user's */
	put_one("app2", USER, "s1", "e1", "a", 1, 1, v[0]); /* another app's */
	remove_events_ok("s1", gone, 2);
	session_ids("s1", ids, sizeof(ids));
	cr_assert_str_eq(ids, "e2");
	session_ids("s2", ids, sizeof(ids));
	cr_assert_str_eq(ids, "e1,e3,e4", "another session's event of the same id is kept");
	cr_assert_eq(count_user(APP, "u2"), 1, "another user's event of the same id is kept");
	cr_assert_eq(count_user("app2", USER), 1, "another app's event of the same id is kept");
	/* Again, none, or in a session that never existed: fine, no change. */
	remove_events_ok("s1", gone, 2);
	remove_events_ok("s1", gone, 0);
	remove_events_ok("never", gone, 1);
	session_ids(NULL, ids, sizeof(ids));
	cr_assert_str_eq(ids, "e1,e2,e3,e4");
	/* Written again (an event visible again), it is found again. */
	put_one(APP, USER, "s1", "e1", "alice", 1, 10, v[0]);
	session_ids("s1", ids, sizeof(ids));
	cr_assert_str_eq(ids, "e1,e2");
}

Test(vector, remove_events_of_a_whole_session_then_more)
{
	static const char *const all[] = { "e3", "e4" };
	float v[4][DIM];
	char ids[IDS_MAX];

	need_remove_events();
	put_four(v);
	remove_events_ok("s2", all, 2);
	session_ids(NULL, ids, sizeof(ids));
	cr_assert_str_eq(ids, "e1,e2");
	put_one(APP, USER, "s2", "e5", "a", 5, 50, v[2]);
	session_ids("s2", ids, sizeof(ids));
	cr_assert_str_eq(ids, "e5");
}

Test(vector, remove_events_survives_reopen)
{
	static const char *const s1[] = { "e2" }, *const s2[] = { "e3" };
	float v[4][DIM];
	char ids[IDS_MAX];

	need_remove_events();
	if (!vs->durable)
		cr_skip_test("the plugin is not durable (MEMD_VECTOR_DURABLE)");
	put_four(v);
	remove_events_ok("s1", s1, 1);
	remove_events_ok("s2", s2, 1);
	put_one(APP, USER, "s2", "e3", "alice", 3, 30, v[2]); /* back */
	remove_events_ok("s2", s2, 1); /* and gone again */
	vec_reopen(vs);
	if (vs->ops->prepare)
		cr_assert_eq(vec_prepare(vs, DIM), 0, "prepare after reopen: %s", vs->err.msg);
	session_ids(NULL, ids, sizeof(ids));
	cr_assert_str_eq(ids, "e1,e4");
}

Test(vector, remove_events_refuses_a_bad_scope_and_changes_nothing)
{
	static const char *const one[] = { "e1" };
	float v[4][DIM];
	char ids[IDS_MAX];

	need_remove_events();
	put_four(v);
	cr_assert_eq(vec_remove_events(vs, APP, USER, NULL, one, 1), MEMD_EINVAL,
		     "remove_events without a session");
	cr_assert_eq(vec_remove_events(vs, APP, "", "s1", one, 1), MEMD_EINVAL,
		     "remove_events with an empty user");
	cr_assert_eq(vec_remove_events(vs, NULL, USER, "s1", one, 1), MEMD_EINVAL,
		     "remove_events without an app");
	session_ids(NULL, ids, sizeof(ids));
	cr_assert_str_eq(ids, "e1,e2,e3,e4");
}

Test(vector, remove_user_removes_every_session_of_that_user_only)
{
	float v[4][DIM];

	put_four(v);
	put_one(APP, "u2", "s1", "other", "a", 1, 1, v[0]);
	put_one("app2", USER, "s1", "other", "a", 1, 1, v[0]);
	cr_assert_eq(vec_remove_scope(vs, APP, USER, NULL), 0, "remove: %s", vs->err.msg);
	cr_assert_eq(count_user(APP, USER), 0);
	cr_assert_eq(count_user(APP, "u2"), 1);
	cr_assert_eq(count_user("app2", USER), 1);
	cr_assert_eq(vec_remove_scope(vs, "nobody", "nobody", NULL), 0, "%s", vs->err.msg);
}

/* ---- dimension -------------------------------------------------------- */

Test(vector, prepare_with_another_dimension_conflicts)
{
	float v[DIM];

	if (!vs->ops->prepare)
		cr_skip_test("the plugin has no prepare");
	basis(v, 0, 0.0f);
	put_one(APP, USER, "s", "e", "a", 1, 1, v);
	cr_assert_eq(vec_prepare(vs, DIM), 0, "prepare with the same dimension: %s", vs->err.msg);
	cr_assert_eq(vec_prepare(vs, DIM * 2), MEMD_ECONFLICT, "prepare(%d) on %d-dim data: %d %s",
		     DIM * 2, DIM, vs->err.code, vs->err.msg);
	cr_assert_eq(count_user(APP, USER), 1, "a refused prepare changes nothing");
}

Test(vector, bad_input_is_refused_and_changes_nothing)
{
	float v[DIM], w[2 * DIM] = { 1.0f };
	memd_vector_filter f = vec_filter(APP, USER);
	vec_hits h = { 0 };

	basis(v, 0, 0.0f);
	put_one(APP, USER, "s", "keep", "a", 1, 1, v);
	{
		memd_vector_record recs[2] = {
			vec_record(APP, USER, "s", "good", "a", 2, 2, v, DIM),
			vec_record(APP, USER, "s", "bad-dim", "a", 3, 3, w, 2 * DIM),
		};
		cr_assert_eq(vec_upsert(vs, recs, 2), MEMD_EINVAL, "a record of another dimension");
	}
	{
		memd_vector_record recs[2] = {
			vec_record(APP, USER, "s", "good", "a", 2, 2, v, DIM),
			vec_record(APP, USER, "s", NULL, "a", 3, 3, v, DIM),
		};
		cr_assert_eq(vec_upsert(vs, recs, 2), MEMD_EINVAL, "a record without event id");
	}
	{
		memd_vector_record r = vec_record(APP, NULL, "s", "e", "a", 3, 3, v, DIM);
		cr_assert_eq(vec_upsert(vs, &r, 1), MEMD_EINVAL, "a record without user");
	}
	cr_assert_eq(count_user(APP, USER), 1, "nothing of a refused batch is stored");
	cr_assert_eq(vec_query(vs, w, 2 * DIM, &f, 10, &h), MEMD_EINVAL,
		     "a query of another dimension");
	f.user = NULL;
	cr_assert_eq(vec_query(vs, v, DIM, &f, 10, &h), MEMD_EINVAL, "a query without user");
	f = vec_filter(NULL, USER);
	cr_assert_eq(vec_query(vs, v, DIM, &f, 10, &h), MEMD_EINVAL, "a query without app");
	cr_assert_eq(vec_remove_scope(vs, APP, NULL, NULL), MEMD_EINVAL, "a remove without user");
	cr_assert_eq(count_user(APP, USER), 1);
	cr_assert_eq(h.n, 0);
}

Test(vector, full_length_ids_round_trip)
{
	char app[MEMD_ID_MAX + 1], user[MEMD_ID_MAX + 1], session[MEMD_ID_MAX + 1],
		event[MEMD_ID_MAX + 1], author[4 * MEMD_ID_MAX + 1];
	float v[DIM];
	memd_vector_filter f;
	vec_hits h = { 0 };

	memset(app, 'a', MEMD_ID_MAX);
	memset(user, 'u', MEMD_ID_MAX);
	memset(session, 's', MEMD_ID_MAX);
	memset(event, 'e', MEMD_ID_MAX);
	memset(author, 'w', sizeof(author) - 1);
	app[MEMD_ID_MAX] = user[MEMD_ID_MAX] = session[MEMD_ID_MAX] = event[MEMD_ID_MAX] = '\0';
	author[sizeof(author) - 1] = '\0';
	memcpy(event + MEMD_ID_MAX - 4, "\xc3\xa9t.", 4); /* UTF-8 at the very end */
	basis(v, 1, 0.0f);
	put_one(app, user, session, event, author, 1, 1, v);
	/* An id that differs only in its last byte is another record. */
	event[0] = 'E';
	put_one(app, user, session, event, author, 2, 2, v);
	f = vec_filter(app, user);
	f.session = session;
	query_ok(v, &f, 10, &h);
	cr_assert_eq(h.n, 2);
	cr_assert_geq(vec_hits_find(&h, session, event), 0, "the full event id is kept");
	for (size_t i = 0; i < h.n; i++) {
		cr_assert_str_eq(h.v[i].app, app);
		cr_assert_str_eq(h.v[i].user, user);
		cr_assert_str_eq(h.v[i].session, session);
		cr_assert_str_eq(h.v[i].author, author);
		cr_assert_eq(strlen(h.v[i].event_id), MEMD_ID_MAX);
	}
	vec_hits_clear(&h);
}

/* ---- persistence ------------------------------------------------------ */

Test(vector, data_survives_reopen)
{
	float v[4][DIM], q[DIM];
	memd_vector_filter f = vec_filter(APP, USER);
	vec_hits before = { 0 }, after = { 0 };
	char ids[IDS_MAX];

	if (!vs->durable)
		cr_skip_test("the plugin is not durable (MEMD_VECTOR_DURABLE)");
	put_four(v);
	put_one(APP, USER, "s1", "e2", "carol", 22, 22, v[3]); /* a replacement */
	cr_assert_eq(vec_remove_scope(vs, APP, USER, "s2"), 0, "%s", vs->err.msg);
	put_one(APP, "u2", "s9", "x", "a", 1, 1, v[0]);
	cr_assert_eq(vec_remove_scope(vs, APP, "u2", NULL), 0, "%s", vs->err.msg);
	basis(q, 1, 0.3f);
	query_ok(q, &f, MANY, &before);

	vec_reopen(vs);
	if (vs->ops->prepare)
		cr_assert_eq(vec_prepare(vs, DIM), 0, "prepare after reopen: %s", vs->err.msg);
	query_ok(q, &f, MANY, &after);
	cr_assert_eq(after.n, before.n, "%zu hits before reopen, %zu after", before.n, after.n);
	for (size_t i = 0; i < after.n; i++) {
		cr_assert_str_eq(after.v[i].event_id, before.v[i].event_id);
		cr_assert_str_eq(after.v[i].session, before.v[i].session);
		cr_assert_eq(after.v[i].seq, before.v[i].seq);
		cr_assert_float_eq(after.v[i].score, before.v[i].score, SCORE_EPS);
	}
	hit_ids(&f, ids, sizeof(ids));
	cr_assert_str_eq(ids, "e1,e2");
	cr_assert_eq(count_user(APP, "u2"), 0, "a removed user came back");
	vec_hits_clear(&before);
	vec_hits_clear(&after);
	if (vs->ops->prepare)
		cr_assert_eq(vec_prepare(vs, DIM + 1), MEMD_ECONFLICT,
			     "the dimension is remembered across reopen");
}

/* ---- exactness -------------------------------------------------------- */

#define EXACT_DIM 64
#define EXACT_N 2000
#define EXACT_QUERIES 10
#define EXACT_K 10
#define EXACT_SESSIONS 3

Test(vector, exact_top_k_matches_brute_force, .timeout = SUITE_TIMEOUT_S)
{
	vec_store *ex;
	float *v = malloc((size_t)EXACT_N * EXACT_DIM * sizeof(float)), q[EXACT_DIM];
	memd_vector_record *recs = calloc(EXACT_N, sizeof(*recs));
	char (*ids)[ID_LEN] = calloc(EXACT_N, sizeof(*ids));
	static const char *const sessions[EXACT_SESSIONS] = { "sa", "sb", "sc" };
	uint64_t rng = 7;

	if (!vs->exact)
		cr_skip_test("the plugin is approximate (MEMD_VECTOR_EXACT)");
	cr_assert(v && recs && ids);
	/* Its own instance: this test's dimension differs from the suite's. */
	vec_close(vs);
	vs = NULL;
	ex = vec_open();
	vs = ex;
	if (vs->ops->prepare)
		cr_assert_eq(vec_prepare(vs, EXACT_DIM), 0, "%s", vs->err.msg);
	for (int i = 0; i < EXACT_N; i++) {
		float *x = v + (size_t)i * EXACT_DIM;
		vec_random_unit(&rng, x, EXACT_DIM);
		if (i % 4 == 0 && i) /* near-duplicates: close scores */
			for (int j = 0; j < EXACT_DIM; j++)
				x[j] = x[j - EXACT_DIM] + (float)(vec_rand(&rng) % 3) * 1e-4f;
		vec_normalize(x, EXACT_DIM);
		snprintf(ids[i], ID_LEN, "e%d", i);
		recs[i] = vec_record(APP, USER, sessions[i % EXACT_SESSIONS], ids[i], "a", i, i, x,
				     EXACT_DIM);
	}
	cr_assert_eq(vec_upsert(vs, recs, EXACT_N), 0, "%s", vs->err.msg);
	for (int t = 0; t < EXACT_QUERIES; t++) {
		memd_vector_filter f = vec_filter(APP, USER);
		vec_hits h = { 0 };
		double kth, scores[EXACT_N];
		int n = 0, filtered = t % 2;

		if (filtered)
			f.session = "sb";
		if (t < 3)
			memcpy(q, v + (size_t)(t * 7) * EXACT_DIM, sizeof(q)); /* a stored vector */
		else
			vec_random_unit(&rng, q, EXACT_DIM);
		cr_assert_eq(vec_query(vs, q, EXACT_DIM, &f, EXACT_K, &h), 0, "%s", vs->err.msg);
		cr_assert_eq(h.n, EXACT_K);
		assert_sorted(&h);
		for (int i = 0; i < EXACT_N; i++)
			if (!filtered || i % EXACT_SESSIONS == 1)
				scores[n++] = vec_dot(q, v + (size_t)i * EXACT_DIM, EXACT_DIM);
		/* The k-th best true score. */
		for (int a = 0; a < EXACT_K; a++)
			for (int b = a + 1; b < n; b++)
				if (scores[b] > scores[a]) {
					double tmp = scores[a];
					scores[a] = scores[b];
					scores[b] = tmp;
				}
		kth = scores[EXACT_K - 1];
		for (size_t i = 0; i < h.n; i++) {
			int id = atoi(h.v[i].event_id + 1);
			double truth = vec_dot(q, v + (size_t)id * EXACT_DIM, EXACT_DIM);
			cr_assert_float_eq(h.v[i].score, truth, SCORE_EPS, "query %d: score of %s", t,
					   h.v[i].event_id);
			cr_assert_geq(truth, kth - SCORE_EPS,
				      "query %d: hit %s (%.7f) is not in the top %d (k-th %.7f)", t,
				      h.v[i].event_id, truth, EXACT_K, kth);
			cr_assert_float_eq(h.v[i].score, scores[i], SCORE_EPS,
					   "query %d: hit %zu scores %.7f, the %zu-th best is %.7f", t,
					   i, h.v[i].score, i + 1, scores[i]);
		}
		vec_hits_clear(&h);
	}
	free(v);
	free(recs);
	free(ids);
}

/* ---- sinks, ping, threads --------------------------------------------- */

Test(vector, a_sink_error_stops_the_query)
{
	float v[4][DIM], q[DIM];
	memd_vector_filter f = vec_filter(APP, USER);
	vec_hits h = { .stop_after = 1 };

	put_four(v);
	basis(q, 0, 0.0f);
	cr_assert_eq(vec_query(vs, q, DIM, &f, 10, &h), MEMD_ECANCELED,
		     "the sink's error is returned");
	cr_assert_eq(h.n, 1, "no hit after the sink said stop");
	vec_hits_clear(&h);
}

Test(vector, ping)
{
	int32_t r = vec_ping(vs);

	if (r == MEMD_ENOTSUP)
		cr_skip_test("the plugin has no ping");
	cr_assert_eq(r, 0, "ping: %s", vs->err.msg);
}

#define THREADS 4
#define THREAD_WRITES 50

typedef struct thread_arg {
	int id;
	int failures;
} thread_arg;

static int32_t thread_hit(void *userdata, const memd_vector_hit *h)
{
	thread_arg *a = userdata;

	if (strcmp(h->app, APP) != 0 || strncmp(h->user, "thread-", strlen("thread-")) != 0 ||
	    atoi(h->user + strlen("thread-")) != a->id)
		a->failures++; /* another thread's vector */
	return 0;
}

/* Each thread writes and queries its own user; calls carry no rows_read
 * and their own error, so threads share nothing but the instance. */
static void *thread_main(void *p)
{
	thread_arg *a = p;
	char user[ID_LEN], id[ID_LEN];
	uint64_t rng = (uint64_t)a->id + 1;
	float v[DIM];

	snprintf(user, sizeof(user), "thread-%d", a->id);
	for (int i = 0; i < THREAD_WRITES; i++) {
		memd_call c = { .struct_size = sizeof(c) };
		memd_error err = { .struct_size = sizeof(err) };
		memd_vector_record r;
		const memd_vector_record *rp = &r;
		memd_vector_filter f = vec_filter(APP, user);
		memd_vector_hit_sink sink = { .struct_size = sizeof(sink), .userdata = a,
					      .hit = thread_hit };

		vec_random_unit(&rng, v, DIM);
		snprintf(id, sizeof(id), "e%d", i);
		r = vec_record(APP, user, "s", id, "a", i, i, v, DIM);
		if (vs->ops->upsert(vs->h, &c, &rp, 1, &err) != 0)
			a->failures++;
		if (vs->ops->query(vs->h, &c, v, DIM, &f, 3, &sink, &err) != 0)
			a->failures++;
	}
	return NULL;
}

Test(vector, concurrent_writers_and_readers)
{
	pthread_t t[THREADS];
	thread_arg a[THREADS];

	if (!vs->threadsafe)
		cr_skip_test("the plugin is not thread-safe (the host serializes it)");
	for (int i = 0; i < THREADS; i++) {
		a[i] = (thread_arg){ .id = i };
		cr_assert_eq(pthread_create(&t[i], NULL, thread_main, &a[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		char user[ID_LEN];
		pthread_join(t[i], NULL);
		cr_assert_eq(a[i].failures, 0, "thread %d: %d failed calls", i, a[i].failures);
		snprintf(user, sizeof(user), "thread-%d", i);
		cr_assert_eq(count_user(APP, user), THREAD_WRITES);
	}
}
