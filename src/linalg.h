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

/* Dot product of two float vectors accumulated in double. */
static inline double
cony_dot_d (const float *restrict a, const float *restrict b, int n)
{
  double s = 0.0;
  for (int i = 0; i < n; i++)
    s += (double) a[i] * b[i];
  return s;
}

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
