/* The shipped ImageNet MobileNet-v2 (models/imagenet/mobilenet_v2.safetensors) in
 * conyframeembed (GstHarness), on the committed 224x224 frames of
 * tests/golden/imagenet/ (training/verify_imagenet_armnn.py made them and ran the
 * original .tflite on ArmNN):
 *  - each frame's token (output=scores) on the integer path (precision=auto: the file
 *    is quantised) is the integer numpy reference's (int8.npy, TFLite's arithmetic) bit
 *    for bit; with precision=float it is the float64 numpy reference's scores of the
 *    converted file (ref.npy) within 1e-4; both have ArmNN's top-1 (armnn.npy), and
 *    the element's message names that label;
 *  - frames of odd sizes with padded row strides are centre-cropped and resized as
 *    cony_image_resize() does, and still give the label;
 *  - output=embedding gives the 1280-d pooled embedding and no label message. */
#include "cony/cnn.h"
#include "cony/image.h"

#include <gst/check/gstharness.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <math.h>
#include <string.h>

#include "gsttestutil.h"
#include "testutil.h"

#define SIZE 224
#define CLASSES 1001
#define EMBEDDING 1280

/* The committed golden frames, in the rows' order of armnn.npy and ref.npy. */
static const char *frames[] = { "cat", "grace_hopper", "parrot", "baboon" };
static const char *labels[] = { "Egyptian cat", "military uniform", "macaw", "baboon" };

static char *
model_path (void)
{
  return cony_test_model_path ("imagenet", "mobilenet_v2.safetensors");
}

/* Golden frame @name as packed 224x224 RGB bytes (decoded by pngdec). */
static guint8 *
load_frame (const char *name)
{
  g_autofree char *file = g_strdup_printf ("%s.png", name);
  g_autofree char *path = cony_test_golden_path ("imagenet/frames", file);
  gchar *png = NULL;
  gsize n = 0;
  g_assert_true (g_file_get_contents (path, &png, &n, NULL));
  GstHarness *h = gst_harness_new_parse ("pngdec ! videoconvert");
  gst_harness_set_src_caps_str (h, "image/png");
  gst_harness_set_sink_caps_str (h, "video/x-raw,format=RGB,width=224,height=224");
  g_assert_cmpint (gst_harness_push (h, gst_buffer_new_wrapped (png, n)), ==, GST_FLOW_OK);
  gst_harness_push_event (h, gst_event_new_eos ());
  GstBuffer *buf = gst_harness_pull (h);
  GstVideoInfo vi;
  gst_video_info_set_format (&vi, GST_VIDEO_FORMAT_RGB, SIZE, SIZE);
  GstVideoFrame vf;
  g_assert_true (gst_video_frame_map (&vf, &vi, buf, GST_MAP_READ));
  guint8 *rgb = g_new (guint8, SIZE * SIZE * 3);
  for (int y = 0; y < SIZE; y++)
    memcpy (rgb + y * SIZE * 3,
        (guint8 *) GST_VIDEO_FRAME_PLANE_DATA (&vf, 0) + y * GST_VIDEO_FRAME_PLANE_STRIDE (&vf, 0),
        SIZE * 3);
  gst_video_frame_unmap (&vf);
  gst_buffer_unref (buf);
  gst_harness_teardown (h);
  return rgb;
}

/* A @w x @h RGB frame with rows @stride bytes apart (the padding filled with 0xEE) whose
 * pixels are @rgb's (packed, @w x @h). */
static GstBuffer *
frame_buffer (const guint8 *rgb, int w, int h, int stride)
{
  guint8 *data = g_malloc (stride * h);
  memset (data, 0xEE, stride * h);
  for (int y = 0; y < h; y++)
    memcpy (data + y * stride, rgb + y * w * 3, w * 3);
  GstBuffer *buf = gst_buffer_new_wrapped (data, stride * h);
  gsize offset[4] = { 0 };
  gint strides[4] = { stride };
  gst_buffer_add_video_meta_full (buf, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_FORMAT_RGB, w, h, 1,
      offset, strides);
  GST_BUFFER_PTS (buf) = 0;
  GST_BUFFER_DURATION (buf) = GST_SECOND / 10;
  return buf;
}

/* Pushes @buf (a @w x @h frame) through conyframeembed with the model and @props
 * ("output=scores precision=float"); returns the token (g_free) and, in *@label, the
 * top-1 message's label (NULL: none). */
static float *
embed (GstBuffer *buf, int w, int h, const char *props, guint dim, char **label)
{
  g_autofree char *model = model_path ();
  g_autofree char *desc = g_strdup_printf ("conyframeembed model=\"%s\" %s", model, props);
  GstHarness *h_ = gst_harness_new_parse (desc);
  GstBus *bus = cony_test_attach_bus (h_);
  g_autofree char
      *caps = g_strdup_printf ("video/x-raw,format=RGB,width=%d,height=%d,framerate=10/1", w, h);
  gst_harness_set_src_caps_str (h_, caps);
  g_assert_cmpint (gst_harness_push (h_, buf), ==, GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull (h_);
  g_assert_cmpuint (gst_buffer_get_size (out), ==, dim * sizeof (float));
  float *token = g_new (float, dim);
  gst_buffer_extract (out, 0, token, dim * sizeof (float));
  gst_buffer_unref (out);
  *label = NULL;
  GstMessage *msg;
  while ((msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT)) != NULL) {
    const GstStructure *s = gst_message_get_structure (msg);
    if (gst_structure_has_name (s, "conyframeembed"))
      *label = g_strdup (gst_structure_get_string (s, "label"));
    gst_message_unref (msg);
  }
  cony_test_detach_bus (h_, bus);
  gst_harness_teardown (h_);
  return token;
}

static int
argmax (const float *x, int n)
{
  int best = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[best])
      best = i;
  return best;
}

/* The golden frames at the model's size (used as they are) with @props: the scores of
 * the reference @golden within @tol, ArmNN's top-1, the label message. */
static void
check_golden_frames (const char *props, const char *golden, double tol)
{
  ConyNpyArray *ref = cony_test_load_golden_npy ("imagenet", golden);
  ConyNpyArray *armnn = cony_test_load_golden_npy ("imagenet", "armnn.npy");
  g_assert_cmpuint (ref->shape[0], ==, G_N_ELEMENTS (frames));
  g_assert_cmpuint (ref->shape[1], ==, CLASSES);
  for (guint i = 0; i < G_N_ELEMENTS (frames); i++) {
    g_autofree guint8 *rgb = load_frame (frames[i]);
    g_autofree char *label = NULL;
    g_autofree float *token = embed (frame_buffer (rgb, SIZE, SIZE, SIZE * 3), SIZE, SIZE, props,
        CLASSES, &label);
    const float *want = ref->data + i * CLASSES;
    double worst = 0.0, from_armnn = 0.0;
    for (int k = 0; k < CLASSES; k++) {
      worst = MAX (worst, fabs (token[k] - want[k]));
      from_armnn = MAX (from_armnn, fabs (token[k] - armnn->data[i * CLASSES + k]));
    }
    g_test_message ("%s, %s: %s %.4f, max |token - %s| %.2g, max |token - ArmNN| %.4f", props,
        frames[i], label, token[argmax (token, CLASSES)], golden, worst, from_armnn);
    g_assert_cmpfloat (worst, <=, tol);
    g_assert_cmpint (argmax (token, CLASSES), ==, argmax (armnn->data + i * CLASSES, CLASSES));
    g_assert_cmpstr (label, ==, labels[i]);
  }
  cony_npy_array_free (ref);
  cony_npy_array_free (armnn);
}

static void
test_golden_frames (void)
{
  check_golden_frames ("output=scores", "int8.npy", 0.0);
}

static void
test_golden_frames_float (void)
{
  check_golden_frames ("output=scores precision=float", "ref.npy", 1e-4);
}

/* precision-in-use: the integer path by default, float when asked, nothing before
 * the element starts. */
static void
test_precision_in_use (void)
{
  g_autofree char *model = model_path ();
  const char *want[] = { "int8, all 65 layers", "float (forced" };
  const char *props[] = { "", "precision=float" };
  for (guint i = 0; i < G_N_ELEMENTS (want); i++) {
    g_autofree char *desc = g_strdup_printf ("conyframeembed model=\"%s\" %s", model, props[i]);
    GstElement *e = gst_parse_launch (desc, NULL);
    g_assert_nonnull (e);
    g_autofree char *before = NULL, *in_use = NULL;
    g_object_get (e, "precision-in-use", &before, NULL);
    g_assert_null (before);
    GstHarness *h = gst_harness_new_with_element (e, "sink", "src");
    gst_harness_set_src_caps_str (h, "video/x-raw,format=RGB,width=224,height=224,framerate=10/1");
    g_object_get (e, "precision-in-use", &in_use, NULL);
    g_test_message ("%s: precision-in-use \"%s\"", props[i], in_use);
    g_assert_true (g_str_has_prefix (in_use, want[i]));
    gst_harness_teardown (h);
    gst_object_unref (e);
  }
}

/* A frame of another size with a padded stride: the golden cat frame upscaled into a
 * 301x211 frame (grey borders left and right; rows of 908 bytes, 903 used). The element
 * takes the centred 211x211 square, as cony_image_resize() does, and still sees a cat. */
static void
test_odd_size_and_stride (void)
{
  const int W = 301, H = 211, stride = 908, side = 211, left = (W - side) / 2;
  g_autofree guint8 *cat = load_frame ("cat");
  g_autofree float *sq = g_new (float, side *side * 3);
  cony_image_resize (cat, SIZE, SIZE, SIZE * 3, 3, CONY_IMAGE_CROP_NONE, side, side, sq, NULL);
  g_autofree guint8 *rgb = g_new (guint8, W * H * 3);
  memset (rgb, 128, W * H * 3);
  for (int y = 0; y < side; y++)
    for (int i = 0; i < side * 3; i++)
      rgb[(y * W + left) * 3 + i] = (guint8) lrintf (sq[y * side * 3 + i] * 255.0f);
  GstBuffer *buf = frame_buffer (rgb, W, H, stride);

  /* what the element should compute: the library on the same bytes */
  g_autofree char *model = model_path ();
  GError *error = NULL;
  ConyCnn *cnn = cony_cnn_load_private (model, &error);
  g_assert_no_error (error);
  GstMapInfo map;
  g_assert_true (gst_buffer_map (buf, &map, GST_MAP_READ));
  g_autofree float *in = g_new (float, SIZE *SIZE * 3);
  g_autofree float *want = g_new (float, CLASSES);
  cony_image_resize (map.data, W, H, stride, 3, CONY_IMAGE_CROP_CENTER, SIZE, SIZE, in, NULL);
  gst_buffer_unmap (buf, &map);
  cony_cnn_forward (cnn, in, want);
  cony_cnn_free (cnn);

  g_autofree char *label = NULL;
  g_autofree float *token = embed (buf, W, H, "output=scores", CLASSES, &label);
  for (int k = 0; k < CLASSES; k++)
    g_assert_cmpfloat (token[k], ==, want[k]);
  g_test_message ("301x211, stride %d: %s %.3f", stride, label, token[argmax (token, CLASSES)]);
  g_assert_cmpstr (label, ==, "Egyptian cat");
}

/* output=embedding: the pooled 1280-d vector (ReLU6 range), the engine's, no label. */
static void
test_embedding (void)
{
  g_autofree guint8 *rgb = load_frame ("parrot");
  g_autofree char *label = NULL;
  g_autofree float *token = embed (frame_buffer (rgb, SIZE, SIZE, SIZE * 3), SIZE, SIZE,
      "output=embedding", EMBEDDING, &label);
  g_assert_null (label);
  g_autofree char *model = model_path ();
  ConyCnn *cnn = cony_cnn_load_private (model, NULL);
  g_assert_nonnull (cnn);
  g_assert_true (cony_cnn_set_output (cnn, CONY_CNN_OUTPUT_EMBEDDING, NULL));
  g_autofree float *in = g_new (float, SIZE *SIZE * 3);
  g_autofree float *want = g_new (float, EMBEDDING);
  for (int i = 0; i < SIZE * SIZE * 3; i++)
    in[i] = rgb[i] * (1.0f / 255.0f); /* as the element scales */
  cony_cnn_forward (cnn, in, want);
  cony_cnn_free (cnn);
  for (int k = 0; k < EMBEDDING; k++) {
    g_assert_cmpfloat (token[k], ==, want[k]);
    g_assert_true (token[k] >= 0.0f && token[k] <= 6.0f);
  }
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/imagenet/golden-frames", test_golden_frames);
  g_test_add_func ("/imagenet/golden-frames-float", test_golden_frames_float);
  g_test_add_func ("/imagenet/precision-in-use", test_precision_in_use);
  g_test_add_func ("/imagenet/odd-size-and-stride", test_odd_size_and_stride);
  g_test_add_func ("/imagenet/embedding", test_embedding);
  return g_test_run ();
}
