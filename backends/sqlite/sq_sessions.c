/* SPDX-License-Identifier: MIT */
#include "sq_sessions.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "plugin_util.h"
#include "sq_feed.h"
#include "sq_lanes.h"
#include "sq_memories.h"
#include "sq_state.h"
#include "sq_tasks.h"

#define EMPTY_OBJECT "{}"

#define SESSION_COLS SQ_SESSION_COLS
/* The flags a session row keeps. */
#define SESSION_FLAGS (MEMD_SESSION_ARCHIVED | MEMD_SESSION_NOTICE)
/* Does a session record passed in hold the members 1.2 added? */
#define SESSION_HAS_LIFECYCLE(s) \
	((s)->struct_size >= offsetof(memd_session, last_prompt_tokens) + sizeof(int64_t))

static const sq_sql SQL_SESSION_INSERT = { SQ_ST_SESSION_INSERT,
	"INSERT INTO sessions (app, user, id, title, metadata, flags, created_us, updated_us,"
	" lane_key, origin, origin_platform, previous_session, start_reason)"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, ?9, ?10, ?11, ?12)" };
static const sq_sql SQL_SESSION_GET = { SQ_ST_SESSION_GET,
	"SELECT " SESSION_COLS " FROM sessions WHERE app = ?1 AND user = ?2 AND id = ?3" };
static const sq_sql SQL_SESSION_HEAD = { SQ_ST_SESSION_HEAD,
	"SELECT version, last_seq, summary_seq, message_count FROM sessions"
	" WHERE app = ?1 AND user = ?2 AND id = ?3" };
/* Every listing checks the filters: origin platform (?5), lane (?6) and
 * activity after ?7 (0 = any). */
#define SESSION_FILTERS \
	" AND (?5 IS NULL OR origin_platform = ?5) AND (?6 IS NULL OR lane_key = ?6)" \
	" AND (?7 = 0 OR updated_us > ?7)"
static const sq_sql SQL_SESSION_LIST = { SQ_ST_SESSION_LIST,
	"SELECT " SESSION_COLS " FROM sessions INDEXED BY sessions_by_created"
	" WHERE app = ?1 AND user = ?2" SESSION_FILTERS
	" ORDER BY created_us DESC, id DESC" };
static const sq_sql SQL_SESSION_LIST_BEFORE = { SQ_ST_SESSION_LIST_BEFORE,
	"SELECT " SESSION_COLS " FROM sessions INDEXED BY sessions_by_created"
	" WHERE app = ?1 AND user = ?2 AND (created_us, id) < (?3, ?4)" SESSION_FILTERS
	" ORDER BY created_us DESC, id DESC" };
/* Newest activity first (MEMD_SQ_BY_ACTIVITY): the keyset ?3, ?4 is
 * (updated_us, id); the activity bound ?8 (?7, or the lowest integer when
 * there is none) ends the walk there. */
static const sq_sql SQL_SESSION_LIST_ACTIVITY = { SQ_ST_SESSION_LIST_ACTIVITY,
	"SELECT " SESSION_COLS " FROM sessions INDEXED BY sessions_by_activity"
	" WHERE app = ?1 AND user = ?2 AND updated_us > ?8" SESSION_FILTERS
	" ORDER BY updated_us DESC, id DESC" };
static const sq_sql SQL_SESSION_LIST_ACTIVITY_BEFORE = { SQ_ST_SESSION_LIST_ACTIVITY_BEFORE,
	"SELECT " SESSION_COLS " FROM sessions INDEXED BY sessions_by_activity"
	" WHERE app = ?1 AND user = ?2 AND updated_us > ?8 AND (updated_us, id) < (?3, ?4)"
	SESSION_FILTERS " ORDER BY updated_us DESC, id DESC" };
/* The same walks through the partial indexes of the sessions that have an
 * origin platform (?5) or a lane (?6). */
static const sq_sql SQL_SESSION_LIST_PLATFORM = { SQ_ST_SESSION_LIST_PLATFORM,
	"SELECT " SESSION_COLS " FROM sessions INDEXED BY sessions_by_platform"
	" WHERE app = ?1 AND user = ?2 AND origin_platform = ?5" SESSION_FILTERS
	" ORDER BY created_us DESC, id DESC" };
static const sq_sql SQL_SESSION_LIST_PLATFORM_BEFORE = { SQ_ST_SESSION_LIST_PLATFORM_BEFORE,
	"SELECT " SESSION_COLS " FROM sessions INDEXED BY sessions_by_platform"
	" WHERE app = ?1 AND user = ?2 AND origin_platform = ?5 AND (created_us, id) < (?3, ?4)"
	SESSION_FILTERS " ORDER BY created_us DESC, id DESC" };
static const sq_sql SQL_SESSION_LIST_LANE = { SQ_ST_SESSION_LIST_LANE,
	"SELECT " SESSION_COLS " FROM sessions INDEXED BY sessions_by_lane"
	" WHERE app = ?1 AND user = ?2 AND lane_key = ?6" SESSION_FILTERS
	" ORDER BY created_us DESC, id DESC" };
static const sq_sql SQL_SESSION_LIST_LANE_BEFORE = { SQ_ST_SESSION_LIST_LANE_BEFORE,
	"SELECT " SESSION_COLS " FROM sessions INDEXED BY sessions_by_lane"
	" WHERE app = ?1 AND user = ?2 AND lane_key = ?6 AND (created_us, id) < (?3, ?4)"
	SESSION_FILTERS " ORDER BY created_us DESC, id DESC" };
/* Sets nothing but the flag: updated_us and version stay. */
static const sq_sql SQL_SESSION_CLEAR_NOTICE = { SQ_ST_SESSION_CLEAR_NOTICE,
	"UPDATE sessions SET flags = flags & ~?4"
	" WHERE app = ?1 AND user = ?2 AND id = ?3 AND flags & ?4" };
static const sq_sql SQL_SESSION_UPDATE = { SQ_ST_SESSION_UPDATE,
	"UPDATE sessions SET"
	" title = CASE WHEN ?4 THEN ?5 ELSE title END,"
	" metadata = CASE WHEN ?6 THEN ?7 ELSE metadata END,"
	" flags = CASE WHEN ?8 THEN (flags & ~?10) | ?9 ELSE flags END,"
	" updated_us = ?11"
	" WHERE app = ?1 AND user = ?2 AND id = ?3" };
static const sq_sql SQL_SESSION_APPENDED = { SQ_ST_SESSION_APPENDED,
	"UPDATE sessions SET version = version + 1, last_seq = ?4, summary_seq = ?5,"
	" updated_us = ?6, title = coalesce(title, ?7), message_count = ?8"
	" WHERE app = ?1 AND user = ?2 AND id = ?3" };
static const sq_sql SQL_SESSION_DELETE = { SQ_ST_SESSION_DELETE,
	"DELETE FROM sessions WHERE app = ?1 AND user = ?2 AND id = ?3" };
static const sq_sql SQL_USER_SESSIONS_DELETE = { SQ_ST_USER_SESSIONS_DELETE,
	"DELETE FROM sessions WHERE app = ?1 AND user = ?2" };
static const sq_sql SQL_USER_LANES_DELETE = { SQ_ST_USER_LANES_DELETE,
	"DELETE FROM lanes WHERE app = ?1 AND user = ?2" };
static const sq_sql SQL_STATE_USER_DELETE_ALL = { SQ_ST_STATE_USER_DELETE_ALL,
	"DELETE FROM state_user WHERE app = ?1 AND user = ?2" };

void sq_session_from_row(sqlite3_stmt *st, memd_session *s)
{
	memset(s, 0, sizeof(*s));
	s->struct_size = sizeof(*s);
	s->app = sq_col_text(st, 0);
	s->user = sq_col_text(st, 1);
	s->id = sq_col_text(st, 2);
	s->title = sq_col_text(st, 3);
	s->metadata_json = sq_col_text(st, 4);
	s->flags = (uint32_t)sqlite3_column_int64(st, 5) & SESSION_FLAGS;
	s->created_us = sqlite3_column_int64(st, 6);
	s->updated_us = sqlite3_column_int64(st, 7);
	s->version = sqlite3_column_int64(st, 8);
	s->last_seq = sqlite3_column_int64(st, 9);
	s->summary_seq = sqlite3_column_int64(st, 10);
	s->lane_key = sq_col_text(st, 11);
	s->origin_json = sq_col_text(st, 12);
	s->origin_platform = sq_col_text(st, 13);
	s->previous_session = sq_col_text(st, 14);
	s->start_reason = sq_col_text(st, 15);
	s->end_reason = sq_col_text(st, 16);
	s->ended_us = sqlite3_column_int64(st, 17);
	s->input_tokens = sqlite3_column_int64(st, 18);
	s->output_tokens = sqlite3_column_int64(st, 19);
	s->cache_read_tokens = sqlite3_column_int64(st, 20);
	s->cache_write_tokens = sqlite3_column_int64(st, 21);
	s->cost_micro_usd = sqlite3_column_int64(st, 22);
	s->last_prompt_tokens = sqlite3_column_int64(st, 23);
	s->message_count = sqlite3_column_int64(st, 24);
	s->memory_seq = sqlite3_column_int64(st, 25);
}

static int32_t deliver(const memd_session_sink *out, const memd_session *s, memd_error *err)
{
	return sq_sink_result(out->session(out->userdata, s), "session", err);
}

int32_t sq_session_row(sqlite3_stmt *st, void *ud, memd_error *err)
{
	memd_session s;

	sq_session_from_row(st, &s);
	return deliver(ud, &s, err);
}

int32_t sq_session_read_deliver(sq_conn *c, const memd_call *call, const memd_scope *scope,
			       const memd_session_sink *out, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	memd_session s;
	int32_t r = sq_stmt(c, &SQL_SESSION_GET, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		sq_session_from_row(st, &s);
		sq_count_rows(call, st, 1);
		r = out ? deliver(out, &s, err) : 0;
		if (r > 0)
			r = 0;
	} else if (rc == SQLITE_DONE) {
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				   scope->session);
	} else {
		r = sq_fail(c, rc, err, "read session '%.64s'", scope->session);
	}
	sq_stmt_done(st);
	return r;
}

int32_t sq_session_head_get(sq_conn *c, const memd_call *call, const memd_scope *scope,
			    sq_session_head *ret, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_SESSION_HEAD, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		ret->version = sqlite3_column_int64(st, 0);
		ret->last_seq = sqlite3_column_int64(st, 1);
		ret->summary_seq = sqlite3_column_int64(st, 2);
		ret->message_count = sqlite3_column_int64(st, 3);
		sq_count_rows(call, st, 1);
		r = 0;
	} else if (rc == SQLITE_DONE) {
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				   scope->session);
	} else {
		r = sq_fail(c, rc, err, "read session '%.64s'", scope->session);
	}
	sq_stmt_done(st);
	return r;
}

int32_t sq_session_appended(sq_conn *c, const memd_scope *scope, const sq_session_head *h,
			    int64_t now_us, const char *title_if_unset, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_SESSION_APPENDED, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 4, h->last_seq);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 5, h->summary_seq);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 6, now_us);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 7, title_if_unset);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 8, h->message_count);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "update session '%.64s'", scope->session);
	sq_stmt_done(st);
	return r;
}

/* ---- ops ------------------------------------------------------------ */

int32_t sq_session_check(const memd_session *s, const char **ret_metadata, memd_error *err)
{
	memd_scope scope = { .struct_size = sizeof(scope), .app = s->app, .user = s->user,
			     .session = s->id };
	const char *metadata = s->metadata_json ? s->metadata_json : EMPTY_OBJECT;
	int32_t r = pu_check_scope(&scope, 1, err);

	if (r == 0)
		r = sq_check_json_object("session metadata", metadata, err);
	if (r == 0 && SESSION_HAS_LIFECYCLE(s)) {
		if (s->lane_key)
			r = pu_check_id("session lane_key", s->lane_key, err);
		if (r == 0 && s->previous_session)
			r = pu_check_id("previous_session", s->previous_session, err);
		if (r == 0 && s->origin_json)
			r = sq_check_json_object("session origin", s->origin_json, err);
	}
	if (r == 0)
		*ret_metadata = metadata;
	return r;
}

int32_t sq_session_insert(sq_conn *c, const memd_session *s, const char *metadata,
			  memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int lifecycle = SESSION_HAS_LIFECYCLE(s);
	int32_t r = sq_stmt(c, &SQL_SESSION_INSERT, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_text(st, 1, s->app);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 2, s->user);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 3, s->id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, s->title);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 5, metadata);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 6, s->flags & SESSION_FLAGS);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 7, s->created_us);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 8, lifecycle ? s->lane_key : NULL);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 9, lifecycle ? s->origin_json : NULL);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 10, lifecycle ? s->origin_platform : NULL);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 11, lifecycle ? s->previous_session : NULL);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 12, lifecycle ? s->start_reason : NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if ((rc & 0xff) == SQLITE_CONSTRAINT)
		r = memd_error_set(err, MEMD_ECONFLICT, 0, "session '%.64s' already exists", s->id);
	else if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "create session '%.64s'", s->id);
	sq_stmt_done(st);
	return r;
}

int32_t sq_session_create(void *inst, const memd_call *call, const memd_session *s,
			  const char *state_delta_json, const memd_session_sink *out,
			  memd_error *err)
{
	sq_store *store = inst;
	memd_scope scope;
	sq_state_record rec;
	sq_conn *c = NULL;
	const char *metadata;
	int32_t r;

	if (!s || !out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "session or its sink is missing");
	scope = (memd_scope){ .struct_size = sizeof(scope), .app = s->app, .user = s->user,
			      .session = s->id };
	r = sq_session_check(s, &metadata, err);
	if (r == 0)
		r = sq_state_check(state_delta_json, err);
	if (r < 0)
		return r;
	r = sq_write_begin(store, call, &c, err);
	if (r < 0)
		return r;
	rec = (sq_state_record){ .version = 0, .seq = 0, .at_us = s->created_us };
	r = sq_session_insert(c, s, metadata, err);
	if (r == 0)
		r = sq_state_apply(c, &scope, state_delta_json, &rec, err);
	if (r == 0)
		r = sq_session_read_deliver(c, NULL, &scope, out, err);
	return sq_write_end(store, c, r, err);
}

int32_t sq_session_get(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_session_sink *out, memd_error *err)
{
	sq_store *store = inst;
	sq_conn *c = NULL;
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "session sink is missing");
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_session_read_deliver(c, call, scope, out, err);
	sq_read_end(store, c);
	return r;
}

/* What sq_session_list's rows go to. */
typedef struct list_page {
	const memd_session_query *q;
	const memd_session_sink *out;
	uint32_t delivered;         /* sessions delivered so far */
} list_page;

/* sq_row_fn of sq_session_list: the session of st's current row to the
 * page's sink, unless it is archived and the query leaves those out; stops
 * (1) once the page holds q->limit sessions. */
static int32_t list_row(sqlite3_stmt *st, void *ud, memd_error *err)
{
	list_page *p = ud;
	memd_session s;
	int32_t r;

	sq_session_from_row(st, &s);
	if ((s.flags & MEMD_SESSION_ARCHIVED) && !(p->q->flags & MEMD_SQ_INCLUDE_ARCHIVED))
		return 0;
	p->delivered++;
	r = deliver(p->out, &s, err);
	return r == 0 && p->delivered == p->q->limit ? 1 : r;
}

int32_t sq_session_list(void *inst, const memd_call *call, const memd_scope *scope,
			const memd_session_query *q, const memd_session_sink *out,
			memd_error *err)
{
	sq_store *store = inst;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	const sq_sql *sql;
	const char *platform = NULL, *lane = NULL;
	int64_t after_us = 0;
	list_page page = { .q = q, .out = out };
	int32_t r = pu_check_scope(scope, 0, err);
	int rc;

	if (r < 0)
		return r;
	if (!q || !out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "session query or sink is missing");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "session list limit must be > 0");
	if (q->before_created_us && q->before_id && (r = pu_check_id("before_id", q->before_id, err)) < 0)
		return r;
	if (q->struct_size >= offsetof(memd_session_query, lane_key) + sizeof(q->lane_key)) {
		platform = q->origin_platform;
		lane = q->lane_key;
	}
	if (lane && (r = pu_check_id("lane_key", lane, err)) < 0)
		return r;
	if (q->struct_size >= offsetof(memd_session_query, updated_after_us) +
				      sizeof(q->updated_after_us))
		after_us = q->updated_after_us;
	if (after_us < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "updated_after_us is negative");
	if (q->flags & MEMD_SQ_BY_ACTIVITY)
		sql = q->before_created_us ? &SQL_SESSION_LIST_ACTIVITY_BEFORE
					   : &SQL_SESSION_LIST_ACTIVITY;
	else if (lane)
		sql = q->before_created_us ? &SQL_SESSION_LIST_LANE_BEFORE : &SQL_SESSION_LIST_LANE;
	else if (platform)
		sql = q->before_created_us ? &SQL_SESSION_LIST_PLATFORM_BEFORE
					   : &SQL_SESSION_LIST_PLATFORM;
	else
		sql = q->before_created_us ? &SQL_SESSION_LIST_BEFORE : &SQL_SESSION_LIST;
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_stmt(c, sql, &st, err);
	if (r < 0)
		goto out;
	rc = sq_bind_scope(st, scope, 0);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 5, platform);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 6, lane);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 7, after_us);
	if (rc == SQLITE_OK && (q->flags & MEMD_SQ_BY_ACTIVITY))
		rc = sqlite3_bind_int64(st, 8, after_us ? after_us : INT64_MIN);
	if (rc == SQLITE_OK && q->before_created_us) {
		rc = sqlite3_bind_int64(st, 3, q->before_created_us);
		/* No id: every session created at that instant is "after". */
		if (rc == SQLITE_OK)
			rc = sq_bind_text(st, 4, q->before_id ? q->before_id : "");
	}
	r = sq_step_deliver(store, call, c, st, rc, 0, list_row, &page, err, "list sessions");
out:
	sq_stmt_done(st);
	sq_read_end(store, c);
	return r;
}

static int32_t update_session(sq_conn *c, const memd_scope *scope, const memd_session_update *p,
			      memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_SESSION_UPDATE, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(st, 4, (p->fields & MEMD_PATCH_TITLE) != 0);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 5, p->title);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(st, 6, (p->fields & MEMD_PATCH_METADATA) != 0);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 7, p->metadata_json ? p->metadata_json : EMPTY_OBJECT);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(st, 8, (p->fields & MEMD_PATCH_ARCHIVED) != 0);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 9, p->archived ? MEMD_SESSION_ARCHIVED : 0);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 10, MEMD_SESSION_ARCHIVED);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 11, p->now_us);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "update session '%.64s'", scope->session);
	else if (sqlite3_changes(c->db) == 0)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				   scope->session);
	sq_stmt_done(st);
	return r;
}

/* Clear MEMD_SESSION_NOTICE: MEMD_ECONFLICT if it was not set (the
 * first of racing readers owes the notice), MEMD_ENOTFOUND if there is
 * no such session. */
static int32_t clear_notice(sq_conn *c, const memd_scope *scope, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_SESSION_CLEAR_NOTICE, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 4, MEMD_SESSION_NOTICE);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "clear the notice of session '%.64s'", scope->session);
	sq_stmt_done(st);
	if (r == 0 && sqlite3_changes(c->db) == 0) {
		sq_session_head head;
		r = sq_session_head_get(c, NULL, scope, &head, err);
		if (r == 0)
			r = memd_error_set(err, MEMD_ECONFLICT, 0,
					   "session '%.64s' owes no notice (cleared already?)",
					   scope->session);
	}
	return r;
}

int32_t sq_session_update(void *inst, const memd_call *call, const memd_scope *scope,
			  const memd_session_update *p, const memd_session_sink *out,
			  memd_error *err)
{
	sq_store *store = inst;
	sq_conn *c = NULL;
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!p || !out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "session patch or sink is missing");
	if (p->fields & ~(MEMD_PATCH_TITLE | MEMD_PATCH_METADATA | MEMD_PATCH_ARCHIVED |
			  MEMD_PATCH_CLEAR_NOTICE))
		return memd_error_set(err, MEMD_EINVAL, 0, "session patch has unknown fields 0x%x",
				      (unsigned)p->fields);
	if ((p->fields & MEMD_PATCH_METADATA) && p->metadata_json) {
		r = sq_check_json_object("session metadata", p->metadata_json, err);
		if (r < 0)
			return r;
	}
	if ((p->fields & MEMD_PATCH_ARCHIVED) && p->archived > 1)
		return memd_error_set(err, MEMD_EINVAL, 0, "archived must be 0 or 1");

	r = sq_write_begin(store, call, &c, err);
	if (r < 0)
		return r;
	if (p->fields & MEMD_PATCH_CLEAR_NOTICE)
		r = clear_notice(c, scope, err);
	if (r == 0 && (p->fields & ~MEMD_PATCH_CLEAR_NOTICE))
		r = update_session(c, scope, p, err);
	if (r == 0)
		r = sq_session_read_deliver(c, NULL, scope, out, err);
	return sq_write_end(store, c, r, err);
}

/* Run a DELETE keyed by scope (with or without the session); *ret_rows
 * (if not NULL) gets the number of rows it removed. */
static int32_t delete_scoped(sq_conn *c, const sq_sql *sql, const memd_scope *scope,
			     int with_session, const char *what, int64_t *ret_rows,
			     memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, sql, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, with_session);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "delete %s of '%.64s'", what,
			    with_session ? scope->session : scope->user);
	else if (ret_rows)
		*ret_rows = sqlite3_changes(c->db);
	sq_stmt_done(st);
	return r;
}

static int32_t session_delete_once(void *inst, const memd_call *call,
				   const memd_scope *scope, memd_error *err)
{
	sq_store *store = inst;
	sq_session_head head;
	sq_conn *c = NULL;
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	r = sq_write_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_session_head_get(c, NULL, scope, &head, err);
	/* The tasks of the session (its user's, with its id as context). */
	if (r == 0)
		r = sq_tasks_session_delete(c, scope, err);
	/* Events, state, artifacts, checkpoints (with their writes) and the
	 * checkpoint head go with the row (ON DELETE CASCADE). */
	if (r == 0)
		r = delete_scoped(c, &SQL_SESSION_DELETE, scope, 1, "session", NULL, err);
	if (r == 0)
		r = sq_feed_tombstone(c, MEMD_FEED_DELETE_SESSION, scope, err);
	return sq_write_end(store, c, r, err);
}

/* On a full disk the delete is tried again once after sq_make_room: an
 * operator frees space through the API. */
int32_t sq_session_delete(void *inst, const memd_call *call, const memd_scope *scope,
			  memd_error *err)
{
	int32_t r = session_delete_once(inst, call, scope, err);

	if (r < 0 && sq_is_full(err)) {
		sq_make_room(inst);
		r = session_delete_once(inst, call, scope, err);
		sq_after_room(inst, r);
	}
	return r;
}

static int32_t user_delete_once(void *inst, const memd_call *call, const memd_scope *scope,
				memd_error *err)
{
	sq_store *store = inst;
	memd_scope user;
	int64_t n_sessions = 0, n_keys = 0, n_lanes = 0, n_memories = 0, n_tasks = 0;
	sq_conn *c = NULL;
	int32_t r = pu_check_scope(scope, 0, err);

	if (r < 0)
		return r;
	user = (memd_scope){ .struct_size = sizeof(user), .app = scope->app, .user = scope->user };
	r = sq_write_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = delete_scoped(c, &SQL_USER_SESSIONS_DELETE, &user, 0, "sessions", &n_sessions, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_STATE_USER_DELETE_ALL, &user, 0, "user state", &n_keys,
				  err);
	/* Their inboxes go with the lanes (ON DELETE CASCADE). */
	if (r == 0)
		r = delete_scoped(c, &SQL_USER_LANES_DELETE, &user, 0, "lanes", &n_lanes, err);
	/* Memories and their history: the DELETE_USER record covers them. */
	if (r == 0)
		r = sq_memories_user_delete(c, &user, &n_memories, err);
	/* Their tasks (their checkpoints went with their sessions). */
	if (r == 0)
		r = sq_tasks_user_delete(c, &user, &n_tasks, err);
	/* Nothing of theirs was stored: nothing to forget, no record. */
	if (r == 0 && (n_sessions || n_keys || n_lanes || n_memories || n_tasks))
		r = sq_feed_tombstone(c, MEMD_FEED_DELETE_USER, &user, err);
	return sq_write_end(store, c, r, err);
}

/* On a full disk the delete is tried again once after sq_make_room: an
 * operator frees space through the API. */
int32_t sq_user_delete(void *inst, const memd_call *call, const memd_scope *scope,
		       memd_error *err)
{
	int32_t r = user_delete_once(inst, call, scope, err);

	if (r < 0 && sq_is_full(err)) {
		sq_make_room(inst);
		r = user_delete_once(inst, call, scope, err);
		sq_after_room(inst, r);
	}
	return r;
}
