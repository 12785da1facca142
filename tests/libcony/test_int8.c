/* The integer CNN path: TFLite's requantisation arithmetic (src/kernels/qmath.h) on edge values,
 * the portable, AVX2 and NEON kernels (src/qkernels*.c) equal bit for bit, and the shipped
 * YAMNet in int8 against ArmNN's scores of the original .tflite (tests/golden/yamnet/,
 * training/conytrain/audio/yamnet_armnn.py): every score equal or one int8 logit step
 * away, the same top-1 on every golden patch, with either kernel set. */
#include "cnn-private.h"
#include "qkernels.h"
#include "cony/error.h"
#include "testutil.h"

#include <json-glib/json-glib.h>

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

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
  /* a tiny scale (a malformed file: 6 / scale beyond int) is still the int8 range */
  cony_q_act_range (TRUE, 6.0f, 1e-12f, 3, &lo, &hi);
  g_assert_cmpint (lo, ==, 3);
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

/* The add's edge cases, each worked out by hand from TFLite's formula: equal scales
 * halve exactly (x << 20 times 0.5, then times 2^-20 rounded half away from zero), so
 * negative halves round down; inputs at their zero points give the output's; sums past
 * the range or the activation bounds saturate; a tiny second scale vanishes. */
static void
test_add_edges (void)
{
  ConyQAdd a;
  /* 0.5 x1 + 0.5 x2 at scale 1: round ((x1 + x2) / 2), ties away from zero */
  g_assert_true (cony_q_add_init (&a, 0.5f, 0, 0.5f, 0, 1.0f, 0, -128, 127));
  g_assert_cmpint (a.m1.mult, ==, 1 << 30);
  g_assert_cmpint (a.m1.shift, ==, 0);
  g_assert_cmpint (cony_q_add (&a, 1, 2), ==, 2);    /* 1.5 */
  g_assert_cmpint (cony_q_add (&a, -1, -2), ==, -2); /* -1.5 */
  g_assert_cmpint (cony_q_add (&a, 0, -1), ==, -1);  /* -0.5 */
  g_assert_cmpint (cony_q_add (&a, 0, 1), ==, 1);    /* 0.5 */
  g_assert_cmpint (cony_q_add (&a, -3, 2), ==, -1);  /* -0.5 */
  g_assert_cmpint (cony_q_add (&a, 127, 127), ==, 127);
  g_assert_cmpint (cony_q_add (&a, -128, -128), ==, -128);
  g_assert_cmpint (cony_q_add (&a, -128, 127), ==, -1); /* -0.5 */
  /* zero points: inputs at theirs give the output's, whatever the scales */
  g_assert_true (cony_q_add_init (&a, 0.0235f, -128, 0.3477f, 7, 0.41f, -3, -128, 127));
  g_assert_cmpint (cony_q_add (&a, -128, 7), ==, -3);
  /* saturation: the sum beyond int8, and the bounds of a fused activation */
  g_assert_true (cony_q_add_init (&a, 0.1f, 0, 0.1f, 0, 0.05f, 10, -128, 127));
  g_assert_cmpint (cony_q_add (&a, 127, 127), ==, 127);
  g_assert_cmpint (cony_q_add (&a, -128, -128), ==, -128);
  g_assert_cmpint (cony_q_add (&a, 20, 20), ==, 90);
  g_assert_true (cony_q_add_init (&a, 0.1f, 0, 0.1f, 0, 0.05f, 10, 10, 100));
  g_assert_cmpint (cony_q_add (&a, 127, 127), ==, 100);
  g_assert_cmpint (cony_q_add (&a, -20, 0), ==, 10);
  /* a second scale 2^-24 of the first: its input shifts out entirely */
  g_assert_true (cony_q_add_init (&a, 1.0f, 0, 1.0f / 16777216.0f, 0, 1.0f, 0, -128, 127));
  g_assert_cmpint (cony_q_add (&a, 5, 127), ==, 5);
  g_assert_cmpint (cony_q_add (&a, -5, -128), ==, -5);
  /* the inputs' order does not matter */
  g_assert_true (cony_q_add_init (&a, 0.02f, -5, 0.05f, 3, 0.06f, -10, -128, 127));
  ConyQAdd b;
  g_assert_true (cony_q_add_init (&b, 0.05f, 3, 0.02f, -5, 0.06f, -10, -128, 127));
  for (int x1 = -128; x1 < 128; x1++)
    for (int x2 = -128; x2 < 128; x2 += 7)
      g_assert_cmpint (cony_q_add (&a, (gint8) x1, (gint8) x2), ==,
          cony_q_add (&b, (gint8) x2, (gint8) x1));
}

/* ---------------------------------------------------------------- kernels */

/* The SIMD kernel sets this CPU runs that take any packing of a product (AVX2 takes the
 * portable packing only; NEON, with and without sdot, any): into @sets, how many. */
static guint
simd_sets (const ConyQKernels **sets)
{
  const ConyQKernels *all[] = { cony_qkernels_avx2 (), cony_qkernels_neon (),
    cony_qkernels_neon_dotprod () };
  guint n = 0;
  for (guint i = 0; i < G_N_ELEMENTS (all); i++)
    if (all[i] != NULL)
      sets[n++] = all[i];
  if (n == 0)
    g_test_message (
        "no SIMD kernels on this CPU: the portable kernels against the direct sum only");
  return n;
}

/* Random int8 weights whose pairs (k, k + 1) mostly keep vpmaddubsw exact on inputs up
 * to 255, many exactly at its limit (positive or negative parts summing to 128: 64 + 64,
 * 127 + 1, -128 + 0), others just over it (129) or far over (up to 127 + 127). */
static gint8
pair_weight (GRand *r, gsize i, gint8 prev)
{
  if (i % 2 == 0)
    return (gint8) g_rand_int_range (r, -128, 128);
  if (g_rand_int_range (r, 0, 50) == 0)
    return (gint8) (prev >= 0 ? 127 : -128);
  if (g_rand_int_range (r, 0, 50) == 0) /* just over the limit */
    return (gint8) (prev >= 0 ? MIN (127, 129 - prev) : MAX (-128, -129 - prev));
  if (g_rand_boolean (r)) /* at the limit */
    return (gint8) (prev >= 0 ? 128 - prev : -128 - prev);
  return (gint8) (prev >= 0 ? g_rand_int_range (r, -128, 129 - prev)
                            : g_rand_int_range (r, -128 - prev, 128));
}

/* Random weights for @n channels of @K in one of four kinds (@kind % 4): int8 with
 * zero point 0 (TFLite's per-channel weights), uint8 with one zero point (its per-tensor
 * asymmetric weights), int8 with a zero point per channel (the first three reach the
 * extremes of w - zp, -255 or 255, somewhere), and int8 pairs near vpmaddubsw's limit
 * (pair_weight). @data (n * K bytes) and @zp (n) are filled. */
static ConyQWeights
random_weights (GRand *r, guint kind, guint K, guint n, guint8 *data, gint32 *zp)
{
  kind %= 4;
  ConyQWeights w = { data, kind == 1, kind == 1 || kind == 2 ? zp : NULL, kind == 2 };
  for (guint c = 0; c < n; c++)
    zp[c] = kind == 1 ? (K % 2 ? 255 : 0) : kind == 2 ? (c % 2 ? 127 : -128) : 0;
  for (gsize i = 0; i < (gsize) K * n; i++) {
    gint32 v = g_rand_int_range (r, -128, 128), c = (gint32) (i / K);
    if (kind == 3)
      data[i] = (guint8) pair_weight (r, i % K, i % K ? (gint8) data[i - 1] : 0);
    else if (kind == 1)
      data[i] = (guint8) (i % 7 == 0 ? 255 - zp[0] : v + 128); /* +-255 */
    else
      data[i] = (guint8) (gint8) (i % 7 == 0
              ? (kind == 0 ? (i % 2 ? 127 : -128) : (c % 2 ? -128 : 127))
              : v);
  }
  return w;
}

/* @o made to differ from @want in every byte before a kernel writes it, so that a value
 * the kernel fails to store cannot pass for one an earlier call left there. */
static void
spoil (gint8 *o, const gint8 *want, gsize n)
{
  for (gsize i = 0; i < n; i++)
    o[i] = (gint8) ~want[i];
}

/* The dot-product kernel sets (the exact AVX2 emulation of vpdpbusd, and AVX-VNNI's and
 * AVX512-VNNI's where this CPU has them, on panels of 16 and 64 columns; NEON with sdot,
 * and plain NEON, which takes the same packing) on one product: packed for them, int8
 * weights (zero point 0) run as bytes only, even where vpmaddubsw would saturate, uint8
 * ones with one zero point too in the x86 sets (as w - 128, each row's accumulators
 * corrected: ConyQGemm's row_scale), and
 * both they and the portable kernel on their packing give @want (M x N), the portable
 * result. */
static void
check_dot4_kernels (guint K, guint N, const ConyQWeights *w, gint32 in_zp, const gint32 *bias,
    const ConyQMul *m, gint32 zp, gint32 lo, gint32 hi, guint M, const gint8 *x, gsize ldx,
    const gint8 *want)
{
  const ConyQKernels *sets[] = { cony_qkernels_dot4_emulated (), cony_qkernels_avxvnni (),
    cony_qkernels_avx512vnni (), cony_qkernels_neon (), cony_qkernels_neon_dotprod () };
  g_autofree gint8 *o = g_new (gint8, (gsize) M * N);
  for (guint s = 0; s < G_N_ELEMENTS (sets); s++) {
    if (sets[s] == NULL)
      continue;
    ConyQGemm g;
    cony_qgemm_init (&g, sets[s], K, N, w, in_zp, bias, m, zp, lo, hi);
    g_assert_true (g.bytes_int8);
    g_assert_cmpuint (g.p8.width, ==, sets[s]->panel ? sets[s]->panel : 8);
    if (!w->is_u8 && w->zp == NULL)
      g_assert_cmpuint (g.p8.start16[cony_qgemm_panels (&g)], ==, 0);
    /* uint8 weights with one zero point: all bytes too, as w - 128, where the set adds
     * the rows' corrections */
    gboolean corrected = sets[s]->row_corrections && w->is_u8 && !w->zp_per_chan;
    /* (random_weights' uint8 kind has one zero point per tensor) */
    g_assert_cmpint (g.row_scale, ==, corrected ? 128 - (w->zp ? w->zp[0] : 0) : 0);
    if (corrected)
      g_assert_cmpuint (g.p8.start16[cony_qgemm_panels (&g)], ==, 0);
    g_autofree gint16 *scratch = g_new (gint16, cony_qgemm_scratch (&g, M));
    spoil (o, want, (gsize) M * N);
    sets[s]->gemm (&g, M, x, ldx, o, N, scratch);
    g_assert_cmpmem (o, (gsize) M * N, want, (gsize) M * N);
    spoil (o, want, (gsize) M * N);
    cony_qkernels_portable ()->gemm (&g, M, x, ldx, o, N, scratch);
    g_assert_cmpmem (o, (gsize) M * N, want, (gsize) M * N);
    cony_qgemm_clear (&g);
  }
}

/* @out (rows @ldo apart) against the direct sums of the product of @x (M x K, rows @ldx
 * apart) and @w, requantised. */
static void
check_direct_sums (guint M, guint K, guint N, const gint8 *x, gsize ldx, const ConyQWeights *w,
    const gint32 *bias, const ConyQMul *m, gint32 in_zp, gint32 zp, gint32 lo, gint32 hi,
    const gint8 *out, gsize ldo)
{
  for (guint i = 0; i < M; i++)
    for (guint c = 0; c < N; c++) {
      gint64 acc = bias[c];
      for (guint k = 0; k < K; k++)
        acc += (gint64) (x[(gsize) i * ldx + k] - in_zp) * cony_qweights_at (w, K, c, k);
      g_assert_cmpint (out[(gsize) i * ldo + c], ==,
          cony_q_requant ((gint32) acc, m[c], zp, lo, hi));
    }
}

/* The SIMD (simd_sets) and portable kernels on random products (odd K, N not a multiple
 * of 16, every remainder of the row blocks, several of the AVX2 kernel's row chunks, left
 * and right shifts, extreme accumulators, the short rounding and the long one for small
 * accumulators), for each kind of weights and input zero points at both ends; the
 * portable result also against a direct sum of (x - in_zp) (w - zp) for every row. The
 * random draws do not depend on which sets this CPU has. */
static void
test_kernels_equal (void)
{
  const ConyQKernels *simd[4], *port = cony_qkernels_portable ();
  guint n_simd = simd_sets (simd);
  GRand *r = g_rand_new_with_seed (7);
  /* from { 13, 40, 64 }: whole 64-column panels of the 512-bit set, and its last panels
   * of three and one vector (100 = 64 + 36, 130 = 2 x 64 + 2); its half sweeps (K up to
   * 128) on one partial block, on whole blocks only, with a remainder of five rows and
   * over many blocks, two rows requantised a quad where a panel has 3 to 5 quads (K 12,
   * 16, 20: with the clamp and, at K 20, without); a whole panel too shallow for any
   * (K 8); one half sweep for a last panel of 32 columns (N 32 and 96, with and without
   * the clamp); deeper whole panels
   * with the short rounding (s even, kind 1), whose rounding waits for the next block's
   * products, of the same panel or the next: one partial block a panel, words among the
   * bytes and a partial panel after two whole ones */
  guint shapes[][3] = { { 13, 9, 32 }, { 7, 64, 21 }, { 25, 1024, 48 }, { 1, 1024, 521 },
    { 6, 33, 16 }, { 11, 2, 5 }, { 30, 27, 40 }, { 1000, 9, 20 }, { 1501, 30, 24 }, { 13, 40, 64 },
    { 20, 70, 100 }, { 7, 24, 130 }, { 48, 512, 192 }, { 4, 128, 64 }, { 12, 100, 128 },
    { 23, 96, 64 }, { 200, 48, 64 }, { 20, 16, 64 }, { 5, 256, 192 }, { 9, 136, 64 },
    { 13, 200, 136 }, { 13, 12, 64 }, { 29, 20, 128 }, { 20, 8, 64 }, { 19, 27, 32 },
    { 25, 40, 96 }, { 14, 64, 96 } };
  for (guint s = 0; s < G_N_ELEMENTS (shapes); s++)
    for (guint kind = 0; kind < 4; kind++) {
      guint M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
      g_autofree guint8 *wd = g_new (guint8, (gsize) K * N);
      g_autofree gint32 *wzp = g_new (gint32, N);
      ConyQWeights w = random_weights (r, kind == 3 ? 3 : kind + s, K, N, wd, wzp);
      g_autofree gint32 *bias = g_new (gint32, N);
      g_autofree ConyQMul *m = g_new (ConyQMul, N);
      /* kinds 1 and 3 with right shifts only: the AVX2 kernel's short rounding where the
       * accumulators are small, its long one where kind 1's biases reach 2^30 */
      gboolean right = kind % 2 == 1, big = kind == 1 && s % 2 == 1;
      for (guint c = 0; c < N; c++) {
        gint32 b = big ? (1 << 30) : 100000;
        bias[c] = g_rand_int_range (r, -b, b);
        cony_q_multiplier (exp (g_rand_double_range (r, log (1e-7), log (right ? 0.45 : 4.0))),
            &m[c]);
      }
      if (!right) /* a left shift somewhere, whatever the draws */
        cony_q_multiplier (2.5, &m[N / 2]);
      gint32 in_zp = kind == 0 ? -128 : kind == 1 ? 127 : g_rand_int_range (r, -128, 128);
      /* kinds 2 and 3 (this one with the short rounding) with a ReLU6-like clamp, the
       * others the whole range */
      gint32 zp = g_rand_int_range (r, -128, 100), lo = kind >= 2 ? zp : -128;
      gint32 hi = kind >= 2 ? zp + 27 : 127;
      ConyQGemm g;
      cony_qgemm_init (&g, port, K, N, &w, in_zp, bias, m, zp, lo, hi);
      /* near the limit, the AVX2 packing takes both of its paths */
      guint panels = (N + 7) / 8, byte = g.p8.start8[panels], word = g.p8.start16[panels];
      if (kind == 3 && K >= 8)
        g_assert_true (byte > 0 && word > 0);
      g_assert_true (g.small_acc == (right && !big));
      gsize ldx = K + 3; /* rows with a gap */
      g_autofree gint8 *x = g_new0 (gint8, (gsize) M * ldx);
      for (guint i = 0; i < M; i++)
        for (guint k = 0; k < K; k++)
          x[(gsize) i * ldx + k] = (gint8) (i % 3 == 0 ? (k % 2 ? 127 : -128)
                  : i % 3 == 1                         ? 127 /* u = 255 */
                                                       : g_rand_int_range (r, -128, 128));
      g_autofree gint16 *scratch = g_new (gint16, cony_qgemm_scratch (&g, M));
      g_autofree gint8 *o1 = g_new0 (gint8, (gsize) M * N);
      g_autofree gint8 *o2 = g_new0 (gint8, (gsize) M * N);
      port->gemm (&g, M, x, ldx, o2, N, scratch);
      check_direct_sums (M, K, N, x, ldx, &w, bias, m, in_zp, g.out.zp, lo, hi, o2, N);
      check_dot4_kernels (K, N, &w, in_zp, bias, m, zp, lo, hi, M, x, ldx, o2);
      /* requantisation alone on extreme accumulators, and with right shifts only (the
       * AVX2 kernels skip the left shift then) */
      g_autofree gint32 *acc = g_new (gint32, N);
      for (guint c = 0; c < N; c++) {
        gint32 edge[] = { G_MININT32, G_MAXINT32, 0, -1, 1, -(1 << 30), 1 << 30 };
        acc[c] = c % 3 ? (gint32) g_rand_int (r) : edge[c % G_N_ELEMENTS (edge)];
      }
      g_autofree ConyQMul *mr = g_memdup2 (m, sizeof (ConyQMul) * N);
      for (guint c = 0; c < N; c++)
        mr[c].shift = MIN (mr[c].shift, 0);
      ConyQOut o;
      cony_qout_init (&o, N, mr, g.out.zp, lo, hi);
      g_assert_false (o.any_left);
      g_autofree gint8 *q1 = g_new (gint8, N), *q2 = g_new (gint8, N);
      for (guint k = 0; k < n_simd; k++) {
        spoil (o1, o2, (gsize) M * N);
        simd[k]->gemm (&g, M, x, ldx, o1, N, scratch);
        g_assert_cmpmem (o1, (gsize) M * N, o2, (gsize) M * N);
        const ConyQOut *outs[] = { &g.out, &o };
        for (guint t = 0; t < 2; t++) {
          port->requant (outs[t], acc, N, q2);
          spoil (q1, q2, N);
          simd[k]->requant (outs[t], acc, N, q1);
          g_assert_cmpmem (q1, N, q2, N);
        }
      }
      cony_qout_clear (&o);
      cony_qgemm_clear (&g);
    }
  g_rand_free (r);
}

/* The short rounding (ConyQGemm's small_acc) on exact ties: with multipliers 2^-j both
 * of the requantisation's roundings meet halves on most accumulators, negative ones too
 * (where rounding half away from zero differs from rounding half up). Every set against
 * the direct sum, for whole 64-column panels and a last panel of 40 columns. */
static void
test_kernels_ties (void)
{
  const ConyQKernels *simd[4], *port = cony_qkernels_portable ();
  guint n_simd = simd_sets (simd);
  GRand *r = g_rand_new_with_seed (11);
  guint shapes[][3] = { { 13, 8, 64 }, { 6, 12, 128 }, { 25, 5, 104 } };
  for (guint s = 0; s < G_N_ELEMENTS (shapes); s++) {
    guint M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
    g_autofree guint8 *wd = g_new (guint8, (gsize) K * N);
    g_autofree gint32 *wzp = g_new (gint32, N);
    ConyQWeights w = random_weights (r, 0, K, N, wd, wzp);
    g_autofree gint32 *bias = g_new (gint32, N);
    g_autofree ConyQMul *m = g_new (ConyQMul, N);
    for (guint c = 0; c < N; c++) {
      bias[c] = g_rand_int_range (r, -5000, 5000);
      cony_q_multiplier (ldexp (1.0, -(int) (2 + c % 10)), &m[c]);
      g_assert_cmpint (m[c].shift, <, 0);
    }
    ConyQGemm g;
    cony_qgemm_init (&g, port, K, N, &w, -3, bias, m, 0, -128, 127);
    g_assert_true (g.small_acc);
    g_autofree gint8 *x = g_new (gint8, (gsize) M * K);
    for (gsize i = 0; i < (gsize) M * K; i++)
      x[i] = (gint8) g_rand_int_range (r, -128, 128);
    g_autofree gint16 *scratch = g_new (gint16, cony_qgemm_scratch (&g, M));
    g_autofree gint8 *want = g_new (gint8, (gsize) M * N), *o = g_new (gint8, (gsize) M * N);
    port->gemm (&g, M, x, K, want, N, scratch);
    guint ties = 0;
    for (guint i = 0; i < M; i++)
      for (guint c = 0; c < N; c++) {
        gint64 acc = bias[c];
        for (guint k = 0; k < K; k++)
          acc += (gint64) (x[(gsize) i * K + k] + 3) * cony_qweights_at (&w, K, c, k);
        gint64 unit = (gint64) 1 << (2 + c % 10);
        ties += acc < 0 && (-acc) % unit == unit / 2;
        g_assert_cmpint (want[(gsize) i * N + c], ==,
            cony_q_requant ((gint32) acc, m[c], 0, -128, 127));
      }
    g_assert_cmpuint (ties, >, M * N / 40); /* negative halves, where the roundings differ */
    for (guint k = 0; k < n_simd; k++) {
      spoil (o, want, (gsize) M * N);
      simd[k]->gemm (&g, M, x, K, o, N, scratch);
      g_assert_cmpmem (o, (gsize) M * N, want, (gsize) M * N);
    }
    check_dot4_kernels (K, N, &w, -3, bias, m, 0, -128, 127, M, x, K, want);
    cony_qgemm_clear (&g);
  }
  g_rand_free (r);
}

/* uint8 weights whose per-channel zero points are all the same (as files store a
 * per-tensor one) take the row-corrected packing of the x86 dot-product sets, with the
 * portable kernel's result; one differing zero point keeps the other packing. */
static void
test_u8_one_zero_point (void)
{
  const ConyQKernels *k = cony_qkernels_avx512vnni () ? cony_qkernels_avx512vnni ()
                                                      : cony_qkernels_dot4_emulated ();
  if (k == NULL) {
    g_test_skip ("no x86 dot-product kernels on this CPU");
    return;
  }
  GRand *r = g_rand_new_with_seed (21);
  guint M = 31, K = 27, N = 96;
  g_autofree guint8 *wd = g_new (guint8, (gsize) K * N);
  g_autofree gint32 *zp = g_new (gint32, N), *bias = g_new (gint32, N);
  g_autofree ConyQMul *m = g_new (ConyQMul, N);
  for (gsize i = 0; i < (gsize) K * N; i++)
    wd[i] = (guint8) g_rand_int_range (r, 0, 256);
  for (guint c = 0; c < N; c++) {
    zp[c] = 201;
    bias[c] = g_rand_int_range (r, -5000, 5000);
    cony_q_multiplier (exp (g_rand_double_range (r, log (1e-5), log (0.3))), &m[c]);
  }
  g_autofree gint8 *x = g_new (gint8, (gsize) M * K);
  for (gsize i = 0; i < (gsize) M * K; i++)
    x[i] = (gint8) g_rand_int_range (r, -128, 128);
  ConyQWeights w = { wd, TRUE, zp, TRUE };
  g_autofree gint8 *want = g_new (gint8, (gsize) M * N), *o = g_new (gint8, (gsize) M * N);
  for (guint t = 0; t < 2; t++) {
    zp[N - 1] = t ? 200 : 201;
    ConyQGemm g, gp;
    cony_qgemm_init (&gp, cony_qkernels_portable (), K, N, &w, -3, bias, m, 5, -128, 127);
    cony_qgemm_init (&g, k, K, N, &w, -3, bias, m, 5, -128, 127);
    g_assert_cmpint (g.row_scale, ==, t ? 0 : 128 - 201);
    g_autofree gint16 *scratch = g_new (gint16, cony_qgemm_scratch (&g, M));
    cony_qkernels_portable ()->gemm (&gp, M, x, K, want, N, scratch);
    check_direct_sums (M, K, N, x, K, &w, bias, m, -3, 5, -128, 127, want, N);
    spoil (o, want, (gsize) M * N);
    k->gemm (&g, M, x, K, o, N, scratch);
    g_assert_cmpmem (o, (gsize) M * N, want, (gsize) M * N);
    cony_qgemm_clear (&g);
    cony_qgemm_clear (&gp);
  }
  g_rand_free (r);
}

/* The kernels' residual ADD equals cony_q_add on every pair of int8 inputs (and a
 * tail that is not a multiple of 16), for several scales, zero points and clamps. */
static void
test_add_kernels (void)
{
  const ConyQKernels *simd[4], *port = cony_qkernels_portable ();
  guint n_simd = simd_sets (simd);
  const float sc[][3] = { { 0.02f, 0.05f, 0.06f }, { 0.3f, 0.01f, 0.2f }, { 0.1f, 0.1f, 0.05f },
    { 0.004f, 0.5f, 0.7f } };
  const gint32 zp[][5] = { { -5, 3, -10, -128, 127 }, { 127, -128, 0, 0, 127 }, { 0, 0, 5, 5, 60 },
    { -128, 127, 127, -128, 127 } };
  gsize n = 65536 + 5;
  g_autofree gint8 *a = g_new (gint8, n), *b = g_new (gint8, n);
  g_autofree gint8 *o1 = g_new (gint8, n), *o2 = g_new (gint8, n);
  for (gsize i = 0; i < n; i++) {
    a[i] = (gint8) (i >> 8);
    b[i] = (gint8) i;
  }
  for (guint t = 0; t < G_N_ELEMENTS (sc); t++) {
    ConyQAdd add;
    g_assert_true (cony_q_add_init (&add, sc[t][0], zp[t][0], sc[t][1], zp[t][1], sc[t][2],
        zp[t][2], zp[t][3], zp[t][4]));
    ConyQAddK k;
    cony_qadd_init (&k, &add);
    port->add (&k, a, b, n, o2);
    for (gsize i = 0; i < n; i++)
      g_assert_cmpint (o2[i], ==, cony_q_add (&add, a[i], b[i]));
    for (guint s = 0; s < n_simd; s++) {
      simd[s]->add (&k, a, b, n, o1);
      g_assert_cmpmem (o1, n, o2, n);
    }
    if (cony_qkernels_avx512vnni () != NULL) { /* its own, 16 lanes */
      spoil (o1, o2, n);
      cony_qkernels_avx512vnni ()->add (&k, a, b, n, o1);
      g_assert_cmpmem (o1, n, o2, n);
    }
    cony_qadd_clear (&k);
  }
}

/* The kernels' input quantisation equals cony_q_quantize on ties, near-ties, huge values,
 * infinities and NaN, and on random values at several scales and zero points. */
static void
test_quantize_kernels (void)
{
  const ConyQKernels *simd[4], *port = cony_qkernels_portable ();
  guint n_simd = simd_sets (simd);
  const float edge[] = { 0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 0.49999997f, -0.49999997f,
    0.50000006f, 8388607.5f, -8388608.0f, 1e7f, -1e7f, 3e38f, INFINITY, -INFINITY, NAN, -0.0f, 0.0f,
    127.5f, -128.5f, 126.49999f };
  GRand *r = g_rand_new_with_seed (3);
  gsize n = 1000 + G_N_ELEMENTS (edge); /* not a multiple of 16 */
  g_autofree float *x = g_new (float, n);
  g_autofree gint8 *o1 = g_new (gint8, n), *o2 = g_new (gint8, n);
  const float scales[] = { 1.0f, 0.25f, 0.0478f, 3.0f };
  const gint32 zps[] = { 0, -128, 17, 127 };
  for (guint t = 0; t < G_N_ELEMENTS (scales); t++) {
    for (gsize i = 0; i < n; i++)
      x[i] = i < G_N_ELEMENTS (edge) ? edge[i] * scales[t]
                                     : (float) g_rand_double_range (r, -200, 200) * scales[t];
    port->quantize (x, n, scales[t], zps[t], o2);
    for (gsize i = 0; i < n; i++)
      g_assert_cmpint (o2[i], ==, cony_q_quantize (x[i], scales[t], zps[t]));
    for (guint s = 0; s < n_simd; s++) {
      simd[s]->quantize (x, n, scales[t], zps[t], o1);
      g_assert_cmpmem (o1, n, o2, n);
    }
  }
  g_rand_free (r);
}

/* The packing's split: for the AVX2 kernels a quad runs in bytes only when no pair can
 * leave int16 in vpmaddubsw (255 * 128 = 32640 fits, 255 * 129 does not), for the
 * dot-product kernels whenever its weights fit int8; weights outside int8 never. */
static void
test_byte_exact_split (void)
{
  const gint8 cases[][4] = { { 64, 64, 0, 0 }, { 127, 1, -128, 0 }, { -64, -64, 127, -127 },
    { 65, 64, 0, 0 }, { 0, 0, -128, -1 }, { 127, 127, 0, 0 } };
  const ConyQKernels dot4 = { .name = "packing only", .dot4 = TRUE };
  guint8 u8[4] = { 128, 0, 0, 0 };
  gint32 zp = 0;
  ConyQWeights wu = { u8, TRUE, &zp, FALSE }; /* 128 - 0 does not fit int8 */
  for (int d = 0; d < 2; d++) {
    const ConyQKernels *k = d ? &dot4 : cony_qkernels_portable ();
    for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
      ConyQWeights w = { cases[i], FALSE, NULL, FALSE };
      ConyQGemm g;
      cony_qgemm_init (&g, k, 4, 1, &w, 0, NULL, NULL, 0, -128, 127);
      g_assert_cmpuint (g.p8.start8[1], ==, d || i < 3 ? 1 : 0);
      cony_qgemm_clear (&g);
    }
    ConyQGemm g;
    cony_qgemm_init (&g, k, 4, 1, &wu, 0, NULL, NULL, 0, -128, 127);
    g_assert_cmpuint (g.p8.start8[1], ==, 0);
    cony_qgemm_clear (&g);
  }
}

/* @set's gemm_rows reading the rows of @x (M x K, rows @ldx apart; @want its product,
 * rows @ldo apart) in place from a map where they lie as a convolution's windows do:
 * rows of 5 (so that pairs span map rows) four bytes apart, quads one map row apart. */
static void
check_gemm_rows (const ConyQKernels *set, const ConyQGemm *g, guint M, const gint8 *x, gsize ldx,
    const gint8 *want, gsize ldo)
{
  guint K = g->K, width = 5, nq = (K + 3) / 4, W = 4 * width + 3;
  guint H = (M + width - 1) / width * nq + 1;
  g_autofree gint8 *map = g_new (gint8, (gsize) H * W);
  memset (map, 0x55, (gsize) H * W);
  ConyQRows rows = { map, 4, width, (gsize) nq * W, W };
  for (guint i = 0; i < M; i++)
    for (guint k = 0; k < K; k++)
      ((gint8 *) rows.x)[(i / width) * rows.row_step + (i % width) * rows.step
          + (k / 4) * rows.quad_step + k % 4] = x[(gsize) i * ldx + k];
  gsize n = (gsize) M * ldo;
  g_autofree gint8 *o = g_memdup2 (want, n);
  for (guint i = 0; i < M; i++)
    for (guint c = 0; c < 32; c++)
      o[(gsize) i * ldo + c] = (gint8) ~want[(gsize) i * ldo + c];
  set->gemm_rows (g, M, &rows, o, ldo);
  g_assert_cmpmem (o, n, want, n);
}

/* The 512-bit set's kernel for K <= 12 and N = 32 (ConyQGemm's w32: YAMNet's first
 * layer) against the portable one and a direct sum: K of one to three quads, partial
 * last quads, one row, a last row alone or a pair, output rows 32 or 40 bytes apart,
 * with and without a clamp; weights that do not fit int8 take the general kernel. The
 * same rows read in place as a convolution's windows (check_gemm_rows). */
static void
test_gemm_k12 (void)
{
  const ConyQKernels *vnni = cony_qkernels_avx512vnni (), *port = cony_qkernels_portable ();
  if (vnni == NULL) {
    g_test_skip ("no AVX512-VNNI on this CPU");
    return;
  }
  GRand *r = g_rand_new_with_seed (12);
  guint Ks[] = { 1, 5, 9, 12 }, Ms[] = { 1, 2, 5, 64 };
  for (guint t = 0; t < 32; t++) {
    guint K = Ks[t % 4], M = Ms[t / 4 % 4], ldo = t / 16 ? 40 : 32, N = 32;
    gboolean clamp = t % 3 == 0, u8 = t == 31;
    g_autofree guint8 *wd = g_new (guint8, (gsize) K * N);
    g_autofree gint32 *wzp = g_new (gint32, N);
    ConyQWeights w = random_weights (r, u8 ? 1 : 0, K, N, wd, wzp);
    gint32 bias[32];
    ConyQMul m[32];
    for (guint c = 0; c < N; c++) {
      bias[c] = g_rand_int_range (r, -30000, 30000);
      cony_q_multiplier (exp (g_rand_double_range (r, log (1e-5), log (0.45))), &m[c]);
    }
    gint32 in_zp = g_rand_int_range (r, -128, 128), zp = g_rand_int_range (r, -128, 100);
    gint32 lo = clamp ? zp : -128, hi = clamp ? zp + 27 : 127;
    ConyQGemm g;
    cony_qgemm_init (&g, vnni, K, N, &w, in_zp, bias, m, zp, lo, hi);
    g_assert_true (g.small_acc);
    g_assert_true ((g.w32 != NULL) == !u8);
    gsize ldx = K + t % 3; /* rows with and without a gap */
    g_autofree gint8 *x = g_new (gint8, (gsize) M * ldx);
    for (gsize i = 0; i < (gsize) M * ldx; i++)
      x[i] = (gint8) (i % 4 == 0 ? (i % 8 ? 127 : -128) : g_rand_int_range (r, -128, 128));
    g_autofree gint16 *scratch = g_new (gint16, cony_qgemm_scratch (&g, M));
    gsize n = (gsize) M * ldo;
    g_autofree gint8 *o1 = g_new0 (gint8, n), *o2 = g_new0 (gint8, n);
    port->gemm (&g, M, x, ldx, o2, ldo, scratch);
    check_direct_sums (M, K, N, x, ldx, &w, bias, m, in_zp, zp, lo, hi, o2, ldo);
    memcpy (o1, o2, n); /* the gaps between output rows stay as they were */
    for (guint i = 0; i < M; i++)
      for (guint c = 0; c < N; c++)
        o1[(gsize) i * ldo + c] = (gint8) ~o2[(gsize) i * ldo + c];
    vnni->gemm (&g, M, x, ldx, o1, ldo, scratch);
    g_assert_cmpmem (o1, n, o2, n);
    if (g.w32 != NULL)
      check_gemm_rows (vnni, &g, M, x, ldx, o2, ldo);
    cony_qgemm_clear (&g);
  }
  g_rand_free (r);
}

/* The depthwise kernels on random padded maps: channel counts with and without a
 * 16-channel remainder, strides 1 and 2, extreme zero points, each kind of weights, maps
 * whose rows the AVX2 kernel takes in several bands (cases 13 and 14); every output also
 * against a direct sum. */
static void
test_dw_kernels_equal (void)
{
  const ConyQKernels *simd[4], *port = cony_qkernels_portable ();
  guint n_simd = simd_sets (simd);
  GRand *r = g_rand_new_with_seed (9);
  /* C, stride, output height and width; the weights' kind is the case's index % 4 */
  guint cases[][4] = { { 32, 1, 7, 6 }, { 40, 2, 6, 3 }, { 1024, 1, 3, 2 }, { 9, 2, 4, 4 },
    { 48, 1, 2, 3 }, { 64, 2, 3, 3 }, { 128, 1, 2, 2 }, { 192, 1, 3, 4 }, { 160, 2, 3, 3 },
    { 32, 2, 3, 4 }, { 96, 1, 2, 3 }, { 32, 1, 4, 5 }, { 32, 2, 3, 4 }, { 512, 1, 7, 8 },
    { 272, 2, 5, 6 }, { 80, 1, 3, 3 }, { 17, 2, 3, 3 } };
  for (guint t = 0; t < G_N_ELEMENTS (cases); t++) {
    guint C = cases[t][0], s = cases[t][1], oh = cases[t][2], ow = cases[t][3];
    guint ih = (oh - 1) * s + 3, iw = (ow - 1) * s + 3;
    g_autofree guint8 *wd = g_new (guint8, (gsize) 9 * C);
    g_autofree gint32 *wzp = g_new (gint32, C);
    ConyQWeights w = random_weights (r, t, 9, C, wd, wzp);
    g_autofree gint32 *bias = g_new (gint32, C);
    g_autofree ConyQMul *m = g_new (ConyQMul, C);
    /* the last two cases' biases are too large for the short rounding (the first of them
     * with whole 32-channel steps of the 512-bit kernel): every fourth channel's, so that
     * the others' outputs still vary (a huge bias only saturates) */
    gboolean big = t + 2 >= G_N_ELEMENTS (cases);
    for (guint c = 0; c < C; c++) {
      bias[c] = big && c % 4 == 1 ? g_rand_int_range (r, -(1 << 30), 1 << 30)
                                  : g_rand_int_range (r, -50000, 50000);
      cony_q_multiplier (exp (g_rand_double_range (r, log (1e-5), log (0.5))), &m[c]);
    }
    gint32 in_zp = t % 2 ? 127 : -128;
    /* one case clamps to less than int8 (after the 512-bit VNNI kernel's packs) */
    gint32 lo = t == 8 ? -60 : -128, hi = t == 8 ? 100 : 127;
    ConyQDw d;
    cony_qdw_init (&d, C, &w, bias, m, in_zp, g_rand_int_range (r, -128, 128), lo, hi);
    g_assert_true (d.small_acc == !big);
    /* vpdpbusd's copy of every channel where every tap is int8 (kinds 0 and 3) or uint8
     * with one zero point (kind 1, as w - 128 and scale64 = 128 - 255); the 512-bit kernel
     * takes whole groups of 64, and 32 channels only at stride 1 and an even width, the
     * 256-bit ones 32 at a time, NEON's 16 */
    g_assert_true ((d.w64 != NULL) == (t % 4 != 2));
    g_assert_cmpint (d.scale64, ==, d.w64 != NULL && t % 4 == 1 ? 128 - 255 : 0);
    g_autofree gint8 *in = g_new (gint8, (gsize) ih * iw * C);
    for (gsize i = 0; i < (gsize) ih * iw * C; i++)
      in[i] = (gint8) (i % 5 == 0 ? (i % 2 ? 127 : -128) : g_rand_int_range (r, -128, 128));
    gsize n = (gsize) oh * ow * C;
    g_autofree gint8 *o1 = g_new (gint8, n), *o2 = g_new (gint8, n);
    g_autofree gint32 *acc = g_new (gint32, C);
    port->dw (&d, in, iw, oh, ow, s, o2, acc);
    for (guint y = 0; y < oh; y++)
      for (guint x = 0; x < ow; x++)
        for (guint c = 0; c < C; c++) {
          gint64 sum = bias[c];
          for (guint k = 0; k < 9; k++) {
            gsize at = (((gsize) y * s + k / 3) * iw + x * s + k % 3) * C + c;
            sum += (gint64) (in[at] - in_zp) * cony_qweights_at (&w, 9, c, k);
          }
          g_assert_cmpint (o2[((gsize) y * ow + x) * C + c], ==,
              cony_q_requant ((gint32) sum, m[c], d.out.zp, lo, hi));
        }
    for (guint k = 0; k < n_simd; k++) {
      spoil (o1, o2, n);
      simd[k]->dw (&d, in, iw, oh, ow, s, o1, acc);
      g_assert_cmpmem (o1, n, o2, n);
    }
    /* the dot-product sets' own depthwise kernels (w64 by vpdpbusd, 32 or 64 channels) */
    const ConyQKernels *dot4[] = { cony_qkernels_dot4_emulated (), cony_qkernels_avxvnni (),
      cony_qkernels_avx512vnni () };
    for (guint k = 0; k < G_N_ELEMENTS (dot4); k++)
      if (dot4[k] != NULL) {
        spoil (o1, o2, n);
        dot4[k]->dw (&d, in, iw, oh, ow, s, o1, acc);
        g_assert_cmpmem (o1, n, o2, n);
      }
    cony_qdw_clear (&d);
  }
  g_rand_free (r);
}

/* ---------------------------------------------------------------- YAMNet */

/* The int8 YAMNet (cony_test_yamnet_int8), made once in main(). */
static char *yamnet_q;

static char *
yamnet_path (void)
{
  return g_strdup (yamnet_q);
}

/* The int8 scores are the logistic table of the int8 logits (the FC output, one step
 * = 0.308 in logit, up to 0.077 in score where the sigmoid is steepest). A score is
 * within one quantisation step of ArmNN's when some logit that gives it, moved by at
 * most one step, gives ArmNN's: *@steps gets how many scores needed that step. */
static gboolean
within_one_logit_step (const ConyCnn *cnn, const float *got, const float *want, gsize n,
    guint *steps)
{
  g_autoptr (JsonParser) p = json_parser_new ();
  g_assert_true (
      json_parser_load_from_data (p, cony_cnn_get_metadata (cnn, "quantization"), -1, NULL));
  JsonArray *layers = json_object_get_array_member (json_node_get_object (json_parser_get_root (p)),
      "layers");
  JsonArray *fc = json_array_get_array_element (layers, 28);
  JsonArray *sg = json_array_get_array_element (layers, 29);
  float s_in = (float) json_array_get_double_element (fc, 0);
  gint32 zp_in = (gint32) json_array_get_int_element (fc, 1);
  float s_out = (float) json_array_get_double_element (sg, 0);
  gint32 zp_out = (gint32) json_array_get_int_element (sg, 1);
  float score[256];
  for (int v = -128; v < 128; v++) {
    float x = s_in * (float) (v - zp_in);
    gint8 q = cony_q_quantize (1.0f / (1.0f + expf (-x)), s_out, zp_out);
    score[v + 128] = s_out * (float) (q - zp_out);
  }
  for (gsize i = 0; i < n; i++) {
    if (got[i] == want[i])
      continue;
    gboolean ok = FALSE;
    for (int v = 0; v < 256 && !ok; v++)
      if (score[v] == got[i])
        for (int d = -1; d <= 1; d += 2)
          ok = ok || (v + d >= 0 && v + d < 256 && score[v + d] == want[i]);
    if (!ok)
      return FALSE;
    (*steps)++;
  }
  return TRUE;
}

static void
check_yamnet_armnn (void)
{
  g_autofree char *path = yamnet_path ();
  g_autoptr (GError) error = NULL;
  g_autoptr (ConyCnn) cnn = cony_cnn_load_private (path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (cony_cnn_get_precision (cnn), ==, CONY_CNN_PRECISION_INT8);
  g_assert_cmpuint (cony_cnn_get_int8_layers (cnn), ==, 30);
  ConyNpyArray *patches = cony_test_load_golden_npy ("yamnet", "patches.npy");
  ConyNpyArray *want = cony_test_load_golden_npy ("yamnet", "armnn_scores.npy");
  gsize n = patches->shape[0], od = cony_cnn_get_output_size (cnn);
  g_assert_cmpuint (want->shape[0], ==, n);
  g_assert_cmpuint (want->shape[1], ==, od);
  g_autofree float *got = g_new (float, n *od);
  /* one by one, and batched (the maps of several examples in one product) */
  for (gsize i = 0; i < n; i++)
    cony_cnn_forward (cnn, patches->data + i * 96 * 64, got + i * od);
  g_autofree float *batch = g_new (float, n *od);
  cony_cnn_forward_batch (cnn, patches->data, n, batch);
  g_assert_cmpmem (got, sizeof (float) * n * od, batch, sizeof (float) * n * od);
  double worst = 0;
  guint off = 0, steps = 0;
  for (gsize i = 0; i < n; i++) {
    const float *g = got + i * od, *w = want->data + i * od;
    gsize tg = 0, tw = 0;
    for (gsize c = 0; c < od; c++) {
      double d = fabs (g[c] - w[c]);
      worst = MAX (worst, d);
      off += d > 1e-6;
      tg = g[c] > g[tg] ? c : tg;
      tw = w[c] > w[tw] ? c : tw;
    }
    g_assert_cmpuint (tg, ==, tw);
  }
  g_assert_true (within_one_logit_step (cnn, got, want->data, n * od, &steps));
  g_test_message ("int8 vs ArmNN: %u of %" G_GSIZE_FORMAT " scores differ (one logit step), by "
                  "at most %g",
      off, n * od, worst);
  g_assert_cmpuint (steps, ==, off);
  g_assert_cmpuint (off, <, n * od / 100); /* nearly all equal */
  cony_npy_array_free (patches);
  cony_npy_array_free (want);
}

static void
test_yamnet_armnn (void)
{
  check_yamnet_armnn ();
}

static void
test_yamnet_armnn_portable (void)
{
  if (g_test_subprocess ()) {
    g_assert_cmpstr (cony_cnn_get_int8_kernels (), ==, "portable");
    check_yamnet_armnn ();
    return;
  }
  cony_test_trap_portable_cnn ();
}

/* @check in a subprocess on the kernel set @set (CONY_CNN_KERNELS); skipped where this
 * CPU does not run it (@set NULL). */
static void
trap_kernels (const ConyQKernels *set, const char *name, void (*check) (void))
{
  if (set == NULL) {
    g_test_skip ("this CPU does not run these kernels");
    return;
  }
  if (g_test_subprocess ()) {
    g_assert_cmpstr (cony_cnn_get_int8_kernels (), ==, name);
    check ();
    return;
  }
  cony_test_trap_cnn_kernels (name);
}

/* The dot-product kernels with vpdpbusd emulated (the VNNI kernels' code on this CPU);
 * skipped without AVX2. */
static void
test_yamnet_armnn_dot4 (void)
{
  trap_kernels (cony_qkernels_dot4_emulated (), "avx2-dot4", check_yamnet_armnn);
}

/* ARMv8.0's NEON kernels (without sdot), which a CPU with sdot does not choose itself;
 * skipped off 64-bit ARM. */
/* Each VNNI set the CPU has, whichever it would choose itself (skipped elsewhere). */
static void
test_yamnet_armnn_avxvnni (void)
{
  trap_kernels (cony_qkernels_avxvnni (), "avxvnni", check_yamnet_armnn);
}

static void
test_yamnet_armnn_avx512vnni (void)
{
  trap_kernels (cony_qkernels_avx512vnni (), "avx512vnni", check_yamnet_armnn);
}

static void
test_yamnet_armnn_neon (void)
{
  trap_kernels (cony_qkernels_neon (), "neon", check_yamnet_armnn);
}

/* A small MobileNet-v2 quantised two ways (tests/golden/mobilenet/v2_q8: int8 weights
 * per channel; v2_qu8: uint8 weights and activation zero points of uint8 tensors), with
 * residual add, softmax and bias_quantized: scores and embeddings equal the integer
 * numpy reference's (training/conytrain/ref/qmobilenet.py) bit for bit, one by one
 * and batched. */
static void
check_mobilenet_v2 (void)
{
  const char *names[] = { "v2_q8", "v2_qu8" };
  g_autoptr (ConyNpyArray) x = cony_test_load_golden_npy ("mobilenet", "v2_input.npy");
  gsize n = x->shape[0], in = cony_npy_array_numel (x) / n;
  for (guint k = 0; k < G_N_ELEMENTS (names); k++) {
    g_autofree char *file = g_strdup_printf ("%s.safetensors", names[k]);
    g_autoptr (ConyCnn) cnn = cony_test_load_golden_cnn ("mobilenet", file);
    g_assert_cmpint (cony_cnn_get_precision (cnn), ==, CONY_CNN_PRECISION_INT8);
    g_assert_cmpuint (cony_cnn_get_int8_layers (cnn), ==, 12);
    for (int emb = 0; emb < 2; emb++) {
      g_autofree char *golden = g_strdup_printf ("%s_%s.npy", names[k],
          emb ? "embedding" : "scores");
      g_autoptr (ConyNpyArray) want = cony_test_load_golden_npy ("mobilenet", golden);
      g_assert_true (cony_cnn_set_output (cnn,
          emb ? CONY_CNN_OUTPUT_EMBEDDING : CONY_CNN_OUTPUT_SCORES, NULL));
      gsize od = cony_cnn_get_output_size (cnn);
      g_assert_cmpuint (cony_npy_array_numel (want), ==, n * od);
      g_autofree float *got = g_new (float, n *od);
      for (gsize i = 0; i < n; i++)
        cony_cnn_forward (cnn, x->data + i * in, got + i * od);
      g_assert_cmpmem (got, sizeof (float) * n * od, want->data, sizeof (float) * n * od);
      cony_cnn_forward_batch (cnn, x->data, n, got);
      g_assert_cmpmem (got, sizeof (float) * n * od, want->data, sizeof (float) * n * od);
    }
  }
}

static void
test_mobilenet_v2 (void)
{
  check_mobilenet_v2 ();
}

static void
test_mobilenet_v2_dot4 (void)
{
  trap_kernels (cony_qkernels_dot4_emulated (), "avx2-dot4", check_mobilenet_v2);
}

static void
test_mobilenet_v2_avxvnni (void)
{
  trap_kernels (cony_qkernels_avxvnni (), "avxvnni", check_mobilenet_v2);
}

static void
test_mobilenet_v2_avx512vnni (void)
{
  trap_kernels (cony_qkernels_avx512vnni (), "avx512vnni", check_mobilenet_v2);
}

static void
test_mobilenet_v2_neon (void)
{
  trap_kernels (cony_qkernels_neon (), "neon", check_mobilenet_v2);
}

static void
test_mobilenet_v2_portable (void)
{
  if (g_test_subprocess ()) {
    g_assert_cmpstr (cony_cnn_get_int8_kernels (), ==, "portable");
    check_mobilenet_v2 ();
    return;
  }
  cony_test_trap_portable_cnn ();
}

/* The layer hook's calls of one forward pass, as (layer, ran, examples) triples. */
static void
log_layer (guint layer, gboolean ran, gsize examples, gpointer data)
{
  guint e[3] = { layer, ran, (guint) examples };
  g_array_append_vals (data, e, 3);
}

/* cnn_set_int8_layer_hook (cony bench int8 times each layer with it): called right
 * before and right after every integer layer, in order, with the batch's size; the
 * scores are those of a pass without it, and after it is cleared nothing calls it. */
static void
test_layer_hook (void)
{
  g_autofree char *path = yamnet_path ();
  g_autoptr (GError) error = NULL;
  g_autoptr (ConyCnn) cnn = cony_cnn_load (path, &error);
  g_assert_no_error (error);
  g_autofree float *x = cony_test_random_floats (96 * 64, -6, 2, 5);
  float plain[521], hooked[521];
  cony_cnn_forward (cnn, x, plain);
  g_autoptr (GArray) calls = g_array_new (FALSE, FALSE, sizeof (guint));
  cnn_set_int8_layer_hook (cnn, log_layer, calls);
  cony_cnn_forward (cnn, x, hooked);
  g_assert_cmpmem (hooked, sizeof hooked, plain, sizeof plain);
  guint n = cony_cnn_get_int8_layers (cnn);
  g_assert_cmpuint (n, ==, 30);
  g_assert_cmpuint (calls->len, ==, 2 * 3 * n);
  const guint *e = (const guint *) calls->data;
  for (guint i = 0; i < 2 * n; i++) {
    g_assert_cmpuint (e[3 * i], ==, i / 2);     /* layer */
    g_assert_cmpuint (e[3 * i + 1], ==, i % 2); /* before, then after */
    g_assert_cmpuint (e[3 * i + 2], ==, 1);     /* one example */
  }
  cnn_set_int8_layer_hook (cnn, NULL, NULL);
  cony_cnn_forward (cnn, x, hooked);
  g_assert_cmpuint (calls->len, ==, 2 * 3 * n);
}

/* FLOAT runs the float engine on the same file (its scores are not multiples of
 * 1/256); INT8 on a float-only network is refused. */
static void
test_precision (void)
{
  g_autofree char *path = yamnet_path ();
  g_autoptr (GError) error = NULL;
  g_autoptr (ConyCnn) cnn = cony_cnn_load (path, &error);
  g_assert_no_error (error);
  g_autofree float *x = cony_test_random_floats (96 * 64, -6, 2, 3);
  float q[521], f[521];
  cony_cnn_forward (cnn, x, q);
  g_assert_true (cony_cnn_set_precision (cnn, CONY_CNN_PRECISION_FLOAT, &error));
  g_assert_cmpint (cony_cnn_get_precision (cnn), ==, CONY_CNN_PRECISION_FLOAT);
  g_assert_cmpuint (cony_cnn_get_int8_layers (cnn), ==, 0);
  g_assert_cmpuint (cony_cnn_get_quantized_layers (cnn), ==, 30);
  cony_cnn_forward (cnn, x, f);
  gboolean steps = TRUE, near = TRUE;
  for (int c = 0; c < 521; c++) {
    steps = steps && q[c] * 256 == roundf (q[c] * 256);
    near = near && fabsf (q[c] - f[c]) < 0.1f;
  }
  g_assert_true (steps);
  g_assert_true (near);
  g_assert_cmpfloat (memcmp (q, f, sizeof q), !=, 0);
  g_assert_true (cony_cnn_set_precision (cnn, CONY_CNN_PRECISION_AUTO, &error));
  g_assert_cmpint (cony_cnn_get_precision (cnn), ==, CONY_CNN_PRECISION_INT8);

  /* the shipped file has no activation quantisation: float */
  g_autofree char *shipped = g_build_filename (g_getenv ("CONY_SOURCE_ROOT"), "models", "yamnet",
      "yamnet.safetensors", NULL);
  g_autoptr (ConyCnn) plain = cony_cnn_load (shipped, &error);
  g_assert_no_error (error);
  g_assert_cmpint (cony_cnn_get_precision (plain), ==, CONY_CNN_PRECISION_FLOAT);
  g_assert_cmpuint (cony_cnn_get_quantized_layers (plain), ==, 0);

  g_autoptr (ConyCnn) rnd = cony_cnn_new_random (CONY_CNN_YAMNET_LAYOUT, 96, 64, 1, 1, &error);
  g_assert_no_error (error);
  g_assert_false (cony_cnn_set_precision (rnd, CONY_CNN_PRECISION_INT8, &error));
  cony_test_expect_error (&error, CONY_ERROR_INVALID, "precision int8", "quantised");
  g_assert_cmpint (cony_cnn_get_precision (rnd), ==, CONY_CNN_PRECISION_FLOAT);
}

/* YAMNet's quantization with layers[@from..] null: the integer prefix ends there. */
static char *
yamnet_prefix (guint from)
{
  g_autofree char *path = yamnet_path ();
  g_autoptr (GError) error = NULL;
  g_autoptr (ConyCnn) cnn = cony_cnn_load_private (path, &error);
  g_assert_no_error (error);
  g_autoptr (JsonParser) p = json_parser_new ();
  g_assert_true (
      json_parser_load_from_data (p, cony_cnn_get_metadata (cnn, "quantization"), -1, NULL));
  JsonArray *layers = json_object_get_array_member (json_node_get_object (json_parser_get_root (p)),
      "layers");
  JsonArray *fixed = json_array_new ();
  for (guint i = 0; i < 30; i++)
    if (i < from)
      json_array_add_element (fixed, json_node_copy (json_array_get_element (layers, i)));
    else
      json_array_add_null_element (fixed);
  json_object_set_array_member (json_node_get_object (json_parser_get_root (p)), "layers", fixed);
  g_autofree char *quant = json_to_string (json_parser_get_root (p), FALSE);
  return cony_test_with_quantization (path, quant);
}

static float *
run_golden (ConyCnn *cnn, gsize *n)
{
  ConyNpyArray *patches = cony_test_load_golden_npy ("yamnet", "patches.npy");
  *n = patches->shape[0];
  float *out = g_new (float, *n *cony_cnn_get_output_size (cnn));
  cony_cnn_forward_batch (cnn, patches->data, *n, out);
  cony_npy_array_free (patches);
  return out;
}

/* Integer prefixes: up to the logits, then the float sigmoid (the hand-off at the head
 * requantises the gap output exactly: the scores differ from the all-int8 table by its
 * rounding only, at most half a step of 1/256); up to layer 24 (the adapted YAMNet's
 * layers, from 25 on float), then float: near the float network, the same top-1. */
static void
test_prefix (void)
{
  g_autofree char *full_path = yamnet_path ();
  g_autoptr (GError) error = NULL;
  g_autoptr (ConyCnn) full = cony_cnn_load_private (full_path, &error);
  g_assert_no_error (error);
  gsize n;
  g_autofree float *all = run_golden (full, &n);
  g_assert_true (cony_cnn_set_precision (full, CONY_CNN_PRECISION_FLOAT, &error));
  g_autofree float *flt = run_golden (full, &n);

  g_autofree char *p29 = yamnet_prefix (29);
  g_autoptr (ConyCnn) c29 = cony_cnn_load_private (p29, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (cony_cnn_get_int8_layers (c29), ==, 29);
  g_autofree float *s29 = run_golden (c29, &n);
  for (gsize i = 0; i < n * 521; i++)
    g_assert_cmpfloat (fabsf (s29[i] - all[i]), <=, 0.5f / 256 + 1e-6f);

  g_autofree char *p25 = yamnet_prefix (25);
  g_autoptr (ConyCnn) c25 = cony_cnn_load_private (p25, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (cony_cnn_get_int8_layers (c25), ==, 25);
  g_autofree char *desc = cony_cnn_describe_precision (c25);
  g_assert_true (g_str_has_prefix (desc, "int8 for layers 0-24, float for the 5 after them"));
  g_autofree float *s25 = run_golden (c25, &n);
  double worst = 0;
  for (gsize e = 0; e < n; e++) {
    gsize a = 0, b = 0;
    for (gsize c = 0; c < 521; c++) {
      worst = MAX (worst, fabs (s25[e * 521 + c] - flt[e * 521 + c]));
      a = s25[e * 521 + c] > s25[e * 521 + a] ? c : a;
      b = flt[e * 521 + c] > flt[e * 521 + b] ? c : b;
    }
    g_assert_cmpuint (a, ==, b);
  }
  g_test_message ("int8 prefix 0-24 + float vs float: max |d score| %g", worst);
  g_assert_cmpfloat (worst, <, 0.1);
  g_unlink (p29);
  g_unlink (p25);
}

/* Malformed quantisation metadata is refused, naming the file and what was wrong. */
static void
test_refused (void)
{
  g_autofree char *path = yamnet_path ();
  const char *bad[][2] = {
    { "[1, 2]", "must be {" },
    { "{\"input\": [0.05, 17], \"layers\": [[0.02, -128]]}", "one per layer (30)" },
    { "{\"input\": [0.05, 300], \"layers\": []}", "zero points in -128..127" },
    { "{\"input\": [-1, 0], \"layers\": []}", "scales > 0" },
    /* not numbers (fuzz_cnn_quant: json-glib's getters asserted on the array) */
    { "{\"input\": [0.05, [0, 29]], \"layers\": []}", "zero points in -128..127" },
    { "{\"input\": [{}, 0], \"layers\": []}", "scales > 0" },
    { "{\"input\": [\"0.05\", 0], \"layers\": []}", "scales > 0" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autofree char *copy = cony_test_with_quantization (path, bad[i][0]);
    cony_test_expect_cnn_refused (copy, CONY_ERROR_INVALID, "quantization", bad[i][1]);
    g_unlink (copy);
  }
  /* an entry after a null, and one that is not a pair */
  g_autoptr (GString) q = g_string_new ("{\"input\": [0.05, 17], \"layers\": [null");
  for (int i = 1; i < 30; i++)
    g_string_append (q, ", [0.02, -128]");
  g_string_append (q, "]}");
  g_autofree char *after = cony_test_with_quantization (path, q->str);
  cony_test_expect_cnn_refused (after, CONY_ERROR_INVALID, "layers[1] follows a null", NULL);
  g_unlink (after);
  g_string_truncate (q, 0);
  g_string_append (q,
      "{\"input\": [0.04778895899653435, 17], \"layers\": "
      "[[0.0235294122248888, -128], [0.02]");
  for (int i = 2; i < 30; i++)
    g_string_append (q, ", null");
  g_string_append (q, "]}");
  g_autofree char *pair = cony_test_with_quantization (path, q->str);
  cony_test_expect_cnn_refused (pair, CONY_ERROR_INVALID, "layers[1] must be [scale > 0", NULL);
  g_unlink (pair);
  /* scales that do not fit the int32 biases (another file's) */
  g_string_truncate (q, 0);
  g_string_append (q, "{\"input\": [0.05, 17], \"layers\": [[0.02, -128]");
  for (int i = 1; i < 30; i++)
    g_string_append (q, ", null");
  g_string_append (q, "]}");
  g_autofree char *unfit = cony_test_with_quantization (path, q->str);
  cony_test_expect_cnn_refused (unfit, CONY_ERROR_INVALID, "layers.0.bias",
      "does not fit the weights");
  g_unlink (unfit);
}

static void
set_first_bias (JsonObject *header, char *data, gpointer value)
{
  JsonObject *t = json_object_get_object_member (header, "layers.0.bias_quantized");
  gint64 off = json_array_get_int_element (json_object_get_array_member (t, "data_offsets"), 0);
  gint64 le = GINT64_TO_LE (*(const gint64 *) value);
  memcpy (data + off, &le, 8);
}

/* v2_q8 with the int32 bias bias_quantized[0] of layer 0 set to @value (a temporary
 * copy; g_free and unlink it). */
static char *
with_bias_quantized (gint64 value)
{
  g_autofree char *src = cony_test_golden_path ("mobilenet", "v2_q8.safetensors");
  return cony_test_edit_safetensors (src, set_first_bias, &value);
}

/* An int32 bias outside int32 is refused, naming the tensor; one inside changes the
 * scores (the integer path reads it, not the F32 bias). */
static void
test_bias_quantized (void)
{
  g_autofree char *bad = with_bias_quantized (G_GINT64_CONSTANT (1) << 40);
  cony_test_expect_cnn_refused (bad, CONY_ERROR_INVALID, "layers.0.bias_quantized[0]",
      "outside int32");
  g_unlink (bad);
  g_autofree char *other = with_bias_quantized (1 << 20);
  g_autoptr (ConyCnn) a = cony_test_load_golden_cnn ("mobilenet", "v2_q8.safetensors");
  g_autoptr (ConyCnn) b = cony_cnn_load_private (other, NULL);
  g_assert_nonnull (b);
  g_autoptr (ConyNpyArray) x = cony_test_load_golden_npy ("mobilenet", "v2_input.npy");
  float sa[10], sb[10];
  cony_cnn_forward (a, x->data, sa);
  cony_cnn_forward (b, x->data, sb);
  g_assert_true (memcmp (sa, sb, sizeof sa) != 0);
  g_unlink (other);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/int8/multiplier", test_multiplier);
  g_test_add_func ("/int8/add-kernels", test_add_kernels);
  g_test_add_func ("/int8/high-mul", test_high_mul);
  g_test_add_func ("/int8/divide-pot", test_divide_pot);
  g_test_add_func ("/int8/requant", test_requant);
  g_test_add_func ("/int8/quantize", test_quantize);
  g_test_add_func ("/int8/add", test_add);
  g_test_add_func ("/int8/add-edges", test_add_edges);
  g_test_add_func ("/int8/kernels-equal", test_kernels_equal);
  g_test_add_func ("/int8/u8-one-zero-point", test_u8_one_zero_point);
  g_test_add_func ("/int8/kernels-ties", test_kernels_ties);
  g_test_add_func ("/int8/byte-exact-split", test_byte_exact_split);
  g_test_add_func ("/int8/quantize-kernels", test_quantize_kernels);
  g_test_add_func ("/int8/gemm-k12", test_gemm_k12);
  g_test_add_func ("/int8/dw-kernels-equal", test_dw_kernels_equal);
  g_test_add_func ("/int8/yamnet-armnn", test_yamnet_armnn);
  g_test_add_func ("/int8/yamnet-armnn-portable", test_yamnet_armnn_portable);
  g_test_add_func ("/int8/yamnet-armnn-dot4", test_yamnet_armnn_dot4);
  g_test_add_func ("/int8/yamnet-armnn-avxvnni", test_yamnet_armnn_avxvnni);
  g_test_add_func ("/int8/yamnet-armnn-avx512vnni", test_yamnet_armnn_avx512vnni);
  g_test_add_func ("/int8/yamnet-armnn-neon", test_yamnet_armnn_neon);
  g_test_add_func ("/int8/mobilenet-v2", test_mobilenet_v2);
  g_test_add_func ("/int8/mobilenet-v2-portable", test_mobilenet_v2_portable);
  g_test_add_func ("/int8/mobilenet-v2-dot4", test_mobilenet_v2_dot4);
  g_test_add_func ("/int8/mobilenet-v2-avxvnni", test_mobilenet_v2_avxvnni);
  g_test_add_func ("/int8/mobilenet-v2-avx512vnni", test_mobilenet_v2_avx512vnni);
  g_test_add_func ("/int8/mobilenet-v2-neon", test_mobilenet_v2_neon);
  g_test_add_func ("/int8/precision", test_precision);
  g_test_add_func ("/int8/layer-hook", test_layer_hook);
  g_test_add_func ("/int8/prefix", test_prefix);
  g_test_add_func ("/int8/refused", test_refused);
  g_test_add_func ("/int8/bias-quantized", test_bias_quantized);
  yamnet_q = cony_test_yamnet_int8 ();
  int status = g_test_run ();
  g_unlink (yamnet_q);
  g_free (yamnet_q);
  return status;
}
