/* The fusion part of fused model files (include/cony/fusion.h, docs/model-format.md). */
#include "fusion-private.h"
#include "cnnref-private.h"
#include "cony/error.h"

#include <math.h>
#include <string.h>
#include <json-glib/json-glib.h>

#define MAX_TOLERANCE_MS 3600000 /* an hour: more is a unit mistake */
#define MAX_RATE 100000

/* Refuses members of @o not listed in @known (NULL-terminated): a misspelt key must not
 * silently leave a default in place. */
static gboolean
only_known_keys (JsonObject *o, const char *const *known, const char *origin, const char *where,
    GError **error)
{
  g_autoptr (GList) members = json_object_get_members (o);
  for (GList *l = members; l; l = l->next) {
    if (g_strv_contains (known, l->data))
      continue;
    g_autofree char *list = g_strjoinv (", ", (char **) known);
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: model config: %s has an unknown key '%s' (expected %s)", origin, where,
        (const char *) l->data, list);
    return FALSE;
  }
  return TRUE;
}

/* Member @key of @o as an integer in [lo, hi]. */
static gboolean
fusion_int (JsonObject *o, const char *key, gint64 lo, gint64 hi, const char *origin,
    const char *where, gint64 *out, GError **error)
{
  JsonNode *n = json_object_get_member (o, key);
  if (!n || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_INT64) {
    g_set_error (error, CONY_ERROR, n ? CONY_ERROR_FORMAT : CONY_ERROR_MISSING,
        "%s: model config: %s.%s must be an integer in [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
        "]%s",
        origin, where, key, lo, hi, n ? "" : " (missing)");
    return FALSE;
  }
  *out = json_node_get_int (n);
  if (*out < lo || *out > hi) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: model config: %s.%s = %" G_GINT64_FORMAT
        " is out of range (expected [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "])",
        origin, where, key, *out, lo, hi);
    return FALSE;
  }
  return TRUE;
}

/* Member @key of @o as a rate [numerator, denominator], both positive. */
static gboolean
fusion_rate (JsonObject *o, const char *key, const char *origin, const char *where, int *num,
    int *den, GError **error)
{
  JsonNode *n = json_object_get_member (o, key);
  JsonArray *a = n && JSON_NODE_HOLDS_ARRAY (n) ? json_node_get_array (n) : NULL;
  gint64 v[2] = { 0, 0 };
  for (guint i = 0; a && i < 2 && json_array_get_length (a) == 2; i++) {
    JsonNode *e = json_array_get_element (a, i);
    if (JSON_NODE_HOLDS_VALUE (e) && json_node_get_value_type (e) == G_TYPE_INT64)
      v[i] = json_node_get_int (e);
  }
  if (v[0] < 1 || v[0] > MAX_RATE || v[1] < 1 || v[1] > MAX_RATE) {
    g_set_error (error, CONY_ERROR, n ? CONY_ERROR_INVALID : CONY_ERROR_MISSING,
        "%s: model config: %s.%s must be a rate [numerator, denominator] of positive "
        "integers up to %d (per second)%s",
        origin, where, key, MAX_RATE, n ? "" : " (missing)");
    return FALSE;
  }
  *num = (int) v[0];
  *den = (int) v[1];
  return TRUE;
}

/* Member @key of @o as a string; NULL when absent (and @error unset) or not a string. */
static const char *
fusion_string (JsonObject *o, const char *key, const char *origin, const char *where,
    GError **error)
{
  JsonNode *n = json_object_get_member (o, key);
  if (!n)
    return NULL;
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: model config: %s.%s must be a string",
        origin, where, key);
    return NULL;
  }
  return json_node_get_string (n);
}

/* A name usable in a pad name and a tensor name: [a-z][a-z0-9_]*, short. */
static gboolean
valid_name (const char *name)
{
  gsize len = strlen (name);
  if (len == 0 || len > CONY_FUSION_MAX_NAME || !g_ascii_islower (name[0]))
    return FALSE;
  for (gsize i = 0; i < len; i++)
    if (!g_ascii_islower (name[i]) && !g_ascii_isdigit (name[i]) && name[i] != '_')
      return FALSE;
  return TRUE;
}

static gboolean
read_input (JsonNode *node, int index, const ConyFusion *f, const char *origin, ConyFusionInput *in,
    GError **error)
{
  static const char *const keys[] = { "name", "size", "rate", "tolerance_ms", "cnn", "cnn_sha256",
    "cnn_output", "cnn_mode", NULL };
  g_autofree char *where = g_strdup_printf ("fusion.inputs[%d]", index);
  if (!JSON_NODE_HOLDS_OBJECT (node)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: model config: %s must be an object",
        origin, where);
    return FALSE;
  }
  JsonObject *o = json_node_get_object (node);
  if (!only_known_keys (o, keys, origin, where, error))
    return FALSE;
  GError *local = NULL;
  const char *name = fusion_string (o, "name", origin, where, &local);
  if (!name || !valid_name (name)) {
    if (!local)
      g_set_error (&local, CONY_ERROR, name ? CONY_ERROR_INVALID : CONY_ERROR_MISSING,
          "%s: model config: %s.name is %s%s%s (expected [a-z][a-z0-9_]*, at most %d characters)",
          origin, where, name ? "'" : "missing", name ? name : "", name ? "'" : "",
          CONY_FUSION_MAX_NAME);
    g_propagate_error (error, local);
    return FALSE;
  }
  if (cony_fusion_input_index (f, name) >= 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: model config: %s.name '%s' is used by an earlier input", origin, where, name);
    return FALSE;
  }
  gint64 size, tolerance;
  if (!fusion_int (o, "size", 1, CONY_ATTENTION_MAX_DIM, origin, where, &size, error)
      || !fusion_rate (o, "rate", origin, where, &in->rate_n, &in->rate_d, error)
      || !fusion_int (o, "tolerance_ms", 0, MAX_TOLERANCE_MS, origin, where, &tolerance, error))
    return FALSE;
  const char *bad_key;
  if (!cony_cnn_ref_read (o, &in->cnn, &bad_key)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: model config: %s.%s must be a string",
        origin, where, bad_key);
    return FALSE;
  }
  in->name = g_strdup (name);
  in->size = (int) size;
  in->tolerance_ns = (guint64) tolerance * G_GUINT64_CONSTANT (1000000);
  return TRUE;
}

/* The "gate" object of the fusion config: {"input": NAME}; @f's inputs read already. */
static gboolean
read_gate_config (JsonNode *node, const char *origin, ConyFusion *f, GError **error)
{
  static const char *const keys[] = { "input", "context", NULL };
  if (!JSON_NODE_HOLDS_OBJECT (node)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: model config: fusion.gate must be an object", origin);
    return FALSE;
  }
  JsonObject *o = json_node_get_object (node);
  if (!only_known_keys (o, keys, origin, "fusion.gate", error))
    return FALSE;
  int index[2] = { -1, -1 };
  for (int k = 0; k < 2; k++) {
    const char *key = keys[k];
    if (k == 1 && !json_object_has_member (o, key))
      break; /* no context */
    GError *local = NULL;
    const char *name = fusion_string (o, key, origin, "fusion.gate", &local);
    index[k] = name ? cony_fusion_input_index (f, name) : -1;
    if (index[k] < 0 || (k == 1 && index[1] == index[0])) {
      if (!local)
        g_set_error (&local, CONY_ERROR, name ? CONY_ERROR_INVALID : CONY_ERROR_MISSING,
            "%s: model config: fusion.gate.%s %s%s%s is not %s", origin, key,
            name ? "'" : "(missing)", name ? name : "", name ? "'" : "",
            k ? "another of fusion.inputs than gate.input" : "one of fusion.inputs");
      g_propagate_error (error, local);
      return FALSE;
    }
  }
  f->gate = g_new0 (ConyFusionGate, 1);
  f->gate->input = index[0];
  f->gate->context = index[1];
  f->gate->n_features = CONY_FUSION_GATE_FEATURES + (index[1] >= 0);
  return TRUE;
}

/* The "fusion" object of @config_json into @f (no tensors yet). */
static gboolean
read_config (const char *config_json, const char *origin, ConyFusion *f, GError **error)
{
  static const char *const keys[] = { "rate", "inputs", "gate", NULL };
  g_autoptr (JsonParser) parser = json_parser_new ();
  if (!json_parser_load_from_data (parser, config_json, -1, NULL))
    g_return_val_if_reached (FALSE); /* the encoder config parsed it already */
  JsonObject *root = json_node_get_object (json_parser_get_root (parser));
  JsonNode *fn = json_object_get_member (root, "fusion");
  if (!fn || !JSON_NODE_HOLDS_OBJECT (fn)) {
    g_set_error (error, CONY_ERROR, fn ? CONY_ERROR_FORMAT : CONY_ERROR_MISSING,
        "%s: model config: %s (a fused model declares its inputs there; see "
        "docs/model-format.md)",
        origin, fn ? "'fusion' must be an object" : "no 'fusion' object: not a fused model");
    return FALSE;
  }
  JsonObject *fo = json_node_get_object (fn);
  if (!only_known_keys (fo, keys, origin, "fusion", error)
      || !fusion_rate (fo, "rate", origin, "fusion", &f->rate_n, &f->rate_d, error))
    return FALSE;
  JsonNode *inputs = json_object_get_member (fo, "inputs");
  guint n = inputs && JSON_NODE_HOLDS_ARRAY (inputs)
      ? json_array_get_length (json_node_get_array (inputs))
      : 0;
  if (n < 1 || n > CONY_FUSION_MAX_INPUTS) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: model config: fusion.inputs must list 1 to %d inputs (found %u)", origin,
        CONY_FUSION_MAX_INPUTS, n);
    return FALSE;
  }
  for (guint i = 0; i < n; i++) {
    if (!read_input (json_array_get_element (json_node_get_array (inputs), i), (int) i, f, origin,
            &f->inputs[i], error))
      return FALSE;
    f->inputs[i].offset = f->d_out;
    f->d_out += f->inputs[i].size;
    f->n_inputs++;
  }
  f->d_out += f->n_inputs; /* the flags */
  JsonNode *gate = json_object_get_member (fo, "gate");
  return !gate || read_gate_config (gate, origin, f, error);
}

void
cony_fusion_clear (ConyFusion *f)
{
  for (int i = 0; i < CONY_FUSION_MAX_INPUTS; i++) {
    ConyFusionInput *in = &f->inputs[i];
    g_free (in->name);
    cony_cnn_ref_clear (&in->cnn);
    g_free (in->absent);
  }
  if (f->gate) {
    g_free (f->gate->readout_weight);
    g_free (f->gate->readout_bias);
    g_free (f->gate->context_weight);
    g_free (f->gate);
  }
  g_free (f->path);
  memset (f, 0, sizeof *f);
}

/* The gate's tensors, after fusion.gate.; context: only with a context input. */
static const struct {
  const char *name;
  gboolean context;
} gate_tensors[] = {
  { "readout.weight", FALSE },
  { "readout.bias", FALSE },
  { "weight", FALSE },
  { "bias", FALSE },
  { "scale", FALSE },
  { "context.weight", TRUE },
  { "context.bias", TRUE },
};

/* Index of gate tensor @name in gate_tensors (not one a gate without a context has when
 * @with_context is FALSE), or -1. */
static int
gate_tensor_index (const char *name, gboolean with_context)
{
  const char *rest = name + strlen (CONY_FUSION_GATE_PREFIX);
  for (guint i = 0; i < G_N_ELEMENTS (gate_tensors); i++)
    if (strcmp (rest, gate_tensors[i].name) == 0 && (with_context || !gate_tensors[i].context))
      return (int) i;
  return -1;
}

/* The gate's tensors into @f->gate (its inputs set by the config). */
static gboolean
read_gate (const ConySafetensors *st, const ConyModelConfig *config, const char *origin,
    ConyFusion *f, GError **error)
{
  ConyFusionGate *g = f->gate;
  const ConyFusionInput *in = &f->inputs[g->input];
  if (config->n_classes < 2 || config->n_classes > CONY_FUSION_GATE_MAX_CLASSES
      || config->tokens_per_step > 1 || config->output != CONY_OUTPUT_SOFTMAX) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: fusion.gate needs a softmax model of 2 to %d classes and one token a step "
        "(this one: %d classes, %s, tokens_per_step %d)",
        origin, CONY_FUSION_GATE_MAX_CLASSES, config->n_classes,
        config->output == CONY_OUTPUT_SOFTMAX ? "softmax" : "sigmoid", config->tokens_per_step);
    return FALSE;
  }
  g->classes = config->n_classes;
  gboolean with_context = g->context >= 0;
  /* shapes in gate_tensors' order; a 0 second size: a vector */
  gsize shapes[][2] = { { (gsize) g->classes, (gsize) in->size }, { (gsize) g->classes, 0 },
    { (gsize) g->n_features, 0 }, { 1, 0 }, { 1, 0 },
    { with_context ? (gsize) f->inputs[g->context].size : 0, 0 }, { 1, 0 } };
  float *values[G_N_ELEMENTS (gate_tensors)] = { NULL };
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < G_N_ELEMENTS (gate_tensors); i++) {
    if (gate_tensors[i].context && !with_context)
      continue;
    g_autofree char *name = g_strconcat (CONY_FUSION_GATE_PREFIX, gate_tensors[i].name, NULL);
    if (!cony_safetensors_find (st, name)) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
          "%s: tensor '%s' is missing (fusion.gate on input '%s' needs fusion.gate.%s)", origin,
          name, in->name,
          with_context ? "readout.weight, readout.bias, weight, bias, scale, context.weight and "
                         "context.bias"
                       : "readout.weight, readout.bias, weight, bias and scale");
      ok = FALSE;
      break;
    }
    values[i] = cony_safetensors_get_f32 (st, name, shapes[i][1] ? 2 : 1, shapes[i], error);
    ok = values[i] != NULL;
    f->n_parameters += shapes[i][0] * MAX (shapes[i][1], 1);
  }
  if (ok) {
    g->readout_weight = g_steal_pointer (&values[0]);
    g->readout_bias = g_steal_pointer (&values[1]);
    memcpy (g->weight, values[2], sizeof (float) * g->n_features);
    g->bias = values[3][0];
    g->scale = values[4][0];
    if (with_context) {
      g->context_weight = g_steal_pointer (&values[5]);
      g->context_bias = values[6][0];
    }
  }
  for (guint i = 0; i < G_N_ELEMENTS (values); i++)
    g_free (values[i]);
  return ok;
}

gboolean
cony_fusion_read (const ConySafetensors *st, const ConyModelConfig *config, ConyFusion *f,
    GError **error)
{
  const char *origin = cony_safetensors_path (st);
  memset (f, 0, sizeof *f);
  if (!read_config (config->config_json, origin, f, error))
    goto fail;
  if (f->d_out != config->d_in) {
    GString *sum = g_string_new (NULL);
    for (int i = 0; i < f->n_inputs; i++)
      g_string_append_printf (sum, "%s%d (%s)", i ? " + " : "", f->inputs[i].size,
          f->inputs[i].name);
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: model config: d_in = %d, but the fused token of the inputs is %s + %d flags = %d "
        "floats",
        origin, config->d_in, sum->str, f->n_inputs, f->d_out);
    g_string_free (sum, TRUE);
    goto fail;
  }
  for (int i = 0; i < f->n_inputs; i++) {
    ConyFusionInput *in = &f->inputs[i];
    g_autofree char *name = g_strdup_printf (CONY_FUSION_TENSOR_PREFIX "%s.absent", in->name);
    gsize shape[1] = { (gsize) in->size };
    if (!cony_safetensors_find (st, name)) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
          "%s: tensor '%s' is missing (the learned token of an absent '%s' input, %d floats)",
          origin, name, in->name, in->size);
      goto fail;
    }
    in->absent = cony_safetensors_get_f32 (st, name, 1, shape, error);
    if (!in->absent)
      goto fail;
    f->n_parameters += (gsize) in->size;
  }
  if (f->gate && !read_gate (st, config, origin, f, error))
    goto fail;
  /* No fusion tensor the config does not explain. */
  for (guint t = 0; t < cony_safetensors_n_tensors (st); t++) {
    const char *name = cony_safetensors_tensor (st, t)->name;
    if (!g_str_has_prefix (name, CONY_FUSION_TENSOR_PREFIX))
      continue;
    if (g_str_has_prefix (name, CONY_FUSION_GATE_PREFIX)
        && gate_tensor_index (name, !f->gate || f->gate->context >= 0) >= 0) {
      if (f->gate)
        continue; /* read above */
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
          "%s: unexpected tensor '%s' (a gate's tensors need a \"gate\" object in the "
          "config's fusion; see docs/model-format.md)",
          origin, name);
      goto fail;
    }
    const char *rest = name + strlen (CONY_FUSION_TENSOR_PREFIX), *dot = strchr (rest, '.');
    g_autofree char *input = dot ? g_strndup (rest, dot - rest) : NULL;
    if (!input || strcmp (dot, ".absent") != 0 || cony_fusion_input_index (f, input) < 0) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
          "%s: unexpected tensor '%s' (a fused file has fusion.<input>.absent for each input "
          "of fusion.inputs and, with a gate, fusion.gate.readout.weight, readout.bias, "
          "weight, bias, scale (and with a context, context.weight and context.bias))",
          origin, name);
      goto fail;
    }
  }
  f->path = g_strdup (origin);
  return TRUE;

fail:
  cony_fusion_clear (f);
  return FALSE;
}

ConyFusion *
cony_fusion_load (const char *path, GError **error)
{
  g_autoptr (ConySafetensors) st = cony_safetensors_open (path, error);
  if (!st)
    return NULL;
  const char *cfg = cony_safetensors_metadata (st, "config");
  if (!cfg) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
        "%s: no model config: __metadata__ needs a \"config\" entry (see docs/model-format.md)",
        path);
    return NULL;
  }
  ConyModelConfig config;
  if (!cony_model_config_parse (cfg, path, &config, error))
    return NULL;
  ConyFusion *f = g_new0 (ConyFusion, 1);
  gboolean ok = cony_fusion_read (st, &config, f, error);
  cony_model_config_clear (&config);
  if (!ok) {
    g_free (f);
    return NULL;
  }
  return f;
}

void
cony_fusion_free (ConyFusion *f)
{
  if (!f)
    return;
  cony_fusion_clear (f);
  g_free (f);
}

int
cony_fusion_input_index (const ConyFusion *f, const char *name)
{
  for (int i = 0; i < f->n_inputs; i++)
    if (strcmp (f->inputs[i].name, name) == 0)
      return i;
  return -1;
}

void
cony_fusion_join (const ConyFusion *f, const float *const *tokens, float *out)
{
  float *flags = out + f->d_out - f->n_inputs;
  for (int i = 0; i < f->n_inputs; i++) {
    const ConyFusionInput *in = &f->inputs[i];
    memcpy (out + in->offset, tokens[i] ? tokens[i] : in->absent, (gsize) in->size * sizeof *out);
    flags[i] = tokens[i] ? 1.0f : 0.0f;
  }
}

/* sigmoid (u . x + e) of @n floats, in double. */
static double
logistic (const float *u, const float *x, int n, double e)
{
  for (int j = 0; j < n; j++)
    e += (double) u[j] * x[j];
  return 1.0 / (1.0 + exp (-e));
}

/* log_softmax of @x (n) into @out, in double. */
static void
log_softmax (const double *x, int n, double *out)
{
  double top = x[0], sum = 0.0;
  for (int i = 1; i < n; i++)
    top = MAX (top, x[i]);
  for (int i = 0; i < n; i++)
    sum += exp (x[i] - top);
  double lse = top + log (sum);
  for (int i = 0; i < n; i++)
    out[i] = x[i] - lse;
}

void
cony_fusion_gate_apply (const ConyFusion *f, const float *token, float *logits)
{
  const ConyFusionGate *g = f->gate;
  if (!g || token[f->d_out - f->n_inputs + g->input] == 0.0f)
    return;
  /* in double, as the float64 twin: the gate turns on small differences of confidence */
  const ConyFusionInput *in = &f->inputs[g->input];
  const float *x = token + in->offset;
  int n = g->classes;
  double z[CONY_FUSION_GATE_MAX_CLASSES], v[CONY_FUSION_GATE_MAX_CLASSES];
  double lp[CONY_FUSION_GATE_MAX_CLASSES], lv[CONY_FUSION_GATE_MAX_CLASSES];
  for (int c = 0; c < n; c++) {
    const float *a = g->readout_weight + (gsize) c * in->size;
    double s = g->readout_bias[c];
    for (int j = 0; j < in->size; j++)
      s += (double) a[j] * x[j];
    v[c] = s;
    z[c] = logits[c];
  }
  log_softmax (z, n, lp);
  log_softmax (v, n, lv);
  double pmax = 0.0, qmax = 0.0, entropy = 0.0, agree = 0.0;
  for (int c = 0; c < n; c++) {
    double p = exp (lp[c]), q = exp (lv[c]);
    pmax = MAX (pmax, p);
    qmax = MAX (qmax, q);
    entropy -= p * lp[c];
    agree += p * q;
  }
  double phi[CONY_FUSION_GATE_FEATURES + 1] = { pmax, entropy / log ((double) n), qmax, agree };
  if (g->context >= 0 && token[f->d_out - f->n_inputs + g->context] != 0.0f) {
    const ConyFusionInput *ctx = &f->inputs[g->context];
    phi[CONY_FUSION_GATE_FEATURES] = logistic (g->context_weight, token + ctx->offset, ctx->size,
        g->context_bias);
  }
  double t = g->bias;
  for (int i = 0; i < g->n_features; i++)
    t += (double) g->weight[i] * phi[i];
  double on = g->scale / (1.0 + exp (-t));
  for (int c = 0; c < n; c++)
    logits[c] = (float) (z[c] + on * lv[c]);
}
