/* SPDX-License-Identifier: MIT */
/* host/extract: the built-in extractor's phrasings and consolidation (a
 * table of batches against a table of existing memories), topics, word
 * overlap. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extract/extract.h"

/* The existing memories a case starts from; nearest = every memory whose
 * topic is the asked one, else every memory, in table order. */
typedef struct known {
	const char *id, *text, *topics_json;
	int64_t version;
} known;

typedef struct lookup {
	const known *mem;
	size_t n;
	int calls;
} lookup;

static int32_t find(void *ud, const char *text, const char *const *topics, size_t n_topics,
		    uint32_t k, extract_memories *ret, memd_error *err)
{
	lookup *lk = ud;
	(void)text;
	(void)err;
	lk->calls++;
	for (size_t i = 0; i < lk->n && ret->n < k; i++) {
		char want[64];
		if (n_topics) {
			snprintf(want, sizeof(want), "\"%s\"", topics[0]);
			if (!strstr(lk->mem[i].topics_json, want))
				continue;
		}
		cr_assert_eq(extract_memories_add(ret, lk->mem[i].id, lk->mem[i].text, "fact",
						  lk->mem[i].topics_json, lk->mem[i].version),
			     0);
	}
	return 0;
}

/* One expected decision: "add|TEXT|TOPIC|SEQS", "update|ID|TEXT|SEQS",
 * "none|ID", "delete|ID". */
typedef struct ecase {
	const char *name;
	const char *user[4]; /* user messages, seqs 1, 3, 5, 7 (assistant ones between) */
	known mem[3];
	size_t n_mem;
	const char *want[4];
} ecase;

static const ecase cases[] = {
	{ "remember", { "Please remember that my flight leaves at 9 on Friday." }, { { 0 } }, 0,
	  { "add|My flight leaves at 9 on Friday||1" } },
	{ "remember plain", { "remember that the garage code is 4411" }, { { 0 } }, 0,
	  { "add|The garage code is 4411||1" } },
	{ "my x is y", { "Hi! My favourite colour is green." }, { { 0 } }, 0,
	  { "add|User's favourite colour is green|favourite colour|1" } },
	{ "allergy", { "I'm allergic to peanuts and shellfish" }, { { 0 } }, 0,
	  { "add|User is allergic to peanuts and shellfish|allergy: peanuts and shellfish|1" } },
	{ "allergy long form", { "oh, I am allergic to cats." }, { { 0 } }, 0,
	  { "add|User is allergic to cats|allergy: cats|1" } },
	{ "prefer", { "I prefer window seats over aisle seats." }, { { 0 } }, 0,
	  { "add|User prefers window seats over aisle seats|preference: seats|1" } },
	{ "call me", { "call me Sam" }, { { 0 } }, 0,
	  { "add|User wants to be called Sam|name|1" } },
	{ "name", { "my name is Alexandra Kim" }, { { 0 } }, 0,
	  { "add|User's name is Alexandra Kim|name|1" } },
	{ "live work", { "I live in Lisbon. I work at Acme Corp; I work as a nurse" }, { { 0 } }, 0,
	  { "add|User lives in Lisbon|home|1", "add|User works at Acme Corp|employer|1",
	    "add|User works as a nurse|occupation|1" } },
	{ "nothing to remember", { "What is the weather like in Lisbon?", "my goodness what a day it has been today" },
	  { { 0 } }, 0, { NULL } },
	{ "duplicate is none", { "I live in Lisbon." },
	  { { "m1", "User lives in Lisbon", "[\"home\"]", 2 } }, 1, { "none|m1" } },
	{ "contradiction updates", { "Hello. I live in Porto!" },
	  { { "m1", "User lives in Lisbon", "[\"home\"]", 2 } }, 1,
	  { "update|m1|User lives in Porto|1" } },
	{ "newest in batch wins", { "my car is red", "my car is blue", "my car is blue" },
	  { { 0 } }, 0, { "add|User's car is blue|car|3,5" } },
	{ "repeat in batch merges", { "I prefer tea.", "i prefer tea" }, { { 0 } }, 0,
	  { "add|User prefers tea|preference: tea|1,3" } },
	{ "forget by topic", { "forget that I live in Lisbon" },
	  { { "m0", "User's car is red", "[\"car\"]", 1 }, { "m1", "User lives in Lisbon", "[\"home\"]", 4 } },
	  2, { "delete|m1" } },
	{ "forget by words", { "Forget about the garage code." },
	  { { "m0", "User's car is red", "[\"car\"]", 1 }, { "m1", "The garage code is 4411", "[]", 1 } },
	  2, { "delete|m1" } },
	{ "forget nothing close", { "forget that I like jazz" },
	  { { "m0", "User's car is red", "[\"car\"]", 1 } }, 1, { NULL } },
	{ "forget after saying", { "my car is red", "forget that my car is red" },
	  { { "m0", "User's car is green", "[\"car\"]", 1 } }, 1, { "delete|m0" } },
	{ "no topic duplicate", { "remember that the garage code is 4411" },
	  { { "m1", "The garage code is 4411.", "[]", 1 } }, 1, { "none|m1" } },
	{ "clauses", { "Hi! My name is Bob and I live in Oslo, but my car is red" }, { { 0 } }, 0,
	  { "add|User's name is Bob|name|1", "add|User lives in Oslo|home|1",
	    "add|User's car is red|car|1" } },
	{ "long subject is no fact", { "my brother and his two friends from school are coming" },
	  { { 0 } }, 0, { NULL } },
};

static void check_case(const ecase *c)
{
	extract_event ev[8];
	size_t n = 0;
	lookup lk = { c->mem, c->n_mem, 0 };
	extract_nearest nn = { find, &lk };
	extract_batch b;
	extract_result res = { 0 };
	memd_error err = { 0 };
	size_t want_n = 0;

	for (size_t i = 0; i < 4 && c->user[i]; i++) {
		ev[n++] = (extract_event){ (int64_t)(2 * i + 1), "user", "u", c->user[i] };
		/* an assistant that repeats the phrasing is never read */
		ev[n++] = (extract_event){ (int64_t)(2 * i + 2), "assistant", "bot",
					   "I live in Atlantis. remember that I am a bot" };
	}
	b = (extract_batch){ ev, n, 5 };
	cr_assert_eq(extract_builtin_run(&b, &nn, &res, &err), 0, "%s: %s", c->name, err.msg);
	while (want_n < 4 && c->want[want_n])
		want_n++;
	cr_assert_eq(res.n, want_n, "%s: %zu decisions, want %zu", c->name, res.n, want_n);
	for (size_t i = 0; i < want_n; i++) {
		const extract_decision *d = &res.v[i];
		char got[512], seqs[64] = "";
		size_t o = 0;
		for (size_t j = 0; j < d->n_seqs; j++)
			o += (size_t)snprintf(seqs + o, sizeof(seqs) - o, "%s%lld", j ? "," : "",
					      (long long)d->seqs[j]);
		switch (d->op) {
		case EXTRACT_ADD:
			snprintf(got, sizeof(got), "add|%s|%s|%s", d->text,
				 d->n_topics ? d->topics[0] : "", seqs);
			cr_assert(extract_kind_ok(d->kind));
			break;
		case EXTRACT_UPDATE:
			snprintf(got, sizeof(got), "update|%s|%s|%s", d->memory_id, d->text, seqs);
			cr_assert_eq(d->memory_version, c->mem[0].version);
			break;
		case EXTRACT_NONE:
			snprintf(got, sizeof(got), "none|%s", d->memory_id);
			break;
		default:
			snprintf(got, sizeof(got), "delete|%s", d->memory_id);
		}
		cr_assert_str_eq(got, c->want[i], "%s: decision %zu", c->name, i);
	}
	extract_result_clear(&res);
}

Test(extract_builtin, table)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_case(&cases[i]);
}

Test(extract_builtin, deterministic_and_entities)
{
	extract_event ev[] = { { 4, "user", "u", "I live in New York. I'm allergic to nuts" } };
	lookup lk = { NULL, 0, 0 };
	extract_nearest nn = { find, &lk };
	extract_batch b = { ev, 1, 3 };
	extract_result a = { 0 }, c = { 0 };
	memd_error err = { 0 };

	cr_assert_eq(extract_builtin_run(&b, &nn, &a, &err), 0);
	cr_assert_eq(extract_builtin_run(&b, &nn, &c, &err), 0);
	cr_assert_eq(a.n, 2);
	cr_assert_eq(c.n, 2);
	cr_assert_eq(lk.calls, 4, "one lookup per fact and run");
	for (size_t i = 0; i < a.n; i++) {
		cr_assert_str_eq(a.v[i].text, c.v[i].text);
		cr_assert_eq(a.v[i].n_entities, 1);
	}
	cr_assert_str_eq(a.v[0].entities[0], "New York");
	cr_assert_str_eq(a.v[1].entities[0], "nuts");
	cr_assert_eq(a.v[1].n_seqs, 1);
	cr_assert_eq(a.v[1].seqs[0], 4);
	extract_result_clear(&a);
	extract_result_clear(&c);
}

static int32_t failing_find(void *ud, const char *text, const char *const *topics,
			    size_t n_topics, uint32_t k, extract_memories *ret, memd_error *err)
{
	(void)ud, (void)text, (void)topics, (void)n_topics, (void)k, (void)ret;
	return memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE, "lookup down");
}

Test(extract_builtin, a_failing_lookup_fails_the_run_and_fills_nothing)
{
	extract_event ev[] = { { 1, "user", "u", "my car is red. I live in Oslo" } };
	extract_nearest nn = { failing_find, NULL };
	extract_batch b = { ev, 1, 3 };
	extract_result res = { 0 };
	memd_error err = { 0 };

	cr_assert_eq(extract_builtin_run(&b, &nn, &res, &err), MEMD_EUNAVAIL);
	cr_assert_eq(res.n, 0);
	cr_assert_null(res.v);
	cr_assert_str_eq(err.msg, "lookup down");
}

Test(extract, topic_normalise)
{
	char t[EXTRACT_TAG_MAX];
	cr_assert_eq(extract_topic_normalise("  My Favourite   COLOUR!! ", t, sizeof(t)), 16);
	cr_assert_str_eq(t, "favourite colour");
	extract_topic_normalise("allergy: Peanuts, shellfish", t, sizeof(t));
	cr_assert_str_eq(t, "allergy: peanuts shellfish");
	cr_assert_eq(extract_topic_normalise(" ?! ", t, sizeof(t)), 0);
	cr_assert_str_eq(t, "");
	/* A cut never splits a character. */
	char small[6];
	extract_topic_normalise("ab\xc3\xa9\xc3\xa9\xc3\xa9", small, sizeof(small));
	cr_assert_str_eq(small, "ab\xc3\xa9");
}

Test(extract, similarity)
{
	cr_assert_float_eq(extract_similarity("The garage code is 4411", "garage code"), 2.0 / 3.0,
			   1e-9);
	cr_assert_float_eq(extract_similarity("a b c", "garage"), 0.0, 1e-9);
	cr_assert_float_eq(extract_similarity("User lives in Lisbon", "I live in lisbon"),
			   1.0 / 3.0, 1e-9);
	cr_assert(extract_kind_ok("episode"));
	cr_assert(!extract_kind_ok("opinion"));
	cr_assert(!extract_kind_ok(NULL));
}
