/* SPDX-License-Identifier: MIT */
/*
 * Index rebuilds as background jobs over real HTTP (`memd serve` through
 * tests/http's harness, every response checked against api/openapi.yaml):
 * POST .../index:rebuild answers 202 with a job at once, and while the
 * job is observably running /healthz on keep-alive connections answers
 * promptly (no request thread holds the rebuild), so does another
 * user's search (seeing a write made meanwhile), and the rebuilt user's
 * search is refused with a retryable 503; the job's lifecycle (queued,
 * running, succeeded with progress reaching total, search working
 * after); a second request for the same user returns the running job;
 * canceling a running and a queued job (the index is whole after);
 * unknown and other apps' jobs are 404; key scopes; SIGTERM with a job
 * running exits cleanly; finished jobs past the bound are forgotten.
 *
 * To observe a job mid-way without racing it, memd runs with the
 * test-only hold (jobs.h: MEMD_TEST_JOB_HOLD names a file; a running job
 * waits at each progress report while it exists): the test creates the
 * file, sees the job running with progress.done < total, does what it
 * needs, and removes the file to let the job go on.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define KEY_R "jobs-test-read-key-0123456789abcdef"
#define KEY_W "jobs-test-write-key-0123456789abcdef"
#define KEY_A "jobs-test-admin-key-0123456789abcdef"
/* Admin keys limited to one app: this test's, and another. */
#define KEY_THIS "jobs-test-this-app-key-0123456789abcd"
#define KEY_OTHER "jobs-test-other-app-key-0123456789abc"
#define KEYS_YAML                                                   \
	"  api_keys:\n"                                             \
	"    - {key: " KEY_R ", scope: read}\n"                     \
	"    - {key: " KEY_W ", scope: write}\n"                    \
	"    - {key: " KEY_A ", scope: admin}\n"                    \
	"    - {key: " KEY_THIS ", scope: admin, apps: [app]}\n"    \
	"    - {key: " KEY_OTHER ", scope: admin, apps: [other]}\n"
#define VECTOR_YAML                                               \
	"  vec: {plugin: filevec, path: vec}\n"                  \
	"index:\n"                                               \
	"  vector: {enabled: true, store: vec, embedder: {dim: 64}}\n"
#define BASE "/v1/apps/app/users/"
#define JOBS "/v1/apps/app/jobs"
/* More events than one page of a rebuild (INDEX_REBUILD_PAGE), so that
 * the first progress report, where the hold stops the job, comes with
 * done < total: after the first page. */
#define EVENTS 600
#define REBUILD_PAGE 256
#define BATCH 200
/* Keep-alive connections probing /healthz, and how fast each must answer
 * while the rebuild runs. */
#define CONNS 48
#define HEALTHZ_BOUND_MS 1000
/* How long a test waits for a job to reach a state, polling. */
#define WAIT_MS 30000
#define POLL_MS 10
/* Finished jobs kept (JOBS_KEEP_FINISHED). */
#define KEEP_FINISHED 64
#define MS_PER_SEC 1000
#define NS_PER_MS 1000000L

static hs H;
static char hold_dir[] = "/tmp/memd-jobs-test-XXXXXX";
static char hold_file[sizeof(hold_dir) + 16];
static const char *const admin[] = { "Authorization: Bearer " KEY_A, NULL };
static const char *const writer[] = { "Authorization: Bearer " KEY_W, NULL };
static const char *const reader[] = { "Authorization: Bearer " KEY_R, NULL };
static const char *const this_app[] = { "Authorization: Bearer " KEY_THIS, NULL };
static const char *const other_app[] = { "Authorization: Bearer " KEY_OTHER, NULL };

static void hold(int on)
{
	if (on) {
		FILE *f = fopen(hold_file, "w");
		cr_assert_not_null(f, "cannot create %s", hold_file);
		fclose(f);
	} else {
		cr_assert_eq(unlink(hold_file), 0, "cannot remove %s", hold_file);
	}
}

/* memd with the hold pointed at hold_file (held from the start). */
static void start(const char *server_yaml, const char *extra_yaml)
{
	cr_assert_not_null(mkdtemp(hold_dir));
	snprintf(hold_file, sizeof(hold_file), "%s/hold", hold_dir);
	hold(1);
	cr_assert_eq(setenv("MEMD_TEST_JOB_HOLD", hold_file, 1), 0);
	hs_start(&H, server_yaml, extra_yaml);
	unsetenv("MEMD_TEST_JOB_HOLD");
}

static void teardown(void)
{
	hs_finish(&H);
	unlink(hold_file);
	rmdir(hold_dir);
}

TestSuite(jobs, .fini = teardown, .timeout = 120);

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / MS_PER_SEC, (ms % MS_PER_SEC) * NS_PER_MS };
	nanosleep(&ts, NULL);
}

/* One request with headers (NULL = none), asserting the status; returns
 * the JSON body (owned). */
static json_t *call(const char *method, const char *path, const char *const *hdr, const char *body,
		    long status)
{
	hs_resp r = { 0 };
	json_t *o;

	hs_req(&H, method, path, hdr, body, body ? strlen(body) : 0, &r);
	cr_assert_eq(r.status, status, "%s %s: %ld, want %ld: %s", method, path, r.status, status,
		     r.body);
	o = json_incref(r.json);
	hs_resp_clear(&r);
	return o;
}

/* EVENTS events in session sid of user. */
static void fill(const char *user, const char *sid, const char *const *hdr)
{
	char path[256], body[64];

	snprintf(path, sizeof(path), BASE "%s/sessions", user);
	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	json_decref(call("POST", path, hdr, body, 201));
	snprintf(path, sizeof(path), BASE "%s/sessions/%s/events", user, sid);
	for (int b = 0; b < EVENTS / BATCH; b++) {
		json_t *events = json_array(), *req;
		char *text;
		for (int i = 0; i < BATCH; i++) {
			char content[96];
			snprintf(content, sizeof(content), "heron pond note %d", b * BATCH + i);
			json_array_append_new(events, json_pack("{s:s,s:s}", "role", "user", "content",
								content));
		}
		req = json_pack("{s:o}", "events", events);
		text = json_dumps(req, JSON_COMPACT);
		json_decref(call("POST", path, hdr, text, 200));
		free(text);
		json_decref(req);
	}
}

static const char *str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	cr_assert_not_null(s, "no string %s", key);
	return s;
}

static json_int_t progress(json_t *job, const char *key)
{
	return json_integer_value(json_object_get(json_object_get(job, "progress"), key));
}

/* POST index:rebuild of user, asserting status (202 new, 200 existing)
 * and the Location header; returns the job. */
static json_t *rebuild(const char *user, long status)
{
	char path[256], loc[256];
	hs_resp r = { 0 };
	json_t *job;

	snprintf(path, sizeof(path), BASE "%s/index:rebuild", user);
	hs_req(&H, "POST", path, admin, NULL, 0, &r);
	cr_assert_eq(r.status, status, "rebuild of %s: %ld, want %ld: %s", user, r.status, status,
		     r.body);
	job = json_incref(r.json);
	cr_assert_str_eq(str(job, "kind"), "index_rebuild");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(job, "scope"), "user")),
			 user);
	snprintf(loc, sizeof(loc), JOBS "/%s", str(job, "id"));
	cr_assert_not_null(hs_header(&r, "Location"));
	cr_assert_str_eq(hs_header(&r, "Location"), loc);
	hs_resp_clear(&r);
	return job;
}

static json_t *get_job(const char *id)
{
	char path[256];
	snprintf(path, sizeof(path), JOBS "/%s", id);
	return call("GET", path, writer, NULL, 200);
}

/* Poll job id until its state is state (and, for "running", until it is
 * mid-way: 0 < done < total); returns it. */
static json_t *wait_job(const char *id, const char *state)
{
	int64_t until = hs_now_ms() + WAIT_MS;

	for (;;) {
		json_t *job = get_job(id);
		int there = strcmp(str(job, "state"), state) == 0;
		if (there && strcmp(state, "running") == 0)
			there = progress(job, "done") > 0 && progress(job, "done") < progress(job, "total");
		if (there)
			return job;
		cr_assert_lt(hs_now_ms(), until, "job %s: still %s (done %lld of %lld), want %s", id,
			     str(job, "state"), (long long)progress(job, "done"),
			     (long long)progress(job, "total"), state);
		json_decref(job);
		sleep_ms(POLL_MS);
	}
}

static size_t hits(const char *user, const char *const *hdr)
{
	char path[256];
	json_t *res;
	size_t n;

	snprintf(path, sizeof(path), BASE "%s/search", user);
	res = call("POST", path, hdr, "{\"query\":\"heron\",\"k\":1000}", 200);
	n = json_array_size(json_object_get(res, "results"));
	json_decref(res);
	return n;
}

static size_t hits_mode(const char *user, const char *mode)
{
	char path[256], body[96];
	json_t *res;
	size_t n;

	snprintf(path, sizeof(path), BASE "%s/search", user);
	snprintf(body, sizeof(body), "{\"query\":\"heron\",\"k\":1000,\"mode\":\"%s\"}", mode);
	res = call("POST", path, NULL, body, 200);
	n = json_array_size(json_object_get(res, "results"));
	json_decref(res);
	return n;
}

Test(jobs, healthz_answers_promptly_while_a_rebuild_runs)
{
	CURL *conns[CONNS];
	json_t *job, *again, *list;
	int64_t worst = 0;
	char id[64];

	start(NULL, VECTOR_YAML);
	fill("big", "s1", NULL);
	fill("other", "s1", NULL);
	for (int i = 0; i < CONNS; i++) {
		hs_resp r = { 0 };
		conns[i] = hs_curl();
		hs_req_on(&H, conns[i], "GET", "/healthz", NULL, NULL, 0, &r);
		cr_assert_eq(r.status, 200);
		hs_resp_clear(&r);
	}

	/* Answered at once, queued: the rebuild runs off the request thread. */
	job = rebuild("big", 202);
	cr_assert_str_eq(str(job, "state"), "queued");
	cr_assert(json_is_null(json_object_get(job, "started")));
	snprintf(id, sizeof(id), "%s", str(job, "id"));
	json_decref(job);

	/* Units are events times indexes (keyword and vector); held after
	 * the first page, both indexes have it. */
	job = wait_job(id, "running");
	cr_assert_eq(progress(job, "total"), 2 * EVENTS);
	cr_assert_eq(progress(job, "done"), 2 * REBUILD_PAGE);
	json_decref(job);
	/* Observably running: every keep-alive connection answers /healthz
	 * within the bound. */
	for (int i = 0; i < CONNS; i++) {
		hs_resp r = { 0 };
		int64_t t0 = hs_now_ms(), took;
		hs_req_on(&H, conns[i], "GET", "/healthz", NULL, NULL, 0, &r);
		took = hs_now_ms() - t0;
		cr_assert_eq(r.status, 200);
		cr_assert_lt(took, HEALTHZ_BOUND_MS, "connection %d: /healthz took %lld ms during the rebuild",
			     i, (long long)took);
		worst = took > worst ? took : worst;
		hs_resp_clear(&r);
	}
	cr_log_info("slowest /healthz of %d keep-alive connections during the rebuild: %lld ms", CONNS,
		    (long long)worst);
	job = get_job(id);
	cr_assert_str_eq(str(job, "state"), "running", "still running while probed");
	json_decref(job);

	/* Never two rebuilds of one index: the running job is the answer. */
	again = rebuild("big", 200);
	cr_assert_str_eq(str(again, "id"), id);
	json_decref(again);
	list = call("GET", JOBS, NULL, NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(list, "jobs")), 1);
	cr_assert_str_eq(str(json_array_get(json_object_get(list, "jobs"), 0), "id"), id);
	json_decref(list);

	/* Another user's search sees that user's write made during the
	 * rebuild without waiting for the rebuild; the rebuilt user's is
	 * refused (503, retryable) rather than answered from entries that are
	 * incomplete until the rebuild is done, or held until then. */
	{
		int64_t t0, took;
		hs_resp r = { 0 };
		const char *body = "{\"query\":\"heron\",\"k\":1000}";

		json_decref(call("POST", BASE "other/sessions/s1/events", NULL,
				 "{\"events\":[{\"role\":\"user\",\"content\":\"heron late\"}]}", 200));
		t0 = hs_now_ms();
		cr_assert_eq(hits("other", NULL), EVENTS + 1);
		took = hs_now_ms() - t0;
		cr_assert_lt(took, HEALTHZ_BOUND_MS, "another user's search took %lld ms during the rebuild",
			     (long long)took);
		hs_req(&H, "POST", BASE "big/search", NULL, body, strlen(body), &r);
		cr_assert_eq(r.status, 503, "the rebuilt user's search: %ld %s", r.status, r.body);
		cr_assert_str_eq(hs_error_code(&r), "unavailable");
		cr_assert(json_is_true(json_object_get(json_object_get(r.json, "error"), "retryable")));
		cr_assert_not_null(hs_header(&r, "Retry-After"));
		hs_resp_clear(&r);
	}

	hold(0);
	job = wait_job(id, "succeeded");
	cr_assert_eq(progress(job, "done"), 2 * EVENTS);
	cr_assert_eq(progress(job, "total"), 2 * EVENTS);
	cr_assert(json_is_string(json_object_get(job, "started")));
	cr_assert(json_is_string(json_object_get(job, "finished")));
	cr_assert_null(json_object_get(job, "error"));
	json_decref(job);
	cr_assert_eq(hits("big", NULL), EVENTS, "search works after the rebuild");
	cr_assert_eq(hits_mode("big", "vector"), EVENTS);

	/* Finished: a new request starts a new job. */
	job = rebuild("big", 202);
	cr_assert_str_neq(str(job, "id"), id);
	json_decref(wait_job(str(job, "id"), "succeeded"));
	json_decref(job);
	for (int i = 0; i < CONNS; i++)
		curl_easy_cleanup(conns[i]);
}

Test(jobs, cancel_scopes_and_unknown_jobs)
{
	json_t *job, *queued, *list;
	char id[64], path[256];

	start(KEYS_YAML, NULL);
	fill("alice", "s1", admin);
	fill("bob", "s1", admin);

	job = rebuild("alice", 202);
	snprintf(id, sizeof(id), "%s", str(job, "id"));
	json_decref(job);
	json_decref(wait_job(id, "running"));

	/* One job at a time: bob's waits, queued, and is canceled at once. */
	queued = rebuild("bob", 202);
	snprintf(path, sizeof(path), JOBS "/%s", str(queued, "id"));
	json_decref(queued);
	queued = call("DELETE", path, admin, NULL, 200);
	cr_assert_str_eq(str(queued, "state"), "canceled");
	cr_assert(json_is_null(json_object_get(queued, "started")));
	cr_assert_str_eq(str(json_object_get(queued, "error"), "code"), "canceled");
	json_decref(queued);

	/* Scopes: reading a job needs write, canceling admin; another app's
	 * path does not find it; unknown ids are 404. */
	snprintf(path, sizeof(path), JOBS "/%s", id);
	json_decref(call("GET", path, reader, NULL, 403));
	json_decref(call("GET", path, NULL, NULL, 401));
	json_decref(call("GET", path, writer, NULL, 200));
	json_decref(call("GET", path, admin, NULL, 200));
	json_decref(call("DELETE", path, writer, NULL, 403));
	/* A key limited to the app reaches its jobs; one limited to another
	 * app does not, under either app's path. */
	json_decref(call("GET", path, this_app, NULL, 200));
	json_decref(call("GET", JOBS, this_app, NULL, 200));
	json_decref(call("GET", path, other_app, NULL, 403));
	json_decref(call("GET", JOBS, other_app, NULL, 403));
	json_decref(call("DELETE", path, other_app, NULL, 403));
	snprintf(path, sizeof(path), "/v1/apps/other/jobs/%s", id);
	json_decref(call("GET", path, other_app, NULL, 404));
	job = call("GET", path, admin, NULL, 404);
	cr_assert_str_eq(str(json_object_get(job, "error"), "code"), "not_found");
	json_decref(job);
	json_decref(call("DELETE", path, admin, NULL, 404));
	list = call("GET", "/v1/apps/other/jobs", admin, NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(list, "jobs")), 0, "no job of app is listed under other");
	json_decref(list);
	json_decref(call("GET", JOBS "/no-such-job", admin, NULL, 404));
	list = call("GET", JOBS, writer, NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(list, "jobs")), 2, "alice's and bob's, newest first");
	cr_assert_str_eq(str(json_array_get(json_object_get(list, "jobs"), 1), "id"), id);
	json_decref(list);

	/* Cancel the running one: it stops at the hold, and the index is
	 * whole afterwards (it replays the feed). */
	snprintf(path, sizeof(path), JOBS "/%s", id);
	job = call("DELETE", path, admin, NULL, 200);
	cr_assert(json_is_true(json_object_get(job, "cancel_requested")));
	json_decref(job);
	job = wait_job(id, "canceled");
	cr_assert_str_eq(str(json_object_get(job, "error"), "code"), "canceled");
	cr_assert(json_is_string(json_object_get(job, "finished")));
	json_decref(job);
	job = call("DELETE", path, admin, NULL, 200);
	cr_assert_str_eq(str(job, "state"), "canceled", "canceling a finished job changes nothing");
	json_decref(job);
	cr_assert_eq(hits("alice", reader), EVENTS, "the index is whole after a canceled rebuild");
	cr_assert_eq(hits("bob", reader), EVENTS);

	/* A new rebuild after the canceled one runs to the end. */
	job = rebuild("alice", 202);
	cr_assert_str_neq(str(job, "id"), id);
	snprintf(id, sizeof(id), "%s", str(job, "id"));
	json_decref(job);
	json_decref(wait_job(id, "running"));
	hold(0);
	json_decref(wait_job(id, "succeeded"));
	cr_assert_eq(hits("alice", reader), EVENTS);
}

Test(jobs, sigterm_cancels_a_running_job)
{
	json_t *job;
	char id[64];
	char *log;

	start(NULL, NULL);
	fill("alice", "s1", NULL);
	job = rebuild("alice", 202);
	snprintf(id, sizeof(id), "%s", str(job, "id"));
	json_decref(job);
	json_decref(wait_job(id, "running"));
	/* Held until canceled: only the cancel of the shutdown ends it. */
	hs_stop(&H);
	log = hs_log_text(&H);
	cr_assert(strstr(log, "(index_rebuild of app/alice) canceled"),
		  "the job was canceled at shutdown: %s", log);
	free(log);
	hs_restart(&H);
	cr_assert_eq(hits("alice", NULL), EVENTS, "the index is whole after the restart");
}

Test(jobs, finished_jobs_are_forgotten_past_the_bound)
{
	json_t *job, *list;
	char first[64], last[64], path[256], user[32];

	start(NULL, NULL);
	hold(0);
	for (int i = 0; i <= KEEP_FINISHED; i++) {
		snprintf(user, sizeof(user), "u%d", i);
		job = rebuild(user, 202);
		if (i == 0)
			snprintf(first, sizeof(first), "%s", str(job, "id"));
		snprintf(last, sizeof(last), "%s", str(job, "id"));
		json_decref(wait_job(str(job, "id"), "succeeded"));
		json_decref(job);
	}
	list = call("GET", JOBS, NULL, NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(list, "jobs")), KEEP_FINISHED,
		     "the newest %d finished jobs are kept", KEEP_FINISHED);
	cr_assert_str_eq(str(json_array_get(json_object_get(list, "jobs"), 0), "id"), last);
	json_decref(list);
	snprintf(path, sizeof(path), JOBS "/%s", first);
	/* The oldest is forgotten. */
	json_decref(call("GET", path, NULL, NULL, 404));
}
