/* WAV reader: load and downmix, reading every sample; then resample the mono signal to
 * 16 kHz (what the front ends take) and to a rate the input's last byte picks. */
#include "fuzz.h"
#include "cony/wav.h"

/* Outputs above this many samples cost more than the reader itself: not resampled. */
#define RESAMPLE_MAX_OUT (1u << 21)

/* Resamples @mono and checks the output's length; a refusal must say why. */
static void
resample (const float *mono, gsize n, guint in_rate, guint out_rate)
{
  double want = (double) n * out_rate / in_rate;
  if (want > RESAMPLE_MAX_OUT)
    return;
  GError *error = NULL;
  gsize n_out = 0;
  float *out = cony_resample (mono, n, in_rate, out_rate, &n_out, &error);
  if (out == NULL) {
    fuzz_check_error (error);
    return;
  }
  /* about n * out_rate / in_rate: the filter's tail at most adds its buffer */
  g_assert (n_out <= (gsize) want + 1024);
  double sum = 0;
  for (gsize i = 0; i < n_out; i++)
    sum += out[i];
  fuzz_use (sum);
  g_free (out);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static const guint rates[] = { CONY_WAV_MIN_RATE, 8000, 11025, 22050, 44100, 48000, 96000,
    CONY_WAV_MAX_RATE };
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
  resample (mono, wav->n_frames, wav->sample_rate, 16000);
  resample (mono, wav->n_frames, wav->sample_rate, rates[data[size - 1] % G_N_ELEMENTS (rates)]);
  g_free (mono);
  cony_wav_free (wav);
  return 0;
}
