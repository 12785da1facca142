/* Log-mel: against the float64 numpy reference (training/mel_reference.py,
 * goldens in tests/golden/mel/), and streaming == whole signal. */
#include "cony/error.h"
#include "cony/mel.h"
#include "cony/npy.h"
#include "testutil.h"

#include <math.h>
#include <string.h>

static const char *signal_names[] = {
  "sweep",
  "expsweep",
  "tone1k",
  "tones",
  "quiet_tone",
  "noise",
  "loud_noise",
  "clicks",
  "silence",
  "one_frame",
};

static ConyNpyArray *
load_golden (const char *name)
{
  const char *root = g_getenv ("CONY_SOURCE_ROOT");
  g_assert_nonnull (root);
  g_autofree char *file = g_strdup_printf ("%s.npy", name);
  g_autofree char *path = g_build_filename (root, "tests", "golden", "mel", file, NULL);
  GError *error = NULL;
  ConyNpyArray *a = cony_npy_load (path, &error);
  g_assert_no_error (error);
  return a;
}

static ConyMel *
new_vggish (void)
{
  ConyMelConfig config;
  cony_mel_config_init_vggish (&config);
  GError *error = NULL;
  ConyMel *mel = cony_mel_new (&config, &error);
  g_assert_no_error (error);
  return mel;
}

static float
max_abs_diff (const float *a, const float *b, gsize n)
{
  float m = 0.0f;
  for (gsize i = 0; i < n; i++)
    m = MAX (m, fabsf (a[i] - b[i]));
  return m;
}

static void
test_matrix (void)
{
  g_autoptr (ConyMel) mel = new_vggish ();
  g_autoptr (ConyNpyArray) want = load_golden ("mel_matrix");
  g_assert_cmpint (want->ndim, ==, 2);
  g_assert_cmpuint (want->shape[0], ==, 257);
  g_assert_cmpuint (want->shape[1], ==, 64);
  const float *w = cony_mel_get_matrix (mel);
  g_assert_cmpfloat (max_abs_diff (w, want->data, 257 * 64), <, 1e-6);
  /* The documented facts: DC row zero, band 0 only at bin 5. */
  for (int i = 0; i < 64; i++)
    g_assert_cmpfloat (w[i], ==, 0.0f);
  for (int k = 0; k < 257; k++)
    if (k != 5)
      g_assert_cmpfloat (w[k * 64], ==, 0.0f);
  g_assert_cmpfloat (fabsf (w[5 * 64] - 0.948f), <, 1e-3);
}

static void
test_golden_signals (void)
{
  g_autoptr (ConyMel) mel = new_vggish ();
  for (guint s = 0; s < G_N_ELEMENTS (signal_names); s++) {
    g_autofree char *wname = g_strdup_printf ("%s_wave", signal_names[s]);
    g_autofree char *lname = g_strdup_printf ("%s_logmel", signal_names[s]);
    g_autoptr (ConyNpyArray) wave = load_golden (wname);
    g_autoptr (ConyNpyArray) want = load_golden (lname);
    gsize n = cony_npy_array_numel (wave), frames = 0;
    g_autofree float *got = cony_mel_compute (mel, wave->data, n, &frames);
    g_assert_cmpuint (frames, ==, want->shape[0]);
    g_assert_cmpuint (want->shape[1], ==, 64);
    float err = max_abs_diff (got, want->data, frames * 64);
    g_test_message ("%-12s %3" G_GSIZE_FORMAT " frames, max |err| %.2e", signal_names[s], frames,
        err);
    g_assert_cmpfloat (err, <, 1e-3);
  }
}

static void
test_silence_exact (void)
{
  g_autoptr (ConyMel) mel = new_vggish ();
  float zeros[400] = { 0 }, out[64];
  cony_mel_compute_frame (mel, zeros, out);
  for (int i = 0; i < 64; i++)
    g_assert_cmpfloat (out[i], ==, logf (0.01f));
}

static void
test_custom_config (void)
{
  ConyMelConfig c = {
    .sample_rate = 8000,
    .window_length = 256,
    .hop_length = 100,
    .fft_length = 256,
    .n_mels = 40,
    .fmin = 0.0,
    .fmax = 4000.0,
    .log_offset = 0.001,
    .periodic_window = FALSE,
  };
  GError *error = NULL;
  g_autoptr (ConyMel) mel = cony_mel_new (&c, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (cony_mel_get_n_mels (mel), ==, 40);
  g_autoptr (ConyNpyArray) wave = load_golden ("custom_wave");
  g_autoptr (ConyNpyArray) want = load_golden ("custom_logmel");
  gsize frames = 0;
  g_autofree float *got = cony_mel_compute (mel, wave->data, cony_npy_array_numel (wave), &frames);
  g_assert_cmpuint (frames, ==, want->shape[0]);
  g_assert_cmpuint (want->shape[1], ==, 40);
  g_assert_cmpfloat (max_abs_diff (got, want->data, frames * 40), <, 1e-3);
}

/* Pushes @wave in chunks cycling through @sizes, pops everything, and checks
 * the result equals the whole-signal computation exactly. */
static void
check_streaming (ConyMel *mel, const float *wave, gsize n, const gsize *sizes, guint n_sizes)
{
  const ConyMelConfig *c = cony_mel_get_config (mel);
  gsize frames = 0;
  g_autofree float *whole = cony_mel_compute (mel, wave, n, &frames);
  g_assert_cmpuint (frames, ==, cony_mel_frames_for_samples (c, n));

  cony_mel_reset (mel);
  g_autofree float *got = g_new0 (float, (frames + 1) * c->n_mels);
  gsize popped = 0, pos = 0;
  guint i = 0;
  while (pos < n) {
    gsize want = sizes[i++ % n_sizes]; /* not inside MIN: it evaluates twice */
    gsize len = MIN (want, n - pos);
    g_assert_cmpuint (cony_mel_push (mel, wave + pos, len), ==, 0);
    pos += len;
    g_assert_cmpuint (cony_mel_get_samples_pushed (mel), ==, pos);
    g_assert_cmpuint (cony_mel_frames_available (mel), ==,
        cony_mel_frames_for_samples (c, pos) - popped);
    while (TRUE) {
      g_assert_cmpuint (cony_mel_get_next_frame_index (mel), ==, popped);
      if (!cony_mel_pop_frame (mel, got + popped * c->n_mels))
        break;
      popped++;
      g_assert_cmpuint (popped, <=, frames);
    }
  }
  g_assert_cmpuint (popped, ==, frames);
  if (frames > 0)
    g_assert_cmpmem (got, frames * c->n_mels * sizeof (float), whole,
        frames * c->n_mels * sizeof (float));
}

static void
test_streaming_odd_pushes (void)
{
  g_autoptr (ConyMel) mel = new_vggish ();
  g_autoptr (ConyNpyArray) wave = load_golden ("sweep_wave");
  gsize n = cony_npy_array_numel (wave);
  static const gsize one[] = { 1 };
  static const gsize odd[] = { 7, 159, 161, 1, 399, 401, 3, 1000, 13 };
  static const gsize big[] = { 100000 };
  static const gsize hop[] = { 160 };
  check_streaming (mel, wave->data, n, one, 1);
  check_streaming (mel, wave->data, n, odd, G_N_ELEMENTS (odd));
  check_streaming (mel, wave->data, n, big, 1);
  check_streaming (mel, wave->data, n, hop, 1);
}

static void
test_streaming_hop_beyond_window (void)
{
  /* hop > window: samples between frames are skipped, never buffered. */
  ConyMelConfig c;
  cony_mel_config_init_vggish (&c);
  c.window_length = 200;
  c.fft_length = 256;
  c.hop_length = 333;
  GError *error = NULL;
  g_autoptr (ConyMel) mel = cony_mel_new (&c, &error);
  g_assert_no_error (error);
  g_autoptr (ConyNpyArray) wave = load_golden ("noise_wave");
  static const gsize odd[] = { 5, 250, 17, 333, 1 };
  check_streaming (mel, wave->data, cony_npy_array_numel (wave), odd, G_N_ELEMENTS (odd));
}

static void
test_push_variants (void)
{
  g_autoptr (ConyMel) a = new_vggish ();
  g_autoptr (ConyMel) b = new_vggish ();
  gint16 s16[1200];
  float f[1200];
  for (int i = 0; i < 1200; i++) {
    s16[i] = (gint16) ((i * 7919) % 65536 - 32768);
    f[i] = s16[i] / 32768.0f;
  }
  cony_mel_push_s16 (a, s16, 500);
  cony_mel_push_s16 (a, s16 + 500, 700);
  cony_mel_push (b, f, 1200);
  float fa[64], fb[64];
  gsize count = 0;
  while (cony_mel_pop_frame (a, fa)) {
    g_assert_true (cony_mel_pop_frame (b, fb));
    g_assert_cmpmem (fa, sizeof fa, fb, sizeof fb);
    count++;
  }
  g_assert_cmpuint (count, ==, 6);
  g_assert_false (cony_mel_pop_frame (b, fb));

  /* Silence equals pushing zeros, and gives log(0.01). */
  cony_mel_reset (a);
  cony_mel_push_silence (a, 399);
  g_assert_false (cony_mel_pop_frame (a, fa));
  cony_mel_push_silence (a, 1);
  g_assert_true (cony_mel_pop_frame (a, fa));
  for (int i = 0; i < 64; i++)
    g_assert_cmpfloat (fa[i], ==, logf (0.01f));
}

static void
test_non_finite_and_reset (void)
{
  g_autoptr (ConyMel) mel = new_vggish ();
  g_autoptr (ConyNpyArray) wave = load_golden ("noise_wave");
  gsize n = cony_npy_array_numel (wave), frames = 0;
  g_autofree float *clean = cony_mel_compute (mel, wave->data, n, &frames);

  /* Poison three samples: they count as zeros, every frame stays finite, and
   * frames that do not cover them equal the clean ones. */
  g_autofree float *bad = g_memdup2 (wave->data, n * sizeof (float));
  bad[1000] = NAN;
  bad[1001] = INFINITY;
  bad[1002] = -INFINITY;
  g_assert_cmpuint (cony_mel_push (mel, bad, n), ==, 3);
  float out[64];
  gsize t = 0;
  while (cony_mel_pop_frame (mel, out)) {
    for (int i = 0; i < 64; i++)
      g_assert_true (isfinite (out[i]));
    gboolean covers = t * 160 <= 1002 && 1000 < t * 160 + 400;
    if (!covers)
      g_assert_cmpmem (out, sizeof out, clean + t * 64, sizeof out);
    t++;
  }
  g_assert_cmpuint (t, ==, frames);

  /* The whole-signal function treats them as zeros as well. */
  gsize frames2 = 0;
  g_autofree float *whole_bad = cony_mel_compute (mel, bad, n, &frames2);
  g_assert_cmpuint (frames2, ==, frames);
  for (gsize i = 0; i < frames * 64; i++)
    g_assert_true (isfinite (whole_bad[i]));

  /* Reset restarts at frame 0 with an empty buffer. */
  cony_mel_reset (mel);
  g_assert_cmpuint (cony_mel_get_next_frame_index (mel), ==, 0);
  g_assert_cmpuint (cony_mel_get_samples_pushed (mel), ==, 0);
  g_assert_cmpuint (cony_mel_frames_available (mel), ==, 0);
  cony_mel_push (mel, wave->data, 400);
  g_assert_true (cony_mel_pop_frame (mel, out));
  g_assert_cmpmem (out, sizeof out, clean, sizeof out);
}

static void
test_frames_for_samples (void)
{
  ConyMelConfig c;
  cony_mel_config_init_vggish (&c);
  g_assert_cmpuint (cony_mel_frames_for_samples (&c, 0), ==, 0);
  g_assert_cmpuint (cony_mel_frames_for_samples (&c, 399), ==, 0);
  g_assert_cmpuint (cony_mel_frames_for_samples (&c, 400), ==, 1);
  g_assert_cmpuint (cony_mel_frames_for_samples (&c, 559), ==, 1);
  g_assert_cmpuint (cony_mel_frames_for_samples (&c, 560), ==, 2);
  g_assert_cmpuint (cony_mel_frames_for_samples (&c, 15600), ==, 96);
  g_assert_cmpuint (cony_mel_frames_for_samples (&c, 32000), ==, 198);

  g_autoptr (ConyMel) mel = new_vggish ();
  g_autoptr (ConyNpyArray) wave = load_golden ("short_wave");
  gsize frames = 99;
  float *none = cony_mel_compute (mel, wave->data, cony_npy_array_numel (wave), &frames);
  g_assert_null (none);
  g_assert_cmpuint (frames, ==, 0);
}

static void
test_config_errors (void)
{
  ConyMelConfig c;
  GError *error = NULL;
  const char *expect[] = { "fft_length", "fft_length", "fmax", "fmin", "log_offset", "n_mels",
    "hop_length", "sample_rate" };
  for (guint k = 0; k < G_N_ELEMENTS (expect); k++) {
    cony_mel_config_init_vggish (&c);
    switch (k) {
      case 0: c.fft_length = 500; break;
      case 1: c.fft_length = 256; break; /* < window 400 */
      case 2: c.fmax = 9000; break;      /* > Nyquist */
      case 3:
        c.fmin = 8000;
        c.fmax = 7000;
        break;
      case 4: c.log_offset = 0; break;
      case 5: c.n_mels = 0; break;
      case 6: c.hop_length = 0; break;
      case 7: c.sample_rate = 0; break;
    }
    g_assert_null (cony_mel_new (&c, &error));
    cony_test_expect_error (&error, CONY_ERROR_INVALID, expect[k], NULL);
  }
  cony_mel_config_init_vggish (&c);
  g_assert_true (cony_mel_config_validate (&c, &error));
  g_assert_no_error (error);

  /* the largest FFT (FFmpeg's larger ones are O(n^2)) with the most bands is small: the
   * weights are sparse (#46.1), and the bytes are an upper bound of what is held */
  c.fft_length = c.window_length = CONY_MEL_MAX_FFT;
  c.n_mels = 4096;
  g_assert_true (cony_mel_config_validate (&c, &error));
  g_assert_cmpuint (cony_mel_config_bytes (&c), <, 24u << 20);
  c.fft_length = CONY_MEL_MAX_FFT * 2;
  g_assert_false (cony_mel_config_validate (&c, &error));
  cony_test_expect_error (&error, CONY_ERROR_INVALID, "fft_length 524288", "O(n^2)");
  c.fft_length = CONY_MEL_MAX_FFT;
  c.window_length = CONY_MEL_MAX_FFT * 2;
  g_assert_false (cony_mel_config_validate (&c, &error));
  cony_test_expect_error (&error, CONY_ERROR_INVALID, "window_length 524288", NULL);
}

/* The presets and a model's "frontend" metadata: the one parser the element and the
 * CLI use (property names and the legacy keys alike), refusals naming the key. */
static void
test_presets_and_frontend (void)
{
  ConyMelConfig v, y, c;
  cony_mel_config_init_vggish (&v);
  cony_mel_config_init_preset (&y, CONY_MEL_PRESET_YAMNET);
  g_assert_cmpfloat (y.log_offset, ==, 0.001);
  for (guint i = 0; i + 1 < CONY_MEL_N_SETTINGS; i++) /* nothing else differs */
    g_assert_cmpfloat (cony_mel_config_get_setting (&y, i), ==,
        cony_mel_config_get_setting (&v, i));
  ConyMelPreset p;
  g_assert_true (cony_mel_preset_from_name ("yamnet", &p) && p == CONY_MEL_PRESET_YAMNET);
  g_assert_false (cony_mel_preset_from_name ("vggish2", &p));
  g_assert_cmpstr (cony_mel_setting_name (7), ==, "log-offset");
  g_assert_null (cony_mel_setting_name (CONY_MEL_N_SETTINGS));

  GError *error = NULL;
  g_autofree char *name = NULL;
  g_assert_true (cony_mel_config_from_frontend (NULL, &c, &name, &error));
  for (guint i = 0; i < CONY_MEL_N_SETTINGS; i++)
    g_assert_cmpfloat (cony_mel_config_get_setting (&c, i), ==,
        cony_mel_config_get_setting (&v, i));
  g_assert_cmpstr (name, ==, "vggish");
  g_clear_pointer (&name, g_free);
  /* conymel's names, a double where an integer is whole, an unknown key ignored */
  g_assert_true (cony_mel_config_from_frontend ("{\"name\": \"yamnet\", \"log-offset\": 0.001, "
                                                "\"n-mels\": 32.0, \"colour\": \"red\"}",
      &c, &name, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (name, ==, "yamnet");
  g_assert_cmpfloat (c.log_offset, ==, 0.001);
  g_assert_cmpuint (c.n_mels, ==, 32);
  g_assert_cmpfloat (cony_mel_config_get_setting (&c, 4), ==, 32);
  /* the legacy keys of older files */
  g_assert_true (cony_mel_config_from_frontend ("{\"window_samples\": 480, \"hop_samples\": 240, "
                                                "\"log_offset\": 0.5}",
      &c, NULL, &error));
  g_assert_cmpuint (c.window_length, ==, 480);
  g_assert_cmpuint (c.hop_length, ==, 240);
  g_assert_cmpfloat (c.log_offset, ==, 0.5);
  const struct {
    const char *json, *needle1, *needle2;
  } bad[] = {
    { "[1, 2]", "not a JSON object", NULL },
    { "{\"n-mels\": \"64\"}", "'n-mels' must be a number", NULL },
    { "{\"hop_samples\": 2.5}", "'hop_samples' = 2.5", "whole number" },
    { "{\"sample-rate\": -16000}", "'sample-rate' = -16000", NULL },
    { "{\"fmax\": 9000}", "frontend: mel config: fmax 9000", "Nyquist" },
    { "{\"window-length\": 1024}", "fft_length 512 is shorter than window_length 1024", NULL },
  };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_assert_false (cony_mel_config_from_frontend (bad[i].json, &c, NULL, &error));
    cony_test_expect_error (&error, CONY_ERROR_INVALID, bad[i].needle1, bad[i].needle2);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/mel/matrix", test_matrix);
  g_test_add_func ("/mel/golden-signals", test_golden_signals);
  g_test_add_func ("/mel/silence-exact", test_silence_exact);
  g_test_add_func ("/mel/custom-config", test_custom_config);
  g_test_add_func ("/mel/streaming-odd-pushes", test_streaming_odd_pushes);
  g_test_add_func ("/mel/streaming-hop-beyond-window", test_streaming_hop_beyond_window);
  g_test_add_func ("/mel/push-variants", test_push_variants);
  g_test_add_func ("/mel/non-finite-and-reset", test_non_finite_and_reset);
  g_test_add_func ("/mel/frames-for-samples", test_frames_for_samples);
  g_test_add_func ("/mel/config-errors", test_config_errors);
  g_test_add_func ("/mel/presets-and-frontend", test_presets_and_frontend);
  return g_test_run ();
}
