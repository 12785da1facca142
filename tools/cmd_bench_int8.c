/* cony bench int8: YAMNet per patch on one core, the integer path against the float
 * path on the same file (interleaved, CPU time of this thread), and how close the
 * pointwise layers' integer products come to the int8 peak of this CPU, measured with
 * our own register-only loops of the kernel's instructions. */
#include "../src/cpu-private.h"
#include "../src/qkernels.h"
#include "bench.h"
#include "commands.h"

#include "cony/cnn.h"
#include "cony/safetensors.h"

#include <stdio.h>
#include <string.h>

#ifdef CONY_CPU_X86
#include <immintrin.h>

/* The kernel's register block without its loads, in assembly (so that the compiler
 * neither spills nor hoists): per round, 2 weight vectors times 4 activation vectors
 * into 8 accumulators. STEP(x, w, a) is one product of x and w added to a; ymm15 is
 * the temporary, %[one] holds 16-bit ones. */
/* clang-format off */
#define PEAK_BLOCK(name, target, type_set, STEP) \
  target static gint32 name (void) \
  { \
    __m256i w0 = type_set (3), w1 = type_set (-2), x0 = type_set (1), x1 = type_set (2); \
    __m256i x2 = type_set (5), x3 = type_set (7), one = _mm256_set1_epi16 (1); \
    __m256i a0 = _mm256_setzero_si256 (), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0; \
    __m256i a6 = a0, a7 = a0; \
    for (int r = 0; r < 1000; r++) \
      __asm__ volatile ( \
          STEP ("%[x0]", "%[w0]", "%[a0]") STEP ("%[x0]", "%[w1]", "%[a1]") \
          STEP ("%[x1]", "%[w0]", "%[a2]") STEP ("%[x1]", "%[w1]", "%[a3]") \
          STEP ("%[x2]", "%[w0]", "%[a4]") STEP ("%[x2]", "%[w1]", "%[a5]") \
          STEP ("%[x3]", "%[w0]", "%[a6]") STEP ("%[x3]", "%[w1]", "%[a7]") \
          : [a0] "+x"(a0), [a1] "+x"(a1), [a2] "+x"(a2), [a3] "+x"(a3), \
            [a4] "+x"(a4), [a5] "+x"(a5), [a6] "+x"(a6), [a7] "+x"(a7) \
          : [w0] "x"(w0), [w1] "x"(w1), [x0] "x"(x0), [x1] "x"(x1), [x2] "x"(x2), \
            [x3] "x"(x3), [one] "x"(one) \
          : "xmm15"); \
    __m256i s = _mm256_add_epi32 (_mm256_add_epi32 (_mm256_add_epi32 (a0, a1), \
        _mm256_add_epi32 (a2, a3)), \
        _mm256_add_epi32 (_mm256_add_epi32 (a4, a5), _mm256_add_epi32 (a6, a7))); \
    return _mm256_extract_epi32 (s, 0); \
  }

/* vpmaddwd + vpaddd: 16 int16 multiply-adds per step (128000 per block). */
#define STEP_WD(x, w, a) "vpmaddwd " x ", " w ", %%ymm15\n\tvpaddd %%ymm15, " a ", " a "\n\t"
/* vpmaddubsw + vpmaddwd by ones + vpaddd: 32 u8 x s8 multiply-adds per step (256000 per
 * block), what an unsigned-activation kernel could reach at the price of int16
 * saturation in vpmaddubsw. */
#define STEP_UBS(x, w, a) \
  "vpmaddubsw " w ", " x ", %%ymm15\n\tvpmaddwd %[one], %%ymm15, %%ymm15\n\t" \
  "vpaddd %%ymm15, " a ", " a "\n\t"
/* clang-format on */

/* clang-format on */

PEAK_BLOCK (block_maddwd, CONY_TARGET_V3, _mm256_set1_epi16, STEP_WD)
PEAK_BLOCK (block_maddubsw, CONY_TARGET_V3, _mm256_set1_epi8, STEP_UBS)
#ifdef CONY_CPU_VNNI
/* vpdpbusd: 32 u8 x s8 multiply-adds per step into int32, exact (VNNI): the same block
 * in intrinsics (clang 14's assembler does not take {vex}), an empty asm per round
 * keeping the accumulators in registers and every product in the loop. */
#define DP_PEAK_BLOCK(name, target, DP) \
  target static gint32 name (void) \
  { \
    __m256i w0 = _mm256_set1_epi8 (3), w1 = _mm256_set1_epi8 (-2), x0 = _mm256_set1_epi8 (1); \
    __m256i x1 = _mm256_set1_epi8 (2), x2 = _mm256_set1_epi8 (5), x3 = _mm256_set1_epi8 (7); \
    __m256i a0 = _mm256_setzero_si256 (), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0; \
    __m256i a6 = a0, a7 = a0; \
    for (int r = 0; r < 1000; r++) { \
      a0 = DP (a0, x0, w0), a1 = DP (a1, x0, w1), a2 = DP (a2, x1, w0), a3 = DP (a3, x1, w1); \
      a4 = DP (a4, x2, w0), a5 = DP (a5, x2, w1), a6 = DP (a6, x3, w0), a7 = DP (a7, x3, w1); \
      __asm__ volatile("" \
                       : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), \
                       "+x"(a7), "+x"(x0), "+x"(x1), "+x"(x2), "+x"(x3)); \
    } \
    __m256i s = _mm256_add_epi32 (_mm256_add_epi32 (_mm256_add_epi32 (a0, a1), \
                                      _mm256_add_epi32 (a2, a3)), \
        _mm256_add_epi32 (_mm256_add_epi32 (a4, a5), _mm256_add_epi32 (a6, a7))); \
    return _mm256_extract_epi32 (s, 0); \
  }
DP_PEAK_BLOCK (block_dpbusd, __attribute__ ((target ("avx2,avxvnni"))), _mm256_dpbusd_avx_epi32)
DP_PEAK_BLOCK (block_dpbusd512, __attribute__ ((target ("avx2,avx512vnni,avx512vl"))),
    _mm256_dpbusd_epi32)
#endif

/* Multiply-adds per CPU second of @block (@macs each), the best of five runs of
 * @budget seconds: other jobs share the core. */
static double
peak_rate (gint32 (*block) (void), double macs, double budget)
{
  double best = 0;
  volatile gint32 sink = 0;
  for (int run = 0; run < 5; run++) {
    guint64 n = 0;
    double t0 = cony_bench_cpu_s (), t;
    do {
      sink += block ();
      n++;
      t = cony_bench_cpu_s () - t0;
    } while (t < budget);
    best = MAX (best, n * macs / t);
  }
  (void) sink;
  return best;
}
#endif

/* YAMNet's pointwise products (pixels, K, N, layer index). */
static const guint pw_shapes[][4] = { { 1536, 32, 64, 2 }, { 384, 64, 128, 4 },
  { 384, 128, 128, 6 }, { 96, 128, 256, 8 }, { 96, 256, 256, 10 }, { 24, 256, 512, 12 },
  { 24, 512, 512, 14 }, { 24, 512, 512, 16 }, { 24, 512, 512, 18 }, { 24, 512, 512, 20 },
  { 24, 512, 512, 22 }, { 6, 512, 1024, 24 }, { 6, 1024, 1024, 26 } };

/* Layer @i's int8 weights (N x K) from @st, or random ones where it has none of that
 * shape (the AVX2 kernel's speed depends on the values: see ConyQPanels8). */
static gint8 *
pw_weights (const ConySafetensors *st, guint i, guint K, guint N, GRand *r)
{
  g_autofree char *name = g_strdup_printf ("layers.%u.weight", i);
  const ConyTensorInfo *ti = st ? cony_safetensors_find (st, name) : NULL;
  if (ti && ti->dtype == CONY_DTYPE_I8 && ti->numel == (gsize) K * N)
    return g_memdup2 (ti->data, ti->numel);
  gint8 *w = g_new (gint8, (gsize) K * N);
  for (gsize j = 0; j < (gsize) K * N; j++)
    w[j] = (gint8) g_rand_int_range (r, -127, 128);
  return w;
}

/* CPU seconds of one pass over every pointwise product with @k (best of @reps), with
 * the weights of @st, and their MAC count. */
static double
pointwise_seconds (const ConyQKernels *k, const ConySafetensors *st, int reps, double *macs)
{
  GRand *r = g_rand_new_with_seed (5);
  guint n = G_N_ELEMENTS (pw_shapes);
  ConyQGemm *g = g_new0 (ConyQGemm, n);
  gint8 **a = g_new0 (gint8 *, n);
  gint16 **sc = g_new0 (gint16 *, n);
  gint8 **o = g_new0 (gint8 *, n);
  *macs = 0;
  for (guint i = 0; i < n; i++) {
    guint M = pw_shapes[i][0], K = pw_shapes[i][1], N = pw_shapes[i][2];
    gint8 *w = pw_weights (st, pw_shapes[i][3], K, N, r);
    ConyQMul *m = g_new (ConyQMul, N);
    for (guint c = 0; c < N; c++)
      cony_q_multiplier (1e-4, &m[c]);
    ConyQWeights qw = { w, FALSE, NULL, FALSE };
    cony_qgemm_init (&g[i], k, K, N, &qw, -128, NULL, m, -128, -128, 127);
    a[i] = g_new (gint8, (gsize) M * K);
    for (gsize j = 0; j < (gsize) M * K; j++)
      a[i][j] = (gint8) g_rand_int_range (r, -128, 128);
    sc[i] = g_new (gint16, cony_qgemm_scratch (&g[i], M));
    o[i] = g_new (gint8, (gsize) M * N);
    *macs += (double) M * K * N;
    g_free (w);
    g_free (m);
  }
  double best = G_MAXDOUBLE;
  for (int rep = 0; rep < reps; rep++) {
    double t0 = cony_bench_cpu_s ();
    for (guint i = 0; i < n; i++)
      k->gemm (&g[i], pw_shapes[i][0], a[i], pw_shapes[i][1], o[i], pw_shapes[i][2], sc[i]);
    best = MIN (best, cony_bench_cpu_s () - t0);
  }
  for (guint i = 0; i < n; i++) {
    cony_qgemm_clear (&g[i]);
    g_free (a[i]);
    g_free (sc[i]);
    g_free (o[i]);
  }
  g_free (g);
  g_free (a);
  g_free (sc);
  g_free (o);
  g_rand_free (r);
  return best;
}

/* Per-patch CPU ms of @cnn on @patches (n of them), one call per patch. */
static double
per_patch_ms (ConyCnn *cnn, const float *patches, int n, float *out)
{
  double t0 = cony_bench_cpu_s ();
  for (int i = 0; i < n; i++)
    cony_cnn_forward (cnn, patches + (gsize) i * 96 * 64, out);
  return (cony_bench_cpu_s () - t0) / n * 1e3;
}

int
cony_cmd_bench_int8 (int argc, char **argv)
{
  char *model = NULL;
  int patches = 200, rounds = 7;
  gboolean markdown = FALSE;
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &model,
        "quantised 96x64x1 MobileNet (metadata quantization): YAMNet converted by "
        "training/convert_tflite.py from its int8 .tflite (the shipped file is float)",
        "M" },
    { "patches", 'n', 0, G_OPTION_ARG_INT, &patches, "patches per round (default 200)", "N" },
    { "rounds", 'r', 0, G_OPTION_ARG_INT, &rounds, "rounds, int8 and float interleaved (default 7)",
        "R" },
    { "markdown", 0, 0, G_OPTION_ARG_NONE, &markdown, "also print a bench/RESULTS.md table", NULL },
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- YAMNet int8 vs float per patch");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  g_autofree char *m_path = model;
  if (m_path == NULL)
    m_path = g_build_filename (g_getenv ("CONY_SOURCE_ROOT") ? g_getenv ("CONY_SOURCE_ROOT") : ".",
        "models", "yamnet", "yamnet.safetensors", NULL);
  if (patches < 1 || rounds < 1) {
    fprintf (stderr, "cony bench int8: --patches and --rounds must be at least 1\n");
    return 2;
  }
  g_autoptr (ConyCnn) q = cony_cnn_load (m_path, &error);
  if (q == NULL)
    return cony_cmd_fail (error);
  if (!cony_cnn_set_precision (q, CONY_CNN_PRECISION_INT8, &error))
    return cony_cmd_fail (error);
  if (cony_cnn_get_input_size (q) != 96 * 64) {
    fprintf (stderr, "cony bench int8: %s is not a 96x64x1 network\n", m_path);
    return 1;
  }
  g_autoptr (ConyCnn) f = cony_cnn_load (m_path, &error);
  cony_cnn_set_precision (f, CONY_CNN_PRECISION_FLOAT, NULL);
  GRand *rng = g_rand_new_with_seed (11);
  g_autofree float *x = g_new (float, (gsize) patches * 96 * 64);
  cony_bench_fill_random (rng, x, (gsize) patches * 96 * 64, -2.5, 4.4); /* log-mel range */
  g_rand_free (rng);
  g_autofree float *out = g_new (float, 1024);
  per_patch_ms (q, x, MIN (patches, 20), out); /* warm up: packing, scratch */
  per_patch_ms (f, x, MIN (patches, 20), out);
  g_autofree double *tq = g_new (double, rounds), *tf = g_new (double, rounds);
  for (int r = 0; r < rounds; r++) {
    tq[r] = per_patch_ms (q, x, patches, out);
    tf[r] = per_patch_ms (f, x, patches, out);
  }
  ConyBenchSummary sq = cony_bench_summarise (tq, rounds), sf = cony_bench_summarise (tf, rounds);
  g_autofree char *desc = cony_cnn_describe_precision (q);
  printf ("YAMNet per patch, one core, CPU time, %d rounds of %d patches (%s):\n", rounds, patches,
      m_path);
  printf ("  int8 (%s): min %.3f ms, median %.3f ms\n", desc, sq.min, sq.median);
  printf ("  float:     min %.3f ms, median %.3f ms   (int8 %.2fx faster by the medians)\n", sf.min,
      sf.median, sf.median / sq.median);

  const ConyQKernels *k = cony_qkernels ();
  ConySafetensors *st = cony_safetensors_open (m_path, NULL);
  double macs, pw = pointwise_seconds (k, st, 9, &macs);
  if (st)
    cony_safetensors_close (st);
  double peak = 0, peak_ub = 0;
  const char *peak_name = "vpmaddubsw+vpmaddwd";
#ifdef CONY_CPU_X86
  if (cony_cpu_has_v3 ()) {
    peak = peak_rate (block_maddwd, 128000, 0.15);
    peak_ub = peak_rate (block_maddubsw, 256000, 0.15);
  }
#endif
#ifdef CONY_CPU_VNNI
  if (cony_qkernels_vnni () != NULL) { /* this CPU's int8 peak is vpdpbusd's */
    gboolean vex = cony_cpu_has_avxvnni ();
    peak_ub = peak_rate (vex ? block_dpbusd : block_dpbusd512, 256000, 0.15);
    peak_name = "vpdpbusd";
  }
#endif
  printf ("  pointwise products (%s kernels, this file's weights): %.0f M MAC in %.3f ms = %.1f GMAC/s",
      k->name, macs * 1e-6, pw * 1e3, macs / pw * 1e-9);
  if (peak > 0)
    printf (" = %.0f%% of the int8 peak (%s loop: %.1f GMAC/s), %.0f%% of the "
            "int16 one (vpmaddwd: %.1f GMAC/s)\n",
        100 * macs / pw / peak_ub, peak_name, peak_ub * 1e-9, 100 * macs / pw / peak, peak * 1e-9);
  else
    printf ("\n");
  printf ("  pointwise share of the int8 patch: %.0f%%\n", 100 * pw * 1e3 / sq.median);
  if (markdown) {
    printf ("\n| YAMNet per patch, 1 core (CPU time) | median | min |\n|---|---|---|\n");
    printf ("| libcony int8 (%s) | **%.3f ms** | %.3f ms |\n", k->name, sq.median, sq.min);
    printf ("| libcony float | %.3f ms | %.3f ms |\n", sf.median, sf.min);
    if (peak > 0)
      printf ("\n| pointwise layers (int8) | rate | of the int8 peak (%s) | of the "
              "int16 peak (vpmaddwd) |\n|---|---|---|---|\n"
              "| %.0f M MAC, %.3f ms | %.1f GMAC/s | **%.0f%%** of %.1f GMAC/s | %.0f%% of %.1f "
              "GMAC/s |\n",
          peak_name, macs * 1e-6, pw * 1e3, macs / pw * 1e-9, 100 * macs / pw / peak_ub,
          peak_ub * 1e-9, 100 * macs / pw / peak, peak * 1e-9);
  }
  return 0;
}
