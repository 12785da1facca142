/* The one-vector matrix products of the step hot path (src/kernels/gemv.c): float32 and float16
 * storage, the AVX2 kernel and the portable one, against a double reference. */
#include "gemv-private.h"

#include <math.h>
#include <string.h>

/* Weights that are exact float16 values when @f16_exact (k / 1024 for small k, plus
 * subnormal float16 values), else arbitrary floats. */
static float *
random_weights (GRand *r, gsize n, gboolean f16_exact)
{
  float *w = g_new (float, n);
  for (gsize i = 0; i < n; i++) {
    if (!f16_exact)
      w[i] = (float) g_rand_double_range (r, -1, 1);
    else if (i % 17 == 5)
      w[i] = (float) g_rand_int_range (r, -1023, 1024) * 0x1p-24f; /* subnormal float16 */
    else
      w[i] = (float) g_rand_int_range (r, -2048, 2049) / 1024.0f;
  }
  return w;
}

static double
max_err (const float *w, int rows, int cols, const float *x, const float *y0, const float *y)
{
  double worst = 0;
  for (int r = 0; r < rows; r++) {
    double s = y0[r], mag = fabs (y0[r]);
    for (int c = 0; c < cols; c++) {
      s += (double) w[(gsize) r * cols + c] * x[c];
      mag += fabs ((double) w[(gsize) r * cols + c] * x[c]);
    }
    worst = fmax (worst, fabs (y[r] - s) / (mag + 1e-30));
  }
  return worst;
}

static const int shapes[][2] = {
  { 1, 1 }, { 3, 5 }, { 4, 8 }, { 5, 16 }, { 7, 23 }, { 8, 24 }, { 13, 31 }, { 24, 8 },
  { 192, 128 }, { 576, 192 }, { 384, 192 }, { 192, 384 }, { 10, 192 }, { 9, 200 }, { 33, 47 },
  { 4201, 1030 }, /* over 8 MB in float16 too: the kernel without software prefetching */
};

/* Every shape, both storages, both kernels: within float rounding of the double sum
 * (relative to Σ|w·x|), y accumulated on top of its old value. */
static void
test_against_double (void)
{
  GRand *r = g_rand_new_with_seed (3);
  g_test_message ("accelerated kernel on this CPU: %s", cony_gemv_accelerated () ? "yes" : "no");
  for (guint s = 0; s < G_N_ELEMENTS (shapes); s++) {
    int rows = shapes[s][0], cols = shapes[s][1];
    for (int exact = 0; exact <= 1; exact++) {
      float *w = random_weights (r, (gsize) rows * cols, exact);
      float *x = random_weights (r, cols, FALSE);
      float *y0 = random_weights (r, rows, FALSE);
      float *y = g_new (float, rows), *yp = g_new (float, rows);
      ConyGemvMatrix m;
      cony_gemv_matrix_init (&m, w, rows, cols, TRUE);
      g_assert_true ((m.f16 != NULL) == exact);
      memcpy (y, y0, sizeof (float) * rows);
      memcpy (yp, y0, sizeof (float) * rows);
      cony_gemv (&m, x, y);
      cony_gemv_portable (&m, x, yp);
      double e = max_err (w, rows, cols, x, y0, y), ep = max_err (w, rows, cols, x, y0, yp);
      g_assert_cmpfloat (e, <=, 1e-6);
      g_assert_cmpfloat (ep, <=, 1e-6);
      /* dispatched vs portable: the same sums, in a different order at most (relative
       * to Σ|w·x|, like max_err) */
      for (int i = 0; i < rows; i++) {
        double mag = fabs (y0[i]);
        for (int c = 0; c < cols; c++)
          mag += fabs ((double) w[(gsize) i * cols + c] * x[c]);
        g_assert_cmpfloat (fabsf (y[i] - yp[i]), <=, 2e-6 * mag + 1e-30);
      }
      cony_gemv_matrix_clear (&m);
      g_assert_null (m.f16);
      g_free (w), g_free (x), g_free (y0), g_free (y), g_free (yp);
    }
  }
  g_rand_free (r);
}

/* @p and @q give bit for bit the same y, in the dispatched and in the portable kernel. */
static void
assert_same_results (const ConyGemvMatrix *p, const ConyGemvMatrix *q, const float *x)
{
  int rows = p->rows;
  float *a = g_new (float, rows), *b = g_new (float, rows);
  for (int portable = 0; portable <= 1; portable++) {
    memset (a, 0, sizeof (float) * rows);
    memset (b, 0, sizeof (float) * rows);
    (portable ? cony_gemv_portable : cony_gemv) (p, x, a);
    (portable ? cony_gemv_portable : cony_gemv) (q, x, b);
    g_assert_cmpmem (a, sizeof (float) * rows, b, sizeof (float) * rows);
  }
  g_free (a), g_free (b);
}

/* F16-exact weights: the float16 copy gives bit for bit the float32 copy's result, in
 * the dispatched and in the portable kernel; so does a float16-only matrix (no float32
 * weights, what the CNN's F16 FC layers keep) that owns its weights. */
static void
test_f16_equals_f32 (void)
{
  GRand *r = g_rand_new_with_seed (11);
  for (guint s = 0; s < G_N_ELEMENTS (shapes); s++) {
    int rows = shapes[s][0], cols = shapes[s][1];
    gsize n = (gsize) rows * cols;
    float *w = random_weights (r, n, TRUE);
    float *x = random_weights (r, cols, FALSE);
    ConyGemvMatrix m16, m32, only;
    cony_gemv_matrix_init (&m16, w, rows, cols, TRUE);
    cony_gemv_matrix_init (&m32, w, rows, cols, FALSE);
    g_assert_nonnull (m16.f16);
    g_assert_null (m32.f16);
    assert_same_results (&m16, &m32, x);
    guint16 *h = g_new (guint16, n);
    for (gsize i = 0; i < n; i++)
      h[i] = cony_float_to_half (w[i]);
    cony_gemv_matrix_init_f16 (&only, h, rows, cols, TRUE);
    g_assert_null (only.f32);
    g_assert_cmpmem (only.f16, n * 2, m16.f16, n * 2);
    assert_same_results (&only, &m32, x);
    cony_gemv_matrix_clear (&only); /* frees h */
    g_assert_null (only.f16);
    cony_gemv_matrix_clear (&m16);
    cony_gemv_matrix_clear (&m32);
    g_free (w), g_free (x);
  }
  g_rand_free (r);
}

/* A single weight that is not a float16 value keeps the matrix in float32. */
static void
test_not_f16 (void)
{
  float w[12];
  for (int i = 0; i < 12; i++)
    w[i] = i / 8.0f;
  ConyGemvMatrix m;
  cony_gemv_matrix_init (&m, w, 3, 4, TRUE);
  g_assert_nonnull (m.f16);
  cony_gemv_matrix_clear (&m);
  w[7] = 1.0f + 0x1p-11f; /* needs 12 mantissa bits */
  cony_gemv_matrix_init (&m, w, 3, 4, TRUE);
  g_assert_null (m.f16);
  w[7] = 65536.0f; /* above float16's largest value */
  cony_gemv_matrix_init (&m, w, 3, 4, TRUE);
  g_assert_null (m.f16);
  w[7] = 0x1p-25f; /* below float16's smallest subnormal */
  cony_gemv_matrix_init (&m, w, 3, 4, TRUE);
  g_assert_null (m.f16);
}

/* Every finite float16 value survives half -> float -> half, and the float value is the
 * one the IEEE encoding defines; a float between two float16 values is refused. */
static void
test_half_conversion (void)
{
  int finite = 0;
  for (guint32 h = 0; h < 0x10000; h++) {
    int e = (h >> 10) & 0x1f, mant = h & 0x3ff;
    float f = cony_half_to_float ((guint16) h);
    if (e == 0x1f) {
      g_assert_true (mant ? isnan (f) : isinf (f));
      guint16 back;
      g_assert_false (cony_float_to_half_exact (f, &back));
      continue;
    }
    double want = e ? ldexp (1.0 + mant / 1024.0, e - 15) : ldexp (mant, -24);
    if (h & 0x8000)
      want = -want;
    g_assert_cmpfloat ((double) f, ==, want);
    g_assert_true (!!signbit (f) == !!(h & 0x8000));
    guint16 back = 0;
    g_assert_true (cony_float_to_half_exact (f, &back));
    g_assert_cmpuint (back, ==, h);
    finite++;
    /* halfway to the next magnitude: not a float16 value */
    if ((h & 0x7fff) < 0x7bff) {
      float next = cony_half_to_float ((guint16) (h + 1));
      float mid = (float) (((double) f + next) / 2);
      g_assert_false (cony_float_to_half_exact (mid, &back));
    }
  }
  g_assert_cmpint (finite, ==, 63488);
}

/* Rounding float -> float16 (to nearest even, Inf beyond the range) against the value
 * nearest in double, at, between and just beside every pair of neighbouring float16
 * values; the expansion of a buffer (F16C where there is one) equals cony_half_to_float. */
static void
test_half_rounding (void)
{
  for (guint32 h = 0; h < 0x7c00; h++) {
    float f = cony_half_to_float ((guint16) h);
    for (int neg = 0; neg <= 1; neg++) {
      guint16 s = neg ? 0x8000 : 0;
      g_assert_cmphex (cony_float_to_half (neg ? -f : f), ==, s | h);
      /* above f: halfway to the next value (to the even one of the two), one float ulp
       * below and above it */
      double next = h < 0x7bff ? cony_half_to_float ((guint16) (h + 1)) : 65536.0;
      float mid = (float) (((double) f + next) / 2);
      guint16 even = (h & 1) ? (guint16) (h + 1) : (guint16) h;
      float lo = nextafterf (mid, 0.0f), hi = nextafterf (mid, INFINITY);
      g_assert_cmphex (cony_float_to_half (neg ? -mid : mid), ==, s | even);
      g_assert_cmphex (cony_float_to_half (neg ? -lo : lo), ==, s | h);
      g_assert_cmphex (cony_float_to_half (neg ? -hi : hi), ==, s | (h + 1));
    }
  }
  g_assert_cmphex (cony_float_to_half (1e6f), ==, 0x7c00);
  g_assert_cmphex (cony_float_to_half (-INFINITY), ==, 0xfc00);
  g_assert_cmphex (cony_float_to_half (NAN) & 0x7fff, >, 0x7c00);
  g_assert_cmphex (cony_float_to_half (0x1p-26f), ==, 0); /* below half the smallest subnormal */

  /* expansion, with a start that is not 8-aligned and a tail */
  guint16 *all = g_new (guint16, 0x10000);
  float *out = g_new (float, 0x10000);
  for (guint32 h = 0; h < 0x10000; h++)
    all[h] = (guint16) h;
  cony_half_expand (all + 3, 0x10000 - 3 - 5, out + 3);
  for (guint32 h = 3; h < 0x10000 - 5; h++) {
    float want = cony_half_to_float ((guint16) h);
    if (isnan (want))
      g_assert_true (isnan (out[h]));
    else
      g_assert_cmpmem (&out[h], sizeof (float), &want, sizeof (float));
  }
  g_free (all);
  g_free (out);
}

/* GELU against the double erf formula, on a fine grid over [-12, 12], the tails and an
 * odd length (the chunk remainder). */
static void
test_gelu (void)
{
  int n = 24001 + 7;
  float *x = g_new (float, n), *g = g_new (float, n);
  for (int i = 0; i < 24001; i++)
    x[i] = -12.0f + i * 0.001f;
  const float extra[7] = { 0.0f, -0.0f, 40.0f, -40.0f, 1e-30f, -1e-30f, 3.0e5f };
  memcpy (x + 24001, extra, sizeof extra);
  memcpy (g, x, sizeof (float) * n);
  cony_gelu (g, n);
  double worst = 0, worst_erff = 0;
  for (int i = 0; i < n; i++) {
    double want = 0.5 * x[i] * (1.0 + erf (x[i] * M_SQRT1_2));
    double scale = fmax (1.0, fabs (x[i]));
    float libm = 0.5f * x[i] * (1.0f + erff (x[i] * (float) M_SQRT1_2));
    worst = fmax (worst, fabs (g[i] - want) / scale);
    worst_erff = fmax (worst_erff, fabs (libm - want) / scale);
    g_assert_true (isfinite (g[i]));
  }
  g_test_message ("GELU max |error| / max(1, |x|): %.3g (float erff formula: %.3g)", worst,
      worst_erff);
  g_assert_cmpfloat (worst, <=, 2e-7);
  g_assert_cmpfloat (g[24001], ==, 0.0f);
  g_assert_cmpfloat (g[24003], ==, 40.0f);
  g_assert_cmpfloat (fabsf (g[24004]), <=, 1e-30f);
  g_free (x), g_free (g);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/gemv/against-double", test_against_double);
  g_test_add_func ("/gemv/f16-equals-f32", test_f16_equals_f32);
  g_test_add_func ("/gemv/not-f16", test_not_f16);
  g_test_add_func ("/gemv/half-conversion", test_half_conversion);
  g_test_add_func ("/gemv/half-rounding", test_half_rounding);
  g_test_add_func ("/gemv/gelu", test_gelu);
  return g_test_run ();
}
