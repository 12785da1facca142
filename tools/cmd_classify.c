/* cony classify: run the continual encoder-classifier over a token sequence. */
#include "commands.h"

#include "cony/encoder.h"
#include "cony/error.h"
#include "cony/labelgroups.h"
#include "cony/model.h"
#include "cony/npy.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The reported labels under --listen / --ignore / --groups-file (cony/labelgroups.h); NULL
 * without error when none is given (the logits are written as they are). */
static ConyLabelView *
classify_view (const ConyModel *model, const char *listen, const char *ignore,
    const char *groups_file, const char *other, const char *how, GError **error)
{
  if (!listen && !ignore && !groups_file)
    return NULL;
  ConyGroupScore score = CONY_GROUP_SCORE_MAX;
  if (how && strcmp (how, "sum") == 0)
    score = CONY_GROUP_SCORE_SUM;
  else if (how && strcmp (how, "max") != 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "--group-score: '%s', expected max or sum",
        how);
    return NULL;
  }
  const char *const *labels = (const char *const *) model->config.labels;
  guint n = (guint) model->config.n_classes;
  g_autoptr (ConyLabelGroups) groups = NULL;
  if (groups_file && !(groups = cony_label_groups_load (groups_file, labels, n, error)))
    return NULL;
  g_auto (GStrv) l = cony_label_list_split (listen);
  g_auto (GStrv) i = cony_label_list_split (ignore);
  return cony_label_view_new (labels, n, NULL, groups, (const char *const *) l,
      (const char *const *) i, other ? other : "other", score, error);
}

/* One step's @logits as the reported scores (@view's fold of the softmax or sigmoid). */
static void
classify_fold (const ConyModel *model, const ConyLabelView *view, const float *logits, float *probs,
    float *out)
{
  int c = model->config.n_classes;
  double max = logits[0], sum = 0.0;
  for (int i = 1; i < c; i++)
    max = MAX (max, logits[i]);
  for (int i = 0; i < c; i++) {
    probs[i] = model->config.output == CONY_OUTPUT_SIGMOID
        ? (float) (1.0 / (1.0 + exp (-(double) logits[i])))
        : (float) exp ((double) logits[i] - max);
    sum += probs[i];
  }
  for (int i = 0; model->config.output != CONY_OUTPUT_SIGMOID && i < c; i++)
    probs[i] = (float) (probs[i] / sum);
  cony_label_view_fold (view, probs, out);
}

int
cony_cmd_classify (int argc, char **argv)
{
  g_autofree char *model_path = NULL, *attention = NULL, *output = NULL;
  g_autofree char *listen = NULL, *ignore = NULL, *groups_file = NULL, *other = NULL,
                  *group_score = NULL;
  g_autofree char *variants = cony_attention_variant_names ();
  g_autofree char *attention_help =
      g_strdup_printf ("attention variant to run instead of the trained one (%s)", variants);
  GOptionEntry entries[] = { { "model", 'm', 0, G_OPTION_ARG_FILENAME, &model_path,
                                 "model file (safetensors)", "M.safetensors" },
    { "attention", 'a', 0, G_OPTION_ARG_STRING, &attention, attention_help, "V" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "per-step logits, float32 (T / k, classes)",
        "OUT.npy" },
    { "listen", 0, 0, G_OPTION_ARG_STRING, &listen,
        "labels (groups or model labels) that may be reported, ';'-separated", "'A;B'" },
    { "ignore", 0, 0, G_OPTION_ARG_STRING, &ignore, "labels never reported, ';'-separated",
        "'A;B'" },
    { "groups-file", 0, 0, G_OPTION_ARG_FILENAME, &groups_file,
        "label groups, 'name = model label; model label' a line", "FILE" },
    { "other-label", 0, 0, G_OPTION_ARG_STRING, &other,
        "label of the classes not listened to (default other; '' drops them)", "NAME" },
    { "group-score", 0, 0, G_OPTION_ARG_STRING, &group_score,
        "a group's score: max (default) or sum (capped at 1)", "max|sum" },
    G_OPTION_ENTRY_NULL };
  g_autoptr (GOptionContext)
      ctx = g_option_context_new ("IN.npy - per-step logits of a token sequence");
  g_option_context_set_summary (ctx,
      "IN.npy holds float32 tokens (T, d_in), stepped from the stream start "
      "k at a time (k = the model's tokens_per_step, usually 1; T must be a "
      "multiple of k); OUT.npy gets the logits of every step (T / k, classes). With "
      "--listen, --ignore or --groups-file it gets the scores (softmax or sigmoid) of the "
      "reported labels instead, folded as conytransformer does, and their labels are "
      "printed one a line in column order.");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  if (argc != 2 || !model_path || !output) {
    fprintf (stderr,
        "usage: cony classify --model M.safetensors [--attention V] [--listen 'A;B'] "
        "[--ignore 'A;B'] [--groups-file FILE] IN.npy -o OUT.npy\n");
    return 2;
  }
  int override = -1;
  if (attention) {
    ConyAttentionVariant v;
    if (!cony_attention_variant_from_name (attention, &v)) {
      g_set_error (&error, CONY_ERROR, CONY_ERROR_INVALID,
          "--attention: unknown variant '%s' (expected %s)", attention, variants);
      return cony_cmd_fail (error);
    }
    override = (int) v;
  }
  g_autoptr (ConyModel) model = cony_model_load (model_path, &error);
  if (!model)
    return cony_cmd_fail (error);
  g_autoptr (ConyLabelView)
      view = classify_view (model, listen, ignore, groups_file, other, group_score, &error);
  if (!view && error)
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
  gsize steps = T / k, R = view ? cony_label_view_n_labels (view) : C;
  g_autofree float *out = g_new0 (float, MAX (steps * R, 1));
  g_autofree float *logits = g_new0 (float, C), *probs = g_new0 (float, C);
  for (gsize t = 0; t < steps; t++) {
    float *step_out = view ? logits : out + t * C;
    if (!cony_encoder_step (enc, in->data + t * k * model->config.d_in, step_out)) {
      /* Never write NaN logits as a result: the step and why, and no output file. */
      g_set_error (&error, CONY_ERROR, CONY_ERROR_NUMERIC,
          "%s: step %" G_GSIZE_FORMAT " (tokens %" G_GSIZE_FORMAT "-%" G_GSIZE_FORMAT
          "): non-finite logits (NaN/Inf tokens, or "
          "tokens so large that the model overflows float); %s not written",
          argv[1], t, t * k, t * k + k - 1, output);
      return cony_cmd_fail (error);
    }
    if (view)
      classify_fold (model, view, logits, probs, out + t * R);
  }
  gsize shape[2] = { steps, R };
  if (!cony_npy_save (output, out, 2, shape, &error))
    return cony_cmd_fail (error);
  for (guint i = 0; view && i < R; i++)
    printf ("%s\n", cony_label_view_labels (view)[i]);
  return 0;
}
