/* SPDX-License-Identifier: MIT */
#include "sq_transcripts.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_util.h"
#include "sq_feed.h"

#define ROLE_SUMMARY "summary"
#define ROWS_INITIAL 64
#define FROM_FIRST (-1) /* below every version, for "version > ?" */

#define OP_COLS \
	"id, kind, created_us, version, hide_from_seq, first_seq, last_seq, hidden_count," \
	" unhidden_count, undo_of, undone_by"

static const sq_sql SQL_OP_INSERT = { SQ_ST_OP_INSERT,
	"INSERT INTO operations (app, user, session, " OP_COLS ")"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, NULL)" };
static const sq_sql SQL_OP_GET = { SQ_ST_OP_GET,
	"SELECT " OP_COLS " FROM operations"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND id = ?4" };
static const sq_sql SQL_OP_LIST = { SQ_ST_OP_LIST,
	"SELECT " OP_COLS " FROM operations INDEXED BY operations_by_version"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 ORDER BY version DESC" };
static const sq_sql SQL_OP_UNDONE = { SQ_ST_OP_UNDONE,
	"UPDATE operations SET undone_by = ?5"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND id = ?4" };
/* The visible events of seq ?4..?5, in seq order. */
static const sq_sql SQL_HIDE_SCAN = { SQ_ST_HIDE_SCAN,
	"SELECT position, seq, role, operation FROM events INDEXED BY events_by_seq"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND seq >= ?4 AND seq <= ?5"
	" AND hidden_us = 0 ORDER BY seq" };
static const sq_sql SQL_HIDE_ROW = { SQ_ST_HIDE_ROW,
	"UPDATE events SET hidden_us = ?2, hidden_by = ?3, hidden_kind = ?4 WHERE position = ?1" };
/* The events hidden by ?5 from seq ?4 on, in seq order. */
static const sq_sql SQL_UNHIDE_SCAN = { SQ_ST_UNHIDE_SCAN,
	"SELECT position, seq, role, hidden_by FROM events INDEXED BY events_hidden"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND seq >= ?4 AND hidden_us <> 0"
	" ORDER BY seq" };
/* Visible again, at a new feed position (a new EVENT record). */
static const sq_sql SQL_UNHIDE_ROW = { SQ_ST_UNHIDE_ROW,
	"UPDATE events SET position = ?2, hidden_us = 0, hidden_by = NULL, hidden_kind = 0"
	" WHERE position = ?1" };
static const sq_sql SQL_FEED_HIDE_INSERT = { SQ_ST_FEED_HIDE_INSERT,
	"INSERT INTO feed_hides (position, app, user, session, event)"
	" SELECT ?1, app, user, session, id FROM events WHERE position = ?2" };
static const sq_sql SQL_SUMMARY_NEWEST = { SQ_ST_SUMMARY_NEWEST,
	"SELECT seq FROM events INDEXED BY events_summaries"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND role = 'summary' AND hidden_us = 0"
	" ORDER BY seq DESC LIMIT 1" };
/* state_history walks the session's changes in (version, key) order from
 * the keyset ?4, ?5, or from the first version whose seq reaches from_seq
 * when that is further on: seqs never decrease with versions, so the
 * changes with seq >= from_seq are a suffix, and state_history_by_seq
 * finds its first version in one step (HISTORY_FROM). */
#define HISTORY_COLS "version, seq, key, old, new, at_us, operation"
#define HISTORY_FROM_SEQ " AND seq >= ?6"
static const sq_sql SQL_HISTORY_FROM = { SQ_ST_HISTORY_FROM,
	"SELECT version FROM state_history INDEXED BY state_history_by_seq"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND seq >= ?4 ORDER BY seq, version"
	" LIMIT 1" };
static const sq_sql SQL_HISTORY_LIST = { SQ_ST_HISTORY_LIST,
	"SELECT " HISTORY_COLS " FROM state_history"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND version > ?4" HISTORY_FROM_SEQ
	" ORDER BY version, key" };
static const sq_sql SQL_HISTORY_LIST_AFTER = { SQ_ST_HISTORY_LIST_AFTER,
	"SELECT " HISTORY_COLS " FROM state_history"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND (version, key) > (?4, ?5)"
	HISTORY_FROM_SEQ " ORDER BY version, key" };

static int is_summary(const char *role)
{
	return role && strcmp(role, ROLE_SUMMARY) == 0;
}

/* ---- rows to change --------------------------------------------------- */

/* The events a scan picked, changed after the scan is done. */
typedef struct pick {
	int64_t position;
	int64_t seq;
	int summary;
} pick;

typedef struct picks {
	pick *v;
	size_t n, cap;
} picks;

static int32_t picks_add(picks *p, int64_t position, int64_t seq, int summary, memd_error *err)
{
	if (p->n == p->cap) {
		size_t ncap = p->cap ? p->cap * 2 : ROWS_INITIAL;
		pick *grown = realloc(p->v, ncap * sizeof(*grown));
		if (!grown)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		p->v = grown;
		p->cap = ncap;
	}
	p->v[p->n++] = (pick){ .position = position, .seq = seq, .summary = summary };
	return 0;
}

/* Run a scan (bound by the caller) and pick the rows whose fourth column
 * equals match (NULL: every row). */
static int32_t scan_pick(sq_conn *c, const memd_call *call, sqlite3_stmt *st, const char *match,
			 picks *out, memd_error *err)
{
	uint64_t stepped = 0;
	int32_t r = 0;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *col = sq_col_text(st, 3);
		stepped++;
		if (match && !(col && strcmp(col, match) == 0))
			continue;
		r = picks_add(out, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
			      is_summary(sq_col_text(st, 2)), err);
		if (r < 0)
			break;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "scan the events to change");
	sq_count_rows(call, st, stepped);
	sq_stmt_done(st);
	return r;
}

/* Hide the visible events of seq from..to (those appended by only_op, if
 * set): hidden_us = now_us, hidden_by = by, hidden_kind = kind, one HIDE
 * feed record each. Adds to *ret_hidden and head's message_count. */
static int32_t hide_range(sq_conn *c, const memd_call *call, const memd_scope *scope,
			  int64_t from, int64_t to, const char *only_op, const char *by,
			  uint32_t kind, int64_t now_us, sq_session_head *head, int64_t *ret_hidden,
			  memd_error *err)
{
	picks p = { 0 };
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_HIDE_SCAN, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 4, from);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 5, to);
	if (rc != SQLITE_OK) {
		sq_stmt_done(st);
		return sq_fail(c, rc, err, "scan the events to hide");
	}
	r = scan_pick(c, call, st, only_op, &p, err);
	for (size_t i = 0; r == 0 && i < p.n; i++) {
		int64_t pos = 0;

		r = sq_stmt(c, &SQL_HIDE_ROW, &st, err);
		if (r < 0)
			break;
		rc = sqlite3_bind_int64(st, 1, p.v[i].position);
		if (rc == SQLITE_OK)
			rc = sqlite3_bind_int64(st, 2, now_us);
		if (rc == SQLITE_OK)
			rc = sq_bind_text(st, 3, by);
		if (rc == SQLITE_OK)
			rc = sqlite3_bind_int64(st, 4, kind);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(st);
		sq_stmt_done(st);
		if (rc != SQLITE_DONE) {
			r = sq_fail(c, rc, err, "hide event %lld", (long long)p.v[i].seq);
			break;
		}
		r = sq_feed_alloc(c, 1, &pos, err);
		if (r == 0)
			r = sq_stmt(c, &SQL_FEED_HIDE_INSERT, &st, err);
		if (r < 0)
			break;
		rc = sqlite3_bind_int64(st, 1, pos);
		if (rc == SQLITE_OK)
			rc = sqlite3_bind_int64(st, 2, p.v[i].position);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(st);
		sq_stmt_done(st);
		if (rc != SQLITE_DONE) {
			r = sq_fail(c, rc, err, "add the HIDE record of event %lld",
				    (long long)p.v[i].seq);
			break;
		}
		(*ret_hidden)++;
		if (!p.v[i].summary)
			head->message_count--;
	}
	free(p.v);
	return r;
}

/* Make the events hidden by `by` with seq >= from visible again, each at a
 * new feed position. Adds to *ret_unhidden and head's message_count. */
static int32_t unhide_by(sq_conn *c, const memd_call *call, const memd_scope *scope,
			 int64_t from, const char *by, sq_session_head *head,
			 int64_t *ret_unhidden, memd_error *err)
{
	picks p = { 0 };
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_UNHIDE_SCAN, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 4, from);
	if (rc != SQLITE_OK) {
		sq_stmt_done(st);
		return sq_fail(c, rc, err, "scan the events to unhide");
	}
	r = scan_pick(c, call, st, by, &p, err);
	for (size_t i = 0; r == 0 && i < p.n; i++) {
		int64_t pos = 0;

		r = sq_feed_alloc(c, 1, &pos, err);
		if (r == 0)
			r = sq_stmt(c, &SQL_UNHIDE_ROW, &st, err);
		if (r < 0)
			break;
		rc = sqlite3_bind_int64(st, 1, p.v[i].position);
		if (rc == SQLITE_OK)
			rc = sqlite3_bind_int64(st, 2, pos);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(st);
		sq_stmt_done(st);
		if (rc != SQLITE_DONE) {
			r = sq_fail(c, rc, err, "unhide event %lld", (long long)p.v[i].seq);
			break;
		}
		(*ret_unhidden)++;
		if (!p.v[i].summary)
			head->message_count++;
	}
	free(p.v);
	return r;
}

/* head->summary_seq = the newest visible summary (0 = none). */
static int32_t newest_summary(sq_conn *c, const memd_call *call, const memd_scope *scope,
			      sq_session_head *head, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_SUMMARY_NEWEST, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		head->summary_seq = sqlite3_column_int64(st, 0);
		sq_count_rows(call, st, 1);
	} else if (rc == SQLITE_DONE) {
		head->summary_seq = 0;
	} else {
		r = sq_fail(c, rc, err, "find the newest summary of '%.64s'", scope->session);
	}
	sq_stmt_done(st);
	return r;
}

/* ---- operation records ------------------------------------------------ */

static void op_from_row(sqlite3_stmt *st, memd_operation *o)
{
	memset(o, 0, sizeof(*o));
	o->struct_size = sizeof(*o);
	o->id = sq_col_text(st, 0);
	o->kind = (uint32_t)sqlite3_column_int64(st, 1);
	o->created_us = sqlite3_column_int64(st, 2);
	o->version = sqlite3_column_int64(st, 3);
	o->hide_from_seq = sqlite3_column_int64(st, 4);
	o->first_seq = sqlite3_column_int64(st, 5);
	o->last_seq = sqlite3_column_int64(st, 6);
	o->hidden_count = sqlite3_column_int64(st, 7);
	o->unhidden_count = sqlite3_column_int64(st, 8);
	o->undo_of = sq_col_text(st, 9);
	o->undone_by = sq_col_text(st, 10);
}

/* Look operation id up: 1 and *o (strings borrowed from the statement,
 * which the caller finishes with sq_stmt_done(*ret_st)) when it exists,
 * else 0. */
static int32_t op_find(sq_conn *c, const memd_call *call, const memd_scope *scope, const char *id,
		       memd_operation *o, sqlite3_stmt **ret_st, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_OP_GET, &st, err);
	int rc;

	if (r < 0)
		return r;
	*ret_st = st;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		op_from_row(st, o);
		sq_count_rows(call, st, 1);
		return 1;
	}
	if (rc == SQLITE_DONE)
		return 0;
	return sq_fail(c, rc, err, "read operation '%.64s'", id);
}

/* The lowest seq an UNDO of target may have to unhide: a hiding op hid
 * from its hide_from_seq on; an UNDO hid what its own target appended. */
static int32_t undo_floor(sq_conn *c, const memd_call *call, const memd_scope *scope,
			  const memd_operation *target, int64_t *ret, memd_error *err)
{
	memd_operation inner;
	sqlite3_stmt *st = NULL;
	int32_t r;

	if (target->kind != MEMD_OP_UNDO) {
		*ret = target->hide_from_seq;
		return 0;
	}
	if (!target->undo_of) {
		*ret = INT64_MAX;
		return 0;
	}
	r = op_find(c, call, scope, target->undo_of, &inner, &st, err);
	if (r >= 0) {
		*ret = r == 1 && inner.first_seq > 0 ? inner.first_seq : INT64_MAX;
		r = 0;
	}
	sq_stmt_done(st);
	return r;
}

static int32_t mark_undone(sq_conn *c, const memd_scope *scope, const char *target,
			   const char *by, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_OP_UNDONE, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, target);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 5, by);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "mark operation '%.64s' undone", target);
	sq_stmt_done(st);
	return r;
}

static int32_t undo(sq_conn *c, const memd_call *call, const memd_scope *scope,
		    const memd_transcript_op *op, int64_t now_us, sq_session_head *head,
		    sq_op_done *done, memd_error *err)
{
	memd_operation t;
	sqlite3_stmt *st = NULL;
	int64_t floor = 0, first = 0, last = 0;
	int32_t r = op_find(c, call, scope, op->undo_id, &t, &st, err);

	if (r == 0)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0,
				   "session '%.64s' has no operation '%.64s' to undo",
				   scope->session, op->undo_id);
	else if (r == 1 && t.undone_by)
		r = memd_error_set(err, MEMD_ECONFLICT, 0,
				   "operation '%.64s' was undone already (by '%.64s')",
				   op->undo_id, t.undone_by);
	else if (r == 1 && t.version != head->version)
		r = memd_error_set(err, MEMD_ECONFLICT, 0,
				   "operation '%.64s' left version %lld; the session is at %lld "
				   "(written since)",
				   op->undo_id, (long long)t.version, (long long)head->version);
	else if (r == 1) {
		first = t.first_seq;
		last = t.last_seq;
		r = undo_floor(c, call, scope, &t, &floor, err);
	}
	sq_stmt_done(st);
	if (r < 0)
		return r;
	r = unhide_by(c, call, scope, floor, op->undo_id, head, &done->unhidden_count, err);
	if (r == 0 && first > 0)
		r = hide_range(c, call, scope, first, last, op->undo_id, op->id, MEMD_OP_UNDO,
			       now_us, head, &done->hidden_count, err);
	if (r == 0)
		r = mark_undone(c, scope, op->undo_id, op->id, err);
	return r;
}

int32_t sq_op_apply(sq_conn *c, const memd_call *call, const memd_scope *scope,
		    const memd_transcript_op *op, int64_t now_us, sq_session_head *head,
		    sq_op_done *ret, memd_error *err)
{
	memd_operation existing;
	sqlite3_stmt *st = NULL;
	int32_t r = op_find(c, call, scope, op->id, &existing, &st, err);

	sq_stmt_done(st);
	if (r < 0)
		return r;
	if (r == 1)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "session '%.64s' has an operation '%.64s' already",
				      scope->session, op->id);
	memset(ret, 0, sizeof(*ret));
	if (op->kind == MEMD_OP_UNDO)
		r = undo(c, call, scope, op, now_us, head, ret, err);
	else
		r = hide_range(c, call, scope, op->hide_from_seq, INT64_MAX, NULL, op->id, op->kind,
			       now_us, head, &ret->hidden_count, err);
	if (r == 0 && (ret->hidden_count || ret->unhidden_count))
		r = newest_summary(c, call, scope, head, err);
	return r;
}

int32_t sq_op_record(sq_conn *c, const memd_scope *scope, const memd_transcript_op *op,
		     int64_t now_us, int64_t version, int64_t first_seq, int64_t last_seq,
		     const sq_op_done *done, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_OP_INSERT, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, op->id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 5, op->kind);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 6, now_us);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 7, version);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 8, op->kind == MEMD_OP_UNDO ? 0 : op->hide_from_seq);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 9, first_seq);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 10, last_seq);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 11, done->hidden_count);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 12, done->unhidden_count);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 13, op->kind == MEMD_OP_UNDO ? op->undo_id : NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if ((rc & 0xff) == SQLITE_CONSTRAINT)
		r = memd_error_set(err, MEMD_ECONFLICT, 0, "operation '%.64s' exists already",
				   op->id);
	else if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "record operation '%.64s'", op->id);
	sq_stmt_done(st);
	return r;
}

/* ---- reads ------------------------------------------------------------ */

int32_t sq_operation_list(void *inst, const memd_call *call, const memd_scope *scope,
			  uint32_t limit, const memd_operation_sink *out, memd_error *err)
{
	sq_store *store = inst;
	sq_session_head head;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	uint64_t stepped = 0;
	int32_t r = pu_check_scope(scope, 1, err);
	int rc;

	if (r < 0)
		return r;
	if (!out || !out->operation)
		return memd_error_set(err, MEMD_EINVAL, 0, "operation sink is missing");
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_session_head_get(c, call, scope, &head, err);
	if (r == 0)
		r = sq_stmt(c, &SQL_OP_LIST, &st, err);
	if (r < 0)
		goto out;
	rc = sq_bind_scope(st, scope, 1);
	while (rc == SQLITE_OK && (limit == 0 || stepped < limit)) {
		memd_operation o;

		rc = sqlite3_step(st);
		if (rc != SQLITE_ROW)
			break;
		rc = SQLITE_OK;
		stepped++;
		op_from_row(st, &o);
		r = sq_sink_result(out->operation(out->userdata, &o), "operation", err);
		if (r != 0)
			break;
	}
	if (r > 0)
		r = 0;
	else if (r == 0 && rc != SQLITE_OK && rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "list the operations of '%.64s'", scope->session);
	sq_count_rows(call, st, stepped);
	sq_stmt_done(st);
out:
	sq_read_end(store, c);
	return r;
}

int32_t sq_operation_get(void *inst, const memd_call *call, const memd_scope *scope,
			 const char *id, const memd_operation_sink *out, memd_error *err)
{
	sq_store *store = inst;
	memd_operation o;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	int32_t r = pu_check_scope(scope, 1, err);

	if (r == 0)
		r = pu_check_id("operation id", id, err);
	if (r < 0)
		return r;
	if (!out || !out->operation)
		return memd_error_set(err, MEMD_EINVAL, 0, "operation sink is missing");
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = op_find(c, call, scope, id, &o, &st, err);
	if (r == 1)
		r = sq_sink_result(out->operation(out->userdata, &o), "operation", err);
	else if (r == 0)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "operation '%.64s' not found", id);
	sq_stmt_done(st);
	sq_read_end(store, c);
	return r > 0 ? 0 : r;
}

/* The first version of the session's changes with seq >= from_seq in
 * *ret (0 and *ret_none set when there is none). */
static int32_t history_from(sq_conn *c, const memd_call *call, const memd_scope *scope,
			    int64_t from_seq, int64_t *ret, int *ret_none, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_HISTORY_FROM, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 4, from_seq);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	*ret_none = rc == SQLITE_DONE;
	if (rc == SQLITE_ROW) {
		*ret = sqlite3_column_int64(st, 0);
		sq_count_rows(call, st, 1);
	} else if (rc != SQLITE_DONE) {
		r = sq_fail(c, rc, err, "find the state history of '%.64s' from seq %lld",
			    scope->session, (long long)from_seq);
	}
	sq_stmt_done(st);
	return r;
}

/* sq_row_fn of sq_state_history: the change of st's current row to ud, a
 * const memd_state_change_sink *. */
static int32_t change_row(sqlite3_stmt *st, void *ud, memd_error *err)
{
	const memd_state_change_sink *out = ud;
	memd_state_change ch = { .struct_size = sizeof(ch) };

	ch.version = sqlite3_column_int64(st, 0);
	ch.seq = sqlite3_column_int64(st, 1);
	ch.key = sq_col_text(st, 2);
	ch.old_json = sq_col_text(st, 3);
	ch.new_json = sq_col_text(st, 4);
	ch.at_us = sqlite3_column_int64(st, 5);
	ch.operation = sq_col_text(st, 6);
	return sq_sink_result(out->change(out->userdata, &ch), "state change", err);
}

int32_t sq_state_history(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_state_history_query *q, const memd_state_change_sink *out,
			 memd_error *err)
{
	sq_store *store = inst;
	sq_session_head head;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	/* The keyset to start after: the query's, or the version before the
	 * from_seq suffix when that is further on. */
	int64_t after = 0, from_version = 0;
	const char *after_key = NULL;
	int none = 0;
	int32_t r = pu_check_scope(scope, 1, err);
	int rc;

	if (r < 0)
		return r;
	if (!q || q->struct_size < sizeof(*q) || !out || !out->change)
		return memd_error_set(err, MEMD_EINVAL, 0, "state history query or sink is missing");
	if (q->after_version < 0 || q->from_seq < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "state history after_version and from_seq must be >= 0");
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_session_head_get(c, call, scope, &head, err);
	/* after_version 0 (no key) is "from the first": the creation's
	 * changes have version 0. */
	after = q->after_version || q->after_key ? q->after_version : FROM_FIRST;
	after_key = q->after_key;
	if (r == 0 && q->from_seq > 0)
		r = history_from(c, call, scope, q->from_seq, &from_version, &none, err);
	if (r < 0 || none)
		goto out;
	if (q->from_seq > 0 && (after_key ? from_version > after : from_version - 1 > after)) {
		after = from_version - 1;
		after_key = NULL;
	}
	r = sq_stmt(c, after_key ? &SQL_HISTORY_LIST_AFTER : &SQL_HISTORY_LIST, &st, err);
	if (r < 0)
		goto out;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 4, after);
	if (rc == SQLITE_OK && after_key)
		rc = sq_bind_text(st, 5, after_key);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 6, q->from_seq);
	r = sq_step_deliver(store, call, c, st, rc, q->limit, change_row, (void *)out, err,
			    "read the state history of '%.64s'", scope->session);
	sq_stmt_done(st);
out:
	sq_read_end(store, c);
	return r;
}
