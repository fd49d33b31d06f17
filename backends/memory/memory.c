/* SPDX-License-Identifier: MIT */
/*
 * memory: the in-memory session store, for development and as the
 * reference implementation of the store contract in api/memd/store.h.
 * Nothing survives fini.
 *
 * One mutex serializes every op (MEMD_PLUGIN_THREADSAFE). Data layout:
 *  - sessions: hash (app, user, id) -> session; each user keeps its
 *    sessions in an array sorted newest first by (created_us, id) for
 *    keyset paging;
 *  - a session's events live in an array indexed by seq - 1 (seq is
 *    gapless), with a hash from event id to event and ascending lists of
 *    its summaries, its visible events and its visible summaries
 *    (mem_transcripts.c), so every events_load is a range walk over what
 *    it returns, hidden events or not;
 *  - state: one hash per scope (session, user, app), key -> JSON text;
 *  - the change feed: an array in position order; records of deleted
 *    sessions are marked dead and compacted away when they dominate;
 *  - lanes, their inboxes and the ended-session index: mem_lanes.c;
 *  - transcript operations, state history and the activity order:
 *    mem_transcripts.c;
 *  - long-term memories, their history and the expiry order:
 *    mem_memories.c;
 *  - A2A tasks: mem_tasks.c.
 *
 * Writes are transactions in two phases: every check and allocation
 * first (a failure there changes nothing visible), then a commit phase
 * that cannot fail.
 */
#include <memd/plugin.h>

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mem_checkpoints.h"
#include "mem_lanes.h"
#include "mem_memories.h"
#include "mem_store.h"
#include "mem_tasks.h"
#include "mem_transcripts.h"

/* ---- small helpers ---------------------------------------------------- */

char *mem_strdup(const char *s)
{
	size_t n;
	char *d;

	if (!s)
		return NULL;
	n = strlen(s);
	d = malloc(n + 1);
	if (d)
		memcpy(d, s, n + 1);
	return d;
}

int mem_dup_opt(const char *s, char **ret)
{
	*ret = NULL;
	if (!s)
		return 0;
	*ret = mem_strdup(s);
	return *ret ? 0 : -1;
}

int32_t mem_enomem(memd_error *err)
{
	return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
}

int mem_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	size_t nc;
	void *p;

	if (need <= *cap)
		return 0;
	nc = *cap ? *cap : MEM_MIN_CAP;
	while (nc < need) {
		if (nc > SIZE_MAX / 2 / elem)
			return -1;
		nc *= 2;
	}
	p = realloc(*arr, nc * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = nc;
	return 0;
}

size_t mem_key(char buf[MEM_KEY_MAX], const char *app, const char *user, const char *third)
{
	const char *parts[MEM_KEY_PARTS] = { app, user, third };
	size_t n = 0;

	for (int i = 0; i < MEM_KEY_PARTS && parts[i]; i++) {
		size_t l = strlen(parts[i]);
		if (i)
			buf[n++] = '\0';
		memcpy(buf + n, parts[i], l);
		n += l;
	}
	return n;
}

static int64_t mem_monotonic_us(const mem_store *st)
{
	struct timespec ts;

	if (st->host && MEMD_HOST_HAS(st->host, monotonic_us))
		return st->host->monotonic_us(st->host);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * US_PER_S + ts.tv_nsec / NS_PER_US;
}

int32_t mem_begin(const mem_store *st, const memd_call *call, memd_error *err)
{
	if (!st)
		return memd_error_set(err, MEMD_EINVAL, 0, "no store instance");
	return pu_call_check(call, mem_monotonic_us(st), err);
}

int32_t mem_sink_result(int32_t r, memd_error *err)
{
	if (r < 0)
		return memd_error_set(err, r, 0, "result sink stopped the call (%d)", (int)r);
	return r;
}

int32_t mem_sink_final(int32_t r)
{
	return r > 0 ? 0 : r;
}

int32_t mem_check_json_object(const char *what, const char *text, memd_error *err)
{
	json_error_t jerr;
	json_t *v;
	int ok;

	if (!text)
		return 0;
	v = json_loads(text, JSON_ALLOW_NUL, &jerr);
	if (!v)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s is not JSON: %s", what, jerr.text);
	ok = json_is_object(v);
	json_decref(v);
	if (!ok)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s must be a JSON object", what);
	return 0;
}

/* ---- usage ------------------------------------------------------------ */

int32_t mem_usage_read(const memd_usage *in, mem_usage *ret, memd_error *err)
{
	memd_usage u;
	size_t n;

	if (!in || in->struct_size < offsetof(memd_usage, input_tokens) + sizeof(in->input_tokens))
		return memd_error_set(err, MEMD_EINVAL, 0, "usage record is missing or too small");
	memset(&u, 0, sizeof(u));
	n = in->struct_size < sizeof(u) ? in->struct_size : sizeof(u);
	memcpy(&u, in, n);
	if (u.input_tokens < 0 || u.output_tokens < 0 || u.cache_read_tokens < 0 ||
	    u.cache_write_tokens < 0 || u.cost_micro_usd < 0 || u.last_prompt_tokens < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "usage values must not be negative");
	ret->input_tokens = u.input_tokens;
	ret->output_tokens = u.output_tokens;
	ret->cache_read_tokens = u.cache_read_tokens;
	ret->cache_write_tokens = u.cache_write_tokens;
	ret->cost_micro_usd = u.cost_micro_usd;
	ret->last_prompt_tokens = u.last_prompt_tokens;
	return 0;
}

void mem_usage_add(mem_usage *sum, const mem_usage *add)
{
	sum->input_tokens += add->input_tokens;
	sum->output_tokens += add->output_tokens;
	sum->cache_read_tokens += add->cache_read_tokens;
	sum->cache_write_tokens += add->cache_write_tokens;
	sum->cost_micro_usd += add->cost_micro_usd;
	if (add->last_prompt_tokens > 0)
		sum->last_prompt_tokens = add->last_prompt_tokens;
}

/* ---- freeing ---------------------------------------------------------- */

static void mem_event_free(mem_event *e)
{
	if (!e)
		return;
	free(e->id);
	free(e->invocation_id);
	free(e->author);
	free(e->role);
	free(e->branch);
	free(e->content_json);
	free(e->actions_json);
	free(e->metadata_json);
	free(e->text);
	free(e);
}

static void mem_artset_free(void *p)
{
	mem_artset *a = p;

	if (!a)
		return;
	for (size_t i = 0; i < a->n; i++) {
		free(a->versions[i].mime_type);
		free(a->versions[i].data);
	}
	free(a->versions);
	free(a->name);
	free(a);
}

static void mem_session_free(mem_session *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_events; i++)
		mem_event_free(s->events[i]);
	free(s->events);
	mem_session_transcripts_free(s);
	hmap_clear(&s->event_ids, NULL);
	hmap_clear(&s->state, free);
	hmap_clear(&s->artifacts, mem_artset_free);
	mem_checkpoints_session_free(s);
	free(s->app);
	free(s->user);
	free(s->id);
	free(s->title);
	free(s->metadata_json);
	free(s->lane_key);
	free(s->origin_json);
	free(s->origin_platform);
	free(s->previous_session);
	free(s->start_reason);
	free(s->end_reason);
	free(s);
}

static void mem_user_free(mem_user *u)
{
	if (!u)
		return;
	hmap_clear(&u->state, free);
	mem_memories_user_free(u);
	free(u->sessions);
	free(u->by_activity);
	free(u->lanes.v);
	free(u->app);
	free(u->user);
	free(u);
}

static void mem_app_free(void *p)
{
	mem_app *a = p;

	if (!a)
		return;
	hmap_clear(&a->state, free);
	free(a->lanes.v);
	free(a);
}

void mem_feed_entry_clear(mem_feed_entry *f)
{
	free(f->app);
	free(f->user);
	free(f->session);
	free(f->memory_id);
	f->app = f->user = f->session = f->memory_id = NULL;
	f->event = NULL;
	f->memory = NULL;
	f->kind = MEM_FEED_DEAD;
}

/* ---- lookups ---------------------------------------------------------- */

mem_session *mem_session_find(const mem_store *st, const memd_scope *scope)
{
	return mem_session_find3(st, scope->app, scope->user, scope->session);
}

mem_session *mem_session_find3(const mem_store *st, const char *app, const char *user,
			       const char *id)
{
	char key[MEM_KEY_MAX];
	size_t n = mem_key(key, app, user, id);
	hmap_node *node = hmap_find(&st->sessions, key, n);
	return node ? node->value : NULL;
}

mem_app *mem_app_find(const mem_store *st, const char *app)
{
	hmap_node *node = hmap_find(&st->apps, app, strlen(app));
	return node ? node->value : NULL;
}

mem_user *mem_user_find(const mem_store *st, const char *app, const char *user)
{
	char key[MEM_KEY_MAX];
	size_t n = mem_key(key, app, user, NULL);
	hmap_node *node = hmap_find(&st->users, key, n);
	return node ? node->value : NULL;
}

int32_t mem_session_require(const mem_store *st, const memd_scope *scope, mem_session **ret,
			    memd_error *err)
{
	mem_session *s = mem_session_find(st, scope);

	if (!s)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				      scope->session);
	*ret = s;
	return 0;
}

int32_t mem_user_get_or_create(mem_store *st, const char *app, const char *user,
			       mem_user **ret, memd_error *err)
{
	char key[MEM_KEY_MAX];
	size_t n = mem_key(key, app, user, NULL);
	hmap_node *node = hmap_find(&st->users, key, n);
	mem_user *u;

	if (node) {
		*ret = node->value;
		return 0;
	}
	u = calloc(1, sizeof(*u));
	if (!u)
		return mem_enomem(err);
	hmap_init(&u->state);
	hmap_init(&u->memories);
	hmap_init(&u->memory_history);
	u->app = mem_strdup(app);
	u->user = mem_strdup(user);
	node = u->app && u->user ? hmap_node_new(key, n, u) : NULL;
	if (!node || hmap_put(&st->users, node) < 0) {
		hmap_node_free(node);
		mem_user_free(u);
		return mem_enomem(err);
	}
	*ret = u;
	return 0;
}

int32_t mem_app_get_or_create(mem_store *st, const char *app, mem_app **ret, memd_error *err)
{
	hmap_node *node = hmap_find(&st->apps, app, strlen(app));
	mem_app *a;

	if (node) {
		*ret = node->value;
		return 0;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		return mem_enomem(err);
	hmap_init(&a->state);
	node = hmap_node_new(app, strlen(app), a);
	if (!node || hmap_put(&st->apps, node) < 0) {
		hmap_node_free(node);
		mem_app_free(a);
		return mem_enomem(err);
	}
	*ret = a;
	return 0;
}

void mem_user_drop_if_empty(mem_store *st, mem_user *u)
{
	char key[MEM_KEY_MAX];
	size_t n;

	if (u->n_sessions || u->state.count || u->lanes.n || u->memories.count ||
	    u->memory_history.count)
		return;
	n = mem_key(key, u->app, u->user, NULL);
	hmap_node_free(hmap_remove(&st->users, key, n));
	mem_user_free(u);
}

/* ---- session ordering (newest first by (created_us, id)) -------------- */

int mem_order_cmp(int64_t ca, const char *ia, int64_t cb, const char *ib)
{
	if (ca != cb)
		return ca < cb ? -1 : 1;
	if (!ia || !ib)
		return ia ? 1 : (ib ? -1 : 0);
	return strcmp(ia, ib);
}

/* First index in u->sessions (newest first) whose key is strictly below
 * (created, id). */
static size_t mem_user_lower(const mem_user *u, int64_t created, const char *id)
{
	size_t lo = 0, hi = u->n_sessions;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const mem_session *s = u->sessions[mid];
		if (mem_order_cmp(s->created_us, s->id, created, id) < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* Link s into both of its owner's orders (room reserved). */
static void mem_user_link(mem_user *u, mem_session *s)
{
	size_t at = mem_user_lower(u, s->created_us, s->id);

	mem_activity_link(s);

	memmove(u->sessions + at + 1, u->sessions + at,
		(u->n_sessions - at) * sizeof(*u->sessions));
	u->sessions[at] = s;
	u->n_sessions++;
}

static void mem_user_unlink(mem_user *u, const mem_session *s)
{
	mem_activity_unlink(s);
	for (size_t i = mem_user_lower(u, s->created_us, s->id); i-- > 0;) {
		/* Sessions with an equal key sit just before the lower bound. */
		if (u->sessions[i] == s) {
			memmove(u->sessions + i, u->sessions + i + 1,
				(u->n_sessions - i - 1) * sizeof(*u->sessions));
			u->n_sessions--;
			return;
		}
		if (mem_order_cmp(u->sessions[i]->created_us, u->sessions[i]->id, s->created_us,
				  s->id) != 0)
			return;
	}
}

/* ---- delivery --------------------------------------------------------- */

static void mem_session_fill(const mem_session *s, memd_session *out)
{
	memset(out, 0, sizeof(*out));
	out->struct_size = sizeof(*out);
	out->flags = s->flags;
	out->app = s->app;
	out->user = s->user;
	out->id = s->id;
	out->title = s->title;
	out->metadata_json = s->metadata_json;
	out->created_us = s->created_us;
	out->updated_us = s->updated_us;
	out->version = s->version;
	out->last_seq = (int64_t)s->n_events;
	out->summary_seq = s->summary_seq;
	out->message_count = (int64_t)(s->visible.n - s->visible_summaries.n);
	out->lane_key = s->lane_key;
	out->origin_json = s->origin_json;
	out->origin_platform = s->origin_platform;
	out->previous_session = s->previous_session;
	out->start_reason = s->start_reason;
	out->end_reason = s->end_reason;
	out->ended_us = s->ended_us;
	out->input_tokens = s->usage.input_tokens;
	out->output_tokens = s->usage.output_tokens;
	out->cache_read_tokens = s->usage.cache_read_tokens;
	out->cache_write_tokens = s->usage.cache_write_tokens;
	out->cost_micro_usd = s->usage.cost_micro_usd;
	out->last_prompt_tokens = s->usage.last_prompt_tokens;
	out->memory_seq = s->memory_seq;
}

int32_t mem_session_deliver(const mem_session *s, const memd_session_sink *out,
				   memd_error *err)
{
	memd_session rec;

	if (!out || !out->session)
		return 0;
	mem_session_fill(s, &rec);
	return mem_sink_result(out->session(out->userdata, &rec), err);
}

static void mem_event_fill(const mem_event *e, memd_event *out)
{
	memset(out, 0, sizeof(*out));
	out->struct_size = sizeof(*out);
	out->flags = e->flags;
	out->id = e->id;
	out->seq = e->seq;
	out->invocation_id = e->invocation_id;
	out->author = e->author;
	out->role = e->role;
	out->branch = e->branch;
	out->content_json = e->content_json;
	out->actions_json = e->actions_json;
	out->metadata_json = e->metadata_json;
	out->timestamp_us = e->timestamp_us;
	out->text = e->text;
	out->tokens = e->tokens;
	out->covers_seq = e->covers_seq;
	out->position = e->position;
	out->app = e->owner->app;
	out->user = e->owner->user;
	out->session = e->owner->id;
	out->hidden_us = e->hidden_us;
	out->hidden_by = e->hidden_by ? e->hidden_by->id : NULL;
	out->hidden_kind = e->hidden_kind;
	out->operation = e->operation ? e->operation->id : NULL;
}

/* ---- the change feed -------------------------------------------------- */

/* Index of the first entry with position > after. */
static size_t mem_feed_upper(const mem_store *st, int64_t after)
{
	size_t lo = 0, hi = st->n_feed;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (st->feed[mid].position <= after)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void mem_feed_kill(mem_store *st, int64_t position)
{
	size_t at = mem_feed_upper(st, position - 1);

	if (at < st->n_feed && st->feed[at].position == position &&
	    st->feed[at].kind != MEM_FEED_DEAD) {
		mem_feed_entry_clear(&st->feed[at]);
		st->n_dead++;
	}
}

/* Mark the feed records of s's events (EVENT and HIDE) dead. */
static void mem_feed_kill_session(mem_store *st, const mem_session *s)
{
	for (size_t i = 0; i < s->n_events; i++)
		mem_feed_kill(st, s->events[i]->position);
	for (size_t i = 0; i < s->n_hide_feed; i++)
		mem_feed_kill(st, s->hide_feed[i]);
}

void mem_feed_compact(mem_store *st)
{
	size_t w = 0;

	if (st->n_dead < MEM_FEED_COMPACT_MIN || st->n_dead * 2 < st->n_feed)
		return;
	for (size_t r = 0; r < st->n_feed; r++)
		if (st->feed[r].kind != MEM_FEED_DEAD)
			st->feed[w++] = st->feed[r];
	st->n_feed = w;
	st->n_dead = 0;
}

int32_t mem_feed_prepare_scoped(mem_store *st, uint32_t kind, const char *app,
				const char *user, const char *session, mem_feed_entry *ret,
				memd_error *err)
{
	mem_feed_entry f = { .kind = kind };

	if (mem_grow((void **)&st->feed, &st->cap_feed, st->n_feed + 1, sizeof(*st->feed)) < 0 ||
	    mem_dup_opt(app, &f.app) < 0 || mem_dup_opt(user, &f.user) < 0 ||
	    mem_dup_opt(session, &f.session) < 0) {
		mem_feed_entry_clear(&f);
		return mem_enomem(err);
	}
	*ret = f;
	return 0;
}

void mem_feed_push(mem_store *st, mem_feed_entry f)
{
	f.position = ++st->feed_head;
	if (f.event && f.kind == MEMD_FEED_EVENT)
		f.event->position = f.position;
	st->feed[st->n_feed++] = f;
}

/* ---- state deltas ----------------------------------------------------- */

static void mem_state_ops_free(mem_state_ops *o)
{
	for (size_t i = 0; i < o->n; i++) {
		free(o->ops[i].node->value);
		hmap_node_free(o->ops[i].node);
	}
	free(o->ops);
	memset(o, 0, sizeof(*o));
}

static int32_t mem_state_collect(void *userdata, int32_t scope, const char *key,
				 const char *value_json)
{
	mem_state_ops *o = userdata;
	char *value = NULL;
	hmap_node *node;

	if (mem_grow((void **)&o->ops, &o->cap, o->n + 1, sizeof(*o->ops)) < 0 ||
	    mem_dup_opt(value_json, &value) < 0)
		return MEMD_ENOMEM;
	node = hmap_node_new(key, strlen(key), value);
	if (!node) {
		free(value);
		return MEMD_ENOMEM;
	}
	o->ops[o->n].scope = scope;
	o->ops[o->n].skip = 0;
	o->ops[o->n].node = node;
	o->n++;
	if (value)
		o->sets[scope]++;
	return 0;
}

/* Parse and stage a delta. EINVAL (nothing staged) for a bad delta. */
static int32_t mem_state_stage(const char *delta, mem_state_ops *o, memd_error *err)
{
	int32_t r;

	memset(o, 0, sizeof(*o));
	r = pu_state_delta_foreach(delta, mem_state_collect, o, err);
	if (r == MEMD_ENOMEM)
		r = mem_enomem(err);
	if (r < 0)
		mem_state_ops_free(o);
	return r;
}

hmap *mem_state_map(mem_session *s, mem_app *a, int32_t scope)
{
	if (scope == PU_SCOPE_APP)
		return &a->state;
	if (scope == PU_SCOPE_USER)
		return &s->owner->state;
	return &s->state;
}

/* Phase one: make room in the maps the ops touch (a needed for app: keys). */
static int32_t mem_state_reserve(mem_store *st, mem_session *s, const mem_state_ops *o,
				 mem_app **ret_app, memd_error *err)
{
	mem_app *a = NULL;
	int32_t r;

	if (o->n && (r = mem_app_get_or_create(st, s->app, &a, err)) < 0)
		return r;
	for (int32_t sc = 0; sc < PU_SCOPE_COUNT; sc++)
		if (o->sets[sc] && hmap_reserve(mem_state_map(s, a, sc), o->sets[sc]) < 0)
			return mem_enomem(err);
	*ret_app = a;
	return 0;
}

/* Phase two: apply; consumes the staged nodes. Cannot fail. */
static void mem_state_commit(mem_session *s, mem_app *a, mem_state_ops *o)
{
	for (size_t i = 0; i < o->n; i++) {
		hmap *m = mem_state_map(s, a, o->ops[i].scope);
		hmap_node *n = o->ops[i].node;
		hmap_node *old = hmap_find(m, n->key, n->klen);

		if (o->ops[i].skip) {
			free(n->value);
			hmap_node_free(n);
		} else if (!n->value) {
			if (old) {
				hmap_remove(m, n->key, n->klen);
				free(old->value);
				hmap_node_free(old);
			}
			hmap_node_free(n);
		} else if (old) {
			free(old->value);
			old->value = n->value;
			hmap_node_free(n);
		} else {
			hmap_insert(m, n);
		}
	}
	free(o->ops);
	memset(o, 0, sizeof(*o));
}

/* ---- init / fini ------------------------------------------------------ */

static void mem_fini(void *instance)
{
	mem_store *st = instance;
	hmap_iter it = HMAP_ITER_INIT;
	hmap_node *n;

	if (!st)
		return;
	mem_lanes_fini(st);
	mem_memories_fini(st);
	mem_tasks_fini(st);
	while ((n = hmap_next(&st->sessions, &it)))
		mem_session_free(n->value);
	hmap_clear(&st->sessions, NULL);
	it = (hmap_iter)HMAP_ITER_INIT;
	while ((n = hmap_next(&st->users, &it)))
		mem_user_free(n->value);
	hmap_clear(&st->users, NULL);
	hmap_clear(&st->apps, mem_app_free);
	hmap_clear(&st->cursors, free);
	for (size_t i = 0; i < st->n_feed; i++)
		mem_feed_entry_clear(&st->feed[i]);
	free(st->feed);
	free(st->ended);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

static int32_t mem_init(const memd_host *host, void **ret_instance, memd_error *err)
{
	mem_store *st = calloc(1, sizeof(*st));

	if (!st)
		return mem_enomem(err);
	if (pthread_mutex_init(&st->lock, NULL) != 0) {
		free(st);
		return memd_error_set(err, MEMD_EINTERNAL, 0, "cannot create the store mutex");
	}
	st->host = host;
	hmap_init(&st->sessions);
	hmap_init(&st->users);
	hmap_init(&st->apps);
	hmap_init(&st->cursors);
	hmap_init(&st->lanes);
	hmap_init(&st->tasks);
	*ret_instance = st;
	return 0;
}

/* ---- sessions --------------------------------------------------------- */

/* Copy in's lifecycle members (store.h 1.2) that its struct_size covers.
 * 0, or -1 on ENOMEM (the caller frees s). */
static int mem_session_copy_lifecycle(const memd_session *in, mem_session *s)
{
	if (!MEM_HAS(in, start_reason))
		return 0;
	s->flags |= in->flags & MEMD_SESSION_NOTICE;
	if (mem_dup_opt(in->lane_key, &s->lane_key) < 0 ||
	    mem_dup_opt(in->origin_json, &s->origin_json) < 0 ||
	    mem_dup_opt(in->origin_platform, &s->origin_platform) < 0 ||
	    mem_dup_opt(in->previous_session, &s->previous_session) < 0 ||
	    mem_dup_opt(in->start_reason, &s->start_reason) < 0)
		return -1;
	return 0;
}

int32_t mem_session_check(const memd_session *in, memd_error *err)
{
	int32_t r;

	if (!in || !MEM_HAS(in, summary_seq))
		return memd_error_set(err, MEMD_EINVAL, 0, "session record is missing or too small");
	if ((r = pu_check_id("app", in->app, err)) < 0 ||
	    (r = pu_check_id("user", in->user, err)) < 0 ||
	    (r = pu_check_id("session id", in->id, err)) < 0 ||
	    (r = mem_check_json_object("session metadata", in->metadata_json, err)) < 0)
		return r;
	if (!MEM_HAS(in, start_reason))
		return 0;
	if ((in->lane_key && (r = pu_check_id("session lane key", in->lane_key, err)) < 0) ||
	    (in->previous_session &&
	     (r = pu_check_id("previous session", in->previous_session, err)) < 0) ||
	    (r = mem_check_json_object("session origin", in->origin_json, err)) < 0)
		return r;
	return 0;
}

int32_t mem_session_prepare(mem_store *st, const memd_session *in, const char *delta,
			    mem_session_new *ret, memd_error *err)
{
	char key[MEM_KEY_MAX];
	size_t klen = mem_key(key, in->app, in->user, in->id);
	mem_session_new n;
	mem_history_new history;
	mem_session *s = NULL;
	mem_user *u = NULL;
	int32_t r;

	memset(&n, 0, sizeof(n));
	if (hmap_find(&st->sessions, key, klen))
		return memd_error_set(err, MEMD_ECONFLICT, 0, "session '%.64s' already exists",
				      in->id);
	if ((r = mem_state_stage(delta, &n.state, err)) < 0)
		return r;
	n.created_user = mem_user_find(st, in->app, in->user) == NULL;
	if ((r = mem_user_get_or_create(st, in->app, in->user, &u, err)) < 0)
		goto fail;
	n.s = s = calloc(1, sizeof(*s));
	if (!s) {
		r = mem_enomem(err);
		goto fail;
	}
	hmap_init(&s->event_ids);
	hmap_init(&s->state);
	hmap_init(&s->artifacts);
	hmap_init(&s->op_ids);
	s->owner = u;
	s->flags = in->flags & MEMD_SESSION_ARCHIVED;
	s->created_us = in->created_us;
	s->updated_us = in->created_us;
	if (mem_dup_opt(in->app, &s->app) < 0 || mem_dup_opt(in->user, &s->user) < 0 ||
	    mem_dup_opt(in->id, &s->id) < 0 || mem_dup_opt(in->title, &s->title) < 0 ||
	    mem_dup_opt(in->metadata_json ? in->metadata_json : MEM_EMPTY_OBJECT,
			&s->metadata_json) < 0 ||
	    mem_session_copy_lifecycle(in, s) < 0 ||
	    !(n.node = hmap_node_new(key, klen, s)) || hmap_reserve(&st->sessions, 1) < 0 ||
	    mem_grow((void **)&u->sessions, &u->cap_sessions, u->n_sessions + 1,
		     sizeof(*u->sessions)) < 0 ||
	    mem_activity_reserve(u) < 0) {
		r = mem_enomem(err);
		goto fail;
	}
	if ((r = mem_state_reserve(st, s, &n.state, &n.app, err)) < 0 ||
	    (r = mem_history_stage(st, s, &n.state, &history, err)) < 0)
		goto fail;
	/* s is private until committed: its initial state's history (version
	 * 0, no events) goes in now, read under the lock the commit runs in. */
	mem_history_commit(s, &history, 0, 0, s->created_us, NULL);
	*ret = n;
	return 0;
fail:
	n.s = s;
	mem_session_abort(st, &n);
	return r;
}

void mem_session_commit(mem_store *st, mem_session_new *n)
{
	hmap_insert(&st->sessions, n->node);
	mem_user_link(n->s->owner, n->s);
	mem_state_commit(n->s, n->app, &n->state);
	memset(n, 0, sizeof(*n));
}

void mem_session_abort(mem_store *st, mem_session_new *n)
{
	mem_user *u = n->s ? n->s->owner : NULL;

	hmap_node_free(n->node);
	mem_session_free(n->s);
	mem_state_ops_free(&n->state);
	if (n->created_user && u)
		mem_user_drop_if_empty(st, u);
	memset(n, 0, sizeof(*n));
}

static int32_t mem_session_create(void *inst, const memd_call *call, const memd_session *s,
				  const char *state_delta_json, const memd_session_sink *out,
				  memd_error *err)
{
	mem_store *st = inst;
	mem_session_new n;
	mem_session *made;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = mem_session_check(s, err)) < 0)
		return r;
	pthread_mutex_lock(&st->lock);
	r = mem_session_prepare(st, s, state_delta_json, &n, err);
	if (r == 0) {
		made = n.s;
		mem_session_commit(st, &n);
		r = mem_sink_final(mem_session_deliver(made, out, err));
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}

static int32_t mem_session_get(void *inst, const memd_call *call, const memd_scope *scope,
			       const memd_session_sink *out, memd_error *err)
{
	mem_store *st = inst;
	mem_session *s = NULL;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 1, err)) < 0)
		return r;
	pthread_mutex_lock(&st->lock);
	r = mem_session_require(st, scope, &s, err);
	if (r == 0) {
		pu_rows_read(call, 1);
		r = mem_sink_final(mem_session_deliver(s, out, err));
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}

/* Does s pass q's filters (archived, and the 1.2 origin, lane and
 * activity ones)? */
static int mem_session_matches(const mem_session *s, const memd_session_query *q)
{
	if ((s->flags & MEMD_SESSION_ARCHIVED) && !(q->flags & MEMD_SQ_INCLUDE_ARCHIVED))
		return 0;
	if (MEM_HAS(q, updated_after_us) && q->updated_after_us &&
	    s->updated_us <= q->updated_after_us)
		return 0;
	if (!MEM_HAS(q, lane_key))
		return 1;
	if (q->origin_platform &&
	    (!s->origin_platform || strcmp(s->origin_platform, q->origin_platform) != 0))
		return 0;
	if (q->lane_key && (!s->lane_key || strcmp(s->lane_key, q->lane_key) != 0))
		return 0;
	return 1;
}

static int32_t mem_session_list(void *inst, const memd_call *call, const memd_scope *scope,
				const memd_session_query *q, const memd_session_sink *out,
				memd_error *err)
{
	mem_store *st = inst;
	mem_user *u;
	uint32_t sent = 0;
	size_t i, examined = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 0, err)) < 0)
		return r;
	if (!q || !MEM_HAS(q, before_id))
		return memd_error_set(err, MEMD_EINVAL, 0, "session query is missing or too small");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "session query limit must be > 0");
	if (q->before_created_us && q->before_id &&
	    (r = pu_check_id("before_id", q->before_id, err)) < 0)
		return r;
	if (MEM_HAS(q, lane_key) && q->lane_key &&
	    (r = pu_check_id("lane key filter", q->lane_key, err)) < 0)
		return r;
	if (!out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "no session sink");
	pthread_mutex_lock(&st->lock);
	u = mem_user_find(st, scope->app, scope->user);
	if (q->flags & MEMD_SQ_BY_ACTIVITY) {
		/* by_activity ascends: walk back from the keyset bound, and stop
		 * at the first session not updated after updated_after_us. */
		int64_t after = MEM_HAS(q, updated_after_us) ? q->updated_after_us : 0;
		i = !u ? 0 : q->before_created_us ?
			mem_activity_lower(u, q->before_created_us, q->before_id) : u->n_sessions;
		while (i-- > 0 && sent < q->limit) {
			const mem_session *s = u->by_activity[i];
			if (after && s->updated_us <= after)
				break;
			examined++;
			if (!mem_session_matches(s, q))
				continue;
			sent++;
			if ((r = mem_session_deliver(s, out, err)) != 0)
				break;
		}
	} else {
		i = !u ? 0 :
			q->before_created_us ? mem_user_lower(u, q->before_created_us, q->before_id) : 0;
		for (; u && i < u->n_sessions && sent < q->limit; i++) {
			const mem_session *s = u->sessions[i];
			examined++;
			if (!mem_session_matches(s, q))
				continue;
			sent++;
			if ((r = mem_session_deliver(s, out, err)) != 0)
				break;
		}
	}
	pu_rows_read(call, examined);
	pthread_mutex_unlock(&st->lock);
	return mem_sink_final(r);
}

static int32_t mem_session_update(void *inst, const memd_call *call, const memd_scope *scope,
				  const memd_session_update *p, const memd_session_sink *out,
				  memd_error *err)
{
	mem_store *st = inst;
	mem_session *s = NULL;
	char *title = NULL, *meta = NULL;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 1, err)) < 0)
		return r;
	if (!p || !MEM_HAS(p, now_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "session patch is missing or too small");
	if ((p->fields & MEMD_PATCH_METADATA) &&
	    (r = mem_check_json_object("session metadata", p->metadata_json, err)) < 0)
		return r;
	if ((p->fields & MEMD_PATCH_ARCHIVED) && p->archived > 1)
		return memd_error_set(err, MEMD_EINVAL, 0, "archived must be 0 or 1");
	if (((p->fields & MEMD_PATCH_TITLE) && mem_dup_opt(p->title, &title) < 0) ||
	    ((p->fields & MEMD_PATCH_METADATA) &&
	     mem_dup_opt(p->metadata_json ? p->metadata_json : MEM_EMPTY_OBJECT, &meta) < 0)) {
		free(title);
		return mem_enomem(err);
	}
	pthread_mutex_lock(&st->lock);
	r = mem_session_require(st, scope, &s, err);
	if (r == 0 && (p->fields & MEMD_PATCH_CLEAR_NOTICE) && !(s->flags & MEMD_SESSION_NOTICE))
		r = memd_error_set(err, MEMD_ECONFLICT, 0, "session '%.64s' owes no notice", s->id);
	if (r == 0) {
		if (p->fields & MEMD_PATCH_CLEAR_NOTICE)
			s->flags &= ~MEMD_SESSION_NOTICE;
		if (p->fields & MEMD_PATCH_TITLE) {
			free(s->title);
			s->title = title;
			title = NULL;
		}
		if (p->fields & MEMD_PATCH_METADATA) {
			free(s->metadata_json);
			s->metadata_json = meta;
			meta = NULL;
		}
		if (p->fields & MEMD_PATCH_ARCHIVED) {
			if (p->archived)
				s->flags |= MEMD_SESSION_ARCHIVED;
			else
				s->flags &= ~MEMD_SESSION_ARCHIVED;
		}
		/* Clearing the notice alone is bookkeeping, not an update. */
		if (p->fields != MEMD_PATCH_CLEAR_NOTICE)
			mem_session_touch(s, p->now_us);
		pu_rows_read(call, 1);
		r = mem_sink_final(mem_session_deliver(s, out, err));
	}
	pthread_mutex_unlock(&st->lock);
	free(title);
	free(meta);
	return r;
}

/* Remove s from every index and free it (its feed records die). */
static void mem_session_destroy(mem_store *st, mem_session *s)
{
	char key[MEM_KEY_MAX];
	size_t n = mem_key(key, s->app, s->user, s->id);

	hmap_node_free(hmap_remove(&st->sessions, key, n));
	mem_user_unlink(s->owner, s);
	mem_ended_unlink(st, s);
	mem_feed_kill_session(st, s);
	mem_session_free(s);
}

static int32_t mem_session_delete(void *inst, const memd_call *call, const memd_scope *scope,
				  memd_error *err)
{
	mem_store *st = inst;
	mem_session *s = NULL;
	mem_feed_entry del;
	mem_user *u;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 1, err)) < 0)
		return r;
	pthread_mutex_lock(&st->lock);
	if ((r = mem_session_require(st, scope, &s, err)) < 0 ||
	    (r = mem_feed_prepare_scoped(st, MEMD_FEED_DELETE_SESSION, s->app, s->user, s->id,
					 &del, err)) < 0)
		goto out;
	u = s->owner;
	pu_rows_read(call, 1 + s->n_events);
	mem_session_destroy(st, s);
	mem_tasks_forget(st, scope->app, scope->user, scope->session);
	mem_feed_push(st, del);
	mem_feed_compact(st);
	mem_user_drop_if_empty(st, u);
out:
	pthread_mutex_unlock(&st->lock);
	return r;
}

/* ---- append ----------------------------------------------------------- */

/* A private copy of an input event (seq, position assigned at commit). */
static int32_t mem_event_copy(const memd_event *in, mem_event **ret, memd_error *err)
{
	mem_event *e;
	int32_t r;

	if (!in || !MEM_HAS(in, covers_seq))
		return memd_error_set(err, MEMD_EINVAL, 0, "event record is missing or too small");
	if ((r = pu_check_id("event id", in->id, err)) < 0)
		return r;
	if (!in->role || !in->role[0])
		return memd_error_set(err, MEMD_EINVAL, 0, "event '%.64s' has no role", in->id);
	e = calloc(1, sizeof(*e));
	if (!e)
		return mem_enomem(err);
	if (mem_dup_opt(in->id, &e->id) < 0 || mem_dup_opt(in->invocation_id, &e->invocation_id) < 0 ||
	    mem_dup_opt(in->author, &e->author) < 0 || mem_dup_opt(in->role, &e->role) < 0 ||
	    mem_dup_opt(in->branch, &e->branch) < 0 ||
	    mem_dup_opt(in->content_json, &e->content_json) < 0 ||
	    mem_dup_opt(in->actions_json, &e->actions_json) < 0 ||
	    mem_dup_opt(in->metadata_json, &e->metadata_json) < 0 ||
	    mem_dup_opt(in->text, &e->text) < 0) {
		mem_event_free(e);
		return mem_enomem(err);
	}
	e->flags = in->flags;
	e->is_summary = strcmp(in->role, MEM_ROLE_SUMMARY) == 0;
	e->role_bit = pu_role_bit(in->role);
	e->timestamp_us = in->timestamp_us;
	e->tokens = in->tokens;
	e->covers_seq = in->covers_seq;
	*ret = e;
	return 0;
}

/* Everything an append allocates before it commits. */
typedef struct mem_batch {
	mem_event **events;
	hmap_node **id_nodes;  /* one per event: id -> event, linked in `ids` */
	size_t n;              /* events copied so far */
	hmap ids;              /* the batch's own ids, to refuse repeats */
	mem_state_ops state;
	char *title;
	size_t n_summaries;
} mem_batch;

static void mem_batch_free(mem_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		if (hmap_remove(&b->ids, b->id_nodes[i]->key, b->id_nodes[i]->klen) == b->id_nodes[i])
			hmap_node_free(b->id_nodes[i]);
		mem_event_free(b->events[i]);
	}
	hmap_clear(&b->ids, NULL);
	free(b->events);
	free(b->id_nodes);
	mem_state_ops_free(&b->state);
	free(b->title);
}

static int32_t mem_batch_prepare(const memd_append *a, const mem_session *s, mem_batch *b,
				 memd_error *err)
{
	int32_t r;

	if (a->n_events) {
		b->events = calloc(a->n_events, sizeof(*b->events));
		b->id_nodes = calloc(a->n_events, sizeof(*b->id_nodes));
		if (!b->events || !b->id_nodes || hmap_reserve(&b->ids, a->n_events) < 0)
			return mem_enomem(err);
	}
	for (uint32_t i = 0; i < a->n_events; i++) {
		mem_event *e = NULL;
		hmap_node *node;

		if ((r = mem_event_copy(a->events[i], &e, err)) < 0)
			return r;
		node = hmap_node_new(e->id, strlen(e->id), e);
		if (!node) {
			mem_event_free(e);
			return mem_enomem(err);
		}
		if (hmap_find(&b->ids, node->key, node->klen)) {
			hmap_node_free(node);
			mem_event_free(e);
			return memd_error_set(err, MEMD_ECONFLICT, 0,
					      "event id '%.64s' appears twice in the batch", a->events[i]->id);
		}
		hmap_insert(&b->ids, node);
		b->events[b->n] = e;
		b->id_nodes[b->n] = node;
		b->n++;
		if (e->is_summary)
			b->n_summaries++;
	}
	if ((r = mem_state_stage(a->state_delta_json, &b->state, err)) < 0)
		return r;
	if (a->title_if_unset && !s->title && mem_dup_opt(a->title_if_unset, &b->title) < 0)
		return mem_enomem(err);
	return 0;
}

/* All ids of the batch already in s: the original seqs (1), some (ECONFLICT)
 * or none (0). */
static int32_t mem_replay_check(const mem_session *s, const memd_append *a, int64_t *seqs,
				memd_error *err)
{
	uint32_t found = 0;

	for (uint32_t i = 0; i < a->n_events; i++) {
		const memd_event *in = a->events[i];
		hmap_node *node;

		if (!in || !MEM_HAS(in, covers_seq) || !in->id)
			continue; /* refused with a message by mem_event_copy */
		node = hmap_find(&s->event_ids, in->id, strlen(in->id));
		if (node) {
			seqs[i] = ((const mem_event *)node->value)->seq;
			found++;
		}
	}
	if (found == 0)
		return 0;
	if (found < a->n_events)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "%u of the batch's %u event ids exist already in session '%.64s'",
				      found, a->n_events, s->id);
	return 1;
}

/* usage: what a->usage adds (checked), or NULL; a was checked
 * (pu_check_append). */
static int32_t mem_append_locked(mem_store *st, const memd_call *call, const memd_scope *scope,
				 const memd_append *a, const mem_usage *usage,
				 memd_append_result *res, memd_error *err)
{
	const memd_transcript_op *in_op = pu_append_op(a);
	mem_batch b;
	mem_op_new op;
	mem_history_new history = { 0 };
	mem_session *s = NULL;
	mem_app *app = NULL;
	int64_t *seqs = NULL;
	char *not_restored = NULL;
	int32_t r;

	memset(&b, 0, sizeof(b));
	memset(&op, 0, sizeof(op));
	hmap_init(&b.ids);
	if ((r = mem_session_require(st, scope, &s, err)) < 0)
		return r;
	if (a->n_events) {
		seqs = calloc(a->n_events, sizeof(*seqs));
		if (!seqs)
			return mem_enomem(err);
		pu_rows_read(call, a->n_events);
		r = mem_replay_check(s, a, seqs, err);
		if (r < 0)
			goto out;
		if (r == 1) {
			/* A retry: its operation, if any, was done with it. */
			memcpy(res->seqs, seqs, a->n_events * sizeof(*seqs));
			res->flags = MEMD_APPEND_REPLAYED;
			res->version = s->version;
			r = 0;
			goto out;
		}
	}
	if ((a->flags & MEMD_APPEND_EXPECT_VERSION) && a->expected_version != s->version) {
		r = memd_error_set(err, MEMD_ECONFLICT, 0,
				   "session '%.64s' is at version %lld, expected %lld", s->id,
				   (long long)s->version, (long long)a->expected_version);
		goto out;
	}
	if ((r = mem_batch_prepare(a, s, &b, err)) < 0)
		goto out;
	if (in_op && (r = mem_op_prepare(st, s, in_op, b.n, &op, err)) < 0)
		goto out;
	if (mem_grow((void **)&s->events, &s->cap_events, s->n_events + b.n, sizeof(*s->events)) < 0 ||
	    mem_evlist_reserve(&s->summaries, b.n_summaries) < 0 ||
	    mem_evlist_reserve(&s->visible, b.n) < 0 ||
	    mem_evlist_reserve(&s->visible_summaries, b.n_summaries) < 0 ||
	    hmap_reserve(&s->event_ids, b.n) < 0 ||
	    mem_grow((void **)&st->feed, &st->cap_feed, st->n_feed + b.n, sizeof(*st->feed)) < 0) {
		r = mem_enomem(err);
		goto out;
	}
	if (in_op && (r = mem_state_expect(st, s, &b.state, in_op->state_expect_json,
					   &not_restored, err)) < 0)
		goto out;
	if ((r = mem_state_reserve(st, s, &b.state, &app, err)) < 0 ||
	    (r = mem_history_stage(st, s, &b.state, &history, err)) < 0)
		goto out;
	if (op.op)
		pu_rows_read(call, op.op->hid.n + op.n_unhide);

	/* Commit: nothing below can fail. */
	mem_op_apply(st, s, &op, a->now_us);
	for (size_t i = 0; i < b.n; i++) {
		mem_event *e = b.events[i];
		mem_feed_entry f = { .kind = MEMD_FEED_EVENT, .event = e };

		e->owner = s;
		e->seq = (int64_t)s->n_events + 1;
		e->operation = op.op;
		s->events[s->n_events++] = e;
		hmap_remove(&b.ids, b.id_nodes[i]->key, b.id_nodes[i]->klen);
		hmap_insert(&s->event_ids, b.id_nodes[i]);
		mem_evlist_push(&s->visible, e);
		if (e->is_summary) {
			mem_evlist_push(&s->summaries, e);
			mem_evlist_push(&s->visible_summaries, e);
		}
		mem_feed_push(st, f);
		res->seqs[i] = e->seq;
	}
	s->summary_seq = s->visible_summaries.n ?
		s->visible_summaries.v[s->visible_summaries.n - 1]->seq : 0;
	mem_state_commit(s, app, &b.state);
	if (b.title) {
		s->title = b.title;
		b.title = NULL;
	}
	if (usage) {
		mem_usage_add(&s->usage, usage);
		mem_lanes_add_usage(st, s, usage);
	}
	s->version++;
	mem_session_touch(s, a->now_us);
	mem_history_commit(s, &history, s->version, (int64_t)s->n_events, a->now_us, op.op);
	res->flags = 0;
	res->version = s->version;
	if (MEM_HAS(res, unhidden_count)) {
		res->hidden_count = op.op ? (int64_t)op.op->hid.n : 0;
		res->unhidden_count = (int64_t)op.n_unhide;
	}
	mem_op_record(s, &op, a->now_us, b.n ? res->seqs[0] : 0, b.n ? res->seqs[b.n - 1] : 0);
	b.n = 0;
	if (in_op)
		mem_feed_compact(st); /* an undo's events left their old records dead */
	/* The write is done: a sink's answer cannot undo it. */
	if (in_op && in_op->not_restored && in_op->not_restored->text)
		(void)in_op->not_restored->text(in_op->not_restored->userdata, not_restored,
						strlen(not_restored));
out:
	mem_batch_free(&b);
	mem_op_abort(&op);
	mem_history_abort(&history);
	free(not_restored);
	free(seqs);
	return r;
}

static int32_t mem_append(void *inst, const memd_call *call, const memd_scope *scope,
			  const memd_append *a, memd_append_result *res, memd_error *err)
{
	mem_store *st = inst;
	mem_usage usage;
	int with_usage;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 1, err)) < 0)
		return r;
	if (!a || !MEM_HAS(a, now_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "append is missing or too small");
	with_usage = MEM_HAS(a, usage) && a->usage;
	if (with_usage && (r = mem_usage_read(a->usage, &usage, err)) < 0)
		return r;
	if (!res || !MEM_HAS(res, seqs))
		return memd_error_set(err, MEMD_EINVAL, 0, "append result is missing or too small");
	/* Every store's checks, the transcript operation's included. */
	if ((r = pu_check_append(scope, a, res, err)) < 0)
		return r;
	pthread_mutex_lock(&st->lock);
	r = mem_append_locked(st, call, scope, a, with_usage ? &usage : NULL, res, err);
	pthread_mutex_unlock(&st->lock);
	return r;
}

/* ---- events_load ------------------------------------------------------ */

/* The events a query walks: [begin, end) of one ascending array of
 * events (every event by seq, or one of a session's lists). */
typedef struct mem_walk {
	mem_event *const *v;
	size_t begin, end;
} mem_walk;

static int mem_event_matches(const mem_event *e, const memd_event_query *q, uint32_t roles)
{
	if (q->after_time_us && e->timestamp_us <= q->after_time_us)
		return 0;
	if ((q->flags & MEMD_EVQ_NO_SUMMARY) && e->is_summary)
		return 0;
	if (roles && !(e->role_bit & roles))
		return 0;
	return 1;
}

static int32_t mem_event_deliver(const mem_event *e, const memd_event_sink *out, memd_error *err)
{
	memd_event rec;

	mem_event_fill(e, &rec);
	return mem_sink_result(out->event(out->userdata, &rec), err);
}

static int32_t mem_events_walk(const mem_walk *w, const memd_call *call, const memd_event_query *q,
			       const memd_event_sink *out, memd_error *err)
{
	uint32_t roles = pu_event_query_roles(q);
	size_t examined = 0;
	int32_t r = 0;

	if ((q->flags & MEMD_EVQ_NEWEST) && q->limit && w->end > w->begin) {
		/* The newest `limit` matches, walking back; delivered ascending. */
		size_t want = q->limit < w->end - w->begin ? q->limit : w->end - w->begin;
		const mem_event **pick = malloc(want * sizeof(*pick));
		size_t n = 0;

		if (!pick)
			return mem_enomem(err);
		for (size_t i = w->end; i-- > w->begin && n < want;) {
			const mem_event *e = w->v[i];
			examined++;
			if (mem_event_matches(e, q, roles))
				pick[n++] = e;
		}
		while (n-- > 0)
			if ((r = mem_event_deliver(pick[n], out, err)) != 0)
				break;
		free(pick);
	} else {
		uint32_t sent = 0;
		for (size_t i = w->begin; i < w->end && (!q->limit || sent < q->limit); i++) {
			const mem_event *e = w->v[i];
			examined++;
			if (!mem_event_matches(e, q, roles))
				continue;
			sent++;
			if ((r = mem_event_deliver(e, out, err)) != 0)
				break;
		}
	}
	pu_rows_read(call, examined);
	return mem_sink_final(r);
}

static int32_t mem_events_load(void *inst, const memd_call *call, const memd_scope *scope,
			       const memd_event_query *q, const memd_event_sink *out,
			       memd_error *err)
{
	mem_store *st = inst;
	mem_session *s = NULL;
	const mem_evlist *list = NULL;
	mem_walk w;
	int64_t lo, hi;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_event_query(scope, q, out, err)) < 0)
		return r;
	if (!MEM_HAS(q, limit))
		return memd_error_set(err, MEMD_EINVAL, 0, "event query is too small");
	pthread_mutex_lock(&st->lock);
	if ((r = mem_session_require(st, scope, &s, err)) < 0)
		goto out;
	/* The seq range [lo, hi]. */
	lo = q->after_seq > 0 ? q->after_seq + 1 : 1;
	hi = (int64_t)s->n_events;
	if (q->before_seq > 0 && q->before_seq - 1 < hi)
		hi = q->before_seq - 1;
	/* Hidden events are only in events[] and summaries: any other read
	 * walks a list of visible ones and never meets them. */
	if (q->flags & MEMD_EVQ_INCLUDE_HIDDEN)
		list = (q->flags & MEMD_EVQ_ONLY_SUMMARY) ? &s->summaries : NULL;
	else
		list = (q->flags & MEMD_EVQ_ONLY_SUMMARY) ? &s->visible_summaries : &s->visible;
	if (lo > hi) {
		w.v = s->events;
		w.begin = w.end = 0;
	} else if (list) {
		w.v = list->v;
		w.begin = mem_evlist_lower(list, lo);
		w.end = mem_evlist_lower(list, hi + 1);
	} else {
		w.v = s->events;
		w.begin = (size_t)(lo - 1);
		w.end = (size_t)hi;
	}
	r = mem_events_walk(&w, call, q, out, err);
out:
	pthread_mutex_unlock(&st->lock);
	return r;
}

/* ---- state ------------------------------------------------------------ */

static int32_t mem_state_add_all(pu_state_builder *b, int32_t scope, const hmap *m,
				 uint64_t *examined, memd_error *err)
{
	hmap_iter it = HMAP_ITER_INIT;
	hmap_node *n;
	int32_t r;

	while ((n = hmap_next(m, &it))) {
		(*examined)++;
		if ((r = pu_state_builder_add(b, scope, n->key, n->value, err)) < 0)
			return r;
	}
	return 0;
}

static int32_t mem_state_get(void *inst, const memd_call *call, const memd_scope *scope,
			     const memd_text_sink *out, memd_error *err)
{
	mem_store *st = inst;
	pu_state_builder *b;
	mem_session *s = NULL;
	hmap_node *an;
	uint64_t examined = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 1, err)) < 0)
		return r;
	if (!out || !out->text)
		return memd_error_set(err, MEMD_EINVAL, 0, "no text sink");
	b = pu_state_builder_new();
	if (!b)
		return mem_enomem(err);
	pthread_mutex_lock(&st->lock);
	if ((r = mem_session_require(st, scope, &s, err)) < 0)
		goto out;
	an = hmap_find(&st->apps, s->app, strlen(s->app));
	if ((an && (r = mem_state_add_all(b, PU_SCOPE_APP, &((mem_app *)an->value)->state,
					  &examined, err)) < 0) ||
	    (r = mem_state_add_all(b, PU_SCOPE_USER, &s->owner->state, &examined, err)) < 0 ||
	    (r = mem_state_add_all(b, PU_SCOPE_SESSION, &s->state, &examined, err)) < 0)
		goto out;
	r = pu_state_builder_finish(b, out, err);
out:
	pu_rows_read(call, examined);
	pthread_mutex_unlock(&st->lock);
	pu_state_builder_free(b);
	return r;
}

/* ---- artifacts -------------------------------------------------------- */

static void mem_artifact_fill(const mem_artset *set, const mem_artifact *v, int with_data,
			      memd_artifact *out)
{
	memset(out, 0, sizeof(*out));
	out->struct_size = sizeof(*out);
	out->name = set->name;
	out->version = v->version;
	out->mime_type = v->mime_type;
	out->data = with_data ? v->data : NULL;
	out->size = v->size;
	out->created_us = v->created_us;
}

static int32_t mem_artifact_put(void *inst, const memd_call *call, const memd_scope *scope,
				const memd_artifact *a, int64_t *ret_version, memd_error *err)
{
	mem_store *st = inst;
	mem_session *s = NULL;
	mem_artset *set = NULL;
	hmap_node *node;
	mem_artifact v = { 0 };
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 1, err)) < 0)
		return r;
	if (!a || !MEM_HAS(a, created_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "artifact is missing or too small");
	if ((r = pu_check_artifact_name(a->name, err)) < 0)
		return r;
	if (a->size && !a->data)
		return memd_error_set(err, MEMD_EINVAL, 0, "artifact of %llu bytes without data",
				      (unsigned long long)a->size);
	if (a->size > SIZE_MAX - 1)
		return memd_error_set(err, MEMD_ETOOBIG, 0, "artifact too large");
	v.size = a->size;
	v.created_us = a->created_us;
	v.data = malloc(a->size ? (size_t)a->size : 1);
	if (!v.data || mem_dup_opt(a->mime_type, &v.mime_type) < 0) {
		free(v.data);
		return mem_enomem(err);
	}
	if (a->size)
		memcpy(v.data, a->data, (size_t)a->size);
	pthread_mutex_lock(&st->lock);
	if ((r = mem_session_require(st, scope, &s, err)) < 0)
		goto out;
	node = hmap_find(&s->artifacts, a->name, strlen(a->name));
	if (node) {
		set = node->value;
		if (mem_grow((void **)&set->versions, &set->cap, set->n + 1,
			     sizeof(*set->versions)) < 0) {
			r = mem_enomem(err);
			goto out;
		}
	} else {
		set = calloc(1, sizeof(*set));
		node = set ? hmap_node_new(a->name, strlen(a->name), set) : NULL;
		if (!set || !(set->name = mem_strdup(a->name)) || !node ||
		    mem_grow((void **)&set->versions, &set->cap, 1, sizeof(*set->versions)) < 0 ||
		    hmap_put(&s->artifacts, node) < 0) {
			hmap_node_free(node);
			mem_artset_free(set);
			r = mem_enomem(err);
			goto out;
		}
	}
	v.version = (int64_t)set->n + 1;
	set->versions[set->n++] = v;
	v.data = NULL;
	v.mime_type = NULL;
	pu_rows_read(call, 1);
	*ret_version = set->versions[set->n - 1].version;
out:
	pthread_mutex_unlock(&st->lock);
	free(v.data);
	free(v.mime_type);
	return r;
}

static int32_t mem_artset_require(const mem_session *s, const char *name, mem_artset **ret,
				  memd_error *err)
{
	hmap_node *node = hmap_find(&s->artifacts, name, strlen(name));

	if (!node)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "artifact '%.64s' not found", name);
	*ret = node->value;
	return 0;
}

/* Common start of the artifact reads: checks, lock, session. On success
 * the lock is held. */
static int32_t mem_artifact_begin(mem_store *st, const memd_call *call, const memd_scope *scope,
				  const char *name, const memd_artifact_sink *out,
				  mem_session **ret, memd_error *err)
{
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 1, err)) < 0)
		return r;
	if (name && (r = pu_check_artifact_name(name, err)) < 0)
		return r;
	if (out && !out->artifact)
		return memd_error_set(err, MEMD_EINVAL, 0, "no artifact sink");
	pthread_mutex_lock(&st->lock);
	if ((r = mem_session_require(st, scope, ret, err)) < 0)
		pthread_mutex_unlock(&st->lock);
	return r;
}

static int32_t mem_artifact_get(void *inst, const memd_call *call, const memd_scope *scope,
				const char *name, int64_t version, const memd_artifact_sink *out,
				memd_error *err)
{
	mem_store *st = inst;
	mem_session *s = NULL;
	mem_artset *set = NULL;
	memd_artifact rec;
	int32_t r;

	if (!name || !out)
		return memd_error_set(err, MEMD_EINVAL, 0, "artifact name or sink missing");
	if (version < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "artifact version must be >= 0");
	if ((r = mem_artifact_begin(st, call, scope, name, out, &s, err)) < 0)
		return r;
	if ((r = mem_artset_require(s, name, &set, err)) < 0)
		goto out;
	if (version > (int64_t)set->n) {
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "artifact '%.64s' has no version %lld",
				   name, (long long)version);
		goto out;
	}
	pu_rows_read(call, 1);
	mem_artifact_fill(set, &set->versions[version ? version - 1 : (int64_t)set->n - 1], 1, &rec);
	r = mem_sink_final(mem_sink_result(out->artifact(out->userdata, &rec), err));
out:
	pthread_mutex_unlock(&st->lock);
	return r;
}

static int mem_artset_cmp(const void *a, const void *b)
{
	const mem_artset *x = *(const mem_artset *const *)a;
	const mem_artset *y = *(const mem_artset *const *)b;
	return strcmp(x->name, y->name);
}

static int32_t mem_artifact_list(void *inst, const memd_call *call, const memd_scope *scope,
				 const memd_artifact_sink *out, memd_error *err)
{
	mem_store *st = inst;
	mem_session *s = NULL;
	mem_artset **sets = NULL;
	hmap_iter it = HMAP_ITER_INIT;
	hmap_node *n;
	size_t count = 0;
	int32_t r;

	if (!out)
		return memd_error_set(err, MEMD_EINVAL, 0, "no artifact sink");
	if ((r = mem_artifact_begin(st, call, scope, NULL, out, &s, err)) < 0)
		return r;
	if (s->artifacts.count) {
		sets = malloc(s->artifacts.count * sizeof(*sets));
		if (!sets) {
			r = mem_enomem(err);
			goto out;
		}
		while ((n = hmap_next(&s->artifacts, &it)))
			sets[count++] = n->value;
		qsort(sets, count, sizeof(*sets), mem_artset_cmp);
	}
	pu_rows_read(call, count);
	for (size_t i = 0; i < count; i++) {
		memd_artifact rec;
		mem_artifact_fill(sets[i], &sets[i]->versions[sets[i]->n - 1], 0, &rec);
		if ((r = mem_sink_result(out->artifact(out->userdata, &rec), err)) != 0)
			break;
	}
	r = mem_sink_final(r);
out:
	pthread_mutex_unlock(&st->lock);
	free(sets);
	return r;
}

static int32_t mem_artifact_versions(void *inst, const memd_call *call, const memd_scope *scope,
				     const char *name, const memd_artifact_sink *out,
				     memd_error *err)
{
	mem_store *st = inst;
	mem_session *s = NULL;
	mem_artset *set = NULL;
	int32_t r;

	if (!name || !out)
		return memd_error_set(err, MEMD_EINVAL, 0, "artifact name or sink missing");
	if ((r = mem_artifact_begin(st, call, scope, name, out, &s, err)) < 0)
		return r;
	if ((r = mem_artset_require(s, name, &set, err)) < 0)
		goto out;
	pu_rows_read(call, set->n);
	for (size_t i = 0; i < set->n; i++) {
		memd_artifact rec;
		mem_artifact_fill(set, &set->versions[i], 0, &rec);
		if ((r = mem_sink_result(out->artifact(out->userdata, &rec), err)) != 0)
			break;
	}
	r = mem_sink_final(r);
out:
	pthread_mutex_unlock(&st->lock);
	return r;
}

static int32_t mem_artifact_delete(void *inst, const memd_call *call, const memd_scope *scope,
				   const char *name, memd_error *err)
{
	mem_store *st = inst;
	mem_session *s = NULL;
	mem_artset *set = NULL;
	int32_t r;

	if (!name)
		return memd_error_set(err, MEMD_EINVAL, 0, "artifact name missing");
	if ((r = mem_artifact_begin(st, call, scope, name, NULL, &s, err)) < 0)
		return r;
	if ((r = mem_artset_require(s, name, &set, err)) == 0) {
		pu_rows_read(call, set->n);
		hmap_node_free(hmap_remove(&s->artifacts, name, strlen(name)));
		mem_artset_free(set);
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}

/* ---- users ------------------------------------------------------------ */

static int32_t mem_user_delete(void *inst, const memd_call *call, const memd_scope *scope,
			       memd_error *err)
{
	mem_store *st = inst;
	mem_feed_entry del;
	mem_user *u;
	uint64_t examined = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 0, err)) < 0)
		return r;
	pthread_mutex_lock(&st->lock);
	examined += mem_tasks_forget(st, scope->app, scope->user, NULL);
	u = mem_user_find(st, scope->app, scope->user);
	if (!u)
		goto out; /* nothing else of theirs is stored: nothing more to forget */
	if ((r = mem_feed_prepare_scoped(st, MEMD_FEED_DELETE_USER, u->app, u->user, NULL, &del,
					 err)) < 0)
		goto out;
	while (u->n_sessions) {
		mem_session *s = u->sessions[u->n_sessions - 1];
		examined += 1 + s->n_events;
		mem_session_destroy(st, s);
	}
	examined += u->state.count;
	hmap_clear(&u->state, free);
	examined += mem_lanes_user_forget(st, u);
	examined += mem_memories_user_forget(st, u);
	mem_feed_push(st, del);
	mem_feed_compact(st);
	mem_user_drop_if_empty(st, u);
out:
	pu_rows_read(call, examined);
	pthread_mutex_unlock(&st->lock);
	return r;
}

/* ---- change feed and cursors ------------------------------------------ */

static int32_t mem_feed_read(void *inst, const memd_call *call, int64_t after, uint32_t limit,
			     const memd_feed_sink *out, memd_error *err)
{
	mem_store *st = inst;
	uint64_t examined = 0;
	uint32_t sent = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0)
		return r;
	if (!out || !out->record)
		return memd_error_set(err, MEMD_EINVAL, 0, "no feed sink");
	pthread_mutex_lock(&st->lock);
	for (size_t i = mem_feed_upper(st, after); i < st->n_feed && (!limit || sent < limit); i++) {
		const mem_feed_entry *f = &st->feed[i];
		memd_feed_record rec;
		memd_memory mem;
		memd_event ev;

		examined++;
		if (f->kind == MEM_FEED_DEAD)
			continue;
		memset(&rec, 0, sizeof(rec));
		rec.struct_size = sizeof(rec);
		rec.kind = f->kind;
		rec.position = f->position;
		if (f->kind == MEMD_FEED_EVENT || f->kind == MEMD_FEED_HIDE) {
			mem_event_fill(f->event, &ev);
			rec.app = ev.app;
			rec.user = ev.user;
			rec.session = ev.session;
			rec.event = &ev;
		} else if (f->kind == MEMD_FEED_MEMORY) {
			mem_memory_fill(f->memory, &mem);
			rec.app = mem.app;
			rec.user = mem.user;
			rec.memory = &mem;
		} else if (f->kind == MEMD_FEED_MEMORY_DELETE) {
			memset(&mem, 0, sizeof(mem));
			mem.struct_size = sizeof(mem);
			mem.app = rec.app = f->app;
			mem.user = rec.user = f->user;
			mem.id = f->memory_id;
			rec.memory = &mem;
		} else {
			rec.app = f->app;
			rec.user = f->user;
			rec.session = f->session;
		}
		sent++;
		if ((r = mem_sink_result(out->record(out->userdata, &rec), err)) != 0)
			break;
	}
	pu_rows_read(call, examined);
	pthread_mutex_unlock(&st->lock);
	return mem_sink_final(r);
}

static int32_t mem_feed_head(void *inst, const memd_call *call, int64_t *ret_position,
			     memd_error *err)
{
	mem_store *st = inst;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0)
		return r;
	if (!ret_position)
		return memd_error_set(err, MEMD_EINVAL, 0, "no output position");
	pthread_mutex_lock(&st->lock);
	*ret_position = st->feed_head;
	pthread_mutex_unlock(&st->lock);
	return 0;
}

static int32_t mem_cursor_get(void *inst, const memd_call *call, const char *name,
			      int64_t *ret_position, memd_error *err)
{
	mem_store *st = inst;
	hmap_node *n;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_id("cursor name", name, err)) < 0)
		return r;
	if (!ret_position)
		return memd_error_set(err, MEMD_EINVAL, 0, "no output position");
	pthread_mutex_lock(&st->lock);
	n = hmap_find(&st->cursors, name, strlen(name));
	pu_rows_read(call, n ? 1 : 0);
	*ret_position = n ? *(const int64_t *)n->value : 0;
	pthread_mutex_unlock(&st->lock);
	return 0;
}

static int32_t mem_cursor_set(void *inst, const memd_call *call, const char *name,
			      int64_t position, memd_error *err)
{
	mem_store *st = inst;
	hmap_node *n;
	int64_t *v = NULL;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_id("cursor name", name, err)) < 0)
		return r;
	if (position < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "cursor position must be >= 0");
	pthread_mutex_lock(&st->lock);
	n = hmap_find(&st->cursors, name, strlen(name));
	if (n) {
		*(int64_t *)n->value = position;
	} else {
		v = malloc(sizeof(*v));
		n = v ? hmap_node_new(name, strlen(name), v) : NULL;
		if (!n || hmap_put(&st->cursors, n) < 0) {
			hmap_node_free(n);
			free(v);
			r = mem_enomem(err);
		} else {
			*v = position;
		}
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}

static int32_t mem_ping(void *inst, const memd_call *call, memd_error *err)
{
	return mem_begin(inst, call, err);
}

/* ---- descriptor ------------------------------------------------------- */

/* 1.6: the task paths of pending writes (1.5: the checkpoint and task
 * ops; 1.3: the memory ops and the session's memory_seq; 1.2: the lane
 * ops, a session's lifecycle members, append usage and transcript
 * operations, which the host passes only to a store of that minor or
 * later). */
#define MEM_ABI_MINOR_NEEDED 6

static const memd_store_ops mem_ops = {
	.struct_size = sizeof(memd_store_ops),
	.session_create = mem_session_create,
	.session_get = mem_session_get,
	.session_list = mem_session_list,
	.session_update = mem_session_update,
	.session_delete = mem_session_delete,
	.append = mem_append,
	.events_load = mem_events_load,
	.state_get = mem_state_get,
	.artifact_put = mem_artifact_put,
	.artifact_get = mem_artifact_get,
	.artifact_list = mem_artifact_list,
	.artifact_versions = mem_artifact_versions,
	.artifact_delete = mem_artifact_delete,
	.user_delete = mem_user_delete,
	.feed_read = mem_feed_read,
	.feed_head = mem_feed_head,
	.cursor_get = mem_cursor_get,
	.cursor_set = mem_cursor_set,
	.ping = mem_ping,
	.lane_get = mem_lane_get,
	.lane_write = mem_lane_write,
	.lane_list = mem_lane_list,
	.lane_delete = mem_lane_delete,
	.lane_prune = mem_lane_prune,
	.inbox_put = mem_inbox_put,
	.inbox_take = mem_inbox_take,
	.inbox_list = mem_inbox_list,
	.session_list_ended = mem_session_list_ended,
	.operation_list = mem_operation_list,
	.operation_get = mem_operation_get,
	.state_history = mem_state_history,
	.memory_commit = mem_memory_commit,
	.memory_get = mem_memory_get,
	.memory_list = mem_memory_list,
	.memory_history = mem_memory_history,
	.memory_expire = mem_memory_expire,
	.session_list_pending = mem_session_list_pending,
	.checkpoint_put = mem_checkpoint_put,
	.checkpoint_put_writes = mem_checkpoint_put_writes,
	.checkpoint_get = mem_checkpoint_get,
	.checkpoint_list = mem_checkpoint_list,
	.checkpoint_delete = mem_checkpoint_delete,
	.checkpoint_resumable = mem_checkpoint_resumable,
	.checkpoint_expire = mem_checkpoint_expire,
	.task_put = mem_task_put,
	.task_get = mem_task_get,
	.task_list = mem_task_list,
	.task_delete = mem_task_delete,
};

static const memd_plugin mem_plugin = {
	.struct_size = sizeof(memd_plugin),
	.abi_major = MEMD_ABI_MAJOR,
	.abi_minor = MEM_ABI_MINOR_NEEDED,
	.kind = MEMD_KIND_STORE,
	.flags = MEMD_PLUGIN_THREADSAFE,
	.name = MEM_PLUGIN_NAME,
	.version = MEM_PLUGIN_VERSION,
	.description = "In-memory session store (development; nothing persists)",
	.config_keys = NULL,
	.init = mem_init,
	.fini = mem_fini,
	.store = &mem_ops,
};

MEMD_PLUGIN_EXPORT const memd_plugin *memd_plugin_entry_v1(void)
{
	return &mem_plugin;
}
