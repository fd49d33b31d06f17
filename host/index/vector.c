/* SPDX-License-Identifier: MIT */
#include "vector.h"

#include "strtab.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VEC_CURSOR_MAX (MEMD_ID_MAX + 1)

struct vec_index {
	const loader_instance *inst;
	const memd_vector_ops *ops;
	void *handle;
	int serialized;
	pthread_mutex_t lock;
	char *store_name;
	store *sessions;
	embedder *emb;
	hostsvc *svc;
	/* Set up once the embedder's dimension is known (at open, or before
	 * the tailer's first batch when the endpoint was down at open):
	 * written under prepare_lock before ready is set (release), read only
	 * after ready is seen set (acquire). */
	uint32_t dim;
	char cursor[VEC_CURSOR_MAX];
	atomic_int ready;
	pthread_mutex_t prepare_lock; /* set-up and prepare run once, from any thread */
	int prepared;
	/* Scratch for apply (one applier at a time, see feed.h). */
	float *vectors;
	memd_vector_record *recs;
	const memd_vector_record **rec_ptrs;
	const char **texts;
	const feed_rec **pending;
	size_t n_pending;
	uint32_t batch;
	/* Raised by vec_stop: every call this indexer makes carries it as its
	 * cancel flag, so a hanging embedder or store cannot hold up close. */
	volatile int32_t stopping;
};

#define VEC_LOCK(v)                                  \
	do {                                         \
		if ((v)->serialized)                 \
			pthread_mutex_lock(&(v)->lock); \
	} while (0)
#define VEC_UNLOCK(v)                                  \
	do {                                           \
		if ((v)->serialized)                   \
			pthread_mutex_unlock(&(v)->lock); \
	} while (0)

/* A call context for the indexer's own work: cancelled by vec_stop. */
static memd_call vec_call_ctx(vec_index *v)
{
	memd_call call = { .struct_size = sizeof(call), .cancel = &v->stopping };
	return call;
}

void vec_stop(vec_index *v)
{
	if (v)
		v->stopping = 1;
}

static int32_t fix(const vec_index *v, const char *op, int32_t r, memd_error *err)
{
	return store_fix_error(v->store_name, op, r, err);
}

static int32_t do_prepare(vec_index *v, memd_error *err)
{
	memd_call call = vec_call_ctx(v);
	int32_t r = 0;

	pthread_mutex_lock(&v->prepare_lock);
	if (!v->prepared && v->ops->prepare) {
		VEC_LOCK(v);
		r = v->ops->prepare(v->handle, &call, v->dim, err);
		VEC_UNLOCK(v);
		if (r < 0)
			r = fix(v, "prepare", r, err);
	}
	if (r == 0)
		v->prepared = 1;
	pthread_mutex_unlock(&v->prepare_lock);
	return r;
}

/* Everything that needs the dimension: the cursor name (the embedder
 * identity carries it) and the batch buffers. Called under prepare_lock. */
static int32_t set_up(vec_index *v, memd_error *err)
{
	v->dim = embedder_dim(v->emb);
	if ((size_t)snprintf(v->cursor, sizeof(v->cursor), VEC_CURSOR_PREFIX "%s:%s", v->store_name,
			     embedder_identity(v->emb)) >= sizeof(v->cursor))
		return memd_error_set(err, MEMD_EINVAL, 0, "index.vector.store: name '%.64s' is too long",
				      v->store_name);
	v->vectors = malloc((size_t)v->batch * v->dim * sizeof(float));
	v->recs = calloc(v->batch, sizeof(*v->recs));
	v->rec_ptrs = calloc(v->batch, sizeof(*v->rec_ptrs));
	v->texts = calloc(v->batch, sizeof(*v->texts));
	v->pending = calloc(v->batch, sizeof(*v->pending));
	if (!v->vectors || !v->recs || !v->rec_ptrs || !v->texts || !v->pending) {
		free(v->vectors);
		free(v->recs);
		free(v->rec_ptrs);
		free(v->texts);
		free(v->pending);
		v->vectors = NULL;
		v->recs = NULL;
		v->rec_ptrs = NULL;
		v->texts = NULL;
		v->pending = NULL;
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	return 0;
}

/* Make sure the dimension is known and everything that needs it is set up
 * (asking the embedder if not: an endpoint still down gives its retryable
 * error), then prepare the vector store. */
static int32_t ensure_ready(vec_index *v, memd_error *err)
{
	int32_t r = 0;

	if (!atomic_load_explicit(&v->ready, memory_order_acquire)) {
		if ((r = embedder_learn_dim(v->emb, err)) < 0)
			return r;
		pthread_mutex_lock(&v->prepare_lock);
		if (!atomic_load_explicit(&v->ready, memory_order_relaxed) &&
		    (r = set_up(v, err)) == 0) {
			atomic_store_explicit(&v->ready, 1, memory_order_release);
			hostsvc_log(v->svc, MEMD_LOG_INFO, "index.vector",
				    "embedder %s: %u dimensions; indexing into cursor %s",
				    embedder_type(v->emb), v->dim, v->cursor);
		}
		pthread_mutex_unlock(&v->prepare_lock);
		if (r < 0)
			return r;
	}
	return do_prepare(v, err);
}

int32_t vec_not_ready(const vec_index *v, memd_error *err)
{
	return memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
			      "vector search is not available yet: the %s embedder's dimension is "
			      "not known (its endpoint has not answered since start; indexing begins "
			      "when it does)",
			      embedder_type(v->emb));
}

int vec_ready(const vec_index *v)
{
	return atomic_load_explicit(&((vec_index *)v)->ready, memory_order_acquire);
}

int32_t vec_open(const loader_instance *inst, const char *store_name, store *sessions, embedder *emb,
		 hostsvc *svc, vec_index **ret, memd_error *err)
{
	vec_index *v;
	int32_t r;

	if ((r = loader_require_kind(loader_instance_plugin(inst), MEMD_KIND_VECTOR,
				     "index.vector.store", err)) < 0)
		return r;
	if (!embedder_dim_known(emb) &&
	    strlen(VEC_CURSOR_PREFIX) + strlen(store_name) + 1 + EMBED_IDENTITY_MAX >= VEC_CURSOR_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "index.vector.store: name '%.64s' is too long",
				      store_name);
	v = calloc(1, sizeof(*v));
	if (!v)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	v->inst = inst;
	v->ops = loader_vector_ops(loader_instance_plugin(inst));
	v->handle = loader_instance_handle(inst);
	v->serialized = loader_instance_serialized(inst);
	pthread_mutex_init(&v->lock, NULL);
	pthread_mutex_init(&v->prepare_lock, NULL);
	atomic_init(&v->ready, 0);
	v->sessions = sessions;
	v->emb = emb;
	v->svc = svc;
	v->batch = embedder_batch(emb);
	v->store_name = strdup(store_name);
	if (!v->store_name) {
		vec_free(v);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	if (!v->ops->remove_events)
		hostsvc_log(svc, MEMD_LOG_INFO, "index.vector",
			    "vector store %s has no remove_events (ABI below 1.2): hidden events keep their vectors, and searches leave them out when they fetch the hits",
			    store_name);
	if (!embedder_dim_known(emb)) {
		/* The endpoint is down: the tailer sets up before its first batch. */
		*ret = v;
		return 0;
	}
	r = ensure_ready(v, err);
	if (r < 0 && !vec_ready(v)) {
		vec_free(v);
		return r;
	}
	if (r < 0 && !(err->flags & MEMD_ERROR_RETRYABLE) && r != MEMD_EUNAVAIL) {
		vec_free(v);
		return r;
	}
	if (r < 0)
		hostsvc_log(svc, MEMD_LOG_WARN, "index.vector", "%s (will retry)", err->msg);
	*ret = v;
	return 0;
}

void vec_free(vec_index *v)
{
	if (!v)
		return;
	pthread_mutex_destroy(&v->lock);
	pthread_mutex_destroy(&v->prepare_lock);
	free(v->store_name);
	free(v->vectors);
	free(v->recs);
	free(v->rec_ptrs);
	free(v->texts);
	free(v->pending);
	free(v);
}

const char *vec_cursor_name(const vec_index *v)
{
	return vec_ready(v) ? v->cursor : "";
}

const char *vec_store_name(const vec_index *v)
{
	return v->store_name;
}

/* ---- applying ------------------------------------------------------------------- */

static int has_text(const char *s)
{
	for (; *s; s++)
		if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
			return 1;
	return 0;
}

static int is_zero(const float *x, uint32_t dim)
{
	for (uint32_t i = 0; i < dim; i++)
		if (x[i] != 0.0f)
			return 0;
	return 1;
}

static int32_t remove_memory(vec_index *v, const char *app, const char *user, const char *id,
			     memd_error *err);

/* Embed and upsert the pending events and memories. */
static int32_t flush(vec_index *v, memd_error *err)
{
	memd_call call = vec_call_ctx(v);
	size_t np = v->n_pending, zero_memories = 0;
	uint32_t n = 0;
	int32_t r;

	if (!v->n_pending)
		return 0;
	for (size_t i = 0; i < v->n_pending; i++)
		v->texts[i] = v->pending[i]->text;
	r = embedder_embed(v->emb, &call, v->texts, (uint32_t)v->n_pending, v->vectors, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < v->n_pending; i++) {
		const feed_rec *e = v->pending[i];
		const float *vec = v->vectors + i * v->dim;
		int memory = e->kind == MEMD_FEED_MEMORY;
		if (is_zero(vec, v->dim)) {
			zero_memories += memory;
			continue;
		}
		v->recs[n] = (memd_vector_record){
			.struct_size = sizeof(memd_vector_record),
			.dim = v->dim,
			.app = e->app,
			.user = e->user,
			.session = memory ? VEC_MEMORY_SESSION : e->session,
			.event_id = memory ? e->memory_id : e->event_id,
			.author = memory ? NULL : e->author,
			.seq = memory ? e->expires_us : e->seq,
			.timestamp_us = e->timestamp_us,
			.vector = vec,
		};
		v->rec_ptrs[n] = &v->recs[n];
		n++;
	}
	v->n_pending = 0;
	if (n) {
		VEC_LOCK(v);
		r = v->ops->upsert(v->handle, &call, v->rec_ptrs, n, err);
		VEC_UNLOCK(v);
		if (r < 0)
			return fix(v, "upsert", r, err);
	}
	/* A memory whose new text embeds to nothing: its older version goes. */
	for (size_t i = 0; zero_memories && i < np; i++) {
		const feed_rec *e = v->pending[i];
		if (e->kind != MEMD_FEED_MEMORY || !is_zero(v->vectors + i * v->dim, v->dim))
			continue;
		if ((r = remove_memory(v, e->app, e->user, e->memory_id, err)) < 0)
			return r;
		zero_memories--;
	}
	return 0;
}

static int32_t remove_scope(vec_index *v, const char *app, const char *user, const char *session,
			    memd_error *err)
{
	memd_call call = vec_call_ctx(v);
	memd_vector_filter f = {
		.struct_size = sizeof(f),
		.app = app,
		.user = user,
		.session = session,
	};
	int32_t r;

	VEC_LOCK(v);
	r = v->ops->remove(v->handle, &call, &f, err);
	VEC_UNLOCK(v);
	return r < 0 ? fix(v, "remove", r, err) : 0;
}

int32_t vec_remove_user(vec_index *v, const char *app, const char *user, memd_error *err)
{
	return remove_scope(v, app, user, NULL, err);
}

int vec_removes_events(const vec_index *v)
{
	return v->ops->remove_events != NULL;
}

/* Remove the records of events ids[0..n) of one session. A store without
 * remove_events (below ABI 1.2) keeps them: searches leave hidden events
 * out when they fetch the hits (see vector.h). */
static int32_t remove_events(vec_index *v, const char *app, const char *user, const char *session,
			     const char *const *ids, uint32_t n, memd_error *err)
{
	memd_call call = vec_call_ctx(v);
	memd_scope sc = { .struct_size = sizeof(sc), .app = app, .user = user, .session = session };
	int32_t r;

	if (!n || !v->ops->remove_events)
		return 0;
	VEC_LOCK(v);
	r = v->ops->remove_events(v->handle, &call, &sc, ids, n, err);
	VEC_UNLOCK(v);
	if (r == MEMD_ENOTSUP)
		return 0; /* as without the op */
	return r < 0 ? fix(v, "remove_events", r, err) : 0;
}

/* Remove a memory's record. A store without remove_events keeps it:
 * searches drop memories the session store no longer has when they
 * fetch the hits. */
static int32_t remove_memory(vec_index *v, const char *app, const char *user, const char *id,
			     memd_error *err)
{
	const char *ids[1] = { id };
	return remove_events(v, app, user, VEC_MEMORY_SESSION, ids, 1, err);
}

/* Nonzero if b is a HIDE record of a's session. */
static int same_session(const feed_rec *a, const feed_rec *b)
{
	return b->kind == MEMD_FEED_HIDE && b->session && strcmp(a->app, b->app) == 0 &&
	       strcmp(a->user, b->user) == 0 && strcmp(a->session, b->session) == 0;
}

/* The run of HIDE records of one session that starts at recs[0] (at most
 * VEC_HIDE_RUN), removed in one call; its length into *ret_run. */
static int32_t hide_run(vec_index *v, const feed_rec *recs, size_t n, size_t *ret_run,
			memd_error *err)
{
	const char *ids[VEC_HIDE_RUN];
	size_t k = 0;
	uint32_t m = 0;

	while (k < n && k < VEC_HIDE_RUN && (k == 0 || same_session(&recs[0], &recs[k]))) {
		if (recs[k].event_id && recs[k].event_id[0]) /* else nothing to find */
			ids[m++] = recs[k].event_id;
		k++;
	}
	*ret_run = k;
	return remove_events(v, recs[0].app, recs[0].user, recs[0].session, ids, m, err);
}

int32_t vec_apply(vec_index *v, const feed_rec *recs, size_t n, memd_error *err)
{
	int32_t r;

	v->n_pending = 0;
	if ((r = ensure_ready(v, err)) < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		const feed_rec *rec = &recs[i];
		switch (rec->kind) {
		case MEMD_FEED_EVENT:
			if (!rec->session || !has_text(rec->text))
				break;
			v->pending[v->n_pending++] = rec;
			if (v->n_pending == v->batch && (r = flush(v, err)) < 0)
				return r;
			break;
		case MEMD_FEED_DELETE_SESSION:
		case MEMD_FEED_DELETE_USER:
			if ((r = flush(v, err)) < 0)
				return r;
			if ((r = remove_scope(v, rec->app, rec->user,
					      rec->kind == MEMD_FEED_DELETE_SESSION ? rec->session : NULL,
					      err)) < 0)
				return r;
			break;
		case MEMD_FEED_MEMORY:
			if (!rec->memory_id || !rec->memory_id[0])
				break;
			if (!has_text(rec->text)) {
				/* Nothing to embed: the older version goes. */
				if ((r = flush(v, err)) < 0 ||
				    (r = remove_memory(v, rec->app, rec->user, rec->memory_id, err)) < 0)
					return r;
				break;
			}
			v->pending[v->n_pending++] = rec;
			if (v->n_pending == v->batch && (r = flush(v, err)) < 0)
				return r;
			break;
		case MEMD_FEED_MEMORY_DELETE:
			if (!rec->memory_id || !rec->memory_id[0])
				break;
			/* A version pending in this batch is upserted first. */
			if ((r = flush(v, err)) < 0 ||
			    (r = remove_memory(v, rec->app, rec->user, rec->memory_id, err)) < 0)
				return r;
			break;
		case MEMD_FEED_HIDE: {
			size_t run = 1;
			if (!rec->session)
				break;
			/* An event pending in this batch is upserted first. */
			if ((r = flush(v, err)) < 0 || (r = hide_run(v, rec, n - i, &run, err)) < 0)
				return r;
			i += run - 1;
			break;
		}
		default:
			break; /* kinds of a newer store: nothing to index */
		}
	}
	return flush(v, err);
}

/* ---- the feed consumer ------------------------------------------------------------ */

static int32_t c_apply(void *ud, const feed_rec *recs, size_t n, memd_error *err)
{
	return vec_apply(ud, recs, n, err);
}

static int32_t c_start(void *ud, memd_error *err)
{
	return ensure_ready(ud, err);
}

static int32_t c_load(void *ud, int64_t *ret, memd_error *err)
{
	vec_index *v = ud;
	memd_call call = vec_call_ctx(v);
	int32_t r = ensure_ready(v, err);
	return r < 0 ? r : store_cursor_get(v->sessions, &call, v->cursor, ret, err);
}

int32_t vec_cursor_save(vec_index *v, int64_t position, memd_error *err)
{
	memd_call call = vec_call_ctx(v);
	int32_t r = ensure_ready(v, err);
	return r < 0 ? r : store_cursor_set(v->sessions, &call, v->cursor, position, err);
}

static int32_t c_save(void *ud, int64_t position, memd_error *err)
{
	return vec_cursor_save(ud, position, err);
}

/* Applies the delete records of a feed range (after, until] and gathers
 * its HIDE records: hides[id] of keys "app\1user\1session\1event" is 1
 * while no later EVENT record of the range made that event visible again. */
typedef struct skip_ctx {
	vec_index *v;
	int64_t until, last;
	size_t read;
	memd_error *err;
	strtab keys;
	uint8_t *hides;
	uint32_t hides_cap;
	int oom;
} skip_ctx;

#define VEC_KEY_SEP '\x01' /* ids never contain control characters */
#define VEC_KEY_MAX (4 * (MEMD_ID_MAX + 1))

/* The key of an event into buf; its length, or 0 if an id is too long. */
static size_t event_key(const char *app, const char *user, const char *session, const char *id,
			char buf[VEC_KEY_MAX])
{
	int n = snprintf(buf, VEC_KEY_MAX, "%s%c%s%c%s%c%s", app, VEC_KEY_SEP, user, VEC_KEY_SEP,
			 session, VEC_KEY_SEP, id);
	return n > 0 && n < VEC_KEY_MAX ? (size_t)n : 0;
}

/* Note an event (or memory) of the range as hidden (or deleted) or
 * visible again. */
static int32_t skip_mark(skip_ctx *s, const char *app, const char *user, const char *session,
			 const char *event_id, int hidden)
{
	char key[VEC_KEY_MAX];
	size_t kl;
	uint32_t id;

	if (!app || !user || !session || !event_id || !event_id[0])
		return 0;
	kl = event_key(app, user, session, event_id, key);
	if (!kl)
		return 0;
	if (!hidden) {
		id = strtab_find(&s->keys, key, kl);
		if (id != STRTAB_NONE)
			s->hides[id] = 0;
		return 0;
	}
	if (strtab_intern(&s->keys, key, kl, &id) < 0)
		goto oom;
	if (id >= s->hides_cap) {
		uint32_t cap = s->hides_cap ? s->hides_cap * 2 : VEC_HIDE_RUN;
		uint8_t *h = realloc(s->hides, cap);
		if (!h)
			goto oom;
		s->hides = h;
		s->hides_cap = cap;
	}
	s->hides[id] = 1;
	return 0;
oom:
	s->oom = 1;
	return MEMD_ENOMEM;
}

static int32_t skip_hide(skip_ctx *s, const memd_feed_record *r, int hidden)
{
	if (!r->event)
		return 0;
	return skip_mark(s, r->app ? r->app : r->event->app, r->user ? r->user : r->event->user,
			 r->session ? r->session : r->event->session, r->event->id, hidden);
}

/* A MEMORY_DELETE of the range: its record goes, unless a later MEMORY
 * record of the range brings the id back. */
static int32_t skip_memory(skip_ctx *s, const memd_feed_record *r, int deleted)
{
	const memd_memory *m = r->struct_size >= offsetof(memd_feed_record, memory) +
							     sizeof(r->memory)
				       ? r->memory
				       : NULL;
	if (!m)
		return 0;
	return skip_mark(s, r->app ? r->app : m->app, r->user ? r->user : m->user,
			 VEC_MEMORY_SESSION, m->id, deleted);
}

static int32_t skip_record(void *ud, const memd_feed_record *r)
{
	skip_ctx *s = ud;

	s->read++;
	s->last = r->position;
	if (r->position > s->until)
		return 0;
	if (r->kind == MEMD_FEED_HIDE || r->kind == MEMD_FEED_EVENT)
		return skip_hide(s, r, r->kind == MEMD_FEED_HIDE);
	if (r->kind == MEMD_FEED_MEMORY || r->kind == MEMD_FEED_MEMORY_DELETE)
		return skip_memory(s, r, r->kind == MEMD_FEED_MEMORY_DELETE);
	if (r->kind != MEMD_FEED_DELETE_SESSION && r->kind != MEMD_FEED_DELETE_USER)
		return 0;
	return remove_scope(s->v, r->app, r->user,
			    r->kind == MEMD_FEED_DELETE_SESSION ? r->session : NULL, s->err);
}

/* Remove the events the range left hidden, a session's run per call. */
static int32_t skip_remove_hidden(skip_ctx *s)
{
	const char *ids[VEC_HIDE_RUN];
	char scope[VEC_KEY_MAX], cur[VEC_KEY_MAX];
	uint32_t k = 0;
	int32_t r;

	for (uint32_t i = 0; i <= s->keys.n; i++) {
		const char *key = NULL, *sep = NULL;
		size_t sl = 0;
		if (i < s->keys.n) {
			if (!s->hides[i])
				continue;
			key = strtab_get(&s->keys, i);
			sep = strrchr(key, VEC_KEY_SEP);
			sl = (size_t)(sep - key);
		}
		if (k && (!key || k == VEC_HIDE_RUN || sl != strlen(cur) || memcmp(key, cur, sl) != 0)) {
			/* cur is "app\1user\1session": split it in place. */
			char *user, *session;
			memcpy(scope, cur, strlen(cur) + 1);
			user = strchr(scope, VEC_KEY_SEP);
			*user++ = '\0';
			session = strchr(user, VEC_KEY_SEP);
			*session++ = '\0';
			if ((r = remove_events(s->v, scope, user, session, ids, k, s->err)) < 0)
				return r;
			k = 0;
		}
		if (!key)
			break;
		if (!k) {
			memcpy(cur, key, sl);
			cur[sl] = '\0';
		}
		ids[k++] = sep + 1;
	}
	return 0;
}

/* Another process moved the shared cursor past us: it embedded the events
 * in between; re-apply the deletes and hides in between (one of our
 * earlier upserts may have landed after its remove), except the hides of
 * events the range shows visible again. */
static int32_t c_skip(void *ud, int64_t position, int64_t *ret, memd_error *err)
{
	vec_index *v = ud;
	memd_call call = vec_call_ctx(v);
	int64_t durable = 0;
	skip_ctx s = { .v = v, .last = position, .err = err };
	memd_feed_sink sink = { sizeof(sink), &s, skip_record };
	int32_t r;

	if ((r = ensure_ready(v, err)) < 0)
		return r;
	if ((r = store_cursor_get(v->sessions, &call, v->cursor, &durable, err)) < 0)
		return r;
	if (durable <= position) {
		*ret = position;
		return 0;
	}
	s.until = durable;
	do {
		s.read = 0;
		if ((r = store_feed_read(v->sessions, &call, s.last, VEC_SKIP_BATCH, &sink, err)) < 0)
			goto out;
	} while (s.read == VEC_SKIP_BATCH && s.last < durable);
	if ((r = skip_remove_hidden(&s)) < 0)
		goto out;
	hostsvc_log(v->svc, MEMD_LOG_DEBUG, "index.vector",
		    "another process indexed up to %lld; going on from there", (long long)durable);
	*ret = durable;
out:
	if (s.oom)
		r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	strtab_clear(&s.keys);
	free(s.hides);
	return r;
}

void vec_consumer(vec_index *v, feed_consumer *ret)
{
	*ret = (feed_consumer){
		.userdata = v,
		.apply = c_apply,
		.start = c_start,
		.load = c_load,
		.save = c_save,
		.skip = c_skip,
	};
}

/* ---- searching -------------------------------------------------------------------- */

typedef struct hit_acc {
	const memd_vector_filter *f;
	int memories;            /* 1: keep only memories; 0: only events */
	int64_t now_us;          /* memories expired then are left out */
	vec_hit *hits;
	size_t n, cap;
	uint32_t seen;           /* hits the store delivered */
	int oom;
} hit_acc;

static int in_filter(const memd_vector_filter *f, const memd_vector_hit *h)
{
	if (!h->app || !h->user || !h->session || !h->event_id)
		return 0;
	if (strcmp(h->app, f->app) != 0 || strcmp(h->user, f->user) != 0)
		return 0;
	if (f->session && strcmp(h->session, f->session) != 0)
		return 0;
	if (f->after_us && h->timestamp_us <= f->after_us)
		return 0;
	if (f->before_us && h->timestamp_us >= f->before_us)
		return 0;
	if (f->authors) {
		for (uint32_t i = 0; i < f->n_authors; i++)
			if (h->author && strcmp(h->author, f->authors[i]) == 0)
				return 1;
		return 0;
	}
	return 1;
}

/* Whether a hit in scope is of the kind asked for (and, a memory, not
 * expired). */
static int of_kind(const hit_acc *a, const memd_vector_hit *h)
{
	int memory = strcmp(h->session, VEC_MEMORY_SESSION) == 0;
	if (memory != a->memories)
		return 0;
	return !memory || !(h->seq > 0 && h->seq <= a->now_us);
}

static int32_t sink_hit(void *ud, const memd_vector_hit *h)
{
	hit_acc *a = ud;
	vec_hit *x;

	a->seen++;
	if (!in_filter(a->f, h))
		return 0; /* a store bug must not leak another scope */
	if (!of_kind(a, h))
		return 0;
	if (!(h->score > 0.0f))
		return 0; /* orthogonal or opposite: not a match */
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 16;
		vec_hit *g = realloc(a->hits, cap * sizeof(*g));
		if (!g) {
			a->oom = 1;
			return MEMD_ENOMEM;
		}
		a->hits = g;
		a->cap = cap;
	}
	x = &a->hits[a->n];
	x->memory = (uint32_t)a->memories;
	x->session = strdup(a->memories ? h->event_id : h->session);
	x->event_id = strdup(h->event_id);
	x->seq = a->memories ? 0 : h->seq;
	x->timestamp_us = h->timestamp_us;
	x->score = h->score;
	a->n++;
	if (!x->session || !x->event_id) {
		a->oom = 1;
		return MEMD_ENOMEM;
	}
	return 0;
}

void vec_hits_free(vec_hit *hits, size_t n)
{
	for (size_t i = 0; hits && i < n; i++) {
		free(hits[i].session);
		free(hits[i].event_id);
	}
	free(hits);
}

/* The best k hits of one kind into a (empty): asks the store for k, and
 * again for more while records of the other kind (or expired memories)
 * crowd the answer out and the store had more to give. */
static int32_t query_kind(vec_index *v, const memd_call *call, const float *q,
			  const memd_vector_filter *f, uint32_t k, hit_acc *a, memd_error *err)
{
	memd_vector_hit_sink sink = { sizeof(sink), a, sink_hit };
	uint32_t ask = k;
	int32_t r;

	for (;;) {
		vec_hits_free(a->hits, a->n);
		a->hits = NULL;
		a->n = a->cap = 0;
		a->seen = 0;
		VEC_LOCK(v);
		r = v->ops->query(v->handle, call, q, v->dim, f, ask, &sink, err);
		VEC_UNLOCK(v);
		if (r < 0)
			return a->oom ? memd_error_set(err, MEMD_ENOMEM, 0, "out of memory")
				      : fix(v, "query", r, err);
		if (a->n >= k || a->seen < ask || ask >= VEC_FETCH_MAX)
			break;
		ask = ask > VEC_FETCH_MAX / VEC_FETCH_GROWTH ? VEC_FETCH_MAX : ask * VEC_FETCH_GROWTH;
	}
	while (a->n > k) {
		a->n--;
		free(a->hits[a->n].session);
		free(a->hits[a->n].event_id);
	}
	return 0;
}

/* Best first: score, then newer, then by ids (a stable order). */
static int hit_cmp(const void *x, const void *y)
{
	const vec_hit *a = x, *b = y;
	int c;
	if (a->score != b->score)
		return a->score > b->score ? -1 : 1;
	if (a->timestamp_us != b->timestamp_us)
		return a->timestamp_us > b->timestamp_us ? -1 : 1;
	if (a->memory != b->memory)
		return a->memory ? 1 : -1;
	if ((c = strcmp(a->session, b->session)) != 0)
		return c;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

int32_t vec_search(vec_index *v, const memd_call *call, const char *query,
		   const memd_vector_filter *f, uint32_t sources, int64_t now_us, uint32_t k,
		   vec_hit **ret_hits, size_t *ret_n, memd_error *err)
{
	memd_vector_filter mf = {
		.struct_size = sizeof(mf),
		.app = f->app,
		.user = f->user,
		.session = VEC_MEMORY_SESSION,
	};
	hit_acc ev = { f, 0, now_us, NULL, 0, 0, 0, 0 }, mem = { &mf, 1, now_us, NULL, 0, 0, 0, 0 };
	const char *texts[1] = { query };
	vec_hit *all = NULL;
	float *q;
	int32_t r;

	if (!sources)
		sources = VEC_SOURCE_EVENTS | VEC_SOURCE_MEMORIES;
	if (!vec_ready(v))
		return vec_not_ready(v, err);
	q = malloc((size_t)v->dim * sizeof(*q));
	if (!q)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	if (!f->app || !f->user) {
		free(q);
		return memd_error_set(err, MEMD_EINTERNAL, 0, "vector search without a scope");
	}
	if ((r = embedder_embed(v->emb, call, texts, 1, q, err)) < 0) {
		free(q);
		return r;
	}
	if (is_zero(q, v->dim)) { /* nothing to look for */
		free(q);
		*ret_hits = NULL;
		*ret_n = 0;
		return 0;
	}
	if ((r = do_prepare(v, err)) == 0 && (sources & VEC_SOURCE_EVENTS))
		r = query_kind(v, call, q, f, k, &ev, err);
	if (r == 0 && (sources & VEC_SOURCE_MEMORIES))
		r = query_kind(v, call, q, &mf, k, &mem, err);
	free(q);
	if (r == 0 && ev.n + mem.n > 0 && !(all = malloc((ev.n + mem.n) * sizeof(*all))))
		r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	if (r < 0) {
		vec_hits_free(ev.hits, ev.n);
		vec_hits_free(mem.hits, mem.n);
		return r;
	}
	if (ev.n)
		memcpy(all, ev.hits, ev.n * sizeof(*all));
	if (mem.n)
		memcpy(all + ev.n, mem.hits, mem.n * sizeof(*all));
	free(ev.hits);
	free(mem.hits);
	if (all)
		qsort(all, ev.n + mem.n, sizeof(*all), hit_cmp);
	*ret_n = ev.n + mem.n < k ? ev.n + mem.n : k;
	for (size_t i = *ret_n; i < ev.n + mem.n; i++) {
		free(all[i].session);
		free(all[i].event_id);
	}
	*ret_hits = all;
	return 0;
}
