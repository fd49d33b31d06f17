/* SPDX-License-Identifier: MIT */
/*
 * Two memd processes (a libmemd handle in each of two forked children)
 * over one database server (stress_util.h says which): in every round one
 * rewinds the last user turn of a session while the other appends a user
 * message to it, started at once by the parent through pipes.
 *
 *  - with expected_version (both expect the version the parent saw): one
 *    wins, the other gets MEMD_ECONFLICT and wrote nothing;
 *  - without: both apply, in some order (the rewind hides the new
 *    message, or the message follows the rewound session).
 *
 * Either way nothing is half done: the version counts exactly the writes
 * that succeeded, every hidden event names an operation the session has,
 * each operation hid exactly hidden_count events, and the visible events
 * are one of the outcomes of the writes applied one after the other.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memd/memd.h>

#include "stress_util.h"

#define N_PROCS 2
#define ROUNDS 24               /* per phase */
#define TURNS 3                 /* user + assistant each: seqs 1..6 */
#define BASE_VERSION (2 * TURNS) /* one append per event */

enum { PHASE_EXPECT, PHASE_FREE, N_PHASES };

static memd *open_memd(const char *yaml_path)
{
	memd_options o = { .struct_size = sizeof(o), .config_path = yaml_path };
	memd_error err = { 0 };
	memd *m = NULL;
	if (memd_open(&o, &m, &err) != 0) {
		fprintf(stderr, "memd_open: %s\n", err.msg);
		return NULL;
	}
	return m;
}

static void session_id(char *buf, size_t cap, int phase, int round)
{
	snprintf(buf, cap, "p%dr%d", phase, round);
}

/* A child: p 0 rewinds, p 1 appends; a round starts on a byte from go_fd
 * and its result code ("<round> <code>" lines in out) is followed by a
 * byte on ready_fd. */
static int child_main(void *yaml_path, int p, int go_fd, int ready_fd, const char *out_path)
{
	memd *m = open_memd(yaml_path);
	FILE *f = fopen(out_path, "w");
	char go;

	if (!m || !f)
		return 1;
	for (int phase = 0; phase < N_PHASES; phase++)
		for (int round = 0; round < ROUNDS; round++) {
			memd_error err = { 0 };
			char sid[32], body[256], *out = NULL;
			const char *ver = phase == PHASE_EXPECT ? ",\"expected_version\":6" : "";
			int32_t r;

			if (read(go_fd, &go, 1) != 1)
				return 1;
			session_id(sid, sizeof(sid), phase, round);
			if (p == 0) {
				snprintf(body, sizeof(body), "{\"turns\":1%s}", ver);
				r = memd_session_rewind(m, "race", "u", sid, body, &out, &err);
			} else {
				snprintf(body, sizeof(body),
					 "{\"events\":[{\"id\":\"late\",\"role\":\"user\","
					 "\"content\":\"late\"}]%s}",
					 ver);
				r = memd_events_append(m, "race", "u", sid, body, &out, &err);
			}
			memd_free(out);
			if (r != 0 && r != MEMD_ECONFLICT)
				fprintf(stderr, "child %d: %s\n", p, err.msg);
			fprintf(f, "%d %d %d\n", phase, round, (int)r);
			fflush(f);
			if (write(ready_fd, "r", 1) != 1)
				return 1;
		}
	fclose(f);
	memd_close(m);
	return 0;
}

/* The answer *out of a call that returned r (read after the call: a
 * pointer, since argument order is unspecified). */
static json_t *call_json(int32_t r, char **out, const memd_error *err)
{
	cr_assert_eq(r, 0, "%s", err->msg);
	json_t *o = json_loads(*out, 0, NULL);
	memd_free(*out);
	*out = NULL;
	cr_assert_not_null(o);
	return o;
}

static void prepare(memd *m, const char *sid)
{
	memd_error err = { 0 };
	char body[256], *out = NULL;

	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	json_decref(call_json(memd_session_create(m, "race", "u", body, &out, &err), &out, &err));
	for (int t = 0; t < TURNS; t++) {
		snprintf(body, sizeof(body),
			 "{\"events\":[{\"role\":\"user\",\"content\":\"q%d\"}]}", t);
		json_decref(call_json(memd_events_append(m, "race", "u", sid, body, &out, &err), &out,
				      &err));
		snprintf(body, sizeof(body),
			 "{\"events\":[{\"role\":\"assistant\",\"content\":\"a%d\"}]}", t);
		json_decref(call_json(memd_events_append(m, "race", "u", sid, body, &out, &err), &out,
				      &err));
	}
}

/* How often each write came first, per phase (reported, not asserted:
 * the order is the race's). */
static int rewind_first[N_PHASES];

/* The session after a round whose rewind returned rr and append ra. */
static void check(memd *m, int phase, int round, int rr, int ra)
{
	memd_error err = { 0 };
	char sid[32], visible[128], *out = NULL;
	json_t *s, *page, *ops, *e, *op;
	size_t i, j, nv = 0, n_ok = (rr == 0) + (ra == 0);
	int late_hidden = 0, late_seen = 0;

	session_id(sid, sizeof(sid), phase, round);
	if (phase == PHASE_EXPECT) {
		cr_assert_eq(n_ok, 1, "round %d: rewind %d, append %d: not one winner", round, rr, ra);
		cr_assert(rr == MEMD_ECONFLICT || ra == MEMD_ECONFLICT);
	} else {
		cr_assert_eq(n_ok, 2, "round %d: rewind %d, append %d: both apply without "
				      "expected_version", round, rr, ra);
	}
	s = call_json(memd_session_get(m, "race", "u", sid, NULL, &out, &err), &out, &err);
	cr_assert_eq(json_integer_value(json_object_get(s, "version")),
		     BASE_VERSION + (json_int_t)n_ok, "round %d: version %lld after %zu writes",
		     round, (long long)json_integer_value(json_object_get(s, "version")), n_ok);
	page = call_json(memd_events_query(m, "race", "u", sid, 0, 0, NULL,
					   MEMD_READ_INCLUDE_HIDDEN, &out, &err),
			 &out, &err);
	ops = call_json(memd_operations_list(m, "race", "u", sid, &out, &err), &out, &err);
	cr_assert_eq(json_array_size(json_object_get(ops, "operations")), rr == 0 ? 1u : 0u);
	/* Every hidden event names an operation, which hid exactly as many. */
	json_array_foreach(json_object_get(ops, "operations"), j, op) {
		json_int_t n = 0;
		json_array_foreach(json_object_get(page, "events"), i, e) {
			json_t *h = json_object_get(e, "hidden");
			n += json_is_object(h) &&
			     strcmp(json_string_value(json_object_get(h, "by")),
				    json_string_value(json_object_get(op, "id"))) == 0;
		}
		cr_assert_eq(n, json_integer_value(json_object_get(op, "hidden_count")),
			     "round %d: operation hid %lld events, says %lld", round, (long long)n,
			     (long long)json_integer_value(json_object_get(op, "hidden_count")));
	}
	visible[0] = '\0';
	json_array_foreach(json_object_get(page, "events"), i, e) {
		json_t *h = json_object_get(e, "hidden");
		int is_late = strcmp(json_string_value(json_object_get(e, "id")), "late") == 0;
		late_seen |= is_late;
		if (json_is_object(h)) {
			cr_assert(json_object_size(ops), "round %d: a hidden event, no operation",
				  round);
			late_hidden |= is_late;
			continue;
		}
		nv += (size_t)snprintf(visible + nv, sizeof(visible) - nv, "%s%s", nv ? "," : "",
				       is_late ? "late" : json_string_value(json_object_get(e, "text")));
	}
	cr_assert_eq(late_seen, ra == 0);
	/* One write after the other: the rewind alone hides q2 a2; the
	 * message alone follows; the rewind after the message hides it; the
	 * message after the rewind follows q1 a1. */
	rewind_first[phase] += phase == PHASE_EXPECT ? rr == 0 : !late_hidden;
	if (rr == 0 && ra != 0)
		cr_assert_str_eq(visible, "q0,a0,q1,a1", "round %d", round);
	else if (rr != 0)
		cr_assert_str_eq(visible, "q0,a0,q1,a1,q2,a2,late", "round %d", round);
	else if (late_hidden)
		cr_assert_str_eq(visible, "q0,a0,q1,a1,q2,a2", "round %d", round);
	else
		cr_assert_str_eq(visible, "q0,a0,q1,a1,late", "round %d", round);
	json_decref(s);
	json_decref(page);
	json_decref(ops);
}

Test(transcripts_race, a_rewind_racing_an_append_on_another_memd, .timeout = 150)
{
	char *name = stress_unique_name("tx");
	char dir[] = "/tmp/memd-tx-race-XXXXXX", yaml_path[64], *yaml = NULL, *map;
	const char *tmpl = getenv("MEMD_STRESS_CONFIG");
	int codes[N_PHASES][ROUNDS][N_PROCS];
	stress_crew crew;
	memd *m;
	FILE *f;

	cr_assert_not_null(name);
	cr_assert_not_null(tmpl, "MEMD_STRESS_CONFIG is not set");
	cr_assert_not_null(mkdtemp(dir));
	/* The store's map from the template, @NAME@ made unique. */
	map = strdup(tmpl);
	cr_assert_not_null(map);
	for (char *p; (p = strstr(map, "@NAME@"));) {
		char *n = NULL;
		cr_assert(asprintf(&n, "%.*s%s%s", (int)(p - map), map, name, p + 6) > 0);
		free(map);
		map = n;
	}
	cr_assert(asprintf(&yaml, "stores:\n  main: %s\n", map) > 0);
	free(map);
	snprintf(yaml_path, sizeof(yaml_path), "%s/memd.yaml", dir);
	f = fopen(yaml_path, "w");
	cr_assert_not_null(f);
	fputs(yaml, f);
	fclose(f);
	free(yaml);

	m = open_memd(yaml_path);
	cr_assert_not_null(m);
	for (int phase = 0; phase < N_PHASES; phase++)
		for (int round = 0; round < ROUNDS; round++) {
			char sid[32];
			session_id(sid, sizeof(sid), phase, round);
			prepare(m, sid);
		}
	/* No memd (and none of its threads) across the fork: a child forked
	 * while one of them held a lock (the allocator's, say) would wait
	 * for it forever. The parent opens a new one to check. */
	memd_close(m);

	cr_assert_eq(stress_crew_start(&crew, N_PROCS, dir, child_main, yaml_path), 0,
		     "fork failed");
	/* Round by round: both start at once; the next once both are done. */
	for (int i = 0; i < N_PHASES * ROUNDS; i++) {
		cr_assert_eq(stress_crew_go(&crew), 0);
		cr_assert_eq(stress_crew_wait(&crew), 0, "a child died: see its stderr");
	}
	for (int p = 0; p < N_PROCS; p++) {
		int phase, round, code;
		f = stress_crew_reap(&crew, p);
		cr_assert_not_null(f, "child %d failed", p);
		while (fscanf(f, "%d %d %d", &phase, &round, &code) == 3)
			codes[phase][round][p] = code;
		fclose(f);
	}
	stress_crew_close(&crew);
	m = open_memd(yaml_path);
	cr_assert_not_null(m);
	for (int phase = 0; phase < N_PHASES; phase++)
		for (int round = 0; round < ROUNDS; round++)
			check(m, phase, round, codes[phase][round][0], codes[phase][round][1]);
	cr_log_info("the rewind came first in %d of %d rounds with expected_version, %d of %d "
		    "without", rewind_first[PHASE_EXPECT], ROUNDS, rewind_first[PHASE_FREE], ROUNDS);
	memd_close(m);
	unlink(yaml_path);
	rmdir(dir);
	free(name);
}
