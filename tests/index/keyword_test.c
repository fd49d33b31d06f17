/* SPDX-License-Identifier: MIT */
/*
 * The BM25 keyword index (host/index/keyword.c): scores against BM25
 * computed by hand on a tiny corpus, stemming and stop words at index and
 * query time, partitions (a query reads only its own postings), filters,
 * exact deletes (same scores as an index built without the deleted
 * documents), tie order, concurrent readers with a writer; single events
 * removed (hidden) and added again, and the feed's records applied
 * (kw_feed.h) giving the index a rebuild from the visible events gives.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "index/keyword.h"
#include "index/kw_feed.h"

#define K1 1.2
#define B 0.75
#define EPS 1e-9

static kw_index *kw;

static void setup(void)
{
	kw = kw_new(K1, B);
	cr_assert_not_null(kw);
}

static void teardown(void)
{
	kw_free(kw);
}

TestSuite(keyword, .init = setup, .fini = teardown);

static void add_in(kw_index *x, const char *app, const char *user, const char *session, int64_t seq,
		   const char *author, int64_t ts, const char *text)
{
	kw_doc_in d = { .app = app, .user = user, .session = session, .author = author, .seq = seq,
			 .timestamp_us = ts, .text = text, .text_len = strlen(text) };
	cr_assert_eq(kw_add(x, &d), 0);
}

static void add(const char *user, const char *session, int64_t seq, const char *text)
{
	add_in(kw, "app", user, session, seq, "user", 1000 + seq, text);
}

typedef struct result {
	kw_hit *hits;
	size_t n;
	uint64_t rows;
} result;

static result search_f(kw_index *x, const char *user, const char *query, const kw_filter *f,
		       uint32_t k)
{
	result r = { 0 };
	memd_error err = { 0 };
	cr_assert_eq(kw_search(x, "app", user, query, f, k, &r.hits, &r.n, &r.rows, &err), 0, "%s",
		     err.msg);
	return r;
}

static result search(const char *user, const char *query)
{
	return search_f(kw, user, query, NULL, 10);
}

static void result_free(result *r)
{
	kw_hits_free(r->hits, r->n);
}

static double idf(double n, double df)
{
	return log(1.0 + (n - df + 0.5) / (df + 0.5));
}

static double tf_part(double tf, double dl, double avgdl)
{
	return tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / avgdl));
}

/* d0 "apple banana apple" (3 terms), d1 "banana cherry" (2), d2 "cherry
 * date elderberry fig" (4): N = 3, avgdl = 3. */
static void tiny_corpus(void)
{
	add("u1", "s", 1, "Apple banana apple");
	add("u1", "s", 2, "banana cherry");
	add("u1", "s", 3, "cherry date elderberry fig");
}

Test(keyword, scores_match_bm25_by_hand)
{
	result r;

	tiny_corpus();
	r = search("u1", "apple");
	cr_assert_eq(r.n, 1);
	cr_assert_eq(r.hits[0].seq, 1);
	/* idf = ln(1 + 2.5/1.5) = ln(8/3); tf part = 2*2.2/(2+1.2) = 1.375 */
	cr_assert_float_eq(r.hits[0].score, log(8.0 / 3.0) * 1.375, EPS);
	cr_assert_float_eq(r.hits[0].score, 1.3486399, 1e-6);
	cr_assert_str_eq(r.hits[0].session, "s");
	cr_assert_eq(r.hits[0].timestamp_us, 1001);
	result_free(&r);

	r = search("u1", "banana cherry");
	cr_assert_eq(r.n, 3);
	double i2 = idf(3, 2); /* ln 1.6 */
	cr_assert_float_eq(i2, 0.4700036, 1e-6);
	cr_assert_eq(r.hits[0].seq, 2);
	cr_assert_float_eq(r.hits[0].score, 2 * i2 * tf_part(1, 2, 3), EPS);
	cr_assert_float_eq(r.hits[0].score, 1.0884294, 1e-6);
	cr_assert_eq(r.hits[1].seq, 1);
	cr_assert_float_eq(r.hits[1].score, i2 * tf_part(1, 3, 3), EPS);
	cr_assert_float_eq(r.hits[1].score, i2, EPS); /* tf part is exactly 1 */
	cr_assert_eq(r.hits[2].seq, 3);
	cr_assert_float_eq(r.hits[2].score, i2 * 0.88, EPS);
	result_free(&r);
}

Test(keyword, k1_and_b_change_scores)
{
	kw_index *x = kw_new(2.0, 0.0);
	result r;

	add_in(x, "app", "u1", "s", 1, "a", 1, "apple banana apple");
	add_in(x, "app", "u1", "s", 2, "a", 2, "banana cherry");
	r = search_f(x, "u1", "apple", NULL, 10);
	cr_assert_eq(r.n, 1);
	/* b = 0: no length normalisation; tf part = 2*3/(2+2). */
	cr_assert_float_eq(r.hits[0].score, idf(2, 1) * 1.5, EPS);
	result_free(&r);
	kw_free(x);
}

Test(keyword, stemming_and_stop_words_on_both_sides)
{
	result r;

	add("u1", "s", 1, "The runners were running in the races");
	add("u1", "s", 2, "Nothing related at all");
	r = search("u1", "run race");
	cr_assert_eq(r.n, 1);
	cr_assert_eq(r.hits[0].seq, 1);
	result_free(&r);
	/* Only stop words: no terms, nothing found. */
	r = search("u1", "the were in");
	cr_assert_eq(r.n, 0);
	result_free(&r);
	/* Unknown words find nothing and do not fail. */
	r = search("u1", "zyzzyva");
	cr_assert_eq(r.n, 0);
	result_free(&r);
	/* Case and accents do not matter. */
	add("u1", "s", 3, "Meeting in ZÜRICH");
	r = search("u1", "zurich");
	cr_assert_eq(r.n, 1);
	cr_assert_eq(r.hits[0].seq, 3);
	result_free(&r);
}

Test(keyword, a_query_reads_only_its_partition)
{
	result r;
	char text[64];

	add("u1", "s", 1, "apple pie");
	for (int i = 0; i < 500; i++) {
		snprintf(text, sizeof(text), "apple number %d", i);
		add("u2", "s", i + 1, text);
		add_in(kw, "other-app", "u1", "s", i + 1, "x", 1, text);
	}
	r = search("u1", "apple");
	cr_assert_eq(r.n, 1, "u1 must see only its own document");
	cr_assert_eq(r.rows, 1, "one posting read, not %llu", (unsigned long long)r.rows);
	result_free(&r);
	r = search_f(kw, "u2", "apple", NULL, 1000);
	cr_assert_eq(r.n, 500);
	cr_assert_eq(r.rows, 500);
	result_free(&r);
	r = search("nobody", "apple");
	cr_assert_eq(r.n, 0);
	result_free(&r);
}

Test(keyword, filters_narrow_before_ranking)
{
	result r;
	const char *bob[] = { "bob" };
	const char *nobody[] = { "carol" };

	add_in(kw, "app", "u1", "s1", 1, "alice", 100, "apple apple apple");
	add_in(kw, "app", "u1", "s2", 1, "bob", 200, "apple");
	add_in(kw, "app", "u1", "s2", 2, "alice", 300, "apple banana");

	kw_filter by_session = { .session = "s2" };
	r = search_f(kw, "u1", "apple", &by_session, 1);
	cr_assert_eq(r.n, 1);
	cr_assert_str_eq(r.hits[0].session, "s2");
	result_free(&r);

	kw_filter by_author = { .authors = bob, .n_authors = 1 };
	r = search_f(kw, "u1", "apple", &by_author, 10);
	cr_assert_eq(r.n, 1);
	cr_assert_eq(r.hits[0].timestamp_us, 200);
	result_free(&r);

	kw_filter unknown_author = { .authors = nobody, .n_authors = 1 };
	r = search_f(kw, "u1", "apple", &unknown_author, 10);
	cr_assert_eq(r.n, 0);
	result_free(&r);

	kw_filter window = { .after_us = 100, .before_us = 300 }; /* exclusive */
	r = search_f(kw, "u1", "apple", &window, 10);
	cr_assert_eq(r.n, 1);
	cr_assert_eq(r.hits[0].timestamp_us, 200);
	result_free(&r);

	kw_filter missing_session = { .session = "nope" };
	r = search_f(kw, "u1", "apple", &missing_session, 10);
	cr_assert_eq(r.n, 0);
	result_free(&r);
}

Test(keyword, ties_are_ordered_by_time_then_seq_then_session)
{
	result r;

	add_in(kw, "app", "u1", "b", 1, "x", 500, "same text");
	add_in(kw, "app", "u1", "a", 1, "x", 500, "same text");
	add_in(kw, "app", "u1", "a", 2, "x", 500, "same text");
	add_in(kw, "app", "u1", "c", 1, "x", 900, "same text");
	r = search("u1", "same");
	cr_assert_eq(r.n, 4);
	cr_assert_str_eq(r.hits[0].session, "c");
	cr_assert(r.hits[1].seq == 2 && strcmp(r.hits[1].session, "a") == 0);
	cr_assert(r.hits[2].seq == 1 && strcmp(r.hits[2].session, "a") == 0);
	cr_assert(r.hits[3].seq == 1 && strcmp(r.hits[3].session, "b") == 0);
	for (size_t i = 1; i < r.n; i++)
		cr_assert_eq(r.hits[i].score, r.hits[0].score);
	result_free(&r);
}

Test(keyword, top_k_is_the_best_k_in_order)
{
	char text[512];
	result all, top;

	/* Documents with tf 1..40 of "apple" among filler. */
	for (int i = 1; i <= 40; i++) {
		size_t len = 0;
		for (int j = 0; j < i; j++)
			len += (size_t)snprintf(text + len, sizeof(text) - len, "apple ");
		snprintf(text + len, sizeof(text) - len, "filler%d", i);
		add("u1", "s", i, text);
	}
	all = search_f(kw, "u1", "apple", NULL, 100);
	top = search_f(kw, "u1", "apple", NULL, 5);
	cr_assert_eq(all.n, 40);
	cr_assert_eq(top.n, 5);
	for (size_t i = 0; i < top.n; i++) {
		cr_assert_eq(top.hits[i].seq, all.hits[i].seq);
		cr_assert_eq(top.hits[i].score, all.hits[i].score);
	}
	for (size_t i = 1; i < all.n; i++)
		cr_assert_geq(all.hits[i - 1].score, all.hits[i].score);
	result_free(&all);
	result_free(&top);
}

/* Documents of sessions s0..s4, some terms in every session, long lists
 * (over the inline size) and short ones. */
static void corpus(kw_index *x, int skip_session)
{
	static const char *const words[] = { "alpha", "bravo", "charlie", "delta", "echo",
					     "foxtrot", "golf", "hotel" };
	char text[256];
	for (int s = 0; s < 5; s++) {
		char sid[8];
		if (s == skip_session)
			continue;
		snprintf(sid, sizeof(sid), "s%d", s);
		for (int i = 0; i < 60; i++) {
			snprintf(text, sizeof(text), "%s %s %s unique%dx%d %s", words[i % 8],
				 words[(i * 3 + s) % 8], words[(i + s) % 5], s, i,
				 i % 7 == 0 ? "rare" : "");
			add_in(x, "app", "u1", sid, i + 1, i % 2 ? "alice" : "bob", 1000 * s + i, text);
		}
	}
}

static void expect_same(kw_index *a, kw_index *b, const char *query)
{
	result x = search_f(a, "u1", query, NULL, 1000), y = search_f(b, "u1", query, NULL, 1000);
	cr_assert_eq(x.n, y.n, "%s: %zu vs %zu hits", query, x.n, y.n);
	for (size_t i = 0; i < x.n; i++) {
		cr_assert_str_eq(x.hits[i].session, y.hits[i].session, "%s #%zu", query, i);
		cr_assert_eq(x.hits[i].seq, y.hits[i].seq, "%s #%zu", query, i);
		cr_assert_eq(x.hits[i].score, y.hits[i].score, "%s #%zu", query, i);
	}
	result_free(&x);
	result_free(&y);
}

Test(keyword, deleting_a_session_is_exact)
{
	kw_index *fresh = kw_new(K1, B);
	kw_stats a, b;
	result r;

	corpus(kw, -1);
	corpus(fresh, 2);
	cr_assert_eq(kw_delete_session(kw, "app", "u1", "s2"), 0);
	cr_assert_eq(kw_delete_session(kw, "app", "u1", "no-such-session"), 0);
	static const char *const queries[] = { "alpha", "bravo charlie", "rare", "unique2x5",
					       "unique3x7 hotel", "golf echo delta" };
	for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++)
		expect_same(kw, fresh, queries[i]);
	r = search("u1", "unique2x5");
	cr_assert_eq(r.n, 0, "a deleted session's term is gone");
	result_free(&r);
	kw_get_stats(kw, &a);
	kw_get_stats(fresh, &b);
	cr_assert_eq(a.documents, b.documents);
	cr_assert_eq(a.postings, b.postings);
	cr_assert_eq(a.postings_bytes, b.postings_bytes);
	/* Adding after a compaction continues correctly. */
	add_in(kw, "app", "u1", "s9", 1, "x", 1, "alpha zulu");
	add_in(fresh, "app", "u1", "s9", 1, "x", 1, "alpha zulu");
	expect_same(kw, fresh, "alpha zulu");
	kw_free(fresh);
}

Test(keyword, deleting_a_user_and_clearing)
{
	result r;
	kw_stats st;

	corpus(kw, -1);
	add("u2", "s", 1, "alpha");
	kw_delete_user(kw, "app", "u1");
	r = search("u1", "alpha");
	cr_assert_eq(r.n, 0);
	result_free(&r);
	r = search("u2", "alpha");
	cr_assert_eq(r.n, 1);
	result_free(&r);
	/* The user can come back. */
	add("u1", "s", 1, "alpha again");
	r = search("u1", "alpha");
	cr_assert_eq(r.n, 1);
	result_free(&r);
	kw_clear(kw);
	kw_get_stats(kw, &st);
	cr_assert_eq(st.documents, 0);
	cr_assert_eq(st.terms, 0);
	r = search("u2", "alpha");
	cr_assert_eq(r.n, 0);
	result_free(&r);
	add("u2", "s", 1, "alpha");
	r = search("u2", "alpha");
	cr_assert_eq(r.n, 1);
	result_free(&r);
}

Test(keyword, stats_count_documents_and_postings)
{
	kw_stats st;

	tiny_corpus();
	add("u1", "s", 4, "the of and"); /* stop words only: not a document */
	kw_get_stats(kw, &st);
	cr_assert_eq(st.partitions, 1);
	cr_assert_eq(st.documents, 3);
	/* The six words and the author "user" (a field of every document). */
	cr_assert_eq(st.terms, 7);
	cr_assert_eq(st.postings, 2 + 2 + 4 + 3);
	cr_assert_gt(st.memory_bytes, st.postings_bytes);
}

typedef struct reader_arg {
	kw_index *kw;
	int failures;
} reader_arg;

static void *reader(void *p)
{
	reader_arg *a = p;
	for (int i = 0; i < 300; i++) {
		kw_hit *hits;
		size_t n;
		memd_error err = { 0 };
		if (kw_search(a->kw, "app", "u1", "alpha bravo", NULL, 10, &hits, &n, NULL, &err) < 0)
			a->failures++;
		for (size_t j = 1; j < n; j++)
			if (hits[j - 1].score < hits[j].score)
				a->failures++;
		kw_hits_free(hits, n);
	}
	return NULL;
}

Test(keyword, readers_run_beside_a_writer)
{
	pthread_t t[2];
	reader_arg args[2] = { { kw, 0 }, { kw, 0 } };

	add("u1", "s0", 1, "alpha");
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, reader, &args[i]);
	for (int round = 0; round < 3; round++) {
		corpus(kw, -1);
		kw_delete_session(kw, "app", "u1", "s1");
		kw_delete_user(kw, "app", "u2");
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		cr_assert_eq(args[i].failures, 0);
	}
}

/* ---- single events: hidden and visible again ----------------------------------- */

/* The events of session s1 a rewind hides: every third one and the last
 * ten. */
static int hidden_s1(int seq)
{
	return seq % 3 == 0 || seq > 50;
}

static const char *const event_queries[] = { "alpha", "bravo charlie", "rare", "unique1x5",
					      "unique1x2 hotel", "golf echo delta", "unique1x55" };
#define N_EVENT_QUERIES (sizeof(event_queries) / sizeof(event_queries[0]))

static void expect_same_index(kw_index *a, kw_index *b)
{
	kw_stats x, y;

	for (size_t i = 0; i < N_EVENT_QUERIES; i++)
		expect_same(a, b, event_queries[i]);
	kw_get_stats(a, &x);
	kw_get_stats(b, &y);
	cr_assert_eq(x.documents, y.documents);
	cr_assert_eq(x.postings, y.postings);
	cr_assert_eq(x.postings_bytes, y.postings_bytes);
}

/* corpus() without the events of session s1 that hidden_s1 names. */
static void corpus_visible(kw_index *x)
{
	static const char *const words[] = { "alpha", "bravo", "charlie", "delta", "echo",
					     "foxtrot", "golf", "hotel" };
	char text[256], sid[8];
	for (int s = 0; s < 5; s++) {
		snprintf(sid, sizeof(sid), "s%d", s);
		for (int i = 0; i < 60; i++) {
			if (s == 1 && hidden_s1(i + 1))
				continue;
			snprintf(text, sizeof(text), "%s %s %s unique%dx%d %s", words[i % 8],
				 words[(i * 3 + s) % 8], words[(i + s) % 5], s, i,
				 i % 7 == 0 ? "rare" : "");
			add_in(x, "app", "u1", sid, i + 1, i % 2 ? "alice" : "bob", 1000 * s + i, text);
		}
	}
}

Test(keyword, adding_an_event_twice_indexes_it_once)
{
	kw_index *fresh = kw_new(K1, B);

	corpus(kw, -1);
	corpus(kw, -1);
	corpus(fresh, -1);
	expect_same_index(kw, fresh);
	kw_free(fresh);
}

Test(keyword, deleting_events_is_exact)
{
	kw_index *fresh = kw_new(K1, B);
	int64_t seqs[60];
	size_t n = 0;
	result r;

	corpus(kw, -1);
	corpus_visible(fresh);
	for (int64_t seq = 1; seq <= 60; seq++)
		if (hidden_s1((int)seq) && seq != 3)
			seqs[n++] = seq;
	seqs[n++] = 999; /* not indexed: ignored */
	cr_assert_eq(kw_delete_events(kw, "app", "u1", "s1", seqs, n), 0);
	cr_assert_eq(kw_delete_event(kw, "app", "u1", "s1", 3), 0);
	/* Unknown sessions, users and seqs change nothing. */
	cr_assert_eq(kw_delete_event(kw, "app", "u1", "s1", 3), 0);
	cr_assert_eq(kw_delete_event(kw, "app", "u1", "nope", 1), 0);
	cr_assert_eq(kw_delete_event(kw, "app", "nobody", "s1", 1), 0);
	expect_same_index(kw, fresh);
	r = search("u1", "unique1x55");
	cr_assert_eq(r.n, 0, "a removed event is found");
	result_free(&r);
	/* Visible again (an undo): added back, once, like the reference. */
	add_in(kw, "app", "u1", "s1", 56, "bob", 1055, "alpha comeback");
	add_in(kw, "app", "u1", "s1", 56, "bob", 1055, "alpha comeback");
	add_in(fresh, "app", "u1", "s1", 56, "bob", 1055, "alpha comeback");
	expect_same_index(kw, fresh);
	expect_same(kw, fresh, "comeback");
	kw_free(fresh);
}

/* ---- the feed's records ------------------------------------------------------------ */

#define FEED_MAX 512
#define FEED_TEXT 96

typedef struct script {
	feed_rec recs[FEED_MAX];
	char texts[FEED_MAX][FEED_TEXT];
	size_t n;
} script;

static const char *event_text(int s, int seq, char *buf)
{
	static const char *const words[] = { "alpha", "bravo", "charlie", "delta", "echo" };
	snprintf(buf, FEED_TEXT, "%s %s unique%dx%d", words[seq % 5], words[(seq * 3 + s) % 5], s,
		 seq);
	return buf;
}

static void put(script *sc, uint32_t kind, const char *user, int s, int seq)
{
	static const char *const sessions[] = { "s0", "s1", "s2" };
	feed_rec *r = &sc->recs[sc->n];

	cr_assert_lt(sc->n, FEED_MAX);
	*r = (feed_rec){ .kind = kind, .position = (int64_t)sc->n + 1, .app = "app", .user = user,
			 .session = sessions[s] };
	if (kind == MEMD_FEED_EVENT || kind == MEMD_FEED_HIDE) {
		r->event_id = "e";
		r->author = "user";
		r->role = "user";
		r->text = kind == MEMD_FEED_EVENT ? event_text(s, seq, sc->texts[sc->n]) : "";
		r->seq = seq;
		r->timestamp_us = 1000 * s + seq;
	}
	sc->n++;
}

static void put_range(script *sc, uint32_t kind, int s, int from, int to)
{
	for (int seq = from; seq <= to; seq++)
		put(sc, kind, "u1", s, seq);
}

static void apply_in(kw_index *x, const script *sc, size_t batch)
{
	for (size_t i = 0; i < sc->n; i += batch) {
		size_t n = sc->n - i < batch ? sc->n - i : batch, done = 0;
		memd_error err = { 0 };
		cr_assert_eq(kw_feed_apply(x, sc->recs + i, n, &done, &err), 0, "%s", err.msg);
		cr_assert_eq(done, n);
	}
}

Test(keyword, following_the_feed_equals_a_rebuild_from_visible_events)
{
	static script sc;
	kw_index *batched = kw_new(K1, B), *rebuilt = kw_new(K1, B);
	char buf[FEED_TEXT];
	static const char *const queries[] = { "alpha", "bravo charlie", "unique1x45",
					       "unique1x65", "unique2x3", "echo delta" };

	sc.n = 0;
	put_range(&sc, MEMD_FEED_EVENT, 0, 1, 40);
	put_range(&sc, MEMD_FEED_EVENT, 1, 1, 60);
	put_range(&sc, MEMD_FEED_EVENT, 2, 1, 40);
	put_range(&sc, MEMD_FEED_HIDE, 1, 31, 60);  /* a rewind */
	put_range(&sc, MEMD_FEED_EVENT, 1, 61, 70); /* appended after it */
	put_range(&sc, MEMD_FEED_HIDE, 1, 61, 70);  /* undone: hidden ... */
	put_range(&sc, MEMD_FEED_EVENT, 1, 31, 60); /* ... and visible again */
	put(&sc, MEMD_FEED_EVENT, "u1", 1, 5);      /* delivered twice */
	put(&sc, MEMD_FEED_HIDE, "u9", 1, 5);       /* a user never indexed */
	put_range(&sc, MEMD_FEED_HIDE, 2, 1, 40);   /* a clear */
	put(&sc, MEMD_FEED_DELETE_SESSION, "u1", 0, 0);
	put(&sc, MEMD_FEED_FINALIZE, "u1", 1, 0);   /* nothing to index */
	apply_in(kw, &sc, sc.n);
	apply_in(batched, &sc, 7);                  /* runs cut by batches */
	/* A rebuild reads the visible events: s1 1..60. */
	for (int seq = 1; seq <= 60; seq++)
		add_in(rebuilt, "app", "u1", "s1", seq, "user", 1000 + seq, event_text(1, seq, buf));
	for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++) {
		expect_same(kw, rebuilt, queries[i]);
		expect_same(batched, rebuilt, queries[i]);
	}
	expect_same_index(kw, rebuilt);
	expect_same_index(batched, rebuilt);
	kw_free(batched);
	kw_free(rebuilt);
}

/* ---- fields (BM25F) ------------------------------------------------------------ */

/* The author is a field: "caroline" finds the events Caroline wrote
 * (BM25F: tf~ = w_author * 1, unnormalized), a per-field search counts
 * only its fields, and the exact authors filter stays exact. */
Test(keyword, the_author_is_a_field)
{
	const char *exact[] = { "Caroline" }, *folded[] = { "caroline" };
	result r;

	add_in(kw, "app", "u1", "s", 1, "Caroline", 100, "I went hiking");
	add_in(kw, "app", "u1", "s", 2, "Melanie", 200, "hiking with my kids");
	add_in(kw, "app", "u1", "s", 3, "Melanie", 300, "Caroline sent a postcard");

	kw_filter author_only = { .fields = KW_FIELD_AUTHOR };
	r = search_f(kw, "u1", "caroline", &author_only, 10);
	cr_assert_eq(r.n, 1);
	cr_assert_eq(r.hits[0].seq, 1);
	/* N = 3, df = 2 (body of 3, author of 1): idf = ln(1 + 1.5/2.5);
	 * x = 1: tf part = 2.2 / 2.2. */
	cr_assert_float_eq(r.hits[0].score, idf(3, 2), EPS);
	result_free(&r);

	kw_filter body_only = { .fields = KW_FIELD_BODY };
	r = search_f(kw, "u1", "caroline", &body_only, 10);
	cr_assert_eq(r.n, 1);
	cr_assert_eq(r.hits[0].seq, 3);
	result_free(&r);

	/* Both fields by default; the author's match counts with the body's. */
	r = search_f(kw, "u1", "caroline hiking", NULL, 10);
	cr_assert_eq(r.n, 3);
	cr_assert_eq(r.hits[0].seq, 1);
	result_free(&r);

	kw_filter by_exact = { .authors = exact, .n_authors = 1 };
	r = search_f(kw, "u1", "hiking", &by_exact, 10);
	cr_assert_eq(r.n, 1);
	cr_assert_eq(r.hits[0].seq, 1);
	result_free(&r);
	kw_filter by_folded = { .authors = folded, .n_authors = 1 };
	r = search_f(kw, "u1", "hiking", &by_folded, 10);
	cr_assert_eq(r.n, 0, "the authors filter compares names exactly");
	result_free(&r);
}

/* ---- memories ------------------------------------------------------------------ */

static void put_mem(const char *user, const char *id, int64_t updated, int64_t expires,
		    const char *text, const char *tags)
{
	kw_doc_in d = { .app = "app", .user = user, .session = id, .timestamp_us = updated,
			.text = text, .text_len = strlen(text), .flags = KW_DOC_MEMORY,
			.expires_us = expires, .tags = tags, .tags_len = tags ? strlen(tags) : 0 };
	cr_assert_eq(kw_add(kw, &d), 0);
}

Test(keyword, memories_are_documents)
{
	kw_filter memories = { .sources = KW_SOURCE_MEMORIES };
	kw_filter events = { .sources = KW_SOURCE_EVENTS };
	kw_filter tags = { .sources = KW_SOURCE_MEMORIES, .fields = KW_FIELD_TAGS };
	kw_filter other_session = { .session = "s9" };
	result r;

	add_in(kw, "app", "u1", "s", 1, "user", 100, "I like the window seat on trains");
	put_mem("u1", "m1", 500, 0, "prefers window seats", "travel trains");

	r = search_f(kw, "u1", "window", &memories, 10);
	cr_assert_eq(r.n, 1);
	cr_assert(r.hits[0].memory);
	cr_assert_str_eq(r.hits[0].session, "m1");
	cr_assert_eq(r.hits[0].seq, 0);
	cr_assert_eq(r.hits[0].timestamp_us, 500);
	result_free(&r);
	r = search_f(kw, "u1", "window", &events, 10);
	cr_assert_eq(r.n, 1);
	cr_assert(!r.hits[0].memory);
	result_free(&r);
	r = search_f(kw, "u1", "window", NULL, 10);
	cr_assert_eq(r.n, 2, "both kinds by default");
	result_free(&r);
	/* The event filters narrow events only. */
	r = search_f(kw, "u1", "window", &other_session, 10);
	cr_assert_eq(r.n, 1);
	cr_assert(r.hits[0].memory);
	result_free(&r);
	r = search_f(kw, "u1", "travel", &tags, 10);
	cr_assert_eq(r.n, 1, "topics and entities are the tags field");
	result_free(&r);

	/* A new version replaces the old one. */
	put_mem("u1", "m1", 600, 0, "prefers aisle seats", "travel");
	r = search_f(kw, "u1", "window", &memories, 10);
	cr_assert_eq(r.n, 0);
	result_free(&r);
	r = search_f(kw, "u1", "aisle", &memories, 10);
	cr_assert_eq(r.n, 1);
	cr_assert_eq(r.hits[0].timestamp_us, 600);
	result_free(&r);

	/* A session named like the memory: deleting it leaves the memory. */
	add_in(kw, "app", "u1", "m1", 1, "user", 100, "aisle talk");
	cr_assert_eq(kw_delete_session(kw, "app", "u1", "m1"), 0);
	r = search_f(kw, "u1", "aisle", NULL, 10);
	cr_assert_eq(r.n, 1);
	cr_assert(r.hits[0].memory);
	result_free(&r);

	cr_assert_eq(kw_delete_memory(kw, "app", "u1", "m1"), 0);
	r = search_f(kw, "u1", "aisle", NULL, 10);
	cr_assert_eq(r.n, 0);
	result_free(&r);
	r = search_f(kw, "u1", "window", NULL, 10);
	cr_assert_eq(r.n, 1, "the event stays");
	result_free(&r);

	put_mem("u1", "m2", 700, 0, "allergic to nuts", NULL);
	kw_delete_user(kw, "app", "u1");
	r = search_f(kw, "u1", "nuts", NULL, 10);
	cr_assert_eq(r.n, 0);
	result_free(&r);
}

Test(keyword, expired_memories_never_come_out)
{
	kw_filter before = { .now_us = 999 }, at = { .now_us = 1000 };
	result r;

	put_mem("u1", "m1", 500, 1000, "parking spot 42", NULL);
	put_mem("u1", "m2", 500, 0, "parking is free on sundays", NULL);
	r = search_f(kw, "u1", "parking", &before, 10);
	cr_assert_eq(r.n, 2);
	result_free(&r);
	r = search_f(kw, "u1", "parking", &at, 10);
	cr_assert_eq(r.n, 1);
	cr_assert_str_eq(r.hits[0].session, "m2");
	result_free(&r);
}

/* The feed's MEMORY and MEMORY_DELETE records; DELETE_SESSION leaves
 * memories, DELETE_USER removes them. */
Test(keyword, memory_records_from_the_feed)
{
	kw_filter memories = { .sources = KW_SOURCE_MEMORIES };
	feed_rec recs[] = {
		{ .kind = MEMD_FEED_MEMORY, .position = 1, .app = "app", .user = "u1",
		  .memory_id = "m1", .text = "likes green tea", .topics = "[\"drinks\"]",
		  .entities = "[\"Sencha Co\"]", .timestamp_us = 10 },
		{ .kind = MEMD_FEED_DELETE_SESSION, .position = 2, .app = "app", .user = "u1",
		  .session = "m1" },
	};
	feed_rec del = { .kind = MEMD_FEED_MEMORY_DELETE, .position = 3, .app = "app",
			 .user = "u1", .memory_id = "m1" };
	feed_rec user = { .kind = MEMD_FEED_DELETE_USER, .position = 4, .app = "app", .user = "u1" };
	memd_error err = { 0 };
	size_t done = 0;
	result r;

	cr_assert_eq(kw_feed_apply(kw, recs, 2, &done, &err), 0);
	cr_assert_eq(done, 2);
	r = search_f(kw, "u1", "sencha drinks", &memories, 10);
	cr_assert_eq(r.n, 1);
	result_free(&r);
	cr_assert_eq(kw_feed_apply(kw, &del, 1, &done, &err), 0);
	r = search_f(kw, "u1", "tea", &memories, 10);
	cr_assert_eq(r.n, 0);
	result_free(&r);
	cr_assert_eq(kw_feed_apply(kw, recs, 1, &done, &err), 0);
	cr_assert_eq(kw_feed_apply(kw, &user, 1, &done, &err), 0);
	r = search_f(kw, "u1", "tea", &memories, 10);
	cr_assert_eq(r.n, 0);
	result_free(&r);
}

/* A run of one user's memory records (a commit of several writes)
 * removes the older versions in one pass and leaves what applying them
 * one at a time leaves: the last record of each id wins. */
Test(keyword, a_run_of_memory_records_equals_one_at_a_time)
{
	kw_index *one = kw_new(K1, B);
	kw_filter memories = { .sources = KW_SOURCE_MEMORIES };
	feed_rec recs[] = {
		{ .kind = MEMD_FEED_MEMORY, .position = 1, .app = "app", .user = "u1",
		  .memory_id = "m1", .text = "tea with lemon", .topics = "[]", .entities = "[]" },
		{ .kind = MEMD_FEED_MEMORY, .position = 2, .app = "app", .user = "u1",
		  .memory_id = "m2", .text = "tea with milk", .topics = "[]", .entities = "[]" },
		{ .kind = MEMD_FEED_MEMORY, .position = 3, .app = "app", .user = "u1",
		  .memory_id = "m3", .text = "green tea", .topics = "[]", .entities = "[]" },
		{ .kind = MEMD_FEED_MEMORY_DELETE, .position = 4, .app = "app", .user = "u1",
		  .memory_id = "m2" },
		{ .kind = MEMD_FEED_MEMORY, .position = 5, .app = "app", .user = "u1",
		  .memory_id = "m1", .text = "tea without lemon", .topics = "[]", .entities = "[]" },
		{ .kind = MEMD_FEED_MEMORY_DELETE, .position = 6, .app = "app", .user = "u1",
		  .memory_id = "m3" },
		{ .kind = MEMD_FEED_MEMORY, .position = 7, .app = "app", .user = "u1",
		  .memory_id = "m3", .text = "black tea", .topics = "[]", .entities = "[]" },
	};
	size_t n = sizeof(recs) / sizeof(recs[0]), done = 0;
	memd_error err = { 0 };
	result a, b;

	cr_assert_not_null(one);
	cr_assert_eq(kw_feed_apply(kw, recs, 3, &done, &err), 0);
	cr_assert_eq(kw_feed_apply(kw, recs + 3, n - 3, &done, &err), 0);
	cr_assert_eq(done, n - 3);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(kw_feed_apply(one, &recs[i], 1, &done, &err), 0);
	a = search_f(kw, "u1", "tea lemon", &memories, 10);
	b = search_f(one, "u1", "tea lemon", &memories, 10);
	cr_assert_eq(a.n, 2);
	cr_assert_eq(b.n, a.n);
	for (size_t i = 0; i < a.n; i++) {
		cr_assert_str_eq(a.hits[i].session, b.hits[i].session);
		cr_assert_float_eq(a.hits[i].score, b.hits[i].score, EPS);
	}
	cr_assert_str_eq(a.hits[0].session, "m1");
	cr_assert_str_eq(a.hits[1].session, "m3");
	result_free(&a);
	result_free(&b);
	a = search_f(kw, "u1", "green milk", &memories, 10);
	cr_assert_eq(a.n, 0, "m2 deleted, m3's older version gone");
	result_free(&a);
	kw_free(one);
}
