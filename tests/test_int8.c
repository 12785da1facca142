/* The integer CNN path: TFLite's requantisation arithmetic (src/qmath.h) on edge values,
 * the portable and AVX2 kernels (src/qkernels*.c) equal bit for bit. */
#include "../src/qkernels.h"
#include "testutil.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- arithmetic */

static void
test_multiplier (void)
{
  ConyQMul m;
  g_assert_true (cony_q_multiplier (0.5, &m));
  g_assert_cmpint (m.mult, ==, 1 << 30);
  g_assert_cmpint (m.shift, ==, 0);
  g_assert_true (cony_q_multiplier (1.0, &m));
  g_assert_cmpint (m.mult, ==, 1 << 30);
  g_assert_cmpint (m.shift, ==, 1);
  g_assert_true (cony_q_multiplier (0.75, &m));
  g_assert_cmpint (m.mult, ==, 0x60000000);
  g_assert_true (cony_q_multiplier (0.1, &m)); /* 0.8 * 2^-3: 0.8 * 2^31 rounded */
  g_assert_cmpint (m.mult, ==, 1717986918);
  g_assert_cmpint (m.shift, ==, -3);
  /* a mantissa that rounds up to 2^31 becomes 2^30 with the next exponent */
  g_assert_true (cony_q_multiplier (1.0 - ldexp (1.0, -40), &m));
  g_assert_cmpint (m.mult, ==, 1 << 30);
  g_assert_cmpint (m.shift, ==, 1);
  /* far below one step: zero; zero; refused: negative, NaN, too large */
  g_assert_true (cony_q_multiplier (ldexp (1.0, -40), &m));
  g_assert_cmpint (m.mult, ==, 0);
  g_assert_true (cony_q_multiplier (0.0, &m));
  g_assert_cmpint (m.mult, ==, 0);
  g_assert_false (cony_q_multiplier (-0.5, &m));
  g_assert_false (cony_q_multiplier (NAN, &m));
  g_assert_false (cony_q_multiplier (ldexp (1.0, 31), &m));
}

static void
test_high_mul (void)
{
  /* saturation: the one product out of range */
  g_assert_cmpint (cony_q_srdhm (G_MININT32, G_MININT32), ==, G_MAXINT32);
  g_assert_cmpint (cony_q_srdhm (G_MAXINT32, G_MAXINT32), ==, G_MAXINT32 - 1);
  g_assert_cmpint (cony_q_srdhm (G_MININT32, G_MAXINT32), ==, -G_MAXINT32);
  g_assert_cmpint (cony_q_srdhm (1 << 30, 1 << 30), ==, 1 << 29);
  /* ties (a*b = +-2^30, half of 2^31) round toward +infinity */
  g_assert_cmpint (cony_q_srdhm (1 << 15, 1 << 15), ==, 1);
  g_assert_cmpint (cony_q_srdhm (-(1 << 15), 1 << 15), ==, 0);
  g_assert_cmpint (cony_q_srdhm (-(1 << 15) - 1, 1 << 15), ==, -1);
  g_assert_cmpint (cony_q_srdhm (3 << 15, 1 << 15), ==, 2);
  g_assert_cmpint (cony_q_srdhm (-(3 << 15), 1 << 15), ==, -1);
}

static void
test_divide_pot (void)
{
  /* round to nearest, ties away from zero */
  g_assert_cmpint (cony_q_rdivpot (5, 1), ==, 3);
  g_assert_cmpint (cony_q_rdivpot (-5, 1), ==, -3);
  g_assert_cmpint (cony_q_rdivpot (3, 1), ==, 2);
  g_assert_cmpint (cony_q_rdivpot (-3, 1), ==, -2);
  g_assert_cmpint (cony_q_rdivpot (-4, 1), ==, -2);
  g_assert_cmpint (cony_q_rdivpot (-6, 2), ==, -2); /* -1.5 */
  g_assert_cmpint (cony_q_rdivpot (-5, 2), ==, -1); /* -1.25 */
  g_assert_cmpint (cony_q_rdivpot (7, 0), ==, 7);
  g_assert_cmpint (cony_q_rdivpot (G_MININT32, 31), ==, -1);
  g_assert_cmpint (cony_q_rdivpot (G_MAXINT32, 31), ==, 1);
  g_assert_cmpint (cony_q_rdivpot (-(1 << 30), 31), ==, -1); /* -0.5: away from zero */
  g_assert_cmpint (cony_q_rdivpot ((1 << 30) - 1, 31), ==, 0);
}

/* cony_q_mul is x * M to within one (two roundings) on random values, and requant
 * saturates at the clamp. */
static void
test_requant (void)
{
  GRand *r = g_rand_new_with_seed (42);
  for (int i = 0; i < 20000; i++) {
    double real = exp (g_rand_double_range (r, log (1e-6), log (8.0)));
    ConyQMul m;
    g_assert_true (cony_q_multiplier (real, &m));
    gint32 x = (gint32) g_rand_int_range (r, -(1 << 24), 1 << 24);
    double want = x * real;
    gint32 got = cony_q_mul (x, m);
    g_assert_cmpfloat (fabs (got - want), <=, 1.0 + 1e-6 * fabs (want));
  }
  g_rand_free (r);
  ConyQMul half;
  cony_q_multiplier (0.5, &half);
  g_assert_cmpint (cony_q_requant (G_MAXINT32, half, 0, -128, 127), ==, 127);
  g_assert_cmpint (cony_q_requant (G_MININT32, half, 0, -128, 127), ==, -128);
  /* M = 0.5 has no right shift: -1.5 is rounded by the high product, toward +infinity */
  g_assert_cmpint (cony_q_requant (-3, half, 0, -128, 127), ==, -1);
  g_assert_cmpint (cony_q_requant (3, half, 0, -128, 127), ==, 2);
  /* M = 0.25: -0.75 becomes -1.5 / 2 -> -1 (high product) then -0.5 -> -1 (away from 0) */
  ConyQMul quarter;
  cony_q_multiplier (0.25, &quarter);
  g_assert_cmpint (quarter.shift, ==, -1);
  g_assert_cmpint (cony_q_requant (-3, quarter, 0, -128, 127), ==, -1);
  g_assert_cmpint (cony_q_requant (-2, quarter, 0, -128, 127), ==, -1); /* -0.5 */
  g_assert_cmpint (cony_q_requant (2, quarter, 0, -128, 127), ==, 1);
  g_assert_cmpint (cony_q_requant (3, half, -128, -128, 127), ==, -126); /* zero point */
  g_assert_cmpint (cony_q_requant (-40, half, -128, -128, 127), ==, -128);
  /* ReLU6 at scale 6/255 from zero point -128 is the whole int8 range */
  gint32 lo, hi;
  cony_q_act_range (TRUE, 6.0f, 0.0235294122248888f, -128, &lo, &hi);
  g_assert_cmpint (lo, ==, -128);
  g_assert_cmpint (hi, ==, 127);
  cony_q_act_range (TRUE, 6.0f, 0.1f, 10, &lo, &hi);
  g_assert_cmpint (lo, ==, 10);
  g_assert_cmpint (hi, ==, 70);
  cony_q_act_range (TRUE, INFINITY, 0.1f, 10, &lo, &hi);
  g_assert_cmpint (hi, ==, 127);
}

static void
test_quantize (void)
{
  g_assert_cmpint (cony_q_quantize (0.5f, 1.0f, 0), ==, 1); /* half away from zero */
  g_assert_cmpint (cony_q_quantize (-0.5f, 1.0f, 0), ==, -1);
  g_assert_cmpint (cony_q_quantize (-2.5f, 1.0f, 0), ==, -3);
  g_assert_cmpint (cony_q_quantize (1.0f, 0.25f, 17), ==, 21);
  g_assert_cmpint (cony_q_quantize (1e30f, 0.25f, 17), ==, 127);
  g_assert_cmpint (cony_q_quantize (-INFINITY, 0.25f, 17), ==, -128);
  g_assert_cmpint (cony_q_quantize (NAN, 0.25f, 17), ==, 17);
}

/* The int8 add of two scales (MobileNet-v2's residuals) against the real sum. */
static void
test_add (void)
{
  ConyQAdd a;
  g_assert_true (cony_q_add_init (&a, 0.02f, -5, 0.05f, 3, 0.06f, -10, -128, 127));
  for (int x1 = -128; x1 < 128; x1 += 3)
    for (int x2 = -128; x2 < 128; x2 += 5) {
      double real = 0.02 * (x1 + 5) + 0.05 * (x2 - 3);
      double want = CLAMP (round (real / 0.06) - 10, -128, 127);
      g_assert_cmpfloat (fabs (cony_q_add (&a, (gint8) x1, (gint8) x2) - want), <=, 1.0);
    }
  g_assert_false (cony_q_add_init (&a, 0.0f, 0, 0.05f, 0, 0.06f, 0, -128, 127));
}

/* ---------------------------------------------------------------- kernels */

/* The AVX2 and portable kernels on random products (odd K, N not a multiple of 16,
 * every remainder of the 6-row blocks, left and right shifts, extreme accumulators). */
static void
test_kernels_equal (void)
{
  const ConyQKernels *avx = cony_qkernels_avx2 (), *port = cony_qkernels_portable ();
  if (avx == NULL) {
    g_test_skip ("no AVX2 on this CPU: the portable kernels only");
    return;
  }
  GRand *r = g_rand_new_with_seed (7);
  guint shapes[][3] = { { 13, 9, 32 }, { 7, 64, 21 }, { 25, 1024, 48 }, { 1, 1024, 521 },
    { 6, 33, 16 }, { 11, 2, 5 } };
  for (guint s = 0; s < G_N_ELEMENTS (shapes); s++) {
    guint M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
    g_autofree gint8 *w = g_new (gint8, (gsize) K * N);
    g_autofree gint32 *bias = g_new (gint32, N);
    g_autofree ConyQMul *m = g_new (ConyQMul, N);
    for (gsize i = 0; i < (gsize) K * N; i++)
      w[i] = (gint8) g_rand_int_range (r, -128, 128);
    for (guint c = 0; c < N; c++) {
      bias[c] = g_rand_int_range (r, -100000, 100000);
      cony_q_multiplier (exp (g_rand_double_range (r, log (1e-7), log (4.0))), &m[c]);
    }
    ConyQGemm g;
    cony_qgemm_init (&g, K, N, w, bias, m, g_rand_int_range (r, -128, 128), -128, 127);
    g_autofree gint16 *a = g_new0 (gint16, (gsize) M * g.Kp);
    for (guint i = 0; i < M; i++)
      for (guint k = 0; k < K; k++)
        a[(gsize) i * g.Kp + k] = (gint16) g_rand_int_range (r, -255, 256);
    g_autofree gint8 *o1 = g_new0 (gint8, (gsize) M * N);
    g_autofree gint8 *o2 = g_new0 (gint8, (gsize) M * N);
    avx->gemm (&g, M, a, o1, N);
    port->gemm (&g, M, a, o2, N);
    g_assert_cmpmem (o1, (gsize) M * N, o2, (gsize) M * N);
    /* the product itself, against a direct sum, for one row */
    for (guint c = 0; c < N; c++) {
      gint64 acc = bias[c];
      for (guint k = 0; k < K; k++)
        acc += (gint64) a[k] * w[(gsize) c * K + k];
      g_assert_cmpint (o2[c], ==, cony_q_requant ((gint32) acc, m[c], g.out.zp, -128, 127));
    }
    /* requantisation alone on extreme accumulators */
    g_autofree gint32 *acc = g_new (gint32, N);
    for (guint c = 0; c < N; c++) {
      gint32 edge[] = { G_MININT32, G_MAXINT32, 0, -1, 1, -(1 << 30), 1 << 30 };
      acc[c] = c % 3 ? (gint32) g_rand_int (r) : edge[c % G_N_ELEMENTS (edge)];
    }
    avx->requant (&g.out, acc, N, o1);
    port->requant (&g.out, acc, N, o2);
    g_assert_cmpmem (o1, N, o2, N);
    cony_qgemm_clear (&g);
  }
  g_rand_free (r);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/int8/multiplier", test_multiplier);
  g_test_add_func ("/int8/high-mul", test_high_mul);
  g_test_add_func ("/int8/divide-pot", test_divide_pot);
  g_test_add_func ("/int8/requant", test_requant);
  g_test_add_func ("/int8/quantize", test_quantize);
  g_test_add_func ("/int8/add", test_add);
  g_test_add_func ("/int8/kernels-equal", test_kernels_equal);
  return g_test_run ();
}
