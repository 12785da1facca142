/* CNN layer kind LAYER_ADD: MobileNet-v2's residual, the map plus the output of an
 * earlier layer (add_from), which the forward pass saves while the block runs. */
#include "cnn-private.h"
#include "cony/error.h"

static void
add_forward (ConyCnn *cnn, Layer *l, const float *in, float *out, gsize nb, guint flags)
{
  gsize n = (gsize) l->out_h * l->out_w * l->out_c * nb;
  for (gsize i = 0; i < n; i++)
    out[i] = in[i] + cnn->res[i];
}

/* The shapes must match, and no other residual may start or end in between (the
 * forward pass saves one map at a time: MobileNet-v2's blocks do not nest). */
static gboolean
add_geometry (CnnWeights *cnn, guint i, CnnShape *s, GError **error)
{
  Layer *l = &cnn->layers[i];
  guint k = l->add_from, h = s->h, w = s->w, c = s->c;
  Layer *from = k < i ? &cnn->layers[k] : NULL;
  if (from == NULL || from->kind == LAYER_FC || from->kind == LAYER_GAP || from->out_h != h
      || from->out_w != w || from->out_c != c) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
        "%s: %s adds layer %u, which is not an earlier feature map of shape %ux%ux%u", cnn->source,
        l->name, k, h, w, c);
    return FALSE;
  }
  for (guint j = k + 1; j < i; j++)
    if (cnn->layers[j].kind == LAYER_ADD || cnn->layers[j].keep) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: %s adds layer %u across another residual (%s): nested residuals are not "
          "supported",
          cnn->source, l->name, k, cnn->layers[j].name);
      return FALSE;
    }
  from->keep = TRUE;
  l->in_c = l->out_c = c;
  cnn->max_keep = MAX (cnn->max_keep, (gsize) h * w * c);
  return TRUE;
}

static void
add_describe (GString *out, const CnnWeights *w, const Layer *l, gboolean relu)
{
  g_string_append_printf (out, "add %s, out %ux%ux%u\n", w->layers[l->add_from].name, l->out_h,
      l->out_w, l->out_c);
}

static const CnnLayerWord add_words[] = {
  { "add@", 1, FALSE, TRUE, TRUE },
  { NULL },
};

const CnnLayerClass cnn_layer_add = {
  .name = "add",
  .words = add_words,
  .taps = 1,
  .geometry = add_geometry,
  .describe = add_describe,
  .forward = add_forward,
  .int8_load = cnn_int8_load_add,
  .int8_run = cnn_int8_run_add,
};
