/* CNN engine: the loader of MobileNet files (network = "mobilenet_v1"; see
 * include/cony/cnn.h), and random MobileNet layouts. */
#include "cnn-private.h"
#include "cony/error.h"
#include "cony/safetensors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- MobileNet-v1 */

static const struct {
  const char *word;
  LayerKind kind;
  guint stride;
} mobilenet_words[] = {
  { "conv3x3s1", LAYER_CONV, 1 },
  { "conv3x3s2", LAYER_CONV, 2 },
  { "dw3x3s1", LAYER_DW, 1 },
  { "dw3x3s2", LAYER_DW, 2 },
  { "conv1x1", LAYER_PW, 1 },
  { "gap", LAYER_GAP, 1 },
  { "fc", LAYER_FC, 1 },
  { "sigmoid", LAYER_SIGMOID, 1 },
};

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
mobilenet_layers (CnnWeights *cnn, WeightSource *src, const char *words, float relu_max,
    GError **error)
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
    guint k = 0;
    while (k < G_N_ELEMENTS (mobilenet_words) && strcmp (word, mobilenet_words[k].word) != 0)
      k++;
    LayerKind kind = k < G_N_ELEMENTS (mobilenet_words) ? mobilenet_words[k].kind : LAYER_POOL;
    gboolean wants_width = kind == LAYER_CONV || kind == LAYER_PW || kind == LAYER_FC;
    if (kind == LAYER_POOL || width == G_MAXUINT64
        || (src->st == NULL && wants_width != (width > 0))) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: layer word %u \"%s\" is not a MobileNet layer (expected conv3x3s1, "
          "conv3x3s2, dw3x3s1, dw3x3s2, conv1x1, gap, fc, sigmoid%s)",
          cnn->source, index, *t, src->st ? "" : "; conv and fc words with \":WIDTH\"");
      ok = FALSE;
      break;
    }
    Layer l = { .kind = kind,
      .name = g_strdup_printf ("layers.%u", index),
      .in_c = c,
      .out_c = c,
      .stride = mobilenet_words[k].stride,
      .relu = kind != LAYER_FC,
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
    for (guint s = 0; s < 3 && l.kind != LAYER_GAP && l.kind != LAYER_SIGMOID; s++)
      g_hash_table_add (used,
          g_strdup_printf ("%s.%s", l.name,
              (const char *[]){ "weight", "bias", "weight_scale" }[s]));
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
          "%s: unexpected tensor %s (a MobileNet file holds layers.I.weight, .bias "
          "and .weight_scale of the layers its `layers` metadata lists)",
          cnn->source, name);
      ok = FALSE;
    }
  }
  cnn->mobilenet = TRUE;
  return ok;
}

gboolean
cnn_mobilenet_v1_load (CnnWeights *cnn, const ConySafetensors *st, GError **error)
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
        "%s: a network = mobilenet_v1 file needs the metadata `layers` (its layer list)",
        cnn->source);
    return FALSE;
  }
  WeightSource src = { .st = st };
  return mobilenet_layers (cnn, &src, words, relu_max, error) && cnn_finish_geometry (cnn, error);
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
  return mobilenet_layers (cnn, &src, layout, 6.0f, error) && cnn_finish_geometry (cnn, error);
}
