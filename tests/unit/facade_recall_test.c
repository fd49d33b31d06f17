/* SPDX-License-Identifier: MIT */
/*
 * Recall into the context (apps.<name>.working_memory.recall) over the
 * real sqlite plugin and the keyword index: the "memories" section holds
 * the most relevant past events and memories for the window's latest user
 * message (or the caller's query), never an event of the window, within
 * the budget (recall.max_tokens, and what a token_window's max_tokens
 * leaves after the window), above min_score, from the sources asked for;
 * with format openai the items are one system message, first; an app
 * without recall has no section; the strategy never sees the key (a
 * buffer_window, whose schema has no "recall", opens with it).
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

#define RT_YAML_MAX (TU_PATH_MAX + 2048)

static tu_dir dir;
static memd *m;

/* "r": a window of 2 and recall; "plain": the same window, no recall;
 * "mem"/"ev": memories only / events only; "min": a min_score no BM25
 * score reaches; "tight": recall.max_tokens of 12; "tw": a token_window
 * whose max_tokens leaves recall little room. */
static void setup(void)
{
	char yaml[RT_YAML_MAX];
	tu_dir_make(&dir);
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db}\n"
		 "index: {keyword: {enabled: true, snapshot: false}}\n"
		 "apps:\n"
		 "  '*': {working_memory: {strategy: all}}\n"
		 "  r:\n"
		 "    working_memory:\n"
		 "      strategy: buffer_window\n"
		 "      max_messages: 2\n"
		 "      recall: {k: 3}\n"
		 "  plain: {working_memory: {strategy: buffer_window, max_messages: 2}}\n"
		 "  mem: {working_memory: {strategy: buffer_window, max_messages: 2,"
		 " recall: {sources: [memories]}}}\n"
		 "  ev: {working_memory: {strategy: buffer_window, max_messages: 2,"
		 " recall: {sources: [events], k: 10}}}\n"
		 "  min: {working_memory: {strategy: buffer_window, max_messages: 2,"
		 " recall: {min_score: 1000}}}\n"
		 "  tight: {working_memory: {strategy: buffer_window, max_messages: 2,"
		 " recall: {k: 10, max_tokens: 12}}}\n"
		 "  tw: {working_memory: {strategy: token_window, max_tokens: 40,"
		 " recall: {k: 10, max_tokens: 1000}}}\n"
		 "  sb: {working_memory: {strategy: summary_buffer, max_tokens: 100000,"
		 " recall: {k: 3}}}\n",
		 dir.path);
	m = tu_open(&dir, yaml);
}

static void teardown(void)
{
	memd_close(m);
	tu_dir_remove(&dir);
}

TestSuite(recall, .init = setup, .fini = teardown);

/* Append one event (role, id, text) to (app, "u", sid), creating it. */
static void put(const char *app, const char *sid, const char *role, const char *id,
		const char *text)
{
	memd_error err = { 0 };
	char *out = NULL, *body;
	json_t *b;
	int32_t r;

	b = json_pack("{s:s}", "id", sid);
	body = json_dumps(b, JSON_COMPACT);
	json_decref(b);
	r = memd_session_create(m, app, "u", body, &out, &err);
	free(body);
	cr_assert(r == 0 || r == MEMD_ECONFLICT, "%s", err.msg);
	memd_free(out);
	out = NULL;
	b = json_pack("{s:[{s:s,s:s,s:s}]}", "events", "id", id, "role", role, "content", text);
	body = json_dumps(b, JSON_COMPACT);
	json_decref(b);
	tu_ok(memd_events_append(m, app, "u", sid, body, &out, &err), &err, &out);
	free(body);
}

/* The past: session "old" of app with facts, and the current session
 * "now" whose window (2 events) is its last two. */
static void history(const char *app)
{
	put(app, "old", "user", "o1", "My dog Biscuit loves running on the beach at dawn.");
	put(app, "old", "assistant", "o2", "Noted, what a happy dog.");
	put(app, "old", "user", "o3", "The car needs new winter tyres before December.");
	put(app, "old", "user", "o4", "I am allergic to peanuts and sesame.");
	put(app, "now", "user", "n1", "Biscuit chewed my slippers this morning.");
	put(app, "now", "assistant", "n2", "Oh no! Puppies chew when they are bored.");
	put(app, "now", "user", "n3", "Where does Biscuit like to run?");
}

static json_t *context(const char *app, const char *sid, uint32_t flags, const char *query)
{
	memd_error err = { 0 };
	char *out = NULL;
	int32_t r = memd_context_recall(m, app, "u", sid, flags, query, &out, &err);
	cr_assert_eq(r, 0, "context: %s", err.msg);
	return tu_json(out);
}

static json_t *items_of(json_t *ctx)
{
	json_t *items = json_object_get(json_object_get(ctx, "memories"), "items");
	cr_assert(json_is_array(items), "no memories.items in %s", json_dumps(ctx, 0));
	return items;
}

static const char *event_id_at(json_t *items, size_t i)
{
	return json_string_value(json_object_get(json_array_get(items, i), "event_id"));
}

static int has_event(json_t *items, const char *id)
{
	for (size_t i = 0; i < json_array_size(items); i++)
		if (event_id_at(items, i) && strcmp(event_id_at(items, i), id) == 0)
			return 1;
	return 0;
}

Test(recall, the_latest_user_message_recalls_the_best_past_events_but_none_of_the_window)
{
	json_t *c, *items;

	history("r");
	c = context("r", "now", 0, NULL);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(c, "memories"), "query")),
			 "Where does Biscuit like to run?");
	items = items_of(c);
	cr_assert_eq(json_array_size(json_object_get(c, "events")), 2);
	cr_assert_geq(json_array_size(items), 1);
	cr_assert_str_eq(event_id_at(items, 0), "o1", "the beach event first: %s",
			 json_dumps(items, 0));
	cr_assert_leq(json_array_size(items), 3, "k = 3");
	/* n2 and n3 are in the window; n1 (before it) may come back */
	cr_assert(!has_event(items, "n2") && !has_event(items, "n3"), "%s", json_dumps(items, 0));
	cr_assert(!has_event(items, "o3") && !has_event(items, "o4"), "unrelated: %s",
		  json_dumps(items, 0));
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(items, 0), "source")),
			 "event");
	/* tokens: the window's and the recall's */
	{
		json_t *plain;
		int64_t rt = json_integer_value(json_object_get(json_object_get(c, "memories"),
								"tokens"));
		history("plain");
		plain = context("plain", "now", 0, NULL);
		cr_assert_gt(rt, 0);
		cr_assert_eq(json_integer_value(json_object_get(c, "tokens")),
			     json_integer_value(json_object_get(plain, "tokens")) + rt);
		json_decref(plain);
	}
	json_decref(c);
}

Test(recall, the_callers_query_replaces_the_latest_user_message)
{
	json_t *c;

	history("r");
	c = context("r", "now", 0, "winter tyres");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(c, "memories"), "query")),
			 "winter tyres");
	cr_assert_str_eq(event_id_at(items_of(c), 0), "o3");
	json_decref(c);
}

Test(recall, an_app_without_recall_has_no_section)
{
	json_t *c, *o;

	history("plain");
	c = context("plain", "now", 0, "winter tyres");
	cr_assert_null(json_object_get(c, "memories"));
	cr_assert_eq(json_array_size(json_object_get(c, "events")), 2);
	o = context("plain", "now", MEMD_READ_OPENAI, NULL);
	cr_assert_eq(json_array_size(json_object_get(o, "messages")), 2, "no system message");
	json_decref(o);
	json_decref(c);
}

Test(recall, min_score_drops_what_scores_below)
{
	json_t *c;

	history("min");
	c = context("min", "now", 0, NULL);
	cr_assert_eq(json_array_size(items_of(c)), 0);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(c, "memories"), "tokens")),
		     0);
	json_decref(c);
}

Test(recall, items_stay_within_max_tokens)
{
	json_t *c, *all, *items;
	int64_t sum = 0;

	history("tight");
	history("ev");
	c = context("tight", "now", 0, "Biscuit dog beach tyres peanuts");
	all = context("ev", "now", 0, "Biscuit dog beach tyres peanuts");
	items = items_of(c);
	cr_assert_geq(json_array_size(items), 1);
	cr_assert_lt(json_array_size(items), json_array_size(items_of(all)),
		     "the budget leaves some out: %s", json_dumps(items, 0));
	sum = json_integer_value(json_object_get(json_object_get(c, "memories"), "tokens"));
	cr_assert_gt(sum, 0);
	cr_assert_leq(sum, 12);
	json_decref(all);
	json_decref(c);
}

Test(recall, a_token_window_leaves_recall_what_the_window_does_not_use)
{
	json_t *c;
	int64_t window, rt;

	history("tw");
	c = context("tw", "now", 0, "Biscuit dog beach tyres peanuts winter allergic");
	rt = json_integer_value(json_object_get(json_object_get(c, "memories"), "tokens"));
	window = json_integer_value(json_object_get(c, "tokens")) - rt;
	cr_assert_gt(window, 0);
	cr_assert_leq(window + rt, 40, "window %lld + recall %lld over the strategy's 40",
		      (long long)window, (long long)rt);
	json_decref(c);
}

Test(recall, sources_choose_memories_or_events)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *c, *items;

	history("mem");
	history("ev");
	tu_ok(memd_memory_create(m, "mem", "u", "{\"text\": \"Biscuit's favourite beach is Porthcurno.\"}",
				 &out, NULL, &err),
	      &err, &out);
	tu_ok(memd_memory_create(m, "ev", "u", "{\"text\": \"Biscuit's favourite beach is Porthcurno.\"}",
				 &out, NULL, &err),
	      &err, &out);
	c = context("mem", "now", 0, NULL);
	items = items_of(c);
	cr_assert_eq(json_array_size(items), 1, "%s", json_dumps(items, 0));
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(items, 0), "source")),
			 "memory");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(items, 0), "text")),
			 "Biscuit's favourite beach is Porthcurno.");
	json_decref(c);
	c = context("ev", "now", 0, NULL);
	items = items_of(c);
	cr_assert_geq(json_array_size(items), 1);
	for (size_t i = 0; i < json_array_size(items); i++)
		cr_assert_str_eq(json_string_value(json_object_get(json_array_get(items, i), "source")),
				 "event");
	json_decref(c);
}

Test(recall, openai_format_puts_the_items_in_one_system_message_first)
{
	json_t *o, *msgs, *first;
	const char *text;

	history("r");
	o = context("r", "now", MEMD_READ_OPENAI, NULL);
	msgs = json_object_get(o, "messages");
	cr_assert_eq(json_array_size(msgs), 3, "%s", json_dumps(o, 0));
	first = json_array_get(msgs, 0);
	cr_assert_str_eq(json_string_value(json_object_get(first, "role")), "system");
	text = json_string_value(json_object_get(first, "content"));
	cr_assert_not_null(text);
	cr_assert(strncmp(text, "Recalled from earlier conversations and long-term memory:\n- [", 61) == 0,
		  "%s", text);
	cr_assert(strstr(text, "] user: My dog Biscuit loves running on the beach at dawn."), "%s", text);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(msgs, 2), "content")),
			 "Where does Biscuit like to run?");
	json_decref(o);
}

Test(recall, openai_format_puts_the_recall_after_the_summary)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = { .struct_size = sizeof(sc), .app = "sb", .user = "u", .session = "now" };
	memd_event sum = { .struct_size = sizeof(sum), .id = "sum1", .role = "summary",
			   .author = "summary_buffer",
			   .content_json = "{\"parts\":[{\"text\":\"They talked about slippers.\"}]}",
			   .text = "They talked about slippers.", .tokens = 5, .covers_seq = 2,
			   .timestamp_us = 1764064800000000LL };
	const memd_event *one[1] = { &sum };
	int64_t seq;
	memd_append a = { .struct_size = sizeof(a), .events = one, .n_events = 1, .now_us = 1 };
	memd_append_result res = { .struct_size = sizeof(res), .seqs = &seq };
	memd_error err = { 0 };
	json_t *o, *msgs;

	put("sb", "old", "user", "o1", "My dog Biscuit loves running on the beach at dawn.");
	put("sb", "now", "user", "n1", "Biscuit chewed my slippers this morning.");
	put("sb", "now", "assistant", "n2", "Oh no! Puppies chew when they are bored.");
	cr_assert_eq(store_append(service_session_store(m), &call, &sc, &a, &res, &err), 0, "%s",
		     err.msg);
	put("sb", "now", "user", "n3", "Where does Biscuit like to run?");
	o = context("sb", "now", MEMD_READ_OPENAI, NULL);
	msgs = json_object_get(o, "messages");
	cr_assert_eq(json_array_size(msgs), 3, "%s", json_dumps(o, 0));
	cr_assert(strncmp(json_string_value(json_object_get(json_array_get(msgs, 0), "content")),
			  "Summary of the conversation", 27) == 0, "%s", json_dumps(o, 0));
	cr_assert(strstr(json_string_value(json_object_get(json_array_get(msgs, 1), "content")),
			 "Recalled from earlier conversations and long-term memory:\n- ["),
		  "%s", json_dumps(o, 0));
	cr_assert(strstr(json_string_value(json_object_get(json_array_get(msgs, 1), "content")),
			 "Biscuit loves running on the beach"),
		  "%s", json_dumps(o, 0));
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(msgs, 2), "content")),
			 "Where does Biscuit like to run?");
	json_decref(o);
}

Test(recall, a_query_over_8192_bytes_is_refused)
{
	char *q = malloc(8194), *out = NULL;
	memd_error err = { 0 };

	cr_assert_not_null(q);
	memset(q, 'a', 8193);
	q[8193] = '\0';
	history("r");
	cr_assert_eq(memd_context_recall(m, "r", "u", "now", 0, q, &out, &err), MEMD_EINVAL);
	cr_assert(strstr(err.msg, "query"), "%s", err.msg);
	q[8192] = '\0';
	tu_ok(memd_context_recall(m, "r", "u", "now", 0, q, &out, &err), &err, &out);
	free(q);
}

Test(recall, bad_recall_config_is_refused_with_file_and_line)
{
	char path[TU_PATH_MAX];
	memd_options o = { .struct_size = sizeof(o), .config_path = path };
	memd_error err = { 0 };
	memd *m2 = NULL;

	tu_write_file(&dir, "bad.yaml",
		      "stores: {main: {plugin: memory}}\n"
		      "apps:\n"
		      "  a:\n"
		      "    working_memory:\n"
		      "      strategy: buffer_window\n"
		      "      recall: {k: 0, sources: [memories, files], colour: red}\n",
		      path);
	cr_assert_eq(memd_open(&o, &m2, &err), MEMD_EINVAL);
	cr_assert(strstr(err.msg, "bad.yaml:6: apps.a.working_memory.recall"), "%s", err.msg);
}

/* Recall adds to the context and never takes it away: when its search
 * fails (here the embedding endpoint of a vector recall refuses every
 * connection), the read still answers the window, and the section says
 * why it has no items, as an error body would. */
Test(recall, a_failing_search_leaves_the_window_and_says_why)
{
	char yaml[RT_YAML_MAX];
	tu_dir d2;
	memd *keep = m, *m2;
	json_t *c, *e, *o;

	tu_dir_make(&d2);
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db}\n"
		 "  vec: {plugin: filevec, path: %s/vec}\n"
		 "index:\n"
		 "  vector:\n"
		 "    enabled: true\n"
		 "    store: vec\n"
		 "    embedder: {type: openai, url: 'http://127.0.0.1:9/v1', model: m, dim: 8,"
		 " timeout_ms: 2000}\n"
		 "apps:\n"
		 "  r: {working_memory: {strategy: buffer_window, max_messages: 2,"
		 " recall: {k: 3, mode: vector}}}\n",
		 d2.path, d2.path);
	m2 = tu_open(&d2, yaml);
	m = m2;
	history("r");
	c = context("r", "now", 0, NULL);
	cr_assert_eq(json_array_size(json_object_get(c, "events")), 2);
	cr_assert_eq(json_array_size(items_of(c)), 0);
	e = json_object_get(json_object_get(c, "memories"), "error");
	cr_assert(json_is_object(e), "no error in %s", json_dumps(c, 0));
	cr_assert(json_string_value(json_object_get(e, "code")));
	cr_assert(json_string_length(json_object_get(e, "message")) > 0);
	cr_assert(json_is_boolean(json_object_get(e, "retryable")));
	o = context("r", "now", MEMD_READ_OPENAI, NULL);
	cr_assert_eq(json_array_size(json_object_get(o, "messages")), 2, "no recall message");
	json_decref(o);
	json_decref(c);
	m = keep;
	memd_close(m2);
	tu_dir_remove(&d2);
}
