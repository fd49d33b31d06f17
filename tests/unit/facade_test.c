/* SPDX-License-Identifier: MIT */
/*
 * The libmemd facade end to end over the real sqlite plugin (and memory
 * where persistence is not the point): request validation, sessions,
 * appends, auto titles, state scopes with temp:, artifacts, user delete.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <memd/memd.h>

#include "test_common.h"
#include "test_util.h"

static tu_dir dir;
static memd *m;

static void open_sqlite(void)
{
	char yaml[TU_PATH_MAX + 256];
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db}\n"
		 "apps:\n  '*': {working_memory: {strategy: buffer_window, max_messages: 3}}\n"
		 "  full: {working_memory: {strategy: all}}\n",
		 dir.path);
	m = tu_open(&dir, yaml);
}

static void setup(void)
{
	tu_dir_make(&dir);
	open_sqlite();
}

static void teardown(void)
{
	memd_close(m);
	tu_dir_remove(&dir);
}

TestSuite(facade, .init = setup, .fini = teardown);

Test(facade, session_create_get_and_duplicate)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *s;

	cr_assert_eq(memd_session_create(m, "app", "alice", "{\"id\":\"s1\",\"metadata\":{\"k\":1}}",
					 &out, &err), 0, "%s", err.msg);
	s = tu_json(out);
	cr_assert_str_eq(json_string_value(json_object_get(s, "id")), "s1");
	cr_assert(json_is_null(json_object_get(s, "title")));
	cr_assert_eq(json_integer_value(json_object_get(s, "version")), 0);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(s, "metadata"), "k")), 1);
	json_decref(s);

	cr_assert_eq(memd_session_create(m, "app", "alice", "{\"id\":\"s1\"}", &out, &err),
		     MEMD_ECONFLICT);
	cr_assert_eq(memd_session_get(m, "app", "bob", "s1", NULL, &out, &err), MEMD_ENOTFOUND,
		     "another user must not see alice's session");

	/* No id: a UUIDv7 is assigned. */
	cr_assert_eq(memd_session_create(m, "app", "alice", NULL, &out, &err), 0, "%s", err.msg);
	s = tu_json(out);
	cr_assert_eq(strlen(json_string_value(json_object_get(s, "id"))), 36);
	json_decref(s);
}

Test(facade, invalid_requests_are_refused_and_write_nothing)
{
	memd_error err = { 0 };
	char *out = NULL;
	static const char *const bad_bodies[] = {
		"{", "[]", "{\"id\":\"a/b\"}", "{\"id\":\"\"}", "{\"id\":\"x\\u0001y\"}",
		"{\"colour\":\"red\"}", "{\"metadata\":[1]}", "{\"title\":5}", "{\"state\":\"x\"}",
	};

	for (size_t i = 0; i < sizeof(bad_bodies) / sizeof(bad_bodies[0]); i++) {
		memset(&err, 0, sizeof(err));
		cr_assert_eq(memd_session_create(m, "app", "alice", bad_bodies[i], &out, &err),
			     MEMD_EINVAL, "body %s was accepted", bad_bodies[i]);
		cr_assert(err.msg[0], "no message for %s", bad_bodies[i]);
	}
	cr_assert_eq(memd_session_create(m, "a/pp", "alice", NULL, &out, &err), MEMD_EINVAL);
	cr_assert_eq(memd_session_create(m, "app", "", NULL, &out, &err), MEMD_EINVAL);
	cr_assert_eq(memd_session_create(m, "app", "\xff\xfe", NULL, &out, &err), MEMD_EINVAL);

	cr_assert_eq(memd_session_list(m, "app", "alice", NULL, 0, 0, &out, &err), 0);
	cr_assert(strstr(out, "\"sessions\":[]"), "something was written: %s", out);
	memd_free(out);
}

Test(facade, append_titles_versions_replay_and_conflict)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *r, *s;
	const char *batch = "{\"events\":[{\"id\":\"e1\",\"role\":\"user\",\"content\":\"  Plan   a "
			    "trip to Lisbon in May, with a day in Sintra and a long lunch at a "
			    "seafood place\"},{\"id\":\"e2\",\"role\":\"assistant\",\"content\":{"
			    "\"parts\":[{\"text\":\"Sure.\"},{\"tool_call\":{\"name\":\"search\","
			    "\"args\":{\"q\":\"Sintra\"}}}]}}],\"state_delta\":{\"city\":\"Lisbon\"}}";

	tu_ok(memd_session_create(m, "app", "alice", "{\"id\":\"s\"}", &out, &err), &err, &out);
	cr_assert_eq(memd_events_append(m, "app", "alice", "s", batch, &out, &err), 0, "%s", err.msg);
	r = tu_json(out);
	cr_assert_eq(json_integer_value(json_object_get(r, "version")), 1);
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(r, "seqs"), 1)), 2);
	cr_assert(json_is_false(json_object_get(r, "replayed")));
	json_decref(r);

	/* Same ids again: the original seqs, nothing written. */
	cr_assert_eq(memd_events_append(m, "app", "alice", "s", batch, &out, &err), 0, "%s", err.msg);
	r = tu_json(out);
	cr_assert(json_is_true(json_object_get(r, "replayed")));
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(r, "seqs"), 0)), 1);
	cr_assert_eq(json_integer_value(json_object_get(r, "version")), 1);
	json_decref(r);

	/* The title came from the first user message, cut on a word boundary. */
	cr_assert_eq(memd_session_get(m, "app", "alice", "s", NULL, &out, &err), 0);
	s = tu_json(out);
	cr_assert_str_eq(json_string_value(json_object_get(s, "title")),
			 "Plan a trip to Lisbon in May, with a day in Sintra and a\xe2\x80\xa6");
	cr_assert_eq(json_integer_value(json_object_get(s, "last_seq")), 2);
	json_decref(s);

	/* expected_version: a stale version is a conflict and writes nothing. */
	cr_assert_eq(memd_events_append(m, "app", "alice", "s",
					"{\"expected_version\":0,\"events\":[{\"role\":\"user\","
					"\"content\":\"late\"}]}",
					&out, &err),
		     MEMD_ECONFLICT);
	tu_ok(memd_events_append(m, "app", "alice", "s",
				 "{\"expected_version\":1,\"events\":[{\"role\":\"user\","
				 "\"content\":\"on time\"}]}",
				 &out, &err),
	      &err, &out);

	/* Text extraction: text parts and tool calls. */
	cr_assert_eq(memd_events_list(m, "app", "alice", "s", 1, 1, &out, &err), 0);
	r = tu_json(out);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(r, "events"), 0),
							  "text")),
			 "Sure.\nsearch({\"q\":\"Sintra\"})");
	cr_assert_eq(json_integer_value(json_object_get(r, "next_after_seq")), 2);
	json_decref(r);
}

Test(facade, bad_events_fail_whole_batch)
{
	memd_error err = { 0 };
	char *out = NULL;
	static const char *const bad[] = {
		"{\"events\":[{\"role\":\"user\",\"content\":\"ok\"},{\"role\":\"robot\",\"content\":\"x\"}]}",
		"{\"events\":[{\"role\":\"user\",\"content\":\"ok\"},{\"role\":\"user\"}]}",
		"{\"events\":[{\"role\":\"summary\",\"content\":\"forged\"}]}",
		"{\"events\":[{\"role\":\"user\",\"content\":\"a\",\"mood\":1}]}",
		"{\"events\":[{\"id\":\"x\",\"role\":\"user\",\"content\":\"a\"},{\"id\":\"x\",\"role\":\"user\",\"content\":\"b\"}]}",
		"{\"events\":[{\"role\":\"user\",\"content\":{\"parts\":\"no\"}}]}",
		"{\"events\":[{\"role\":\"user\",\"content\":\"a\",\"timestamp\":\"yesterday\"}]}",
		"{\"events\":{}}",
		"{\"expected_version\":-1,\"events\":[]}",
		"{\"events\":[{\"role\":\"user\",\"content\":\"a\"}],\"state_delta\":{\"temp:\":1}}",
		"{}",
	};

	tu_ok(memd_session_create(m, "app", "alice", "{\"id\":\"s\"}", &out, &err), &err, &out);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(memd_events_append(m, "app", "alice", "s", bad[i], &out, &err), MEMD_EINVAL,
			     "accepted: %s", bad[i]);
	cr_assert_eq(memd_events_append(m, "app", "alice", "nope",
					"{\"events\":[{\"role\":\"user\",\"content\":\"a\"}]}", &out, &err),
		     MEMD_ENOTFOUND);
	cr_assert_eq(memd_session_get(m, "app", "alice", "s", NULL, &out, &err), 0);
	cr_assert(strstr(out, "\"version\":0"), "a refused batch wrote something: %s", out);
	memd_free(out);
}

Test(facade, state_scopes_and_temp_never_persisted)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *st;

	tu_ok(memd_session_create(m, "app", "alice", "{\"id\":\"s1\"}", &out, &err), &err, &out);
	tu_ok(memd_session_create(m, "app", "alice", "{\"id\":\"s2\"}", &out, &err), &err, &out);
	tu_ok(memd_session_create(m, "app", "bob", "{\"id\":\"s1\"}", &out, &err), &err, &out);
	tu_ok(memd_events_append(m, "app", "alice", "s1",
				 "{\"invocation_id\":\"inv1\",\"events\":[{\"role\":\"user\",\"content\":"
				 "\"hi\"}],\"state_delta\":{\"k\":1,\"user:lang\":\"pt\",\"app:v\":2,"
				 "\"temp:scratch\":{\"big\":true}}}",
				 &out, &err),
	      &err, &out);

	cr_assert_eq(memd_state_get(m, "app", "alice", "s1", &out, &err), 0);
	st = tu_json(out);
	cr_assert_eq(json_integer_value(json_object_get(st, "k")), 1);
	cr_assert_str_eq(json_string_value(json_object_get(st, "user:lang")), "pt");
	cr_assert_eq(json_integer_value(json_object_get(st, "app:v")), 2);
	cr_assert(json_is_true(json_object_get(json_object_get(st, "temp:scratch"), "big")));
	json_decref(st);

	/* user: follows alice to s2, app: reaches bob, plain keys stay in s1. */
	cr_assert_eq(memd_state_get(m, "app", "alice", "s2", &out, &err), 0);
	st = tu_json(out);
	cr_assert_str_eq(json_string_value(json_object_get(st, "user:lang")), "pt");
	cr_assert_null(json_object_get(st, "k"));
	cr_assert_null(json_object_get(st, "temp:scratch"));
	json_decref(st);
	cr_assert_eq(memd_state_get(m, "app", "bob", "s1", &out, &err), 0);
	st = tu_json(out);
	cr_assert_null(json_object_get(st, "user:lang"));
	cr_assert_eq(json_integer_value(json_object_get(st, "app:v")), 2);
	json_decref(st);

	/* Ending the invocation drops its temp: keys; null deletes a key. */
	tu_ok0(memd_invocation_end(m, "app", "alice", "s1", "inv1", &err), &err);
	cr_assert_eq(memd_state_patch(m, "app", "alice", "s1", "{\"k\":null,\"temp:t2\":3}", &out, &err), 0,
		     "%s", err.msg);
	st = tu_json(out);
	cr_assert_null(json_object_get(st, "k"));
	cr_assert_null(json_object_get(st, "temp:scratch"));
	cr_assert_eq(json_integer_value(json_object_get(st, "temp:t2")), 3);
	json_decref(st);

	/* After a restart no temp: key exists: they were never persisted. */
	memd_close(m);
	open_sqlite();
	cr_assert_eq(memd_state_get(m, "app", "alice", "s1", &out, &err), 0);
	cr_assert_null(strstr(out, "temp:"), "temp: state survived a restart: %s", out);
	cr_assert(strstr(out, "\"user:lang\":\"pt\""), "%s", out);
	memd_free(out);
	cr_assert_eq(tu_files_contain(&dir, "memd.db", "temp:"), 0, "a temp: key reached the database files");
}

Test(facade, session_list_pages_with_cursor)
{
	memd_error err = { 0 };
	char *out, *cursor = NULL;
	size_t seen = 0;
	char body[64];

	for (int i = 0; i < 7; i++) {
		snprintf(body, sizeof(body), "{\"id\":\"s%d\"}", i);
		tu_ok(memd_session_create(m, "app", "alice", body, &out, &err), &err, &out);
	}
	tu_ok(memd_session_patch(m, "app", "alice", "s3", "{\"archived\":true}", &out, &err), &err, &out);
	for (int page = 0; page < 10; page++) {
		json_t *r, *list;
		cr_assert_eq(memd_session_list(m, "app", "alice", cursor, 2, 0, &out, &err), 0, "%s",
			     err.msg);
		r = tu_json(out);
		list = json_object_get(r, "sessions");
		for (size_t i = 0; i < json_array_size(list); i++)
			cr_assert_str_neq(json_string_value(json_object_get(json_array_get(list, i), "id")),
					  "s3", "archived session listed");
		seen += json_array_size(list);
		free(cursor);
		cursor = json_is_string(json_object_get(r, "next_cursor"))
				 ? strdup(json_string_value(json_object_get(r, "next_cursor")))
				 : NULL;
		json_decref(r);
		if (!cursor)
			break;
	}
	cr_assert_eq(seen, 6);
	cr_assert_eq(memd_session_list(m, "app", "alice", "garbage", 2, 0, &out, &err), MEMD_EINVAL);
	cr_assert_eq(memd_session_list(m, "app", "alice", NULL, 2, MEMD_LIST_INCLUDE_ARCHIVED, &out,
				       &err), 0);
	memd_free(out);
}

Test(facade, artifacts_versions)
{
	memd_error err = { 0 };
	char *out = NULL;
	void *data;
	size_t size;

	tu_ok(memd_session_create(m, "app", "alice", "{\"id\":\"s\"}", &out, &err), &err, &out);
	tu_ok(memd_artifact_put(m, "app", "alice", "s", "notes.txt", "text/plain", "one", 3, &out, &err),
	      &err, &out);
	cr_assert_eq(memd_artifact_put(m, "app", "alice", "s", "notes.txt", "text/plain", "two!", 4,
				       &out, &err), 0);
	cr_assert(strstr(out, "\"version\":2"), "%s", out);
	memd_free(out);
	cr_assert_eq(memd_artifact_get(m, "app", "alice", "s", "notes.txt", 1, &out, &data, &size, &err), 0);
	cr_assert_eq(size, 3);
	cr_assert(memcmp(data, "one", 3) == 0);
	memd_free(out);
	memd_free(data);
	cr_assert_eq(memd_artifact_get(m, "app", "alice", "s", "notes.txt", 0, &out, &data, &size, &err), 0);
	cr_assert_eq(size, 4);
	memd_free(out);
	memd_free(data);
	cr_assert_eq(memd_artifact_put(m, "app", "alice", "s", "../etc", NULL, "x", 1, &out, &err),
		     MEMD_EINVAL);
	cr_assert_eq(memd_artifact_put(m, "app", "alice", "s", "a/b", NULL, "x", 1, &out, &err),
		     MEMD_EINVAL);
	cr_assert_eq(memd_artifact_put(m, "app", "alice", "s", "ok", "not a type", "x", 1, &out, &err),
		     MEMD_EINVAL);
	cr_assert_eq(memd_artifact_versions(m, "app", "alice", "s", "notes.txt", &out, &err), 0);
	cr_assert(strstr(out, "\"version\":1") && strstr(out, "\"version\":2"), "%s", out);
	memd_free(out);
	tu_ok0(memd_artifact_delete(m, "app", "alice", "s", "notes.txt", &err), &err);
	cr_assert_eq(memd_artifact_get(m, "app", "alice", "s", "notes.txt", 0, &out, &data, &size, &err),
		     MEMD_ENOTFOUND);
}

Test(facade, user_delete_forgets_everything_of_that_user)
{
	memd_error err = { 0 };
	char *out = NULL;

	tu_ok(memd_session_create(m, "app", "alice", "{\"id\":\"s\",\"state\":{\"user:x\":1}}", &out, &err),
	      &err, &out);
	tu_ok(memd_session_create(m, "app", "bob", "{\"id\":\"s\"}", &out, &err), &err, &out);
	tu_ok0(memd_user_delete(m, "app", "alice", &err), &err);
	cr_assert_eq(memd_session_get(m, "app", "alice", "s", NULL, &out, &err), MEMD_ENOTFOUND);
	cr_assert_eq(memd_session_get(m, "app", "bob", "s", NULL, &out, &err), 0);
	memd_free(out);
	tu_ok(memd_session_create(m, "app", "alice", "{\"id\":\"s\"}", &out, &err), &err, &out);
	cr_assert_eq(memd_state_get(m, "app", "alice", "s", &out, &err), 0);
	cr_assert_str_eq(out, "{}", "user: state survived the user's deletion");
	memd_free(out);
}

Test(facade, plugins_json_and_ready)
{
	memd_error err = { 0 };
	char *out = NULL;
	cr_assert_eq(memd_plugins_json(m, &out, &err), 0, "%s", err.msg);
	cr_assert(strstr(out, "\"name\":\"sqlite\""), "%s", out);
	cr_assert(strstr(out, "\"name\":\"buffer_window\""), "%s", out);
	cr_assert(strstr(out, "stores.main"), "%s", out);
	memd_free(out);
	cr_assert_eq(memd_ready(m, &err), 0, "%s", err.msg);
	cr_assert(strstr(memd_version_string(), "ABI 1."));
}

/* Occurrences of needle in hay. */
static int count_of(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

Test(facade, metrics_time_and_count_store_calls)
{
	memd_error err = { 0 };
	char *out = NULL;

	cr_assert_eq(memd_session_create(m, "app", "alice", "{\"id\":\"s1\"}", &out, &err), 0,
		     "%s", err.msg);
	memd_free(out);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(memd_events_append(m, "app", "alice", "s1",
						"{\"events\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
						&out, &err),
			     0, "%s", err.msg);
		memd_free(out);
	}
	cr_assert_eq(memd_session_get(m, "app", "alice", "nope", NULL, &out, &err), MEMD_ENOTFOUND);

	cr_assert_eq(memd_metrics_text(m, &out, &err), 0, "%s", err.msg);
	cr_assert_eq(count_of(out, "# TYPE memd_store_call_duration_seconds histogram\n"), 1, "%s",
		     out);
	cr_assert_eq(count_of(out, "# TYPE memd_store_call_errors_total counter\n"), 1, "%s", out);
	cr_assert(strstr(out, "memd_store_call_duration_seconds_count{store=\"stores.main\","
			      "op=\"session_create\"} 1\n"), "%s", out);
	cr_assert(strstr(out, "memd_store_call_duration_seconds_count{store=\"stores.main\","
			      "op=\"append\"} 3\n"), "%s", out);
	cr_assert(strstr(out, "memd_store_call_duration_seconds_bucket{store=\"stores.main\","
			      "op=\"append\",le=\"+Inf\"} 3\n"), "%s", out);
	cr_assert(strstr(out, "memd_store_call_errors_total{store=\"stores.main\","
			      "op=\"session_get\",code=\"not_found\"} 1\n"), "%s", out);
	cr_assert_null(strstr(out, "op=\"append\",code="), "no append failed: %s", out);
	memd_free(out);
}

/* An append run on a thread of its own. */
typedef struct blocked_append {
	memd *m;
	pthread_t t;
	atomic_int tid;          /* its thread's id, once started */
	atomic_int done;         /* rc is set */
	int32_t rc;
} blocked_append;

static void *append_behind_lock(void *p)
{
	blocked_append *b = p;
	memd_error err = { 0 };
	char *out = NULL;

	atomic_store(&b->tid, (int)tc_gettid());
	b->rc = memd_events_append(b->m, "app", "alice", "s1",
				   "{\"events\":[{\"role\":\"user\",\"content\":\"first\"}]}", &out,
				   &err);
	memd_free(out);
	atomic_store(&b->done, 1);
	return NULL;
}

#define DEADLINE_MS 300
#define BUSY_MS 20000
#define LEADER_WAIT_MS 30000     /* bound on waiting for the leader to wait for the lock */
#define LEADER_POLL_US 1000
#define LEADER_TRIES 10          /* leaders that timed out before they got to the lock */

/* 1 when thread tid sleeps (SQLite's busy handler sleeps between its
 * tries for a lock; nothing else on an append's way sleeps). */
static int sleeping(pid_t tid)
{
	long nr = tc_thread_syscall(tid);

	return nr == SYS_clock_nanosleep || nr == SYS_nanosleep;
}

/* Start b's append and wait (bounded) until it sleeps in SQLite's busy
 * handler: it leads the store's write queue and waits for the lock.
 * Returns 1 then, 0 if it returned first (b->rc says why; t joined). */
static int start_leader(blocked_append *b)
{
	struct timespec t0, now;

	atomic_store(&b->tid, 0);
	atomic_store(&b->done, 0);
	cr_assert_eq(pthread_create(&b->t, NULL, append_behind_lock, b), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (atomic_load(&b->tid) && sleeping((pid_t)atomic_load(&b->tid)))
			return 1;
		if (atomic_load(&b->done)) {
			pthread_join(b->t, NULL);
			return 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		cr_assert_lt((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000,
			     LEADER_WAIT_MS, "the first append did not wait for the lock within %d ms",
			     LEADER_WAIT_MS);
		usleep(LEADER_POLL_US);
	}
}

/* A facade call carries server.request_timeout_ms as its deadline: an
 * append queued behind a writer that cannot get the database gives up
 * at the deadline (retryable) instead of waiting out the store's busy
 * timeout; nothing of a timed-out append is stored. */
Test(facade, calls_give_up_at_the_request_deadline)
{
	char yaml[TU_PATH_MAX + 256], db_path[TU_PATH_MAX + 32];
	memd_error err = { 0 };
	blocked_append lead = { 0 };
	int tries = 0;
	sqlite3 *db = NULL;
	char *out = NULL;
	struct timespec t0, t1;
	double waited_ms;
	memd_get_options all_events = { .struct_size = sizeof(all_events), .flags = MEMD_GET_EVENTS };
	json_t *s;

	memd_close(m);
	snprintf(db_path, sizeof(db_path), "%s/memd.db", dir.path);
	snprintf(yaml, sizeof(yaml),
		 "server: {request_timeout_ms: %d}\n"
		 "stores:\n  main: {plugin: sqlite, path: %s, busy_timeout_ms: %d}\n",
		 DEADLINE_MS, db_path, BUSY_MS);
	m = tu_open(&dir, yaml);
	cr_assert_eq(memd_session_create(m, "app", "alice", "{\"id\":\"s1\"}", &out, &err), 0,
		     "%s", err.msg);
	memd_free(out);

	/* Another connection takes the write lock and keeps it. */
	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK, "%s",
		     sqlite3_errmsg(db));
	/* The first append leads the store's write queue and waits for the
	 * lock (the store's busy timeout); the second queues behind it once
	 * the first is seen waiting. A first append that a loaded machine
	 * delayed past its deadline before it got to the lock fails at once
	 * (storing nothing) and is sent again. */
	lead.m = m;
	while (!start_leader(&lead)) {
		cr_assert_eq(lead.rc, MEMD_ETIMEDOUT, "the first append did not wait: rc %d",
			     lead.rc);
		cr_assert_lt(++tries, LEADER_TRIES, "the first append timed out %d times before it "
			     "got to the lock", tries);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(memd_events_append(m, "app", "alice", "s1",
					"{\"events\":[{\"role\":\"user\",\"content\":\"second\"}]}",
					&out, &err),
		     MEMD_ETIMEDOUT, "%s", err.msg);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_assert(err.flags & MEMD_ERROR_RETRYABLE);
	waited_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	cr_assert_lt(waited_ms, BUSY_MS / 2, "waited %.0f ms: the deadline was not honoured",
		     waited_ms);

	/* The leader gets the lock once it is free, past its own deadline:
	 * it fails too, and stores nothing. */
	cr_assert_eq(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	pthread_join(lead.t, NULL);
	cr_assert_eq(lead.rc, MEMD_ETIMEDOUT, "the leader: rc %d", lead.rc);
	cr_assert_eq(memd_session_get(m, "app", "alice", "s1", &all_events, &out, &err), 0, "%s",
		     err.msg);
	s = tu_json(out);
	cr_assert_eq(json_array_size(json_object_get(s, "events")), 0, "a timed-out append stored");
	json_decref(s);
	/* In time, the same append goes through. */
	cr_assert_eq(memd_events_append(m, "app", "alice", "s1",
					"{\"events\":[{\"role\":\"user\",\"content\":\"second\"}]}",
					&out, &err),
		     0, "%s", err.msg);
	memd_free(out);
}

Test(facade, open_refuses_bad_configs_with_location)
{
	memd *bad;
	memd_error err = { 0 };
	char path[TU_PATH_MAX];
	memd_options o = { .struct_size = sizeof(o), .config_path = path };

	tu_write_file(&dir, "bad.yaml", "stores:\n  main: {plugin: sqlite, pathh: x}\n", path);
	cr_assert_lt(memd_open(&o, &bad, &err), 0);
	cr_assert(strstr(err.msg, "bad.yaml:2") && strstr(err.msg, "pathh"), "%s", err.msg);

	tu_write_file(&dir, "kind.yaml", "stores:\n  main: {plugin: buffer_window}\n", path);
	cr_assert_lt(memd_open(&o, &bad, &err), 0);
	cr_assert(strstr(err.msg, "stores.main"), "%s", err.msg);

	tu_write_file(&dir, "missing.yaml", "stores:\n  main: {plugin: nosuchplugin}\n", path);
	cr_assert_lt(memd_open(&o, &bad, &err), 0);
	cr_assert(strstr(err.msg, "nosuchplugin"), "%s", err.msg);
}
