/* SPDX-License-Identifier: MIT */
#include "my_sessions.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "plugin_util.h"
#include "my_checkpoints.h"
#include "my_feed.h"
#include "my_lanes.h"
#include "my_memories.h"
#include "my_state.h"
#include "my_tasks.h"

#define EMPTY_OBJECT "{}"
/* A session_list without a bound reads everything it is allowed. */
#define MY_NO_LIMIT UINT64_MAX

/* Every query that delivers a session selects these columns, in order. */
#define SESSION_COLS \
	"app, user, id, title, metadata, flags, created_us, updated_us, version, last_seq, " \
	"summary_seq, lane_key, origin, origin_platform, previous_session, start_reason, " \
	"end_reason, ended_us, input_tokens, output_tokens, cache_read_tokens, " \
	"cache_write_tokens, cost_micro_usd, last_prompt_tokens, message_count, memory_seq"
/* The flags a session keeps. */
#define SESSION_FLAGS (MEMD_SESSION_ARCHIVED | MEMD_SESSION_NOTICE)
/* Does s (of the caller's struct_size) carry member? */
#define SESSION_HAS(s, member) \
	((s)->struct_size >= offsetof(memd_session, member) + sizeof((s)->member))
#define QUERY_HAS(q, member) \
	((q)->struct_size >= offsetof(memd_session_query, member) + sizeof((q)->member))

static const my_sql SQL_SESSION_INSERT = { MY_ST_SESSION_INSERT,
	"INSERT INTO memd_sessions (app, user, id, title, metadata, flags, created_us,"
	" updated_us, lane_key, origin, origin_platform, previous_session, start_reason)"
	" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" };
static const my_sql SQL_SESSION_GET = { MY_ST_SESSION_GET,
	"SELECT " SESSION_COLS " FROM memd_sessions WHERE app = ? AND user = ? AND id = ?" };
static const my_sql SQL_SESSION_LOCK = { MY_ST_SESSION_LOCK,
	"SELECT version, last_seq, summary_seq FROM memd_sessions"
	" WHERE app = ? AND user = ? AND id = ? FOR UPDATE" };
static const my_sql SQL_SESSION_EXISTS = { MY_ST_SESSION_EXISTS,
	"SELECT 1 FROM memd_sessions WHERE app = ? AND user = ? AND id = ?" };
/* Newest first; ?3 = 1 includes archived sessions; ?4 the limit. */
static const my_sql SQL_SESSION_LIST = { MY_ST_SESSION_LIST,
	"SELECT " SESSION_COLS " FROM memd_sessions FORCE INDEX (memd_sessions_by_created)"
	" WHERE app = ? AND user = ? AND (? = 1 OR (flags & ?) = 0) AND updated_us > ?"
	" ORDER BY created_us DESC, id DESC LIMIT ?" };
/* Keyset paging: strictly before (?5, ?6) in (created_us, id) order. */
static const my_sql SQL_SESSION_LIST_BEFORE = { MY_ST_SESSION_LIST_BEFORE,
	"SELECT " SESSION_COLS " FROM memd_sessions FORCE INDEX (memd_sessions_by_created)"
	" WHERE app = ? AND user = ? AND (? = 1 OR (flags & ?) = 0) AND updated_us > ?"
	" AND (created_us < ? OR (created_us = ? AND id < ?))"
	" ORDER BY created_us DESC, id DESC LIMIT ?" };
/* The same with an origin platform (?3), on the index that has it after
 * (app, user); the archive test and the keyset follow as above. */
#define LIST_PLATFORM \
	"SELECT " SESSION_COLS " FROM memd_sessions FORCE INDEX (memd_sessions_by_platform)" \
	" WHERE app = ? AND user = ? AND origin_platform = ? AND (? = 1 OR (flags & ?) = 0)" \
	" AND updated_us > ?"
static const my_sql SQL_SESSION_LIST_PLATFORM = { MY_ST_SESSION_LIST_PLATFORM,
	LIST_PLATFORM " ORDER BY created_us DESC, id DESC LIMIT ?" };
static const my_sql SQL_SESSION_LIST_PLATFORM_BEFORE = { MY_ST_SESSION_LIST_PLATFORM_BEFORE,
	LIST_PLATFORM " AND (created_us < ? OR (created_us = ? AND id < ?))"
	" ORDER BY created_us DESC, id DESC LIMIT ?" };
/* With a lane key (?3) on its index, and the platform too when ?4 is
 * not NULL (?4 = ?5). */
#define LIST_LANE \
	"SELECT " SESSION_COLS " FROM memd_sessions FORCE INDEX (memd_sessions_by_lane)" \
	" WHERE app = ? AND user = ? AND lane_key = ? AND (? IS NULL OR origin_platform = ?)" \
	" AND (? = 1 OR (flags & ?) = 0) AND updated_us > ?"
static const my_sql SQL_SESSION_LIST_LANE = { MY_ST_SESSION_LIST_LANE,
	LIST_LANE " ORDER BY created_us DESC, id DESC LIMIT ?" };
static const my_sql SQL_SESSION_LIST_LANE_BEFORE = { MY_ST_SESSION_LIST_LANE_BEFORE,
	LIST_LANE " AND (created_us < ? OR (created_us = ? AND id < ?))"
	" ORDER BY created_us DESC, id DESC LIMIT ?" };
/* Newest activity first (MEMD_SQ_BY_ACTIVITY), on the (app, user,
 * updated_us, id) index walked backwards: the ORDER BY names only the
 * columns after the fixed app and user, and a keyset page starts with a
 * plain updated_us bound, so reading stops at the limit. The platform
 * (?3 = ?4) and the lane key (?5 = ?6) filter when not NULL. */
#define LIST_ACTIVE \
	"SELECT " SESSION_COLS " FROM memd_sessions FORCE INDEX (memd_sessions_by_updated)" \
	" WHERE app = ? AND user = ? AND (? IS NULL OR origin_platform = ?)" \
	" AND (? IS NULL OR lane_key = ?) AND (? = 1 OR (flags & ?) = 0) AND updated_us > ?"
static const my_sql SQL_SESSION_LIST_ACTIVE = { MY_ST_SESSION_LIST_ACTIVE,
	LIST_ACTIVE " ORDER BY updated_us DESC, id DESC LIMIT ?" };
static const my_sql SQL_SESSION_LIST_ACTIVE_BEFORE = { MY_ST_SESSION_LIST_ACTIVE_BEFORE,
	LIST_ACTIVE " AND updated_us <= ? AND (updated_us < ? OR (updated_us = ? AND id < ?))"
	" ORDER BY updated_us DESC, id DESC LIMIT ?" };
/* Ended sessions of every app and user, oldest ended first (retention). */
static const my_sql SQL_SESSION_LIST_ENDED = { MY_ST_SESSION_LIST_ENDED,
	"SELECT " SESSION_COLS " FROM memd_sessions FORCE INDEX (memd_sessions_by_ended)"
	" WHERE ended_us > 0 AND ended_us < ? ORDER BY ended_us, app, user, id LIMIT ?" };
/* Only a session that has the flag (?1 = ?5) matches: with
 * CLIENT_FOUND_ROWS, 0 rows means absent or already cleared. */
static const my_sql SQL_SESSION_CLEAR_NOTICE = { MY_ST_SESSION_CLEAR_NOTICE,
	"UPDATE memd_sessions SET flags = flags & ~?"
	" WHERE app = ? AND user = ? AND id = ? AND (flags & ?) <> 0" };
static const my_sql SQL_SESSION_END = { MY_ST_SESSION_END,
	"UPDATE memd_sessions SET ended_us = ?, end_reason = ?"
	" WHERE app = ? AND user = ? AND id = ? AND ended_us = 0" };
static const my_sql SQL_SESSION_REOPEN = { MY_ST_SESSION_REOPEN,
	"UPDATE memd_sessions SET ended_us = 0, end_reason = NULL"
	" WHERE app = ? AND user = ? AND id = ?" };
static const my_sql SQL_SESSION_USAGE = { MY_ST_SESSION_USAGE,
	"UPDATE memd_sessions SET " MY_USAGE_ADD " WHERE app = ? AND user = ? AND id = ?" };
/* ?4/?6/?8 say whether to change title / metadata / archived. */
static const my_sql SQL_SESSION_UPDATE = { MY_ST_SESSION_UPDATE,
	"UPDATE memd_sessions SET"
	" title = IF(? = 1, ?, title),"
	" metadata = IF(? = 1, ?, metadata),"
	" flags = IF(? = 1, IF(? = 1, flags | ?, flags & ~?), flags),"
	" updated_us = ?"
	" WHERE app = ? AND user = ? AND id = ?" };
static const my_sql SQL_SESSION_APPENDED = { MY_ST_SESSION_APPENDED,
	"UPDATE memd_sessions SET version = version + 1, last_seq = ?, summary_seq = ?,"
	" message_count = message_count + ?, updated_us = ?, title = COALESCE(title, ?)"
	" WHERE app = ? AND user = ? AND id = ?" };
static const my_sql SQL_SESSION_DELETE = { MY_ST_SESSION_DELETE,
	"DELETE FROM memd_sessions WHERE app = ? AND user = ? AND id = ?" };
static const my_sql SQL_SESSION_EVENTS_DELETE = { MY_ST_SESSION_EVENTS_DELETE,
	"DELETE FROM memd_events WHERE app = ? AND user = ? AND session = ?" };
static const my_sql SQL_SESSION_STATE_DELETE = { MY_ST_SESSION_STATE_DELETE,
	"DELETE FROM memd_state_session WHERE app = ? AND user = ? AND session = ?" };
static const my_sql SQL_SESSION_ARTIFACTS_DELETE = { MY_ST_SESSION_ARTIFACTS_DELETE,
	"DELETE FROM memd_artifacts WHERE app = ? AND user = ? AND session = ?" };
static const my_sql SQL_SESSION_OPS_DELETE = { MY_ST_SESSION_OPS_DELETE,
	"DELETE FROM memd_operations WHERE app = ? AND user = ? AND session = ?" };
static const my_sql SQL_SESSION_HISTORY_DELETE = { MY_ST_SESSION_HISTORY_DELETE,
	"DELETE FROM memd_state_history WHERE app = ? AND user = ? AND session = ?" };
static const my_sql SQL_SESSION_MARKS_DELETE = { MY_ST_SESSION_MARKS_DELETE,
	"DELETE FROM memd_feed_marks WHERE app = ? AND user = ? AND session = ?" };
static const my_sql SQL_USER_OPS_DELETE = { MY_ST_USER_OPS_DELETE,
	"DELETE FROM memd_operations WHERE app = ? AND user = ?" };
static const my_sql SQL_USER_HISTORY_DELETE = { MY_ST_USER_HISTORY_DELETE,
	"DELETE FROM memd_state_history WHERE app = ? AND user = ?" };
static const my_sql SQL_USER_MARKS_DELETE = { MY_ST_USER_MARKS_DELETE,
	"DELETE FROM memd_feed_marks WHERE app = ? AND user = ?" };
static const my_sql SQL_USER_SESSIONS_DELETE = { MY_ST_USER_SESSIONS_DELETE,
	"DELETE FROM memd_sessions WHERE app = ? AND user = ?" };
static const my_sql SQL_USER_EVENTS_DELETE = { MY_ST_USER_EVENTS_DELETE,
	"DELETE FROM memd_events WHERE app = ? AND user = ?" };
static const my_sql SQL_USER_SESSION_STATE_DELETE = { MY_ST_USER_SESSION_STATE_DELETE,
	"DELETE FROM memd_state_session WHERE app = ? AND user = ?" };
static const my_sql SQL_USER_ARTIFACTS_DELETE = { MY_ST_USER_ARTIFACTS_DELETE,
	"DELETE FROM memd_artifacts WHERE app = ? AND user = ?" };
static const my_sql SQL_USER_STATE_DELETE = { MY_ST_USER_STATE_DELETE,
	"DELETE FROM memd_state_user WHERE app = ? AND user = ?" };
static const my_sql SQL_USER_LANES_DELETE = { MY_ST_USER_LANES_DELETE,
	"DELETE FROM memd_lanes WHERE app = ? AND user = ?" };
static const my_sql SQL_USER_INBOX_DELETE = { MY_ST_USER_INBOX_DELETE,
	"DELETE FROM memd_inbox WHERE app = ? AND user = ?" };

/* ---- rows and copies ------------------------------------------------- */

void my_session_from_row(const my_stmt *s, unsigned at, memd_session *out)
{
	memset(out, 0, sizeof(*out));
	out->struct_size = sizeof(*out);
	out->app = my_col_text(s, at + 0);
	out->user = my_col_text(s, at + 1);
	out->id = my_col_text(s, at + 2);
	out->title = my_col_text(s, at + 3);
	out->metadata_json = my_col_text(s, at + 4);
	out->flags = (uint32_t)my_col_i64(s, at + 5) & SESSION_FLAGS;
	out->created_us = my_col_i64(s, at + 6);
	out->updated_us = my_col_i64(s, at + 7);
	out->version = my_col_i64(s, at + 8);
	out->last_seq = my_col_i64(s, at + 9);
	out->summary_seq = my_col_i64(s, at + 10);
	out->lane_key = my_col_text(s, at + 11);
	out->origin_json = my_col_text(s, at + 12);
	out->origin_platform = my_col_text(s, at + 13);
	out->previous_session = my_col_text(s, at + 14);
	out->start_reason = my_col_text(s, at + 15);
	out->end_reason = my_col_text(s, at + 16);
	out->ended_us = my_col_i64(s, at + 17);
	out->input_tokens = my_col_i64(s, at + 18);
	out->output_tokens = my_col_i64(s, at + 19);
	out->cache_read_tokens = my_col_i64(s, at + 20);
	out->cache_write_tokens = my_col_i64(s, at + 21);
	out->cost_micro_usd = my_col_i64(s, at + 22);
	out->last_prompt_tokens = my_col_i64(s, at + 23);
	out->message_count = my_col_i64(s, at + 24);
	out->memory_seq = my_col_i64(s, at + 25);
}

static void session_from_row(const my_stmt *s, memd_session *out)
{
	my_session_from_row(s, 0, out);
}

int32_t my_session_row(const my_stmt *s, void *ud, memd_error *err)
{
	const memd_session_sink *out = ud;
	memd_session row;

	session_from_row(s, &row);
	return my_sink_result(out->session(out->userdata, &row), "session", err);
}

/* A session read inside a transaction, delivered after the commit. */
typedef struct session_copy {
	memd_session s;
	char *buf;
} session_copy;

static void session_copy_clear(session_copy *c)
{
	free(c->buf);
	memset(c, 0, sizeof(*c));
}

static int32_t session_copy_make(const memd_session *src, session_copy *dst, memd_error *err)
{
	const char **slots[] = { &dst->s.app, &dst->s.user, &dst->s.id, &dst->s.title,
				 &dst->s.metadata_json, &dst->s.lane_key, &dst->s.origin_json,
				 &dst->s.origin_platform, &dst->s.previous_session,
				 &dst->s.start_reason, &dst->s.end_reason };

	session_copy_clear(dst);
	dst->s = *src;
	return pu_copy_strings(slots, sizeof(slots) / sizeof(slots[0]), &dst->buf, err);
}

static int32_t deliver(const memd_session_sink *out, const memd_session *s, memd_error *err)
{
	int32_t r = my_sink_result(out->session(out->userdata, s), "session", err);
	return r > 0 ? 0 : r;
}

/* Read scope's session on c: into copy when copy is set, else to out. */
static int32_t read_session(my_conn *c, const memd_scope *scope, session_copy *copy,
			    const memd_session_sink *out, memd_error *err)
{
	my_stmt *s = NULL;
	memd_session row;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, scope, 1);
	r = my_exec(c, &SQL_SESSION_GET, &p, &s, err);
	if (r == 0)
		r = my_fetch(c, s, err);
	if (r == 0)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				      scope->session);
	if (r < 0)
		return r;
	session_from_row(s, &row);
	r = copy ? session_copy_make(&row, copy, err) : deliver(out, &row, err);
	my_done(s);
	return r;
}

/* ---- helpers for other modules ---------------------------------------- */

int32_t my_session_lock(my_conn *c, const memd_scope *scope, my_session_head *ret,
			memd_error *err)
{
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, scope, 1);
	r = my_exec(c, &SQL_SESSION_LOCK, &p, &s, err);
	if (r == 0)
		r = my_fetch(c, s, err);
	if (r == 0)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				      scope->session);
	if (r < 0)
		return r;
	ret->version = my_col_i64(s, 0);
	ret->last_seq = my_col_i64(s, 1);
	ret->summary_seq = my_col_i64(s, 2);
	my_done(s);
	return 0;
}

int32_t my_session_appended(my_conn *c, const memd_scope *scope, const my_session_head *h,
			    int64_t messages_added, int64_t now_us, const char *title_if_unset,
			    memd_error *err)
{
	my_params p;

	my_params_init(&p);
	my_param_i64(&p, h->last_seq);
	my_param_i64(&p, h->summary_seq);
	my_param_i64(&p, messages_added);
	my_param_i64(&p, now_us);
	my_param_text(&p, title_if_unset);
	my_param_scope(&p, scope, 1);
	return my_exec(c, &SQL_SESSION_APPENDED, &p, NULL, err);
}

int32_t my_session_exists(my_conn *c, const memd_scope *scope, int *ret_exists,
			  memd_error *err)
{
	int64_t one = 0;
	my_params p;

	my_params_init(&p);
	my_param_scope(&p, scope, 1);
	return my_query_i64(c, &SQL_SESSION_EXISTS, &p, ret_exists, &one, err);
}

int32_t my_session_add_usage(my_conn *c, const memd_scope *scope, const memd_usage *u,
			     memd_error *err)
{
	my_params p;

	my_params_init(&p);
	my_param_usage(&p, u);
	my_param_scope(&p, scope, 1);
	return my_exec(c, &SQL_SESSION_USAGE, &p, NULL, err);
}

int32_t my_session_end(my_conn *c, const memd_scope *scope, const char *reason, int64_t now_us,
		       memd_error *err)
{
	my_params p;

	my_params_init(&p);
	my_param_i64(&p, now_us);
	my_param_text(&p, reason);
	my_param_scope(&p, scope, 1);
	return my_exec(c, &SQL_SESSION_END, &p, NULL, err);
}

int32_t my_session_reopen(my_conn *c, const memd_scope *scope, memd_error *err)
{
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, scope, 1);
	r = my_exec(c, &SQL_SESSION_REOPEN, &p, &s, err);
	/* CLIENT_FOUND_ROWS: a match counts even when it was open already. */
	if (r == 0 && my_affected(s) == 0)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				   scope->session);
	return r;
}

/* ---- create ----------------------------------------------------------- */

int32_t my_session_check_new(const memd_session *s, memd_error *err)
{
	memd_scope scope = { .struct_size = sizeof(scope), .app = s->app, .user = s->user,
			     .session = s->id };
	int32_t r = pu_check_scope(&scope, 1, err);

	if (r == 0 && s->metadata_json)
		r = my_check_json_object("session metadata", s->metadata_json, err);
	if (r < 0 || !SESSION_HAS(s, start_reason))
		return r;
	if (s->lane_key)
		r = pu_check_id("session lane_key", s->lane_key, err);
	if (r == 0 && s->origin_platform)
		r = pu_check_id("session origin_platform", s->origin_platform, err);
	if (r == 0 && s->previous_session)
		r = pu_check_id("session previous_session", s->previous_session, err);
	if (r == 0 && s->origin_json)
		r = my_check_json_object("session origin", s->origin_json, err);
	return r;
}

int32_t my_session_insert(my_conn *c, const memd_session *s, memd_error *err)
{
	int lifecycle = SESSION_HAS(s, start_reason);
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_text(&p, s->app);
	my_param_text(&p, s->user);
	my_param_text(&p, s->id);
	my_param_text(&p, s->title);
	my_param_text(&p, s->metadata_json ? s->metadata_json : EMPTY_OBJECT);
	my_param_i64(&p, s->flags & SESSION_FLAGS);
	my_param_i64(&p, s->created_us);
	my_param_i64(&p, s->created_us);
	my_param_text(&p, lifecycle ? s->lane_key : NULL);
	my_param_text(&p, lifecycle ? s->origin_json : NULL);
	my_param_text(&p, lifecycle ? s->origin_platform : NULL);
	my_param_text(&p, lifecycle ? s->previous_session : NULL);
	my_param_text(&p, lifecycle ? s->start_reason : NULL);
	r = my_exec(c, &SQL_SESSION_INSERT, &p, NULL, err);
	if (r == MEMD_ECONFLICT && c->last_errno == ER_DUP_ENTRY)
		return memd_error_set(err, MEMD_ECONFLICT, 0, "session '%.64s' already exists",
				      s->id);
	return r;
}

typedef struct create_ctx {
	const memd_session *s;
	const char *delta;
	memd_scope scope;
	session_copy out;
} create_ctx;

static int32_t create_body(my_conn *c, void *arg, memd_error *err)
{
	create_ctx *x = arg;
	/* The initial state is recorded as version 0's changes. */
	my_state_write w = { .version = 0, .seq = 0, .at_us = x->s->created_us };
	int32_t r = my_session_insert(c, x->s, err);

	if (r == 0)
		r = my_state_apply(c, &x->scope, x->delta, &w, err);
	if (r == 0)
		r = read_session(c, &x->scope, &x->out, NULL, err);
	return r;
}

int32_t my_session_create(void *inst, const memd_call *call, const memd_session *s,
			  const char *state_delta_json, const memd_session_sink *out,
			  memd_error *err)
{
	create_ctx x = { 0 };
	int32_t r;

	if (!s || !out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "session or its sink is missing");
	x.s = s;
	x.delta = state_delta_json;
	x.scope = (memd_scope){ .struct_size = sizeof(x.scope), .app = s->app, .user = s->user,
				.session = s->id };
	r = my_session_check_new(s, err);
	if (r == 0)
		r = my_state_check(state_delta_json, err);
	if (r == 0)
		r = my_run(inst, call, MY_TXN, create_body, &x, err);
	if (r == 0)
		r = deliver(out, &x.out.s, err);
	session_copy_clear(&x.out);
	return r;
}

/* ---- get and list ------------------------------------------------------ */

typedef struct get_ctx {
	const memd_scope *scope;
	const memd_session_sink *out;
} get_ctx;

static int32_t get_body(my_conn *c, void *arg, memd_error *err)
{
	get_ctx *x = arg;
	return read_session(c, x->scope, NULL, x->out, err);
}

int32_t my_session_get(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_session_sink *out, memd_error *err)
{
	get_ctx x = { .scope = scope, .out = out };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "session sink is missing");
	return my_run(inst, call, MY_AUTOCOMMIT, get_body, &x, err);
}

typedef struct list_ctx {
	my_store *store;
	const memd_call *call;
	const memd_scope *scope;
	const memd_session_query *q;
	const memd_session_sink *out;
} list_ctx;

/* The statement for q's filters and paging. */
static const my_sql *list_query(const memd_session_query *q, const char *platform,
				const char *lane)
{
	int before = q->before_created_us != 0;

	if (q->flags & MEMD_SQ_BY_ACTIVITY)
		return before ? &SQL_SESSION_LIST_ACTIVE_BEFORE : &SQL_SESSION_LIST_ACTIVE;
	if (lane)
		return before ? &SQL_SESSION_LIST_LANE_BEFORE : &SQL_SESSION_LIST_LANE;
	if (platform)
		return before ? &SQL_SESSION_LIST_PLATFORM_BEFORE : &SQL_SESSION_LIST_PLATFORM;
	return before ? &SQL_SESSION_LIST_BEFORE : &SQL_SESSION_LIST;
}

static int32_t list_body(my_conn *c, void *arg, memd_error *err)
{
	list_ctx *x = arg;
	const memd_session_query *q = x->q;
	const char *platform = QUERY_HAS(q, origin_platform) ? q->origin_platform : NULL;
	const char *lane = QUERY_HAS(q, lane_key) ? q->lane_key : NULL;
	/* No bound: every updated_us is above the smallest value. */
	int64_t updated_after = QUERY_HAS(q, updated_after_us) && q->updated_after_us
					? q->updated_after_us : INT64_MIN;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, x->scope, 0);
	if (q->flags & MEMD_SQ_BY_ACTIVITY) {
		my_param_text(&p, platform);
		my_param_text(&p, platform);
		my_param_text(&p, lane);
		my_param_text(&p, lane);
	} else if (lane) {
		my_param_text(&p, lane);
		my_param_text(&p, platform);
		my_param_text(&p, platform);
	} else if (platform) {
		my_param_text(&p, platform);
	}
	my_param_i64(&p, (q->flags & MEMD_SQ_INCLUDE_ARCHIVED) ? 1 : 0);
	my_param_i64(&p, MEMD_SESSION_ARCHIVED);
	my_param_i64(&p, updated_after);
	if (q->before_created_us) {
		if (q->flags & MEMD_SQ_BY_ACTIVITY)
			my_param_i64(&p, q->before_created_us);
		my_param_i64(&p, q->before_created_us);
		my_param_i64(&p, q->before_created_us);
		/* No id: every session created at that instant is "after". */
		my_param_text(&p, q->before_id ? q->before_id : "");
	}
	my_param_u64(&p, q->limit ? q->limit : MY_NO_LIMIT);
	r = my_exec(c, list_query(q, platform, lane), &p, &s, err);
	return my_fetch_deliver(x->store, x->call, c, s, r, my_session_row, (void *)x->out, NULL,
				err);
}

int32_t my_session_list(void *inst, const memd_call *call, const memd_scope *scope,
			const memd_session_query *q, const memd_session_sink *out,
			memd_error *err)
{
	list_ctx x = { .store = inst, .call = call, .scope = scope, .q = q, .out = out };
	int32_t r = pu_check_scope(scope, 0, err);

	if (r < 0)
		return r;
	if (!q || !out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "session query or sink is missing");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "session list limit must be > 0");
	if (q->before_created_us && q->before_id &&
	    (r = pu_check_id("before_id", q->before_id, err)) < 0)
		return r;
	if (QUERY_HAS(q, origin_platform) && q->origin_platform &&
	    (r = pu_check_id("origin_platform", q->origin_platform, err)) < 0)
		return r;
	if (QUERY_HAS(q, lane_key) && q->lane_key &&
	    (r = pu_check_id("lane_key", q->lane_key, err)) < 0)
		return r;
	if (q->flags & ~(MEMD_SQ_INCLUDE_ARCHIVED | MEMD_SQ_BY_ACTIVITY))
		return memd_error_set(err, MEMD_EINVAL, 0, "session query has unknown flags 0x%x",
				      (unsigned)q->flags);
	return my_run(inst, call, MY_AUTOCOMMIT, list_body, &x, err);
}

typedef struct ended_ctx {
	my_store *store;
	const memd_call *call;
	int64_t before_us;
	uint32_t limit;
	const memd_session_sink *out;
} ended_ctx;

static int32_t ended_body(my_conn *c, void *arg, memd_error *err)
{
	ended_ctx *x = arg;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_i64(&p, x->before_us);
	my_param_u64(&p, x->limit);
	r = my_exec(c, &SQL_SESSION_LIST_ENDED, &p, &s, err);
	return my_fetch_deliver(x->store, x->call, c, s, r, my_session_row, (void *)x->out, NULL,
				err);
}

int32_t my_session_list_ended(void *inst, const memd_call *call, int64_t ended_before_us,
			      uint32_t limit, const memd_session_sink *out, memd_error *err)
{
	ended_ctx x = { .store = inst, .call = call, .before_us = ended_before_us,
			.limit = limit, .out = out };

	if (!out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "session sink is missing");
	if (limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "ended session list limit must be > 0");
	return my_run(inst, call, MY_AUTOCOMMIT, ended_body, &x, err);
}

/* ---- update ------------------------------------------------------------ */

typedef struct update_ctx {
	const memd_scope *scope;
	const memd_session_update *p;
	session_copy out;
} update_ctx;

/* Clear scope's NOTICE flag, leaving updated_us and the version: only
 * one of several racing callers finds it set (the row lock orders them,
 * and each re-reads the committed flags), the others get MEMD_ECONFLICT. */
static int32_t clear_notice(my_conn *c, const memd_scope *scope, memd_error *err)
{
	my_stmt *s = NULL;
	int exists = 0;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_i64(&p, MEMD_SESSION_NOTICE);
	my_param_scope(&p, scope, 1);
	my_param_i64(&p, MEMD_SESSION_NOTICE);
	r = my_exec(c, &SQL_SESSION_CLEAR_NOTICE, &p, &s, err);
	if (r < 0 || my_affected(s) == 1)
		return r;
	r = my_session_exists(c, scope, &exists, err);
	if (r < 0)
		return r;
	if (!exists)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				      scope->session);
	return memd_error_set(err, MEMD_ECONFLICT, 0, "session '%.64s' has no notice to clear",
			      scope->session);
}

static int32_t update_body(my_conn *c, void *arg, memd_error *err)
{
	update_ctx *x = arg;
	const memd_session_update *u = x->p;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	if (u->fields & MEMD_PATCH_CLEAR_NOTICE) {
		r = clear_notice(c, x->scope, err);
		if (r == 0 && !(u->fields & ~MEMD_PATCH_CLEAR_NOTICE))
			return read_session(c, x->scope, &x->out, NULL, err);
		if (r < 0)
			return r;
	}
	my_params_init(&p);
	my_param_i64(&p, (u->fields & MEMD_PATCH_TITLE) != 0);
	my_param_text(&p, u->title);
	my_param_i64(&p, (u->fields & MEMD_PATCH_METADATA) != 0);
	my_param_text(&p, u->metadata_json ? u->metadata_json : EMPTY_OBJECT);
	my_param_i64(&p, (u->fields & MEMD_PATCH_ARCHIVED) != 0);
	my_param_i64(&p, u->archived ? 1 : 0);
	my_param_i64(&p, MEMD_SESSION_ARCHIVED);
	my_param_i64(&p, MEMD_SESSION_ARCHIVED);
	my_param_i64(&p, u->now_us);
	my_param_scope(&p, x->scope, 1);
	r = my_exec(c, &SQL_SESSION_UPDATE, &p, &s, err);
	if (r == 0 && my_affected(s) == 0)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				   x->scope->session);
	if (r == 0)
		r = read_session(c, x->scope, &x->out, NULL, err);
	return r;
}

int32_t my_session_update(void *inst, const memd_call *call, const memd_scope *scope,
			  const memd_session_update *p, const memd_session_sink *out,
			  memd_error *err)
{
	update_ctx x = { .scope = scope, .p = p };
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
		r = my_check_json_object("session metadata", p->metadata_json, err);
		if (r < 0)
			return r;
	}
	if ((p->fields & MEMD_PATCH_ARCHIVED) && p->archived > 1)
		return memd_error_set(err, MEMD_EINVAL, 0, "archived must be 0 or 1");
	r = my_run(inst, call, MY_TXN, update_body, &x, err);
	if (r == 0)
		r = deliver(out, &x.out.s, err);
	session_copy_clear(&x.out);
	return r;
}

/* ---- deletes ------------------------------------------------------------ */

/* Run a DELETE keyed by scope; *ret_rows (if not NULL) gets the count. */
static int32_t delete_scoped(my_conn *c, const my_sql *sql, const memd_scope *scope,
			     int with_session, uint64_t *ret_rows, memd_error *err)
{
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, scope, with_session);
	r = my_exec(c, sql, &p, &s, err);
	if (r == 0 && ret_rows)
		*ret_rows = my_affected(s);
	return r;
}

static int32_t session_delete_body(my_conn *c, void *arg, memd_error *err)
{
	const memd_scope *scope = arg;
	my_session_head head;
	int32_t r = my_session_lock(c, scope, &head, err);

	if (r == 0)
		r = delete_scoped(c, &SQL_SESSION_EVENTS_DELETE, scope, 1, NULL, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_SESSION_STATE_DELETE, scope, 1, NULL, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_SESSION_ARTIFACTS_DELETE, scope, 1, NULL, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_SESSION_OPS_DELETE, scope, 1, NULL, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_SESSION_HISTORY_DELETE, scope, 1, NULL, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_SESSION_MARKS_DELETE, scope, 1, NULL, err);
	/* Its checkpoints and the tasks of its context (since 1.5). */
	if (r == 0)
		r = my_checkpoints_session_delete(c, scope, err);
	if (r == 0)
		r = my_tasks_session_delete(c, scope, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_SESSION_DELETE, scope, 1, NULL, err);
	if (r == 0)
		r = my_feed_tombstone(c, MEMD_FEED_DELETE_SESSION, scope, err);
	return r;
}

int32_t my_session_delete(void *inst, const memd_call *call, const memd_scope *scope,
			  memd_error *err)
{
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	return my_run(inst, call, MY_TXN, session_delete_body, (void *)scope, err);
}

static int32_t user_delete_body(my_conn *c, void *arg, memd_error *err)
{
	const memd_scope *user = arg;
	uint64_t n_sessions = 0, n_keys = 0, n_memories = 0, n_checkpoints = 0, n_tasks = 0;
	/* The session rows first: their locks keep appends out. */
	int32_t r = delete_scoped(c, &SQL_USER_SESSIONS_DELETE, user, 0, &n_sessions, err);

	if (r == 0)
		r = delete_scoped(c, &SQL_USER_EVENTS_DELETE, user, 0, NULL, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_USER_SESSION_STATE_DELETE, user, 0, NULL, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_USER_ARTIFACTS_DELETE, user, 0, NULL, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_USER_OPS_DELETE, user, 0, NULL, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_USER_HISTORY_DELETE, user, 0, NULL, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_USER_MARKS_DELETE, user, 0, NULL, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_USER_STATE_DELETE, user, 0, &n_keys, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_USER_LANES_DELETE, user, 0, NULL, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_USER_INBOX_DELETE, user, 0, NULL, err);
	/* The memories and their history: the DELETE_USER record covers
	 * them (no MEMORY_DELETE records). */
	if (r == 0)
		r = my_memories_user_delete(c, user, &n_memories, err);
	/* Checkpoints (of sessions gone above) and tasks: not in the feed. */
	if (r == 0)
		r = my_checkpoints_user_delete(c, user, &n_checkpoints, err);
	if (r == 0)
		r = my_tasks_user_delete(c, user, &n_tasks, err);
	/* Nothing of theirs was stored: nothing to forget, no record. */
	if (r == 0 && (n_sessions || n_keys || n_memories || n_checkpoints || n_tasks))
		r = my_feed_tombstone(c, MEMD_FEED_DELETE_USER, user, err);
	return r;
}

int32_t my_user_delete(void *inst, const memd_call *call, const memd_scope *scope,
		       memd_error *err)
{
	memd_scope user;
	int32_t r = pu_check_scope(scope, 0, err);

	if (r < 0)
		return r;
	user = (memd_scope){ .struct_size = sizeof(user), .app = scope->app, .user = scope->user };
	return my_run(inst, call, MY_TXN, user_delete_body, &user, err);
}
