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
  const CnnLayerClass *k = cnn_layer_class (src->kind);
  gsize nw = k->n_weights ? k->n_weights (src) : 0;
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

gboolean
cnn_chain_error (const CnnWeights *cnn, const Layer *l, const char *what, gsize got, gsize want,
    GError **error)
{
  g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
      "%s: tensor %s.weight has %" G_GSIZE_FORMAT " %s, expected %" G_GSIZE_FORMAT
      " (the previous layer's output)",
      cnn->source, l->name, got, what, want);
  return FALSE;
}

/* Fills in every layer's geometry from the input size; checks that each layer's
 * input matches the previous layer's output (the FC input the flattened map). */
gboolean
cnn_finish_geometry (CnnWeights *cnn, GError **error)
{
  CnnShape s = { cnn->in_h, cnn->in_w, cnn->in_c, FALSE };
  cnn->max_act = (gsize) s.h * s.w * s.c;
  cnn->max_col = 0;
  cnn->first_fc = cnn->n_layers;
  cnn->emb_dim = 0;
  cnn->max_keep = 0;
  for (guint i = 0; i < cnn->n_layers; i++) {
    Layer *l = &cnn->layers[i];
    const CnnLayerClass *k = cnn_layer_class (l->kind);
    l->in_h = s.h;
    l->in_w = s.w;
    if (l->stride == 0)
      l->stride = 1;
    if (l->relu_max == 0.0f)
      l->relu_max = INFINITY;
    if (s.flat && !k->flat) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: %s is a conv or pool layer after a fully connected one", cnn->source, l->name);
      return FALSE;
    }
    if (!k->geometry (cnn, i, &s, error))
      return FALSE;
    if (!k->flat) {
      l->out_h = s.h;
      l->out_w = s.w;
      cnn->feat_dim = s.h * s.w * s.c;
    } else {
      l->out_h = l->out_w = 1;
    }
    cnn->max_act = MAX (cnn->max_act, (gsize) s.h * s.w * s.c);
  }
  gboolean flat = s.flat;
  guint c = s.c;
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
