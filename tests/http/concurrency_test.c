/* SPDX-License-Identifier: MIT */
/*
 * Concurrency over HTTP: many threads appending to one session lose and
 * duplicate nothing and get gapless seqs; racing expected_version appends
 * give exactly one winner per version and 409 to the rest (whose events
 * are not written); the same batch sent by many threads at once is
 * written once.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define U "/v1/apps/demo/users/alice"
#define S1 U "/sessions/s1"
#define THREADS 8
#define APPENDS_PER_THREAD 25
#define RACE_ROUNDS 12      /* rounds each racer makes at least... */
#define RACE_ROUNDS_MAX 2000 /* ...and at most, going on until some racer lost */
#define MSG_MAX 2048

static hs H;

static void setup(void)
{
	memset(&H, 0, sizeof(H));
	hs_start(&H, NULL, NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
}

static void teardown(void)
{
	hs_finish(&H);
}

TestSuite(concurrency, .init = setup, .fini = teardown, .timeout = 90);

typedef struct worker {
	pthread_t t;
	int index;
	int ok, conflicts, failures;
	int rounds;        /* race rounds made */
	char error[MSG_MAX];
	json_t *acked;     /* event id -> seq the append returned */
	json_t *rejected;  /* event ids of 409 appends */
	json_t *results;   /* AppendResult bodies (replay test) */
} worker;

static void note_failure(worker *w, const char *what, const char *detail)
{
	if (!w->failures++)
		snprintf(w->error, sizeof(w->error), "%s: %.1900s", what, detail);
}

static void *append_worker(void *arg)
{
	worker *w = arg;
	CURL *c = hs_curl();
	for (int i = 0; i < APPENDS_PER_THREAD; i++) {
		char body[512], msg[MSG_MAX], id1[64], id2[64];
		hs_resp r;
		int two = i % 3 == 0;
		snprintf(id1, sizeof(id1), "t%d-%d-a", w->index, i);
		snprintf(id2, sizeof(id2), "t%d-%d-b", w->index, i);
		if (two)
			snprintf(body, sizeof(body),
				 "{\"events\":[{\"id\":\"%s\",\"role\":\"user\",\"content\":\"q\"},"
				 "{\"id\":\"%s\",\"role\":\"assistant\",\"content\":\"a\"}]}", id1, id2);
		else
			snprintf(body, sizeof(body), "{\"events\":[{\"id\":\"%s\",\"role\":\"user\",\"content\":\"q\"}]}", id1);
		if (hs_try(&H, c, "POST", S1 "/events", NULL, body, strlen(body), &r, msg, sizeof(msg)) < 0) {
			note_failure(w, "request", msg);
			continue;
		}
		if (r.status != 200) {
			note_failure(w, "append", r.body);
		} else {
			json_t *seqs = json_object_get(r.json, "seqs");
			w->ok++;
			json_object_set(w->acked, id1, json_array_get(seqs, 0));
			if (two)
				json_object_set(w->acked, id2, json_array_get(seqs, 1));
			if (json_array_size(seqs) != (size_t)(two ? 2 : 1))
				note_failure(w, "append", "wrong number of seqs");
		}
		hs_resp_clear(&r);
	}
	curl_easy_cleanup(c);
	return NULL;
}

static json_t *all_events(void)
{
	json_t *s = hs_expect(&H, "GET", S1 "?events=0", NULL, 200);
	json_t *ev = json_incref(json_object_get(s, "events"));
	json_decref(s);
	return ev;
}

static void start_workers(worker *w, void *(*fn)(void *))
{
	for (int i = 0; i < THREADS; i++) {
		w[i].index = i;
		w[i].acked = json_object();
		w[i].rejected = json_object();
		w[i].results = json_array();
		cr_assert_eq(pthread_create(&w[i].t, NULL, fn, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(w[i].t, NULL);
}

static void free_workers(worker *w)
{
	for (int i = 0; i < THREADS; i++) {
		json_decref(w[i].acked);
		json_decref(w[i].rejected);
		json_decref(w[i].results);
	}
}

Test(concurrency, many_threads_one_session_gapless_no_loss_no_dup)
{
	worker w[THREADS] = { 0 };
	json_t *events, *acked = json_object(), *e, *sess;
	size_t i;

	start_workers(w, append_worker);
	for (int k = 0; k < THREADS; k++) {
		cr_assert_eq(w[k].failures, 0, "thread %d: %s", k, w[k].error);
		json_object_update(acked, w[k].acked);
	}
	events = all_events();
	cr_assert_eq(json_array_size(events), json_object_size(acked), "%zu events stored, %zu acknowledged",
		     json_array_size(events), json_object_size(acked));
	json_array_foreach(events, i, e) {
		const char *id = json_string_value(json_object_get(e, "id"));
		json_t *seq = json_object_get(acked, id);
		cr_assert_eq(json_integer_value(json_object_get(e, "seq")), (json_int_t)i + 1, "seqs are gapless");
		cr_assert(seq, "event %s was not acknowledged (or is a duplicate)", id);
		cr_assert_eq(json_integer_value(seq), (json_int_t)i + 1, "%s: stored at %zu, acknowledged as %lld",
			     id, i + 1, (long long)json_integer_value(seq));
		json_object_del(acked, id); /* a duplicate would find it gone */
	}
	cr_assert_eq(json_object_size(acked), 0);
	sess = hs_expect(&H, "GET", S1, NULL, 200);
	cr_assert_eq(json_integer_value(json_object_get(sess, "version")), THREADS * APPENDS_PER_THREAD,
		     "one version per append");
	cr_assert_eq(json_integer_value(json_object_get(sess, "last_seq")), (json_int_t)json_array_size(events));
	json_decref(sess);
	json_decref(events);
	json_decref(acked);
	free_workers(w);
}

static atomic_int race_lost; /* a racer got a 409 */

static void *race_worker(void *arg)
{
	worker *w = arg;
	CURL *c = hs_curl();
	/* However the threads are scheduled, the race goes on until it was
	 * really run: some racer lost (bounded by RACE_ROUNDS_MAX). */
	for (int i = 0; i < RACE_ROUNDS_MAX && (i < RACE_ROUNDS || !atomic_load(&race_lost)); i++) {
		w->rounds++;
		char body[512], msg[MSG_MAX], id[64];
		json_int_t version;
		hs_resp r;
		if (hs_try(&H, c, "GET", S1, NULL, NULL, 0, &r, msg, sizeof(msg)) < 0 || r.status != 200) {
			note_failure(w, "get", msg);
			hs_resp_clear(&r);
			continue;
		}
		version = json_integer_value(json_object_get(r.json, "version"));
		hs_resp_clear(&r);
		snprintf(id, sizeof(id), "r%d-%d", w->index, i);
		snprintf(body, sizeof(body),
			 "{\"expected_version\":%lld,\"events\":[{\"id\":\"%s\",\"role\":\"user\",\"content\":\"x\"}],"
			 "\"state_delta\":{\"last\":\"%s\"}}", (long long)version, id, id);
		if (hs_try(&H, c, "POST", S1 "/events", NULL, body, strlen(body), &r, msg, sizeof(msg)) < 0) {
			note_failure(w, "request", msg);
			continue;
		}
		if (r.status == 200) {
			w->ok++;
			json_object_set_new(w->acked, id, json_integer(json_integer_value(json_object_get(r.json, "version"))));
			if (json_integer_value(json_object_get(r.json, "version")) != version + 1)
				note_failure(w, "append", "a winner did not move the version by one");
		} else if (r.status == 409 && strcmp(hs_error_code(&r), "conflict") == 0) {
			w->conflicts++;
			atomic_store(&race_lost, 1);
			json_object_set_new(w->rejected, id, json_true());
		} else {
			note_failure(w, "append", r.body);
		}
		hs_resp_clear(&r);
	}
	curl_easy_cleanup(c);
	return NULL;
}

Test(concurrency, racing_expected_version_one_winner_per_version)
{
	worker w[THREADS] = { 0 };
	json_t *events, *e, *sess, *versions = json_object(), *state;
	int ok = 0, conflicts = 0, rounds = 0;
	size_t i;

	start_workers(w, race_worker);
	for (int k = 0; k < THREADS; k++) {
		const char *id;
		json_t *v;
		cr_assert_eq(w[k].failures, 0, "thread %d: %s", k, w[k].error);
		ok += w[k].ok;
		conflicts += w[k].conflicts;
		rounds += w[k].rounds;
		json_object_foreach(w[k].acked, id, v) {
			char key[32];
			snprintf(key, sizeof(key), "%lld", (long long)json_integer_value(v));
			cr_assert_null(json_object_get(versions, key), "two winners for version %s", key);
			json_object_set_new(versions, key, json_true());
		}
	}
	cr_assert_eq(ok + conflicts, rounds);
	cr_assert_gt(conflicts, 0, "with %d threads racing, some must lose", THREADS);
	sess = hs_expect(&H, "GET", S1, NULL, 200);
	cr_assert_eq(json_integer_value(json_object_get(sess, "version")), ok);
	json_decref(sess);
	events = all_events();
	cr_assert_eq(json_array_size(events), (size_t)ok);
	json_array_foreach(events, i, e) {
		const char *id = json_string_value(json_object_get(e, "id"));
		int winner = 0;
		for (int k = 0; k < THREADS; k++) {
			cr_assert_null(json_object_get(w[k].rejected, id), "a 409 append's event %s was written", id);
			winner |= json_object_get(w[k].acked, id) != NULL;
		}
		cr_assert(winner);
		cr_assert_eq(json_integer_value(json_object_get(e, "seq")), (json_int_t)i + 1);
	}
	/* The state delta of the last winner is the state. */
	state = hs_expect(&H, "GET", S1 "/state", NULL, 200);
	cr_assert_str_eq(json_string_value(json_object_get(state, "last")),
			 json_string_value(json_object_get(json_array_get(events, json_array_size(events) - 1), "id")));
	json_decref(state);
	json_decref(events);
	json_decref(versions);
	free_workers(w);
}

static void *replay_worker(void *arg)
{
	worker *w = arg;
	CURL *c = hs_curl();
	const char *body = "{\"events\":[{\"id\":\"same-1\",\"role\":\"user\",\"content\":\"once\"},"
			   "{\"id\":\"same-2\",\"role\":\"assistant\",\"content\":\"only once\"}]}";
	char msg[MSG_MAX];
	hs_resp r;
	if (hs_try(&H, c, "POST", S1 "/events", NULL, body, strlen(body), &r, msg, sizeof(msg)) < 0) {
		note_failure(w, "request", msg);
	} else if (r.status != 200) {
		note_failure(w, "append", r.body);
	} else {
		json_array_append(w->results, r.json);
	}
	hs_resp_clear(&r);
	curl_easy_cleanup(c);
	return NULL;
}

Test(concurrency, same_batch_from_many_threads_is_written_once)
{
	worker w[THREADS] = { 0 };
	int fresh = 0;
	json_t *events;

	start_workers(w, replay_worker);
	for (int k = 0; k < THREADS; k++) {
		json_t *res = json_array_get(w[k].results, 0);
		cr_assert_eq(w[k].failures, 0, "thread %d: %s", k, w[k].error);
		fresh += json_is_false(json_object_get(res, "replayed"));
		cr_assert_eq(json_integer_value(json_array_get(json_object_get(res, "seqs"), 0)), 1);
		cr_assert_eq(json_integer_value(json_array_get(json_object_get(res, "seqs"), 1)), 2);
	}
	cr_assert_eq(fresh, 1, "exactly one append wrote, %d did", fresh);
	events = all_events();
	cr_assert_eq(json_array_size(events), 2);
	json_decref(events);
	free_workers(w);
}
