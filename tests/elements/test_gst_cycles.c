/* State and seek churn on a file pipeline:
 *   filesrc ! wavparse ! audioconvert ! audioresample ! conymel ! conyvggish
 *   ! conytransformer ! fakesink
 * with the small test models: 200 NULL <-> PLAYING cycles (every other one torn down
 * mid-stream, the others run to EOS), then flushing seeks while PLAYING. No error may be
 * posted, results must keep coming, and the process may not grow beyond a bound (each
 * start loads both models again: a leak of a model per cycle would be megabytes). */
#include <gst/check/gstcheck.h>
#include "testutil.h"
#include <glib/gstdio.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define CYCLES 200
#define SEEKS 40
#define RATE 16000
#define SECONDS 3
/* RSS growth allowed from cycle 20 to cycle 200 (allocator noise, GStreamer caches).
 * Not under AddressSanitizer: its quarantine keeps freed memory resident (tens of MiB
 * here), and its leak checker does the job instead (scripts/sanitize.sh). */
#define MAX_GROWTH_KIB 8192
#define CHECK_RSS CONY_TEST_CHECK_RSS

static gchar *wav_path;
static guint n_results;

static void
write_wav (const char *path)
{
  guint n = RATE * SECONDS;
  GByteArray *b = g_byte_array_new ();
  guint32 data_len = n * 2, riff_len = 36 + data_len, fmt_len = 16, rate = RATE,
          byte_rate = RATE * 2;
  guint16 pcm = 1, ch = 1, align = 2, bits = 16;
  g_byte_array_append (b, (const guint8 *) "RIFF", 4);
  g_byte_array_append (b, (const guint8 *) &riff_len, 4);
  g_byte_array_append (b, (const guint8 *) "WAVEfmt ", 8);
  g_byte_array_append (b, (const guint8 *) &fmt_len, 4);
  g_byte_array_append (b, (const guint8 *) &pcm, 2);
  g_byte_array_append (b, (const guint8 *) &ch, 2);
  g_byte_array_append (b, (const guint8 *) &rate, 4);
  g_byte_array_append (b, (const guint8 *) &byte_rate, 4);
  g_byte_array_append (b, (const guint8 *) &align, 2);
  g_byte_array_append (b, (const guint8 *) &bits, 2);
  g_byte_array_append (b, (const guint8 *) "data", 4);
  g_byte_array_append (b, (const guint8 *) &data_len, 4);
  for (guint i = 0; i < n; i++) {
    /* a chirp, so that the classes change along the file */
    double t = (double) i / RATE;
    gint16 s = (gint16) (12000 * sin (2 * G_PI * (200 + 600 * t) * t));
    g_byte_array_append (b, (const guint8 *) &s, 2);
  }
  g_assert_true (g_file_set_contents (path, (const char *) b->data, b->len, NULL));
  g_byte_array_unref (b);
}

static glong
rss_kib (void)
{
  return cony_test_status_kib ("VmRSS");
}

static void
on_handoff (GstElement *sink, GstBuffer *buf, GstPad *pad, gpointer user)
{
  g_atomic_int_inc (&n_results);
}

/* The test chain with the small models, or with the shipped ones (models/audio/, on
 * YAMNet's adapted CNN: 15 MB of weights, as an application runs it). */
static GstElement *
make_pipeline_with (gboolean shipped)
{
  const char *root = g_getenv ("CONY_SOURCE_ROOT");
  g_assert_nonnull (root);
  g_autofree char *models = shipped
      ? g_strdup_printf ("conymel preset=yamnet ! conyvggish "
                         "model=%s/models/audio/yamnet-adapted.safetensors output=embedding "
                         "! conytransformer model=%s/models/audio/transformer.safetensors",
          root, root)
      : g_strdup_printf ("conymel ! conyvggish model=%s/tests/golden/cnn/small.safetensors "
                         "! conytransformer model=%s/tests/golden/transformer/small.safetensors",
          root, root);
  g_autofree char
      *desc = g_strdup_printf ("filesrc location=%s ! wavparse ! audioconvert ! audioresample ! %s "
                               "! fakesink name=sink signal-handoffs=true sync=false",
          wav_path, models);
  GError *error = NULL;
  GstElement *p = gst_parse_launch (desc, &error);
  g_assert_no_error (error);
  GstElement *sink = gst_bin_get_by_name (GST_BIN (p), "sink");
  g_signal_connect (sink, "handoff", G_CALLBACK (on_handoff), NULL);
  gst_object_unref (sink);
  return p;
}

static GstElement *
make_pipeline (void)
{
  return make_pipeline_with (FALSE);
}

/* Fails on any ERROR or WARNING message waiting on @bus; returns TRUE at EOS. */
static gboolean
drain_bus (GstBus *bus, GstClockTime timeout)
{
  GstMessage *m;
  gboolean eos = FALSE;
  while (!eos
      && (m = gst_bus_timed_pop_filtered (bus, timeout,
              GST_MESSAGE_ERROR | GST_MESSAGE_WARNING | GST_MESSAGE_EOS))
          != NULL) {
    if (GST_MESSAGE_TYPE (m) != GST_MESSAGE_EOS) {
      GError *err = NULL;
      gchar *dbg = NULL;
      if (GST_MESSAGE_TYPE (m) == GST_MESSAGE_ERROR)
        gst_message_parse_error (m, &err, &dbg);
      else
        gst_message_parse_warning (m, &err, &dbg);
      g_error ("%s from %s: %s (%s)", GST_MESSAGE_TYPE_NAME (m), GST_OBJECT_NAME (m->src),
          err->message, dbg);
    }
    eos = TRUE;
    gst_message_unref (m);
  }
  return eos;
}

static void
set_state (GstElement *p, GstState s)
{
  GstStateChangeReturn r = gst_element_set_state (p, s);
  g_assert_cmpint (r, !=, GST_STATE_CHANGE_FAILURE);
  r = gst_element_get_state (p, NULL, NULL, 10 * GST_SECOND);
  g_assert_cmpint (r, ==, GST_STATE_CHANGE_SUCCESS);
}

static void
test_null_playing_cycles (void)
{
  GstElement *p = make_pipeline ();
  GstBus *bus = gst_element_get_bus (p);
  glong rss_warm = 0;
  guint full_runs_results = 0;
  for (guint i = 0; i < CYCLES; i++) {
    guint before = g_atomic_int_get (&n_results);
    set_state (p, GST_STATE_PLAYING);
    if (i % 2 == 0) {
      /* the whole file: EOS, and the same number of results every time */
      g_assert_true (drain_bus (bus, 20 * GST_SECOND));
      guint got = g_atomic_int_get (&n_results) - before;
      g_assert_cmpuint (got, >, 0);
      if (i == 0)
        full_runs_results = got;
      g_assert_cmpuint (got, ==, full_runs_results);
    } else {
      drain_bus (bus, 0); /* torn down mid-stream (or wherever it got to) */
    }
    set_state (p, GST_STATE_NULL);
    drain_bus (bus, 0);
    if (i == 20)
      rss_warm = rss_kib ();
  }
  glong growth = rss_kib () - rss_warm;
  g_test_message ("%u cycles: %u results per full run, RSS growth %ld KiB after cycle 20", CYCLES,
      full_runs_results, growth);
  if (CHECK_RSS)
    g_assert_cmpint (growth, <, MAX_GROWTH_KIB);
  gst_object_unref (bus);
  gst_object_unref (p);
}

/* Pipelines created and destroyed in one process (#46.7): rounds of 8 concurrent file
 * pipelines, each run to EOS, set to NULL and freed. What the streaming threads freed
 * stayed in glibc's per-thread arenas, and the resident memory grew round after round
 * (32 shipped-model pipelines a round: 96 -> 113 MiB over 12 rounds); the elements now
 * trim the heap when they stop (35 -> 39 MiB). With the shipped models, a teardown must
 * hand back 20 MiB of the ~57 MiB the 8 pipelines hold (10 MiB came back without the
 * trim), and RSS may not grow by 4 MiB from the first round to the last. */
#define ROUNDS 6
#define PER_ROUND 8
static void
test_create_destroy_rounds (void)
{
  glong rss[ROUNDS], alive[ROUNDS];
  for (guint r = 0; r < ROUNDS; r++) {
    GstElement *p[PER_ROUND];
    for (guint i = 0; i < PER_ROUND; i++) {
      p[i] = make_pipeline_with (TRUE);
      g_assert_cmpint (gst_element_set_state (p[i], GST_STATE_PLAYING), !=,
          GST_STATE_CHANGE_FAILURE);
    }
    for (guint i = 0; i < PER_ROUND; i++) {
      GstBus *bus = gst_element_get_bus (p[i]);
      g_assert_true (drain_bus (bus, 30 * GST_SECOND));
      gst_object_unref (bus);
    }
    alive[r] = rss_kib ();
    for (guint i = 0; i < PER_ROUND; i++) {
      set_state (p[i], GST_STATE_NULL);
      gst_object_unref (p[i]);
    }
    rss[r] = rss_kib ();
    g_test_message ("round %u: %u pipelines at EOS: RSS %ld KiB; destroyed: %ld KiB", r, PER_ROUND,
        alive[r], rss[r]);
  }
  glong growth = rss[ROUNDS - 1] - rss[0], returned = alive[ROUNDS - 1] - rss[ROUNDS - 1];
  g_test_message ("RSS growth from round 0 to round %u: %ld KiB; the last teardown returned "
                  "%ld KiB",
      ROUNDS - 1, growth, returned);
  if (CHECK_RSS) {
    /* measured alone: +412 KiB and 30.8 MiB returned (+1228 KiB after the other tests);
     * without the trim +1656 to +2692 KiB and 10.1 MiB returned */
    g_assert_cmpint (growth, <, 4096);
    g_assert_cmpint (returned, >, 20 * 1024);
  }
}

static void
test_flushing_seeks (void)
{
  GstElement *p = make_pipeline ();
  GstBus *bus = gst_element_get_bus (p);
  set_state (p, GST_STATE_PAUSED);
  for (guint i = 0; i < SEEKS; i++) {
    set_state (p, GST_STATE_PLAYING);
    /* positions all over the file, backwards and forwards, and past its end */
    gint64 pos = (gint64) ((i * 7919) % (SECONDS * 10 + 3)) * GST_SECOND / 10;
    guint before = g_atomic_int_get (&n_results);
    g_assert_true (gst_element_seek_simple (p, GST_FORMAT_TIME,
        GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_ACCURATE, pos));
    g_assert_cmpint (gst_element_get_state (p, NULL, NULL, 10 * GST_SECOND), ==,
        GST_STATE_CHANGE_SUCCESS);
    gboolean eos = drain_bus (bus, 20 * GST_SECOND);
    g_assert_true (eos);
    /* a seek well before the end still yields results */
    if (pos <= (SECONDS - 2) * GST_SECOND)
      g_assert_cmpuint (g_atomic_int_get (&n_results) - before, >, 0);
  }
  set_state (p, GST_STATE_NULL);
  drain_bus (bus, 0);
  gst_object_unref (bus);
  gst_object_unref (p);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  g_autofree char *dir = g_dir_make_tmp ("cony-cycles-XXXXXX", NULL);
  wav_path = g_build_filename (dir, "chirp.wav", NULL);
  write_wav (wav_path);
  g_test_add_func ("/gst/cycles/null-playing", test_null_playing_cycles);
  g_test_add_func ("/gst/cycles/flushing-seeks", test_flushing_seeks);
  g_test_add_func ("/gst/cycles/create-destroy-rounds", test_create_destroy_rounds);
  int rc = g_test_run ();
  g_unlink (wav_path);
  g_rmdir (dir);
  g_free (wav_path);
  return rc;
}
