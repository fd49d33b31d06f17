/* SPDX-License-Identifier: MIT */
/*
 * One round trip per agent step over real HTTP: POST .../events and
 * .../messages with ?return=context answer the append's result and the
 * context right after it (memd's form, format=openai, include_text); a
 * replay answers the original append's view; a context read that fails
 * after the durable append is a 200 with context_error (the events
 * stored); an append that fails answers as without return=context, and
 * bad return/format/query parameters are 400s that write nothing;
 * POST .../lanes/{key}:open and .../lanes:open with ?return=context answer
 * the opened session's context. Every response is checked against
 * api/openapi.yaml by the harness. (That another writer appending between
 * the commit and the read changes nothing is pinned down in the facade's
 * tests/unit/facade_step_test.c, which can run that writer there.)
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define USER "/v1/apps/w2/users/ann"
#define SESS USER "/sessions/chat"
/* An event text of this many bytes: two of them pass the smallest
 * server.max_response_bytes (64 KiB) in one context, one does not. */
#define BIG_TEXT 40000

static hs H;

static void setup(void)
{
	memset(&H, 0, sizeof(H));
}

static void teardown(void)
{
	hs_finish(&H);
}

TestSuite(step, .init = setup, .fini = teardown, .timeout = 60);

/* Apps: "w2" a window of 2 events; the others everything. */
static void start(const char *server_yaml)
{
	hs_start(&H, server_yaml,
		 "apps:\n  '*': {working_memory: {strategy: all}}\n"
		 "  w2: {working_memory: {strategy: buffer_window, max_messages: 2}}\n");
}

/* The texts of a memd context's events, joined by ','. */
static const char *texts(const json_t *ctx)
{
	static char buf[1024];
	json_t *e;
	size_t i;
	buf[0] = 0;
	json_array_foreach(json_object_get(ctx, "events"), i, e) {
		json_t *parts = json_object_get(json_object_get(e, "content"), "parts");
		const char *t = json_string_value(json_object_get(json_array_get(parts, 0), "text"));
		if (i)
			strncat(buf, ",", sizeof(buf) - strlen(buf) - 1);
		strncat(buf, t ? t : "?", sizeof(buf) - strlen(buf) - 1);
	}
	return buf;
}

Test(step, append_answers_context)
{
	json_t *o, *ctx, *msgs;

	start(NULL);
	json_decref(hs_expect(&H, "POST", USER "/sessions", "{\"id\":\"chat\"}", 201));
	json_decref(hs_expect(&H, "POST", SESS "/events",
			      "{\"events\":[{\"id\":\"e1\",\"role\":\"user\",\"content\":\"one\"}]}",
			      200));
	o = hs_expect(&H, "POST", SESS "/events?return=context",
		      "{\"events\":[{\"id\":\"e2\",\"role\":\"assistant\",\"content\":\"two\"},"
		      "{\"id\":\"e3\",\"role\":\"user\",\"content\":\"three\"}]}",
		      200);
	cr_assert_eq(json_integer_value(json_object_get(o, "version")), 2);
	cr_assert_eq(json_array_size(json_object_get(o, "seqs")), 2);
	cr_assert(json_is_false(json_object_get(o, "replayed")));
	ctx = json_object_get(o, "context");
	cr_assert_str_eq(json_string_value(json_object_get(ctx, "strategy")), "buffer_window");
	cr_assert_str_eq(texts(ctx), "two,three");
	/* As GET context: no text unless asked. */
	cr_assert_null(json_object_get(json_array_get(json_object_get(ctx, "events"), 0), "text"));
	json_decref(o);

	o = hs_expect(&H, "POST", SESS "/events?return=context&include_text=true",
		      "{\"events\":[{\"id\":\"e4\",\"role\":\"assistant\",\"content\":\"four\"}]}",
		      200);
	ctx = json_object_get(o, "context");
	cr_assert_str_eq(texts(ctx), "three,four");
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(json_object_get(ctx, "events"), 1), "text")),
			 "four");
	json_decref(o);

	/* Messages, in the OpenAI form. */
	o = hs_expect(&H, "POST", SESS "/messages?return=context&format=openai",
		      "{\"messages\":[{\"role\":\"user\",\"content\":\"five\"}]}", 200);
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(o, "seqs"), 0)), 5);
	ctx = json_object_get(o, "context");
	cr_assert_str_eq(json_string_value(json_object_get(ctx, "format")), "openai");
	msgs = json_object_get(ctx, "messages");
	cr_assert_eq(json_array_size(msgs), 2);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(msgs, 0), "content")), "four");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(msgs, 1), "content")), "five");
	json_decref(o);

	/* Without return=context the answer is the append's alone. */
	o = hs_expect(&H, "POST", SESS "/messages",
		      "{\"messages\":[{\"role\":\"assistant\",\"content\":\"six\"}]}", 200);
	cr_assert_null(json_object_get(o, "context"));
	cr_assert_eq(json_object_size(o), 3);
	json_decref(o);
}

Test(step, replay_answers_the_original_view)
{
	const char *body = "{\"events\":[{\"id\":\"e2\",\"role\":\"user\",\"content\":\"two\"}]}";
	json_t *o;

	start(NULL);
	json_decref(hs_expect(&H, "POST", USER "/sessions", "{\"id\":\"chat\"}", 201));
	json_decref(hs_expect(&H, "POST", SESS "/events",
			      "{\"events\":[{\"id\":\"e1\",\"role\":\"user\",\"content\":\"one\"}]}",
			      200));
	json_decref(hs_expect(&H, "POST", SESS "/events?return=context", body, 200));
	json_decref(hs_expect(&H, "POST", SESS "/events",
			      "{\"events\":[{\"id\":\"e3\",\"role\":\"user\",\"content\":\"three\"}]}",
			      200));
	o = hs_expect(&H, "POST", SESS "/events?return=context", body, 200);
	cr_assert(json_is_true(json_object_get(o, "replayed")));
	cr_assert_str_eq(texts(json_object_get(o, "context")), "one,two");
	json_decref(o);
}

/* A body of one user event with id and BIG_TEXT bytes of text. */
static char *big_event(const char *id)
{
	char *text = malloc(BIG_TEXT + 1), *body = malloc(BIG_TEXT + 128);
	cr_assert(text && body);
	memset(text, 'x', BIG_TEXT);
	text[BIG_TEXT] = 0;
	snprintf(body, BIG_TEXT + 128,
		 "{\"events\":[{\"id\":\"%s\",\"role\":\"user\",\"content\":\"%s\"}]}", id, text);
	free(text);
	return body;
}

Test(step, read_failure_after_the_append_is_context_error)
{
	char *b1 = big_event("b1"), *b2 = big_event("b2");
	json_t *o, *e, *page;

	start("  max_response_bytes: 65536\n");
	json_decref(hs_expect(&H, "POST", "/v1/apps/all/users/ann/sessions", "{\"id\":\"big\"}", 201));
	o = hs_expect(&H, "POST", "/v1/apps/all/users/ann/sessions/big/events?return=context", b1,
		      200);
	cr_assert_not_null(json_object_get(o, "context"));
	json_decref(o);
	/* Two such events are more than the context may answer: the append is
	 * durable, its answer says so, and why the context is missing. */
	o = hs_expect(&H, "POST", "/v1/apps/all/users/ann/sessions/big/events?return=context", b2,
		      200);
	cr_assert_eq(json_integer_value(json_object_get(o, "version")), 2);
	cr_assert_null(json_object_get(o, "context"));
	e = json_object_get(o, "context_error");
	cr_assert_str_eq(json_string_value(json_object_get(e, "code")), "too_large");
	cr_assert_not_null(strstr(json_string_value(json_object_get(e, "message")), "max_response_bytes"),
			   "%s", json_string_value(json_object_get(e, "message")));
	cr_assert(json_is_false(json_object_get(e, "retryable")));
	json_decref(o);
	page = hs_expect(&H, "GET", "/v1/apps/all/users/ann/sessions/big/events?limit=1&after_seq=1",
			 NULL, 200);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(
				 json_object_get(page, "events"), 0), "id")),
			 "b2");
	json_decref(page);
	free(b1);
	free(b2);
}

Test(step, failures_write_nothing)
{
	const char *ev = "{\"events\":[{\"role\":\"user\",\"content\":\"x\"}]}";
	char *before, *after;

	start(NULL);
	json_decref(hs_expect(&H, "POST", USER "/sessions", "{\"id\":\"chat\"}", 201));
	before = hs_snapshot(&H, "w2", "ann");
	hs_expect_error(&H, "POST", SESS "/events?return=events", ev, 400, "invalid_request",
			"return");
	hs_expect_error(&H, "POST", SESS "/events?format=openai", ev, 400, "invalid_request",
			"only with return=context");
	hs_expect_error(&H, "POST", SESS "/messages?include_text=true",
			"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 400,
			"invalid_request", "only with return=context");
	hs_expect_error(&H, "POST", SESS "/events?return=context&format=xml", ev, 400,
			"invalid_request", "format");
	/* An append that fails answers as it does without return=context. */
	hs_expect_error(&H, "POST", USER "/sessions/nope/events?return=context", ev, 404,
			"not_found", NULL);
	hs_expect_error(&H, "POST", SESS "/messages?return=context",
			"{\"expected_version\":9,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
			409, "conflict", NULL);
	after = hs_snapshot(&H, "w2", "ann");
	cr_assert_str_eq(before, after);
	free(before);
	free(after);
}

Test(step, lane_open_answers_context)
{
	json_t *o, *ctx;
	char path[512];
	const char *sid;

	start(NULL);
	o = hs_expect(&H, "POST", USER "/lanes/dm:1:open?return=context", NULL, 200);
	cr_assert(json_is_true(json_object_get(o, "created")));
	ctx = json_object_get(o, "context");
	cr_assert_str_eq(json_string_value(json_object_get(ctx, "strategy")), "buffer_window");
	cr_assert_eq(json_array_size(json_object_get(ctx, "events")), 0);
	sid = json_string_value(json_object_get(json_object_get(o, "session"), "id"));
	snprintf(path, sizeof(path), USER "/sessions/%s/messages", sid);
	json_decref(hs_expect(&H, "POST", path,
			      "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
			      "{\"role\":\"assistant\",\"content\":\"hello\"}]}",
			      200));
	json_decref(o);
	o = hs_expect(&H, "POST", USER "/lanes/dm:1:open?return=context&format=openai", NULL, 200);
	cr_assert(json_is_false(json_object_get(o, "created")));
	ctx = json_object_get(o, "context");
	cr_assert_eq(json_array_size(json_object_get(ctx, "messages")), 2);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(json_object_get(ctx, "messages"), 1), "content")),
			 "hello");
	json_decref(o);
	/* Without it, the open's answer alone. */
	o = hs_expect(&H, "POST", USER "/lanes/dm:1:open", NULL, 200);
	cr_assert_null(json_object_get(o, "context"));
	json_decref(o);
	/* By source. */
	o = hs_expect(&H, "POST", "/v1/apps/w2/lanes:open?return=context",
		      "{\"platform\":\"telegram\",\"chat_id\":\"7\",\"user_id\":\"7\"}", 200);
	cr_assert_not_null(json_object_get(o, "key"));
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(o, "context"), "strategy")),
			 "buffer_window");
	json_decref(o);
	hs_expect_error(&H, "POST", "/v1/apps/w2/lanes:open?return=lane",
			"{\"platform\":\"telegram\",\"chat_id\":\"7\",\"user_id\":\"7\"}", 400,
			"invalid_request", "return");
}
