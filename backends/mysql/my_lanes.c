/* SPDX-License-Identifier: MIT */
#include "my_lanes.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "plugin_util.h"
#include "my_feed.h"
#include "my_sessions.h"

/* The lane flags and lane_write flags a store knows (store.h). */
#define LANE_FLAGS_KNOWN                                                                   \
	(MEMD_LANE_SUSPENDED | MEMD_LANE_RESUME_PENDING | MEMD_LANE_FINALIZED |             \
	 MEMD_LANE_FRESH_RESET | MEMD_LANE_RESET_HAD_ACTIVITY)
#define LW_FLAGS_KNOWN (MEMD_LW_CREATE | MEMD_LW_CLEAR_INBOX | MEMD_LW_FEED_FINALIZE)
/* Room for an id or a lane key and its NUL. */
#define MY_ID_BUF (MEMD_ID_MAX + 1)
/* Lanes a prune keeps in memory before growing its list. */
#define MY_PRUNE_INITIAL 64

/* Does *ptr (a struct of type with the caller's struct_size) carry member? */
#define HAS(ptr, type, member) \
	((ptr)->struct_size >= offsetof(type, member) + sizeof((ptr)->member))

/* Every query that delivers a lane selects these columns of memd_lanes l,
 * in order, the inbox depth last. */
#define LANE_COLS                                                                           \
	"l.app, l.user, l.lane_key, l.flags, l.session, l.origin, l.created_us, l.updated_us," \
	" l.version, l.resume_reason, l.resume_marked_us, l.reset_reason, l.previous_session," \
	" l.reset_us, l.turn_id, l.turn_started_us, l.turn_lease_until_us, l.interruptions,"   \
	" l.finalize_failures, l.finalize_claim_until_us, l.input_tokens, l.output_tokens,"    \
	" l.cache_read_tokens, l.cache_write_tokens, l.cost_micro_usd, l.last_prompt_tokens,"  \
	" (SELECT COUNT(*) FROM memd_inbox i WHERE i.app = l.app AND i.user = l.user"          \
	"  AND i.lane_key = l.lane_key)"
/* One lane (or its inbox) by its primary key: 3 parameters. */
#define LANE_PK " app = ? AND user = ? AND lane_key = ?"

static const my_sql SQL_LANE_GET = { MY_ST_LANE_GET,
	"SELECT " LANE_COLS " FROM memd_lanes l"
	" WHERE l.app = ? AND l.user = ? AND l.lane_key = ?" };
/* The lane and, from the same snapshot, the session it names (its
 * columns NULL when that session is gone), from LANE_COLS_N on. */
#define LANE_COLS_N 27
static const my_sql SQL_LANE_GET_SESSION = { MY_ST_LANE_GET_SESSION,
	"SELECT " LANE_COLS ", " MY_SESSION_COLS_S " FROM memd_lanes l"
	" LEFT JOIN memd_sessions s ON s.app = l.app AND s.user = l.user AND s.id = l.session"
	" WHERE l.app = ? AND l.user = ? AND l.lane_key = ?" };
static const my_sql SQL_LANE_LOCK = { MY_ST_LANE_LOCK,
	"SELECT version, turn_id, turn_lease_until_us, inbox_last FROM memd_lanes"
	" WHERE" LANE_PK " FOR UPDATE" };
static const my_sql SQL_LANE_EXISTS = { MY_ST_LANE_EXISTS,
	"SELECT 1 FROM memd_lanes WHERE" LANE_PK };
/* A new lane: version 1, created_us = updated_us's ?7, the usage given. */
static const my_sql SQL_LANE_INSERT = { MY_ST_LANE_INSERT,
	"INSERT INTO memd_lanes (app, user, lane_key, flags, session, origin, created_us,"
	" updated_us, version, resume_reason, resume_marked_us, reset_reason, previous_session,"
	" reset_us, turn_id, turn_started_us, turn_lease_until_us, interruptions,"
	" finalize_failures, finalize_claim_until_us, input_tokens, output_tokens,"
	" cache_read_tokens, cache_write_tokens, cost_micro_usd, last_prompt_tokens)"
	" VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" };
/* Every host field, version + 1 and the usage added, iff at the version
 * expected (the last parameter). */
static const my_sql SQL_LANE_UPDATE = { MY_ST_LANE_UPDATE,
	"UPDATE memd_lanes SET flags = ?, session = ?, origin = ?, updated_us = ?,"
	" version = version + 1, resume_reason = ?, resume_marked_us = ?, reset_reason = ?,"
	" previous_session = ?, reset_us = ?, turn_id = ?, turn_started_us = ?,"
	" turn_lease_until_us = ?, interruptions = ?, finalize_failures = ?,"
	" finalize_claim_until_us = ?, " MY_USAGE_ADD
	" WHERE" LANE_PK " AND version = ?" };
/* An append's usage, to the lanes whose current session it is. */
static const my_sql SQL_LANE_USAGE = { MY_ST_LANE_USAGE,
	"UPDATE memd_lanes FORCE INDEX (memd_lanes_by_session) SET " MY_USAGE_ADD
	" WHERE app = ? AND user = ? AND session = ?" };
static const my_sql SQL_LANE_DELETE = { MY_ST_LANE_DELETE,
	"DELETE FROM memd_lanes WHERE" LANE_PK };
static const my_sql SQL_LANE_INBOX_LAST = { MY_ST_LANE_INBOX_LAST,
	"UPDATE memd_lanes SET inbox_last = ? WHERE" LANE_PK };

/* lane_list: the filters of memd_lane_query (11 parameters: flags_all
 * twice, flags_none, turn twice, then each bound as (is it set, value)),
 * the keyset (8 parameters: strictly before (updated_us, app, user, key))
 * and the order, newest activity first. Each scope walks the index that
 * has its fixed columns first and updated_us next, backwards, so reading
 * stops at the limit. */
#define LANE_FILTER                                                           \
	" (l.flags & ?) = ? AND (l.flags & ?) = 0"                            \
	" AND (? = 0 OR (? = 1) = (l.turn_id IS NOT NULL))"                   \
	" AND (? = 0 OR l.updated_us > ?) AND (? = 0 OR l.updated_us < ?)"    \
	" AND (? = 0 OR (l.turn_id IS NOT NULL AND l.turn_lease_until_us < ?))"
/* The first bound repeats the tuple's first part as a plain range, the
 * only form MariaDB's range optimizer starts an index read from. */
#define LANE_BEFORE                                                                   \
	" AND l.updated_us <= ?"                                                      \
	" AND (l.updated_us < ? OR (l.updated_us = ? AND (l.app < ? OR (l.app = ? AND" \
	" (l.user < ? OR (l.user = ? AND l.lane_key < ?))))))"
#define LANE_ORDER " ORDER BY l.updated_us DESC, l.app DESC, l.user DESC, l.lane_key DESC LIMIT ?"
/* The same order where the app (and the user) are fixed by the WHERE:
 * naming only the index's remaining columns lets MariaDB read the index
 * backwards and stop at the limit (with the fixed columns in the ORDER BY
 * it read the whole scope and sorted it). */
#define LANE_ORDER_APP " ORDER BY l.updated_us DESC, l.user DESC, l.lane_key DESC LIMIT ?"
#define LANE_ORDER_USER " ORDER BY l.updated_us DESC, l.lane_key DESC LIMIT ?"
#define LANE_FROM(index) "SELECT " LANE_COLS " FROM memd_lanes l FORCE INDEX (" index ")"
static const my_sql SQL_LANE_LIST = { MY_ST_LANE_LIST,
	LANE_FROM("memd_lanes_by_updated") " WHERE" LANE_FILTER LANE_ORDER };
static const my_sql SQL_LANE_LIST_BEFORE = { MY_ST_LANE_LIST_BEFORE,
	LANE_FROM("memd_lanes_by_updated") " WHERE" LANE_FILTER LANE_BEFORE LANE_ORDER };
static const my_sql SQL_LANE_LIST_APP = { MY_ST_LANE_LIST_APP,
	LANE_FROM("memd_lanes_app_by_updated") " WHERE l.app = ? AND" LANE_FILTER LANE_ORDER_APP };
static const my_sql SQL_LANE_LIST_APP_BEFORE = { MY_ST_LANE_LIST_APP_BEFORE,
	LANE_FROM("memd_lanes_app_by_updated") " WHERE l.app = ? AND" LANE_FILTER LANE_BEFORE
	LANE_ORDER_APP };
static const my_sql SQL_LANE_LIST_USER = { MY_ST_LANE_LIST_USER,
	LANE_FROM("memd_lanes_user_by_updated") " WHERE l.app = ? AND l.user = ? AND"
	LANE_FILTER LANE_ORDER_USER };
static const my_sql SQL_LANE_LIST_USER_BEFORE = { MY_ST_LANE_LIST_USER_BEFORE,
	LANE_FROM("memd_lanes_user_by_updated") " WHERE l.app = ? AND l.user = ? AND"
	LANE_FILTER LANE_BEFORE LANE_ORDER_USER };

/* lane_prune: the oldest prunable lanes (?2 = MEMD_LANE_SUSPENDED),
 * locked; each is deleted with the same test, so what changed since is
 * kept. */
#define PRUNABLE " updated_us < ? AND (flags & ?) = 0 AND turn_id IS NULL"
static const my_sql SQL_LANE_PRUNABLE = { MY_ST_LANE_PRUNABLE,
	"SELECT app, user, lane_key FROM memd_lanes FORCE INDEX (memd_lanes_by_updated)"
	" WHERE" PRUNABLE " ORDER BY updated_us, app, user, lane_key LIMIT ? FOR UPDATE" };
static const my_sql SQL_LANE_PRUNE_ONE = { MY_ST_LANE_PRUNE_ONE,
	"DELETE FROM memd_lanes WHERE" LANE_PK " AND" PRUNABLE };

/* The inbox: the slot's item (in_slot = 1, at most one) first, then the
 * FIFO by position. */
#define INBOX_COLS "position, id, mode, in_slot, body, created_us"
static const my_sql SQL_INBOX_CLEAR = { MY_ST_INBOX_CLEAR,
	"DELETE FROM memd_inbox WHERE" LANE_PK };
static const my_sql SQL_INBOX_SLOT_DELETE = { MY_ST_INBOX_SLOT_DELETE,
	"DELETE FROM memd_inbox WHERE" LANE_PK " AND in_slot = 1" };
static const my_sql SQL_INBOX_SLOT_USED = { MY_ST_INBOX_SLOT_USED,
	"SELECT COUNT(*) FROM memd_inbox WHERE" LANE_PK " AND in_slot = 1" };
static const my_sql SQL_INBOX_INSERT = { MY_ST_INBOX_INSERT,
	"INSERT INTO memd_inbox (app, user, lane_key, position, id, mode, in_slot, body,"
	" created_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)" };
static const my_sql SQL_INBOX_DEPTH = { MY_ST_INBOX_DEPTH,
	"SELECT COUNT(*) FROM memd_inbox WHERE" LANE_PK };
static const my_sql SQL_INBOX_NEXT = { MY_ST_INBOX_NEXT,
	"SELECT " INBOX_COLS " FROM memd_inbox WHERE" LANE_PK
	" ORDER BY in_slot DESC, position LIMIT 1" };
static const my_sql SQL_INBOX_LIST = { MY_ST_INBOX_LIST,
	"SELECT " INBOX_COLS " FROM memd_inbox WHERE" LANE_PK " ORDER BY in_slot DESC, position" };
static const my_sql SQL_INBOX_DELETE_ONE = { MY_ST_INBOX_DELETE_ONE,
	"DELETE FROM memd_inbox WHERE" LANE_PK " AND position = ?" };
static const my_sql SQL_INBOX_PROMOTE = { MY_ST_INBOX_PROMOTE,
	"UPDATE memd_inbox SET in_slot = 1 WHERE" LANE_PK " AND in_slot = 0"
	" ORDER BY position LIMIT 1" };

/* ---- usage ------------------------------------------------------------- */

void my_param_usage(my_params *p, const memd_usage *u)
{
	my_param_i64(p, u->input_tokens);
	my_param_i64(p, u->output_tokens);
	my_param_i64(p, u->cache_read_tokens);
	my_param_i64(p, u->cache_write_tokens);
	my_param_i64(p, u->cost_micro_usd);
	my_param_i64(p, u->last_prompt_tokens);
	my_param_i64(p, u->last_prompt_tokens);
}

int32_t my_usage_check(const char *what, const memd_usage *u, memd_error *err)
{
	if (!HAS(u, memd_usage, last_prompt_tokens))
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: struct_size %u is too small", what,
				      (unsigned)u->struct_size);
	if (u->input_tokens < 0 || u->output_tokens < 0 || u->cache_read_tokens < 0 ||
	    u->cache_write_tokens < 0 || u->cost_micro_usd < 0 || u->last_prompt_tokens < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s has a negative value", what);
	return 0;
}

const memd_usage *my_append_usage(const memd_append *a)
{
	return HAS(a, memd_append, usage) ? a->usage : NULL;
}

int32_t my_usage_appended(my_conn *c, const memd_scope *scope, const memd_usage *u,
			  memd_error *err)
{
	my_params p;
	int32_t r = my_session_add_usage(c, scope, u, err);

	if (r < 0)
		return r;
	my_params_init(&p);
	my_param_usage(&p, u);
	my_param_scope(&p, scope, 1);
	return my_exec(c, &SQL_LANE_USAGE, &p, NULL, err);
}

/* ---- rows and copies --------------------------------------------------- */

static void lane_from_row(const my_stmt *s, memd_lane *out)
{
	memset(out, 0, sizeof(*out));
	out->struct_size = sizeof(*out);
	out->app = my_col_text(s, 0);
	out->user = my_col_text(s, 1);
	out->key = my_col_text(s, 2);
	out->flags = (uint32_t)my_col_i64(s, 3);
	out->session = my_col_text(s, 4);
	out->origin_json = my_col_text(s, 5);
	out->created_us = my_col_i64(s, 6);
	out->updated_us = my_col_i64(s, 7);
	out->version = my_col_i64(s, 8);
	out->resume_reason = my_col_text(s, 9);
	out->resume_marked_us = my_col_i64(s, 10);
	out->reset_reason = my_col_text(s, 11);
	out->previous_session = my_col_text(s, 12);
	out->reset_us = my_col_i64(s, 13);
	out->turn_id = my_col_text(s, 14);
	out->turn_started_us = my_col_i64(s, 15);
	out->turn_lease_until_us = my_col_i64(s, 16);
	out->interruptions = (uint32_t)my_col_i64(s, 17);
	out->finalize_failures = (uint32_t)my_col_i64(s, 18);
	out->finalize_claim_until_us = my_col_i64(s, 19);
	out->input_tokens = my_col_i64(s, 20);
	out->output_tokens = my_col_i64(s, 21);
	out->cache_read_tokens = my_col_i64(s, 22);
	out->cache_write_tokens = my_col_i64(s, 23);
	out->cost_micro_usd = my_col_i64(s, 24);
	out->last_prompt_tokens = my_col_i64(s, 25);
	out->inbox_depth = (uint32_t)my_col_i64(s, 26);
}

static void item_from_row(const my_stmt *s, memd_inbox_item *out)
{
	memset(out, 0, sizeof(*out));
	out->struct_size = sizeof(*out);
	out->position = my_col_i64(s, 0);
	out->id = my_col_text(s, 1);
	out->mode = (uint32_t)my_col_i64(s, 2);
	out->in_slot = my_col_i64(s, 3) != 0;
	out->body_json = my_col_text(s, 4);
	out->created_us = my_col_i64(s, 5);
}

/* A lane read inside a transaction, delivered after the commit. */
typedef struct lane_copy {
	memd_lane l;
	char *buf;
} lane_copy;

static void lane_copy_clear(lane_copy *c)
{
	free(c->buf);
	memset(c, 0, sizeof(*c));
}

static int32_t lane_copy_make(const memd_lane *src, lane_copy *dst, memd_error *err)
{
	const char **const slots[] = { &dst->l.app, &dst->l.user, &dst->l.key, &dst->l.session,
				       &dst->l.origin_json, &dst->l.resume_reason,
				       &dst->l.reset_reason, &dst->l.previous_session,
				       &dst->l.turn_id };

	lane_copy_clear(dst);
	dst->l = *src;
	return pu_copy_strings(slots, sizeof(slots) / sizeof(slots[0]), &dst->buf, err);
}

/* An inbox item taken inside a transaction, delivered after the commit. */
typedef struct item_copy {
	memd_inbox_item i;
	char *buf;
	int set;                   /* an item was taken */
} item_copy;

static void item_copy_clear(item_copy *c)
{
	free(c->buf);
	memset(c, 0, sizeof(*c));
}

static int32_t item_copy_make(const memd_inbox_item *src, item_copy *dst, memd_error *err)
{
	const char **const slots[] = { &dst->i.id, &dst->i.body_json };
	int32_t r;

	item_copy_clear(dst);
	dst->i = *src;
	r = pu_copy_strings(slots, sizeof(slots) / sizeof(slots[0]), &dst->buf, err);
	dst->set = r == 0;
	return r;
}

static int32_t deliver_lane(const memd_lane_sink *out, const memd_lane *l, memd_error *err)
{
	return my_sink_result(out->lane(out->userdata, l), "lane", err);
}

/* my_row_fn of lane_list: the lane of s's current row to ud, a const
 * memd_lane_sink *. */
static int32_t lane_row(const my_stmt *s, void *ud, memd_error *err)
{
	memd_lane l;

	lane_from_row(s, &l);
	return deliver_lane(ud, &l, err);
}

static int32_t deliver_item(const memd_inbox_sink *out, const memd_inbox_item *i,
			    memd_error *err)
{
	return my_sink_result(out->item(out->userdata, i), "inbox", err);
}

/* ---- statements on one lane --------------------------------------------- */

static void param_lane(my_params *p, const char *app, const char *user, const char *key)
{
	my_param_text(p, app);
	my_param_text(p, user);
	my_param_text(p, key);
}

/* What lane_lock reads of the locked row. */
typedef struct lane_head {
	int64_t version;
	char turn_id[MY_ID_BUF];   /* "" = no turn */
	int64_t turn_lease_until_us;
	int64_t inbox_last;
} lane_head;

/* Inside a transaction on c: lock the lane's row and read its head;
 * *ret_found = 0 when there is no such lane (nothing is locked then). */
static int32_t lane_lock(my_conn *c, const char *app, const char *user, const char *key,
			 lane_head *ret, int *ret_found, memd_error *err)
{
	const char *turn;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	param_lane(&p, app, user, key);
	*ret_found = 0;
	r = my_exec(c, &SQL_LANE_LOCK, &p, &s, err);
	if (r == 0)
		r = my_fetch(c, s, err);
	if (r <= 0)
		return r;
	turn = my_col_text(s, 1);
	memset(ret, 0, sizeof(*ret));
	ret->version = my_col_i64(s, 0);
	if (turn && strlen(turn) < sizeof(ret->turn_id))
		memcpy(ret->turn_id, turn, strlen(turn) + 1);
	ret->turn_lease_until_us = my_col_i64(s, 2);
	ret->inbox_last = my_col_i64(s, 3);
	*ret_found = 1;
	my_done(s);
	return 0;
}

/* Run a statement whose parameters are the lane's key; *ret_rows (if not
 * NULL) gets the rows it matched. */
static int32_t exec_lane(my_conn *c, const my_sql *sql, const char *app, const char *user,
			 const char *key, uint64_t *ret_rows, memd_error *err)
{
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	param_lane(&p, app, user, key);
	r = my_exec(c, sql, &p, &s, err);
	if (r == 0 && ret_rows)
		*ret_rows = my_affected(s);
	return r;
}

/* The single count a statement keyed by the lane reads. */
static int32_t count_lane(my_conn *c, const my_sql *sql, const char *app, const char *user,
			  const char *key, int64_t *ret, memd_error *err)
{
	int found = 0;
	my_params p;

	my_params_init(&p);
	param_lane(&p, app, user, key);
	*ret = 0;
	return my_query_i64(c, sql, &p, &found, ret, err);
}

static int32_t lane_not_found(const char *key, memd_error *err)
{
	return memd_error_set(err, MEMD_ENOTFOUND, 0, "lane '%.64s' not found", key);
}

/* Read the lane into copy (in a transaction) or deliver it to out. */
static int32_t read_lane(my_conn *c, const char *app, const char *user, const char *key,
			 lane_copy *copy, const memd_lane_sink *out, memd_error *err)
{
	my_stmt *s = NULL;
	memd_lane row;
	my_params p;
	int32_t r;

	my_params_init(&p);
	param_lane(&p, app, user, key);
	r = my_exec(c, &SQL_LANE_GET, &p, &s, err);
	if (r == 0)
		r = my_fetch(c, s, err);
	if (r == 0)
		return lane_not_found(key, err);
	if (r < 0)
		return r;
	lane_from_row(s, &row);
	r = copy ? lane_copy_make(&row, copy, err) : deliver_lane(out, &row, err);
	my_done(s);
	return r > 0 ? 0 : r;
}

/* ---- checks -------------------------------------------------------------- */

/* The scope's app and user and a lane key. */
static int32_t check_lane_key(const memd_scope *scope, const char *key, memd_error *err)
{
	int32_t r = pu_check_scope(scope, 0, err);
	return r < 0 ? r : pu_check_id("lane key", key, err);
}

static int32_t check_lane(const memd_lane *l, memd_error *err)
{
	memd_scope scope;
	int32_t r;

	if (!l || !HAS(l, memd_lane, finalize_claim_until_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "lane write has no lane (or a short one)");
	scope = (memd_scope){ .struct_size = sizeof(scope), .app = l->app, .user = l->user };
	r = check_lane_key(&scope, l->key, err);
	if (r == 0)
		r = pu_check_id("lane session", l->session, err);
	if (r == 0 && l->previous_session)
		r = pu_check_id("lane previous_session", l->previous_session, err);
	if (r == 0 && l->turn_id)
		r = pu_check_id("lane turn_id", l->turn_id, err);
	if (r == 0 && l->origin_json)
		r = my_check_json_object("lane origin", l->origin_json, err);
	if (r == 0 && (l->flags & ~LANE_FLAGS_KNOWN))
		r = memd_error_set(err, MEMD_EINVAL, 0, "lane flags have unknown bits 0x%x",
				   (unsigned)(l->flags & ~LANE_FLAGS_KNOWN));
	return r;
}

static int32_t check_write(const memd_lane_write *w, memd_error *err)
{
	const memd_session *cs;
	int32_t r;

	if (!w || !HAS(w, memd_lane_write, now_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "lane write is missing (or short)");
	if (w->flags & ~LW_FLAGS_KNOWN)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane write has unknown flags 0x%x",
				      (unsigned)(w->flags & ~LW_FLAGS_KNOWN));
	r = check_lane(w->lane, err);
	cs = w->create_session;
	if (r == 0 && cs) {
		r = my_session_check_new(cs, err);
		if (r == 0 && (strcmp(cs->app, w->lane->app) || strcmp(cs->user, w->lane->user)))
			r = memd_error_set(err, MEMD_EINVAL, 0,
					   "the session a lane write creates must be of the lane's "
					   "app and user");
	}
	if (r == 0 && w->end_session)
		r = pu_check_id("end_session", w->end_session, err);
	if (r == 0 && w->reopen_session)
		r = pu_check_id("reopen_session", w->reopen_session, err);
	if (r == 0 && w->usage)
		r = my_usage_check("lane write usage", w->usage, err);
	return r;
}

/* ---- lane_get ------------------------------------------------------------ */

typedef struct get_ctx {
	const memd_scope *scope;
	const char *key;
	const memd_lane_sink *out;
	const memd_session_sink *session_out; /* may be NULL */
} get_ctx;

/* The lane and its session in one statement (one snapshot); both are
 * delivered from the row. */
static int32_t get_with_session(my_conn *c, const get_ctx *x, memd_error *err)
{
	my_stmt *s = NULL;
	memd_lane lane;
	memd_session ses;
	my_params p;
	int32_t r;

	my_params_init(&p);
	param_lane(&p, x->scope->app, x->scope->user, x->key);
	r = my_exec(c, &SQL_LANE_GET_SESSION, &p, &s, err);
	if (r == 0)
		r = my_fetch(c, s, err);
	if (r == 0)
		return lane_not_found(x->key, err);
	if (r < 0)
		return r;
	lane_from_row(s, &lane);
	r = deliver_lane(x->out, &lane, err);
	if (r == 0 && !my_col_null(s, LANE_COLS_N)) {
		my_session_from_row(s, LANE_COLS_N, &ses);
		r = my_sink_result(x->session_out->session(x->session_out->userdata, &ses),
				   "session", err);
	}
	my_done(s);
	return r > 0 ? 0 : r;
}

static int32_t get_body(my_conn *c, void *arg, memd_error *err)
{
	get_ctx *x = arg;

	if (x->session_out)
		return get_with_session(c, x, err);
	return read_lane(c, x->scope->app, x->scope->user, x->key, NULL, x->out, err);
}

int32_t my_lane_get(void *inst, const memd_call *call, const memd_scope *scope,
		    const char *key, const memd_lane_sink *out,
		    const memd_session_sink *session_out, memd_error *err)
{
	get_ctx x = { .scope = scope, .key = key, .out = out, .session_out = session_out };
	int32_t r = check_lane_key(scope, key, err);

	if (r < 0)
		return r;
	if (!out || !out->lane)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane sink is missing");
	return my_run(inst, call, MY_AUTOCOMMIT, get_body, &x, err);
}

/* ---- lane_write ---------------------------------------------------------- */

typedef struct write_ctx {
	const memd_lane_write *w;
	memd_usage usage;          /* w's, or zero */
	memd_scope current;        /* app, user, session = the lane's new session */
	lane_copy out;
} write_ctx;

/* The lane fields every write sets, in the order of both statements
 * (resume_reason .. finalize_claim_until_us). */
static void param_lane_fields(my_params *p, const memd_lane *l)
{
	my_param_text(p, l->resume_reason);
	my_param_i64(p, l->resume_marked_us);
	my_param_text(p, l->reset_reason);
	my_param_text(p, l->previous_session);
	my_param_i64(p, l->reset_us);
	my_param_text(p, l->turn_id);
	my_param_i64(p, l->turn_started_us);
	my_param_i64(p, l->turn_lease_until_us);
	my_param_i64(p, l->interruptions);
	my_param_i64(p, l->finalize_failures);
	my_param_i64(p, l->finalize_claim_until_us);
}

static int32_t lane_insert(my_conn *c, const write_ctx *x, memd_error *err)
{
	const memd_lane *l = x->w->lane;
	const memd_usage *u = &x->usage;
	my_params p;
	int32_t r;

	my_params_init(&p);
	param_lane(&p, l->app, l->user, l->key);
	my_param_i64(&p, l->flags);
	my_param_text(&p, l->session);
	my_param_text(&p, l->origin_json);
	my_param_i64(&p, x->w->now_us);
	my_param_i64(&p, l->updated_us);
	param_lane_fields(&p, l);
	my_param_i64(&p, u->input_tokens);
	my_param_i64(&p, u->output_tokens);
	my_param_i64(&p, u->cache_read_tokens);
	my_param_i64(&p, u->cache_write_tokens);
	my_param_i64(&p, u->cost_micro_usd);
	my_param_i64(&p, u->last_prompt_tokens);
	r = my_exec(c, &SQL_LANE_INSERT, &p, NULL, err);
	if (r == MEMD_ECONFLICT && c->last_errno == ER_DUP_ENTRY)
		/* Another create got there first (it committed while this
		 * INSERT waited for its lock). */
		return memd_error_set(err, MEMD_ECONFLICT, 0, "lane '%.64s' already exists", l->key);
	return r;
}

static int32_t lane_update(my_conn *c, const write_ctx *x, memd_error *err)
{
	const memd_lane *l = x->w->lane;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_i64(&p, l->flags);
	my_param_text(&p, l->session);
	my_param_text(&p, l->origin_json);
	my_param_i64(&p, l->updated_us);
	param_lane_fields(&p, l);
	my_param_usage(&p, &x->usage);
	param_lane(&p, l->app, l->user, l->key);
	my_param_i64(&p, x->w->expected_version);
	r = my_exec(c, &SQL_LANE_UPDATE, &p, &s, err);
	if (r == 0 && my_affected(s) != 1)
		r = memd_error_set(err, MEMD_ECONFLICT, 0, "lane '%.64s' changed while locked",
				   l->key);
	return r;
}

/* The version check, under the lane's row lock (or the primary key's, for
 * a create). */
static int32_t write_check_version(my_conn *c, write_ctx *x, memd_error *err)
{
	const memd_lane_write *w = x->w;
	const memd_lane *l = w->lane;
	lane_head head;
	int found = 0;
	int32_t r = lane_lock(c, l->app, l->user, l->key, &head, &found, err);

	if (r < 0)
		return r;
	if (w->flags & MEMD_LW_CREATE)
		return found ? memd_error_set(err, MEMD_ECONFLICT, 0, "lane '%.64s' already exists",
					      l->key)
			     : lane_insert(c, x, err);
	if (!found)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "lane '%.64s' does not exist (expected version %lld)", l->key,
				      (long long)w->expected_version);
	if (head.version != w->expected_version)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "lane '%.64s' is at version %lld, not the expected %lld",
				      l->key, (long long)head.version,
				      (long long)w->expected_version);
	return 0;
}

static int32_t write_body(my_conn *c, void *arg, memd_error *err)
{
	write_ctx *x = arg;
	const memd_lane_write *w = x->w;
	const memd_lane *l = w->lane;
	memd_scope other = { .struct_size = sizeof(other), .app = l->app, .user = l->user };
	int32_t r = write_check_version(c, x, err);

	if (r == 0 && w->create_session)
		r = my_session_insert(c, w->create_session, err);
	if (r == 0 && w->end_session) {
		other.session = w->end_session;
		r = my_session_end(c, &other, w->end_reason, w->now_us, err);
	}
	if (r == 0 && w->reopen_session) {
		other.session = w->reopen_session;
		r = my_session_reopen(c, &other, err);
	}
	if (r == 0 && w->usage)
		r = my_session_add_usage(c, &x->current, &x->usage, err);
	if (r == 0 && (w->flags & MEMD_LW_CLEAR_INBOX))
		r = exec_lane(c, &SQL_INBOX_CLEAR, l->app, l->user, l->key, NULL, err);
	if (r == 0 && !(w->flags & MEMD_LW_CREATE))
		r = lane_update(c, x, err);
	if (r == 0)
		r = read_lane(c, l->app, l->user, l->key, &x->out, NULL, err);
	/* The feed record last: the counter's lock is held to the commit
	 * (my_feed.h), as for a DELETE record. */
	if (r == 0 && (w->flags & MEMD_LW_FEED_FINALIZE))
		r = my_feed_tombstone(c, MEMD_FEED_FINALIZE, &x->current, err);
	return r;
}

int32_t my_lane_write(void *inst, const memd_call *call, const memd_lane_write *w,
		      const memd_lane_sink *out, memd_error *err)
{
	write_ctx x = { .w = w };
	int32_t r = check_write(w, err);

	if (r < 0)
		return r;
	if (!out || !out->lane)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane sink is missing");
	if (w->usage)
		x.usage = *w->usage;
	x.current = (memd_scope){ .struct_size = sizeof(x.current), .app = w->lane->app,
				  .user = w->lane->user, .session = w->lane->session };
	r = my_run(inst, call, MY_TXN, write_body, &x, err);
	if (r == 0)
		r = deliver_lane(out, &x.out.l, err);
	lane_copy_clear(&x.out);
	return r > 0 ? 0 : r;
}

/* ---- lane_list ----------------------------------------------------------- */

typedef struct list_ctx {
	my_store *store;
	const memd_call *call;
	const memd_lane_query *q;
	const memd_lane_sink *out;
} list_ctx;

static const my_sql *list_query(const memd_lane_query *q)
{
	int before = q->before_updated_us != 0;

	if (q->user)
		return before ? &SQL_LANE_LIST_USER_BEFORE : &SQL_LANE_LIST_USER;
	if (q->app)
		return before ? &SQL_LANE_LIST_APP_BEFORE : &SQL_LANE_LIST_APP;
	return before ? &SQL_LANE_LIST_BEFORE : &SQL_LANE_LIST;
}

/* A bound of the filter: (is it set, its value). */
static void param_bound(my_params *p, int64_t v)
{
	my_param_i64(p, v != 0);
	my_param_i64(p, v);
}

static int32_t list_body(my_conn *c, void *arg, memd_error *err)
{
	list_ctx *x = arg;
	const memd_lane_query *q = x->q;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	if (q->app)
		my_param_text(&p, q->app);
	if (q->user)
		my_param_text(&p, q->user);
	my_param_i64(&p, q->flags_all);
	my_param_i64(&p, q->flags_all);
	my_param_i64(&p, q->flags_none);
	my_param_i64(&p, q->turn);
	my_param_i64(&p, q->turn);
	param_bound(&p, q->updated_after_us);
	param_bound(&p, q->updated_before_us);
	param_bound(&p, q->lease_before_us);
	if (q->before_updated_us) {
		/* A missing part of the tuple is "": nothing at that instant
		 * sorts before it on that part. */
		my_param_i64(&p, q->before_updated_us);
		my_param_i64(&p, q->before_updated_us);
		my_param_i64(&p, q->before_updated_us);
		my_param_text(&p, q->before_app ? q->before_app : "");
		my_param_text(&p, q->before_app ? q->before_app : "");
		my_param_text(&p, q->before_user ? q->before_user : "");
		my_param_text(&p, q->before_user ? q->before_user : "");
		my_param_text(&p, q->before_key ? q->before_key : "");
	}
	my_param_u64(&p, q->limit);
	r = my_exec(c, list_query(q), &p, &s, err);
	return my_fetch_deliver(x->store, x->call, c, s, r, lane_row, (void *)x->out, NULL, err);
}

static int32_t check_query(const memd_lane_query *q, memd_error *err)
{
	int32_t r = 0;

	if (!q || !HAS(q, memd_lane_query, before_key))
		return memd_error_set(err, MEMD_EINVAL, 0, "lane query is missing (or short)");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane list limit must be > 0");
	if (!q->app && q->user)
		return memd_error_set(err, MEMD_EINVAL, 0, "a lane query with a user needs its app");
	if (q->turn > MEMD_LQ_TURN_NONE)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane query turn %u is unknown",
				      (unsigned)q->turn);
	if (q->app)
		r = pu_check_id("app", q->app, err);
	if (r == 0 && q->user)
		r = pu_check_id("user", q->user, err);
	if (r == 0 && q->before_updated_us && q->before_app)
		r = pu_check_id("before_app", q->before_app, err);
	if (r == 0 && q->before_updated_us && q->before_user)
		r = pu_check_id("before_user", q->before_user, err);
	if (r == 0 && q->before_updated_us && q->before_key)
		r = pu_check_id("before_key", q->before_key, err);
	return r;
}

int32_t my_lane_list(void *inst, const memd_call *call, const memd_lane_query *q,
		     const memd_lane_sink *out, memd_error *err)
{
	list_ctx x = { .store = inst, .call = call, .q = q, .out = out };
	int32_t r = check_query(q, err);

	if (r < 0)
		return r;
	if (!out || !out->lane)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane sink is missing");
	return my_run(inst, call, MY_AUTOCOMMIT, list_body, &x, err);
}

/* ---- lane_delete and lane_prune ------------------------------------------ */

typedef struct delete_ctx {
	const memd_scope *scope;
	const char *key;
} delete_ctx;

static int32_t delete_body(my_conn *c, void *arg, memd_error *err)
{
	delete_ctx *x = arg;
	uint64_t n = 0;
	int32_t r = exec_lane(c, &SQL_LANE_DELETE, x->scope->app, x->scope->user, x->key, &n, err);

	if (r == 0 && n == 0)
		return lane_not_found(x->key, err);
	if (r == 0)
		r = exec_lane(c, &SQL_INBOX_CLEAR, x->scope->app, x->scope->user, x->key, NULL, err);
	return r;
}

int32_t my_lane_delete(void *inst, const memd_call *call, const memd_scope *scope,
		       const char *key, memd_error *err)
{
	delete_ctx x = { .scope = scope, .key = key };
	int32_t r = check_lane_key(scope, key, err);

	if (r < 0)
		return r;
	return my_run(inst, call, MY_TXN, delete_body, &x, err);
}

/* A lane's key, kept while the rows that named it are read. */
typedef struct lane_name {
	char app[MY_ID_BUF], user[MY_ID_BUF], key[MY_ID_BUF];
} lane_name;

typedef struct prune_ctx {
	int64_t before_us;
	uint32_t limit;
	lane_name *names;
	size_t n_names, cap_names;
	uint32_t count;            /* of the last run */
} prune_ctx;

static void copy_id(char *dst, const char *src)
{
	size_t n = src ? strlen(src) : 0;

	if (n >= MY_ID_BUF)
		n = MY_ID_BUF - 1; /* the schema keeps ids under MY_ID_BUF */
	memcpy(dst, src ? src : "", n);
	dst[n] = '\0';
}

static int32_t keep_name(prune_ctx *x, const my_stmt *s, memd_error *err)
{
	lane_name *n;

	if (x->n_names == x->cap_names) {
		size_t ncap = x->cap_names ? x->cap_names * 2 : MY_PRUNE_INITIAL;
		lane_name *grown = realloc(x->names, ncap * sizeof(*grown));
		if (!grown)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		x->names = grown;
		x->cap_names = ncap;
	}
	n = &x->names[x->n_names++];
	copy_id(n->app, my_col_text(s, 0));
	copy_id(n->user, my_col_text(s, 1));
	copy_id(n->key, my_col_text(s, 2));
	return 0;
}

static int32_t prune_body(my_conn *c, void *arg, memd_error *err)
{
	prune_ctx *x = arg;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	x->n_names = 0;
	x->count = 0;
	my_params_init(&p);
	my_param_i64(&p, x->before_us);
	my_param_i64(&p, MEMD_LANE_SUSPENDED);
	my_param_u64(&p, x->limit);
	r = my_exec(c, &SQL_LANE_PRUNABLE, &p, &s, err);
	while (r == 0 && (r = my_fetch(c, s, err)) == 1)
		r = keep_name(x, s, err);
	my_done(s);
	for (size_t i = 0; r == 0 && i < x->n_names; i++) {
		const lane_name *n = &x->names[i];
		my_stmt *d = NULL;
		my_params_init(&p);
		param_lane(&p, n->app, n->user, n->key);
		my_param_i64(&p, x->before_us);
		my_param_i64(&p, MEMD_LANE_SUSPENDED);
		r = my_exec(c, &SQL_LANE_PRUNE_ONE, &p, &d, err);
		if (r < 0 || my_affected(d) == 0)
			continue;
		x->count++;
		r = exec_lane(c, &SQL_INBOX_CLEAR, n->app, n->user, n->key, NULL, err);
	}
	return r;
}

int32_t my_lane_prune(void *inst, const memd_call *call, int64_t updated_before_us,
		      uint32_t limit, uint32_t *ret_count, memd_error *err)
{
	prune_ctx x = { .before_us = updated_before_us, .limit = limit };
	int32_t r;

	if (!ret_count)
		return memd_error_set(err, MEMD_EINVAL, 0, "no output count");
	if (limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "lane prune limit must be > 0");
	r = my_run(inst, call, MY_TXN, prune_body, &x, err);
	free(x.names);
	if (r == 0)
		*ret_count = x.count;
	return r;
}

/* ---- the inbox ----------------------------------------------------------- */

typedef struct put_ctx {
	const memd_scope *scope;
	const char *key;
	const memd_inbox_item *item;
	int64_t depth;
} put_ctx;

static int32_t put_body(my_conn *c, void *arg, memd_error *err)
{
	put_ctx *x = arg;
	const char *app = x->scope->app, *user = x->scope->user;
	int64_t slot_used = 0;
	lane_head head;
	int found = 0, in_slot;
	my_params p;
	/* The lane's lock orders the puts and takes of its inbox. */
	int32_t r = lane_lock(c, app, user, x->key, &head, &found, err);

	if (r == 0 && !found)
		return lane_not_found(x->key, err);
	if (r == 0 && x->item->mode == MEMD_INBOX_INTERRUPT)
		r = exec_lane(c, &SQL_INBOX_SLOT_DELETE, app, user, x->key, NULL, err);
	else if (r == 0)
		r = count_lane(c, &SQL_INBOX_SLOT_USED, app, user, x->key, &slot_used, err);
	if (r < 0)
		return r;
	in_slot = slot_used == 0;
	my_params_init(&p);
	param_lane(&p, app, user, x->key);
	my_param_i64(&p, head.inbox_last + 1);
	my_param_text(&p, x->item->id);
	my_param_i64(&p, x->item->mode);
	my_param_i64(&p, in_slot);
	my_param_text(&p, x->item->body_json);
	my_param_i64(&p, x->item->created_us);
	r = my_exec(c, &SQL_INBOX_INSERT, &p, NULL, err);
	if (r == 0) {
		my_params_init(&p);
		my_param_i64(&p, head.inbox_last + 1);
		param_lane(&p, app, user, x->key);
		r = my_exec(c, &SQL_LANE_INBOX_LAST, &p, NULL, err);
	}
	if (r == 0)
		r = count_lane(c, &SQL_INBOX_DEPTH, app, user, x->key, &x->depth, err);
	return r;
}

int32_t my_inbox_put(void *inst, const memd_call *call, const memd_scope *scope,
		     const char *key, const memd_inbox_item *item, uint32_t *ret_depth,
		     memd_error *err)
{
	put_ctx x = { .scope = scope, .key = key, .item = item };
	int32_t r = check_lane_key(scope, key, err);

	if (r < 0)
		return r;
	if (!item || !HAS(item, memd_inbox_item, created_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "inbox item is missing (or short)");
	if (item->mode != MEMD_INBOX_INTERRUPT && item->mode != MEMD_INBOX_QUEUE)
		return memd_error_set(err, MEMD_EINVAL, 0, "inbox mode %u is unknown",
				      (unsigned)item->mode);
	r = pu_check_id("inbox item id", item->id, err);
	if (r == 0)
		r = my_check_json_object("inbox item body", item->body_json, err);
	if (r == 0)
		r = my_run(inst, call, MY_TXN, put_body, &x, err);
	if (r == 0 && ret_depth)
		*ret_depth = (uint32_t)x.depth;
	return r;
}

typedef struct take_ctx {
	const memd_scope *scope;
	const char *key;
	const char *turn_id;
	int64_t now_us;
	item_copy taken;
	int64_t depth;
} take_ctx;

static int32_t take_body(my_conn *c, void *arg, memd_error *err)
{
	take_ctx *x = arg;
	const char *app = x->scope->app, *user = x->scope->user;
	memd_inbox_item row;
	my_stmt *s = NULL;
	lane_head head;
	int found = 0;
	my_params p;
	int32_t r = lane_lock(c, app, user, x->key, &head, &found, err);

	item_copy_clear(&x->taken);
	if (r == 0 && !found)
		return lane_not_found(x->key, err);
	if (r < 0)
		return r;
	if (strcmp(head.turn_id, x->turn_id) != 0)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "turn '%.64s' does not hold lane '%.64s'", x->turn_id, x->key);
	if (head.turn_lease_until_us <= x->now_us)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "the lease of turn '%.64s' on lane '%.64s' has ended",
				      x->turn_id, x->key);
	my_params_init(&p);
	param_lane(&p, app, user, x->key);
	r = my_exec(c, &SQL_INBOX_NEXT, &p, &s, err);
	if (r == 0)
		r = my_fetch(c, s, err);
	if (r == 1) {
		item_from_row(s, &row);
		r = item_copy_make(&row, &x->taken, err);
		my_done(s);
	}
	if (r == 0 && x->taken.set) {
		my_params_init(&p);
		param_lane(&p, app, user, x->key);
		my_param_i64(&p, x->taken.i.position);
		r = my_exec(c, &SQL_INBOX_DELETE_ONE, &p, NULL, err);
		/* An emptied slot takes the FIFO's head. */
		if (r == 0 && x->taken.i.in_slot)
			r = exec_lane(c, &SQL_INBOX_PROMOTE, app, user, x->key, NULL, err);
	}
	if (r == 0)
		r = count_lane(c, &SQL_INBOX_DEPTH, app, user, x->key, &x->depth, err);
	return r;
}

int32_t my_inbox_take(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *key, const char *turn_id, int64_t now_us,
		      const memd_inbox_sink *out, uint32_t *ret_depth, memd_error *err)
{
	take_ctx x = { .scope = scope, .key = key, .turn_id = turn_id, .now_us = now_us };
	int32_t r = check_lane_key(scope, key, err);

	if (r == 0)
		r = pu_check_id("turn id", turn_id, err);
	if (r < 0)
		return r;
	if (!out || !out->item)
		return memd_error_set(err, MEMD_EINVAL, 0, "inbox sink is missing");
	r = my_run(inst, call, MY_TXN, take_body, &x, err);
	if (r == 0 && x.taken.set)
		r = deliver_item(out, &x.taken.i, err);
	if (r >= 0 && ret_depth)
		*ret_depth = (uint32_t)x.depth;
	item_copy_clear(&x.taken);
	return r > 0 ? 0 : r;
}

typedef struct inbox_list_ctx {
	const memd_scope *scope;
	const char *key;
	const memd_inbox_sink *out;
} inbox_list_ctx;

static int32_t inbox_list_body(my_conn *c, void *arg, memd_error *err)
{
	inbox_list_ctx *x = arg;
	uint64_t n = 0;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	param_lane(&p, x->scope->app, x->scope->user, x->key);
	r = my_exec(c, &SQL_INBOX_LIST, &p, &s, err);
	while (r == 0 && (r = my_fetch(c, s, err)) == 1) {
		memd_inbox_item row;
		item_from_row(s, &row);
		r = deliver_item(x->out, &row, err);
		n++;
	}
	my_done(s);
	if (r > 0)
		return 0; /* the sink asked to stop */
	if (r == 0 && n == 0) {
		/* No items: tell an empty inbox from a missing lane. */
		int64_t one = 0;
		int found = 0;
		my_params_init(&p);
		param_lane(&p, x->scope->app, x->scope->user, x->key);
		r = my_query_i64(c, &SQL_LANE_EXISTS, &p, &found, &one, err);
		if (r == 0 && !found)
			r = lane_not_found(x->key, err);
	}
	return r;
}

int32_t my_inbox_list(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *key, const memd_inbox_sink *out, memd_error *err)
{
	inbox_list_ctx x = { .scope = scope, .key = key, .out = out };
	int32_t r = check_lane_key(scope, key, err);

	if (r < 0)
		return r;
	if (!out || !out->item)
		return memd_error_set(err, MEMD_EINVAL, 0, "inbox sink is missing");
	return my_run(inst, call, MY_AUTOCOMMIT, inbox_list_body, &x, err);
}
