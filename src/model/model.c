/* Loading encoder-classifier model files (docs/model-format.md): the tensors, checked
 * against the config that model-config.c parses, and the fusion part of fused files
 * (fusion.c, which reads configs through model-config.c, never through this file). */
#include "cony/model.h"
#include "cony/error.h"
#include "cony/safetensors.h"
#include "fusion-private.h"

#include <string.h>

/* One expected tensor: where it goes and its shape. */
typedef struct {
  char *name;
  float **dest;
  int ndim;
  gsize shape[3];
  gboolean optional;
} Expect;

static void expect_add (GPtrArray *list, float **dest, int ndim, gsize s0, gsize s1, gsize s2,
    gboolean optional, const char *fmt, ...) G_GNUC_PRINTF (8, 9);

static void
expect_add (GPtrArray *list, float **dest, int ndim, gsize s0, gsize s1, gsize s2,
    gboolean optional, const char *fmt, ...)
{
  Expect *e = g_new0 (Expect, 1);
  va_list ap;
  va_start (ap, fmt);
  e->name = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  e->dest = dest;
  e->ndim = ndim;
  e->shape[0] = s0;
  e->shape[1] = s1;
  e->shape[2] = s2;
  e->optional = optional;
  g_ptr_array_add (list, e);
}

static void
expect_free (gpointer p)
{
  Expect *e = p;
  g_free (e->name);
  g_free (e);
}

void
cony_model_free (ConyModel *m)
{
  if (!m)
    return;
  g_free (m->input_proj_weight);
  g_free (m->input_proj_bias);
  g_free (m->pos_embedding);
  for (int b = 0; b < CONY_MODEL_MAX_BLOCKS; b++) {
    ConyModelBlock *k = &m->block[b];
    g_free ((float *) k->attn.in_proj_weight);
    g_free ((float *) k->attn.in_proj_bias);
    g_free ((float *) k->attn.out_proj_weight);
    g_free ((float *) k->attn.out_proj_bias);
    g_free ((float *) k->attn.q_landmarks);
    g_free ((float *) k->attn.k_landmarks);
    g_free (k->norm1_weight);
    g_free (k->norm1_bias);
    g_free (k->ff1_weight);
    g_free (k->ff1_bias);
    g_free (k->ff2_weight);
    g_free (k->ff2_bias);
    g_free (k->norm2_weight);
    g_free (k->norm2_bias);
  }
  g_free (m->norm_weight);
  g_free (m->norm_bias);
  g_free (m->classifier_weight);
  g_free (m->classifier_bias);
  cony_fusion_free (m->fusion);
  cony_model_config_clear (&m->config);
  g_free (m->path);
  g_free (m);
}

ConyModel *
cony_model_load (const char *name, GError **error)
{
  g_autoptr (ConySafetensors) st = cony_safetensors_open (name, error);
  if (!st)
    return NULL;
  const char *path = cony_safetensors_path (st); /* the file @name found */
  const char *cfg = cony_safetensors_metadata (st, "config");
  if (!cfg) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
        "%s: no model config: __metadata__ needs a "
        "\"config\" entry holding the JSON config (see docs/model-format.md)",
        path);
    return NULL;
  }
  g_autoptr (ConyModel) m = g_new0 (ConyModel, 1);
  m->path = g_strdup (path);
  if (!cony_model_config_parse (cfg, path, &m->config, error))
    return NULL;
  const ConyModelConfig *c = &m->config;
  gsize d = c->d, din = c->d_in, ff = c->ff, hd = c->d / c->heads;

  g_autoptr (GPtrArray) ex = g_ptr_array_new_with_free_func (expect_free);
  expect_add (ex, &m->input_proj_weight, 2, d, din, 0, FALSE, "input_proj.weight");
  expect_add (ex, &m->input_proj_bias, 1, d, 0, 0, FALSE, "input_proj.bias");
  expect_add (ex, &m->pos_embedding, 2, c->positional_rows, d, 0, FALSE, "pos_embedding");
  for (int b = 0; b < c->blocks; b++) {
    ConyModelBlock *k = &m->block[b];
    gboolean fixed = cony_attention_variant_uses_fixed_landmarks (c->attention[b]);
    expect_add (ex, (float **) &k->attn.in_proj_weight, 2, 3 * d, d, 0, FALSE,
        "blocks.%d.attn.in_proj_weight", b);
    expect_add (ex, (float **) &k->attn.in_proj_bias, 1, 3 * d, 0, 0, FALSE,
        "blocks.%d.attn.in_proj_bias", b);
    expect_add (ex, (float **) &k->attn.out_proj_weight, 2, d, d, 0, FALSE,
        "blocks.%d.attn.out_proj.weight", b);
    expect_add (ex, (float **) &k->attn.out_proj_bias, 1, d, 0, 0, FALSE,
        "blocks.%d.attn.out_proj.bias", b);
    expect_add (ex, (float **) &k->attn.q_landmarks, 3, c->heads, c->landmarks, hd, !fixed,
        "blocks.%d.attn.q_landmarks", b);
    expect_add (ex, (float **) &k->attn.k_landmarks, 3, c->heads, c->landmarks, hd, !fixed,
        "blocks.%d.attn.k_landmarks", b);
    expect_add (ex, &k->norm1_weight, 1, d, 0, 0, FALSE, "blocks.%d.norm1.weight", b);
    expect_add (ex, &k->norm1_bias, 1, d, 0, 0, FALSE, "blocks.%d.norm1.bias", b);
    expect_add (ex, &k->ff1_weight, 2, ff, d, 0, FALSE, "blocks.%d.ff.0.weight", b);
    expect_add (ex, &k->ff1_bias, 1, ff, 0, 0, FALSE, "blocks.%d.ff.0.bias", b);
    expect_add (ex, &k->ff2_weight, 2, d, ff, 0, FALSE, "blocks.%d.ff.2.weight", b);
    expect_add (ex, &k->ff2_bias, 1, d, 0, 0, FALSE, "blocks.%d.ff.2.bias", b);
    expect_add (ex, &k->norm2_weight, 1, d, 0, 0, FALSE, "blocks.%d.norm2.weight", b);
    expect_add (ex, &k->norm2_bias, 1, d, 0, 0, FALSE, "blocks.%d.norm2.bias", b);
  }
  expect_add (ex, &m->norm_weight, 1, d, 0, 0, FALSE, "norm.weight");
  expect_add (ex, &m->norm_bias, 1, d, 0, 0, FALSE, "norm.bias");
  expect_add (ex, &m->classifier_weight, 2, c->n_classes, d, 0, FALSE, "classifier.weight");
  expect_add (ex, &m->classifier_bias, 1, c->n_classes, 0, 0, FALSE, "classifier.bias");

  /* Every tensor in the file must be one we know: a misnamed export is an error, not
   * a silently ignored tensor. */
  g_autoptr (GHashTable) known = g_hash_table_new (g_str_hash, g_str_equal);
  for (guint i = 0; i < ex->len; i++)
    g_hash_table_add (known, ((Expect *) g_ptr_array_index (ex, i))->name);
  for (guint i = 0; i < cony_safetensors_n_tensors (st); i++) {
    const ConyTensorInfo *t = cony_safetensors_tensor (st, i);
    if (c->has_fusion && g_str_has_prefix (t->name, CONY_FUSION_TENSOR_PREFIX))
      continue; /* checked by cony_fusion_read() below */
    if (!g_hash_table_contains (known, t->name)) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
          "%s: unexpected tensor '%s' (not part of a "
          "%d-block %s model; see docs/model-format.md)",
          path, t->name, c->blocks, CONY_MODEL_ARCHITECTURE);
      return NULL;
    }
  }

  if (c->has_fusion) { /* a fused model runs only with a valid fusion part (its gate) */
    ConyFusion *fusion = g_new0 (ConyFusion, 1);
    if (!cony_fusion_read (st, c, fusion, error)) {
      g_free (fusion);
      return NULL;
    }
    m->fusion = fusion;
    m->n_parameters += fusion->n_parameters; /* its absent tokens and gate are learned too */
  }

  for (guint i = 0; i < ex->len; i++) {
    Expect *e = g_ptr_array_index (ex, i);
    if (e->optional && !cony_safetensors_find (st, e->name))
      continue;
    *e->dest = cony_safetensors_get_f32 (st, e->name, e->ndim, e->shape, error);
    if (!*e->dest)
      return NULL;
    gsize numel = 1;
    for (int k = 0; k < e->ndim; k++)
      numel *= e->shape[k];
    m->n_parameters += numel;
  }
  for (int b = 0; b < c->blocks; b++) {
    ConyModelBlock *k = &m->block[b];
    if ((k->attn.q_landmarks != NULL) != (k->attn.k_landmarks != NULL)) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
          "%s: tensor 'blocks.%d.attn.%s_landmarks' is "
          "missing (the file has the other landmark tensor of the pair)",
          path, b, k->attn.q_landmarks ? "k" : "q");
      return NULL;
    }
    k->has_landmarks = k->attn.q_landmarks != NULL;
  }
  return g_steal_pointer (&m);
}

ConyAttentionConfig
cony_model_attention_config (const ConyModel *model, int block_index, ConyAttentionVariant variant,
    gboolean retroactive)
{
  (void) block_index; /* every block has the model's sizes */
  return cony_model_config_attention (&model->config, variant, retroactive);
}
