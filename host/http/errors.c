/* SPDX-License-Identifier: MIT */
#include "errors.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/errname.h"
#include "json/event_json.h"

#define HTTP_MSG_MAX 1024

static const http_error_kind table[] = {
	{ MEMD_EINVAL, 400, ERRNAME_EINVAL, 0 },
	{ MEMD_EAUTH, 401, ERRNAME_EAUTH, 0 },
	{ MEMD_EFORBIDDEN, 403, ERRNAME_EFORBIDDEN, 0 },
	{ MEMD_ENOTFOUND, 404, ERRNAME_ENOTFOUND, 0 },
	{ HTTP_E_NOROUTE, 404, "no_route", 0 },
	{ HTTP_E_METHOD, 405, "method_not_allowed", 0 },
	{ HTTP_E_TIMEOUT, 408, "request_timeout", 0 },
	{ MEMD_ECONFLICT, 409, ERRNAME_ECONFLICT, 0 },
	{ MEMD_ETOOBIG, 413, ERRNAME_ETOOBIG, 0 },
	{ HTTP_E_URI, 414, "uri_too_long", 0 },
	{ HTTP_E_MEDIA, 415, "unsupported_media_type", 0 },
	{ HTTP_E_HEADERS, 431, "headers_too_large", 0 },
	{ MEMD_ENOMEM, 500, ERRNAME_ENOMEM, 0 },
	{ MEMD_EIO, 500, ERRNAME_EIO, 0 },
	{ MEMD_ECANCELED, 500, ERRNAME_ECANCELED, 0 },
	{ MEMD_EABI, 500, ERRNAME_EABI, 0 },
	{ MEMD_EINTERNAL, 500, ERRNAME_EINTERNAL, 0 },
	{ MEMD_ENOTSUP, 501, ERRNAME_ENOTSUP, 0 },
	{ MEMD_EUNAVAIL, 503, ERRNAME_EUNAVAIL, 1 },
	{ MEMD_ETIMEDOUT, 503, ERRNAME_ETIMEDOUT, 1 },
	{ HTTP_E_DRAINING, 503, "shutting_down", 1 },
};

static const http_error_kind internal = { MEMD_EINTERNAL, 500, ERRNAME_EINTERNAL, 0 };
static const http_error_kind retry = { MEMD_EUNAVAIL, 503, ERRNAME_EUNAVAIL, 1 };

const http_error_kind *http_error_lookup(int32_t code, uint32_t flags)
{
	const http_error_kind *k = &internal;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].code == code) {
			k = &table[i];
			break;
		}
	if ((flags & MEMD_ERROR_RETRYABLE) && k->status >= 500 && !k->retryable)
		return &retry;
	return k;
}

const http_error_kind *http_error_table(size_t *ret_n)
{
	*ret_n = sizeof(table) / sizeof(table[0]);
	return table;
}

/* Copy s into buf (truncated to cap - 1 bytes), replacing control
 * characters by '?', and every non-ASCII byte too when s is not valid UTF-8. */
static void clean_text(const char *s, char *buf, size_t cap)
{
	size_t n = strlen(s);
	int ascii_only;

	if (n >= cap)
		n = cap - 1;
	/* Do not cut a UTF-8 sequence in half. */
	while (n > 0 && n < strlen(s) && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	memcpy(buf, s, n);
	buf[n] = '\0';
	ascii_only = !ej_utf8_valid(buf, n);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)buf[i];
		if (c < 0x20 || c == 0x7f || (ascii_only && c >= 0x80))
			buf[i] = '?';
	}
}

char *http_error_body(const http_error_kind *kind, const char *message)
{
	char msg[HTTP_MSG_MAX];
	json_t *o;
	char *text;

	clean_text(message ? message : "", msg, sizeof(msg));
	if (!msg[0])
		strcpy(msg, kind->name);
	o = json_pack("{s:{s:s,s:s,s:b}}", "error", "code", kind->name, "message", msg, "retryable",
		      kind->retryable);
	if (!o)
		return NULL;
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return text;
}
