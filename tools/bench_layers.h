/* Each integer layer's time inside a network's forward passes (the developer hook
 * cnn_set_int8_layer_hook), summarised by kind of layer: where a pass spends its time. */
#pragma once
#include "cony/cnn.h"

#include <glib.h>

typedef struct _ConyBenchLayers ConyBenchLayers;

/* Starts recording every integer layer of @cnn's forward passes, timed by @clock (the
 * cost of one of its readings taken off each interval); @cnn must outlive the record. */
ConyBenchLayers *cony_bench_layers_start (ConyCnn *cnn, double (*clock) (void));
/* Stops recording; the times stay. */
void cony_bench_layers_stop (ConyBenchLayers *t);
/* Layer @layer's calls so far, in seconds per example (*@n of them; NULL where none). */
const double *cony_bench_layers_calls (const ConyBenchLayers *t, guint layer, guint *n);
/* Prints "Every layer in the forward pass by kind": each layer's median call summed by
 * kind, its share, and the total (@markdown: also as a table). */
void cony_bench_layers_print_by_kind (const ConyBenchLayers *t, gboolean markdown);
/* Prints "Each layer in the forward pass": its index, kind, output map, channels in and
 * out, median call and multiply-adds a second (the layers with weights). */
void cony_bench_layers_print_each (const ConyBenchLayers *t);
void cony_bench_layers_free (ConyBenchLayers *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (ConyBenchLayers, cony_bench_layers_free)
