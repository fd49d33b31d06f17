/* SPDX-License-Identifier: MIT */
/*
 * Run checkpoints over real HTTP (`memd serve`): put (the session made on
 * the way, a replace keeping created and the pending writes), pending
 * writes (insert-or-keep, replace, run state), get by id and the latest
 * per namespace, the session's and the user's lists (namespaces, before,
 * metadata filter, full tuples, cursor paging), delete per namespace and
 * all, the resumable listing split by the app's auto_resume settings,
 * expiry from the app's timeout, retention through session and user
 * delete; bad input as the API's error object (400 naming what, 404)
 * with nothing changed. Every response is checked against
 * api/openapi.yaml by the harness. Each test runs on the memory store and
 * on SQLite.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define USER "/v1/apps/demo/users/ann"
#define SESS USER "/sessions/t1"
#define CKS SESS "/checkpoints"
#define PATH_LEN 1024
/* How long a test waits for a checkpoint of a 1 s timeout to expire. */
#define EXPIRY_WAIT_MS 10000
#define POLL_MS 50

/* "hello" and "world" in base64. */
#define B64_HELLO "aGVsbG8="
#define B64_WORLD "d29ybGQ="

static hs H;

static const char *const config =
	"checkpoints: {timeout_s: 3600, sweep_interval_s: 1}\n"
	"apps:\n"
	"  short:\n"
	"    working_memory: {strategy: buffer_window}\n"
	"    checkpoints: {timeout_s: 1}\n"
	"  never:\n"
	"    working_memory: {strategy: buffer_window}\n"
	"    checkpoints: {timeout_s: 0}\n"
	"  hitl:\n"
	"    working_memory: {strategy: buffer_window}\n"
	"    checkpoints: {auto_resume: false, auto_resume_hitl: true}\n";

static void start(const char *store)
{
	memset(&H, 0, sizeof(H));
	snprintf(H.store_plugin, sizeof(H.store_plugin), "%s", store);
	hs_start(&H, NULL, config);
}

static void setup_memory(void)
{
	start("memory");
}

static void setup_sqlite(void)
{
	start(""); /* the harness's sqlite database */
}

static void teardown(void)
{
	hs_finish(&H);
}

TestSuite(checkpoints_memory, .init = setup_memory, .fini = teardown, .timeout = 60);
TestSuite(checkpoints_sqlite, .init = setup_sqlite, .fini = teardown, .timeout = 60);

/* Each test body runs on every store listed. */
#define STORES(name)                                                \
	static void name(void);                                     \
	Test(checkpoints_memory, name) { name(); }                  \
	Test(checkpoints_sqlite, name) { name(); }                  \
	static void name(void)

static const char *str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static json_int_t num(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

static void expect_error(const char *method, const char *path, const char *body, long status,
			 const char *code, const char *msg)
{
	hs_expect_error(&H, method, path, body, status, code, msg);
}

/* PUT checkpoint id of session sid (of ann in demo) in ns with metadata
 * meta (JSON text, NULL = none) and run_state (NULL = default); the
 * summary back. */
static json_t *put_in(const char *app, const char *user, const char *sid, const char *ns,
		      const char *id, const char *parent, const char *meta, const char *state)
{
	char path[PATH_LEN], body[PATH_LEN];

	snprintf(path, sizeof(path), "/v1/apps/%s/users/%s/sessions/%s/checkpoints/%s%s%s", app,
		 user, sid, id, ns ? "?checkpoint_ns=" : "", ns ? ns : "");
	snprintf(body, sizeof(body),
		 "{\"type\": \"json\", \"checkpoint\": \"" B64_HELLO "\"%s%s%s%s%s%s%s%s%s}",
		 parent ? ", \"parent_checkpoint_id\": \"" : "", parent ? parent : "",
		 parent ? "\"" : "", meta ? ", \"metadata\": " : "", meta ? meta : "",
		 state ? ", \"run_state\": \"" : "", state ? state : "", state ? "\"" : "", "");
	return hs_expect(&H, "PUT", path, body, 200);
}

static json_t *put(const char *sid, const char *ns, const char *id, const char *meta)
{
	return put_in("demo", "ann", sid, ns, id, NULL, meta, NULL);
}

/* The checkpoint_id values of a page, joined by ",". */
static void ids_of(json_t *page, const char *member, const char *key, char *buf, size_t cap)
{
	json_t *arr = json_object_get(page, member), *o;
	size_t i;

	buf[0] = '\0';
	json_array_foreach(arr, i, o) {
		if (i)
			strncat(buf, ",", cap - strlen(buf) - 1);
		strncat(buf, str(o, key), cap - strlen(buf) - 1);
	}
}

/* ---- put, get, latest ------------------------------------------------------- */

STORES(put_creates_the_session_and_gets_back)
{
	json_t *s, *t, *w;
	hs_resp r;

	hs_json(&H, "GET", SESS, NULL, &r);
	cr_assert_eq(r.status, 404);
	hs_resp_clear(&r);
	s = put_in("demo", "ann", "t1", NULL, "0001", "0000", "{\"step\": 1, \"source\": \"input\"}",
		   NULL);
	cr_assert_str_eq(str(s, "session_id"), "t1");
	cr_assert_str_eq(str(s, "checkpoint_ns"), "");
	cr_assert_str_eq(str(s, "checkpoint_id"), "0001");
	cr_assert_str_eq(str(s, "parent_checkpoint_id"), "0000");
	cr_assert_str_eq(str(s, "type"), "json");
	cr_assert_str_eq(str(s, "run_state"), "running");
	cr_assert_eq(num(s, "size"), 5);
	cr_assert_eq(num(json_object_get(s, "metadata"), "step"), 1);
	cr_assert_not_null(str(s, "expires_at"), "demo's timeout is an hour");
	cr_assert_null(json_object_get(s, "checkpoint"), "a summary has no payload");
	/* The session exists now. */
	json_decref(hs_expect(&H, "GET", SESS, NULL, 200));

	t = hs_expect(&H, "GET", CKS "/0001", NULL, 200);
	cr_assert_str_eq(str(t, "checkpoint"), B64_HELLO);
	cr_assert_eq(json_array_size(json_object_get(t, "pending_writes")), 0);
	cr_assert_str_eq(str(t, "created"), str(s, "created"));
	json_decref(t);

	/* A replace keeps created and the pending writes. */
	json_decref(hs_expect(&H, "POST", CKS "/0001/writes",
			      "{\"task_id\": \"task-a\", \"writes\": [{\"idx\": 0, \"channel\": "
			      "\"messages\", \"type\": \"json\", \"value\": \"" B64_WORLD "\"}]}",
			      204));
	json_decref(hs_expect(&H, "PUT", CKS "/0001",
			      "{\"type\": \"msgpack\", \"checkpoint\": \"" B64_WORLD
			      "\", \"run_state\": \"interrupted\"}",
			      200));
	t = hs_expect(&H, "GET", CKS "/0001", NULL, 200);
	cr_assert_str_eq(str(t, "type"), "msgpack");
	cr_assert_str_eq(str(t, "checkpoint"), B64_WORLD);
	cr_assert_str_eq(str(t, "run_state"), "interrupted");
	cr_assert_str_eq(str(t, "created"), str(s, "created"));
	cr_assert(json_is_null(json_object_get(t, "parent_checkpoint_id")));
	cr_assert_eq(json_object_size(json_object_get(t, "metadata")), 0, "metadata defaults to {}");
	w = json_array_get(json_object_get(t, "pending_writes"), 0);
	cr_assert_str_eq(str(w, "task_id"), "task-a");
	cr_assert_str_eq(str(w, "value"), B64_WORLD);
	json_decref(t);
	json_decref(s);
}

STORES(latest_per_namespace)
{
	json_t *t;

	expect_error("GET", CKS ":latest", NULL, 404, "not_found", NULL);
	json_decref(put("t1", NULL, "0001", NULL));
	json_decref(put("t1", NULL, "0003", NULL));
	json_decref(put("t1", NULL, "0002", NULL));
	json_decref(put("t1", "sub%3A1", "0009", NULL));
	t = hs_expect(&H, "GET", CKS ":latest", NULL, 200);
	cr_assert_str_eq(str(t, "checkpoint_id"), "0003", "the greatest id of the root namespace");
	json_decref(t);
	t = hs_expect(&H, "GET", CKS ":latest?checkpoint_ns=", NULL, 200);
	cr_assert_str_eq(str(t, "checkpoint_id"), "0003");
	json_decref(t);
	t = hs_expect(&H, "GET", CKS ":latest?checkpoint_ns=sub:1", NULL, 200);
	cr_assert_str_eq(str(t, "checkpoint_id"), "0009");
	cr_assert_str_eq(str(t, "checkpoint_ns"), "sub:1");
	json_decref(t);
	expect_error("GET", CKS "/0009", NULL, 404, "not_found", "0009");
	expect_error("GET", CKS ":latest?checkpoint_ns=other", NULL, 404, "not_found", NULL);
	expect_error("GET", USER "/sessions/nobody/checkpoints:latest", NULL, 404, "not_found",
		     NULL);
}

/* ---- pending writes ---------------------------------------------------------- */

STORES(writes_keep_replace_and_run_state)
{
	json_t *t, *pw;
	char got[PATH_LEN];

	json_decref(put("t1", NULL, "0001", NULL));
	json_decref(hs_expect(&H, "POST", CKS "/0001/writes",
			      "{\"task_id\": \"b\", \"writes\": ["
			      "{\"idx\": 1, \"channel\": \"c1\", \"type\": \"json\", \"value\": \"" B64_HELLO "\"},"
			      "{\"idx\": 0, \"channel\": \"c0\", \"type\": \"json\", \"value\": \"" B64_HELLO "\"}]}",
			      204));
	json_decref(hs_expect(&H, "POST", CKS "/0001/writes",
			      "{\"task_id\": \"a\", \"writes\": ["
			      "{\"idx\": -1, \"channel\": \"__error__\", \"type\": \"json\", \"value\": \"\"}]}",
			      204));
	/* Without replace the stored write stays; with it, it goes. */
	json_decref(hs_expect(&H, "POST", CKS "/0001/writes",
			      "{\"task_id\": \"b\", \"writes\": ["
			      "{\"idx\": 0, \"channel\": \"new\", \"type\": \"json\", \"value\": \"" B64_WORLD "\"},"
			      "{\"idx\": 1, \"channel\": \"new\", \"type\": \"json\", \"value\": \"" B64_WORLD "\", "
			      "\"replace\": true}], \"run_state\": \"interrupted\"}",
			      204));
	t = hs_expect(&H, "GET", CKS "/0001", NULL, 200);
	pw = json_object_get(t, "pending_writes");
	cr_assert_eq(json_array_size(pw), 3);
	snprintf(got, sizeof(got), "%s/%lld/%s,%s/%lld/%s,%s/%lld/%s",
		 str(json_array_get(pw, 0), "task_id"), (long long)num(json_array_get(pw, 0), "idx"),
		 str(json_array_get(pw, 0), "channel"), str(json_array_get(pw, 1), "task_id"),
		 (long long)num(json_array_get(pw, 1), "idx"), str(json_array_get(pw, 1), "channel"),
		 str(json_array_get(pw, 2), "task_id"), (long long)num(json_array_get(pw, 2), "idx"),
		 str(json_array_get(pw, 2), "channel"));
	cr_assert_str_eq(got, "a/-1/__error__,b/0/c0,b/1/new", "ascending (task_id, idx)");
	cr_assert_str_eq(str(json_array_get(pw, 0), "value"), "", "0 bytes are fine");
	cr_assert_str_eq(str(json_array_get(pw, 2), "value"), B64_WORLD);
	cr_assert_str_eq(str(t, "run_state"), "interrupted");
	json_decref(t);

	expect_error("POST", CKS "/0404/writes",
		     "{\"task_id\": \"a\", \"writes\": []}", 404, "not_found", "0404");
	expect_error("POST", USER "/sessions/nobody/checkpoints/0001/writes",
		     "{\"task_id\": \"a\", \"writes\": []}", 404, "not_found", NULL);
}

/* The task path of a write's task orders a checkpoint's writes before the
 * task id (LangGraph applies a step's writes in that order): on get and
 * in a list's full tuples; a write put without one has "", first. */
STORES(writes_ordered_by_task_path)
{
	static const char *const order[] = { "zz/0/none", "b/-1/pull-a", "b/0/pull-a",
					     "a/0/pull-b", "c/0/fullwidth", "d/0/emoji" };
	const char *bodies[] = {
		"{\"task_id\": \"a\", \"task_path\": \"~__pregel_pull, b\", \"writes\": ["
		"{\"idx\": 0, \"channel\": \"pull-b\", \"type\": \"json\", \"value\": \"\"}]}",
		"{\"task_id\": \"b\", \"task_path\": \"~__pregel_pull, a\", \"writes\": ["
		"{\"idx\": 0, \"channel\": \"pull-a\", \"type\": \"json\", \"value\": \"\"},"
		"{\"idx\": -1, \"channel\": \"pull-a\", \"type\": \"json\", \"value\": \"\"}]}",
		/* U+1F600 before U+FF41 in UTF-16 units, after it by code point. */
		"{\"task_id\": \"d\", \"task_path\": \"~\\ud83d\\ude00\", \"writes\": ["
		"{\"idx\": 0, \"channel\": \"emoji\", \"type\": \"json\", \"value\": \"\"}]}",
		"{\"task_id\": \"c\", \"task_path\": \"~\\uff41\", \"writes\": ["
		"{\"idx\": 0, \"channel\": \"fullwidth\", \"type\": \"json\", \"value\": \"\"}]}",
		"{\"task_id\": \"zz\", \"writes\": ["
		"{\"idx\": 0, \"channel\": \"none\", \"type\": \"json\", \"value\": \"\"}]}",
	};
	json_t *t, *page;
	char path[PATH_LEN];

	json_decref(put("t1", NULL, "0001", NULL));
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++)
		json_decref(hs_expect(&H, "POST", CKS "/0001/writes", bodies[i], 204));
	t = hs_expect(&H, "GET", CKS "/0001", NULL, 200);
	page = hs_expect(&H, "GET", CKS "?full=true", NULL, 200);
	for (int from_list = 0; from_list <= 1; from_list++) {
		json_t *tuple = from_list ? json_array_get(json_object_get(page, "checkpoints"), 0) : t;
		json_t *pw = json_object_get(tuple, "pending_writes");
		cr_assert_eq(json_array_size(pw), sizeof(order) / sizeof(order[0]));
		for (size_t i = 0; i < json_array_size(pw); i++) {
			json_t *w = json_array_get(pw, i);
			snprintf(path, sizeof(path), "%s/%lld/%s", str(w, "task_id"),
				 (long long)num(w, "idx"), str(w, "channel"));
			cr_assert_str_eq(path, order[i], "%s, write %zu", from_list ? "list" : "get",
					 i);
		}
		cr_assert_str_eq(str(json_array_get(pw, 0), "task_path"), "");
		cr_assert_str_eq(str(json_array_get(pw, 1), "task_path"), "~__pregel_pull, a");
		cr_assert_str_eq(str(json_array_get(pw, 4), "task_path"), "~\xef\xbd\x81");
		cr_assert_str_eq(str(json_array_get(pw, 5), "task_path"), "~\xf0\x9f\x98\x80");
	}
	json_decref(page);
	json_decref(t);
}

/* ---- lists ------------------------------------------------------------------- */

STORES(session_list_pages_namespaces_and_before)
{
	char path[PATH_LEN], all[PATH_LEN * 4] = "", ids[PATH_LEN];
	json_t *page;
	const char *cursor;
	int pages = 0;

	for (int i = 1; i <= 7; i++) {
		char id[16];
		snprintf(id, sizeof(id), "%04d", i);
		json_decref(put("t1", i % 2 ? NULL : "sub", id, NULL));
	}
	json_decref(put("t2", NULL, "0099", NULL));

	page = hs_expect(&H, "GET", CKS, NULL, 200);
	ids_of(page, "checkpoints", "checkpoint_id", ids, sizeof(ids));
	cr_assert_str_eq(ids, "0007,0006,0005,0004,0003,0002,0001", "every namespace, newest first");
	cr_assert(json_is_null(json_object_get(page, "next_cursor")));
	cr_assert_null(json_object_get(json_array_get(json_object_get(page, "checkpoints"), 0),
				       "checkpoint"),
		       "summaries by default");
	json_decref(page);

	page = hs_expect(&H, "GET", CKS "?checkpoint_ns=", NULL, 200);
	ids_of(page, "checkpoints", "checkpoint_id", ids, sizeof(ids));
	cr_assert_str_eq(ids, "0007,0005,0003,0001");
	json_decref(page);
	page = hs_expect(&H, "GET", CKS "?checkpoint_ns=sub&before=0006&full=true", NULL, 200);
	ids_of(page, "checkpoints", "checkpoint_id", ids, sizeof(ids));
	cr_assert_str_eq(ids, "0004,0002");
	cr_assert_str_eq(str(json_array_get(json_object_get(page, "checkpoints"), 0), "checkpoint"),
			 B64_HELLO);
	json_decref(page);

	/* Pages of 2 until the end. */
	snprintf(path, sizeof(path), CKS "?limit=2");
	for (;;) {
		page = hs_expect(&H, "GET", path, NULL, 200);
		ids_of(page, "checkpoints", "checkpoint_id", ids, sizeof(ids));
		if (*all)
			strcat(all, ",");
		strcat(all, ids);
		pages++;
		cursor = str(page, "next_cursor");
		if (!cursor) {
			json_decref(page);
			break;
		}
		cr_assert_eq(json_array_size(json_object_get(page, "checkpoints")), 2);
		snprintf(path, sizeof(path), CKS "?limit=2&cursor=%s", cursor);
		json_decref(page);
	}
	cr_assert_str_eq(all, "0007,0006,0005,0004,0003,0002,0001");
	cr_assert_eq(pages, 4);
}

STORES(user_list_across_sessions_and_metadata_filter)
{
	char path[PATH_LEN], all[PATH_LEN * 4] = "", ids[PATH_LEN];
	json_t *page;
	const char *cursor;

	/* 30 checkpoints over 3 sessions; every third one from input. */
	for (int i = 1; i <= 30; i++) {
		char id[16], sid[8], meta[128];
		snprintf(id, sizeof(id), "%04d", i);
		snprintf(sid, sizeof(sid), "s%d", i % 3);
		snprintf(meta, sizeof(meta),
			 "{\"step\": %d, \"source\": \"%s\", \"writes\": {\"n\": [1, 2]}}", i,
			 i % 6 == 0 ? "input" : "loop");
		json_decref(put(sid, NULL, id, meta));
	}
	json_decref(put("s0", NULL, "0030", "{\"source\": \"input\"}")); /* no writes member now */
	page = hs_expect(&H, "GET", USER "/checkpoints?limit=4", NULL, 200);
	ids_of(page, "checkpoints", "checkpoint_id", ids, sizeof(ids));
	cr_assert_str_eq(ids, "0030,0029,0028,0027");
	json_decref(page);
	page = hs_expect(&H, "GET", USER "/checkpoints?session_id=s1&limit=3", NULL, 200);
	ids_of(page, "checkpoints", "checkpoint_id", ids, sizeof(ids));
	cr_assert_str_eq(ids, "0028,0025,0022");
	json_decref(page);

	/* {"source": "input", "writes": {"n": [1, 2]}}, percent-encoded,
	 * pages of 2: the host filters and pages through the store. */
	snprintf(path, sizeof(path), USER "/checkpoints?limit=2&metadata=%s",
		 "%7B%22source%22%3A%22input%22%2C%22writes%22%3A%7B%22n%22%3A%5B1%2C2%5D%7D%7D");
	for (;;) {
		page = hs_expect(&H, "GET", path, NULL, 200);
		ids_of(page, "checkpoints", "checkpoint_id", ids, sizeof(ids));
		if (*all && *ids)
			strcat(all, ",");
		strcat(all, ids);
		cursor = str(page, "next_cursor");
		if (!cursor) {
			json_decref(page);
			break;
		}
		snprintf(path, sizeof(path), USER "/checkpoints?limit=2&cursor=%s&metadata=%s", cursor,
			 "%7B%22source%22%3A%22input%22%2C%22writes%22%3A%7B%22n%22%3A%5B1%2C2%5D%7D%7D");
		json_decref(page);
	}
	cr_assert_str_eq(all, "0024,0018,0012,0006", "JSON-equal values of every key given");
	page = hs_expect(&H, "GET", USER "/checkpoints?metadata=%7B%22step%22%3A7%7D", NULL, 200);
	ids_of(page, "checkpoints", "checkpoint_id", ids, sizeof(ids));
	cr_assert_str_eq(ids, "0007");
	json_decref(page);
	page = hs_expect(&H, "GET", USER "/checkpoints?metadata=%7B%22step%22%3A%227%22%7D", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(page, "checkpoints")), 0, "\"7\" is not 7");
	json_decref(page);
	page = hs_expect(&H, "GET", "/v1/apps/demo/users/bob/checkpoints", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(page, "checkpoints")), 0, "users kept apart");
	json_decref(page);
}

/* ---- delete ------------------------------------------------------------------ */

STORES(delete_one_namespace_or_all)
{
	json_t *page;

	json_decref(put("t1", NULL, "0001", NULL));
	json_decref(put("t1", "sub", "0002", NULL));
	json_decref(put("t2", NULL, "0003", NULL));
	json_decref(hs_expect(&H, "DELETE", CKS "?checkpoint_ns=sub", NULL, 204));
	page = hs_expect(&H, "GET", USER "/checkpoints", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(page, "checkpoints")), 2);
	json_decref(page);
	json_decref(hs_expect(&H, "DELETE", CKS, NULL, 204));
	expect_error("GET", CKS ":latest", NULL, 404, "not_found", NULL);
	page = hs_expect(&H, "GET", USER "/checkpoints", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(page, "checkpoints")), 1, "t2's stays");
	json_decref(page);
	/* The session stays; deleting nothing is fine. */
	json_decref(hs_expect(&H, "GET", SESS, NULL, 200));
	json_decref(hs_expect(&H, "DELETE", CKS, NULL, 204));
	json_decref(hs_expect(&H, "DELETE", USER "/sessions/nobody/checkpoints", NULL, 204));
}

/* ---- resumable --------------------------------------------------------------- */

/* The "session_id:resume" pairs of app's resumable listing (query q). */
static void resumable(const char *app, const char *q, char *buf, size_t cap)
{
	char path[PATH_LEN];
	json_t *page, *o;
	size_t i;

	snprintf(path, sizeof(path), "/v1/apps/%s/checkpoints:resumable%s", app, q);
	page = hs_expect(&H, "GET", path, NULL, 200);
	buf[0] = '\0';
	json_array_foreach(json_object_get(page, "sessions"), i, o) {
		if (i)
			strncat(buf, ",", cap - strlen(buf) - 1);
		strncat(buf, str(o, "user"), cap - strlen(buf) - 1);
		strncat(buf, "/", cap - strlen(buf) - 1);
		strncat(buf, str(o, "session_id"), cap - strlen(buf) - 1);
		strncat(buf, ":", cap - strlen(buf) - 1);
		strncat(buf, str(o, "resume"), cap - strlen(buf) - 1);
	}
	json_decref(page);
}

STORES(resumable_split_by_the_apps_settings)
{
	char got[PATH_LEN], path[PATH_LEN];
	json_t *page, *o;

	for (int k = 0; k < 2; k++) {
		const char *app = k ? "hitl" : "demo";
		json_decref(put_in(app, "ann", "run-a", NULL, "0001", NULL, NULL, NULL));
		json_decref(put_in(app, "ann", "run-b", NULL, "0001", NULL, NULL, "interrupted"));
		json_decref(put_in(app, "ann", "run-c", NULL, "0001", NULL, NULL, "done"));
		json_decref(put_in(app, "bob", "run-a", NULL, "0001", NULL, NULL, "done"));
		/* bob's run-a goes on: its head is the greatest root id. */
		json_decref(put_in(app, "bob", "run-a", NULL, "0002", "0001", "{\"step\": 2}", NULL));
		/* A subgraph's checkpoint is not a head. */
		json_decref(put_in(app, "bob", "run-d", "sub", "0001", NULL, NULL, NULL));
	}
	resumable("demo", "", got, sizeof(got));
	cr_assert_str_eq(got, "ann/run-a:automatic,ann/run-b:approval,bob/run-a:automatic");
	resumable("demo", "?resume=approval", got, sizeof(got));
	cr_assert_str_eq(got, "ann/run-b:approval");
	resumable("hitl", "", got, sizeof(got));
	cr_assert_str_eq(got, "ann/run-a:approval,ann/run-b:automatic,bob/run-a:approval");
	resumable("hitl", "?resume=automatic", got, sizeof(got));
	cr_assert_str_eq(got, "ann/run-b:automatic");
	resumable("other", "", got, sizeof(got));
	cr_assert_str_eq(got, "", "apps kept apart");

	page = hs_expect(&H, "GET", "/v1/apps/demo/checkpoints:resumable?limit=2", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(page, "sessions")), 2);
	o = json_array_get(json_object_get(page, "sessions"), 1);
	cr_assert_str_eq(str(o, "checkpoint_id"), "0001");
	cr_assert_str_eq(str(o, "run_state"), "interrupted");
	cr_assert_not_null(str(o, "updated"));
	cr_assert_not_null(str(o, "expires_at"));
	snprintf(path, sizeof(path), "/v1/apps/demo/checkpoints:resumable?limit=2&cursor=%s",
		 str(page, "next_cursor"));
	json_decref(page);
	page = hs_expect(&H, "GET", path, NULL, 200);
	o = json_array_get(json_object_get(page, "sessions"), 0);
	cr_assert_eq(json_array_size(json_object_get(page, "sessions")), 1);
	cr_assert_str_eq(str(o, "user"), "bob");
	cr_assert_str_eq(str(o, "checkpoint_id"), "0002");
	cr_assert_eq(num(json_object_get(o, "metadata"), "step"), 2);
	cr_assert(json_is_null(json_object_get(page, "next_cursor")));
	json_decref(page);

	/* A pending write that interrupts the run moves it to approval. */
	json_decref(hs_expect(&H, "POST",
			      "/v1/apps/demo/users/ann/sessions/run-a/checkpoints/0001/writes",
			      "{\"task_id\": \"t\", \"writes\": [], \"run_state\": \"interrupted\"}",
			      204));
	resumable("demo", "?resume=approval", got, sizeof(got));
	cr_assert_str_eq(got, "ann/run-a:approval,ann/run-b:approval");
	/* Done: gone from the listing. */
	json_decref(put_in("demo", "ann", "run-a", NULL, "0005", NULL, NULL, "done"));
	resumable("demo", "", got, sizeof(got));
	cr_assert_str_eq(got, "ann/run-b:approval,bob/run-a:automatic");
}

/* ---- expiry ------------------------------------------------------------------ */

/* Waits (bounded) until GET path answers status; returns it. */
static long wait_status(const char *path, long status)
{
	int64_t until = hs_now_ms() + EXPIRY_WAIT_MS;
	long got;

	do {
		hs_resp r;
		hs_json(&H, "GET", path, NULL, &r);
		got = r.status;
		hs_resp_clear(&r);
		if (got == status)
			break;
		usleep(POLL_MS * 1000);
	} while (hs_now_ms() < until);
	return got;
}

/* An RFC 3339 UTC time with microseconds as unix microseconds. */
static int64_t time_us(const char *t)
{
	struct tm tm;
	int us = 0;

	memset(&tm, 0, sizeof(tm));
	cr_assert_eq(sscanf(t, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
			    &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &us),
		     7, "%s", t);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm) * 1000000 + us;
}

STORES(expiry_from_the_apps_timeout)
{
	json_t *s, *page;
	char got[PATH_LEN];

	s = put_in("short", "ann", "t1", NULL, "0001", NULL, NULL, NULL);
	cr_assert_eq(time_us(str(s, "expires_at")) - time_us(str(s, "created")), 1000000,
		     "expires_at is the put's time + the app's timeout_s: %s %s", str(s, "created"),
		     str(s, "expires_at"));
	json_decref(s);
	cr_assert_eq(wait_status("/v1/apps/short/users/ann/sessions/t1/checkpoints/0001", 404), 404,
		     "an expired checkpoint is gone from reads");
	expect_error("GET", "/v1/apps/short/users/ann/sessions/t1/checkpoints:latest", NULL, 404,
		     "not_found", NULL);
	expect_error("POST", "/v1/apps/short/users/ann/sessions/t1/checkpoints/0001/writes",
		     "{\"task_id\": \"a\", \"writes\": []}", 404, "not_found", NULL);
	page = hs_expect(&H, "GET", "/v1/apps/short/users/ann/checkpoints", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(page, "checkpoints")), 0);
	json_decref(page);
	resumable("short", "", got, sizeof(got));
	cr_assert_str_eq(got, "");

	/* timeout_s 0: never. */
	s = put_in("never", "ann", "t1", NULL, "0001", NULL, NULL, NULL);
	cr_assert(json_is_null(json_object_get(s, "expires_at")));
	json_decref(s);
}

/* ---- retention --------------------------------------------------------------- */

STORES(session_and_user_delete_take_the_checkpoints)
{
	json_t *page;

	json_decref(put("t1", NULL, "0001", NULL));
	json_decref(put("t2", NULL, "0002", NULL));
	json_decref(put_in("demo", "bob", "t1", NULL, "0003", NULL, NULL, NULL));
	json_decref(hs_expect(&H, "DELETE", SESS, NULL, 204));
	page = hs_expect(&H, "GET", USER "/checkpoints", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(page, "checkpoints")), 1);
	cr_assert_str_eq(str(json_array_get(json_object_get(page, "checkpoints"), 0),
			     "checkpoint_id"),
			 "0002");
	json_decref(page);
	/* A new thread of the same id starts empty. */
	json_decref(put("t1", NULL, "0000", NULL));
	expect_error("GET", CKS "/0001", NULL, 404, "not_found", NULL);

	json_decref(hs_expect(&H, "DELETE", USER, NULL, 204));
	page = hs_expect(&H, "GET", USER "/checkpoints", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(page, "checkpoints")), 0);
	json_decref(page);
	page = hs_expect(&H, "GET", "/v1/apps/demo/users/bob/checkpoints", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(page, "checkpoints")), 1, "bob's stay");
	json_decref(page);
}

/* ---- bad input --------------------------------------------------------------- */

STORES(bad_input_is_a_clear_400_and_changes_nothing)
{
	json_t *page;

	json_decref(put("t1", NULL, "0001", NULL));
	expect_error("PUT", CKS "/0002", "{\"type\": \"json\", \"checkpoint\": \"not base64!\"}", 400,
		     "invalid_request", "checkpoint: must be a base64 string");
	expect_error("PUT", CKS "/0002", "{\"type\": \"json\", \"checkpoint\": \"aGVsbG8\"}", 400,
		     "invalid_request", "checkpoint: must be a base64 string");
	expect_error("PUT", CKS "/0002", "{\"type\": \"json\", \"checkpoint\": 5}", 400,
		     "invalid_request", "checkpoint");
	expect_error("PUT", CKS "/0002", "{\"type\": \"json\"}", 400, "invalid_request",
		     "checkpoint: required");
	expect_error("PUT", CKS "/0002", "{\"checkpoint\": \"" B64_HELLO "\"}", 400,
		     "invalid_request", "type");
	expect_error("PUT", CKS "/0002",
		     "{\"type\": \"json\", \"checkpoint\": \"" B64_HELLO "\", \"metadata\": [1]}", 400,
		     "invalid_request", "metadata: must be a JSON object");
	expect_error("PUT", CKS "/0002",
		     "{\"type\": \"json\", \"checkpoint\": \"" B64_HELLO "\", \"run_state\": \"paused\"}",
		     400, "invalid_request", "run_state: must be running, interrupted or done");
	/* Faults the put's scan leaves to jansson, or finds itself, told alike. */
	expect_error("PUT", CKS "/0002",
		     "{\"type\":\"json\",\"checkpoint\":\"" B64_HELLO "\",\"metadata\":{\"a\":1,\"a\":2}}",
		     400, "invalid_request", "body is not valid JSON");
	expect_error("PUT", CKS "/0002",
		     "{\"type\":\"json\",\"checkpoint\":\"" B64_HELLO "\",\"checkpoint\":\"" B64_HELLO "\"}",
		     400, "invalid_request", "body is not valid JSON");
	expect_error("PUT", CKS "/0002",
		     "{\"type\":\"\",\"checkpoint\":\"" B64_HELLO "\"}", 400, "invalid_request",
		     "type: must be 1..256 bytes of UTF-8");
	expect_error("PUT", CKS "/0002",
		     "{\"type\":\"json\",\"checkpoint\":\"" B64_HELLO "\",\"parent_checkpoint_id\":\"a/b\"}",
		     400, "invalid_request", "parent_checkpoint_id: contains '/'");
	expect_error("PUT", CKS "/0002",
		     "{\"type\": \"json\", \"checkpoint\": \"" B64_HELLO "\", \"colour\": 1}", 400,
		     "invalid_request", "colour");
	expect_error("PUT", CKS "/0002",
		     "{\"type\": \"json\", \"checkpoint\": \"" B64_HELLO
		     "\", \"parent_checkpoint_id\": \"a\\u0001b\"}",
		     400, "invalid_request", "parent_checkpoint_id");
	expect_error("PUT", CKS "/a%01b", "{\"type\": \"json\", \"checkpoint\": \"" B64_HELLO "\"}",
		     400, "invalid_request", NULL);
	expect_error("PUT", CKS "/0002?checkpoint_ns=a%01b",
		     "{\"type\": \"json\", \"checkpoint\": \"" B64_HELLO "\"}", 400, "invalid_request",
		     "checkpoint_ns");
	expect_error("POST", CKS "/0001/writes",
		     "{\"task_id\": \"a\", \"writes\": [{\"idx\": 0, \"channel\": \"c\", \"type\": "
		     "\"json\", \"value\": \"%%%\"}]}",
		     400, "invalid_request", "writes[0].value: must be a base64 string");
	expect_error("POST", CKS "/0001/writes",
		     "{\"task_id\": \"a\", \"writes\": [{\"idx\": \"0\", \"channel\": \"c\", \"type\": "
		     "\"json\", \"value\": \"\"}]}",
		     400, "invalid_request", "writes[0].idx");
	expect_error("POST", CKS "/0001/writes", "{\"task_id\": \"a\", \"writes\": {}}", 400,
		     "invalid_request", "writes: required, an array");
	expect_error("POST", CKS "/0001/writes", "{\"writes\": []}", 400, "invalid_request",
		     "task_id: required");
	expect_error("POST", CKS "/0001/writes", "{\"task_id\": \"a\", \"task_path\": 7, \"writes\": []}",
		     400, "invalid_request", "task_path");
	expect_error("POST", CKS "/0001/writes",
		     "{\"task_id\": \"a\", \"task_path\": \"a\\u0000b\", \"writes\": []}", 400,
		     "invalid_request", "body is not valid JSON");
	{
		char body[2 * PATH_LEN];
		int n = snprintf(body, sizeof(body), "{\"task_id\": \"a\", \"task_path\": \"");
		memset(body + n, 'p', PATH_LEN + 1);
		snprintf(body + n + PATH_LEN + 1, sizeof(body) - (size_t)n - PATH_LEN - 1,
			 "\", \"writes\": [{\"idx\": 0, \"channel\": \"c\", \"type\": \"json\", "
			 "\"value\": \"\"}]}");
		expect_error("POST", CKS "/0001/writes", body, 400, "invalid_request",
			     "task_path: at most 1024 bytes");
	}
	expect_error("POST", CKS "/0001/writes",
		     "{\"task_id\": \"a\", \"writes\": [], \"run_state\": \"stopped\"}", 400,
		     "invalid_request", "run_state");
	expect_error("GET", CKS "?metadata=%5B1%5D", NULL, 400, "invalid_request",
		     "metadata: must be a JSON object");
	expect_error("GET", CKS "?metadata=%7Bnope", NULL, 400, "invalid_request",
		     "metadata: must be a JSON object");
	expect_error("GET", CKS "?cursor=bm90LWEtY3Vyc29y", NULL, 400, "invalid_request",
		     "cursor: not a cursor memd returned");
	expect_error("GET", CKS "?limit=1001", NULL, 400, "invalid_request", "limit");
	expect_error("GET", "/v1/apps/demo/checkpoints:resumable?resume=never", NULL, 400,
		     "invalid_request", "resume: must be automatic or approval");
	expect_error("GET", "/v1/apps/demo/checkpoints:resumable?cursor=%21", NULL, 400,
		     "invalid_request", "cursor");

	/* Nothing of that landed. */
	page = hs_expect(&H, "GET", CKS "?full=true", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(page, "checkpoints")), 1);
	cr_assert_eq(json_array_size(json_object_get(json_array_get(json_object_get(page,
										    "checkpoints"),
								     0),
						     "pending_writes")),
		     0);
	json_decref(page);
}
