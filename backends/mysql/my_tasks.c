/* SPDX-License-Identifier: MIT */
#include "my_tasks.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <mysqld_error.h>

#include "plugin_util.h"

/* The states a task never leaves (store.h). */
static const char *const TERMINAL_STATES[] = { "completed", "canceled", "failed", "rejected" };

/* Every read that delivers a task selects these columns, in order. */
#define TASK_COLS "app, id, context_id, user, state, task, created_us, updated_us, version"

static const my_sql SQL_TASK_LOCK = { MY_ST_TASK_LOCK,
	"SELECT version, state, created_us FROM memd_tasks WHERE app = ? AND id = ? FOR UPDATE" };
static const my_sql SQL_TASK_INSERT = { MY_ST_TASK_INSERT,
	"INSERT INTO memd_tasks (app, id, context_id, user, state, task, created_us, updated_us,"
	" version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)" };
static const my_sql SQL_TASK_UPDATE = { MY_ST_TASK_UPDATE,
	"UPDATE memd_tasks SET context_id = ?, user = ?, state = ?, task = ?, updated_us = ?,"
	" version = ? WHERE app = ? AND id = ?" };
static const my_sql SQL_TASK_GET = { MY_ST_TASK_GET,
	"SELECT " TASK_COLS " FROM memd_tasks WHERE app = ? AND id = ?" };
static const my_sql SQL_TASK_DELETE = { MY_ST_TASK_DELETE,
	"DELETE FROM memd_tasks WHERE app = ? AND id = ?" };

/* task_list: newest update first, on (app, updated_us, id) or, with a
 * context, (app, context_id, updated_us, id), walked backwards; the state
 * and user filters (each "is it set, value") checked per row, the keyset
 * repeating its first part as a plain bound so the read starts there.
 * Without a keyset the bound is INT64_MAX (above every time). */
#define LIST_FILTERS                                                                          \
	" AND (? IS NULL OR state = ?) AND (? IS NULL OR user = ?)"                            \
	" AND updated_us <= ? AND (updated_us < ? OR (updated_us = ? AND id < ?))"             \
	" ORDER BY updated_us DESC, id DESC LIMIT ?"
static const my_sql SQL_TASK_LIST = { MY_ST_TASK_LIST,
	"SELECT " TASK_COLS " FROM memd_tasks FORCE INDEX (memd_tasks_by_updated)"
	" WHERE app = ?" LIST_FILTERS };
static const my_sql SQL_TASK_LIST_CONTEXT = { MY_ST_TASK_LIST_CONTEXT,
	"SELECT " TASK_COLS " FROM memd_tasks FORCE INDEX (memd_tasks_by_context)"
	" WHERE app = ? AND context_id = ?" LIST_FILTERS };

static const my_sql SQL_SESSION_TASKS_DELETE = { MY_ST_SESSION_TASKS_DELETE,
	"DELETE FROM memd_tasks WHERE app = ? AND user = ? AND context_id = ?" };
static const my_sql SQL_USER_TASKS_DELETE = { MY_ST_USER_TASKS_DELETE,
	"DELETE FROM memd_tasks WHERE app = ? AND user = ?" };

static int terminal(const char *state)
{
	for (size_t i = 0; i < sizeof(TERMINAL_STATES) / sizeof(TERMINAL_STATES[0]); i++)
		if (strcmp(state, TERMINAL_STATES[i]) == 0)
			return 1;
	return 0;
}

/* my_row_fn of the reads: the task of s's current row to ud, a const
 * memd_task_sink *. */
static int32_t task_row(const my_stmt *s, void *ud, memd_error *err)
{
	const memd_task_sink *out = ud;
	memd_task t = { .struct_size = sizeof(t) };

	t.app = my_col_text(s, 0);
	t.id = my_col_text(s, 1);
	t.context_id = my_col_text(s, 2);
	t.user = my_col_text(s, 3);
	t.state = my_col_text(s, 4);
	t.task_json = my_col_text(s, 5);
	t.created_us = my_col_i64(s, 6);
	t.updated_us = my_col_i64(s, 7);
	t.version = my_col_i64(s, 8);
	return my_sink_result(out->task(out->userdata, &t), "task", err);
}

/* ---- put ------------------------------------------------------------------ */

typedef struct put_ctx {
	const memd_task *t;
	uint32_t flags;
	int64_t expected_version;
	int64_t now_us;
	int64_t created_us;        /* the stored row's, after the body */
	int64_t version;
} put_ctx;

/* Bind (app, id) of t. */
static void param_key(my_params *p, const char *app, const char *id)
{
	my_param_text(p, app);
	my_param_text(p, id);
}

/* The task's row locked: *ret_found, and its version, state (copied into
 * state, MEMD_ID_MAX + 1 bytes) and created_us when found. */
static int32_t lock_task(my_conn *c, const char *app, const char *id, int *ret_found,
			 int64_t *ret_version, char *state, int64_t *ret_created_us,
			 memd_error *err)
{
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	param_key(&p, app, id);
	r = my_exec(c, &SQL_TASK_LOCK, &p, &s, err);
	if (r == 0)
		r = my_fetch(c, s, err);
	if (r < 0)
		return r;
	*ret_found = r == 1;
	if (r == 1) {
		const char *st = my_col_text(s, 1);
		*ret_version = my_col_i64(s, 0);
		snprintf(state, MEMD_ID_MAX + 1, "%s", st ? st : "");
		if (ret_created_us)
			*ret_created_us = my_col_i64(s, 2);
		my_done(s);
	}
	return 0;
}

static int32_t insert_task(my_conn *c, put_ctx *x, memd_error *err)
{
	const memd_task *t = x->t;
	my_params p;

	my_params_init(&p);
	param_key(&p, t->app, t->id);
	my_param_text(&p, t->context_id);
	my_param_text(&p, t->user);
	my_param_text(&p, t->state);
	my_param_text(&p, t->task_json);
	my_param_i64(&p, x->now_us);
	my_param_i64(&p, x->now_us);
	return my_exec(c, &SQL_TASK_INSERT, &p, NULL, err);
}

static int32_t put_body(my_conn *c, void *arg, memd_error *err)
{
	put_ctx *x = arg;
	const memd_task *t = x->t;
	char state[MEMD_ID_MAX + 1];
	int64_t version = 0, created = 0;
	int found = 0, raced = 0;
	my_params p;
	int32_t r;

again:
	r = lock_task(c, t->app, t->id, &found, &version, state, &created, err);
	if (r < 0)
		return r;
	if (!found) {
		if (x->expected_version != 0)
			return memd_error_set(err, MEMD_ENOTFOUND, 0,
					      "task '%.64s' not found (expected version %lld)",
					      t->id, (long long)x->expected_version);
		r = insert_task(c, x, err);
		/* A create that lost the race to another creates nothing; an
		 * unconditional put replaces what the winner stored. */
		if (r == MEMD_ECONFLICT && c->last_errno == ER_DUP_ENTRY &&
		    !(x->flags & MEMD_TASK_CREATE) && !raced++)
			goto again;
		if (r == MEMD_ECONFLICT && c->last_errno == ER_DUP_ENTRY)
			return memd_error_set(err, MEMD_ECONFLICT, 0, "task '%.64s' exists", t->id);
		x->created_us = x->now_us;
		x->version = 1;
		return r;
	}
	if (x->flags & MEMD_TASK_CREATE)
		return memd_error_set(err, MEMD_ECONFLICT, 0, "task '%.64s' exists", t->id);
	if (x->expected_version != 0 && x->expected_version != version)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "task '%.64s' is at version %lld, not %lld", t->id,
				      (long long)version, (long long)x->expected_version);
	if (terminal(state) && strcmp(state, t->state) != 0)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "task '%.64s' is %s, a terminal state; it cannot become %.64s",
				      t->id, state, t->state);
	my_params_init(&p);
	my_param_text(&p, t->context_id);
	my_param_text(&p, t->user);
	my_param_text(&p, t->state);
	my_param_text(&p, t->task_json);
	my_param_i64(&p, x->now_us);
	my_param_i64(&p, version + 1);
	param_key(&p, t->app, t->id);
	r = my_exec(c, &SQL_TASK_UPDATE, &p, NULL, err);
	x->created_us = created;
	x->version = version + 1;
	return r;
}

static int32_t check_task(const memd_task *t, memd_error *err)
{
	int32_t r;

	if (!t || t->struct_size < sizeof(*t))
		return memd_error_set(err, MEMD_EINVAL, 0, "task is missing");
	r = pu_check_id("app", t->app, err);
	if (r == 0)
		r = pu_check_id("task id", t->id, err);
	if (r == 0)
		r = pu_check_id("task context_id", t->context_id, err);
	if (r == 0 && t->user)
		r = pu_check_id("task user", t->user, err);
	if (r == 0)
		r = pu_check_id("task state", t->state, err);
	if (r == 0)
		r = my_check_json_object("task", t->task_json, err);
	return r;
}

int32_t my_task_put(void *inst, const memd_call *call, const memd_task *t, uint32_t flags,
		    int64_t expected_version, int64_t now_us, const memd_task_sink *out,
		    memd_error *err)
{
	put_ctx x = { .t = t, .flags = flags, .expected_version = expected_version,
		      .now_us = now_us };
	memd_task stored;
	int32_t r = check_task(t, err);

	if (r < 0)
		return r;
	if (flags & ~MEMD_TASK_CREATE)
		return memd_error_set(err, MEMD_EINVAL, 0, "task put has unknown flags 0x%x",
				      (unsigned)flags);
	if (expected_version < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "expected task version is negative");
	r = my_run(inst, call, MY_TXN, put_body, &x, err);
	if (r < 0 || !out || !out->task)
		return r;
	stored = *t;
	stored.struct_size = sizeof(stored);
	stored.created_us = x.created_us;
	stored.updated_us = now_us;
	stored.version = x.version;
	r = my_sink_result(out->task(out->userdata, &stored), "task", err);
	return r > 0 ? 0 : r;
}

/* ---- get and list ------------------------------------------------------------ */

typedef struct read_ctx {
	my_store *store;
	const memd_call *call;
	const char *app;
	const char *id;            /* task_get; NULL = list */
	const memd_task_query *q;
	const memd_task_sink *out;
} read_ctx;

static int32_t read_body(my_conn *c, void *arg, memd_error *err)
{
	read_ctx *x = arg;
	const memd_task_query *q = x->q;
	uint64_t n = 0;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	if (x->id) {
		param_key(&p, x->app, x->id);
		r = my_exec(c, &SQL_TASK_GET, &p, &s, err);
	} else {
		int64_t before = q->before_updated_us ? q->before_updated_us : INT64_MAX;
		my_param_text(&p, q->app);
		if (q->context_id)
			my_param_text(&p, q->context_id);
		my_param_text(&p, q->state);
		my_param_text(&p, q->state);
		my_param_text(&p, q->user);
		my_param_text(&p, q->user);
		my_param_i64(&p, before);
		my_param_i64(&p, before);
		my_param_i64(&p, before);
		/* No id: every task updated at that instant is "after". */
		my_param_text(&p, q->before_updated_us && q->before_id ? q->before_id : "");
		my_param_u64(&p, q->limit);
		r = my_exec(c, q->context_id ? &SQL_TASK_LIST_CONTEXT : &SQL_TASK_LIST, &p, &s, err);
	}
	r = my_fetch_deliver(x->store, x->call, c, s, r, task_row, (void *)x->out, &n, err);
	if (r == 0 && n == 0 && x->id)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "task '%.64s' not found", x->id);
	return r;
}

int32_t my_task_get(void *inst, const memd_call *call, const char *app, const char *id,
		    const memd_task_sink *out, memd_error *err)
{
	read_ctx x = { .store = inst, .call = call, .app = app, .id = id, .out = out };
	int32_t r = pu_check_id("app", app, err);

	if (r == 0)
		r = pu_check_id("task id", id, err);
	if (r < 0)
		return r;
	if (!out || !out->task)
		return memd_error_set(err, MEMD_EINVAL, 0, "task sink is missing");
	return my_run(inst, call, MY_AUTOCOMMIT, read_body, &x, err);
}

int32_t my_task_list(void *inst, const memd_call *call, const memd_task_query *q,
		     const memd_task_sink *out, memd_error *err)
{
	read_ctx x = { .store = inst, .call = call, .q = q, .out = out };
	int32_t r;

	if (!q || q->struct_size < sizeof(*q) || !out || !out->task)
		return memd_error_set(err, MEMD_EINVAL, 0, "task query or sink is missing");
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "task list limit must be > 0");
	r = pu_check_id("app", q->app, err);
	if (r == 0 && q->context_id)
		r = pu_check_id("context_id", q->context_id, err);
	if (r == 0 && q->state)
		r = pu_check_id("state", q->state, err);
	if (r == 0 && q->user)
		r = pu_check_id("user", q->user, err);
	if (r == 0 && q->before_updated_us && q->before_id)
		r = pu_check_id("before_id", q->before_id, err);
	if (r < 0)
		return r;
	return my_run(inst, call, MY_AUTOCOMMIT, read_body, &x, err);
}

/* ---- delete ------------------------------------------------------------------ */

typedef struct delete_ctx {
	const char *app, *id;
	int64_t expected_version;
} delete_ctx;

static int32_t delete_body(my_conn *c, void *arg, memd_error *err)
{
	delete_ctx *x = arg;
	char state[MEMD_ID_MAX + 1];
	int64_t version = 0;
	int found = 0;
	my_params p;
	int32_t r = lock_task(c, x->app, x->id, &found, &version, state, NULL, err);

	if (r < 0)
		return r;
	if (!found)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "task '%.64s' not found", x->id);
	if (x->expected_version != 0 && x->expected_version != version)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "task '%.64s' is at version %lld, not %lld", x->id,
				      (long long)version, (long long)x->expected_version);
	my_params_init(&p);
	param_key(&p, x->app, x->id);
	return my_exec(c, &SQL_TASK_DELETE, &p, NULL, err);
}

int32_t my_task_delete(void *inst, const memd_call *call, const char *app, const char *id,
		       int64_t expected_version, memd_error *err)
{
	delete_ctx x = { .app = app, .id = id, .expected_version = expected_version };
	int32_t r = pu_check_id("app", app, err);

	if (r == 0)
		r = pu_check_id("task id", id, err);
	if (r < 0)
		return r;
	return my_run(inst, call, MY_TXN, delete_body, &x, err);
}

/* ---- the deletes of sessions and users ------------------------------------------- */

int32_t my_tasks_session_delete(my_conn *c, const memd_scope *scope, memd_error *err)
{
	my_params p;

	my_params_init(&p);
	my_param_scope(&p, scope, 1);
	return my_exec(c, &SQL_SESSION_TASKS_DELETE, &p, NULL, err);
}

int32_t my_tasks_user_delete(my_conn *c, const memd_scope *scope, uint64_t *ret_rows,
			     memd_error *err)
{
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, scope, 0);
	r = my_exec(c, &SQL_USER_TASKS_DELETE, &p, &s, err);
	if (r == 0)
		*ret_rows = my_affected(s);
	return r;
}
