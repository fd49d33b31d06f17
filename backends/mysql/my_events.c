/* SPDX-License-Identifier: MIT */
#include "my_events.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mysqld_error.h>

#include "plugin_util.h"
#include "my_feed.h"
#include "my_sessions.h"
#include "my_state.h"

#define ROLE_SUMMARY "summary"
#define SEQ_UNBOUNDED INT64_MAX
#define MY_NO_LIMIT UINT64_MAX
#define MY_US_PER_SEC 1000000
#define MY_NS_PER_US 1000
/* Bytes of event values sent in one bulk insert at most (and at most half
 * the server's max_allowed_packet); a batch larger than this goes in
 * several (each still in the one transaction). */
#define MY_BULK_MAX_BYTES (4u * 1024u * 1024u)

static const my_sql SQL_EVENT_INSERT = { MY_ST_EVENT_INSERT,
	"INSERT INTO memd_events (" MY_EVENT_COLS ", is_summary)"
	" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" };
static const my_sql SQL_EVENT_INSERT_BULK = { MY_ST_EVENT_INSERT_BULK,
	"INSERT INTO memd_events (" MY_EVENT_COLS ", is_summary)"
	" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" };
#define EVENT_INSERT_PARAMS 18
static const my_sql SQL_EVENT_SEQ_BY_ID = { MY_ST_EVENT_SEQ_BY_ID,
	"SELECT seq FROM memd_events WHERE app = ? AND user = ? AND session = ? AND id = ?" };

/* events_load: every query is a range of one of the session's indexes,
 * ?4 < seq < ?5, walked in the order wanted so reading stops at the
 * limit (FORCE INDEX: the optimizer must not pick a scan of the whole
 * session). NEWEST walks backwards; the plugin puts the rows back in seq
 * order (a derived table would do it on the server, through a temporary
 * table, three times slower). KIND queries filter on is_summary (?6)
 * with the summaries index. TIME queries (after_time, ?7) use the time
 * index. */
#define EV_FROM " FROM memd_events FORCE INDEX "
#define EV_WHERE " WHERE app = ? AND user = ? AND session = ? AND seq > ? AND seq < ?"
static const my_sql SQL_EVENTS_ASC = { MY_ST_EVENTS_ASC,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_by_seq)" EV_WHERE
	" ORDER BY seq LIMIT ?" };
static const my_sql SQL_EVENTS_NEWEST = { MY_ST_EVENTS_NEWEST,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_by_seq)" EV_WHERE
	" ORDER BY seq DESC LIMIT ?" };
static const my_sql SQL_EVENTS_KIND_ASC = { MY_ST_EVENTS_KIND_ASC,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_summaries)" EV_WHERE
	" AND is_summary = ? ORDER BY seq LIMIT ?" };
static const my_sql SQL_EVENTS_KIND_NEWEST = { MY_ST_EVENTS_KIND_NEWEST,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_summaries)" EV_WHERE
	" AND is_summary = ? ORDER BY seq DESC LIMIT ?" };
static const my_sql SQL_EVENTS_TIME_ASC = { MY_ST_EVENTS_TIME_ASC,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_by_time)" EV_WHERE
	" AND timestamp_us > ? ORDER BY seq LIMIT ?" };
static const my_sql SQL_EVENTS_TIME_NEWEST = { MY_ST_EVENTS_TIME_NEWEST,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_by_time)" EV_WHERE
	" AND timestamp_us > ? ORDER BY seq DESC LIMIT ?" };
static const my_sql SQL_EVENTS_TIME_KIND_ASC = { MY_ST_EVENTS_TIME_KIND_ASC,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_by_time)" EV_WHERE
	" AND is_summary = ? AND timestamp_us > ? ORDER BY seq LIMIT ?" };
static const my_sql SQL_EVENTS_TIME_KIND_NEWEST = { MY_ST_EVENTS_TIME_KIND_NEWEST,
	"SELECT " MY_EVENT_COLS EV_FROM "(memd_events_by_time)" EV_WHERE
	" AND is_summary = ? AND timestamp_us > ? ORDER BY seq DESC LIMIT ?" };

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
	int32_t r = pu_check_append(scope, a, res, err);
	return r < 0 ? r : my_state_check(a->state_delta_json, err);
}

/* ---- append: inserting ------------------------------------------------ */

/* One row to insert: an event of an append with its seq and position. */
typedef struct ev_row {
	const memd_scope *scope;
	const memd_event *e;
	int64_t seq, position;
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
	1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1,
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

static size_t event_bytes(const memd_event *e)
{
	const char *fields[] = { e->id, e->invocation_id, e->author, e->role, e->branch,
				 e->content_json, e->actions_json, e->metadata_json, e->text };
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
			size_t eb = event_bytes(rows[to].e) +
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

/* What a member does in its group's transaction. */
#define REQ_PENDING 0 /* not decided yet */
#define REQ_WRITE   1 /* writes in the group's transaction */
#define REQ_DONE    2 /* answered without writing (replay, or refused) */

typedef struct my_append_req {
	/* input */
	const memd_call *call;
	const memd_scope *scope;
	const memd_append *a;
	/* output */
	int64_t *seqs;             /* a->n_events slots, ours */
	int64_t version;
	int replayed;
	int32_t rc;
	memd_error err;
	int check_ids;             /* the batch may have been stored before: look */
	/* group queue */
	int queued;                /* waiting for a leader */
	int finished;              /* rc and outputs are final */
	struct my_append_req *next;
	/* while its group runs */
	int status;                /* REQ_* */
	my_session_head head;
} my_append_req;

struct my_group {
	pthread_mutex_t lock;
	pthread_cond_t cond;       /* a group finished or a connection came back */
	uint64_t gen;              /* + 1 per connection given back */
	my_append_req *head, *tail;
	/* statistics, logged at close */
	uint64_t n_txns;           /* transactions that wrote appends */
	uint64_t n_appends;        /* appends they wrote */
	uint32_t max_batch;        /* most appends one of them wrote */
};

/* The appends of one transaction, in the lock order. */
typedef struct group_ctx {
	my_append_req **m;
	size_t n;
	size_t n_write;            /* of the last run */
} group_ctx;

/* Inside the group's transaction, with m's session row locked: are the
 * batch's ids stored? All: a replay (seqs filled). Some: a conflict.
 * None: 0 with *ret_none set. */
static int32_t replay_check(my_conn *c, my_append_req *m, int *ret_none, memd_error *err)
{
	const memd_append *a = m->a;
	uint32_t n_existing = 0;
	const char *some = NULL;
	int32_t r = 0;

	*ret_none = 0;
	for (uint32_t i = 0; r == 0 && i < a->n_events; i++) {
		r = seq_of_id(c, m->scope, a->events[i]->id, &m->seqs[i], err);
		if (r == 0 && m->seqs[i]) {
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
		m->version = m->head.version;
		m->replayed = 1;
		return 0;
	}
	if (n_existing == 0) {
		*ret_none = 1;
		return 0;
	}
	return memd_error_set(err, MEMD_ECONFLICT, 0,
			      "%u of the batch's %u event ids already exist (e.g. '%.64s'): a retry "
			      "must resend the same batch",
			      (unsigned)n_existing, (unsigned)a->n_events, some);
}

/* Lock m's session and decide: replay, refuse (m->rc, m->err) or write.
 * Returns < 0 only when a statement failed (the group's transaction is
 * in doubt). */
static int32_t decide(my_conn *c, my_append_req *m, memd_error *err)
{
	const memd_append *a = m->a;
	int none = 1;
	/* Every writer of a session takes its row lock first: seqs and the
	 * version are read and advanced by one transaction at a time. */
	int32_t r;

	c->last_errno = 0;
	r = my_session_lock(c, m->scope, &m->head, &m->err);
	/* An idempotent retry is answered with the stored seqs (before the
	 * version check: the first attempt moved the version on). Only
	 * looked for when an insert found a clash, or the version is not
	 * the expected one (a retry after an unknown outcome). */
	if (r == 0 && a->n_events &&
	    (m->check_ids || ((a->flags & MEMD_APPEND_EXPECT_VERSION) &&
			      m->head.version != a->expected_version)))
		r = replay_check(c, m, &none, &m->err);
	if (r == 0 && !m->replayed && (a->flags & MEMD_APPEND_EXPECT_VERSION) &&
	    m->head.version != a->expected_version)
		r = memd_error_set(&m->err, MEMD_ECONFLICT, 0,
				   "session '%.64s' is at version %lld, not the expected %lld",
				   m->scope->session, (long long)m->head.version,
				   (long long)a->expected_version);
	if (r < 0 && c->last_errno == 0 && (r == MEMD_ENOTFOUND || r == MEMD_ECONFLICT)) {
		/* Refused on its own merits: the others go on. */
		m->rc = r;
		m->status = REQ_DONE;
		return 0;
	}
	if (r < 0) {
		*err = m->err;
		return r;
	}
	m->status = m->replayed ? REQ_DONE : REQ_WRITE;
	return 0;
}

/* The group's transaction: lock every member's session (in the sorted
 * order) and decide it, then for the writers their state, their session
 * rows, the feed positions (the counter's lock last: held to the commit,
 * see my_feed.h) and every event in as few inserts as fit. */
static int32_t group_body(my_conn *c, void *arg, memd_error *err)
{
	group_ctx *g = arg;
	my_append_req **m = g->m;
	uint64_t total = 0;
	int64_t pos = 0;
	ev_row *rows = NULL;
	uint32_t k = 0;
	int32_t r = 0;

	g->n_write = 0;
	for (size_t i = 0; i < g->n; i++) {
		m[i]->status = REQ_PENDING;
		m[i]->rc = 0;
		m[i]->replayed = 0;
	}
	for (size_t i = 0; r == 0 && i < g->n; i++)
		r = decide(c, m[i], err);
	for (size_t i = 0; r == 0 && i < g->n; i++) {
		const memd_append *a = m[i]->a;
		my_session_head *h = &m[i]->head;
		if (m[i]->status != REQ_WRITE)
			continue;
		g->n_write++;
		total += a->n_events;
		for (uint32_t j = 0; j < a->n_events; j++) {
			m[i]->seqs[j] = ++h->last_seq;
			if (is_summary(a->events[j]->role))
				h->summary_seq = m[i]->seqs[j];
		}
		r = my_state_apply(c, m[i]->scope, a->state_delta_json, err);
		if (r == 0)
			r = my_session_appended(c, m[i]->scope, h, a->now_us, a->title_if_unset,
						err);
	}
	if (r < 0 || total == 0)
		return r;
	if (total > UINT32_MAX)
		return memd_error_set(err, MEMD_ETOOBIG, 0, "append of more than %u events",
				      (unsigned)UINT32_MAX);
	rows = calloc(total, sizeof(*rows));
	if (!rows)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	/* Positions last: the feed counter's lock is held from here to the
	 * commit (see my_feed.h); one advance for the whole group. */
	r = my_feed_alloc(c, (uint32_t)total, &pos, err);
	for (size_t i = 0; r == 0 && i < g->n; i++) {
		if (m[i]->status != REQ_WRITE)
			continue;
		for (uint32_t j = 0; j < m[i]->a->n_events; j++, k++)
			rows[k] = (ev_row){ .scope = m[i]->scope, .e = m[i]->a->events[j],
					    .seq = m[i]->seqs[j], .position = pos + k };
	}
	if (r == 0)
		r = insert_rows(c, rows, k, err);
	free(rows);
	if (r == MEMD_ECONFLICT && g->n == 1 && !m[0]->check_ids &&
	    c->last_errno == ER_DUP_ENTRY) {
		/* An id of the batch is stored already: roll back and look
		 * (a replay or a conflict). */
		m[0]->check_ids = 1;
	}
	return r;
}

static int cmp_req(const void *pa, const void *pb)
{
	const my_append_req *a = *(my_append_req *const *)pa, *b = *(my_append_req *const *)pb;
	int c = strcmp(a->scope->app, b->scope->app);

	if (!c)
		c = strcmp(a->scope->user, b->scope->user);
	if (!c)
		c = strcmp(a->scope->session, b->scope->session);
	return c;
}

/* Worth running the members one by one: the failure may be one
 * member's (its data, a lock on its session held past the lock wait
 * timeout, the leader's call running out of time) rather than the
 * connection's or the memory's. */
static int member_failure(const my_conn *c, int32_t r)
{
	return r < 0 && !c->lost && r != MEMD_ENOMEM;
}

static void note_written(my_store *s, size_t n_write)
{
	struct my_group *g = s->group;

	if (!n_write)
		return;
	pthread_mutex_lock(&g->lock);
	g->n_txns++;
	g->n_appends += n_write;
	if (n_write > g->max_batch)
		g->max_batch = (uint32_t)n_write;
	pthread_mutex_unlock(&g->lock);
}

/* Run members m[0..n) in one transaction on c (a connection the caller
 * holds; NULL = take one for the run) until each has its answer. */
static void group_run(my_store *s, const memd_call *call, my_conn *c, my_append_req **m,
		      size_t n)
{
	memd_error err = { .struct_size = sizeof(err) };
	group_ctx g = { .m = m, .n = n };
	int checked = n == 1 && m[0]->check_ids;
	int32_t r;

	if (n > 1)
		qsort(m, n, sizeof(*m), cmp_req);
	for (;;) {
		r = c ? my_run_on(s, c, call, MY_TXN, group_body, &g, &err)
		      : my_run(s, call, MY_TXN, group_body, &g, &err);
		if (r == MEMD_ECONFLICT && n == 1 && !checked && m[0]->check_ids) {
			/* Rolled back; run again, now looking for the ids first. */
			checked = 1;
			continue;
		}
		break;
	}
	if (r == 0) {
		for (size_t i = 0; i < n; i++)
			if (m[i]->status == REQ_WRITE) {
				m[i]->version = m[i]->head.version + 1;
				m[i]->status = REQ_DONE;
			}
		note_written(s, g.n_write);
		return;
	}
	if (n > 1 && (!c || member_failure(c, r))) {
		/* The shared transaction is rolled back: one by one, each on
		 * its own call, so only the culprit fails. */
		for (size_t i = 0; i < n; i++)
			group_run(s, m[i]->call, c, &m[i], 1);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		m[i]->rc = r;
		m[i]->err = err;
		m[i]->status = REQ_DONE;
	}
}

/* ---- append: the group commit queue ----------------------------------- */

int32_t my_group_init(my_store *s, memd_error *err)
{
	pthread_condattr_t cattr;
	struct my_group *g = calloc(1, sizeof(*g));

	if (!g)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	pthread_mutex_init(&g->lock, NULL);
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&g->cond, &cattr);
	pthread_condattr_destroy(&cattr);
	s->group = g;
	return 0;
}

void my_group_free(my_store *s)
{
	struct my_group *g = s ? s->group : NULL;

	if (!g)
		return;
	if (g->n_appends && s->host && s->host->log)
		s->host->log(s->host, MEMD_LOG_DEBUG,
			     "group commit: %llu appends written in %llu transactions "
			     "(at most %u in one)",
			     (unsigned long long)g->n_appends, (unsigned long long)g->n_txns,
			     (unsigned)g->max_batch);
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
	free(g);
	s->group = NULL;
}

void my_group_wake(my_store *s)
{
	if (!s->group)
		return;
	pthread_mutex_lock(&s->group->lock);
	s->group->gen++;
	pthread_cond_broadcast(&s->group->cond);
	pthread_mutex_unlock(&s->group->lock);
}

static void queue_remove(struct my_group *g, my_append_req *q)
{
	my_append_req **pp = &g->head;

	while (*pp && *pp != q)
		pp = &(*pp)->next;
	if (!*pp)
		return;
	*pp = q->next;
	if (g->tail == q) {
		g->tail = g->head;
		while (g->tail && g->tail->next)
			g->tail = g->tail->next;
	}
	q->next = NULL;
	q->queued = 0;
}

static int same_session(const my_append_req *a, const my_append_req *b)
{
	return strcmp(a->scope->session, b->scope->session) == 0 &&
	       strcmp(a->scope->user, b->scope->user) == 0 &&
	       strcmp(a->scope->app, b->scope->app) == 0;
}

/* Take up to max queued appends to distinct sessions, mine first if it is
 * still queued. Called with g->lock held. */
static size_t queue_take(struct my_group *g, my_append_req *mine, my_append_req **out,
			 size_t max)
{
	size_t n = 0;

	if (mine->queued) {
		queue_remove(g, mine);
		out[n++] = mine;
	}
	for (my_append_req *q = g->head, *next; q && n < max; q = next) {
		int clash = 0;
		next = q->next;
		for (size_t i = 0; i < n && !clash; i++)
			clash = same_session(q, out[i]);
		if (clash)
			continue;
		queue_remove(g, q);
		out[n++] = q;
	}
	return n;
}

/* Queue me, then either serve a group (mine and others) on an idle
 * connection, or wait until a connection comes back or another thread's
 * group answered me. */
static void append_grouped(my_store *s, my_append_req *me)
{
	struct my_group *g = s->group;
	const memd_call *call = me->call;
	my_append_req **batch = calloc(s->opt.group_commit, sizeof(*batch));

	if (!batch) {
		me->rc = memd_error_set(&me->err, MEMD_ENOMEM, 0, "out of memory");
		return;
	}
	pthread_mutex_lock(&g->lock);
	me->queued = 1;
	if (g->tail)
		g->tail->next = me;
	else
		g->head = me;
	g->tail = me;
	while (!me->finished) {
		if (me->queued) {
			my_conn *c = NULL;
			uint64_t seen = g->gen;
			size_t n;

			pthread_mutex_unlock(&g->lock);
			my_try_take(s, &c);
			pthread_mutex_lock(&g->lock);
			if (c) {
				n = queue_take(g, me, batch, s->opt.group_commit);
				pthread_mutex_unlock(&g->lock);
				if (n)
					group_run(s, call, c, batch, n);
				my_give(s, c);
				pthread_mutex_lock(&g->lock);
				for (size_t i = 0; i < n; i++)
					batch[i]->finished = 1;
				pthread_cond_broadcast(&g->cond);
				continue;
			}
			if (!me->queued || g->gen != seen)
				continue; /* answered, or a connection came back meanwhile */
		}
		if (call && call->deadline_us) {
			struct timespec ts = {
				.tv_sec = call->deadline_us / MY_US_PER_SEC,
				.tv_nsec = (call->deadline_us % MY_US_PER_SEC) * MY_NS_PER_US,
			};
			if (pthread_cond_timedwait(&g->cond, &g->lock, &ts) == ETIMEDOUT &&
			    me->queued) {
				queue_remove(g, me);
				me->rc = memd_error_set(&me->err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
							"mysql: deadline passed waiting for a "
							"connection");
				me->finished = 1;
			}
		} else {
			pthread_cond_wait(&g->cond, &g->lock);
		}
	}
	pthread_mutex_unlock(&g->lock);
	free(batch);
}

int32_t my_append(void *inst, const memd_call *call, const memd_scope *scope,
		  const memd_append *a, memd_append_result *res, memd_error *err)
{
	my_store *store = inst;
	my_append_req req = { .call = call, .scope = scope, .a = a };
	int32_t r = check_append(scope, a, res, err);

	if (r < 0)
		return r;
	req.err.struct_size = sizeof(req.err);
	if (a->n_events) {
		req.seqs = calloc(a->n_events, sizeof(*req.seqs));
		if (!req.seqs)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	if (store->opt.group_commit > 1) {
		append_grouped(store, &req);
	} else {
		my_append_req *one = &req;
		group_run(store, call, NULL, &one, 1);
	}
	r = req.rc;
	if (r == 0) {
		if (a->n_events)
			memcpy(res->seqs, req.seqs, a->n_events * sizeof(*req.seqs));
		res->version = req.version;
		res->flags = req.replayed ? MEMD_APPEND_REPLAYED : 0;
	} else if (err) {
		*err = req.err;
	}
	free(req.seqs);
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

	if (q->after_time_us)
		return kind ? (newest ? &SQL_EVENTS_TIME_KIND_NEWEST : &SQL_EVENTS_TIME_KIND_ASC)
			    : (newest ? &SQL_EVENTS_TIME_NEWEST : &SQL_EVENTS_TIME_ASC);
	return kind ? (newest ? &SQL_EVENTS_KIND_NEWEST : &SQL_EVENTS_KIND_ASC)
		    : (newest ? &SQL_EVENTS_NEWEST : &SQL_EVENTS_ASC);
}

/* An event copied out of a row (NEWEST rows arrive newest first and are
 * delivered after the read, oldest first). */
typedef struct event_copy {
	memd_event e;
	char *buf;
} event_copy;

static const char **string_slot(memd_event *e, size_t k)
{
	const char **slots[] = { &e->app, &e->user, &e->session, &e->id, &e->invocation_id,
				 &e->author, &e->role, &e->branch, &e->content_json,
				 &e->actions_json, &e->metadata_json, &e->text };
	return k < sizeof(slots) / sizeof(slots[0]) ? slots[k] : NULL;
}

static int32_t event_copy_make(const memd_event *src, event_copy *dst, memd_error *err)
{
	size_t total = 0;
	const char **slot;
	char *p;

	dst->e = *src;
	for (size_t k = 0; (slot = string_slot(&dst->e, k)); k++)
		total += *slot ? strlen(*slot) + 1 : 0;
	dst->buf = malloc(total ? total : 1);
	if (!dst->buf)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	p = dst->buf;
	for (size_t k = 0; (slot = string_slot(&dst->e, k)); k++) {
		size_t n;
		if (!*slot)
			continue;
		n = strlen(*slot) + 1;
		memcpy(p, *slot, n);
		*slot = p;
		p += n;
	}
	return 0;
}

static int32_t load_body(my_conn *c, void *arg, memd_error *err)
{
	load_ctx *x = arg;
	const memd_event_query *q = x->q;
	int newest = is_newest(q);
	event_copy *kept = NULL;
	uint32_t n_kept = 0;
	uint64_t n = 0;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, x->scope, 1);
	my_param_i64(&p, q->after_seq);
	my_param_i64(&p, q->before_seq ? q->before_seq : SEQ_UNBOUNDED);
	if (q->flags & (MEMD_EVQ_NO_SUMMARY | MEMD_EVQ_ONLY_SUMMARY))
		my_param_i64(&p, (q->flags & MEMD_EVQ_ONLY_SUMMARY) ? 1 : 0);
	if (q->after_time_us)
		my_param_i64(&p, q->after_time_us);
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
			r = event_copy_make(&e, &kept[n_kept++], err);
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
	const uint32_t known = MEMD_EVQ_NEWEST | MEMD_EVQ_NO_SUMMARY | MEMD_EVQ_ONLY_SUMMARY;
	load_ctx x = { .store = inst, .call = call, .scope = scope, .q = q, .out = out };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!q || !out || !out->event)
		return memd_error_set(err, MEMD_EINVAL, 0, "event query or sink is missing");
	if (q->flags & ~known)
		return memd_error_set(err, MEMD_EINVAL, 0, "event query has unknown flags 0x%x",
				      (unsigned)q->flags);
	if ((q->flags & MEMD_EVQ_NO_SUMMARY) && (q->flags & MEMD_EVQ_ONLY_SUMMARY))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "event query cannot ask for no summaries and only summaries");
	if (q->after_seq < 0 || q->before_seq < 0 || q->after_time_us < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "event query bounds must not be negative");
	return my_run(inst, call, MY_AUTOCOMMIT, load_body, &x, err);
}
