/* SPDX-License-Identifier: MIT */
#include "pu_storage.h"

#include <errno.h>

/*
 * Why a full disk is 503 (EUNAVAIL, retryable, Retry-After) and not 507
 * Insufficient Storage: the request was fine and nothing of it was stored,
 * and the same request succeeds once an operator frees space (which
 * /readyz tells them to do: the store is reported degraded). 507 is
 * WebDAV's status, and HTTP clients and retry libraries that retry 503
 * with Retry-After give up on 507. A read-only file system or database
 * (a remount, a standby) is the same case. An I/O error is EIO (500, not
 * retryable): it is not known to pass by itself. Locks, busy databases,
 * deadlocks and unreachable servers pass by themselves: 503, retryable.
 */
int32_t pu_storage_code(int kind, uint32_t *ret_flags)
{
	uint32_t flags = MEMD_ERROR_RETRYABLE;
	int32_t code = MEMD_EUNAVAIL;

	switch (kind) {
	case PU_STORAGE_FULL:
		flags |= MEMD_ERROR_STORAGE_FULL;
		break;
	case PU_STORAGE_READONLY:
		flags |= MEMD_ERROR_STORAGE_READONLY;
		break;
	case PU_STORAGE_IO:
		code = MEMD_EIO;
		flags = MEMD_ERROR_STORAGE_IO;
		break;
	case PU_STORAGE_BUSY:
	case PU_STORAGE_UNREACHABLE:
		break;
	default:
		code = MEMD_EINTERNAL;
		flags = 0;
		break;
	}
	if (ret_flags)
		*ret_flags = flags;
	return code;
}

int pu_storage_errno_kind(int e)
{
	switch (e) {
	case ENOSPC:
	case EDQUOT:
	case EFBIG: /* RLIMIT_FSIZE or the file system's largest file */
		return PU_STORAGE_FULL;
	case EROFS:
		return PU_STORAGE_READONLY;
	default:
		return PU_STORAGE_IO;
	}
}

const char *pu_storage_kind_name(int kind)
{
	switch (kind) {
	case PU_STORAGE_FULL: return "disk_full";
	case PU_STORAGE_READONLY: return "read_only";
	case PU_STORAGE_IO: return "io_error";
	case PU_STORAGE_BUSY: return "busy";
	case PU_STORAGE_UNREACHABLE: return "unreachable";
	default: return "unknown";
	}
}
