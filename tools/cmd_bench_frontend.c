/* cony bench frontend: real-time factor of the log-mel front end alone, and of
 * log-mel + the full-size VGGish (72.1 M parameters, random weights) at a 0.25 s
 * stride, on one core, with the GFLOP/s reached next to OpenBLAS sgemm's peak
 * measured in the same run. */
#include "commands.h"

#include "cony/cnn.h"
#include "cony/mel.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <time.h>

static double
now (void)
{
  return g_get_monotonic_time () * 1e-6;
}

/* CPU time of this thread: with one BLAS thread, the compute time free of the
 * other processes sharing the machine. */
static double
cpu_now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Best GFLOP/s (by CPU time when single-threaded, else wall) of C = A B over a
 * time budget. */
static double
sgemm_peak (int m, int n, int k, double budget)
{
  float *a = g_new (float, (gsize) m * k), *b = g_new (float, (gsize) k * n);
  float *c = g_new0 (float, (gsize) m * n);
  for (gsize i = 0; i < (gsize) m * k; i++)
    a[i] = (float) ((i * 7 % 13) - 6) * 0.01f;
  for (gsize i = 0; i < (gsize) k * n; i++)
    b[i] = (float) ((i * 5 % 11) - 5) * 0.01f;
  double best = 0, start = now ();
  int reps = 0;
  gboolean cpu = openblas_get_num_threads () == 1;
  do {
    double t0 = cpu ? cpu_now () : now ();
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    double t = (cpu ? cpu_now () : now ()) - t0;
    best = MAX (best, 2.0 * m * n * k / t * 1e-9);
    reps++;
  } while (now () - start < budget || reps < 3);
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

#define CHUNK 1024   /* samples per push, like a 64 ms audio buffer */

int
cony_bench_frontend (int argc, char **argv)
{
  double mel_seconds = 120, cnn_seconds = 10;
  int stride = 25, threads = 1;
  gboolean markdown = FALSE;
  GOptionEntry entries[] = {
    { "mel-seconds", 0, 0, G_OPTION_ARG_DOUBLE, &mel_seconds, "audio for the mel-only run (default 120)", "S" },
    { "vggish-seconds", 0, 0, G_OPTION_ARG_DOUBLE, &cnn_seconds, "audio for the mel + VGGish runs (default 10)", "S" },
    { "stride", 0, 0, G_OPTION_ARG_INT, &stride, "frames between windows (default 25 = 0.25 s)", "N" },
    { "threads", 0, 0, G_OPTION_ARG_INT, &threads, "OpenBLAS threads (default 1: one core)", "N" },
    { "markdown", 0, 0, G_OPTION_ARG_NONE, &markdown, "print the results as a markdown table too", NULL },
    { NULL },
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
  double peak_conv = sgemm_peak (384, 256, 2304, 0.3);   /* conv3_2's shape */
  printf ("OpenBLAS sgemm, %d thread(s): %.1f GFLOP/s (1024^3), %.1f GFLOP/s (384x256x2304, conv3/conv3_2)\n",
          threads, peak, peak_conv);

  /* 2. Mel alone, streaming. */
  gsize n = (gsize) (mel_seconds * rate);
  g_autofree float *x = test_signal (n, rate);
  g_autoptr (ConyMel) mel = cony_mel_new (&config, &error);
  if (mel == NULL)
    return cony_cmd_fail (error);
  float frame[64];
  double mel_wall = 1e30, mel_cpu = 1e30;
  gsize frames = 0;
  for (int rep = 0; rep < 3; rep++) {
    cony_mel_reset (mel);
    frames = 0;
    double t0 = now (), c0 = cpu_now ();
    for (gsize pos = 0; pos < n; pos += CHUNK) {
      cony_mel_push (mel, x + pos, MIN ((gsize) CHUNK, n - pos));
      while (cony_mel_pop_frame (mel, frame))
        frames++;
    }
    mel_wall = MIN (mel_wall, now () - t0);
    mel_cpu = MIN (mel_cpu, cpu_now () - c0);
  }
  printf ("log-mel (streaming, %d-sample pushes): %" G_GSIZE_FORMAT " frames; wall %.2f us/frame = "
          "%.0fx real time; CPU %.2f us/frame = %.0fx real time\n", CHUNK, frames,
          mel_wall / frames * 1e6, mel_seconds / mel_wall, mel_cpu / frames * 1e6,
          mel_seconds / mel_cpu);

  /* 3. Full-size VGGish with random weights. */
  double t_build = now ();
  g_autoptr (ConyCnn) cnn = cony_cnn_new_random (CONY_CNN_VGGISH_LAYOUT, 96, 64, 1, 1, &error);
  if (cnn == NULL)
    return cony_cmd_fail (error);
  t_build = now () - t_build;
  guint64 conv_flops, fc_flops;
  cony_cnn_get_flops (cnn, &conv_flops, &fc_flops);
  printf ("VGGish (random weights, built in %.1f s): %" G_GUINT64_FORMAT " parameters, "
          "%.3f GFLOP conv + %.3f GFLOP FC per window\n", t_build, cony_cnn_get_n_params (cnn),
          conv_flops * 1e-9, fc_flops * 1e-9);
  gsize in_size = cony_cnn_get_input_size (cnn);
  float emb[128];
  g_autofree float *warm = g_new0 (float, in_size);
  cony_cnn_forward (cnn, warm, emb);   /* touch the weights once */

  /* 3a. Streaming, as conymel ! conyvggish does it: one window every `stride` frames. */
  gsize n2 = MIN ((gsize) (cnn_seconds * rate), n);
  cnn_seconds = (double) n2 / rate;
  gsize max_frames = cony_mel_frames_for_samples (&config, n2);
  g_autofree float *hist = g_new (float, (max_frames + 1) * 64);
  cony_mel_reset (mel);
  cony_cnn_set_profiling (cnn, TRUE);
  gsize nf = 0, windows = 0;
  double t0 = now (), c0 = cpu_now ();
  for (gsize pos = 0; pos < n2; pos += CHUNK) {
    cony_mel_push (mel, x + pos, MIN ((gsize) CHUNK, n2 - pos));
    while (cony_mel_pop_frame (mel, hist + nf * 64)) {
      nf++;
      if (nf >= 96 && (nf - 96) % (gsize) stride == 0) {
        cony_cnn_forward (cnn, hist + (nf - 96) * 64, emb);
        windows++;
      }
    }
  }
  double s_wall = now () - t0, s_cpu = cpu_now () - c0;
  ConyCnnProfile p1;
  cony_cnn_get_profile (cnn, &p1);
  if (windows == 0) {
    fprintf (stderr, "cony bench frontend: no window in %.1f s of audio\n", cnn_seconds);
    return 1;
  }
  double gf_conv_w = conv_flops * (double) windows / p1.conv_wall * 1e-9;
  double gf_conv_c = conv_flops * (double) windows / p1.conv_cpu * 1e-9;
  double gf_fc_w = fc_flops * (double) windows / p1.fc_wall * 1e-9;
  double gf_fc_c = fc_flops * (double) windows / p1.fc_cpu * 1e-9;
  printf ("mel + VGGish streaming (stride %d frames, batch 1): %" G_GSIZE_FORMAT " windows in %.1f s "
          "of audio\n  wall %.1f ms/window = %.2fx real time; CPU %.1f ms/window = %.2fx real time\n",
          stride, windows, cnn_seconds, s_wall / windows * 1e3, cnn_seconds / s_wall,
          s_cpu / windows * 1e3, cnn_seconds / s_cpu);
  printf ("  conv (default algorithm): CPU %.1f ms/window, %.1f GFLOP/s = %.0f%% of peak (wall %.1f GFLOP/s)\n",
          p1.conv_cpu / windows * 1e3, gf_conv_c, 100 * gf_conv_c / peak, gf_conv_w);
  printf ("  FC (sgemv):            CPU %.1f ms/window, %.1f GFLOP/s = %.0f%% of peak (wall %.1f GFLOP/s)\n",
          p1.fc_cpu / windows * 1e3, gf_fc_c, 100 * gf_fc_c / peak, gf_fc_w);

  /* 3a'. The conv stack alone with each algorithm, on the same windows. */
  double conv_ms[2], conv_gf[2];
  static const ConyCnnConvAlgorithm algos[2] = { CONY_CNN_CONV_IM2COL, CONY_CNN_CONV_AUTO };
  for (int a = 0; a < 2; a++) {
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
  printf ("  conv stack alone: im2col %.1f ms/window (%.1f GFLOP/s = %.0f%% of peak); Winograd "
          "F(2x2,3x3) (default) %.1f ms/window (%.1f effective GFLOP/s = %.0f%% of peak)\n",
          conv_ms[0], conv_gf[0], 100 * conv_gf[0] / peak, conv_ms[1], conv_gf[1],
          100 * conv_gf[1] / peak);

  /* 3b. Offline: the same windows, FC layers batched (sgemm). */
  g_autofree float *patches = g_new (float, windows * in_size);
  for (gsize k = 0; k < windows; k++)
    memcpy (patches + k * in_size, hist + k * stride * 64, in_size * sizeof (float));
  g_autofree float *embs = g_new (float, windows * 128);
  cony_cnn_set_profiling (cnn, TRUE);
  t0 = now ();
  c0 = cpu_now ();
  cony_cnn_forward_batch (cnn, patches, windows, embs);
  double b_wall = now () - t0, b_cpu = cpu_now () - c0;
  ConyCnnProfile p2;
  cony_cnn_get_profile (cnn, &p2);
  double mel_part_cpu = mel_cpu * cnn_seconds / mel_seconds;
  double mel_part_wall = mel_wall * cnn_seconds / mel_seconds;
  double gf2_conv = conv_flops * (double) windows / p2.conv_cpu * 1e-9;
  double gf2_fc = fc_flops * (double) windows / p2.fc_cpu * 1e-9;
  printf ("mel + VGGish offline (FC batched over %" G_GSIZE_FORMAT " windows):\n"
          "  wall %.1f ms/window = %.2fx real time; CPU %.1f ms/window = %.2fx real time\n"
          "  conv CPU %.1f GFLOP/s = %.0f%% of peak; FC (sgemm) CPU %.1f GFLOP/s = %.0f%% of peak\n",
          windows, b_wall / windows * 1e3, cnn_seconds / (b_wall + mel_part_wall),
          b_cpu / windows * 1e3, cnn_seconds / (b_cpu + mel_part_cpu), gf2_conv,
          100 * gf2_conv / peak, gf2_fc, 100 * gf2_fc / peak);

  if (markdown) {
    printf ("\n| measure (%d BLAS thread%s) | CPU time | wall time |\n|---|---|---|\n", threads,
            threads == 1 ? "" : "s");
    printf ("| OpenBLAS sgemm peak 1024³ / at conv3_2's shape 384×256×2304 | %.1f / %.1f GFLOP/s | |\n",
            peak, peak_conv);
    printf ("| log-mel alone, streaming (%d-sample pushes) | %.2f µs/frame, **%.0f× real time** | "
            "%.2f µs/frame, %.0f× |\n", CHUNK, mel_cpu / frames * 1e6, mel_seconds / mel_cpu,
            mel_wall / frames * 1e6, mel_seconds / mel_wall);
    printf ("| mel + VGGish (%.1f M params) streaming, stride %d, batch 1 | %.1f ms/window, "
            "**%.2f× real time** | %.1f ms/window, %.2f× |\n", cony_cnn_get_n_params (cnn) * 1e-6,
            stride, s_cpu / windows * 1e3, cnn_seconds / s_cpu, s_wall / windows * 1e3,
            cnn_seconds / s_wall);
    printf ("| — conv layers, %.3f GFLOP/window, Winograd F(2×2,3×3) (default) | %.1f ms, %.1f *effective* GFLOP/s = %.0f%% of peak | %.1f GFLOP/s |\n",
            conv_flops * 1e-9, p1.conv_cpu / windows * 1e3, gf_conv_c, 100 * gf_conv_c / peak, gf_conv_w);
    printf ("| — conv layers with im2col + sgemm instead (same run, %s windows) | %.1f ms, %.1f GFLOP/s = %.0f%% of peak | |\n",
            windows < 20 ? "all" : "20", conv_ms[0], conv_gf[0], 100 * conv_gf[0] / peak);
    printf ("| — FC layers, %.3f GFLOP/window (sgemv: %.0f MB of weights read per window, %.1f GB/s) | %.1f ms, %.1f GFLOP/s = %.0f%% of peak | %.1f GFLOP/s |\n",
            fc_flops * 1e-9, fc_flops * 2e-6, fc_flops * 2.0 * windows / p1.fc_cpu * 1e-9,
            p1.fc_cpu / windows * 1e3, gf_fc_c, 100 * gf_fc_c / peak, gf_fc_w);
    printf ("| direct-conv bound: %.2f GFLOP per second of audio at 100%% of peak | %.1f× real time | |\n",
            (conv_flops + fc_flops) * (100.0 / stride) * 1e-9,
            peak / ((conv_flops + fc_flops) * (100.0 / stride) * 1e-9));
    printf ("| mel + VGGish offline, FC batched over %" G_GSIZE_FORMAT " windows | %.1f ms/window, "
            "**%.2f× real time**; conv %.0f%%, FC %.0f%% of peak | %.1f ms/window, %.2f× |\n", windows,
            b_cpu / windows * 1e3, cnn_seconds / (b_cpu + mel_part_cpu), 100 * gf2_conv / peak,
            100 * gf2_fc / peak, b_wall / windows * 1e3, cnn_seconds / (b_wall + mel_part_wall));
  }
  return 0;
}
