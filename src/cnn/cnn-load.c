/* CNN engine: model files and random networks (see include/cony/cnn.h). The common
 * metadata (input size, normalisation) is read here; the layers by the loader of the
 * file's `network` kind (cnn-vgg.c, cnn-mobilenet.c). */
#include "cnn-private.h"
#include "cony/error.h"
#include "cony/safetensors.h"

#include <string.h>

/* The network kinds. Random layouts: MobileNet words (v2's include v1's) or VGG widths,
 * so the VGG row, which takes any layout, comes last among those with a builder. */
static const CnnNetwork networks[] = {
  { "mobilenet_v1", "MobileNet-v1", FALSE, cnn_mobilenet_v1_load, NULL, NULL },
  { "mobilenet_v2", "MobileNet-v2", FALSE, cnn_mobilenet_v2_load, cnn_mobilenet_is_layout,
      cnn_mobilenet_random },
  { NULL, "VGG-style", TRUE, cnn_vgg_load, NULL, cnn_vgg_random },
};

/* input_* sizes, final_relu, center_height and the input normalisation. */
static gboolean
read_common (CnnWeights *cnn, const ConySafetensors *st, GError **error)
{
  if (!cnn_meta_uint (st, "input_height", 96, &cnn->in_h, error)
      || !cnn_meta_uint (st, "input_width", 64, &cnn->in_w, error)
      || !cnn_meta_uint (st, "input_channels", 1, &cnn->in_c, error)
      || !cnn_meta_bool (st, "final_relu", FALSE, &cnn->final_relu, error)
      || !cnn_meta_bool (st, "center_height", FALSE, &cnn->center_height, error))
    return FALSE;
  if (!cnn_meta_channels (st, "input_mean", cnn->in_c, FALSE, &cnn->in_mean, error)
      || !cnn_meta_channels (st, "input_std", cnn->in_c, TRUE, &cnn->in_std, error))
    return FALSE;
  if (cnn->in_mean != NULL || cnn->in_std != NULL) {
    /* One declared, the other defaults to 0 / 1. */
    if (cnn->in_mean == NULL)
      cnn->in_mean = g_new0 (float, cnn->in_c);
    if (cnn->in_std == NULL) {
      cnn->in_std = g_new (float, cnn->in_c);
      for (guint i = 0; i < cnn->in_c; i++)
        cnn->in_std[i] = 1.0f;
    }
  }
  return TRUE;
}

CnnWeights *
cnn_weights_load (const char *path, GError **error)
{
  g_autoptr (ConySafetensors) st = cony_safetensors_open (path, error);
  if (st == NULL)
    return NULL;
  g_autoptr (CnnWeights) cnn = cnn_weights_new ();
  cnn->source = g_strdup (path);
  if (!read_common (cnn, st, error))
    return NULL;
  const char *net = cony_safetensors_metadata (st, "network");
  guint k = 0;
  while (k < G_N_ELEMENTS (networks) && g_strcmp0 (net, networks[k].network) != 0)
    k++;
  if (k == G_N_ELEMENTS (networks)) {
    g_autoptr (GString) known = g_string_new (NULL);
    for (guint i = 0; i < G_N_ELEMENTS (networks); i++)
      if (networks[i].network != NULL)
        g_string_append_printf (known, "%s\"%s\"", known->len ? ", " : "", networks[i].network);
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: metadata network = \"%s\", expected one of %s (or none for a VGG-style network)", path,
        net, known->str);
    return NULL;
  }
  cnn->network = &networks[k];
  if (!networks[k].load (cnn, st, error) || !cnn_read_labels_and_metadata (cnn, st, error))
    return NULL;
  return g_steal_pointer (&cnn);
}

CnnWeights *
cnn_weights_random (const char *layout, guint input_height, guint input_width, guint input_channels,
    guint32 seed, GError **error)
{
  if (input_height == 0 || input_width == 0 || input_channels == 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "random CNN: input size %ux%ux%u is empty",
        input_height, input_width, input_channels);
    return NULL;
  }
  g_autoptr (CnnWeights) cnn = cnn_weights_new ();
  cnn->source = g_strdup_printf ("random CNN \"%s\"", layout);
  cnn->in_h = input_height;
  cnn->in_w = input_width;
  cnn->in_c = input_channels;
  guint k = 0;
  while (networks[k].random == NULL
      || (networks[k].is_layout != NULL && !networks[k].is_layout (layout)))
    k++; /* the last row takes any layout */
  cnn->network = &networks[k];
  return networks[k].random (cnn, layout, seed, error) ? g_steal_pointer (&cnn) : NULL;
}

guint
cony_cnn_n_networks (void)
{
  return G_N_ELEMENTS (networks);
}

const char *
cony_cnn_network_name (guint i)
{
  return i < G_N_ELEMENTS (networks) ? networks[i].display_name : NULL;
}

const char *
cony_cnn_network_metadata (guint i)
{
  return i < G_N_ELEMENTS (networks) ? networks[i].network : NULL;
}
