/* SPDX-License-Identifier: MIT */
/*
 * summary_buffer through the facade on sqlite with the extractive
 * summarizer: a conversation of more than 2,000 events appended turn by
 * turn. After every append the context is within max_tokens at once (even
 * while a fold may be running in the background); once the background
 * fold has settled, the context is the latest summary plus exactly every
 * event after its covers_seq (so no event leaves the context without a
 * summary covering it), covers_seq never goes back, and the rows read per
 * context call stay bounded (counted, not timed). Summaries survive a
 * restart of memd. Finalizing a session (the strategy's
 * on_session_finalize) folds every event after the latest summary, however
 * long the backlog, into exactly one more summary covering the last event,
 * and never overlaps a fold of after_append.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <memd/memd.h>

#include "service/service.h"
#include "test_util.h"

#define MAX_TOKENS 300
#define TURNS 800
#define MIN_EVENTS 2000
#define MAX_EVENTS 4096
#define SETTLE_NS (10LL * 1000000000LL) /* a fold must land within this */
#define POLL_NS 1000000L
/* session + summary + pages of events starting at 16 and doubling. */
#define ROWS_BOUND(k) (2 * (k) + 64)

static tu_dir dir;
static memd *m;
static char yaml[TU_PATH_MAX + 1024];
static _Thread_local uint32_t rng = 11;

static uint32_t rnd(uint32_t n)
{
	rng = rng * 1103515245u + 12345u;
	return (rng >> 8) % n;
}

static void setup(void)
{
	tu_dir_make(&dir);
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db, synchronous: normal}\n"
		 "summarizer: {type: extractive}\n"
		 "apps:\n"
		 "  '*': {working_memory: {strategy: summary_buffer, max_tokens: %d, threshold: 0.75,"
		 " target: 0.5, min_messages: 4}}\n",
		 dir.path, MAX_TOKENS);
	m = tu_open(&dir, yaml);
}

static void teardown(void)
{
	memd_close(m);
	tu_dir_remove(&dir);
}

TestSuite(summary_buffer, .init = setup, .fini = teardown);

typedef struct ev {
	int64_t seq;
	int summary;
} ev;

static ev all[MAX_EVENTS];
static size_t n_all;

static void sync_events(const char *sid)
{
	for (;;) {
		memd_error err = { 0 };
		char *out = NULL;
		int64_t after = n_all ? all[n_all - 1].seq : 0;
		cr_assert_eq(memd_events_list(m, "chat", "u", sid, after, MEMD_PAGE_LIMIT_MAX, &out, &err),
			     0, "%s", err.msg);
		json_t *o = tu_json(out), *e, *events = json_object_get(o, "events");
		size_t i;
		json_array_foreach(events, i, e) {
			cr_assert(n_all < MAX_EVENTS);
			all[n_all].seq = json_integer_value(json_object_get(e, "seq"));
			all[n_all].summary =
				strcmp(json_string_value(json_object_get(e, "role")), "summary") == 0;
			n_all++;
		}
		size_t got = json_array_size(events);
		json_decref(o);
		if (got < MEMD_PAGE_LIMIT_MAX)
			break;
	}
}

static json_t *context(const char *sid, uint64_t *ret_rows)
{
	memd_error err = { 0 };
	char *out = NULL;
	uint64_t rows = 0;
	memd_call call = { .struct_size = sizeof(call), .rows_read = &rows };
	cr_assert_eq(service_context(m, &call, "chat", "u", sid, &out, &err), 0, "%s", err.msg);
	if (ret_rows)
		*ret_rows = rows;
	json_t *o = tu_json(out);
	cr_assert_str_eq(json_string_value(json_object_get(o, "strategy")), "summary_buffer");
	int64_t tokens = json_integer_value(json_object_get(o, "tokens"));
	cr_assert_leq(tokens, MAX_TOKENS, "context of %lld tokens, over max_tokens", (long long)tokens);
	return o;
}

static int64_t covers_of(json_t *ctx)
{
	json_t *s = json_object_get(ctx, "summary");
	if (json_is_null(s) || !s)
		return 0;
	cr_assert_str_eq(json_string_value(json_object_get(s, "role")), "summary");
	return json_integer_value(json_object_get(s, "covers_seq"));
}

/* Nonzero if ctx holds exactly every non-summary event after covers_seq. */
static int complete(json_t *ctx)
{
	int64_t covers = covers_of(ctx);
	json_t *events = json_object_get(ctx, "events");
	size_t k = 0;
	for (size_t i = 0; i < n_all; i++) {
		if (all[i].summary || all[i].seq <= covers)
			continue;
		if (k >= json_array_size(events) ||
		    json_integer_value(json_object_get(json_array_get(events, k), "seq")) != all[i].seq)
			return 0;
		k++;
	}
	return k == json_array_size(events);
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t newest_summary(void)
{
	int64_t newest = 0;
	for (size_t i = 0; i < n_all; i++)
		if (all[i].summary)
			newest = all[i].seq;
	return newest;
}

/* The context once the background fold (if any) has landed: the events
 * are synced first, so the context must show at least the newest summary
 * known then. */
static json_t *settled(const char *sid, uint64_t *ret_rows)
{
	int64_t until = now_ns() + SETTLE_NS;
	for (;;) {
		sync_events(sid);
		int64_t newest = newest_summary();
		json_t *ctx = context(sid, ret_rows), *s = json_object_get(ctx, "summary");
		int64_t shown = json_is_object(s) ? json_integer_value(json_object_get(s, "seq")) : 0;
		cr_assert_geq(shown, newest, "the context shows summary %lld, not the newest (%lld)",
			      (long long)shown, (long long)newest);
		if (complete(ctx))
			return ctx;
		json_decref(ctx);
		cr_assert(now_ns() < until,
			  "the context never held every event after covers_seq (%zu events)", n_all);
		struct timespec ts = { 0, POLL_NS };
		nanosleep(&ts, NULL);
	}
}

static const char *const filler[] = {
	"Sure, let me look into that for you.", "That makes sense to me.",
	"Could you tell me a bit more about it?", "I think we should keep going with the plan.",
	"Here is what I found in the documentation about the memory service.",
	"The agent keeps a working memory of the conversation and a long term index.",
	"Thanks, that helps a lot.", "Let us continue with the next step of the migration.",
};

static void append_turn(const char *sid, int t)
{
	json_t *events = json_array(), *req;
	char fact[256], *text, *out = NULL;
	memd_error err = { 0 };

	if (t % 25 == 0)
		snprintf(fact, sizeof(fact), "Note that order %d ships to Berlin on 2024-%02d-%02d for Dr. Okafor.",
			 10000 + t, 1 + t % 12, 1 + t % 28);
	else
		snprintf(fact, sizeof(fact), "%s %s", filler[rnd(8)], filler[rnd(8)]);
	json_array_append_new(events, json_pack("{s:s,s:s}", "role", "user", "content", fact));
	if (t % 3 == 0) {
		char id[32];
		snprintf(id, sizeof(id), "c%d", t);
		json_array_append_new(events, json_pack("{s:s,s:{s:[{s:{s:s,s:s,s:{}}}]}}", "role",
							"assistant", "content", "parts", "tool_call", "id", id,
							"name", "lookup_order", "args"));
		json_array_append_new(events, json_pack("{s:s,s:{s:[{s:{s:s,s:s}}]}}", "role", "tool",
							"content", "parts", "tool_result", "id", id,
							"content", "status: in transit"));
	}
	json_array_append_new(events, json_pack("{s:s,s:s}", "role", "assistant", "content",
						filler[rnd(8)]));
	req = json_pack("{s:o}", "events", events);
	text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	cr_assert_eq(memd_events_append(m, "chat", "u", sid, text, &out, &err), 0,
		     "an append failed: %s", err.msg);
	memd_free(out);
	free(text);
}

Test(summary_buffer, long_conversation_turn_by_turn, .timeout = 120)
{
	memd_error err = { 0 };
	char *out = NULL;
	int64_t last_covers = 0;
	uint64_t rows, max_rows = 0;
	size_t summaries = 0;

	n_all = 0;
	tu_ok(memd_session_create(m, "chat", "u", "{\"id\":\"long\"}", &out, &err), &err, &out);
	for (int t = 0; t < TURNS; t++) {
		append_turn("long", t);
		json_decref(context("long", NULL)); /* within budget at once */
		json_t *ctx = settled("long", &rows);
		int64_t covers = covers_of(ctx);
		size_t k = json_array_size(json_object_get(ctx, "events"));
		cr_assert_geq(covers, last_covers, "covers_seq went back from %lld to %lld",
			      (long long)last_covers, (long long)covers);
		last_covers = covers;
		cr_assert_leq(rows, ROWS_BOUND(k), "turn %d: %llu rows read for %zu events", t,
			      (unsigned long long)rows, k);
		if (rows > max_rows)
			max_rows = rows;
		json_t *s = json_object_get(ctx, "summary");
		if (json_is_object(s))
			cr_assert_gt(json_integer_value(json_object_get(s, "tokens")), 0);
		json_decref(ctx);
	}
	for (size_t i = 0; i < n_all; i++)
		summaries += all[i].summary;
	cr_assert_geq(n_all - summaries, MIN_EVENTS, "only %zu conversation events",
		      n_all - summaries);
	cr_assert_gt(summaries, 10, "only %zu summaries were written", summaries);
	cr_assert_gt(last_covers, (int64_t)(n_all * 9 / 10), "the summary lags: covers %lld of %zu",
		     (long long)last_covers, n_all);
	cr_log_info("%zu events, %zu summaries, at most %llu rows per context", n_all, summaries,
		    (unsigned long long)max_rows);

	/* Summaries survive a restart: the same context after memd reopens.
	 * The context is read after a first restart: memd_close finishes the
	 * background folds, and one still running when the context was read
	 * (settled returns as soon as the context is complete) would land
	 * during the close and change it. */
	memd_close(m);
	m = tu_open(&dir, yaml);
	json_t *before = settled("long", NULL);
	memd_close(m);
	m = tu_open(&dir, yaml);
	json_t *after = context("long", NULL);
	cr_assert(json_equal(before, after), "the context changed across a restart");
	cr_assert_gt(covers_of(after), 0);
	json_decref(before);
	json_decref(after);
}

#define WRITERS 4
#define TURNS_PER_WRITER 50

static void *writer(void *arg)
{
	int base = (int)(intptr_t)arg;
	rng = (uint32_t)base + 1;
	for (int t = 0; t < TURNS_PER_WRITER; t++) {
		append_turn("burst", base + t);
		json_decref(context("burst", NULL));
	}
	return NULL;
}

Test(summary_buffer, concurrent_appends_never_overlap_summaries, .timeout = 60)
{
	memd_error err = { 0 };
	char *out = NULL;
	pthread_t th[WRITERS];
	n_all = 0;
	tu_ok(memd_session_create(m, "chat", "u", "{\"id\":\"burst\"}", &out, &err), &err, &out);
	/* Several threads append to one session at once, without waiting:
	 * folds run in the background one at a time per session. */
	for (int w = 0; w < WRITERS; w++)
		cr_assert_eq(pthread_create(&th[w], NULL, writer, (void *)(intptr_t)(w * 1000)), 0);
	for (int w = 0; w < WRITERS; w++)
		pthread_join(th[w], NULL);
	/* Then batches far larger than max_tokens, back to back: one
	 * background run has several folds to make. */
	for (int b = 0; b < 3; b++) {
		json_t *events = json_array(), *req;
		char *text, *reply = NULL;
		for (int i = 0; i < 100; i++)
			json_array_append_new(events, json_pack("{s:s,s:s}", "role", i % 2 ? "assistant" : "user",
								"content", filler[(b + i) % 8]));
		req = json_pack("{s:o}", "events", events);
		text = json_dumps(req, JSON_COMPACT);
		json_decref(req);
		cr_assert_eq(memd_events_append(m, "chat", "u", "burst", text, &reply, &err), 0, "%s", err.msg);
		memd_free(reply);
		free(text);
	}
	/* memd_close finishes the background folds: after a reopen the
	 * context is complete at once, however many appends coalesced. */
	memd_close(m);
	m = tu_open(&dir, yaml);
	sync_events("burst");
	json_t *ctx = context("burst", NULL);
	cr_assert(complete(ctx), "a backlog of unsummarized events was left after the burst");
	cr_assert_gt(covers_of(ctx), 0);
	json_decref(ctx);
	sync_events("burst");
	/* Every summary covers strictly more than the one before it. */
	int64_t prev = 0;
	size_t n = 0;
	for (size_t i = 0; i < n_all; i++) {
		if (!all[i].summary)
			continue;
		char *page = NULL;
		cr_assert_eq(memd_events_list(m, "chat", "u", "burst", all[i].seq - 1, 1, &page, &err), 0);
		json_t *o = tu_json(page), *e = json_array_get(json_object_get(o, "events"), 0);
		int64_t covers = json_integer_value(json_object_get(e, "covers_seq"));
		cr_assert_gt(covers, prev, "summary at seq %lld covers %lld, not more than %lld",
			     (long long)all[i].seq, (long long)covers, (long long)prev);
		cr_assert_lt(covers, all[i].seq);
		prev = covers;
		n++;
		json_decref(o);
	}
	cr_assert_gt(n, 0);
}

/* Every summary event of n_all (synced) covers strictly more than the one
 * before it and less than its own seq; the number of them. */
static size_t check_summaries(const char *sid)
{
	memd_error err = { 0 };
	int64_t prev = 0;
	size_t n = 0;
	for (size_t i = 0; i < n_all; i++) {
		if (!all[i].summary)
			continue;
		char *page = NULL;
		cr_assert_eq(memd_events_list(m, "chat", "u", sid, all[i].seq - 1, 1, &page, &err), 0);
		json_t *o = tu_json(page), *e = json_array_get(json_object_get(o, "events"), 0);
		int64_t covers = json_integer_value(json_object_get(e, "covers_seq"));
		cr_assert_gt(covers, prev, "summary at seq %lld covers %lld, not more than %lld",
			     (long long)all[i].seq, (long long)covers, (long long)prev);
		cr_assert_lt(covers, all[i].seq);
		prev = covers;
		n++;
		json_decref(o);
	}
	return n;
}

/* The newest non-summary seq of n_all (synced). */
static int64_t last_event_seq(void)
{
	int64_t last = 0;
	for (size_t i = 0; i < n_all; i++)
		if (!all[i].summary)
			last = all[i].seq;
	return last;
}

#define FINALIZE_TURNS 60 /* far more than max_tokens: several slices */

Test(summary_buffer, finalize_folds_the_rest_into_one_summary, .timeout = 60)
{
	memd_error err = { 0 };
	char *out = NULL, plain[TU_PATH_MAX + 512];

	/* A backlog no fold touched: appended while the app's strategy was
	 * buffer_window, which has no after_append. */
	memd_close(m);
	snprintf(plain, sizeof(plain),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db, synchronous: normal}\n"
		 "summarizer: {type: extractive}\n"
		 "apps:\n  '*': {working_memory: {strategy: buffer_window}}\n", dir.path);
	m = tu_open(&dir, plain);
	n_all = 0;
	tu_ok(memd_session_create(m, "chat", "u", "{\"id\":\"fin\"}", &out, &err), &err, &out);
	for (int t = 0; t < FINALIZE_TURNS; t++)
		append_turn("fin", t);
	memd_close(m);
	m = tu_open(&dir, yaml);
	sync_events("fin");
	cr_assert_eq(check_summaries("fin"), 0);
	size_t events = n_all;

	cr_assert_eq(service_session_finalize_strategy(m, "chat", "u", "fin", &err), 0, "%s",
		     err.msg);
	sync_events("fin");
	cr_assert_eq(n_all, events + 1, "finalize wrote %zu events, not one summary", n_all - events);
	cr_assert(all[n_all - 1].summary);
	cr_assert_eq(check_summaries("fin"), 1);
	json_t *ctx = context("fin", NULL);
	cr_assert_eq(covers_of(ctx), last_event_seq(), "the last summary does not cover the last event");
	cr_assert_eq(json_array_size(json_object_get(ctx, "events")), 0);
	json_t *meta = json_object_get(json_object_get(ctx, "summary"), "metadata");
	cr_assert_eq(json_integer_value(json_object_get(meta, "folded_events")), (json_int_t)events,
		     "the summary folded %lld of %zu events",
		     (long long)json_integer_value(json_object_get(meta, "folded_events")), events);
	json_decref(ctx);

	/* Nothing after the summary: a second finalize writes nothing. */
	cr_assert_eq(service_session_finalize_strategy(m, "chat", "u", "fin", &err), 0, "%s",
		     err.msg);
	sync_events("fin");
	cr_assert_eq(n_all, events + 1);

	/* Right after appends, while their folds may be queued or running:
	 * the finalize waits for them, so no summary is stale. */
	for (int t = 0; t < FINALIZE_TURNS; t++)
		append_turn("fin", 1000 + t);
	cr_assert_eq(service_session_finalize_strategy(m, "chat", "u", "fin", &err), 0, "%s",
		     err.msg);
	memd_close(m); /* finishes any fold queued meanwhile */
	m = tu_open(&dir, yaml);
	sync_events("fin");
	check_summaries("fin");
	ctx = context("fin", NULL);
	cr_assert_eq(covers_of(ctx), last_event_seq(), "events were left after the last summary");
	json_decref(ctx);

	cr_assert_eq(service_session_finalize_strategy(m, "chat", "u", "nope", &err), MEMD_ENOTFOUND);
}

/* ---- after rewinds -------------------------------------------------------- */

#define REWIND_TURNS 40

/* One turn whose texts carry the marker zq<t>x (user) and zq<t>y
 * (assistant), so that a summary's text shows which events it folded. */
static void marked_turn(const char *sid, int t)
{
	char body[512], *out = NULL;
	memd_error err = { 0 };
	snprintf(body, sizeof(body),
		 "{\"events\":[{\"role\":\"user\",\"content\":\"Please remember the code zq%dx "
		 "for the shipment to Berlin.\"},{\"role\":\"assistant\",\"content\":\"Noted, "
		 "the code zq%dy is kept for the shipment.\"}]}",
		 t, t);
	cr_assert_eq(memd_events_append(m, "chat", "u", sid, body, &out, &err), 0, "%s", err.msg);
	memd_free(out);
}

/* The session's events with the roles asked for (hidden ones too when
 * hidden), in seq order; a new array. */
static json_t *events_of(const char *sid, const char *roles, int hidden)
{
	json_t *all_ev = json_array();
	int64_t after = 0;
	for (;;) {
		memd_error err = { 0 };
		char *out = NULL;
		cr_assert_eq(memd_events_query(m, "chat", "u", sid, after, MEMD_PAGE_LIMIT_MAX, roles,
					       hidden ? MEMD_READ_INCLUDE_HIDDEN : 0, &out, &err),
			     0, "%s", err.msg);
		json_t *o = tu_json(out), *e, *events = json_object_get(o, "events");
		size_t i;
		json_array_foreach(events, i, e) {
			json_array_append(all_ev, e);
			after = json_integer_value(json_object_get(e, "seq"));
		}
		size_t got = json_array_size(events);
		json_decref(o);
		if (got < MEMD_PAGE_LIMIT_MAX)
			return all_ev;
	}
}

/* The newest visible summary of sid once its member ("seq" or
 * "covers_seq") is > after, waiting (bounded) for the background fold to
 * write one; a new reference. */
static json_t *summary_where(const char *sid, const char *member, int64_t after)
{
	int64_t until = now_ns() + SETTLE_NS;
	for (;;) {
		json_t *s = events_of(sid, "summary", 0);
		json_t *last = json_array_get(s, json_array_size(s) - 1);
		if (last && json_integer_value(json_object_get(last, member)) > after) {
			json_incref(last);
			json_decref(s);
			return last;
		}
		json_decref(s);
		cr_assert(now_ns() < until, "no summary with %s > %lld was written", member,
			  (long long)after);
		struct timespec ts = { 0, POLL_NS };
		nanosleep(&ts, NULL);
	}
}

/* The newest visible summary of sid once one was written after seq
 * after. */
static json_t *summary_after(const char *sid, int64_t after)
{
	return summary_where(sid, "seq", after);
}

/* The newest visible summary of sid once one folds events past seq
 * covers. */
static json_t *summary_covering_past(const char *sid, int64_t covers)
{
	return summary_where(sid, "covers_seq", covers);
}

/* No visible summary of sid names a marker of a hidden event, and the
 * context shows neither a hidden summary nor a hidden event. */
static void assert_nothing_hidden_shows(const char *sid)
{
	json_t *hidden = events_of(sid, NULL, 1), *sums = events_of(sid, "summary", 0), *e, *s;
	json_t *ctx = context(sid, NULL), *cs = json_object_get(ctx, "summary");
	size_t i, j, n_hidden = 0;

	json_array_foreach(hidden, i, e) {
		const char *text = json_string_value(json_object_get(e, "text"));
		const char *mark = text ? strstr(text, "zq") : NULL;
		char word[32];
		size_t len = 0;
		if (!json_is_object(json_object_get(e, "hidden")))
			continue;
		n_hidden++;
		if (json_is_object(cs))
			cr_assert_neq(json_integer_value(json_object_get(cs, "seq")),
				      json_integer_value(json_object_get(e, "seq")),
				      "the context shows a hidden summary");
		json_array_foreach(json_object_get(ctx, "events"), j, s)
			cr_assert_neq(json_integer_value(json_object_get(s, "seq")),
				      json_integer_value(json_object_get(e, "seq")),
				      "the context shows a hidden event");
		if (!mark || strcmp(json_string_value(json_object_get(e, "role")), "summary") == 0)
			continue;
		while (len < sizeof(word) - 1 && mark[len] && mark[len] != ' ')
			len++;
		memcpy(word, mark, len);
		word[len] = '\0';
		json_array_foreach(sums, j, s)
			cr_assert_null(strstr(json_string_value(json_object_get(s, "text")), word),
				       "summary at seq %lld folds the hidden %s",
				       (long long)json_integer_value(json_object_get(s, "seq")), word);
	}
	cr_assert_gt(n_hidden, 0);
	json_decref(ctx);
	json_decref(hidden);
	json_decref(sums);
}

Test(summary_buffer, a_rewind_hides_summaries_and_folds_resume_from_the_visible_events,
     .timeout = 60)
{
	memd_error err = { 0 };
	char *out = NULL, body[64];
	json_t *s, *s2;
	int64_t seq, covers;

	tu_ok(memd_session_create(m, "chat", "u", "{\"id\":\"rw\"}", &out, &err), &err, &out);
	for (int t = 0; t < REWIND_TURNS; t++)
		marked_turn("rw", t);
	s = summary_after("rw", 0);
	seq = json_integer_value(json_object_get(s, "seq"));
	covers = json_integer_value(json_object_get(s, "covers_seq"));
	json_decref(s);

	/* Back to the last event that summary folds: it and the summary go. */
	snprintf(body, sizeof(body), "{\"to_seq\":%lld}", (long long)covers);
	tu_ok(memd_session_rewind(m, "chat", "u", "rw", body, &out, &err), &err, &out);
	/* Folds running meanwhile either persist nothing (they read events
	 * hidden since) or fold only visible ones. */
	assert_nothing_hidden_shows("rw");

	/* New turns fold again, from the visible events only. A fold that
	 * began before the rewind may still land a summary of the events
	 * before it (visible ones: allowed); wait for one that folds the new
	 * turns. */
	for (int t = REWIND_TURNS; t < 2 * REWIND_TURNS; t++)
		marked_turn("rw", t);
	s2 = summary_covering_past("rw", seq);
	cr_assert_gt(json_integer_value(json_object_get(s2, "covers_seq")), seq);
	json_decref(s2);
	assert_nothing_hidden_shows("rw");
}
