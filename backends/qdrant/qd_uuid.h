/* SPDX-License-Identifier: MIT */
/*
 * qd_uuid: SHA-1 (FIPS 180-4) and name-based UUIDv5 (RFC 9562 §5.5), for
 * the deterministic Qdrant point id of an event. Self-contained: libcurl's
 * crypto is not exposed and memd takes no crypto dependency for this.
 * SHA-1 is used here only as the name hash RFC 9562 prescribes, never for
 * security.
 */
#ifndef MEMD_QD_UUID_H
#define MEMD_QD_UUID_H

#include <stddef.h>
#include <stdint.h>

#define QD_SHA1_DIGEST_LEN 20
#define QD_SHA1_BLOCK_LEN 64
#define QD_UUID_LEN 16
#define QD_UUID_TEXT_LEN 36 /* canonical 8-4-4-4-12 form, without the NUL */

/* Incremental SHA-1 state; caller-owned, no resources. */
typedef struct qd_sha1 {
	uint32_t h[5];
	uint64_t total_len;           /* bytes fed so far */
	uint8_t block[QD_SHA1_BLOCK_LEN];
	size_t block_len;             /* bytes waiting in block */
} qd_sha1;

/* Start a digest. */
void qd_sha1_init(qd_sha1 *s);
/* Feed len bytes (data may be NULL when len is 0). */
void qd_sha1_update(qd_sha1 *s, const void *data, size_t len);
/* Finish and write the 20-byte digest; s must be re-initialised before
 * reuse. */
void qd_sha1_final(qd_sha1 *s, uint8_t ret_digest[QD_SHA1_DIGEST_LEN]);

/* Parse a canonical UUID text (36 chars, either case) into 16 bytes.
 * Returns 0, or -1 if text is not a UUID (ret untouched). */
int qd_uuid_parse(const char *text, uint8_t ret[QD_UUID_LEN]);
/* Write the canonical lower-case text of u to buf (36 chars + NUL). */
void qd_uuid_format(const uint8_t u[QD_UUID_LEN], char buf[QD_UUID_TEXT_LEN + 1]);

/* UUIDv5 (RFC 9562 §5.5) of the len-byte name in namespace ns; writes the
 * canonical text to buf. */
void qd_uuid_v5_name(const uint8_t ns[QD_UUID_LEN], const void *name, size_t len,
		     char buf[QD_UUID_TEXT_LEN + 1]);

/* UUIDv5 of the name made of n parts, each followed by one NUL byte (so
 * ("ab","c") and ("a","bc") differ: the parts are NUL-free C strings), in
 * namespace ns. Writes the canonical text to buf. */
void qd_uuid_v5(const uint8_t ns[QD_UUID_LEN], const char *const *parts, size_t n,
		char buf[QD_UUID_TEXT_LEN + 1]);

#endif
