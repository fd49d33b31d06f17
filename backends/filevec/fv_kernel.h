/* SPDX-License-Identifier: MIT */
/*
 * fv_kernel: the arithmetic of filevec's exact top-k.
 *
 * Every stored vector is kept twice: as float32 (the exact value) and as
 * int8 codes with a per-vector scale s (v ~ s * codes), plus two upper
 * bounds: e >= ||v - s * codes|| and n >= ||v||. A query q is quantized the
 * same way (q ~ a * Q). The int8 dot product Q . codes is exact integer
 * arithmetic, and for the real inner product q . v:
 *
 *     | q . v - a s (Q . codes) | <= ||aQ|| e + ||q - aQ|| n
 *
 * (write q = aQ + dq, v = s codes + dv and apply Cauchy-Schwarz twice).
 * Adding the rounding bound of the float32 dot product used for the final
 * score gives an interval [lo, hi] that is certain to contain that score.
 * A query scans the compact codes (a quarter of the bytes of float32),
 * keeps every vector whose hi reaches the k-th best lo, and scores those
 * exactly: the result is exactly the top-k of the float32 scores.
 *
 * The float32 dot product has one fixed summation order (16-float chunks
 * into two 8-lane accumulators, then a fixed reduction tree), multiply
 * then add (no fused multiply-add), so the scalar and the AVX2 versions
 * give bit-identical scores and therefore identical rankings. The int8
 * dot product is exact in both.
 *
 * Layout: a float32 row has fv_f32_stride(dim) floats and an int8 row
 * fv_i8_stride(dim) bytes; the padding is zero. Pointers need no
 * particular alignment (the kernels use unaligned loads).
 */
#ifndef MEMD_FV_KERNEL_H
#define MEMD_FV_KERNEL_H

#include <float.h>
#include <stddef.h>
#include <stdint.h>

#define FV_DIM_MAX 65536u   /* keeps |Q . codes| <= 127 * 127 * stride < 2^31 */
#define FV_F32_CHUNK 16u    /* floats per step of the float32 dot product */
#define FV_I8_CHUNK 32u     /* bytes per step of the int8 dot product */
#define FV_I8_MAX 127       /* codes are in [-127, 127] */

/* Floats in one padded float32 row. dim <= FV_DIM_MAX. */
static inline size_t fv_f32_stride(uint32_t dim)
{
	return ((size_t)dim + FV_F32_CHUNK - 1) / FV_F32_CHUNK * FV_F32_CHUNK;
}

/* Bytes in one padded int8 row. */
static inline size_t fv_i8_stride(uint32_t dim)
{
	return ((size_t)dim + FV_I8_CHUNK - 1) / FV_I8_CHUNK * FV_I8_CHUNK;
}

/* What the bounds need of one stored vector. */
typedef struct fv_qmeta {
	float scale;   /* s: v ~ scale * codes */
	float err;     /* >= ||v - scale * codes|| */
	float norm;    /* >= ||v|| */
} fv_qmeta;

/* Quantize v (dim finite floats) into codes (fv_i8_stride(dim) bytes,
 * padding zeroed) and fill *ret_meta. Cannot fail. */
void fv_quantize(const float *v, uint32_t dim, int8_t *codes, fv_qmeta *ret_meta);

/* A quantized query, with everything fv_bound() needs. The arrays are the
 * caller's (fv_i8_stride / fv_f32_stride elements). */
typedef struct fv_query {
	int8_t *codes;     /* Q, padded */
	float *f32;        /* q, padded with zeros */
	double scale;      /* a (a float value) */
	double qnorm;      /* >= ||aQ|| */
	double qerr;       /* >= ||q - aQ|| */
	double norm;       /* >= ||q|| */
	double gamma;      /* relative rounding bound of the float32 dot */
	double abs_slack;  /* absolute rounding bound (underflow) */
} fv_query;

/* Fill q->codes, q->f32 and the scalars from query (dim finite floats).
 * q->codes and q->f32 must point at caller-owned arrays. */
void fv_query_prepare(const float *query, uint32_t dim, fv_query *q);

/* Relative slack on the double computation of a * s * dot. */
#define FV_BOUND_REL_SLACK 1e-12

/* [*ret_lo, *ret_hi] surely holds the float32 score (the dot_f32 kernel)
 * of the stored vector m whose int8 dot product with q->codes is dot. */
static inline void fv_bound(const fv_query *q, const fv_qmeta *m, int32_t dot, double *ret_lo,
			    double *ret_hi)
{
	double a = q->scale * (double)m->scale * (double)dot;
	double quant = q->qnorm * (double)m->err + q->qerr * (double)m->norm;
	double round = q->gamma * q->norm * (double)m->norm + q->abs_slack;
	double slack = quant + round + (a < 0 ? -a : a) * FV_BOUND_REL_SLACK;

	*ret_lo = a - slack;
	*ret_hi = a + slack;
}

/* One implementation of the two dot products. */
typedef struct fv_kernels {
	const char *name; /* "scalar" or "avx2" */
	/* Float32 dot product of two padded rows of stride floats (a multiple
	 * of FV_F32_CHUNK), in the fixed order described above. */
	float (*dot_f32)(const float *q, const float *v, size_t stride);
	/* out[i] = Q . row(i) for i < n, exact, where row(i) is
	 * codes + (idx ? idx[i] : i) * stride and stride is a multiple of
	 * FV_I8_CHUNK. */
	void (*dot_i8)(const int8_t *q, const int8_t *codes, size_t stride, const uint32_t *idx,
		       size_t n, int32_t *out);
} fv_kernels;

/* The portable kernels (any CPU). */
const fv_kernels *fv_kernels_scalar(void);
/* The AVX2 kernels, or NULL when this CPU (or build) has no AVX2. */
const fv_kernels *fv_kernels_avx2(void);
/* The fastest kernels this CPU runs. */
const fv_kernels *fv_kernels_best(void);

#endif
