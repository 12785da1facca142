/* cony classify: run the continual encoder-classifier over a token sequence. */
#include "commands.h"

#include "cony/encoder.h"
#include "cony/error.h"
#include "cony/model.h"
#include "cony/npy.h"

#include <stdio.h>

int
cony_cmd_classify (int argc, char **argv)
{
  g_autofree char *model_path = NULL, *attention = NULL, *output = NULL;
  GOptionEntry entries[] = { { "model", 'm', 0, G_OPTION_ARG_FILENAME, &model_path,
                                 "model file (safetensors)", "M.safetensors" },
    { "attention", 'a', 0, G_OPTION_ARG_STRING, &attention,
        "attention variant to run instead of the trained one (regular, continual, nystrom, "
        "nystrom-fixed, cony, cony-fixed, vcc)",
        "V" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "per-step logits, float32 (T / k, classes)",
        "OUT.npy" },
    G_OPTION_ENTRY_NULL };
  g_autoptr (GOptionContext)
      ctx = g_option_context_new ("IN.npy - per-step logits of a token sequence");
  g_option_context_set_summary (ctx,
      "IN.npy holds float32 tokens (T, d_in), stepped from the stream start "
      "k at a time (k = the model's tokens_per_step, usually 1; T must be a "
      "multiple of k); OUT.npy gets the logits of every step (T / k, classes).");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  if (argc != 2 || !model_path || !output) {
    fprintf (stderr,
        "usage: cony classify --model M.safetensors [--attention V] IN.npy -o OUT.npy\n");
    return 2;
  }
  int override = -1;
  if (attention) {
    ConyAttentionVariant v;
    if (!cony_attention_variant_from_name (attention, &v)) {
      g_set_error (&error, CONY_ERROR, CONY_ERROR_INVALID,
          "--attention: unknown variant '%s' (expected "
          "regular, continual, nystrom, nystrom-fixed, cony, cony-fixed or vcc)",
          attention);
      return cony_cmd_fail (error);
    }
    override = (int) v;
  }
  g_autoptr (ConyModel) model = cony_model_load (model_path, &error);
  if (!model)
    return cony_cmd_fail (error);
  g_autoptr (ConyNpyArray) in = cony_npy_load (argv[1], &error);
  if (!in)
    return cony_cmd_fail (error);
  if (in->ndim != 2 || in->shape[1] != (gsize) model->config.d_in) {
    g_set_error (&error, CONY_ERROR, CONY_ERROR_SHAPE,
        "%s: expected float32 tokens of shape (T, %d) "
        "for model %s, got %d dimension(s)%s",
        argv[1], model->config.d_in, model_path, in->ndim,
        in->ndim == 2 ? " with another token size" : "");
    return cony_cmd_fail (error);
  }
  g_autoptr (ConyEncoder) enc = cony_encoder_new (model, override, &error);
  if (!enc)
    return cony_cmd_fail (error);
  gsize T = in->shape[0], C = model->config.n_classes,
        k = (gsize) cony_encoder_tokens_per_step (enc);
  if (T % k != 0) {
    g_set_error (&error, CONY_ERROR, CONY_ERROR_SHAPE,
        "%s: %" G_GSIZE_FORMAT " tokens are not a whole "
        "number of steps: model %s takes tokens_per_step = %" G_GSIZE_FORMAT " tokens per step",
        argv[1], T, model_path, k);
    return cony_cmd_fail (error);
  }
  gsize steps = T / k;
  g_autofree float *out = g_new0 (float, MAX (steps * C, 1));
  for (gsize t = 0; t < steps; t++)
    if (!cony_encoder_step (enc, in->data + t * k * model->config.d_in, out + t * C)) {
      /* Never write NaN logits as a result: the step and why, and no output file. */
      g_set_error (&error, CONY_ERROR, CONY_ERROR_NUMERIC,
          "%s: step %" G_GSIZE_FORMAT " (tokens %" G_GSIZE_FORMAT "-%" G_GSIZE_FORMAT
          "): non-finite logits (NaN/Inf tokens, or "
          "tokens so large that the model overflows float); %s not written",
          argv[1], t, t * k, t * k + k - 1, output);
      return cony_cmd_fail (error);
    }
  gsize shape[2] = { steps, C };
  if (!cony_npy_save (output, out, 2, shape, &error))
    return cony_cmd_fail (error);
  return 0;
}
