/* CNN layer kind LAYER_FC: fully connected on the flattened (HWC) map or the previous
 * FC output (+ ReLU when relu), with F32 or F16 weights; the first one starts the
 * head. */
#include "cnn-private.h"
#include "cony/error.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* ---- F16 weights ----
 * When a model file stores an FC weight in F16 (or after cony_cnn_set_fc_f16()),
 * the layer keeps the F16 values only (half the bytes of F32) and computes with
 * them expanded to float32 in registers: the result is the F32 network with those
 * weights, to float rounding. One example: the float16 matrix-vector product of
 * src/kernels/gemv.c (F16C conversion + FMA where the CPU has them, a portable loop
 * otherwise). A batch: blocks of rows expanded to F32 in scratch, then sgemm. */

/* dst (n x out) = src (n x in) W^T. */
static void
fc_f16 (ConyCnn *cnn, const Layer *l, const float *src, gsize n, float *dst)
{
  gsize in = l->in_c, out = l->out_c;
  if (n == 1) {
    memset (dst, 0, out * sizeof *dst);
    if (cnn_kernels ()->portable)
      cony_gemv_portable (&l->w16, src, dst);
    else
      cony_gemv (&l->w16, src, dst);
    return;
  }
  /* Rows expanded in blocks of at most FC_F16_BLOCK floats, each block used by
   * every example. */
  gsize rb = MAX ((gsize) 16, FC_F16_BLOCK / in);
  rb = MIN (rb, out);
  if (cnn->fc_w32 == NULL || cnn->fc_w32_cap < rb * in) {
    g_free (cnn->fc_w32);
    cnn->fc_w32 = g_new (float, rb *in);
    cnn->fc_w32_cap = rb * in;
  }
  for (gsize r0 = 0; r0 < out; r0 += rb) {
    gsize r = MIN (rb, out - r0);
    cony_half_expand (l->w16.f16 + r0 * in, r * in, cnn->fc_w32);
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, (int) n, (int) r, (int) in, 1.0f, src,
        (int) in, cnn->fc_w32, (int) in, 0.0f, dst + r0, (int) out);
  }
}

static void
fc_forward (ConyCnn *cnn, Layer *l, const float *in, float *out, gsize n, guint flags)
{
  if (l->w16.f16 != NULL)
    fc_f16 (cnn, l, in, n, out);
  else if (n == 1)
    cblas_sgemv (CblasRowMajor, CblasNoTrans, (int) l->out_c, (int) l->in_c, 1.0f, l->w,
        (int) l->in_c, in, 1, 0.0f, out, 1);
  else
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, (int) n, (int) l->out_c, (int) l->in_c,
        1.0f, in, (int) l->in_c, l->w, (int) l->in_c, 0.0f, out, (int) l->out_c);
  cnn_bias_act (out, n, l->out_c, l->b, l->relu || (flags & CNN_FORWARD_RELU), INFINITY);
}

static gsize
fc_n_weights (const Layer *l)
{
  return (gsize) l->in_c * l->out_c;
}

/* The first FC layer flattens the map (first_fc). */
static gboolean
fc_geometry (CnnWeights *cnn, guint i, CnnShape *s, GError **error)
{
  Layer *l = &cnn->layers[i];
  if (!s->flat) {
    cnn->first_fc = i;
    s->flat = TRUE;
  }
  gsize in = (gsize) s->h * s->w * s->c;
  if (l->in_c != in) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
        "%s: tensor %s.weight has %u inputs, expected %" G_GSIZE_FORMAT " (%ux%ux%u)", cnn->source,
        l->name, l->in_c, in, s->h, s->w, s->c);
    return FALSE;
  }
  s->h = s->w = 1;
  s->c = l->out_c;
  return TRUE;
}

static void
fc_describe (GString *out, const CnnWeights *w, const Layer *l, gboolean relu)
{
  g_string_append_printf (out, "fc %u -> %u%s%s\n", l->in_c, l->out_c, relu ? " + ReLU" : "",
      l->w16.f16 ? " (F16 weights)" : "");
}

/* (out, in) weights on the flattened map. */
static gboolean
fc_tensors (CnnTensorSource *src, Layer *l, guint64 width, CnnShape *s, GError **error)
{
  gsize shape[2] = { width, (gsize) s->h * s->w * s->c };
  gboolean ok = shape[1] <= G_MAXINT
      && cnn_layer_tensors (src, l->name, 2, shape, &l->w, &l->b, error);
  l->in_c = (guint) shape[1];
  s->h = s->w = 1;
  if (ok)
    s->c = l->out_c = (guint) shape[0];
  return ok;
}

static const CnnLayerWord fc_words[] = {
  { "fc", 1, FALSE, FALSE, FALSE },
  { NULL },
};

const CnnLayerClass cnn_layer_fc = {
  .name = "fc",
  .words = fc_words,
  .flat = TRUE,
  .width = TRUE,
  .taps = 1,
  .n_weights = fc_n_weights,
  .geometry = fc_geometry,
  .describe = fc_describe,
  .forward = fc_forward,
  .tensors = fc_tensors,
  .int8_load = cnn_int8_load_fc,
  .int8_run = cnn_int8_run_gemm,
};
