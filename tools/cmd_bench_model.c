/* cony bench model: µs per step of the encoder-classifier, every variant, 1 and 2
 * blocks. The PyTorch column comes from bench/torch_compare.py, which runs this with
 * --json next to training/bench_torch_step.py. */
#include "bench.h"
#include "commands.h"

#include "cony/encoder.h"
#include "cony/error.h"
#include "cony/model.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static float *
rand_buf (GRand *r, gsize n, double scale, double offset)
{
  float *p = g_new (float, n);
  cony_bench_fill_random (r, p, n, offset, scale);
  return p;
}

/* @x rounded to the nearest float16 value (ties to even), as an F16 model file stores it. */
static float
round_to_half (float x)
{
  if (fabsf (x) < 0x1p-14f) /* float16 subnormals: multiples of 2^-24 */
    return (float) (nearbyint ((double) x * 0x1p24) * 0x1p-24);
  guint32 bits;
  memcpy (&bits, &x, sizeof bits);
  bits += 0xfffu + ((bits >> 13) & 1u);
  bits &= ~0x1fffu;
  memcpy (&x, &bits, sizeof x);
  return x;
}

static void
round_weights_to_half (float *p, gsize n)
{
  for (gsize i = 0; i < n; i++)
    p[i] = round_to_half (p[i]);
}

/* Every weight of @m rounded to float16: the model an F16 file holds (the library then
 * keeps its matrices as float16; cony_model_load() expands the file to the same floats). */
static void
model_to_half (ConyModel *model)
{
  const ConyModelConfig *c = &model->config;
  gsize d = c->d, din = c->d_in, ff = c->ff, lm = (gsize) c->landmarks * d;
  round_weights_to_half (model->input_proj_weight, d * din);
  round_weights_to_half (model->input_proj_bias, d);
  round_weights_to_half (model->pos_embedding, (gsize) c->positional_rows * d);
  for (int b = 0; b < c->blocks; b++) {
    ConyModelBlock *k = &model->block[b];
    round_weights_to_half ((float *) k->attn.in_proj_weight, 3 * d * d);
    round_weights_to_half ((float *) k->attn.in_proj_bias, 3 * d);
    round_weights_to_half ((float *) k->attn.out_proj_weight, d * d);
    round_weights_to_half ((float *) k->attn.out_proj_bias, d);
    round_weights_to_half ((float *) k->attn.q_landmarks, lm);
    round_weights_to_half ((float *) k->attn.k_landmarks, lm);
    round_weights_to_half (k->norm1_weight, d);
    round_weights_to_half (k->norm1_bias, d);
    round_weights_to_half (k->ff1_weight, ff * d);
    round_weights_to_half (k->ff1_bias, ff);
    round_weights_to_half (k->ff2_weight, d * ff);
    round_weights_to_half (k->ff2_bias, d);
    round_weights_to_half (k->norm2_weight, d);
    round_weights_to_half (k->norm2_bias, d);
  }
  round_weights_to_half (model->norm_weight, d);
  round_weights_to_half (model->norm_bias, d);
  round_weights_to_half (model->classifier_weight, (gsize) c->n_classes * d);
  round_weights_to_half (model->classifier_bias, c->n_classes);
}

static ConyModel *
random_model (int d_in, int d, int heads, int ff, int blocks, int n, int m, int classes)
{
  GRand *r = g_rand_new_with_seed (42);
  ConyModel *model = g_new0 (ConyModel, 1);
  ConyModelConfig *c = &model->config;
  model->path = g_strdup ("(random weights)");
  c->d_in = d_in;
  c->d = d;
  c->heads = heads;
  c->ff = ff;
  c->blocks = blocks;
  c->window = n;
  c->landmarks = m;
  c->pinv = CONY_PINV_EXACT;
  c->pinv_iterations = 6;
  c->positional = CONY_POSITIONAL_LEARNED;
  c->positional_rows = 2 * n - 1;
  c->n_classes = classes;
  c->labels = g_new0 (char *, classes + 1);
  for (int i = 0; i < classes; i++)
    c->labels[i] = g_strdup_printf ("class%d", i);
  double sd = 1.0 / sqrt (d), sin_ = 1.0 / sqrt (d_in), sff = 1.0 / sqrt (ff);
  model->input_proj_weight = rand_buf (r, (gsize) d * d_in, sin_, 0);
  model->input_proj_bias = rand_buf (r, d, 0.1, 0);
  model->pos_embedding = rand_buf (r, (gsize) c->positional_rows * d, 0.1, 0);
  int hd = d / heads;
  for (int b = 0; b < blocks; b++) {
    ConyModelBlock *k = &model->block[b];
    c->attention[b] = CONY_ATTENTION_CONY_FIXED;
    k->attn.in_proj_weight = rand_buf (r, (gsize) 3 * d * d, sd, 0);
    k->attn.in_proj_bias = rand_buf (r, 3 * d, 0.1, 0);
    k->attn.out_proj_weight = rand_buf (r, (gsize) d * d, sd, 0);
    k->attn.out_proj_bias = rand_buf (r, d, 0.1, 0);
    k->attn.q_landmarks = rand_buf (r, (gsize) heads * m * hd, 1.0, 0);
    k->attn.k_landmarks = rand_buf (r, (gsize) heads * m * hd, 1.0, 0);
    k->has_landmarks = TRUE;
    k->norm1_weight = rand_buf (r, d, 0.1, 1);
    k->norm1_bias = rand_buf (r, d, 0.1, 0);
    k->ff1_weight = rand_buf (r, (gsize) ff * d, sd, 0);
    k->ff1_bias = rand_buf (r, ff, 0.1, 0);
    k->ff2_weight = rand_buf (r, (gsize) d * ff, sff, 0);
    k->ff2_bias = rand_buf (r, d, 0.1, 0);
    k->norm2_weight = rand_buf (r, d, 0.1, 1);
    k->norm2_bias = rand_buf (r, d, 0.1, 0);
  }
  model->norm_weight = rand_buf (r, d, 0.1, 1);
  model->norm_bias = rand_buf (r, d, 0.1, 0);
  model->classifier_weight = rand_buf (r, (gsize) classes * d, sd, 0);
  model->classifier_bias = rand_buf (r, classes, 0.1, 0);
  g_rand_free (r);
  return model;
}

static gboolean
list_has (const char *list, const char *item)
{
  g_auto (GStrv) parts = g_strsplit (list, ",", -1);
  return g_strv_contains ((const char *const *) parts, item);
}

int
cony_cmd_bench_model (int argc, char **argv)
{
  int d_in = 128, d = 192, heads = 16, ff = 384, n = 120, m = 4, classes = 10;
  double seconds = 0.5;
  gboolean json = FALSE, markdown = FALSE;
  g_autofree char *only_blocks = NULL, *only_variants = NULL, *dtypes = NULL;
  GOptionEntry entries[] = { { "seconds", 0, 0, G_OPTION_ARG_DOUBLE, &seconds,
                                 "time per C measurement (default 0.5)", "S" },
    { "blocks", 0, 0, G_OPTION_ARG_STRING, &only_blocks, "only these block counts (e.g. 1)",
        "LIST" },
    { "variants", 0, 0, G_OPTION_ARG_STRING, &only_variants,
        "only these variants (comma-separated)", "LIST" },
    { "dtype", 0, 0, G_OPTION_ARG_STRING, &dtypes,
        "weight storage(s): f32, f16 or f32,f16 (default both)", "LIST" },
    { "markdown", 0, 0, G_OPTION_ARG_NONE, &markdown, "print a markdown table", NULL },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json,
        "each row as a JSON object on a line of its own (bench/torch_compare.py reads them)",
        NULL },
    G_OPTION_ENTRY_NULL };
  g_autoptr (GOptionContext) ctx = g_option_context_new (
      "- microseconds per step of the encoder-classifier (GTZAN setting)");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  openblas_set_num_threads (1);
  if (!dtypes)
    dtypes = g_strdup ("f32,f16");
  g_auto (GStrv) dtype_list = g_strsplit (dtypes, ",", -1);
  for (int i = 0; dtype_list[i]; i++)
    if (strcmp (dtype_list[i], "f32") && strcmp (dtype_list[i], "f16"))
      return cony_cmd_fail (g_error_new (CONY_ERROR, CONY_ERROR_INVALID,
          "--dtype: '%s' is not f32 "
          "or f16",
          dtype_list[i]));

  printf ("model bench: d_in %d, d %d, %d heads, FF %d, n %d, m %d, %d classes, random weights, "
          "one thread\n",
      d_in, d, heads, ff, n, m, classes);
  printf ("C: continual step (cony_encoder_step); PyTorch beside it: bench/torch_compare.py "
          "model\n\n");
  if (markdown && !json) {
    printf (
        "| blocks | weights | variant | C µs/step wall | C µs/step CPU | MFLOP/step | state KiB "
        "|\n");
    printf ("|---|---|---|---|---|---|---|\n");
  } else if (!json) {
    printf ("%-7s %-8s %-14s %10s %10s %11s %10s\n", "blocks", "weights", "variant", "C µs wall",
        "C µs CPU", "MFLOP/step", "state KiB");
  }
  float *tok = g_new (float, d_in), *logits = g_new (float, classes);
  for (int blocks = 1; blocks <= 2; blocks++) {
    g_autofree char *bname = g_strdup_printf ("%d", blocks);
    if (only_blocks && !list_has (only_blocks, bname))
      continue;
    for (int di = 0; dtype_list[di]; di++) {
      const char *dtype = dtype_list[di];
      g_autoptr (ConyModel) model = random_model (d_in, d, heads, ff, blocks, n, m, classes);
      if (!strcmp (dtype, "f16"))
        model_to_half (model);
      for (int v = 0; v < CONY_ATTENTION_N_VARIANTS; v++) {
        if (only_variants && !list_has (only_variants, cony_attention_variant_name (v)))
          continue;
        if (cony_attention_variant_single_output_only (v) && blocks == 2)
          continue; /* single output only: a 2-block model's first block is retroactive */
        g_autoptr (ConyEncoder) enc = cony_encoder_new (model, v, &error);
        if (!enc)
          return cony_cmd_fail (error);
        GRand *r = g_rand_new_with_seed (7);
        /* fill the window (and one landmark period past it) before timing */
        for (int t = 0; t < n + n / m + 1; t++) {
          cony_bench_fill_random (r, tok, d_in, 0.0, 1.0);
          cony_encoder_step (enc, tok, logits);
        }
        gint64 t0 = g_get_monotonic_time (), elapsed;
        double c0 = cony_bench_cpu_s ();
        guint64 steps = 0;
        do {
          for (int k = 0; k < 16; k++) {
            tok[k % d_in] = (float) g_rand_double_range (r, -1, 1);
            cony_encoder_step (enc, tok, logits);
          }
          steps += 16;
          elapsed = g_get_monotonic_time () - t0;
        } while (elapsed < seconds * 1e6);
        double cpu = (cony_bench_cpu_s () - c0) * 1e6 / steps;
        g_rand_free (r);
        double us = (double) elapsed / steps;
        const char *name = cony_attention_variant_name (v);
        double mflop = cony_encoder_flops_per_step (enc) / 1e6;
        double kib = cony_encoder_state_bytes (enc) / 1024.0;
        if (json)
          printf ("{\"blocks\": %d, \"weights\": \"%s\", \"variant\": \"%s\", "
                  "\"us_per_step\": %.3f, \"cpu_us_per_step\": %.3f, \"mflop_per_step\": %.4f, "
                  "\"state_kib\": %.2f}\n",
              blocks, dtype, name, us, cpu, mflop, kib);
        else if (markdown)
          printf ("| %d | %s | %s | %.2f | %.2f | %.3f | %.1f |\n", blocks, dtype, name, us, cpu,
              mflop, kib);
        else
          printf ("%-7d %-8s %-14s %10.2f %10.2f %11.3f %10.1f\n", blocks, dtype, name, us, cpu,
              mflop, kib);
        fflush (stdout);
      }
    }
  }
  g_free (tok);
  g_free (logits);
  return 0;
}
