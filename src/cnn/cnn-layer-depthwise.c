/* CNN layer kind LAYER_DW: MobileNet's 3x3 depthwise SAME convolution (stride 1 or 2)
 * + ReLU or ReLU6. */
#include "cnn-private.h"

#include <string.h>

/* Each output pixel's channel vector starts at the bias and adds the in-map taps,
 * channels innermost (the loop the compiler vectorises). */
CONY_CLONES static void
dw_forward_map (const Layer *l, const float *in, float *out, gsize nb)
{
  guint H = l->in_h, W = l->in_w, C = l->out_c, s = l->stride;
  gsize in_map = (gsize) H * W * C, out_map = (gsize) l->out_h * l->out_w * C;
  float hi = l->relu_max;
  for (gsize e = 0; e < nb; e++, in += in_map, out += out_map)
    for (guint y = 0; y < l->out_h; y++)
      for (guint x = 0; x < l->out_w; x++) {
        float *restrict o = out + ((gsize) y * l->out_w + x) * C;
        memcpy (o, l->b, sizeof (float) * C);
        for (int ky = 0; ky < 3; ky++) {
          int yy = (int) (y * s) + ky - (int) l->pad_top;
          if (yy < 0 || yy >= (int) H)
            continue;
          for (int kx = 0; kx < 3; kx++) {
            int xx = (int) (x * s) + kx - (int) l->pad_left;
            if (xx < 0 || xx >= (int) W)
              continue;
            const float *restrict src = in + ((gsize) yy * W + xx) * C;
            const float *restrict wk = l->w + (gsize) (ky * 3 + kx) * C;
            for (guint c = 0; c < C; c++)
              o[c] += src[c] * wk[c];
          }
        }
        for (guint c = 0; c < C; c++) {
          float v = o[c] > 0.0f ? o[c] : 0.0f;
          o[c] = v < hi ? v : hi;
        }
      }
}

static void
dw_forward (ConyCnn *cnn, Layer *l, const float *in, float *out, gsize nb, guint flags)
{
  dw_forward_map (l, in, out, nb);
}

static gsize
dw_n_weights (const Layer *l)
{
  return (gsize) 9 * l->out_c;
}

static gboolean
dw_geometry (CnnWeights *cnn, guint i, CnnShape *s, GError **error)
{
  Layer *l = &cnn->layers[i];
  if (l->in_c != s->c)
    return cnn_chain_error (cnn, l, "channels", l->in_c, s->c, error);
  guint pad_top, pad_left;
  s->h = cnn_same_out (s->h, l->stride, &pad_top);
  s->w = cnn_same_out (s->w, l->stride, &pad_left);
  l->pad_top = pad_top;
  l->pad_left = pad_left;
  l->out_c = s->c;
  return TRUE;
}

static void
dw_describe (GString *out, const CnnWeights *w, const Layer *l, gboolean relu)
{
  g_string_append_printf (out, "depthwise3x3%s %u, out %ux%ux%u + %s\n",
      l->stride > 1 ? " stride 2" : "", l->out_c, l->out_h, l->out_w, l->out_c,
      cnn_layer_act_name (l));
}

/* (C, 1, 3, 3) weights into 9 x C. */
static gboolean
dw_tensors (CnnTensorSource *src, Layer *l, guint64 width, CnnShape *s, GError **error)
{
  guint c = s->c, pad;
  gsize shape[4] = { c, 1, 3, 3 };
  float *tw = NULL;
  gboolean ok = cnn_layer_tensors (src, l->name, 4, shape, &tw, &l->b, error);
  if (ok) {
    l->w = g_new (float, (gsize) 9 * c);
    for (guint ch = 0; ch < c; ch++)
      for (guint q = 0; q < 9; q++)
        l->w[(gsize) q * c + ch] = tw[(gsize) ch * 9 + q];
  }
  g_free (tw);
  s->h = cnn_same_out (s->h, l->stride, &pad);
  s->w = cnn_same_out (s->w, l->stride, &pad);
  return ok;
}

static const CnnLayerWord dw_words[] = {
  { "dw3x3s1", 1, TRUE, FALSE, FALSE },
  { "dw3x3s2", 2, TRUE, FALSE, FALSE },
  { NULL },
};

const CnnLayerClass cnn_layer_dw = {
  .name = "depthwise3x3",
  .words = dw_words,
  .taps = 3,
  .n_weights = dw_n_weights,
  .geometry = dw_geometry,
  .describe = dw_describe,
  .forward = dw_forward,
  .tensors = dw_tensors,
  .int8_load = cnn_int8_load_dw,
  .int8_run = cnn_int8_run_dw,
};
