/* CNN layer kinds of a head's output: LAYER_SIGMOID (the logistic) and LAYER_SOFTMAX
 * (the softmax, its row's maximum subtracted first), each after a fully connected
 * layer. */
#include "cnn-private.h"
#include "cony/error.h"

#include <math.h>

static void
sigmoid_forward (ConyCnn *cnn, Layer *l, const float *in, float *out, gsize n, guint flags)
{
  for (gsize j = 0; j < n * l->out_c; j++)
    out[j] = 1.0f / (1.0f + expf (-in[j]));
}

/* The softmax of each of the @n rows (no overflow: the row's maximum first). */
static void
softmax_forward (ConyCnn *cnn, Layer *l, const float *in, float *out, gsize n, guint flags)
{
  guint cols = l->out_c;
  for (gsize r = 0; r < n; r++, in += cols, out += cols) {
    float mx = in[0];
    for (guint c = 1; c < cols; c++)
      mx = MAX (mx, in[c]);
    double sum = 0.0;
    for (guint c = 0; c < cols; c++)
      sum += out[c] = expf (in[c] - mx);
    float inv = (float) (1.0 / sum);
    for (guint c = 0; c < cols; c++)
      out[c] *= inv;
  }
}

/* Both follow a fully connected layer, elementwise on its output. */
static gboolean
head_geometry (CnnWeights *cnn, guint i, CnnShape *s, GError **error)
{
  Layer *l = &cnn->layers[i];
  if (i == 0 || cnn->layers[i - 1].kind != LAYER_FC) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: %s (%s) must follow a fully connected layer", cnn->source, l->name,
        cnn_layer_class (l->kind)->name);
    return FALSE;
  }
  l->in_c = l->out_c = s->c;
  return TRUE;
}

static void
head_describe (GString *out, const CnnWeights *w, const Layer *l, gboolean relu)
{
  g_string_append_printf (out, "%s, out %u\n", cnn_layer_class (l->kind)->name, l->out_c);
}

static const CnnLayerWord sigmoid_words[] = {
  { "sigmoid", 1, TRUE, FALSE, FALSE },
  { NULL },
};

const CnnLayerClass cnn_layer_sigmoid = {
  .name = "sigmoid",
  .words = sigmoid_words,
  .flat = TRUE,
  .taps = 1,
  .geometry = head_geometry,
  .describe = head_describe,
  .forward = sigmoid_forward,
  .int8_load = cnn_int8_load_sigmoid,
  .int8_run = cnn_int8_run_sigmoid,
};

static const CnnLayerWord softmax_words[] = {
  { "softmax", 1, TRUE, FALSE, FALSE },
  { NULL },
};

const CnnLayerClass cnn_layer_softmax = {
  .name = "softmax",
  .words = softmax_words,
  .flat = TRUE,
  .taps = 1,
  .geometry = head_geometry,
  .describe = head_describe,
  .forward = softmax_forward,
  .int8_load = cnn_int8_load_softmax,
  .int8_run = cnn_int8_run_softmax,
};
