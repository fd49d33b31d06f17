/* SPDX-License-Identifier: MIT */
/*
 * pu_storage: the one mapping from kinds of store failure (full disk,
 * read-only, I/O error, busy, unreachable) to the MEMD_E* code and
 * memd_error flags every store of memd's reports them with, so the same
 * kind gives the same code, retryable flag and HTTP status whichever store
 * and op hit it. Each store maps its own errors (SQLite result codes,
 * SQLSTATEs, MariaDB errnos, errno) to a kind, then the kind here.
 */
#ifndef MEMD_PU_STORAGE_H
#define MEMD_PU_STORAGE_H

#include <memd/plugin.h>

/* Kinds of store failure. */
#define PU_STORAGE_FULL        1 /* no space: disk full, quota, file size limit */
#define PU_STORAGE_READONLY    2 /* read-only file system, file or database */
#define PU_STORAGE_IO          3 /* I/O error, damaged file */
#define PU_STORAGE_BUSY        4 /* locked, busy, deadlock, serialization failure */
#define PU_STORAGE_UNREACHABLE 5 /* server down, starting, out of resources */

/* The MEMD_E* code of kind; *ret_flags (if not NULL) gets its flags.
 * MEMD_EINTERNAL without flags for a kind that is not one of the above. */
int32_t pu_storage_code(int kind, uint32_t *ret_flags);

/* The kind of a failed system call's errno: ENOSPC, EDQUOT, EFBIG are
 * FULL, EROFS is READONLY, anything else IO. */
int pu_storage_errno_kind(int e);

/* The short name /readyz gives kind ("disk_full", "read_only",
 * "io_error", "busy", "unreachable"); "unknown" otherwise. */
const char *pu_storage_kind_name(int kind);

#endif
