/* SPDX-License-Identifier: MIT */
#include "pg_lanes.h"

#include <string.h>

#include "pg_sessions.h"
#include "plugin_util.h"

/* The lane flags a store keeps (every MEMD_LANE_* of 1.2). */
#define LANE_FLAGS_KNOWN \
	(MEMD_LANE_SUSPENDED | MEMD_LANE_RESUME_PENDING | MEMD_LANE_FINALIZED | \
	 MEMD_LANE_FRESH_RESET | MEMD_LANE_RESET_HAD_ACTIVITY)
#define SUSPENDED_FLAG "1" /* MEMD_LANE_SUSPENDED in SQL */
#define FINALIZE_KIND "4"  /* MEMD_FEED_FINALIZE in SQL */
#define LQ_TURN_SOME "1"   /* MEMD_LQ_TURN_SOME in SQL */
#define KEYSET_FIRST ""    /* sorts before every id: (t, "") bounds below t */

static const pg_sql SQL_BEGIN = { PG_ST_BEGIN, 0, "BEGIN" };
static const pg_sql SQL_BEGIN_READ = { PG_ST_BEGIN_READ, 0,
	"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" };
static const pg_sql SQL_COMMIT = { PG_ST_COMMIT, 0, "COMMIT" };

/* The columns every query that delivers a lane selects, in the order
 * lane_from_row reads them. */
#define LANE_COLS \
	"app, \"user\", key, flags, session, origin::text, created_us, updated_us, version," \
	" resume_reason, resume_marked_us, reset_reason, previous_session, reset_us, turn_id," \
	" turn_started_us, turn_lease_until_us, interruptions, finalize_failures," \
	" finalize_claim_until_us, input_tokens, output_tokens, cache_read_tokens," \
	" cache_write_tokens, cost_micro_usd, last_prompt_tokens, inbox_depth"
#define LANE_PK " app = $1 AND \"user\" = $2 AND key = $3"
#define ITEM_COLS "id, mode, body::text, created_us, position, in_slot"

static const pg_sql SQL_LANE_GET = { PG_ST_LANE_GET, 3,
	"SELECT " LANE_COLS " FROM lanes WHERE" LANE_PK };
/* The session the lane names (none when it is gone); lane_get queues it
 * after SQL_LANE_GET in one read-only snapshot. */
static const pg_sql SQL_LANE_SESSION_GET = { PG_ST_LANE_SESSION_GET, 3,
	"SELECT " PG_SESSION_COLS " FROM sessions WHERE app = $1 AND \"user\" = $2 AND"
	" id = (SELECT session FROM lanes WHERE" LANE_PK ")" };

/* ---- lane_write: one round trip ------------------------------------ */

/* The lane's lock (or its creation) comes first in the round; every
 * statement after it runs in a snapshot taken under that lock and writes
 * only if GUARD holds: the lane is at $4 (0: the row this write has just
 * created) and the session to reopen ($5, NULL = none) exists. A write
 * refused writes nothing, and the results of the lock say why. The
 * sessions, the inbox and the feed record go before the lane's row, whose
 * update moves the version the guard reads. */
static const pg_sql SQL_LANE_LOCK = { PG_ST_LANE_LOCK, 3,
	"SELECT version FROM lanes WHERE" LANE_PK " FOR UPDATE" };
/* A new lane starts as a row at version 0 that the write fills like any
 * other; of two creators the second waits for the first one's commit and
 * then inserts nothing (and gets MEMD_ECONFLICT). */
static const pg_sql SQL_LANE_CREATE = { PG_ST_LANE_CREATE, 4,
	"INSERT INTO lanes (app, \"user\", key, created_us, updated_us, version)"
	" VALUES ($1, $2, $3, $4, $4, 0) ON CONFLICT DO NOTHING RETURNING version" };
/* The session to reopen, locked after the lane. */
static const pg_sql SQL_LANE_SESSION_LOCK = { PG_ST_LANE_SESSION_LOCK, 3,
	"SELECT 1 FROM sessions WHERE app = $1 AND \"user\" = $2 AND id = $3 FOR NO KEY UPDATE" };
#define GUARD \
	" EXISTS (SELECT 1 FROM lanes WHERE" LANE_PK " AND version = $4::bigint)" \
	" AND ($5::text IS NULL OR EXISTS (SELECT 1 FROM sessions" \
	"  WHERE app = $1 AND \"user\" = $2 AND id = $5::text))"
#define GUARD_N 5
/* $6..$17: pg_session_insert_vals. */
static const pg_sql SQL_LANE_SESSION_CREATE = { PG_ST_LANE_SESSION_CREATE,
	GUARD_N + PG_SESSION_INSERT_N,
	"INSERT INTO sessions (" PG_SESSION_INSERT_COLS ")"
	" SELECT $6::text, $7::text, $8::text, $9::text, $10::jsonb, $11::integer, $12::bigint,"
	" $12::bigint, $13::text, $14::jsonb, $15::text, $16::text, $17::text WHERE" GUARD };
static const pg_sql SQL_LANE_SESSION_END = { PG_ST_LANE_SESSION_END, GUARD_N + 3,
	"UPDATE sessions SET ended_us = $7, end_reason = $8"
	" WHERE app = $1 AND \"user\" = $2 AND id = $6 AND ended_us = 0 AND" GUARD };
static const pg_sql SQL_LANE_SESSION_REOPEN = { PG_ST_LANE_SESSION_REOPEN, GUARD_N,
	"UPDATE sessions SET ended_us = 0, end_reason = NULL"
	" WHERE app = $1 AND \"user\" = $2 AND id = $5 AND" GUARD };
static const pg_sql SQL_LANE_SESSION_USAGE = { PG_ST_LANE_SESSION_USAGE,
	GUARD_N + 1 + PG_USAGE_N,
	"UPDATE sessions SET"
	" input_tokens = input_tokens + $7, output_tokens = output_tokens + $8,"
	" cache_read_tokens = cache_read_tokens + $9,"
	" cache_write_tokens = cache_write_tokens + $10, cost_micro_usd = cost_micro_usd + $11,"
	" last_prompt_tokens = CASE WHEN $12::bigint > 0 THEN $12 ELSE last_prompt_tokens END"
	" WHERE app = $1 AND \"user\" = $2 AND id = $6 AND" GUARD };
static const pg_sql SQL_LANE_INBOX_CLEAR = { PG_ST_LANE_INBOX_CLEAR, GUARD_N,
	"DELETE FROM inbox WHERE" LANE_PK " AND" GUARD };
/* A FINALIZE record for session $6 at the next feed position, as a
 * DELETE record gets its own (pg_sessions.c): the feed counter's row lock
 * is the last new lock the transaction takes (the lane's it holds
 * already), so positions commit in order. */
static const pg_sql SQL_LANE_FINALIZE = { PG_ST_LANE_FINALIZE, GUARD_N + 1,
	"WITH c AS (UPDATE feed_counter SET last = last + 1 WHERE id = 1 AND" GUARD
	"  RETURNING last)"
	" INSERT INTO feed_deletes (position, kind, app, \"user\", session)"
	" SELECT last, " FINALIZE_KIND ", $1, $2, $6 FROM c" };
/* Every host field ($6..$20), the usage ($21..$26) added, the inbox
 * depth zeroed when the inbox was cleared ($27), version + 1. */
static const pg_sql SQL_LANE_WRITE = { PG_ST_LANE_WRITE, 27,
	"UPDATE lanes SET flags = $6, session = $7, origin = $8::jsonb, updated_us = $9,"
	" resume_reason = $10, resume_marked_us = $11, reset_reason = $12,"
	" previous_session = $13, reset_us = $14, turn_id = $15, turn_started_us = $16,"
	" turn_lease_until_us = $17, interruptions = $18, finalize_failures = $19,"
	" finalize_claim_until_us = $20,"
	" input_tokens = input_tokens + $21, output_tokens = output_tokens + $22,"
	" cache_read_tokens = cache_read_tokens + $23,"
	" cache_write_tokens = cache_write_tokens + $24, cost_micro_usd = cost_micro_usd + $25,"
	" last_prompt_tokens = CASE WHEN $26::bigint > 0 THEN $26 ELSE last_prompt_tokens END,"
	" inbox_depth = CASE WHEN $27::boolean THEN 0 ELSE inbox_depth END,"
	" version = version + 1"
	" WHERE" LANE_PK " AND" GUARD " RETURNING " LANE_COLS };

/* ---- lane_list: one statement per shape, each a range of its index ---- */

/* $1 flags_all, $2 flags_none, $3 turn (MEMD_LQ_TURN_*), $4..$5 the
 * inclusive updated_us range, $6 lease bound (NULL = none), $7 limit. */
#define LIST_FILTERS \
	" flags & $1::integer = $1::integer AND flags & $2::integer = 0" \
	" AND ($3::integer = 0 OR ($3::integer = " LQ_TURN_SOME ") = (turn_id IS NOT NULL))" \
	" AND updated_us >= $4::bigint AND updated_us <= $5::bigint" \
	" AND ($6::bigint IS NULL OR (turn_id IS NOT NULL AND turn_lease_until_us < $6::bigint))"
/* Every app: lanes_by_updated; keyset $8..$11. */
#define LIST_ALL "SELECT " LANE_COLS " FROM lanes WHERE" LIST_FILTERS
#define LIST_ALL_ORDER " ORDER BY updated_us DESC, app DESC, \"user\" DESC, key DESC LIMIT $7"
static const pg_sql SQL_LANE_LIST_ALL = { PG_ST_LANE_LIST_ALL, 7, LIST_ALL LIST_ALL_ORDER };
static const pg_sql SQL_LANE_LIST_ALL_BEFORE = { PG_ST_LANE_LIST_ALL_BEFORE, 11,
	LIST_ALL " AND (updated_us, app, \"user\", key) < ($8::bigint, $9::text, $10::text, $11::text)"
	LIST_ALL_ORDER };
/* One app ($8): lanes_by_app_updated; keyset $9..$11 (see keyset_for). */
#define LIST_APP "SELECT " LANE_COLS " FROM lanes WHERE app = $8 AND" LIST_FILTERS
#define LIST_APP_ORDER " ORDER BY updated_us DESC, \"user\" DESC, key DESC LIMIT $7"
static const pg_sql SQL_LANE_LIST_APP = { PG_ST_LANE_LIST_APP, 8, LIST_APP LIST_APP_ORDER };
static const pg_sql SQL_LANE_LIST_APP_BEFORE = { PG_ST_LANE_LIST_APP_BEFORE, 11,
	LIST_APP " AND (updated_us, \"user\", key) < ($9::bigint, $10::text, $11::text)"
	LIST_APP_ORDER };
/* One user ($8, $9): lanes_by_user_updated; keyset $10..$11. */
#define LIST_USER "SELECT " LANE_COLS " FROM lanes WHERE app = $8 AND \"user\" = $9 AND" \
	LIST_FILTERS
#define LIST_USER_ORDER " ORDER BY updated_us DESC, key DESC LIMIT $7"
static const pg_sql SQL_LANE_LIST_USER = { PG_ST_LANE_LIST_USER, 9, LIST_USER LIST_USER_ORDER };
static const pg_sql SQL_LANE_LIST_USER_BEFORE = { PG_ST_LANE_LIST_USER_BEFORE, 11,
	LIST_USER " AND (updated_us, key) < ($10::bigint, $11::text)" LIST_USER_ORDER };

static const pg_sql SQL_LANE_DELETE = { PG_ST_LANE_DELETE, 3,
	"DELETE FROM lanes WHERE" LANE_PK " RETURNING 1" };
/* Oldest first over lanes_by_updated; a lane some other transaction holds
 * (an open, a turn) is skipped, and the WHERE is checked again on the
 * locked row, so a lane that just got a turn stays. The lanes are chosen
 * (and locked) once, by a materialized CTE: a LIMIT in a subquery of the
 * DELETE itself may be run again for later rows and would then take more
 * than $2. */
static const pg_sql SQL_LANE_PRUNE = { PG_ST_LANE_PRUNE, 2,
	"WITH s AS MATERIALIZED (SELECT app, \"user\", key FROM lanes WHERE updated_us < $1"
	"  AND flags & " SUSPENDED_FLAG " = 0 AND turn_id IS NULL"
	"  ORDER BY updated_us LIMIT $2 FOR UPDATE SKIP LOCKED)"
	" DELETE FROM lanes l USING s"
	" WHERE l.app = s.app AND l.\"user\" = s.\"user\" AND l.key = s.key"
	" RETURNING 1" };

/* ---- the inbox ----------------------------------------------------- */

/* Every inbox write starts with the lane row's lock; the statements
 * after it (new snapshots) see the last holder's commit. */
static const pg_sql SQL_INBOX_LOCK = { PG_ST_INBOX_LOCK, 3,
	"SELECT 1 FROM lanes WHERE" LANE_PK " FOR UPDATE" };
/* QUEUE: the next position, one more item. */
static const pg_sql SQL_INBOX_NEXT = { PG_ST_INBOX_NEXT, 3,
	"UPDATE lanes SET inbox_last = inbox_last + 1, inbox_depth = inbox_depth + 1"
	" WHERE" LANE_PK " RETURNING inbox_depth" };
/* INTERRUPT: the slot's item goes, the next position, one more item
 * unless one went. */
static const pg_sql SQL_INBOX_SLOT_REPLACE = { PG_ST_INBOX_SLOT_REPLACE, 3,
	"WITH d AS (DELETE FROM inbox WHERE" LANE_PK " AND in_slot RETURNING 1)"
	" UPDATE lanes SET inbox_last = inbox_last + 1,"
	" inbox_depth = inbox_depth + 1 - (SELECT count(*) FROM d)"
	" WHERE" LANE_PK " RETURNING inbox_depth" };
/* The item at the position just taken, in the slot if $8 (INTERRUPT) or
 * if the slot is free. */
static const pg_sql SQL_INBOX_INSERT = { PG_ST_INBOX_INSERT, 8,
	"INSERT INTO inbox (app, \"user\", key, position, id, mode, body, created_us, in_slot)"
	" SELECT $1, $2, $3, inbox_last, $4, $5, $6::json, $7,"
	" $8::boolean OR NOT EXISTS (SELECT 1 FROM inbox WHERE" LANE_PK " AND in_slot)"
	" FROM lanes WHERE" LANE_PK };
/* Take: lock the lane, say whether $4 holds its turn at $5. */
#define HOLDER " turn_id = $4 AND turn_lease_until_us > $5::bigint"
static const pg_sql SQL_INBOX_HOLDER = { PG_ST_INBOX_HOLDER, 5,
	"SELECT coalesce(" HOLDER ", false) FROM lanes WHERE" LANE_PK " FOR UPDATE" };
/* Only for the holder: remove the slot's item, else the FIFO head (both
 * found through an index), and count it off the depth. One row: the
 * depth after, and the item taken (NULLs when the inbox was empty). */
static const pg_sql SQL_INBOX_TAKE = { PG_ST_INBOX_TAKE, 5,
	"WITH n AS (SELECT coalesce("
	"   (SELECT position FROM inbox WHERE" LANE_PK " AND in_slot),"
	"   (SELECT position FROM inbox WHERE" LANE_PK " ORDER BY position LIMIT 1)) AS position"
	"  WHERE EXISTS (SELECT 1 FROM lanes WHERE" LANE_PK " AND" HOLDER ")),"
	" d AS (DELETE FROM inbox i USING n WHERE i.app = $1 AND i.\"user\" = $2 AND i.key = $3"
	"  AND i.position = n.position"
	"  RETURNING i.id, i.mode, i.body::text, i.created_us, i.position, i.in_slot),"
	" u AS (UPDATE lanes SET inbox_depth = inbox_depth - (SELECT count(*) FROM d)"
	"  WHERE" LANE_PK " AND" HOLDER " RETURNING inbox_depth)"
	" SELECT u.inbox_depth, d.* FROM u LEFT JOIN d ON true" };
/* Then the FIFO head moves into an empty slot. */
static const pg_sql SQL_INBOX_PROMOTE = { PG_ST_INBOX_PROMOTE, 5,
	"UPDATE inbox SET in_slot = true WHERE" LANE_PK
	" AND position = (SELECT position FROM inbox WHERE" LANE_PK " ORDER BY position LIMIT 1)"
	" AND NOT EXISTS (SELECT 1 FROM inbox WHERE" LANE_PK " AND in_slot)"
	" AND EXISTS (SELECT 1 FROM lanes WHERE" LANE_PK " AND" HOLDER ")" };
/* The slot's item first, then the FIFO by position. */
static const pg_sql SQL_INBOX_LIST = { PG_ST_INBOX_LIST, 3,
	"SELECT " ITEM_COLS " FROM inbox WHERE" LANE_PK " ORDER BY in_slot DESC, position" };

/* ---- rows ---------------------------------------------------------- */

static void lane_from_row(const PGresult *res, int row, memd_lane *l)
{
	memset(l, 0, sizeof(*l));
	l->struct_size = sizeof(*l);
	l->app = pg_get_text(res, row, 0);
	l->user = pg_get_text(res, row, 1);
	l->key = pg_get_text(res, row, 2);
	l->flags = (uint32_t)pg_get_i64(res, row, 3);
	l->session = pg_get_text(res, row, 4);
	l->origin_json = pg_get_text(res, row, 5);
	l->created_us = pg_get_i64(res, row, 6);
	l->updated_us = pg_get_i64(res, row, 7);
	l->version = pg_get_i64(res, row, 8);
	l->resume_reason = pg_get_text(res, row, 9);
	l->resume_marked_us = pg_get_i64(res, row, 10);
	l->reset_reason = pg_get_text(res, row, 11);
	l->previous_session = pg_get_text(res, row, 12);
	l->reset_us = pg_get_i64(res, row, 13);
	l->turn_id = pg_get_text(res, row, 14);
	l->turn_started_us = pg_get_i64(res, row, 15);
	l->turn_lease_until_us = pg_get_i64(res, row, 16);
	l->interruptions = (uint32_t)pg_get_i64(res, row, 17);
	l->finalize_failures = (uint32_t)pg_get_i64(res, row, 18);
	l->finalize_claim_until_us = pg_get_i64(res, row, 19);
	l->input_tokens = pg_get_i64(res, row, 20);
	l->output_tokens = pg_get_i64(res, row, 21);
	l->cache_read_tokens = pg_get_i64(res, row, 22);
	l->cache_write_tokens = pg_get_i64(res, row, 23);
	l->cost_micro_usd = pg_get_i64(res, row, 24);
	l->last_prompt_tokens = pg_get_i64(res, row, 25);
	l->inbox_depth = (uint32_t)pg_get_i64(res, row, 26);
}

/* An item from the ITEM_COLS of row `row` of res, from column col0. */
static void item_from_row(const PGresult *res, int row, int col0, memd_inbox_item *i)
{
	memset(i, 0, sizeof(*i));
	i->struct_size = sizeof(*i);
	i->id = pg_get_text(res, row, col0 + 0);
	i->mode = (uint32_t)pg_get_i64(res, row, col0 + 1);
	i->body_json = pg_get_text(res, row, col0 + 2);
	i->created_us = pg_get_i64(res, row, col0 + 3);
	i->position = pg_get_i64(res, row, col0 + 4);
	i->in_slot = strcmp(PQgetvalue(res, row, col0 + 5), "t") == 0;
}

static int32_t deliver_lane(const memd_lane_sink *out, const PGresult *res, int row,
			    memd_error *err)
{
	memd_lane l;

	lane_from_row(res, row, &l);
	return pg_sink_result(out->lane(out->userdata, &l), "lane", err);
}

static int32_t lane_not_found(const char *key, memd_error *err)
{
	return memd_error_set(err, MEMD_ENOTFOUND, 0, "lane '%.64s' not found", key);
}

/* Scope (no session) and key of a lane op. */
static int32_t check_lane(const memd_scope *scope, const char *key, memd_error *err)
{
	int32_t r = pu_check_scope(scope, 0, err);

	return r < 0 ? r : pu_check_id("lane key", key, err);
}

/* ---- lane_get ------------------------------------------------------ */

typedef struct lane_ctx {
	pg_store *store;
	const memd_call *call;
	const memd_scope *scope;
	const char *key;
	const memd_lane_sink *out;
	const memd_session_sink *session_out; /* lane_get, may be NULL */
	/* lane_write */
	const memd_lane_write *w;
	/* lane_list */
	const memd_lane_query *q;
	/* lane_prune */
	int64_t before_us;
	uint32_t limit;
	uint32_t count;
} lane_ctx;

static int32_t get_once(pg_conn *c, void *ctx, memd_error *err)
{
	lane_ctx *x = ctx;
	const char *vals[3] = { x->scope->app, x->scope->user, x->key };
	size_t at = 0;
	int32_t r = 0;

	/* With the session: both reads in one snapshot, one round trip. */
	if (x->session_out) {
		r = pg_send(c, &SQL_BEGIN_READ, NULL, err);
		at = 1;
	}
	if (r == 0)
		r = pg_send(c, &SQL_LANE_GET, vals, err);
	if (r == 0 && x->session_out)
		r = pg_send(c, &SQL_LANE_SESSION_GET, vals, err);
	if (r == 0 && x->session_out)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "read lane", err);
	if (r < 0)
		return r;
	if (PQntuples(pg_res(c, at)) < 1)
		return lane_not_found(x->key, err);
	pu_rows_read(x->call, 1);
	r = deliver_lane(x->out, pg_res(c, at), 0, err);
	if (r == 0 && x->session_out && PQntuples(pg_res(c, at + 1)) > 0) {
		memd_session s;
		pg_session_from_row(pg_res(c, at + 1), 0, &s);
		pu_rows_read(x->call, 1);
		r = pg_sink_result(x->session_out->session(x->session_out->userdata, &s),
				   "session", err);
	}
	return r > 0 ? 0 : r;
}

int32_t pg_lane_get(void *inst, const memd_call *call, const memd_scope *scope, const char *key,
		    const memd_lane_sink *out, const memd_session_sink *session_out,
		    memd_error *err)
{
	lane_ctx x = { .store = inst, .call = call, .scope = scope, .key = key, .out = out,
		       .session_out = session_out };
	int32_t r = check_lane(scope, key, err);

	if (r < 0)
		return r;
	if (!out || !out->lane)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane sink is missing");
	return pg_with_conn(inst, call, get_once, &x, err);
}

/* ---- lane_write ---------------------------------------------------- */

/* Queue the whole write: BEGIN, the locks, the guarded writes, COMMIT.
 * *ret_lock is the index of the lane lock's result, *ret_reopen the
 * reopen lock's, *ret_at the lane update's. */
static int32_t write_send(pg_conn *c, const memd_lane_write *w, size_t *ret_lock,
			  size_t *ret_reopen, size_t *ret_at, memd_error *err)
{
	const memd_lane *l = w->lane;
	int create = (w->flags & MEMD_LW_CREATE) != 0;
	char now[PG_INT_BUF], ver[PG_INT_BUF], fl[PG_INT_BUF], upd[PG_INT_BUF], rm[PG_INT_BUF],
		rs[PG_INT_BUF], ts[PG_INT_BUF], tl[PG_INT_BUF], in[PG_INT_BUF], ff[PG_INT_BUF],
		fc[PG_INT_BUF], ub[PG_USAGE_N][PG_INT_BUF], sb[2][PG_INT_BUF];
	const char *lock[4] = { l->app, l->user, l->key, pg_i64(now, w->now_us) };
	const char *reopen[3] = { l->app, l->user, w->reopen_session };
	/* The guard's values lead every guarded statement's. */
#define GUARD_VALS l->app, l->user, l->key, ver, w->reopen_session
	const char *created[GUARD_N + PG_SESSION_INSERT_N] = { GUARD_VALS };
	const char *end[GUARD_N + 3] = { GUARD_VALS, w->end_session, now, w->end_reason };
	const char *guard[GUARD_N] = { GUARD_VALS };
	const char *usage[GUARD_N + 1 + PG_USAGE_N] = { GUARD_VALS, l->session };
	const char *fin[GUARD_N + 1] = { GUARD_VALS, l->session };
	const char *lane[27] = {
		GUARD_VALS, pg_i64(fl, l->flags), l->session, l->origin_json,
		pg_i64(upd, l->updated_us), l->resume_reason, pg_i64(rm, l->resume_marked_us),
		l->reset_reason, l->previous_session, pg_i64(rs, l->reset_us), l->turn_id,
		pg_i64(ts, l->turn_started_us), pg_i64(tl, l->turn_lease_until_us),
		pg_i64(in, l->interruptions), pg_i64(ff, l->finalize_failures),
		pg_i64(fc, l->finalize_claim_until_us),
	};
#undef GUARD_VALS
	int32_t r;

	pg_i64(ver, create ? 0 : w->expected_version);
	pg_usage_vals(w->usage, ub, lane + 20);
	lane[26] = (w->flags & MEMD_LW_CLEAR_INBOX) ? "t" : "f";
	pg_usage_vals(w->usage, ub, usage + GUARD_N + 1);
	r = pg_send(c, &SQL_BEGIN, NULL, err);
	*ret_lock = pg_n_queued(c);
	if (r == 0)
		r = pg_send(c, create ? &SQL_LANE_CREATE : &SQL_LANE_LOCK, lock, err);
	*ret_reopen = pg_n_queued(c);
	if (r == 0 && w->reopen_session)
		r = pg_send(c, &SQL_LANE_SESSION_LOCK, reopen, err);
	if (r == 0 && w->create_session) {
		pg_session_insert_vals(w->create_session, sb, created + GUARD_N);
		r = pg_send(c, &SQL_LANE_SESSION_CREATE, created, err);
	}
	if (r == 0 && w->end_session)
		r = pg_send(c, &SQL_LANE_SESSION_END, end, err);
	if (r == 0 && w->reopen_session)
		r = pg_send(c, &SQL_LANE_SESSION_REOPEN, guard, err);
	if (r == 0 && w->usage)
		r = pg_send(c, &SQL_LANE_SESSION_USAGE, usage, err);
	if (r == 0 && (w->flags & MEMD_LW_CLEAR_INBOX))
		r = pg_send(c, &SQL_LANE_INBOX_CLEAR, guard, err);
	if (r == 0 && (w->flags & MEMD_LW_FEED_FINALIZE))
		r = pg_send(c, &SQL_LANE_FINALIZE, fin, err);
	*ret_at = pg_n_queued(c);
	if (r == 0)
		r = pg_send(c, &SQL_LANE_WRITE, lane, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	return r;
}

/* Why a write whose guard failed wrote nothing, from its locks' results. */
static int32_t write_refused(pg_conn *c, const memd_lane_write *w, size_t lock_at,
			     size_t reopen_at, memd_error *err)
{
	const memd_lane *l = w->lane;
	const PGresult *lock = pg_res(c, lock_at);

	if (w->flags & MEMD_LW_CREATE) {
		if (PQntuples(lock) == 0)
			return memd_error_set(err, MEMD_ECONFLICT, 0, "lane '%.64s' already exists",
					      l->key);
	} else if (PQntuples(lock) == 0) {
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "lane '%.64s' does not exist (expected version %lld)", l->key,
				      (long long)w->expected_version);
	} else if (pg_get_i64(lock, 0, 0) != w->expected_version) {
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "lane '%.64s' is at version %lld, not the expected %lld",
				      l->key, (long long)pg_get_i64(lock, 0, 0),
				      (long long)w->expected_version);
	}
	if (w->reopen_session && PQntuples(pg_res(c, reopen_at)) == 0)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' to reopen not found",
				      w->reopen_session);
	return memd_error_set(err, MEMD_EINTERNAL, 0,
			      "postgres: lane '%.64s' was not written and nothing says why", l->key);
}

static int32_t write_once(pg_conn *c, void *ctx, memd_error *err)
{
	lane_ctx *x = ctx;
	const memd_lane_write *w = x->w;
	size_t lock_at = 0, reopen_at = 0, at = 0;
	int32_t r = write_send(c, w, &lock_at, &reopen_at, &at, err);

	if (r == 0)
		r = pg_run(c, "write lane", err);
	/* The round's only unique key that can fail is a created session's
	 * (the lane's creation does nothing on a conflict). */
	if (r == MEMD_ECONFLICT && w->create_session)
		return memd_error_set(err, MEMD_ECONFLICT, 0, "session '%.64s' already exists",
				      w->create_session->id);
	if (r < 0)
		return r;
	if (PQntuples(pg_res(c, at)) != 1)
		return write_refused(c, w, lock_at, reopen_at, err);
	pu_rows_read(x->call, 1);
	r = deliver_lane(x->out, pg_res(c, at), 0, err);
	return r > 0 ? 0 : r;
}

/* Everything a lane write says, checked before anything is sent. */
static int32_t check_write(const memd_lane_write *w, memd_error *err)
{
	const memd_lane *l;
	memd_scope scope;
	int32_t r;

	if (!w || w->struct_size < sizeof(*w) || !w->lane ||
	    w->lane->struct_size < sizeof(*w->lane))
		return memd_error_set(err, MEMD_EINVAL, 0, "lane write or its lane is missing");
	l = w->lane;
	if (w->flags & ~(MEMD_LW_CREATE | MEMD_LW_CLEAR_INBOX | MEMD_LW_FEED_FINALIZE))
		return memd_error_set(err, MEMD_EINVAL, 0, "lane write has unknown flags 0x%x",
				      (unsigned)w->flags);
	if (l->flags & ~LANE_FLAGS_KNOWN)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane has unknown flags 0x%x",
				      (unsigned)l->flags);
	scope = (memd_scope){ .struct_size = sizeof(scope), .app = l->app, .user = l->user };
	r = check_lane(&scope, l->key, err);
	if (r == 0)
		r = pu_check_id("lane session", l->session, err);
	if (r == 0 && l->origin_json)
		r = pg_check_json_object("lane origin", l->origin_json, err);
	if (r == 0 && l->turn_id)
		r = pu_check_id("lane turn_id", l->turn_id, err);
	if (r == 0 && l->previous_session)
		r = pu_check_id("lane previous_session", l->previous_session, err);
	if (r == 0 && w->end_session)
		r = pu_check_id("end_session", w->end_session, err);
	if (r == 0 && w->reopen_session)
		r = pu_check_id("reopen_session", w->reopen_session, err);
	if (r == 0)
		r = pg_usage_check(w->usage, err);
	if (r < 0 || !w->create_session)
		return r;
	r = pg_session_check_new(w->create_session, err);
	if (r == 0 && (strcmp(w->create_session->app, l->app) != 0 ||
		       strcmp(w->create_session->user, l->user) != 0))
		r = memd_error_set(err, MEMD_EINVAL, 0,
				   "the session a lane write creates must be of the lane's app "
				   "and user");
	return r;
}

int32_t pg_lane_write(void *inst, const memd_call *call, const memd_lane_write *w,
		      const memd_lane_sink *out, memd_error *err)
{
	lane_ctx x = { .store = inst, .call = call, .w = w, .out = out };
	int32_t r = check_write(w, err);

	if (r < 0)
		return r;
	if (!out || !out->lane)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane sink is missing");
	return pg_with_conn(inst, call, write_once, &x, err);
}

/* ---- lane_list ----------------------------------------------------- */

/* The keyset bound of a list within one app (or one user) as a bound on
 * that index's (updated_us, ...) columns: lanes before (t, app', ...)
 * where app' differs from the list's app are either every lane at t (the
 * list's scope sorts before it: bound (t + 1, "")) or none at t (bound
 * (t, "")). scope_cmp compares the list's scope with the bound's. */
static void keyset_for(int scope_cmp, int64_t t, int64_t *ret_t, int *ret_exact)
{
	*ret_exact = scope_cmp == 0;
	*ret_t = scope_cmp < 0 && t < INT64_MAX ? t + 1 : t;
}

static int32_t list_once(pg_conn *c, void *ctx, memd_error *err)
{
	lane_ctx *x = ctx;
	const memd_lane_query *q = x->q;
	char fa[PG_INT_BUF], fn[PG_INT_BUF], tu[PG_INT_BUF], lo[PG_INT_BUF], hi[PG_INT_BUF],
		le[PG_INT_BUF], lim[PG_INT_BUF], bt[PG_INT_BUF];
	const char *ba = q->before_app ? q->before_app : KEYSET_FIRST;
	const char *bu = q->before_user ? q->before_user : KEYSET_FIRST;
	const char *bk = q->before_key ? q->before_key : KEYSET_FIRST;
	const char *vals[11] = {
		pg_i64(fa, q->flags_all), pg_i64(fn, q->flags_none), pg_i64(tu, q->turn),
		pg_i64(lo, !q->updated_after_us ? INT64_MIN :
			   q->updated_after_us < INT64_MAX ? q->updated_after_us + 1 : INT64_MAX),
		pg_i64(hi, !q->updated_before_us ? INT64_MAX :
			   q->updated_before_us > INT64_MIN ? q->updated_before_us - 1 : INT64_MIN),
		q->lease_before_us ? pg_i64(le, q->lease_before_us) : NULL,
		pg_i64(lim, q->limit),
	};
	int before = q->before_updated_us != 0;
	const pg_sql *sql;
	PGresult *res;
	int32_t r;

	if (!q->app) {
		sql = before ? &SQL_LANE_LIST_ALL_BEFORE : &SQL_LANE_LIST_ALL;
		vals[7] = pg_i64(bt, q->before_updated_us);
		vals[8] = ba;
		vals[9] = bu;
		vals[10] = bk;
	} else if (!q->user) {
		int64_t t;
		int exact;
		int cmp = strcmp(q->app, ba);

		keyset_for(cmp, q->before_updated_us, &t, &exact);
		sql = before ? &SQL_LANE_LIST_APP_BEFORE : &SQL_LANE_LIST_APP;
		vals[7] = q->app;
		vals[8] = pg_i64(bt, t);
		vals[9] = exact ? bu : KEYSET_FIRST;
		vals[10] = exact ? bk : KEYSET_FIRST;
	} else {
		int64_t t;
		int exact;
		int cmp = strcmp(q->app, ba);

		if (cmp == 0)
			cmp = strcmp(q->user, bu);
		keyset_for(cmp, q->before_updated_us, &t, &exact);
		sql = before ? &SQL_LANE_LIST_USER_BEFORE : &SQL_LANE_LIST_USER;
		vals[7] = q->app;
		vals[8] = q->user;
		vals[9] = pg_i64(bt, t);
		vals[10] = exact ? bk : KEYSET_FIRST;
	}
	r = pg_send(c, sql, vals, err);
	if (r == 0)
		r = pg_run(c, "list lanes", err);
	if (r < 0)
		return r;
	res = pg_res(c, 0);
	pu_rows_read(x->call, (uint64_t)PQntuples(res));
	for (int i = 0; r == 0 && i < PQntuples(res); i++) {
		r = deliver_lane(x->out, res, i, err);
		if (r == 0 && (i + 1) % PG_CHECK_EVERY == 0)
			r = pg_call_check(x->store, x->call, err);
	}
	return r > 0 ? 0 : r;
}

int32_t pg_lane_list(void *inst, const memd_call *call, const memd_lane_query *q,
		     const memd_lane_sink *out, memd_error *err)
{
	lane_ctx x = { .store = inst, .call = call, .q = q, .out = out };
	int32_t r = 0;

	if (!q || q->struct_size < sizeof(*q) || !out || !out->lane)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane query or sink is missing");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane list limit must be > 0");
	if (!q->app && q->user)
		return memd_error_set(err, MEMD_EINVAL, 0, "a lane list by user needs its app");
	if (q->turn > MEMD_LQ_TURN_NONE)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane list turn filter %u is unknown",
				      (unsigned)q->turn);
	if (q->app)
		r = pu_check_id("app", q->app, err);
	if (r == 0 && q->user)
		r = pu_check_id("user", q->user, err);
	return r < 0 ? r : pg_with_conn(inst, call, list_once, &x, err);
}

/* ---- lane_delete, lane_prune --------------------------------------- */

static int32_t delete_once(pg_conn *c, void *ctx, memd_error *err)
{
	lane_ctx *x = ctx;
	const char *vals[3] = { x->scope->app, x->scope->user, x->key };
	int32_t r = pg_send(c, &SQL_LANE_DELETE, vals, err);

	if (r == 0)
		r = pg_run(c, "delete lane", err);
	if (r == 0 && PQntuples(pg_res(c, 0)) == 0)
		r = lane_not_found(x->key, err);
	return r;
}

int32_t pg_lane_delete(void *inst, const memd_call *call, const memd_scope *scope,
		       const char *key, memd_error *err)
{
	lane_ctx x = { .store = inst, .call = call, .scope = scope, .key = key };
	int32_t r = check_lane(scope, key, err);

	return r < 0 ? r : pg_with_conn(inst, call, delete_once, &x, err);
}

static int32_t prune_once(pg_conn *c, void *ctx, memd_error *err)
{
	lane_ctx *x = ctx;
	char before[PG_INT_BUF], lim[PG_INT_BUF];
	const char *vals[2] = { pg_i64(before, x->before_us), pg_i64(lim, x->limit) };
	int32_t r = pg_send(c, &SQL_LANE_PRUNE, vals, err);

	if (r == 0)
		r = pg_run(c, "prune lanes", err);
	if (r == 0)
		x->count = (uint32_t)PQntuples(pg_res(c, 0));
	return r;
}

int32_t pg_lane_prune(void *inst, const memd_call *call, int64_t updated_before_us,
		      uint32_t limit, uint32_t *ret_count, memd_error *err)
{
	lane_ctx x = { .store = inst, .call = call, .before_us = updated_before_us,
		       .limit = limit };
	int32_t r;

	if (!ret_count)
		return memd_error_set(err, MEMD_EINVAL, 0, "no output count");
	if (limit == 0) {
		*ret_count = 0;
		return 0;
	}
	r = pg_with_conn(inst, call, prune_once, &x, err);
	if (r == 0)
		*ret_count = x.count;
	return r;
}

/* ---- the inbox ----------------------------------------------------- */

typedef struct inbox_ctx {
	pg_store *store;
	const memd_call *call;
	const memd_scope *scope;
	const char *key;
	const memd_inbox_item *item;
	const char *turn_id;
	int64_t now_us;
	const memd_inbox_sink *out;
	uint32_t depth;
} inbox_ctx;

static int32_t put_once(pg_conn *c, void *ctx, memd_error *err)
{
	inbox_ctx *x = ctx;
	const memd_inbox_item *it = x->item;
	int interrupt = it->mode == MEMD_INBOX_INTERRUPT;
	char mode[PG_INT_BUF], cr[PG_INT_BUF];
	const char *pk[3] = { x->scope->app, x->scope->user, x->key };
	const char *ins[8] = { x->scope->app, x->scope->user, x->key, it->id,
			       pg_i64(mode, it->mode), it->body_json, pg_i64(cr, it->created_us),
			       interrupt ? "t" : "f" };
	int32_t r = pg_send(c, &SQL_BEGIN, NULL, err);

	if (r == 0)
		r = pg_send(c, &SQL_INBOX_LOCK, pk, err);
	if (r == 0)
		r = pg_send(c, interrupt ? &SQL_INBOX_SLOT_REPLACE : &SQL_INBOX_NEXT, pk, err);
	if (r == 0)
		r = pg_send(c, &SQL_INBOX_INSERT, ins, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "put into the inbox", err);
	if (r < 0)
		return r;
	if (PQntuples(pg_res(c, 1)) == 0)
		return lane_not_found(x->key, err);
	x->depth = (uint32_t)pg_get_i64(pg_res(c, 2), 0, 0);
	return 0;
}

int32_t pg_inbox_put(void *inst, const memd_call *call, const memd_scope *scope, const char *key,
		     const memd_inbox_item *item, uint32_t *ret_depth, memd_error *err)
{
	inbox_ctx x = { .store = inst, .call = call, .scope = scope, .key = key, .item = item };
	int32_t r = check_lane(scope, key, err);

	if (r < 0)
		return r;
	if (!item || item->struct_size < sizeof(*item) || !ret_depth)
		return memd_error_set(err, MEMD_EINVAL, 0, "inbox item or depth output is missing");
	if (item->mode != MEMD_INBOX_INTERRUPT && item->mode != MEMD_INBOX_QUEUE)
		return memd_error_set(err, MEMD_EINVAL, 0, "inbox mode %u is unknown",
				      (unsigned)item->mode);
	r = pu_check_id("inbox item id", item->id, err);
	if (r == 0)
		r = pg_check_json_object("inbox item body", item->body_json, err);
	if (r == 0)
		r = pg_with_conn(inst, call, put_once, &x, err);
	if (r == 0)
		*ret_depth = x.depth;
	return r;
}

static int32_t take_once(pg_conn *c, void *ctx, memd_error *err)
{
	inbox_ctx *x = ctx;
	char now[PG_INT_BUF];
	const char *vals[5] = { x->scope->app, x->scope->user, x->key, x->turn_id,
				pg_i64(now, x->now_us) };
	PGresult *res;
	int32_t r = pg_send(c, &SQL_BEGIN, NULL, err);

	if (r == 0)
		r = pg_send(c, &SQL_INBOX_HOLDER, vals, err);
	if (r == 0)
		r = pg_send(c, &SQL_INBOX_TAKE, vals, err);
	if (r == 0)
		r = pg_send(c, &SQL_INBOX_PROMOTE, vals, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "take from the inbox", err);
	if (r < 0)
		return r;
	res = pg_res(c, 1);
	if (PQntuples(res) == 0)
		return lane_not_found(x->key, err);
	if (strcmp(PQgetvalue(res, 0, 0), "t") != 0)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "turn '%.64s' does not hold lane '%.64s' (ended, expired or "
				      "another turn's)", x->turn_id, x->key);
	res = pg_res(c, 2);
	if (PQntuples(res) != 1)
		return memd_error_set(err, MEMD_EINTERNAL, 0,
				      "postgres: lane '%.64s' changed under its lock", x->key);
	x->depth = (uint32_t)pg_get_i64(res, 0, 0);
	if (!PQgetisnull(res, 0, 1)) {
		memd_inbox_item it;

		pu_rows_read(x->call, 1);
		item_from_row(res, 0, 1, &it);
		r = pg_sink_result(x->out->item(x->out->userdata, &it), "inbox", err);
	}
	return r > 0 ? 0 : r;
}

int32_t pg_inbox_take(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *key, const char *turn_id, int64_t now_us,
		      const memd_inbox_sink *out, uint32_t *ret_depth, memd_error *err)
{
	inbox_ctx x = { .store = inst, .call = call, .scope = scope, .key = key,
			.turn_id = turn_id, .now_us = now_us, .out = out };
	int32_t r = check_lane(scope, key, err);

	if (r == 0)
		r = pu_check_id("turn id", turn_id, err);
	if (r < 0)
		return r;
	if (!out || !out->item || !ret_depth)
		return memd_error_set(err, MEMD_EINVAL, 0, "inbox sink or depth output is missing");
	r = pg_with_conn(inst, call, take_once, &x, err);
	if (r == 0)
		*ret_depth = x.depth;
	return r;
}

static int32_t list_items_once(pg_conn *c, void *ctx, memd_error *err)
{
	inbox_ctx *x = ctx;
	const char *pk[3] = { x->scope->app, x->scope->user, x->key };
	PGresult *res;
	int32_t r = pg_send(c, &SQL_BEGIN_READ, NULL, err);

	if (r == 0)
		r = pg_send(c, &SQL_LANE_GET, pk, err);
	if (r == 0)
		r = pg_send(c, &SQL_INBOX_LIST, pk, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "list the inbox", err);
	if (r < 0)
		return r;
	if (PQntuples(pg_res(c, 1)) == 0)
		return lane_not_found(x->key, err);
	res = pg_res(c, 2);
	pu_rows_read(x->call, (uint64_t)PQntuples(res));
	for (int i = 0; r == 0 && i < PQntuples(res); i++) {
		memd_inbox_item it;
		item_from_row(res, i, 0, &it);
		r = pg_sink_result(x->out->item(x->out->userdata, &it), "inbox", err);
	}
	return r > 0 ? 0 : r;
}

int32_t pg_inbox_list(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *key, const memd_inbox_sink *out, memd_error *err)
{
	inbox_ctx x = { .store = inst, .call = call, .scope = scope, .key = key, .out = out };
	int32_t r = check_lane(scope, key, err);

	if (r < 0)
		return r;
	if (!out || !out->item)
		return memd_error_set(err, MEMD_EINVAL, 0, "inbox sink is missing");
	return pg_with_conn(inst, call, list_items_once, &x, err);
}
