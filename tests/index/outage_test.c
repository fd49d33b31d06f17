/* SPDX-License-Identifier: MIT */
/*
 * A vector-store outage (the Qdrant stand-in answering 503 to every
 * request of the test's collection until the test ends the outage,
 * tests/standins): appends never fail, keyword search goes on, vector and
 * hybrid searches fail fast and retryable while the vector indexer backs
 * off, and once the store answers again the indexer catches up and every
 * event is found. Runs under with_standins.py --qdrant.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "index_util.h"
#include "standin_client.h"

#define FAULTS 1000000      /* more than the test makes: the outage lasts until it is ended */
#define EVENTS 20
#define RECOVERY_S 60       /* the indexer backs off 0.1, 0.2, 0.4 ... s */
#define FAIL_FAST_S 5.0     /* a search during the outage answers within this */

static ix_env env;
static memd *m;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

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

TestSuite(outage, .init = setup, .fini = teardown, .timeout = 120);

static int32_t try_search(const char *mode, json_t **ret, memd_error *err)
{
	char body[128], *out = NULL;
	int32_t r;

	snprintf(body, sizeof(body), "{\"query\":\"lantern\",\"mode\":\"%s\",\"k\":100}", mode);
	r = memd_search(m, "app", "alice", body, &out, err);
	if (r == 0) {
		*ret = json_loads(out, 0, NULL);
		memd_free(out);
	}
	return r;
}

Test(outage, appends_go_on_and_the_vector_index_catches_up)
{
	char url[512], fault[256], text[64];
	memd_error err = { 0 };
	json_t *res = NULL, *answer;
	double t0;
	long status = 0;
	int32_t r;

	/* The collection exists and works. */
	free(ix_append(m, "app", "alice", "s", "lantern zero", NULL, 0));
	cr_assert_eq(try_search("vector", &res, &err), 0, "%s", err.msg);
	json_decref(res);

	snprintf(url, sizeof(url), "%s/__standin/faults", sc_env("MEMD_QDRANT_STANDIN_URL"));
	snprintf(fault, sizeof(fault), "{\"collection\":\"%s\",\"count\":%d,\"status\":503}",
		 env.testid, FAULTS);
	answer = sc_post(url, fault);
	json_decref(answer);

	for (int i = 1; i < EVENTS; i++) {
		snprintf(text, sizeof(text), "lantern number %d", i);
		free(ix_append(m, "app", "alice", i % 2 ? "s" : "t", text, NULL, 0)); /* never fails */
	}
	/* Keyword search is not held up by the vector store. */
	cr_assert_eq(try_search("keyword", &res, &err), 0, "%s", err.msg);
	cr_assert_eq(json_array_size(ix_results(res)), EVENTS);
	json_decref(res);

	/* Vector and hybrid: a quick, retryable failure naming the store. */
	for (int k = 0; k < 2; k++) {
		const char *mode = k ? "hybrid" : "vector";
		t0 = now_s();
		r = try_search(mode, &res, &err);
		cr_assert_eq(r, MEMD_EUNAVAIL, "%s: %d %s", mode, (int)r, err.msg);
		cr_assert(err.flags & MEMD_ERROR_RETRYABLE);
		cr_assert(strstr(err.msg, "vec"), "the message names the store: %s", err.msg);
		cr_assert_lt(now_s() - t0, FAIL_FAST_S, "%s failed fast", mode);
	}

	/* The store answers again: the indexer recovers and catches up. */
	snprintf(url, sizeof(url), "%s/__standin/faults?collection=%s",
		 sc_env("MEMD_QDRANT_STANDIN_URL"), env.testid);
	answer = sc_request("DELETE", url, NULL, NULL, &status);
	cr_assert_eq(status, 200, "ending the outage");
	json_decref(answer);
	t0 = now_s();
	for (;;) {
		r = try_search("vector", &res, &err);
		if (r == 0)
			break;
		cr_assert(err.flags & MEMD_ERROR_RETRYABLE, "%s", err.msg);
		cr_assert_lt(now_s() - t0, RECOVERY_S, "no recovery: %s", err.msg);
		struct timespec pause = { 0, 100000000 };
		nanosleep(&pause, NULL);
	}
	cr_assert_eq(json_array_size(ix_results(res)), EVENTS, "every event is in the vector index");
	json_decref(res);
	cr_assert_eq(try_search("hybrid", &res, &err), 0, "%s", err.msg);
	cr_assert_eq(json_array_size(ix_results(res)), EVENTS);
	json_decref(res);
}
