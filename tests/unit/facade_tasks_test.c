/* SPDX-License-Identifier: MIT */
/*
 * A2A tasks through the libmemd facade (memd.h "A2A tasks"), each test
 * once over the memory store and once over sqlite, with a driven clock: a
 * save creates then replaces (the version, created kept, updated moved,
 * kind added), the conditions (create-only, an expected version, a
 * terminal state kept) each leaving the task as it was, history_length,
 * list order and cursors with filters, delete, and the session's and the
 * user's tasks going with them.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/memd.h>

#include "test_util.h"

#define US_PER_S 1000000LL
/* 2026-11-20T02:00:00Z */
#define T0 1795140000000000LL
#define T0_TEXT "2026-11-20T02:00:00.000000Z"
#define T1_TEXT "2026-11-20T02:00:01.000000Z"
#define BODY_MAX 512
#define LIST_TASKS 5

static tu_dir dir;
static memd *m;
static _Atomic int64_t now_us = T0;

/* Open memd over plugin in a new directory, the facade clock at T0. */
static void open_store(const char *plugin)
{
	atomic_store(&now_us, T0);
	m = tu_open_store(&dir, plugin, NULL, &now_us);
}

static void setup_memory(void)
{
	open_store("memory");
}

static void setup_sqlite(void)
{
	open_store("sqlite");
}

static void teardown(void)
{
	tu_close_store(m, &dir);
}

TestSuite(facade_tasks_memory, .init = setup_memory, .fini = teardown);
TestSuite(facade_tasks_sqlite, .init = setup_sqlite, .fini = teardown);

/* Each test body runs in both suites. */
#define BOTH(name)                                              \
	static void name(void);                                 \
	Test(facade_tasks_memory, name) { name(); }             \
	Test(facade_tasks_sqlite, name) { name(); }             \
	static void name(void)

static const char *task(char buf[BODY_MAX], const char *id, const char *ctx, const char *state)
{
	snprintf(buf, BODY_MAX,
		 "{\"id\": \"%s\", \"contextId\": \"%s\", \"status\": {\"state\": \"%s\"}, "
		 "\"history\": [{\"messageId\": \"m1\", \"role\": \"user\", \"parts\": []}, "
		 "{\"messageId\": \"m2\", \"role\": \"agent\", \"parts\": []}]}",
		 id, ctx, state);
	return buf;
}

/* memd_task_put that must succeed; the record as JSON (owned). */
static json_t *put_ok(const char *id, const char *user, const char *ctx, const char *state,
		      int64_t version, int create_only, int want_created)
{
	memd_error err = { .struct_size = sizeof(err) };
	char b[BODY_MAX], *out = NULL;
	int created = -1;
	int32_t r = memd_task_put(m, "app", id, user, task(b, id, ctx, state), version, create_only,
				  &out, &created, &err);
	json_t *o;

	cr_assert_eq(r, 0, "%s: %s", id, err.msg);
	cr_assert_eq(created, want_created, "%s", id);
	o = json_loads(out, 0, NULL);
	memd_free(out);
	cr_assert_not_null(o);
	return o;
}

/* memd_task_put that must fail with code, its message containing msg. */
static void put_fails(const char *id, const char *ctx, const char *state, int64_t version,
		      int create_only, int32_t code, const char *msg)
{
	memd_error err = { .struct_size = sizeof(err) };
	char b[BODY_MAX], *out = NULL;
	int32_t r = memd_task_put(m, "app", id, NULL, task(b, id, ctx, state), version, create_only,
				  &out, NULL, &err);

	cr_assert_eq(r, code, "%s: %d %s", id, r, err.msg);
	cr_assert(strstr(err.msg, msg), "%s: want '%s' in '%s'", id, msg, err.msg);
	cr_assert_null(out);
}

static json_t *get_ok(const char *id, int64_t history_length)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	json_t *o;

	cr_assert_eq(memd_task_get(m, "app", id, history_length, &out, &err), 0, "%s", err.msg);
	o = json_loads(out, 0, NULL);
	memd_free(out);
	return o;
}

static int32_t get_code(const char *id)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int32_t r = memd_task_get(m, "app", id, -1, &out, &err);

	memd_free(out);
	return r;
}

static const char *state_of(json_t *rec)
{
	return json_string_value(
		json_object_get(json_object_get(json_object_get(rec, "task"), "status"), "state"));
}

BOTH(save_create_replace_and_conditions)
{
	json_t *o = put_ok("t", NULL, "c", "submitted", 0, 1, 1);

	cr_assert_eq(json_integer_value(json_object_get(o, "version")), 1);
	cr_assert_str_eq(json_string_value(json_object_get(o, "created")), T0_TEXT);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(o, "task"), "kind")),
			 "task");
	json_decref(o);
	put_fails("t", "c", "working", 0, 1, MEMD_ECONFLICT, "exists");
	put_fails("t", "c", "working", 2, 0, MEMD_ECONFLICT, "version 1");
	put_fails("nope", "c", "working", 1, 0, MEMD_ENOTFOUND, "nope");
	put_fails("t", "c", "working", 1, 1, MEMD_EINVAL, "create only");
	put_fails("t", "c", "working", -1, 0, MEMD_EINVAL, "version");
	cr_assert_eq(get_code("nope"), MEMD_ENOTFOUND);

	atomic_store(&now_us, T0 + US_PER_S);
	o = put_ok("t", NULL, "c", "completed", 1, 0, 0);
	cr_assert_eq(json_integer_value(json_object_get(o, "version")), 2);
	cr_assert_str_eq(json_string_value(json_object_get(o, "created")), T0_TEXT);
	cr_assert_str_eq(json_string_value(json_object_get(o, "updated")), T1_TEXT);
	json_decref(o);
	put_fails("t", "c", "working", 0, 0, MEMD_ECONFLICT, "completed");
	put_fails("t", "c", "canceled", 2, 0, MEMD_ECONFLICT, "canceled");
	o = get_ok("t", -1);
	cr_assert_str_eq(state_of(o), "completed");
	cr_assert_eq(json_integer_value(json_object_get(o, "version")), 2);
	cr_assert_eq(json_array_size(json_object_get(json_object_get(o, "task"), "history")), 2);
	json_decref(o);
	o = get_ok("t", 1);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(json_object_get(json_object_get(o, "task"), "history"),
						0),
				 "messageId")),
			 "m2");
	json_decref(o);
	o = put_ok("t", NULL, "c", "completed", 0, 0, 0);
	json_decref(o);
}

BOTH(a_null_kind_becomes_task)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	json_t *o;

	cr_assert_eq(memd_task_put(m, "app", "k", NULL,
				   "{\"kind\": null, \"id\": \"k\", \"contextId\": \"c\", "
				   "\"status\": {\"state\": \"working\"}}",
				   0, 0, &out, NULL, &err),
		     0, "%s", err.msg);
	o = json_loads(out, 0, NULL);
	memd_free(out);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(o, "task"), "kind")),
			 "task");
	json_decref(o);
}

/* Every page of a list, the ids in order, as one string. */
static void list_ids(const memd_task_list_options *in, char *ret, size_t cap)
{
	memd_task_list_options o = *in;
	char *cursor = NULL;

	ret[0] = '\0';
	do {
		memd_error err = { .struct_size = sizeof(err) };
		char *out = NULL;
		json_t *page, *tasks, *next;

		o.cursor = cursor;
		cr_assert_eq(memd_task_list(m, "app", &o, &out, &err), 0, "%s", err.msg);
		page = json_loads(out, 0, NULL);
		memd_free(out);
		tasks = json_object_get(page, "tasks");
		for (size_t i = 0; i < json_array_size(tasks); i++) {
			strncat(ret, json_string_value(json_object_get(
					     json_object_get(json_array_get(tasks, i), "task"), "id")),
				cap - strlen(ret) - 1);
		}
		free(cursor);
		next = json_object_get(page, "next_cursor");
		cursor = json_is_string(next) ? strdup(json_string_value(next)) : NULL;
		json_decref(page);
	} while (cursor);
}

BOTH(list_order_cursors_and_filters)
{
	static const char *const ids[LIST_TASKS] = { "a", "b", "c", "d", "e" };
	memd_task_list_options o = { .struct_size = sizeof(o), .limit = 2 };
	memd_error err = { .struct_size = sizeof(err) };
	char got[64], *out = NULL;

	for (size_t i = 0; i < LIST_TASKS; i++) {
		/* a and b saved at one time: the id orders them. */
		atomic_store(&now_us, T0 + (i < 2 ? 0 : (int64_t)i * US_PER_S));
		json_decref(put_ok(ids[i], i % 2 ? "ann" : NULL, i < 3 ? "s1" : "s2",
				   i == 4 ? "failed" : "working", 0, 0, 1));
	}
	list_ids(&o, got, sizeof(got));
	cr_assert_str_eq(got, "edcba");
	o.context_id = "s1";
	list_ids(&o, got, sizeof(got));
	cr_assert_str_eq(got, "cba");
	o.context_id = NULL;
	o.user = "ann";
	list_ids(&o, got, sizeof(got));
	cr_assert_str_eq(got, "db");
	o.user = NULL;
	o.state = "failed";
	list_ids(&o, got, sizeof(got));
	cr_assert_str_eq(got, "e");
	o.state = "finished";
	cr_assert_eq(memd_task_list(m, "app", &o, &out, &err), MEMD_EINVAL);
	cr_assert_null(out);

	/* A save moves a task to the front; a delete takes it out. */
	atomic_store(&now_us, T0 + 10 * US_PER_S);
	json_decref(put_ok("b", NULL, "s1", "working", 0, 0, 0));
	cr_assert_eq(memd_task_delete(m, "app", "c", 2, &err), MEMD_ECONFLICT);
	cr_assert_eq(memd_task_delete(m, "app", "c", 1, &err), 0, "%s", err.msg);
	cr_assert_eq(memd_task_delete(m, "app", "c", 0, &err), MEMD_ENOTFOUND);
	o.state = NULL;
	list_ids(&o, got, sizeof(got));
	cr_assert_str_eq(got, "beda");
}

BOTH(a_users_tasks_go_with_the_session_and_the_user)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;

	cr_assert_eq(memd_session_create(m, "app", "ann", "{\"id\": \"s1\"}", &out, &err), 0, "%s",
		     err.msg);
	memd_free(out);
	json_decref(put_ok("t1", "ann", "s1", "working", 0, 0, 1));
	json_decref(put_ok("t2", "ann", "s2", "working", 0, 0, 1));
	json_decref(put_ok("t3", NULL, "s1", "working", 0, 0, 1));
	json_decref(put_ok("t4", "bob", "s1", "working", 0, 0, 1));
	cr_assert_eq(memd_session_delete(m, "app", "ann", "s1", &err), 0, "%s", err.msg);
	cr_assert_eq(get_code("t1"), MEMD_ENOTFOUND);
	cr_assert_eq(get_code("t2"), 0);
	cr_assert_eq(get_code("t3"), 0);
	cr_assert_eq(get_code("t4"), 0);
	cr_assert_eq(memd_user_delete(m, "app", "ann", &err), 0, "%s", err.msg);
	cr_assert_eq(get_code("t2"), MEMD_ENOTFOUND);
	cr_assert_eq(get_code("t3"), 0);
	cr_assert_eq(get_code("t4"), 0);
}
