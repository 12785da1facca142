/* CNN layer kind LAYER_CONV: the full 3x3 SAME convolution (stride 1 or 2) + ReLU or
 * ReLU6, as im2col and one product, or as Winograd (cnn-winograd.c). */
#include "cnn-private.h"

#include <cblas.h>
#include <string.h>

/* im2col for a 3x3 conv on an HWC map, SAME padding with @pad_top / @pad_left
 * zeros before the map: row (y * OW + x) of the OH x OW output, column
 * (ky * 3 + kx) * C + c, zero outside the map. */
static void
im2col3x3 (const float *in, const Layer *l, float *col)
{
  guint H = l->in_h, W = l->in_w, C = l->in_c, s = l->stride;
  gsize rowlen = (gsize) 9 * C;
  for (guint y = 0; y < l->out_h; y++)
    for (guint x = 0; x < l->out_w; x++) {
      float *dst = col + ((gsize) y * l->out_w + x) * rowlen;
      for (int ky = 0; ky < 3; ky++) {
        int yy = (int) (y * s) + ky - (int) l->pad_top;
        for (int kx = 0; kx < 3; kx++, dst += C) {
          int xx = (int) (x * s) + kx - (int) l->pad_left;
          if (yy < 0 || yy >= (int) H || xx < 0 || xx >= (int) W)
            memset (dst, 0, sizeof (float) * C);
          else
            memcpy (dst, in + ((gsize) yy * W + xx) * C, sizeof (float) * C);
        }
      }
    }
}

static void
conv_im2col (ConyCnn *cnn, const Layer *l, const float *in, float *out, gsize nb)
{
  gsize HW = (gsize) l->out_h * l->out_w, M = HW * nb, in_map = (gsize) l->in_h * l->in_w * l->in_c;
  guint K = 9 * l->in_c;
  if (cnn->col_cap < M * K) {
    g_free (cnn->col);
    cnn->col = g_new (float, M *K);
    cnn->col_cap = M * K;
  }
  for (gsize e = 0; e < nb; e++)
    im2col3x3 (in + e * in_map, l, cnn->col + e * HW * K);
  cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, (int) M, (int) l->out_c, (int) K, 1.0f,
      cnn->col, (int) K, l->w, (int) l->out_c, 0.0f, out, (int) l->out_c);
  cnn_bias_act (out, M, l->out_c, l->b, TRUE, l->relu_max);
}

static void
conv_forward (ConyCnn *cnn, Layer *l, const float *in, float *out, gsize nb, guint flags)
{
  guint tile = flags & CNN_FORWARD_WINOGRAD ? cnn_wino_tile (cnn, l, nb) : 0;
  if (tile != 0)
    cnn_conv_winograd (cnn, l, tile, in, out, nb);
  else
    conv_im2col (cnn, l, in, out, nb);
}

static gsize
conv_n_weights (const Layer *l)
{
  return (gsize) 9 * l->in_c * l->out_c;
}

static gboolean
conv_geometry (CnnWeights *cnn, guint i, CnnShape *s, GError **error)
{
  Layer *l = &cnn->layers[i];
  guint h = s->h, w = s->w, c = s->c;
  if (l->in_c != c)
    return cnn_chain_error (cnn, l, "input channels", l->in_c, c, error);
  guint pad_top, pad_left;
  guint oh = cnn_same_out (h, l->stride, &pad_top), ow = cnn_same_out (w, l->stride, &pad_left);
  l->pad_top = pad_top;
  l->pad_left = pad_left;
  cnn->max_col = MAX (cnn->max_col, (gsize) oh * ow * 9 * c);
  /* Winograd scratch for either tile size. */
  gsize tiles2 = (gsize) ((h + 1) / 2) * ((w + 1) / 2);
  gsize tiles4 = (gsize) ((h + 3) / 4) * ((w + 3) / 4);
  gsize planes = MAX (16 * tiles2, 36 * tiles4);
  cnn->max_wv = MAX (cnn->max_wv, planes * c);
  cnn->max_wm = MAX (cnn->max_wm, planes * l->out_c);
  cnn->max_ch = MAX (cnn->max_ch, (gsize) MAX (c, l->out_c));
  s->h = oh;
  s->w = ow;
  s->c = l->out_c;
  return TRUE;
}

static void
conv_describe (GString *out, const CnnWeights *w, const Layer *l, gboolean relu)
{
  g_string_append_printf (out, "conv3x3%s %u -> %u, out %ux%ux%u + %s\n",
      l->stride > 1 ? " stride 2" : "", l->in_c, l->out_c, l->out_h, l->out_w, l->out_c,
      cnn_layer_act_name (l));
}

/* (out, in, 3, 3) weights into im2col's (9 in) x out. */
static gboolean
conv_tensors (CnnTensorSource *src, Layer *l, guint64 width, CnnShape *s, GError **error)
{
  gsize shape[4] = { width, s->c, 3, 3 };
  float *tw = NULL;
  guint pad;
  gboolean ok = cnn_layer_tensors (src, l->name, 4, shape, &tw, &l->b, error);
  if (ok)
    l->w = cnn_conv_weight_from_torch (tw, (guint) shape[0], s->c);
  g_free (tw);
  s->h = cnn_same_out (s->h, l->stride, &pad);
  s->w = cnn_same_out (s->w, l->stride, &pad);
  if (ok)
    s->c = l->out_c = (guint) shape[0];
  return ok;
}

static const CnnLayerWord conv_words[] = {
  { "conv3x3s1", 1, TRUE, FALSE, FALSE },
  { "conv3x3s2", 2, TRUE, FALSE, FALSE },
  { NULL },
};

const CnnLayerClass cnn_layer_conv = {
  .name = "conv3x3",
  .words = conv_words,
  .width = TRUE,
  .taps = 3,
  .n_weights = conv_n_weights,
  .geometry = conv_geometry,
  .describe = conv_describe,
  .forward = conv_forward,
  .tensors = conv_tensors,
  .int8_load = cnn_int8_load_conv,
  .int8_run = cnn_int8_run_conv,
};
