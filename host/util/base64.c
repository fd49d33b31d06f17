/* SPDX-License-Identifier: MIT */
/*
 * base64: RFC 4648 encode and strict decode in the standard and URL-safe
 * alphabets (base64.h).
 */
#include "util/base64.h"

#include <stdint.h>
#include <stdlib.h>

static const char b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Bytes per group and characters per group. */
#define B64_GROUP_BYTES 3
#define B64_GROUP_CHARS 4
#define B64_PAD '='

char *b64_encode(const void *in, size_t n, int alphabet, size_t *ret_len)
{
	const unsigned char *p = in;
	const char *abc = alphabet == B64_URL ? b64_url : b64_std;
	size_t groups = n / B64_GROUP_BYTES + (n % B64_GROUP_BYTES != 0), o = 0;
	char *out;

	if (groups > (SIZE_MAX - 1) / B64_GROUP_CHARS)
		return NULL;
	if (!(out = malloc(groups * B64_GROUP_CHARS + 1)))
		return NULL;
	for (size_t i = 0; i < n; i += B64_GROUP_BYTES) {
		size_t left = n - i;
		uint32_t v = (uint32_t)p[i] << 16;
		if (left > 1)
			v |= (uint32_t)p[i + 1] << 8;
		if (left > 2)
			v |= p[i + 2];
		out[o++] = abc[v >> 18 & 63];
		out[o++] = abc[v >> 12 & 63];
		if (left > 1)
			out[o++] = abc[v >> 6 & 63];
		else if (alphabet != B64_URL)
			out[o++] = B64_PAD;
		if (left > 2)
			out[o++] = abc[v & 63];
		else if (alphabet != B64_URL)
			out[o++] = B64_PAD;
	}
	out[o] = '\0';
	if (ret_len)
		*ret_len = o;
	return out;
}

/* The 6-bit value of c in alphabet, or -1. */
static int b64_value(char c, int alphabet)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == (alphabet == B64_URL ? '-' : '+'))
		return 62;
	if (c == (alphabet == B64_URL ? '_' : '/'))
		return 63;
	return -1;
}

int b64_decode(const char *text, size_t len, int alphabet, void **ret, size_t *ret_len)
{
	size_t pad = 0, chars, n, o = 0;
	uint32_t acc = 0;
	int bits = 0;
	unsigned char *out;

	if (alphabet == B64_URL) {
		if (len % B64_GROUP_CHARS == 1)
			return -1;
	} else {
		if (len % B64_GROUP_CHARS)
			return -1;
		while (pad < 2 && pad < len && text[len - 1 - pad] == B64_PAD)
			pad++;
	}
	chars = len - pad;
	if (pad && chars % B64_GROUP_CHARS + pad != B64_GROUP_CHARS)
		return -1;
	n = chars / B64_GROUP_CHARS * B64_GROUP_BYTES +
	    (chars % B64_GROUP_CHARS ? chars % B64_GROUP_CHARS - 1 : 0);
	if (!(out = malloc(n + 1)))
		return -2;
	for (size_t i = 0; i < chars; i++) {
		int v = b64_value(text[i], alphabet);
		if (v < 0) {
			free(out);
			return -1;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits & 0xff);
		}
	}
	out[o] = '\0';
	*ret = out;
	*ret_len = o;
	return 0;
}
