/* SPDX-License-Identifier: MIT */
/* sha256: SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), one-shot or
 * streamed. Contexts are caller-owned plain structs; no allocation, no
 * failure, no shared state (any number of threads, one context each). */
#ifndef MEMD_HOST_SHA256_H
#define MEMD_HOST_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_LEN 32 /* bytes of a digest */
#define SHA256_BLOCK_LEN 64  /* bytes the compression function eats at once */
#define SHA256_HEX_LEN (2 * SHA256_DIGEST_LEN) /* lowercase hex, without the NUL */

typedef struct sha256_ctx {
	uint32_t h[8];                  /* chaining state */
	uint64_t total;                 /* bytes hashed so far */
	uint8_t buf[SHA256_BLOCK_LEN];  /* a partial block */
	size_t buf_len;
} sha256_ctx;

typedef struct hmac_sha256_ctx {
	sha256_ctx inner;               /* H((K ^ ipad) || message...) */
	sha256_ctx outer;               /* H((K ^ opad) || ...), finished by _final */
} hmac_sha256_ctx;

/* Start, feed any number of bytes (len 0 and data NULL allowed), finish:
 * out receives the digest; the context is wiped and must be
 * re-initialised before reuse. */
void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t len);
void sha256_final(sha256_ctx *c, uint8_t out[SHA256_DIGEST_LEN]);
/* The digest of len bytes at data. */
void sha256(const void *data, size_t len, uint8_t out[SHA256_DIGEST_LEN]);

/* HMAC-SHA256 with a key of any length (longer than a block: hashed
 * first, as RFC 2104 says). The context holds key material and is wiped
 * by _final. */
void hmac_sha256_init(hmac_sha256_ctx *c, const void *key, size_t key_len);
void hmac_sha256_update(hmac_sha256_ctx *c, const void *data, size_t len);
void hmac_sha256_final(hmac_sha256_ctx *c, uint8_t out[SHA256_DIGEST_LEN]);
void hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
		 uint8_t out[SHA256_DIGEST_LEN]);

/* The digest as lowercase hex + NUL. */
void sha256_hex(const uint8_t digest[SHA256_DIGEST_LEN], char out[SHA256_HEX_LEN + 1]);

#endif
