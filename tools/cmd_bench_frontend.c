/* cony bench frontend: real-time factor of the log-mel front end alone, of
 * log-mel + the full-size VGGish (72.1 M parameters, random weights) and of
 * log-mel + YAMNet (MobileNet-v1, 3.7 M parameters: random weights, or a file
 * with --yamnet) at a 0.25 s stride, on one core, with the GFLOP/s reached next
 * to OpenBLAS sgemm's peak measured in the same run. YAMNet in PyTorch beside it:
 * bench/torch_compare.py frontend, which runs this with --json. The continual row puts
 * the same audio through the continual CNN (cony/cnn-continual.h) against per-window
 * YAMNet, CPU per second of audio. */
#include "bench.h"
#include "commands.h"

#include "cony/cnn-continual.h"
#include "cony/cnn.h"
#include "cony/mel.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define CHUNK 1024 /* samples per push, like a 64 ms audio buffer */

/* Best GFLOP/s (by CPU time when single-threaded, else wall) of C = A B over a
 * time budget. */
static double
sgemm_peak (int m, int n, int k, double budget)
{
  float *a = g_new (float, (gsize) m *k), *b = g_new (float, (gsize) k *n);
  float *c = g_new0 (float, (gsize) m *n);
  for (gsize i = 0; i < (gsize) m * k; i++)
    a[i] = (float) ((i * 7 % 13) - 6) * 0.01f;
  for (gsize i = 0; i < (gsize) k * n; i++)
    b[i] = (float) ((i * 5 % 11) - 5) * 0.01f;
  double best = 0, start = cony_bench_wall_s ();
  int reps = 0;
  gboolean cpu = openblas_get_num_threads () == 1;
  do {
    double t0 = cpu ? cony_bench_cpu_s () : cony_bench_wall_s ();
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    double t = (cpu ? cony_bench_cpu_s () : cony_bench_wall_s ()) - t0;
    best = MAX (best, 2.0 * m * n * k / t * 1e-9);
    reps++;
  } while (cony_bench_wall_s () - start < budget || reps < 3);
  g_free (a);
  g_free (b);
  g_free (c);
  return best;
}

static float *
test_signal (gsize n, guint rate)
{
  float *x = g_new (float, n);
  guint64 s = 12345;
  for (gsize i = 0; i < n; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    float noise = ((float) (s >> 40) / 16777216.0f - 0.5f) * 0.1f;
    x[i] = 0.3f * sinf (2 * G_PI * 440.0f * i / rate) + noise;
  }
  return x;
}

typedef struct {
  double wall, cpu; /* seconds for the whole run */
  ConyCnnProfile prof;
  gsize windows;
} Run;

/* Mel + one forward per window as conymel ! conyvggish runs them. */
static void
stream_run (ConyMel *mel, ConyCnn *cnn, const float *x, gsize n, float *hist, int stride, Run *r)
{
  g_autofree float *emb = g_new (float, cony_cnn_get_output_size (cnn));
  cony_mel_reset (mel);
  cony_cnn_set_profiling (cnn, TRUE);
  gsize nf = 0, windows = 0;
  double t0 = cony_bench_wall_s (), c0 = cony_bench_cpu_s ();
  for (gsize pos = 0; pos < n; pos += CHUNK) {
    cony_mel_push (mel, x + pos, MIN ((gsize) CHUNK, n - pos));
    while (cony_mel_pop_frame (mel, hist + nf * 64)) {
      nf++;
      if (nf >= 96 && (nf - 96) % (gsize) stride == 0) {
        cony_cnn_forward (cnn, hist + (nf - 96) * 64, emb);
        windows++;
      }
    }
  }
  r->wall = cony_bench_wall_s () - t0;
  r->cpu = cony_bench_cpu_s () - c0;
  r->windows = windows;
  cony_cnn_get_profile (cnn, &r->prof);
}

static void
batch_run (ConyCnn *cnn, const float *patches, gsize windows, float *embs, Run *r)
{
  cony_cnn_set_profiling (cnn, TRUE);
  double t0 = cony_bench_wall_s (), c0 = cony_bench_cpu_s ();
  cony_cnn_forward_batch (cnn, patches, windows, embs);
  r->wall = cony_bench_wall_s () - t0;
  r->cpu = cony_bench_cpu_s () - c0;
  r->windows = windows;
  cony_cnn_get_profile (cnn, &r->prof);
}

static void
print_stream (const char *what, const Run *r, double seconds, guint64 conv_flops, guint64 fc_flops,
    double fc_mb, double peak)
{
  gsize w = r->windows;
  double gcc = conv_flops * (double) w / r->prof.conv_cpu * 1e-9;
  double gcw = conv_flops * (double) w / r->prof.conv_wall * 1e-9;
  double gfc = fc_flops * (double) w / r->prof.fc_cpu * 1e-9;
  double gfw = fc_flops * (double) w / r->prof.fc_wall * 1e-9;
  printf ("mel + VGGish streaming (batch 1), %s: %" G_GSIZE_FORMAT " windows in %.1f s of audio\n"
          "  wall %.1f ms/window = %.2fx real time; CPU %.1f ms/window = %.2fx real time\n",
      what, w, seconds, r->wall / w * 1e3, seconds / r->wall, r->cpu / w * 1e3, seconds / r->cpu);
  printf ("  conv (default algorithm): CPU %.1f ms/window, %.1f effective GFLOP/s = %.0f%% of peak "
          "(wall %.1f GFLOP/s)\n",
      r->prof.conv_cpu / w * 1e3, gcc, 100 * gcc / peak, gcw);
  printf ("  FC: CPU %.1f ms/window, %.1f GFLOP/s = %.0f%% of peak (wall %.1f GFLOP/s); "
          "%.0f MB of weights per window = %.1f GB/s\n",
      r->prof.fc_cpu / w * 1e3, gfc, 100 * gfc / peak, gfw, fc_mb,
      fc_mb * 1e-3 * w / r->prof.fc_cpu);
}

static void
print_batch (const char *what, const Run *r, double seconds, double mel_cpu, double mel_wall,
    guint64 conv_flops, guint64 fc_flops, double peak)
{
  gsize w = r->windows;
  double gc = conv_flops * (double) w / r->prof.conv_cpu * 1e-9;
  double gf = fc_flops * (double) w / r->prof.fc_cpu * 1e-9;
  printf ("mel + VGGish offline (FC batched over %" G_GSIZE_FORMAT " windows), %s:\n"
          "  wall %.1f ms/window = %.2fx real time; CPU %.1f ms/window = %.2fx real time\n"
          "  conv CPU %.1f GFLOP/s = %.0f%% of peak; FC CPU %.1f ms/window, %.1f GFLOP/s = %.0f%% of peak\n",
      w, what, r->wall / w * 1e3, seconds / (r->wall + mel_wall), r->cpu / w * 1e3,
      seconds / (r->cpu + mel_cpu), gc, 100 * gc / peak, r->prof.fc_cpu / w * 1e3, gf,
      100 * gf / peak);
}

/* Log-mel + YAMNet streaming, one patch per @stride frames as conymel !
 * conyvggish runs it; @mel_cpu_per_s: the mel's CPU seconds per second of audio. */
static gboolean
yamnet_row (ConyMel *mel, const float *x, gsize n, guint rate, double seconds, int stride,
    double peak, double mel_cpu_per_s, const char *path, gboolean markdown, gboolean json,
    GError **error)
{
  g_autoptr (ConyCnn) cnn = path
      ? cony_cnn_load (path, error)
      : cony_cnn_new_random (CONY_CNN_YAMNET_LAYOUT, 96, 64, 1, 1, error);
  if (cnn == NULL)
    return FALSE;
  if (cony_cnn_get_input_height (cnn) != 96 || cony_cnn_get_input_width (cnn) != 64
      || cony_cnn_get_input_channels (cnn) != 1) {
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: not a 96x64x1 network", path);
    return FALSE;
  }
  guint64 cf, ff;
  cony_cnn_get_flops (cnn, &cf, &ff);
  ConyMelConfig config = *cony_mel_get_config (mel);
  gsize n2 = MIN ((gsize) (seconds * rate), n);
  seconds = (double) n2 / rate;
  g_autofree float *hist = g_new (float, (cony_mel_frames_for_samples (&config, n2) + 1) * 64);
  g_autofree float *warm = g_new0 (float, 96 * 64), *out = g_new (float, 1024);
  cony_cnn_forward (cnn, warm, out);
  Run r;
  stream_run (mel, cnn, x, n2, hist, stride, &r);
  gsize w = r.windows;
  if (w == 0) {
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "no YAMNet window in %.1f s", seconds);
    return FALSE;
  }
  double ms = (r.prof.conv_cpu + r.prof.fc_cpu) / w * 1e3;
  double gf = (cf + ff) * (double) w / (r.prof.conv_cpu + r.prof.fc_cpu) * 1e-9;
  double chain = seconds / r.cpu;
  printf ("mel + YAMNet (%s, %" G_GUINT64_FORMAT " parameters, %.1f MFLOP per patch) streaming, "
          "stride %d: %" G_GSIZE_FORMAT " patches\n"
          "  CNN CPU %.2f ms/patch (conv %.2f, head %.2f), %.1f GFLOP/s = %.0f%% of the sgemm peak; "
          "chain CPU %.2f ms/patch = %.0fx real time (wall %.0fx)\n",
      path ? path : "random weights", cony_cnn_get_n_params (cnn), (cf + ff) * 1e-6, stride, w, ms,
      r.prof.conv_cpu / w * 1e3, r.prof.fc_cpu / w * 1e3, gf, 100 * gf / peak, r.cpu / w * 1e3,
      chain, seconds / r.wall);
  if (json)
    printf ("{\"measure\": \"yamnet\", \"weights\": \"%s\", \"patches\": %" G_GSIZE_FORMAT
            ", \"cpu_ms_per_patch\": %.4f, \"gflops\": %.2f, \"chain_realtime_cpu\": %.2f}\n",
        path ? "file" : "random", w, ms, gf, chain);
  if (markdown)
    printf ("\n| measure | CPU time |\n|---|---|\n"
            "| YAMNet CNN per patch (%s, %.1f MFLOP) | %.2f ms, %.1f GFLOP/s = %.0f%% of sgemm peak |\n"
            "| mel + YAMNet streaming, stride %d | **%.0f× real time** (mel %.2f ms per s of audio) |\n",
        path ? "file" : "random weights", (cf + ff) * 1e-6, ms, gf, 100 * gf / peak, stride, chain,
        mel_cpu_per_s * 1e3);
  if (markdown)
    printf ("\n");
  return TRUE;
}

/* CPU seconds of mel + the continual CNN on @n samples: frames in blocks of the time
 * stride, as conyvggish mode=continual pushes them; *@tokens gets the tokens out. */
static double
continual_run (ConyMel *mel, ConyCnnContinual *c, const float *x, gsize n, gsize *tokens)
{
  ConyCnnContinualGeometry g;
  cony_cnn_continual_get_geometry (c, &g);
  g_autofree float *block = g_new (float, (gsize) g.time_stride * 64);
  g_autofree float *out = g_new (float,
      cony_cnn_continual_max_tokens (c, g.time_stride) * cony_cnn_continual_get_output_size (c));
  guint nb = 0;
  cony_mel_reset (mel);
  cony_cnn_continual_reset (c);
  double c0 = cony_bench_cpu_s ();
  for (gsize pos = 0; pos < n; pos += CHUNK) {
    cony_mel_push (mel, x + pos, MIN ((gsize) CHUNK, n - pos));
    while (cony_mel_pop_frame (mel, block + (gsize) nb * 64))
      if (++nb == g.time_stride) {
        cony_cnn_continual_push (c, block, nb, out);
        nb = 0;
      }
  }
  *tokens = cony_cnn_continual_get_tokens (c);
  return cony_bench_cpu_s () - c0;
}

/* The continual row: CPU per second of audio of mel + YAMNet, per window at @stride
 * against the continual CNN at its time stride, in float and (where the file is
 * quantised) on the integer path, each the best of three runs on the same audio. */
static gboolean
continual_row (ConyMel *mel, const float *x, gsize n, guint rate, double seconds, int stride,
    const char *path, gboolean markdown, GError **error)
{
  g_autoptr (ConyCnn) cnn = path
      ? cony_cnn_load (path, error)
      : cony_cnn_new_random (CONY_CNN_YAMNET_LAYOUT, 96, 64, 1, 1, error);
  if (cnn == NULL)
    return FALSE;
  gsize n2 = MIN ((gsize) (seconds * rate), n);
  seconds = (double) n2 / rate;
  ConyMelConfig config = *cony_mel_get_config (mel);
  g_autofree float *hist = g_new (float, (cony_mel_frames_for_samples (&config, n2) + 1) * 64);
  /* [precision][per window, continual]: ms of CPU per second of audio */
  double ms[2][2] = { { INFINITY, INFINITY }, { INFINITY, INFINITY } };
  gsize windows = 0, tokens = 0;
  guint hop = 0;
  int kinds = cony_cnn_get_quantized_layers (cnn) > 0 ? 2 : 1;
  for (int k = 0; k < kinds; k++) {
    if (!cony_cnn_set_precision (cnn, k ? CONY_CNN_PRECISION_INT8 : CONY_CNN_PRECISION_FLOAT,
            error))
      return FALSE;
    g_autoptr (ConyCnnContinual) c = cony_cnn_continual_new (cnn, 0, error);
    if (c == NULL)
      return FALSE;
    ConyCnnContinualGeometry g;
    cony_cnn_continual_get_geometry (c, &g);
    hop = g.time_stride;
    for (int rep = 0; rep < 3; rep++) {
      Run r;
      stream_run (mel, cnn, x, n2, hist, stride, &r);
      ms[k][0] = MIN (ms[k][0], r.cpu / seconds * 1e3);
      windows = r.windows;
      ms[k][1] = MIN (ms[k][1], continual_run (mel, c, x, n2, &tokens) / seconds * 1e3);
    }
    gsize kept, bytes = cony_cnn_continual_get_state_bytes (c, &kept);
    printf ("continual %s stream state: %.2f MB allocated, %.2f MB kept between blocks\n",
        k ? "int8" : "float", bytes / 1e6, kept / 1e6);
  }
  static const char *const names[2] = { "float", "int8" };
  printf ("mel + YAMNet (%s), CPU per second of audio, per window (stride %d, %" G_GSIZE_FORMAT
          " windows) / continual (hop %u, %" G_GSIZE_FORMAT " tokens):",
      path ? path : "random weights", stride, windows, hop, tokens);
  for (int k = 0; k < kinds; k++)
    printf (" %s %.2f / %.2f ms (%.2fx less)", names[k], ms[k][0], ms[k][1], ms[k][0] / ms[k][1]);
  printf ("\n");
  if (markdown) {
    printf ("\n| mel + YAMNet, CPU per second of audio | per window, stride %d | continual, hop %u "
            "|\n|---|---|---|\n",
        stride, hop);
    for (int k = 0; k < kinds; k++)
      printf ("| %s | %.2f ms | %.2f ms (%.2f× less) |\n", names[k], ms[k][0], ms[k][1],
          ms[k][0] / ms[k][1]);
    printf ("\n");
  }
  return TRUE;
}

int
cony_cmd_bench_frontend (int argc, char **argv)
{
  double mel_seconds = 120, cnn_seconds = 10;
  int stride = 25, threads = 1;
  gboolean markdown = FALSE, no_vggish = FALSE, json = FALSE;
  char *yamnet_path = NULL;
  GOptionEntry entries[] = {
    { "mel-seconds", 0, 0, G_OPTION_ARG_DOUBLE, &mel_seconds,
        "audio for the mel-only run (default 120)", "S" },
    { "vggish-seconds", 0, 0, G_OPTION_ARG_DOUBLE, &cnn_seconds,
        "audio for the mel + VGGish runs (default 10)", "S" },
    { "stride", 0, 0, G_OPTION_ARG_INT, &stride, "frames between windows (default 25 = 0.25 s)",
        "N" },
    { "threads", 0, 0, G_OPTION_ARG_INT, &threads, "OpenBLAS threads (default 1: one core)", "N" },
    { "markdown", 0, 0, G_OPTION_ARG_NONE, &markdown, "print the results as a markdown table too",
        NULL },
    { "yamnet", 0, 0, G_OPTION_ARG_FILENAME, &yamnet_path,
        "YAMNet file for the MobileNet run (default: random weights, same layers)", "FILE" },
    { "no-vggish", 0, 0, G_OPTION_ARG_NONE, &no_vggish, "skip the VGGish runs", NULL },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json,
        "the YAMNet row also as a JSON object on a line of its own (bench/torch_compare.py)",
        NULL },
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- log-mel and VGGish real-time factors");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  if (stride < 1 || threads < 1 || mel_seconds <= 0 || cnn_seconds < 1.0) {
    fprintf (stderr, "cony bench frontend: bad option value\n");
    return 2;
  }
  openblas_set_num_threads (threads);

  ConyMelConfig config;
  cony_mel_config_init_vggish (&config);
  guint rate = config.sample_rate;

  /* 1. sgemm peak. */
  double peak = sgemm_peak (1024, 1024, 1024, 0.6);
  double peak_conv = sgemm_peak (384, 256, 2304, 0.3); /* conv3_2's shape */
  printf ("OpenBLAS sgemm, %d thread(s): %.1f GFLOP/s (1024^3), %.1f GFLOP/s (384x256x2304, conv3/conv3_2)\n",
      threads, peak, peak_conv);

  /* 2. Mel alone, streaming. */
  gsize n = (gsize) (mel_seconds * rate);
  g_autofree float *x = test_signal (n, rate);
  g_autoptr (ConyMel) mel = cony_mel_new (&config, &error);
  if (mel == NULL)
    return cony_cmd_fail (error);
  float frame[64];
  double walls[3], cpus[3];
  gsize frames = 0;
  for (int rep = 0; rep < 3; rep++) {
    cony_mel_reset (mel);
    frames = 0;
    double t0 = cony_bench_wall_s (), c0 = cony_bench_cpu_s ();
    for (gsize pos = 0; pos < n; pos += CHUNK) {
      cony_mel_push (mel, x + pos, MIN ((gsize) CHUNK, n - pos));
      while (cony_mel_pop_frame (mel, frame))
        frames++;
    }
    walls[rep] = cony_bench_wall_s () - t0;
    cpus[rep] = cony_bench_cpu_s () - c0;
  }
  double mel_wall = cony_bench_summarise (walls, 3).min,
         mel_cpu = cony_bench_summarise (cpus, 3).min;
  printf ("log-mel (streaming, %d-sample pushes): %" G_GSIZE_FORMAT " frames; wall %.2f us/frame = "
          "%.0fx real time; CPU %.2f us/frame = %.0fx real time\n",
      CHUNK, frames, mel_wall / frames * 1e6, mel_seconds / mel_wall, mel_cpu / frames * 1e6,
      mel_seconds / mel_cpu);

  g_autofree char *y_path = yamnet_path;
  if (!yamnet_row (mel, x, n, rate, cnn_seconds, stride, peak, mel_cpu / mel_seconds, y_path,
          markdown, json, &error))
    return cony_cmd_fail (error);
  if (!continual_row (mel, x, n, rate, cnn_seconds, stride, y_path, markdown, &error))
    return cony_cmd_fail (error);
  if (no_vggish)
    return 0;

  /* 3. Full-size VGGish with random weights. */
  double t_build = cony_bench_wall_s ();
  g_autoptr (ConyCnn) cnn = cony_cnn_new_random (CONY_CNN_VGGISH_LAYOUT, 96, 64, 1, 1, &error);
  if (cnn == NULL)
    return cony_cmd_fail (error);
  t_build = cony_bench_wall_s () - t_build;
  guint64 conv_flops, fc_flops;
  cony_cnn_get_flops (cnn, &conv_flops, &fc_flops);
  printf ("VGGish (random weights, built in %.1f s): %" G_GUINT64_FORMAT " parameters, "
          "%.3f GFLOP conv + %.3f GFLOP FC per window\n",
      t_build, cony_cnn_get_n_params (cnn), conv_flops * 1e-9, fc_flops * 1e-9);
  gsize in_size = cony_cnn_get_input_size (cnn);
  float emb[128];
  g_autofree float *warm = g_new0 (float, in_size);
  cony_cnn_forward (cnn, warm, emb); /* touch the weights once */

  /* 3a. Streaming, as conymel ! conyvggish does it: one window every `stride`
   * frames; first with F32 FC weights, later with F16 ones. */
  gsize n2 = MIN ((gsize) (cnn_seconds * rate), n);
  cnn_seconds = (double) n2 / rate;
  gsize max_frames = cony_mel_frames_for_samples (&config, n2);
  g_autofree float *hist = g_new (float, (max_frames + 1) * 64);
  Run s32;
  stream_run (mel, cnn, x, n2, hist, stride, &s32);
  gsize windows = s32.windows;
  if (windows == 0) {
    fprintf (stderr, "cony bench frontend: no window in %.1f s of audio\n", cnn_seconds);
    return 1;
  }
  double fc_mb32 = fc_flops * 2e-6; /* bytes of F32 FC weights, in MB */
  print_stream ("F32 FC weights, OpenBLAS sgemv", &s32, cnn_seconds, conv_flops, fc_flops, fc_mb32,
      peak);

  /* 3a'. The conv stack alone with each algorithm, on the same windows. */
  double conv_ms[4], conv_gf[4];
  static const ConyCnnConvAlgorithm algos[4] = { CONY_CNN_CONV_IM2COL, CONY_CNN_CONV_WINOGRAD,
    CONY_CNN_CONV_WINOGRAD4, CONY_CNN_CONV_AUTO };
  for (int a = 0; a < 4; a++) {
    cony_cnn_set_conv_algorithm (cnn, algos[a]);
    cony_cnn_forward (cnn, hist, emb);
    cony_cnn_set_profiling (cnn, TRUE);
    gsize reps = MIN (windows, (gsize) 20);
    for (gsize k = 0; k < reps; k++)
      cony_cnn_forward (cnn, hist + k * stride * 64, emb);
    ConyCnnProfile pa;
    cony_cnn_get_profile (cnn, &pa);
    conv_ms[a] = pa.conv_cpu / reps * 1e3;
    conv_gf[a] = conv_flops * (double) reps / pa.conv_cpu * 1e-9;
  }
  cony_cnn_set_conv_algorithm (cnn, CONY_CNN_CONV_AUTO);
  static const char *const algo_names[4] = { "im2col + sgemm", "Winograd F(2x2,3x3) everywhere",
    "Winograd F(4x4,3x3) everywhere", "default (F(4x4) on 48x32 and 24x16 maps, F(2x2) on 12x8)" };
  printf ("  conv stack alone, CPU per window (effective GFLOP/s, %% of peak):\n");
  for (int a = 0; a < 4; a++)
    printf ("    %-58s %5.1f ms (%.1f GFLOP/s = %.0f%%)\n", algo_names[a], conv_ms[a], conv_gf[a],
        100 * conv_gf[a] / peak);

  /* 3b. Offline: the same windows, FC layers batched (sgemm). */
  g_autofree float *patches = g_new (float, windows *in_size);
  for (gsize k = 0; k < windows; k++)
    memcpy (patches + k * in_size, hist + k * stride * 64, in_size * sizeof (float));
  g_autofree float *embs = g_new (float, windows * 128);
  double mel_part_cpu = mel_cpu * cnn_seconds / mel_seconds;
  double mel_part_wall = mel_wall * cnn_seconds / mel_seconds;
  Run b32;
  batch_run (cnn, patches, windows, embs, &b32);
  print_batch ("F32 FC weights", &b32, cnn_seconds, mel_part_cpu, mel_part_wall, conv_flops,
      fc_flops, peak);

  /* 3c. The same with the FC weights rounded to F16 (as a model file stored in
   * F16 loads): streaming FC layers read half the bytes. */
  g_autofree float *embs32 = g_memdup2 (embs, windows * 128 * sizeof (float));
  if (!cony_cnn_set_fc_f16 (cnn, TRUE, &error))
    return cony_cmd_fail (error);
  cony_cnn_forward (cnn, warm, emb);
  Run s16, b16;
  stream_run (mel, cnn, x, n2, hist, stride, &s16);
  print_stream ("F16 FC weights, F16C gemv", &s16, cnn_seconds, conv_flops, fc_flops, fc_mb32 / 2,
      peak);
  batch_run (cnn, patches, windows, embs, &b16);
  print_batch ("F16 FC weights", &b16, cnn_seconds, mel_part_cpu, mel_part_wall, conv_flops,
      fc_flops, peak);
  double dmax = 0, ref = 0;
  for (gsize i = 0; i < windows * 128; i++) {
    dmax = MAX (dmax, fabs (embs[i] - embs32[i]));
    ref = MAX (ref, fabs (embs32[i]));
  }
  printf ("  embeddings with F16-rounded FC weights vs F32: max difference %.2e relative "
          "(a different function: the weights were rounded)\n",
      ref > 0 ? dmax / ref : dmax);

  if (markdown) {
    printf ("\n| measure (%d BLAS thread%s) | CPU time | wall time |\n|---|---|---|\n", threads,
        threads == 1 ? "" : "s");
    printf ("| OpenBLAS sgemm peak 1024³ / at conv3_2's shape 384×256×2304 | %.1f / %.1f GFLOP/s | |\n",
        peak, peak_conv);
    printf ("| log-mel alone, streaming (%d-sample pushes) | %.2f µs/frame, **%.0f× real time** | "
            "%.2f µs/frame, %.0f× |\n",
        CHUNK, mel_cpu / frames * 1e6, mel_seconds / mel_cpu, mel_wall / frames * 1e6,
        mel_seconds / mel_wall);
    const Run *sr[2] = { &s32, &s16 };
    const char *const wname[2] = { "F32", "F16" };
    for (int k = 0; k < 2; k++) {
      const Run *r = sr[k];
      double gc = conv_flops * (double) windows / r->prof.conv_cpu * 1e-9;
      double gf = fc_flops * (double) windows / r->prof.fc_cpu * 1e-9;
      printf ("| mel + VGGish (%.1f M params) streaming, stride %d, batch 1, %s FC weights | "
              "%.1f ms/window, **%.2f× real time** | %.1f ms/window, %.2f× |\n",
          cony_cnn_get_n_params (cnn) * 1e-6, stride, wname[k], r->cpu / windows * 1e3,
          cnn_seconds / r->cpu, r->wall / windows * 1e3, cnn_seconds / r->wall);
      printf ("| — conv layers, %.3f GFLOP/window, default Winograd | %.1f ms, %.1f *effective* "
              "GFLOP/s = %.0f%% of peak | |\n",
          conv_flops * 1e-9, r->prof.conv_cpu / windows * 1e3, gc, 100 * gc / peak);
      printf ("| — FC layers, %.3f GFLOP/window (%s: %.0f MB of weights per window, %.1f GB/s) | "
              "%.1f ms, %.1f GFLOP/s = %.0f%% of peak | |\n",
          fc_flops * 1e-9, k == 0 ? "OpenBLAS sgemv" : "F16C gemv", k == 0 ? fc_mb32 : fc_mb32 / 2,
          (k == 0 ? fc_mb32 : fc_mb32 / 2) * 1e-3 * windows / r->prof.fc_cpu,
          r->prof.fc_cpu / windows * 1e3, gf, 100 * gf / peak);
    }
    for (int a = 0; a < 4; a++)
      printf ("| conv stack alone (%s windows): %s | %.1f ms, %.1f%s GFLOP/s = %.0f%% of peak | |\n",
          windows < 20 ? "all" : "20", algo_names[a], conv_ms[a], conv_gf[a],
          a == 0 ? "" : " *effective*", 100 * conv_gf[a] / peak);
    printf ("| direct-conv bound: %.2f GFLOP per second of audio at 100%% of peak | %.1f× real time | |\n",
        (conv_flops + fc_flops) * (100.0 / stride) * 1e-9,
        peak / ((conv_flops + fc_flops) * (100.0 / stride) * 1e-9));
    const Run *br[2] = { &b32, &b16 };
    for (int k = 0; k < 2; k++) {
      const Run *r = br[k];
      double gc = conv_flops * (double) windows / r->prof.conv_cpu * 1e-9;
      double gf = fc_flops * (double) windows / r->prof.fc_cpu * 1e-9;
      printf ("| mel + VGGish offline, FC batched over %" G_GSIZE_FORMAT
              " windows, %s FC weights | "
              "%.1f ms/window, **%.2f× real time**; conv %.0f%%, FC %.0f%% of peak | %.1f ms/window, "
              "%.2f× |\n",
          windows, wname[k], r->cpu / windows * 1e3, cnn_seconds / (r->cpu + mel_part_cpu),
          100 * gc / peak, 100 * gf / peak, r->wall / windows * 1e3,
          cnn_seconds / (r->wall + mel_part_wall));
    }
  }
  return 0;
}
