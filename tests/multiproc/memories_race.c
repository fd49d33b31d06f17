/* SPDX-License-Identifier: MIT */
/*
 * Two processes (a store instance in each of two forked children) over
 * one database server (stress_util.h says which) commit memory batches as
 * two memory extractors would that read the same events: in every round
 * both commit, for every session in the same order, the batch of that
 * round with the same expected cursor (the round's first seq - 1) and the
 * same new one, started at once by the parent through pipes. A batch adds
 * BATCH memories whose ids name the child (so without the cursor both
 * would apply) and updates the session's profile memory, expecting the
 * version the rounds so far left.
 *
 * Checked: in every round and session exactly one commit wins and the
 * other gets MEMD_ECONFLICT; every memory the winners added exists, with
 * exactly one history row, and none of the losers' does; each profile
 * went through every round once (its version, its history); every
 * session's cursor is at its last seq (none pending). Meanwhile the
 * parent tails the feed as an indexer would: positions strictly
 * increase, every added memory shows exactly once (an add is never moved
 * by a later change here, so a record held back too late would be
 * missed), and the last record of each profile carries its final
 * version.
 */
#include <criterion/criterion.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stress_util.h"

#define N_PROCS 2
#define SESSIONS 6
#define ROUNDS 12
#define BATCH 3                      /* memories added per commit */
#define WRITES (BATCH + 1)           /* and the profile's update */
#define EVENTS (ROUNDS * BATCH)      /* per session: one seq per memory */
#define APP "race"
#define USER "u"
#define T0 1700000000000000LL        /* a plausible unix time in us */
#define ID_LEN 48
#define TAIL_POLL_MS 1               /* between feed reads while a round runs */
#define LIST_LIMIT 1000              /* more than every memory of the user */
#define N_ADDED (SESSIONS * ROUNDS * BATCH)

static void session_id(char *buf, size_t cap, int s)
{
	snprintf(buf, cap, "s%d", s);
}

static void memory_id(char *buf, size_t cap, int s, int round, int child, int k)
{
	snprintf(buf, cap, "m-s%d-r%d-c%d-%d", s, round, child, k);
}

static void profile_id(char *buf, size_t cap, int s)
{
	snprintf(buf, cap, "profile-s%d", s);
}

static memd_memory memory(const char *id, const char *text, const char *session)
{
	memd_memory m = { .struct_size = sizeof(m), .app = APP, .user = USER, .id = id,
			  .text = text, .kind = "fact", .topics_json = "[]",
			  .entities_json = "[]", .source_session = session, .tokens = 1 };
	return m;
}

/* One commit of child c for session s in round `round` (cursor from
 * round * BATCH to (round + 1) * BATCH). */
static int32_t commit_batch(stress_store *st, int c, int s, int round, memd_error *err)
{
	char sid[ID_LEN], ids[BATCH][ID_LEN], pid[ID_LEN];
	memd_memory ms[WRITES];
	memd_memory_write w[WRITES];
	const memd_memory_write *wp[WRITES];
	memd_call call = stress_call();
	memd_scope sc = stress_scope(APP, USER, NULL);
	memd_memory_commit mc = { .struct_size = sizeof(mc), .n_writes = WRITES, .writes = wp,
				  .expected_cursor_seq = (int64_t)round * BATCH,
				  .new_cursor_seq = (int64_t)(round + 1) * BATCH,
				  .now_us = T0 + round + 1 };

	session_id(sid, sizeof(sid), s);
	mc.cursor_session = sid;
	for (int k = 0; k < BATCH; k++) {
		memory_id(ids[k], sizeof(ids[k]), s, round, c, k);
		ms[k] = memory(ids[k], "a fact", sid);
		w[k] = (memd_memory_write){ .struct_size = sizeof(w[k]), .op = MEMD_MEM_ADD,
					    .memory = &ms[k], .actor = "extractor" };
	}
	profile_id(pid, sizeof(pid), s);
	ms[BATCH] = memory(pid, "the profile", sid);
	w[BATCH] = (memd_memory_write){ .struct_size = sizeof(w[BATCH]), .op = MEMD_MEM_UPDATE,
					.expected_version = round + 1, .memory = &ms[BATCH],
					.actor = "extractor" };
	for (int k = 0; k < WRITES; k++)
		wp[k] = &w[k];
	return st->ops->memory_commit(st->h, &call, &sc, &mc, NULL, err);
}

/* A child: on each byte from go_fd, one round (every session); its result
 * codes ("<round> <session> <code>" lines in out), then a byte on
 * ready_fd. */
static int child_main(void *name, int c, int go_fd, int ready_fd, const char *out_path)
{
	memd_error err = { 0 };
	stress_store *st = stress_open(NULL, name, NULL, &err);
	FILE *f = fopen(out_path, "w");
	char go;

	if (!st || !f) {
		fprintf(stderr, "child %d: %s\n", c, err.msg);
		return 1;
	}
	for (int round = 0; round < ROUNDS; round++) {
		if (read(go_fd, &go, 1) != 1)
			return 1;
		for (int s = 0; s < SESSIONS; s++) {
			int32_t r = commit_batch(st, c, s, round, &err);
			if (r != 0 && r != MEMD_ECONFLICT)
				fprintf(stderr, "child %d round %d session %d: %s\n", c, round, s,
					err.msg);
			fprintf(f, "%d %d %d\n", round, s, (int)r);
		}
		fflush(f);
		if (write(ready_fd, "r", 1) != 1)
			return 1;
	}
	fclose(f);
	stress_close(st);
	return 0;
}

/* What the parent's tailer has seen. */
typedef struct tail {
	int64_t after;                   /* the last position read */
	int added_seen[SESSIONS][ROUNDS][N_PROCS][BATCH];
	int64_t profile_version[SESSIONS]; /* of the last profile record */
	size_t n_records;
} tail;

static int32_t tail_record(void *userdata, const memd_feed_record *r)
{
	tail *t = userdata;
	int s, round, c, k;

	cr_assert_gt(r->position, t->after, "feed position %lld after %lld",
		     (long long)r->position, (long long)t->after);
	t->after = r->position;
	t->n_records++;
	cr_assert_eq(r->kind, MEMD_FEED_MEMORY, "record kind %u in a race of adds and updates",
		     r->kind);
	cr_assert_not_null(r->memory);
	cr_assert_eq(r->memory->position, r->position);
	if (sscanf(r->memory->id, "m-s%d-r%d-c%d-%d", &s, &round, &c, &k) == 4) {
		cr_assert(s >= 0 && s < SESSIONS && round >= 0 && round < ROUNDS && c >= 0 &&
			  c < N_PROCS && k >= 0 && k < BATCH, "memory '%s'", r->memory->id);
		cr_assert_eq(t->added_seen[s][round][c][k], 0, "memory '%s' twice in the feed",
			     r->memory->id);
		t->added_seen[s][round][c][k] = 1;
	} else {
		cr_assert_eq(sscanf(r->memory->id, "profile-s%d", &s), 1, "memory '%s'",
			     r->memory->id);
		cr_assert(s >= 0 && s < SESSIONS);
		cr_assert_gt(r->memory->version, t->profile_version[s],
			     "profile %d went back from version %lld to %lld", s,
			     (long long)t->profile_version[s], (long long)r->memory->version);
		t->profile_version[s] = r->memory->version;
	}
	return 0;
}

static void tail_read(stress_store *st, tail *t)
{
	memd_feed_sink sink = { .struct_size = sizeof(sink), .record = tail_record, .userdata = t };
	memd_call call = stress_call();
	memd_error err = { 0 };

	cr_assert_eq(st->ops->feed_read(st->h, &call, t->after, 0, &sink, &err), 0, "%s", err.msg);
}

static int32_t count_memory(void *userdata, const memd_memory *m)
{
	(void)m;
	(*(size_t *)userdata)++;
	return 0;
}

static int32_t count_session(void *userdata, const memd_session *s)
{
	(void)s;
	(*(size_t *)userdata)++;
	return 0;
}

static int32_t count_change(void *userdata, const memd_memory_change *c)
{
	(void)c;
	(*(size_t *)userdata)++;
	return 0;
}

/* The history rows of memory id; 0 when it has none. */
static size_t history_rows(stress_store *st, const char *id)
{
	memd_memory_change_sink sink = { .struct_size = sizeof(sink), .change = count_change };
	memd_call call = stress_call();
	memd_scope sc = stress_scope(APP, USER, NULL);
	memd_error err = { 0 };
	size_t n = 0;
	int32_t r;

	sink.userdata = &n;
	r = st->ops->memory_history(st->h, &call, &sc, id, &sink, &err);
	cr_assert(r == 0 || r == MEMD_ENOTFOUND, "history of '%s': %s", id, err.msg);
	return n;
}

/* Sessions with events, the profiles at version 1, the feed's head. */
static void prepare(stress_store *st, int64_t *ret_head)
{
	memd_call call = stress_call();
	memd_error err = { 0 };

	for (int s = 0; s < SESSIONS; s++) {
		char sid[ID_LEN], pid[ID_LEN], ids[EVENTS][ID_LEN];
		memd_scope sc;
		memd_event evs[EVENTS];
		const memd_event *ep[EVENTS];
		int64_t seqs[EVENTS];
		memd_append a = { .struct_size = sizeof(a), .events = ep, .n_events = EVENTS,
				  .now_us = T0 };
		memd_append_result res = { .struct_size = sizeof(res), .seqs = seqs };
		memd_memory m;
		memd_memory_write w = { .struct_size = sizeof(w), .op = MEMD_MEM_ADD,
					.memory = &m, .actor = "api" };
		const memd_memory_write *wp[1] = { &w };
		memd_memory_commit mc = { .struct_size = sizeof(mc), .n_writes = 1, .writes = wp,
					  .now_us = T0 };

		session_id(sid, sizeof(sid), s);
		sc = stress_scope(APP, USER, sid);
		cr_assert_eq(stress_session_ensure(st, &sc, &err), 0, "%s", err.msg);
		for (int e = 0; e < EVENTS; e++) {
			snprintf(ids[e], sizeof(ids[e]), "e%d", e);
			stress_event(&evs[e], ids[e], "an event", T0);
			ep[e] = &evs[e];
		}
		cr_assert_eq(st->ops->append(st->h, &call, &sc, &a, &res, &err), 0, "%s", err.msg);
		profile_id(pid, sizeof(pid), s);
		m = memory(pid, "the profile", sid);
		sc = stress_scope(APP, USER, NULL);
		cr_assert_eq(st->ops->memory_commit(st->h, &call, &sc, &mc, NULL, &err), 0, "%s",
			     err.msg);
	}
	cr_assert_eq(st->ops->feed_head(st->h, &call, ret_head, &err), 0, "%s", err.msg);
}

/* Wait for both children's ready bytes of a round, reading the feed
 * while they commit. */
static void tail_until_ready(stress_store *st, tail *t, int ready_fd)
{
	for (int got = 0; got < N_PROCS;) {
		struct pollfd p = { .fd = ready_fd, .events = POLLIN };
		int n = poll(&p, 1, TAIL_POLL_MS);
		char r;

		cr_assert_geq(n, 0, "poll");
		if (n > 0) {
			cr_assert_eq(read(ready_fd, &r, 1), 1, "a child died: see its stderr");
			got++;
		}
		tail_read(st, t);
	}
}

static void check(stress_store *st, int codes[ROUNDS][SESSIONS][N_PROCS], tail *t)
{
	memd_memory_sink ms = { .struct_size = sizeof(ms), .memory = count_memory };
	memd_session_sink ss = { .struct_size = sizeof(ss) };
	memd_memory_query q = { .struct_size = sizeof(q), .limit = LIST_LIMIT, .now_us = T0 };
	memd_pending_query pq = { .struct_size = sizeof(pq), .limit = SESSIONS,
				  .updated_before_us = INT64_MAX };
	memd_call call = stress_call();
	memd_scope sc = stress_scope(APP, USER, NULL);
	memd_error err = { 0 };
	size_t n_memories = 0, n_pending = 0;
	int wins[N_PROCS] = { 0 };

	for (int round = 0; round < ROUNDS; round++)
		for (int s = 0; s < SESSIONS; s++) {
			int *c = codes[round][s];
			cr_assert((c[0] == 0 && c[1] == MEMD_ECONFLICT) ||
				  (c[1] == 0 && c[0] == MEMD_ECONFLICT),
				  "round %d session %d: codes %d and %d, not one winner", round, s,
				  c[0], c[1]);
			wins[c[0] == 0 ? 0 : 1]++;
			for (int p = 0; p < N_PROCS; p++)
				for (int k = 0; k < BATCH; k++) {
					char id[ID_LEN];
					size_t want = c[p] == 0;
					memory_id(id, sizeof(id), s, round, p, k);
					cr_assert_eq(history_rows(st, id), want,
						     "memory '%s': %s history row(s), want %zu", id,
						     want ? "not 1" : "some", want);
					cr_assert_eq(t->added_seen[s][round][p][k], (int)want,
						     "memory '%s' seen %d times by the feed tailer", id,
						     t->added_seen[s][round][p][k]);
				}
		}
	for (int s = 0; s < SESSIONS; s++) {
		char pid[ID_LEN];
		profile_id(pid, sizeof(pid), s);
		cr_assert_eq(history_rows(st, pid), 1 + ROUNDS, "profile %d changed %zu times", s,
			     history_rows(st, pid) - 1);
		cr_assert_eq(t->profile_version[s], 1 + ROUNDS,
			     "the tailer's last profile %d is version %lld", s,
			     (long long)t->profile_version[s]);
	}
	ms.userdata = &n_memories;
	cr_assert_eq(st->ops->memory_list(st->h, &call, &sc, &q, &ms, &err), 0, "%s", err.msg);
	cr_assert_eq(n_memories, N_ADDED + SESSIONS, "%zu memories, want %d", n_memories,
		     N_ADDED + SESSIONS);
	ss.session = count_session;
	ss.userdata = &n_pending;
	cr_assert_eq(st->ops->session_list_pending(st->h, &call, &pq, &ss, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(n_pending, 0, "%zu sessions still pending", n_pending);
	cr_log_info("child 0 won %d and child 1 won %d of %d races; the tailer read %zu records",
		    wins[0], wins[1], ROUNDS * SESSIONS, t->n_records);
}

Test(memories_race, two_processes_commit_the_same_batches, .timeout = 150)
{
	static int codes[ROUNDS][SESSIONS][N_PROCS];
	static tail t;
	char *name = stress_unique_name("mem");
	char dir[] = "/tmp/memd-mem-race-XXXXXX";
	stress_crew crew;
	memd_error err = { 0 };
	stress_store *st;

	cr_assert_not_null(name);
	cr_assert_not_null(mkdtemp(dir));
	st = stress_open(NULL, name, NULL, &err);
	cr_assert_not_null(st, "%s", err.msg);
	prepare(st, &t.after);

	/* The children open stores of their own; the parent's is the
	 * parent's to close. */
	cr_assert_eq(stress_crew_start(&crew, N_PROCS, dir, child_main, name), 0, "fork failed");
	/* Round by round: both start at once; the parent tails the feed
	 * until both are done. */
	for (int round = 0; round < ROUNDS; round++) {
		cr_assert_eq(stress_crew_go(&crew), 0);
		tail_until_ready(st, &t, crew.ready);
	}
	tail_read(st, &t);
	for (int p = 0; p < N_PROCS; p++) {
		int round, s, code;
		FILE *f = stress_crew_reap(&crew, p);
		cr_assert_not_null(f, "child %d failed", p);
		while (fscanf(f, "%d %d %d", &round, &s, &code) == 3)
			codes[round][s][p] = code;
		fclose(f);
	}
	stress_crew_close(&crew);
	check(st, codes, &t);
	stress_close(st);
	rmdir(dir);
	free(name);
}
