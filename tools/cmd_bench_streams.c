/* cony bench streams: K live audio chains (conymel -> conyvggish -> conytransformer,
 * in libcony) in one process and one thread, each fed 0.1 s of its own audio every
 * 0.1 s of wall time as a live source delivers it. The process's CPU time over the
 * measured seconds (after start-up and a warm-up until the first token is out: 1 s per
 * window, 2.6 s continual for YAMNet)
 * gives the CPU per live stream and so the live streams one core can carry. The CNN
 * runs per window or continually (--mode, default: the classifier's cnn_mode, as the
 * pipelines pick it); the peak resident memory of runs with different K gives the
 * memory per extra stream. */
#include "bench.h"
#include "bench_chain.h"
#include "cnn_input.h"
#include "commands.h"

#include "cony/error.h"
#include "cony/model.h"

#include <cblas.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#define TICK 1600 /* samples per buffer: 0.1 s */

static double
process_cpu_s (void)
{
  struct rusage u;
  getrusage (RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/* The process's peak resident memory in MiB (getrusage: kilobytes on Linux). */
static double
peak_rss_mib (void)
{
  struct rusage u;
  getrusage (RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

typedef struct {
  ConyMel *mel;
  ConyCnn *cnn;
  ConyCnnContinual *co;
  ConyEncoder *enc;
  ConyBenchChain chain;
} Stream;

/* Stream @s over the CNN file @vg (its weights shared between the streams of this
 * process), the classifier @model, @precision; FALSE with @error. */
static gboolean
stream_init (Stream *s, const char *vg, const ConyModel *model, const char *precision, guint stride,
    gboolean continual, GError **error)
{
  ConyMelConfig mc;
  s->cnn = cony_cnn_load (vg, error);
  if (s->cnn == NULL || !cony_cnn_input_set_precision (s->cnn, precision, error)
      || !cony_cnn_mel_config (s->cnn, &mc, error))
    return FALSE;
  if (cony_cnn_ref_is_embedding (&model->config.cnn)
      && !cony_cnn_set_output (s->cnn, CONY_CNN_OUTPUT_EMBEDDING, error))
    return FALSE;
  if ((int) cony_cnn_get_output_size (s->cnn) != model->config.d_in) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s gives %u-d embeddings but the classifier takes d_in = %d", vg,
        cony_cnn_get_output_size (s->cnn), model->config.d_in);
    return FALSE;
  }
  /* stride 0: the network's time stride */
  if (continual && (s->co = cony_cnn_continual_new (s->cnn, stride, error)) == NULL)
    return FALSE;
  s->mel = cony_mel_new (&mc, error);
  s->enc = s->mel ? cony_encoder_new (model, -1, error) : NULL;
  if (s->enc == NULL)
    return FALSE;
  cony_bench_chain_init (&s->chain, s->mel, s->cnn, s->enc, stride, FALSE, FALSE);
  if (continual)
    cony_bench_chain_set_continual (&s->chain, s->co);
  return TRUE;
}

static void
stream_clear (Stream *s)
{
  if (s->enc)
    cony_bench_chain_clear (&s->chain);
  g_clear_pointer (&s->enc, cony_encoder_free);
  g_clear_pointer (&s->mel, cony_mel_free);
  g_clear_pointer (&s->co, cony_cnn_continual_free);
  g_clear_pointer (&s->cnn, cony_cnn_free);
}

/* @ticks buffers to every stream, one tick per 0.1 s of wall time (@paced) or back to
 * back; returns the wall seconds it took. Stream k reads @audio (@n samples, looped)
 * from its own offset. */
static double
run_ticks (Stream *streams, int k, const float *audio, gsize n, guint64 *tick, guint64 ticks,
    gboolean paced)
{
  double t0 = cony_bench_wall_s ();
  for (guint64 end = *tick + ticks, i = 0; *tick < end; (*tick)++, i++) {
    for (int s = 0; s < k; s++) {
      gsize at = ((gsize) s * 5923 + *tick * TICK) % (n - TICK);
      cony_bench_chain_push (&streams[s].chain, audio + at, TICK);
    }
    double next = t0 + (double) (i + 1) * TICK / CONY_BENCH_RATE;
    double now = cony_bench_wall_s ();
    if (paced && now < next)
      g_usleep ((gulong) ((next - now) * 1e6));
  }
  return cony_bench_wall_s () - t0;
}

int
cony_cmd_bench_streams (int argc, char **argv)
{
  char *vggish = NULL, *transformer = NULL, *precision = NULL, *mode = NULL;
  double seconds = 20.0;
  int k = 8, stride = 0;
  gboolean fast = FALSE;
  GOptionEntry entries[] = {
    { "streams", 'k', 0, G_OPTION_ARG_INT, &k, "live streams in the process (default 8)", "K" },
    { "seconds", 0, 0, G_OPTION_ARG_DOUBLE, &seconds,
        "measured seconds of live audio (default 20), after a warm-up (1 s; continual: until the first token)",
        "S" },
    { "transformer", 0, 0, G_OPTION_ARG_FILENAME, &transformer,
        "classifier (default models/audio/transformer.safetensors)", "M" },
    { "vggish", 0, 0, G_OPTION_ARG_FILENAME, &vggish,
        "front-end CNN (default: the one the classifier's config names, beside it or in a "
        "sibling folder)",
        "M" },
    CONY_CNN_PRECISION_OPTION (precision),
    { "stride", 0, 0, G_OPTION_ARG_INT, &stride,
        "frames between tokens (default: 25 per window; continual: the network's time stride, "
        "32 for YAMNet)",
        "F" },
    { "mode", 0, 0, G_OPTION_ARG_STRING, &mode,
        "window or continual (default: the classifier's cnn_mode, as the pipelines pick it)",
        "MODE" },
    { "fast", 0, 0, G_OPTION_ARG_NONE, &fast,
        "feed the buffers back to back instead of in real time (throughput, not live)", NULL },
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- live audio streams per core");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  g_autofree char *pr = precision, *tr_arg = transformer, *vg_arg = vggish, *mode_arg = mode;
  if (k < 1 || k > 10000 || !(seconds >= 1.0 && seconds <= 3600.0) || stride < 0
      || (mode_arg && strcmp (mode_arg, "window") != 0 && strcmp (mode_arg, "continual") != 0)) {
    fprintf (stderr,
        "cony bench streams: --streams must be 1..10000, --seconds 1..3600, --stride at "
        "least 1 and --mode window or continual\n");
    return 2;
  }
  const char *tr = tr_arg ? tr_arg : "models/audio/transformer.safetensors";
  g_autofree char *vg = vg_arg ? g_strdup (vg_arg) : cony_bench_default_cnn (tr);
  openblas_set_num_threads (1);
  g_autoptr (ConyModel) model = cony_model_load (tr, &error);
  if (model == NULL)
    return cony_cmd_fail (error);
  if (model->config.tokens_per_step != 1) {
    fprintf (stderr, "cony: %s takes %d tokens per step; the audio pipeline makes one per window\n",
        tr, model->config.tokens_per_step);
    return 1;
  }
  const char *run_mode = mode_arg ? mode_arg : cony_cnn_ref_mode (&model->config.cnn);
  gboolean continual = strcmp (run_mode, "continual") == 0;
  if (!continual && stride == 0)
    stride = 25;
  Stream *streams = g_new0 (Stream, k);
  int status = 0;
  for (int s = 0; s < k && status == 0; s++)
    if (!stream_init (&streams[s], vg, model, pr, (guint) stride, continual, &error))
      status = cony_cmd_fail (error);
  if (status == 0) {
    gsize n = 60 * CONY_BENCH_RATE;
    g_autofree float *audio = cony_bench_audio (n);
    guint64 tick = 0, ticks = (guint64) (seconds * 10.0 + 0.5), windows = 0;
    /* warm-up: until the first token is out (a window; continual: a window and its
     * lookahead), so that the measured seconds are the steady state */
    guint64 warm = 10;
    if (continual) {
      ConyCnnContinualGeometry g;
      cony_cnn_continual_get_geometry (streams[0].co, &g);
      guint hop = cony_mel_get_config (streams[0].mel)->hop_length;
      warm = (cony_cnn_get_input_height (streams[0].cnn) + g.delay) * (guint64) hop / TICK + 2;
    }
    run_ticks (streams, k, audio, n, &tick, warm, !fast);
    for (int s = 0; s < k; s++)
      windows -= streams[s].chain.windows;
    double c0 = process_cpu_s ();
    double wall = run_ticks (streams, k, audio, n, &tick, ticks, !fast);
    double cpu = process_cpu_s () - c0, audio_s = ticks * 0.1;
    for (int s = 0; s < k; s++)
      windows += streams[s].chain.windows;
    g_autofree char *desc = cony_cnn_describe_precision (streams[0].cnn);
    double per_stream = cpu / (audio_s * k);
    printf ("# %d live streams in one process, one thread, %.0f s of audio each (%s), after "
            "start-up and %.1f s of warm-up\n",
        k, audio_s, fast ? "fed back to back" : "0.1 s buffers in real time", warm * 0.1);
    printf ("# CNN %s: %s, %s", vg, desc, run_mode);
    if (continual) {
      ConyCnnContinualGeometry g;
      cony_cnn_continual_get_geometry (streams[0].co, &g);
      printf (" (hop %u frames; state per stream %.2f MB)", stride ? (guint) stride : g.time_stride,
          cony_cnn_continual_get_state_bytes (streams[0].co, NULL) / 1e6);
    } else {
      printf (" (stride %d frames)", stride);
    }
    printf ("; classifier %s (cnn_mode %s)\n", tr, cony_cnn_ref_mode (&model->config.cnn));
    printf ("  process CPU %.3f s over %.2f s wall (%.1f%% of one core)%s\n", cpu, wall,
        100.0 * cpu / wall,
        !fast && wall > audio_s * 1.05 ? ": FELL BEHIND, the core cannot carry them live" : "");
    printf ("  %" G_GUINT64_FORMAT " CNN %s, %.3f ms of CPU per token (the whole chain)\n", windows,
        continual ? "tokens" : "windows", 1e3 * cpu / (double) MAX (windows, 1));
    printf ("  per live stream: %.3f%% of a core\n", 100.0 * per_stream);
    printf ("  live streams per core: %.0f\n", 1.0 / per_stream);
    printf ("  peak resident memory: %.1f MiB (memory per extra stream: the difference of "
            "two runs' over their K)\n",
        peak_rss_mib ());
  }
  for (int s = 0; s < k; s++)
    stream_clear (&streams[s]);
  g_free (streams);
  return status;
}
