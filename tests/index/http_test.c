/* SPDX-License-Identifier: MIT */
/*
 * POST /v1/apps/{app}/users/{user}/search and .../index:rebuild over real
 * HTTP (`memd serve` through tests/http's harness, every response checked
 * against api/openapi.yaml): modes, validation, isolation, scopes of API
 * keys, rebuild (a background job, polled until it succeeded; jobs_test.c
 * tests the jobs themselves), and the vector index flushed on SIGTERM.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define VECTOR_YAML                                               \
	"  vec: {plugin: filevec, path: vec}\n"                   \
	"index:\n"                                                \
	"  vector: {enabled: true, store: vec, embedder: {dim: 64}}\n"
#define KEY_R "search-test-read-key-0123456789abcdef"
#define KEY_A "search-test-admin-key-0123456789abcdef"
#define BASE "/v1/apps/app/users/"
/* How long a rebuild job may take here, and how often it is polled. */
#define JOB_WAIT_POLLS 3000
#define JOB_POLL_NS 10000000L

static hs H;

static void teardown(void)
{
	hs_finish(&H);
}

TestSuite(http_search, .fini = teardown, .timeout = 60);

static void append(const char *user, const char *sid, const char *texts_json_array)
{
	char path[256], body[256], *events;
	json_t *r;

	snprintf(path, sizeof(path), BASE "%s/sessions", user);
	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	hs_resp resp = { 0 };
	hs_json(&H, "POST", path, body, &resp);
	cr_assert(resp.status == 201 || resp.status == 409, "create: %ld", resp.status);
	hs_resp_clear(&resp);
	snprintf(path, sizeof(path), BASE "%s/sessions/%s/events", user, sid);
	cr_assert_geq(asprintf(&events, "{\"events\":%s}", texts_json_array), 0);
	r = hs_expect(&H, "POST", path, events, 200);
	free(events);
	json_decref(r);
}

/* Poll the job named by a rebuild's Location (with headers hdr) until it
 * succeeded. */
static void wait_succeeded(const char *location, const char *const *hdr)
{
	const struct timespec poll = { 0, JOB_POLL_NS };
	char state[32] = "";

	cr_assert_not_null(location, "the rebuild names its job");
	for (int i = 0; i < JOB_WAIT_POLLS; i++) {
		hs_resp r = { 0 };
		hs_req(&H, "GET", location, hdr, NULL, 0, &r);
		cr_assert_eq(r.status, 200, "GET %s: %ld", location, r.status);
		snprintf(state, sizeof(state), "%s",
			 json_string_value(json_object_get(r.json, "state")));
		hs_resp_clear(&r);
		if (strcmp(state, "succeeded") == 0)
			return;
		cr_assert(strcmp(state, "queued") == 0 || strcmp(state, "running") == 0, "job %s",
			  state);
		nanosleep(&poll, NULL);
	}
	cr_assert_fail("the rebuild job is still %s", state);
}

/* POST index:rebuild with hdr, assert 202, wait for the job. */
static void rebuild(const char *user, const char *const *hdr)
{
	char path[256], *loc;
	hs_resp r = { 0 };

	snprintf(path, sizeof(path), BASE "%s/index:rebuild", user);
	hs_req(&H, "POST", path, hdr, NULL, 0, &r);
	cr_assert_eq(r.status, 202, "rebuild: %ld %s", r.status, r.body);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r.json, "scope"), "user")),
			 user);
	loc = strdup(hs_header(&r, "Location"));
	hs_resp_clear(&r);
	wait_succeeded(loc, hdr);
	free(loc);
}

static json_t *search(const char *user, const char *body)
{
	char path[256];
	snprintf(path, sizeof(path), BASE "%s/search", user);
	return hs_expect(&H, "POST", path, body, 200);
}

static const char *first_text(json_t *res)
{
	json_t *hit = json_array_get(json_object_get(res, "results"), 0);
	cr_assert_not_null(hit, "no results");
	return json_string_value(json_object_get(hit, "text"));
}

Test(http_search, keyword_search_with_filters_and_errors)
{
	json_t *res;
	hs_resp r = { 0 };

	hs_start(&H, NULL, NULL);
	append("alice", "s1",
	       "[{\"role\":\"user\",\"content\":\"I booked a flight to Lisbon\"},"
	       "{\"role\":\"assistant\",\"author\":\"planner\",\"content\":\"Your Lisbon hotel is near the river\"}]");
	append("bob", "s1", "[{\"role\":\"user\",\"content\":\"Lisbon is bob's secret\"}]");

	res = search("alice", "{\"query\":\"flights\"}");
	cr_assert_str_eq(json_string_value(json_object_get(res, "mode")), "keyword");
	cr_assert_str_eq(first_text(res), "I booked a flight to Lisbon");
	json_decref(res);

	res = search("alice", "{\"query\":\"lisbon\",\"authors\":[\"planner\"]}");
	cr_assert_eq(json_array_size(json_object_get(res, "results")), 1);
	cr_assert_str_eq(first_text(res), "Your Lisbon hotel is near the river");
	json_decref(res);

	res = search("alice", "{\"query\":\"lisbon\",\"k\":50}");
	cr_assert_eq(json_array_size(json_object_get(res, "results")), 2, "alice never sees bob's");
	json_decref(res);

	hs_json(&H, "POST", BASE "alice/search", "{\"query\":\"\"}", &r);
	cr_assert_eq(r.status, 400);
	cr_assert_str_eq(hs_error_code(&r), "invalid_request");
	hs_resp_clear(&r);
	hs_json(&H, "POST", BASE "alice/search", "{\"query\":\"x\",\"mode\":\"vector\"}", &r);
	cr_assert_eq(r.status, 400, "vector search is not enabled");
	hs_resp_clear(&r);
	hs_json(&H, "GET", BASE "alice/search", NULL, &r);
	cr_assert_eq(r.status, 405);
	hs_resp_clear(&r);

	rebuild("alice", NULL);
	res = search("alice", "{\"query\":\"lisbon\",\"k\":50}");
	cr_assert_eq(json_array_size(json_object_get(res, "results")), 2);
	json_decref(res);
}

/* POST's 400 for body, whose message contains want. */
static void expect_400(const char *body, const char *want)
{
	hs_resp r = { 0 };
	hs_json(&H, "POST", BASE "alice/search", body, &r);
	cr_assert_eq(r.status, 400, "%s: %ld", body, r.status);
	cr_assert_not_null(strstr(r.body, want), "%s: %s", body, r.body);
	hs_resp_clear(&r);
}

/* "sources" chooses events and/or memories (bad values are 400s naming
 * the field); every result says its source, a memory made over REST
 * comes back in the memory shape and goes when deleted; an author's
 * name finds what the author wrote (the author is a field of the
 * keyword index). */
Test(http_search, sources_and_the_author_field)
{
	json_t *res, *hit;

	hs_start(&H, NULL, NULL);
	append("alice", "s1",
	       "[{\"role\":\"user\",\"author\":\"Caroline\",\"content\":\"I went hiking\"},"
	       "{\"role\":\"assistant\",\"author\":\"planner\",\"content\":\"Nice trail\"}]");

	res = search("alice", "{\"query\":\"what did caroline do\"}");
	cr_assert_eq(json_array_size(json_object_get(res, "results")), 1);
	hit = json_array_get(json_object_get(res, "results"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(hit, "source")), "event");
	cr_assert_str_eq(first_text(res), "I went hiking");
	json_decref(res);

	res = search("alice", "{\"query\":\"hiking\",\"sources\":[\"events\"]}");
	cr_assert_eq(json_array_size(json_object_get(res, "results")), 1);
	json_decref(res);
	res = search("alice", "{\"query\":\"hiking\",\"sources\":[\"memories\"]}");
	cr_assert_eq(json_array_size(json_object_get(res, "results")), 0, "events are not memories");
	json_decref(res);
	res = search("alice", "{\"query\":\"hiking\",\"sources\":[\"memories\",\"events\"]}");
	cr_assert_eq(json_array_size(json_object_get(res, "results")), 1);
	json_decref(res);

	/* A memory made over REST is found with the memory shape (the
	 * harness checks it against the spec), alone or beside events. */
	json_decref(hs_expect(&H, "POST", BASE "alice/memories",
			      "{\"id\":\"m1\",\"text\":\"Caroline loves hiking in the Alps\","
			      "\"kind\":\"preference\",\"topics\":[\"outdoors\"],"
			      "\"entities\":[\"Caroline\"]}",
			      201));
	res = search("alice", "{\"query\":\"hiking\",\"sources\":[\"memories\"]}");
	cr_assert_eq(json_array_size(json_object_get(res, "results")), 1);
	hit = json_array_get(json_object_get(res, "results"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(hit, "source")), "memory");
	cr_assert_str_eq(json_string_value(json_object_get(hit, "memory_id")), "m1");
	cr_assert_str_eq(json_string_value(json_object_get(hit, "kind")), "preference");
	json_decref(res);
	res = search("alice", "{\"query\":\"hiking outdoors\"}");
	cr_assert_eq(json_array_size(json_object_get(res, "results")), 2, "both kinds by default");
	json_decref(res);
	json_decref(hs_expect(&H, "DELETE", BASE "alice/memories/m1", NULL, 204));
	res = search("alice", "{\"query\":\"hiking\",\"sources\":[\"memories\"]}");
	cr_assert_eq(json_array_size(json_object_get(res, "results")), 0, "deleted");
	json_decref(res);

	expect_400("{\"query\":\"x\",\"sources\":[\"nope\"]}", "sources[0]: must be");
	expect_400("{\"query\":\"x\",\"sources\":[\"events\",3]}", "sources[1]: must be");
	expect_400("{\"query\":\"x\",\"sources\":[]}", "sources: must be a non-empty array");
	expect_400("{\"query\":\"x\",\"sources\":\"events\"}", "sources: must be a non-empty array");
}

Test(http_search, vector_and_hybrid_and_scopes)
{
	const char *read_hdr[] = { "Authorization: Bearer " KEY_R, NULL };
	const char *admin_hdr[] = { "Authorization: Bearer " KEY_A, NULL };
	const char *body = "{\"query\":\"puppy running\",\"mode\":\"hybrid\"}";
	hs_resp r = { 0 };

	hs_start(&H, "  api_keys:\n    - {key: " KEY_R ", scope: read}\n    - {key: " KEY_A ", scope: admin}\n",
		 VECTOR_YAML);
	/* Appends need write: the admin key. */
	const char *create = "{\"id\":\"s1\"}";
	hs_req(&H, "POST", BASE "alice/sessions", admin_hdr, create, strlen(create), &r);
	cr_assert_eq(r.status, 201);
	hs_resp_clear(&r);
	const char *events = "{\"events\":[{\"role\":\"user\",\"content\":\"My puppy loves running\"},"
			     "{\"role\":\"user\",\"content\":\"Invoices are due on Friday\"}]}";
	hs_req(&H, "POST", BASE "alice/sessions/s1/events", admin_hdr, events, strlen(events), &r);
	cr_assert_eq(r.status, 200);
	hs_resp_clear(&r);

	for (int i = 0; i < 2; i++) {
		const char *b = i ? body : "{\"query\":\"puppy running\",\"mode\":\"vector\"}";
		hs_req(&H, "POST", BASE "alice/search", read_hdr, b, strlen(b), &r);
		cr_assert_eq(r.status, 200, "a read key may search");
		cr_assert_str_eq(first_text(r.json), "My puppy loves running");
		hs_resp_clear(&r);
	}
	hs_req(&H, "POST", BASE "alice/index:rebuild", read_hdr, NULL, 0, &r);
	cr_assert_eq(r.status, 403, "rebuild needs admin");
	hs_resp_clear(&r);
	rebuild("alice", admin_hdr);
	hs_req(&H, "POST", BASE "alice/search", read_hdr, body, strlen(body), &r);
	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(first_text(r.json), "My puppy loves running");
	hs_resp_clear(&r);
	hs_req(&H, "POST", BASE "alice/search", NULL, body, strlen(body), &r);
	cr_assert_eq(r.status, 401);
	hs_resp_clear(&r);
}

static long long scalar(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	long long v = -1;
	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

Test(http_search, sigterm_flushes_the_vector_index)
{
	char events[8192], path[PATH_MAX + 16];
	size_t n = 0;
	sqlite3 *db;
	json_t *res;

	hs_start(&H, NULL, VECTOR_YAML);
	n += (size_t)snprintf(events + n, sizeof(events) - n, "[");
	for (int i = 0; i < 100; i++)
		n += (size_t)snprintf(events + n, sizeof(events) - n,
				      "%s{\"role\":\"user\",\"content\":\"note number %d about gardens\"}",
				      i ? "," : "", i);
	snprintf(events + n, sizeof(events) - n, "]");
	append("alice", "s1", events);
	hs_stop(&H);

	snprintf(path, sizeof(path), "%s/memd.db", H.dir);
	cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	long long cursor = scalar(db, "SELECT position FROM cursors WHERE name LIKE 'vector:vec:%'");
	long long head = scalar(db, "SELECT last FROM feed_counter");
	sqlite3_close(db);
	cr_assert_eq(cursor, head, "the vector index caught up before exit (cursor %lld, head %lld)",
		     cursor, head);

	hs_restart(&H);
	res = search("alice", "{\"query\":\"gardens\",\"mode\":\"vector\",\"k\":200}");
	cr_assert_eq(json_array_size(json_object_get(res, "results")), 100);
	json_decref(res);
}
