/* SPDX-License-Identifier: MIT */
#include "my_memories.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "plugin_util.h"
#include "my_feed.h"
#include "my_sessions.h"

#define MY_NO_LIMIT UINT64_MAX
/* Encoding of topics_match, entities_match and a filter's string: equal
 * strings always give equal bytes (see my_memories.h). */
#define MATCH_JSON_FLAGS (JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY)
/* The actor of an expiry's history row (store.h). */
#define EXPIRE_ACTOR "retention"

/* The kinds a memory may have (store.h). */
static const char *const MEMORY_KINDS[] = { "fact", "preference", "instruction", "episode" };

/* One memory by its primary key: 3 parameters. */
#define MEMORY_PK " app = ? AND user = ? AND id = ?"
/* Visible at ?: not expired (0 = never expires). */
#define NOT_EXPIRED " AND (m.expires_us = 0 OR m.expires_us > ?)"

static const my_sql SQL_MEMORY_GET = { MY_ST_MEMORY_GET,
	"SELECT " MY_MEMORY_COLS_M " FROM memd_memories m"
	" WHERE m.app = ? AND m.user = ? AND m.id = ?" NOT_EXPIRED };
static const my_sql SQL_MEMORY_LOCK = { MY_ST_MEMORY_LOCK,
	"SELECT " MY_MEMORY_COLS_M " FROM memd_memories m"
	" WHERE m.app = ? AND m.user = ? AND m.id = ? FOR UPDATE" };
/* A new memory: version 1, position 0 until the commit takes its
 * positions (a row is seen only once committed, with its position). */
static const my_sql SQL_MEMORY_INSERT = { MY_ST_MEMORY_INSERT,
	"INSERT INTO memd_memories (app, user, id, text, kind, topics, entities, topics_match,"
	" entities_match, source_session, source, created_us, updated_us, expires_us, version,"
	" position, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 0, ?)" };
static const my_sql SQL_MEMORY_UPDATE = { MY_ST_MEMORY_UPDATE,
	"UPDATE memd_memories SET text = ?, kind = ?, topics = ?, entities = ?, topics_match = ?,"
	" entities_match = ?, source_session = ?, source = ?, updated_us = ?, expires_us = ?,"
	" tokens = ?, version = version + 1 WHERE" MEMORY_PK };
static const my_sql SQL_MEMORY_DELETE = { MY_ST_MEMORY_DELETE,
	"DELETE FROM memd_memories WHERE" MEMORY_PK };
static const my_sql SQL_MEMORY_POSITION = { MY_ST_MEMORY_POSITION,
	"UPDATE memd_memories SET position = ? WHERE" MEMORY_PK };
/* The history row of a change: the memory's snapshot, op, actor, reason
 * and time. */
static const my_sql SQL_MEMORY_HISTORY_INSERT = { MY_ST_MEMORY_HISTORY_INSERT,
	"INSERT INTO memd_memory_history (app, user, id, version, op, text, kind, topics,"
	" entities, source_session, source, created_us, updated_us, expires_us, tokens, actor,"
	" reason, at_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" };
/* Oldest first: (at_us, version, op), then the order they were written. */
static const my_sql SQL_MEMORY_HISTORY = { MY_ST_MEMORY_HISTORY,
	"SELECT app, user, id, version, op, text, kind, topics, entities, source_session,"
	" source, created_us, updated_us, expires_us, tokens, actor, reason, at_us"
	" FROM memd_memory_history FORCE INDEX (memd_memory_history_by_id)"
	" WHERE" MEMORY_PK " ORDER BY at_us, version, op, hseq" };

/* memory_list: newest first on (app, user, created_us, id) walked
 * backwards, the filters (each "is it set, value") checked per row, the
 * keyset as a plain created_us bound first so the read starts there. */
#define LIST_FROM                                                                          \
	"SELECT " MY_MEMORY_COLS_M " FROM memd_memories m FORCE INDEX (memd_memories_by_created)" \
	" WHERE m.app = ? AND m.user = ?" NOT_EXPIRED                                          \
	" AND (? IS NULL OR m.kind = ?)"                                                       \
	" AND (? IS NULL OR JSON_CONTAINS(m.topics_match, ?))"                                 \
	" AND (? IS NULL OR JSON_CONTAINS(m.entities_match, ?))"                               \
	" AND (? IS NULL OR m.source_session = ?)"
#define LIST_ORDER " ORDER BY m.created_us DESC, m.id DESC LIMIT ?"
static const my_sql SQL_MEMORY_LIST = { MY_ST_MEMORY_LIST, LIST_FROM LIST_ORDER };
static const my_sql SQL_MEMORY_LIST_BEFORE = { MY_ST_MEMORY_LIST_BEFORE,
	LIST_FROM " AND m.created_us <= ? AND (m.created_us < ? OR (m.created_us = ? AND m.id < ?))"
	LIST_ORDER };

/* memory_expire: the memories expired at ?, oldest expiry first, locked;
 * each is written to the history and deleted with the same test, so one
 * an update gave a new expiry since is kept. */
#define EXPIRED " expires_us > 0 AND expires_us <= ?"
static const my_sql SQL_MEMORY_EXPIRED = { MY_ST_MEMORY_EXPIRED,
	"SELECT app, user, id FROM memd_memories FORCE INDEX (memd_memories_by_expiry)"
	" WHERE" EXPIRED " ORDER BY expires_us, app, user, id LIMIT ? FOR UPDATE" };
static const my_sql SQL_MEMORY_EXPIRE_HISTORY = { MY_ST_MEMORY_EXPIRE_HISTORY,
	"INSERT INTO memd_memory_history (app, user, id, version, op, text, kind, topics,"
	" entities, source_session, source, created_us, updated_us, expires_us, tokens, actor,"
	" reason, at_us)"
	" SELECT app, user, id, version, ?, text, kind, topics, entities, source_session, source,"
	" created_us, updated_us, expires_us, tokens, ?, NULL, ? FROM memd_memories"
	" WHERE" MEMORY_PK " AND" EXPIRED };
static const my_sql SQL_MEMORY_EXPIRE_ONE = { MY_ST_MEMORY_EXPIRE_ONE,
	"DELETE FROM memd_memories WHERE" MEMORY_PK " AND" EXPIRED };

static const my_sql SQL_USER_MEMORIES_DELETE = { MY_ST_USER_MEMORIES_DELETE,
	"DELETE FROM memd_memories WHERE app = ? AND user = ?" };
static const my_sql SQL_USER_MEMORY_HISTORY_DELETE = { MY_ST_USER_MEMORY_HISTORY_DELETE,
	"DELETE FROM memd_memory_history WHERE app = ? AND user = ?" };

/* session_list_pending: the sessions whose memory_pending (memory_seq <
 * last_seq, a stored generated column) is 1, on the index that starts with
 * it and goes on with (updated_us, app, user, id): one range, read in
 * order up to the limit. ?1/?2 bound updated_us; the keyset repeats its
 * first part as a plain range, as the lane list does. */
#define PENDING_FROM                                                                        \
	"SELECT " MY_SESSION_COLS_S " FROM memd_sessions s FORCE INDEX (memd_sessions_pending)" \
	" WHERE s.memory_pending = 1 AND s.updated_us > ? AND s.updated_us < ?"
#define PENDING_ORDER " ORDER BY s.updated_us, s.app, s.user, s.id LIMIT ?"
static const my_sql SQL_SESSION_PENDING = { MY_ST_SESSION_PENDING,
	PENDING_FROM PENDING_ORDER };
static const my_sql SQL_SESSION_PENDING_AFTER = { MY_ST_SESSION_PENDING_AFTER,
	PENDING_FROM " AND s.updated_us >= ?"
	" AND (s.updated_us > ? OR (s.updated_us = ? AND (s.app > ? OR (s.app = ? AND"
	" (s.user > ? OR (s.user = ? AND s.id > ?))))))" PENDING_ORDER };

/* The cursor move: with CLIENT_FOUND_ROWS a session at the expected seq
 * matches even when the new seq is the same. */
static const my_sql SQL_SESSION_MEMORY_SEQ = { MY_ST_SESSION_MEMORY_SEQ,
	"UPDATE memd_sessions SET memory_seq = ?"
	" WHERE app = ? AND user = ? AND id = ? AND memory_seq = ?" };

/* ---- rows and copies ---------------------------------------------------- */

void my_memory_from_row(const my_stmt *s, unsigned at, memd_memory *out)
{
	memset(out, 0, sizeof(*out));
	out->struct_size = sizeof(*out);
	out->app = my_col_text(s, at + 0);
	out->user = my_col_text(s, at + 1);
	out->id = my_col_text(s, at + 2);
	out->text = my_col_text(s, at + 3);
	out->kind = my_col_text(s, at + 4);
	out->topics_json = my_col_text(s, at + 5);
	out->entities_json = my_col_text(s, at + 6);
	out->source_session = my_col_text(s, at + 7);
	out->source_json = my_col_text(s, at + 8);
	out->created_us = my_col_i64(s, at + 9);
	out->updated_us = my_col_i64(s, at + 10);
	out->expires_us = my_col_i64(s, at + 11);
	out->version = my_col_i64(s, at + 12);
	out->position = my_col_i64(s, at + 13);
	out->tokens = my_col_i64(s, at + 14);
}

void my_memory_copy_clear(my_memory_copy *dst)
{
	free(dst->buf);
	memset(dst, 0, sizeof(*dst));
}

int32_t my_memory_copy_make(const memd_memory *src, my_memory_copy *dst, memd_error *err)
{
	const char **slots[] = { &dst->m.app, &dst->m.user, &dst->m.id, &dst->m.text,
				 &dst->m.kind, &dst->m.topics_json, &dst->m.entities_json,
				 &dst->m.source_session, &dst->m.source_json };
	int32_t r;

	my_memory_copy_clear(dst);
	dst->m = *src;
	dst->m.struct_size = sizeof(dst->m);
	r = pu_copy_strings(slots, sizeof(slots) / sizeof(slots[0]), &dst->buf, err);
	if (r < 0)
		memset(dst, 0, sizeof(*dst));
	return r;
}

static int32_t deliver_memory(const memd_memory_sink *out, const memd_memory *m, memd_error *err)
{
	return my_sink_result(out->memory(out->userdata, m), "memory", err);
}

/* my_row_fn of the memory reads: the memory of s's current row (from
 * column 0) to ud, a const memd_memory_sink *. */
static int32_t memory_row(const my_stmt *s, void *ud, memd_error *err)
{
	memd_memory m;

	my_memory_from_row(s, 0, &m);
	return deliver_memory(ud, &m, err);
}

/* ---- checks ------------------------------------------------------------- */

static int known_kind(const char *kind)
{
	for (size_t i = 0; kind && i < sizeof(MEMORY_KINDS) / sizeof(MEMORY_KINDS[0]); i++)
		if (strcmp(kind, MEMORY_KINDS[i]) == 0)
			return 1;
	return 0;
}

/* The canonical encoding (MATCH_JSON_FLAGS) of v into *ret (malloc'd). */
static int32_t match_text(const json_t *v, char **ret, memd_error *err)
{
	char *t = json_dumps(v, MATCH_JSON_FLAGS);

	if (!t)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	*ret = t;
	return 0;
}

/* json (what names it) must be a JSON array of strings; *ret_match is its
 * canonical encoding (malloc'd). */
static int32_t check_string_array(const char *what, const char *json, char **ret_match,
				  memd_error *err)
{
	json_error_t jerr;
	json_t *v;
	size_t i;
	json_t *el;
	int32_t r = 0;

	if (!json)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s is missing", what);
	v = json_loads(json, 0, &jerr);
	if (!v)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s is not JSON: %s", what, jerr.text);
	if (!json_is_array(v))
		r = memd_error_set(err, MEMD_EINVAL, 0, "%s must be a JSON array", what);
	json_array_foreach(v, i, el) {
		if (r == 0 && !json_is_string(el))
			r = memd_error_set(err, MEMD_EINVAL, 0,
					   "%s must be a JSON array of strings (element %zu is not)",
					   what, i);
	}
	if (r == 0)
		r = match_text(v, ret_match, err);
	json_decref(v);
	return r;
}

/* A filter's string in the canonical encoding (*ret malloc'd); NULL for
 * no filter. */
static int32_t match_filter(const char *s, char **ret, memd_error *err)
{
	json_t *v;
	int32_t r;

	*ret = NULL;
	if (!s)
		return 0;
	v = json_string(s);
	if (!v)
		return memd_error_set(err, MEMD_EINVAL, 0, "filter '%.64s' is not UTF-8", s);
	r = match_text(v, ret, err);
	json_decref(v);
	return r;
}

/* ---- memory_commit ------------------------------------------------------- */

/* One write, checked, with what the commit made of it. */
typedef struct write_state {
	const memd_memory_write *w;
	char *topics_match;        /* ADD, UPDATE: canonical topics */
	char *entities_match;
	my_memory_copy out;        /* the memory to deliver */
} write_state;

typedef struct commit_ctx {
	const memd_scope *scope;   /* (app, user) */
	const memd_memory_commit *c;
	write_state *ws;           /* c->n_writes */
} commit_ctx;

static const char *op_name(uint32_t op)
{
	return op == MEMD_MEM_ADD ? "add" : op == MEMD_MEM_UPDATE ? "update" : "delete";
}

/* Write i (of scope) as the store takes it, filling ws's match texts. */
static int32_t check_write(const memd_scope *scope, uint32_t i, write_state *ws,
			   memd_error *err)
{
	const memd_memory_write *w = ws->w;
	const memd_memory *m;
	int32_t r;

	if (!w || w->struct_size < sizeof(*w) || !w->memory)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory write %u is missing", (unsigned)i);
	m = w->memory;
	if (w->op != MEMD_MEM_ADD && w->op != MEMD_MEM_UPDATE && w->op != MEMD_MEM_DELETE)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory write %u has unknown op %u",
				      (unsigned)i, (unsigned)w->op);
	if (m->struct_size < sizeof(*m))
		return memd_error_set(err, MEMD_EINVAL, 0, "memory write %u: memory too short",
				      (unsigned)i);
	r = pu_check_id("memory id", m->id, err);
	if (r < 0)
		return r;
	if ((m->app && strcmp(m->app, scope->app) != 0) ||
	    (m->user && strcmp(m->user, scope->user) != 0))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "memory '%.64s' is not of the commit's app and user", m->id);
	if (w->expected_version < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory '%.64s': expected version %lld",
				      m->id, (long long)w->expected_version);
	if (w->op == MEMD_MEM_DELETE)
		return 0;
	if (!m->text)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory '%.64s' (%s) has no text", m->id,
				      op_name(w->op));
	if (!known_kind(m->kind))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "memory '%.64s': kind '%.32s' is not fact, preference, "
				      "instruction or episode",
				      m->id, m->kind ? m->kind : "(none)");
	if (m->source_session && (r = pu_check_id("memory source_session", m->source_session,
						  err)) < 0)
		return r;
	if (m->source_json && (r = my_check_json_object("memory source", m->source_json, err)) < 0)
		return r;
	if (m->expires_us < 0 || m->tokens < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "memory '%.64s': expires_us and tokens must not be negative",
				      m->id);
	r = check_string_array("memory topics", m->topics_json, &ws->topics_match, err);
	if (r == 0)
		r = check_string_array("memory entities", m->entities_json, &ws->entities_match,
				       err);
	return r;
}

/* Is m (a row) invisible at now_us? */
static int expired_at(const memd_memory *m, int64_t now_us)
{
	return m->expires_us > 0 && m->expires_us <= now_us;
}

/* Bind the history row of change op of m (a full snapshot). */
static int32_t write_history(my_conn *c, const memd_memory *m, uint32_t op, const char *actor,
			     const char *reason, int64_t at_us, memd_error *err)
{
	my_params p;

	my_params_init(&p);
	my_param_text(&p, m->app);
	my_param_text(&p, m->user);
	my_param_text(&p, m->id);
	my_param_i64(&p, m->version);
	my_param_i64(&p, op);
	my_param_text(&p, m->text);
	my_param_text(&p, m->kind);
	my_param_text(&p, m->topics_json);
	my_param_text(&p, m->entities_json);
	my_param_text(&p, m->source_session);
	my_param_text(&p, m->source_json);
	my_param_i64(&p, m->created_us);
	my_param_i64(&p, m->updated_us);
	my_param_i64(&p, m->expires_us);
	my_param_i64(&p, m->tokens);
	my_param_text(&p, actor);
	my_param_text(&p, reason);
	my_param_i64(&p, at_us);
	return my_exec(c, &SQL_MEMORY_HISTORY_INSERT, &p, NULL, err);
}

/* Lock memory id of scope and copy it into *ret; MEMD_ENOTFOUND when it
 * is absent or expired at now_us, MEMD_ECONFLICT when expected (not 0) is
 * not its version. */
static int32_t lock_memory(my_conn *c, const memd_scope *scope, const char *id, int64_t now_us,
			   int64_t expected, my_memory_copy *ret, memd_error *err)
{
	my_stmt *s = NULL;
	memd_memory row;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, scope, 0);
	my_param_text(&p, id);
	r = my_exec(c, &SQL_MEMORY_LOCK, &p, &s, err);
	if (r == 0)
		r = my_fetch(c, s, err);
	if (r < 0)
		return r;
	if (r == 0)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "memory '%.64s' not found", id);
	my_memory_from_row(s, 0, &row);
	if (expired_at(&row, now_us))
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "memory '%.64s' not found (expired)", id);
	else if (expected != 0 && expected != row.version)
		r = memd_error_set(err, MEMD_ECONFLICT, 0,
				   "memory '%.64s' is at version %lld, not %lld", id,
				   (long long)row.version, (long long)expected);
	else
		r = my_memory_copy_make(&row, ret, err);
	my_done(s);
	return r;
}

/* Bind the content of ws's memory: text, kind, topics, entities (and
 * their match columns), source_session, source, in the order both
 * SQL_MEMORY_INSERT and SQL_MEMORY_UPDATE take them. */
static void param_content(my_params *p, const write_state *ws)
{
	const memd_memory *m = ws->w->memory;

	my_param_text(p, m->text);
	my_param_text(p, m->kind);
	my_param_text(p, m->topics_json);
	my_param_text(p, m->entities_json);
	my_param_text(p, ws->topics_match);
	my_param_text(p, ws->entities_match);
	my_param_text(p, m->source_session);
	my_param_text(p, m->source_json);
}

static int32_t apply_add(my_conn *c, const commit_ctx *x, write_state *ws, memd_error *err)
{
	const memd_memory *m = ws->w->memory;
	int64_t now = x->c->now_us;
	memd_memory stored = *m;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, x->scope, 0);
	my_param_text(&p, m->id);
	param_content(&p, ws);
	my_param_i64(&p, now);
	my_param_i64(&p, now);
	my_param_i64(&p, m->expires_us);
	my_param_i64(&p, m->tokens);
	r = my_exec(c, &SQL_MEMORY_INSERT, &p, NULL, err);
	if (r == MEMD_ECONFLICT && c->last_errno == ER_DUP_ENTRY)
		return memd_error_set(err, MEMD_ECONFLICT, 0, "memory '%.64s' already exists",
				      m->id);
	if (r < 0)
		return r;
	stored.app = x->scope->app;
	stored.user = x->scope->user;
	stored.created_us = stored.updated_us = now;
	stored.version = 1;
	stored.position = 0;
	r = my_memory_copy_make(&stored, &ws->out, err);
	if (r == 0)
		r = write_history(c, &ws->out.m, MEMD_MEM_ADD, ws->w->actor, ws->w->reason, now, err);
	return r;
}

static int32_t apply_update(my_conn *c, const commit_ctx *x, write_state *ws, memd_error *err)
{
	const memd_memory *m = ws->w->memory;
	int64_t now = x->c->now_us;
	my_memory_copy old = { 0 };
	memd_memory stored = *m;
	my_params p;
	int32_t r = lock_memory(c, x->scope, m->id, now, ws->w->expected_version, &old, err);

	if (r < 0)
		return r;
	my_params_init(&p);
	param_content(&p, ws);
	my_param_i64(&p, now);
	my_param_i64(&p, m->expires_us);
	my_param_i64(&p, m->tokens);
	my_param_scope(&p, x->scope, 0);
	my_param_text(&p, m->id);
	r = my_exec(c, &SQL_MEMORY_UPDATE, &p, NULL, err);
	if (r == 0) {
		stored.app = x->scope->app;
		stored.user = x->scope->user;
		stored.created_us = old.m.created_us;
		stored.updated_us = now;
		stored.version = old.m.version + 1;
		stored.position = 0;
		r = my_memory_copy_make(&stored, &ws->out, err);
	}
	if (r == 0)
		r = write_history(c, &ws->out.m, MEMD_MEM_UPDATE, ws->w->actor, ws->w->reason, now,
				  err);
	my_memory_copy_clear(&old);
	return r;
}

static int32_t apply_delete(my_conn *c, const commit_ctx *x, write_state *ws, memd_error *err)
{
	const char *id = ws->w->memory->id;
	int64_t now = x->c->now_us;
	my_params p;
	int32_t r = lock_memory(c, x->scope, id, now, ws->w->expected_version, &ws->out, err);

	if (r == 0)
		r = write_history(c, &ws->out.m, MEMD_MEM_DELETE, ws->w->actor, ws->w->reason, now,
				  err);
	if (r < 0)
		return r;
	my_params_init(&p);
	my_param_scope(&p, x->scope, 0);
	my_param_text(&p, id);
	return my_exec(c, &SQL_MEMORY_DELETE, &p, NULL, err);
}

/* Move the cursor session's memory_seq from expected to new. */
static int32_t move_cursor(my_conn *c, const commit_ctx *x, memd_error *err)
{
	const memd_memory_commit *mc = x->c;
	memd_scope ses = { .struct_size = sizeof(ses), .app = x->scope->app, .user = x->scope->user,
			   .session = mc->cursor_session };
	my_stmt *s = NULL;
	int exists = 0;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_i64(&p, mc->new_cursor_seq);
	my_param_scope(&p, &ses, 1);
	my_param_i64(&p, mc->expected_cursor_seq);
	r = my_exec(c, &SQL_SESSION_MEMORY_SEQ, &p, &s, err);
	if (r < 0 || my_affected(s) == 1)
		return r;
	r = my_session_exists(c, &ses, &exists, err);
	if (r < 0)
		return r;
	if (!exists)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				      mc->cursor_session);
	return memd_error_set(err, MEMD_ECONFLICT, 0,
			      "session '%.64s' has moved its memory cursor (expected %lld)",
			      mc->cursor_session, (long long)mc->expected_cursor_seq);
}

/* Give write i its feed record at position pos: the row's position for an
 * add or update (a later write of the same memory in the commit sets it
 * again), a MEMORY_DELETE record for a delete. */
static int32_t place_write(my_conn *c, const commit_ctx *x, write_state *ws, int64_t pos,
			   memd_error *err)
{
	my_params p;

	if (ws->w->op == MEMD_MEM_DELETE)
		return my_feed_memory_delete(c, pos, x->scope->app, x->scope->user,
					     ws->w->memory->id, err);
	ws->out.m.position = pos;
	my_params_init(&p);
	my_param_i64(&p, pos);
	my_param_scope(&p, x->scope, 0);
	my_param_text(&p, ws->w->memory->id);
	return my_exec(c, &SQL_MEMORY_POSITION, &p, NULL, err);
}

static int32_t commit_body(my_conn *c, void *arg, memd_error *err)
{
	commit_ctx *x = arg;
	uint32_t n = x->c->n_writes;
	int64_t first = 0;
	int32_t r = 0;

	for (uint32_t i = 0; i < n; i++)
		my_memory_copy_clear(&x->ws[i].out); /* a deadlock victim's second run */
	if (x->c->cursor_session)
		r = move_cursor(c, x, err);
	for (uint32_t i = 0; r == 0 && i < n; i++) {
		write_state *ws = &x->ws[i];
		if (ws->w->op == MEMD_MEM_ADD)
			r = apply_add(c, x, ws, err);
		else if (ws->w->op == MEMD_MEM_UPDATE)
			r = apply_update(c, x, ws, err);
		else
			r = apply_delete(c, x, ws, err);
	}
	/* The feed counter's lock last (my_feed.h). */
	if (r == 0 && n > 0)
		r = my_feed_alloc(c, n, &first, err);
	for (uint32_t i = 0; r == 0 && i < n; i++)
		r = place_write(c, x, &x->ws[i], first + i, err);
	return r;
}

static void commit_clear(commit_ctx *x, uint32_t n)
{
	for (uint32_t i = 0; x->ws && i < n; i++) {
		free(x->ws[i].topics_match);
		free(x->ws[i].entities_match);
		my_memory_copy_clear(&x->ws[i].out);
	}
	free(x->ws);
	x->ws = NULL;
}

int32_t my_memory_commit(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_memory_commit *c, const memd_memory_sink *out,
			 memd_error *err)
{
	memd_scope user;
	commit_ctx x = { 0 };
	int32_t r = pu_check_scope(scope, 0, err);

	if (r < 0)
		return r;
	if (!c || c->struct_size < sizeof(*c))
		return memd_error_set(err, MEMD_EINVAL, 0, "memory commit is missing");
	if (c->n_writes > 0 && !c->writes)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory commit has no writes");
	if (c->cursor_session) {
		r = pu_check_id("cursor session", c->cursor_session, err);
		if (r < 0)
			return r;
		if (c->new_cursor_seq < c->expected_cursor_seq || c->expected_cursor_seq < 0)
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "memory cursor cannot move from %lld to %lld",
					      (long long)c->expected_cursor_seq,
					      (long long)c->new_cursor_seq);
	}
	user = (memd_scope){ .struct_size = sizeof(user), .app = scope->app, .user = scope->user };
	x.scope = &user;
	x.c = c;
	if (c->n_writes > 0) {
		x.ws = calloc(c->n_writes, sizeof(*x.ws));
		if (!x.ws)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	for (uint32_t i = 0; r == 0 && i < c->n_writes; i++) {
		x.ws[i].w = c->writes[i];
		r = check_write(&user, i, &x.ws[i], err);
	}
	if (r == 0)
		r = my_run(inst, call, MY_TXN, commit_body, &x, err);
	for (uint32_t i = 0; r == 0 && out && out->memory && i < c->n_writes; i++)
		r = deliver_memory(out, &x.ws[i].out.m, err);
	commit_clear(&x, c->n_writes);
	return r > 0 ? 0 : r;
}

/* ---- memory_get, memory_list --------------------------------------------- */

typedef struct read_ctx {
	my_store *store;
	const memd_call *call;
	const memd_scope *scope;
	const char *id;            /* memory_get; NULL = list */
	int64_t now_us;
	const memd_memory_query *q;
	const char *topic_match;   /* canonical filters; NULL = none */
	const char *entity_match;
	const memd_memory_sink *out;
} read_ctx;

static int32_t read_body(my_conn *c, void *arg, memd_error *err)
{
	read_ctx *x = arg;
	const memd_memory_query *q = x->q;
	uint64_t n = 0;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, x->scope, 0);
	if (x->id) {
		my_param_text(&p, x->id);
		my_param_i64(&p, x->now_us);
		r = my_exec(c, &SQL_MEMORY_GET, &p, &s, err);
	} else {
		my_param_i64(&p, x->now_us);
		my_param_text(&p, q->kind);
		my_param_text(&p, q->kind);
		my_param_text(&p, x->topic_match);
		my_param_text(&p, x->topic_match);
		my_param_text(&p, x->entity_match);
		my_param_text(&p, x->entity_match);
		my_param_text(&p, q->session);
		my_param_text(&p, q->session);
		if (q->before_created_us) {
			my_param_i64(&p, q->before_created_us);
			my_param_i64(&p, q->before_created_us);
			my_param_i64(&p, q->before_created_us);
			/* No id: every memory created at that instant is "after". */
			my_param_text(&p, q->before_id ? q->before_id : "");
		}
		my_param_u64(&p, q->limit);
		r = my_exec(c, q->before_created_us ? &SQL_MEMORY_LIST_BEFORE : &SQL_MEMORY_LIST, &p,
			    &s, err);
	}
	r = my_fetch_deliver(x->store, x->call, c, s, r, memory_row, (void *)x->out, &n, err);
	if (r == 0 && n == 0 && x->id)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "memory '%.64s' not found", x->id);
	return r;
}

int32_t my_memory_get(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *id, int64_t now_us, const memd_memory_sink *out,
		      memd_error *err)
{
	read_ctx x = { .store = inst, .call = call, .scope = scope, .id = id, .now_us = now_us,
		       .out = out };
	int32_t r = pu_check_scope(scope, 0, err);

	if (r == 0)
		r = pu_check_id("memory id", id, err);
	if (r < 0)
		return r;
	if (!out || !out->memory)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory sink is missing");
	return my_run(inst, call, MY_AUTOCOMMIT, read_body, &x, err);
}

int32_t my_memory_list(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_memory_query *q, const memd_memory_sink *out,
		       memd_error *err)
{
	read_ctx x = { .store = inst, .call = call, .scope = scope, .q = q, .out = out };
	char *topic = NULL, *entity = NULL;
	int32_t r = pu_check_scope(scope, 0, err);

	if (r < 0)
		return r;
	if (!q || q->struct_size < sizeof(*q) || !out || !out->memory)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory query or sink is missing");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory list limit must be > 0");
	if (q->before_created_us && q->before_id &&
	    (r = pu_check_id("before_id", q->before_id, err)) < 0)
		return r;
	if (q->session && (r = pu_check_id("session", q->session, err)) < 0)
		return r;
	x.now_us = q->now_us;
	r = match_filter(q->topic, &topic, err);
	if (r == 0)
		r = match_filter(q->entity, &entity, err);
	x.topic_match = topic;
	x.entity_match = entity;
	if (r == 0)
		r = my_run(inst, call, MY_AUTOCOMMIT, read_body, &x, err);
	free(topic);
	free(entity);
	return r;
}

/* ---- memory_history ------------------------------------------------------ */

typedef struct history_ctx {
	my_store *store;
	const memd_call *call;
	const memd_scope *scope;
	const char *id;
	const memd_memory_change_sink *out;
} history_ctx;

/* my_row_fn of memory_history: the change of s's current row (the
 * memory as it was, with op, actor, reason and at_us) to ud, a const
 * memd_memory_change_sink *. */
static int32_t change_row(const my_stmt *s, void *ud, memd_error *err)
{
	const memd_memory_change_sink *out = ud;
	memd_memory m = { .struct_size = sizeof(m) };
	memd_memory_change ch = { .struct_size = sizeof(ch), .memory = &m };

	m.app = my_col_text(s, 0);
	m.user = my_col_text(s, 1);
	m.id = my_col_text(s, 2);
	m.version = my_col_i64(s, 3);
	ch.op = (uint32_t)my_col_i64(s, 4);
	m.text = my_col_text(s, 5);
	m.kind = my_col_text(s, 6);
	m.topics_json = my_col_text(s, 7);
	m.entities_json = my_col_text(s, 8);
	m.source_session = my_col_text(s, 9);
	m.source_json = my_col_text(s, 10);
	m.created_us = my_col_i64(s, 11);
	m.updated_us = my_col_i64(s, 12);
	m.expires_us = my_col_i64(s, 13);
	m.tokens = my_col_i64(s, 14);
	ch.actor = my_col_text(s, 15);
	ch.reason = my_col_text(s, 16);
	ch.at_us = my_col_i64(s, 17);
	return my_sink_result(out->change(out->userdata, &ch), "memory change", err);
}

static int32_t history_body(my_conn *c, void *arg, memd_error *err)
{
	history_ctx *x = arg;
	uint64_t n = 0;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, x->scope, 0);
	my_param_text(&p, x->id);
	r = my_exec(c, &SQL_MEMORY_HISTORY, &p, &s, err);
	r = my_fetch_deliver(x->store, x->call, c, s, r, change_row, (void *)x->out, &n, err);
	if (r == 0 && n == 0)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "memory '%.64s' has no history", x->id);
	return r;
}

int32_t my_memory_history(void *inst, const memd_call *call, const memd_scope *scope,
			  const char *id, const memd_memory_change_sink *out, memd_error *err)
{
	history_ctx x = { .store = inst, .call = call, .scope = scope, .id = id, .out = out };
	int32_t r = pu_check_scope(scope, 0, err);

	if (r == 0)
		r = pu_check_id("memory id", id, err);
	if (r < 0)
		return r;
	if (!out || !out->change)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory change sink is missing");
	return my_run(inst, call, MY_AUTOCOMMIT, history_body, &x, err);
}

/* ---- memory_expire -------------------------------------------------------- */

/* The columns of SQL_MEMORY_EXPIRED's key. */
enum { EXPIRED_APP, EXPIRED_USER, EXPIRED_ID, EXPIRED_COLS };

typedef struct expire_ctx {
	int64_t now_us;
	uint32_t limit;
	my_keys keys;
	uint32_t count;
} expire_ctx;

/* Bind memory k's key and the expiry bound. */
static void param_expired(my_params *p, char *const *k, int64_t now_us)
{
	my_param_text(p, k[EXPIRED_APP]);
	my_param_text(p, k[EXPIRED_USER]);
	my_param_text(p, k[EXPIRED_ID]);
	my_param_i64(p, now_us);
}

static int32_t expire_body(my_conn *c, void *arg, memd_error *err)
{
	expire_ctx *x = arg;
	uint32_t done = 0;
	int64_t first = 0;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_keys_clear(&x->keys);
	x->count = 0;
	my_params_init(&p);
	my_param_i64(&p, x->now_us);
	my_param_u64(&p, x->limit);
	r = my_exec(c, &SQL_MEMORY_EXPIRED, &p, &s, err);
	while (r == 0 && (r = my_fetch(c, s, err)) == 1)
		r = my_keys_keep(&x->keys, s, err);
	my_done(s);
	for (size_t i = 0; r == 0 && i < x->keys.n; i++) {
		char **k = my_keys_row(&x->keys, i);
		my_stmt *d = NULL;
		my_params_init(&p);
		my_param_i64(&p, MEMD_MEM_EXPIRE);
		my_param_text(&p, EXPIRE_ACTOR);
		my_param_i64(&p, x->now_us);
		param_expired(&p, k, x->now_us);
		r = my_exec(c, &SQL_MEMORY_EXPIRE_HISTORY, &p, NULL, err);
		if (r < 0)
			break;
		my_params_init(&p);
		param_expired(&p, k, x->now_us);
		r = my_exec(c, &SQL_MEMORY_EXPIRE_ONE, &p, &d, err);
		if (r == 0 && my_affected(d) == 0)
			k[EXPIRED_ID][0] = '\0'; /* gone meanwhile: no record */
		else if (r == 0)
			x->count++;
	}
	/* The feed counter's lock last (my_feed.h). */
	if (r == 0 && x->count > 0)
		r = my_feed_alloc(c, x->count, &first, err);
	for (size_t i = 0; r == 0 && i < x->keys.n; i++) {
		char **k = my_keys_row(&x->keys, i);
		if (!k[EXPIRED_ID][0])
			continue;
		r = my_feed_memory_delete(c, first + done, k[EXPIRED_APP], k[EXPIRED_USER],
					  k[EXPIRED_ID], err);
		done++;
	}
	return r;
}

int32_t my_memory_expire(void *inst, const memd_call *call, int64_t now_us, uint32_t limit,
			 uint32_t *ret_count, memd_error *err)
{
	expire_ctx x = { .now_us = now_us, .limit = limit, .keys = { .ncols = EXPIRED_COLS } };
	int32_t r;

	if (!ret_count)
		return memd_error_set(err, MEMD_EINVAL, 0, "no output count");
	if (limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory expire limit must be > 0");
	r = my_run(inst, call, MY_TXN, expire_body, &x, err);
	my_keys_free(&x.keys);
	if (r == 0)
		*ret_count = x.count;
	return r;
}

/* ---- user_delete's part ---------------------------------------------------- */

int32_t my_memories_user_delete(my_conn *c, const memd_scope *scope, uint64_t *ret_rows,
				memd_error *err)
{
	my_stmt *s = NULL;
	uint64_t rows = 0;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, scope, 0);
	r = my_exec(c, &SQL_USER_MEMORIES_DELETE, &p, &s, err);
	if (r < 0)
		return r;
	rows = my_affected(s);
	my_params_init(&p);
	my_param_scope(&p, scope, 0);
	r = my_exec(c, &SQL_USER_MEMORY_HISTORY_DELETE, &p, &s, err);
	if (r < 0)
		return r;
	*ret_rows = rows + my_affected(s);
	return 0;
}

/* ---- session_list_pending --------------------------------------------------- */

typedef struct pending_ctx {
	my_store *store;
	const memd_call *call;
	const memd_pending_query *q;
	const memd_session_sink *out;
} pending_ctx;

static int32_t pending_body(my_conn *c, void *arg, memd_error *err)
{
	pending_ctx *x = arg;
	const memd_pending_query *q = x->q;
	int after = q->after_updated_us != 0 || q->after_app;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	/* No lower bound: every updated_us is above the smallest value. */
	my_param_i64(&p, q->updated_after_us ? q->updated_after_us : INT64_MIN);
	my_param_i64(&p, q->updated_before_us);
	if (after) {
		my_param_i64(&p, q->after_updated_us);
		my_param_i64(&p, q->after_updated_us);
		my_param_i64(&p, q->after_updated_us);
		/* Without an app, user or id: "" sorts before any id, so every
		 * session at after_updated_us is after the tuple. */
		my_param_text(&p, q->after_app ? q->after_app : "");
		my_param_text(&p, q->after_app ? q->after_app : "");
		my_param_text(&p, q->after_user ? q->after_user : "");
		my_param_text(&p, q->after_user ? q->after_user : "");
		my_param_text(&p, q->after_id ? q->after_id : "");
	}
	my_param_u64(&p, q->limit);
	r = my_exec(c, after ? &SQL_SESSION_PENDING_AFTER : &SQL_SESSION_PENDING, &p, &s, err);
	return my_fetch_deliver(x->store, x->call, c, s, r, my_session_row, (void *)x->out, NULL,
				err);
}

int32_t my_session_list_pending(void *inst, const memd_call *call,
				const memd_pending_query *q, const memd_session_sink *out,
				memd_error *err)
{
	pending_ctx x = { .store = inst, .call = call, .q = q, .out = out };
	int32_t r;

	if (!q || q->struct_size < sizeof(*q) || !out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "pending query or sink is missing");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "pending session list limit must be > 0");
	if (q->after_app && (r = pu_check_id("after_app", q->after_app, err)) < 0)
		return r;
	if (q->after_user && (r = pu_check_id("after_user", q->after_user, err)) < 0)
		return r;
	if (q->after_id && (r = pu_check_id("after_id", q->after_id, err)) < 0)
		return r;
	return my_run(inst, call, MY_AUTOCOMMIT, pending_body, &x, err);
}
