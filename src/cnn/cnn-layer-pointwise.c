/* CNN layer kind LAYER_PW: MobileNet's 1x1 (pointwise) convolution + ReLU or ReLU6, or
 * linear (MobileNet-v2's linear1x1). */
#include "cnn-private.h"
#include "cony/error.h"

#include <cblas.h>
#include <string.h>

/* panel[i * 16 + j] = q[i * 16 + j] * scale[j], i < rows: one int8 panel as floats. */
CONY_CLONES static void
expand_panel (const gint8 *restrict q, const float *restrict scale, gsize rows,
    float *restrict panel)
{
  for (gsize i = 0; i < rows; i++)
    for (int j = 0; j < 16; j++)
      panel[i * 16 + j] = (float) q[i * 16 + j] * scale[j];
}

void
cnn_pw_pack (ConyCnn *cnn, Layer *l)
{
  guint K = l->in_c, N = l->out_c;
  if (l->kind != LAYER_PW || cnn_kernels ()->wino_gemm == NULL || N % 16 != 0)
    return;
  /* The weights may be shared with other threads' networks: pack once, under the
   * weights' lock; q_packed / wino[0] (read atomically) publish the packed form. */
  if (l->qscale != NULL) { /* qscale, not q: q changes when packed; qscale stays */
    if (g_atomic_int_get (&l->q_packed))
      return;
    pthread_mutex_lock (&cnn->w->lazy);
    if (!l->q_packed) {
      gint8 *pk = g_new (gint8, (gsize) K * N);
      for (guint p = 0; p < N / 16; p++)
        for (guint i = 0; i < K; i++)
          for (guint j = 0; j < 16; j++)
            pk[((gsize) p * K + i) * 16 + j] = l->q[(gsize) (16 * p + j) * K + i];
      g_free (l->q);
      l->q = pk;
      g_atomic_int_set (&l->q_packed, TRUE);
    }
    pthread_mutex_unlock (&cnn->w->lazy);
    return;
  }
  if (g_atomic_pointer_get (&l->wino[0]) != NULL)
    return;
  pthread_mutex_lock (&cnn->w->lazy);
  if (l->wino[0] == NULL) {
    float *pk = g_new (float, (gsize) K *N);
    for (guint p = 0; p < N / 16; p++)
      for (guint i = 0; i < K; i++)
        memcpy (pk + ((gsize) p * K + i) * 16, l->w + (gsize) i * N + 16 * p, 16 * sizeof (float));
    g_atomic_pointer_set (&l->wino[0], pk);
  }
  pthread_mutex_unlock (&cnn->w->lazy);
}

/* One product over every pixel of the @nb maps, (pixels x in) (in x out).
 * Where the packed-weight kernel runs (AVX2/FMA, out a multiple of 16), the
 * weights are packed into its 16-column panels once (cnn_pw_pack()): OpenBLAS would
 * repack them on every call, which costs as much as the product itself on YAMNet's
 * small late maps (6 to 24 pixels, up to 1024 x 1024 weights). Weights that
 * came from I8 stay int8 in the panels and each panel is expanded (value x
 * scale, the same floats as the dequantised weights) just before its product:
 * the layer reads a quarter of the bytes, which keeps YAMNet's 3.7 M weights in
 * cache where 15 MB of floats would be evicted between patches. */
static void
pw_forward (ConyCnn *cnn, Layer *l, const float *in, float *out, gsize nb, guint flags)
{
  gsize M = (gsize) l->in_h * l->in_w * nb;
  guint K = l->in_c, N = l->out_c;
  const CnnKernels *kern = cnn_kernels ();
  cnn_pw_pack (cnn, l);
  if (kern->wino_gemm != NULL && N % 16 == 0 && l->qscale != NULL) {
    if (cnn->panel_cap < (gsize) 16 * K) {
      g_free (cnn->panel);
      cnn->panel = g_new (float, (gsize) 16 * K);
      cnn->panel_cap = (gsize) 16 * K;
    }
    for (guint p = 0; p < N / 16; p++) {
      expand_panel (l->q + (gsize) p * K * 16, l->qscale + 16 * p, K, cnn->panel);
      kern->gemm_panel (M, N, K, in, cnn->panel, out + 16 * p);
    }
  } else if (kern->wino_gemm != NULL && N % 16 == 0) {
    kern->wino_gemm (M, N, K, in, g_atomic_pointer_get (&l->wino[0]), out);
  } else {
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, (int) M, (int) N, (int) K, 1.0f, in,
        (int) K, l->w, (int) N, 0.0f, out, (int) N);
  }
  cnn_bias_act (out, M, N, l->b, l->relu, l->relu_max);
}

static gsize
pw_n_weights (const Layer *l)
{
  return (gsize) l->in_c * l->out_c;
}

static gboolean
pw_geometry (CnnWeights *cnn, guint i, CnnShape *s, GError **error)
{
  Layer *l = &cnn->layers[i];
  if (l->in_c != s->c)
    return cnn_chain_error (cnn, l, "input channels", l->in_c, s->c, error);
  s->c = l->out_c;
  return TRUE;
}

static void
pw_describe (GString *out, const CnnWeights *w, const Layer *l, gboolean relu)
{
  g_string_append_printf (out, "conv1x1 %u -> %u, out %ux%ux%u%s%s\n", l->in_c, l->out_c, l->out_h,
      l->out_w, l->out_c, l->relu ? " + " : " (linear)", l->relu ? cnn_layer_act_name (l) : "");
}

/* A pointwise layer whose file weights are I8 also keeps them as int8 (out x in)
 * with their scales: the packed-weight kernel then reads a quarter of the bytes
 * (see pw_forward()). Both were checked by cnn_read_weight(). */
static gboolean
keep_int8 (const CnnTensorSource *src, Layer *l, GError **error)
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

/* (out, in, 1, 1) weights into in x out. */
static gboolean
pw_tensors (CnnTensorSource *src, Layer *l, guint64 width, CnnShape *s, GError **error)
{
  guint c = s->c;
  gsize shape[4] = { width, c, 1, 1 };
  float *tw = NULL;
  gboolean ok = cnn_layer_tensors (src, l->name, 4, shape, &tw, &l->b, error);
  if (ok) {
    guint out = (guint) shape[0];
    l->w = g_new (float, (gsize) c *out);
    for (guint o = 0; o < out; o++)
      for (guint i = 0; i < c; i++)
        l->w[(gsize) i * out + o] = tw[(gsize) o * c + i];
    ok = keep_int8 (src, l, error);
  }
  g_free (tw);
  if (ok)
    s->c = l->out_c = (guint) shape[0];
  return ok;
}

static const CnnLayerWord pw_words[] = {
  { "conv1x1", 1, TRUE, FALSE, FALSE },
  { "linear1x1", 1, FALSE, TRUE, FALSE }, /* no activation: the block's projection */
  { NULL },
};

const CnnLayerClass cnn_layer_pw = {
  .name = "conv1x1",
  .words = pw_words,
  .width = TRUE,
  .taps = 1,
  .n_weights = pw_n_weights,
  .geometry = pw_geometry,
  .describe = pw_describe,
  .forward = pw_forward,
  .tensors = pw_tensors,
  .int8_load = cnn_int8_load_pw,
  .int8_run = cnn_int8_run_gemm,
};
