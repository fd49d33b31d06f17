/* SPDX-License-Identifier: MIT */
/*
 * End to end over real HTTP: a `memd serve` process on a random loopback
 * port, driven with libcurl (and raw sockets where curl would not send
 * what we need). Every response is checked against api/openapi.yaml by
 * the harness. Covers every route, every error path, auth scopes, limits,
 * request ids, logging and a retryable store failure.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define U "/v1/apps/demo/users/alice"
#define S1 U "/sessions/s1"
#define IN_FLIGHT_WAIT_MS 10000 /* bound on waiting for memd to be inside a request */
#define TRICKLE_AFTER_MS 900    /* past the limits test's request_timeout_ms (600) */

static hs H;

static void setup(void)
{
	memset(&H, 0, sizeof(H));
}

static void teardown(void)
{
	hs_finish(&H);
}

TestSuite(e2e, .init = setup, .fini = teardown, .timeout = 60);

static json_t *get(const char *path)
{
	return hs_expect(&H, "GET", path, NULL, 200);
}

static void expect_error(const char *method, const char *path, const char *body, long status,
			 const char *code)
{
	hs_resp r;
	hs_json(&H, method, path, body, &r);
	cr_assert_eq(r.status, status, "%s %s %s: status %ld, want %ld: %s", method, path,
		     body ? body : "", r.status, status, r.body);
	cr_assert_str_eq(hs_error_code(&r), code, "%s %s: code %s, want %s", method, path,
			 hs_error_code(&r), code);
	cr_assert(json_is_false(json_object_get(json_object_get(r.json, "error"), "retryable")) ==
		  (status != 503));
	hs_resp_clear(&r);
}

static json_int_t count_events(const char *session_path)
{
	char path[512];
	json_t *s;
	json_int_t n;
	snprintf(path, sizeof(path), "%s?events=0", session_path);
	s = get(path);
	n = (json_int_t)json_array_size(json_object_get(s, "events"));
	json_decref(s);
	return n;
}

/* ---- sessions ------------------------------------------------------------------ */

Test(e2e, sessions_create_get_patch_delete)
{
	hs_resp r;
	json_t *s;

	hs_start(&H, NULL, NULL);
	hs_json(&H, "POST", U "/sessions", "{\"id\":\"s1\",\"title\":\"Trip\",\"metadata\":{\"k\":1}}", &r);
	cr_assert_eq(r.status, 201, "%s", r.body);
	cr_assert_str_eq(hs_header(&r, "Location"), S1);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "id")), "s1");
	cr_assert_eq(json_integer_value(json_object_get(r.json, "version")), 0);
	hs_resp_clear(&r);

	/* The same id again: 409, and the first one is unchanged. */
	expect_error("POST", U "/sessions", "{\"id\":\"s1\",\"title\":\"Other\"}", 409, "conflict");
	s = get(S1);
	cr_assert_str_eq(json_string_value(json_object_get(s, "title")), "Trip");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(s, "metadata"), "k")), 1);
	cr_assert_null(json_object_get(s, "events"), "events only when asked for");
	json_decref(s);

	/* No body: a generated UUIDv7 id, and Location names it. */
	hs_json(&H, "POST", U "/sessions", NULL, &r);
	cr_assert_eq(r.status, 201);
	cr_assert_eq(strlen(json_string_value(json_object_get(r.json, "id"))), 36);
	cr_assert(strstr(hs_header(&r, "Location"), json_string_value(json_object_get(r.json, "id"))));
	hs_resp_clear(&r);

	/* Patch. */
	s = hs_expect(&H, "PATCH", S1, "{\"title\":\"Lisbon\",\"archived\":true,\"metadata\":{\"m\":2}}", 200);
	cr_assert_str_eq(json_string_value(json_object_get(s, "title")), "Lisbon");
	cr_assert(json_is_true(json_object_get(s, "archived")));
	json_decref(s);
	expect_error("PATCH", S1, "{\"colour\":\"red\"}", 400, "invalid_request");
	expect_error("PATCH", S1, "{\"archived\":\"yes\"}", 400, "invalid_request");
	expect_error("PATCH", U "/sessions/nope", "{\"title\":\"x\"}", 404, "not_found");

	/* Create: bad bodies. */
	expect_error("POST", U "/sessions", "{\"id\":5}", 400, "invalid_request");
	expect_error("POST", U "/sessions", "{\"id\":\"a\\u0001b\"}", 400, "invalid_request");
	expect_error("POST", U "/sessions", "[1,2]", 400, "invalid_request");
	expect_error("POST", U "/sessions", "{\"title\":\"x\",\"title\":\"y\"}", 400, "invalid_request");

	/* Delete. */
	hs_json(&H, "DELETE", S1, NULL, &r);
	cr_assert_eq(r.status, 204);
	cr_assert_eq(r.len, 0);
	hs_resp_clear(&r);
	expect_error("GET", S1, NULL, 404, "not_found");
	expect_error("DELETE", S1, NULL, 404, "not_found");
}

Test(e2e, sessions_list_pages_with_cursor)
{
	json_t *page, *seen = json_object();
	char path[512], *cursor = NULL;
	int pages = 0;

	hs_start(&H, NULL, NULL);
	for (int i = 0; i < 5; i++) {
		char body[64];
		snprintf(body, sizeof(body), "{\"id\":\"p%d\"}", i);
		json_decref(hs_expect(&H, "POST", U "/sessions", body, 201));
	}
	json_decref(hs_expect(&H, "PATCH", U "/sessions/p0", "{\"archived\":true}", 200));
	do {
		size_t i;
		json_t *s;
		if (cursor)
			snprintf(path, sizeof(path), U "/sessions?limit=2&archived=true&cursor=%s", cursor);
		else
			snprintf(path, sizeof(path), U "/sessions?limit=2&archived=true");
		free(cursor);
		cursor = NULL;
		page = get(path);
		cr_assert_leq(json_array_size(json_object_get(page, "sessions")), 2);
		json_array_foreach(json_object_get(page, "sessions"), i, s) {
			const char *id = json_string_value(json_object_get(s, "id"));
			cr_assert_null(json_object_get(seen, id), "%s on two pages", id);
			json_object_set_new(seen, id, json_true());
		}
		if (json_is_string(json_object_get(page, "next_cursor")))
			cursor = strdup(json_string_value(json_object_get(page, "next_cursor")));
		json_decref(page);
		pages++;
	} while (cursor);
	cr_assert_eq(json_object_size(seen), 5);
	cr_assert_eq(pages, 3);
	json_decref(seen);

	/* Without archived=true the archived one is left out; newest first. */
	page = get(U "/sessions");
	cr_assert_eq(json_array_size(json_object_get(page, "sessions")), 4);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(page, "sessions"), 0), "id")), "p4");
	cr_assert(json_is_null(json_object_get(page, "next_cursor")));
	json_decref(page);

	expect_error("GET", U "/sessions?limit=1001", NULL, 400, "invalid_request");
	expect_error("GET", U "/sessions?limit=-1", NULL, 400, "invalid_request");
	expect_error("GET", U "/sessions?archived=maybe", NULL, 400, "invalid_request");
	expect_error("GET", U "/sessions?cursor=zzz", NULL, 400, "invalid_request");
	expect_error("GET", U "/sessions?colour=red", NULL, 400, "invalid_request");
	expect_error("GET", U "/sessions?limit=1&limit=2", NULL, 400, "invalid_request");
}

/* ---- events ------------------------------------------------------------------------ */

Test(e2e, events_append_page_conflict_replay)
{
	hs_resp r;
	json_t *res, *page;
	const char *batch = "{\"events\":[{\"id\":\"e1\",\"role\":\"user\",\"content\":\"Plan a trip to Lisbon\"},"
			    "{\"id\":\"e2\",\"role\":\"assistant\",\"content\":{\"parts\":[{\"text\":\"Sure\"}]}}],"
			    "\"state_delta\":{\"city\":\"Lisbon\"}}";

	hs_start(&H, "  max_batch_events: 5\n", NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	res = hs_expect(&H, "POST", S1 "/events", batch, 200);
	cr_assert_eq(json_integer_value(json_object_get(res, "version")), 1);
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(res, "seqs"), 0)), 1);
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(res, "seqs"), 1)), 2);
	cr_assert(json_is_false(json_object_get(res, "replayed")));
	json_decref(res);

	/* The same ids again: the same seqs, nothing written. */
	res = hs_expect(&H, "POST", S1 "/events", batch, 200);
	cr_assert(json_is_true(json_object_get(res, "replayed")));
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(res, "seqs"), 1)), 2);
	json_decref(res);
	cr_assert_eq(count_events(S1), 2);

	/* The title came from the first user message. */
	res = get(S1);
	cr_assert_str_eq(json_string_value(json_object_get(res, "title")), "Plan a trip to Lisbon");
	cr_assert_eq(json_integer_value(json_object_get(res, "version")), 1);
	json_decref(res);

	/* expected_version: right, then stale (409, nothing written). */
	res = hs_expect(&H, "POST", S1 "/events",
			"{\"expected_version\":1,\"events\":[{\"id\":\"e3\",\"role\":\"user\",\"content\":\"a\"}]}", 200);
	cr_assert_eq(json_integer_value(json_object_get(res, "version")), 2);
	json_decref(res);
	expect_error("POST", S1 "/events",
		     "{\"expected_version\":1,\"events\":[{\"id\":\"e4\",\"role\":\"user\",\"content\":\"b\"}]}",
		     409, "conflict");
	cr_assert_eq(count_events(S1), 3);

	/* Invalid requests: 400 and nothing written. */
	expect_error("POST", S1 "/events", "{\"events\":[{\"role\":\"user\",\"content\":\"x\"}", 400, "invalid_request");
	expect_error("POST", S1 "/events", "{\"events\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", 400, "invalid_request");
	expect_error("POST", S1 "/events", "{\"events\":[{\"role\":\"user\",\"content\":\"x\",\"mood\":1}]}", 400, "invalid_request");
	expect_error("POST", S1 "/events", "{\"events\":\"x\"}", 400, "invalid_request");
	expect_error("POST", S1 "/events", "{\"events\":[],\"expected_version\":\"1\"}", 400, "invalid_request");
	expect_error("POST", S1 "/events", "{\"events\":[{\"role\":\"user\",\"content\":\"x\"}],\"extra\":1}", 400, "invalid_request");
	expect_error("POST", S1 "/events", "{\"events\":[{\"role\":\"user\",\"content\":\"\\ud800\"}]}", 400, "invalid_request");
	expect_error("POST", S1 "/events", "{}", 400, "invalid_request");
	expect_error("POST", S1 "/events", "\"just a string\"", 400, "invalid_request");
	expect_error("POST", S1 "/events", "{\"events\":[{\"id\":\"d\",\"role\":\"user\",\"content\":\"x\"},{\"id\":\"d\",\"role\":\"user\",\"content\":\"y\"}]}", 400, "invalid_request");
	{
		/* Invalid UTF-8 and a NUL byte inside the JSON text. */
		static const char bad_utf8[] = "{\"events\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}";
		static const char nul[] = "{\"events\":[{\"role\":\"user\",\"content\":\"a\0b\"}]}";
		hs_req(&H, "POST", S1 "/events", NULL, bad_utf8, sizeof(bad_utf8) - 1, &r);
		cr_assert_eq(r.status, 400, "%s", r.body);
		hs_resp_clear(&r);
		hs_req(&H, "POST", S1 "/events", NULL, nul, sizeof(nul) - 1, &r);
		cr_assert_eq(r.status, 400, "%s", r.body);
		hs_resp_clear(&r);
	}
	/* Over max_batch_events (5): 413. */
	expect_error("POST", S1 "/events",
		     "{\"events\":[{\"role\":\"user\",\"content\":\"1\"},{\"role\":\"user\",\"content\":\"2\"},"
		     "{\"role\":\"user\",\"content\":\"3\"},{\"role\":\"user\",\"content\":\"4\"},"
		     "{\"role\":\"user\",\"content\":\"5\"},{\"role\":\"user\",\"content\":\"6\"}]}",
		     413, "too_large");
	expect_error("POST", U "/sessions/nope/events", "{\"events\":[{\"role\":\"user\",\"content\":\"x\"}]}", 404, "not_found");
	cr_assert_eq(count_events(S1), 3);

	/* Paging. */
	page = get(S1 "/events?limit=2");
	cr_assert_eq(json_array_size(json_object_get(page, "events")), 2);
	cr_assert_eq(json_integer_value(json_object_get(page, "next_after_seq")), 2);
	json_decref(page);
	page = get(S1 "/events?limit=2&after_seq=2");
	cr_assert_eq(json_array_size(json_object_get(page, "events")), 1);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(page, "events"), 0), "id")), "e3");
	cr_assert(json_is_null(json_object_get(page, "next_after_seq")));
	json_decref(page);
	expect_error("GET", S1 "/events?limit=5000", NULL, 400, "invalid_request");
	expect_error("GET", S1 "/events?after_seq=abc", NULL, 400, "invalid_request");
	expect_error("GET", U "/sessions/nope/events", NULL, 404, "not_found");
}

Test(e2e, session_get_with_events_filters)
{
	json_t *s, *ev;
	char path[512], ts[64];

	hs_start(&H, NULL, NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	for (int i = 1; i <= 5; i++) {
		char body[256];
		snprintf(body, sizeof(body),
			 "{\"events\":[{\"id\":\"e%d\",\"role\":\"user\",\"content\":\"m%d\","
			 "\"timestamp\":\"2025-01-0%dT10:00:00Z\"}]}", i, i, i);
		json_decref(hs_expect(&H, "POST", S1 "/events", body, 200));
	}
	s = get(S1 "?events=2");
	ev = json_object_get(s, "events");
	cr_assert_eq(json_array_size(ev), 2);
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(ev, 0), "seq")), 4);
	json_decref(s);
	s = get(S1 "?after_seq=3");
	cr_assert_eq(json_array_size(json_object_get(s, "events")), 2);
	json_decref(s);
	s = get(S1 "?events=0");
	cr_assert_eq(json_array_size(json_object_get(s, "events")), 5);
	json_decref(s);
	/* after_time: a '+' offset must be sent as %2B. */
	snprintf(ts, sizeof(ts), "2025-01-03T11:00:00%%2B01:00");
	snprintf(path, sizeof(path), S1 "?after_time=%s", ts);
	s = get(path);
	cr_assert_eq(json_array_size(json_object_get(s, "events")), 2, "after 10:00Z on the 3rd: e4 and e5");
	json_decref(s);
	s = get(S1 "?after_time=2025-01-03T10:00:00Z&events=1");
	cr_assert_eq(json_array_size(json_object_get(s, "events")), 1);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(s, "events"), 0), "id")), "e5");
	json_decref(s);
	expect_error("GET", S1 "?after_time=yesterday", NULL, 400, "invalid_request");
	expect_error("GET", S1 "?events=-2", NULL, 400, "invalid_request");
	expect_error("GET", S1 "?events=99999999999", NULL, 400, "invalid_request");
	expect_error("GET", S1 "?after_seq=1e3", NULL, 400, "invalid_request");
}

/* ---- context, state, invocations -------------------------------------------------- */

/* Each event's text goes out once: "text" (the plain text extracted from
 * the content) only with include_text=true, on every read of events. */
Test(e2e, event_text_is_sent_once_unless_asked)
{
	static const char *const reads[] = { S1 "?events=0", S1 "/events", S1 "/context" };
	json_t *c;

	hs_start(&H, NULL, NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	json_decref(hs_expect(&H, "POST", S1 "/events",
			      "{\"events\":[{\"role\":\"user\",\"content\":\"hello there\"}]}", 200));
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
		char path[256];
		json_t *ev;
		c = get(reads[i]);
		ev = json_array_get(json_object_get(c, "events"), 0);
		cr_assert_not_null(ev, "GET %s", reads[i]);
		cr_assert_null(json_object_get(ev, "text"), "GET %s sends the text twice", reads[i]);
		cr_assert_not_null(json_object_get(ev, "content"), "GET %s", reads[i]);
		json_decref(c);
		snprintf(path, sizeof(path), "%s%cinclude_text=true", reads[i],
			 strchr(reads[i], '?') ? '&' : '?');
		c = get(path);
		ev = json_array_get(json_object_get(c, "events"), 0);
		cr_assert_str_eq(json_string_value(json_object_get(ev, "text")), "hello there", "GET %s",
				 path);
		json_decref(c);
	}
}

Test(e2e, context_uses_the_apps_strategy)
{
	json_t *c;
	hs_start(&H, NULL, "apps:\n  \"*\": {working_memory: {strategy: buffer_window, max_messages: 3}}\n");
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	for (int i = 1; i <= 5; i++) {
		char body[128];
		snprintf(body, sizeof(body), "{\"events\":[{\"role\":\"user\",\"content\":\"m%d\"}]}", i);
		json_decref(hs_expect(&H, "POST", S1 "/events", body, 200));
	}
	c = get(S1 "/context?include_text=true");
	cr_assert_str_eq(json_string_value(json_object_get(c, "strategy")), "buffer_window");
	cr_assert_eq(json_array_size(json_object_get(c, "events")), 3);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(c, "events"), 0), "text")), "m3");
	cr_assert_gt(json_integer_value(json_object_get(c, "tokens")), 0);
	json_decref(c);
	expect_error("GET", U "/sessions/nope/context", NULL, 404, "not_found");
}

Test(e2e, context_with_a_summary_event)
{
	json_t *c = NULL;
	hs_start(&H, NULL, "apps:\n  \"*\": {working_memory: {strategy: summary_buffer, max_tokens: 60, "
		     "threshold: 0.5, target: 0.25, min_messages: 2}}\n");
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	for (int i = 1; i <= 12; i++) {
		char body[256];
		snprintf(body, sizeof(body),
			 "{\"events\":[{\"role\":\"%s\",\"content\":\"message number %d about the trip to Lisbon in May\"}]}",
			 i % 2 ? "user" : "assistant", i);
		json_decref(hs_expect(&H, "POST", S1 "/events", body, 200));
	}
	/* Summaries are written after the append is acknowledged. */
	for (int tries = 0; tries < 500; tries++) {
		c = get(S1 "/context");
		if (json_is_object(json_object_get(c, "summary")))
			break;
		json_decref(c);
		c = NULL;
		usleep(10 * 1000);
	}
	cr_assert(c, "no summary event appeared");
	cr_assert_str_eq(json_string_value(json_object_get(c, "strategy")), "summary_buffer");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(c, "summary"), "role")), "summary");
	cr_assert(json_is_integer(json_object_get(json_object_get(c, "summary"), "covers_seq")));
	json_decref(c);
}

Test(e2e, state_merge_null_deletes_and_temp_dropped_at_invocation_end)
{
	json_t *st;
	hs_resp r;

	hs_start(&H, NULL, NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\",\"state\":{\"a\":1}}", 201));
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s2\"}", 201));
	st = hs_expect(&H, "PATCH", S1 "/state", "{\"b\":{\"x\":[1,2]},\"user:lang\":\"pt\",\"app:model\":\"m\"}", 200);
	cr_assert_eq(json_integer_value(json_object_get(st, "a")), 1);
	cr_assert_str_eq(json_string_value(json_object_get(st, "user:lang")), "pt");
	json_decref(st);
	/* user: and app: keys are shared with the user's other session. */
	st = get(U "/sessions/s2/state");
	cr_assert_str_eq(json_string_value(json_object_get(st, "user:lang")), "pt");
	cr_assert_str_eq(json_string_value(json_object_get(st, "app:model")), "m");
	cr_assert_null(json_object_get(st, "a"));
	json_decref(st);
	/* null deletes. */
	st = hs_expect(&H, "PATCH", S1 "/state", "{\"a\":null}", 200);
	cr_assert_null(json_object_get(st, "a"));
	json_decref(st);
	/* temp: keys through an append with an invocation, gone at its end. */
	json_decref(hs_expect(&H, "POST", S1 "/events",
			      "{\"invocation_id\":\"inv1\",\"events\":[{\"role\":\"user\",\"content\":\"hi\"}],"
			      "\"state_delta\":{\"temp:scratch\":42}}", 200));
	st = get(S1 "/state");
	cr_assert_eq(json_integer_value(json_object_get(st, "temp:scratch")), 42);
	json_decref(st);
	hs_json(&H, "POST", S1 "/invocations/inv1:end", NULL, &r);
	cr_assert_eq(r.status, 204, "%s", r.body);
	hs_resp_clear(&r);
	st = get(S1 "/state");
	cr_assert_null(json_object_get(st, "temp:scratch"));
	cr_assert_str_eq(json_string_value(json_object_get(st, "user:lang")), "pt");
	json_decref(st);

	expect_error("PATCH", S1 "/state", "[1]", 400, "invalid_request");
	expect_error("PATCH", S1 "/state", "{\"temp:\":1}", 400, "invalid_request");
	expect_error("PATCH", U "/sessions/nope/state", "{\"a\":1}", 404, "not_found");
	expect_error("GET", U "/sessions/nope/state", NULL, 404, "not_found");
	expect_error("POST", U "/sessions/nope/invocations/inv1:end", NULL, 404, "not_found");
	expect_error("POST", S1 "/invocations/inv1:end", "{}", 400, "invalid_request");
	/* ":end" is part of the route: without it there is no such path. */
	expect_error("POST", S1 "/invocations/inv1", NULL, 404, "no_route");
}

/* ---- artifacts ------------------------------------------------------------------------ */

Test(e2e, artifacts_versions_bytes_and_delete)
{
	static const char bin[] = { 'P', 'K', 0, 1, 2, (char)0xff, 0, 'z' };
	const char *const text_type[] = { "Content-Type: text/plain; charset=utf-8", NULL };
	const char *const bin_type[] = { "Content-Type: application/zip", NULL };
	hs_resp r;
	json_t *j;

	hs_start(&H, NULL, NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	hs_req(&H, "PUT", S1 "/artifacts/notes.txt", text_type, "hello", 5, &r);
	cr_assert_eq(r.status, 201, "%s", r.body);
	cr_assert_eq(json_integer_value(json_object_get(r.json, "version")), 1);
	cr_assert_str_eq(hs_header(&r, "Location"), S1 "/artifacts/notes.txt?version=1");
	hs_resp_clear(&r);
	hs_req(&H, "PUT", S1 "/artifacts/notes.txt", bin_type, bin, sizeof(bin), &r);
	cr_assert_eq(r.status, 201);
	cr_assert_eq(json_integer_value(json_object_get(r.json, "version")), 2);
	cr_assert_eq(json_integer_value(json_object_get(r.json, "size")), sizeof(bin));
	hs_resp_clear(&r);

	hs_req(&H, "GET", S1 "/artifacts/notes.txt", NULL, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	cr_assert_eq(r.len, sizeof(bin));
	cr_assert(memcmp(r.body, bin, sizeof(bin)) == 0, "binary bytes round-trip");
	cr_assert_str_eq(hs_header(&r, "Content-Type"), "application/zip");
	cr_assert_str_eq(hs_header(&r, "X-Memd-Artifact-Version"), "2");
	hs_resp_clear(&r);
	hs_req(&H, "GET", S1 "/artifacts/notes.txt?version=1", NULL, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(r.body, "hello");
	cr_assert_str_eq(hs_header(&r, "Content-Type"), "text/plain; charset=utf-8");
	hs_resp_clear(&r);
	/* No Content-Type: application/octet-stream. An empty artifact. */
	{
		const char *const none[] = { "Content-Type:", NULL };
		hs_req(&H, "PUT", S1 "/artifacts/empty", none, "", 0, &r);
		cr_assert_eq(r.status, 201, "%s", r.body);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "mime_type")), "application/octet-stream");
		hs_resp_clear(&r);
	}

	j = get(S1 "/artifacts");
	cr_assert_eq(json_array_size(json_object_get(j, "artifacts")), 2);
	json_decref(j);
	j = get(S1 "/artifacts/notes.txt/versions");
	cr_assert_eq(json_array_size(json_object_get(j, "versions")), 2);
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(json_object_get(j, "versions"), 0), "version")), 1);
	json_decref(j);

	expect_error("GET", S1 "/artifacts/notes.txt?version=0", NULL, 400, "invalid_request");
	expect_error("GET", S1 "/artifacts/notes.txt?version=9", NULL, 404, "not_found");
	expect_error("GET", S1 "/artifacts/nope", NULL, 404, "not_found");
	expect_error("GET", S1 "/artifacts/nope/versions", NULL, 404, "not_found");
	expect_error("GET", S1 "/artifacts/..", NULL, 400, "invalid_request");
	expect_error("GET", S1 "/artifacts/a%5Cb", NULL, 400, "invalid_request");
	{
		const char *const bad_type[] = { "Content-Type: not a type", NULL };
		hs_req(&H, "PUT", S1 "/artifacts/x", bad_type, "x", 1, &r);
		cr_assert_eq(r.status, 400, "%s", r.body);
		hs_resp_clear(&r);
		hs_req(&H, "PUT", U "/sessions/nope/artifacts/x", text_type, "x", 1, &r);
		cr_assert_eq(r.status, 404, "%s", r.body);
		hs_resp_clear(&r);
	}

	hs_json(&H, "DELETE", S1 "/artifacts/notes.txt", NULL, &r);
	cr_assert_eq(r.status, 204);
	hs_resp_clear(&r);
	expect_error("GET", S1 "/artifacts/notes.txt", NULL, 404, "not_found");
	expect_error("DELETE", S1 "/artifacts/notes.txt", NULL, 404, "not_found");
}

/* ---- users and service routes ------------------------------------------------------------ */

Test(e2e, delete_user_forgets_everything_of_that_user_only)
{
	hs_resp r;
	json_t *j;

	hs_start(&H, NULL, NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	json_decref(hs_expect(&H, "POST", S1 "/events", "{\"events\":[{\"role\":\"user\",\"content\":\"x\"}],\"state_delta\":{\"user:k\":1}}", 200));
	json_decref(hs_expect(&H, "POST", "/v1/apps/demo/users/bob/sessions", "{\"id\":\"b1\"}", 201));
	hs_json(&H, "DELETE", U, NULL, &r);
	cr_assert_eq(r.status, 204, "%s", r.body);
	hs_resp_clear(&r);
	j = get(U "/sessions");
	cr_assert_eq(json_array_size(json_object_get(j, "sessions")), 0);
	json_decref(j);
	expect_error("GET", S1, NULL, 404, "not_found");
	json_decref(get("/v1/apps/demo/users/bob/sessions/b1"));
	/* Again: nothing left, still fine. */
	hs_json(&H, "DELETE", U, NULL, &r);
	cr_assert_eq(r.status, 204, "%s", r.body);
	hs_resp_clear(&r);
}

Test(e2e, service_routes)
{
	hs_resp r;
	json_t *j;
	char path[1024];

	hs_start(&H, NULL, NULL);
	j = get("/healthz");
	cr_assert_str_eq(json_string_value(json_object_get(j, "status")), "ok");
	json_decref(j);
	j = get("/readyz");
	cr_assert_str_eq(json_string_value(json_object_get(j, "status")), "ready");
	json_decref(j);
	j = get("/v1/plugins");
	cr_assert_gt(json_array_size(json_object_get(j, "plugins")), 0);
	json_decref(j);

	/* /openapi.json is api/openapi.yaml. */
	j = get("/openapi.json");
	snprintf(path, sizeof(path), "%s", getenv("MEMD_SOURCE_ROOT"));
	cr_assert_str_eq(json_string_value(json_object_get(j, "openapi")), "3.1.0");
	cr_assert_not_null(json_object_get(json_object_get(j, "paths"), "/v1/apps/{app}/users/{user}/sessions/{sid}/events"));
	json_decref(j);

	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	expect_error("GET", S1 "/nothing", NULL, 404, "no_route");
	hs_req(&H, "GET", "/metrics", NULL, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	cr_assert(strncmp(hs_header(&r, "Content-Type"), "text/plain; version=0.0.4", 25) == 0);
	cr_assert(strstr(r.body, "memd_http_requests_total{route=\"/v1/apps/{app}/users/{user}/sessions\",method=\"POST\",status=\"201\"} 1\n"), "%s", r.body);
	cr_assert(strstr(r.body, "memd_http_requests_total{route=\"unmatched\",method=\"\",status=\"404\"} 1\n"));
	cr_assert(strstr(r.body, "memd_http_request_duration_seconds_bucket{route=\"/healthz\",method=\"GET\",le=\"+Inf\"}"));
	cr_assert(strstr(r.body, "memd_op_duration_seconds_count{op=\"session_create\"} 1\n"));
	/* The session store plugin's own op, timed by the host. */
	cr_assert(strstr(r.body, "# TYPE memd_store_call_duration_seconds histogram\n"), "%s", r.body);
	cr_assert(strstr(r.body, "memd_store_call_duration_seconds_count{store=\"stores.main\","
				 "op=\"session_create\"} 1\n"), "%s", r.body);
	cr_assert(strstr(r.body, "memd_http_requests_in_flight 1\n"), "this request is in flight");
	hs_resp_clear(&r);
	/* A failed store op is counted by its error code. */
	expect_error("GET", U "/sessions/nope", NULL, 404, "not_found");
	hs_req(&H, "GET", "/metrics", NULL, NULL, 0, &r);
	cr_assert(strstr(r.body, "memd_op_errors_total{op=\"session_get\",code=\"not_found\"} 1\n"), "%s", r.body);
	cr_assert(strstr(r.body, "memd_store_call_errors_total{store=\"stores.main\",op=\"session_get\","
				 "code=\"not_found\"} 1\n"), "%s", r.body);
	hs_resp_clear(&r);
}

/* ---- auth --------------------------------------------------------------------------------- */

#define KEY_R "read-key-1234567890-0123456789abcdef"
#define KEY_W "write-key-abcdefghij-0123456789abcdef"
#define KEY_A "admin-key-ZYXWVUTSRQ-0123456789abcdef"
#define KEY_LA "admin-key-of-demo-only-0123456789abcdef"
#define KEY_LR "read-key-of-demo-and-cafe-0123456789abcdef"
#define OTHER "/v1/apps/elsewhere/users/alice"

static long with_key(const char *method, const char *path, const char *key, const char *body)
{
	char auth[256];
	const char *hdr[] = { auth, NULL };
	hs_resp r;
	long status;
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key);
	hs_req(&H, method, path, key ? hdr : NULL, body, body ? strlen(body) : 0, &r);
	status = r.status;
	if (status == 401)
		cr_assert_str_eq(hs_header(&r, "WWW-Authenticate"), "Bearer realm=\"memd\"");
	hs_resp_clear(&r);
	return status;
}

Test(e2e, auth_scopes)
{
	char *log;
	hs_start(&H, "  api_keys:\n    - {key: " KEY_R ", scope: read}\n    - {key: " KEY_W ", scope: write}\n"
		     "    - {key: " KEY_A ", scope: admin}\n"
		     "    - {key: " KEY_LA ", scope: admin, apps: [demo]}\n"
		     "    - {key: " KEY_LR ", scope: read, apps: [demo, \"caf\u00e9\"]}\n", NULL);
	/* Probes and the spec are public. */
	cr_assert_eq(with_key("GET", "/healthz", NULL, NULL), 200);
	cr_assert_eq(with_key("GET", "/readyz", NULL, NULL), 200);
	cr_assert_eq(with_key("GET", "/openapi.json", NULL, NULL), 200);
	/* Missing, malformed, unknown credentials: 401. */
	cr_assert_eq(with_key("GET", U "/sessions", NULL, NULL), 401);
	cr_assert_eq(with_key("GET", "/metrics", NULL, NULL), 401);
	{
		const char *const basic[] = { "Authorization: Basic dXNlcjpwYXNz", NULL };
		hs_resp r;
		hs_req(&H, "GET", U "/sessions", basic, NULL, 0, &r);
		cr_assert_eq(r.status, 401);
		hs_resp_clear(&r);
	}
	cr_assert_eq(with_key("GET", U "/sessions", "wrong-key", NULL), 401);
	cr_assert_eq(with_key("GET", U "/sessions", KEY_R "x", NULL), 401);
	/* Credentials come before judging the request. */
	cr_assert_eq(with_key("GET", U "/sessions/a%2Fb", NULL, NULL), 401);
	cr_assert_eq(with_key("GET", U "/sessions?colour=red", NULL, NULL), 401);
	cr_assert_eq(with_key("GET", U "/sessions/a%2Fb", KEY_R, NULL), 400);
	cr_assert_eq(with_key("GET", U "/sessions", "read-key-1234567890-0123456789abcde", NULL), 401);
	/* read < write < admin. */
	cr_assert_eq(with_key("GET", U "/sessions", KEY_R, NULL), 200);
	cr_assert_eq(with_key("GET", "/metrics", KEY_R, NULL), 200);
	cr_assert_eq(with_key("POST", U "/sessions", KEY_R, "{\"id\":\"s1\"}"), 403);
	cr_assert_eq(with_key("POST", U "/sessions", KEY_W, "{\"id\":\"s1\"}"), 201);
	cr_assert_eq(with_key("GET", S1, KEY_W, NULL), 200);
	cr_assert_eq(with_key("GET", "/v1/plugins", KEY_W, NULL), 403);
	cr_assert_eq(with_key("GET", "/v1/plugins", KEY_A, NULL), 200);
	cr_assert_eq(with_key("DELETE", U, KEY_W, NULL), 403);
	cr_assert_eq(with_key("GET", S1, KEY_R, NULL), 200, "the 403 wrote nothing");
	/* Keys limited to apps: their apps' routes only, within their scope. */
	cr_assert_eq(with_key("GET", S1, KEY_LA, NULL), 200);
	cr_assert_eq(with_key("POST", U "/sessions", KEY_LA, "{\"id\":\"s2\"}"), 201);
	cr_assert_eq(with_key("POST", U "/index:rebuild", KEY_LA, NULL), 202);
	cr_assert_eq(with_key("GET", OTHER "/sessions", KEY_LA, NULL), 403);
	cr_assert_eq(with_key("POST", OTHER "/sessions", KEY_LA, "{\"id\":\"s1\"}"), 403);
	cr_assert_eq(with_key("DELETE", OTHER, KEY_LA, NULL), 403);
	cr_assert_eq(with_key("POST", OTHER "/search", KEY_LA, "{\"query\":\"x\"}"), 403);
	cr_assert_eq(with_key("GET", "/v1/apps/Demo/users/alice/sessions", KEY_LA, NULL), 403,
		     "app names are exact");
	cr_assert_eq(with_key("GET", "/v1/apps/caf%C3%A9/users/alice/sessions", KEY_LR, NULL), 200);
	cr_assert_eq(with_key("GET", "/v1/apps/cafe/users/alice/sessions", KEY_LR, NULL), 403);
	cr_assert_eq(with_key("GET", U "/sessions", KEY_LR, NULL), 200);
	cr_assert_eq(with_key("POST", U "/sessions", KEY_LR, "{\"id\":\"s3\"}"), 403, "scope still counts");
	/* An app that cannot be read is not one of the key's. */
	cr_assert_eq(with_key("GET", "/v1/apps/d%2Fe/users/alice/sessions", KEY_LR, NULL), 403);
	/* App-less routes: admin ones need a key for every app. */
	cr_assert_eq(with_key("GET", "/v1/plugins", KEY_LA, NULL), 403);
	cr_assert_eq(with_key("GET", "/metrics", KEY_LR, NULL), 200);
	cr_assert_eq(with_key("GET", "/healthz", KEY_LR, NULL), 200);
	cr_assert_eq(with_key("GET", OTHER "/sessions", KEY_A, NULL), 200, "an unlimited key has every app");
	cr_assert_eq(with_key("GET", S1, KEY_R, NULL), 200, "the 403s wrote nothing");
	cr_assert_eq(with_key("DELETE", U, KEY_LA, NULL), 204);
	cr_assert_eq(with_key("DELETE", U, KEY_A, NULL), 204);
	cr_assert_eq(with_key("GET", S1, KEY_R, NULL), 404);
	hs_stop(&H);
	/* Keys never reach the log. */
	log = hs_log_text(&H);
	cr_assert(strstr(log, "\"status\":401"), "requests are logged");
	cr_assert_null(strstr(log, KEY_R));
	cr_assert_null(strstr(log, KEY_W));
	cr_assert_null(strstr(log, KEY_A));
	cr_assert_null(strstr(log, KEY_LA));
	cr_assert_null(strstr(log, KEY_LR));
	cr_assert_null(strstr(log, "wrong-key"));
	free(log);
}

Test(e2e, refuses_non_loopback_without_keys)
{
	char dir[] = "/tmp/memd-http-nl-XXXXXX", cfg[PATH_MAX], cmd[2 * PATH_MAX], out[4096];
	FILE *f, *p;
	size_t n;
	int status;

	cr_assert(mkdtemp(dir));
	snprintf(cfg, sizeof(cfg), "%s/memd.yaml", dir);
	f = fopen(cfg, "w");
	fprintf(f, "server: {listen: 0.0.0.0:8799}\nstores: {main: {plugin: sqlite, path: %s/m.db}}\n", dir);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "%s/host/memd serve --config %s 2>&1", getenv("MEMD_BUILD_ROOT"), cfg);
	p = popen(cmd, "r");
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	status = pclose(p);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 7, "exit status 0x%x: %s", status, out);
	cr_assert(strstr(out, "refusing to listen on 0.0.0.0:8799 without API keys"), "%s", out);
	cr_assert_null(strstr(out, "listening"), "%s", out);
	/* Nothing was opened either. */
	snprintf(cmd, sizeof(cmd), "%s/m.db", dir);
	cr_assert_neq(access(cmd, F_OK), 0);
	unlink(cfg);
	rmdir(dir);
}

/* Run "memd ARGS --config CFG" (CFG holds yaml), return its exit status
 * and output (out, cap bytes). */
static int memd_with_config(const char *args, const char *yaml, char *out, size_t cap)
{
	char dir[] = "/tmp/memd-http-cfg-XXXXXX", cfg[PATH_MAX], cmd[2 * PATH_MAX], db[PATH_MAX];
	FILE *f, *p;
	size_t n;
	int status;

	cr_assert(mkdtemp(dir));
	snprintf(cfg, sizeof(cfg), "%s/memd.yaml", dir);
	f = fopen(cfg, "w");
	fprintf(f, "%sstores: {main: {plugin: sqlite, path: %s/m.db}}\n", yaml, dir);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "%s/host/memd %s --config %s 2>&1", getenv("MEMD_BUILD_ROOT"), args,
		 cfg);
	p = popen(cmd, "r");
	n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	status = pclose(p);
	snprintf(db, sizeof(db), "%s/m.db", dir);
	cr_assert_neq(access(db, F_OK), 0, "a refused config opened the store");
	unlink(cfg);
	rmdir(dir);
	return status;
}

Test(e2e, refuses_short_and_published_keys)
{
	const char *yaml = "server:\n"                                      /* 1 */
			   "  listen: 0.0.0.0:8799\n"                       /* 2 */
			   "  api_keys:\n"                                  /* 3 */
			   "    - {key: dev-only-admin-key-change-me, scope: admin}\n" /* 4 */
			   "    - {key: short-key, scope: read}\n"          /* 5 */
			   "    - {key: " KEY_W ", scope: write}\n";        /* 6 */
	const char *const verbs[] = { "serve", "config check", NULL };
	char out[8192];

	for (size_t i = 0; verbs[i]; i++) {
		int status = memd_with_config(verbs[i], yaml, out, sizeof(out));
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0, "%s: exit status 0x%x: %s",
			  verbs[i], status, out);
		cr_assert(strstr(out, "memd.yaml:4: server.api_keys[0].key: this key is published in memd's "
				      "example configs"), "%s: %s", verbs[i], out);
		cr_assert(strstr(out, "memd.yaml:5: server.api_keys[1].key: too short (9 bytes): an API key "
				      "needs at least 32 random bytes"), "%s: %s", verbs[i], out);
		cr_assert_null(strstr(out, "api_keys[2]"), "%s: %s", verbs[i], out);
		cr_assert_null(strstr(out, "listening"), "%s: %s", verbs[i], out);
		/* The keys themselves are never printed. */
		cr_assert_null(strstr(out, "short-key"), "%s: %s", verbs[i], out);
		cr_assert_null(strstr(out, "dev-only-admin-key-change-me"), "%s: %s", verbs[i], out);
	}
}

/* ---- limits ------------------------------------------------------------------------------- */

Test(e2e, limits_body_headers_timeout)
{
	char *big, *hdr, *snap, *snap2, raw[4096];
	const char *hdrs[2];
	hs_resp r;
	int fd;

	hs_start(&H, "  max_body_bytes: 1024\n  max_header_bytes: 2048\n  request_timeout_ms: 600\n", NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	snap = hs_snapshot(&H, "demo", "alice");

	/* A body over max_body_bytes: 413 from its Content-Length... */
	big = malloc(3000);
	memset(big, ' ', 3000);
	memcpy(big, "{\"events\":[]", 12);
	big[2999] = '}';
	hs_req(&H, "POST", S1 "/events", NULL, big, 3000, &r);
	cr_assert_eq(r.status, 413, "%s", r.body);
	cr_assert(strstr(r.body, "1024"), "the message names the limit: %s", r.body);
	hs_resp_clear(&r);
	/* ...and chunked, without one. */
	fd = hs_raw_connect(&H);
	{
		char head[512];
		int n = snprintf(head, sizeof(head),
				 "PUT " S1 "/artifacts/big HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n");
		hs_raw_send(fd, head, (size_t)n);
		for (int i = 0; i < 3; i++) {
			hs_raw_send(fd, "3E8\r\n", 5);
			hs_raw_send(fd, big, 1000);
			hs_raw_send(fd, "\r\n", 2);
		}
		hs_raw_send(fd, "0\r\n\r\n", 5);
		hs_raw_read(fd, raw, sizeof(raw), 5000);
		cr_assert_eq(hs_raw_status(raw), 413, "%s", raw);
		cr_assert(strstr(raw, "\"too_large\""), "%s", raw);
	}
	close(fd);
	free(big);

	/* Headers over max_header_bytes: 431 with a JSON body. */
	hdr = malloc(2600);
	memset(hdr, 'a', 2599);
	memcpy(hdr, "X-Big: ", 7);
	hdr[2599] = '\0';
	hdrs[0] = hdr;
	hdrs[1] = NULL;
	hs_req(&H, "GET", S1, hdrs, NULL, 0, &r);
	cr_assert_eq(r.status, 431, "%s", r.body);
	cr_assert_str_eq(hs_error_code(&r), "headers_too_large");
	hs_resp_clear(&r);
	free(hdr);

	/* A body that stops coming: 408 once request_timeout_ms passes. */
	fd = hs_raw_connect(&H);
	{
		const char *head = "POST " S1 "/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
				   "Content-Length: 200\r\nX-Request-Id: slow-client-1\r\n\r\n{\"events\":[";
		hs_raw_send(fd, head, strlen(head));
		hs_raw_read(fd, raw, sizeof(raw), 5000);
		cr_assert_eq(hs_raw_status(raw), 408, "%s", raw);
		cr_assert(strstr(raw, "\"request_timeout\""), "%s", raw);
		cr_assert(strstr(raw, "600 ms"), "%s", raw);
		cr_assert(strstr(raw, "X-Request-Id: slow-client-1"), "%s", raw);
	}
	close(fd);
	/* A body still trickling in at the deadline: 408 too. Its last byte
	 * goes TRICKLE_AFTER_MS after memd is seen holding the request: memd
	 * counts the deadline from when it had the headers, so it has passed
	 * by then however late memd read them. */
	cr_assert(hs_wait_in_flight(&H, 0, IN_FLIGHT_WAIT_MS), "earlier requests still in flight");
	fd = hs_raw_connect(&H);
	{
		const char *head = "POST " S1 "/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{";
		hs_raw_send(fd, head, strlen(head));
		cr_assert(hs_wait_in_flight(&H, 1, IN_FLIGHT_WAIT_MS),
			  "memd did not start on the request within %d ms", IN_FLIGHT_WAIT_MS);
		usleep(TRICKLE_AFTER_MS * 1000);
		hs_raw_send(fd, "}", 1);
		hs_raw_read(fd, raw, sizeof(raw), 5000);
		cr_assert_eq(hs_raw_status(raw), 408, "%s", raw);
	}
	close(fd);

	/* Nothing of the above was written. */
	snap2 = hs_snapshot(&H, "demo", "alice");
	cr_assert_str_eq(snap, snap2);
	free(snap);
	free(snap2);
	json_decref(get("/healthz"));
}

/* ---- paths, methods, query, bodies --------------------------------------------------------- */

Test(e2e, bad_paths_methods_and_bodies)
{
	hs_resp r;
	char *snap, *snap2;

	hs_start(&H, NULL, NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	snap = hs_snapshot(&H, "demo", "alice");
	expect_error("GET", U "/sessions/a%2Fb", NULL, 400, "invalid_request");
	expect_error("GET", U "/sessions/a%00b", NULL, 400, "invalid_request");
	expect_error("GET", U "/sessions/a%01b", NULL, 400, "invalid_request");
	expect_error("GET", U "/sessions/a%ffb", NULL, 400, "invalid_request");
	expect_error("GET", U "/sessions/a%zzb", NULL, 400, "invalid_request");
	expect_error("GET", U "/sessions/a%2", NULL, 400, "invalid_request");
	expect_error("POST", "/v1/apps/d%2Fe/users/alice/sessions", "{}", 400, "invalid_request");
	expect_error("GET", "/nope", NULL, 404, "no_route");
	expect_error("GET", U "/sessions/", NULL, 404, "no_route");
	expect_error("GET", "/v1/apps/demo/users//sessions", NULL, 404, "no_route");
	/* A long id: over 255 bytes. */
	{
		char path[1024];
		int n = snprintf(path, sizeof(path), U "/sessions/");
		memset(path + n, 'x', 300);
		path[n + 300] = '\0';
		expect_error("GET", path, NULL, 400, "invalid_request");
	}

	hs_json(&H, "PUT", S1, NULL, &r);
	cr_assert_eq(r.status, 405);
	cr_assert_str_eq(hs_header(&r, "Allow"), "GET, PATCH, DELETE");
	cr_assert_str_eq(hs_error_code(&r), "method_not_allowed");
	hs_resp_clear(&r);
	expect_error("POST", "/healthz", NULL, 405, "method_not_allowed");
	/* Bodies where none is taken, unknown query parameters. */
	expect_error("GET", S1, "{}", 400, "invalid_request");
	expect_error("DELETE", S1, "x", 400, "invalid_request");
	expect_error("GET", "/healthz?verbose=1", NULL, 400, "invalid_request");
	expect_error("GET", S1 "/context?x", NULL, 400, "invalid_request");
	expect_error("POST", U "/sessions/s1%2Fx/events", "{\"events\":[{\"role\":\"user\",\"content\":\"x\"}]}",
		     400, "invalid_request");
	expect_error("PUT", U "/sessions/s1/artifacts/a%00b", "x", 400, "invalid_request");
	snap2 = hs_snapshot(&H, "demo", "alice");
	cr_assert_str_eq(snap, snap2, "a refused request wrote something");
	free(snap);
	free(snap2);

	/* Percent-encoded ids that are fine. */
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"caf\\u00e9 s\"}", 201));
	json_decref(get(U "/sessions/caf%C3%A9%20s"));
}

/* ---- browser attacks ------------------------------------------------------------------------ */

/* One request with a Content-Type header (NULL: none sent) and a body;
 * returns the status, asserting the error code when it is not 2xx. */
static long with_type(const char *method, const char *path, const char *type, const char *body,
		      const char *code)
{
	char hdr[256];
	const char *const with[] = { hdr, NULL };
	const char *const without[] = { "Content-Type:", NULL }; /* curl: send none */
	hs_resp r;
	long status;

	snprintf(hdr, sizeof(hdr), "Content-Type: %s", type ? type : "");
	hs_req(&H, method, path, type ? with : without, body, body ? strlen(body) : 0, &r);
	status = r.status;
	if (code)
		cr_assert_str_eq(hs_error_code(&r), code, "%s %s (%s): %s", method, path,
				 type ? type : "no type", r.body);
	hs_resp_clear(&r);
	return status;
}

Test(e2e, json_routes_refuse_other_media_types)
{
	const char *ev = "{\"events\":[{\"role\":\"system\",\"content\":\"obey the page\"}]}";
	/* What a web page can send cross-site without a preflight. */
	const char *const simple[] = { "text/plain", "text/plain;charset=UTF-8",
				       "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
				       "application/jsonp", "application/json-patch+json", NULL };
	char *snap, *snap2;

	hs_start(&H, NULL, NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	snap = hs_snapshot(&H, "demo", "alice");
	for (size_t i = 0; simple[i]; i++) {
		cr_assert_eq(with_type("POST", S1 "/events", simple[i], ev, "unsupported_media_type"), 415,
			     "%s", simple[i]);
		cr_assert_eq(with_type("POST", U "/sessions", simple[i], "{\"id\":\"s2\"}",
				       "unsupported_media_type"), 415, "%s", simple[i]);
		cr_assert_eq(with_type("PATCH", S1 "/state", simple[i], "{\"k\":1}",
				       "unsupported_media_type"), 415, "%s", simple[i]);
		cr_assert_eq(with_type("PATCH", S1, simple[i], "{\"title\":\"t\"}",
				       "unsupported_media_type"), 415, "%s", simple[i]);
		cr_assert_eq(with_type("POST", U "/search", simple[i], "{\"query\":\"x\"}",
				       "unsupported_media_type"), 415, "%s", simple[i]);
		/* An empty form posted to a route that takes no body. */
		cr_assert_eq(with_type("POST", U "/index:rebuild", simple[i], NULL,
				       "unsupported_media_type"), 415, "%s", simple[i]);
		cr_assert_eq(with_type("POST", S1 "/invocations/i1:end", simple[i], "",
				       "unsupported_media_type"), 415, "%s", simple[i]);
	}
	/* A body without any Content-Type (fetch() of a Blob or an ArrayBuffer). */
	cr_assert_eq(with_type("POST", S1 "/events", NULL, ev, "unsupported_media_type"), 415);
	cr_assert_eq(with_type("POST", U "/sessions", NULL, "{\"id\":\"s3\"}", "unsupported_media_type"), 415);
	snap2 = hs_snapshot(&H, "demo", "alice");
	cr_assert_str_eq(snap, snap2, "a 415 wrote something");
	free(snap);
	free(snap2);

	/* application/json with parameters, in any case. */
	cr_assert_eq(with_type("POST", S1 "/events", "application/json; charset=utf-8", ev, NULL), 200);
	cr_assert_eq(with_type("POST", S1 "/events", "Application/JSON", ev, NULL), 200);
	cr_assert_eq(with_type("POST", S1 "/events", "application/json;charset=UTF-8", ev, NULL), 200);
	cr_assert_eq(with_type("POST", U "/sessions", "APPLICATION/json ; charset=\"utf-8\"",
			       "{\"id\":\"s4\"}", NULL), 201);
	/* No body and no type: the routes whose body is optional, or none. */
	cr_assert_eq(with_type("POST", U "/sessions", NULL, NULL, NULL), 201);
	cr_assert_eq(with_type("POST", S1 "/invocations/i1:end", NULL, NULL, NULL), 204);
	/* Artifacts keep any Content-Type: it is stored with the bytes. */
	cr_assert_eq(with_type("PUT", S1 "/artifacts/note", "text/plain", "hello", NULL), 201);
	cr_assert_eq(count_events(S1), 3);
}

/* A raw GET path with the given Host line (NULL: none) over HTTP/1.1; returns
 * the status and, for a refusal, asserts the JSON error shape and a request id. */
static int raw_host(const char *method, const char *path, const char *host)
{
	char req[1024], raw[8192];
	int fd, status;

	snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\n%s%s%sConnection: close\r\n\r\n", method, path,
		 host ? "Host: " : "", host ? host : "", host ? "\r\n" : "");
	fd = hs_raw_connect(&H);
	hs_raw_send(fd, req, strlen(req));
	hs_raw_read(fd, raw, sizeof(raw), 5000);
	close(fd);
	status = hs_raw_status(raw);
	cr_assert(strstr(raw, "\r\nX-Request-Id: "), "%s", raw);
	if (status >= 400) {
		cr_assert(strstr(raw, "\r\nContent-Type: application/json\r\n"), "%s", raw);
		cr_assert(strstr(raw, "{\"error\":{\"code\":\"invalid_request\""), "%s", raw);
	}
	return status;
}

/* tmpl with "PORT" replaced by memd's port. */
static void with_port(char *out, size_t cap, const char *tmpl)
{
	const char *p = strstr(tmpl, "PORT");
	if (!p)
		snprintf(out, cap, "%s", tmpl);
	else
		snprintf(out, cap, "%.*s%d%s", (int)(p - tmpl), tmpl, H.port, p + strlen("PORT"));
}

Test(e2e, host_header_is_checked_on_loopback_without_keys)
{
	const char *ok[] = { "127.0.0.1:PORT", "localhost:PORT", "[::1]:PORT", "127.0.0.1", "localhost",
			     "[::1]", "LocalHost:PORT", NULL };
	/* What a DNS-rebinding page, or a mistyped client, sends. */
	const char *bad[] = { "evil.example:PORT", "evil.example", "127.0.0.1.evil.example:PORT",
			      "localhost.evil.example", "localhost:PORTx", "localhost:", "127.0.0.2:PORT",
			      "[::1]x", "", "127.0.0.1:1", NULL };
	char host[128], *snap, *snap2;

	hs_start(&H, NULL, NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	snap = hs_snapshot(&H, "demo", "alice");
	for (size_t i = 0; ok[i]; i++) {
		with_port(host, sizeof(host), ok[i]);
		cr_assert_eq(raw_host("GET", U "/sessions", host), 200, "Host: %s", host);
	}
	for (size_t i = 0; bad[i]; i++) {
		with_port(host, sizeof(host), bad[i]);
		cr_assert_eq(raw_host("GET", U "/sessions", host), 400, "Host: %s", host);
		cr_assert_eq(raw_host("GET", "/healthz", host), 400, "Host: %s", host);
		cr_assert_eq(raw_host("DELETE", S1, host), 400, "Host: %s", host);
	}
	/* HTTP/1.1 requires Host. */
	cr_assert_eq(raw_host("GET", "/healthz", NULL), 400);
	snap2 = hs_snapshot(&H, "demo", "alice");
	cr_assert_str_eq(snap, snap2, "a refused Host deleted something");
	free(snap);
	free(snap2);
	hs_finish(&H);
	memset(&H, 0, sizeof(H));

	/* server.allowed_hosts, when set, is what is accepted. */
	hs_start(&H, "  allowed_hosts: [memd.internal, \"127.0.0.1:1234\"]\n", NULL);
	snprintf(host, sizeof(host), "memd.internal:%d", H.port);
	cr_assert_eq(raw_host("GET", "/healthz", host), 200);
	cr_assert_eq(raw_host("GET", "/healthz", "MEMD.internal"), 200);
	cr_assert_eq(raw_host("GET", "/healthz", "127.0.0.1:1234"), 200);
	cr_assert_eq(raw_host("GET", "/healthz", "127.0.0.1:1235"), 400);
	snprintf(host, sizeof(host), "127.0.0.1:%d", H.port);
	cr_assert_eq(raw_host("GET", "/healthz", host), 400);
	cr_assert_eq(raw_host("GET", "/healthz", "memd.internal.evil"), 400);
	cr_assert_eq(raw_host("GET", "/healthz", NULL), 400);
	hs_finish(&H);
	memset(&H, 0, sizeof(H));

	/* With API keys a Host is not needed to keep pages out: any is served. */
	hs_start(&H, "  api_keys:\n    - {key: " KEY_A ", scope: admin}\n", NULL);
	cr_assert_eq(raw_host("GET", "/healthz", "evil.example"), 200);
	cr_assert_eq(raw_host("GET", "/healthz", NULL), 400, "HTTP/1.1 still requires Host");
}

/* ---- protocol edges ------------------------------------------------------------------------ */

/* Send len bytes of a raw request, return the whole response (static). */
static const char *raw_exchange(const void *req, size_t len)
{
	static char raw[16384];
	int fd = hs_raw_connect(&H);
	hs_raw_send(fd, req, len);
	hs_raw_read(fd, raw, sizeof(raw), 5000);
	close(fd);
	return raw;
}

/* raw is a JSON error response with code and a request id. */
static void assert_json_error(const char *raw, int status, const char *code)
{
	char want[128];
	cr_assert_eq(hs_raw_status(raw), status, "%s", raw);
	cr_assert(strstr(raw, "\r\nContent-Type: application/json\r\n"), "%s", raw);
	cr_assert(strstr(raw, "\r\nX-Request-Id: "), "%s", raw);
	snprintf(want, sizeof(want), "{\"error\":{\"code\":\"%s\"", code);
	cr_assert(strstr(raw, want), "%s", raw);
}

Test(e2e, protocol_edges_answer_json_and_log_the_status)
{
	static const char nul_path[] = "GET /healthz\0/../v1/plugins HTTP/1.1\r\nHost: 127.0.0.1\r\n"
				       "Connection: close\r\n\r\n";
	static const char nul_query[] = "GET " U "/sessions?limit=1\0x HTTP/1.1\r\nHost: 127.0.0.1\r\n"
					"Connection: close\r\n\r\n";
	static const char bad_length[] = "POST " U "/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
					 "Content-Type: application/json\r\nX-Request-Id: bad-length-1\r\n"
					 "Content-Length: -5\r\nConnection: close\r\n\r\n{}";
	static const char bad_chunks[] = "POST " U "/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
					 "Content-Type: application/json\r\nX-Request-Id: bad-chunks-1\r\n"
					 "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nZZZ\r\nabc\r\n0\r\n\r\n";
	/* Refused before a request exists: only libmicrohttpd's own line. */
	static const char http2[] = "GET /healthz HTTP/2.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
	char req[8192], *log, *line, *snap, *snap2;
	int n, seen_length = 0, seen_chunks = 0, seen_version = 0;

	hs_start(&H, "  max_header_bytes: 2048\n", NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	snap = hs_snapshot(&H, "demo", "alice");

	/* A NUL in the request target is not where the path ends. */
	assert_json_error(raw_exchange(nul_path, sizeof(nul_path) - 1), 400, "invalid_request");
	assert_json_error(raw_exchange(nul_query, sizeof(nul_query) - 1), 400, "invalid_request");
	/* A request target over max_header_bytes: 414, in the path or the query. */
	n = snprintf(req, sizeof(req), "GET /healthz?x=%03000d HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		     "Connection: close\r\n\r\n", 0);
	assert_json_error(raw_exchange(req, (size_t)n), 414, "uri_too_long");
	n = snprintf(req, sizeof(req), "DELETE " U "/sessions/%03000d HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		     "Connection: close\r\n\r\n", 0);
	assert_json_error(raw_exchange(req, (size_t)n), 414, "uri_too_long");
	/* Headers over it: 431. */
	n = snprintf(req, sizeof(req), "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: %03000d\r\n"
		     "Connection: close\r\n\r\n", 0);
	assert_json_error(raw_exchange(req, (size_t)n), 431, "headers_too_large");
	/* What libmicrohttpd answers itself (HTML): logged with its status. */
	cr_assert_eq(hs_raw_status(raw_exchange(bad_length, sizeof(bad_length) - 1)), 400);
	cr_assert_eq(hs_raw_status(raw_exchange(bad_chunks, sizeof(bad_chunks) - 1)), 400);
	cr_assert_eq(hs_raw_status(raw_exchange(http2, sizeof(http2) - 1)), 505);
	snap2 = hs_snapshot(&H, "demo", "alice");
	cr_assert_str_eq(snap, snap2, "a refused request wrote something");
	free(snap);
	free(snap2);
	hs_stop(&H);

	log = hs_log_text(&H);
	for (line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
		json_t *j = json_loads(line, 0, NULL);
		const char *id;
		cr_assert(j, "every log line is JSON: %s", line);
		if (strncmp(json_string_value(json_object_get(j, "msg")), "libmicrohttpd: ", 15) == 0 &&
		    json_integer_value(json_object_get(j, "status")) == 505)
			seen_version++;
		if (strcmp(json_string_value(json_object_get(j, "msg")), "request") == 0) {
			cr_assert_neq(json_integer_value(json_object_get(j, "status")), 0, "%s", line);
			id = json_string_value(json_object_get(j, "request_id"));
			cr_assert(id && *id, "%s", line);
			if (strcmp(id, "bad-length-1") == 0) {
				cr_assert_eq(json_integer_value(json_object_get(j, "status")), 400, "%s", line);
				seen_length++;
			}
			if (strcmp(id, "bad-chunks-1") == 0) {
				cr_assert_eq(json_integer_value(json_object_get(j, "status")), 400, "%s", line);
				seen_chunks++;
			}
		}
		json_decref(j);
	}
	cr_assert_eq(seen_length, 1, "the bad Content-Length is logged once");
	cr_assert_eq(seen_chunks, 1, "the bad chunking is logged once");
	cr_assert_eq(seen_version, 1, "the 505 is logged with its status");
	free(log);
}

Test(e2e, browser_pages_are_refused_without_keys)
{
	char same[128], *snap, *snap2;
	hs_resp r;

	hs_start(&H, NULL, NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	snap = hs_snapshot(&H, "demo", "alice");
	/* What a page on another site can make the browser send without a
	 * preflight: a POST without a body (fetch, mode no-cors). */
	{
		const char *const pages[][2] = {
			{ "Origin: http://evil.example", NULL },
			{ "Origin: null", NULL },
			{ "Origin: http://127.0.0.1:1", NULL },
			{ "Sec-Fetch-Site: cross-site", NULL },
			{ "Sec-Fetch-Site: same-site", NULL },
		};
		for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
			hs_req(&H, "POST", S1 "/invocations/i1:end", pages[i], NULL, 0, &r);
			cr_assert_eq(r.status, 403, "%s: %ld %s", pages[i][0], r.status, r.body);
			cr_assert_str_eq(hs_error_code(&r), "forbidden");
			hs_resp_clear(&r);
			hs_req(&H, "POST", U "/sessions", pages[i], NULL, 0, &r);
			cr_assert_eq(r.status, 403, "%s: %ld %s", pages[i][0], r.status, r.body);
			hs_resp_clear(&r);
			hs_req(&H, "GET", U "/sessions", pages[i], NULL, 0, &r);
			cr_assert_eq(r.status, 403, "%s: %ld %s", pages[i][0], r.status, r.body);
			hs_resp_clear(&r);
		}
	}
	snap2 = hs_snapshot(&H, "demo", "alice");
	cr_assert_str_eq(snap, snap2, "a page's request wrote something");
	free(snap);
	free(snap2);
	/* memd's own origin, and a request the user made by hand, are fine. */
	snprintf(same, sizeof(same), "Origin: http://127.0.0.1:%d", H.port);
	{
		const char *const own[][2] = { { same, NULL }, { "Sec-Fetch-Site: same-origin", NULL },
					       { "Sec-Fetch-Site: none", NULL } };
		for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
			hs_req(&H, "GET", U "/sessions", own[i], NULL, 0, &r);
			cr_assert_eq(r.status, 200, "%s: %ld %s", own[i][0], r.status, r.body);
			hs_resp_clear(&r);
		}
	}
	hs_finish(&H);
	memset(&H, 0, sizeof(H));

	/* With API keys the browser has no credential to abuse: Origin is not judged. */
	hs_start(&H, "  api_keys:\n    - {key: " KEY_W ", scope: write}\n", NULL);
	{
		const char *const page[] = { "Origin: http://app.example", "Authorization: Bearer " KEY_W, NULL };
		hs_req(&H, "GET", U "/sessions", page, NULL, 0, &r);
		cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
		hs_resp_clear(&r);
	}
}

Test(e2e, ambiguous_body_length_is_refused)
{
	static const char two_lengths[] = "POST " U "/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
					  "Content-Type: application/json\r\nContent-Length: 2\r\n"
					  "Content-Length: 12\r\nConnection: close\r\n\r\n{}{\"id\":\"x\"}";
	static const char length_and_chunks[] = "POST " U "/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
						"Content-Type: application/json\r\nContent-Length: 2\r\n"
						"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
						"2\r\n{}\r\n0\r\n\r\n";
	char *snap, *snap2;

	hs_start(&H, NULL, NULL);
	snap = hs_snapshot(&H, "demo", "alice");
	assert_json_error(raw_exchange(two_lengths, sizeof(two_lengths) - 1), 400, "invalid_request");
	assert_json_error(raw_exchange(length_and_chunks, sizeof(length_and_chunks) - 1), 400,
			  "invalid_request");
	snap2 = hs_snapshot(&H, "demo", "alice");
	cr_assert_str_eq(snap, snap2, "an ambiguous body was read");
	free(snap);
	free(snap2);
}

Test(e2e, artifact_names_follow_the_spec)
{
	/* Refused: ".." anywhere (the store ABI promises plugins names
	 * without it), '/', a backslash, control characters, empty. */
	const char *const bad[] = { "..", "%2E%2E", "%2e.", "a..b", "..a", "a..", "...", "a%2Fb",
				    "a%5Cb", "a%01b", "a%7Fb", NULL };
	const char *const good[] = { ".", "%2E", ".hidden", "a.b", "v1.2.3", "a.", NULL };
	char path[512], *snap, *snap2;
	json_t *list;

	hs_start(&H, NULL, NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	snap = hs_snapshot(&H, "demo", "alice");
	for (size_t i = 0; bad[i]; i++) {
		snprintf(path, sizeof(path), S1 "/artifacts/%s", bad[i]);
		expect_error("PUT", path, "x", 400, "invalid_request");
	}
	expect_error("PUT", S1 "/artifacts/", "x", 404, "no_route");
	snap2 = hs_snapshot(&H, "demo", "alice");
	cr_assert_str_eq(snap, snap2, "a refused name was stored");
	free(snap);
	free(snap2);
	for (size_t i = 0; good[i]; i++) {
		hs_resp r;
		const char *const type[] = { "Content-Type: text/plain", NULL };
		snprintf(path, sizeof(path), S1 "/artifacts/%s", good[i]);
		hs_req(&H, "PUT", path, type, good[i], strlen(good[i]), &r);
		cr_assert_eq(r.status, 201, "PUT %s: %ld %s", good[i], r.status, r.body);
		hs_resp_clear(&r);
		hs_req(&H, "GET", path, NULL, NULL, 0, &r);
		cr_assert_eq(r.status, 200, "GET %s: %ld %s", good[i], r.status, r.body);
		cr_assert_eq(r.len, strlen(good[i]));
		cr_assert_eq(memcmp(r.body, good[i], r.len), 0, "GET %s", good[i]);
		hs_resp_clear(&r);
	}
	list = get(S1 "/artifacts");
	cr_assert(json_is_object(list) || json_is_array(list));
	json_decref(list);
}

/* ---- request ids and logs ------------------------------------------------------------------ */

Test(e2e, request_ids_and_one_log_line_per_request)
{
	const char *const mine[] = { "X-Request-Id: trace-42.a:b", NULL };
	const char *const bad[] = { "X-Request-Id: has space", NULL };
	hs_resp r;
	char *log, *line;
	int lines = 0, found = 0;

	hs_start(&H, NULL, NULL);
	hs_req(&H, "GET", "/healthz", mine, NULL, 0, &r);
	cr_assert_str_eq(hs_header(&r, "X-Request-Id"), "trace-42.a:b");
	hs_resp_clear(&r);
	hs_req(&H, "GET", "/healthz", bad, NULL, 0, &r);
	cr_assert_eq(strlen(hs_header(&r, "X-Request-Id")), 36, "a generated UUIDv7");
	hs_resp_clear(&r);
	expect_error("GET", U "/sessions/nope", NULL, 404, "not_found");
	hs_stop(&H);

	log = hs_log_text(&H);
	for (line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
		json_t *j = json_loads(line, 0, NULL);
		cr_assert(j, "every log line is JSON: %s", line);
		cr_assert(json_is_string(json_object_get(j, "ts")) && json_is_string(json_object_get(j, "level")));
		if (strcmp(json_string_value(json_object_get(j, "msg")), "request") == 0) {
			lines++;
			cr_assert(json_is_string(json_object_get(j, "request_id")));
			cr_assert(json_is_integer(json_object_get(j, "status")));
			if (strcmp(json_string_value(json_object_get(j, "request_id")), "trace-42.a:b") == 0)
				found++;
			if (json_integer_value(json_object_get(j, "status")) == 404)
				cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "code")), "not_found");
		}
		json_decref(j);
	}
	/* The harness's own /healthz probes are requests too. */
	cr_assert_geq(lines, 3);
	cr_assert_eq(found, 1);
	free(log);
}

Test(e2e, log_level_from_config)
{
	char *log;
	hs_start(&H, "  log_level: warn\n", NULL);
	json_decref(get("/healthz"));
	hs_stop(&H);
	log = hs_log_text(&H);
	cr_assert_null(strstr(log, "\"msg\":\"request\""), "info lines are not written at warn: %s", log);
	free(log);
}

/* ---- a store that says "retry" ---------------------------------------------------------- */

Test(e2e, busy_store_is_503_with_retry_after)
{
	sqlite3 *db;
	char path[PATH_MAX];
	hs_resp r;

	memset(&H, 0, sizeof(H));
	snprintf(H.store_extra, sizeof(H.store_extra), ", busy_timeout_ms: 50");
	hs_start(&H, NULL, NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	snprintf(path, sizeof(path), "%s/memd.db", H.dir);
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	cr_assert_eq(sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
	hs_json(&H, "POST", S1 "/events", "{\"events\":[{\"id\":\"x1\",\"role\":\"user\",\"content\":\"x\"}]}", &r);
	cr_assert_eq(r.status, 503, "%s", r.body);
	cr_assert_str_eq(hs_header(&r, "Retry-After"), "1");
	cr_assert(json_is_true(json_object_get(json_object_get(r.json, "error"), "retryable")));
	hs_resp_clear(&r);
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(db);
	/* The retry goes through, once. */
	json_decref(hs_expect(&H, "POST", S1 "/events", "{\"events\":[{\"id\":\"x1\",\"role\":\"user\",\"content\":\"x\"}]}", 200));
	cr_assert_eq(count_events(S1), 1);
}
