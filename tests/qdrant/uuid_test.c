/* SPDX-License-Identifier: MIT */
/* backends/qdrant/qd_uuid: SHA-1 against FIPS 180 test vectors, UUIDv5
 * against RFC 9562's example, and the point-id name layout. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "qd_uuid.h"

#define MILLION 1000000u
#define CHUNK 1000u

static void hex(const uint8_t *d, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

static void sha1_hex(const void *data, size_t len, char out[2 * QD_SHA1_DIGEST_LEN + 1])
{
	uint8_t d[QD_SHA1_DIGEST_LEN];
	qd_sha1 s;

	qd_sha1_init(&s);
	qd_sha1_update(&s, data, len);
	qd_sha1_final(&s, d);
	hex(d, sizeof(d), out);
}

Test(sha1, fips_vectors)
{
	char out[2 * QD_SHA1_DIGEST_LEN + 1];

	sha1_hex("", 0, out);
	cr_expect_str_eq(out, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
	sha1_hex("abc", 3, out);
	cr_expect_str_eq(out, "a9993e364706816aba3e25717850c26c9cd0d89d");
	const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	sha1_hex(two, strlen(two), out);
	cr_expect_str_eq(out, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}

/* A million 'a's fed in pieces that straddle block boundaries. */
Test(sha1, million_a_incremental)
{
	char piece[CHUNK + 7], out[2 * QD_SHA1_DIGEST_LEN + 1];
	uint8_t d[QD_SHA1_DIGEST_LEN];
	size_t fed = 0, step = 1;
	qd_sha1 s;

	memset(piece, 'a', sizeof(piece));
	qd_sha1_init(&s);
	while (fed < MILLION) {
		size_t n = step % sizeof(piece) + 1;
		if (n > MILLION - fed)
			n = MILLION - fed;
		qd_sha1_update(&s, piece, n);
		fed += n;
		step = step * 31 + 7;
	}
	qd_sha1_final(&s, d);
	hex(d, sizeof(d), out);
	cr_expect_str_eq(out, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

/* Lengths around the padding boundary (55, 56, 63, 64 bytes). */
Test(sha1, padding_boundaries)
{
	static const struct { size_t n; const char *digest; } cases[] = {
		{ 55, "c1c8bbdc22796e28c0e15163d20899b65621d65a" },
		{ 56, "c2db330f6083854c99d4b5bfb6e8f29f201be699" },
		{ 63, "03f09f5b158a7a8cdad920bddc29b81c18a551f5" },
		{ 64, "0098ba824b5c16427bd7a1122a5a442a25ec644d" },
	};
	char buf[64], out[2 * QD_SHA1_DIGEST_LEN + 1];

	memset(buf, 'a', sizeof(buf));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sha1_hex(buf, cases[i].n, out);
		cr_expect_str_eq(out, cases[i].digest, "length %zu", cases[i].n);
	}
}

Test(uuid, rfc9562_v5_example)
{
	uint8_t dns[QD_UUID_LEN];
	char out[QD_UUID_TEXT_LEN + 1];

	cr_assert_eq(qd_uuid_parse("6ba7b810-9dad-11d1-80b4-00c04fd430c8", dns), 0);
	qd_uuid_v5_name(dns, "www.example.com", strlen("www.example.com"), out);
	cr_expect_str_eq(out, "2ed6657d-e927-568b-95e1-2665a8aea6a2");
}

Test(uuid, parse_and_format)
{
	uint8_t u[QD_UUID_LEN];
	char out[QD_UUID_TEXT_LEN + 1];

	cr_assert_eq(qd_uuid_parse("6BA7B810-9DAD-11D1-80B4-00C04FD430C8", u), 0);
	qd_uuid_format(u, out);
	cr_expect_str_eq(out, "6ba7b810-9dad-11d1-80b4-00c04fd430c8");
	cr_expect_eq(qd_uuid_parse("6ba7b810-9dad-11d1-80b4-00c04fd430c", u), -1);
	cr_expect_eq(qd_uuid_parse("6ba7b810x9dad-11d1-80b4-00c04fd430c8", u), -1);
	cr_expect_eq(qd_uuid_parse("6ba7b810-9dad-11d1-80b4-00c04fd430cg", u), -1);
	cr_expect_eq(qd_uuid_parse(NULL, u), -1);
}

/* The parts are NUL-terminated in the name: moving a character from one
 * part to the next changes the id; the same parts give the same id; the
 * result is a version 5, RFC-variant UUID equal to v5 of the joined name. */
Test(uuid, parts_are_unambiguous)
{
	uint8_t ns[QD_UUID_LEN];
	const char *a[] = { "app", "ab", "c", "e1" };
	const char *b[] = { "app", "a", "bc", "e1" };
	char ua[QD_UUID_TEXT_LEN + 1], ub[QD_UUID_TEXT_LEN + 1], ua2[QD_UUID_TEXT_LEN + 1];
	char joined[QD_UUID_TEXT_LEN + 1];
	static const char name[] = "app\0ab\0c\0e1"; /* sizeof includes the last NUL */

	cr_assert_eq(qd_uuid_parse("0f2b7c1e-5d4a-4e8b-9c3f-2a1b0c9d8e7f", ns), 0);
	qd_uuid_v5(ns, a, 4, ua);
	qd_uuid_v5(ns, b, 4, ub);
	qd_uuid_v5(ns, a, 4, ua2);
	cr_expect_str_neq(ua, ub);
	cr_expect_str_eq(ua, ua2);
	cr_expect_eq(ua[14], '5', "version nibble of %s", ua);
	cr_expect(strchr("89ab", ua[19]) != NULL, "variant of %s", ua);
	qd_uuid_v5_name(ns, name, sizeof(name), joined);
	cr_expect_str_eq(ua, joined);
}
