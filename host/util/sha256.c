/* SPDX-License-Identifier: MIT */
#include "sha256.h"

#include <string.h>

#define SHA256_LEN_BYTES 8   /* the message length in bits, big-endian, ends the padding */
#define HMAC_IPAD 0x36u
#define HMAC_OPAD 0x5cu

/* FIPS 180-4 4.2.2: the first 32 bits of the fractional parts of the cube
 * roots of the first 64 primes. */
static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
	0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
	0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
	0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
	0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
	0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
	0xc67178f2,
};

/* FIPS 180-4 5.3.3: the initial hash value. */
static const uint32_t H0[8] = {
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

static uint32_t rotr(uint32_t x, unsigned n)
{
	return (x >> n) | (x << (32 - n));
}

/* Wipe memory the compiler may not elide (key material, state). */
static void wipe(void *p, size_t n)
{
	volatile uint8_t *v = p;

	while (n--)
		*v++ = 0;
}

/* FIPS 180-4 6.2.2: one 64-byte block into the state. */
static void compress(uint32_t h[8], const uint8_t *block)
{
	uint32_t w[64], a, b, c, d, e, f, g, hh;

	for (int t = 0; t < 16; t++)
		w[t] = (uint32_t)block[4 * t] << 24 | (uint32_t)block[4 * t + 1] << 16 |
		       (uint32_t)block[4 * t + 2] << 8 | (uint32_t)block[4 * t + 3];
	for (int t = 16; t < 64; t++) {
		uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
		uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
		w[t] = w[t - 16] + s0 + w[t - 7] + s1;
	}
	a = h[0];
	b = h[1];
	c = h[2];
	d = h[3];
	e = h[4];
	f = h[5];
	g = h[6];
	hh = h[7];
	for (int t = 0; t < 64; t++) {
		uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
		uint32_t ch = (e & f) ^ (~e & g);
		uint32_t t1 = hh + S1 + ch + K[t] + w[t];
		uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
		uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
		uint32_t t2 = S0 + maj;
		hh = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	h[0] += a;
	h[1] += b;
	h[2] += c;
	h[3] += d;
	h[4] += e;
	h[5] += f;
	h[6] += g;
	h[7] += hh;
	wipe(w, sizeof(w));
}

void sha256_init(sha256_ctx *c)
{
	memcpy(c->h, H0, sizeof(H0));
	c->total = 0;
	c->buf_len = 0;
}

void sha256_update(sha256_ctx *c, const void *data, size_t len)
{
	const uint8_t *p = data;

	if (!len)
		return; /* data may be NULL then */
	c->total += len;
	if (c->buf_len) {
		size_t take = SHA256_BLOCK_LEN - c->buf_len;
		if (take > len)
			take = len;
		memcpy(c->buf + c->buf_len, p, take);
		c->buf_len += take;
		p += take;
		len -= take;
		if (c->buf_len < SHA256_BLOCK_LEN)
			return;
		compress(c->h, c->buf);
		c->buf_len = 0;
	}
	for (; len >= SHA256_BLOCK_LEN; p += SHA256_BLOCK_LEN, len -= SHA256_BLOCK_LEN)
		compress(c->h, p);
	if (len) {
		memcpy(c->buf, p, len);
		c->buf_len = len;
	}
}

void sha256_final(sha256_ctx *c, uint8_t out[SHA256_DIGEST_LEN])
{
	uint64_t bits = c->total * 8;

	/* FIPS 180-4 5.1.1: a 1 bit, zeros, the length as 64 bits. */
	c->buf[c->buf_len++] = 0x80;
	if (c->buf_len > SHA256_BLOCK_LEN - SHA256_LEN_BYTES) {
		memset(c->buf + c->buf_len, 0, SHA256_BLOCK_LEN - c->buf_len);
		compress(c->h, c->buf);
		c->buf_len = 0;
	}
	memset(c->buf + c->buf_len, 0, SHA256_BLOCK_LEN - SHA256_LEN_BYTES - c->buf_len);
	for (int i = 0; i < SHA256_LEN_BYTES; i++)
		c->buf[SHA256_BLOCK_LEN - 1 - i] = (uint8_t)(bits >> (8 * i));
	compress(c->h, c->buf);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(c->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)c->h[i];
	}
	wipe(c, sizeof(*c));
}

void sha256(const void *data, size_t len, uint8_t out[SHA256_DIGEST_LEN])
{
	sha256_ctx c;

	sha256_init(&c);
	sha256_update(&c, data, len);
	sha256_final(&c, out);
}

void hmac_sha256_init(hmac_sha256_ctx *c, const void *key, size_t key_len)
{
	uint8_t k[SHA256_BLOCK_LEN] = { 0 }, pad[SHA256_BLOCK_LEN];

	if (key_len > SHA256_BLOCK_LEN)
		sha256(key, key_len, k);
	else if (key_len)
		memcpy(k, key, key_len);
	for (int i = 0; i < SHA256_BLOCK_LEN; i++)
		pad[i] = k[i] ^ HMAC_IPAD;
	sha256_init(&c->inner);
	sha256_update(&c->inner, pad, sizeof(pad));
	for (int i = 0; i < SHA256_BLOCK_LEN; i++)
		pad[i] = k[i] ^ HMAC_OPAD;
	sha256_init(&c->outer);
	sha256_update(&c->outer, pad, sizeof(pad));
	wipe(k, sizeof(k));
	wipe(pad, sizeof(pad));
}

void hmac_sha256_update(hmac_sha256_ctx *c, const void *data, size_t len)
{
	sha256_update(&c->inner, data, len);
}

void hmac_sha256_final(hmac_sha256_ctx *c, uint8_t out[SHA256_DIGEST_LEN])
{
	uint8_t inner[SHA256_DIGEST_LEN];

	sha256_final(&c->inner, inner);
	sha256_update(&c->outer, inner, sizeof(inner));
	sha256_final(&c->outer, out);
	wipe(inner, sizeof(inner));
}

void hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
		 uint8_t out[SHA256_DIGEST_LEN])
{
	hmac_sha256_ctx c;

	hmac_sha256_init(&c, key, key_len);
	hmac_sha256_update(&c, data, len);
	hmac_sha256_final(&c, out);
}

void sha256_hex(const uint8_t digest[SHA256_DIGEST_LEN], char out[SHA256_HEX_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 0; i < SHA256_DIGEST_LEN; i++) {
		out[2 * i] = hex[digest[i] >> 4];
		out[2 * i + 1] = hex[digest[i] & 0xf];
	}
	out[SHA256_HEX_LEN] = '\0';
}
