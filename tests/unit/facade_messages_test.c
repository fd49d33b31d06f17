/* SPDX-License-Identifier: MIT */
/*
 * The messages facade over the real sqlite plugin: OpenAI messages
 * appended (ids for idempotent retries) come back from memd_messages_get
 * equal, with a role filter; bad messages are refused naming the message
 * and field and write nothing; the context in OpenAI format never starts
 * with a tool result whose call the window left out.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/memd.h>

#include "plugins/store.h"
#include "service/service.h"
#include "test_util.h"

static tu_dir dir;
static memd *m;

/* App "w2": a window of 2 events; "w4": of 4; the others: everything. */
static void setup(void)
{
	char yaml[TU_PATH_MAX + 640];
	tu_dir_make(&dir);
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db}\n"
		 "apps:\n  '*': {working_memory: {strategy: all}}\n"
		 "  w2: {working_memory: {strategy: buffer_window, max_messages: 2}}\n"
		 "  w4: {working_memory: {strategy: buffer_window, max_messages: 4}}\n"
		 "  sb: {working_memory: {strategy: summary_buffer, max_tokens: 1000000}}\n",
		 dir.path);
	m = tu_open(&dir, yaml);
}

static void teardown(void)
{
	memd_close(m);
	tu_dir_remove(&dir);
}

TestSuite(facade_messages, .init = setup, .fini = teardown);

/* Every message shape a chat transcript has. */
static const char *const transcript =
	"[{\"role\":\"developer\",\"content\":\"Be brief.\"},"
	"{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"Tools: weather.\"}]},"
	"{\"role\":\"user\",\"name\":\"alice\",\"content\":[{\"type\":\"text\",\"text\":\"Weather?\"},"
	"{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://e.com/sky.png\",\"detail\":\"low\"}}]},"
	"{\"role\":\"assistant\",\"content\":null,\"tool_calls\":["
	"{\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"weather\","
	"\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}},"
	"{\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"weather\","
	"\"arguments\":\"{\\\"city\\\":\\\"Rome\\\"}\"}}]},"
	"{\"role\":\"tool\",\"tool_call_id\":\"call_a\",\"content\":\"18C\"},"
	"{\"role\":\"tool\",\"tool_call_id\":\"call_b\",\"content\":[{\"type\":\"text\",\"text\":\"21C\"}]},"
	"{\"role\":\"assistant\",\"content\":\"Paris 18C, Rome 21C.\",\"refusal\":null}]";

/* Create the session (unless it exists) and append messages to it. */
static void append(const char *app, const char *sid, const char *messages)
{
	memd_error err = { 0 };
	char body[8192], *out = NULL;
	int32_t r;

	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	r = memd_session_create(m, app, "u", body, &out, &err);
	cr_assert(r == 0 || r == MEMD_ECONFLICT, "%s", err.msg);
	memd_free(out);
	out = NULL;
	snprintf(body, sizeof(body), "{\"messages\":%s}", messages);
	tu_ok(memd_messages_append(m, app, "u", sid, body, &out, &err), &err, &out);
}

static json_t *messages_of(const char *app, const char *sid, const char *roles)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *o, *msgs;
	cr_assert_eq(memd_messages_get(m, app, "u", sid, roles, &out, &err), 0, "%s", err.msg);
	o = tu_json(out);
	cr_assert_str_eq(json_string_value(json_object_get(o, "format")), "openai");
	msgs = json_incref(json_object_get(o, "messages"));
	json_decref(o);
	return msgs;
}

static void assert_equal_json(json_t *got, const char *want_text)
{
	json_t *want = json_loads(want_text, 0, NULL);
	char *g = json_dumps(got, JSON_COMPACT);
	cr_assert(want);
	cr_assert(json_equal(got, want), "got  %s\nwant %s", g, want_text);
	free(g);
	json_decref(want);
}

Test(facade_messages, appended_messages_come_back_equal)
{
	json_t *msgs;
	append("app", "s1", transcript);
	msgs = messages_of("app", "s1", NULL);
	assert_equal_json(msgs, transcript);
	json_decref(msgs);
}

Test(facade_messages, message_ids_make_retries_idempotent)
{
	memd_error err = { 0 };
	const char *body = "{\"messages\":[{\"id\":\"m1\",\"role\":\"user\",\"content\":\"hi\"},"
			   "{\"id\":\"m2\",\"role\":\"assistant\",\"content\":\"hello\"}]}";
	char *out = NULL;
	json_t *o, *msgs;

	append("app", "s1", "[]");
	cr_assert_eq(memd_messages_append(m, "app", "u", "s1", body, &out, &err), 0, "%s", err.msg);
	o = tu_json(out);
	cr_assert(json_is_false(json_object_get(o, "replayed")));
	json_decref(o);
	cr_assert_eq(memd_messages_append(m, "app", "u", "s1", body, &out, &err), 0, "%s", err.msg);
	o = tu_json(out);
	cr_assert(json_is_true(json_object_get(o, "replayed")), "the retry writes nothing");
	json_decref(o);
	msgs = messages_of("app", "s1", NULL);
	assert_equal_json(msgs, "[{\"role\":\"user\",\"content\":\"hi\"},"
				"{\"role\":\"assistant\",\"content\":\"hello\"}]");
	json_decref(msgs);
}

Test(facade_messages, roles_filter)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *msgs;

	append("app", "s1", transcript);
	msgs = messages_of("app", "s1", "user,system");
	assert_equal_json(msgs,
			  "[{\"role\":\"developer\",\"content\":\"Be brief.\"},"
			  "{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"Tools: weather.\"}]},"
			  "{\"role\":\"user\",\"name\":\"alice\",\"content\":[{\"type\":\"text\","
			  "\"text\":\"Weather?\"},{\"type\":\"image_url\",\"image_url\":{\"url\":"
			  "\"https://e.com/sky.png\",\"detail\":\"low\"}}]}]");
	json_decref(msgs);
	msgs = messages_of("app", "s1", "tool");
	cr_assert_eq(json_array_size(msgs), 2);
	json_decref(msgs);
	cr_assert_eq(memd_messages_get(m, "app", "u", "s1", "user,bot", &out, &err), MEMD_EINVAL);
	cr_assert(strstr(err.msg, "roles: unknown role 'bot'"), "%s", err.msg);
	cr_assert_eq(memd_messages_get(m, "app", "u", "nope", NULL, &out, &err), MEMD_ENOTFOUND);
}

Test(facade_messages, bad_messages_are_refused_and_write_nothing)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *msgs;

	append("app", "s1", "[{\"role\":\"user\",\"content\":\"first\"}]");
	cr_assert_eq(memd_messages_append(m, "app", "u", "s1",
					  "{\"messages\":[{\"role\":\"user\",\"content\":\"ok\"},"
					  "{\"role\":\"tool\",\"content\":\"r\"}]}", &out, &err),
		     MEMD_EINVAL);
	cr_assert_str_eq(err.msg, "messages[1].tool_call_id: required");
	cr_assert_eq(memd_messages_append(m, "app", "u", "s1", "{\"messages\":{}}", &out, &err),
		     MEMD_EINVAL);
	cr_assert_str_eq(err.msg, "messages: must be an array");
	cr_assert_eq(memd_messages_append(m, "app", "u", "s1",
					  "{\"messages\":[],\"format\":\"anthropic\"}", &out, &err),
		     MEMD_EINVAL);
	cr_assert(strstr(err.msg, "format"), "%s", err.msg);
	cr_assert_eq(memd_messages_append(m, "app", "u", "s1",
					  "{\"messages\":[],\"events\":[]}", &out, &err),
		     MEMD_EINVAL);
	cr_assert(strstr(err.msg, "events"), "%s", err.msg);
	msgs = messages_of("app", "s1", NULL);
	assert_equal_json(msgs, "[{\"role\":\"user\",\"content\":\"first\"}]");
	json_decref(msgs);
}

Test(facade_messages, events_format_appends_memd_events)
{
	json_t *msgs;
	append("app", "s1", "[]");
	{
		memd_error err = { 0 };
		char *out = NULL;
		tu_ok(memd_messages_append(m, "app", "u", "s1",
					   "{\"format\":\"events\",\"messages\":[{\"role\":\"user\","
					   "\"content\":\"plain\"}]}", &out, &err), &err, &out);
	}
	msgs = messages_of("app", "s1", NULL);
	assert_equal_json(msgs, "[{\"role\":\"user\",\"content\":\"plain\"}]");
	json_decref(msgs);
}

static json_t *context_of(const char *app, const char *sid)
{
	memd_error err = { 0 };
	char *out = NULL;
	cr_assert_eq(memd_context_read(m, app, "u", sid, MEMD_READ_OPENAI, &out, &err), 0, "%s",
		     err.msg);
	return tu_json(out);
}

static int64_t native_tokens(const char *app, const char *sid)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *o;
	int64_t t;
	cr_assert_eq(memd_context_read(m, app, "u", sid, 0, &out, &err), 0, "%s", err.msg);
	o = tu_json(out);
	t = json_integer_value(json_object_get(o, "tokens"));
	json_decref(o);
	return t;
}

Test(facade_messages, context_window_never_starts_with_an_orphaned_result)
{
	json_t *c;

	/* w2's window: the second tool result and the answer. */
	append("w2", "s1", transcript);
	c = context_of("w2", "s1");
	cr_assert_str_eq(json_string_value(json_object_get(c, "strategy")), "buffer_window");
	assert_equal_json(json_object_get(c, "messages"),
			  "[{\"role\":\"assistant\",\"content\":\"Paris 18C, Rome 21C.\","
			  "\"refusal\":null}]");
	cr_assert_lt(json_integer_value(json_object_get(c, "tokens")), native_tokens("w2", "s1"),
		     "the dropped result's tokens are not counted");
	cr_assert_gt(json_integer_value(json_object_get(c, "tokens")), 0);
	json_decref(c);

	/* w4's window starts at the calls: the exchange is whole. */
	append("w4", "s1", transcript);
	c = context_of("w4", "s1");
	cr_assert_eq(json_array_size(json_object_get(c, "messages")), 4, "%s",
		     json_dumps(c, JSON_COMPACT));
	cr_assert_eq(json_integer_value(json_object_get(c, "tokens")), native_tokens("w4", "s1"));
	json_decref(c);

	/* The whole transcript as the context: equal to what went in. */
	append("app", "s1", transcript);
	c = context_of("app", "s1");
	assert_equal_json(json_object_get(c, "messages"), transcript);
	json_decref(c);
}

static json_t *put(const char *sid, const char *body, int32_t want)
{
	memd_error err = { 0 };
	char *out = NULL;
	cr_assert_eq(memd_messages_put(m, "app", "u", sid, body, &out, &err), want, "%s", err.msg);
	cr_assert(want != MEMD_EINVAL || strstr(err.msg, "messages") || strstr(err.msg, "version") ||
		  strstr(err.msg, "field"), "%s", err.msg);
	return want == 0 ? tu_json(out) : NULL;
}

Test(facade_messages, put_refuses_bad_messages_and_creates_nothing)
{
	memd_error err = { 0 };
	char *out = NULL;

	cr_assert_null(put("s2", "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[1]}]}",
			   MEMD_EINVAL));
	cr_assert_null(put("s2", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
			   "\"expected_version\":-1}", MEMD_EINVAL));
	cr_assert_null(put("s2", "{\"messages\":[],\"invocation_id\":\"i\"}", MEMD_EINVAL));
	cr_assert_null(put("s2", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"id\":\"x\"},"
			   "{\"role\":\"user\",\"content\":\"b\",\"id\":\"x\"}]}", MEMD_EINVAL));
	cr_assert_eq(memd_session_get(m, "app", "u", "s2", NULL, &out, &err), MEMD_ENOTFOUND);
}

Test(facade_messages, context_summary_is_a_system_message_and_its_window_drops_orphans)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = { .struct_size = sizeof(sc), .app = "sb", .user = "u", .session = "s1" };
	memd_event sum = { .struct_size = sizeof(sum), .id = "sum1", .role = "summary",
			   .author = "summary_buffer", .content_json = "{\"parts\":[{\"text\":"
			   "\"Alice asked for the weather.\"}]}", .text = "Alice asked for the weather.",
			   .tokens = 6, .covers_seq = 2, .timestamp_us = 1764064800000000LL };
	const memd_event *one[1] = { &sum };
	int64_t seq;
	memd_append a = { .struct_size = sizeof(a), .events = one, .n_events = 1, .now_us = 1 };
	memd_append_result res = { .struct_size = sizeof(res), .seqs = &seq };
	memd_error err = { 0 };
	json_t *c;

	/* The summary covers the call (seq 2), not its result (seq 3). */
	append("sb", "s1", "[{\"role\":\"user\",\"content\":\"Weather?\"},"
			   "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c1\",\"type\":"
			   "\"function\",\"function\":{\"name\":\"weather\",\"arguments\":\"{}\"}}]},"
			   "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"18C\"}]");
	cr_assert_eq(store_append(service_session_store(m), &call, &sc, &a, &res, &err), 0, "%s",
		     err.msg);
	append("sb", "s1", "[{\"role\":\"user\",\"content\":\"And tomorrow?\"}]");
	c = context_of("sb", "s1");
	cr_assert_str_eq(json_string_value(json_object_get(c, "strategy")), "summary_buffer");
	assert_equal_json(json_object_get(c, "messages"),
			  "[{\"role\":\"system\",\"content\":\"Summary of the conversation up to "
			  "2025-11-25T10:00:00.000000Z (events 1..2):\\nAlice asked for the weather.\"},"
			  "{\"role\":\"user\",\"content\":\"And tomorrow?\"}]");
	json_decref(c);
}

/* The rewrite over the memory store (every store runs the transcripts
 * conformance suite; this is the facade's part). */
static void setup_memory(void)
{
	tu_dir_make(&dir);
	m = tu_open(&dir, "stores:\n  main: {plugin: memory}\n"
			  "apps:\n  '*': {working_memory: {strategy: all}}\n");
}

TestSuite(facade_messages_put, .init = setup_memory, .fini = teardown);

Test(facade_messages_put, put_replaces_the_transcript_and_creates_the_session)
{
	memd_error err = { 0 };
	char body[8192], *out = NULL;
	json_t *o, *msgs;
	const char *op;
	char op_id[64];

	/* No session yet: put creates it. */
	snprintf(body, sizeof(body), "{\"messages\":%s}", transcript);
	o = put("s1", body, 0);
	cr_assert(json_is_true(json_object_get(o, "created")));
	cr_assert_eq(json_integer_value(json_object_get(o, "hidden_count")), 0);
	cr_assert_eq(json_array_size(json_object_get(o, "seqs")), 7);
	json_decref(o);
	msgs = messages_of("app", "s1", NULL);
	assert_equal_json(msgs, transcript);
	json_decref(msgs);

	/* Replace it: the old events are hidden by a rewrite. */
	o = put("s1", "{\"messages\":[{\"role\":\"user\",\"content\":\"fresh start\"}],"
		      "\"expected_version\":1}", 0);
	cr_assert(json_is_false(json_object_get(o, "created")));
	cr_assert_eq(json_integer_value(json_object_get(o, "hidden_count")), 7);
	op = json_string_value(json_object_get(json_object_get(o, "operation"), "id"));
	cr_assert(op);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(o, "operation"), "kind")),
			 "rewrite");
	snprintf(op_id, sizeof(op_id), "%s", op);
	json_decref(o);
	msgs = messages_of("app", "s1", NULL);
	assert_equal_json(msgs, "[{\"role\":\"user\",\"content\":\"fresh start\"}]");
	json_decref(msgs);
	o = context_of("app", "s1");
	assert_equal_json(json_object_get(o, "messages"),
			  "[{\"role\":\"user\",\"content\":\"fresh start\"}]");
	json_decref(o);

	/* A stale version changes nothing. */
	cr_assert_null(put("s1", "{\"messages\":[],\"expected_version\":1}", MEMD_ECONFLICT));
	/* Bad messages change nothing, and create nothing. */
	cr_assert_null(put("s1", "{\"messages\":[{\"role\":\"user\"}]}", MEMD_EINVAL));
	cr_assert_null(put("s2", "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[1]}]}",
			   MEMD_EINVAL));
	cr_assert_eq(memd_session_get(m, "app", "u", "s2", NULL, &out, &err), MEMD_ENOTFOUND);
	msgs = messages_of("app", "s1", NULL);
	assert_equal_json(msgs, "[{\"role\":\"user\",\"content\":\"fresh start\"}]");
	json_decref(msgs);

	/* Undoing the put brings the old transcript back. */
	tu_ok(memd_operation_undo(m, "app", "u", "s1", op_id, NULL, &out, &err), &err, &out);
	msgs = messages_of("app", "s1", NULL);
	assert_equal_json(msgs, transcript);
	json_decref(msgs);
}
