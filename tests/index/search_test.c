/* SPDX-License-Identifier: MIT */
/*
 * Search through the facade (memd_search, memd_index_rebuild) on the
 * sqlite session store and the vector store named by
 * $MEMD_INDEX_VECTOR_STORE (index_util.h): request validation, every
 * mode, filters, isolation between users and apps in every mode, reading
 * one's own writes, deletes, rebuilds (blocking, or as jobs) and
 * restarts giving the same results, disabled modes.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "index_util.h"

#define T0 1700000000000000LL /* a fixed time, us */
/* How long a rebuild job may take here, and how often it is polled. */
#define JOB_WAIT_POLLS 6000
#define JOB_POLL_NS 10000000L
#define SCORE_EPS 1e-4

static ix_env env;
static memd *m;

static void setup(void)
{
	ix_env_make(&env);
	ix_write_config(&env, IX_KEYWORD | IX_VECTOR, NULL);
	m = ix_open(&env);
}

static void teardown(void)
{
	memd_close(m);
	ix_env_remove(&env);
}

TestSuite(search, .init = setup, .fini = teardown, .timeout = 60);

static const char *const modes[] = { "keyword", "vector", "hybrid" };

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}
#define N_MODES 3

static const char *first_text(json_t *res)
{
	json_t *r = ix_results(res);
	cr_assert_gt(json_array_size(r), 0, "no results");
	return json_string_value(json_object_get(json_array_get(r, 0), "text"));
}

Test(search, invalid_requests_are_refused)
{
	static const char *const bad[] = {
		"", "{", "[]", "{}", "{\"query\":\"\"}", "{\"query\":5}",
		"{\"query\":\"x\",\"k\":0}", "{\"query\":\"x\",\"k\":1001}", "{\"query\":\"x\",\"k\":\"3\"}",
		"{\"query\":\"x\",\"mode\":\"fuzzy\"}", "{\"query\":\"x\",\"colour\":1}",
		"{\"query\":\"x\",\"authors\":\"bob\"}", "{\"query\":\"x\",\"authors\":[1]}",
		"{\"query\":\"x\",\"after\":\"yesterday\"}", "{\"query\":\"x\",\"before\":12}",
		"{\"query\":\"x\",\"session_id\":\"a/b\"}", "{\"query\":\"x\",\"session_id\":\"\"}",
		"{\"query\":\"x\",\"query\":\"y\"}",
	};
	memd_error err = { 0 };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(ix_search_fails(m, "app", "alice", bad[i], &err), MEMD_EINVAL, "%s: %s",
			     bad[i], err.msg);
	cr_assert_eq(ix_search_fails(m, "a/b", "alice", "{\"query\":\"x\"}", &err), MEMD_EINVAL);
	cr_assert_eq(ix_search_fails(m, "app", "", "{\"query\":\"x\"}", &err), MEMD_EINVAL);
	cr_assert_eq(memd_search(m, "app", NULL, "{\"query\":\"x\"}", &(char *){ NULL }, &err),
		     MEMD_EINVAL);
}

Test(search, every_mode_finds_the_relevant_event_with_its_fields)
{
	char *dog = ix_append(m, "app", "alice", "s1", "My dog Rex loves running in the park", NULL,
			      T0 + 1);
	free(ix_append(m, "app", "alice", "s1", "Quarterly revenue grew by ten percent", "bot", T0 + 2));
	free(ix_append(m, "app", "alice", "s2", "The weather in Lisbon is sunny", NULL, T0 + 3));

	for (int i = 0; i < N_MODES; i++) {
		json_t *res = ix_search(m, "app", "alice", "{\"query\":\"dogs running\",\"mode\":\"%s\"}",
					modes[i]), *hit;
		cr_assert_str_eq(json_string_value(json_object_get(res, "mode")), modes[i]);
		hit = json_array_get(ix_results(res), 0);
		cr_assert_not_null(hit, "%s: no results", modes[i]);
		cr_assert_str_eq(json_string_value(json_object_get(hit, "event_id")), dog, "%s", modes[i]);
		cr_assert_str_eq(json_string_value(json_object_get(hit, "session_id")), "s1");
		cr_assert_eq(json_integer_value(json_object_get(hit, "seq")), 1);
		cr_assert_str_eq(json_string_value(json_object_get(hit, "author")), "user");
		cr_assert_str_eq(json_string_value(json_object_get(hit, "role")), "user");
		cr_assert_str_eq(json_string_value(json_object_get(hit, "text")),
				 "My dog Rex loves running in the park");
		cr_assert_str_eq(json_string_value(json_object_get(hit, "timestamp")),
				 "2023-11-14T22:13:20.000001Z");
		cr_assert(json_is_real(json_object_get(hit, "score")));
		cr_assert_gt(json_real_value(json_object_get(hit, "score")), 0);
		json_decref(res);
	}
	free(dog);
}

Test(search, default_mode_is_keyword_and_k_limits)
{
	char text[64];
	json_t *res;

	for (int i = 0; i < 30; i++) {
		snprintf(text, sizeof(text), "apple note number %d", i);
		free(ix_append(m, "app", "alice", "s1", text, NULL, 0));
	}
	res = ix_search(m, "app", "alice", "{\"query\":\"apple\"}");
	cr_assert_str_eq(json_string_value(json_object_get(res, "mode")), "keyword");
	cr_assert_eq(json_array_size(ix_results(res)), 10, "default k is 10");
	json_decref(res);
	for (int i = 0; i < N_MODES; i++) {
		res = ix_search(m, "app", "alice", "{\"query\":\"apple\",\"k\":3,\"mode\":\"%s\"}", modes[i]);
		cr_assert_eq(json_array_size(ix_results(res)), 3, "%s", modes[i]);
		json_decref(res);
		res = ix_search(m, "app", "alice", "{\"query\":\"apple\",\"k\":100,\"mode\":\"%s\"}",
				modes[i]);
		cr_assert_eq(json_array_size(ix_results(res)), 30, "%s", modes[i]);
		/* Best first, each event once. */
		json_t *r = ix_results(res);
		for (size_t j = 1; j < json_array_size(r); j++)
			cr_assert_geq(json_real_value(json_object_get(json_array_get(r, j - 1), "score")),
				      json_real_value(json_object_get(json_array_get(r, j), "score")));
		for (size_t j = 0; j < json_array_size(r); j++)
			cr_assert_eq(ix_count_id(res, json_string_value(json_object_get(
							      json_array_get(r, j), "event_id"))),
				     1);
		json_decref(res);
	}
}

Test(search, filters_apply_in_every_mode)
{
	free(ix_append(m, "app", "alice", "s1", "banana bread recipe", "alice", T0 + 100));
	free(ix_append(m, "app", "alice", "s2", "banana smoothie recipe", "bob", T0 + 200));
	free(ix_append(m, "app", "alice", "s2", "banana split recipe", "alice", T0 + 300));

	for (int i = 0; i < N_MODES; i++) {
		json_t *res, *r;
		res = ix_search(m, "app", "alice",
				"{\"query\":\"banana recipe\",\"mode\":\"%s\",\"session_id\":\"s2\"}", modes[i]);
		r = ix_results(res);
		cr_assert_eq(json_array_size(r), 2, "%s session", modes[i]);
		for (size_t j = 0; j < 2; j++)
			cr_assert_str_eq(json_string_value(json_object_get(json_array_get(r, j), "session_id")),
					 "s2");
		json_decref(res);

		res = ix_search(m, "app", "alice",
				"{\"query\":\"banana recipe\",\"mode\":\"%s\",\"authors\":[\"bob\"]}", modes[i]);
		cr_assert_eq(json_array_size(ix_results(res)), 1, "%s authors", modes[i]);
		cr_assert_str_eq(first_text(res), "banana smoothie recipe");
		json_decref(res);

		res = ix_search(m, "app", "alice",
				"{\"query\":\"banana recipe\",\"mode\":\"%s\",\"authors\":[\"carol\"]}", modes[i]);
		cr_assert_eq(json_array_size(ix_results(res)), 0, "%s unknown author", modes[i]);
		json_decref(res);

		/* after/before are exclusive. */
		res = ix_search(m, "app", "alice",
				"{\"query\":\"banana\",\"mode\":\"%s\",\"after\":\"2023-11-14T22:13:20.0001Z\","
				"\"before\":\"2023-11-14T22:13:20.0003Z\"}",
				modes[i]);
		cr_assert_eq(json_array_size(ix_results(res)), 1, "%s time window", modes[i]);
		cr_assert_str_eq(first_text(res), "banana smoothie recipe");
		json_decref(res);

		res = ix_search(m, "app", "alice",
				"{\"query\":\"banana\",\"mode\":\"%s\",\"session_id\":\"no-such\"}", modes[i]);
		cr_assert_eq(json_array_size(ix_results(res)), 0);
		json_decref(res);
	}
}

/* No request of one user or app sees another's events, whatever it asks. */
Test(search, isolation_between_users_and_apps_in_every_mode)
{
	static const char *const scopes[][2] = { { "app", "alice" }, { "app", "bob" },
						 { "other", "alice" } };
	char *ids[3];

	for (int s = 0; s < 3; s++)
		ids[s] = ix_append(m, scopes[s][0], scopes[s][1], "shared-session",
				   "secret launch code for the rocket", NULL, T0 + s);
	for (int s = 0; s < 3; s++) {
		for (int i = 0; i < N_MODES; i++) {
			json_t *res = ix_search(
				m, scopes[s][0], scopes[s][1],
				"{\"query\":\"secret launch code rocket\",\"mode\":\"%s\",\"k\":100}", modes[i]);
			json_t *r = ix_results(res);
			cr_assert_eq(json_array_size(r), 1, "%s/%s %s: %zu results", scopes[s][0],
				     scopes[s][1], modes[i], json_array_size(r));
			cr_assert_eq(ix_count_id(res, ids[s]), 1);
			json_decref(res);
			/* Naming another scope's session changes nothing. */
			res = ix_search(m, scopes[s][0], scopes[s][1],
					"{\"query\":\"secret\",\"mode\":\"%s\",\"session_id\":\"shared-session\"}",
					modes[i]);
			cr_assert_eq(json_array_size(ix_results(res)), 1);
			cr_assert_eq(ix_count_id(res, ids[s]), 1);
			json_decref(res);
		}
	}
	/* A user with nothing finds nothing. */
	for (int i = 0; i < N_MODES; i++) {
		json_t *res = ix_search(m, "app", "carol", "{\"query\":\"secret\",\"mode\":\"%s\"}",
					modes[i]);
		cr_assert_eq(json_array_size(ix_results(res)), 0);
		json_decref(res);
	}
	for (int s = 0; s < 3; s++)
		free(ids[s]);
}

Test(search, a_client_reads_its_own_writes)
{
	char text[64], token[32];
	for (int i = 0; i < 25; i++) {
		snprintf(token, sizeof(token), "zq%dxw", i);
		snprintf(text, sizeof(text), "fresh note %s", token);
		char *id = ix_append(m, "app", "alice", i % 2 ? "s1" : "s2", text, NULL, 0);
		for (int k = 0; k < N_MODES; k++) {
			json_t *res = ix_search(m, "app", "alice", "{\"query\":\"%s\",\"mode\":\"%s\",\"k\":1}",
						token, modes[k]);
			cr_assert_eq(ix_count_id(res, id), 1, "%s: event %d not found at once", modes[k], i);
			json_decref(res);
		}
		free(id);
	}
}

static size_t hits(const char *app, const char *user, const char *query, const char *mode)
{
	json_t *res = ix_search(m, app, user, "{\"query\":\"%s\",\"mode\":\"%s\",\"k\":1000}", query,
				mode);
	size_t n = json_array_size(ix_results(res));
	json_decref(res);
	return n;
}

Test(search, deleting_a_session_or_user_removes_its_results)
{
	memd_error err = { 0 };
	char text[64];

	for (int i = 0; i < 12; i++) {
		snprintf(text, sizeof(text), "tulip garden entry %d", i);
		free(ix_append(m, "app", "alice", i % 3 == 0 ? "doomed" : "kept", text, NULL, 0));
		free(ix_append(m, "app", "bob", "kept", text, NULL, 0));
	}
	for (int i = 0; i < N_MODES; i++)
		cr_assert_eq(hits("app", "alice", "tulip garden", modes[i]), 12);
	cr_assert_eq(memd_session_delete(m, "app", "alice", "doomed", &err), 0, "%s", err.msg);
	for (int i = 0; i < N_MODES; i++) {
		json_t *res = ix_search(m, "app", "alice", "{\"query\":\"tulip garden\",\"mode\":\"%s\",\"k\":100}",
					modes[i]), *hit;
		size_t j;
		cr_assert_eq(json_array_size(ix_results(res)), 8, "%s", modes[i]);
		json_array_foreach(ix_results(res), j, hit)
			cr_assert_str_eq(json_string_value(json_object_get(hit, "session_id")), "kept");
		json_decref(res);
	}
	/* A new session with the old id starts empty. */
	free(ix_append(m, "app", "alice", "doomed", "tulip garden reborn", NULL, 0));
	for (int i = 0; i < N_MODES; i++)
		cr_assert_eq(hits("app", "alice", "tulip garden", modes[i]), 9, "%s", modes[i]);
	cr_assert_eq(memd_user_delete(m, "app", "alice", &err), 0, "%s", err.msg);
	for (int i = 0; i < N_MODES; i++) {
		cr_assert_eq(hits("app", "alice", "tulip garden", modes[i]), 0, "%s", modes[i]);
		cr_assert_eq(hits("app", "bob", "tulip garden", modes[i]), 12, "%s", modes[i]);
	}
}

/* The (event id, score) lists of a few queries in every mode. */
typedef struct snapshot {
	json_t *lists; /* array of arrays of [id, score] */
} snapshot;

static const char *const snapshot_queries[] = { "garden", "river stone", "blue bird song",
						"entry 7", "quiet morning walk" };
#define N_SNAPSHOT_QUERIES (sizeof(snapshot_queries) / sizeof(snapshot_queries[0]))

static json_t *take_snapshot(const char *user)
{
	json_t *all = json_array();
	for (int i = 0; i < N_MODES; i++)
		for (size_t q = 0; q < N_SNAPSHOT_QUERIES; q++) {
			json_t *res = ix_search(m, "app", user, "{\"query\":\"%s\",\"mode\":\"%s\",\"k\":20}",
						snapshot_queries[q], modes[i]);
			json_t *list = json_array(), *hit;
			size_t j;
			json_array_foreach(ix_results(res), j, hit)
				json_array_append_new(list, json_pack("[O,O]", json_object_get(hit, "event_id"),
								      json_object_get(hit, "score")));
			json_array_append_new(all, list);
			json_decref(res);
		}
	return all;
}

static void expect_same_snapshot(json_t *a, json_t *b, const char *what)
{
	cr_assert_eq(json_array_size(a), json_array_size(b));
	for (size_t i = 0; i < json_array_size(a); i++) {
		json_t *x = json_array_get(a, i), *y = json_array_get(b, i);
		cr_assert_eq(json_array_size(x), json_array_size(y), "%s: list %zu: %zu vs %zu hits", what,
			     i, json_array_size(x), json_array_size(y));
		for (size_t j = 0; j < json_array_size(x); j++) {
			json_t *p = json_array_get(x, j), *q = json_array_get(y, j);
			cr_assert_str_eq(json_string_value(json_array_get(p, 0)),
					 json_string_value(json_array_get(q, 0)), "%s: list %zu #%zu", what, i,
					 j);
			cr_assert_float_eq(json_real_value(json_array_get(p, 1)),
					   json_real_value(json_array_get(q, 1)), SCORE_EPS, "%s", what);
		}
	}
}

static void varied_corpus(void)
{
	static const char *const words[] = { "garden", "river", "stone", "blue", "bird", "song",
					     "quiet", "morning", "walk", "entry", "lamp", "window" };
	char text[128], sid[16];
	memd_error err = { 0 };

	for (int i = 0; i < 60; i++) {
		snprintf(sid, sizeof(sid), "s%d", i % 6);
		snprintf(text, sizeof(text), "%s %s %s entry %d", words[i % 12], words[(i * 5) % 12],
			 words[(i * 7 + 3) % 12], i % 10);
		free(ix_append(m, "app", "alice", sid, text, i % 4 ? "alice" : "helper", T0 + i * 1000));
		free(ix_append(m, "app", "bob", sid, text, NULL, T0 + i * 1000));
	}
	/* Deleted things must stay deleted through rebuilds. */
	cr_assert_eq(memd_session_delete(m, "app", "alice", "s5", &err), 0, "%s", err.msg);
}

typedef struct progress_log {
	int calls;
	uint64_t last_done, last_total;
} progress_log;

static int32_t on_progress(void *ud, uint64_t done, uint64_t total)
{
	progress_log *p = ud;
	p->calls++;
	p->last_done = done;
	p->last_total = total;
	return 0;
}

Test(search, rebuilds_and_restarts_give_the_same_results)
{
	json_t *before, *after;
	progress_log p = { 0 };
	memd_error err = { 0 };

	varied_corpus();
	before = take_snapshot("alice");

	cr_assert_eq(memd_index_rebuild(m, "app", "alice", on_progress, &p, &err), 0, "%s", err.msg);
	cr_assert_gt(p.calls, 0);
	cr_assert_eq(p.last_done, p.last_total);
	cr_assert_eq(p.last_total, 50 * 2, "50 events, two indexes");
	after = take_snapshot("alice");
	expect_same_snapshot(before, after, "scoped rebuild");
	json_decref(after);

	memset(&p, 0, sizeof(p));
	cr_assert_eq(memd_index_rebuild(m, NULL, NULL, on_progress, &p, &err), 0, "%s", err.msg);
	cr_assert_gt(p.calls, 0);
	cr_assert_eq(p.last_done, p.last_total);
	after = take_snapshot("alice");
	expect_same_snapshot(before, after, "full rebuild");
	json_decref(after);

	memd_close(m);
	m = ix_open(&env);
	after = take_snapshot("alice");
	expect_same_snapshot(before, after, "restart");
	json_decref(after);
	json_decref(before);

	/* Bad scopes. */
	cr_assert_eq(memd_index_rebuild(m, "app", NULL, NULL, NULL, &err), MEMD_EINVAL);
	cr_assert_eq(memd_index_rebuild(m, NULL, "alice", NULL, NULL, &err), MEMD_EINVAL);
	cr_assert_eq(memd_index_rebuild(m, "a/b", "alice", NULL, NULL, &err), MEMD_EINVAL);
}

static int32_t cancel_at_once(void *ud, uint64_t done, uint64_t total)
{
	(void)ud;
	(void)done;
	(void)total;
	return 1;
}

Test(search, a_failed_scoped_rebuild_heals_the_keyword_index)
{
	json_t *before, *after;
	memd_error err = { 0 };
	char text[64];

	/* Enough events that the first progress report comes mid-way. */
	for (int i = 0; i < 300; i++) {
		snprintf(text, sizeof(text), "heron pond note %d", i);
		free(ix_append(m, "app", "alice", i % 2 ? "a" : "b", text, NULL, T0 + i));
	}
	before = ix_search(m, "app", "alice", "{\"query\":\"heron\",\"k\":1000}");
	cr_assert_eq(memd_index_rebuild(m, "app", "alice", cancel_at_once, NULL, &err), MEMD_ECANCELED);
	after = ix_search(m, "app", "alice", "{\"query\":\"heron\",\"k\":1000}");
	cr_assert(json_equal(ix_results(before), ix_results(after)),
		  "the keyword index is whole again after a canceled rebuild");
	json_decref(before);
	json_decref(after);
}

/* The event ids of a search's results, sorted, as one string. */
static char *hit_ids(json_t *res)
{
	json_t *hit;
	size_t i, n = json_array_size(ix_results(res));
	char **v = calloc(n ? n : 1, sizeof(*v)), *out;
	size_t len = 1;

	json_array_foreach(ix_results(res), i, hit) v[i] = (char *)json_string_value(json_object_get(hit, "event_id"));
	qsort(v, n, sizeof(*v), cmp_str);
	for (i = 0; i < n; i++)
		len += strlen(v[i]) + 1;
	out = calloc(1, len);
	for (i = 0; i < n; i++) {
		strcat(out, v[i]);
		strcat(out, ",");
	}
	free(v);
	return out;
}

Test(search, a_canceled_scoped_rebuild_leaves_every_index_whole)
{
	memd_error err = { 0 };
	char text[64];

	/* Two sessions of 150: the first progress report, which cancels,
	 * comes after the first session is rebuilt and before the second. */
	for (int i = 0; i < 300; i++) {
		snprintf(text, sizeof(text), "heron pond note %d", i);
		free(ix_append(m, "app", "alice", i % 2 ? "a" : "b", text, NULL, T0 + i));
	}
	for (int k = 0; k < N_MODES; k++) {
		json_t *before = ix_search(m, "app", "alice", "{\"query\":\"heron pond\",\"k\":1000,\"mode\":\"%s\"}", modes[k]);
		char *want = hit_ids(before), *got;
		json_t *after;

		cr_assert_eq(json_array_size(ix_results(before)), 300, "%s", modes[k]);
		cr_assert_eq(memd_index_rebuild(m, "app", "alice", cancel_at_once, NULL, &err), MEMD_ECANCELED);
		after = ix_search(m, "app", "alice", "{\"query\":\"heron pond\",\"k\":1000,\"mode\":\"%s\"}", modes[k]);
		got = hit_ids(after);
		cr_assert_str_eq(got, want, "%s: every event is found again after a canceled rebuild", modes[k]);
		free(want);
		free(got);
		json_decref(before);
		json_decref(after);
	}
}

/* Poll job id (memd_job_get, as app) until it finished; returns it. */
static json_t *wait_finished(const char *app, const char *id)
{
	const struct timespec poll = { 0, JOB_POLL_NS };
	memd_error err = { 0 };

	for (int i = 0; i < JOB_WAIT_POLLS; i++) {
		char *out = NULL;
		json_t *job;
		const char *state;
		cr_assert_eq(memd_job_get(m, app, id, &out, &err), 0, "%s", err.msg);
		job = json_loads(out, 0, NULL);
		memd_free(out);
		state = json_string_value(json_object_get(job, "state"));
		if (strcmp(state, "queued") != 0 && strcmp(state, "running") != 0)
			return job;
		json_decref(job);
		nanosleep(&poll, NULL);
	}
	cr_assert_fail("job %s did not finish", id);
	return NULL;
}

Test(search, rebuilds_as_jobs_through_the_facade)
{
	json_t *before, *after, *job;
	memd_error err = { 0 };
	char *out = NULL, id[64];
	int32_t existing = -1;

	varied_corpus();
	before = take_snapshot("alice");
	cr_assert_eq(memd_index_rebuild_start(m, "app", NULL, &out, &existing, &err), MEMD_EINVAL);
	cr_assert_eq(memd_index_rebuild_start(m, "a/b", "alice", &out, &existing, &err), MEMD_EINVAL);
	cr_assert_eq(memd_job_get(m, NULL, "no-such-job", &out, &err), MEMD_ENOTFOUND);

	/* Of everything (no app, user): a job only app NULL sees. */
	cr_assert_eq(memd_index_rebuild_start(m, NULL, NULL, &out, &existing, &err), 0, "%s", err.msg);
	cr_assert_eq(existing, 0);
	job = json_loads(out, 0, NULL);
	memd_free(out);
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(job, "id")));
	cr_assert_eq(json_object_size(json_object_get(job, "scope")), 0);
	json_decref(job);
	cr_assert_eq(memd_job_get(m, "app", id, &out, &err), MEMD_ENOTFOUND,
		     "an app does not see the rebuild of everything");
	job = wait_finished(NULL, id);
	cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(job, "progress"), "done")),
		     json_integer_value(json_object_get(json_object_get(job, "progress"), "total")));
	json_decref(job);
	after = take_snapshot("alice");
	expect_same_snapshot(before, after, "full rebuild as a job");
	json_decref(after);

	cr_assert_eq(memd_index_rebuild_start(m, "app", "alice", &out, &existing, &err), 0, "%s", err.msg);
	job = json_loads(out, 0, NULL);
	memd_free(out);
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(job, "id")));
	json_decref(job);
	job = wait_finished("app", id);
	cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded");
	json_decref(job);
	cr_assert_eq(memd_job_list(m, "app", &out, &err), 0, "%s", err.msg);
	job = json_loads(out, 0, NULL);
	memd_free(out);
	cr_assert_eq(json_array_size(json_object_get(job, "jobs")), 1, "the app's own job only");
	json_decref(job);
	cr_assert_eq(memd_job_list(m, NULL, &out, &err), 0, "%s", err.msg);
	job = json_loads(out, 0, NULL);
	memd_free(out);
	cr_assert_eq(json_array_size(json_object_get(job, "jobs")), 2);
	json_decref(job);
	after = take_snapshot("alice");
	expect_same_snapshot(before, after, "scoped rebuild as a job");
	json_decref(after);
	json_decref(before);
}

Test(search, disabled_modes_are_refused)
{
	memd_error err = { 0 };

	memd_close(m);
	ix_write_config(&env, IX_KEYWORD, NULL);
	m = ix_open(&env);
	cr_assert_eq(ix_search_fails(m, "app", "alice", "{\"query\":\"x\",\"mode\":\"vector\"}", &err),
		     MEMD_EINVAL);
	cr_assert(strstr(err.msg, "index.vector.enabled"), "%s", err.msg);
	cr_assert_eq(ix_search_fails(m, "app", "alice", "{\"query\":\"x\",\"mode\":\"hybrid\"}", &err),
		     MEMD_EINVAL);
	memd_close(m);
	ix_write_config(&env, IX_VECTOR, NULL);
	m = ix_open(&env);
	cr_assert_eq(ix_search_fails(m, "app", "alice", "{\"query\":\"x\",\"mode\":\"keyword\"}", &err),
		     MEMD_EINVAL);
	cr_assert(strstr(err.msg, "index.keyword.enabled"), "%s", err.msg);
	/* With only vector enabled, vector is the default mode. */
	free(ix_append(m, "app", "alice", "s", "only vectors here", NULL, 0));
	json_t *res = ix_search(m, "app", "alice", "{\"query\":\"vectors\"}");
	cr_assert_str_eq(json_string_value(json_object_get(res, "mode")), "vector");
	cr_assert_eq(json_array_size(ix_results(res)), 1);
	json_decref(res);
}

Test(search, default_mode_from_config)
{
	memd_close(m);
	ix_write_config(&env, IX_KEYWORD | IX_VECTOR, NULL);
	/* index.default_mode sits under index:, which ix_write_config wrote
	 * last: append the key to that map. */
	FILE *f = fopen(env.config_path, "a");
	cr_assert_not_null(f);
	fputs("  default_mode: hybrid\n", f);
	fclose(f);
	m = ix_open(&env);
	free(ix_append(m, "app", "alice", "s", "hybrid by default", NULL, 0));
	json_t *res = ix_search(m, "app", "alice", "{\"query\":\"default\"}");
	cr_assert_str_eq(json_string_value(json_object_get(res, "mode")), "hybrid");
	cr_assert_eq(json_array_size(ix_results(res)), 1);
	json_decref(res);
}
