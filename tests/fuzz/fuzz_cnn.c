/* CNN loader: load, describe, and run small networks: a forward pass and a batch of two,
 * VGG-style and MobileNet-v1 (network = mobilenet_v1, seeded with tests/golden/mobilenet/);
 * where the network has an embedding (MobileNet's gap output) that output too. */
#include "fuzz.h"
#include "cony/cnn.h"

/* Forward passes above this many multiply-adds cost more than the loader itself. */
#define FORWARD_MAX_FLOPS 20000000

/* One example, then the same example twice as a batch: both must give its output. */
static void
run_forward (ConyCnn *cnn)
{
  gsize n_in = cony_cnn_get_input_size (cnn);
  guint n_out = cony_cnn_get_output_size (cnn);
  float *in = g_new0 (float, MAX (2 * n_in, 1));
  float *out = g_new0 (float, MAX (3 * (gsize) n_out, 1));
  for (gsize i = 0; i < n_in; i++)
    in[i] = in[n_in + i] = (float) (i % 7) - 3.0f;
  cony_cnn_forward (cnn, in, out);
  cony_cnn_forward_batch (cnn, in, 2, out + n_out);
  double s = 0;
  for (guint i = 0; i < n_out; i++)
    s += out[i] + out[n_out + i] + out[2 * n_out + i];
  fuzz_use (s);
  g_free (in);
  g_free (out);
}

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
    run_forward (cnn);
    GError *out_error = NULL;
    if (cony_cnn_set_output (cnn, CONY_CNN_OUTPUT_EMBEDDING, &out_error)) {
      g_assert (cony_cnn_get_output_size (cnn) == cony_cnn_get_embedding_size (cnn));
      run_forward (cnn);
    } else {
      g_assert (cony_cnn_get_embedding_size (cnn) == 0);
      fuzz_check_error (out_error);
    }
  }
  cony_cnn_free (cnn);
  return 0;
}
