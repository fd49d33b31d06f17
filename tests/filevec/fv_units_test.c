/* SPDX-License-Identifier: MIT */
/*
 * filevec's building blocks, linked in directly: CRC-32C, the dot-product
 * kernels (SIMD and scalar give bit-identical results), the error bound
 * that makes the int8 scan exact, and the record/segment encodings.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pu_crc32c.h"
#include "fv_format.h"
#include "fv_kernel.h"

#define ALIGN 64
#define CRC_CHECK 0xe3069283u /* CRC-32C of "123456789" */
#define CRC_BUF 4096
#define CRC_TRIES 200
#define MAX_DIM 1600
#define BOUND_TRIALS 3000
#define REL_ERR 1e-5 /* of sum |q_j v_j|: float32 rounding */
/* On uniform data the interval is a few percent of |q| |v| wide. */
#define USEFUL_WIDTH 0.05

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint32_t rnd(void)
{
	uint64_t x = rng_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return (uint32_t)(x >> 32);
}

/* Uniform in [-1, 1). */
static float frnd(void)
{
	return (float)((double)rnd() / 2147483648.0 - 1.0);
}

static void *zalloc(size_t n)
{
	void *p = NULL;
	cr_assert_eq(posix_memalign(&p, ALIGN, n ? n : ALIGN), 0);
	memset(p, 0, n);
	return p;
}

/* ---- CRC-32C ---------------------------------------------------------- */

Test(pu_crc32c, known_answer_and_pieces)
{
	static const char check[] = "123456789";
	uint32_t c = pu_crc32c(0, check, 9);

	cr_assert_eq(c, CRC_CHECK, "crc32c(123456789) = %08x", c);
	cr_assert_eq(pu_crc32c_sw(0, check, 9), CRC_CHECK);
	cr_assert_eq(pu_crc32c(pu_crc32c(0, check, 4), check + 4, 5), CRC_CHECK,
		     "crc in two pieces");
	cr_assert_eq(pu_crc32c(0, NULL, 0), 0);
}

Test(pu_crc32c, hardware_matches_table)
{
	unsigned char *buf = malloc(CRC_BUF + 8);

	if (!pu_crc32c_hw_available())
		cr_skip_test("no SSE4.2 on this CPU");
	cr_assert_not_null(buf);
	for (size_t i = 0; i < CRC_BUF + 8; i++)
		buf[i] = (unsigned char)rnd();
	for (int t = 0; t < CRC_TRIES; t++) {
		size_t off = rnd() % 8, len = rnd() % CRC_BUF;
		uint32_t seed = t % 2 ? rnd() : 0;
		cr_assert_eq(pu_crc32c_hw(seed, buf + off, len), pu_crc32c_sw(seed, buf + off, len),
			     "offset %zu, length %zu", off, len);
	}
	free(buf);
}

/* ---- kernels ---------------------------------------------------------- */

/* The dims the kernels are checked with: edge sizes and real ones. */
static const uint32_t dims[] = { 1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100,
				 127, 255, 256, 384, 768, 1000, 1536 };
#define N_DIMS (sizeof(dims) / sizeof(dims[0]))

/* Components of mixed magnitude, zeros and signs. */
static void fill(float *v, uint32_t dim, int style)
{
	for (uint32_t j = 0; j < dim; j++) {
		float x = frnd();
		switch (style) {
		case 0: v[j] = x; break;
		case 1: v[j] = x * powf(10.0f, (float)(rnd() % 12) - 6.0f); break;
		case 2: v[j] = rnd() % 3 ? 0.0f : x; break;
		default: v[j] = x * 1e-20f; break;
		}
	}
}

Test(fv_kernel, simd_and_scalar_float_dot_products_are_bit_identical)
{
	const fv_kernels *s = fv_kernels_scalar(), *a = fv_kernels_avx2();

	if (!a)
		cr_skip_test("no AVX2 on this CPU");
	for (size_t d = 0; d < N_DIMS; d++) {
		size_t stride = fv_f32_stride(dims[d]);
		float *q = zalloc(stride * sizeof(float)), *v = zalloc(stride * sizeof(float));
		for (int style = 0; style < 4; style++) {
			fill(q, dims[d], style);
			fill(v, dims[d], (style + 1) % 4);
			float x = s->dot_f32(q, v, stride), y = a->dot_f32(q, v, stride);
			cr_assert(memcmp(&x, &y, sizeof(x)) == 0,
				  "dim %u style %d: scalar %.9g, avx2 %.9g", dims[d], style, x, y);
			{
				double ref = 0.0, mag = 0.0;
				for (uint32_t j = 0; j < dims[d]; j++) {
					ref += (double)q[j] * v[j];
					mag += fabs((double)q[j] * v[j]);
				}
				cr_assert_float_eq(x, ref, REL_ERR * mag + DBL_MIN,
						   "dim %u: %.9g vs %.9g", dims[d], x, ref);
			}
		}
		free(q);
		free(v);
	}
}

Test(fv_kernel, int8_dot_products_are_exact_in_both)
{
	const fv_kernels *s = fv_kernels_scalar(), *a = fv_kernels_avx2();
	enum { ROWS = 11 };
	uint32_t idx[ROWS] = { 10, 0, 3, 3, 9, 1, 2, 8, 4, 7, 5 };

	for (size_t d = 0; d < N_DIMS; d++) {
		size_t stride = fv_i8_stride(dims[d]);
		int8_t *q = zalloc(stride), *codes = zalloc(stride * ROWS);
		int32_t want[ROWS], got_s[ROWS], got_a[ROWS];

		for (uint32_t j = 0; j < dims[d]; j++)
			q[j] = (int8_t)((int)(rnd() % 255) - 127);
		for (int r = 0; r < ROWS; r++)
			for (uint32_t j = 0; j < dims[d]; j++)
				/* row 0: all extremes, the largest sums */
				codes[r * stride + j] = r == 0 ? (int8_t)(q[j] < 0 ? -127 : 127)
							       : (int8_t)((int)(rnd() % 255) - 127);
		for (int r = 0; r < ROWS; r++) {
			int32_t t = 0;
			for (uint32_t j = 0; j < dims[d]; j++)
				t += q[j] * codes[idx[r] * stride + j];
			want[r] = t;
		}
		s->dot_i8(q, codes, stride, idx, ROWS, got_s);
		cr_assert_arr_eq(got_s, want, sizeof(want), "scalar, dim %u", dims[d]);
		if (a) {
			a->dot_i8(q, codes, stride, idx, ROWS, got_a);
			cr_assert_arr_eq(got_a, want, sizeof(want), "avx2 gathered, dim %u", dims[d]);
			a->dot_i8(q, codes + 3 * stride, stride, NULL, ROWS - 3, got_a);
			s->dot_i8(q, codes + 3 * stride, stride, NULL, ROWS - 3, got_s);
			cr_assert_arr_eq(got_a, got_s, (ROWS - 3) * sizeof(int32_t),
					 "avx2 contiguous, dim %u", dims[d]);
		}
		free(q);
		free(codes);
	}
}

/* The interval from the int8 scan always contains the float32 score. */
Test(fv_kernel, the_bound_always_holds)
{
	const fv_kernels *s = fv_kernels_scalar();

	for (int t = 0; t < BOUND_TRIALS; t++) {
		uint32_t dim = dims[rnd() % N_DIMS];
		size_t fs = fv_f32_stride(dim), is = fv_i8_stride(dim);
		float *v = zalloc(fs * sizeof(float)), *q = zalloc(fs * sizeof(float));
		int8_t *codes = zalloc(is), *qc = zalloc(is);
		float *qf = zalloc(fs * sizeof(float));
		fv_query fq = { .codes = qc, .f32 = qf };
		fv_qmeta m;
		int32_t dot;
		double lo, hi;
		float score;

		fill(v, dim, t % 4);
		fill(q, dim, (t / 4) % 4);
		if (t % 7 == 0) /* near-parallel: the largest scores */
			for (uint32_t j = 0; j < dim; j++)
				q[j] = v[j] * (1.0f + frnd() * 1e-3f);
		if (t % 11 == 0)
			memset(v, 0, dim * sizeof(float));
		fv_quantize(v, dim, codes, &m);
		fv_query_prepare(q, dim, &fq);
		s->dot_i8(qc, codes, is, NULL, 1, &dot);
		fv_bound(&fq, &m, dot, &lo, &hi);
		score = s->dot_f32(qf, v, fs);
		cr_assert(lo <= score && score <= hi,
			  "trial %d dim %u: score %.9g outside [%.9g, %.9g]", t, dim, score, lo, hi);
		if (t % 16 == 0 && t % 7 && t % 11) /* plain [-1, 1) data */
			cr_assert_leq(hi - lo, USEFUL_WIDTH * (m.norm * fq.norm),
				      "trial %d dim %u: the bound is useless (%.3g wide)", t, dim,
				      hi - lo);
		free(v);
		free(q);
		free(codes);
		free(qc);
		free(qf);
	}
}

Test(fv_kernel, quantization_error_bound_is_an_upper_bound)
{
	for (int t = 0; t < BOUND_TRIALS; t++) {
		uint32_t dim = dims[rnd() % N_DIMS];
		float *v = zalloc(dim * sizeof(float));
		int8_t *codes = zalloc(fv_i8_stride(dim));
		fv_qmeta m;
		double e2 = 0.0, n2 = 0.0;

		fill(v, dim, t % 4);
		fv_quantize(v, dim, codes, &m);
		for (uint32_t j = 0; j < dim; j++) {
			long double d = (long double)v[j] - (long double)m.scale * codes[j];
			e2 += (double)(d * d);
			n2 += (double)v[j] * v[j];
			cr_assert(codes[j] >= -FV_I8_MAX && codes[j] <= FV_I8_MAX);
		}
		for (size_t j = dim; j < fv_i8_stride(dim); j++)
			cr_assert_eq(codes[j], 0, "padding not zero");
		cr_assert_geq(m.err, sqrt(e2), "err %.9g < %.9g", m.err, sqrt(e2));
		cr_assert_geq(m.norm, sqrt(n2));
		free(v);
		free(codes);
	}
}

Test(fv_kernel, best_kernels_follow_the_cpu)
{
	const fv_kernels *b = fv_kernels_best();

	cr_assert_not_null(b);
	if (__builtin_cpu_supports("avx2"))
		cr_assert_str_eq(b->name, "avx2");
	else
		cr_assert_str_eq(b->name, "scalar");
}

/* ---- formats ---------------------------------------------------------- */

#define DIM 5

static fv_rec upsert_rec(const char *author)
{
	fv_rec r = { .type = FV_REC_UPSERT, .app = { "app", 3 }, .user = { "user", 4 },
		     .session = { "sess", 4 }, .event_id = { "event-1", 7 }, .seq = -3,
		     .timestamp_us = 1700000000000000LL, .dim = DIM };
	if (author) {
		r.has_author = 1;
		r.author = (fv_str){ author, strlen(author) };
	}
	return r;
}

static int str_is(const fv_str *s, const char *want)
{
	return s->len == strlen(want) && memcmp(s->p, want, s->len) == 0;
}

Test(fv_format, records_round_trip)
{
	float v[DIM] = { 1.5f, -0.0f, 3e-38f, -2.25f, 1e30f }, back[DIM];
	const char *authors[] = { "bob", NULL, "" };

	for (size_t a = 0; a < 3; a++) {
		fv_rec r = upsert_rec(authors[a]), d;
		size_t sz = fv_rec_size(&r), got;
		unsigned char *buf = zalloc(sz + 8);

		cr_assert_eq(sz % FV_REC_ALIGN, 0);
		cr_assert_eq(fv_rec_encode(&r, v, buf), sz);
		cr_assert_eq(fv_rec_decode(buf, sz + 8, DIM, &d, &got), FV_DECODE_OK);
		cr_assert_eq(got, sz);
		cr_assert_eq(d.type, FV_REC_UPSERT);
		cr_assert(str_is(&d.app, "app") && str_is(&d.user, "user") &&
			  str_is(&d.session, "sess") && str_is(&d.event_id, "event-1"));
		cr_assert_eq(d.has_author, authors[a] != NULL);
		if (authors[a])
			cr_assert(str_is(&d.author, authors[a]));
		cr_assert_eq(d.seq, -3);
		cr_assert_eq(d.timestamp_us, 1700000000000000LL);
		fv_rec_vector(&d, back);
		cr_assert_arr_eq(back, v, sizeof(v), "vector bits");
		cr_assert_eq(fv_rec_decode(buf, sz, DIM + 1, &d, &got), FV_DECODE_BAD,
			     "another dimension is refused");
		free(buf);
	}
	{
		fv_rec t = { .type = FV_REC_TOMBSTONE, .app = { "a", 1 }, .user = { "u", 1 },
			     .has_session = 1, .session = { "s2", 2 } }, d;
		unsigned char buf[64];
		size_t got;
		cr_assert_leq(fv_rec_size(&t), sizeof(buf));
		fv_rec_encode(&t, NULL, buf);
		cr_assert_eq(fv_rec_decode(buf, fv_rec_size(&t), DIM, &d, &got), FV_DECODE_OK);
		cr_assert(d.type == FV_REC_TOMBSTONE && d.has_session && str_is(&d.session, "s2"));
		t.has_session = 0;
		fv_rec_encode(&t, NULL, buf);
		cr_assert_eq(fv_rec_decode(buf, fv_rec_size(&t), DIM, &d, &got), FV_DECODE_OK);
		cr_assert(!d.has_session && d.session.len == 0);
	}
}

Test(fv_format, every_damaged_or_cut_record_is_refused)
{
	float v[DIM] = { 1, 2, 3, 4, 5 };
	fv_rec r = upsert_rec("author"), d;
	size_t sz = fv_rec_size(&r), got;
	unsigned char *buf = zalloc(sz), *bad = zalloc(sz);

	fv_rec_encode(&r, v, buf);
	for (size_t i = 0; i < sz; i++) {
		for (int bit = 0; bit < 8; bit++) {
			memcpy(bad, buf, sz);
			bad[i] ^= (unsigned char)(1u << bit);
			cr_assert_eq(fv_rec_decode(bad, sz, DIM, &d, &got), FV_DECODE_BAD,
				     "byte %zu bit %d flipped, still accepted", i, bit);
		}
	}
	for (size_t cut = 0; cut < sz; cut++)
		cr_assert_eq(fv_rec_decode(buf, cut, DIM, &d, &got), FV_DECODE_BAD,
			     "cut to %zu of %zu bytes, still accepted", cut, sz);
	free(buf);
	free(bad);
}

Test(fv_format, segment_headers)
{
	fv_seg_header h = { .version = FV_FORMAT_VERSION, .dim = 384, .id = 7,
			    .flags = FV_SEG_COMPACTED, .supersedes = 7 }, d;
	unsigned char buf[FV_SEG_HEADER_SIZE];

	fv_seg_header_encode(&h, buf);
	cr_assert_eq(fv_seg_header_decode(buf, sizeof(buf), &d), FV_DECODE_OK);
	cr_assert(d.dim == 384 && d.id == 7 && d.flags == FV_SEG_COMPACTED && d.supersedes == 7);
	buf[20] ^= 1;
	cr_assert_eq(fv_seg_header_decode(buf, sizeof(buf), &d), FV_DECODE_BAD, "checksum");
	cr_assert_eq(fv_seg_header_decode(buf, sizeof(buf) - 1, &d), FV_DECODE_BAD, "short");
	h.version = FV_FORMAT_VERSION + 1;
	fv_seg_header_encode(&h, buf);
	cr_assert_eq(fv_seg_header_decode(buf, sizeof(buf), &d), FV_DECODE_NEWER);
	cr_assert_eq(d.version, FV_FORMAT_VERSION + 1);
	h = (fv_seg_header){ .version = FV_FORMAT_VERSION, .dim = 3, .id = 9, .supersedes = 2 };
	fv_seg_header_encode(&h, buf);
	cr_assert_eq(fv_seg_header_decode(buf, sizeof(buf), &d), FV_DECODE_BAD,
		     "only a compacted segment supersedes");
	h = (fv_seg_header){ .version = FV_FORMAT_VERSION, .dim = 0, .id = 9 };
	fv_seg_header_encode(&h, buf);
	cr_assert_eq(fv_seg_header_decode(buf, sizeof(buf), &d), FV_DECODE_BAD, "dimension 0");
}
