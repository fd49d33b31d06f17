/* SPDX-License-Identifier: MIT */
/*
 * http auth: API keys from server.api_keys, sent as
 * "Authorization: Bearer <key>". Scopes are ordered: admin includes write,
 * write includes read. Keys are compared in constant time (per key length)
 * and never logged or echoed.
 */
#ifndef MEMD_HTTP_AUTH_H
#define MEMD_HTTP_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include <memd/abi.h>

#include "settings.h"

/* Scope a route needs: none (public), or SETTINGS_SCOPE_*. */
#define HTTP_SCOPE_PUBLIC 0

/* Check the Authorization header value (NULL if absent) against keys
 * (n of them, borrowed) for a route needing scope. With no keys
 * configured every request passes. Returns 0, MEMD_EAUTH (missing,
 * malformed or unknown key) or MEMD_EFORBIDDEN (the key's scope is too
 * low), with a message in err. */
int32_t http_auth_check(const settings_api_key *keys, size_t n, const char *authorization,
			int32_t scope, memd_error *err);

/* "read", "write", "admin" or "public". Static storage. */
const char *http_auth_scope_name(int32_t scope);

#endif
