/* The vcc variant (docs/attention.md): exact when the budget covers the window, exact
 * on windows that are constant on its segments at any budget, bounded error on smooth
 * streams, no drift over 10⁶ steps, multi-token steps, refusals, state and cost. */
#include "cony/attention.h"
#include "cony/encoder.h"
#include "cony/error.h"
#include "attention-private.h"
#include "testutil.h"

#include <math.h>
#include <string.h>

typedef struct {
  int d, heads, n;
  float *w_in, *b_in, *w_out, *b_out;
} Setup;

static Setup *
setup_new (int d, int heads, int n, guint32 seed)
{
  GRand *rng = g_rand_new_with_seed (seed);
  Setup *s = g_new0 (Setup, 1);
  s->d = d, s->heads = heads, s->n = n;
  s->w_in = g_new (float, 3 * d * d);
  s->b_in = g_new (float, 3 * d);
  s->w_out = g_new (float, d *d);
  s->b_out = g_new (float, d);
  /* q and k twice as large as v: scores of a few units, attention far from uniform */
  cony_test_fill_normal (rng, s->w_in, 2 * d * d, 2.0 / sqrt (d));
  cony_test_fill_normal (rng, s->w_in + 2 * d * d, d * d, 1.0 / sqrt (d));
  cony_test_fill_normal (rng, s->b_in, 3 * d, 0.1);
  cony_test_fill_normal (rng, s->w_out, d * d, 1.0 / sqrt (d));
  cony_test_fill_normal (rng, s->b_out, d, 0.1);
  g_rand_free (rng);
  return s;
}

static void
setup_free (Setup *s)
{
  g_free (s->w_in), g_free (s->b_in), g_free (s->w_out), g_free (s->b_out);
  g_free (s);
}

/* A vcc layer config, its settings set by key (0: the default). */
static ConyAttentionConfig
vcc_config (int d, int heads, int n, int budget, int block, int tail)
{
  ConyAttentionConfig c = { .variant = CONY_ATTENTION_VCC, .d = d, .heads = heads, .window = n };
  g_assert_true (cony_attention_config_set (&c, "vcc_budget", budget));
  g_assert_true (cony_attention_config_set (&c, "vcc_block", block));
  g_assert_true (cony_attention_config_set (&c, "vcc_exact_tail", tail));
  return c;
}

/* Setting @key of the layer config a model with @c gives its vcc layers. */
static int
model_setting (const ConyModelConfig *c, const char *key)
{
  ConyAttentionConfig ac = cony_model_config_attention (c, CONY_ATTENTION_VCC, FALSE);
  int value = -1;
  g_assert_true (cony_attention_config_get (&ac, key, &value));
  return value;
}

static ConyAttention *
make_layer (const Setup *s, ConyAttentionVariant v, int budget, int block, int tail)
{
  ConyAttentionConfig c = v == CONY_ATTENTION_VCC
      ? vcc_config (s->d, s->heads, s->n, budget, block, tail)
      : (ConyAttentionConfig){ .variant = v, .d = s->d, .heads = s->heads, .window = s->n };
  ConyAttentionWeights w = { s->w_in, s->b_in, s->w_out, s->b_out, NULL, NULL };
  GError *error = NULL;
  ConyAttention *a = cony_attention_new (&c, &w, &error);
  g_assert_no_error (error);
  return a;
}

/* A stream that changes slowly: periods of 40 to 400 tokens. */
static float *
smooth_tokens (int T, int d, guint32 seed)
{
  return cony_test_smooth_tokens (T, d, seed, 40.0, 400.0);
}

/* Steps vcc and continual side by side; the worst relative error over steps where
 * @check_step (if any) says so. */
typedef gboolean (*StepFilter) (int t, gpointer data);

static double
vcc_vs_exact (const Setup *s, int budget, int block, int tail, const float *x, int T,
    StepFilter check_step, gpointer data)
{
  ConyAttention *vcc = make_layer (s, CONY_ATTENTION_VCC, budget, block, tail);
  ConyAttention *ref = make_layer (s, CONY_ATTENTION_CONTINUAL, 0, 0, 0);
  int d = s->d, checked = 0;
  float a[d], b[d];
  double worst = 0.0;
  for (int t = 0; t < T; t++) {
    cony_attention_step (vcc, x + (gsize) t * d, a);
    cony_attention_step (ref, x + (gsize) t * d, b);
    if (!check_step || check_step (t, data)) {
      worst = fmax (worst, cony_test_rel_err_floor (a, b, d));
      checked++;
    }
  }
  g_assert_cmpint (checked, >, 0);
  cony_attention_free (vcc), cony_attention_free (ref);
  return worst;
}

typedef struct {
  int d, heads, n, budget, block, tail;
} Case;

/* r ≥ w: every segment is one token, so vcc is softmax attention, warm-up included. */
static void
test_exact_budget (gconstpointer data)
{
  const Case *c = data;
  Setup *s = setup_new (c->d, c->heads, c->n, 5 + c->n);
  int T = 4 * c->n + 3;
  float *x = cony_test_normal_tokens (T, c->d, 17, 1.0);
  double err = vcc_vs_exact (s, c->budget, c->block, c->tail, x, T, NULL, NULL);
  g_test_message ("n=%d r=%d block=%d tail=%d: max rel err %.3g", c->n, c->budget, c->block,
      c->tail, err);
  g_assert_cmpfloat (err, <=, 1e-6);
  g_free (x);
  setup_free (s);
}

/* The documented coarse block (docs/attention.md), for the tests' own bookkeeping. */
static int
expected_coarse_block (int block, int u, int rc)
{
  int b = MAX (block, 1), target = MAX (1, rc / 2);
  while ((u + b - 1) / b > target)
    b *= 2;
  return b;
}

/* A window constant over the whole stream: exact at any budget. */
static void
test_constant_window (void)
{
  Setup *s = setup_new (8, 2, 24, 3);
  int T = 60, d = 8;
  float *x = g_new (float, (gsize) T *d), *one = cony_test_normal_tokens (1, d, 4, 1.0);
  for (int t = 0; t < T; t++)
    memcpy (x + (gsize) t * d, one, sizeof (float) * d);
  for (int r = 1; r <= 26; r++) {
    double err = vcc_vs_exact (s, r, 1, r > 3 ? 2 : 0, x, T, NULL, NULL);
    g_assert_cmpfloat (err, <=, 1e-6);
  }
  g_free (x), g_free (one);
  setup_free (s);
}

typedef struct {
  int piece, tail;
} Aligned;

/* Steps whose compressed region (the window less the exact tail) ends on a piece
 * boundary. */
static gboolean
aligned_step (int t, gpointer data)
{
  const Aligned *al = data;
  int end = t + 1 - al->tail;
  return end > 0 && end % al->piece == 0;
}

/* Windows constant on the coarse blocks (stream pieces of the coarse block size,
 * aligned with the compressed region's newest end): every segment, however far it is
 * refined, lies inside one piece, so vcc is exact at any budget. */
static void
test_piecewise_constant (void)
{
  int d = 8, n = 32, T = 3 * n;
  Setup *s = setup_new (d, 2, n, 9);
  float *values = cony_test_normal_tokens (T, d, 11, 1.0);
  float *x = g_new (float, (gsize) T *d);
  for (int tail = 0; tail <= 3; tail += 3)
    for (int r = tail + 1; r <= n + 2; r++) {
      int piece = expected_coarse_block (1, n - tail, MIN (r - tail, n - tail));
      for (int t = 0; t < T; t++) /* piece i holds value i */
        memcpy (x + (gsize) t * d, values + (gsize) (t / piece) * d, sizeof (float) * d);
      Aligned al = { piece, tail };
      double err = vcc_vs_exact (s, r, 1, tail, x, T, aligned_step, &al);
      /* any step: segments straddle pieces unless the budget resolves every token */
      double any = vcc_vs_exact (s, r, 1, tail, x, T, NULL, NULL);
      g_test_message ("r=%d tail=%d piece=%d: max rel err %.3g at aligned steps, %.3g at all", r,
          tail, piece, err, any);
      g_assert_cmpfloat (err, <=, 4e-6); /* float rounding of the continual layer */
      if (r - tail < n - tail)
        g_assert_cmpfloat (any, >, 1e-3);
    }
  g_free (values), g_free (x);
  setup_free (s);
}

/* Smooth streams: the error at a fixed seed stays under the bound measured when this
 * test was written (with margin), and a larger budget does better. */
static void
test_smooth_error (void)
{
  int d = 16, n = 128, T = 2 * n;
  Setup *s = setup_new (d, 4, n, 13);
  float *x = smooth_tokens (T, d, 21);
  const int budgets[] = { 8, 16, 32, 64 };
  const double bounds[] = { 0.7, 0.4, 0.15, 0.045 }; /* 1.5 × measured */
  double prev = INFINITY;
  for (guint i = 0; i < G_N_ELEMENTS (budgets); i++) {
    double err = vcc_vs_exact (s, budgets[i], 1, 0, x, T, NULL, NULL);
    g_test_message ("smooth, n=%d r=%d: max rel err %.3g", n, budgets[i], err);
    g_assert_cmpfloat (err, <=, bounds[i]);
    g_assert_cmpfloat (err, <, prev);
    prev = err;
  }
  /* Random tokens are not smooth: the same budget is far less accurate. */
  float *xr = cony_test_normal_tokens (T, d, 22, 1.0);
  double random_err = vcc_vs_exact (s, 16, 1, 0, xr, T, NULL, NULL);
  g_test_message ("random, n=%d r=16: max rel err %.3g", n, random_err);
  g_assert_cmpfloat (random_err, >, 1.0);
  g_free (x), g_free (xr);
  setup_free (s);
}

/* 10⁶ steps of tokens with a large common offset: the stored sums are block-local, so
 * they stay the size of one block's sums, and the outputs stay exact (r = n) or equal
 * to the same partition computed afresh from the window (r < n). */
static void
test_drift (void)
{
  int d = 4, n = 8;
  guint64 steps = g_test_slow () ? 10000000 : 1000000;
  Setup *s = setup_new (d, 1, n, 23);
  ConyAttention *exact = make_layer (s, CONY_ATTENTION_VCC, n, 1, 0);
  ConyAttention *comp = make_layer (s, CONY_ATTENTION_VCC, 3, 1, 1);
  ConyAttention *ref = make_layer (s, CONY_ATTENTION_CONTINUAL, 0, 0, 0);
  ConyAttention *fresh = make_layer (s, CONY_ATTENTION_VCC, 3, 1, 1);
  float x[d], a[d], b[d], c[d], hist[n * d], win[n * d];
  GRand *rng = g_rand_new_with_seed (77);
  double worst = 0.0, max_in = 0.0;
  for (guint64 t = 0; t < steps; t++) {
    cony_test_fill_normal (rng, x, d, 1.0);
    for (int i = 0; i < d; i++)
      x[i] += 5.0f;
    memcpy (hist + (t % n) * d, x, sizeof x);
    cony_attention_step (exact, x, a);
    cony_attention_step (comp, x, c);
    cony_attention_step (ref, x, b);
    if (t % 1000 == 0 || t + 1 == steps)
      worst = fmax (worst, cony_test_rel_err_floor (a, b, d));
    for (int i = 0; i < d; i++)
      max_in = fmax (max_in, fabs (x[i]));
  }
  for (int i = 0; i < n; i++)
    memcpy (win + i * d, hist + ((steps + i) % n) * d, sizeof (float) * d);
  cony_attention_forward_window (fresh, win, n, b);
  double comp_err = cony_test_rel_err_floor (c, b, d);
  double magnitude = MAX (cony_vcc_state_magnitude (exact), cony_vcc_state_magnitude (comp));
  g_test_message ("%" G_GUINT64_FORMAT " steps: r = n max rel err %.3g; r = 3 against a fresh "
                  "window %.3g; largest stored entry %.3g",
      steps, worst, comp_err, magnitude);
  g_assert_cmpfloat (worst, <=, 1e-6);
  g_assert_cmpfloat (comp_err, <=, 1e-6);
  /* running sums over the stream would grow to ~1e6 × 5 × |W|; a block is at most n
   * tokens of keys or values at most ~10 × the input */
  g_assert_cmpfloat (magnitude, <=, n * 10.0 * max_in);
  g_rand_free (rng);
  cony_attention_free (exact), cony_attention_free (comp), cony_attention_free (ref);
  cony_attention_free (fresh);
  setup_free (s);
}

/* Multi-token steps: the newest query's row is the single-step output, and with r ≥ w
 * every row equals continual's multi-token rows. */
static void
test_step_tokens (void)
{
  int d = 8, n = 9, T = 5 * n;
  Setup *s = setup_new (d, 2, n, 29);
  float *x = cony_test_normal_tokens (T, d, 30, 1.0);
  for (int count = 1; count <= 3; count++) {
    ConyAttention *multi = make_layer (s, CONY_ATTENTION_VCC, 4, 1, 1);
    ConyAttention *single = make_layer (s, CONY_ATTENTION_VCC, 4, 1, 1);
    ConyAttention *exact = make_layer (s, CONY_ATTENTION_VCC, n, 1, 0);
    ConyAttention *ref = make_layer (s, CONY_ATTENTION_CONTINUAL, 0, 0, 0);
    float a[3 * d], b[d], e[3 * d], r[3 * d];
    double worst_last = 0.0, worst_exact = 0.0;
    for (int t = 0; t + count <= T; t += count) {
      cony_attention_step_tokens (multi, x + (gsize) t * d, count, a);
      for (int i = 0; i < count; i++)
        cony_attention_step (single, x + (gsize) (t + i) * d, b);
      cony_attention_step_tokens (exact, x + (gsize) t * d, count, e);
      cony_attention_step_tokens (ref, x + (gsize) t * d, count, r);
      worst_last = fmax (worst_last, cony_test_rel_err_floor (a + (count - 1) * d, b, d));
      worst_exact = fmax (worst_exact, cony_test_rel_err_floor (e, r, (gsize) count * d));
    }
    g_test_message ("count=%d: newest row vs single steps %.3g, r >= w vs continual %.3g", count,
        worst_last, worst_exact);
    g_assert_cmpfloat (worst_last, <=, 1e-6);
    g_assert_cmpfloat (worst_exact, <=, 1e-6);
    cony_attention_free (multi), cony_attention_free (single);
    cony_attention_free (exact), cony_attention_free (ref);
  }
  g_free (x);
  setup_free (s);
}

static void
test_bad_config (void)
{
  Setup *s = setup_new (8, 2, 6, 1);
  ConyAttentionWeights w = { s->w_in, s->b_in, s->w_out, s->b_out, NULL, NULL };
  struct {
    ConyAttentionConfig c;
    const char *expect;
  } cases[] = {
    { { .variant = CONY_ATTENTION_VCC, .d = 8, .heads = 2, .window = 6, .retroactive = TRUE },
        "retroactive" },
    { vcc_config (8, 2, 6, 4, 0, 4), "vcc_exact_tail" },
    { vcc_config (8, 2, 6, 0, -2, 0), "negative" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    GError *error = NULL;
    g_assert_null (cony_attention_new (&cases[i].c, &w, &error));
    g_assert_error (error, CONY_ERROR, CONY_ERROR_INVALID);
    g_test_message ("%s", error->message);
    g_assert_nonnull (strstr (error->message, cases[i].expect));
    g_clear_error (&error);
  }
  setup_free (s);
}

/* State: two float windows (the block-local sums of keys and values), as much as
 * `continual` keeps, whatever the stream length; counted FLOPs per step grow with the
 * window only by the sums over its blocks of √n tokens (at most 4d√n). */
static void
test_state_and_cost (void)
{
  Setup *s = setup_new (16, 2, 12, 2);
  ConyAttention *a = make_layer (s, CONY_ATTENTION_VCC, 5, 1, 0);
  g_assert_cmpuint (cony_attention_state_bytes (a), ==, 2 * 12 * 16 * 4);
  float *x = cony_test_normal_tokens (40, 16, 3, 1.0), out[16];
  for (int t = 0; t < 40; t++)
    cony_attention_step (a, x + t * 16, out);
  g_assert_cmpuint (cony_attention_state_bytes (a), ==, 2 * 12 * 16 * 4);
  int budget = 0;
  g_assert_true (cony_attention_config_get (cony_attention_get_config (a), "vcc_budget", &budget));
  g_assert_cmpint (budget, ==, 5);
  /* the allocation figure covers the state and the per-query scratch: r = 5 segments,
   * and rows of key and value sums in double, at most n + 2 for the blocks and the
   * unfinished block's positions and r + 1 for the boundaries */
  gsize all = cony_vcc_config_bytes (cony_attention_get_config (a)),
        rows = 2 * (12 + 2 + 5 + 1) * 16 * 8;
  g_assert_cmpuint (all, >, cony_attention_state_bytes (a) + 5 * 2 * 8);
  g_assert_cmpuint (all, <, cony_attention_state_bytes (a) + rows + 1024);
  ConyAttention *exact = make_layer (s, CONY_ATTENTION_CONTINUAL, 0, 0, 0);
  g_assert_cmpuint (cony_attention_state_bytes (a), ==, cony_attention_state_bytes (exact));
  cony_attention_free (exact);
  cony_attention_free (a);
  g_free (x);
  setup_free (s);

  ConyAttentionConfig c = vcc_config (192, 16, 1024, 256, 0, 0);
  double small = cony_attention_flops (&c).sda;
  c.window = 16384;
  double large = cony_attention_flops (&c).sda;
  c.variant = CONY_ATTENTION_CONTINUAL;
  double cont = cony_attention_flops (&c).sda;
  g_test_message ("vcc r=256 FLOPs/step: n=1024 %.0f, n=16384 %.0f; continual n=16384 %.0f", small,
      large, cont);
  g_assert_cmpfloat (large, >, small);
  g_assert_cmpfloat (large - small, <=, 2.0 * 192 * 2 * 128); /* 4d√n */
  g_assert_cmpfloat (large * 10, <, cont);
}

/* Model config keys: defaults, values, the tail/budget rule. */
static void
test_model_config (void)
{
  const char *base = "{\"architecture\":\"cony-encoder-classifier\",\"d_in\":4,\"d\":8,\"heads\":2,"
                     "\"ff\":8,\"blocks\":1,\"window\":16,\"landmarks\":2,\"attention\":\"vcc\","
                     "\"positional_encoding\":\"learned\",%s\"labels\":[\"a\",\"b\"]}";
  GError *error = NULL;
  ConyModelConfig c;
  g_autofree char *plain = g_strdup_printf (base, "");
  g_assert_true (cony_model_config_parse (plain, "plain", &c, &error));
  g_assert_no_error (error);
  g_assert_cmpint (c.attention[0], ==, CONY_ATTENTION_VCC);
  g_assert_cmpint (model_setting (&c, "vcc_budget"), ==, 64);
  g_assert_cmpint (model_setting (&c, "vcc_block"), ==, 1);
  g_assert_cmpint (model_setting (&c, "vcc_exact_tail"), ==, 0);
  cony_model_config_clear (&c);
  g_autofree char *set = g_strdup_printf (base,
      "\"vcc_budget\":12,\"vcc_block\":4,\"vcc_exact_tail\":3,");
  g_assert_true (cony_model_config_parse (set, "set", &c, &error));
  g_assert_cmpint (model_setting (&c, "vcc_budget"), ==, 12);
  g_assert_cmpint (model_setting (&c, "vcc_block"), ==, 4);
  g_assert_cmpint (model_setting (&c, "vcc_exact_tail"), ==, 3);
  cony_model_config_clear (&c);
  g_autofree char *bad = g_strdup_printf (base, "\"vcc_budget\":3,\"vcc_exact_tail\":3,");
  g_assert_false (cony_model_config_parse (bad, "bad", &c, &error));
  cony_test_expect_error (&error, CONY_ERROR_INVALID, "vcc_exact_tail", NULL);
  g_autofree char *zero = g_strdup_printf (base, "\"vcc_budget\":0,");
  g_assert_false (cony_model_config_parse (zero, "zero", &c, &error));
  g_assert_nonnull (strstr (error->message, "vcc_budget"));
  g_clear_error (&error);
}

/* The encoder with `vcc` instead of the trained variant: a 1-block model (window 6 <
 * the default budget 64) gives the logits of exact attention; a 2-block model, whose
 * first block is retroactive, is refused by name. */
static void
test_encoder_override (void)
{
  GError *error = NULL;
  g_autofree char *b1 = cony_test_golden_path ("model", "b1_continual.safetensors");
  g_autoptr (ConyModel) m = cony_model_load (b1, &error);
  g_assert_no_error (error);
  g_autoptr (ConyNpyArray) tokens = cony_test_load_golden_npy ("model", "b1_continual.tokens.npy");
  g_autoptr (ConyEncoder) vcc = cony_encoder_new (m, CONY_ATTENTION_VCC, &error);
  g_assert_no_error (error);
  g_autoptr (ConyEncoder) exact = cony_encoder_new (m, CONY_ATTENTION_CONTINUAL, &error);
  g_assert_no_error (error);
  int C = m->config.n_classes, d_in = m->config.d_in;
  float a[C], b[C];
  double worst = 0.0;
  for (gsize t = 0; t < tokens->shape[0]; t++) {
    cony_encoder_step (vcc, tokens->data + t * d_in, a);
    cony_encoder_step (exact, tokens->data + t * d_in, b);
    worst = fmax (worst, cony_test_rel_err_floor (a, b, C));
  }
  g_test_message ("b1 model, vcc against continual: %.3g", worst);
  g_assert_cmpfloat (worst, <=, 1e-5);

  g_autofree char *b2 = cony_test_golden_path ("model", "b2_continual.safetensors");
  g_autoptr (ConyModel) m2 = cony_model_load (b2, &error);
  g_assert_no_error (error);
  g_assert_null (cony_encoder_new (m2, CONY_ATTENTION_VCC, &error));
  cony_test_expect_error (&error, CONY_ERROR_INVALID, "retroactive", NULL);
}

static const Case exact_cases[] = {
  { 8, 2, 7, 7, 1, 0 },
  { 8, 2, 7, 20, 1, 0 },
  { 16, 4, 10, 10, 4, 0 },
  { 16, 4, 10, 10, 1, 3 },
  { 12, 3, 16, 16, 2, 5 },
  { 8, 1, 1, 1, 1, 0 },
};

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (exact_cases); i++) {
    const Case *c = &exact_cases[i];
    g_autofree char *path = g_strdup_printf ("/attention-vcc/exact/n%d-r%d-b%d-l%d-h%d", c->n,
        c->budget, c->block, c->tail, c->heads);
    g_test_add_data_func (path, c, test_exact_budget);
  }
  g_test_add_func ("/attention-vcc/constant-window", test_constant_window);
  g_test_add_func ("/attention-vcc/piecewise-constant", test_piecewise_constant);
  g_test_add_func ("/attention-vcc/smooth-error", test_smooth_error);
  g_test_add_func ("/attention-vcc/drift", test_drift);
  g_test_add_func ("/attention-vcc/step-tokens", test_step_tokens);
  g_test_add_func ("/attention-vcc/bad-config", test_bad_config);
  g_test_add_func ("/attention-vcc/state-and-cost", test_state_and_cost);
  g_test_add_func ("/attention-vcc/model-config", test_model_config);
  g_test_add_func ("/attention-vcc/encoder-override", test_encoder_override);
  return g_test_run ();
}
