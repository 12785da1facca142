/* CNN engine: the loaders of MobileNet files (network = "mobilenet_v1" and
 * "mobilenet_v2"; see include/cony/cnn.h), and random MobileNet layouts. */
#include "cnn-private.h"
#include "cony/error.h"
#include "cony/safetensors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Builds the layers of a MobileNet from its layer words (the `layers` metadata;
 * for random networks each conv3x3/conv1x1/fc word carries its width, "conv1x1:64").
 * Tensors of a file that no layer reads are refused. */
static gboolean
mobilenet_layers (CnnWeights *cnn, CnnTensorSource *src, const char *words, gboolean v2,
    float relu_max, GError **error)
{
  g_auto (GStrv) tokens = g_strsplit_set (words, " \t\r\n", -1);
  g_autoptr (GHashTable) used = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  GArray *layers = g_array_new (FALSE, TRUE, sizeof (Layer));
  CnnShape shape = { cnn->in_h, cnn->in_w, cnn->in_c, FALSE };
  guint index = 0;
  gboolean ok = TRUE;
  for (char **t = tokens; ok && *t; t++) {
    if (**t == '\0')
      continue;
    g_autofree char *word = g_strdup (*t);
    guint64 width = 0;
    char *colon = strchr (word, ':');
    if (colon != NULL && src->st == NULL) {
      *colon = '\0';
      char *end = NULL;
      width = g_ascii_strtoull (colon + 1, &end, 10);
      if (*end != '\0' || width == 0 || width > 65536)
        width = G_MAXUINT64;
    }
    guint add_from = 0;
    LayerKind kind = 0;
    const CnnLayerWord *w = cnn_layer_find_word (word, v2, index, &kind, &add_from);
    const CnnLayerClass *k = w ? cnn_layer_class (kind) : NULL;
    if (k == NULL || width == G_MAXUINT64 || (src->st == NULL && k->width != (width > 0))) {
      g_autofree char *known = cnn_layer_words (v2);
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: layer word %u \"%s\" is not a MobileNet-%s layer (expected %s%s)", cnn->source,
          index, *t, v2 ? "v2" : "v1", known, src->st ? "" : "; conv and fc words with \":WIDTH\"");
      ok = FALSE;
      break;
    }
    Layer l = { .kind = kind,
      .name = g_strdup_printf ("layers.%u", index),
      .in_c = shape.c,
      .out_c = shape.c,
      .stride = w->stride,
      .relu = w->relu,
      .add_from = add_from,
      .relu_max = relu_max };
    if (k->tensors != NULL)
      ok = k->tensors (src, &l, width, &shape, error);
    static const char *const tensor_names[] = { "weight", "bias", "weight_scale",
      "weight_zero_point", "bias_quantized" };
    for (guint s = 0; s < G_N_ELEMENTS (tensor_names) && k->n_weights != NULL; s++)
      g_hash_table_add (used, g_strdup_printf ("%s.%s", l.name, tensor_names[s]));
    g_array_append_val (layers, l);
    index++;
  }
  cnn->n_layers = layers->len;
  cnn->layers = (Layer *) g_array_free (layers, FALSE);
  if (ok && cnn->n_layers == 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING, "%s: metadata layers lists no layer",
        cnn->source);
    ok = FALSE;
  }
  for (guint i = 0; ok && src->st != NULL && i < cony_safetensors_n_tensors (src->st); i++) {
    const char *name = cony_safetensors_tensor (src->st, i)->name;
    if (!g_hash_table_contains (used, name)) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: unexpected tensor %s (a MobileNet file holds layers.I.weight, .bias, "
          ".weight_scale, .weight_zero_point and .bias_quantized of the layers its `layers` "
          "metadata lists)",
          cnn->source, name);
      ok = FALSE;
    }
  }
  return ok;
}

static gboolean
mobilenet_load (CnnWeights *cnn, const ConySafetensors *st, gboolean v2, GError **error)
{
  const char *act = cony_safetensors_metadata (st, "activation");
  const char *words = cony_safetensors_metadata (st, "layers");
  float relu_max = 6.0f;
  if (act != NULL && strcmp (act, "relu") == 0)
    relu_max = INFINITY;
  else if (act != NULL && strcmp (act, "relu6") != 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: metadata activation = \"%s\", expected \"relu6\" or \"relu\"", cnn->source, act);
    return FALSE;
  }
  if (words == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
        "%s: a network = mobilenet_v%d file needs the metadata `layers` (its layer list)",
        cnn->source, v2 ? 2 : 1);
    return FALSE;
  }
  CnnTensorSource src = { .st = st };
  return mobilenet_layers (cnn, &src, words, v2, relu_max, error)
      && cnn_finish_geometry (cnn, error);
}

gboolean
cnn_mobilenet_v1_load (CnnWeights *cnn, const ConySafetensors *st, GError **error)
{
  return mobilenet_load (cnn, st, FALSE, error) && cnn_int8_load (cnn, st, error);
}

/* MobileNet-v2 (inverted residuals): v1's words plus linear1x1 and add@K. */
gboolean
cnn_mobilenet_v2_load (CnnWeights *cnn, const ConySafetensors *st, GError **error)
{
  return mobilenet_load (cnn, st, TRUE, error) && cnn_int8_load (cnn, st, error);
}

/* ---------------------------------------------------------------- random */

gboolean
cnn_mobilenet_is_layout (const char *layout)
{
  return cnn_layer_starts_word (layout);
}

gboolean
cnn_mobilenet_random (CnnWeights *cnn, const char *layout, guint32 seed, GError **error)
{
  CnnTensorSource src = { .st = NULL, .rng = seed };
  return mobilenet_layers (cnn, &src, layout, TRUE, 6.0f, error)
      && cnn_finish_geometry (cnn, error);
}
