/* SPDX-License-Identifier: MIT */
#include "qd_uuid.h"

#include <string.h>

#define QD_SHA1_LEN_FIELD 8      /* bytes of the message length in the padding */
#define QD_SHA1_ROUNDS 80
#define QD_UUID_VERSION_5 0x50u  /* high nibble of byte 6 */
#define QD_UUID_VERSION_MASK 0x0fu
#define QD_UUID_VARIANT_RFC 0x80u /* top bits 10 of byte 8 */
#define QD_UUID_VARIANT_MASK 0x3fu

static uint32_t rol32(uint32_t x, unsigned n)
{
	return (x << n) | (x >> (32u - n));
}

static void sha1_block(qd_sha1 *s, const uint8_t *p)
{
	uint32_t w[QD_SHA1_ROUNDS];
	uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
	for (int i = 16; i < QD_SHA1_ROUNDS; i++)
		w[i] = rol32(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	for (int i = 0; i < QD_SHA1_ROUNDS; i++) {
		uint32_t f, k;
		if (i < 20) {
			f = (b & c) | (~b & d);
			k = 0x5a827999u;
		} else if (i < 40) {
			f = b ^ c ^ d;
			k = 0x6ed9eba1u;
		} else if (i < 60) {
			f = (b & c) | (b & d) | (c & d);
			k = 0x8f1bbcdcu;
		} else {
			f = b ^ c ^ d;
			k = 0xca62c1d6u;
		}
		uint32_t t = rol32(a, 5) + f + e + k + w[i];
		e = d;
		d = c;
		c = rol32(b, 30);
		b = a;
		a = t;
	}
	s->h[0] += a;
	s->h[1] += b;
	s->h[2] += c;
	s->h[3] += d;
	s->h[4] += e;
}

void qd_sha1_init(qd_sha1 *s)
{
	static const uint32_t iv[5] = { 0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u,
					0xc3d2e1f0u };
	memcpy(s->h, iv, sizeof(iv));
	s->total_len = 0;
	s->block_len = 0;
}

void qd_sha1_update(qd_sha1 *s, const void *data, size_t len)
{
	const uint8_t *p = data;

	s->total_len += len;
	while (len > 0) {
		size_t take = QD_SHA1_BLOCK_LEN - s->block_len;
		if (take > len)
			take = len;
		memcpy(s->block + s->block_len, p, take);
		s->block_len += take;
		p += take;
		len -= take;
		if (s->block_len == QD_SHA1_BLOCK_LEN) {
			sha1_block(s, s->block);
			s->block_len = 0;
		}
	}
}

void qd_sha1_final(qd_sha1 *s, uint8_t ret_digest[QD_SHA1_DIGEST_LEN])
{
	uint64_t bits = s->total_len * 8u;

	s->block[s->block_len++] = 0x80u;
	if (s->block_len > QD_SHA1_BLOCK_LEN - QD_SHA1_LEN_FIELD) {
		memset(s->block + s->block_len, 0, QD_SHA1_BLOCK_LEN - s->block_len);
		sha1_block(s, s->block);
		s->block_len = 0;
	}
	memset(s->block + s->block_len, 0, QD_SHA1_BLOCK_LEN - QD_SHA1_LEN_FIELD - s->block_len);
	for (int i = 0; i < QD_SHA1_LEN_FIELD; i++)
		s->block[QD_SHA1_BLOCK_LEN - 1 - i] = (uint8_t)(bits >> (8 * i));
	sha1_block(s, s->block);
	for (int i = 0; i < 5; i++) {
		ret_digest[4 * i] = (uint8_t)(s->h[i] >> 24);
		ret_digest[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
		ret_digest[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
		ret_digest[4 * i + 3] = (uint8_t)s->h[i];
	}
}

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

/* True at the offsets of the four hyphens of the canonical form. */
static int is_hyphen_pos(size_t i)
{
	return i == 8 || i == 13 || i == 18 || i == 23;
}

int qd_uuid_parse(const char *text, uint8_t ret[QD_UUID_LEN])
{
	uint8_t u[QD_UUID_LEN];
	size_t o = 0;

	if (!text || strlen(text) != QD_UUID_TEXT_LEN)
		return -1;
	for (size_t i = 0; i < QD_UUID_TEXT_LEN;) {
		if (is_hyphen_pos(i)) {
			if (text[i] != '-')
				return -1;
			i++;
			continue;
		}
		int hi = hexval(text[i]), lo = hexval(text[i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		u[o++] = (uint8_t)(hi << 4 | lo);
		i += 2;
	}
	memcpy(ret, u, sizeof(u));
	return 0;
}

void qd_uuid_format(const uint8_t u[QD_UUID_LEN], char buf[QD_UUID_TEXT_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (size_t i = 0; i < QD_UUID_LEN; i++) {
		if (is_hyphen_pos(o))
			buf[o++] = '-';
		buf[o++] = hex[u[i] >> 4];
		buf[o++] = hex[u[i] & 0x0fu];
	}
	buf[o] = '\0';
}

/* Set the version and variant bits of a SHA-1 name digest and format it. */
static void v5_finish(qd_sha1 *s, char buf[QD_UUID_TEXT_LEN + 1])
{
	uint8_t digest[QD_SHA1_DIGEST_LEN];

	qd_sha1_final(s, digest);
	digest[6] = (uint8_t)((digest[6] & QD_UUID_VERSION_MASK) | QD_UUID_VERSION_5);
	digest[8] = (uint8_t)((digest[8] & QD_UUID_VARIANT_MASK) | QD_UUID_VARIANT_RFC);
	qd_uuid_format(digest, buf);
}

void qd_uuid_v5_name(const uint8_t ns[QD_UUID_LEN], const void *name, size_t len,
		     char buf[QD_UUID_TEXT_LEN + 1])
{
	qd_sha1 s;

	qd_sha1_init(&s);
	qd_sha1_update(&s, ns, QD_UUID_LEN);
	qd_sha1_update(&s, name, len);
	v5_finish(&s, buf);
}

void qd_uuid_v5(const uint8_t ns[QD_UUID_LEN], const char *const *parts, size_t n,
		char buf[QD_UUID_TEXT_LEN + 1])
{
	qd_sha1 s;

	qd_sha1_init(&s);
	qd_sha1_update(&s, ns, QD_UUID_LEN);
	for (size_t i = 0; i < n; i++)
		qd_sha1_update(&s, parts[i], strlen(parts[i]) + 1); /* with its NUL */
	v5_finish(&s, buf);
}
