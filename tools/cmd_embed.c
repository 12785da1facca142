/* cony embed: CNN embeddings or scores (VGG-style or MobileNet) of a WAV file or of
 * log-mel frames/patches. */
#include "commands.h"
#include "cnn_input.h"

#include "cony/cnn-continual.h"
#include "cony/cnn.h"
#include "cony/error.h"
#include "cony/npy.h"

#include <stdio.h>
#include <string.h>

/* --mode continual: the stride the time stride when not given. */
static gboolean
embed_continual_setup (ConyCnn *cnn, int *stride, GError **error)
{
  ConyCnnContinualGeometry g;
  if (!cony_cnn_continual_geometry (cnn, *stride > 0 ? (guint) *stride : 0, &g, error))
    return FALSE;
  if (*stride == -1)
    *stride = (int) g.time_stride;
  return TRUE;
}

typedef struct {
  int stride;
  gboolean continual, drop_tail;
  gint64 max_pixels;
  ConyCnnPostprocess postprocess;
} EmbedOptions;

/* One input through the loaded network into OUT.npy. */
static gboolean
embed_one (ConyCnn *cnn, const char *m_path, const EmbedOptions *o, const char *in_path,
    const char *o_path, GError **error)
{
  guint H = cony_cnn_get_input_height (cnn), D = cony_cnn_get_output_size (cnn);
  ConyCnnInput in = { .crop = CONY_IMAGE_CROP_CENTER };
  if (!cony_cnn_input_set_max_pixels (&in, o->max_pixels, error))
    return FALSE;
  if (!cony_cnn_input_read (&in, cnn, in_path, (guint) o->stride, !o->drop_tail, error)) {
    g_prefix_error (error, "%s: ", m_path);
    return FALSE;
  }
  if (in.n_windows == 0)
    fprintf (stderr,
        "cony embed: %s: %" G_GSIZE_FORMAT " frames is less than one %u-frame window; "
        "writing 0 embeddings\n",
        in_path, in.n_frames, H);

  g_autofree float *out = g_new (float, MAX (in.n_windows, 1) * D);
  if (!o->continual)
    cony_cnn_input_run (&in, cnn, out);
  else if (!cony_cnn_input_run_continual (&in, cnn, out, error)) {
    g_prefix_error (error, "%s: ", m_path);
    cony_cnn_input_clear (&in);
    return FALSE;
  }
  gsize n_windows = in.n_windows;
  cony_cnn_input_clear (&in);
  if (!cony_cnn_postprocess (cnn, o->postprocess, out, n_windows, out, error))
    return FALSE;
  gsize shape[2] = { n_windows, D };
  return cony_npy_save (o_path, out, 2, shape, error);
}

/* --list FILE: lines "INPUT<TAB>OUT.npy", each embedded as one call would, the network
 * loaded once (a data set's thousands of short clips cost mostly start-up otherwise). */
static gboolean
embed_list (ConyCnn *cnn, const char *m_path, const EmbedOptions *o, const char *list,
    GError **error)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents (list, &text, NULL, error))
    return FALSE;
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    if (lines[i][0] == '\0')
      continue;
    g_auto (GStrv) f = g_strsplit (lines[i], "\t", -1);
    if (g_strv_length (f) != 2) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s:%u: expected INPUT<TAB>OUT.npy", list,
          i + 1);
      return FALSE;
    }
    if (!embed_one (cnn, m_path, o, f[0], f[1], error))
      return FALSE;
  }
  return TRUE;
}

int
cony_cmd_embed (int argc, char **argv)
{
  char *model_path = NULL, *output = NULL, *pca_path = NULL, *postprocess = NULL;
  char *precision = NULL, *cnn_mode = NULL, *list = NULL;
  gint64 max_pixels = 0;
  int stride = -1; /* not given: 25, or the time stride with --mode continual */
  gboolean embedding = FALSE, drop_tail = FALSE;
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &model_path,
        "CNN model (.safetensors: VGG-style or MobileNet-v1)", "M" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "output .npy: float32 (windows, D)",
        "OUT.npy" },
    { "stride", 's', 0, G_OPTION_ARG_INT, &stride,
        "frames between window starts (default 25 = 0.25 s; --mode continual: the network's "
        "time stride, 32 for YAMNet, and a multiple of it)",
        "N" },
    { "mode", 0, 0, G_OPTION_ARG_STRING, &cnn_mode,
        "window (default: the CNN on each window) or continual (every frame through the CNN "
        "once; docs/continual-cnn.md)",
        "MODE" },
    { "postprocess", 'p', 0, G_OPTION_ARG_STRING, &postprocess,
        "PCA + 8-bit: none (default), tf (truncate, vggish_postprocess.py), torch (round, torchvggish)",
        "MODE" },
    { "pca", 0, 0, G_OPTION_ARG_FILENAME, &pca_path, "PCA parameters from a separate .safetensors",
        "FILE" },
    { "drop-tail", 0, 0, G_OPTION_ARG_NONE, &drop_tail,
        "drop frames no full window covers (VGGish) instead of one more window padded with "
        "silence (YAMNet; conyvggish pad-tail)",
        NULL },
    { "embedding", 'e', 0, G_OPTION_ARG_NONE, &embedding,
        "the pooled embedding before the network's FC head (MobileNet/YAMNet: 1024-d) instead of "
        "its last layer (VGGish: the embedding; YAMNet: 521 scores)",
        NULL },
    { "list", 0, 0, G_OPTION_ARG_FILENAME, &list,
        "embed many inputs with the network loaded once: lines INPUT<TAB>OUT.npy (instead "
        "of AUDIO and -o)",
        "FILE" },
    CONY_CNN_PRECISION_OPTION (precision),
    CONY_CNN_MAX_PIXELS_OPTION (max_pixels),
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr (GOptionContext)
      ctx = g_option_context_new ("AUDIO|IN.npy|IMAGE - CNN embeddings of 0.96 s windows");
  g_option_context_set_description (ctx,
      "Inputs are recognised by their content, not their names. AUDIO: WAV, or any format\n"
      "GStreamer decodes (OGG, FLAC, MP3, ...; downmixed and resampled to the model's rate;\n"
      "a truncated file gives a warning and what it holds). Log-mel frames are computed as\n"
      "by 'cony mel' (with the model's frontend\n"
      "metadata where it has one, e.g. YAMNet's log offset 0.001), then windows of the model's\n"
      "input height (96 frames) every --stride frames are embedded; T frames give\n"
      "1 + ceil((T - 96) / stride) windows (1 if 0 < T < 96): the frames no full window\n"
      "covers get one more, padded with silent frames as YAMNet pads (conyvggish pad-tail);\n"
      "--drop-tail: 1 + (T - 96) / stride (none if T < 96), as VGGish.\n"
      "IN.npy: float32 log-mel frames (T, 64), windowed the same way, or ready patches\n"
      "(N, 96, 64) or (N, 1, 96, 64), embedded as they are (--stride is ignored).\n"
      "IMAGE: one example for an image model, as in 'cony tag'.\n"
      "--mode continual: the same windows' tokens from the continual CNN (frames only; every\n"
      "frame through the network once; time padding only at the start; silence past the end;\n"
      "docs/continual-cnn.md), as conyvggish mode=continual.\n");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  g_autofree char *m_path = model_path, *o_path = output, *p_path = pca_path, *pp = postprocess;
  g_autofree char *prec = precision, *cmode = cnn_mode, *l_path = list;
  if (model_path == NULL || (list == NULL ? argc != 2 || output == NULL : argc != 1)) {
    fprintf (stderr,
        "usage: cony embed --model M.safetensors AUDIO|IN.npy|IMAGE -o OUT.npy "
        "[--stride N] [--postprocess none|tf|torch] [--pca FILE] [--embedding] "
        "[--precision auto|float|int8] [--drop-tail] [--max-pixels N] [--mode window|continual]\n"
        "       cony embed --model M.safetensors --list FILE [options]\n");
    return 2;
  }
  if (stride == 0 || stride < -1) {
    fprintf (stderr, "cony embed: --stride must be at least 1\n");
    return 2;
  }
  gboolean continual = cmode != NULL && strcmp (cmode, "continual") == 0;
  if (cmode != NULL && !continual && strcmp (cmode, "window") != 0) {
    fprintf (stderr, "cony embed: --mode must be window or continual, not '%s'\n", cmode);
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
  if (!cony_cnn_input_set_precision (cnn, prec, &error))
    return cony_cmd_fail (error);
  if (p_path && !cony_cnn_load_pca (cnn, p_path, &error))
    return cony_cmd_fail (error);
  if (mode != CONY_CNN_POSTPROCESS_NONE && !cony_cnn_has_pca (cnn)) {
    fprintf (stderr,
        "cony embed: %s has no pca_eigen_vectors/pca_means; give --pca FILE or "
        "--postprocess none\n",
        m_path);
    return 1;
  }
  if (continual && !embed_continual_setup (cnn, &stride, &error))
    return cony_cmd_fail (error);
  if (stride == -1)
    stride = 25;
  if (embedding && !cony_cnn_set_output (cnn, CONY_CNN_OUTPUT_EMBEDDING, &error))
    return cony_cmd_fail (error);
  if (embedding && mode != CONY_CNN_POSTPROCESS_NONE) {
    fprintf (stderr, "cony embed: --postprocess applies to the last layer, not to --embedding\n");
    return 2;
  }
  EmbedOptions o = { stride, continual, drop_tail, max_pixels, mode };
  gboolean ok = l_path != NULL ? embed_list (cnn, m_path, &o, l_path, &error)
                               : embed_one (cnn, m_path, &o, argv[1], o_path, &error);
  if (!ok)
    return cony_cmd_fail (error);
  return 0;
}
