/* SPDX-License-Identifier: MIT */
/*
 * The PostgreSQL part of the group-commit tests (group_commit.h), over
 * libpq in the test's schema (the name itself).
 *
 * The store does not report its transactions, so a trigger counts them:
 * every inserted event row notes its transaction id (txid_current()) and
 * session in memd_test_txns, which commits or rolls back with it. The
 * transactions that wrote events are then the distinct ids, and the
 * appends they wrote the distinct (id, session) pairs (a transaction
 * holds at most one append of a session; more would count as fewer
 * appends than succeeded, and fail the test).
 */
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <stdlib.h>

#include "group_commit.h"

struct gc_lock {
	PGconn *c;
};

static const char SQL_COUNT_TABLE[] =
	"CREATE TABLE memd_test_txns (xid bigint NOT NULL, app text NOT NULL,"
	" \"user\" text NOT NULL, session text NOT NULL)";
/* search_path: the schema, as set when the function is created. */
static const char SQL_COUNT_FN[] =
	"CREATE FUNCTION memd_test_note_txn() RETURNS trigger LANGUAGE plpgsql"
	" SET search_path FROM CURRENT AS $f$"
	" BEGIN INSERT INTO memd_test_txns VALUES (txid_current(), NEW.app, NEW.\"user\","
	" NEW.session); RETURN NULL; END $f$";
static const char SQL_COUNT_TRIGGER[] =
	"CREATE TRIGGER memd_test_note_txn AFTER INSERT ON events"
	" FOR EACH ROW EXECUTE FUNCTION memd_test_note_txn()";
static const char SQL_COUNT[] =
	"SELECT coalesce(sum(n), 0), count(*), coalesce(max(n), 0) FROM"
	" (SELECT xid, count(DISTINCT (app, \"user\", session)) AS n FROM memd_test_txns"
	"  GROUP BY xid) AS t";
static const char SQL_LOCK[] =
	"SELECT 1 FROM sessions WHERE app = $1 AND \"user\" = $2 AND id = $3 FOR UPDATE";
/* Backends waiting for a lock this one holds (pg_locks is read afresh by
 * every query, also inside the lock's transaction). */
static const char SQL_WAITERS[] =
	"SELECT count(DISTINCT pid) FROM pg_catalog.pg_locks WHERE NOT granted"
	" AND pg_catalog.pg_backend_pid() = ANY (pg_catalog.pg_blocking_pids(pid))";

/* A connection to the test server with search_path the schema name. */
static PGconn *connect_schema(const char *name)
{
	const char *keys[] = { "dbname", "password", NULL };
	const char *vals[] = { getenv("MEMD_PG_DSN"), getenv("MEMD_PG_PASSWORD"), NULL };
	const char *p[1] = { name };
	PGconn *c;
	PGresult *r;

	cr_assert(vals[0], "MEMD_PG_DSN is not set: run under tests/services/with-services.sh");
	c = PQconnectdbParams(keys, vals, 1);
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

	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
}

static void count_begin(const char *name)
{
	PGconn *c = connect_schema(name);

	exec_ok(c, SQL_COUNT_TABLE);
	exec_ok(c, SQL_COUNT_FN);
	exec_ok(c, SQL_COUNT_TRIGGER);
	PQfinish(c);
}

static void count(const char *name, gc_log *log, gc_stats *ret)
{
	PGconn *c = connect_schema(name);
	PGresult *r = PQexec(c, SQL_COUNT);

	(void)log;
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
	ret->appends = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
	ret->txns = strtoull(PQgetvalue(r, 0, 1), NULL, 10);
	ret->most = (uint32_t)strtoul(PQgetvalue(r, 0, 2), NULL, 10);
	PQclear(r);
	PQfinish(c);
}

static gc_lock *lock_session(const char *name, const memd_scope *sc)
{
	gc_lock *l = calloc(1, sizeof(*l));
	const char *p[3] = { sc->app, sc->user, sc->session };
	PGresult *r;

	cr_assert_not_null(l);
	l->c = connect_schema(name);
	exec_ok(l->c, "BEGIN");
	r = PQexecParams(l->c, SQL_LOCK, 3, NULL, p, NULL, NULL, 0);
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(l->c));
	cr_assert_eq(PQntuples(r), 1, "no session %s to lock", sc->session);
	PQclear(r);
	return l;
}

static int lock_waited(gc_lock *l)
{
	PGresult *r = PQexec(l->c, SQL_WAITERS);
	int n;

	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(l->c));
	n = atoi(PQgetvalue(r, 0, 0));
	PQclear(r);
	return n > 0;
}

static void unlock(gc_lock *l)
{
	if (!l)
		return;
	exec_ok(l->c, "ROLLBACK");
	PQfinish(l->c);
	free(l);
}

const gc_store_part gc_store = {
	.plugin = "postgres",
	.count_begin = count_begin,
	.count = count,
	.lock_session = lock_session,
	.lock_waited = lock_waited,
	.unlock = unlock,
};
