/* cony bench image: an image CNN (the shipped ImageNet MobileNet-v2) per frame on one
 * core: the resize of a camera frame to its input and the network, ms per frame; a
 * quantised file runs both its integer path and the float engine, frame by frame
 * alternately, so that both see the same load, and then its integer layers' times in
 * further passes, by kind and, with --layers, each (bench_layers.h; the monotonic clock:
 * layers take 2-200 µs). */
#include "commands.h"
#include "bench.h"
#include "bench_layers.h"

#include "cony/cnn.h"
#include "cony/image.h"

#include <cblas.h>
#include <stdio.h>

#define DEFAULT_MODEL "models/imagenet/mobilenet_v2.safetensors"

int
cony_cmd_bench_image (int argc, char **argv)
{
  g_autofree char *model = NULL;
  int frames = 20, width = 640, height = 480;
  gboolean each_layer = FALSE;
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &model, "image CNN (default " DEFAULT_MODEL ")",
        "M" },
    { "frames", 'n', 0, G_OPTION_ARG_INT, &frames, "frames to time (default 20)", "N" },
    { "width", 0, 0, G_OPTION_ARG_INT, &width, "camera frame width (default 640)", "W" },
    { "height", 0, 0, G_OPTION_ARG_INT, &height, "camera frame height (default 480)", "H" },
    { "layers", 0, 0, G_OPTION_ARG_NONE, &each_layer,
        "also print each integer layer's time and multiply-adds a second", NULL },
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- image CNN ms per frame, one core");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  if (frames < 1 || width < 1 || height < 1 || width > 8192 || height > 8192) {
    fprintf (stderr, "cony bench image: --frames >= 1, --width and --height 1..8192\n");
    return 2;
  }
  openblas_set_num_threads (1);
  g_autoptr (ConyCnn) cnn = cony_cnn_load (model ? model : DEFAULT_MODEL, &error);
  if (cnn == NULL)
    return cony_cmd_fail (error);
  /* the float engine on the same weights, for a quantised file */
  g_autoptr (ConyCnn) fcnn = NULL;
  if (cony_cnn_get_precision (cnn) == CONY_CNN_PRECISION_INT8) {
    fcnn = cony_cnn_load (model ? model : DEFAULT_MODEL, &error);
    if (fcnn == NULL || !cony_cnn_set_precision (fcnn, CONY_CNN_PRECISION_FLOAT, &error))
      return cony_cmd_fail (error);
  }
  guint H = cony_cnn_get_input_height (cnn), W = cony_cnn_get_input_width (cnn);
  guint C = cony_cnn_get_input_channels (cnn), D = cony_cnn_get_output_size (cnn);
  gsize stride = (gsize) width * C;
  g_autofree guint8 *frame = g_new (guint8, stride * height);
  GRand *rng = g_rand_new_with_seed (40);
  for (gsize i = 0; i < stride * height; i++)
    frame[i] = (guint8) g_rand_int_range (rng, 0, 256);
  g_rand_free (rng);
  g_autofree float *in = g_new (float, cony_cnn_get_input_size (cnn));
  g_autofree float *scratch = g_new (float, cony_image_scratch_size (width, height, C, W, H));
  g_autofree float *out = g_new (float, D);
  g_autofree double *t_resize = g_new (double, frames);
  g_autofree double *t_cnn = g_new (double, frames);
  g_autofree double *t_float = g_new (double, frames);
  for (int i = -2; i < frames; i++) { /* two warm-up frames */
    double c0 = cony_bench_cpu_s ();
    cony_image_resize (frame, width, height, stride, C, CONY_IMAGE_CROP_CENTER, W, H, in, scratch);
    double c1 = cony_bench_cpu_s ();
    cony_cnn_forward (cnn, in, out);
    double c2 = cony_bench_cpu_s ();
    if (fcnn != NULL)
      cony_cnn_forward (fcnn, in, out);
    double c3 = cony_bench_cpu_s ();
    if (i >= 0) {
      t_resize[i] = (c1 - c0) * 1e3;
      t_cnn[i] = (c2 - c1) * 1e3;
      t_float[i] = (c3 - c2) * 1e3;
    }
  }
  ConyBenchSummary r = cony_bench_summarise (t_resize, frames);
  ConyBenchSummary n = cony_bench_summarise (t_cnn, frames);
  guint64 cf, ff;
  cony_cnn_get_flops (cnn, &cf, &ff);
  g_autofree char *prec = cony_cnn_describe_precision (cnn);
  printf ("model: %s (%ux%ux%u -> %u, %" G_GUINT64_FORMAT " parameters, %.0f MFLOP)\n",
      model ? model : DEFAULT_MODEL, H, W, C, D, cony_cnn_get_n_params (cnn), (cf + ff) * 1e-6);
  printf ("precision: %s\n", prec);
  printf ("one core (OpenBLAS 1 thread), %d frames, CPU time of this thread, median (min):\n",
      frames);
  printf ("  resize %dx%d -> %ux%u (center crop)  %8.3f ms  (%.3f)\n", width, height, W, H,
      r.median, r.min);
  printf ("  network                         %8.2f ms  (%.2f)  %.1f GFLOP/s\n", n.median, n.min,
      (cf + ff) * 1e-6 / n.median);
  if (fcnn != NULL) {
    ConyBenchSummary f = cony_bench_summarise (t_float, frames);
    printf ("  network, float engine           %8.2f ms  (%.2f)  int8 %.2fx faster\n", f.median,
        f.min, f.median / n.median);
  }
  /* At 10 frames per second, t ms per frame use t % of one core. */
  printf ("  frame total                     %8.2f ms  -> %.0f %% of one core at 10 fps\n",
      r.median + n.median, r.median + n.median);
  if (fcnn != NULL) {
    g_autoptr (ConyBenchLayers) t = cony_bench_layers_start (cnn, cony_bench_wall_s);
    for (int i = 0; i < frames; i++)
      cony_cnn_forward (cnn, in, out);
    cony_bench_layers_stop (t);
    cony_bench_layers_print_by_kind (t, FALSE);
    if (each_layer)
      cony_bench_layers_print_each (t);
  }
  return 0;
}
