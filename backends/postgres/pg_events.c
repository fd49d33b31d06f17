/* SPDX-License-Identifier: MIT */
#include "pg_events.h"

#include <stdlib.h>
#include <string.h>

#include "pg_sessions.h"
#include "pg_state.h"
#include "plugin_util.h"
#include "pu_group.h"

#define ROLE_SUMMARY "summary"
#define SEQ_UNBOUNDED INT64_MAX
#define IDS_PER_LOOKUP 32 /* id parameters of SQL_EVENT_SEQS_BY_ID */
#define ROLE_FILTER_ALL "0"
#define ROLE_FILTER_NO_SUMMARY "1"
#define ROLE_FILTER_ONLY_SUMMARY "2"

static const pg_sql SQL_BEGIN = { PG_ST_BEGIN, 0, "BEGIN" };
static const pg_sql SQL_BEGIN_READ = { PG_ST_BEGIN_READ, 0,
	"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" };
static const pg_sql SQL_COMMIT = { PG_ST_COMMIT, 0, "COMMIT" };
static const pg_sql SQL_ROLLBACK = { PG_ST_ROLLBACK, 0, "ROLLBACK" };

/* Feed positions. A sequence would not do: transactions commit in another
 * order than they call nextval, so a feed reader could read position 7,
 * move its cursor past it, and only later see position 6 commit. Instead
 * positions come from the single feed_counter row, advanced by every
 * writer as its last step before COMMIT (after its session and state row
 * locks, so the order of locks is the same everywhere). The row lock is
 * held until the transaction ends, and PostgreSQL makes a transaction
 * visible before it releases its locks, so the next writer gets its
 * positions only after the previous one committed (or rolled back, which
 * also undoes its advance): positions become visible strictly in order and
 * a reader never sees a hole that fills later. The cost is that the feed
 * step of writers is serialized; group commit puts many appends behind
 * one such step. */
static const pg_sql SQL_FEED_ALLOC = { PG_ST_FEED_ALLOC, 1,
	"UPDATE feed_counter SET last = last + $1::bigint WHERE id = 1" };
/* $6 counts back from the counter the transaction has just advanced. */
static const pg_sql SQL_EVENT_INSERT = { PG_ST_EVENT_INSERT, 18,
	"INSERT INTO events (app, \"user\", session, seq, id, position, invocation_id, author,"
	" role, branch, content, actions, metadata, timestamp_us, text, tokens, covers_seq,"
	" operation)"
	" VALUES ($1, $2, $3, $4, $5, (SELECT last FROM feed_counter WHERE id = 1) - $6::bigint,"
	" $7, $8, $9, $10, $11::jsonb, $12::jsonb, $13::jsonb, $14, $15, $16, $17, $18)" };
static const pg_sql SQL_EVENT_SEQS_BY_ID = { PG_ST_EVENT_SEQS_BY_ID, 3 + IDS_PER_LOOKUP,
	"SELECT id, seq FROM events WHERE app = $1 AND \"user\" = $2 AND session = $3"
	" AND id IN ($4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,"
	" $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35)" };

/* events_load: every query is a range of one of the session's indexes,
 * $4 < seq < $5, in the order wanted, so the server stops at the limit
 * ($6; NULL = none). Visible events (the default) range over the partial
 * indexes of visible rows (events_visible, events_visible_summaries), so
 * hidden rows are never read; with MEMD_EVQ_INCLUDE_HIDDEN the primary
 * key's range. The roles mask is one fixed filter: $7 true = every role,
 * else role IN ($8..$12), the unused slots NULL. */
#define EVENTS_WHERE " WHERE app = $1 AND \"user\" = $2 AND session = $3 AND seq > $4 AND seq < $5" \
	" AND ($7::boolean OR role IN ($8::text, $9::text, $10::text, $11::text, $12::text))"
#define EVENTS_N 12
#define VISIBLE " AND hidden_us = 0"
#define ONLY_SUMMARIES " AND role = 'summary'"
#define NO_SUMMARIES " AND role <> 'summary'"
#define EVENTS_SQL(id, filter, order) \
	{ id, EVENTS_N, "SELECT " PG_EVENT_COLS " FROM events" EVENTS_WHERE filter \
	  " ORDER BY seq " order " LIMIT $6" }
/* [include hidden][kind: all, summaries, not summaries][newest] */
static const pg_sql SQL_LOAD[2][3][2] = {
	{ { EVENTS_SQL(PG_ST_EVENTS_ASC, VISIBLE, "ASC"),
	    EVENTS_SQL(PG_ST_EVENTS_DESC, VISIBLE, "DESC") },
	  { EVENTS_SQL(PG_ST_SUMMARIES_ASC, VISIBLE ONLY_SUMMARIES, "ASC"),
	    EVENTS_SQL(PG_ST_SUMMARIES_DESC, VISIBLE ONLY_SUMMARIES, "DESC") },
	  { EVENTS_SQL(PG_ST_NONSUMMARIES_ASC, VISIBLE NO_SUMMARIES, "ASC"),
	    EVENTS_SQL(PG_ST_NONSUMMARIES_DESC, VISIBLE NO_SUMMARIES, "DESC") } },
	{ { EVENTS_SQL(PG_ST_EVENTS_ALL_ASC, "", "ASC"),
	    EVENTS_SQL(PG_ST_EVENTS_ALL_DESC, "", "DESC") },
	  { EVENTS_SQL(PG_ST_SUMMARIES_ALL_ASC, ONLY_SUMMARIES, "ASC"),
	    EVENTS_SQL(PG_ST_SUMMARIES_ALL_DESC, ONLY_SUMMARIES, "DESC") },
	  { EVENTS_SQL(PG_ST_NONSUMMARIES_ALL_ASC, NO_SUMMARIES, "ASC"),
	    EVENTS_SQL(PG_ST_NONSUMMARIES_ALL_DESC, NO_SUMMARIES, "DESC") } },
};
/* after_time: $13 the time bound, $14 the role filter (ROLE_FILTER_*),
 * $15 include hidden events. */
#define EVENTS_BY_TIME_WHERE EVENTS_WHERE " AND timestamp_us > $13" \
	" AND ($14::integer = 0 OR ($14::integer = 1) = (role <> 'summary'))" \
	" AND ($15::boolean OR hidden_us = 0)"
static const pg_sql SQL_EVENTS_BY_TIME_ASC = { PG_ST_EVENTS_BY_TIME_ASC, 15,
	"SELECT " PG_EVENT_COLS " FROM events" EVENTS_BY_TIME_WHERE " ORDER BY seq ASC LIMIT $6" };
static const pg_sql SQL_EVENTS_BY_TIME_DESC = { PG_ST_EVENTS_BY_TIME_DESC, 15,
	"SELECT " PG_EVENT_COLS " FROM events" EVENTS_BY_TIME_WHERE " ORDER BY seq DESC LIMIT $6" };

/* ---- transcript operations (in an append's transaction) ------------- */

/* Round 1: the operation's own id (taken?) and the one an undo reverses. */
static const pg_sql SQL_OP_LOOKUP = { PG_ST_OP_LOOKUP, 5,
	"SELECT id, version, first_seq, last_seq, hidden_count, unhidden_count, undone_by"
	" FROM operations WHERE app = $1 AND \"user\" = $2 AND session = $3"
	" AND id IN ($4::text, $5::text)" };
/* Round 2: the record (its counts grow with the statements below). */
static const pg_sql SQL_OP_INSERT = { PG_ST_OP_INSERT, 11,
	"INSERT INTO operations (app, \"user\", session, id, kind, created_us, version,"
	" hide_from_seq, first_seq, last_seq, undo_of)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)" };
/* Hide the visible events $4 <= seq <= $5 (of operation $9 only, unless
 * NULL) as hidden_us $6 by operation $7 of kind $8: a walk of the primary
 * key from $4, nothing before. Each hidden event gets a HIDE record at
 * the next feed positions (in seq order; the feed counter's row lock is
 * the transaction's last lock, as for events and DELETE records), the
 * session's message_count and the operation's hidden_count follow. The
 * result is the count. */
static const pg_sql SQL_OP_HIDE = { PG_ST_OP_HIDE, 9,
	"WITH h AS (UPDATE events SET hidden_us = $6, hidden_by = $7, hidden_kind = $8"
	"   WHERE app = $1 AND \"user\" = $2 AND session = $3 AND seq >= $4 AND seq <= $5"
	"   AND hidden_us = 0 AND ($9::text IS NULL OR operation = $9::text)"
	"   RETURNING seq, role),"
	" n AS (SELECT count(*) AS n, count(*) FILTER (WHERE role <> 'summary') AS m FROM h),"
	" c AS (UPDATE feed_counter SET last = last + (SELECT n FROM n)"
	"   WHERE id = 1 AND (SELECT n FROM n) > 0 RETURNING last),"
	" f AS (INSERT INTO feed_hides (position, app, \"user\", session, seq)"
	"   SELECT (SELECT last FROM c) - (SELECT n FROM n) + row_number() OVER (ORDER BY seq),"
	"   $1, $2, $3, seq FROM h),"
	" s AS (UPDATE sessions SET message_count = message_count - (SELECT m FROM n)"
	"   WHERE app = $1 AND \"user\" = $2 AND id = $3),"
	" o AS (UPDATE operations SET hidden_count = hidden_count + (SELECT n FROM n)"
	"   WHERE app = $1 AND \"user\" = $2 AND session = $3 AND id = $7)"
	" SELECT n FROM n" };
/* Make the events operation $4 hid visible again, each moved to a new
 * feed position (a new EVENT record); message_count and the undo $5's
 * unhidden_count follow. The result is the count. */
static const pg_sql SQL_OP_UNHIDE = { PG_ST_OP_UNHIDE, 5,
	"WITH u AS (SELECT seq, role, row_number() OVER (ORDER BY seq) AS k FROM events"
	"   WHERE app = $1 AND \"user\" = $2 AND session = $3 AND hidden_by = $4 AND hidden_us > 0),"
	" n AS (SELECT count(*) AS n, count(*) FILTER (WHERE role <> 'summary') AS m FROM u),"
	" c AS (UPDATE feed_counter SET last = last + (SELECT n FROM n)"
	"   WHERE id = 1 AND (SELECT n FROM n) > 0 RETURNING last),"
	" e AS (UPDATE events SET hidden_us = 0, hidden_by = NULL, hidden_kind = 0,"
	"   position = (SELECT last FROM c) - (SELECT n FROM n) + u.k FROM u"
	"   WHERE events.app = $1 AND events.\"user\" = $2 AND events.session = $3"
	"   AND events.seq = u.seq),"
	" s AS (UPDATE sessions SET message_count = message_count + (SELECT m FROM n)"
	"   WHERE app = $1 AND \"user\" = $2 AND id = $3),"
	" o AS (UPDATE operations SET unhidden_count = unhidden_count + (SELECT n FROM n)"
	"   WHERE app = $1 AND \"user\" = $2 AND session = $3 AND id = $5)"
	" SELECT n FROM n" };
static const pg_sql SQL_OP_MARK_UNDONE = { PG_ST_OP_MARK_UNDONE, 5,
	"UPDATE operations SET undone_by = $5"
	" WHERE app = $1 AND \"user\" = $2 AND session = $3 AND id = $4" };

void pg_event_from_row(const PGresult *res, int row, int col0, memd_event *e)
{
	memset(e, 0, sizeof(*e));
	e->struct_size = sizeof(*e);
	e->position = pg_get_i64(res, row, col0 + 0);
	e->app = pg_get_text(res, row, col0 + 1);
	e->user = pg_get_text(res, row, col0 + 2);
	e->session = pg_get_text(res, row, col0 + 3);
	e->seq = pg_get_i64(res, row, col0 + 4);
	e->id = pg_get_text(res, row, col0 + 5);
	e->invocation_id = pg_get_text(res, row, col0 + 6);
	e->author = pg_get_text(res, row, col0 + 7);
	e->role = pg_get_text(res, row, col0 + 8);
	e->branch = pg_get_text(res, row, col0 + 9);
	e->content_json = pg_get_text(res, row, col0 + 10);
	e->actions_json = pg_get_text(res, row, col0 + 11);
	e->metadata_json = pg_get_text(res, row, col0 + 12);
	e->timestamp_us = pg_get_i64(res, row, col0 + 13);
	e->text = pg_get_text(res, row, col0 + 14);
	e->tokens = pg_get_i64(res, row, col0 + 15);
	e->covers_seq = pg_get_i64(res, row, col0 + 16);
	e->hidden_us = pg_get_i64(res, row, col0 + 17);
	e->hidden_by = pg_get_text(res, row, col0 + 18);
	e->hidden_kind = (uint32_t)pg_get_i64(res, row, col0 + 19);
	e->operation = pg_get_text(res, row, col0 + 20);
}

static int is_summary(const char *role)
{
	return role && strcmp(role, ROLE_SUMMARY) == 0;
}

/* ---- checks --------------------------------------------------------- */

/* What jsonb cannot hold; the shared checks have run. */
static int32_t check_nul_escapes(const memd_event *e, memd_error *err)
{
	if (pg_json_has_nul_escape(e->content_json) || pg_json_has_nul_escape(e->actions_json) ||
	    pg_json_has_nul_escape(e->metadata_json))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "event '%.64s': PostgreSQL cannot store \\u0000 in JSON",
				      e->id);
	return 0;
}

/* The usage of a (NULL when none, or when a predates it). */
static const memd_usage *append_usage(const memd_append *a)
{
	return PG_HAS(a, usage) ? a->usage : NULL;
}

/* The transcript operation of a (NULL when none, or when a predates it). */
static const memd_transcript_op *append_op(const memd_append *a)
{
	return pu_append_op(a);
}

/* What the shared checks leave to a store: a state_expect_json the
 * state rules accept (no temp: key). */
static int32_t check_op(const memd_transcript_op *op, memd_error *err)
{
	if (!op->state_expect_json || !op->state_expect_json[0])
		return 0;
	return pg_state_check(op->state_expect_json, err);
}

/* Validate the batch before any lock is taken: a bad batch writes nothing.
 * (JSON syntax is checked by the server, inside the transaction.) */
static int32_t check_append(const memd_scope *scope, const memd_append *a,
			    const memd_append_result *res, memd_error *err)
{
	int32_t r = pu_check_append(scope, a, res, err);

	for (uint32_t i = 0; r == 0 && i < a->n_events; i++)
		r = check_nul_escapes(a->events[i], err);
	if (r == 0 && PG_HAS(a, usage))
		r = pg_usage_check(a->usage, err);
	if (r == 0 && append_op(a))
		r = check_op(a->op, err);
	return r < 0 ? r : pg_state_check(a->state_delta_json, err);
}

/* ---- one append inside a group ------------------------------------- */

/* An append as the group commit queue carries it (pu_group.h), with what
 * its group's run keeps of it. */
typedef struct pg_append_req {
	pu_group_req q;            /* first: the queue's pointers convert */
	pg_session_head head;
	size_t lock_at, ids_at;    /* result indexes in round 1 */
	size_t op_at;              /* round 1: the operation lookup */
	size_t hide_at, unhide_at; /* round 2: the counts (NO_RESULT = none) */
	int64_t target_first;      /* UNDO: the events its target appended */
	int64_t target_last;
	int64_t hidden_count;      /* outputs of an operation */
	int64_t unhidden_count;
	char *not_restored;        /* malloc'd JSON array, NULL = none */
} pg_append_req;

#define NO_RESULT SIZE_MAX

static pg_append_req *req_of(pu_group_req *q)
{
	return (pg_append_req *)q;
}

/* Queue the locking read of m's session and the lookups of its ids. */
static int32_t send_checks(pg_conn *c, pg_append_req *m, memd_error *err)
{
	const memd_append *a = m->q.a;
	const memd_scope *scope = m->q.scope;
	int32_t r;

	m->lock_at = pg_n_queued(c);
	r = pg_session_send_lock(c, scope, err);
	m->ids_at = pg_n_queued(c);
	for (uint32_t from = 0; r == 0 && from < a->n_events; from += IDS_PER_LOOKUP) {
		const char *vals[3 + IDS_PER_LOOKUP] = { scope->app, scope->user, scope->session };
		for (uint32_t k = 0; k < IDS_PER_LOOKUP && from + k < a->n_events; k++)
			vals[3 + k] = a->events[from + k]->id;
		r = pg_send(c, &SQL_EVENT_SEQS_BY_ID, vals, err);
	}
	m->op_at = pg_n_queued(c);
	if (r == 0 && append_op(a)) {
		const char *vals[5] = { scope->app, scope->user, scope->session, a->op->id,
					a->op->kind == MEMD_OP_UNDO ? a->op->undo_id : NULL };
		r = pg_send(c, &SQL_OP_LOOKUP, vals, err);
	}
	return r;
}

/* Decide m's operation from its lookup (round 1): MEMD_ECONFLICT if its
 * id is taken; for an undo, MEMD_ENOTFOUND without the target,
 * MEMD_ECONFLICT if the target was undone or the session moved on. */
static int32_t decide_op(pg_conn *c, pg_append_req *m)
{
	pu_group_req *q = &m->q;
	const memd_transcript_op *op = q->a->op;
	const PGresult *res = pg_res(c, m->op_at);
	int target = -1;

	for (int row = 0; row < PQntuples(res); row++) {
		const char *id = PQgetvalue(res, row, 0);
		if (strcmp(id, op->id) == 0)
			return memd_error_set(&q->err, MEMD_ECONFLICT, 0,
					      "session '%.64s' already has an operation '%.64s'",
					      q->scope->session, op->id);
		if (op->kind == MEMD_OP_UNDO && strcmp(id, op->undo_id) == 0)
			target = row;
	}
	if (op->kind != MEMD_OP_UNDO)
		return 0;
	if (target < 0)
		return memd_error_set(&q->err, MEMD_ENOTFOUND, 0,
				      "session '%.64s' has no operation '%.64s'", q->scope->session,
				      op->undo_id);
	if (!PQgetisnull(res, target, 6))
		return memd_error_set(&q->err, MEMD_ECONFLICT, 0,
				      "operation '%.64s' was undone already (by '%.64s')", op->undo_id,
				      PQgetvalue(res, target, 6));
	if (pg_get_i64(res, target, 1) != m->head.version)
		return memd_error_set(&q->err, MEMD_ECONFLICT, 0,
				      "operation '%.64s' left the session at version %lld, which is "
				      "now %lld: only the latest change can be undone",
				      op->undo_id, (long long)pg_get_i64(res, target, 1),
				      (long long)m->head.version);
	m->target_first = pg_get_i64(res, target, 2);
	m->target_last = pg_get_i64(res, target, 3);
	return 0;
}

/* Index of id among the batch's events, or -1. */
static int64_t event_index(const memd_append *a, const char *id)
{
	for (uint32_t i = 0; i < a->n_events; i++)
		if (strcmp(a->events[i]->id, id) == 0)
			return i;
	return -1;
}

/* Decide m from round 1's results: replay, refuse, or write. */
static void decide(pg_conn *c, pg_append_req *m)
{
	pu_group_req *q = &m->q;
	const memd_append *a = q->a;
	uint32_t n_existing = 0;
	const char *some_existing = NULL;
	int32_t r;

	r = pg_session_head_result(pg_res(c, m->lock_at), NULL, q->scope, &m->head, &q->err);
	if (r < 0) {
		q->rc = r;
		q->status = PU_GROUP_DONE;
		return;
	}
	for (uint32_t i = 0; i < a->n_events; i++)
		q->seqs[i] = 0;
	for (uint32_t from = 0, k = 0; from < a->n_events; from += IDS_PER_LOOKUP, k++) {
		const PGresult *res = pg_res(c, m->ids_at + k);
		for (int row = 0; row < PQntuples(res); row++) {
			int64_t i = event_index(a, PQgetvalue(res, row, 0));
			if (i < 0 || q->seqs[i])
				continue;
			q->seqs[i] = pg_get_i64(res, row, 1);
			n_existing++;
			some_existing = a->events[i]->id;
		}
	}
	/* Idempotent retries: a batch whose ids all exist is answered with
	 * the stored seqs (before the version check: the first attempt moved
	 * the version on). */
	if (a->n_events && n_existing == a->n_events) {
		const PGresult *res = append_op(a) ? pg_res(c, m->op_at) : NULL;
		/* A replayed operation answers with its recorded counts. */
		for (int row = 0; res && row < PQntuples(res); row++)
			if (strcmp(PQgetvalue(res, row, 0), a->op->id) == 0) {
				m->hidden_count = pg_get_i64(res, row, 4);
				m->unhidden_count = pg_get_i64(res, row, 5);
			}
		q->version = m->head.version;
		q->replayed = 1;
		q->rc = 0;
		q->status = PU_GROUP_DONE;
		return;
	}
	if (n_existing) {
		q->rc = pu_err_ids_stored(n_existing, a->n_events, some_existing, &q->err);
		q->status = PU_GROUP_DONE;
		return;
	}
	if ((a->flags & MEMD_APPEND_EXPECT_VERSION) && m->head.version != a->expected_version) {
		q->rc = pu_err_version(q->scope, m->head.version, a->expected_version, &q->err);
		q->status = PU_GROUP_DONE;
		return;
	}
	if (append_op(a) && (r = decide_op(c, m)) < 0) {
		q->rc = r;
		q->status = PU_GROUP_DONE;
		return;
	}
	q->status = PU_GROUP_WRITE;
}

/* Queue m's operation (round 2, after the state writes, before the feed
 * positions of the events): its record, then what it hides or unhides. */
static int32_t send_op(pg_conn *c, pg_append_req *m, memd_error *err)
{
	const memd_append *a = m->q.a;
	const memd_transcript_op *op = a->op;
	const memd_scope *sc = m->q.scope;
	const pg_session_head *h = &m->head;
	char kind[PG_INT_BUF], now[PG_INT_BUF], ver[PG_INT_BUF], from[PG_INT_BUF],
		first[PG_INT_BUF], last[PG_INT_BUF], thru[PG_INT_BUF];
	int undo = op->kind == MEMD_OP_UNDO;
	const char *ins[11] = { sc->app, sc->user, sc->session, op->id, pg_i64(kind, op->kind),
				pg_i64(now, a->now_us), pg_i64(ver, h->version + 1),
				pg_i64(from, undo ? 0 : op->hide_from_seq),
				pg_i64(first, a->n_events ? h->last_seq + 1 : 0),
				pg_i64(last, a->n_events ? h->last_seq + a->n_events : 0),
				undo ? op->undo_id : NULL };
	int32_t r = pg_send(c, &SQL_OP_INSERT, ins, err);

	m->hide_at = m->unhide_at = NO_RESULT;
	if (r < 0)
		return r;
	if (!undo) {
		const char *hv[9] = { sc->app, sc->user, sc->session, from, pg_i64(thru, INT64_MAX),
				      now, op->id, kind, NULL };
		m->hide_at = pg_n_queued(c);
		return pg_send(c, &SQL_OP_HIDE, hv, err);
	}
	{
		const char *uv[5] = { sc->app, sc->user, sc->session, op->undo_id, op->id };
		m->unhide_at = pg_n_queued(c);
		r = pg_send(c, &SQL_OP_UNHIDE, uv, err);
	}
	if (r == 0 && m->target_first > 0) {
		const char *hv[9] = { sc->app, sc->user, sc->session,
				      pg_i64(from, m->target_first), pg_i64(thru, m->target_last),
				      now, op->id, kind, op->undo_id };
		m->hide_at = pg_n_queued(c);
		r = pg_send(c, &SQL_OP_HIDE, hv, err);
	}
	if (r == 0) {
		const char *dv[5] = { sc->app, sc->user, sc->session, op->undo_id, op->id };
		r = pg_send(c, &SQL_OP_MARK_UNDONE, dv, err);
	}
	return r;
}

/* The count a round-2 statement of send_op returned (0 for NO_RESULT). */
static int64_t op_count(const pg_conn *c, size_t at)
{
	const PGresult *res = at == NO_RESULT ? NULL : pg_res(c, at);

	return res && PQntuples(res) == 1 ? pg_get_i64(res, 0, 0) : 0;
}

/* Events of a that count as messages (every role but summary). */
static int64_t n_messages(const memd_append *a)
{
	int64_t n = 0;

	for (uint32_t i = 0; i < a->n_events; i++)
		n += !is_summary(a->events[i]->role);
	return n;
}

/* Queue m's event inserts; back counts down to the last position of the
 * group (0). */
static int32_t send_inserts(pg_conn *c, pg_append_req *m, int64_t *back, memd_error *err)
{
	pu_group_req *q = &m->q;
	const memd_append *a = q->a;
	pg_session_head *h = &m->head;
	int32_t r = 0;

	for (uint32_t i = 0; r == 0 && i < a->n_events; i++) {
		const memd_event *e = a->events[i];
		char seq[PG_INT_BUF], bk[PG_INT_BUF], ts[PG_INT_BUF], tok[PG_INT_BUF],
			cov[PG_INT_BUF];
		const char *vals[18];

		q->seqs[i] = ++h->last_seq;
		if (is_summary(e->role))
			h->summary_seq = q->seqs[i];
		vals[0] = q->scope->app;
		vals[1] = q->scope->user;
		vals[2] = q->scope->session;
		vals[3] = pg_i64(seq, q->seqs[i]);
		vals[4] = e->id;
		vals[5] = pg_i64(bk, --(*back));
		vals[6] = e->invocation_id;
		vals[7] = e->author;
		vals[8] = e->role;
		vals[9] = e->branch;
		vals[10] = e->content_json;
		vals[11] = e->actions_json;
		vals[12] = e->metadata_json;
		vals[13] = pg_i64(ts, e->timestamp_us);
		vals[14] = e->text;
		vals[15] = pg_i64(tok, e->tokens);
		vals[16] = pg_i64(cov, is_summary(e->role) ? e->covers_seq : 0);
		vals[17] = append_op(a) ? a->op->id : NULL;
		r = pg_send(c, &SQL_EVENT_INSERT, vals, err);
	}
	return r;
}

/* One try of a group on c: members sorted by session (the lock order).
 * Returns 0 when every member has its answer (m->rc), with *ret_written
 * the appends its transaction committed, or the error of the group's
 * transaction (nothing of it committed unless c->commit_sent). */
static int32_t group_once(pg_conn *c, pu_group_req **m, size_t n, size_t *ret_written,
			  memd_error *err)
{
	pg_state_list writes = { 0 };
	int64_t total = 0, back;
	size_t n_write = 0;
	char tb[PG_INT_BUF];
	int32_t r;

	pu_group_begin(m, n);
	/* Round 1: lock the lanes of members with usage (lanes before
	 * sessions, as lane_write locks them), then every member's session
	 * (in order), and look its ids up. */
	r = pg_send(c, &SQL_BEGIN, NULL, err);
	for (size_t i = 0; r == 0 && i < n; i++)
		if (append_usage(m[i]->a))
			r = pg_session_send_lane_lock(c, m[i]->scope, err);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = send_checks(c, req_of(m[i]), err);
	if (r == 0)
		r = pg_run(c, "append", err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		decide(c, req_of(m[i]));
		if (m[i]->status == PU_GROUP_WRITE) {
			n_write++;
			total += m[i]->a->n_events;
		}
	}
	pg_reset(c);
	if (n_write == 0) {
		(void)pg_exec1(c, &SQL_ROLLBACK, NULL, NULL);
		*ret_written = 0;
		return 0;
	}

	/* Round 2: state rows (in the global key order), session rows, the
	 * feed counter (last lock taken), the events, COMMIT. */
	for (size_t i = 0; r == 0 && i < n; i++)
		if (m[i]->status == PU_GROUP_WRITE) {
			const memd_append *a = m[i]->a;
			const pg_session_head *h = &req_of(m[i])->head;
			pg_state_hist hist = {
				.version = h->version + 1,
				.seq = h->last_seq + a->n_events,
				.at_us = a->now_us,
				.operation = append_op(a) ? a->op->id : NULL,
				.expect_json = append_op(a) ? a->op->state_expect_json : NULL,
			};
			r = pg_state_collect(a->state_delta_json, m[i]->scope, (uint32_t)i, &hist,
					     &writes, err);
		}
	if (r == 0)
		r = pg_state_send(c, &writes, err);
	/* Operations hide and unhide before the events' feed positions are
	 * taken: their records come first in the feed. */
	for (size_t i = 0; r == 0 && i < n; i++)
		if (m[i]->status == PU_GROUP_WRITE && append_op(m[i]->a))
			r = send_op(c, req_of(m[i]), err);
	if (r == 0 && total > 0) {
		const char *vals[1] = { pg_i64(tb, total) };
		r = pg_send(c, &SQL_FEED_ALLOC, vals, err);
	}
	back = total;
	for (size_t i = 0; r == 0 && i < n; i++)
		if (m[i]->status == PU_GROUP_WRITE)
			r = send_inserts(c, req_of(m[i]), &back, err);
	for (size_t i = 0; r == 0 && i < n; i++)
		if (m[i]->status == PU_GROUP_WRITE)
			r = pg_session_send_appended(c, m[i]->scope, &req_of(m[i])->head,
						     m[i]->a->now_us, m[i]->a->title_if_unset,
						     append_usage(m[i]->a), n_messages(m[i]->a),
						     append_op(m[i]->a) != NULL, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "append", err);
	for (size_t i = 0; r == 0 && i < n; i++) {
		pg_append_req *w = req_of(m[i]);
		if (m[i]->status != PU_GROUP_WRITE || !append_op(m[i]->a))
			continue;
		w->hidden_count = op_count(c, w->hide_at);
		w->unhidden_count = op_count(c, w->unhide_at);
		/* The rows an operation changed (each walk reads the rows it
		 * changes, from its first seq on). */
		pu_rows_read(m[i]->call, (uint64_t)(w->hidden_count + w->unhidden_count));
		free(w->not_restored);
		w->not_restored = NULL;
		if (m[i]->a->op->state_expect_json) {
			/* The commit is done: a failure to build the list only
			 * loses the list. */
			memd_error lerr = { .struct_size = sizeof(lerr) };
			(void)pg_state_skipped(c, &writes, (uint32_t)i, &w->not_restored, &lerr);
		}
	}
	pg_state_list_clear(&writes);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if (m[i]->status == PU_GROUP_WRITE) {
			m[i]->version = req_of(m[i])->head.version + 1;
			m[i]->status = PU_GROUP_DONE;
		}
	*ret_written = n_write;
	return 0;
}

/* A failure of the data (not of the connection, not a lock conflict):
 * worth running the members one by one to find the culprit. */
static int data_failure(const pg_conn *c, int32_t r)
{
	return r < 0 && !c->broken && r != MEMD_EUNAVAIL && r != MEMD_ETIMEDOUT &&
	       r != MEMD_ENOMEM;
}

/* Run members m[0..n) (in the lock order) on *cp (retaking a connection
 * when a retry needs one) until each has its answer. *cp may be NULL on
 * return (given back). */
static void group_run(pg_store *s, const memd_call *call, pg_conn **cp, pu_group_req **m,
		      size_t n)
{
	memd_error err = { .struct_size = sizeof(err) };
	size_t written = 0;
	int32_t r = 0;

	for (int attempt = 1;; attempt++) {
		if (!*cp) {
			r = pg_take(s, call, cp, &err);
			if (r < 0)
				break;
		}
		r = group_once(*cp, m, n, &written, &err);
		pg_reset(*cp);
		if (r == 0) {
			pu_group_note_written(s->group, written);
			return;
		}
		if (attempt < PG_ATTEMPTS && pg_should_retry(*cp, r)) {
			pg_give(s, *cp);
			*cp = NULL;
			continue;
		}
		break;
	}
	if (r < 0 && n > 1 && *cp && data_failure(*cp, r)) {
		/* Roll back the shared transaction, then one by one. A member
		 * that fails alone leaves its transaction aborted on the
		 * connection: giving the connection back after each member
		 * rolls that back, so the next one starts clean. */
		pg_give(s, *cp);
		*cp = NULL;
		for (size_t i = 0; i < n; i++) {
			group_run(s, call, cp, &m[i], 1);
			pg_give(s, *cp);
			*cp = NULL;
		}
		return;
	}
	pu_group_fail(m, n, r, &err);
}

/* ---- the group commit queue ---------------------------------------- */

static int32_t queue_try_take(void *store, const memd_call *call, void **ret_conn,
			      memd_error *err)
{
	pg_conn *c = NULL;
	int32_t r = pg_try_take(store, call, &c, err);

	if (r == 0)
		*ret_conn = c;
	return r;
}

static void queue_run(void *store, const memd_call *call, void **conn, pu_group_req **m,
		      size_t n)
{
	pg_conn *c = *conn;

	group_run(store, call, &c, m, n);
	*conn = c;
}

static void queue_give(void *store, void *conn)
{
	pg_give(store, conn);
}

static const pu_group_ops group_ops = {
	.name = "postgres",
	.try_take = queue_try_take,
	.run = queue_run,
	.give = queue_give,
};

int32_t pg_group_init(pg_store *s, memd_error *err)
{
	return pu_group_new(&group_ops, s, s->group_commit, &s->group, err);
}

void pg_group_free(pg_store *s)
{
	if (!s)
		return;
	pu_group_log_stats(s->group, s->host);
	pu_group_free(s->group);
	s->group = NULL;
}

void pg_group_wake(pg_store *s)
{
	pu_group_wake(s->group);
}

int32_t pg_append(void *inst, const memd_call *call, const memd_scope *scope,
		  const memd_append *a, memd_append_result *res, memd_error *err)
{
	pg_store *store = inst;
	pg_append_req req = { .q = { .call = call, .scope = scope, .a = a } };
	const memd_transcript_op *op;
	int32_t r = check_append(scope, a, res, err);

	if (r < 0)
		return r;
	r = pu_group_append(store->group, &req.q, res, err);
	op = append_op(a);
	if (r == 0 && op) {
		if (PG_HAS(res, unhidden_count)) {
			res->hidden_count = req.hidden_count;
			res->unhidden_count = req.unhidden_count;
		}
		if (op->not_restored && op->not_restored->text && !(res->flags & MEMD_APPEND_REPLAYED)) {
			const char *json = req.not_restored ? req.not_restored : "[]";
			(void)op->not_restored->text(op->not_restored->userdata, json,
						     strlen(json));
		}
	}
	free(req.not_restored);
	return r;
}

/* ---- events_load ---------------------------------------------------- */

typedef struct load_ctx {
	pg_store *store;
	const memd_call *call;
	const memd_scope *scope;
	const memd_event_query *q;
	const memd_event_sink *out;
} load_ctx;

static const pg_sql *load_statement(const memd_event_query *q, int newest)
{
	int hidden = (q->flags & MEMD_EVQ_INCLUDE_HIDDEN) != 0;
	int kind = (q->flags & MEMD_EVQ_ONLY_SUMMARY) ? 1 : (q->flags & MEMD_EVQ_NO_SUMMARY) ? 2 : 0;

	if (q->after_time_us)
		return newest ? &SQL_EVENTS_BY_TIME_DESC : &SQL_EVENTS_BY_TIME_ASC;
	return &SQL_LOAD[hidden][kind][newest];
}

static int32_t load_once(pg_conn *c, void *ctx, memd_error *err)
{
	load_ctx *x = ctx;
	const memd_event_query *q = x->q;
	int newest = (q->flags & MEMD_EVQ_NEWEST) && q->limit > 0;
	uint32_t roles = pu_event_query_roles(q);
	char after[PG_INT_BUF], before[PG_INT_BUF], lim[PG_INT_BUF], at[PG_INT_BUF];
	const char *vals[15] = {
		x->scope->app, x->scope->user, x->scope->session,
		pg_i64(after, q->after_seq),
		pg_i64(before, q->before_seq ? q->before_seq : SEQ_UNBOUNDED),
		q->limit ? pg_i64(lim, q->limit) : NULL,
		roles ? "f" : "t",
	};
	PGresult *res;
	int n;
	int32_t r;

	pu_role_names(roles, vals + 7);
	vals[12] = pg_i64(at, q->after_time_us);
	vals[13] = (q->flags & MEMD_EVQ_ONLY_SUMMARY) ? ROLE_FILTER_ONLY_SUMMARY :
		   (q->flags & MEMD_EVQ_NO_SUMMARY) ? ROLE_FILTER_NO_SUMMARY : ROLE_FILTER_ALL;
	vals[14] = (q->flags & MEMD_EVQ_INCLUDE_HIDDEN) ? "t" : "f";
	r = pg_send(c, &SQL_BEGIN_READ, NULL, err);
	if (r == 0)
		r = pg_session_send_exists(c, x->scope, err);
	if (r == 0)
		r = pg_send(c, load_statement(q, newest), vals, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "load events", err);
	if (r == 0)
		r = pg_session_exists_result(pg_res(c, 1), x->call, x->scope, err);
	if (r < 0)
		return r;
	res = pg_res(c, 2);
	n = PQntuples(res);
	pu_rows_read(x->call, (uint64_t)n);
	for (int k = 0; r == 0 && k < n; k++) {
		memd_event e;
		pg_event_from_row(res, newest ? n - 1 - k : k, 0, &e);
		r = pg_sink_result(x->out->event(x->out->userdata, &e), "event", err);
		if (r == 0 && (k + 1) % PG_CHECK_EVERY == 0)
			r = pg_call_check(x->store, x->call, err);
	}
	return r > 0 ? 0 : r;
}

int32_t pg_events_load(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_event_query *q, const memd_event_sink *out, memd_error *err)
{
	load_ctx x = { .store = inst, .call = call, .scope = scope, .q = q, .out = out };
	int32_t r = pu_check_event_query(scope, q, out, err);

	if (r < 0)
		return r;
	return pg_with_conn(inst, call, load_once, &x, err);
}
