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
static const pg_sql SQL_EVENT_INSERT = { PG_ST_EVENT_INSERT, 17,
	"INSERT INTO events (app, \"user\", session, seq, id, position, invocation_id, author,"
	" role, branch, content, actions, metadata, timestamp_us, text, tokens, covers_seq)"
	" VALUES ($1, $2, $3, $4, $5, (SELECT last FROM feed_counter WHERE id = 1) - $6::bigint,"
	" $7, $8, $9, $10, $11::jsonb, $12::jsonb, $13::jsonb, $14, $15, $16, $17)" };
static const pg_sql SQL_EVENT_SEQS_BY_ID = { PG_ST_EVENT_SEQS_BY_ID, 3 + IDS_PER_LOOKUP,
	"SELECT id, seq FROM events WHERE app = $1 AND \"user\" = $2 AND session = $3"
	" AND id IN ($4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,"
	" $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35)" };

/* events_load: every query is a range of one of the session's indexes,
 * $4 < seq < $5, in the order wanted, so the server stops at the limit
 * ($6; NULL = none). The summaries index is partial (role = 'summary'). */
#define EVENTS_WHERE " WHERE app = $1 AND \"user\" = $2 AND session = $3 AND seq > $4 AND seq < $5"
static const pg_sql SQL_EVENTS_ASC = { PG_ST_EVENTS_ASC, 6,
	"SELECT " PG_EVENT_COLS " FROM events" EVENTS_WHERE " ORDER BY seq ASC LIMIT $6" };
static const pg_sql SQL_EVENTS_DESC = { PG_ST_EVENTS_DESC, 6,
	"SELECT " PG_EVENT_COLS " FROM events" EVENTS_WHERE " ORDER BY seq DESC LIMIT $6" };
static const pg_sql SQL_SUMMARIES_ASC = { PG_ST_SUMMARIES_ASC, 6,
	"SELECT " PG_EVENT_COLS " FROM events" EVENTS_WHERE " AND role = 'summary'"
	" ORDER BY seq ASC LIMIT $6" };
static const pg_sql SQL_SUMMARIES_DESC = { PG_ST_SUMMARIES_DESC, 6,
	"SELECT " PG_EVENT_COLS " FROM events" EVENTS_WHERE " AND role = 'summary'"
	" ORDER BY seq DESC LIMIT $6" };
static const pg_sql SQL_NONSUMMARIES_ASC = { PG_ST_NONSUMMARIES_ASC, 6,
	"SELECT " PG_EVENT_COLS " FROM events" EVENTS_WHERE " AND role <> 'summary'"
	" ORDER BY seq ASC LIMIT $6" };
static const pg_sql SQL_NONSUMMARIES_DESC = { PG_ST_NONSUMMARIES_DESC, 6,
	"SELECT " PG_EVENT_COLS " FROM events" EVENTS_WHERE " AND role <> 'summary'"
	" ORDER BY seq DESC LIMIT $6" };
/* after_time: $7 the time bound, $8 the role filter (ROLE_FILTER_*). */
#define EVENTS_BY_TIME_WHERE EVENTS_WHERE " AND timestamp_us > $7" \
	" AND ($8::integer = 0 OR ($8::integer = 1) = (role <> 'summary'))"
static const pg_sql SQL_EVENTS_BY_TIME_ASC = { PG_ST_EVENTS_BY_TIME_ASC, 8,
	"SELECT " PG_EVENT_COLS " FROM events" EVENTS_BY_TIME_WHERE " ORDER BY seq ASC LIMIT $6" };
static const pg_sql SQL_EVENTS_BY_TIME_DESC = { PG_ST_EVENTS_BY_TIME_DESC, 8,
	"SELECT " PG_EVENT_COLS " FROM events" EVENTS_BY_TIME_WHERE " ORDER BY seq DESC LIMIT $6" };

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
	return r < 0 ? r : pg_state_check(a->state_delta_json, err);
}

/* The usage of a (NULL when none, or when a predates it). */
static const memd_usage *append_usage(const memd_append *a)
{
	return PG_HAS(a, usage) ? a->usage : NULL;
}

/* ---- one append inside a group ------------------------------------- */

/* An append as the group commit queue carries it (pu_group.h), with what
 * its group's run keeps of it. */
typedef struct pg_append_req {
	pu_group_req q;            /* first: the queue's pointers convert */
	pg_session_head head;
	size_t lock_at, ids_at;    /* result indexes in round 1 */
} pg_append_req;

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
	return r;
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
	q->status = PU_GROUP_WRITE;
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
		const char *vals[17];

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
		if (m[i]->status == PU_GROUP_WRITE)
			r = pg_state_collect(m[i]->a->state_delta_json, m[i]->scope, (uint32_t)i,
					     &writes, err);
	if (r == 0)
		r = pg_state_send(c, &writes, err);
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
						     append_usage(m[i]->a), err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "append", err);
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
	int32_t r = check_append(scope, a, res, err);

	if (r < 0)
		return r;
	return pu_group_append(store->group, &req.q, res, err);
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
	if (q->after_time_us)
		return newest ? &SQL_EVENTS_BY_TIME_DESC : &SQL_EVENTS_BY_TIME_ASC;
	if (q->flags & MEMD_EVQ_ONLY_SUMMARY)
		return newest ? &SQL_SUMMARIES_DESC : &SQL_SUMMARIES_ASC;
	if (q->flags & MEMD_EVQ_NO_SUMMARY)
		return newest ? &SQL_NONSUMMARIES_DESC : &SQL_NONSUMMARIES_ASC;
	return newest ? &SQL_EVENTS_DESC : &SQL_EVENTS_ASC;
}

static int32_t load_once(pg_conn *c, void *ctx, memd_error *err)
{
	load_ctx *x = ctx;
	const memd_event_query *q = x->q;
	int newest = (q->flags & MEMD_EVQ_NEWEST) && q->limit > 0;
	char after[PG_INT_BUF], before[PG_INT_BUF], lim[PG_INT_BUF], at[PG_INT_BUF];
	const char *vals[8] = {
		x->scope->app, x->scope->user, x->scope->session,
		pg_i64(after, q->after_seq),
		pg_i64(before, q->before_seq ? q->before_seq : SEQ_UNBOUNDED),
		q->limit ? pg_i64(lim, q->limit) : NULL,
		pg_i64(at, q->after_time_us),
		(q->flags & MEMD_EVQ_ONLY_SUMMARY) ? ROLE_FILTER_ONLY_SUMMARY :
		(q->flags & MEMD_EVQ_NO_SUMMARY) ? ROLE_FILTER_NO_SUMMARY : ROLE_FILTER_ALL,
	};
	PGresult *res;
	int n;
	int32_t r = pg_send(c, &SQL_BEGIN_READ, NULL, err);

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
