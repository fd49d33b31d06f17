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
#include "sq_transcripts.h"

#define ROLE_SUMMARY "summary"
#define SEQ_UNBOUNDED INT64_MAX
#define SEQS_INITIAL 64
#define SEQS_ON_STACK 16 /* appends of up to this many events need no allocation */

static const sq_sql SQL_EVENT_INSERT = { SQ_ST_EVENT_INSERT,
	"INSERT INTO events (position, app, user, session, seq, id, invocation_id, author, role,"
	" branch, content, actions, metadata, timestamp_us, text, tokens, covers_seq, operation)"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,"
	" ?18)" };
static const sq_sql SQL_EVENT_SEQ_BY_ID = { SQ_ST_EVENT_SEQ_BY_ID,
	"SELECT seq FROM events INDEXED BY events_by_id"
	" WHERE id = ?4 AND app = ?1 AND user = ?2 AND session = ?3" };

/* events_load: every query is a range of the session's visible events
 * (the partial index events_by_seq, or events_summaries for summaries),
 * ?4 < seq < ?5, walked in the order wanted so stepping can stop at the
 * limit. A roles mask ?6 (0 = every role) keeps the roles ?7..?11 (a
 * fixed list; unused slots are NULL, which matches nothing). With
 * INCLUDE_HIDDEN the same range of events_hidden is merged in, in seq
 * order (a compound SELECT whose arms both walk an index in that order). */
#define EV_RANGE " WHERE app = ?1 AND user = ?2 AND session = ?3 AND seq > ?4 AND seq < ?5" \
	" AND (?6 = 0 OR role IN (?7, ?8, ?9, ?10, ?11))"
#define EV_VISIBLE " FROM events INDEXED BY events_by_seq" EV_RANGE " AND hidden_us = 0"
#define EV_HIDDEN " FROM events INDEXED BY events_hidden" EV_RANGE " AND hidden_us <> 0"
#define EV_SUMMARIES " FROM events INDEXED BY events_summaries" EV_RANGE \
	" AND role = 'summary' AND hidden_us = 0"
#define EV_HIDDEN_SUMMARIES EV_HIDDEN " AND role = 'summary'"
#define EV_SELECT "SELECT " SQ_EVENT_COLS
/* after_time: both indexes cover timestamp and role, so the matching
 * events are found index-only in seq order; the rows are then fetched by
 * position (the rowid every index entry holds). */
#define EV_TIMES "SELECT seq, role, timestamp_us, position"

static const sq_sql SQL_EVENTS_ASC = { SQ_ST_EVENTS_ASC,
	EV_SELECT EV_VISIBLE " ORDER BY seq ASC" };
static const sq_sql SQL_EVENTS_DESC = { SQ_ST_EVENTS_DESC,
	EV_SELECT EV_VISIBLE " ORDER BY seq DESC" };
static const sq_sql SQL_SUMMARIES_ASC = { SQ_ST_SUMMARIES_ASC,
	EV_SELECT EV_SUMMARIES " ORDER BY seq ASC" };
static const sq_sql SQL_SUMMARIES_DESC = { SQ_ST_SUMMARIES_DESC,
	EV_SELECT EV_SUMMARIES " ORDER BY seq DESC" };
static const sq_sql SQL_TIMES_ASC = { SQ_ST_TIMES_ASC,
	EV_TIMES EV_VISIBLE " ORDER BY seq ASC" };
static const sq_sql SQL_TIMES_DESC = { SQ_ST_TIMES_DESC,
	EV_TIMES EV_VISIBLE " ORDER BY seq DESC" };
static const sq_sql SQL_EVENTS_ALL_ASC = { SQ_ST_EVENTS_ALL_ASC,
	EV_SELECT EV_VISIBLE " UNION ALL " EV_SELECT EV_HIDDEN " ORDER BY seq ASC" };
static const sq_sql SQL_EVENTS_ALL_DESC = { SQ_ST_EVENTS_ALL_DESC,
	EV_SELECT EV_VISIBLE " UNION ALL " EV_SELECT EV_HIDDEN " ORDER BY seq DESC" };
static const sq_sql SQL_SUMMARIES_ALL_ASC = { SQ_ST_SUMMARIES_ALL_ASC,
	EV_SELECT EV_SUMMARIES " UNION ALL " EV_SELECT EV_HIDDEN_SUMMARIES " ORDER BY seq ASC" };
static const sq_sql SQL_SUMMARIES_ALL_DESC = { SQ_ST_SUMMARIES_ALL_DESC,
	EV_SELECT EV_SUMMARIES " UNION ALL " EV_SELECT EV_HIDDEN_SUMMARIES " ORDER BY seq DESC" };
static const sq_sql SQL_TIMES_ALL_ASC = { SQ_ST_TIMES_ALL_ASC,
	EV_TIMES EV_VISIBLE " UNION ALL " EV_TIMES EV_HIDDEN " ORDER BY seq ASC" };
static const sq_sql SQL_TIMES_ALL_DESC = { SQ_ST_TIMES_ALL_DESC,
	EV_TIMES EV_VISIBLE " UNION ALL " EV_TIMES EV_HIDDEN " ORDER BY seq DESC" };
static const sq_sql SQL_EVENT_BY_POSITION = { SQ_ST_EVENT_BY_POSITION,
	EV_SELECT " FROM events WHERE position = ?1" };

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
	e->hidden_us = sqlite3_column_int64(st, col0 + 17);
	e->hidden_by = sq_col_text(st, col0 + 18);
	e->hidden_kind = (uint32_t)sqlite3_column_int64(st, col0 + 19);
	e->operation = sq_col_text(st, col0 + 20);
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
			    int64_t position, int64_t seq, const char *operation, memd_error *err)
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
		rc = sq_bind_text(st, 18, operation);
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

/* One append as a group-commit request (sq_group.h). */
typedef struct append_job {
	const memd_call *call;
	const memd_scope *scope;
	const memd_append *a;
	int64_t *seqs;
	int64_t version;
	int replayed;
	sq_op_done done;         /* what the transcript op did */
	char *not_restored;      /* the op's keys not restored (JSON array) */
} append_job;

/* The write half of append, inside the transaction on c, in the order
 * store.h gives: replay, version, the transcript op (its id, hiding or
 * undoing), the events, the state delta (recorded, under the op's
 * expectations), the session row, usage, the op's record. */
static int32_t append_locked(sq_conn *c, append_job *j, memd_error *err)
{
	const memd_scope *scope = j->scope;
	const memd_append *a = j->a;
	const memd_transcript_op *op = pu_append_op(a);
	int64_t *seqs = j->seqs;
	sq_session_head head;
	sq_state_record rec;
	uint32_t n_existing = 0;
	const char *some_existing = NULL;
	int64_t first_pos = 0;
	int32_t r = sq_session_head_get(c, j->call, scope, &head, err);

	if (r < 0)
		return r;
	/* Idempotent retries: a batch whose ids all exist is answered with
	 * the stored seqs (before the version check: the first attempt moved
	 * the version on), its op with it. */
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
		j->version = head.version;
		j->replayed = 1;
		return 0;
	}
	if (n_existing)
		return pu_err_ids_stored(n_existing, a->n_events, some_existing, err);
	if ((a->flags & MEMD_APPEND_EXPECT_VERSION) && head.version != a->expected_version)
		return pu_err_version(scope, head.version, a->expected_version, err);
	memset(&j->done, 0, sizeof(j->done));
	if (op)
		r = sq_op_apply(c, j->call, scope, op, a->now_us, &head, &j->done, err);
	if (r == 0 && a->n_events)
		r = sq_feed_alloc(c, a->n_events, &first_pos, err);
	for (uint32_t i = 0; r == 0 && i < a->n_events; i++) {
		const memd_event *e = a->events[i];
		seqs[i] = head.last_seq + 1;
		r = insert_event(c, scope, e, first_pos + i, seqs[i], op ? op->id : NULL, err);
		head.last_seq = seqs[i];
		if (is_summary(e->role))
			head.summary_seq = seqs[i];
		else
			head.message_count++;
	}
	rec = (sq_state_record){ .version = head.version + 1, .seq = head.last_seq,
				 .at_us = a->now_us, .operation = op ? op->id : NULL,
				 .expect_json = op ? op->state_expect_json : NULL };
	if (r == 0)
		r = sq_state_apply(c, scope, a->state_delta_json, &rec, err);
	if (r == 0)
		r = sq_session_appended(c, scope, &head, a->now_us, a->title_if_unset, err);
	if (r == 0)
		r = sq_usage_add(c, scope, usage_of(a), 1, err);
	if (r == 0 && op)
		r = sq_op_record(c, scope, op, a->now_us, head.version + 1,
				 a->n_events ? seqs[0] : 0, a->n_events ? head.last_seq : 0,
				 &j->done, err);
	if (r < 0) {
		free(rec.not_restored);
		return r;
	}
	free(j->not_restored);
	j->not_restored = rec.not_restored;
	j->version = head.version + 1;
	j->replayed = 0;
	return 0;
}

static int32_t append_apply(sq_conn *c, void *ctx, memd_error *err)
{
	return append_locked(c, ctx, err);
}

int32_t sq_append(void *inst, const memd_call *call, const memd_scope *scope,
		  const memd_append *a, memd_append_result *res, memd_error *err)
{
	sq_store *store = inst;
	int64_t local[SEQS_ON_STACK];
	append_job job = { .call = call, .scope = scope, .a = a, .seqs = local };
	const memd_transcript_op *op = pu_append_op(a);
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
		if (res->struct_size >= offsetof(memd_append_result, unhidden_count) +
					       sizeof(res->unhidden_count)) {
			res->hidden_count = job.replayed ? 0 : job.done.hidden_count;
			res->unhidden_count = job.replayed ? 0 : job.done.unhidden_count;
		}
		/* The keys the op did not restore, once it is durable. */
		if (op && op->not_restored && op->not_restored->text && job.not_restored &&
		    !job.replayed)
			(void)op->not_restored->text(op->not_restored->userdata, job.not_restored,
						     strlen(job.not_restored));
	}
	free(job.not_restored);
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
	int64_t after;           /* seq > this: the query's after_seq, or a window's floor */
	int64_t before;
	uint32_t roles;          /* MEMD_ROLE_* mask, 0 = every role */
	int hidden;              /* MEMD_EVQ_INCLUDE_HIDDEN */
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
		rc = sqlite3_bind_int64(st, 4, x->after);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 5, x->before);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 6, x->roles);
	if (rc == SQLITE_OK && x->roles) {
		const char *names[PU_ROLES_COUNT];
		pu_role_names(x->roles, names);
		for (int i = 0; rc == SQLITE_OK && i < PU_ROLES_COUNT; i++)
			rc = sq_bind_text(st, 7 + i, names[i]);
	}
	return rc;
}

/* Walk the seq (or summaries) index in the wanted direction, stopping at
 * the limit. NEWEST walks backwards, keeps copies and delivers them in
 * ascending order. */
/* A NEWEST window of more than this many events is not kept as copies
 * while walking back (a million-event window of large events would take
 * all of them into memory): its lowest seq is found index-only, walking
 * back, and the window is then read forwards from there, streamed. */
#define NEWEST_COPY_MAX 256u

/* The seq of the limit-th newest match, walking the covering index back
 * (0 when there are fewer matches: the window starts at the range's
 * start). */
static int32_t newest_floor(load_ctx *x, int64_t *ret)
{
	const memd_event_query *q = x->q;
	uint32_t n = 0;
	uint64_t stepped = 0;
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(x->c, x->hidden ? &SQL_TIMES_ALL_DESC : &SQL_TIMES_DESC, &st, x->err);
	int rc;

	if (r < 0)
		return r;
	*ret = 0;
	rc = bind_range(st, x);
	while (rc == SQLITE_OK && n < q->limit && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		rc = SQLITE_OK;
		stepped++;
		if (stepped % SQ_CHECK_EVERY == 0 &&
		    (r = sq_call_check(x->store, x->call, x->err)) < 0)
			break;
		if (!wanted(x, sq_col_text(st, 1)))
			continue;
		n++;
		*ret = sqlite3_column_int64(st, 0);
	}
	if (r == 0 && rc != SQLITE_OK && rc != SQLITE_DONE)
		r = sq_fail(x->c, rc, x->err, "find the window of '%.64s'", x->scope->session);
	if (r == 0 && n < q->limit)
		*ret = 0;
	sq_count_rows(x->call, st, stepped);
	sq_stmt_done(st);
	return r;
}

static int32_t load_by_seq(load_ctx *x)
{
	const memd_event_query *q = x->q;
	int newest = (q->flags & MEMD_EVQ_NEWEST) && q->limit > 0;
	int only_summary = (q->flags & MEMD_EVQ_ONLY_SUMMARY) != 0;
	const sq_sql *sql;
	pu_event_copy *kept = NULL;
	uint32_t n_kept = 0, n_matched = 0;
	uint64_t stepped = 0;
	sqlite3_stmt *st = NULL;
	int32_t r;
	int rc;

	if (newest && !only_summary && q->limit > NEWEST_COPY_MAX) {
		int64_t floor = 0;
		r = newest_floor(x, &floor);
		if (r < 0)
			return r;
		if (floor - 1 > x->after)
			x->after = floor - 1;
		newest = 0;
	}
	if (only_summary && x->hidden)
		sql = newest ? &SQL_SUMMARIES_ALL_DESC : &SQL_SUMMARIES_ALL_ASC;
	else if (only_summary)
		sql = newest ? &SQL_SUMMARIES_DESC : &SQL_SUMMARIES_ASC;
	else if (x->hidden)
		sql = newest ? &SQL_EVENTS_ALL_DESC : &SQL_EVENTS_ALL_ASC;
	else
		sql = newest ? &SQL_EVENTS_DESC : &SQL_EVENTS_ASC;
	r = sq_stmt(x->c, sql, &st, x->err);
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
	int64_t *positions = NULL;
	size_t n = 0, cap = 0;
	uint64_t stepped = 0;
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(x->c, x->hidden ? (newest ? &SQL_TIMES_ALL_DESC : &SQL_TIMES_ALL_ASC)
					    : (newest ? &SQL_TIMES_DESC : &SQL_TIMES_ASC),
			    &st, x->err);
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
			int64_t *grown = realloc(positions, ncap * sizeof(*positions));
			if (!grown) {
				r = memd_error_set(x->err, MEMD_ENOMEM, 0, "out of memory");
				goto out;
			}
			positions = grown;
			cap = ncap;
		}
		positions[n++] = sqlite3_column_int64(st, 3);
	}
	if (rc != SQLITE_OK && rc != SQLITE_DONE) {
		r = sq_fail(x->c, rc, x->err, "load events of '%.64s'", x->scope->session);
		goto out;
	}
	sq_count_rows(x->call, st, stepped);
	stepped = 0;
	sq_stmt_done(st);
	st = NULL;

	r = sq_stmt(x->c, &SQL_EVENT_BY_POSITION, &st, x->err);
	for (size_t i = 0; r == 0 && i < n; i++) {
		int64_t pos = newest ? positions[n - 1 - i] : positions[i];
		memd_event e;

		rc = sqlite3_bind_int64(st, 1, pos);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			stepped++;
			sq_event_from_row(st, 0, &e);
			r = deliver(x, &e);
		} else {
			r = sq_fail(x->c, rc, x->err, "load the event at %lld of '%.64s'",
				    (long long)pos, x->scope->session);
		}
		sqlite3_reset(st);
	}
out:
	if (st) {
		sq_count_rows(x->call, st, stepped);
		sq_stmt_done(st);
	}
	free(positions);
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
			.err = err, .after = q->after_seq,
			.before = q->before_seq ? q->before_seq : SEQ_UNBOUNDED,
			.roles = pu_event_query_roles(q),
			.hidden = (q->flags & MEMD_EVQ_INCLUDE_HIDDEN) != 0 };
	r = sq_read_begin(store, call, &x.c, err);
	if (r < 0)
		return r;
	r = sq_session_head_get(x.c, call, scope, &head, err);
	if (r == 0)
		r = q->after_time_us ? load_by_time(&x) : load_by_seq(&x);
	sq_read_end(store, x.c);
	return r;
}
