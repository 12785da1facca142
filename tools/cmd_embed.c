/* cony embed: VGGish-style embeddings of a WAV file or of log-mel frames/patches. */
#include "commands.h"

#include "cony/cnn.h"
#include "cony/mel.h"
#include "cony/npy.h"
#include "cony/wav.h"

#include <stdio.h>
#include <string.h>

#define BATCH 32

int
cony_cmd_embed (int argc, char **argv)
{
  char *model_path = NULL, *output = NULL, *pca_path = NULL, *postprocess = NULL;
  int stride = 25;
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &model_path, "model (.safetensors, torchvggish names)", "M" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "output .npy: float32 (windows, D)", "OUT.npy" },
    { "stride", 's', 0, G_OPTION_ARG_INT, &stride, "frames between window starts (default 25 = 0.25 s)", "N" },
    { "postprocess", 'p', 0, G_OPTION_ARG_STRING, &postprocess,
      "PCA + 8-bit: none (default), tf (truncate, vggish_postprocess.py), torch (round, torchvggish)", "MODE" },
    { "pca", 0, 0, G_OPTION_ARG_FILENAME, &pca_path, "PCA parameters from a separate .safetensors", "FILE" },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("IN.wav|IN.npy - CNN embeddings of 0.96 s windows");
  g_option_context_set_description (ctx,
      "IN.wav: log-mel frames are computed as by 'cony mel', then windows of the model's\n"
      "input height (96 frames) every --stride frames are embedded; T frames give\n"
      "1 + (T - 96) / stride windows (none if T < 96).\n"
      "IN.npy: float32 log-mel frames (T, 64), windowed the same way, or ready patches\n"
      "(N, 96, 64) or (N, 1, 96, 64), embedded as they are (--stride is ignored).\n");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  g_autofree char *m_path = model_path, *o_path = output, *p_path = pca_path, *pp = postprocess;
  if (argc != 2 || model_path == NULL || output == NULL) {
    fprintf (stderr, "usage: cony embed --model M.safetensors IN.wav|IN.npy -o OUT.npy "
             "[--stride N] [--postprocess none|tf|torch] [--pca FILE]\n");
    return 2;
  }
  if (stride < 1) {
    fprintf (stderr, "cony embed: --stride must be at least 1\n");
    return 2;
  }
  ConyCnnPostprocess mode = CONY_CNN_POSTPROCESS_NONE;
  if (pp == NULL || strcmp (pp, "none") == 0)
    mode = CONY_CNN_POSTPROCESS_NONE;
  else if (strcmp (pp, "tf") == 0)
    mode = CONY_CNN_POSTPROCESS_TF;
  else if (strcmp (pp, "torch") == 0)
    mode = CONY_CNN_POSTPROCESS_TORCH;
  else {
    fprintf (stderr, "cony embed: --postprocess must be none, tf or torch, not '%s'\n", pp);
    return 2;
  }

  g_autoptr (ConyCnn) cnn = cony_cnn_load (m_path, &error);
  if (cnn == NULL)
    return cony_cmd_fail (error);
  if (p_path && !cony_cnn_load_pca (cnn, p_path, &error))
    return cony_cmd_fail (error);
  if (mode != CONY_CNN_POSTPROCESS_NONE && !cony_cnn_has_pca (cnn)) {
    fprintf (stderr, "cony embed: %s has no pca_eigen_vectors/pca_means; give --pca FILE or "
             "--postprocess none\n", m_path);
    return 1;
  }
  guint H = cony_cnn_get_input_height (cnn), W = cony_cnn_get_input_width (cnn);
  guint C = cony_cnn_get_input_channels (cnn), D = cony_cnn_get_output_size (cnn);
  gsize in_size = cony_cnn_get_input_size (cnn);
  const char *in_path = argv[1];

  /* frames: (T, W) rows to window; or patches: n ready examples. */
  g_autofree float *frames = NULL;
  gsize T = 0;
  g_autoptr (ConyNpyArray) arr = NULL;
  const float *patches = NULL;
  gsize n_windows = 0;
  if (g_str_has_suffix (in_path, ".npy") || g_str_has_suffix (in_path, ".NPY")) {
    arr = cony_npy_load (in_path, &error);
    if (arr == NULL)
      return cony_cmd_fail (error);
    if (arr->ndim == 2 && C == 1 && arr->shape[1] == W) {
      T = arr->shape[0];
      frames = g_steal_pointer (&arr->data);
    } else if ((arr->ndim == 3 && C == 1 && arr->shape[1] == H && arr->shape[2] == W) ||
               (arr->ndim == 4 && arr->shape[1] == C && arr->shape[2] == H && arr->shape[3] == W &&
                C == 1)) {
      patches = arr->data;
      n_windows = arr->shape[0];
    } else {
      g_autoptr (GString) got = g_string_new ("(");
      for (int d = 0; d < arr->ndim; d++)
        g_string_append_printf (got, "%s%" G_GSIZE_FORMAT, d ? ", " : "", arr->shape[d]);
      g_string_append_c (got, ')');
      fprintf (stderr, "cony embed: %s has shape %s, expected log-mel frames (T, %u) or patches "
               "(N, %u, %u) / (N, 1, %u, %u)%s\n", in_path, got->str, W, H, W, H, W,
               C != 1 ? " (and a 1-channel model)" : "");
      return 1;
    }
  } else {
    if (C != 1) {
      fprintf (stderr, "cony embed: %s takes %u-channel input; WAV input needs a 1-channel "
               "log-mel model\n", m_path, C);
      return 1;
    }
    ConyMelConfig config;
    cony_mel_config_init_vggish (&config);
    if (W != config.n_mels) {
      fprintf (stderr, "cony embed: %s takes %u-wide patches but the log-mel has %u bands\n", m_path,
               W, config.n_mels);
      return 1;
    }
    gsize n = 0;
    g_autofree float *x = cony_wav_load_mono (in_path, config.sample_rate, &n, &error);
    if (x == NULL)
      return cony_cmd_fail (error);
    g_autoptr (ConyMel) mel = cony_mel_new (&config, &error);
    if (mel == NULL)
      return cony_cmd_fail (error);
    frames = cony_mel_compute (mel, x, n, &T);
  }
  if (patches == NULL)
    n_windows = T >= H ? 1 + (T - H) / (gsize) stride : 0;
  if (n_windows == 0)
    fprintf (stderr, "cony embed: %s: %" G_GSIZE_FORMAT " frames is less than one %u-frame window; "
             "writing 0 embeddings\n", in_path, T, H);

  g_autofree float *out = g_new (float, MAX (n_windows, 1) * D);
  g_autofree float *batch = patches ? NULL : g_new (float, BATCH * in_size);
  for (gsize start = 0; start < n_windows; start += BATCH) {
    gsize m = MIN ((gsize) BATCH, n_windows - start);
    const float *src;
    if (patches) {
      src = patches + start * in_size;
    } else {
      for (gsize k = 0; k < m; k++)
        memcpy (batch + k * in_size, frames + (start + k) * (gsize) stride * W, in_size * sizeof (float));
      src = batch;
    }
    cony_cnn_forward_batch (cnn, src, m, out + start * D);
  }
  if (!cony_cnn_postprocess (cnn, mode, out, n_windows, out, &error))
    return cony_cmd_fail (error);
  gsize shape[2] = { n_windows, D };
  if (!cony_npy_save (o_path, out, 2, shape, &error))
    return cony_cmd_fail (error);
  return 0;
}
