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
 * Runs under tests/services/with-services.sh (MEMD_PG_DSN, MEMD_PG_PASSWORD).
 */
#include <criterion/criterion.h>
#include <libpq-fe.h>
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
#define SCHEMA_LATEST 2
#define N_BATCHES 5
#define T0 1700000000000000LL /* a plausible unix time in us */
#define USAGE_IN 40
#define USAGE_COST 1500
#define USAGE_PROMPT 900

/* Back to version 1: what version 2 added, removed. */
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
	for (size_t i = 0; SQL_BACK_TO_V1[i]; i++)
		exec_ok(c, SQL_BACK_TO_V1[i]);
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
		cr_assert_eq(s.ops->lane_get(s.h, NULL, &sc, LANE, &lsink, &err), 0, "%s", err.msg);
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
