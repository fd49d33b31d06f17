/* SPDX-License-Identifier: MIT */
#include "sq_lanes.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_util.h"
#include "sq_feed.h"
#include "sq_group.h"
#include "sq_sessions.h"

/* The lane flags a store keeps (store.h's MEMD_LANE_*). */
#define LANE_FLAGS_KNOWN                                                                  \
	(MEMD_LANE_SUSPENDED | MEMD_LANE_RESUME_PENDING | MEMD_LANE_FINALIZED |          \
	 MEMD_LANE_FRESH_RESET | MEMD_LANE_RESET_HAD_ACTIVITY)
#define LW_FLAGS_KNOWN (MEMD_LW_CREATE | MEMD_LW_CLEAR_INBOX | MEMD_LW_FEED_FINALIZE)
/* The bound of an open range of times. */
#define TIME_MAX INT64_MAX
#define TIME_MIN INT64_MIN

/* Every query that delivers a lane selects these columns, in order. */
#define LANE_COLS                                                                         \
	"app, user, key, session, flags, origin, created_us, updated_us, version, "      \
	"resume_reason, resume_marked_us, reset_reason, previous_session, reset_us, "    \
	"turn_id, turn_started_us, turn_lease_until_us, interruptions, finalize_failures, " \
	"finalize_claim_until_us, input_tokens, output_tokens, cache_read_tokens, "      \
	"cache_write_tokens, cost_micro_usd, last_prompt_tokens, inbox_depth"

/* Usage added to the sums at ?P .. ?P+5 (input, output, cache read, cache
 * write, cost, last prompt). */
#define USAGE_ADD(p1, p2, p3, p4, p5, p6)                                                 \
	" input_tokens = input_tokens + ?" p1 ", output_tokens = output_tokens + ?" p2 ","  \
	" cache_read_tokens = cache_read_tokens + ?" p3 ","                               \
	" cache_write_tokens = cache_write_tokens + ?" p4 ","                             \
	" cost_micro_usd = cost_micro_usd + ?" p5 ","                                     \
	" last_prompt_tokens = CASE WHEN ?" p6 " > 0 THEN ?" p6 " ELSE last_prompt_tokens END"

static const sq_sql SQL_LANE_GET = { SQ_ST_LANE_GET,
	"SELECT " LANE_COLS " FROM lanes WHERE app = ?1 AND user = ?2 AND key = ?3" };
static const sq_sql SQL_LANE_VERSION = { SQ_ST_LANE_VERSION,
	"SELECT version FROM lanes WHERE app = ?1 AND user = ?2 AND key = ?3" };
/* Host fields at ?4 .. ?19 (see lane_store), now_us at ?7 (created_us),
 * the usage at ?20 .. ?25; an update empties the inbox's depth when ?26
 * (CLEAR_INBOX; positions go on from inbox_next, never reused). */
static const sq_sql SQL_LANE_INSERT = { SQ_ST_LANE_INSERT,
	"INSERT INTO lanes (app, user, key, session, flags, origin, created_us, updated_us,"
	" version, resume_reason, resume_marked_us, reset_reason, previous_session, reset_us,"
	" turn_id, turn_started_us, turn_lease_until_us, interruptions, finalize_failures,"
	" finalize_claim_until_us, input_tokens, output_tokens, cache_read_tokens,"
	" cache_write_tokens, cost_micro_usd, last_prompt_tokens)"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 1, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,"
	" ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25)" };
static const sq_sql SQL_LANE_UPDATE = { SQ_ST_LANE_UPDATE,
	"UPDATE lanes SET session = ?4, flags = ?5, origin = ?6, updated_us = ?8,"
	" version = version + 1, resume_reason = ?9, resume_marked_us = ?10,"
	" reset_reason = ?11, previous_session = ?12, reset_us = ?13, turn_id = ?14,"
	" turn_started_us = ?15, turn_lease_until_us = ?16, interruptions = ?17,"
	" finalize_failures = ?18, finalize_claim_until_us = ?19,"
	USAGE_ADD("20", "21", "22", "23", "24", "25") ","
	" inbox_depth = CASE WHEN ?26 THEN 0 ELSE inbox_depth END"
	" WHERE app = ?1 AND user = ?2 AND key = ?3" };
/* The lane whose current session is ?3 and whose key is that session's
 * lane_key. */
static const sq_sql SQL_LANE_USAGE_OF_SESSION = { SQ_ST_LANE_USAGE_OF_SESSION,
	"UPDATE lanes SET" USAGE_ADD("4", "5", "6", "7", "8", "9")
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND key ="
	" (SELECT lane_key FROM sessions WHERE app = ?1 AND user = ?2 AND id = ?3)" };
static const sq_sql SQL_SESSION_USAGE_ADD = { SQ_ST_SESSION_USAGE_ADD,
	"UPDATE sessions SET" USAGE_ADD("4", "5", "6", "7", "8", "9")
	" WHERE app = ?1 AND user = ?2 AND id = ?3" };
static const sq_sql SQL_SESSION_END = { SQ_ST_SESSION_END,
	"UPDATE sessions SET ended_us = ?4, end_reason = ?5"
	" WHERE app = ?1 AND user = ?2 AND id = ?3 AND ended_us = 0" };
static const sq_sql SQL_SESSION_REOPEN = { SQ_ST_SESSION_REOPEN,
	"UPDATE sessions SET ended_us = 0, end_reason = NULL"
	" WHERE app = ?1 AND user = ?2 AND id = ?3" };

/* lane_list: a range of one index in (updated_us, app, user, key) order,
 * walked newest first: updated_us < ?3 (the tighter of the keyset's and
 * the query's upper bounds) and > ?4; the keyset tuple (?6 .. ?9, when
 * ?5) drops the ties at the bound already listed; the filters ?10 .. ?13
 * (see bind_list) are checked on the rows walked. */
#define LANE_LIST_WHERE                                                                   \
	" updated_us < ?3 AND updated_us > ?4"                                            \
	" AND (?5 = 0 OR (updated_us, app, user, key) < (?6, ?7, ?8, ?9))"                \
	" AND (flags & ?10) = ?10 AND (flags & ?11) = 0"                                  \
	" AND (?12 = 0 OR (?12 = 1) = (turn_id IS NOT NULL))"                             \
	" AND (?13 = 0 OR (turn_id IS NOT NULL AND turn_lease_until_us < ?13))"
static const sq_sql SQL_LANE_LIST_USER = { SQ_ST_LANE_LIST_USER,
	"SELECT " LANE_COLS " FROM lanes INDEXED BY lanes_of_user"
	" WHERE app = ?1 AND user = ?2 AND" LANE_LIST_WHERE
	" ORDER BY updated_us DESC, key DESC" };
static const sq_sql SQL_LANE_LIST_APP = { SQ_ST_LANE_LIST_APP,
	"SELECT " LANE_COLS " FROM lanes INDEXED BY lanes_of_app"
	" WHERE app = ?1 AND ?2 IS NULL AND" LANE_LIST_WHERE
	" ORDER BY updated_us DESC, user DESC, key DESC" };
static const sq_sql SQL_LANE_LIST_ALL = { SQ_ST_LANE_LIST_ALL,
	"SELECT " LANE_COLS " FROM lanes INDEXED BY lanes_by_activity"
	" WHERE ?1 IS NULL AND ?2 IS NULL AND" LANE_LIST_WHERE
	" ORDER BY updated_us DESC, app DESC, user DESC, key DESC" };

/* Inboxes go with their lanes (ON DELETE CASCADE). */
static const sq_sql SQL_LANE_DELETE = { SQ_ST_LANE_DELETE,
	"DELETE FROM lanes WHERE app = ?1 AND user = ?2 AND key = ?3" };
/* The oldest lanes first, from the oldest end of lanes_by_activity. */
static const sq_sql SQL_LANE_PRUNE = { SQ_ST_LANE_PRUNE,
	"DELETE FROM lanes WHERE (app, user, key) IN"
	" (SELECT app, user, key FROM lanes INDEXED BY lanes_by_activity"
	"  WHERE updated_us < ?1 AND (flags & ?2) = 0 AND turn_id IS NULL"
	"  ORDER BY updated_us LIMIT ?3)" };

static const sq_sql SQL_LANE_INBOX_STATE = { SQ_ST_LANE_INBOX_STATE,
	"SELECT inbox_depth, inbox_next, turn_id, turn_lease_until_us FROM lanes"
	" WHERE app = ?1 AND user = ?2 AND key = ?3" };
static const sq_sql SQL_LANE_INBOX_SET = { SQ_ST_LANE_INBOX_SET,
	"UPDATE lanes SET inbox_depth = ?4, inbox_next = ?5"
	" WHERE app = ?1 AND user = ?2 AND key = ?3" };
static const sq_sql SQL_INBOX_INSERT = { SQ_ST_INBOX_INSERT,
	"INSERT INTO inbox (app, user, key, position, id, mode, body, created_us, in_slot)"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)" };
static const sq_sql SQL_INBOX_SLOT_DELETE = { SQ_ST_INBOX_SLOT_DELETE,
	"DELETE FROM inbox WHERE app = ?1 AND user = ?2 AND key = ?3 AND in_slot = 1" };
/* The item columns every inbox query selects, in the order item_from_row
 * reads them. */
#define ITEM_COLS "position, id, mode, body, created_us, in_slot"
static const sq_sql SQL_INBOX_SLOT = { SQ_ST_INBOX_SLOT,
	"SELECT " ITEM_COLS " FROM inbox"
	" WHERE app = ?1 AND user = ?2 AND key = ?3 AND in_slot = 1" };
static const sq_sql SQL_INBOX_HEAD = { SQ_ST_INBOX_HEAD,
	"SELECT " ITEM_COLS " FROM inbox"
	" WHERE app = ?1 AND user = ?2 AND key = ?3 AND in_slot = 0"
	" ORDER BY position LIMIT 1" };
static const sq_sql SQL_INBOX_PROMOTE = { SQ_ST_INBOX_PROMOTE,
	"UPDATE inbox SET in_slot = 1"
	" WHERE app = ?1 AND user = ?2 AND key = ?3 AND position = ?4" };
static const sq_sql SQL_INBOX_DELETE_ONE = { SQ_ST_INBOX_DELETE_ONE,
	"DELETE FROM inbox WHERE app = ?1 AND user = ?2 AND key = ?3 AND position = ?4" };
static const sq_sql SQL_INBOX_CLEAR = { SQ_ST_INBOX_CLEAR,
	"DELETE FROM inbox WHERE app = ?1 AND user = ?2 AND key = ?3" };
static const sq_sql SQL_INBOX_LIST = { SQ_ST_INBOX_LIST,
	"SELECT " ITEM_COLS " FROM inbox WHERE app = ?1 AND user = ?2 AND key = ?3"
	" ORDER BY in_slot DESC, position" };

static const sq_sql SQL_SESSION_LIST_ENDED = { SQ_ST_SESSION_LIST_ENDED,
	"SELECT " SQ_SESSION_COLS " FROM sessions INDEXED BY sessions_ended"
	" WHERE ended_us > 0 AND ended_us < ?1 ORDER BY ended_us, app, user, id LIMIT ?2" };

/* ---- rows and copies ------------------------------------------------- */

static void lane_from_row(sqlite3_stmt *st, memd_lane *l)
{
	memset(l, 0, sizeof(*l));
	l->struct_size = sizeof(*l);
	l->app = sq_col_text(st, 0);
	l->user = sq_col_text(st, 1);
	l->key = sq_col_text(st, 2);
	l->session = sq_col_text(st, 3);
	l->flags = (uint32_t)sqlite3_column_int64(st, 4);
	l->origin_json = sq_col_text(st, 5);
	l->created_us = sqlite3_column_int64(st, 6);
	l->updated_us = sqlite3_column_int64(st, 7);
	l->version = sqlite3_column_int64(st, 8);
	l->resume_reason = sq_col_text(st, 9);
	l->resume_marked_us = sqlite3_column_int64(st, 10);
	l->reset_reason = sq_col_text(st, 11);
	l->previous_session = sq_col_text(st, 12);
	l->reset_us = sqlite3_column_int64(st, 13);
	l->turn_id = sq_col_text(st, 14);
	l->turn_started_us = sqlite3_column_int64(st, 15);
	l->turn_lease_until_us = sqlite3_column_int64(st, 16);
	l->interruptions = (uint32_t)sqlite3_column_int64(st, 17);
	l->finalize_failures = (uint32_t)sqlite3_column_int64(st, 18);
	l->finalize_claim_until_us = sqlite3_column_int64(st, 19);
	l->input_tokens = sqlite3_column_int64(st, 20);
	l->output_tokens = sqlite3_column_int64(st, 21);
	l->cache_read_tokens = sqlite3_column_int64(st, 22);
	l->cache_write_tokens = sqlite3_column_int64(st, 23);
	l->cost_micro_usd = sqlite3_column_int64(st, 24);
	l->last_prompt_tokens = sqlite3_column_int64(st, 25);
	l->inbox_depth = (uint32_t)sqlite3_column_int64(st, 26);
}

/* A lane read inside a write transaction, kept until it commits: the
 * caller's sink sees it only once it is durable. */
typedef struct lane_copy {
	memd_lane l;
	char *buf;               /* the strings of l */
} lane_copy;

static void lane_copy_free(lane_copy *c)
{
	free(c->buf);
	memset(c, 0, sizeof(*c));
}

static int32_t lane_copy_make(const memd_lane *l, lane_copy *c, memd_error *err)
{
	const char **const slots[] = { &c->l.app, &c->l.user, &c->l.key, &c->l.session,
				       &c->l.origin_json, &c->l.resume_reason, &c->l.reset_reason,
				       &c->l.previous_session, &c->l.turn_id };
	int32_t r;

	lane_copy_free(c);
	c->l = *l;
	if ((r = pu_copy_strings(slots, sizeof(slots) / sizeof(slots[0]), &c->buf, err)) < 0)
		memset(c, 0, sizeof(*c));
	return r;
}

static void item_from_row(sqlite3_stmt *st, memd_inbox_item *i)
{
	memset(i, 0, sizeof(*i));
	i->struct_size = sizeof(*i);
	i->position = sqlite3_column_int64(st, 0);
	i->id = sq_col_text(st, 1);
	i->mode = (uint32_t)sqlite3_column_int64(st, 2);
	i->body_json = sq_col_text(st, 3);
	i->created_us = sqlite3_column_int64(st, 4);
	i->in_slot = (uint32_t)sqlite3_column_int64(st, 5);
}

/* An inbox item taken inside a write transaction, kept until it commits. */
typedef struct item_copy {
	memd_inbox_item i;
	char *id, *body;
} item_copy;

static void item_copy_free(item_copy *c)
{
	free(c->id);
	free(c->body);
	memset(c, 0, sizeof(*c));
}

static int32_t item_copy_make(const memd_inbox_item *i, item_copy *c, memd_error *err)
{
	int failed = 0;

	item_copy_free(c);
	c->i = *i;
	c->i.id = c->id = pu_strdup_or_null(i->id, &failed);
	c->i.body_json = c->body = pu_strdup_or_null(i->body_json, &failed);
	if (failed) {
		item_copy_free(c);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	return 0;
}

/* ---- checks ----------------------------------------------------------- */

int32_t sq_usage_check(const memd_usage *u, memd_error *err)
{
	if (!u)
		return 0;
	if (u->input_tokens < 0 || u->output_tokens < 0 || u->cache_read_tokens < 0 ||
	    u->cache_write_tokens < 0 || u->cost_micro_usd < 0 || u->last_prompt_tokens < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "usage must not be negative");
	return 0;
}

/* The scope (app, user) and the lane key. */
static int32_t check_lane_scope(const memd_scope *scope, const char *key, memd_error *err)
{
	int32_t r = pu_check_scope(scope, 0, err);
	return r < 0 ? r : pu_check_id("lane key", key, err);
}

static int32_t check_opt_id(const char *what, const char *id, memd_error *err)
{
	return id ? pu_check_id(what, id, err) : 0;
}

static int32_t check_write(const memd_lane_write *w, const char **ret_metadata, memd_error *err)
{
	const memd_lane *l;
	memd_scope scope;
	int32_t r;

	if (!w || !w->lane || w->struct_size < sizeof(*w) || w->lane->struct_size < sizeof(*l))
		return memd_error_set(err, MEMD_EINVAL, 0, "lane write or its lane is missing");
	l = w->lane;
	if (w->flags & ~LW_FLAGS_KNOWN)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane write has unknown flags 0x%x",
				      (unsigned)w->flags);
	if (l->flags & ~LANE_FLAGS_KNOWN)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane has unknown flags 0x%x",
				      (unsigned)l->flags);
	scope = (memd_scope){ .struct_size = sizeof(scope), .app = l->app, .user = l->user };
	r = check_lane_scope(&scope, l->key, err);
	if (r == 0)
		r = pu_check_id("lane session", l->session, err);
	if (r == 0)
		r = check_opt_id("previous_session", l->previous_session, err);
	if (r == 0)
		r = check_opt_id("end_session", w->end_session, err);
	if (r == 0)
		r = check_opt_id("reopen_session", w->reopen_session, err);
	if (r == 0 && l->origin_json)
		r = sq_check_json_object("lane origin", l->origin_json, err);
	if (r == 0)
		r = sq_usage_check(w->usage, err);
	if (r < 0)
		return r;
	if (w->create_session) {
		const memd_session *s = w->create_session;
		if (!s->app || !s->user || strcmp(s->app, l->app) != 0 ||
		    strcmp(s->user, l->user) != 0)
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "the session to create is not of the lane's app and user");
		r = sq_session_check(s, ret_metadata, err);
	}
	return r;
}

/* ---- usage ------------------------------------------------------------ */

static int bind_usage(sqlite3_stmt *st, int first, const memd_usage *u)
{
	static const memd_usage none = { 0 };
	int rc;

	if (!u)
		u = &none;
	rc = sqlite3_bind_int64(st, first, u->input_tokens);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, first + 1, u->output_tokens);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, first + 2, u->cache_read_tokens);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, first + 3, u->cache_write_tokens);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, first + 4, u->cost_micro_usd);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, first + 5, u->last_prompt_tokens);
	return rc;
}

/* Run a statement keyed by scope (?1 .. ?3) with u at ?4 .. ?9. */
static int32_t usage_update(sq_conn *c, const sq_sql *sql, const memd_scope *scope,
			    const memd_usage *u, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, sql, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = bind_usage(st, 4, u);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "add usage to '%.64s'", scope->session);
	sq_stmt_done(st);
	return r;
}

int32_t sq_usage_add(sq_conn *c, const memd_scope *scope, const memd_usage *u, int with_lane,
		     memd_error *err)
{
	int32_t r;

	if (!u)
		return 0;
	r = usage_update(c, &SQL_SESSION_USAGE_ADD, scope, u, err);
	if (r == 0 && with_lane)
		r = usage_update(c, &SQL_LANE_USAGE_OF_SESSION, scope, u, err);
	return r;
}

/* ---- lane_get --------------------------------------------------------- */

static int bind_lane_key(sqlite3_stmt *st, const char *app, const char *user, const char *key)
{
	int rc = sq_bind_text(st, 1, app);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 2, user);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 3, key);
	return rc;
}

/* Read lane (app, user, key) on c into *ret (a copy). MEMD_ENOTFOUND if
 * there is none. */
static int32_t lane_read(sq_conn *c, const memd_call *call, const char *app, const char *user,
			 const char *key, lane_copy *ret, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_LANE_GET, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = bind_lane_key(st, app, user, key);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		memd_lane l;
		lane_from_row(st, &l);
		sq_count_rows(call, st, 1);
		r = lane_copy_make(&l, ret, err);
	} else if (rc == SQLITE_DONE) {
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "lane '%.64s' not found", key);
	} else {
		r = sq_fail(c, rc, err, "read lane '%.64s'", key);
	}
	sq_stmt_done(st);
	return r;
}

static int32_t deliver_lane(const memd_lane_sink *out, const memd_lane *l, memd_error *err)
{
	int32_t r = sq_sink_result(out->lane(out->userdata, l), "lane", err);
	return r > 0 ? 0 : r;
}

int32_t sq_lane_get(void *inst, const memd_call *call, const memd_scope *scope, const char *key,
		    const memd_lane_sink *out, const memd_session_sink *session_out,
		    memd_error *err)
{
	sq_store *store = inst;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	int32_t r = check_lane_scope(scope, key, err);
	int rc;

	if (r < 0)
		return r;
	if (!out || !out->lane)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane sink is missing");
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	/* Delivered from the row: a read commits nothing, so no copy. */
	r = sq_stmt(c, &SQL_LANE_GET, &st, err);
	if (r == 0) {
		rc = bind_lane_key(st, scope->app, scope->user, key);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			memd_lane l;
			lane_from_row(st, &l);
			sq_count_rows(call, st, 1);
			r = deliver_lane(out, &l, err);
			/* The lane's session in the same read transaction (the
			 * lane row's text stays valid while st is not reset). */
			if (r == 0 && session_out && l.session) {
				memd_scope ss = *scope;
				memd_error se = { .struct_size = sizeof(se) };
				ss.session = l.session;
				r = sq_session_read_deliver(c, call, &ss, session_out, &se);
				if (r == MEMD_ENOTFOUND)
					r = 0; /* gone: nothing for session_out */
				else if (r < 0 && err)
					*err = se;
			}
		} else if (rc == SQLITE_DONE) {
			r = memd_error_set(err, MEMD_ENOTFOUND, 0, "lane '%.64s' not found", key);
		} else {
			r = sq_fail(c, rc, err, "read lane '%.64s'", key);
		}
		sq_stmt_done(st);
	}
	sq_read_end(store, c);
	return r;
}

/* ---- lane_write ------------------------------------------------------- */

typedef struct lane_write_job {
	const memd_lane_write *w;
	const char *metadata;       /* of w->create_session */
	lane_copy stored;           /* the lane after the write */
} lane_write_job;

/* The lane's version, or *ret_found = 0. */
static int32_t lane_version(sq_conn *c, const memd_lane *l, int *ret_found, int64_t *ret_version,
			    memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_LANE_VERSION, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = bind_lane_key(st, l->app, l->user, l->key);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*ret_found = 1;
		*ret_version = sqlite3_column_int64(st, 0);
	} else if (rc == SQLITE_DONE) {
		*ret_found = 0;
	} else {
		r = sq_fail(c, rc, err, "read lane '%.64s'", l->key);
	}
	sq_stmt_done(st);
	return r;
}

/* Set ended_us and end_reason of an open session / clear them. */
static int32_t session_end_or_reopen(sq_conn *c, const memd_lane_write *w, const char *id,
				     int reopen, memd_error *err)
{
	memd_scope scope = { .struct_size = sizeof(scope), .app = w->lane->app,
			     .user = w->lane->user, .session = id };
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, reopen ? &SQL_SESSION_REOPEN : &SQL_SESSION_END, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, &scope, 1);
	if (rc == SQLITE_OK && !reopen)
		rc = sqlite3_bind_int64(st, 4, w->now_us);
	if (rc == SQLITE_OK && !reopen)
		rc = sq_bind_text(st, 5, w->end_reason);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "%s session '%.64s'", reopen ? "reopen" : "end", id);
	else if (reopen && sqlite3_changes(c->db) == 0)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' to reopen not found",
				   id);
	sq_stmt_done(st);
	return r;
}

/* Run a statement keyed by the lane (?1 .. ?3) with no other parameter. */
static int32_t lane_keyed(sq_conn *c, const sq_sql *sql, const char *app, const char *user,
			  const char *key, const char *what, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, sql, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = bind_lane_key(st, app, user, key);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "%s of lane '%.64s'", what, key);
	sq_stmt_done(st);
	return r;
}

/* Insert or update the lane row: the host fields of w->lane, the usage. */
static int32_t lane_store(sq_conn *c, const memd_lane_write *w, int create, memd_error *err)
{
	const memd_lane *l = w->lane;
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, create ? &SQL_LANE_INSERT : &SQL_LANE_UPDATE, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = bind_lane_key(st, l->app, l->user, l->key);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, l->session);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 5, l->flags);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 6, l->origin_json);
	if (rc == SQLITE_OK && create)
		rc = sqlite3_bind_int64(st, 7, w->now_us);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 8, l->updated_us);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 9, l->resume_reason);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 10, l->resume_marked_us);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 11, l->reset_reason);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 12, l->previous_session);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 13, l->reset_us);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 14, l->turn_id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 15, l->turn_started_us);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 16, l->turn_lease_until_us);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 17, l->interruptions);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 18, l->finalize_failures);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 19, l->finalize_claim_until_us);
	if (rc == SQLITE_OK)
		rc = bind_usage(st, 20, w->usage);
	if (rc == SQLITE_OK && !create)
		rc = sqlite3_bind_int(st, 26, (w->flags & MEMD_LW_CLEAR_INBOX) != 0);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if ((rc & 0xff) == SQLITE_CONSTRAINT && create)
		r = memd_error_set(err, MEMD_ECONFLICT, 0, "lane '%.64s' exists already", l->key);
	else if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "write lane '%.64s'", l->key);
	sq_stmt_done(st);
	return r;
}

static int32_t lane_write_apply(sq_conn *c, void *ctx, memd_error *err)
{
	lane_write_job *j = ctx;
	const memd_lane_write *w = j->w;
	const memd_lane *l = w->lane;
	int create = (w->flags & MEMD_LW_CREATE) != 0;
	int found = 0;
	int64_t version = 0;
	int32_t r = lane_version(c, l, &found, &version, err);

	if (r < 0)
		return r;
	if (create && found)
		return memd_error_set(err, MEMD_ECONFLICT, 0, "lane '%.64s' exists already", l->key);
	if (!create && !found)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "lane '%.64s' does not exist (version %lld expected)", l->key,
				      (long long)w->expected_version);
	if (!create && version != w->expected_version)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "lane '%.64s' is at version %lld, not the expected %lld",
				      l->key, (long long)version, (long long)w->expected_version);
	if (w->create_session)
		r = sq_session_insert(c, w->create_session, j->metadata, err);
	if (r == 0 && w->end_session)
		r = session_end_or_reopen(c, w, w->end_session, 0, err);
	if (r == 0 && w->reopen_session)
		r = session_end_or_reopen(c, w, w->reopen_session, 1, err);
	if (r == 0 && w->usage) {
		memd_scope sc = { .struct_size = sizeof(sc), .app = l->app, .user = l->user,
				  .session = l->session };
		r = sq_usage_add(c, &sc, w->usage, 0, err);
	}
	/* The depth is set to 0 with the lane row (lane_store). */
	if (r == 0 && (w->flags & MEMD_LW_CLEAR_INBOX) && found)
		r = lane_keyed(c, &SQL_INBOX_CLEAR, l->app, l->user, l->key, "clear the inbox", err);
	if (r == 0 && (w->flags & MEMD_LW_FEED_FINALIZE)) {
		memd_scope sc = { .struct_size = sizeof(sc), .app = l->app, .user = l->user,
				  .session = l->session };
		r = sq_feed_tombstone(c, MEMD_FEED_FINALIZE, &sc, err);
	}
	if (r == 0)
		r = lane_store(c, w, create, err);
	if (r == 0)
		r = lane_read(c, NULL, l->app, l->user, l->key, &j->stored, err);
	return r;
}

int32_t sq_lane_write(void *inst, const memd_call *call, const memd_lane_write *w,
		      const memd_lane_sink *out, memd_error *err)
{
	lane_write_job job = { .w = w };
	int32_t r = check_write(w, &job.metadata, err);

	if (r < 0)
		return r;
	if (!out || !out->lane)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane sink is missing");
	r = sq_group_write(inst, call, lane_write_apply, &job, 1, err);
	if (r == 0)
		r = deliver_lane(out, &job.stored.l, err);
	lane_copy_free(&job.stored);
	return r;
}

/* ---- lane_list -------------------------------------------------------- */

/* Bind the query's bounds and filters (LANE_LIST_WHERE) to st. */
static int bind_list(sqlite3_stmt *st, const memd_lane_query *q)
{
	int64_t upper = TIME_MAX;
	int keyset = q->before_updated_us != 0;
	int rc;

	if (q->updated_before_us)
		upper = q->updated_before_us;
	/* The keyset's ties are at before_updated_us itself: walk from there. */
	if (keyset && q->before_updated_us < TIME_MAX && q->before_updated_us + 1 < upper)
		upper = q->before_updated_us + 1;
	rc = sq_bind_text(st, 1, q->app);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 2, q->user);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 3, upper);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 4, q->updated_after_us ? q->updated_after_us : TIME_MIN);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(st, 5, keyset);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 6, q->before_updated_us);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 7, q->before_app ? q->before_app : "");
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 8, q->before_user ? q->before_user : "");
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 9, q->before_key ? q->before_key : "");
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 10, q->flags_all);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 11, q->flags_none);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(st, 12, (int)q->turn);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 13, q->lease_before_us);
	return rc;
}

/* sq_row_fn of sq_lane_list: the lane of st's current row to ud, a const
 * memd_lane_sink *. */
static int32_t lane_row(sqlite3_stmt *st, void *ud, memd_error *err)
{
	const memd_lane_sink *out = ud;
	memd_lane l;

	lane_from_row(st, &l);
	return sq_sink_result(out->lane(out->userdata, &l), "lane", err);
}

int32_t sq_lane_list(void *inst, const memd_call *call, const memd_lane_query *q,
		     const memd_lane_sink *out, memd_error *err)
{
	sq_store *store = inst;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	int32_t r = 0;
	int rc;

	if (!q || q->struct_size < sizeof(*q) || !out || !out->lane)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane query or sink is missing");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane list limit must be > 0");
	if (q->user && !q->app)
		return memd_error_set(err, MEMD_EINVAL, 0, "a lane query by user needs the app");
	if (q->turn > MEMD_LQ_TURN_NONE)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane query turn %u is unknown",
				      (unsigned)q->turn);
	if (q->app && (r = pu_check_id("app", q->app, err)) < 0)
		return r;
	if (q->user && (r = pu_check_id("user", q->user, err)) < 0)
		return r;
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_stmt(c, q->user ? &SQL_LANE_LIST_USER : q->app ? &SQL_LANE_LIST_APP
							     : &SQL_LANE_LIST_ALL,
		    &st, err);
	if (r < 0)
		goto out;
	rc = bind_list(st, q);
	r = sq_step_deliver(store, call, c, st, rc, q->limit, lane_row, (void *)out, err,
			    "list lanes");
out:
	sq_stmt_done(st);
	sq_read_end(store, c);
	return r;
}

/* ---- lane_delete, lane_prune ------------------------------------------ */

int32_t sq_lane_delete(void *inst, const memd_call *call, const memd_scope *scope,
		       const char *key, memd_error *err)
{
	sq_store *store = inst;
	sq_conn *c = NULL;
	int32_t r = check_lane_scope(scope, key, err);

	if (r < 0)
		return r;
	r = sq_write_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = lane_keyed(c, &SQL_LANE_DELETE, scope->app, scope->user, key, "delete", err);
	if (r == 0 && sqlite3_changes(c->db) == 0)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "lane '%.64s' not found", key);
	return sq_write_end(store, c, r, err);
}

int32_t sq_lane_prune(void *inst, const memd_call *call, int64_t updated_before_us,
		      uint32_t limit, uint32_t *ret_count, memd_error *err)
{
	sq_store *store = inst;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	uint32_t n = 0;
	int32_t r;
	int rc;

	if (!ret_count)
		return memd_error_set(err, MEMD_EINVAL, 0, "no output count");
	if (limit == 0) {
		*ret_count = 0;
		return 0;
	}
	r = sq_write_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_stmt(c, &SQL_LANE_PRUNE, &st, err);
	if (r == 0) {
		rc = sqlite3_bind_int64(st, 1, updated_before_us);
		if (rc == SQLITE_OK)
			rc = sqlite3_bind_int64(st, 2, MEMD_LANE_SUSPENDED);
		if (rc == SQLITE_OK)
			rc = sqlite3_bind_int64(st, 3, limit);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(st);
		if (rc != SQLITE_DONE)
			r = sq_fail(c, rc, err, "prune lanes");
		else
			n = (uint32_t)sqlite3_changes(c->db);
		sq_stmt_done(st);
	}
	r = sq_write_end(store, c, r, err);
	if (r == 0)
		*ret_count = n;
	return r;
}

/* ---- inbox ------------------------------------------------------------ */

/* What an inbox write reads of its lane. */
typedef struct inbox_state {
	int64_t depth;
	int64_t next;               /* the next item's position */
	int holder;                 /* turn_id is the taker's and its lease holds */
} inbox_state;

/* Read the lane's inbox state; MEMD_ENOTFOUND if there is no lane. With
 * turn_id, say whether that turn holds the lane at now_us. */
static int32_t inbox_state_get(sq_conn *c, const memd_scope *scope, const char *key,
			       const char *turn_id, int64_t now_us, inbox_state *ret,
			       memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_LANE_INBOX_STATE, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = bind_lane_key(st, scope->app, scope->user, key);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *turn = sq_col_text(st, 2);
		ret->depth = sqlite3_column_int64(st, 0);
		ret->next = sqlite3_column_int64(st, 1);
		ret->holder = turn_id && turn && strcmp(turn, turn_id) == 0 &&
			      sqlite3_column_int64(st, 3) > now_us;
	} else if (rc == SQLITE_DONE) {
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "lane '%.64s' not found", key);
	} else {
		r = sq_fail(c, rc, err, "read lane '%.64s'", key);
	}
	sq_stmt_done(st);
	return r;
}

static int32_t inbox_state_set(sq_conn *c, const memd_scope *scope, const char *key,
			       const inbox_state *s, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_LANE_INBOX_SET, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = bind_lane_key(st, scope->app, scope->user, key);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 4, s->depth);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 5, s->next);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "write the inbox of lane '%.64s'", key);
	sq_stmt_done(st);
	return r;
}

/* Run a statement keyed by the lane and an item position (?4). */
static int32_t item_keyed(sq_conn *c, const sq_sql *sql, const memd_scope *scope,
			  const char *key, int64_t position, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, sql, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = bind_lane_key(st, scope->app, scope->user, key);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 4, position);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "change the inbox of lane '%.64s'", key);
	sq_stmt_done(st);
	return r;
}

/* The slot's item or the FIFO's head (sql) into *ret (ret->i.id NULL when
 * there is none). */
static int32_t item_read(sq_conn *c, const sq_sql *sql, const memd_scope *scope, const char *key,
			 item_copy *ret, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, sql, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = bind_lane_key(st, scope->app, scope->user, key);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		memd_inbox_item it;
		item_from_row(st, &it);
		r = item_copy_make(&it, ret, err);
	} else if (rc == SQLITE_DONE) {
		item_copy_free(ret);
	} else {
		r = sq_fail(c, rc, err, "read the inbox of lane '%.64s'", key);
	}
	sq_stmt_done(st);
	return r;
}

typedef struct inbox_put_job {
	const memd_scope *scope;
	const char *key;
	const memd_inbox_item *item;
	uint32_t depth;
} inbox_put_job;

static int32_t inbox_put_apply(sq_conn *c, void *ctx, memd_error *err)
{
	inbox_put_job *j = ctx;
	inbox_state s;
	item_copy slot = { 0 };
	int in_slot = 1;
	sqlite3_stmt *st = NULL;
	int32_t r = inbox_state_get(c, j->scope, j->key, NULL, 0, &s, err);
	int rc;

	if (r < 0)
		return r;
	if (j->item->mode == MEMD_INBOX_INTERRUPT) {
		r = lane_keyed(c, &SQL_INBOX_SLOT_DELETE, j->scope->app, j->scope->user, j->key,
			       "empty the slot", err);
		if (r == 0 && sqlite3_changes(c->db) > 0)
			s.depth--;
	} else {
		r = item_read(c, &SQL_INBOX_SLOT, j->scope, j->key, &slot, err);
		in_slot = slot.i.id == NULL;
		item_copy_free(&slot);
	}
	if (r < 0)
		return r;
	r = sq_stmt(c, &SQL_INBOX_INSERT, &st, err);
	if (r < 0)
		return r;
	rc = bind_lane_key(st, j->scope->app, j->scope->user, j->key);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 4, s.next);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 5, j->item->id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 6, j->item->mode);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 7, j->item->body_json);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 8, j->item->created_us);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(st, 9, in_slot);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "put '%.64s' into the inbox of lane '%.64s'", j->item->id,
			    j->key);
	sq_stmt_done(st);
	if (r < 0)
		return r;
	s.depth++;
	s.next++;
	r = inbox_state_set(c, j->scope, j->key, &s, err);
	if (r == 0)
		j->depth = (uint32_t)s.depth;
	return r;
}

int32_t sq_inbox_put(void *inst, const memd_call *call, const memd_scope *scope, const char *key,
		     const memd_inbox_item *item, uint32_t *ret_depth, memd_error *err)
{
	inbox_put_job job = { .scope = scope, .key = key, .item = item };
	int32_t r = check_lane_scope(scope, key, err);

	if (r < 0)
		return r;
	if (!item || !ret_depth)
		return memd_error_set(err, MEMD_EINVAL, 0, "inbox item or depth output is missing");
	if (item->mode != MEMD_INBOX_INTERRUPT && item->mode != MEMD_INBOX_QUEUE)
		return memd_error_set(err, MEMD_EINVAL, 0, "inbox mode %u is unknown",
				      (unsigned)item->mode);
	r = pu_check_id("inbox item id", item->id, err);
	if (r == 0)
		r = sq_check_json_object("inbox item body", item->body_json, err);
	if (r < 0)
		return r;
	r = sq_group_write(inst, call, inbox_put_apply, &job, 1, err);
	if (r == 0)
		*ret_depth = job.depth;
	return r;
}

typedef struct inbox_take_job {
	const memd_scope *scope;
	const char *key;
	const char *turn_id;
	int64_t now_us;
	item_copy taken;            /* id NULL: the inbox was empty */
	uint32_t depth;
} inbox_take_job;

static int32_t inbox_take_apply(sq_conn *c, void *ctx, memd_error *err)
{
	inbox_take_job *j = ctx;
	item_copy head = { 0 };
	inbox_state s;
	int32_t r = inbox_state_get(c, j->scope, j->key, j->turn_id, j->now_us, &s, err);

	if (r < 0)
		return r;
	if (!s.holder)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "turn '%.64s' does not hold lane '%.64s' (ended, expired or "
				      "another's)",
				      j->turn_id, j->key);
	r = item_read(c, &SQL_INBOX_SLOT, j->scope, j->key, &j->taken, err);
	if (r == 0 && !j->taken.i.id)
		r = item_read(c, &SQL_INBOX_HEAD, j->scope, j->key, &j->taken, err);
	if (r < 0 || !j->taken.i.id) {
		j->depth = r == 0 ? (uint32_t)s.depth : 0;
		return r;
	}
	r = item_keyed(c, &SQL_INBOX_DELETE_ONE, j->scope, j->key, j->taken.i.position, err);
	/* The FIFO's head moves into the emptied slot. */
	if (r == 0)
		r = item_read(c, &SQL_INBOX_HEAD, j->scope, j->key, &head, err);
	if (r == 0 && head.i.id)
		r = item_keyed(c, &SQL_INBOX_PROMOTE, j->scope, j->key, head.i.position, err);
	item_copy_free(&head);
	if (r == 0) {
		s.depth--;
		r = inbox_state_set(c, j->scope, j->key, &s, err);
	}
	if (r == 0)
		j->depth = (uint32_t)s.depth;
	return r;
}

int32_t sq_inbox_take(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *key, const char *turn_id, int64_t now_us,
		      const memd_inbox_sink *out, uint32_t *ret_depth, memd_error *err)
{
	inbox_take_job job = { .scope = scope, .key = key, .turn_id = turn_id, .now_us = now_us };
	int32_t r = check_lane_scope(scope, key, err);

	if (r < 0)
		return r;
	if (!out || !out->item || !ret_depth)
		return memd_error_set(err, MEMD_EINVAL, 0, "inbox sink or depth output is missing");
	r = pu_check_id("turn id", turn_id, err);
	if (r < 0)
		return r;
	r = sq_group_write(inst, call, inbox_take_apply, &job, 1, err);
	if (r == 0 && job.taken.i.id) {
		job.taken.i.in_slot = 1; /* it was next up */
		r = sq_sink_result(out->item(out->userdata, &job.taken.i), "inbox", err);
		if (r > 0)
			r = 0;
	}
	if (r == 0)
		*ret_depth = job.depth;
	item_copy_free(&job.taken);
	return r;
}

int32_t sq_inbox_list(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *key, const memd_inbox_sink *out, memd_error *err)
{
	sq_store *store = inst;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	inbox_state s;
	uint64_t stepped = 0;
	int32_t r = check_lane_scope(scope, key, err);
	int rc;

	if (r < 0)
		return r;
	if (!out || !out->item)
		return memd_error_set(err, MEMD_EINVAL, 0, "inbox sink is missing");
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = inbox_state_get(c, scope, key, NULL, 0, &s, err);
	if (r == 0)
		r = sq_stmt(c, &SQL_INBOX_LIST, &st, err);
	if (r < 0)
		goto out;
	rc = bind_lane_key(st, scope->app, scope->user, key);
	while (rc == SQLITE_OK) {
		memd_inbox_item it;

		rc = sqlite3_step(st);
		if (rc != SQLITE_ROW)
			break;
		rc = SQLITE_OK;
		stepped++;
		item_from_row(st, &it);
		r = sq_sink_result(out->item(out->userdata, &it), "inbox", err);
		if (r != 0)
			break;
	}
	if (r > 0)
		r = 0;
	else if (r == 0 && rc != SQLITE_OK && rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "list the inbox of lane '%.64s'", key);
out:
	if (st)
		sq_count_rows(call, st, stepped);
	sq_stmt_done(st);
	sq_read_end(store, c);
	return r;
}

/* ---- session_list_ended ----------------------------------------------- */

int32_t sq_session_list_ended(void *inst, const memd_call *call, int64_t ended_before_us,
			      uint32_t limit, const memd_session_sink *out, memd_error *err)
{
	sq_store *store = inst;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	int32_t r;
	int rc;

	if (!out || !out->session)
		return memd_error_set(err, MEMD_EINVAL, 0, "session sink is missing");
	if (limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "ended session list limit must be > 0");
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_stmt(c, &SQL_SESSION_LIST_ENDED, &st, err);
	if (r < 0)
		goto out;
	rc = sqlite3_bind_int64(st, 1, ended_before_us);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 2, limit);
	r = sq_step_deliver(store, call, c, st, rc, 0, sq_session_row, (void *)out, err,
			    "list ended sessions");
out:
	sq_stmt_done(st);
	sq_read_end(store, c);
	return r;
}
