/* cony bench: benchmarks, measured side by side in one run (never timed tests). */
#include "commands.h"

#include "../src/attention-private.h"
#include "cony/attention.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* This thread's CPU time: what the step costs, whatever else holds the cores. */
static double
cpu_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void
fill_random (GRand *rng, float *x, gsize n, double sd)
{
  for (gsize i = 0; i < n; i++)
    x[i] = (float) (g_rand_double_range (rng, -1.0, 1.0) * sd * sqrt (3.0));
}

typedef struct {
  double core_us, step_us;
} Timing;

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

/* Median over 5 runs of the CPU time per step, after the window has filled: the core
 * (tokens projected beforehand; the copy of each projection into the layer is timed
 * alone and subtracted) and the whole step with projections. */
static Timing
time_layer (ConyAttention *a, const float *tokens, int n_tokens, double budget_s)
{
  const ConyAttentionConfig *c = cony_attention_get_config (a);
  int d = c->d, n = c->window;
  gsize qkv_len = 3 * (gsize) d;
  g_autofree float *out = g_new (float, (gsize) n * d);
  g_autofree float *qkvs = g_new (float, (gsize) n_tokens * qkv_len);
  for (int t = 0; t < n_tokens; t++) {
    cony_attention_project (a, tokens + (gsize) t * d);
    memcpy (qkvs + t * qkv_len, a->qkv, sizeof (float) * qkv_len);
  }
  for (int t = 0; t < 2 * n; t++)
    cony_attention_step (a, tokens + (gsize) (t % n_tokens) * d, out);
  /* Steps per run from a short probe, so that each run takes about budget_s / 5. */
  double t0 = cpu_ns ();
  int probe = 0;
  while (cpu_ns () - t0 < budget_s * 1e8)
    cony_attention_step (a, tokens + (gsize) (probe++ % n_tokens) * d, out);
  int steps = MAX (20, probe * 2);
  enum { REPS = 5 };
  double core[REPS], whole[REPS];
  for (int r = 0; r < REPS; r++) {
    double s0 = cpu_ns ();
    for (int i = 0; i < steps; i++) {
      memcpy (a->qkv, qkvs + (i % n_tokens) * qkv_len, sizeof (float) * qkv_len);
      cony_attention_core_step (a);
    }
    double s1 = cpu_ns ();
    for (int i = 0; i < steps; i++)
      memcpy (a->heads_out, qkvs + (i % n_tokens) * qkv_len, sizeof (float) * qkv_len);
    double s2 = cpu_ns ();
    for (int i = 0; i < steps; i++)
      cony_attention_step (a, tokens + (gsize) (i % n_tokens) * d, out);
    double s3 = cpu_ns ();
    core[r] = ((s1 - s0) - (s2 - s1)) / steps / 1e3;
    whole[r] = (s3 - s2) / steps / 1e3;
  }
  qsort (core, REPS, sizeof (double), cmp_double);
  qsort (whole, REPS, sizeof (double), cmp_double);
  return (Timing) { core[REPS / 2], whole[REPS / 2] };
}

static int
bench_attention (int argc, char **argv)
{
  int n = 120, d = 192, heads = 16, m = 4;
  double budget = 0.3;
  GOptionEntry entries[] = {
    { "window", 0, 0, G_OPTION_ARG_INT, &n, "window n (default 120)", "N" },
    { "dim", 0, 0, G_OPTION_ARG_INT, &d, "embedding d (default 192)", "D" },
    { "heads", 0, 0, G_OPTION_ARG_INT, &heads, "heads (default 16)", "H" },
    { "landmarks", 0, 0, G_OPTION_ARG_INT, &m, "landmarks m (default 4)", "M" },
    { "budget", 0, 0, G_OPTION_ARG_DOUBLE, &budget, "seconds per measurement (default 0.3)", "S" },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- every attention variant side by side");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  openblas_set_num_threads (1);

  GRand *rng = g_rand_new_with_seed (42);
  int hd = d / heads, n_tokens = 4 * n;
  g_autofree float *w_in = g_new (float, 3 * d * d), *b_in = g_new0 (float, 3 * d);
  g_autofree float *w_out = g_new (float, d * d), *b_out = g_new0 (float, d);
  g_autofree float *ql = g_new (float, heads * m * hd), *kl = g_new (float, heads * m * hd);
  g_autofree float *tokens = g_new (float, (gsize) n_tokens * d);
  fill_random (rng, w_in, 3 * d * d, 1.0 / sqrt (d));
  fill_random (rng, w_out, d * d, 1.0 / sqrt (d));
  fill_random (rng, ql, heads * m * hd, 1.0);
  fill_random (rng, kl, heads * m * hd, 1.0);
  fill_random (rng, tokens, (gsize) n_tokens * d, 1.0);
  g_rand_free (rng);
  ConyAttentionWeights w = { w_in, b_in, w_out, b_out, ql, kl };

  printf ("# attention, one step per token: n=%d d=%d heads=%d m=%d, one thread, CPU time per step\n",
          n, d, heads, m);
  printf ("# core = scaled dot-product attention of all heads (projections excluded); step = with "
          "in/out projections\n");
  printf ("# FLOPs: multiply-add = 1 (the papers' convention); 'paper' = appendix A formula, d as one head\n");
  printf ("%-14s %-6s %12s %12s %10s %12s %12s %12s\n", "variant", "form", "core us", "step us",
          "vs regular", "FLOPs", "paper FLOPs", "state bytes");
  for (int retro = 0; retro <= 1; retro++) {
    double regular_us = 0.0;
    for (int v = 0; v < CONY_ATTENTION_N_VARIANTS; v++) {
      ConyAttentionConfig c = { .variant = v, .d = d, .heads = heads, .window = n, .landmarks = m,
                                .retroactive = retro };
      ConyAttention *a = cony_attention_new (&c, &w, &error);
      if (!a)
        return cony_cmd_fail (error);
      Timing tm = time_layer (a, tokens, n_tokens, budget);
      if (v == CONY_ATTENTION_REGULAR)
        regular_us = tm.core_us;
      ConyAttentionFlops f = cony_attention_flops (&c);
      printf ("%-14s %-6s %12.2f %12.2f %9.0fx %12.0f %12.0f %12zu\n", cony_attention_variant_name (v),
              retro ? "retro" : "single", tm.core_us, tm.step_us, regular_us / tm.core_us, f.sda,
              f.paper, cony_attention_state_bytes (a));
      fflush (stdout);
      cony_attention_free (a);
    }
  }
  return 0;
}

typedef struct {
  const char *name;
  const char *summary;
  ConyCommandFunc run;
} Bench;

static const Bench benches[] = {
  { "attention", "every attention variant: us/step, FLOPs, state bytes", bench_attention },
  { "frontend", "log-mel and full VGGish real-time factors, GFLOP/s vs sgemm peak", cony_bench_frontend },
  { "model", "encoder-classifier us/step, 1 and 2 blocks, every variant, vs PyTorch", cony_bench_model },
  { "pipeline", "the whole audio chain with a model pair: real-time factor, CPU, every variant", cony_bench_pipeline },
};

int
cony_cmd_bench (int argc, char **argv)
{
  if (argc >= 2)
    for (guint i = 0; i < G_N_ELEMENTS (benches); i++)
      if (g_str_equal (argv[1], benches[i].name))
        return benches[i].run (argc - 1, argv + 1);
  fprintf (stderr, "usage: cony bench WHAT [OPTIONS]\n\n");
  for (guint i = 0; i < G_N_ELEMENTS (benches); i++)
    fprintf (stderr, "  %-12s %s\n", benches[i].name, benches[i].summary);
  return 2;
}
