/* An application built against the installed gst-cony (pkg-config gstreamer-cony-1.0):
 * runs the installed plugin's chain and reads each step's GstConyClassificationMeta
 * from the buffers. Prints "step label score" lines; exit 1 when no meta arrives.
 *   read_meta VGGISH.safetensors TRANSFORMER.safetensors */
#include <gst/gst.h>
#include <gst/cony/gstconymeta.h>

static void
on_buffer (GstElement *sink, GstBuffer *buf, GstPad *pad, guint *n)
{
  GstConyClassificationMeta *m = gst_buffer_get_cony_classification_meta (buf);
  if (m) {
    g_print ("%" G_GUINT64_FORMAT " %s %.3f\n", m->step, m->label, m->score);
    (*n)++;
  }
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  if (argc != 3) {
    g_printerr ("usage: read_meta VGGISH TRANSFORMER\n");
    return 2;
  }
  gchar *desc =
      g_strdup_printf ("audiotestsrc num-buffers=20 samplesperbuffer=1600 "
                       "! audio/x-raw,rate=16000 ! conymel ! conyvggish model=\"%s\" ! conytransformer "
                       "model=\"%s\" ! fakesink name=out signal-handoffs=true",
          argv[1], argv[2]);
  GError *err = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &err);
  if (!pipeline) {
    g_printerr ("%s\n", err->message);
    return 2;
  }
  guint n = 0;
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipeline), "out");
  g_signal_connect (sink, "handoff", G_CALLBACK (on_buffer), &n);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  GstMessage *msg = gst_bus_timed_pop_filtered (GST_ELEMENT_BUS (pipeline), 30 * GST_SECOND,
      GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  gboolean eos = msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS;
  if (msg)
    gst_message_unref (msg);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  g_free (desc);
  return eos && n > 0 ? 0 : 1;
}
