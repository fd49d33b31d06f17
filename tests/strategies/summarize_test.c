/* SPDX-License-Identifier: MIT */
/*
 * The summarizer services: extractive (deterministic, within budget,
 * keeps the sentences with names, numbers and dates) and openai against
 * openai_standin.py, a local stand-in server that follows the OpenAI chat
 * completions contract (success, timeout, 429 with retry, 500, garbage and
 * empty bodies, API keys). Through the facade with summary_buffer: a
 * failing or slow summarizer never fails or slows an append, and nothing
 * is lost.
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <memd/memd.h>

#include "config/config.h"
#include "plugins/hostsvc.h"
#include "service/service.h"
#include "summarize/summarize.h"
#include "test_util.h"
#include "tokens/tokens.h"

#define STANDIN "tests/strategies/openai_standin.py"
#define MS 1000000LL
#define SETTLE_MS 10000

static pid_t standin_pid;
static int standin_stdin = -1;
static int port;

static void standin_start(void)
{
	int in[2], out[2];
	char path[1024], line[32];
	const char *root = getenv("MEMD_SOURCE_ROOT");
	cr_assert(root, "MEMD_SOURCE_ROOT is not set: run through meson test");
	snprintf(path, sizeof(path), "%s/%s", root, STANDIN);
	cr_assert(pipe(in) == 0 && pipe(out) == 0);
	standin_pid = fork();
	cr_assert(standin_pid >= 0);
	if (standin_pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execlp("python3", "python3", path, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	standin_stdin = in[1];
	FILE *f = fdopen(out[0], "r");
	cr_assert(fgets(line, sizeof(line), f), "the stand-in server did not start");
	fclose(f);
	port = atoi(line);
	cr_assert(port > 0);
}

static void standin_stop(void)
{
	if (standin_stdin >= 0)
		close(standin_stdin);
	standin_stdin = -1;
	if (standin_pid > 0) {
		kill(standin_pid, SIGTERM);
		waitpid(standin_pid, NULL, 0);
	}
	standin_pid = 0;
}

static size_t on_body(char *d, size_t s, size_t n, void *ud)
{
	char **buf = ud;
	size_t old = *buf ? strlen(*buf) : 0;
	*buf = realloc(*buf, old + s * n + 1);
	memcpy(*buf + old, d, s * n);
	(*buf)[old + s * n] = '\0';
	return s * n;
}

static size_t on_body_discard(char *d, size_t s, size_t n, void *ud)
{
	(void)d;
	(void)ud;
	return s * n;
}

/* Requests the stand-in got for model ("holding": the hold requests it
 * has not answered yet). */
static int requests(const char *model)
{
	char url[64], *body = NULL;
	CURL *c = curl_easy_init();
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/stats", port);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
	cr_assert_eq(curl_easy_perform(c), CURLE_OK);
	curl_easy_cleanup(c);
	json_t *o = json_loads(body, 0, NULL);
	int n = (int)json_integer_value(json_object_get(o, model));
	json_decref(o);
	free(body);
	return n;
}

/* Let the stand-in answer its "hold" requests. */
static void release_held(void)
{
	char url[64];
	CURL *c = curl_easy_init();
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/release", port);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{}");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body_discard);
	cr_assert_eq(curl_easy_perform(c), CURLE_OK);
	curl_easy_cleanup(c);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- direct calls -------------------------------------------------------- */

static hostsvc *svc_for(const char *summarizer_yaml)
{
	config_node *root = NULL;
	memd_error err = { 0 };
	hostsvc *s = hostsvc_new(NULL, NULL, 0);
	cr_assert(s);
	cr_assert_eq(config_parse_string(summarizer_yaml, strlen(summarizer_yaml), "s.yaml", &root, &err),
		     0, "%s", err.msg);
	cr_assert_eq(hostsvc_configure(s, NULL, root, &err), 0, "%s", err.msg);
	config_free(root);
	return s;
}

static hostsvc *openai(const char *url_suffix, const char *model, int timeout_ms, int retries,
		       const char *key)
{
	char yaml[512];
	snprintf(yaml, sizeof(yaml),
		 "type: openai\nurl: http://127.0.0.1:%d%s\nmodel: %s\ntimeout_ms: %d\nretries: %d\n%s%s\n",
		 port, url_suffix, model, timeout_ms, retries, key ? "api_key: " : "", key ? key : "");
	return svc_for(yaml);
}

static int32_t got(void *ud, const char *text, size_t len)
{
	char **out = ud;
	free(*out);
	*out = strndup(text, len);
	return 0;
}

static memd_event events[4];
static const memd_event *evp[4];

static void make_events(void)
{
	static const char *const texts[] = {
		"Hi there, how are you today?",
		"My name is Ingrid Solberg and my booking reference is 77341.",
		"Fine thanks. We agreed to move the launch to 2025-09-30.",
		"ok",
	};
	static const char *const roles[] = { "user", "user", "assistant", "user" };
	for (int i = 0; i < 4; i++) {
		events[i] = (memd_event){ .struct_size = sizeof(memd_event), .seq = i + 1,
					  .role = roles[i], .text = texts[i], .content_json = "{}" };
		events[i].tokens = tokens_approx(texts[i], strlen(texts[i]));
		evp[i] = &events[i];
	}
}

static int32_t summarize(hostsvc *s, int64_t target, char **ret, memd_error *err)
{
	memd_text_sink sink = { sizeof(sink), ret, got };
	memd_call call = { .struct_size = sizeof(call) };
	*ret = NULL;
	return hostsvc_summarize(s, &call, "Earlier: the user lives in Oslo.", evp, 4, target, &sink, err);
}

TestSuite(openai, .init = standin_start, .fini = standin_stop, .timeout = 60);

Test(openai, success_all_url_forms)
{
	static const char *const suffixes[] = { "/v1", "", "/v1/chat/completions", "/v1/" };
	make_events();
	for (int i = 0; i < 4; i++) {
		memd_error err = { 0 };
		char *text;
		hostsvc *s = openai(suffixes[i], "ok", 2000, 0, NULL);
		cr_assert_eq(summarize(s, 200, &text, &err), 0, "%s: %s", suffixes[i], err.msg);
		cr_assert(strstr(text, "Summary:") && strstr(text, "77341") && strstr(text, "2025-09-30") &&
			  strstr(text, "Oslo"), "%s", text);
		int64_t n;
		hostsvc_count_tokens(s, text, strlen(text), &n);
		cr_assert_leq(n, 200);
		free(text);
		hostsvc_free(s);
	}
	cr_assert_eq(requests("ok"), 4);
}

Test(openai, summary_is_clipped_to_the_budget)
{
	memd_error err = { 0 };
	char *text;
	hostsvc *s = openai("/v1", "ok", 2000, 0, NULL);
	make_events();
	cr_assert_eq(summarize(s, 8, &text, &err), 0, "%s", err.msg);
	int64_t n;
	hostsvc_count_tokens(s, text, strlen(text), &n);
	cr_assert(n <= 8 && n > 0, "%lld tokens: %s", (long long)n, text);
	free(text);
	hostsvc_free(s);
}

#define GIVE_UP_BOUND_MS 20000 /* far below the stand-in's hold: it gave up by itself */

Test(openai, timeout_then_retry_then_give_up)
{
	memd_error err = { 0 };
	char *text;
	/* The stand-in holds the requests unanswered: only the client's own
	 * timeouts (300 ms each) end the call. */
	hostsvc *s = openai("/v1", "hold", 300, 1, NULL);
	int64_t t0 = now_ms();
	make_events();
	cr_assert_eq(summarize(s, 100, &text, &err), MEMD_ETIMEDOUT, "%s", err.msg);
	int64_t took = now_ms() - t0;
	cr_assert(err.flags & MEMD_ERROR_RETRYABLE);
	cr_assert(took >= 600 && took < GIVE_UP_BOUND_MS, "took %lld ms", (long long)took);
	cr_assert_null(text);
	cr_assert_eq(requests("hold"), 2);
	hostsvc_free(s);
}

Test(openai, rate_limited_then_retried)
{
	memd_error err = { 0 };
	char *text;
	hostsvc *s = openai("/v1", "flaky429", 2000, 2, NULL);
	make_events();
	cr_assert_eq(summarize(s, 100, &text, &err), 0, "%s", err.msg);
	cr_assert(strstr(text, "77341"));
	free(text);
	cr_assert_eq(requests("flaky429"), 2);
	hostsvc_free(s);
}

Test(openai, server_error_retried_with_backoff)
{
	memd_error err = { 0 };
	char *text;
	hostsvc *s = openai("/v1", "error500", 2000, 2, NULL);
	int64_t t0 = now_ms();
	make_events();
	cr_assert_eq(summarize(s, 100, &text, &err), MEMD_EUNAVAIL, "%s", err.msg);
	cr_assert(strstr(err.msg, "HTTP 500"), "%s", err.msg);
	cr_assert(err.flags & MEMD_ERROR_RETRYABLE);
	/* backoff 100 ms, then 200 ms */
	cr_assert_geq(now_ms() - t0, SUMMARIZE_OPENAI_BACKOFF_BASE_MS * 3);
	cr_assert_eq(requests("error500"), 3);
	hostsvc_free(s);
}

Test(openai, garbage_and_empty_bodies)
{
	memd_error err = { 0 };
	char *text;
	hostsvc *s = openai("/v1", "garbage", 2000, 1, NULL);
	make_events();
	cr_assert_eq(summarize(s, 100, &text, &err), MEMD_EIO, "%s", err.msg);
	cr_assert(strstr(err.msg, "not JSON"), "%s", err.msg);
	cr_assert_eq(requests("garbage"), 2);
	hostsvc_free(s);
	s = openai("/v1", "empty", 2000, 0, NULL);
	cr_assert_eq(summarize(s, 100, &text, &err), MEMD_EIO, "%s", err.msg);
	cr_assert(strstr(err.msg, "choices[0].message.content"), "%s", err.msg);
	hostsvc_free(s);
}

Test(openai, api_key)
{
	memd_error err = { 0 };
	char *text;
	hostsvc *s = openai("/v1", "auth", 2000, 2, "test-key");
	make_events();
	cr_assert_eq(summarize(s, 100, &text, &err), 0, "%s", err.msg);
	free(text);
	hostsvc_free(s);
	s = openai("/v1", "auth", 2000, 2, "wrong-secret-key");
	cr_assert_eq(summarize(s, 100, &text, &err), MEMD_EAUTH, "%s", err.msg);
	cr_assert_null(strstr(err.msg, "wrong-secret-key"), "the key leaked: %s", err.msg);
	cr_assert_eq(requests("auth"), 2, "a 401 is not retried");
	hostsvc_free(s);
}

Test(openai, unreachable_server)
{
	memd_error err = { 0 };
	char *text, yaml[256];
	/* The stand-in's port, after it stopped: nothing listens there. */
	standin_stop();
	snprintf(yaml, sizeof(yaml), "type: openai\nurl: http://127.0.0.1:%d/v1\nmodel: ok\n"
		 "timeout_ms: 500\nretries: 1\n", port);
	hostsvc *s = svc_for(yaml);
	make_events();
	cr_assert_eq(summarize(s, 100, &text, &err), MEMD_EUNAVAIL, "%s", err.msg);
	hostsvc_free(s);
}

/* ---- through the facade ------------------------------------------------------ */

static memd *open_with(tu_dir *d, const char *model, int timeout_ms, int retries)
{
	char yaml[TU_PATH_MAX + 1024];
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db, synchronous: normal}\n"
		 "summarizer: {type: openai, url: 'http://127.0.0.1:%d/v1', model: %s, timeout_ms: %d,"
		 " retries: %d}\n"
		 "apps:\n  '*': {working_memory: {strategy: summary_buffer, max_tokens: 200,"
		 " min_messages: 2}}\n",
		 d->path, port, model, timeout_ms, retries);
	return tu_open(d, yaml);
}

/* Append turns first..first + turns - 1 to sid (made when first is 0);
 * returns the events appended. */
static int64_t append_turns(memd *mm, const char *sid, int first, int turns)
{
	memd_error err = { 0 };
	char *out = NULL, body[512];
	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	if (first == 0)
		tu_ok(memd_session_create(mm, "app", "u", body, &out, &err), &err, &out);
	for (int t = first; t < first + turns; t++) {
		snprintf(body, sizeof(body),
			 "{\"events\":[{\"role\":\"user\",\"content\":\"Turn %d: please note ticket %d for "
			 "Marta Lindqvist, due 2025-0%d-1%d.\"},{\"role\":\"assistant\",\"content\":\"Noted, "
			 "ticket %d is recorded.\"}]}",
			 t, 5000 + t, 1 + t % 9, t % 10, 5000 + t);
		cr_assert_eq(memd_events_append(mm, "app", "u", sid, body, &out, &err), 0,
			     "an append failed: %s", err.msg);
		memd_free(out);
		cr_assert_eq(memd_context(mm, "app", "u", sid, &out, &err), 0, "%s", err.msg);
		json_t *ctx = tu_json(out);
		cr_assert_leq(json_integer_value(json_object_get(ctx, "tokens")), 200);
		json_decref(ctx);
	}
	return 2 * turns;
}

/* Every event is still there, and how many summaries were written. */
static size_t check_nothing_lost(memd *mm, const char *sid, int64_t appended)
{
	memd_error err = { 0 };
	char *out = NULL;
	int64_t conversation = 0;
	size_t summaries = 0, i;
	json_t *e;
	cr_assert_eq(memd_events_list(mm, "app", "u", sid, 0, MEMD_PAGE_LIMIT_MAX, &out, &err), 0);
	json_t *o = tu_json(out);
	json_array_foreach(json_object_get(o, "events"), i, e) {
		if (strcmp(json_string_value(json_object_get(e, "role")), "summary") == 0)
			summaries++;
		else
			conversation++;
	}
	json_decref(o);
	cr_assert_eq(conversation, appended, "%lld events stored, %lld appended",
		     (long long)conversation, (long long)appended);
	return summaries;
}

Test(openai, facade_failing_summarizer_loses_nothing)
{
	tu_dir d;
	tu_dir_make(&d);
	memd *mm = open_with(&d, "error500", 1000, 1);
	int64_t n = append_turns(mm, "fail", 0, 40);
	memd_close(mm); /* waits for the background runs */
	mm = open_with(&d, "error500", 1000, 0);
	cr_assert_eq(check_nothing_lost(mm, "fail", n), 0, "no summary can come from a 500");
	cr_assert_gt(requests("error500"), 0, "the summarizer was asked");
	memd_close(mm);
	tu_dir_remove(&d);
}

Test(openai, facade_garbage_summarizer_loses_nothing)
{
	tu_dir d;
	tu_dir_make(&d);
	memd *mm = open_with(&d, "garbage", 1000, 0);
	int64_t n = append_turns(mm, "junk", 0, 40);
	cr_assert_eq(check_nothing_lost(mm, "junk", n), 0);
	memd_close(mm);
	tu_dir_remove(&d);
}

/* The slow summarizer test: turns appended before and while the stand-in
 * holds a summary request, and how long the summarizer waits for it. */
#define HOLD_TURNS 30
#define HOLD_MORE_TURNS 10
#define HOLD_WAIT_MS 30000
#define HOLD_POLL_MS 10
#define HOLD_TIMEOUT_MS 60000

Test(openai, facade_slow_summarizer_does_not_slow_appends)
{
	tu_dir d;
	tu_dir_make(&d);
	memd *mm = open_with(&d, "hold", HOLD_TIMEOUT_MS, 0);
	int64_t n = append_turns(mm, "slow", 0, HOLD_TURNS), t0 = now_ms();
	/* The stand-in holds the summary until told; appends made meanwhile
	 * return all the same (one that waited for it would hang until the
	 * release, and the request would no longer be held below). */
	while (requests("holding") < 1) {
		cr_assert_lt(now_ms() - t0, HOLD_WAIT_MS, "no summary was asked for");
		struct timespec ts = { 0, HOLD_POLL_MS * MS };
		nanosleep(&ts, NULL);
	}
	n += append_turns(mm, "slow", HOLD_TURNS, HOLD_MORE_TURNS);
	cr_assert_geq(requests("holding"), 1, "the held summary was answered while appending");
	release_held();
	memd_close(mm); /* waits for the summary in flight */
	mm = open_with(&d, "ok", 5000, 0);
	cr_assert_gt(check_nothing_lost(mm, "slow", n), 0, "the slow summary landed");
	memd_close(mm);
	tu_dir_remove(&d);
}

Test(openai, facade_summaries_from_the_model)
{
	tu_dir d;
	memd_error err = { 0 };
	char *out = NULL;
	tu_dir_make(&d);
	memd *mm = open_with(&d, "ok", 5000, 2);
	int64_t n = append_turns(mm, "good", 0, 40);
	memd_close(mm);
	mm = open_with(&d, "ok", 5000, 2);
	cr_assert_gt(check_nothing_lost(mm, "good", n), 0);
	cr_assert_eq(memd_context(mm, "app", "u", "good", &out, &err), 0, "%s", err.msg);
	json_t *ctx = tu_json(out);
	const char *summary = json_string_value(json_object_get(json_object_get(ctx, "summary"), "text"));
	cr_assert(summary && strstr(summary, "Summary:") && strstr(summary, "Marta"), "%s", summary);
	json_decref(ctx);
	memd_close(mm);
	tu_dir_remove(&d);
}

/* ---- extractive ------------------------------------------------------------ */

static int64_t approx(void *ud, const char *text, size_t len)
{
	(void)ud;
	return tokens_approx(text, len);
}

Test(extractive, keeps_facts_within_budget_deterministically)
{
	static const char *const filler[] = {
		"Sure, I can help with that.", "Let me think about it for a moment.",
		"That sounds like a good idea to me.", "Okay, thanks for the update on this.",
	};
	memd_event ev[40];
	const memd_event *p[40];
	char texts[40][200];
	summarize_tokens tok = { approx, NULL };
	memd_error err = { 0 };
	char *a = NULL, *b = NULL;
	memd_text_sink sa = { sizeof(sa), &a, got }, sb = { sizeof(sb), &b, got };

	for (int i = 0; i < 40; i++) {
		if (i == 17)
			snprintf(texts[i], sizeof(texts[i]),
				 "Remember: Dr. Farida Haddad signs the contract for 48,500 euros on March 3, 2026.");
		else
			snprintf(texts[i], sizeof(texts[i]), "%s %s", filler[i % 4], filler[(i / 4) % 4]);
		ev[i] = (memd_event){ .struct_size = sizeof(memd_event), .seq = i + 1,
				      .role = i % 2 ? "assistant" : "user", .text = texts[i],
				      .content_json = "{}" };
		p[i] = &ev[i];
	}
	cr_assert_eq(summarize_extractive(&tok, "user: lives in Lisbon since 2019.", p, 40, 40, &sa, &err),
		     0, "%s", err.msg);
	cr_assert_eq(summarize_extractive(&tok, "user: lives in Lisbon since 2019.", p, 40, 40, &sb, &err),
		     0, "%s", err.msg);
	cr_assert_str_eq(a, b, "not deterministic");
	cr_assert_leq(tokens_approx(a, strlen(a)), 40, "%s", a);
	cr_assert(strstr(a, "Farida Haddad") && strstr(a, "48,500") && strstr(a, "March 3, 2026"),
		  "the fact sentence was dropped: %s", a);
	cr_assert(strstr(a, "Lisbon"), "the previous summary's fact was dropped: %s", a);
	/* Repeated filler appears at most once. */
	const char *first = strstr(a, "Sure, I can help");
	cr_assert(!first || !strstr(first + 1, "Sure, I can help"), "%s", a);
	free(a);
	free(b);
	a = NULL;
	/* A budget of one token still gives a (clipped) summary, never more. */
	cr_assert_eq(summarize_extractive(&tok, NULL, p, 40, 1, &sa, &err), 0);
	cr_assert_leq(tokens_approx(a, strlen(a)), 1, "%s", a);
	free(a);
	cr_assert_eq(summarize_extractive(&tok, NULL, p, 40, 0, &sa, &err), MEMD_EINVAL);
}
