/* Each integer layer's time in a forward pass (bench_layers.h). */
#include "bench_layers.h"

#include "bench.h"
#include "cnn-private.h"

#include <stdio.h>

struct _ConyBenchLayers {
  ConyCnn *cnn;   /* not owned */
  GArray **layer; /* per layer: its calls, seconds per example */
  double (*clock) (void);
  double overhead; /* one reading of the clock, taken off each */
  double start;    /* the clock when the layer running began */
};

/* A CnnInt8LayerHook: each layer's calls into @data (ConyBenchLayers). */
static void
record_layer (guint layer, gboolean ran, gsize examples, gpointer data)
{
  ConyBenchLayers *t = data;
  if (!ran) {
    t->start = t->clock ();
    return;
  }
  double s = (t->clock () - t->start - t->overhead) / (double) examples;
  if (layer < t->cnn->w->n_layers)
    g_array_append_val (t->layer[layer], s);
}

ConyBenchLayers *
cony_bench_layers_start (ConyCnn *cnn, double (*clock) (void))
{
  ConyBenchLayers *t = g_new0 (ConyBenchLayers, 1);
  t->cnn = cnn;
  t->layer = g_new (GArray *, cnn->w->n_layers);
  for (guint i = 0; i < cnn->w->n_layers; i++)
    t->layer[i] = g_array_new (FALSE, FALSE, sizeof (double));
  t->clock = clock;
  t->overhead = cony_bench_clock_overhead_s (clock);
  cnn_set_int8_layer_hook (cnn, record_layer, t);
  return t;
}

void
cony_bench_layers_stop (ConyBenchLayers *t)
{
  cnn_set_int8_layer_hook (t->cnn, NULL, NULL);
}

const double *
cony_bench_layers_calls (const ConyBenchLayers *t, guint layer, guint *n)
{
  GArray *a = layer < t->cnn->w->n_layers ? t->layer[layer] : NULL;
  *n = a ? a->len : 0;
  return *n ? (const double *) a->data : NULL;
}

void
cony_bench_layers_print_by_kind (const ConyBenchLayers *t, gboolean markdown)
{
  const CnnWeights *w = t->cnn->w;
  double by_kind[LAYER_KIND_COUNT] = { 0 }, all = 0;
  guint count[LAYER_KIND_COUNT] = { 0 }, layers = 0;
  for (guint i = 0; i < w->n_layers; i++) {
    guint n;
    const double *calls = cony_bench_layers_calls (t, i, &n);
    if (n == 0)
      continue;
    /* a layer shorter than the clock's own reading may come out below zero */
    double med = MAX (0, cony_bench_summarise (calls, (int) n).median);
    by_kind[w->layers[i].kind] += med;
    count[w->layers[i].kind]++;
    layers++;
    all += med;
  }
  printf ("\nEvery layer in the forward pass by kind (each layer's median call, summed):\n");
  if (markdown)
    printf ("\n| layer kind | layers | µs a pass | share |\n|---|---|---|---|\n");
  for (guint k = 0; k < LAYER_KIND_COUNT; k++) {
    if (count[k] == 0)
      continue;
    const char *name = cnn_layer_class ((LayerKind) k)->name;
    printf ("  %-14s %3u layers %8.1f µs %5.1f%%\n", name, count[k], by_kind[k] * 1e6,
        100 * by_kind[k] / all);
    if (markdown)
      printf ("| %s | %u | %.1f | %.1f %% |\n", name, count[k], by_kind[k] * 1e6,
          100 * by_kind[k] / all);
  }
  printf ("  %-14s %3u layers %8.1f µs\n", "all", layers, all * 1e6);
}

void
cony_bench_layers_print_each (const ConyBenchLayers *t)
{
  const CnnWeights *w = t->cnn->w;
  printf ("\nEach layer in the forward pass (its median call):\n");
  printf ("  layer  kind            out map   in -> out       µs   GMAC/s\n");
  for (guint i = 0; i < w->n_layers; i++) {
    guint n;
    const double *calls = cony_bench_layers_calls (t, i, &n);
    if (n == 0)
      continue;
    const Layer *l = &w->layers[i];
    const CnnLayerClass *k = cnn_layer_class (l->kind);
    double med = MAX (0, cony_bench_summarise (calls, (int) n).median);
    printf ("  %5u  %-14s %4ux%-4u %5u -> %-5u %8.1f", i, k->name, l->out_h, l->out_w, l->in_c,
        l->out_c, med * 1e6);
    double macs = k->n_weights ? (double) l->out_h * l->out_w * k->n_weights (l) : 0;
    if (macs > 0 && med > 0)
      printf ("  %7.1f", macs / med * 1e-9);
    printf ("\n");
  }
}

void
cony_bench_layers_free (ConyBenchLayers *t)
{
  for (guint i = 0; i < t->cnn->w->n_layers; i++)
    g_array_free (t->layer[i], TRUE);
  g_free (t->layer);
  g_free (t);
}
