/* SPDX-License-Identifier: MIT */
#include "fv_kernel.h"

#include <math.h>
#include <string.h>

/* The float32 dot product must be computed exactly as written: no fused
 * multiply-add contraction (meson passes -ffp-contract=off; -std=c11 also
 * implies it for GCC). */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FV_HAVE_AVX2_BUILD 1
#include <immintrin.h>
#else
#define FV_HAVE_AVX2_BUILD 0
#endif

#define FV_LANES 8u              /* floats per accumulator */
#define FV_UNIT_ROUNDOFF (FLT_EPSILON / 2) /* 2^-24 */
#define FV_GAMMA_TERMS 2u        /* products and the final additions */
#define FV_GAMMA_MARGIN 1.01     /* covers the 1 / (1 - n u) of gamma_n */
#define FV_NORM_MARGIN (1.0 + 1e-9) /* rounds the double norms up */

/* ---- quantization ----------------------------------------------------- */

/* x (>= 0), made a little larger, as a float that is >= x. */
static float float_up(double x)
{
	float f;

	x *= FV_NORM_MARGIN;
	f = (float)x;
	if ((double)f < x)
		f = nextafterf(f, INFINITY);
	return f;
}

/* max |v[j]| / 127 as a float, or 0 when that would be 0 or subnormal
 * (the codes are then all 0 and the error bound is the whole norm). */
static float code_scale(const float *v, uint32_t dim)
{
	float maxabs = 0.0f, s;

	for (uint32_t j = 0; j < dim; j++) {
		float a = fabsf(v[j]);
		if (a > maxabs)
			maxabs = a;
	}
	s = maxabs / (float)FV_I8_MAX;
	return s >= FLT_MIN ? s : 0.0f;
}

/* x / s rounded to the nearest code (any rounding would do: the bounds
 * are computed from the codes actually chosen). inv is 1 / s, or 0. */
static int8_t code_of(float x, float inv)
{
	float y = x * inv;
	int c = (int)(y + (y >= 0.0f ? 0.5f : -0.5f));

	if (c > FV_I8_MAX)
		c = FV_I8_MAX;
	if (c < -FV_I8_MAX)
		c = -FV_I8_MAX;
	return (int8_t)c;
}

/* (v - s codes)^2 and v^2 summed in double, in four independent chains
 * (no long dependency chain; their rounding is far inside FV_NORM_MARGIN). */
static void quant_sums(const float *v, const int8_t *codes, uint32_t dim, float s,
		       double *ret_e2, double *ret_n2)
{
	double e0 = 0, e1 = 0, e2 = 0, e3 = 0, n0 = 0, n1 = 0, n2 = 0, n3 = 0;
	uint32_t j = 0;

#define FV_QSUM(e, n, k)                                                   \
	do {                                                               \
		/* (double)s * code is exact (24 + 8 bits). */             \
		double x_ = (double)v[j + (k)];                             \
		double d_ = x_ - (double)s * (double)codes[j + (k)];        \
		e += d_ * d_;                                               \
		n += x_ * x_;                                               \
	} while (0)
	for (; j + 4 <= dim; j += 4) {
		FV_QSUM(e0, n0, 0);
		FV_QSUM(e1, n1, 1);
		FV_QSUM(e2, n2, 2);
		FV_QSUM(e3, n3, 3);
	}
	for (; j < dim; j++)
		FV_QSUM(e0, n0, 0);
#undef FV_QSUM
	*ret_e2 = (e0 + e1) + (e2 + e3);
	*ret_n2 = (n0 + n1) + (n2 + n3);
}

void fv_quantize(const float *v, uint32_t dim, int8_t *codes, fv_qmeta *ret_meta)
{
	size_t stride = fv_i8_stride(dim);
	float s = code_scale(v, dim), inv = s != 0.0f ? 1.0f / s : 0.0f;
	double e2, n2;

	for (uint32_t j = 0; j < dim; j++)
		codes[j] = code_of(v[j], inv);
	memset(codes + dim, 0, stride - dim);
	quant_sums(v, codes, dim, s, &e2, &n2);
	ret_meta->scale = s;
	ret_meta->err = float_up(sqrt(e2));
	ret_meta->norm = float_up(sqrt(n2));
}

void fv_query_prepare(const float *query, uint32_t dim, fv_query *q)
{
	size_t i8_stride = fv_i8_stride(dim), f32_stride = fv_f32_stride(dim);
	float a = code_scale(query, dim), inv = a != 0.0f ? 1.0f / a : 0.0f;
	double qn2 = 0.0, e2 = 0.0, n2 = 0.0;

	for (uint32_t j = 0; j < dim; j++) {
		int8_t c = code_of(query[j], inv);
		double aq = (double)a * (double)c;
		double d = (double)query[j] - aq;
		q->codes[j] = c;
		q->f32[j] = query[j];
		qn2 += aq * aq;
		e2 += d * d;
		n2 += (double)query[j] * (double)query[j];
	}
	memset(q->codes + dim, 0, i8_stride - dim);
	for (size_t j = dim; j < f32_stride; j++)
		q->f32[j] = 0.0f;
	q->scale = a;
	q->qnorm = sqrt(qn2) * FV_NORM_MARGIN;
	q->qerr = sqrt(e2) * FV_NORM_MARGIN;
	q->norm = sqrt(n2) * FV_NORM_MARGIN;
	/* |fl(sum) - sum| <= gamma_m * sum |q_j v_j| <= gamma_m ||q|| ||v||
	 * for any summation order of depth m <= stride + 1. */
	q->gamma = (double)(f32_stride + FV_GAMMA_TERMS) * FV_UNIT_ROUNDOFF * FV_GAMMA_MARGIN;
	/* Products that underflow lose at most FLT_MIN each. */
	q->abs_slack = (double)(f32_stride + FV_GAMMA_TERMS) * FLT_MIN;
}

/* ---- scalar kernels --------------------------------------------------- */

static float dot_f32_scalar(const float *q, const float *v, size_t stride)
{
	float a0[FV_LANES] = { 0 }, a1[FV_LANES] = { 0 }, s[FV_LANES];

	for (size_t c = 0; c < stride; c += FV_F32_CHUNK) {
		for (unsigned l = 0; l < FV_LANES; l++) {
			float p0 = q[c + l] * v[c + l];
			float p1 = q[c + FV_LANES + l] * v[c + FV_LANES + l];
			a0[l] = a0[l] + p0;
			a1[l] = a1[l] + p1;
		}
	}
	for (unsigned l = 0; l < FV_LANES; l++)
		s[l] = a0[l] + a1[l];
	/* The AVX2 reduction: halves, then pairs, then the last two. */
	{
		float t0 = s[0] + s[4], t1 = s[1] + s[5], t2 = s[2] + s[6], t3 = s[3] + s[7];
		return (t0 + t2) + (t1 + t3);
	}
}

static void dot_i8_scalar(const int8_t *q, const int8_t *codes, size_t stride,
			  const uint32_t *idx, size_t n, int32_t *out)
{
	for (size_t i = 0; i < n; i++) {
		const int8_t *row = codes + (idx ? idx[i] : i) * stride;
		int32_t s = 0;
		for (size_t j = 0; j < stride; j++)
			s += (int32_t)q[j] * (int32_t)row[j];
		out[i] = s;
	}
}

static const fv_kernels scalar_kernels = {
	.name = "scalar",
	.dot_f32 = dot_f32_scalar,
	.dot_i8 = dot_i8_scalar,
};

const fv_kernels *fv_kernels_scalar(void)
{
	return &scalar_kernels;
}

/* ---- AVX2 kernels ----------------------------------------------------- */

#if FV_HAVE_AVX2_BUILD

#define FV_AVX2 __attribute__((target("avx2")))
#define FV_I8_ROWS 4u /* rows scored together: four independent chains */

FV_AVX2 static float dot_f32_avx2(const float *q, const float *v, size_t stride)
{
	__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), s;
	__m128 t, u;

	for (size_t c = 0; c < stride; c += FV_F32_CHUNK) {
		__m256 p0 = _mm256_mul_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(v + c));
		__m256 p1 = _mm256_mul_ps(_mm256_loadu_ps(q + c + FV_LANES),
					  _mm256_loadu_ps(v + c + FV_LANES));
		a0 = _mm256_add_ps(a0, p0);
		a1 = _mm256_add_ps(a1, p1);
	}
	s = _mm256_add_ps(a0, a1);
	t = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1)); /* s[l] + s[l+4] */
	u = _mm_add_ps(t, _mm_movehl_ps(t, t));                               /* t0+t2, t1+t3 */
	return _mm_cvtss_f32(_mm_add_ss(u, _mm_shuffle_ps(u, u, 1)));
}

FV_AVX2 static inline __m256i i8_step(__m256i acc, __m256i qv, const int8_t *p, __m256i ones)
{
	__m256i c = _mm256_loadu_si256((const __m256i *)(const void *)p);
	/* |c| * (q * sign(c)) = q * c; pair sums fit in int16 (2 * 127 * 127). */
	__m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(c), _mm256_sign_epi8(qv, c));
	return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
}

FV_AVX2 static inline int32_t i8_hsum(__m256i v)
{
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
	return _mm_cvtsi128_si32(s);
}

FV_AVX2 static void dot_i8_avx2(const int8_t *q, const int8_t *codes, size_t stride,
				const uint32_t *idx, size_t n, int32_t *out)
{
	const __m256i ones = _mm256_set1_epi16(1);
	size_t i = 0;

	for (; i + FV_I8_ROWS <= n; i += FV_I8_ROWS) {
		const int8_t *r0 = codes + (idx ? idx[i] : i) * stride;
		const int8_t *r1 = codes + (idx ? idx[i + 1] : i + 1) * stride;
		const int8_t *r2 = codes + (idx ? idx[i + 2] : i + 2) * stride;
		const int8_t *r3 = codes + (idx ? idx[i + 3] : i + 3) * stride;
		__m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;

		for (size_t j = 0; j < stride; j += FV_I8_CHUNK) {
			__m256i qv = _mm256_loadu_si256((const __m256i *)(const void *)(q + j));
			s0 = i8_step(s0, qv, r0 + j, ones);
			s1 = i8_step(s1, qv, r1 + j, ones);
			s2 = i8_step(s2, qv, r2 + j, ones);
			s3 = i8_step(s3, qv, r3 + j, ones);
		}
		out[i] = i8_hsum(s0);
		out[i + 1] = i8_hsum(s1);
		out[i + 2] = i8_hsum(s2);
		out[i + 3] = i8_hsum(s3);
	}
	for (; i < n; i++) {
		const int8_t *r = codes + (idx ? idx[i] : i) * stride;
		__m256i s = _mm256_setzero_si256();
		for (size_t j = 0; j < stride; j += FV_I8_CHUNK)
			s = i8_step(s, _mm256_loadu_si256((const __m256i *)(const void *)(q + j)),
				    r + j, ones);
		out[i] = i8_hsum(s);
	}
}

static const fv_kernels avx2_kernels = {
	.name = "avx2",
	.dot_f32 = dot_f32_avx2,
	.dot_i8 = dot_i8_avx2,
};

const fv_kernels *fv_kernels_avx2(void)
{
	return __builtin_cpu_supports("avx2") ? &avx2_kernels : NULL;
}

#else

const fv_kernels *fv_kernels_avx2(void)
{
	return NULL;
}

#endif

const fv_kernels *fv_kernels_best(void)
{
	const fv_kernels *k = fv_kernels_avx2();
	return k ? k : fv_kernels_scalar();
}
