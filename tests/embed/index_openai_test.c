/* SPDX-License-Identifier: MIT */
/*
 * Vector search end to end through the facade with both network peers
 * replaced by local stand-ins (with_standins.py --qdrant --openai):
 * sessions in SQLite, vectors in the qdrant plugin, embeddings from the
 * openai embedder. Outages of either peer pause indexing (appends still
 * succeed; vector searches say "unavailable, retry") and indexing catches
 * up by itself when the peer is back.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <ftw.h>
#include <jansson.h>
#include <memd/memd.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "standin_client.h"

#define IT_PATH_MAX 512
#define IT_NAME_MAX 96
#define IT_DIM 64
#define IT_NFTW_FDS 16
#define IT_CATCH_UP_S 20         /* how long a test waits for recovery */
#define IT_POLL_MS 100

typedef struct it_env {
	char dir[IT_PATH_MAX];
	char config[IT_PATH_MAX + 16];
	char model[IT_NAME_MAX];
	char coll[IT_NAME_MAX];
	memd *m;
} it_env;

static void it_name(const char *prefix, char out[IT_NAME_MAX])
{
	static unsigned counter;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(out, IT_NAME_MAX, "%s_%ld_%ld_%u", prefix, (long)getpid(), (long)ts.tv_nsec,
		 counter++);
}

static void it_sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Set the embeddings stand-in's behaviour for this test's model. */
static void it_model(const it_env *e, const char *members)
{
	char *url, *body;

	cr_assert(asprintf(&url, "%s/../__standin/models", sc_env("MEMD_OPENAI_STANDIN_URL")) >= 0);
	cr_assert(asprintf(&body, "{\"model\": \"%s\", %s}", e->model, members) >= 0);
	json_decref(sc_post(url, body));
	free(url);
	free(body);
}

#define IT_EMBED_TIMEOUT_MS 2000
/* close_does_not_wait_for_a_hanging_embedder: the embedder would wait
 * this long for the hanging stand-in, which answers after IT_HANG_MS; close
 * must return well before either (its bounded catch-up is 5 s). */
#define IT_HANG_EMBED_TIMEOUT_MS 60000
#define IT_HANG_MS 30000
#define IT_CLOSE_BOUND_S 15

static void it_open_with(it_env *e, int embed_timeout_ms);

static void it_open(it_env *e)
{
	it_open_with(e, IT_EMBED_TIMEOUT_MS);
}

/* Write the config (keyword index on or off; the embeddings stand-in's
 * model set to model_members first) and call memd_open: its code. */
static int32_t it_try_open(it_env *e, int embed_timeout_ms, int keyword, const char *model_members,
			   memd_error *err)
{
	const char *tmp = getenv("TMPDIR");
	memd_options o = { .struct_size = sizeof(o) };
	FILE *f;

	memset(e, 0, sizeof(*e));
	snprintf(e->dir, sizeof(e->dir), "%s/memd-itest-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	cr_assert_not_null(mkdtemp(e->dir));
	snprintf(e->config, sizeof(e->config), "%s/memd.yaml", e->dir);
	it_name("m", e->model);
	it_name("c", e->coll);
	it_model(e, model_members);
	f = fopen(e->config, "w");
	cr_assert_not_null(f);
	fprintf(f,
		"stores:\n"
		"  main: {plugin: sqlite, path: \"%s/memd.db\"}\n"
		"  qd: {plugin: qdrant, url: \"%s\", api_key: \"${QDRANT_API_KEY}\", "
		"collection: %s, timeout_ms: 2000}\n"
		"index:\n"
		"  keyword: {enabled: %s}\n"
		"  vector:\n"
		"    enabled: true\n"
		"    store: qd\n"
		"    embedder: {type: openai, url: \"%s\", model: %s, batch: 4, timeout_ms: %d}\n",
		e->dir, sc_env("MEMD_QDRANT_STANDIN_URL"), e->coll, keyword ? "true" : "false",
		sc_env("MEMD_OPENAI_STANDIN_URL"), e->model, embed_timeout_ms);
	cr_assert_eq(fclose(f), 0);
	o.config_path = e->config;
	return memd_open(&o, &e->m, err);
}

static void it_open_with(it_env *e, int embed_timeout_ms)
{
	memd_error err = { 0 };

	cr_assert_eq(it_try_open(e, embed_timeout_ms, 0, "\"dim\": 64", &err), 0, "memd_open: %s",
		     err.msg);
}

static int it_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void it_close(it_env *e)
{
	memd_close(e->m);
	nftw(e->dir, it_rm, IT_NFTW_FDS, FTW_DEPTH | FTW_PHYS);
}

static void it_append(it_env *e, const char *user, const char *sid, const char *id,
		      const char *text)
{
	char *body, *out = NULL;
	memd_error err = { 0 };
	int32_t r;

	cr_assert(asprintf(&body, "{\"id\": \"%s\"}", sid) >= 0);
	r = memd_session_create(e->m, "app", user, body, &out, &err);
	cr_assert(r == 0 || r == MEMD_ECONFLICT, "session: %s", err.msg); /* or made before */
	memd_free(out);
	free(body);
	out = NULL;
	cr_assert(asprintf(&body,
			   "{\"events\": [{\"id\": \"%s\", \"role\": \"user\", \"content\": \"%s\"}]}",
			   id, text) >= 0);
	r = memd_events_append(e->m, "app", user, sid, body, &out, &err);
	cr_assert_eq(r, 0, "append must not depend on the index: %s", err.msg);
	memd_free(out);
	free(body);
}

static int32_t it_search_mode(it_env *e, const char *user, const char *query, const char *mode,
			      json_t **ret, memd_error *err);

/* memd_search in vector mode: the code; *ret the parsed result on success. */
static int32_t it_search(it_env *e, const char *user, const char *query, json_t **ret,
			 memd_error *err)
{
	return it_search_mode(e, user, query, "vector", ret, err);
}

/* memd_search in the given mode: the code; *ret the parsed result on success. */
static int32_t it_search_mode(it_env *e, const char *user, const char *query, const char *mode,
			      json_t **ret, memd_error *err)
{
	char *body, *out = NULL;
	int32_t r;

	cr_assert(asprintf(&body, "{\"query\": \"%s\", \"mode\": \"%s\", \"k\": 50}", query,
			   mode) >= 0);
	memset(err, 0, sizeof(*err));
	r = memd_search(e->m, "app", user, body, &out, err);
	free(body);
	if (r == 0) {
		*ret = json_loads(out, 0, NULL);
		cr_assert_not_null(*ret);
	}
	memd_free(out);
	return r;
}

static size_t it_hits(json_t *res)
{
	return json_array_size(json_object_get(res, "results"));
}

static int it_has(json_t *res, const char *event_id)
{
	json_t *r;
	size_t i;

	json_array_foreach(json_object_get(res, "results"), i, r)
		if (strcmp(json_string_value(json_object_get(r, "event_id")), event_id) == 0)
			return 1;
	return 0;
}

/* Search until it succeeds (indexing caught up) or IT_CATCH_UP_S pass. */
static json_t *it_search_until_ok(it_env *e, const char *user, const char *query)
{
	memd_error err;
	json_t *res = NULL;
	time_t until = time(NULL) + IT_CATCH_UP_S;

	for (;;) {
		int32_t r = it_search(e, user, query, &res, &err);
		if (r == 0)
			return res;
		cr_assert(err.flags & MEMD_ERROR_RETRYABLE, "a failure while catching up is "
			  "retryable: %d %s", r, err.msg);
		cr_assert_lt(time(NULL), until, "indexing did not catch up: %s", err.msg);
		it_sleep_ms(IT_POLL_MS);
	}
}

/* Points in the test's collection, as the Qdrant stand-in counts them. */
static json_int_t it_points(const it_env *e)
{
	char *url, *hdr;
	long status = 0;
	json_t *j;
	json_int_t n;

	cr_assert(asprintf(&url, "%s/collections/%s", sc_env("MEMD_QDRANT_STANDIN_URL"), e->coll) >=
		  0);
	cr_assert(asprintf(&hdr, "api-key: %s", sc_env("QDRANT_API_KEY")) >= 0);
	j = sc_request("GET", url, NULL, hdr, &status);
	cr_assert_eq(status, 200);
	n = json_integer_value(json_object_get(json_object_get(j, "result"), "points_count"));
	json_decref(j);
	free(url);
	free(hdr);
	return n;
}

/* Failed requests the embeddings stand-in answered for the model. */
static size_t it_failed_embeds(const it_env *e)
{
	char *url;
	json_t *reqs, *r;
	size_t i, n = 0;

	cr_assert(asprintf(&url, "%s/../__standin/requests?model=%s",
			   sc_env("MEMD_OPENAI_STANDIN_URL"), e->model) >= 0);
	reqs = sc_get(url);
	free(url);
	json_array_foreach(reqs, i, r) {
		json_t *st = json_object_get(r, "status");
		n += !json_is_integer(st) || json_integer_value(st) != 200;
	}
	json_decref(reqs);
	return n;
}

/* Requests for the model that the embeddings stand-in holds unanswered
 * (their status is still null). */
static size_t it_embeds_in_flight(const it_env *e)
{
	char *url;
	json_t *reqs, *r;
	size_t i, n = 0;

	cr_assert(asprintf(&url, "%s/../__standin/requests?model=%s",
			   sc_env("MEMD_OPENAI_STANDIN_URL"), e->model) >= 0);
	reqs = sc_get(url);
	free(url);
	json_array_foreach(reqs, i, r)
		n += json_is_null(json_object_get(r, "status"));
	json_decref(reqs);
	return n;
}

Test(index_openai, vector_search_finds_events_of_the_user_only, .timeout = 60)
{
	it_env e;
	json_t *res;

	it_open(&e);
	it_append(&e, "alice", "s1", "a1", "my cat likes fish");
	it_append(&e, "alice", "s1", "a2", "the train leaves at noon");
	it_append(&e, "alice", "s2", "a3", "the cat sleeps all day");
	it_append(&e, "bob", "s1", "b1", "my cat likes fish");
	res = it_search_until_ok(&e, "alice", "cat");
	/* Hits with no similarity at all (the train) may be left out. */
	cr_expect_geq(it_hits(res), 2);
	cr_expect(it_has(res, "a1") && it_has(res, "a3"), "alice's cat events");
	cr_expect(!it_has(res, "b1"), "never bob's");
	json_t *first = json_array_get(json_object_get(res, "results"), 0);
	cr_expect(strstr(json_string_value(json_object_get(first, "text")), "cat"),
		  "a cat text ranks first");
	json_decref(res);
	cr_expect_eq(it_points(&e), 4, "one point per event");
	it_close(&e);
}

Test(index_openai, an_embedder_outage_pauses_indexing_which_catches_up, .timeout = 60)
{
	memd_error err;
	it_env e;
	json_t *res = NULL;
	int32_t r;

	it_open(&e);
	it_append(&e, "u", "s", "e1", "first words");
	it_append(&e, "u", "s", "e2", "second words");
	res = it_search_until_ok(&e, "u", "words");
	cr_expect_eq(it_hits(res), 2);
	json_decref(res);

	it_model(&e, "\"mode\": \"fail\", \"status\": 500");
	it_append(&e, "u", "s", "e3", "third words");
	it_append(&e, "u", "s", "e4", "fourth words");
	it_append(&e, "u", "s", "e5", "fifth words");
	r = it_search(&e, "u", "words", &res, &err);
	cr_expect_neq(r, 0, "a search must not claim results it cannot have");
	if (r == 0)
		json_decref(res);
	else
		cr_expect(err.flags & MEMD_ERROR_RETRYABLE, "retryable: %d %s", r, err.msg);
	cr_expect_gt(it_failed_embeds(&e), 0, "the indexer tried during the outage");
	cr_expect_eq(it_points(&e), 2, "nothing indexed while the embedder is down");

	it_model(&e, "\"mode\": \"ok\"");
	res = it_search_until_ok(&e, "u", "words");
	cr_expect_eq(it_hits(res), 5, "caught up");
	cr_expect(it_has(res, "e3") && it_has(res, "e4") && it_has(res, "e5"));
	json_decref(res);
	cr_expect_eq(it_points(&e), 5);
	it_close(&e);
}

Test(index_openai, a_qdrant_outage_pauses_indexing_which_catches_up, .timeout = 60)
{
	char *url, *body;
	it_env e;
	json_t *res;

	it_open(&e);
	it_append(&e, "u", "s", "e1", "first words");
	res = it_search_until_ok(&e, "u", "words");
	cr_expect_eq(it_hits(res), 1);
	json_decref(res);

	/* The next several requests to the collection fail with 503. */
	cr_assert(asprintf(&url, "%s/__standin/faults", sc_env("MEMD_QDRANT_STANDIN_URL")) >= 0);
	cr_assert(asprintf(&body, "{\"collection\": \"%s\", \"count\": 4, \"status\": 503}",
			   e.coll) >= 0);
	json_decref(sc_post(url, body));
	free(url);
	free(body);
	it_append(&e, "u", "s", "e2", "second words");
	it_append(&e, "u", "s", "e3", "third words");

	res = it_search_until_ok(&e, "u", "words");
	cr_expect_eq(it_hits(res), 3, "caught up after the outage");
	cr_expect(it_has(res, "e2") && it_has(res, "e3"));
	json_decref(res);
	cr_expect_eq(it_points(&e), 3);

	cr_assert(asprintf(&url, "%s/__standin/requests?collection=%s",
			   sc_env("MEMD_QDRANT_STANDIN_URL"), e.coll) >= 0);
	json_t *reqs = sc_get(url), *q;
	size_t i, failed = 0;
	free(url);
	json_array_foreach(reqs, i, q)
		failed += json_integer_value(json_object_get(q, "status")) == 503;
	json_decref(reqs);
	cr_expect_eq(failed, 4, "the outage happened");
	it_close(&e);
}

/* A hanging embeddings endpoint holds nobody up at close: after its bounded
 * catch-up, memd_close cancels the embedder call in flight (it is made
 * again at the next start). */
Test(index_openai, close_does_not_wait_for_a_hanging_embedder, .timeout = 120)
{
	char members[64];
	struct timespec t0, t1;
	time_t until;
	it_env e;

	it_open_with(&e, IT_HANG_EMBED_TIMEOUT_MS);
	snprintf(members, sizeof(members), "\"mode\": \"timeout\", \"delay_ms\": %d", IT_HANG_MS);
	it_model(&e, members);
	it_append(&e, "u", "s", "e1", "words the indexer cannot embed yet");
	/* Close once the embedder's call is in flight (the stand-in holds
	 * it), not after a guessed time. */
	until = time(NULL) + IT_CATCH_UP_S;
	while (it_embeds_in_flight(&e) == 0) {
		cr_assert_lt(time(NULL), until, "no embeddings request reached the stand-in within "
			     "%d s", IT_CATCH_UP_S);
		it_sleep_ms(IT_POLL_MS);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	memd_close(e.m);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	e.m = NULL;
	cr_expect_lt(t1.tv_sec - t0.tv_sec, IT_CLOSE_BOUND_S,
		     "memd_close took %ld s with a hanging embedder", (long)(t1.tv_sec - t0.tv_sec));
	it_close(&e);
}

/* The durable vector cursors in the test's SQLite session store: their
 * number, and the first one's name in name (sized IT_PATH_MAX). */
static int it_vector_cursors(const it_env *e, char name[IT_PATH_MAX])
{
	char path[IT_PATH_MAX + 16];
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int n = 0;

	name[0] = '\0';
	snprintf(path, sizeof(path), "%s/memd.db", e->dir);
	cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	sqlite3_busy_timeout(db, IT_EMBED_TIMEOUT_MS);
	cr_assert_eq(sqlite3_prepare_v2(db,
					"SELECT name FROM cursors WHERE name LIKE 'vector:%' ORDER BY name",
					-1, &st, NULL),
		     SQLITE_OK, "%s", sqlite3_errmsg(db));
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (n++ == 0)
			snprintf(name, IT_PATH_MAX, "%s", (const char *)sqlite3_column_text(st, 0));
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

#define IT_DOWN_EVENTS 5

/* The embeddings endpoint is down when memd starts and no dim is
 * configured: memd opens anyway, sessions and keyword search work, vector
 * and hybrid searches say "unavailable, retry", and once the endpoint
 * answers the indexer learns the dimension and indexes every event once. */
Test(index_openai, starts_without_the_endpoint_and_learns_the_dimension_later, .timeout = 90)
{
	static const char *const ids[IT_DOWN_EVENTS] = { "d1", "d2", "d3", "d4", "d5" };
	char cursor[IT_PATH_MAX];
	memd_error err = { 0 };
	json_t *res = NULL;
	size_t i;
	it_env e;
	int32_t r;

	r = it_try_open(&e, IT_EMBED_TIMEOUT_MS, 1,
			"\"dim\": 64, \"mode\": \"fail\", \"status\": 503", &err);
	cr_assert_eq(r, 0, "memd_open while the endpoint is down: %d %s", r, err.msg);
	for (i = 0; i < IT_DOWN_EVENTS; i++)
		it_append(&e, "u", i % 2 ? "s2" : "s1", ids[i], "words about a down endpoint");

	r = it_search_mode(&e, "u", "words", "keyword", &res, &err);
	cr_assert_eq(r, 0, "keyword search while the endpoint is down: %s", err.msg);
	cr_expect_eq(it_hits(res), IT_DOWN_EVENTS);
	json_decref(res);
	res = NULL;

	r = it_search_mode(&e, "u", "words", "vector", &res, &err);
	cr_assert_eq(r, MEMD_EUNAVAIL, "vector search before the dimension is known: %d %s", r,
		     err.msg);
	cr_expect(err.flags & MEMD_ERROR_RETRYABLE, "retryable: %s", err.msg);
	cr_expect(strstr(err.msg, "dimension"), "says why: %s", err.msg);
	r = it_search_mode(&e, "u", "words", "hybrid", &res, &err);
	cr_assert_eq(r, MEMD_EUNAVAIL, "hybrid search before the dimension is known: %d %s", r,
		     err.msg);
	cr_expect(err.flags & MEMD_ERROR_RETRYABLE);
	cr_expect_gt(it_failed_embeds(&e), 1, "the indexer kept asking the endpoint");
	cr_expect_eq(it_vector_cursors(&e, cursor), 0, "no cursor before the dimension: %s", cursor);

	it_model(&e, "\"mode\": \"ok\"");
	res = it_search_until_ok(&e, "u", "words");
	cr_expect_eq(it_hits(res), IT_DOWN_EVENTS, "every event once");
	for (i = 0; i < IT_DOWN_EVENTS; i++) {
		json_t *h;
		size_t j, seen = 0;
		json_array_foreach(json_object_get(res, "results"), j, h)
			seen += strcmp(json_string_value(json_object_get(h, "event_id")), ids[i]) == 0;
		cr_expect_eq(seen, 1, "%s found %zu times", ids[i], seen);
	}
	json_decref(res);
	cr_expect_eq(it_points(&e), IT_DOWN_EVENTS, "one point per event");

	r = it_search_mode(&e, "u", "words", "hybrid", &res, &err);
	cr_expect_eq(r, 0, "hybrid search once indexed: %s", err.msg);
	if (r == 0)
		json_decref(res);

	/* Later appends are indexed as usual. */
	it_append(&e, "u", "s1", "d6", "more words");
	res = it_search_until_ok(&e, "u", "more");
	cr_expect(it_has(res, "d6"));
	json_decref(res);

	cr_expect_eq(it_vector_cursors(&e, cursor), 1, "one vector cursor");
	cr_expect(strncmp(cursor, "vector:qd:openai-64-", strlen("vector:qd:openai-64-")) == 0,
		  "the cursor carries the learned dimension: %s", cursor);
	it_close(&e);
}

/* A dimension probe the endpoint refuses for good (HTTP 400) still fails
 * memd_open, and not as retryable. */
Test(index_openai, a_non_retryable_dimension_failure_fails_open, .timeout = 60)
{
	memd_error err = { 0 };
	it_env e;
	int32_t r;

	r = it_try_open(&e, IT_EMBED_TIMEOUT_MS, 1, "\"dim\": 64, \"mode\": \"fail\", \"status\": 400",
			&err);
	cr_expect_neq(r, 0, "memd_open must fail");
	cr_expect(!(err.flags & MEMD_ERROR_RETRYABLE), "not retryable: %d %s", r, err.msg);
	cr_expect(strstr(err.msg, "dimension"), "says what failed: %s", err.msg);
	if (r == 0)
		memd_close(e.m);
	e.m = NULL;
	it_close(&e);
}
