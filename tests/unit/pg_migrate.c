/* SPDX-License-Identifier: MIT */
/*
 * pg-migrate: a schema made by an older version of the postgres store is
 * migrated in place when the store opens it, and keeps working.
 *
 * Schema version 2 adds the sessions' lifecycle and usage columns (ADD
 * COLUMN with defaults), their indexes, and the lanes and inbox tables.
 * The test makes a store in a schema of its own, creates a session and
 * appends to it, turns the schema back into version 1's shape (no lanes,
 * no inbox, sessions without the new columns, memd_meta at 1) over a
 * connection of its own, reopens the store and checks: the version, the
 * old session read with the defaults (open, made by no lane, no usage),
 * its events and feed, and that every new part works on it: a lane made
 * for it, an append's usage summed into both, the lane filter of the
 * session list, the inbox, and a FINALIZE record after the old events.
 *
 * Schema version 3 adds the events' hidden marks, the sessions'
 * message_count, the operations, state history and HIDE-record tables.
 * The second test turns a version 3 schema back into version 2's shape
 * the same way and checks that the old session's messages are counted,
 * its events are visible, and a rewind, its undo, the state history, the
 * feed's HIDE records and the delete of the session work on them.
 *
 * Schema version 4 adds the sessions' memory_seq and the memories, memory
 * history and MEMORY_DELETE-record tables. Every test first turns the
 * schema back from 4 to 3; the third stops there and checks that the old
 * session reads memory_seq 0 and is pending extraction, that a memory
 * commit moves its cursor exactly once, and that memories, their history,
 * their feed records after the old events and the user's delete work.
 *
 * Schema version 5 adds the checkpoint, checkpoint write, checkpoint head
 * and task tables. Every test first turns the schema back from 5 to 4;
 * the fourth stops there and checks that checkpoints of the old session
 * (a put, its writes, the latest with them, the resumable listing) and a
 * task linked to it work, and that the session's delete takes them all.
 *
 * Schema version 6 adds the task path of checkpoint writes. Every test
 * first turns the schema back from 6 to 5; the fifth puts writes first,
 * drops the column and checks that they read back with the path "" in
 * (task_id, idx) order, and that writes put since keep their paths, sort
 * by (task_path, task_id, idx) in get and list, and follow REPLACE (a
 * kept write keeps its path, a replaced one takes the new one).
 * Runs under tests/services/with-services.sh (MEMD_PG_DSN, MEMD_PG_PASSWORD).
 */
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "plugins/loader.h"

#define APP "mig"
#define USER "u"
#define SID "s"
#define LANE "telegram:dm:42"
#define ID_MAX 64
#define NAME_MAX_LEN 64
#define YAML_MAX 512
#define MAX_SEARCH_DIRS 16
#define SCHEMA_V1 1
#define SCHEMA_V2 2
#define SCHEMA_V3 3
#define SCHEMA_V4 4
#define SCHEMA_V5 5
#define SCHEMA_LATEST 6
#define N_BATCHES 5
#define T0 1700000000000000LL /* a plausible unix time in us */
#define USAGE_IN 40
#define USAGE_COST 1500
#define USAGE_PROMPT 900

/* Back to version 5: what version 6 added, removed. */
static const char *const SQL_BACK_TO_V5[] = {
	"ALTER TABLE checkpoint_writes DROP COLUMN task_path",
	"UPDATE memd_meta SET version = 5",
	NULL,
};

/* Back to version 4: what version 5 added, removed. */
static const char *const SQL_BACK_TO_V4[] = {
	"DROP TABLE tasks",
	"DROP TABLE checkpoint_heads",
	"DROP TABLE checkpoint_writes",
	"DROP TABLE checkpoints",
	"UPDATE memd_meta SET version = 4",
	NULL,
};

/* Back to version 3: what version 4 added, removed. */
static const char *const SQL_BACK_TO_V3[] = {
	"DROP TABLE feed_memory_deletes",
	"DROP TABLE memory_history",
	"DROP TABLE memories",
	"DROP INDEX sessions_pending",
	"ALTER TABLE sessions DROP COLUMN memory_seq",
	"UPDATE memd_meta SET version = 3",
	NULL,
};

/* Back to version 2: what version 3 added, removed (the summaries index
 * as version 1 made it). */
static const char *const SQL_BACK_TO_V2[] = {
	"DROP TABLE feed_hides",
	"DROP TABLE state_history",
	"DROP TABLE operations",
	"DROP INDEX sessions_by_updated",
	"ALTER TABLE sessions DROP COLUMN message_count",
	"DROP INDEX events_visible",
	"DROP INDEX events_visible_summaries",
	"DROP INDEX events_hidden_by",
	"CREATE INDEX events_summaries ON events (app, \"user\", session, seq)"
	"  WHERE role = 'summary'",
	"ALTER TABLE events DROP COLUMN hidden_us, DROP COLUMN hidden_by,"
	" DROP COLUMN hidden_kind, DROP COLUMN operation",
	"UPDATE memd_meta SET version = 2",
	NULL,
};

/* Back to version 1 from version 2: what version 2 added, removed. */
static const char *const SQL_BACK_TO_V1[] = {
	"DROP TABLE inbox",
	"DROP TABLE lanes",
	"DROP INDEX sessions_by_lane",
	"DROP INDEX sessions_by_platform",
	"DROP INDEX sessions_by_ended",
	"ALTER TABLE sessions DROP COLUMN lane_key, DROP COLUMN origin,"
	" DROP COLUMN origin_platform, DROP COLUMN previous_session, DROP COLUMN start_reason,"
	" DROP COLUMN end_reason, DROP COLUMN ended_us, DROP COLUMN input_tokens,"
	" DROP COLUMN output_tokens, DROP COLUMN cache_read_tokens,"
	" DROP COLUMN cache_write_tokens, DROP COLUMN cost_micro_usd,"
	" DROP COLUMN last_prompt_tokens",
	"UPDATE memd_meta SET version = 1",
	NULL,
};

typedef struct store {
	config_node *cfg;
	loader_plugin *plugin;
	loader_instance *inst;
	const memd_store_ops *ops;
	void *h;
} store;

static char schema[NAME_MAX_LEN];
static char *search_buf;
static const char *search_dirs[MAX_SEARCH_DIRS + 1];

/* A connection of the test's own with search_path the test's schema. */
static PGconn *connect_schema(void)
{
	const char *keys[] = { "dbname", "password", NULL };
	const char *vals[] = { getenv("MEMD_PG_DSN"), getenv("MEMD_PG_PASSWORD"), NULL };
	const char *p[1] = { schema };
	PGconn *c = PQconnectdbParams(keys, vals, 1);
	PGresult *r;

	cr_assert_eq(PQstatus(c), CONNECTION_OK, "connect: %s", PQerrorMessage(c));
	r = PQexecParams(c, "SELECT pg_catalog.set_config('search_path',"
			    " pg_catalog.quote_ident($1::text), false)", 1, NULL, p, NULL, NULL, 0);
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
	PQclear(r);
	return c;
}

static void exec_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);

	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK,
		  "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
}

/* Take the schema on c from SCHEMA_LATEST back to version to
 * (SQL_BACK_TO_V<n> takes n + 1 back to n), inside the caller's
 * transaction. */
static void back_to(PGconn *c, int to)
{
	static const char *const *const steps[SCHEMA_LATEST] = {
		NULL, SQL_BACK_TO_V1, SQL_BACK_TO_V2, SQL_BACK_TO_V3, SQL_BACK_TO_V4, SQL_BACK_TO_V5
	};

	for (int v = SCHEMA_LATEST - 1; v >= to; v--)
		for (size_t i = 0; steps[v][i]; i++)
			exec_ok(c, steps[v][i]);
}

static int64_t query_int(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	int64_t v;

	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	cr_assert_eq(PQntuples(r), 1, "%s: %d rows", sql, PQntuples(r));
	v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return v;
}

static void quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

static void setup(void)
{
	const char *env = getenv("MEMD_PLUGIN_PATH");
	size_t n = 0;

	cr_assert(getenv("MEMD_PG_DSN"), "run under tests/services/with-services.sh");
	cr_assert(env && env[0], "MEMD_PLUGIN_PATH must name the built plugins");
	search_buf = strdup(env);
	cr_assert(search_buf);
	for (char *save = NULL, *dir = strtok_r(search_buf, ":", &save);
	     dir && n < MAX_SEARCH_DIRS; dir = strtok_r(NULL, ":", &save))
		search_dirs[n++] = dir;
	search_dirs[n] = NULL;
	snprintf(schema, sizeof(schema), "memd_mig_%ld", (long)getpid());
}

static void teardown(void)
{
	if (schema[0] && getenv("MEMD_PG_DSN")) {
		const char *keys[] = { "dbname", "password", NULL };
		const char *vals[] = { getenv("MEMD_PG_DSN"), getenv("MEMD_PG_PASSWORD"), NULL };
		char sql[NAME_MAX_LEN * 2];
		PGconn *c = PQconnectdbParams(keys, vals, 1);

		PQsetNoticeProcessor(c, quiet, NULL); /* "drop cascades to ..." */
		/* The name is ours ([a-z0-9_]): safe to splice. */
		snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS %s CASCADE", schema);
		PQclear(PQexec(c, sql));
		PQfinish(c);
	}
	schema[0] = '\0';
	free(search_buf);
	search_buf = NULL;
}

static void store_open(store *s)
{
	char yaml[YAML_MAX];
	memd_error err = { 0 };

	memset(s, 0, sizeof(*s));
	snprintf(yaml, sizeof(yaml),
		 "plugin: postgres\ndsn: \"${MEMD_PG_DSN}\"\npassword: \"${MEMD_PG_PASSWORD}\"\n"
		 "schema: %s\npool: 2\n", schema);
	cr_assert_eq(config_parse_string(yaml, strlen(yaml), "pg-migrate", &s->cfg, &err), 0,
		     "%s", err.msg);
	cr_assert_eq(loader_open("postgres", search_dirs, &s->plugin, &err), 0, "%s", err.msg);
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

/* Batch i: one event with id "e<i>"; usage u (NULL = none). */
static int32_t append(store *s, int i, const memd_usage *u, memd_append_result *res,
		      memd_error *err)
{
	char id[ID_MAX];
	int64_t seq;
	memd_event ev;
	const memd_event *ptr[1] = { &ev };
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_append a = { .struct_size = sizeof(a), .events = ptr, .n_events = 1,
			  .now_us = T0 + i, .usage = u };

	snprintf(id, sizeof(id), "e%d", i);
	ev = (memd_event){ .struct_size = sizeof(memd_event), .id = id, .author = "t",
			   .role = "user", .content_json = "{}", .text = id,
			   .timestamp_us = T0 + i };
	*res = (memd_append_result){ .struct_size = sizeof(*res), .seqs = &seq };
	return s->ops->append(s->h, NULL, &sc, &a, res, err);
}

/* What the test keeps of delivered records. */
typedef struct seen {
	memd_session s;
	char lane_key[ID_MAX];
	int has_lane_key, has_end_reason, has_origin;
	size_t n_sessions;
	memd_lane l;
	uint32_t kinds[N_BATCHES * 2 + 2];
	int64_t positions[N_BATCHES * 2 + 2];
	size_t n_feed;
	char session_of_last[ID_MAX];
} seen;

static int32_t keep_session(void *userdata, const memd_session *s)
{
	seen *x = userdata;

	cr_assert_geq(s->struct_size, sizeof(*s), "a 1.2 store delivers the whole session");
	x->s = *s;
	x->has_lane_key = s->lane_key != NULL;
	if (s->lane_key)
		snprintf(x->lane_key, sizeof(x->lane_key), "%s", s->lane_key);
	x->has_end_reason = s->end_reason != NULL;
	x->has_origin = s->origin_json != NULL;
	x->s.app = x->s.user = x->s.id = x->s.title = x->s.metadata_json = NULL;
	x->s.lane_key = x->s.origin_json = x->s.origin_platform = x->s.previous_session = NULL;
	x->s.start_reason = x->s.end_reason = NULL;
	x->n_sessions++;
	return 0;
}

static int32_t keep_lane(void *userdata, const memd_lane *l)
{
	seen *x = userdata;

	x->l = *l;
	x->l.app = x->l.user = x->l.key = x->l.session = x->l.origin_json = NULL;
	x->l.resume_reason = x->l.reset_reason = x->l.previous_session = x->l.turn_id = NULL;
	return 0;
}

static int32_t keep_record(void *userdata, const memd_feed_record *r)
{
	seen *x = userdata;

	cr_assert_lt(x->n_feed, sizeof(x->kinds) / sizeof(x->kinds[0]));
	x->kinds[x->n_feed] = r->kind;
	x->positions[x->n_feed] = r->position;
	snprintf(x->session_of_last, sizeof(x->session_of_last), "%s",
		 r->session ? r->session : "");
	x->n_feed++;
	return 0;
}

static int32_t ignore_item(void *userdata, const memd_inbox_item *i)
{
	(void)userdata;
	(void)i;
	return 0;
}

static void get_session(store *s, seen *x)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_session_sink sink = { .struct_size = sizeof(sink), .session = keep_session,
				   .userdata = x };
	memd_error err = { 0 };

	x->n_sessions = 0;
	cr_assert_eq(s->ops->session_get(s->h, NULL, &sc, &sink, &err), 0, "%s", err.msg);
}

Test(pg_migrate, version_1_schema_migrates_and_keeps_working, .init = setup, .fini = teardown,
     .timeout = 60)
{
	seen x = { 0 };
	memd_session_sink ssink = { .struct_size = sizeof(ssink), .session = keep_session,
				    .userdata = &x };
	memd_session sess = { .struct_size = sizeof(sess), .app = APP, .user = USER, .id = SID,
			      .created_us = T0, .updated_us = T0 };
	memd_append_result res;
	memd_error err = { 0 };
	PGconn *c;
	store s;

	store_open(&s);
	cr_assert_eq(s.ops->session_create(s.h, NULL, &sess, NULL, &ssink, &err), 0, "%s",
		     err.msg);
	for (int i = 0; i < N_BATCHES; i++)
		cr_assert_eq(append(&s, i, NULL, &res, &err), 0, "%s", err.msg);
	store_close(&s);

	c = connect_schema();
	cr_assert_eq(query_int(c, "SELECT version FROM memd_meta"), SCHEMA_LATEST);
	exec_ok(c, "BEGIN");
	back_to(c, SCHEMA_V1);
	exec_ok(c, "COMMIT");
	cr_assert_eq(query_int(c, "SELECT version FROM memd_meta"), SCHEMA_V1);
	cr_assert_eq(query_int(c, "SELECT count(*) FROM pg_catalog.pg_attribute"
				  " WHERE attrelid = 'sessions'::regclass AND attnum > 0"
				  " AND NOT attisdropped AND attname = 'ended_us'"),
		     0, "the schema is not back at version 1");
	PQfinish(c);

	store_open(&s);
	/* The old session, with version 2's defaults. */
	get_session(&s, &x);
	cr_assert_eq(x.s.version, N_BATCHES);
	cr_assert_eq(x.s.last_seq, N_BATCHES);
	cr_assert(!x.has_lane_key && !x.has_end_reason && !x.has_origin);
	cr_assert_eq(x.s.ended_us, 0);
	cr_assert_eq(x.s.flags, 0);
	cr_assert(x.s.input_tokens == 0 && x.s.cost_micro_usd == 0 && x.s.last_prompt_tokens == 0);

	/* A lane for it; an append's usage goes to both. */
	{
		memd_lane l = { .struct_size = sizeof(l), .app = APP, .user = USER, .key = LANE,
				.session = SID, .updated_us = T0 + N_BATCHES };
		memd_lane_write w = { .struct_size = sizeof(w), .flags = MEMD_LW_CREATE, .lane = &l,
				      .now_us = T0 + N_BATCHES };
		memd_lane_sink lsink = { .struct_size = sizeof(lsink), .lane = keep_lane,
					 .userdata = &x };
		memd_usage u = { .struct_size = sizeof(u), .input_tokens = USAGE_IN,
				 .cost_micro_usd = USAGE_COST, .last_prompt_tokens = USAGE_PROMPT };
		memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER };

		cr_assert_eq(s.ops->lane_write(s.h, NULL, &w, &lsink, &err), 0, "%s", err.msg);
		cr_assert_eq(x.l.version, 1);
		cr_assert_eq(append(&s, N_BATCHES, &u, &res, &err), 0, "%s", err.msg);
		get_session(&s, &x);
		cr_assert(x.s.input_tokens == USAGE_IN && x.s.cost_micro_usd == USAGE_COST &&
			  x.s.last_prompt_tokens == USAGE_PROMPT, "session usage %lld %lld %lld",
			  (long long)x.s.input_tokens, (long long)x.s.cost_micro_usd,
			  (long long)x.s.last_prompt_tokens);
		cr_assert_eq(s.ops->lane_get(s.h, NULL, &sc, LANE, &lsink, NULL, &err), 0, "%s", err.msg);
		cr_assert(x.l.input_tokens == USAGE_IN && x.l.cost_micro_usd == USAGE_COST &&
			  x.l.last_prompt_tokens == USAGE_PROMPT, "lane usage %lld %lld %lld",
			  (long long)x.l.input_tokens, (long long)x.l.cost_micro_usd,
			  (long long)x.l.last_prompt_tokens);

		/* The inbox. */
		{
			memd_inbox_item it = { .struct_size = sizeof(it), .mode = MEMD_INBOX_QUEUE,
					       .id = "m1", .body_json = "{\"text\":\"hi\"}",
					       .created_us = T0 };
			memd_inbox_sink isink = { .struct_size = sizeof(isink),
						  .item = ignore_item };
			uint32_t depth = 0;

			cr_assert_eq(s.ops->inbox_put(s.h, NULL, &sc, LANE, &it, &depth, &err), 0,
				     "%s", err.msg);
			cr_assert_eq(depth, 1);
			cr_assert_eq(s.ops->inbox_list(s.h, NULL, &sc, LANE, &isink, &err), 0,
				     "%s", err.msg);
		}

		/* Finalized: the record follows every old event in the feed. */
		w.flags = MEMD_LW_FEED_FINALIZE;
		w.expected_version = 1;
		l.flags = MEMD_LANE_FINALIZED;
		cr_assert_eq(s.ops->lane_write(s.h, NULL, &w, &lsink, &err), 0, "%s", err.msg);
		cr_assert_eq(x.l.version, 2);
		cr_assert_eq(x.l.inbox_depth, 1);
	}

	/* The session list's lane filter on the new column: a session made
	 * by the lane is found, the old one is not. */
	{
		memd_session made = sess;
		memd_session_query q = { .struct_size = sizeof(q), .limit = N_BATCHES,
					 .lane_key = LANE };
		memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER };

		made.id = "s2";
		made.lane_key = LANE;
		made.created_us = T0 + N_BATCHES;
		cr_assert_eq(s.ops->session_create(s.h, NULL, &made, NULL, &ssink, &err), 0, "%s",
			     err.msg);
		x.n_sessions = 0;
		cr_assert_eq(s.ops->session_list(s.h, NULL, &sc, &q, &ssink, &err), 0, "%s",
			     err.msg);
		cr_assert_eq(x.n_sessions, 1);
		cr_assert_str_eq(x.lane_key, LANE);
	}

	{
		memd_feed_sink fsink = { .struct_size = sizeof(fsink), .record = keep_record,
					 .userdata = &x };

		cr_assert_eq(s.ops->feed_read(s.h, NULL, 0, 0, &fsink, &err), 0, "%s", err.msg);
		cr_assert_eq(x.n_feed, N_BATCHES + 2, "%zu feed records", x.n_feed);
		for (size_t i = 0; i + 1 < x.n_feed; i++) {
			cr_assert_eq(x.kinds[i], MEMD_FEED_EVENT);
			cr_assert_lt(x.positions[i], x.positions[i + 1]);
		}
		cr_assert_eq(x.kinds[x.n_feed - 1], MEMD_FEED_FINALIZE);
		cr_assert_str_eq(x.session_of_last, SID);
	}
	store_close(&s);

	c = connect_schema();
	cr_assert_eq(query_int(c, "SELECT version FROM memd_meta"), SCHEMA_LATEST);
	PQfinish(c);
}

/* ---- version 2 -> 3: transcripts ------------------------------------- */

#define N_OLD_EVENTS 4  /* user, assistant, summary, user */
#define OLD_MESSAGES 3  /* the ones that are not summaries */
#define OLD_SUMMARY_SEQ 3
#define REWIND_FROM 3   /* hides the summary and the last user event */
#define N_REWOUND 2

/* What the second test keeps of delivered records. */
typedef struct seen3 {
	memd_session s;
	char ids[N_OLD_EVENTS + 2][ID_MAX];
	char hidden_by[N_OLD_EVENTS + 2][ID_MAX];
	size_t n_events;
	memd_operation o;
	char undone_by[ID_MAX];
	uint32_t kinds[N_OLD_EVENTS * 4];
	int64_t seqs[N_OLD_EVENTS * 4];
	size_t n_feed;
	size_t n_changes;
	char not_restored[NAME_MAX_LEN];
} seen3;

static int32_t keep_session3(void *userdata, const memd_session *s)
{
	seen3 *x = userdata;

	x->s = *s;
	x->s.app = x->s.user = x->s.id = x->s.title = x->s.metadata_json = NULL;
	x->s.lane_key = x->s.origin_json = x->s.origin_platform = x->s.previous_session = NULL;
	x->s.start_reason = x->s.end_reason = NULL;
	return 0;
}

static int32_t keep_event3(void *userdata, const memd_event *e)
{
	seen3 *x = userdata;

	cr_assert_lt(x->n_events, N_OLD_EVENTS + 2);
	snprintf(x->ids[x->n_events], ID_MAX, "%s", e->id);
	snprintf(x->hidden_by[x->n_events], ID_MAX, "%s", e->hidden_by ? e->hidden_by : "");
	x->n_events++;
	return 0;
}

static int32_t keep_op3(void *userdata, const memd_operation *o)
{
	seen3 *x = userdata;

	x->o = *o;
	snprintf(x->undone_by, sizeof(x->undone_by), "%s", o->undone_by ? o->undone_by : "");
	x->o.id = x->o.undo_of = x->o.undone_by = NULL;
	return 0;
}

static int32_t keep_record3(void *userdata, const memd_feed_record *r)
{
	seen3 *x = userdata;

	cr_assert_lt(x->n_feed, sizeof(x->kinds) / sizeof(x->kinds[0]));
	x->kinds[x->n_feed] = r->kind;
	x->seqs[x->n_feed] = r->event ? r->event->seq : 0;
	x->n_feed++;
	return 0;
}

static int32_t count_change(void *userdata, const memd_state_change *c)
{
	seen3 *x = userdata;

	(void)c;
	x->n_changes++;
	return 0;
}

static int32_t keep_text3(void *userdata, const char *text, size_t len)
{
	seen3 *x = userdata;

	snprintf(x->not_restored, sizeof(x->not_restored), "%.*s", (int)len, text);
	return 0;
}

static void get_session3(store *s, seen3 *x)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_session_sink sink = { .struct_size = sizeof(sink), .session = keep_session3,
				   .userdata = x };
	memd_error err = { 0 };

	cr_assert_eq(s->ops->session_get(s->h, NULL, &sc, &sink, &err), 0, "%s", err.msg);
}

static void load3(store *s, uint32_t flags, uint32_t roles, seen3 *x)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_event_query q = { .struct_size = sizeof(q), .flags = flags, .roles = roles };
	memd_event_sink sink = { .struct_size = sizeof(sink), .event = keep_event3, .userdata = x };
	memd_error err = { 0 };

	x->n_events = 0;
	cr_assert_eq(s->ops->events_load(s->h, NULL, &sc, &q, &sink, &err), 0, "%s", err.msg);
}

static void feed3(store *s, seen3 *x)
{
	memd_feed_sink sink = { .struct_size = sizeof(sink), .record = keep_record3,
				.userdata = x };
	memd_error err = { 0 };

	x->n_feed = 0;
	cr_assert_eq(s->ops->feed_read(s->h, NULL, 0, 0, &sink, &err), 0, "%s", err.msg);
}

/* An append of one event (NULL: none) with op and delta. */
static int32_t append_op3(store *s, const char *id, const memd_transcript_op *op,
			  const char *delta, int64_t now_us, memd_append_result *res,
			  memd_error *err)
{
	static int64_t seq;
	memd_event ev = { .struct_size = sizeof(ev), .id = id, .author = "t", .role = "user",
			  .content_json = "{}", .text = id, .timestamp_us = now_us };
	const memd_event *ptr[1] = { &ev };
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_append a = { .struct_size = sizeof(a), .events = ptr, .n_events = id ? 1 : 0,
			  .state_delta_json = delta, .now_us = now_us, .op = op };

	*res = (memd_append_result){ .struct_size = sizeof(*res), .seqs = &seq };
	return s->ops->append(s->h, NULL, &sc, &a, res, err);
}

Test(pg_migrate, version_2_schema_migrates_to_transcripts, .init = setup, .fini = teardown,
     .timeout = 60)
{
	static const char *const roles[N_OLD_EVENTS] = { "user", "assistant", "summary", "user" };
	seen3 x = { 0 };
	memd_session_sink ssink = { .struct_size = sizeof(ssink), .session = keep_session3,
				    .userdata = &x };
	memd_session sess = { .struct_size = sizeof(sess), .app = APP, .user = USER, .id = SID,
			      .created_us = T0, .updated_us = T0 };
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_text_sink nr = { .struct_size = sizeof(nr), .text = keep_text3, .userdata = &x };
	memd_transcript_op rw = { .struct_size = sizeof(rw), .kind = MEMD_OP_REWIND, .id = "rw",
				  .hide_from_seq = REWIND_FROM,
				  .state_expect_json = "{\"app:shared\": 5}", .not_restored = &nr };
	memd_transcript_op un = { .struct_size = sizeof(un), .kind = MEMD_OP_UNDO, .id = "un",
				  .undo_id = "rw" };
	memd_append_result res;
	memd_error err = { 0 };
	PGconn *c;
	store s;

	store_open(&s);
	cr_assert_eq(s.ops->session_create(s.h, NULL, &sess, "{\"k\": 1}", &ssink, &err), 0,
		     "%s", err.msg);
	for (int i = 0; i < N_OLD_EVENTS; i++) {
		char id[ID_MAX];
		memd_event ev;
		const memd_event *ptr[1] = { &ev };
		int64_t seq;
		memd_append a = { .struct_size = sizeof(a), .events = ptr, .n_events = 1,
				  .now_us = T0 + i };

		snprintf(id, sizeof(id), "o%d", i);
		ev = (memd_event){ .struct_size = sizeof(ev), .id = id, .author = "t",
				   .role = roles[i], .content_json = "{}", .text = id,
				   .timestamp_us = T0 + i, .covers_seq = i };
		res = (memd_append_result){ .struct_size = sizeof(res), .seqs = &seq };
		cr_assert_eq(s.ops->append(s.h, NULL, &sc, &a, &res, &err), 0, "%s", err.msg);
	}
	store_close(&s);

	c = connect_schema();
	exec_ok(c, "BEGIN");
	back_to(c, SCHEMA_V2);
	exec_ok(c, "COMMIT");
	cr_assert_eq(query_int(c, "SELECT version FROM memd_meta"), SCHEMA_V2);
	PQfinish(c);

	store_open(&s);
	/* The old session: its messages counted, every event visible. */
	get_session3(&s, &x);
	cr_assert_eq(x.s.message_count, OLD_MESSAGES);
	cr_assert_eq(x.s.summary_seq, OLD_SUMMARY_SEQ);
	load3(&s, 0, 0, &x);
	cr_assert_eq(x.n_events, N_OLD_EVENTS);
	load3(&s, 0, MEMD_ROLE_USER, &x);
	cr_assert_eq(x.n_events, 2);

	/* A rewind of the old events: the summary goes with them. */
	cr_assert_eq(append_op3(&s, "n1", &rw, "{\"k\": 2, \"app:shared\": 1}", T0 + 10, &res,
				&err), 0, "%s", err.msg);
	cr_assert_eq(res.hidden_count, N_REWOUND);
	cr_assert_str_eq(x.not_restored, "[\"app:shared\"]");
	get_session3(&s, &x);
	cr_assert_eq(x.s.message_count, OLD_MESSAGES - 1 + 1);
	cr_assert_eq(x.s.summary_seq, 0);
	load3(&s, 0, 0, &x);
	cr_assert_eq(x.n_events, N_OLD_EVENTS - N_REWOUND + 1);
	cr_assert_str_eq(x.ids[x.n_events - 1], "n1");
	load3(&s, MEMD_EVQ_INCLUDE_HIDDEN, 0, &x);
	cr_assert_eq(x.n_events, N_OLD_EVENTS + 1);
	cr_assert_str_eq(x.hidden_by[REWIND_FROM - 1], "rw");
	cr_assert_str_eq(x.hidden_by[0], "");
	/* The feed: the visible old events, a HIDE record each for the two
	 * hidden ones, then the new event. */
	feed3(&s, &x);
	cr_assert_eq(x.n_feed, 2 + N_REWOUND + 1, "%zu feed records", x.n_feed);
	cr_assert(x.kinds[0] == MEMD_FEED_EVENT && x.kinds[1] == MEMD_FEED_EVENT);
	cr_assert(x.kinds[2] == MEMD_FEED_HIDE && x.seqs[2] == REWIND_FROM);
	cr_assert(x.kinds[3] == MEMD_FEED_HIDE && x.seqs[3] == REWIND_FROM + 1);
	cr_assert(x.kinds[4] == MEMD_FEED_EVENT && x.seqs[4] == N_OLD_EVENTS + 1);

	/* Undone: the old events are back (new EVENT records), n1 hidden
	 * (a hidden event has no EVENT record: its HIDE record follows). */
	cr_assert_eq(append_op3(&s, NULL, &un, NULL, T0 + 20, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.unhidden_count, N_REWOUND);
	cr_assert_eq(res.hidden_count, 1);
	get_session3(&s, &x);
	cr_assert_eq(x.s.message_count, OLD_MESSAGES);
	cr_assert_eq(x.s.summary_seq, OLD_SUMMARY_SEQ);
	feed3(&s, &x);
	cr_assert_eq(x.n_feed, 2 + N_REWOUND + N_REWOUND + 1, "%zu feed records", x.n_feed);
	cr_assert(x.kinds[4] == MEMD_FEED_EVENT && x.seqs[4] == REWIND_FROM);
	cr_assert(x.kinds[5] == MEMD_FEED_EVENT && x.seqs[5] == REWIND_FROM + 1);
	cr_assert(x.kinds[6] == MEMD_FEED_HIDE && x.seqs[6] == N_OLD_EVENTS + 1);
	{
		memd_operation_sink osink = { .struct_size = sizeof(osink), .operation = keep_op3,
					      .userdata = &x };
		memd_state_change_sink csink = { .struct_size = sizeof(csink),
						 .change = count_change, .userdata = &x };
		memd_state_history_query hq = { .struct_size = sizeof(hq) };

		cr_assert_eq(s.ops->operation_get(s.h, NULL, &sc, "rw", &osink, &err), 0, "%s",
			     err.msg);
		cr_assert_str_eq(x.undone_by, "un");
		cr_assert_eq(x.o.hidden_count, N_REWOUND);
		cr_assert(x.o.first_seq == N_OLD_EVENTS + 1 && x.o.last_seq == N_OLD_EVENTS + 1);
		/* Undone already: refused, nothing written. */
		un.id = "un2";
		cr_assert_eq(append_op3(&s, NULL, &un, NULL, T0 + 30, &res, &err), MEMD_ECONFLICT);
		/* k by the rewind (the initial k predates the history; the
		 * shared key's conditional write was skipped). */
		cr_assert_eq(s.ops->state_history(s.h, NULL, &sc, &hq, &csink, &err), 0, "%s",
			     err.msg);
		cr_assert_eq(x.n_changes, 1);
	}

	/* Deleting the session takes its operations and history. */
	cr_assert_eq(s.ops->session_delete(s.h, NULL, &sc, &err), 0, "%s", err.msg);
	store_close(&s);
	c = connect_schema();
	cr_assert_eq(query_int(c, "SELECT version FROM memd_meta"), SCHEMA_LATEST);
	cr_assert_eq(query_int(c, "SELECT count(*) FROM operations"), 0);
	cr_assert_eq(query_int(c, "SELECT count(*) FROM state_history"), 0);
	cr_assert_eq(query_int(c, "SELECT count(*) FROM feed_hides"), 0);
	PQfinish(c);
}

/* ---- version 3 -> 4: memories ------------------------------------------ */

#define MEM_NOW (T0 + 100)
#define N_ADDED 2

/* What the third test keeps of delivered memories and changes. */
typedef struct seen4 {
	int64_t versions[N_ADDED];
	int64_t positions[N_ADDED];
	size_t n_memories;
	uint32_t ops[N_ADDED + 1];
	size_t n_changes;
} seen4;

static int32_t keep_memory4(void *userdata, const memd_memory *m)
{
	seen4 *x = userdata;

	cr_assert_lt(x->n_memories, N_ADDED);
	x->versions[x->n_memories] = m->version;
	x->positions[x->n_memories] = m->position;
	x->n_memories++;
	return 0;
}

static int32_t keep_change4(void *userdata, const memd_memory_change *c)
{
	seen4 *x = userdata;

	cr_assert_lt(x->n_changes, N_ADDED + 1);
	x->ops[x->n_changes++] = c->op;
	return 0;
}

/* One memory commit of (APP, USER) with its writes and cursor (NULL:
 * none; from 0 to N_BATCHES). */
static int32_t commit4(store *s, const memd_memory_write *const *writes, uint32_t n,
		       const char *cursor, seen4 *x, memd_error *err)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER };
	memd_memory_sink sink = { .struct_size = sizeof(sink), .memory = keep_memory4,
				  .userdata = x };
	memd_memory_commit c = { .struct_size = sizeof(c), .n_writes = n, .writes = writes,
				 .cursor_session = cursor, .expected_cursor_seq = 0,
				 .new_cursor_seq = N_BATCHES, .now_us = MEM_NOW };

	x->n_memories = 0;
	return s->ops->memory_commit(s->h, NULL, &sc, &c, &sink, err);
}

Test(pg_migrate, version_3_schema_migrates_to_memories, .init = setup, .fini = teardown,
     .timeout = 60)
{
	seen x = { 0 };
	seen4 y = { 0 };
	memd_session_sink ssink = { .struct_size = sizeof(ssink), .session = keep_session,
				    .userdata = &x };
	memd_session sess = { .struct_size = sizeof(sess), .app = APP, .user = USER, .id = SID,
			      .created_us = T0, .updated_us = T0 };
	memd_scope user = { .struct_size = sizeof(user), .app = APP, .user = USER };
	memd_pending_query pq = { .struct_size = sizeof(pq), .limit = N_BATCHES,
				  .updated_before_us = INT64_MAX };
	memd_memory m1 = { .struct_size = sizeof(m1), .app = APP, .user = USER, .id = "m1",
			   .text = "prefers window seats", .kind = "preference",
			   .topics_json = "[\"travel\", \"flights\"]", .entities_json = "[]",
			   .source_session = SID,
			   .source_json = "{\"session_id\": \"s\", \"seqs\": [1, 2]}", .tokens = 3 };
	memd_memory m2 = m1;
	memd_memory_write add1 = { .struct_size = sizeof(add1), .op = MEMD_MEM_ADD, .memory = &m1,
				   .actor = "extractor" };
	memd_memory_write add2 = add1;
	const memd_memory_write *adds[N_ADDED] = { &add1, &add2 };
	memd_append_result res;
	memd_error err = { 0 };
	PGconn *c;
	store s;

	m2.id = "m2";
	m2.text = "allergic to nuts";
	m2.kind = "fact";
	add2.memory = &m2;

	store_open(&s);
	cr_assert_eq(s.ops->session_create(s.h, NULL, &sess, NULL, &ssink, &err), 0, "%s",
		     err.msg);
	for (int i = 0; i < N_BATCHES; i++)
		cr_assert_eq(append(&s, i, NULL, &res, &err), 0, "%s", err.msg);
	store_close(&s);

	c = connect_schema();
	cr_assert_eq(query_int(c, "SELECT version FROM memd_meta"), SCHEMA_LATEST);
	exec_ok(c, "BEGIN");
	back_to(c, SCHEMA_V3);
	exec_ok(c, "COMMIT");
	cr_assert_eq(query_int(c, "SELECT version FROM memd_meta"), SCHEMA_V3);
	cr_assert_eq(query_int(c, "SELECT count(*) FROM pg_catalog.pg_attribute"
				  " WHERE attrelid = 'sessions'::regclass AND attnum > 0"
				  " AND NOT attisdropped AND attname = 'memory_seq'"),
		     0, "the schema is not back at version 3");
	PQfinish(c);

	store_open(&s);
	/* The old session: nothing of it read by extraction yet. */
	get_session(&s, &x);
	cr_assert_eq(x.s.last_seq, N_BATCHES);
	cr_assert_eq(x.s.memory_seq, 0);
	x.n_sessions = 0;
	cr_assert_eq(s.ops->session_list_pending(s.h, NULL, &pq, &ssink, &err), 0, "%s", err.msg);
	cr_assert_eq(x.n_sessions, 1, "%zu sessions pending", x.n_sessions);

	/* Two memories and the cursor, once; the same commit again is a
	 * conflict that writes nothing. */
	cr_assert_eq(commit4(&s, adds, N_ADDED, SID, &y, &err), 0, "%s", err.msg);
	cr_assert_eq(y.n_memories, N_ADDED);
	cr_assert(y.versions[0] == 1 && y.versions[1] == 1);
	cr_assert_gt(y.positions[0], N_BATCHES, "memory positions follow the old events'");
	cr_assert_lt(y.positions[0], y.positions[1]);
	cr_assert_eq(commit4(&s, adds, N_ADDED, SID, &y, &err), MEMD_ECONFLICT, "%s", err.msg);
	cr_assert_eq(y.n_memories, 0);
	get_session(&s, &x);
	cr_assert_eq(x.s.memory_seq, N_BATCHES);
	x.n_sessions = 0;
	cr_assert_eq(s.ops->session_list_pending(s.h, NULL, &pq, &ssink, &err), 0, "%s", err.msg);
	cr_assert_eq(x.n_sessions, 0, "the session is read: not pending");

	/* An update of m1, a delete of m2. */
	{
		memd_memory_write up = { .struct_size = sizeof(up), .op = MEMD_MEM_UPDATE,
					 .expected_version = 1, .memory = &m1, .actor = "api" };
		memd_memory_write del = { .struct_size = sizeof(del), .op = MEMD_MEM_DELETE,
					  .expected_version = 1, .memory = &m2, .actor = "api",
					  .reason = "wrong" };
		const memd_memory_write *w[N_ADDED] = { &up, &del };
		memd_memory_change_sink csink = { .struct_size = sizeof(csink),
						  .change = keep_change4, .userdata = &y };

		m1.text = "prefers aisle seats";
		cr_assert_eq(commit4(&s, w, N_ADDED, NULL, &y, &err), 0, "%s", err.msg);
		cr_assert(y.versions[0] == 2 && y.versions[1] == 1);
		cr_assert_eq(s.ops->memory_history(s.h, NULL, &user, "m2", &csink, &err), 0, "%s",
			     err.msg);
		cr_assert_eq(y.n_changes, 2);
		cr_assert(y.ops[0] == MEMD_MEM_ADD && y.ops[1] == MEMD_MEM_DELETE);
	}

	/* The feed: the old events, then m1 at its update's position and
	 * m2's delete record. */
	{
		memd_feed_sink fsink = { .struct_size = sizeof(fsink), .record = keep_record,
					 .userdata = &x };

		x.n_feed = 0;
		cr_assert_eq(s.ops->feed_read(s.h, NULL, 0, 0, &fsink, &err), 0, "%s", err.msg);
		cr_assert_eq(x.n_feed, N_BATCHES + 2, "%zu feed records", x.n_feed);
		for (size_t i = 0; i < x.n_feed; i++) {
			cr_assert_eq(x.kinds[i], i < N_BATCHES ? MEMD_FEED_EVENT :
					  i == N_BATCHES ? MEMD_FEED_MEMORY : MEMD_FEED_MEMORY_DELETE);
			if (i)
				cr_assert_lt(x.positions[i - 1], x.positions[i]);
		}
	}

	/* The user's delete takes the memories, history and delete records. */
	cr_assert_eq(s.ops->user_delete(s.h, NULL, &user, &err), 0, "%s", err.msg);
	store_close(&s);
	c = connect_schema();
	cr_assert_eq(query_int(c, "SELECT version FROM memd_meta"), SCHEMA_LATEST);
	cr_assert_eq(query_int(c, "SELECT count(*) FROM memories"), 0);
	cr_assert_eq(query_int(c, "SELECT count(*) FROM memory_history"), 0);
	cr_assert_eq(query_int(c, "SELECT count(*) FROM feed_memory_deletes"), 0);
	PQfinish(c);
}

/* What test 4 keeps of delivered checkpoints, writes and tasks. */
typedef struct seen5 {
	size_t n_checkpoints, n_writes, n_tasks;
	char id[ID_MAX];
	uint32_t run_state;
	uint64_t payload_size;
	int64_t version;
} seen5;

static int32_t keep_checkpoint5(void *userdata, const memd_checkpoint *ck)
{
	seen5 *y = userdata;

	snprintf(y->id, sizeof(y->id), "%s", ck->id);
	y->run_state = ck->run_state;
	y->payload_size = ck->payload_size;
	y->n_checkpoints++;
	return 0;
}

static int32_t keep_write5(void *userdata, const memd_checkpoint_write *w)
{
	(void)w;
	((seen5 *)userdata)->n_writes++;
	return 0;
}

static int32_t keep_task5(void *userdata, const memd_task *t)
{
	seen5 *y = userdata;

	y->version = t->version;
	y->n_tasks++;
	return 0;
}

Test(pg_migrate, version_4_schema_migrates_to_checkpoints, .init = setup, .fini = teardown,
     .timeout = 60)
{
	seen x = { 0 };
	seen5 y = { 0 };
	memd_session_sink ssink = { .struct_size = sizeof(ssink), .session = keep_session,
				    .userdata = &x };
	memd_session sess = { .struct_size = sizeof(sess), .app = APP, .user = USER, .id = SID,
			      .created_us = T0, .updated_us = T0 };
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_checkpoint ck = { .struct_size = sizeof(ck), .run_state = MEMD_RUN_INTERRUPTED,
			       .app = APP, .user = USER, .session = SID, .ns = "", .id = "c1",
			       .type = "json", .payload = "{\"v\":1}", .payload_size = 7,
			       .metadata_json = "{\"step\": 1}" };
	memd_checkpoint_write wr = { .struct_size = sizeof(wr), .task_id = "t", .idx = 0,
				     .channel = "messages", .type = "json", .value = "[]",
				     .value_size = 2 };
	memd_checkpoint_writes ws = { .struct_size = sizeof(ws), .ns = "", .checkpoint_id = "c1",
				      .writes = &wr, .n_writes = 1, .now_us = T0 + 1 };
	memd_checkpoint_sink csink = { .struct_size = sizeof(csink), .userdata = &y,
				       .checkpoint = keep_checkpoint5, .write = keep_write5 };
	memd_resumable_query rq = { .struct_size = sizeof(rq), .limit = N_BATCHES, .app = APP,
				    .run_states = 1u << MEMD_RUN_INTERRUPTED, .now_us = T0 + 1 };
	memd_task task = { .struct_size = sizeof(task), .app = APP, .id = "task1",
			   .context_id = SID, .user = USER, .state = "working",
			   .task_json = "{\"kind\": \"task\", \"id\": \"task1\"}" };
	memd_task_sink tsink = { .struct_size = sizeof(tsink), .task = keep_task5, .userdata = &y };
	memd_append_result res;
	memd_error err = { 0 };
	int created = -1;
	PGconn *c;
	store s;

	store_open(&s);
	cr_assert_eq(s.ops->session_create(s.h, NULL, &sess, NULL, &ssink, &err), 0, "%s",
		     err.msg);
	for (int i = 0; i < N_BATCHES; i++)
		cr_assert_eq(append(&s, i, NULL, &res, &err), 0, "%s", err.msg);
	store_close(&s);

	c = connect_schema();
	cr_assert_eq(query_int(c, "SELECT version FROM memd_meta"), SCHEMA_LATEST);
	exec_ok(c, "BEGIN");
	back_to(c, SCHEMA_V4);
	exec_ok(c, "COMMIT");
	cr_assert_eq(query_int(c, "SELECT version FROM memd_meta"), SCHEMA_V4);
	cr_assert_eq(query_int(c, "SELECT count(*) FROM pg_catalog.pg_class"
				  " WHERE relname IN ('checkpoints', 'tasks')"
				  " AND relnamespace = pg_catalog.current_schema()::regnamespace"),
		     0, "the schema is not back at version 4");
	PQfinish(c);

	store_open(&s);
	/* A checkpoint of the old session (not created again), its write,
	 * the latest with it, and the session among the resumable ones. */
	cr_assert_eq(s.ops->checkpoint_put(s.h, NULL, &ck, 1, T0 + 1, &created, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(created, 0, "the old session exists");
	cr_assert_eq(s.ops->checkpoint_put_writes(s.h, NULL, &sc, &ws, &err), 0, "%s", err.msg);
	cr_assert_eq(s.ops->checkpoint_get(s.h, NULL, &sc, "", NULL, T0 + 1, &csink, &err), 0,
		     "%s", err.msg);
	cr_assert(y.n_checkpoints == 1 && y.n_writes == 1 && strcmp(y.id, "c1") == 0);
	cr_assert_eq(y.payload_size, ck.payload_size);
	csink.write = NULL;
	y.n_checkpoints = 0;
	cr_assert_eq(s.ops->checkpoint_resumable(s.h, NULL, &rq, &csink, &err), 0, "%s", err.msg);
	cr_assert_eq(y.n_checkpoints, 1, "%zu resumable", y.n_checkpoints);
	cr_assert_eq(y.run_state, MEMD_RUN_INTERRUPTED);
	/* A task linked to the old session. */
	cr_assert_eq(s.ops->task_put(s.h, NULL, &task, MEMD_TASK_CREATE, 0, T0 + 1, &tsink, &err),
		     0, "%s", err.msg);
	cr_assert(y.n_tasks == 1 && y.version == 1);
	/* The session's delete takes them all. */
	cr_assert_eq(s.ops->session_delete(s.h, NULL, &sc, &err), 0, "%s", err.msg);
	store_close(&s);
	c = connect_schema();
	cr_assert_eq(query_int(c, "SELECT version FROM memd_meta"), SCHEMA_LATEST);
	cr_assert_eq(query_int(c, "SELECT count(*) FROM checkpoints"), 0);
	cr_assert_eq(query_int(c, "SELECT count(*) FROM checkpoint_writes"), 0);
	cr_assert_eq(query_int(c, "SELECT count(*) FROM checkpoint_heads"), 0);
	cr_assert_eq(query_int(c, "SELECT count(*) FROM tasks"), 0);
	PQfinish(c);
}

/* ---- version 5 -> 6: the task path of checkpoint writes ---------------- */

#define N_WRITES_MAX 8
#define PATH_A "~__pregel_pull, a"
#define PATH_B "~__pregel_pull, b"

/* What test 5 keeps of delivered writes, in delivery order: "<task
 * path>|<task id>|<idx>" each. */
typedef struct seen6 {
	size_t n_checkpoints, n_writes;
	char writes[N_WRITES_MAX][ID_MAX * 2];
} seen6;

static int32_t keep_checkpoint6(void *userdata, const memd_checkpoint *ck)
{
	(void)ck;
	((seen6 *)userdata)->n_checkpoints++;
	return 0;
}

static int32_t keep_task_write6(void *userdata, const memd_checkpoint_write *w,
				const char *task_path)
{
	seen6 *y = userdata;

	cr_assert_not_null(task_path, "a task path is never NULL");
	cr_assert_lt(y->n_writes, N_WRITES_MAX);
	snprintf(y->writes[y->n_writes], sizeof(y->writes[0]), "%s|%s|%lld", task_path,
		 w->task_id, (long long)w->idx);
	y->n_writes++;
	return 0;
}

/* A 1.5 sink's write: the path is not handed over. */
static int32_t keep_write6(void *userdata, const memd_checkpoint_write *w)
{
	return keep_task_write6(userdata, w, "(none)");
}

static int32_t refuse_task_write6(void *userdata, const memd_checkpoint_write *w,
				  const char *task_path)
{
	(void)userdata;
	(void)w;
	(void)task_path;
	cr_assert_fail("task_write called beyond the sink's struct_size");
	return 0;
}

/* The writes of c1 by get (sink: a 1.6 one unless sink_size says less)
 * and, for a full sink, by list too, which must agree; y gets get's. */
static void read_writes6(store *s, uint32_t sink_size, seen6 *y)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_checkpoint_sink sink = { .struct_size = sink_size, .userdata = y,
				      .checkpoint = keep_checkpoint6, .write = keep_write6,
				      .task_write = sink_size == sizeof(sink) ? keep_task_write6
									      : refuse_task_write6 };
	memd_checkpoint_query q = { .struct_size = sizeof(q), .limit = N_BATCHES, .session = SID,
				    .now_us = T0 + 1 };
	memd_error err = { 0 };
	seen6 l = { 0 };

	memset(y, 0, sizeof(*y));
	cr_assert_eq(s->ops->checkpoint_get(s->h, NULL, &sc, "", "c1", T0 + 1, &sink, &err), 0,
		     "%s", err.msg);
	cr_assert_eq(y->n_checkpoints, 1);
	if (sink_size != sizeof(sink))
		return;
	sink.userdata = &l;
	cr_assert_eq(s->ops->checkpoint_list(s->h, NULL, &sc, &q, &sink, &err), 0, "%s", err.msg);
	cr_assert_eq(l.n_checkpoints, 1);
	cr_assert_eq(l.n_writes, y->n_writes, "list: %zu writes, get: %zu", l.n_writes,
		     y->n_writes);
	for (size_t i = 0; i < l.n_writes; i++)
		cr_assert_str_eq(l.writes[i], y->writes[i], "write %zu", i);
}

/* Put n writes wr on c1, with paths (NULL: none). */
static void put_writes6(store *s, const memd_checkpoint_write *wr, const char *const *paths,
			uint32_t n)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = USER, .session = SID };
	memd_checkpoint_writes ws = { .struct_size = sizeof(ws), .ns = "", .checkpoint_id = "c1",
				      .writes = wr, .n_writes = n, .now_us = T0 + 1,
				      .task_paths = paths };
	memd_error err = { 0 };

	cr_assert_eq(s->ops->checkpoint_put_writes(s->h, NULL, &sc, &ws, &err), 0, "%s", err.msg);
}

#define WRITE6(task, i, fl)                                                                  \
	{ .struct_size = sizeof(memd_checkpoint_write), .flags = (fl), .task_id = (task),    \
	  .idx = (i), .channel = "messages", .type = "json", .value = "[]", .value_size = 2 }

Test(pg_migrate, version_5_schema_migrates_to_task_paths, .init = setup, .fini = teardown,
     .timeout = 60)
{
	seen x = { 0 };
	seen6 y;
	memd_session_sink ssink = { .struct_size = sizeof(ssink), .session = keep_session,
				    .userdata = &x };
	memd_session sess = { .struct_size = sizeof(sess), .app = APP, .user = USER, .id = SID,
			      .created_us = T0, .updated_us = T0 };
	memd_checkpoint ck = { .struct_size = sizeof(ck), .app = APP, .user = USER,
			       .session = SID, .ns = "", .id = "c1", .type = "json",
			       .payload = "{}", .payload_size = 2, .metadata_json = "{}" };
	/* Before the migration: task "b" and task "a", no paths. */
	const memd_checkpoint_write old[3] = { WRITE6("b", 0, 0), WRITE6("a", 1, 0),
					       WRITE6("a", -1, 0) };
	/* After it: task "c" with PATH_A, task "b"'s write again with PATH_B
	 * (replaced: it moves behind c's), task "a"'s with PATH_A (kept: it
	 * stays at ""). */
	const memd_checkpoint_write later[3] = { WRITE6("c", 0, 0),
						 WRITE6("b", 0, MEMD_CKW_REPLACE),
						 WRITE6("a", 1, 0) };
	const char *const paths[3] = { PATH_A, PATH_B, PATH_A };
	memd_error err = { 0 };
	PGconn *c;
	store s;

	store_open(&s);
	cr_assert_eq(s.ops->session_create(s.h, NULL, &sess, NULL, &ssink, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(s.ops->checkpoint_put(s.h, NULL, &ck, 0, T0, NULL, &err), 0, "%s", err.msg);
	put_writes6(&s, old, NULL, 3);
	store_close(&s);

	c = connect_schema();
	cr_assert_eq(query_int(c, "SELECT version FROM memd_meta"), SCHEMA_LATEST);
	exec_ok(c, "BEGIN");
	back_to(c, SCHEMA_V5);
	exec_ok(c, "COMMIT");
	cr_assert_eq(query_int(c, "SELECT version FROM memd_meta"), SCHEMA_V5);
	cr_assert_eq(query_int(c, "SELECT count(*) FROM pg_catalog.pg_attribute"
				  " WHERE attrelid = 'checkpoint_writes'::regclass AND attnum > 0"
				  " AND NOT attisdropped AND attname = 'task_path'"),
		     0, "the schema is not back at version 5");
	cr_assert_eq(query_int(c, "SELECT count(*) FROM checkpoint_writes"), 3);
	PQfinish(c);

	store_open(&s);
	/* The old writes: path "", in (task_id, idx) order. */
	read_writes6(&s, sizeof(memd_checkpoint_sink), &y);
	cr_assert_eq(y.n_writes, 3);
	cr_assert_str_eq(y.writes[0], "|a|-1");
	cr_assert_str_eq(y.writes[1], "|a|1");
	cr_assert_str_eq(y.writes[2], "|b|0");

	put_writes6(&s, later, paths, 3);
	read_writes6(&s, sizeof(memd_checkpoint_sink), &y);
	cr_assert_eq(y.n_writes, 4);
	cr_assert_str_eq(y.writes[0], "|a|-1");
	cr_assert_str_eq(y.writes[1], "|a|1", "a kept write took the new path");
	cr_assert_str_eq(y.writes[2], PATH_A "|c|0");
	cr_assert_str_eq(y.writes[3], PATH_B "|b|0", "a replaced write kept its old path");

	/* A 1.5 sink (no task_write in its struct_size) gets them through
	 * write, in the same order. */
	read_writes6(&s, offsetof(memd_checkpoint_sink, task_write), &y);
	cr_assert_eq(y.n_writes, 4);
	cr_assert_str_eq(y.writes[0], "(none)|a|-1");
	cr_assert_str_eq(y.writes[3], "(none)|b|0");
	store_close(&s);

	/* The column is as version 6 makes it on a new schema: bytes order. */
	c = connect_schema();
	cr_assert_eq(query_int(c, "SELECT version FROM memd_meta"), SCHEMA_LATEST);
	cr_assert_eq(query_int(c, "SELECT count(*) FROM information_schema.columns"
				  " WHERE table_schema = pg_catalog.current_schema()"
				  " AND table_name = 'checkpoint_writes' AND column_name = 'task_path'"
				  " AND collation_name = 'C' AND is_nullable = 'NO'"
				  " AND column_default = '''''::text'"),
		     1, "task_path is not text COLLATE \"C\" NOT NULL DEFAULT ''");
	PQfinish(c);
}
