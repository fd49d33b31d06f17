/* SPDX-License-Identifier: MIT */
/*
 * base64: bytes as text (RFC 4648): the standard alphabet with padding
 * (how the REST API carries opaque bytes in JSON) and the URL-safe one
 * without padding (opaque cursors in query strings).
 */
#ifndef MEMD_HOST_UTIL_BASE64_H
#define MEMD_HOST_UTIL_BASE64_H

#include <stddef.h>

/* Which alphabet: standard ("+/", padded with '=') or URL-safe ("-_",
 * no padding). */
#define B64_STD 0
#define B64_URL 1

/* The text of n bytes in alphabet (B64_*), malloc'd and NUL-terminated
 * (in may be NULL when n is 0); *ret_len (may be NULL) its length. NULL
 * on ENOMEM. */
char *b64_encode(const void *in, size_t n, int alphabet, size_t *ret_len);

/* Decode len chars of text in alphabet into malloc'd *ret (*ret_len
 * bytes, followed by a NUL not counted, so that a text decodes to a
 * string too). Strict: only the alphabet's characters, B64_STD needs a
 * multiple of 4 characters with 0-2 '=' at the end, B64_URL none and no
 * length of 1 modulo 4. Returns 0; -1 when text is not such base64;
 * -2 on ENOMEM (outputs untouched on failure). */
int b64_decode(const char *text, size_t len, int alphabet, void **ret, size_t *ret_len);

#endif
