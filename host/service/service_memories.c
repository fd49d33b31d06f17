/* SPDX-License-Identifier: MIT */
/*
 * service_memories: long-term memories (api/memd/memd.h): memd_memory_create,
 * _get, _list (with its cursors), _update, _delete and _history, their
 * variants taking the actor the history records (service_int.h), and the
 * deletion of expired memories (service_memories_expire).
 *
 * Every write is one store memory_commit of one write; the facade decides
 * everything the store does not: the id (uuid v7 unless the client made
 * one), token counts, the times (the facade clock, memd_set_clock) and
 * every check of the body. An update reads the memory, changes the
 * members the body names and writes it back expecting the version it
 * read; a write that lost a race to another writer is read and decided
 * again (unless the client named the version it meant).
 */
#include "service/service_int.h"

#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"
#include "json/memory_json.h"
#include "util/uuid.h"

/* Re-reads of a memory an update lost to another writer, then ECONFLICT. */
#define MEMORY_UPDATE_TRIES 8
/* Memories one service_memories_expire deletes at most. */
#define MEMORY_EXPIRE_BATCH 500u
/* The longest ttl_seconds: ~100 years, far from overflowing microseconds. */
#define MEMORY_TTL_MAX_S (100LL * 366 * 86400)

/* ---- a memory as read ------------------------------------------------------ */

/* A memory as the store delivered it, with copies of its strings (mm's
 * pointers point at them). Zero-initialize; read_clear frees. */
typedef struct mem_read {
	memd_memory mm;
	char *own[9];
	int got;
} mem_read;

static void read_clear(mem_read *r)
{
	for (size_t i = 0; i < sizeof(r->own) / sizeof(r->own[0]); i++)
		free(r->own[i]);
	memset(r, 0, sizeof(*r));
}

static int32_t got_memory(void *ud, const memd_memory *in)
{
	mem_read *r = ud;
	const char *const src[9] = { in->app, in->user, in->id, in->text, in->kind,
				     in->topics_json, in->entities_json, in->source_session,
				     in->source_json };
	const char **dst[9] = { &r->mm.app, &r->mm.user, &r->mm.id, &r->mm.text, &r->mm.kind,
				&r->mm.topics_json, &r->mm.entities_json,
				&r->mm.source_session, &r->mm.source_json };

	read_clear(r);
	r->mm = *in;
	r->mm.struct_size = sizeof(r->mm);
	for (size_t i = 0; i < 9; i++) {
		*dst[i] = NULL;
		if (src[i] && !(r->own[i] = strdup(src[i])))
			return MEMD_ENOMEM;
		*dst[i] = r->own[i];
	}
	r->got = 1;
	return 0;
}

/* The memory id of sc at now into *ret (cleared first). MEMD_ENOTFOUND
 * when it is absent or expired; the store's errors. */
static int32_t read_memory(memd *m, const memd_call *call, const memd_scope *sc, const char *id,
			   int64_t now, mem_read *ret, memd_error *err)
{
	memd_memory_sink sink = { sizeof(sink), ret, got_memory };
	int32_t r;

	read_clear(ret);
	r = store_memory_get(m->sessions, call, sc, id, now, &sink, err);
	if (r < 0) {
		read_clear(ret);
		return r == MEMD_ENOMEM ? service_oom(err) : r;
	}
	if (!ret->got)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "%s: memory_get delivered nothing",
				      store_name(m->sessions));
	return 0;
}

/* ---- one write ---------------------------------------------------------------- */

static int32_t got_memory_json(void *ud, const memd_memory *mm)
{
	json_t **slot = ud;
	json_decref(*slot);
	*slot = mj_memory(mm);
	return *slot ? 0 : MEMD_ENOMEM;
}

/* Commit one write of op on mm (its app, user and id set) for sc at now
 * by actor, expecting version expected (0 = any); the stored memory as
 * JSON into *ret (NULL: not wanted). The indexes are woken for its feed
 * record. The store's errors (MEMD_ENOTFOUND, MEMD_ECONFLICT, ...). */
static int32_t commit_one(memd *m, const memd_call *call, const memd_scope *sc, uint32_t op,
			  int64_t expected, const memd_memory *mm, const char *actor,
			  const char *reason, int64_t now, json_t **ret, memd_error *err)
{
	memd_memory_write w = { .struct_size = sizeof(w), .op = op, .expected_version = expected,
				.memory = mm, .actor = actor, .reason = reason };
	const memd_memory_write *wp = &w;
	memd_memory_commit c = { .struct_size = sizeof(c), .n_writes = 1, .writes = &wp,
				 .now_us = now };
	json_t *out = NULL;
	memd_memory_sink sink = { sizeof(sink), &out, got_memory_json };
	int32_t r = store_memory_commit(m->sessions, call, sc, &c, &sink, err);

	if (r == 0)
		index_notify(m->index);
	if (r == 0 && !out && op != MEMD_MEM_DELETE)
		r = memd_error_set(err, MEMD_EINTERNAL, 0, "%s: memory_commit delivered nothing",
				   store_name(m->sessions));
	else if (r == MEMD_ENOMEM)
		r = service_oom(err);
	if (r == 0 && ret)
		*ret = out;
	else
		json_decref(out);
	return r;
}

/* ---- checking a body --------------------------------------------------------- */

/* The content members of a create or update body, checked. Strings are
 * borrowed from the body; the JSON texts are malloc'd (NULL = not given). */
typedef struct mem_body {
	const char *text;
	const char *kind;
	char *topics;           /* JSON array text, duplicates dropped */
	char *entities;
	char *source;           /* {"session_id", "seqs"} text; NULL = none */
	const char *source_session;
	int has_expiry;         /* expires_at or ttl_seconds given (null too) */
	int64_t expires_us;     /* 0 = never */
	int64_t version;        /* update: 0 = any */
	const char *reason;     /* update: NULL = none */
} mem_body;

static void body_clear(mem_body *b)
{
	free(b->topics);
	free(b->entities);
	free(b->source);
	memset(b, 0, sizeof(*b));
}

static int32_t check_text(json_t *body, int required, const char **ret, memd_error *err)
{
	json_t *v = json_object_get(body, "text");
	size_t n;

	*ret = NULL;
	if (!v && !required)
		return 0;
	if (!v || json_is_null(v))
		return memd_error_set(err, MEMD_EINVAL, 0, "text: required");
	if (!json_is_string(v))
		return memd_error_set(err, MEMD_EINVAL, 0, "text: must be a string");
	n = json_string_length(v);
	if (n == 0 || n > MEMD_MEMORY_TEXT_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "text: must be 1..%d bytes (is %zu)",
				      MEMD_MEMORY_TEXT_MAX, n);
	if (!ej_utf8_valid(json_string_value(v), n) || strlen(json_string_value(v)) != n)
		return memd_error_set(err, MEMD_EINVAL, 0, "text: not valid UTF-8");
	*ret = json_string_value(v);
	return 0;
}

static int32_t check_kind(const char *kind, const char *what, memd_error *err)
{
	if (!mj_kind_valid(kind))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "%s: must be fact, preference, instruction or episode", what);
	return 0;
}

/* A tag (topic or entity): 1..MEMD_ID_MAX bytes of UTF-8 without
 * control characters. */
static int32_t check_tag(const char *s, size_t n, const char *what, memd_error *err)
{
	if (n == 0 || n > MEMD_ID_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: must be 1..%d bytes", what,
				      MEMD_ID_MAX);
	if (!ej_utf8_valid(s, n) || strlen(s) != n)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: not valid UTF-8", what);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return memd_error_set(err, MEMD_EINVAL, 0, "%s: has a control character",
					      what);
	return 0;
}

/* Member key of body (topics or entities), when given: an array of at
 * most MEMD_MEMORY_TAGS_MAX tags (null = none), duplicates dropped, as
 * JSON text into *ret (NULL when absent). */
static int32_t check_tags(json_t *body, const char *key, char **ret, memd_error *err)
{
	json_t *v = json_object_get(body, key), *out, *t;
	char what[64];
	size_t i;
	int32_t r = 0;

	*ret = NULL;
	if (!v)
		return 0;
	if (!json_is_null(v) && !json_is_array(v))
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: must be an array of strings", key);
	if (json_array_size(v) > MEMD_MEMORY_TAGS_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: at most %d", key,
				      MEMD_MEMORY_TAGS_MAX);
	if (!(out = json_array()))
		return service_oom(err);
	json_array_foreach(v, i, t) {
		size_t j;
		json_t *seen;
		int dup = 0;
		snprintf(what, sizeof(what), "%s[%zu]", key, i);
		if (!json_is_string(t)) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "%s: must be a string", what);
			goto out;
		}
		if ((r = check_tag(json_string_value(t), json_string_length(t), what, err)) < 0)
			goto out;
		json_array_foreach(out, j, seen)
			dup |= json_equal(seen, t);
		if (!dup && json_array_append(out, t) < 0) {
			r = service_oom(err);
			goto out;
		}
	}
	if (!(*ret = ej_dump(out)))
		r = service_oom(err);
out:
	json_decref(out);
	return r;
}

static int32_t count_session(void *ud, const memd_session *s)
{
	(void)s;
	(*(int *)ud)++;
	return 0;
}

/* body's "source", when given: {"session_id": id of a session of sc that
 * exists, "seqs"?: [int >= 1]} into b->source (normalized, seqs [] when
 * absent) and b->source_session. */
static int32_t check_source(memd *m, const memd_call *call, const memd_scope *sc, json_t *body,
			    mem_body *b, memd_error *err)
{
	static const char *const fields[] = { "session_id", "seqs", NULL };
	json_t *src, *seqs, *v;
	const char *sid;
	memd_error e = { 0 };
	memd_scope ss = *sc;
	int found = 0;
	memd_session_sink sink = { sizeof(sink), &found, count_session };
	size_t i;
	int32_t r;

	if ((r = service_opt_object_field(body, "source", &src, err)) < 0 || !src)
		return r;
	if ((r = service_check_fields(src, fields, &e)) < 0)
		return memd_error_set(err, r, 0, "source: %s", e.msg);
	if ((r = service_opt_string_field(src, "session_id", &sid, err)) < 0)
		return memd_error_set(err, r, 0, "source.session_id: must be a string");
	if (!sid)
		return memd_error_set(err, MEMD_EINVAL, 0, "source.session_id: required");
	if ((r = ej_check_id(sid, "source.session_id", err)) < 0)
		return r;
	seqs = json_object_get(src, "seqs");
	if (seqs && !json_is_null(seqs)) {
		if (!json_is_array(seqs))
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "source.seqs: must be an array of integers");
		json_array_foreach(seqs, i, v)
			if (!json_is_integer(v) || json_integer_value(v) < 1)
				return memd_error_set(err, MEMD_EINVAL, 0,
						      "source.seqs[%zu]: must be an integer >= 1",
						      i);
	}
	ss.session = sid;
	r = store_session_get(m->sessions, call, &ss, &sink, err);
	if (r == MEMD_ENOTFOUND)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "source.session_id: session '%.64s' not found", sid);
	if (r < 0)
		return r;
	if (!found)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "%s: session_get delivered nothing",
				      store_name(m->sessions));
	v = json_pack("{s:s,s:o}", "session_id", sid, "seqs",
		      seqs && !json_is_null(seqs) ? json_incref(seqs) : json_array());
	if (!v || !(b->source = ej_dump(v))) {
		json_decref(v);
		return service_oom(err);
	}
	json_decref(v);
	b->source_session = sid;
	return 0;
}

/* body's "expires_at" (RFC 3339, after now) or "ttl_seconds" (> 0), at
 * most one of them; null = never (updates only: allow_null). */
static int32_t check_expiry(json_t *body, int64_t now, int allow_null, mem_body *b,
			    memd_error *err)
{
	json_t *at = json_object_get(body, "expires_at");
	json_t *ttl = json_object_get(body, "ttl_seconds");
	int at_set = at && !json_is_null(at), ttl_set = ttl && !json_is_null(ttl);
	int64_t us;

	if (at_set && ttl_set)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "expires_at, ttl_seconds: give one of them, not both");
	if (!at_set && !ttl_set) {
		if (!at && !ttl)
			return 0;
		if (!allow_null)
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "%s: must not be null (leave it out: never expires)",
					      at ? "expires_at" : "ttl_seconds");
		b->has_expiry = 1;
		b->expires_us = 0;
		return 0;
	}
	if (at_set) {
		if (!json_is_string(at) || ej_parse_time(json_string_value(at), &us) < 0)
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "expires_at: must be an RFC 3339 time");
		if (us <= now)
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "expires_at: must be in the future");
		b->has_expiry = 1;
		b->expires_us = us;
	} else {
		if (!json_is_integer(ttl) || json_integer_value(ttl) <= 0 ||
		    json_integer_value(ttl) > MEMORY_TTL_MAX_S)
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "ttl_seconds: must be an integer 1..%lld",
					      (long long)MEMORY_TTL_MAX_S);
		b->has_expiry = 1;
		b->expires_us = now + json_integer_value(ttl) * US_PER_SEC;
	}
	return 0;
}

static const char *const create_fields[] = { "text",   "kind",       "topics",      "entities",
					     "source", "expires_at", "ttl_seconds", "id",
					     NULL };
static const char *const update_fields[] = { "text",       "kind",        "topics",
					     "entities",   "expires_at",  "ttl_seconds",
					     "version",    "reason",      NULL };

/* ---- create ---------------------------------------------------------------------- */

/* Do a and b (JSON texts, NULL = absent or null) say the same? */
static int same_json(const char *a, const char *b)
{
	json_t *x, *y;
	int eq;

	if (!a || !b)
		return !a && !b;
	x = ej_load(a);
	y = ej_load(b);
	eq = x && y && json_equal(x, y);
	json_decref(x);
	json_decref(y);
	return eq;
}

/* Does the stored memory have the content of in (its expiry aside: a
 * retry with ttl_seconds computes another)? */
static int same_content(const memd_memory *stored, const memd_memory *in)
{
	return strcmp(stored->text, in->text) == 0 && strcmp(stored->kind, in->kind) == 0 &&
	       same_json(stored->topics_json, in->topics_json) &&
	       same_json(stored->entities_json, in->entities_json) &&
	       same_json(stored->source_json, in->source_json);
}

int32_t service_memory_create(memd *m, const char *app, const char *user, const char *body_json,
			      const char *actor, char **ret_json, int *ret_created,
			      memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	json_t *body = NULL, *out = NULL;
	mem_body b = { 0 };
	mem_read cur = { 0 };
	const char *id;
	char idbuf[UUID_TEXT_LEN + 1];
	memd_memory mm = { .struct_size = sizeof(mm) };
	int64_t now = service_clock_us(m);
	int created = 1;
	int32_t r;

	if ((r = service_check_scope(app, user, NULL, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, create_fields, err)) < 0 ||
	    (r = check_text(body, 1, &b.text, err)) < 0 ||
	    (r = service_opt_string_field(body, "kind", &b.kind, err)) < 0 ||
	    (b.kind && (r = check_kind(b.kind, "kind", err)) < 0) ||
	    (r = check_tags(body, "topics", &b.topics, err)) < 0 ||
	    (r = check_tags(body, "entities", &b.entities, err)) < 0 ||
	    (r = check_expiry(body, now, 0, &b, err)) < 0 ||
	    (r = service_opt_string_field(body, "id", &id, err)) < 0 ||
	    (id && (r = ej_check_id(id, "id", err)) < 0) ||
	    (r = check_source(m, &call, &sc, body, &b, err)) < 0)
		goto out;
	if (!id) {
		if (uuid_v7(idbuf) < 0) {
			r = memd_error_set(err, MEMD_EIO, 0, "cannot generate a memory id");
			goto out;
		}
	}
	mm.app = app;
	mm.user = user;
	mm.id = id ? id : idbuf;
	mm.text = b.text;
	mm.kind = b.kind ? b.kind : MJ_KIND_DEFAULT;
	mm.topics_json = b.topics ? b.topics : "[]";
	mm.entities_json = b.entities ? b.entities : "[]";
	mm.source_session = b.source_session;
	mm.source_json = b.source;
	mm.created_us = mm.updated_us = now;
	mm.expires_us = b.expires_us;
	hostsvc_count_tokens(m->svc, b.text, strlen(b.text), &mm.tokens);
	r = commit_one(m, &call, &sc, MEMD_MEM_ADD, 0, &mm, actor, NULL, now, &out, err);
	if (r == MEMD_ECONFLICT && id) {
		/* A retry of a create that landed answers what it made. */
		memd_error e = { 0 };
		int32_t gr = read_memory(m, &call, &sc, id, now, &cur, &e);
		if (gr == 0 && same_content(&cur.mm, &mm)) {
			created = 0;
			r = (out = mj_memory(&cur.mm)) ? 0 : service_oom(err);
		} else if (gr == 0) {
			r = memd_error_set(err, MEMD_ECONFLICT, 0,
					   "id: memory '%.64s' exists with other content", id);
		} else if (gr == MEMD_ENOTFOUND) {
			r = memd_error_set(err, MEMD_ECONFLICT, 0,
					   "id: memory '%.64s' exists, expired (the sweep deletes it; "
					   "use another id)",
					   id);
		} else {
			r = memd_error_set(err, gr, e.flags, "%s", e.msg);
		}
	}
	if (r < 0)
		goto out;
	r = service_finish(out, ret_json, err);
	out = NULL;
	if (r == 0 && ret_created)
		*ret_created = created;
out:
	json_decref(out);
	json_decref(body);
	body_clear(&b);
	read_clear(&cur);
	return r;
}

int32_t memd_memory_create(memd *m, const char *app, const char *user, const char *body_json,
			   char **ret_json, int *ret_created, memd_error *err)
{
	return service_memory_create(m, app, user, body_json, SERVICE_ACTOR_API, ret_json,
				     ret_created, err);
}

/* ---- get, list, history ------------------------------------------------------------ */

int32_t memd_memory_get(memd *m, const char *app, const char *user, const char *id,
			char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	mem_read cur = { 0 };
	int32_t r;

	if ((r = service_check_scope(app, user, NULL, &sc, err)) < 0 ||
	    (r = ej_check_id(id, "id", err)) < 0)
		return r;
	if ((r = read_memory(m, &call, &sc, id, service_clock_us(m), &cur, err)) < 0)
		return r;
	r = service_finish(mj_memory(&cur.mm), ret_json, err);
	read_clear(&cur);
	return r;
}

/* A list filter naming a tag (topic, entity): NULL or a valid tag. */
static int32_t check_filter(const char *v, const char *what, memd_error *err)
{
	return v ? check_tag(v, strlen(v), what, err) : 0;
}

static int32_t got_list_memory(void *ud, const memd_memory *mm)
{
	json_t *o = mj_memory(mm);
	return o && json_array_append_new(ud, o) == 0 ? 0 : MEMD_ENOMEM;
}

int32_t memd_memory_list(memd *m, const char *app, const char *user,
			 const memd_memory_list_options *opts, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	memd_memory_list_options lo = { 0 };
	memd_memory_query q = { .struct_size = sizeof(q) };
	json_t *arr = NULL;
	memd_memory_sink sink = { sizeof(sink), NULL, got_list_memory };
	char *before_id = NULL, *next = NULL;
	uint32_t limit;
	json_t *o;
	int32_t r;

	if ((r = service_check_scope(app, user, NULL, &sc, err)) < 0)
		return r;
	if (opts)
		memcpy(&lo, opts, opts->struct_size < sizeof(lo) ? opts->struct_size : sizeof(lo));
	if ((lo.kind && (r = check_kind(lo.kind, "kind", err)) < 0) ||
	    (r = check_filter(lo.topic, "topic", err)) < 0 ||
	    (r = check_filter(lo.entity, "entity", err)) < 0 ||
	    (lo.session_id && (r = ej_check_id(lo.session_id, "session_id", err)) < 0))
		return r;
	limit = lo.limit ? lo.limit : MEMD_LIST_LIMIT_DEFAULT;
	if (limit > MEMD_LIST_LIMIT_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "limit: at most %d", MEMD_LIST_LIMIT_MAX);
	if (lo.cursor && *lo.cursor &&
	    (r = service_list_cursor_decode(0, lo.cursor, &q.before_created_us, &before_id,
					    err)) < 0)
		return r;
	q.before_id = before_id;
	q.limit = limit + 1; /* one more tells whether there is a next page */
	q.kind = lo.kind;
	q.topic = lo.topic;
	q.entity = lo.entity;
	q.session = lo.session_id;
	q.now_us = service_clock_us(m);
	if (!(sink.userdata = arr = json_array())) {
		r = service_oom(err);
		goto out;
	}
	if ((r = store_memory_list(m->sessions, &call, &sc, &q, &sink, err)) < 0) {
		if (r == MEMD_ENOMEM)
			r = service_oom(err);
		goto out;
	}
	if (json_array_size(arr) > limit) {
		json_t *last = json_array_get(arr, limit - 1);
		int64_t created;
		json_array_remove(arr, limit);
		if (ej_parse_time(json_string_value(json_object_get(last, "created")), &created) <
			    0 ||
		    !(next = service_list_cursor_encode(0, created,
						       json_string_value(json_object_get(last, "id"))))) {
			r = service_oom(err);
			goto out;
		}
	}
	o = json_pack("{s:O,s:s?}", "memories", arr, "next_cursor", next);
	r = service_finish(o, ret_json, err);
out:
	json_decref(arr);
	free(before_id);
	free(next);
	return r;
}

static int32_t got_change(void *ud, const memd_memory_change *c)
{
	json_t *o = mj_change(c);
	return o && json_array_append_new(ud, o) == 0 ? 0 : MEMD_ENOMEM;
}

int32_t memd_memory_history(memd *m, const char *app, const char *user, const char *id,
			    char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	json_t *arr;
	memd_memory_change_sink sink = { sizeof(sink), NULL, got_change };
	int32_t r;

	if ((r = service_check_scope(app, user, NULL, &sc, err)) < 0 ||
	    (r = ej_check_id(id, "id", err)) < 0)
		return r;
	if (!(arr = json_array()))
		return service_oom(err);
	sink.userdata = arr;
	r = store_memory_history(m->sessions, &call, &sc, id, &sink, err);
	if (r < 0) {
		json_decref(arr);
		return r == MEMD_ENOMEM ? service_oom(err) : r;
	}
	return service_finish(json_pack("{s:o}", "history", arr), ret_json, err);
}

/* ---- update, delete ------------------------------------------------------------------ */

int32_t service_memory_update(memd *m, const char *app, const char *user, const char *id,
			      const char *body_json, const char *actor, char **ret_json,
			      memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	json_t *body = NULL, *v, *out = NULL;
	mem_body b = { 0 };
	mem_read cur = { 0 };
	int64_t now = service_clock_us(m);
	int32_t r;

	if ((r = service_check_scope(app, user, NULL, &sc, err)) < 0 ||
	    (r = ej_check_id(id, "id", err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, update_fields, err)) < 0 ||
	    (r = check_text(body, 0, &b.text, err)) < 0 ||
	    (r = service_opt_string_field(body, "kind", &b.kind, err)) < 0 ||
	    (b.kind && (r = check_kind(b.kind, "kind", err)) < 0) ||
	    (r = check_tags(body, "topics", &b.topics, err)) < 0 ||
	    (r = check_tags(body, "entities", &b.entities, err)) < 0 ||
	    (r = check_expiry(body, now, 1, &b, err)) < 0 ||
	    (r = service_opt_string_field(body, "reason", &b.reason, err)) < 0)
		goto out;
	if ((v = json_object_get(body, "version")) && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 1) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "version: must be an integer >= 1");
			goto out;
		}
		b.version = json_integer_value(v);
	}
	if (!b.text && !b.kind && !b.topics && !b.entities && !b.has_expiry) {
		r = memd_error_set(err, MEMD_EINVAL, 0,
				   "nothing to change: give text, kind, topics, entities, "
				   "expires_at or ttl_seconds");
		goto out;
	}
	for (int tries = 1;; tries++) {
		memd_memory mm;
		if ((r = read_memory(m, &call, &sc, id, now, &cur, err)) < 0)
			goto out;
		if (b.version && cur.mm.version != b.version) {
			r = memd_error_set(err, MEMD_ECONFLICT, 0,
					   "version: memory '%.64s' is at version %lld, not %lld", id,
					   (long long)cur.mm.version, (long long)b.version);
			goto out;
		}
		mm = cur.mm;
		if (b.text) {
			mm.text = b.text;
			hostsvc_count_tokens(m->svc, b.text, strlen(b.text), &mm.tokens);
		}
		if (b.kind)
			mm.kind = b.kind;
		if (b.topics)
			mm.topics_json = b.topics;
		if (b.entities)
			mm.entities_json = b.entities;
		if (b.has_expiry)
			mm.expires_us = b.expires_us;
		mm.updated_us = now;
		r = commit_one(m, &call, &sc, MEMD_MEM_UPDATE, cur.mm.version, &mm, actor, b.reason,
			       now, &out, err);
		if (r != MEMD_ECONFLICT || b.version || tries == MEMORY_UPDATE_TRIES)
			break;
	}
	if (r < 0)
		goto out;
	r = service_finish(out, ret_json, err);
	out = NULL;
out:
	json_decref(out);
	json_decref(body);
	body_clear(&b);
	read_clear(&cur);
	return r;
}

int32_t memd_memory_update(memd *m, const char *app, const char *user, const char *id,
			   const char *body_json, char **ret_json, memd_error *err)
{
	return service_memory_update(m, app, user, id, body_json, SERVICE_ACTOR_API, ret_json,
				     err);
}

int32_t service_memory_delete(memd *m, const char *app, const char *user, const char *id,
			      int64_t expected_version, const char *actor, const char *reason,
			      memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	memd_memory mm = { .struct_size = sizeof(mm) };
	int32_t r;

	if ((r = service_check_scope(app, user, NULL, &sc, err)) < 0 ||
	    (r = ej_check_id(id, "id", err)) < 0)
		return r;
	if (expected_version < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "version: must be >= 1 (0 = any)");
	mm.app = app;
	mm.user = user;
	mm.id = id;
	return commit_one(m, &call, &sc, MEMD_MEM_DELETE, expected_version, &mm, actor, reason,
			  service_clock_us(m), NULL, err);
}

int32_t memd_memory_delete(memd *m, const char *app, const char *user, const char *id,
			   int64_t expected_version, memd_error *err)
{
	return service_memory_delete(m, app, user, id, expected_version, SERVICE_ACTOR_API, NULL,
				     err);
}

/* ---- expiry ------------------------------------------------------------------------- */

int32_t service_memories_expire(memd *m, uint32_t *ret_count, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	uint32_t n = 0;
	int32_t r = store_memory_expire(m->sessions, &call, service_clock_us(m),
					MEMORY_EXPIRE_BATCH, &n, err);

	if (r < 0)
		return r;
	if (n)
		index_notify(m->index); /* their MEMORY_DELETE records */
	*ret_count = n;
	return 0;
}
