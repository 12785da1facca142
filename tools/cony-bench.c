/* cony-bench: the benchmarks, measured side by side in one run (never timed tests). A
 * developer tool, built beside `cony` and not installed: several benchmarks read
 * libcony's internals (its kernels, the attention layer's private API). `cony bench WHAT`
 * runs it from the build tree. */
#include "commands.h"

#include <stdio.h>

static const ConyCommand benches[] = {
  { "attention",
      "attention variants at one or more windows: us/step, FLOPs, state and peak bytes, "
      "error",
      cony_cmd_bench_attention },
  { "frontend", "log-mel and full VGGish real-time factors, GFLOP/s vs sgemm peak",
      cony_cmd_bench_frontend },
  { "int8", "YAMNet per patch: the integer path vs float, pointwise layers vs the int8 peak",
      cony_cmd_bench_int8 },
  { "streams", "live audio streams per core: K chains in one process, CPU time per stream",
      cony_cmd_bench_streams },
  { "model", "encoder-classifier us/step, 1 and 2 blocks, every variant, vs PyTorch",
      cony_cmd_bench_model },
  { "fusion", "a fused model's step: the join of its inputs, the encoder, both (us/step)",
      cony_cmd_bench_fusion },
  { "image", "an image CNN (ImageNet MobileNet-v2) per camera frame: resize + network, ms",
      cony_cmd_bench_image },
  { "pipeline", "the whole audio chain with a model pair: real-time factor, CPU, every variant",
      cony_cmd_bench_pipeline },
};

int
main (int argc, char **argv)
{
  if (argc >= 2)
    for (guint i = 0; i < G_N_ELEMENTS (benches); i++)
      if (g_str_equal (argv[1], benches[i].name))
        return benches[i].run (argc - 1, argv + 1);
  gboolean help = argc >= 2 && (g_str_equal (argv[1], "--help") || g_str_equal (argv[1], "-h"));
  FILE *out = help ? stdout : stderr;
  fprintf (out, "usage: cony bench WHAT [OPTIONS]\n\n");
  for (guint i = 0; i < G_N_ELEMENTS (benches); i++)
    fprintf (out, "  %-12s %s\n", benches[i].name, benches[i].summary);
  return help ? 0 : 2;
}
