/* SPDX-License-Identifier: MIT */
/*
 * search: the search request (docs/architecture.md, Search; api/openapi.yaml
 * SearchRequest) and its execution: keyword, vector, or hybrid by
 * score-normalised weighted fusion (each list's scores min-max normalised
 * to [0, 1] over its candidates, the best 1 and the last 0; score =
 * (1 - w) * keyword + w * vector with w = index.hybrid.vector_weight, an
 * event missing from a list getting 0 from it), then each hit's event
 * fetched from the session store (text, role, author, timestamp) in its
 * own (app, user, session) scope. A
 * hit whose event is gone (deleted since it was indexed) is dropped and the
 * next candidate takes its place.
 */
#ifndef MEMD_INDEX_SEARCH_H
#define MEMD_INDEX_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include <memd/plugin.h>

#include "keyword.h"
#include "plugins/store.h"
#include "vector.h"

#define SEARCH_K_DEFAULT 10
#define SEARCH_K_MAX 1000
#define SEARCH_AUTHORS_MAX 100
#define SEARCH_QUERY_MAX 8192   /* bytes */
/* Candidates a hybrid search takes from each list: k times this, at least
 * SEARCH_HYBRID_MIN. */
#define SEARCH_HYBRID_OVERSAMPLE 4
#define SEARCH_HYBRID_MIN 40
/* Extra candidates asked for so hits of just-deleted events can be
 * replaced. */
#define SEARCH_SLACK 8
/* A search whose best candidates' events are gone (hidden or deleted
 * since they were indexed) looks again over SEARCH_PASS_GROWTH times as
 * many candidates, at most SEARCH_PASSES_MAX passes in all. */
#define SEARCH_PASS_GROWTH 8
#define SEARCH_PASSES_MAX 3
#define SEARCH_PASS_WANT_MAX 8192 /* candidates per index in a later pass, at most */

#define SEARCH_KEYWORD 1
#define SEARCH_VECTOR  2
#define SEARCH_HYBRID  3

/* search_req.sources */
#define SEARCH_EVENTS   0x1u
#define SEARCH_MEMORIES 0x2u

/* A parsed request. Strings point into body (owned). */
typedef struct search_req {
	void *body;                  /* json_t *, owned; NULL when built by hand */
	const char *query;
	uint32_t k;
	int mode;                    /* SEARCH_* */
	uint32_t sources;            /* SEARCH_EVENTS | SEARCH_MEMORIES (parse: both by default) */
	const char *session;         /* NULL = every session */
	const char **authors;        /* malloc'd array; NULL = any */
	size_t n_authors;
	int64_t after_us, before_us; /* 0 = no bound */
	/* Set by the caller, not the body: */
	int64_t now_us;              /* memories expired then never come out */
	const char *exclude_session; /* with exclude_ids: events left out */
	const char *const *exclude_ids; /* event ids (of exclude_session, or of any
					 * session when it is NULL) left out */
	size_t n_exclude;
	double min_score;            /* results scoring below are left out; 0 = none */
	double vector_weight;        /* hybrid: the vector list's share, 0..1 (not parsed: the
				      * caller sets index.hybrid.vector_weight) */
} search_req;

/* The mode named name (keyword|vector|hybrid), or 0. */
int search_mode(const char *name);
const char *search_mode_name(int mode);

/* Parse and validate body: {"query": str (required, 1..SEARCH_QUERY_MAX
 * bytes), "k"?: 1..SEARCH_K_MAX (default SEARCH_K_DEFAULT), "mode"?:
 * keyword|vector|hybrid (default default_mode), "sources"?: a non-empty
 * array of "events" and/or "memories" (default both), "session_id"?: id,
 * "authors"?: [str] (<= SEARCH_AUTHORS_MAX), "after"?/"before"?: RFC
 * 3339 time (exclusive bounds on the event's timestamp)}. Unknown fields
 * are refused. MEMD_EINVAL with the field's name, or MEMD_ENOMEM. */
int32_t search_parse(const char *body_json, int default_mode, search_req *ret, memd_error *err);
/* Free what search_parse filled; accepts a zeroed request. */
void search_req_clear(search_req *q);

/* Run q in scope (app, user) over the indexes its mode needs (kw for
 * keyword and hybrid, vec for vector and hybrid; the caller checked they
 * exist and are caught up), fetching events and memories from sessions
 * (a memory the store no longer has, or has expired at q->now_us, is
 * dropped like a deleted event). Both kinds rank in one list. Result
 * JSON: {"mode": str, "results": [{"source": "event", "session_id",
 * "event_id", "seq", "author", "role", "text", "timestamp", "score"} |
 * {"source": "memory", "memory_id", "text", "kind", "topics",
 * "entities", "updated", "score"}]}, best first. */
int32_t search_run(kw_index *kw, vec_index *vec, store *sessions, const memd_call *call,
		   const char *app, const char *user, const search_req *q, char **ret_json,
		   memd_error *err);
/* search_run's results only: *ret_results gets the array (a new
 * reference to a json_t array; json_decref it). */
int32_t search_results(kw_index *kw, vec_index *vec, store *sessions, const memd_call *call,
		       const char *app, const char *user, const search_req *q, void **ret_results,
		       memd_error *err);

#endif
