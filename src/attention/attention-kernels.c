/* Kernels shared by the attention families: softmax rows with an overflow fallback,
 * regular (softmax) and Nyström attention of one head over a contiguous window, the
 * landmark kernel's pseudo-inverse and segment means. Q, K, V: w rows with row stride ld;
 * rows [r0, w) of a result go to out. */
#include "attention-private.h"
#include "linalg.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* Softmax of the w float scores @s of query @q against the keys @K (row stride ld).
 * Float scores overflow once |q|·|k| passes ~1e38 (tokens of ~1e19): such a row is
 * recomputed in double (@sd, w doubles), where the product of any two floats is
 * finite. Non-finite q or k still give NaN, which the encoder reports. */
void
cony_attn_softmax_scores (const float *q, const float *K, int ld, int w, int hd, float scale,
    float *s, double *sd)
{
  if (G_LIKELY (cony_all_finite (s, w))) {
    cony_softmax (s, w);
    return;
  }
  for (int i = 0; i < w; i++)
    sd[i] = scale * cony_dot_d (q, K + (gsize) i * ld, hd);
  cony_softmax_d (sd, w);
  for (int i = 0; i < w; i++)
    s[i] = (float) sd[i];
}

void
cony_attn_regular_head (const float *Q, const float *K, const float *V, int ld, int w, int r0,
    int hd, float scale, float *out, int ldo, float *S, double *Sd)
{
  for (int c0 = r0; c0 < w; c0 += REGULAR_ROW_CHUNK) {
    int rows = MIN (REGULAR_ROW_CHUNK, w - c0);
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, rows, w, hd, scale, Q + (gsize) c0 * ld,
        ld, K, ld, 0.0f, S, w);
    for (int i = 0; i < rows; i++)
      cony_attn_softmax_scores (Q + (gsize) (c0 + i) * ld, K, ld, w, hd, scale, S + (gsize) i * w,
          Sd);
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, w, 1.0f, S, w, V, ld, 0.0f,
        out + (gsize) (c0 - r0) * ldo, ldo);
  }
}

static gboolean
all_finite_d (const double *x, gsize n)
{
  for (gsize i = 0; i < n; i++)
    if (!isfinite (x[i]))
      return FALSE;
  return TRUE;
}

/* Row-softmax kernel of Ql (ml × hd) against Kl, then its pseudo-inverse. The kernel
 * is m×m and often ill-conditioned, so it is formed in double. FALSE, with @pinv all
 * NaN (so that every output using it is NaN and reported, never silently wrong), when
 * the landmarks are not finite, the SVD does not converge or the result is not finite;
 * a non-finite kernel never reaches LAPACK. */
gboolean
cony_attn_landmark_pinv (const ConyAttention *a, const float *Ql, const float *Kl, int ml,
    double *pinv)
{
  double G[ml * ml];
  for (int i = 0; i < ml; i++) {
    for (int j = 0; j < ml; j++)
      G[i * ml + j] = a->scale * cony_dot_d (Ql + (gsize) i * a->hd, Kl + (gsize) j * a->hd, a->hd);
    cony_softmax_d (G + i * ml, ml);
  }
  gsize mm = (gsize) ml * ml;
  gboolean ok = all_finite_d (G, mm);
  if (ok && a->cfg.pinv == CONY_PINV_ITERATIVE)
    cony_pinv_iterative (G, ml, a->cfg.pinv_iterations, pinv);
  else if (ok)
    ok = cony_pinv_exact (G, ml, pinv);
  if (ok && all_finite_d (pinv, mm))
    return TRUE;
  for (gsize i = 0; i < mm; i++)
    pinv[i] = NAN;
  return FALSE;
}

/* Nyström product for rows [r0, w): softmax(Q Klᵀ) · pinv · (softmax(Ql Kᵀ) V).
 * In double: pinv of an ill-conditioned kernel magnifies every rounding error, and all
 * of it is O(n·m·hd) anyway. @S holds (ml·w + 2·ml·hd + ml) doubles. */
void
cony_attn_nystrom_head (const ConyAttention *a, const float *Q, const float *K, const float *V,
    int ld, int w, int r0, const float *Ql, const float *Kl, int ml, const double *pinv, float *out,
    int ldo, double *S)
{
  int hd = a->hd;
  double *S3 = S;                     /* ml × w */
  double *K3V = S3 + (gsize) ml * w;  /* ml × hd */
  double *M = K3V + (gsize) ml * hd;  /* ml × hd */
  double *beta = M + (gsize) ml * hd; /* ml */
  for (int j = 0; j < ml; j++) {
    double *row = S3 + (gsize) j * w, *kv = K3V + (gsize) j * hd;
    for (int i = 0; i < w; i++)
      row[i] = a->scale * cony_dot_d (Ql + (gsize) j * hd, K + (gsize) i * ld, hd);
    cony_softmax_d (row, w);
    memset (kv, 0, sizeof (double) * hd);
    for (int i = 0; i < w; i++)
      for (int c = 0; c < hd; c++)
        kv[c] += row[i] * V[(gsize) i * ld + c];
  }
  for (int j = 0; j < ml; j++)
    for (int c = 0; c < hd; c++) {
      double acc = 0.0;
      for (int i = 0; i < ml; i++)
        acc += pinv[j * ml + i] * K3V[(gsize) i * hd + c];
      M[(gsize) j * hd + c] = acc;
    }
  for (int r = r0; r < w; r++) {
    for (int j = 0; j < ml; j++)
      beta[j] = a->scale * cony_dot_d (Q + (gsize) r * ld, Kl + (gsize) j * hd, hd);
    cony_softmax_d (beta, ml);
    float *o = out + (gsize) (r - r0) * ldo;
    for (int c = 0; c < hd; c++) {
      double acc = 0.0;
      for (int j = 0; j < ml; j++)
        acc += beta[j] * M[(gsize) j * hd + c];
      o[c] = (float) acc;
    }
  }
}

/* Means of m contiguous segments of @X (w rows, stride ld, hd columns); when
 * w mod m = r ≠ 0 the first r segments hold one token more. */
void
cony_attn_segment_means (const float *X, int ld, int w, int m, int hd, float *out)
{
  int base = w / m, extra = w % m, row = 0;
  for (int j = 0; j < m; j++) {
    int len = base + (j < extra);
    float *o = out + (gsize) j * hd;
    memset (o, 0, sizeof (float) * hd);
    for (int i = 0; i < len; i++, row++)
      for (int c = 0; c < hd; c++)
        o[c] += X[(gsize) row * ld + c];
    for (int c = 0; c < hd; c++)
      o[c] /= len;
  }
}
