/* SPDX-License-Identifier: MIT */
/*
 * Retrieval quality: labelled sets of qgen (seeded, generated here) are
 * loaded through the facade (sqlite session store, keyword index, an
 * embedder into filevec) and into an SQLite FTS5 table (porter
 * tokenizer, bm25, queries filtered to the asking user); recall@5 and
 * recall@10 of keyword, vector, hybrid and FTS5 are printed side by side.
 *
 * Two sets: "assistant" (a user and an assistant; questions paraphrase
 * the answer) and "party" (named people chatting; questions name the
 * speaker and share few words with the answer, so the hash embedder's
 * vectors are weak). The embedder is the built-in hash embedder, or with
 * MEMD_QUALITY_EMBEDDER=openai the openai embedder on the local
 * embeddings stand-in (MEMD_OPENAI_STANDIN_URL, with_standins.py
 * --openai), whose vectors hash the words too (no stemming, no
 * trigrams): another bag-of-words list, weak in other places, which is
 * what the fusion bar needs, not a semantic model.
 *
 * The bars, for every set and embedder: hybrid recall@10 is at least the
 * better of keyword's and vector's (within Q_FUSION_SLACK), with the
 * index's default index.hybrid.vector_weight for that embedder. On the
 * assistant set with the hash embedder: memd's keyword recall@10 is at
 * least FTS5's, and every mode is far above chance.
 *
 * MEMD_QUALITY_SWEEP="w1,w2,..." also prints hybrid recall for each
 * index.hybrid.vector_weight listed (how the defaults were chosen). With
 * MEMD_QUALITY_VERBOSE set, every question keyword or FTS5 misses is
 * printed (LOST: FTS5 found more, WON: keyword did, MISS: both missed).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <memd/memd.h>

#include "../index/index_util.h"
#include "qgen.h"
#include "standin_client.h"

#define Q_SEED 20261121u
#define Q_USERS 28
#define Q_SESSIONS 10
#define Q_PER_USER 12
#define Q_MIN_QUESTIONS 300
/* The party set: QGEN_FACTS_PER_SESSION facts a chat, every fact told
 * once per user over its 8 chats. */
#define Q_PARTY_SEED 20261125u
#define Q_PARTY_USERS 30
#define Q_PARTY_SESSIONS 8
#define Q_K 10
#define Q_K_SHORT 5
#define Q_APP "quality"
/* Chance is about Q_K / (events per user) ~ 0.05: every mode must do far
 * better than that on the assistant set (measured with the hash embedder:
 * keyword 0.93, vector 0.88, hybrid 0.94). */
#define Q_FLOOR_R10 0.6
/* Hybrid may trail the better input by this much recall@10 (one or two
 * of several hundred questions). */
#define Q_FUSION_SLACK 0.005
#define Q_HASH_DIM 128
#define Q_OPENAI_DIM 256
#define Q_TS_MAX 96
#define Q_FTS_QUERY_MAX 4096
#define Q_CONFIG_MAX 2048
#define Q_NAME_MAX 96
/* Set (to anything) to print each question keyword and FTS5 disagree on. */
#define Q_ENV_VERBOSE "MEMD_QUALITY_VERBOSE"
#define Q_ENV_EMBEDDER "MEMD_QUALITY_EMBEDDER"
#define Q_ENV_SWEEP "MEMD_QUALITY_SWEEP"
#define Q_ENV_OPENAI_URL "MEMD_OPENAI_STANDIN_URL"

enum { M_KEYWORD, M_VECTOR, M_HYBRID, M_FTS5, M_COUNT };
static const char *const mode_names[M_COUNT] = { "keyword", "vector", "hybrid", NULL };
static const char *const mode_labels[M_COUNT] = { "memd keyword (BM25)", "memd vector",
						   "memd hybrid", "SQLite FTS5 porter bm25" };

/* ---- the memd under test ---------------------------------------------------- */

/* The embedder under test: "hash" (default) or "openai" (the stand-in). */
static const char *q_embedder(void)
{
	const char *e = getenv(Q_ENV_EMBEDDER);
	return e && *e ? e : "hash";
}

/* Write e's config: sqlite sessions, keyword, the embedder under test into
 * filevec; vector_weight < 0: index.hybrid left to its default. */
static void q_write_config(const ix_env *e, const char *model, double vector_weight)
{
	char emb[Q_CONFIG_MAX], hybrid[Q_CONFIG_MAX] = "";
	FILE *f;

	if (strcmp(q_embedder(), "openai") == 0)
		snprintf(emb, sizeof(emb), "{type: openai, url: \"%s\", model: %s, batch: 256}",
			 sc_env(Q_ENV_OPENAI_URL), model);
	else
		snprintf(emb, sizeof(emb), "{type: hash, dim: %d}", Q_HASH_DIM);
	if (vector_weight >= 0)
		snprintf(hybrid, sizeof(hybrid), "  hybrid: {vector_weight: %g}\n", vector_weight);
	f = fopen(e->config_path, "w");
	cr_assert_not_null(f);
	fprintf(f,
		"stores:\n"
		"  main: {plugin: sqlite, path: \"%s/memd.db\"}\n"
		"  vec: {plugin: filevec, path: \"%s/vec\"}\n"
		"index:\n"
		"  keyword: {enabled: true}\n"
		"  vector: {enabled: true, store: vec, embedder: %s}\n"
		"%s",
		e->dir, e->dir, emb, hybrid);
	cr_assert_eq(fclose(f), 0);
}

/* The stand-in's vectors for model: Q_OPENAI_DIM dimensions. */
static void q_model(char model[Q_NAME_MAX])
{
	char *url, *body;

	snprintf(model, Q_NAME_MAX, "quality_%ld", (long)getpid());
	if (strcmp(q_embedder(), "openai") != 0)
		return;
	cr_assert(asprintf(&url, "%s/../__standin/models", sc_env(Q_ENV_OPENAI_URL)) >= 0);
	cr_assert(asprintf(&body, "{\"model\": \"%s\", \"dim\": %d}", model, Q_OPENAI_DIM) >= 0);
	json_decref(sc_post(url, body));
	free(url);
	free(body);
}

static void rfc3339(int64_t us, char out[Q_TS_MAX])
{
	time_t secs = (time_t)(us / 1000000);
	struct tm tm;
	gmtime_r(&secs, &tm);
	snprintf(out, Q_TS_MAX, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(us % 1000000));
}

/* Append the events [i, j) (one session) in one call. */
static void append_session(memd *m, const qgen_set *s, size_t i, size_t j)
{
	char uid[QGEN_ID_MAX], sid[QGEN_ID_MAX], eid[QGEN_ID_MAX], ts[Q_TS_MAX], *body, *out = NULL;
	json_t *evs = json_array(), *b;
	memd_error err = { 0 };
	int32_t r;

	qgen_user_id(s->events[i].user, uid);
	qgen_session_id(s->events[i].user, s->events[i].session, sid);
	for (size_t x = i; x < j; x++) {
		qgen_event_id(&s->events[x], eid);
		rfc3339(s->events[x].timestamp_us, ts);
		json_array_append_new(evs, json_pack("{s:s,s:s,s:s,s:s,s:s?}", "id", eid, "role",
						     s->events[x].role, "content", s->events[x].text,
						     "timestamp", ts, "author", s->events[x].author));
	}
	b = json_pack("{s:o}", "events", evs);
	body = json_dumps(b, JSON_COMPACT);
	json_decref(b);
	ix_session(m, Q_APP, uid, sid);
	r = memd_events_append(m, Q_APP, uid, sid, body, &out, &err);
	free(body);
	cr_assert_eq(r, 0, "append %s: %s", sid, err.msg);
	memd_free(out);
}

static void load_set(memd *m, const qgen_set *s)
{
	for (size_t i = 0, j; i < s->n_events; i = j) {
		for (j = i + 1; j < s->n_events && s->events[j].user == s->events[i].user &&
				s->events[j].session == s->events[i].session;
		     j++)
			;
		append_session(m, s, i, j);
	}
}

/* ---- scoring ------------------------------------------------------------------ */

/* Ids of the events answering q. */
typedef struct answers {
	char ids[QGEN_ANSWERS_MAX][QGEN_ID_MAX];
	uint32_t n;
} answers;

static void answers_of(const qgen_set *s, const qgen_question *q, answers *a)
{
	a->n = q->n_answers < QGEN_ANSWERS_MAX ? q->n_answers : QGEN_ANSWERS_MAX;
	for (uint32_t i = 0; i < a->n; i++) {
		char id[QGEN_ID_MAX];
		qgen_event_id(&s->events[q->answers[i]], id);
		memcpy(a->ids[i], id, sizeof(id));
	}
}

/* Count answers at ranks < Q_K_SHORT and < Q_K given ranked ids. */
static void score(const answers *a, const char *id, size_t rank, double *r5, double *r10)
{
	for (uint32_t i = 0; i < a->n; i++) {
		if (strcmp(a->ids[i], id) != 0)
			continue;
		if (rank < Q_K_SHORT)
			*r5 += 1.0 / a->n;
		if (rank < Q_K)
			*r10 += 1.0 / a->n;
	}
}

static void run_memd(memd *m, const qgen_question *q, const char *mode, const answers *a,
		     double *r5, double *r10)
{
	char uid[QGEN_ID_MAX], *body, *out = NULL;
	/* Events only: the answers are events, and the memories extraction
	 * distils from the same conversations would take ranks from them. */
	json_t *req = json_pack("{s:s,s:i,s:s,s:[s]}", "query", q->text, "k", Q_K, "mode", mode,
				"sources", "events"),
	       *res, *hit;
	memd_error err = { 0 };
	size_t i;

	qgen_user_id(q->user, uid);
	body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	cr_assert_eq(memd_search(m, Q_APP, uid, body, &out, &err), 0, "%s: %s", body, err.msg);
	res = json_loads(out, 0, NULL);
	cr_assert_not_null(res);
	json_array_foreach(ix_results(res), i, hit)
		score(a, json_string_value(json_object_get(hit, "event_id")), i, r5, r10);
	json_decref(res);
	memd_free(out);
	free(body);
}

/* ---- FTS5 --------------------------------------------------------------------- */

/* The question's words as an FTS5 OR query: each word quoted (so no
 * word is taken for an operator), any of them may match, bm25 ranks. */
static void fts_query(const char *text, char out[Q_FTS_QUERY_MAX])
{
	size_t n = 0;
	const char *p = text;

	out[0] = '\0';
	while (*p) {
		const char *w;
		while (*p && !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			       (*p >= '0' && *p <= '9')))
			p++;
		w = p;
		while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'))
			p++;
		if (p > w)
			n += (size_t)snprintf(out + n, Q_FTS_QUERY_MAX - n, "%s\"%.*s\"", n ? " OR " : "",
					      (int)(p - w), w);
		cr_assert_lt(n, (size_t)Q_FTS_QUERY_MAX);
	}
}

static sqlite3 *fts_load(const qgen_set *s)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	char uid[QGEN_ID_MAX], eid[QGEN_ID_MAX];

	cr_assert_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db,
				  "CREATE VIRTUAL TABLE fts USING fts5(text, user UNINDEXED, eid UNINDEXED,"
				  " tokenize = 'porter unicode61');"
				  "BEGIN;",
				  NULL, NULL, NULL),
		     SQLITE_OK, "%s", sqlite3_errmsg(db));
	cr_assert_eq(sqlite3_prepare_v2(db, "INSERT INTO fts (text, user, eid) VALUES (?, ?, ?)", -1,
					&st, NULL),
		     SQLITE_OK);
	for (size_t i = 0; i < s->n_events; i++) {
		qgen_user_id(s->events[i].user, uid);
		qgen_event_id(&s->events[i], eid);
		sqlite3_bind_text(st, 1, s->events[i].text, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, uid, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, eid, -1, SQLITE_STATIC);
		cr_assert_eq(sqlite3_step(st), SQLITE_DONE, "%s", sqlite3_errmsg(db));
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	cr_assert_eq(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	return db;
}

static void run_fts(sqlite3 *db, sqlite3_stmt *st, const qgen_question *q, const answers *a,
		    double *r5, double *r10)
{
	char uid[QGEN_ID_MAX], query[Q_FTS_QUERY_MAX];
	size_t rank = 0;
	int rc;

	qgen_user_id(q->user, uid);
	fts_query(q->text, query);
	sqlite3_bind_text(st, 1, query, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, uid, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, Q_K);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		score(a, (const char *)sqlite3_column_text(st, 0), rank++, r5, r10);
	cr_assert_eq(rc, SQLITE_DONE, "%s: %s", query, sqlite3_errmsg(db));
	sqlite3_reset(st);
}

/* ---- a run -------------------------------------------------------------------- */

/* Recall of one mode (hybrid) over every question of s. */
static void run_mode(memd *m, const qgen_set *s, int md, double *r5, double *r10)
{
	*r5 = *r10 = 0;
	for (size_t i = 0; i < s->n_questions; i++) {
		answers a;
		answers_of(s, &s->questions[i], &a);
		run_memd(m, &s->questions[i], mode_names[md], &a, r5, r10);
	}
	*r5 /= (double)s->n_questions;
	*r10 /= (double)s->n_questions;
}

/* Hybrid recall with each index.hybrid.vector_weight of $MEMD_QUALITY_SWEEP
 * (memd reopened on the same data for each). */
static void sweep(ix_env *e, const char *model, const qgen_set *s)
{
	const char *list = getenv(Q_ENV_SWEEP);
	char *copy, *tok, *save = NULL;

	if (!list || !*list)
		return;
	copy = strdup(list);
	cr_assert_not_null(copy);
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		double w = strtod(tok, NULL), r5, r10;
		memd *m;
		q_write_config(e, model, w);
		m = ix_open(e);
		run_mode(m, s, M_HYBRID, &r5, &r10);
		memd_close(m);
		printf("  hybrid vector_weight %-6g %10.3f %10.3f\n", w, r5, r10);
	}
	fflush(stdout);
	free(copy);
}

/* Load s into a fresh memd (the embedder under test, default fusion) and
 * FTS5, measure every mode, print the table; r5/r10 per M_*. */
static void measure(const char *set_name, const qgen_set *s, double r5[M_COUNT],
		    double r10[M_COUNT])
{
	char model[Q_NAME_MAX];
	sqlite3_stmt *st = NULL;
	sqlite3 *db;
	const char *verbose = getenv(Q_ENV_VERBOSE);
	ix_env e;
	memd *m;

	memset(r5, 0, M_COUNT * sizeof(*r5));
	memset(r10, 0, M_COUNT * sizeof(*r10));
	q_model(model);
	ix_env_make(&e);
	q_write_config(&e, model, -1);
	m = ix_open(&e);
	load_set(m, s);
	db = fts_load(s);
	cr_assert_eq(sqlite3_prepare_v2(db,
					"SELECT eid FROM fts WHERE fts MATCH ?1 AND user = ?2"
					" ORDER BY rank LIMIT ?3",
					-1, &st, NULL),
		     SQLITE_OK, "%s", sqlite3_errmsg(db));
	for (size_t i = 0; i < s->n_questions; i++) {
		const qgen_question *q = &s->questions[i];
		double before[M_COUNT], kw, fts;
		answers a;

		answers_of(s, q, &a);
		memcpy(before, r10, sizeof(before));
		for (int md = M_KEYWORD; md <= M_HYBRID; md++)
			run_memd(m, q, mode_names[md], &a, &r5[md], &r10[md]);
		run_fts(db, st, q, &a, &r5[M_FTS5], &r10[M_FTS5]);
		kw = r10[M_KEYWORD] - before[M_KEYWORD];
		fts = r10[M_FTS5] - before[M_FTS5];
		if (verbose && (kw < 1.0 || fts < 1.0))
			printf("%s u%u \"%s\" -> \"%s\": keyword %.1f fts5 %.1f\n",
			       kw < fts ? "LOST" : kw > fts ? "WON " : "MISS", q->user, q->text,
			       s->events[q->answers[0]].text, kw, fts);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	memd_close(m);

	printf("retrieval quality, %s set, %s embedder: %zu events, %u users x %u sessions, "
	       "%zu questions\n",
	       set_name, q_embedder(), s->n_events, s->users, s->sessions, s->n_questions);
	printf("%-26s %10s %10s\n", "mode", "recall@5", "recall@10");
	for (int md = 0; md < M_COUNT; md++) {
		r5[md] /= (double)s->n_questions;
		r10[md] /= (double)s->n_questions;
		printf("%-26s %10.3f %10.3f\n", mode_labels[md], r5[md], r10[md]);
	}
	fflush(stdout);
	sweep(&e, model, s);
	ix_env_remove(&e);
}

/* Hybrid is not worse than the better of its inputs. */
static void expect_fusion(const char *set_name, const double r10[M_COUNT])
{
	double best = r10[M_KEYWORD] > r10[M_VECTOR] ? r10[M_KEYWORD] : r10[M_VECTOR];
	cr_expect_geq(r10[M_HYBRID], best - Q_FUSION_SLACK,
		      "%s set, %s embedder: hybrid recall@10 %.3f below the better input's %.3f "
		      "(keyword %.3f, vector %.3f)",
		      set_name, q_embedder(), r10[M_HYBRID], best, r10[M_KEYWORD], r10[M_VECTOR]);
}

Test(quality, assistant_set, .timeout = 300)
{
	qgen_params p = { .seed = Q_SEED, .users = Q_USERS, .sessions = Q_SESSIONS,
			  .questions_per_user = Q_PER_USER };
	double r5[M_COUNT], r10[M_COUNT];
	qgen_set *s = NULL;

	cr_assert_eq(qgen_make(&p, &s), 0);
	cr_assert_geq(s->n_questions, Q_MIN_QUESTIONS);
	measure("assistant", s, r5, r10);
	expect_fusion("assistant", r10);
	if (strcmp(q_embedder(), "hash") == 0) {
		for (int md = 0; md < M_COUNT; md++)
			cr_expect_geq(r10[md], Q_FLOOR_R10, "%s: recall@10 %.3f below the floor %.2f",
				      mode_labels[md], r10[md], Q_FLOOR_R10);
		cr_expect_geq(r10[M_KEYWORD], r10[M_FTS5], "keyword recall@10 %.3f below FTS5's %.3f",
			      r10[M_KEYWORD], r10[M_FTS5]);
	}
	qgen_free(s);
}

Test(quality, party_set, .timeout = 300)
{
	qgen_params p = { .seed = Q_PARTY_SEED, .style = QGEN_STYLE_PARTY, .users = Q_PARTY_USERS,
			  .sessions = Q_PARTY_SESSIONS, .questions_per_user = Q_PER_USER };
	double r5[M_COUNT], r10[M_COUNT];
	qgen_set *s = NULL;

	cr_assert_eq(qgen_make(&p, &s), 0);
	cr_assert_geq(s->n_questions, Q_MIN_QUESTIONS);
	measure("party", s, r5, r10);
	expect_fusion("party", r10);
	qgen_free(s);
}
