/* Model loader (safetensors + JSON config): load, then read every loaded tensor at the
 * size its config implies and build each block's attention config; on small models
 * build an encoder (the trained variants, or one the input's last byte picks) and step it
 * past a full window, one step with overflowing tokens among them. */
#include "fuzz.h"
#include "cony/encoder.h"
#include "cony/model.h"

#include <math.h>

/* Encoders only for models this small (a step then costs microseconds, not the
 * loader's milliseconds): window, tokens per step and counted flops per step. */
#define ENCODER_MAX_WINDOW 256
#define ENCODER_MAX_K 16
#define ENCODER_MAX_FLOPS 4e6
/* Steps run: a full window and a few evictions, at most this many. */
#define ENCODER_MAX_STEPS 40
/* The step whose tokens overflow the input projection (the encoder must reset). */
#define OVERFLOW_STEP 2

static double
sum (const float *v, gsize n)
{
  double s = 0;
  for (gsize i = 0; v != NULL && i < n; i++)
    s += v[i];
  return s;
}

/* Steps an encoder of @m through a window and a few evictions; a refused encoder (the
 * variant does not fit the model, the budget) must say why. */
static void
run_encoder (const ConyModel *m, int override_variant)
{
  const ConyModelConfig *c = &m->config;
  if (c->window > ENCODER_MAX_WINDOW || c->tokens_per_step > ENCODER_MAX_K)
    return;
  GError *error = NULL;
  ConyEncoder *e = cony_encoder_new (m, override_variant, &error);
  if (e == NULL) {
    fuzz_check_error (error);
    return;
  }
  if (cony_encoder_flops_per_step (e) <= ENCODER_MAX_FLOPS) {
    int k = cony_encoder_tokens_per_step (e);
    gsize n_tok = (gsize) k * c->d_in;
    float *tokens = g_new (float, MAX (n_tok, 1));
    float *logits = g_new (float, MAX (c->n_classes, 1));
    int steps = MIN (c->window / k + 3, ENCODER_MAX_STEPS);
    double s = 0;
    for (int t = 0; t < steps; t++) {
      for (gsize i = 0; i < n_tok; i++)
        tokens[i] = t == OVERFLOW_STEP ? 3e38f : (float) ((i + t) % 7) * 0.25f - 0.75f;
      if (cony_encoder_step (e, tokens, logits)) {
        for (int i = 0; i < c->n_classes; i++) {
          g_assert (isfinite (logits[i])); /* TRUE promises finite logits */
          s += logits[i];
        }
      } else {
        g_assert (cony_encoder_steps (e) == 0); /* FALSE: the encoder has reset */
      }
      g_assert (cony_encoder_window_fill (e) <= c->window);
    }
    fuzz_use (s);
    g_free (tokens);
    g_free (logits);
  }
  cony_encoder_free (e);
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
  double s = sum (m->input_proj_weight, d * c->d_in) + sum (m->input_proj_bias, d)
      + sum (m->pos_embedding, (gsize) c->positional_rows * d) + sum (m->norm_weight, d)
      + sum (m->classifier_weight, (gsize) c->n_classes * d);
  for (int b = 0; b < c->blocks; b++) {
    const ConyModelBlock *k = &m->block[b];
    s += sum (k->ff1_weight, (gsize) c->ff * d) + sum (k->ff2_weight, d * c->ff)
        + sum (k->norm2_bias, d);
    ConyAttentionConfig ac = cony_model_attention_config (m, b, c->attention[b], FALSE);
    s += ac.window;
  }
  for (int i = 0; i < c->n_classes; i++)
    s += c->labels[i][0];
  fuzz_use (s);
  /* the last byte picks: half the values the trained variants, else one variant */
  int pick = data[size - 1] % (2 * CONY_ATTENTION_N_VARIANTS);
  run_encoder (m, pick < CONY_ATTENTION_N_VARIANTS ? -1 : pick - CONY_ATTENTION_N_VARIANTS);
  cony_model_free (m);
  return 0;
}
