/* SPDX-License-Identifier: MIT */
/*
 * sqlite-migrate: a database made by an older version of the sqlite store
 * is migrated in place when the store opens it, and keeps working.
 *
 * Schema version 2 orders events_by_id by the id first; version 3 makes
 * events_by_seq cover timestamp and role and drops events_by_time. The
 * test makes a store, appends to it, turns the file back into version 1's
 * shape (its indexes, user_version 1) with a connection of its own,
 * reopens the store and checks the indexes, the data, idempotent replays
 * (which look ids up in events_by_id), after_time reads (which walk
 * events_by_seq) and new appends.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "plugins/loader.h"

#define APP "mig"
#define USER "u"
#define SID "s"
#define ID_MAX 64
#define LINE_MAX_LEN 256
#define MAX_SEARCH_DIRS 16
#define FTW_FDS 8
#define SCHEMA_LATEST 3
#define N_BATCHES 50
#define AFTER_TIME 40 /* batch i has timestamp i + 1 */
#define NEWEST_LIMIT 3
#define MAX_LOADED 128

static const char SQL_BACK_TO_V1[] =
	"DROP INDEX events_by_id;"
	"CREATE UNIQUE INDEX events_by_id ON events (app, user, session, id);"
	"DROP INDEX events_by_seq;"
	"CREATE UNIQUE INDEX events_by_seq ON events (app, user, session, seq);"
	"CREATE INDEX events_by_time ON events (app, user, session, timestamp_us, seq, role);"
	"PRAGMA user_version = 1;";

typedef struct store {
	config_node *cfg;
	loader_plugin *plugin;
	loader_instance *inst;
	const memd_store_ops *ops;
	void *h;
} store;

static char tmp_dir[PATH_MAX];
static char db_path[PATH_MAX + 16];
static char *search_buf;
static const char *search_dirs[MAX_SEARCH_DIRS + 1];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void setup(void)
{
	const char *env = getenv("MEMD_PLUGIN_PATH");
	const char *tmp = getenv("TMPDIR");
	size_t n = 0;

	cr_assert(env && env[0], "MEMD_PLUGIN_PATH must name the built plugins");
	search_buf = strdup(env);
	cr_assert(search_buf);
	for (char *save = NULL, *dir = strtok_r(search_buf, ":", &save);
	     dir && n < MAX_SEARCH_DIRS; dir = strtok_r(NULL, ":", &save))
		search_dirs[n++] = dir;
	search_dirs[n] = NULL;
	snprintf(tmp_dir, sizeof(tmp_dir), "%s/memd-sqlite-mig-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	cr_assert(mkdtemp(tmp_dir), "mkdtemp: %s", strerror(errno));
	snprintf(db_path, sizeof(db_path), "%s/m.db", tmp_dir);
}

static void teardown(void)
{
	if (tmp_dir[0])
		nftw(tmp_dir, remove_entry, FTW_FDS, FTW_DEPTH | FTW_PHYS);
	tmp_dir[0] = '\0';
	free(search_buf);
	search_buf = NULL;
}

static void store_open(store *s)
{
	char yaml[PATH_MAX + LINE_MAX_LEN];
	memd_error err = { 0 };

	memset(s, 0, sizeof(*s));
	snprintf(yaml, sizeof(yaml), "plugin: sqlite\npath: \"%s\"\n", db_path);
	cr_assert_eq(config_parse_string(yaml, strlen(yaml), "sqlite-migrate", &s->cfg, &err), 0,
		     "%s", err.msg);
	cr_assert_eq(loader_open("sqlite", search_dirs, &s->plugin, &err), 0, "%s", err.msg);
	cr_assert_eq(loader_instance_create(s->plugin, "stores.mig", s->cfg, "plugin", NULL,
					    &s->inst, &err),
		     0, "open the store: %s", err.msg);
	s->ops = loader_store_ops(s->plugin);
	s->h = loader_instance_handle(s->inst);
}

static void store_close(store *s)
{
	loader_instance_destroy(s->inst);
	loader_close(s->plugin);
	config_free(s->cfg);
	memset(s, 0, sizeof(*s));
}

/* Batch i: two events with ids "e<i>-a", "e<i>-b"; result in seqs. */
static int32_t append(store *s, int i, int64_t *seqs, memd_append_result *res, memd_error *err)
{
	char ids[2][ID_MAX];
	memd_event ev[2];
	const memd_event *ptr[2] = { &ev[0], &ev[1] };
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_append a = { .struct_size = sizeof(a), .events = ptr, .n_events = 2, .now_us = 1 };

	for (int k = 0; k < 2; k++) {
		snprintf(ids[k], ID_MAX, "e%d-%c", i, 'a' + k);
		ev[k] = (memd_event){ .struct_size = sizeof(memd_event), .id = ids[k],
				      .author = "t", .role = "user", .content_json = "{}",
				      .text = ids[k], .timestamp_us = i + 1 };
	}
	*res = (memd_append_result){ .struct_size = sizeof(*res), .seqs = seqs };
	return s->ops->append(s->h, NULL, &sc, &a, res, err);
}

static int64_t query_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;
	int64_t v;

	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql,
		     sqlite3_errmsg(db));
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s: no row", sql);
	v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* The text of the first column of sql's first row. */
static void first_row_text(sqlite3 *db, const char *sql, char *ret, size_t size)
{
	sqlite3_stmt *st = NULL;

	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql,
		     sqlite3_errmsg(db));
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s: no row", sql);
	snprintf(ret, size, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
}

/* The name of events_by_id's first column. */
static void first_id_column(sqlite3 *db, char *ret, size_t size)
{
	first_row_text(db, "SELECT name FROM pragma_index_info('events_by_id') WHERE seqno = 0",
		       ret, size);
}

typedef struct loaded {
	int64_t seqs[MAX_LOADED];
	size_t n;
} loaded;

static int32_t keep_seq(void *userdata, const memd_event *e)
{
	loaded *l = userdata;

	cr_assert_lt(l->n, MAX_LOADED);
	l->seqs[l->n++] = e->seq;
	return 0;
}

/* The seqs of the events after AFTER_TIME (limit 0: all; NEWEST: the
 * newest limit), in the order the store delivers them. */
static void load_after_time(store *s, uint32_t limit, uint32_t flags, loaded *ret)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_event_query q = { .struct_size = sizeof(q), .after_time_us = AFTER_TIME,
			       .limit = limit, .flags = flags };
	memd_event_sink sink = { .struct_size = sizeof(sink), .event = keep_seq, .userdata = ret };
	memd_error err = { 0 };

	ret->n = 0;
	cr_assert_eq(s->ops->events_load(s->h, NULL, &sc, &q, &sink, &err), 0, "%s", err.msg);
}

static int32_t ignore_session(void *userdata, const memd_session *s)
{
	(void)userdata;
	(void)s;
	return 0;
}

Test(sqlite_migrate, version_1_database_migrates_and_keeps_working, .init = setup,
     .fini = teardown, .timeout = 30)
{
	memd_session_sink sink = { .struct_size = sizeof(sink), .session = ignore_session };
	memd_session sess = { .struct_size = sizeof(sess), .app = APP, .user = USER, .id = SID,
			      .created_us = 1, .updated_us = 1 };
	memd_append_result res;
	memd_error err = { 0 };
	int64_t seqs[2];
	char col[ID_MAX];
	sqlite3 *db = NULL;
	store s;

	store_open(&s);
	cr_assert_eq(s.ops->session_create(s.h, NULL, &sess, NULL, &sink, &err), 0, "%s", err.msg);
	for (int i = 0; i < N_BATCHES; i++)
		cr_assert_eq(append(&s, i, seqs, &res, &err), 0, "%s", err.msg);
	store_close(&s);

	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(query_int(db, "PRAGMA user_version"), SCHEMA_LATEST);
	first_id_column(db, col, sizeof(col));
	cr_assert_str_eq(col, "id");
	cr_assert_eq(sqlite3_exec(db, SQL_BACK_TO_V1, NULL, NULL, NULL), SQLITE_OK, "%s",
		     sqlite3_errmsg(db));
	first_id_column(db, col, sizeof(col));
	cr_assert_str_eq(col, "app");
	sqlite3_close(db);

	store_open(&s);
	/* A replay finds the stored ids through the rebuilt index. */
	cr_assert_eq(append(&s, 7, seqs, &res, &err), 0, "%s", err.msg);
	cr_assert(res.flags & MEMD_APPEND_REPLAYED);
	cr_assert_eq(seqs[0], 15);
	cr_assert_eq(seqs[1], 16);
	cr_assert_eq(res.version, N_BATCHES);
	cr_assert_eq(append(&s, N_BATCHES, seqs, &res, &err), 0, "%s", err.msg);
	cr_assert(!(res.flags & MEMD_APPEND_REPLAYED));
	cr_assert_eq(seqs[0], 2 * N_BATCHES + 1);
	cr_assert_eq(res.version, N_BATCHES + 1);
	/* after_time through the rebuilt events_by_seq: batches AFTER_TIME ..
	 * N_BATCHES, two events each, in seq order; NEWEST keeps the last. */
	{
		loaded l;
		int64_t first = 2 * AFTER_TIME + 1, last = 2 * N_BATCHES + 2;

		load_after_time(&s, 0, 0, &l);
		cr_assert_eq(l.n, (size_t)(last - first + 1));
		for (size_t i = 0; i < l.n; i++)
			cr_assert_eq(l.seqs[i], first + (int64_t)i);
		load_after_time(&s, NEWEST_LIMIT, MEMD_EVQ_NEWEST, &l);
		cr_assert_eq(l.n, NEWEST_LIMIT);
		for (size_t i = 0; i < l.n; i++)
			cr_assert_eq(l.seqs[i], last - NEWEST_LIMIT + 1 + (int64_t)i);
		load_after_time(&s, NEWEST_LIMIT, 0, &l);
		cr_assert_eq(l.n, NEWEST_LIMIT);
		cr_assert_eq(l.seqs[0], first);
	}
	store_close(&s);

	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(query_int(db, "PRAGMA user_version"), SCHEMA_LATEST);
	first_id_column(db, col, sizeof(col));
	cr_assert_str_eq(col, "id", "the store did not migrate events_by_id");
	cr_assert_eq(query_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'events_by_time'"),
		     0, "events_by_time was not dropped");
	first_row_text(db, "SELECT name FROM pragma_index_info('events_by_seq') WHERE seqno = 4", col,
		       sizeof(col));
	cr_assert_str_eq(col, "timestamp_us", "events_by_seq does not cover the timestamp");
	cr_assert_eq(query_int(db, "SELECT count(*) FROM events"), 2 * N_BATCHES + 2);
	first_row_text(db, "PRAGMA integrity_check", col, sizeof(col));
	cr_assert_str_eq(col, "ok", "integrity_check: %s", col);
	sqlite3_close(db);
}
