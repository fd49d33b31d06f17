/* SPDX-License-Identifier: MIT */
/*
 * mem_memories: long-term memories of the in-memory store (store.h 1.3).
 * Layout, all under the store's one lock:
 *  - each user keeps its memory rows in a hash (id -> row) and in an
 *    array newest first by (created_us, id) for memory_list's keyset
 *    paging; expired rows stay there (invisible to reads) until
 *    memory_expire deletes them;
 *  - each user keeps the history of every memory id in a hash (id ->
 *    list of changes, oldest first), each change with its own snapshot of
 *    the row, so that it outlives the row;
 *  - the rows with an expiry sit in one store-wide array ascending by
 *    (expires_us, app, user, id), so that memory_expire takes the oldest
 *    expiries first without looking at anything else;
 *  - a row's MEMORY feed record points at the row; an update kills it and
 *    pushes a new one, a delete kills it and pushes a MEMORY_DELETE
 *    record owning (app, user, id).
 * A commit follows memory.c's two phases: every write is checked against
 * the state the earlier writes of the commit leave and everything is
 * allocated first (a failure changes nothing), then it is applied in an
 * order of steps that cannot fail.
 */
#include "mem_memories.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* The history actor of memory_expire's deletions. */
#define MEM_ACTOR_RETENTION "retention"

/* The kinds a memory may have (store.h memd_memory.kind). */
static const char *const mem_memory_kinds[] = { "fact", "preference", "instruction", "episode" };
#define MEM_MEMORY_KINDS (sizeof(mem_memory_kinds) / sizeof(mem_memory_kinds[0]))

/* One entry of a memory's history (memd_memory_change). */
typedef struct mem_mchange {
	uint32_t op;           /* MEMD_MEM_* */
	mem_memory *memory;    /* snapshot after the change (as it was for DELETE/EXPIRE) */
	char *actor;
	char *reason;          /* NULL = none */
	int64_t at_us;
} mem_mchange;

/* Every change of one memory id, oldest first. */
typedef struct mem_mhist {
	mem_mchange *v;
	size_t n;
	size_t cap;
} mem_mhist;

/* ---- freeing and copying ---------------------------------------------- */

static void mem_strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void mem_memory_free(mem_memory *m)
{
	if (!m)
		return;
	free(m->app);
	free(m->user);
	free(m->id);
	free(m->text);
	free(m->kind);
	free(m->topics_json);
	free(m->entities_json);
	free(m->source_session);
	free(m->source_json);
	mem_strv_free(m->topics, m->n_topics);
	mem_strv_free(m->entities, m->n_entities);
	free(m);
}

static void mem_mchange_clear(mem_mchange *c)
{
	mem_memory_free(c->memory);
	free(c->actor);
	free(c->reason);
	memset(c, 0, sizeof(*c));
}

static void mem_mhist_free(void *p)
{
	mem_mhist *h = p;

	if (!h)
		return;
	for (size_t i = 0; i < h->n; i++)
		mem_mchange_clear(&h->v[i]);
	free(h->v);
	free(h);
}

/* A copy of m's columns (no parsed tags: a history snapshot), or NULL on
 * ENOMEM. */
static mem_memory *mem_memory_snapshot(const mem_memory *m)
{
	mem_memory *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (mem_dup_opt(m->app, &c->app) < 0 || mem_dup_opt(m->user, &c->user) < 0 ||
	    mem_dup_opt(m->id, &c->id) < 0 || mem_dup_opt(m->text, &c->text) < 0 ||
	    mem_dup_opt(m->kind, &c->kind) < 0 ||
	    mem_dup_opt(m->topics_json, &c->topics_json) < 0 ||
	    mem_dup_opt(m->entities_json, &c->entities_json) < 0 ||
	    mem_dup_opt(m->source_session, &c->source_session) < 0 ||
	    mem_dup_opt(m->source_json, &c->source_json) < 0) {
		mem_memory_free(c);
		return NULL;
	}
	c->created_us = m->created_us;
	c->updated_us = m->updated_us;
	c->expires_us = m->expires_us;
	c->version = m->version;
	c->position = m->position;
	c->tokens = m->tokens;
	return c;
}

void mem_memory_fill(const mem_memory *m, memd_memory *out)
{
	memset(out, 0, sizeof(*out));
	out->struct_size = sizeof(*out);
	out->app = m->app;
	out->user = m->user;
	out->id = m->id;
	out->text = m->text;
	out->kind = m->kind;
	out->topics_json = m->topics_json;
	out->entities_json = m->entities_json;
	out->source_session = m->source_session;
	out->source_json = m->source_json;
	out->created_us = m->created_us;
	out->updated_us = m->updated_us;
	out->expires_us = m->expires_us;
	out->version = m->version;
	out->position = m->position;
	out->tokens = m->tokens;
}

static int32_t mem_memory_deliver(const mem_memory *m, const memd_memory_sink *out,
				  memd_error *err)
{
	memd_memory rec;

	if (!out || !out->memory)
		return 0;
	mem_memory_fill(m, &rec);
	return mem_sink_result(out->memory(out->userdata, &rec), err);
}

/* ---- checking input --------------------------------------------------- */

/* Parse text, a JSON array of strings, into copies of its elements. */
static int32_t mem_tags_parse(const char *what, const char *text, char ***ret, size_t *ret_n,
			      memd_error *err)
{
	json_error_t jerr;
	json_t *v;
	char **tags = NULL;
	size_t n = 0;
	int32_t r = 0;

	if (!text)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory %s must be a JSON array", what);
	v = json_loads(text, 0, &jerr);
	if (!v)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory %s is not JSON: %s", what,
				      jerr.text);
	if (!json_is_array(v)) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "memory %s must be a JSON array", what);
		goto out;
	}
	tags = calloc(json_array_size(v) + 1, sizeof(*tags));
	if (!tags) {
		r = mem_enomem(err);
		goto out;
	}
	for (; n < json_array_size(v); n++) {
		json_t *t = json_array_get(v, n);
		if (!json_is_string(t)) {
			r = memd_error_set(err, MEMD_EINVAL, 0,
					   "memory %s must be an array of strings", what);
			goto out;
		}
		if (!(tags[n] = mem_strdup(json_string_value(t)))) {
			r = mem_enomem(err);
			goto out;
		}
	}
out:
	json_decref(v);
	if (r < 0) {
		if (tags)
			mem_strv_free(tags, n);
		return r;
	}
	*ret = tags;
	*ret_n = n;
	return 0;
}

static int mem_kind_known(const char *kind)
{
	for (size_t i = 0; kind && i < MEM_MEMORY_KINDS; i++)
		if (strcmp(kind, mem_memory_kinds[i]) == 0)
			return 1;
	return 0;
}

/* A new row from in (ADD/UPDATE): every column checked and copied;
 * version, created_us and position are the caller's to set. */
static int32_t mem_memory_make(const memd_memory *in, mem_memory **ret, memd_error *err)
{
	mem_memory *m;
	int32_t r;

	if (!in->text)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory '%.64s' has no text", in->id);
	if (!mem_kind_known(in->kind))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "memory kind '%.32s' is not one of fact, preference, "
				      "instruction, episode",
				      in->kind ? in->kind : "(null)");
	if (in->expires_us < 0 || in->tokens < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "memory expires_us and tokens must not be negative");
	if ((in->source_session &&
	     (r = pu_check_id("memory source session", in->source_session, err)) < 0) ||
	    (r = mem_check_json_object("memory source", in->source_json, err)) < 0)
		return r;
	m = calloc(1, sizeof(*m));
	if (!m)
		return mem_enomem(err);
	if ((r = mem_tags_parse("topics", in->topics_json, &m->topics, &m->n_topics, err)) < 0 ||
	    (r = mem_tags_parse("entities", in->entities_json, &m->entities, &m->n_entities,
				err)) < 0) {
		mem_memory_free(m);
		return r;
	}
	if (mem_dup_opt(in->app, &m->app) < 0 || mem_dup_opt(in->user, &m->user) < 0 ||
	    mem_dup_opt(in->id, &m->id) < 0 || mem_dup_opt(in->text, &m->text) < 0 ||
	    mem_dup_opt(in->kind, &m->kind) < 0 ||
	    mem_dup_opt(in->topics_json, &m->topics_json) < 0 ||
	    mem_dup_opt(in->entities_json, &m->entities_json) < 0 ||
	    mem_dup_opt(in->source_session, &m->source_session) < 0 ||
	    mem_dup_opt(in->source_json, &m->source_json) < 0) {
		mem_memory_free(m);
		return mem_enomem(err);
	}
	m->updated_us = in->updated_us;
	m->expires_us = in->expires_us;
	m->tokens = in->tokens;
	*ret = m;
	return 0;
}

/* Check one write's shape (not against the stored rows). */
static int32_t mem_write_check(const memd_scope *scope, const memd_memory_write *w,
			       memd_error *err)
{
	const memd_memory *m;
	int32_t r;

	if (!w || !MEM_HAS(w, reason))
		return memd_error_set(err, MEMD_EINVAL, 0, "memory write is missing or too small");
	if (w->op != MEMD_MEM_ADD && w->op != MEMD_MEM_UPDATE && w->op != MEMD_MEM_DELETE)
		return memd_error_set(err, MEMD_EINVAL, 0, "unknown memory write op %u",
				      (unsigned)w->op);
	m = w->memory;
	if (!m || !MEM_HAS(m, tokens))
		return memd_error_set(err, MEMD_EINVAL, 0, "memory record is missing or too small");
	if ((r = pu_check_id("memory id", m->id, err)) < 0)
		return r;
	if ((m->app && strcmp(m->app, scope->app) != 0) ||
	    (m->user && strcmp(m->user, scope->user) != 0))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "memory '%.64s' names another app or user than the commit",
				      m->id);
	if (w->expected_version < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "expected version must be >= 0");
	if (!w->actor || !w->actor[0])
		return memd_error_set(err, MEMD_EINVAL, 0, "memory write of '%.64s' has no actor",
				      m->id);
	return 0;
}

/* ---- orders ----------------------------------------------------------- */

/* First index of u->memory_order (newest first) whose key is strictly
 * below (created, id). */
static size_t mem_order_lower(const mem_user *u, int64_t created, const char *id)
{
	size_t lo = 0, hi = u->n_memories;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const mem_memory *m = u->memory_order[mid];
		if (mem_order_cmp(m->created_us, m->id, created, id) < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* Commit steps (room reserved): link m into / unlink it from its user's
 * order. Ids are unique per user, so m sits just before its lower bound. */
static void mem_order_link(mem_user *u, mem_memory *m)
{
	size_t at = mem_order_lower(u, m->created_us, m->id);

	memmove(u->memory_order + at + 1, u->memory_order + at,
		(u->n_memories - at) * sizeof(*u->memory_order));
	u->memory_order[at] = m;
	u->n_memories++;
}

static void mem_order_unlink(mem_user *u, const mem_memory *m)
{
	size_t at = mem_order_lower(u, m->created_us, m->id);

	if (at == 0 || u->memory_order[at - 1] != m)
		return;
	at--;
	memmove(u->memory_order + at, u->memory_order + at + 1,
		(u->n_memories - at - 1) * sizeof(*u->memory_order));
	u->n_memories--;
}

/* <0 if a sorts before b in the expiry order (expires_us, app, user, id). */
static int mem_expiry_cmp(const mem_memory *a, const mem_memory *b)
{
	int c;

	if (a->expires_us != b->expires_us)
		return a->expires_us < b->expires_us ? -1 : 1;
	if ((c = strcmp(a->app, b->app)) != 0 || (c = strcmp(a->user, b->user)) != 0)
		return c;
	return strcmp(a->id, b->id);
}

/* First index of st->expiring not below m. */
static size_t mem_expiry_lower(const mem_store *st, const mem_memory *m)
{
	size_t lo = 0, hi = st->n_expiring;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (mem_expiry_cmp(st->expiring[mid], m) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Commit steps (room reserved): a row with an expiry enters / leaves the
 * expiry order; rows without one are not in it. */
static void mem_expiry_link(mem_store *st, mem_memory *m)
{
	size_t at;

	if (!m->expires_us)
		return;
	at = mem_expiry_lower(st, m);
	memmove(st->expiring + at + 1, st->expiring + at,
		(st->n_expiring - at) * sizeof(*st->expiring));
	st->expiring[at] = m;
	st->n_expiring++;
}

static void mem_expiry_unlink(mem_store *st, const mem_memory *m)
{
	size_t at;

	if (!m->expires_us)
		return;
	at = mem_expiry_lower(st, m);
	if (at >= st->n_expiring || st->expiring[at] != m)
		return;
	memmove(st->expiring + at, st->expiring + at + 1,
		(st->n_expiring - at - 1) * sizeof(*st->expiring));
	st->n_expiring--;
}

static int mem_memory_expired(const mem_memory *m, int64_t now_us)
{
	return m->expires_us > 0 && m->expires_us <= now_us;
}

static mem_memory *mem_row_find(const mem_user *u, const char *id)
{
	hmap_node *n = u ? hmap_find(&u->memories, id, strlen(id)) : NULL;
	return n ? n->value : NULL;
}

/* Commit step: take row m out of its user (hash, order, expiry order, its
 * feed record dead) and free it. */
static void mem_row_remove(mem_store *st, mem_user *u, mem_memory *m)
{
	mem_order_unlink(u, m);
	mem_expiry_unlink(st, m);
	mem_feed_kill(st, m->position);
	hmap_node_free(hmap_remove(&u->memories, m->id, strlen(m->id)));
	mem_memory_free(m);
}

/* ---- history ---------------------------------------------------------- */

/* Where a change of id goes: its existing list, or a new one (then
 * *ret_node is the node to insert it with at commit). */
static int32_t mem_history_slot(mem_user *u, const char *id, mem_mhist **ret,
				hmap_node **ret_node, memd_error *err)
{
	hmap_node *n = hmap_find(&u->memory_history, id, strlen(id));
	mem_mhist *h;

	*ret_node = NULL;
	if (n) {
		*ret = n->value;
		return 0;
	}
	h = calloc(1, sizeof(*h));
	n = h ? hmap_node_new(id, strlen(id), h) : NULL;
	if (!n) {
		free(h);
		return mem_enomem(err);
	}
	*ret = h;
	*ret_node = n;
	return 0;
}

/* A change record (snapshot owned by it). */
static int32_t mem_mchange_make(uint32_t op, const mem_memory *row, const char *actor,
				const char *reason, int64_t at_us, mem_mchange *ret,
				memd_error *err)
{
	mem_mchange c = { .op = op, .at_us = at_us };

	if (!(c.memory = mem_memory_snapshot(row)) || mem_dup_opt(actor, &c.actor) < 0 ||
	    mem_dup_opt(reason, &c.reason) < 0) {
		mem_mchange_clear(&c);
		return mem_enomem(err);
	}
	*ret = c;
	return 0;
}

/* A MEMORY_DELETE record of row m (the feed's room is the caller's). */
static int32_t mem_tombstone_make(const mem_memory *m, mem_feed_entry *ret, memd_error *err)
{
	mem_feed_entry f = { .kind = MEMD_FEED_MEMORY_DELETE };

	if (mem_dup_opt(m->app, &f.app) < 0 || mem_dup_opt(m->user, &f.user) < 0 ||
	    mem_dup_opt(m->id, &f.memory_id) < 0) {
		mem_feed_entry_clear(&f);
		return mem_enomem(err);
	}
	*ret = f;
	return 0;
}

/* ---- commit ----------------------------------------------------------- */

/* One write of a commit, checked and allocated. */
typedef struct mem_mstage {
	uint32_t op;
	mem_memory *old;       /* UPDATE/DELETE: the row it replaces (borrowed) */
	mem_memory *row;       /* ADD/UPDATE: the new row (owned until applied) */
	hmap_node *node;       /* ADD: for u->memories */
	mem_mchange change;    /* the history entry (owned until applied) */
	mem_mhist *history; /* the list change goes to */
	hmap_node *history_node; /* a new list's node, owned until applied */
	mem_feed_entry tomb;   /* DELETE: its MEMORY_DELETE record */
	const mem_memory *delivered; /* what the sink gets: the change's snapshot */
} mem_mstage;

static void mem_mstage_free(mem_mstage *s)
{
	mem_memory_free(s->row);
	hmap_node_free(s->node);
	mem_mchange_clear(&s->change);
	if (s->history_node) {
		mem_mhist_free(s->history_node->value);
		hmap_node_free(s->history_node);
	}
	mem_feed_entry_clear(&s->tomb);
	memset(s, 0, sizeof(*s));
}

/* The row id has after the first `upto` staged writes: the latest staged
 * write of id decides (NULL after a DELETE); else the stored row. Sets
 * *ret_staged when a staged write decided. */
static mem_memory *mem_staged_row(const mem_user *u, const mem_mstage *stages, size_t upto,
				  const char *id, int *ret_staged)
{
	for (size_t i = upto; i-- > 0;) {
		const mem_mstage *s = &stages[i];
		const mem_memory *m = s->row ? s->row : s->old;
		if (strcmp(m->id, id) == 0) {
			*ret_staged = 1;
			return s->op == MEMD_MEM_DELETE ? NULL : s->row;
		}
	}
	*ret_staged = 0;
	return mem_row_find(u, id);
}

/* The history list of id among the first `upto` staged writes (a new
 * one), or NULL. */
static mem_mhist *mem_staged_history(const mem_mstage *stages, size_t upto,
					      const char *id, size_t *ret_pending)
{
	mem_mhist *found = NULL;

	*ret_pending = 0;
	for (size_t i = 0; i < upto; i++) {
		const mem_memory *m = stages[i].change.memory;
		if (strcmp(m->id, id) == 0) {
			(*ret_pending)++;
			if (stages[i].history_node)
				found = stages[i].history;
		}
	}
	return found;
}

/* Stage write w as the i-th of the commit: check it against what the
 * earlier writes leave, then allocate its row, history entry and feed
 * record. position is the feed position its record will get. */
static int32_t mem_write_stage(mem_user *u, const memd_memory_commit *c,
			       const memd_memory_write *w, mem_mstage *stages, size_t i,
			       int64_t position, memd_error *err)
{
	mem_mstage *s = &stages[i];
	const memd_memory *in = w->memory;
	mem_memory *cur, *snap_of;
	mem_mhist *h;
	size_t pending;
	int staged;
	int32_t r;

	memset(s, 0, sizeof(*s));
	s->op = w->op;
	cur = mem_staged_row(u, stages, i, in->id, &staged);
	if (w->op == MEMD_MEM_ADD) {
		if (cur)
			return memd_error_set(err, MEMD_ECONFLICT, 0, "memory '%.64s' already exists",
					      in->id);
	} else {
		if (!cur || mem_memory_expired(cur, c->now_us))
			return memd_error_set(err, MEMD_ENOTFOUND, 0, "memory '%.64s' not found",
					      in->id);
		if (w->expected_version && w->expected_version != cur->version)
			return memd_error_set(err, MEMD_ECONFLICT, 0,
					      "memory '%.64s' is at version %lld, not the expected %lld", in->id,
					      (long long)cur->version,
					      (long long)w->expected_version);
		s->old = cur;
	}
	if (w->op != MEMD_MEM_DELETE) {
		if ((r = mem_memory_make(in, &s->row, err)) < 0)
			return r;
		/* The row belongs to the commit's scope whatever in named. */
		free(s->row->app);
		free(s->row->user);
		s->row->app = mem_strdup(u->app);
		s->row->user = mem_strdup(u->user);
		if (!s->row->app || !s->row->user) {
			r = mem_enomem(err);
			goto fail;
		}
		s->row->updated_us = c->now_us;
		s->row->position = position;
		s->row->version = cur ? cur->version + 1 : 1;
		s->row->created_us = cur ? cur->created_us : c->now_us;
		if (!cur && !(s->node = hmap_node_new(in->id, strlen(in->id), NULL))) {
			r = mem_enomem(err);
			goto fail;
		}
		snap_of = s->row;
	} else {
		snap_of = cur;
		if ((r = mem_tombstone_make(cur, &s->tomb, err)) < 0)
			goto fail;
	}
	if ((r = mem_mchange_make(w->op, snap_of, w->actor, w->reason, c->now_us, &s->change,
				  err)) < 0)
		goto fail;
	h = mem_staged_history(stages, i, in->id, &pending);
	if (!h && (r = mem_history_slot(u, in->id, &h, &s->history_node, err)) < 0)
		goto fail;
	s->history = h;
	if (mem_grow((void **)&h->v, &h->cap, h->n + pending + 1, sizeof(*h->v)) < 0) {
		r = mem_enomem(err);
		goto fail;
	}
	s->delivered = s->change.memory;
	(void)staged;
	return 0;
fail:
	mem_mstage_free(s);
	return r;
}

/* Commit step: apply staged write s (consumes it). */
static void mem_write_apply(mem_store *st, mem_user *u, mem_mstage *s)
{
	if (s->history_node) {
		hmap_insert(&u->memory_history, s->history_node);
		s->history_node = NULL;
	}
	s->history->v[s->history->n++] = s->change;
	memset(&s->change, 0, sizeof(s->change));
	if (s->op == MEMD_MEM_DELETE) {
		mem_row_remove(st, u, s->old);
		mem_feed_push(st, s->tomb);
		memset(&s->tomb, 0, sizeof(s->tomb));
		return;
	}
	if (s->op == MEMD_MEM_UPDATE) {
		hmap_node *n = hmap_find(&u->memories, s->old->id, strlen(s->old->id));
		mem_order_unlink(u, s->old);
		mem_expiry_unlink(st, s->old);
		mem_feed_kill(st, s->old->position);
		n->value = s->row;
		mem_memory_free(s->old);
	} else {
		s->node->value = s->row;
		hmap_insert(&u->memories, s->node);
		s->node = NULL;
	}
	mem_order_link(u, s->row);
	mem_expiry_link(st, s->row);
	{
		mem_feed_entry f = { .kind = MEMD_FEED_MEMORY, .memory = s->row };
		mem_feed_push(st, f);
	}
	s->row->position = st->feed_head;
	s->row = NULL;
	s->old = NULL;
}

/* The cursor part of a commit: the session exists and is at the
 * expected seq. */
static int32_t mem_cursor_check(const mem_store *st, const memd_scope *scope,
				const memd_memory_commit *c, mem_session **ret, memd_error *err)
{
	mem_session *s;

	*ret = NULL;
	if (!c->cursor_session)
		return 0;
	s = mem_session_find3(st, scope->app, scope->user, c->cursor_session);
	if (!s)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				      c->cursor_session);
	if (s->memory_seq != c->expected_cursor_seq)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "session '%.64s' memory cursor is at %lld, not %lld",
				      c->cursor_session, (long long)s->memory_seq,
				      (long long)c->expected_cursor_seq);
	*ret = s;
	return 0;
}

int32_t mem_memory_commit(void *inst, const memd_call *call, const memd_scope *scope,
			  const memd_memory_commit *c, const memd_memory_sink *out,
			  memd_error *err)
{
	mem_store *st = inst;
	mem_mstage *stages = NULL;
	mem_session *cursor = NULL;
	mem_user *u = NULL;
	size_t n_staged = 0, n_add = 0, n_new_history = 0;
	int created_user = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 0, err)) < 0)
		return r;
	if (!c || !MEM_HAS(c, now_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "memory commit is missing or too small");
	if (c->n_writes && !c->writes)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory commit without its writes");
	if (c->cursor_session) {
		if ((r = pu_check_id("cursor session", c->cursor_session, err)) < 0)
			return r;
		if (c->new_cursor_seq < c->expected_cursor_seq || c->expected_cursor_seq < 0)
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "new memory cursor %lld is below the expected %lld",
					      (long long)c->new_cursor_seq,
					      (long long)c->expected_cursor_seq);
	}
	for (uint32_t i = 0; i < c->n_writes; i++)
		if ((r = mem_write_check(scope, c->writes[i], err)) < 0)
			return r;
	if (c->n_writes && !(stages = calloc(c->n_writes, sizeof(*stages))))
		return mem_enomem(err);
	pthread_mutex_lock(&st->lock);
	created_user = mem_user_find(st, scope->app, scope->user) == NULL;
	if (c->n_writes && (r = mem_user_get_or_create(st, scope->app, scope->user, &u, err)) < 0)
		goto out;
	for (; n_staged < c->n_writes; n_staged++) {
		const memd_memory_write *w = c->writes[n_staged];
		if ((r = mem_write_stage(u, c, w, stages, n_staged,
					 st->feed_head + (int64_t)n_staged + 1, err)) < 0)
			goto out;
		n_add += stages[n_staged].node != NULL;
		n_new_history += stages[n_staged].history_node != NULL;
	}
	if ((r = mem_cursor_check(st, scope, c, &cursor, err)) < 0)
		goto out;
	if (c->n_writes &&
	    (mem_grow((void **)&st->feed, &st->cap_feed, st->n_feed + c->n_writes,
		      sizeof(*st->feed)) < 0 ||
	     mem_grow((void **)&st->expiring, &st->cap_expiring, st->n_expiring + c->n_writes,
		      sizeof(*st->expiring)) < 0 ||
	     mem_grow((void **)&u->memory_order, &u->cap_memories, u->n_memories + n_add,
		      sizeof(*u->memory_order)) < 0 ||
	     hmap_reserve(&u->memories, n_add) < 0 ||
	     hmap_reserve(&u->memory_history, n_new_history) < 0)) {
		r = mem_enomem(err);
		goto out;
	}
	/* Commit: nothing below can fail. */
	pu_rows_read(call, c->n_writes + (cursor != NULL));
	for (size_t i = 0; i < n_staged; i++)
		mem_write_apply(st, u, &stages[i]);
	if (cursor)
		cursor->memory_seq = c->new_cursor_seq;
	mem_feed_compact(st);
	for (size_t i = 0; i < n_staged && r == 0; i++)
		r = mem_memory_deliver(stages[i].delivered, out, err);
	r = mem_sink_final(r);
	n_staged = 0;
out:
	for (size_t i = 0; i < n_staged; i++)
		mem_mstage_free(&stages[i]);
	if (r < 0 && created_user && u)
		mem_user_drop_if_empty(st, u);
	pthread_mutex_unlock(&st->lock);
	free(stages);
	return r;
}

/* ---- reads ------------------------------------------------------------ */

int32_t mem_memory_get(void *inst, const memd_call *call, const memd_scope *scope,
		       const char *id, int64_t now_us, const memd_memory_sink *out,
		       memd_error *err)
{
	mem_store *st = inst;
	mem_memory *m;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 0, err)) < 0 ||
	    (r = pu_check_id("memory id", id, err)) < 0)
		return r;
	if (!out || !out->memory)
		return memd_error_set(err, MEMD_EINVAL, 0, "no memory sink");
	pthread_mutex_lock(&st->lock);
	m = mem_row_find(mem_user_find(st, scope->app, scope->user), id);
	if (!m || mem_memory_expired(m, now_us)) {
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "memory '%.64s' not found", id);
	} else {
		pu_rows_read(call, 1);
		r = mem_sink_final(mem_memory_deliver(m, out, err));
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}

static int mem_tags_have(char *const *tags, size_t n, const char *tag)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(tags[i], tag) == 0)
			return 1;
	return 0;
}

static int mem_memory_matches(const mem_memory *m, const memd_memory_query *q)
{
	if (mem_memory_expired(m, q->now_us))
		return 0;
	if (q->kind && strcmp(m->kind, q->kind) != 0)
		return 0;
	if (q->topic && !mem_tags_have(m->topics, m->n_topics, q->topic))
		return 0;
	if (q->entity && !mem_tags_have(m->entities, m->n_entities, q->entity))
		return 0;
	if (q->session && (!m->source_session || strcmp(m->source_session, q->session) != 0))
		return 0;
	return 1;
}

int32_t mem_memory_list(void *inst, const memd_call *call, const memd_scope *scope,
			const memd_memory_query *q, const memd_memory_sink *out, memd_error *err)
{
	mem_store *st = inst;
	const mem_user *u;
	uint64_t examined = 0;
	uint32_t sent = 0;
	size_t i;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 0, err)) < 0)
		return r;
	if (!q || !MEM_HAS(q, before_id))
		return memd_error_set(err, MEMD_EINVAL, 0, "memory query is missing or too small");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory query limit must be > 0");
	if (q->before_created_us && q->before_id &&
	    (r = pu_check_id("before_id", q->before_id, err)) < 0)
		return r;
	if (!out || !out->memory)
		return memd_error_set(err, MEMD_EINVAL, 0, "no memory sink");
	pthread_mutex_lock(&st->lock);
	u = mem_user_find(st, scope->app, scope->user);
	i = !u ? 0 : q->before_created_us ? mem_order_lower(u, q->before_created_us, q->before_id) : 0;
	for (; u && i < u->n_memories && sent < q->limit; i++) {
		const mem_memory *m = u->memory_order[i];
		examined++;
		if (!mem_memory_matches(m, q))
			continue;
		sent++;
		if ((r = mem_memory_deliver(m, out, err)) != 0)
			break;
	}
	pu_rows_read(call, examined);
	pthread_mutex_unlock(&st->lock);
	return mem_sink_final(r);
}

int32_t mem_memory_history(void *inst, const memd_call *call, const memd_scope *scope,
			   const char *id, const memd_memory_change_sink *out, memd_error *err)
{
	mem_store *st = inst;
	const mem_user *u;
	const mem_mhist *h = NULL;
	hmap_node *n;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 0, err)) < 0 ||
	    (r = pu_check_id("memory id", id, err)) < 0)
		return r;
	if (!out || !out->change)
		return memd_error_set(err, MEMD_EINVAL, 0, "no memory change sink");
	pthread_mutex_lock(&st->lock);
	u = mem_user_find(st, scope->app, scope->user);
	n = u ? hmap_find(&u->memory_history, id, strlen(id)) : NULL;
	h = n ? n->value : NULL;
	if (!h || !h->n) {
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "memory '%.64s' has no history", id);
		goto out;
	}
	pu_rows_read(call, h->n);
	for (size_t i = 0; i < h->n; i++) {
		const mem_mchange *c = &h->v[i];
		memd_memory_change rec;
		memd_memory m;

		mem_memory_fill(c->memory, &m);
		m.position = 0;
		memset(&rec, 0, sizeof(rec));
		rec.struct_size = sizeof(rec);
		rec.op = c->op;
		rec.memory = &m;
		rec.actor = c->actor;
		rec.reason = c->reason;
		rec.at_us = c->at_us;
		if ((r = mem_sink_result(out->change(out->userdata, &rec), err)) != 0)
			break;
	}
	r = mem_sink_final(r);
out:
	pthread_mutex_unlock(&st->lock);
	return r;
}

/* ---- expiry ----------------------------------------------------------- */

/* Delete the oldest expiring row (expired at now_us): everything
 * allocated first; MEMD_ENOMEM changes nothing. */
static int32_t mem_expire_one(mem_store *st, int64_t now_us, memd_error *err)
{
	mem_memory *m = st->expiring[0];
	mem_user *u = mem_user_find(st, m->app, m->user);
	mem_mhist *h = NULL;
	hmap_node *hnode = NULL;
	mem_feed_entry tomb;
	mem_mchange change;
	int32_t r;

	if ((r = mem_tombstone_make(m, &tomb, err)) < 0)
		return r;
	if ((r = mem_mchange_make(MEMD_MEM_EXPIRE, m, MEM_ACTOR_RETENTION, NULL, now_us, &change,
				  err)) < 0)
		goto fail_tomb;
	if ((r = mem_history_slot(u, m->id, &h, &hnode, err)) < 0)
		goto fail_change;
	if (mem_grow((void **)&h->v, &h->cap, h->n + 1, sizeof(*h->v)) < 0 ||
	    mem_grow((void **)&st->feed, &st->cap_feed, st->n_feed + 1, sizeof(*st->feed)) < 0 ||
	    (hnode && hmap_reserve(&u->memory_history, 1) < 0)) {
		r = mem_enomem(err);
		goto fail_history;
	}
	if (hnode)
		hmap_insert(&u->memory_history, hnode);
	h->v[h->n++] = change;
	mem_row_remove(st, u, m);
	mem_feed_push(st, tomb);
	return 0;
fail_history:
	if (hnode) {
		mem_mhist_free(h);
		hmap_node_free(hnode);
	}
fail_change:
	mem_mchange_clear(&change);
fail_tomb:
	mem_feed_entry_clear(&tomb);
	return r;
}

int32_t mem_memory_expire(void *inst, const memd_call *call, int64_t now_us, uint32_t limit,
			  uint32_t *ret_count, memd_error *err)
{
	mem_store *st = inst;
	uint32_t count = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0)
		return r;
	if (limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory expire limit must be > 0");
	if (!ret_count)
		return memd_error_set(err, MEMD_EINVAL, 0, "no output count");
	pthread_mutex_lock(&st->lock);
	while (count < limit && st->n_expiring && st->expiring[0]->expires_us <= now_us) {
		if ((r = mem_expire_one(st, now_us, err)) < 0)
			break;
		count++;
	}
	mem_feed_compact(st);
	pu_rows_read(call, count);
	pthread_mutex_unlock(&st->lock);
	if (r == 0)
		*ret_count = count;
	return r;
}

/* ---- users ------------------------------------------------------------ */

uint64_t mem_memories_user_forget(mem_store *st, mem_user *u)
{
	uint64_t n = u->n_memories;
	hmap_iter it = HMAP_ITER_INIT;
	hmap_node *node;

	for (size_t i = 0; i < u->n_memories; i++) {
		mem_memory *m = u->memory_order[i];
		mem_expiry_unlink(st, m);
		mem_feed_kill(st, m->position);
		mem_memory_free(m);
	}
	u->n_memories = 0;
	hmap_clear(&u->memories, NULL);
	while ((node = hmap_next(&u->memory_history, &it)))
		n += ((const mem_mhist *)node->value)->n;
	hmap_clear(&u->memory_history, mem_mhist_free);
	return n;
}

void mem_memories_user_free(mem_user *u)
{
	for (size_t i = 0; i < u->n_memories; i++)
		mem_memory_free(u->memory_order[i]);
	free(u->memory_order);
	u->memory_order = NULL;
	u->n_memories = u->cap_memories = 0;
	hmap_clear(&u->memories, NULL);
	hmap_clear(&u->memory_history, mem_mhist_free);
}

void mem_memories_fini(mem_store *st)
{
	free(st->expiring);
	st->expiring = NULL;
	st->n_expiring = st->cap_expiring = 0;
}

/* ---- sessions pending extraction -------------------------------------- */

static int mem_pending_cmp(const void *a, const void *b)
{
	const mem_session *x = *(const mem_session *const *)a;
	const mem_session *y = *(const mem_session *const *)b;
	int c;

	if (x->updated_us != y->updated_us)
		return x->updated_us < y->updated_us ? -1 : 1;
	if ((c = strcmp(x->app, y->app)) != 0 || (c = strcmp(x->user, y->user)) != 0)
		return c;
	return strcmp(x->id, y->id);
}

/* Is s strictly after q's keyset tuple (a NULL string is below every
 * string)? */
static int mem_pending_after(const mem_session *s, const memd_pending_query *q)
{
	const char *parts[3] = { q->after_app, q->after_user, q->after_id };
	const char *mine[3] = { s->app, s->user, s->id };

	if (!q->after_updated_us || s->updated_us != q->after_updated_us)
		return !q->after_updated_us || s->updated_us > q->after_updated_us;
	for (int i = 0; i < 3; i++) {
		int c;
		if (!parts[i])
			return 1;
		if ((c = strcmp(mine[i], parts[i])) != 0)
			return c > 0;
	}
	return 0;
}

int32_t mem_session_list_pending(void *inst, const memd_call *call,
				 const memd_pending_query *q, const memd_session_sink *out,
				 memd_error *err)
{
	mem_store *st = inst;
	hmap_iter it = HMAP_ITER_INIT;
	hmap_node *node;
	mem_session **found = NULL;
	size_t n = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0)
		return r;
	if (!q || !MEM_HAS(q, after_id))
		return memd_error_set(err, MEMD_EINVAL, 0, "pending query is missing or too small");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "pending query limit must be > 0");
	if (q->updated_before_us <= 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "pending query needs updated_before_us");
	if (!out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "no session sink");
	pthread_mutex_lock(&st->lock);
	if (st->sessions.count && !(found = malloc(st->sessions.count * sizeof(*found)))) {
		r = mem_enomem(err);
		goto out;
	}
	while ((node = hmap_next(&st->sessions, &it))) {
		mem_session *s = node->value;
		if (s->memory_seq < (int64_t)s->n_events && s->updated_us > q->updated_after_us &&
		    s->updated_us < q->updated_before_us && mem_pending_after(s, q))
			found[n++] = s;
	}
	if (n)
		qsort(found, n, sizeof(*found), mem_pending_cmp);
	pu_rows_read(call, st->sessions.count);
	for (size_t i = 0; i < n && i < q->limit; i++)
		if ((r = mem_session_deliver(found[i], out, err)) != 0)
			break;
	r = mem_sink_final(r);
out:
	pthread_mutex_unlock(&st->lock);
	free(found);
	return r;
}
