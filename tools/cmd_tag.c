/* cony tag: the top-k labels of a CNN with a scoring head (YAMNet, ImageNet
 * MobileNets) per window or image. */
#include "commands.h"
#include "cnn_input.h"

#include <stdio.h>
#include <string.h>

/* Indices of the @k largest of @x (n values), largest first. */
static void
top_k (const float *x, guint n, guint k, guint *idx)
{
  for (guint j = 0; j < k; j++) {
    guint best = G_MAXUINT;
    for (guint i = 0; i < n; i++) {
      gboolean taken = FALSE;
      for (guint t = 0; t < j && !taken; t++)
        taken = idx[t] == i;
      if (!taken && (best == G_MAXUINT || x[i] > x[best]))
        best = i;
    }
    idx[j] = best;
  }
}

int
cony_cmd_tag (int argc, char **argv)
{
  char *model_path = NULL, *precision = NULL;
  int stride = 48, k = 5;
  gint64 max_pixels = 0;
  g_autofree char *crop = NULL;
  gboolean drop_tail = FALSE;
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &model_path,
        "CNN model with a scoring head and labels", "M" },
    { "top-k", 'k', 0, G_OPTION_ARG_INT, &k, "labels per window (default 5)", "K" },
    { "drop-tail", 0, 0, G_OPTION_ARG_NONE, &drop_tail,
        "drop frames no full window covers (VGGish) instead of one more window padded with "
        "silence (YAMNet; conyvggish pad-tail)",
        NULL },
    { "stride", 's', 0, G_OPTION_ARG_INT, &stride,
        "frames between window starts (default 48 = 0.48 s)", "N" },
    { "crop", 'c', 0, G_OPTION_ARG_STRING, &crop,
        "images: center (default: the largest centred region with the model's aspect ratio) "
        "or none (the whole image, stretched)",
        "MODE" },
    CONY_CNN_PRECISION_OPTION (precision),
    CONY_CNN_MAX_PIXELS_OPTION (max_pixels),
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr (GOptionContext)
      ctx = g_option_context_new ("AUDIO|IN.npy|IMAGE - top-k labels per window or image");
  g_option_context_set_description (ctx,
      "Prints one line per window: its index, start time (audio and log-mel frames) and the\n"
      "k highest scores of the model's last layer with their labels (the model file's\n"
      "`labels` metadata; #INDEX where it has none). Input as for 'cony embed',\n"
      "recognised by its content, not its name.\n"
      "IMAGE (PNG, JPEG, BMP, GIF; other types GStreamer decodes; an image model such as\n"
      "models/imagenet/mobilenet_v2.safetensors): decoded by GStreamer, cropped (--crop)\n"
      "and area-averaged to the model's input size (used as it is when already that\n"
      "size); one line, index 0. Refused (exit 1) when its header claims more than\n"
      "--max-pixels or the file is truncated; a warning when it is under half the\n"
      "model's input size.\n");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  g_autofree char *m_path = model_path, *prec = precision;
  if (argc != 2 || model_path == NULL) {
    fprintf (stderr,
        "usage: cony tag --model M.safetensors AUDIO|IN.npy|IMAGE [--top-k K] [--stride N] "
        "[--crop center|none] [--precision auto|float|int8] [--max-pixels N]\n");
    return 2;
  }
  if (stride < 1 || k < 1) {
    fprintf (stderr, "cony tag: --stride and --top-k must be at least 1\n");
    return 2;
  }
  if (crop != NULL && strcmp (crop, "center") != 0 && strcmp (crop, "none") != 0) {
    fprintf (stderr, "cony tag: --crop %s: expected center or none\n", crop);
    return 2;
  }
  g_autoptr (ConyCnn) cnn = cony_cnn_load (m_path, &error);
  if (cnn == NULL || !cony_cnn_input_set_precision (cnn, prec, &error))
    return cony_cmd_fail (error);
  if (!cony_cnn_has_scoring_head (cnn)) {
    /* its outputs are an embedding: printed as scores they would mean nothing */
    fprintf (stderr,
        "cony tag: %s has no scoring head (its last layer is a %u-d embedding: no sigmoid, no "
        "labels); tag with a classifier CNN such as models/yamnet/yamnet.safetensors, or use "
        "'cony embed' for embeddings\n",
        m_path, cony_cnn_get_output_size (cnn));
    return 1;
  }
  guint D = cony_cnn_get_output_size (cnn), n_labels = 0;
  const char *const *labels = cony_cnn_get_labels (cnn, &n_labels);
  guint kk = MIN ((guint) k, D);
  ConyCnnInput in = { .crop = crop && strcmp (crop, "none") == 0 ? CONY_IMAGE_CROP_NONE
                                                                 : CONY_IMAGE_CROP_CENTER };
  if (!cony_cnn_input_set_max_pixels (&in, max_pixels, &error))
    return cony_cmd_fail (error);
  if (!cony_cnn_input_read (&in, cnn, argv[1], (guint) stride, !drop_tail, &error)) {
    g_prefix_error (&error, "%s: ", m_path);
    return cony_cmd_fail (error);
  }
  if (in.n_windows == 0)
    fprintf (stderr, "cony tag: %s: %" G_GSIZE_FORMAT " frames is less than one %u-frame window\n",
        argv[1], in.n_frames, cony_cnn_get_input_height (cnn));
  g_autofree float *out = g_new (float, MAX (in.n_windows, 1) * D);
  cony_cnn_input_run (&in, cnn, out);
  g_autofree guint *idx = g_new (guint, kk);
  for (gsize w = 0; w < in.n_windows; w++) {
    const float *s = out + w * D;
    top_k (s, D, kk, idx);
    printf ("%" G_GSIZE_FORMAT, w);
    if (in.frame_seconds > 0 || in.frames != NULL)
      printf ("\t%.2f s",
          w * (double) in.stride * (in.frame_seconds > 0 ? in.frame_seconds : 0.01));
    for (guint j = 0; j < kk; j++) {
      if (labels)
        printf ("\t%s %.3f", labels[idx[j]], s[idx[j]]);
      else
        printf ("\t#%u %.3f", idx[j], s[idx[j]]);
    }
    printf ("\n");
  }
  cony_cnn_input_clear (&in);
  return 0;
}
