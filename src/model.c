/* Loading encoder-classifier model files (docs/model-format.md). */
#include "cony/model.h"
#include "cony/error.h"
#include "cony/labels.h"
#include "cony/safetensors.h"
#include "cnnref-private.h"
#include "fusion-private.h"

#include <string.h>
#include <json-glib/json-glib.h>

/* Generous limits that keep a lying config from asking for absurd allocations. */
#define MAX_DIM CONY_ATTENTION_MAX_DIM
#define MAX_WINDOW CONY_ATTENTION_MAX_WINDOW /* what every variant serves (attention.h) */
#define MAX_CLASSES 100000

/* The integer @n (named @name in errors) in [lo, hi] -> *@out. */
static gboolean
int_value (JsonNode *n, const char *origin, const char *name, int lo, int hi, int *out,
    GError **error)
{
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_INT64) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: model config: '%s' must be an integer",
        origin, name);
    return FALSE;
  }
  gint64 v = json_node_get_int (n);
  if (v < lo || v > hi) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: model config: '%s' = %" G_GINT64_FORMAT " is out of range (expected [%d, %d])", origin,
        name, v, lo, hi);
    return FALSE;
  }
  *out = (int) v;
  return TRUE;
}

static gboolean
get_int (JsonObject *obj, const char *origin, const char *key, gboolean required, int def, int lo,
    int hi, int *out, GError **error)
{
  JsonNode *n = json_object_get_member (obj, key);
  if (!n) {
    if (required) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
          "%s: model config: key '%s' is missing "
          "(expected an integer in [%d, %d])",
          origin, key, lo, hi);
      return FALSE;
    }
    *out = def;
    return TRUE;
  }
  return int_value (n, origin, key, lo, hi, out, error);
}

static const char *
get_string (JsonObject *obj, const char *origin, const char *key, gboolean required,
    const char *def, GError **error)
{
  JsonNode *n = json_object_get_member (obj, key);
  if (!n) {
    if (required)
      g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING, "%s: model config: key '%s' is missing",
          origin, key);
    return required ? NULL : def;
  }
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: model config: '%s' must be a string",
        origin, key);
    return NULL;
  }
  return json_node_get_string (n);
}

static gboolean
parse_variant (const char *name, const char *origin, int block, ConyAttentionVariant *v,
    GError **error)
{
  if (name && cony_attention_variant_from_name (name, v))
    return TRUE;
  g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
      "%s: model config: attention of block %d is '%s' (expected regular, continual, "
      "nystrom, nystrom-fixed, cony, cony-fixed or vcc)",
      origin, block, name ? name : "(not a string)");
  return FALSE;
}

/* "input_groups" (rule 21 of models/audio/EXPERIMENTS.md, rejected) is no longer read:
 * a file that has it is refused rather than run without its input prior. */
static gboolean
refuse_input_groups (JsonObject *obj, const char *origin, GError **error)
{
  if (!json_object_has_member (obj, "input_groups"))
    return TRUE;
  g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
      "%s: model config: 'input_groups' is no longer supported (a rejected experiment, "
      "rule 21 of models/audio/EXPERIMENTS.md; its commit runs such files)",
      origin);
  return FALSE;
}

void
cony_model_config_clear (ConyModelConfig *config)
{
  g_strfreev (config->labels);
  g_free (config->frontend_json);
  cony_cnn_ref_clear (&config->cnn);
  g_free (config->config_json);
  memset (config, 0, sizeof *config);
}

gboolean
cony_model_config_parse (const char *json, const char *origin, ConyModelConfig *c, GError **error)
{
  memset (c, 0, sizeof *c);
  g_autoptr (JsonParser) parser = json_parser_new ();
  GError *local = NULL;
  g_autofree char *marked = cony_json_mark_nul (json); /* so "a\u0000b" is not read as "a" */
  if (!json_parser_load_from_data (parser, marked, -1, &local)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: model config is not valid JSON: %s",
        origin, local->message);
    g_error_free (local);
    return FALSE;
  }
  JsonNode *root = json_parser_get_root (parser);
  if (!root || !JSON_NODE_HOLDS_OBJECT (root)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: model config is not a JSON object",
        origin);
    return FALSE;
  }
  JsonObject *o = json_node_get_object (root);
  c->config_json = g_strdup (json);

  const char *arch = get_string (o, origin, "architecture", TRUE, NULL, error);
  if (!arch)
    goto fail;
  if (strcmp (arch, CONY_MODEL_ARCHITECTURE) != 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: model config: architecture is '%s', "
        "expected '%s'",
        origin, arch, CONY_MODEL_ARCHITECTURE);
    goto fail;
  }
  if (!get_int (o, origin, "d_in", TRUE, 0, 1, MAX_DIM, &c->d_in, error)
      || !get_int (o, origin, "d", TRUE, 0, 1, MAX_DIM, &c->d, error)
      || !get_int (o, origin, "heads", TRUE, 0, 1, MAX_DIM, &c->heads, error)
      || !get_int (o, origin, "ff", TRUE, 0, 1, 4 * MAX_DIM, &c->ff, error)
      || !get_int (o, origin, "blocks", TRUE, 0, 1, CONY_MODEL_MAX_BLOCKS, &c->blocks, error)
      || !get_int (o, origin, "window", TRUE, 0, 1, MAX_WINDOW, &c->window, error)
      || !get_int (o, origin, "landmarks", TRUE, 0, 1, CONY_ATTENTION_MAX_LANDMARKS, &c->landmarks,
          error)
      || !get_int (o, origin, "pinv_iterations", FALSE, 6, 1, 1000, &c->pinv_iterations, error)
      || !get_int (o, origin, "vcc_budget", FALSE, 64, 1, MAX_WINDOW, &c->vcc_budget, error)
      || !get_int (o, origin, "vcc_block", FALSE, 1, 1, MAX_WINDOW, &c->vcc_block, error)
      || !get_int (o, origin, "vcc_exact_tail", FALSE, 0, 0, MAX_WINDOW, &c->vcc_exact_tail, error)
      || !get_int (o, origin, "tokens_per_step", FALSE, 1, 1, MAX_WINDOW, &c->tokens_per_step,
          error))
    goto fail;
  if (c->vcc_exact_tail >= c->vcc_budget) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: model config: 'vcc_exact_tail' = %d must be "
        "smaller than 'vcc_budget' = %d",
        origin, c->vcc_exact_tail, c->vcc_budget);
    goto fail;
  }
  if (c->tokens_per_step > c->window) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: model config: 'tokens_per_step' = %d is "
        "larger than the window (%d tokens): a step's tokens must fit in the window",
        origin, c->tokens_per_step, c->window);
    goto fail;
  }
  {
    int k = c->tokens_per_step, rows = (2 * c->window - 1 + k - 1) / k * k;
    if (!get_int (o, origin, "positional_rows", FALSE, rows, 1, 2 * MAX_WINDOW, &c->positional_rows,
            error))
      goto fail;
  }
  if (c->d % c->heads != 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: model config: d = %d is not a multiple "
        "of heads = %d",
        origin, c->d, c->heads);
    goto fail;
  }

  JsonNode *att = json_object_get_member (o, "attention");
  if (!att) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
        "%s: model config: key 'attention' is missing "
        "(a variant name, or one per block)",
        origin);
    goto fail;
  }
  if (JSON_NODE_HOLDS_ARRAY (att)) {
    JsonArray *a = json_node_get_array (att);
    if ((int) json_array_get_length (a) != c->blocks) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: model config: 'attention' lists %u "
          "variants for %d blocks",
          origin, json_array_get_length (a), c->blocks);
      goto fail;
    }
    for (int b = 0; b < c->blocks; b++) {
      JsonNode *e = json_array_get_element (a, b);
      const char *name = JSON_NODE_HOLDS_VALUE (e) && json_node_get_value_type (e) == G_TYPE_STRING
          ? json_node_get_string (e)
          : NULL;
      if (!parse_variant (name, origin, b, &c->attention[b], error))
        goto fail;
    }
  } else {
    const char *name = JSON_NODE_HOLDS_VALUE (att)
            && json_node_get_value_type (att) == G_TYPE_STRING
        ? json_node_get_string (att)
        : NULL;
    for (int b = 0; b < c->blocks; b++)
      if (!parse_variant (name, origin, b, &c->attention[b], error))
        goto fail;
  }

  if (!refuse_input_groups (o, origin, error))
    goto fail;
  c->has_fusion = json_object_has_member (o, "fusion");

  const char *pinv = get_string (o, origin, "pinv", FALSE, "exact", error);
  if (!pinv)
    goto fail;
  if (strcmp (pinv, "exact") == 0) {
    c->pinv = CONY_PINV_EXACT;
  } else if (strcmp (pinv, "iterative") == 0) {
    c->pinv = CONY_PINV_ITERATIVE;
  } else {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: model config: pinv is '%s' (expected "
        "'exact' or 'iterative')",
        origin, pinv);
    goto fail;
  }

  const char *pe = get_string (o, origin, "positional_encoding", TRUE, NULL, error);
  if (!pe)
    goto fail;
  if (strcmp (pe, "learned") == 0) {
    c->positional = CONY_POSITIONAL_LEARNED;
  } else if (strcmp (pe, "cyclic") == 0) {
    c->positional = CONY_POSITIONAL_CYCLIC;
  } else {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: model config: positional_encoding is "
        "'%s' (expected 'learned' or 'cyclic')",
        origin, pe);
    goto fail;
  }

  const char *output = get_string (o, origin, "output", FALSE, "softmax", error);
  if (!output)
    goto fail;
  if (strcmp (output, "softmax") == 0) {
    c->output = CONY_OUTPUT_SOFTMAX;
  } else if (strcmp (output, "sigmoid") == 0) {
    c->output = CONY_OUTPUT_SIGMOID;
  } else {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: model config: output is '%s' "
        "(expected 'softmax' or 'sigmoid')",
        origin, output);
    goto fail;
  }

  JsonNode *labels = json_object_get_member (o, "labels");
  if (!labels || !JSON_NODE_HOLDS_ARRAY (labels)) {
    g_set_error (error, CONY_ERROR, labels ? CONY_ERROR_FORMAT : CONY_ERROR_MISSING,
        "%s: model config: 'labels' must be a list of class names", origin);
    goto fail;
  }
  JsonArray *la = json_node_get_array (labels);
  guint nl = json_array_get_length (la);
  if (nl < 1 || nl > MAX_CLASSES) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: model config: 'labels' has %u entries "
        "(expected 1 to %d)",
        origin, nl, MAX_CLASSES);
    goto fail;
  }
  c->n_classes = (int) nl;
  c->labels = g_new0 (char *, nl + 1);
  for (guint i = 0; i < nl; i++) {
    JsonNode *e = json_array_get_element (la, i);
    if (!JSON_NODE_HOLDS_VALUE (e) || json_node_get_value_type (e) != G_TYPE_STRING) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
          "%s: model config: labels[%u] is not a string", origin, i);
      goto fail;
    }
    const char *label = json_node_get_string (e);
    if (!cony_label_check (label, strlen (label), error)) {
      g_prefix_error (error, "%s: model config: labels[%u] ", origin, i);
      goto fail;
    }
    c->labels[i] = g_strdup (label);
  }

  JsonNode *fe = json_object_get_member (o, "frontend");
  if (fe && !JSON_NODE_HOLDS_NULL (fe)) {
    if (!JSON_NODE_HOLDS_OBJECT (fe)) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
          "%s: model config: 'frontend' must be an object", origin);
      goto fail;
    }
    c->frontend_json = json_to_string (fe, FALSE);
    JsonObject *f = json_node_get_object (fe);
    const char *bad_key;
    if (!cony_cnn_ref_read (f, &c->cnn, &bad_key)) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
          "%s: model config: frontend.%s is not a string", origin, bad_key);
      goto fail;
    }
  }
  return TRUE;

fail:
  cony_model_config_clear (c);
  return FALSE;
}

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

  if (c->has_fusion) { /* a fused model runs only with a valid fusion part */
    ConyFusion fusion;
    if (!cony_fusion_read (st, c, &fusion, error))
      return NULL;
    cony_fusion_clear (&fusion);
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
  const ConyModelConfig *c = &model->config;
  ConyAttentionConfig ac = { 0 };
  (void) block_index;
  ac.variant = variant;
  ac.d = c->d;
  ac.heads = c->heads;
  ac.window = c->window;
  ac.landmarks = c->landmarks;
  ac.retroactive = retroactive;
  ac.pinv = c->pinv;
  ac.pinv_iterations = c->pinv_iterations;
  ac.resync_interval = 0;
  ac.vcc_budget = c->vcc_budget;
  ac.vcc_block = c->vcc_block;
  ac.vcc_exact_tail = c->vcc_exact_tail;
  return ac;
}
