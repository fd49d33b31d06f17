/* SPDX-License-Identifier: MIT */
/*
 * mem_tasks: A2A tasks of the in-memory store; see mem_tasks.h.
 *
 * A put is two phases like every write here: every check and allocation
 * first (the new strings, the hash node of a new task, room in the order
 * array), then a commit that cannot fail: the row's columns are swapped
 * for the new ones and the row moves to its new place in the order.
 */
#include <memd/plugin.h>

#include <stdlib.h>
#include <string.h>

#include "mem_tasks.h"

/* ---- records ---------------------------------------------------------- */

static void mem_task_free(mem_task *t)
{
	if (!t)
		return;
	free(t->app);
	free(t->id);
	free(t->context_id);
	free(t->user);
	free(t->state);
	free(t->task_json);
	free(t);
}

static int mem_task_terminal(const char *state)
{
	static const char *const terminal[] = { "completed", "canceled", "failed", "rejected" };

	for (size_t i = 0; i < sizeof(terminal) / sizeof(terminal[0]); i++)
		if (strcmp(state, terminal[i]) == 0)
			return 1;
	return 0;
}

static size_t mem_task_key(char buf[MEM_KEY_MAX], const char *app, const char *id)
{
	return mem_key(buf, app, id, NULL);
}

static mem_task *mem_task_find(const mem_store *st, const char *app, const char *id)
{
	char key[MEM_KEY_MAX];
	hmap_node *n = hmap_find(&st->tasks, key, mem_task_key(key, app, id));

	return n ? n->value : NULL;
}

static int32_t mem_task_deliver(const mem_task *t, const memd_task_sink *out, memd_error *err)
{
	memd_task rec;

	if (!out || !out->task)
		return 0;
	memset(&rec, 0, sizeof(rec));
	rec.struct_size = sizeof(rec);
	rec.app = t->app;
	rec.id = t->id;
	rec.context_id = t->context_id;
	rec.user = t->user;
	rec.state = t->state;
	rec.task_json = t->task_json;
	rec.created_us = t->created_us;
	rec.updated_us = t->updated_us;
	rec.version = t->version;
	return mem_sink_result(out->task(out->userdata, &rec), err);
}

/* ---- the order: ascending (app, updated_us, id) ----------------------- */

/* <0 if t sorts before (app, us, id); id NULL = below every id of us. */
static int mem_task_cmp(const mem_task *t, const char *app, int64_t us, const char *id)
{
	int c = strcmp(t->app, app);

	return c ? c : mem_order_cmp(t->updated_us, t->id, us, id);
}

/* First index whose task is not below (app, us, id). */
static size_t mem_task_lower(const mem_store *st, const char *app, int64_t us, const char *id)
{
	size_t lo = 0, hi = st->n_tasks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (mem_task_cmp(st->task_order[mid], app, us, id) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* First index past every task of app. */
static size_t mem_task_app_end(const mem_store *st, const char *app)
{
	size_t lo = 0, hi = st->n_tasks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(st->task_order[mid]->app, app) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Commit step: link t at its place (room reserved). */
static void mem_task_link(mem_store *st, mem_task *t)
{
	size_t i = mem_task_lower(st, t->app, t->updated_us, t->id);

	memmove(st->task_order + i + 1, st->task_order + i,
		(st->n_tasks - i) * sizeof(*st->task_order));
	st->task_order[i] = t;
	st->n_tasks++;
}

/* Commit step: unlink t from the order (not from the hash). */
static void mem_task_unlink(mem_store *st, const mem_task *t)
{
	/* (app, updated_us, id) is unique: its lower bound is t itself. */
	size_t i = mem_task_lower(st, t->app, t->updated_us, t->id);

	memmove(st->task_order + i, st->task_order + i + 1,
		(st->n_tasks - i - 1) * sizeof(*st->task_order));
	st->n_tasks--;
}

/* Commit step: remove t from the hash and the order and free it. */
static void mem_task_destroy(mem_store *st, mem_task *t)
{
	char key[MEM_KEY_MAX];

	mem_task_unlink(st, t);
	hmap_node_free(hmap_remove(&st->tasks, key, mem_task_key(key, t->app, t->id)));
	mem_task_free(t);
}

uint64_t mem_tasks_forget(mem_store *st, const char *app, const char *user, const char *session)
{
	size_t lo = mem_task_lower(st, app, INT64_MIN, NULL);
	size_t hi = mem_task_app_end(st, app);
	size_t keep = lo;
	uint64_t removed = 0;

	for (size_t i = lo; i < hi; i++) {
		mem_task *t = st->task_order[i];
		char key[MEM_KEY_MAX];

		if (t->user && strcmp(t->user, user) == 0 &&
		    (!session || strcmp(t->context_id, session) == 0)) {
			hmap_node_free(hmap_remove(&st->tasks, key, mem_task_key(key, t->app, t->id)));
			mem_task_free(t);
			removed++;
		} else {
			st->task_order[keep++] = t;
		}
	}
	if (hi < st->n_tasks) /* never memmove from a NULL array, even 0 bytes */
		memmove(st->task_order + keep, st->task_order + hi,
			(st->n_tasks - hi) * sizeof(*st->task_order));
	st->n_tasks -= removed;
	return removed;
}

void mem_tasks_fini(mem_store *st)
{
	for (size_t i = 0; i < st->n_tasks; i++)
		mem_task_free(st->task_order[i]);
	free(st->task_order);
	st->task_order = NULL;
	st->n_tasks = st->cap_tasks = 0;
	hmap_clear(&st->tasks, NULL);
}

/* ---- ops -------------------------------------------------------------- */

static int32_t mem_task_check(const memd_task *t, memd_error *err)
{
	int32_t r;

	if (!t || !MEM_HAS(t, task_json))
		return memd_error_set(err, MEMD_EINVAL, 0, "task is missing or too small");
	if ((r = pu_check_id("app", t->app, err)) < 0 ||
	    (r = pu_check_id("task id", t->id, err)) < 0 ||
	    (r = pu_check_id("task context id", t->context_id, err)) < 0 ||
	    (t->user && (r = pu_check_id("task user", t->user, err)) < 0) ||
	    (r = pu_check_id("task state", t->state, err)) < 0)
		return r;
	if (!t->task_json)
		return memd_error_set(err, MEMD_EINVAL, 0, "task JSON is missing");
	return mem_check_json_object("task JSON", t->task_json, err);
}

/* The checks of a put against the stored row (NULL = absent). */
static int32_t mem_task_admit(const mem_task *old, const memd_task *t, uint32_t flags,
			      int64_t expected_version, memd_error *err)
{
	if ((flags & MEMD_TASK_CREATE) && old)
		return memd_error_set(err, MEMD_ECONFLICT, 0, "task '%.64s' exists", t->id);
	if (expected_version != 0 && !old)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "task '%.64s' not found", t->id);
	if (expected_version != 0 && old->version != expected_version)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "task '%.64s' is at version %lld, not %lld", t->id,
				      (long long)old->version, (long long)expected_version);
	if (old && mem_task_terminal(old->state) && strcmp(old->state, t->state) != 0)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "task '%.64s' is %s, a terminal state, and cannot become %.64s",
				      t->id, old->state, t->state);
	return 0;
}

int32_t mem_task_put(void *inst, const memd_call *call, const memd_task *t, uint32_t flags,
		     int64_t expected_version, int64_t now_us, const memd_task_sink *out,
		     memd_error *err)
{
	mem_store *st = inst;
	mem_task fresh = { 0 };
	mem_task *row = NULL, *old;
	hmap_node *node = NULL;
	char key[MEM_KEY_MAX];
	size_t klen;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = mem_task_check(t, err)) < 0)
		return r;
	if (expected_version < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "expected version is negative");
	if (!(fresh.context_id = mem_strdup(t->context_id)) || mem_dup_opt(t->user, &fresh.user) ||
	    !(fresh.state = mem_strdup(t->state)) || !(fresh.task_json = mem_strdup(t->task_json))) {
		r = mem_enomem(err);
		goto fail;
	}
	pthread_mutex_lock(&st->lock);
	old = mem_task_find(st, t->app, t->id);
	pu_rows_read(call, 1);
	if ((r = mem_task_admit(old, t, flags, expected_version, err)) < 0)
		goto unlock;
	if (!old) {
		klen = mem_task_key(key, t->app, t->id);
		if (!(row = calloc(1, sizeof(*row))) || !(row->app = mem_strdup(t->app)) ||
		    !(row->id = mem_strdup(t->id)) || !(node = hmap_node_new(key, klen, row)) ||
		    hmap_reserve(&st->tasks, 1) < 0 ||
		    mem_grow((void **)&st->task_order, &st->cap_tasks, st->n_tasks + 1,
			     sizeof(*st->task_order)) < 0) {
			r = mem_enomem(err);
			goto unlock;
		}
		row->created_us = now_us;
		row->version = 0;
		hmap_insert(&st->tasks, node);
		node = NULL;
	} else {
		row = old;
		mem_task_unlink(st, row);
	}
	/* Commit: swap the columns in, the old ones go with fresh. */
	{
		mem_task swap = *row;
		row->context_id = fresh.context_id;
		row->user = fresh.user;
		row->state = fresh.state;
		row->task_json = fresh.task_json;
		fresh.context_id = swap.context_id;
		fresh.user = swap.user;
		fresh.state = swap.state;
		fresh.task_json = swap.task_json;
	}
	row->updated_us = now_us;
	row->version++;
	mem_task_link(st, row);
	r = mem_sink_final(mem_task_deliver(row, out, err));
	row = NULL;
unlock:
	pthread_mutex_unlock(&st->lock);
	if (row && !old)
		mem_task_free(row);
	hmap_node_free(node);
fail:
	free(fresh.context_id);
	free(fresh.user);
	free(fresh.state);
	free(fresh.task_json);
	return r;
}

int32_t mem_task_get(void *inst, const memd_call *call, const char *app, const char *id,
		     const memd_task_sink *out, memd_error *err)
{
	mem_store *st = inst;
	mem_task *t;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_id("app", app, err)) < 0 ||
	    (r = pu_check_id("task id", id, err)) < 0)
		return r;
	if (!out || !out->task)
		return memd_error_set(err, MEMD_EINVAL, 0, "no task sink");
	pthread_mutex_lock(&st->lock);
	t = mem_task_find(st, app, id);
	if (!t) {
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "task '%.64s' not found", id);
	} else {
		pu_rows_read(call, 1);
		r = mem_sink_final(mem_task_deliver(t, out, err));
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}

static int mem_task_matches(const mem_task *t, const memd_task_query *q)
{
	if (q->context_id && strcmp(t->context_id, q->context_id) != 0)
		return 0;
	if (q->state && strcmp(t->state, q->state) != 0)
		return 0;
	if (q->user && (!t->user || strcmp(t->user, q->user) != 0))
		return 0;
	return 1;
}

int32_t mem_task_list(void *inst, const memd_call *call, const memd_task_query *q,
		      const memd_task_sink *out, memd_error *err)
{
	mem_store *st = inst;
	uint64_t examined = 0;
	uint32_t delivered = 0;
	size_t i;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0)
		return r;
	if (!q || !MEM_HAS(q, before_id))
		return memd_error_set(err, MEMD_EINVAL, 0, "task query is missing or too small");
	if ((r = pu_check_id("app", q->app, err)) < 0)
		return r;
	if (q->limit == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "task query limit is 0");
	if (!out || !out->task)
		return memd_error_set(err, MEMD_EINVAL, 0, "no task sink");
	pthread_mutex_lock(&st->lock);
	i = q->before_updated_us ? mem_task_lower(st, q->app, q->before_updated_us, q->before_id)
				 : mem_task_app_end(st, q->app);
	while (i > 0 && delivered < q->limit) {
		const mem_task *t = st->task_order[--i];

		if (strcmp(t->app, q->app) != 0)
			break;
		examined++;
		if (!mem_task_matches(t, q))
			continue;
		if ((r = mem_task_deliver(t, out, err)) != 0)
			break;
		delivered++;
	}
	pu_rows_read(call, examined);
	pthread_mutex_unlock(&st->lock);
	return mem_sink_final(r);
}

int32_t mem_task_delete(void *inst, const memd_call *call, const char *app, const char *id,
			int64_t expected_version, memd_error *err)
{
	mem_store *st = inst;
	mem_task *t;
	int32_t r;

	if ((r = mem_begin(st, call, err)) < 0 || (r = pu_check_id("app", app, err)) < 0 ||
	    (r = pu_check_id("task id", id, err)) < 0)
		return r;
	pthread_mutex_lock(&st->lock);
	t = mem_task_find(st, app, id);
	pu_rows_read(call, 1);
	if (!t)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "task '%.64s' not found", id);
	else if (expected_version != 0 && t->version != expected_version)
		r = memd_error_set(err, MEMD_ECONFLICT, 0,
				   "task '%.64s' is at version %lld, not %lld", id,
				   (long long)t->version, (long long)expected_version);
	else
		mem_task_destroy(st, t);
	pthread_mutex_unlock(&st->lock);
	return r;
}
