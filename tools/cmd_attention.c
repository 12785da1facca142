/* cony attention: one attention layer stepped over a token sequence (.npy in and out). */
#include "commands.h"

#include "cony/attention.h"
#include "cony/error.h"
#include "cony/npy.h"
#include "cony/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Loads the layer's tensors from @st, checking every shape against d, heads and m. */
static ConyAttention *
load_layer (ConySafetensors *st, ConyAttentionConfig *c, GError **error)
{
  const ConyTensorInfo *t = cony_safetensors_find (st, "in_proj_weight");
  if (!t || t->ndim != 2 || t->shape[0] != 3 * t->shape[1]) {
    g_set_error (error, CONY_ERROR, t ? CONY_ERROR_SHAPE : CONY_ERROR_MISSING,
        "%s: tensor 'in_proj_weight' must exist with shape (3d, d)", cony_safetensors_path (st));
    return NULL;
  }
  gsize d = t->shape[1];
  c->d = (int) d;
  if (c->heads < 1 || d % c->heads) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "--heads %d does not divide d = %" G_GSIZE_FORMAT " of %s", c->heads, d,
        cony_safetensors_path (st));
    return NULL;
  }
  gsize s3d2[2] = { 3 * d, d }, s3d[1] = { 3 * d }, sdd[2] = { d, d }, sd[1] = { d };
  gsize slm[3] = { c->heads, c->landmarks, d / c->heads };
  g_autofree float *w_in = cony_safetensors_get_f32 (st, "in_proj_weight", 2, s3d2, error);
  g_autofree float *b_in = w_in ? cony_safetensors_get_f32 (st, "in_proj_bias", 1, s3d, error)
                                : NULL;
  g_autofree float *w_out = b_in ? cony_safetensors_get_f32 (st, "out_proj.weight", 2, sdd, error)
                                 : NULL;
  g_autofree float *b_out = w_out ? cony_safetensors_get_f32 (st, "out_proj.bias", 1, sd, error)
                                  : NULL;
  if (!b_out)
    return NULL;
  g_autofree float *ql = NULL, *kl = NULL;
  if (cony_attention_variant_uses_fixed_landmarks (c->variant)) {
    if (c->landmarks < 1) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "--variant %s needs --landmarks M",
          cony_attention_variant_name (c->variant));
      return NULL;
    }
    ql = cony_safetensors_get_f32 (st, "q_landmarks", 3, slm, error);
    kl = ql ? cony_safetensors_get_f32 (st, "k_landmarks", 3, slm, error) : NULL;
    if (!kl)
      return NULL;
  }
  ConyAttentionWeights w = { w_in, b_in, w_out, b_out, ql, kl };
  return cony_attention_new (c, &w, error);
}

static gboolean
check_input (const ConyNpyArray *x, const char *path, int d, GError **error)
{
  if (x->ndim != 2 || x->shape[1] != (gsize) d) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
        "%s: expected float32 tokens of shape (T, %d), "
        "got %d dimensions%s",
        path, d, x->ndim, x->ndim == 2 ? " with another width" : "");
    return FALSE;
  }
  gsize numel = cony_npy_array_numel (x);
  for (gsize i = 0; i < numel; i++)
    if (!isfinite (x->data[i])) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: token %" G_GSIZE_FORMAT " holds a "
          "non-finite value (column %" G_GSIZE_FORMAT ")",
          path, i / d, i % d);
      return FALSE;
    }
  return TRUE;
}

/* The options of every variant's own settings, from libcony's table: --KEY with '-' for
 * '_' (vcc's --vcc-budget). Only the chosen variant's are used; unset ones stay 0, the
 * default. */
typedef struct {
  int values[CONY_ATTENTION_N_VARIANTS][CONY_ATTENTION_MAX_SETTINGS];
  GPtrArray *strings; /* the options' names and help texts */
  GString *usage;     /* " [--vcc-budget R] ..." */
} SettingOptions;

static void
setting_options_add (SettingOptions *so, GOptionContext *ctx)
{
  so->strings = g_ptr_array_new_with_free_func (g_free);
  so->usage = g_string_new (NULL);
  for (int v = 0; v < cony_attention_variant_count (); v++)
    for (int i = 0; i < cony_attention_variant_n_settings (v); i++) {
      const ConyAttentionSetting *s = cony_attention_variant_setting (v, i);
      char *name = g_strdelimit (g_strdup (s->key), "_", '-');
      char *help = g_strdup_printf ("%s: %s (default %d)", cony_attention_variant_name (v), s->help,
          s->def);
      g_ptr_array_add (so->strings, name);
      g_ptr_array_add (so->strings, help);
      g_string_append_printf (so->usage, " [--%s %s]", name, s->arg);
      GOptionEntry e[] = { { name, 0, 0, G_OPTION_ARG_INT, &so->values[v][i], help, s->arg },
        G_OPTION_ENTRY_NULL };
      g_option_context_add_main_entries (ctx, e, NULL);
    }
}

static void
setting_options_clear (SettingOptions *so)
{
  g_clear_pointer (&so->strings, g_ptr_array_unref);
  if (so->usage)
    g_string_free (so->usage, TRUE);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (SettingOptions, setting_options_clear)

int
cony_cmd_attention (int argc, char **argv)
{
  g_autofree char *weights = NULL, *output = NULL, *variant = NULL, *pinv = NULL;
  int heads = 1, window = 0, landmarks = 0, pinv_iterations = 6;
  gboolean retroactive = FALSE;
  g_autofree char *variants = cony_attention_variant_names ();
  GOptionEntry entries[] = {
    { "weights", 'w', 0, G_OPTION_ARG_FILENAME, &weights,
        "safetensors with in_proj_weight (3d, d), "
        "in_proj_bias, out_proj.weight, out_proj.bias [, q_landmarks, k_landmarks (H, m, d/H)]",
        "W" },
    { "variant", 0, 0, G_OPTION_ARG_STRING, &variant, variants, "V" },
    { "heads", 0, 0, G_OPTION_ARG_INT, &heads, "attention heads (default 1)", "H" },
    { "window", 0, 0, G_OPTION_ARG_INT, &window, "tokens in the attention window", "N" },
    { "landmarks", 0, 0, G_OPTION_ARG_INT, &landmarks, "Nystrom landmarks (the attention's rank)",
        "M" },
    { "retroactive", 0, 0, G_OPTION_ARG_NONE, &retroactive, "output all N window rows per step",
        NULL },
    { "pinv", 0, 0, G_OPTION_ARG_STRING, &pinv, "pseudo-inverse: exact (default) or iterative",
        "P" },
    { "pinv-iterations", 0, 0, G_OPTION_ARG_INT, &pinv_iterations,
        "iterations of the iterative "
        "pseudo-inverse (default 6)",
        "K" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "output .npy", "OUT.npy" },
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr (GOptionContext)
      ctx = g_option_context_new ("IN.npy - step an attention layer over tokens");
  g_option_context_set_description (ctx,
      "IN is float32 (T, d). OUT is float32 (T, d), or (T, N, d) with --retroactive (rows oldest\n"
      "first, rows before the stream start zero). Semantics: docs/attention.md.\n");
  g_option_context_add_main_entries (ctx, entries, NULL);
  g_auto (SettingOptions) settings = { 0 };
  setting_options_add (&settings, ctx);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  if (argc != 2 || !weights || !output || !variant || window < 1) {
    fprintf (stderr,
        "usage: cony attention --weights W.safetensors --variant V --heads H --window N "
        "[--landmarks M] [--retroactive] [--pinv exact|iterative] [--pinv-iterations K]%s "
        "IN.npy -o OUT.npy\n",
        settings.usage->str);
    return 2;
  }
  ConyAttentionConfig c = { .heads = heads,
    .window = window,
    .landmarks = landmarks,
    .retroactive = retroactive,
    .pinv_iterations = pinv_iterations };
  if (!cony_attention_variant_from_name (variant, &c.variant)) {
    fprintf (stderr, "cony: unknown --variant '%s' (%s)\n", variant, variants);
    return 2;
  }
  memcpy (c.settings, settings.values[c.variant], sizeof c.settings);
  if (pinv && !g_str_equal (pinv, "exact") && !g_str_equal (pinv, "iterative")) {
    fprintf (stderr, "cony: unknown --pinv '%s' (exact or iterative)\n", pinv);
    return 2;
  }
  c.pinv = pinv && g_str_equal (pinv, "iterative") ? CONY_PINV_ITERATIVE : CONY_PINV_EXACT;

  g_autoptr (ConySafetensors) st = cony_safetensors_open (weights, &error);
  if (!st)
    return cony_cmd_fail (error);
  g_autoptr (ConyAttention) layer = load_layer (st, &c, &error);
  if (!layer)
    return cony_cmd_fail (error);
  g_autoptr (ConyNpyArray) x = cony_npy_load (argv[1], &error);
  if (!x || !check_input (x, argv[1], c.d, &error))
    return cony_cmd_fail (error);

  gsize T = x->shape[0], rows = cony_attention_output_rows (layer);
  g_autofree float *y = g_new (float, MAX (T * rows * c.d, 1));
  for (gsize t = 0; t < T; t++) {
    float *out = y + t * rows * c.d;
    cony_attention_step (layer, x->data + t * c.d, out);
    for (gsize i = 0; i < rows * c.d; i++)
      if (!isfinite (out[i])) { /* as cony classify: no NaN written as a result */
        g_set_error (&error, CONY_ERROR, CONY_ERROR_NUMERIC,
            "%s: step %" G_GSIZE_FORMAT ": non-finite "
            "attention output (NaN/Inf tokens, or tokens so large that float overflows); %s "
            "not written",
            argv[1], t, output);
        return cony_cmd_fail (error);
      }
  }
  gsize shape[3] = { T, rows, c.d };
  if (!retroactive)
    shape[1] = c.d;
  if (!cony_npy_save (output, y, retroactive ? 3 : 2, shape, &error))
    return cony_cmd_fail (error);
  return 0;
}
