/* SPDX-License-Identifier: MIT */
/*
 * Memory extraction through the facade (host/service/
 * service_memory_extract.c) on sqlite: a scripted conversation over
 * several sessions gives the expected memories with their sources, a
 * repeated fact merges, a contradiction updates (the history keeps both),
 * "forget" deletes; every trigger fires (every_events after appends, idle
 * sessions by a clock the test drives, a lane's finalize); a failing
 * extractor moves nothing and never fails an append; a process killed in
 * the middle of a batch and two memd handles racing on one file extract
 * each batch exactly once; a failing session waits a doubling backoff
 * (by the driven clock) before the worker tries it again; the openai
 * extractor retries 429s, sends the configured prompts and API key (else
 * $OPENAI_API_KEY), and a decision on a memory it was not shown fails the
 * whole batch. The openai extractor talks to
 * tests/standins/openai_chat_standin.py, a local stand-in that follows
 * the chat completions contract with scripted answers.
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <memd/memd.h>
#include <memd/store.h>

#include "plugins/store.h"
#include "service/service.h"
#include "test_util.h"

#define STANDIN "tests/standins/openai_chat_standin.py"
#define US_PER_SEC 1000000LL
#define US_PER_MIN (60 * US_PER_SEC)
#define T0 (1767225600LL * US_PER_SEC) /* 2026-01-01T00:00:00Z */
#define WAIT_MS 20000                   /* the longest a test waits for the worker */
#define POLL_MS 10

static tu_dir dir;

static void setup(void)
{
	tu_dir_make(&dir);
}

static void teardown(void)
{
	tu_dir_remove(&dir);
}

TestSuite(memory_extract, .init = setup, .fini = teardown, .timeout = 120);

/* ---- helpers ---------------------------------------------------------------- */

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* memd on dir's sqlite file with extra config (memory:, lanes:, ...). */
static memd *open_with(const char *extra)
{
	char yaml[4096];
	snprintf(yaml, sizeof(yaml), "stores:\n  main: {plugin: sqlite, path: %s/memd.db}\n%s",
		 dir.path, extra ? extra : "");
	return tu_open(&dir, yaml);
}

static void create(memd *m, const char *user, const char *sid)
{
	memd_error err = { 0 };
	char *out = NULL, body[128];
	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	tu_ok(memd_session_create(m, "app", user, body, &out, &err), &err, &out);
}

static void say(memd *m, const char *user, const char *sid, const char *role, const char *text)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *b = json_pack("{s:[{s:s,s:s}]}", "events", "role", role, "content", text);
	char *body = json_dumps(b, 0);
	tu_ok(memd_events_append(m, "app", user, sid, body, &out, &err), &err, &out);
	free(body);
	json_decref(b);
}

typedef struct seqs_got {
	int64_t memory_seq, last_seq;
} seqs_got;

static int32_t got_seqs(void *ud, const memd_session *s)
{
	seqs_got *g = ud;
	g->memory_seq = s->memory_seq;
	g->last_seq = s->last_seq;
	return 0;
}

static seqs_got seqs_of(memd *m, const char *user, const char *sid)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = { .struct_size = sizeof(sc), .app = "app", .user = user, .session = sid };
	memd_session_sink sink = { sizeof(sink), NULL, got_seqs };
	memd_error err = { 0 };
	seqs_got g = { -1, -1 };
	sink.userdata = &g;
	cr_assert_eq(store_session_get(service_session_store(m), &call, &sc, &sink, &err), 0, "%s",
		     err.msg);
	return g;
}

/* The user's memories, newest first: [{"id", "text", "version", "source",
 * "topics"}]. */
static int32_t got_memory(void *ud, const memd_memory *mm)
{
	json_array_append_new(ud, json_pack("{s:s,s:s,s:I,s:s,s:s,s:s}", "id", mm->id, "text",
					    mm->text, "version", (json_int_t)mm->version, "source",
					    mm->source_json ? mm->source_json : "", "topics",
					    mm->topics_json, "kind", mm->kind));
	return 0;
}

static json_t *memories_of(memd *m, const char *user)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = { .struct_size = sizeof(sc), .app = "app", .user = user };
	memd_memory_query q = { .struct_size = sizeof(q), .limit = 100, .now_us = T0 };
	json_t *a = json_array();
	memd_memory_sink sink = { sizeof(sink), a, got_memory };
	memd_error err = { 0 };
	cr_assert_eq(store_memory_list(service_session_store(m), &call, &sc, &q, &sink, &err), 0,
		     "%s", err.msg);
	return a;
}

/* The memory whose text is text, or NULL (borrowed from ms). */
static json_t *find_text(json_t *ms, const char *text)
{
	size_t i;
	json_t *x;
	json_array_foreach(ms, i, x)
		if (strcmp(json_string_value(json_object_get(x, "text")), text) == 0)
			return x;
	return NULL;
}

static int32_t count_change(void *ud, const memd_memory_change *c)
{
	char *ops = ud;
	strcat(ops, c->op == MEMD_MEM_ADD ? "a" : c->op == MEMD_MEM_UPDATE ? "u" : "d");
	cr_assert_str_eq(c->actor, "extractor");
	return 0;
}

/* The ops of a memory's history as letters ("au" = added, updated). */
static void history_of(memd *m, const char *user, const char *id, char *ops)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = { .struct_size = sizeof(sc), .app = "app", .user = user };
	memd_memory_change_sink sink = { sizeof(sink), ops, count_change };
	memd_error err = { 0 };
	ops[0] = '\0';
	cr_assert_eq(store_memory_history(service_session_store(m), &call, &sc, id, &sink, &err), 0,
		     "%s", err.msg);
}

static json_t *extract(memd *m, const char *user, const char *sid)
{
	memd_error err = { 0 };
	char *out = NULL;
	cr_assert_eq(memd_memory_extract(m, "app", user, sid, &out, &err), 0, "%s", err.msg);
	return tu_json(out);
}

static int ival(json_t *o, const char *k)
{
	return (int)json_integer_value(json_object_get(o, k));
}

/* Wait (bounded) until the worker has extracted sid up to its last seq. */
static void wait_extracted(memd *m, const char *user, const char *sid)
{
	for (int waited = 0;; waited += POLL_MS) {
		seqs_got g = seqs_of(m, user, sid);
		if (g.memory_seq == g.last_seq && g.last_seq > 0)
			return;
		cr_assert_lt(waited, WAIT_MS, "not extracted: memory_seq %lld of %lld",
			     (long long)g.memory_seq, (long long)g.last_seq);
		sleep_ms(POLL_MS);
	}
}

/* Wait (bounded) until the worker has nothing queued or running. */
static void wait_idle(memd *m)
{
	for (int waited = 0; service_memory_queued(m); waited += POLL_MS) {
		cr_assert_lt(waited, WAIT_MS, "the memory worker stays busy");
		sleep_ms(POLL_MS);
	}
}

static _Atomic int64_t now_us = T0;

static int64_t test_clock(void *ud)
{
	(void)ud;
	return atomic_load(&now_us);
}

/* ---- the stand-in ------------------------------------------------------------- */

static pid_t standin_pid;
static int standin_port;

static const char script[] =
	"[{\"match\": \"I live in (\\\\w+)\", \"text\": \"User lives in \\\\1\", \"topics\": "
	"[\"home\"], \"entities\": []},"
	" {\"match\": \"dog named (\\\\w+)\", \"text\": \"User has a dog named \\\\1\", \"topics\": "
	"[\"pet\"], \"entities\": []},"
	" {\"match\": \"allergic to (\\\\w+)\", \"text\": \"User is allergic to \\\\1\", \"topics\": "
	"[\"allergy\"], \"entities\": []},"
	" {\"match\": \"forget my allergy\", \"text\": \"FORGET allergy\", \"topics\": "
	"[\"allergy\"], \"entities\": []}]";

static void standin_start(void)
{
	int out[2];
	char path[1024], script_path[TU_PATH_MAX], line[64];
	const char *root = getenv("MEMD_SOURCE_ROOT");
	FILE *f;

	cr_assert(root, "MEMD_SOURCE_ROOT is not set: run through meson test");
	snprintf(path, sizeof(path), "%s/%s", root, STANDIN);
	tu_write_file(&dir, "script.json", script, script_path);
	cr_assert(pipe(out) == 0);
	standin_pid = fork();
	cr_assert(standin_pid >= 0);
	if (standin_pid == 0) {
		dup2(out[1], 1);
		close(out[0]);
		execlp("python3", "python3", path, "--script", script_path, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	f = fdopen(out[0], "r");
	cr_assert(fgets(line, sizeof(line), f), "the stand-in did not start");
	fclose(f);
	cr_assert(strncmp(line, "PORT ", 5) == 0);
	standin_port = atoi(line + 5);
	cr_assert(standin_port > 0);
}

static void standin_stop(void)
{
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

static json_t *standin(const char *method, const char *path)
{
	char url[128], *body = NULL;
	CURL *c = curl_easy_init();
	json_t *o;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", standin_port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
	if (strcmp(method, "POST") == 0)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{}");
	cr_assert_eq(curl_easy_perform(c), CURLE_OK);
	curl_easy_cleanup(c);
	o = json_loads(body, 0, NULL);
	free(body);
	cr_assert_not_null(o);
	return o;
}

static int stat_of(const char *key)
{
	json_t *o = standin("GET", "/stats");
	int n = ival(o, key);
	json_decref(o);
	return n;
}

static void assert_contract_kept(void)
{
	json_t *o = standin("GET", "/stats");
	char *p = json_dumps(json_object_get(o, "problems"), 0);
	cr_assert_eq(ival(o, "violations"), 0, "requests off the contract: %s", p);
	free(p);
	json_decref(o);
}

/* The memory: section for the openai extractor with model. */
static const char *openai_config(const char *model, char *buf, size_t cap)
{
	snprintf(buf, cap,
		 "memory:\n  sweep_interval_s: 0\n"
		 "  extract: {type: openai, url: 'http://127.0.0.1:%d/v1', model: %s, retries: 0,"
		 " timeout_ms: 60000, every_events: 0, idle_minutes: 0, on_finalize: false}\n",
		 standin_port, model);
	return buf;
}

/* ---- the built-in extractor, zero config ------------------------------------------ */

Test(memory_extract, builtin_conversation_over_sessions)
{
	memd *m = open_with(NULL); /* no memory: section: the built-in extractor */
	json_t *r, *ms, *home;
	char ops[16];

	create(m, "ana", "s1");
	say(m, "ana", "s1", "user", "Hi! My name is Ana. I live in Lisbon.");
	say(m, "ana", "s1", "assistant", "Nice to meet you. I live in the cloud.");
	say(m, "ana", "s1", "user", "Remember that I'm allergic to peanuts.");
	r = extract(m, "ana", "s1");
	cr_assert_eq(ival(r, "from_seq"), 0);
	cr_assert_eq(ival(r, "to_seq"), 3);
	cr_assert_eq(ival(r, "added"), 3);
	cr_assert_eq(json_array_size(json_object_get(r, "memories")), 3);
	cr_assert_str_eq(json_string_value(json_object_get(r, "session_id")), "s1");
	json_decref(r);
	ms = memories_of(m, "ana");
	cr_assert_eq(json_array_size(ms), 3);
	home = find_text(ms, "User lives in Lisbon");
	cr_assert_not_null(home);
	cr_assert_str_eq(json_string_value(json_object_get(home, "source")),
			 "{\"session_id\":\"s1\",\"seqs\":[1]}");
	cr_assert_not_null(find_text(ms, "User's name is Ana"));
	cr_assert_not_null(find_text(ms, "User is allergic to peanuts"));
	json_decref(ms);
	cr_assert_eq(seqs_of(m, "ana", "s1").memory_seq, 3);

	/* Nothing unread: nothing done. */
	r = extract(m, "ana", "s1");
	cr_assert_eq(ival(r, "from_seq"), 3);
	cr_assert_eq(ival(r, "to_seq"), 3);
	cr_assert_eq(ival(r, "added") + ival(r, "updated") + ival(r, "unchanged"), 0);
	json_decref(r);

	/* A later session: a repeated fact merges, a contradiction updates. */
	create(m, "ana", "s2");
	say(m, "ana", "s2", "user", "Hello again. My name is Ana.");
	say(m, "ana", "s2", "user", "I moved! I live in Porto now");
	say(m, "ana", "s2", "user", "I prefer window seats.");
	r = extract(m, "ana", "s2");
	cr_assert_eq(ival(r, "unchanged"), 1);
	cr_assert_eq(ival(r, "updated"), 1);
	cr_assert_eq(ival(r, "added"), 1);
	json_decref(r);
	ms = memories_of(m, "ana");
	cr_assert_eq(json_array_size(ms), 4, "the repeated name is not a new memory");
	cr_assert_null(find_text(ms, "User lives in Lisbon"));
	home = find_text(ms, "User lives in Porto now");
	cr_assert_not_null(home);
	cr_assert_eq(ival(home, "version"), 2);
	cr_assert_str_eq(json_string_value(json_object_get(home, "source")),
			 "{\"session_id\":\"s2\",\"seqs\":[2]}");
	history_of(m, "ana", json_string_value(json_object_get(home, "id")), ops);
	cr_assert_str_eq(ops, "au", "the history keeps Lisbon and Porto");

	/* forget deletes. */
	{
		char *allergy = strdup(json_string_value(
			json_object_get(find_text(ms, "User is allergic to peanuts"), "id")));
		json_decref(ms);
		create(m, "ana", "s3");
		say(m, "ana", "s3", "user", "Please forget that I'm allergic to peanuts.");
		r = extract(m, "ana", "s3");
		cr_assert_eq(ival(r, "deleted"), 1);
		json_decref(r);
		ms = memories_of(m, "ana");
		cr_assert_eq(json_array_size(ms), 3);
		cr_assert_null(find_text(ms, "User is allergic to peanuts"));
		history_of(m, "ana", allergy, ops);
		cr_assert_str_eq(ops, "ad");
		free(allergy);
	}
	json_decref(ms);
	memd_close(m);
}

Test(memory_extract, batches_of_batch_events_and_unknown_session)
{
	memd *m = open_with("memory:\n  sweep_interval_s: 0\n"
			    "  extract: {batch_events: 2, every_events: 0, idle_minutes: 0}\n");
	memd_error err = { 0 };
	char *out = NULL;
	json_t *r, *ms;

	create(m, "bo", "s");
	say(m, "bo", "s", "user", "my car is red");
	say(m, "bo", "s", "user", "my bike is blue");
	say(m, "bo", "s", "user", "my boat is green");
	r = extract(m, "bo", "s");
	cr_assert_eq(ival(r, "to_seq"), 3);
	cr_assert_eq(ival(r, "added"), 3, "two batches (2 + 1 events), every fact once");
	json_decref(r);
	ms = memories_of(m, "bo");
	cr_assert_str_eq(json_string_value(json_object_get(find_text(ms, "User's boat is green"),
							     "source")),
			 "{\"session_id\":\"s\",\"seqs\":[3]}");
	json_decref(ms);
	cr_assert_eq(memd_memory_extract(m, "app", "bo", "nope", &out, &err), MEMD_ENOTFOUND);
	cr_assert_null(out);
	/* The counters in /metrics. */
	cr_assert_eq(memd_metrics_text(m, &out, &err), 0, "%s", err.msg);
	cr_assert(strstr(out, "memd_memory_extract_batches_total 2\n"), "%s", out);
	cr_assert(strstr(out, "memd_memories_extracted_total{op=\"add\"} 3\n"));
	cr_assert(strstr(out, "memd_memory_extract_failures_total 0\n"),
		  "an unknown session is no failure of extraction");
	memd_free(out);
	memd_close(m);
}

/* ---- triggers ---------------------------------------------------------------------- */

Test(memory_extract, every_events_after_appends)
{
	memd *m = open_with("memory:\n  sweep_interval_s: 0\n"
			    "  extract: {every_events: 3, idle_minutes: 0, on_finalize: false}\n");

	create(m, "cy", "s");
	say(m, "cy", "s", "user", "I live in Oslo");
	say(m, "cy", "s", "assistant", "Noted.");
	wait_idle(m);
	cr_assert_eq(seqs_of(m, "cy", "s").memory_seq, 0, "two unread events are not enough");
	say(m, "cy", "s", "user", "I work at Equinor");
	wait_extracted(m, "cy", "s");
	{
		json_t *ms = memories_of(m, "cy");
		cr_assert_eq(json_array_size(ms), 2);
		json_decref(ms);
	}
	memd_close(m);
}

Test(memory_extract, idle_sessions_by_the_clock)
{
	memd *m = open_with("memory:\n  sweep_interval_s: 0\n"
			    "  extract: {every_events: 0, idle_minutes: 30, on_finalize: false}\n"
			    "apps:\n  quiet:\n    working_memory: {strategy: all}\n"
			    "    memory: {extract: {idle_minutes: 0}}\n");
	memd_error err = { 0 };
	char *out = NULL;
	json_t *r;

	atomic_store(&now_us, T0);
	memd_set_clock(m, test_clock, NULL);
	create(m, "di", "s");
	say(m, "di", "s", "user", "I prefer aisle seats");
	cr_assert_eq(memd_memories_sweep(m, &out, &err), 0, "%s", err.msg);
	r = tu_json(out);
	cr_assert_eq(ival(r, "sessions_extracted"), 0);
	json_decref(r);
	atomic_store(&now_us, T0 + 29 * US_PER_MIN);
	cr_assert_eq(memd_memories_sweep(m, &out, &err), 0, "%s", err.msg);
	r = tu_json(out);
	cr_assert_eq(ival(r, "sessions_extracted"), 0, "idle 29 of 30 minutes");
	json_decref(r);
	cr_assert_eq(seqs_of(m, "di", "s").memory_seq, 0);
	atomic_store(&now_us, T0 + 31 * US_PER_MIN);
	cr_assert_eq(memd_memories_sweep(m, &out, &err), 0, "%s", err.msg);
	r = tu_json(out);
	cr_assert_eq(ival(r, "sessions_extracted"), 1);
	cr_assert_eq(ival(r, "extract_failed"), 0);
	json_decref(r);
	cr_assert_eq(seqs_of(m, "di", "s").memory_seq, 1);
	cr_assert_eq(memd_memories_sweep(m, &out, &err), 0, "%s", err.msg);
	r = tu_json(out);
	cr_assert_eq(ival(r, "sessions_extracted"), 0, "nothing unread any more");
	json_decref(r);
	memd_close(m);
}

Test(memory_extract, finalized_lane_session)
{
	memd *m = open_with("lanes:\n  reset: {mode: idle, idle_minutes: 60}\n"
			    "memory:\n  sweep_interval_s: 0\n"
			    "  extract: {every_events: 0, idle_minutes: 0, on_finalize: true}\n");
	memd_error err = { 0 };
	char *out = NULL, sid[128];
	json_t *r;

	atomic_store(&now_us, T0);
	memd_set_clock(m, test_clock, NULL);
	cr_assert_eq(memd_lane_open(m, "app", "ed", "dm", "{}", &out, &err), 0, "%s", err.msg);
	r = tu_json(out);
	snprintf(sid, sizeof(sid), "%s",
		 json_string_value(json_object_get(json_object_get(r, "session"), "id")));
	json_decref(r);
	say(m, "ed", sid, "user", "my dog is called Rex");
	wait_idle(m);
	cr_assert_eq(seqs_of(m, "ed", sid).memory_seq, 0);
	atomic_store(&now_us, T0 + 61 * US_PER_MIN);
	cr_assert_eq(memd_lanes_sweep(m, &out, &err), 0, "%s", err.msg);
	r = tu_json(out);
	cr_assert_eq(ival(r, "finalized"), 1);
	json_decref(r);
	wait_extracted(m, "ed", sid);
	r = memories_of(m, "ed");
	cr_assert_not_null(find_text(r, "User's dog is called Rex"));
	json_decref(r);
	memd_close(m);
}

/* ---- the openai extractor on the stand-in ------------------------------------------- */

Test(memory_extract, openai_scripted_consolidation, .fini = standin_stop)
{
	char cfg[512];
	memd *m;
	json_t *r, *ms;
	char ops[16];

	standin_start();
	m = open_with(openai_config("scripted", cfg, sizeof(cfg)));
	create(m, "fa", "s1");
	say(m, "fa", "s1", "user", "I live in Lisbon and I am allergic to cats");
	say(m, "fa", "s1", "user", "I have a dog named Rex");
	r = extract(m, "fa", "s1");
	cr_assert_eq(ival(r, "added"), 3);
	json_decref(r);
	cr_assert_eq(stat_of("memory_decisions"), 0, "nothing near: no consolidation call");
	create(m, "fa", "s2");
	say(m, "fa", "s2", "user", "I live in Porto. I have a dog named Rex. Please forget my allergy");
	r = extract(m, "fa", "s2");
	cr_assert_eq(ival(r, "updated"), 1);
	cr_assert_eq(ival(r, "unchanged"), 1);
	cr_assert_eq(ival(r, "deleted"), 1);
	json_decref(r);
	cr_assert_eq(stat_of("memory_decisions"), 1);
	ms = memories_of(m, "fa");
	cr_assert_eq(json_array_size(ms), 2);
	cr_assert_not_null(find_text(ms, "User has a dog named Rex"));
	history_of(m, "fa", json_string_value(json_object_get(find_text(ms, "User lives in Porto"),
							      "id")),
		   ops);
	cr_assert_str_eq(ops, "au");
	json_decref(ms);
	assert_contract_kept();
	memd_close(m);
}

Test(memory_extract, a_failing_endpoint_moves_nothing, .fini = standin_stop)
{
	static const char *const models[] = { "error500", "garbage", "badschema" };
	char cfg[512];

	standin_start();
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		memd *m = open_with(openai_config(models[i], cfg, sizeof(cfg)));
		memd_error err = { 0 };
		char *out = NULL, user[32];
		json_t *ms;
		snprintf(user, sizeof(user), "u%zu", i);
		create(m, user, "s");
		say(m, user, "s", "user", "I live in Lisbon");
		cr_assert_lt(memd_memory_extract(m, "app", user, "s", &out, &err), 0, "%s",
			     models[i]);
		cr_assert_null(out);
		cr_assert(err.flags & MEMD_ERROR_RETRYABLE, "%s: %s", models[i], err.msg);
		cr_assert_eq(seqs_of(m, user, "s").memory_seq, 0, "%s", models[i]);
		say(m, user, "s", "user", "appends go on");
		cr_assert_eq(seqs_of(m, user, "s").last_seq, 2);
		ms = memories_of(m, user);
		cr_assert_eq(json_array_size(ms), 0);
		json_decref(ms);
		memd_close(m);
	}
	cr_assert_geq(stat_of("error500"), 1);
	assert_contract_kept();
}

/* A child process: memd_memory_extract of (app, gi, s), held by the
 * stand-in in its consolidation call until killed. */
static void extract_in_child(const char *cfg)
{
	memd *m = open_with(cfg);
	memd_error err = { 0 };
	char *out = NULL;
	memd_memory_extract(m, "app", "gi", "s", &out, &err);
	_exit(0);
}

Test(memory_extract, a_process_killed_mid_batch_extracts_nothing_twice, .fini = standin_stop)
{
	char cfg[512], held[512];
	memd *m;
	json_t *r, *ms;
	pid_t child;

	standin_start();
	openai_config("scripted", cfg, sizeof(cfg));
	openai_config("hold", held, sizeof(held));
	m = open_with(cfg);
	create(m, "gi", "s");
	say(m, "gi", "s", "user", "I live in Lisbon");
	json_decref(extract(m, "gi", "s"));
	say(m, "gi", "s", "user", "I live in Porto");
	say(m, "gi", "s", "user", "I have a dog named Rex");
	memd_close(m);

	child = fork();
	cr_assert(child >= 0);
	if (child == 0)
		extract_in_child(held);
	for (int waited = 0; stat_of("holding") < 1; waited += POLL_MS) {
		cr_assert_lt(waited, WAIT_MS, "the child's consolidation call never came");
		sleep_ms(POLL_MS);
	}
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	json_decref(standin("POST", "/release"));

	m = open_with(cfg);
	cr_assert_eq(seqs_of(m, "gi", "s").memory_seq, 1, "the killed batch left nothing");
	r = extract(m, "gi", "s");
	cr_assert_eq(ival(r, "from_seq"), 1);
	cr_assert_eq(ival(r, "to_seq"), 3);
	cr_assert_eq(ival(r, "updated"), 1);
	cr_assert_eq(ival(r, "added"), 1);
	json_decref(r);
	r = extract(m, "gi", "s");
	cr_assert_eq(ival(r, "added") + ival(r, "updated"), 0);
	json_decref(r);
	ms = memories_of(m, "gi");
	cr_assert_eq(json_array_size(ms), 2);
	cr_assert_eq(ival(find_text(ms, "User lives in Porto"), "version"), 2);
	json_decref(ms);
	assert_contract_kept();
	memd_close(m);
}

typedef struct racer {
	memd *m;
	json_t *result;
	int32_t rc;
	char msg[MEMD_ERROR_MSG_MAX];
} racer;

static void *race(void *arg)
{
	racer *rc = arg;
	memd_error err = { 0 };
	char *out = NULL;
	rc->rc = memd_memory_extract(rc->m, "app", "ha", "s", &out, &err);
	snprintf(rc->msg, sizeof(rc->msg), "%s", err.msg);
	rc->result = rc->rc == 0 ? json_loads(out, 0, NULL) : NULL;
	memd_free(out);
	return NULL;
}

Test(memory_extract, two_handles_racing_extract_each_batch_once, .fini = standin_stop)
{
	char cfg[512];
	racer a = { 0 }, b = { 0 };
	pthread_t ta, tb;
	json_t *ms;

	standin_start();
	openai_config("holdall", cfg, sizeof(cfg));
	a.m = open_with(cfg);
	b.m = open_with(cfg);
	create(a.m, "ha", "s");
	say(a.m, "ha", "s", "user", "I live in Lisbon");
	say(a.m, "ha", "s", "user", "I have a dog named Rex");
	pthread_create(&ta, NULL, race, &a);
	pthread_create(&tb, NULL, race, &b);
	for (int waited = 0; stat_of("holding") < 2; waited += POLL_MS) {
		cr_assert_lt(waited, WAIT_MS, "both handles should be in their extraction call");
		sleep_ms(POLL_MS);
	}
	json_decref(standin("POST", "/release"));
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	cr_assert_eq(a.rc, 0, "%s", a.msg);
	cr_assert_eq(b.rc, 0, "%s", b.msg);
	cr_assert_eq(ival(a.result, "added") + ival(b.result, "added"), 2,
		     "one handle committed the batch, the other found it done");
	cr_assert_eq(ival(a.result, "to_seq"), 2);
	cr_assert_eq(ival(b.result, "to_seq"), 2);
	ms = memories_of(a.m, "ha");
	cr_assert_eq(json_array_size(ms), 2);
	json_decref(ms);
	json_decref(a.result);
	json_decref(b.result);
	assert_contract_kept();
	memd_close(a.m);
	memd_close(b.m);
}

Test(memory_extract, a_failing_session_backs_off_by_the_clock, .fini = standin_stop)
{
	char cfg[512];
	memd *m;

	standin_start();
	snprintf(cfg, sizeof(cfg),
		 "memory:\n  sweep_interval_s: 0\n"
		 "  extract: {type: openai, url: 'http://127.0.0.1:%d/v1', model: error500, retries: 0,"
		 " every_events: 1, idle_minutes: 0, on_finalize: false}\n",
		 standin_port);
	m = open_with(cfg);
	atomic_store(&now_us, T0);
	memd_set_clock(m, test_clock, NULL);
	create(m, "ji", "s");
	say(m, "ji", "s", "user", "I live in Lisbon");
	wait_idle(m);
	cr_assert_eq(stat_of("error500"), 1, "the first unread event was tried");
	cr_assert_eq(seqs_of(m, "ji", "s").memory_seq, 0);
	/* Within the first backoff (30 s): appends do not try again. */
	atomic_store(&now_us, T0 + 29 * US_PER_SEC);
	say(m, "ji", "s", "user", "I have a dog named Rex");
	wait_idle(m);
	cr_assert_eq(stat_of("error500"), 1, "backing off");
	/* After it: tried again, and the next wait is twice as long. */
	atomic_store(&now_us, T0 + 31 * US_PER_SEC);
	say(m, "ji", "s", "user", "I work at Acme");
	wait_idle(m);
	cr_assert_eq(stat_of("error500"), 2);
	atomic_store(&now_us, T0 + 31 * US_PER_SEC + 59 * US_PER_SEC);
	say(m, "ji", "s", "user", "and more");
	wait_idle(m);
	cr_assert_eq(stat_of("error500"), 2, "the second backoff is 60 s");
	atomic_store(&now_us, T0 + 31 * US_PER_SEC + 61 * US_PER_SEC);
	say(m, "ji", "s", "user", "and more again");
	wait_idle(m);
	cr_assert_eq(stat_of("error500"), 3);
	cr_assert_eq(seqs_of(m, "ji", "s").memory_seq, 0, "nothing moved");
	assert_contract_kept();
	memd_close(m);
}

static char *stat_str(const char *key, const char *sub)
{
	json_t *o = standin("GET", "/stats"), *v = json_object_get(o, key);
	char *s;
	if (sub)
		v = json_object_get(v, sub);
	s = json_is_string(v) ? strdup(json_string_value(v)) : NULL;
	json_decref(o);
	return s;
}

Test(memory_extract, openai_prompts_api_key_and_retries, .fini = standin_stop)
{
	char cfg[1024], *s;
	memd *m;
	json_t *r;

	standin_start();
	snprintf(cfg, sizeof(cfg),
		 "memory:\n  sweep_interval_s: 0\n"
		 "  extract: {type: openai, url: 'http://127.0.0.1:%d/v1', model: flaky429, retries: 2,"
		 " api_key: k-123, prompt: EXTRACT-P, consolidate_prompt: CONSOLIDATE-P,"
		 " every_events: 0, idle_minutes: 0, on_finalize: false}\n",
		 standin_port);
	m = open_with(cfg);
	create(m, "ki", "s1");
	say(m, "ki", "s1", "user", "I live in Lisbon");
	json_decref(extract(m, "ki", "s1"));
	create(m, "ki", "s2");
	say(m, "ki", "s2", "user", "I live in Porto");
	r = extract(m, "ki", "s2");
	cr_assert_eq(ival(r, "updated"), 1, "every call was answered 429 once, then retried");
	json_decref(r);
	cr_assert_eq(stat_of("flaky429"), 6);
	s = stat_str("system", "memory_facts");
	cr_assert_str_eq(s, "EXTRACT-P");
	free(s);
	s = stat_str("system", "memory_decisions");
	cr_assert_str_eq(s, "CONSOLIDATE-P");
	free(s);
	s = stat_str("authorization", NULL);
	cr_assert_str_eq(s, "Bearer k-123");
	free(s);
	memd_close(m);

	/* No api_key: $OPENAI_API_KEY; no prompt: the built-in ones. */
	setenv("OPENAI_API_KEY", "env-key", 1);
	m = open_with(openai_config("scripted", cfg, sizeof(cfg)));
	create(m, "ki", "s3");
	say(m, "ki", "s3", "user", "I have a dog named Rex");
	json_decref(extract(m, "ki", "s3"));
	s = stat_str("authorization", NULL);
	cr_assert_str_eq(s, "Bearer env-key");
	free(s);
	s = stat_str("system", "memory_facts");
	cr_assert(strstr(s, "long-term memories"), "%s", s);
	free(s);
	assert_contract_kept();
	memd_close(m);
}

Test(memory_extract, a_decision_on_a_memory_not_shown_fails_the_batch, .fini = standin_stop)
{
	char cfg[512];
	memd *m;
	memd_error err = { 0 };
	char *out = NULL;
	json_t *r, *ms;

	standin_start();
	m = open_with(openai_config("scripted", cfg, sizeof(cfg)));
	create(m, "li", "s");
	say(m, "li", "s", "user", "I live in Lisbon");
	json_decref(extract(m, "li", "s"));
	say(m, "li", "s", "user", "I live in Porto. I have a dog named Rex");
	memd_close(m);

	m = open_with(openai_config("badid", cfg, sizeof(cfg)));
	cr_assert_eq(memd_memory_extract(m, "app", "li", "s", &out, &err), MEMD_EIO, "%s", err.msg);
	cr_assert(strstr(err.msg, "was not shown"), "%s", err.msg);
	cr_assert(err.flags & MEMD_ERROR_RETRYABLE);
	cr_assert_eq(seqs_of(m, "li", "s").memory_seq, 1, "nothing of the batch applied");
	ms = memories_of(m, "li");
	cr_assert_eq(json_array_size(ms), 1, "not even the new dog");
	json_decref(ms);
	memd_close(m);

	m = open_with(openai_config("scripted", cfg, sizeof(cfg)));
	r = extract(m, "li", "s");
	cr_assert_eq(ival(r, "updated"), 1);
	cr_assert_eq(ival(r, "added"), 1);
	json_decref(r);
	assert_contract_kept();
	memd_close(m);
}
