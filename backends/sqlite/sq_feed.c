/* SPDX-License-Identifier: MIT */
#include "sq_feed.h"

#include <stdint.h>
#include <string.h>

#include "plugin_util.h"
#include "sq_events.h"
#include "sq_memories.h"

static const sq_sql SQL_FEED_HEAD = { SQ_ST_FEED_HEAD,
	"SELECT last FROM feed_counter WHERE id = 1" };
static const sq_sql SQL_FEED_ADVANCE = { SQ_ST_FEED_ADVANCE,
	"UPDATE feed_counter SET last = ?1 WHERE id = 1" };
/* A hidden event is no EVENT record: its HIDE record (feed_hides, with
 * the event's data) comes later; unhidden, it moves to a new position. */
static const sq_sql SQL_FEED_EVENTS = { SQ_ST_FEED_EVENTS,
	"SELECT " SQ_EVENT_COLS " FROM events WHERE position > ?1 AND hidden_us = 0"
	" ORDER BY position" };
static const sq_sql SQL_FEED_HIDES = { SQ_ST_FEED_HIDES,
	"SELECT h.position, e.position, e.app, e.user, e.session, e.seq, e.id, e.invocation_id,"
	" e.author, e.role, e.branch, e.content, e.actions, e.metadata, e.timestamp_us, e.text,"
	" e.tokens, e.covers_seq, e.hidden_us, e.hidden_by, e.hidden_kind, e.operation"
	" FROM feed_hides h JOIN events e INDEXED BY events_by_id"
	" ON e.id = h.event AND e.app = h.app AND e.user = h.user AND e.session = h.session"
	" WHERE h.position > ?1 ORDER BY h.position" };
/* Records without an event; MEMORY_DELETE ones name their memory. */
static const sq_sql SQL_FEED_DELETES = { SQ_ST_FEED_DELETES,
	"SELECT position, kind, app, user, session, memory FROM feed_deletes"
	" WHERE position > ?1 ORDER BY position" };
/* A memory's MEMORY record is its row, at its last add or update. */
static const sq_sql SQL_FEED_MEMORIES = { SQ_ST_FEED_MEMORIES,
	"SELECT position, " SQ_MEMORY_COLS " FROM memories INDEXED BY memories_by_position"
	" WHERE position > ?1 ORDER BY position" };
static const sq_sql SQL_FEED_MEMORY_TOMBSTONE = { SQ_ST_FEED_MEMORY_TOMBSTONE,
	"INSERT INTO feed_deletes (position, kind, app, user, session, memory)"
	" VALUES (?1, ?2, ?3, ?4, NULL, ?5)" };
static const sq_sql SQL_FEED_TOMBSTONE = { SQ_ST_FEED_TOMBSTONE,
	"INSERT INTO feed_deletes (position, kind, app, user, session)"
	" VALUES (?1, ?2, ?3, ?4, ?5)" };
static const sq_sql SQL_CURSOR_GET = { SQ_ST_CURSOR_GET,
	"SELECT position FROM cursors WHERE name = ?1" };
static const sq_sql SQL_CURSOR_SET = { SQ_ST_CURSOR_SET,
	"INSERT INTO cursors (name, position) VALUES (?1, ?2)"
	" ON CONFLICT (name) DO UPDATE SET position = excluded.position" };

static int32_t read_head(sq_conn *c, int64_t *ret, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_FEED_HEAD, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*ret = sqlite3_column_int64(st, 0);
	else if (rc == SQLITE_DONE)
		r = memd_error_set(err, MEMD_EIO, 0, "sqlite: the feed counter row is missing");
	else
		r = sq_fail(c, rc, err, "read the feed counter");
	sq_stmt_done(st);
	return r;
}

int32_t sq_feed_alloc(sq_conn *c, uint32_t n, int64_t *ret_first, memd_error *err)
{
	if (!c->txn.feed_cached) {
		int32_t r = read_head(c, &c->txn.feed_last, err);
		if (r < 0)
			return r;
		c->txn.feed_cached = 1;
	}
	*ret_first = c->txn.feed_last + 1;
	c->txn.feed_last += n;
	c->txn.feed_dirty = 1;
	return 0;
}

int32_t sq_feed_flush(sq_conn *c, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r;
	int rc;

	if (!c->txn.feed_dirty)
		return 0;
	r = sq_stmt(c, &SQL_FEED_ADVANCE, &st, err);
	if (r < 0)
		return r;
	rc = sqlite3_bind_int64(st, 1, c->txn.feed_last);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "advance the feed counter");
	sq_stmt_done(st);
	if (r == 0)
		c->txn.feed_dirty = 0;
	return r;
}

int32_t sq_feed_tombstone(sq_conn *c, uint32_t kind, const memd_scope *scope, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int64_t pos = 0;
	int32_t r = sq_feed_alloc(c, 1, &pos, err);
	int rc;

	if (r < 0)
		return r;
	r = sq_stmt(c, &SQL_FEED_TOMBSTONE, &st, err);
	if (r < 0)
		return r;
	rc = sqlite3_bind_int64(st, 1, pos);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 2, kind);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 3, scope->app);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, scope->user);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 5, kind == MEMD_FEED_DELETE_USER ? NULL : scope->session);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "add a delete record for '%.64s'", scope->user);
	sq_stmt_done(st);
	return r;
}

int32_t sq_feed_memory_tombstone(sq_conn *c, const char *app, const char *user, const char *id,
				 memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int64_t pos = 0;
	int32_t r = sq_feed_alloc(c, 1, &pos, err);
	int rc;

	if (r == 0)
		r = sq_stmt(c, &SQL_FEED_MEMORY_TOMBSTONE, &st, err);
	if (r < 0)
		return r;
	rc = sqlite3_bind_int64(st, 1, pos);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 2, MEMD_FEED_MEMORY_DELETE);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 3, app);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, user);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 5, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "add a delete record for memory '%.64s'", id);
	sq_stmt_done(st);
	return r;
}

/* One side of the feed merge: a statement and whether it has a row. */
typedef struct feed_side {
	sqlite3_stmt *st;
	int has_row;
	uint64_t stepped;
} feed_side;

static int32_t side_next(sq_conn *c, feed_side *s, memd_error *err)
{
	int rc = sqlite3_step(s->st);

	if (rc == SQLITE_ROW) {
		s->has_row = 1;
		s->stepped++;
		return 0;
	}
	s->has_row = 0;
	if (rc != SQLITE_DONE)
		return sq_fail(c, rc, err, "read the feed");
	return 0;
}

static int32_t side_start(sq_conn *c, const sq_sql *sql, int64_t after, feed_side *s,
			  memd_error *err)
{
	int32_t r = sq_stmt(c, sql, &s->st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sqlite3_bind_int64(s->st, 1, after);
	if (rc != SQLITE_OK)
		return sq_fail(c, rc, err, "read the feed");
	return side_next(c, s, err);
}

/* The position of a side's current row (INT64_MAX when it has none). */
static int64_t side_position(const feed_side *s)
{
	return s->has_row ? sqlite3_column_int64(s->st, 0) : INT64_MAX;
}

int32_t sq_feed_read(void *inst, const memd_call *call, int64_t after, uint32_t limit,
		     const memd_feed_sink *out, memd_error *err)
{
	sq_store *store = inst;
	feed_side ev = { 0 }, del = { 0 }, hide = { 0 }, mem = { 0 };
	sq_conn *c = NULL;
	uint32_t n = 0;
	int32_t r;

	if (!out || !out->record)
		return memd_error_set(err, MEMD_EINVAL, 0, "feed sink is missing");
	if (after < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "feed position %lld is negative",
				      (long long)after);
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	/* The four tables are read in position order and merged: one
	 * snapshot, so the result is exactly the committed feed after `after`. */
	r = side_start(c, &SQL_FEED_EVENTS, after, &ev, err);
	if (r == 0)
		r = side_start(c, &SQL_FEED_DELETES, after, &del, err);
	if (r == 0)
		r = side_start(c, &SQL_FEED_HIDES, after, &hide, err);
	if (r == 0)
		r = side_start(c, &SQL_FEED_MEMORIES, after, &mem, err);
	while (r == 0 && (limit == 0 || n < limit) &&
	       (ev.has_row || del.has_row || hide.has_row || mem.has_row)) {
		memd_feed_record rec = { .struct_size = sizeof(rec) };
		memd_event e;
		memd_memory m;
		int64_t pe = side_position(&ev), pd = side_position(&del), ph = side_position(&hide);
		int64_t pm = side_position(&mem);
		feed_side *taken;

		if (pm < pe && pm < pd && pm < ph) {
			taken = &mem;
			sq_memory_from_row(mem.st, 1, &m);
			rec.kind = MEMD_FEED_MEMORY;
			rec.position = pm;
			rec.app = m.app;
			rec.user = m.user;
			rec.memory = &m;
		} else if (pe < pd && pe < ph) {
			taken = &ev;
			sq_event_from_row(ev.st, 0, &e);
			rec.kind = MEMD_FEED_EVENT;
			rec.position = e.position;
			rec.app = e.app;
			rec.user = e.user;
			rec.session = e.session;
			rec.event = &e;
		} else if (ph < pd) {
			taken = &hide;
			sq_event_from_row(hide.st, 1, &e);
			rec.kind = MEMD_FEED_HIDE;
			rec.position = ph;
			rec.app = e.app;
			rec.user = e.user;
			rec.session = e.session;
			rec.event = &e;
		} else {
			taken = &del;
			rec.kind = (uint32_t)sqlite3_column_int64(del.st, 1);
			rec.position = pd;
			rec.app = sq_col_text(del.st, 2);
			rec.user = sq_col_text(del.st, 3);
			rec.session = sq_col_text(del.st, 4);
			if (rec.kind == MEMD_FEED_MEMORY_DELETE) {
				memset(&m, 0, sizeof(m));
				m.struct_size = sizeof(m);
				m.app = rec.app;
				m.user = rec.user;
				m.id = sq_col_text(del.st, 5);
				rec.memory = &m;
			}
		}
		n++;
		r = sq_sink_result(out->record(out->userdata, &rec), "feed", err);
		if (r != 0)
			break;
		if (n % SQ_CHECK_EVERY == 0 && (r = sq_call_check(store, call, err)) < 0)
			break;
		r = side_next(c, taken, err);
	}
	if (r > 0)
		r = 0;
	if (ev.st)
		sq_count_rows(call, ev.st, ev.stepped);
	if (del.st)
		sq_count_rows(call, del.st, del.stepped);
	if (hide.st)
		sq_count_rows(call, hide.st, hide.stepped);
	if (mem.st)
		sq_count_rows(call, mem.st, mem.stepped);
	sq_stmt_done(ev.st);
	sq_stmt_done(del.st);
	sq_stmt_done(hide.st);
	sq_stmt_done(mem.st);
	sq_read_end(store, c);
	return r;
}

int32_t sq_feed_head(void *inst, const memd_call *call, int64_t *ret_position, memd_error *err)
{
	sq_store *store = inst;
	sq_conn *c = NULL;
	int64_t head = 0;
	int32_t r;

	if (!ret_position)
		return memd_error_set(err, MEMD_EINVAL, 0, "no output position");
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = read_head(c, &head, err);
	sq_read_end(store, c);
	if (r == 0)
		*ret_position = head;
	return r;
}

int32_t sq_cursor_get(void *inst, const memd_call *call, const char *name, int64_t *ret_position,
		      memd_error *err)
{
	sq_store *store = inst;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	int64_t pos = 0;
	int32_t r = pu_check_id("cursor name", name, err);
	int rc;

	if (r == 0 && !ret_position)
		r = memd_error_set(err, MEMD_EINVAL, 0, "no output position");
	if (r < 0)
		return r;
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_stmt(c, &SQL_CURSOR_GET, &st, err);
	if (r == 0) {
		rc = sq_bind_text(st, 1, name);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(st);
		if (rc == SQLITE_ROW)
			pos = sqlite3_column_int64(st, 0);
		else if (rc != SQLITE_DONE)
			r = sq_fail(c, rc, err, "read cursor '%.64s'", name);
		sq_stmt_done(st);
	}
	sq_read_end(store, c);
	if (r == 0)
		*ret_position = pos;
	return r;
}

int32_t sq_cursor_set(void *inst, const memd_call *call, const char *name, int64_t position,
		      memd_error *err)
{
	sq_store *store = inst;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	int32_t r = pu_check_id("cursor name", name, err);
	int rc;

	if (r < 0)
		return r;
	if (position < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "cursor position %lld is negative",
				      (long long)position);
	r = sq_write_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_stmt(c, &SQL_CURSOR_SET, &st, err);
	if (r == 0) {
		rc = sq_bind_text(st, 1, name);
		if (rc == SQLITE_OK)
			rc = sqlite3_bind_int64(st, 2, position);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(st);
		if (rc != SQLITE_DONE)
			r = sq_fail(c, rc, err, "write cursor '%.64s'", name);
		sq_stmt_done(st);
	}
	return sq_write_end(store, c, r, err);
}

int32_t sq_ping(void *inst, const memd_call *call, memd_error *err)
{
	sq_store *store = inst;
	sq_conn *c = NULL;
	int64_t head;
	int32_t r = sq_read_begin(store, call, &c, err);

	if (r < 0)
		return r;
	/* Reads a real table page, so a vanished or corrupt file shows. */
	r = read_head(c, &head, err);
	sq_read_end(store, c);
	return r;
}
