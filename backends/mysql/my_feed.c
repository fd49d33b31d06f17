/* SPDX-License-Identifier: MIT */
#include "my_feed.h"

#include <stdlib.h>
#include <string.h>

#include "plugin_util.h"
#include "my_events.h"
#include "my_memories.h"

/* A feed_read with limit 0 reads everything. */
#define MY_NO_LIMIT UINT64_MAX
/* Initial room for buffered DELETE, FINALIZE, MEMORY_DELETE, mark and
 * MEMORY records. */
#define MY_DELETES_INITIAL 16

static const my_sql SQL_FEED_HEAD = { MY_ST_FEED_HEAD,
	"SELECT last FROM memd_feed_counter WHERE id = 1" };
static const my_sql SQL_FEED_ADVANCE = { MY_ST_FEED_ADVANCE,
	"UPDATE memd_feed_counter SET last = LAST_INSERT_ID(last + ?) WHERE id = 1" };
/* The head first (kind 0), then the DELETE, FINALIZE and MEMORY_DELETE
 * records after ?1: one statement, so one snapshot. */
static const my_sql SQL_FEED_DELETES = { MY_ST_FEED_DELETES,
	"SELECT 0 AS kind, last AS position, NULL AS app, NULL AS user, NULL AS session,"
	" NULL AS memory_id FROM memd_feed_counter WHERE id = 1"
	" UNION ALL"
	" (SELECT kind, position, app, user, session, memory_id FROM memd_feed_deletes"
	"  WHERE position > ? ORDER BY position LIMIT ?)" };
/* An EVENT record is an event still visible: one hidden since is
 * followed by its HIDE record anyway, and a reader that starts later
 * need not see it come and go. */
static const my_sql SQL_FEED_EVENTS = { MY_ST_FEED_EVENTS,
	"SELECT " MY_EVENT_COLS " FROM memd_events"
	" WHERE position > ? AND position <= ? AND hidden_us = 0 ORDER BY position LIMIT ?" };
/* The HIDE records and the EVENT records of events an undo showed again
 * (the event as it is stored now; an EVENT record only while it is still
 * visible), up to the head (?2). */
static const my_sql SQL_FEED_MARKS = { MY_ST_FEED_MARKS,
	"SELECT m.kind, m.position, " MY_EVENT_COLS_E " FROM memd_feed_marks m"
	" JOIN memd_events e ON e.app = m.app AND e.user = m.user AND e.session = m.session"
	"  AND e.seq = m.seq"
	" WHERE m.position > ? AND m.position <= ? AND (m.kind = ? OR e.hidden_us = 0)"
	" ORDER BY m.position LIMIT ?" };
/* The MEMORY records: the memories whose latest add or update has a
 * position after ?1, up to the head (?2). */
static const my_sql SQL_FEED_MEMORIES = { MY_ST_FEED_MEMORIES,
	"SELECT " MY_MEMORY_COLS_M " FROM memd_memories m FORCE INDEX (memd_memories_by_position)"
	" WHERE m.position > ? AND m.position <= ? ORDER BY m.position LIMIT ?" };
static const my_sql SQL_FEED_TOMBSTONE = { MY_ST_FEED_TOMBSTONE,
	"INSERT INTO memd_feed_deletes (position, kind, app, user, session)"
	" VALUES (?, ?, ?, ?, ?)" };
static const my_sql SQL_FEED_MEMORY_DELETE = { MY_ST_FEED_MEMORY_DELETE,
	"INSERT INTO memd_feed_deletes (position, kind, app, user, memory_id)"
	" VALUES (?, ?, ?, ?, ?)" };
static const my_sql SQL_CURSOR_GET = { MY_ST_CURSOR_GET,
	"SELECT position FROM memd_cursors WHERE name = ?" };
static const my_sql SQL_CURSOR_SET = { MY_ST_CURSOR_SET,
	"INSERT INTO memd_cursors (name, position) VALUES (?, ?)"
	" ON DUPLICATE KEY UPDATE position = VALUES(position)" };

int32_t my_feed_alloc(my_conn *c, uint32_t n, int64_t *ret_first, memd_error *err)
{
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_i64(&p, n);
	r = my_exec(c, &SQL_FEED_ADVANCE, &p, &s, err);
	if (r < 0)
		return r;
	if (my_affected(s) != 1)
		return memd_error_set(err, MEMD_EIO, 0, "mysql: the feed counter row is missing");
	*ret_first = (int64_t)my_insert_id(s) - n + 1;
	return 0;
}

int32_t my_feed_tombstone(my_conn *c, uint32_t kind, const memd_scope *scope, memd_error *err)
{
	int64_t pos = 0;
	my_params p;
	int32_t r = my_feed_alloc(c, 1, &pos, err);

	if (r < 0)
		return r;
	my_params_init(&p);
	my_param_i64(&p, pos);
	my_param_i64(&p, kind);
	my_param_text(&p, scope->app);
	my_param_text(&p, scope->user);
	my_param_text(&p, kind == MEMD_FEED_DELETE_USER ? NULL : scope->session);
	return my_exec(c, &SQL_FEED_TOMBSTONE, &p, NULL, err);
}

int32_t my_feed_memory_delete(my_conn *c, int64_t position, const char *app, const char *user,
			      const char *id, memd_error *err)
{
	my_params p;

	my_params_init(&p);
	my_param_i64(&p, position);
	my_param_i64(&p, MEMD_FEED_MEMORY_DELETE);
	my_param_text(&p, app);
	my_param_text(&p, user);
	my_param_text(&p, id);
	return my_exec(c, &SQL_FEED_MEMORY_DELETE, &p, NULL, err);
}

/* ---- feed_read ------------------------------------------------------- */

typedef struct feed_delete {
	int64_t position;
	uint32_t kind;
	char *app, *user, *session;
	char *memory_id;           /* MEMORY_DELETE: the memory's id */
} feed_delete;

/* A HIDE record, or the EVENT record of an event shown again. */
typedef struct feed_mark {
	uint32_t kind;
	int64_t position;          /* the record's */
	pu_event_copy ev;          /* the event as stored now */
} feed_mark;

typedef struct feed_ctx {
	my_store *store;
	const memd_call *call;
	int64_t after;
	uint32_t limit;
	const memd_feed_sink *out;
	/* filled by the body */
	feed_delete *dels;
	size_t n_dels, cap_dels;
	feed_mark *marks;
	size_t n_marks, cap_marks;
	my_memory_copy *mems;      /* MEMORY records: the memory with the record's position */
	size_t n_mems, cap_mems;
} feed_ctx;

/* Where the next buffered records are. */
typedef struct feed_next {
	size_t del, mark, mem;
} feed_next;

static void deletes_clear(feed_ctx *x)
{
	for (size_t i = 0; i < x->n_dels; i++) {
		free(x->dels[i].app);
		free(x->dels[i].user);
		free(x->dels[i].session);
		free(x->dels[i].memory_id);
	}
	x->n_dels = 0;
	for (size_t i = 0; i < x->n_marks; i++)
		free(x->marks[i].ev.buf);
	x->n_marks = 0;
	for (size_t i = 0; i < x->n_mems; i++)
		my_memory_copy_clear(&x->mems[i]);
	x->n_mems = 0;
}

static int32_t keep_memory(feed_ctx *x, const my_stmt *s, memd_error *err)
{
	memd_memory m;
	int32_t r;

	if (x->n_mems == x->cap_mems) {
		size_t ncap = x->cap_mems ? x->cap_mems * 2 : MY_DELETES_INITIAL;
		my_memory_copy *grown = realloc(x->mems, ncap * sizeof(*grown));
		if (!grown)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		x->mems = grown;
		x->cap_mems = ncap;
	}
	my_memory_from_row(s, 0, &m);
	memset(&x->mems[x->n_mems], 0, sizeof(x->mems[x->n_mems]));
	r = my_memory_copy_make(&m, &x->mems[x->n_mems], err);
	if (r == 0)
		x->n_mems++;
	return r;
}

static int32_t keep_mark(feed_ctx *x, const my_stmt *s, memd_error *err)
{
	feed_mark *k;
	memd_event e;
	int32_t r;

	if (x->n_marks == x->cap_marks) {
		size_t ncap = x->cap_marks ? x->cap_marks * 2 : MY_DELETES_INITIAL;
		feed_mark *grown = realloc(x->marks, ncap * sizeof(*grown));
		if (!grown)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		x->marks = grown;
		x->cap_marks = ncap;
	}
	k = &x->marks[x->n_marks];
	k->kind = (uint32_t)my_col_i64(s, 0);
	k->position = my_col_i64(s, 1);
	my_event_from_row(s, 2, &e);
	/* An EVENT record looks like any other: its event's position is
	 * the record's. */
	if (k->kind == MEMD_FEED_EVENT)
		e.position = k->position;
	r = pu_event_copy_make(&e, &k->ev, err);
	if (r == 0)
		x->n_marks++;
	return r;
}

static int32_t keep_delete(feed_ctx *x, const my_stmt *s, memd_error *err)
{
	feed_delete *d;
	int oom = 0;

	if (x->n_dels == x->cap_dels) {
		size_t ncap = x->cap_dels ? x->cap_dels * 2 : MY_DELETES_INITIAL;
		feed_delete *grown = realloc(x->dels, ncap * sizeof(*grown));
		if (!grown)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		x->dels = grown;
		x->cap_dels = ncap;
	}
	d = &x->dels[x->n_dels];
	d->kind = (uint32_t)my_col_i64(s, 0);
	d->position = my_col_i64(s, 1);
	d->app = pu_strdup_or_null(my_col_text(s, 2), &oom);
	d->user = pu_strdup_or_null(my_col_text(s, 3), &oom);
	d->session = pu_strdup_or_null(my_col_text(s, 4), &oom);
	d->memory_id = pu_strdup_or_null(my_col_text(s, 5), &oom);
	x->n_dels++;
	if (oom)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	return 0;
}

static int32_t deliver_mark(feed_ctx *x, const feed_mark *k, memd_error *err)
{
	memd_feed_record rec = { .struct_size = sizeof(rec) };

	rec.kind = k->kind;
	rec.position = k->position;
	rec.app = k->ev.e.app;
	rec.user = k->ev.e.user;
	rec.session = k->ev.e.session;
	rec.event = &k->ev.e;
	return my_sink_result(x->out->record(x->out->userdata, &rec), "feed", err);
}

static int32_t deliver_delete(feed_ctx *x, const feed_delete *d, memd_error *err)
{
	memd_feed_record rec = { .struct_size = sizeof(rec) };
	memd_memory m = { .struct_size = sizeof(m) };

	rec.kind = d->kind;
	rec.position = d->position;
	rec.app = d->app;
	rec.user = d->user;
	rec.session = d->session;
	if (d->kind == MEMD_FEED_MEMORY_DELETE) {
		m.app = d->app;
		m.user = d->user;
		m.id = d->memory_id;
		rec.session = NULL;
		rec.memory = &m;
	}
	return my_sink_result(x->out->record(x->out->userdata, &rec), "feed", err);
}

static int32_t deliver_memory(feed_ctx *x, const my_memory_copy *k, memd_error *err)
{
	memd_feed_record rec = { .struct_size = sizeof(rec) };

	rec.kind = MEMD_FEED_MEMORY;
	rec.position = k->m.position;
	rec.app = k->m.app;
	rec.user = k->m.user;
	rec.memory = &k->m;
	return my_sink_result(x->out->record(x->out->userdata, &rec), "feed", err);
}

/* The position of the next buffered record of each list (INT64_MAX when
 * that list is done). */
static int64_t next_del_pos(const feed_ctx *x, const feed_next *nx)
{
	return nx->del < x->n_dels ? x->dels[nx->del].position : INT64_MAX;
}

static int64_t next_mark_pos(const feed_ctx *x, const feed_next *nx)
{
	return nx->mark < x->n_marks ? x->marks[nx->mark].position : INT64_MAX;
}

static int64_t next_mem_pos(const feed_ctx *x, const feed_next *nx)
{
	return nx->mem < x->n_mems ? x->mems[nx->mem].m.position : INT64_MAX;
}

/* Is a buffered record (the next delete, mark or memory) before position? */
static int buffered_before(const feed_ctx *x, const feed_next *nx, int64_t position)
{
	return next_del_pos(x, nx) < position || next_mark_pos(x, nx) < position ||
	       next_mem_pos(x, nx) < position;
}

/* Deliver the lowest of the next delete, mark and memory. */
static int32_t deliver_buffered(feed_ctx *x, feed_next *nx, memd_error *err)
{
	int64_t del = next_del_pos(x, nx), mark = next_mark_pos(x, nx), mem = next_mem_pos(x, nx);

	if (del < mark && del < mem)
		return deliver_delete(x, &x->dels[nx->del++], err);
	if (mark < mem)
		return deliver_mark(x, &x->marks[nx->mark++], err);
	return deliver_memory(x, &x->mems[nx->mem++], err);
}

static int32_t feed_body(my_conn *c, void *arg, memd_error *err)
{
	feed_ctx *x = arg;
	uint64_t limit = x->limit ? x->limit : MY_NO_LIMIT;
	int64_t head = -1;
	uint32_t n = 0;
	feed_next nx = { 0 };
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	deletes_clear(x);
	my_params_init(&p);
	my_param_i64(&p, x->after);
	my_param_u64(&p, limit);
	r = my_exec(c, &SQL_FEED_DELETES, &p, &s, err);
	while (r == 0 && (r = my_fetch(c, s, err)) == 1) {
		r = 0;
		if (my_col_i64(s, 0) == 0)
			head = my_col_i64(s, 1);
		else
			r = keep_delete(x, s, err);
	}
	my_done(s);
	if (r < 0)
		return r;
	if (head < 0)
		return memd_error_set(err, MEMD_EIO, 0, "mysql: the feed counter row is missing");

	/* The marks and the memories up to that head, then the events, merged
	 * with the buffered records. */
	my_params_init(&p);
	my_param_i64(&p, x->after);
	my_param_i64(&p, head);
	my_param_i64(&p, MEMD_FEED_HIDE);
	my_param_u64(&p, limit);
	r = my_exec(c, &SQL_FEED_MARKS, &p, &s, err);
	while (r == 0 && (r = my_fetch(c, s, err)) == 1)
		r = keep_mark(x, s, err);
	my_done(s);
	if (r < 0)
		return r;

	my_params_init(&p);
	my_param_i64(&p, x->after);
	my_param_i64(&p, head);
	my_param_u64(&p, limit);
	r = my_exec(c, &SQL_FEED_MEMORIES, &p, &s, err);
	while (r == 0 && (r = my_fetch(c, s, err)) == 1)
		r = keep_memory(x, s, err);
	my_done(s);
	if (r < 0)
		return r;

	my_params_init(&p);
	my_param_i64(&p, x->after);
	my_param_i64(&p, head);
	my_param_u64(&p, limit);
	r = my_exec(c, &SQL_FEED_EVENTS, &p, &s, err);
	while (r == 0 && n < limit) {
		memd_feed_record rec = { .struct_size = sizeof(rec) };
		memd_event e;

		r = my_fetch(c, s, err);
		if (r <= 0)
			break;
		r = 0;
		my_event_from_row(s, 0, &e);
		while (r == 0 && n < limit && buffered_before(x, &nx, e.position)) {
			r = deliver_buffered(x, &nx, err);
			n++;
		}
		if (r != 0 || n >= limit)
			break;
		rec.kind = MEMD_FEED_EVENT;
		rec.position = e.position;
		rec.app = e.app;
		rec.user = e.user;
		rec.session = e.session;
		rec.event = &e;
		r = my_sink_result(x->out->record(x->out->userdata, &rec), "feed", err);
		n++;
		if (r == 0 && n % MY_CHECK_EVERY == 0)
			r = my_call_check(x->store, x->call, err);
	}
	my_done(s);
	while (r == 0 && n < limit && buffered_before(x, &nx, INT64_MAX)) {
		r = deliver_buffered(x, &nx, err);
		n++;
	}
	return r > 0 ? 0 : r;
}

int32_t my_feed_read(void *inst, const memd_call *call, int64_t after, uint32_t limit,
		     const memd_feed_sink *out, memd_error *err)
{
	feed_ctx x = { .store = inst, .call = call, .after = after, .limit = limit, .out = out };
	int32_t r;

	if (!out || !out->record)
		return memd_error_set(err, MEMD_EINVAL, 0, "feed sink is missing");
	if (after < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "feed position %lld is negative",
				      (long long)after);
	r = my_run(inst, call, MY_AUTOCOMMIT, feed_body, &x, err);
	deletes_clear(&x);
	free(x.dels);
	free(x.marks);
	free(x.mems);
	return r;
}

/* ---- head, cursors, ping --------------------------------------------- */

typedef struct value_ctx {
	const char *name;
	int64_t value;
} value_ctx;

static int32_t head_body(my_conn *c, void *arg, memd_error *err)
{
	value_ctx *x = arg;
	int found = 0;
	int32_t r = my_query_i64(c, &SQL_FEED_HEAD, NULL, &found, &x->value, err);

	if (r == 0 && !found)
		r = memd_error_set(err, MEMD_EIO, 0, "mysql: the feed counter row is missing");
	return r;
}

int32_t my_feed_head(void *inst, const memd_call *call, int64_t *ret_position, memd_error *err)
{
	value_ctx x = { 0 };
	int32_t r;

	if (!ret_position)
		return memd_error_set(err, MEMD_EINVAL, 0, "no output position");
	r = my_run(inst, call, MY_AUTOCOMMIT, head_body, &x, err);
	if (r == 0)
		*ret_position = x.value;
	return r;
}

static int32_t cursor_get_body(my_conn *c, void *arg, memd_error *err)
{
	value_ctx *x = arg;
	int found = 0;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_text(&p, x->name);
	x->value = 0;
	r = my_query_i64(c, &SQL_CURSOR_GET, &p, &found, &x->value, err);
	if (r == 0 && !found)
		x->value = 0;
	return r;
}

int32_t my_cursor_get(void *inst, const memd_call *call, const char *name, int64_t *ret_position,
		      memd_error *err)
{
	value_ctx x = { .name = name };
	int32_t r = pu_check_id("cursor name", name, err);

	if (r == 0 && !ret_position)
		r = memd_error_set(err, MEMD_EINVAL, 0, "no output position");
	if (r < 0)
		return r;
	r = my_run(inst, call, MY_AUTOCOMMIT, cursor_get_body, &x, err);
	if (r == 0)
		*ret_position = x.value;
	return r;
}

static int32_t cursor_set_body(my_conn *c, void *arg, memd_error *err)
{
	value_ctx *x = arg;
	my_params p;

	my_params_init(&p);
	my_param_text(&p, x->name);
	my_param_i64(&p, x->value);
	/* One statement: atomic on its own, and safe to run again. */
	return my_exec(c, &SQL_CURSOR_SET, &p, NULL, err);
}

int32_t my_cursor_set(void *inst, const memd_call *call, const char *name, int64_t position,
		      memd_error *err)
{
	value_ctx x = { .name = name, .value = position };
	int32_t r = pu_check_id("cursor name", name, err);

	if (r < 0)
		return r;
	if (position < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "cursor position %lld is negative",
				      (long long)position);
	return my_run(inst, call, MY_AUTOCOMMIT, cursor_set_body, &x, err);
}

int32_t my_ping(void *inst, const memd_call *call, memd_error *err)
{
	value_ctx x = { 0 };

	/* Reads a real table, so a missing schema or a dead server shows. */
	return my_run(inst, call, MY_AUTOCOMMIT, head_body, &x, err);
}
