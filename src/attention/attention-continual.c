/* The continual family: Continual Transformers' attention, CoSi (single output: the
 * newest queries against the kept keys and values) and CoRe (retroactive: every window
 * row a running sum that loses the evicted key and gains the new one). */
#include "attention-rowsum.h"

/* CoSi: the queries @Q (rows × d) against the window's keys and values. Window slots
 * 0..w−1 are exactly the window; their order does not matter. */
static void
continual_single_emit (ConyAttention *a, const float *Q, int rows)
{
  int w = cony_attn_window_fill (a), d = a->d;
  for (int r = 0; r < rows; r++)
    cony_attn_single_query (CONY_ATTN_QUERY_AUTO, Q + (gsize) r * d, a->ring_k, a->ring_v, d, w,
        a->heads, a->hd, a->scale, a->scratch, a->scratch_len, a->scratch_d,
        a->heads_out + (gsize) r * d);
}

/* A CoRe score. Added, removed and rebuilt terms of a key all come from this one
 * function, so a removed term is exactly the one that was added. */
static inline double
core_score (const ConyAttention *a, const float *q, const float *k)
{
  return a->scale * cony_dot_d (q, k, a->hd);
}

/* Rebuilds CoRe row @slot of head @h from the keys of window slots 0..w−1. */
static void
core_row_rebuild (ConyAttention *a, int h, int slot, int w)
{
  int d = a->d, hd = a->hd;
  double *s = a->scratch_d;
  const float *q = a->ring_q + (gsize) slot * d + h * hd;
  for (int i = 0; i < w; i++)
    s[i] = core_score (a, q, a->ring_k + (gsize) i * d + h * hd);
  rowsum_rebuild (row_at (a, h, slot), hd, TERMS_EXACT, s, 1, a->ring_v + h * hd, d, w, NULL, 0);
}

/* CoRe: every other window row loses the evicted key and gains the new one; the new
 * query's row is computed from scratch. */
static void
continual_retroactive_advance (ConyAttention *a)
{
  int n = a->n, d = a->d, hd = a->hd;
  int w = (int) MIN (a->t + 1, (guint64) n), p = (int) (a->t % n);
  gboolean evict = a->t >= (guint64) n;
  for (int h = 0; h < a->heads; h++) {
    const float *k_new = a->ring_k + (gsize) p * d + h * hd,
                *v_new = a->ring_v + (gsize) p * d + h * hd;
    const float *k_old = a->k_old + h * hd, *v_old = a->v_old + h * hd;
    for (int slot = 0; slot < w; slot++) {
      if (slot == p)
        continue;
      RowSum r = row_at (a, h, slot);
      const float *q = a->ring_q + (gsize) slot * d + h * hd;
      gboolean collapsed = FALSE;
      if (evict)
        collapsed = rowsum_remove (r, hd,
            term_exp (TERMS_EXACT, core_score (a, q, k_old) - *r.offset), v_old);
      rowsum_add (r, hd, core_score (a, q, k_new), v_new);
      if (collapsed)
        core_row_rebuild (a, h, slot, w);
    }
    core_row_rebuild (a, h, p, w); /* the new query's row, from scratch */
  }
}

/* The n retroactive rows, oldest first. */
static void
continual_retroactive_emit (ConyAttention *a)
{
  int d = a->d, hd = a->hd, w = cony_attn_window_fill (a),
      first = cony_attn_window_first_row (a, w);
  memset (a->heads_out, 0, sizeof (float) * first * d);
  for (int i = 0; i < w; i++) {
    int slot = cony_attn_window_slot (a, w, i);
    for (int h = 0; h < a->heads; h++) {
      double o[hd];
      rowsum_normalised (row_at (a, h, slot), hd, o);
      for (int c = 0; c < hd; c++)
        a->heads_out[(gsize) (first + i) * d + h * hd + c] = (float) o[c];
    }
  }
}

/* CoRe keeps its rows up to date per token; CoSi needs only the rings. */
void
cony_continual_advance (ConyAttention *a)
{
  if (a->cfg.retroactive)
    continual_retroactive_advance (a);
}

void
cony_continual_emit (ConyAttention *a, const float *Q, int rows)
{
  if (a->cfg.retroactive)
    continual_retroactive_emit (a);
  else
    continual_single_emit (a, Q, rows);
}

/* FLOPs per step (cony_regular_sda_flops' convention). */
double
cony_continual_sda_flops (const ConyAttentionConfig *c)
{
  double n = c->window, e = (double) c->d / c->heads;
  return c->heads
      * (c->retroactive ? (n - 1) * (4 * e + 4) + 3 * n * e + 3 * n : 2 * n * e + 3 * n);
}

double
cony_continual_paper_flops (const ConyAttentionConfig *c)
{
  double n = c->window, d = c->d;
  return c->retroactive ? 7 * n * d + 4 * n - 2 * d - 2 : 3 * n * d + 2 * n;
}
