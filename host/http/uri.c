/* SPDX-License-Identifier: MIT */
#include "uri.h"

#include <stdlib.h>
#include <string.h>

#include <memd/plugin.h>

#include "json/event_json.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int32_t http_uri_decode(const char *s, size_t len, int forbid_slash, const char *what,
			char **ret, memd_error *err)
{
	char *d = malloc(len + 1);
	size_t o = 0;

	if (!d)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '%') {
			if (i + 2 >= len || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0) {
				free(d);
				return memd_error_set(err, MEMD_EINVAL, 0, "%s: invalid percent-encoding", what);
			}
			c = (unsigned char)(hexval(s[i + 1]) << 4 | hexval(s[i + 2]));
			i += 2;
		}
		if (c < 0x20 || c == 0x7f) {
			free(d);
			return memd_error_set(err, MEMD_EINVAL, 0, "%s: contains a control character", what);
		}
		if (c == '/' && forbid_slash) {
			free(d);
			return memd_error_set(err, MEMD_EINVAL, 0, "%s: contains '/'", what);
		}
		d[o++] = (char)c;
	}
	d[o] = '\0';
	if (!ej_utf8_valid(d, o)) {
		free(d);
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: not valid UTF-8", what);
	}
	*ret = d;
	return 0;
}

char *http_uri_encode_segment(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t len = strlen(s), o = 0;
	char *e = malloc(3 * len + 1);

	if (!e)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			e[o++] = (char)c;
		} else {
			e[o++] = '%';
			e[o++] = hex[c >> 4];
			e[o++] = hex[c & 0xf];
		}
	}
	e[o] = '\0';
	return e;
}
