/* SPDX-License-Identifier: MIT */
/*
 * The all and buffer_window strategies through the real sqlite store, and
 * proof (by rows examined, not by time) that context on a 100,000-event
 * session reads only the window.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/memd.h>

#include "service/service.h"
#include "test_util.h"

#define WINDOW 5
#define LONG_SESSION_EVENTS 100000
#define SHORT_SESSION_EVENTS 50
#define BATCH 1000
/* The store may examine a few rows beyond those it returns (an index probe
 * past the end of the range); anything proportional to the session fails. */
#define ROWS_SLACK 4

static tu_dir dir;
static memd *m;

static void setup(void)
{
	char yaml[TU_PATH_MAX + 512];
	tu_dir_make(&dir);
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db, synchronous: normal}\n"
		 "apps:\n"
		 "  '*': {working_memory: {strategy: buffer_window}}\n"
		 "  window: {working_memory: {strategy: buffer_window, max_messages: %d}}\n"
		 "  full: {working_memory: {strategy: all}}\n",
		 dir.path, WINDOW);
	m = tu_open(&dir, yaml);
}

static void teardown(void)
{
	memd_close(m);
	tu_dir_remove(&dir);
}

TestSuite(strategy, .init = setup, .fini = teardown);

/* Append n events "message i" (i from 1) to (app, u, sid), in batches. */
static void fill(const char *app, const char *sid, int n)
{
	memd_error err = { 0 };
	char *out = NULL;
	char body[64];

	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	tu_ok(memd_session_create(m, app, "u", body, &out, &err), &err, &out);
	for (int done = 0; done < n;) {
		json_t *events = json_array(), *req;
		char *text;
		int k = n - done < BATCH ? n - done : BATCH;
		for (int i = 0; i < k; i++) {
			char msg[64];
			snprintf(msg, sizeof(msg), "message %d", done + i + 1);
			json_array_append_new(events, json_pack("{s:s,s:s}", "role",
								(done + i) % 2 ? "assistant" : "user",
								"content", msg));
		}
		req = json_pack("{s:o}", "events", events);
		text = json_dumps(req, JSON_COMPACT);
		json_decref(req);
		cr_assert_eq(memd_events_append(m, app, "u", sid, text, &out, &err), 0, "%s", err.msg);
		memd_free(out);
		free(text);
		done += k;
	}
}

static json_t *context(const char *app, const char *sid, uint64_t *ret_rows)
{
	memd_error err = { 0 };
	uint64_t rows = 0;
	memd_call call = { .struct_size = sizeof(call), .rows_read = &rows };
	char *out = NULL;

	cr_assert_eq(service_context(m, &call, app, "u", sid, &out, &err), 0, "%s", err.msg);
	if (ret_rows)
		*ret_rows = rows;
	return tu_json(out);
}

static const char *event_text(json_t *ctx, size_t i)
{
	return json_string_value(json_object_get(json_array_get(json_object_get(ctx, "events"), i), "text"));
}

Test(strategy, buffer_window_returns_the_newest_in_order)
{
	json_t *c;
	int64_t tokens = 0;

	fill("window", "s", 12);
	c = context("window", "s", NULL);
	cr_assert_str_eq(json_string_value(json_object_get(c, "strategy")), "buffer_window");
	cr_assert_eq(json_array_size(json_object_get(c, "events")), WINDOW);
	cr_assert_str_eq(event_text(c, 0), "message 8");
	cr_assert_str_eq(event_text(c, WINDOW - 1), "message 12");
	cr_assert(json_is_null(json_object_get(c, "summary")));
	for (size_t i = 0; i < WINDOW; i++)
		tokens += json_integer_value(
			json_object_get(json_array_get(json_object_get(c, "events"), i), "tokens"));
	cr_assert_gt(tokens, 0);
	cr_assert_eq(json_integer_value(json_object_get(c, "tokens")), tokens);
	json_decref(c);
}

Test(strategy, all_returns_everything_and_default_app_applies)
{
	json_t *c;

	fill("full", "s", 30);
	c = context("full", "s", NULL);
	cr_assert_str_eq(json_string_value(json_object_get(c, "strategy")), "all");
	cr_assert_eq(json_array_size(json_object_get(c, "events")), 30);
	cr_assert_str_eq(event_text(c, 0), "message 1");
	json_decref(c);

	/* An app with no entry of its own gets "*": buffer_window of 20. */
	fill("other", "s", 30);
	c = context("other", "s", NULL);
	cr_assert_eq(json_array_size(json_object_get(c, "events")), 20);
	cr_assert_str_eq(event_text(c, 0), "message 11");
	json_decref(c);
}

Test(strategy, missing_session_is_not_found)
{
	memd_error err = { 0 };
	char *out = NULL;
	cr_assert_eq(memd_context(m, "window", "u", "nope", &out, &err), MEMD_ENOTFOUND, "%s", err.msg);
}

Test(strategy, context_reads_only_the_window, .timeout = 300)
{
	uint64_t rows_long, rows_short;
	json_t *c;

	fill("window", "long", LONG_SESSION_EVENTS);
	fill("window", "short", SHORT_SESSION_EVENTS);
	c = context("window", "long", &rows_long);
	cr_assert_eq(json_array_size(json_object_get(c, "events")), WINDOW);
	cr_assert_str_eq(event_text(c, WINDOW - 1), "message 100000");
	json_decref(c);
	json_decref(context("window", "short", &rows_short));

	cr_assert_gt(rows_long, 0, "the store reported no rows read at all");
	cr_assert_leq(rows_long, WINDOW + ROWS_SLACK,
		      "context on %d events examined %llu rows for a window of %d", LONG_SESSION_EVENTS,
		      (unsigned long long)rows_long, WINDOW);
	cr_assert_eq(rows_long, rows_short, "rows read grew with the session: %llu vs %llu",
		     (unsigned long long)rows_long, (unsigned long long)rows_short);
}
