/* Input windows for the CNN commands (see cnn_input.h). */
#include "cnn_input.h"
#include "cony/cnn-continual.h"
#include "media_file.h"

#include "cony/error.h"
#include "cony/image.h"
#include "cony/mediaprobe.h"
#include "cony/mel.h"
#include "cony/wav.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define BATCH 32

gboolean
cony_cnn_mel_config (ConyCnn *cnn, ConyMelConfig *config, GError **error)
{
  return cony_mel_config_from_frontend (cony_cnn_get_metadata (cnn, "frontend"), config, NULL,
      error);
}

/* A picture much smaller than the model's input is upscaled into a blur whose label
 * looks as confident as any other: say so. */
static void
warn_if_tiny (const char *path, guint w, guint h, guint W, guint H)
{
  if (w < W / 2 || h < H / 2)
    fprintf (stderr,
        "cony: warning: %s is %u x %u pixels, less than half the model's %u x %u input: "
        "upscaled that far, its label is unreliable\n",
        path, w, h, W, H);
}

/* An image file as one example: centre-cropped and resized to the model's input
 * (include/cony/image.h; as it is when already that size). */
static gboolean
read_image (ConyCnnInput *in, ConyCnn *cnn, const char *path, GError **error)
{
  guint H = cony_cnn_get_input_height (cnn), W = cony_cnn_get_input_width (cnn);
  guint C = cony_cnn_get_input_channels (cnn), w, h;
  gsize stride;
  if ((C != 3 && C != 1) || cony_cnn_get_metadata (cnn, "frontend") != NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s is an image; the model is not an image model (it takes %u-channel input%s)", path, C,
        C == 1 ? " and declares a log-mel frontend" : "");
    return FALSE;
  }
  guint64 max_pixels = in->max_pixels ? in->max_pixels : CONY_IMAGE_MAX_PIXELS_DEFAULT;
  g_autofree guint8 *pixels = cony_image_file_load (path, C, max_pixels, &w, &h, &stride, error);
  if (pixels == NULL)
    return FALSE;
  warn_if_tiny (path, w, h, W, H);
  ConyNpyArray *arr = g_new0 (ConyNpyArray, 1);
  arr->ndim = 4;
  arr->shape[0] = 1;
  arr->shape[1] = H;
  arr->shape[2] = W;
  arr->shape[3] = C;
  arr->data = g_new (float, (gsize) H *W *C);
  cony_image_resize (pixels, w, h, stride, C, in->crop, W, H, arr->data, NULL);
  in->patches = arr;
  in->n_windows = 1;
  return TRUE;
}

/* Audio samples at @rate: WAV through libcony's reader (as conymel reads it), any
 * other format through GStreamer's decoders. */
static float *
read_audio (const char *path, ConyMediaKind kind, guint rate, gsize *n, GError **error)
{
  if (kind == CONY_MEDIA_KIND_WAV)
    return cony_wav_load_mono (path, rate, n, error);
  return cony_audio_file_load_mono (path, rate, n, error);
}

/* YAMNet's padding (as conyvggish pad-tail): frames that no full window covers (all of
 * them when there are fewer than @H) get one more window, completed with @silence
 * frames, as YAMNet pads its waveform with zeros. */
static void
pad_tail (ConyCnnInput *in, guint H, guint W, float silence)
{
  gsize n = in->n_frames, s = in->stride, full = n >= H ? 1 + (n - H) / s : 0;
  gsize covered = full == 0 ? 0 : MAX (full * s, (full - 1) * s + H);
  if (n <= covered)
    return;
  gsize need = full * s + H;
  in->frames = g_renew (float, in->frames, need *W);
  for (gsize i = n * W; i < need * W; i++)
    in->frames[i] = silence;
  in->n_frames = need;
  in->n_padded = need - n;
  in->n_windows = full + 1;
}

gboolean
cony_cnn_input_read (ConyCnnInput *in, ConyCnn *cnn, const char *path, guint stride, gboolean pad,
    GError **error)
{
  ConyImageCrop crop = in->crop;
  guint64 max_pixels = in->max_pixels;
  memset (in, 0, sizeof *in);
  in->stride = stride;
  in->crop = crop;
  in->max_pixels = max_pixels;
  guint H = cony_cnn_get_input_height (cnn), W = cony_cnn_get_input_width (cnn);
  guint C = cony_cnn_get_input_channels (cnn);
  ConyMediaKind kind;
  g_autofree char *type = NULL;
  if (!cony_media_file_sniff (path, &kind, &type, error))
    return FALSE;
  if (kind == CONY_MEDIA_KIND_IMAGE)
    return read_image (in, cnn, path, error);
  ConyMelConfig config;
  if (kind == CONY_MEDIA_KIND_NPY) {
    g_autoptr (ConyNpyArray) arr = cony_npy_load (path, error);
    if (arr == NULL)
      return FALSE;
    if (arr->ndim == 2 && C == 1 && arr->shape[1] == W) {
      in->n_frames = arr->shape[0];
      in->frames = g_steal_pointer (&arr->data);
    } else if ((arr->ndim == 3 && C == 1 && arr->shape[1] == H && arr->shape[2] == W)
        || (arr->ndim == 4 && arr->shape[1] == C && arr->shape[2] == H && arr->shape[3] == W
            && C == 1)
        || (arr->ndim == 4 && arr->shape[1] == H && arr->shape[2] == W && arr->shape[3] == C)) {
      in->n_windows = arr->shape[0];
      in->patches = g_steal_pointer (&arr);
      return TRUE;
    } else {
      g_autoptr (GString) got = g_string_new ("(");
      for (int d = 0; d < arr->ndim; d++)
        g_string_append_printf (got, "%s%" G_GSIZE_FORMAT, d ? ", " : "", arr->shape[d]);
      g_string_append_c (got, ')');
      g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
          "%s has shape %s, expected log-mel frames (T, %u) or patches (N, %u, %u) / "
          "(N, 1, %u, %u)%s, or examples (N, %u, %u, %u) in HWC order",
          path, got->str, W, H, W, H, W, C != 1 ? " (and a 1-channel model)" : "", H, W, C);
      return FALSE;
    }
  } else {
    if (C != 1) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s is audio (%s); the model takes %u-channel input: audio needs a 1-channel log-mel "
          "model",
          path, type, C);
      return FALSE;
    }
    if (!cony_cnn_mel_config (cnn, &config, error))
      return FALSE;
    if (W != config.n_mels) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
          "the model takes %u-wide patches but its log-mel has %u bands", W, config.n_mels);
      return FALSE;
    }
    gsize n = 0;
    g_autofree float *x = read_audio (path, kind, config.sample_rate, &n, error);
    if (x == NULL)
      return FALSE;
    g_autoptr (ConyMel) mel = cony_mel_new (&config, error);
    if (mel == NULL)
      return FALSE;
    in->frames = cony_mel_compute (mel, x, n, &in->n_frames);
    in->frame_seconds = (double) config.hop_length / config.sample_rate;
  }
  in->n_windows = in->n_frames >= H ? 1 + (in->n_frames - H) / stride : 0;
  /* (the silence of the model's front end: log of its log offset) */
  if (pad && in->n_frames > 0) {
    if (!cony_cnn_mel_config (cnn, &config, error))
      return FALSE;
    pad_tail (in, H, W, (float) log (config.log_offset));
  }
  return TRUE;
}

void
cony_cnn_input_run (const ConyCnnInput *in, ConyCnn *cnn, float *out)
{
  gsize in_size = cony_cnn_get_input_size (cnn), D = cony_cnn_get_output_size (cnn);
  guint W = cony_cnn_get_input_width (cnn);
  g_autofree float *batch = in->patches ? NULL : g_new (float, BATCH *in_size);
  for (gsize start = 0; start < in->n_windows; start += BATCH) {
    gsize m = MIN ((gsize) BATCH, in->n_windows - start);
    const float *src;
    if (in->patches) {
      src = in->patches->data + start * in_size;
    } else {
      for (gsize k = 0; k < m; k++)
        memcpy (batch + k * in_size, in->frames + (start + k) * (gsize) in->stride * W,
            in_size * sizeof (float));
      src = batch;
    }
    cony_cnn_forward_batch (cnn, src, m, out + start * D);
  }
}

void
cony_cnn_input_clear (ConyCnnInput *in)
{
  g_clear_pointer (&in->frames, g_free);
  g_clear_pointer (&in->patches, cony_npy_array_free);
}

gboolean
cony_cnn_input_set_precision (ConyCnn *cnn, const char *name, GError **error)
{
  ConyCnnPrecision p = CONY_CNN_PRECISION_AUTO;
  if (name != NULL && !cony_cnn_precision_from_string (name, &p)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "--precision must be auto, float or int8, not '%s'", name);
    return FALSE;
  }
  return cony_cnn_set_precision (cnn, p, error);
}

gboolean
cony_cnn_input_set_max_pixels (ConyCnnInput *in, gint64 value, GError **error)
{
  if (value < 0 || (guint64) value > CONY_IMAGE_MAX_PIXELS_LIMIT) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "--max-pixels must be between 1 and %" G_GUINT64_FORMAT
        " (0: the default), not %" G_GINT64_FORMAT,
        CONY_IMAGE_MAX_PIXELS_LIMIT, value);
    return FALSE;
  }
  in->max_pixels = (guint64) value;
  return TRUE;
}

gboolean
cony_cnn_input_run_continual (const ConyCnnInput *in, ConyCnn *cnn, float *out, GError **error)
{
  if (in->frames == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "--mode continual takes log-mel frames (a WAV file or a (T, %u) .npy), not patches",
        cony_cnn_get_input_width (cnn));
    return FALSE;
  }
  ConyMelConfig config;
  if (!cony_cnn_mel_config (cnn, &config, error))
    return FALSE;
  g_autoptr (ConyCnnContinual) c = cony_cnn_continual_new (cnn, in->stride, error);
  if (c == NULL)
    return FALSE;
  ConyCnnContinualGeometry g;
  cony_cnn_continual_get_geometry (c, &g);
  guint W = cony_cnn_get_input_width (cnn), D = cony_cnn_get_output_size (cnn);
  /* The frames, then silence (the front end's log offset) until the windows' tokens are
   * out: past the end, their lookahead reads silence (as conyvggish mode=continual at
   * EOS). Whole blocks of the time stride, as the element pushes them. */
  g_autofree float *block = g_new (float, (gsize) g.time_stride *W);
  g_autofree float *tokens = g_new (float, cony_cnn_continual_max_tokens (c, g.time_stride) * D);
  gsize made = 0;
  for (gsize at = 0; made < in->n_windows; at += g.time_stride) {
    for (gsize f = 0; f < g.time_stride; f++)
      for (guint k = 0; k < W; k++)
        block[f * W + k] = at + f < in->n_frames ? in->frames[(at + f) * W + k]
                                                 : (float) log (config.log_offset);
    gsize n = cony_cnn_continual_push (c, block, g.time_stride, tokens);
    n = MIN (n, in->n_windows - made);
    memcpy (out + made * D, tokens, n * D * sizeof (float));
    made += n;
  }
  return TRUE;
}
