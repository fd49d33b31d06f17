/* SPDX-License-Identifier: MIT */
#include "sq_checkpoints.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_util.h"
#include "sq_group.h"
#include "sq_sessions.h"

/* The namespace of a run's root graph: its checkpoints make the head. */
#define ROOT_NS ""
/* Metadata of a session a put creates (store.h: as session_create would,
 * no title). */
#define NEW_SESSION_METADATA "{}"

/* Every query that delivers a checkpoint selects these columns, in the
 * order checkpoint_from_row reads them. */
#define CKPT_COLS \
	"app, user, session, ns, id, parent_id, type, payload, metadata, run_state, " \
	"created_us, updated_us, expires_us"
/* A checkpoint row visible at ?8 (list) / ?6 (get). The unary plus keeps
 * the planner from comparing the parameter with checkpoints_expiring's
 * "expires_us > 0" (to see whether that partial index applies): such a
 * comparison ties the plan to the bound value, and SQLite then prepares
 * the statement again at every step with a new "now". */
#define CKPT_LIVE(now) " AND (expires_us = 0 OR expires_us > +" now ")"

static const sq_sql SQL_CKPT_PUT = { SQ_ST_CKPT_PUT,
	"INSERT INTO checkpoints (" CKPT_COLS ")"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12)"
	" ON CONFLICT (app, user, session, ns, id) DO UPDATE SET"
	" parent_id = excluded.parent_id, type = excluded.type, payload = excluded.payload,"
	" metadata = excluded.metadata, run_state = excluded.run_state,"
	" updated_us = excluded.updated_us, expires_us = excluded.expires_us" };
/* A root checkpoint becomes the head when its id is not below the head's
 * (its own id: the head takes its new run state and expiry). */
static const sq_sql SQL_CKPT_HEAD_PUT = { SQ_ST_CKPT_HEAD_PUT,
	"INSERT INTO checkpoint_heads (app, user, session, id, run_state, expires_us)"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
	" ON CONFLICT (app, user, session) DO UPDATE SET id = excluded.id,"
	" run_state = excluded.run_state, expires_us = excluded.expires_us"
	" WHERE excluded.id >= checkpoint_heads.id" };
static const sq_sql SQL_CKPT_EXPIRES = { SQ_ST_CKPT_EXPIRES,
	"SELECT expires_us FROM checkpoints"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND ns = ?4 AND id = ?5" };
/* A write's key leaves out its task path: a kept write keeps its path, a
 * replaced one takes the new one. */
#define CKW_INSERT \
	"INSERT INTO checkpoint_writes (app, user, session, ns, checkpoint_id, task_id, idx," \
	" channel, type, value, task_path) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)" \
	" ON CONFLICT (app, user, session, ns, checkpoint_id, task_id, idx)"
static const sq_sql SQL_CKW_KEEP = { SQ_ST_CKW_KEEP, CKW_INSERT " DO NOTHING" };
static const sq_sql SQL_CKW_REPLACE = { SQ_ST_CKW_REPLACE,
	CKW_INSERT " DO UPDATE SET channel = excluded.channel, type = excluded.type,"
	" value = excluded.value, task_path = excluded.task_path" };
static const sq_sql SQL_CKPT_RUN_STATE = { SQ_ST_CKPT_RUN_STATE,
	"UPDATE checkpoints SET run_state = ?6, updated_us = ?7"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND ns = ?4 AND id = ?5" };
static const sq_sql SQL_CKPT_HEAD_RUN_STATE = { SQ_ST_CKPT_HEAD_RUN_STATE,
	"UPDATE checkpoint_heads SET run_state = ?5"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND id = ?4" };
static const sq_sql SQL_CKPT_GET = { SQ_ST_CKPT_GET,
	"SELECT " CKPT_COLS " FROM checkpoints"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND ns = ?4 AND id = ?5" CKPT_LIVE("?6") };
static const sq_sql SQL_CKPT_LATEST = { SQ_ST_CKPT_LATEST,
	"SELECT " CKPT_COLS " FROM checkpoints"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND ns = ?4" CKPT_LIVE("?6")
	" ORDER BY id DESC LIMIT 1" };
/* Ascending by (task_path, task_id, idx), strings as bytes (BINARY:
 * UTF-8 in code point order): the primary key's prefix finds a
 * checkpoint's writes, a sort of those few orders them. */
static const sq_sql SQL_CKW_LIST = { SQ_ST_CKW_LIST,
	"SELECT task_id, idx, channel, type, value, task_path FROM checkpoint_writes"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND ns = ?4 AND checkpoint_id = ?5"
	" ORDER BY task_path COLLATE BINARY, task_id COLLATE BINARY, idx" };

/* Listings: ?1 app, ?2 user, ?3 session, ?4 ns, ?5..?7 the keyset
 * (before_id, before_session, before_ns), ?8 now, ?9 limit. The keyset
 * bounds id from above first (id <= ?5, an index range), then drops the
 * ties at or after (before_session, before_ns): a NULL before_session
 * keeps no tie (LangGraph's "before": ids < before_id), a NULL before_ns
 * keeps the ties of smaller sessions only. */
#define CKPT_KEYSET \
	" AND id <= ?5 AND (id < ?5 OR (?6 IS NOT NULL AND (session < ?6 OR" \
	" (session = ?6 AND ?7 IS NOT NULL AND ns < ?7))))"
/* One session and namespace: the primary key. */
#define CKPT_LIST_SNS \
	"SELECT " CKPT_COLS " FROM checkpoints" \
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND ns = ?4" CKPT_LIVE("?8")
#define CKPT_LIST_SNS_ORDER " ORDER BY id DESC LIMIT ?9"
/* One session, every namespace: checkpoints_session_by_id. */
#define CKPT_LIST_S \
	"SELECT " CKPT_COLS " FROM checkpoints INDEXED BY checkpoints_session_by_id" \
	" WHERE app = ?1 AND user = ?2 AND session = ?3" CKPT_LIVE("?8")
#define CKPT_LIST_S_ORDER " ORDER BY id DESC, ns DESC LIMIT ?9"
/* Every session of the user (one namespace or all): checkpoints_by_id. */
#define CKPT_LIST_U \
	"SELECT " CKPT_COLS " FROM checkpoints INDEXED BY checkpoints_by_id" \
	" WHERE app = ?1 AND user = ?2 AND (?4 IS NULL OR ns = ?4)" CKPT_LIVE("?8")
#define CKPT_LIST_U_ORDER " ORDER BY id DESC, session DESC, ns DESC LIMIT ?9"
static const sq_sql SQL_CKPT_LIST_SNS = { SQ_ST_CKPT_LIST_SNS,
	CKPT_LIST_SNS CKPT_LIST_SNS_ORDER };
static const sq_sql SQL_CKPT_LIST_SNS_BEFORE = { SQ_ST_CKPT_LIST_SNS_BEFORE,
	CKPT_LIST_SNS CKPT_KEYSET CKPT_LIST_SNS_ORDER };
static const sq_sql SQL_CKPT_LIST_S = { SQ_ST_CKPT_LIST_S, CKPT_LIST_S CKPT_LIST_S_ORDER };
static const sq_sql SQL_CKPT_LIST_S_BEFORE = { SQ_ST_CKPT_LIST_S_BEFORE,
	CKPT_LIST_S CKPT_KEYSET CKPT_LIST_S_ORDER };
static const sq_sql SQL_CKPT_LIST_U = { SQ_ST_CKPT_LIST_U, CKPT_LIST_U CKPT_LIST_U_ORDER };
static const sq_sql SQL_CKPT_LIST_U_BEFORE = { SQ_ST_CKPT_LIST_U_BEFORE,
	CKPT_LIST_U CKPT_KEYSET CKPT_LIST_U_ORDER };

static const sq_sql SQL_CKPT_DELETE_ALL = { SQ_ST_CKPT_DELETE_ALL,
	"DELETE FROM checkpoints WHERE app = ?1 AND user = ?2 AND session = ?3" };
static const sq_sql SQL_CKPT_DELETE_NS = { SQ_ST_CKPT_DELETE_NS,
	"DELETE FROM checkpoints WHERE app = ?1 AND user = ?2 AND session = ?3 AND ns = ?4" };
static const sq_sql SQL_CKPT_DELETE_ONE = { SQ_ST_CKPT_DELETE_ONE,
	"DELETE FROM checkpoints"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND ns = ?4 AND id = ?5" };
static const sq_sql SQL_CKPT_HEAD_DELETE = { SQ_ST_CKPT_HEAD_DELETE,
	"DELETE FROM checkpoint_heads WHERE app = ?1 AND user = ?2 AND session = ?3" };
/* After a root checkpoint went: the greatest remaining one (expired or
 * not) is the head, if there is one (the old head row is deleted first). */
static const sq_sql SQL_CKPT_HEAD_RESET = { SQ_ST_CKPT_HEAD_RESET,
	"INSERT INTO checkpoint_heads (app, user, session, id, run_state, expires_us)"
	" SELECT app, user, session, id, run_state, expires_us FROM checkpoints"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND ns = ''"
	" ORDER BY id DESC LIMIT 1" };
/* The heads of app ?1 in (user, session) order (the primary key), each
 * joined to its checkpoint (CROSS JOIN: heads drive the loop), without
 * the payload. ?2 run-state mask, ?3 now, ?4/?5 keyset, ?6 limit. */
#define CKPT_RESUMABLE \
	"SELECT c.app, c.user, c.session, c.ns, c.id, c.parent_id, c.type, NULL, c.metadata," \
	" h.run_state, c.created_us, c.updated_us, h.expires_us" \
	" FROM checkpoint_heads AS h CROSS JOIN checkpoints AS c" \
	" ON c.app = h.app AND c.user = h.user AND c.session = h.session AND c.ns = ''" \
	" AND c.id = h.id" \
	" WHERE h.app = ?1 AND ((1 << h.run_state) & ?2) != 0" \
	" AND (h.expires_us = 0 OR h.expires_us > ?3)"
static const sq_sql SQL_CKPT_RESUMABLE = { SQ_ST_CKPT_RESUMABLE,
	CKPT_RESUMABLE " ORDER BY h.user, h.session LIMIT ?6" };
static const sq_sql SQL_CKPT_RESUMABLE_AFTER = { SQ_ST_CKPT_RESUMABLE_AFTER,
	CKPT_RESUMABLE " AND (h.user, h.session) > (?4, ?5) ORDER BY h.user, h.session LIMIT ?6" };
/* The oldest expiry first, from checkpoints_expiring. */
static const sq_sql SQL_CKPT_EXPIRED = { SQ_ST_CKPT_EXPIRED,
	"SELECT app, user, session, ns, id FROM checkpoints INDEXED BY checkpoints_expiring"
	" WHERE expires_us > 0 AND expires_us <= ?1"
	" ORDER BY expires_us, app, user, session, ns, id LIMIT ?2" };

/* ---- rows and checks -------------------------------------------------- */

/* Fill c from the CKPT_COLS of st's current row. Strings and payload are
 * borrowed from st until its next step or reset; a 0-byte payload is ""
 * (not NULL) unless the column is NULL (resumable: no payload). */
static void checkpoint_from_row(sqlite3_stmt *st, memd_checkpoint *c)
{
	memset(c, 0, sizeof(*c));
	c->struct_size = sizeof(*c);
	c->app = sq_col_text(st, 0);
	c->user = sq_col_text(st, 1);
	c->session = sq_col_text(st, 2);
	c->ns = sq_col_text(st, 3);
	c->id = sq_col_text(st, 4);
	c->parent_id = sq_col_text(st, 5);
	c->type = sq_col_text(st, 6);
	if (sqlite3_column_type(st, 7) != SQLITE_NULL) {
		c->payload = sqlite3_column_blob(st, 7);
		c->payload_size = (uint64_t)sqlite3_column_bytes(st, 7);
		if (!c->payload)
			c->payload = "";
	}
	c->metadata_json = sq_col_text(st, 8);
	c->run_state = (uint32_t)sqlite3_column_int64(st, 9);
	c->created_us = sqlite3_column_int64(st, 10);
	c->updated_us = sqlite3_column_int64(st, 11);
	c->expires_us = sqlite3_column_int64(st, 12);
}

/* Bind bytes (size may be 0: a 0-byte blob, never NULL). */
static int bind_bytes(sqlite3_stmt *st, int idx, const void *p, uint64_t size)
{
	if (size > INT32_MAX)
		return SQLITE_TOOBIG;
	return sqlite3_bind_blob(st, idx, size ? p : "", (int)size, SQLITE_STATIC);
}

/* Bind (app, user, session, ns, id) of one checkpoint to ?1..?5. */
static int bind_key(sqlite3_stmt *st, const memd_scope *scope, const char *ns, const char *id)
{
	int rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, ns);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 5, id);
	return rc;
}

/* Bind text only when st has that parameter (the variants of one query
 * do not all use every parameter). */
static int bind_text_opt(sqlite3_stmt *st, int idx, const char *v)
{
	return idx <= sqlite3_bind_parameter_count(st) ? sq_bind_text(st, idx, v) : SQLITE_OK;
}

static int32_t check_ns(const char *ns, memd_error *err)
{
	if (!ns)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint namespace is missing");
	/* "" is the root namespace; any other is an id. */
	return ns[0] ? pu_check_id("checkpoint namespace", ns, err) : 0;
}

static int32_t check_run_state(uint32_t s, memd_error *err)
{
	if (s > MEMD_RUN_DONE)
		return memd_error_set(err, MEMD_EINVAL, 0, "unknown checkpoint run state %u",
				      (unsigned)s);
	return 0;
}

static int32_t check_checkpoint(const memd_checkpoint *c, memd_error *err)
{
	memd_scope sc;
	int32_t r;

	if (!c || c->struct_size < sizeof(*c))
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint is missing or short");
	sc = (memd_scope){ .struct_size = sizeof(sc), .app = c->app, .user = c->user,
			   .session = c->session };
	r = pu_check_scope(&sc, 1, err);
	if (r == 0)
		r = check_ns(c->ns, err);
	if (r == 0)
		r = pu_check_id("checkpoint id", c->id, err);
	if (r == 0 && c->parent_id)
		r = pu_check_id("checkpoint parent id", c->parent_id, err);
	if (r == 0 && !c->type)
		r = memd_error_set(err, MEMD_EINVAL, 0, "checkpoint '%.64s' has no type", c->id);
	if (r == 0 && c->payload_size && !c->payload)
		r = memd_error_set(err, MEMD_EINVAL, 0, "checkpoint '%.64s' has no payload", c->id);
	if (r == 0)
		r = sq_check_json_object("checkpoint metadata", c->metadata_json, err);
	if (r == 0)
		r = check_run_state(c->run_state, err);
	if (r == 0 && c->expires_us < 0)
		r = memd_error_set(err, MEMD_EINVAL, 0, "checkpoint '%.64s' has a negative expiry",
				   c->id);
	return r;
}

/* Run a statement with no result rows to completion; ret_changes (may be
 * NULL) gets the rows it changed. st is done here. */
static int32_t run_done(sq_conn *c, sqlite3_stmt *st, int rc, int64_t *ret_changes,
			const char *what, const char *id, memd_error *err)
{
	int32_t r = 0;

	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "%s '%.64s'", what, id);
	else if (ret_changes)
		*ret_changes = sqlite3_changes(c->db);
	sq_stmt_done(st);
	return r;
}

/* ---- checkpoint_put --------------------------------------------------- */

typedef struct put_job {
	const memd_checkpoint *c;
	int create_session;
	int64_t now_us;
	int created;                /* the put created the session */
} put_job;

/* The session must exist; with create_session it is created (as
 * session_create would: no title, metadata {}, no state) when missing. */
static int32_t put_session(sq_conn *c, put_job *j, const memd_scope *sc, memd_error *err)
{
	sq_session_head head;
	memd_session s;
	int32_t r = sq_session_head_get(c, NULL, sc, &head, err);

	if (r != MEMD_ENOTFOUND || !j->create_session)
		return r;
	s = (memd_session){ .struct_size = sizeof(s), .app = sc->app, .user = sc->user,
			    .id = sc->session, .metadata_json = NEW_SESSION_METADATA,
			    .created_us = j->now_us, .updated_us = j->now_us };
	r = sq_session_insert(c, &s, NEW_SESSION_METADATA, err);
	if (r == 0)
		j->created = 1;
	return r;
}

static int32_t put_apply(sq_conn *c, void *ctx, memd_error *err)
{
	put_job *j = ctx;
	const memd_checkpoint *k = j->c;
	uint32_t run_state = k->run_state == MEMD_RUN_UNSET ? MEMD_RUN_RUNNING : k->run_state;
	memd_scope sc = { .struct_size = sizeof(sc), .app = k->app, .user = k->user,
			  .session = k->session };
	sqlite3_stmt *st = NULL;
	int32_t r;
	int rc;

	j->created = 0;
	r = put_session(c, j, &sc, err);
	if (r == 0)
		r = sq_stmt(c, &SQL_CKPT_PUT, &st, err);
	if (r < 0)
		return r;
	rc = bind_key(st, &sc, k->ns, k->id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 6, k->parent_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 7, k->type);
	if (rc == SQLITE_OK)
		rc = bind_bytes(st, 8, k->payload, k->payload_size);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 9, k->metadata_json);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 10, run_state);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 11, j->now_us);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 12, k->expires_us);
	r = run_done(c, st, rc, NULL, "put checkpoint", k->id, err);
	if (r < 0 || strcmp(k->ns, ROOT_NS) != 0)
		return r;
	r = sq_stmt(c, &SQL_CKPT_HEAD_PUT, &st, err);
	if (r < 0)
		return r;
	rc = sq_bind_scope(st, &sc, 1);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, k->id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 5, run_state);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 6, k->expires_us);
	return run_done(c, st, rc, NULL, "move the head to checkpoint", k->id, err);
}

int32_t sq_checkpoint_put(void *inst, const memd_call *call, const memd_checkpoint *c,
			  int create_session, int64_t now_us, int *ret_created_session,
			  memd_error *err)
{
	put_job job = { .c = c, .create_session = create_session, .now_us = now_us };
	int32_t r = check_checkpoint(c, err);

	if (r < 0)
		return r;
	r = sq_group_write(inst, call, put_apply, &job, 1, err);
	if (r == 0 && ret_created_session)
		*ret_created_session = job.created;
	return r;
}

/* ---- checkpoint_put_writes -------------------------------------------- */

typedef struct writes_job {
	const memd_scope *scope;
	const memd_checkpoint_writes *w;
} writes_job;

/* MEMD_ENOTFOUND unless the checkpoint exists and is unexpired at now. */
static int32_t checkpoint_live(sq_conn *c, const memd_scope *scope, const char *ns,
			       const char *id, int64_t now_us, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_CKPT_EXPIRES, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = bind_key(st, scope, ns, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		int64_t expires = sqlite3_column_int64(st, 0);
		if (expires > 0 && expires <= now_us)
			r = memd_error_set(err, MEMD_ENOTFOUND, 0, "checkpoint '%.64s' has expired",
					   id);
	} else if (rc == SQLITE_DONE) {
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "checkpoint '%.64s' not found", id);
	} else {
		r = sq_fail(c, rc, err, "read checkpoint '%.64s'", id);
	}
	sq_stmt_done(st);
	return r;
}

/* The smallest memd_checkpoint_writes accepted: a 1.5 caller's, without
 * task_paths. */
#define WRITES_SIZE_1_5 offsetof(memd_checkpoint_writes, task_paths)

static int32_t write_one(sq_conn *c, const writes_job *j, uint32_t i, memd_error *err)
{
	const memd_checkpoint_write *w = &j->w->writes[i];
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, (w->flags & MEMD_CKW_REPLACE) ? &SQL_CKW_REPLACE : &SQL_CKW_KEEP,
			    &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = bind_key(st, j->scope, j->w->ns, j->w->checkpoint_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 6, w->task_id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 7, w->idx);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 8, w->channel);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 9, w->type);
	if (rc == SQLITE_OK)
		rc = bind_bytes(st, 10, w->value, w->value_size);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 11, pu_write_task_path(j->w, i));
	return run_done(c, st, rc, NULL, "write to checkpoint", j->w->checkpoint_id, err);
}

/* The checkpoint's run state (updated_us = now) and, for a root
 * checkpoint that is the head, the head's. */
static int32_t run_state_set(sq_conn *c, const writes_job *j, memd_error *err)
{
	const memd_checkpoint_writes *w = j->w;
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_CKPT_RUN_STATE, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = bind_key(st, j->scope, w->ns, w->checkpoint_id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 6, w->run_state);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 7, w->now_us);
	r = run_done(c, st, rc, NULL, "set the run state of checkpoint", w->checkpoint_id, err);
	if (r < 0 || strcmp(w->ns, ROOT_NS) != 0)
		return r;
	r = sq_stmt(c, &SQL_CKPT_HEAD_RUN_STATE, &st, err);
	if (r < 0)
		return r;
	rc = sq_bind_scope(st, j->scope, 1);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, w->checkpoint_id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 5, w->run_state);
	return run_done(c, st, rc, NULL, "set the head's run state of", j->scope->session, err);
}

static int32_t writes_apply(sq_conn *c, void *ctx, memd_error *err)
{
	writes_job *j = ctx;
	const memd_checkpoint_writes *w = j->w;
	int32_t r = checkpoint_live(c, j->scope, w->ns, w->checkpoint_id, w->now_us, err);

	for (uint32_t i = 0; r == 0 && i < w->n_writes; i++)
		r = write_one(c, j, i, err);
	if (r == 0 && w->run_state != MEMD_RUN_UNSET)
		r = run_state_set(c, j, err);
	return r;
}

static int32_t check_writes(const memd_scope *scope, const memd_checkpoint_writes *w,
			    memd_error *err)
{
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!w || w->struct_size < WRITES_SIZE_1_5)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint writes are missing or short");
	if ((r = check_ns(w->ns, err)) < 0 ||
	    (r = pu_check_id("checkpoint id", w->checkpoint_id, err)) < 0 ||
	    (r = check_run_state(w->run_state, err)) < 0)
		return r;
	if (w->n_writes && !w->writes)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint writes have no array");
	for (uint32_t i = 0; i < w->n_writes; i++) {
		const memd_checkpoint_write *x = &w->writes[i];
		if (x->struct_size < sizeof(*x) || !x->task_id || !x->task_id[0] || !x->channel ||
		    !x->type || (x->value_size && !x->value))
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "checkpoint write %u lacks its task id, channel, "
					      "type or value",
					      (unsigned)i);
	}
	return 0;
}

int32_t sq_checkpoint_put_writes(void *inst, const memd_call *call, const memd_scope *scope,
				 const memd_checkpoint_writes *w, memd_error *err)
{
	writes_job job = { .scope = scope, .w = w };
	int32_t r = check_writes(scope, w, err);

	if (r < 0)
		return r;
	return sq_group_write(inst, call, writes_apply, &job, w->n_writes, err);
}

/* ---- reads ------------------------------------------------------------ */

/* What the rows of a checkpoint read go to. */
typedef struct deliver_ctx {
	sq_store *store;
	const memd_call *call;
	sq_conn *c;
	const memd_checkpoint_sink *out;
	uint64_t rows;              /* checkpoints delivered */
} deliver_ctx;

/* sq_row_fn of the writes of one checkpoint: to ud, a deliver_ctx,
 * through the sink's task_write with the write's path when it has one. */
static int32_t write_row(sqlite3_stmt *st, void *ud, memd_error *err)
{
	deliver_ctx *d = ud;
	memd_checkpoint_write w = { .struct_size = sizeof(w) };

	w.task_id = sq_col_text(st, 0);
	w.idx = sqlite3_column_int64(st, 1);
	w.channel = sq_col_text(st, 2);
	w.type = sq_col_text(st, 3);
	w.value = sqlite3_column_blob(st, 4);
	w.value_size = (uint64_t)sqlite3_column_bytes(st, 4);
	if (!w.value)
		w.value = "";
	return sq_sink_result(pu_sink_write(d->out, &w, sq_col_text(st, 5)), "checkpoint write",
			      err);
}

/* sq_row_fn of the checkpoint reads: the checkpoint of st's current row
 * to ud (a deliver_ctx), then its writes when the sink wants them. */
static int32_t checkpoint_row(sqlite3_stmt *st, void *ud, memd_error *err)
{
	deliver_ctx *d = ud;
	memd_checkpoint k;
	memd_scope sc;
	sqlite3_stmt *ws = NULL;
	int32_t r;
	int rc;

	checkpoint_from_row(st, &k);
	d->rows++;
	r = sq_sink_result(d->out->checkpoint(d->out->userdata, &k), "checkpoint", err);
	if (r != 0 || !pu_sink_wants_writes(d->out))
		return r;
	r = sq_stmt(d->c, &SQL_CKW_LIST, &ws, err);
	if (r < 0)
		return r;
	sc = (memd_scope){ .struct_size = sizeof(sc), .app = k.app, .user = k.user,
			   .session = k.session };
	rc = bind_key(ws, &sc, k.ns, k.id);
	r = sq_step_deliver(d->store, d->call, d->c, ws, rc, 0, write_row, d, err,
			    "read the writes of checkpoint '%.64s'", k.id);
	sq_stmt_done(ws);
	/* A sink that asked to stop during the writes stops the listing. */
	return r;
}

/* The smallest memd_checkpoint_sink accepted: a 1.5 caller's, without
 * task_write. */
#define SINK_SIZE_1_5 offsetof(memd_checkpoint_sink, task_write)

static int32_t check_sink(const memd_checkpoint_sink *out, memd_error *err)
{
	if (!out || out->struct_size < SINK_SIZE_1_5 || !out->checkpoint)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint sink is missing or short");
	return 0;
}

int32_t sq_checkpoint_get(void *inst, const memd_call *call, const memd_scope *scope,
			  const char *ns, const char *id, int64_t now_us,
			  const memd_checkpoint_sink *out, memd_error *err)
{
	deliver_ctx d = { .store = inst, .call = call, .out = out };
	sqlite3_stmt *st = NULL;
	int32_t r = pu_check_scope(scope, 1, err);
	int rc;

	if (r == 0)
		r = check_ns(ns, err);
	if (r == 0 && id)
		r = pu_check_id("checkpoint id", id, err);
	if (r == 0)
		r = check_sink(out, err);
	if (r < 0)
		return r;
	r = sq_read_begin(d.store, call, &d.c, err);
	if (r < 0)
		return r;
	r = sq_stmt(d.c, id ? &SQL_CKPT_GET : &SQL_CKPT_LATEST, &st, err);
	if (r < 0)
		goto out;
	rc = bind_key(st, scope, ns, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 6, now_us);
	r = sq_step_deliver(d.store, call, d.c, st, rc, 1, checkpoint_row, &d, err,
			    "read checkpoint '%.64s'", id ? id : "(latest)");
	if (r == 0 && d.rows == 0)
		r = id ? memd_error_set(err, MEMD_ENOTFOUND, 0, "checkpoint '%.64s' not found", id)
		       : memd_error_set(err, MEMD_ENOTFOUND, 0,
					"session '%.64s' has no checkpoint in namespace '%.64s'",
					scope->session, ns);
out:
	sq_stmt_done(st);
	sq_read_end(d.store, d.c);
	return r;
}

/* The listing variant for q: by session and namespace, session, or user;
 * with or without the keyset. */
static const sq_sql *list_sql(const memd_checkpoint_query *q)
{
	int before = q->before_id != NULL;

	if (q->session && q->ns)
		return before ? &SQL_CKPT_LIST_SNS_BEFORE : &SQL_CKPT_LIST_SNS;
	if (q->session)
		return before ? &SQL_CKPT_LIST_S_BEFORE : &SQL_CKPT_LIST_S;
	return before ? &SQL_CKPT_LIST_U_BEFORE : &SQL_CKPT_LIST_U;
}

static int32_t check_query(const memd_checkpoint_query *q, memd_error *err)
{
	int32_t r = 0;

	if (!q || q->struct_size < sizeof(*q))
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint query is missing or short");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint list limit must be > 0");
	if (q->session)
		r = pu_check_id("checkpoint session", q->session, err);
	if (r == 0 && q->ns)
		r = check_ns(q->ns, err);
	if (r == 0 && q->before_id)
		r = pu_check_id("checkpoint before_id", q->before_id, err);
	if (r == 0 && (q->before_session || q->before_ns) && !q->before_id)
		r = memd_error_set(err, MEMD_EINVAL, 0,
				   "checkpoint before_session and before_ns need before_id");
	if (r == 0 && q->before_ns && !q->before_session)
		r = memd_error_set(err, MEMD_EINVAL, 0, "checkpoint before_ns needs before_session");
	return r;
}

int32_t sq_checkpoint_list(void *inst, const memd_call *call, const memd_scope *scope,
			   const memd_checkpoint_query *q, const memd_checkpoint_sink *out,
			   memd_error *err)
{
	deliver_ctx d = { .store = inst, .call = call, .out = out };
	sqlite3_stmt *st = NULL;
	int32_t r = pu_check_scope(scope, 0, err);
	int rc;

	if (r == 0)
		r = check_query(q, err);
	if (r == 0)
		r = check_sink(out, err);
	if (r < 0)
		return r;
	r = sq_read_begin(d.store, call, &d.c, err);
	if (r < 0)
		return r;
	r = sq_stmt(d.c, list_sql(q), &st, err);
	if (r < 0)
		goto out;
	rc = sq_bind_scope(st, scope, 0);
	if (rc == SQLITE_OK)
		rc = bind_text_opt(st, 3, q->session);
	if (rc == SQLITE_OK)
		rc = bind_text_opt(st, 4, q->ns);
	if (rc == SQLITE_OK && q->before_id)
		rc = sq_bind_text(st, 5, q->before_id);
	if (rc == SQLITE_OK && q->before_id)
		rc = sq_bind_text(st, 6, q->before_session);
	if (rc == SQLITE_OK && q->before_id)
		rc = sq_bind_text(st, 7, q->before_ns);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 8, q->now_us);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 9, q->limit);
	r = sq_step_deliver(d.store, call, d.c, st, rc, 0, checkpoint_row, &d, err,
			    "list checkpoints of '%.64s'", scope->user);
out:
	sq_stmt_done(st);
	sq_read_end(d.store, d.c);
	return r;
}

int32_t sq_checkpoint_resumable(void *inst, const memd_call *call,
				const memd_resumable_query *q, const memd_checkpoint_sink *out,
				memd_error *err)
{
	/* No writes: the heads go to a copy of the sink without its write
	 * members (a copy of what the caller's struct_size covers). */
	memd_checkpoint_sink heads = { 0 };
	deliver_ctx d = { .store = inst, .call = call, .out = &heads };
	sqlite3_stmt *st = NULL;
	int after;
	int32_t r;
	int rc;

	if (!q || q->struct_size < sizeof(*q))
		return memd_error_set(err, MEMD_EINVAL, 0, "resumable query is missing or short");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "resumable list limit must be > 0");
	r = pu_check_id("app", q->app, err);
	if (r == 0)
		r = check_sink(out, err);
	if (r < 0)
		return r;
	memcpy(&heads, out, out->struct_size < sizeof(heads) ? out->struct_size : sizeof(heads));
	heads.struct_size = sizeof(heads);
	heads.write = NULL;
	heads.task_write = NULL;
	after = q->after_user != NULL;
	r = sq_read_begin(d.store, call, &d.c, err);
	if (r < 0)
		return r;
	r = sq_stmt(d.c, after ? &SQL_CKPT_RESUMABLE_AFTER : &SQL_CKPT_RESUMABLE, &st, err);
	if (r < 0)
		goto out;
	rc = sq_bind_text(st, 1, q->app);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 2, q->run_states);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 3, q->now_us);
	if (rc == SQLITE_OK)
		rc = bind_text_opt(st, 4, q->after_user);
	/* A user without a session: that user's sessions all come after. */
	if (rc == SQLITE_OK)
		rc = bind_text_opt(st, 5, after ? (q->after_session ? q->after_session : "")
						: NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 6, q->limit);
	r = sq_step_deliver(d.store, call, d.c, st, rc, 0, checkpoint_row, &d, err,
			    "list the resumable runs of '%.64s'", q->app);
out:
	sq_stmt_done(st);
	sq_read_end(d.store, d.c);
	return r;
}

/* ---- checkpoint_delete ------------------------------------------------ */

typedef struct delete_job {
	const memd_scope *scope;
	const char *ns;             /* NULL: every namespace */
	int64_t count;
} delete_job;

/* Run a statement keyed by (app, user, session[, ns]); ret_changes as in
 * run_done. */
static int32_t scoped_run(sq_conn *c, const sq_sql *sql, const memd_scope *scope,
			  const char *ns, int64_t *ret_changes, const char *what,
			  memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, sql, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK && ns)
		rc = sq_bind_text(st, 4, ns);
	return run_done(c, st, rc, ret_changes, what, scope->session, err);
}

/* Writes go with their checkpoints (ON DELETE CASCADE); the head goes
 * with the root namespace. */
static int32_t delete_apply(sq_conn *c, void *ctx, memd_error *err)
{
	delete_job *j = ctx;
	int32_t r;

	j->count = 0;
	if (j->ns)
		r = scoped_run(c, &SQL_CKPT_DELETE_NS, j->scope, j->ns, &j->count,
			       "delete the checkpoints of a namespace of", err);
	else
		r = scoped_run(c, &SQL_CKPT_DELETE_ALL, j->scope, NULL, &j->count,
			       "delete the checkpoints of", err);
	if (r == 0 && (!j->ns || strcmp(j->ns, ROOT_NS) == 0))
		r = scoped_run(c, &SQL_CKPT_HEAD_DELETE, j->scope, NULL, NULL,
			       "delete the checkpoint head of", err);
	return r;
}

int32_t sq_checkpoint_delete(void *inst, const memd_call *call, const memd_scope *scope,
			     const char *ns, uint32_t *ret_count, memd_error *err)
{
	delete_job job = { .scope = scope, .ns = ns };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r == 0 && ns)
		r = check_ns(ns, err);
	if (r < 0)
		return r;
	r = sq_group_write(inst, call, delete_apply, &job, 1, err);
	if (r == 0 && ret_count)
		*ret_count = job.count > UINT32_MAX ? UINT32_MAX : (uint32_t)job.count;
	return r;
}

/* ---- checkpoint_expire ------------------------------------------------ */

/* The columns of SQL_CKPT_EXPIRED's key. */
enum { EXPIRED_APP, EXPIRED_USER, EXPIRED_SESSION, EXPIRED_NS, EXPIRED_ID, EXPIRED_COLS };

/* Delete one expired checkpoint (its writes cascade); a root one hands
 * the head to the greatest root checkpoint left, or drops it
 * (sq_expire_fn). */
static int32_t expire_one(sq_conn *c, char *const *k, int64_t now_us, memd_error *err)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = k[EXPIRED_APP],
			  .user = k[EXPIRED_USER], .session = k[EXPIRED_SESSION] };
	const char *ns = k[EXPIRED_NS], *id = k[EXPIRED_ID];
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_CKPT_DELETE_ONE, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = bind_key(st, &sc, ns, id);
	r = run_done(c, st, rc, NULL, "delete expired checkpoint", id, err);
	if (r < 0 || strcmp(ns, ROOT_NS) != 0)
		return r;
	r = scoped_run(c, &SQL_CKPT_HEAD_DELETE, &sc, NULL, NULL, "delete the checkpoint head of",
		       err);
	if (r == 0)
		r = scoped_run(c, &SQL_CKPT_HEAD_RESET, &sc, NULL, NULL,
			       "pass on the checkpoint head of", err);
	return r;
}

int32_t sq_checkpoint_expire(void *inst, const memd_call *call, int64_t now_us,
			     uint32_t limit, uint32_t *ret_count, memd_error *err)
{
	return sq_expire(inst, call, &SQL_CKPT_EXPIRED, EXPIRED_COLS, "expired checkpoints", now_us,
			 limit, expire_one, ret_count, err);
}
