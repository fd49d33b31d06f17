/* SPDX-License-Identifier: MIT */
#include "sq_db.h"

#include "pu_storage.h"

/* The kind of storage failure an I/O-class result code is: the errno
 * decides when SQLite passed one on (a write past RLIMIT_FSIZE fails
 * with EFBIG and SQLite says SQLITE_IOERR_WRITE; an fsync on a full
 * thin-provisioned or network volume says SQLITE_IOERR_FSYNC with
 * ENOSPC). */
static int io_kind(int fallback, int sys_errno)
{
	if (!sys_errno)
		return fallback;
	int kind = pu_storage_errno_kind(sys_errno);
	return kind == PU_STORAGE_IO ? fallback : kind;
}

int32_t sq_map_code(int rc, int sys_errno, uint32_t *ret_flags)
{
	uint32_t flags = 0;
	int32_t code;

	if (rc == SQLITE_IOERR_NOMEM) {
		code = MEMD_ENOMEM;
		goto out;
	}
	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
	case SQLITE_PROTOCOL: /* a WAL lock race lost too often: try again */
		code = pu_storage_code(PU_STORAGE_BUSY, &flags);
		break;
	case SQLITE_FULL:
		code = pu_storage_code(PU_STORAGE_FULL, &flags);
		break;
	case SQLITE_READONLY:
		code = pu_storage_code(PU_STORAGE_READONLY, &flags);
		break;
	case SQLITE_IOERR:
	case SQLITE_CANTOPEN:
		code = pu_storage_code(io_kind(PU_STORAGE_IO, sys_errno), &flags);
		break;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		code = pu_storage_code(PU_STORAGE_IO, &flags);
		break;
	case SQLITE_CONSTRAINT:
		code = MEMD_ECONFLICT;
		break;
	case SQLITE_NOMEM:
		code = MEMD_ENOMEM;
		break;
	case SQLITE_PERM:
	case SQLITE_AUTH:
		code = MEMD_EIO;
		break;
	case SQLITE_TOOBIG:
		code = MEMD_ETOOBIG;
		break;
	case SQLITE_INTERRUPT:
		code = MEMD_ECANCELED;
		break;
	default:
		code = MEMD_EINTERNAL;
		break;
	}
out:
	if (ret_flags)
		*ret_flags = flags;
	return code;
}
