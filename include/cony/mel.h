/* Log-mel spectrogram, VGGish-exact by default.
 *
 * The default configuration (cony_mel_config_init_vggish()) reproduces the
 * numpy front end of the VGGish release (mel_features.py + vggish_input.py):
 *
 *   - 16 kHz mono input, float samples in [-1, 1] (int16 / 32768.0);
 *   - frames of 400 samples every 160 samples, NO padding or centring:
 *     frame k covers samples [k*160, k*160 + 400) counted from the stream
 *     start (or the last cony_mel_reset()); a partial last frame is never
 *     produced, so N samples give 1 + floor((N - 400) / 160) frames (0 if
 *     N < 400);
 *   - periodic Hann window w[n] = 0.5 - 0.5 cos(2 pi n / 400);
 *   - 512-point real FFT, the 400 windowed samples zero-padded at the END;
 *   - magnitude |X| (not power), no normalisation;
 *   - 64 triangular HTK mel bands between 125 and 7500 Hz
 *     (mel(f) = 1127 ln(1 + f / 700)), triangles linear IN MEL, peak 1, no
 *     area normalisation, the DC bin's row forced to zero;
 *   - natural log(mel + 0.01).
 *
 * Every parameter can be changed. The FFT is FFmpeg's av_tx real FFT in single
 * precision (AV_TX_FLOAT_RDFT, its SIMD code: 0.53 against 1.28 us a frame for the
 * C double one on Zen 5); magnitudes, mel sums and the log run in double and the
 * output is float32. Against the double FFT (equal to float64 numpy to float32
 * rounding) the log-mel differs by 2.5e-6 on music and up to 1.1e-3 on a
 * full-scale 16-bit chirp, in bands near the log floor (the log's slope there is 1/0.01): ten times less than the 16-bit
 * input's own quantisation noise moves those bands (about 1e-4 of magnitude a bin).
 *
 * Streaming use (what the conymel element does):
 *
 *   ConyMel *mel = cony_mel_new (&config, &error);
 *   cony_mel_push (mel, samples, n);           // any number of samples
 *   while (cony_mel_pop_frame (mel, frame))    // frame: n_mels floats
 *     ...;
 *
 * The frames popped are exactly those the whole-signal function
 * cony_mel_compute() gives for the concatenation of everything pushed, whatever
 * the push sizes.
 *
 * A ConyMel is not thread-safe; use one per stream.
 */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  guint sample_rate;        /* Hz; 16000. Only used to place the mel bands. */
  guint window_length;      /* samples per frame; 400 (25 ms) */
  guint hop_length;         /* samples between frame starts; 160 (10 ms) */
  guint fft_length;         /* FFT size, a power of two >= window_length; 512 */
  guint n_mels;             /* number of mel bands = floats per frame; 64 */
  double fmin;              /* lower edge of the lowest band, Hz; 125 */
  double fmax;              /* upper edge of the highest band, Hz (<= sample_rate/2); 7500 */
  double log_offset;        /* added before the natural log; 0.01 (YAMNet: 0.001) */
  gboolean periodic_window; /* TRUE: periodic Hann (VGGish); FALSE: symmetric */
} ConyMelConfig;

typedef struct _ConyMel ConyMel;

/* The largest fft_length (and window_length): 2^18 points take 16 ms a frame; from 2^19
 * on FFmpeg's av_tx falls back to an O(n^2) transform (2^19: over a minute a frame). */
#define CONY_MEL_MAX_FFT (1u << 18)

/* Fills @config with the VGGish parameters listed above. */
void cony_mel_config_init_vggish (ConyMelConfig *config);

/* The named front ends: VGGish's (above) and YAMNet's (the same with log(mel + 0.001)).
 * conymel's `preset` and a model's "frontend" name are these names. */
typedef enum
{
  CONY_MEL_PRESET_VGGISH,
  CONY_MEL_PRESET_YAMNET,
  CONY_MEL_N_PRESETS
} ConyMelPreset;

void cony_mel_config_init_preset (ConyMelConfig *config, ConyMelPreset preset);
/* "vggish", "yamnet"; and one line saying what differs, for GStreamer's enum. */
const char *cony_mel_preset_name (ConyMelPreset preset);
const char *cony_mel_preset_description (ConyMelPreset preset);
gboolean cony_mel_preset_from_name (const char *name, ConyMelPreset *preset);

/* The settings that describe a front end, by conymel's property names: sample-rate,
 * window-length, hop-length, fft-length, n-mels, fmin, fmax, log-offset (also the
 * `mel-*` fields of conymel's caps). */
#define CONY_MEL_N_SETTINGS 8
const char *cony_mel_setting_name (guint setting);
double cony_mel_config_get_setting (const ConyMelConfig *config, guint setting);

/* A model's "frontend" metadata as a config: a JSON object keyed by the setting names
 * (older files: sample_rate, window_samples, hop_samples, fft, n_mels, fmin, fmax,
 * log_offset), an optional "name", other keys ignored; a setting it does not name keeps
 * VGGish's value, and @json NULL is VGGish's front end. The result is validated.
 * @name (optional): the object's "name", else "vggish" (free it). Errors
 * (CONY_ERROR_INVALID) name the key and what was wrong. */
gboolean cony_mel_config_from_frontend (const char *json, ConyMelConfig *config, char **name,
    GError **error);

/* Checks that @config is usable (non-zero sizes, fft_length a power of two
 * >= window_length and <= CONY_MEL_MAX_FFT, 0 <= fmin < fmax <= sample_rate / 2, log_offset > 0,
 * n_mels <= fft_length / 2 + 1). Errors are CONY_ERROR_INVALID and name the
 * field. */
gboolean cony_mel_config_validate (const ConyMelConfig *config, GError **error);

/* Bytes a ConyMel with @config holds (an upper bound, FFmpeg's FFT included): O(fft_length
 * + n_mels), at most about 20 MiB (fft_length 2^18). cony_mel_config_validate() refuses
 * configurations above CONY_MEMORY_BUDGET; the conymel element adds its output batch. */
gsize cony_mel_config_bytes (const ConyMelConfig *config);

/* Creates a log-mel computer; NULL and @error set if the config is invalid. */
ConyMel *cony_mel_new (const ConyMelConfig *config, GError **error);
void cony_mel_free (ConyMel *mel);

/* The configuration the object was created with. */
const ConyMelConfig *cony_mel_get_config (const ConyMel *mel);
/* Floats per frame (= config->n_mels). */
guint cony_mel_get_n_mels (const ConyMel *mel);

/* The mel weight matrix, (fft_length / 2 + 1) rows x n_mels columns, row-major,
 * as VGGish builds it (row 0, the DC bin, is all zeros). Owned by @mel; built on the
 * first call (the computation keeps only the non-zero weights), so it costs
 * (fft_length / 2 + 1) x n_mels x 4 bytes then. */
const float *cony_mel_get_matrix (const ConyMel *mel);

/* Streaming interface. ------------------------------------------------------ */

/* Appends @n samples. Non-finite samples (NaN, +-Inf) are replaced by 0 so they
 * cannot poison later frames; the return value is how many were replaced (the
 * caller may warn). @samples may be NULL when @n is 0. */
gsize cony_mel_push (ConyMel *mel, const float *samples, gsize n);
/* The same for signed 16-bit samples, scaled by 1/32768 like VGGish. */
void cony_mel_push_s16 (ConyMel *mel, const gint16 *samples, gsize n);
/* Appends @n zero samples (a GAP is silence). */
void cony_mel_push_silence (ConyMel *mel, gsize n);

/* Number of complete frames that can be popped now. */
gsize cony_mel_frames_available (const ConyMel *mel);
/* Computes the next complete frame into @out (n_mels floats) and returns TRUE;
 * returns FALSE, leaving @out untouched, when not enough samples are buffered. */
gboolean cony_mel_pop_frame (ConyMel *mel, float *out);

/* Index (from the stream start / last reset) of the frame the next
 * cony_mel_pop_frame() returns; its first sample is index * hop_length. */
guint64 cony_mel_get_next_frame_index (const ConyMel *mel);
/* The mean square of the samples of the last frame popped that no later frame starts
 * with: its first hop_length samples (samples in [-1, 1): a full-scale square wave is 1,
 * 0 dBFS; a full-scale sine 0.5, -3 dBFS). Consecutive frames' values tile the stream, so
 * the level of frames i..j is the mean of theirs (conymel passes them on for the level
 * gate, docs/elements.md). 0 before the first frame. */
double cony_mel_last_frame_power (const ConyMel *mel);
/* Total samples pushed since creation / the last reset. */
guint64 cony_mel_get_samples_pushed (const ConyMel *mel);

/* Drops buffered samples and restarts counting at frame 0 (DISCONT, flush). */
void cony_mel_reset (ConyMel *mel);

/* Whole-signal helpers. ----------------------------------------------------- */

/* Frames a signal of @n_samples samples gives: 0 if n_samples < window_length,
 * else 1 + (n_samples - window_length) / hop_length. */
gsize cony_mel_frames_for_samples (const ConyMelConfig *config, gsize n_samples);

/* Computes all frames of @samples (independently of, and without disturbing,
 * the streaming state) into a new buffer of *n_frames x n_mels floats, row-major
 * (g_free() it). Returns NULL with *n_frames = 0 when the signal is shorter than
 * one window. Non-finite samples are treated as 0. */
float *cony_mel_compute (ConyMel *mel, const float *samples, gsize n_samples, gsize *n_frames);

/* One frame from exactly window_length samples starting at @frame into @out. */
void cony_mel_compute_frame (ConyMel *mel, const float *frame, float *out);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ConyMel, cony_mel_free)

G_END_DECLS
