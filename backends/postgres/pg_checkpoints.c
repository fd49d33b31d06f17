/* SPDX-License-Identifier: MIT */
#include "pg_checkpoints.h"

#include <endian.h>
#include <limits.h>
#include <string.h>

#include "plugin_util.h"

#define BINARY 1
#define INT8_BYTES 8
#define ROOT_NS ""      /* the root graph's namespace, which has the head */
#define KEYSET_FIRST "" /* sorts before every id: (t, "") bounds below t */
#define BYTES_MAX INT_MAX /* libpq's parameter lengths are int */

static const pg_sql SQL_BEGIN = { PG_ST_BEGIN, 0, "BEGIN" };
static const pg_sql SQL_BEGIN_READ = { PG_ST_BEGIN_READ, 0,
	"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" };
static const pg_sql SQL_COMMIT = { PG_ST_COMMIT, 0, "COMMIT" };

/* The columns every query that delivers a checkpoint selects (p: the
 * table's alias and a dot, or nothing), in the order ck_from_row reads
 * them; results are binary (the numbers int8), the payload last. */
#define CK_COLS_OF(p) \
	p "app, " p "\"user\", " p "session, " p "ns, " p "id, " p "parent_id, " p "type, " \
	p "metadata, " p "run_state::bigint, " p "created_us, " p "updated_us, " p "expires_us"
#define CK_COLS CK_COLS_OF("") ", payload"
#define CK_N_COLS 12 /* without the payload */
/* A write's columns as get delivers them; list's add its checkpoint's
 * session, ns and id in front. A checkpoint's writes are delivered in
 * W_ORDER (task_path and task_id are COLLATE "C": bytes). */
#define W_COLS "task_path, task_id, idx, channel, type, value"
#define W_ORDER "task_path, task_id, idx"
#define W_KEY_COLS 3

/* $1..$5 the checkpoint's key. */
#define CK_PK " app = $1 AND \"user\" = $2 AND session = $3 AND ns = $4 AND id = $5"
#define W_PK " app = $1 AND \"user\" = $2 AND session = $3 AND ns = $4 AND checkpoint_id = $5"
/* Visible at $n: not expired (0 < expires_us <= now is). */
#define VISIBLE_AT(n) " AND (expires_us = 0 OR expires_us > " n "::bigint)"

/* ---- put ------------------------------------------------------------ */

/* A missing session, made as session_create makes one without a title;
 * the row returned says this put made it. */
static const pg_sql SQL_CK_SESSION_ENSURE = { PG_ST_CK_SESSION_ENSURE, 4,
	"INSERT INTO sessions (app, \"user\", id, metadata, created_us, updated_us)"
	" VALUES ($1, $2, $3, '{}', $4::bigint, $4::bigint)"
	" ON CONFLICT (app, \"user\", id) DO NOTHING RETURNING 1" };
/* $6 parent, $7 type, $8 payload (binary), $9 metadata, $10 run state,
 * $11 now, $12 expiry. A stored id keeps created_us and its writes. The
 * session's foreign key makes a put into a missing session fail (23503,
 * MEMD_ENOTFOUND) and writes nothing. */
static const pg_sql SQL_CK_UPSERT = { PG_ST_CK_UPSERT, 12,
	"INSERT INTO checkpoints (app, \"user\", session, ns, id, parent_id, type, payload,"
	"  metadata, run_state, created_us, updated_us, expires_us)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8::bytea, $9, $10::integer, $11::bigint,"
	"  $11::bigint, $12::bigint)"
	" ON CONFLICT (app, \"user\", session, ns, id) DO UPDATE SET"
	"  parent_id = excluded.parent_id, type = excluded.type, payload = excluded.payload,"
	"  metadata = excluded.metadata, run_state = excluded.run_state,"
	"  updated_us = excluded.updated_us, expires_us = excluded.expires_us" };
/* A root checkpoint's head: $4 id, $5 run state, $6 expiry. The head
 * moves only to a greater id (or the same: its run state and expiry);
 * of two puts racing, the second waits on the head row for the first to
 * commit and compares with the id it left, so the greatest stays. */
static const pg_sql SQL_CK_HEAD_UPSERT = { PG_ST_CK_HEAD_UPSERT, 6,
	"INSERT INTO checkpoint_heads (app, \"user\", session, id, run_state, expires_us)"
	" VALUES ($1, $2, $3, $4, $5::integer, $6::bigint)"
	" ON CONFLICT (app, \"user\", session) DO UPDATE SET id = excluded.id,"
	"  run_state = excluded.run_state, expires_us = excluded.expires_us"
	" WHERE checkpoint_heads.id <= excluded.id" };

/* ---- put_writes ------------------------------------------------------ */

/* The checkpoint ($6: now), kept from being deleted until the
 * transaction ends; with a run state ($7), changed. No row: missing or
 * expired. */
static const pg_sql SQL_CK_LOCK = { PG_ST_CK_LOCK, 6,
	"SELECT 1 FROM checkpoints WHERE" CK_PK VISIBLE_AT("$6") " FOR KEY SHARE" };
static const pg_sql SQL_CK_RUN_STATE = { PG_ST_CK_RUN_STATE, 7,
	"UPDATE checkpoints SET run_state = $7::integer, updated_us = $6::bigint"
	" WHERE" CK_PK VISIBLE_AT("$6") " RETURNING 1" };
/* The head's run state, if the checkpoint $4 is the head. */
static const pg_sql SQL_CK_HEAD_RUN_STATE = { PG_ST_CK_HEAD_RUN_STATE, 5,
	"UPDATE checkpoint_heads SET run_state = $5::integer"
	" WHERE app = $1 AND \"user\" = $2 AND session = $3 AND id = $4" };
/* $6 task id, $7 idx, $8 channel, $9 type, $10 value (binary), $11 task
 * path. A kept write keeps its task path too; a replaced one takes the
 * new one. */
#define WRITE_INSERT \
	"INSERT INTO checkpoint_writes (app, \"user\", session, ns, checkpoint_id, task_id, idx," \
	"  channel, type, value, task_path)" \
	" VALUES ($1, $2, $3, $4, $5, $6, $7::bigint, $8, $9, $10::bytea, $11)" \
	" ON CONFLICT (app, \"user\", session, ns, checkpoint_id, task_id, idx)"
static const pg_sql SQL_CK_WRITE_KEEP = { PG_ST_CK_WRITE_KEEP, 11,
	WRITE_INSERT " DO NOTHING" };
static const pg_sql SQL_CK_WRITE_REPLACE = { PG_ST_CK_WRITE_REPLACE, 11,
	WRITE_INSERT " DO UPDATE SET channel = excluded.channel, type = excluded.type,"
	" value = excluded.value, task_path = excluded.task_path" };

/* ---- get -------------------------------------------------------------- */

static const pg_sql SQL_CK_GET = { PG_ST_CK_GET, 6,
	"SELECT " CK_COLS " FROM checkpoints WHERE" CK_PK VISIBLE_AT("$6") };
/* The namespace's greatest unexpired id ($5: now), down the primary key. */
#define LATEST_WHERE \
	" WHERE app = $1 AND \"user\" = $2 AND session = $3 AND ns = $4" VISIBLE_AT("$5")
#define LATEST_ID "(SELECT id FROM checkpoints" LATEST_WHERE " ORDER BY id DESC LIMIT 1)"
static const pg_sql SQL_CK_GET_LATEST = { PG_ST_CK_GET_LATEST, 5,
	"SELECT " CK_COLS " FROM checkpoints" LATEST_WHERE " ORDER BY id DESC LIMIT 1" };
static const pg_sql SQL_CK_WRITES = { PG_ST_CK_WRITES, 5,
	"SELECT " W_COLS " FROM checkpoint_writes WHERE" W_PK " ORDER BY " W_ORDER };
static const pg_sql SQL_CK_WRITES_LATEST = { PG_ST_CK_WRITES_LATEST, 5,
	"SELECT " W_COLS " FROM checkpoint_writes"
	" WHERE app = $1 AND \"user\" = $2 AND session = $3 AND ns = $4"
	" AND checkpoint_id = " LATEST_ID " ORDER BY " W_ORDER };

/* ---- list ------------------------------------------------------------- */

/* $1 app, $2 user, $3 now, $4 limit, then the filters: a user's
 * checkpoints (every session; $5 the namespace or NULL) down
 * checkpoints_by_user, one session's ($5) or one session's namespace
 * ($5, $6) down the primary key; then the keyset bound (id, session,
 * ns), whose "only ids < before_id" is (before_id, "", ""). The writes
 * statement of each lists the same checkpoints (the transaction is
 * REPEATABLE READ: one snapshot) and their writes, in the same order. */
#define L_USER " WHERE app = $1 AND \"user\" = $2" VISIBLE_AT("$3") \
	" AND ($5::text IS NULL OR ns = $5::text)"
#define L_SESSION " WHERE app = $1 AND \"user\" = $2" VISIBLE_AT("$3") " AND session = $5"
#define L_NS L_SESSION " AND ns = $6"
#define L_BEFORE(a, b, c) " AND (id, session, ns) < (" a "::text, " b "::text, " c "::text)"
#define L_ORDER " ORDER BY id DESC, session DESC, ns DESC LIMIT $4"
#define LIST(where) "SELECT " CK_COLS " FROM checkpoints" where L_ORDER
#define LIST_WRITES(where) \
	"SELECT w.session, w.ns, w.checkpoint_id, w.task_path, w.task_id, w.idx, w.channel," \
	"  w.type, w.value" \
	" FROM (SELECT session, ns, id FROM checkpoints" where L_ORDER ") l" \
	" JOIN checkpoint_writes w ON w.app = $1 AND w.\"user\" = $2 AND w.session = l.session" \
	"  AND w.ns = l.ns AND w.checkpoint_id = l.id" \
	" ORDER BY l.id DESC, l.session DESC, l.ns DESC, w.task_path, w.task_id, w.idx"
#define BEFORE_5 L_BEFORE("$6", "$7", "$8")
#define BEFORE_6 L_BEFORE("$7", "$8", "$9")

static const pg_sql SQL_CK_LIST_USER = { PG_ST_CK_LIST_USER, 5, LIST(L_USER) };
static const pg_sql SQL_CK_LIST_USER_BEFORE = { PG_ST_CK_LIST_USER_BEFORE, 8,
	LIST(L_USER BEFORE_5) };
static const pg_sql SQL_CK_LIST_SESSION = { PG_ST_CK_LIST_SESSION, 5, LIST(L_SESSION) };
static const pg_sql SQL_CK_LIST_SESSION_BEFORE = { PG_ST_CK_LIST_SESSION_BEFORE, 8,
	LIST(L_SESSION BEFORE_5) };
static const pg_sql SQL_CK_LIST_NS = { PG_ST_CK_LIST_NS, 6, LIST(L_NS) };
static const pg_sql SQL_CK_LIST_NS_BEFORE = { PG_ST_CK_LIST_NS_BEFORE, 9,
	LIST(L_NS BEFORE_6) };
static const pg_sql SQL_CK_LIST_WRITES_USER = { PG_ST_CK_LIST_WRITES_USER, 5,
	LIST_WRITES(L_USER) };
static const pg_sql SQL_CK_LIST_WRITES_USER_BEFORE = { PG_ST_CK_LIST_WRITES_USER_BEFORE, 8,
	LIST_WRITES(L_USER BEFORE_5) };
static const pg_sql SQL_CK_LIST_WRITES_SESSION = { PG_ST_CK_LIST_WRITES_SESSION, 5,
	LIST_WRITES(L_SESSION) };
static const pg_sql SQL_CK_LIST_WRITES_SESSION_BEFORE = {
	PG_ST_CK_LIST_WRITES_SESSION_BEFORE, 8, LIST_WRITES(L_SESSION BEFORE_5) };
static const pg_sql SQL_CK_LIST_WRITES_NS = { PG_ST_CK_LIST_WRITES_NS, 6,
	LIST_WRITES(L_NS) };
static const pg_sql SQL_CK_LIST_WRITES_NS_BEFORE = { PG_ST_CK_LIST_WRITES_NS_BEFORE, 9,
	LIST_WRITES(L_NS BEFORE_6) };

/* ---- delete, resumable, expire ---------------------------------------- */

/* The writes go with their checkpoints (foreign key). */
#define DELETE_COUNT(where) \
	"WITH d AS (DELETE FROM checkpoints WHERE app = $1 AND \"user\" = $2 AND session = $3" \
	where " RETURNING 1) SELECT count(*) FROM d"
static const pg_sql SQL_CK_DELETE_ALL = { PG_ST_CK_DELETE_ALL, 3, DELETE_COUNT("") };
static const pg_sql SQL_CK_DELETE_NS = { PG_ST_CK_DELETE_NS, 4, DELETE_COUNT(" AND ns = $4") };
static const pg_sql SQL_CK_HEAD_DELETE = { PG_ST_CK_HEAD_DELETE, 3,
	"DELETE FROM checkpoint_heads WHERE app = $1 AND \"user\" = $2 AND session = $3" };

/* The heads of app $1 whose run state's bit is in the mask $2 and that
 * are unexpired at $3, after the keyset ($4, $5; from the first: ("",
 * "")), up to $6, down the heads' primary key; each with its checkpoint
 * (no payload). */
static const pg_sql SQL_CK_RESUMABLE = { PG_ST_CK_RESUMABLE, 6,
	"SELECT " CK_COLS_OF("c.") " FROM checkpoint_heads h JOIN checkpoints c"
	"  ON c.app = h.app AND c.\"user\" = h.\"user\" AND c.session = h.session"
	"  AND c.ns = '' AND c.id = h.id"
	" WHERE h.app = $1 AND ($2::bigint >> h.run_state) & 1 = 1"
	" AND (h.expires_us = 0 OR h.expires_us > $3::bigint)"
	" AND (h.\"user\", h.session) > ($4::text, $5::text)"
	" ORDER BY h.\"user\", h.session LIMIT $6" };

/* Retention: up to $2 checkpoints of every scope expired at $1, the
 * oldest expiry first over checkpoints_by_expiry, chosen and locked once
 * by a materialized CTE (rows another transaction holds are skipped; the
 * lock re-checks the expiry on the newest version). Their writes go with
 * them (foreign key). A deleted head passes to the greatest root
 * checkpoint of its session that this statement leaves (its snapshot
 * still holds the deleted rows: d excludes them) and that no other
 * transaction is deleting (only a delete's lock conflicts with FOR KEY
 * SHARE: of two sweeps of one session, neither passes the head to a
 * checkpoint the other removes; the one it takes stays until this
 * commits), or goes; both only if the head is still the one deleted
 * (re-checked on the newest version of the head row: a put that moved it
 * meanwhile wins). The result is the count. */
#define SAME_SESSION(a, b) \
	a ".app = " b ".app AND " a ".\"user\" = " b ".\"user\" AND " a ".session = " b ".session"
static const pg_sql SQL_CK_EXPIRE = { PG_ST_CK_EXPIRE, 2,
	"WITH s AS MATERIALIZED (SELECT app, \"user\", session, ns, id FROM checkpoints"
	"   WHERE expires_us > 0 AND expires_us <= $1::bigint"
	"   ORDER BY expires_us, app, \"user\", session, ns, id LIMIT $2"
	"   FOR UPDATE SKIP LOCKED),"
	" d AS (DELETE FROM checkpoints c USING s WHERE " SAME_SESSION("c", "s")
	"   AND c.ns = s.ns AND c.id = s.id RETURNING c.app, c.\"user\", c.session, c.ns, c.id),"
	" h AS (SELECT h.app, h.\"user\", h.session, h.id AS old_id,"
	"   (SELECT r.id FROM checkpoints r WHERE " SAME_SESSION("r", "h") " AND r.ns = ''"
	"     AND NOT EXISTS (SELECT 1 FROM d x WHERE " SAME_SESSION("x", "r")
	"       AND x.ns = '' AND x.id = r.id)"
	"     ORDER BY r.id DESC LIMIT 1 FOR KEY SHARE SKIP LOCKED) AS new_id"
	"   FROM checkpoint_heads h JOIN d ON " SAME_SESSION("d", "h")
	"   AND d.ns = '' AND d.id = h.id),"
	" u AS (UPDATE checkpoint_heads t SET id = r.id, run_state = r.run_state,"
	"   expires_us = r.expires_us FROM h JOIN checkpoints r ON " SAME_SESSION("r", "h")
	"   AND r.ns = '' AND r.id = h.new_id"
	"   WHERE " SAME_SESSION("t", "h") " AND t.id = h.old_id),"
	" g AS (DELETE FROM checkpoint_heads t USING h WHERE h.new_id IS NULL"
	"   AND " SAME_SESSION("t", "h") " AND t.id = h.old_id)"
	" SELECT count(*) FROM d" };

/* ---- rows --------------------------------------------------------------- */

static int64_t bin_i64(const PGresult *res, int row, int col)
{
	uint64_t be = 0;

	if (PQgetisnull(res, row, col) || PQgetlength(res, row, col) != INT8_BYTES)
		return 0;
	memcpy(&be, PQgetvalue(res, row, col), INT8_BYTES);
	return (int64_t)be64toh(be);
}

/* A text column of a binary result (NULL for SQL NULL); libpq ends every
 * value with a zero byte. */
static const char *bin_text(const PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

/* Row `row` of a binary CK_COLS result into c (the payload when the
 * result has it). Strings and bytes are borrowed from res. */
static void ck_from_row(const PGresult *res, int row, memd_checkpoint *c)
{
	memset(c, 0, sizeof(*c));
	c->struct_size = sizeof(*c);
	c->app = bin_text(res, row, 0);
	c->user = bin_text(res, row, 1);
	c->session = bin_text(res, row, 2);
	c->ns = bin_text(res, row, 3);
	c->id = bin_text(res, row, 4);
	c->parent_id = bin_text(res, row, 5);
	c->type = bin_text(res, row, 6);
	c->metadata_json = bin_text(res, row, 7);
	c->run_state = (uint32_t)bin_i64(res, row, 8);
	c->created_us = bin_i64(res, row, 9);
	c->updated_us = bin_i64(res, row, 10);
	c->expires_us = bin_i64(res, row, 11);
	if (PQnfields(res) > CK_N_COLS) {
		c->payload = PQgetvalue(res, row, CK_N_COLS);
		c->payload_size = (uint64_t)PQgetlength(res, row, CK_N_COLS);
	}
}

/* Row `row` of a binary W_COLS result, from column col0: the write into
 * w, its task path (borrowed from res) into *task_path. */
static void write_from_row(const PGresult *res, int row, int col0, memd_checkpoint_write *w,
			   const char **task_path)
{
	memset(w, 0, sizeof(*w));
	w->struct_size = sizeof(*w);
	*task_path = bin_text(res, row, col0 + 0);
	w->task_id = bin_text(res, row, col0 + 1);
	w->idx = bin_i64(res, row, col0 + 2);
	w->channel = bin_text(res, row, col0 + 3);
	w->type = bin_text(res, row, col0 + 4);
	w->value = PQgetvalue(res, row, col0 + 5);
	w->value_size = (uint64_t)PQgetlength(res, row, col0 + 5);
}


static int32_t deliver(const memd_checkpoint_sink *out, const PGresult *res, int row,
		       memd_error *err)
{
	memd_checkpoint c;

	ck_from_row(res, row, &c);
	return pg_sink_result(out->checkpoint(out->userdata, &c), "checkpoint", err);
}

static int32_t deliver_write(const memd_checkpoint_sink *out, const PGresult *res, int row,
			     int col0, memd_error *err)
{
	memd_checkpoint_write w;
	const char *task_path;

	write_from_row(res, row, col0, &w, &task_path);
	return pg_sink_result(pu_sink_write(out, &w, task_path), "checkpoint write", err);
}

static int32_t not_found(const char *session, const char *ns, const char *id, memd_error *err)
{
	if (!id)
		return memd_error_set(err, MEMD_ENOTFOUND, 0,
				      "session '%.64s' has no checkpoint in namespace '%.64s'",
				      session, ns);
	return memd_error_set(err, MEMD_ENOTFOUND, 0,
			      "checkpoint '%.64s' of session '%.64s' (namespace '%.64s') not found",
			      id, session, ns);
}

/* ---- checks ------------------------------------------------------------- */

/* A namespace: "" (the root) or an id. */
static int32_t check_ns(const char *ns, memd_error *err)
{
	if (!ns)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint namespace is missing");
	return ns[0] ? pu_check_id("checkpoint namespace", ns, err) : 0;
}

/* Bytes of size (what names them) libpq can send: data unless empty. */
static int32_t check_bytes(const char *what, const void *data, uint64_t size, memd_error *err)
{
	if (size && !data)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s has a size but no bytes", what);
	if (size > (uint64_t)BYTES_MAX)
		return memd_error_set(err, MEMD_ETOOBIG, 0, "%s is over %d bytes", what, BYTES_MAX);
	return 0;
}

static int32_t check_checkpoint(const memd_checkpoint *c, memd_error *err)
{
	memd_scope scope;
	int32_t r;

	if (!c || !PG_HAS(c, expires_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint is missing");
	scope = (memd_scope){ .struct_size = sizeof(scope), .app = c->app, .user = c->user,
			      .session = c->session };
	r = pu_check_scope(&scope, 1, err);
	if (r == 0)
		r = check_ns(c->ns, err);
	if (r == 0)
		r = pu_check_id("checkpoint id", c->id, err);
	if (r == 0 && c->parent_id)
		r = pu_check_id("checkpoint parent_id", c->parent_id, err);
	if (r < 0)
		return r;
	if (!c->type)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint '%.64s' has no type", c->id);
	r = check_bytes("checkpoint payload", c->payload, c->payload_size, err);
	if (r == 0)
		r = pg_check_json_text_object("checkpoint metadata", c->metadata_json, err);
	if (r < 0)
		return r;
	if (c->run_state > MEMD_RUN_DONE)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint '%.64s': unknown run state %u",
				      c->id, (unsigned)c->run_state);
	if (c->expires_us < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "checkpoint '%.64s': expires_us must not be negative", c->id);
	return 0;
}

static int32_t check_writes(const memd_scope *scope, const memd_checkpoint_writes *w,
			    memd_error *err)
{
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!w || !PG_HAS(w, now_us))
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint writes are missing");
	r = check_ns(w->ns, err);
	if (r == 0)
		r = pu_check_id("checkpoint id", w->checkpoint_id, err);
	if (r < 0)
		return r;
	if (w->run_state > MEMD_RUN_DONE)
		return memd_error_set(err, MEMD_EINVAL, 0, "unknown run state %u",
				      (unsigned)w->run_state);
	if (w->n_writes && !w->writes)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint writes have no array");
	for (uint32_t i = 0; i < w->n_writes; i++) {
		const memd_checkpoint_write *e = &w->writes[i];
		r = pu_check_id("checkpoint write task_id", e->task_id, err);
		if (r < 0)
			return r;
		if (!e->channel || !e->type)
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "checkpoint write %u has no channel or type",
					      (unsigned)i);
		r = check_bytes("checkpoint write value", e->value, e->value_size, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- put ------------------------------------------------------------ */

typedef struct ck_ctx {
	pg_store *store;
	const memd_call *call;
	const memd_scope *scope;
	const memd_checkpoint *c;          /* put */
	int create_session;                /* put */
	int created;                       /* put: the session was made */
	const memd_checkpoint_writes *w;   /* put_writes */
	const char *ns, *id;               /* get, delete */
	int64_t now_us;                    /* put, get */
	const memd_checkpoint_query *q;    /* list */
	const memd_resumable_query *rq;    /* resumable */
	const memd_checkpoint_sink *out;
	uint32_t count;                    /* delete: how many */
} ck_ctx;

static int32_t put_once(pg_conn *c, void *ctx, memd_error *err)
{
	ck_ctx *x = ctx;
	const memd_checkpoint *k = x->c;
	uint32_t run_state = k->run_state ? k->run_state : MEMD_RUN_RUNNING;
	char now[PG_INT_BUF], exp[PG_INT_BUF], rs[PG_INT_BUF];
	const char *vals[12] = { k->app, k->user, k->session, k->ns, k->id, k->parent_id,
				 k->type, k->payload_size ? (const char *)k->payload : "",
				 k->metadata_json, pg_i64(rs, run_state), pg_i64(now, x->now_us),
				 pg_i64(exp, k->expires_us) };
	int lens[12] = { [7] = (int)k->payload_size };
	int fmts[12] = { [7] = BINARY };
	const char *session[4] = { k->app, k->user, k->session, now };
	const char *head[6] = { k->app, k->user, k->session, k->id, rs, exp };
	int32_t r = pg_send(c, &SQL_BEGIN, NULL, err);

	if (r == 0 && x->create_session)
		r = pg_send(c, &SQL_CK_SESSION_ENSURE, session, err);
	if (r == 0)
		r = pg_send_fmt(c, &SQL_CK_UPSERT, vals, lens, fmts, 0, err);
	if (r == 0 && strcmp(k->ns, ROOT_NS) == 0)
		r = pg_send(c, &SQL_CK_HEAD_UPSERT, head, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "store checkpoint", err);
	if (r == MEMD_ENOTFOUND)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				      k->session);
	if (r < 0)
		return r;
	x->created = x->create_session && PQntuples(pg_res(c, 1)) == 1;
	return 0;
}

int32_t pg_checkpoint_put(void *inst, const memd_call *call, const memd_checkpoint *c,
			  int create_session, int64_t now_us, int *ret_created_session,
			  memd_error *err)
{
	ck_ctx x = { .store = inst, .call = call, .c = c, .create_session = create_session,
		     .now_us = now_us };
	int32_t r = check_checkpoint(c, err);

	if (r == 0)
		r = pg_with_conn(inst, call, put_once, &x, err);
	if (r == 0 && ret_created_session)
		*ret_created_session = x.created;
	return r;
}

/* ---- put_writes ----------------------------------------------------- */

/* Round 1 locks (or changes the run state of) the checkpoint and, for a
 * root checkpoint's run state, its head; round 2 writes and commits, so a
 * missing or expired checkpoint gets nothing (pg_give rolls back). */
static int32_t writes_once(pg_conn *c, void *ctx, memd_error *err)
{
	ck_ctx *x = ctx;
	const memd_checkpoint_writes *w = x->w;
	const memd_scope *sc = x->scope;
	char now[PG_INT_BUF], rs[PG_INT_BUF];
	const char *key[7] = { sc->app, sc->user, sc->session, w->ns, w->checkpoint_id,
			       pg_i64(now, w->now_us), pg_i64(rs, w->run_state) };
	const char *head[5] = { sc->app, sc->user, sc->session, w->checkpoint_id, rs };
	int32_t r = pg_send(c, &SQL_BEGIN, NULL, err);

	if (r == 0)
		r = pg_send(c, w->run_state ? &SQL_CK_RUN_STATE : &SQL_CK_LOCK, key, err);
	if (r == 0 && w->run_state && strcmp(w->ns, ROOT_NS) == 0)
		r = pg_send(c, &SQL_CK_HEAD_RUN_STATE, head, err);
	if (r == 0)
		r = pg_run(c, "lock checkpoint", err);
	if (r < 0)
		return r;
	if (PQntuples(pg_res(c, 1)) != 1)
		return not_found(sc->session, w->ns, w->checkpoint_id, err);
	pg_reset(c);
	for (uint32_t i = 0; r == 0 && i < w->n_writes; i++) {
		const memd_checkpoint_write *e = &w->writes[i];
		char idx[PG_INT_BUF];
		const char *vals[11] = { sc->app, sc->user, sc->session, w->ns, w->checkpoint_id,
					 e->task_id, pg_i64(idx, e->idx), e->channel, e->type,
					 e->value_size ? (const char *)e->value : "",
					 pu_write_task_path(w, i) };
		int lens[11] = { [9] = (int)e->value_size };
		int fmts[11] = { [9] = BINARY };
		r = pg_send_fmt(c, (e->flags & MEMD_CKW_REPLACE) ? &SQL_CK_WRITE_REPLACE
								  : &SQL_CK_WRITE_KEEP,
				vals, lens, fmts, 0, err);
	}
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "store checkpoint writes", err);
	return r;
}

int32_t pg_checkpoint_put_writes(void *inst, const memd_call *call, const memd_scope *scope,
				 const memd_checkpoint_writes *w, memd_error *err)
{
	ck_ctx x = { .store = inst, .call = call, .scope = scope, .w = w };
	int32_t r = check_writes(scope, w, err);

	if (r < 0)
		return r;
	return pg_with_conn(inst, call, writes_once, &x, err);
}

/* ---- get ------------------------------------------------------------ */

static int32_t get_once(pg_conn *c, void *ctx, memd_error *err)
{
	ck_ctx *x = ctx;
	const memd_scope *sc = x->scope;
	char now[PG_INT_BUF];
	const char *by_id[6] = { sc->app, sc->user, sc->session, x->ns, x->id,
				 pg_i64(now, x->now_us) };
	const char *latest[5] = { sc->app, sc->user, sc->session, x->ns, now };
	const char *const *vals = x->id ? by_id : latest;
	int with_writes = pu_sink_wants_writes(x->out);
	const PGresult *res;
	int32_t r = pg_send(c, &SQL_BEGIN_READ, NULL, err);

	if (r == 0)
		r = pg_send_fmt(c, x->id ? &SQL_CK_GET : &SQL_CK_GET_LATEST, vals, NULL, NULL,
				BINARY, err);
	if (r == 0 && with_writes)
		r = pg_send_fmt(c, x->id ? &SQL_CK_WRITES : &SQL_CK_WRITES_LATEST, vals, NULL,
				NULL, BINARY, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "read checkpoint", err);
	if (r < 0)
		return r;
	res = pg_res(c, 1);
	if (PQntuples(res) != 1)
		return not_found(sc->session, x->ns, x->id, err);
	pu_rows_read(x->call, 1);
	r = deliver(x->out, res, 0, err);
	if (r == 0 && with_writes) {
		res = pg_res(c, 2);
		pu_rows_read(x->call, (uint64_t)PQntuples(res));
		for (int i = 0; r == 0 && i < PQntuples(res); i++)
			r = deliver_write(x->out, res, i, 0, err);
	}
	return r > 0 ? 0 : r;
}

int32_t pg_checkpoint_get(void *inst, const memd_call *call, const memd_scope *scope,
			  const char *ns, const char *id, int64_t now_us,
			  const memd_checkpoint_sink *out, memd_error *err)
{
	ck_ctx x = { .store = inst, .call = call, .scope = scope, .ns = ns, .id = id,
		     .now_us = now_us, .out = out };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r == 0)
		r = check_ns(ns, err);
	if (r == 0 && id)
		r = pu_check_id("checkpoint id", id, err);
	if (r < 0)
		return r;
	if (!out || !PG_HAS(out, write) || !out->checkpoint)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint sink is missing");
	return pg_with_conn(inst, call, get_once, &x, err);
}

/* ---- list ----------------------------------------------------------- */

/* The list and list-writes statements of q's filters and keyset. */
static void list_sql(const memd_checkpoint_query *q, const pg_sql **ret_list,
		     const pg_sql **ret_writes)
{
	int before = q->before_id != NULL;

	if (!q->session) {
		*ret_list = before ? &SQL_CK_LIST_USER_BEFORE : &SQL_CK_LIST_USER;
		*ret_writes = before ? &SQL_CK_LIST_WRITES_USER_BEFORE : &SQL_CK_LIST_WRITES_USER;
	} else if (!q->ns) {
		*ret_list = before ? &SQL_CK_LIST_SESSION_BEFORE : &SQL_CK_LIST_SESSION;
		*ret_writes = before ? &SQL_CK_LIST_WRITES_SESSION_BEFORE
				     : &SQL_CK_LIST_WRITES_SESSION;
	} else {
		*ret_list = before ? &SQL_CK_LIST_NS_BEFORE : &SQL_CK_LIST_NS;
		*ret_writes = before ? &SQL_CK_LIST_WRITES_NS_BEFORE : &SQL_CK_LIST_WRITES_NS;
	}
}

/* True when write row w of res (its key in columns 0..2) belongs to
 * checkpoint row k of list. */
static int write_of(const PGresult *res, int w, const PGresult *list, int k)
{
	static const int key_col[W_KEY_COLS] = { 2, 3, 4 }; /* session, ns, id in CK_COLS */

	for (int i = 0; i < W_KEY_COLS; i++)
		if (strcmp(bin_text(res, w, i), bin_text(list, k, key_col[i])) != 0)
			return 0;
	return 1;
}

static int32_t list_once(pg_conn *c, void *ctx, memd_error *err)
{
	ck_ctx *x = ctx;
	const memd_checkpoint_query *q = x->q;
	const memd_scope *sc = x->scope;
	char now[PG_INT_BUF], lim[PG_INT_BUF];
	const char *vals[9] = { sc->app, sc->user, pg_i64(now, q->now_us), pg_i64(lim, q->limit) };
	int n = 4, with_writes = pu_sink_wants_writes(x->out), w = 0;
	const pg_sql *list, *writes;
	const PGresult *res, *wres = NULL;
	int32_t r;

	list_sql(q, &list, &writes);
	if (!q->session) {
		vals[n++] = q->ns;
	} else {
		vals[n++] = q->session;
		if (q->ns)
			vals[n++] = q->ns;
	}
	if (q->before_id) {
		vals[n++] = q->before_id;
		vals[n++] = q->before_session ? q->before_session : KEYSET_FIRST;
		vals[n++] = q->before_session && q->before_ns ? q->before_ns : KEYSET_FIRST;
	}
	r = pg_send(c, &SQL_BEGIN_READ, NULL, err);
	if (r == 0)
		r = pg_send_fmt(c, list, vals, NULL, NULL, BINARY, err);
	if (r == 0 && with_writes)
		r = pg_send_fmt(c, writes, vals, NULL, NULL, BINARY, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "list checkpoints", err);
	if (r < 0)
		return r;
	res = pg_res(c, 1);
	if (with_writes)
		wres = pg_res(c, 2);
	pu_rows_read(x->call, (uint64_t)PQntuples(res) + (wres ? (uint64_t)PQntuples(wres) : 0));
	/* Both results are in the same order: each checkpoint's writes are
	 * the run of write rows carrying its key. */
	for (int i = 0; r == 0 && i < PQntuples(res); i++) {
		r = deliver(x->out, res, i, err);
		for (; r == 0 && wres && w < PQntuples(wres) && write_of(wres, w, res, i); w++)
			r = deliver_write(x->out, wres, w, W_KEY_COLS, err);
		if (r == 0 && (i + 1) % PG_CHECK_EVERY == 0)
			r = pg_call_check(x->store, x->call, err);
	}
	return r > 0 ? 0 : r;
}

int32_t pg_checkpoint_list(void *inst, const memd_call *call, const memd_scope *scope,
			   const memd_checkpoint_query *q, const memd_checkpoint_sink *out,
			   memd_error *err)
{
	ck_ctx x = { .store = inst, .call = call, .scope = scope, .q = q, .out = out };
	int32_t r = pu_check_scope(scope, 0, err);

	if (r < 0)
		return r;
	if (!q || !PG_HAS(q, now_us) || !out || !PG_HAS(out, write) || !out->checkpoint)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint query or sink is missing");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint list limit must be > 0");
	if (q->session)
		r = pu_check_id("session", q->session, err);
	if (r == 0 && q->ns)
		r = check_ns(q->ns, err);
	if (r == 0 && q->before_id)
		r = pu_check_id("before_id", q->before_id, err);
	if (r == 0 && q->before_id && q->before_session)
		r = pu_check_id("before_session", q->before_session, err);
	if (r == 0 && q->before_id && q->before_session && q->before_ns)
		r = check_ns(q->before_ns, err);
	if (r < 0)
		return r;
	return pg_with_conn(inst, call, list_once, &x, err);
}

/* ---- delete --------------------------------------------------------- */

/* The head goes first: a put of a root checkpoint that is committing
 * holds the head's row, so the head's delete waits for it, and the
 * checkpoints' delete after it (a statement with a newer snapshot) takes
 * that checkpoint too; a put that comes later waits for this delete on
 * the head's row and makes its checkpoint the head. Either way no root
 * checkpoint is left without a head. */
static int32_t delete_once(pg_conn *c, void *ctx, memd_error *err)
{
	ck_ctx *x = ctx;
	const char *vals[4] = { x->scope->app, x->scope->user, x->scope->session, x->ns };
	size_t count_at;
	int32_t r = pg_send(c, &SQL_BEGIN, NULL, err);

	if (r == 0 && (!x->ns || strcmp(x->ns, ROOT_NS) == 0))
		r = pg_send(c, &SQL_CK_HEAD_DELETE, vals, err);
	count_at = pg_n_queued(c);
	if (r == 0)
		r = pg_send(c, x->ns ? &SQL_CK_DELETE_NS : &SQL_CK_DELETE_ALL, vals, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "delete checkpoints", err);
	if (r == 0)
		x->count = (uint32_t)pg_get_i64(pg_res(c, count_at), 0, 0);
	return r;
}

int32_t pg_checkpoint_delete(void *inst, const memd_call *call, const memd_scope *scope,
			     const char *ns, uint32_t *ret_count, memd_error *err)
{
	ck_ctx x = { .store = inst, .call = call, .scope = scope, .ns = ns };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r == 0 && ns)
		r = check_ns(ns, err);
	if (r == 0)
		r = pg_with_conn(inst, call, delete_once, &x, err);
	if (r == 0 && ret_count)
		*ret_count = x.count;
	return r;
}

/* ---- resumable, expire ------------------------------------------------ */

static int32_t resumable_once(pg_conn *c, void *ctx, memd_error *err)
{
	ck_ctx *x = ctx;
	const memd_resumable_query *q = x->rq;
	char mask[PG_INT_BUF], now[PG_INT_BUF], lim[PG_INT_BUF];
	const char *vals[6] = { q->app, pg_i64(mask, q->run_states), pg_i64(now, q->now_us),
				q->after_user ? q->after_user : KEYSET_FIRST,
				q->after_user && q->after_session ? q->after_session
								  : KEYSET_FIRST,
				pg_i64(lim, q->limit) };
	const PGresult *res;
	int32_t r = pg_send_fmt(c, &SQL_CK_RESUMABLE, vals, NULL, NULL, BINARY, err);

	if (r == 0)
		r = pg_run(c, "list resumable sessions", err);
	if (r < 0)
		return r;
	res = pg_res(c, 0);
	pu_rows_read(x->call, (uint64_t)PQntuples(res));
	for (int i = 0; r == 0 && i < PQntuples(res); i++)
		r = deliver(x->out, res, i, err);
	return r > 0 ? 0 : r;
}

int32_t pg_checkpoint_resumable(void *inst, const memd_call *call,
				const memd_resumable_query *q, const memd_checkpoint_sink *out,
				memd_error *err)
{
	ck_ctx x = { .store = inst, .call = call, .rq = q, .out = out };
	int32_t r;

	if (!q || !PG_HAS(q, after_session) || !out || !out->checkpoint)
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
	return pg_with_conn(inst, call, resumable_once, &x, err);
}

int32_t pg_checkpoint_expire(void *inst, const memd_call *call, int64_t now_us, uint32_t limit,
			     uint32_t *ret_count, memd_error *err)
{
	return pg_expire(inst, call, &SQL_CK_EXPIRE, "expire checkpoints", now_us, limit, ret_count,
			 err);
}
