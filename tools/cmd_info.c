/* cony info: what a model file holds and what it costs per step. */
#include "commands.h"

#include "cony/cnn.h"
#include "cony/encoder.h"
#include "cony/fusion.h"
#include "cony/model.h"
#include "cony/modelpath.h"

#include <stdio.h>
#include <string.h>

/* A CNN file (VGG-style or MobileNet): its layers, size, cost, output and metadata. */
static int
info_cnn (ConyCnn *cnn, const char *path)
{
  guint64 cf, ff;
  cony_cnn_get_flops (cnn, &cf, &ff);
  printf ("model:        %s\n", path);
  printf ("architecture: CNN, %s\n", cony_cnn_get_network_name (cnn));
  g_autofree char *desc = cony_cnn_describe (cnn);
  printf ("%s", desc);
  g_autofree char *prec = cony_cnn_describe_precision (cnn);
  printf ("precision:    %s\n", prec);
  printf ("FLOPs/patch:  %" G_GUINT64_FORMAT " (conv %" G_GUINT64_FORMAT ", fc %" G_GUINT64_FORMAT
          ")\n",
      cf + ff, cf, ff);
  guint n = 0;
  const char *const *labels = cony_cnn_get_labels (cnn, &n);
  printf ("labels:       %u", n);
  for (guint i = 0; i < n && i < 5; i++)
    printf ("%s%s", i ? ", " : " (", labels[i]);
  printf ("%s\n", n > 5 ? ", ...)" : n > 0 ? ")" : "");
  const char *fe = cony_cnn_get_metadata (cnn, "frontend");
  const char *kind = cony_cnn_get_metadata (cnn, "input_kind");
  if (kind != NULL && strcmp (kind, "image") == 0) {
    /* an image model: its pixels' order and quantisation instead of a log-mel */
    const char *order = cony_cnn_get_metadata (cnn, "channel_order");
    const char *q = cony_cnn_get_metadata (cnn, "input_quantization");
    printf ("input:        image, %s%s%s\n", order ? order : "channels in file order",
        q ? ", quantised as " : "", q ? q : "");
  } else {
    printf ("frontend:     %s\n", fe ? fe : "(none: VGGish log-mel)");
  }
  const char *src = cony_cnn_get_metadata (cnn, "source");
  if (src)
    printf ("source:       %s\n", src);
  /* a copy with layers retrained here (train_yamnet_audio.py --adapt-cnn): from what, how */
  const char *adapted = cony_cnn_get_metadata (cnn, "adapted");
  if (adapted)
    printf ("adapted:      %s\n", adapted);
  /* recalibrated for continual inference (training/recalibrate_continual.py) */
  const char *recalibrated = cony_cnn_get_metadata (cnn, "recalibrated");
  if (recalibrated)
    printf ("recalibrated: %s\n", recalibrated);
  return 0;
}

/* The inputs of a fused model (include/cony/fusion.h), what conyfuse's pads take. */
static gboolean
print_fusion (const char *path, GError **error)
{
  g_autoptr (ConyFusion) f = cony_fusion_load (path, error);
  if (!f)
    return FALSE;
  printf ("fusion:       %d/%d steps per second over %d inputs (pads sink_<input>):\n", f->rate_n,
      f->rate_d, f->n_inputs);
  for (int i = 0; i < f->n_inputs; i++) {
    const ConyFusionInput *in = &f->inputs[i];
    printf ("  %-12s %d floats at %d/%d per second, stale after %" G_GUINT64_FORMAT
            " ms, tokens of %s%s%s%s\n",
        in->name, in->size, in->rate_n, in->rate_d, in->tolerance_ns / 1000000,
        in->cnn.name ? in->cnn.name : "an unrecorded CNN", in->cnn.output ? " " : "",
        in->cnn.output ? in->cnn.output : "",
        /* conyfuse refuses the other mode's tokens: say which it takes */
        g_strcmp0 (in->cnn.mode, "continual") == 0 ? " (mode=continual)" : "");
  }
  if (f->gate) { /* the encoder's logits, then the gated input's read-out (fusion.h) */
    const ConyFusionGate *g = f->gate;
    printf ("  gate:        adds %s's read-out to the logits, scale %g, bias %g, weights",
        f->inputs[g->input].name, g->scale, g->bias);
    for (int i = 0; i < g->n_features; i++)
      printf (" %g", g->weight[i]);
    printf ("%s%s\n", g->context >= 0 ? ", context " : "",
        g->context >= 0 ? f->inputs[g->context].name : "");
  }
  return TRUE;
}

/* The model search path (cony_model_path_find()), one directory a line. */
static int
print_model_paths (void)
{
  g_auto (GStrv) dirs = cony_model_path_dirs ();
  printf (".\n");
  for (char **d = dirs; *d != NULL; d++)
    printf ("%s\n", *d);
  return 0;
}

int
cony_cmd_info (int argc, char **argv)
{
  gboolean paths = FALSE;
  GOptionEntry entries[] = {
    { "paths", 0, 0, G_OPTION_ARG_NONE, &paths,
        "Print where a relative model name is looked up, in order, and exit", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext)
      ctx = g_option_context_new ("M.safetensors - describe a model file (classifier or CNN)");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  if (paths)
    return print_model_paths ();
  if (argc != 2) {
    fprintf (stderr, "usage: cony info M.safetensors | cony info --paths\n");
    return 2;
  }
  g_autofree char *path = cony_model_path_find (argv[1], &error);
  if (path == NULL)
    return cony_cmd_fail (error);
  g_autoptr (ConyModel) m = cony_model_load (path, &error);
  if (!m) {
    /* Not a classifier model: a CNN file? Otherwise both errors say why. */
    GError *cnn_error = NULL;
    g_autoptr (ConyCnn) cnn = cony_cnn_load (path, &cnn_error);
    if (cnn) {
      g_clear_error (&error);
      return info_cnn (cnn, path);
    }
    g_prefix_error (&error, "not a classifier model (");
    g_prefix_error (&cnn_error, ") nor a CNN file (");
    GError *both = g_error_new (error->domain, error->code, "%s%s)", error->message,
        cnn_error->message);
    g_clear_error (&error);
    g_clear_error (&cnn_error);
    return cony_cmd_fail (both);
  }
  const ConyModelConfig *c = &m->config;
  printf ("model:        %s\n", m->path);
  printf ("architecture: %s, %d block(s)\n", CONY_MODEL_ARCHITECTURE, c->blocks);
  printf ("sizes:        d_in %d, d %d, heads %d (head dim %d), ff %d, classes %d\n", c->d_in, c->d,
      c->heads, c->d / c->heads, c->ff, c->n_classes);
  printf ("window:       n %d, landmarks m %d, pinv %s", c->window, c->landmarks,
      c->pinv == CONY_PINV_EXACT ? "exact" : "iterative");
  if (c->pinv == CONY_PINV_ITERATIVE)
    printf (" (%d iterations)", c->pinv_iterations);
  if (c->tokens_per_step > 1)
    printf (", %d tokens per step", c->tokens_per_step);
  printf ("\npositional:   %s, T %d\n",
      c->positional == CONY_POSITIONAL_LEARNED ? "learned" : "cyclic", c->positional_rows);
  g_autoptr (ConyEncoder) enc = cony_encoder_new (m, -1, &error);
  if (!enc)
    return cony_cmd_fail (error);
  printf ("attention:   ");
  for (int b = 0; b < c->blocks; b++) {
    printf (" block %d %s%s", b, cony_attention_variant_name (c->attention[b]),
        m->block[b].has_landmarks ? " (has fixed landmarks)" : "");
    if (c->blocks == 2 && b == 0)
      printf (" retroactive,");
    else if (c->blocks == 2)
      printf (" run windowed as %s, single output",
          cony_attention_variant_name (cony_encoder_block_variant (enc, b)));
  }
  printf ("\nlabels:      ");
  for (int i = 0; i < c->n_classes; i++)
    printf ("%s%s", i ? ", " : " ", c->labels[i]);
  printf ("\noutput:       %s\n",
      c->output == CONY_OUTPUT_SIGMOID ? "sigmoid (multi-label)" : "softmax");
  printf ("frontend:     %s\n", c->frontend_json ? c->frontend_json : "(none)");
  /* the pairing conytransformer checks against the token caps */
  if (c->has_fusion) {
    if (!print_fusion (m->path, &error))
      return cony_cmd_fail (error);
  } else if (c->cnn.sha256)
    printf ("trained on:   the %s of %s (SHA-256 %s, mode %s): %d-float tokens\n",
        cony_cnn_ref_is_embedding (&c->cnn) ? "pooled embedding" : "last layer",
        c->cnn.name ? c->cnn.name : "(unnamed CNN)", c->cnn.sha256, cony_cnn_ref_mode (&c->cnn),
        c->d_in);
  else
    printf ("trained on:   %d-float tokens of an unrecorded CNN (no frontend.cnn.sha256)\n",
        c->d_in);
  printf ("parameters:   %" G_GSIZE_FORMAT "\n", m->n_parameters);
  printf ("state:        %" G_GSIZE_FORMAT " bytes carried between steps (+ %" G_GSIZE_FORMAT
          " bytes scratch)\n",
      cony_encoder_state_bytes (enc), cony_encoder_scratch_bytes (enc));
  printf ("FLOPs/step:   %.0f (full window, trained variants)\n",
      cony_encoder_flops_per_step (enc));
  return 0;
}
