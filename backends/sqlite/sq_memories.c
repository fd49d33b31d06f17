/* SPDX-License-Identifier: MIT */
#include "sq_memories.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_util.h"
#include "sq_feed.h"
#include "sq_group.h"
#include "sq_sessions.h"

/* The actor of the history rows memory_expire writes (store.h). */
#define EXPIRE_ACTOR "retention"

#define MEMORY_COLS SQ_MEMORY_COLS
/* A history row's snapshot in SQ_MEMORY_COLS order (position is 0). */
#define HISTORY_MEMORY_COLS \
	"app, user, id, text, kind, topics, entities, source_session, source, created_us, " \
	"updated_us, expires_us, version, 0, tokens"

static const sq_sql SQL_MEMORY_GET = { SQ_ST_MEMORY_GET,
	"SELECT " MEMORY_COLS " FROM memories WHERE app = ?1 AND user = ?2 AND id = ?3" };
static const sq_sql SQL_MEMORY_INSERT = { SQ_ST_MEMORY_INSERT,
	"INSERT INTO memories (" MEMORY_COLS ")"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?11, 1, ?12, ?13)" };
/* created_us stays; every content column is replaced. */
static const sq_sql SQL_MEMORY_UPDATE = { SQ_ST_MEMORY_UPDATE,
	"UPDATE memories SET text = ?4, kind = ?5, topics = ?6, entities = ?7,"
	" source_session = ?8, source = ?9, updated_us = ?10, expires_us = ?11,"
	" version = version + 1, position = ?12, tokens = ?13"
	" WHERE app = ?1 AND user = ?2 AND id = ?3" };
static const sq_sql SQL_MEMORY_DELETE = { SQ_ST_MEMORY_DELETE,
	"DELETE FROM memories WHERE app = ?1 AND user = ?2 AND id = ?3" };
/* The row as it is now becomes a history entry: after an add or an
 * update, before a delete. */
static const sq_sql SQL_MEMORY_HISTORY_INSERT = { SQ_ST_MEMORY_HISTORY_INSERT,
	"INSERT INTO memory_history (app, user, id, version, op, text, kind, topics, entities,"
	" source_session, source, created_us, updated_us, expires_us, tokens, actor, reason,"
	" at_us)"
	" SELECT app, user, id, version, ?4, text, kind, topics, entities, source_session,"
	" source, created_us, updated_us, expires_us, tokens, ?5, ?6, ?7"
	" FROM memories WHERE app = ?1 AND user = ?2 AND id = ?3" };
/* Oldest first: at_us, then the order the rows were written (n). */
static const sq_sql SQL_MEMORY_HISTORY_LIST = { SQ_ST_MEMORY_HISTORY_LIST,
	"SELECT op, actor, reason, at_us, " HISTORY_MEMORY_COLS
	" FROM memory_history INDEXED BY memory_history_of"
	" WHERE app = ?1 AND user = ?2 AND id = ?3 ORDER BY at_us, n" };
/* Every listing skips expired rows (?5 = now) and checks the filters:
 * kind ?6, source session ?7, an element of topics ?8 or entities ?9. */
#define MEMORY_FILTERS \
	" AND (expires_us = 0 OR expires_us > ?5)" \
	" AND (?6 IS NULL OR kind = ?6) AND (?7 IS NULL OR source_session = ?7)" \
	" AND (?8 IS NULL OR EXISTS (SELECT 1 FROM json_each(memories.topics)" \
	"  WHERE json_each.value = ?8))" \
	" AND (?9 IS NULL OR EXISTS (SELECT 1 FROM json_each(memories.entities)" \
	"  WHERE json_each.value = ?9))"
static const sq_sql SQL_MEMORY_LIST = { SQ_ST_MEMORY_LIST,
	"SELECT " MEMORY_COLS " FROM memories INDEXED BY memories_by_created"
	" WHERE app = ?1 AND user = ?2" MEMORY_FILTERS
	" ORDER BY created_us DESC, id DESC LIMIT ?10" };
static const sq_sql SQL_MEMORY_LIST_BEFORE = { SQ_ST_MEMORY_LIST_BEFORE,
	"SELECT " MEMORY_COLS " FROM memories INDEXED BY memories_by_created"
	" WHERE app = ?1 AND user = ?2 AND (created_us, id) < (?3, ?4)" MEMORY_FILTERS
	" ORDER BY created_us DESC, id DESC LIMIT ?10" };
/* The oldest expiry first, from memories_expiring. */
static const sq_sql SQL_MEMORY_EXPIRED = { SQ_ST_MEMORY_EXPIRED,
	"SELECT app, user, id FROM memories INDEXED BY memories_expiring"
	" WHERE expires_us > 0 AND expires_us <= ?1 ORDER BY expires_us, app, user, id"
	" LIMIT ?2" };
static const sq_sql SQL_USER_MEMORIES_DELETE = { SQ_ST_USER_MEMORIES_DELETE,
	"DELETE FROM memories WHERE app = ?1 AND user = ?2" };
static const sq_sql SQL_USER_MEMORY_HISTORY_DELETE = { SQ_ST_USER_MEMORY_HISTORY_DELETE,
	"DELETE FROM memory_history WHERE app = ?1 AND user = ?2" };
static const sq_sql SQL_SESSION_MEMORY_SEQ = { SQ_ST_SESSION_MEMORY_SEQ,
	"SELECT memory_seq FROM sessions WHERE app = ?1 AND user = ?2 AND id = ?3" };
static const sq_sql SQL_SESSION_MEMORY_SEQ_SET = { SQ_ST_SESSION_MEMORY_SEQ_SET,
	"UPDATE sessions SET memory_seq = ?4 WHERE app = ?1 AND user = ?2 AND id = ?3" };
/* Sessions with unread events (the partial index sessions_pending holds
 * only those), in (updated_us, app, user, id) order after the keyset. */
#define PENDING_WHERE " WHERE memory_seq < last_seq AND updated_us > ?1 AND updated_us < ?2"
static const sq_sql SQL_SESSION_PENDING = { SQ_ST_SESSION_PENDING,
	"SELECT " SQ_SESSION_COLS " FROM sessions INDEXED BY sessions_pending" PENDING_WHERE
	" ORDER BY updated_us, app, user, id LIMIT ?3" };
static const sq_sql SQL_SESSION_PENDING_AFTER = { SQ_ST_SESSION_PENDING_AFTER,
	"SELECT " SQ_SESSION_COLS " FROM sessions INDEXED BY sessions_pending" PENDING_WHERE
	" AND (updated_us, app, user, id) > (?4, ?5, ?6, ?7)"
	" ORDER BY updated_us, app, user, id LIMIT ?3" };

/* ---- rows and copies ------------------------------------------------- */

void sq_memory_from_row(sqlite3_stmt *st, int first, memd_memory *m)
{
	memset(m, 0, sizeof(*m));
	m->struct_size = sizeof(*m);
	m->app = sq_col_text(st, first + 0);
	m->user = sq_col_text(st, first + 1);
	m->id = sq_col_text(st, first + 2);
	m->text = sq_col_text(st, first + 3);
	m->kind = sq_col_text(st, first + 4);
	m->topics_json = sq_col_text(st, first + 5);
	m->entities_json = sq_col_text(st, first + 6);
	m->source_session = sq_col_text(st, first + 7);
	m->source_json = sq_col_text(st, first + 8);
	m->created_us = sqlite3_column_int64(st, first + 9);
	m->updated_us = sqlite3_column_int64(st, first + 10);
	m->expires_us = sqlite3_column_int64(st, first + 11);
	m->version = sqlite3_column_int64(st, first + 12);
	m->position = sqlite3_column_int64(st, first + 13);
	m->tokens = sqlite3_column_int64(st, first + 14);
}

/* A memory read inside a write transaction, kept until it commits: the
 * caller's sink sees it only once it is durable. */
typedef struct memory_copy {
	memd_memory m;
	char *buf;               /* the strings of m */
} memory_copy;

static void memory_copy_free(memory_copy *c)
{
	free(c->buf);
	memset(c, 0, sizeof(*c));
}

static int32_t memory_copy_make(const memd_memory *m, memory_copy *c, memd_error *err)
{
	const char **const slots[] = { &c->m.app, &c->m.user, &c->m.id, &c->m.text, &c->m.kind,
				       &c->m.topics_json, &c->m.entities_json,
				       &c->m.source_session, &c->m.source_json };
	int32_t r;

	memory_copy_free(c);
	c->m = *m;
	if ((r = pu_copy_strings(slots, sizeof(slots) / sizeof(slots[0]), &c->buf, err)) < 0)
		memset(c, 0, sizeof(*c));
	return r;
}

/* Is a stored memory expired at now_us (invisible to reads)? */
static int expired(int64_t expires_us, int64_t now_us)
{
	return expires_us > 0 && expires_us <= now_us;
}

static int bind_key(sqlite3_stmt *st, const memd_scope *scope, const char *id)
{
	int rc = sq_bind_scope(st, scope, 0);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 3, id);
	return rc;
}

/* Read memory id of scope on c into *ret (a copy; ret->m.id NULL when
 * there is no such row, expired or not). Counts the row into call. */
static int32_t memory_read(sq_conn *c, const memd_call *call, const memd_scope *scope,
			   const char *id, memory_copy *ret, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_MEMORY_GET, &st, err);
	int rc;

	if (r < 0)
		return r;
	memory_copy_free(ret);
	rc = bind_key(st, scope, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		memd_memory m;
		sq_memory_from_row(st, 0, &m);
		r = memory_copy_make(&m, ret, err);
		if (call)
			sq_count_rows(call, st, 1);
	} else if (rc != SQLITE_DONE) {
		r = sq_fail(c, rc, err, "read memory '%.64s'", id);
	}
	sq_stmt_done(st);
	return r;
}

/* Run a statement keyed by (app, user, id) with no other parameter. */
static int32_t memory_keyed(sq_conn *c, const sq_sql *sql, const memd_scope *scope,
			    const char *id, const char *what, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, sql, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = bind_key(st, scope, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "%s memory '%.64s'", what, id);
	sq_stmt_done(st);
	return r;
}

/* Append the row of memory id as it is now to its history. */
static int32_t history_add(sq_conn *c, const memd_scope *scope, const char *id, uint32_t op,
			   const char *actor, const char *reason, int64_t at_us, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_MEMORY_HISTORY_INSERT, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = bind_key(st, scope, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 4, op);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 5, actor);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 6, reason);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 7, at_us);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "record the history of memory '%.64s'", id);
	else if (sqlite3_changes(c->db) != 1)
		r = memd_error_set(err, MEMD_EINTERNAL, 0,
				   "sqlite: memory '%.64s' vanished inside its transaction", id);
	sq_stmt_done(st);
	return r;
}

/* Delete memory id (read before: its history row is written here) and
 * add its MEMORY_DELETE record. */
static int32_t memory_remove(sq_conn *c, const memd_scope *scope, const char *id, uint32_t op,
			     const char *actor, const char *reason, int64_t at_us,
			     memd_error *err)
{
	int32_t r = history_add(c, scope, id, op, actor, reason, at_us, err);

	if (r == 0)
		r = memory_keyed(c, &SQL_MEMORY_DELETE, scope, id, "delete", err);
	if (r == 0)
		r = sq_feed_memory_tombstone(c, scope->app, scope->user, id, err);
	return r;
}

/* ---- checks ----------------------------------------------------------- */

static const char *const memory_kinds[] = { "fact", "preference", "instruction", "episode" };

static int32_t check_kind(const char *kind, memd_error *err)
{
	if (!kind)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory kind is missing");
	for (size_t i = 0; i < sizeof(memory_kinds) / sizeof(memory_kinds[0]); i++)
		if (strcmp(kind, memory_kinds[i]) == 0)
			return 0;
	return memd_error_set(err, MEMD_EINVAL, 0,
			      "memory kind '%.32s' is not fact, preference, instruction or episode",
			      kind);
}

/* MEMD_EINVAL unless json is a JSON array of strings. */
static int32_t check_string_array(const char *what, const char *json, memd_error *err)
{
	json_error_t jerr;
	json_t *v;
	int32_t r = 0;

	if (!json)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s is missing", what);
	v = json_loads(json, JSON_ALLOW_NUL, &jerr);
	if (!v)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s is not JSON (line %d, column %d)",
				      what, jerr.line, jerr.column);
	if (!json_is_array(v)) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "%s must be a JSON array", what);
	} else {
		for (size_t i = 0; i < json_array_size(v) && r == 0; i++)
			if (!json_is_string(json_array_get(v, i)))
				r = memd_error_set(err, MEMD_EINVAL, 0,
						   "%s must be an array of strings", what);
	}
	json_decref(v);
	return r;
}

/* What a store must refuse in one write of a commit on scope. */
static int32_t check_write(const memd_scope *scope, const memd_memory_write *w, uint32_t i,
			   memd_error *err)
{
	const memd_memory *m;
	int32_t r;

	if (!w || w->struct_size < sizeof(*w))
		return memd_error_set(err, MEMD_EINVAL, 0, "memory write %u is missing or short",
				      (unsigned)i);
	if (w->op != MEMD_MEM_ADD && w->op != MEMD_MEM_UPDATE && w->op != MEMD_MEM_DELETE)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory write %u has unknown op %u",
				      (unsigned)i, (unsigned)w->op);
	m = w->memory;
	if (!m || m->struct_size < sizeof(*m))
		return memd_error_set(err, MEMD_EINVAL, 0, "memory write %u has no memory",
				      (unsigned)i);
	if (w->expected_version < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "memory write %u expects negative version %lld", (unsigned)i,
				      (long long)w->expected_version);
	if (!w->actor || !w->actor[0])
		return memd_error_set(err, MEMD_EINVAL, 0, "memory write %u has no actor",
				      (unsigned)i);
	r = pu_check_id("memory id", m->id, err);
	if (r < 0)
		return r;
	if ((m->app && strcmp(m->app, scope->app) != 0) ||
	    (m->user && strcmp(m->user, scope->user) != 0))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "memory '%.64s' is not of the commit's app and user", m->id);
	if (w->op == MEMD_MEM_DELETE)
		return 0;
	if (!m->text)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory '%.64s' has no text", m->id);
	r = check_kind(m->kind, err);
	if (r == 0)
		r = check_string_array("memory topics", m->topics_json, err);
	if (r == 0)
		r = check_string_array("memory entities", m->entities_json, err);
	if (r == 0 && m->source_json)
		r = sq_check_json_object("memory source", m->source_json, err);
	if (r == 0 && m->source_session)
		r = pu_check_id("memory source session", m->source_session, err);
	if (r == 0 && (m->expires_us < 0 || m->tokens < 0))
		r = memd_error_set(err, MEMD_EINVAL, 0,
				   "memory '%.64s' has a negative expiry or token count", m->id);
	return r;
}

static int32_t check_commit(const memd_scope *scope, const memd_memory_commit *c,
			    memd_error *err)
{
	int32_t r = pu_check_scope(scope, 0, err);

	if (r < 0)
		return r;
	if (!c || c->struct_size < sizeof(*c))
		return memd_error_set(err, MEMD_EINVAL, 0, "memory commit is missing or short");
	if (c->n_writes && !c->writes)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory commit has no writes array");
	for (uint32_t i = 0; i < c->n_writes; i++) {
		r = check_write(scope, c->writes[i], i, err);
		if (r < 0)
			return r;
	}
	if (!c->cursor_session)
		return 0;
	r = pu_check_id("cursor session", c->cursor_session, err);
	if (r == 0 && c->new_cursor_seq < c->expected_cursor_seq)
		r = memd_error_set(err, MEMD_EINVAL, 0,
				   "the memory cursor cannot go back from %lld to %lld",
				   (long long)c->expected_cursor_seq, (long long)c->new_cursor_seq);
	return r;
}

/* ---- memory_commit ---------------------------------------------------- */

typedef struct commit_job {
	const memd_scope *scope;
	const memd_memory_commit *c;
	memory_copy *written;       /* n_writes: what each write left (DELETE: as it was) */
} commit_job;

/* The scope of the session whose memory cursor j moves. */
static memd_scope cursor_scope(const commit_job *j)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = j->scope->app, .user = j->scope->user,
			  .session = j->c->cursor_session };
	return sc;
}

/* The session cursor must be at the expected seq; it moves in the same
 * transaction (after the writes). */
static int32_t cursor_check(sq_conn *c, const commit_job *j, memd_error *err)
{
	memd_scope sc = cursor_scope(j);
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_SESSION_MEMORY_SEQ, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, &sc, 1);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "cursor session '%.64s' not found",
				   sc.session);
	} else if (rc == SQLITE_ROW) {
		int64_t seq = sqlite3_column_int64(st, 0);
		if (seq != j->c->expected_cursor_seq)
			r = memd_error_set(err, MEMD_ECONFLICT, 0,
					   "session '%.64s' has memory_seq %lld, not the expected "
					   "%lld",
					   sc.session, (long long)seq,
					   (long long)j->c->expected_cursor_seq);
	} else {
		r = sq_fail(c, rc, err, "read the memory cursor of session '%.64s'", sc.session);
	}
	sq_stmt_done(st);
	return r;
}

static int32_t cursor_move(sq_conn *c, const commit_job *j, memd_error *err)
{
	memd_scope sc = cursor_scope(j);
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_SESSION_MEMORY_SEQ_SET, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, &sc, 1);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 4, j->c->new_cursor_seq);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "move the memory cursor of session '%.64s'", sc.session);
	sq_stmt_done(st);
	return r;
}

/* Insert (ADD) or rewrite (UPDATE) the row with m's content at a new feed
 * position. */
static int32_t memory_store(sq_conn *c, const memd_scope *scope, const memd_memory *m,
			    int add, int64_t now_us, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int64_t pos = 0;
	int32_t r = sq_feed_alloc(c, 1, &pos, err);
	int rc;

	if (r == 0)
		r = sq_stmt(c, add ? &SQL_MEMORY_INSERT : &SQL_MEMORY_UPDATE, &st, err);
	if (r < 0)
		return r;
	rc = bind_key(st, scope, m->id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, m->text);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 5, m->kind);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 6, m->topics_json);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 7, m->entities_json);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 8, m->source_session);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 9, m->source_json);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 10, now_us);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 11, m->expires_us);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 12, pos);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 13, m->tokens);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if ((rc & 0xff) == SQLITE_CONSTRAINT && add)
		r = memd_error_set(err, MEMD_ECONFLICT, 0, "memory '%.64s' exists already", m->id);
	else if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "%s memory '%.64s'", add ? "add" : "update", m->id);
	sq_stmt_done(st);
	return r;
}

/* One write of the commit, in order: checks, then the row, its history
 * and its feed record; j->written[i] gets what the sink will see. */
static int32_t write_apply(sq_conn *c, commit_job *j, uint32_t i, memd_error *err)
{
	const memd_memory_write *w = j->c->writes[i];
	const memd_memory *m = w->memory;
	memory_copy *row = &j->written[i];
	int64_t now = j->c->now_us;
	int32_t r = memory_read(c, NULL, j->scope, m->id, row, err);

	if (r < 0)
		return r;
	if (w->op == MEMD_MEM_ADD) {
		if (row->m.id)
			return memd_error_set(err, MEMD_ECONFLICT, 0, "memory '%.64s' exists already",
					      m->id);
	} else {
		if (!row->m.id || expired(row->m.expires_us, now))
			return memd_error_set(err, MEMD_ENOTFOUND, 0, "memory '%.64s' not found",
					      m->id);
		if (w->expected_version && w->expected_version != row->m.version)
			return memd_error_set(err, MEMD_ECONFLICT, 0,
					      "memory '%.64s' is at version %lld, not the expected "
					      "%lld",
					      m->id, (long long)row->m.version,
					      (long long)w->expected_version);
	}
	if (w->op == MEMD_MEM_DELETE)
		return memory_remove(c, j->scope, m->id, MEMD_MEM_DELETE, w->actor, w->reason, now,
				     err);
	r = memory_store(c, j->scope, m, w->op == MEMD_MEM_ADD, now, err);
	if (r == 0)
		r = history_add(c, j->scope, m->id, w->op, w->actor, w->reason, now, err);
	if (r == 0)
		r = memory_read(c, NULL, j->scope, m->id, row, err);
	return r;
}

static int32_t commit_apply(sq_conn *c, void *ctx, memd_error *err)
{
	commit_job *j = ctx;
	int32_t r = 0;

	if (j->c->cursor_session)
		r = cursor_check(c, j, err);
	for (uint32_t i = 0; r == 0 && i < j->c->n_writes; i++)
		r = write_apply(c, j, i, err);
	if (r == 0 && j->c->cursor_session && j->c->new_cursor_seq != j->c->expected_cursor_seq)
		r = cursor_move(c, j, err);
	return r;
}

int32_t sq_memory_commit(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_memory_commit *c, const memd_memory_sink *out,
			 memd_error *err)
{
	commit_job job = { .scope = scope, .c = c };
	int32_t r = check_commit(scope, c, err);

	if (r < 0)
		return r;
	if (c->n_writes) {
		job.written = calloc(c->n_writes, sizeof(*job.written));
		if (!job.written)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	r = sq_group_write(inst, call, commit_apply, &job, c->n_writes, err);
	/* out is optional: a caller that keeps nothing passes NULL. */
	for (uint32_t i = 0; r == 0 && out && out->memory && i < c->n_writes; i++)
		r = sq_sink_result(out->memory(out->userdata, &job.written[i].m), "memory", err);
	if (r > 0)
		r = 0;
	for (uint32_t i = 0; i < c->n_writes; i++)
		memory_copy_free(&job.written[i]);
	free(job.written);
	return r;
}

/* ---- reads ------------------------------------------------------------ */

int32_t sq_memory_get(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *id, int64_t now_us, const memd_memory_sink *out,
		      memd_error *err)
{
	sq_store *store = inst;
	memory_copy row = { 0 };
	sq_conn *c = NULL;
	int32_t r = pu_check_scope(scope, 0, err);

	if (r == 0)
		r = pu_check_id("memory id", id, err);
	if (r == 0 && (!out || !out->memory))
		r = memd_error_set(err, MEMD_EINVAL, 0, "memory sink is missing");
	if (r < 0)
		return r;
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = memory_read(c, call, scope, id, &row, err);
	sq_read_end(store, c);
	if (r == 0 && (!row.m.id || expired(row.m.expires_us, now_us)))
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "memory '%.64s' not found", id);
	if (r == 0)
		r = sq_sink_result(out->memory(out->userdata, &row.m), "memory", err);
	memory_copy_free(&row);
	return r > 0 ? 0 : r;
}

static int bind_list(sqlite3_stmt *st, const memd_scope *scope, const memd_memory_query *q)
{
	int rc = sq_bind_scope(st, scope, 0);

	if (rc == SQLITE_OK && q->before_created_us)
		rc = sqlite3_bind_int64(st, 3, q->before_created_us);
	if (rc == SQLITE_OK && q->before_created_us)
		rc = sq_bind_text(st, 4, q->before_id ? q->before_id : "");
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 5, q->now_us);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 6, q->kind);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 7, q->session);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 8, q->topic);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 9, q->entity);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 10, q->limit);
	return rc;
}

/* sq_row_fn of sq_memory_list: the memory of st's current row to ud, a
 * const memd_memory_sink *. */
static int32_t memory_row(sqlite3_stmt *st, void *ud, memd_error *err)
{
	const memd_memory_sink *out = ud;
	memd_memory m;

	sq_memory_from_row(st, 0, &m);
	return sq_sink_result(out->memory(out->userdata, &m), "memory", err);
}

int32_t sq_memory_list(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_memory_query *q, const memd_memory_sink *out, memd_error *err)
{
	sq_store *store = inst;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	int32_t r = pu_check_scope(scope, 0, err);
	int rc;

	if (r < 0)
		return r;
	if (!q || q->struct_size < sizeof(*q))
		return memd_error_set(err, MEMD_EINVAL, 0, "memory query is missing or short");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory list limit must be > 0");
	if (!out || !out->memory)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory sink is missing");
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_stmt(c, q->before_created_us ? &SQL_MEMORY_LIST_BEFORE : &SQL_MEMORY_LIST, &st,
		    err);
	if (r < 0)
		goto out;
	rc = bind_list(st, scope, q);
	r = sq_step_deliver(store, call, c, st, rc, 0, memory_row, (void *)out, err,
			    "list memories of '%.64s'", scope->user);
out:
	sq_stmt_done(st);
	sq_read_end(store, c);
	return r;
}

/* What sq_memory_history's rows go to. */
typedef struct history_out {
	const memd_memory_change_sink *out;
	uint64_t rows;              /* delivered so far */
} history_out;

/* sq_row_fn of sq_memory_history: the change of st's current row (op,
 * actor, reason, at_us, then the memory as it was) to ud, a history_out. */
static int32_t change_row(sqlite3_stmt *st, void *ud, memd_error *err)
{
	history_out *h = ud;
	memd_memory m;
	memd_memory_change ch = { .struct_size = sizeof(ch), .memory = &m };

	ch.op = (uint32_t)sqlite3_column_int64(st, 0);
	ch.actor = sq_col_text(st, 1);
	ch.reason = sq_col_text(st, 2);
	ch.at_us = sqlite3_column_int64(st, 3);
	sq_memory_from_row(st, 4, &m);
	h->rows++;
	return sq_sink_result(h->out->change(h->out->userdata, &ch), "memory change", err);
}

int32_t sq_memory_history(void *inst, const memd_call *call, const memd_scope *scope,
			  const char *id, const memd_memory_change_sink *out, memd_error *err)
{
	sq_store *store = inst;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	history_out h = { .out = out };
	int32_t r = pu_check_scope(scope, 0, err);
	int rc;

	if (r == 0)
		r = pu_check_id("memory id", id, err);
	if (r == 0 && (!out || !out->change))
		r = memd_error_set(err, MEMD_EINVAL, 0, "memory change sink is missing");
	if (r < 0)
		return r;
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_stmt(c, &SQL_MEMORY_HISTORY_LIST, &st, err);
	if (r < 0)
		goto out;
	rc = bind_key(st, scope, id);
	r = sq_step_deliver(store, call, c, st, rc, 0, change_row, &h, err,
			    "read the history of memory '%.64s'", id);
	if (r == 0 && h.rows == 0)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "memory '%.64s' has no history", id);
out:
	sq_stmt_done(st);
	sq_read_end(store, c);
	return r;
}

/* ---- memory_expire ---------------------------------------------------- */

/* The columns of SQL_MEMORY_EXPIRED's key. */
enum { EXPIRED_APP, EXPIRED_USER, EXPIRED_ID, EXPIRED_COLS };

/* Remove one expired memory (sq_expire_fn). */
static int32_t expire_one(sq_conn *c, char *const *k, int64_t now_us, memd_error *err)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = k[EXPIRED_APP],
			  .user = k[EXPIRED_USER] };

	return memory_remove(c, &sc, k[EXPIRED_ID], MEMD_MEM_EXPIRE, EXPIRE_ACTOR, NULL, now_us,
			     err);
}

int32_t sq_memory_expire(void *inst, const memd_call *call, int64_t now_us, uint32_t limit,
			 uint32_t *ret_count, memd_error *err)
{
	return sq_expire(inst, call, &SQL_MEMORY_EXPIRED, EXPIRED_COLS, "expired memories", now_us,
			 limit, expire_one, ret_count, err);
}

/* ---- user_delete ------------------------------------------------------ */

static int32_t user_rows_delete(sq_conn *c, const sq_sql *sql, const memd_scope *scope,
				const char *what, int64_t *count, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, sql, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 0);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "delete the %s of '%.64s'", what, scope->user);
	else
		*count += sqlite3_changes(c->db);
	sq_stmt_done(st);
	return r;
}

int32_t sq_memories_user_delete(sq_conn *c, const memd_scope *scope, int64_t *ret_count,
				memd_error *err)
{
	int64_t n = 0;
	int32_t r = user_rows_delete(c, &SQL_USER_MEMORIES_DELETE, scope, "memories", &n, err);

	if (r == 0)
		r = user_rows_delete(c, &SQL_USER_MEMORY_HISTORY_DELETE, scope, "memory history",
				     &n, err);
	if (r == 0)
		*ret_count = n;
	return r;
}

/* ---- session_list_pending --------------------------------------------- */

/* Below every time: the lower bound when the query sets none. */
#define TIME_MIN INT64_MIN

int32_t sq_session_list_pending(void *inst, const memd_call *call, const memd_pending_query *q,
				const memd_session_sink *out, memd_error *err)
{
	sq_store *store = inst;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	int64_t lower;
	int keyset;
	int32_t r;
	int rc;

	if (!q || q->struct_size < sizeof(*q))
		return memd_error_set(err, MEMD_EINVAL, 0, "pending query is missing or short");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "pending session list limit must be > 0");
	if (q->updated_before_us <= 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "pending query needs updated_before_us");
	if (!out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "session sink is missing");
	keyset = q->after_updated_us != 0;
	/* The walk starts at the later of the two lower bounds: the keyset
	 * only takes rows with updated_us >= after_updated_us, so a page deep
	 * into the list does not step over the rows of the pages before. */
	lower = q->updated_after_us ? q->updated_after_us : TIME_MIN;
	if (keyset && q->after_updated_us > TIME_MIN + 1 && q->after_updated_us - 1 > lower)
		lower = q->after_updated_us - 1;
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_stmt(c, keyset ? &SQL_SESSION_PENDING_AFTER : &SQL_SESSION_PENDING, &st, err);
	if (r < 0)
		goto out;
	rc = sqlite3_bind_int64(st, 1, lower);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 2, q->updated_before_us);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 3, q->limit);
	if (rc == SQLITE_OK && keyset)
		rc = sqlite3_bind_int64(st, 4, q->after_updated_us);
	if (rc == SQLITE_OK && keyset)
		rc = sq_bind_text(st, 5, q->after_app ? q->after_app : "");
	if (rc == SQLITE_OK && keyset)
		rc = sq_bind_text(st, 6, q->after_user ? q->after_user : "");
	if (rc == SQLITE_OK && keyset)
		rc = sq_bind_text(st, 7, q->after_id ? q->after_id : "");
	r = sq_step_deliver(store, call, c, st, rc, 0, sq_session_row, (void *)out, err,
			    "list sessions with unread events");
out:
	sq_stmt_done(st);
	sq_read_end(store, c);
	return r;
}
