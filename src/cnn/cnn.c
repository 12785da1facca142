/* VGG-style CNN engine: lifetime, geometry, getters (see include/cony/cnn.h, cnn-private.h). */
#include "cnn-private.h"
#include "cony/error.h"
#include "cony/safetensors.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- helpers */

ConyCnn *
cnn_new (CnnWeights *w)
{
  if (w == NULL)
    return NULL;
  ConyCnn *cnn = g_new0 (ConyCnn, 1);
  cnn->w = w;
  cnn->final_relu = w->final_relu;
  cnn->pca_e = w->pca_e;
  cnn->pca_mu = w->pca_mu;
  cnn_ensure_conv_scratch (cnn, 1);
  return cnn;
}

ConyCnn *
cony_cnn_load (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  return cnn_new (cnn_weights_acquire (path, TRUE, error));
}

ConyCnn *
cony_cnn_load_private (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  return cnn_new (cnn_weights_acquire (path, FALSE, error));
}

void
cony_cnn_free (ConyCnn *cnn)
{
  if (cnn == NULL)
    return;
  cnn_weights_release (cnn->w);
  g_free (cnn->own_pca_e);
  g_free (cnn->own_pca_mu);
  g_free (cnn->act_a);
  g_free (cnn->act_b);
  g_free (cnn->res);
  g_free (cnn->col);
  g_free (cnn->fc_a);
  g_free (cnn->fc_b);
  g_free (cnn->fc_w32);
  g_free (cnn->wv);
  g_free (cnn->wm);
  g_free (cnn->wt);
  g_free (cnn->norm);
  g_free (cnn->col_sum);
  g_free (cnn->norm_row);
  g_free (cnn->panel);
  cnn_int8_scratch_free (cnn);
  g_free (cnn);
}

gboolean
cony_cnn_load_pca (ConyCnn *cnn, const char *path, GError **error)
{
  g_return_val_if_fail (cnn != NULL && path != NULL, FALSE);
  /* This instance's own: the shared weights (and their file PCA) stay as they are. */
  if (!cnn_read_pca_file (path, cnn->w->out_dim, &cnn->own_pca_e, &cnn->own_pca_mu, error))
    return FALSE;
  cnn->pca_e = cnn->own_pca_e;
  cnn->pca_mu = cnn->own_pca_mu;
  return TRUE;
}

/* Scratch of the conv stack for @nb examples at once. */
void
cnn_ensure_conv_scratch (ConyCnn *cnn, gsize nb)
{
  if (cnn->conv_cap >= nb)
    return;
  g_free (cnn->act_a);
  g_free (cnn->act_b);
  g_free (cnn->norm);
  const CnnWeights *w = cnn->w;
  cnn->act_a = g_new (float, nb * w->max_act);
  cnn->act_b = g_new (float, nb * w->max_act);
  g_free (cnn->res);
  cnn->res = w->max_keep ? g_new (float, nb * w->max_keep) : NULL;
  cnn->norm = w->in_mean != NULL || w->center_height
      ? g_new (float, nb * w->in_h * w->in_w * w->in_c)
      : NULL;
  if (w->center_height && cnn->col_sum == NULL)
    cnn->col_sum = g_new (double, (gsize) w->in_w * w->in_c);
  if (w->in_mean != NULL && cnn->norm_row == NULL)
    cnn->norm_row = cnn_norm_row_new (w);
  /* Winograd buffers: reallocated at this size on first use. */
  g_clear_pointer (&cnn->wv, g_free);
  g_clear_pointer (&cnn->wm, g_free);
  g_clear_pointer (&cnn->wt, g_free);
  cnn->conv_cap = nb;
}

ConyCnn *
cony_cnn_new_random (const char *layout, guint input_height, guint input_width,
    guint input_channels, guint32 seed, GError **error)
{
  g_return_val_if_fail (layout != NULL, NULL);
  return cnn_new (
      cnn_weights_random (layout, input_height, input_width, input_channels, seed, error));
}

/* ---------------------------------------------------------------- getters */

guint
cony_cnn_get_input_height (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn, 0);
  return cnn->w->in_h;
}
guint
cony_cnn_get_input_width (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn, 0);
  return cnn->w->in_w;
}
guint
cony_cnn_get_input_channels (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn, 0);
  return cnn->w->in_c;
}
guint
cony_cnn_get_embedding_size (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn, 0);
  return cnn->w->emb_dim;
}
gboolean
cony_cnn_has_scoring_head (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn, FALSE);
  const CnnWeights *w = cnn->w;
  if (w->labels != NULL && g_strv_length (w->labels) == w->out_dim)
    return TRUE;
  return w->n_layers > 0 && w->layers[w->n_layers - 1].kind == LAYER_SIGMOID;
}

gboolean
cony_cnn_is_mobilenet (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn, FALSE);
  return g_str_has_prefix (cnn->w->network->display_name, "MobileNet");
}

const char *
cony_cnn_get_network_name (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, NULL);
  return cnn->w->network->display_name;
}

ConyCnnOutput
cony_cnn_get_output (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn, 0);
  return cnn->output;
}

guint
cony_cnn_get_output_size (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, 0);
  return cnn->output == CONY_CNN_OUTPUT_EMBEDDING ? cnn->w->emb_dim : cnn->w->out_dim;
}

gboolean
cony_cnn_set_output (ConyCnn *cnn, ConyCnnOutput output, GError **error)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  if (output != CONY_CNN_OUTPUT_SCORES && output != CONY_CNN_OUTPUT_EMBEDDING) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "%s: unknown output %d", cnn->w->source,
        (int) output);
    return FALSE;
  }
  if (output == CONY_CNN_OUTPUT_EMBEDDING && cnn->w->emb_dim == 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: the network has no embedding output (no global average pool before "
        "its fully connected layers)",
        cnn->w->source);
    return FALSE;
  }
  cnn->output = output;
  return TRUE;
}

const char *
cony_cnn_get_metadata (const ConyCnn *cnn, const char *key)
{
  g_return_val_if_fail (cnn != NULL && key != NULL, NULL);
  return cnn->w->metadata ? g_hash_table_lookup (cnn->w->metadata, key) : NULL;
}

const char *const *
cony_cnn_get_labels (const ConyCnn *cnn, guint *n)
{
  g_return_val_if_fail (cnn != NULL, NULL);
  if (n)
    *n = cnn->w->labels ? g_strv_length (cnn->w->labels) : 0;
  return (const char *const *) cnn->w->labels;
}

gsize
cony_cnn_get_input_size (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, 0);
  return (gsize) cnn->w->in_h * cnn->w->in_w * cnn->w->in_c;
}

guint64
cony_cnn_get_n_params (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, 0);
  guint64 n = 0;
  for (guint i = 0; i < cnn->w->n_layers; i++)
    n += cnn_layer_n_params (&cnn->w->layers[i]);
  return n;
}

/* Twice the multiply-add weights per output position: the head's (flat layers) in
 * @fc_flops, the conv stack's in @conv_flops. */
void
cony_cnn_get_flops (const ConyCnn *cnn, guint64 *conv_flops, guint64 *fc_flops)
{
  g_return_if_fail (cnn != NULL);
  guint64 cf = 0, ff = 0;
  for (guint i = 0; i < cnn->w->n_layers; i++) {
    const Layer *l = &cnn->w->layers[i];
    const CnnLayerClass *k = cnn_layer_class (l->kind);
    guint64 f = k->n_weights ? 2 * (guint64) l->out_h * l->out_w * k->n_weights (l) : 0;
    if (k->flat)
      ff += f;
    else
      cf += f;
  }
  if (conv_flops)
    *conv_flops = cf;
  if (fc_flops)
    *fc_flops = ff;
}

char *
cony_cnn_describe (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, NULL);
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "input %ux%ux%u (HWC)\n", cnn->w->in_h, cnn->w->in_w, cnn->w->in_c);
  if (cnn->w->center_height)
    g_string_append (s, "center: each column's mean over the height removed\n");
  if (cnn->w->in_mean != NULL) {
    g_string_append (s, "normalise (x - mean) / std per channel:");
    for (guint c = 0; c < cnn->w->in_c && c < 8; c++)
      g_string_append_printf (s, " (%g, %g)", cnn->w->in_mean[c], cnn->w->in_std[c]);
    g_string_append (s, cnn->w->in_c > 8 ? " ...\n" : "\n");
  }
  for (guint i = 0; i < cnn->w->n_layers; i++) {
    const Layer *l = &cnn->w->layers[i];
    gboolean relu = l->relu || (i + 1 == cnn->w->n_layers && cnn->final_relu);
    g_string_append_printf (s, "%-24s ", l->name);
    cnn_layer_class (l->kind)->describe (s, cnn->w, l, relu);
  }
  guint64 cf, ff;
  cony_cnn_get_flops (cnn, &cf, &ff);
  g_string_append_printf (s, "%" G_GUINT64_FORMAT " parameters, %.1f MFLOP per example%s\n",
      cony_cnn_get_n_params (cnn), (cf + ff) * 1e-6,
      cnn->pca_e ? ", PCA postprocess available" : "");
  g_string_append_printf (s, "output: %s, %u values",
      cnn->output == CONY_CNN_OUTPUT_EMBEDDING ? "embedding" : "scores",
      cony_cnn_get_output_size (cnn));
  if (cnn->w->emb_dim > 0)
    g_string_append_printf (s, " (embedding %u, scores %u)", cnn->w->emb_dim, cnn->w->out_dim);
  if (cnn->w->labels != NULL)
    g_string_append_printf (s, ", %u labels", g_strv_length (cnn->w->labels));
  g_string_append_c (s, '\n');
  return g_string_free (s, FALSE);
}

gboolean
cony_cnn_get_final_relu (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  return cnn->final_relu;
}

void
cony_cnn_set_final_relu (ConyCnn *cnn, gboolean final_relu)
{
  g_return_if_fail (cnn != NULL);
  cnn->final_relu = final_relu;
}

gboolean
cony_cnn_get_normalization (const ConyCnn *cnn, const float **mean, const float **std)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  if (mean)
    *mean = cnn->w->in_mean;
  if (std)
    *std = cnn->w->in_std;
  return cnn->w->in_mean != NULL;
}

gboolean
cony_cnn_get_center_height (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  return cnn->w->center_height;
}

gboolean
cony_cnn_get_global_pool (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  return cnn->w->global_pool;
}

gboolean
cony_cnn_has_pca (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  return cnn->pca_e != NULL;
}

gboolean
cony_cnn_get_fc_f16 (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  gboolean any = FALSE;
  for (guint i = cnn->w->first_fc; i < cnn->w->n_layers; i++) {
    if (cnn->w->layers[i].kind != LAYER_FC)
      continue; /* a sigmoid */
    if (cnn->w->layers[i].w16.f16 == NULL)
      return FALSE;
    any = TRUE;
  }
  return any;
}

gboolean
cony_cnn_set_fc_f16 (ConyCnn *cnn, gboolean f16, GError **error)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  if (f16) {
    /* Check the range first so that a refusal changes nothing. */
    for (guint i = cnn->w->first_fc; i < cnn->w->n_layers; i++) {
      const Layer *l = &cnn->w->layers[i];
      gsize n = (gsize) l->in_c * l->out_c;
      for (gsize j = 0; l->w != NULL && j < n; j++)
        if (!(fabsf (l->w[j]) < 65520.0f)) {
          g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
              "%s: tensor %s.weight holds %g at flat index %" G_GSIZE_FORMAT
              ", outside the F16 range",
              cnn->w->source, l->name, l->w[j], j);
          return FALSE;
        }
    }
  }
  gboolean changes = FALSE;
  for (guint i = cnn->w->first_fc; i < cnn->w->n_layers; i++)
    changes |= f16 ? cnn->w->layers[i].w != NULL : cnn->w->layers[i].w16.f16 != NULL;
  if (!changes)
    return TRUE;
  /* Other users of the weights keep them as they are. */
  cnn_weights_make_private (cnn);
  for (guint i = cnn->w->first_fc; i < cnn->w->n_layers; i++) {
    Layer *l = &cnn->w->layers[i];
    gsize n = (gsize) l->in_c * l->out_c;
    if (f16 && l->w != NULL) {
      guint16 *h = g_new (guint16, n);
      for (gsize j = 0; j < n; j++)
        h[j] = cony_float_to_half (l->w[j]);
      cony_gemv_matrix_init_f16 (&l->w16, h, (int) l->out_c, (int) l->in_c, TRUE);
      g_clear_pointer (&l->w, g_free);
    } else if (!f16 && l->w16.f16 != NULL) {
      l->w = g_new (float, n);
      cony_half_expand (l->w16.f16, n, l->w);
      cony_gemv_matrix_clear (&l->w16);
    }
  }
  return TRUE;
}

void
cony_cnn_set_conv_algorithm (ConyCnn *cnn, ConyCnnConvAlgorithm algorithm)
{
  g_return_if_fail (cnn != NULL);
  g_return_if_fail (algorithm <= CONY_CNN_CONV_WINOGRAD4);
  cnn->conv_algo = algorithm;
}

ConyCnnConvAlgorithm
cony_cnn_get_conv_algorithm (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, CONY_CNN_CONV_AUTO);
  return cnn->conv_algo;
}

void
cony_cnn_set_profiling (ConyCnn *cnn, gboolean enable)
{
  g_return_if_fail (cnn != NULL);
  cnn->profiling = enable;
  memset (&cnn->prof, 0, sizeof cnn->prof);
}

void
cony_cnn_get_profile (const ConyCnn *cnn, ConyCnnProfile *profile)
{
  g_return_if_fail (cnn != NULL && profile != NULL);
  *profile = cnn->prof;
}

/* ---------------------------------------------------------------- PCA */

gboolean
cony_cnn_postprocess (const ConyCnn *cnn, ConyCnnPostprocess mode, const float *emb, gsize n,
    float *out, GError **error)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  g_return_val_if_fail (n == 0 || (emb != NULL && out != NULL), FALSE);
  guint d = cnn->w->out_dim;
  if (mode == CONY_CNN_POSTPROCESS_NONE) {
    if (out != emb && n > 0)
      memmove (out, emb, sizeof (float) * n * cony_cnn_get_output_size (cnn));
    return TRUE;
  }
  if (cnn->output == CONY_CNN_OUTPUT_EMBEDDING) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: the PCA postprocess applies to the last layer's output, not to the "
        "embedding output",
        cnn->w->source);
    return FALSE;
  }
  if (mode != CONY_CNN_POSTPROCESS_TF && mode != CONY_CNN_POSTPROCESS_TORCH) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "%s: unknown postprocess mode %d",
        cnn->w->source, (int) mode);
    return FALSE;
  }
  if (cnn->pca_e == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
        "%s: the PCA postprocess needs tensors pca_eigen_vectors (%u, %u) and "
        "pca_means (%u), which the model does not have",
        cnn->w->source, d, d, d);
    return FALSE;
  }
  double *centred = g_new (double, d);
  float *centred_f = g_new (float, d);
  for (gsize r = 0; r < n; r++) {
    const float *e = emb + r * d;
    float *o = out + r * d;
    if (mode == CONY_CNN_POSTPROCESS_TF) {
      /* vggish_postprocess.py: float64 maths, then astype(uint8) truncation. */
      for (guint i = 0; i < d; i++)
        centred[i] = (double) e[i] - (double) cnn->pca_mu[i];
      for (guint j = 0; j < d; j++) {
        const float *row = cnn->pca_e + (gsize) j * d;
        double p = 0.0;
        for (guint i = 0; i < d; i++)
          p += (double) row[i] * centred[i];
        p = CLAMP (p, -2.0, 2.0);
        o[j] = (float) floor ((p + 2.0) * (255.0 / 4.0));
      }
    } else {
      /* torchvggish: float32 maths, torch.round (half to even). */
      for (guint i = 0; i < d; i++)
        centred_f[i] = e[i] - cnn->pca_mu[i];
      for (guint j = 0; j < d; j++) {
        const float *row = cnn->pca_e + (gsize) j * d;
        float p = 0.0f;
        for (guint i = 0; i < d; i++)
          p += row[i] * centred_f[i];
        p = CLAMP (p, -2.0f, 2.0f);
        o[j] = rintf ((p + 2.0f) * (255.0f / 4.0f));
      }
    }
  }
  g_free (centred);
  g_free (centred_f);
  return TRUE;
}
