/* The vcc attention variant: VIP-token centric compression (VCC paper §6.5 (2)) of the
 * window, stepped one token at a time. The newest query is the VIP token; the window
 * is cut into at most r segments (coarse blocks refined top-down by the paper's
 * priority, eq. 53), and the query attends to the segments' mean keys and values with
 * a log(segment size) correction. docs/attention.md has the exact rule.
 *
 * State: prefix sums of the keys and values over the stream (double), n + 1 entries in
 * a ring, so that any segment's sums are one subtraction: per-step cost depends on r,
 * not on n. The sums are rebased every n steps (the window start's entry subtracted
 * from all), so their size, and with it the rounding of a difference, stays bounded. */
#include "attention-private.h"
#include "linalg.h"

#include <math.h>
#include <string.h>

#define VCC_DEFAULT_BUDGET 64
#define VCC_DEFAULT_BLOCK 1

struct _ConyVcc {
  int cap;              /* prefix entries kept: n + 1 (window start .. newest end) */
  double *pk, *pv;      /* (cap, d): sums of k and v over the stream positions before p,
                           entry p in slot p mod cap */
  int max_segments;     /* min (r, n) */
  /* per-query scratch */
  int *lo, *hi;         /* segments [lo, hi), window-relative (0 = oldest token) */
  double *score;        /* (max_segments, heads): scale·q·k̄ + log size */
  double *key;          /* (max_segments): log Σ_h exp(score) = log(size · μ) (eq. 53) */
  int *heap;            /* splittable segments, max-heap on (key, hi) */
  double *acc;          /* (d) */
  double *q;            /* (d) the query in double */
  double *log_len;      /* (n + 1): log of each segment size */
  float *args;          /* (heads · max_segments) exponent arguments */
};

/* A window's prefix sums: entry i (0 <= i <= w) is the sum over the window's first i
 * tokens plus a common offset, at row (start + i) mod cap. */
typedef struct {
  const double *pk, *pv;
  guint64 start;
  int cap, d;
} VccWindow;

static const double *
prefix_row (const VccWindow *win, const double *p, int i)
{
  return p + ((win->start + (guint64) i) % (guint64) win->cap) * (gsize) win->d;
}

const char *
cony_vcc_invalid (const ConyAttentionConfig *c)
{
  if (c->retroactive)
    return "vcc computes the newest query's row only (single output); retroactive is not supported";
  if (c->vcc_budget < 0 || c->vcc_block < 0 || c->vcc_exact_tail < 0)
    return "vcc_budget, vcc_block and vcc_exact_tail must not be negative";
  int budget = c->vcc_budget ? c->vcc_budget : VCC_DEFAULT_BUDGET;
  if (c->vcc_exact_tail >= budget)
    return "vcc_exact_tail must be smaller than vcc_budget (the older tokens need at least one segment)";
  return NULL;
}

void
cony_vcc_resolve_config (ConyAttentionConfig *c)
{
  if (c->variant != CONY_ATTENTION_VCC)
    return;
  if (c->vcc_budget == 0)
    c->vcc_budget = VCC_DEFAULT_BUDGET;
  if (c->vcc_block == 0)
    c->vcc_block = VCC_DEFAULT_BLOCK;
}

ConyVcc *
cony_vcc_new (const ConyAttention *a)
{
  ConyVcc *v = g_new0 (ConyVcc, 1);
  int d = a->d, n = a->n;
  v->cap = n + 1;
  v->pk = g_new0 (double, (gsize) v->cap * d);
  v->pv = g_new0 (double, (gsize) v->cap * d);
  v->max_segments = MIN (a->cfg.vcc_budget, n);
  v->lo = g_new (int, v->max_segments);
  v->hi = g_new (int, v->max_segments);
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
cony_vcc_free (ConyVcc *v)
{
  if (!v)
    return;
  void *buffers[] = { v->pk, v->pv, v->lo, v->hi, v->score, v->key, v->heap, v->acc, v->q,
                       v->log_len, v->args };
  for (guint i = 0; i < G_N_ELEMENTS (buffers); i++)
    g_free (buffers[i]);
  g_free (v);
}

void
cony_vcc_reset (ConyAttention *a)
{
  memset (a->vcc->pk, 0, sizeof (double) * a->vcc->cap * a->d);
  memset (a->vcc->pv, 0, sizeof (double) * a->vcc->cap * a->d);
}

gsize
cony_vcc_config_bytes (const ConyAttentionConfig *c)
{
  gsize n = c->window, d = c->d, H = c->heads;
  gsize segments = MIN ((gsize) (c->vcc_budget ? c->vcc_budget : VCC_DEFAULT_BUDGET), n);
  return sizeof (ConyVcc) + 2 * (n + 1) * d * sizeof (double)          /* prefix sums */
         + segments * (3 * sizeof (int) + (H + 1) * sizeof (double))   /* lo, hi, heap, scores, key */
         + 2 * d * sizeof (double) + (n + 1) * sizeof (double)         /* acc, q, log table */
         + (segments * H + H) * sizeof (float);                        /* exponent arguments */
}

gsize
cony_vcc_state_bytes (const ConyAttention *a)
{
  return 2 * sizeof (double) * (gsize) a->vcc->cap * a->d;
}

/* Subtracts the entry of @base from every stored entry: differences stay what they
 * were, and entries stay as small as the sums over one or two windows. */
static void
rebase (ConyAttention *a, guint64 base)
{
  ConyVcc *v = a->vcc;
  int d = a->d;
  double *tables[2] = { v->pk, v->pv };
  for (int t = 0; t < 2; t++) {
    double *p = tables[t], origin[d];
    memcpy (origin, p + (base % (guint64) v->cap) * d, sizeof origin);
    for (int slot = 0; slot < v->cap; slot++)
      for (int c = 0; c < d; c++)
        p[(gsize) slot * d + c] -= origin[c];
  }
}

void
cony_vcc_advance (ConyAttention *a)
{
  ConyVcc *v = a->vcc;
  int d = a->d, n = a->n;
  guint64 p = a->t;
  const float *k = a->qkv + d, *val = a->qkv + 2 * d;
  gsize from = (p % (guint64) v->cap) * d, to = ((p + 1) % (guint64) v->cap) * d;
  for (int c = 0; c < d; c++) {
    v->pk[to + c] = v->pk[from + c] + k[c];
    v->pv[to + c] = v->pv[from + c] + val[c];
  }
  /* Once a window: rebase on the start of the window that ends with this token. */
  if ((p + 1) % (guint64) n == 0)
    rebase (a, p + 1 - (guint64) n);
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
segment_eval (const ConyAttention *a, const VccWindow *win, int j)
{
  ConyVcc *v = a->vcc;
  int hd = a->hd, H = a->heads, len = v->hi[j] - v->lo[j];
  const double *k0 = prefix_row (win, win->pk, v->lo[j]), *k1 = prefix_row (win, win->pk, v->hi[j]);
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

/* Adds segment [lo, hi) as number @j, scored; splittable ones enter the heap. */
static void
add_segment (const ConyAttention *a, const VccWindow *win, int j, int lo, int hi, int *heap_len)
{
  ConyVcc *v = a->vcc;
  v->lo[j] = lo;
  v->hi[j] = hi;
  segment_eval (a, win, j);
  if (hi - lo > 1)
    heap_push (v, heap_len, j);
}

/* The partition for query @q of a window of @w tokens; returns the segment count. */
static int
build_partition (const ConyAttention *a, const VccWindow *win, int w, const float *q)
{
  ConyVcc *v = a->vcc;
  int tail = MIN (a->cfg.vcc_exact_tail, w), u = w - tail, count = 0, heap_len = 0;
  for (int c = 0; c < a->d; c++)
    v->q[c] = q[c];
  for (int i = u; i < w; i++)
    add_segment (a, win, count++, i, i + 1, &heap_len);
  if (u == 0)
    return count;
  int rc = MIN (a->cfg.vcc_budget - tail, u), b = coarse_block (a->cfg.vcc_block, u, rc);
  int first = count;
  for (int hi = u; hi > 0; hi -= b)
    add_segment (a, win, count++, MAX (0, hi - b), hi, &heap_len);
  /* Top-down refinement: split the segment of highest priority into halves (the
   * older one takes the odd token) until the budget is spent. */
  while (count - first < rc && heap_len > 0) {
    int j = heap_pop (v, &heap_len), lo = v->lo[j], hi = v->hi[j], mid = hi - (hi - lo) / 2;
    add_segment (a, win, j, lo, mid, &heap_len);
    add_segment (a, win, count++, mid, hi, &heap_len);
  }
  return count;
}

/* Softmax over the segments' scores, per head, weighting the mean values. */
static CONY_CLONES void
combine (const ConyAttention *a, const VccWindow *win, int count, float *out)
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
    const double *v0 = prefix_row (win, win->pv, v->lo[j]), *v1 = prefix_row (win, win->pv, v->hi[j]);
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
query (const ConyAttention *a, const VccWindow *win, int w, const float *q, float *out)
{
  combine (a, win, build_partition (a, win, w, q), out);
}

void
cony_vcc_emit (ConyAttention *a, const float *Q, int rows)
{
  ConyVcc *v = a->vcc;
  int w = (int) MIN (a->t, (guint64) a->n);
  VccWindow win = { v->pk, v->pv, a->t - (guint64) w, v->cap, a->d };
  for (int r = 0; r < rows; r++)
    query (a, &win, w, Q + (gsize) r * a->d, a->heads_out + (gsize) r * a->d);
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
  VccWindow win = { pk, pv, 0, w + 1, d };
  for (int r = r0; r < w; r++)
    query (a, &win, w, a->win_q + (gsize) r * d, out + (gsize) (r - r0) * d);
}

double
cony_vcc_prefix_magnitude (const ConyAttention *a)
{
  double m = 0.0;
  for (gsize i = 0; i < (gsize) a->vcc->cap * a->d; i++)
    m = fmax (m, fmax (fabs (a->vcc->pk[i]), fabs (a->vcc->pv[i])));
  return m;
}

/* Per step once the window is full: the tail's and the coarse blocks' scores, two per
 * split, then the softmax and the weighted value sums. A segment's score costs d
 * subtractions and d multiply-adds plus, per head, an exp and a log-sum term. */
double
cony_vcc_flops (const ConyAttentionConfig *c)
{
  int n = c->window, r = c->vcc_budget ? c->vcc_budget : VCC_DEFAULT_BUDGET;
  int block = c->vcc_block ? c->vcc_block : VCC_DEFAULT_BLOCK;
  int tail = MIN (c->vcc_exact_tail, n), u = n - tail;
  double d = c->d, H = c->heads, segments = tail, scored = tail;
  if (u > 0) {
    int rc = MIN (r - tail, u), b = coarse_block (block, u, rc), blocks = (u + b - 1) / b;
    /* splits stop at rc segments, or earlier when every segment is one token */
    double splits = MAX (0, rc - blocks);
    segments += blocks + splits;
    scored += blocks + 2 * splits;
  }
  double score = 2 * d + 2 * H + 2, out = 2 * d + 3 * H;
  return scored * score + segments * out + d;
}
