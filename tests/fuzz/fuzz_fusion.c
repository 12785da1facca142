/* Fused model configs (fuzz_patch.h patches on the fused goldens b1_cony, two inputs, and
 * b2_conyfixed, three): the "fusion" object of the config (inputs, names, sizes, rates,
 * tolerances), d_in, and the fusion.<input>.absent tensors (missing, misshapen, extra,
 * non-finite, of another dtype). A fusion that loads must be consistent: 1..8 inputs with
 * valid unique names, contiguous offsets, d_out = the sizes + one flag per input, positive
 * rates; joining every pattern of present and absent inputs gives the tokens or the absent
 * tokens and the flags; and the whole file loads as a model whose d_in is d_out, whose
 * encoder steps on the fused tokens with finite logits. */
#include "fuzz_patch.h"
#include "cony/encoder.h"
#include "cony/fusion.h"
#include "cony/model.h"

static FuzzBase bases[2];

static void
check_fusion (const ConyFusion *fu)
{
  g_assert (fu->n_inputs >= 1 && fu->n_inputs <= CONY_FUSION_MAX_INPUTS);
  g_assert (fu->rate_n > 0 && fu->rate_d > 0);
  int offset = 0;
  for (int i = 0; i < fu->n_inputs; i++) {
    const ConyFusionInput *in = &fu->inputs[i];
    g_assert (in->name && in->name[0] && strlen (in->name) <= CONY_FUSION_MAX_NAME);
    g_assert (cony_fusion_input_index (fu, in->name) == i);
    g_assert (in->size > 0 && in->offset == offset && in->absent != NULL);
    g_assert (in->rate_n > 0 && in->rate_d > 0);
    for (int j = 0; j < in->size; j++)
      g_assert (isfinite (in->absent[j]));
    offset += in->size;
  }
  g_assert (fu->d_out == offset + fu->n_inputs);
}

/* Fused token of pattern @mask (bit i: input i present, its token all i + 1). */
static void
join (const ConyFusion *fu, guint mask, float *out, float *scratch)
{
  const float *tokens[CONY_FUSION_MAX_INPUTS] = { NULL };
  for (int i = 0; i < fu->n_inputs; i++) {
    if (!(mask & (1u << i)))
      continue;
    float *t = scratch + fu->inputs[i].offset;
    for (int j = 0; j < fu->inputs[i].size; j++)
      t[j] = (float) (i + 1);
    tokens[i] = t;
  }
  cony_fusion_join (fu, tokens, out);
  for (int i = 0; i < fu->n_inputs; i++) {
    const ConyFusionInput *in = &fu->inputs[i];
    gboolean present = (mask & (1u << i)) != 0;
    for (int j = 0; j < in->size; j++)
      g_assert (out[in->offset + j] == (present ? (float) (i + 1) : in->absent[j]));
    g_assert (out[fu->d_out - fu->n_inputs + i] == (present ? 1.0f : 0.0f));
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (!bases[0].header) {
    fuzz_base_load (&bases[0], "fusion/b1_cony.safetensors");
    fuzz_base_load (&bases[1], "fusion/b2_conyfixed.safetensors");
  }
  FuzzFile f;
  guint which;
  if (!fuzz_patch_open (bases, G_N_ELEMENTS (bases), data, size, &f, &which))
    return 0;
  GError *error = NULL;
  ConyFusion *fu = cony_fusion_load (f.path, &error);
  if (fu == NULL) {
    fuzz_check_error (error);
    fuzz_file_close (&f);
    return 0;
  }
  check_fusion (fu);
  ConyModel *model = cony_model_load (f.path, &error);
  fuzz_file_close (&f);
  if (model == NULL) {
    fuzz_check_error (error);
    cony_fusion_free (fu);
    return 0;
  }
  g_assert (model->config.d_in == fu->d_out);
  float *fused = g_new (float, fu->d_out), *scratch = g_new (float, fu->d_out);
  ConyEncoder *enc = cony_encoder_new (model, -1, &error);
  if (enc == NULL)
    fuzz_check_error (error);
  float *logits = g_new (float, MAX (model->config.n_classes, 1));
  guint patterns = 1u << fu->n_inputs;
  for (guint mask = 0; mask < patterns && mask < 64; mask++) {
    join (fu, mask, fused, scratch);
    if (enc && cony_encoder_step (enc, fused, logits))
      for (int c = 0; c < model->config.n_classes; c++)
        g_assert (isfinite (logits[c]));
  }
  g_free (logits);
  if (enc)
    cony_encoder_free (enc);
  g_free (fused);
  g_free (scratch);
  cony_model_free (model);
  cony_fusion_free (fu);
  return 0;
}
