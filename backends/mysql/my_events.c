/* SPDX-License-Identifier: MIT */
#include "my_events.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "plugin_util.h"
#include "pu_group.h"
#include "my_feed.h"
#include "my_lanes.h"
#include "my_sessions.h"
#include "my_state.h"
#include "my_transcripts.h"

#define ROLE_SUMMARY "summary"
#define SEQ_UNBOUNDED INT64_MAX
#define MY_NO_LIMIT UINT64_MAX
/* Bytes of event values sent in one bulk insert at most (and at most half
 * the server's max_allowed_packet); a batch larger than this goes in
 * several (each still in the one transaction). */
#define MY_BULK_MAX_BYTES (4u * 1024u * 1024u)

static const my_sql SQL_EVENT_INSERT = { MY_ST_EVENT_INSERT,
	"INSERT INTO memd_events (" MY_EVENT_COLS_WRITTEN ", is_summary, operation)"
	" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" };
static const my_sql SQL_EVENT_INSERT_BULK = { MY_ST_EVENT_INSERT_BULK,
	"INSERT INTO memd_events (" MY_EVENT_COLS_WRITTEN ", is_summary, operation)"
	" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" };
#define EVENT_INSERT_PARAMS 19
static const my_sql SQL_EVENT_SEQ_BY_ID = { MY_ST_EVENT_SEQ_BY_ID,
	"SELECT seq FROM memd_events WHERE app = ? AND user = ? AND session = ? AND id = ?" };

/* events_load: every query is a range of one of the session's indexes,
 * ?4 < seq < ?5, walked in the order wanted so reading stops at the
 * limit (FORCE INDEX: the optimizer must not pick a scan of the whole
 * session). Visible events (hidden_us = 0, the default) are read from
 * the indexes that have hidden_us before their own columns, so hidden
 * rows are never read; the ORDER BY names only the columns after the
 * fixed ones, so MariaDB walks the index and stops at the limit. NEWEST
 * walks backwards; the plugin puts the rows back in seq order (a derived
 * table would do it on the server, through a temporary table, three
 * times slower). KIND queries filter on is_summary with the summaries
 * index, TIME queries (after_time) use the time index. Every query takes
 * a roles mask as a fixed IN of five values (EV_ROLES: ?1 = 0 for every
 * role, then the names of pu_role_names). The audit reads
 * (MEMD_EVQ_INCLUDE_HIDDEN) walk the seq index with the kind (-1 = any)
 * and the time bound (0 = none) as filters. */
#define EV_FROM " FROM memd_events FORCE INDEX "
#define EV_WHERE " WHERE app = ? AND user = ? AND session = ? AND seq > ? AND seq < ?"
#define EV_VISIBLE " WHERE app = ? AND user = ? AND session = ? AND hidden_us = 0" \
	" AND seq > ? AND seq < ?"
#define EV_ROLES " AND (? = 0 OR role IN (?, ?, ?, ?, ?))"
static const my_sql SQL_EVENTS_ASC = { MY_ST_EVENTS_ASC,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_visible)" EV_VISIBLE EV_ROLES
	" ORDER BY seq LIMIT ?" };
static const my_sql SQL_EVENTS_NEWEST = { MY_ST_EVENTS_NEWEST,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_visible)" EV_VISIBLE EV_ROLES
	" ORDER BY seq DESC LIMIT ?" };
static const my_sql SQL_EVENTS_KIND_ASC = { MY_ST_EVENTS_KIND_ASC,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_visible_summaries)" EV_VISIBLE
	" AND is_summary = ?" EV_ROLES " ORDER BY seq LIMIT ?" };
static const my_sql SQL_EVENTS_KIND_NEWEST = { MY_ST_EVENTS_KIND_NEWEST,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_visible_summaries)" EV_VISIBLE
	" AND is_summary = ?" EV_ROLES " ORDER BY seq DESC LIMIT ?" };
static const my_sql SQL_EVENTS_TIME_ASC = { MY_ST_EVENTS_TIME_ASC,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_visible_by_time)" EV_VISIBLE
	" AND timestamp_us > ?" EV_ROLES " ORDER BY seq LIMIT ?" };
static const my_sql SQL_EVENTS_TIME_NEWEST = { MY_ST_EVENTS_TIME_NEWEST,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_visible_by_time)" EV_VISIBLE
	" AND timestamp_us > ?" EV_ROLES " ORDER BY seq DESC LIMIT ?" };
static const my_sql SQL_EVENTS_TIME_KIND_ASC = { MY_ST_EVENTS_TIME_KIND_ASC,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_visible_by_time)" EV_VISIBLE
	" AND is_summary = ? AND timestamp_us > ?" EV_ROLES " ORDER BY seq LIMIT ?" };
static const my_sql SQL_EVENTS_TIME_KIND_NEWEST = { MY_ST_EVENTS_TIME_KIND_NEWEST,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_visible_by_time)" EV_VISIBLE
	" AND is_summary = ? AND timestamp_us > ?" EV_ROLES " ORDER BY seq DESC LIMIT ?" };
#define EV_ALL_FILTER " AND (? < 0 OR is_summary = ?) AND (? = 0 OR timestamp_us > ?)"
static const my_sql SQL_EVENTS_ALL_ASC = { MY_ST_EVENTS_ALL_ASC,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_by_seq)" EV_WHERE EV_ALL_FILTER EV_ROLES
	" ORDER BY seq LIMIT ?" };
static const my_sql SQL_EVENTS_ALL_NEWEST = { MY_ST_EVENTS_ALL_NEWEST,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_by_seq)" EV_WHERE EV_ALL_FILTER EV_ROLES
	" ORDER BY seq DESC LIMIT ?" };
#define KIND_ANY (-1)

void my_event_from_row(const my_stmt *s, unsigned col0, memd_event *e)
{
	memset(e, 0, sizeof(*e));
	e->struct_size = sizeof(*e);
	e->position = my_col_i64(s, col0 + 0);
	e->app = my_col_text(s, col0 + 1);
	e->user = my_col_text(s, col0 + 2);
	e->session = my_col_text(s, col0 + 3);
	e->seq = my_col_i64(s, col0 + 4);
	e->id = my_col_text(s, col0 + 5);
	e->invocation_id = my_col_text(s, col0 + 6);
	e->author = my_col_text(s, col0 + 7);
	e->role = my_col_text(s, col0 + 8);
	e->branch = my_col_text(s, col0 + 9);
	e->content_json = my_col_text(s, col0 + 10);
	e->actions_json = my_col_text(s, col0 + 11);
	e->metadata_json = my_col_text(s, col0 + 12);
	e->timestamp_us = my_col_i64(s, col0 + 13);
	e->text = my_col_text(s, col0 + 14);
	e->tokens = my_col_i64(s, col0 + 15);
	e->covers_seq = my_col_i64(s, col0 + 16);
	e->hidden_us = my_col_i64(s, col0 + 17);
	e->hidden_by = my_col_text(s, col0 + 18);
	e->hidden_kind = (uint32_t)my_col_i64(s, col0 + 19);
	e->operation = my_col_text(s, col0 + 20);
}

static int is_summary(const char *role)
{
	return role && strcmp(role, ROLE_SUMMARY) == 0;
}

/* ---- append: checks --------------------------------------------------- */

/* Validate the batch before any lock is taken: a bad batch writes nothing. */
static int32_t check_append(const memd_scope *scope, const memd_append *a,
			    const memd_append_result *res, memd_error *err)
{
	const memd_usage *u = my_append_usage(a);
	int32_t r = pu_check_append(scope, a, res, err);

	if (r == 0 && u)
		r = my_usage_check("append usage", u, err);
	return r < 0 ? r : my_state_check(a->state_delta_json, err);
}

/* ---- append: inserting ------------------------------------------------ */

/* One row to insert: an event of an append with its seq and position. */
typedef struct ev_row {
	const memd_scope *scope;
	const memd_event *e;
	int64_t seq, position;
	const char *operation;     /* the append's operation id, or NULL */
} ev_row;

/* The seq of event id in scope's session, or 0 if there is none. */
static int32_t seq_of_id(my_conn *c, const memd_scope *scope, const char *id, int64_t *ret_seq,
			 memd_error *err)
{
	int found = 0;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, scope, 1);
	my_param_text(&p, id);
	*ret_seq = 0;
	r = my_query_i64(c, &SQL_EVENT_SEQ_BY_ID, &p, &found, ret_seq, err);
	if (r == 0 && !found)
		*ret_seq = 0;
	return r;
}

static int32_t insert_one(my_conn *c, const ev_row *w, memd_error *err)
{
	const memd_event *e = w->e;
	my_params p;

	my_params_init(&p);
	my_param_i64(&p, w->position);
	my_param_scope(&p, w->scope, 1);
	my_param_i64(&p, w->seq);
	my_param_text(&p, e->id);
	my_param_text(&p, e->invocation_id);
	my_param_text(&p, e->author);
	my_param_text(&p, e->role);
	my_param_text(&p, e->branch);
	my_param_text(&p, e->content_json);
	my_param_text(&p, e->actions_json);
	my_param_text(&p, e->metadata_json);
	my_param_i64(&p, e->timestamp_us);
	my_param_text(&p, e->text);
	my_param_i64(&p, e->tokens);
	my_param_i64(&p, is_summary(e->role) ? e->covers_seq : 0);
	my_param_i64(&p, is_summary(e->role));
	my_param_text(&p, w->operation);
	return my_exec(c, &SQL_EVENT_INSERT, &p, NULL, err);
}

/* Column arrays for one bulk insert of up to n rows (array binding). */
typedef struct bulk {
	MYSQL_BIND b[EVENT_INSERT_PARAMS];
	long long *ints[EVENT_INSERT_PARAMS];    /* integer columns */
	char **strs[EVENT_INSERT_PARAMS];        /* text columns */
	unsigned long *lens[EVENT_INSERT_PARAMS];
	char *ind[EVENT_INSERT_PARAMS];          /* STMT_INDICATOR_* per row */
} bulk;

/* Column order of the insert: which are integers. */
static const unsigned char bulk_is_int[EVENT_INSERT_PARAMS] = {
	1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 0,
};

static void bulk_free(bulk *k)
{
	for (unsigned i = 0; i < EVENT_INSERT_PARAMS; i++) {
		free(k->ints[i]);
		free(k->strs[i]);
		free(k->lens[i]);
		free(k->ind[i]);
	}
}

static int32_t bulk_alloc(bulk *k, uint32_t n, memd_error *err)
{
	memset(k, 0, sizeof(*k));
	for (unsigned i = 0; i < EVENT_INSERT_PARAMS; i++) {
		MYSQL_BIND *b = &k->b[i];
		k->ind[i] = calloc(n, sizeof(*k->ind[i]));
		if (bulk_is_int[i]) {
			k->ints[i] = calloc(n, sizeof(*k->ints[i]));
			b->buffer_type = MYSQL_TYPE_LONGLONG;
			b->buffer = k->ints[i];
		} else {
			k->strs[i] = calloc(n, sizeof(*k->strs[i]));
			k->lens[i] = calloc(n, sizeof(*k->lens[i]));
			b->buffer_type = MYSQL_TYPE_STRING;
			b->buffer = k->strs[i];
			b->length = k->lens[i];
		}
		b->u.indicator = k->ind[i];
		if (!k->ind[i] || (bulk_is_int[i] ? !k->ints[i] : !k->strs[i] || !k->lens[i])) {
			bulk_free(k);
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		}
	}
	return 0;
}

static void bulk_int(bulk *k, unsigned col, uint32_t row, int64_t v)
{
	k->ints[col][row] = v;
	k->ind[col][row] = STMT_INDICATOR_NONE;
}

static void bulk_text(bulk *k, unsigned col, uint32_t row, const char *v)
{
	k->strs[col][row] = (char *)(v ? v : "");
	k->lens[col][row] = v ? (unsigned long)strlen(v) : 0;
	k->ind[col][row] = v ? STMT_INDICATOR_NONE : STMT_INDICATOR_NULL;
}

static size_t event_bytes(const ev_row *w)
{
	const memd_event *e = w->e;
	const char *fields[] = { e->id, e->invocation_id, e->author, e->role, e->branch,
				 e->content_json, e->actions_json, e->metadata_json, e->text,
				 w->operation };
	size_t n = 0;

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		n += fields[i] ? strlen(fields[i]) : 0;
	return n;
}

/* Insert rows[0, n) in one round trip. */
static int32_t insert_bulk(my_conn *c, const ev_row *rows, uint32_t n, memd_error *err)
{
	bulk k;
	int32_t r = bulk_alloc(&k, n, err);

	if (r < 0)
		return r;
	for (uint32_t row = 0; row < n; row++) {
		const ev_row *w = &rows[row];
		const memd_event *e = w->e;
		unsigned col = 0;
		bulk_int(&k, col++, row, w->position);
		bulk_text(&k, col++, row, w->scope->app);
		bulk_text(&k, col++, row, w->scope->user);
		bulk_text(&k, col++, row, w->scope->session);
		bulk_int(&k, col++, row, w->seq);
		bulk_text(&k, col++, row, e->id);
		bulk_text(&k, col++, row, e->invocation_id);
		bulk_text(&k, col++, row, e->author);
		bulk_text(&k, col++, row, e->role);
		bulk_text(&k, col++, row, e->branch);
		bulk_text(&k, col++, row, e->content_json);
		bulk_text(&k, col++, row, e->actions_json);
		bulk_text(&k, col++, row, e->metadata_json);
		bulk_int(&k, col++, row, e->timestamp_us);
		bulk_text(&k, col++, row, e->text);
		bulk_int(&k, col++, row, e->tokens);
		bulk_int(&k, col++, row, is_summary(e->role) ? e->covers_seq : 0);
		bulk_int(&k, col++, row, is_summary(e->role));
		bulk_text(&k, col++, row, w->operation);
	}
	r = my_exec_bulk(c, &SQL_EVENT_INSERT_BULK, k.b, n, NULL, err);
	bulk_free(&k);
	return r;
}

/* Insert rows[0, n): one row alone, else bulk inserts of at most
 * MY_BULK_MAX_BYTES each. */
static int32_t insert_rows(my_conn *c, const ev_row *rows, uint32_t n, memd_error *err)
{
	uint32_t from = 0;
	int32_t r = 0;

	while (r == 0 && from < n) {
		uint32_t to = from;
		size_t bytes = 0;
		uint64_t budget = my_packet_budget(c) / 2;
		if (budget > MY_BULK_MAX_BYTES)
			budget = MY_BULK_MAX_BYTES;
		while (to < n) {
			size_t eb = event_bytes(&rows[to]) +
				    EVENT_INSERT_PARAMS * MY_PACKET_PARAM_OVERHEAD;
			if (to > from && bytes + eb > budget)
				break;
			bytes += eb;
			to++;
		}
		r = to - from == 1 ? insert_one(c, &rows[from], err)
				   : insert_bulk(c, rows + from, to - from, err);
		from = to;
	}
	return r;
}

/* ---- append: one append inside a group -------------------------------- */

/* An append as the group commit queue carries it (pu_group.h), with what
 * its group's transaction keeps of it. */
typedef struct my_append_req {
	pu_group_req q;            /* first: the queue's pointers convert */
	int check_ids;             /* the batch may have been stored before: look */
	my_session_head head;      /* while its group runs */
	const memd_transcript_op *op; /* the append's operation, or NULL */
	my_tx tx;                  /* what the operation did (with op) */
	my_state_write state;      /* how the delta is recorded (its not_restored) */
} my_append_req;

static my_append_req *req_of(pu_group_req *q)
{
	return (my_append_req *)q;
}

/* The appends of one transaction, in the lock order. */
typedef struct group_ctx {
	pu_group_req **m;
	size_t n;
	size_t n_write;            /* of the last run */
} group_ctx;

/* Inside the group's transaction, with m's session row locked: are the
 * batch's ids stored? All: a replay (seqs filled). Some: a conflict.
 * None: 0 with *ret_none set. */
static int32_t replay_check(my_conn *c, my_append_req *m, int *ret_none, memd_error *err)
{
	const memd_append *a = m->q.a;
	uint32_t n_existing = 0;
	const char *some = NULL;
	int32_t r = 0;

	*ret_none = 0;
	for (uint32_t i = 0; r == 0 && i < a->n_events; i++) {
		r = seq_of_id(c, m->q.scope, a->events[i]->id, &m->q.seqs[i], err);
		if (r == 0 && m->q.seqs[i]) {
			n_existing++;
			some = a->events[i]->id;
		}
		/* Unless an insert clashed, the first id decides in one
		 * read (a replay resends the whole batch). */
		if (r == 0 && i == 0 && n_existing == 0 && !m->check_ids) {
			*ret_none = 1;
			break;
		}
	}
	if (r < 0 || *ret_none)
		return r;
	if (n_existing == a->n_events) {
		m->q.version = m->head.version;
		m->q.replayed = 1;
		return 0;
	}
	if (n_existing == 0) {
		*ret_none = 1;
		return 0;
	}
	return pu_err_ids_stored(n_existing, a->n_events, some, err);
}

/* Lock m's session and decide: replay, refuse (m->q.rc, m->q.err) or
 * write. Returns < 0 only when a statement failed (the group's
 * transaction is in doubt). */
static int32_t decide(my_conn *c, my_append_req *m, memd_error *err)
{
	const memd_append *a = m->q.a;
	int none = 1;
	/* Every writer of a session takes its row lock first: seqs and the
	 * version are read and advanced by one transaction at a time. */
	int32_t r;

	c->last_errno = 0;
	r = my_session_lock(c, m->q.scope, &m->head, &m->q.err);
	/* An idempotent retry is answered with the stored seqs (before the
	 * version check: the first attempt moved the version on). Only
	 * looked for when an insert found a clash, or the version is not
	 * the expected one (a retry after an unknown outcome). */
	if (r == 0 && a->n_events &&
	    (m->check_ids || m->op ||
	     ((a->flags & MEMD_APPEND_EXPECT_VERSION) && m->head.version != a->expected_version)))
		r = replay_check(c, m, &none, &m->q.err);
	if (r == 0 && !m->q.replayed && (a->flags & MEMD_APPEND_EXPECT_VERSION) &&
	    m->head.version != a->expected_version)
		r = pu_err_version(m->q.scope, m->head.version, a->expected_version, &m->q.err);
	/* An operation's own refusals come after the version's (its id is
	 * taken, an undo's target is missing, undone or not the last). */
	if (r == 0 && !m->q.replayed && m->op)
		r = my_tx_check(c, m->q.scope, m->op, m->head.version, a->now_us, &m->tx,
				&m->q.err);
	if (r < 0 && c->last_errno == 0 && (r == MEMD_ENOTFOUND || r == MEMD_ECONFLICT)) {
		/* Refused on its own merits: the others go on. */
		m->q.rc = r;
		m->q.status = PU_GROUP_DONE;
		return 0;
	}
	if (r < 0) {
		*err = m->q.err;
		return r;
	}
	m->q.status = m->q.replayed ? PU_GROUP_DONE : PU_GROUP_WRITE;
	return 0;
}

/* Inside the group's transaction, for a member that writes: its
 * operation (hiding, before its events), its seqs, state (recorded),
 * session row, usage and operation record. Adds the feed positions it
 * needs (records of its operation, then its events) to *positions. */
static int32_t write_member(my_conn *c, my_append_req *m, uint64_t *positions, memd_error *err)
{
	const memd_append *a = m->q.a;
	my_session_head *h = &m->head;
	int64_t added = 0, first_seq = 0, last_seq = 0;
	int32_t r = 0;

	if (m->op) {
		r = my_tx_apply(c, m->q.scope, &m->tx, &h->summary_seq, err);
		added = m->tx.messages_added;
		*positions += (uint64_t)(m->tx.hidden + m->tx.unhidden);
	}
	for (uint32_t j = 0; r == 0 && j < a->n_events; j++) {
		m->q.seqs[j] = ++h->last_seq;
		if (is_summary(a->events[j]->role))
			h->summary_seq = m->q.seqs[j];
		else
			added++;
	}
	if (a->n_events) {
		first_seq = m->q.seqs[0];
		last_seq = m->q.seqs[a->n_events - 1];
	}
	*positions += a->n_events;
	m->state.version = h->version + 1;
	m->state.seq = h->last_seq;
	m->state.at_us = a->now_us;
	m->state.operation = m->op ? m->op->id : NULL;
	m->state.expect_json = m->op ? m->op->state_expect_json : NULL;
	if (r == 0)
		r = my_state_apply(c, m->q.scope, a->state_delta_json, &m->state, err);
	if (r == 0)
		r = my_session_appended(c, m->q.scope, h, added, a->now_us, a->title_if_unset, err);
	if (r == 0 && my_append_usage(a))
		r = my_usage_appended(c, m->q.scope, my_append_usage(a), err);
	if (r == 0 && m->op)
		r = my_tx_record(c, m->q.scope, &m->tx, h->version + 1, a->now_us, first_seq,
				 last_seq, err);
	return r;
}

/* The group's transaction: lock every member's session (in the sorted
 * order) and decide it, then write each writer (write_member), then the
 * feed positions (the counter's lock last: held to the commit, see
 * my_feed.h), each writer's operation records and every event in as few
 * inserts as fit. */
static int32_t group_body(my_conn *c, void *arg, memd_error *err)
{
	group_ctx *g = arg;
	pu_group_req **m = g->m;
	uint64_t total = 0, positions = 0;
	int64_t pos = 0, off = 0;
	ev_row *rows = NULL;
	uint32_t k = 0;
	int32_t r = 0;

	g->n_write = 0;
	pu_group_begin(m, g->n);
	for (size_t i = 0; r == 0 && i < g->n; i++)
		r = decide(c, req_of(m[i]), err);
	for (size_t i = 0; r == 0 && i < g->n; i++) {
		if (m[i]->status != PU_GROUP_WRITE)
			continue;
		g->n_write++;
		total += m[i]->a->n_events;
		r = write_member(c, req_of(m[i]), &positions, err);
	}
	if (r < 0 || positions == 0)
		return r;
	if (positions > UINT32_MAX)
		return memd_error_set(err, MEMD_ETOOBIG, 0, "append of more than %u events",
				      (unsigned)UINT32_MAX);
	rows = calloc(total ? total : 1, sizeof(*rows));
	if (!rows)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	/* Positions last: the feed counter's lock is held from here to the
	 * commit (see my_feed.h); one advance for the whole group. */
	r = my_feed_alloc(c, (uint32_t)positions, &pos, err);
	for (size_t i = 0; r == 0 && i < g->n; i++) {
		my_append_req *w = req_of(m[i]);
		if (m[i]->status != PU_GROUP_WRITE)
			continue;
		if (w->op) {
			r = my_tx_marks(c, m[i]->scope, &w->tx, pos + off, err);
			off += w->tx.hidden + w->tx.unhidden;
		}
		for (uint32_t j = 0; j < m[i]->a->n_events; j++, k++)
			rows[k] = (ev_row){ .scope = m[i]->scope, .e = m[i]->a->events[j],
					    .seq = m[i]->seqs[j], .position = pos + off++,
					    .operation = w->op ? w->op->id : NULL };
	}
	if (r == 0 && k > 0)
		r = insert_rows(c, rows, k, err);
	free(rows);
	if (r == MEMD_ECONFLICT && g->n == 1 && !req_of(m[0])->check_ids &&
	    c->last_errno == ER_DUP_ENTRY) {
		/* An id of the batch is stored already: roll back and look
		 * (a replay or a conflict). */
		req_of(m[0])->check_ids = 1;
	}
	return r;
}

/* Worth running the members one by one: the failure may be one
 * member's (its data, a lock on its session held past the lock wait
 * timeout, the leader's call running out of time) rather than the
 * connection's or the memory's. */
static int member_failure(const my_conn *c, int32_t r)
{
	return r < 0 && !c->lost && r != MEMD_ENOMEM;
}

/* Run members m[0..n) (in the lock order) in one transaction on c (a
 * connection the caller holds; NULL = take one for the run) until each
 * has its answer. */
static void group_run(my_store *s, const memd_call *call, my_conn *c, pu_group_req **m,
		      size_t n)
{
	memd_error err = { .struct_size = sizeof(err) };
	group_ctx g = { .m = m, .n = n };
	int checked = n == 1 && req_of(m[0])->check_ids;
	int32_t r;

	for (;;) {
		r = c ? my_run_on(s, c, call, MY_TXN, group_body, &g, &err)
		      : my_run(s, call, MY_TXN, group_body, &g, &err);
		if (r == MEMD_ECONFLICT && n == 1 && !checked && req_of(m[0])->check_ids) {
			/* Rolled back; run again, now looking for the ids first. */
			checked = 1;
			continue;
		}
		break;
	}
	if (r == 0) {
		for (size_t i = 0; i < n; i++)
			if (m[i]->status == PU_GROUP_WRITE) {
				m[i]->version = req_of(m[i])->head.version + 1;
				m[i]->status = PU_GROUP_DONE;
			}
		pu_group_note_written(s->group, g.n_write);
		return;
	}
	if (n > 1 && (!c || member_failure(c, r))) {
		/* The shared transaction is rolled back: one by one, each on
		 * its own call, so only the culprit fails. */
		for (size_t i = 0; i < n; i++)
			group_run(s, m[i]->call, c, &m[i], 1);
		return;
	}
	pu_group_fail(m, n, r, &err);
}

/* ---- append: the group commit queue ----------------------------------- */

static int32_t queue_try_take(void *store, const memd_call *call, void **ret_conn,
			      memd_error *err)
{
	my_conn *c = NULL;

	(void)call;
	(void)err;
	my_try_take(store, &c);
	*ret_conn = c;
	return 0;
}

static void queue_run(void *store, const memd_call *call, void **conn, pu_group_req **m,
		      size_t n)
{
	group_run(store, call, *conn, m, n);
}

static void queue_give(void *store, void *conn)
{
	my_give(store, conn);
}

static const pu_group_ops group_ops = {
	.name = "mysql",
	.try_take = queue_try_take,
	.run = queue_run,
	.give = queue_give,
};

int32_t my_group_init(my_store *s, memd_error *err)
{
	return pu_group_new(&group_ops, s, s->opt.group_commit, &s->group, err);
}

void my_group_free(my_store *s)
{
	if (!s || !s->group)
		return;
	pu_group_log_stats(s->group, s->host);
	pu_group_free(s->group);
	s->group = NULL;
}

void my_group_wake(my_store *s)
{
	pu_group_wake(s->group);
}

int32_t my_append(void *inst, const memd_call *call, const memd_scope *scope,
		  const memd_append *a, memd_append_result *res, memd_error *err)
{
	my_store *store = inst;
	my_append_req req = { .q = { .call = call, .scope = scope, .a = a },
			      .op = pu_append_op(a) };
	int32_t r = check_append(scope, a, res, err);

	if (r == 0)
		r = pu_group_append(store->group, &req.q, res, err);
	if (r == 0 && !(res->flags & MEMD_APPEND_REPLAYED) && req.op) {
		if (res->struct_size >= offsetof(memd_append_result, unhidden_count) +
					       sizeof(res->unhidden_count)) {
			res->hidden_count = req.tx.hidden;
			res->unhidden_count = req.tx.unhidden;
		}
		/* Delivered after the commit: the transaction may have run
		 * more than once. */
		if (req.op->not_restored && req.op->not_restored->text && req.state.not_restored)
			r = my_sink_result(req.op->not_restored->text(req.op->not_restored->userdata,
								      req.state.not_restored,
								      strlen(req.state.not_restored)),
					   "not_restored", err);
		if (r > 0)
			r = 0;
	}
	free(req.state.not_restored);
	return r;
}

/* ---- events_load ------------------------------------------------------ */

typedef struct load_ctx {
	my_store *store;
	const memd_call *call;
	const memd_scope *scope;
	const memd_event_query *q;
	const memd_event_sink *out;
} load_ctx;

static int is_newest(const memd_event_query *q)
{
	return (q->flags & MEMD_EVQ_NEWEST) && q->limit > 0;
}

static const my_sql *pick_query(const memd_event_query *q)
{
	int newest = is_newest(q);
	int kind = (q->flags & (MEMD_EVQ_NO_SUMMARY | MEMD_EVQ_ONLY_SUMMARY)) != 0;

	if (q->flags & MEMD_EVQ_INCLUDE_HIDDEN)
		return newest ? &SQL_EVENTS_ALL_NEWEST : &SQL_EVENTS_ALL_ASC;
	if (q->after_time_us)
		return kind ? (newest ? &SQL_EVENTS_TIME_KIND_NEWEST : &SQL_EVENTS_TIME_KIND_ASC)
			    : (newest ? &SQL_EVENTS_TIME_NEWEST : &SQL_EVENTS_TIME_ASC);
	return kind ? (newest ? &SQL_EVENTS_KIND_NEWEST : &SQL_EVENTS_KIND_ASC)
		    : (newest ? &SQL_EVENTS_NEWEST : &SQL_EVENTS_ASC);
}

static int32_t load_body(my_conn *c, void *arg, memd_error *err)
{
	load_ctx *x = arg;
	const memd_event_query *q = x->q;
	int newest = is_newest(q);
	pu_event_copy *kept = NULL;
	uint32_t n_kept = 0;
	uint64_t n = 0;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	int kind = (q->flags & MEMD_EVQ_ONLY_SUMMARY) ? 1
		   : (q->flags & MEMD_EVQ_NO_SUMMARY) ? 0 : KIND_ANY;
	uint32_t roles = pu_event_query_roles(q);
	const char *role_names[PU_ROLES_COUNT];

	my_params_init(&p);
	my_param_scope(&p, x->scope, 1);
	my_param_i64(&p, q->after_seq);
	my_param_i64(&p, q->before_seq ? q->before_seq : SEQ_UNBOUNDED);
	if (q->flags & MEMD_EVQ_INCLUDE_HIDDEN) {
		my_param_i64(&p, kind);
		my_param_i64(&p, kind);
		my_param_i64(&p, q->after_time_us);
		my_param_i64(&p, q->after_time_us);
	} else {
		if (kind != KIND_ANY)
			my_param_i64(&p, kind);
		if (q->after_time_us)
			my_param_i64(&p, q->after_time_us);
	}
	pu_role_names(roles, role_names);
	my_param_i64(&p, roles);
	for (unsigned i = 0; i < PU_ROLES_COUNT; i++)
		my_param_text(&p, role_names[i]);
	my_param_u64(&p, q->limit ? q->limit : MY_NO_LIMIT);
	if (newest) {
		kept = calloc(q->limit, sizeof(*kept));
		if (!kept)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	r = my_exec(c, pick_query(q), &p, &s, err);
	while (r == 0 && (r = my_fetch(c, s, err)) == 1) {
		memd_event e;
		my_event_from_row(s, 0, &e);
		if (newest && n_kept < q->limit)
			r = pu_event_copy_make(&e, &kept[n_kept++], err);
		else
			r = my_sink_result(x->out->event(x->out->userdata, &e), "event", err);
		if (r == 0 && ++n % MY_CHECK_EVERY == 0)
			r = my_call_check(x->store, x->call, err);
	}
	my_done(s);
	for (uint32_t i = n_kept; i > 0 && r == 0; i--)
		r = my_sink_result(x->out->event(x->out->userdata, &kept[i - 1].e), "event", err);
	for (uint32_t i = 0; i < n_kept; i++)
		free(kept[i].buf);
	free(kept);
	if (r > 0)
		return 0; /* the sink asked to stop */
	if (r == 0 && n == 0) {
		/* No rows: tell an empty session from a missing one. */
		int exists = 0;
		r = my_session_exists(c, x->scope, &exists, err);
		if (r == 0 && !exists)
			r = memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
					   x->scope->session);
	}
	return r;
}

int32_t my_events_load(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_event_query *q, const memd_event_sink *out, memd_error *err)
{
	load_ctx x = { .store = inst, .call = call, .scope = scope, .q = q, .out = out };
	int32_t r = pu_check_event_query(scope, q, out, err);

	if (r < 0)
		return r;
	return my_run(inst, call, MY_AUTOCOMMIT, load_body, &x, err);
}
