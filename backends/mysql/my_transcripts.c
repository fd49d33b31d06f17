/* SPDX-License-Identifier: MIT */
#include "my_transcripts.h"

#include <stdlib.h>
#include <string.h>

#include "plugin_util.h"
#include "my_sessions.h"

#define MY_NO_LIMIT UINT64_MAX
#define SEQ_UNBOUNDED INT64_MAX
/* hidden_us of a hidden event is never 0 (0 = visible), even for an
 * operation made at time 0. */
#define MY_FIRST_STAMP 1

/* Every query that delivers an operation selects these, in order. */
#define OP_COLS \
	"id, kind, created_us, version, hide_from_seq, first_seq, last_seq, hidden_count," \
	" unhidden_count, undo_of, undone_by"

static const my_sql SQL_OP_GET = { MY_ST_OP_GET,
	"SELECT " OP_COLS " FROM memd_operations"
	" WHERE app = ? AND user = ? AND session = ? AND id = ?" };
static const my_sql SQL_OP_LIST = { MY_ST_OP_LIST,
	"SELECT " OP_COLS " FROM memd_operations FORCE INDEX (memd_operations_by_version)"
	" WHERE app = ? AND user = ? AND session = ? ORDER BY version DESC LIMIT ?" };
static const my_sql SQL_OP_INSERT = { MY_ST_OP_INSERT,
	"INSERT INTO memd_operations (app, user, session, id, kind, created_us, version,"
	" hide_from_seq, first_seq, last_seq, hidden_count, unhidden_count, undo_of)"
	" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" };
static const my_sql SQL_OP_UNDONE = { MY_ST_OP_UNDONE,
	"UPDATE memd_operations SET undone_by = ?"
	" WHERE app = ? AND user = ? AND session = ? AND id = ?" };

/* Hiding: the visible events with ?4 <= seq <= ?5 (and, when ?6 is not
 * NULL, appended by operation ?7), a range of memd_events_visible that
 * starts at the first seq hidden: rows before it are never read. */
#define TX_VISIBLE_RANGE \
	" FROM memd_events FORCE INDEX (memd_events_visible)" \
	" WHERE app = ? AND user = ? AND session = ? AND hidden_us = 0 AND seq >= ? AND seq <= ?" \
	" AND (? IS NULL OR operation = ?)"
static const my_sql SQL_TX_COUNT_VISIBLE = { MY_ST_TX_COUNT_VISIBLE,
	"SELECT COUNT(*), COALESCE(SUM(is_summary), 0)" TX_VISIBLE_RANGE };
static const my_sql SQL_TX_HIDE = { MY_ST_TX_HIDE,
	"UPDATE memd_events FORCE INDEX (memd_events_visible)"
	" SET hidden_us = ?, hidden_by = ?, hidden_kind = ?"
	" WHERE app = ? AND user = ? AND session = ? AND hidden_us = 0 AND seq >= ? AND seq <= ?"
	" AND (? IS NULL OR operation = ?)" };
/* What an operation hid: hidden_us is its stamp (one range of the
 * index), hidden_by its id. */
#define TX_HIDDEN_BY \
	" WHERE app = ? AND user = ? AND session = ? AND hidden_us = ? AND hidden_by = ?"
static const my_sql SQL_TX_COUNT_HIDDEN_BY = { MY_ST_TX_COUNT_HIDDEN_BY,
	"SELECT COUNT(*), COALESCE(SUM(is_summary), 0), COALESCE(MIN(seq), 0)"
	" FROM memd_events FORCE INDEX (memd_events_visible)" TX_HIDDEN_BY };
static const my_sql SQL_TX_UNHIDE = { MY_ST_TX_UNHIDE,
	"UPDATE memd_events FORCE INDEX (memd_events_visible)"
	" SET hidden_us = 0, hidden_by = NULL, hidden_kind = 0" TX_HIDDEN_BY };
/* Feed records, numbered from ?1 in seq order. */
static const my_sql SQL_TX_MARK_HIDDEN = { MY_ST_TX_MARK_HIDDEN,
	"INSERT INTO memd_feed_marks (position, kind, app, user, session, seq)"
	" SELECT ? + ROW_NUMBER() OVER (ORDER BY seq) - 1, ?, app, user, session, seq"
	" FROM memd_events FORCE INDEX (memd_events_visible)" TX_HIDDEN_BY " AND seq >= ?" };
static const my_sql SQL_TX_MARK_SHOWN = { MY_ST_TX_MARK_SHOWN,
	"INSERT INTO memd_feed_marks (position, kind, app, user, session, seq)"
	" SELECT ? + ROW_NUMBER() OVER (ORDER BY seq) - 1, ?, app, user, session, seq"
	" FROM memd_events FORCE INDEX (memd_events_visible)"
	" WHERE app = ? AND user = ? AND session = ? AND hidden_us = 0 AND seq >= ?" };
static const my_sql SQL_TX_NEWEST_SUMMARY = { MY_ST_TX_NEWEST_SUMMARY,
	"SELECT COALESCE(MAX(seq), 0) FROM memd_events FORCE INDEX (memd_events_visible_summaries)"
	" WHERE app = ? AND user = ? AND session = ? AND hidden_us = 0 AND is_summary = 1" };

/* state_history: from a seq on (the seq index: seq never goes down as
 * the version goes up, so (seq, version, name) order is (version, name)
 * order), or after a keyset (the primary key, a plain version bound
 * first so the read starts there); the limit ends the walk. */
#define HISTORY_COLS "version, seq, name, old_value, new_value, at_us, operation"
static const my_sql SQL_HISTORY_FROM_SEQ = { MY_ST_HISTORY_FROM_SEQ,
	"SELECT " HISTORY_COLS " FROM memd_state_history FORCE INDEX (memd_state_history_by_seq)"
	" WHERE app = ? AND user = ? AND session = ? AND seq >= ?"
	" ORDER BY seq, version, name LIMIT ?" };
static const my_sql SQL_HISTORY_AFTER = { MY_ST_HISTORY_AFTER,
	"SELECT " HISTORY_COLS " FROM memd_state_history FORCE INDEX (PRIMARY)"
	" WHERE app = ? AND user = ? AND session = ? AND version >= ?"
	" AND (version > ? OR name > ?) AND seq >= ?"
	" ORDER BY version, name LIMIT ?" };

static int64_t stamp_of(int64_t now_us)
{
	return now_us >= MY_FIRST_STAMP ? now_us : MY_FIRST_STAMP;
}

static void op_from_row(const my_stmt *s, memd_operation *o)
{
	memset(o, 0, sizeof(*o));
	o->struct_size = sizeof(*o);
	o->id = my_col_text(s, 0);
	o->kind = (uint32_t)my_col_i64(s, 1);
	o->created_us = my_col_i64(s, 2);
	o->version = my_col_i64(s, 3);
	o->hide_from_seq = my_col_i64(s, 4);
	o->first_seq = my_col_i64(s, 5);
	o->last_seq = my_col_i64(s, 6);
	o->hidden_count = my_col_i64(s, 7);
	o->unhidden_count = my_col_i64(s, 8);
	o->undo_of = my_col_text(s, 9);
	o->undone_by = my_col_text(s, 10);
}

/* Read operation id of scope: *ret_found 0 when absent; the row stays
 * open in *ret_s (close it with my_done) when found. */
static int32_t op_read(my_conn *c, const memd_scope *scope, const char *id, my_stmt **ret_s,
		       int *ret_found, memd_error *err)
{
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, scope, 1);
	my_param_text(&p, id);
	*ret_found = 0;
	r = my_exec(c, &SQL_OP_GET, &p, ret_s, err);
	if (r == 0)
		r = my_fetch(c, *ret_s, err);
	if (r == 1)
		*ret_found = 1;
	return r < 0 ? r : 0;
}

/* ---- inside an append ------------------------------------------------- */

int32_t my_tx_check(my_conn *c, const memd_scope *scope, const memd_transcript_op *op,
		    int64_t version, int64_t now_us, my_tx *t, memd_error *err)
{
	memd_operation target;
	my_stmt *s = NULL;
	int found = 0;
	int32_t r;

	memset(t, 0, sizeof(*t));
	t->op = op;
	t->stamp = stamp_of(now_us);
	r = op_read(c, scope, op->id, &s, &found, err);
	if (r < 0)
		return r;
	if (found) {
		my_done(s);
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "session '%.64s' has an operation '%.64s' already",
				      scope->session, op->id);
	}
	if (op->kind != MEMD_OP_UNDO) {
		t->hidden_from_seq = op->hide_from_seq;
		return 0;
	}
	r = op_read(c, scope, op->undo_id, &s, &found, err);
	if (r < 0)
		return r;
	if (!found)
		return memd_error_set(err, MEMD_ENOTFOUND, 0,
				      "session '%.64s' has no operation '%.64s'", scope->session,
				      op->undo_id);
	op_from_row(s, &target);
	if (target.undone_by)
		r = memd_error_set(err, MEMD_ECONFLICT, 0, "operation '%.64s' was undone by '%.64s'",
				   op->undo_id, target.undone_by);
	else if (target.version != version)
		r = memd_error_set(err, MEMD_ECONFLICT, 0,
				   "operation '%.64s' cannot be undone: the session changed after it "
				   "(version %lld, not %lld)",
				   op->undo_id, (long long)version, (long long)target.version);
	t->target_stamp = stamp_of(target.created_us);
	t->target_first_seq = target.first_seq;
	t->target_last_seq = target.last_seq;
	t->hidden_from_seq = target.first_seq;
	my_done(s);
	return r;
}

/* Hide the visible events from..to (appended by operation, when not
 * NULL), counting them and the summaries among them. */
static int32_t hide_range(my_conn *c, const memd_scope *scope, const my_tx *t, int64_t from,
			  int64_t to, const char *operation, int64_t *ret_n, int64_t *ret_summaries,
			  memd_error *err)
{
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, scope, 1);
	my_param_i64(&p, from);
	my_param_i64(&p, to);
	my_param_text(&p, operation);
	my_param_text(&p, operation);
	r = my_exec(c, &SQL_TX_COUNT_VISIBLE, &p, &s, err);
	if (r == 0)
		r = my_fetch(c, s, err);
	if (r < 0)
		return r;
	*ret_n = r == 1 ? my_col_i64(s, 0) : 0;
	*ret_summaries = r == 1 ? my_col_i64(s, 1) : 0;
	my_done(s);
	if (*ret_n == 0)
		return 0;
	my_params_init(&p);
	my_param_i64(&p, t->stamp);
	my_param_text(&p, t->op->id);
	my_param_i64(&p, t->op->kind);
	my_param_scope(&p, scope, 1);
	my_param_i64(&p, from);
	my_param_i64(&p, to);
	my_param_text(&p, operation);
	my_param_text(&p, operation);
	r = my_exec(c, &SQL_TX_HIDE, &p, &s, err);
	if (r == 0 && my_affected(s) != (uint64_t)*ret_n)
		r = memd_error_set(err, MEMD_EIO, 0, "mysql: hid %llu events of %lld counted",
				   (unsigned long long)my_affected(s), (long long)*ret_n);
	return r;
}

/* Show again what the undo's target hid. */
static int32_t unhide_target(my_conn *c, const memd_scope *scope, my_tx *t, int64_t *ret_n,
			     int64_t *ret_summaries, memd_error *err)
{
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, scope, 1);
	my_param_i64(&p, t->target_stamp);
	my_param_text(&p, t->op->undo_id);
	r = my_exec(c, &SQL_TX_COUNT_HIDDEN_BY, &p, &s, err);
	if (r == 0)
		r = my_fetch(c, s, err);
	if (r < 0)
		return r;
	*ret_n = r == 1 ? my_col_i64(s, 0) : 0;
	*ret_summaries = r == 1 ? my_col_i64(s, 1) : 0;
	t->shown_from_seq = r == 1 ? my_col_i64(s, 2) : 0;
	my_done(s);
	if (*ret_n == 0)
		return 0;
	my_params_init(&p);
	my_param_scope(&p, scope, 1);
	my_param_i64(&p, t->target_stamp);
	my_param_text(&p, t->op->undo_id);
	r = my_exec(c, &SQL_TX_UNHIDE, &p, &s, err);
	if (r == 0 && my_affected(s) != (uint64_t)*ret_n)
		r = memd_error_set(err, MEMD_EIO, 0, "mysql: showed %llu events of %lld counted",
				   (unsigned long long)my_affected(s), (long long)*ret_n);
	return r;
}

int32_t my_tx_apply(my_conn *c, const memd_scope *scope, my_tx *t, int64_t *summary_seq,
		    memd_error *err)
{
	int64_t n = 0, summaries = 0, found = 0;
	int got = 0;
	my_params p;
	int32_t r = 0;

	t->hidden = t->unhidden = t->messages_added = 0;
	t->shown_from_seq = 0;
	if (t->op->kind == MEMD_OP_UNDO) {
		r = unhide_target(c, scope, t, &n, &summaries, err);
		t->unhidden = n;
		t->messages_added += n - summaries;
		n = summaries = 0;
		/* The target's own events (nothing came after them). */
		if (r == 0 && t->target_first_seq > 0)
			r = hide_range(c, scope, t, t->target_first_seq, t->target_last_seq,
				       t->op->undo_id, &n, &summaries, err);
	} else {
		r = hide_range(c, scope, t, t->op->hide_from_seq, SEQ_UNBOUNDED, NULL, &n,
			       &summaries, err);
	}
	t->hidden = n;
	t->messages_added -= n - summaries;
	if (r < 0)
		return r;
	my_params_init(&p);
	my_param_scope(&p, scope, 1);
	r = my_query_i64(c, &SQL_TX_NEWEST_SUMMARY, &p, &got, &found, err);
	if (r == 0)
		*summary_seq = got ? found : 0;
	return r;
}

int32_t my_tx_marks(my_conn *c, const memd_scope *scope, const my_tx *t, int64_t first,
		    memd_error *err)
{
	my_stmt *s = NULL;
	my_params p;
	int32_t r = 0;

	if (t->hidden > 0) {
		my_params_init(&p);
		my_param_i64(&p, first);
		my_param_i64(&p, MEMD_FEED_HIDE);
		my_param_scope(&p, scope, 1);
		my_param_i64(&p, t->stamp);
		my_param_text(&p, t->op->id);
		my_param_i64(&p, t->hidden_from_seq);
		r = my_exec(c, &SQL_TX_MARK_HIDDEN, &p, &s, err);
		if (r == 0 && my_affected(s) != (uint64_t)t->hidden)
			r = memd_error_set(err, MEMD_EIO, 0,
					   "mysql: %llu HIDE records for %lld hidden events",
					   (unsigned long long)my_affected(s), (long long)t->hidden);
	}
	if (r == 0 && t->unhidden > 0) {
		/* Now the visible events from the lowest one shown again on
		 * are exactly those shown again: the target hid everything
		 * visible from there and its own events are hidden now. */
		my_params_init(&p);
		my_param_i64(&p, first + t->hidden);
		my_param_i64(&p, MEMD_FEED_EVENT);
		my_param_scope(&p, scope, 1);
		my_param_i64(&p, t->shown_from_seq);
		r = my_exec(c, &SQL_TX_MARK_SHOWN, &p, &s, err);
		if (r == 0 && my_affected(s) != (uint64_t)t->unhidden)
			r = memd_error_set(err, MEMD_EIO, 0,
					   "mysql: %llu EVENT records for %lld events shown again",
					   (unsigned long long)my_affected(s), (long long)t->unhidden);
	}
	return r;
}

int32_t my_tx_record(my_conn *c, const memd_scope *scope, const my_tx *t, int64_t version,
		     int64_t now_us, int64_t first_seq, int64_t last_seq, memd_error *err)
{
	const memd_transcript_op *op = t->op;
	int undo = op->kind == MEMD_OP_UNDO;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, scope, 1);
	my_param_text(&p, op->id);
	my_param_i64(&p, op->kind);
	my_param_i64(&p, now_us);
	my_param_i64(&p, version);
	my_param_i64(&p, undo ? 0 : op->hide_from_seq);
	my_param_i64(&p, first_seq);
	my_param_i64(&p, last_seq);
	my_param_i64(&p, t->hidden);
	my_param_i64(&p, t->unhidden);
	my_param_text(&p, undo ? op->undo_id : NULL);
	r = my_exec(c, &SQL_OP_INSERT, &p, NULL, err);
	if (r < 0 || !undo)
		return r;
	my_params_init(&p);
	my_param_text(&p, op->id);
	my_param_scope(&p, scope, 1);
	my_param_text(&p, op->undo_id);
	return my_exec(c, &SQL_OP_UNDONE, &p, NULL, err);
}

/* ---- operation_list, operation_get ------------------------------------ */

typedef struct op_ctx {
	my_store *store;
	const memd_call *call;
	const memd_scope *scope;
	const char *id;            /* operation_get; NULL = list */
	uint32_t limit;
	const memd_operation_sink *out;
} op_ctx;

/* my_row_fn of operation_list and operation_get: the operation of s's
 * current row to ud, a const memd_operation_sink *. */
static int32_t op_row(const my_stmt *s, void *ud, memd_error *err)
{
	const memd_operation_sink *out = ud;
	memd_operation o;

	op_from_row(s, &o);
	return my_sink_result(out->operation(out->userdata, &o), "operation", err);
}

static int32_t op_body(my_conn *c, void *arg, memd_error *err)
{
	op_ctx *x = arg;
	uint64_t n = 0;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, x->scope, 1);
	if (x->id)
		my_param_text(&p, x->id);
	else
		my_param_u64(&p, x->limit ? x->limit : MY_NO_LIMIT);
	r = my_exec(c, x->id ? &SQL_OP_GET : &SQL_OP_LIST, &p, &s, err);
	r = my_fetch_deliver(x->store, x->call, c, s, r, op_row, (void *)x->out, &n, err);
	if (r == 0 && n == 0 && x->id)
		return memd_error_set(err, MEMD_ENOTFOUND, 0,
				      "session '%.64s' has no operation '%.64s'",
				      x->scope->session, x->id);
	if (r == 0 && n == 0) {
		int exists = 0;
		r = my_session_exists(c, x->scope, &exists, err);
		if (r == 0 && !exists)
			r = memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
					   x->scope->session);
	}
	return r;
}

int32_t my_operation_list(void *inst, const memd_call *call, const memd_scope *scope,
			  uint32_t limit, const memd_operation_sink *out, memd_error *err)
{
	op_ctx x = { .store = inst, .call = call, .scope = scope, .limit = limit, .out = out };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!out || !out->operation)
		return memd_error_set(err, MEMD_EINVAL, 0, "operation sink is missing");
	return my_run(inst, call, MY_AUTOCOMMIT, op_body, &x, err);
}

int32_t my_operation_get(void *inst, const memd_call *call, const memd_scope *scope,
			 const char *id, const memd_operation_sink *out, memd_error *err)
{
	op_ctx x = { .store = inst, .call = call, .scope = scope, .id = id, .out = out };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r == 0)
		r = pu_check_id("operation id", id, err);
	if (r < 0)
		return r;
	if (!out || !out->operation)
		return memd_error_set(err, MEMD_EINVAL, 0, "operation sink is missing");
	return my_run(inst, call, MY_AUTOCOMMIT, op_body, &x, err);
}

/* ---- state_history ---------------------------------------------------- */

typedef struct history_ctx {
	my_store *store;
	const memd_call *call;
	const memd_scope *scope;
	const memd_state_history_query *q;
	const memd_state_change_sink *out;
} history_ctx;

static int32_t history_body(my_conn *c, void *arg, memd_error *err)
{
	history_ctx *x = arg;
	const memd_state_history_query *q = x->q;
	/* A keyset from version 0 without a key is "from the first". */
	int keyset = q->after_version > 0 || q->after_key;
	uint64_t n = 0;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, x->scope, 1);
	if (keyset) {
		my_param_i64(&p, q->after_version);
		my_param_i64(&p, q->after_version);
		/* Without a key, strictly after after_version: name > NULL
		 * is never true. */
		my_param_text(&p, q->after_key);
	}
	my_param_i64(&p, q->from_seq);
	my_param_u64(&p, q->limit ? q->limit : MY_NO_LIMIT);
	r = my_exec(c, keyset ? &SQL_HISTORY_AFTER : &SQL_HISTORY_FROM_SEQ, &p, &s, err);
	while (r == 0 && (r = my_fetch(c, s, err)) == 1) {
		memd_state_change ch = { .struct_size = sizeof(ch) };
		ch.version = my_col_i64(s, 0);
		ch.seq = my_col_i64(s, 1);
		ch.key = my_col_text(s, 2);
		ch.old_json = my_col_text(s, 3);
		ch.new_json = my_col_text(s, 4);
		ch.at_us = my_col_i64(s, 5);
		ch.operation = my_col_text(s, 6);
		r = my_sink_result(x->out->change(x->out->userdata, &ch), "state change", err);
		if (r == 0 && ++n % MY_CHECK_EVERY == 0)
			r = my_call_check(x->store, x->call, err);
	}
	my_done(s);
	if (r > 0)
		return 0;
	if (r == 0 && n == 0) {
		int exists = 0;
		r = my_session_exists(c, x->scope, &exists, err);
		if (r == 0 && !exists)
			r = memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
					   x->scope->session);
	}
	return r;
}

int32_t my_state_history(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_state_history_query *q, const memd_state_change_sink *out,
			 memd_error *err)
{
	history_ctx x = { .store = inst, .call = call, .scope = scope, .q = q, .out = out };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!q || !out || !out->change)
		return memd_error_set(err, MEMD_EINVAL, 0, "state history query or sink is missing");
	if (q->after_version < 0 || q->from_seq < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "state history bounds must not be negative");
	return my_run(inst, call, MY_AUTOCOMMIT, history_body, &x, err);
}
