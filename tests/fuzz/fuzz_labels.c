/* Labels files (the elements' labels-file property). */
#include "fuzz.h"
#include "cony/labels.h"

#include <string.h>

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  guint n = 0;
  GError *error = NULL;
  char **labels = cony_labels_parse ((const char *) data, size, "fuzz-labels", &n, &error);
  if (labels == NULL) {
    fuzz_check_error (error);
    return 0;
  }
  g_assert (g_strv_length (labels) == n);
  for (guint i = 0; i < n; i++)
    g_assert (g_utf8_validate (labels[i], -1, NULL) && strchr (labels[i], '\n') == NULL);
  g_strfreev (labels);
  return 0;
}
