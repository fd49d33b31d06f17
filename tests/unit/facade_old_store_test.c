/* SPDX-License-Identifier: MIT */
/*
 * facade_old_store: a store built before ABI 1.5 (the old_store fixture,
 * a 1.1 store) still loads, and every run checkpoint and A2A task call
 * answers MEMD_ENOTSUP naming the store and the op it lacks (an explicit
 * expiry sweep too; memd serve starts no sweep thread for such a store).
 * A 1.5 store (the old_checkpoints fixture) keeps no task paths: put
 * writes with one reach it as 1.5 writes, and its writes read back with
 * the path "".
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include <memd/memd.h>

#include "test_util.h"

#define B64_HELLO "aGVsbG8=" /* "hello" */

static void expect_enotsup(int32_t r, const memd_error *err, const char *op)
{
	char want[128];

	snprintf(want, sizeof(want), "stores.main: does not support %s", op);
	cr_assert_eq(r, MEMD_ENOTSUP, "%s: got %d (%s)", op, (int)r, err->msg);
	cr_assert_not_null(strstr(err->msg, want), "message '%s' lacks '%s'", err->msg, want);
}

/* memd over the fixture store plugin (from this build's tests/fixtures),
 * in a new dir. */
static memd *open_fixture(const char *plugin, tu_dir *dir)
{
	char yaml[2 * TU_PATH_MAX];
	const char *build = getenv("MEMD_BUILD_ROOT");

	cr_assert_not_null(build);
	tu_dir_make(dir);
	snprintf(yaml, sizeof(yaml),
		 "plugins:\n  path: [%s/tests/fixtures]\nstores:\n  main: {plugin: %s}\n", build,
		 plugin);
	return tu_open(dir, yaml);
}

Test(facade_old_store, checkpoints_and_tasks_answer_enotsup_naming_the_store)
{
	memd_error err = { 0 };
	char *out = NULL;
	tu_dir dir;
	memd *m = open_fixture("old_store", &dir);

	expect_enotsup(memd_checkpoint_put(m, "a", "u", "s", "", "c1",
					   "{\"type\": \"json\", \"checkpoint\": \"" B64_HELLO "\"}",
					   &out, &err),
		       &err, "checkpoint_put");
	expect_enotsup(memd_checkpoint_put_writes(m, "a", "u", "s", "", "c1",
						  "{\"task_id\": \"t\", \"writes\": []}", &err),
		       &err, "checkpoint_put_writes");
	expect_enotsup(memd_checkpoint_get(m, "a", "u", "s", "", NULL, &out, &err), &err,
		       "checkpoint_get");
	expect_enotsup(memd_checkpoint_list(m, "a", "u", NULL, &out, &err), &err,
		       "checkpoint_list");
	expect_enotsup(memd_checkpoint_delete(m, "a", "u", "s", NULL, &err), &err,
		       "checkpoint_delete");
	expect_enotsup(memd_checkpoint_resumable(m, "a", NULL, &out, &err), &err,
		       "checkpoint_resumable");
	expect_enotsup(memd_task_put(m, "a", "t1", NULL,
				     "{\"id\": \"t1\", \"contextId\": \"c\", "
				     "\"status\": {\"state\": \"submitted\"}}",
				     0, 0, &out, NULL, &err),
		       &err, "task_put");
	expect_enotsup(memd_task_get(m, "a", "t1", -1, &out, &err), &err, "task_get");
	expect_enotsup(memd_task_list(m, "a", NULL, &out, &err), &err, "task_list");
	expect_enotsup(memd_task_delete(m, "a", "t1", 0, &err), &err, "task_delete");
	expect_enotsup(memd_checkpoints_sweep(m, &out, &err), &err, "checkpoint_expire");
	cr_assert_null(out);
	memd_close(m);
	tu_dir_remove(&dir);
}

Test(facade_old_store, a_1_5_store_keeps_writes_without_their_task_path)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *t, *pw;
	tu_dir dir;
	memd *m = open_fixture("old_checkpoints", &dir);
	cr_assert_eq(memd_checkpoint_put_writes(
			     m, "a", "u", "s", "", "c1",
			     "{\"task_id\": \"t\", \"task_path\": \"~__pregel_pull, agent\", "
			     "\"writes\": [{\"idx\": 0, \"channel\": \"c0\", \"type\": \"json\", "
			     "\"value\": \"\"}, {\"idx\": 1, \"channel\": \"c1\", \"type\": "
			     "\"json\", \"value\": \"\"}]}",
			     &err),
		     0, "%s", err.msg);
	cr_assert_eq(memd_checkpoint_get(m, "a", "u", "s", "", "c1", &out, &err), 0, "%s", err.msg);
	t = tu_json(out);
	pw = json_object_get(t, "pending_writes");
	cr_assert_eq(json_array_size(pw), 2);
	for (size_t k = 0; k < 2; k++)
		cr_assert_str_eq(json_string_value(json_object_get(json_array_get(pw, k), "task_path")),
				 "");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(pw, 0), "task_id")), "z");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(pw, 1), "channel")), "c1");
	json_decref(t);
	memd_close(m);
	tu_dir_remove(&dir);
}
