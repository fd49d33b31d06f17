/* SPDX-License-Identifier: MIT */
#include "pg_db.h"

#include <string.h>

#include "pu_storage.h"

#define SQLSTATE_LEN 5

static int is(const char *sqlstate, const char *code)
{
	return strcmp(sqlstate, code) == 0;
}

static int in_class(const char *sqlstate, const char *prefix)
{
	return strncmp(sqlstate, prefix, strlen(prefix)) == 0;
}

int32_t pg_map_sqlstate(const char *sqlstate, uint32_t *ret_flags)
{
	uint32_t flags = 0;
	int32_t code;

	if (!sqlstate || strlen(sqlstate) != SQLSTATE_LEN)
		code = pu_storage_code(PU_STORAGE_UNREACHABLE, &flags);
	else if (is(sqlstate, "53100"))
		code = pu_storage_code(PU_STORAGE_FULL, &flags);
	else if (is(sqlstate, "25006"))
		code = pu_storage_code(PU_STORAGE_READONLY, &flags);
	else if (in_class(sqlstate, "58") || is(sqlstate, "XX001") || is(sqlstate, "XX002"))
		code = pu_storage_code(PU_STORAGE_IO, &flags); /* system error, data corrupted */
	else if (is(sqlstate, "40001") || is(sqlstate, "40P01") || is(sqlstate, "55P03"))
		code = pu_storage_code(PU_STORAGE_BUSY, &flags);
	else if (in_class(sqlstate, "08") || in_class(sqlstate, "57P") || in_class(sqlstate, "53"))
		code = pu_storage_code(PU_STORAGE_UNREACHABLE, &flags);
	else if (is(sqlstate, "57014")) {
		code = MEMD_ETIMEDOUT; /* statement_timeout */
		flags = MEMD_ERROR_RETRYABLE;
	} else if (is(sqlstate, "23505"))
		code = MEMD_ECONFLICT;
	else if (is(sqlstate, "23503"))
		code = MEMD_ENOTFOUND;
	else if (in_class(sqlstate, "22") || in_class(sqlstate, "23"))
		code = MEMD_EINVAL; /* data exception (bad JSON, bad UTF-8), check */
	else if (is(sqlstate, "54000") || is(sqlstate, "54001"))
		code = MEMD_ETOOBIG;
	else if (in_class(sqlstate, "28") || in_class(sqlstate, "42") || in_class(sqlstate, "3D") ||
		 in_class(sqlstate, "3F") || in_class(sqlstate, "XX"))
		code = MEMD_EIO; /* auth, privileges, missing schema or table, server bug */
	else
		code = MEMD_EINTERNAL;
	if (ret_flags)
		*ret_flags = flags;
	return code;
}
