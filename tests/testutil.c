#include "testutil.h"
#include "cony/safetensors.h"

#include <math.h>
#include <unistd.h>

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

char *
cony_test_copy_safetensors (const char *src, const char *const *meta)
{
  GError *error = NULL;
  ConySafetensors *st = cony_safetensors_open (src, &error);
  g_assert_no_error (error);
  guint n = cony_safetensors_n_tensors (st);
  const char **names = g_new (const char *, n);
  const float **data = g_new (const float *, n);
  int *ndims = g_new (int, n);
  const gsize **shapes = g_new (const gsize *, n);
  for (guint i = 0; i < n; i++) {
    const ConyTensorInfo *t = cony_safetensors_tensor (st, i);
    g_assert_cmpint (t->dtype, ==, CONY_DTYPE_F32);
    names[i] = t->name;
    data[i] = (const float *) t->data;
    ndims[i] = t->ndim;
    shapes[i] = t->shape;
  }
  char *path = NULL;
  int fd = g_file_open_tmp ("cony-test-XXXXXX.safetensors", &path, &error);
  g_assert_no_error (error);
  close (fd);
  g_assert_true (cony_safetensors_write (path, n, names, data, ndims, shapes, meta, &error));
  g_assert_no_error (error);
  g_free (names);
  g_free (data);
  g_free (ndims);
  g_free (shapes);
  cony_safetensors_close (st);
  return path;
}
