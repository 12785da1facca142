/* Several pipelines in one process at once (the ThreadSanitizer job of scripts/test.sh
 * runs this, #46.8; the normal suite runs it too): 4 audio chains over the small test
 * models, sharing one copy of the CNN's weights, each with a queue so tokens and their
 * metas cross threads, while the application thread sets the any-state properties
 * (threshold, top-k, post-messages) and reads the labels. Every chain reaches EOS with
 * the same results as when it runs alone. */
#include <gst/gst.h>

#include "testutil.h"
#include <string.h>

#define PIPELINES 4

static guint results[PIPELINES];

static void
on_handoff (GstElement *sink, GstBuffer *buf, GstPad *pad, gpointer user)
{
  g_atomic_int_inc (&results[GPOINTER_TO_UINT (user)]);
}

static GstElement *
make_pipeline (guint i)
{
  const char *root = g_getenv ("CONY_SOURCE_ROOT");
  g_assert_nonnull (root);
  g_autofree char *desc =
      g_strdup_printf ("audiotestsrc num-buffers=30 samplesperbuffer=1600 wave=pink-noise "
                       "! audio/x-raw,format=F32LE,rate=16000,channels=1 ! conymel frames-per-buffer=4 "
                       "! conyvggish model=%s/tests/golden/cnn/small.safetensors ! queue "
                       "! conytransformer name=t model=%s/tests/golden/transformer/small.safetensors top-k=2 "
                       "! conyjson ! fakesink name=sink signal-handoffs=true sync=false",
          root, root);
  GError *error = NULL;
  GstElement *p = gst_parse_launch (desc, &error);
  g_assert_no_error (error);
  GstElement *sink = gst_bin_get_by_name (GST_BIN (p), "sink");
  g_signal_connect (sink, "handoff", G_CALLBACK (on_handoff), GUINT_TO_POINTER (i));
  gst_object_unref (sink);
  return p;
}

/* TRUE at EOS within @timeout (any error or warning fails the test). */
static gboolean
wait_eos (GstElement *p, GstClockTime timeout)
{
  GstBus *bus = gst_element_get_bus (p);
  GstMessage *m = gst_bus_timed_pop_filtered (bus, timeout,
      GST_MESSAGE_ERROR | GST_MESSAGE_WARNING | GST_MESSAGE_EOS);
  gst_object_unref (bus);
  if (m == NULL)
    return FALSE;
  if (GST_MESSAGE_TYPE (m) != GST_MESSAGE_EOS) {
    GError *err = NULL;
    gchar *dbg = NULL;
    gst_message_parse_error (m, &err, &dbg);
    g_error ("%s: %s (%s)", GST_OBJECT_NAME (m->src), err ? err->message : "?", dbg);
  }
  gst_message_unref (m);
  return TRUE;
}

static void
test_concurrent_pipelines (void)
{
  /* alone first: the reference count of results */
  GstElement *solo = make_pipeline (0);
  g_assert_cmpint (gst_element_set_state (solo, GST_STATE_PLAYING), !=, GST_STATE_CHANGE_FAILURE);
  g_assert_true (wait_eos (solo, 120 * GST_SECOND));
  gst_element_set_state (solo, GST_STATE_NULL);
  gst_object_unref (solo);
  guint alone = results[0];
  g_assert_cmpuint (alone, >, 0);
  results[0] = 0;

  GstElement *p[PIPELINES];
  for (guint i = 0; i < PIPELINES; i++) {
    p[i] = make_pipeline (i);
    g_assert_cmpint (gst_element_set_state (p[i], GST_STATE_PLAYING), !=, GST_STATE_CHANGE_FAILURE);
  }
  /* the application thread meanwhile, until every chain is done: properties that may
   * change in any state, and the labels */
  gboolean done[PIPELINES] = { FALSE };
  guint left = PIPELINES, sets = 0;
  while (left > 0) {
    for (guint i = 0; i < PIPELINES; i++) {
      if (done[i])
        continue;
      GstElement *t = gst_bin_get_by_name (GST_BIN (p[i]), "t");
      g_object_set (t, "threshold", sets % 2 ? 0.0 : 0.1, "top-k", 1 + sets % 3, "post-messages",
          sets % 2 == 0, NULL);
      gchar **labels = NULL;
      g_object_get (t, "labels", &labels, NULL);
      g_assert_nonnull (labels);
      g_strfreev (labels);
      gst_object_unref (t);
      sets++;
      if (wait_eos (p[i], 0)) {
        done[i] = TRUE;
        left--;
      }
    }
    g_usleep (200);
  }
  for (guint i = 0; i < PIPELINES; i++) {
    gst_element_set_state (p[i], GST_STATE_NULL);
    gst_object_unref (p[i]);
    g_assert_cmpuint (g_atomic_int_get (&results[i]), ==, alone);
  }
  g_test_message ("%u pipelines at once, %u results each, %u property sets meanwhile", PIPELINES,
      alone, sets);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/gst/concurrent/pipelines", test_concurrent_pipelines);
  return g_test_run ();
}
