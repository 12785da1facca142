/* Small dense linear-algebra helpers shared by libcony (not public API). */
#pragma once
#include <glib.h>
#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

G_BEGIN_DECLS

/* In place: x[i] = exp(x[i] - max) / sum, stable for any finite input. */
void cony_softmax (float *x, int n);

/* TRUE when none of the @n values is NaN or infinite. */
static inline gboolean
cony_all_finite (const float *x, gsize n)
{
  for (gsize i = 0; i < n; i++)
    if (!isfinite (x[i]))
      return FALSE;
  return TRUE;
}

/* Dot product of two float vectors. */
static inline float
cony_dot (const float *restrict a, const float *restrict b, int n)
{
  float s = 0.0f;
  for (int i = 0; i < n; i++)
    s += a[i] * b[i];
  return s;
}

/* Dot product of two float vectors accumulated in double, in two lanes (even and odd
 * indices) added at the end: deterministic, and with SSE2 one double vector. */
static inline double
cony_dot_d (const float *restrict a, const float *restrict b, int n)
{
  int i = 0;
#if defined(__SSE2__)
  __m128d acc = _mm_setzero_pd ();
  for (; i + 2 <= n; i += 2) {
    __m128d x = _mm_cvtps_pd (_mm_castsi128_ps (_mm_loadl_epi64 ((const __m128i *) (a + i))));
    __m128d y = _mm_cvtps_pd (_mm_castsi128_ps (_mm_loadl_epi64 ((const __m128i *) (b + i))));
    acc = _mm_add_pd (acc, _mm_mul_pd (x, y));
  }
  double lanes[2];
  _mm_storeu_pd (lanes, acc);
  double s0 = lanes[0], s1 = lanes[1];
#else
  double s0 = 0.0, s1 = 0.0;
  for (; i + 2 <= n; i += 2) {
    s0 += (double) a[i] * (double) b[i];
    s1 += (double) a[i + 1] * (double) b[i + 1];
  }
#endif
  if (i < n)
    s0 += (double) a[i] * (double) b[i];
  return s0 + s1;
}

/* In place x[i] = exp(x[i]) for x[i] <= 88, to about 1e-7 relative (range reduction
 * by ln 2 and a degree-6 polynomial, Cephes' coefficients); arguments below -87
 * (-inf included) give ~1e-38, above 88 (+inf included) exp(88); NaN stays NaN. Plain
 * float arithmetic, so loops over it vectorise. */
void cony_exp_batch (float *x, int n);

/* Its constants, for SIMD copies of the same operations (attention-query.c): Cephes'
 * expf, k = round(v / ln 2) by the 1.5·2^23 trick, r = v − k·ln 2 in two parts, a
 * degree-6 polynomial in r, times 2^k built in the exponent bits. */
#define CONY_EXP_LO -87.0f
#define CONY_EXP_HI 88.0f
#define CONY_EXP_LOG2E 1.44269504088896341f
#define CONY_EXP_ROUND 12582912.0f
#define CONY_EXP_LN2_HI 0.693359375f
#define CONY_EXP_LN2_LO -2.12194440e-4f
extern const float cony_exp_poly[6];

/* In place, double precision: x[i] = exp(x[i] - max) / sum. */
void cony_softmax_d (double *x, int n);

/* Singular values below this fraction of the largest count as zero. The kernels come
 * from float32 activations: a singular value near double epsilon relative to the
 * largest is noise, and inverting it would multiply 1e-16 differences by 1e16. The
 * Python reference (training/conytrain/ref/attention.py, PINV_RTOL) uses the same rule. */
#define CONY_PINV_RTOL 1e-10

/* Moore-Penrose pseudo-inverse of the m×m row-major matrix @a into @out, via SVD in
 * double precision (singular values below CONY_PINV_RTOL·σ_max count as zero). FALSE
 * if the SVD did not converge (out is then zeroed). */
gboolean cony_pinv_exact (const double *a, int m, double *out);

/* The Nyströmformer iteration (Razavi et al.): V0 = Aᵀ / (max col sum · max row sum of
 * |A|), then @iterations times V <- ¼ V (13I − AV (15I − AV (7I − AV))). Double inside. */
void cony_pinv_iterative (const double *a, int m, int iterations, double *out);

G_END_DECLS
