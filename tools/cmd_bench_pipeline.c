/* cony bench pipeline: the whole audio chain with a model pair, in one run:
 * libcony streaming (mel -> CNN -> encoder, CPU time per stage), the encoder alone for
 * every attention variant, and the real GStreamer pipeline run by gst-launch-1.0. */
#include "bench.h"
#include "bench_chain.h"
#include "commands.h"
#include "cnn_input.h"

#include "cony/cnn.h"
#include "cony/encoder.h"
#include "cony/mel.h"
#include "cony/model.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sys/time.h>

#define SAMPLE_RATE CONY_BENCH_RATE
#define CHUNK 1024

/* CPU µs per encoder step with @variant over @tokens (median of 3 passes). */
static double
encoder_us (const ConyModel *model, int variant, const float *tokens, guint64 n, GError **error)
{
  g_autoptr (ConyEncoder) enc = cony_encoder_new (model, variant, error);
  if (!enc)
    return -1.0;
  float logits[4096];
  double runs[3];
  for (int r = 0; r < 3; r++) {
    cony_encoder_reset (enc);
    double t0 = cony_bench_cpu_s ();
    for (guint64 i = 0; i < n; i++)
      cony_encoder_step (enc, tokens + i * model->config.d_in, logits);
    runs[r] = (cony_bench_cpu_s () - t0) / n * 1e6;
  }
  return cony_bench_summarise (runs, 3).median;
}

/* The plugin directory next to this executable's build directory (build/gst). */
static char *
plugin_dir (void)
{
  g_autofree char *exe = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *dir = exe ? g_path_get_dirname (exe) : g_strdup (".");
  return g_build_filename (dir, "..", "gst", NULL);
}

/* The peak resident memory (VmHWM) in KiB of process @pid, or -1 when it cannot be read
 * (the process is gone). exec starts a new address space, so this is the process's own
 * peak since its last exec, unlike getrusage's ru_maxrss, which also counts the copy of
 * this (large) process that fork made before the exec. */
static long
read_peak_rss_kib (GPid pid)
{
  char path[64];
  g_snprintf (path, sizeof path, "/proc/%d/status", (int) pid);
  g_autofree char *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return -1;
  const char *line = strstr (text, "VmHWM:");
  return line ? strtol (line + strlen ("VmHWM:"), NULL, 10) : -1;
}

/* Runs the GStreamer pipeline on @seconds of generated audio: wall and CPU seconds of
 * the gst-launch-1.0 process and its peak resident memory in KiB (polled from /proc
 * every 5 ms while it runs; the peak only grows, and teardown frees memory). */
static gboolean
run_gst (const char *vggish, const char *transformer, const char *mel_props, const char *cnn_props,
    double seconds, double *wall, double *cpu, long *peak_kib, GError **error)
{
  guint buffers = (guint) ceil (seconds * SAMPLE_RATE / 1600.0);
  g_autofree char *dir = plugin_dir ();
  g_autofree char *q_dir = g_shell_quote (dir), *q_vggish = g_shell_quote (vggish);
  g_autofree char *q_transformer = g_shell_quote (transformer);
  g_autofree char *err_path = NULL;
  int err_fd = g_file_open_tmp ("cony-bench-XXXXXX.stderr", &err_path, error);
  if (err_fd < 0)
    return FALSE;
  close (err_fd);
  g_autofree char *q_err = g_shell_quote (err_path);
  /* exec keeps the process id: what is polled is gst-launch-1.0 itself */
  g_autofree char *cmd =
      g_strdup_printf ("exec env GST_PLUGIN_PATH=%s OPENBLAS_NUM_THREADS=1 gst-launch-1.0 -q audiotestsrc "
                       "num-buffers=%u samplesperbuffer=1600 wave=pink-noise "
                       "! audio/x-raw,rate=%d,channels=1,format=F32LE ! conymel %s ! conyvggish model=%s %s "
                       "! conytransformer model=%s post-messages=false ! fakesink sync=false 2>%s",
          q_dir, buffers, SAMPLE_RATE, mel_props, q_vggish, cnn_props, q_transformer, q_err);
  const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
  GPid pid;
  double t0 = cony_bench_wall_s ();
  if (!g_spawn_async (NULL, (char **) argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid,
          error)) {
    g_unlink (err_path);
    return FALSE;
  }
  int status = 0;
  struct rusage usage;
  *peak_kib = 0;
  while (wait4 (pid, &status, WNOHANG, &usage) == 0) {
    *peak_kib = MAX (*peak_kib, read_peak_rss_kib (pid));
    g_usleep (5000);
  }
  *wall = cony_bench_wall_s () - t0;
  *cpu = usage.ru_utime.tv_sec + usage.ru_stime.tv_sec
      + 1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  g_spawn_close_pid (pid);
  g_autofree char *err = NULL;
  g_file_get_contents (err_path, &err, NULL, NULL);
  g_unlink (err_path);
  if (!g_spawn_check_wait_status (status, NULL)) {
    g_set_error (error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED, "gst-launch-1.0 failed: %s",
        err ? err : "");
    return FALSE;
  }
  return TRUE;
}

int
cony_cmd_bench_pipeline (int argc, char **argv)
{
  char *vggish = NULL, *transformer = NULL;
  double seconds = 60.0;
  int stride = 25;
  gboolean no_gst = FALSE;
  GOptionEntry entries[] = {
    { "vggish", 0, 0, G_OPTION_ARG_FILENAME, &vggish,
        "front-end CNN (default: the one "
        "the classifier's config names, beside it or in a sibling folder)",
        "M" },
    { "transformer", 0, 0, G_OPTION_ARG_FILENAME, &transformer,
        "classifier (default "
        "models/audio/transformer.safetensors)",
        "M" },
    { "seconds", 0, 0, G_OPTION_ARG_DOUBLE, &seconds, "seconds of audio (default 60)", "S" },
    { "stride", 0, 0, G_OPTION_ARG_INT, &stride, "CNN window stride in frames (default 25)", "F" },
    { "no-gst", 0, 0, G_OPTION_ARG_NONE, &no_gst, "skip the gst-launch-1.0 run", NULL },
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr (GOptionContext)
      ctx = g_option_context_new ("- the whole audio pipeline with a model pair");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  g_autofree char *tr = transformer ? transformer
                                    : g_strdup ("models/audio/transformer.safetensors");
  g_autofree char *vg = vggish ? vggish : cony_bench_default_cnn (tr);
  openblas_set_num_threads (1);

  /* the CNN's own log-mel settings, and its pooled embedding where the classifier's
   * tokens are that (as conymel and conyvggish negotiate them in the pipeline) */
  ConyMelConfig mc;
  g_autoptr (ConyCnn) cnn = cony_cnn_load (vg, &error);
  g_autoptr (ConyMel)
      mel = cnn && cony_cnn_mel_config (cnn, &mc, &error) ? cony_mel_new (&mc, &error) : NULL;
  g_autoptr (ConyModel) model = mel ? cony_model_load (tr, &error) : NULL;
  gboolean pooled = model && cony_cnn_ref_is_embedding (&model->config.cnn);
  if (model && pooled && !cony_cnn_set_output (cnn, CONY_CNN_OUTPUT_EMBEDDING, &error))
    g_clear_pointer (&model, cony_model_free);
  g_autoptr (ConyEncoder) enc = model ? cony_encoder_new (model, -1, &error) : NULL;
  if (!enc)
    return cony_cmd_fail (error);
  if ((int) cony_cnn_get_output_size (cnn) != model->config.d_in) {
    fprintf (stderr, "cony: %s gives %u-d embeddings but %s takes d_in = %d\n", vg,
        cony_cnn_get_output_size (cnn), tr, model->config.d_in);
    return 1;
  }
  if (model->config.tokens_per_step != 1) { /* one embedding per audio window is one token */
    fprintf (stderr, "cony: %s takes %d tokens per step; the audio pipeline makes one per window\n",
        tr, model->config.tokens_per_step);
    return 1;
  }

  gsize n = (gsize) (seconds * SAMPLE_RATE);
  g_autofree float *x = cony_bench_audio (n);
  ConyBenchChain t;
  cony_bench_chain_init (&t, mel, cnn, enc, (guint) stride, TRUE, TRUE);
  for (gsize pos = 0; pos < n; pos += CHUNK)
    cony_bench_chain_push (&t, x + pos, MIN (CHUNK, n - pos));
  const float *tokens = (const float *) t.tokens->data;
  guint64 n_tokens = t.windows;
  double total = t.mel_s + t.cnn_s + t.encoder_s;

  printf ("# audio pipeline, %.0f s of 16 kHz audio, one thread, CPU time; CNN %s (%" G_GUINT64_FORMAT
          " params), classifier %s (%" G_GSIZE_FORMAT " params, trained %s)\n",
      seconds, vg, cony_cnn_get_n_params (cnn), tr, model->n_parameters,
      cony_attention_variant_name (model->config.attention[model->config.blocks - 1]));
  printf ("%-34s %12s %14s\n", "stage (libcony, streaming)", "CPU s", "x real time");
  printf ("%-34s %12.3f %14.0f\n", "log-mel", t.mel_s, seconds / t.mel_s);
  printf ("%-34s %12.3f %14.0f\n", "CNN (one window per stride)", t.cnn_s, seconds / t.cnn_s);
  printf ("%-34s %12.3f %14.0f\n", "encoder (one step per window)", t.encoder_s,
      seconds / t.encoder_s);
  printf ("%-34s %12.3f %14.0f\n", "whole chain", total, seconds / total);

  printf ("\n%-16s %14s %14s\n", "attention", "encoder us/step", "state bytes");
  for (int v = 0; v < CONY_ATTENTION_N_VARIANTS; v++) {
    g_autoptr (GError) e = NULL;
    double us = encoder_us (model, v, tokens, n_tokens, &e);
    g_autoptr (ConyEncoder) probe = us >= 0 ? cony_encoder_new (model, v, NULL) : NULL;
    if (us < 0)
      printf ("%-16s %14s   (%s)\n", cony_attention_variant_name (v), "-", "needs fixed landmarks");
    else
      printf ("%-16s %14.2f %14zu\n", cony_attention_variant_name (v), us,
          cony_encoder_state_bytes (probe));
  }
  cony_bench_chain_clear (&t);

  if (!no_gst) {
    double wall = 0, cpu = 0;
    long peak_kib = 0;
    /* conymel's properties are the CNN's log-mel settings written out */
    g_autofree char *mel_props =
        g_strdup_printf ("sample-rate=%u window-length=%u hop-length=%u fft-length=%u n-mels=%u fmin=%g "
                         "fmax=%g log-offset=%g",
            mc.sample_rate, mc.window_length, mc.hop_length, mc.fft_length, mc.n_mels, mc.fmin,
            mc.fmax, mc.log_offset);
    const char *cnn_props = pooled ? "output=embedding" : "";
    if (!run_gst (vg, tr, mel_props, cnn_props, seconds, &wall, &cpu, &peak_kib, &error))
      return cony_cmd_fail (error);
    printf ("\ngst-launch-1.0 audiotestsrc ! conymel ! conyvggish %s ! conytransformer ! fakesink sync=false\n",
        cnn_props);
    printf ("  %.0f s of audio in %.2f s wall, %.2f s CPU: %.0fx real time; live, it would use %.1f%% of one core\n",
        seconds, wall, cpu, seconds / wall, 100.0 * cpu / seconds);
    printf ("  peak resident memory of the gst-launch-1.0 process: %.1f MiB\n", peak_kib / 1024.0);
  }
  return 0;
}
