/* SPDX-License-Identifier: MIT */
/*
 * pg_bench: the PostgreSQL store against raw libpq running the same
 * statements (store_bench.h; the runs and figures are store_bench.c's).
 *
 * The raw side sends exactly the plugin's statements for an append
 * (BEGIN, the session row lock, the id lookups; then the feed counter,
 * the INSERTs, the session update, COMMIT), prepared and pipelined into
 * the same two round trips, and its context read (the session check and
 * the newest 20) in one. Runs on a fresh schema of the server in
 * MEMD_PG_DSN / MEMD_PG_PASSWORD. Not a pass/fail test. Run from a build
 * dir:
 *   ../tests/services/with-services.sh --only postgres \
 *       env MEMD_PLUGIN_PATH=plugins tests/multiproc/pg_bench [-t threads] [-p pool] \
 *       [-s seconds] [-r rounds]
 */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_bench.h"

#define NUM_LEN 24
#define IDS_PARAMS 35          /* app, user, session and 32 ids */
#define INSERT_PARAMS 18
#define APPENDED_PARAMS 8
#define CONTEXT_PARAMS 12
#define SESSION_PARAMS 3
#define CONTEXT_LIMIT_TEXT "20" /* BENCH_CONTEXT_LIMIT */
#define SEQ_UNBOUNDED_TEXT "9223372036854775807"
#define EVENT_TOKENS_TEXT "6" /* BENCH_EVENT_TOKENS */

/* The plugin's statements (backends/postgres), verbatim. */
static const char SQL_LOCK[] =
	"SELECT version, last_seq, summary_seq FROM sessions"
	" WHERE app = $1 AND \"user\" = $2 AND id = $3 FOR NO KEY UPDATE";
static const char SQL_IDS[] =
	"SELECT id, seq FROM events WHERE app = $1 AND \"user\" = $2 AND session = $3"
	" AND id IN ($4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,"
	" $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35)";
static const char SQL_ALLOC[] = "UPDATE feed_counter SET last = last + $1::bigint WHERE id = 1";
static const char SQL_INSERT[] =
	"INSERT INTO events (app, \"user\", session, seq, id, position, invocation_id, author,"
	" role, branch, content, actions, metadata, timestamp_us, text, tokens, covers_seq,"
	" operation)"
	" VALUES ($1, $2, $3, $4, $5, (SELECT last FROM feed_counter WHERE id = 1) - $6::bigint,"
	" $7, $8, $9, $10, $11::jsonb, $12::jsonb, $13::jsonb, $14, $15, $16, $17, $18)";
static const char SQL_APPENDED[] =
	"UPDATE sessions SET version = version + 1, last_seq = $4,"
	" summary_seq = coalesce($5::bigint, (SELECT max(seq) FROM events"
	"  WHERE app = $1 AND \"user\" = $2 AND session = $3 AND role = 'summary'"
	"  AND hidden_us = 0), 0),"
	" message_count = message_count + $8::bigint,"
	" updated_us = $6, title = coalesce(title, $7)"
	" WHERE app = $1 AND \"user\" = $2 AND id = $3";
static const char SQL_CONTEXT[] =
	"SELECT position, app, \"user\", session, seq, id, invocation_id, author, role, branch,"
	" content::text, actions::text, metadata::text, timestamp_us, text, tokens, covers_seq,"
	" hidden_us, hidden_by, hidden_kind, operation"
	" FROM events WHERE app = $1 AND \"user\" = $2 AND session = $3 AND seq > $4"
	" AND seq < $5 AND ($7::boolean OR role IN ($8::text, $9::text, $10::text, $11::text,"
	" $12::text)) AND hidden_us = 0 ORDER BY seq DESC LIMIT $6";
static const char SQL_EXISTS[] =
	"SELECT version, last_seq, summary_seq FROM sessions"
	" WHERE app = $1 AND \"user\" = $2 AND id = $3";

/* ---- raw libpq ------------------------------------------------------ */

struct raw_conn {
	PGconn *pg;
};

static void raw_check(PGconn *pg, PGresult *r, ExecStatusType want, const char *what)
{
	if (!r || PQresultStatus(r) != want)
		bench_die(what, r ? PQresultErrorMessage(r) : PQerrorMessage(pg));
	PQclear(r);
}

static raw_conn *raw_open(const char *ns)
{
	raw_conn *c = calloc(1, sizeof(*c));
	const char *keys[] = { "dbname", "password", "client_encoding", NULL };
	const char *vals[] = { getenv("MEMD_PG_DSN"), getenv("MEMD_PG_PASSWORD"), "UTF8", NULL };
	const char *p[1] = { ns };
	PGresult *r;

	if (!c)
		bench_die("connect", "out of memory");
	c->pg = PQconnectdbParams(keys, vals, 1);
	if (PQstatus(c->pg) != CONNECTION_OK)
		bench_die("connect", PQerrorMessage(c->pg));
	r = PQexecParams(c->pg, "SELECT pg_catalog.set_config('search_path',"
			 " pg_catalog.quote_ident($1::text), false)", 1, NULL, p, NULL, NULL, 0);
	raw_check(c->pg, r, PGRES_TUPLES_OK, "search_path");
	raw_check(c->pg, PQprepare(c->pg, "lock", SQL_LOCK, SESSION_PARAMS, NULL), PGRES_COMMAND_OK, "prepare");
	raw_check(c->pg, PQprepare(c->pg, "ids", SQL_IDS, IDS_PARAMS, NULL), PGRES_COMMAND_OK,
		  "prepare");
	raw_check(c->pg, PQprepare(c->pg, "alloc", SQL_ALLOC, 1, NULL), PGRES_COMMAND_OK, "prepare");
	raw_check(c->pg, PQprepare(c->pg, "insert", SQL_INSERT, INSERT_PARAMS, NULL), PGRES_COMMAND_OK,
		  "prepare");
	raw_check(c->pg, PQprepare(c->pg, "appended", SQL_APPENDED, APPENDED_PARAMS, NULL),
		  PGRES_COMMAND_OK, "prepare");
	raw_check(c->pg, PQprepare(c->pg, "context", SQL_CONTEXT, CONTEXT_PARAMS, NULL),
		  PGRES_COMMAND_OK, "prepare");
	raw_check(c->pg, PQprepare(c->pg, "exists", SQL_EXISTS, SESSION_PARAMS, NULL),
		  PGRES_COMMAND_OK, "prepare");
	raw_check(c->pg, PQprepare(c->pg, "begin", "BEGIN", 0, NULL), PGRES_COMMAND_OK, "prepare");
	raw_check(c->pg, PQprepare(c->pg, "begin_read",
				   "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL),
		  PGRES_COMMAND_OK, "prepare");
	raw_check(c->pg, PQprepare(c->pg, "commit", "COMMIT", 0, NULL), PGRES_COMMAND_OK,
		  "prepare");
	if (PQenterPipelineMode(c->pg) != 1)
		bench_die("pipeline", PQerrorMessage(c->pg));
	return c;
}

static void raw_close(raw_conn *c)
{
	PQfinish(c->pg);
	free(c);
}

/* Collect n statement results (keeping the one at keep_at, if >= 0) and
 * the sync. */
static PGresult *raw_collect(raw_conn *c, int n, int keep_at)
{
	PGresult *kept = NULL, *r;

	if (PQpipelineSync(c->pg) != 1)
		bench_die("sync", PQerrorMessage(c->pg));
	for (int i = 0; i < n; i++) {
		r = PQgetResult(c->pg);
		if (!r || (PQresultStatus(r) != PGRES_COMMAND_OK &&
			   PQresultStatus(r) != PGRES_TUPLES_OK))
			bench_die("raw statement", r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
		if (i == keep_at)
			kept = r;
		else
			PQclear(r);
		r = PQgetResult(c->pg);
		if (r)
			bench_die("raw", "extra result");
	}
	r = PQgetResult(c->pg);
	if (!r || PQresultStatus(r) != PGRES_PIPELINE_SYNC)
		bench_die("raw", "no sync");
	PQclear(r);
	return kept;
}

static void raw_send(raw_conn *c, const char *stmt, int n, const char *const *vals)
{
	if (!PQsendQueryPrepared(c->pg, stmt, n, vals, NULL, NULL, 0))
		bench_die("send", PQerrorMessage(c->pg));
}

/* The plugin's append, statement for statement, in its two round trips. */
static void raw_append(raw_conn *c, const char *session, const char *prefix, long k, int batch)
{
	char ids[BENCH_MAX_BATCH][BENCH_ID_LEN], seq[BENCH_MAX_BATCH][NUM_LEN],
		back[BENCH_MAX_BATCH][NUM_LEN];
	char ts[NUM_LEN], n[NUM_LEN], last[NUM_LEN];
	const char *idv[IDS_PARAMS] = { BENCH_APP, BENCH_USER, session };
	const char *sess[SESSION_PARAMS] = { BENCH_APP, BENCH_USER, session };
	PGresult *head;
	long last_seq;
	int sent = 0;

	for (int j = 0; j < batch; j++) {
		snprintf(ids[j], BENCH_ID_LEN, "%s-%ld-%d", prefix, k, j);
		idv[3 + j] = ids[j];
	}
	raw_send(c, "begin", 0, NULL);
	raw_send(c, "lock", SESSION_PARAMS, sess);
	raw_send(c, "ids", IDS_PARAMS, idv);
	head = raw_collect(c, 3, 1);
	last_seq = strtol(PQgetvalue(head, 0, 1), NULL, 10);
	PQclear(head);

	snprintf(n, sizeof(n), "%d", batch);
	snprintf(ts, sizeof(ts), "%lld", (long long)(BENCH_T0 + k));
	{
		const char *v[1] = { n };
		raw_send(c, "alloc", 1, v);
		sent++;
	}
	for (int j = 0; j < batch; j++) {
		const char *v[INSERT_PARAMS];
		snprintf(seq[j], NUM_LEN, "%ld", last_seq + 1 + j);
		snprintf(back[j], NUM_LEN, "%d", batch - 1 - j);
		v[0] = BENCH_APP; v[1] = BENCH_USER; v[2] = session; v[3] = seq[j]; v[4] = ids[j];
		v[5] = back[j]; v[6] = NULL; v[7] = "bench"; v[8] = "user"; v[9] = NULL;
		v[10] = BENCH_EVENT_CONTENT; v[11] = NULL; v[12] = NULL; v[13] = ts;
		v[14] = BENCH_EVENT_TEXT;
		v[15] = EVENT_TOKENS_TEXT; v[16] = "0"; v[17] = NULL;
		raw_send(c, "insert", INSERT_PARAMS, v);
		sent++;
	}
	snprintf(last, sizeof(last), "%ld", last_seq + batch);
	{
		char msgs[NUM_LEN];
		const char *v[APPENDED_PARAMS] = { BENCH_APP, BENCH_USER, session, last, "0", ts,
					       NULL, msgs };
		snprintf(msgs, sizeof(msgs), "%d", batch);
		raw_send(c, "appended", APPENDED_PARAMS, v);
		sent++;
	}
	raw_send(c, "commit", 0, NULL);
	sent++;
	raw_collect(c, sent, -1);
}

/* The plugin's context query: session check and the newest N. */
static void raw_context(raw_conn *c, const char *session)
{
	const char *sess[SESSION_PARAMS] = { BENCH_APP, BENCH_USER, session };
	const char *v[CONTEXT_PARAMS] = { BENCH_APP, BENCH_USER, session, "0", SEQ_UNBOUNDED_TEXT,
					  CONTEXT_LIMIT_TEXT, "t" };
	PGresult *r;

	raw_send(c, "begin_read", 0, NULL);
	raw_send(c, "exists", SESSION_PARAMS, sess);
	raw_send(c, "context", CONTEXT_PARAMS, v);
	raw_send(c, "commit", 0, NULL);
	r = raw_collect(c, 4, 2);
	if (PQntuples(r) != BENCH_CONTEXT_LIMIT)
		bench_die("context", "wrong row count");
	PQclear(r);
}

/* ---- the store ------------------------------------------------------ */

const bench_store bench_the_store = {
	.prog = "pg_bench",
	.plugin = "postgres",
	.title = "PostgreSQL store vs raw libpq, same statements",
	.ns_prefix = "bench_",
	.env_var = "MEMD_PG_DSN",
	.yaml_head = "{plugin: postgres, dsn: \"${MEMD_PG_DSN}\","
		     " password: \"${MEMD_PG_PASSWORD}\"",
	.ns_key = "schema",
	.raw_open = raw_open,
	.raw_close = raw_close,
	.raw_append = raw_append,
	.raw_context = raw_context,
	.drop = NULL,
};
