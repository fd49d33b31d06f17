/* SPDX-License-Identifier: MIT */
/*
 * fv_format: filevec's on-disk encodings (all integers little-endian,
 * floats as their IEEE-754 bits, little-endian).
 *
 * A segment file starts with a 64-byte header:
 *    0  "MEMDFVEC"        magic
 *    8  u32 version       FV_FORMAT_VERSION
 *   12  u32 dim           vector dimension of every record in the store
 *   16  u64 id            segment id (also in the file name)
 *   24  u64 supersedes    compacted segments: every segment with a smaller
 *                         id is obsolete; 0 otherwise
 *   32  u32 flags         FV_SEG_COMPACTED
 *   36  u32 header size   64
 *   40  zero
 *   60  u32 crc32c        of bytes 0..60
 * followed by records, each 4-byte aligned:
 *    0  u32 magic         FV_REC_MAGIC
 *    4  u32 crc32c        of bytes 8 .. 16 + body_len
 *    8  u32 body_len      a multiple of 4
 *   12  u8  type          FV_REC_UPSERT, FV_REC_TOMBSTONE or
 *                         FV_REC_EVENT_TOMBSTONE
 *   13  u8  flags         FV_REC_HAS_AUTHOR (upsert), FV_REC_HAS_SESSION
 *                         (tombstone)
 *   14  u16 zero
 *   16  body
 * Upsert body: i64 seq, i64 timestamp_us, u16 lengths of app, user,
 * session, event_id, author, u16 zero, u32 dim, the five strings (no
 * terminators), zero padding to 4, dim float32.
 * Tombstone body: u16 lengths of app, user, session, u16 zero, the strings,
 * zero padding to 4. It removes every record of (app, user[, session])
 * written before it.
 * Event tombstone body (filevec 1.1, memd ABI 1.2: remove_events): u16
 * lengths of app, user, session, event_id, the strings, zero padding to
 * 4; flags 0. It removes the record of (app, user, session, event_id)
 * written before it. An older filevec skips it as a damaged record (the
 * event's vector comes back; memd's searches still leave hidden events
 * out, as with a vector store that cannot remove them).
 */
#ifndef MEMD_FV_FORMAT_H
#define MEMD_FV_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define FV_FORMAT_VERSION 1u
#define FV_SEG_MAGIC "MEMDFVEC"
#define FV_SEG_MAGIC_LEN 8u
#define FV_SEG_HEADER_SIZE 64u
#define FV_SEG_COMPACTED 0x1u

#define FV_REC_MAGIC 0x31525646u /* "FVR1" */
#define FV_REC_HEADER_SIZE 16u
#define FV_REC_ALIGN 4u
#define FV_REC_UPSERT 1u
#define FV_REC_TOMBSTONE 2u
#define FV_REC_EVENT_TOMBSTONE 3u
#define FV_REC_HAS_AUTHOR 0x1u   /* upsert: author present */
#define FV_REC_HAS_SESSION 0x1u  /* tombstone: one session, not the whole user */
#define FV_AUTHOR_MAX 65535u     /* bytes in an author (u16 length) */

/* Results of the decoders. */
#define FV_DECODE_OK 0
#define FV_DECODE_BAD (-1)   /* not a valid header/record (garbage or torn) */
#define FV_DECODE_NEWER (-2) /* a valid header of a newer format version */

typedef struct fv_seg_header {
	uint32_t version;
	uint32_t dim;
	uint32_t flags;
	uint64_t id;
	uint64_t supersedes;
} fv_seg_header;

/* Write the 64-byte header for h (its version is written as given). */
void fv_seg_header_encode(const fv_seg_header *h, unsigned char out[FV_SEG_HEADER_SIZE]);
/* Decode len bytes at in: FV_DECODE_OK and *ret, FV_DECODE_NEWER (and
 * *ret, for the message) or FV_DECODE_BAD. */
int fv_seg_header_decode(const unsigned char *in, size_t len, fv_seg_header *ret);

/* A string inside a record: not NUL-terminated when decoded. */
typedef struct fv_str {
	const char *p;
	size_t len;
} fv_str;

/* One record. Decoded records point into the decoded buffer. */
typedef struct fv_rec {
	uint32_t type;             /* FV_REC_* */
	fv_str app, user, session, event_id, author;
	int has_author;            /* upsert */
	int has_session;           /* tombstone (an event tombstone always has one) */
	int64_t seq, timestamp_us; /* upsert */
	uint32_t dim;              /* upsert */
	const unsigned char *vector; /* upsert, decoded: dim little-endian floats */
} fv_rec;

/* Encoded size of r (header, body, padding); strings and dim must be
 * within their limits (ids 1..MEMD_ID_MAX bytes, author <= FV_AUTHOR_MAX,
 * dim 1..FV_DIM_MAX): the caller validates. */
size_t fv_rec_size(const fv_rec *r);
/* Write r (and, for an upsert, the dim floats at vector) to out, which
 * has fv_rec_size(r) bytes; returns that size. */
size_t fv_rec_encode(const fv_rec *r, const float *vector, unsigned char *out);
/* Decode the record at p (avail bytes from p to the end of the valid data)
 * for a store of dimension dim: FV_DECODE_OK with *ret and *ret_size (its
 * encoded size), or FV_DECODE_BAD when the bytes are not a whole, intact,
 * well-formed record (bad magic, length, checksum, field or dimension). */
int fv_rec_decode(const unsigned char *p, size_t avail, uint32_t dim, fv_rec *ret,
		  size_t *ret_size);
/* The dim floats of a decoded upsert, into out. */
void fv_rec_vector(const fv_rec *r, float *out);

#endif
