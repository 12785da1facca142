#include "testutil.h"

#include <math.h>

char *
cony_test_golden_path (const char *area, const char *file)
{
  const char *root = g_getenv ("CONY_SOURCE_ROOT");
  g_assert_nonnull (root);
  return g_build_filename (root, "tests", "golden", area, file, NULL);
}

ConyNpyArray *
cony_test_load_golden_npy (const char *area, const char *file)
{
  g_autofree char *path = cony_test_golden_path (area, file);
  GError *error = NULL;
  ConyNpyArray *a = cony_npy_load (path, &error);
  g_assert_no_error (error);
  return a;
}

double
cony_test_rel_err (const float *got, const float *want, gsize n)
{
  double num = 0, den = 0;
  for (gsize i = 0; i < n; i++) {
    num = MAX (num, fabs ((double) got[i] - want[i]));
    den = MAX (den, fabs ((double) want[i]));
  }
  return den > 0 ? num / den : num;
}
