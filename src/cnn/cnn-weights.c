/* CNN engine: the weights object (layers, geometry, metadata) shared by ConyCnn
 * instances: its lifetime, copies and the layer geometry every loader finishes with
 * (see cnn-private.h). */
#include "cnn-private.h"
#include "cony/error.h"

#include <math.h>
#include <string.h>

static void
layer_clear (Layer *l)
{
  g_free (l->name);
  g_free (l->w);
  g_free (l->b);
  cony_gemv_matrix_clear (&l->w16);
  g_free (l->wino[0]);
  g_free (l->wino[1]);
  g_free (l->q);
  g_free (l->qscale);
}

CnnWeights *
cnn_weights_new (void)
{
  CnnWeights *w = g_new0 (CnnWeights, 1);
  w->users = 1;
  pthread_mutex_init (&w->lazy, NULL);
  return w;
}

void
cnn_weights_free (CnnWeights *w)
{
  if (w == NULL)
    return;
  for (guint i = 0; i < w->n_layers; i++)
    layer_clear (&w->layers[i]);
  g_free (w->layers);
  g_free (w->source);
  g_free (w->pca_e);
  g_free (w->pca_mu);
  g_free (w->in_mean);
  g_free (w->in_std);
  g_clear_pointer (&w->metadata, g_hash_table_unref);
  g_strfreev (w->labels);
  g_free (w->key);
  cnn_int8_unref (w->q8);
  pthread_mutex_destroy (&w->lazy);
  g_free (w);
}

static void
layer_copy (Layer *dst, const Layer *src)
{
  *dst = *src;
  dst->name = g_strdup (src->name);
  gsize nw = src->kind == LAYER_CONV ? (gsize) 9 * src->in_c * src->out_c
      : src->kind == LAYER_DW        ? (gsize) 9 * src->out_c
                                     : (gsize) src->in_c * src->out_c;
  dst->w = src->w ? g_memdup2 (src->w, sizeof (float) * nw) : NULL;
  dst->b = src->b ? g_memdup2 (src->b, sizeof (float) * src->out_c) : NULL;
  memset (&dst->w16, 0, sizeof dst->w16);
  if (src->w16.f16 != NULL)
    cony_gemv_matrix_init_f16 (&dst->w16, g_memdup2 (src->w16.f16, sizeof (guint16) * nw),
        src->w16.rows, src->w16.cols, TRUE);
  dst->q = src->q ? g_memdup2 (src->q, nw) : NULL; /* packed or not, as q_packed says */
  dst->qscale = src->qscale ? g_memdup2 (src->qscale, sizeof (float) * src->out_c) : NULL;
  /* Derived forms are made again on first use. */
  dst->wino[0] = dst->wino[1] = NULL;
  dst->wino_packed[0] = dst->wino_packed[1] = FALSE;
}

/* A private deep copy of @src (the caller holds a user of it). */
CnnWeights *
cnn_weights_copy (CnnWeights *src)
{
  CnnWeights *w = g_new (CnnWeights, 1);
  *w = *src;
  pthread_mutex_init (&w->lazy, NULL); /* not src's (which may be locked) */
  w->users = 1;
  w->key = NULL;
  w->source = g_strdup (src->source);
  w->metadata = src->metadata ? g_hash_table_ref (src->metadata) : NULL; /* never changed */
  w->labels = g_strdupv (src->labels);
  w->pca_e = src->pca_e ? g_memdup2 (src->pca_e, sizeof (float) * src->out_dim * src->out_dim)
                        : NULL;
  w->pca_mu = src->pca_mu ? g_memdup2 (src->pca_mu, sizeof (float) * src->out_dim) : NULL;
  w->in_mean = src->in_mean ? g_memdup2 (src->in_mean, sizeof (float) * src->in_c) : NULL;
  w->in_std = src->in_std ? g_memdup2 (src->in_std, sizeof (float) * src->in_c) : NULL;
  w->q8 = src->q8 ? cnn_int8_ref (src->q8) : NULL;
  w->layers = g_new0 (Layer, src->n_layers);
  pthread_mutex_lock (&src->lazy); /* q may be packed meanwhile */
  for (guint i = 0; i < src->n_layers; i++)
    layer_copy (&w->layers[i], &src->layers[i]);
  pthread_mutex_unlock (&src->lazy);
  return w;
}

guint
cnn_same_out (guint in, guint stride, guint *pad_before)
{
  guint out = (in + stride - 1) / stride;
  gint64 total = (gint64) (out - 1) * stride + 3 - in;
  *pad_before = total > 0 ? (guint) (total / 2) : 0;
  return out;
}

static gboolean
chain_error (const CnnWeights *cnn, const Layer *l, const char *what, gsize got, gsize want,
    GError **error)
{
  g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
      "%s: tensor %s.weight has %" G_GSIZE_FORMAT " %s, expected %" G_GSIZE_FORMAT
      " (the previous layer's output)",
      cnn->source, l->name, got, what, want);
  return FALSE;
}

/* A residual add at layer @i of layer add_from's output, on an @h x @w x @c map: the
 * shapes must match, and no other residual may start or end in between (the forward
 * pass saves one map at a time: MobileNet-v2's blocks do not nest). */
static gboolean
add_geometry (CnnWeights *cnn, guint i, guint h, guint w, guint c, GError **error)
{
  Layer *l = &cnn->layers[i];
  guint k = l->add_from;
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

/* Fills in every layer's geometry from the input size; checks that each layer's
 * input matches the previous layer's output (the FC input the flattened map). */
gboolean
cnn_finish_geometry (CnnWeights *cnn, GError **error)
{
  guint h = cnn->in_h, w = cnn->in_w, c = cnn->in_c;
  gboolean flat = FALSE;
  cnn->max_act = (gsize) h * w * c;
  cnn->max_col = 0;
  cnn->first_fc = cnn->n_layers;
  cnn->emb_dim = 0;
  cnn->max_keep = 0;
  for (guint i = 0; i < cnn->n_layers; i++) {
    Layer *l = &cnn->layers[i];
    l->in_h = h;
    l->in_w = w;
    if (l->stride == 0)
      l->stride = 1;
    if (l->relu_max == 0.0f)
      l->relu_max = INFINITY;
    gboolean head = l->kind == LAYER_SIGMOID || l->kind == LAYER_SOFTMAX;
    if (flat && l->kind != LAYER_FC && !head) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: %s is a conv or pool layer after a fully connected one", cnn->source, l->name);
      return FALSE;
    }
    if (l->kind == LAYER_CONV) {
      if (l->in_c != c)
        return chain_error (cnn, l, "input channels", l->in_c, c, error);
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
      h = oh;
      w = ow;
      c = l->out_c;
    } else if (l->kind == LAYER_DW) {
      if (l->in_c != c)
        return chain_error (cnn, l, "channels", l->in_c, c, error);
      guint pad_top, pad_left;
      h = cnn_same_out (h, l->stride, &pad_top);
      w = cnn_same_out (w, l->stride, &pad_left);
      l->pad_top = pad_top;
      l->pad_left = pad_left;
    } else if (l->kind == LAYER_PW) {
      if (l->in_c != c)
        return chain_error (cnn, l, "input channels", l->in_c, c, error);
      c = l->out_c;
    } else if (l->kind == LAYER_POOL) {
      l->in_c = c;
      l->out_c = c;
      if (h < 2 || w < 2) {
        g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
            "%s: max-pool at %s gets a %ux%u map, too small to pool (input %ux%u)", cnn->source,
            l->name, h, w, cnn->in_h, cnn->in_w);
        return FALSE;
      }
      h /= 2;
      w /= 2;
    } else if (l->kind == LAYER_GAP) {
      l->in_c = c;
      l->out_c = c;
      h = w = 1;
    } else if (head) {
      if (i == 0 || cnn->layers[i - 1].kind != LAYER_FC) {
        g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
            "%s: %s (%s) must follow a fully connected layer", cnn->source, l->name,
            l->kind == LAYER_SOFTMAX ? "softmax" : "sigmoid");
        return FALSE;
      }
      l->in_c = l->out_c = c;
    } else if (l->kind == LAYER_ADD) {
      if (!add_geometry (cnn, i, h, w, c, error))
        return FALSE;
    } else {
      if (!flat) {
        cnn->first_fc = i;
        flat = TRUE;
      }
      gsize in = (gsize) h * w * c;
      if (l->in_c != in) {
        g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
            "%s: tensor %s.weight has %u inputs, expected %" G_GSIZE_FORMAT " (%ux%ux%u)",
            cnn->source, l->name, l->in_c, in, h, w, c);
        return FALSE;
      }
      h = w = 1;
      c = l->out_c;
    }
    if (l->kind == LAYER_DW)
      l->out_c = c;
    if (l->kind != LAYER_FC && !head) {
      l->out_h = h;
      l->out_w = w;
      cnn->feat_dim = h * w * c;
    } else {
      l->out_h = l->out_w = 1;
    }
    cnn->max_act = MAX (cnn->max_act, (gsize) h * w * c);
  }
  if (!flat && cnn->network->needs_fc) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
        "%s: no fully connected layer (tensor embeddings.K.weight) found", cnn->source);
    return FALSE;
  }
  if (cnn->n_layers == 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING, "%s: the network has no layers",
        cnn->source);
    return FALSE;
  }
  if (cnn->first_fc > 0 && cnn->layers[cnn->first_fc - 1].kind == LAYER_GAP)
    cnn->emb_dim = cnn->layers[cnn->first_fc - 1].out_c;
  cnn->out_dim = flat ? c : cnn->feat_dim;
  /* Scratch sizes come from the file (input size metadata, channel widths): refuse
   * absurd ones instead of failing an allocation. */
  gsize limit = (gsize) 1 << 28; /* floats = 1 GiB per buffer */
  if (cnn->max_act > limit || cnn->max_col > limit || cnn->max_wv > limit || cnn->max_wm > limit) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: a %ux%ux%u input needs scratch buffers over 1 GiB; refusing the model", cnn->source,
        cnn->in_h, cnn->in_w, cnn->in_c);
    return FALSE;
  }
  /* Batched conv scratch stays under 256 MB per buffer. */
  gsize biggest = MAX (MAX (cnn->max_act, cnn->max_col), MAX (cnn->max_wv, cnn->max_wm));
  cnn->conv_batch = CLAMP (((gsize) 1 << 26) / MAX (biggest, 1), 1, CONV_BATCH);
  return TRUE;
}
