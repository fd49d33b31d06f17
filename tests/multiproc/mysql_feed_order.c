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

/* The test server's user has TRIGGER on memd_* databases. */
void feed_order_install_stall(const char *name)
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
	/* CREATE TRIGGER cannot be prepared; the text is a constant. */
	cr_assert_eq(mysql_real_query(m, SQL_STALL_TRIGGER, strlen(SQL_STALL_TRIGGER)), 0,
		     "create trigger: %s", mysql_error(m));
	mysql_close(m);
}
