/* Model loader (safetensors + JSON config): load, then read every loaded tensor at the
 * size its config implies and build each block's attention config. */
#include "fuzz.h"
#include "cony/model.h"

static double
sum (const float *v, gsize n)
{
  double s = 0;
  for (gsize i = 0; v != NULL && i < n; i++)
    s += v[i];
  return s;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  FuzzFile f;
  fuzz_file_open (&f, data, size);
  GError *error = NULL;
  ConyModel *m = cony_model_load (f.path, &error);
  fuzz_file_close (&f);
  if (m == NULL) {
    fuzz_check_error (error);
    return 0;
  }
  const ConyModelConfig *c = &m->config;
  gsize d = c->d;
  double s = sum (m->input_proj_weight, d * c->d_in) + sum (m->input_proj_bias, d) +
             sum (m->pos_embedding, (gsize) c->positional_rows * d) + sum (m->norm_weight, d) +
             sum (m->classifier_weight, (gsize) c->n_classes * d);
  for (int b = 0; b < c->blocks; b++) {
    const ConyModelBlock *k = &m->block[b];
    s += sum (k->ff1_weight, (gsize) c->ff * d) + sum (k->ff2_weight, d * c->ff) +
         sum (k->norm2_bias, d);
    ConyAttentionConfig ac = cony_model_attention_config (m, b, c->attention[b], FALSE);
    s += ac.window;
  }
  for (int i = 0; i < c->n_classes; i++)
    s += c->labels[i][0];
  fuzz_use (s);
  cony_model_free (m);
  return 0;
}
