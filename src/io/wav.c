/* WAV reader and libswresample resampling (see include/cony/wav.h). */
#include "cony/wav.h"
#include "cony/error.h"

#include <libavutil/channel_layout.h>
#include <libavutil/error.h>
#include <libavutil/samplefmt.h>
#include <libswresample/swresample.h>
#include <string.h>

#define WAVE_PCM 0x0001
#define WAVE_FLOAT 0x0003
#define WAVE_EXTENSIBLE 0xFFFE

static guint16
rd16 (const guint8 *p)
{
  return (guint16) (p[0] | (p[1] << 8));
}

static guint32
rd32 (const guint8 *p)
{
  return (guint32) p[0] | ((guint32) p[1] << 8) | ((guint32) p[2] << 16) | ((guint32) p[3] << 24);
}

#define BAD(...) \
  G_STMT_START \
  { \
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, __VA_ARGS__); \
    return NULL; \
  } \
  G_STMT_END

ConyWav *
cony_wav_load (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  g_autoptr (GMappedFile) file = NULL;
  GError *local = NULL;
  file = g_mapped_file_new (path, FALSE, &local);
  if (file == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s: cannot open: %s", path, local->message);
    g_error_free (local);
    return NULL;
  }
  const guint8 *d = (const guint8 *) g_mapped_file_get_contents (file);
  gsize len = g_mapped_file_get_length (file);
  if (len < 12 || memcmp (d, "RIFF", 4) != 0 || memcmp (d + 8, "WAVE", 4) != 0)
    BAD ("%s: not a WAV file (no RIFF/WAVE header)", path);

  gboolean have_fmt = FALSE;
  guint16 format = 0, channels = 0, bits = 0, block_align = 0;
  guint32 rate = 0;
  const guint8 *data = NULL;
  gsize data_len = 0;
  gsize pos = 12;
  while (pos + 8 <= len) {
    const guint8 *ck = d + pos;
    guint32 size = rd32 (ck + 4);
    gsize body = pos + 8;
    if (memcmp (ck, "fmt ", 4) == 0) {
      if (size < 16 || body + size > len)
        BAD ("%s: fmt chunk of %u bytes is %s", path, size,
            size < 16 ? "too short (need 16)" : "truncated");
      format = rd16 (d + body);
      channels = rd16 (d + body + 2);
      rate = rd32 (d + body + 4);
      block_align = rd16 (d + body + 12);
      bits = rd16 (d + body + 14);
      if (format == WAVE_EXTENSIBLE) {
        if (size < 40)
          BAD ("%s: WAVE_FORMAT_EXTENSIBLE fmt chunk of %u bytes, expected 40", path, size);
        /* The sub-format GUID starts with the format code. */
        format = rd16 (d + body + 24);
      }
      have_fmt = TRUE;
    } else if (memcmp (ck, "data", 4) == 0) {
      if (!have_fmt)
        BAD ("%s: data chunk before the fmt chunk", path);
      gsize avail = len - body;
      if (size == 0 || size == 0xFFFFFFFFu)
        data_len = avail;
      else if (size > avail)
        BAD ("%s: truncated: the data chunk promises %u bytes, the file has %" G_GSIZE_FORMAT, path,
            size, avail);
      else
        data_len = size;
      data = d + body;
      break;
    }
    if (size > len - body)
      BAD ("%s: chunk '%.4s' of %u bytes runs past the end of the file", path, (const char *) ck,
          size);
    pos = body + size + (size & 1);
  }
  if (!have_fmt)
    BAD ("%s: no fmt chunk", path);
  if (data == NULL)
    BAD ("%s: no data chunk", path);
  if (channels == 0)
    BAD ("%s: 0 channels", path);
  if (rate < CONY_WAV_MIN_RATE || rate > CONY_WAV_MAX_RATE)
    BAD ("%s: sample rate %u Hz out of range (%u to %u Hz)", path, rate, CONY_WAV_MIN_RATE,
        CONY_WAV_MAX_RATE);
  gboolean is_float;
  if (format == WAVE_PCM && (bits == 8 || bits == 16 || bits == 24 || bits == 32))
    is_float = FALSE;
  else if (format == WAVE_FLOAT && (bits == 32 || bits == 64))
    is_float = TRUE;
  else
    BAD ("%s: unsupported encoding (format tag 0x%04x, %u bits); supported: PCM 8/16/24/32-bit, "
         "IEEE float 32/64-bit",
        path, format, bits);
  guint bps = bits / 8;
  if (block_align != bps * channels)
    BAD ("%s: block align %u does not match %u channels of %u bits", path, block_align, channels,
        bits);

  ConyWav *wav = g_new0 (ConyWav, 1);
  wav->sample_rate = rate;
  wav->channels = channels;
  wav->bits_per_sample = bits;
  wav->is_float = is_float;
  wav->n_frames = data_len / block_align;
  gsize n = wav->n_frames * channels;
  wav->samples = g_new (float, MAX (n, 1));
  const guint8 *p = data;
  for (gsize i = 0; i < n; i++, p += bps) {
    float v;
    if (is_float && bits == 32) {
      guint32 u = rd32 (p);
      memcpy (&v, &u, 4);
    } else if (is_float) {
      guint64 u = (guint64) rd32 (p) | ((guint64) rd32 (p + 4) << 32);
      double x;
      memcpy (&x, &u, 8);
      v = (float) x;
    } else if (bits == 8) {
      v = ((int) p[0] - 128) / 128.0f;
    } else if (bits == 16) {
      v = (gint16) rd16 (p) / 32768.0f;
    } else if (bits == 24) {
      gint32 x = (gint32) ((guint32) p[0] << 8 | (guint32) p[1] << 16 | (guint32) p[2] << 24) >> 8;
      v = (float) (x / 8388608.0);
    } else {
      v = (float) ((gint32) rd32 (p) / 2147483648.0);
    }
    wav->samples[i] = v;
  }
  return wav;
}

void
cony_wav_free (ConyWav *wav)
{
  if (wav == NULL)
    return;
  g_free (wav->samples);
  g_free (wav);
}

float *
cony_wav_mono (const ConyWav *wav)
{
  g_return_val_if_fail (wav != NULL, NULL);
  float *out = g_new (float, MAX (wav->n_frames, 1));
  guint c = wav->channels;
  for (gsize i = 0; i < wav->n_frames; i++) {
    double acc = 0.0;
    for (guint k = 0; k < c; k++)
      acc += wav->samples[i * c + k];
    out[i] = (float) (acc / c);
  }
  return out;
}

float *
cony_resample (const float *samples, gsize n, guint in_rate, guint out_rate, gsize *n_out,
    GError **error)
{
  g_return_val_if_fail (n_out != NULL, NULL);
  g_return_val_if_fail (samples != NULL || n == 0, NULL);
  *n_out = 0;
  if (in_rate < CONY_WAV_MIN_RATE || in_rate > CONY_WAV_MAX_RATE || out_rate < CONY_WAV_MIN_RATE
      || out_rate > CONY_WAV_MAX_RATE) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "resample %u -> %u Hz: rates must be %u to "
        "%u Hz",
        in_rate, out_rate, CONY_WAV_MIN_RATE, CONY_WAV_MAX_RATE);
    return NULL;
  }
  /* The output is sized before anything is allocated: a short input at a low rate must
   * not ask for gigabytes. */
  double want = (double) n * out_rate / in_rate;
  if (want > CONY_RESAMPLE_MAX_SAMPLES) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "resample %u -> %u Hz: %" G_GSIZE_FORMAT
        " samples would give %.0f, more than the cap of %u samples",
        in_rate, out_rate, n, want, CONY_RESAMPLE_MAX_SAMPLES);
    return NULL;
  }
  if (in_rate == out_rate) {
    *n_out = n;
    return g_memdup2 (samples, MAX (n, 1) * sizeof (float));
  }
  if (n > G_MAXINT / 2) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "resample: %" G_GSIZE_FORMAT " samples is too long", n);
    return NULL;
  }
  SwrContext *swr = NULL;
  AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
  int ret = swr_alloc_set_opts2 (&swr, &mono, AV_SAMPLE_FMT_FLT, (int) out_rate, &mono,
      AV_SAMPLE_FMT_FLT, (int) in_rate, 0, NULL);
  if (ret >= 0)
    ret = swr_init (swr);
  if (ret < 0) {
    char msg[128];
    av_strerror (ret, msg, sizeof msg);
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "resample %u -> %u Hz: libswresample: %s",
        in_rate, out_rate, msg);
    swr_free (&swr);
    return NULL;
  }
  gsize cap = (gsize) want + 1024;
  float *out = g_try_new (float, cap);
  if (!out) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "resample %u -> %u Hz: out of memory for %" G_GSIZE_FORMAT " samples", in_rate, out_rate,
        cap);
    swr_free (&swr);
    return NULL;
  }
  const guint8 *in_planes[1] = { (const guint8 *) samples };
  guint8 *out_planes[1] = { (guint8 *) out };
  int got = swr_convert (swr, out_planes, (int) cap, in_planes, (int) n);
  gsize total = got > 0 ? (gsize) got : 0;
  while (got >= 0) {
    out_planes[0] = (guint8 *) (out + total);
    got = swr_convert (swr, out_planes, (int) (cap - total), NULL, 0); /* flush */
    if (got <= 0)
      break;
    total += (gsize) got;
  }
  swr_free (&swr);
  if (got < 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "resample %u -> %u Hz failed", in_rate,
        out_rate);
    g_free (out);
    return NULL;
  }
  *n_out = total;
  return out;
}

float *
cony_wav_load_mono (const char *path, guint rate, gsize *n_samples, GError **error)
{
  g_return_val_if_fail (n_samples != NULL, NULL);
  g_autoptr (ConyWav) wav = cony_wav_load (path, error);
  if (wav == NULL)
    return NULL;
  g_autofree float *mono = cony_wav_mono (wav);
  if (rate == 0 || rate == wav->sample_rate) {
    *n_samples = wav->n_frames;
    return g_steal_pointer (&mono);
  }
  return cony_resample (mono, wav->n_frames, wav->sample_rate, rate, n_samples, error);
}
