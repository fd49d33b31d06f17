/* SPDX-License-Identifier: MIT */
#include "sq_events.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_util.h"
#include "sq_feed.h"
#include "sq_group.h"
#include "sq_lanes.h"
#include "sq_sessions.h"
#include "sq_state.h"

#define ROLE_SUMMARY "summary"
#define SEQ_UNBOUNDED INT64_MAX
#define SEQS_INITIAL 64
#define SEQS_ON_STACK 16 /* appends of up to this many events need no allocation */

static const sq_sql SQL_EVENT_INSERT = { SQ_ST_EVENT_INSERT,
	"INSERT INTO events (" SQ_EVENT_COLS ")"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)" };
static const sq_sql SQL_EVENT_SEQ_BY_ID = { SQ_ST_EVENT_SEQ_BY_ID,
	"SELECT seq FROM events INDEXED BY events_by_id"
	" WHERE id = ?4 AND app = ?1 AND user = ?2 AND session = ?3" };

/* events_load: every query is a range of one of the session's indexes,
 * ?4 < seq < ?5, walked in the order wanted so stepping can stop at the
 * limit. The summaries index is partial (role = 'summary'). */
static const sq_sql SQL_EVENTS_ASC = { SQ_ST_EVENTS_ASC,
	"SELECT " SQ_EVENT_COLS " FROM events INDEXED BY events_by_seq"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND seq > ?4 AND seq < ?5"
	" ORDER BY seq ASC" };
static const sq_sql SQL_EVENTS_DESC = { SQ_ST_EVENTS_DESC,
	"SELECT " SQ_EVENT_COLS " FROM events INDEXED BY events_by_seq"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND seq > ?4 AND seq < ?5"
	" ORDER BY seq DESC" };
static const sq_sql SQL_SUMMARIES_ASC = { SQ_ST_SUMMARIES_ASC,
	"SELECT " SQ_EVENT_COLS " FROM events INDEXED BY events_summaries"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND role = 'summary'"
	" AND seq > ?4 AND seq < ?5 ORDER BY seq ASC" };
static const sq_sql SQL_SUMMARIES_DESC = { SQ_ST_SUMMARIES_DESC,
	"SELECT " SQ_EVENT_COLS " FROM events INDEXED BY events_summaries"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND role = 'summary'"
	" AND seq > ?4 AND seq < ?5 ORDER BY seq DESC" };
/* after_time: events_by_seq covers timestamp and role, so the matching
 * seqs are found index-only in seq order; the rows are then fetched by
 * seq. */
static const sq_sql SQL_TIMES_ASC = { SQ_ST_TIMES_ASC,
	"SELECT seq, role, timestamp_us FROM events INDEXED BY events_by_seq"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND seq > ?4 AND seq < ?5"
	" ORDER BY seq" };
static const sq_sql SQL_TIMES_DESC = { SQ_ST_TIMES_DESC,
	"SELECT seq, role, timestamp_us FROM events INDEXED BY events_by_seq"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND seq > ?4 AND seq < ?5"
	" ORDER BY seq DESC" };
static const sq_sql SQL_EVENT_BY_SEQ = { SQ_ST_EVENT_BY_SEQ,
	"SELECT " SQ_EVENT_COLS " FROM events INDEXED BY events_by_seq"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND seq = ?4" };

void sq_event_from_row(sqlite3_stmt *st, int col0, memd_event *e)
{
	memset(e, 0, sizeof(*e));
	e->struct_size = sizeof(*e);
	e->position = sqlite3_column_int64(st, col0 + 0);
	e->app = sq_col_text(st, col0 + 1);
	e->user = sq_col_text(st, col0 + 2);
	e->session = sq_col_text(st, col0 + 3);
	e->seq = sqlite3_column_int64(st, col0 + 4);
	e->id = sq_col_text(st, col0 + 5);
	e->invocation_id = sq_col_text(st, col0 + 6);
	e->author = sq_col_text(st, col0 + 7);
	e->role = sq_col_text(st, col0 + 8);
	e->branch = sq_col_text(st, col0 + 9);
	e->content_json = sq_col_text(st, col0 + 10);
	e->actions_json = sq_col_text(st, col0 + 11);
	e->metadata_json = sq_col_text(st, col0 + 12);
	e->timestamp_us = sqlite3_column_int64(st, col0 + 13);
	e->text = sq_col_text(st, col0 + 14);
	e->tokens = sqlite3_column_int64(st, col0 + 15);
	e->covers_seq = sqlite3_column_int64(st, col0 + 16);
}

static int is_summary(const char *role)
{
	return role && strcmp(role, ROLE_SUMMARY) == 0;
}

/* ---- append --------------------------------------------------------- */

/* The append's usage: only an append of 1.2 or later has the member. */
static const memd_usage *usage_of(const memd_append *a)
{
	if (a->struct_size < offsetof(memd_append, usage) + sizeof(a->usage))
		return NULL;
	return a->usage;
}

/* Validate the batch before any lock is taken: a bad batch writes nothing. */
static int32_t check_append(const memd_scope *scope, const memd_append *a,
			    const memd_append_result *res, memd_error *err)
{
	int32_t r = pu_check_append(scope, a, res, err);
	if (r == 0)
		r = sq_state_check(a->state_delta_json, err);
	return r < 0 ? r : sq_usage_check(usage_of(a), err);
}

/* The seq of event id in scope's session, or 0 if there is none. */
static int32_t seq_of_id(sq_conn *c, const memd_scope *scope, const char *id, int64_t *ret_seq,
			 memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_EVENT_SEQ_BY_ID, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*ret_seq = sqlite3_column_int64(st, 0);
	else if (rc == SQLITE_DONE)
		*ret_seq = 0;
	else
		r = sq_fail(c, rc, err, "look up event '%.64s'", id);
	sq_stmt_done(st);
	return r;
}

static int32_t insert_event(sq_conn *c, const memd_scope *scope, const memd_event *e,
			    int64_t position, int64_t seq, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_EVENT_INSERT, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sqlite3_bind_int64(st, 1, position);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 2, scope->app);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 3, scope->user);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, scope->session);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 5, seq);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 6, e->id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 7, e->invocation_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 8, e->author);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 9, e->role);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 10, e->branch);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 11, e->content_json);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 12, e->actions_json);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 13, e->metadata_json);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 14, e->timestamp_us);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 15, e->text);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 16, e->tokens);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 17, is_summary(e->role) ? e->covers_seq : 0);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if ((rc & 0xff) == SQLITE_CONSTRAINT)
		r = memd_error_set(err, MEMD_ECONFLICT, 0, "event '%.64s' clashes with a stored event",
				   e->id);
	else if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "insert event '%.64s'", e->id);
	sq_stmt_done(st);
	return r;
}

/* The write half of append, inside the transaction on c. seqs gets each
 * event's seq; *ret_replayed is set when the whole batch existed. */
static int32_t append_locked(sq_conn *c, const memd_scope *scope, const memd_append *a,
			     int64_t now_us, int64_t *seqs, int64_t *ret_version,
			     int *ret_replayed, memd_error *err)
{
	sq_session_head head;
	uint32_t n_existing = 0;
	const char *some_existing = NULL;
	int64_t first_pos = 0;
	int32_t r = sq_session_head_get(c, NULL, scope, &head, err);

	if (r < 0)
		return r;
	/* Idempotent retries: a batch whose ids all exist is answered with
	 * the stored seqs (before the version check: the first attempt moved
	 * the version on). */
	for (uint32_t i = 0; i < a->n_events; i++) {
		r = seq_of_id(c, scope, a->events[i]->id, &seqs[i], err);
		if (r < 0)
			return r;
		if (seqs[i]) {
			n_existing++;
			some_existing = a->events[i]->id;
		}
	}
	if (a->n_events && n_existing == a->n_events) {
		*ret_version = head.version;
		*ret_replayed = 1;
		return 0;
	}
	if (n_existing)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "%u of the batch's %u event ids already exist (e.g. '%.64s'): "
				      "a retry must resend the same batch",
				      (unsigned)n_existing, (unsigned)a->n_events, some_existing);
	if ((a->flags & MEMD_APPEND_EXPECT_VERSION) && head.version != a->expected_version)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "session '%.64s' is at version %lld, not the expected %lld",
				      scope->session, (long long)head.version,
				      (long long)a->expected_version);
	if (a->n_events)
		r = sq_feed_alloc(c, a->n_events, &first_pos, err);
	for (uint32_t i = 0; r == 0 && i < a->n_events; i++) {
		const memd_event *e = a->events[i];
		seqs[i] = head.last_seq + 1;
		r = insert_event(c, scope, e, first_pos + i, seqs[i], err);
		head.last_seq = seqs[i];
		if (is_summary(e->role))
			head.summary_seq = seqs[i];
	}
	if (r == 0)
		r = sq_state_apply(c, scope, a->state_delta_json, err);
	if (r == 0)
		r = sq_session_appended(c, scope, &head, now_us, a->title_if_unset, err);
	if (r == 0)
		r = sq_usage_add(c, scope, usage_of(a), 1, err);
	if (r == 0) {
		*ret_version = head.version + 1;
		*ret_replayed = 0;
	}
	return r;
}

/* One append as a group-commit request (sq_group.h). */
typedef struct append_job {
	const memd_scope *scope;
	const memd_append *a;
	int64_t *seqs;
	int64_t version;
	int replayed;
} append_job;

static int32_t append_apply(sq_conn *c, void *ctx, memd_error *err)
{
	append_job *j = ctx;

	return append_locked(c, j->scope, j->a, j->a->now_us, j->seqs, &j->version, &j->replayed,
			     err);
}

int32_t sq_append(void *inst, const memd_call *call, const memd_scope *scope,
		  const memd_append *a, memd_append_result *res, memd_error *err)
{
	sq_store *store = inst;
	int64_t local[SEQS_ON_STACK];
	append_job job = { .scope = scope, .a = a, .seqs = local };
	int32_t r = check_append(scope, a, res, err);

	if (r < 0)
		return r;
	/* The seqs are written to res only on success: a slot array of our
	 * own takes them while the outcome is open. */
	if (a->n_events > SEQS_ON_STACK) {
		job.seqs = calloc(a->n_events, sizeof(*job.seqs));
		if (!job.seqs)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	r = sq_group_write(store, call, append_apply, &job, a->n_events, err);
	if (r == 0) {
		if (a->n_events)
			memcpy(res->seqs, job.seqs, a->n_events * sizeof(*job.seqs));
		res->version = job.version;
		res->flags = job.replayed ? MEMD_APPEND_REPLAYED : 0;
	}
	if (job.seqs != local)
		free(job.seqs);
	return r;
}

/* ---- events_load ---------------------------------------------------- */

typedef struct load_ctx {
	sq_store *store;
	sq_conn *c;
	const memd_call *call;
	const memd_scope *scope;
	const memd_event_query *q;
	const memd_event_sink *out;
	memd_error *err;
	int64_t before;
} load_ctx;

static int wanted(const load_ctx *x, const char *role)
{
	if (x->q->flags & MEMD_EVQ_NO_SUMMARY)
		return !is_summary(role);
	if (x->q->flags & MEMD_EVQ_ONLY_SUMMARY)
		return is_summary(role);
	return 1;
}

static int32_t deliver(const load_ctx *x, const memd_event *e)
{
	return sq_sink_result(x->out->event(x->out->userdata, e), "event", x->err);
}

static int bind_range(sqlite3_stmt *st, const load_ctx *x)
{
	int rc = sq_bind_scope(st, x->scope, 1);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 4, x->q->after_seq);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 5, x->before);
	return rc;
}

/* Walk the seq (or summaries) index in the wanted direction, stopping at
 * the limit. NEWEST walks backwards, keeps copies and delivers them in
 * ascending order. */
static int32_t load_by_seq(load_ctx *x)
{
	const memd_event_query *q = x->q;
	int newest = (q->flags & MEMD_EVQ_NEWEST) && q->limit > 0;
	int only_summary = (q->flags & MEMD_EVQ_ONLY_SUMMARY) != 0;
	const sq_sql *sql = only_summary ? (newest ? &SQL_SUMMARIES_DESC : &SQL_SUMMARIES_ASC)
					 : (newest ? &SQL_EVENTS_DESC : &SQL_EVENTS_ASC);
	pu_event_copy *kept = NULL;
	uint32_t n_kept = 0, n_matched = 0;
	uint64_t stepped = 0;
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(x->c, sql, &st, x->err);
	int rc;

	if (r < 0)
		return r;
	if (newest) {
		kept = calloc(q->limit, sizeof(*kept));
		if (!kept) {
			r = memd_error_set(x->err, MEMD_ENOMEM, 0, "out of memory");
			goto out;
		}
	}
	rc = bind_range(st, x);
	while (rc == SQLITE_OK && (q->limit == 0 || n_matched < q->limit)) {
		memd_event e;

		rc = sqlite3_step(st);
		if (rc != SQLITE_ROW)
			break;
		rc = SQLITE_OK;
		stepped++;
		if (stepped % SQ_CHECK_EVERY == 0 &&
		    (r = sq_call_check(x->store, x->call, x->err)) < 0)
			goto out;
		sq_event_from_row(st, 0, &e);
		if (!wanted(x, e.role))
			continue;
		n_matched++;
		if (newest) {
			r = pu_event_copy_make(&e, &kept[n_kept], x->err);
			if (r < 0)
				goto out;
			n_kept++;
		} else {
			r = deliver(x, &e);
			if (r != 0)
				goto out;
		}
	}
	if (rc != SQLITE_OK && rc != SQLITE_DONE) {
		r = sq_fail(x->c, rc, x->err, "load events of '%.64s'", x->scope->session);
		goto out;
	}
	sq_count_rows(x->call, st, stepped);
	stepped = 0;
	sq_stmt_done(st);
	st = NULL;
	for (uint32_t i = n_kept; i > 0 && r == 0; i--)
		r = deliver(x, &kept[i - 1].e);
out:
	if (st) {
		sq_count_rows(x->call, st, stepped);
		sq_stmt_done(st);
	}
	for (uint32_t i = 0; i < n_kept; i++)
		free(kept[i].buf);
	free(kept);
	return r > 0 ? 0 : r;
}

/* after_time: walk events_by_seq index-only in the wanted direction (NEWEST
 * backwards), keep the seqs of matching events up to the limit, then fetch
 * those rows by seq in ascending order. */
static int32_t load_by_time(load_ctx *x)
{
	const memd_event_query *q = x->q;
	int newest = (q->flags & MEMD_EVQ_NEWEST) && q->limit > 0;
	int64_t *seqs = NULL;
	size_t n = 0, cap = 0;
	uint64_t stepped = 0;
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(x->c, newest ? &SQL_TIMES_DESC : &SQL_TIMES_ASC, &st, x->err);
	int rc;

	if (r < 0)
		return r;
	rc = bind_range(st, x);
	while (rc == SQLITE_OK && (q->limit == 0 || n < q->limit) &&
	       (rc = sqlite3_step(st)) == SQLITE_ROW) {
		rc = SQLITE_OK;
		stepped++;
		if (stepped % SQ_CHECK_EVERY == 0 &&
		    (r = sq_call_check(x->store, x->call, x->err)) < 0)
			goto out;
		if (sqlite3_column_int64(st, 2) <= q->after_time_us || !wanted(x, sq_col_text(st, 1)))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : SEQS_INITIAL;
			int64_t *grown = realloc(seqs, ncap * sizeof(*seqs));
			if (!grown) {
				r = memd_error_set(x->err, MEMD_ENOMEM, 0, "out of memory");
				goto out;
			}
			seqs = grown;
			cap = ncap;
		}
		seqs[n++] = sqlite3_column_int64(st, 0);
	}
	if (rc != SQLITE_OK && rc != SQLITE_DONE) {
		r = sq_fail(x->c, rc, x->err, "load events of '%.64s'", x->scope->session);
		goto out;
	}
	sq_count_rows(x->call, st, stepped);
	stepped = 0;
	sq_stmt_done(st);
	st = NULL;

	r = sq_stmt(x->c, &SQL_EVENT_BY_SEQ, &st, x->err);
	for (size_t i = 0; r == 0 && i < n; i++) {
		int64_t seq = newest ? seqs[n - 1 - i] : seqs[i];
		memd_event e;

		rc = sq_bind_scope(st, x->scope, 1);
		if (rc == SQLITE_OK)
			rc = sqlite3_bind_int64(st, 4, seq);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			stepped++;
			sq_event_from_row(st, 0, &e);
			r = deliver(x, &e);
		} else {
			r = sq_fail(x->c, rc, x->err, "load event %lld of '%.64s'", (long long)seq,
				    x->scope->session);
		}
		sqlite3_reset(st);
	}
out:
	if (st) {
		sq_count_rows(x->call, st, stepped);
		sq_stmt_done(st);
	}
	free(seqs);
	return r > 0 ? 0 : r;
}

int32_t sq_events_load(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_event_query *q, const memd_event_sink *out, memd_error *err)
{
	sq_store *store = inst;
	sq_session_head head;
	load_ctx x;
	int32_t r = pu_check_event_query(scope, q, out, err);

	if (r < 0)
		return r;
	x = (load_ctx){ .store = store, .call = call, .scope = scope, .q = q, .out = out,
			.err = err, .before = q->before_seq ? q->before_seq : SEQ_UNBOUNDED };
	r = sq_read_begin(store, call, &x.c, err);
	if (r < 0)
		return r;
	r = sq_session_head_get(x.c, call, scope, &head, err);
	if (r == 0)
		r = q->after_time_us ? load_by_time(&x) : load_by_seq(&x);
	sq_read_end(store, x.c);
	return r;
}
