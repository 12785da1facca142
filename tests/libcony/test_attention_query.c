/* One query against a window, every head (src/attention/attention-query.c): each kernel this CPU
 * runs (BLAS, AVX2, AVX-512) against attention computed in double, on shapes whose d
 * and window are and are not multiples of the kernels' 8- and 16-row blocks, with
 * more heads or columns than the AVX-512 weighted sum's lane spreading takes (its
 * transposing fallback), and on scores that overflow float (the double fallback). */
#include "attention-private.h"
#include "testutil.h"

#include <math.h>
#include <string.h>

typedef struct {
  int heads, hd, w;
} Shape;

static const Shape shapes[] = {
  { 16, 12, 4096 }, /* the long window: d 192, 16 heads */
  { 16, 12, 120 },  /* the GTZAN window */
  { 16, 12, 37 },   /* a tail of 5 rows after 8- and 16-row blocks */
  { 4, 16, 16 },    /* exactly one block */
  { 5, 4, 7 },      /* d = 20: a column tail, and no full 8-row block */
  { 3, 7, 1 },      /* one row */
  { 1, 33, 250 },   /* one head wider than a block */
  { 24, 2, 50 },    /* more heads than AVX-512's spread weighted sum takes */
  { 16, 80, 20 },   /* d 1280: more columns than it takes */
};

/* out (d) in double: softmax(scale q·k) v per head. */
static void
reference (const float *q, const float *K, const float *V, int w, int heads, int hd, double scale,
    double *out)
{
  int d = heads * hd;
  double *s = g_new (double, w);
  for (int h = 0; h < heads; h++) {
    double max = -INFINITY, sum = 0;
    for (int i = 0; i < w; i++) {
      double a = 0;
      for (int e = 0; e < hd; e++)
        a += (double) q[h * hd + e] * K[(gsize) i * d + h * hd + e];
      s[i] = scale * a;
      max = fmax (max, s[i]);
    }
    for (int i = 0; i < w; i++)
      sum += (s[i] = exp (s[i] - max));
    for (int e = 0; e < hd; e++) {
      double o = 0;
      for (int i = 0; i < w; i++)
        o += s[i] * V[(gsize) i * d + h * hd + e];
      out[h * hd + e] = o / sum;
    }
  }
  g_free (s);
}

/* Largest |kernel − reference| over the outputs, relative to the largest |value|. */
static double
kernel_error (ConyAttnQueryKernel k, const Shape *sh, double token_scale, guint32 seed)
{
  int d = sh->heads * sh->hd, w = sh->w;
  GRand *rng = g_rand_new_with_seed (seed);
  float *q = g_new (float, d), *K = g_new (float, (gsize) w *d), *V = g_new (float, (gsize) w *d);
  for (int c = 0; c < d; c++)
    q[c] = (float) (token_scale * g_rand_double_range (rng, -2, 2));
  for (gsize i = 0; i < (gsize) w * d; i++) {
    K[i] = (float) (token_scale * g_rand_double_range (rng, -2, 2));
    V[i] = (float) g_rand_double_range (rng, -1, 1);
  }
  gsize len = cony_attn_query_scratch (sh->heads, w, d);
  float *scratch = g_new (float, len), *out = g_new (float, d);
  double *sd = g_new (double, w), *ref = g_new (double, d);
  float scale = 1.0f / sqrtf ((float) sh->hd);
  g_assert_true (
      cony_attn_single_query (k, q, K, V, d, w, sh->heads, sh->hd, scale, scratch, len, sd, out));
  reference (q, K, V, w, sh->heads, sh->hd, scale, ref);
  double err = 0, mag = 1e-30;
  for (int c = 0; c < d; c++) {
    err = fmax (err, fabs (out[c] - ref[c]));
    mag = fmax (mag, fabs (ref[c]));
    g_assert_true (isfinite (out[c]));
  }
  g_free (q), g_free (K), g_free (V), g_free (scratch), g_free (out), g_free (sd), g_free (ref);
  g_rand_free (rng);
  return err / mag;
}

static const char *
kernel_name (ConyAttnQueryKernel k)
{
  return k == CONY_ATTN_QUERY_AVX512 ? "avx512" : k == CONY_ATTN_QUERY_AVX2 ? "avx2" : "blas";
}

/* Every kernel this CPU runs, every shape, ordinary tokens: within float rounding of
 * the double result (the SIMD kernels, which sum in blocks, within 1e-6; the per-head
 * BLAS calls reach 1.5e-6 at w 4096 with x86's OpenBLAS and 2.4e-6 with arm64's, which
 * sums in another order: 5e-6); the one the layer picks is named. */
static void
test_kernels_agree (void)
{
  g_test_message ("best kernel here: %s", kernel_name (cony_attn_query_best ()));
  for (ConyAttnQueryKernel k = CONY_ATTN_QUERY_BLAS; k <= cony_attn_query_best (); k++)
    for (guint i = 0; i < G_N_ELEMENTS (shapes); i++) {
      double err = kernel_error (k, &shapes[i], 1.0, 7 + i);
      g_test_message ("%s heads=%d hd=%d w=%d: rel err %.3g", kernel_name (k), shapes[i].heads,
          shapes[i].hd, shapes[i].w, err);
      g_assert_cmpfloat (err, <, k == CONY_ATTN_QUERY_BLAS ? 5e-6 : 1e-6);
    }
}

/* Tokens of 1e19: q·k overflows float, the kernels fall back to double scores. */
static void
test_overflowing_scores (void)
{
  for (ConyAttnQueryKernel k = CONY_ATTN_QUERY_BLAS; k <= cony_attn_query_best (); k++) {
    double err = kernel_error (k, &shapes[2], 1e19, 3);
    g_test_message ("%s: rel err %.3g", kernel_name (k), err);
    g_assert_cmpfloat (err, <, 2e-6);
  }
}

/* A kernel this CPU lacks is refused, not emulated; a scratch too short for the SIMD
 * kernels runs BLAS. */
static void
test_refusals (void)
{
  float one = 1.0f, out = 0.0f, s[2];
  double sd[2];
  if (cony_attn_query_best () < CONY_ATTN_QUERY_AVX512)
    g_assert_false (cony_attn_single_query (CONY_ATTN_QUERY_AVX512, &one, &one, &one, 1, 1, 1, 1,
        1.0f, s, 2, sd, &out));
  g_assert_true (cony_attn_single_query (CONY_ATTN_QUERY_AUTO, &one, &one, &one, 1, 1, 1, 1, 1.0f,
      s, 1, sd, &out));
  g_assert_cmpfloat (out, ==, 1.0f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/attention-query/kernels-agree", test_kernels_agree);
  g_test_add_func ("/attention-query/overflowing-scores", test_overflowing_scores);
  g_test_add_func ("/attention-query/refusals", test_refusals);
  return g_test_run ();
}
