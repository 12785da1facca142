/* CNN layer kinds that pool: LAYER_POOL (2x2 max-pool, stride 2; VGG-style networks)
 * and LAYER_GAP (the global average pool: the mean over height and width). */
#include "cnn-private.h"
#include "cony/error.h"

#include <string.h>

static void
pool_forward (ConyCnn *cnn, Layer *l, const float *in, float *out, gsize nb, guint flags)
{
  guint C = l->in_c, W = l->in_w;
  for (gsize e = 0; e < nb;
       e++, in += (gsize) l->in_h * W * C, out += (gsize) l->out_h * l->out_w * C)
    for (guint y = 0; y < l->out_h; y++)
      for (guint x = 0; x < l->out_w; x++) {
        const float *a = in + ((gsize) (2 * y) * W + 2 * x) * C;
        const float *b = a + C;
        const float *c = a + (gsize) W * C;
        const float *d = c + C;
        float *o = out + ((gsize) y * l->out_w + x) * C;
        for (guint k = 0; k < C; k++) {
          float m = MAX (a[k], b[k]);
          m = MAX (m, c[k]);
          o[k] = MAX (m, d[k]);
        }
      }
}

static gboolean
pool_geometry (CnnWeights *cnn, guint i, CnnShape *s, GError **error)
{
  Layer *l = &cnn->layers[i];
  l->in_c = s->c;
  l->out_c = s->c;
  if (s->h < 2 || s->w < 2) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
        "%s: max-pool at %s gets a %ux%u map, too small to pool (input %ux%u)", cnn->source,
        l->name, s->h, s->w, cnn->in_h, cnn->in_w);
    return FALSE;
  }
  s->h /= 2;
  s->w /= 2;
  return TRUE;
}

static void
pool_describe (GString *out, const CnnWeights *w, const Layer *l, gboolean relu)
{
  g_string_append_printf (out, "maxpool2x2, out %ux%ux%u\n", l->out_h, l->out_w, l->out_c);
}

const CnnLayerClass cnn_layer_pool = {
  .name = "maxpool2x2",
  .taps = 2,
  .stride = 2,
  .geometry = pool_geometry,
  .describe = pool_describe,
  .forward = pool_forward,
};

static void
gap_forward (ConyCnn *cnn, Layer *l, const float *in, float *out, gsize nb, guint flags)
{
  guint C = l->in_c;
  gsize n = (gsize) l->in_h * l->in_w;
  double *acc = g_alloca (sizeof (double) * C);
  for (gsize e = 0; e < nb; e++, in += n * C, out += C) {
    memset (acc, 0, sizeof (double) * C);
    for (gsize p = 0; p < n; p++)
      for (guint k = 0; k < C; k++)
        acc[k] += in[p * C + k];
    for (guint k = 0; k < C; k++)
      out[k] = (float) (acc[k] / (double) n);
  }
}

static gboolean
gap_geometry (CnnWeights *cnn, guint i, CnnShape *s, GError **error)
{
  Layer *l = &cnn->layers[i];
  l->in_c = s->c;
  l->out_c = s->c;
  s->h = s->w = 1;
  return TRUE;
}

static void
gap_describe (GString *out, const CnnWeights *w, const Layer *l, gboolean relu)
{
  g_string_append_printf (out, "mean over %ux%u, out 1x1x%u\n", l->in_h, l->in_w, l->out_c);
}

static gboolean
gap_tensors (CnnTensorSource *src, Layer *l, guint64 width, CnnShape *s, GError **error)
{
  s->h = s->w = 1;
  return TRUE;
}

static const CnnLayerWord gap_words[] = {
  { "gap", 1, TRUE, FALSE, FALSE },
  { NULL },
};

const CnnLayerClass cnn_layer_gap = {
  .name = "gap",
  .words = gap_words,
  .taps = 1,
  .geometry = gap_geometry,
  .describe = gap_describe,
  .forward = gap_forward,
  .tensors = gap_tensors,
  .int8_load = cnn_int8_load_gap,
  .int8_run = cnn_int8_run_gap,
};
