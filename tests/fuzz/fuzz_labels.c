/* Labels files (the elements' labels-file property). */
#include "fuzz.h"
#include "cony/labels.h"

#include <math.h>
#include <string.h>

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  guint n = 0;
  GError *error = NULL;
  double *thresholds = NULL;
  char **labels = cony_labels_parse ((const char *) data, size, "fuzz-labels", &n, &thresholds,
      &error);
  if (labels == NULL) {
    fuzz_check_error (error);
    return 0;
  }
  g_assert (g_strv_length (labels) == n);
  /* labels come without their thresholds; a threshold is NAN (none) or in [0, 1] */
  for (guint i = 0; i < n; i++) {
    g_assert (cony_label_check (labels[i], strlen (labels[i]), NULL));
    g_assert (isnan (thresholds[i]) || (thresholds[i] >= 0.0 && thresholds[i] <= 1.0));
  }
  g_free (thresholds);
  g_strfreev (labels);
  return 0;
}
