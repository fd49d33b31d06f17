/* SPDX-License-Identifier: MIT */
/*
 * Index consistency across crashes and processes, on the sqlite session
 * store and the vector store of $MEMD_INDEX_VECTOR_STORE (index_util.h):
 *
 *  - kill -9: a child process appends batches over many sessions while
 *    its indexers run and is killed with SIGKILL after some acknowledged
 *    batches, three rounds; after a restart every stored event (and every
 *    acknowledged one is stored) is found exactly once in every mode.
 *  - two processes on one SQLite file append concurrently; each then
 *    finds the other's events exactly once (keyword; vector and hybrid
 *    too when $MEMD_INDEX_VECTOR_SHARED says the vector store can be
 *    shared, e.g. Qdrant); one deletes a session the other wrote and the
 *    other stops finding it; one rewinds, undoes and rewinds again, and
 *    neither finds the hidden events (with a shared vector store the
 *    other's vector indexer jumps over the hides and the undo's events).
 *
 * Children report by exit status and stderr (no Criterion asserts in
 * them); the parent asserts.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "index_util.h"

#define ROUNDS 3
#define BATCH 10
#define MAX_BATCHES 25          /* per round: at most 750 events in all */
#define SESSIONS_PER_ROUND 7
#define KILL_AFTER_BASE 6       /* acknowledged batches before the kill */
#define KILL_AFTER_STEP 7
#define SEARCH_K 1000
#define CHILD_FAIL 3
#define TWO_SESSIONS 8
#define TWO_EVENTS 15
#define TWO_DELETED "B-s3"
#define TWO_ZSESSION "A-zebra"
#define TWO_ZEBRA "z-visible"
#define TWO_BURIED 20
#define MSG_MAX 512

static const char *const modes[] = { "keyword", "vector", "hybrid" };
#define N_MODES 3

static ix_env env;

static void setup(void)
{
	ix_env_make(&env);
	ix_write_config(&env, IX_KEYWORD | IX_VECTOR, NULL);
}

static void teardown(void)
{
	ix_env_remove(&env);
}

TestSuite(consistency, .init = setup, .fini = teardown, .timeout = 120);

/* ---- child-side helpers (no Criterion) ------------------------------------------ */

static void child_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void child_fail(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "child %ld: ", (long)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	_exit(CHILD_FAIL);
}

static memd *child_open(const char *config_path)
{
	memd_options o = { .struct_size = sizeof(o), .config_path = config_path };
	memd_error err = { 0 };
	memd *m = NULL;
	if (memd_open(&o, &m, &err) < 0)
		child_fail("memd_open: %s", err.msg);
	return m;
}

/* Append n events with ids "<prefix>-<i>" to (app, user, sid). */
static void child_append(memd *m, const char *user, const char *sid, const char *prefix, int n)
{
	json_t *events = json_array(), *body;
	char *text, *out = NULL, id[128], content[256];
	memd_error err = { 0 };

	for (int i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "%s-%d", prefix, i);
		snprintf(content, sizeof(content), "memory note %s about item %d", id, i);
		json_array_append_new(events, json_pack("{s:s,s:s,s:s}", "id", id, "role", "user",
							"content", content));
	}
	body = json_pack("{s:o}", "events", events);
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	snprintf(content, sizeof(content), "{\"id\":\"%s\"}", sid);
	if (memd_session_create(m, "app", user, content, &out, &err) < 0 && err.code != MEMD_ECONFLICT)
		child_fail("session create: %s", err.msg);
	memd_free(out);
	out = NULL;
	if (memd_events_append(m, "app", user, sid, text, &out, &err) < 0)
		child_fail("append: %s", err.msg);
	memd_free(out);
	free(text);
}

/* Distinct event ids of a search for "memory" in mode; -1 on a duplicate. */
static long child_count(memd *m, const char *user, const char *mode, const char *must_not_prefix)
{
	char body[128], *out = NULL;
	memd_error err = { 0 };
	json_t *res, *list, *hit, *seen;
	size_t i;
	long n;

	snprintf(body, sizeof(body), "{\"query\":\"memory\",\"mode\":\"%s\",\"k\":%d}", mode, SEARCH_K);
	if (memd_search(m, "app", user, body, &out, &err) < 0)
		child_fail("search %s: %s", mode, err.msg);
	res = json_loads(out, 0, NULL);
	memd_free(out);
	list = json_object_get(res, "results");
	seen = json_object();
	json_array_foreach(list, i, hit) {
		const char *id = json_string_value(json_object_get(hit, "event_id"));
		if (json_object_get(seen, id))
			child_fail("%s: event %s returned twice", mode, id);
		if (must_not_prefix && strncmp(id, must_not_prefix, strlen(must_not_prefix)) == 0)
			child_fail("%s: event %s of a deleted session returned", mode, id);
		json_object_set_new(seen, id, json_true());
	}
	n = (long)json_object_size(seen);
	json_decref(seen);
	json_decref(res);
	return n;
}

/* ---- kill -9 mid-indexing ------------------------------------------------------------ */

/* Append up to MAX_BATCHES batches, one ack byte per acknowledged batch,
 * then wait to be killed. */
static void writer_child(int round, int ack_fd)
{
	memd *m = child_open(env.config_path);
	char sid[64], prefix[64];

	for (int b = 0; b < MAX_BATCHES; b++) {
		snprintf(sid, sizeof(sid), "r%d-s%d", round, b % SESSIONS_PER_ROUND);
		snprintf(prefix, sizeof(prefix), "r%dx%d", round, b);
		child_append(m, "alice", sid, prefix, BATCH);
		if (write(ack_fd, "a", 1) != 1)
			child_fail("ack: %s", strerror(errno));
	}
	for (;;)
		pause();
}

/* The durable vector cursor and the feed head, read straight from the
 * SQLite file (for the log: how far behind the indexer was killed). */
static void log_cursor(int round)
{
	char path[IX_PATH_MAX + 16];
	sqlite3 *db;
	sqlite3_stmt *st;
	long long cursor = -1, head = -1;

	snprintf(path, sizeof(path), "%s/memd.db", env.dir);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		return;
	if (sqlite3_prepare_v2(db, "SELECT position FROM cursors WHERE name LIKE 'vector:vec:%'", -1, &st,
			       NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			cursor = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	if (sqlite3_prepare_v2(db, "SELECT last FROM feed_counter", -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			head = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
	cr_log_info("round %d: killed with the vector cursor at %lld of feed head %lld", round, cursor,
		    head);
}

/* Every event id of alice's sessions, from the store. */
static json_t *stored_ids(memd *m)
{
	json_t *ids = json_object(), *page, *s;
	memd_error err = { 0 };
	char *out = NULL;
	size_t i;

	cr_assert_eq(memd_session_list(m, "app", "alice", NULL, MEMD_LIST_LIMIT_MAX, 0, &out, &err), 0,
		     "%s", err.msg);
	page = json_loads(out, 0, NULL);
	memd_free(out);
	cr_assert(json_is_null(json_object_get(page, "next_cursor")), "one page is enough");
	json_array_foreach(json_object_get(page, "sessions"), i, s) {
		const char *sid = json_string_value(json_object_get(s, "id"));
		int64_t after = 0;
		for (;;) {
			json_t *ev_page, *ev, *next;
			size_t j;
			cr_assert_eq(memd_events_list(m, "app", "alice", sid, after, MEMD_PAGE_LIMIT_MAX,
						      &out, &err),
				     0, "%s", err.msg);
			ev_page = json_loads(out, 0, NULL);
			memd_free(out);
			json_array_foreach(json_object_get(ev_page, "events"), j, ev)
				json_object_set_new(ids, json_string_value(json_object_get(ev, "id")),
						    json_true());
			next = json_object_get(ev_page, "next_after_seq");
			if (json_is_null(next) || !next) {
				json_decref(ev_page);
				break;
			}
			after = json_integer_value(next);
			json_decref(ev_page);
		}
	}
	json_decref(page);
	return ids;
}

Test(consistency, kill_9_mid_indexing_then_restart_every_event_exactly_once)
{
	int acked[ROUNDS];
	json_t *ids;
	memd *m;

	for (int round = 0; round < ROUNDS; round++) {
		int fds[2], status;
		char c;
		pid_t pid;

		cr_assert_eq(pipe(fds), 0);
		pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0) {
			close(fds[0]);
			writer_child(round, fds[1]);
		}
		close(fds[1]);
		acked[round] = 0;
		while (acked[round] < KILL_AFTER_BASE + KILL_AFTER_STEP * round &&
		       read(fds[0], &c, 1) == 1)
			acked[round]++;
		kill(pid, SIGKILL);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
			  "the writer must die by SIGKILL, not fail (status %d)", status);
		while (read(fds[0], &c, 1) == 1) /* acks sent before the kill */
			acked[round]++;
		close(fds[0]);
		cr_assert_gt(acked[round], 0, "round %d: nothing was acknowledged", round);
		log_cursor(round);
	}

	m = ix_open(&env);
	ids = stored_ids(m);
	/* Every acknowledged batch is stored, whole. */
	for (int round = 0; round < ROUNDS; round++)
		for (int b = 0; b < acked[round]; b++)
			for (int i = 0; i < BATCH; i++) {
				char id[64];
				snprintf(id, sizeof(id), "r%dx%d-%d", round, b, i);
				cr_assert_not_null(json_object_get(ids, id), "acknowledged event %s lost", id);
			}
	cr_assert_leq(json_object_size(ids), (size_t)SEARCH_K);
	for (int k = 0; k < N_MODES; k++) {
		json_t *res = ix_search(m, "app", "alice", "{\"query\":\"memory\",\"mode\":\"%s\",\"k\":%d}",
					modes[k], SEARCH_K), *hit;
		size_t j;
		cr_assert_eq(json_array_size(ix_results(res)), json_object_size(ids),
			     "%s: %zu results for %zu stored events", modes[k],
			     json_array_size(ix_results(res)), json_object_size(ids));
		json_array_foreach(ix_results(res), j, hit) {
			const char *id = json_string_value(json_object_get(hit, "event_id"));
			cr_assert_not_null(json_object_get(ids, id), "%s: unknown event %s", modes[k], id);
			cr_assert_eq(ix_count_id(res, id), 1, "%s: event %s more than once", modes[k], id);
		}
		json_decref(res);
	}
	/* Each event is found by its own id words, first, in every mode. */
	const char *id;
	json_t *v;
	size_t n = 0;
	json_object_foreach(ids, id, v) {
		if (n++ % 9)
			continue;
		for (int k = 0; k < N_MODES; k++) {
			json_t *res = ix_search(m, "app", "alice", "{\"query\":\"note %s\",\"mode\":\"%s\",\"k\":3}",
						id, modes[k]);
			json_t *first = json_array_get(ix_results(res), 0);
			cr_assert_not_null(first, "%s: %s not found", modes[k], id);
			cr_assert_str_eq(json_string_value(json_object_get(first, "event_id")), id, "%s",
					 modes[k]);
			cr_assert_eq(ix_count_id(res, id), 1);
			json_decref(res);
		}
	}
	json_decref(ids);
	memd_close(m);
}

/* ---- two processes over one SQLite file ---------------------------------------------- */

typedef struct peer {
	pid_t pid;
	int to, from; /* pipe ends in the parent */
} peer;

static void child_send(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		child_fail("write: %s", strerror(errno));
}

static char child_recv(int fd)
{
	char c;
	if (read(fd, &c, 1) != 1)
		child_fail("read: %s", strerror(errno));
	return c;
}

/* 'z': a session with one visible "zebra" and TWO_BURIED better matches,
 * hidden by a rewind, made visible by its undo and hidden again, all
 * before the other process looks (its vector indexer then jumps over it
 * on the shared cursor). */
static void child_bury(memd *m)
{
	char body[64], *out = NULL, op[128];
	memd_error err = { 0 };
	json_t *events = json_array(), *res;

	json_array_append_new(events, json_pack("{s:s,s:s,s:s}", "id", TWO_ZEBRA, "role", "user",
						"content", "zebra crossing"));
	for (int i = 0; i < TWO_BURIED; i++) {
		char id[32];
		snprintf(id, sizeof(id), "z-%d", i);
		json_array_append_new(events, json_pack("{s:s,s:s,s:s}", "id", id, "role", "user",
							"content", "zebra zebra zebra"));
	}
	res = json_pack("{s:o}", "events", events);
	out = json_dumps(res, JSON_COMPACT);
	json_decref(res);
	{
		char *text = out, *r1 = NULL, *r2 = NULL;
		if (memd_session_create(m, "app", "alice", "{\"id\":\"" TWO_ZSESSION "\"}", &r1,
					&err) < 0 ||
		    memd_events_append(m, "app", "alice", TWO_ZSESSION, text, &r2, &err) < 0)
			child_fail("bury: %s", err.msg);
		memd_free(r1);
		memd_free(r2);
		free(text);
		out = NULL;
	}
	for (int round = 0; round < 2; round++) {
		snprintf(body, sizeof(body), "{\"turns\":%d}", TWO_BURIED);
		if (memd_session_rewind(m, "app", "alice", TWO_ZSESSION, body, &out, &err) < 0)
			child_fail("rewind: %s", err.msg);
		res = json_loads(out, 0, NULL);
		memd_free(out);
		out = NULL;
		snprintf(op, sizeof(op), "%s",
			 json_string_value(json_object_get(json_object_get(res, "operation"), "id")));
		json_decref(res);
		if (round == 0) {
			if (memd_operation_undo(m, "app", "alice", TWO_ZSESSION, op, NULL, &out,
						&err) < 0)
				child_fail("undo: %s", err.msg);
			memd_free(out);
			out = NULL;
		}
	}
}

/* 'Z': the one visible "zebra" is the best match in every mode (hidden
 * ones still indexed would fill the candidates a search fetches). */
static void child_check_zebra(memd *m, int n_modes)
{
	for (int k = 0; k < n_modes; k++) {
		char body[128], *out = NULL;
		memd_error err = { 0 };
		json_t *res, *first;

		snprintf(body, sizeof(body), "{\"query\":\"zebra\",\"mode\":\"%s\",\"k\":1}",
			 modes[k]);
		if (memd_search(m, "app", "alice", body, &out, &err) < 0)
			child_fail("search %s: %s", modes[k], err.msg);
		res = json_loads(out, 0, NULL);
		memd_free(out);
		first = json_array_get(json_object_get(res, "results"), 0);
		if (!first || strcmp(json_string_value(json_object_get(first, "event_id")), TWO_ZEBRA) != 0)
			child_fail("%s: the visible zebra is not found after the rewinds", modes[k]);
		json_decref(res);
	}
}

/* A process: append, wait, check it sees both processes' events, then
 * follow the parent's orders: 'x' delete the other's session, 'y' check
 * the deletion is seen, 'z' and 'Z' (above), 'q' quit. */
static void peer_child(const char *who, int in, int out, int shared_vectors)
{
	memd *m = child_open(env.config_path);
	int n_modes = shared_vectors ? N_MODES : 1;
	char sid[32], prefix[64];
	memd_error err = { 0 };

	for (int s = 0; s < TWO_SESSIONS; s++) {
		snprintf(sid, sizeof(sid), "%s-s%d", who, s);
		snprintf(prefix, sizeof(prefix), "%s", sid);
		child_append(m, "alice", sid, prefix, TWO_EVENTS);
	}
	child_send(out, 'D');
	if (child_recv(in) != 'G')
		child_fail("protocol");
	for (int k = 0; k < n_modes; k++) {
		long n = child_count(m, "alice", modes[k], NULL);
		if (n != 2 * TWO_SESSIONS * TWO_EVENTS)
			child_fail("%s: sees %ld events, not %d", modes[k], n, 2 * TWO_SESSIONS * TWO_EVENTS);
	}
	child_send(out, 'C');
	for (;;) {
		char c = child_recv(in);
		if (c == 'x') {
			if (memd_session_delete(m, "app", "alice", TWO_DELETED, &err) < 0)
				child_fail("delete: %s", err.msg);
		} else if (c == 'y') {
			for (int k = 0; k < n_modes; k++) {
				long n = child_count(m, "alice", modes[k], TWO_DELETED "-");
				if (n != (TWO_SESSIONS * 2 - 1) * TWO_EVENTS)
					child_fail("%s: sees %ld events after the delete", modes[k], n);
			}
		} else if (c == 'z') {
			child_bury(m);
		} else if (c == 'Z') {
			child_check_zebra(m, n_modes);
		} else if (c == 'q') {
			break;
		} else {
			child_fail("protocol");
		}
		child_send(out, 'k');
	}
	memd_close(m);
	_exit(0);
}

static peer start_peer(const char *who, int shared_vectors)
{
	int down[2], up[2];
	peer p;

	cr_assert_eq(pipe(down), 0);
	cr_assert_eq(pipe(up), 0);
	p.pid = fork();
	cr_assert_geq(p.pid, 0);
	if (p.pid == 0) {
		close(down[1]);
		close(up[0]);
		peer_child(who, down[0], up[1], shared_vectors);
	}
	close(down[0]);
	close(up[1]);
	p.to = down[1];
	p.from = up[0];
	return p;
}

static void expect_reply(peer *p, char want, const char *what)
{
	char c = 0;
	cr_assert_eq(read(p->from, &c, 1), 1, "%s: the peer died (see its stderr)", what);
	cr_assert_eq(c, want, "%s: unexpected reply", what);
}

static void order(peer *p, char c)
{
	cr_assert_eq(write(p->to, &c, 1), 1);
}

Test(consistency, two_processes_on_one_sqlite_file_converge)
{
	const char *shared = getenv("MEMD_INDEX_VECTOR_SHARED");
	int shared_vectors = shared && strcmp(shared, "1") == 0;
	peer a, b;
	int status;

	if (!shared_vectors) /* an embedded vector store belongs to one process */
		ix_write_config(&env, IX_KEYWORD, NULL);
	a = start_peer("A", shared_vectors);
	b = start_peer("B", shared_vectors);
	expect_reply(&a, 'D', "A appends");
	expect_reply(&b, 'D', "B appends");
	order(&a, 'G');
	order(&b, 'G');
	expect_reply(&a, 'C', "A sees everything once");
	expect_reply(&b, 'C', "B sees everything once");
	order(&a, 'x');
	expect_reply(&a, 'k', "A deletes B's session");
	order(&b, 'y');
	expect_reply(&b, 'k', "B no longer finds it");
	order(&a, 'y');
	expect_reply(&a, 'k', "A no longer finds it");
	order(&a, 'z');
	expect_reply(&a, 'k', "A rewinds, undoes and rewinds again");
	order(&b, 'Z');
	expect_reply(&b, 'k', "B does not find the hidden events");
	order(&a, 'Z');
	expect_reply(&a, 'k', "A does not find the hidden events");
	order(&a, 'q');
	order(&b, 'q');
	cr_assert_eq(waitpid(a.pid, &status, 0), a.pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "A failed");
	cr_assert_eq(waitpid(b.pid, &status, 0), b.pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "B failed");
	cr_log_info("two processes: keyword%s", shared_vectors ? ", vector and hybrid" : " only");
}
