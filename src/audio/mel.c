/* Log-mel spectrogram, VGGish-exact by default (see include/cony/mel.h).
 * The FFT runs in single precision (FFmpeg's SIMD real FFT, 2.4x faster than its
 * C double one); magnitudes, mel bands and log in double; the output is float32. */
#include "cony/mel.h"
#include "cony/attention.h" /* CONY_MEMORY_BUDGET */
#include "cony/error.h"
#include "cpu-private.h"

#include <json-glib/json-glib.h>
#include <libavutil/mem.h>
#include <libavutil/tx.h>
#include <math.h>
#include <string.h>

struct _ConyMel {
  ConyMelConfig config;
  guint n_bins; /* fft_length / 2 + 1 */

  double *window; /* window_length */
  float *matrix;  /* n_bins x n_mels, row-major (the public view, built on demand) */
  /* Per band: the non-zero bins [band_lo, band_hi) and their weights, packed. */
  guint *band_lo, *band_hi, *band_off;
  double *band_weights;

  AVTXContext *tx;
  av_tx_fn tx_fn;
  float *fft_in;           /* fft_length floats, av_malloc'ed (aligned) */
  AVComplexFloat *fft_out; /* n_bins (+ slack) */
  double *mag;             /* n_bins */
  guint mag_lo, mag_hi;    /* the bins some band reads: the magnitudes computed */

  /* Streaming state: buf[buf_off .. buf_off + buf_len) holds the samples with
   * absolute indices [buf_start, buf_start + buf_len). */
  float *buf;
  gsize buf_cap, buf_off, buf_len;
  guint64 buf_start;
  guint64 total;      /* samples pushed */
  guint64 next_frame; /* index of the next frame to pop */
  double last_power;  /* mean square of the last popped frame's hop */
};

void
cony_mel_config_init_vggish (ConyMelConfig *config)
{
  g_return_if_fail (config != NULL);
  config->sample_rate = 16000;
  config->window_length = 400;
  config->hop_length = 160;
  config->fft_length = 512;
  config->n_mels = 64;
  config->fmin = 125.0;
  config->fmax = 7500.0;
  config->log_offset = 0.01;
  config->periodic_window = TRUE;
}

static const struct {
  const char *name, *description;
  double log_offset;
} presets[] = {
  [CONY_MEL_PRESET_VGGISH] = { "vggish", "VGGish: log(mel + 0.01)", 0.01 },
  [CONY_MEL_PRESET_YAMNET] = { "yamnet", "YAMNet: log(mel + 0.001)", 0.001 },
};
G_STATIC_ASSERT (G_N_ELEMENTS (presets) == CONY_MEL_N_PRESETS);

void
cony_mel_config_init_preset (ConyMelConfig *config, ConyMelPreset preset)
{
  g_return_if_fail ((unsigned) preset < CONY_MEL_N_PRESETS);
  cony_mel_config_init_vggish (config);
  config->log_offset = presets[preset].log_offset;
}

const char *
cony_mel_preset_name (ConyMelPreset preset)
{
  return (unsigned) preset < CONY_MEL_N_PRESETS ? presets[preset].name : "unknown";
}

const char *
cony_mel_preset_description (ConyMelPreset preset)
{
  return (unsigned) preset < CONY_MEL_N_PRESETS ? presets[preset].description : "unknown";
}

gboolean
cony_mel_preset_from_name (const char *name, ConyMelPreset *preset)
{
  for (int i = 0; i < CONY_MEL_N_PRESETS; i++)
    if (g_strcmp0 (name, presets[i].name) == 0) {
      *preset = i;
      return TRUE;
    }
  return FALSE;
}

/* The settings in conymel's property order, their legacy key and where they live. */
static const struct {
  const char *name, *legacy;
  gsize offset;
  gboolean is_uint;
} settings[CONY_MEL_N_SETTINGS] = {
  { "sample-rate", "sample_rate", G_STRUCT_OFFSET (ConyMelConfig, sample_rate), TRUE },
  { "window-length", "window_samples", G_STRUCT_OFFSET (ConyMelConfig, window_length), TRUE },
  { "hop-length", "hop_samples", G_STRUCT_OFFSET (ConyMelConfig, hop_length), TRUE },
  { "fft-length", "fft", G_STRUCT_OFFSET (ConyMelConfig, fft_length), TRUE },
  { "n-mels", "n_mels", G_STRUCT_OFFSET (ConyMelConfig, n_mels), TRUE },
  { "fmin", "fmin", G_STRUCT_OFFSET (ConyMelConfig, fmin), FALSE },
  { "fmax", "fmax", G_STRUCT_OFFSET (ConyMelConfig, fmax), FALSE },
  { "log-offset", "log_offset", G_STRUCT_OFFSET (ConyMelConfig, log_offset), FALSE },
};

const char *
cony_mel_setting_name (guint setting)
{
  return setting < CONY_MEL_N_SETTINGS ? settings[setting].name : NULL;
}

double
cony_mel_config_get_setting (const ConyMelConfig *config, guint setting)
{
  g_return_val_if_fail (setting < CONY_MEL_N_SETTINGS, NAN);
  return settings[setting].is_uint ? G_STRUCT_MEMBER (guint, config, settings[setting].offset)
                                   : G_STRUCT_MEMBER (double, config, settings[setting].offset);
}

/* Sets setting @i of @config from @node: a number (an integer in [1, 2^30] for the
 * sizes). */
static gboolean
set_setting (ConyMelConfig *config, guint i, const char *key, JsonNode *node, GError **error)
{
  GType type = JSON_NODE_HOLDS_VALUE (node) ? json_node_get_value_type (node) : G_TYPE_INVALID;
  if (type != G_TYPE_INT64 && type != G_TYPE_DOUBLE) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "frontend: '%s' must be a number", key);
    return FALSE;
  }
  double v = type == G_TYPE_INT64 ? (double) json_node_get_int (node) : json_node_get_double (node);
  if (!settings[i].is_uint) {
    G_STRUCT_MEMBER (double, config, settings[i].offset) = v;
    return TRUE;
  }
  if (!(v >= 1 && v <= (double) (1u << 30)) || v != floor (v)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "frontend: '%s' = %g must be a whole number from 1 to 2^30", key, v);
    return FALSE;
  }
  G_STRUCT_MEMBER (guint, config, settings[i].offset) = (guint) v;
  return TRUE;
}

gboolean
cony_mel_config_from_frontend (const char *json, ConyMelConfig *config, char **name, GError **error)
{
  cony_mel_config_init_vggish (config);
  if (name)
    *name = g_strdup (presets[CONY_MEL_PRESET_VGGISH].name);
  if (json == NULL)
    return TRUE;
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonNode *root = json_parser_load_from_data (parser, json, -1, NULL)
      ? json_parser_get_root (parser)
      : NULL;
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "frontend: not a JSON object: %.200s",
        json);
    return FALSE;
  }
  JsonObject *o = json_node_get_object (root);
  for (guint i = 0; i < CONY_MEL_N_SETTINGS; i++) {
    const char *key = settings[i].name;
    JsonNode *node = json_object_get_member (o, key);
    if (node == NULL)
      node = json_object_get_member (o, key = settings[i].legacy);
    if (node != NULL && !set_setting (config, i, key, node, error))
      return FALSE;
  }
  JsonNode *n = json_object_get_member (o, "name");
  if (name && n && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING) {
    g_free (*name);
    *name = g_strdup (json_node_get_string (n));
  }
  if (cony_mel_config_validate (config, error))
    return TRUE;
  g_prefix_error (error, "frontend: ");
  return FALSE;
}

#define INVALID(...) \
  G_STMT_START \
  { \
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "mel config: " __VA_ARGS__); \
    return FALSE; \
  } \
  G_STMT_END

gboolean
cony_mel_config_validate (const ConyMelConfig *c, GError **error)
{
  if (c == NULL)
    INVALID ("no configuration given");
  if (c->sample_rate == 0 || c->sample_rate > 1000000)
    INVALID ("sample_rate %u out of range (1 .. 1000000)", c->sample_rate);
  if (c->window_length < 2 || c->window_length > CONY_MEL_MAX_FFT)
    INVALID ("window_length %u out of range (2 .. %u)", c->window_length, CONY_MEL_MAX_FFT);
  if (c->hop_length == 0 || c->hop_length > (1u << 24))
    INVALID ("hop_length %u out of range (1 .. 16777216)", c->hop_length);
  if (c->fft_length < 4 || c->fft_length > CONY_MEL_MAX_FFT
      || (c->fft_length & (c->fft_length - 1)) != 0)
    INVALID ("fft_length %u must be a power of two between 4 and %u (FFmpeg's FFT of 2^19 "
             "points and more is a slow O(n^2) transform: minutes per frame)",
        c->fft_length, CONY_MEL_MAX_FFT);
  if (c->fft_length < c->window_length)
    INVALID ("fft_length %u is shorter than window_length %u", c->fft_length, c->window_length);
  if (c->n_mels == 0 || c->n_mels > c->fft_length / 2 + 1)
    INVALID ("n_mels %u out of range (1 .. fft_length/2+1 = %u)", c->n_mels, c->fft_length / 2 + 1);
  if (!(c->fmin >= 0.0))
    INVALID ("fmin %g must be >= 0", c->fmin);
  if (!(c->fmin < c->fmax))
    INVALID ("fmin %g must be below fmax %g", c->fmin, c->fmax);
  if (!(c->fmax <= c->sample_rate / 2.0))
    INVALID ("fmax %g is above the Nyquist frequency %g", c->fmax, c->sample_rate / 2.0);
  if (!(c->log_offset > 0.0) || !isfinite (c->log_offset))
    INVALID ("log_offset %g must be a positive finite number", c->log_offset);
  gsize bytes = cony_mel_config_bytes (c);
  if (bytes > CONY_MEMORY_BUDGET)
    INVALID ("fft_length %u, window_length %u and n_mels %u need %" G_GSIZE_FORMAT
             " bytes (%.1f MiB), more than the budget of %" G_GSIZE_FORMAT " bytes",
        c->fft_length, c->window_length, c->n_mels, bytes, bytes / 1048576.0,
        (gsize) CONY_MEMORY_BUDGET);
  return TRUE;
}

static double
hz_to_mel (double hz)
{
  /* HTK mel scale, natural log: 1127 ln(1 + f/700). */
  return 1127.0 * log (1.0 + hz / 700.0);
}

/* The weight of mel band @i (edges @lo < @ce < @hi, in mel) at a bin at mel @m. */
static double
band_weight (double lo, double ce, double hi, double m)
{
  return MAX (0.0, MIN ((m - lo) / (ce - lo), (hi - m) / (hi - ce)));
}

/* The mel weights exactly as VGGish's mel_features builds them: band edges equally
 * spaced in HTK mel between fmin and fmax, triangles interpolated in mel at the mel
 * positions of the spectrogram bins (spaced linearly from 0 Hz to Nyquist), peak 1, no
 * normalisation, the DC bin zero. Computed in double and kept sparse: a band's non-zero
 * bins are contiguous and each bin lies in at most two bands, so this is O(bins +
 * bands) in memory and time (a dense n_bins x n_mels matrix was 34 GB at the largest
 * settings, #46.1; cony_mel_get_matrix() builds one only when asked). */
static void
build_bands (ConyMel *mel)
{
  const ConyMelConfig *c = &mel->config;
  guint nb = mel->n_bins, nm = c->n_mels;
  double nyquist = c->sample_rate / 2.0;
  double *bin_mel = g_new (double, nb);
  double *edges = g_new (double, nm + 2);
  double mlo = hz_to_mel (c->fmin), mhi = hz_to_mel (c->fmax);

  for (guint k = 0; k < nb; k++)
    bin_mel[k] = hz_to_mel (nyquist * k / (double) (nb - 1));
  for (guint i = 0; i < nm + 2; i++)
    edges[i] = mlo + (mhi - mlo) * i / (double) (nm + 1);

  mel->band_lo = g_new (guint, nm);
  mel->band_hi = g_new (guint, nm);
  mel->band_off = g_new (guint, nm);
  gsize total = 0;
  guint first = 1; /* bins below this are at or below the previous band's lower edge */
  for (guint i = 0; i < nm; i++) {
    double lo = edges[i], hi = edges[i + 2];
    while (first < nb && bin_mel[first] <= lo)
      first++;
    guint end = first;
    while (end < nb && bin_mel[end] < hi)
      end++;
    /* band_weight > 0 exactly on (lo, hi): the bins [first, end) */
    mel->band_lo[i] = end > first ? first : 0;
    mel->band_hi[i] = end > first ? end : 0;
    mel->band_off[i] = (guint) total;
    total += mel->band_hi[i] - mel->band_lo[i];
  }
  mel->band_weights = g_new (double, MAX (total, 1));
  for (guint i = 0; i < nm; i++)
    for (guint k = mel->band_lo[i]; k < mel->band_hi[i]; k++)
      mel->band_weights[mel->band_off[i] + k - mel->band_lo[i]] = band_weight (edges[i],
          edges[i + 1], edges[i + 2], bin_mel[k]);

  mel->mag_lo = nb;
  mel->mag_hi = 0;
  for (guint i = 0; i < nm; i++)
    if (mel->band_hi[i] > mel->band_lo[i]) {
      mel->mag_lo = MIN (mel->mag_lo, mel->band_lo[i]);
      mel->mag_hi = MAX (mel->mag_hi, mel->band_hi[i]);
    }
  g_free (bin_mel);
  g_free (edges);
}

gsize
cony_mel_config_bytes (const ConyMelConfig *c)
{
  gsize nb = c->fft_length / 2 + 1, wl = c->window_length;
  gsize fft = sizeof (float) * (c->fft_length + 2) + 8 * (nb + 1) + sizeof (double) * nb;
  gsize tx = 32 * (gsize) c->fft_length; /* av_tx's twiddles and scratch, generously */
  gsize bands = sizeof (double) * (2 * nb + c->n_mels) + 3 * sizeof (guint) * c->n_mels;
  gsize edges = sizeof (double) * (nb + c->n_mels + 2); /* while building the bands */
  gsize samples = sizeof (float) * MAX (2 * wl, 4096) + sizeof (double) * wl;
  return sizeof (ConyMel) + fft + tx + bands + edges + samples;
}

ConyMel *
cony_mel_new (const ConyMelConfig *config, GError **error)
{
  if (!cony_mel_config_validate (config, error))
    return NULL;

  ConyMel *mel = g_new0 (ConyMel, 1);
  mel->config = *config;
  mel->n_bins = config->fft_length / 2 + 1;

  float scale = 1.0f;
  int ret = av_tx_init (&mel->tx, &mel->tx_fn, AV_TX_FLOAT_RDFT, 0, (int) config->fft_length,
      &scale, 0);
  if (ret < 0 || mel->tx == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "mel: FFmpeg av_tx_init failed for a %u-point real FFT (error %d)", config->fft_length,
        ret);
    g_free (mel);
    return NULL;
  }
  /* Zeroed: the real FFT does not write every entry (the DC and Nyquist imaginary
   * parts are zero by definition), and they must not be garbage. */
  mel->fft_in = av_mallocz (sizeof (float) * (config->fft_length + 2));
  mel->fft_out = av_mallocz (sizeof (AVComplexFloat) * (mel->n_bins + 1));
  mel->mag = g_new (double, mel->n_bins);

  guint wl = config->window_length;
  mel->window = g_new (double, wl);
  double denom = config->periodic_window ? wl : wl - 1;
  for (guint n = 0; n < wl; n++)
    mel->window[n] = 0.5 - 0.5 * cos (2.0 * G_PI * n / denom);

  build_bands (mel);

  mel->buf_cap = MAX ((gsize) 2 * wl, 4096);
  mel->buf = g_new (float, mel->buf_cap);
  return mel;
}

void
cony_mel_free (ConyMel *mel)
{
  if (mel == NULL)
    return;
  av_tx_uninit (&mel->tx);
  av_free (mel->fft_in);
  av_free (mel->fft_out);
  g_free (mel->mag);
  g_free (mel->window);
  g_free (mel->matrix);
  g_free (mel->band_lo);
  g_free (mel->band_hi);
  g_free (mel->band_off);
  g_free (mel->band_weights);
  g_free (mel->buf);
  g_free (mel);
}

const ConyMelConfig *
cony_mel_get_config (const ConyMel *mel)
{
  g_return_val_if_fail (mel != NULL, NULL);
  return &mel->config;
}

guint
cony_mel_get_n_mels (const ConyMel *mel)
{
  g_return_val_if_fail (mel != NULL, 0);
  return mel->config.n_mels;
}

const float *
cony_mel_get_matrix (const ConyMel *mel)
{
  g_return_val_if_fail (mel != NULL, NULL);
  if (mel->matrix == NULL) { /* built on demand from the bands (a cache: not const) */
    guint nm = mel->config.n_mels;
    float *m = g_new0 (float, (gsize) mel->n_bins *nm);
    for (guint i = 0; i < nm; i++)
      for (guint k = mel->band_lo[i]; k < mel->band_hi[i]; k++)
        m[(gsize) k * nm + i] = (float) mel->band_weights[mel->band_off[i] + k - mel->band_lo[i]];
    ((ConyMel *) mel)->matrix = m;
  }
  return mel->matrix;
}

/* |X[k]| for k in [lo, hi): built for x86-64-v3 too, where sqrt runs 4 bins a time
 * (correctly rounded in every build: the same bits; libcony is built with
 * -fno-math-errno, so sqrt needs no errno branch and vectorises). */
static CONY_CLONES void
magnitudes (const AVComplexFloat *X, guint lo, guint hi, double *mag)
{
  const float *x = (const float *) (X + lo); /* re, im, re, im, ... */
  double *m = mag + lo;
  gsize n = hi > lo ? hi - lo : 0;
  for (gsize k = 0; k < n; k++)
    m[k] = (double) x[2 * k] * x[2 * k] + (double) x[2 * k + 1] * x[2 * k + 1];
  for (gsize k = 0; k < n; k++)
    m[k] = sqrt (m[k]);
}

/* Windowing, FFT, magnitude, mel, log. @frame may contain non-finite values
 * only if the caller allows it (the streaming path has already cleaned them). */
void
cony_mel_compute_frame (ConyMel *mel, const float *frame, float *out)
{
  g_return_if_fail (mel != NULL && frame != NULL && out != NULL);
  const ConyMelConfig *c = &mel->config;
  guint wl = c->window_length;
  float *in = mel->fft_in;

  for (guint n = 0; n < wl; n++)
    in[n] = (float) (frame[n] * mel->window[n]);
  memset (in + wl, 0, sizeof (float) * (c->fft_length + 2 - wl));
  mel->tx_fn (mel->tx, mel->fft_out, in, sizeof (float));

  magnitudes (mel->fft_out, mel->mag_lo, mel->mag_hi, mel->mag);

  double offset = c->log_offset;
  for (guint i = 0; i < c->n_mels; i++) {
    const double *w = mel->band_weights + mel->band_off[i];
    const double *m = mel->mag + mel->band_lo[i];
    guint len = mel->band_hi[i] - mel->band_lo[i];
    double acc = 0.0;
    for (guint k = 0; k < len; k++)
      acc += w[k] * m[k];
    out[i] = (float) log (acc + offset);
  }
}

/* Streaming ---------------------------------------------------------------- */

static guint64
keep_from (const ConyMel *mel)
{
  return mel->next_frame * mel->config.hop_length;
}

/* Makes room for @n more samples at the end of the buffer. */
static float *
buffer_append_space (ConyMel *mel, gsize n)
{
  if (mel->buf_off + mel->buf_len + n > mel->buf_cap) {
    if (mel->buf_off > 0) {
      memmove (mel->buf, mel->buf + mel->buf_off, sizeof (float) * mel->buf_len);
      mel->buf_off = 0;
    }
    if (mel->buf_len + n > mel->buf_cap) {
      gsize cap = mel->buf_cap;
      while (cap < mel->buf_len + n)
        cap *= 2;
      mel->buf = g_renew (float, mel->buf, cap);
      mel->buf_cap = cap;
    }
  }
  float *dst = mel->buf + mel->buf_off + mel->buf_len;
  mel->buf_len += n;
  return dst;
}

/* Skips incoming samples that no future frame needs (hop > window). Returns
 * how many of the next @n samples to drop. */
static gsize
incoming_skip (ConyMel *mel, gsize n)
{
  guint64 from = keep_from (mel);
  if (mel->total >= from)
    return 0;
  return (gsize) MIN ((guint64) n, from - mel->total);
}

gsize
cony_mel_push (ConyMel *mel, const float *samples, gsize n)
{
  g_return_val_if_fail (mel != NULL, 0);
  g_return_val_if_fail (samples != NULL || n == 0, 0);
  gsize skip = incoming_skip (mel, n);
  gsize replaced = 0;
  if (mel->buf_len == 0)
    mel->buf_start = mel->total + skip;
  float *dst = buffer_append_space (mel, n - skip);
  for (gsize i = skip; i < n; i++) {
    float v = samples[i];
    if (G_UNLIKELY (!isfinite (v))) {
      v = 0.0f;
      replaced++;
    }
    *dst++ = v;
  }
  for (gsize i = 0; i < skip; i++)
    if (!isfinite (samples[i]))
      replaced++;
  mel->total += n;
  return replaced;
}

void
cony_mel_push_s16 (ConyMel *mel, const gint16 *samples, gsize n)
{
  g_return_if_fail (mel != NULL);
  g_return_if_fail (samples != NULL || n == 0);
  gsize skip = incoming_skip (mel, n);
  if (mel->buf_len == 0)
    mel->buf_start = mel->total + skip;
  float *dst = buffer_append_space (mel, n - skip);
  for (gsize i = skip; i < n; i++)
    *dst++ = samples[i] * (1.0f / 32768.0f);
  mel->total += n;
}

void
cony_mel_push_silence (ConyMel *mel, gsize n)
{
  g_return_if_fail (mel != NULL);
  gsize skip = incoming_skip (mel, n);
  if (mel->buf_len == 0)
    mel->buf_start = mel->total + skip;
  float *dst = buffer_append_space (mel, n - skip);
  memset (dst, 0, sizeof (float) * (n - skip));
  mel->total += n;
}

gsize
cony_mel_frames_available (const ConyMel *mel)
{
  g_return_val_if_fail (mel != NULL, 0);
  guint64 start = keep_from (mel);
  guint64 need = start + mel->config.window_length;
  if (mel->total < need)
    return 0;
  return (gsize) ((mel->total - need) / mel->config.hop_length + 1);
}

/* Mean square of @n samples (a frame's hop: consecutive frames' hops tile the stream). */
static double
hop_power (const float *x, gsize n)
{
  double sum = 0.0;
  for (gsize i = 0; i < n; i++)
    sum += (double) x[i] * x[i];
  return n > 0 ? sum / (double) n : 0.0;
}

gboolean
cony_mel_pop_frame (ConyMel *mel, float *out)
{
  g_return_val_if_fail (mel != NULL && out != NULL, FALSE);
  if (cony_mel_frames_available (mel) == 0)
    return FALSE;
  guint64 start = keep_from (mel);
  g_assert (start >= mel->buf_start);
  gsize pos = (gsize) (start - mel->buf_start);
  g_assert (pos + mel->config.window_length <= mel->buf_len);
  cony_mel_compute_frame (mel, mel->buf + mel->buf_off + pos, out);
  mel->last_power = hop_power (mel->buf + mel->buf_off + pos,
      MIN (mel->config.hop_length, mel->config.window_length));

  mel->next_frame++;
  /* Drop the samples no later frame needs. */
  guint64 from = keep_from (mel);
  guint64 drop = MIN (from - mel->buf_start, (guint64) mel->buf_len);
  mel->buf_off += (gsize) drop;
  mel->buf_len -= (gsize) drop;
  mel->buf_start += drop;
  if (mel->buf_len == 0) {
    mel->buf_off = 0;
    mel->buf_start = MAX (from, mel->total);
  }
  return TRUE;
}

double
cony_mel_last_frame_power (const ConyMel *mel)
{
  g_return_val_if_fail (mel != NULL, 0.0);
  return mel->last_power;
}

guint64
cony_mel_get_next_frame_index (const ConyMel *mel)
{
  g_return_val_if_fail (mel != NULL, 0);
  return mel->next_frame;
}

guint64
cony_mel_get_samples_pushed (const ConyMel *mel)
{
  g_return_val_if_fail (mel != NULL, 0);
  return mel->total;
}

void
cony_mel_reset (ConyMel *mel)
{
  g_return_if_fail (mel != NULL);
  mel->buf_off = mel->buf_len = 0;
  mel->buf_start = 0;
  mel->total = 0;
  mel->next_frame = 0;
  mel->last_power = 0.0;
}

/* Whole signal ------------------------------------------------------------- */

gsize
cony_mel_frames_for_samples (const ConyMelConfig *config, gsize n_samples)
{
  g_return_val_if_fail (config != NULL && config->hop_length > 0, 0);
  if (n_samples < config->window_length)
    return 0;
  return 1 + (n_samples - config->window_length) / config->hop_length;
}

float *
cony_mel_compute (ConyMel *mel, const float *samples, gsize n_samples, gsize *n_frames)
{
  g_return_val_if_fail (mel != NULL && n_frames != NULL, NULL);
  g_return_val_if_fail (samples != NULL || n_samples == 0, NULL);
  const ConyMelConfig *c = &mel->config;
  gsize nf = cony_mel_frames_for_samples (c, n_samples);
  *n_frames = nf;
  if (nf == 0)
    return NULL;
  float *out = g_new (float, nf * c->n_mels);
  float *frame = g_new (float, c->window_length);
  for (gsize t = 0; t < nf; t++) {
    const float *src = samples + t * c->hop_length;
    gboolean clean = TRUE;
    for (guint n = 0; n < c->window_length; n++)
      if (G_UNLIKELY (!isfinite (src[n]))) {
        clean = FALSE;
        break;
      }
    if (!clean) {
      for (guint n = 0; n < c->window_length; n++)
        frame[n] = isfinite (src[n]) ? src[n] : 0.0f;
      src = frame;
    }
    cony_mel_compute_frame (mel, src, out + t * c->n_mels);
  }
  g_free (frame);
  return out;
}
