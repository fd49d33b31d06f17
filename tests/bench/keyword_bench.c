/* SPDX-License-Identifier: MIT */
/*
 * keyword_bench: memd's keyword index (host/index/keyword.c, BM25 over
 * per-(app, user) partitions) against SQLite FTS5 (porter unicode61,
 * bm25, one table with a user column, every query filtered to the asking
 * user as a memory service must) on the same corpus: qgen's labelled
 * multi-session conversations (tests/quality/qgen.h) at several sizes,
 * about QB_EVENTS_PER_USER events per user (1M events: ~1,700 users).
 *
 * Per size: query latency p50/p99 and recall@10 against qgen's labels
 * for the same questions (QB_QUERIES sampled, each asked as its user); indexing
 * throughput (events/s) of the keyword index (kw_add directly: what the
 * feed tailer does per event, without the store), of the hash embedder
 * into filevec (embed + upsert through the plugin ABI, as the vector
 * indexer does; on at most QB_VECTOR_MAX events) and of FTS5 (one
 * transaction); index memory per event (the index's own accounting and
 * the malloc heap growth, mallinfo2). "hash only" is the embedder's
 * share of hash->filevec.
 *
 * Usage: keyword_bench [events ...]   (default 10000 100000 1000000)
 * MEMD_PLUGIN_PATH must name the built plugins (for filevec).
 * MEMD_BENCH_VERBOSE=1 prints the questions keyword and FTS5 disagree on;
 * MEMD_BENCH_K1 / MEMD_BENCH_B set BM25's parameters (default: memd's);
 * MEMD_BENCH_SAMPLE=n asks another seeded sample of questions.
 */
#include <ftw.h>
#include <malloc.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "index/embed_hash.h"
#include "index/keyword.h"
#include "plugins/loader.h"
#include "config/settings.h"
#include "qgen.h"

#define QB_SEED 0x6B657962656E6368ULL
#define QB_EVENTS_PER_USER 588      /* 1M events over ~1,700 users */
#define QB_SESSIONS 30              /* per user: ~19.5 events each */
#define QB_QUESTIONS_PER_USER 2    /* at least; more when few users */
#define QB_QUERIES 600
#define QB_K 10
#define QB_APP "bench"
#define QB_DIM 256
#define QB_EMBED_BATCH 64
#define QB_VECTOR_MAX 100000
#define QB_FTS_QUERY_MAX 4096
#define QB_SEARCH_DIRS 16
#define QB_NFTW_FDS 16
#define QB_PATH_MAX 1024
#define QB_DIR_MAX 900             /* leaves room for the file names */
#define QB_MS_PER_S 1e3
#define QB_NS_PER_S 1e9
#define QB_P50 0.50
#define QB_P99 0.99
#define QB_MAX_SIZES 8
/* Set: print (stderr) each question keyword and FTS5 disagree on. */
#define QB_ENV_VERBOSE "MEMD_BENCH_VERBOSE"
#define QB_LCG_MUL 6364136223846793005ULL  /* Knuth's MMIX LCG: the question sample */
#define QB_LCG_ADD 1442695040888963407ULL
#define QB_LCG_SHIFT 33

static const long default_sizes[] = { 10000, 100000, 1000000 };

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("keyword_bench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* BM25 parameters: memd's defaults (host/config/settings.h), or MEMD_BENCH_K1 /
 * MEMD_BENCH_B to try others on the same corpus. */
static double bench_param(const char *env, double dflt)
{
	const char *v = getenv(env);
	char *end;
	double d;

	if (!v || !*v)
		return dflt;
	d = strtod(v, &end);
	if (*end || d < 0)
		die("MEMD_BENCH_K1 and MEMD_BENCH_B must be non-negative numbers");
	return d;
}

/* The seed of the question sample: QB_SEED, or MEMD_BENCH_SAMPLE (a
 * number) to ask another sample of the same corpus. */
static uint64_t bench_sample_seed(void)
{
	const char *v = getenv("MEMD_BENCH_SAMPLE");
	char *end;
	unsigned long long n;

	if (!v || !*v)
		return QB_SEED;
	n = strtoull(v, &end, 10);
	if (*end)
		die("MEMD_BENCH_SAMPLE must be a number");
	return QB_SEED ^ (uint64_t)n;
}

static double bench_k1(void)
{
	return bench_param("MEMD_BENCH_K1", SETTINGS_KEYWORD_K1_DEFAULT);
}

static double bench_b(void)
{
	return bench_param("MEMD_BENCH_B", SETTINGS_KEYWORD_B_DEFAULT);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / QB_NS_PER_S;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double percentile(double *v, size_t n, double p)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n ? v[(size_t)(p * (double)(n - 1) + 0.5)] : 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* ---- results ------------------------------------------------------------- */

typedef struct row {
	long events;
	uint32_t users;
	size_t queries;
	double kw_p50, kw_p99, kw_recall, kw_rate, kw_bytes, kw_heap;
	double fts_p50, fts_p99, fts_recall, fts_rate;
	size_t kw_won, kw_lost;      /* questions keyword found more / less of than FTS5 */
	double vec_rate, embed_rate;
	long vec_events;
} row;

static double recall_of(const qgen_set *s, const qgen_question *q, char ids[][QGEN_ID_MAX],
			size_t n)
{
	double r = 0;
	char want[QGEN_ID_MAX];
	for (uint32_t a = 0; a < q->n_answers; a++) {
		qgen_event_id(&s->events[q->answers[a]], want);
		for (size_t i = 0; i < n; i++)
			if (strcmp(ids[i], want) == 0) {
				r += 1.0 / q->n_answers;
				break;
			}
	}
	return r;
}

/* ---- memd keyword ------------------------------------------------------- */

static kw_index *kw_load(const qgen_set *s, row *r)
{
	struct mallinfo2 before = mallinfo2(), after;
	kw_index *kw = kw_new(bench_k1(), bench_b());
	char uid[QGEN_ID_MAX], sid[QGEN_ID_MAX];
	kw_stats st;
	double t0;

	if (!kw)
		die("kw_new: out of memory");
	t0 = now_s();
	for (size_t i = 0; i < s->n_events; i++) {
		const qgen_event *e = &s->events[i];
		kw_doc_in d;
		qgen_user_id(e->user, uid);
		qgen_session_id(e->user, e->session, sid);
		d = (kw_doc_in){ .app = QB_APP, .user = uid, .session = sid, .author = e->role,
				 .seq = e->seq, .timestamp_us = e->timestamp_us, .text = e->text,
				 .text_len = strlen(e->text) };
		if (kw_add(kw, &d) < 0)
			die("kw_add: out of memory");
	}
	r->kw_rate = (double)s->n_events / (now_s() - t0);
	after = mallinfo2();
	kw_get_stats(kw, &st);
	r->kw_bytes = (double)st.memory_bytes / (double)s->n_events;
	r->kw_heap = ((double)after.uordblks - (double)before.uordblks) / (double)s->n_events;
	return kw;
}

static void kw_run(kw_index *kw, const qgen_set *s, const size_t *qs, size_t nq, double *per_q,
		   row *r)
{
	double *lat = malloc(nq * sizeof(*lat)), rec = 0;
	char uid[QGEN_ID_MAX], ids[QB_K][QGEN_ID_MAX];

	if (!lat)
		die("out of memory");
	for (size_t i = 0; i < nq; i++) {
		const qgen_question *q = &s->questions[qs[i]];
		memd_error err = { .struct_size = sizeof(err) };
		kw_hit *hits = NULL;
		size_t n = 0;
		double t0;

		qgen_user_id(q->user, uid);
		t0 = now_s();
		if (kw_search(kw, QB_APP, uid, q->text, NULL, QB_K, &hits, &n, NULL, &err) < 0)
			die("kw_search: %s", err.msg);
		lat[i] = (now_s() - t0) * QB_MS_PER_S;
		for (size_t h = 0; h < n; h++)
			snprintf(ids[h], QGEN_ID_MAX, "%s-e%03lld", hits[h].session,
				 (long long)hits[h].seq);
		per_q[i] = recall_of(s, q, ids, n);
		rec += per_q[i];
		kw_hits_free(hits, n);
	}
	r->kw_recall = rec / (double)nq;
	r->kw_p50 = percentile(lat, nq, QB_P50);
	r->kw_p99 = percentile(lat, nq, QB_P99);
	free(lat);
}

/* ---- SQLite FTS5 -------------------------------------------------------- */

/* Same as tests/quality: the question's words, quoted, OR'ed. */
static void fts_query(const char *text, char out[QB_FTS_QUERY_MAX])
{
	size_t n = 0;
	const char *p = text;
#define QB_ALNUM(c) \
	(((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z') || ((c) >= '0' && (c) <= '9'))
	out[0] = '\0';
	while (*p) {
		const char *w;
		while (*p && !QB_ALNUM(*p))
			p++;
		w = p;
		while (QB_ALNUM(*p))
			p++;
		if (p > w && n < QB_FTS_QUERY_MAX)
			n += (size_t)snprintf(out + n, QB_FTS_QUERY_MAX - n, "%s\"%.*s\"", n ? " OR " : "",
					      (int)(p - w), w);
	}
#undef QB_ALNUM
}

static sqlite3 *fts_load(const qgen_set *s, const char dir[QB_DIR_MAX], row *r)
{
	char path[QB_PATH_MAX], uid[QGEN_ID_MAX], eid[QGEN_ID_MAX];
	sqlite3_stmt *st = NULL;
	sqlite3 *db = NULL;
	double t0;

	snprintf(path, sizeof(path), "%s/fts.db", dir);
	if (sqlite3_open(path, &db) != SQLITE_OK ||
	    sqlite3_exec(db,
			 "PRAGMA journal_mode = WAL;"
			 "CREATE VIRTUAL TABLE fts USING fts5(text, user UNINDEXED, eid UNINDEXED,"
			 " tokenize = 'porter unicode61');",
			 NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "INSERT INTO fts (text, user, eid) VALUES (?, ?, ?)", -1, &st,
			       NULL) != SQLITE_OK)
		die("fts5: %s", sqlite3_errmsg(db));
	t0 = now_s();
	sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
	for (size_t i = 0; i < s->n_events; i++) {
		qgen_user_id(s->events[i].user, uid);
		qgen_event_id(&s->events[i], eid);
		sqlite3_bind_text(st, 1, s->events[i].text, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, uid, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, eid, -1, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE)
			die("fts5 insert: %s", sqlite3_errmsg(db));
		sqlite3_reset(st);
	}
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		die("fts5 commit: %s", sqlite3_errmsg(db));
	r->fts_rate = (double)s->n_events / (now_s() - t0);
	sqlite3_finalize(st);
	return db;
}

static void fts_run(sqlite3 *db, const qgen_set *s, const size_t *qs, size_t nq, double *per_q,
		    row *r)
{
	double *lat = malloc(nq * sizeof(*lat)), rec = 0;
	char uid[QGEN_ID_MAX], ids[QB_K][QGEN_ID_MAX], query[QB_FTS_QUERY_MAX];
	sqlite3_stmt *st = NULL;

	if (!lat || sqlite3_prepare_v2(db,
				       "SELECT eid FROM fts WHERE fts MATCH ?1 AND user = ?2"
				       " ORDER BY rank LIMIT ?3",
				       -1, &st, NULL) != SQLITE_OK)
		die("fts5 query: %s", sqlite3_errmsg(db));
	for (size_t i = 0; i < nq; i++) {
		const qgen_question *q = &s->questions[qs[i]];
		size_t n = 0;
		double t0;
		int rc;

		qgen_user_id(q->user, uid);
		fts_query(q->text, query);
		t0 = now_s();
		sqlite3_bind_text(st, 1, query, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, uid, -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 3, QB_K);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW && n < QB_K)
			snprintf(ids[n++], QGEN_ID_MAX, "%s", (const char *)sqlite3_column_text(st, 0));
		if (rc != SQLITE_DONE && rc != SQLITE_ROW)
			die("fts5 query: %s", sqlite3_errmsg(db));
		sqlite3_reset(st);
		lat[i] = (now_s() - t0) * QB_MS_PER_S;
		per_q[i] = recall_of(s, q, ids, n);
		rec += per_q[i];
	}
	sqlite3_finalize(st);
	r->fts_recall = rec / (double)nq;
	r->fts_p50 = percentile(lat, nq, QB_P50);
	r->fts_p99 = percentile(lat, nq, QB_P99);
	free(lat);
}

/* ---- hash embedder into filevec ------------------------------------------ */

static void vec_load(const qgen_set *s, const char dir[QB_DIR_MAX], row *r)
{
	const char *search[QB_SEARCH_DIRS + 1];
	char yaml[2 * QB_PATH_MAX], *paths = strdup(getenv("MEMD_PLUGIN_PATH"));
	char uid[QB_EMBED_BATCH][QGEN_ID_MAX], sid[QB_EMBED_BATCH][QGEN_ID_MAX],
		eid[QB_EMBED_BATCH][QGEN_ID_MAX];
	memd_error err = { .struct_size = sizeof(err) };
	memd_vector_record recs[QB_EMBED_BATCH];
	const memd_vector_record *ptrs[QB_EMBED_BATCH];
	const char *texts[QB_EMBED_BATCH];
	float *vecs = malloc((size_t)QB_EMBED_BATCH * QB_DIM * sizeof(float));
	const memd_embedder_ops *eops = embed_hash_builtin.ops;
	const memd_vector_ops *vops;
	loader_instance *inst = NULL;
	loader_plugin *plugin = NULL;
	config_node *cfg = NULL;
	void *emb = NULL, *h;
	size_t n = 0, total = s->n_events < QB_VECTOR_MAX ? s->n_events : QB_VECTOR_MAX;
	double t0, t_embed = 0;

	if (!paths || !vecs)
		die("out of memory");
	for (char *save = NULL, *d = strtok_r(paths, ":", &save); d && n < QB_SEARCH_DIRS;
	     d = strtok_r(NULL, ":", &save))
		search[n++] = d;
	search[n] = NULL;
	snprintf(yaml, sizeof(yaml), "plugin: filevec\npath: \"%s/vec\"\n", dir);
	if (config_parse_string(yaml, strlen(yaml), "bench", &cfg, &err) < 0 ||
	    loader_open("filevec", search, &plugin, &err) < 0 ||
	    loader_instance_create(plugin, "index.vector", cfg, "plugin", NULL, &inst, &err) < 0 ||
	    embed_hash_create_dim(QB_DIM, &emb, &err) < 0)
		die("filevec: %s", err.msg);
	vops = loader_vector_ops(plugin);
	h = loader_instance_handle(inst);
	if (vops->prepare && vops->prepare(h, NULL, QB_DIM, &err) < 0)
		die("prepare: %s", err.msg);
	t0 = now_s();
	for (size_t b = 0; b < total; b += QB_EMBED_BATCH) {
		size_t m = total - b < QB_EMBED_BATCH ? total - b : QB_EMBED_BATCH;
		for (size_t i = 0; i < m; i++)
			texts[i] = s->events[b + i].text;
		double te = now_s();
		if (eops->embed(emb, NULL, texts, (uint32_t)m, vecs, &err) < 0)
			die("embed: %s", err.msg);
		t_embed += now_s() - te;
		for (size_t i = 0; i < m; i++) {
			const qgen_event *e = &s->events[b + i];
			qgen_user_id(e->user, uid[i]);
			qgen_session_id(e->user, e->session, sid[i]);
			qgen_event_id(e, eid[i]);
			recs[i] = (memd_vector_record){ .struct_size = sizeof(recs[i]), .dim = QB_DIM,
							.app = QB_APP, .user = uid[i], .session = sid[i],
							.event_id = eid[i], .author = e->role, .seq = e->seq,
							.timestamp_us = e->timestamp_us,
							.vector = vecs + i * QB_DIM };
			ptrs[i] = &recs[i];
		}
		if (vops->upsert(h, NULL, ptrs, (uint32_t)m, &err) < 0)
			die("upsert: %s", err.msg);
	}
	r->vec_rate = (double)total / (now_s() - t0);
	r->embed_rate = (double)total / t_embed;
	r->vec_events = (long)total;
	embed_hash_builtin.destroy(emb);
	loader_instance_destroy(inst);
	loader_close(plugin);
	config_free(cfg);
	free(vecs);
	free(paths);
}

/* ---- one size ------------------------------------------------------------ */

static void run_size(long events, row *r)
{
	qgen_params p = { .seed = QB_SEED, .sessions = QB_SESSIONS,
			  .questions_per_user = QB_QUESTIONS_PER_USER };
	char dir[QB_DIR_MAX];
	const char *tmp = getenv("TMPDIR");
	size_t *qs, nq;
	double *kw_q, *fts_q;
	uint64_t pick = bench_sample_seed();
	qgen_set *s = NULL;
	kw_index *kw;
	sqlite3 *db;

	p.users = (uint32_t)((events + QB_EVENTS_PER_USER / 2) / QB_EVENTS_PER_USER);
	if (!p.users)
		p.users = 1;
	p.questions_per_user = (QB_QUERIES + p.users - 1) / p.users;
	if (p.questions_per_user < QB_QUESTIONS_PER_USER)
		p.questions_per_user = QB_QUESTIONS_PER_USER;
	if (qgen_make(&p, &s) < 0)
		die("qgen: out of memory");
	snprintf(dir, sizeof(dir), "%s/keyword-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		die("mkdtemp failed");
	memset(r, 0, sizeof(*r));
	r->events = (long)s->n_events;
	r->users = s->users;
	/* The same seeded sample of questions for both. */
	nq = s->n_questions < QB_QUERIES ? s->n_questions : QB_QUERIES;
	qs = malloc(s->n_questions * sizeof(*qs));
	if (!qs)
		die("out of memory");
	for (size_t i = 0; i < s->n_questions; i++)
		qs[i] = i;
	for (size_t i = 0; i < nq; i++) { /* partial Fisher-Yates: nq distinct questions */
		size_t j, t;
		pick = pick * QB_LCG_MUL + QB_LCG_ADD;
		j = i + (size_t)((pick >> QB_LCG_SHIFT) % (s->n_questions - i));
		t = qs[i];
		qs[i] = qs[j];
		qs[j] = t;
	}
	r->queries = nq;
	kw_q = malloc(nq * sizeof(*kw_q));
	fts_q = malloc(nq * sizeof(*fts_q));
	if (!kw_q || !fts_q)
		die("out of memory");
	fprintf(stderr, "%ld events, %u users: keyword...\n", r->events, r->users);
	kw = kw_load(s, r);
	kw_run(kw, s, qs, nq, kw_q, r);
	kw_free(kw);
	fprintf(stderr, "  fts5...\n");
	db = fts_load(s, dir, r);
	fts_run(db, s, qs, nq, fts_q, r);
	for (size_t i = 0; i < nq; i++) {
		r->kw_won += kw_q[i] > fts_q[i];
		r->kw_lost += kw_q[i] < fts_q[i];
		if (getenv(QB_ENV_VERBOSE) && kw_q[i] != fts_q[i])
			fprintf(stderr, "  %s u%05u \"%s\": keyword %.1f fts5 %.1f\n",
				kw_q[i] > fts_q[i] ? "WON " : "LOST", s->questions[qs[i]].user,
				s->questions[qs[i]].text, kw_q[i], fts_q[i]);
	}
	sqlite3_close(db);
	fprintf(stderr, "  hash vector...\n");
	vec_load(s, dir, r);
	nftw(dir, rm_one, QB_NFTW_FDS, FTW_DEPTH | FTW_PHYS);
	free(qs);
	free(kw_q);
	free(fts_q);
	qgen_free(s);
}

int main(int argc, char **argv)
{
	long sizes[QB_MAX_SIZES];
	size_t n = 0;
	row rows[QB_MAX_SIZES];

	if (!getenv("MEMD_PLUGIN_PATH"))
		die("MEMD_PLUGIN_PATH must name the built plugins (build/plugins)");
	for (int i = 1; i < argc && n < QB_MAX_SIZES; i++) {
		char *end;
		sizes[n] = strtol(argv[i], &end, 10);
		if (*end || sizes[n] <= 0)
			die("usage: keyword_bench [events ...]");
		n++;
	}
	if (!n)
		for (; n < sizeof(default_sizes) / sizeof(default_sizes[0]); n++)
			sizes[n] = default_sizes[n];
	for (size_t i = 0; i < n; i++)
		run_size(sizes[i], &rows[i]);

	printf("keyword search, k=%d, %d distinct questions sampled (seeded), each asked as its user\n",
	       QB_K, QB_QUERIES);
	printf("%9s %6s | %-27s | %-27s\n", "", "", "memd keyword (BM25)", "SQLite FTS5 (user filter)");
	printf("%9s %6s | %8s %8s %9s | %8s %8s %9s | %s\n", "events", "users", "p50 ms", "p99 ms",
	       "recall@10", "p50 ms", "p99 ms", "recall@10", "kw better/worse");
	for (size_t i = 0; i < n; i++)
		printf("%9ld %6u | %8.3f %8.3f %9.3f | %8.3f %8.3f %9.3f | %zu/%zu\n", rows[i].events,
		       rows[i].users, rows[i].kw_p50, rows[i].kw_p99, rows[i].kw_recall,
		       rows[i].fts_p50, rows[i].fts_p99, rows[i].fts_recall, rows[i].kw_won,
		       rows[i].kw_lost);
	printf("\nindexing (events/s) and keyword index memory (bytes/event)\n");
	printf("%9s | %10s %10s %18s %10s | %10s %10s\n", "events", "keyword", "FTS5",
	       "hash->filevec", "hash only", "kw own", "kw heap");
	for (size_t i = 0; i < n; i++)
		printf("%9ld | %10.0f %10.0f %10.0f (%5ldk) %10.0f | %10.1f %10.1f\n", rows[i].events,
		       rows[i].kw_rate, rows[i].fts_rate, rows[i].vec_rate, rows[i].vec_events / 1000,
		       rows[i].embed_rate, rows[i].kw_bytes, rows[i].kw_heap);
	return 0;
}
