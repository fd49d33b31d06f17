/* SPDX-License-Identifier: MIT */
/*
 * service_tasks: A2A tasks (api/memd/memd.h, "A2A tasks"): memd_task_put,
 * _get, _list (with its cursors) and _delete.
 *
 * A save is one conditional store task_put: the facade checks the body
 * as an A2A Task (json/task_json.c), takes the columns the store filters
 * on out of it (context id, state) and stamps it with the facade clock;
 * the store decides the conditions (create-only, the expected version, a
 * terminal state kept) in the same transaction as the write, so that two
 * savers racing on one version cannot both win.
 */
#include "service/service_int.h"

#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"
#include "json/task_json.h"

#define HOW_TO_PAGE_TASKS "ask for fewer tasks (limit)"

/* The record of the task a store delivered, as JSON. */
typedef struct task_read {
	json_t *record;
	int64_t version;
	int64_t history_length;
	memd_error *err;
	int32_t failed;        /* tj_task_record's error */
} task_read;

static int32_t got_task(void *ud, const memd_task *t)
{
	task_read *tr = ud;
	json_t *o;
	int32_t r = tj_task_record(t, tr->history_length, &o, tr->err);

	if (r < 0) {
		tr->failed = r;
		return r;
	}
	json_decref(tr->record);
	tr->record = o;
	tr->version = t->version;
	return 0;
}

/* The store's error r of a read or write that delivered into tr: the
 * record's own error when building it failed, ENOMEM as the facade's. */
static int32_t task_failed(const task_read *tr, int32_t r, memd_error *err)
{
	if (tr->failed)
		return tr->failed == MEMD_ENOMEM ? service_oom(err) : tr->failed;
	return r == MEMD_ENOMEM ? service_oom(err) : r;
}

/* contextId of a task saved with a user: the id of a session of that
 * user; without one, any string the store can key (1..MEMD_ID_MAX bytes,
 * no control characters). */
static int32_t check_context_id(const char *ctx, const char *user, memd_error *err)
{
	size_t n = strlen(ctx);

	if (user)
		return ej_check_id(ctx, "contextId (a session id of the user)", err);
	if (n == 0 || n > MEMD_ID_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "contextId: must be 1..%d bytes",
				      MEMD_ID_MAX);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)ctx[i] < 0x20 || ctx[i] == 0x7f)
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "contextId: has a control character");
	return 0;
}

int32_t memd_task_put(memd *m, const char *app, const char *id, const char *user,
		      const char *body_json, int64_t expected_version, int create_only,
		      char **ret_json, int *ret_created, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_task t = { .struct_size = sizeof(t) };
	task_read tr = { .history_length = -1, .err = err };
	memd_task_sink sink = { sizeof(sink), &tr, got_task };
	json_t *body = NULL;
	char *text = NULL;
	const char *state;
	int32_t r;

	if ((r = ej_check_id(app, "app", err)) < 0 || (r = ej_check_id(id, "task id", err)) < 0 ||
	    (user && (r = ej_check_id(user, "user", err)) < 0))
		return r;
	if (expected_version < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "version: must be >= 1 (0 = any)");
	if (expected_version > 0 && create_only)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "a save cannot both expect a version and create only");
	if (!body_json || !*body_json)
		return memd_error_set(err, MEMD_EINVAL, 0, "body: an A2A Task is required");
	if ((r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = tj_check_task(body, id, &state, err)) < 0)
		goto out;
	t.context_id = json_string_value(json_object_get(body, "contextId"));
	if ((r = check_context_id(t.context_id, user, err)) < 0)
		goto out;
	/* "kind" absent or null: the Task's own. */
	if (!json_is_string(json_object_get(body, "kind")) &&
	    json_object_set_new(body, "kind", json_string("task")) < 0) {
		r = service_oom(err);
		goto out;
	}
	if (!(text = ej_dump(body))) {
		r = service_oom(err);
		goto out;
	}
	t.app = app;
	t.id = id;
	t.user = user;
	t.state = state;
	t.task_json = text;
	r = store_task_put(m->sessions, &call, &t, create_only ? MEMD_TASK_CREATE : 0,
			   expected_version, service_clock_us(m), &sink, err);
	if (r < 0) {
		r = task_failed(&tr, r, err);
		goto out;
	}
	if (!tr.record) {
		r = memd_error_set(err, MEMD_EINTERNAL, 0, "%s: task_put delivered nothing",
				   store_name(m->sessions));
		goto out;
	}
	if (ret_created)
		*ret_created = tr.version == 1;
	r = service_finish(tr.record, ret_json, err);
	tr.record = NULL;
out:
	json_decref(tr.record);
	json_decref(body);
	free(text);
	return r;
}

int32_t memd_task_get(memd *m, const char *app, const char *id, int64_t history_length,
		      char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	task_read tr = { .history_length = history_length, .err = err };
	memd_task_sink sink = { sizeof(sink), &tr, got_task };
	int32_t r;

	if ((r = ej_check_id(app, "app", err)) < 0 || (r = ej_check_id(id, "task id", err)) < 0)
		return r;
	r = store_task_get(m->sessions, &call, app, id, &sink, err);
	if (r < 0) {
		r = task_failed(&tr, r, err);
		json_decref(tr.record);
		return r;
	}
	if (!tr.record)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "%s: task_get delivered nothing",
				      store_name(m->sessions));
	return service_finish_bounded(m, tr.record, "ask for fewer history messages (history_length)",
				      ret_json, err);
}

/* A list page being gathered: up to limit records, the key of the last,
 * and whether the store had one more. */
typedef struct task_page {
	json_t *arr;
	uint32_t limit;
	int more;
	int64_t last_updated_us;
	char *last_id;
	memd_error *err;
	int32_t failed;
} task_page;

static int32_t got_list_task(void *ud, const memd_task *t)
{
	task_page *p = ud;
	json_t *o;
	char *id;
	int32_t r;

	if (json_array_size(p->arr) == p->limit) {
		p->more = 1;
		return 1; /* stop: the page is full and there is a next one */
	}
	if ((r = tj_task_record(t, -1, &o, p->err)) < 0) {
		p->failed = r;
		return r;
	}
	if (json_array_append_new(p->arr, o) < 0 || !(id = strdup(t->id))) {
		p->failed = MEMD_ENOMEM;
		return MEMD_ENOMEM;
	}
	free(p->last_id);
	p->last_id = id;
	p->last_updated_us = t->updated_us;
	return 0;
}

int32_t memd_task_list(memd *m, const char *app, const memd_task_list_options *opts,
		       char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_task_list_options lo = { 0 };
	memd_task_query q = { .struct_size = sizeof(q) };
	task_page p = { .err = err };
	memd_task_sink sink = { sizeof(sink), &p, got_list_task };
	char *before_id = NULL, *next = NULL;
	int32_t r;

	if ((r = ej_check_id(app, "app", err)) < 0)
		return r;
	if (opts)
		memcpy(&lo, opts, opts->struct_size < sizeof(lo) ? opts->struct_size : sizeof(lo));
	if (lo.state && !tj_state_valid(lo.state))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "state: must be an A2A task state (submitted, working, "
				      "input-required, auth-required, completed, canceled, failed, "
				      "rejected or unknown)");
	if ((lo.context_id && (r = check_context_id(lo.context_id, NULL, err)) < 0) ||
	    (lo.user && (r = ej_check_id(lo.user, "user", err)) < 0))
		return r;
	p.limit = lo.limit ? lo.limit : MEMD_LIST_LIMIT_DEFAULT;
	if (p.limit > MEMD_LIST_LIMIT_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "limit: at most %d", MEMD_LIST_LIMIT_MAX);
	if (lo.cursor && *lo.cursor &&
	    (r = service_list_cursor_decode(0, lo.cursor, &q.before_updated_us, &before_id,
					    err)) < 0)
		return r;
	q.app = app;
	q.before_id = before_id;
	q.limit = p.limit + 1; /* one more tells whether there is a next page */
	q.context_id = lo.context_id;
	q.state = lo.state;
	q.user = lo.user;
	if (!(p.arr = json_array())) {
		r = service_oom(err);
		goto out;
	}
	if ((r = store_task_list(m->sessions, &call, &q, &sink, err)) < 0) {
		if (p.failed)
			r = p.failed == MEMD_ENOMEM ? service_oom(err) : p.failed;
		else if (r == MEMD_ENOMEM)
			r = service_oom(err);
		goto out;
	}
	if (p.more && !(next = service_list_cursor_encode(0, p.last_updated_us, p.last_id))) {
		r = service_oom(err);
		goto out;
	}
	r = service_finish_bounded(m, json_pack("{s:O,s:s?}", "tasks", p.arr, "next_cursor", next),
				   HOW_TO_PAGE_TASKS, ret_json, err);
out:
	json_decref(p.arr);
	free(p.last_id);
	free(before_id);
	free(next);
	return r;
}

int32_t memd_task_delete(memd *m, const char *app, const char *id, int64_t expected_version,
			 memd_error *err)
{
	memd_call call = service_call_for_request(m);
	int32_t r;

	if ((r = ej_check_id(app, "app", err)) < 0 || (r = ej_check_id(id, "task id", err)) < 0)
		return r;
	if (expected_version < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "version: must be >= 1 (0 = any)");
	return store_task_delete(m->sessions, &call, app, id, expected_version, err);
}
