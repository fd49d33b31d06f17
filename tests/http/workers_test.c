/* SPDX-License-Identifier: MIT */
/*
 * Writes run on workers (host/http/workers.h) while their connection is
 * suspended: a write waiting for a commit holds up no other connection of
 * libmicrohttpd's thread, many appends on their own connections are all
 * answered and each is stored when answered, a write whose work waits in
 * the workers' queue past its deadline is answered 503 and never runs,
 * and shutdown with writes suspended answers or closes every one of them.
 * A test holds SQLite's write lock from this process (BEGIN IMMEDIATE on
 * memd's database) to keep memd's writes waiting for as long as it needs,
 * instead of timing anything.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define U "/v1/apps/demo/users/alice"
#define CONNS 32
#define WAIT_MS 20000     /* bound on every wait for memd */
#define ANSWER_MAX 4096
#define POLL_US 10000
/* memd's writes wait for the test's lock this long at most: far beyond
 * every wait of a test, so that only the test releases them. */
#define STORE_EXTRA ", busy_timeout_ms: 120000"

static hs H;

static void setup(void)
{
	memset(&H, 0, sizeof(H));
	snprintf(H.store_extra, sizeof(H.store_extra), "%s", STORE_EXTRA);
}

static void teardown(void)
{
	hs_finish(&H);
}

TestSuite(workers, .init = setup, .fini = teardown, .timeout = 120);

/* Take SQLite's write lock on memd's database (from this process). */
static sqlite3 *lock_writer(void)
{
	char path[PATH_MAX + 16];
	sqlite3 *db = NULL;

	snprintf(path, sizeof(path), "%s/memd.db", H.dir);
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK, "%s",
		     sqlite3_errmsg(db));
	return db;
}

static void unlock_writer(sqlite3 *db)
{
	cr_assert_eq(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
	sqlite3_close(db);
}

/* Send a one-event append of event id to session sid on a new connection
 * that asks to be closed after the answer; returns the socket. */
static int send_append(const char *sid, const char *id)
{
	char body[256], req[1024];
	int fd = hs_raw_connect(&H);

	snprintf(body, sizeof(body), "{\"events\":[{\"id\":\"%s\",\"role\":\"user\",\"content\":\"x\"}]}", id);
	snprintf(req, sizeof(req),
		 "POST " U "/sessions/%s/events HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
		 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
		 sid, strlen(body), body);
	hs_raw_send(fd, req, strlen(req));
	return fd;
}

static void create_session(const char *sid)
{
	char body[64];
	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	json_decref(hs_expect(&H, "POST", U "/sessions", body, 201));
}

/* Is event id stored in session sid? */
static int stored(const char *sid, const char *id)
{
	char path[256];
	json_t *s, *e;
	size_t i;
	int found = 0;

	snprintf(path, sizeof(path), U "/sessions/%s?events=0", sid);
	s = hs_expect(&H, "GET", path, NULL, 200);
	json_array_foreach(json_object_get(s, "events"), i, e)
		found |= strcmp(json_string_value(json_object_get(e, "id")), id) == 0;
	json_decref(s);
	return found;
}

/* A sample of memd's /metrics (the line "name{store="stores.main"} v"). */
static long long store_metric(const char *name)
{
	char key[128];
	hs_resp r;
	const char *p;
	long long v;

	hs_req(&H, "GET", "/metrics", NULL, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	snprintf(key, sizeof(key), "\n%s{store=\"stores.main\"} ", name);
	p = strstr(r.body, key);
	cr_assert(p, "no %s in /metrics", name);
	v = atoll(p + strlen(key));
	hs_resp_clear(&r);
	return v;
}

/* Waits (bounded) until memd's log has text. */
static int log_has(const char *text)
{
	for (int waited = 0; waited < WAIT_MS * 1000; waited += POLL_US) {
		char *log = hs_log_text(&H);
		int found = log && strstr(log, text);
		free(log);
		if (found)
			return 1;
		usleep(POLL_US);
	}
	return 0;
}

Test(workers, appends_waiting_for_a_commit_hold_up_no_other_request)
{
	int fds[CONNS];
	long long writes, groups;
	sqlite3 *db;

	/* One libmicrohttpd thread holds every connection. */
	hs_start(&H, "  threads: 1\n  log_level: warn\n", NULL);
	for (int i = 0; i < CONNS; i++) {
		char sid[32];
		snprintf(sid, sizeof(sid), "s%d", i);
		create_session(sid);
	}
	writes = store_metric("memd_store_write_requests_total");
	groups = store_metric("memd_store_write_groups_total");
	db = lock_writer();
	for (int i = 0; i < CONNS; i++) {
		char sid[32], id[32];
		snprintf(sid, sizeof(sid), "s%d", i);
		snprintf(id, sizeof(id), "e%d", i);
		fds[i] = send_append(sid, id);
	}
	/* Every append is in (its /metrics probe is answered meanwhile)... */
	cr_assert(hs_wait_in_flight(&H, CONNS, WAIT_MS), "the %d appends were not all in flight",
		  CONNS);
	/* ...and a read on the same thread is answered while they wait. */
	{
		json_t *s = hs_expect(&H, "GET", U "/sessions/s0?events=0", NULL, 200);
		cr_assert_eq(json_array_size(json_object_get(s, "events")), 0);
		json_decref(s);
	}
	unlock_writer(db);
	for (int i = 0; i < CONNS; i++) {
		char raw[ANSWER_MAX], sid[32], id[32];
		hs_raw_read(fds[i], raw, sizeof(raw), WAIT_MS);
		close(fds[i]);
		cr_assert_eq(hs_raw_status(raw), 200, "append %d: %s", i, raw);
		/* Answered means stored. */
		snprintf(sid, sizeof(sid), "s%d", i);
		snprintf(id, sizeof(id), "e%d", i);
		cr_assert(stored(sid, id), "append %d was answered 200 but is not stored", i);
	}
	/* Each waited in the store's queue, not on a libmicrohttpd thread:
	 * they shared commits (each had a worker long before the lock went). */
	cr_assert_eq(store_metric("memd_store_write_requests_total") - writes, CONNS);
	groups = store_metric("memd_store_write_groups_total") - groups;
	cr_assert(groups >= 1 && groups < CONNS, "%d appends in %lld commits", CONNS, groups);
}

Test(workers, a_write_whose_deadline_passes_in_the_queue_is_answered_and_never_runs)
{
	char raw[ANSWER_MAX];
	int a, b;
	sqlite3 *db;

	hs_start(&H, "  workers: 1\n  request_timeout_ms: 1000\n", NULL);
	create_session("a");
	create_session("b");
	db = lock_writer();
	a = send_append("a", "ea"); /* the one worker waits for the lock with it */
	cr_assert(hs_wait_in_flight(&H, 1, WAIT_MS));
	b = send_append("b", "eb"); /* queued behind it */
	cr_assert(hs_wait_in_flight(&H, 2, WAIT_MS));
	/* b is answered while a still holds the only worker. */
	hs_raw_read(b, raw, sizeof(raw), WAIT_MS);
	close(b);
	cr_assert_eq(hs_raw_status(raw), 503, "%s", raw);
	cr_assert(strstr(raw, "no worker was free") && strstr(raw, "Retry-After"), "%s", raw);
	unlock_writer(db);
	hs_raw_read(a, raw, sizeof(raw), WAIT_MS);
	close(a);
	cr_assert(hs_raw_status(raw) == 200 || hs_raw_status(raw) == 503, "%s", raw);
	cr_assert(!stored("b", "eb"), "the timed-out append ran");
	/* The worker is free again. */
	json_decref(hs_expect(&H, "POST", U "/sessions/b/events",
			      "{\"events\":[{\"id\":\"eb2\",\"role\":\"user\",\"content\":\"x\"}]}", 200));
}

Test(workers, shutdown_answers_or_closes_every_suspended_write)
{
	enum { N = 4 };
	int fds[N], status;
	sqlite3 *db;

	hs_start(&H, "  workers: 2\n  request_timeout_ms: 1000\n", NULL);
	for (int i = 0; i < N; i++) {
		char sid[32];
		snprintf(sid, sizeof(sid), "s%d", i);
		create_session(sid);
	}
	db = lock_writer();
	for (int i = 0; i < N; i++) {
		char sid[32], id[32];
		snprintf(sid, sizeof(sid), "s%d", i);
		snprintf(id, sizeof(id), "e%d", i);
		fds[i] = send_append(sid, id);
		cr_assert(hs_wait_in_flight(&H, i + 1, WAIT_MS));
	}
	kill(H.pid, SIGTERM);
	/* The drain gives up on the writes the store holds (two run, two wait
	 * for a worker)... */
	cr_assert(log_has("requests still running after"), "memd did not stop waiting");
	/* ...and lets them go once the store does. */
	unlock_writer(db);
	status = hs_signal_wait(&H, 0);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status 0x%x", status);
	for (int i = 0; i < N; i++) {
		char raw[ANSWER_MAX];
		size_t n = hs_raw_read(fds[i], raw, sizeof(raw), WAIT_MS);
		close(fds[i]);
		/* Answered (stored, or 503: its deadline passed in the queue or
		 * in the store, or memd was stopping), or its connection closed:
		 * never left open (the read ends with the close). */
		cr_assert(n == 0 || hs_raw_status(raw) == 200 || hs_raw_status(raw) == 503,
			  "append %d: %s", i, raw);
	}
}
