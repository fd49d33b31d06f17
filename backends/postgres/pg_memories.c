/* SPDX-License-Identifier: MIT */
#include "pg_memories.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_util.h"

#define EMPTY_ARRAY "[]"
#define KEYSET_FIRST "" /* sorts before every id: (t, "") bounds below t */
#define ADD_OP "1"      /* MEMD_MEM_ADD in SQL */
#define UPDATE_OP "2"   /* MEMD_MEM_UPDATE in SQL */
#define DELETE_OP "3"   /* MEMD_MEM_DELETE in SQL */
#define EXPIRE_OP "4"   /* MEMD_MEM_EXPIRE in SQL */
#define EXPIRE_ACTOR "'retention'" /* the history actor of memory_expire, in SQL */

static const pg_sql SQL_BEGIN = { PG_ST_BEGIN, 0, "BEGIN" };
static const pg_sql SQL_COMMIT = { PG_ST_COMMIT, 0, "COMMIT" };

/* The memory's primary key. */
#define MEM_PK " app = $1 AND \"user\" = $2 AND id = $3"
/* Visible at $n: not expired (0 < expires_us <= now is). */
#define VISIBLE_AT(n) " AND (expires_us = 0 OR expires_us > " n "::bigint)"

/* ---- memory_commit: two rounds in one transaction ------------------ */

/* Round 1 takes the locks and reads what the checks need. The cursor
 * moves first: the conditional UPDATE is the check (of two commits with
 * one expected value the second waits for the first's row lock, then
 * finds memory_seq moved and updates nothing), and the plain read after
 * it tells a missing session (no row) from a moved cursor. */
static const pg_sql SQL_MEMORY_CURSOR_MOVE = { PG_ST_MEMORY_CURSOR_MOVE, 5,
	"UPDATE sessions SET memory_seq = $5::bigint"
	" WHERE app = $1 AND \"user\" = $2 AND id = $3 AND memory_seq = $4::bigint RETURNING 1" };
static const pg_sql SQL_MEMORY_CURSOR_READ = { PG_ST_MEMORY_CURSOR_READ, 3,
	"SELECT memory_seq FROM sessions WHERE app = $1 AND \"user\" = $2 AND id = $3" };
/* One per write: the row it names, locked until the transaction ends, so
 * the checks made on it hold for round 2 (a row that does not exist yet
 * cannot be locked: a concurrent add of the same id makes round 2's
 * insert fail on the primary key, which is the ADD's conflict). */
static const pg_sql SQL_MEMORY_LOCK = { PG_ST_MEMORY_LOCK, 3,
	"SELECT version, expires_us FROM memories WHERE" MEM_PK " FOR UPDATE" };

/* Round 2 writes. The feed positions first, one per write, from the
 * feed counter whose row lock is the transaction's last new lock (the
 * session's and the memories' it holds already), as every writer takes
 * it (pg_events.c says why that makes positions commit in order). */
static const pg_sql SQL_MEMORY_FEED_ALLOC = { PG_ST_MEMORY_FEED_ALLOC, 1,
	"UPDATE feed_counter SET last = last + $1::bigint WHERE id = 1 RETURNING last" };
/* Each write is one statement: the row's change with its new position
 * ($13 counts back from the counter just advanced), its history row (the
 * snapshot after), and, for a delete, its MEMORY_DELETE record; it
 * returns the memory as written (a delete's: as it was). */
#define POSITION_BACK(n) "(SELECT last FROM feed_counter WHERE id = 1) - " n "::bigint"
#define HISTORY_INSERT \
	"INSERT INTO memory_history (app, \"user\", id, op, text, kind, topics, entities," \
	" source_session, source, created_us, updated_us, expires_us, version, tokens, actor," \
	" reason, at_us)"
#define HISTORY_SELECT(op, actor, reason, at) \
	" SELECT app, \"user\", id, " op ", text, kind, topics, entities, source_session, source," \
	" created_us, updated_us, expires_us, version, tokens, " actor ", " reason ", " at
/* $1..$3 the key, $4 text, $5 kind, $6 topics, $7 entities, $8 source
 * session, $9 source, $10 now, $11 expires, $12 tokens, $13 position
 * back, $14 actor, $15 reason. */
#define WRITE_N 15
static const pg_sql SQL_MEMORY_ADD = { PG_ST_MEMORY_ADD, WRITE_N,
	"WITH m AS (INSERT INTO memories (app, \"user\", id, text, kind, topics, entities,"
	"   source_session, source, created_us, updated_us, expires_us, version, position, tokens)"
	"  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::bigint, $10::bigint, $11, 1, "
	POSITION_BACK("$13") ", $12) RETURNING *),"
	" h AS (" HISTORY_INSERT HISTORY_SELECT(ADD_OP, "$14::text", "$15::text", "$10::bigint")
	"  FROM m)"
	" SELECT " PG_MEMORY_COLS " FROM m" };
static const pg_sql SQL_MEMORY_UPDATE = { PG_ST_MEMORY_UPDATE, WRITE_N,
	"WITH m AS (UPDATE memories SET text = $4, kind = $5, topics = $6, entities = $7,"
	"   source_session = $8, source = $9, updated_us = $10::bigint, expires_us = $11,"
	"   tokens = $12, version = version + 1, position = " POSITION_BACK("$13")
	"  WHERE" MEM_PK " RETURNING *),"
	" h AS (" HISTORY_INSERT HISTORY_SELECT(UPDATE_OP, "$14::text", "$15::text", "$10::bigint")
	"  FROM m)"
	" SELECT " PG_MEMORY_COLS " FROM m" };
/* $4 position back, $5 actor, $6 reason, $7 now. */
static const pg_sql SQL_MEMORY_DELETE = { PG_ST_MEMORY_DELETE, 7,
	"WITH m AS (DELETE FROM memories WHERE" MEM_PK " RETURNING *),"
	" h AS (" HISTORY_INSERT HISTORY_SELECT(DELETE_OP, "$5::text", "$6::text", "$7::bigint")
	"  FROM m),"
	" t AS (INSERT INTO feed_memory_deletes (position, app, \"user\", id)"
	"  SELECT " POSITION_BACK("$4") ", app, \"user\", id FROM m)"
	" SELECT " PG_MEMORY_COLS " FROM m" };

/* ---- reads ---------------------------------------------------------- */

static const pg_sql SQL_MEMORY_GET = { PG_ST_MEMORY_GET, 4,
	"SELECT " PG_MEMORY_COLS " FROM memories WHERE" MEM_PK VISIBLE_AT("$4") };
/* Newest first over memories_by_created, which the server walks down
 * from the keyset bound ($9, $10) to the limit ($8); the filters ($4 kind,
 * $5 topic, $6 entity, $7 source session; NULL = any) and the expiry
 * ($3) are checked on the rows of that walk. */
#define LIST_WHERE \
	" WHERE app = $1 AND \"user\" = $2" VISIBLE_AT("$3") \
	" AND ($4::text IS NULL OR kind = $4::text)" \
	" AND ($5::text IS NULL OR topics::jsonb ? $5::text)" \
	" AND ($6::text IS NULL OR entities::jsonb ? $6::text)" \
	" AND ($7::text IS NULL OR source_session = $7::text)"
#define LIST_ORDER " ORDER BY created_us DESC, id DESC LIMIT $8"
static const pg_sql SQL_MEMORY_LIST = { PG_ST_MEMORY_LIST, 8,
	"SELECT " PG_MEMORY_COLS " FROM memories" LIST_WHERE LIST_ORDER };
static const pg_sql SQL_MEMORY_LIST_BEFORE = { PG_ST_MEMORY_LIST_BEFORE, 10,
	"SELECT " PG_MEMORY_COLS " FROM memories" LIST_WHERE
	" AND (created_us, id) < ($9::bigint, $10::text)" LIST_ORDER };
/* Every change of one memory, oldest first: by time, then version, then
 * op (add, update, delete, expire), then the order they were written. */
static const pg_sql SQL_MEMORY_HISTORY = { PG_ST_MEMORY_HISTORY, 3,
	"SELECT op, app, \"user\", id, text, kind, topics, entities, source_session, source,"
	" created_us, updated_us, expires_us, version, 0, tokens, actor, reason, at_us"
	" FROM memory_history WHERE" MEM_PK " ORDER BY at_us, version, op, n" };
#define HISTORY_ACTOR_COL (1 + PG_MEMORY_N_COLS)

/* Retention: up to $2 memories of every scope expired at $1, the oldest
 * expiry first over memories_by_expiry, chosen (and locked) once by a
 * materialized CTE: a LIMIT in a subquery of the DELETE itself may be
 * run again, and would then skip the rows deleted so far and take more.
 * A row another transaction holds (a commit changing it) is skipped; the
 * lock re-checks the WHERE on the newest version of the row. Each gets
 * its history row (EXPIRE, as it was) and a MEMORY_DELETE record at the
 * next positions, in the order chosen. The result is the count. */
static const pg_sql SQL_MEMORY_EXPIRE = { PG_ST_MEMORY_EXPIRE, 2,
	"WITH s AS MATERIALIZED (SELECT app, \"user\", id FROM memories"
	"   WHERE expires_us > 0 AND expires_us <= $1::bigint"
	"   ORDER BY expires_us, app, \"user\", id LIMIT $2 FOR UPDATE SKIP LOCKED),"
	" d AS (DELETE FROM memories m USING s"
	"   WHERE m.app = s.app AND m.\"user\" = s.\"user\" AND m.id = s.id RETURNING m.*),"
	" n AS (SELECT count(*) AS n FROM d),"
	" c AS (UPDATE feed_counter SET last = last + (SELECT n FROM n)"
	"   WHERE id = 1 AND (SELECT n FROM n) > 0 RETURNING last),"
	" h AS (" HISTORY_INSERT HISTORY_SELECT(EXPIRE_OP, EXPIRE_ACTOR, "NULL", "$1::bigint")
	"   FROM d),"
	" f AS (INSERT INTO feed_memory_deletes (position, app, \"user\", id)"
	"   SELECT (SELECT last FROM c) - (SELECT n FROM n)"
	"   + row_number() OVER (ORDER BY expires_us, app, \"user\", id), app, \"user\", id FROM d)"
	" SELECT n FROM n" };

void pg_memory_from_row(const PGresult *res, int row, int col0, memd_memory *m)
{
	memset(m, 0, sizeof(*m));
	m->struct_size = sizeof(*m);
	m->app = pg_get_text(res, row, col0 + 0);
	m->user = pg_get_text(res, row, col0 + 1);
	m->id = pg_get_text(res, row, col0 + 2);
	m->text = pg_get_text(res, row, col0 + 3);
	m->kind = pg_get_text(res, row, col0 + 4);
	m->topics_json = pg_get_text(res, row, col0 + 5);
	m->entities_json = pg_get_text(res, row, col0 + 6);
	m->source_session = pg_get_text(res, row, col0 + 7);
	m->source_json = pg_get_text(res, row, col0 + 8);
	m->created_us = pg_get_i64(res, row, col0 + 9);
	m->updated_us = pg_get_i64(res, row, col0 + 10);
	m->expires_us = pg_get_i64(res, row, col0 + 11);
	m->version = pg_get_i64(res, row, col0 + 12);
	m->position = pg_get_i64(res, row, col0 + 13);
	m->tokens = pg_get_i64(res, row, col0 + 14);
}

static int32_t deliver(const memd_memory_sink *out, const PGresult *res, int row,
		       memd_error *err)
{
	memd_memory m;

	pg_memory_from_row(res, row, 0, &m);
	return pg_sink_result(out->memory(out->userdata, &m), "memory", err);
}

static int32_t not_found(const char *id, memd_error *err)
{
	return memd_error_set(err, MEMD_ENOTFOUND, 0, "memory '%.64s' not found", id);
}

/* ---- checks --------------------------------------------------------- */

static int is_kind(const char *kind)
{
	static const char *const kinds[] = { "fact", "preference", "instruction", "episode" };

	for (size_t i = 0; kind && i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(kind, kinds[i]) == 0)
			return 1;
	return 0;
}

/* MEMD_EINVAL unless json is a JSON array of strings (what names it). */
static int32_t check_string_array(const char *what, const char *json, memd_error *err)
{
	json_error_t jerr;
	json_t *v = json_loads(json, JSON_DECODE_ANY, &jerr);
	size_t i;
	json_t *e;
	int32_t r = 0;

	if (!v)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s is not JSON: %s", what, jerr.text);
	if (!json_is_array(v))
		r = memd_error_set(err, MEMD_EINVAL, 0, "%s must be a JSON array", what);
	else
		json_array_foreach(v, i, e)
			if (!json_is_string(e) && r == 0)
				r = memd_error_set(err, MEMD_EINVAL, 0,
						   "%s must be a JSON array of strings", what);
	json_decref(v);
	return r;
}

/* True when s is set and is not want (the commit's app or user). */
static int differs(const char *s, const char *want)
{
	return s && strcmp(s, want) != 0;
}

/* Everything write i says, checked before anything is sent. */
static int32_t check_write(const memd_scope *scope, const memd_memory_write *w, uint32_t i,
			   memd_error *err)
{
	const memd_memory *m;
	int32_t r;

	if (!w || !PG_HAS(w, reason) || !w->memory || !PG_HAS(w->memory, tokens))
		return memd_error_set(err, MEMD_EINVAL, 0, "memory write %u or its memory is missing",
				      (unsigned)i);
	m = w->memory;
	if (w->op != MEMD_MEM_ADD && w->op != MEMD_MEM_UPDATE && w->op != MEMD_MEM_DELETE)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory write %u has unknown op %u",
				      (unsigned)i, (unsigned)w->op);
	r = pu_check_id("memory id", m->id, err);
	if (r < 0)
		return r;
	if (differs(m->app, scope->app) || differs(m->user, scope->user))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "memory '%.64s' is not of the commit's app and user", m->id);
	if (w->expected_version < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "memory '%.64s': expected version must not be negative", m->id);
	if (w->op == MEMD_MEM_DELETE)
		return 0;
	if (!m->text)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory '%.64s' has no text", m->id);
	if (!is_kind(m->kind))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "memory '%.64s': kind must be fact, preference, instruction "
				      "or episode, not '%.32s'", m->id, m->kind ? m->kind : "(none)");
	if (m->topics_json && (r = check_string_array("memory topics", m->topics_json, err)) < 0)
		return r;
	if (m->entities_json &&
	    (r = check_string_array("memory entities", m->entities_json, err)) < 0)
		return r;
	if (m->source_session && (r = pu_check_id("memory source_session", m->source_session,
						   err)) < 0)
		return r;
	if (m->expires_us < 0 || m->tokens < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "memory '%.64s': expires_us and tokens must not be negative",
				      m->id);
	return 0;
}

static int32_t check_commit(const memd_scope *scope, const memd_memory_commit *c,
			    memd_error *err)
{
	int32_t r = pu_check_scope(scope, 0, err);

	if (r < 0)
		return r;
	if (!c || !PG_HAS(c, now_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "memory commit is missing");
	if (c->n_writes && !c->writes)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory commit has no writes array");
	for (uint32_t i = 0; i < c->n_writes; i++)
		if ((r = check_write(scope, c->writes[i], i, err)) < 0)
			return r;
	if (!c->cursor_session)
		return 0;
	r = pu_check_id("cursor session", c->cursor_session, err);
	if (r == 0 && c->expected_cursor_seq < 0)
		r = memd_error_set(err, MEMD_EINVAL, 0, "expected cursor seq must not be negative");
	if (r == 0 && c->new_cursor_seq < c->expected_cursor_seq)
		r = memd_error_set(err, MEMD_EINVAL, 0,
				   "new cursor seq %lld is before the expected %lld",
				   (long long)c->new_cursor_seq, (long long)c->expected_cursor_seq);
	return r;
}

/* ---- memory_commit -------------------------------------------------- */

typedef struct mem_ctx {
	pg_store *store;
	const memd_call *call;
	const memd_scope *scope;
	const char *id;                         /* get, history */
	int64_t now_us;                         /* get */
	const memd_memory_sink *out;
	const memd_memory_change_sink *changes; /* history */
	const memd_memory_query *q;             /* list */
	/* commit */
	const memd_memory_commit *c;
	int64_t *version_after;                 /* per write: the version it leaves */
} mem_ctx;

/* Queue round 1: BEGIN, the cursor's move and read, each write's lock.
 * *ret_lock_at is the index of the first lock's result. */
static int32_t commit_send_locks(pg_conn *c, const mem_ctx *x, size_t *ret_lock_at,
				 memd_error *err)
{
	const memd_memory_commit *mc = x->c;
	char exp[PG_INT_BUF], nxt[PG_INT_BUF];
	const char *cursor[5] = { x->scope->app, x->scope->user, mc->cursor_session,
				  pg_i64(exp, mc->expected_cursor_seq),
				  pg_i64(nxt, mc->new_cursor_seq) };
	int32_t r = pg_send(c, &SQL_BEGIN, NULL, err);

	if (r == 0 && mc->cursor_session)
		r = pg_send(c, &SQL_MEMORY_CURSOR_MOVE, cursor, err);
	if (r == 0 && mc->cursor_session)
		r = pg_send(c, &SQL_MEMORY_CURSOR_READ, cursor, err);
	*ret_lock_at = pg_n_queued(c);
	for (uint32_t i = 0; r == 0 && i < mc->n_writes; i++) {
		const char *key[3] = { x->scope->app, x->scope->user, mc->writes[i]->memory->id };
		r = pg_send(c, &SQL_MEMORY_LOCK, key, err);
	}
	return r;
}

/* The cursor's verdict from round 1's results (its move at index 1). */
static int32_t commit_check_cursor(pg_conn *c, const mem_ctx *x, memd_error *err)
{
	const memd_memory_commit *mc = x->c;
	const PGresult *read;

	if (!mc->cursor_session || PQntuples(pg_res(c, 1)) == 1)
		return 0;
	read = pg_res(c, 2);
	if (PQntuples(read) == 0)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				      mc->cursor_session);
	return memd_error_set(err, MEMD_ECONFLICT, 0,
			      "session '%.64s' memory cursor is at %lld, not the expected %lld",
			      mc->cursor_session, (long long)pg_get_i64(read, 0, 0),
			      (long long)mc->expected_cursor_seq);
}

/* The checks of every write in order, each on the row as the writes
 * before it in the commit leave it (round 1 read it as it was before the
 * commit). Fills x->version_after. */
static int32_t commit_check_writes(pg_conn *c, mem_ctx *x, size_t lock_at, memd_error *err)
{
	const memd_memory_commit *mc = x->c;

	for (uint32_t i = 0; i < mc->n_writes; i++) {
		const memd_memory_write *w = mc->writes[i];
		const char *id = w->memory->id;
		int exists, visible;
		int64_t version = 0, expires = 0;
		uint32_t j = i;

		while (j > 0 && strcmp(mc->writes[j - 1]->memory->id, id) != 0)
			j--;
		if (j > 0) {
			const memd_memory_write *prev = mc->writes[j - 1];
			exists = prev->op != MEMD_MEM_DELETE;
			version = x->version_after[j - 1];
			expires = prev->memory->expires_us;
		} else {
			const PGresult *res = pg_res(c, lock_at + i);
			exists = PQntuples(res) > 0;
			if (exists) {
				version = pg_get_i64(res, 0, 0);
				expires = pg_get_i64(res, 0, 1);
			}
		}
		visible = exists && !(expires > 0 && expires <= mc->now_us);
		if (w->op == MEMD_MEM_ADD) {
			if (exists)
				return memd_error_set(err, MEMD_ECONFLICT, 0,
						      "memory '%.64s' already exists", id);
			x->version_after[i] = 1;
			continue;
		}
		if (!visible)
			return not_found(id, err);
		if (w->expected_version && w->expected_version != version)
			return memd_error_set(err, MEMD_ECONFLICT, 0,
					      "memory '%.64s' is at version %lld, not the expected "
					      "%lld", id, (long long)version,
					      (long long)w->expected_version);
		x->version_after[i] = w->op == MEMD_MEM_UPDATE ? version + 1 : version;
	}
	return 0;
}

/* Queue write i of round 2 (its position: back from the counter). */
static int32_t commit_send_write(pg_conn *c, const mem_ctx *x, uint32_t i, memd_error *err)
{
	const memd_memory_commit *mc = x->c;
	const memd_memory_write *w = mc->writes[i];
	const memd_memory *m = w->memory;
	char now[PG_INT_BUF], exp[PG_INT_BUF], tok[PG_INT_BUF], back[PG_INT_BUF];

	pg_i64(now, mc->now_us);
	pg_i64(back, (int64_t)(mc->n_writes - 1 - i));
	if (w->op == MEMD_MEM_DELETE) {
		const char *vals[7] = { x->scope->app, x->scope->user, m->id, back, w->actor,
					w->reason, now };
		return pg_send(c, &SQL_MEMORY_DELETE, vals, err);
	}
	{
		const char *vals[WRITE_N] = {
			x->scope->app, x->scope->user, m->id, m->text, m->kind,
			m->topics_json ? m->topics_json : EMPTY_ARRAY,
			m->entities_json ? m->entities_json : EMPTY_ARRAY,
			m->source_session, m->source_json, now, pg_i64(exp, m->expires_us),
			pg_i64(tok, m->tokens), back, w->actor, w->reason,
		};
		return pg_send(c, w->op == MEMD_MEM_ADD ? &SQL_MEMORY_ADD : &SQL_MEMORY_UPDATE, vals,
			       err);
	}
}

/* Round 2 failed on the data: name the write whose statement did. */
static int32_t commit_write_failed(pg_conn *c, const mem_ctx *x, size_t write_at, int32_t r,
				   memd_error *err)
{
	for (uint32_t i = 0; i < x->c->n_writes; i++) {
		const PGresult *res = pg_res(c, write_at + i);
		if (res && PQresultStatus(res) == PGRES_FATAL_ERROR) {
			/* Only an add inserts a key: another commit added it since
			 * round 1 looked. */
			if (r == MEMD_ECONFLICT)
				return memd_error_set(err, MEMD_ECONFLICT, 0,
						      "memory '%.64s' already exists",
						      x->c->writes[i]->memory->id);
			break;
		}
	}
	return r;
}

static int32_t commit_once(pg_conn *c, void *ctx, memd_error *err)
{
	mem_ctx *x = ctx;
	const memd_memory_commit *mc = x->c;
	char n[PG_INT_BUF];
	const char *alloc[1] = { pg_i64(n, mc->n_writes) };
	size_t lock_at = 0, write_at;
	int32_t r = commit_send_locks(c, x, &lock_at, err);

	if (r == 0)
		r = pg_run(c, "lock memories", err);
	if (r == 0)
		r = commit_check_cursor(c, x, err);
	if (r == 0)
		r = commit_check_writes(c, x, lock_at, err);
	/* Refused (or failed): nothing was written, and pg_give rolls the
	 * transaction back (c->sqlstate stays for pg_with_conn's retry). */
	if (r < 0)
		return r;
	pg_reset(c);

	if (mc->n_writes)
		r = pg_send(c, &SQL_MEMORY_FEED_ALLOC, alloc, err);
	write_at = pg_n_queued(c);
	for (uint32_t i = 0; r == 0 && i < mc->n_writes; i++)
		r = commit_send_write(c, x, i, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "commit memories", err);
	if (r < 0)
		return commit_write_failed(c, x, write_at, r, err);
	for (uint32_t i = 0; i < mc->n_writes; i++)
		if (PQntuples(pg_res(c, write_at + i)) != 1)
			return memd_error_set(err, MEMD_EINTERNAL, 0,
					      "postgres: memory '%.64s' was locked but not written",
					      mc->writes[i]->memory->id);
	pu_rows_read(x->call, mc->n_writes);
	/* Committed: deliver each memory as written, in write order. */
	for (uint32_t i = 0; r == 0 && x->out && x->out->memory && i < mc->n_writes; i++)
		r = deliver(x->out, pg_res(c, write_at + i), 0, err);
	return r > 0 ? 0 : r;
}

int32_t pg_memory_commit(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_memory_commit *c, const memd_memory_sink *out,
			 memd_error *err)
{
	mem_ctx x = { .store = inst, .call = call, .scope = scope, .c = c, .out = out };
	int32_t r = check_commit(scope, c, err);

	if (r < 0)
		return r;
	if (c->n_writes == 0 && !c->cursor_session)
		return 0;
	if (c->n_writes) {
		x.version_after = calloc(c->n_writes, sizeof(*x.version_after));
		if (!x.version_after)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	r = pg_with_conn(inst, call, commit_once, &x, err);
	free(x.version_after);
	return r;
}

/* ---- get, list, history ---------------------------------------------- */

static int32_t get_once(pg_conn *c, void *ctx, memd_error *err)
{
	mem_ctx *x = ctx;
	char now[PG_INT_BUF];
	const char *vals[4] = { x->scope->app, x->scope->user, x->id, pg_i64(now, x->now_us) };
	int32_t r = pg_send(c, &SQL_MEMORY_GET, vals, err);

	if (r == 0)
		r = pg_run(c, "read memory", err);
	if (r < 0)
		return r;
	if (PQntuples(pg_res(c, 0)) < 1)
		return not_found(x->id, err);
	pu_rows_read(x->call, 1);
	r = deliver(x->out, pg_res(c, 0), 0, err);
	return r > 0 ? 0 : r;
}

int32_t pg_memory_get(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *id, int64_t now_us, const memd_memory_sink *out,
		      memd_error *err)
{
	mem_ctx x = { .store = inst, .call = call, .scope = scope, .id = id, .now_us = now_us,
		      .out = out };
	int32_t r = pu_check_scope(scope, 0, err);

	if (r == 0)
		r = pu_check_id("memory id", id, err);
	if (r < 0)
		return r;
	if (!out || !out->memory)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory sink is missing");
	return pg_with_conn(inst, call, get_once, &x, err);
}

static int32_t list_once(pg_conn *c, void *ctx, memd_error *err)
{
	mem_ctx *x = ctx;
	const memd_memory_query *q = x->q;
	char now[PG_INT_BUF], lim[PG_INT_BUF], before[PG_INT_BUF];
	const char *vals[10] = { x->scope->app, x->scope->user, pg_i64(now, q->now_us), q->kind,
				 q->topic, q->entity, q->session, pg_i64(lim, q->limit),
				 pg_i64(before, q->before_created_us),
				 /* No id: every memory created at that instant is "after". */
				 q->before_id ? q->before_id : KEYSET_FIRST };
	PGresult *res;
	int32_t r = pg_send(c, q->before_created_us ? &SQL_MEMORY_LIST_BEFORE : &SQL_MEMORY_LIST,
			    vals, err);

	if (r == 0)
		r = pg_run(c, "list memories", err);
	if (r < 0)
		return r;
	res = pg_res(c, 0);
	pu_rows_read(x->call, (uint64_t)PQntuples(res));
	for (int i = 0; r == 0 && i < PQntuples(res); i++)
		r = deliver(x->out, res, i, err);
	return r > 0 ? 0 : r;
}

int32_t pg_memory_list(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_memory_query *q, const memd_memory_sink *out, memd_error *err)
{
	mem_ctx x = { .store = inst, .call = call, .scope = scope, .q = q, .out = out };
	int32_t r = pu_check_scope(scope, 0, err);

	if (r < 0)
		return r;
	if (!q || !PG_HAS(q, before_id) || !out || !out->memory)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory query or sink is missing");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory list limit must be > 0");
	if (q->before_created_us && q->before_id &&
	    (r = pu_check_id("before_id", q->before_id, err)) < 0)
		return r;
	return pg_with_conn(inst, call, list_once, &x, err);
}

static int32_t history_once(pg_conn *c, void *ctx, memd_error *err)
{
	mem_ctx *x = ctx;
	const char *vals[3] = { x->scope->app, x->scope->user, x->id };
	PGresult *res;
	int32_t r = pg_send(c, &SQL_MEMORY_HISTORY, vals, err);

	if (r == 0)
		r = pg_run(c, "read memory history", err);
	if (r < 0)
		return r;
	res = pg_res(c, 0);
	if (PQntuples(res) == 0)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "memory '%.64s' has no history",
				      x->id);
	pu_rows_read(x->call, (uint64_t)PQntuples(res));
	for (int i = 0; r == 0 && i < PQntuples(res); i++) {
		memd_memory m;
		memd_memory_change ch = { .struct_size = sizeof(ch), .memory = &m };

		ch.op = (uint32_t)pg_get_i64(res, i, 0);
		pg_memory_from_row(res, i, 1, &m);
		ch.actor = pg_get_text(res, i, HISTORY_ACTOR_COL);
		ch.reason = pg_get_text(res, i, HISTORY_ACTOR_COL + 1);
		ch.at_us = pg_get_i64(res, i, HISTORY_ACTOR_COL + 2);
		r = pg_sink_result(x->changes->change(x->changes->userdata, &ch), "memory change",
				   err);
		if (r == 0 && (i + 1) % PG_CHECK_EVERY == 0)
			r = pg_call_check(x->store, x->call, err);
	}
	return r > 0 ? 0 : r;
}

int32_t pg_memory_history(void *inst, const memd_call *call, const memd_scope *scope,
			  const char *id, const memd_memory_change_sink *out, memd_error *err)
{
	mem_ctx x = { .store = inst, .call = call, .scope = scope, .id = id, .changes = out };
	int32_t r = pu_check_scope(scope, 0, err);

	if (r == 0)
		r = pu_check_id("memory id", id, err);
	if (r < 0)
		return r;
	if (!out || !out->change)
		return memd_error_set(err, MEMD_EINVAL, 0, "memory change sink is missing");
	return pg_with_conn(inst, call, history_once, &x, err);
}

/* ---- expire ---------------------------------------------------------- */

int32_t pg_memory_expire(void *inst, const memd_call *call, int64_t now_us, uint32_t limit,
			 uint32_t *ret_count, memd_error *err)
{
	return pg_expire(inst, call, &SQL_MEMORY_EXPIRE, "expire memories", now_us, limit, ret_count,
			 err);
}
