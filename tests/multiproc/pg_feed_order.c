/* SPDX-License-Identifier: MIT */
/*
 * The PostgreSQL part of the feed-order tests (feed_order.h): the stall
 * trigger, installed over libpq in the test's schema.
 */
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <stdlib.h>

#include "feed_order.h"

static const char SQL_STALL_FN[] =
	"CREATE FUNCTION memd_test_stall() RETURNS trigger LANGUAGE plpgsql AS $f$"
	" BEGIN IF NEW.id LIKE 'slow%' THEN PERFORM pg_sleep(" FEED_ORDER_STALL_S "); END IF;"
	" RETURN NEW; END $f$";
static const char SQL_STALL_TRIGGER[] =
	"CREATE TRIGGER memd_test_stall BEFORE INSERT ON events"
	" FOR EACH ROW EXECUTE FUNCTION memd_test_stall()";

/* Another backend of the test's database inside pg_sleep (on the test
 * server only the stall trigger sleeps). */
static const char SQL_STALLING[] =
	"SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE datname = current_database()"
	" AND wait_event = 'PgSleep' AND pid <> pg_backend_pid()";

/* A connection to the test server with search_path the schema name. */
static PGconn *connect_schema(const char *name)
{
	const char *keys[] = { "dbname", "password", NULL };
	const char *vals[] = { getenv("MEMD_PG_DSN"), getenv("MEMD_PG_PASSWORD"), NULL };
	const char *p[1] = { name };
	PGconn *c = PQconnectdbParams(keys, vals, 1);
	PGresult *r;

	cr_assert_eq(PQstatus(c), CONNECTION_OK, "connect: %s", PQerrorMessage(c));
	r = PQexecParams(c, "SELECT pg_catalog.set_config('search_path',"
			    " pg_catalog.quote_ident($1::text), false)", 1, NULL, p, NULL, NULL, 0);
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
	PQclear(r);
	return c;
}

/* The stress config's schema is the name itself. */
void feed_order_install_stall(const char *name)
{
	PGconn *c = connect_schema(name);
	PGresult *r;

	r = PQexec(c, SQL_STALL_FN);
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
	PQclear(r);
	r = PQexec(c, SQL_STALL_TRIGGER);
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
}

/* Only this test's stall trigger calls pg_sleep on the test server. */
int feed_order_stalling(const char *name)
{
	PGconn *c = connect_schema(name);
	PGresult *r = PQexec(c, SQL_STALLING);
	int n;

	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
	n = atoi(PQgetvalue(r, 0, 0));
	PQclear(r);
	PQfinish(c);
	return n > 0;
}
