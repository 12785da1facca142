/* cony bench int8: YAMNet per patch on one core, the integer path against the float
 * path on the same file (interleaved, CPU time of this thread), and how close each
 * pointwise layer's integer products come to the peak of the instruction its kernel set
 * runs, measured on this core with register-only loops (bench_peak.c): inside the
 * network's forward passes (cnn_set_int8_layer_hook; there also every layer's time, by
 * kind), and alone, in passes over all 13 or repeated. Layers take 2-40 µs, so they are timed by the monotonic clock: in a VM
 * a reading of the thread's CPU clock costs 1-3 µs, and a call's least CPU-clock time
 * came out above the mean of 200 calls timed together (bench/RESULTS.md, 2026-12-05). */
#include "cnn-private.h"
#include "qkernels.h"
#include "bench.h"
#include "bench_layers.h"
#include "bench_peak.h"
#include "commands.h"

#include "cony/cnn.h"
#include "cony/safetensors.h"

#include <stdio.h>
#include <string.h>

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

/* Seconds of each pointwise product with @k by @clock (@sec, one per layer: the best of
 * @reps passes over all layers, so that each layer's weights come from L3 as in a forward
 * pass; @hot: the best of @reps runs of each layer back to back, its weights in cache),
 * with the weights of @st; their total. */
static double
pointwise_seconds (const ConyQKernels *k, const ConySafetensors *st, int reps, gboolean hot,
    double (*clock) (void), double *sec)
{
  GRand *r = g_rand_new_with_seed (5);
  guint n = G_N_ELEMENTS (pw_shapes);
  ConyQGemm *g = g_new0 (ConyQGemm, n);
  gint8 **a = g_new0 (gint8 *, n);
  gint16 **sc = g_new0 (gint16 *, n);
  gint8 **o = g_new0 (gint8 *, n);
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
    sec[i] = G_MAXDOUBLE;
    g_free (w);
    g_free (m);
  }
  /* one call per reading: the clock's own cost taken off */
  double overhead = cony_bench_clock_overhead_s (clock);
  for (guint pass = 0; pass < (guint) reps * n; pass++) {
    guint i = hot ? pass / (guint) reps : pass % n;
    double t0 = clock ();
    k->gemm (&g[i], pw_shapes[i][0], a[i], pw_shapes[i][1], o[i], pw_shapes[i][2], sc[i]);
    sec[i] = MIN (sec[i], clock () - t0 - overhead);
  }
  double total = 0;
  for (guint i = 0; i < n; i++) {
    total += sec[i];
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
  return total;
}

static double
pw_macs (guint i)
{
  return (double) pw_shapes[i][0] * pw_shapes[i][1] * pw_shapes[i][2];
}

/* Measures every instruction peak this CPU has into @rate (0: not measured) and prints
 * them, and the kinds it could not measure with the reason. */
static void
print_peaks (double *rate, gboolean markdown)
{
  printf ("\nInstruction peaks of this core (12 independent accumulators, the best stretch of "
          "0.5 s):\n");
  for (int p = 0; p < CONY_PEAK_N; p++) {
    const char *missing = cony_peak_missing (p);
    rate[p] = cony_peak_rate (p, 0.5);
    if (missing)
      printf ("  %-30s not measured here: %s\n", cony_peak_name (p), missing);
    else
      printf ("  %-30s %7.1f GMAC/s\n", cony_peak_name (p), rate[p] * 1e-9);
  }
  if (!markdown)
    return;
  printf ("\n| instruction (one core) | peak |\n|---|---|\n");
  for (int p = 0; p < CONY_PEAK_N; p++)
    if (rate[p] > 0)
      printf ("| %s | %.1f GMAC/s |\n", cony_peak_name (p), rate[p] * 1e-9);
    else
      printf ("| %s | not measured: %s |\n", cony_peak_name (p), cony_peak_missing (p));
}

/* The pointwise layers' seconds @sec (their total @total) with kernel set @k: time,
 * rate and share of the peak of the instruction @k runs (@rate from print_peaks), under
 * the heading "Pointwise products@how". */
static void
print_layers (const ConyQKernels *k, const char *how, const double *sec, double total,
    const double *rate, gboolean markdown)
{
  guint n = G_N_ELEMENTS (pw_shapes);
  double macs = 0;
  ConyPeakKind kind;
  double peak = cony_peak_of_kernels (k->name, &kind) ? rate[kind] : 0;
  if (peak > 0)
    printf ("\nPointwise products%s, %s kernels (bound: %s, %.1f GMAC/s):\n", how, k->name,
        cony_peak_name (kind), peak * 1e-9);
  else
    printf ("\nPointwise products%s, %s kernels (no measured peak for this set):\n", how, k->name);
  if (markdown)
    printf ("\n| layer | M x K x N | µs | GMAC/s | of the %s peak |\n|---|---|---|---|---|\n",
        peak > 0 ? cony_peak_name (kind) : "(none)");
  for (guint i = 0; i <= n; i++) {
    gboolean all = i == n;
    double mi = all ? macs : pw_macs (i), si = all ? total : sec[i];
    double share = peak > 0 ? 100 * mi / si / peak : 0;
    g_autofree char *shape = all
        ? g_strdup ("all")
        : g_strdup_printf ("%ux%ux%u", pw_shapes[i][0], pw_shapes[i][1], pw_shapes[i][2]);
    g_autofree char *layer = all ? g_strdup ("pointwise") : g_strdup_printf ("%u", pw_shapes[i][3]);
    macs += all ? 0 : mi;
    if (markdown)
      printf ("| %s | %s | %.1f | %.1f | %s%.0f%%%s |\n", layer, shape, si * 1e6, mi / si * 1e-9,
          all ? "**" : "", share, all ? "**" : "");
    else
      printf ("  %-9s %-13s %8.1f µs %7.1f GMAC/s %5.0f%% of peak\n", layer, shape, si * 1e6,
          mi / si * 1e-9, share);
  }
}

/* Each pointwise layer with kernel set @k, timed alone (pointwise_seconds), printed by
 * print_layers. Returns the layers' total seconds. */
static double
print_pointwise (const ConyQKernels *k, const char *m_path, const double *rate, gboolean hot,
    double (*clock) (void), gboolean markdown)
{
  ConySafetensors *st = cony_safetensors_open (m_path, NULL);
  double sec[G_N_ELEMENTS (pw_shapes)];
  double total = pointwise_seconds (k, st, hot ? 200 : 9, hot, clock, sec);
  if (st)
    cony_safetensors_close (st);
  print_layers (k, hot ? " (hot: each layer repeated)" : "", sec, total, rate, markdown);
  return total;
}

/* Whether @cnn's layer pw_shapes[@i][3] is that pointwise product (YAMNet's). */
static gboolean
is_pw_shape (ConyCnn *cnn, guint i)
{
  guint idx = pw_shapes[i][3];
  if (idx >= cnn->w->n_layers)
    return FALSE;
  const Layer *l = &cnn->w->layers[idx];
  return l->kind == LAYER_PW && l->in_c == pw_shapes[i][1] && l->out_c == pw_shapes[i][2]
      && (gsize) l->out_h * l->out_w == pw_shapes[i][0];
}

/* The pointwise layers as they run inside @cnn's forward passes over the @n @patches
 * (one call each: the input just written by the layer before, the weights from wherever
 * the rest of the network left them), timed by @clock: each layer's best call printed by
 * print_layers, then the total of each layer's median call. */
static void
print_in_pass (ConyCnn *cnn, const float *patches, int n, const double *rate,
    double (*clock) (void), gboolean markdown)
{
  guint nl = G_N_ELEMENTS (pw_shapes);
  g_autofree float *out = g_new (float, cony_cnn_get_output_size (cnn));
  g_autoptr (ConyBenchLayers) t = cony_bench_layers_start (cnn, clock);
  for (int i = 0; i < n; i++)
    cony_cnn_forward (cnn, patches + (gsize) i * 96 * 64, out);
  cony_bench_layers_stop (t);
  cony_bench_layers_print_by_kind (t, markdown);
  double best[G_N_ELEMENTS (pw_shapes)], total = 0, total_median = 0;
  gboolean all_ran = TRUE;
  for (guint i = 0; i < nl; i++) {
    guint calls;
    const double *s = cony_bench_layers_calls (t, pw_shapes[i][3], &calls);
    all_ran = all_ran && calls > 0 && is_pw_shape (cnn, i);
    ConyBenchSummary sum = calls ? cony_bench_summarise (s, (int) calls)
                                 : (ConyBenchSummary){ 0, 0 };
    best[i] = sum.min;
    total += sum.min;
    total_median += sum.median;
  }
  if (!all_ran) {
    printf ("\nPointwise products in the forward pass: not measured (the network's layers are "
            "not YAMNet's)\n");
    return;
  }
  print_layers (cony_qkernels (), " in the forward pass (each layer's best call)", best, total,
      rate, markdown);
  printf ("  each layer's median call, all: %.1f µs\n", total_median * 1e6);
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
  gboolean markdown = FALSE, hot = FALSE, cpu_clock = FALSE;
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &model,
        "quantised 96x64x1 MobileNet (metadata quantization): YAMNet converted by "
        "training/convert_tflite.py from its int8 .tflite (the shipped file is float)",
        "M" },
    { "patches", 'n', 0, G_OPTION_ARG_INT, &patches, "patches per round (default 200)", "N" },
    { "rounds", 'r', 0, G_OPTION_ARG_INT, &rounds, "rounds, int8 and float interleaved (default 7)",
        "R" },
    { "markdown", 0, 0, G_OPTION_ARG_NONE, &markdown, "also print a bench/RESULTS.md table", NULL },
    { "hot", 0, 0, G_OPTION_ARG_NONE, &hot,
        "time each pointwise layer repeated, its weights in cache (default: passes over all "
        "the layers, the weights from L3 as in a forward pass)",
        NULL },
    { "cpu-clock", 0, 0, G_OPTION_ARG_NONE, &cpu_clock,
        "time the layers by the thread's CPU clock, as before 2026-12-05 (default: the "
        "monotonic clock, whose readings cost about 20 ns against the CPU clock's 1-2 µs in "
        "a VM)",
        NULL },
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

  if (markdown) {
    printf ("\n| YAMNet per patch, 1 core (CPU time) | median | min |\n|---|---|---|\n");
    printf ("| libcony int8 (%s) | **%.3f ms** | %.3f ms |\n", desc, sq.median, sq.min);
    printf ("| libcony float | %.3f ms | %.3f ms |\n", sf.median, sf.min);
  }

  double rate[CONY_PEAK_N];
  print_peaks (rate, markdown);
  double (*clock) (void) = cpu_clock ? cony_bench_cpu_s : cony_bench_wall_s;
  printf ("\nLayers timed by the %s clock, whose reading costs %.3f µs here: taken off each "
          "layer's time.\n",
      cpu_clock ? "thread's CPU" : "monotonic", cony_bench_clock_overhead_s (clock) * 1e6);
  print_in_pass (q, x, patches, rate, clock, markdown);
  /* the set the CNN ran, then the other x86 sets this CPU runs natively */
  const ConyQKernels *sets[] = { cony_qkernels (), cony_qkernels_avx512vnni (),
    cony_qkernels_avxvnni (), cony_qkernels_avx2 () };
  for (guint i = 0; i < G_N_ELEMENTS (sets); i++) {
    gboolean seen = sets[i] == NULL;
    for (guint j = 0; j < i; j++)
      seen = seen || sets[j] == sets[i];
    if (seen)
      continue;
    double pw = print_pointwise (sets[i], m_path, rate, hot, clock, markdown);
    if (i == 0 && !hot)
      printf ("  pointwise share of the int8 patch: %.0f%%\n", 100 * pw * 1e3 / sq.median);
  }
  return 0;
}
