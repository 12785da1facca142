/* The JSON config of encoder-classifier model files (docs/model-format.md): parsed and
 * checked on its own, with no tensors. The bottom of the model files: model.c (the
 * loader) and fusion.c (the fusion part) read configs through this file, and it calls
 * neither of them. */
#include "cony/error.h"
#include "cony/labels.h"
#include "cony/model.h"
#include "cnnref-private.h"

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

/* The string @key, one of the two @names -> its index in *@out. */
static gboolean
get_choice (JsonObject *obj, const char *origin, const char *key, gboolean required,
    const char *const names[2], int *out, GError **error)
{
  const char *s = get_string (obj, origin, key, required, names[0], error);
  if (!s)
    return FALSE;
  for (int i = 0; i < 2; i++)
    if (strcmp (s, names[i]) == 0) {
      *out = i;
      return TRUE;
    }
  g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
      "%s: model config: %s is '%s' (expected '%s' or '%s')", origin, key, s, names[0], names[1]);
  return FALSE;
}

static gboolean
check_architecture (JsonObject *o, const char *origin, GError **error)
{
  const char *arch = get_string (o, origin, "architecture", TRUE, NULL, error);
  if (!arch)
    return FALSE;
  if (strcmp (arch, CONY_MODEL_ARCHITECTURE) != 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: model config: architecture is '%s', expected '%s'", origin, arch,
        CONY_MODEL_ARCHITECTURE);
    return FALSE;
  }
  return TRUE;
}

/* Every variant's own settings (the keys of its row in libcony's table), defaults
 * filled in: a model may be run with another variant than its own. */
static gboolean
read_variant_settings (JsonObject *o, const char *origin, ConyModelConfig *c, GError **error)
{
  for (int v = 0; v < cony_attention_variant_count (); v++)
    for (int i = 0; i < cony_attention_variant_n_settings (v); i++) {
      const ConyAttentionSetting *s = cony_attention_variant_setting (v, i);
      if (!get_int (o, origin, s->key, FALSE, s->def, s->lo, s->hi, &c->attention_settings[v][i],
              error))
        return FALSE;
    }
  return TRUE;
}

/* The settings that each variant's row says do not go together; the error lists them. */
static gboolean
check_variant_settings (const char *origin, const ConyModelConfig *c, GError **error)
{
  for (int v = 0; v < cony_attention_variant_count (); v++) {
    ConyAttentionConfig ac = cony_model_config_attention (c, v, FALSE);
    const char *why = cony_attention_config_settings_invalid (&ac);
    if (!why)
      continue;
    GString *values = g_string_new (NULL);
    for (int i = 0; i < cony_attention_variant_n_settings (v); i++)
      g_string_append_printf (values, "%s%s = %d", i ? ", " : "",
          cony_attention_variant_setting (v, i)->key, ac.settings[i]);
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "%s: model config: %s (%s)", origin, why,
        values->str);
    g_string_free (values, TRUE);
    return FALSE;
  }
  return TRUE;
}

static gboolean
check_tokens_per_step (const char *origin, const ConyModelConfig *c, GError **error)
{
  if (c->tokens_per_step <= c->window)
    return TRUE;
  g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
      "%s: model config: 'tokens_per_step' = %d is "
      "larger than the window (%d tokens): a step's tokens must fit in the window",
      origin, c->tokens_per_step, c->window);
  return FALSE;
}

static gboolean
check_heads (const char *origin, const ConyModelConfig *c, GError **error)
{
  if (c->d % c->heads == 0)
    return TRUE;
  g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
      "%s: model config: d = %d is not a multiple of heads = %d", origin, c->d, c->heads);
  return FALSE;
}

/* T defaults to the smallest multiple of k that is >= 2n - 1. */
static gboolean
read_positional_rows (JsonObject *o, const char *origin, ConyModelConfig *c, GError **error)
{
  int k = c->tokens_per_step, rows = (2 * c->window - 1 + k - 1) / k * k;
  return get_int (o, origin, "positional_rows", FALSE, rows, 1, 2 * MAX_WINDOW, &c->positional_rows,
      error);
}

/* The sizes and integer settings, each in its range, then how they go together. */
static gboolean
read_sizes (JsonObject *o, const char *origin, ConyModelConfig *c, GError **error)
{
  return get_int (o, origin, "d_in", TRUE, 0, 1, MAX_DIM, &c->d_in, error)
      && get_int (o, origin, "d", TRUE, 0, 1, MAX_DIM, &c->d, error)
      && get_int (o, origin, "heads", TRUE, 0, 1, MAX_DIM, &c->heads, error)
      && get_int (o, origin, "ff", TRUE, 0, 1, 4 * MAX_DIM, &c->ff, error)
      && get_int (o, origin, "blocks", TRUE, 0, 1, CONY_MODEL_MAX_BLOCKS, &c->blocks, error)
      && get_int (o, origin, "window", TRUE, 0, 1, MAX_WINDOW, &c->window, error)
      && get_int (o, origin, "landmarks", TRUE, 0, 1, CONY_ATTENTION_MAX_LANDMARKS, &c->landmarks,
          error)
      && get_int (o, origin, "pinv_iterations", FALSE, 6, 1, 1000, &c->pinv_iterations, error)
      && read_variant_settings (o, origin, c, error)
      && get_int (o, origin, "tokens_per_step", FALSE, 1, 1, MAX_WINDOW, &c->tokens_per_step, error)
      && check_variant_settings (origin, c, error) && check_tokens_per_step (origin, c, error)
      && read_positional_rows (o, origin, c, error) && check_heads (origin, c, error);
}

static gboolean
parse_variant (const char *name, const char *origin, int block, ConyAttentionVariant *v,
    GError **error)
{
  if (name && cony_attention_variant_from_name (name, v))
    return TRUE;
  g_autofree char *names = cony_attention_variant_names ();
  g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
      "%s: model config: attention of block %d is '%s' (expected %s)", origin, block,
      name ? name : "(not a string)", names);
  return FALSE;
}

static const char *
string_or_null (JsonNode *n)
{
  return JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING
      ? json_node_get_string (n)
      : NULL;
}

/* "attention": one variant name for every block, or a list of one per block. */
static gboolean
read_attention (JsonObject *o, const char *origin, ConyModelConfig *c, GError **error)
{
  JsonNode *att = json_object_get_member (o, "attention");
  if (!att) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
        "%s: model config: key 'attention' is missing (a variant name, or one per block)", origin);
    return FALSE;
  }
  if (!JSON_NODE_HOLDS_ARRAY (att)) {
    for (int b = 0; b < c->blocks; b++)
      if (!parse_variant (string_or_null (att), origin, b, &c->attention[b], error))
        return FALSE;
    return TRUE;
  }
  JsonArray *a = json_node_get_array (att);
  if ((int) json_array_get_length (a) != c->blocks) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: model config: 'attention' lists %u variants for %d blocks", origin,
        json_array_get_length (a), c->blocks);
    return FALSE;
  }
  for (int b = 0; b < c->blocks; b++)
    if (!parse_variant (string_or_null (json_array_get_element (a, b)), origin, b, &c->attention[b],
            error))
      return FALSE;
  return TRUE;
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

/* "pinv", "positional_encoding" and "output": each one of two words. */
static gboolean
read_kinds (JsonObject *o, const char *origin, ConyModelConfig *c, GError **error)
{
  static const char *const pinv[2] = { "exact", "iterative" };
  static const char *const positional[2] = { "learned", "cyclic" };
  static const char *const output[2] = { "softmax", "sigmoid" };
  G_STATIC_ASSERT (CONY_PINV_EXACT == 0 && CONY_PINV_ITERATIVE == 1);
  G_STATIC_ASSERT (CONY_POSITIONAL_LEARNED == 0 && CONY_POSITIONAL_CYCLIC == 1);
  G_STATIC_ASSERT (CONY_OUTPUT_SOFTMAX == 0 && CONY_OUTPUT_SIGMOID == 1);
  int p, pe, out;
  if (!get_choice (o, origin, "pinv", FALSE, pinv, &p, error)
      || !get_choice (o, origin, "positional_encoding", TRUE, positional, &pe, error)
      || !get_choice (o, origin, "output", FALSE, output, &out, error))
    return FALSE;
  c->pinv = p;
  c->positional = pe;
  c->output = out;
  return TRUE;
}

static gboolean
read_labels (JsonObject *o, const char *origin, ConyModelConfig *c, GError **error)
{
  JsonNode *labels = json_object_get_member (o, "labels");
  if (!labels || !JSON_NODE_HOLDS_ARRAY (labels)) {
    g_set_error (error, CONY_ERROR, labels ? CONY_ERROR_FORMAT : CONY_ERROR_MISSING,
        "%s: model config: 'labels' must be a list of class names", origin);
    return FALSE;
  }
  JsonArray *la = json_node_get_array (labels);
  guint nl = json_array_get_length (la);
  if (nl < 1 || nl > MAX_CLASSES) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: model config: 'labels' has %u entries (expected 1 to %d)", origin, nl, MAX_CLASSES);
    return FALSE;
  }
  c->n_classes = (int) nl;
  c->labels = g_new0 (char *, nl + 1);
  for (guint i = 0; i < nl; i++) {
    const char *label = string_or_null (json_array_get_element (la, i));
    if (!label) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
          "%s: model config: labels[%u] is not a string", origin, i);
      return FALSE;
    }
    if (!cony_label_check (label, strlen (label), error)) {
      g_prefix_error (error, "%s: model config: labels[%u] ", origin, i);
      return FALSE;
    }
    c->labels[i] = g_strdup (label);
  }
  return TRUE;
}

/* The optional "frontend" object: kept as text, its CNN reference read. */
static gboolean
read_frontend (JsonObject *o, const char *origin, ConyModelConfig *c, GError **error)
{
  JsonNode *fe = json_object_get_member (o, "frontend");
  if (!fe || JSON_NODE_HOLDS_NULL (fe))
    return TRUE;
  if (!JSON_NODE_HOLDS_OBJECT (fe)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: model config: 'frontend' must be an object", origin);
    return FALSE;
  }
  c->frontend_json = json_to_string (fe, FALSE);
  const char *bad_key;
  if (!cony_cnn_ref_read (json_node_get_object (fe), &c->cnn, &bad_key)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: model config: frontend.%s is not a string", origin, bad_key);
    return FALSE;
  }
  return TRUE;
}

/* The root object of @json, or NULL with @error set. */
static JsonObject *
parse_root (JsonParser *parser, const char *json, const char *origin, GError **error)
{
  GError *local = NULL;
  g_autofree char *marked = cony_json_mark_nul (json); /* so "a\u0000b" is not read as "a" */
  if (!json_parser_load_from_data (parser, marked, -1, &local)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: model config is not valid JSON: %s",
        origin, local->message);
    g_error_free (local);
    return NULL;
  }
  JsonNode *root = json_parser_get_root (parser);
  if (!root || !JSON_NODE_HOLDS_OBJECT (root)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: model config is not a JSON object",
        origin);
    return NULL;
  }
  return json_node_get_object (root);
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
  JsonObject *o = parse_root (parser, json, origin, error);
  if (!o)
    return FALSE;
  c->config_json = g_strdup (json);
  c->has_fusion = json_object_has_member (o, "fusion");
  if (check_architecture (o, origin, error) && read_sizes (o, origin, c, error)
      && read_attention (o, origin, c, error) && refuse_input_groups (o, origin, error)
      && read_kinds (o, origin, c, error) && read_labels (o, origin, c, error)
      && read_frontend (o, origin, c, error))
    return TRUE;
  cony_model_config_clear (c);
  return FALSE;
}

ConyAttentionConfig
cony_model_config_attention (const ConyModelConfig *c, ConyAttentionVariant variant,
    gboolean retroactive)
{
  ConyAttentionConfig ac = {
    .variant = variant,
    .d = c->d,
    .heads = c->heads,
    .window = c->window,
    .landmarks = c->landmarks,
    .retroactive = retroactive,
    .pinv = c->pinv,
    .pinv_iterations = c->pinv_iterations,
  };
  if ((unsigned) variant < CONY_ATTENTION_N_VARIANTS)
    memcpy (ac.settings, c->attention_settings[variant], sizeof ac.settings);
  return ac;
}
