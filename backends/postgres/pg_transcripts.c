/* SPDX-License-Identifier: MIT */
#include "pg_transcripts.h"

#include <string.h>

#include "pg_sessions.h"
#include "plugin_util.h"

static const pg_sql SQL_BEGIN_READ = { PG_ST_BEGIN_READ, 0,
	"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" };
static const pg_sql SQL_COMMIT = { PG_ST_COMMIT, 0, "COMMIT" };

/* The columns every query that delivers an operation selects, in the
 * order op_from_row reads them. */
#define OP_COLS \
	"id, kind, created_us, version, hide_from_seq, first_seq, last_seq, hidden_count," \
	" unhidden_count, undo_of, undone_by"
#define OP_WHERE " WHERE app = $1 AND \"user\" = $2 AND session = $3"

/* Newest first: every operation is an append, which moves the version
 * (operations_by_version); $4 the limit (NULL = all). */
static const pg_sql SQL_OP_LIST = { PG_ST_OP_LIST, 4,
	"SELECT " OP_COLS " FROM operations" OP_WHERE " ORDER BY version DESC LIMIT $4" };
static const pg_sql SQL_OP_GET = { PG_ST_OP_GET, 4,
	"SELECT " OP_COLS " FROM operations" OP_WHERE " AND id = $4" };

/* Ascending by the primary key's (version, key) from the keyset bound:
 * $4 the version after which to start (with $7: the key after which to
 * start within $4), $5 from_seq, $6 the limit (NULL = all). */
#define HIST_COLS "version, seq, key, old_value, new_value, at_us, operation"
static const pg_sql SQL_STATE_HISTORY = { PG_ST_STATE_HISTORY, 6,
	"SELECT " HIST_COLS " FROM state_history" OP_WHERE " AND version > $4 AND seq >= $5"
	" ORDER BY version, key LIMIT $6" };
static const pg_sql SQL_STATE_HISTORY_AFTER = { PG_ST_STATE_HISTORY_AFTER, 7,
	"SELECT " HIST_COLS " FROM state_history" OP_WHERE
	" AND (version, key) > ($4::bigint, $7::text) AND seq >= $5"
	" ORDER BY version, key LIMIT $6" };

static void op_from_row(const PGresult *res, int row, memd_operation *o)
{
	memset(o, 0, sizeof(*o));
	o->struct_size = sizeof(*o);
	o->id = pg_get_text(res, row, 0);
	o->kind = (uint32_t)pg_get_i64(res, row, 1);
	o->created_us = pg_get_i64(res, row, 2);
	o->version = pg_get_i64(res, row, 3);
	o->hide_from_seq = pg_get_i64(res, row, 4);
	o->first_seq = pg_get_i64(res, row, 5);
	o->last_seq = pg_get_i64(res, row, 6);
	o->hidden_count = pg_get_i64(res, row, 7);
	o->unhidden_count = pg_get_i64(res, row, 8);
	o->undo_of = pg_get_text(res, row, 9);
	o->undone_by = pg_get_text(res, row, 10);
}

typedef struct tx_ctx {
	pg_store *store;
	const memd_call *call;
	const memd_scope *scope;
	uint32_t limit;
	const char *id;                        /* operation_get */
	const memd_operation_sink *ops;
	const memd_state_history_query *q;
	const memd_state_change_sink *changes;
} tx_ctx;

/* Queue BEGIN_READ, the session's existence and sql with vals, COMMIT;
 * run them; MEMD_ENOTFOUND without the session. The rows are result 2. */
static int32_t read_round(pg_conn *c, tx_ctx *x, const pg_sql *sql, const char *const *vals,
			  const char *what, memd_error *err)
{
	int32_t r = pg_send(c, &SQL_BEGIN_READ, NULL, err);

	if (r == 0)
		r = pg_session_send_exists(c, x->scope, err);
	if (r == 0)
		r = pg_send(c, sql, vals, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, what, err);
	if (r == 0)
		r = pg_session_exists_result(pg_res(c, 1), x->call, x->scope, err);
	return r;
}

static int32_t op_list_once(pg_conn *c, void *ctx, memd_error *err)
{
	tx_ctx *x = ctx;
	char lim[PG_INT_BUF];
	const char *vals[4] = { x->scope->app, x->scope->user, x->scope->session,
				x->limit ? pg_i64(lim, x->limit) : NULL };
	const char *what = x->id ? "read operation" : "list operations";
	PGresult *res;
	int32_t r;

	if (x->id)
		vals[3] = x->id;
	r = read_round(c, x, x->id ? &SQL_OP_GET : &SQL_OP_LIST, vals, what, err);
	if (r < 0)
		return r;
	res = pg_res(c, 2);
	pu_rows_read(x->call, (uint64_t)PQntuples(res));
	if (x->id && PQntuples(res) == 0)
		return memd_error_set(err, MEMD_ENOTFOUND, 0,
				      "session '%.64s' has no operation '%.64s'", x->scope->session,
				      x->id);
	for (int i = 0; r == 0 && i < PQntuples(res); i++) {
		memd_operation o;
		op_from_row(res, i, &o);
		r = pg_sink_result(x->ops->operation(x->ops->userdata, &o), "operation", err);
	}
	return r > 0 ? 0 : r;
}

int32_t pg_operation_list(void *inst, const memd_call *call, const memd_scope *scope,
			  uint32_t limit, const memd_operation_sink *out, memd_error *err)
{
	tx_ctx x = { .store = inst, .call = call, .scope = scope, .limit = limit, .ops = out };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!out || !out->operation)
		return memd_error_set(err, MEMD_EINVAL, 0, "operation sink is missing");
	return pg_with_conn(inst, call, op_list_once, &x, err);
}

int32_t pg_operation_get(void *inst, const memd_call *call, const memd_scope *scope,
			 const char *id, const memd_operation_sink *out, memd_error *err)
{
	tx_ctx x = { .store = inst, .call = call, .scope = scope, .id = id, .ops = out };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r == 0)
		r = pu_check_id("operation id", id, err);
	if (r < 0)
		return r;
	if (!out || !out->operation)
		return memd_error_set(err, MEMD_EINVAL, 0, "operation sink is missing");
	return pg_with_conn(inst, call, op_list_once, &x, err);
}

static int32_t history_once(pg_conn *c, void *ctx, memd_error *err)
{
	tx_ctx *x = ctx;
	const memd_state_history_query *q = x->q;
	char after[PG_INT_BUF], from[PG_INT_BUF], lim[PG_INT_BUF];
	/* after_version 0 without a key: from the first, the initial state's
	 * version 0 included. */
	int64_t after_version = q->after_version || q->after_key ? q->after_version : -1;
	const char *vals[7] = { x->scope->app, x->scope->user, x->scope->session,
				pg_i64(after, after_version), pg_i64(from, q->from_seq),
				q->limit ? pg_i64(lim, q->limit) : NULL, q->after_key };
	PGresult *res;
	int32_t r = read_round(c, x, q->after_key ? &SQL_STATE_HISTORY_AFTER : &SQL_STATE_HISTORY,
			       vals, "read state history", err);

	if (r < 0)
		return r;
	res = pg_res(c, 2);
	pu_rows_read(x->call, (uint64_t)PQntuples(res));
	for (int i = 0; r == 0 && i < PQntuples(res); i++) {
		memd_state_change ch = { .struct_size = sizeof(ch) };
		ch.version = pg_get_i64(res, i, 0);
		ch.seq = pg_get_i64(res, i, 1);
		ch.key = pg_get_text(res, i, 2);
		ch.old_json = pg_get_text(res, i, 3);
		ch.new_json = pg_get_text(res, i, 4);
		ch.at_us = pg_get_i64(res, i, 5);
		ch.operation = pg_get_text(res, i, 6);
		r = pg_sink_result(x->changes->change(x->changes->userdata, &ch), "state change",
				   err);
		if (r == 0 && (i + 1) % PG_CHECK_EVERY == 0)
			r = pg_call_check(x->store, x->call, err);
	}
	return r > 0 ? 0 : r;
}

int32_t pg_state_history(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_state_history_query *q, const memd_state_change_sink *out,
			 memd_error *err)
{
	tx_ctx x = { .store = inst, .call = call, .scope = scope, .q = q, .changes = out };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!q || !PG_HAS(q, from_seq) || !out || !out->change)
		return memd_error_set(err, MEMD_EINVAL, 0, "state history query or sink is missing");
	if (q->after_version < 0 || q->from_seq < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "state history bounds must not be negative");
	return pg_with_conn(inst, call, history_once, &x, err);
}
