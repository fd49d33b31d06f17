/* SPDX-License-Identifier: MIT */
#include "pg_sessions.h"

#include <string.h>

#include "pg_state.h"
#include "plugin_util.h"

#define EMPTY_OBJECT "{}"
#define KEYSET_FIRST "" /* sorts before every id */

#define NOTICE_FLAG "2" /* MEMD_SESSION_NOTICE in SQL */
/* The session flags a store keeps. */
#define SESSION_FLAGS_KEPT (MEMD_SESSION_ARCHIVED | MEMD_SESSION_NOTICE)
/* The patch fields that change what a session says (and so updated_us). */
#define PATCH_TOUCHES (MEMD_PATCH_TITLE | MEMD_PATCH_METADATA | MEMD_PATCH_ARCHIVED)
#define PATCH_KNOWN (PATCH_TOUCHES | MEMD_PATCH_CLEAR_NOTICE)

static const pg_sql SQL_BEGIN = { PG_ST_BEGIN, 0, "BEGIN" };
static const pg_sql SQL_COMMIT = { PG_ST_COMMIT, 0, "COMMIT" };

static const pg_sql SQL_SESSION_INSERT = { PG_ST_SESSION_INSERT, PG_SESSION_INSERT_N,
	"INSERT INTO sessions (" PG_SESSION_INSERT_COLS ")"
	" VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $7, $8, $9::jsonb, $10, $11, $12)" };
static const pg_sql SQL_SESSION_GET = { PG_ST_SESSION_GET, 3,
	"SELECT " PG_SESSION_COLS " FROM sessions WHERE app = $1 AND \"user\" = $2 AND id = $3" };
static const pg_sql SQL_SESSION_EXISTS = { PG_ST_SESSION_EXISTS, 3,
	"SELECT version, last_seq, summary_seq FROM sessions"
	" WHERE app = $1 AND \"user\" = $2 AND id = $3" };
static const pg_sql SQL_SESSION_LOCK = { PG_ST_SESSION_LOCK, 3,
	"SELECT version, last_seq, summary_seq FROM sessions"
	" WHERE app = $1 AND \"user\" = $2 AND id = $3 FOR NO KEY UPDATE" };
/* $3: include archived; $4: limit; $5: the origin platform, $6: the lane
 * key (NULL = any); $7: only sessions updated after it (0 = any); $8, $9:
 * the keyset bound. Each filter has a statement whose index it ranges
 * over: the lane's if a lane key is given, else the platform's, else
 * (app, user, created_us, id); the other filters are checked on the rows
 * of that range. The activity order ranges over (app, user, updated_us,
 * id), which its updated_after bound also narrows. */
#define LIST_FILTER(bound) \
	" WHERE app = $1 AND \"user\" = $2 AND ($3::boolean OR flags & 1 = 0)" bound \
	" AND ($5::text IS NULL OR origin_platform = $5) AND ($6::text IS NULL OR lane_key = $6)" \
	" AND updated_us > $7::bigint"
#define LIST_WHERE(bound) LIST_FILTER(bound) " ORDER BY created_us DESC, id DESC LIMIT $4"
#define LIST_BEFORE " AND (created_us, id) < ($8::bigint, $9::text)"
#define LIST_LANE " AND lane_key = $6"
#define LIST_PLATFORM " AND origin_platform = $5"
#define LIST_ACTIVITY(bound) LIST_FILTER(bound) " ORDER BY updated_us DESC, id DESC LIMIT $4"
#define LIST_ACTIVITY_BEFORE " AND (updated_us, id) < ($8::bigint, $9::text)"
static const pg_sql SQL_SESSION_LIST = { PG_ST_SESSION_LIST, 7,
	"SELECT " PG_SESSION_COLS " FROM sessions" LIST_WHERE("") };
static const pg_sql SQL_SESSION_LIST_BEFORE = { PG_ST_SESSION_LIST_BEFORE, 9,
	"SELECT " PG_SESSION_COLS " FROM sessions" LIST_WHERE(LIST_BEFORE) };
static const pg_sql SQL_SESSION_LIST_LANE = { PG_ST_SESSION_LIST_LANE, 7,
	"SELECT " PG_SESSION_COLS " FROM sessions" LIST_WHERE(LIST_LANE) };
static const pg_sql SQL_SESSION_LIST_LANE_BEFORE = { PG_ST_SESSION_LIST_LANE_BEFORE, 9,
	"SELECT " PG_SESSION_COLS " FROM sessions" LIST_WHERE(LIST_LANE LIST_BEFORE) };
static const pg_sql SQL_SESSION_LIST_PLATFORM = { PG_ST_SESSION_LIST_PLATFORM, 7,
	"SELECT " PG_SESSION_COLS " FROM sessions" LIST_WHERE(LIST_PLATFORM) };
static const pg_sql SQL_SESSION_LIST_PLATFORM_BEFORE = { PG_ST_SESSION_LIST_PLATFORM_BEFORE, 9,
	"SELECT " PG_SESSION_COLS " FROM sessions" LIST_WHERE(LIST_PLATFORM LIST_BEFORE) };
static const pg_sql SQL_SESSION_LIST_ACTIVITY = { PG_ST_SESSION_LIST_ACTIVITY, 7,
	"SELECT " PG_SESSION_COLS " FROM sessions" LIST_ACTIVITY("") };
static const pg_sql SQL_SESSION_LIST_ACTIVITY_BEFORE = { PG_ST_SESSION_LIST_ACTIVITY_BEFORE, 9,
	"SELECT " PG_SESSION_COLS " FROM sessions" LIST_ACTIVITY(LIST_ACTIVITY_BEFORE) };
/* Retention: ended sessions of every scope, oldest end first, over the
 * partial index of ended sessions. */
static const pg_sql SQL_SESSION_LIST_ENDED = { PG_ST_SESSION_LIST_ENDED, 2,
	"SELECT " PG_SESSION_COLS " FROM sessions WHERE ended_us > 0 AND ended_us < $1"
	" ORDER BY ended_us, app, \"user\", id LIMIT $2" };
/* Memory extraction: sessions of every scope with unread events, least
 * recently updated first, over the partial index of exactly those
 * (sessions_pending, whose predicate the WHERE repeats so the planner
 * picks it): $1 < updated_us < $2, strictly after the keyset tuple
 * ($3..$6), at most $7. */
static const pg_sql SQL_SESSION_LIST_PENDING = { PG_ST_SESSION_LIST_PENDING, 7,
	"SELECT " PG_SESSION_COLS " FROM sessions WHERE memory_seq < last_seq"
	" AND updated_us > $1::bigint AND updated_us < $2::bigint"
	" AND (updated_us, app, \"user\", id) > ($3::bigint, $4::text, $5::text, $6::text)"
	" ORDER BY updated_us, app, \"user\", id LIMIT $7" };
/* $11: clear the notice, which must be set (else no row changes); $12:
 * the patch changes what the session says, so updated_us moves. */
static const pg_sql SQL_SESSION_UPDATE = { PG_ST_SESSION_UPDATE, 12,
	"UPDATE sessions SET"
	" title = CASE WHEN $4::boolean THEN $5 ELSE title END,"
	" metadata = CASE WHEN $6::boolean THEN $7::jsonb ELSE metadata END,"
	" flags = CASE WHEN $8::boolean THEN (flags & ~1) | $9::integer ELSE flags END"
	"  & ~(CASE WHEN $11::boolean THEN " NOTICE_FLAG " ELSE 0 END),"
	" updated_us = CASE WHEN $12::boolean THEN $10 ELSE updated_us END"
	" WHERE app = $1 AND \"user\" = $2 AND id = $3"
	" AND (NOT $11::boolean OR flags & " NOTICE_FLAG " <> 0)"
	" RETURNING " PG_SESSION_COLS };
/* $8..$13: the usage of the append (PG_USAGE_N values, zeros for none);
 * $14: the messages it adds. $5 NULL: the summary_seq is the newest
 * visible summary's (after a transcript operation; the partial index of
 * visible summaries finds it in one step). */
static const pg_sql SQL_SESSION_APPENDED = { PG_ST_SESSION_APPENDED, 14,
	"UPDATE sessions SET version = version + 1, last_seq = $4,"
	" summary_seq = coalesce($5::bigint, (SELECT max(seq) FROM events"
	"  WHERE app = $1 AND \"user\" = $2 AND session = $3 AND role = 'summary'"
	"  AND hidden_us = 0), 0),"
	" message_count = message_count + $14::bigint,"
	" updated_us = $6, title = coalesce(title, $7),"
	" input_tokens = input_tokens + $8, output_tokens = output_tokens + $9,"
	" cache_read_tokens = cache_read_tokens + $10,"
	" cache_write_tokens = cache_write_tokens + $11, cost_micro_usd = cost_micro_usd + $12,"
	" last_prompt_tokens = CASE WHEN $13::bigint > 0 THEN $13 ELSE last_prompt_tokens END"
	" WHERE app = $1 AND \"user\" = $2 AND id = $3" };
/* The lane whose current session this is (lanes_by_session), locked
 * before the session row: every writer takes a lane's lock before its
 * sessions' (lane_write does), so the two do not deadlock. */
static const pg_sql SQL_SESSION_LANE_LOCK = { PG_ST_SESSION_LANE_LOCK, 3,
	"SELECT 1 FROM lanes WHERE app = $1 AND \"user\" = $2 AND session = $3 FOR UPDATE" };
/* Usage of an append added to that lane. */
static const pg_sql SQL_SESSION_LANE_USAGE = { PG_ST_SESSION_LANE_USAGE, 9,
	"UPDATE lanes SET"
	" input_tokens = input_tokens + $4, output_tokens = output_tokens + $5,"
	" cache_read_tokens = cache_read_tokens + $6,"
	" cache_write_tokens = cache_write_tokens + $7, cost_micro_usd = cost_micro_usd + $8,"
	" last_prompt_tokens = CASE WHEN $9::bigint > 0 THEN $9 ELSE last_prompt_tokens END"
	" WHERE app = $1 AND \"user\" = $2 AND session = $3" };
/* Delete the session (events, state, artifacts, checkpoints with their
 * writes and its checkpoint head cascade) and the tasks linked to it
 * (user and context id), and, only if it existed, add its DELETE record
 * at the next feed position (taking the feed counter's row lock last, as
 * every writer does). */
static const pg_sql SQL_SESSION_DELETE = { PG_ST_SESSION_DELETE, 3,
	"WITH d AS (DELETE FROM sessions WHERE app = $1 AND \"user\" = $2 AND id = $3"
	"           RETURNING 1),"
	" t AS (DELETE FROM tasks WHERE app = $1 AND \"user\" = $2 AND context_id = $3"
	"       AND EXISTS (SELECT 1 FROM d)),"
	" c AS (UPDATE feed_counter SET last = last + 1"
	"       WHERE id = 1 AND EXISTS (SELECT 1 FROM d) RETURNING last)"
	" INSERT INTO feed_deletes (position, kind, app, \"user\", session)"
	" SELECT last, 2, $1, $2, $3 FROM c RETURNING position" };
/* A user's lanes go first (their inboxes cascade); they are not in the
 * feed. */
static const pg_sql SQL_USER_LANES_DELETE = { PG_ST_USER_LANES_DELETE, 2,
	"DELETE FROM lanes WHERE app = $1 AND \"user\" = $2" };
/* Sessions (with what cascades: their checkpoints too), user: state,
 * memories, their history and their MEMORY_DELETE records, and the
 * user's tasks; the one DELETE_USER record covers them all, and is added
 * only if there was something to delete. */
static const pg_sql SQL_USER_DELETE = { PG_ST_USER_SESSIONS_DELETE, 2,
	"WITH d AS (DELETE FROM sessions WHERE app = $1 AND \"user\" = $2 RETURNING 1),"
	" a AS (DELETE FROM tasks WHERE app = $1 AND \"user\" = $2),"
	" k AS (DELETE FROM state_user WHERE app = $1 AND \"user\" = $2 RETURNING 1),"
	" m AS (DELETE FROM memories WHERE app = $1 AND \"user\" = $2 RETURNING 1),"
	" h AS (DELETE FROM memory_history WHERE app = $1 AND \"user\" = $2 RETURNING 1),"
	" t AS (DELETE FROM feed_memory_deletes WHERE app = $1 AND \"user\" = $2),"
	" c AS (UPDATE feed_counter SET last = last + 1"
	"       WHERE id = 1 AND (EXISTS (SELECT 1 FROM d) OR EXISTS (SELECT 1 FROM k)"
	"       OR EXISTS (SELECT 1 FROM m) OR EXISTS (SELECT 1 FROM h))"
	"       RETURNING last)"
	" INSERT INTO feed_deletes (position, kind, app, \"user\", session)"
	" SELECT last, 3, $1, $2, NULL FROM c RETURNING position" };

void pg_session_from_row(const PGresult *res, int row, memd_session *s)
{
	memset(s, 0, sizeof(*s));
	s->struct_size = sizeof(*s);
	s->app = pg_get_text(res, row, 0);
	s->user = pg_get_text(res, row, 1);
	s->id = pg_get_text(res, row, 2);
	s->title = pg_get_text(res, row, 3);
	s->metadata_json = pg_get_text(res, row, 4);
	s->flags = (uint32_t)pg_get_i64(res, row, 5) & SESSION_FLAGS_KEPT;
	s->created_us = pg_get_i64(res, row, 6);
	s->updated_us = pg_get_i64(res, row, 7);
	s->version = pg_get_i64(res, row, 8);
	s->last_seq = pg_get_i64(res, row, 9);
	s->summary_seq = pg_get_i64(res, row, 10);
	s->lane_key = pg_get_text(res, row, 11);
	s->origin_json = pg_get_text(res, row, 12);
	s->origin_platform = pg_get_text(res, row, 13);
	s->previous_session = pg_get_text(res, row, 14);
	s->start_reason = pg_get_text(res, row, 15);
	s->end_reason = pg_get_text(res, row, 16);
	s->ended_us = pg_get_i64(res, row, 17);
	s->input_tokens = pg_get_i64(res, row, 18);
	s->output_tokens = pg_get_i64(res, row, 19);
	s->cache_read_tokens = pg_get_i64(res, row, 20);
	s->cache_write_tokens = pg_get_i64(res, row, 21);
	s->cost_micro_usd = pg_get_i64(res, row, 22);
	s->last_prompt_tokens = pg_get_i64(res, row, 23);
	s->message_count = pg_get_i64(res, row, 24);
	s->memory_seq = pg_get_i64(res, row, 25);
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
	pg_session_from_row(res, 0, &s);
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
				 int64_t now_us, const char *title_if_unset, const memd_usage *usage,
				 int64_t n_messages, int find_summary, memd_error *err)
{
	char b1[PG_INT_BUF], b2[PG_INT_BUF], b3[PG_INT_BUF], b4[PG_INT_BUF],
		ub[PG_USAGE_N][PG_INT_BUF];
	const char *vals[8 + PG_USAGE_N] = { scope->app, scope->user, scope->session,
					     pg_i64(b1, h->last_seq),
					     find_summary ? NULL : pg_i64(b2, h->summary_seq),
					     pg_i64(b3, now_us), title_if_unset };
	int32_t r;

	pg_usage_vals(usage, ub, vals + 7);
	vals[7 + PG_USAGE_N] = pg_i64(b4, n_messages);
	r = pg_send(c, &SQL_SESSION_APPENDED, vals, err);
	if (r == 0 && usage) {
		const char *lv[3 + PG_USAGE_N] = { scope->app, scope->user, scope->session };
		pg_usage_vals(usage, ub, lv + 3);
		r = pg_send(c, &SQL_SESSION_LANE_USAGE, lv, err);
	}
	return r;
}

int32_t pg_session_send_lane_lock(pg_conn *c, const memd_scope *scope, memd_error *err)
{
	const char *vals[3] = { scope->app, scope->user, scope->session };
	return pg_send(c, &SQL_SESSION_LANE_LOCK, vals, err);
}

/* ---- create --------------------------------------------------------- */

int32_t pg_session_check_new(const memd_session *s, memd_error *err)
{
	memd_scope scope = { .struct_size = sizeof(scope), .app = s->app, .user = s->user,
			     .session = s->id };
	int32_t r = pu_check_scope(&scope, 1, err);

	if (r == 0 && s->metadata_json)
		r = pg_check_json_object("session metadata", s->metadata_json, err);
	if (r < 0 || !PG_HAS(s, start_reason))
		return r;
	if (s->lane_key)
		r = pu_check_id("session lane_key", s->lane_key, err);
	if (r == 0 && s->previous_session)
		r = pu_check_id("session previous_session", s->previous_session, err);
	if (r == 0 && s->origin_json)
		r = pg_check_json_object("session origin", s->origin_json, err);
	return r;
}

void pg_session_insert_vals(const memd_session *s, char bufs[2][PG_INT_BUF], const char **vals)
{
	int v12 = PG_HAS(s, start_reason);

	vals[0] = s->app;
	vals[1] = s->user;
	vals[2] = s->id;
	vals[3] = s->title;
	vals[4] = s->metadata_json ? s->metadata_json : EMPTY_OBJECT;
	vals[5] = pg_i64(bufs[0], s->flags & SESSION_FLAGS_KEPT);
	vals[6] = pg_i64(bufs[1], s->created_us);
	vals[7] = v12 ? s->lane_key : NULL;
	vals[8] = v12 ? s->origin_json : NULL;
	vals[9] = v12 ? s->origin_platform : NULL;
	vals[10] = v12 ? s->previous_session : NULL;
	vals[11] = v12 ? s->start_reason : NULL;
}

static int32_t send_insert(pg_conn *c, const memd_session *s, memd_error *err)
{
	char bufs[2][PG_INT_BUF];
	const char *vals[PG_SESSION_INSERT_N];

	pg_session_insert_vals(s, bufs, vals);
	return pg_send(c, &SQL_SESSION_INSERT, vals, err);
}

typedef struct create_ctx {
	const memd_session *s;
	pg_state_list *writes;
	const memd_scope *scope;
	const memd_session_sink *out;
} create_ctx;

static int32_t create_once(pg_conn *c, void *ctx, memd_error *err)
{
	create_ctx *x = ctx;
	const memd_session *s = x->s;
	const char *get[3] = { s->app, s->user, s->id };
	size_t get_at;
	int32_t r;

	r = pg_send(c, &SQL_BEGIN, NULL, err);
	if (r == 0)
		r = send_insert(c, s, err);
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
	x = (create_ctx){ 0 };
	x.s = s;
	x.scope = &scope;
	x.out = out;
	x.writes = &writes;
	r = pg_session_check_new(s, err);
	if (r == 0) {
		/* The initial state is the history's version 0. */
		pg_state_hist h = { .at_us = s->created_us };
		r = pg_state_collect(state_delta_json, &scope, 0, &h, &writes, err);
	}
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
	int64_t ended_before_us;  /* session_list_ended */
	uint32_t limit;
	const memd_pending_query *pq; /* session_list_pending */
} read_ctx;

/* The session lists' one round trip: run sql with vals on c (what names
 * it in a failure's message), count its rows in x->call and deliver each
 * (pg_session_from_row's columns) to x->out until the sink asks to stop.
 * Returns 0, or the failure of the statement or the sink. */
static int32_t list_run(pg_conn *c, const read_ctx *x, const pg_sql *sql,
			const char *const *vals, const char *what, memd_error *err)
{
	PGresult *res;
	int32_t r = pg_send(c, sql, vals, err);

	if (r == 0)
		r = pg_run(c, what, err);
	if (r < 0)
		return r;
	res = pg_res(c, 0);
	pu_rows_read(x->call, (uint64_t)PQntuples(res));
	for (int i = 0; r == 0 && i < PQntuples(res); i++) {
		memd_session s;
		pg_session_from_row(res, i, &s);
		r = deliver(x->out, &s, err);
	}
	return r > 0 ? 0 : r;
}

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
	const char *platform = PG_HAS(q, origin_platform) ? q->origin_platform : NULL;
	const char *lane = PG_HAS(q, lane_key) ? q->lane_key : NULL;
	char lim[PG_INT_BUF], before[PG_INT_BUF];
	int64_t after = PG_HAS(q, updated_after_us) ? q->updated_after_us : 0;
	char aft[PG_INT_BUF];
	const char *vals[9] = { x->scope->app, x->scope->user,
				(q->flags & MEMD_SQ_INCLUDE_ARCHIVED) ? "t" : "f",
				pg_i64(lim, q->limit), platform, lane,
				pg_i64(aft, after > 0 ? after : INT64_MIN),
				pg_i64(before, q->before_created_us),
				/* No id: every session created at that instant is "after". */
				q->before_id ? q->before_id : "" };
	const pg_sql *sql = (q->flags & MEMD_SQ_BY_ACTIVITY) ?
				    (q->before_created_us ? &SQL_SESSION_LIST_ACTIVITY_BEFORE :
							    &SQL_SESSION_LIST_ACTIVITY) :
			    lane ? (q->before_created_us ? &SQL_SESSION_LIST_LANE_BEFORE :
						      &SQL_SESSION_LIST_LANE) :
			    platform ? (q->before_created_us ? &SQL_SESSION_LIST_PLATFORM_BEFORE :
							       &SQL_SESSION_LIST_PLATFORM) :
			    q->before_created_us ? &SQL_SESSION_LIST_BEFORE : &SQL_SESSION_LIST;

	return list_run(c, x, sql, vals, "list sessions", err);
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
	if (PG_HAS(q, origin_platform) && q->origin_platform &&
	    (r = pu_check_id("origin_platform", q->origin_platform, err)) < 0)
		return r;
	if (PG_HAS(q, lane_key) && q->lane_key && (r = pu_check_id("lane_key", q->lane_key, err)) < 0)
		return r;
	return pg_with_conn(inst, call, list_once, &x, err);
}

static int32_t ended_once(pg_conn *c, void *ctx, memd_error *err)
{
	read_ctx *x = ctx;
	char before[PG_INT_BUF], lim[PG_INT_BUF];
	const char *vals[2] = { pg_i64(before, x->ended_before_us), pg_i64(lim, x->limit) };

	return list_run(c, x, &SQL_SESSION_LIST_ENDED, vals, "list ended sessions", err);
}

int32_t pg_session_list_ended(void *inst, const memd_call *call, int64_t ended_before_us,
			      uint32_t limit, const memd_session_sink *out, memd_error *err)
{
	read_ctx x = { .call = call, .out = out, .ended_before_us = ended_before_us,
		       .limit = limit };

	if (!out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "session sink is missing");
	if (limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "ended session list limit must be > 0");
	return pg_with_conn(inst, call, ended_once, &x, err);
}

static int32_t pending_once(pg_conn *c, void *ctx, memd_error *err)
{
	read_ctx *x = ctx;
	const memd_pending_query *q = x->pq;
	char lo[PG_INT_BUF], hi[PG_INT_BUF], at[PG_INT_BUF], lim[PG_INT_BUF];
	int keyset = q->after_updated_us != 0;
	/* No keyset: (INT64_MIN, "", "", "") is before every session (ids
	 * are never empty). */
	const char *vals[7] = { pg_i64(lo, q->updated_after_us ? q->updated_after_us : INT64_MIN),
				pg_i64(hi, q->updated_before_us),
				pg_i64(at, keyset ? q->after_updated_us : INT64_MIN),
				keyset && q->after_app ? q->after_app : KEYSET_FIRST,
				keyset && q->after_user ? q->after_user : KEYSET_FIRST,
				keyset && q->after_id ? q->after_id : KEYSET_FIRST,
				pg_i64(lim, q->limit) };

	return list_run(c, x, &SQL_SESSION_LIST_PENDING, vals,
			"list sessions pending memory extraction", err);
}

int32_t pg_session_list_pending(void *inst, const memd_call *call, const memd_pending_query *q,
				const memd_session_sink *out, memd_error *err)
{
	read_ctx x = { .call = call, .out = out, .pq = q };
	int32_t r = 0;

	if (!q || !PG_HAS(q, after_id) || !out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "pending query or session sink is missing");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "pending session list limit must be > 0");
	if (q->updated_before_us <= 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "pending session list needs updated_before_us > 0");
	if (q->updated_after_us < 0 || q->after_updated_us < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "pending session list bounds must not be negative");
	if (q->after_app && (r = pu_check_id("after_app", q->after_app, err)) < 0)
		return r;
	if (q->after_user && (r = pu_check_id("after_user", q->after_user, err)) < 0)
		return r;
	if (q->after_id && (r = pu_check_id("after_id", q->after_id, err)) < 0)
		return r;
	return pg_with_conn(inst, call, pending_once, &x, err);
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
	int clear_notice = (p->fields & MEMD_PATCH_CLEAR_NOTICE) != 0;
	char now[PG_INT_BUF];
	const char *vals[12] = {
		x->scope->app, x->scope->user, x->scope->session,
		(p->fields & MEMD_PATCH_TITLE) ? "t" : "f", p->title,
		(p->fields & MEMD_PATCH_METADATA) ? "t" : "f",
		p->metadata_json ? p->metadata_json : EMPTY_OBJECT,
		(p->fields & MEMD_PATCH_ARCHIVED) ? "t" : "f",
		p->archived ? "1" : "0",
		pg_i64(now, p->now_us),
		clear_notice ? "t" : "f",
		/* A patch of nothing still moves updated_us, as it always did. */
		(p->fields & PATCH_TOUCHES) || !clear_notice ? "t" : "f",
	};
	const char *get[3] = { x->scope->app, x->scope->user, x->scope->session };
	int32_t r = pg_send(c, &SQL_SESSION_UPDATE, vals, err);

	/* When the notice was not set the update changes no row: the read
	 * after it (same round) tells a missing session from a conflict. */
	if (r == 0 && clear_notice)
		r = pg_send(c, &SQL_SESSION_GET, get, err);
	if (r == 0)
		r = pg_run(c, "update session", err);
	if (r < 0)
		return r;
	if (clear_notice && PQntuples(pg_res(c, 0)) == 0 && PQntuples(pg_res(c, 1)) > 0)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "session '%.64s' has no notice to clear", x->scope->session);
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
	if (p->fields & ~PATCH_KNOWN)
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

	if (r == 0 && x->user)
		r = pg_send(c, &SQL_USER_LANES_DELETE, vals, err);
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
