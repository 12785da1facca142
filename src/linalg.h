/* Small dense linear-algebra helpers shared by libcony (not public API). */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

/* In place: x[i] = exp(x[i] - max) / sum, stable for any finite input. */
void cony_softmax (float *x, int n);

/* Dot product of two float vectors. */
static inline float
cony_dot (const float *restrict a, const float *restrict b, int n)
{
  float s = 0.0f;
  for (int i = 0; i < n; i++)
    s += a[i] * b[i];
  return s;
}

/* Dot product of two float vectors accumulated in double, in four independent
 * partial sums (deterministic, and short enough for the compiler to vectorise). */
static inline double
cony_dot_d (const float *restrict a, const float *restrict b, int n)
{
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += (double) a[i] * b[i];
    s1 += (double) a[i + 1] * b[i + 1];
    s2 += (double) a[i + 2] * b[i + 2];
    s3 += (double) a[i + 3] * b[i + 3];
  }
  for (; i < n; i++)
    s0 += (double) a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

/* In place x[i] = exp(x[i]) for x[i] <= 88, to about 1e-7 relative (range reduction
 * by ln 2 and a degree-6 polynomial, Cephes' coefficients); arguments below -87 give
 * ~1e-38. Plain float arithmetic, so loops over it vectorise. */
void cony_exp_batch (float *x, int n);

/* In place, double precision: x[i] = exp(x[i] - max) / sum. */
void cony_softmax_d (double *x, int n);

/* Moore-Penrose pseudo-inverse of the m×m row-major matrix @a into @out, via SVD in
 * double precision; singular values below m·ε·σ_max count as zero. FALSE if the SVD
 * did not converge (out is then zeroed). */
gboolean cony_pinv_exact (const double *a, int m, double *out);

/* The Nyströmformer iteration (Razavi et al.): V0 = Aᵀ / (max col sum · max row sum of
 * |A|), then @iterations times V <- ¼ V (13I − AV (15I − AV (7I − AV))). Double inside. */
void cony_pinv_iterative (const double *a, int m, int iterations, double *out);

G_END_DECLS
