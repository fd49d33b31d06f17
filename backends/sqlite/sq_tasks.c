/* SPDX-License-Identifier: MIT */
#include "sq_tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_util.h"
#include "sq_group.h"

/* Every query that delivers a task selects these columns, in the order
 * task_from_row reads them. */
#define TASK_COLS \
	"app, id, context_id, user, state, task, created_us, updated_us, version"

static const sq_sql SQL_TASK_GET = { SQ_ST_TASK_GET,
	"SELECT " TASK_COLS " FROM tasks WHERE app = ?1 AND id = ?2" };
static const sq_sql SQL_TASK_HEAD = { SQ_ST_TASK_HEAD,
	"SELECT version, state FROM tasks WHERE app = ?1 AND id = ?2" };
static const sq_sql SQL_TASK_INSERT = { SQ_ST_TASK_INSERT,
	"INSERT INTO tasks (" TASK_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, 1)" };
/* Every column but created_us. */
static const sq_sql SQL_TASK_UPDATE = { SQ_ST_TASK_UPDATE,
	"UPDATE tasks SET context_id = ?3, user = ?4, state = ?5, task = ?6, updated_us = ?7,"
	" version = version + 1 WHERE app = ?1 AND id = ?2" };
static const sq_sql SQL_TASK_DELETE = { SQ_ST_TASK_DELETE,
	"DELETE FROM tasks WHERE app = ?1 AND id = ?2" };
static const sq_sql SQL_SESSION_TASKS_DELETE = { SQ_ST_SESSION_TASKS_DELETE,
	"DELETE FROM tasks INDEXED BY tasks_by_user"
	" WHERE app = ?1 AND user = ?2 AND context_id = ?3" };
static const sq_sql SQL_USER_TASKS_DELETE = { SQ_ST_USER_TASKS_DELETE,
	"DELETE FROM tasks INDEXED BY tasks_by_user WHERE app = ?1 AND user = ?2" };

/* Listings, newest update first: ?1 app, ?2 limit, ?3 context id, ?4
 * state, ?5 user (NULL: any), ?6/?7 the keyset (before_updated_us,
 * before_id). A context id walks tasks_by_context, else tasks_by_updated. */
#define TASK_FILTERS \
	" AND (?3 IS NULL OR context_id = ?3) AND (?4 IS NULL OR state = ?4)" \
	" AND (?5 IS NULL OR user = ?5)"
#define TASK_KEYSET " AND (updated_us, id) < (?6, ?7)"
#define TASK_ORDER " ORDER BY updated_us DESC, id DESC LIMIT ?2"
#define TASK_LIST_APP \
	"SELECT " TASK_COLS " FROM tasks INDEXED BY tasks_by_updated WHERE app = ?1" TASK_FILTERS
#define TASK_LIST_CONTEXT \
	"SELECT " TASK_COLS " FROM tasks INDEXED BY tasks_by_context" \
	" WHERE app = ?1 AND context_id = ?3" TASK_FILTERS
static const sq_sql SQL_TASK_LIST = { SQ_ST_TASK_LIST, TASK_LIST_APP TASK_ORDER };
static const sq_sql SQL_TASK_LIST_BEFORE = { SQ_ST_TASK_LIST_BEFORE,
	TASK_LIST_APP TASK_KEYSET TASK_ORDER };
static const sq_sql SQL_TASK_LIST_CONTEXT = { SQ_ST_TASK_LIST_CONTEXT,
	TASK_LIST_CONTEXT TASK_ORDER };
static const sq_sql SQL_TASK_LIST_CONTEXT_BEFORE = { SQ_ST_TASK_LIST_CONTEXT_BEFORE,
	TASK_LIST_CONTEXT TASK_KEYSET TASK_ORDER };

/* The states a task never leaves (store.h). */
static const char *const terminal_states[] = { "completed", "canceled", "failed", "rejected" };

static int is_terminal(const char *state)
{
	for (size_t i = 0; i < sizeof(terminal_states) / sizeof(terminal_states[0]); i++)
		if (strcmp(state, terminal_states[i]) == 0)
			return 1;
	return 0;
}

/* ---- rows and copies -------------------------------------------------- */

/* Fill t from the TASK_COLS of st's current row. Strings are borrowed
 * from st until its next step or reset. */
static void task_from_row(sqlite3_stmt *st, memd_task *t)
{
	memset(t, 0, sizeof(*t));
	t->struct_size = sizeof(*t);
	t->app = sq_col_text(st, 0);
	t->id = sq_col_text(st, 1);
	t->context_id = sq_col_text(st, 2);
	t->user = sq_col_text(st, 3);
	t->state = sq_col_text(st, 4);
	t->task_json = sq_col_text(st, 5);
	t->created_us = sqlite3_column_int64(st, 6);
	t->updated_us = sqlite3_column_int64(st, 7);
	t->version = sqlite3_column_int64(st, 8);
}

/* A task read inside a write transaction, kept until it commits: the
 * caller's sink sees it only once it is durable. */
typedef struct task_copy {
	memd_task t;
	char *buf;               /* the strings of t */
} task_copy;

static void task_copy_free(task_copy *c)
{
	free(c->buf);
	memset(c, 0, sizeof(*c));
}

static int32_t task_copy_make(const memd_task *t, task_copy *c, memd_error *err)
{
	const char **const slots[] = { &c->t.app, &c->t.id, &c->t.context_id, &c->t.user,
				       &c->t.state, &c->t.task_json };
	int32_t r;

	task_copy_free(c);
	c->t = *t;
	if ((r = pu_copy_strings(slots, sizeof(slots) / sizeof(slots[0]), &c->buf, err)) < 0)
		memset(c, 0, sizeof(*c));
	return r;
}

static int bind_key(sqlite3_stmt *st, const char *app, const char *id)
{
	int rc = sq_bind_text(st, 1, app);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 2, id);
	return rc;
}

/* What a write needs to know of a stored task. */
typedef struct task_head {
	int64_t version;            /* 0: absent */
	char state[MEMD_ID_MAX + 1];
} task_head;

/* Read the version and state of task (app, id) on c into *ret (version 0
 * when there is no such task). */
static int32_t head_read(sq_conn *c, const char *app, const char *id, task_head *ret,
			 memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_TASK_HEAD, &st, err);
	int rc;

	if (r < 0)
		return r;
	memset(ret, 0, sizeof(*ret));
	rc = bind_key(st, app, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *state = sq_col_text(st, 1);
		ret->version = sqlite3_column_int64(st, 0);
		snprintf(ret->state, sizeof(ret->state), "%s", state ? state : "");
	} else if (rc != SQLITE_DONE) {
		r = sq_fail(c, rc, err, "read task '%.64s'", id);
	}
	sq_stmt_done(st);
	return r;
}

/* Read task (app, id) on c into *ret (a copy). */
static int32_t task_read(sq_conn *c, const char *app, const char *id, task_copy *ret,
			 memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_TASK_GET, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = bind_key(st, app, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		memd_task t;
		task_from_row(st, &t);
		r = task_copy_make(&t, ret, err);
	} else if (rc == SQLITE_DONE) {
		r = memd_error_set(err, MEMD_EINTERNAL, 0,
				   "sqlite: task '%.64s' vanished inside its transaction", id);
	} else {
		r = sq_fail(c, rc, err, "read task '%.64s'", id);
	}
	sq_stmt_done(st);
	return r;
}

/* ---- task_put --------------------------------------------------------- */

typedef struct put_job {
	const memd_task *t;
	uint32_t flags;
	int64_t expected_version;
	int64_t now_us;
	task_copy stored;           /* what the sink will see */
} put_job;

/* store.h's order: create-only, then the version, then a terminal state
 * that would be left. */
static int32_t put_check(const put_job *j, const task_head *h, memd_error *err)
{
	const memd_task *t = j->t;

	if ((j->flags & MEMD_TASK_CREATE) && h->version)
		return memd_error_set(err, MEMD_ECONFLICT, 0, "task '%.64s' exists", t->id);
	if (j->expected_version && !h->version)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "task '%.64s' not found", t->id);
	if (j->expected_version && j->expected_version != h->version)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "task '%.64s' is at version %lld, not the expected %lld",
				      t->id, (long long)h->version, (long long)j->expected_version);
	if (h->version && is_terminal(h->state) && strcmp(h->state, t->state) != 0)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "task '%.64s' is %s, a final state: it cannot become %.64s",
				      t->id, h->state, t->state);
	return 0;
}

static int32_t put_apply(sq_conn *c, void *ctx, memd_error *err)
{
	put_job *j = ctx;
	const memd_task *t = j->t;
	sqlite3_stmt *st = NULL;
	task_head h;
	int32_t r = head_read(c, t->app, t->id, &h, err);
	int rc;

	if (r == 0)
		r = put_check(j, &h, err);
	if (r == 0)
		r = sq_stmt(c, h.version ? &SQL_TASK_UPDATE : &SQL_TASK_INSERT, &st, err);
	if (r < 0)
		return r;
	rc = bind_key(st, t->app, t->id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 3, t->context_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, t->user);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 5, t->state);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 6, t->task_json);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 7, j->now_us);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "%s task '%.64s'", h.version ? "update" : "insert", t->id);
	sq_stmt_done(st);
	if (r == 0)
		r = task_read(c, t->app, t->id, &j->stored, err);
	return r;
}

static int32_t check_task(const memd_task *t, memd_error *err)
{
	int32_t r;

	if (!t || t->struct_size < sizeof(*t))
		return memd_error_set(err, MEMD_EINVAL, 0, "task is missing or short");
	r = pu_check_id("app", t->app, err);
	if (r == 0)
		r = pu_check_id("task id", t->id, err);
	if (r == 0)
		r = pu_check_id("task context id", t->context_id, err);
	if (r == 0 && t->user)
		r = pu_check_id("task user", t->user, err);
	if (r == 0)
		r = pu_check_id("task state", t->state, err);
	if (r == 0)
		r = sq_check_json_object("task", t->task_json, err);
	return r;
}

int32_t sq_task_put(void *inst, const memd_call *call, const memd_task *t, uint32_t flags,
		    int64_t expected_version, int64_t now_us, const memd_task_sink *out,
		    memd_error *err)
{
	put_job job = { .t = t, .flags = flags, .expected_version = expected_version,
			.now_us = now_us };
	int32_t r = check_task(t, err);

	if (r == 0 && expected_version < 0)
		r = memd_error_set(err, MEMD_EINVAL, 0, "task '%.64s' expects negative version %lld",
				   t->id, (long long)expected_version);
	if (r < 0)
		return r;
	r = sq_group_write(inst, call, put_apply, &job, 1, err);
	/* out is optional: a caller that keeps nothing passes NULL. */
	if (r == 0 && out && out->task)
		r = sq_sink_result(out->task(out->userdata, &job.stored.t), "task", err);
	task_copy_free(&job.stored);
	return r > 0 ? 0 : r;
}

/* ---- reads ------------------------------------------------------------ */

/* sq_row_fn of the task reads: the task of st's current row to ud, a
 * const memd_task_sink *. */
static int32_t task_row(sqlite3_stmt *st, void *ud, memd_error *err)
{
	const memd_task_sink *out = ud;
	memd_task t;

	task_from_row(st, &t);
	return sq_sink_result(out->task(out->userdata, &t), "task", err);
}

int32_t sq_task_get(void *inst, const memd_call *call, const char *app, const char *id,
		    const memd_task_sink *out, memd_error *err)
{
	sq_store *store = inst;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	uint64_t rows = 0;
	int32_t r = pu_check_id("app", app, err);
	int rc;

	if (r == 0)
		r = pu_check_id("task id", id, err);
	if (r == 0 && (!out || !out->task))
		r = memd_error_set(err, MEMD_EINVAL, 0, "task sink is missing");
	if (r < 0)
		return r;
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_stmt(c, &SQL_TASK_GET, &st, err);
	if (r < 0)
		goto out;
	rc = bind_key(st, app, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		rows = 1;
		r = task_row(st, (void *)out, err);
	} else if (rc == SQLITE_DONE) {
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "task '%.64s' not found", id);
	} else {
		r = sq_fail(c, rc, err, "read task '%.64s'", id);
	}
	sq_count_rows(call, st, rows);
out:
	sq_stmt_done(st);
	sq_read_end(store, c);
	return r > 0 ? 0 : r;
}

int32_t sq_task_list(void *inst, const memd_call *call, const memd_task_query *q,
		     const memd_task_sink *out, memd_error *err)
{
	sq_store *store = inst;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	const sq_sql *sql;
	int before;
	int32_t r;
	int rc;

	if (!q || q->struct_size < sizeof(*q))
		return memd_error_set(err, MEMD_EINVAL, 0, "task query is missing or short");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "task list limit must be > 0");
	r = pu_check_id("app", q->app, err);
	if (r == 0 && (!out || !out->task))
		r = memd_error_set(err, MEMD_EINVAL, 0, "task sink is missing");
	if (r < 0)
		return r;
	before = q->before_updated_us != 0;
	if (q->context_id)
		sql = before ? &SQL_TASK_LIST_CONTEXT_BEFORE : &SQL_TASK_LIST_CONTEXT;
	else
		sql = before ? &SQL_TASK_LIST_BEFORE : &SQL_TASK_LIST;
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_stmt(c, sql, &st, err);
	if (r < 0)
		goto out;
	rc = sq_bind_text(st, 1, q->app);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 2, q->limit);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 3, q->context_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, q->state);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 5, q->user);
	if (rc == SQLITE_OK && before)
		rc = sqlite3_bind_int64(st, 6, q->before_updated_us);
	/* No before_id: every task of that update time is at or after it. */
	if (rc == SQLITE_OK && before)
		rc = sq_bind_text(st, 7, q->before_id ? q->before_id : "");
	r = sq_step_deliver(store, call, c, st, rc, 0, task_row, (void *)out, err,
			    "list the tasks of '%.64s'", q->app);
out:
	sq_stmt_done(st);
	sq_read_end(store, c);
	return r;
}

/* ---- task_delete ------------------------------------------------------ */

typedef struct delete_job {
	const char *app, *id;
	int64_t expected_version;
} delete_job;

static int32_t delete_apply(sq_conn *c, void *ctx, memd_error *err)
{
	delete_job *j = ctx;
	sqlite3_stmt *st = NULL;
	task_head h;
	int32_t r = head_read(c, j->app, j->id, &h, err);
	int rc;

	if (r < 0)
		return r;
	if (!h.version)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "task '%.64s' not found", j->id);
	if (j->expected_version && j->expected_version != h.version)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "task '%.64s' is at version %lld, not the expected %lld",
				      j->id, (long long)h.version, (long long)j->expected_version);
	r = sq_stmt(c, &SQL_TASK_DELETE, &st, err);
	if (r < 0)
		return r;
	rc = bind_key(st, j->app, j->id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "delete task '%.64s'", j->id);
	sq_stmt_done(st);
	return r;
}

int32_t sq_task_delete(void *inst, const memd_call *call, const char *app, const char *id,
		       int64_t expected_version, memd_error *err)
{
	delete_job job = { .app = app, .id = id, .expected_version = expected_version };
	int32_t r = pu_check_id("app", app, err);

	if (r == 0)
		r = pu_check_id("task id", id, err);
	if (r == 0 && expected_version < 0)
		r = memd_error_set(err, MEMD_EINVAL, 0, "task '%.64s' expects negative version %lld",
				   id, (long long)expected_version);
	if (r < 0)
		return r;
	return sq_group_write(inst, call, delete_apply, &job, 1, err);
}

/* ---- retention -------------------------------------------------------- */

static int32_t scoped_delete(sq_conn *c, const sq_sql *sql, const memd_scope *scope,
			     int with_session, int64_t *ret_count, memd_error *err)
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
		r = sq_fail(c, rc, err, "delete the tasks of '%.64s'",
			    with_session ? scope->session : scope->user);
	else if (ret_count)
		*ret_count = sqlite3_changes(c->db);
	sq_stmt_done(st);
	return r;
}

int32_t sq_tasks_session_delete(sq_conn *c, const memd_scope *scope, memd_error *err)
{
	return scoped_delete(c, &SQL_SESSION_TASKS_DELETE, scope, 1, NULL, err);
}

int32_t sq_tasks_user_delete(sq_conn *c, const memd_scope *scope, int64_t *ret_count,
			     memd_error *err)
{
	return scoped_delete(c, &SQL_USER_TASKS_DELETE, scope, 0, ret_count, err);
}
