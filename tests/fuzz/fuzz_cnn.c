/* CNN loader: load, describe, and run small networks: a forward pass and a batch of two,
 * VGG-style and MobileNet-v1 (network = mobilenet_v1, seeded with tests/golden/mobilenet/);
 * where the network has an embedding (MobileNet's gap output) that output too. */
#include "fuzz_cnn_run.h"

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
  fuzz_cnn_exercise (cnn);
  return 0;
}
