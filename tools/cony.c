/* The `cony` command-line tool: files in, .npy out; `cony bench` runs cony-bench. */
#include "commands.h"

#include <stdio.h>
#include <string.h>

static const ConyCommand commands[] = {
  { "attention", "run one attention layer over a token sequence", cony_cmd_attention },
  { "bench", "benchmarks (attention, ...)", cony_cmd_bench },
  { "mel", "VGGish log-mel frames of a WAV file (.npy out)", cony_cmd_mel },
  { "embed", "CNN embeddings or scores (VGGish, YAMNet, MobileNet) of audio, an image or .npy",
      cony_cmd_embed },
  { "tag", "top-k labels per window of audio or log-mel .npy (YAMNet), or of an image",
      cony_cmd_tag },
  { "probe", "a media file's type, claimed size and truncation, without decoding", cony_cmd_probe },
  { "classify", "per-step logits of a token sequence with a model file", cony_cmd_classify },
  { "info", "describe a model or CNN file: config, parameters, state, FLOPs", cony_cmd_info },
};

static void
usage (FILE *out)
{
  fprintf (out, "usage: cony COMMAND [OPTIONS...]\n\ncommands:\n");
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    fprintf (out, "  %-12s %s\n", commands[i].name, commands[i].summary);
  fprintf (out, "\n'cony COMMAND --help' describes each command.\n");
}

int
main (int argc, char **argv)
{
  if (argc < 2 || strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0) {
    usage (argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    if (strcmp (argv[1], commands[i].name) == 0)
      return commands[i].run (argc - 1, argv + 1);
  fprintf (stderr, "cony: unknown command '%s'\n", argv[1]);
  usage (stderr);
  return 2;
}
