/* SPDX-License-Identifier: MIT */
/*
 * Two processes (a store instance in each of two forked children) over
 * one database server (stress_util.h says which) race what two memd
 * processes serving one agent runtime race: round by round, started at
 * once by the parent through pipes, both
 *
 *  - put root checkpoints into the same sessions (creating each session
 *    with its first checkpoint, as a LangGraph thread appears): the ids
 *    of a round interleave (one child has the even ones, the other the
 *    odd ones, swapped every round), each child putting its own in
 *    ascending order, so that whichever commits last, a head that simply
 *    took the last put would end below the greatest id;
 *  - put every task of a set, expecting the version the rounds so far
 *    left, each with a state and JSON naming the child and round;
 *  - create the round's new task (create-only).
 *
 * Checked after every round: each session's head (as the resumable
 * listing reads it) is the greatest id put so far; of the two puts of
 * each task exactly one won and the other got MEMD_ECONFLICT, and the
 * stored task is the winner's whole (its state, its JSON, the version
 * one more); exactly one create won. At the end: every session was
 * created once (by one put), every checkpoint put is stored.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stress_util.h"

#define N_PROCS 2
#define SESSIONS 4
#define PUTS 4                       /* checkpoints per child, session and round */
#define SLOTS (N_PROCS * PUTS)       /* ids per session and round */
#define ROUNDS 10
#define TASKS 8
#define APP "ckrace"
#define USER "u"
#define T0 1700000000000000LL        /* a plausible unix time in us */
#define ID_LEN 48
#define JSON_LEN 160
#define LIST_LIMIT 1000              /* more than every checkpoint of a session */
#define KIND_TASK 0                  /* result lines: a task's conditional put */
#define KIND_CREATE 1                /* the round's create-only put */
#define KIND_SESSION 2               /* a put that created its session */

static const char *const states[N_PROCS] = { "working", "input-required" };

static void session_id(char *buf, size_t cap, int s)
{
	snprintf(buf, cap, "thread-%d", s);
}

/* Fixed width: byte order is numeric order. */
static void checkpoint_id(char *buf, size_t cap, int n)
{
	snprintf(buf, cap, "%08d", n);
}

static void task_id(char *buf, size_t cap, int t)
{
	snprintf(buf, cap, "task-%d", t);
}

static void new_task_id(char *buf, size_t cap, int round)
{
	snprintf(buf, cap, "new-%d", round);
}

static void task_json(char *buf, size_t cap, const char *id, int c, int round)
{
	snprintf(buf, cap,
		 "{\"kind\": \"task\", \"id\": \"%s\", \"contextId\": \"ctx\","
		 " \"status\": {\"state\": \"%s\"}, \"metadata\": {\"child\": %d, \"round\": %d}}",
		 id, states[c], c, round);
}

/* Child c's k-th id of a round (0 <= k < PUTS), ascending in k: the even
 * or odd ones, swapped every round. */
static int checkpoint_n(int c, int round, int k)
{
	return round * SLOTS + k * N_PROCS + (c + round) % N_PROCS;
}

/* The greatest id of the rounds up to round. */
static int greatest_n(int round)
{
	return round * SLOTS + SLOTS - 1;
}

static int32_t put_checkpoint(stress_store *st, int c, int s, int round, int k,
			      int *ret_created, memd_error *err)
{
	char sid[ID_LEN], id[ID_LEN], parent[ID_LEN], payload[ID_LEN];
	int n = checkpoint_n(c, round, k);
	memd_call call = stress_call();
	memd_checkpoint ck = { .struct_size = sizeof(ck), .run_state = MEMD_RUN_RUNNING,
			       .app = APP, .user = USER, .ns = "", .type = "json",
			       .metadata_json = "{\"source\": \"loop\"}" };

	session_id(sid, sizeof(sid), s);
	checkpoint_id(id, sizeof(id), n);
	checkpoint_id(parent, sizeof(parent), n - N_PROCS);
	snprintf(payload, sizeof(payload), "{\"child\": %d, \"n\": %d}", c, n);
	ck.session = sid;
	ck.id = id;
	ck.parent_id = n >= N_PROCS ? parent : NULL;
	ck.payload = payload;
	ck.payload_size = strlen(payload);
	return st->ops->checkpoint_put(st->h, &call, &ck, 1, T0 + round, ret_created, err);
}

static int32_t put_task(stress_store *st, const char *id, int c, int round, uint32_t flags,
			int64_t expected_version, memd_error *err)
{
	char json[JSON_LEN];
	memd_call call = stress_call();
	memd_task t = { .struct_size = sizeof(t), .app = APP, .id = id, .context_id = "ctx",
			.state = states[c], .task_json = json };

	task_json(json, sizeof(json), id, c, round);
	return st->ops->task_put(st->h, &call, &t, flags, expected_version, T0 + round, NULL, err);
}

/* One round of child c; its results as "<round> <kind> <index> <code>"
 * lines. */
static int child_round(stress_store *st, int c, int round, FILE *f)
{
	memd_error err = { 0 };
	char id[ID_LEN];
	int32_t r;

	for (int k = 0; k < PUTS; k++)
		for (int s = 0; s < SESSIONS; s++) {
			int created = 0;
			r = put_checkpoint(st, c, s, round, k, &created, &err);
			if (r != 0) {
				fprintf(stderr, "child %d round %d session %d put %d: %s\n", c,
					round, s, k, err.msg);
				return 1;
			}
			if (created)
				fprintf(f, "%d %d %d %d\n", round, KIND_SESSION, s, 0);
		}
	for (int t = 0; t < TASKS; t++) {
		task_id(id, sizeof(id), t);
		r = put_task(st, id, c, round, 0, round + 1, &err);
		if (r != 0 && r != MEMD_ECONFLICT)
			fprintf(stderr, "child %d round %d task %d: %s\n", c, round, t, err.msg);
		fprintf(f, "%d %d %d %d\n", round, KIND_TASK, t, (int)r);
	}
	new_task_id(id, sizeof(id), round);
	r = put_task(st, id, c, round, MEMD_TASK_CREATE, 0, &err);
	if (r != 0 && r != MEMD_ECONFLICT)
		fprintf(stderr, "child %d round %d create: %s\n", c, round, err.msg);
	fprintf(f, "%d %d %d %d\n", round, KIND_CREATE, 0, (int)r);
	return 0;
}

/* A child: on each byte from go_fd, one round, then a byte on ready_fd. */
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
		if (child_round(st, c, round, f) != 0)
			return 1;
		fflush(f);
		if (write(ready_fd, "r", 1) != 1)
			return 1;
	}
	fclose(f);
	stress_close(st);
	return 0;
}

/* ---- the parent's reads ------------------------------------------------ */

typedef struct heads {
	char id[SESSIONS][ID_LEN];
	size_t n;
} heads;

static int32_t keep_head(void *userdata, const memd_checkpoint *ck)
{
	heads *h = userdata;
	int s;

	cr_assert_eq(sscanf(ck->session, "thread-%d", &s), 1, "session '%s'", ck->session);
	cr_assert(s >= 0 && s < SESSIONS);
	cr_assert_str_eq(ck->ns, "");
	cr_assert_eq(ck->payload_size, 0, "the resumable listing delivers no payload");
	snprintf(h->id[s], sizeof(h->id[s]), "%s", ck->id);
	h->n++;
	return 0;
}

/* Every session's head, as the resumable listing reads it. */
static void read_heads(stress_store *st, heads *h)
{
	memd_checkpoint_sink sink = { .struct_size = sizeof(sink), .checkpoint = keep_head,
				      .userdata = h };
	memd_resumable_query q = { .struct_size = sizeof(q), .limit = SESSIONS + 1, .app = APP,
				   .run_states = 1u << MEMD_RUN_RUNNING, .now_us = T0 };
	memd_call call = stress_call();
	memd_error err = { 0 };

	memset(h, 0, sizeof(*h));
	cr_assert_eq(st->ops->checkpoint_resumable(st->h, &call, &q, &sink, &err), 0, "%s",
		     err.msg);
}

typedef struct stored_task {
	char state[ID_LEN];
	char json[JSON_LEN];
	int64_t version;
} stored_task;

static int32_t keep_task(void *userdata, const memd_task *t)
{
	stored_task *x = userdata;

	snprintf(x->state, sizeof(x->state), "%s", t->state);
	snprintf(x->json, sizeof(x->json), "%s", t->task_json);
	x->version = t->version;
	return 0;
}

static void get_task(stress_store *st, const char *id, stored_task *x)
{
	memd_task_sink sink = { .struct_size = sizeof(sink), .task = keep_task, .userdata = x };
	memd_call call = stress_call();
	memd_error err = { 0 };

	memset(x, 0, sizeof(*x));
	cr_assert_eq(st->ops->task_get(st->h, &call, APP, id, &sink, &err), 0, "task '%s': %s", id,
		     err.msg);
}

/* The stored task is child c's put of round `round`, whole. */
static void check_task_is(stress_store *st, const char *id, int c, int round,
			  int64_t version)
{
	char json[JSON_LEN];
	stored_task x;

	get_task(st, id, &x);
	task_json(json, sizeof(json), id, c, round);
	cr_assert_eq(x.version, version, "task '%s' at version %lld, want %lld", id,
		     (long long)x.version, (long long)version);
	cr_assert_str_eq(x.state, states[c], "task '%s': the state of another put", id);
	cr_assert_str_eq(x.json, json, "task '%s': the JSON of another put", id);
}

/* Both children's result lines of a round (files read at the end). */
typedef struct results {
	int task[ROUNDS][TASKS][N_PROCS];
	int create[ROUNDS][N_PROCS];
	int sessions_created[SESSIONS];
} results;

/* The round's checks the parent can make as soon as both are done. */
static void check_round(stress_store *st, int round)
{
	char want[ID_LEN];
	heads h;

	read_heads(st, &h);
	cr_assert_eq(h.n, SESSIONS, "round %d: %zu heads", round, h.n);
	checkpoint_id(want, sizeof(want), greatest_n(round));
	for (int s = 0; s < SESSIONS; s++)
		cr_assert_str_eq(h.id[s], want, "round %d session %d: head %s, the greatest is %s",
				 round, s, h.id[s], want);
}

static int32_t count_checkpoint(void *userdata, const memd_checkpoint *ck)
{
	(void)ck;
	(*(size_t *)userdata)++;
	return 0;
}

static void check_results(stress_store *st, const results *res)
{
	memd_checkpoint_sink sink = { .struct_size = sizeof(sink), .checkpoint = count_checkpoint };
	memd_call call = stress_call();
	memd_scope sc = stress_scope(APP, USER, NULL);
	memd_error err = { 0 };
	int wins[N_PROCS] = { 0 };

	for (int t = 0; t < TASKS; t++) {
		char id[ID_LEN];
		int last_winner = -1;
		for (int round = 0; round < ROUNDS; round++) {
			const int *c = res->task[round][t];
			cr_assert((c[0] == 0 && c[1] == MEMD_ECONFLICT) ||
				  (c[1] == 0 && c[0] == MEMD_ECONFLICT),
				  "round %d task %d: codes %d and %d, not one winner", round, t,
				  c[0], c[1]);
			last_winner = c[0] == 0 ? 0 : 1;
			wins[last_winner]++;
		}
		task_id(id, sizeof(id), t);
		check_task_is(st, id, last_winner, ROUNDS - 1, 1 + ROUNDS);
	}
	for (int round = 0; round < ROUNDS; round++) {
		const int *c = res->create[round];
		char id[ID_LEN];
		cr_assert((c[0] == 0 && c[1] == MEMD_ECONFLICT) ||
			  (c[1] == 0 && c[0] == MEMD_ECONFLICT),
			  "round %d create: codes %d and %d, not one winner", round, c[0], c[1]);
		new_task_id(id, sizeof(id), round);
		check_task_is(st, id, c[0] == 0 ? 0 : 1, round, 1);
	}
	for (int s = 0; s < SESSIONS; s++) {
		char sid[ID_LEN];
		size_t n = 0;
		memd_checkpoint_query q = { .struct_size = sizeof(q), .limit = LIST_LIMIT,
					    .now_us = T0 };
		cr_assert_eq(res->sessions_created[s], 1, "session %d created by %d puts", s,
			     res->sessions_created[s]);
		session_id(sid, sizeof(sid), s);
		q.session = sid;
		sink.userdata = &n;
		cr_assert_eq(st->ops->checkpoint_list(st->h, &call, &sc, &q, &sink, &err), 0, "%s",
			     err.msg);
		cr_assert_eq(n, ROUNDS * SLOTS, "session %d holds %zu checkpoints, want %d", s, n,
			     ROUNDS * SLOTS);
	}
	cr_log_info("task puts won: child 0 %d, child 1 %d of %d", wins[0], wins[1],
		    ROUNDS * TASKS);
}

/* The tasks at version 1, the state each round's puts expect. */
static void prepare(stress_store *st)
{
	memd_error err = { 0 };

	for (int t = 0; t < TASKS; t++) {
		char id[ID_LEN];
		task_id(id, sizeof(id), t);
		cr_assert_eq(put_task(st, id, 0, -1, MEMD_TASK_CREATE, 0, &err), 0, "%s", err.msg);
	}
}

Test(checkpoints_race, two_processes_put_heads_and_tasks, .timeout = 150)
{
	static results res;
	char *name = stress_unique_name("ck");
	char dir[] = "/tmp/memd-ck-race-XXXXXX";
	stress_crew crew;
	memd_error err = { 0 };
	stress_store *st;

	cr_assert_not_null(name);
	cr_assert_not_null(mkdtemp(dir));
	st = stress_open(NULL, name, NULL, &err);
	cr_assert_not_null(st, "%s", err.msg);
	cr_assert_not_null(st->ops->checkpoint_put, "the store has no checkpoint ops");
	cr_assert_not_null(st->ops->task_put, "the store has no task ops");
	prepare(st);

	/* The children open stores of their own; the parent's is the
	 * parent's to close. */
	cr_assert_eq(stress_crew_start(&crew, N_PROCS, dir, child_main, name), 0, "fork failed");
	for (int round = 0; round < ROUNDS; round++) {
		cr_assert_eq(stress_crew_go(&crew), 0);
		cr_assert_eq(stress_crew_wait(&crew), 0, "a child died: see its stderr");
		check_round(st, round);
	}
	for (int p = 0; p < N_PROCS; p++) {
		int round, kind, i, code;
		FILE *f = stress_crew_reap(&crew, p);
		cr_assert_not_null(f, "child %d failed", p);
		while (fscanf(f, "%d %d %d %d", &round, &kind, &i, &code) == 4) {
			cr_assert(round >= 0 && round < ROUNDS);
			if (kind == KIND_TASK)
				res.task[round][i][p] = code;
			else if (kind == KIND_CREATE)
				res.create[round][p] = code;
			else
				res.sessions_created[i]++;
		}
		fclose(f);
	}
	stress_crew_close(&crew);
	check_results(st, &res);
	stress_close(st);
	rmdir(dir);
	free(name);
}
