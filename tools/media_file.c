/* Media files for the CNN commands (see media_file.h). Images: filesrc ! gdkpixbufdec
 * (PNG, JPEG, BMP, GIF, WebP; decodebin finds no BMP decoder) or decodebin (other image
 * types) ! videoconvert ! fakesink, whose last sample is the picture. Audio: filesrc !
 * decodebin ! audioconvert ! audioresample ! fakesink, collecting every buffer. */
#include "media_file.h"

#include "cony/error.h"
#include "cony/mediaprobe.h"

#include <gst/base/gsttypefindhelper.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <stdio.h>
#include <string.h>

/* Bytes typefind sees: enough for every image header and the audio containers'. */
#define SNIFF_BYTES 65536

static GMappedFile *
map_file (const char *path, GError **error)
{
  if (!g_file_test (path, G_FILE_TEST_IS_REGULAR)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s: no such file", path);
    return NULL;
  }
  GError *err = NULL;
  GMappedFile *map = g_mapped_file_new (path, FALSE, &err);
  if (map == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s: %s", path, err->message);
    g_error_free (err);
  }
  return map;
}

gboolean
cony_media_file_sniff (const char *path, ConyMediaKind *kind, char **type, GError **error)
{
  g_autoptr (GMappedFile) map = map_file (path, error);
  if (map == NULL)
    return FALSE;
  const guint8 *data = (const guint8 *) g_mapped_file_get_contents (map);
  gsize size = g_mapped_file_get_length (map);
  *type = NULL;
  if (size >= 6 && memcmp (data, "\x93NUMPY", 6) == 0) {
    *kind = CONY_MEDIA_KIND_NPY;
    *type = g_strdup ("application/x-npy");
    return TRUE;
  }
  gst_init (NULL, NULL);
  g_autoptr (GstCaps) caps = size > 0
      ? gst_type_find_helper_for_data (NULL, data, MIN (size, SNIFF_BYTES), NULL)
      : NULL;
  if (caps == NULL || gst_caps_is_empty (caps)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: cannot decode it: its content (%" G_GSIZE_FORMAT
        " bytes) is no image, audio or .npy file that GStreamer's typefind recognises",
        path, size);
    return FALSE;
  }
  const char *name = gst_structure_get_name (gst_caps_get_structure (caps, 0));
  *type = g_strdup (name);
  *kind = g_str_has_prefix (name, "image/") ? CONY_MEDIA_KIND_IMAGE
      : strcmp (name, "audio/x-wav") == 0   ? CONY_MEDIA_KIND_WAV
                                            : CONY_MEDIA_KIND_AUDIO;
  return TRUE;
}

/* Runs @pipeline to EOS or an error; FALSE with @error (@what: "an image", "audio") on
 * the latter. Warnings from the decoders go to stderr, naming the file, when it
 * succeeds (after a failure the error says what matters). */
static gboolean
run_to_eos (GstElement *pipeline, const char *path, const char *what, GError **error)
{
  g_autoptr (GString) warnings = g_string_new (NULL);
  if (gst_element_set_state (pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s: could not start decoding", path);
    return FALSE;
  }
  g_autoptr (GstBus) bus = gst_element_get_bus (pipeline);
  while (TRUE) {
    g_autoptr (GstMessage) msg = gst_bus_timed_pop_filtered (bus, GST_CLOCK_TIME_NONE,
        GST_MESSAGE_EOS | GST_MESSAGE_ERROR | GST_MESSAGE_WARNING);
    g_autoptr (GError) err = NULL;
    switch (GST_MESSAGE_TYPE (msg)) {
      case GST_MESSAGE_WARNING:
        gst_message_parse_warning (msg, &err, NULL);
        g_string_append_printf (warnings, "cony: warning: %s: %s\n", path, err->message);
        break;
      case GST_MESSAGE_ERROR:
        gst_message_parse_error (msg, &err, NULL);
        g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: cannot decode it as %s: %s", path,
            what, err->message);
        return FALSE;
      default: fputs (warnings->str, stderr); return TRUE;
    }
  }
}

static GstElement *
launch (const char *desc, const char *path, GError **error)
{
  g_autoptr (GError) perr = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &perr);
  if (pipeline == NULL || perr != NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s: cannot build the decoder (%s): %s", path,
        desc, perr ? perr->message : "unknown error");
    g_clear_object (&pipeline);
    return NULL;
  }
  GstElement *src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  g_object_set (src, "location", path, NULL);
  gst_object_unref (src);
  return pipeline;
}

static void
stop (GstElement *pipeline)
{
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (pipeline);
}

/* Refuses, before any decoder allocates, what the header says is too big, and what is
 * cut short (a label for a picture that is partly missing would look like any other). */
static gboolean
check_image (const char *path, const guint8 *data, gsize size, guint64 max_pixels, GError **error)
{
  ConyMediaInfo info;
  if (!cony_image_probe (data, size, max_pixels, &info, error)) {
    g_prefix_error (error, "%s: ", path);
    return FALSE;
  }
  if (info.truncated) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: truncated %s (%" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT "): %s", path,
        info.format_name, info.width, info.height, info.missing);
    return FALSE;
  }
  return TRUE;
}

/* gdkpixbufdec for what it has always decoded here (CMYK JPEG, 16-bit and palette PNG,
 * BMP, GIF) and WebP (gdk-pixbuf's loader, webp-pixbuf-loader; filesrc sends no caps,
 * so gdkpixbufdec's template, which lacks WebP, does not matter); decodebin for other
 * image types where GStreamer has a decoder for them. *type: the media type typefind
 * gives, or NULL (g_free() it). */
static const char *
image_decoder (const guint8 *data, gsize size, char **type)
{
  g_autoptr (GstCaps) pixbuf_caps = gst_caps_from_string (
      "image/png; image/jpeg; image/bmp; image/gif; image/webp");
  g_autoptr (GstCaps) caps = size > 0
      ? gst_type_find_helper_for_data (NULL, data, MIN (size, SNIFF_BYTES), NULL)
      : NULL;
  if (caps == NULL || gst_caps_is_empty (caps))
    return "decodebin";
  *type = g_strdup (gst_structure_get_name (gst_caps_get_structure (caps, 0)));
  return gst_caps_can_intersect (caps, pixbuf_caps) ? "gdkpixbufdec" : "decodebin";
}

guint8 *
cony_image_file_load (const char *path, guint channels, guint64 max_pixels, guint *width,
    guint *height, gsize *stride, GError **error)
{
  g_autoptr (GMappedFile) map = map_file (path, error);
  if (map == NULL)
    return NULL;
  const guint8 *data = (const guint8 *) g_mapped_file_get_contents (map);
  gsize size = g_mapped_file_get_length (map);
  if (!check_image (path, data, size, max_pixels, error))
    return NULL;
  gst_init (NULL, NULL);
  g_autofree char *type = NULL;
  const char *decoder = image_decoder (data, size, &type);
  g_autofree char *desc = g_strdup_printf ("filesrc name=src ! %s ! videoconvert ! "
                                           "video/x-raw,format=%s ! fakesink name=sink "
                                           "enable-last-sample=true sync=false",
      decoder, channels == 3 ? "RGB" : "GRAY8");
  GstElement *pipeline = launch (desc, path, error);
  if (pipeline == NULL)
    return NULL;
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  guint8 *pixels = NULL;
  GstSample *sample = NULL;
  g_autofree char *what = g_strdup_printf ("an image (%s; corrupt, or no decoder for it: "
                                           "gdk-pixbuf decodes PNG, JPEG, BMP, GIF and, with "
                                           "webp-pixbuf-loader, WebP)",
      type ? type : "unknown type");
  if (run_to_eos (pipeline, path, what, error))
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
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: the decoder gave no picture", path);
  }
  if (sample != NULL)
    gst_sample_unref (sample);
  gst_object_unref (sink);
  stop (pipeline);
  return pixels;
}

gboolean
cony_media_file_check (const char *path, guint64 max_pixels, char **type, ConyMediaInfo *info,
    GError **error)
{
  ConyMediaKind kind;
  if (!cony_media_file_sniff (path, &kind, type, error))
    return FALSE;
  g_autoptr (GMappedFile) map = map_file (path, error);
  if (map == NULL)
    return FALSE;
  const guint8 *data = (const guint8 *) g_mapped_file_get_contents (map);
  gsize size = g_mapped_file_get_length (map);
  if (kind == CONY_MEDIA_KIND_IMAGE) {
    if (!cony_image_probe (data, size, max_pixels, info, error)) {
      g_prefix_error (error, "%s: ", path);
      return FALSE;
    }
  } else {
    cony_ogg_probe (data, size, info);
  }
  return TRUE;
}

/* Counts decodebin's audio streams (a file without one fails to link: say so). */
static void
on_pad_added (GstElement *dec, GstPad *pad, gpointer data)
{
  (void) dec;
  g_autoptr (GstCaps) caps = gst_pad_get_current_caps (pad);
  if (caps != NULL
      && g_str_has_prefix (gst_structure_get_name (gst_caps_get_structure (caps, 0)), "audio/"))
    (*(guint *) data)++;
}

static void
on_audio (GstElement *sink, GstBuffer *buffer, GstPad *pad, gpointer data)
{
  (void) sink;
  (void) pad;
  GstMapInfo map;
  if (gst_buffer_map (buffer, &map, GST_MAP_READ)) {
    g_array_append_vals ((GArray *) data, map.data, map.size / sizeof (float));
    gst_buffer_unmap (buffer, &map);
  }
}

/* Warns when @path holds less than its headers announce: an Ogg stream whose last page
 * is cut or not its end, or fewer seconds decoded than the container's duration. */
static void
warn_if_truncated (const char *path, GstElement *sink, gsize n, guint rate)
{
  GError *err = NULL;
  g_autoptr (GMappedFile) map = g_mapped_file_new (path, FALSE, &err);
  ConyMediaInfo info;
  if (map != NULL
      && cony_ogg_probe ((const guint8 *) g_mapped_file_get_contents (map),
          g_mapped_file_get_length (map), &info)
      && info.truncated) {
    fprintf (stderr, "cony: warning: %s: truncated Ogg: %s; decoded %.2f s\n", path, info.missing,
        (double) n / rate);
    return;
  }
  g_clear_error (&err);
  gint64 duration = -1;
  double got = (double) n / rate;
  /* asked upstream of the audio sink: the audio stream's, where the demuxer tells */
  if (gst_element_query_duration (sink, GST_FORMAT_TIME, &duration) && duration > 0) {
    double want = (double) duration / GST_SECOND;
    if (want - got > 0.1 && want - got > 0.01 * want)
      fprintf (stderr,
          "cony: warning: %s: truncated: decoded %.2f s of the %.2f s its header announces\n", path,
          got, want);
  }
}

float *
cony_audio_file_load_mono (const char *path, guint rate, gsize *n, GError **error)
{
  if (!g_file_test (path, G_FILE_TEST_IS_REGULAR)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s: no such file", path);
    return NULL;
  }
  gst_init (NULL, NULL);
  g_autofree char *desc = g_strdup_printf ("filesrc name=src ! decodebin name=dec ! audioconvert ! "
                                           "audioresample ! audio/x-raw,format=F32LE,"
                                           "layout=interleaved,channels=1,rate=%u ! "
                                           "fakesink name=sink signal-handoffs=true sync=false",
      rate);
  GstElement *pipeline = launch (desc, path, error);
  if (pipeline == NULL)
    return NULL;
  GArray *samples = g_array_new (FALSE, FALSE, sizeof (float));
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  g_signal_connect (sink, "handoff", G_CALLBACK (on_audio), samples);
  guint audio_streams = 0;
  GstElement *dec = gst_bin_get_by_name (GST_BIN (pipeline), "dec");
  g_signal_connect (dec, "pad-added", G_CALLBACK (on_pad_added), &audio_streams);
  gst_object_unref (dec);
  gboolean ok = run_to_eos (pipeline, path, "audio", error);
  if (!ok && audio_streams == 0) { /* the decoder's own words are about links and flow */
    const char *said = strstr ((*error)->message, "as audio: ");
    g_autofree char *detail = g_strdup (said ? said + strlen ("as audio: ") : (*error)->message);
    g_clear_error (error);
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: cannot decode it as audio: no audio stream found in it (%s)", path, detail);
  }
  if (ok)
    warn_if_truncated (path, sink, samples->len, rate);
  gst_object_unref (sink);
  stop (pipeline);
  *n = samples->len;
  return ok ? (float *) g_array_free (samples, FALSE) : (g_array_free (samples, TRUE), NULL);
}
