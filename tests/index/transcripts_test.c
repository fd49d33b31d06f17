/* SPDX-License-Identifier: MIT */
/*
 * The search indexes follow the transcript operations (through the
 * facade on the sqlite store, once per vector store): a rewind's hidden
 * events leave the keyword and the vector index (not only the results:
 * hidden events that stayed indexed would crowd a visible one out of the
 * candidates a search fetches), an undo brings them back, a rebuild of
 * one user or of everything answers exactly as following the feed did,
 * and a keyword snapshot written after a rewind, loaded at the next start
 * and caught up over an undo answers as a rebuild from the feed does.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index_util.h"

#define APP "app"
#define USER "u1"
#define SID "s1"
#define BURIED 20          /* events a rewind hides, each a better match */
#define OUT_MAX (1 << 16)
#define SNAP_LINE "loaded the snapshot"

static ix_env env;

static void setup(void)
{
	ix_env_make(&env);
}

static void teardown(void)
{
	ix_env_remove(&env);
}

TestSuite(transcripts, .init = setup, .fini = teardown, .timeout = 120);

static const char *const modes[] = { "keyword", "vector", "hybrid" };
#define N_MODES (sizeof(modes) / sizeof(modes[0]))

/* One visible match ("pelican zebra"), then BURIED better ones
 * ("pelican pelican pelican") that a rewind of BURIED turns hides. Returns
 * the visible one's event id (malloc'd). */
static char *fill(memd *m)
{
	char *keep = ix_append(m, APP, USER, SID, "pelican zebra", NULL, 0);
	for (int i = 0; i < BURIED; i++)
		free(ix_append(m, APP, USER, SID, "pelican pelican pelican", NULL, 0));
	return keep;
}

/* memd_session_rewind / memd_operation_undo; returns the operation id
 * (malloc'd). */
static char *rewind_turns(memd *m, int turns)
{
	char body[64], *out = NULL, *id;
	memd_error err = { 0 };
	json_t *res;

	snprintf(body, sizeof(body), "{\"turns\":%d}", turns);
	cr_assert_eq(memd_session_rewind(m, APP, USER, SID, body, &out, &err), 0, "rewind: %s",
		     err.msg);
	res = json_loads(out, 0, NULL);
	cr_assert_not_null(res);
	cr_assert_eq(json_integer_value(json_object_get(res, "rewound_count")), turns);
	id = strdup(json_string_value(json_object_get(json_object_get(res, "operation"), "id")));
	json_decref(res);
	memd_free(out);
	return id;
}

static void undo(memd *m, const char *op)
{
	char *out = NULL;
	memd_error err = { 0 };

	cr_assert_eq(memd_operation_undo(m, APP, USER, SID, op, NULL, &out, &err), 0, "undo: %s",
		     err.msg);
	memd_free(out);
}

/* The results of query in mode with k, as text (ids and scores). */
static void results(memd *m, const char *mode, const char *query, int k, char *out, size_t cap)
{
	json_t *res = ix_search(m, APP, USER, "{\"query\":\"%s\",\"mode\":\"%s\",\"k\":%d}", query,
				mode, k);
	json_t *hit;
	size_t i, used = 0;

	out[0] = '\0';
	json_array_foreach(ix_results(res), i, hit) {
		used += (size_t)snprintf(out + used, cap - used, "%s %lld %.17g\n",
					 json_string_value(json_object_get(hit, "event_id")),
					 (long long)json_integer_value(json_object_get(hit, "seq")),
					 json_real_value(json_object_get(hit, "score")));
		cr_assert_lt(used, cap - 1);
	}
	json_decref(res);
}

static size_t count_results(memd *m, const char *mode, const char *query, int k)
{
	json_t *res = ix_search(m, APP, USER, "{\"query\":\"%s\",\"mode\":\"%s\",\"k\":%d}", query,
				mode, k);
	size_t n = json_array_size(ix_results(res));
	json_decref(res);
	return n;
}

/* The results of a few queries in the first n_modes modes, as text. */
static char *collect_modes(memd *m, size_t n_modes)
{
	static const char *const queries[] = { "pelican", "zebra", "pelican zebra" };
	char *all = malloc(OUT_MAX), one[OUT_MAX / 8];
	size_t used = 0;

	cr_assert_not_null(all);
	all[0] = '\0';
	for (size_t q = 0; q < sizeof(queries) / sizeof(queries[0]); q++)
		for (size_t i = 0; i < n_modes; i++) {
			results(m, modes[i], queries[q], 50, one, sizeof(one));
			used += (size_t)snprintf(all + used, OUT_MAX - used, "%s %s:\n%s", modes[i],
						 queries[q], one);
			cr_assert_lt(used, OUT_MAX - 1);
		}
	return all;
}

static char *collect(memd *m)
{
	return collect_modes(m, N_MODES);
}

Test(transcripts, hidden_events_leave_every_index_and_come_back_on_undo)
{
	char *keep, *op, got[OUT_MAX / 8], want[256];
	memd *m;

	ix_write_config(&env, IX_KEYWORD | IX_VECTOR, NULL);
	m = ix_open(&env);
	keep = fill(m);
	op = rewind_turns(m, BURIED);
	/* k = 1: the search fetches k plus a few candidates; hidden events
	 * still indexed would fill them all and leave nothing. */
	snprintf(want, sizeof(want), "%s 1 ", keep);
	for (size_t i = 0; i < N_MODES; i++) {
		results(m, modes[i], "pelican", 1, got, sizeof(got));
		cr_assert(strncmp(got, want, strlen(want)) == 0,
			  "%s: the visible event is not found after a rewind: \"%s\"", modes[i], got);
	}
	undo(m, op);
	for (size_t i = 0; i < N_MODES; i++)
		cr_assert_eq(count_results(m, modes[i], "pelican", 50), BURIED + 1,
			     "%s: the events an undo made visible again are not all found",
			     modes[i]);
	/* Hidden again by a new rewind. */
	free(op);
	op = rewind_turns(m, BURIED);
	for (size_t i = 0; i < N_MODES; i++)
		cr_assert_eq(count_results(m, modes[i], "pelican", 50), 1, "%s", modes[i]);
	memd_close(m);
	free(op);
	free(keep);
}

Test(transcripts, a_rebuild_gives_the_index_the_feed_gave)
{
	char *keep, *op, *followed, *rebuilt;
	memd_error err = { 0 };
	memd *m;

	ix_write_config(&env, IX_KEYWORD | IX_VECTOR, NULL);
	m = ix_open(&env);
	keep = fill(m);
	op = rewind_turns(m, BURIED);
	undo(m, op);
	free(op);
	op = rewind_turns(m, BURIED / 2);
	free(ix_append(m, APP, USER, SID, "pelican after the rewind", NULL, 0));
	followed = collect(m);
	cr_assert_eq(memd_index_rebuild(m, APP, USER, NULL, NULL, &err), 0, "rebuild: %s", err.msg);
	rebuilt = collect(m);
	cr_assert_str_eq(rebuilt, followed, "a rebuild of the user answers differently");
	free(rebuilt);
	cr_assert_eq(memd_index_rebuild(m, NULL, NULL, NULL, NULL, &err), 0, "rebuild: %s", err.msg);
	rebuilt = collect(m);
	cr_assert_str_eq(rebuilt, followed, "a full rebuild answers differently");
	memd_close(m);
	free(rebuilt);
	free(followed);
	free(op);
	free(keep);
}

/* ---- keyword snapshots ----------------------------------------------------------- */

/* Open with the keyword index only; snapshot: the YAML value of
 * index.keyword.snapshot. loaded: whether the start must have loaded the
 * snapshot (seen once a search answered: the index caught up). */
static memd *open_keyword(const char *snapshot, int loaded)
{
	static ix_logbuf lb = { .mu = PTHREAD_MUTEX_INITIALIZER };
	memd_options o = { .struct_size = sizeof(o), .config_path = env.config_path,
			   .log = ix_keyword_log, .log_userdata = &lb, .log_level = MEMD_LOG_INFO };
	memd_error err = { 0 };
	memd *m = NULL;
	FILE *f = fopen(env.config_path, "w");

	cr_assert_not_null(f);
	fprintf(f,
		"stores:\n"
		"  main: {plugin: sqlite, path: \"%s/memd.db\"}\n"
		"index:\n"
		"  keyword: {enabled: true, snapshot: %s}\n",
		env.dir, snapshot);
	cr_assert_eq(fclose(f), 0);
	pthread_mutex_lock(&lb.mu);
	lb.n = 0;
	lb.text[0] = '\0';
	pthread_mutex_unlock(&lb.mu);
	cr_assert_eq(memd_open(&o, &m, &err), 0, "memd_open: %s", err.msg);
	(void)count_results(m, "keyword", "zebra", 1);
	pthread_mutex_lock(&lb.mu);
	cr_assert_eq(strstr(lb.text, SNAP_LINE) != NULL, loaded, "%s:\n%s",
		     loaded ? "the snapshot was not loaded" : "a snapshot was loaded", lb.text);
	pthread_mutex_unlock(&lb.mu);
	return m;
}

Test(transcripts, a_snapshot_after_a_rewind_then_an_undo_answers_as_a_rebuild)
{
	char *keep, *op, *got, *want;
	memd *m;

	/* Hide, then close: the snapshot is written without the hidden
	 * events. */
	m = open_keyword("true", 0);
	keep = fill(m);
	op = rewind_turns(m, BURIED);
	memd_close(m);
	/* Restart from it: the hidden events are not there. */
	m = open_keyword("true", 1);
	got = collect_modes(m, 1);
	cr_assert_eq(count_results(m, "keyword", "pelican", 50), 1);
	memd_close(m);
	m = open_keyword("false", 0);
	want = collect_modes(m, 1);
	memd_close(m);
	cr_assert_str_eq(got, want, "a restart from the snapshot answers differently from a rebuild");
	free(got);
	free(want);
	/* Undo after the snapshot: the catch-up from it indexes them again
	 * (a memd without snapshots writes, the file stays as it was). */
	m = open_keyword("false", 0);
	undo(m, op);
	memd_close(m);
	m = open_keyword("true", 1);
	got = collect_modes(m, 1);
	cr_assert_eq(count_results(m, "keyword", "pelican", 50), BURIED + 1);
	memd_close(m);
	m = open_keyword("false", 0);
	want = collect_modes(m, 1);
	memd_close(m);
	cr_assert_str_eq(got, want, "caught up over an undo, the snapshot answers differently");
	free(got);
	free(want);
	free(op);
	free(keep);
}
