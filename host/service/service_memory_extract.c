/* SPDX-License-Identifier: MIT */
/*
 * service_memory_extract: long-term memories extracted from sessions
 * (memd_memory_extract), the memory worker and memd_memories_sweep.
 *
 * A session's memory_seq is the last seq extraction has read. Extracting
 * a session reads it, loads at most batch_events events after memory_seq
 * (summaries left out), lets the app's extractor (host/extract/) decide
 * what they change against the memories nearest each fact (those of its
 * topics, then those the index finds nearest its text, each read from the
 * store for its version), and commits every decision together with the move
 * of memory_seq, expecting the value it read, in one store memory_commit
 * (actor "extractor"). A commit that loses (MEMD_ECONFLICT: another
 * process committed the batch first, or a memory changed under the
 * decision; MEMD_ENOTFOUND: a memory decided on is gone) drops the
 * decisions and reads again, at most EXTRACT_COMMIT_TRIES times: a batch
 * is extracted exactly once, across processes. Then the next batch,
 * until memory_seq reaches the last seq read.
 *
 * In one process a session is extracted by one thread at a time (single
 * flight): memd_memory_extract waits for a run in progress, background
 * runs skip a session in flight.
 *
 * The memory worker (one thread, started when some app extracts) takes
 * sessions from a queue and, every memory.sweep_interval_s, makes a pass
 * (memd_memories_sweep does the same pass on its caller's thread):
 *  - after an append whose seqs pass a multiple of every_events
 *    (service_memory_after_append: a queue push, never a store call,
 *    never a failure of the append; other appends do nothing) the worker
 *    reads the session and extracts it when last_seq - memory_seq >=
 *    every_events (so a session is extracted by the time it has
 *    2 * every_events - 1 unread events at the latest);
 *  - a lane's finalized session (service_memory_on_finalize) is extracted
 *    when the app's on_finalize is set;
 *  - a pass deletes expired memories (one bounded batch, as the records'
 *    retention does: service_memories_expire) and
 *    extracts sessions idle for their app's idle_minutes with unread
 *    events (store session_list_pending with a keyset, at most
 *    SWEEP_SESSIONS_MAX among SWEEP_SCAN_MAX looked at).
 * A failed extraction (the extractor or the store) leaves memory_seq
 * where it was and puts the session in backoff: background runs leave it
 * alone for BACKOFF_BASE_US doubling per failure, at most BACKOFF_MAX_US
 * (by the facade's clock), then try again. Times (idle, backoff, memory
 * times) are the facade's clock (memd_set_clock).
 */
#include "service/service_int.h"
#include "service/service_thread.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "extract/extract.h"
#include "json/memory_json.h"
#include "util/uuid.h"

/* Commits of one batch that lose a race before the run gives up
 * (retryable MEMD_ECONFLICT). */
#define EXTRACT_COMMIT_TRIES 4
/* Memories of the user read to find the ones nearest a fact by their
 * words when the index cannot answer: the newest this many. */
#define NEAREST_SCAN 200u
/* A pass's bounds (see above). */
#define SWEEP_PAGE 100u
#define SWEEP_SCAN_MAX 1000u
#define SWEEP_SESSIONS_MAX 100u
/* Sessions waiting in the worker's queue, at most: a push beyond is
 * dropped (the idle pass and the next append catch up). */
#define QUEUE_MAX 10000u
/* Sessions in backoff remembered, at most (the oldest entry goes). */
#define BACKOFF_MAX_ENTRIES 10000u
#define BACKOFF_BASE_US (30LL * US_PER_SEC)
#define BACKOFF_MAX_US (3600LL * US_PER_SEC)
#define BACKOFF_SHIFT_MAX 20
#define US_PER_MINUTE (60LL * US_PER_SEC)
#define US_PER_DAY (86400LL * US_PER_SEC)

/* A session, by its ids (owned). */
typedef struct mx_key {
	char *app, *user, *sid;
	int force;            /* queue: extract whatever is unread */
	uint32_t failures;    /* backoff */
	int64_t next_us;      /* backoff: not before */
} mx_key;

typedef struct mx_keys {
	mx_key *v;
	size_t n, cap;
} mx_keys;

struct memory_work {
	service_thread th;         /* the worker; th.lock guards everything below but the
				    * clients, th.wake is signalled on queue pushes */
	pthread_cond_t landed;     /* a flight ended */
	extract_openai **clients;  /* per m->set.apps[i]; NULL unless type openai */
	mx_keys queue, flights, backoff;
	int running;               /* the worker is handling a queued session */
	_Atomic uint64_t batches, failures, added, updated, deleted, expired;
};

/* ---- keys ------------------------------------------------------------------ */

static void key_free(mx_key *k)
{
	free(k->app);
	free(k->user);
	free(k->sid);
}

static void keys_clear(mx_keys *ks)
{
	for (size_t i = 0; i < ks->n; i++)
		key_free(&ks->v[i]);
	free(ks->v);
	memset(ks, 0, sizeof(*ks));
}

static ssize_t keys_find(const mx_keys *ks, const memd_scope *sc)
{
	for (size_t i = 0; i < ks->n; i++)
		if (strcmp(ks->v[i].sid, sc->session) == 0 && strcmp(ks->v[i].user, sc->user) == 0 &&
		    strcmp(ks->v[i].app, sc->app) == 0)
			return (ssize_t)i;
	return -1;
}

/* Append a key for sc to ks: its index, or -1 (ENOMEM). */
static ssize_t keys_add(mx_keys *ks, const memd_scope *sc)
{
	mx_key k = { 0 };
	if (ks->n == ks->cap) {
		size_t cap = ks->cap ? 2 * ks->cap : 8;
		mx_key *grown = realloc(ks->v, cap * sizeof(*grown));
		if (!grown)
			return -1;
		ks->v = grown;
		ks->cap = cap;
	}
	k.app = strdup(sc->app);
	k.user = strdup(sc->user);
	k.sid = strdup(sc->session);
	if (!k.app || !k.user || !k.sid) {
		key_free(&k);
		return -1;
	}
	ks->v[ks->n] = k;
	return (ssize_t)ks->n++;
}

static void keys_remove(mx_keys *ks, size_t i)
{
	key_free(&ks->v[i]);
	memmove(&ks->v[i], &ks->v[i + 1], (ks->n - i - 1) * sizeof(*ks->v));
	ks->n--;
}

/* ---- settings and clients ---------------------------------------------------- */

static size_t app_index(const memd *m, const char *app)
{
	const settings_app *sa = settings_app_for(&m->set, app);
	return (size_t)(sa - m->set.apps);
}

static const settings_extract *extract_settings(const memd *m, const char *app)
{
	return &settings_app_for(&m->set, app)->extract;
}

/* ---- single flight ------------------------------------------------------------- */

/* Take the session of sc: 1 when taken, 0 when another run has it and
 * wait is 0, MEMD_ENOMEM. With wait, waits for the run in progress. */
static int32_t flight_begin(memory_work *w, const memd_scope *sc, int wait)
{
	int32_t r = 1;
	pthread_mutex_lock(&w->th.lock);
	while (keys_find(&w->flights, sc) >= 0) {
		if (!wait) {
			r = 0;
			break;
		}
		pthread_cond_wait(&w->landed, &w->th.lock);
	}
	if (r == 1 && keys_add(&w->flights, sc) < 0)
		r = MEMD_ENOMEM;
	pthread_mutex_unlock(&w->th.lock);
	return r;
}

static void flight_end(memory_work *w, const memd_scope *sc)
{
	ssize_t i;
	pthread_mutex_lock(&w->th.lock);
	if ((i = keys_find(&w->flights, sc)) >= 0)
		keys_remove(&w->flights, (size_t)i);
	pthread_cond_broadcast(&w->landed);
	pthread_mutex_unlock(&w->th.lock);
}

/* ---- backoff ------------------------------------------------------------------ */

/* 1 when background runs should leave the session of sc alone at now. */
static int backing_off(memory_work *w, const memd_scope *sc, int64_t now)
{
	ssize_t i;
	int r;
	pthread_mutex_lock(&w->th.lock);
	i = keys_find(&w->backoff, sc);
	r = i >= 0 && now < w->backoff.v[i].next_us;
	pthread_mutex_unlock(&w->th.lock);
	return r;
}

/* Record the outcome of a run of sc at now: a success forgets the
 * session's failures, a failure counts one and sets when to try again. */
static void backoff_note(memd *m, const memd_scope *sc, int ok, int64_t now)
{
	memory_work *w = m->memwork;
	ssize_t i;
	pthread_mutex_lock(&w->th.lock);
	i = keys_find(&w->backoff, sc);
	if (ok) {
		if (i >= 0)
			keys_remove(&w->backoff, (size_t)i);
	} else {
		if (i < 0 && w->backoff.n >= BACKOFF_MAX_ENTRIES)
			keys_remove(&w->backoff, 0);
		if (i < 0)
			i = keys_add(&w->backoff, sc);
		if (i >= 0) {
			mx_key *k = &w->backoff.v[i];
			uint32_t shift = k->failures < BACKOFF_SHIFT_MAX ? k->failures : BACKOFF_SHIFT_MAX;
			int64_t wait = BACKOFF_BASE_US << shift;
			k->failures++;
			k->next_us = now + (wait < BACKOFF_MAX_US ? wait : BACKOFF_MAX_US);
		}
	}
	pthread_mutex_unlock(&w->th.lock);
}

/* ---- reads ---------------------------------------------------------------------- */

typedef struct session_seqs {
	int64_t memory_seq, last_seq, updated_us;
	int got;
} session_seqs;

static int32_t got_session(void *ud, const memd_session *s)
{
	session_seqs *ss = ud;
	ss->last_seq = s->last_seq;
	ss->updated_us = s->updated_us;
	ss->memory_seq = s->memory_seq; /* the wrapper zero-extends older records */
	ss->got = 1;
	return 0;
}

static int32_t read_session(memd *m, const memd_call *call, const memd_scope *sc,
			    session_seqs *ret, memd_error *err)
{
	memd_session_sink sink = { sizeof(sink), ret, got_session };
	int32_t r;
	memset(ret, 0, sizeof(*ret));
	if ((r = store_session_get(m->sessions, call, sc, &sink, err)) < 0)
		return r;
	if (!ret->got)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "the store delivered no session");
	return 0;
}

/* A batch's events, copied. */
typedef struct batch_events {
	extract_event *v;
	size_t n, cap;
} batch_events;

static void batch_clear(batch_events *b)
{
	for (size_t i = 0; i < b->n; i++) {
		free((char *)b->v[i].role);
		free((char *)b->v[i].author);
		free((char *)b->v[i].text);
	}
	free(b->v);
	memset(b, 0, sizeof(*b));
}

static int32_t got_event(void *ud, const memd_event *e)
{
	batch_events *b = ud;
	extract_event *x;
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 16;
		extract_event *grown = realloc(b->v, cap * sizeof(*grown));
		if (!grown)
			return MEMD_ENOMEM;
		b->v = grown;
		b->cap = cap;
	}
	x = &b->v[b->n];
	x->seq = e->seq;
	x->role = strdup(e->role ? e->role : "");
	x->author = e->author ? strdup(e->author) : NULL;
	x->text = strdup(e->text ? e->text : "");
	if (!x->role || (e->author && !x->author) || !x->text) {
		free((char *)x->role);
		free((char *)x->author);
		free((char *)x->text);
		return MEMD_ENOMEM;
	}
	b->n++;
	return 0;
}

/* ---- the nearest memories -------------------------------------------------------- */

typedef struct near_ctx {
	memd *m;
	const memd_call *call;
	const memd_scope *sc;
	int64_t now_us;
} near_ctx;

/* The memories a list delivers, kept as extract_memory. */
typedef struct listed {
	extract_memories *ms;
	uint32_t k;             /* keep at most; 0 = all */
	int32_t rc;
} listed;

static int32_t got_memory(void *ud, const memd_memory *mm)
{
	listed *l = ud;
	for (size_t i = 0; i < l->ms->n; i++)
		if (strcmp(l->ms->v[i].id, mm->id) == 0)
			return 0;
	if (l->k && l->ms->n >= l->k)
		return 0;
	if ((l->rc = extract_memories_add(l->ms, mm->id, mm->text, mm->kind, mm->topics_json,
					  mm->version)) < 0)
		return l->rc;
	return 0;
}

/* Add the memory id of the user to ret (as the store has it now; one
 * that is gone is skipped). */
static int32_t add_by_id(near_ctx *nc, const memd_scope *us, const char *id,
			 extract_memories *ret, uint32_t k, memd_error *err)
{
	listed l = { ret, k, 0 };
	memd_memory_sink sink = { sizeof(sink), &l, got_memory };
	memd_error e = { 0 };
	int32_t r = store_memory_get(nc->m->sessions, nc->call, us, id, nc->now_us, &sink, &e);

	if (r == MEMD_ENOTFOUND)
		return 0; /* deleted since it was indexed */
	if (r < 0) {
		memcpy(err, &e, sizeof(*err));
		return l.rc == MEMD_ENOMEM ? service_oom(err) : r;
	}
	return 0;
}

/* The memories the index finds nearest text (the keyword or vector
 * index, as index.default_mode says), each read from the store (its
 * version now). MEMD_EUNAVAIL and the index's other errors. */
static int32_t nearest_indexed(near_ctx *nc, const memd_scope *us, const char *text, uint32_t k,
			       extract_memories *ret, memd_error *err)
{
	index_query q = { .query = text, .k = k, .sources = INDEX_SOURCE_MEMORIES,
			  .now_us = nc->now_us };
	void *results = NULL;
	json_t *hit;
	size_t i;
	int32_t r;

	if ((r = index_search_results(nc->m->index, nc->call, us->app, us->user, &q, &results,
				      err)) < 0)
		return r;
	json_array_foreach((json_t *)results, i, hit) {
		const char *id = json_string_value(json_object_get(hit, "memory_id"));
		if (ret->n >= k)
			break;
		if (id && (r = add_by_id(nc, us, id, ret, k, err)) < 0)
			break;
	}
	json_decref(results);
	return r < 0 ? r : 0;
}

/* The memories sharing most words with text among the user's newest
 * NEAREST_SCAN (when the index cannot answer). */
static int32_t nearest_scanned(near_ctx *nc, const memd_scope *us, const char *text, uint32_t k,
			       extract_memories *ret, memd_error *err)
{
	memd_memory_query q = { .struct_size = sizeof(q), .limit = NEAREST_SCAN,
				.now_us = nc->now_us };
	extract_memories all = { 0 };
	listed la = { &all, 0, 0 };
	memd_memory_sink asink = { sizeof(asink), &la, got_memory };
	double *score = NULL;
	int32_t r;

	if ((r = store_memory_list(nc->m->sessions, nc->call, us, &q, &asink, err)) < 0)
		goto done;
	if (!(score = calloc(all.n + 1, sizeof(*score)))) {
		r = service_oom(err);
		goto done;
	}
	for (size_t i = 0; i < all.n; i++)
		score[i] = extract_similarity(text, all.v[i].text);
	while (ret->n < k) {
		size_t best = all.n;
		for (size_t i = 0; i < all.n; i++)
			if (score[i] > 0 && (best == all.n || score[i] > score[best]))
				best = i;
		if (best == all.n)
			break;
		score[best] = 0;
		if ((r = add_by_id(nc, us, all.v[best].id, ret, k, err)) < 0)
			goto done;
	}
done:
	if (la.rc == MEMD_ENOMEM)
		r = service_oom(err);
	free(score);
	extract_memories_clear(&all);
	return r;
}

/* The memories of the user nearest (text, topics): those with one of the
 * topics first, then what the index finds nearest text (or, when the
 * index cannot answer, the ones sharing most words with text among the
 * newest NEAREST_SCAN). */
static int32_t nearest(void *ud, const char *text, const char *const *topics, size_t n_topics,
		       uint32_t k, extract_memories *ret, memd_error *err)
{
	near_ctx *nc = ud;
	memd_scope us = { .struct_size = sizeof(us), .app = nc->sc->app,
			  .user = nc->sc->user, .session = NULL };
	listed l = { ret, k, 0 };
	memd_memory_sink sink = { sizeof(sink), &l, got_memory };
	memd_error e = { 0 };
	int32_t r = 0;

	for (size_t i = 0; i < n_topics && ret->n < k && r >= 0; i++) {
		memd_memory_query q = { .struct_size = sizeof(q), .limit = k, .topic = topics[i],
					.now_us = nc->now_us };
		r = store_memory_list(nc->m->sessions, nc->call, &us, &q, &sink, err);
	}
	if (r >= 0 && ret->n < k && nearest_indexed(nc, &us, text, k, ret, &e) < 0) {
		if (e.code == MEMD_ECANCELED || e.code == MEMD_ENOMEM) {
			memcpy(err, &e, sizeof(*err));
			r = e.code;
		} else {
			r = nearest_scanned(nc, &us, text, k, ret, err);
		}
	}
	if (r < 0) {
		if (l.rc == MEMD_ENOMEM)
			r = service_oom(err);
		extract_memories_clear(ret);
	}
	return r;
}

/* ---- one batch ------------------------------------------------------------------ */

/* What a run did (memd_memory_extract's answer, the pass's counts). */
typedef struct run_out {
	int64_t from_seq, to_seq;
	uint32_t added, updated, deleted, unchanged, batches;
	json_t *memories;           /* the memories changed (NULL: not collected) */
} run_out;

/* The memories a commit delivers, as JSON (memories NULL: not kept). */
typedef struct committed {
	json_t *memories;
} committed;

static int32_t got_committed(void *ud, const memd_memory *mm)
{
	committed *c = ud;
	json_t *j;
	if (!c->memories)
		return 0;
	if (!(j = mj_memory(mm)) || json_array_append_new(c->memories, j) < 0)
		return MEMD_ENOMEM;
	return 0;
}

static char *strv_json(char *const *v, size_t n)
{
	json_t *a = json_array();
	char *s;
	for (size_t i = 0; a && i < n; i++)
		if (json_array_append_new(a, json_string(v[i])) < 0) {
			json_decref(a);
			a = NULL;
		}
	s = a ? json_dumps(a, JSON_COMPACT) : NULL;
	json_decref(a);
	return s;
}

/* The writes of res, all owned by the arrays given. */
typedef struct writes {
	memd_memory *mem;
	memd_memory_write *w;
	const memd_memory_write **wp;
	char **own;               /* strings to free */
	size_t n, n_own;
	char (*ids)[UUID_TEXT_LEN + 1];
} writes;

static void writes_clear(writes *ws)
{
	for (size_t i = 0; i < ws->n_own; i++)
		free(ws->own[i]);
	free(ws->own);
	free(ws->mem);
	free(ws->w);
	free(ws->wp);
	free(ws->ids);
	memset(ws, 0, sizeof(*ws));
}

static char *own(writes *ws, char *s)
{
	if (s)
		ws->own[ws->n_own++] = s;
	return s;
}

static int32_t build_writes(memd *m, const memd_scope *sc, const settings_extract *sx,
			    const extract_result *res, int64_t now, writes *ws, memd_error *err)
{
	size_t n = res->n;
	ws->mem = calloc(n + 1, sizeof(*ws->mem));
	ws->w = calloc(n + 1, sizeof(*ws->w));
	ws->wp = calloc(n + 1, sizeof(*ws->wp));
	ws->own = calloc(4 * n + 1, sizeof(*ws->own));
	ws->ids = calloc(n + 1, sizeof(*ws->ids));
	if (!ws->mem || !ws->w || !ws->wp || !ws->own || !ws->ids)
		return service_oom(err);
	for (size_t i = 0; i < n; i++) {
		const extract_decision *d = &res->v[i];
		memd_memory *mm = &ws->mem[ws->n];
		memd_memory_write *w = &ws->w[ws->n];

		if (d->op == EXTRACT_NONE)
			continue;
		mm->struct_size = sizeof(*mm);
		mm->app = sc->app;
		mm->user = sc->user;
		w->struct_size = sizeof(*w);
		w->memory = mm;
		w->actor = SERVICE_ACTOR_EXTRACTOR;
		if (d->op == EXTRACT_DELETE) {
			w->op = MEMD_MEM_DELETE;
			w->expected_version = d->memory_version;
			mm->id = d->memory_id;
			w->reason = "extracted: forgotten";
		} else {
			json_t *src = json_object();
			json_t *seqs = json_array();
			for (size_t j = 0; seqs && j < d->n_seqs; j++)
				json_array_append_new(seqs, json_integer(d->seqs[j]));
			if (src && seqs) {
				json_object_set_new(src, "session_id", json_string(sc->session));
				json_object_set_new(src, "seqs", seqs);
				seqs = NULL;
			}
			json_decref(seqs);
			if (d->op == EXTRACT_ADD) {
				if (uuid_v7(ws->ids[i]) < 0) {
					json_decref(src);
					return memd_error_set(err, MEMD_EIO, 0, "no random bytes for an id");
				}
				w->op = MEMD_MEM_ADD;
				mm->id = ws->ids[i];
				w->reason = "extracted";
			} else {
				w->op = MEMD_MEM_UPDATE;
				w->expected_version = d->memory_version;
				mm->id = d->memory_id;
				w->reason = "extracted: changed";
			}
			mm->text = d->text;
			mm->kind = d->kind;
			mm->topics_json = own(ws, strv_json(d->topics, d->n_topics));
			mm->entities_json = own(ws, strv_json(d->entities, d->n_entities));
			mm->source_session = sc->session;
			mm->source_json = own(ws, src ? json_dumps(src, JSON_COMPACT) : NULL);
			json_decref(src);
			mm->updated_us = now;
			mm->created_us = now;
			mm->expires_us = sx->default_ttl_days ? now + sx->default_ttl_days * US_PER_DAY : 0;
			hostsvc_count_tokens(m->svc, mm->text, strlen(mm->text), &mm->tokens);
			if (!mm->topics_json || !mm->entities_json || !mm->source_json)
				return service_oom(err);
		}
		ws->wp[ws->n] = w;
		ws->n++;
	}
	return 0;
}

/* Run the app's extractor over batch b of sc. */
static int32_t run_extractor(memd *m, const memd_call *call, const memd_scope *sc,
			     const settings_extract *sx, const batch_events *b, int64_t now,
			     extract_result *ret, memd_error *err)
{
	near_ctx nc = { m, call, sc, now };
	extract_nearest nn = { nearest, &nc };
	extract_batch xb = { b->v, b->n, (uint32_t)sx->neighbours };
	extract_openai *client = m->memwork->clients[app_index(m, sc->app)];

	if (sx->type == SETTINGS_EXTRACT_OPENAI) {
		if (!client)
			return memd_error_set(err, MEMD_EINTERNAL, 0, "the openai extractor did not start");
		return extract_openai_run(client, call, &xb, &nn, ret, err);
	}
	return extract_builtin_run(&xb, &nn, ret, err);
}

/* Extract the next batch of sc, if any: *ret_done 1 when nothing was
 * left to read. */
static int32_t one_batch(memd *m, const memd_call *call, const memd_scope *sc,
			 const settings_extract *sx, run_out *out, int *ret_done, memd_error *err)
{
	for (int attempt = 0;; attempt++) {
		session_seqs ss;
		batch_events b = { 0 };
		extract_result res = { 0 };
		writes ws = { 0 };
		committed cm = { out->memories ? json_array() : NULL };
		memd_memory_sink sink = { sizeof(sink), &cm, got_committed };
		memd_memory_commit c = { .struct_size = sizeof(c) };
		memd_event_query q = { .struct_size = sizeof(q), .flags = MEMD_EVQ_NO_SUMMARY };
		memd_event_sink es = { sizeof(es), &b, got_event };
		int64_t now = service_clock_us(m), to;
		int32_t r;

		if ((r = read_session(m, call, sc, &ss, err)) < 0) {
			json_decref(cm.memories);
			return r;
		}
		if (!out->batches)
			out->from_seq = ss.memory_seq;
		out->to_seq = ss.memory_seq;
		if (ss.memory_seq >= ss.last_seq) {
			json_decref(cm.memories);
			*ret_done = 1;
			return 0;
		}
		q.after_seq = ss.memory_seq;
		q.before_seq = ss.last_seq + 1;
		q.limit = (uint32_t)sx->batch_events;
		if ((r = store_events_load(m->sessions, call, sc, &q, &es, err)) < 0) {
			batch_clear(&b);
			json_decref(cm.memories);
			return r == MEMD_ENOMEM ? service_oom(err) : r;
		}
		to = b.n == q.limit ? b.v[b.n - 1].seq : ss.last_seq;
		r = run_extractor(m, call, sc, sx, &b, now, &res, err);
		if (r >= 0)
			r = build_writes(m, sc, sx, &res, now, &ws, err);
		if (r >= 0) {
			c.n_writes = (uint32_t)ws.n;
			c.writes = ws.wp;
			c.cursor_session = sc->session;
			c.expected_cursor_seq = ss.memory_seq;
			c.new_cursor_seq = to;
			c.now_us = now;
			r = store_memory_commit(m->sessions, call, sc, &c, &sink, err);
		}
		if (r >= 0) {
			for (size_t i = 0; i < res.n; i++)
				switch (res.v[i].op) {
				case EXTRACT_ADD: out->added++; break;
				case EXTRACT_UPDATE: out->updated++; break;
				case EXTRACT_DELETE: out->deleted++; break;
				default: out->unchanged++;
				}
			atomic_fetch_add(&m->memwork->batches, 1);
			for (size_t i = 0; cm.memories && i < json_array_size(cm.memories); i++)
				json_array_append(out->memories, json_array_get(cm.memories, i));
			out->batches++;
			out->to_seq = to;
			if (ws.n)
				index_notify(m->index);
		}
		json_decref(cm.memories);
		writes_clear(&ws);
		extract_result_clear(&res);
		batch_clear(&b);
		if (r >= 0) {
			*ret_done = to >= ss.last_seq;
			return 0;
		}
		/* Lost to another process (the batch is theirs now) or a memory
		 * changed under a decision: read again and decide again. */
		if (r != MEMD_ECONFLICT && r != MEMD_ENOTFOUND)
			return r;
		if (attempt + 1 >= EXTRACT_COMMIT_TRIES) {
			err->flags |= MEMD_ERROR_RETRYABLE;
			return r;
		}
	}
}

/* Extract every unread batch of sc (memd_memory_extract and background
 * runs; the caller holds the flight). */
static int32_t run_session(memd *m, const memd_call *call, const memd_scope *sc, run_out *out,
			   memd_error *err)
{
	const settings_extract *sx = extract_settings(m, sc->app);
	int done = 0;
	int32_t r = 0;

	while (!done && (r = one_batch(m, call, sc, sx, out, &done, err)) >= 0)
		;
	return r;
}

/* ---- memd_memory_extract ------------------------------------------------------- */

int32_t memd_memory_extract(memd *m, const char *app, const char *user, const char *sid,
			    char **ret_json, memd_error *err)
{
	memd_scope sc;
	memd_call call = service_call_for_request(m);
	run_out out = { 0 };
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0)
		return r;
	if (extract_settings(m, app)->type == SETTINGS_EXTRACT_NONE)
		return memd_error_set(err, MEMD_ENOTSUP, 0,
				      "memory extraction is off for app '%.64s' (memory.extract.type: "
				      "none)", app);
	if (!(out.memories = json_array()))
		return service_oom(err);
	if ((r = flight_begin(m->memwork, &sc, 1)) < 0) {
		json_decref(out.memories);
		return service_oom(err);
	}
	r = run_session(m, &call, &sc, &out, err);
	flight_end(m->memwork, &sc);
	/* An unknown session is the caller's mistake, not a failed run. */
	if (r != MEMD_ENOTFOUND)
		backoff_note(m, &sc, r >= 0, service_clock_us(m));
	if (r < 0) {
		if (r != MEMD_ENOTFOUND)
			atomic_fetch_add(&m->memwork->failures, 1);
		json_decref(out.memories);
		return r;
	}
	atomic_fetch_add(&m->memwork->added, out.added);
	atomic_fetch_add(&m->memwork->updated, out.updated);
	atomic_fetch_add(&m->memwork->deleted, out.deleted);
	return service_finish(json_pack("{s:s,s:I,s:I,s:i,s:i,s:i,s:i,s:o}", "session_id", sid,
					"from_seq", (json_int_t)out.from_seq,
					"to_seq", (json_int_t)out.to_seq, "added", (int)out.added,
					"updated", (int)out.updated, "deleted", (int)out.deleted,
					"unchanged", (int)out.unchanged, "memories", out.memories),
			      ret_json, err);
}

/* ---- background runs ------------------------------------------------------------ */

/* A call of the worker: no deadline (each network step has its own
 * timeout), given up once memd closes. */
static memd_call bg_call(memory_work *w)
{
	memd_call c = { .struct_size = sizeof(c), .cancel = &w->th.cancel };
	return c;
}

/* One background run of sc: 1 extracted, 0 skipped (in flight, backing
 * off, nothing to do), < 0 failed (logged, backoff noted). */
static int32_t bg_run(memd *m, const memd_scope *sc, memd_error *err)
{
	memory_work *w = m->memwork;
	memd_call call = bg_call(w);
	run_out out = { 0 };
	int32_t r;

	if ((r = flight_begin(w, sc, 0)) <= 0)
		return r < 0 ? service_oom(err) : 0;
	r = run_session(m, &call, sc, &out, err);
	flight_end(w, sc);
	if (r == MEMD_ECANCELED || (r == MEMD_ENOTFOUND && !out.batches))
		return 0; /* closing; the session is gone */
	backoff_note(m, sc, r >= 0, service_clock_us(m));
	if (r < 0) {
		atomic_fetch_add(&w->failures, 1);
		hostsvc_log(m->svc, MEMD_LOG_WARN, "memd",
			    "memory extraction of %s/%s/%s failed (tried again later): %s", sc->app,
			    sc->user, sc->session, err->msg);
		return r;
	}
	atomic_fetch_add(&w->added, out.added);
	atomic_fetch_add(&w->updated, out.updated);
	atomic_fetch_add(&w->deleted, out.deleted);
	return out.batches > 0;
}

/* A queued session: extract it when its trigger holds. */
static void run_queued(memd *m, const mx_key *k)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = k->app, .user = k->user,
			  .session = k->sid };
	const settings_extract *sx = extract_settings(m, k->app);
	memd_call call = bg_call(m->memwork);
	memd_error err = { 0 };
	session_seqs ss;

	if (sx->type == SETTINGS_EXTRACT_NONE || backing_off(m->memwork, &sc, service_clock_us(m)))
		return;
	if (!k->force) {
		if (!sx->every_events || read_session(m, &call, &sc, &ss, &err) < 0 ||
		    ss.last_seq - ss.memory_seq < sx->every_events)
			return;
	}
	bg_run(m, &sc, &err);
}

static void push(memd *m, const memd_scope *sc, int force)
{
	memory_work *w = m->memwork;
	ssize_t i;

	if (!w || !w->th.started)
		return;
	pthread_mutex_lock(&w->th.lock);
	if ((i = keys_find(&w->queue, sc)) >= 0)
		w->queue.v[i].force |= force;
	else if (w->queue.n < QUEUE_MAX && (i = keys_add(&w->queue, sc)) >= 0)
		w->queue.v[i].force = force;
	pthread_cond_signal(&w->th.wake);
	pthread_mutex_unlock(&w->th.lock);
}

void service_memory_after_append(memd *m, const memd_scope *sc, int64_t first_seq,
				 int64_t last_seq)
{
	const settings_extract *sx = extract_settings(m, sc->app);
	int64_t n = sx->every_events;

	/* Only an append whose seqs pass a multiple of every_events: the
	 * others take no lock and add nothing to the queue. */
	if (sx->type != SETTINGS_EXTRACT_NONE && n > 0 && first_seq > 0 &&
	    last_seq / n > (first_seq - 1) / n)
		push(m, sc, 0);
}

void service_memory_on_finalize(memd *m, const memd_scope *sc)
{
	const settings_extract *sx = extract_settings(m, sc->app);
	if (sx->type != SETTINGS_EXTRACT_NONE && sx->on_finalize)
		push(m, sc, 1);
}

/* ---- a pass -------------------------------------------------------------------------- */

typedef struct pass_counts {
	uint32_t extracted, failed, expired;
} pass_counts;

typedef struct pending_page {
	mx_keys keys;
	int64_t *updated;   /* per key */
	size_t cap;
	int32_t rc;
} pending_page;

static int32_t got_pending(void *ud, const memd_session *s)
{
	pending_page *p = ud;
	memd_scope sc = { .struct_size = sizeof(sc), .app = s->app, .user = s->user,
			  .session = s->id };
	ssize_t i;
	if (p->keys.n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : SWEEP_PAGE;
		int64_t *grown = realloc(p->updated, cap * sizeof(*grown));
		if (!grown)
			return p->rc = MEMD_ENOMEM;
		p->updated = grown;
		p->cap = cap;
	}
	if ((i = keys_add(&p->keys, &sc)) < 0)
		return p->rc = MEMD_ENOMEM;
	p->updated[i] = s->updated_us;
	return 0;
}

/* The smallest idle_minutes of the apps that extract when idle; 0 = none. */
static int64_t min_idle_minutes(const memd *m)
{
	int64_t best = 0;
	for (size_t i = 0; i < m->set.n_apps; i++) {
		const settings_extract *sx = &m->set.apps[i].extract;
		if (sx->type != SETTINGS_EXTRACT_NONE && sx->idle_minutes > 0 &&
		    (!best || sx->idle_minutes < best))
			best = sx->idle_minutes;
	}
	return best;
}

static int32_t extract_idle(memd *m, int64_t now, pass_counts *pc, memd_error *err)
{
	int64_t idle = min_idle_minutes(m);
	memd_call call = bg_call(m->memwork);
	memd_pending_query q = { .struct_size = sizeof(q), .limit = SWEEP_PAGE };
	char *after_app = NULL, *after_user = NULL, *after_id = NULL;
	uint32_t scanned = 0;
	int32_t r = 0;

	if (!idle)
		return 0;
	q.updated_before_us = now - idle * US_PER_MINUTE;
	while (scanned < SWEEP_SCAN_MAX && pc->extracted + pc->failed < SWEEP_SESSIONS_MAX) {
		pending_page p = { 0 };
		memd_session_sink sink = { sizeof(sink), &p, got_pending };
		if ((r = store_session_list_pending(m->sessions, &call, &q, &sink, err)) < 0) {
			if (p.rc == MEMD_ENOMEM)
				r = service_oom(err);
			keys_clear(&p.keys);
			free(p.updated);
			break;
		}
		scanned += (uint32_t)p.keys.n;
		for (size_t i = 0; i < p.keys.n && pc->extracted + pc->failed < SWEEP_SESSIONS_MAX; i++) {
			const mx_key *k = &p.keys.v[i];
			memd_scope sc = { .struct_size = sizeof(sc), .app = k->app,
					  .user = k->user, .session = k->sid };
			const settings_extract *sx = extract_settings(m, k->app);
			memd_error e = { 0 };
			int32_t one;
			if (sx->type == SETTINGS_EXTRACT_NONE || !sx->idle_minutes ||
			    p.updated[i] >= now - sx->idle_minutes * US_PER_MINUTE ||
			    backing_off(m->memwork, &sc, now))
				continue;
			one = bg_run(m, &sc, &e);
			if (one > 0)
				pc->extracted++;
			else if (one < 0)
				pc->failed++;
		}
		if (p.keys.n) {
			const mx_key *last = &p.keys.v[p.keys.n - 1];
			free(after_app);
			free(after_user);
			free(after_id);
			after_app = strdup(last->app);
			after_user = strdup(last->user);
			after_id = strdup(last->sid);
			q.after_updated_us = p.updated[p.keys.n - 1];
			q.after_app = after_app;
			q.after_user = after_user;
			q.after_id = after_id;
		}
		{
			size_t got = p.keys.n;
			keys_clear(&p.keys);
			free(p.updated);
			if (got < SWEEP_PAGE)
				break;
		}
		if (!after_app || !after_user || !after_id) {
			r = service_oom(err);
			break;
		}
	}
	free(after_app);
	free(after_user);
	free(after_id);
	return r;
}

static int32_t pass(memd *m, pass_counts *pc, memd_error *err)
{
	memory_work *w = m->memwork;
	int64_t now = service_clock_us(m);
	memd_error e = { 0 };
	int32_t r1, r2;

	pthread_mutex_lock(&w->th.pass);
	r1 = service_memories_expire(m, &pc->expired, err);
	if (r1 == MEMD_ENOTSUP)
		r1 = 0;
	r2 = extract_idle(m, now, pc, &e);
	pthread_mutex_unlock(&w->th.pass);
	atomic_fetch_add(&w->expired, pc->expired);
	if (r1 < 0)
		return r1;
	if (r2 < 0 && r2 != MEMD_ENOTSUP) {
		memcpy(err, &e, sizeof(*err));
		return r2;
	}
	return 0;
}

int32_t memd_memories_sweep(memd *m, char **ret_json, memd_error *err)
{
	pass_counts pc = { 0 };
	int32_t r = pass(m, &pc, err);
	if (r < 0)
		return r;
	return service_finish(json_pack("{s:i,s:i,s:i}", "sessions_extracted", (int)pc.extracted,
					"extract_failed", (int)pc.failed, "memories_expired",
					(int)pc.expired),
			      ret_json, err);
}

/* ---- the worker thread ------------------------------------------------------------- */

static void *work_main(void *arg)
{
	memd *m = arg;
	memory_work *w = m->memwork;
	struct timespec at;
	int64_t interval = m->set.memory_sweep_interval_s;

	pthread_mutex_lock(&w->th.lock);
	clock_gettime(CLOCK_MONOTONIC, &at);
	at.tv_sec += (time_t)interval;
	while (!w->th.stopping) {
		struct timespec now;
		if (w->queue.n) {
			mx_key k = w->queue.v[0];
			memmove(&w->queue.v[0], &w->queue.v[1], (w->queue.n - 1) * sizeof(k));
			w->queue.n--;
			w->running = 1;
			pthread_mutex_unlock(&w->th.lock);
			run_queued(m, &k);
			key_free(&k);
			pthread_mutex_lock(&w->th.lock);
			w->running = 0;
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (interval > 0 && (now.tv_sec > at.tv_sec ||
				     (now.tv_sec == at.tv_sec && now.tv_nsec >= at.tv_nsec))) {
			pass_counts pc = { 0 };
			memd_error err = { 0 };
			pthread_mutex_unlock(&w->th.lock);
			if (pass(m, &pc, &err) < 0 && err.code != MEMD_ECANCELED &&
			    err.code != MEMD_ENOTSUP)
				hostsvc_log(m->svc, MEMD_LOG_WARN, "memd", "memory worker: %s", err.msg);
			pthread_mutex_lock(&w->th.lock);
			clock_gettime(CLOCK_MONOTONIC, &at);
			at.tv_sec += (time_t)interval;
			continue;
		}
		if (interval > 0)
			pthread_cond_timedwait(&w->th.wake, &w->th.lock, &at);
		else
			pthread_cond_wait(&w->th.wake, &w->th.lock);
	}
	pthread_mutex_unlock(&w->th.lock);
	return NULL;
}

/* Nonzero if some app extracts memories. */
static int any_extraction(const memd *m)
{
	for (size_t i = 0; i < m->set.n_apps; i++)
		if (m->set.apps[i].extract.type != SETTINGS_EXTRACT_NONE)
			return 1;
	return 0;
}

int32_t service_memory_start(memd *m, memd_error *err)
{
	memory_work *w = calloc(1, sizeof(*w));
	int32_t r;

	if (!w)
		return service_oom(err);
	service_thread_init(&w->th);
	pthread_cond_init(&w->landed, NULL);
	m->memwork = w;
	if (!(w->clients = calloc(m->set.n_apps + 1, sizeof(*w->clients))))
		return service_oom(err);
	for (size_t i = 0; i < m->set.n_apps; i++) {
		const settings_extract *sx = &m->set.apps[i].extract;
		const char *key = sx->api_key ? sx->api_key : getenv("OPENAI_API_KEY");
		extract_openai_config cfg = { sx->url, sx->model, key, sx->prompt,
					      sx->consolidate_prompt, sx->timeout_ms, sx->retries };
		if (sx->type != SETTINGS_EXTRACT_OPENAI)
			continue;
		if ((r = extract_openai_new(&cfg, &w->clients[i], err)) < 0)
			return r;
		hostsvc_log(m->svc, MEMD_LOG_INFO, "memd",
			    "app %s: memories extracted by model %s at %s", m->set.apps[i].name,
			    sx->model, sx->url);
	}
	/* Only a store with memories (ABI 1.3) gets a worker. */
	if (any_extraction(m) && store_minor(m->sessions) >= 3) {
		if ((r = service_thread_start(&w->th, work_main, m, "memory worker", err)) < 0)
			return r;
	}
	return 0;
}

void service_memory_stop(memd *m)
{
	memory_work *w = m->memwork;

	if (!w)
		return;
	service_thread_stop(&w->th);
}

void service_memory_free(memd *m)
{
	memory_work *w = m->memwork;

	if (!w)
		return;
	service_memory_stop(m);
	for (size_t i = 0; w->clients && i < m->set.n_apps; i++)
		extract_openai_free(w->clients[i]);
	free(w->clients);
	keys_clear(&w->queue);
	keys_clear(&w->flights);
	keys_clear(&w->backoff);
	service_thread_destroy(&w->th);
	pthread_cond_destroy(&w->landed);
	free(w);
	m->memwork = NULL;
}

uint32_t service_memory_queued(memd *m)
{
	memory_work *w = m->memwork;
	uint32_t n;
	if (!w)
		return 0;
	pthread_mutex_lock(&w->th.lock);
	n = (uint32_t)(w->queue.n + w->flights.n) + (uint32_t)w->running;
	pthread_mutex_unlock(&w->th.lock);
	return n;
}

void service_memory_metrics(memd *m, prom_buf *b)
{
	memory_work *w = m->memwork;
	if (!w)
		return;
	prom_printf(b,
		    "# HELP memd_memory_extract_batches_total Batches of events extracted and "
		    "committed.\n"
		    "# TYPE memd_memory_extract_batches_total counter\n"
		    "memd_memory_extract_batches_total %llu\n"
		    "# HELP memd_memory_extract_failures_total Failed extraction runs (retried later).\n"
		    "# TYPE memd_memory_extract_failures_total counter\n"
		    "memd_memory_extract_failures_total %llu\n"
		    "# HELP memd_memories_extracted_total Memories changed by extraction, by op.\n"
		    "# TYPE memd_memories_extracted_total counter\n"
		    "memd_memories_extracted_total{op=\"add\"} %llu\n"
		    "memd_memories_extracted_total{op=\"update\"} %llu\n"
		    "memd_memories_extracted_total{op=\"delete\"} %llu\n"
		    "# HELP memd_memories_expired_total Expired memories deleted by the sweep.\n"
		    "# TYPE memd_memories_expired_total counter\n"
		    "memd_memories_expired_total %llu\n",
		    (unsigned long long)atomic_load(&w->batches),
		    (unsigned long long)atomic_load(&w->failures),
		    (unsigned long long)atomic_load(&w->added),
		    (unsigned long long)atomic_load(&w->updated),
		    (unsigned long long)atomic_load(&w->deleted),
		    (unsigned long long)atomic_load(&w->expired));
}
