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

void
cony_exp_batch (float *x, int n)
{
  for (int i = 0; i < n; i++) {
    float v = x[i] < -87.0f ? -87.0f : (x[i] > 88.0f ? 88.0f : x[i]);
    /* k = round(v / ln 2) with the 1.5·2^23 trick; r = v − k·ln 2 in two parts. */
    float k = (v * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = v - k * 0.693359375f + k * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union { gint32 i; float f; } two_k = { .i = ((gint32) k + 127) << 23 };
    x[i] = p * two_k.f;
  }
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
  /* m is the number of landmarks: tiny, so plain arrays on the stack are fine. */
  double A[m * m], U[m * m], VT[m * m], S[m], superb[m > 1 ? m - 1 : 1];
  for (int i = 0; i < m * m; i++)
    A[i] = a[i];
  lapack_int info = LAPACKE_dgesvd (LAPACK_ROW_MAJOR, 'A', 'A', m, m, A, m, S, U, m, VT, m, superb);
  if (info != 0) {
    memset (out, 0, sizeof (double) * m * m);
    return FALSE;
  }
  double cutoff = m * DBL_EPSILON * S[0];
  /* pinv = V · diag(1/s) · Uᵀ */
  for (int i = 0; i < m; i++)
    for (int j = 0; j < m; j++) {
      double s = 0.0;
      for (int k = 0; k < m; k++)
        if (S[k] > cutoff)
          s += VT[k * m + i] * U[j * m + k] / S[k];
      out[i * m + j] = s;
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
    shifted_identity_minus (AV, 7.0, m, T1);   /* 7I − AV */
    matmul_d (AV, T1, m, T2);                  /* AV(7I − AV) */
    shifted_identity_minus (T2, 15.0, m, T1);  /* 15I − AV(7I − AV) */
    matmul_d (AV, T1, m, T2);                  /* AV(15I − ...) */
    shifted_identity_minus (T2, 13.0, m, T1);  /* 13I − ... */
    matmul_d (V, T1, m, T2);
    for (int i = 0; i < m * m; i++)
      V[i] = 0.25 * T2[i];
  }
  for (int i = 0; i < m * m; i++)
    out[i] = V[i];
}
