/* SPDX-License-Identifier: MIT */
#include "pg_sessions.h"

#include <string.h>

#include "pg_state.h"
#include "plugin_util.h"

#define EMPTY_OBJECT "{}"

/* Every query that delivers a session selects these columns, in order. */
#define SESSION_COLS \
	"app, \"user\", id, title, metadata::text, flags, created_us, updated_us, version," \
	" last_seq, summary_seq"

static const pg_sql SQL_BEGIN = { PG_ST_BEGIN, 0, "BEGIN" };
static const pg_sql SQL_COMMIT = { PG_ST_COMMIT, 0, "COMMIT" };

static const pg_sql SQL_SESSION_INSERT = { PG_ST_SESSION_INSERT, 7,
	"INSERT INTO sessions (app, \"user\", id, title, metadata, flags, created_us, updated_us)"
	" VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $7)" };
static const pg_sql SQL_SESSION_GET = { PG_ST_SESSION_GET, 3,
	"SELECT " SESSION_COLS " FROM sessions WHERE app = $1 AND \"user\" = $2 AND id = $3" };
static const pg_sql SQL_SESSION_EXISTS = { PG_ST_SESSION_EXISTS, 3,
	"SELECT version, last_seq, summary_seq FROM sessions"
	" WHERE app = $1 AND \"user\" = $2 AND id = $3" };
static const pg_sql SQL_SESSION_LOCK = { PG_ST_SESSION_LOCK, 3,
	"SELECT version, last_seq, summary_seq FROM sessions"
	" WHERE app = $1 AND \"user\" = $2 AND id = $3 FOR NO KEY UPDATE" };
/* $3: include archived; $4: limit. */
static const pg_sql SQL_SESSION_LIST = { PG_ST_SESSION_LIST, 4,
	"SELECT " SESSION_COLS " FROM sessions"
	" WHERE app = $1 AND \"user\" = $2 AND ($3::boolean OR flags & 1 = 0)"
	" ORDER BY created_us DESC, id DESC LIMIT $4" };
static const pg_sql SQL_SESSION_LIST_BEFORE = { PG_ST_SESSION_LIST_BEFORE, 6,
	"SELECT " SESSION_COLS " FROM sessions"
	" WHERE app = $1 AND \"user\" = $2 AND ($3::boolean OR flags & 1 = 0)"
	" AND (created_us, id) < ($5::bigint, $6::text)"
	" ORDER BY created_us DESC, id DESC LIMIT $4" };
static const pg_sql SQL_SESSION_UPDATE = { PG_ST_SESSION_UPDATE, 10,
	"UPDATE sessions SET"
	" title = CASE WHEN $4::boolean THEN $5 ELSE title END,"
	" metadata = CASE WHEN $6::boolean THEN $7::jsonb ELSE metadata END,"
	" flags = CASE WHEN $8::boolean THEN (flags & ~1) | $9::integer ELSE flags END,"
	" updated_us = $10"
	" WHERE app = $1 AND \"user\" = $2 AND id = $3"
	" RETURNING " SESSION_COLS };
static const pg_sql SQL_SESSION_APPENDED = { PG_ST_SESSION_APPENDED, 7,
	"UPDATE sessions SET version = version + 1, last_seq = $4, summary_seq = $5,"
	" updated_us = $6, title = coalesce(title, $7)"
	" WHERE app = $1 AND \"user\" = $2 AND id = $3" };
/* Delete the session (events, state and artifacts cascade) and, only if
 * it existed, add its DELETE record at the next feed position (taking the
 * feed counter's row lock last, as every writer does). */
static const pg_sql SQL_SESSION_DELETE = { PG_ST_SESSION_DELETE, 3,
	"WITH d AS (DELETE FROM sessions WHERE app = $1 AND \"user\" = $2 AND id = $3"
	"           RETURNING 1),"
	" c AS (UPDATE feed_counter SET last = last + 1"
	"       WHERE id = 1 AND EXISTS (SELECT 1 FROM d) RETURNING last)"
	" INSERT INTO feed_deletes (position, kind, app, \"user\", session)"
	" SELECT last, 2, $1, $2, $3 FROM c RETURNING position" };
static const pg_sql SQL_USER_DELETE = { PG_ST_USER_SESSIONS_DELETE, 2,
	"WITH d AS (DELETE FROM sessions WHERE app = $1 AND \"user\" = $2 RETURNING 1),"
	" k AS (DELETE FROM state_user WHERE app = $1 AND \"user\" = $2 RETURNING 1),"
	" c AS (UPDATE feed_counter SET last = last + 1"
	"       WHERE id = 1 AND (EXISTS (SELECT 1 FROM d) OR EXISTS (SELECT 1 FROM k))"
	"       RETURNING last)"
	" INSERT INTO feed_deletes (position, kind, app, \"user\", session)"
	" SELECT last, 3, $1, $2, NULL FROM c RETURNING position" };

static void session_from_row(const PGresult *res, int row, memd_session *s)
{
	memset(s, 0, sizeof(*s));
	s->struct_size = sizeof(*s);
	s->app = pg_get_text(res, row, 0);
	s->user = pg_get_text(res, row, 1);
	s->id = pg_get_text(res, row, 2);
	s->title = pg_get_text(res, row, 3);
	s->metadata_json = pg_get_text(res, row, 4);
	s->flags = (uint32_t)pg_get_i64(res, row, 5) & MEMD_SESSION_ARCHIVED;
	s->created_us = pg_get_i64(res, row, 6);
	s->updated_us = pg_get_i64(res, row, 7);
	s->version = pg_get_i64(res, row, 8);
	s->last_seq = pg_get_i64(res, row, 9);
	s->summary_seq = pg_get_i64(res, row, 10);
}

static int32_t deliver(const memd_session_sink *out, const memd_session *s, memd_error *err)
{
	return pg_sink_result(out->session(out->userdata, s), "session", err);
}

/* Deliver row 0 of res, or MEMD_ENOTFOUND. */
static int32_t deliver_one(const PGresult *res, const memd_call *call, const memd_scope *scope,
			   const memd_session_sink *out, memd_error *err)
{
	memd_session s;
	int32_t r;

	if (PQntuples(res) < 1)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				      scope->session);
	pu_rows_read(call, 1);
	session_from_row(res, 0, &s);
	r = deliver(out, &s, err);
	return r > 0 ? 0 : r;
}

int32_t pg_session_send_exists(pg_conn *c, const memd_scope *scope, memd_error *err)
{
	const char *vals[3] = { scope->app, scope->user, scope->session };
	return pg_send(c, &SQL_SESSION_EXISTS, vals, err);
}

int32_t pg_session_send_lock(pg_conn *c, const memd_scope *scope, memd_error *err)
{
	const char *vals[3] = { scope->app, scope->user, scope->session };
	return pg_send(c, &SQL_SESSION_LOCK, vals, err);
}

int32_t pg_session_head_result(const PGresult *res, const memd_call *call,
			       const memd_scope *scope, pg_session_head *ret, memd_error *err)
{
	if (!res || PQntuples(res) < 1)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				      scope->session);
	pu_rows_read(call, 1);
	if (ret) {
		ret->version = pg_get_i64(res, 0, 0);
		ret->last_seq = pg_get_i64(res, 0, 1);
		ret->summary_seq = pg_get_i64(res, 0, 2);
	}
	return 0;
}

int32_t pg_session_send_appended(pg_conn *c, const memd_scope *scope, const pg_session_head *h,
				 int64_t now_us, const char *title_if_unset, memd_error *err)
{
	char b1[PG_INT_BUF], b2[PG_INT_BUF], b3[PG_INT_BUF];
	const char *vals[7] = { scope->app, scope->user, scope->session,
				pg_i64(b1, h->last_seq), pg_i64(b2, h->summary_seq),
				pg_i64(b3, now_us), title_if_unset };
	return pg_send(c, &SQL_SESSION_APPENDED, vals, err);
}

/* ---- create --------------------------------------------------------- */

typedef struct create_ctx {
	const memd_session *s;
	const char *metadata;
	pg_state_list *writes;
	const memd_scope *scope;
	const memd_session_sink *out;
} create_ctx;

static int32_t create_once(pg_conn *c, void *ctx, memd_error *err)
{
	create_ctx *x = ctx;
	const memd_session *s = x->s;
	char fl[PG_INT_BUF], cr[PG_INT_BUF];
	const char *vals[7] = { s->app, s->user, s->id, s->title, x->metadata,
				pg_i64(fl, s->flags & MEMD_SESSION_ARCHIVED),
				pg_i64(cr, s->created_us) };
	const char *get[3] = { s->app, s->user, s->id };
	size_t get_at;
	int32_t r;

	r = pg_send(c, &SQL_BEGIN, NULL, err);
	if (r == 0)
		r = pg_send(c, &SQL_SESSION_INSERT, vals, err);
	if (r == 0)
		r = pg_state_send(c, x->writes, err);
	get_at = pg_n_queued(c);
	if (r == 0)
		r = pg_send(c, &SQL_SESSION_GET, get, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "create session", err);
	if (r == MEMD_ECONFLICT)
		return memd_error_set(err, MEMD_ECONFLICT, 0, "session '%.64s' already exists",
				      s->id);
	if (r < 0)
		return r;
	return deliver_one(pg_res(c, get_at), NULL, x->scope, x->out, err);
}

int32_t pg_session_create(void *inst, const memd_call *call, const memd_session *s,
			  const char *state_delta_json, const memd_session_sink *out,
			  memd_error *err)
{
	pg_state_list writes = { 0 };
	memd_scope scope;
	create_ctx x;
	int32_t r;

	if (!s || !out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "session or its sink is missing");
	scope = (memd_scope){ .struct_size = sizeof(scope), .app = s->app, .user = s->user,
			      .session = s->id };
	r = pu_check_scope(&scope, 1, err);
	if (r < 0)
		return r;
	x = (create_ctx){ 0 };
	x.s = s;
	x.scope = &scope;
	x.out = out;
	x.writes = &writes;
	x.metadata = s->metadata_json ? s->metadata_json : EMPTY_OBJECT;
	r = pg_check_json_object("session metadata", x.metadata, err);
	if (r == 0)
		r = pg_state_collect(state_delta_json, &scope, 0, &writes, err);
	if (r == 0)
		r = pg_with_conn(inst, call, create_once, &x, err);
	pg_state_list_clear(&writes);
	return r;
}

/* ---- get, list ------------------------------------------------------ */

typedef struct read_ctx {
	const memd_call *call;
	const memd_scope *scope;
	const memd_session_query *q;
	const memd_session_sink *out;
} read_ctx;

static int32_t get_once(pg_conn *c, void *ctx, memd_error *err)
{
	read_ctx *x = ctx;
	const char *vals[3] = { x->scope->app, x->scope->user, x->scope->session };
	int32_t r = pg_send(c, &SQL_SESSION_GET, vals, err);

	if (r == 0)
		r = pg_run(c, "read session", err);
	if (r < 0)
		return r;
	return deliver_one(pg_res(c, 0), x->call, x->scope, x->out, err);
}

int32_t pg_session_get(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_session_sink *out, memd_error *err)
{
	read_ctx x = { .call = call, .scope = scope, .out = out };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "session sink is missing");
	return pg_with_conn(inst, call, get_once, &x, err);
}

static int32_t list_once(pg_conn *c, void *ctx, memd_error *err)
{
	read_ctx *x = ctx;
	const memd_session_query *q = x->q;
	char lim[PG_INT_BUF], before[PG_INT_BUF];
	const char *vals[6] = { x->scope->app, x->scope->user,
				(q->flags & MEMD_SQ_INCLUDE_ARCHIVED) ? "t" : "f",
				pg_i64(lim, q->limit), pg_i64(before, q->before_created_us),
				/* No id: every session created at that instant is "after". */
				q->before_id ? q->before_id : "" };
	PGresult *res;
	int32_t r = pg_send(c, q->before_created_us ? &SQL_SESSION_LIST_BEFORE : &SQL_SESSION_LIST,
			    vals, err);

	if (r == 0)
		r = pg_run(c, "list sessions", err);
	if (r < 0)
		return r;
	res = pg_res(c, 0);
	pu_rows_read(x->call, (uint64_t)PQntuples(res));
	for (int i = 0; r == 0 && i < PQntuples(res); i++) {
		memd_session s;
		session_from_row(res, i, &s);
		r = deliver(x->out, &s, err);
	}
	return r > 0 ? 0 : r;
}

int32_t pg_session_list(void *inst, const memd_call *call, const memd_scope *scope,
			const memd_session_query *q, const memd_session_sink *out,
			memd_error *err)
{
	read_ctx x = { .call = call, .scope = scope, .q = q, .out = out };
	int32_t r = pu_check_scope(scope, 0, err);

	if (r < 0)
		return r;
	if (!q || !out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "session query or sink is missing");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "session list limit must be > 0");
	if (q->before_created_us && q->before_id &&
	    (r = pu_check_id("before_id", q->before_id, err)) < 0)
		return r;
	return pg_with_conn(inst, call, list_once, &x, err);
}

/* ---- update --------------------------------------------------------- */

typedef struct update_ctx {
	const memd_scope *scope;
	const memd_session_update *p;
	const memd_session_sink *out;
} update_ctx;

static int32_t update_once(pg_conn *c, void *ctx, memd_error *err)
{
	update_ctx *x = ctx;
	const memd_session_update *p = x->p;
	char now[PG_INT_BUF];
	const char *vals[10] = {
		x->scope->app, x->scope->user, x->scope->session,
		(p->fields & MEMD_PATCH_TITLE) ? "t" : "f", p->title,
		(p->fields & MEMD_PATCH_METADATA) ? "t" : "f",
		p->metadata_json ? p->metadata_json : EMPTY_OBJECT,
		(p->fields & MEMD_PATCH_ARCHIVED) ? "t" : "f",
		p->archived ? "1" : "0",
		pg_i64(now, p->now_us),
	};
	int32_t r = pg_send(c, &SQL_SESSION_UPDATE, vals, err);

	if (r == 0)
		r = pg_run(c, "update session", err);
	if (r < 0)
		return r;
	return deliver_one(pg_res(c, 0), NULL, x->scope, x->out, err);
}

int32_t pg_session_update(void *inst, const memd_call *call, const memd_scope *scope,
			  const memd_session_update *p, const memd_session_sink *out,
			  memd_error *err)
{
	update_ctx x = { .scope = scope, .p = p, .out = out };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!p || !out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "session patch or sink is missing");
	if (p->fields & ~(MEMD_PATCH_TITLE | MEMD_PATCH_METADATA | MEMD_PATCH_ARCHIVED))
		return memd_error_set(err, MEMD_EINVAL, 0, "session patch has unknown fields 0x%x",
				      (unsigned)p->fields);
	if ((p->fields & MEMD_PATCH_METADATA) && p->metadata_json) {
		r = pg_check_json_object("session metadata", p->metadata_json, err);
		if (r < 0)
			return r;
	}
	if ((p->fields & MEMD_PATCH_ARCHIVED) && p->archived > 1)
		return memd_error_set(err, MEMD_EINVAL, 0, "archived must be 0 or 1");
	return pg_with_conn(inst, call, update_once, &x, err);
}

/* ---- delete --------------------------------------------------------- */

typedef struct delete_ctx {
	const memd_scope *scope;
	int user;
} delete_ctx;

static int32_t delete_once(pg_conn *c, void *ctx, memd_error *err)
{
	delete_ctx *x = ctx;
	const char *vals[3] = { x->scope->app, x->scope->user, x->scope->session };
	int32_t r = pg_send(c, &SQL_BEGIN, NULL, err);

	if (r == 0)
		r = pg_send(c, x->user ? &SQL_USER_DELETE : &SQL_SESSION_DELETE, vals, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, x->user ? "delete user" : "delete session", err);
	if (r == 0 && !x->user && PQntuples(pg_res(c, 1)) == 0)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				   x->scope->session);
	return r;
}

int32_t pg_session_delete(void *inst, const memd_call *call, const memd_scope *scope,
			  memd_error *err)
{
	delete_ctx x = { .scope = scope, .user = 0 };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	return pg_with_conn(inst, call, delete_once, &x, err);
}

int32_t pg_user_delete(void *inst, const memd_call *call, const memd_scope *scope,
		       memd_error *err)
{
	memd_scope user;
	delete_ctx x = { .scope = &user, .user = 1 };
	int32_t r = pu_check_scope(scope, 0, err);

	if (r < 0)
		return r;
	user = (memd_scope){ .struct_size = sizeof(user), .app = scope->app, .user = scope->user };
	return pg_with_conn(inst, call, delete_once, &x, err);
}
