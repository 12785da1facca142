/* Quantisation metadata of CNN files (fuzz_patch.h patches on the int8 and uint8
 * MobileNet-v2 goldens and the int8-weight MobileNet-v1 one): the `quantization` scales
 * and zero points, `weight_scale` / `weight_zero_point` arrays and `bias_quantized`, with
 * scales 0, negative, NaN, denormal or huge, zero points out of range and per-channel
 * arrays of the wrong length. A file that loads must run: in integer inference (AUTO)
 * its outputs are finite (they are dequantised from int8 by finite scales), then in
 * float; a file that quantises layers accepts INT8, one that does not refuses it. */
#include "fuzz_patch.h"
#include "fuzz_cnn_run.h"

static FuzzBase bases[3];

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (!bases[0].header) {
    fuzz_base_load (&bases[0], "mobilenet/v2_q8.safetensors");
    fuzz_base_load (&bases[1], "mobilenet/v2_qu8.safetensors");
    fuzz_base_load (&bases[2], "mobilenet/i8.safetensors");
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
  guint64 conv = 0, fc = 0;
  cony_cnn_get_flops (cnn, &conv, &fc);
  if (conv + fc <= FORWARD_MAX_FLOPS) {
    gboolean quantized = cony_cnn_get_quantized_layers (cnn) > 0;
    if (cony_cnn_get_precision (cnn) == CONY_CNN_PRECISION_INT8)
      g_assert (fuzz_cnn_forward (cnn));
    g_assert (cony_cnn_set_precision (cnn, CONY_CNN_PRECISION_FLOAT, NULL));
    fuzz_cnn_forward (cnn);
    GError *p_error = NULL;
    gboolean int8 = cony_cnn_set_precision (cnn, CONY_CNN_PRECISION_INT8, &p_error);
    g_assert (int8 == quantized);
    if (!int8)
      fuzz_check_error (p_error);
  }
  fuzz_cnn_exercise (cnn);
  return 0;
}
