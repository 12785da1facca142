/* CNN engine: the loaders of MobileNet files (network = "mobilenet_v1" and
 * "mobilenet_v2"; see include/cony/cnn.h), and random MobileNet layouts. */
#include "cnn-private.h"
#include "cony/error.h"
#include "cony/safetensors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- layer words */

/* The `layers` words; v2: MobileNet-v2 only (with "add@K", the residual). */
static const struct {
  const char *word;
  LayerKind kind;
  guint stride;
  gboolean v2;
} mobilenet_words[] = {
  { "conv3x3s1", LAYER_CONV, 1, FALSE },
  { "conv3x3s2", LAYER_CONV, 2, FALSE },
  { "dw3x3s1", LAYER_DW, 1, FALSE },
  { "dw3x3s2", LAYER_DW, 2, FALSE },
  { "conv1x1", LAYER_PW, 1, FALSE },
  { "linear1x1", LAYER_PW, 1, TRUE }, /* no activation: the block's projection */
  { "gap", LAYER_GAP, 1, FALSE },
  { "fc", LAYER_FC, 1, FALSE },
  { "sigmoid", LAYER_SIGMOID, 1, FALSE },
  { "softmax", LAYER_SOFTMAX, 1, FALSE },
};

/* The word's index in mobilenet_words, or G_N_ELEMENTS for "add@K" (*add_from = K, which
 * must be below @index), or -1: unknown (or v2 in a v1 file). */
static int
find_word (const char *word, gboolean v2, guint index, guint *add_from)
{
  if (v2 && g_str_has_prefix (word, "add@") && g_ascii_isdigit (word[4])) {
    char *end = NULL;
    guint64 k = g_ascii_strtoull (word + 4, &end, 10);
    if (*end != '\0' || k >= index)
      return -1;
    *add_from = (guint) k;
    return G_N_ELEMENTS (mobilenet_words);
  }
  for (guint k = 0; k < G_N_ELEMENTS (mobilenet_words); k++)
    if (strcmp (word, mobilenet_words[k].word) == 0)
      return v2 || !mobilenet_words[k].v2 ? (int) k : -1;
  return -1;
}

/* Where a MobileNet's weights come from: a file, or (st NULL) random numbers. */
typedef struct {
  const ConySafetensors *st;
  guint64 rng;
} WeightSource;

/* Torch-layout weights (@ndim, @shape, shape[0] = 0: the file's count) and the
 * bias of layer @base. Random weights are He-scaled uniform, biases small. */
static gboolean
layer_tensors (WeightSource *src, const char *base, int ndim, gsize *shape, float **w, float **b,
    GError **error)
{
  if (src->st != NULL) {
    *w = cnn_read_weight (src->st, base, ndim, shape, error);
    *b = *w ? cnn_read_bias (src->st, base, (guint) shape[0], error) : NULL;
    if (*b == NULL)
      g_clear_pointer (w, g_free);
    return *b != NULL;
  }
  gsize n = 1;
  for (int d = 0; d < ndim; d++)
    n *= shape[d];
  *w = g_new (float, n);
  *b = g_new (float, shape[0]);
  cnn_fill_uniform (*w, n, sqrtf (6.0f / (n / shape[0])), &src->rng);
  cnn_fill_uniform (*b, shape[0], 0.05f, &src->rng);
  return TRUE;
}

/* A pointwise layer whose file weights are I8 also keeps them as int8 (out x in)
 * with their scales: the packed-weight kernel then reads a quarter of the bytes
 * (see pw_forward()). Both were checked by cnn_read_weight(). */
static gboolean
keep_int8 (const WeightSource *src, Layer *l, GError **error)
{
  g_autofree char *wname = g_strdup_printf ("%s.weight", l->name);
  g_autofree char *sname = g_strdup_printf ("%s.weight_scale", l->name);
  const ConyTensorInfo *ti = src->st ? cony_safetensors_find (src->st, wname) : NULL;
  if (ti == NULL || ti->dtype != CONY_DTYPE_I8)
    return TRUE;
  gsize shape[1] = { ti->shape[0] };
  l->qscale = cony_safetensors_get_f32 (src->st, sname, 1, shape, error);
  l->q = (gint8 *) g_memdup2 (ti->data, ti->numel);
  return l->qscale != NULL;
}

/* Builds the layers of a MobileNet from its layer words (the `layers` metadata;
 * for random networks each conv3x3/conv1x1/fc word carries its width, "conv1x1:64").
 * Tensors of a file that no layer reads are refused. */
static gboolean
mobilenet_layers (CnnWeights *cnn, WeightSource *src, const char *words, gboolean v2,
    float relu_max, GError **error)
{
  g_auto (GStrv) tokens = g_strsplit_set (words, " \t\r\n", -1);
  g_autoptr (GHashTable) used = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  GArray *layers = g_array_new (FALSE, TRUE, sizeof (Layer));
  guint c = cnn->in_c, h = cnn->in_h, w = cnn->in_w, index = 0, pad;
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
    int k = find_word (word, v2, index, &add_from);
    gboolean is_add = k == (int) G_N_ELEMENTS (mobilenet_words);
    LayerKind kind = k < 0 ? LAYER_POOL : is_add ? LAYER_ADD : mobilenet_words[k].kind;
    gboolean wants_width = kind == LAYER_CONV || kind == LAYER_PW || kind == LAYER_FC;
    if (kind == LAYER_POOL || width == G_MAXUINT64
        || (src->st == NULL && wants_width != (width > 0))) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: layer word %u \"%s\" is not a MobileNet-%s layer (expected conv3x3s1, "
          "conv3x3s2, dw3x3s1, dw3x3s2, conv1x1, %sgap, fc, sigmoid, softmax%s)",
          cnn->source, index, *t, v2 ? "v2" : "v1", v2 ? "linear1x1, add@K (K < index), " : "",
          src->st ? "" : "; conv and fc words with \":WIDTH\"");
      ok = FALSE;
      break;
    }
    Layer l = { .kind = kind,
      .name = g_strdup_printf ("layers.%u", index),
      .in_c = c,
      .out_c = c,
      .stride = is_add ? 1 : mobilenet_words[k].stride,
      .relu = kind != LAYER_FC && kind != LAYER_ADD && !(kind == LAYER_PW && mobilenet_words[k].v2),
      .add_from = add_from,
      .relu_max = relu_max };
    gsize shape[4] = { width, c, 3, 3 };
    float *tw = NULL;
    switch (kind) {
      case LAYER_CONV:
        ok = layer_tensors (src, l.name, 4, shape, &tw, &l.b, error);
        if (ok)
          l.w = cnn_conv_weight_from_torch (tw, (guint) shape[0], c);
        h = cnn_same_out (h, l.stride, &pad);
        w = cnn_same_out (w, l.stride, &pad);
        break;
      case LAYER_DW:
        shape[0] = c;
        shape[1] = 1;
        ok = layer_tensors (src, l.name, 4, shape, &tw, &l.b, error);
        if (ok) {
          /* (C, 1, 3, 3) -> 9 x C */
          l.w = g_new (float, (gsize) 9 * c);
          for (guint ch = 0; ch < c; ch++)
            for (guint q = 0; q < 9; q++)
              l.w[(gsize) q * c + ch] = tw[(gsize) ch * 9 + q];
        }
        h = cnn_same_out (h, l.stride, &pad);
        w = cnn_same_out (w, l.stride, &pad);
        break;
      case LAYER_PW:
        shape[2] = shape[3] = 1;
        ok = layer_tensors (src, l.name, 4, shape, &tw, &l.b, error);
        if (ok) {
          /* (out, in, 1, 1) -> in x out */
          guint out = (guint) shape[0];
          l.w = g_new (float, (gsize) c *out);
          for (guint o = 0; o < out; o++)
            for (guint i = 0; i < c; i++)
              l.w[(gsize) i * out + o] = tw[(gsize) o * c + i];
          ok = keep_int8 (src, &l, error);
        }
        break;
      case LAYER_FC:
        shape[1] = (gsize) h * w * c;
        ok = shape[1] <= G_MAXINT && layer_tensors (src, l.name, 2, shape, &l.w, &l.b, error);
        l.in_c = (guint) shape[1];
        h = w = 1;
        break;
      case LAYER_GAP: h = w = 1; break;
      default: break;
    }
    g_free (tw);
    if (ok && (kind == LAYER_CONV || kind == LAYER_PW || kind == LAYER_FC))
      c = l.out_c = (guint) shape[0];
    static const char *const tensor_names[] = { "weight", "bias", "weight_scale",
      "weight_zero_point", "bias_quantized" };
    for (guint s = 0; s < G_N_ELEMENTS (tensor_names) && (wants_width || kind == LAYER_DW); s++)
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
  WeightSource src = { .st = st };
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
  while (g_ascii_isspace (*layout))
    layout++;
  for (guint k = 0; k < G_N_ELEMENTS (mobilenet_words); k++)
    if (g_str_has_prefix (layout, mobilenet_words[k].word))
      return TRUE;
  return FALSE;
}

gboolean
cnn_mobilenet_random (CnnWeights *cnn, const char *layout, guint32 seed, GError **error)
{
  WeightSource src = { .st = NULL, .rng = seed };
  return mobilenet_layers (cnn, &src, layout, TRUE, 6.0f, error)
      && cnn_finish_geometry (cnn, error);
}
