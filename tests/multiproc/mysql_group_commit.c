/* SPDX-License-Identifier: MIT */
/*
 * The MariaDB part of the group-commit tests (group_commit.h), over
 * libmariadb in the test's database (memd_<name>).
 *
 * The store counts its transactions itself: when it closes it logs
 * "group commit: A appends written in T transactions (at most M in
 * one)" (backends/mysql/my_events.c), which count reads from the
 * instance's log.
 */
#include <criterion/criterion.h>
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group_commit.h"

#define DB_PREFIX "memd_"      /* the group config names the database memd_@NAME@ */
#define DB_NAME_MAX 128
#define LOCK_PARAMS 3

struct gc_lock {
	MYSQL *m;
};

static const char SQL_LOCK[] =
	"SELECT 1 FROM memd_sessions WHERE app = ? AND user = ? AND id = ? FOR UPDATE";
/* Statements of other connections of the test's user (the server lists
 * those without the PROCESS privilege) in the database that lock rows:
 * with the lock held, such a statement on its row waits for it. */
static const char SQL_WAITERS[] =
	"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE()"
	" AND ID <> CONNECTION_ID() AND INFO LIKE '%FOR UPDATE%'";

/* The statistics line of the store's close log; fails if it logged none. */
static void count(const char *name, gc_log *log, gc_stats *ret)
{
	(void)name;
	pthread_mutex_lock(&log->lock);
	for (int i = log->n - 1; i >= 0; i--) {
		const char *p = strstr(log->lines[(log->first + i) % GC_LOG_MAX], "group commit: ");
		unsigned long long a, t;
		unsigned m;

		if (p && sscanf(p, "group commit: %llu appends written in %llu transactions "
				"(at most %u in one)", &a, &t, &m) == 3) {
			pthread_mutex_unlock(&log->lock);
			*ret = (gc_stats){ .appends = a, .txns = t, .most = m };
			return;
		}
	}
	pthread_mutex_unlock(&log->lock);
	/* The store logs nothing when it wrote no append. */
	*ret = (gc_stats){ 0 };
}

static MYSQL *connect_db(const char *name)
{
	const char *port = getenv("MEMD_MYSQL_PORT");
	char db[DB_NAME_MAX];
	MYSQL *m = mysql_init(NULL);

	cr_assert(getenv("MEMD_MYSQL_HOST"), "MEMD_MYSQL_HOST is not set: run under "
		  "tests/services/with-services.sh");
	cr_assert_not_null(m);
	snprintf(db, sizeof(db), DB_PREFIX "%s", name);
	cr_assert_not_null(mysql_real_connect(m, getenv("MEMD_MYSQL_HOST"), getenv("MEMD_MYSQL_USER"),
					      getenv("MEMD_MYSQL_PASSWORD"), db,
					      port ? (unsigned)atoi(port) : 0, NULL, 0),
			   "connect: %s", mysql_error(m));
	return m;
}

static void query_ok(MYSQL *m, const char *sql)
{
	cr_assert_eq(mysql_real_query(m, sql, strlen(sql)), 0, "%s: %s", sql, mysql_error(m));
}

static gc_lock *lock_session(const char *name, const memd_scope *sc)
{
	gc_lock *l = calloc(1, sizeof(*l));
	const char *vals[LOCK_PARAMS] = { sc->app, sc->user, sc->session };
	unsigned long lens[LOCK_PARAMS];
	MYSQL_BIND b[LOCK_PARAMS];
	MYSQL_STMT *st;

	cr_assert_not_null(l);
	l->m = connect_db(name);
	query_ok(l->m, "START TRANSACTION");
	st = mysql_stmt_init(l->m);
	cr_assert_not_null(st);
	cr_assert_eq(mysql_stmt_prepare(st, SQL_LOCK, strlen(SQL_LOCK)), 0, "%s",
		     mysql_stmt_error(st));
	memset(b, 0, sizeof(b));
	for (int i = 0; i < LOCK_PARAMS; i++) {
		lens[i] = strlen(vals[i]);
		b[i].buffer_type = MYSQL_TYPE_STRING;
		b[i].buffer = (void *)vals[i];
		b[i].buffer_length = lens[i];
		b[i].length = &lens[i];
	}
	cr_assert_eq(mysql_stmt_bind_param(st, b), 0, "%s", mysql_stmt_error(st));
	cr_assert_eq(mysql_stmt_execute(st), 0, "%s", mysql_stmt_error(st));
	cr_assert_eq(mysql_stmt_store_result(st), 0, "%s", mysql_stmt_error(st));
	cr_assert_eq(mysql_stmt_num_rows(st), 1, "no session %s to lock", sc->session);
	mysql_stmt_close(st);
	return l;
}

static int lock_waited(gc_lock *l)
{
	MYSQL_RES *res;
	MYSQL_ROW row;
	int n;

	/* The text is a constant: nothing to bind. */
	query_ok(l->m, SQL_WAITERS);
	res = mysql_store_result(l->m);
	cr_assert_not_null(res, "%s", mysql_error(l->m));
	row = mysql_fetch_row(res);
	cr_assert(row && row[0], "no count");
	n = atoi(row[0]);
	mysql_free_result(res);
	return n > 0;
}

static void unlock(gc_lock *l)
{
	if (!l)
		return;
	query_ok(l->m, "ROLLBACK");
	mysql_close(l->m);
	free(l);
}

const gc_store_part gc_store = {
	.plugin = "mysql",
	.count_begin = NULL,
	.count = count,
	.lock_session = lock_session,
	.lock_waited = lock_waited,
	.unlock = unlock,
};
