/* .npy reader: load, then walk the array by its shape as `cony classify` does. */
#include "fuzz.h"
#include "cony/npy.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  FuzzFile f;
  fuzz_file_open (&f, data, size);
  GError *error = NULL;
  ConyNpyArray *a = cony_npy_load (f.path, &error);
  fuzz_file_close (&f);
  if (a == NULL) {
    fuzz_check_error (error);
    return 0;
  }
  gsize rows = a->ndim > 0 ? a->shape[0] : 1, cols = 1;
  for (int i = 1; i < a->ndim; i++)
    cols *= a->shape[i];
  double sum = 0;
  /* consumers have rows of at least one value (a token, a frame); an empty array with a
   * huge first dimension would only spin here */
  for (gsize r = 0; cols > 0 && r < rows; r++)
    for (gsize c = 0; c < cols; c++)
      sum += a->data[r * cols + c];
  fuzz_use (sum);
  cony_npy_array_free (a);
  return 0;
}
