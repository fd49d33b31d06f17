/* SPDX-License-Identifier: MIT */
/*
 * One round trip per agent step, over the memory and the sqlite stores:
 * memd_events_append_context and memd_messages_append_context answer the
 * append's result and the context right after it (memd's form or the
 * OpenAI one), exact when another writer appends or a summary lands
 * between the commit and the read (a hook runs that writer there); a
 * replay answers the original append's view; a read that fails after a
 * durable append answers "context_error" and the append stays; bad input
 * writes nothing; memd_lane_open_context and _source_context answer the
 * opened session's context.
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

#define ST_YAML_MAX (TU_PATH_MAX + 512)

static tu_dir dir;
static memd *m;

/* App "w2": a window of 2 events; "sb": summary_buffer; the others: all. */
static void open_store(const char *kind)
{
	char yaml[ST_YAML_MAX];
	tu_dir_make(&dir);
	if (strcmp(kind, "sqlite") == 0)
		snprintf(yaml, sizeof(yaml), "stores:\n  main: {plugin: sqlite, path: %s/memd.db}\n",
			 dir.path);
	else
		snprintf(yaml, sizeof(yaml), "stores:\n  main: {plugin: memory}\n");
	strncat(yaml,
		"apps:\n  '*': {working_memory: {strategy: all}}\n"
		"  w2: {working_memory: {strategy: buffer_window, max_messages: 2}}\n"
		"  sb: {working_memory: {strategy: summary_buffer, max_tokens: 1000000}}\n",
		sizeof(yaml) - strlen(yaml) - 1);
	m = tu_open(&dir, yaml);
}

static void teardown(void)
{
	memd_close(m);
	m = NULL;
	tu_dir_remove(&dir);
}

static void session(const char *app, const char *sid)
{
	memd_error err = { 0 };
	char body[256], *out = NULL;
	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	tu_ok(memd_session_create(m, app, "u", body, &out, &err), &err, &out);
}

/* Append one user event with id and text to (app, u, sid). */
static void append_one(const char *app, const char *sid, const char *id, const char *text)
{
	memd_error err = { 0 };
	char body[512], *out = NULL;
	snprintf(body, sizeof(body),
		 "{\"events\":[{\"id\":\"%s\",\"role\":\"user\",\"content\":\"%s\"}]}", id, text);
	tu_ok(memd_events_append(m, app, "u", sid, body, &out, &err), &err, &out);
}

/* The texts of a context's events, joined by ',' (a static buffer). */
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

static json_t *context_now(const char *app, const char *sid)
{
	memd_error err = { 0 };
	char *out = NULL;
	cr_assert_eq(memd_context(m, app, "u", sid, &out, &err), 0, "%s", err.msg);
	return tu_json(out);
}

/* ---- the answer ------------------------------------------------------------ */

static void answers_append_and_context(void)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *o, *ctx, *e;

	session("w2", "s1");
	append_one("w2", "s1", "e1", "one");
	cr_assert_eq(memd_events_append_context(
			     m, "w2", "u", "s1",
			     "{\"events\":[{\"id\":\"e2\",\"role\":\"user\",\"content\":\"two\"},"
			     "{\"id\":\"e3\",\"role\":\"assistant\",\"content\":\"three\"}]}",
			     0, NULL, &out, &err),
		     0, "%s", err.msg);
	o = tu_json(out);
	cr_assert_eq(json_integer_value(json_object_get(o, "version")), 2);
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(o, "seqs"), 0)), 2);
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(o, "seqs"), 1)), 3);
	cr_assert(json_is_false(json_object_get(o, "replayed")));
	cr_assert_null(json_object_get(o, "context_error"));
	ctx = json_object_get(o, "context");
	cr_assert_str_eq(json_string_value(json_object_get(ctx, "strategy")), "buffer_window");
	cr_assert_str_eq(texts(ctx), "two,three");
	/* include_text's default here is memd_context's: the text is there. */
	e = json_array_get(json_object_get(ctx, "events"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(e, "text")), "two");
	json_decref(o);

	/* Flags as memd_context_read's: without the text, and OpenAI. */
	cr_assert_eq(memd_events_append_context(
			     m, "w2", "u", "s1",
			     "{\"events\":[{\"id\":\"e4\",\"role\":\"user\",\"content\":\"four\"}]}",
			     MEMD_READ_NO_TEXT, NULL, &out, &err),
		     0, "%s", err.msg);
	o = tu_json(out);
	e = json_array_get(json_object_get(json_object_get(o, "context"), "events"), 1);
	cr_assert_null(json_object_get(e, "text"));
	cr_assert_str_eq(texts(json_object_get(o, "context")), "three,four");
	json_decref(o);
	cr_assert_eq(memd_messages_append_context(
			     m, "w2", "u", "s1",
			     "{\"messages\":[{\"role\":\"assistant\",\"content\":\"five\"}]}",
			     MEMD_READ_OPENAI, NULL, &out, &err),
		     0, "%s", err.msg);
	o = tu_json(out);
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(o, "seqs"), 0)), 5);
	ctx = json_object_get(o, "context");
	cr_assert_str_eq(json_string_value(json_object_get(ctx, "format")), "openai");
	e = json_object_get(ctx, "messages");
	cr_assert_eq(json_array_size(e), 2);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(e, 0), "content")), "four");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(e, 1), "role")),
			 "assistant");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(e, 1), "content")), "five");
	json_decref(o);
}

Test(step_memory, answers_append_and_context, .fini = teardown)
{
	open_store("memory");
	answers_append_and_context();
}

Test(step_sqlite, answers_append_and_context, .fini = teardown)
{
	open_store("sqlite");
	answers_append_and_context();
}

/* ---- another writer between the commit and the read ---------------------------- */

typedef struct between {
	const char *app, *sid;
	int runs;
	int summary;       /* append a summary covering everything instead */
	int delete;        /* delete the session instead */
} between;

static void writer(void *userdata)
{
	between *b = userdata;
	memd_error err = { 0 };
	char id[32], text[32];

	b->runs++;
	if (b->delete) {
		cr_assert_eq(memd_session_delete(m, b->app, "u", b->sid, &err), 0, "%s", err.msg);
		return;
	}
	if (b->summary) {
		memd_call call = { .struct_size = sizeof(call) };
		memd_scope sc = { .struct_size = sizeof(sc), .app = b->app, .user = "u",
				  .session = b->sid };
		memd_event sum = { .struct_size = sizeof(sum), .id = "sum", .role = "summary",
				   .author = "summary_buffer",
				   .content_json = "{\"parts\":[{\"text\":\"SUMMARY\"}]}",
				   .text = "SUMMARY", .tokens = 1, .covers_seq = 2,
				   .timestamp_us = 1764064800000000LL };
		const memd_event *one[1] = { &sum };
		int64_t seq;
		memd_append a = { .struct_size = sizeof(a), .events = one, .n_events = 1, .now_us = 1 };
		memd_append_result res = { .struct_size = sizeof(res), .seqs = &seq };
		cr_assert_eq(store_append(service_session_store(m), &call, &sc, &a, &res, &err), 0,
			     "%s", err.msg);
		return;
	}
	snprintf(id, sizeof(id), "other%d", b->runs);
	snprintf(text, sizeof(text), "other%d", b->runs);
	append_one(b->app, b->sid, id, text);
}

static void exact_with_another_writer(void)
{
	between b = { .app = "w2", .sid = "s1" };
	memd_error err = { 0 };
	char *out = NULL;
	json_t *o;

	session("w2", "s1");
	append_one("w2", "s1", "e1", "one");
	service_set_between_hook(m, writer, &b);
	cr_assert_eq(memd_events_append_context(
			     m, "w2", "u", "s1",
			     "{\"events\":[{\"id\":\"e2\",\"role\":\"user\",\"content\":\"two\"}]}", 0,
			     NULL, &out, &err),
		     0, "%s", err.msg);
	cr_assert_eq(b.runs, 1);
	o = tu_json(out);
	/* The window of 2 right after the append, not [two, other1]. */
	cr_assert_str_eq(texts(json_object_get(o, "context")), "one,two");
	json_decref(o);
	/* The same in the OpenAI form, through the messages route. */
	cr_assert_eq(memd_messages_append_context(
			     m, "w2", "u", "s1",
			     "{\"messages\":[{\"role\":\"assistant\",\"content\":\"three\"}]}",
			     MEMD_READ_OPENAI, NULL, &out, &err),
		     0, "%s", err.msg);
	cr_assert_eq(b.runs, 2);
	o = tu_json(out);
	{
		json_t *msgs = json_object_get(json_object_get(o, "context"), "messages");
		cr_assert_eq(json_array_size(msgs), 2);
		cr_assert_str_eq(json_string_value(json_object_get(json_array_get(msgs, 0), "content")),
				 "other1");
		cr_assert_str_eq(json_string_value(json_object_get(json_array_get(msgs, 1), "content")),
				 "three");
	}
	json_decref(o);
	service_set_between_hook(m, NULL, NULL);
	/* The other writer's appends are there for the next read. */
	o = context_now("w2", "s1");
	cr_assert_str_eq(texts(o), "three,other2");
	json_decref(o);
}

Test(step_memory, exact_with_another_writer, .fini = teardown)
{
	open_store("memory");
	exact_with_another_writer();
}

Test(step_sqlite, exact_with_another_writer, .fini = teardown)
{
	open_store("sqlite");
	exact_with_another_writer();
}

/* A summary appended after the view (a background fold) is not in it. */
static void summary_after_the_view(void)
{
	between b = { .app = "sb", .sid = "s1", .summary = 1 };
	memd_error err = { 0 };
	char *out = NULL;
	json_t *o, *ctx;

	session("sb", "s1");
	append_one("sb", "s1", "e1", "one");
	service_set_between_hook(m, writer, &b);
	cr_assert_eq(memd_events_append_context(
			     m, "sb", "u", "s1",
			     "{\"events\":[{\"id\":\"e2\",\"role\":\"user\",\"content\":\"two\"}]}", 0,
			     NULL, &out, &err),
		     0, "%s", err.msg);
	service_set_between_hook(m, NULL, NULL);
	o = tu_json(out);
	ctx = json_object_get(o, "context");
	cr_assert(json_is_null(json_object_get(ctx, "summary")));
	cr_assert_str_eq(texts(ctx), "one,two");
	json_decref(o);
	/* Now the summary folds both. */
	o = context_now("sb", "s1");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(o, "summary"), "text")),
			 "SUMMARY");
	cr_assert_str_eq(texts(o), "");
	json_decref(o);
}

Test(step_memory, summary_after_the_view, .fini = teardown)
{
	open_store("memory");
	summary_after_the_view();
}

Test(step_sqlite, summary_after_the_view, .fini = teardown)
{
	open_store("sqlite");
	summary_after_the_view();
}

/* ---- replays and failures ---------------------------------------------------------- */

static void replay_answers_the_original_view(void)
{
	const char *body = "{\"events\":[{\"id\":\"e2\",\"role\":\"user\",\"content\":\"two\"}]}";
	memd_error err = { 0 };
	char *out = NULL;
	json_t *o;

	session("w2", "s1");
	append_one("w2", "s1", "e1", "one");
	cr_assert_eq(memd_events_append_context(m, "w2", "u", "s1", body, 0, NULL, &out, &err), 0,
		     "%s", err.msg);
	memd_free(out);
	append_one("w2", "s1", "e3", "three");
	/* The answer was lost; the client sends the append again. */
	cr_assert_eq(memd_events_append_context(m, "w2", "u", "s1", body, 0, NULL, &out, &err), 0,
		     "%s", err.msg);
	o = tu_json(out);
	cr_assert(json_is_true(json_object_get(o, "replayed")));
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(o, "seqs"), 0)), 2);
	cr_assert_str_eq(texts(json_object_get(o, "context")), "one,two");
	json_decref(o);
}

Test(step_memory, replay_answers_the_original_view, .fini = teardown)
{
	open_store("memory");
	replay_answers_the_original_view();
}

Test(step_sqlite, replay_answers_the_original_view, .fini = teardown)
{
	open_store("sqlite");
	replay_answers_the_original_view();
}

static void read_failure_after_a_durable_append(void)
{
	between b = { .app = "w2", .sid = "s1", .delete = 1 };
	memd_error err = { 0 };
	char *out = NULL;
	json_t *o, *e;

	session("w2", "s1");
	service_set_between_hook(m, writer, &b);
	cr_assert_eq(memd_events_append_context(
			     m, "w2", "u", "s1",
			     "{\"events\":[{\"id\":\"e1\",\"role\":\"user\",\"content\":\"one\"}]}", 0,
			     NULL, &out, &err),
		     0, "%s", err.msg);
	service_set_between_hook(m, NULL, NULL);
	o = tu_json(out);
	cr_assert_eq(json_integer_value(json_object_get(o, "version")), 1);
	cr_assert_null(json_object_get(o, "context"));
	e = json_object_get(o, "context_error");
	cr_assert_str_eq(json_string_value(json_object_get(e, "code")), "not_found");
	cr_assert(json_string_length(json_object_get(e, "message")) > 0);
	cr_assert(json_is_false(json_object_get(e, "retryable")));
	cr_assert_eq(json_object_size(e), 3);
	json_decref(o);
}

Test(step_memory, read_failure_after_a_durable_append, .fini = teardown)
{
	open_store("memory");
	read_failure_after_a_durable_append();
}

Test(step_sqlite, read_failure_after_a_durable_append, .fini = teardown)
{
	open_store("sqlite");
	read_failure_after_a_durable_append();
}

/* A failing append fails the call as it fails memd_events_append, and a
 * bad recall query is refused before anything is written. */
static void failed_append_fails(void)
{
	between b = { .app = "w2", .sid = "s1" };
	memd_error err = { 0 };
	char *out = NULL, query[9000];
	json_t *o;

	session("w2", "s1");
	service_set_between_hook(m, writer, &b);
	cr_assert_eq(memd_events_append_context(m, "w2", "u", "nope",
						"{\"events\":[{\"role\":\"user\",\"content\":\"x\"}]}",
						0, NULL, &out, &err),
		     MEMD_ENOTFOUND);
	cr_assert_eq(memd_events_append_context(m, "w2", "u", "s1", "{\"events\":3}", 0, NULL, &out,
						&err),
		     MEMD_EINVAL);
	cr_assert_eq(memd_messages_append_context(m, "w2", "u", "s1",
						  "{\"expected_version\":7,\"messages\":[{\"role\":"
						  "\"user\",\"content\":\"x\"}]}",
						  0, NULL, &out, &err),
		     MEMD_ECONFLICT);
	memset(query, 'q', sizeof(query) - 1);
	query[sizeof(query) - 1] = 0;
	cr_assert_eq(memd_events_append_context(m, "w2", "u", "s1",
						"{\"events\":[{\"role\":\"user\",\"content\":\"x\"}]}",
						0, query, &out, &err),
		     MEMD_EINVAL);
	cr_assert_null(out);
	cr_assert_eq(b.runs, 0);
	service_set_between_hook(m, NULL, NULL);
	o = context_now("w2", "s1");
	cr_assert_str_eq(texts(o), "");
	json_decref(o);
}

Test(step_memory, failed_append_fails, .fini = teardown)
{
	open_store("memory");
	failed_append_fails();
}

Test(step_sqlite, failed_append_fails, .fini = teardown)
{
	open_store("sqlite");
	failed_append_fails();
}

/* ---- lanes --------------------------------------------------------------------------- */

static void lane_open_answers_context(void)
{
	between b = { .app = "w2" };
	memd_error err = { 0 };
	char *out = NULL;
	json_t *o;
	const char *sid;
	char sidbuf[256];

	cr_assert_eq(memd_lane_open_context(m, "w2", "u", "k1", NULL, 0, NULL, &out, &err), 0, "%s",
		     err.msg);
	o = tu_json(out);
	cr_assert(json_is_true(json_object_get(o, "created")));
	sid = json_string_value(json_object_get(json_object_get(o, "session"), "id"));
	cr_assert_not_null(sid);
	snprintf(sidbuf, sizeof(sidbuf), "%s", sid);
	cr_assert_str_eq(texts(json_object_get(o, "context")), "");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(o, "context"), "strategy")),
			 "buffer_window");
	json_decref(o);
	append_one("w2", sidbuf, "e1", "one");
	append_one("w2", sidbuf, "e2", "two");
	b.sid = sidbuf;
	service_set_between_hook(m, writer, &b);
	cr_assert_eq(memd_lane_open_context(m, "w2", "u", "k1", NULL, MEMD_READ_OPENAI, NULL, &out,
					    &err),
		     0, "%s", err.msg);
	cr_assert_eq(b.runs, 1);
	o = tu_json(out);
	cr_assert(json_is_false(json_object_get(o, "created")));
	{
		json_t *msgs = json_object_get(json_object_get(o, "context"), "messages");
		cr_assert_eq(json_array_size(msgs), 2);
		cr_assert_str_eq(json_string_value(json_object_get(json_array_get(msgs, 1), "content")),
				 "two");
	}
	json_decref(o);
	service_set_between_hook(m, NULL, NULL);
	/* By source: the lane's user and key come from the source. */
	cr_assert_eq(memd_lane_open_source_context(
			     m, "w2", "{\"platform\":\"telegram\",\"chat_id\":\"c9\",\"user_id\":\"u9\"}",
			     0, NULL, &out, &err),
		     0, "%s", err.msg);
	o = tu_json(out);
	cr_assert_not_null(json_object_get(o, "key"));
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(o, "context"), "strategy")),
			 "buffer_window");
	cr_assert_str_eq(texts(json_object_get(o, "context")), "");
	json_decref(o);
}

Test(step_memory, lane_open_answers_context, .fini = teardown)
{
	open_store("memory");
	lane_open_answers_context();
}

Test(step_sqlite, lane_open_answers_context, .fini = teardown)
{
	open_store("sqlite");
	lane_open_answers_context();
}
