/* The vcc attention variant: VIP-token centric compression (VCC paper §6.5 (2)) of the
 * window, stepped one token at a time. The newest query is the VIP token; the window
 * is cut into at most r segments (coarse blocks refined top-down by the paper's
 * priority, eq. 53), and the query attends to the segments' mean keys and values with
 * a log(segment size) correction. docs/attention.md has the exact rule.
 *
 * State: one float per token and column of keys and values, as much as `continual`'s
 * two float windows. The stream is cut into aligned blocks of B tokens; the newest,
 * unfinished block holds its tokens as they are, every finished block the suffix sums
 * of its tokens (to its last one, summed in double and rounded once). Each query first
 * adds up, in double, the finished blocks' totals (one row per B tokens) and the
 * unfinished block's tokens: that gives the sum of the window's keys and values before
 * any position from one more row, and a segment's sums are a subtraction of two such
 * boundary rows. No entry sums more than B tokens, so nothing grows with the stream,
 * and a token of a finished block is the difference of two floats of at most B tokens'
 * size: with B ≈ √n, rounding stays close to that of float prefix-free attention. */
#include "attention-private.h"
#include "linalg.h"

#include <math.h>
#include <string.h>

/* Its settings, in ConyAttentionConfig.settings (the row's blob, read with
 * cony_attention_setting()). */
enum
{
  VCC_BUDGET,
  VCC_BLOCK,
  VCC_EXACT_TAIL,
  VCC_N_SETTINGS
};
G_STATIC_ASSERT (VCC_N_SETTINGS <= CONY_ATTENTION_MAX_SETTINGS);

const ConyAttentionSetting cony_vcc_settings[VCC_N_SETTINGS + 1] = {
  [VCC_BUDGET] = { "vcc_budget", "segments per query r, exact tail included", "R", 64, 1,
      CONY_ATTENTION_MAX_WINDOW },
  [VCC_BLOCK] = { "vcc_block", "smallest coarse block, in tokens", "B", 1, 1,
      CONY_ATTENTION_MAX_WINDOW },
  [VCC_EXACT_TAIL] = { "vcc_exact_tail", "newest tokens always kept exact, fewer than the budget",
      "L", 0, 0, CONY_ATTENTION_MAX_WINDOW },
  [VCC_N_SETTINGS] = { NULL },
};

struct _ConyVcc {
  int blk;          /* tokens per block B (offset_block) */
  float *ok, *ov;   /* (n, d) ring, token p in slot p mod n: itself or its block's
                           suffix sum from it */
  int max_segments; /* min (r, n) */
  /* per-query scratch */
  double *ek, *ev; /* (n/B + 1 + B, d): window sums through each finished block's
                           end, then before each position of the unfinished block */
  double *bk, *bv; /* (max_segments + 1, d): window sums before each boundary */
  int n_bound;
  int *lo, *hi;    /* segments [lo, hi), window-relative (0 = oldest token) */
  int *blo, *bhi;  /* their boundary rows in bk, bv */
  double *score;   /* (max_segments, heads): scale·q·k̄ + log size */
  double *key;     /* (max_segments): log Σ_h exp(score) = log(size · μ) (eq. 53) */
  int *heap;       /* splittable segments, max-heap on (key, hi) */
  double *acc;     /* (d) */
  double *q;       /* (d) the query in double */
  double *log_len; /* (n + 1): log of each segment size */
  float *args;     /* (heads · max_segments) exponent arguments */
};

/* Where a query's boundary sums come from: exact double prefix sums of a window laid
 * out oldest first (pk, pv: w + 1 rows), or the layer's ring (pk NULL) for the window
 * [start, start + w) of the stream, whose finished blocks v->ek, v->ev have summed. */
typedef struct {
  const double *pk, *pv;
  guint64 start;
  int w;
  int finished; /* finished blocks in the window (ring only) */
} VccWindow;

const char *
cony_vcc_settings_invalid (const ConyAttentionConfig *c)
{
  if (cony_attention_setting (c, VCC_EXACT_TAIL) >= cony_attention_setting (c, VCC_BUDGET))
    return "vcc_exact_tail must be smaller than vcc_budget (the older tokens need at least one segment)";
  return NULL;
}

const char *
cony_vcc_invalid (const ConyAttentionConfig *c)
{
  if (c->retroactive)
    return "vcc computes the newest query's row only (single output); retroactive is not supported";
  if (c->settings[VCC_BUDGET] < 0 || c->settings[VCC_BLOCK] < 0 || c->settings[VCC_EXACT_TAIL] < 0)
    return "vcc_budget, vcc_block and vcc_exact_tail must not be negative";
  return cony_vcc_settings_invalid (c);
}

/* Tokens per block: the smallest power of two ≥ √n (≤ n), so that a query adds
 * about 2d·(n/B + B/2) ≈ 3d√n: the finished blocks and half a block on average. */
static int
offset_block (int n)
{
  int b = 1;
  while ((gint64) b * b < n)
    b *= 2;
  return b;
}

/* Rows of ek, ev: the finished blocks a window can meet, ⌈n/B⌉ + 1, and B for the
 * positions of the unfinished block. */
static int
block_rows (int n)
{
  int b = offset_block (n);
  return (n + b - 1) / b + 1 + b;
}

static ConyVcc *
vcc_new (const ConyAttention *a)
{
  ConyVcc *v = g_new0 (ConyVcc, 1);
  int d = a->d, n = a->n;
  v->blk = offset_block (n);
  v->ok = g_new0 (float, (gsize) n *d);
  v->ov = g_new0 (float, (gsize) n *d);
  v->max_segments = MIN (cony_attention_setting (&a->cfg, VCC_BUDGET), n);
  v->ek = g_new (double, (gsize) block_rows (n) * d);
  v->ev = g_new (double, (gsize) block_rows (n) * d);
  v->bk = g_new (double, (gsize) (v->max_segments + 1) * d);
  v->bv = g_new (double, (gsize) (v->max_segments + 1) * d);
  v->lo = g_new (int, v->max_segments);
  v->hi = g_new (int, v->max_segments);
  v->blo = g_new (int, v->max_segments);
  v->bhi = g_new (int, v->max_segments);
  v->score = g_new (double, (gsize) v->max_segments * a->heads);
  v->key = g_new (double, v->max_segments);
  v->heap = g_new (int, v->max_segments);
  v->acc = g_new (double, d);
  v->q = g_new (double, d);
  v->log_len = g_new (double, n + 1);
  for (int i = 1; i <= n; i++)
    v->log_len[i] = log ((double) i);
  v->args = g_new (float, (gsize) v->max_segments * a->heads + a->heads);
  return v;
}

void
cony_vcc_create (ConyAttention *a)
{
  a->vcc = vcc_new (a);
}

void
cony_vcc_free (ConyVcc *v)
{
  if (!v)
    return;
  void *buffers[] = { v->ok, v->ov, v->ek, v->ev, v->bk, v->bv, v->lo, v->hi, v->blo, v->bhi,
    v->score, v->key, v->heap, v->acc, v->q, v->log_len, v->args };
  for (guint i = 0; i < G_N_ELEMENTS (buffers); i++)
    g_free (buffers[i]);
  g_free (v);
}

void
cony_vcc_reset (ConyAttention *a)
{
  memset (a->vcc->ok, 0, sizeof (float) * a->n * a->d);
  memset (a->vcc->ov, 0, sizeof (float) * a->n * a->d);
}

gsize
cony_vcc_config_bytes (const ConyAttentionConfig *c)
{
  gsize n = c->window, d = c->d, H = c->heads;
  gsize segments = MIN ((gsize) cony_attention_setting (c, VCC_BUDGET), n);
  return sizeof (ConyVcc) + 2 * n * d * sizeof (float) /* block-local sums */
      + 2 * ((gsize) block_rows ((int) n) + segments + 1) * d * sizeof (double) /* ek, ev, bk, bv */
      + segments
      * (5 * sizeof (int) + (H + 1) * sizeof (double)) /* lo, hi, blo, bhi, heap, scores, key */
      + 2 * d * sizeof (double) + (n + 1) * sizeof (double) /* acc, q, log table */
      + (segments * H + H) * sizeof (float);                /* exponent arguments */
}

gsize
cony_vcc_state_bytes (const ConyAttention *a)
{
  return 2 * sizeof (float) * (gsize) a->n * a->d;
}

static float *
ring_row (const ConyAttention *a, float *ring, guint64 p)
{
  return ring + (p % (guint64) a->n) * a->d;
}

void
cony_vcc_advance (ConyAttention *a)
{
  ConyVcc *v = a->vcc;
  int d = a->d, B = v->blk;
  guint64 p = a->t;
  const float *x[2] = { a->qkv + d, a->qkv + 2 * d };
  float *ring[2] = { v->ok, v->ov };
  for (int t = 0; t < 2; t++) {
    memcpy (ring_row (a, ring[t], p), x[t], sizeof (float) * d);
    if ((p + 1) % (guint64) B)
      continue;
    /* The block is finished: its tokens become suffix sums, so that a window starting
     * inside it needs none of its older tokens. */
    double sum[d];
    memset (sum, 0, sizeof sum);
    for (guint64 i = p + 1; i-- > p + 1 - (guint64) B;) {
      float *r = ring_row (a, ring[t], i);
      for (int c = 0; c < d; c++)
        r[c] = (float) (sum[c] += r[c]);
    }
  }
}

/* The window [start, end)'s sums into v->ek, v->ev: row b is the sum of its tokens up to
 * the end of its b-th finished block; the rows after those (one per position of the
 * unfinished block, from its start to @end) the sum of its tokens before that
 * position. Returns the number of finished blocks. */
static int
sum_blocks (const ConyAttention *a, guint64 start, guint64 end)
{
  ConyVcc *v = a->vcc;
  int d = a->d, B = v->blk, count = 0;
  guint64 unfinished = MAX (start, end - end % (guint64) B);
  double *e[2] = { v->ek, v->ev };
  float *ring[2] = { v->ok, v->ov };
  /* the finished blocks' suffix sums from the window start or their first token, then
   * the unfinished block's tokens from the sum before it */
  for (guint64 p = start; p < unfinished; p = p - p % (guint64) B + (guint64) B, count++)
    for (int t = 0; t < 2; t++) {
      const float *s = ring_row (a, ring[t], p);
      double *row = e[t] + (gsize) count * d;
      for (int c = 0; c < d; c++)
        row[c] = (count ? row[c - d] : 0.0) + s[c];
    }
  for (int t = 0; t < 2; t++) {
    double *row = e[t] + (gsize) count * d;
    if (count)
      memcpy (row, row - d, sizeof (double) * d);
    else
      memset (row, 0, sizeof (double) * d);
    for (guint64 p = unfinished; p < end; p++, row += d) {
      const float *s = ring_row (a, ring[t], p);
      for (int c = 0; c < d; c++)
        row[c + d] = row[c] + s[c];
    }
  }
  return count;
}

/* The sums of the window's tokens before window position @i, into boundary row n_bound;
 * returns the row. */
static int
add_boundary (const ConyAttention *a, const VccWindow *win, int i)
{
  ConyVcc *v = a->vcc;
  int d = a->d, B = v->blk, row = v->n_bound++;
  double *out[2] = { v->bk + (gsize) row * d, v->bv + (gsize) row * d };
  if (win->pk) {
    memcpy (out[0], win->pk + (gsize) i * d, sizeof (double) * d);
    memcpy (out[1], win->pv + (gsize) i * d, sizeof (double) * d);
    return row;
  }
  const double *e[2] = { v->ek, v->ev };
  float *ring[2] = { v->ok, v->ov };
  guint64 p = win->start + (guint64) i, end = win->start + (guint64) win->w;
  guint64 unfinished = MAX (win->start, end - end % (guint64) B);
  for (int t = 0; t < 2; t++) {
    if (p >= unfinished) { /* a row of its own */
      memcpy (out[t], e[t] + (win->finished + (p - unfinished)) * (gsize) d, sizeof (double) * d);
      continue;
    }
    /* a finished block: the sum to its end less the suffix from p */
    const double *base = e[t] + (p / (guint64) B - win->start / (guint64) B) * (gsize) d;
    const float *s = ring_row (a, ring[t], p);
    for (int c = 0; c < d; c++)
      out[t][c] = base[c] - s[c];
  }
  return row;
}

/* Coarse block size for u compressed tokens and rc segments: the smallest block·2^k
 * whose blocks number at most rc/2 (at least 1), so that half the budget or more is
 * left for refinement. */
static int
coarse_block (int block, int u, int rc)
{
  gint64 b = MAX (block, 1), target = MAX (1, rc / 2);
  while ((u + b - 1) / b > target)
    b *= 2;
  return (int) MIN (b, (gint64) u);
}

/* q·(b − a) over @n components, in four interleaved partial sums: a fixed order, and
 * one AVX2 vector where the CPU has it. */
static G_ALWAYS_INLINE inline double
dot_diff (const double *restrict q, const double *restrict a, const double *restrict b, int n)
{
  double s[4] = { 0.0, 0.0, 0.0, 0.0 };
  int c = 0;
  for (; c + 4 <= n; c += 4)
    for (int l = 0; l < 4; l++)
      s[l] += q[c + l] * (b[c + l] - a[c + l]);
  for (; c < n; c++)
    s[0] += q[c] * (b[c] - a[c]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

/* Scores of segment @j (scale·q·k̄ + log size, per head) and its priority key; the
 * query is in v->q. */
static CONY_CLONES void
segment_eval (const ConyAttention *a, int j)
{
  ConyVcc *v = a->vcc;
  int hd = a->hd, H = a->heads, len = v->hi[j] - v->lo[j];
  const double *k0 = v->bk + (gsize) v->blo[j] * a->d, *k1 = v->bk + (gsize) v->bhi[j] * a->d;
  double *s = v->score + (gsize) j * H, loglen = v->log_len[len], inv = 1.0 / len;
  double max = -INFINITY;
  for (int h = 0; h < H; h++) {
    s[h] = a->scale * dot_diff (v->q + h * hd, k0 + h * hd, k1 + h * hd, hd) * inv + loglen;
    max = s[h] > max ? s[h] : max; /* not fmax: a libm call in the hot loop */
  }
  /* eq. 53 with one VIP token, summed over heads: log Σ_h exp(score_h) */
  float *e = v->args;
  for (int h = 0; h < H; h++)
    e[h] = (float) (s[h] - max);
  cony_exp_batch (e, H);
  double sum = 0.0;
  for (int h = 0; h < H; h++)
    sum += e[h];
  v->key[j] = max + log (sum);
}

/* Heap order: higher priority first; on a tie the newer segment. */
static gboolean
heap_before (const ConyVcc *v, int x, int y)
{
  return v->key[x] > v->key[y] || (v->key[x] == v->key[y] && v->hi[x] > v->hi[y]);
}

static void
heap_push (ConyVcc *v, int *len, int j)
{
  int i = (*len)++;
  while (i > 0 && heap_before (v, j, v->heap[(i - 1) / 2])) {
    v->heap[i] = v->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  v->heap[i] = j;
}

static int
heap_pop (ConyVcc *v, int *len)
{
  int top = v->heap[0], last = v->heap[--(*len)], i = 0;
  for (;;) {
    int child = 2 * i + 1;
    if (child >= *len)
      break;
    if (child + 1 < *len && heap_before (v, v->heap[child + 1], v->heap[child]))
      child++;
    if (!heap_before (v, v->heap[child], last))
      break;
    v->heap[i] = v->heap[child];
    i = child;
  }
  v->heap[i] = last;
  return top;
}

/* Adds segment [lo, hi) with boundary rows @blo, @bhi as number @j, scored; splittable
 * ones enter the heap. */
static void
add_segment (const ConyAttention *a, int j, int lo, int hi, int blo, int bhi, int *heap_len)
{
  ConyVcc *v = a->vcc;
  v->lo[j] = lo, v->hi[j] = hi;
  v->blo[j] = blo, v->bhi[j] = bhi;
  segment_eval (a, j);
  if (hi - lo > 1)
    heap_push (v, heap_len, j);
}

/* The partition for query @q of the window; returns the segment count. Each boundary
 * between segments gets its row of window sums once. */
static int
build_partition (const ConyAttention *a, const VccWindow *win, const float *q)
{
  ConyVcc *v = a->vcc;
  int w = win->w, tail = MIN (a->cfg.settings[VCC_EXACT_TAIL], w), u = w - tail, count = 0,
      heap_len = 0;
  for (int c = 0; c < a->d; c++)
    v->q[c] = q[c];
  v->n_bound = 0;
  int row_u = add_boundary (a, win, u), prev = row_u;
  for (int i = u; i < w; i++) {
    int next = add_boundary (a, win, i + 1);
    add_segment (a, count++, i, i + 1, prev, next, &heap_len);
    prev = next;
  }
  if (u == 0)
    return count;
  int rc = MIN (a->cfg.settings[VCC_BUDGET] - tail, u),
      b = coarse_block (a->cfg.settings[VCC_BLOCK], u, rc);
  int first = count, row_hi = row_u;
  for (int hi = u; hi > 0; hi -= b) {
    int lo = MAX (0, hi - b), row_lo = add_boundary (a, win, lo);
    add_segment (a, count++, lo, hi, row_lo, row_hi, &heap_len);
    row_hi = row_lo;
  }
  /* Top-down refinement: split the segment of highest priority into halves (the
   * older one takes the odd token) until the budget is spent. */
  while (count - first < rc && heap_len > 0) {
    int j = heap_pop (v, &heap_len), lo = v->lo[j], hi = v->hi[j], mid = hi - (hi - lo) / 2;
    int blo = v->blo[j], bhi = v->bhi[j], bmid = add_boundary (a, win, mid);
    add_segment (a, j, lo, mid, blo, bmid, &heap_len);
    add_segment (a, count++, mid, hi, bmid, bhi, &heap_len);
  }
  return count;
}

/* Softmax over the segments' scores, per head, weighting the mean values. */
static CONY_CLONES void
combine (const ConyAttention *a, int count, float *out)
{
  ConyVcc *v = a->vcc;
  int H = a->heads, hd = a->hd, d = a->d;
  float *e = v->args;
  double max[H], sum[H];
  for (int h = 0; h < H; h++) {
    max[h] = -INFINITY;
    for (int j = 0; j < count; j++) {
      double x = v->score[(gsize) j * H + h];
      max[h] = x > max[h] ? x : max[h];
    }
    for (int j = 0; j < count; j++)
      e[(gsize) h * count + j] = (float) (v->score[(gsize) j * H + h] - max[h]);
  }
  cony_exp_batch (e, H * count);
  memset (v->acc, 0, sizeof (double) * d);
  for (int h = 0; h < H; h++)
    sum[h] = 0.0;
  for (int j = 0; j < count; j++) {
    const double *v0 = v->bv + (gsize) v->blo[j] * d, *v1 = v->bv + (gsize) v->bhi[j] * d;
    double inv = 1.0 / (v->hi[j] - v->lo[j]);
    for (int h = 0; h < H; h++) {
      double wgt = e[(gsize) h * count + j];
      sum[h] += wgt;
      wgt *= inv;
      for (int c = h * hd; c < (h + 1) * hd; c++)
        v->acc[c] += wgt * (v1[c] - v0[c]);
    }
  }
  for (int h = 0; h < H; h++)
    for (int c = h * hd; c < (h + 1) * hd; c++)
      out[c] = (float) (v->acc[c] / sum[h]);
}

static void
query (const ConyAttention *a, const VccWindow *win, const float *q, float *out)
{
  combine (a, build_partition (a, win, q), out);
}

void
cony_vcc_emit (ConyAttention *a, const float *Q, int rows)
{
  int w = (int) MIN (a->t, (guint64) a->n);
  VccWindow win = { NULL, NULL, a->t - (guint64) w, w, 0 };
  win.finished = sum_blocks (a, win.start, a->t);
  for (int r = 0; r < rows; r++)
    query (a, &win, Q + (gsize) r * a->d, a->heads_out + (gsize) r * a->d);
}

void
cony_vcc_windowed (ConyAttention *a, int w, int r0, float *out)
{
  int d = a->d;
  g_autofree double *pk = g_new0 (double, (gsize) (w + 1) * d);
  g_autofree double *pv = g_new0 (double, (gsize) (w + 1) * d);
  for (int i = 0; i < w; i++)
    for (int c = 0; c < d; c++) {
      pk[(gsize) (i + 1) * d + c] = pk[(gsize) i * d + c] + a->win_k[(gsize) i * d + c];
      pv[(gsize) (i + 1) * d + c] = pv[(gsize) i * d + c] + a->win_v[(gsize) i * d + c];
    }
  VccWindow win = { pk, pv, 0, w, 0 };
  for (int r = r0; r < w; r++)
    query (a, &win, a->win_q + (gsize) r * d, out + (gsize) (r - r0) * d);
}

/* aarch64 gcc 12 stops with an internal compiler error (vect_transform_reduction) when
 * it vectorises this fmax reduction; the loop runs once per rebuild, not per step. */
#if defined(__aarch64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
__attribute__ ((optimize ("no-tree-vectorize")))
#endif
double
cony_vcc_state_magnitude (const ConyAttention *a)
{
  double m = 0.0;
  for (gsize i = 0; i < (gsize) a->n * a->d; i++)
    m = fmax (m, fmax (fabs (a->vcc->ok[i]), fabs (a->vcc->ov[i])));
  return m;
}

/* Per step once the window is full: one add per column of keys and values for each
 * finished block in the window (n/B rows) and for each segment boundary, the tail's
 * and the coarse blocks' scores, two per split, then the softmax and the weighted
 * value sums. A segment's score costs d subtractions and d multiply-adds plus, per
 * head, an exp and a log-sum term. */
double
cony_vcc_flops (const ConyAttentionConfig *c)
{
  int n = c->window, r = cony_attention_setting (c, VCC_BUDGET);
  int block = cony_attention_setting (c, VCC_BLOCK);
  int tail = MIN (cony_attention_setting (c, VCC_EXACT_TAIL), n), u = n - tail;
  double d = c->d, H = c->heads, segments = tail, scored = tail;
  if (u > 0) {
    int rc = MIN (r - tail, u), b = coarse_block (block, u, rc), blocks = (u + b - 1) / b;
    /* splits stop at rc segments, or earlier when every segment is one token */
    double splits = MAX (0, rc - blocks);
    segments += blocks + splits;
    scored += blocks + 2 * splits;
  }
  double score = 2 * d + 2 * H + 2, out = 2 * d + 3 * H;
  /* the finished blocks, on average (B − 1)/2 unfinished tokens, the boundaries */
  int B = offset_block (n);
  double sums = 2 * d * (n / B + (B - 1) / 2.0 + segments + 1);
  return sums + scored * score + segments * out + d;
}
