/* The Continual Nyström family (CoNy paper IV-A, IV-B): cony (continual landmarks, the
 * segment means of the stream) and cony-fixed (the model's landmarks). Landmark rows
 * φ(Δ)_j, (ΔV)_j are running sums over the window's keys; retroactive layers keep a
 * B_φ·Γ⁺ row per query. */
#include "attention-rowsum.h"

/* Default steps between exact rebuilds of rows that live for the whole stream. */
#define DEFAULT_RESYNC_WINDOWS 64

/* Runs EXPR with HD a compile-time constant for the common head sizes, so that the
 * short per-head loops of the hot path unroll; other sizes take the general path. */
/* clang-format off */
#define WITH_CONST_HEAD_DIM(hd, EXPR)                    \
  do {                                                   \
    switch (hd) {                                        \
      case 8: { const int HD = 8; EXPR; } break;         \
      case 12: { const int HD = 12; EXPR; } break;       \
      case 16: { const int HD = 16; EXPR; } break;       \
      case 32: { const int HD = 32; EXPR; } break;       \
      case 64: { const int HD = 64; EXPR; } break;       \
      default: { const int HD = (hd); EXPR; } break;     \
    }                                                    \
  } while (0)
/* clang-format on */

/* Landmark rows φ(Δ)_j, (ΔV)_j kept as running sums over the
 * window's keys; B_φ·Γ⁺ rows per query. */

static gsize
lm_index (const ConyAttention *a, int slot, int h, int j)
{
  return ((gsize) slot * a->heads + h) * a->m + j;
}

/* The score of key @k (head part) against landmark @j of head @h. */
static G_ALWAYS_INLINE inline double
cony_key_score (const ConyAttention *a, int h, int j, const float *k, const int hd)
{
  return a->scale * cony_dot_d (a->lm_q + ((gsize) h * a->m + j) * hd, k, hd);
}

/* Scores of every window key against landmark @j of head @h, then the row rebuilt.
 * Fixed landmarks keep no key window but each key's scores, which never go stale;
 * continual landmarks keep the key window and score it into scratch. */
static void
cony_landmark_row_rebuild (ConyAttention *a, int h, int j, int w)
{
  int d = a->d, hd = a->hd, stride = 1;
  const double *s = a->scratch_d;
  if (a->ring_k)
    for (int slot = 0; slot < w; slot++)
      a->scratch_d[slot] = cony_key_score (a, h, j, a->ring_k + (gsize) slot * d + h * hd, hd);
  else
    s = a->sk + lm_index (a, 0, h, j), stride = a->heads * a->m;
  rowsum_rebuild (row_at (a, h, j), hd, TERMS_STORED, s, stride, a->ring_v + h * hd, d, w, NULL, 0);
}

/* First half of r = softmax(q·K̃ᵀ) · Γ⁺ for query @q of head @h: the softmax's
 * exponent arguments, written to @e. */
static G_ALWAYS_INLINE inline void
cony_query_args_hd (const ConyAttention *a, int h, const float *q, float *e, const int hd)
{
  double beta[a->ml], max = -INFINITY;
  for (int j = 0; j < a->ml; j++) {
    beta[j] = a->scale * cony_dot_d (q, a->lm_k + ((gsize) h * a->m + j) * hd, hd);
    max = beta[j] > max ? beta[j] : max;
  }
  for (int j = 0; j < a->ml; j++)
    e[j] = (float) (beta[j] - max);
}

/* Second half: r = softmax · Γ⁺ from the exponentials @e of the first. */
static G_ALWAYS_INLINE inline void
cony_query_finish (const ConyAttention *a, int h, const float *e, double *r)
{
  int ml = a->ml;
  double beta[ml], sum = 0.0;
  for (int j = 0; j < ml; j++)
    sum += e[j];
  for (int j = 0; j < ml; j++)
    beta[j] = e[j] / sum;
  const double *P = a->pinv + (gsize) h * a->m * a->m;
  for (int j = 0; j < ml; j++) {
    double s = 0.0;
    for (int i = 0; i < ml; i++)
      s += beta[i] * P[i * ml + j];
    r[j] = s;
  }
}

/* r = softmax(q·K̃ᵀ) · Γ⁺ for query @q of head @h. */
static void
cony_query_row (const ConyAttention *a, int h, const float *q, double *r)
{
  float e[a->ml];
  cony_query_args_hd (a, h, q, e, a->hd);
  cony_exp_batch (e, a->ml);
  cony_query_finish (a, h, e, r);
}

static void
cony_refresh_query_rows (ConyAttention *a, int w)
{
  for (int slot = 0; slot < w; slot++)
    for (int h = 0; h < a->heads; h++)
      cony_query_row (a, h, a->ring_q + (gsize) slot * a->d + h * a->hd,
          a->rcache + lm_index (a, slot, h, 0));
}

/* Everything from the window and the current landmarks: the start of a stream,
 * periodic resynchronisation, and the cony warm-up. */
static void
cony_rebuild_all (ConyAttention *a, int w)
{
  for (int h = 0; h < a->heads; h++) {
    gsize off = (gsize) h * a->m * a->hd;
    if (a->cfg.variant == CONY_ATTENTION_CONY)
      cony_attn_landmark_pinv (a, a->lm_q + off, a->lm_k + off, a->ml,
          a->pinv + (gsize) h * a->m * a->m);
    for (int j = 0; j < a->ml; j++)
      cony_landmark_row_rebuild (a, h, j, w);
  }
  /* Query rows are computed directly, never summed: with fixed landmarks they stay
   * exact (and their query window is not kept). */
  if (a->cfg.retroactive && a->cfg.variant == CONY_ATTENTION_CONY)
    cony_refresh_query_rows (a, w);
  a->steps_since_resync = 0;
}

static int
segment_length (const ConyAttention *a, guint64 index)
{
  return a->n / a->m + ((int) (index % a->m) < a->n % a->m);
}

/* Adds this step's q and k to the current segment; TRUE when the segment completes
 * (its means then become landmark slot seg_index mod m). During warm-up the
 * incomplete segment is a landmark too (docs/attention.md). */
static gboolean
cony_segment_push (ConyAttention *a)
{
  int d = a->d;
  for (int i = 0; i < d; i++) {
    a->seg_q[i] += a->qkv[i];
    a->seg_k[i] += a->qkv[d + i];
  }
  a->seg_count++;
  gboolean complete = a->seg_count == segment_length (a, a->seg_index);
  gboolean warm_up = a->t < (guint64) a->n - 1;
  if (complete || warm_up) {
    int slot = (int) (a->seg_index % a->m);
    for (int h = 0; h < a->heads; h++) {
      gsize off = ((gsize) h * a->m + slot) * a->hd;
      for (int c = 0; c < a->hd; c++) {
        a->lm_q[off + c] = (float) (a->seg_q[h * a->hd + c] / a->seg_count);
        a->lm_k[off + c] = (float) (a->seg_k[h * a->hd + c] / a->seg_count);
      }
    }
    if (a->t < (guint64) a->n) /* up to and including t = n−1, when the m-th completes */
      a->ml = (int) a->seg_index + 1;
  }
  if (complete) {
    memset (a->seg_q, 0, sizeof (double) * d);
    memset (a->seg_k, 0, sizeof (double) * d);
    a->seg_count = 0;
    a->seg_index++;
  }
  return complete;
}

/* First half of a row update: the new key's score against each landmark of head @h,
 * the row offsets moved if needed, and the exponent arguments of the new term written
 * to @arg, those of the evicted key's term (its stored score) to @arg_old. */
static G_ALWAYS_INLINE inline void
cony_score_head (ConyAttention *a, int h, int p, gboolean evict, float *arg, float *arg_old,
    const int hd)
{
  const float *k_new = a->qkv + a->d + h * hd, *k_old = a->k_old + h * hd;
  for (int j = 0; j < a->ml; j++) {
    RowSum r = row_at (a, h, j);
    double s = cony_key_score (a, h, j, k_new, hd);
    rowsum_make_room (r, hd, s);
    /* The leaving key's score: stored (fixed landmarks) or recomputed from the saved
     * key, bit for bit the one its term was made from (same landmark, same key). */
    double *stored = a->sk ? a->sk + lm_index (a, p, h, j) : NULL;
    if (evict)
      arg_old[j] = (float) ((stored ? *stored : cony_key_score (a, h, j, k_old, hd)) - *r.offset);
    if (stored)
      *stored = s;
    arg[j] = (float) (s - *r.offset);
  }
}

/* Second half: each row loses the evicted token's term (@e_old) and gains the new one
 * (@e), in one pass; a collapsed row is rebuilt. */
static G_ALWAYS_INLINE inline void
cony_apply_head (ConyAttention *a, int h, int w, gboolean evict, int skip, const float *e,
    const float *e_old, const int hd)
{
  const float *v_new = a->qkv + 2 * a->d + h * hd, *v_old = a->v_old + h * hd;
  for (int j = 0; j < a->ml; j++) {
    if (j == skip)
      continue;
    RowSum r = row_at (a, h, j);
    gboolean collapsed = evict && rowsum_remove (r, hd, e_old[j], v_old);
    rowsum_add_term (r, hd, e[j], v_new);
    if (collapsed)
      cony_landmark_row_rebuild (a, h, j, w);
  }
}

/* Subtracts the evicted key, adds the new one, for every landmark row but @skip.
 * The evicted key's term is recomputed from its stored score rather than stored
 * (half the per-key state): with the row offset unchanged since it was added, the
 * deterministic fast batch exp of linalg.c gives it back bit for bit; after an offset
 * move it differs by float rounding, which the periodic resync clears. One exp
 * batch over all heads, new and evicted terms together. */
static CONY_CLONES void
cony_update_rows (ConyAttention *a, int w, int p, gboolean evict, int skip)
{
  int ml = a->ml, hm = a->heads * ml;
  float *arg = a->scratch, *arg_old = a->scratch + hm;
  WITH_CONST_HEAD_DIM (a->hd, {
    for (int h = 0; h < a->heads; h++)
      cony_score_head (a, h, p, evict, arg + h * ml, arg_old + h * ml, HD);
    cony_exp_batch (arg, evict ? 2 * hm : hm);
    for (int h = 0; h < a->heads; h++)
      cony_apply_head (a, h, w, evict, skip, arg + h * ml, arg_old + h * ml, HD);
  });
}

/* out = Σ_j r_j N_j for head @h (N: heads × m rows of hd). */
static G_ALWAYS_INLINE inline void
cony_combine_hd (const ConyAttention *a, int h, const double *r, const double *N, float *out,
    const int hd)
{
  const double *Nh = N + (gsize) h * a->m * hd;
  double acc[hd];
  for (int c = 0; c < hd; c++)
    acc[c] = r[0] * Nh[c];
  for (int j = 1; j < a->ml; j++)
    for (int c = 0; c < hd; c++)
      acc[c] += r[j] * Nh[(gsize) j * hd + c];
  for (int c = 0; c < hd; c++)
    out[c] = (float) acc[c];
}

static void
cony_combine (const ConyAttention *a, int h, const double *r, const double *N, float *out)
{
  cony_combine_hd (a, h, r, N, out, a->hd);
}

/* One single-output row of head @h: Σ_j r_j (ΔV)_j / φ(Δ)_j for query @q. */
static G_ALWAYS_INLINE inline void
cony_single_row_hd (const ConyAttention *a, int h, const float *e, float *out, const int hd)
{
  double r[a->m];
  cony_query_finish (a, h, e, r);
  for (int j = 0; j < a->ml; j++)
    r[j] /= a->row_phi[h * a->n_rows + j];
  cony_combine_hd (a, h, r, a->row_acc, out, hd);
}

/* Updates the landmark rows (and, at a segment end, the landmarks) for the token just
 * pushed; for retroactive layers also the new query's B_φΓ⁺ row. */
void
cony_cony_advance (ConyAttention *a)
{
  int n = a->n, hd = a->hd;
  int w = (int) MIN (a->t + 1, (guint64) n), p = (int) (a->t % n);
  gboolean evict = a->t >= (guint64) n;
  gboolean continual_landmarks = a->cfg.variant == CONY_ATTENTION_CONY;
  gboolean update = continual_landmarks && cony_segment_push (a);
  int resync = a->cfg.resync_interval > 0 ? a->cfg.resync_interval : DEFAULT_RESYNC_WINDOWS * n;

  if ((continual_landmarks && a->t < (guint64) n) || ++a->steps_since_resync >= (guint64) resync) {
    cony_rebuild_all (a, w);
  } else {
    int replaced = update ? (int) ((a->seg_index - 1) % a->m) : -1;
    cony_update_rows (a, w, p, evict, replaced);
    if (update) {
      for (int h = 0; h < a->heads; h++) {
        gsize off = (gsize) h * a->m * hd;
        cony_attn_landmark_pinv (a, a->lm_q + off, a->lm_k + off, a->m,
            a->pinv + (gsize) h * a->m * a->m);
        cony_landmark_row_rebuild (a, h, replaced, w);
      }
      if (a->cfg.retroactive)
        cony_refresh_query_rows (a, w);
    }
  }
  if (a->cfg.retroactive)
    for (int h = 0; h < a->heads; h++)
      cony_query_row (a, h, a->qkv + h * hd, a->rcache + lm_index (a, p, h, 0));
}

/* Single output: for each query of @Q (rows × d), Σ_j r_j (ΔV)_j / φ(Δ)_j; retroactive:
 * the n rows r·N with N_j = (ΔV)_j / φ(Δ)_j. */
CONY_CLONES void
cony_cony_emit (ConyAttention *a, const float *Q, int rows)
{
  int d = a->d, hd = a->hd, w = cony_attn_window_fill (a);
  if (!a->cfg.retroactive) {
    float *e = a->scratch; /* the softmax exponentials of every head, one batch */
    WITH_CONST_HEAD_DIM (hd, {
      for (int i = 0; i < rows; i++) {
        for (int h = 0; h < a->heads; h++)
          cony_query_args_hd (a, h, Q + (gsize) i * d + h * HD, e + h * a->ml, HD);
        cony_exp_batch (e, a->heads * a->ml);
        for (int h = 0; h < a->heads; h++)
          cony_single_row_hd (a, h, e + h * a->ml, a->heads_out + (gsize) i * d + h * HD, HD);
      }
    });
    return;
  }
  double *N = a->scratch_d;
  for (int h = 0; h < a->heads; h++)
    for (int j = 0; j < a->ml; j++)
      rowsum_normalised (row_at (a, h, j), hd, N + ((gsize) h * a->m + j) * hd);
  int first = cony_attn_window_first_row (a, w);
  memset (a->heads_out, 0, sizeof (float) * first * d);
  for (int i = 0; i < w; i++) {
    int slot = cony_attn_window_slot (a, w, i);
    for (int h = 0; h < a->heads; h++)
      cony_combine (a, h, a->rcache + lm_index (a, slot, h, 0), N,
          a->heads_out + (gsize) (first + i) * d + h * hd);
  }
}

/* A new stream: no segment begun, no continual landmark yet. */
void
cony_cony_reset (ConyAttention *a)
{
  if (!a->seg_q)
    return; /* fixed landmarks: nothing but the rows, reset by the layer */
  memset (a->seg_q, 0, sizeof (double) * a->d);
  memset (a->seg_k, 0, sizeof (double) * a->d);
  a->seg_count = 0;
  a->seg_index = 0;
  a->ml = 0;
}

/* Continual landmarks move: they, their Γ⁺ and the segment sums are state too. */
gsize
cony_cony_state_bytes (const ConyAttention *a)
{
  if (!a->seg_q)
    return 0;
  return (gsize) 2 * a->heads * a->m * a->hd * sizeof (float)
      + (gsize) a->heads * a->m * a->m * sizeof (double) + 2 * (gsize) a->d * sizeof (double);
}

/* FLOPs per step (cony_regular_sda_flops' convention): the new key's scores against the
 * landmarks, removal and addition of a term per row, the query's β·Γ⁺ and the output;
 * cony adds a landmark update (a segment's key scores and a pseudo-inverse) every n/m
 * steps. */
static double
fixed_sda_per_head (gboolean retro, double n, double e, double m)
{
  double fixed_rows = m * e + 2 * m * (e + 2);            /* new key's scores, remove + add */
  double fixed_query = m * e + 3 * m + m * m;             /* β, softmax, β·Γ⁺ */
  double fixed_out = m * e + (retro ? n * m * e : m * e); /* N = ΔV/φ, then r·N */
  return fixed_rows + fixed_query + fixed_out;
}

double
cony_cony_fixed_sda_flops (const ConyAttentionConfig *c)
{
  double e = (double) c->d / c->heads;
  return c->heads * fixed_sda_per_head (c->retroactive, c->window, e, c->landmarks);
}

double
cony_cony_sda_flops (const ConyAttentionConfig *c)
{
  double n = c->window, e = (double) c->d / c->heads, m = c->landmarks;
  double pinv = 24 * m * m * m, landmark_kernel = m * m * e + 3 * m * m;
  double update = 2 * e + 2 * n * e + 2 * n + landmark_kernel + pinv
      + (c->retroactive ? n * (m * e + 3 * m + m * m) : 0);
  return c->heads * (fixed_sda_per_head (c->retroactive, n, e, m) + update * m / n);
}

/* The paper's appendix A formulas (SDA only, d = the whole embedding as one head). */
static double
fixed_paper (gboolean retro, double n, double d, double m)
{
  return retro ? n * d * m + 6 * d * m + m * m + 6 * m : 7 * d * m + m * m + 6 * m;
}

double
cony_cony_fixed_paper_flops (const ConyAttentionConfig *c)
{
  return fixed_paper (c->retroactive, c->window, c->d, c->landmarks);
}

double
cony_cony_paper_flops (const ConyAttentionConfig *c)
{
  double n = c->window, d = c->d, m = c->landmarks;
  double up = c->retroactive
      ? n * d * m + 8 * n * d + n * m * m + n * m + 11 * n + 15 * d * m + 2 * d + 24 * m * m * m
          + 22 * m * m + 22 * m
      : n * d * m + 3 * n * d + n + 9 * d * m + 2 * d + 24 * m * m * m + 22 * m * m + 13 * m;
  return m / n * up + (1 - m / n) * fixed_paper (c->retroactive, n, d, m);
}
