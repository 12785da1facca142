/* Reading WAV files, and resampling (libswresample).
 *
 * Supported: RIFF/WAVE with format PCM (8-bit unsigned, 16, 24 and 32-bit
 * signed) or IEEE float (32 and 64-bit), also inside WAVE_FORMAT_EXTENSIBLE;
 * any number of channels. Integer samples are scaled to [-1, 1) by 1/2^(bits-1)
 * (16-bit: int16 / 32768.0, as VGGish does). A data chunk size of 0 or
 * 0xFFFFFFFF (streamed files) means "up to the end of the file". Anything else
 * (not RIFF/WAVE, no fmt or data chunk, an unsupported encoding, a truncated
 * data chunk, zero channels, a rate outside CONY_WAV_MIN_RATE..CONY_WAV_MAX_RATE) is
 * refused with CONY_ERROR_FORMAT and a message naming the file and what was wrong. */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

/* Sample rates taken from files and by cony_resample(): below 1 kHz or above 384 kHz is
 * not audio this project can use, and a low rate would multiply the resampled size. */
#define CONY_WAV_MIN_RATE 1000u
#define CONY_WAV_MAX_RATE 384000u
/* Most samples cony_resample() writes (1 GiB of floats, ~4.6 h at 16 kHz). */
#define CONY_RESAMPLE_MAX_SAMPLES (1u << 28)

typedef struct {
  guint sample_rate;
  guint channels;
  guint bits_per_sample; /* as stored in the file */
  gboolean is_float;     /* IEEE float samples in the file */
  gsize n_frames;        /* samples per channel */
  float *samples;        /* n_frames * channels floats, interleaved; owned */
} ConyWav;

ConyWav *cony_wav_load (const char *path, GError **error);
void cony_wav_free (ConyWav *wav);

/* Averages the channels (mean over channels, like VGGish's np.mean(axis=1)) into
 * a new buffer of wav->n_frames floats (g_free() it). */
float *cony_wav_mono (const ConyWav *wav);

/* Resamples mono float samples from @in_rate to @out_rate with libswresample;
 * returns a new buffer (g_free() it) of *n_out samples, about
 * n * out_rate / in_rate (the filter's tail is flushed). Equal rates copy. Rates
 * outside CONY_WAV_MIN_RATE..CONY_WAV_MAX_RATE and outputs above
 * CONY_RESAMPLE_MAX_SAMPLES are refused (CONY_ERROR_INVALID) before allocating. */
float *cony_resample (const float *samples, gsize n, guint in_rate, guint out_rate, gsize *n_out,
    GError **error);

/* Loads @path, downmixes to mono and resamples to @rate (when @rate is not 0
 * and differs from the file's). *n_samples receives the length. */
float *cony_wav_load_mono (const char *path, guint rate, gsize *n_samples, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ConyWav, cony_wav_free)

G_END_DECLS
