/* SPDX-License-Identifier: MIT */
#include "fv_format.h"

#include <memd/abi.h>
#include <string.h>

#include "pu_crc32c.h"
#include "fv_kernel.h"

/* Segment header offsets. */
#define SH_VERSION 8
#define SH_DIM 12
#define SH_ID 16
#define SH_SUPERSEDES 24
#define SH_FLAGS 32
#define SH_SIZE 36
#define SH_CRC 60
#define SH_KNOWN_FLAGS FV_SEG_COMPACTED

/* Record header offsets. */
#define RH_MAGIC 0
#define RH_CRC 4
#define RH_LEN 8
#define RH_TYPE 12
#define RH_FLAGS 13
#define RH_ZERO 14
#define RH_CRC_FROM 8 /* the checksum covers everything after itself */

/* Upsert body offsets. */
#define UB_SEQ 0
#define UB_TS 8
#define UB_LENS 16 /* five u16 lengths, then a u16 zero */
#define UB_DIM 28
#define UB_FIXED 32
#define UB_NSTR 5

/* Tombstone body offsets. */
#define TB_LENS 0 /* three u16 lengths, then a u16 zero */
#define TB_FIXED 8
#define TB_NSTR 3
/* Event tombstone body. */
#define EB_LENS 0 /* four u16 lengths */
#define EB_FIXED 8
#define EB_NSTR 4

#define FV_FLOAT_BYTES 4u

/* ---- little-endian helpers -------------------------------------------- */

static void put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint16_t get16(const unsigned char *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static size_t pad4(size_t n)
{
	return (n + FV_REC_ALIGN - 1) / FV_REC_ALIGN * FV_REC_ALIGN;
}

/* ---- segment header --------------------------------------------------- */

void fv_seg_header_encode(const fv_seg_header *h, unsigned char out[FV_SEG_HEADER_SIZE])
{
	memset(out, 0, FV_SEG_HEADER_SIZE);
	memcpy(out, FV_SEG_MAGIC, FV_SEG_MAGIC_LEN);
	put32(out + SH_VERSION, h->version);
	put32(out + SH_DIM, h->dim);
	put64(out + SH_ID, h->id);
	put64(out + SH_SUPERSEDES, h->supersedes);
	put32(out + SH_FLAGS, h->flags);
	put32(out + SH_SIZE, FV_SEG_HEADER_SIZE);
	put32(out + SH_CRC, pu_crc32c(0, out, SH_CRC));
}

int fv_seg_header_decode(const unsigned char *in, size_t len, fv_seg_header *ret)
{
	fv_seg_header h;

	if (len < FV_SEG_HEADER_SIZE || memcmp(in, FV_SEG_MAGIC, FV_SEG_MAGIC_LEN) != 0 ||
	    get32(in + SH_CRC) != pu_crc32c(0, in, SH_CRC))
		return FV_DECODE_BAD;
	h.version = get32(in + SH_VERSION);
	h.dim = get32(in + SH_DIM);
	h.id = get64(in + SH_ID);
	h.supersedes = get64(in + SH_SUPERSEDES);
	h.flags = get32(in + SH_FLAGS);
	if (h.version > FV_FORMAT_VERSION) {
		*ret = h;
		return FV_DECODE_NEWER;
	}
	if (h.version != FV_FORMAT_VERSION || get32(in + SH_SIZE) != FV_SEG_HEADER_SIZE ||
	    h.dim == 0 || h.dim > FV_DIM_MAX || h.id == 0 || (h.flags & ~SH_KNOWN_FLAGS) ||
	    (h.flags & FV_SEG_COMPACTED ? h.supersedes != h.id : h.supersedes != 0))
		return FV_DECODE_BAD;
	*ret = h;
	return FV_DECODE_OK;
}

/* ---- records ---------------------------------------------------------- */

static size_t body_size(const fv_rec *r)
{
	if (r->type == FV_REC_UPSERT)
		return pad4(UB_FIXED + r->app.len + r->user.len + r->session.len + r->event_id.len +
			    (r->has_author ? r->author.len : 0)) +
		       (size_t)r->dim * FV_FLOAT_BYTES;
	if (r->type == FV_REC_EVENT_TOMBSTONE)
		return pad4(EB_FIXED + r->app.len + r->user.len + r->session.len + r->event_id.len);
	return pad4(TB_FIXED + r->app.len + r->user.len + (r->has_session ? r->session.len : 0));
}

size_t fv_rec_size(const fv_rec *r)
{
	return FV_REC_HEADER_SIZE + body_size(r);
}

static unsigned char *put_str(unsigned char *p, const fv_str *s)
{
	memcpy(p, s->p, s->len);
	return p + s->len;
}

size_t fv_rec_encode(const fv_rec *r, const float *vector, unsigned char *out)
{
	size_t body = body_size(r), total = FV_REC_HEADER_SIZE + body;
	unsigned char *b = out + FV_REC_HEADER_SIZE, *p;
	uint8_t flags = 0;

	memset(out, 0, total);
	if (r->type == FV_REC_UPSERT) {
		size_t author_len = r->has_author ? r->author.len : 0;
		put64(b + UB_SEQ, (uint64_t)r->seq);
		put64(b + UB_TS, (uint64_t)r->timestamp_us);
		put16(b + UB_LENS, (uint16_t)r->app.len);
		put16(b + UB_LENS + 2, (uint16_t)r->user.len);
		put16(b + UB_LENS + 4, (uint16_t)r->session.len);
		put16(b + UB_LENS + 6, (uint16_t)r->event_id.len);
		put16(b + UB_LENS + 8, (uint16_t)author_len);
		put32(b + UB_DIM, r->dim);
		p = b + UB_FIXED;
		p = put_str(p, &r->app);
		p = put_str(p, &r->user);
		p = put_str(p, &r->session);
		p = put_str(p, &r->event_id);
		if (r->has_author) {
			p = put_str(p, &r->author);
			flags |= FV_REC_HAS_AUTHOR;
		}
		p = b + pad4((size_t)(p - b));
		for (uint32_t j = 0; j < r->dim; j++) {
			uint32_t bits;
			memcpy(&bits, &vector[j], sizeof(bits));
			put32(p + (size_t)j * FV_FLOAT_BYTES, bits);
		}
	} else if (r->type == FV_REC_EVENT_TOMBSTONE) {
		put16(b + EB_LENS, (uint16_t)r->app.len);
		put16(b + EB_LENS + 2, (uint16_t)r->user.len);
		put16(b + EB_LENS + 4, (uint16_t)r->session.len);
		put16(b + EB_LENS + 6, (uint16_t)r->event_id.len);
		p = b + EB_FIXED;
		p = put_str(p, &r->app);
		p = put_str(p, &r->user);
		p = put_str(p, &r->session);
		put_str(p, &r->event_id);
	} else {
		put16(b + TB_LENS, (uint16_t)r->app.len);
		put16(b + TB_LENS + 2, (uint16_t)r->user.len);
		put16(b + TB_LENS + 4, (uint16_t)(r->has_session ? r->session.len : 0));
		p = b + TB_FIXED;
		p = put_str(p, &r->app);
		p = put_str(p, &r->user);
		if (r->has_session) {
			put_str(p, &r->session);
			flags |= FV_REC_HAS_SESSION;
		}
	}
	put32(out + RH_MAGIC, FV_REC_MAGIC);
	put32(out + RH_LEN, (uint32_t)body);
	out[RH_TYPE] = (unsigned char)r->type;
	out[RH_FLAGS] = flags;
	put32(out + RH_CRC, pu_crc32c(0, out + RH_CRC_FROM, total - RH_CRC_FROM));
	return total;
}

/* An id: 1..MEMD_ID_MAX bytes without NUL. */
static int id_ok(const fv_str *s)
{
	return s->len >= 1 && s->len <= MEMD_ID_MAX && !memchr(s->p, '\0', s->len);
}

/* Cut n strings of the given lengths from body[from..end). */
static int take_strs(const unsigned char *body, size_t from, size_t end, const uint16_t *lens,
		     fv_str **outs, size_t n, size_t *ret_end)
{
	size_t at = from;

	for (size_t i = 0; i < n; i++) {
		if (lens[i] > end - at)
			return FV_DECODE_BAD;
		outs[i]->p = (const char *)body + at;
		outs[i]->len = lens[i];
		at += lens[i];
	}
	*ret_end = at;
	return FV_DECODE_OK;
}

static int decode_upsert(const unsigned char *b, size_t len, uint8_t flags, uint32_t dim,
			 fv_rec *r)
{
	uint16_t lens[UB_NSTR];
	fv_str *outs[UB_NSTR] = { &r->app, &r->user, &r->session, &r->event_id, &r->author };
	size_t end;

	if (len < UB_FIXED || (flags & ~FV_REC_HAS_AUTHOR) || get16(b + UB_LENS + 10) != 0)
		return FV_DECODE_BAD;
	for (int i = 0; i < UB_NSTR; i++)
		lens[i] = get16(b + UB_LENS + 2 * i);
	r->has_author = (flags & FV_REC_HAS_AUTHOR) != 0;
	r->dim = get32(b + UB_DIM);
	if (r->dim != dim || (!r->has_author && lens[4] != 0))
		return FV_DECODE_BAD;
	if (take_strs(b, UB_FIXED, len, lens, outs, UB_NSTR, &end) < 0)
		return FV_DECODE_BAD;
	if (pad4(end) + (size_t)dim * FV_FLOAT_BYTES != len)
		return FV_DECODE_BAD;
	if (!id_ok(&r->app) || !id_ok(&r->user) || !id_ok(&r->session) || !id_ok(&r->event_id) ||
	    memchr(r->author.p, '\0', r->author.len))
		return FV_DECODE_BAD;
	r->seq = (int64_t)get64(b + UB_SEQ);
	r->timestamp_us = (int64_t)get64(b + UB_TS);
	r->vector = b + pad4(end);
	return FV_DECODE_OK;
}

static int decode_tombstone(const unsigned char *b, size_t len, uint8_t flags, fv_rec *r)
{
	uint16_t lens[TB_NSTR];
	fv_str *outs[TB_NSTR] = { &r->app, &r->user, &r->session };
	size_t end;

	if (len < TB_FIXED || (flags & ~FV_REC_HAS_SESSION) || get16(b + TB_LENS + 6) != 0)
		return FV_DECODE_BAD;
	for (int i = 0; i < TB_NSTR; i++)
		lens[i] = get16(b + TB_LENS + 2 * i);
	r->has_session = (flags & FV_REC_HAS_SESSION) != 0;
	if (!r->has_session && lens[2] != 0)
		return FV_DECODE_BAD;
	if (take_strs(b, TB_FIXED, len, lens, outs, TB_NSTR, &end) < 0 || pad4(end) != len)
		return FV_DECODE_BAD;
	if (!id_ok(&r->app) || !id_ok(&r->user) || (r->has_session && !id_ok(&r->session)))
		return FV_DECODE_BAD;
	return FV_DECODE_OK;
}

static int decode_event_tombstone(const unsigned char *b, size_t len, uint8_t flags, fv_rec *r)
{
	uint16_t lens[EB_NSTR];
	fv_str *outs[EB_NSTR] = { &r->app, &r->user, &r->session, &r->event_id };
	size_t end;

	if (len < EB_FIXED || flags != 0)
		return FV_DECODE_BAD;
	for (int i = 0; i < EB_NSTR; i++)
		lens[i] = get16(b + EB_LENS + 2 * i);
	if (take_strs(b, EB_FIXED, len, lens, outs, EB_NSTR, &end) < 0 || pad4(end) != len)
		return FV_DECODE_BAD;
	if (!id_ok(&r->app) || !id_ok(&r->user) || !id_ok(&r->session) || !id_ok(&r->event_id))
		return FV_DECODE_BAD;
	return FV_DECODE_OK;
}

int fv_rec_decode(const unsigned char *p, size_t avail, uint32_t dim, fv_rec *ret,
		  size_t *ret_size)
{
	fv_rec r;
	size_t len, total;
	int rc;

	if (avail < FV_REC_HEADER_SIZE || get32(p + RH_MAGIC) != FV_REC_MAGIC)
		return FV_DECODE_BAD;
	len = get32(p + RH_LEN);
	if (len % FV_REC_ALIGN || len > avail - FV_REC_HEADER_SIZE || get16(p + RH_ZERO) != 0)
		return FV_DECODE_BAD;
	total = FV_REC_HEADER_SIZE + len;
	if (get32(p + RH_CRC) != pu_crc32c(0, p + RH_CRC_FROM, total - RH_CRC_FROM))
		return FV_DECODE_BAD;
	memset(&r, 0, sizeof(r));
	r.type = p[RH_TYPE];
	if (r.type == FV_REC_UPSERT)
		rc = decode_upsert(p + FV_REC_HEADER_SIZE, len, p[RH_FLAGS], dim, &r);
	else if (r.type == FV_REC_TOMBSTONE)
		rc = decode_tombstone(p + FV_REC_HEADER_SIZE, len, p[RH_FLAGS], &r);
	else if (r.type == FV_REC_EVENT_TOMBSTONE)
		rc = decode_event_tombstone(p + FV_REC_HEADER_SIZE, len, p[RH_FLAGS], &r);
	else
		rc = FV_DECODE_BAD;
	if (rc < 0)
		return rc;
	*ret = r;
	*ret_size = total;
	return FV_DECODE_OK;
}

void fv_rec_vector(const fv_rec *r, float *out)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* The file's byte order is the host's. */
	memcpy(out, r->vector, (size_t)r->dim * FV_FLOAT_BYTES);
#else
	for (uint32_t j = 0; j < r->dim; j++) {
		uint32_t bits = get32(r->vector + (size_t)j * FV_FLOAT_BYTES);
		memcpy(&out[j], &bits, sizeof(bits));
	}
#endif
}
