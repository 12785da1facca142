/* The windowed family: regular, nystrom and nystrom-fixed attention recomputed over the
 * whole window at every step (the baselines the papers compare with), and the windowed
 * forms of the continual variants (cony_attention_forward_window). */
#include "attention-private.h"

#include <string.h>

/* Rows [r0, w) of regular softmax attention over a->win_q/k/v, every head. */
void
cony_regular_forward (ConyAttention *a, int w, int r0, float *out)
{
  int d = a->d, hd = a->hd;
  for (int h = 0; h < a->heads; h++)
    cony_attn_regular_head (a->win_q + h * hd, a->win_k + h * hd, a->win_v + h * hd, d, w, r0, hd,
        a->scale, out + h * hd, d, a->scratch, a->scratch_d);
}

/* Nyström with segment-means landmarks of the window; a window of at most m tokens is
 * its own landmarks, where Nyström is exact softmax attention. */
void
cony_nystrom_forward (ConyAttention *a, int w, int r0, float *out)
{
  int d = a->d, hd = a->hd, m = a->m;
  if (w <= m) {
    cony_regular_forward (a, w, r0, out);
    return;
  }
  for (int h = 0; h < a->heads; h++) {
    const float *Q = a->win_q + h * hd, *K = a->win_k + h * hd, *V = a->win_v + h * hd;
    float *Ql = a->scratch, *Kl = Ql + m * hd;
    double *P = a->scratch_d;
    cony_attn_segment_means (Q, d, w, m, hd, Ql);
    cony_attn_segment_means (K, d, w, m, hd, Kl);
    cony_attn_landmark_pinv (a, Ql, Kl, m, P);
    cony_attn_nystrom_head (a, Q, K, V, d, w, r0, Ql, Kl, m, P, out + h * hd, d, P + m * m);
  }
}

/* Nyström with the model's fixed landmarks; their kernel's pseudo-inverse was computed
 * once at creation. */
void
cony_nystrom_fixed_forward (ConyAttention *a, int w, int r0, float *out)
{
  int d = a->d, hd = a->hd, m = a->m;
  for (int h = 0; h < a->heads; h++) {
    gsize off = (gsize) h * m * hd;
    cony_attn_nystrom_head (a, a->win_q + h * hd, a->win_k + h * hd, a->win_v + h * hd, d, w, r0,
        a->lm_q + off, a->lm_k + off, m, a->pinv + (gsize) h * m * m, out + h * hd, d,
        a->scratch_d);
  }
}

/* Copies the window of the rings into win_q/k/v, oldest first; returns its length. */
static int
gather_window (ConyAttention *a)
{
  int w = cony_attn_window_fill (a);
  guint64 first = a->t - w;
  for (int i = 0; i < w; i++) {
    gsize slot = (first + i) % a->n, dst = (gsize) i * a->d, src = slot * a->d;
    memcpy (a->win_q + dst, a->ring_q + src, sizeof (float) * a->d);
    memcpy (a->win_k + dst, a->ring_k + src, sizeof (float) * a->d);
    memcpy (a->win_v + dst, a->ring_v + src, sizeof (float) * a->d);
  }
  return w;
}

/* Non-continual output: the whole window recomputed, every row, then the @rows newest
 * rows or all rows kept. */
void
cony_windowed_emit (ConyAttention *a, const float *Q, int rows)
{
  (void) Q; /* the queries are the window's own */
  int w = gather_window (a), d = a->d;
  if (a->cfg.retroactive) {
    int first = cony_attn_window_first_row (a, w);
    memset (a->heads_out, 0, sizeof (float) * first * d);
    a->info->forward (a, w, 0, a->heads_out + (gsize) first * d);
  } else {
    a->info->forward (a, w, 0, a->win_out);
    memcpy (a->heads_out, a->win_out + (gsize) (w - rows) * d, sizeof (float) * rows * d);
  }
}

/* FLOPs per step, counting a multiply-add, an exp or a division as one (the papers'
 * appendix convention); per head with head size e, window n, landmarks m. */
double
cony_regular_sda_flops (const ConyAttentionConfig *c)
{
  double n = c->window, e = (double) c->d / c->heads;
  return c->heads * (2 * n * n * e + 3 * n * n);
}

double
cony_nystrom_sda_flops (const ConyAttentionConfig *c)
{
  double n = c->window, e = (double) c->d / c->heads, m = c->landmarks;
  double pinv = 24 * m * m * m, landmark_kernel = m * m * e + 3 * m * m;
  return c->heads * (2 * n * e + landmark_kernel + pinv + 4 * n * m * e + 6 * n * m + m * m * e);
}

double
cony_nystrom_fixed_sda_flops (const ConyAttentionConfig *c)
{
  double n = c->window, e = (double) c->d / c->heads, m = c->landmarks;
  return c->heads * (4 * n * m * e + 6 * n * m + m * m * e);
}

/* The paper's appendix A formulas (SDA only, d = the whole embedding as one head). */
double
cony_regular_paper_flops (const ConyAttentionConfig *c)
{
  double n = c->window, d = c->d;
  return 2 * n * n * d + n * n + n * d + n;
}

double
cony_nystrom_paper_flops (const ConyAttentionConfig *c)
{
  double n = c->window, d = c->d, m = c->landmarks;
  return 4 * n * d * m + 2 * n * d + n + n * m * m + 2 * n * m + d * m * m + 24 * m * m * m
      + 22 * m * m + 2 * m;
}

double
cony_nystrom_fixed_paper_flops (const ConyAttentionConfig *c)
{
  double n = c->window, d = c->d, m = c->landmarks;
  return 4 * n * d * m + n * m * m + 2 * n * m + n + m;
}
