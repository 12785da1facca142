/* WAV reader: load and downmix, reading every sample. */
#include "fuzz.h"
#include "cony/wav.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  FuzzFile f;
  fuzz_file_open (&f, data, size);
  GError *error = NULL;
  ConyWav *wav = cony_wav_load (f.path, &error);
  fuzz_file_close (&f);
  if (wav == NULL) {
    fuzz_check_error (error);
    return 0;
  }
  float *mono = cony_wav_mono (wav);
  double sum = 0;
  for (gsize i = 0; i < wav->n_frames; i++)
    sum += mono[i];
  fuzz_use (sum);
  g_free (mono);
  cony_wav_free (wav);
  return 0;
}
