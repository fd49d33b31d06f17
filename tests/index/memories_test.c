/* SPDX-License-Identifier: MIT */
/*
 * Long-term memories in the search indexes, through the facade
 * (memd_search, memd_index_rebuild) on the sqlite session store and the
 * vector store named by $MEMD_INDEX_VECTOR_STORE (index_util.h):
 * memories written by the store's memory_commit (as the facade's memory
 * calls do) are found by keyword (text, topics and entities) and by
 * vector, rank with events in one list, a new version replaces the old,
 * deletes and a user's delete remove them while a session's delete does
 * not, expired ones never come out (by the facade's clock), "sources"
 * chooses the kinds, event searches never return memories even when
 * many memories match better, users are isolated, a rebuild of the
 * user or of everything answers as following the feed did, the keyword
 * snapshot keeps memories across a restart, and index_search_results
 * (recall's and extraction's search) leaves out what it is told to.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index_util.h"
#include "service/service_int.h"

#define APP "app"
#define T0 1700000000000000LL /* the facade's clock at start, us */
#define TTL 1000000LL         /* an expiring memory's lifetime, us */
#define CROWD 30              /* memories that match better than the one event */

static ix_env env;
static memd *m;
static int64_t clock_us = T0;

static int64_t test_clock(void *ud)
{
	(void)ud;
	return clock_us;
}

static void setup(void)
{
	clock_us = T0;
	ix_env_make(&env);
	ix_write_config(&env, IX_KEYWORD | IX_VECTOR, NULL);
	m = ix_open(&env);
	memd_set_clock(m, test_clock, NULL);
}

static void teardown(void)
{
	memd_close(m);
	ix_env_remove(&env);
}

TestSuite(memories, .init = setup, .fini = teardown, .timeout = 90);

static const char *const modes[] = { "keyword", "vector", "hybrid" };
#define N_MODES 3

static int32_t no_memory(void *ud, const memd_memory *mem)
{
	(void)ud;
	(void)mem;
	return 0;
}

/* One memory write committed at the facade's clock (expires: 0 = never). */
static void commit(const char *user, uint32_t op, const char *id, const char *text,
		   const char *topics, const char *entities, int64_t expires)
{
	memd_memory mem = { .struct_size = sizeof(mem), .app = APP, .user = user, .id = id,
			    .text = text, .kind = "preference", .topics_json = topics ? topics : "[]",
			    .entities_json = entities ? entities : "[]", .updated_us = clock_us,
			    .expires_us = expires, .tokens = 4 };
	memd_memory_write w = { .struct_size = sizeof(w), .op = op, .memory = &mem, .actor = "api" };
	const memd_memory_write *ws[1] = { &w };
	memd_memory_commit c = { .struct_size = sizeof(c), .n_writes = 1, .writes = ws,
				 .now_us = clock_us };
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = user };
	memd_call call = { .struct_size = sizeof(call) };
	memd_memory_sink sink = { sizeof(sink), NULL, no_memory };
	memd_error err = { 0 };

	cr_assert_eq(store_memory_commit(m->sessions, &call, &sc, &c, &sink, &err), 0, "%s",
		     err.msg);
}

static void put(const char *user, const char *id, const char *text, const char *topics,
		const char *entities)
{
	commit(user, MEMD_MEM_ADD, id, text, topics, entities, 0);
}

/* How many results are memory id (id NULL: any memory). */
static size_t count_memory(json_t *res, const char *id)
{
	json_t *r = ix_results(res), *hit;
	size_t i, n = 0;

	json_array_foreach(r, i, hit) {
		const char *src = json_string_value(json_object_get(hit, "source"));
		const char *mid = json_string_value(json_object_get(hit, "memory_id"));
		cr_assert_not_null(src, "a result without its source");
		if (strcmp(src, "memory") == 0 && (!id || (mid && strcmp(mid, id) == 0)))
			n++;
	}
	return n;
}

static json_t *search_mode(const char *user, const char *mode, const char *sources,
			   const char *query, int k)
{
	return ix_search(m, APP, user, "{\"query\":\"%s\",\"mode\":\"%s\",\"sources\":%s,\"k\":%d}",
			 query, mode, sources, k);
}

Test(memories, found_by_keyword_and_vector_with_their_shape)
{
	json_t *res, *hit;

	ix_session(m, APP, "alice", "s1");
	free(ix_append(m, APP, "alice", "s1", "the window cleaner comes on friday", NULL, 0));
	put("alice", "m1", "prefers window seats on long flights", "[\"travel\"]",
	    "[\"Lufthansa\"]");

	for (int i = 0; i < N_MODES; i++) {
		res = search_mode("alice", modes[i], "[\"memories\"]", "window seats on flights", 10);
		cr_assert_eq(json_array_size(ix_results(res)), 1, "%s", modes[i]);
		hit = json_array_get(ix_results(res), 0);
		cr_assert_str_eq(json_string_value(json_object_get(hit, "source")), "memory");
		cr_assert_str_eq(json_string_value(json_object_get(hit, "memory_id")), "m1");
		cr_assert_str_eq(json_string_value(json_object_get(hit, "text")),
				 "prefers window seats on long flights");
		cr_assert_str_eq(json_string_value(json_object_get(hit, "kind")), "preference");
		cr_assert_str_eq(json_string_value(json_array_get(json_object_get(hit, "topics"), 0)),
				 "travel");
		cr_assert_str_eq(
			json_string_value(json_array_get(json_object_get(hit, "entities"), 0)),
			"Lufthansa");
		cr_assert_not_null(json_string_value(json_object_get(hit, "updated")));
		cr_assert(json_is_number(json_object_get(hit, "score")));
		cr_assert_null(json_object_get(hit, "session_id"));
		json_decref(res);

		/* Both kinds by default, in one list. */
		res = ix_search(m, APP, "alice", "{\"query\":\"window\",\"mode\":\"%s\"}", modes[i]);
		cr_assert_eq(count_memory(res, "m1"), 1, "%s", modes[i]);
		cr_assert_eq(json_array_size(ix_results(res)), 2, "%s", modes[i]);
		json_decref(res);

		res = search_mode("alice", modes[i], "[\"events\"]", "window", 10);
		cr_assert_eq(count_memory(res, NULL), 0, "%s", modes[i]);
		cr_assert_eq(json_array_size(ix_results(res)), 1, "%s", modes[i]);
		json_decref(res);
	}
	/* Topics and entities are a field of the keyword index. */
	res = search_mode("alice", "keyword", "[\"memories\"]", "lufthansa", 10);
	cr_assert_eq(count_memory(res, "m1"), 1);
	json_decref(res);
	res = search_mode("alice", "keyword", "[\"memories\"]", "travel", 10);
	cr_assert_eq(count_memory(res, "m1"), 1);
	json_decref(res);
}

Test(memories, an_update_replaces_and_deletes_remove)
{
	json_t *res;

	put("alice", "m1", "prefers window seats", NULL, NULL);
	commit("alice", MEMD_MEM_UPDATE, "m1", "prefers aisle seats", NULL, NULL, 0);
	res = search_mode("alice", "keyword", "[\"memories\"]", "window", 10);
	cr_assert_eq(count_memory(res, NULL), 0, "the old version is gone");
	json_decref(res);
	for (int i = 0; i < N_MODES; i++) {
		res = search_mode("alice", modes[i], "[\"memories\"]", "aisle seats", 10);
		cr_assert_eq(json_array_size(ix_results(res)), 1, "%s: one version", modes[i]);
		cr_assert_str_eq(json_string_value(json_object_get(
					 json_array_get(ix_results(res), 0), "text")),
				 "prefers aisle seats");
		json_decref(res);
	}

	/* A version whose text has no words: nothing to index, and the
	 * older version's document and vector are gone. */
	commit("alice", MEMD_MEM_UPDATE, "m1", "!!!", NULL, NULL, 0);
	for (int i = 0; i < N_MODES; i++) {
		res = search_mode("alice", modes[i], "[\"memories\"]", "aisle seats", 10);
		cr_assert_eq(json_array_size(ix_results(res)), 0, "%s: no words", modes[i]);
		json_decref(res);
	}

	commit("alice", MEMD_MEM_DELETE, "m1", NULL, NULL, NULL, 0);
	for (int i = 0; i < N_MODES; i++) {
		res = search_mode("alice", modes[i], "[\"memories\"]", "aisle seats", 10);
		cr_assert_eq(json_array_size(ix_results(res)), 0, "%s: deleted", modes[i]);
		json_decref(res);
	}

	/* A session's delete leaves memories; the user's removes them. */
	ix_session(m, APP, "alice", "s1");
	free(ix_append(m, APP, "alice", "s1", "nut allergy talk", NULL, 0));
	put("alice", "m2", "allergic to nuts", NULL, NULL);
	memd_error err = { 0 };
	cr_assert_eq(memd_session_delete(m, APP, "alice", "s1", &err), 0, "%s", err.msg);
	for (int i = 0; i < N_MODES; i++) {
		res = ix_search(m, APP, "alice", "{\"query\":\"nuts allergy\",\"mode\":\"%s\"}",
				modes[i]);
		cr_assert_eq(json_array_size(ix_results(res)), 1, "%s", modes[i]);
		cr_assert_eq(count_memory(res, "m2"), 1, "%s", modes[i]);
		json_decref(res);
	}
	cr_assert_eq(memd_user_delete(m, APP, "alice", &err), 0, "%s", err.msg);
	for (int i = 0; i < N_MODES; i++) {
		res = ix_search(m, APP, "alice", "{\"query\":\"nuts allergy\",\"mode\":\"%s\"}",
				modes[i]);
		cr_assert_eq(json_array_size(ix_results(res)), 0, "%s", modes[i]);
		json_decref(res);
	}
}

Test(memories, expired_memories_never_come_out)
{
	json_t *res;

	commit("alice", MEMD_MEM_ADD, "m1", "parking spot is 42", NULL, NULL, T0 + TTL);
	put("alice", "m2", "parking is free on sundays", NULL, NULL);
	clock_us = T0 + TTL - 1;
	for (int i = 0; i < N_MODES; i++) {
		res = search_mode("alice", modes[i], "[\"memories\"]", "parking", 10);
		cr_assert_eq(count_memory(res, "m1"), 1, "%s: not yet expired", modes[i]);
		json_decref(res);
	}
	clock_us = T0 + TTL;
	for (int i = 0; i < N_MODES; i++) {
		res = search_mode("alice", modes[i], "[\"memories\"]", "parking", 10);
		cr_assert_eq(count_memory(res, "m1"), 0, "%s: expired", modes[i]);
		cr_assert_eq(count_memory(res, "m2"), 1, "%s", modes[i]);
		json_decref(res);
	}
}

/* Many memories that match better than the one event: an event search
 * still finds the event (k = 1), a memory search finds memories only,
 * and another user sees none of alice's. */
Test(memories, sources_and_isolation)
{
	char id[32], text[96];
	json_t *res, *hit;

	ix_session(m, APP, "alice", "s1");
	free(ix_append(m, APP, "alice", "s1", "a zebra crossed the road near the old school", NULL,
		       0));
	for (int i = 0; i < CROWD; i++) {
		snprintf(id, sizeof(id), "z%02d", i);
		snprintf(text, sizeof(text), "zebra");
		put("alice", id, text, NULL, NULL);
	}
	for (int i = 0; i < N_MODES; i++) {
		res = search_mode("alice", modes[i], "[\"events\"]", "zebra", 1);
		cr_assert_eq(json_array_size(ix_results(res)), 1, "%s", modes[i]);
		hit = json_array_get(ix_results(res), 0);
		cr_assert_str_eq(json_string_value(json_object_get(hit, "source")), "event", "%s",
				 modes[i]);
		cr_assert_str_eq(json_string_value(json_object_get(hit, "text")),
				 "a zebra crossed the road near the old school");
		json_decref(res);

		res = search_mode("alice", modes[i], "[\"memories\"]", "zebra", 50);
		cr_assert_eq(json_array_size(ix_results(res)), CROWD, "%s", modes[i]);
		cr_assert_eq(count_memory(res, NULL), CROWD, "%s", modes[i]);
		json_decref(res);

		res = search_mode("bob", modes[i], "[\"memories\",\"events\"]", "zebra", 50);
		cr_assert_eq(json_array_size(ix_results(res)), 0, "%s: bob sees nothing of alice",
			     modes[i]);
		json_decref(res);
	}
}

/* Every mode's answers for a few queries, as text. */
static char *answers(void)
{
	static const char *const queries[] = { "window seats", "nuts", "zebra flights", "parking" };
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	for (int i = 0; i < N_MODES; i++)
		for (size_t q = 0; q < sizeof(queries) / sizeof(queries[0]); q++) {
			json_t *res = ix_search(m, APP, "alice",
						"{\"query\":\"%s\",\"mode\":\"%s\",\"k\":20}",
						queries[q], modes[i]);
			char *s = json_dumps(ix_results(res), JSON_COMPACT);
			fprintf(f, "%s %s %s\n", modes[i], queries[q], s);
			free(s);
			json_decref(res);
		}
	fclose(f);
	return out;
}

Test(memories, a_rebuild_answers_as_following_the_feed)
{
	memd_error err = { 0 };
	char *want, *got;

	ix_session(m, APP, "alice", "s1");
	free(ix_append(m, APP, "alice", "s1", "booked window seats to zebra park", NULL, 0));
	put("alice", "m1", "prefers window seats", "[\"travel\"]", NULL);
	put("alice", "m2", "allergic to nuts", NULL, "[\"Peanut\"]");
	put("alice", "m3", "parking spot 42", NULL, NULL);
	commit("alice", MEMD_MEM_UPDATE, "m1", "prefers window seats on flights", NULL, NULL, 0);
	commit("alice", MEMD_MEM_DELETE, "m3", NULL, NULL, NULL, 0);
	put("bob", "b1", "window seats too", NULL, NULL);
	want = answers();
	cr_assert_neq(strstr(want, "\"memory_id\":\"m1\""), NULL);

	cr_assert_eq(memd_index_rebuild(m, APP, "alice", NULL, NULL, &err), 0, "%s", err.msg);
	got = answers();
	cr_assert_str_eq(got, want, "a rebuild of the user answers differently");
	free(got);
	cr_assert_eq(memd_index_rebuild(m, NULL, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	got = answers();
	cr_assert_str_eq(got, want, "a rebuild of everything answers differently");
	free(got);
	free(want);
}

/* index_search_results (index.h), as recall and extraction call it:
 * events of the context left out by id, sources, min_score, bad input. */
Test(memories, the_internal_search)
{
	char *e1, *e2;
	const char *exclude[1];
	index_query q = { .query = "zebra", .k = 10, .mode = "keyword", .now_us = T0 };
	memd_error err = { 0 };
	void *out = NULL;
	json_t *res, *wrapped;

	ix_session(m, APP, "alice", "s1");
	e1 = ix_append(m, APP, "alice", "s1", "zebra stripes", NULL, 0);
	e2 = ix_append(m, APP, "alice", "s1", "a zebra at the zoo", NULL, 0);
	put("alice", "m1", "likes zebra", NULL, NULL);
	exclude[0] = e1;

	q.exclude_session = "s1";
	q.exclude_ids = exclude;
	q.n_exclude = 1;
	cr_assert_eq(index_search_results(m->index, NULL, APP, "alice", &q, &out, &err), 0, "%s",
		     err.msg);
	res = out;
	wrapped = json_pack("{s:o}", "results", res);
	cr_assert_eq(json_array_size(res), 2, "e1 is left out");
	cr_assert_eq(count_memory(wrapped, "m1"), 1);
	cr_assert_eq(ix_count_id(wrapped, e2), 1);
	cr_assert_eq(ix_count_id(wrapped, e1), 0);
	json_decref(wrapped);

	q.exclude_session = "other";
	cr_assert_eq(index_search_results(m->index, NULL, APP, "alice", &q, &out, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(json_array_size(out), 3, "only events of exclude_session are left out");
	json_decref(out);

	q.sources = INDEX_SOURCE_MEMORIES;
	q.mode = "vector";
	cr_assert_eq(index_search_results(m->index, NULL, APP, "alice", &q, &out, &err), 0, "%s",
		     err.msg);
	wrapped = json_pack("{s:o}", "results", out);
	cr_assert_eq(json_array_size(ix_results(wrapped)), 1);
	cr_assert_eq(count_memory(wrapped, "m1"), 1);
	json_decref(wrapped);

	q.sources = 0;
	q.min_score = 2.0; /* above any cosine similarity */
	cr_assert_eq(index_search_results(m->index, NULL, APP, "alice", &q, &out, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(json_array_size(out), 0);
	json_decref(out);

	q.k = 0;
	cr_assert_eq(index_search_results(m->index, NULL, APP, "alice", &q, &out, &err), MEMD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "k:"), "%s", err.msg);
	q.k = 10;
	q.mode = "fuzzy";
	cr_assert_eq(index_search_results(m->index, NULL, APP, "alice", &q, &out, &err), MEMD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "mode:"), "%s", err.msg);
	free(e1);
	free(e2);
}

/* ---- snapshots ------------------------------------------------------------------- */

/* A memd with a keyword index kept in a snapshot, its keyword log in lb. */
static memd *open_snapshotted(ix_logbuf *lb)
{
	memd_options o = { .struct_size = sizeof(o), .config_path = env.config_path,
			   .log = ix_keyword_log, .log_userdata = lb, .log_level = MEMD_LOG_INFO };
	memd_error err = { 0 };
	memd *x = NULL;
	FILE *f = fopen(env.config_path, "w");

	cr_assert_not_null(f);
	fprintf(f,
		"stores:\n"
		"  main: {plugin: sqlite, path: \"%s/memd.db\"}\n"
		"index:\n"
		"  keyword: {enabled: true, snapshot: \"%s/kw.snapshot\"}\n",
		env.dir, env.dir);
	cr_assert_eq(fclose(f), 0);
	lb->n = 0;
	lb->text[0] = '\0';
	cr_assert_eq(memd_open(&o, &x, &err), 0, "memd_open: %s", err.msg);
	memd_set_clock(x, test_clock, NULL);
	return x;
}

/* Memories are in the keyword snapshot: a restart loads them from the
 * file (not from the feed), expired ones stay out, and a new version
 * replaces a loaded one. */
Test(memories, memories_survive_a_restart_in_the_snapshot)
{
	static ix_logbuf lb = { .mu = PTHREAD_MUTEX_INITIALIZER };
	json_t *res;

	memd_close(m);
	m = open_snapshotted(&lb);
	put("alice", "m1", "prefers window seats", "[\"travel\"]", NULL);
	commit("alice", MEMD_MEM_ADD, "m2", "window cleaner on friday", NULL, NULL, T0 + TTL);
	res = search_mode("alice", "keyword", "[\"memories\"]", "window", 10);
	cr_assert_eq(count_memory(res, NULL), 2);
	json_decref(res);
	memd_close(m);

	m = open_snapshotted(&lb);
	res = search_mode("alice", "keyword", "[\"memories\"]", "travel", 10);
	cr_assert_eq(count_memory(res, "m1"), 1);
	json_decref(res);
	pthread_mutex_lock(&lb.mu);
	cr_assert_not_null(strstr(lb.text, "loaded the snapshot"), "log:\n%s", lb.text);
	cr_assert_not_null(strstr(lb.text, "2 documents"), "log:\n%s", lb.text);
	pthread_mutex_unlock(&lb.mu);

	clock_us = T0 + TTL;
	res = search_mode("alice", "keyword", "[\"memories\"]", "window", 10);
	cr_assert_eq(count_memory(res, "m2"), 0, "expired");
	cr_assert_eq(count_memory(res, "m1"), 1);
	json_decref(res);
	commit("alice", MEMD_MEM_UPDATE, "m1", "prefers aisle seats", NULL, NULL, 0);
	res = search_mode("alice", "keyword", "[\"memories\"]", "window", 10);
	cr_assert_eq(count_memory(res, NULL), 0, "the loaded version is replaced");
	json_decref(res);
	res = search_mode("alice", "keyword", "[\"memories\"]", "aisle", 10);
	cr_assert_eq(count_memory(res, "m1"), 1);
	json_decref(res);
}
