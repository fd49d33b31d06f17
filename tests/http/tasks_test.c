/* SPDX-License-Identifier: MIT */
/*
 * A2A tasks over real HTTP (`memd serve`): PUT creates (201 with Location
 * and ETag) and replaces (200), GET with history_length, list with
 * filters and cursors, DELETE (204); the A2A Task checked member by
 * member (400 naming it, nothing stored); If-Match and If-None-Match: *
 * (409 for another version or an existing task, 404 for a missing one);
 * a terminal state kept (409 naming both states); a task saved with a
 * user goes with the user's session and with the user; scopes. Every
 * response is checked against api/openapi.yaml by the harness. Each test
 * runs over SQLite and over the memory store.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define TASKS "/v1/apps/demo/tasks"
#define USER "/v1/apps/demo/users/ann"
#define BODY_MAX 2048
#define PATH_MAX_LEN 512
#define PAGE_TASKS 7
#define PAGE_LIMIT 3

#define KEY_R "read-key-0123456789abcdef0123456789abcdef"
#define KEY_W "write-key-0123456789abcdef0123456789abcdef"

static hs H;

static void setup_sqlite(void)
{
	memset(&H, 0, sizeof(H));
}

static void setup_memory(void)
{
	memset(&H, 0, sizeof(H));
	snprintf(H.store_plugin, sizeof(H.store_plugin), "memory");
}

static void teardown(void)
{
	hs_finish(&H);
}

TestSuite(tasks_sqlite, .init = setup_sqlite, .fini = teardown, .timeout = 60);
TestSuite(tasks_memory, .init = setup_memory, .fini = teardown, .timeout = 60);

/* Each test body runs over both stores. */
#define BOTH(name)                                              \
	static void name(void);                                 \
	Test(tasks_sqlite, name) { name(); }                    \
	Test(tasks_memory, name) { name(); }                    \
	static void name(void)

static const char *str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static json_int_t num(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

/* An A2A Task text: id, contextId, state, and extra members (text starting
 * with a comma, or ""). */
static const char *task(char buf[BODY_MAX], const char *id, const char *ctx, const char *state,
			const char *extra)
{
	snprintf(buf, BODY_MAX,
		 "{\"id\": \"%s\", \"contextId\": \"%s\", \"status\": {\"state\": \"%s\"}%s}", id,
		 ctx, state, extra);
	return buf;
}

/* One request with extra headers (NULL-terminated), the status back. */
static long with_headers(const char *method, const char *path, const char *const *hdr,
			 const char *body, hs_resp *out)
{
	hs_req(&H, method, path, hdr, body, body ? strlen(body) : 0, out);
	return out->status;
}

static long put(const char *path, const char *body, hs_resp *out)
{
	const char *hdr[] = { "Content-Type: application/json", NULL };
	return with_headers("PUT", path, hdr, body, out);
}

/* PUT path with one more header, the status back (response dropped
 * unless out is given). */
static long put_with(const char *path, const char *header, const char *body, hs_resp *out)
{
	const char *hdr[] = { "Content-Type: application/json", header, NULL };
	hs_resp r;
	long status = with_headers("PUT", path, hdr, body, out ? out : &r);

	if (!out)
		hs_resp_clear(&r);
	return status;
}

static long status_of(const char *method, const char *path)
{
	hs_resp r;
	long s;

	hs_json(&H, method, path, NULL, &r);
	s = r.status;
	hs_resp_clear(&r);
	return s;
}

BOTH(put_creates_then_replaces_and_get_reads)
{
	char b[BODY_MAX];
	hs_resp r;
	json_t *t;

	hs_start(&H, NULL, NULL);
	cr_assert_eq(put(TASKS "/t1",
			 task(b, "t1", "c1", "submitted",
			      ", \"history\": [{\"kind\": \"message\", \"messageId\": \"m1\", "
			      "\"role\": \"user\", \"parts\": [{\"kind\": \"text\", \"text\": "
			      "\"hi\"}]}], \"x-vendor\": {\"a\": [1, 2]}"),
			 &r),
		     201, "%s", r.body);
	cr_assert_str_eq(hs_header(&r, "Location"), TASKS "/t1");
	cr_assert_str_eq(hs_header(&r, "ETag"), "\"1\"");
	cr_assert_eq(num(r.json, "version"), 1);
	cr_assert(json_is_null(json_object_get(r.json, "user")));
	t = json_object_get(r.json, "task");
	cr_assert_str_eq(str(t, "kind"), "task", "the kind is added when absent");
	cr_assert_str_eq(str(t, "contextId"), "c1");
	cr_assert_eq(json_integer_value(json_array_get(
			     json_object_get(json_object_get(t, "x-vendor"), "a"), 1)),
		     2, "unknown members are kept as given");
	cr_assert_str_eq(str(r.json, "created"), str(r.json, "updated"));
	hs_resp_clear(&r);

	/* A save of the whole task again replaces it: 200, version 2. */
	cr_assert_eq(put(TASKS "/t1",
			 task(b, "t1", "c1", "working",
			      ", \"kind\": \"task\", \"history\": [{\"kind\": \"message\", "
			      "\"messageId\": \"m1\", \"role\": \"user\", \"parts\": [{\"kind\": "
			      "\"text\", \"text\": \"hi\"}]}, {\"kind\": \"message\", \"messageId\": "
			      "\"m2\", \"role\": \"agent\", \"parts\": [{\"kind\": \"data\", "
			      "\"data\": {\"x\": 1}}]}, {\"messageId\": \"m3\", \"role\": \"agent\", "
			      "\"parts\": [{\"kind\": \"file\", \"file\": {\"uri\": \"https://x/y\", "
			      "\"mimeType\": \"text/plain\"}}]}], \"artifacts\": [{\"artifactId\": "
			      "\"a1\", \"name\": \"out\", \"parts\": [{\"kind\": \"file\", \"file\": "
			      "{\"bytes\": \"aGk=\"}}]}], \"metadata\": {\"k\": \"v\"}"),
			 &r),
		     200, "%s", r.body);
	cr_assert_str_eq(hs_header(&r, "ETag"), "\"2\"");
	cr_assert_null(hs_header(&r, "Location"));
	cr_assert_eq(num(r.json, "version"), 2);
	hs_resp_clear(&r);

	hs_json(&H, "GET", TASKS "/t1", NULL, &r);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(hs_header(&r, "ETag"), "\"2\"");
	t = json_object_get(r.json, "task");
	cr_assert_str_eq(str(json_object_get(t, "status"), "state"), "working");
	cr_assert_eq(json_array_size(json_object_get(t, "history")), 3);
	cr_assert_null(json_object_get(t, "x-vendor"), "a save replaces the task whole");
	cr_assert_str_eq(str(json_array_get(json_object_get(t, "artifacts"), 0), "artifactId"), "a1");
	hs_resp_clear(&r);

	/* history_length: the most recent messages only. */
	hs_json(&H, "GET", TASKS "/t1?history_length=2", NULL, &r);
	cr_assert_eq(r.status, 200, "%s", r.body);
	t = json_object_get(r.json, "task");
	cr_assert_eq(json_array_size(json_object_get(t, "history")), 2);
	cr_assert_str_eq(str(json_array_get(json_object_get(t, "history"), 0), "messageId"), "m2");
	hs_resp_clear(&r);
	hs_json(&H, "GET", TASKS "/t1?history_length=0", NULL, &r);
	cr_assert_eq(json_array_size(json_object_get(json_object_get(r.json, "task"), "history")), 0);
	hs_resp_clear(&r);
	hs_json(&H, "GET", TASKS "/t1?history_length=99", NULL, &r);
	cr_assert_eq(json_array_size(json_object_get(json_object_get(r.json, "task"), "history")), 3);
	hs_resp_clear(&r);
	hs_expect_error(&H, "GET", TASKS "/t1?history_length=-1", NULL, 400, "invalid_request",
			"history_length");
	hs_expect_error(&H, "GET", TASKS "/nope", NULL, 404, "not_found", "nope");
}

/* Each bad body is a 400 whose message names what is wrong, and nothing
 * is stored. */
BOTH(a_bad_task_is_refused_naming_the_member)
{
	static const struct {
		const char *body;
		const char *msg;
	} cases[] = {
		{ "", "body" },
		{ "[1]", "body" },
		{ "{\"id\": \"t\", \"contextId\": \"c\", \"status\": {\"state\": \"working\"}",
		  "not valid JSON" },
		{ "{\"id\": \"other\", \"contextId\": \"c\", \"status\": {\"state\": \"working\"}}",
		  "id: must equal the task id of the path" },
		{ "{\"contextId\": \"c\", \"status\": {\"state\": \"working\"}}", "id: required" },
		{ "{\"id\": 7, \"contextId\": \"c\", \"status\": {\"state\": \"working\"}}",
		  "id: must be a string" },
		{ "{\"kind\": \"message\", \"id\": \"t\", \"contextId\": \"c\", \"status\": {\"state\": "
		  "\"working\"}}", "kind: must be \"task\"" },
		{ "{\"id\": \"t\", \"status\": {\"state\": \"working\"}}", "contextId: required" },
		{ "{\"id\": \"t\", \"contextId\": \"c\"}", "status: required" },
		{ "{\"id\": \"t\", \"contextId\": \"c\", \"status\": \"working\"}",
		  "status: must be an object" },
		{ "{\"id\": \"t\", \"contextId\": \"c\", \"status\": {\"state\": \"done\"}}",
		  "status.state: must be one of" },
		{ "{\"id\": \"t\", \"contextId\": \"c\", \"status\": {\"state\": \"working\", "
		  "\"message\": {\"messageId\": \"m\", \"role\": \"robot\", \"parts\": []}}}",
		  "status.message.role: must be user or agent" },
		{ "{\"id\": \"t\", \"contextId\": \"c\", \"status\": {\"state\": \"working\", "
		  "\"timestamp\": 5}}", "status.timestamp: must be a string" },
		{ "{\"id\": \"t\", \"contextId\": \"c\", \"status\": {\"state\": \"working\"}, "
		  "\"history\": {}}", "history: must be an array" },
		{ "{\"id\": \"t\", \"contextId\": \"c\", \"status\": {\"state\": \"working\"}, "
		  "\"history\": [{\"messageId\": \"m\", \"role\": \"user\", \"parts\": []}, "
		  "{\"messageId\": \"m2\", \"role\": \"user\", \"parts\": [{\"kind\": \"text\", "
		  "\"text\": 1}]}]}", "history[1].parts[0].text: must be a string" },
		{ "{\"id\": \"t\", \"contextId\": \"c\", \"status\": {\"state\": \"working\"}, "
		  "\"history\": [{\"role\": \"user\", \"parts\": []}]}", "history[0].messageId: required" },
		{ "{\"id\": \"t\", \"contextId\": \"c\", \"status\": {\"state\": \"working\"}, "
		  "\"history\": [{\"kind\": \"task\", \"messageId\": \"m\", \"role\": \"user\", "
		  "\"parts\": []}]}", "history[0].kind: must be \"message\"" },
		{ "{\"id\": \"t\", \"contextId\": \"c\", \"status\": {\"state\": \"working\"}, "
		  "\"history\": [{\"messageId\": \"m\", \"role\": \"user\", \"parts\": [{\"kind\": "
		  "\"video\"}]}]}", "history[0].parts[0].kind: must be text, file or data" },
		{ "{\"id\": \"t\", \"contextId\": \"c\", \"status\": {\"state\": \"working\"}, "
		  "\"history\": [{\"messageId\": \"m\", \"role\": \"user\", \"parts\": [{\"kind\": "
		  "\"file\", \"file\": {\"name\": \"x\"}}]}]}",
		  "history[0].parts[0].file: must have one of bytes and uri" },
		{ "{\"id\": \"t\", \"contextId\": \"c\", \"status\": {\"state\": \"working\"}, "
		  "\"history\": [{\"messageId\": \"m\", \"role\": \"user\", \"parts\": [{\"kind\": "
		  "\"data\", \"data\": [1]}]}]}", "history[0].parts[0].data: must be an object" },
		{ "{\"id\": \"t\", \"contextId\": \"c\", \"status\": {\"state\": \"working\"}, "
		  "\"artifacts\": [{\"parts\": []}]}", "artifacts[0].artifactId: required" },
		{ "{\"id\": \"t\", \"contextId\": \"c\", \"status\": {\"state\": \"working\"}, "
		  "\"artifacts\": [{\"artifactId\": \"a\", \"parts\": [], \"name\": 3}]}",
		  "artifacts[0].name: must be a string" },
		{ "{\"id\": \"t\", \"contextId\": \"c\", \"status\": {\"state\": \"working\"}, "
		  "\"artifacts\": [{\"artifactId\": \"a\"}]}", "artifacts[0].parts: required" },
		{ "{\"id\": \"t\", \"contextId\": \"c\", \"status\": {\"state\": \"working\"}, "
		  "\"metadata\": []}", "metadata: must be an object" },
		{ "{\"id\": \"t\", \"contextId\": \"\", \"status\": {\"state\": \"working\"}}",
		  "contextId: must be 1..255 bytes" },
	};
	hs_resp r;

	hs_start(&H, NULL, NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		put(TASKS "/t", cases[i].body, &r);
		cr_assert_eq(r.status, 400, "case %zu: %s", i, r.body);
		cr_assert_str_eq(hs_error_code(&r), "invalid_request", "case %zu", i);
		cr_assert(strstr(json_string_value(json_object_get(json_object_get(r.json, "error"),
								   "message")),
				 cases[i].msg),
			  "case %zu: want '%s' in %s", i, cases[i].msg, r.body);
		hs_resp_clear(&r);
	}
	cr_assert_eq(status_of("GET", TASKS "/t"), 404, "a refused save stores nothing");
}

BOTH(conditional_saves_and_deletes)
{
	char b[BODY_MAX];
	hs_resp r;

	hs_start(&H, NULL, NULL);
	/* If-Match on a task that does not exist: 404, nothing made. */
	cr_assert_eq(put_with(TASKS "/t", "If-Match: \"1\"", task(b, "t", "c", "working", ""),
			      NULL),
		     404);
	cr_assert_eq(status_of("GET", TASKS "/t"), 404);
	/* If-None-Match: * creates once. */
	cr_assert_eq(put_with(TASKS "/t", "If-None-Match: *", task(b, "t", "c", "submitted", ""),
			      NULL),
		     201);
	put_with(TASKS "/t", "If-None-Match: *", task(b, "t", "c", "working", ""), &r);
	cr_assert_eq(r.status, 409, "%s", r.body);
	cr_assert_str_eq(hs_error_code(&r), "conflict");
	cr_assert(strstr(r.body, "exists"), "%s", r.body);
	hs_resp_clear(&r);
	/* If-Match the version read: saved; the same version again: 409. */
	cr_assert_eq(put_with(TASKS "/t", "If-Match: \"1\"", task(b, "t", "c", "working", ""), &r),
		     200, "%s", r.body);
	cr_assert_str_eq(hs_header(&r, "ETag"), "\"2\"");
	hs_resp_clear(&r);
	put_with(TASKS "/t", "If-Match: \"1\"", task(b, "t", "c", "input-required", ""), &r);
	cr_assert_eq(r.status, 409, "%s", r.body);
	cr_assert(strstr(r.body, "version 2"), "%s", r.body);
	hs_resp_clear(&r);
	cr_assert_eq(put_with(TASKS "/t", "If-Match: 2", task(b, "t", "c", "input-required", ""),
			      NULL),
		     200, "a bare version is taken too");
	cr_assert_eq(put_with(TASKS "/t", "If-Match: *", task(b, "t", "c", "working", ""), NULL),
		     200, "* is any version");
	/* Bad headers. */
	put_with(TASKS "/t", "If-Match: \"x\"", task(b, "t", "c", "working", ""), &r);
	cr_assert_eq(r.status, 400);
	cr_assert(strstr(r.body, "If-Match"), "%s", r.body);
	hs_resp_clear(&r);
	put_with(TASKS "/t", "If-None-Match: \"3\"", task(b, "t", "c", "working", ""), &r);
	cr_assert_eq(r.status, 400);
	cr_assert(strstr(r.body, "If-None-Match"), "%s", r.body);
	hs_resp_clear(&r);
	{
		const char *hdr[] = { "Content-Type: application/json", "If-Match: \"4\"",
				      "If-None-Match: *", NULL };
		with_headers("PUT", TASKS "/t", hdr, task(b, "t", "c", "working", ""), &r);
		cr_assert_eq(r.status, 400, "%s", r.body);
		hs_resp_clear(&r);
	}
	hs_json(&H, "GET", TASKS "/t", NULL, &r);
	cr_assert_eq(num(r.json, "version"), 4, "%s", r.body);
	hs_resp_clear(&r);

	/* DELETE with If-Match: another version is a 409; the right one goes. */
	{
		const char *old[] = { "If-Match: \"3\"", NULL }, *cur[] = { "If-Match: \"4\"", NULL };
		cr_assert_eq(with_headers("DELETE", TASKS "/t", old, NULL, &r), 409, "%s", r.body);
		hs_resp_clear(&r);
		cr_assert_eq(with_headers("DELETE", TASKS "/t", cur, NULL, &r), 204, "%s", r.body);
		hs_resp_clear(&r);
	}
	cr_assert_eq(status_of("GET", TASKS "/t"), 404);
	cr_assert_eq(status_of("DELETE", TASKS "/t"), 404);
}

BOTH(a_terminal_state_is_kept)
{
	static const char *const terminal[] = { "completed", "canceled", "failed", "rejected" };
	char b[BODY_MAX], path[PATH_MAX_LEN];
	hs_resp r;

	hs_start(&H, NULL, NULL);
	for (size_t i = 0; i < sizeof(terminal) / sizeof(terminal[0]); i++) {
		char id[32];

		snprintf(id, sizeof(id), "t%zu", i);
		snprintf(path, sizeof(path), TASKS "/%s", id);
		cr_assert_eq(put(path, task(b, id, "c", "working", ""), &r), 201, "%s", r.body);
		hs_resp_clear(&r);
		cr_assert_eq(put(path, task(b, id, "c", terminal[i], ""), &r), 200, "%s", r.body);
		hs_resp_clear(&r);
		/* The same terminal state again (an artifact added): fine. */
		cr_assert_eq(put(path, task(b, id, "c", terminal[i],
					    ", \"artifacts\": [{\"artifactId\": \"a\", \"parts\": "
					    "[{\"kind\": \"text\", \"text\": \"done\"}]}]"),
				 &r),
			     200, "%s", r.body);
		hs_resp_clear(&r);
		/* Leaving it: 409 naming both states, and nothing changed. */
		put(path, task(b, id, "c", "working", ""), &r);
		cr_assert_eq(r.status, 409, "%s", r.body);
		cr_assert_str_eq(hs_error_code(&r), "conflict");
		cr_assert(strstr(r.body, terminal[i]) && strstr(r.body, "working"), "%s", r.body);
		hs_resp_clear(&r);
		hs_json(&H, "GET", path, NULL, &r);
		cr_assert_str_eq(str(json_object_get(json_object_get(r.json, "task"), "status"), "state"),
				 terminal[i]);
		cr_assert_eq(num(r.json, "version"), 3);
		hs_resp_clear(&r);
	}
}

/* Pages of a list: every task once, most recently saved first. */
static void list_all(const char *query, size_t want, const char *const *ids)
{
	char path[PATH_MAX_LEN];
	const char *cursor = NULL;
	json_t *seen = json_object(), *prev = NULL;
	size_t pages = 0;
	hs_resp r = { 0 };
	char *cur = NULL;

	do {
		json_t *tasks;

		snprintf(path, sizeof(path), TASKS "?limit=%d%s%s%s", PAGE_LIMIT, query,
			 cursor ? "&cursor=" : "", cursor ? cursor : "");
		hs_resp_clear(&r);
		hs_json(&H, "GET", path, NULL, &r);
		cr_assert_eq(r.status, 200, "%s: %s", path, r.body);
		tasks = json_object_get(r.json, "tasks");
		cr_assert_leq(json_array_size(tasks), PAGE_LIMIT);
		for (size_t i = 0; i < json_array_size(tasks); i++) {
			json_t *rec = json_array_get(tasks, i);
			const char *id = str(json_object_get(rec, "task"), "id");

			cr_assert_null(json_object_get(seen, id), "%s listed twice", id);
			json_object_set_new(seen, id, json_true());
			if (prev) {
				int c = strcmp(str(prev, "updated"), str(rec, "updated"));
				cr_assert(c > 0 || (c == 0 && strcmp(str(json_object_get(prev, "task"), "id"),
								     id) > 0),
					  "out of order at %s", id);
			}
			json_decref(prev);
			prev = json_incref(rec);
		}
		free(cur);
		cur = str(r.json, "next_cursor") ? strdup(str(r.json, "next_cursor")) : NULL;
		cursor = cur;
		pages++;
	} while (cursor);
	hs_resp_clear(&r);
	cr_assert_eq(json_object_size(seen), want, "%s: %zu listed", query,
		     json_object_size(seen));
	for (size_t i = 0; i < want; i++)
		cr_assert_not_null(json_object_get(seen, ids[i]), "%s: %s missing", query, ids[i]);
	cr_assert_eq(pages, want ? (want + PAGE_LIMIT - 1) / PAGE_LIMIT : 1, "%s: %zu pages", query,
		     pages);
	json_decref(prev);
	json_decref(seen);
}

BOTH(list_pages_and_filters)
{
	static const char *const all[PAGE_TASKS] = { "a", "b", "c", "d", "e", "f", "g" };
	static const char *const working[] = { "a", "c", "e", "g" };
	static const char *const ctx1[] = { "a", "b", "c" };
	static const char *const ann[] = { "b", "d" };
	static const char *const ann_ctx1_working[] = { "a" };
	char b[BODY_MAX], path[PATH_MAX_LEN];
	hs_resp r;

	hs_start(&H, NULL, NULL);
	for (size_t i = 0; i < PAGE_TASKS; i++) {
		const char *ctx = i < 3 ? "ctx1" : "ctx2";
		const char *state = i % 2 ? "completed" : "working";

		snprintf(path, sizeof(path), TASKS "/%s%s", all[i],
			 i == 1 || i == 3 ? "?user=ann" : i == 0 ? "?user=bob" : "");
		cr_assert_eq(put(path, task(b, all[i], ctx, state, ""), &r), 201, "%s", r.body);
		hs_resp_clear(&r);
	}
	list_all("", PAGE_TASKS, all);
	list_all("&state=working", 4, working);
	list_all("&context_id=ctx1", 3, ctx1);
	list_all("&user=ann", 2, ann);
	list_all("&user=bob&context_id=ctx1&state=working", 1, ann_ctx1_working);
	list_all("&state=rejected", 0, NULL);

	/* A save moves the task to the front. */
	cr_assert_eq(put(TASKS "/a", task(b, "a", "ctx1", "input-required", ""), &r), 200);
	hs_resp_clear(&r);
	hs_json(&H, "GET", TASKS "?limit=1", NULL, &r);
	cr_assert_str_eq(str(json_object_get(json_array_get(json_object_get(r.json, "tasks"), 0),
					     "task"),
			     "id"),
			 "a", "%s", r.body);
	cr_assert(json_is_null(json_object_get(json_array_get(json_object_get(r.json, "tasks"), 0),
					       "user")),
		  "a save without user links the task to no user: %s", r.body);
	hs_resp_clear(&r);

	hs_expect_error(&H, "GET", TASKS "?state=done", NULL, 400, "invalid_request", "state");
	hs_expect_error(&H, "GET", TASKS "?cursor=zzz", NULL, 400, "invalid_request", "cursor");
	hs_expect_error(&H, "GET", TASKS "?limit=1001", NULL, 400, "invalid_request", "limit");
	/* Another app has none of them. */
	hs_json(&H, "GET", "/v1/apps/other/tasks", NULL, &r);
	cr_assert_eq(json_array_size(json_object_get(r.json, "tasks")), 0, "%s", r.body);
	hs_resp_clear(&r);
}

BOTH(a_users_task_goes_with_its_session_and_the_user)
{
	char b[BODY_MAX];
	hs_resp r;

	hs_start(&H, NULL, NULL);
	json_decref(hs_expect(&H, "POST", USER "/sessions", "{\"id\":\"s1\"}", 201));
	/* ann's tasks in s1 (which exists) and s2 (which does not yet). */
	cr_assert_eq(put(TASKS "/t1?user=ann", task(b, "t1", "s1", "working", ""), &r), 201, "%s",
		     r.body);
	cr_assert_str_eq(str(r.json, "user"), "ann");
	hs_resp_clear(&r);
	cr_assert_eq(put(TASKS "/t2?user=ann", task(b, "t2", "s2", "working", ""), &r), 201);
	hs_resp_clear(&r);
	/* The same context without a user, and bob's. */
	cr_assert_eq(put(TASKS "/t3", task(b, "t3", "s1", "working", ""), &r), 201);
	hs_resp_clear(&r);
	cr_assert_eq(put(TASKS "/t4?user=bob", task(b, "t4", "s1", "working", ""), &r), 201);
	hs_resp_clear(&r);
	/* With a user the contextId must be a session id. */
	put(TASKS "/t5?user=ann", task(b, "t5", "a/b", "working", ""), &r);
	cr_assert_eq(r.status, 400, "%s", r.body);
	cr_assert(strstr(r.body, "contextId"), "%s", r.body);
	hs_resp_clear(&r);
	cr_assert_eq(put(TASKS "/t5", task(b, "t5", "a/b", "working", ""), &r), 201,
		     "without a user any contextId goes: %s", r.body);
	hs_resp_clear(&r);

	cr_assert_eq(status_of("DELETE", USER "/sessions/s1"), 204);
	cr_assert_eq(status_of("GET", TASKS "/t1"), 404, "the session's task went with it");
	cr_assert_eq(status_of("GET", TASKS "/t2"), 200);
	cr_assert_eq(status_of("GET", TASKS "/t3"), 200);
	cr_assert_eq(status_of("GET", TASKS "/t4"), 200);

	cr_assert_eq(status_of("DELETE", USER), 204);
	cr_assert_eq(status_of("GET", TASKS "/t2"), 404, "the user's tasks went with the user");
	cr_assert_eq(status_of("GET", TASKS "/t3"), 200);
	cr_assert_eq(status_of("GET", TASKS "/t4"), 200);
	cr_assert_eq(status_of("GET", TASKS "/t5"), 200);
}

static long with_key(const char *method, const char *path, const char *key, const char *body)
{
	char auth[128];
	const char *hdr[] = { auth, "Content-Type: application/json", NULL };
	hs_resp r;
	long s;

	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key);
	hs_req(&H, method, path, hdr, body, body ? strlen(body) : 0, &r);
	s = r.status;
	hs_resp_clear(&r);
	return s;
}

BOTH(a_read_key_reads_and_a_write_key_writes)
{
	char b[BODY_MAX];

	hs_start(&H, "  api_keys:\n    - {key: " KEY_R ", scope: read}\n    - {key: " KEY_W
		     ", scope: write}\n",
		 NULL);
	cr_assert_eq(with_key("PUT", TASKS "/t", KEY_R, task(b, "t", "c", "working", "")), 403);
	cr_assert_eq(with_key("PUT", TASKS "/t", KEY_W, task(b, "t", "c", "working", "")), 201);
	cr_assert_eq(with_key("GET", TASKS "/t", KEY_R, NULL), 200);
	cr_assert_eq(with_key("GET", TASKS, KEY_R, NULL), 200);
	cr_assert_eq(with_key("DELETE", TASKS "/t", KEY_R, NULL), 403);
	cr_assert_eq(with_key("DELETE", TASKS "/t", KEY_W, NULL), 204);
}
