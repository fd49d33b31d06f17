/* SPDX-License-Identifier: MIT */
/*
 * sqlite-migrate: a database made by an older version of the sqlite store
 * is migrated in place when the store opens it, and keeps working.
 *
 * Schema version 2 orders events_by_id by the id first; version 3 makes
 * events_by_seq cover timestamp and role and drops events_by_time;
 * version 4 adds lanes, inboxes and the sessions' lifecycle and usage
 * columns; versions 5 and 6 add transcripts; version 7 adds memories,
 * their history and the sessions' memory cursor; version 8 adds run
 * checkpoints (their writes and heads) and A2A tasks; version 9 the task
 * path of checkpoint writes. Each test makes a
 * store, writes to it, turns the file back
 * into an older version's shape with a connection of its own, reopens
 * the store and checks the schema, the data and that it keeps working:
 * from version 1, idempotent replays (which look ids up in events_by_id),
 * after_time reads (which walk events_by_seq) and new appends; from
 * version 3, sessions, events and state as they were, with the new
 * members unset, and lanes, inboxes and usage on the old sessions; from
 * version 6, old sessions at memory_seq 0 (their events unread, so
 * pending), memories committed with the cursor, and the old feed records;
 * from version 7, checkpoints and tasks on an old session, which its
 * delete then takes; from version 8, old writes with the path "" in
 * (task_id, idx) order, new ones with theirs ordered by path before that.
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
#define SCHEMA_LATEST 9
#define N_BATCHES 50
#define AFTER_TIME 40 /* batch i has timestamp i + 1 */
#define NEWEST_LIMIT 3
#define MAX_LOADED 128

/* Undo version 9 (the task path of checkpoint writes). */
#define UNDO_V9 "ALTER TABLE checkpoint_writes DROP COLUMN task_path;"

static const char SQL_BACK_TO_V8[] = UNDO_V9 "PRAGMA user_version = 8;";

/* Undo version 8 (checkpoints, their writes and heads; tasks). */
#define UNDO_V8 \
	"DROP TABLE checkpoint_writes;" \
	"DROP TABLE checkpoint_heads;" \
	"DROP TABLE checkpoints;" \
	"DROP TABLE tasks;"

static const char SQL_BACK_TO_V7[] = UNDO_V9 UNDO_V8 "PRAGMA user_version = 7;";

/* Undo version 7 (memories, their history, MEMORY_DELETE records'
 * memory ids, the sessions' memory cursor and its pending index). */
#define UNDO_V7 \
	"DROP TABLE memory_history;" \
	"DROP TABLE memories;" \
	"ALTER TABLE feed_deletes DROP COLUMN memory;" \
	"DROP INDEX sessions_pending;" \
	"ALTER TABLE sessions DROP COLUMN memory_seq;"

static const char SQL_BACK_TO_V6[] = UNDO_V9 UNDO_V8 UNDO_V7 "PRAGMA user_version = 6;";

/* Undo versions 7, 6 and 5 (transcripts: hidden marks, operations, state
 * history and its index by seq, HIDE records, message_count, the activity
 * index). */
static const char SQL_BACK_TO_V4[] =
	UNDO_V9
	UNDO_V8
	UNDO_V7
	"DROP INDEX IF EXISTS state_history_by_seq;"
	"DROP TABLE feed_hides;"
	"DROP TABLE state_history;"
	"DROP TABLE operations;"
	"DROP INDEX sessions_by_activity;"
	"ALTER TABLE sessions DROP COLUMN message_count;"
	"DROP INDEX events_by_seq;"
	"DROP INDEX events_hidden;"
	"DROP INDEX events_summaries;"
	"ALTER TABLE events DROP COLUMN hidden_us;"
	"ALTER TABLE events DROP COLUMN hidden_by;"
	"ALTER TABLE events DROP COLUMN hidden_kind;"
	"ALTER TABLE events DROP COLUMN operation;"
	"CREATE INDEX events_by_seq ON events (app, user, session, seq, timestamp_us, role);"
	"CREATE INDEX events_summaries ON events (app, user, session, seq) WHERE role = 'summary';"
	"PRAGMA user_version = 4;";

/* Undo version 4 (lanes, the sessions' lifecycle and usage columns). */
static const char SQL_BACK_TO_V3[] =
	"DROP TABLE inbox;"
	"DROP TABLE lanes;"
	"DROP INDEX sessions_by_platform;"
	"DROP INDEX sessions_by_lane;"
	"DROP INDEX sessions_ended;"
	"ALTER TABLE sessions DROP COLUMN lane_key;"
	"ALTER TABLE sessions DROP COLUMN origin;"
	"ALTER TABLE sessions DROP COLUMN origin_platform;"
	"ALTER TABLE sessions DROP COLUMN previous_session;"
	"ALTER TABLE sessions DROP COLUMN start_reason;"
	"ALTER TABLE sessions DROP COLUMN end_reason;"
	"ALTER TABLE sessions DROP COLUMN ended_us;"
	"ALTER TABLE sessions DROP COLUMN input_tokens;"
	"ALTER TABLE sessions DROP COLUMN output_tokens;"
	"ALTER TABLE sessions DROP COLUMN cache_read_tokens;"
	"ALTER TABLE sessions DROP COLUMN cache_write_tokens;"
	"ALTER TABLE sessions DROP COLUMN cost_micro_usd;"
	"ALTER TABLE sessions DROP COLUMN last_prompt_tokens;"
	"PRAGMA user_version = 3;";

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
	cr_assert_eq(sqlite3_exec(db, SQL_BACK_TO_V4, NULL, NULL, NULL), SQLITE_OK, "%s",
		     sqlite3_errmsg(db));
	cr_assert_eq(sqlite3_exec(db, SQL_BACK_TO_V3, NULL, NULL, NULL), SQLITE_OK, "%s",
		     sqlite3_errmsg(db));
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

static int64_t column_count(sqlite3 *db, const char *table, const char *column)
{
	char sql[LINE_MAX_LEN];

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM pragma_table_info('%s') WHERE name = '%s'",
		 table, column);
	return query_int(db, sql);
}

typedef struct kept_session {
	int64_t version, last_seq, ended_us, input_tokens;
	int has_lane_key;
	char end_reason[ID_MAX];
} kept_session;

static int32_t keep_session(void *userdata, const memd_session *s)
{
	kept_session *k = userdata;

	cr_assert_geq(s->struct_size, sizeof(*s));
	k->version = s->version;
	k->last_seq = s->last_seq;
	k->ended_us = s->ended_us;
	k->input_tokens = s->input_tokens;
	k->has_lane_key = s->lane_key != NULL;
	snprintf(k->end_reason, sizeof(k->end_reason), "%s", s->end_reason ? s->end_reason : "");
	return 0;
}

static int32_t keep_lane_version(void *userdata, const memd_lane *l)
{
	*(int64_t *)userdata = l->version;
	return 0;
}

static int32_t keep_state(void *userdata, const char *text, size_t len)
{
	snprintf(userdata, LINE_MAX_LEN, "%.*s", (int)len, text);
	return 0;
}

#define V3_LANE "telegram:dm:1"
#define V3_USAGE_TOKENS 42
#define V3_END_US 99

Test(sqlite_migrate, version_3_database_gains_lanes_and_keeps_its_data, .init = setup,
     .fini = teardown, .timeout = 30)
{
	memd_session_sink sink = { .struct_size = sizeof(sink), .session = ignore_session };
	memd_session sess = { .struct_size = sizeof(sess), .app = APP, .user = USER, .id = SID,
			      .created_us = 1, .updated_us = 1 };
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_append_result res;
	memd_error err = { 0 };
	int64_t seqs[2], lane_version = 0;
	kept_session k = { 0 };
	char state[LINE_MAX_LEN] = "";
	sqlite3 *db = NULL;
	store s;

	store_open(&s);
	cr_assert_eq(s.ops->session_create(s.h, NULL, &sess, "{\"k\":1}", &sink, &err), 0, "%s",
		     err.msg);
	for (int i = 0; i < N_BATCHES; i++)
		cr_assert_eq(append(&s, i, seqs, &res, &err), 0, "%s", err.msg);
	store_close(&s);

	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, SQL_BACK_TO_V4, NULL, NULL, NULL), SQLITE_OK, "%s",
		     sqlite3_errmsg(db));
	cr_assert_eq(sqlite3_exec(db, SQL_BACK_TO_V3, NULL, NULL, NULL), SQLITE_OK, "%s",
		     sqlite3_errmsg(db));
	cr_assert_eq(column_count(db, "sessions", "ended_us"), 0);
	cr_assert_eq(query_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'lanes'"), 0);
	sqlite3_close(db);

	store_open(&s);
	{
		memd_session_sink keep = { .struct_size = sizeof(keep), .userdata = &k,
					   .session = keep_session };
		memd_text_sink st_sink = { .struct_size = sizeof(st_sink), .userdata = state,
					   .text = keep_state };
		cr_assert_eq(s.ops->session_get(s.h, NULL, &sc, &keep, &err), 0, "%s", err.msg);
		cr_assert_eq(k.version, N_BATCHES);
		cr_assert_eq(k.last_seq, 2 * N_BATCHES);
		cr_assert_eq(k.ended_us, 0, "an old session reads as ended");
		cr_assert_eq(k.input_tokens, 0);
		cr_assert_not(k.has_lane_key);
		cr_assert_eq(s.ops->state_get(s.h, NULL, &sc, &st_sink, &err), 0, "%s", err.msg);
		cr_assert_str_eq(state, "{\"k\":1}");
	}
	/* A lane on the old session: usage, an inbox, an end. */
	{
		memd_usage u = { .struct_size = sizeof(u), .input_tokens = V3_USAGE_TOKENS };
		memd_lane l = { .struct_size = sizeof(l), .app = APP, .user = USER, .key = V3_LANE,
				.session = SID, .updated_us = 2 };
		memd_lane_write w = { .struct_size = sizeof(w), .flags = MEMD_LW_CREATE, .lane = &l,
				      .usage = &u, .now_us = 2 };
		memd_lane_sink ls = { .struct_size = sizeof(ls), .userdata = &lane_version,
				      .lane = keep_lane_version };
		memd_inbox_item it = { .struct_size = sizeof(it), .mode = MEMD_INBOX_QUEUE,
				       .id = "m1", .body_json = "{}", .created_us = 2 };
		memd_scope lsc = { .struct_size = sizeof(lsc), .app = APP, .user = USER };
		memd_session_sink keep = { .struct_size = sizeof(keep), .userdata = &k,
					   .session = keep_session };
		uint32_t depth = 0;

		cr_assert_eq(s.ops->lane_write(s.h, NULL, &w, &ls, &err), 0, "%s", err.msg);
		cr_assert_eq(lane_version, 1);
		cr_assert_eq(s.ops->inbox_put(s.h, NULL, &lsc, V3_LANE, &it, &depth, &err), 0, "%s",
			     err.msg);
		cr_assert_eq(depth, 1);
		w = (memd_lane_write){ .struct_size = sizeof(w), .expected_version = 1, .lane = &l,
				       .end_session = SID, .end_reason = "idle", .now_us = V3_END_US };
		cr_assert_eq(s.ops->lane_write(s.h, NULL, &w, &ls, &err), 0, "%s", err.msg);
		cr_assert_eq(lane_version, 2);
		cr_assert_eq(s.ops->session_get(s.h, NULL, &sc, &keep, &err), 0, "%s", err.msg);
		cr_assert_eq(k.input_tokens, V3_USAGE_TOKENS);
		cr_assert_eq(k.ended_us, V3_END_US);
		cr_assert_str_eq(k.end_reason, "idle");
		cr_assert_eq(k.last_seq, 2 * N_BATCHES);
	}
	store_close(&s);

	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(query_int(db, "PRAGMA user_version"), SCHEMA_LATEST);
	cr_assert_eq(column_count(db, "sessions", "last_prompt_tokens"), 1);
	cr_assert_eq(query_int(db, "SELECT count(*) FROM events"), 2 * N_BATCHES);
	cr_assert_eq(query_int(db, "SELECT count(*) FROM inbox"), 1);
	{
		char col[ID_MAX];
		first_row_text(db, "PRAGMA integrity_check", col, sizeof(col));
		cr_assert_str_eq(col, "ok", "integrity_check: %s", col);
	}
	cr_assert_eq(query_int(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
	sqlite3_close(db);
}

/* An append of one event (id, role) carrying op (may be NULL). */
static int32_t append_op(store *s, const char *id, const char *role, int64_t covers_seq,
			 const memd_transcript_op *op, memd_append_result *res, memd_error *err)
{
	memd_event ev = { .struct_size = sizeof(ev), .id = id, .author = "t", .role = role,
			  .content_json = "{}", .text = id, .timestamp_us = N_BATCHES + 1,
			  .covers_seq = covers_seq };
	const memd_event *ptr[1] = { &ev };
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_append a = { .struct_size = sizeof(a), .events = ptr, .n_events = id ? 1 : 0,
			  .now_us = 2, .op = op };
	static int64_t seqs[1];

	*res = (memd_append_result){ .struct_size = sizeof(*res), .seqs = seqs };
	return s->ops->append(s->h, NULL, &sc, &a, res, err);
}

typedef struct kept_counts {
	int64_t message_count, summary_seq, n;
} kept_counts;

static int32_t keep_counts(void *userdata, const memd_session *s)
{
	kept_counts *k = userdata;
	k->message_count = s->message_count;
	k->summary_seq = s->summary_seq;
	return 0;
}

static int32_t count_hides(void *userdata, const memd_feed_record *r)
{
	if (r->kind == MEMD_FEED_HIDE)
		((kept_counts *)userdata)->n++;
	return 0;
}

static int32_t count_change(void *userdata, const memd_state_change *c)
{
	(void)c;
	((kept_counts *)userdata)->n++;
	return 0;
}

#define V4_SUMMARY_SEQ (2 * N_BATCHES + 1)
#define V4_HIDE_FROM (2 * AFTER_TIME + 1)

Test(sqlite_migrate, version_4_database_gains_transcripts, .init = setup, .fini = teardown,
     .timeout = 30)
{
	memd_session_sink sink = { .struct_size = sizeof(sink), .session = ignore_session };
	memd_session sess = { .struct_size = sizeof(sess), .app = APP, .user = USER, .id = SID,
			      .created_us = 1, .updated_us = 1 };
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_transcript_op rewind = { .struct_size = sizeof(rewind), .kind = MEMD_OP_REWIND,
				      .id = "r", .hide_from_seq = V4_HIDE_FROM };
	memd_transcript_op undo = { .struct_size = sizeof(undo), .kind = MEMD_OP_UNDO, .id = "u",
				    .undo_id = "r" };
	memd_append_result res;
	memd_error err = { 0 };
	kept_counts k = { 0 };
	memd_session_sink keep = { .struct_size = sizeof(keep), .userdata = &k,
				   .session = keep_counts };
	int64_t seqs[2];
	char col[LINE_MAX_LEN];
	sqlite3 *db = NULL;
	store s;

	store_open(&s);
	cr_assert_eq(s.ops->session_create(s.h, NULL, &sess, "{\"k\":1}", &sink, &err), 0, "%s",
		     err.msg);
	for (int i = 0; i < N_BATCHES; i++)
		cr_assert_eq(append(&s, i, seqs, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(append_op(&s, "sum", "summary", 2 * N_BATCHES, NULL, &res, &err), 0, "%s",
		     err.msg);
	store_close(&s);

	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, SQL_BACK_TO_V4, NULL, NULL, NULL), SQLITE_OK, "%s",
		     sqlite3_errmsg(db));
	cr_assert_eq(column_count(db, "events", "hidden_us"), 0);
	cr_assert_eq(column_count(db, "sessions", "message_count"), 0);
	sqlite3_close(db);

	store_open(&s);
	/* The old session counts its messages and keeps its summary. */
	cr_assert_eq(s.ops->session_get(s.h, NULL, &sc, &keep, &err), 0, "%s", err.msg);
	cr_assert_eq(k.message_count, 2 * N_BATCHES);
	cr_assert_eq(k.summary_seq, V4_SUMMARY_SEQ);
	/* A rewind of its old events, with HIDE records, then its undo. */
	cr_assert_eq(append_op(&s, NULL, NULL, 0, &rewind, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.hidden_count, V4_SUMMARY_SEQ - V4_HIDE_FROM + 1);
	cr_assert_eq(s.ops->session_get(s.h, NULL, &sc, &keep, &err), 0, "%s", err.msg);
	cr_assert_eq(k.message_count, V4_HIDE_FROM - 1);
	cr_assert_eq(k.summary_seq, 0);
	{
		/* The newest visible events, through the new partial index. */
		loaded l = { .n = 0 };
		memd_event_query q = { .struct_size = sizeof(q), .limit = NEWEST_LIMIT,
				       .flags = MEMD_EVQ_NEWEST };
		memd_event_sink es = { .struct_size = sizeof(es), .event = keep_seq, .userdata = &l };
		cr_assert_eq(s.ops->events_load(s.h, NULL, &sc, &q, &es, &err), 0, "%s", err.msg);
		cr_assert_eq(l.n, NEWEST_LIMIT);
		cr_assert_eq(l.seqs[NEWEST_LIMIT - 1], V4_HIDE_FROM - 1);
	}
	{
		memd_feed_sink fs = { .struct_size = sizeof(fs), .userdata = &k, .record = count_hides };
		k.n = 0;
		cr_assert_eq(s.ops->feed_read(s.h, NULL, 0, 0, &fs, &err), 0, "%s", err.msg);
		cr_assert_eq(k.n, V4_SUMMARY_SEQ - V4_HIDE_FROM + 1);
	}
	{
		/* Changes before the migration were not recorded. */
		memd_state_history_query q = { .struct_size = sizeof(q) };
		memd_state_change_sink cs = { .struct_size = sizeof(cs), .userdata = &k,
					      .change = count_change };
		k.n = 0;
		cr_assert_eq(s.ops->state_history(s.h, NULL, &sc, &q, &cs, &err), 0, "%s", err.msg);
		cr_assert_eq(k.n, 0);
	}
	cr_assert_eq(append_op(&s, NULL, NULL, 0, &undo, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.unhidden_count, V4_SUMMARY_SEQ - V4_HIDE_FROM + 1);
	cr_assert_eq(s.ops->session_get(s.h, NULL, &sc, &keep, &err), 0, "%s", err.msg);
	cr_assert_eq(k.message_count, 2 * N_BATCHES);
	cr_assert_eq(k.summary_seq, V4_SUMMARY_SEQ);
	store_close(&s);

	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(query_int(db, "PRAGMA user_version"), SCHEMA_LATEST);
	first_row_text(db, "SELECT sql FROM sqlite_master WHERE name = 'events_by_seq'", col,
		       sizeof(col));
	cr_assert(strstr(col, "WHERE hidden_us = 0"), "events_by_seq is not partial: %s", col);
	cr_assert_eq(query_int(db, "SELECT count(*) FROM operations"), 2);
	first_row_text(db, "PRAGMA integrity_check", col, sizeof(col));
	cr_assert_str_eq(col, "ok", "integrity_check: %s", col);
	cr_assert_eq(query_int(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
	sqlite3_close(db);
}

typedef struct kept_memory_seq {
	int64_t memory_seq, last_seq;
	int n;
} kept_memory_seq;

static int32_t keep_memory_seq(void *userdata, const memd_session *s)
{
	kept_memory_seq *k = userdata;

	cr_assert_geq(s->struct_size, sizeof(*s));
	k->memory_seq = s->memory_seq;
	k->last_seq = s->last_seq;
	k->n++;
	return 0;
}

static int32_t count_memory(void *userdata, const memd_memory *m)
{
	(void)m;
	(*(int *)userdata)++;
	return 0;
}

/* Feed records by kind. */
typedef struct feed_kinds {
	int64_t events, deletes, memories;
} feed_kinds;

static int32_t count_kinds(void *userdata, const memd_feed_record *r)
{
	feed_kinds *k = userdata;

	if (r->kind == MEMD_FEED_EVENT)
		k->events++;
	else if (r->kind == MEMD_FEED_DELETE_SESSION)
		k->deletes++;
	else if (r->kind == MEMD_FEED_MEMORY)
		k->memories++;
	return 0;
}

#define V6_GONE "gone"      /* a session deleted before the migration */
#define V6_NOW 5            /* the commit's time */
#define V6_PENDING_BEFORE 1000000

Test(sqlite_migrate, version_6_database_gains_memories, .init = setup, .fini = teardown,
     .timeout = 30)
{
	memd_session_sink sink = { .struct_size = sizeof(sink), .session = ignore_session };
	memd_session sess = { .struct_size = sizeof(sess), .app = APP, .user = USER, .id = SID,
			      .created_us = 1, .updated_us = 1 };
	memd_session gone = sess;
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_scope gone_sc = { .struct_size = sizeof(gone_sc), .app = APP, .user = USER,
			       .session = V6_GONE };
	memd_append_result res;
	memd_error err = { 0 };
	kept_memory_seq k = { 0 };
	memd_session_sink keep = { .struct_size = sizeof(keep), .userdata = &k,
				   .session = keep_memory_seq };
	memd_pending_query pq = { .struct_size = sizeof(pq), .limit = 10,
				  .updated_before_us = V6_PENDING_BEFORE };
	int64_t seqs[2];
	char col[LINE_MAX_LEN];
	char state[LINE_MAX_LEN] = "";
	sqlite3 *db = NULL;
	store s;

	gone.id = V6_GONE;
	store_open(&s);
	cr_assert_eq(s.ops->session_create(s.h, NULL, &sess, "{\"k\":1}", &sink, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(s.ops->session_create(s.h, NULL, &gone, NULL, &sink, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(s.ops->session_delete(s.h, NULL, &gone_sc, &err), 0, "%s", err.msg);
	for (int i = 0; i < N_BATCHES; i++)
		cr_assert_eq(append(&s, i, seqs, &res, &err), 0, "%s", err.msg);
	store_close(&s);

	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, SQL_BACK_TO_V6, NULL, NULL, NULL), SQLITE_OK, "%s",
		     sqlite3_errmsg(db));
	cr_assert_eq(column_count(db, "sessions", "memory_seq"), 0);
	cr_assert_eq(query_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'memories'"),
		     0);
	sqlite3_close(db);

	store_open(&s);
	/* The old session: its data, memory_seq 0, so its events are unread. */
	cr_assert_eq(s.ops->session_get(s.h, NULL, &sc, &keep, &err), 0, "%s", err.msg);
	cr_assert_eq(k.memory_seq, 0);
	cr_assert_eq(k.last_seq, 2 * N_BATCHES);
	{
		memd_text_sink st_sink = { .struct_size = sizeof(st_sink), .userdata = state,
					   .text = keep_state };
		cr_assert_eq(s.ops->state_get(s.h, NULL, &sc, &st_sink, &err), 0, "%s", err.msg);
		cr_assert_str_eq(state, "{\"k\":1}");
	}
	k.n = 0;
	cr_assert_eq(s.ops->session_list_pending(s.h, NULL, &pq, &keep, &err), 0, "%s", err.msg);
	cr_assert_eq(k.n, 1, "the old session is not pending");
	/* A memory and the cursor in one commit, on the old session. */
	{
		memd_memory m = { .struct_size = sizeof(m), .app = APP, .user = USER, .id = "m1",
				  .text = "likes tea", .kind = "preference",
				  .topics_json = "[\"tea\"]", .entities_json = "[]",
				  .source_session = SID };
		memd_memory_write w = { .struct_size = sizeof(w), .op = MEMD_MEM_ADD,
					.memory = &m, .actor = "extractor" };
		const memd_memory_write *ws[1] = { &w };
		memd_memory_commit c = { .struct_size = sizeof(c), .n_writes = 1, .writes = ws,
					 .cursor_session = SID, .expected_cursor_seq = 0,
					 .new_cursor_seq = 2 * N_BATCHES, .now_us = V6_NOW };
		memd_memory_sink ms = { .struct_size = sizeof(ms), .userdata = &k.n,
					.memory = count_memory };
		memd_memory_query q = { .struct_size = sizeof(q), .limit = 10, .topic = "tea" };
		memd_scope user = { .struct_size = sizeof(user), .app = APP, .user = USER };

		k.n = 0;
		cr_assert_eq(s.ops->memory_commit(s.h, NULL, &user, &c, &ms, &err), 0, "%s",
			     err.msg);
		cr_assert_eq(k.n, 1);
		k.n = 0;
		cr_assert_eq(s.ops->memory_list(s.h, NULL, &user, &q, &ms, &err), 0, "%s",
			     err.msg);
		cr_assert_eq(k.n, 1);
	}
	cr_assert_eq(s.ops->session_get(s.h, NULL, &sc, &keep, &err), 0, "%s", err.msg);
	cr_assert_eq(k.memory_seq, 2 * N_BATCHES);
	k.n = 0;
	cr_assert_eq(s.ops->session_list_pending(s.h, NULL, &pq, &keep, &err), 0, "%s", err.msg);
	cr_assert_eq(k.n, 0, "a session whose events were all read is still pending");
	{
		feed_kinds fk = { 0 };
		memd_feed_sink fs = { .struct_size = sizeof(fs), .userdata = &fk,
				      .record = count_kinds };
		cr_assert_eq(s.ops->feed_read(s.h, NULL, 0, 0, &fs, &err), 0, "%s", err.msg);
		cr_assert_eq(fk.events, 2 * N_BATCHES);
		cr_assert_eq(fk.deletes, 1, "the old DELETE record is gone");
		cr_assert_eq(fk.memories, 1);
	}
	store_close(&s);

	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(query_int(db, "PRAGMA user_version"), SCHEMA_LATEST);
	first_row_text(db, "SELECT sql FROM sqlite_master WHERE name = 'sessions_pending'", col,
		       sizeof(col));
	cr_assert(strstr(col, "WHERE memory_seq < last_seq"), "sessions_pending is not partial: %s",
		  col);
	cr_assert_eq(query_int(db, "SELECT count(*) FROM memory_history"), 1);
	cr_assert_eq(query_int(db, "SELECT count(*) FROM events"), 2 * N_BATCHES);
	first_row_text(db, "PRAGMA integrity_check", col, sizeof(col));
	cr_assert_str_eq(col, "ok", "integrity_check: %s", col);
	cr_assert_eq(query_int(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
	sqlite3_close(db);
}

static int32_t count_checkpoint(void *userdata, const memd_checkpoint *c)
{
	(void)c;
	(*(int *)userdata)++;
	return 0;
}

static int32_t count_task(void *userdata, const memd_task *t)
{
	(void)t;
	(*(int *)userdata)++;
	return 0;
}

#define V7_NOW 7 /* the checkpoint's and task's time */

Test(sqlite_migrate, version_7_database_gains_checkpoints_and_tasks, .init = setup,
     .fini = teardown, .timeout = 30)
{
	memd_session_sink sink = { .struct_size = sizeof(sink), .session = ignore_session };
	memd_session sess = { .struct_size = sizeof(sess), .app = APP, .user = USER, .id = SID,
			      .created_us = 1, .updated_us = 1 };
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_checkpoint ck = { .struct_size = sizeof(ck), .app = APP, .user = USER,
			       .session = SID, .ns = "", .id = "c1", .type = "json",
			       .payload = "{}", .payload_size = 2, .metadata_json = "{}" };
	memd_task task = { .struct_size = sizeof(task), .app = APP, .id = "t1",
			   .context_id = SID, .user = USER, .state = "working",
			   .task_json = "{\"kind\":\"task\"}" };
	int n = 0, created = -1;
	memd_checkpoint_sink cs = { .struct_size = sizeof(cs), .userdata = &n,
				    .checkpoint = count_checkpoint };
	memd_task_sink ts = { .struct_size = sizeof(ts), .userdata = &n, .task = count_task };
	memd_resumable_query rq = { .struct_size = sizeof(rq), .limit = 10, .app = APP,
				    .run_states = 1u << MEMD_RUN_RUNNING, .now_us = V7_NOW };
	memd_append_result res;
	memd_error err = { 0 };
	int64_t seqs[2];
	char col[LINE_MAX_LEN];
	sqlite3 *db = NULL;
	store s;

	store_open(&s);
	cr_assert_eq(s.ops->session_create(s.h, NULL, &sess, NULL, &sink, &err), 0, "%s",
		     err.msg);
	for (int i = 0; i < N_BATCHES; i++)
		cr_assert_eq(append(&s, i, seqs, &res, &err), 0, "%s", err.msg);
	store_close(&s);

	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, SQL_BACK_TO_V7, NULL, NULL, NULL), SQLITE_OK, "%s",
		     sqlite3_errmsg(db));
	cr_assert_eq(query_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'checkpoints'"),
		     0);
	sqlite3_close(db);

	store_open(&s);
	/* A checkpoint and a task on the old session. */
	cr_assert_eq(s.ops->checkpoint_put(s.h, NULL, &ck, 0, V7_NOW, &created, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(created, 0);
	cr_assert_eq(s.ops->checkpoint_get(s.h, NULL, &sc, "", NULL, V7_NOW, &cs, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(n, 1);
	n = 0;
	cr_assert_eq(s.ops->checkpoint_resumable(s.h, NULL, &rq, &cs, &err), 0, "%s", err.msg);
	cr_assert_eq(n, 1, "the old session's run is not resumable");
	n = 0;
	cr_assert_eq(s.ops->task_put(s.h, NULL, &task, MEMD_TASK_CREATE, 0, V7_NOW, &ts, &err), 0,
		     "%s", err.msg);
	cr_assert_eq(n, 1);
	/* Deleting the old session takes both. */
	cr_assert_eq(s.ops->session_delete(s.h, NULL, &sc, &err), 0, "%s", err.msg);
	cr_assert_eq(s.ops->task_get(s.h, NULL, APP, "t1", &ts, &err), MEMD_ENOTFOUND);
	n = 0;
	cr_assert_eq(s.ops->checkpoint_resumable(s.h, NULL, &rq, &cs, &err), 0, "%s", err.msg);
	cr_assert_eq(n, 0, "the deleted session's run is still resumable");
	store_close(&s);

	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(query_int(db, "PRAGMA user_version"), SCHEMA_LATEST);
	cr_assert_eq(query_int(db, "SELECT count(*) FROM checkpoints"), 0);
	cr_assert_eq(query_int(db, "SELECT count(*) FROM checkpoint_heads"), 0);
	cr_assert_eq(query_int(db, "SELECT count(*) FROM tasks"), 0);
	first_row_text(db, "PRAGMA integrity_check", col, sizeof(col));
	cr_assert_str_eq(col, "ok", "integrity_check: %s", col);
	cr_assert_eq(query_int(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
	sqlite3_close(db);
}

/* The writes a checkpoint sink receives, as "task_id/idx@path|..." ("?"
 * for a path, when one came through write). */
typedef struct write_keys {
	char text[LINE_MAX_LEN];
} write_keys;

static int32_t keep_write_key(write_keys *k, const memd_checkpoint_write *w, const char *path)
{
	size_t used = strlen(k->text);

	cr_assert_lt(used, sizeof(k->text) - 1, "too many writes");
	snprintf(k->text + used, sizeof(k->text) - used, "%s/%lld@%s|", w->task_id,
		 (long long)w->idx, path);
	return 0;
}

static int32_t write_without_path(void *userdata, const memd_checkpoint_write *w)
{
	return keep_write_key(userdata, w, "?");
}

static int32_t write_with_path(void *userdata, const memd_checkpoint_write *w,
			       const char *task_path)
{
	cr_assert_not_null(task_path);
	return keep_write_key(userdata, w, task_path);
}

static int32_t ignore_checkpoint(void *userdata, const memd_checkpoint *c)
{
	(void)userdata;
	(void)c;
	return 0;
}

/* The writes of checkpoint "c1" of the test session. */
static void get_write_keys(store *s, write_keys *ret)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_checkpoint_sink cs = { .struct_size = sizeof(cs), .userdata = ret,
				    .checkpoint = ignore_checkpoint, .write = write_without_path,
				    .task_write = write_with_path };
	memd_error err = { 0 };

	ret->text[0] = '\0';
	cr_assert_eq(s->ops->checkpoint_get(s->h, NULL, &sc, "", "c1", V7_NOW, &cs, &err), 0,
		     "%s", err.msg);
}

static memd_checkpoint_write v8_write(const char *task_id, int64_t idx, uint32_t flags)
{
	memd_checkpoint_write w = { .struct_size = sizeof(w), .flags = flags, .task_id = task_id,
				    .idx = idx, .channel = "ch", .type = "json", .value = "1",
				    .value_size = 1 };
	return w;
}

Test(sqlite_migrate, version_8_database_gains_task_paths, .init = setup, .fini = teardown,
     .timeout = 30)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_checkpoint ck = { .struct_size = sizeof(ck), .app = APP, .user = USER,
			       .session = SID, .ns = "", .id = "c1", .type = "json",
			       .payload = "{}", .payload_size = 2, .metadata_json = "{}" };
	memd_checkpoint_write old[3] = { v8_write("b", 2, 0), v8_write("b", 0, 0),
					 v8_write("a", 1, 0) };
	memd_checkpoint_write added[2] = { v8_write("c", 0, 0),
					   v8_write("b", 0, MEMD_CKW_REPLACE) };
	const char *added_paths[2] = { "~p", "~a" };
	memd_checkpoint_writes ws = { .struct_size = sizeof(ws), .ns = "", .checkpoint_id = "c1",
				      .writes = old, .n_writes = 3, .now_us = V7_NOW };
	memd_error err = { 0 };
	write_keys keys;
	char col[LINE_MAX_LEN];
	sqlite3 *db = NULL;
	store s;

	/* Writes put without paths, then the column taken away. */
	store_open(&s);
	cr_assert_eq(s.ops->checkpoint_put(s.h, NULL, &ck, 1, V7_NOW, NULL, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(s.ops->checkpoint_put_writes(s.h, NULL, &sc, &ws, &err), 0, "%s", err.msg);
	store_close(&s);

	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, SQL_BACK_TO_V8, NULL, NULL, NULL), SQLITE_OK, "%s",
		     sqlite3_errmsg(db));
	cr_assert_eq(query_int(db, "SELECT count(*) FROM pragma_table_info('checkpoint_writes')"
				   " WHERE name = 'task_path'"),
		     0);
	sqlite3_close(db);

	/* The old writes read back with the path "", in (task_id, idx)
	 * order. */
	store_open(&s);
	get_write_keys(&s, &keys);
	cr_assert_str_eq(keys.text, "a/1@|b/0@|b/2@|");
	/* New ones keep theirs, and a replaced old one takes its new path. */
	ws.writes = added;
	ws.n_writes = 2;
	ws.task_paths = added_paths;
	cr_assert_eq(s.ops->checkpoint_put_writes(s.h, NULL, &sc, &ws, &err), 0, "%s", err.msg);
	get_write_keys(&s, &keys);
	cr_assert_str_eq(keys.text, "a/1@|b/2@|b/0@~a|c/0@~p|");
	store_close(&s);

	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(query_int(db, "PRAGMA user_version"), SCHEMA_LATEST);
	cr_assert_eq(query_int(db, "SELECT count(*) FROM pragma_table_info('checkpoint_writes')"
				   " WHERE name = 'task_path' AND \"notnull\" = 1"
				   " AND dflt_value = '''''' AND type = 'TEXT'"),
		     1);
	first_row_text(db, "PRAGMA integrity_check", col, sizeof(col));
	cr_assert_str_eq(col, "ok", "integrity_check: %s", col);
	cr_assert_eq(query_int(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
	sqlite3_close(db);
}
