/* cony bench attention: attention variants stepped one token at a time, side by side
 * in one run, at one or several window sizes: CPU µs per step, counted FLOPs, state
 * bytes, peak bytes, and the approximation error against exact attention. */
#include "bench.h"
#include "commands.h"

#include "attention-internal.h" /* internals: a benchmark of the core */
#include "cony/npy.h"

#include <cblas.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Uniform values with standard deviation @sd. */
static void
fill_random (GRand *rng, float *x, gsize n, double sd)
{
  cony_bench_fill_random (rng, x, n, 0.0, sd * sqrt (3.0));
}

/* One column of the sweep: a variant, with its vcc budget. */
typedef struct {
  ConyAttentionVariant variant;
  int vcc_budget;
  char label[24];
} Entry;

static gboolean
parse_ints (const char *list, const char *what, GArray *out, GError **error)
{
  g_auto (GStrv) parts = g_strsplit (list, ",", -1);
  for (int i = 0; parts[i]; i++) {
    char *end;
    long v = strtol (parts[i], &end, 10);
    if (!*parts[i] || *end || v < 1 || v > 1000000) {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
          "%s: '%s' is not a positive "
          "integer (comma-separated list expected)",
          what, parts[i]);
      return FALSE;
    }
    int iv = (int) v;
    g_array_append_val (out, iv);
  }
  return TRUE;
}

/* "continual,cony,vcc,..." with vcc expanded over @budgets. */
static gboolean
parse_entries (const char *list, const GArray *budgets, GArray *out, GError **error)
{
  g_auto (GStrv) parts = g_strsplit (list, ",", -1);
  for (int i = 0; parts[i]; i++) {
    Entry e = { 0 };
    if (!cony_attention_variant_from_name (parts[i], &e.variant)) {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
          "--variants: unknown variant '%s'", parts[i]);
      return FALSE;
    }
    if (e.variant != CONY_ATTENTION_VCC) {
      g_strlcpy (e.label, parts[i], sizeof e.label);
      g_array_append_val (out, e);
      continue;
    }
    for (guint b = 0; b < budgets->len; b++) {
      e.vcc_budget = g_array_index (budgets, int, b);
      g_snprintf (e.label, sizeof e.label, "vcc r=%d", e.vcc_budget);
      g_array_append_val (out, e);
    }
  }
  return TRUE;
}

/* Peak resident memory: /proc/self/clear_refs "5" resets VmHWM to the current RSS. */
static gboolean
peak_reset (void)
{
  FILE *f = fopen ("/proc/self/clear_refs", "w");
  if (!f)
    return FALSE;
  gboolean ok = fputs ("5", f) >= 0;
  return fclose (f) == 0 && ok;
}

static gint64
status_kib (const char *key)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents ("/proc/self/status", &text, NULL, NULL))
    return -1;
  const char *at = strstr (text, key);
  return at ? g_ascii_strtoll (at + strlen (key), NULL, 10) : -1;
}

typedef struct {
  double core_us, step_us, warm_s;
  gboolean skipped;
} Timing;

/* Median over 5 runs of the CPU time per step, after the window has filled (and, for
 * cony, two landmark segments more): the core (tokens projected beforehand, @qkvs; the
 * copy of each projection into the layer is timed alone and subtracted) and the whole
 * step with projections. Gives up (skipped) once the warm-up passes @limit_s. */
static Timing
time_layer (ConyAttention *a, const float *tokens, const float *qkvs, int n_tokens, float *out,
    double budget_s, double limit_s)
{
  const ConyAttentionConfig *c = cony_attention_get_config (a);
  int d = c->d, n = c->window, m = MAX (c->landmarks, 1);
  gsize qkv_len = 3 * (gsize) d;
  Timing tm = { 0 };
  double w0 = cony_bench_cpu_s ();
  for (int t = 0; t < n + 2 * ((n + m - 1) / m); t++) {
    cony_attention_step (a, tokens + (gsize) (t % n_tokens) * d, out);
    if ((tm.warm_s = cony_bench_cpu_s () - w0) > limit_s) {
      tm.skipped = TRUE;
      return tm;
    }
  }
  /* Steps per run from a short probe, so that each run takes about budget_s / 5. */
  double t0 = cony_bench_cpu_s ();
  int probe = 0;
  while (cony_bench_cpu_s () - t0 < budget_s / 10)
    cony_attention_step (a, tokens + (gsize) (probe++ % n_tokens) * d, out);
  int steps = MAX (5, probe * 2);
  enum
  {
    REPS = 5
  };
  double core[REPS], whole[REPS];
  float *qkv = cony_attention_qkv_buffer (a);
  for (int r = 0; r < REPS; r++) {
    double s0 = cony_bench_cpu_s ();
    for (int i = 0; i < steps; i++) {
      memcpy (qkv, qkvs + (i % n_tokens) * qkv_len, sizeof (float) * qkv_len);
      cony_attention_core_step (a);
    }
    double s1 = cony_bench_cpu_s ();
    for (int i = 0; i < steps; i++)
      memcpy (qkv, qkvs + (i % n_tokens) * qkv_len, sizeof (float) * qkv_len);
    double s2 = cony_bench_cpu_s ();
    for (int i = 0; i < steps; i++)
      cony_attention_step (a, tokens + (gsize) (i % n_tokens) * d, out);
    double s3 = cony_bench_cpu_s ();
    core[r] = ((s1 - s0) - (s2 - s1)) / steps * 1e6;
    whole[r] = (s3 - s2) / steps * 1e6;
  }
  tm.core_us = cony_bench_summarise (core, REPS).median;
  tm.step_us = cony_bench_summarise (whole, REPS).median;
  return tm;
}

typedef struct {
  int d, heads, m;
  ConyAttentionWeights w;
  double budget_s, limit_s;
  FILE *csv;
  const float *real; /* --tokens, as d-wide tokens (NULL: none) */
  int real_len;
} Bench;

/* Real tokens (T, D) as a d-wide stream: through a fixed random D×d map when D ≠ d,
 * then every column standardised, so that only their structure over time differs from
 * the synthetic streams. */
static float *
real_stream (const ConyNpyArray *x, int d, int *T)
{
  int D = (int) x->shape[1];
  *T = (int) x->shape[0];
  float *out = g_new (float, (gsize) *T *d);
  GRand *rng = g_rand_new_with_seed (99);
  g_autofree float *map = g_new (float, (gsize) D *d);
  fill_random (rng, map, (gsize) D * d, 1.0);
  g_rand_free (rng);
  for (int t = 0; t < *T; t++)
    for (int c = 0; c < d; c++) {
      double v = 0.0;
      for (int i = 0; i < D; i++)
        v += (double) x->data[(gsize) t * D + i] * (D == d ? (i == c) : map[(gsize) i * d + c]);
      out[(gsize) t * d + c] = (float) v;
    }
  for (int c = 0; c < d; c++) {
    double sum = 0.0, sq = 0.0;
    for (int t = 0; t < *T; t++)
      sum += out[(gsize) t * d + c], sq += (double) out[(gsize) t * d + c] * out[(gsize) t * d + c];
    double mean = sum / *T, sd = sqrt (MAX (sq / *T - mean * mean, 1e-12));
    for (int t = 0; t < *T; t++)
      out[(gsize) t * d + c] = (float) ((out[(gsize) t * d + c] - mean) / sd);
  }
  return out;
}

static ConyAttentionConfig
entry_config (const Bench *b, const Entry *e, int n, gboolean retro)
{
  ConyAttentionConfig c = { .variant = e->variant,
    .d = b->d,
    .heads = b->heads,
    .window = n,
    .landmarks = MIN (b->m, n),
    .retroactive = retro };
  if (e->vcc_budget)
    cony_attention_config_set (&c, "vcc_budget", e->vcc_budget);
  return c;
}

/* What the last measured window predicts for this one, in CPU seconds: recomputing
 * variants cost ~n² a step, so ~n³ to fill a window and time it; continual ones at
 * most ~n a step while the window fills, so ~n² for the warm-up. */
static double
projected_s (gboolean continual, double prev_step_us, double prev_warm_s, int prev_n, int n)
{
  double r = (double) n / prev_n;
  return continual ? prev_warm_s * r * r : prev_step_us * 1e-6 * r * r * (n / 3.0 + 200.0);
}

static int
run_timings (const Bench *b, const GArray *entries, const GArray *windows, gboolean with_retro)
{
  guint ne = entries->len;
  g_autofree double *prev_us = g_new0 (double, ne);
  g_autofree int *prev_n = g_new0 (int, ne);
  g_autofree double *prev_warm = g_new0 (double, ne);
  /* the layer's weights and fixed buffers alone: a continual layer with a 1-token window,
   * measured the second time (the first also pays one-time costs: BLAS buffers, tables) */
  gboolean peaks = peak_reset ();
  gint64 base_kib = 0;
  for (int pass = 0; peaks && pass < 2; pass++) {
    peak_reset ();
    Entry cont = { CONY_ATTENTION_CONTINUAL, 0, "continual" };
    ConyAttentionConfig c = entry_config (b, &cont, 1, FALSE);
    gint64 rss0 = status_kib ("VmRSS:");
    ConyAttention *a = cony_attention_new (&c, &b->w, NULL);
    float x[b->d], y[b->d];
    memset (x, 0, sizeof x);
    cony_attention_step (a, x, y);
    base_kib = status_kib ("VmHWM:") - rss0;
    cony_attention_free (a);
  }
  printf ("# peak = the growth of the peak resident memory while the layer is made and stepped, "
          "less %" G_GINT64_FORMAT
          " KiB for the weights and fixed buffers (a 1-token continual layer)%s\n",
      base_kib, peaks ? "" : " [unavailable: /proc/self/clear_refs not writable]");
  printf ("| n | variant | form | core µs | step µs | core vs continual | core vs regular | FLOPs "
          "(counted) | FLOPs (paper) | state bytes | state / raw window | peak KiB |\n");
  printf ("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  GError *error = NULL;
  for (guint wi = 0; wi < windows->len; wi++) {
    int n = g_array_index (windows, int, wi), d = b->d, n_tokens = 4 * n;
    GRand *rng = g_rand_new_with_seed (42 + n);
    g_autofree float *tokens = g_new (float, (gsize) n_tokens *d);
    fill_random (rng, tokens, (gsize) n_tokens * d, 1.0);
    g_rand_free (rng);
    /* projections are the same for every variant: computed once, outside the peaks */
    g_autofree float *qkvs = g_new (float, (gsize) n_tokens * 3 * d);
    g_autofree float *out = g_new (float, (gsize) n *d);
    {
      Entry cont = { CONY_ATTENTION_CONTINUAL, 0, "continual" };
      ConyAttentionConfig c = entry_config (b, &cont, 1, FALSE);
      ConyAttention *p = cony_attention_new (&c, &b->w, &error);
      if (!p)
        return cony_cmd_fail (error);
      for (int t = 0; t < n_tokens; t++) {
        cony_attention_project (p, tokens + (gsize) t * d);
        memcpy (qkvs + (gsize) t * 3 * d, cony_attention_qkv_buffer (p), sizeof (float) * 3 * d);
      }
      cony_attention_free (p);
    }
    for (int retro = 0; retro <= with_retro; retro++) {
      double cont_us = 0.0, reg_us = 0.0;
      for (guint ei = 0; ei < ne; ei++) {
        const Entry *e = &g_array_index (entries, Entry, ei);
        const char *form = retro ? "retro" : "single";
        if (retro && cony_attention_variant_single_output_only (e->variant))
          continue; /* single output only */
        gboolean cont = cony_attention_variant_is_continual (e->variant);
        double projected = prev_n[ei]
            ? projected_s (cont, prev_us[ei], prev_warm[ei], prev_n[ei], n)
            : 0;
        if (projected > b->limit_s) {
          printf ("| %d | `%s` | %s | skipped: at n = %d %s %.3g s, so this window would take ~%.3g s "
                  "of CPU (limit %.3g s) ||||||||\n",
              n, e->label, form, prev_n[ei], cont ? "filling the window took" : "a step took",
              cont ? prev_warm[ei] : prev_us[ei] * 1e-6, projected, b->limit_s);
          /* what this window would have cost, for the next one's projection */
          double r2 = ((double) n / prev_n[ei]) * ((double) n / prev_n[ei]);
          prev_us[ei] *= r2, prev_warm[ei] *= r2, prev_n[ei] = n;
          continue;
        }
        ConyAttentionConfig c = entry_config (b, e, n, retro);
        peak_reset ();
        gint64 rss0 = status_kib ("VmRSS:");
        ConyAttention *a = cony_attention_new (&c, &b->w, &error);
        if (!a)
          return cony_cmd_fail (error);
        Timing tm = time_layer (a, tokens, qkvs, n_tokens, out, b->budget_s, b->limit_s);
        gint64 peak = status_kib ("VmHWM:") - rss0 - base_kib;
        gsize state = cony_attention_state_bytes (a);
        cony_attention_free (a);
        if (tm.skipped) {
          printf ("| %d | `%s` | %s | skipped: filling the window passed %.3g s of CPU (limit) ||||||||\n",
              n, e->label, form, b->limit_s);
          fflush (stdout);
          continue;
        }
        if (!retro)
          prev_us[ei] = tm.core_us, prev_warm[ei] = tm.warm_s, prev_n[ei] = n;
        if (e->variant == CONY_ATTENTION_CONTINUAL)
          cont_us = tm.core_us;
        if (e->variant == CONY_ATTENTION_REGULAR)
          reg_us = tm.core_us;
        ConyAttentionFlops f = cony_attention_flops (&c);
        char vs_cont[32] = "", vs_reg[32] = "";
        if (cont_us > 0)
          g_snprintf (vs_cont, sizeof vs_cont, "%.1fx", cont_us / tm.core_us);
        if (reg_us > 0)
          g_snprintf (vs_reg, sizeof vs_reg, "%.0fx", reg_us / tm.core_us);
        double raw = (double) n * d * sizeof (float);
        printf ("| %d | `%s` | %s | %.2f | %.2f | %s | %s | %.0f | %.0f | %zu | %.2f | %" G_GINT64_FORMAT
                " |\n",
            n, e->label, form, tm.core_us, tm.step_us, vs_cont, vs_reg, f.sda, f.paper, state,
            state / raw, peaks ? MAX (peak, (gint64) 0) : (gint64) -1);
        if (b->csv)
          fprintf (b->csv, "time,%d,%s,%s,%.4f,%.4f,%.0f,%zu,%" G_GINT64_FORMAT "\n", n, e->label,
              form, tm.core_us, tm.step_us, f.sda, state,
              peaks ? MAX (peak, (gint64) 0) * 1024 : -1);
        fflush (stdout);
      }
    }
  }
  return 0;
}

/* Relative RMS error of every approximating entry against exact attention (the
 * continual layer), over @steps steps after the window has filled, on random and on
 * smooth token streams, and on --tokens where it is long enough. */
static int
run_errors (const Bench *b, const GArray *entries, const GArray *windows, int steps)
{
  printf ("\n| n | stream | variant | relative RMS error vs exact |\n|---|---|---|---|\n");
  GError *error = NULL;
  const char *streams[] = { "random", "smooth", "cnn" };
  for (guint wi = 0; wi < windows->len; wi++) {
    int n = g_array_index (windows, int, wi), d = b->d, T = n + steps;
    for (guint si = 0; si < G_N_ELEMENTS (streams); si++) {
      if (si == 2 && (!b->real || b->real_len < T)) {
        if (b->real)
          printf ("| %d | cnn | (the --tokens stream has %d tokens, %d needed) | |\n", n,
              b->real_len, T);
        continue;
      }
      GRand *rng = g_rand_new_with_seed (7 + n + si);
      g_autofree float *x = g_new (float, (gsize) T *d);
      if (si == 0)
        fill_random (rng, x, (gsize) T * d, 1.0);
      else if (si == 1)
        /* periods of 64 to 1024 tokens: neighbouring tokens are alike, as in slowly
         * changing sound */
        cony_bench_fill_smooth (rng, x, T, d, 64.0, 1024.0);
      else
        memcpy (x, b->real, sizeof (float) * T * d);
      g_rand_free (rng);
      Entry exact = { CONY_ATTENTION_CONTINUAL, 0, "continual" };
      ConyAttentionConfig ce = entry_config (b, &exact, n, FALSE);
      ConyAttention *ref = cony_attention_new (&ce, &b->w, &error);
      if (!ref)
        return cony_cmd_fail (error);
      GPtrArray *layers = g_ptr_array_new ();
      GArray *which = g_array_new (FALSE, FALSE, sizeof (guint));
      for (guint ei = 0; ei < entries->len; ei++) {
        const Entry *e = &g_array_index (entries, Entry, ei);
        if (e->variant == CONY_ATTENTION_CONTINUAL || e->variant == CONY_ATTENTION_REGULAR
            || !cony_attention_variant_is_continual (e->variant))
          continue; /* exact, or too slow to step over long windows */
        ConyAttentionConfig c = entry_config (b, e, n, FALSE);
        ConyAttention *a = cony_attention_new (&c, &b->w, &error);
        if (!a)
          return cony_cmd_fail (error);
        g_ptr_array_add (layers, a);
        g_array_append_val (which, ei);
      }
      g_autofree double *err2 = g_new0 (double, layers->len);
      double ref2 = 0.0;
      float y[d], yr[d];
      for (int t = 0; t < T; t++) {
        cony_attention_step (ref, x + (gsize) t * d, yr);
        for (guint li = 0; li < layers->len; li++) {
          cony_attention_step (layers->pdata[li], x + (gsize) t * d, y);
          for (int c = 0; c < d && t >= n; c++)
            err2[li] += ((double) y[c] - yr[c]) * ((double) y[c] - yr[c]);
        }
        for (int c = 0; c < d && t >= n; c++)
          ref2 += (double) yr[c] * yr[c];
      }
      for (guint li = 0; li < layers->len; li++) {
        const Entry *e = &g_array_index (entries, Entry, g_array_index (which, guint, li));
        double rel = sqrt (err2[li] / ref2);
        printf ("| %d | %s | `%s` | %.3g |\n", n, streams[si], e->label, rel);
        if (b->csv)
          fprintf (b->csv, "error,%d,%s,%s,%.6g\n", n, e->label, streams[si], rel);
        cony_attention_free (layers->pdata[li]);
      }
      fflush (stdout);
      g_ptr_array_unref (layers);
      g_array_unref (which);
      cony_attention_free (ref);
    }
  }
  return 0;
}

int
cony_cmd_bench_attention (int argc, char **argv)
{
  int n = 120, d = 192, heads = 16, m = 4, error_steps = 64;
  double budget = 0.3, limit = 60.0;
  g_autofree char *variants = NULL, *windows_s = NULL, *budgets_s = NULL, *error_windows_s = NULL;
  g_autofree char *csv_path = NULL, *tokens_path = NULL;
  gboolean single_only = FALSE;
  GOptionEntry options[] = {
    { "window", 0, 0, G_OPTION_ARG_INT, &n, "window n (default 120)", "N" },
    { "windows", 0, 0, G_OPTION_ARG_STRING, &windows_s, "several windows, e.g. 120,1024,4096,16384",
        "LIST" },
    { "variants", 0, 0, G_OPTION_ARG_STRING, &variants,
        "variants to run (default: all); 'vcc' runs "
        "once per --vcc-budgets value",
        "LIST" },
    { "vcc-budgets", 0, 0, G_OPTION_ARG_STRING, &budgets_s, "vcc budgets r (default 256)", "LIST" },
    { "dim", 0, 0, G_OPTION_ARG_INT, &d, "embedding d (default 192)", "D" },
    { "heads", 0, 0, G_OPTION_ARG_INT, &heads, "heads (default 16)", "H" },
    { "landmarks", 0, 0, G_OPTION_ARG_INT, &m, "landmarks m (default 4)", "M" },
    { "budget", 0, 0, G_OPTION_ARG_DOUBLE, &budget, "seconds per measurement (default 0.3)", "S" },
    { "limit", 0, 0, G_OPTION_ARG_DOUBLE, &limit,
        "CPU seconds a variant may take to fill one "
        "window before it is skipped (default 60)",
        "S" },
    { "single-only", 0, 0, G_OPTION_ARG_NONE, &single_only, "single-output forms only", NULL },
    { "error-windows", 0, 0, G_OPTION_ARG_STRING, &error_windows_s,
        "also measure the approximation "
        "error against exact attention at these windows",
        "LIST" },
    { "error-steps", 0, 0, G_OPTION_ARG_INT, &error_steps,
        "steps after the window fills that the "
        "error is measured over (default 64)",
        "K" },
    { "tokens", 0, 0, G_OPTION_ARG_FILENAME, &tokens_path,
        "real tokens (T, D) .npy for the error "
        "table, e.g. from bench/cnn_token_stream.py (mapped to d and standardised)",
        "FILE" },
    { "csv", 0, 0, G_OPTION_ARG_FILENAME, &csv_path,
        "also write the results as CSV (for bench/plot_attention.py)", "FILE" },
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- attention variants side by side");
  g_option_context_add_main_entries (ctx, options, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  g_autoptr (GArray) windows = g_array_new (FALSE, FALSE, sizeof (int));
  g_autoptr (GArray) error_windows = g_array_new (FALSE, FALSE, sizeof (int));
  g_autoptr (GArray) budgets = g_array_new (FALSE, FALSE, sizeof (int));
  g_autoptr (GArray) entries = g_array_new (FALSE, FALSE, sizeof (Entry));
  g_autofree char *all = NULL;
  if (!variants) {
    GString *s = g_string_new (NULL);
    for (int v = 0; v < CONY_ATTENTION_N_VARIANTS; v++)
      g_string_append_printf (s, "%s%s", v ? "," : "", cony_attention_variant_name (v));
    all = g_string_free (s, FALSE);
  }
  g_autofree char *one_window = g_strdup_printf ("%d", n);
  if (!parse_ints (windows_s ? windows_s : one_window, "--windows", windows, &error)
      || !parse_ints (budgets_s ? budgets_s : "256", "--vcc-budgets", budgets, &error)
      || (error_windows_s
          && !parse_ints (error_windows_s, "--error-windows", error_windows, &error))
      || !parse_entries (variants ? variants : all, budgets, entries, &error))
    return cony_cmd_fail (error);
  if (d < 1 || heads < 1 || d % heads || m < 1 || error_steps < 1) {
    fprintf (stderr,
        "cony: --dim must be a positive multiple of --heads; --landmarks and "
        "--error-steps at least 1\n");
    return 2;
  }
  openblas_set_num_threads (1);
  /* Freed large buffers go back to the system and new ones are mapped afresh, so the
   * peak memory of each layer is its own. */
  mallopt (M_MMAP_THRESHOLD, 4096);
  mallopt (M_TRIM_THRESHOLD, 4096);

  GRand *rng = g_rand_new_with_seed (42);
  int hd = d / heads;
  g_autofree float *w_in = g_new (float, 3 * d * d), *b_in = g_new0 (float, 3 * d);
  g_autofree float *w_out = g_new (float, d *d), *b_out = g_new0 (float, d);
  g_autofree float *ql = g_new (float, heads *m *hd), *kl = g_new (float, heads *m *hd);
  fill_random (rng, w_in, 3 * d * d, 1.0 / sqrt (d));
  fill_random (rng, w_out, d * d, 1.0 / sqrt (d));
  fill_random (rng, ql, heads * m * hd, 1.0);
  fill_random (rng, kl, heads * m * hd, 1.0);
  g_rand_free (rng);
  Bench b = { d, heads, m, { w_in, b_in, w_out, b_out, ql, kl }, budget, limit, NULL, NULL, 0 };
  g_autofree float *real = NULL;
  if (tokens_path) {
    g_autoptr (ConyNpyArray) x = cony_npy_load (tokens_path, &error);
    if (!x)
      return cony_cmd_fail (error);
    if (x->ndim != 2 || x->shape[0] < 1 || x->shape[1] < 1) {
      fprintf (stderr, "cony: --tokens %s: expected float32 tokens of shape (T, D)\n", tokens_path);
      return 2;
    }
    b.real = real = real_stream (x, d, &b.real_len);
  }
  if (csv_path && !(b.csv = fopen (csv_path, "w"))) {
    fprintf (stderr, "cony: cannot write %s\n", csv_path);
    return 1;
  }

  printf ("# attention, one step per token: d=%d heads=%d m=%d, one thread, CPU time per step\n", d,
      heads, m);
  printf ("# core = scaled dot-product attention of all heads (projections excluded); step = with "
          "in/out projections\n");
  printf (
      "# FLOPs: multiply-add = 1 (the papers' convention); 'paper' = appendix A formula, d as one "
      "head; state / raw window = state bytes over n·d floats\n");
  int rc = run_timings (&b, entries, windows, !single_only);
  if (rc == 0 && error_windows->len)
    rc = run_errors (&b, entries, error_windows, error_steps);
  if (b.csv)
    fclose (b.csv);
  return rc;
}
