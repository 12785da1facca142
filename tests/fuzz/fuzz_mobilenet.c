/* MobileNet-v2 layer lists (fuzz_patch.h patches on the float and int8 MobileNet-v2
 * goldens): the `layers` words (conv3x3s2, dw3x3s1, linear1x1, add@K, gap, fc, ...), the
 * input geometry and the tensors' shapes, so that shapes disagree, strides do not fit the
 * map, residual adds point at layers of another shape, before themselves or nowhere. A
 * network that loads is described and run (forward, batch, embedding). */
#include "fuzz_patch.h"
#include "fuzz_cnn_run.h"

static FuzzBase bases[2];

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (!bases[0].header) {
    fuzz_base_load (&bases[0], "mobilenet/v2_f32.safetensors");
    fuzz_base_load (&bases[1], "mobilenet/v2_q8.safetensors");
  }
  FuzzFile f;
  guint which;
  if (!fuzz_patch_open (bases, G_N_ELEMENTS (bases), data, size, &f, &which))
    return 0;
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
