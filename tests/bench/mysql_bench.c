/* SPDX-License-Identifier: MIT */
/*
 * mysql_bench: the MariaDB store against the raw client library
 * (libmariadb prepared statements) running the same statements
 * (store_bench.h; the runs and figures are store_bench.c's).
 *
 * The raw side sends exactly the plugin's statements for an append
 * (START TRANSACTION, the session row lock, the session update, the feed
 * counter, the INSERT - one row, or 32 in one array-bound execution - and
 * COMMIT) and its context read. Runs on a fresh database of the server in
 * MEMD_MYSQL_HOST/PORT/BENCH_USER/PASSWORD, dropped at the end. Not a pass/fail
 * test. Run from a build dir:
 *   ../tests/services/with-services.sh --only mariadb \
 *       env MEMD_PLUGIN_PATH=plugins tests/multiproc/mysql_bench [-t threads] [-p pool] \
 *       [-s seconds] [-r rounds]
 */
#include <mysql.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_bench.h"

#define INSERT_PARAMS 19
#define STRING_COLS 13
#define INT_COLS 6
#define CONTEXT_COLS 21
#define CONTEXT_PARAMS 12 /* the scope, the seq bounds, the roles mask and names, the limit */
#define ROLE_NAMES 5
#define RESULT_BUF 4096

/* The plugin's statements (backends/mysql), verbatim. */
static const char SQL_SETUP[] =
	"SET SESSION max_statement_time = 30, innodb_lock_wait_timeout = 30,"
	" sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION,ERROR_FOR_DIVISION_BY_ZERO'";
static const char SQL_ISOLATION[] = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";
static const char SQL_BEGIN[] = "START TRANSACTION";
static const char SQL_COMMIT[] = "COMMIT";
static const char SQL_LOCK[] =
	"SELECT version, last_seq, summary_seq FROM memd_sessions"
	" WHERE app = ? AND user = ? AND id = ? FOR UPDATE";
static const char SQL_APPENDED[] =
	"UPDATE memd_sessions SET version = version + 1, last_seq = ?, summary_seq = ?,"
	" message_count = message_count + ?, updated_us = ?, title = COALESCE(title, ?)"
	" WHERE app = ? AND user = ? AND id = ?";
static const char SQL_ADVANCE[] =
	"UPDATE memd_feed_counter SET last = LAST_INSERT_ID(last + ?) WHERE id = 1";
static const char SQL_INSERT[] =
	"INSERT INTO memd_events (position, app, user, session, seq, id, invocation_id, author,"
	" role, branch, content, actions, metadata, timestamp_us, text, tokens, covers_seq,"
	" is_summary, operation) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
/* The newest rows, newest first (the plugin also copies them to hand
 * them out oldest first; the raw side only reads them). */
static const char SQL_CONTEXT[] =
	"SELECT position, app, user, session, seq, id, invocation_id, author,"
	" role, branch, content, actions, metadata, timestamp_us, text, tokens, covers_seq,"
	" hidden_us, hidden_by, hidden_kind, operation"
	" FROM memd_events FORCE INDEX (memd_events_visible)"
	" WHERE app = ? AND user = ? AND session = ? AND hidden_us = 0 AND seq > ? AND seq < ?"
	" AND (? = 0 OR role IN (?, ?, ?, ?, ?))"
	" ORDER BY seq DESC LIMIT ?";

/* ---- the raw client ------------------------------------------------- */

struct raw_conn {
	MYSQL *m;
	MYSQL_STMT *begin, *commit, *lock, *appended, *advance, *insert, *insert1, *context;
	unsigned bulk;               /* array size set on insert */
};

static MYSQL_STMT *raw_prepare(raw_conn *c, const char *sql)
{
	MYSQL_STMT *st = mysql_stmt_init(c->m);

	if (!st || mysql_stmt_prepare(st, sql, strlen(sql)))
		bench_die(sql, st ? mysql_stmt_error(st) : "out of memory");
	return st;
}

static void raw_run(MYSQL_STMT *st, const char *what)
{
	if (mysql_stmt_execute(st))
		bench_die(what, mysql_stmt_error(st));
}

/* Prepare, run and close sql (a statement without a result). */
static void raw_run_once(raw_conn *c, const char *sql, const char *what)
{
	MYSQL_STMT *st = raw_prepare(c, sql);

	raw_run(st, what);
	mysql_stmt_close(st);
}

static raw_conn *raw_open(const char *ns)
{
	const char *port = getenv("MEMD_MYSQL_PORT");
	raw_conn *c = calloc(1, sizeof(*c));

	if (!c)
		bench_die("connect", "out of memory");
	c->m = mysql_init(NULL);
	if (!c->m || mysql_optionsv(c->m, MYSQL_SET_CHARSET_NAME, "utf8mb4") ||
	    !mysql_real_connect(c->m, getenv("MEMD_MYSQL_HOST"), getenv("MEMD_MYSQL_USER"),
				getenv("MEMD_MYSQL_PASSWORD"), ns,
				port ? (unsigned)atoi(port) : 0, NULL, CLIENT_FOUND_ROWS))
		bench_die("connect", c->m ? mysql_error(c->m) : "out of memory");
	raw_run_once(c, SQL_SETUP, "setup");
	raw_run_once(c, SQL_ISOLATION, "isolation");
	c->begin = raw_prepare(c, SQL_BEGIN);
	c->commit = raw_prepare(c, SQL_COMMIT);
	c->lock = raw_prepare(c, SQL_LOCK);
	c->appended = raw_prepare(c, SQL_APPENDED);
	c->advance = raw_prepare(c, SQL_ADVANCE);
	c->insert = raw_prepare(c, SQL_INSERT);
	c->insert1 = raw_prepare(c, SQL_INSERT);
	c->context = raw_prepare(c, SQL_CONTEXT);
	return c;
}

static void raw_close(raw_conn *c)
{
	MYSQL_STMT *all[] = { c->begin, c->commit, c->lock, c->appended, c->advance, c->insert,
			      c->insert1, c->context };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		mysql_stmt_close(all[i]);
	mysql_close(c->m);
	free(c);
}

static void bind_str(MYSQL_BIND *b, const char *s, unsigned long *len)
{
	memset(b, 0, sizeof(*b));
	b->buffer_type = MYSQL_TYPE_STRING;
	b->buffer = (void *)s;
	*len = (unsigned long)strlen(s);
	b->length = len;
}

static void bind_i64(MYSQL_BIND *b, long long *v)
{
	memset(b, 0, sizeof(*b));
	b->buffer_type = MYSQL_TYPE_LONGLONG;
	b->buffer = v;
}

static void raw_append(raw_conn *c, const char *session, const char *prefix, long k, int batch)
{
	char ids[BENCH_MAX_BATCH][BENCH_ID_LEN];
	MYSQL_BIND b[INSERT_PARAMS], r[3];
	unsigned long lens[INSERT_PARAMS];
	long long v[INSERT_PARAMS], head[3];
	/* Column arrays for the insert (array binding, as the plugin). */
	char *strs[STRING_COLS][BENCH_MAX_BATCH];
	unsigned long slens[STRING_COLS][BENCH_MAX_BATCH];
	char ind[INSERT_PARAMS][BENCH_MAX_BATCH];
	long long ints[INT_COLS][BENCH_MAX_BATCH];
	long long first;
	unsigned array = (unsigned)batch;
	my_bool is_null_yes = 1;

	raw_run(c->begin, "begin");
	/* The session row lock and its counters. */
	bind_str(&b[0], BENCH_APP, &lens[0]);
	bind_str(&b[1], BENCH_USER, &lens[1]);
	bind_str(&b[2], session, &lens[2]);
	mysql_stmt_bind_param(c->lock, b);
	raw_run(c->lock, "lock");
	for (int i = 0; i < 3; i++)
		bind_i64(&r[i], &head[i]);
	mysql_stmt_bind_result(c->lock, r);
	if (mysql_stmt_fetch(c->lock) != 0)
		bench_die("lock", "no session row");
	mysql_stmt_free_result(c->lock);
	/* The session's new counters (every event a message). */
	v[0] = head[1] + batch;
	v[1] = head[2];
	v[2] = batch;
	v[3] = BENCH_T0 + k;
	for (int i = 0; i < 4; i++)
		bind_i64(&b[i], &v[i]);
	memset(&b[4], 0, sizeof(b[4]));
	b[4].buffer_type = MYSQL_TYPE_NULL;
	bind_str(&b[5], BENCH_APP, &lens[5]);
	bind_str(&b[6], BENCH_USER, &lens[6]);
	bind_str(&b[7], session, &lens[7]);
	mysql_stmt_bind_param(c->appended, b);
	raw_run(c->appended, "appended");
	/* Positions. */
	v[0] = batch;
	bind_i64(&b[0], &v[0]);
	mysql_stmt_bind_param(c->advance, b);
	raw_run(c->advance, "advance");
	first = (long long)mysql_stmt_insert_id(c->advance) - batch + 1;
	/* The rows. */
	for (int j = 0; j < batch; j++) {
		const char *col[STRING_COLS] = { BENCH_APP, BENCH_USER, session, NULL, NULL, "bench", "user",
						 NULL, BENCH_EVENT_CONTENT, NULL, NULL, BENCH_EVENT_TEXT,
						 NULL };
		snprintf(ids[j], BENCH_ID_LEN, "%s-%ld-%d", prefix, k, j);
		col[3] = ids[j];
		for (int s = 0; s < STRING_COLS; s++) {
			strs[s][j] = (char *)(col[s] ? col[s] : "");
			slens[s][j] = col[s] ? (unsigned long)strlen(col[s]) : 0;
		}
		ints[0][j] = first + j;            /* position */
		ints[1][j] = head[1] + 1 + j;      /* seq */
		ints[2][j] = BENCH_T0 + k;         /* timestamp_us */
		ints[3][j] = BENCH_EVENT_TOKENS;   /* tokens */
		ints[4][j] = 0;                    /* covers_seq */
		ints[5][j] = 0;                    /* is_summary */
	}
	{
		/* Column order: position, app, user, session, seq, id,
		 * invocation_id, author, role, branch, content, actions,
		 * metadata, timestamp_us, text, tokens, covers_seq, is_summary,
		 * operation. */
		static const int kind[INSERT_PARAMS] = { -1, 0, 1, 2, -2, 3, 4, 5, 6, 7, 8, 9, 10,
							 -3, 11, -4, -5, -6, 12 };
		for (int p = 0; p < INSERT_PARAMS; p++) {
			memset(&b[p], 0, sizeof(b[p]));
			if (kind[p] < 0) {
				b[p].buffer_type = MYSQL_TYPE_LONGLONG;
				b[p].buffer = ints[-kind[p] - 1];
				memset(ind[p], STMT_INDICATOR_NONE, BENCH_MAX_BATCH);
			} else {
				int s = kind[p];
				int null = s == 4 || s == 7 || s == 9 || s == 10 || s == 12;
				b[p].buffer_type = MYSQL_TYPE_STRING;
				b[p].buffer = strs[s];
				b[p].length = slens[s];
				memset(ind[p], null ? STMT_INDICATOR_NULL : STMT_INDICATOR_NONE,
				       BENCH_MAX_BATCH);
			}
			b[p].u.indicator = ind[p];
		}
	}
	if (batch == 1) {
		/* One row: a plain execution, as the plugin does. */
		for (int p = 0; p < INSERT_PARAMS; p++) {
			b[p].buffer = b[p].buffer_type == MYSQL_TYPE_STRING
					      ? (void *)((char **)b[p].buffer)[0] : b[p].buffer;
			b[p].is_null = ind[p][0] == STMT_INDICATOR_NULL ? &is_null_yes : NULL;
			b[p].u.indicator = NULL;
		}
		mysql_stmt_bind_param(c->insert1, b);
		raw_run(c->insert1, "insert");
	} else {
		if (c->bulk != array) {
			mysql_stmt_attr_set(c->insert, STMT_ATTR_ARRAY_SIZE, &array);
			c->bulk = array;
		}
		mysql_stmt_bind_param(c->insert, b);
		raw_run(c->insert, "insert");
	}
	raw_run(c->commit, "commit");
}

static void raw_context(raw_conn *c, const char *session)
{
	MYSQL_BIND b[CONTEXT_PARAMS], r[CONTEXT_COLS];
	unsigned long lens[3], rlen[CONTEXT_COLS];
	long long v[3] = { 0, INT64_MAX, 0 }, limit = BENCH_CONTEXT_LIMIT;
	static char bufs[CONTEXT_COLS][RESULT_BUF];
	my_bool isnull[CONTEXT_COLS];
	int rows = 0;

	bind_str(&b[0], BENCH_APP, &lens[0]);
	bind_str(&b[1], BENCH_USER, &lens[1]);
	bind_str(&b[2], session, &lens[2]);
	/* The seq bounds, then every role (mask 0, the names NULL). */
	for (int i = 0; i < 3; i++)
		bind_i64(&b[3 + i], &v[i]);
	for (int i = 0; i < ROLE_NAMES; i++) {
		memset(&b[6 + i], 0, sizeof(b[6 + i]));
		b[6 + i].buffer_type = MYSQL_TYPE_NULL;
	}
	bind_i64(&b[6 + ROLE_NAMES], &limit);
	mysql_stmt_bind_param(c->context, b);
	raw_run(c->context, "context");
	memset(r, 0, sizeof(r));
	for (int i = 0; i < CONTEXT_COLS; i++) {
		r[i].buffer_type = MYSQL_TYPE_STRING;
		r[i].buffer = bufs[i];
		r[i].buffer_length = RESULT_BUF;
		r[i].length = &rlen[i];
		r[i].is_null = &isnull[i];
	}
	mysql_stmt_bind_result(c->context, r);
	while (mysql_stmt_fetch(c->context) == 0)
		rows++;
	mysql_stmt_free_result(c->context);
	if (rows != BENCH_CONTEXT_LIMIT)
		bench_die("context", "wrong row count");
}

static void drop_database(const char *ns)
{
	raw_conn *c;
	char sql[BENCH_ID_LEN * 2];

	c = raw_open(ns);
	/* A constant name of our own making ("memd_bench_<pid>"). */
	snprintf(sql, sizeof(sql), "DROP DATABASE `%s`", ns);
	if (mysql_real_query(c->m, sql, strlen(sql)))
		fprintf(stderr, "mysql_bench: could not drop %s: %s\n", ns, mysql_error(c->m));
	raw_close(c);
}

/* ---- the store ------------------------------------------------------ */

const bench_store bench_the_store = {
	.prog = "mysql_bench",
	.plugin = "mysql",
	.title = "MariaDB store vs raw libmariadb, same statements",
	.ns_prefix = "memd_bench_",
	.env_var = "MEMD_MYSQL_HOST",
	.yaml_head = "{plugin: mysql, host: \"${MEMD_MYSQL_HOST}\", port: \"${MEMD_MYSQL_PORT}\","
		     " user: \"${MEMD_MYSQL_USER}\", password: \"${MEMD_MYSQL_PASSWORD}\","
		     " create_database: true, sslmode: disabled",
	.ns_key = "database",
	.raw_open = raw_open,
	.raw_close = raw_close,
	.raw_append = raw_append,
	.raw_context = raw_context,
	.drop = drop_database,
};
