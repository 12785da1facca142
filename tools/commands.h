/* Subcommands of the `cony` tool (one file per command, one entry each in cony.c) and
 * of `cony-bench` (cmd_bench_*.c, one entry each in cony-bench.c). */
#pragma once
#include <glib.h>

typedef int (*ConyCommandFunc) (int argc, char **argv);

typedef struct {
  const char *name;
  const char *summary;
  ConyCommandFunc run;
} ConyCommand;

int cony_cmd_attention (int argc, char **argv);
int cony_cmd_bench (int argc, char **argv);
int cony_cmd_mel (int argc, char **argv);
int cony_cmd_embed (int argc, char **argv);
int cony_cmd_bench_attention (int argc, char **argv);
int cony_cmd_bench_frontend (int argc, char **argv);
int cony_cmd_bench_int8 (int argc, char **argv);
int cony_cmd_bench_streams (int argc, char **argv);
int cony_cmd_classify (int argc, char **argv);
int cony_cmd_info (int argc, char **argv);
int cony_cmd_tag (int argc, char **argv);
int cony_cmd_probe (int argc, char **argv);
int cony_cmd_bench_model (int argc, char **argv);
int cony_cmd_bench_fusion (int argc, char **argv);
int cony_cmd_bench_pipeline (int argc, char **argv);
int cony_cmd_bench_image (int argc, char **argv);

/* Prints "cony: <message>" to stderr, frees @error, returns the exit status 1. */
int cony_cmd_fail (GError *error);
