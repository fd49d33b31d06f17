/* SPDX-License-Identifier: MIT */
/*
 * store_errmap: every store's mapping of its own errors (SQLite result
 * codes and errno, PostgreSQL SQLSTATEs, MariaDB error numbers, errno for
 * filevec) to MEMD_E* codes and flags, over tables of the errors each
 * kind of storage failure shows up as: the same kind (full disk,
 * read-only, I/O error, busy, unreachable) must give the same code and
 * flags in every store. Filling a database server's disk is not
 * practical in a test; these tables are what the servers document.
 */
#include <criterion/criterion.h>
#include <errmsg.h>
#include <errno.h>
#include <mysqld_error.h>

#include "my_db.h"
#include "pg_db.h"
#include "pu_storage.h"
#include "sq_db.h"

typedef struct {
	const char *what;
	int32_t code;
	uint32_t flags;
} mapped;

static mapped kind(int k)
{
	mapped m = { pu_storage_kind_name(k), 0, 0 };
	m.code = pu_storage_code(k, &m.flags);
	return m;
}

static void expect(const char *store, const char *input, int32_t code, uint32_t flags,
		   mapped want)
{
	cr_expect(code == want.code && flags == want.flags,
		  "%s: %s maps to code %d flags %#x, a %s is code %d flags %#x", store, input,
		  (int)code, (unsigned)flags, want.what, (int)want.code, (unsigned)want.flags);
}

static void sq(int rc, int sys_errno, int k)
{
	char input[64];
	uint32_t flags = 0xdead;
	int32_t code = sq_map_code(rc, sys_errno, &flags);
	snprintf(input, sizeof(input), "result %d errno %d", rc, sys_errno);
	expect("sqlite", input, code, flags, kind(k));
}

static void pg(const char *sqlstate, int k)
{
	uint32_t flags = 0xdead;
	int32_t code = pg_map_sqlstate(sqlstate, &flags);
	expect("postgres", sqlstate ? sqlstate : "(no SQLSTATE)", code, flags, kind(k));
}

static void my(unsigned e, int k, int lost)
{
	char input[32];
	uint32_t flags = 0xdead;
	int got_lost = -1;
	int32_t code = my_map_errno(e, &flags, &got_lost);
	snprintf(input, sizeof(input), "error %u", e);
	expect("mysql", input, code, flags, kind(k));
	cr_expect_eq(got_lost, lost, "mysql: error %u: lost is %d", e, got_lost);
}

Test(store_errmap, kinds_have_one_code_and_flags_each)
{
	mapped full = kind(PU_STORAGE_FULL), ro = kind(PU_STORAGE_READONLY);
	mapped io = kind(PU_STORAGE_IO), busy = kind(PU_STORAGE_BUSY);
	mapped down = kind(PU_STORAGE_UNREACHABLE);

	/* Full disk and read-only: retryable 503 (the request was fine,
	 * the operator frees space), marked for /readyz. */
	cr_assert_eq(full.code, MEMD_EUNAVAIL);
	cr_assert_eq(full.flags, MEMD_ERROR_RETRYABLE | MEMD_ERROR_STORAGE_FULL);
	cr_assert_eq(ro.code, MEMD_EUNAVAIL);
	cr_assert_eq(ro.flags, MEMD_ERROR_RETRYABLE | MEMD_ERROR_STORAGE_READONLY);
	/* An I/O error is not known to pass: 500, marked for /readyz. */
	cr_assert_eq(io.code, MEMD_EIO);
	cr_assert_eq(io.flags, MEMD_ERROR_STORAGE_IO);
	/* Locks and unreachable servers pass by themselves, unmarked. */
	cr_assert_eq(busy.code, MEMD_EUNAVAIL);
	cr_assert_eq(busy.flags, MEMD_ERROR_RETRYABLE);
	cr_assert_eq(down.code, MEMD_EUNAVAIL);
	cr_assert_eq(down.flags, MEMD_ERROR_RETRYABLE);
	cr_assert_str_eq(pu_storage_kind_name(PU_STORAGE_FULL), "disk_full");
	cr_assert_str_eq(pu_storage_kind_name(PU_STORAGE_READONLY), "read_only");
	cr_assert_str_eq(pu_storage_kind_name(PU_STORAGE_IO), "io_error");
}

Test(store_errmap, errno_kinds)
{
	cr_assert_eq(pu_storage_errno_kind(ENOSPC), PU_STORAGE_FULL);
	cr_assert_eq(pu_storage_errno_kind(EDQUOT), PU_STORAGE_FULL);
	cr_assert_eq(pu_storage_errno_kind(EFBIG), PU_STORAGE_FULL);
	cr_assert_eq(pu_storage_errno_kind(EROFS), PU_STORAGE_READONLY);
	cr_assert_eq(pu_storage_errno_kind(EIO), PU_STORAGE_IO);
	cr_assert_eq(pu_storage_errno_kind(EBADF), PU_STORAGE_IO);
}

Test(store_errmap, sqlite)
{
	sq(SQLITE_FULL, 0, PU_STORAGE_FULL);
	sq(SQLITE_FULL, ENOSPC, PU_STORAGE_FULL);
	/* A write past RLIMIT_FSIZE: SQLite says IOERR_WRITE, errno EFBIG. */
	sq(SQLITE_IOERR_WRITE, EFBIG, PU_STORAGE_FULL);
	sq(SQLITE_IOERR_FSYNC, ENOSPC, PU_STORAGE_FULL);
	sq(SQLITE_IOERR_WRITE, EDQUOT, PU_STORAGE_FULL);
	sq(SQLITE_READONLY, 0, PU_STORAGE_READONLY);
	sq(SQLITE_READONLY_DBMOVED, 0, PU_STORAGE_READONLY);
	sq(SQLITE_IOERR_WRITE, EROFS, PU_STORAGE_READONLY);
	sq(SQLITE_CANTOPEN, EROFS, PU_STORAGE_READONLY);
	sq(SQLITE_IOERR, 0, PU_STORAGE_IO);
	sq(SQLITE_IOERR_WRITE, EIO, PU_STORAGE_IO);
	sq(SQLITE_IOERR_FSYNC, EIO, PU_STORAGE_IO);
	sq(SQLITE_IOERR_SHORT_READ, 0, PU_STORAGE_IO);
	sq(SQLITE_CORRUPT, 0, PU_STORAGE_IO);
	sq(SQLITE_NOTADB, 0, PU_STORAGE_IO);
	sq(SQLITE_CANTOPEN, ENOENT, PU_STORAGE_IO);
	sq(SQLITE_BUSY, 0, PU_STORAGE_BUSY);
	sq(SQLITE_BUSY_SNAPSHOT, 0, PU_STORAGE_BUSY);
	sq(SQLITE_LOCKED, 0, PU_STORAGE_BUSY);
	sq(SQLITE_LOCKED_SHAREDCACHE, 0, PU_STORAGE_BUSY);
	sq(SQLITE_PROTOCOL, 0, PU_STORAGE_BUSY);
	cr_expect_eq(sq_map_code(SQLITE_IOERR_NOMEM, 0, NULL), MEMD_ENOMEM);
	cr_expect_eq(sq_map_code(SQLITE_CONSTRAINT_UNIQUE, 0, NULL), MEMD_ECONFLICT);
	cr_expect_eq(sq_map_code(SQLITE_TOOBIG, 0, NULL), MEMD_ETOOBIG);
	cr_expect_eq(sq_map_code(SQLITE_INTERRUPT, 0, NULL), MEMD_ECANCELED);
}

Test(store_errmap, postgres)
{
	pg("53100", PU_STORAGE_FULL);        /* disk_full */
	pg("25006", PU_STORAGE_READONLY);    /* read_only_sql_transaction */
	pg("58030", PU_STORAGE_IO);          /* io_error */
	pg("58000", PU_STORAGE_IO);          /* system_error */
	pg("XX001", PU_STORAGE_IO);          /* data_corrupted */
	pg("XX002", PU_STORAGE_IO);          /* index_corrupted */
	pg("40001", PU_STORAGE_BUSY);        /* serialization_failure */
	pg("40P01", PU_STORAGE_BUSY);        /* deadlock_detected */
	pg("55P03", PU_STORAGE_BUSY);        /* lock_not_available */
	pg("53200", PU_STORAGE_UNREACHABLE); /* out_of_memory (the server's) */
	pg("53300", PU_STORAGE_UNREACHABLE); /* too_many_connections */
	pg("53000", PU_STORAGE_UNREACHABLE); /* insufficient_resources */
	pg("57P03", PU_STORAGE_UNREACHABLE); /* cannot_connect_now */
	pg("57P01", PU_STORAGE_UNREACHABLE); /* admin_shutdown */
	pg("08006", PU_STORAGE_UNREACHABLE); /* connection_failure */
	pg("08001", PU_STORAGE_UNREACHABLE); /* sqlclient_unable_to_establish */
	pg(NULL, PU_STORAGE_UNREACHABLE);
	pg("", PU_STORAGE_UNREACHABLE);
	cr_expect_eq(pg_map_sqlstate("XX000", NULL), MEMD_EIO);
	cr_expect_eq(pg_map_sqlstate("23505", NULL), MEMD_ECONFLICT);
	cr_expect_eq(pg_map_sqlstate("23503", NULL), MEMD_ENOTFOUND);
	cr_expect_eq(pg_map_sqlstate("22P02", NULL), MEMD_EINVAL);
	cr_expect_eq(pg_map_sqlstate("54000", NULL), MEMD_ETOOBIG);
	cr_expect_eq(pg_map_sqlstate("57014", NULL), MEMD_ETIMEDOUT);
}

Test(store_errmap, mysql)
{
	my(ER_RECORD_FILE_FULL, PU_STORAGE_FULL, 0);
	my(ER_DISK_FULL, PU_STORAGE_FULL, 0);
	my(ER_OPTION_PREVENTS_STATEMENT, PU_STORAGE_READONLY, 0);
	my(ER_READ_ONLY_MODE, PU_STORAGE_READONLY, 0);
	my(ER_ERROR_ON_WRITE, PU_STORAGE_IO, 0);
	my(ER_ERROR_ON_READ, PU_STORAGE_IO, 0);
	my(ER_GET_ERRNO, PU_STORAGE_IO, 0);
	my(ER_CRASHED_ON_USAGE, PU_STORAGE_IO, 0);
	my(ER_LOCK_WAIT_TIMEOUT, PU_STORAGE_BUSY, 0);
	my(ER_LOCK_DEADLOCK, PU_STORAGE_BUSY, 0);
	my(ER_OUT_OF_RESOURCES, PU_STORAGE_UNREACHABLE, 0);
	my(ER_OUTOFMEMORY, PU_STORAGE_UNREACHABLE, 0);
	my(ER_CON_COUNT_ERROR, PU_STORAGE_UNREACHABLE, 0);
	my(CR_SERVER_GONE_ERROR, PU_STORAGE_UNREACHABLE, 1);
	my(CR_SERVER_LOST, PU_STORAGE_UNREACHABLE, 1);
	my(ER_SERVER_SHUTDOWN, PU_STORAGE_UNREACHABLE, 1);
	cr_expect_eq(my_map_errno(ER_DUP_ENTRY, NULL, NULL), MEMD_ECONFLICT);
	cr_expect_eq(my_map_errno(ER_STATEMENT_TIMEOUT, NULL, NULL), MEMD_ETIMEDOUT);
	cr_expect_eq(my_map_errno(ER_DATA_TOO_LONG, NULL, NULL), MEMD_EINVAL);
	cr_expect_eq(my_map_errno(CR_OUT_OF_MEMORY, NULL, NULL), MEMD_ENOMEM);
}
