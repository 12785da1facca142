/* conyvggish and conyframeembed elements in one process share one copy of a model
 * file's weights (the read-only "model-users" property counts the users), and each
 * still gives exactly what a single element gives on the same input. */
#include <gst/gst.h>
#include <gst/check/gstharness.h>

#include "gsttestutil.h"
#include "testutil.h"
#include <string.h>

#define D 64
#define MS (GST_MSECOND)
#define N_FRAMES 300
#define TOKEN_CAPS \
  "other/tensors,format=static,num_tensors=1,types=float32,dimensions=(string)64:1,framerate=100/1"
#define CAPS_GAP "video/x-raw,format=RGB,width=22,height=20,framerate=25/1"

static char *
yamnet_path (void)
{
  return g_build_filename (g_getenv ("CONY_SOURCE_ROOT"), "models", "yamnet", "yamnet.safetensors",
      NULL);
}

static GstHarness *
vggish (const char *model, const char *output)
{
  GstElement *el = cony_test_element_new ("conyvggish", model, "stride", 25, NULL);
  gst_util_set_object_arg (G_OBJECT (el), "output", output);
  GstHarness *h = cony_test_harness_take (el);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS);
  return h;
}

static guint
model_users (GstHarness *h)
{
  guint n = 0;
  g_object_get (h->element, "model-users", &n, NULL);
  return n;
}

/* Every output buffer queued in @h, concatenated. */
static GByteArray *
collect (GstHarness *h)
{
  GByteArray *all = g_byte_array_new ();
  GstBuffer *buf;
  while ((buf = gst_harness_try_pull (h)) != NULL) {
    GstMapInfo map;
    g_assert_true (gst_buffer_map (buf, &map, GST_MAP_READ));
    g_byte_array_append (all, map.data, (guint) map.size);
    gst_buffer_unmap (buf, &map);
    gst_buffer_unref (buf);
  }
  return all;
}

static void
assert_equal_bytes (GByteArray *a, GByteArray *b)
{
  g_assert_cmpmem (a->data, a->len, b->data, b->len);
}

/* Two elements on YAMNet share its weights (and a third one asking for the scores
 * does too); their outputs equal, bit for bit, those of one element alone. */
static void
test_vggish_share (void)
{
  g_autofree char *model = yamnet_path ();
  g_autofree char *other = cony_test_golden_path ("cnn", "small.safetensors");
  g_autofree float *x = cony_test_random_floats (D * N_FRAMES, -6.0, 2.0, 7);

  GstHarness *h0 = vggish (model, "embedding");
  g_assert_cmpuint (model_users (h0), ==, 1);
  cony_test_push_tokens (h0, x, D, 0, N_FRAMES, 10, 0, 10 * MS, FALSE);
  GByteArray *want = collect (h0);
  gst_harness_teardown (h0);
  g_assert_cmpuint (want->len, ==, 9 * 1024 * sizeof (float)); /* (300 - 96) / 25 + 1 */

  GstHarness *h1 = vggish (model, "embedding");
  GstHarness *h2 = vggish (model, "embedding");
  GstHarness *hs = vggish (model, "scores");
  GstHarness *ho = vggish (other, "scores");
  g_assert_cmpuint (model_users (h1), ==, 3);
  g_assert_cmpuint (model_users (h2), ==, 3);
  g_assert_cmpuint (model_users (hs), ==, 3);
  g_assert_cmpuint (model_users (ho), ==, 1);
  /* Interleaved, buffer by buffer, as streams in one process run. */
  for (gsize f = 0; f < N_FRAMES; f += 10) {
    cony_test_push_tokens (h1, x, D, f, 10, 10, f * 10 * MS, 10 * MS, FALSE);
    cony_test_push_tokens (hs, x, D, f, 10, 10, f * 10 * MS, 10 * MS, FALSE);
    cony_test_push_tokens (h2, x, D, f, 10, 10, f * 10 * MS, 10 * MS, FALSE);
    cony_test_push_tokens (ho, x, D, f, 10, 10, f * 10 * MS, 10 * MS, FALSE);
  }
  GByteArray *got1 = collect (h1), *got2 = collect (h2), *scores = collect (hs);
  GByteArray *small = collect (ho);
  assert_equal_bytes (got1, want);
  assert_equal_bytes (got2, want);
  g_assert_cmpuint (scores->len, ==, 9 * 521 * sizeof (float));
  g_assert_cmpuint (small->len, ==, 9 * 128 * sizeof (float));
  gst_harness_teardown (h1);
  g_assert_cmpuint (model_users (h2), ==, 2);
  gst_harness_teardown (hs);
  g_assert_cmpuint (model_users (h2), ==, 1);
  /* Stopped: no model, then loaded again on the next start. */
  gst_element_set_state (h2->element, GST_STATE_NULL);
  g_assert_cmpuint (model_users (h2), ==, 0);
  gst_harness_teardown (h2);
  gst_harness_teardown (ho);
  g_byte_array_unref (want);
  g_byte_array_unref (got1);
  g_byte_array_unref (got2);
  g_byte_array_unref (scores);
  g_byte_array_unref (small);
}

static GstHarness *
frame_embed (void)
{
  g_autofree char *path = cony_test_golden_path ("imagecnn", "gap.safetensors");
  GstHarness *h = cony_test_harness_new ("conyframeembed", path, NULL);
  gst_harness_set_src_caps_str (h, CAPS_GAP);
  return h;
}

static GByteArray *
embed_frames (GstHarness *h)
{
  for (guint i = 0; i < 5; i++)
    g_assert_cmpint (gst_harness_push (h,
                         cony_test_rgb_frame (22, 20, 100 + i, i * 40 * MS, 40 * MS)),
        ==, GST_FLOW_OK);
  GByteArray *out = collect (h);
  g_assert_cmpuint (out->len, >, 0);
  return out;
}

static void
test_frame_embed_share (void)
{
  GstHarness *h0 = frame_embed ();
  g_assert_cmpuint (model_users (h0), ==, 1);
  GByteArray *want = embed_frames (h0);
  gst_harness_teardown (h0);
  GstHarness *h1 = frame_embed (), *h2 = frame_embed ();
  g_assert_cmpuint (model_users (h1), ==, 2);
  g_assert_cmpuint (model_users (h2), ==, 2);
  GByteArray *got1 = embed_frames (h1), *got2 = embed_frames (h2);
  assert_equal_bytes (got1, want);
  assert_equal_bytes (got2, want);
  gst_harness_teardown (h1);
  g_assert_cmpuint (model_users (h2), ==, 1);
  gst_harness_teardown (h2);
  g_byte_array_unref (want);
  g_byte_array_unref (got1);
  g_byte_array_unref (got2);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/shared-cnn/conyvggish", test_vggish_share);
  g_test_add_func ("/shared-cnn/conyframeembed", test_frame_embed_share);
  return g_test_run ();
}
