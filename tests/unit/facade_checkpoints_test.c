/* SPDX-License-Identifier: MIT */
/*
 * Run checkpoints through the libmemd facade (memd.h "run checkpoints")
 * with the facade clock driven by the test: expiry from the app's
 * timeout (invisible to every read the moment it passes, deleted by
 * memd_checkpoints_sweep in bounded batches, a session's head passing to
 * its newest remaining root checkpoint), the background sweep of memd
 * serve's configuration deleting what expired, and the list options
 * struct read by its struct_size. Each test runs on the memory store and
 * on SQLite.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <memd/memd.h>

#include "service/service_int.h"
#include "test_util.h"

#define US_PER_S 1000000LL
/* 2026-11-20T02:00:00Z */
#define T0 1795140000000000LL
#define TIMEOUT_S 60
/* More than the sweep's batch (500) a few times over. */
#define MANY 1234
/* How long a test waits for the background sweep. */
#define SWEEP_WAIT_MS 10000
/* Room for the config that follows the store. */
#define MORE_YAML_MAX 512

static tu_dir dir;
static memd *m;
static _Atomic int64_t now_us = T0;

/* Open memd over plugin (sweep every sweep_s seconds; 0 = none). */
static void open_store(const char *plugin, int sweep_s)
{
	char yaml[MORE_YAML_MAX];

	atomic_store(&now_us, T0);
	snprintf(yaml, sizeof(yaml),
		 "checkpoints: {timeout_s: %d, sweep_interval_s: %d}\n"
		 "apps:\n"
		 "  keep:\n"
		 "    working_memory: {strategy: buffer_window}\n"
		 "    checkpoints: {timeout_s: 0}\n",
		 TIMEOUT_S, sweep_s);
	m = tu_open_store(&dir, plugin, yaml, &now_us);
}

static void setup_memory(void)
{
	open_store("memory", 0);
}

static void teardown(void)
{
	tu_close_store(m, &dir);
}

static void setup_sqlite(void)
{
	open_store("sqlite", 0);
}

static void setup_memory_sweeping(void)
{
	open_store("memory", 1);
}

static void setup_sqlite_sweeping(void)
{
	open_store("sqlite", 1);
}

TestSuite(facade_checkpoints_memory, .init = setup_memory, .fini = teardown);
TestSuite(facade_checkpoints_sqlite, .init = setup_sqlite, .fini = teardown);
TestSuite(facade_checkpoints_sweep_memory, .init = setup_memory_sweeping, .fini = teardown);
TestSuite(facade_checkpoints_sweep_sqlite, .init = setup_sqlite_sweeping, .fini = teardown);

/* Each test body runs on every store listed. */
#define STORES(name)                                                \
	static void name(void);                                     \
	Test(facade_checkpoints_memory, name) { name(); }           \
	Test(facade_checkpoints_sqlite, name) { name(); }           \
	static void name(void)

/* Assert r == 0 and take out's JSON (out cleared). */
static json_t *ok_json(int32_t r, const memd_error *err, char **out)
{
	char *text = *out;
	cr_assert_eq(r, 0, "failed (%d): %s", (int)r, err->msg);
	*out = NULL;
	return tu_json(text);
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void at(int64_t seconds)
{
	atomic_store(&now_us, T0 + seconds * US_PER_S);
}

static json_t *put(const char *app, const char *sid, const char *id, const char *state)
{
	memd_error err = { 0 };
	char *out = NULL, body[256];

	snprintf(body, sizeof(body),
		 "{\"type\": \"json\", \"checkpoint\": \"aGk=\", \"run_state\": \"%s\"}",
		 state ? state : "running");
	return ok_json(memd_checkpoint_put(m, app, "u", sid, NULL, id, body, &out, &err), &err,
		       &out);
}

static int32_t get(const char *app, const char *sid, const char *id)
{
	memd_error err = { 0 };
	char *out = NULL;
	int32_t r = memd_checkpoint_get(m, app, "u", sid, "", id, &out, &err);

	memd_free(out);
	return r;
}

static json_int_t sweep(void)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *o;
	json_int_t n;

	o = ok_json(memd_checkpoints_sweep(m, &out, &err), &err, &out);
	n = json_integer_value(json_object_get(o, "checkpoints_expired"));
	json_decref(o);
	return n;
}

static size_t listed(const char *app)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *o;
	size_t n;

	o = ok_json(memd_checkpoint_list(m, app, "u", NULL, &out, &err), &err, &out);
	n = json_array_size(json_object_get(o, "checkpoints"));
	json_decref(o);
	return n;
}

/* app's resumable runs as "session:checkpoint_id:resume,...". */
static void resumable(const char *app, char *buf, size_t cap)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *o, *s;
	size_t i;

	o = ok_json(memd_checkpoint_resumable(m, app, NULL, &out, &err), &err, &out);
	buf[0] = '\0';
	json_array_foreach(json_object_get(o, "sessions"), i, s) {
		char one[128];
		snprintf(one, sizeof(one), "%s%s:%s:%s", i ? "," : "",
			 json_string_value(json_object_get(s, "session_id")),
			 json_string_value(json_object_get(s, "checkpoint_id")),
			 json_string_value(json_object_get(s, "resume")));
		strncat(buf, one, cap - strlen(buf) - 1);
	}
	json_decref(o);
}

/* Rows the store holds for (app, u), expired or not (a read at time 0
 * sees every row). */
static int32_t count_row(void *ud, const memd_checkpoint *c)
{
	(void)c;
	(*(size_t *)ud)++;
	return 0;
}

static size_t stored(const char *app)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = { .struct_size = sizeof(sc), .app = app, .user = "u" };
	memd_checkpoint_query q = { .struct_size = sizeof(q), .limit = 100000, .now_us = 0 };
	size_t n = 0;
	memd_checkpoint_sink sink = { sizeof(sink), &n, count_row, NULL, NULL };
	memd_error err = { 0 };

	cr_assert_eq(store_checkpoint_list(m->sessions, &call, &sc, &q, &sink, &err), 0, "%s",
		     err.msg);
	return n;
}

STORES(expiry_by_the_clock_then_the_sweep)
{
	json_t *s = put("a", "t1", "0001", NULL);
	char got[256];

	json_decref(put("keep", "t1", "0001", NULL));
	cr_assert_str_eq(json_string_value(json_object_get(s, "expires_at")),
			 "2026-11-20T02:01:00.000000Z", "the put's time + timeout_s");
	json_decref(s);
	at(TIMEOUT_S - 1);
	cr_assert_eq(get("a", "t1", "0001"), 0);
	cr_assert_eq(get("a", "t1", NULL), 0);
	cr_assert_eq(listed("a"), 1);
	resumable("a", got, sizeof(got));
	cr_assert_str_eq(got, "t1:0001:automatic");
	cr_assert_eq(sweep(), 0, "nothing expired yet");

	at(TIMEOUT_S);
	cr_assert_eq(get("a", "t1", "0001"), MEMD_ENOTFOUND, "gone the moment it expires");
	cr_assert_eq(get("a", "t1", NULL), MEMD_ENOTFOUND);
	cr_assert_eq(listed("a"), 0);
	resumable("a", got, sizeof(got));
	cr_assert_str_eq(got, "");
	cr_assert_eq(stored("a"), 1, "still stored until the sweep");
	cr_assert_eq(sweep(), 1);
	cr_assert_eq(stored("a"), 0);
	cr_assert_eq(sweep(), 0);

	at(100 * 365 * 86400LL);
	cr_assert_eq(get("keep", "t1", "0001"), 0, "timeout_s 0: never expires");
	cr_assert_eq(sweep(), 0);
}

STORES(the_head_passes_when_it_is_swept)
{
	char got[256];

	/* The head (greatest root id) expires first; an older checkpoint
	 * put later lives longer. */
	json_decref(put("a", "t1", "0002", "running"));
	at(30);
	json_decref(put("a", "t1", "0001", "interrupted"));
	resumable("a", got, sizeof(got));
	cr_assert_str_eq(got, "t1:0002:automatic");
	at(TIMEOUT_S + 1);
	resumable("a", got, sizeof(got));
	cr_assert_str_eq(got, "", "an expired head lists nothing");
	cr_assert_eq(sweep(), 1);
	resumable("a", got, sizeof(got));
	cr_assert_str_eq(got, "t1:0001:approval", "the newest remaining root checkpoint");
	at(30 + TIMEOUT_S);
	resumable("a", got, sizeof(got));
	cr_assert_str_eq(got, "");
	cr_assert_eq(sweep(), 1);
	cr_assert_eq(stored("a"), 0);
}

STORES(the_sweep_goes_through_batches)
{
	for (int i = 0; i < MANY; i++) {
		char id[16];
		snprintf(id, sizeof(id), "%06d", i);
		json_decref(put("a", i % 2 ? "t1" : "t2", id, NULL));
	}
	json_decref(put("keep", "t1", "0001", NULL));
	at(TIMEOUT_S);
	cr_assert_eq(sweep(), MANY, "every batch of the pass");
	cr_assert_eq(stored("a"), 0);
	cr_assert_eq(stored("keep"), 1);
}

/* memd serve's sweep: a background pass every sweep_interval_s. */
static void background_sweep(void)
{
	int64_t until;

	json_decref(put("a", "t1", "0001", NULL));
	json_decref(put("keep", "t1", "0001", NULL));
	at(TIMEOUT_S);
	until = mono_ms() + SWEEP_WAIT_MS;
	while (stored("a") && mono_ms() < until)
		nanosleep(&(struct timespec){ 0, 20 * 1000000L }, NULL);
	cr_assert_eq(stored("a"), 0, "the background sweep deleted the expired checkpoint");
	cr_assert_eq(stored("keep"), 1);
}

Test(facade_checkpoints_sweep_memory, background_sweep)
{
	background_sweep();
}

Test(facade_checkpoints_sweep_sqlite, background_sweep)
{
	background_sweep();
}

STORES(list_options_read_by_struct_size)
{
	memd_checkpoint_list_options o = { .struct_size = sizeof(o), .limit = 1 };
	memd_error err = { 0 };
	char *out = NULL;
	json_t *page;

	json_decref(put("a", "t1", "0001", NULL));
	json_decref(put("a", "t2", "0002", NULL));
	o.session_id = "t1";
	page = ok_json(memd_checkpoint_list(m, "a", "u", &o, &out, &err), &err, &out);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(json_object_get(page, "checkpoints"), 0), "session_id")),
			 "t1");
	json_decref(page);
	/* A caller built against a shorter struct: members past it read as 0. */
	o.struct_size = offsetof(memd_checkpoint_list_options, session_id);
	page = ok_json(memd_checkpoint_list(m, "a", "u", &o, &out, &err), &err, &out);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(json_object_get(page, "checkpoints"), 0), "session_id")),
			 "t2", "no session filter");
	cr_assert_not_null(json_string_value(json_object_get(page, "next_cursor")));
	json_decref(page);
}

/* A filtered list of full tuples reads the store in pages of its own
 * (CHECKPOINT_SCAN_PAGE rows) and answers pages of limit matches: walked
 * by its cursor, every match comes once, newest first, each with its own
 * writes in (task path, task id, idx) order, and the last page says there
 * is no next. */
/* Put checkpoint i of session t1 of app a, its id i in four digits (into
 * id, at least NUMBERED_ID bytes), its metadata {"k": i % every}. */
#define NUMBERED_ID 16
static void put_numbered(int i, int every, char *id)
{
	memd_error err = { 0 };
	char *out = NULL, body[128];

	snprintf(id, NUMBERED_ID, "%04d", i);
	snprintf(body, sizeof(body),
		 "{\"type\": \"json\", \"checkpoint\": \"aGk=\", \"metadata\": {\"k\": %d}}",
		 i % every);
	cr_assert_eq(memd_checkpoint_put(m, "a", "u", "t1", NULL, id, body, &out, &err), 0, "%s",
		     err.msg);
	free(out);
}

#define PAGED 210 /* checkpoints: more than one of the list's store pages */
#define PAGED_LIMIT 30
#define PAGED_EVERY 3 /* every third matches the filter */

STORES(list_pages_full_tuples_through_the_filter)
{
	memd_checkpoint_list_options o = { .struct_size = sizeof(o), .limit = PAGED_LIMIT,
					   .session_id = "t1", .full = 1,
					   .metadata_json = "{\"k\": 0}" };
	memd_error err = { 0 };
	/* Task "b" on the first path, task "a" on the second. */
	static const char *const writes[] = {
		"{\"task_id\": \"b\", \"task_path\": \"~p, 1\", \"writes\": [{\"idx\": 0, "
		"\"channel\": \"x\", \"type\": \"json\", \"value\": \"\"}]}",
		"{\"task_id\": \"a\", \"task_path\": \"~p, 2\", \"writes\": [{\"idx\": 0, "
		"\"channel\": \"y\", \"type\": \"json\", \"value\": \"\"}]}",
	};
	char *out = NULL, *cursor = NULL, id[NUMBERED_ID];
	int next = PAGED - 1, pages = 0;

	for (int i = 0; i < PAGED; i++) {
		put_numbered(i, PAGED_EVERY, id);
		for (size_t k = 0; k < sizeof(writes) / sizeof(writes[0]); k++)
			cr_assert_eq(memd_checkpoint_put_writes(m, "a", "u", "t1", NULL, id, writes[k],
								&err),
				     0, "%s", err.msg);
	}
	while (next % PAGED_EVERY)
		next--;
	for (;;) {
		json_t *page, *rows;

		o.cursor = cursor;
		page = ok_json(memd_checkpoint_list(m, "a", "u", &o, &out, &err), &err, &out);
		rows = json_object_get(page, "checkpoints");
		pages++;
		for (size_t i = 0; i < json_array_size(rows); i++) {
			json_t *row = json_array_get(rows, i);
			json_t *pw = json_object_get(row, "pending_writes");
			snprintf(id, sizeof(id), "%04d", next);
			cr_assert_str_eq(json_string_value(json_object_get(row, "checkpoint_id")), id);
			cr_assert_eq(json_array_size(pw), 2, "%s", id);
			cr_assert_str_eq(json_string_value(json_object_get(json_array_get(pw, 0),
									   "task_id")),
					 "b", "%s: by task path first", id);
			cr_assert_str_eq(json_string_value(json_object_get(json_array_get(pw, 1),
									   "task_path")),
					 "~p, 2");
			next -= PAGED_EVERY;
		}
		free(cursor);
		cursor = NULL;
		if (json_is_null(json_object_get(page, "next_cursor"))) {
			json_decref(page);
			break;
		}
		cr_assert_eq(json_array_size(rows), PAGED_LIMIT);
		cursor = strdup(json_string_value(json_object_get(page, "next_cursor")));
		json_decref(page);
	}
	cr_assert_lt(next, 0, "every match listed; %d left", next + PAGED_EVERY);
	cr_assert_eq(pages, (PAGED / PAGED_EVERY + PAGED_LIMIT - 1) / PAGED_LIMIT);
}

/* A filter that matches sparsely makes one list call read several store
 * pages (CHECKPOINT_SCAN_PAGE rows each): the second page's keyset is the
 * first page's last row, which the store still reads while it delivers
 * the second page's rows. */
#define SPARSE 450
#define SPARSE_EVERY 150 /* fewer matches than the limit in a store page */

STORES(list_reads_several_store_pages_in_one_call)
{
	memd_checkpoint_list_options o = { .struct_size = sizeof(o), .limit = 10,
					   .session_id = "t1", .ns = "",
					   .metadata_json = "{\"k\": 0}" };
	memd_error err = { 0 };
	static const char *const want[] = { "0300", "0150", "0000" };
	char *out = NULL, id[NUMBERED_ID];
	json_t *page, *rows;

	for (int i = 0; i < SPARSE; i++)
		put_numbered(i, SPARSE_EVERY, id);
	page = ok_json(memd_checkpoint_list(m, "a", "u", &o, &out, &err), &err, &out);
	rows = json_object_get(page, "checkpoints");
	cr_assert_eq(json_array_size(rows), 3, "%zu rows", json_array_size(rows));
	for (size_t i = 0; i < 3; i++)
		cr_assert_str_eq(json_string_value(json_object_get(json_array_get(rows, i),
								   "checkpoint_id")),
				 want[i]);
	cr_assert(json_is_null(json_object_get(page, "next_cursor")));
	json_decref(page);
}
