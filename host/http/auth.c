/* SPDX-License-Identifier: MIT */
#include "auth.h"

#include <string.h>
#include <strings.h>

#include <memd/plugin.h>

#define BEARER "Bearer"

/* Nonzero iff a (alen bytes) equals b (blen bytes). The time depends on
 * blen (the configured key) only, never on where a differs. */
static int ct_equal(const char *a, size_t alen, const char *b, size_t blen)
{
	volatile unsigned char diff = (unsigned char)(alen != blen);
	for (size_t i = 0; i < blen; i++) {
		unsigned char ca = i < alen ? (unsigned char)a[i] : 0;
		diff |= (unsigned char)(ca ^ (unsigned char)b[i]);
	}
	return diff == 0;
}

const char *http_auth_scope_name(int32_t scope)
{
	switch (scope) {
	case SETTINGS_SCOPE_READ:
		return "read";
	case SETTINGS_SCOPE_WRITE:
		return "write";
	case SETTINGS_SCOPE_ADMIN:
		return "admin";
	default:
		return "public";
	}
}

int32_t http_auth_check(const settings_api_key *keys, size_t n, const char *authorization,
			int32_t scope, memd_error *err)
{
	const char *token;
	size_t len;
	int32_t granted = 0;

	if (n == 0 || scope == HTTP_SCOPE_PUBLIC)
		return 0;
	if (!authorization)
		return memd_error_set(err, MEMD_EAUTH, 0,
				      "missing credentials: send 'Authorization: Bearer <api key>'");
	if (strncasecmp(authorization, BEARER, strlen(BEARER)) != 0 ||
	    authorization[strlen(BEARER)] != ' ')
		return memd_error_set(err, MEMD_EAUTH, 0,
				      "malformed Authorization header: expected 'Bearer <api key>'");
	token = authorization + strlen(BEARER);
	while (*token == ' ')
		token++;
	len = strlen(token);
	while (len && token[len - 1] == ' ')
		len--;
	/* Every key is compared, whatever matched before. */
	for (size_t i = 0; i < n; i++) {
		int eq = ct_equal(token, len, keys[i].key, strlen(keys[i].key));
		int32_t s = eq ? keys[i].scope : 0;
		granted = s > granted ? s : granted;
	}
	if (!granted)
		return memd_error_set(err, MEMD_EAUTH, 0, "invalid API key");
	if (granted < scope)
		return memd_error_set(err, MEMD_EFORBIDDEN, 0, "this API key has scope %s; the route needs %s",
				      http_auth_scope_name(granted), http_auth_scope_name(scope));
	return 0;
}
