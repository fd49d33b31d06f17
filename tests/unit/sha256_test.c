/* SPDX-License-Identifier: MIT */
/* util/sha256: SHA-256 against the FIPS 180-4 examples (and the
 * million-'a' message), HMAC-SHA256 against every test case of RFC 4231,
 * and streaming in odd pieces agreeing with one-shot hashing. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "util/sha256.h"

#define MILLION 1000000

static void hex_of_sha256(const void *data, size_t len, char out[SHA256_HEX_LEN + 1])
{
	uint8_t d[SHA256_DIGEST_LEN];

	sha256(data, len, d);
	sha256_hex(d, out);
}

static void hex_of_hmac(const void *key, size_t klen, const void *data, size_t len,
			char out[SHA256_HEX_LEN + 1])
{
	uint8_t d[SHA256_DIGEST_LEN];

	hmac_sha256(key, klen, data, len, d);
	sha256_hex(d, out);
}

static const struct {
	const char *msg;
	const char *hex;
} fips[] = {
	{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
	{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
	/* 448 bits: the padding no longer fits the block */
	{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
	  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
	/* 896 bits */
	{ "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnop"
	  "qrlmnopqrsmnopqrstnopqrstu",
	  "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1" },
};

Test(sha256, fips_180_4_examples)
{
	char hex[SHA256_HEX_LEN + 1];

	for (size_t i = 0; i < sizeof(fips) / sizeof(fips[0]); i++) {
		hex_of_sha256(fips[i].msg, strlen(fips[i].msg), hex);
		cr_expect_str_eq(hex, fips[i].hex, "message %zu", i);
	}
}

Test(sha256, a_million_a)
{
	char *a = malloc(MILLION), hex[SHA256_HEX_LEN + 1];
	uint8_t d[SHA256_DIGEST_LEN];
	sha256_ctx c;

	cr_assert_not_null(a);
	memset(a, 'a', MILLION);
	hex_of_sha256(a, MILLION, hex);
	cr_expect_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	/* the same in pieces that straddle blocks */
	sha256_init(&c);
	for (size_t off = 0, step = 1; off < MILLION; off += step, step = step % 127 + 1)
		sha256_update(&c, a + off, off + step > MILLION ? MILLION - off : step);
	sha256_final(&c, d);
	sha256_hex(d, hex);
	cr_expect_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(a);
}

Test(sha256, every_length_around_the_padding_boundary_streams_like_one_shot)
{
	uint8_t buf[3 * SHA256_BLOCK_LEN], one[SHA256_DIGEST_LEN], two[SHA256_DIGEST_LEN];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	for (size_t len = 0; len <= sizeof(buf); len++) {
		sha256_ctx c;
		sha256(buf, len, one);
		sha256_init(&c);
		sha256_update(&c, buf, len / 3);
		sha256_update(&c, NULL, 0);
		sha256_update(&c, buf + len / 3, len - len / 3);
		sha256_final(&c, two);
		cr_expect_arr_eq(one, two, SHA256_DIGEST_LEN, "length %zu", len);
	}
}

/* RFC 4231 section 4: test cases 1-7 (case 5's output truncated to 128
 * bits as the RFC gives it). */
Test(hmac_sha256, rfc_4231_test_cases)
{
	uint8_t k3[20], d3[50], k4[25], d4[50], k5[20], k6[131];
	char hex[SHA256_HEX_LEN + 1];
	const char *t6 = "Test Using Larger Than Block-Size Key - Hash Key First";
	const char *t7 = "This is a test using a larger than block-size key and a larger than "
			 "block-size data. The key needs to be hashed before being used by the "
			 "HMAC algorithm.";
	uint8_t k1[20];

	memset(k1, 0x0b, sizeof(k1));
	hex_of_hmac(k1, sizeof(k1), "Hi There", 8, hex);
	cr_expect_str_eq(hex, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");

	hex_of_hmac("Jefe", 4, "what do ya want for nothing?", 28, hex);
	cr_expect_str_eq(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");

	memset(k3, 0xaa, sizeof(k3));
	memset(d3, 0xdd, sizeof(d3));
	hex_of_hmac(k3, sizeof(k3), d3, sizeof(d3), hex);
	cr_expect_str_eq(hex, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");

	for (size_t i = 0; i < sizeof(k4); i++)
		k4[i] = (uint8_t)(i + 1);
	memset(d4, 0xcd, sizeof(d4));
	hex_of_hmac(k4, sizeof(k4), d4, sizeof(d4), hex);
	cr_expect_str_eq(hex, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");

	memset(k5, 0x0c, sizeof(k5));
	hex_of_hmac(k5, sizeof(k5), "Test With Truncation", 20, hex);
	cr_expect_eq(strncmp(hex, "a3b6167473100ee06e0c796c2955552b", 32), 0, "%s", hex);

	memset(k6, 0xaa, sizeof(k6));
	hex_of_hmac(k6, sizeof(k6), t6, strlen(t6), hex);
	cr_expect_str_eq(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");

	hex_of_hmac(k6, sizeof(k6), t7, strlen(t7), hex);
	cr_expect_str_eq(hex, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

/* Keys one byte short of, exactly and one byte over a block (values from
 * Python's hmac module). */
Test(hmac_sha256, keys_around_the_block_length_streamed_and_one_shot)
{
	static const char *const want[] = {
		"87bb644b9584bafe45178c889bc87242ead55b90aad4f05a8d5f2382ac2de2a8",
		"236daf2440c5039379aebd37c356380091ac51c4ea163702055e31ada3759c8c",
		"427ffc2190c9d18b9eb2bb628d9236bd4d5ef69cbc44add62b40647721240fd7",
	};
	uint8_t key[SHA256_BLOCK_LEN + 1], one[SHA256_DIGEST_LEN], two[SHA256_DIGEST_LEN];
	const char *msg = "1700000000.{\"event\":\"lane.finalized\"}";
	char hex[SHA256_HEX_LEN + 1];
	hmac_sha256_ctx c;

	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)(0x41 + i % 26);
	for (size_t kl = SHA256_BLOCK_LEN - 1; kl <= SHA256_BLOCK_LEN + 1; kl++) {
		hmac_sha256(key, kl, msg, strlen(msg), one);
		hmac_sha256_init(&c, key, kl);
		hmac_sha256_update(&c, msg, 10);
		hmac_sha256_update(&c, msg + 10, strlen(msg) - 10);
		hmac_sha256_final(&c, two);
		sha256_hex(one, hex);
		cr_expect_str_eq(hex, want[kl - (SHA256_BLOCK_LEN - 1)], "key length %zu", kl);
		cr_expect_arr_eq(one, two, SHA256_DIGEST_LEN, "key length %zu", kl);
	}
	/* a 65-byte key is hashed, a 64-byte one padded: they differ */
	hmac_sha256(key, SHA256_BLOCK_LEN, msg, strlen(msg), one);
	hmac_sha256(key, SHA256_BLOCK_LEN + 1, msg, strlen(msg), two);
	cr_expect_arr_neq(one, two, SHA256_DIGEST_LEN);
}
