#include "linalg.h"

#include <float.h>
#include <lapacke.h>
#include <math.h>
#include <string.h>

void
cony_softmax (float *x, int n)
{
  float max = x[0];
  for (int i = 1; i < n; i++)
    max = fmaxf (max, x[i]);
  float sum = 0.0f;
  for (int i = 0; i < n; i++) {
    x[i] = expf (x[i] - max);
    sum += x[i];
  }
  float inv = 1.0f / sum;
  for (int i = 0; i < n; i++)
    x[i] *= inv;
}

const float cony_exp_poly[6] = { 1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
  4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f };
#define EXP_LO CONY_EXP_LO
#define EXP_HI CONY_EXP_HI
#define EXP_LOG2E CONY_EXP_LOG2E
#define EXP_ROUND CONY_EXP_ROUND
#define EXP_LN2_HI CONY_EXP_LN2_HI
#define EXP_LN2_LO CONY_EXP_LN2_LO
#define exp_poly cony_exp_poly

/* The clamp is written as SSE's max/min behave: a NaN becomes EXP_LO, so k is always a
 * small integer (converting NaN or a huge k to int would be undefined behaviour); the
 * NaN itself is handed back at the end. */
static inline float
exp_one (float x)
{
  float v = x > EXP_LO ? x : EXP_LO;
  v = v < EXP_HI ? v : EXP_HI;
  float k = (v * EXP_LOG2E + EXP_ROUND) - EXP_ROUND;
  float r = v - k * EXP_LN2_HI - k * EXP_LN2_LO;
  float p = exp_poly[0];
  for (int i = 1; i < 6; i++)
    p = p * r + exp_poly[i];
  p = p * r * r + r + 1.0f;
  /* k is in [-126, 127]: the biased exponent is positive, the shift well defined */
  union {
    guint32 i;
    float f;
  } two_k = { .i = (guint32) ((gint32) k + 127) << 23 };
  return isnan (x) ? x : p * two_k.f;
}

void
cony_exp_batch (float *x, int n)
{
  int i = 0;
#if defined(__SSE2__)
  /* The same operations four at a time (IEEE single precision either way, so the
   * results equal exp_one()'s bit for bit). */
  for (; i + 4 <= n; i += 4) {
    __m128 in = _mm_loadu_ps (x + i);
    __m128 v = _mm_min_ps (_mm_max_ps (in, _mm_set1_ps (EXP_LO)), _mm_set1_ps (EXP_HI));
    __m128 k = _mm_sub_ps (_mm_add_ps (_mm_mul_ps (v, _mm_set1_ps (EXP_LOG2E)),
                               _mm_set1_ps (EXP_ROUND)),
        _mm_set1_ps (EXP_ROUND));
    __m128 r = _mm_sub_ps (_mm_sub_ps (v, _mm_mul_ps (k, _mm_set1_ps (EXP_LN2_HI))),
        _mm_mul_ps (k, _mm_set1_ps (EXP_LN2_LO)));
    __m128 p = _mm_set1_ps (exp_poly[0]);
    for (int j = 1; j < 6; j++)
      p = _mm_add_ps (_mm_mul_ps (p, r), _mm_set1_ps (exp_poly[j]));
    p = _mm_add_ps (_mm_add_ps (_mm_mul_ps (_mm_mul_ps (p, r), r), r), _mm_set1_ps (1.0f));
    __m128i e = _mm_slli_epi32 (_mm_add_epi32 (_mm_cvttps_epi32 (k), _mm_set1_epi32 (127)), 23);
    __m128 nan = _mm_cmpunord_ps (in, in); /* NaN in, NaN out, as exp_one() */
    __m128 y = _mm_mul_ps (p, _mm_castsi128_ps (e));
    _mm_storeu_ps (x + i, _mm_or_ps (_mm_and_ps (nan, in), _mm_andnot_ps (nan, y)));
  }
#endif
  for (; i < n; i++)
    x[i] = exp_one (x[i]);
}

void
cony_softmax_d (double *x, int n)
{
  double max = x[0], sum = 0.0;
  for (int i = 1; i < n; i++)
    max = fmax (max, x[i]);
  for (int i = 0; i < n; i++)
    sum += (x[i] = exp (x[i] - max));
  for (int i = 0; i < n; i++)
    x[i] /= sum;
}

gboolean
cony_pinv_exact (const double *a, int m, double *out)
{
  /* m is the number of landmarks: tiny, so every array lives on the stack and the
   * step path never allocates. The row-major @a read as column-major is B = Aᵀ; with
   * B = U S Vᵀ, A⁺ = U S⁺ Vᵀ. The column-major _work call goes straight to LAPACK
   * (the row-major one would allocate a transposed copy). */
  int lwork = 8 * m + 64;
  double B[m * m], U[m * m], VT[m * m], S[m], work[lwork];
  memcpy (B, a, sizeof (double) * m * m);
  lapack_int info = LAPACKE_dgesvd_work (LAPACK_COL_MAJOR, 'A', 'A', m, m, B, m, S, U, m, VT, m,
      work, lwork);
  if (info != 0) {
    memset (out, 0, sizeof (double) * m * m);
    return FALSE;
  }
  double cutoff = CONY_PINV_RTOL * S[0];
  for (int i = 0; i < m; i++)
    for (int j = 0; j < m; j++) {
      double sum = 0.0;
      for (int k = 0; k < m; k++)
        if (S[k] > cutoff)
          sum += U[k * m + i] / S[k] * VT[j * m + k];
      out[i * m + j] = sum;
    }
  return TRUE;
}

static void
matmul_d (const double *a, const double *b, int m, double *out)
{
  for (int i = 0; i < m; i++)
    for (int j = 0; j < m; j++) {
      double s = 0.0;
      for (int k = 0; k < m; k++)
        s += a[i * m + k] * b[k * m + j];
      out[i * m + j] = s;
    }
}

/* out = c·I − x */
static void
shifted_identity_minus (const double *x, double c, int m, double *out)
{
  for (int i = 0; i < m * m; i++)
    out[i] = -x[i];
  for (int i = 0; i < m; i++)
    out[i * m + i] += c;
}

void
cony_pinv_iterative (const double *a, int m, int iterations, double *out)
{
  double A[m * m], V[m * m], AV[m * m], T1[m * m], T2[m * m];
  double max_col = 0.0, max_row = 0.0;
  for (int i = 0; i < m; i++) {
    double row = 0.0, col = 0.0;
    for (int j = 0; j < m; j++) {
      row += fabs (a[i * m + j]);
      col += fabs (a[j * m + i]);
    }
    max_row = MAX (max_row, row);
    max_col = MAX (max_col, col);
  }
  double scale = 1.0 / (max_col * max_row);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < m; j++) {
      A[i * m + j] = a[i * m + j];
      V[i * m + j] = a[j * m + i] * scale;
    }
  for (int it = 0; it < iterations; it++) {
    matmul_d (A, V, m, AV);
    shifted_identity_minus (AV, 7.0, m, T1);  /* 7I − AV */
    matmul_d (AV, T1, m, T2);                 /* AV(7I − AV) */
    shifted_identity_minus (T2, 15.0, m, T1); /* 15I − AV(7I − AV) */
    matmul_d (AV, T1, m, T2);                 /* AV(15I − ...) */
    shifted_identity_minus (T2, 13.0, m, T1); /* 13I − ... */
    matmul_d (V, T1, m, T2);
    for (int i = 0; i < m * m; i++)
      V[i] = 0.25 * T2[i];
  }
  for (int i = 0; i < m * m; i++)
    out[i] = V[i];
}
