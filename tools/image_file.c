/* Image files for the CNN commands (see image_file.h): filesrc ! gdkpixbufdec (which
 * reads PNG, JPEG and BMP; decodebin finds no BMP decoder) ! videoconvert ! fakesink,
 * whose last sample is the picture. */
#include "image_file.h"

#include "cony/error.h"

#include <gst/gst.h>
#include <gst/video/video.h>
#include <string.h>

gboolean
cony_image_file_is_image (const char *path)
{
  static const char *ext[] = { ".png", ".jpg", ".jpeg", ".bmp" };
  g_autofree char *lower = g_ascii_strdown (path, -1);
  for (guint i = 0; i < G_N_ELEMENTS (ext); i++)
    if (g_str_has_suffix (lower, ext[i]))
      return TRUE;
  return FALSE;
}

/* Runs @pipeline to EOS or an error; FALSE with @error on the latter. */
static gboolean
run_to_eos (GstElement *pipeline, const char *path, GError **error)
{
  if (gst_element_set_state (pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s: could not start decoding", path);
    return FALSE;
  }
  g_autoptr (GstBus) bus = gst_element_get_bus (pipeline);
  g_autoptr (GstMessage) msg = gst_bus_timed_pop_filtered (bus, GST_CLOCK_TIME_NONE,
      GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  if (msg != NULL && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR) {
    g_autoptr (GError) err = NULL;
    gst_message_parse_error (msg, &err, NULL);
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s: cannot decode it as an image: %s", path,
        err->message);
    return FALSE;
  }
  return TRUE;
}

guint8 *
cony_image_file_load (const char *path, guint channels, guint *width, guint *height, gsize *stride,
    GError **error)
{
  if (!g_file_test (path, G_FILE_TEST_IS_REGULAR)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s: no such file", path);
    return NULL;
  }
  gst_init (NULL, NULL);
  g_autofree char *desc = g_strdup_printf ("filesrc name=src ! gdkpixbufdec ! videoconvert ! "
                                           "video/x-raw,format=%s ! fakesink name=sink "
                                           "enable-last-sample=true sync=false",
      channels == 3 ? "RGB" : "GRAY8");
  g_autoptr (GError) perr = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &perr);
  if (pipeline == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO,
        "%s: cannot build the decoder (GStreamer's gdkpixbufdec, gst-plugins-good): %s", path,
        perr ? perr->message : "unknown error");
    return NULL;
  }
  GstElement *src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  g_object_set (src, "location", path, NULL);
  guint8 *pixels = NULL;
  GstSample *sample = NULL;
  if (run_to_eos (pipeline, path, error))
    g_object_get (sink, "last-sample", &sample, NULL);
  GstVideoInfo info;
  GstVideoFrame frame;
  if (sample != NULL && gst_video_info_from_caps (&info, gst_sample_get_caps (sample))
      && gst_video_frame_map (&frame, &info, gst_sample_get_buffer (sample), GST_MAP_READ)) {
    *width = GST_VIDEO_INFO_WIDTH (&info);
    *height = GST_VIDEO_INFO_HEIGHT (&info);
    *stride = GST_VIDEO_FRAME_PLANE_STRIDE (&frame, 0);
    pixels = g_memdup2 (GST_VIDEO_FRAME_PLANE_DATA (&frame, 0), *stride * *height);
    gst_video_frame_unmap (&frame);
  } else if (error != NULL && *error == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s: the decoder gave no picture", path);
  }
  if (sample != NULL)
    gst_sample_unref (sample);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  return pixels;
}
