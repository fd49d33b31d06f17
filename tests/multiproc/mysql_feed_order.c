/* SPDX-License-Identifier: MIT */
/*
 * The MariaDB part of the feed-order tests (feed_order.h): the stall
 * trigger, installed over libmariadb in the test's database.
 */
#include <criterion/criterion.h>
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feed_order.h"

#define DB_PREFIX "memd_"      /* the stress config names the database memd_@NAME@ */
#define DB_NAME_MAX 128

static const char SQL_STALL_TRIGGER[] =
	"CREATE TRIGGER memd_test_stall BEFORE INSERT ON memd_events FOR EACH ROW"
	" BEGIN IF NEW.id LIKE 'slow%' THEN DO SLEEP(" FEED_ORDER_STALL_S "); END IF; END";

/* Threads of the test's user (the server lists those without the PROCESS
 * privilege) in the database inside SLEEP(): only the stall trigger
 * sleeps. */
static const char SQL_STALLING[] =
	"SELECT COUNT(*) FROM information_schema.PROCESSLIST"
	" WHERE DB = DATABASE() AND STATE = 'User sleep' AND ID <> CONNECTION_ID()";

/* A connection to the test's database, memd_<name>. */
static MYSQL *connect_db(const char *name)
{
	const char *port = getenv("MEMD_MYSQL_PORT");
	char db[DB_NAME_MAX];
	MYSQL *m = mysql_init(NULL);

	cr_assert_not_null(m);
	snprintf(db, sizeof(db), DB_PREFIX "%s", name);
	cr_assert_not_null(mysql_real_connect(m, getenv("MEMD_MYSQL_HOST"), getenv("MEMD_MYSQL_USER"),
					      getenv("MEMD_MYSQL_PASSWORD"), db,
					      port ? (unsigned)atoi(port) : 0, NULL, 0),
			   "connect: %s", mysql_error(m));
	return m;
}

/* The test server's user has TRIGGER on memd_* databases. */
void feed_order_install_stall(const char *name)
{
	MYSQL *m = connect_db(name);

	/* CREATE TRIGGER cannot be prepared; the text is a constant. */
	cr_assert_eq(mysql_real_query(m, SQL_STALL_TRIGGER, strlen(SQL_STALL_TRIGGER)), 0,
		     "create trigger: %s", mysql_error(m));
	mysql_close(m);
}

int feed_order_stalling(const char *name)
{
	MYSQL *m = connect_db(name);
	MYSQL_RES *res;
	MYSQL_ROW row;
	int n;

	/* The text is a constant: nothing to bind. */
	cr_assert_eq(mysql_real_query(m, SQL_STALLING, strlen(SQL_STALLING)), 0, "%s",
		     mysql_error(m));
	res = mysql_store_result(m);
	cr_assert_not_null(res, "%s", mysql_error(m));
	row = mysql_fetch_row(res);
	cr_assert(row && row[0], "no count");
	n = atoi(row[0]);
	mysql_free_result(res);
	mysql_close(m);
	return n > 0;
}
