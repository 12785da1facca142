/* Every continual attention variant equals its non-continual counterpart on the same
 * window, at every step; exponentials do not overflow; running sums do not drift. */
#include "cony/attention.h"
#include "cony/error.h"
#include "gemv-private.h"
#include "linalg.h"
#include "testutil.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <string.h>

typedef struct {
  int d, heads, n, m;
  float *w_in, *b_in, *w_out, *b_out, *ql, *kl;
} Setup;

static Setup *
setup_new (int d, int heads, int n, int m, guint32 seed)
{
  GRand *rng = g_rand_new_with_seed (seed);
  Setup *s = g_new0 (Setup, 1);
  s->d = d, s->heads = heads, s->n = n, s->m = m;
  s->w_in = g_new (float, 3 * d * d);
  s->b_in = g_new (float, 3 * d);
  s->w_out = g_new (float, d *d);
  s->b_out = g_new (float, d);
  s->ql = g_new (float, m *d);
  s->kl = g_new (float, m *d);
  cony_test_fill_normal (rng, s->w_in, 3 * d * d, 1.0 / sqrt (d));
  cony_test_fill_normal (rng, s->b_in, 3 * d, 0.1);
  cony_test_fill_normal (rng, s->w_out, d * d, 1.0 / sqrt (d));
  cony_test_fill_normal (rng, s->b_out, d, 0.1);
  cony_test_fill_normal (rng, s->ql, m * d, 1.0);
  cony_test_fill_normal (rng, s->kl, m * d, 1.0);
  g_rand_free (rng);
  return s;
}

static void
setup_free (Setup *s)
{
  g_free (s->w_in), g_free (s->b_in), g_free (s->w_out), g_free (s->b_out);
  g_free (s->ql), g_free (s->kl);
  g_free (s);
}

static ConyAttention *
make_layer_with (const Setup *s, ConyAttentionVariant v, gboolean retro, int m, const float *ql,
    const float *kl)
{
  ConyAttentionConfig c = { .variant = v,
    .d = s->d,
    .heads = s->heads,
    .window = s->n,
    .landmarks = m,
    .retroactive = retro };
  ConyAttentionWeights w = { s->w_in, s->b_in, s->w_out, s->b_out, ql, kl };
  GError *error = NULL;
  ConyAttention *a = cony_attention_new (&c, &w, &error);
  g_assert_no_error (error);
  return a;
}

static ConyAttention *
make_layer (const Setup *s, ConyAttentionVariant v, gboolean retro)
{
  return make_layer_with (s, v, retro, s->m, s->ql, s->kl);
}

static gboolean
cony_all_finite_test (const float *x, gsize n)
{
  for (gsize i = 0; i < n; i++)
    if (!isfinite (x[i]))
      return FALSE;
  return TRUE;
}

/* Steps @cont over @T tokens and, at every step, compares with @win's forward_window
 * on the same window. */
static double
compare_with_window (ConyAttention *cont, ConyAttention *win, const float *x, int T)
{
  const ConyAttentionConfig *c = cony_attention_get_config (cont);
  int rows = cony_attention_output_rows (cont), d = c->d, n = c->window;
  float *a = g_new (float, (gsize) rows *d), *b = g_new (float, (gsize) rows *d);
  double worst = 0.0;
  for (int t = 0; t < T; t++) {
    cony_attention_step (cont, x + (gsize) t * d, a);
    int w = MIN (t + 1, n);
    cony_attention_forward_window (win, x + (gsize) (t + 1 - w) * d, w, b);
    worst = fmax (worst, cony_test_rel_err_floor (a, b, (gsize) rows * d));
  }
  g_free (a), g_free (b);
  return worst;
}

typedef struct {
  ConyAttentionVariant continual, windowed;
  int d, heads, n, m;
  float boost; /* > 1: weights and landmarks scaled up so that |q·k|/√hd reaches hundreds */
} Pair;

/* A continual variant, the windowed one it must equal, d, heads, window n, landmarks m. */
#define PAIR(cont, win, d_, heads_, n_, m_) \
  { \
    .continual = CONY_ATTENTION_##cont, .windowed = CONY_ATTENTION_##win, .d = d_, \
    .heads = heads_, .n = n_, .m = m_ \
  }

/* Scales the projections (and fixed landmarks) of a setup by @boost. */
static void
setup_boost (Setup *s, float boost)
{
  if (boost <= 1.0f)
    return;
  for (int j = 0; j < 3 * s->d * s->d; j++)
    s->w_in[j] *= boost;
  for (int j = 0; j < s->m * s->d; j++)
    s->ql[j] *= boost * boost, s->kl[j] *= boost * boost;
}

static void
test_pair (gconstpointer data)
{
  const Pair *p = data;
  for (int retro = 0; retro <= 1; retro++) {
    Setup *s = setup_new (p->d, p->heads, p->n, p->m, 7 + p->n + p->m);
    setup_boost (s, p->boost);
    ConyAttention *cont = make_layer (s, p->continual, retro);
    ConyAttention *win = make_layer (s, p->windowed, retro);
    float *x = cony_test_normal_tokens (4 * p->n + 3, p->d, 99, 1.0);
    double err = compare_with_window (cont, win, x, 4 * p->n + 3);
    g_test_message ("%s vs %s retro=%d n=%d m=%d heads=%d: max rel err %.3g",
        cony_attention_variant_name (p->continual), cony_attention_variant_name (p->windowed),
        retro, p->n, p->m, p->heads, err);
    g_assert_cmpfloat (err, <=, 1e-5);
    /* After a reset the layer is a fresh stream again. */
    cony_attention_reset (cont);
    g_assert_cmpfloat (compare_with_window (cont, win, x, p->n + 2), <=, 1e-5);
    g_free (x);
    cony_attention_free (cont), cony_attention_free (win);
    setup_free (s);
  }
}

/* Projected q and k of token @x, computed by the very same call the layer makes (so
 * that reference landmarks are the layer's to the last bit). */
static void
project_qk (const Setup *s, const float *x, float *q, float *k)
{
  int d = s->d;
  float qkv[3 * d];
  memcpy (qkv, s->b_in, sizeof (float) * 3 * d);
  /* the layer's own projection kernel: the schedule's landmarks then match the layer's
   * bit for bit (the landmark pseudo-inverse amplifies rounding differences) */
  ConyGemvMatrix w;
  cony_gemv_matrix_init (&w, s->w_in, 3 * d, d, cony_gemv_f16_enabled ());
  cony_gemv (&w, x, qkv);
  cony_gemv_matrix_clear (&w);
  memcpy (q, qkv, sizeof (float) * d);
  memcpy (k, qkv + d, sizeof (float) * d);
}

/* Landmarks the cony schedule holds at step @t (docs/attention.md), written as
 * (heads, ml, hd) arrays; returns ml. */
static int
schedule_landmarks (const Setup *s, const float *x, int t, float *ql, float *kl)
{
  int n = s->n, m = s->m, d = s->d, hd = d / s->heads;
  /* Segment boundaries from the stream start. */
  int starts[4096], lens[4096], count = 0, pos = 0;
  for (int j = 0; pos <= t; j++) {
    lens[count] = n / m + ((j % m) < n % m);
    starts[count++] = pos;
    pos += lens[count - 1];
  }
  int complete = 0;
  while (complete < count && starts[complete] + lens[complete] - 1 <= t)
    complete++;
  int first, ml;
  if (t < n - 1) { /* warm-up: all segments so far, the last possibly incomplete */
    first = 0;
    ml = count;
  } else {
    first = complete - m;
    ml = m;
  }
  float q[d], k[d];
  for (int j = 0; j < ml; j++) {
    int seg = first + j, len = MIN (lens[seg], t + 1 - starts[seg]);
    double sq[d], sk[d];
    memset (sq, 0, sizeof sq);
    memset (sk, 0, sizeof sk);
    for (int i = 0; i < len; i++) {
      project_qk (s, x + (gsize) (starts[seg] + i) * d, q, k);
      for (int c = 0; c < d; c++)
        sq[c] += q[c], sk[c] += k[c];
    }
    for (int h = 0; h < s->heads; h++)
      for (int c = 0; c < hd; c++) {
        ql[((gsize) h * ml + j) * hd + c] = (float) (sq[h * hd + c] / len);
        kl[((gsize) h * ml + j) * hd + c] = (float) (sk[h * hd + c] / len);
      }
  }
  return ml;
}

static gboolean
is_update_step (const Setup *s, int t)
{
  int pos = 0;
  for (int j = 0; pos <= t; j++) {
    pos += s->n / s->m + ((j % s->m) < s->n % s->m);
    if (pos - 1 == t)
      return TRUE;
  }
  return FALSE;
}

static void
test_cony_schedule (gconstpointer data)
{
  const Pair *p = data;
  for (int retro = 0; retro <= 1; retro++) {
    Setup *s = setup_new (p->d, p->heads, p->n, p->m, 11 + p->n);
    setup_boost (s, p->boost);
    ConyAttention *cony = make_layer (s, CONY_ATTENTION_CONY, retro);
    ConyAttention *plain = make_layer (s, CONY_ATTENTION_NYSTROM, retro);
    int T = 4 * p->n + 5, d = p->d, rows = cony_attention_output_rows (cony);
    float *x = cony_test_normal_tokens (T, d, 5, 1.0);
    float *a = g_new (float, (gsize) rows *d), *b = g_new (float, (gsize) rows *d);
    float *ql = g_new (float, (gsize) p->m *d), *kl = g_new (float, (gsize) p->m *d);
    double worst = 0.0, worst_update = 0.0;
    int updates = 0;
    for (int t = 0; t < T; t++) {
      cony_attention_step (cony, x + (gsize) t * d, a);
      int w = MIN (t + 1, p->n);
      const float *win = x + (gsize) (t + 1 - w) * d;
      int ml = schedule_landmarks (s, x, t, ql, kl);
      ConyAttention *ref = make_layer_with (s, CONY_ATTENTION_NYSTROM_FIXED, retro, ml, ql, kl);
      cony_attention_forward_window (ref, win, w, b);
      double e = cony_test_rel_err_floor (a, b, (gsize) rows * d);
      if (g_getenv ("CONY_TEST_TRACE"))
        g_printerr ("t=%d ml=%d update=%d err=%.3g\n", t, ml, is_update_step (s, t), e);
      worst = fmax (worst, e);
      cony_attention_free (ref);
      if (t >= p->n - 1 && is_update_step (s, t) && p->n % p->m == 0) {
        cony_attention_forward_window (plain, win, w, b);
        worst_update = fmax (worst_update, cony_test_rel_err_floor (a, b, (gsize) rows * d));
        updates++;
      }
    }
    g_test_message ("cony retro=%d n=%d m=%d heads=%d: vs schedule Nyström %.3g, vs nystrom at %d "
                    "update steps %.3g",
        retro, p->n, p->m, p->heads, worst, updates, worst_update);
    g_assert_cmpfloat (worst, <=, 1e-5);
    g_assert_cmpfloat (worst_update, <=, 1e-5);
    if (p->n % p->m == 0)
      g_assert_cmpint (updates, >=, 3 * p->m);
    g_free (x), g_free (a), g_free (b), g_free (ql), g_free (kl);
    cony_attention_free (cony), cony_attention_free (plain);
    setup_free (s);
  }
}

/* Large scores: exp(score) would overflow float (and double) without offsets. The
 * first one is measured by test_overflow_scores_are_large. */
static const Pair large_pairs[] = {
  { CONY_ATTENTION_CONTINUAL, CONY_ATTENTION_REGULAR, 8, 1, 8, 2, 8.0f },
  { CONY_ATTENTION_CONY_FIXED, CONY_ATTENTION_NYSTROM_FIXED, 8, 1, 8, 2, 8.0f },
  { CONY_ATTENTION_CONY, CONY_ATTENTION_NYSTROM, 8, 1, 8, 2, 8.0f },
};

/* Multi-token steps (paper IV-C): @count tokens enter together and the outputs of the
 * @count newest queries equal the last @count rows of the windowed computation on the
 * resulting window (taken from a retroactive layer with the same weights). */
static void
test_step_tokens (gconstpointer data)
{
  const Pair *p = data;
  int d = p->d, n = p->n, T = 5 * n;
  Setup *s = setup_new (d, p->heads, n, p->m, 31 + n);
  float *x = cony_test_normal_tokens (T, d, 8, 1.0);
  float *a = g_new (float, (gsize) n *d), *b = g_new (float, (gsize) n *d);
  float *ql = g_new (float, (gsize) p->m *d), *kl = g_new (float, (gsize) p->m *d);
  for (int count = 1; count <= 3; count++) {
    ConyAttention *cont = make_layer (s, p->continual, FALSE);
    ConyAttention *win = make_layer (s, p->windowed, TRUE);
    double worst = 0.0;
    for (int t = 0; t + count <= T; t += count) {
      cony_attention_step_tokens (cont, x + (gsize) t * d, count, a);
      int last = t + count - 1, w = MIN (last + 1, n);
      const float *window = x + (gsize) (last + 1 - w) * d;
      if (p->continual == CONY_ATTENTION_CONY) { /* the schedule's landmarks at this step */
        int ml = schedule_landmarks (s, x, last, ql, kl);
        ConyAttention *ref = make_layer_with (s, CONY_ATTENTION_NYSTROM_FIXED, TRUE, ml, ql, kl);
        cony_attention_forward_window (ref, window, w, b);
        cony_attention_free (ref);
      } else {
        cony_attention_forward_window (win, window, w, b);
      }
      int rows = MIN (count, w);
      worst = fmax (worst,
          cony_test_rel_err_floor (a + (gsize) (count - rows) * d, b + (gsize) (n - rows) * d,
              (gsize) rows * d));
    }
    g_test_message ("%s count=%d: max rel err %.3g", cony_attention_variant_name (p->continual),
        count, worst);
    g_assert_cmpfloat (worst, <=, 1e-5);
    cony_attention_free (cont), cony_attention_free (win);
  }
  g_free (x), g_free (a), g_free (b), g_free (ql), g_free (kl);
  setup_free (s);
}

/* Scores |q·k|/√hd of a few hundred: every output is finite and equal to the
 * stable windowed computation (the large_pairs cases below). This measures the largest
 * score they reach, so that they keep testing what they claim to. */
static void
test_overflow_scores_are_large (void)
{
  const Pair *p = &large_pairs[0];
  Setup *s = setup_new (p->d, p->heads, p->n, p->m, 7 + p->n + p->m);
  setup_boost (s, p->boost);
  float *x = cony_test_normal_tokens (4 * p->n + 3, 8, 99, 1.0);
  float q[8], k[8], max = 0.0f;
  for (int a = 0; a < 4 * p->n + 3; a++)
    for (int b = 0; b < 4 * p->n + 3; b++) {
      float q2[8], k2[8];
      project_qk (s, x + a * 8, q, k2);
      project_qk (s, x + b * 8, q2, k);
      float dot = 0.0f;
      for (int c = 0; c < 8; c++)
        dot += q[c] * k[c];
      max = fmaxf (max, fabsf (dot) / sqrtf (8.0f));
    }
  g_test_message ("largest |q·k|/√hd in the large-score cases: %.1f", max);
  g_assert_cmpfloat (max, >=, 100.0f);
  g_free (x);
  setup_free (s);
}

/* Long streams: after many steps the continual output still equals an exact
 * recomputation on the same window. The input drifts in scale and has bursts, so
 * rows rescale and collapse along the way. */
static void
run_drift (ConyAttentionVariant v, gboolean retro, guint64 steps)
{
  Setup *s = setup_new (16, 2, 12, 3, 21);
  ConyAttention *cont = make_layer (s, v, retro);
  ConyAttention *win = make_layer (s, cony_attention_variant_windowed (v), retro);
  int d = 16, n = 12, rows = cony_attention_output_rows (cont);
  float *hist = g_new0 (float, (gsize) n *d), *a = g_new (float, (gsize) rows *d),
        *b = g_new (float, (gsize) rows *d), *x = g_new (float, d);
  GRand *rng = g_rand_new_with_seed (1234);
  for (guint64 t = 0; t < steps; t++) {
    double scale = 1.0 + 0.9 * sin ((double) t * 1e-3);
    if (g_rand_int_range (rng, 0, 5000) == 0)
      scale *= 12.0; /* a burst: a token that dominates every row it enters */
    cony_test_fill_normal (rng, x, d, scale);
    memcpy (hist + (t % n) * d, x, sizeof (float) * d);
    cony_attention_step (cont, x, a);
  }
  /* The window, oldest first. */
  float *win_x = g_new (float, (gsize) n *d);
  for (int i = 0; i < n; i++)
    memcpy (win_x + (gsize) i * d, hist + ((steps + i) % n) * d, sizeof (float) * d);
  cony_attention_forward_window (win, win_x, n, b);
  double err = cony_test_rel_err_floor (a, b, (gsize) rows * d);
  g_test_message ("%s retro=%d after %" G_GUINT64_FORMAT " steps: rel err %.3g",
      cony_attention_variant_name (v), retro, steps, err);
  g_assert_cmpfloat (err, <=, 1e-4);
  g_rand_free (rng);
  g_free (hist), g_free (a), g_free (b), g_free (x), g_free (win_x);
  cony_attention_free (cont), cony_attention_free (win);
  setup_free (s);
}

static void
test_drift (void)
{
  guint64 steps = g_test_slow () ? 10000000 : 1000000;
  run_drift (CONY_ATTENTION_CONY_FIXED, FALSE, steps);
  run_drift (CONY_ATTENTION_CONY, FALSE, steps);
  run_drift (CONY_ATTENTION_CONTINUAL, TRUE, steps / 4);
  run_drift (CONY_ATTENTION_CONY_FIXED, TRUE, steps / 4);
}

static void
test_bad_config (void)
{
  Setup *s = setup_new (8, 2, 6, 2, 1);
  ConyAttentionWeights w = { s->w_in, s->b_in, s->w_out, s->b_out, NULL, NULL };
  struct {
    ConyAttentionConfig c;
    const char *expect;
  } cases[] = {
    { { .variant = CONY_ATTENTION_REGULAR, .d = 8, .heads = 3, .window = 6 }, "multiple of heads" },
    { { .variant = CONY_ATTENTION_REGULAR, .d = 8, .heads = 2, .window = 0 }, "window" },
    { { .variant = CONY_ATTENTION_CONY, .d = 8, .heads = 2, .window = 6, .landmarks = 7 },
        "landmarks" },
    { { .variant = CONY_ATTENTION_NYSTROM_FIXED, .d = 8, .heads = 2, .window = 6, .landmarks = 2 },
        "q_landmarks" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    GError *error = NULL;
    g_assert_null (cony_attention_new (&cases[i].c, &w, &error));
    cony_test_expect_error (&error, CONY_ERROR_INVALID, cases[i].expect, NULL);
  }
  /* NaN weights are refused by name. */
  s->w_out[5] = NAN;
  ConyAttentionConfig c = { .variant = CONY_ATTENTION_REGULAR, .d = 8, .heads = 2, .window = 6 };
  GError *error = NULL;
  g_assert_null (cony_attention_new (&c, &w, &error));
  g_assert_nonnull (strstr (error->message, "out_proj.weight"));
  g_clear_error (&error);
  setup_free (s);
}

/* Limits and the memory budget (#31.1): a window beyond what the variants serve, too
 * many landmarks, and a config whose buffers pass CONY_MEMORY_BUDGET are refused with
 * an error naming the window (and, over budget, the bytes), before any allocation:
 * the last config would need ~2.3 GB, and no weights are even given. */
static void
test_budget (void)
{
  struct {
    ConyAttentionConfig c;
    const char *expect[2];
  } cases[] = {
    { { .variant = CONY_ATTENTION_REGULAR, .d = 8, .heads = 2, .window = 100000 },
        { "window=100000", "most a layer serves" } },
    { { .variant = CONY_ATTENTION_CONY, .d = 8, .heads = 2, .window = 4096, .landmarks = 129 },
        { "landmarks=129", "most a layer serves" } },
    { { .variant = CONY_ATTENTION_REGULAR, .d = 16384, .heads = 1, .window = 4096 },
        { "window=4096", "bytes" } },
    { { .variant = CONY_ATTENTION_CONY,
          .d = 256,
          .heads = 256,
          .window = 8192,
          .landmarks = 128,
          .retroactive = TRUE },
        { "window=8192", "bytes" } },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    GError *error = NULL;
    g_assert_null (cony_attention_new (&cases[i].c, NULL, &error));
    g_assert_error (error, CONY_ERROR, CONY_ERROR_INVALID);
    g_test_message ("%s", error->message);
    for (int k = 0; k < 2; k++)
      g_assert_nonnull (strstr (error->message, cases[i].expect[k]));
    g_clear_error (&error);
  }
  /* the largest window is served by a small layer, and the figure is what it allocates
   * beyond its state */
  Setup *s = setup_new (8, 2, CONY_ATTENTION_MAX_WINDOW, 4, 3);
  ConyAttention *a = make_layer (s, CONY_ATTENTION_CONY_FIXED, FALSE);
  ConyAttentionConfig c = *cony_attention_get_config (a);
  c.pinv_iterations = 0;
  g_assert_cmpuint (cony_attention_config_bytes (&c), >, cony_attention_state_bytes (a));
  g_assert_cmpuint (cony_attention_config_bytes (&c), <=, CONY_MEMORY_BUDGET);
  cony_attention_free (a);
  setup_free (s);
}

/* Tokens of 1e19, 1e30, ±FLT_MAX and denormals through every variant, single and
 * retroactive (#30.4): each output is finite or the step's output holds NaN/Inf, and
 * after a reset plain tokens give exactly a fresh layer's outputs. 1e19 tokens (scores
 * ~1e38, past float) and denormals stay finite. */
static void
test_extreme_tokens (void)
{
  const float values[] = { 1e19f, 1e30f, FLT_MAX, -FLT_MAX, 1e-40f };
  int d = 8, n = 6, T = 2 * n + 1;
  Setup *s = setup_new (d, 2, n, 3, 5);
  float *x = cony_test_normal_tokens (T, d, 17, 1.0);
  float *want = g_new (float, (gsize) T *n *d), *got = g_new (float, (gsize) n *d);
  float tok[8];
  for (int v = 0; v < CONY_ATTENTION_N_VARIANTS; v++)
    for (int retro = 0; retro < 2; retro++) {
      if (v == CONY_ATTENTION_VCC && retro)
        continue; /* single output only */
      ConyAttention *fresh = make_layer (s, v, retro);
      gsize rows = cony_attention_output_rows (fresh) * d;
      for (int t = 0; t < T; t++)
        cony_attention_step (fresh, x + (gsize) t * d, want + t * rows);
      for (guint e = 0; e < G_N_ELEMENTS (values); e++) {
        ConyAttention *a = make_layer (s, v, retro);
        for (int t = 0; t < 4; t++)
          cony_attention_step (a, x + (gsize) t * d, got);
        int nonfinite = 0;
        for (int t = 0; t < 3; t++) {
          for (int c = 0; c < d; c++)
            tok[c] = c % 2 && t == 1 ? -values[e] : values[e];
          cony_attention_step (a, tok, got);
          nonfinite += !cony_all_finite_test (got, rows);
        }
        if (fabsf (values[e]) <= 1e19f)
          g_assert_cmpint (nonfinite, ==, 0);
        cony_attention_reset (a);
        for (int t = 0; t < T; t++) {
          cony_attention_step (a, x + (gsize) t * d, got);
          g_assert_cmpint (memcmp (got, want + t * rows, sizeof (float) * rows), ==, 0);
        }
        cony_attention_free (a);
      }
      cony_attention_free (fresh);
    }
  g_free (x), g_free (want), g_free (got);
  setup_free (s);
}

/* Extreme but finite fixed landmarks (the fuzzer's NaN pseudo-inverse, #30): the layer
 * is either refused with CONY_ERROR_NUMERIC or computes finite outputs; never NaN. */
static void
test_extreme_landmarks (void)
{
  const float scales[] = { 1e19f, 1e30f, FLT_MAX, 1e-38f };
  int d = 8, n = 6, m = 3;
  Setup *s = setup_new (d, 2, n, m, 9);
  float *x = cony_test_normal_tokens (2 * n, d, 23, 1.0);
  float *ql = g_new (float, m *d), *kl = g_new (float, m *d), out[8];
  for (guint e = 0; e < G_N_ELEMENTS (scales); e++)
    for (int it = 0; it < 2; it++) {
      for (int i = 0; i < m * d; i++) {
        ql[i] = s->ql[i] > 0 ? scales[e] : -scales[e];
        kl[i] = s->kl[i] * (scales[e] / 4);
      }
      ConyAttentionConfig c = { .variant = CONY_ATTENTION_CONY_FIXED,
        .d = d,
        .heads = 2,
        .window = n,
        .landmarks = m,
        .pinv = it ? CONY_PINV_ITERATIVE : CONY_PINV_EXACT,
        .pinv_iterations = it ? 1000 : 0 };
      ConyAttentionWeights w = { s->w_in, s->b_in, s->w_out, s->b_out, ql, kl };
      GError *error = NULL;
      ConyAttention *a = cony_attention_new (&c, &w, &error);
      if (!a) {
        g_assert_error (error, CONY_ERROR, CONY_ERROR_NUMERIC);
        g_assert_nonnull (strstr (error->message, "pseudo-inverse"));
        g_test_message ("scale %g, pinv %d: %s", scales[e], it, error->message);
        g_clear_error (&error);
        continue;
      }
      for (int t = 0; t < 2 * n; t++) {
        cony_attention_step (a, x + (gsize) t * d, out);
        g_assert_true (cony_all_finite_test (out, d));
      }
      cony_attention_free (a);
    }
  g_free (ql), g_free (kl), g_free (x);
  setup_free (s);
}

/* The fast exponential on NaN, ±Inf and huge arguments (#30: UBSan saw NaN converted to
 * int and a negative left shift): NaN stays NaN, everything else is finite and >= 0,
 * and the vector path (first four) equals the scalar one (fifth) bit for bit. */
static void
test_exp_specials (void)
{
  const float values[] = { NAN, -NAN, INFINITY, -INFINITY, 1e30f, -1e30f, FLT_MAX, -FLT_MAX, 88.5f,
    -87.5f, 0.0f, 1e-40f };
  for (guint i = 0; i < G_N_ELEMENTS (values); i++) {
    float x[5];
    for (int k = 0; k < 5; k++)
      x[k] = values[i];
    cony_exp_batch (x, 5);
    for (int k = 0; k < 5; k++) {
      if (isnan (values[i]))
        g_assert_true (isnan (x[k]));
      else
        g_assert_true (isfinite (x[k]) && x[k] >= 0.0f);
      g_assert_cmpint (memcmp (&x[k], &x[4], sizeof (float)), ==, 0);
    }
  }
  float one = 0.0f;
  cony_exp_batch (&one, 1);
  g_assert_cmpfloat (one, ==, 1.0f);
}

static void
test_variant_names (void)
{
  for (int v = 0; v < CONY_ATTENTION_N_VARIANTS; v++) {
    ConyAttentionVariant back;
    g_assert_true (cony_attention_variant_from_name (cony_attention_variant_name (v), &back));
    g_assert_cmpint (back, ==, v);
  }
  ConyAttentionVariant x;
  g_assert_false (cony_attention_variant_from_name ("softmax", &x));
  /* the list tools and errors show: every row's name, once, in the table's order */
  g_assert_cmpint (cony_attention_variant_count (), ==, CONY_ATTENTION_N_VARIANTS);
  g_autofree char *names = cony_attention_variant_names ();
  g_test_message ("%s", names);
  const char *at = names;
  for (int v = 0; v < cony_attention_variant_count (); v++) {
    const char *name = cony_attention_variant_name (v), *hit = strstr (at, name);
    g_assert_nonnull (hit);
    g_assert_true (
        hit[strlen (name)] == ',' || hit[strlen (name)] == ' ' || hit[strlen (name)] == '\0');
    at = hit + strlen (name);
  }
  g_assert_true (
      g_str_has_suffix (names, cony_attention_variant_name (cony_attention_variant_count () - 1)));
}

/* Each variant's own settings: listed by its row, set and read by key, unknown to the
 * other variants; a model config fills every variant's defaults. */
static void
test_variant_settings (void)
{
  int total = 0;
  for (int v = 0; v < cony_attention_variant_count (); v++) {
    int n = cony_attention_variant_n_settings (v);
    g_assert_cmpint (n, <=, CONY_ATTENTION_MAX_SETTINGS);
    g_assert_null (cony_attention_variant_setting (v, n));
    for (int i = 0; i < n; i++) {
      const ConyAttentionSetting *s = cony_attention_variant_setting (v, i);
      g_assert_true (s->key && s->help && s->arg && s->lo <= s->def && s->def <= s->hi);
      ConyAttentionConfig c = { .variant = v };
      int value = -1;
      g_assert_true (cony_attention_config_get (&c, s->key, &value));
      g_assert_cmpint (value, ==, s->def); /* unset: the default */
      g_assert_true (cony_attention_config_set (&c, s->key, s->hi));
      g_assert_true (cony_attention_config_get (&c, s->key, &value));
      g_assert_cmpint (value, ==, s->hi);
      g_assert_cmpint (c.settings[i], ==, s->hi);
      /* keys belong to one variant */
      for (int u = 0; u < cony_attention_variant_count (); u++) {
        ConyAttentionConfig other = { .variant = u };
        if (u != v)
          g_assert_false (cony_attention_config_set (&other, s->key, 1));
      }
      total++;
    }
  }
  g_assert_cmpint (total, >=, 1);
  ConyAttentionConfig c = { .variant = CONY_ATTENTION_REGULAR };
  int value = 7;
  g_assert_false (cony_attention_config_get (&c, "vcc_budget", &value));
  g_assert_cmpint (value, ==, 7);
  g_assert_null (cony_attention_config_settings_invalid (&c));
}

/* State of cony-fixed and cony does not grow with the stream and is below the windows
 * of the regular layer; the numbers are the documented formula. */
static void
test_state_bytes (void)
{
  Setup *s = setup_new (16, 2, 12, 3, 2);
  ConyAttention *reg = make_layer (s, CONY_ATTENTION_REGULAR, FALSE);
  ConyAttention *fix = make_layer (s, CONY_ATTENTION_CONY_FIXED, FALSE);
  /* regular: q, k, v windows (float). cony-fixed: the v window (float), the score of
   * each window key per landmark, and per landmark row an offset, φ and ΔV (double). */
  g_assert_cmpuint (cony_attention_state_bytes (reg), ==, 3 * 12 * 16 * 4);
  g_assert_cmpuint (cony_attention_state_bytes (fix), ==,
      12 * 16 * 4 + 12 * 2 * 3 * 8 + 2 * 3 * 8 * (2 + 8));
  /* cony: the k and v windows and nothing else per key; the landmark rows as above,
   * the landmarks (float), Γ⁺ and the segment sums (double). */
  ConyAttention *cony = make_layer (s, CONY_ATTENTION_CONY, FALSE);
  g_assert_cmpuint (cony_attention_state_bytes (cony), ==,
      2 * 12 * 16 * 4 + 2 * 3 * 8 * (2 + 8) + 2 * 2 * 3 * 8 * 4 + 2 * 3 * 3 * 8 + 2 * 16 * 8);
  cony_attention_free (reg), cony_attention_free (fix), cony_attention_free (cony);
  setup_free (s);
}

static const Pair pairs[] = {
  PAIR (CONTINUAL, REGULAR, 8, 1, 6, 2),
  PAIR (CONTINUAL, REGULAR, 16, 4, 10, 3),
  PAIR (CONY_FIXED, NYSTROM_FIXED, 8, 1, 6, 2),
  PAIR (CONY_FIXED, NYSTROM_FIXED, 16, 4, 10, 3),
  PAIR (CONY_FIXED, NYSTROM_FIXED, 12, 2, 7, 4),
};

static const Pair schedules[] = {
  { .d = 8, .heads = 1, .n = 8, .m = 2 },   /* n mod m = 0 */
  { .d = 16, .heads = 4, .n = 12, .m = 4 }, /* n mod m = 0, several heads */
  { .d = 8, .heads = 1, .n = 10, .m = 4 },  /* n mod m = 2 */
  { .d = 12, .heads = 3, .n = 7, .m = 3 },  /* n mod m = 1, several heads */
  { .d = 8, .heads = 2, .n = 5, .m = 5 },   /* m = n: every segment one token */
};

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (pairs); i++) {
    g_autofree char *path = g_strdup_printf ("/attention/equivalence/%s/n%d-m%d-h%d",
        cony_attention_variant_name (pairs[i].continual), pairs[i].n, pairs[i].m, pairs[i].heads);
    g_test_add_data_func (path, &pairs[i], test_pair);
  }
  for (guint i = 0; i < G_N_ELEMENTS (schedules); i++) {
    g_autofree char *path = g_strdup_printf ("/attention/equivalence/cony/n%d-m%d-h%d",
        schedules[i].n, schedules[i].m, schedules[i].heads);
    g_test_add_data_func (path, &schedules[i], test_cony_schedule);
  }
  static const Pair multi[] = {
    PAIR (CONTINUAL, REGULAR, 8, 2, 7, 3),
    PAIR (CONY_FIXED, NYSTROM_FIXED, 8, 2, 7, 3),
    PAIR (CONY, NYSTROM, 8, 2, 8, 4),
    PAIR (CONY, NYSTROM, 12, 3, 7, 3),
    PAIR (NYSTROM, NYSTROM, 8, 2, 9, 3),
  };
  for (guint i = 0; i < G_N_ELEMENTS (multi); i++) {
    g_autofree char *path = g_strdup_printf ("/attention/step-tokens/%s/n%d-m%d",
        cony_attention_variant_name (multi[i].continual), multi[i].n, multi[i].m);
    g_test_add_data_func (path, &multi[i], test_step_tokens);
  }
  g_test_add_func ("/attention/overflow/scores-are-large", test_overflow_scores_are_large);
  for (guint i = 0; i < G_N_ELEMENTS (large_pairs); i++) {
    g_autofree char *path = g_strdup_printf ("/attention/overflow/%s",
        cony_attention_variant_name (large_pairs[i].continual));
    g_test_add_data_func (path, &large_pairs[i],
        large_pairs[i].continual == CONY_ATTENTION_CONY ? test_cony_schedule : test_pair);
  }
  g_test_add_func ("/attention/drift", test_drift);
  g_test_add_func ("/attention/bad-config", test_bad_config);
  g_test_add_func ("/attention/budget", test_budget);
  g_test_add_func ("/attention/exp-specials", test_exp_specials);
  g_test_add_func ("/attention/extreme-tokens", test_extreme_tokens);
  g_test_add_func ("/attention/extreme-landmarks", test_extreme_landmarks);
  g_test_add_func ("/attention/variant-names", test_variant_names);
  g_test_add_func ("/attention/variant-settings", test_variant_settings);
  g_test_add_func ("/attention/state-bytes", test_state_bytes);
  return g_test_run ();
}
