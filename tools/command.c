/* What every command of `cony` and `cony-bench` shares (commands.h). */
#include "commands.h"

#include <stdio.h>

int
cony_cmd_fail (GError *error)
{
  fprintf (stderr, "cony: %s\n", error ? error->message : "failed");
  g_clear_error (&error);
  return 1;
}
