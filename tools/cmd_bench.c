/* cony bench: runs cony-bench, the benchmark tool built beside `cony` (tools/cony-bench.c),
 * which is not installed: an installed `cony` says where the benchmarks are instead. */
#include "commands.h"

#include <stdio.h>
#include <errno.h>
#include <unistd.h>

int
cony_cmd_bench (int argc, char **argv)
{
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *dir = self ? g_path_get_dirname (self) : NULL;
  g_autofree char *tool = dir ? g_build_filename (dir, "cony-bench", NULL) : NULL;
  if (tool == NULL || !g_file_test (tool, G_FILE_TEST_IS_EXECUTABLE)) {
    fprintf (stderr,
        "cony: the benchmarks are a developer tool, cony-bench, built beside cony in "
        "the build tree and not installed: run build/tools/cony bench from a "
        "checkout (HACKING.md)\n");
    return 2;
  }
  argv[0] = tool; /* cony-bench WHAT [OPTIONS] */
  execv (tool, argv);
  fprintf (stderr, "cony: could not run %s: %s\n", tool, g_strerror (errno));
  return 1;
}
