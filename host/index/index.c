/* SPDX-License-Identifier: MIT */
#include "index.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "embed.h"
#include "feed.h"
#include "search.h"
#include "vector.h"

#define US_PER_MS 1000
#define LOG_KEYWORD "index.keyword"
#define LOG_VECTOR "index.vector"

struct indexer {
	store *sessions;
	hostsvc *svc;
	int default_mode;
	kw_index *kw;
	feed_tailer *kw_tail;
	int64_t kw_applied;      /* last position applied to kw (see kw_apply) */
	embedder *emb;
	vec_index *vec;
	feed_tailer *vec_tail;
	pthread_mutex_t rebuild_lock;
};

/* ---- the keyword consumer ------------------------------------------------------- */

static int32_t kw_apply_one(indexer *ix, const feed_rec *r, memd_error *err)
{
	int32_t rc = 0;

	switch (r->kind) {
	case MEMD_FEED_EVENT: {
		kw_doc_in d = {
			.app = r->app,
			.user = r->user,
			.session = r->session,
			.author = r->author,
			.seq = r->seq,
			.timestamp_us = r->timestamp_us,
			.text = r->text,
			.text_len = strlen(r->text),
		};
		if (r->session)
			rc = kw_add(ix->kw, &d);
		break;
	}
	case MEMD_FEED_DELETE_SESSION:
		if (r->session)
			rc = kw_delete_session(ix->kw, r->app, r->user, r->session);
		break;
	case MEMD_FEED_DELETE_USER:
		kw_delete_user(ix->kw, r->app, r->user);
		break;
	default:
		break; /* kinds of a newer store: nothing to index */
	}
	if (rc < 0)
		return memd_error_set(err, rc, 0, "keyword index: out of memory at feed position %lld",
				      (long long)r->position);
	return 0;
}

/* kw_add is not idempotent: a batch retried after a failure skips the
 * records it already applied. */
static int32_t kw_apply(void *ud, const feed_rec *recs, size_t n, memd_error *err)
{
	indexer *ix = ud;
	for (size_t i = 0; i < n; i++) {
		int32_t r;
		if (recs[i].position <= ix->kw_applied)
			continue;
		if ((r = kw_apply_one(ix, &recs[i], err)) < 0)
			return r;
		ix->kw_applied = recs[i].position;
	}
	return 0;
}

/* ---- open / close --------------------------------------------------------------------- */

static void free_parts(indexer *ix)
{
	vec_free(ix->vec);
	embedder_free(ix->emb);
	kw_free(ix->kw);
	pthread_mutex_destroy(&ix->rebuild_lock);
	free(ix);
}

int32_t index_open(const settings *set, store *sessions, const loader_instance *vector_store,
		   hostsvc *svc, indexer **ret, memd_error *err)
{
	indexer *ix = calloc(1, sizeof(*ix));
	int32_t r;

	if (!ix)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	pthread_mutex_init(&ix->rebuild_lock, NULL);
	ix->sessions = sessions;
	ix->svc = svc;
	ix->default_mode = set->search_mode_default ? search_mode(set->search_mode_default) : 0;
	if (!ix->default_mode)
		ix->default_mode = SEARCH_KEYWORD;
	if (set->keyword_enabled && !(ix->kw = kw_new(set->keyword_k1, set->keyword_b))) {
		free_parts(ix);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	if (set->vector_enabled) {
		if (!vector_store) {
			free_parts(ix);
			return memd_error_set(err, MEMD_EINVAL, 0, "index.vector.store '%.64s' is not configured",
					      set->vector_store ? set->vector_store : "");
		}
		if ((r = embedder_open(set->embedder, svc, &ix->emb, err)) < 0 ||
		    (r = vec_open(vector_store, set->vector_store, sessions, ix->emb, svc, &ix->vec,
				  err)) < 0) {
			free_parts(ix);
			return r;
		}
	}
	if (ix->kw) {
		feed_consumer c = { .userdata = ix, .apply = kw_apply };
		if ((r = feed_tailer_start(sessions, svc, LOG_KEYWORD, INDEX_KEYWORD_BATCH, &c,
					   &ix->kw_tail, err)) < 0) {
			free_parts(ix);
			return r;
		}
	}
	if (ix->vec) {
		feed_consumer c;
		vec_consumer(ix->vec, &c);
		if ((r = feed_tailer_start(sessions, svc, LOG_VECTOR,
					   embedder_batch(ix->emb) * INDEX_VECTOR_BATCHES, &c,
					   &ix->vec_tail, err)) < 0) {
			feed_tailer_stop(ix->kw_tail);
			free_parts(ix);
			return r;
		}
	}
	*ret = ix;
	return 0;
}

/* The feed head, or -1 when the store cannot tell (feed_tailer_wait then
 * waits for a full pass). */
static int32_t read_head(indexer *ix, const memd_call *call, int64_t *ret, memd_error *err)
{
	memd_error e2 = { 0 };
	int64_t head = 0;
	int32_t r = store_feed_head(ix->sessions, call, &head, &e2);

	if (r == MEMD_ENOTSUP) {
		*ret = -1;
		return 0;
	}
	if (r < 0) {
		if (err)
			*err = e2;
		return r;
	}
	*ret = head;
	return 0;
}

void index_close(indexer *ix)
{
	if (!ix)
		return;
	if (ix->vec_tail) {
		memd_call call = { .struct_size = sizeof(call) };
		memd_error err = { 0 };
		int64_t head;
		if (read_head(ix, &call, &head, &err) < 0 ||
		    feed_tailer_wait(ix->vec_tail, head,
				     feed_monotonic_us() + (int64_t)INDEX_CLOSE_FLUSH_MS * US_PER_MS,
				     &err) < 0)
			hostsvc_log(ix->svc, MEMD_LOG_WARN, LOG_VECTOR,
				    "closing before the vector index caught up (it will go on at the next start): %s",
				    err.msg);
	}
	/* What is still in flight (a hanging embeddings endpoint) gives up
	 * now; it is done again at the next start. */
	vec_stop(ix->vec);
	feed_tailer_stop(ix->vec_tail);
	feed_tailer_stop(ix->kw_tail);
	free_parts(ix);
}

void index_notify(indexer *ix)
{
	if (!ix)
		return;
	if (ix->kw_tail)
		feed_tailer_kick(ix->kw_tail);
	if (ix->vec_tail)
		feed_tailer_kick(ix->vec_tail);
}

void index_keyword_stats(indexer *ix, kw_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (ix && ix->kw)
		kw_get_stats(ix->kw, ret);
}

/* ---- search ------------------------------------------------------------------------ */

int32_t index_search(indexer *ix, const memd_call *call, const char *app, const char *user,
		     const char *body_json, char **ret_json, memd_error *err)
{
	memd_call c = { .struct_size = sizeof(c) };
	search_req q = { 0 };
	int64_t head, deadline;
	int32_t r;

	if (call)
		c = *call;
	if ((r = search_parse(body_json, ix->default_mode, &q, err)) < 0)
		return r;
	if ((q.mode == SEARCH_KEYWORD || q.mode == SEARCH_HYBRID) && !ix->kw) {
		r = memd_error_set(err, MEMD_EINVAL, 0,
				   "mode %s: keyword search is not enabled (index.keyword.enabled)",
				   search_mode_name(q.mode));
		goto out;
	}
	if ((q.mode == SEARCH_VECTOR || q.mode == SEARCH_HYBRID) && !ix->vec) {
		r = memd_error_set(err, MEMD_EINVAL, 0,
				   "mode %s: vector search is not enabled (index.vector.enabled)",
				   search_mode_name(q.mode));
		goto out;
	}
	if ((r = read_head(ix, &c, &head, err)) < 0)
		goto out;
	deadline = c.deadline_us ? c.deadline_us
				 : feed_monotonic_us() + (int64_t)INDEX_WAIT_MS * US_PER_MS;
	if (q.mode != SEARCH_VECTOR && (r = feed_tailer_wait(ix->kw_tail, head, deadline, err)) < 0)
		goto out;
	if (q.mode != SEARCH_KEYWORD && (r = feed_tailer_wait(ix->vec_tail, head, deadline, err)) < 0)
		goto out;
	r = search_run(ix->kw, ix->vec, ix->sessions, &c, app, user, &q, ret_json, err);
out:
	search_req_clear(&q);
	return r;
}

/* ---- rebuild ----------------------------------------------------------------------- */

typedef struct progress {
	memd_progress_fn fn;
	void *ud;
	uint64_t done, total;
	int64_t next_us;
} progress;

/* Report now if due (or if force); nonzero if the caller asked to stop. */
static int report(progress *p, int force)
{
	int64_t now = feed_monotonic_us();
	if (!p->fn || (!force && now < p->next_us))
		return 0;
	p->next_us = now + (int64_t)INDEX_PROGRESS_MS * US_PER_MS;
	return p->fn(p->ud, p->done, p->total) != 0;
}

static int32_t rebuild_all(indexer *ix, progress *p, memd_error *err)
{
	memd_call call = { .struct_size = sizeof(call) };
	feed_tailer *tails[2] = { ix->kw_tail, ix->vec_tail };
	int64_t head;
	int32_t r;

	if ((r = read_head(ix, &call, &head, err)) < 0)
		return r;
	if (ix->vec_tail) {
		feed_tailer_pause(ix->vec_tail);
		r = vec_cursor_save(ix->vec, 0, err);
		if (r == 0)
			feed_tailer_reset(ix->vec_tail, 0, head);
		feed_tailer_resume(ix->vec_tail);
		if (r < 0)
			return r;
	}
	if (ix->kw_tail) {
		feed_tailer_pause(ix->kw_tail);
		kw_clear(ix->kw);
		ix->kw_applied = 0;
		feed_tailer_reset(ix->kw_tail, 0, head);
		feed_tailer_resume(ix->kw_tail);
	}
	hostsvc_log(ix->svc, MEMD_LOG_INFO, "index", "rebuilding every index from the feed (head %lld)",
		    (long long)head);
	p->total = head > 0 ? (uint64_t)head * ((ix->kw_tail != NULL) + (ix->vec_tail != NULL)) : 0;
	for (;;) {
		int pending = 0;
		p->done = 0;
		for (size_t i = 0; i < 2; i++) {
			int64_t deadline = feed_monotonic_us() + (int64_t)INDEX_PROGRESS_MS * US_PER_MS;
			int64_t pos;
			if (!tails[i])
				continue;
			r = feed_tailer_wait(tails[i], head, deadline, err);
			if (r == MEMD_ETIMEDOUT)
				pending = 1;
			else if (r < 0)
				return r;
			pos = feed_tailer_position(tails[i]);
			p->done += r == 0 && head > 0 ? (uint64_t)head : pos > 0 ? (uint64_t)pos : 0;
		}
		if (!pending)
			break;
		if (report(p, 0))
			return memd_error_set(err, MEMD_ECANCELED, 0,
					      "rebuild canceled (the indexes go on catching up)");
	}
	p->done = p->total;
	report(p, 1);
	return 0;
}

/* Session ids of (app, user) and their event count (last_seq). */
typedef struct session_list {
	char **ids;
	size_t n, cap;
	int64_t last_created;
	uint64_t events;
	uint32_t page;
} session_list;

static int32_t collect_session(void *ud, const memd_session *s)
{
	session_list *l = ud;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : INDEX_REBUILD_SESSIONS;
		char **ids = realloc(l->ids, cap * sizeof(*ids));
		if (!ids)
			return MEMD_ENOMEM;
		l->ids = ids;
		l->cap = cap;
	}
	if (!(l->ids[l->n] = strdup(s->id)))
		return MEMD_ENOMEM;
	l->n++;
	l->page++;
	l->last_created = s->created_us;
	l->events += s->last_seq > 0 ? (uint64_t)s->last_seq : 0;
	return 0;
}

static void session_list_clear(session_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->ids[i]);
	free(l->ids);
}

static int32_t list_sessions(indexer *ix, const memd_scope *sc, session_list *l, memd_error *err)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_session_sink sink = { sizeof(sink), l, collect_session };

	for (;;) {
		memd_session_query q = {
			.struct_size = sizeof(q),
			.flags = MEMD_SQ_INCLUDE_ARCHIVED,
			.limit = INDEX_REBUILD_SESSIONS,
			.before_created_us = l->n ? l->last_created : 0,
			.before_id = l->n ? l->ids[l->n - 1] : NULL,
		};
		int32_t r;
		l->page = 0;
		if ((r = store_session_list(ix->sessions, &call, sc, &q, &sink, err)) < 0)
			return r == MEMD_ENOMEM ? memd_error_set(err, r, 0, "out of memory") : r;
		if (l->page < INDEX_REBUILD_SESSIONS)
			return 0;
	}
}

typedef struct load_ctx {
	feed_batch *b;
	const memd_scope *sc;
} load_ctx;

static int32_t collect_event(void *ud, const memd_event *e)
{
	load_ctx *c = ud;
	return feed_batch_add_event(c->b, c->sc->app, c->sc->user, c->sc->session, e);
}

/* The records of recs[0..n) at positions <= upto: a prefix, since one
 * session's events are in seq and so in feed order. */
static size_t prefix_upto(const feed_rec *recs, size_t n, int64_t upto)
{
	size_t k = 0;
	while (k < n && recs[k].position <= upto)
		k++;
	return k;
}

static int32_t rebuild_session(indexer *ix, const memd_scope *sc, int64_t kw_upto, int64_t vec_upto,
			       feed_batch *b, progress *p, memd_error *err)
{
	memd_call call = { .struct_size = sizeof(call) };
	load_ctx ctx = { b, sc };
	memd_event_sink sink = { sizeof(sink), &ctx, collect_event };
	int64_t after = 0;

	for (;;) {
		memd_event_query q = {
			.struct_size = sizeof(q),
			.after_seq = after,
			.limit = INDEX_REBUILD_PAGE,
		};
		const feed_rec *recs;
		size_t n;
		int32_t r;

		feed_batch_reset(b);
		r = store_events_load(ix->sessions, &call, sc, &q, &sink, err);
		if (r == MEMD_ENOTFOUND)
			return 0; /* deleted meanwhile: its DELETE record follows */
		if (r < 0)
			return r == MEMD_ENOMEM ? memd_error_set(err, r, 0, "out of memory") : r;
		recs = feed_batch_records(b);
		n = feed_batch_count(b);
		if (!n)
			return 0;
		if (ix->kw) {
			size_t k = prefix_upto(recs, n, kw_upto);
			for (size_t i = 0; i < k; i++)
				if ((r = kw_apply_one(ix, &recs[i], err)) < 0)
					return r;
		}
		if (ix->vec && (r = vec_apply(ix->vec, recs, prefix_upto(recs, n, vec_upto), err)) < 0)
			return r;
		p->done += n;
		if (report(p, 0))
			return memd_error_set(err, MEMD_ECANCELED, 0, "rebuild canceled");
		after = recs[n - 1].seq;
		if (n < INDEX_REBUILD_PAGE)
			return 0;
	}
}

static int32_t rebuild_user(indexer *ix, const char *app, const char *user, progress *p,
			    memd_error *err)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = app, .user = user };
	session_list l = { 0 };
	feed_batch *b = feed_batch_new();
	int64_t kw_upto = 0, vec_upto = 0;
	int32_t r = 0;

	if (!b)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	/* Paused tailers: every record up to their positions is applied, none
	 * after; the user's events up to there are rebuilt from the sessions,
	 * the tailers do the rest when they resume. */
	if (ix->kw_tail)
		kw_upto = feed_tailer_pause(ix->kw_tail);
	if (ix->vec_tail)
		vec_upto = feed_tailer_pause(ix->vec_tail);
	if (ix->kw)
		kw_delete_user(ix->kw, app, user);
	if (ix->vec)
		r = vec_remove_user(ix->vec, app, user, err);
	if (r == 0)
		r = list_sessions(ix, &sc, &l, err);
	p->total = l.events * ((ix->kw != NULL) + (ix->vec != NULL));
	for (size_t i = 0; r == 0 && i < l.n; i++) {
		sc.session = l.ids[i];
		r = rebuild_session(ix, &sc, kw_upto, vec_upto, b, p, err);
	}
	if (r < 0 && ix->kw) {
		/* The user's keyword entries are incomplete: replay the whole
		 * (in-memory) keyword index from the feed instead. */
		kw_clear(ix->kw);
		ix->kw_applied = 0;
		feed_tailer_reset(ix->kw_tail, 0, 0);
		hostsvc_log(ix->svc, MEMD_LOG_WARN, "index",
			    "rebuild of %.64s/%.64s failed (%s): replaying the keyword index; the vector index of this user is incomplete until a rebuild succeeds",
			    app, user, err->msg);
	}
	if (ix->vec_tail)
		feed_tailer_resume(ix->vec_tail);
	if (ix->kw_tail)
		feed_tailer_resume(ix->kw_tail);
	if (r == 0) {
		p->done = p->total;
		report(p, 1);
	}
	session_list_clear(&l);
	feed_batch_free(b);
	return r;
}

int32_t index_rebuild(indexer *ix, const char *app, const char *user, memd_progress_fn fn,
		      void *userdata, memd_error *err)
{
	progress p = { fn, userdata, 0, 0, 0 };
	int32_t r;

	if (!ix->kw && !ix->vec)
		return memd_error_set(err, MEMD_EINVAL, 0, "no index is enabled (index.keyword, index.vector)");
	if ((app == NULL) != (user == NULL))
		return memd_error_set(err, MEMD_EINVAL, 0, "rebuild: give both app and user, or neither");
	pthread_mutex_lock(&ix->rebuild_lock);
	r = app ? rebuild_user(ix, app, user, &p, err) : rebuild_all(ix, &p, err);
	pthread_mutex_unlock(&ix->rebuild_lock);
	return r;
}
