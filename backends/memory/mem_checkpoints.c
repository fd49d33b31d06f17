/* SPDX-License-Identifier: MIT */
/*
 * mem_checkpoints: run checkpoints of the in-memory store (store.h 1.5;
 * the task paths of pending writes since 1.6).
 * Layout, all under the store's one lock:
 *  - each session keeps its checkpoints in one array ascending by (ns,
 *    id) in byte order, so that the root namespace "" comes first and a
 *    session's head (its greatest root id, expired or not until
 *    checkpoint_expire deletes it) is the last checkpoint of that run;
 *  - each checkpoint keeps its pending writes in an array in delivery
 *    order, ascending by (task_path, task_id, idx) in byte order; a write's
 *    key (task_id, idx) is found by a walk of that array (a checkpoint
 *    has a step's writes: few);
 *  - the lists across sessions (a user's list, the resumable heads of an
 *    app, the expiry) gather what they need and sort it: this store is the
 *    reference, not the fast one.
 * Writes follow memory.c's two phases: everything is checked and
 * allocated first (a failure changes nothing), then applied in steps that
 * cannot fail.
 */
#include "mem_checkpoints.h"

#include <stdlib.h>
#include <string.h>

/* The longest serializer type tag a checkpoint or a write may carry. */
#define MEM_CKPT_TYPE_MAX 256

typedef struct mem_ckw {
	char *task_path;       /* "" = none */
	char *task_id;
	int64_t idx;
	char *channel;
	char *type;
	void *value;
	uint64_t value_size;
} mem_ckw;

typedef struct mem_ckpt {
	char *ns;
	char *id;
	char *parent_id;       /* NULL = none */
	char *type;
	void *payload;
	uint64_t payload_size;
	char *metadata_json;
	uint32_t run_state;    /* MEMD_RUN_RUNNING..DONE */
	int64_t created_us;
	int64_t updated_us;
	int64_t expires_us;    /* 0 = never */
	mem_ckw *writes;       /* ascending (task_path, task_id, idx) */
	size_t n_writes;
	size_t cap_writes;
} mem_ckpt;

/* A checkpoint with the session holding it (for the cross-session lists). */
typedef struct mem_ckref {
	const mem_session *s;
	mem_ckpt *c;
} mem_ckref;

typedef struct mem_ckrefs {
	mem_ckref *v;
	size_t n;
	size_t cap;
} mem_ckrefs;

/* ---- records ---------------------------------------------------------- */

static void mem_ckw_clear(mem_ckw *w)
{
	free(w->task_path);
	free(w->task_id);
	free(w->channel);
	free(w->type);
	free(w->value);
	memset(w, 0, sizeof(*w));
}

static void mem_ckpt_free(mem_ckpt *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_writes; i++)
		mem_ckw_clear(&c->writes[i]);
	free(c->writes);
	free(c->ns);
	free(c->id);
	free(c->parent_id);
	free(c->type);
	free(c->payload);
	free(c->metadata_json);
	free(c);
}

void mem_checkpoints_session_free(mem_session *s)
{
	for (size_t i = 0; i < s->n_ckpts; i++)
		mem_ckpt_free(s->ckpts[i]);
	free(s->ckpts);
	s->ckpts = NULL;
	s->n_ckpts = s->cap_ckpts = 0;
}

/* A copy of n bytes (a 1-byte allocation for 0 bytes, so that NULL only
 * means ENOMEM). */
static void *mem_bytes_dup(const void *p, uint64_t n)
{
	void *d;

	if (n > SIZE_MAX - 1)
		return NULL;
	d = malloc(n ? (size_t)n : 1);
	if (d && n)
		memcpy(d, p, (size_t)n);
	return d;
}

static int mem_ckpt_expired(const mem_ckpt *c, int64_t now_us)
{
	return c->expires_us > 0 && c->expires_us <= now_us;
}

/* <0, 0, >0 as (ns, id) sorts before, at, after c's key (byte order). */
static int mem_ckpt_keycmp(const char *ns, const char *id, const mem_ckpt *c)
{
	int d = strcmp(ns, c->ns);
	return d ? d : strcmp(id, c->id);
}

/* The first index of s->ckpts whose key is >= (ns, id). */
static size_t mem_ckpt_lower(const mem_session *s, const char *ns, const char *id)
{
	size_t lo = 0, hi = s->n_ckpts;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (mem_ckpt_keycmp(ns, id, s->ckpts[mid]) > 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static mem_ckpt *mem_ckpt_find(const mem_session *s, const char *ns, const char *id)
{
	size_t i = mem_ckpt_lower(s, ns, id);
	return i < s->n_ckpts && mem_ckpt_keycmp(ns, id, s->ckpts[i]) == 0 ? s->ckpts[i] : NULL;
}

/* The first index of s->ckpts whose namespace sorts after ns. */
static size_t mem_ns_upper(const mem_session *s, const char *ns)
{
	size_t lo = 0, hi = s->n_ckpts;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(ns, s->ckpts[mid]->ns) >= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The session's head: its greatest root ("" namespace) checkpoint, or
 * NULL. Root checkpoints sort first. */
static mem_ckpt *mem_ckpt_head(const mem_session *s)
{
	size_t end = mem_ns_upper(s, "");
	return end ? s->ckpts[end - 1] : NULL;
}

/* <0, 0, >0 as write a sorts before, at, after b in delivery order:
 * (task_path, task_id, idx), strings as bytes (strcmp compares them as
 * unsigned char: UTF-8 in code point order), idx as a signed number. */
static int mem_ckw_cmp(const mem_ckw *a, const mem_ckw *b)
{
	int d = strcmp(a->task_path, b->task_path);

	if (!d)
		d = strcmp(a->task_id, b->task_id);
	return d ? d : (a->idx > b->idx) - (a->idx < b->idx);
}

/* Where w goes in c's writes: the first stored write not before it. */
static size_t mem_ckw_lower(const mem_ckpt *c, const mem_ckw *w)
{
	size_t lo = 0, hi = c->n_writes;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (mem_ckw_cmp(w, &c->writes[mid]) > 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The index of c's write keyed (task_id, idx), or c->n_writes when none:
 * the key leaves out the path, so this walks the writes. */
static size_t mem_ckw_find(const mem_ckpt *c, const char *task_id, int64_t idx)
{
	size_t i;

	for (i = 0; i < c->n_writes; i++)
		if (c->writes[i].idx == idx && strcmp(c->writes[i].task_id, task_id) == 0)
			break;
	return i;
}

/* Commit step: take index i out of c's writes and free it. */
static void mem_ckw_remove_at(mem_ckpt *c, size_t i)
{
	mem_ckw_clear(&c->writes[i]);
	memmove(&c->writes[i], &c->writes[i + 1], (c->n_writes - i - 1) * sizeof(*c->writes));
	c->n_writes--;
}

/* Commit step: take index i out of s's checkpoints and free it. */
static void mem_ckpt_remove_at(mem_session *s, size_t i)
{
	mem_ckpt_free(s->ckpts[i]);
	memmove(&s->ckpts[i], &s->ckpts[i + 1], (s->n_ckpts - i - 1) * sizeof(*s->ckpts));
	s->n_ckpts--;
}

/* ---- checks ----------------------------------------------------------- */

/* A namespace: "" (the root) or an id. */
static int32_t mem_check_ns(const char *ns, memd_error *err)
{
	if (!ns)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint namespace is missing");
	return ns[0] ? pu_check_id("checkpoint namespace", ns, err) : 0;
}

static int32_t mem_check_type(const char *what, const char *type, memd_error *err)
{
	if (!type)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s type is missing", what);
	if (strlen(type) > MEM_CKPT_TYPE_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s type is longer than %d bytes", what,
				      MEM_CKPT_TYPE_MAX);
	return 0;
}

static int32_t mem_check_run_state(uint32_t run_state, memd_error *err)
{
	if (run_state > MEMD_RUN_DONE)
		return memd_error_set(err, MEMD_EINVAL, 0, "unknown run state %u",
				      (unsigned)run_state);
	return 0;
}

static int32_t mem_checkpoint_check(const memd_checkpoint *c, memd_error *err)
{
	int32_t r;

	if (!c || !MEM_HAS(c, expires_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint record is missing or too small");
	if ((r = pu_check_id("app", c->app, err)) < 0 ||
	    (r = pu_check_id("user", c->user, err)) < 0 ||
	    (r = pu_check_id("session id", c->session, err)) < 0 ||
	    (r = mem_check_ns(c->ns, err)) < 0 ||
	    (r = pu_check_id("checkpoint id", c->id, err)) < 0 ||
	    (c->parent_id && (r = pu_check_id("parent checkpoint id", c->parent_id, err)) < 0) ||
	    (r = mem_check_type("checkpoint", c->type, err)) < 0 ||
	    (r = mem_check_run_state(c->run_state, err)) < 0)
		return r;
	if (!c->payload && c->payload_size)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint payload is missing");
	if (!c->metadata_json)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint metadata is missing");
	if ((r = mem_check_json_object("checkpoint metadata", c->metadata_json, err)) < 0)
		return r;
	if (c->expires_us < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint expiry is negative");
	return 0;
}

static int32_t mem_writes_check(const memd_checkpoint_writes *w, memd_error *err)
{
	int32_t r;

	if (!w || !MEM_HAS(w, now_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint writes are missing or too small");
	if ((r = mem_check_ns(w->ns, err)) < 0 ||
	    (r = pu_check_id("checkpoint id", w->checkpoint_id, err)) < 0 ||
	    (r = mem_check_run_state(w->run_state, err)) < 0)
		return r;
	if (w->n_writes && !w->writes)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint writes are missing");
	for (uint32_t i = 0; i < w->n_writes; i++) {
		const memd_checkpoint_write *x = &w->writes[i];
		if (!MEM_HAS(x, value_size))
			return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint write record is too small");
		if ((r = pu_check_id("write task id", x->task_id, err)) < 0 ||
		    (r = mem_check_type("write", x->type, err)) < 0)
			return r;
		if (!x->channel)
			return memd_error_set(err, MEMD_EINVAL, 0, "write channel is missing");
		if (!x->value && x->value_size)
			return memd_error_set(err, MEMD_EINVAL, 0, "write value is missing");
	}
	return 0;
}

/* ---- delivery --------------------------------------------------------- */

static int32_t mem_ckpt_deliver(const mem_session *s, const mem_ckpt *c, int with_payload,
				const memd_checkpoint_sink *out, memd_error *err)
{
	memd_checkpoint rec = {
		.struct_size = sizeof(rec),
		.run_state = c->run_state,
		.app = s->app,
		.user = s->user,
		.session = s->id,
		.ns = c->ns,
		.id = c->id,
		.parent_id = c->parent_id,
		.type = c->type,
		.payload = with_payload ? c->payload : NULL,
		.payload_size = with_payload ? c->payload_size : 0,
		.metadata_json = c->metadata_json,
		.created_us = c->created_us,
		.updated_us = c->updated_us,
		.expires_us = c->expires_us,
	};
	int32_t r;

	if ((r = mem_sink_result(out->checkpoint(out->userdata, &rec), err)) != 0)
		return r;
	if (!with_payload || !pu_sink_wants_writes(out))
		return 0;
	for (size_t i = 0; i < c->n_writes; i++) {
		const mem_ckw *w = &c->writes[i];
		memd_checkpoint_write wr = {
			.struct_size = sizeof(wr),
			.task_id = w->task_id,
			.idx = w->idx,
			.channel = w->channel,
			.type = w->type,
			.value = w->value,
			.value_size = w->value_size,
		};
		if ((r = mem_sink_result(pu_sink_write(out, &wr, w->task_path), err)) != 0)
			return r;
	}
	return 0;
}

static int32_t mem_refs_add(mem_ckrefs *refs, const mem_session *s, mem_ckpt *c,
			    memd_error *err)
{
	if (mem_grow((void **)&refs->v, &refs->cap, refs->n + 1, sizeof(*refs->v)) < 0)
		return mem_enomem(err);
	refs->v[refs->n++] = (mem_ckref){ s, c };
	return 0;
}

/* ---- put -------------------------------------------------------------- */

/* A private copy of in (times and writes set by the caller). */
static int32_t mem_ckpt_make(const memd_checkpoint *in, mem_ckpt **ret, memd_error *err)
{
	mem_ckpt *c = calloc(1, sizeof(*c));

	if (!c || !(c->ns = mem_strdup(in->ns)) || !(c->id = mem_strdup(in->id)) ||
	    mem_dup_opt(in->parent_id, &c->parent_id) < 0 || !(c->type = mem_strdup(in->type)) ||
	    !(c->payload = mem_bytes_dup(in->payload, in->payload_size)) ||
	    !(c->metadata_json = mem_strdup(in->metadata_json))) {
		mem_ckpt_free(c);
		return mem_enomem(err);
	}
	c->payload_size = in->payload_size;
	c->run_state = in->run_state == MEMD_RUN_UNSET ? MEMD_RUN_RUNNING : in->run_state;
	c->expires_us = in->expires_us;
	*ret = c;
	return 0;
}

int32_t mem_checkpoint_put(void *inst, const memd_call *call, const memd_checkpoint *c,
			   int create_session, int64_t now_us, int *ret_created_session,
			   memd_error *err)
{
	mem_store *st = inst;
	mem_session_new made;
	mem_session *s;
	mem_ckpt *rec = NULL, *old;
	size_t at;
	int created = 0;
	int32_t r;

	memset(&made, 0, sizeof(made));
	if ((r = mem_begin(st, call, err)) < 0 || (r = mem_checkpoint_check(c, err)) < 0)
		return r;
	if ((r = mem_ckpt_make(c, &rec, err)) < 0)
		return r;
	rec->created_us = rec->updated_us = now_us;
	pthread_mutex_lock(&st->lock);
	s = mem_session_find3(st, c->app, c->user, c->session);
	if (!s && !create_session) {
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found", c->session);
		goto out;
	}
	if (!s) {
		memd_session in = {
			.struct_size = sizeof(in),
			.app = c->app,
			.user = c->user,
			.id = c->session,
			.metadata_json = MEM_EMPTY_OBJECT,
			.created_us = now_us,
			.updated_us = now_us,
		};
		if ((r = mem_session_prepare(st, &in, NULL, &made, err)) < 0)
			goto out;
		s = made.s;
	}
	at = mem_ckpt_lower(s, rec->ns, rec->id);
	old = at < s->n_ckpts && mem_ckpt_keycmp(rec->ns, rec->id, s->ckpts[at]) == 0
		      ? s->ckpts[at]
		      : NULL;
	if (!old && mem_grow((void **)&s->ckpts, &s->cap_ckpts, s->n_ckpts + 1,
			     sizeof(*s->ckpts)) < 0) {
		r = mem_enomem(err);
		if (made.s)
			mem_session_abort(st, &made);
		goto out;
	}
	/* Commit: nothing below can fail. */
	if (old) {
		rec->created_us = old->created_us;
		rec->writes = old->writes;
		rec->n_writes = old->n_writes;
		rec->cap_writes = old->cap_writes;
		old->writes = NULL;
		old->n_writes = old->cap_writes = 0;
		mem_ckpt_free(old);
		s->ckpts[at] = rec;
	} else {
		memmove(&s->ckpts[at + 1], &s->ckpts[at], (s->n_ckpts - at) * sizeof(*s->ckpts));
		s->ckpts[at] = rec;
		s->n_ckpts++;
	}
	rec = NULL;
	if (made.s) {
		mem_session_commit(st, &made);
		created = 1;
	}
	if (ret_created_session)
		*ret_created_session = created;
	pu_rows_read(call, 1);
out:
	pthread_mutex_unlock(&st->lock);
	mem_ckpt_free(rec);
	return r;
}

int32_t mem_checkpoint_put_writes(void *inst, const memd_call *call, const memd_scope *scope,
				  const memd_checkpoint_writes *w, memd_error *err)
{
	mem_store *st = inst;
	mem_session *s = NULL;
	mem_ckpt *c;
	mem_ckw *staged = NULL;
	uint32_t i;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 1, err)) < 0 ||
	    (r = mem_writes_check(w, err)) < 0)
		return r;
	staged = calloc(w->n_writes ? w->n_writes : 1, sizeof(*staged));
	if (!staged)
		return mem_enomem(err);
	for (i = 0; i < w->n_writes; i++) {
		const memd_checkpoint_write *x = &w->writes[i];
		mem_ckw *y = &staged[i];
		y->idx = x->idx;
		y->value_size = x->value_size;
		if (!(y->task_path = mem_strdup(pu_write_task_path(w, i))) ||
		    !(y->task_id = mem_strdup(x->task_id)) || !(y->channel = mem_strdup(x->channel)) ||
		    !(y->type = mem_strdup(x->type)) ||
		    !(y->value = mem_bytes_dup(x->value, x->value_size))) {
			r = mem_enomem(err);
			goto done;
		}
	}
	pthread_mutex_lock(&st->lock);
	if ((r = mem_session_require(st, scope, &s, err)) < 0)
		goto out;
	c = mem_ckpt_find(s, w->ns, w->checkpoint_id);
	if (!c || mem_ckpt_expired(c, w->now_us)) {
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "checkpoint '%.64s' not found",
				   w->checkpoint_id);
		goto out;
	}
	if (mem_grow((void **)&c->writes, &c->cap_writes, c->n_writes + w->n_writes,
		     sizeof(*c->writes)) < 0) {
		r = mem_enomem(err);
		goto out;
	}
	/* Commit: in order, so that a later write of the batch meets an
	 * earlier one as a stored write. A replaced write goes, and the new
	 * one is placed by its own path. */
	for (i = 0; i < w->n_writes; i++) {
		mem_ckw *y = &staged[i];
		size_t at = mem_ckw_find(c, y->task_id, y->idx);
		if (at < c->n_writes) {
			if (!(w->writes[i].flags & MEMD_CKW_REPLACE))
				continue;
			mem_ckw_remove_at(c, at);
		}
		at = mem_ckw_lower(c, y);
		memmove(&c->writes[at + 1], &c->writes[at], (c->n_writes - at) * sizeof(*c->writes));
		c->writes[at] = *y;
		c->n_writes++;
		memset(y, 0, sizeof(*y));
	}
	if (w->run_state != MEMD_RUN_UNSET) {
		c->run_state = w->run_state;
		c->updated_us = w->now_us;
	}
	pu_rows_read(call, 1);
out:
	pthread_mutex_unlock(&st->lock);
done:
	for (i = 0; i < w->n_writes; i++)
		mem_ckw_clear(&staged[i]);
	free(staged);
	return r;
}

/* ---- reads ------------------------------------------------------------ */

int32_t mem_checkpoint_get(void *inst, const memd_call *call, const memd_scope *scope,
			   const char *ns, const char *id, int64_t now_us,
			   const memd_checkpoint_sink *out, memd_error *err)
{
	mem_store *st = inst;
	const mem_session *s;
	const mem_ckpt *c = NULL;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 1, err)) < 0 ||
	    (r = mem_check_ns(ns, err)) < 0 ||
	    (id && (r = pu_check_id("checkpoint id", id, err)) < 0))
		return r;
	if (!out || !out->checkpoint)
		return memd_error_set(err, MEMD_EINVAL, 0, "no checkpoint sink");
	pthread_mutex_lock(&st->lock);
	s = mem_session_find(st, scope);
	if (s && id) {
		c = mem_ckpt_find(s, ns, id);
		if (c && mem_ckpt_expired(c, now_us))
			c = NULL;
	} else if (s) {
		/* The greatest unexpired id of ns: walk down from its end. */
		size_t i = mem_ns_upper(s, ns);
		while (i > 0 && strcmp(s->ckpts[i - 1]->ns, ns) == 0 && !c) {
			if (!mem_ckpt_expired(s->ckpts[i - 1], now_us))
				c = s->ckpts[i - 1];
			i--;
		}
	}
	if (!c) {
		r = id ? memd_error_set(err, MEMD_ENOTFOUND, 0, "checkpoint '%.64s' not found", id)
		       : memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' has no checkpoint",
					scope->session);
	} else {
		pu_rows_read(call, 1 + c->n_writes);
		r = mem_sink_final(mem_ckpt_deliver(s, c, 1, out, err));
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}

/* Is (id, session, ns) strictly before q's keyset in descending order? */
static int mem_ckpt_before(const memd_checkpoint_query *q, const char *session,
			   const mem_ckpt *c)
{
	int d;

	if (!q->before_id)
		return 1;
	if ((d = strcmp(c->id, q->before_id)) != 0 || !q->before_session)
		return d < 0;
	if ((d = strcmp(session, q->before_session)) != 0 || !q->before_ns)
		return d < 0;
	return strcmp(c->ns, q->before_ns) < 0;
}

/* One namespace of one session in a list: its checkpoints [lo, at) are
 * still to come, newest (greatest id) at at - 1. */
typedef struct mem_ckrange {
	const mem_session *s;
	size_t lo;
	size_t at;
} mem_ckrange;

typedef struct mem_ckranges {
	mem_ckrange *v;
	size_t n;
	size_t cap;
} mem_ckranges;

/* Add the range [lo, hi) of s (one namespace) to rs, starting below q's
 * keyset (within one namespace of one session, "before the keyset" holds
 * for every id up to some point: a binary search finds it). */
static int32_t mem_range_add(mem_ckranges *rs, const mem_session *s, size_t lo, size_t hi,
			     const memd_checkpoint_query *q, memd_error *err)
{
	size_t a = lo, b = hi;

	while (a < b) {
		size_t mid = a + (b - a) / 2;
		if (mem_ckpt_before(q, s->id, s->ckpts[mid]))
			a = mid + 1;
		else
			b = mid;
	}
	if (a == lo)
		return 0;
	if (mem_grow((void **)&rs->v, &rs->cap, rs->n + 1, sizeof(*rs->v)) < 0)
		return mem_enomem(err);
	rs->v[rs->n++] = (mem_ckrange){ s, lo, a };
	return 0;
}

/* The namespaces of s that q lists, as ranges (found by binary search,
 * reading no checkpoint). */
static int32_t mem_ranges_of(mem_ckranges *rs, const mem_session *s,
			     const memd_checkpoint_query *q, memd_error *err)
{
	size_t lo = 0;
	int32_t r = 0;

	if (q->ns)
		return mem_range_add(rs, s, mem_ckpt_lower(s, q->ns, ""), mem_ns_upper(s, q->ns), q,
				     err);
	while (lo < s->n_ckpts && r == 0) {
		size_t hi = mem_ns_upper(s, s->ckpts[lo]->ns);
		r = mem_range_add(rs, s, lo, hi, q, err);
		lo = hi;
	}
	return r;
}

/* >0 if a's next checkpoint comes before b's in the list's order,
 * descending (id, session, ns). */
static int mem_range_cmp(const mem_ckrange *a, const mem_ckrange *b)
{
	const mem_ckpt *x = a->s->ckpts[a->at - 1], *y = b->s->ckpts[b->at - 1];
	int d = strcmp(x->id, y->id);

	if (!d)
		d = strcmp(a->s->id, b->s->id);
	return d ? d : strcmp(x->ns, y->ns);
}

int32_t mem_checkpoint_list(void *inst, const memd_call *call, const memd_scope *scope,
			    const memd_checkpoint_query *q, const memd_checkpoint_sink *out,
			    memd_error *err)
{
	mem_store *st = inst;
	const mem_user *u;
	mem_ckranges rs = { 0 };
	uint64_t examined = 0;
	uint32_t sent = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 0, err)) < 0)
		return r;
	if (!q || !MEM_HAS(q, now_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint query is missing or too small");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint query limit must be > 0");
	if ((q->session && (r = pu_check_id("session id", q->session, err)) < 0) ||
	    (q->ns && (r = mem_check_ns(q->ns, err)) < 0) ||
	    (q->before_id && (r = pu_check_id("before checkpoint id", q->before_id, err)) < 0) ||
	    (q->before_session &&
	     (r = pu_check_id("before session id", q->before_session, err)) < 0) ||
	    (q->before_ns && (r = mem_check_ns(q->before_ns, err)) < 0))
		return r;
	if (!out || !out->checkpoint)
		return memd_error_set(err, MEMD_EINVAL, 0, "no checkpoint sink");
	pthread_mutex_lock(&st->lock);
	if (q->session) {
		const mem_session *s = mem_session_find3(st, scope->app, scope->user, q->session);
		if (s)
			r = mem_ranges_of(&rs, s, q, err);
	} else if ((u = mem_user_find(st, scope->app, scope->user))) {
		for (size_t i = 0; i < u->n_sessions && r == 0; i++)
			r = mem_ranges_of(&rs, u->sessions[i], q, err);
	}
	/* Merge the ranges, newest first: each step reads one checkpoint. */
	while (r == 0 && sent < q->limit) {
		mem_ckrange *best = NULL;
		const mem_ckpt *c;
		for (size_t i = 0; i < rs.n; i++)
			if (rs.v[i].at > rs.v[i].lo && (!best || mem_range_cmp(&rs.v[i], best) > 0))
				best = &rs.v[i];
		if (!best)
			break;
		c = best->s->ckpts[--best->at];
		examined++;
		if (mem_ckpt_expired(c, q->now_us))
			continue;
		sent++;
		if (pu_sink_wants_writes(out))
			examined += c->n_writes;
		r = mem_ckpt_deliver(best->s, c, 1, out, err);
	}
	pu_rows_read(call, examined);
	pthread_mutex_unlock(&st->lock);
	free(rs.v);
	return mem_sink_final(r);
}

/* Ascending (user, session). */
static int mem_ckref_resume_cmp(const void *a, const void *b)
{
	const mem_ckref *x = a, *y = b;
	int d = strcmp(x->s->user, y->s->user);
	return d ? d : strcmp(x->s->id, y->s->id);
}

int32_t mem_checkpoint_resumable(void *inst, const memd_call *call,
				 const memd_resumable_query *q, const memd_checkpoint_sink *out,
				 memd_error *err)
{
	mem_store *st = inst;
	mem_ckrefs refs = { 0 };
	hmap_iter it = HMAP_ITER_INIT;
	hmap_node *n;
	uint64_t examined = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0)
		return r;
	if (!q || !MEM_HAS(q, after_session))
		return memd_error_set(err, MEMD_EINVAL, 0, "resumable query is missing or too small");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "resumable query limit must be > 0");
	if ((r = pu_check_id("app", q->app, err)) < 0 ||
	    (q->after_user && (r = pu_check_id("after user", q->after_user, err)) < 0) ||
	    (q->after_session && (r = pu_check_id("after session", q->after_session, err)) < 0))
		return r;
	if (!out || !out->checkpoint)
		return memd_error_set(err, MEMD_EINVAL, 0, "no checkpoint sink");
	pthread_mutex_lock(&st->lock);
	while ((n = hmap_next(&st->sessions, &it)) && r == 0) {
		const mem_session *s = n->value;
		mem_ckpt *h;
		int d;
		if (strcmp(s->app, q->app) != 0 || !(h = mem_ckpt_head(s)))
			continue;
		examined++;
		if (!(q->run_states & (1u << h->run_state)) || mem_ckpt_expired(h, q->now_us))
			continue;
		if (q->after_user) {
			d = strcmp(s->user, q->after_user);
			if (d == 0)
				d = q->after_session ? strcmp(s->id, q->after_session) : 0;
			if (d <= 0)
				continue;
		}
		r = mem_refs_add(&refs, s, h, err);
	}
	if (r == 0 && refs.n) {
		qsort(refs.v, refs.n, sizeof(*refs.v), mem_ckref_resume_cmp);
		for (size_t i = 0; i < refs.n && i < q->limit && r == 0; i++)
			r = mem_ckpt_deliver(refs.v[i].s, refs.v[i].c, 0, out, err);
	}
	pu_rows_read(call, examined);
	pthread_mutex_unlock(&st->lock);
	free(refs.v);
	return mem_sink_final(r);
}

/* ---- deletes ---------------------------------------------------------- */

int32_t mem_checkpoint_delete(void *inst, const memd_call *call, const memd_scope *scope,
			      const char *ns, uint32_t *ret_count, memd_error *err)
{
	mem_store *st = inst;
	mem_session *s;
	uint32_t count = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_scope(scope, 1, err)) < 0 ||
	    (ns && (r = mem_check_ns(ns, err)) < 0))
		return r;
	pthread_mutex_lock(&st->lock);
	s = mem_session_find(st, scope);
	for (size_t i = s ? s->n_ckpts : 0; i > 0; i--) {
		if (ns && strcmp(s->ckpts[i - 1]->ns, ns) != 0)
			continue;
		mem_ckpt_remove_at(s, i - 1);
		count++;
	}
	pu_rows_read(call, count);
	pthread_mutex_unlock(&st->lock);
	if (ret_count)
		*ret_count = count;
	return 0;
}

/* Ascending expiry, then (app, user, session, ns, id). */
static int mem_ckref_expire_cmp(const void *a, const void *b)
{
	const mem_ckref *x = a, *y = b;
	int d;

	if (x->c->expires_us != y->c->expires_us)
		return x->c->expires_us < y->c->expires_us ? -1 : 1;
	if ((d = strcmp(x->s->app, y->s->app)) || (d = strcmp(x->s->user, y->s->user)) ||
	    (d = strcmp(x->s->id, y->s->id)))
		return d;
	return mem_ckpt_keycmp(x->c->ns, x->c->id, y->c);
}

int32_t mem_checkpoint_expire(void *inst, const memd_call *call, int64_t now_us,
			      uint32_t limit, uint32_t *ret_count, memd_error *err)
{
	mem_store *st = inst;
	mem_ckrefs refs = { 0 };
	hmap_iter it = HMAP_ITER_INIT;
	hmap_node *n;
	uint64_t examined = 0;
	uint32_t count = 0;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0)
		return r;
	if (limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint expiry limit must be > 0");
	pthread_mutex_lock(&st->lock);
	while ((n = hmap_next(&st->sessions, &it)) && r == 0) {
		const mem_session *s = n->value;
		for (size_t i = 0; i < s->n_ckpts && r == 0; i++) {
			examined++;
			if (mem_ckpt_expired(s->ckpts[i], now_us))
				r = mem_refs_add(&refs, s, s->ckpts[i], err);
		}
	}
	if (r == 0 && refs.n) {
		qsort(refs.v, refs.n, sizeof(*refs.v), mem_ckref_expire_cmp);
		/* Commit: the head of a session passes by itself to its greatest
		 * remaining root checkpoint. */
		for (size_t i = 0; i < refs.n && count < limit; i++) {
			mem_session *s = (mem_session *)refs.v[i].s;
			const mem_ckpt *c = refs.v[i].c;
			mem_ckpt_remove_at(s, mem_ckpt_lower(s, c->ns, c->id));
			count++;
		}
	}
	pu_rows_read(call, examined);
	pthread_mutex_unlock(&st->lock);
	free(refs.v);
	if (r == 0)
		*ret_count = count;
	return r;
}
