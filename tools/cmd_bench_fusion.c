/* cony bench fusion: µs per step of a fused model (include/cony/fusion.h): the join of
 * the inputs' tokens (absent tokens where an input is missing) alone, the encoder step
 * alone, and both, which is what a fused step costs beyond the single-sense chains. */
#include "bench.h"
#include "commands.h"

#include "cony/encoder.h"
#include "cony/fusion.h"
#include "cony/model.h"

#include <cblas.h>
#include <stdio.h>

#define STREAM 1024 /* steps of random input, cycled */
#define REPEATS 5

typedef struct {
  const ConyFusion *fusion;
  ConyEncoder *encoder;
  float *inputs[CONY_FUSION_MAX_INPUTS]; /* STREAM tokens per input */
  gboolean *present;                     /* STREAM x n_inputs */
  float *fused;                          /* STREAM fused tokens */
  float *logits;
} Bench;

typedef enum
{
  PART_JOIN,
  PART_ENCODER,
  PART_BOTH,
} Part;

/* Runs @part for about @seconds of CPU time; returns µs per step (CPU). */
static double
measure (Bench *b, Part part, double seconds)
{
  const ConyFusion *f = b->fusion;
  guint64 steps = 0;
  double t0 = cony_bench_cpu_s (), t = t0;
  while (t - t0 < seconds) {
    for (int s = 0; s < 64; s++, steps++) {
      gsize i = steps % STREAM;
      float *out = b->fused + i * f->d_out;
      if (part != PART_ENCODER) {
        const float *tokens[CONY_FUSION_MAX_INPUTS];
        for (int k = 0; k < f->n_inputs; k++)
          tokens[k] = b->present[i * f->n_inputs + k] ? b->inputs[k] + i * f->inputs[k].size : NULL;
        cony_fusion_join (f, tokens, out);
      }
      if (part != PART_JOIN)
        cony_encoder_step (b->encoder, out, b->logits);
    }
    t = cony_bench_cpu_s ();
  }
  return (t - t0) * 1e6 / (double) steps;
}

int
cony_cmd_bench_fusion (int argc, char **argv)
{
  double seconds = 0.3, absent = 0.25;
  GOptionEntry entries[] = { { "seconds", 0, 0, G_OPTION_ARG_DOUBLE, &seconds,
                                 "CPU time per measurement (default 0.3)", "S" },
    { "absent", 0, 0, G_OPTION_ARG_DOUBLE, &absent,
        "fraction of input tokens absent (default 0.25)", "P" },
    G_OPTION_ENTRY_NULL };
  g_autoptr (GOptionContext)
      ctx = g_option_context_new ("FUSED_MODEL - microseconds per step of a fused model");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  if (argc != 2 || seconds <= 0 || absent < 0 || absent > 1) {
    fprintf (stderr, "usage: cony bench fusion FUSED_MODEL [--seconds S] [--absent 0..1]\n");
    return 2;
  }
  openblas_set_num_threads (1);
  g_autoptr (ConyFusion) fusion = cony_fusion_load (argv[1], &error);
  if (!fusion)
    return cony_cmd_fail (error);
  g_autoptr (ConyModel) model = cony_model_load (argv[1], &error);
  if (!model)
    return cony_cmd_fail (error);
  Bench b = { .fusion = fusion };
  b.encoder = cony_encoder_new (model, -1, &error);
  if (!b.encoder)
    return cony_cmd_fail (error);
  GRand *rng = g_rand_new_with_seed (7);
  for (int k = 0; k < fusion->n_inputs; k++) {
    gsize n = (gsize) STREAM * fusion->inputs[k].size;
    b.inputs[k] = g_new (float, n);
    cony_bench_fill_random (rng, b.inputs[k], n, 0, 1);
  }
  b.present = g_new (gboolean, (gsize) STREAM * fusion->n_inputs);
  for (gsize i = 0; i < (gsize) STREAM * fusion->n_inputs; i++)
    b.present[i] = g_rand_double (rng) >= absent;
  b.fused = g_new (float, (gsize) STREAM * fusion->d_out);
  b.logits = g_new (float, model->config.n_classes);
  measure (&b, PART_BOTH, seconds / 4); /* warm up; every fused token written */

  const char *names[] = { "join", "encoder step", "fused step (both)" };
  ConyBenchSummary sum[3];
  for (int p = 0; p < 3; p++) {
    double us[REPEATS];
    for (int r = 0; r < REPEATS; r++)
      us[r] = measure (&b, (Part) p, seconds);
    sum[p] = cony_bench_summarise (us, REPEATS);
  }
  const ConyModelConfig *c = &model->config;
  printf ("model %s: %d inputs (", argv[1], fusion->n_inputs);
  for (int k = 0; k < fusion->n_inputs; k++)
    printf ("%s%s %d", k ? ", " : "", fusion->inputs[k].name, fusion->inputs[k].size);
  printf ("), d_in %d, d %d, %d block(s) %s, n %d, m %d; %.0f %% of input tokens absent; "
          "CPU time, 1 BLAS thread, median (min) of %d\n",
      c->d_in, c->d, c->blocks, cony_attention_variant_name (c->attention[0]), c->window,
      c->landmarks, 100 * absent, REPEATS);
  printf ("| part | µs/step | min |\n|---|---|---|\n");
  for (int p = 0; p < 3; p++)
    printf ("| %s | %.3f | %.3f |\n", names[p], sum[p].median, sum[p].min);
  printf ("join share of the fused step: %.2f %%\n", 100 * sum[0].median / sum[2].median);

  g_rand_free (rng);
  for (int k = 0; k < fusion->n_inputs; k++)
    g_free (b.inputs[k]);
  g_free (b.present);
  g_free (b.fused);
  g_free (b.logits);
  cony_encoder_free (b.encoder);
  return 0;
}
