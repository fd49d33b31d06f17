/* SPDX-License-Identifier: MIT */
/*
 * mem_transcripts: transcripts in the in-memory store (store.h 1.2).
 * Layout, all under the store's one lock:
 *  - a hidden event stays in its session's events[] (the audit trail);
 *    besides, every session keeps the list of its visible events and of
 *    its visible summaries, ascending by seq, so that a window ("the
 *    newest N visible") is a walk over what it returns however many
 *    events are hidden, and message_count and summary_seq are read off
 *    the lists;
 *  - hiding takes every visible event from a seq on: the tail of the
 *    visible list, so a rewind costs the events it hides, not the
 *    session's size. An UNDO needs its target to be the session's last
 *    write, so what it hides is again the tail and what it unhides sorts
 *    after everything still visible (a merge covers any other case);
 *  - an operation keeps the list of the events it hid (for its undo);
 *    events point at the operations that appended or hid them, and
 *    operations live as long as their session;
 *  - state history: one array per session, ascending (version, key);
 *  - each user's sessions also in ascending (updated_us, id) order for
 *    the activity listing.
 */
#include "mem_transcripts.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define MEM_PREFIX_APP "app:"
#define MEM_PREFIX_USER "user:"

/* ---- event lists ------------------------------------------------------ */

size_t mem_evlist_lower(const mem_evlist *l, int64_t seq)
{
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (l->v[mid]->seq < seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int mem_evlist_reserve(mem_evlist *l, size_t extra)
{
	return mem_grow((void **)&l->v, &l->cap, l->n + extra, sizeof(*l->v));
}

void mem_evlist_push(mem_evlist *l, mem_event *e)
{
	l->v[l->n++] = e;
}

void mem_evlist_free(mem_evlist *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* Commit step: drop the events with first <= seq <= last. */
static void mem_evlist_remove_range(mem_evlist *l, int64_t first, int64_t last)
{
	size_t lo = mem_evlist_lower(l, first);
	size_t hi = mem_evlist_lower(l, last + 1);

	memmove(l->v + lo, l->v + hi, (l->n - hi) * sizeof(*l->v));
	l->n -= hi - lo;
}

/* Commit step: merge add[0..n) (ascending seq, none in l) into l, only its
 * summaries when only_summaries. Room was reserved. */
static void mem_evlist_merge(mem_evlist *l, mem_event *const *add, size_t n, int only_summaries)
{
	size_t k = 0, i, j, w;

	for (j = 0; j < n; j++)
		k += !only_summaries || add[j]->is_summary;
	if (!k)
		return;
	i = l->n;
	j = n;
	w = l->n + k;
	/* From the back: each step writes the larger of the two tails. */
	while (j > 0) {
		mem_event *e = add[j - 1];
		if (only_summaries && !e->is_summary) {
			j--;
			continue;
		}
		if (i > 0 && l->v[i - 1]->seq > e->seq) {
			l->v[--w] = l->v[--i];
		} else {
			l->v[--w] = e;
			j--;
		}
	}
	l->n += k;
}

/* ---- activity order --------------------------------------------------- */

/* <0, 0, >0 as s sorts before, at or after (updated, id). */
static int mem_activity_cmp(const mem_session *s, int64_t updated, const char *id)
{
	if (s->updated_us != updated)
		return s->updated_us < updated ? -1 : 1;
	if (!id)
		return 1;
	return strcmp(s->id, id);
}

size_t mem_activity_lower(const mem_user *u, int64_t updated, const char *id)
{
	size_t lo = 0, hi = u->n_sessions;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (mem_activity_cmp(u->by_activity[mid], updated, id) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int mem_activity_reserve(mem_user *u)
{
	return mem_grow((void **)&u->by_activity, &u->cap_by_activity, u->n_sessions + 1,
			sizeof(*u->by_activity));
}

/* Insert s, the user's list holding `have` sessions (room reserved). */
static void mem_activity_insert(mem_user *u, mem_session *s, size_t have)
{
	size_t lo = 0, hi = have;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (mem_activity_cmp(u->by_activity[mid], s->updated_us, s->id) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	memmove(u->by_activity + lo + 1, u->by_activity + lo, (have - lo) * sizeof(*u->by_activity));
	u->by_activity[lo] = s;
}

/* Remove s from the user's list holding `have` sessions. */
static void mem_activity_remove(mem_user *u, const mem_session *s, size_t have)
{
	size_t lo = 0, hi = have;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (mem_activity_cmp(u->by_activity[mid], s->updated_us, s->id) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < have && u->by_activity[lo] == s)
		memmove(u->by_activity + lo, u->by_activity + lo + 1,
			(have - lo - 1) * sizeof(*u->by_activity));
}

/* Both are called while u->n_sessions still counts the sessions without s
 * (link: before memory.c counts it in) or with it (unlink: before it
 * counts it out): see memory.c's mem_user_link and mem_user_unlink. */
void mem_activity_link(mem_session *s)
{
	mem_activity_insert(s->owner, s, s->owner->n_sessions);
}

void mem_activity_unlink(const mem_session *s)
{
	mem_activity_remove(s->owner, s, s->owner->n_sessions);
}

void mem_session_touch(mem_session *s, int64_t updated_us)
{
	mem_user *u = s->owner;

	if (s->updated_us == updated_us)
		return;
	mem_activity_remove(u, s, u->n_sessions);
	s->updated_us = updated_us;
	mem_activity_insert(u, s, u->n_sessions - 1);
}

/* ---- freeing ---------------------------------------------------------- */

static void mem_op_free(mem_op *op)
{
	if (!op)
		return;
	free(op->id);
	free(op->undo_of);
	mem_evlist_free(&op->hid);
	free(op);
}

static void mem_change_free(mem_state_change *c)
{
	free(c->key);
	free(c->old_json);
	free(c->new_json);
}

void mem_session_transcripts_free(mem_session *s)
{
	for (size_t i = 0; i < s->n_ops; i++)
		mem_op_free(s->ops[i]);
	free(s->ops);
	hmap_clear(&s->op_ids, NULL);
	for (size_t i = 0; i < s->n_history; i++)
		mem_change_free(&s->history[i]);
	free(s->history);
	mem_evlist_free(&s->summaries);
	mem_evlist_free(&s->visible);
	mem_evlist_free(&s->visible_summaries);
	free(s->hide_feed);
}

/* ---- state expectations ----------------------------------------------- */

/* scope's bare key with its prefix, malloc'd; NULL on ENOMEM. */
static char *mem_prefixed_key(int32_t scope, const char *bare)
{
	const char *prefix = scope == PU_SCOPE_APP ? MEM_PREFIX_APP :
			     scope == PU_SCOPE_USER ? MEM_PREFIX_USER : "";
	size_t pl = strlen(prefix), bl = strlen(bare);
	char *k = malloc(pl + bl + 1);

	if (k) {
		memcpy(k, prefix, pl);
		memcpy(k + pl, bare, bl + 1);
	}
	return k;
}

/* The stored JSON text of (scope, bare) for s, or NULL if absent. */
static const char *mem_state_current(const mem_store *st, mem_session *s, int32_t scope,
				     const char *bare)
{
	mem_app *a = scope == PU_SCOPE_APP ? mem_app_find(st, s->app) : NULL;
	const hmap *m;
	hmap_node *n;

	if (scope == PU_SCOPE_APP && !a)
		return NULL;
	m = mem_state_map(s, a, scope);
	n = hmap_find(m, bare, strlen(bare));
	return n ? n->value : NULL;
}

/* Do two JSON texts (NULL = absent) hold equal values? */
static int mem_json_same(const char *a, const char *b)
{
	json_t *x, *y;
	int same;

	if (!a || !b)
		return !a && !b;
	if (strcmp(a, b) == 0)
		return 1;
	x = json_loads(a, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	y = json_loads(b, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	same = x && y && json_equal(x, y);
	json_decref(x);
	json_decref(y);
	return same;
}

typedef struct mem_expect_ctx {
	const mem_store *st;
	mem_session *s;
	mem_state_ops *o;
	json_t *missed;        /* the keys that will not change */
	uint8_t *skip;         /* per op of o: decided skip, applied at the end */
} mem_expect_ctx;

static int32_t mem_expect_one(void *userdata, int32_t scope, const char *key,
			      const char *value_json)
{
	mem_expect_ctx *c = userdata;
	mem_state_op *op = NULL;
	char *full;
	int ok;

	for (size_t i = 0; i < c->o->n && !op; i++)
		if (c->o->ops[i].scope == scope && strcmp(c->o->ops[i].node->key, key) == 0)
			op = &c->o->ops[i];
	ok = op && mem_json_same(mem_state_current(c->st, c->s, scope, key), value_json);
	if (ok)
		return 0;
	if (op)
		c->skip[op - c->o->ops] = 1;
	full = mem_prefixed_key(scope, key);
	if (!full || json_array_append_new(c->missed, json_string(full)) < 0) {
		free(full);
		return MEMD_ENOMEM;
	}
	free(full);
	return 0;
}

int32_t mem_state_expect(const mem_store *st, mem_session *s, mem_state_ops *o,
			 const char *expect_json, char **ret_not_restored, memd_error *err)
{
	mem_expect_ctx c = { .st = st, .s = s, .o = o };
	char *text = NULL;
	int32_t r;

	c.missed = json_array();
	c.skip = calloc(o->n ? o->n : 1, 1);
	if (!c.missed || !c.skip) {
		r = mem_enomem(err);
		goto out;
	}
	r = pu_state_delta_foreach(expect_json, mem_expect_one, &c, err);
	if (r == MEMD_ENOMEM)
		r = mem_enomem(err);
	if (r < 0)
		goto out;
	text = json_dumps(c.missed, JSON_COMPACT);
	if (!text) {
		r = mem_enomem(err);
		goto out;
	}
	for (size_t i = 0; i < o->n; i++)
		if (c.skip[i])
			o->ops[i].skip = 1;
	*ret_not_restored = text;
	r = 0;
out:
	json_decref(c.missed);
	free(c.skip);
	return r;
}

/* ---- state history ---------------------------------------------------- */

static int mem_change_key_cmp(const void *a, const void *b)
{
	return strcmp(((const mem_state_change *)a)->key, ((const mem_state_change *)b)->key);
}

void mem_history_abort(mem_history_new *h)
{
	for (size_t i = 0; i < h->n; i++)
		mem_change_free(&h->v[i]);
	free(h->v);
	memset(h, 0, sizeof(*h));
}

int32_t mem_history_stage(const mem_store *st, mem_session *s, const mem_state_ops *o,
			  mem_history_new *ret, memd_error *err)
{
	mem_history_new h = { 0 };

	if (o->n && !(h.v = calloc(o->n, sizeof(*h.v))))
		return mem_enomem(err);
	for (size_t i = 0; i < o->n; i++) {
		const mem_state_op *op = &o->ops[i];
		mem_state_change *c = &h.v[h.n];

		if (op->skip)
			continue;
		h.n++;
		if (!(c->key = mem_prefixed_key(op->scope, op->node->key)) ||
		    mem_dup_opt(mem_state_current(st, s, op->scope, op->node->key), &c->old_json) < 0 ||
		    mem_dup_opt(op->node->value, &c->new_json) < 0)
			goto nomem;
	}
	if (h.n > 1)
		qsort(h.v, h.n, sizeof(*h.v), mem_change_key_cmp);
	if (mem_grow((void **)&s->history, &s->cap_history, s->n_history + h.n,
		     sizeof(*s->history)) < 0)
		goto nomem;
	*ret = h;
	return 0;
nomem:
	mem_history_abort(&h);
	return mem_enomem(err);
}

void mem_history_commit(mem_session *s, mem_history_new *h, int64_t version, int64_t seq,
			int64_t at_us, const mem_op *op)
{
	for (size_t i = 0; i < h->n; i++) {
		mem_state_change *c = &s->history[s->n_history++];
		*c = h->v[i];
		c->version = version;
		c->seq = seq;
		c->at_us = at_us;
		c->operation = op;
	}
	free(h->v);
	memset(h, 0, sizeof(*h));
}

/* ---- an append's transcript operation --------------------------------- */

void mem_op_abort(mem_op_new *n)
{
	hmap_node_free(n->node);
	mem_op_free(n->op);
	free(n->unhide);
	memset(n, 0, sizeof(*n));
}

/* What the UNDO of target hides and unhides, into n (n->op allocated). */
static int32_t mem_undo_plan(mem_session *s, const mem_op *target, mem_op_new *n,
			     memd_error *err)
{
	size_t hide = 0;

	for (int64_t q = target->first_seq; q && q <= target->last_seq; q++)
		hide += s->events[q - 1]->hidden_us == 0;
	if (hide && mem_evlist_reserve(&n->op->hid, hide) < 0)
		return mem_enomem(err);
	for (int64_t q = target->first_seq; q && q <= target->last_seq; q++)
		if (s->events[q - 1]->hidden_us == 0)
			mem_evlist_push(&n->op->hid, s->events[q - 1]);
	if (target->hid.n && !(n->unhide = malloc(target->hid.n * sizeof(*n->unhide))))
		return mem_enomem(err);
	for (size_t i = 0; i < target->hid.n; i++)
		if (target->hid.v[i]->hidden_by == target)
			n->unhide[n->n_unhide++] = target->hid.v[i];
	return 0;
}

int32_t mem_op_prepare(mem_store *st, mem_session *s, const memd_transcript_op *in,
		       size_t n_append, mem_op_new *ret, memd_error *err)
{
	mem_op_new n;
	hmap_node *tn = NULL;
	size_t grow;
	int32_t r;

	memset(&n, 0, sizeof(n));
	if (hmap_find(&s->op_ids, in->id, strlen(in->id)))
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "session '%.64s' has an operation '%.64s' already", s->id, in->id);
	if (in->kind == MEMD_OP_UNDO) {
		tn = hmap_find(&s->op_ids, in->undo_id, strlen(in->undo_id));
		if (!tn)
			return memd_error_set(err, MEMD_ENOTFOUND, 0,
					      "session '%.64s' has no operation '%.64s'", s->id,
					      in->undo_id);
		n.target = tn->value;
		if (n.target->undone_by)
			return memd_error_set(err, MEMD_ECONFLICT, 0,
					      "operation '%.64s' was undone by '%.64s' already",
					      in->undo_id, n.target->undone_by->id);
		if (n.target->version != s->version)
			return memd_error_set(err, MEMD_ECONFLICT, 0,
					      "operation '%.64s' left version %lld, the session is at "
					      "%lld: it can no longer be undone",
					      in->undo_id, (long long)n.target->version,
					      (long long)s->version);
	}
	n.op = calloc(1, sizeof(*n.op));
	if (!n.op || !(n.op->id = mem_strdup(in->id)) ||
	    (in->kind == MEMD_OP_UNDO && !(n.op->undo_of = mem_strdup(in->undo_id))) ||
	    !(n.node = hmap_node_new(in->id, strlen(in->id), n.op))) {
		r = mem_enomem(err);
		goto fail;
	}
	n.op->kind = in->kind;
	if (in->kind == MEMD_OP_UNDO) {
		if ((r = mem_undo_plan(s, n.target, &n, err)) < 0)
			goto fail;
	} else {
		n.op->hide_from_seq = in->hide_from_seq;
		n.keep_visible = mem_evlist_lower(&s->visible, in->hide_from_seq);
		grow = s->visible.n - n.keep_visible;
		if (grow && mem_evlist_reserve(&n.op->hid, grow) < 0) {
			r = mem_enomem(err);
			goto fail;
		}
		for (size_t i = n.keep_visible; i < s->visible.n; i++)
			mem_evlist_push(&n.op->hid, s->visible.v[i]);
	}
	grow = n_append + n.n_unhide;
	if (mem_evlist_reserve(&s->visible, grow) < 0 ||
	    mem_evlist_reserve(&s->visible_summaries, grow) < 0 ||
	    mem_grow((void **)&st->feed, &st->cap_feed,
		     st->n_feed + n_append + n.op->hid.n + n.n_unhide, sizeof(*st->feed)) < 0 ||
	    mem_grow((void **)&s->hide_feed, &s->cap_hide_feed, s->n_hide_feed + n.op->hid.n,
		     sizeof(*s->hide_feed)) < 0 ||
	    mem_grow((void **)&s->ops, &s->cap_ops, s->n_ops + 1, sizeof(*s->ops)) < 0 ||
	    hmap_reserve(&s->op_ids, 1) < 0) {
		r = mem_enomem(err);
		goto fail;
	}
	*ret = n;
	return 0;
fail:
	mem_op_abort(&n);
	return r;
}

/* Commit step: e becomes hidden by op, with its HIDE feed record. */
static void mem_hide(mem_store *st, mem_session *s, mem_event *e, const mem_op *op,
		     int64_t now_us)
{
	mem_feed_entry f = { .kind = MEMD_FEED_HIDE, .event = e };

	e->hidden_us = now_us;
	e->hidden_by = op;
	e->hidden_kind = op->kind;
	mem_feed_push(st, f);
	s->hide_feed[s->n_hide_feed++] = st->feed_head;
}

void mem_op_apply(mem_store *st, mem_session *s, mem_op_new *n, int64_t now_us)
{
	mem_op *op = n->op;

	if (!op)
		return;
	if (op->kind != MEMD_OP_UNDO) {
		for (size_t i = 0; i < op->hid.n; i++)
			mem_hide(st, s, op->hid.v[i], op, now_us);
		s->visible.n = n->keep_visible;
		s->visible_summaries.n = mem_evlist_lower(&s->visible_summaries, op->hide_from_seq);
		return;
	}
	/* UNDO: what the target hid comes back (a new EVENT record each, the
	 * old one dies), then what it appended is hidden. */
	for (size_t i = 0; i < n->n_unhide; i++) {
		mem_event *e = n->unhide[i];
		mem_feed_entry f = { .kind = MEMD_FEED_EVENT, .event = e };

		e->hidden_us = 0;
		e->hidden_by = NULL;
		e->hidden_kind = 0;
		mem_feed_kill(st, e->position);
		mem_feed_push(st, f);
	}
	for (size_t i = 0; i < op->hid.n; i++)
		mem_hide(st, s, op->hid.v[i], op, now_us);
	if (n->target->first_seq) {
		mem_evlist_remove_range(&s->visible, n->target->first_seq, n->target->last_seq);
		mem_evlist_remove_range(&s->visible_summaries, n->target->first_seq,
					n->target->last_seq);
	}
	mem_evlist_merge(&s->visible, n->unhide, n->n_unhide, 0);
	mem_evlist_merge(&s->visible_summaries, n->unhide, n->n_unhide, 1);
	n->target->undone_by = op;
}

void mem_op_record(mem_session *s, mem_op_new *n, int64_t now_us, int64_t first_seq,
		   int64_t last_seq)
{
	mem_op *op = n->op;

	if (!op)
		return;
	op->created_us = now_us;
	op->version = s->version;
	op->first_seq = first_seq;
	op->last_seq = last_seq;
	op->hidden_count = (int64_t)op->hid.n;
	op->unhidden_count = (int64_t)n->n_unhide;
	s->ops[s->n_ops++] = op;
	hmap_insert(&s->op_ids, n->node);
	free(n->unhide);
	memset(n, 0, sizeof(*n));
}

/* ---- operation_list, operation_get ------------------------------------ */

static int32_t mem_op_deliver(const mem_op *op, const memd_operation_sink *out, memd_error *err)
{
	memd_operation rec;

	memset(&rec, 0, sizeof(rec));
	rec.struct_size = sizeof(rec);
	rec.kind = op->kind;
	rec.id = op->id;
	rec.created_us = op->created_us;
	rec.version = op->version;
	rec.hide_from_seq = op->hide_from_seq;
	rec.first_seq = op->first_seq;
	rec.last_seq = op->last_seq;
	rec.hidden_count = op->hidden_count;
	rec.unhidden_count = op->unhidden_count;
	rec.undo_of = op->undo_of;
	rec.undone_by = op->undone_by ? op->undone_by->id : NULL;
	return mem_sink_result(out->operation(out->userdata, &rec), err);
}

int32_t mem_operation_list(void *inst, const memd_call *call, const memd_scope *scope,
			   uint32_t limit, const memd_operation_sink *out, memd_error *err)
{
	mem_store *st = inst;
	mem_session *s = NULL;
	size_t sent = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 1, err)) < 0)
		return r;
	if (!out || !out->operation)
		return memd_error_set(err, MEMD_EINVAL, 0, "no operation sink");
	pthread_mutex_lock(&st->lock);
	if ((r = mem_session_require(st, scope, &s, err)) < 0)
		goto out;
	for (size_t i = s->n_ops; i-- > 0 && (!limit || sent < limit);) {
		sent++;
		if ((r = mem_op_deliver(s->ops[i], out, err)) != 0)
			break;
	}
	pu_rows_read(call, sent);
	r = mem_sink_final(r);
out:
	pthread_mutex_unlock(&st->lock);
	return r;
}

int32_t mem_operation_get(void *inst, const memd_call *call, const memd_scope *scope,
			  const char *id, const memd_operation_sink *out, memd_error *err)
{
	mem_store *st = inst;
	mem_session *s = NULL;
	hmap_node *n;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 1, err)) < 0 ||
	    (r = pu_check_id("operation id", id, err)) < 0)
		return r;
	if (!out || !out->operation)
		return memd_error_set(err, MEMD_EINVAL, 0, "no operation sink");
	pthread_mutex_lock(&st->lock);
	if ((r = mem_session_require(st, scope, &s, err)) < 0)
		goto out;
	n = hmap_find(&s->op_ids, id, strlen(id));
	if (!n) {
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' has no operation '%.64s'",
				   s->id, id);
		goto out;
	}
	pu_rows_read(call, 1);
	r = mem_sink_final(mem_op_deliver(n->value, out, err));
out:
	pthread_mutex_unlock(&st->lock);
	return r;
}

/* ---- state_history ---------------------------------------------------- */

/* The first index of s->history after (version, key) in (version, key)
 * order; a NULL key bounds by version alone: after every change of
 * version (except version 0 with a NULL key: from the first). */
static size_t mem_history_after(const mem_session *s, int64_t version, const char *key)
{
	size_t lo = 0, hi = s->n_history;

	if (version == 0 && !key)
		return 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const mem_state_change *c = &s->history[mid];
		int after = c->version != version ? c->version > version :
			    key ? strcmp(c->key, key) > 0 : 0;
		if (after)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* The first index of s->history with seq >= seq (seqs never go down). */
static size_t mem_history_from_seq(const mem_session *s, int64_t seq)
{
	size_t lo = 0, hi = s->n_history;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->history[mid].seq < seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int32_t mem_state_history(void *inst, const memd_call *call, const memd_scope *scope,
			  const memd_state_history_query *q, const memd_state_change_sink *out,
			  memd_error *err)
{
	mem_store *st = inst;
	mem_session *s = NULL;
	size_t i, at, sent = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 1, err)) < 0)
		return r;
	if (!q || !MEM_HAS(q, from_seq))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "state history query is missing or too small");
	if (q->after_version < 0 || q->from_seq < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "state history bounds must not be negative");
	if (!out || !out->change)
		return memd_error_set(err, MEMD_EINVAL, 0, "no state change sink");
	pthread_mutex_lock(&st->lock);
	if ((r = mem_session_require(st, scope, &s, err)) < 0)
		goto out;
	i = mem_history_after(s, q->after_version, q->after_key);
	at = mem_history_from_seq(s, q->from_seq);
	if (at > i)
		i = at;
	for (; i < s->n_history && (!q->limit || sent < q->limit); i++) {
		const mem_state_change *c = &s->history[i];
		memd_state_change rec;

		memset(&rec, 0, sizeof(rec));
		rec.struct_size = sizeof(rec);
		rec.version = c->version;
		rec.seq = c->seq;
		rec.key = c->key;
		rec.old_json = c->old_json;
		rec.new_json = c->new_json;
		rec.at_us = c->at_us;
		rec.operation = c->operation ? c->operation->id : NULL;
		sent++;
		if ((r = mem_sink_result(out->change(out->userdata, &rec), err)) != 0)
			break;
	}
	pu_rows_read(call, sent);
	r = mem_sink_final(r);
out:
	pthread_mutex_unlock(&st->lock);
	return r;
}
