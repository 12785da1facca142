/* conyframeembed element tests (GstHarness): token values and timestamps (row
 * padding of RGB frames included), every=k, discontinuities, QoS skipping and
 * its messages, latency, the caps query, wrong caps, bad models.
 *
 * Models: tests/golden/imagecnn/ (gap: 20x22x3 -> 5 with mean/std and a global
 * average pool; tv: 32x32x3 -> 10) and tests/golden/cnn/odd.safetensors (2 channels,
 * refused). Reference outputs are libcony's engine on the same pixels / 255. */
#include "cony/cnn.h"
#include "cony/image.h"

#include <gst/gst.h>
#include <gst/check/gstharness.h>

#include "gsttestutil.h"
#include "testutil.h"
#include <gst/video/video.h>
#include <math.h>
#include <string.h>

#define MS (GST_MSECOND)
#define W 22
#define H 20
#define OUT 5
#define CAPS_GAP "video/x-raw,format=RGB,width=22,height=20,framerate=25/1"

/* A harness around a conyframeembed on tests/golden/imagecnn/@model_file with properties
 * "name", value, ..., NULL. */
static GstHarness *
new_harness (const char *model_file, const gchar *first_prop, ...)
{
  char *path = cony_test_golden_path ("imagecnn", model_file);
  va_list ap;
  va_start (ap, first_prop);
  GstHarness *h = cony_test_harness_new_valist ("conyframeembed", path, first_prop, ap);
  va_end (ap);
  g_free (path);
  return h;
}

/* A W x H RGB frame with GStreamer's row padding (stride 68 for 66 bytes of pixels),
 * pixels and padding from @seed. */
static GstBuffer *
make_frame (guint32 seed, GstClockTime pts, GstClockTime dur)
{
  GstVideoInfo vi;
  gst_video_info_set_format (&vi, GST_VIDEO_FORMAT_RGB, W, H);
  g_assert_cmpint (GST_VIDEO_INFO_PLANE_STRIDE (&vi, 0), ==, 68);
  GstBuffer *buf = cony_test_rgb_frame (W, H, seed, pts, dur);
  g_assert_cmpuint (gst_buffer_get_size (buf), ==, vi.size);
  return buf;
}

/* The engine's output for make_frame (@seed). */
static void
reference (ConyCnn *cnn, guint32 seed, float *out)
{
  GstBuffer *buf = make_frame (seed, 0, 0);
  GstMapInfo map;
  gst_buffer_map (buf, &map, GST_MAP_READ);
  float in[H * W * 3];
  for (guint y = 0; y < H; y++)
    for (guint i = 0; i < W * 3; i++)
      in[y * W * 3 + i] = map.data[y * 68 + i] / 255.0f;
  gst_buffer_unmap (buf, &map);
  gst_buffer_unref (buf);
  cony_cnn_forward (cnn, in, out);
}

/* Pulls one token and checks PTS, duration, DISCONT, OFFSET and (when @cnn) the values
 * for frame @seed. */
static void
check_token (GstHarness *h, ConyCnn *cnn, guint32 seed, GstClockTime pts, GstClockTime dur,
    gboolean discont, guint64 offset)
{
  GstBuffer *buf = gst_harness_try_pull (h);
  g_assert_nonnull (buf);
  g_assert_cmpuint (GST_BUFFER_PTS (buf), ==, pts);
  g_assert_cmpuint (GST_BUFFER_DURATION (buf), ==, dur);
  g_assert_cmpint (GST_BUFFER_IS_DISCONT (buf), ==, discont);
  g_assert_cmpuint (GST_BUFFER_OFFSET (buf), ==, offset);
  g_assert_cmpuint (gst_buffer_get_size (buf), ==, OUT * sizeof (float));
  if (cnn) {
    float want[OUT];
    reference (cnn, seed, want);
    GstMapInfo map;
    gst_buffer_map (buf, &map, GST_MAP_READ);
    const float *got = (const float *) map.data;
    for (guint j = 0; j < OUT; j++)
      g_assert_cmpfloat_with_epsilon (got[j], want[j], 1e-5 * MAX (1.0, fabs (want[j])));
    gst_buffer_unmap (buf, &map);
  }
  gst_buffer_unref (buf);
}

static void
check_src_caps (GstHarness *h, const char *dims, gint rn, gint rd)
{
  GstCaps *caps = gst_pad_get_current_caps (h->sinkpad);
  g_assert_nonnull (caps);
  GstStructure *s = gst_caps_get_structure (caps, 0);
  g_assert_cmpstr (gst_structure_get_name (s), ==, "other/tensors");
  g_assert_cmpstr (gst_structure_get_string (s, "dimensions"), ==, dims);
  g_assert_cmpstr (gst_structure_get_string (s, "types"), ==, "float32");
  gint n, d;
  g_assert_true (gst_structure_get_fraction (s, "framerate", &n, &d));
  g_assert_cmpint (n, ==, rn);
  g_assert_cmpint (d, ==, rd);
  gst_caps_unref (caps);
}

/* ------------------------------------------------------------------------ */

static void
test_values_and_timestamps (void)
{
  ConyCnn *cnn = cony_test_load_golden_cnn ("imagecnn", "gap.safetensors");
  GstHarness *h = new_harness ("gap.safetensors", NULL);
  gst_harness_set_src_caps_str (h, CAPS_GAP);
  check_src_caps (h, "5:1", 25, 1);
  for (guint i = 0; i < 6; i++)
    g_assert_cmpint (gst_harness_push (h, make_frame (100 + i, 1000 * MS + i * 40 * MS, 40 * MS)),
        ==, GST_FLOW_OK);
  for (guint i = 0; i < 6; i++)
    check_token (h, cnn, 100 + i, 1000 * MS + i * 40 * MS, 40 * MS, i == 0, i);
  g_assert_null (gst_harness_try_pull (h));
  /* A frame without duration: one frame at the caps' 25 fps. */
  g_assert_cmpint (gst_harness_push (h, make_frame (7, 1240 * MS, GST_CLOCK_TIME_NONE)), ==,
      GST_FLOW_OK);
  check_token (h, cnn, 7, 1240 * MS, 40 * MS, FALSE, 6);
  gst_harness_teardown (h);
  cony_cnn_free (cnn);
}

static void
test_every (void)
{
  ConyCnn *cnn = cony_test_load_golden_cnn ("imagecnn", "gap.safetensors");
  GstHarness *h = new_harness ("gap.safetensors", "every", 3, NULL);
  guint every = 0;
  g_object_get (h->element, "every", &every, NULL);
  g_assert_cmpuint (every, ==, 3);
  gst_harness_set_src_caps_str (h, CAPS_GAP);
  check_src_caps (h, "5:1", 25, 3);
  for (guint i = 0; i < 10; i++)
    gst_harness_push (h, make_frame (i, i * 40 * MS, 40 * MS));
  g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, 4); /* frames 0, 3, 6, 9 */
  for (guint t = 0; t < 4; t++)
    check_token (h, cnn, 3 * t, 3 * t * 40 * MS, 120 * MS, t == 0, t);
  /* Frame 10 is not due; a DISCONT frame restarts the count and is embedded. */
  gst_harness_push (h, make_frame (10, 400 * MS, 40 * MS));
  g_assert_null (gst_harness_try_pull (h));
  GstBuffer *d = make_frame (50, 2000 * MS, 40 * MS);
  GST_BUFFER_FLAG_SET (d, GST_BUFFER_FLAG_DISCONT);
  gst_harness_push (h, d);
  check_token (h, cnn, 50, 2000 * MS, 120 * MS, TRUE, 0);
  gst_harness_push (h, make_frame (51, 2040 * MS, 40 * MS));
  gst_harness_push (h, make_frame (52, 2080 * MS, 40 * MS));
  gst_harness_push (h, make_frame (53, 2120 * MS, 40 * MS));
  check_token (h, cnn, 53, 2120 * MS, 120 * MS, FALSE, 1);
  g_assert_null (gst_harness_try_pull (h));
  gst_harness_teardown (h);
  cony_cnn_free (cnn);
}

/* Counts QoS messages on @bus; returns the last one's dropped count. */
static guint
pop_qos (GstBus *bus, guint64 *dropped, guint64 *processed)
{
  guint n = 0;
  GstMessage *msg;
  while ((msg = gst_bus_pop_filtered (bus, GST_MESSAGE_QOS)) != NULL) {
    GstFormat fmt;
    gst_message_parse_qos_stats (msg, &fmt, processed, dropped);
    g_assert_cmpint (fmt, ==, GST_FORMAT_BUFFERS);
    gst_message_unref (msg);
    n++;
  }
  return n;
}

static void
test_qos (void)
{
  GstHarness *h = new_harness ("gap.safetensors", NULL);
  GstBus *bus = cony_test_attach_bus (h);
  gboolean qos = FALSE;
  g_object_get (h->element, "qos", &qos, NULL);
  g_assert_true (qos);
  gst_harness_set_src_caps_str (h, CAPS_GAP);
  for (guint i = 0; i < 3; i++)
    gst_harness_push (h, make_frame (i, i * 40 * MS, 40 * MS));
  /* Downstream reports the frame at 120 ms 60 ms late: frames up to 120 + 2 x 60 = 240 ms
   * are not embedded. */
  g_assert_true (gst_harness_push_upstream_event (h,
      gst_event_new_qos (GST_QOS_TYPE_UNDERFLOW, 1.5, 60 * MS, 120 * MS)));
  for (guint i = 3; i < 9; i++)
    gst_harness_push (h, make_frame (i, i * 40 * MS, 40 * MS));
  GstClockTime want[] = { 0, 40 * MS, 80 * MS, 280 * MS, 320 * MS };
  g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, G_N_ELEMENTS (want));
  for (guint t = 0; t < G_N_ELEMENTS (want); t++)
    check_token (h, NULL, 0, want[t], 40 * MS, t == 0, t); /* 80 + 40 < 280: a hole */
  guint64 dropped = 0, processed = 0;
  g_assert_cmpuint (pop_qos (bus, &dropped, &processed), ==, 4); /* 120, 160, 200, 240 */
  g_assert_cmpuint (dropped, ==, 4);
  g_assert_cmpuint (processed, ==, 3);

  /* qos=false: a new lateness report is ignored. */
  g_object_set (h->element, "qos", FALSE, NULL);
  gst_harness_push_upstream_event (h,
      gst_event_new_qos (GST_QOS_TYPE_UNDERFLOW, 1.5, 500 * MS, 360 * MS));
  for (guint i = 9; i < 12; i++)
    gst_harness_push (h, make_frame (i, i * 40 * MS, 40 * MS));
  g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, 3);
  g_assert_cmpuint (pop_qos (bus, &dropped, &processed), ==, 0);
  for (guint t = 0; t < 3; t++)
    gst_buffer_unref (gst_harness_pull (h));

  /* qos=true again, but a flush forgets the old report (it said: late up to 1360 ms). */
  g_object_set (h->element, "qos", TRUE, NULL);
  cony_test_flush (h);
  gst_harness_push (h, make_frame (12, 480 * MS, 40 * MS));
  check_token (h, NULL, 0, 480 * MS, 40 * MS, TRUE, 0);

  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
}

/* Only frames due for embedding are checked against QoS (and reported): with every=2 the
 * late frames between them are skipped anyway. */
static void
test_qos_every (void)
{
  GstHarness *h = new_harness ("gap.safetensors", "every", 2, NULL);
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h, CAPS_GAP);
  /* a token lasts 2 frames but embeds one: its input ends a frame (1/25 s) early */
  GstCaps *caps = gst_pad_get_current_caps (h->sinkpad);
  gint ln = 0, ld = 0;
  g_assert_true (
      gst_structure_get_fraction (gst_caps_get_structure (caps, 0), "lookahead", &ln, &ld));
  g_assert_cmpint (ln, ==, -1);
  g_assert_cmpint (ld, ==, 25);
  gst_caps_unref (caps);
  gst_harness_push (h, make_frame (0, 0, 40 * MS));
  gst_harness_push_upstream_event (h,
      gst_event_new_qos (GST_QOS_TYPE_UNDERFLOW, 1.2, 50 * MS, 100 * MS)); /* to 200 ms */
  for (guint i = 1; i < 8; i++)
    gst_harness_push (h, make_frame (i, i * 40 * MS, 40 * MS));
  /* due: 0, 80, 160, 240 ms; 80 and 160 are late; 240 is output, 80 ms long */
  check_token (h, NULL, 0, 0, 80 * MS, TRUE, 0);
  check_token (h, NULL, 0, 240 * MS, 80 * MS, FALSE, 1);
  g_assert_null (gst_harness_try_pull (h));
  guint64 dropped = 0, processed = 0;
  g_assert_cmpuint (pop_qos (bus, &dropped, &processed), ==, 2);
  g_assert_cmpuint (dropped, ==, 2);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
}

/* The element adds no latency: the query answers upstream's values. */
static void
test_latency (void)
{
  GstHarness *h = new_harness ("gap.safetensors", "every", 4, NULL);
  gst_harness_set_src_caps_str (h, CAPS_GAP);
  gst_harness_set_upstream_latency (h, 0);
  g_assert_cmpuint (gst_harness_query_latency (h), ==, 0);
  gst_harness_set_upstream_latency (h, 33 * MS);
  g_assert_cmpuint (gst_harness_query_latency (h), ==, 33 * MS);
  gst_harness_teardown (h);
}

/* The caps query puts the model's frame size first (videoscale picks it) and, without
 * patches, accepts frames of other sizes too (resized by the element); the format is
 * fixed. */
static void
test_caps_query (void)
{
  GstHarness *h = new_harness ("tv.safetensors", NULL);
  gst_harness_play (h);
  GstPad *sinkpad = gst_element_get_static_pad (h->element, "sink");
  GstCaps *caps = gst_pad_query_caps (sinkpad, NULL);
  GstStructure *s = gst_caps_get_structure (caps, 0);
  gint w = 0, hh = 0;
  g_assert_true (gst_structure_get_int (s, "width", &w));
  g_assert_true (gst_structure_get_int (s, "height", &hh));
  g_assert_cmpint (w, ==, 32);
  g_assert_cmpint (hh, ==, 32);
  g_assert_cmpstr (gst_structure_get_string (s, "format"), ==, "RGB");
  gst_caps_unref (caps);
  GstCaps *other = gst_caps_from_string (
      "video/x-raw,format=RGB,width=64,height=48,framerate=30/1");
  g_assert_true (gst_pad_query_accept_caps (sinkpad, other));
  gst_caps_unref (other);
  GstCaps *wrong = gst_caps_from_string (
      "video/x-raw,format=GRAY8,width=32,height=32,framerate=30/1");
  g_assert_false (gst_pad_query_accept_caps (sinkpad, wrong));
  gst_caps_unref (wrong);
  gst_object_unref (sinkpad);
  gst_harness_teardown (h);
}

/* Patch mode: patches-x=3 patches-y=2 with the 22x20 gap model takes 66x40 frames
 * (stride 200 for 198 bytes of pixels) and gives 6 tokens per frame buffer, tile by
 * tile from the top left, each the engine's output on that tile; caps D:6 at the
 * frame rate; PTS, duration and OFFSET per frame. */
static void
test_patches (void)
{
  const guint PX = 3, PY = 2, K = PX * PY, FW = W * PX, FH = H * PY;
  ConyCnn *cnn = cony_test_load_golden_cnn ("imagecnn", "gap.safetensors");
  GstHarness *h = new_harness ("gap.safetensors", "patches-x", PX, "patches-y", PY, NULL);
  gst_harness_play (h);
  /* the caps query announces the grid's frame size */
  GstPad *sinkpad = gst_element_get_static_pad (h->element, "sink");
  GstCaps *qc = gst_pad_query_caps (sinkpad, NULL);
  gint qw = 0, qh = 0;
  g_assert_true (gst_structure_get_int (gst_caps_get_structure (qc, 0), "width", &qw));
  g_assert_true (gst_structure_get_int (gst_caps_get_structure (qc, 0), "height", &qh));
  g_assert_cmpint (qw, ==, FW);
  g_assert_cmpint (qh, ==, FH);
  gst_caps_unref (qc);
  gst_object_unref (sinkpad);

  gst_harness_set_src_caps_str (h, "video/x-raw,format=RGB,width=66,height=40,framerate=25/1");
  check_src_caps (h, "5:6", 25, 1);
  GstVideoInfo vi;
  gst_video_info_set_format (&vi, GST_VIDEO_FORMAT_RGB, FW, FH);
  gsize stride = GST_VIDEO_INFO_PLANE_STRIDE (&vi, 0);
  g_assert_cmpuint (stride, ==, 200);
  for (guint f = 0; f < 3; f++) {
    guint8 *data = g_malloc (vi.size);
    GRand *r = g_rand_new_with_seed (300 + f);
    for (gsize i = 0; i < vi.size; i++)
      data[i] = (guint8) g_rand_int_range (r, 0, 256);
    g_rand_free (r);
    GstBuffer *in = gst_buffer_new_wrapped (g_memdup2 (data, vi.size), vi.size);
    GST_BUFFER_PTS (in) = 500 * MS + f * 40 * MS;
    GST_BUFFER_DURATION (in) = 40 * MS;
    g_assert_cmpint (gst_harness_push (h, in), ==, GST_FLOW_OK);

    GstBuffer *out = gst_harness_try_pull (h);
    g_assert_nonnull (out);
    g_assert_cmpuint (GST_BUFFER_PTS (out), ==, 500 * MS + f * 40 * MS);
    g_assert_cmpuint (GST_BUFFER_DURATION (out), ==, 40 * MS);
    g_assert_cmpuint (GST_BUFFER_OFFSET (out), ==, (guint64) f * K);
    g_assert_cmpuint (GST_BUFFER_OFFSET_END (out), ==, (guint64) (f + 1) * K);
    g_assert_cmpint (GST_BUFFER_IS_DISCONT (out), ==, f == 0);
    g_assert_cmpuint (gst_buffer_get_size (out), ==, K * OUT * sizeof (float));
    GstMapInfo map;
    gst_buffer_map (out, &map, GST_MAP_READ);
    const float *got = (const float *) map.data;
    for (guint ty = 0; ty < PY; ty++)
      for (guint tx = 0; tx < PX; tx++) {
        float tile[H * W * 3], want[OUT];
        for (guint y = 0; y < H; y++)
          for (guint i = 0; i < W * 3; i++)
            tile[y * W * 3 + i] = data[(ty * H + y) * stride + tx * W * 3 + i] / 255.0f;
        cony_cnn_forward (cnn, tile, want);
        const float *tok = got + (ty * PX + tx) * OUT;
        for (guint j = 0; j < OUT; j++)
          g_assert_cmpfloat_with_epsilon (tok[j], want[j], 1e-5 * MAX (1.0, fabs (want[j])));
      }
    /* the tiles differ, so the tokens do: not one token repeated */
    g_assert_cmpfloat (fabs (got[0] - got[OUT]), >, 1e-6);
    gst_buffer_unmap (out, &map);
    gst_buffer_unref (out);
    g_free (data);
  }
  g_assert_null (gst_harness_try_pull (h));
  gst_harness_teardown (h);

  /* the single-tile size is refused in patch mode */
  h = new_harness ("gap.safetensors", "patches-x", PX, "patches-y", PY, NULL);
  gst_harness_play (h);
  cony_test_assert_caps_refused (h, CAPS_GAP, NULL);
  cony_cnn_free (cnn);
}

/* A @w x @h RGB frame, rows @stride bytes apart (a GstVideoMeta says so when the
 * stride is not GStreamer's default), pixels and padding from @seed. */
static GstBuffer *
make_strided_frame (guint w, guint h, gsize stride, guint32 seed, GstClockTime pts)
{
  GstBuffer *buf = gst_buffer_new_allocate (NULL, stride * h, NULL);
  GstMapInfo map;
  gst_buffer_map (buf, &map, GST_MAP_WRITE);
  GRand *r = g_rand_new_with_seed (seed);
  for (gsize i = 0; i < map.size; i++)
    map.data[i] = (guint8) g_rand_int_range (r, 0, 256);
  g_rand_free (r);
  gst_buffer_unmap (buf, &map);
  GstVideoInfo vi;
  gst_video_info_set_format (&vi, GST_VIDEO_FORMAT_RGB, w, h);
  if ((gsize) GST_VIDEO_INFO_PLANE_STRIDE (&vi, 0) != stride) {
    gsize offset[GST_VIDEO_MAX_PLANES] = { 0 };
    gint strides[GST_VIDEO_MAX_PLANES] = { (gint) stride };
    gst_buffer_add_video_meta_full (buf, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_FORMAT_RGB, w, h, 1,
        offset, strides);
  }
  GST_BUFFER_PTS (buf) = pts;
  GST_BUFFER_DURATION (buf) = 40 * MS;
  return buf;
}

/* Frames of extreme sizes and strides, one caps change after the other: 1x1 (upscaled),
 * 4097x3 and 3x4097 (a 3-pixel crop), odd widths with GStreamer's row padding and with
 * a larger stride from a video meta: each token is the engine's output on the frame
 * cropped and resized by cony_image_resize from the same rows, finite. */
static void
test_extreme_sizes (void)
{
  static const struct {
    guint w, h, extra;
  } sizes[] = { { 1, 1, 0 }, { 4097, 3, 0 }, { 3, 4097, 0 }, { 23, 21, 0 }, { 23, 21, 13 },
    { 1, 1, 5 }, { 22, 20, 0 }, { 22, 20, 7 }, { 45, 41, 1 } };
  ConyCnn *cnn = cony_test_load_golden_cnn ("imagecnn", "gap.safetensors");
  GstHarness *h = new_harness ("gap.safetensors", NULL);
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++) {
    guint w = sizes[i].w, hh = sizes[i].h;
    GstVideoInfo vi;
    gst_video_info_set_format (&vi, GST_VIDEO_FORMAT_RGB, w, hh);
    gsize stride = GST_VIDEO_INFO_PLANE_STRIDE (&vi, 0) + sizes[i].extra;
    g_autofree char
        *caps = g_strdup_printf ("video/x-raw,format=RGB,width=%u,height=%u,framerate=25/1", w, hh);
    gst_harness_set_src_caps_str (h, caps);
    GstBuffer *frame = make_strided_frame (w, hh, stride, 300 + i, i * 40 * MS);
    float in[H * W * 3], want[OUT];
    GstMapInfo map;
    gst_buffer_map (frame, &map, GST_MAP_READ);
    cony_image_resize (map.data, w, hh, stride, 3, CONY_IMAGE_CROP_CENTER, W, H, in, NULL);
    gst_buffer_unmap (frame, &map);
    cony_cnn_forward (cnn, in, want);
    g_assert_cmpint (gst_harness_push (h, frame), ==, GST_FLOW_OK);
    GstBuffer *tok = gst_harness_try_pull (h);
    g_assert_nonnull (tok);
    gst_buffer_map (tok, &map, GST_MAP_READ);
    g_assert_cmpuint (map.size, ==, OUT * sizeof (float));
    const float *got = (const float *) map.data;
    for (guint j = 0; j < OUT; j++) {
      g_assert_true (isfinite (got[j]));
      g_assert_cmpfloat_with_epsilon (got[j], want[j], 1e-5 * MAX (1.0, fabs (want[j])));
    }
    gst_buffer_unmap (tok, &map);
    gst_buffer_unref (tok);
  }
  gst_harness_teardown (h);
  cony_cnn_free (cnn);
}

/* framerate=0/1 (variable rate): token caps at rate 0/1, no lookahead; a token lasts
 * `every` times its frame's own duration; a frame without duration gives a token
 * without duration (there is no rate to take one from). */
static void
test_variable_framerate (void)
{
  GstHarness *h = new_harness ("gap.safetensors", "every", 2, NULL);
  gst_harness_set_src_caps_str (h, "video/x-raw,format=RGB,width=22,height=20,framerate=0/1");
  check_src_caps (h, "5:1", 0, 1);
  GstCaps *caps = gst_pad_get_current_caps (h->sinkpad);
  g_assert_false (gst_structure_has_field (gst_caps_get_structure (caps, 0), "lookahead"));
  gst_caps_unref (caps);
  static const GstClockTime pts[] = { 0, 10, 50, 200, 210, 400 },
                            dur[] = { 10, 40, 150, 10, 190, 0 };
  for (guint i = 0; i < G_N_ELEMENTS (pts); i++) {
    GstBuffer *f = make_frame (i, pts[i] * MS, dur[i] ? dur[i] * MS : GST_CLOCK_TIME_NONE);
    g_assert_cmpint (gst_harness_push (h, f), ==, GST_FLOW_OK);
  }
  check_token (h, NULL, 0, 0, 20 * MS, TRUE, 0);
  check_token (h, NULL, 0, 50 * MS, 300 * MS, FALSE, 1);
  check_token (h, NULL, 0, 210 * MS, 380 * MS, FALSE, 2);
  g_assert_null (gst_harness_try_pull (h));
  /* the seventh frame (due) has no duration: nor has its token; the eighth is not due */
  gst_harness_push (h, make_frame (7, 600 * MS, GST_CLOCK_TIME_NONE));
  gst_harness_push (h, make_frame (8, 700 * MS, GST_CLOCK_TIME_NONE));
  check_token (h, NULL, 0, 600 * MS, GST_CLOCK_TIME_NONE, FALSE, 3);
  g_assert_null (gst_harness_try_pull (h));
  gst_harness_teardown (h);
}

/* every at its maximum (2^20): one token in 2^20 frames, lasting 2^20 frames, and a
 * lookahead of -(2^20 - 1) frames in the caps; at 30000/1001 fps too. */
static void
test_every_max (void)
{
  const guint k = 1 << 20;
  GstHarness *h = new_harness ("gap.safetensors", "every", k, NULL);
  gst_harness_set_src_caps_str (h,
      "video/x-raw,format=RGB,width=22,height=20,framerate=30000/1001");
  check_src_caps (h, "5:1", 1875, 1001 * (k / 16)); /* 30000 / (1001 k), reduced */
  GstCaps *caps = gst_pad_get_current_caps (h->sinkpad);
  gint n, d;
  g_assert_true (
      gst_structure_get_fraction (gst_caps_get_structure (caps, 0), "lookahead", &n, &d));
  g_assert_cmpint ((gint64) n * 30000, ==, -(gint64) (k - 1) * 1001 * d);
  gst_caps_unref (caps);
  for (guint i = 0; i < 3; i++)
    gst_harness_push (h, make_frame (i, i * 40 * MS, 40 * MS));
  check_token (h, NULL, 0, 0, (GstClockTime) k * 40 * MS, TRUE, 0);
  g_assert_null (gst_harness_try_pull (h));
  gst_harness_teardown (h);
}

/* The patch grid at its limits: 64 x 1 (a 1408 x 20 frame) gives 64 tokens in one
 * buffer, 64 x 64 (1408 x 1280) 4096: each tile's token equals the engine's output on
 * that tile. */
static void
test_patches_max (void)
{
  static const guint grids[][2] = { { 64, 1 }, { 1, 64 }, { 64, 64 } };
  ConyCnn *cnn = cony_test_load_golden_cnn ("imagecnn", "gap.safetensors");
  for (guint g = 0; g < G_N_ELEMENTS (grids); g++) {
    guint px = grids[g][0], py = grids[g][1], fw = px * W, fh = py * H;
    GstHarness *h = new_harness ("gap.safetensors", "patches-x", px, "patches-y", py, NULL);
    g_autofree char *caps =
        g_strdup_printf ("video/x-raw,format=RGB,width=%u,height=%u,framerate=25/1", fw, fh);
    gst_harness_set_src_caps_str (h, caps);
    GstBuffer *frame = cony_test_rgb_frame (fw, fh, 77 + g, 0, 40 * MS);
    gsize stride = GST_ROUND_UP_4 (fw * 3);
    GstMapInfo fmap;
    gst_buffer_map (frame, &fmap, GST_MAP_READ);
    guint8 *pixels = g_memdup2 (fmap.data, fmap.size);
    gst_buffer_unmap (frame, &fmap);
    g_assert_cmpint (gst_harness_push (h, frame), ==, GST_FLOW_OK);
    GstBuffer *tok = gst_harness_try_pull (h);
    g_assert_nonnull (tok);
    GstMapInfo map;
    gst_buffer_map (tok, &map, GST_MAP_READ);
    g_assert_cmpuint (map.size, ==, (gsize) px * py * OUT * sizeof (float));
    /* the first, a middle and the last tile */
    guint tiles[] = { 0, (px * py) / 2 + px / 3, px * py - 1 };
    for (guint t = 0; t < G_N_ELEMENTS (tiles); t++) {
      guint tx = tiles[t] % px, ty = tiles[t] / px;
      float in[H * W * 3], want[OUT];
      for (guint y = 0; y < H; y++)
        for (guint i = 0; i < W * 3; i++)
          in[y * W * 3 + i] = pixels[(gsize) (ty * H + y) * stride + tx * W * 3 + i] / 255.0f;
      cony_cnn_forward (cnn, in, want);
      const float *got = (const float *) map.data + (gsize) tiles[t] * OUT;
      for (guint j = 0; j < OUT; j++)
        g_assert_cmpfloat_with_epsilon (got[j], want[j], 1e-5 * MAX (1.0, fabs (want[j])));
    }
    gst_buffer_unmap (tok, &map);
    gst_buffer_unref (tok);
    g_free (pixels);
    gst_harness_teardown (h);
  }
  cony_cnn_free (cnn);
}

static void
test_wrong_caps_refused (void)
{
  const gchar *bad[] = {
    "video/x-raw,format=GRAY8,width=22,height=20,framerate=25/1", /* 1 channel for an RGB model */
    "video/x-raw,format=BGRx,width=22,height=20,framerate=25/1",  /* not in the template */
    "other/tensors,format=static,num_tensors=1,types=float32,dimensions=(string)66:20,framerate=25/1",
  };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    GstHarness *h = new_harness ("gap.safetensors", NULL);
    gst_harness_play (h);
    cony_test_assert_caps_refused (h, bad[i], NULL);
  }
  /* With patches the frame must be the grid's size exactly. */
  GstHarness *h = new_harness ("gap.safetensors", "patches-x", 2, NULL);
  gst_harness_play (h);
  cony_test_assert_caps_refused (h, "video/x-raw,format=RGB,width=45,height=20,framerate=25/1",
      NULL);
}

/* Refused frames are named (#46.5): what the model takes (one tile: any size in its
 * format, resized; a grid of patches: its size exactly), what upstream offers, and
 * whether videoscale or videoconvert is missing (CORE/NEGOTIATION). */
static void
test_refusal_named (void)
{
  static const struct {
    guint patches_x;
    const char *caps, *message;
  } cases[] = {
    { 1, "video/x-raw,format=I420,width=640,height=480,framerate=30/1",
        "conyframeembed takes RGB video of any size (resized to 22x20), got 640x480 I420 video: "
        "add videoconvert before it" },
    { 1, "video/x-raw,format=GRAY8,width=22,height=20,framerate=25/1",
        "conyframeembed takes RGB video of any size (resized to 22x20), got 22x20 GRAY8 video: "
        "add videoconvert before it" },
    { 2, "video/x-raw,format=RGB,width=45,height=20,framerate=25/1",
        "conyframeembed takes 44x20 RGB video, got 45x20 RGB video: add videoscale before it" },
    { 2, "video/x-raw,format=I420,width=640,height=480,framerate=30/1",
        "conyframeembed takes 44x20 RGB video, got 640x480 I420 video: add videoscale and "
        "videoconvert before it" },
    { 1, "audio/x-raw,format=F32LE,rate=16000,channels=1,layout=interleaved",
        "conyframeembed takes RGB video of any size (resized to 22x20), got audio/x-raw: decode "
        "and convert first (decodebin ! videoconvert)" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    for (guint by_query = 0; by_query < 2; by_query++) {
      GstHarness *h = new_harness ("gap.safetensors", "patches-x", cases[i].patches_x, NULL);
      gst_harness_play (h);
      cony_test_assert_caps_named (h, cases[i].caps, by_query, cases[i].message);
    }
}

static void
test_bad_models (void)
{
  char *npy = cony_test_golden_path ("imagecnn", "gap_input.npy");
  char *odd = cony_test_golden_path ("cnn", "odd.safetensors");
  char *good = cony_test_golden_path ("imagecnn", "gap.safetensors");
  struct {
    const char *model;
    const char *in_message;
  } cases[] = {
    { NULL, "No model" },
    { "/nonexistent/frame.safetensors", "/nonexistent/frame.safetensors" },
    { npy, "gap_input.npy" },
    { odd, "input channels" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    GstElement *el = cony_test_element_new ("conyframeembed", cases[i].model, NULL);
    g_test_message ("case %u", i);
    g_error_free (cony_test_assert_start_fails (el, (const char *[]){ cases[i].in_message, NULL }));
    g_object_set (el, "model", good, NULL);
    cony_test_assert_starts (el);
    gst_object_unref (el);
  }
  g_free (npy);
  g_free (odd);
  g_free (good);
}

/* model, every and the patch grid are read on READY->PAUSED: set while PLAYING they are
 * refused and the old value reads back; in READY they take (#31.5). */
static void
test_ready_only_properties (void)
{
  const char *props[] = { "model", "/tmp/other.safetensors", "every", "5", "patches-x", "2", NULL };
  char *path = cony_test_golden_path ("imagecnn", "gap.safetensors");
  cony_test_assert_ready_only_props ("conyframeembed", path, CAPS_GAP, props);
  g_free (path);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/conyframeembed/values-and-timestamps", test_values_and_timestamps);
  g_test_add_func ("/conyframeembed/every", test_every);
  g_test_add_func ("/conyframeembed/qos", test_qos);
  g_test_add_func ("/conyframeembed/qos-every", test_qos_every);
  g_test_add_func ("/conyframeembed/latency", test_latency);
  g_test_add_func ("/conyframeembed/caps-query", test_caps_query);
  g_test_add_func ("/conyframeembed/wrong-caps", test_wrong_caps_refused);
  g_test_add_func ("/conyframeembed/refusal-named", test_refusal_named);
  g_test_add_func ("/conyframeembed/bad-models", test_bad_models);
  g_test_add_func ("/conyframeembed/patches", test_patches);
  g_test_add_func ("/conyframeembed/ready-only-properties", test_ready_only_properties);
  g_test_add_func ("/conyframeembed/extreme-sizes", test_extreme_sizes);
  g_test_add_func ("/conyframeembed/variable-framerate", test_variable_framerate);
  g_test_add_func ("/conyframeembed/every-max", test_every_max);
  g_test_add_func ("/conyframeembed/patches-max", test_patches_max);
  return g_test_run ();
}
