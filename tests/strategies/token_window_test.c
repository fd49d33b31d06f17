/* SPDX-License-Identifier: MIT */
/*
 * token_window through the facade on the sqlite store: after every append
 * of a seeded random conversation (texts of random length, tool calls with
 * one to three results), the context equals the window computed here from
 * the full event list: the newest whole units (an event and the tool
 * results after it) while they fit max_tokens, exactly (the next older
 * unit would not fit), with preserve_recent honoured; and the rows read
 * stay bounded on a long session.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/memd.h>

#include "service/service.h"
#include "test_util.h"

#define BUDGET 120
#define PRESERVE 6
#define APPENDS 220
#define LONG_EVENTS 20000
#define BATCH 1000
#define SEED 7
#define MAX_EVENTS (LONG_EVENTS + APPENDS * 4 + 16)
/* Pages start at 16 events and double: a window of k events reads fewer
 * than 2k + 32 rows, plus a probe or two per query. */
#define ROWS_BOUND(k) (2 * (k) + 64)

static tu_dir dir;
static memd *m;
static uint32_t rng = SEED;

static uint32_t rnd(uint32_t n)
{
	rng = rng * 1103515245u + 12345u;
	return (rng >> 8) % n;
}

static void setup(void)
{
	char yaml[TU_PATH_MAX + 1024];
	tu_dir_make(&dir);
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db, synchronous: normal}\n"
		 "apps:\n"
		 "  '*': {working_memory: {strategy: token_window, max_tokens: %d}}\n"
		 "  keep: {working_memory: {strategy: token_window, max_tokens: %d, preserve_recent: %d}}\n"
		 "  tiny: {working_memory: {strategy: token_window, max_tokens: 1}}\n",
		 dir.path, BUDGET, BUDGET, PRESERVE);
	m = tu_open(&dir, yaml);
}

static void teardown(void)
{
	memd_close(m);
	tu_dir_remove(&dir);
}

TestSuite(token_window, .init = setup, .fini = teardown);

/* ---- the session as the test knows it ------------------------------------ */

typedef struct ev {
	int64_t seq;
	int64_t tokens;
	int result;
} ev;

static ev all[MAX_EVENTS];
static size_t n_all;

/* Read every event after the ones known (the facade's events list). */
static void sync_events(const char *app, const char *sid)
{
	for (;;) {
		memd_error err = { 0 };
		char *out = NULL;
		int64_t after = n_all ? all[n_all - 1].seq : 0;
		cr_assert_eq(memd_events_list(m, app, "u", sid, after, MEMD_PAGE_LIMIT_MAX, &out, &err), 0,
			     "%s", err.msg);
		json_t *o = tu_json(out), *e;
		size_t i;
		json_t *events = json_object_get(o, "events");
		json_array_foreach(events, i, e) {
			const char *role = json_string_value(json_object_get(e, "role"));
			char *content = json_dumps(json_object_get(e, "content"), JSON_COMPACT);
			cr_assert(n_all < MAX_EVENTS);
			all[n_all].seq = json_integer_value(json_object_get(e, "seq"));
			all[n_all].tokens = json_integer_value(json_object_get(e, "tokens"));
			all[n_all].result = strcmp(role, "tool") == 0 || strstr(content, "\"tool_result\"");
			cr_assert(all[n_all].tokens > 0, "every event has its token count stored");
			free(content);
			n_all++;
		}
		size_t got = json_array_size(events);
		json_decref(o);
		if (got < MEMD_PAGE_LIMIT_MAX)
			break;
	}
}

/* The expected window: index of its first event in all[]. */
static size_t expected_start(int64_t budget, uint32_t preserve, int64_t *ret_tokens)
{
	size_t start = n_all, kept = 0;
	int64_t tokens = 0;
	size_t i = n_all;
	while (i > 0) {
		size_t unit_start = i - 1;
		int64_t unit = all[unit_start].tokens;
		while (unit_start > 0 && all[unit_start].result) {
			unit_start--;
			unit += all[unit_start].tokens;
		}
		if (kept >= preserve && tokens + unit > budget)
			break;
		kept += i - unit_start;
		tokens += unit;
		start = unit_start;
		i = unit_start;
	}
	*ret_tokens = tokens;
	return start;
}

static void check_context(const char *app, const char *sid, int64_t budget, uint32_t preserve)
{
	memd_error err = { 0 };
	char *out = NULL;
	uint64_t rows = 0;
	memd_call call = { .struct_size = sizeof(call), .rows_read = &rows };
	int64_t want_tokens;
	size_t start = expected_start(budget, preserve, &want_tokens);

	cr_assert_eq(service_context(m, &call, app, "u", sid, &out, &err), 0, "%s", err.msg);
	json_t *o = tu_json(out), *events = json_object_get(o, "events");
	cr_assert_str_eq(json_string_value(json_object_get(o, "strategy")), "token_window");
	cr_assert(json_is_null(json_object_get(o, "summary")));
	cr_assert_eq(json_array_size(events), n_all - start,
		     "%s after %zu events: %zu in context, expected %zu", app, n_all,
		     json_array_size(events), n_all - start);
	for (size_t i = 0; i < n_all - start; i++)
		cr_assert_eq(json_integer_value(json_object_get(json_array_get(events, i), "seq")),
			     all[start + i].seq, "%s: event %zu", app, i);
	cr_assert_eq(json_integer_value(json_object_get(o, "tokens")), want_tokens);
	if (preserve == 0)
		cr_assert_leq(want_tokens, budget, "the budget is respected");
	/* Never a tool result without the event it belongs to. */
	if (start < n_all)
		cr_assert(!all[start].result || start == 0, "the window starts inside a unit");
	cr_assert_leq(rows, ROWS_BOUND(n_all - start) + 3, "%s: %llu rows read for %zu events", app,
		      (unsigned long long)rows, n_all - start);
	json_decref(o);
}

static char *words(int n)
{
	static const char *const pool[] = { "memory", "agent", "tokens", "window", "the", "a",
					    "budget", "Ada", "42", "conversation", "tool" };
	size_t cap = (size_t)n * 16 + 1, o = 0;
	char *s = malloc(cap);
	for (int i = 0; i < n; i++)
		o += (size_t)snprintf(s + o, cap - o, "%s%s", i ? " " : "", pool[rnd(11)]);
	s[o] = '\0';
	return s;
}

/* One turn: a user message, then either an answer or a tool call with its
 * results (and sometimes an answer after them). */
static void append_turn(const char *app, const char *sid, int turn)
{
	json_t *events = json_array(), *req;
	char *text, *out = NULL, *w = words(1 + (int)rnd(30));
	memd_error err = { 0 };

	json_array_append_new(events, json_pack("{s:s,s:s}", "role", "user", "content", w));
	free(w);
	if (rnd(2)) {
		int results = 1 + (int)rnd(3);
		json_t *parts = json_array();
		for (int k = 0; k < results; k++) {
			char id[32];
			snprintf(id, sizeof(id), "call-%d-%d", turn, k);
			json_array_append_new(parts, json_pack("{s:{s:s,s:s,s:{s:i}}}", "tool_call", "id", id,
							       "name", "lookup", "args", "n", k));
		}
		json_array_append_new(events, json_pack("{s:s,s:{s:o}}", "role", "assistant", "content",
							"parts", parts));
		for (int k = 0; k < results; k++) {
			char id[32];
			w = words(1 + (int)rnd(25));
			snprintf(id, sizeof(id), "call-%d-%d", turn, k);
			/* Results as role tool, or as a tool_result part of another role. */
			json_array_append_new(events, json_pack("{s:s,s:{s:[{s:{s:s,s:s}}]}}", "role",
								rnd(2) ? "tool" : "assistant", "content", "parts",
								"tool_result", "id", id, "content", w));
			free(w);
		}
	}
	if (rnd(3)) {
		w = words(1 + (int)rnd(20));
		json_array_append_new(events, json_pack("{s:s,s:s}", "role", "assistant", "content", w));
		free(w);
	}
	req = json_pack("{s:o}", "events", events);
	text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	cr_assert_eq(memd_events_append(m, app, "u", sid, text, &out, &err), 0, "%s", err.msg);
	memd_free(out);
	free(text);
}

static void create(const char *app, const char *sid)
{
	memd_error err = { 0 };
	char *out = NULL, body[64];
	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	tu_ok(memd_session_create(m, app, "u", body, &out, &err), &err, &out);
	n_all = 0;
}

Test(token_window, budget_exact_and_tool_units_whole, .timeout = 60)
{
	create("chat", "s1");
	check_context("chat", "s1", BUDGET, 0); /* empty */
	for (int t = 0; t < APPENDS; t++) {
		append_turn("chat", "s1", t);
		sync_events("chat", "s1");
		check_context("chat", "s1", BUDGET, 0);
	}
}

Test(token_window, preserve_recent_honoured, .timeout = 60)
{
	create("keep", "s2");
	for (int t = 0; t < APPENDS / 2; t++) {
		append_turn("keep", "s2", t);
		/* Now and then a message far over the budget on its own: it is
		 * kept (preserve_recent), with what else is preserved. */
		if (t % 17 == 5) {
			char *w = words(BUDGET * 2), *text = NULL, *out = NULL;
			memd_error err = { 0 };
			json_t *req = json_pack("{s:[{s:s,s:s}]}", "events", "role", "user", "content", w);
			text = json_dumps(req, JSON_COMPACT);
			json_decref(req);
			cr_assert_eq(memd_events_append(m, "keep", "u", "s2", text, &out, &err), 0, "%s",
				     err.msg);
			memd_free(out);
			free(text);
			free(w);
		}
		sync_events("keep", "s2");
		check_context("keep", "s2", BUDGET, PRESERVE);
		/* At least the newest PRESERVE events are there. */
		int64_t tokens;
		size_t start = expected_start(BUDGET, PRESERVE, &tokens);
		cr_assert(n_all - start >= (n_all < PRESERVE ? n_all : PRESERVE));
	}
}

Test(token_window, budget_below_any_event_gives_nothing)
{
	create("tiny", "s3");
	append_turn("tiny", "s3", 0);
	sync_events("tiny", "s3");
	check_context("tiny", "s3", 1, 0);
}

Test(token_window, long_session_reads_only_the_window, .timeout = 60)
{
	memd_error err = { 0 };
	char *out = NULL;
	create("chat", "long");
	for (int done = 0; done < LONG_EVENTS;) {
		json_t *events = json_array(), *req;
		for (int i = 0; i < BATCH; i++)
			json_array_append_new(events, json_pack("{s:s,s:s}", "role", i % 2 ? "assistant" : "user",
								"content", "a message of a few tokens"));
		req = json_pack("{s:o}", "events", events);
		char *text = json_dumps(req, JSON_COMPACT);
		json_decref(req);
		cr_assert_eq(memd_events_append(m, "chat", "u", "long", text, &out, &err), 0, "%s", err.msg);
		memd_free(out);
		free(text);
		done += BATCH;
	}
	for (int t = 0; t < 5; t++)
		append_turn("chat", "long", t);
	sync_events("chat", "long");
	check_context("chat", "long", BUDGET, 0);
}
