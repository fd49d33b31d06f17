/* SPDX-License-Identifier: MIT */
/*
 * mem_lanes: lanes, inboxes and the session lifecycle of the in-memory
 * store (store.h 1.2). Layout, all under the store's one lock:
 *  - lanes: hash (app, user, key) -> lane, plus three arrays of the same
 *    lanes in ascending (updated_us, app, user, key) order: every lane
 *    (mem_store.all_lanes), an app's (mem_app.lanes) and a user's
 *    (mem_user.lanes), so that lane_list walks only the scope it asks for,
 *    newest activity first, from its keyset bound;
 *  - a lane's inbox: the next-up slot plus a FIFO list, each item with a
 *    position from the lane's own counter (ascending put order);
 *  - ended sessions: an array in ascending (ended_us, app, user, id) order
 *    for session_list_ended.
 * Writes follow memory.c's two phases: check and allocate, then commit.
 */
#include "mem_lanes.h"

#include <stdlib.h>
#include <string.h>

/* The lane_write flags this store knows. */
#define MEM_LW_KNOWN (MEMD_LW_CREATE | MEMD_LW_CLEAR_INBOX | MEMD_LW_FEED_FINALIZE)
/* The lane flags a store keeps (every MEMD_LANE_* of 1.2). */
#define MEM_LANE_FLAGS_KNOWN                                                        \
	(MEMD_LANE_SUSPENDED | MEMD_LANE_RESUME_PENDING | MEMD_LANE_FINALIZED |     \
	 MEMD_LANE_FRESH_RESET | MEMD_LANE_RESET_HAD_ACTIVITY)

/* One waiting message. */
typedef struct mem_inbox_entry {
	struct mem_inbox_entry *next; /* FIFO order */
	char *id;
	char *body_json;
	uint32_t mode;
	int64_t created_us;
	int64_t position;
} mem_inbox_entry;

/* The strings a lane_write replaces, copied before the commit. */
typedef struct mem_lane_text {
	char *session;
	char *origin_json;
	char *resume_reason;
	char *reset_reason;
	char *previous_session;
	char *turn_id;
} mem_lane_text;

typedef struct mem_lane {
	mem_user *owner;
	char *app;
	char *user;
	char *key;
	uint32_t flags;        /* MEMD_LANE_* */
	mem_lane_text text;
	int64_t created_us;
	int64_t updated_us;
	int64_t version;
	int64_t resume_marked_us;
	int64_t reset_us;
	int64_t turn_started_us;
	int64_t turn_lease_until_us;
	uint32_t interruptions;
	uint32_t finalize_failures;
	int64_t finalize_claim_until_us;
	mem_usage usage;
	mem_inbox_entry *slot; /* the next-up item, or NULL */
	mem_inbox_entry *head; /* the FIFO behind it */
	mem_inbox_entry *tail;
	uint32_t n_fifo;
	int64_t last_position; /* the newest item's position (0 = none yet) */
} mem_lane;

/* ---- freeing ---------------------------------------------------------- */

static void mem_inbox_entry_free(mem_inbox_entry *e)
{
	if (!e)
		return;
	free(e->id);
	free(e->body_json);
	free(e);
}

/* Empty l's inbox; returns how many items it held. */
static uint32_t mem_inbox_clear(mem_lane *l)
{
	uint32_t n = l->n_fifo + (l->slot ? 1 : 0);

	mem_inbox_entry_free(l->slot);
	while (l->head) {
		mem_inbox_entry *next = l->head->next;
		mem_inbox_entry_free(l->head);
		l->head = next;
	}
	l->slot = l->tail = NULL;
	l->n_fifo = 0;
	return n;
}

static void mem_lane_text_free(mem_lane_text *t)
{
	free(t->session);
	free(t->origin_json);
	free(t->resume_reason);
	free(t->reset_reason);
	free(t->previous_session);
	free(t->turn_id);
	memset(t, 0, sizeof(*t));
}

static void mem_lane_free(mem_lane *l)
{
	if (!l)
		return;
	mem_inbox_clear(l);
	mem_lane_text_free(&l->text);
	free(l->app);
	free(l->user);
	free(l->key);
	free(l);
}

/* ---- the ordered lane arrays ------------------------------------------ */

/* strcmp with NULL below every string. */
static int mem_strcmp_null(const char *a, const char *b)
{
	if (!a || !b)
		return a ? 1 : (b ? -1 : 0);
	return strcmp(a, b);
}

/* <0, 0, >0 as l sorts before, at or after (updated, app, user, key). */
static int mem_lane_cmp(const mem_lane *l, int64_t updated, const char *app, const char *user,
			const char *key)
{
	int c;

	if (l->updated_us != updated)
		return l->updated_us < updated ? -1 : 1;
	if ((c = mem_strcmp_null(l->app, app)) != 0 || (c = mem_strcmp_null(l->user, user)) != 0)
		return c;
	return mem_strcmp_null(l->key, key);
}

/* The first index whose lane is not below (updated, app, user, key). */
static size_t mem_index_lower(const mem_lane_index *x, int64_t updated, const char *app,
			      const char *user, const char *key)
{
	size_t lo = 0, hi = x->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (mem_lane_cmp(x->v[mid], updated, app, user, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int mem_index_reserve(mem_lane_index *x)
{
	return mem_grow((void **)&x->v, &x->cap, x->n + 1, sizeof(*x->v));
}

/* Commit step: room was reserved (or l was just removed). */
static void mem_index_insert(mem_lane_index *x, mem_lane *l)
{
	size_t at = mem_index_lower(x, l->updated_us, l->app, l->user, l->key);

	memmove(x->v + at + 1, x->v + at, (x->n - at) * sizeof(*x->v));
	x->v[at] = l;
	x->n++;
}

/* l must be in x with its current sort key. */
static void mem_index_remove(mem_lane_index *x, const mem_lane *l)
{
	size_t at = mem_index_lower(x, l->updated_us, l->app, l->user, l->key);

	if (at < x->n && x->v[at] == l) {
		memmove(x->v + at, x->v + at + 1, (x->n - at - 1) * sizeof(*x->v));
		x->n--;
	}
}

/* The app's array of l (apps are never dropped, so it exists). */
static mem_lane_index *mem_lane_app_index(const mem_store *st, const mem_lane *l)
{
	return &mem_app_find(st, l->app)->lanes;
}

static void mem_lane_index_all(mem_store *st, mem_lane *l)
{
	mem_index_insert(&st->all_lanes, l);
	mem_index_insert(mem_lane_app_index(st, l), l);
	mem_index_insert(&l->owner->lanes, l);
}

static void mem_lane_unindex_all(mem_store *st, const mem_lane *l)
{
	mem_index_remove(&st->all_lanes, l);
	mem_index_remove(mem_lane_app_index(st, l), l);
	mem_index_remove(&l->owner->lanes, l);
}

/* ---- the ended-session index ------------------------------------------ */

static int mem_ended_cmp(const mem_session *s, const mem_session *t)
{
	int c;

	if (s->ended_us != t->ended_us)
		return s->ended_us < t->ended_us ? -1 : 1;
	if ((c = strcmp(s->app, t->app)) != 0 || (c = strcmp(s->user, t->user)) != 0)
		return c;
	return strcmp(s->id, t->id);
}

/* The first index of st->ended not below s. */
static size_t mem_ended_lower(const mem_store *st, const mem_session *s)
{
	size_t lo = 0, hi = st->n_ended;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (mem_ended_cmp(st->ended[mid], s) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The first index of st->ended with ended_us >= ended_us. */
static size_t mem_ended_lower_time(const mem_store *st, int64_t ended_us)
{
	size_t lo = 0, hi = st->n_ended;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (st->ended[mid]->ended_us < ended_us)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Commit step: s->ended_us > 0 and room was reserved. */
static void mem_ended_link(mem_store *st, mem_session *s)
{
	size_t at = mem_ended_lower(st, s);

	memmove(st->ended + at + 1, st->ended + at, (st->n_ended - at) * sizeof(*st->ended));
	st->ended[at] = s;
	st->n_ended++;
}

void mem_ended_unlink(mem_store *st, const mem_session *s)
{
	size_t at;

	if (s->ended_us <= 0)
		return;
	at = mem_ended_lower(st, s);
	if (at < st->n_ended && st->ended[at] == s) {
		memmove(st->ended + at, st->ended + at + 1,
			(st->n_ended - at - 1) * sizeof(*st->ended));
		st->n_ended--;
	}
}

/* ---- lookups and delivery --------------------------------------------- */

static mem_lane *mem_lane_find(const mem_store *st, const char *app, const char *user,
			       const char *key)
{
	char k[MEM_KEY_MAX];
	size_t n = mem_key(k, app, user, key);
	hmap_node *node = hmap_find(&st->lanes, k, n);
	return node ? node->value : NULL;
}

static int32_t mem_lane_require(const mem_store *st, const memd_scope *scope, const char *key,
				mem_lane **ret, memd_error *err)
{
	mem_lane *l = mem_lane_find(st, scope->app, scope->user, key);

	if (!l)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "lane '%.64s' not found", key);
	*ret = l;
	return 0;
}

static uint32_t mem_lane_depth(const mem_lane *l)
{
	return l->n_fifo + (l->slot ? 1 : 0);
}

static void mem_lane_fill(const mem_lane *l, memd_lane *out)
{
	memset(out, 0, sizeof(*out));
	out->struct_size = sizeof(*out);
	out->flags = l->flags;
	out->app = l->app;
	out->user = l->user;
	out->key = l->key;
	out->session = l->text.session;
	out->origin_json = l->text.origin_json;
	out->created_us = l->created_us;
	out->updated_us = l->updated_us;
	out->version = l->version;
	out->resume_reason = l->text.resume_reason;
	out->resume_marked_us = l->resume_marked_us;
	out->reset_reason = l->text.reset_reason;
	out->previous_session = l->text.previous_session;
	out->reset_us = l->reset_us;
	out->turn_id = l->text.turn_id;
	out->turn_started_us = l->turn_started_us;
	out->turn_lease_until_us = l->turn_lease_until_us;
	out->interruptions = l->interruptions;
	out->finalize_failures = l->finalize_failures;
	out->finalize_claim_until_us = l->finalize_claim_until_us;
	out->input_tokens = l->usage.input_tokens;
	out->output_tokens = l->usage.output_tokens;
	out->cache_read_tokens = l->usage.cache_read_tokens;
	out->cache_write_tokens = l->usage.cache_write_tokens;
	out->cost_micro_usd = l->usage.cost_micro_usd;
	out->last_prompt_tokens = l->usage.last_prompt_tokens;
	out->inbox_depth = mem_lane_depth(l);
}

static int32_t mem_lane_deliver(const mem_lane *l, const memd_lane_sink *out, memd_error *err)
{
	memd_lane rec;

	if (!out || !out->lane)
		return 0;
	mem_lane_fill(l, &rec);
	return mem_sink_result(out->lane(out->userdata, &rec), err);
}

static int32_t mem_inbox_deliver(const mem_inbox_entry *e, int in_slot,
				 const memd_inbox_sink *out, memd_error *err)
{
	memd_inbox_item rec;

	memset(&rec, 0, sizeof(rec));
	rec.struct_size = sizeof(rec);
	rec.mode = e->mode;
	rec.id = e->id;
	rec.body_json = e->body_json;
	rec.created_us = e->created_us;
	rec.position = e->position;
	rec.in_slot = in_slot ? 1u : 0u;
	return mem_sink_result(out->item(out->userdata, &rec), err);
}

/* Commit step: take l out of every index and free it with its inbox;
 * returns the rows removed. Its user record is left to the caller. */
static uint64_t mem_lane_destroy(mem_store *st, mem_lane *l)
{
	char k[MEM_KEY_MAX];
	size_t n = mem_key(k, l->app, l->user, l->key);
	uint64_t rows = 1 + mem_lane_depth(l);

	hmap_node_free(hmap_remove(&st->lanes, k, n));
	mem_lane_unindex_all(st, l);
	mem_lane_free(l);
	return rows;
}

/* ---- hooks of memory.c ------------------------------------------------ */

void mem_lanes_add_usage(mem_store *st, const mem_session *s, const mem_usage *usage)
{
	mem_lane *l;

	if (!s->lane_key)
		return;
	l = mem_lane_find(st, s->app, s->user, s->lane_key);
	if (l && l->text.session && strcmp(l->text.session, s->id) == 0)
		mem_usage_add(&l->usage, usage);
}

uint64_t mem_lanes_user_forget(mem_store *st, mem_user *u)
{
	uint64_t rows = 0;

	while (u->lanes.n)
		rows += mem_lane_destroy(st, u->lanes.v[u->lanes.n - 1]);
	return rows;
}

void mem_lanes_fini(mem_store *st)
{
	hmap_iter it = HMAP_ITER_INIT;
	hmap_node *n;

	while ((n = hmap_next(&st->lanes, &it)))
		mem_lane_free(n->value);
	hmap_clear(&st->lanes, NULL);
	free(st->all_lanes.v);
	memset(&st->all_lanes, 0, sizeof(st->all_lanes));
}

/* ---- lane_get / lane_delete ------------------------------------------- */

static int32_t mem_check_lane_scope(const memd_scope *scope, const char *key, memd_error *err)
{
	int32_t r;

	if ((r = pu_check_scope(scope, 0, err)) < 0)
		return r;
	return pu_check_id("lane key", key, err);
}

int32_t mem_lane_get(void *inst, const memd_call *call, const memd_scope *scope,
		     const char *key, const memd_lane_sink *out,
		     const memd_session_sink *session_out, memd_error *err)
{
	mem_store *st = inst;
	mem_lane *l = NULL;
	mem_session *s;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = mem_check_lane_scope(scope, key, err)) < 0)
		return r;
	pthread_mutex_lock(&st->lock);
	r = mem_lane_require(st, scope, key, &l, err);
	if (r == 0) {
		pu_rows_read(call, 1);
		r = mem_sink_final(mem_lane_deliver(l, out, err));
	}
	/* The lane's session under the same lock: what the lane names now. */
	if (r == 0 && session_out && l->text.session &&
	    (s = mem_session_find3(st, scope->app, scope->user, l->text.session))) {
		pu_rows_read(call, 1);
		r = mem_sink_final(mem_session_deliver(s, session_out, err));
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}

int32_t mem_lane_delete(void *inst, const memd_call *call, const memd_scope *scope,
			const char *key, memd_error *err)
{
	mem_store *st = inst;
	mem_lane *l = NULL;
	mem_user *u;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = mem_check_lane_scope(scope, key, err)) < 0)
		return r;
	pthread_mutex_lock(&st->lock);
	r = mem_lane_require(st, scope, key, &l, err);
	if (r == 0) {
		u = l->owner;
		pu_rows_read(call, mem_lane_destroy(st, l));
		mem_user_drop_if_empty(st, u);
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}

/* ---- lane_write ------------------------------------------------------- */

/* Everything a lane_write allocates before it commits. */
typedef struct mem_lane_plan {
	mem_lane_text text;          /* the lane's new strings */
	char *end_reason;            /* for end */
	mem_usage usage;
	int with_usage;
	mem_session_new made;        /* create_session, when made.s */
	mem_session *end;            /* an open session to end, or NULL */
	mem_session *reopen;         /* an ended session to reopen, or NULL */
	mem_session *usage_session;  /* lane->session's record (may be made.s) */
	mem_feed_entry finalize;     /* kind FINALIZE, when wanted */
	int with_finalize;
	mem_lane *fresh;             /* a lane being created, not linked yet */
	hmap_node *fresh_node;
	int fresh_user;              /* the lane made its user record */
} mem_lane_plan;

/* Release what the plan holds (after a commit it holds nothing). */
static void mem_lane_plan_abort(mem_store *st, mem_lane_plan *p)
{
	mem_user *u = p->fresh ? p->fresh->owner : NULL;

	mem_lane_text_free(&p->text);
	free(p->end_reason);
	if (p->with_finalize)
		mem_feed_entry_clear(&p->finalize);
	hmap_node_free(p->fresh_node);
	mem_lane_free(p->fresh);
	if (p->fresh_user && u)
		mem_user_drop_if_empty(st, u);
	if (p->made.s)
		mem_session_abort(st, &p->made);
	memset(p, 0, sizeof(*p));
}

/* Checks without the lock; copies the strings into p. */
static int32_t mem_lane_write_check(const memd_lane_write *w, mem_lane_plan *p, memd_error *err)
{
	const memd_lane *l;
	const memd_session *cs;
	int32_t r;

	if (!w || !MEM_HAS(w, now_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "lane write is missing or too small");
	if (w->flags & ~MEM_LW_KNOWN)
		return memd_error_set(err, MEMD_EINVAL, 0, "unknown lane write flags 0x%x",
				      (unsigned)(w->flags & ~MEM_LW_KNOWN));
	l = w->lane;
	if (!l || !MEM_HAS(l, finalize_claim_until_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "lane record is missing or too small");
	if (l->flags & ~MEM_LANE_FLAGS_KNOWN)
		return memd_error_set(err, MEMD_EINVAL, 0, "unknown lane flags 0x%x",
				      (unsigned)(l->flags & ~MEM_LANE_FLAGS_KNOWN));
	if ((r = pu_check_id("app", l->app, err)) < 0 || (r = pu_check_id("user", l->user, err)) < 0 ||
	    (r = pu_check_id("lane key", l->key, err)) < 0 ||
	    (r = pu_check_id("lane session", l->session, err)) < 0 ||
	    (l->previous_session &&
	     (r = pu_check_id("lane previous session", l->previous_session, err)) < 0) ||
	    (r = mem_check_json_object("lane origin", l->origin_json, err)) < 0)
		return r;
	if (l->turn_id && (r = pu_check_id("turn id", l->turn_id, err)) < 0)
		return r;
	cs = w->create_session;
	if (cs) {
		if ((r = mem_session_check(cs, err)) < 0)
			return r;
		if (strcmp(cs->app, l->app) != 0 || strcmp(cs->user, l->user) != 0)
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "session '%.64s' to create is not of the lane's user",
					      cs->id);
	}
	if ((w->end_session && (r = pu_check_id("session to end", w->end_session, err)) < 0) ||
	    (w->reopen_session &&
	     (r = pu_check_id("session to reopen", w->reopen_session, err)) < 0))
		return r;
	if (w->usage) {
		if ((r = mem_usage_read(w->usage, &p->usage, err)) < 0)
			return r;
		p->with_usage = 1;
	}
	if (mem_dup_opt(l->session, &p->text.session) < 0 ||
	    mem_dup_opt(l->origin_json, &p->text.origin_json) < 0 ||
	    mem_dup_opt(l->resume_reason, &p->text.resume_reason) < 0 ||
	    mem_dup_opt(l->reset_reason, &p->text.reset_reason) < 0 ||
	    mem_dup_opt(l->previous_session, &p->text.previous_session) < 0 ||
	    mem_dup_opt(l->turn_id, &p->text.turn_id) < 0 ||
	    (w->end_session && mem_dup_opt(w->end_reason, &p->end_reason) < 0))
		return mem_enomem(err);
	return 0;
}

/* A lane for w->lane, not linked anywhere yet, with room reserved in
 * every index it will join. */
static int32_t mem_lane_prepare_new(mem_store *st, const memd_lane *in, mem_lane_plan *p,
				    memd_error *err)
{
	char k[MEM_KEY_MAX];
	size_t n = mem_key(k, in->app, in->user, in->key);
	mem_user *u = NULL;
	mem_app *a = NULL;
	mem_lane *l;
	int32_t r;

	p->fresh_user = mem_user_find(st, in->app, in->user) == NULL;
	if ((r = mem_user_get_or_create(st, in->app, in->user, &u, err)) < 0) {
		p->fresh_user = 0;
		return r;
	}
	if ((r = mem_app_get_or_create(st, in->app, &a, err)) < 0) {
		if (p->fresh_user)
			mem_user_drop_if_empty(st, u);
		p->fresh_user = 0;
		return r;
	}
	l = p->fresh = calloc(1, sizeof(*l));
	if (!l) {
		if (p->fresh_user)
			mem_user_drop_if_empty(st, u);
		p->fresh_user = 0;
		return mem_enomem(err);
	}
	l->owner = u;
	if (mem_dup_opt(in->app, &l->app) < 0 || mem_dup_opt(in->user, &l->user) < 0 ||
	    mem_dup_opt(in->key, &l->key) < 0 || !(p->fresh_node = hmap_node_new(k, n, l)) ||
	    hmap_reserve(&st->lanes, 1) < 0 || mem_index_reserve(&st->all_lanes) < 0 ||
	    mem_index_reserve(&a->lanes) < 0 || mem_index_reserve(&u->lanes) < 0)
		return mem_enomem(err);
	return 0;
}

/* Phase one under the lock: the version check, then everything the commit
 * needs. On failure the plan is aborted by the caller. */
static int32_t mem_lane_write_prepare(mem_store *st, const memd_lane_write *w, mem_lane_plan *p,
				      mem_lane **ret_lane, memd_error *err)
{
	const memd_lane *in = w->lane;
	mem_lane *l = mem_lane_find(st, in->app, in->user, in->key);
	int32_t r;

	if (w->flags & MEMD_LW_CREATE) {
		if (l)
			return memd_error_set(err, MEMD_ECONFLICT, 0, "lane '%.64s' exists already",
					      in->key);
	} else if (!l) {
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "lane '%.64s' does not exist (expected version %lld)", in->key,
				      (long long)w->expected_version);
	} else if (l->version != w->expected_version) {
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "lane '%.64s' is at version %lld, expected %lld", in->key,
				      (long long)l->version, (long long)w->expected_version);
	}
	if (w->create_session &&
	    (r = mem_session_prepare(st, w->create_session, NULL, &p->made, err)) < 0)
		return r;
	if (w->end_session) {
		mem_session *s = mem_session_find3(st, in->app, in->user, w->end_session);
		if (s && s->ended_us == 0) {
			if (mem_grow((void **)&st->ended, &st->cap_ended, st->n_ended + 1,
				     sizeof(*st->ended)) < 0)
				return mem_enomem(err);
			p->end = s;
		}
	}
	if (w->reopen_session) {
		p->reopen = mem_session_find3(st, in->app, in->user, w->reopen_session);
		if (!p->reopen && !(p->made.s && strcmp(p->made.s->id, w->reopen_session) == 0))
			return memd_error_set(err, MEMD_ENOTFOUND, 0,
					      "session '%.64s' to reopen not found",
					      w->reopen_session);
	}
	if (p->with_usage) {
		p->usage_session = mem_session_find3(st, in->app, in->user, in->session);
		if (!p->usage_session && p->made.s && strcmp(p->made.s->id, in->session) == 0)
			p->usage_session = p->made.s;
	}
	if (w->flags & MEMD_LW_FEED_FINALIZE) {
		if ((r = mem_feed_prepare_scoped(st, MEMD_FEED_FINALIZE, in->app, in->user,
						 in->session, &p->finalize, err)) < 0)
			return r;
		p->with_finalize = 1;
	}
	if (!l) {
		if ((r = mem_lane_prepare_new(st, in, p, err)) < 0)
			return r;
	}
	*ret_lane = l;
	return 0;
}

/* Phase two: apply the plan to l (NULL: the plan's fresh lane). Cannot
 * fail; returns the stored lane. */
static mem_lane *mem_lane_write_commit(mem_store *st, const memd_lane_write *w, mem_lane *l,
				       mem_lane_plan *p)
{
	const memd_lane *in = w->lane;

	if (p->made.s)
		mem_session_commit(st, &p->made);
	if (p->end) {
		p->end->ended_us = w->now_us;
		free(p->end->end_reason);
		p->end->end_reason = p->end_reason;
		p->end_reason = NULL;
		mem_ended_link(st, p->end);
	}
	if (p->reopen && p->reopen->ended_us) {
		mem_ended_unlink(st, p->reopen);
		p->reopen->ended_us = 0;
		free(p->reopen->end_reason);
		p->reopen->end_reason = NULL;
	}
	if (!l) {
		l = p->fresh;
		hmap_insert(&st->lanes, p->fresh_node);
		p->fresh = NULL;
		p->fresh_node = NULL;
		l->created_us = w->now_us;
	} else {
		mem_lane_unindex_all(st, l);
	}
	if (p->with_usage) {
		mem_usage_add(&l->usage, &p->usage);
		if (p->usage_session)
			mem_usage_add(&p->usage_session->usage, &p->usage);
	}
	if (w->flags & MEMD_LW_CLEAR_INBOX)
		mem_inbox_clear(l);
	if (p->with_finalize) {
		mem_feed_push(st, p->finalize);
		p->with_finalize = 0;
	}
	mem_lane_text_free(&l->text);
	l->text = p->text;
	memset(&p->text, 0, sizeof(p->text));
	l->flags = in->flags;
	l->updated_us = in->updated_us;
	l->resume_marked_us = in->resume_marked_us;
	l->reset_us = in->reset_us;
	l->turn_started_us = in->turn_started_us;
	l->turn_lease_until_us = in->turn_lease_until_us;
	l->interruptions = in->interruptions;
	l->finalize_failures = in->finalize_failures;
	l->finalize_claim_until_us = in->finalize_claim_until_us;
	l->version++;
	mem_lane_index_all(st, l);
	return l;
}

int32_t mem_lane_write(void *inst, const memd_call *call, const memd_lane_write *w,
		       const memd_lane_sink *out, memd_error *err)
{
	mem_store *st = inst;
	mem_lane_plan p;
	mem_lane *l = NULL;
	int32_t r;

	memset(&p, 0, sizeof(p));
	if ((r = mem_begin(st, call, err)) < 0)
		return r;
	if ((r = mem_lane_write_check(w, &p, err)) < 0) {
		mem_lane_plan_abort(st, &p); /* holds no store record yet: no lock needed */
		return r;
	}
	pthread_mutex_lock(&st->lock);
	r = mem_lane_write_prepare(st, w, &p, &l, err);
	if (r == 0) {
		l = mem_lane_write_commit(st, w, l, &p);
		pu_rows_read(call, 1);
		r = mem_sink_final(mem_lane_deliver(l, out, err));
	}
	mem_lane_plan_abort(st, &p);
	pthread_mutex_unlock(&st->lock);
	return r;
}

/* ---- lane_list / lane_prune ------------------------------------------- */

static int mem_lane_matches(const mem_lane *l, const memd_lane_query *q)
{
	if ((l->flags & q->flags_all) != q->flags_all || (l->flags & q->flags_none))
		return 0;
	if ((q->turn == MEMD_LQ_TURN_SOME && !l->text.turn_id) ||
	    (q->turn == MEMD_LQ_TURN_NONE && l->text.turn_id))
		return 0;
	if (q->lease_before_us && (!l->text.turn_id || l->turn_lease_until_us >= q->lease_before_us))
		return 0;
	return 1;
}

static int32_t mem_lane_query_check(const memd_lane_query *q, const memd_lane_sink *out,
				    memd_error *err)
{
	int32_t r;

	if (!q || !MEM_HAS(q, before_key))
		return memd_error_set(err, MEMD_EINVAL, 0, "lane query is missing or too small");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane query limit must be > 0");
	if (!q->app && q->user)
		return memd_error_set(err, MEMD_EINVAL, 0, "a lane query by user needs its app");
	if ((q->app && (r = pu_check_id("app", q->app, err)) < 0) ||
	    (q->user && (r = pu_check_id("user", q->user, err)) < 0))
		return r;
	if (q->turn > MEMD_LQ_TURN_NONE)
		return memd_error_set(err, MEMD_EINVAL, 0, "unknown lane query turn filter %u",
				      q->turn);
	if (!out || !out->lane)
		return memd_error_set(err, MEMD_EINVAL, 0, "no lane sink");
	return 0;
}

int32_t mem_lane_list(void *inst, const memd_call *call, const memd_lane_query *q,
		      const memd_lane_sink *out, memd_error *err)
{
	mem_store *st = inst;
	const mem_lane_index *x = NULL;
	uint64_t examined = 0;
	uint32_t sent = 0;
	size_t hi;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = mem_lane_query_check(q, out, err)) < 0)
		return r;
	pthread_mutex_lock(&st->lock);
	if (!q->app) {
		x = &st->all_lanes;
	} else if (!q->user) {
		const mem_app *a = mem_app_find(st, q->app);
		x = a ? &a->lanes : NULL;
	} else {
		const mem_user *u = mem_user_find(st, q->app, q->user);
		x = u ? &u->lanes : NULL;
	}
	hi = x ? x->n : 0;
	if (x && q->before_updated_us)
		hi = mem_index_lower(x, q->before_updated_us, q->before_app, q->before_user,
				     q->before_key);
	if (x && q->updated_before_us) {
		size_t b = mem_index_lower(x, q->updated_before_us, NULL, NULL, NULL);
		if (b < hi)
			hi = b;
	}
	while (hi-- > 0 && sent < q->limit) {
		const mem_lane *l = x->v[hi];
		if (q->updated_after_us && l->updated_us <= q->updated_after_us)
			break;
		examined++;
		if (!mem_lane_matches(l, q))
			continue;
		sent++;
		if ((r = mem_lane_deliver(l, out, err)) != 0)
			break;
	}
	pu_rows_read(call, examined);
	pthread_mutex_unlock(&st->lock);
	return mem_sink_final(r);
}

int32_t mem_lane_prune(void *inst, const memd_call *call, int64_t updated_before_us,
		       uint32_t limit, uint32_t *ret_count, memd_error *err)
{
	mem_store *st = inst;
	uint64_t examined = 0;
	uint32_t count = 0;
	size_t i = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0)
		return r;
	if (!ret_count)
		return memd_error_set(err, MEMD_EINVAL, 0, "no output count");
	pthread_mutex_lock(&st->lock);
	while (i < st->all_lanes.n && count < limit) {
		mem_lane *l = st->all_lanes.v[i];
		mem_user *u = l->owner;

		if (l->updated_us >= updated_before_us)
			break;
		examined++;
		if ((l->flags & MEMD_LANE_SUSPENDED) || l->text.turn_id) {
			i++;
			continue;
		}
		examined += mem_lane_destroy(st, l) - 1;
		mem_user_drop_if_empty(st, u);
		count++;
	}
	pu_rows_read(call, examined);
	pthread_mutex_unlock(&st->lock);
	*ret_count = count;
	return 0;
}

/* ---- inbox ------------------------------------------------------------ */

int32_t mem_inbox_put(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *key, const memd_inbox_item *item, uint32_t *ret_depth,
		      memd_error *err)
{
	mem_store *st = inst;
	mem_inbox_entry *e;
	mem_lane *l = NULL;
	uint32_t depth = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = mem_check_lane_scope(scope, key, err)) < 0)
		return r;
	if (!item || !MEM_HAS(item, created_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "inbox item is missing or too small");
	if (!ret_depth)
		return memd_error_set(err, MEMD_EINVAL, 0, "no output depth");
	if (item->mode != MEMD_INBOX_INTERRUPT && item->mode != MEMD_INBOX_QUEUE)
		return memd_error_set(err, MEMD_EINVAL, 0, "unknown inbox mode %u", item->mode);
	if ((r = pu_check_id("inbox item id", item->id, err)) < 0)
		return r;
	if (!item->body_json)
		return memd_error_set(err, MEMD_EINVAL, 0, "inbox item '%.64s' has no body",
				      item->id);
	if ((r = mem_check_json_object("inbox item body", item->body_json, err)) < 0)
		return r;
	e = calloc(1, sizeof(*e));
	if (!e || mem_dup_opt(item->id, &e->id) < 0 ||
	    mem_dup_opt(item->body_json, &e->body_json) < 0) {
		mem_inbox_entry_free(e);
		return mem_enomem(err);
	}
	e->mode = item->mode;
	e->created_us = item->created_us;
	pthread_mutex_lock(&st->lock);
	r = mem_lane_require(st, scope, key, &l, err);
	if (r == 0) {
		e->position = ++l->last_position;
		if (item->mode == MEMD_INBOX_INTERRUPT || !l->slot) {
			mem_inbox_entry_free(l->slot);
			l->slot = e;
		} else if (l->tail) {
			l->tail->next = e;
			l->tail = e;
			l->n_fifo++;
		} else {
			l->head = l->tail = e;
			l->n_fifo++;
		}
		e = NULL;
		depth = mem_lane_depth(l);
		pu_rows_read(call, 1);
	}
	pthread_mutex_unlock(&st->lock);
	mem_inbox_entry_free(e);
	if (r == 0)
		*ret_depth = depth;
	return r;
}

int32_t mem_inbox_take(void *inst, const memd_call *call, const memd_scope *scope,
		       const char *key, const char *turn_id, int64_t now_us,
		       const memd_inbox_sink *out, uint32_t *ret_depth, memd_error *err)
{
	mem_store *st = inst;
	mem_inbox_entry *e = NULL;
	mem_lane *l = NULL;
	uint32_t depth = 0;
	int from_slot = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = mem_check_lane_scope(scope, key, err)) < 0 ||
	    (r = pu_check_id("turn id", turn_id, err)) < 0)
		return r;
	if (!out || !out->item || !ret_depth)
		return memd_error_set(err, MEMD_EINVAL, 0, "no inbox sink or output depth");
	pthread_mutex_lock(&st->lock);
	if ((r = mem_lane_require(st, scope, key, &l, err)) < 0)
		goto out;
	if (!l->text.turn_id || strcmp(l->text.turn_id, turn_id) != 0) {
		r = memd_error_set(err, MEMD_ECONFLICT, 0,
				   "turn '%.64s' does not hold lane '%.64s'", turn_id, key);
		goto out;
	}
	if (l->turn_lease_until_us <= now_us) {
		r = memd_error_set(err, MEMD_ECONFLICT, 0, "the lease of turn '%.64s' has ended",
				   turn_id);
		goto out;
	}
	e = l->slot ? l->slot : l->head;
	from_slot = l->slot != NULL;
	pu_rows_read(call, 1 + (e ? 1 : 0));
	/* Deliver first: a sink that fails leaves the item where it was. */
	if (e && (r = mem_inbox_deliver(e, from_slot, out, err)) < 0) {
		e = NULL;
		goto out;
	}
	r = 0;
	if (e && from_slot) {
		/* The FIFO head moves up into the emptied slot. */
		l->slot = l->head;
		if (l->head) {
			l->head = l->head->next;
			l->slot->next = NULL;
			l->n_fifo--;
			if (!l->head)
				l->tail = NULL;
		}
	} else if (e) {
		l->head = e->next;
		l->n_fifo--;
		if (!l->head)
			l->tail = NULL;
	}
	depth = mem_lane_depth(l);
out:
	pthread_mutex_unlock(&st->lock);
	mem_inbox_entry_free(e);
	if (r == 0)
		*ret_depth = depth;
	return r;
}

int32_t mem_inbox_list(void *inst, const memd_call *call, const memd_scope *scope,
		       const char *key, const memd_inbox_sink *out, memd_error *err)
{
	mem_store *st = inst;
	mem_lane *l = NULL;
	uint64_t examined = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = mem_check_lane_scope(scope, key, err)) < 0)
		return r;
	if (!out || !out->item)
		return memd_error_set(err, MEMD_EINVAL, 0, "no inbox sink");
	pthread_mutex_lock(&st->lock);
	if ((r = mem_lane_require(st, scope, key, &l, err)) < 0)
		goto out;
	examined = 1;
	if (l->slot) {
		examined++;
		r = mem_inbox_deliver(l->slot, 1, out, err);
	}
	for (const mem_inbox_entry *e = l->head; e && r == 0; e = e->next) {
		examined++;
		r = mem_inbox_deliver(e, 0, out, err);
	}
	r = mem_sink_final(r);
out:
	pu_rows_read(call, examined);
	pthread_mutex_unlock(&st->lock);
	return r;
}

/* ---- session_list_ended ----------------------------------------------- */

int32_t mem_session_list_ended(void *inst, const memd_call *call, int64_t ended_before_us,
			       uint32_t limit, const memd_session_sink *out, memd_error *err)
{
	mem_store *st = inst;
	uint64_t examined = 0;
	size_t end;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0)
		return r;
	if (limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "ended session limit must be > 0");
	if (!out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "no session sink");
	pthread_mutex_lock(&st->lock);
	end = mem_ended_lower_time(st, ended_before_us);
	for (size_t i = 0; i < end && examined < limit; i++) {
		examined++;
		if ((r = mem_session_deliver(st->ended[i], out, err)) != 0)
			break;
	}
	pu_rows_read(call, examined);
	pthread_mutex_unlock(&st->lock);
	return mem_sink_final(r);
}
