/* CNN loader: load, describe, and run a forward pass on small networks. */
#include "fuzz.h"
#include "cony/cnn.h"

/* Forward passes above this many multiply-adds cost more than the loader itself. */
#define FORWARD_MAX_FLOPS 20000000

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  FuzzFile f;
  fuzz_file_open (&f, data, size);
  GError *error = NULL;
  ConyCnn *cnn = cony_cnn_load (f.path, &error);
  fuzz_file_close (&f);
  if (cnn == NULL) {
    fuzz_check_error (error);
    return 0;
  }
  g_free (cony_cnn_describe (cnn));
  guint64 conv = 0, fc = 0;
  cony_cnn_get_flops (cnn, &conv, &fc);
  if (conv + fc <= FORWARD_MAX_FLOPS) {
    gsize n_in = cony_cnn_get_input_size (cnn);
    guint n_out = cony_cnn_get_output_size (cnn);
    float *in = g_new0 (float, MAX (n_in, 1));
    float *out = g_new0 (float, MAX (n_out, 1));
    for (gsize i = 0; i < n_in; i++)
      in[i] = (float) (i % 7) - 3.0f;
    cony_cnn_forward (cnn, in, out);
    double s = 0;
    for (guint i = 0; i < n_out; i++)
      s += out[i];
    fuzz_use (s);
    g_free (in);
    g_free (out);
  }
  cony_cnn_free (cnn);
  return 0;
}
