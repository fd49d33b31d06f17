/* SPDX-License-Identifier: MIT */
/*
 * http uri: percent-decoding of path segments and query values (memd
 * unescapes URLs itself, so that "%2F" in an id is seen as such and
 * refused rather than taken for a path separator), and percent-encoding
 * for Location headers.
 */
#ifndef MEMD_HTTP_URI_H
#define MEMD_HTTP_URI_H

#include <stddef.h>
#include <stdint.h>

#include <memd/abi.h>

/* Decode len bytes of s ("%XX" escapes; everything else as is) into a
 * new NUL-terminated string (*ret, malloc'd). The result must be valid
 * UTF-8 without control characters (NUL included); with forbid_slash, also
 * without '/'. MEMD_EINVAL (message names what, e.g. "path parameter
 * sid") or MEMD_ENOMEM. */
int32_t http_uri_decode(const char *s, size_t len, int forbid_slash, const char *what,
			char **ret, memd_error *err);

/* Percent-encode s for use as one path segment (unreserved characters
 * kept). malloc'd; NULL on ENOMEM. */
char *http_uri_encode_segment(const char *s);

#endif
