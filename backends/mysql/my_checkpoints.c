/* SPDX-License-Identifier: MIT */
#include "my_checkpoints.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "plugin_util.h"
#include "my_sessions.h"

/* ORDER BY task_path compares the whole path and its 2-byte length. */
_Static_assert(MY_SORT_LENGTH >= MY_TASK_PATH_MAX + 2, "max_sort_length cuts task paths");

#define EMPTY_OBJECT "{}"
#define ROOT_NS ""
/* A keyset bound above every id: ids are at most MEMD_ID_MAX bytes, and
 * as bytes any of them orders before MEMD_ID_MAX + 1 bytes of 0xff. */
#define ID_ABOVE_ALL_LEN (MEMD_ID_MAX + 1)
#define ID_ABOVE_ALL_BYTE 0xff

/* Does *ptr (a struct of type with the caller's struct_size) carry member? */
#define HAS(ptr, type, member) \
	((ptr)->struct_size >= offsetof(type, member) + sizeof((ptr)->member))

/* One checkpoint by its primary key: 5 parameters. */
#define CKPT_PK " app = ? AND user = ? AND session = ? AND ns = ? AND id = ?"
/* Visible at ?: not expired (0 = never expires). */
#define NOT_EXPIRED " (expires_us = 0 OR expires_us > ?)"
#define EXPIRED " expires_us > 0 AND expires_us <= ?"

/* checkpoint_put: the session's row in share mode (session_delete takes
 * it exclusively first), the checkpoint's upsert (created_us kept, its
 * writes untouched) and the head's, which moves only to a greater id. */
static const my_sql SQL_CKPT_SESSION_SHARE = { MY_ST_CKPT_SESSION_SHARE,
	"SELECT 1 FROM memd_sessions WHERE app = ? AND user = ? AND id = ? LOCK IN SHARE MODE" };
static const my_sql SQL_CKPT_UPSERT = { MY_ST_CKPT_UPSERT,
	"INSERT INTO memd_checkpoints (app, user, session, ns, id, parent_id, type, payload,"
	" metadata, run_state, created_us, updated_us, expires_us)"
	" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	" ON DUPLICATE KEY UPDATE parent_id = VALUES(parent_id), type = VALUES(type),"
	" payload = VALUES(payload), metadata = VALUES(metadata),"
	" run_state = VALUES(run_state), updated_us = VALUES(updated_us),"
	" expires_us = VALUES(expires_us)" };
static const my_sql SQL_CKPT_HEAD_UPSERT = { MY_ST_CKPT_HEAD_UPSERT,
	"INSERT INTO memd_checkpoint_heads (app, user, session, id) VALUES (?, ?, ?, ?)"
	" ON DUPLICATE KEY UPDATE id = IF(VALUES(id) > id, VALUES(id), id)" };

/* checkpoint_put_writes: the checkpoint locked, its run state, and each
 * write kept (a stored (task_id, idx) stays, task path and all) or
 * replaced (the task path too). */
static const my_sql SQL_CKPT_LOCK = { MY_ST_CKPT_LOCK,
	"SELECT expires_us FROM memd_checkpoints WHERE" CKPT_PK " FOR UPDATE" };
static const my_sql SQL_CKPT_RUN_STATE = { MY_ST_CKPT_RUN_STATE,
	"UPDATE memd_checkpoints SET run_state = ?, updated_us = ? WHERE" CKPT_PK };
#define WRITE_INSERT \
	"INSERT INTO memd_checkpoint_writes (app, user, session, ns, checkpoint_id, task_id," \
	" idx, channel, type, value, task_path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
static const my_sql SQL_CKPT_WRITE_KEEP = { MY_ST_CKPT_WRITE_KEEP,
	WRITE_INSERT " ON DUPLICATE KEY UPDATE idx = idx" };
static const my_sql SQL_CKPT_WRITE_REPLACE = { MY_ST_CKPT_WRITE_REPLACE,
	WRITE_INSERT " ON DUPLICATE KEY UPDATE channel = VALUES(channel), type = VALUES(type),"
	" value = VALUES(value), task_path = VALUES(task_path)" };

/* The reads: the checkpoints a CTE picks (their keys only), then, in one
 * UNION ALL, each checkpoint (part 0) and its writes (part 1, when the
 * last parameter is 1) in delivery order: a checkpoint's writes by
 * (task_path, task_id, idx), VARBINARY, so as bytes (the writes of one
 * checkpoint are few: a sort of them, no index). The columns, in the
 * order ckpt_row reads them: part, session, ns, id, parent_id, type, the
 * bytes (payload or value), metadata, run_state, created_us, updated_us,
 * expires_us, task_id, idx, channel, task_path. */
#define PICKED_ROWS(order)                                                                   \
	" SELECT 0 AS part, c.session AS session, c.ns AS ns, c.id AS id, c.parent_id,"      \
	" c.type, c.payload AS bytes, c.metadata, c.run_state, c.created_us, c.updated_us,"   \
	" c.expires_us, NULL AS task_id, NULL AS idx, NULL AS channel, NULL AS task_path"     \
	" FROM pick JOIN memd_checkpoints c ON c.app = ? AND c.user = ?"                      \
	" AND c.session = pick.session AND c.ns = pick.ns AND c.id = pick.id"                 \
	" UNION ALL"                                                                          \
	" SELECT 1, w.session, w.ns, w.checkpoint_id, NULL, w.type, w.value, NULL, NULL,"     \
	" NULL, NULL, NULL, w.task_id, w.idx, w.channel, w.task_path"                         \
	" FROM pick JOIN memd_checkpoint_writes w ON w.app = ? AND w.user = ?"                \
	" AND w.session = pick.session AND w.ns = pick.ns AND w.checkpoint_id = pick.id"      \
	" WHERE ? = 1 ORDER BY " order

/* checkpoint_get: one id, or the greatest unexpired of (session, ns). */
#define GET_ORDER "part, task_path, task_id, idx"
static const my_sql SQL_CKPT_GET = { MY_ST_CKPT_GET,
	"WITH pick AS (SELECT session, ns, id FROM memd_checkpoints"
	" WHERE" CKPT_PK " AND" NOT_EXPIRED ")" PICKED_ROWS(GET_ORDER) };
static const my_sql SQL_CKPT_GET_LATEST = { MY_ST_CKPT_GET_LATEST,
	"WITH pick AS (SELECT session, ns, id FROM memd_checkpoints"
	" WHERE app = ? AND user = ? AND session = ? AND ns = ? AND" NOT_EXPIRED
	" ORDER BY id DESC LIMIT 1)" PICKED_ROWS(GET_ORDER) };

/* checkpoint_list: a page in (id, session, ns) order descending, on the
 * index whose order it is for the filters set: the primary key for one
 * namespace of a session, (app, user, session, id, ns) for a session's
 * every namespace, (app, user, id, session, ns) across sessions. The
 * keyset repeats its first part as a plain id bound so the read starts
 * there; without a keyset the bound is above every id. */
#define LIST_KEYSET                                                                          \
	" AND" NOT_EXPIRED " AND id <= ?"                                                     \
	" AND (id < ? OR (id = ? AND (session < ? OR (session = ? AND ns < ?))))"
#define LIST_ORDER "id DESC, session DESC, ns DESC, part, task_path, task_id, idx"
static const my_sql SQL_CKPT_LIST_NS = { MY_ST_CKPT_LIST_NS,
	"WITH pick AS (SELECT session, ns, id FROM memd_checkpoints FORCE INDEX (PRIMARY)"
	" WHERE app = ? AND user = ? AND session = ? AND ns = ?" LIST_KEYSET
	" ORDER BY id DESC LIMIT ?)" PICKED_ROWS(LIST_ORDER) };
static const my_sql SQL_CKPT_LIST_SESSION = { MY_ST_CKPT_LIST_SESSION,
	"WITH pick AS (SELECT session, ns, id FROM memd_checkpoints"
	" FORCE INDEX (memd_checkpoints_session_by_id)"
	" WHERE app = ? AND user = ? AND session = ?" LIST_KEYSET
	" ORDER BY id DESC, ns DESC LIMIT ?)" PICKED_ROWS(LIST_ORDER) };
static const my_sql SQL_CKPT_LIST_USER = { MY_ST_CKPT_LIST_USER,
	"WITH pick AS (SELECT session, ns, id FROM memd_checkpoints"
	" FORCE INDEX (memd_checkpoints_by_id)"
	" WHERE app = ? AND user = ? AND (? IS NULL OR ns = ?)" LIST_KEYSET
	" ORDER BY id DESC, session DESC, ns DESC LIMIT ?)" PICKED_ROWS(LIST_ORDER) };

/* checkpoint_delete of one namespace (the checkpoints before their
 * writes, the lock order). */
static const my_sql SQL_CKPT_DELETE_NS = { MY_ST_CKPT_DELETE_NS,
	"DELETE FROM memd_checkpoints WHERE app = ? AND user = ? AND session = ? AND ns = ?" };
static const my_sql SQL_CKPT_DELETE_NS_WRITES = { MY_ST_CKPT_DELETE_NS_WRITES,
	"DELETE FROM memd_checkpoint_writes"
	" WHERE app = ? AND user = ? AND session = ? AND ns = ?" };
static const my_sql SQL_SESSION_CKPTS_DELETE = { MY_ST_SESSION_CKPTS_DELETE,
	"DELETE FROM memd_checkpoints WHERE app = ? AND user = ? AND session = ?" };
static const my_sql SQL_SESSION_CKPT_WRITES_DELETE = { MY_ST_SESSION_CKPT_WRITES_DELETE,
	"DELETE FROM memd_checkpoint_writes WHERE app = ? AND user = ? AND session = ?" };
static const my_sql SQL_SESSION_CKPT_HEADS_DELETE = { MY_ST_SESSION_CKPT_HEADS_DELETE,
	"DELETE FROM memd_checkpoint_heads WHERE app = ? AND user = ? AND session = ?" };
static const my_sql SQL_USER_CKPTS_DELETE = { MY_ST_USER_CKPTS_DELETE,
	"DELETE FROM memd_checkpoints WHERE app = ? AND user = ?" };
static const my_sql SQL_USER_CKPT_WRITES_DELETE = { MY_ST_USER_CKPT_WRITES_DELETE,
	"DELETE FROM memd_checkpoint_writes WHERE app = ? AND user = ?" };
static const my_sql SQL_USER_CKPT_HEADS_DELETE = { MY_ST_USER_CKPT_HEADS_DELETE,
	"DELETE FROM memd_checkpoint_heads WHERE app = ? AND user = ?" };

/* checkpoint_resumable: an app's heads in (user, session) order, each
 * joined with its checkpoint for the run state (?: a mask of 1 << state),
 * the expiry and the columns delivered. The keyset repeats its first part
 * as a plain user bound; without one it starts after "" (ids are never
 * empty). */
static const my_sql SQL_CKPT_RESUMABLE = { MY_ST_CKPT_RESUMABLE,
	"SELECT h.user, h.session, c.id, c.parent_id, c.type, c.metadata, c.run_state,"
	" c.created_us, c.updated_us, c.expires_us FROM memd_checkpoint_heads h"
	" JOIN memd_checkpoints c ON c.app = h.app AND c.user = h.user AND c.session = h.session"
	" AND c.ns = '' AND c.id = h.id"
	" WHERE h.app = ? AND h.user >= ? AND (h.user > ? OR (h.user = ? AND h.session > ?))"
	" AND (? & (1 << c.run_state)) <> 0 AND (c.expires_us = 0 OR c.expires_us > ?)"
	" ORDER BY h.user, h.session LIMIT ?" };

/* checkpoint_expire: the expired rows, oldest expiry first, locked; each
 * deleted with the same test (a put since gave it a new expiry: kept),
 * then its writes; a deleted head passes to the greatest remaining root
 * id, read under the head row's lock, or goes. */
static const my_sql SQL_CKPT_EXPIRED = { MY_ST_CKPT_EXPIRED,
	"SELECT app, user, session, ns, id FROM memd_checkpoints"
	" FORCE INDEX (memd_checkpoints_by_expiry) WHERE" EXPIRED
	" ORDER BY expires_us, app, user, session, ns, id LIMIT ? FOR UPDATE" };
static const my_sql SQL_CKPT_EXPIRE_ONE = { MY_ST_CKPT_EXPIRE_ONE,
	"DELETE FROM memd_checkpoints WHERE" CKPT_PK " AND" EXPIRED };
static const my_sql SQL_CKPT_EXPIRE_WRITES = { MY_ST_CKPT_EXPIRE_WRITES,
	"DELETE FROM memd_checkpoint_writes"
	" WHERE app = ? AND user = ? AND session = ? AND ns = ? AND checkpoint_id = ?" };
static const my_sql SQL_CKPT_HEAD_LOCK = { MY_ST_CKPT_HEAD_LOCK,
	"SELECT id FROM memd_checkpoint_heads WHERE app = ? AND user = ? AND session = ?"
	" FOR UPDATE" };
static const my_sql SQL_CKPT_NEWEST_ROOT = { MY_ST_CKPT_NEWEST_ROOT,
	"SELECT id FROM memd_checkpoints WHERE app = ? AND user = ? AND session = ? AND ns = ''"
	" ORDER BY id DESC LIMIT 1" };
static const my_sql SQL_CKPT_HEAD_MOVE = { MY_ST_CKPT_HEAD_MOVE,
	"UPDATE memd_checkpoint_heads SET id = ? WHERE app = ? AND user = ? AND session = ?" };
static const my_sql SQL_CKPT_HEAD_DELETE = { MY_ST_CKPT_HEAD_DELETE,
	"DELETE FROM memd_checkpoint_heads WHERE app = ? AND user = ? AND session = ?" };

/* ---- checks ---------------------------------------------------------------- */

/* A namespace: "" (the root) or an id. */
static int32_t check_ns(const char *what, const char *ns, memd_error *err)
{
	if (!ns)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s is missing", what);
	return ns[0] ? pu_check_id(what, ns, err) : 0;
}

static int32_t check_run_state(uint32_t run_state, memd_error *err)
{
	if (run_state > MEMD_RUN_DONE)
		return memd_error_set(err, MEMD_EINVAL, 0, "unknown checkpoint run state %u",
				      (unsigned)run_state);
	return 0;
}

static int32_t check_checkpoint(const memd_checkpoint *c, memd_error *err)
{
	memd_scope scope;
	int32_t r;

	if (!c || c->struct_size < sizeof(*c))
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint is missing");
	scope = (memd_scope){ .struct_size = sizeof(scope), .app = c->app, .user = c->user,
			      .session = c->session };
	r = pu_check_scope(&scope, 1, err);
	if (r == 0)
		r = check_ns("checkpoint namespace", c->ns, err);
	if (r == 0)
		r = pu_check_id("checkpoint id", c->id, err);
	if (r == 0 && c->parent_id)
		r = pu_check_id("checkpoint parent_id", c->parent_id, err);
	if (r == 0)
		r = check_run_state(c->run_state, err);
	if (r < 0)
		return r;
	if (!c->type)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint type is missing");
	if (!c->payload && c->payload_size > 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint payload is missing");
	if (c->expires_us < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint expires_us is negative");
	return my_check_json_object("checkpoint metadata", c->metadata_json, err);
}

static int32_t check_write(uint32_t i, const memd_checkpoint_write *w, memd_error *err)
{
	char what[64];

	if (w->struct_size < sizeof(*w))
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint write %u is too small",
				      (unsigned)i);
	if (w->flags & ~MEMD_CKW_REPLACE)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "checkpoint write %u has unknown flags 0x%x", (unsigned)i,
				      (unsigned)w->flags);
	snprintf(what, sizeof(what), "checkpoint write %u task_id", (unsigned)i);
	if (pu_check_id(what, w->task_id, err) < 0)
		return MEMD_EINVAL;
	if (!w->channel || !w->type)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "checkpoint write %u has no channel or type", (unsigned)i);
	if (!w->value && w->value_size > 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint write %u value is missing",
				      (unsigned)i);
	return 0;
}

static int32_t check_task_path(uint32_t i, const char *task_path, memd_error *err)
{
	if (strlen(task_path) > MY_TASK_PATH_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "checkpoint write %u task path is longer than %d bytes",
				      (unsigned)i, MY_TASK_PATH_MAX);
	return 0;
}

static int32_t not_found(const char *ns, const char *id, memd_error *err)
{
	return memd_error_set(err, MEMD_ENOTFOUND, 0, "checkpoint '%.64s' of namespace '%.64s' "
			      "not found", id, ns);
}

/* ---- put ------------------------------------------------------------------- */

typedef struct put_ctx {
	const memd_checkpoint *c;
	int create_session;
	int64_t now_us;
	int created;
} put_ctx;

/* Hold c's session in share mode; create it when it is missing and x
 * asks (another process creating it at the same time is fine). */
static int32_t hold_session(my_conn *c, put_ctx *x, memd_error *err)
{
	memd_scope scope = { .struct_size = sizeof(scope), .app = x->c->app, .user = x->c->user,
			     .session = x->c->session };
	memd_session s = { .struct_size = sizeof(s), .app = x->c->app, .user = x->c->user,
			   .id = x->c->session, .metadata_json = EMPTY_OBJECT,
			   .created_us = x->now_us, .updated_us = x->now_us };
	int64_t one = 0;
	int found = 0;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, &scope, 1);
	r = my_query_i64(c, &SQL_CKPT_SESSION_SHARE, &p, &found, &one, err);
	if (r < 0 || found)
		return r;
	if (!x->create_session)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				      x->c->session);
	r = my_session_insert(c, &s, err);
	if (r == 0) {
		x->created = 1;
		return 0;
	}
	if (r != MEMD_ECONFLICT || c->last_errno != ER_DUP_ENTRY)
		return r;
	/* Created meanwhile by another caller (whose commit the insert
	 * waited for): hold it as it is. */
	my_params_init(&p);
	my_param_scope(&p, &scope, 1);
	r = my_query_i64(c, &SQL_CKPT_SESSION_SHARE, &p, &found, &one, err);
	if (r == 0 && !found)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				   x->c->session);
	return r;
}

static int32_t put_body(my_conn *c, void *arg, memd_error *err)
{
	put_ctx *x = arg;
	const memd_checkpoint *k = x->c;
	my_params p;
	int32_t r;

	x->created = 0; /* a deadlock victim's second run */
	r = hold_session(c, x, err);
	if (r < 0)
		return r;
	my_params_init(&p);
	my_param_text(&p, k->app);
	my_param_text(&p, k->user);
	my_param_text(&p, k->session);
	my_param_text(&p, k->ns);
	my_param_text(&p, k->id);
	my_param_text(&p, k->parent_id);
	my_param_text(&p, k->type);
	my_param_bytes(&p, k->payload, (size_t)k->payload_size);
	my_param_text(&p, k->metadata_json);
	my_param_i64(&p, k->run_state == MEMD_RUN_UNSET ? MEMD_RUN_RUNNING : k->run_state);
	my_param_i64(&p, x->now_us);
	my_param_i64(&p, x->now_us);
	my_param_i64(&p, k->expires_us);
	r = my_exec(c, &SQL_CKPT_UPSERT, &p, NULL, err);
	if (r < 0 || strcmp(k->ns, ROOT_NS) != 0)
		return r;
	my_params_init(&p);
	my_param_text(&p, k->app);
	my_param_text(&p, k->user);
	my_param_text(&p, k->session);
	my_param_text(&p, k->id);
	return my_exec(c, &SQL_CKPT_HEAD_UPSERT, &p, NULL, err);
}

int32_t my_checkpoint_put(void *inst, const memd_call *call, const memd_checkpoint *c,
			  int create_session, int64_t now_us, int *ret_created_session,
			  memd_error *err)
{
	put_ctx x = { .c = c, .create_session = create_session, .now_us = now_us };
	int32_t r = check_checkpoint(c, err);

	if (r == 0)
		r = my_run(inst, call, MY_TXN, put_body, &x, err);
	if (r == 0 && ret_created_session)
		*ret_created_session = x.created;
	return r;
}

/* ---- put_writes ------------------------------------------------------------- */

typedef struct writes_ctx {
	my_store *store;
	const memd_call *call;
	const memd_scope *scope;
	const memd_checkpoint_writes *w;
} writes_ctx;

/* Bind the key of w's checkpoint (5 parameters). */
static void param_checkpoint(my_params *p, const writes_ctx *x)
{
	my_param_scope(p, x->scope, 1);
	my_param_text(p, x->w->ns);
	my_param_text(p, x->w->checkpoint_id);
}

static int32_t writes_body(my_conn *c, void *arg, memd_error *err)
{
	writes_ctx *x = arg;
	const memd_checkpoint_writes *w = x->w;
	int64_t expires = 0;
	int found = 0;
	my_params p;
	int32_t r;

	my_params_init(&p);
	param_checkpoint(&p, x);
	r = my_query_i64(c, &SQL_CKPT_LOCK, &p, &found, &expires, err);
	if (r < 0)
		return r;
	if (!found || (expires > 0 && expires <= w->now_us))
		return not_found(w->ns, w->checkpoint_id, err);
	if (w->run_state != MEMD_RUN_UNSET) {
		my_params_init(&p);
		my_param_i64(&p, w->run_state);
		my_param_i64(&p, w->now_us);
		param_checkpoint(&p, x);
		r = my_exec(c, &SQL_CKPT_RUN_STATE, &p, NULL, err);
	}
	for (uint32_t i = 0; r == 0 && i < w->n_writes; i++) {
		const memd_checkpoint_write *one = &w->writes[i];
		my_params_init(&p);
		param_checkpoint(&p, x);
		my_param_text(&p, one->task_id);
		my_param_i64(&p, one->idx);
		my_param_text(&p, one->channel);
		my_param_text(&p, one->type);
		my_param_bytes(&p, one->value, (size_t)one->value_size);
		my_param_text(&p, pu_write_task_path(w, i));
		r = my_exec(c, (one->flags & MEMD_CKW_REPLACE) ? &SQL_CKPT_WRITE_REPLACE
							      : &SQL_CKPT_WRITE_KEEP,
			    &p, NULL, err);
		if (r == 0 && i % MY_CHECK_EVERY == MY_CHECK_EVERY - 1)
			r = my_call_check(x->store, x->call, err);
	}
	return r;
}

int32_t my_checkpoint_put_writes(void *inst, const memd_call *call, const memd_scope *scope,
				 const memd_checkpoint_writes *w, memd_error *err)
{
	writes_ctx x = { .store = inst, .call = call, .scope = scope, .w = w };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!w || !HAS(w, memd_checkpoint_writes, now_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint writes are missing");
	if (w->n_writes > 0 && !w->writes)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint writes have no array");
	r = check_ns("checkpoint namespace", w->ns, err);
	if (r == 0)
		r = pu_check_id("checkpoint id", w->checkpoint_id, err);
	if (r == 0)
		r = check_run_state(w->run_state, err);
	for (uint32_t i = 0; r == 0 && i < w->n_writes; i++) {
		r = check_write(i, &w->writes[i], err);
		if (r == 0)
			r = check_task_path(i, pu_write_task_path(w, i), err);
	}
	if (r == 0)
		r = my_run(inst, call, MY_TXN, writes_body, &x, err);
	return r;
}

/* ---- get and list ------------------------------------------------------------ */

typedef struct read_ctx {
	my_store *store;
	const memd_call *call;
	const memd_scope *scope;
	const memd_checkpoint_sink *out;
	uint64_t checkpoints;      /* delivered so far */
} read_ctx;

/* my_row_fn of the reads: part 0 is a checkpoint, part 1 one of its
 * writes (columns as PICKED_ROWS says). */
static int32_t ckpt_row(const my_stmt *s, void *ud, memd_error *err)
{
	read_ctx *x = ud;
	size_t len = 0;
	const void *bytes = my_col_bytes(s, 6, &len);

	if (my_col_i64(s, 0) == 0) {
		memd_checkpoint k = { .struct_size = sizeof(k) };
		k.app = x->scope->app;
		k.user = x->scope->user;
		k.session = my_col_text(s, 1);
		k.ns = my_col_text(s, 2);
		k.id = my_col_text(s, 3);
		k.parent_id = my_col_text(s, 4);
		k.type = my_col_text(s, 5);
		k.payload = bytes ? bytes : "";
		k.payload_size = len;
		k.metadata_json = my_col_text(s, 7);
		k.run_state = (uint32_t)my_col_i64(s, 8);
		k.created_us = my_col_i64(s, 9);
		k.updated_us = my_col_i64(s, 10);
		k.expires_us = my_col_i64(s, 11);
		x->checkpoints++;
		return my_sink_result(x->out->checkpoint(x->out->userdata, &k), "checkpoint", err);
	} else {
		memd_checkpoint_write w = { .struct_size = sizeof(w) };
		w.task_id = my_col_text(s, 12);
		w.idx = my_col_i64(s, 13);
		w.channel = my_col_text(s, 14);
		w.type = my_col_text(s, 5);
		w.value = bytes ? bytes : "";
		w.value_size = len;
		return my_sink_result(pu_sink_write(x->out, &w, my_col_text(s, 15)),
				      "checkpoint write", err);
	}
}

/* Bind the tail of PICKED_ROWS: the scope of both joins and whether the
 * writes are wanted. */
static void param_picked(my_params *p, const read_ctx *x)
{
	my_param_scope(p, x->scope, 0);
	my_param_scope(p, x->scope, 0);
	my_param_i64(p, pu_sink_wants_writes(x->out) ? 1 : 0);
}

typedef struct get_ctx {
	read_ctx rd;
	const char *ns;
	const char *id;            /* NULL = the newest */
	int64_t now_us;
} get_ctx;

static int32_t get_body(my_conn *c, void *arg, memd_error *err)
{
	get_ctx *x = arg;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	x->rd.checkpoints = 0;
	my_params_init(&p);
	my_param_scope(&p, x->rd.scope, 1);
	my_param_text(&p, x->ns);
	if (x->id)
		my_param_text(&p, x->id);
	my_param_i64(&p, x->now_us);
	param_picked(&p, &x->rd);
	r = my_exec(c, x->id ? &SQL_CKPT_GET : &SQL_CKPT_GET_LATEST, &p, &s, err);
	r = my_fetch_deliver(x->rd.store, x->rd.call, c, s, r, ckpt_row, &x->rd, NULL, err);
	if (r == 0 && x->rd.checkpoints == 0)
		return x->id ? not_found(x->ns, x->id, err)
			     : memd_error_set(err, MEMD_ENOTFOUND, 0,
					      "session '%.64s' has no checkpoint in namespace "
					      "'%.64s'", x->rd.scope->session, x->ns);
	return r;
}

int32_t my_checkpoint_get(void *inst, const memd_call *call, const memd_scope *scope,
			  const char *ns, const char *id, int64_t now_us,
			  const memd_checkpoint_sink *out, memd_error *err)
{
	get_ctx x = { .rd = { .store = inst, .call = call, .scope = scope, .out = out },
		      .ns = ns, .id = id, .now_us = now_us };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r == 0)
		r = check_ns("checkpoint namespace", ns, err);
	if (r == 0 && id)
		r = pu_check_id("checkpoint id", id, err);
	if (r < 0)
		return r;
	if (!out || !out->checkpoint)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint sink is missing");
	return my_run(inst, call, MY_AUTOCOMMIT, get_body, &x, err);
}

typedef struct list_ctx {
	read_ctx rd;
	const memd_checkpoint_query *q;
} list_ctx;

static int32_t list_body(my_conn *c, void *arg, memd_error *err)
{
	list_ctx *x = arg;
	const memd_checkpoint_query *q = x->q;
	const my_sql *sql;
	my_params p;
	my_stmt *s = NULL;
	/* No session (or namespace) in the keyset: "" orders before every
	 * one, so only ids below before_id are before it. */
	const char *bs = q->before_id && q->before_session ? q->before_session : "";
	const char *bns = q->before_id && q->before_session && q->before_ns ? q->before_ns : "";
	unsigned char above_all[ID_ABOVE_ALL_LEN];
	int32_t r;

	memset(above_all, ID_ABOVE_ALL_BYTE, sizeof(above_all));

	x->rd.checkpoints = 0;
	my_params_init(&p);
	my_param_scope(&p, x->rd.scope, 0);
	if (q->session) {
		my_param_text(&p, q->session);
		if (q->ns)
			my_param_text(&p, q->ns);
		sql = q->ns ? &SQL_CKPT_LIST_NS : &SQL_CKPT_LIST_SESSION;
	} else {
		my_param_text(&p, q->ns);
		my_param_text(&p, q->ns);
		sql = &SQL_CKPT_LIST_USER;
	}
	my_param_i64(&p, q->now_us);
	for (int i = 0; i < 3; i++) {
		if (q->before_id)
			my_param_text(&p, q->before_id);
		else
			my_param_bytes(&p, above_all, sizeof(above_all));
	}
	my_param_text(&p, bs);
	my_param_text(&p, bs);
	my_param_text(&p, bns);
	my_param_u64(&p, q->limit);
	param_picked(&p, &x->rd);
	r = my_exec(c, sql, &p, &s, err);
	return my_fetch_deliver(x->rd.store, x->rd.call, c, s, r, ckpt_row, &x->rd, NULL, err);
}

int32_t my_checkpoint_list(void *inst, const memd_call *call, const memd_scope *scope,
			   const memd_checkpoint_query *q, const memd_checkpoint_sink *out,
			   memd_error *err)
{
	memd_scope user;
	list_ctx x = { .q = q };
	int32_t r = pu_check_scope(scope, 0, err);

	if (r < 0)
		return r;
	if (!q || q->struct_size < sizeof(*q) || !out || !out->checkpoint)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint query or sink is missing");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint list limit must be > 0");
	if (q->session && (r = pu_check_id("session", q->session, err)) < 0)
		return r;
	if (q->ns && (r = check_ns("checkpoint namespace", q->ns, err)) < 0)
		return r;
	if (q->before_id && (r = pu_check_id("before_id", q->before_id, err)) < 0)
		return r;
	if (q->before_session && (r = pu_check_id("before_session", q->before_session, err)) < 0)
		return r;
	if (q->before_ns && (r = check_ns("before_ns", q->before_ns, err)) < 0)
		return r;
	user = (memd_scope){ .struct_size = sizeof(user), .app = scope->app, .user = scope->user };
	x.rd = (read_ctx){ .store = inst, .call = call, .scope = &user, .out = out };
	return my_run(inst, call, MY_AUTOCOMMIT, list_body, &x, err);
}

/* ---- delete ------------------------------------------------------------------- */

/* Run a DELETE whose parameters are scope (with its session when
 * with_session) and then ns when not NULL; *ret_rows (if not NULL) gets
 * the count. */
static int32_t delete_scoped(my_conn *c, const my_sql *sql, const memd_scope *scope,
			     int with_session, const char *ns, uint64_t *ret_rows,
			     memd_error *err)
{
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, scope, with_session);
	if (ns)
		my_param_text(&p, ns);
	r = my_exec(c, sql, &p, &s, err);
	if (r == 0 && ret_rows)
		*ret_rows = my_affected(s);
	return r;
}

int32_t my_checkpoints_session_delete(my_conn *c, const memd_scope *scope, memd_error *err)
{
	int32_t r = delete_scoped(c, &SQL_SESSION_CKPTS_DELETE, scope, 1, NULL, NULL, err);

	if (r == 0)
		r = delete_scoped(c, &SQL_SESSION_CKPT_WRITES_DELETE, scope, 1, NULL, NULL, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_SESSION_CKPT_HEADS_DELETE, scope, 1, NULL, NULL, err);
	return r;
}

int32_t my_checkpoints_user_delete(my_conn *c, const memd_scope *scope, uint64_t *ret_rows,
				   memd_error *err)
{
	uint64_t rows = 0;
	int32_t r = delete_scoped(c, &SQL_USER_CKPTS_DELETE, scope, 0, NULL, &rows, err);

	if (r == 0)
		r = delete_scoped(c, &SQL_USER_CKPT_WRITES_DELETE, scope, 0, NULL, NULL, err);
	if (r == 0)
		r = delete_scoped(c, &SQL_USER_CKPT_HEADS_DELETE, scope, 0, NULL, NULL, err);
	if (r == 0)
		*ret_rows = rows;
	return r;
}

typedef struct delete_ctx {
	const memd_scope *scope;
	const char *ns;            /* NULL = every namespace */
	uint64_t count;
} delete_ctx;

static int32_t delete_body(my_conn *c, void *arg, memd_error *err)
{
	delete_ctx *x = arg;
	int32_t r;

	x->count = 0;
	if (!x->ns) {
		r = delete_scoped(c, &SQL_SESSION_CKPTS_DELETE, x->scope, 1, NULL, &x->count, err);
		if (r == 0)
			r = delete_scoped(c, &SQL_SESSION_CKPT_WRITES_DELETE, x->scope, 1, NULL, NULL,
					  err);
	} else {
		r = delete_scoped(c, &SQL_CKPT_DELETE_NS, x->scope, 1, x->ns, &x->count, err);
		if (r == 0)
			r = delete_scoped(c, &SQL_CKPT_DELETE_NS_WRITES, x->scope, 1, x->ns, NULL,
					  err);
	}
	/* No root checkpoint is left: neither is the head. */
	if (r == 0 && (!x->ns || strcmp(x->ns, ROOT_NS) == 0))
		r = delete_scoped(c, &SQL_SESSION_CKPT_HEADS_DELETE, x->scope, 1, NULL, NULL, err);
	return r;
}

int32_t my_checkpoint_delete(void *inst, const memd_call *call, const memd_scope *scope,
			     const char *ns, uint32_t *ret_count, memd_error *err)
{
	delete_ctx x = { .scope = scope, .ns = ns };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r == 0 && ns)
		r = check_ns("checkpoint namespace", ns, err);
	if (r == 0)
		r = my_run(inst, call, MY_TXN, delete_body, &x, err);
	if (r == 0 && ret_count)
		*ret_count = x.count > UINT32_MAX ? UINT32_MAX : (uint32_t)x.count;
	return r;
}

/* ---- resumable ------------------------------------------------------------------ */

typedef struct resumable_ctx {
	my_store *store;
	const memd_call *call;
	const memd_resumable_query *q;
	const memd_checkpoint_sink *out;
} resumable_ctx;

static int32_t head_row(const my_stmt *s, void *ud, memd_error *err)
{
	resumable_ctx *x = ud;
	memd_checkpoint k = { .struct_size = sizeof(k) };

	k.app = x->q->app;
	k.user = my_col_text(s, 0);
	k.session = my_col_text(s, 1);
	k.ns = ROOT_NS;
	k.id = my_col_text(s, 2);
	k.parent_id = my_col_text(s, 3);
	k.type = my_col_text(s, 4);
	k.metadata_json = my_col_text(s, 5);
	k.run_state = (uint32_t)my_col_i64(s, 6);
	k.created_us = my_col_i64(s, 7);
	k.updated_us = my_col_i64(s, 8);
	k.expires_us = my_col_i64(s, 9);
	return my_sink_result(x->out->checkpoint(x->out->userdata, &k), "checkpoint", err);
}

static int32_t resumable_body(my_conn *c, void *arg, memd_error *err)
{
	resumable_ctx *x = arg;
	const memd_resumable_query *q = x->q;
	const char *after_user = q->after_user ? q->after_user : "";
	const char *after_session = q->after_user && q->after_session ? q->after_session : "";
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_text(&p, q->app);
	my_param_text(&p, after_user);
	my_param_text(&p, after_user);
	my_param_text(&p, after_user);
	my_param_text(&p, after_session);
	my_param_i64(&p, q->run_states);
	my_param_i64(&p, q->now_us);
	my_param_u64(&p, q->limit);
	r = my_exec(c, &SQL_CKPT_RESUMABLE, &p, &s, err);
	return my_fetch_deliver(x->store, x->call, c, s, r, head_row, x, NULL, err);
}

int32_t my_checkpoint_resumable(void *inst, const memd_call *call,
				const memd_resumable_query *q, const memd_checkpoint_sink *out,
				memd_error *err)
{
	resumable_ctx x = { .store = inst, .call = call, .q = q, .out = out };
	int32_t r;

	if (!q || q->struct_size < sizeof(*q) || !out || !out->checkpoint)
		return memd_error_set(err, MEMD_EINVAL, 0, "resumable query or sink is missing");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "resumable list limit must be > 0");
	r = pu_check_id("app", q->app, err);
	if (r == 0 && q->after_user)
		r = pu_check_id("after_user", q->after_user, err);
	if (r == 0 && q->after_user && q->after_session)
		r = pu_check_id("after_session", q->after_session, err);
	if (r < 0)
		return r;
	return my_run(inst, call, MY_AUTOCOMMIT, resumable_body, &x, err);
}

/* ---- expire ------------------------------------------------------------------------ */

/* A checkpoint's key: the strings of a row of expire_ctx's keys. */
typedef struct ckpt_key {
	const char *app, *user, *session, *ns, *id;
} ckpt_key;

/* The columns of SQL_CKPT_EXPIRED's key. */
enum { EXPIRED_APP, EXPIRED_USER, EXPIRED_SESSION, EXPIRED_NS, EXPIRED_ID, EXPIRED_COLS };

typedef struct expire_ctx {
	int64_t now_us;
	uint32_t limit;
	my_keys keys;
	uint32_t count;
} expire_ctx;

/* Bind k's session (3 parameters). */
static void param_key_session(my_params *p, const ckpt_key *k)
{
	my_param_text(p, k->app);
	my_param_text(p, k->user);
	my_param_text(p, k->session);
}

/* Bind k's key (5 parameters). */
static void param_key(my_params *p, const ckpt_key *k)
{
	param_key_session(p, k);
	my_param_text(p, k->ns);
	my_param_text(p, k->id);
}

/* The root checkpoint k was deleted: if it was its session's head, the
 * head passes to the greatest remaining root id, or goes. */
static int32_t pass_head(my_conn *c, const ckpt_key *k, memd_error *err)
{
	char newest[MEMD_ID_MAX + 1];
	my_stmt *s = NULL;
	my_params p;
	int is_head = 0;
	int32_t r;

	my_params_init(&p);
	param_key_session(&p, k);
	r = my_exec(c, &SQL_CKPT_HEAD_LOCK, &p, &s, err);
	if (r == 0 && (r = my_fetch(c, s, err)) == 1) {
		const char *head = my_col_text(s, 0);
		is_head = head && strcmp(head, k->id) == 0;
		my_done(s);
		r = 0;
	}
	if (r < 0 || !is_head)
		return r;
	newest[0] = '\0';
	my_params_init(&p);
	param_key_session(&p, k);
	r = my_exec(c, &SQL_CKPT_NEWEST_ROOT, &p, &s, err);
	if (r == 0 && (r = my_fetch(c, s, err)) == 1) {
		const char *id = my_col_text(s, 0);
		snprintf(newest, sizeof(newest), "%s", id ? id : "");
		my_done(s);
		r = 0;
	}
	if (r < 0)
		return r;
	my_params_init(&p);
	if (newest[0])
		my_param_text(&p, newest);
	param_key_session(&p, k);
	return my_exec(c, newest[0] ? &SQL_CKPT_HEAD_MOVE : &SQL_CKPT_HEAD_DELETE, &p, NULL, err);
}

static int32_t expire_body(my_conn *c, void *arg, memd_error *err)
{
	expire_ctx *x = arg;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_keys_clear(&x->keys);
	x->count = 0;
	my_params_init(&p);
	my_param_i64(&p, x->now_us);
	my_param_u64(&p, x->limit);
	r = my_exec(c, &SQL_CKPT_EXPIRED, &p, &s, err);
	while (r == 0 && (r = my_fetch(c, s, err)) == 1)
		r = my_keys_keep(&x->keys, s, err);
	my_done(s);
	for (size_t i = 0; r == 0 && i < x->keys.n; i++) {
		char **row = my_keys_row(&x->keys, i);
		const ckpt_key k = { .app = row[EXPIRED_APP], .user = row[EXPIRED_USER],
				     .session = row[EXPIRED_SESSION], .ns = row[EXPIRED_NS],
				     .id = row[EXPIRED_ID] };
		my_stmt *d = NULL;
		my_params_init(&p);
		param_key(&p, &k);
		my_param_i64(&p, x->now_us);
		r = my_exec(c, &SQL_CKPT_EXPIRE_ONE, &p, &d, err);
		if (r < 0 || my_affected(d) == 0)
			continue; /* failed, or given a new expiry meanwhile */
		x->count++;
		my_params_init(&p);
		param_key(&p, &k);
		r = my_exec(c, &SQL_CKPT_EXPIRE_WRITES, &p, NULL, err);
		if (r == 0 && strcmp(k.ns, ROOT_NS) == 0)
			r = pass_head(c, &k, err);
	}
	return r;
}

int32_t my_checkpoint_expire(void *inst, const memd_call *call, int64_t now_us, uint32_t limit,
			     uint32_t *ret_count, memd_error *err)
{
	expire_ctx x = { .now_us = now_us, .limit = limit, .keys = { .ncols = EXPIRED_COLS } };
	int32_t r;

	if (!ret_count)
		return memd_error_set(err, MEMD_EINVAL, 0, "no output count");
	if (limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint expire limit must be > 0");
	r = my_run(inst, call, MY_TXN, expire_body, &x, err);
	my_keys_free(&x.keys);
	if (r == 0)
		*ret_count = x.count;
	return r;
}
