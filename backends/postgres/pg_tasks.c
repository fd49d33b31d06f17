/* SPDX-License-Identifier: MIT */
#include "pg_tasks.h"

#include <stdint.h>
#include <string.h>

#include "plugin_util.h"

#define KEYSET_FIRST "" /* sorts before every id: (t, "") bounds below t */
#define TASK_FLAGS_KNOWN MEMD_TASK_CREATE

static const pg_sql SQL_BEGIN = { PG_ST_BEGIN, 0, "BEGIN" };
static const pg_sql SQL_COMMIT = { PG_ST_COMMIT, 0, "COMMIT" };

/* The columns every query that delivers a task selects, in the order
 * task_from_row reads them. */
#define TASK_COLS "app, id, context_id, \"user\", state, task, created_us, updated_us, version"
#define TASK_PK " app = $1 AND id = $2"

/* task_put's first round: the row locked until the transaction ends, so
 * that the checks made on it hold for the write (of two puts expecting
 * one version, the second waits here for the first to commit and then
 * reads the version it left). A task that does not exist yet locks
 * nothing: of two inserts the second finds the first's row on its key
 * (ON CONFLICT DO NOTHING waits for it) and inserts nothing. */
static const pg_sql SQL_TASK_LOCK = { PG_ST_TASK_LOCK, 2,
	"SELECT version, state FROM tasks WHERE" TASK_PK " FOR UPDATE" };
/* $3 context id, $4 user, $5 state, $6 task, $7 now. */
static const pg_sql SQL_TASK_INSERT = { PG_ST_TASK_INSERT, 7,
	"INSERT INTO tasks (" TASK_COLS ")"
	" VALUES ($1, $2, $3, $4, $5, $6, $7::bigint, $7::bigint, 1)"
	" ON CONFLICT (app, id) DO NOTHING RETURNING " TASK_COLS };
static const pg_sql SQL_TASK_UPDATE = { PG_ST_TASK_UPDATE, 7,
	"UPDATE tasks SET context_id = $3, \"user\" = $4, state = $5, task = $6,"
	" updated_us = $7::bigint, version = version + 1"
	" WHERE" TASK_PK " RETURNING " TASK_COLS };
static const pg_sql SQL_TASK_GET = { PG_ST_TASK_GET, 2,
	"SELECT " TASK_COLS " FROM tasks WHERE" TASK_PK };
/* Newest update first, walking tasks_by_updated (or, with a context id,
 * tasks_by_context) down from the keyset bound ($4, $5; the caller's
 * "from the newest" is (INT64_MAX, "")) to the limit ($6); the state ($2)
 * and user ($3) filters (NULL = any) are checked on the rows of that
 * walk. */
#define LIST_WHERE \
	" WHERE app = $1 AND ($2::text IS NULL OR state = $2::text)" \
	" AND ($3::text IS NULL OR \"user\" = $3::text)" \
	" AND (updated_us, id) < ($4::bigint, $5::text)"
#define LIST_ORDER " ORDER BY updated_us DESC, id DESC LIMIT $6"
static const pg_sql SQL_TASK_LIST = { PG_ST_TASK_LIST, 6,
	"SELECT " TASK_COLS " FROM tasks" LIST_WHERE LIST_ORDER };
static const pg_sql SQL_TASK_LIST_CONTEXT = { PG_ST_TASK_LIST_CONTEXT, 7,
	"SELECT " TASK_COLS " FROM tasks" LIST_WHERE " AND context_id = $7" LIST_ORDER };
/* $3 the expected version (0 = any). The DELETE's condition is checked on
 * the newest version of the row (a concurrent put is waited for); the
 * read beside it sees the row as the statement began, to tell a missing
 * task from a version that differs. */
static const pg_sql SQL_TASK_DELETE = { PG_ST_TASK_DELETE, 3,
	"WITH d AS (DELETE FROM tasks WHERE" TASK_PK
	"   AND ($3::bigint = 0 OR version = $3::bigint) RETURNING 1)"
	" SELECT (SELECT count(*) FROM d), (SELECT version FROM tasks WHERE" TASK_PK ")" };

static void task_from_row(const PGresult *res, int row, memd_task *t)
{
	memset(t, 0, sizeof(*t));
	t->struct_size = sizeof(*t);
	t->app = pg_get_text(res, row, 0);
	t->id = pg_get_text(res, row, 1);
	t->context_id = pg_get_text(res, row, 2);
	t->user = pg_get_text(res, row, 3);
	t->state = pg_get_text(res, row, 4);
	t->task_json = pg_get_text(res, row, 5);
	t->created_us = pg_get_i64(res, row, 6);
	t->updated_us = pg_get_i64(res, row, 7);
	t->version = pg_get_i64(res, row, 8);
}

static int32_t deliver(const memd_task_sink *out, const PGresult *res, int row, memd_error *err)
{
	memd_task t;

	if (!out || !out->task)
		return 0;
	task_from_row(res, row, &t);
	return pg_sink_result(out->task(out->userdata, &t), "task", err);
}

static int32_t not_found(const char *id, memd_error *err)
{
	return memd_error_set(err, MEMD_ENOTFOUND, 0, "task '%.64s' not found", id);
}

/* A2A's terminal states: a task in one never leaves it. */
static int is_terminal(const char *state)
{
	static const char *const terminal[] = { "completed", "canceled", "failed", "rejected" };

	for (size_t i = 0; i < sizeof(terminal) / sizeof(terminal[0]); i++)
		if (strcmp(state, terminal[i]) == 0)
			return 1;
	return 0;
}

static int32_t check_task(const memd_task *t, uint32_t flags, int64_t expected_version,
			  memd_error *err)
{
	int32_t r;

	if (!t || !PG_HAS(t, version))
		return memd_error_set(err, MEMD_EINVAL, 0, "task is missing");
	r = pu_check_id("app", t->app, err);
	if (r == 0)
		r = pu_check_id("task id", t->id, err);
	if (r == 0)
		r = pu_check_id("task context_id", t->context_id, err);
	if (r == 0 && t->user)
		r = pu_check_id("task user", t->user, err);
	if (r < 0)
		return r;
	if (!t->state || !t->state[0])
		return memd_error_set(err, MEMD_EINVAL, 0, "task '%.64s' has no state", t->id);
	r = pg_check_json_text_object("task", t->task_json, err);
	if (r < 0)
		return r;
	if (flags & ~TASK_FLAGS_KNOWN)
		return memd_error_set(err, MEMD_EINVAL, 0, "task put has unknown flags 0x%x",
				      (unsigned)flags);
	if (expected_version < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "task '%.64s': expected version must not be negative", t->id);
	return 0;
}

/* ---- put ------------------------------------------------------------ */

typedef struct task_ctx {
	pg_store *store;
	const memd_call *call;
	const memd_task *t;
	uint32_t flags;
	int64_t expected_version;
	int64_t now_us;
	const char *app, *id;        /* get, delete */
	const memd_task_query *q;    /* list */
	const memd_task_sink *out;
} task_ctx;

/* The verdict of store.h's checks, in its order, on the row round 1
 * read (exists: whether there is one; version and state: its). */
static int32_t put_check(const task_ctx *x, int exists, int64_t version, const char *state,
			 memd_error *err)
{
	const memd_task *t = x->t;

	if (exists && (x->flags & MEMD_TASK_CREATE))
		return memd_error_set(err, MEMD_ECONFLICT, 0, "task '%.64s' exists", t->id);
	if (!exists && x->expected_version)
		return not_found(t->id, err);
	if (exists && x->expected_version && x->expected_version != version)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "task '%.64s' is at version %lld, not the expected %lld",
				      t->id, (long long)version, (long long)x->expected_version);
	if (exists && is_terminal(state) && strcmp(state, t->state) != 0)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "task '%.64s' is %.32s, a terminal state: it cannot become "
				      "%.32s", t->id, state, t->state);
	return 0;
}

/* One transaction: lock and check, then insert or update and commit.
 * *ret_lost is set when the insert found a task another put created
 * since the lock (the transaction wrote nothing): the caller starts over,
 * and the next round finds the row. */
static int32_t put_round(pg_conn *c, task_ctx *x, int *ret_lost, memd_error *err)
{
	const memd_task *t = x->t;
	char now[PG_INT_BUF];
	const char *vals[7] = { t->app, t->id, t->context_id, t->user, t->state, t->task_json,
				pg_i64(now, x->now_us) };
	int exists;
	int32_t r = pg_send(c, &SQL_BEGIN, NULL, err);

	*ret_lost = 0;
	if (r == 0)
		r = pg_send(c, &SQL_TASK_LOCK, vals, err);
	if (r == 0)
		r = pg_run(c, "lock task", err);
	if (r < 0)
		return r;
	exists = PQntuples(pg_res(c, 1)) == 1;
	r = put_check(x, exists, exists ? pg_get_i64(pg_res(c, 1), 0, 0) : 0,
		      exists ? pg_get_text(pg_res(c, 1), 0, 1) : NULL, err);
	/* Refused: nothing was written, and pg_give rolls back. */
	if (r < 0)
		return r;
	pg_reset(c);
	r = pg_send(c, exists ? &SQL_TASK_UPDATE : &SQL_TASK_INSERT, vals, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "store task", err);
	if (r < 0)
		return r;
	if (PQntuples(pg_res(c, 0)) != 1) {
		if (exists)
			return memd_error_set(err, MEMD_EINTERNAL, 0,
					      "postgres: task '%.64s' was locked but not written",
					      t->id);
		*ret_lost = 1;
		return 0;
	}
	pu_rows_read(x->call, 1);
	r = deliver(x->out, pg_res(c, 0), 0, err);
	return r > 0 ? 0 : r;
}

static int32_t put_once(pg_conn *c, void *ctx, memd_error *err)
{
	task_ctx *x = ctx;

	for (int attempt = 1;; attempt++) {
		int lost = 0;
		int32_t r = put_round(c, x, &lost, err);

		if (r < 0 || !lost)
			return r;
		pg_reset(c);
		/* Created meanwhile: a create-only put lost; any other put
		 * starts over on the row (a task deleted and created again
		 * each time gives up after PG_ATTEMPTS). */
		if ((x->flags & MEMD_TASK_CREATE) || attempt >= PG_ATTEMPTS)
			return memd_error_set(err, MEMD_ECONFLICT, 0, "task '%.64s' exists",
					      x->t->id);
	}
}

int32_t pg_task_put(void *inst, const memd_call *call, const memd_task *t, uint32_t flags,
		    int64_t expected_version, int64_t now_us, const memd_task_sink *out,
		    memd_error *err)
{
	task_ctx x = { .store = inst, .call = call, .t = t, .flags = flags,
		       .expected_version = expected_version, .now_us = now_us, .out = out };
	int32_t r = check_task(t, flags, expected_version, err);

	if (r < 0)
		return r;
	return pg_with_conn(inst, call, put_once, &x, err);
}

/* ---- get, list ---------------------------------------------------------- */

static int32_t get_once(pg_conn *c, void *ctx, memd_error *err)
{
	task_ctx *x = ctx;
	const char *vals[2] = { x->app, x->id };
	int32_t r = pg_send(c, &SQL_TASK_GET, vals, err);

	if (r == 0)
		r = pg_run(c, "read task", err);
	if (r < 0)
		return r;
	if (PQntuples(pg_res(c, 0)) < 1)
		return not_found(x->id, err);
	pu_rows_read(x->call, 1);
	r = deliver(x->out, pg_res(c, 0), 0, err);
	return r > 0 ? 0 : r;
}

int32_t pg_task_get(void *inst, const memd_call *call, const char *app, const char *id,
		    const memd_task_sink *out, memd_error *err)
{
	task_ctx x = { .store = inst, .call = call, .app = app, .id = id, .out = out };
	int32_t r = pu_check_id("app", app, err);

	if (r == 0)
		r = pu_check_id("task id", id, err);
	if (r < 0)
		return r;
	if (!out || !out->task)
		return memd_error_set(err, MEMD_EINVAL, 0, "task sink is missing");
	return pg_with_conn(inst, call, get_once, &x, err);
}

static int32_t list_once(pg_conn *c, void *ctx, memd_error *err)
{
	task_ctx *x = ctx;
	const memd_task_query *q = x->q;
	char before[PG_INT_BUF], lim[PG_INT_BUF];
	int keyset = q->before_updated_us != 0;
	const char *vals[7] = { q->app, q->state, q->user,
				pg_i64(before, keyset ? q->before_updated_us : INT64_MAX),
				/* No id: every task updated at that instant is "after". */
				keyset && q->before_id ? q->before_id : KEYSET_FIRST,
				pg_i64(lim, q->limit), q->context_id };
	PGresult *res;
	int32_t r = pg_send(c, q->context_id ? &SQL_TASK_LIST_CONTEXT : &SQL_TASK_LIST, vals, err);

	if (r == 0)
		r = pg_run(c, "list tasks", err);
	if (r < 0)
		return r;
	res = pg_res(c, 0);
	pu_rows_read(x->call, (uint64_t)PQntuples(res));
	for (int i = 0; r == 0 && i < PQntuples(res); i++)
		r = deliver(x->out, res, i, err);
	return r > 0 ? 0 : r;
}

int32_t pg_task_list(void *inst, const memd_call *call, const memd_task_query *q,
		     const memd_task_sink *out, memd_error *err)
{
	task_ctx x = { .store = inst, .call = call, .q = q, .out = out };
	int32_t r;

	if (!q || !PG_HAS(q, before_id) || !out || !out->task)
		return memd_error_set(err, MEMD_EINVAL, 0, "task query or sink is missing");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "task list limit must be > 0");
	r = pu_check_id("app", q->app, err);
	if (r == 0 && q->context_id)
		r = pu_check_id("task context_id", q->context_id, err);
	if (r == 0 && q->user)
		r = pu_check_id("task user", q->user, err);
	if (r == 0 && q->before_updated_us && q->before_id)
		r = pu_check_id("before_id", q->before_id, err);
	if (r < 0)
		return r;
	return pg_with_conn(inst, call, list_once, &x, err);
}

/* ---- delete ------------------------------------------------------------- */

static int32_t delete_once(pg_conn *c, void *ctx, memd_error *err)
{
	task_ctx *x = ctx;
	char exp[PG_INT_BUF];
	const char *vals[3] = { x->app, x->id, pg_i64(exp, x->expected_version) };
	const PGresult *res;
	int32_t r = pg_send(c, &SQL_TASK_DELETE, vals, err);

	if (r == 0)
		r = pg_run(c, "delete task", err);
	if (r < 0)
		return r;
	res = pg_res(c, 0);
	if (pg_get_i64(res, 0, 0) == 1)
		return 0;
	/* Missing, or (at the version expected) deleted meanwhile. */
	if (PQgetisnull(res, 0, 1) || !x->expected_version ||
	    pg_get_i64(res, 0, 1) == x->expected_version)
		return not_found(x->id, err);
	return memd_error_set(err, MEMD_ECONFLICT, 0,
			      "task '%.64s' is at version %lld, not the expected %lld", x->id,
			      (long long)pg_get_i64(res, 0, 1), (long long)x->expected_version);
}

int32_t pg_task_delete(void *inst, const memd_call *call, const char *app, const char *id,
		       int64_t expected_version, memd_error *err)
{
	task_ctx x = { .store = inst, .call = call, .app = app, .id = id,
		       .expected_version = expected_version };
	int32_t r = pu_check_id("app", app, err);

	if (r == 0)
		r = pu_check_id("task id", id, err);
	if (r < 0)
		return r;
	if (expected_version < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "task '%.64s': expected version must not be negative", id);
	return pg_with_conn(inst, call, delete_once, &x, err);
}
