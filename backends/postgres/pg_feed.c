/* SPDX-License-Identifier: MIT */
#include "pg_feed.h"

#include <string.h>

#include "pg_events.h"
#include "pg_memories.h"
#include "plugin_util.h"

/* Events, DELETE (and FINALIZE) records and HIDE records after $1,
 * merged by position, at most $2 (NULL = all). One snapshot (this
 * statement and the memories' below share it), which (positions
 * committing in order) holds every position up to the newest it sees.
 * Column 0 is the kind, then the PG_EVENT_COLS
 * (NULL for a DELETE record but its position and scope; for a HIDE record
 * the hidden event's, at the record's position). A hidden event has no
 * EVENT record (its HIDE record follows where it was); an event made
 * visible again has its EVENT record at the position the undo gave it. */
#define EVENT_COLS_OF(t) \
	t ".app, " t ".\"user\", " t ".session, " t ".seq, " t ".id, " t ".invocation_id, " \
	t ".author, " t ".role, " t ".branch, " t ".content::text, " t ".actions::text, " \
	t ".metadata::text, " t ".timestamp_us, " t ".text, " t ".tokens, " t ".covers_seq, " \
	t ".hidden_us, " t ".hidden_by, " t ".hidden_kind, " t ".operation"
#define HIDE_KIND "5" /* MEMD_FEED_HIDE in SQL */
static const pg_sql SQL_FEED_READ = { PG_ST_FEED_READ, 2,
	"SELECT * FROM ("
	" (SELECT 1 AS kind, " PG_EVENT_COLS " FROM events WHERE position > $1 AND hidden_us = 0"
	"  ORDER BY position LIMIT $2)"
	" UNION ALL"
	" (SELECT kind, position, app, \"user\", session, NULL, NULL, NULL, NULL, NULL, NULL,"
	"  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL"
	"  FROM feed_deletes WHERE position > $1 ORDER BY position LIMIT $2)"
	" UNION ALL"
	" (SELECT " HIDE_KIND ", h.position, " EVENT_COLS_OF("e") " FROM feed_hides h"
	"  JOIN events e ON e.app = h.app AND e.\"user\" = h.\"user\" AND e.session = h.session"
	"  AND e.seq = h.seq WHERE h.position > $1 ORDER BY h.position LIMIT $2)"
	") f ORDER BY position LIMIT $2" };
/* MEMORY records (a memory's row at the position of its last add or
 * update) and MEMORY_DELETE records after $1, merged by position, at most
 * $2 (NULL = all): kind, then the PG_MEMORY_COLS (of a MEMORY_DELETE
 * record only app, user and id, the rest NULL or 0, and its position). */
#define MEMORY_KIND "6"        /* MEMD_FEED_MEMORY in SQL */
#define MEMORY_DELETE_KIND "7" /* MEMD_FEED_MEMORY_DELETE in SQL */
static const pg_sql SQL_FEED_READ_MEMORIES = { PG_ST_FEED_READ_MEMORIES, 2,
	"SELECT * FROM ("
	" (SELECT " MEMORY_KIND " AS kind, " PG_MEMORY_COLS " FROM memories WHERE position > $1"
	"  ORDER BY position LIMIT $2)"
	" UNION ALL"
	" (SELECT " MEMORY_DELETE_KIND ", app, \"user\", id, NULL, NULL, NULL, NULL, NULL, NULL,"
	"  0, 0, 0, 0, position, 0 FROM feed_memory_deletes WHERE position > $1"
	"  ORDER BY position LIMIT $2)"
	") f ORDER BY position LIMIT $2" };
/* Both reads share one snapshot (a read-only repeatable-read transaction,
 * in the same round trip), so the merged feed has what a single statement
 * would: every position up to the newest either sees, in order. */
static const pg_sql SQL_BEGIN_READ = { PG_ST_BEGIN_READ, 0,
	"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" };
static const pg_sql SQL_COMMIT = { PG_ST_COMMIT, 0, "COMMIT" };
#define MEMORY_POSITION_COL (1 + 13) /* position among the PG_MEMORY_COLS, after kind */
static const pg_sql SQL_FEED_HEAD = { PG_ST_FEED_HEAD, 0,
	"SELECT last FROM feed_counter WHERE id = 1" };
static const pg_sql SQL_CURSOR_GET = { PG_ST_CURSOR_GET, 1,
	"SELECT position FROM cursors WHERE name = $1" };
static const pg_sql SQL_CURSOR_SET = { PG_ST_CURSOR_SET, 2,
	"INSERT INTO cursors (name, position) VALUES ($1, $2)"
	" ON CONFLICT (name) DO UPDATE SET position = excluded.position" };
static const pg_sql SQL_PING = { PG_ST_PING, 0, "SELECT count(*) FROM feed_counter" };

typedef struct feed_ctx {
	pg_store *store;
	const memd_call *call;
	int64_t after;
	uint32_t limit;
	const memd_feed_sink *out;
	const char *name;
	int64_t position;
} feed_ctx;

/* Deliver row i of the events' result (kind, then PG_EVENT_COLS). */
static int32_t deliver_event_row(const feed_ctx *x, const PGresult *res, int i,
				 memd_error *err)
{
	memd_feed_record rec = { .struct_size = sizeof(rec) };
	memd_event e;

	pg_event_from_row(res, i, 1, &e);
	rec.kind = (uint32_t)pg_get_i64(res, i, 0);
	rec.position = e.position;
	rec.app = e.app;
	rec.user = e.user;
	rec.session = e.session;
	if (rec.kind == MEMD_FEED_EVENT || rec.kind == MEMD_FEED_HIDE)
		rec.event = &e;
	return pg_sink_result(x->out->record(x->out->userdata, &rec), "feed", err);
}

/* Deliver row i of the memories' result (kind, then PG_MEMORY_COLS). */
static int32_t deliver_memory_row(const feed_ctx *x, const PGresult *res, int i,
				  memd_error *err)
{
	memd_feed_record rec = { .struct_size = sizeof(rec) };
	memd_memory m;

	pg_memory_from_row(res, i, 1, &m);
	rec.kind = (uint32_t)pg_get_i64(res, i, 0);
	rec.position = m.position;
	rec.app = m.app;
	rec.user = m.user;
	if (rec.kind == MEMD_FEED_MEMORY_DELETE)
		m.position = 0; /* a delete record's memory is its key only */
	rec.memory = &m;
	return pg_sink_result(x->out->record(x->out->userdata, &rec), "feed", err);
}

static int32_t read_once(pg_conn *c, void *ctx, memd_error *err)
{
	feed_ctx *x = ctx;
	char after[PG_INT_BUF], lim[PG_INT_BUF];
	const char *vals[2] = { pg_i64(after, x->after), x->limit ? pg_i64(lim, x->limit) : NULL };
	const PGresult *ev, *mem;
	int n_ev, n_mem, i = 0, k = 0;
	uint32_t n = 0;
	int32_t r = pg_send(c, &SQL_BEGIN_READ, NULL, err);

	if (r == 0)
		r = pg_send(c, &SQL_FEED_READ, vals, err);
	if (r == 0)
		r = pg_send(c, &SQL_FEED_READ_MEMORIES, vals, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "read the feed", err);
	if (r < 0)
		return r;
	ev = pg_res(c, 1);
	mem = pg_res(c, 2);
	n_ev = PQntuples(ev);
	n_mem = PQntuples(mem);
	pu_rows_read(x->call, (uint64_t)n_ev + (uint64_t)n_mem);
	/* Merge the two ascending lists, up to the limit. */
	while (r == 0 && (i < n_ev || k < n_mem) && (!x->limit || n < x->limit)) {
		if (k >= n_mem || (i < n_ev && pg_get_i64(ev, i, 1) <
						     pg_get_i64(mem, k, MEMORY_POSITION_COL)))
			r = deliver_event_row(x, ev, i++, err);
		else
			r = deliver_memory_row(x, mem, k++, err);
		n++;
		if (r == 0 && n % PG_CHECK_EVERY == 0)
			r = pg_call_check(x->store, x->call, err);
	}
	return r > 0 ? 0 : r;
}

int32_t pg_feed_read(void *inst, const memd_call *call, int64_t after, uint32_t limit,
		     const memd_feed_sink *out, memd_error *err)
{
	feed_ctx x = { .store = inst, .call = call, .after = after, .limit = limit, .out = out };

	if (!out || !out->record)
		return memd_error_set(err, MEMD_EINVAL, 0, "feed sink is missing");
	if (after < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "feed position %lld is negative",
				      (long long)after);
	return pg_with_conn(inst, call, read_once, &x, err);
}

static int32_t head_once(pg_conn *c, void *ctx, memd_error *err)
{
	feed_ctx *x = ctx;
	int32_t r = pg_send(c, &SQL_FEED_HEAD, NULL, err);

	if (r == 0)
		r = pg_run(c, "read the feed head", err);
	if (r == 0 && PQntuples(pg_res(c, 0)) != 1)
		r = memd_error_set(err, MEMD_EIO, 0, "postgres: the feed counter row is missing");
	if (r == 0)
		x->position = pg_get_i64(pg_res(c, 0), 0, 0);
	return r;
}

int32_t pg_feed_head(void *inst, const memd_call *call, int64_t *ret_position, memd_error *err)
{
	feed_ctx x = { .store = inst, .call = call };
	int32_t r;

	if (!ret_position)
		return memd_error_set(err, MEMD_EINVAL, 0, "no output position");
	r = pg_with_conn(inst, call, head_once, &x, err);
	if (r == 0)
		*ret_position = x.position;
	return r;
}

static int32_t cursor_get_once(pg_conn *c, void *ctx, memd_error *err)
{
	feed_ctx *x = ctx;
	const char *vals[1] = { x->name };
	int32_t r = pg_send(c, &SQL_CURSOR_GET, vals, err);

	if (r == 0)
		r = pg_run(c, "read cursor", err);
	if (r == 0)
		x->position = PQntuples(pg_res(c, 0)) ? pg_get_i64(pg_res(c, 0), 0, 0) : 0;
	return r;
}

int32_t pg_cursor_get(void *inst, const memd_call *call, const char *name, int64_t *ret_position,
		      memd_error *err)
{
	feed_ctx x = { .store = inst, .call = call, .name = name };
	int32_t r = pu_check_id("cursor name", name, err);

	if (r == 0 && !ret_position)
		r = memd_error_set(err, MEMD_EINVAL, 0, "no output position");
	if (r < 0)
		return r;
	r = pg_with_conn(inst, call, cursor_get_once, &x, err);
	if (r == 0)
		*ret_position = x.position;
	return r;
}

static int32_t cursor_set_once(pg_conn *c, void *ctx, memd_error *err)
{
	feed_ctx *x = ctx;
	char pos[PG_INT_BUF];
	const char *vals[2] = { x->name, pg_i64(pos, x->position) };
	int32_t r = pg_send(c, &SQL_CURSOR_SET, vals, err);

	if (r == 0)
		r = pg_run(c, "write cursor", err);
	return r;
}

int32_t pg_cursor_set(void *inst, const memd_call *call, const char *name, int64_t position,
		      memd_error *err)
{
	feed_ctx x = { .store = inst, .call = call, .name = name, .position = position };
	int32_t r = pu_check_id("cursor name", name, err);

	if (r < 0)
		return r;
	if (position < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "cursor position %lld is negative",
				      (long long)position);
	return pg_with_conn(inst, call, cursor_set_once, &x, err);
}

static int32_t ping_once(pg_conn *c, void *ctx, memd_error *err)
{
	(void)ctx;
	int32_t r = pg_send(c, &SQL_PING, NULL, err);

	if (r == 0)
		r = pg_run(c, "ping", err);
	return r;
}

int32_t pg_ping(void *inst, const memd_call *call, memd_error *err)
{
	return pg_with_conn(inst, call, ping_once, NULL, err);
}
