/* Multi-head attention stepped one token at a time: every variant of
 * docs/attention.md behind one layer object.
 *
 * Layout: projected tokens live in rings of n slots (token τ in slot τ mod n), all
 * heads side by side (head h at columns h·hd … (h+1)·hd). A score is
 * scale·(q·k) with scale = 1/√hd; q, k and landmarks are kept as projected, so fixed
 * landmarks are used exactly as given. */
#include "attention-private.h"
#include "cony/error.h"
#include "linalg.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* A new score this far above a row's offset rescales the row (exp(30) ≈ 1e13 keeps
 * float exponentials and double sums far from overflow). */
#define RESCALE_MARGIN 30.0f
/* A subtraction that leaves less than this fraction of a row's mass means the removed
 * term dominated: the row is rebuilt exactly instead of trusting the difference. */
#define COLLAPSE_FRACTION 1e-6
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

static const char *const variant_names[CONY_ATTENTION_N_VARIANTS] = {
  "regular",
  "continual",
  "nystrom",
  "nystrom-fixed",
  "cony",
  "cony-fixed",
  "vcc",
};

const char *
cony_attention_variant_name (ConyAttentionVariant variant)
{
  return (unsigned) variant < CONY_ATTENTION_N_VARIANTS ? variant_names[variant] : "unknown";
}

gboolean
cony_attention_variant_from_name (const char *name, ConyAttentionVariant *variant)
{
  for (int i = 0; i < CONY_ATTENTION_N_VARIANTS; i++)
    if (g_strcmp0 (name, variant_names[i]) == 0) {
      *variant = i;
      return TRUE;
    }
  return FALSE;
}

gboolean
cony_attention_variant_is_continual (ConyAttentionVariant v)
{
  return v == CONY_ATTENTION_CONTINUAL || v == CONY_ATTENTION_CONY || v == CONY_ATTENTION_CONY_FIXED
      || v == CONY_ATTENTION_VCC;
}

gboolean
cony_attention_variant_uses_fixed_landmarks (ConyAttentionVariant v)
{
  return v == CONY_ATTENTION_NYSTROM_FIXED || v == CONY_ATTENTION_CONY_FIXED;
}

ConyAttentionVariant
cony_attention_variant_windowed (ConyAttentionVariant v)
{
  switch (v) {
    case CONY_ATTENTION_CONTINUAL: return CONY_ATTENTION_REGULAR;
    case CONY_ATTENTION_CONY: return CONY_ATTENTION_NYSTROM;
    case CONY_ATTENTION_CONY_FIXED: return CONY_ATTENTION_NYSTROM_FIXED;
    default: return v;
  }
}

static gboolean
uses_landmarks (ConyAttentionVariant v)
{
  return v == CONY_ATTENTION_NYSTROM || v == CONY_ATTENTION_NYSTROM_FIXED
      || v == CONY_ATTENTION_CONY || v == CONY_ATTENTION_CONY_FIXED;
}

static gboolean
is_cony (const ConyAttention *a)
{
  return a->cfg.variant == CONY_ATTENTION_CONY || a->cfg.variant == CONY_ATTENTION_CONY_FIXED;
}

/* ------------------------------------------------------------------------ */
/* Running exponential sums.
 *
 * A row keeps φ = Σ exp(s_i − c) and acc = Σ exp(s_i − c)·v_i over the tokens it has
 * seen, c being the row's offset. Everything is double: a term removed later is then
 * the added one to ~1e-16, so even a term that dominated the row leaves an accurate
 * remainder; exponent arguments stay below RESCALE_MARGIN, so nothing overflows. */

typedef struct {
  double *offset;
  double *phi;
  double *acc;
} RowSum;

static RowSum
row_at (ConyAttention *a, int head, int row)
{
  int i = head * a->n_rows + row;
  return (RowSum){ a->row_offset + i, a->row_phi + i, a->row_acc + (gsize) i * a->hd };
}

/* How a row's terms are computed; a row must use one kind for its whole life. CoRe
 * recomputes a removed term from a fresh score, so it needs the exact double exp; CoNy
 * recomputes it from the stored score with the deterministic fast float exp, which
 * gives back the added term bit for bit while the row offset has not moved. */
typedef enum
{
  TERMS_EXACT,
  TERMS_STORED
} TermKind;

static double
term_exp (TermKind kind, double arg)
{
  if (kind == TERMS_EXACT)
    return exp (arg);
  float x = (float) arg;
  cony_exp_batch (&x, 1);
  return x;
}

/* Moves the offset up to @s when @s would exceed it by more than RESCALE_MARGIN;
 * returns the factor applied to the existing terms (1 when nothing moved). */
static G_ALWAYS_INLINE inline double
rowsum_make_room (RowSum r, int hd, double s)
{
  if (!(s > *r.offset + RESCALE_MARGIN))
    return 1.0;
  double factor = isinf (*r.offset) ? 0.0 : exp (*r.offset - s);
  *r.phi *= factor;
  for (int c = 0; c < hd; c++)
    r.acc[c] *= factor;
  *r.offset = s;
  return factor;
}

static G_ALWAYS_INLINE inline void
rowsum_add_term (RowSum r, int hd, double e, const float *restrict v)
{
  *r.phi += e;
  for (int c = 0; c < hd; c++)
    r.acc[c] += e * v[c];
}

/* Adds a token with score @s and value @v, exact kind; returns the added term. */
static double
rowsum_add (RowSum r, int hd, double s, const float *restrict v)
{
  rowsum_make_room (r, hd, s);
  double e = term_exp (TERMS_EXACT, s - *r.offset);
  rowsum_add_term (r, hd, e, v);
  return e;
}

/* Removes a term added earlier (@e relative to the current offset). TRUE when the
 * remaining mass is too small to trust: the caller rebuilds the row. */
static G_ALWAYS_INLINE inline gboolean
rowsum_remove (RowSum r, int hd, double e, const float *restrict v)
{
  double before = *r.phi;
  *r.phi -= e;
  for (int c = 0; c < hd; c++)
    r.acc[c] -= e * v[c];
  return !(*r.phi > before * COLLAPSE_FRACTION);
}

/* Recomputes a row exactly from @count scores (stride @ss) and values (stride @vs);
 * writes each term to @e (stride @es) when @e is not NULL. */
static void
rowsum_rebuild (RowSum r, int hd, TermKind kind, const double *s, int ss, const float *v, int vs,
    int count, double *e, int es)
{
  double max = -INFINITY;
  for (int i = 0; i < count; i++)
    max = fmax (max, s[(gsize) i * ss]);
  *r.offset = max;
  *r.phi = 0.0;
  memset (r.acc, 0, sizeof (double) * hd);
  for (int i = 0; i < count; i++) {
    double ev = term_exp (kind, s[(gsize) i * ss] - max);
    const float *vi = v + (gsize) i * vs;
    *r.phi += ev;
    for (int c = 0; c < hd; c++)
      r.acc[c] += ev * vi[c];
    if (e)
      e[(gsize) i * es] = ev;
  }
}

/* out = acc / φ */
static void
rowsum_normalised (RowSum r, int hd, double *out)
{
  double inv = 1.0 / *r.phi;
  for (int c = 0; c < hd; c++)
    out[c] = r.acc[c] * inv;
}

/* ------------------------------------------------------------------------ */
/* Windowed (non-continual) attention over a contiguous window, per head.
 * Q, K, V: w rows with row stride ld; rows [r0, w) of the result go to out. */

/* Softmax of the w float scores @s of query @q against the keys @K (row stride ld).
 * Float scores overflow once |q|·|k| passes ~1e38 (tokens of ~1e19): such a row is
 * recomputed in double (@sd, w doubles), where the product of any two floats is
 * finite. Non-finite q or k still give NaN, which the encoder reports. */
static void
softmax_scores (const float *q, const float *K, int ld, int w, int hd, float scale, float *s,
    double *sd)
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

/* Query rows of the regular layer scored per sgemm: the score scratch holds this many rows
 * of the window, so it grows as n, not n² (a retroactive window at n = 16384 would need
 * 1 GiB of scores at once). */
#define REGULAR_ROW_CHUNK 64

static void
regular_head (const float *Q, const float *K, const float *V, int ld, int w, int r0, int hd,
    float scale, float *out, int ldo, float *S, double *Sd)
{
  for (int c0 = r0; c0 < w; c0 += REGULAR_ROW_CHUNK) {
    int rows = MIN (REGULAR_ROW_CHUNK, w - c0);
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, rows, w, hd, scale, Q + (gsize) c0 * ld,
        ld, K, ld, 0.0f, S, w);
    for (int i = 0; i < rows; i++)
      softmax_scores (Q + (gsize) (c0 + i) * ld, K, ld, w, hd, scale, S + (gsize) i * w, Sd);
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
static gboolean
landmark_pinv (const ConyAttention *a, const float *Ql, const float *Kl, int ml, double *pinv)
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
static void
nystrom_head (const ConyAttention *a, const float *Q, const float *K, const float *V, int ld, int w,
    int r0, const float *Ql, const float *Kl, int ml, const double *pinv, float *out, int ldo,
    double *S)
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
static void
segment_means (const float *X, int ld, int w, int m, int hd, float *out)
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

/* Windowed attention of variant @v over a->win_q/k/v (w rows, oldest first); writes
 * rows [r0, w) to @out (stride d). */
static void
windowed_forward (ConyAttention *a, ConyAttentionVariant v, int w, int r0, float *out)
{
  int d = a->d, hd = a->hd, m = a->m;
  if (v == CONY_ATTENTION_VCC) {
    cony_vcc_windowed (a, w, r0, out);
    return;
  }
  for (int h = 0; h < a->heads; h++) {
    const float *Q = a->win_q + h * hd, *K = a->win_k + h * hd, *V = a->win_v + h * hd;
    float *o = out + h * hd;
    if (v == CONY_ATTENTION_REGULAR || (v == CONY_ATTENTION_NYSTROM && w <= m)) {
      regular_head (Q, K, V, d, w, r0, hd, a->scale, o, d, a->scratch, a->scratch_d);
    } else if (v == CONY_ATTENTION_NYSTROM) {
      float *Ql = a->scratch, *Kl = Ql + m * hd;
      double *P = a->scratch_d;
      segment_means (Q, d, w, m, hd, Ql);
      segment_means (K, d, w, m, hd, Kl);
      landmark_pinv (a, Ql, Kl, m, P);
      nystrom_head (a, Q, K, V, d, w, r0, Ql, Kl, m, P, o, d, P + m * m);
    } else { /* fixed landmarks, kernel pseudo-inverse computed once at creation */
      gsize off = (gsize) h * m * hd;
      nystrom_head (a, Q, K, V, d, w, r0, a->lm_q + off, a->lm_k + off, m,
          a->pinv + (gsize) h * m * m, o, d, a->scratch_d);
    }
  }
}

/* Output row of the oldest window token: retroactive outputs have n rows, the
 * ones before the stream start are zero. */
static int
window_first_row (const ConyAttention *a, int w)
{
  return a->n - w;
}

/* Tokens in the window once a->t tokens have been stepped. */
static int
window_fill (const ConyAttention *a)
{
  return (int) MIN (a->t, (guint64) a->n);
}

/* Ring slot of the i-th (oldest first) of the w tokens in the window. */
static int
window_slot (const ConyAttention *a, int w, int i)
{
  return (int) ((a->t - w + i) % a->n);
}

/* Copies the window of the rings into win_q/k/v, oldest first; returns its length. */
static int
gather_window (ConyAttention *a)
{
  int w = window_fill (a);
  guint64 first = a->t - w;
  for (int i = 0; i < w; i++) {
    gsize slot = (first + i) % a->n, dst = (gsize) i * a->d, src = slot * a->d;
    memcpy (a->win_q + dst, a->ring_q + src, sizeof (float) * a->d);
    memcpy (a->win_k + dst, a->ring_k + src, sizeof (float) * a->d);
    memcpy (a->win_v + dst, a->ring_v + src, sizeof (float) * a->d);
  }
  return w;
}

/* Non-continual output: the whole window recomputed, every row (the baseline the
 * papers compare with), then the @rows newest rows or all rows kept. */
static void
windowed_emit (ConyAttention *a, int rows)
{
  int w = gather_window (a), d = a->d;
  if (a->cfg.retroactive) {
    int first = window_first_row (a, w);
    memset (a->heads_out, 0, sizeof (float) * first * d);
    windowed_forward (a, a->cfg.variant, w, 0, a->heads_out + (gsize) first * d);
  } else {
    windowed_forward (a, a->cfg.variant, w, 0, a->win_out);
    memcpy (a->heads_out, a->win_out + (gsize) (w - rows) * d, sizeof (float) * rows * d);
  }
}

/* ------------------------------------------------------------------------ */
/* Continual Transformer attention: CoSi (single output) and CoRe (retroactive). */

/* CoSi: the queries @Q (rows × d) against the window's keys and values. */
static void
continual_single_emit (ConyAttention *a, const float *Q, int rows)
{
  int w = window_fill (a), d = a->d, hd = a->hd;
  float *s = a->scratch;
  for (int r = 0; r < rows; r++)
    for (int h = 0; h < a->heads; h++) {
      /* Window slots 0..w−1 are exactly the window; their order does not matter. */
      const float *q = Q + (gsize) r * d + h * hd;
      cblas_sgemv (CblasRowMajor, CblasNoTrans, w, hd, a->scale, a->ring_k + h * hd, d, q, 1, 0.0f,
          s, 1);
      softmax_scores (q, a->ring_k + h * hd, d, w, hd, a->scale, s, a->scratch_d);
      cblas_sgemv (CblasRowMajor, CblasTrans, w, hd, 1.0f, a->ring_v + h * hd, d, s, 1, 0.0f,
          a->heads_out + (gsize) r * d + h * hd, 1);
    }
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
  int d = a->d, hd = a->hd, w = window_fill (a), first = window_first_row (a, w);
  memset (a->heads_out, 0, sizeof (float) * first * d);
  for (int i = 0; i < w; i++) {
    int slot = window_slot (a, w, i);
    for (int h = 0; h < a->heads; h++) {
      double o[hd];
      rowsum_normalised (row_at (a, h, slot), hd, o);
      for (int c = 0; c < hd; c++)
        a->heads_out[(gsize) (first + i) * d + h * hd + c] = (float) o[c];
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Continual Nyström: landmark rows φ(Δ)_j, (ΔV)_j kept as running sums over the
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
      landmark_pinv (a, a->lm_q + off, a->lm_k + off, a->ml, a->pinv + (gsize) h * a->m * a->m);
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
static void
cony_advance (ConyAttention *a)
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
        landmark_pinv (a, a->lm_q + off, a->lm_k + off, a->m, a->pinv + (gsize) h * a->m * a->m);
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
static CONY_CLONES void
cony_emit (ConyAttention *a, const float *Q, int rows)
{
  int d = a->d, hd = a->hd, w = window_fill (a);
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
  int first = window_first_row (a, w);
  memset (a->heads_out, 0, sizeof (float) * first * d);
  for (int i = 0; i < w; i++) {
    int slot = window_slot (a, w, i);
    for (int h = 0; h < a->heads; h++)
      cony_combine (a, h, a->rcache + lm_index (a, slot, h, 0), N,
          a->heads_out + (gsize) (first + i) * d + h * hd);
  }
}

/* ------------------------------------------------------------------------ */
/* The layer. */

/* Which windows a variant must keep between steps: its real state (docs/attention.md,
 * Variants). */
static gboolean
keeps_q (const ConyAttentionConfig *c)
{
  return !cony_attention_variant_is_continual (c->variant)
      || (c->retroactive && c->variant != CONY_ATTENTION_CONY_FIXED);
}

static gboolean
keeps_k (const ConyAttentionConfig *c)
{
  return c->variant != CONY_ATTENTION_CONY_FIXED && c->variant != CONY_ATTENTION_VCC;
}

/* vcc keeps its keys and values as block sums (attention-vcc.c) instead of these windows. */
static gboolean
keeps_v (const ConyAttentionConfig *c)
{
  return c->variant != CONY_ATTENTION_VCC;
}

int
cony_attention_output_rows (const ConyAttention *a)
{
  return a->cfg.retroactive ? a->n : 1;
}

const ConyAttentionConfig *
cony_attention_get_config (const ConyAttention *a)
{
  return &a->cfg;
}

guint64
cony_attention_steps (const ConyAttention *a)
{
  return a->t;
}

void
cony_attention_free (ConyAttention *a)
{
  if (!a)
    return;
  cony_gemv_matrix_clear (&a->g_in);
  cony_gemv_matrix_clear (&a->g_out);
  void *buffers[] = { a->w_in, a->b_in, a->w_out, a->b_out, a->qkv, a->heads_out, a->ring_q,
    a->ring_k, a->ring_v, a->k_old, a->v_old, a->win_q, a->win_k, a->win_v, a->win_out, a->queries,
    a->scratch, a->scratch_d, a->row_offset, a->row_phi, a->row_acc, a->lm_q, a->lm_k, a->pinv,
    a->sk, a->rcache, a->seg_q, a->seg_k };
  for (guint i = 0; i < G_N_ELEMENTS (buffers); i++)
    g_free (buffers[i]);
  cony_vcc_free (a->vcc);
  g_free (a);
}

void
cony_attention_reset (ConyAttention *a)
{
  a->t = 0;
  a->steps_since_resync = 0;
  if (a->n_rows) {
    gsize rows = (gsize) a->heads * a->n_rows;
    for (gsize i = 0; i < rows; i++)
      a->row_offset[i] = -INFINITY;
    memset (a->row_phi, 0, sizeof (double) * rows);
    memset (a->row_acc, 0, sizeof (double) * rows * a->hd);
  }
  if (a->cfg.variant == CONY_ATTENTION_CONY) {
    memset (a->seg_q, 0, sizeof (double) * a->d);
    memset (a->seg_k, 0, sizeof (double) * a->d);
    a->seg_count = 0;
    a->seg_index = 0;
    a->ml = 0;
  }
  if (a->vcc)
    cony_vcc_reset (a);
}

static gboolean
check_finite (const float *x, gsize count, const char *what, GError **error)
{
  for (gsize i = 0; i < count; i++)
    if (!isfinite (x[i])) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "attention weights: %s holds a non-finite value at flat index %" G_GSIZE_FORMAT, what, i);
      return FALSE;
    }
  return TRUE;
}

static gboolean
validate (const ConyAttentionConfig *c, const ConyAttentionWeights *w, GError **error)
{
  const char *why = NULL;
  if ((unsigned) c->variant >= CONY_ATTENTION_N_VARIANTS)
    why = "unknown attention variant";
  else if (c->d < 1 || c->heads < 1 || c->d % c->heads != 0)
    why = "d must be a positive multiple of heads";
  else if (c->window < 1)
    why = "window must be at least 1";
  else if (uses_landmarks (c->variant) && (c->landmarks < 1 || c->landmarks > c->window))
    why = "landmarks must be between 1 and the window size";
  else if (c->pinv != CONY_PINV_EXACT && c->pinv != CONY_PINV_ITERATIVE)
    why = "unknown pseudo-inverse method";
  else if (c->pinv_iterations < 0 || c->resync_interval < 0)
    why = "pinv iterations and resync interval must not be negative";
  else if (c->d > CONY_ATTENTION_MAX_DIM || c->window > CONY_ATTENTION_MAX_WINDOW
      || (uses_landmarks (c->variant) && c->landmarks > CONY_ATTENTION_MAX_LANDMARKS))
    why =
        "d, window or landmarks above the most a layer serves (d 16384, window 16384, landmarks 128)";
  else if (c->variant == CONY_ATTENTION_VCC && cony_vcc_invalid (c))
    why = cony_vcc_invalid (c);
  if (!why && cony_attention_config_bytes (c) <= CONY_MEMORY_BUDGET) {
    if (!w || !w->in_proj_weight || !w->in_proj_bias || !w->out_proj_weight || !w->out_proj_bias)
      why = "in_proj_weight, in_proj_bias, out_proj.weight and out_proj.bias are required";
    else if (cony_attention_variant_uses_fixed_landmarks (c->variant)
        && (!w->q_landmarks || !w->k_landmarks))
      why = "fixed-landmark variants need q_landmarks and k_landmarks (heads, m, head_dim)";
  }
  if (why) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "attention (%s, d=%d, heads=%d, window=%d, landmarks=%d): %s",
        cony_attention_variant_name (c->variant), c->d, c->heads, c->window, c->landmarks, why);
    return FALSE;
  }
  gsize bytes = cony_attention_config_bytes (c);
  if (bytes > CONY_MEMORY_BUDGET) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "attention (%s, d=%d, heads=%d, window=%d, landmarks=%d): would need %" G_GSIZE_FORMAT
        " bytes (%.1f MiB) of state and scratch, more than the budget of %" G_GSIZE_FORMAT
        " bytes: use a smaller window",
        cony_attention_variant_name (c->variant), c->d, c->heads, c->window, c->landmarks, bytes,
        bytes / 1048576.0, (gsize) CONY_MEMORY_BUDGET);
    return FALSE;
  }
  gsize d = c->d;
  gsize lm = cony_attention_variant_uses_fixed_landmarks (c->variant) ? (gsize) c->landmarks * d
                                                                      : 0;
  return check_finite (w->in_proj_weight, 3 * d * d, "in_proj_weight", error)
      && check_finite (w->in_proj_bias, 3 * d, "in_proj_bias", error)
      && check_finite (w->out_proj_weight, d * d, "out_proj.weight", error)
      && check_finite (w->out_proj_bias, d, "out_proj.bias", error)
      && (!lm
          || (check_finite (w->q_landmarks, lm, "q_landmarks", error)
              && check_finite (w->k_landmarks, lm, "k_landmarks", error)));
}

/* Sets the sizes of a layer from its (validated) config. */
static void
set_sizes (ConyAttention *a, const ConyAttentionConfig *c)
{
  a->cfg = *c;
  if (a->cfg.pinv_iterations == 0)
    a->cfg.pinv_iterations = 6;
  cony_vcc_resolve_config (&a->cfg);
  a->d = c->d;
  a->heads = c->heads;
  a->hd = c->d / c->heads;
  a->n = c->window;
  a->m = uses_landmarks (c->variant) ? c->landmarks : 0;
  a->scale = 1.0f / sqrtf ((float) a->hd);
  a->n_rows = is_cony (a) ? a->m
                          : (c->variant == CONY_ATTENTION_CONTINUAL && c->retroactive ? a->n : 0);
}

/* One buffer of a layer: where it goes, the size of an element, how many (0: none). */
typedef struct {
  void **dest;
  gsize elem, count;
} Buffer;

#define MAX_BUFFERS 32

/* Every buffer of a layer sized by set_sizes(): cony_attention_new() allocates exactly
 * these, and the memory budget is checked on their sum first. Returns the count. */
static int
layer_buffers (ConyAttention *a, Buffer *b)
{
  const ConyAttentionConfig *c = &a->cfg;
  gsize d = a->d, n = a->n, H = a->heads, m = a->m, hd = a->hd, nd = n * d, F = sizeof (float),
        D = sizeof (double);
  gboolean cony = is_cony (a);
  /* float: REGULAR_ROW_CHUNK rows of n scores of the regular layer, landmark means;
   * double: the Nyström product (Γ⁺, ml×w kernel, ml×hd products), CoRe scores, N of
   * every head. */
  a->scratch_len = MAX (MAX (n * MIN (n, (gsize) REGULAR_ROW_CHUNK), 2 * m * hd), 2 * H * m) + n;
  gsize dlen = m * m + m * n + 2 * m * hd + m;
  gsize rows = H * a->n_rows, per_slot = cony ? n * H * m : 0, lm = m ? H * m * hd : 0;
  Buffer list[] = {
    { (void **) &a->w_in, F, 3 * d * d },
    { (void **) &a->b_in, F, 3 * d },
    { (void **) &a->w_out, F, d * d },
    { (void **) &a->b_out, F, d },
    { (void **) &a->qkv, F, 3 * d },
    { (void **) &a->heads_out, F, nd },
    { (void **) &a->ring_q, F, keeps_q (c) ? nd : 0 },
    { (void **) &a->ring_k, F, keeps_k (c) ? nd : 0 },
    { (void **) &a->ring_v, F, keeps_v (c) ? nd : 0 },
    { (void **) &a->k_old, F, d },
    { (void **) &a->v_old, F, d },
    { (void **) &a->win_q, F, nd },
    { (void **) &a->win_k, F, nd },
    { (void **) &a->win_v, F, nd },
    { (void **) &a->win_out, F, nd },
    { (void **) &a->queries, F, nd },
    { (void **) &a->scratch, F, a->scratch_len },
    { (void **) &a->scratch_d, D, MAX (MAX (dlen, H * m * hd), n) + 1 },
    { (void **) &a->row_offset, D, rows },
    { (void **) &a->row_phi, D, rows },
    { (void **) &a->row_acc, D, rows * hd },
    { (void **) &a->lm_q, F, lm },
    { (void **) &a->lm_k, F, lm },
    { (void **) &a->pinv, D, H * m * m },
    { (void **) &a->sk, D, c->variant == CONY_ATTENTION_CONY_FIXED ? per_slot : 0 },
    { (void **) &a->rcache, D, c->retroactive ? per_slot : 0 },
    { (void **) &a->seg_q, D, c->variant == CONY_ATTENTION_CONY ? d : 0 },
    { (void **) &a->seg_k, D, c->variant == CONY_ATTENTION_CONY ? d : 0 },
  };
  G_STATIC_ASSERT (G_N_ELEMENTS (list) <= MAX_BUFFERS);
  memcpy (b, list, sizeof list);
  return G_N_ELEMENTS (list);
}

gsize
cony_attention_config_bytes (const ConyAttentionConfig *config)
{
  const ConyAttentionConfig *c = config;
  /* sizes the layer refuses anyway: no figure (and no division by zero heads) */
  if (c->d < 1 || c->heads < 1 || c->d % c->heads != 0 || c->window < 1
      || c->d > CONY_ATTENTION_MAX_DIM || c->window > CONY_ATTENTION_MAX_WINDOW
      || (uses_landmarks (c->variant)
          && (c->landmarks < 1 || c->landmarks > CONY_ATTENTION_MAX_LANDMARKS)))
    return G_MAXSIZE;
  ConyAttention a = { 0 };
  Buffer b[MAX_BUFFERS];
  set_sizes (&a, config);
  int count = layer_buffers (&a, b);
  gsize bytes = sizeof (ConyAttention);
  for (int i = 0; i < count; i++)
    bytes += b[i].elem * b[i].count;
  if (c->variant == CONY_ATTENTION_VCC)
    bytes += cony_vcc_config_bytes (&a.cfg);
  return bytes;
}

/* Allocates every buffer of layer_buffers() zeroed, with g_try_malloc0: FALSE when one
 * does not fit in memory (the budget was checked, the machine may still be short). */
static gboolean
allocate_buffers (ConyAttention *a)
{
  Buffer b[MAX_BUFFERS];
  int count = layer_buffers (a, b);
  for (int i = 0; i < count; i++)
    if (b[i].count && !(*b[i].dest = g_try_malloc0 (b[i].elem * b[i].count)))
      return FALSE;
  return TRUE;
}

ConyAttention *
cony_attention_new (const ConyAttentionConfig *config, const ConyAttentionWeights *w,
    GError **error)
{
  if (!validate (config, w, error))
    return NULL;
  g_autoptr (ConyAttention) a = g_new0 (ConyAttention, 1);
  set_sizes (a, config);
  const ConyAttentionConfig *c = &a->cfg;
  int d = a->d, H = a->heads, m = a->m, hd = a->hd;
  if (!allocate_buffers (a)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "attention (%s, d=%d, heads=%d, window=%d, landmarks=%d): out of memory for %" G_GSIZE_FORMAT
        " bytes of state and scratch",
        cony_attention_variant_name (c->variant), d, H, c->window, c->landmarks,
        cony_attention_config_bytes (c));
    return NULL;
  }
  memcpy (a->w_in, w->in_proj_weight, sizeof (float) * 3 * d * d);
  memcpy (a->b_in, w->in_proj_bias, sizeof (float) * 3 * d);
  memcpy (a->w_out, w->out_proj_weight, sizeof (float) * d * d);
  memcpy (a->b_out, w->out_proj_bias, sizeof (float) * d);
  cony_gemv_matrix_init (&a->g_in, a->w_in, 3 * d, d, cony_gemv_f16_enabled ());
  cony_gemv_matrix_init (&a->g_out, a->w_out, d, d, cony_gemv_f16_enabled ());
  a->ml = m;
  if (c->variant == CONY_ATTENTION_VCC)
    a->vcc = cony_vcc_new (a); /* its bytes are in the budget checked by validate() */
  if (cony_attention_variant_uses_fixed_landmarks (c->variant)) {
    gsize lm = (gsize) H * m * hd;
    memcpy (a->lm_q, w->q_landmarks, sizeof (float) * lm);
    memcpy (a->lm_k, w->k_landmarks, sizeof (float) * lm);
    /* Computed once for the whole stream: extreme (finite) landmarks that give no
     * finite pseudo-inverse are refused here rather than spoiling every step. */
    for (int h = 0; h < H; h++)
      if (!landmark_pinv (a, a->lm_q + (gsize) h * m * hd, a->lm_k + (gsize) h * m * hd, m,
              a->pinv + (gsize) h * m * m)) {
        g_set_error (error, CONY_ERROR, CONY_ERROR_NUMERIC,
            "attention (%s, d=%d, heads=%d, window=%d, landmarks=%d): the fixed landmarks of "
            "head %d give no finite pseudo-inverse of their %dx%d kernel",
            cony_attention_variant_name (c->variant), d, H, c->window, m, h, m, m);
        return NULL;
      }
  }
  cony_attention_reset (a);
  return g_steal_pointer (&a);
}

void
cony_attention_project (ConyAttention *a, const float *x)
{
  memcpy (a->qkv, a->b_in, sizeof (float) * 3 * a->d);
  cony_gemv (&a->g_in, x, a->qkv);
}

/* Saves the token leaving slot t mod n, then writes the new one there. */
static void
push_token (ConyAttention *a)
{
  gsize d = a->d, at = (a->t % a->n) * d;
  float *rings[3] = { a->ring_q, a->ring_k, a->ring_v };
  if (a->ring_k)
    memcpy (a->k_old, a->ring_k + at, sizeof (float) * d);
  memcpy (a->v_old, a->ring_v + at, sizeof (float) * d);
  for (int i = 0; i < 3; i++)
    if (rings[i])
      memcpy (rings[i] + at, a->qkv + i * d, sizeof (float) * d);
}

/* Makes the token in a->qkv part of the state. */
static void
advance (ConyAttention *a)
{
  if (a->vcc) {
    cony_vcc_advance (a);
    a->t++;
    return;
  }
  push_token (a);
  if (a->cfg.variant == CONY_ATTENTION_CONTINUAL && a->cfg.retroactive)
    continual_retroactive_advance (a);
  else if (is_cony (a))
    cony_advance (a);
  a->t++;
}

/* Head outputs into a->heads_out: for the @rows newest queries @Q (single output), or
 * the n window rows (retroactive). */
static void
emit (ConyAttention *a, const float *Q, int rows)
{
  switch (a->cfg.variant) {
    case CONY_ATTENTION_CONTINUAL:
      if (a->cfg.retroactive)
        continual_retroactive_emit (a);
      else
        continual_single_emit (a, Q, rows);
      break;
    case CONY_ATTENTION_CONY:
    case CONY_ATTENTION_CONY_FIXED: cony_emit (a, Q, rows); break;
    case CONY_ATTENTION_VCC: cony_vcc_emit (a, Q, rows); break;
    default: windowed_emit (a, rows); break;
  }
}

void
cony_attention_core_step (ConyAttention *a)
{
  advance (a);
  emit (a, a->qkv, 1);
}

float *
cony_attention_qkv_buffer (ConyAttention *a)
{
  return a->qkv;
}

/* out = heads · W_outᵀ + b for @rows rows starting at @first; rows before it are 0. */
static void
out_project (const ConyAttention *a, const float *heads, int first, int rows, float *out)
{
  int d = a->d;
  memset (out, 0, sizeof (float) * first * d);
  float *o = out + (gsize) first * d;
  for (int i = 0; i < rows; i++)
    memcpy (o + (gsize) i * d, a->b_out, sizeof (float) * d);
  if (rows == 1) /* a one-row sgemm would spend most of its time packing W_out */
    cony_gemv (&a->g_out, heads + (gsize) first * d, o);
  else
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, rows, d, d, 1.0f,
        heads + (gsize) first * d, d, a->w_out, d, 1.0f, o, d);
}

void
cony_attention_step (ConyAttention *a, const float *x, float *out)
{
  cony_attention_project (a, x);
  cony_attention_core_step (a);
  if (!a->cfg.retroactive) {
    out_project (a, a->heads_out, 0, 1, out);
    return;
  }
  int w = window_fill (a);
  out_project (a, a->heads_out, a->n - w, w, out);
}

void
cony_attention_step_tokens (ConyAttention *a, const float *x, int count, float *out)
{
  g_return_if_fail (count >= 1 && count <= a->n);
  int d = a->d;
  for (int i = 0; i < count; i++) {
    cony_attention_project (a, x + (gsize) i * d);
    memcpy (a->queries + (gsize) i * d, a->qkv, sizeof (float) * d);
    advance (a);
  }
  emit (a, a->queries, count);
  if (!a->cfg.retroactive) {
    out_project (a, a->heads_out, 0, count, out);
    return;
  }
  int w = window_fill (a);
  out_project (a, a->heads_out, a->n - w, w, out);
}

void
cony_attention_forward_window (ConyAttention *a, const float *x, int w, float *out)
{
  g_return_if_fail (w >= 1 && w <= a->n);
  int d = a->d;
  /* Project the window: rows of [q | k | v], then split into the window buffers. */
  for (int i = 0; i < w; i++) {
    cony_attention_project (a, x + (gsize) i * d);
    memcpy (a->win_q + (gsize) i * d, a->qkv, sizeof (float) * d);
    memcpy (a->win_k + (gsize) i * d, a->qkv + d, sizeof (float) * d);
    memcpy (a->win_v + (gsize) i * d, a->qkv + 2 * d, sizeof (float) * d);
  }
  ConyAttentionVariant v = cony_attention_variant_windowed (a->cfg.variant);
  if (a->cfg.retroactive) {
    int first = a->n - w;
    windowed_forward (a, v, w, 0, a->win_out + (gsize) first * d);
    out_project (a, a->win_out, first, w, out);
  } else {
    windowed_forward (a, v, w, w - 1, a->win_out);
    out_project (a, a->win_out, 0, 1, out);
  }
}

gsize
cony_attention_state_bytes (const ConyAttention *a)
{
  gsize nd = (gsize) a->n * a->d, f = sizeof (float), bytes = 0;
  bytes += nd * f * ((a->ring_q != NULL) + (a->ring_k != NULL) + (a->ring_v != NULL));
  gsize dbl = sizeof (double), per_slot = (gsize) a->n * a->heads * a->m;
  if (a->n_rows) /* offset, φ and the hd sums of every row */
    bytes += (gsize) a->heads * a->n_rows * dbl * (2 + a->hd);
  if (a->sk)
    bytes += per_slot * dbl;
  if (a->rcache)
    bytes += per_slot * dbl;
  if (a->vcc)
    bytes += cony_vcc_state_bytes (a);
  if (a->cfg.variant == CONY_ATTENTION_CONY) /* landmarks, Γ⁺ and segment sums move */
    bytes += (gsize) 2 * a->heads * a->m * a->hd * f + (gsize) a->heads * a->m * a->m * dbl
        + 2 * (gsize) a->d * dbl;
  return bytes;
}

/* FLOPs per step, counting a multiply-add, an exp or a division as one (the papers'
 * appendix convention). Per head with head size e, window n, landmarks m. */
static double
sda_flops_per_head (ConyAttentionVariant v, gboolean retro, double n, double e, double m)
{
  double pinv = 24 * m * m * m, landmark_kernel = m * m * e + 3 * m * m;
  double fixed_rows = m * e + 2 * m * (e + 2);            /* new key's scores, remove + add */
  double fixed_query = m * e + 3 * m + m * m;             /* β, softmax, β·Γ⁺ */
  double fixed_out = m * e + (retro ? n * m * e : m * e); /* N = ΔV/φ, then r·N */
  switch (v) {
    case CONY_ATTENTION_REGULAR: return 2 * n * n * e + 3 * n * n;
    case CONY_ATTENTION_CONTINUAL:
      return retro ? (n - 1) * (4 * e + 4) + 3 * n * e + 3 * n : 2 * n * e + 3 * n;
    case CONY_ATTENTION_NYSTROM:
      return 2 * n * e + landmark_kernel + pinv + 4 * n * m * e + 6 * n * m + m * m * e;
    case CONY_ATTENTION_NYSTROM_FIXED: return 4 * n * m * e + 6 * n * m + m * m * e;
    case CONY_ATTENTION_CONY_FIXED: return fixed_rows + fixed_query + fixed_out;
    case CONY_ATTENTION_CONY: {
      double update = 2 * e + 2 * n * e + 2 * n + landmark_kernel + pinv
          + (retro ? n * (m * e + 3 * m + m * m) : 0);
      return fixed_rows + fixed_query + fixed_out + update * m / n;
    }
    default: return 0;
  }
}

/* The paper's appendix A formulas (SDA only, d = the whole embedding as one head). */
static double
paper_flops (ConyAttentionVariant v, gboolean retro, double n, double d, double m)
{
  double fix_si = 7 * d * m + m * m + 6 * m, fix_re = n * d * m + 6 * d * m + m * m + 6 * m;
  switch (v) {
    case CONY_ATTENTION_REGULAR: return 2 * n * n * d + n * n + n * d + n;
    case CONY_ATTENTION_CONTINUAL: return retro ? 7 * n * d + 4 * n - 2 * d - 2 : 3 * n * d + 2 * n;
    case CONY_ATTENTION_NYSTROM:
      return 4 * n * d * m + 2 * n * d + n + n * m * m + 2 * n * m + d * m * m + 24 * m * m * m
          + 22 * m * m + 2 * m;
    case CONY_ATTENTION_NYSTROM_FIXED: return 4 * n * d * m + n * m * m + 2 * n * m + n + m;
    case CONY_ATTENTION_CONY_FIXED: return retro ? fix_re : fix_si;
    case CONY_ATTENTION_CONY: {
      double up = retro
          ? n * d * m + 8 * n * d + n * m * m + n * m + 11 * n + 15 * d * m + 2 * d + 24 * m * m * m
              + 22 * m * m + 22 * m
          : n * d * m + 3 * n * d + n + 9 * d * m + 2 * d + 24 * m * m * m + 22 * m * m + 13 * m;
      return m / n * up + (1 - m / n) * (retro ? fix_re : fix_si);
    }
    default: return 0;
  }
}

ConyAttentionFlops
cony_attention_flops (const ConyAttentionConfig *c)
{
  double n = c->window, d = c->d, H = c->heads, m = c->landmarks, e = d / H;
  double rows = c->retroactive ? n : 1;
  return (ConyAttentionFlops){
    .sda = c->variant == CONY_ATTENTION_VCC
        ? cony_vcc_flops (c)
        : H * sda_flops_per_head (c->variant, c->retroactive, n, e, m),
    .projections = 3 * d * d + 3 * d + rows * (d * d + d),
    .paper = paper_flops (c->variant, c->retroactive, n, d, m),
  };
}
