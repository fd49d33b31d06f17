/* SPDX-License-Identifier: MIT */
#include "search.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"

static const char *const mode_names[] = { NULL, "keyword", "vector", "hybrid" };

int search_mode(const char *name)
{
	for (int m = SEARCH_KEYWORD; m <= SEARCH_HYBRID; m++)
		if (strcmp(name, mode_names[m]) == 0)
			return m;
	return 0;
}

const char *search_mode_name(int mode)
{
	return mode >= SEARCH_KEYWORD && mode <= SEARCH_HYBRID ? mode_names[mode] : "?";
}

/* ---- the request ---------------------------------------------------------------- */

static const char *const fields[] = { "query", "k", "mode", "sources", "session_id", "authors",
				      "after", "before", NULL };

void search_req_clear(search_req *q)
{
	json_decref(q->body);
	free(q->authors);
	memset(q, 0, sizeof(*q));
}

static int32_t parse_time(json_t *body, const char *key, int64_t *ret, memd_error *err)
{
	json_t *v = json_object_get(body, key);
	*ret = 0;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v) || ej_parse_time(json_string_value(v), ret) < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: must be an RFC 3339 time", key);
	return 0;
}

static int32_t parse_authors(json_t *body, search_req *q, memd_error *err)
{
	json_t *v = json_object_get(body, "authors");
	size_t n;

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return memd_error_set(err, MEMD_EINVAL, 0, "authors: must be an array of strings");
	n = json_array_size(v);
	if (n > SEARCH_AUTHORS_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "authors: at most %d", SEARCH_AUTHORS_MAX);
	q->authors = calloc(n ? n : 1, sizeof(*q->authors));
	if (!q->authors)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	for (size_t i = 0; i < n; i++) {
		json_t *a = json_array_get(v, i);
		if (!json_is_string(a))
			return memd_error_set(err, MEMD_EINVAL, 0, "authors[%zu]: must be a string", i);
		q->authors[i] = json_string_value(a);
	}
	q->n_authors = n;
	return 0;
}

/* "sources": a non-empty array of "events" and/or "memories"; absent or
 * null = both. */
static int32_t parse_sources(json_t *body, search_req *q, memd_error *err)
{
	json_t *v = json_object_get(body, "sources"), *s;
	size_t i;

	q->sources = SEARCH_EVENTS | SEARCH_MEMORIES;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v) || json_array_size(v) == 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "sources: must be a non-empty array of \"events\" and/or \"memories\"");
	q->sources = 0;
	json_array_foreach(v, i, s) {
		const char *name = json_string_value(s);
		if (name && strcmp(name, "events") == 0)
			q->sources |= SEARCH_EVENTS;
		else if (name && strcmp(name, "memories") == 0)
			q->sources |= SEARCH_MEMORIES;
		else
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "sources[%zu]: must be \"events\" or \"memories\"", i);
	}
	return 0;
}

int32_t search_parse(const char *body_json, int default_mode, search_req *ret, memd_error *err)
{
	search_req q = { 0 };
	json_error_t jerr;
	json_t *body, *v;
	const char *key;
	int32_t r;

	if (!body_json || !*body_json)
		return memd_error_set(err, MEMD_EINVAL, 0, "query: required");
	body = json_loads(body_json, JSON_REJECT_DUPLICATES, &jerr);
	if (!body)
		return memd_error_set(err, MEMD_EINVAL, 0, "body is not valid JSON: %s (at %d:%d)",
				      jerr.text, jerr.line, jerr.column);
	q.body = body;
	if (!json_is_object(body)) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "body must be a JSON object");
		goto fail;
	}
	json_object_foreach(body, key, v) {
		size_t i;
		for (i = 0; fields[i] && strcmp(fields[i], key) != 0; i++)
			;
		if (!fields[i]) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "unknown field '%.64s'", key);
			goto fail;
		}
	}
	v = json_object_get(body, "query");
	if (!json_is_string(v) || !json_string_length(v)) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "query: required, a non-empty string");
		goto fail;
	}
	if (json_string_length(v) > SEARCH_QUERY_MAX) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "query: at most %d bytes", SEARCH_QUERY_MAX);
		goto fail;
	}
	q.query = json_string_value(v);
	q.k = SEARCH_K_DEFAULT;
	v = json_object_get(body, "k");
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > SEARCH_K_MAX) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "k: must be an integer 1..%d", SEARCH_K_MAX);
			goto fail;
		}
		q.k = (uint32_t)json_integer_value(v);
	}
	q.mode = default_mode;
	v = json_object_get(body, "mode");
	if (v && !json_is_null(v)) {
		if (!json_is_string(v) || !(q.mode = search_mode(json_string_value(v)))) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "mode: must be keyword, vector or hybrid");
			goto fail;
		}
	}
	v = json_object_get(body, "session_id");
	if (v && !json_is_null(v)) {
		if (!json_is_string(v)) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "session_id: must be a string");
			goto fail;
		}
		if ((r = ej_check_id(json_string_value(v), "session_id", err)) < 0)
			goto fail;
		q.session = json_string_value(v);
	}
	if ((r = parse_sources(body, &q, err)) < 0 || (r = parse_authors(body, &q, err)) < 0 ||
	    (r = parse_time(body, "after", &q.after_us, err)) < 0 ||
	    (r = parse_time(body, "before", &q.before_us, err)) < 0)
		goto fail;
	*ret = q;
	return 0;
fail:
	search_req_clear(&q);
	return r;
}

/* ---- candidates and fusion -------------------------------------------------------- */

/* One ranked candidate: an event by (session, seq), or a memory by its
 * id (memory set; session holds the id, seq is 0). */
typedef struct cand {
	const char *session;     /* borrowed from the hit lists */
	const char *event_id;    /* vector hits only; else NULL */
	int64_t seq;
	int64_t timestamp_us;
	double score;
	uint32_t best_rank;      /* 1-based, the better of its ranks */
	uint32_t memory;
} cand;

static int same_event(const cand *c, uint32_t memory, const char *session, int64_t seq)
{
	return c->memory == memory && c->seq == seq && strcmp(c->session, session) == 0;
}

static int cand_cmp(const void *a, const void *b)
{
	const cand *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	if (x->best_rank != y->best_rank)
		return x->best_rank < y->best_rank ? -1 : 1;
	if (x->timestamp_us != y->timestamp_us)
		return x->timestamp_us > y->timestamp_us ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq > y->seq ? -1 : 1;
	return strcmp(x->session, y->session);
}

/* Add one list's contribution to the candidate of (memory, session,
 * seq): score (already normalised and weighted), at rank in that list. */
static void fuse(cand *c, size_t *n, uint32_t memory, const char *session, const char *event_id,
		 int64_t seq, int64_t ts, uint32_t rank, double score)
{
	for (size_t i = 0; i < *n; i++)
		if (same_event(&c[i], memory, session, seq)) {
			c[i].score += score;
			if (rank < c[i].best_rank)
				c[i].best_rank = rank;
			if (!c[i].event_id)
				c[i].event_id = event_id;
			return;
		}
	c[*n] = (cand){ session, event_id, seq, ts, score, rank, memory };
	(*n)++;
}

/* Min-max normalisation of one list's scores (best first, n > 0): the
 * best maps to 1, the last to 0; all equal: all 1. */
typedef struct span {
	double lo, hi;
} span;

static double span_norm(span s, double score)
{
	return s.hi > s.lo ? (score - s.lo) / (s.hi - s.lo) : 1.0;
}

/* Hybrid: each list's scores min-max normalised to [0, 1] over its
 * candidates, weighted (keyword 1 - w, vector w), summed per event; an
 * event absent from a list gets 0 from it. Sorted best first. */
static void fuse_lists(cand *c, size_t *nc, const kw_hit *kh, size_t nk, const vec_hit *vh,
		       size_t nv, double w)
{
	if (nk) {
		span sp = { kh[nk - 1].score, kh[0].score };
		for (size_t i = 0; i < nk; i++)
			fuse(c, nc, kh[i].memory, kh[i].session, NULL, kh[i].seq, kh[i].timestamp_us,
			     (uint32_t)i + 1, (1.0 - w) * span_norm(sp, kh[i].score));
	}
	if (nv) {
		span sp = { vh[nv - 1].score, vh[0].score };
		for (size_t i = 0; i < nv; i++)
			fuse(c, nc, vh[i].memory, vh[i].session, vh[i].event_id, vh[i].seq,
			     vh[i].timestamp_us, (uint32_t)i + 1, w * span_norm(sp, vh[i].score));
	}
	qsort(c, *nc, sizeof(*c), cand_cmp);
}

/* ---- fetching ------------------------------------------------------------------------ */

typedef struct fetch_ctx {
	const cand *c;
	json_t *out;             /* the result object, or NULL if none */
} fetch_ctx;

static int32_t fetch_event(void *ud, const memd_event *e)
{
	fetch_ctx *f = ud;
	char ts[EJ_TIME_LEN];

	if (e->seq != f->c->seq || (f->c->event_id && (!e->id || strcmp(e->id, f->c->event_id) != 0)))
		return 0; /* not the indexed event (the session was re-created) */
	ej_format_time(e->timestamp_us, ts);
	json_decref(f->out);
	f->out = json_pack("{s:s,s:s,s:s,s:I,s:s?,s:s?,s:s,s:s,s:f}", "source", "event",
			   "session_id", f->c->session,
			   "event_id", e->id ? e->id : "", "seq", (json_int_t)e->seq, "author",
			   e->author, "role", e->role, "text", e->text ? e->text : "", "timestamp",
			   ts, "score", f->c->score);
	return f->out ? 0 : MEMD_ENOMEM;
}

/* A JSON array text as an array (else an empty one). */
static json_t *json_list(const char *text)
{
	json_t *v = text ? json_loads(text, 0, NULL) : NULL;
	if (json_is_array(v))
		return v;
	json_decref(v);
	return json_array();
}

typedef struct mem_fetch {
	const cand *c;
	json_t *out;
} mem_fetch;

static int32_t fetch_memory_row(void *ud, const memd_memory *m)
{
	mem_fetch *f = ud;
	char ts[EJ_TIME_LEN];

	ej_format_time(m->updated_us, ts);
	json_decref(f->out);
	f->out = json_pack("{s:s,s:s,s:s,s:s?,s:o,s:o,s:s,s:f}", "source", "memory", "memory_id",
			   m->id ? m->id : f->c->session, "text", m->text ? m->text : "", "kind",
			   m->kind, "topics", json_list(m->topics_json), "entities",
			   json_list(m->entities_json), "updated", ts, "score", f->c->score);
	return f->out ? 0 : MEMD_ENOMEM;
}

/* The result object of memory c, or *ret NULL when the store no longer
 * has it (deleted, expired at now_us, or a store without memories). */
static int32_t fetch_memory(store *sessions, const memd_call *call, const char *app,
			    const char *user, int64_t now_us, const cand *c, json_t **ret,
			    memd_error *err)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = app, .user = user };
	mem_fetch f = { c, NULL };
	memd_memory_sink sink = { sizeof(sink), &f, fetch_memory_row };
	memd_error e2 = { 0 };
	int32_t r = store_memory_get(sessions, call, &sc, c->session, now_us, &sink, &e2);

	if (r == MEMD_ENOTFOUND || r == MEMD_ENOTSUP) {
		json_decref(f.out);
		*ret = NULL;
		return 0;
	}
	if (r < 0) {
		json_decref(f.out);
		if (err)
			*err = e2;
		return r;
	}
	*ret = f.out;
	return 0;
}

/* The result object of c, or *ret NULL when its event is gone. */
static int32_t fetch(store *sessions, const memd_call *call, const char *app, const char *user,
		     const cand *c, json_t **ret, memd_error *err)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = app, .user = user, .session = c->session };
	memd_event_query q = {
		.struct_size = sizeof(q),
		.after_seq = c->seq - 1,
		.before_seq = c->seq + 1,
		.limit = 1,
	};
	fetch_ctx f = { c, NULL };
	memd_event_sink sink = { sizeof(sink), &f, fetch_event };
	memd_error e2 = { 0 };
	int32_t r = store_events_load(sessions, call, &sc, &q, &sink, &e2);

	if (r == MEMD_ENOTFOUND) {
		json_decref(f.out);
		*ret = NULL;
		return 0;
	}
	if (r < 0) {
		json_decref(f.out);
		if (err)
			*err = e2;
		return r;
	}
	*ret = f.out;
	return 0;
}

/* Nonzero if the caller left the event of result o out (search_req's
 * exclude_*). */
static int excluded(const search_req *q, const json_t *o)
{
	const char *id = json_string_value(json_object_get(o, "event_id"));
	const char *session = json_string_value(json_object_get(o, "session_id"));

	if (!q->n_exclude || !id || !session ||
	    (q->exclude_session && strcmp(q->exclude_session, session) != 0))
		return 0;
	for (size_t i = 0; i < q->n_exclude; i++)
		if (strcmp(q->exclude_ids[i], id) == 0)
			return 1;
	return 0;
}

/* The result object of c (an event or a memory), or *ret NULL when it
 * is gone or left out. */
static int32_t fetch_cand(store *sessions, const memd_call *call, const char *app,
			  const char *user, const search_req *q, const cand *c, json_t **ret,
			  memd_error *err)
{
	int32_t r = c->memory ? fetch_memory(sessions, call, app, user, q->now_us, c, ret, err)
			      : fetch(sessions, call, app, user, c, ret, err);
	if (r == 0 && *ret && !c->memory && excluded(q, *ret)) {
		json_decref(*ret);
		*ret = NULL;
	}
	return r;
}

/* ---- running ------------------------------------------------------------------------- */

/* One pass of a search over the best `want` candidates of each index.
 * *ret_results: the result objects (a new array). *ret_short: 1 when it
 * found fewer than q->k results although candidates were dropped (their
 * events were hidden or deleted after the index saw them) and an index
 * had more to give (its list was full): a pass over more candidates may
 * find more. */
static int32_t search_once(kw_index *kw, vec_index *vec, store *sessions, const memd_call *call,
			   const char *app, const char *user, const search_req *q, uint32_t want,
			   json_t **ret_results, int *ret_short, memd_error *err)
{
	int use_kw = q->mode == SEARCH_KEYWORD || q->mode == SEARCH_HYBRID;
	int use_vec = q->mode == SEARCH_VECTOR || q->mode == SEARCH_HYBRID;
	kw_hit *kh = NULL;
	vec_hit *vh = NULL;
	size_t nk = 0, nv = 0, nc = 0, dropped = 0;
	cand *c = NULL;
	json_t *results = NULL;
	int32_t r;

	if (use_kw) {
		kw_filter f = {
			.session = q->session,
			.authors = q->authors,
			.n_authors = q->n_authors,
			.after_us = q->after_us,
			.before_us = q->before_us,
			.sources = (q->sources & SEARCH_EVENTS ? KW_SOURCE_EVENTS : 0) |
				   (q->sources & SEARCH_MEMORIES ? KW_SOURCE_MEMORIES : 0),
			.now_us = q->now_us,
		};
		if ((r = kw_search(kw, app, user, q->query, &f, want, &kh, &nk,
				   call ? call->rows_read : NULL, err)) < 0)
			goto out;
	}
	if (use_vec) {
		memd_vector_filter f = {
			.struct_size = sizeof(f),
			.n_authors = (uint32_t)q->n_authors,
			.app = app,
			.user = user,
			.session = q->session,
			.authors = q->authors,
			.after_us = q->after_us,
			.before_us = q->before_us,
		};
		uint32_t sources = (q->sources & SEARCH_EVENTS ? VEC_SOURCE_EVENTS : 0) |
				   (q->sources & SEARCH_MEMORIES ? VEC_SOURCE_MEMORIES : 0);
		if ((r = vec_search(vec, call, q->query, &f, sources, q->now_us, want, &vh, &nv,
				    err)) < 0)
			goto out;
	}
	c = calloc(nk + nv + 1, sizeof(*c));
	results = json_array();
	if (!c || !results) {
		r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		goto out;
	}
	if (q->mode == SEARCH_HYBRID) {
		fuse_lists(c, &nc, kh, nk, vh, nv, q->vector_weight);
	} else if (use_kw) {
		for (size_t i = 0; i < nk; i++)
			c[nc++] = (cand){ kh[i].session, NULL, kh[i].seq, kh[i].timestamp_us,
					  kh[i].score, (uint32_t)i + 1, kh[i].memory };
	} else {
		for (size_t i = 0; i < nv; i++)
			c[nc++] = (cand){ vh[i].session, vh[i].event_id, vh[i].seq, vh[i].timestamp_us,
					  vh[i].score, (uint32_t)i + 1, vh[i].memory };
	}
	for (size_t i = 0; i < nc && json_array_size(results) < q->k; i++) {
		json_t *o = NULL;
		if (c[i].score < q->min_score)
			break; /* best first: the rest score lower still */
		if ((r = fetch_cand(sessions, call, app, user, q, &c[i], &o, err)) < 0)
			goto out;
		if (!o)
			dropped++;
		else if (json_array_append_new(results, o) < 0) {
			r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
			goto out;
		}
	}
	*ret_short = json_array_size(results) < q->k && dropped > 0 && (nk == want || nv == want);
	*ret_results = results;
	results = NULL;
	r = 0;
out:
	json_decref(results);
	free(c);
	kw_hits_free(kh, nk);
	vec_hits_free(vh, nv);
	return r;
}

int32_t search_results(kw_index *kw, vec_index *vec, store *sessions, const memd_call *call,
		       const char *app, const char *user, const search_req *q, void **ret_results,
		       memd_error *err)
{
	uint32_t want = q->mode == SEARCH_HYBRID
				? (q->k * SEARCH_HYBRID_OVERSAMPLE > SEARCH_HYBRID_MIN
					   ? q->k * SEARCH_HYBRID_OVERSAMPLE
					   : SEARCH_HYBRID_MIN)
				: q->k + SEARCH_SLACK;
	json_t *results = NULL;
	int more = 1;
	int32_t r = 0;

	/* Candidates whose events are gone (hidden, deleted) since the index
	 * saw them are dropped; when they crowd out the k asked for, look
	 * further down the indexes, a few times at most. An index can lag
	 * behind a hide, or (a vector store shared by several processes)
	 * keep a vector another process's late write put back. */
	for (int pass = 0; more && pass < SEARCH_PASSES_MAX; pass++) {
		json_decref(results);
		results = NULL;
		if ((r = search_once(kw, vec, sessions, call, app, user, q, want, &results, &more,
				     err)) < 0)
			return r;
		if (want >= SEARCH_PASS_WANT_MAX)
			break;
		want = want * SEARCH_PASS_GROWTH < SEARCH_PASS_WANT_MAX ? want * SEARCH_PASS_GROWTH
									: SEARCH_PASS_WANT_MAX;
	}
	*ret_results = results;
	return 0;
}

int32_t search_run(kw_index *kw, vec_index *vec, store *sessions, const memd_call *call,
		   const char *app, const char *user, const search_req *q, char **ret_json,
		   memd_error *err)
{
	void *res = NULL;
	json_t *results, *out;
	char *text;
	int32_t r;

	if ((r = search_results(kw, vec, sessions, call, app, user, q, &res, err)) < 0)
		return r;
	results = res;
	out = json_pack("{s:s,s:O}", "mode", search_mode_name(q->mode), "results", results);
	text = out ? json_dumps(out, JSON_COMPACT) : NULL;
	json_decref(out);
	json_decref(results);
	if (text)
		*ret_json = text;
	return text ? 0 : memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
}
