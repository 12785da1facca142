/* safetensors container: open, check that no two loaded tensors share bytes, then copy
 * every tensor out at the shape it declares. */
#include "fuzz.h"
#include "cony/safetensors.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  FuzzFile f;
  fuzz_file_open (&f, data, size);
  GError *error = NULL;
  ConySafetensors *st = cony_safetensors_open (f.path, &error);
  fuzz_file_close (&f);
  if (st == NULL) {
    fuzz_check_error (error);
    return 0;
  }
  fuzz_use (cony_safetensors_metadata (st, "config") != NULL);
  for (guint i = 0; i < cony_safetensors_n_tensors (st); i++)
    for (guint j = 0; j < i; j++) {
      const ConyTensorInfo *a = cony_safetensors_tensor (st, i),
                           *b = cony_safetensors_tensor (st, j);
      g_assert (!a->nbytes || !b->nbytes || a->data + a->nbytes <= b->data
          || b->data + b->nbytes <= a->data);
    }
  for (guint i = 0; i < cony_safetensors_n_tensors (st); i++) {
    const ConyTensorInfo *t = cony_safetensors_tensor (st, i);
    g_assert (cony_safetensors_find (st, t->name) != NULL);
    float *v = cony_safetensors_get_f32 (st, t->name, t->ndim, t->shape, &error);
    if (v == NULL) {
      fuzz_check_error (error);
      error = NULL;
      continue;
    }
    double sum = 0;
    for (gsize k = 0; k < t->numel; k++)
      sum += v[k];
    fuzz_use (sum);
    g_free (v);
  }
  cony_safetensors_close (st);
  return 0;
}
