/* WAV reading (every supported encoding, bad files) and resampling. */
#include "cony/error.h"
#include "cony/wav.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static char *tmpdir;

static void
put16 (GByteArray *b, guint v)
{
  guint8 x[2] = { v & 0xff, (v >> 8) & 0xff };
  g_byte_array_append (b, x, 2);
}

static void
put32 (GByteArray *b, guint32 v)
{
  guint8 x[4] = { v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, v >> 24 };
  g_byte_array_append (b, x, 4);
}

/* A WAV with @n_frames frames of @channels channels; sample (i, c) is
 * value(i, c) encoded with @format/@bits. */
static GByteArray *
make_wav (guint format, guint bits, guint channels, guint rate, guint n_frames, gboolean extensible,
    double (*value) (guint, guint))
{
  GByteArray *data = g_byte_array_new ();
  for (guint i = 0; i < n_frames; i++)
    for (guint c = 0; c < channels; c++) {
      double v = value (i, c);
      if (format == 3 && bits == 32) {
        float f = (float) v;
        guint32 u;
        memcpy (&u, &f, 4);
        put32 (data, u);
      } else if (format == 3) {
        guint64 u;
        memcpy (&u, &v, 8);
        put32 (data, (guint32) u);
        put32 (data, (guint32) (u >> 32));
      } else if (bits == 8) {
        guint8 x = (guint8) (lrint (v * 128) + 128);
        g_byte_array_append (data, &x, 1);
      } else if (bits == 16) {
        put16 (data, (guint16) (gint16) lrint (v * 32768));
      } else if (bits == 24) {
        gint32 x = (gint32) lrint (v * 8388608);
        guint8 b3[3] = { x & 0xff, (x >> 8) & 0xff, (x >> 16) & 0xff };
        g_byte_array_append (data, b3, 3);
      } else {
        put32 (data, (guint32) (gint32) llrint (v * 2147483648.0));
      }
    }
  GByteArray *b = g_byte_array_new ();
  guint fmt_size = extensible ? 40 : 16;
  g_byte_array_append (b, (const guint8 *) "RIFF", 4);
  put32 (b, 4 + 8 + fmt_size + 8 + 6 + 8 + data->len);
  g_byte_array_append (b, (const guint8 *) "WAVE", 4);
  g_byte_array_append (b, (const guint8 *) "fmt ", 4);
  put32 (b, fmt_size);
  put16 (b, extensible ? 0xFFFE : format);
  put16 (b, channels);
  put32 (b, rate);
  put32 (b, rate * channels * bits / 8);
  put16 (b, channels * bits / 8);
  put16 (b, bits);
  if (extensible) {
    put16 (b, 22);
    put16 (b, bits);
    put32 (b, channels == 1 ? 4 : 3);
    put16 (b, format);
    static const guint8 guid_tail[14] = { 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00,
      0xAA, 0x00, 0x38, 0x9B, 0x71 };
    g_byte_array_append (b, guid_tail, 14);
  }
  /* An odd-sized LIST chunk before the data, padded to even. */
  g_byte_array_append (b, (const guint8 *) "LIST", 4);
  put32 (b, 5);
  g_byte_array_append (b, (const guint8 *) "abcde\0", 6);
  g_byte_array_append (b, (const guint8 *) "data", 4);
  put32 (b, data->len);
  g_byte_array_append (b, data->data, data->len);
  g_byte_array_unref (data);
  return b;
}

static double
ramp (guint i, guint c)
{
  return ((int) ((i * 37 + c * 11) % 200) - 100) / 128.0; /* in [-0.78, 0.77] */
}

static char *
write_tmp (const char *name, const void *bytes, gsize len)
{
  char *path = g_build_filename (tmpdir, name, NULL);
  g_assert_true (g_file_set_contents (path, bytes, len, NULL));
  return path;
}

static void
test_encodings (void)
{
  struct {
    guint format, bits, channels;
    gboolean ext;
    double tol;
  } cases[] = {
    { 1, 16, 1, FALSE, 1.0 / 32768 },
    { 1, 16, 2, FALSE, 1.0 / 32768 },
    { 1, 24, 2, FALSE, 1.0 / 8388608 },
    { 1, 32, 1, FALSE, 1e-7 },
    { 1, 8, 1, FALSE, 1.0 / 128 },
    { 3, 32, 2, FALSE, 1e-7 },
    { 3, 64, 1, FALSE, 1e-7 },
    { 1, 16, 3, TRUE, 1.0 / 32768 },
    { 3, 32, 1, TRUE, 1e-7 },
  };
  for (guint k = 0; k < G_N_ELEMENTS (cases); k++) {
    GByteArray *b = make_wav (cases[k].format, cases[k].bits, cases[k].channels, 22050, 777,
        cases[k].ext, ramp);
    g_autofree char *path = write_tmp ("enc.wav", b->data, b->len);
    g_byte_array_unref (b);
    GError *error = NULL;
    g_autoptr (ConyWav) wav = cony_wav_load (path, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (wav->sample_rate, ==, 22050);
    g_assert_cmpuint (wav->channels, ==, cases[k].channels);
    g_assert_cmpuint (wav->bits_per_sample, ==, cases[k].bits);
    g_assert_cmpint (wav->is_float, ==, cases[k].format == 3);
    g_assert_cmpuint (wav->n_frames, ==, 777);
    for (guint i = 0; i < 777; i++)
      for (guint c = 0; c < cases[k].channels; c++)
        g_assert_cmpfloat (fabs (wav->samples[i * cases[k].channels + c] - ramp (i, c)), <=,
            cases[k].tol);
    g_autofree float *mono = cony_wav_mono (wav);
    for (guint i = 0; i < 777; i++) {
      double want = 0;
      for (guint c = 0; c < cases[k].channels; c++)
        want += ramp (i, c);
      want /= cases[k].channels;
      g_assert_cmpfloat (fabs (mono[i] - want), <=, cases[k].tol + 1e-6);
    }
  }

  /* 16-bit scaling is exactly int16 / 32768. */
  GByteArray *b = make_wav (1, 16, 1, 16000, 3, FALSE, ramp);
  g_autofree char *path = write_tmp ("s16.wav", b->data, b->len);
  g_byte_array_unref (b);
  g_autoptr (ConyWav) wav = cony_wav_load (path, NULL);
  g_assert_cmpfloat (wav->samples[0], ==, (gint16) lrint (ramp (0, 0) * 32768) / 32768.0f);
}

static void
expect_bad (const char *name, const void *bytes, gsize len, const char *needle)
{
  g_autofree char *path = write_tmp (name, bytes, len);
  GError *error = NULL;
  g_assert_null (cony_wav_load (path, &error));
  g_assert_error (error, CONY_ERROR, CONY_ERROR_FORMAT);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, path));
  g_assert_nonnull (strstr (error->message, needle));
  g_clear_error (&error);
}

static void
test_bad_files (void)
{
  GError *error = NULL;
  g_assert_null (cony_wav_load ("/nonexistent/a.wav", &error));
  g_assert_error (error, CONY_ERROR, CONY_ERROR_IO);
  g_clear_error (&error);

  expect_bad ("text.wav", "hello, this is not audio", 24, "not a WAV");
  expect_bad ("empty.wav", "", 0, "not a WAV");

  GByteArray *b = make_wav (1, 16, 1, 16000, 100, FALSE, ramp);
  expect_bad ("trunc.wav", b->data, b->len - 11, "truncated");
  expect_bad ("nodata.wav", b->data, 12 + 8 + 16, "no data chunk");
  GByteArray *c = g_byte_array_new ();
  g_byte_array_append (c, b->data, b->len);
  c->data[20] = 0x55; /* format tag */
  expect_bad ("alaw.wav", c->data, c->len, "unsupported encoding");
  memcpy (c->data, b->data, b->len);
  c->data[22] = 0; /* channels */
  expect_bad ("nochan.wav", c->data, c->len, "0 channels");
  memcpy (c->data, b->data, b->len);
  c->data[24] = c->data[25] = c->data[26] = c->data[27] = 0; /* rate */
  expect_bad ("norate.wav", c->data, c->len, "sample rate");
  memcpy (c->data, b->data, b->len);
  c->data[34] = 12; /* 12 bits per sample */
  expect_bad ("bits.wav", c->data, c->len, "12 bits");
  memcpy (c->data, b->data, b->len);
  c->data[16] = 0xff; /* fmt chunk runs past the end */
  c->data[17] = 0xff;
  expect_bad ("bigfmt.wav", c->data, c->len, "fmt chunk");

  /* Streamed file: data size 0xFFFFFFFF means "to the end". */
  memcpy (c->data, b->data, b->len);
  gsize data_size_at = b->len - 200 - 4;
  memset (c->data + data_size_at, 0xff, 4);
  g_autofree char *path = write_tmp ("streamed.wav", c->data, c->len);
  g_autoptr (ConyWav) wav = cony_wav_load (path, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (wav->n_frames, ==, 100);
  g_byte_array_unref (b);
  g_byte_array_unref (c);
}

static double
sine_44k (guint i, guint c)
{
  return 0.5 * sin (2 * G_PI * 1000.0 * i / 44100.0);
}

static void
test_resample (void)
{
  GByteArray *b = make_wav (3, 32, 1, 44100, 44100, FALSE, sine_44k);
  g_autofree char *path = write_tmp ("sine.wav", b->data, b->len);
  g_byte_array_unref (b);
  GError *error = NULL;
  gsize n = 0;
  g_autofree float *x = cony_wav_load_mono (path, 16000, &n, &error);
  g_assert_no_error (error);
  g_assert_cmpint (labs ((long) n - 16000), <=, 2);
  /* Away from the edges the resampled signal is the same sine at 16 kHz. */
  double err = 0;
  for (gsize i = 200; i < 15800; i++)
    err = MAX (err, fabs (x[i] - 0.5 * sin (2 * G_PI * 1000.0 * i / 16000.0)));
  g_test_message ("max resampling error %.2e", err);
  g_assert_cmpfloat (err, <, 5e-3);

  /* Same rate: a copy. */
  gsize m = 0;
  g_autofree float *y = cony_wav_load_mono (path, 44100, &m, &error);
  g_assert_cmpuint (m, ==, 44100);
  g_assert_cmpfloat (y[100], ==, (float) sine_44k (100, 0));
}

/* Absurd rates (#31.3): a 1 Hz WAV once asked for n × 16000 output samples (a 100 KB
 * file, 6.4 GB). The file is refused naming its rate; cony_resample() refuses rates out
 * of 1 kHz..384 kHz and an output above its cap, before allocating. */
static void
test_absurd_rates (void)
{
  GByteArray *b = make_wav (1, 16, 1, 1, 50000, FALSE, ramp);
  g_autofree char *path = write_tmp ("1hz.wav", b->data, b->len);
  expect_bad ("1hz.wav", b->data, b->len, "sample rate 1 Hz out of range");
  g_byte_array_unref (b);
  GError *error = NULL;
  gsize n = 7;
  g_assert_null (cony_wav_load_mono (path, 16000, &n, &error));
  g_assert_error (error, CONY_ERROR, CONY_ERROR_FORMAT);
  g_clear_error (&error);
  b = make_wav (1, 16, 1, 400000, 10, FALSE, ramp);
  expect_bad ("400k.wav", b->data, b->len, "sample rate 400000 Hz out of range");
  g_byte_array_unref (b);

  g_autofree float *x = g_new0 (float, 1 << 20);
  const guint rates[][2] = { { 1, 16000 }, { 16000, 1 }, { 999, 16000 }, { 16000, 384001 } };
  for (guint i = 0; i < G_N_ELEMENTS (rates); i++) {
    g_assert_null (cony_resample (x, 50000, rates[i][0], rates[i][1], &n, &error));
    g_assert_error (error, CONY_ERROR, CONY_ERROR_INVALID);
    g_assert_nonnull (strstr (error->message, "rates must be 1000 to 384000 Hz"));
    g_assert_cmpuint (n, ==, 0);
    g_clear_error (&error);
  }
  /* 2^20 samples from 1 kHz to 384 kHz: 4e8 samples, over the 2^28 cap */
  g_assert_null (cony_resample (x, 1 << 20, 1000, 384000, &n, &error));
  g_assert_error (error, CONY_ERROR, CONY_ERROR_INVALID);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, "more than the cap"));
  g_clear_error (&error);
  /* the edges of the range are served */
  g_autofree float *y = cony_resample (x, 1000, 1000, 384000, &n, &error);
  g_assert_no_error (error);
  g_assert_nonnull (y);
  g_assert_cmpint (labs ((long) n - 384000), <=, 2);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp ("cony-wav-XXXXXX", NULL);
  g_test_add_func ("/wav/encodings", test_encodings);
  g_test_add_func ("/wav/bad-files", test_bad_files);
  g_test_add_func ("/wav/resample", test_resample);
  g_test_add_func ("/wav/absurd-rates", test_absurd_rates);
  int ret = g_test_run ();
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", tmpdir);
  if (system (cmd) != 0)
    ret = ret ? ret : 1;
  return ret;
}
