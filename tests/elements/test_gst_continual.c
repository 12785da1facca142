/* conyvggish mode=continual (GstHarness): every token equals libcony's continual CNN on
 * the same frames, each comes out exactly when the LATENCY query says, with the window
 * mode's timestamps; the caps' lookahead and cnn-mode; DISCONT, flush and GAP restart
 * the stream; EOS gives the tokens window mode gives; strides that cannot run continually
 * are refused at start; YAMNet's int8 file runs on the integer path.
 *
 * Model: tests/golden/continual/net.safetensors (a MobileNet-v1, 24 frames x 16 bands,
 * time stride 8: 3 rows a window, lookahead 13 frames, delay 16), fed 16-float tokens at
 * 100/s; YAMNet for its geometry. */
#include "cony/cnn-continual.h"

#include <glib/gstdio.h>
#include <gst/check/gstharness.h>
#include <gst/gst.h>
#include <math.h>
#include <string.h>

#include "gsttestutil.h"
#include "testutil.h"

#define D 16
#define OUT 10
#define WIN 24
#define S 8
#define DELAY 16
#define MS (GST_MSECOND)
#define CAPS \
  "other/tensors,format=static,num_tensors=1,types=float32,dimensions=(string)16:1," \
  "framerate=100/1"

static GstHarness *
net_harness (const gchar *first_prop, ...)
{
  va_list ap;
  va_start (ap, first_prop);
  char *path = cony_test_golden_path ("continual", "net.safetensors");
  GstHarness *h = cony_test_harness_new_valist ("conyvggish", path, first_prop, ap);
  va_end (ap);
  g_free (path);
  gst_harness_set_src_caps_str (h, CAPS);
  return h;
}

/* libcony's continual tokens of @n frames of @x at @hop, pushed in whole blocks of S
 * frames as the element does, the tail (@padded frames in all) silent log(0.01); their
 * number in *@count. */
static float *
reference (const float *x, gsize n, gsize padded, guint hop, gsize *count)
{
  g_autoptr (ConyCnn) cnn = cony_test_load_golden_cnn ("continual", "net.safetensors");
  GError *error = NULL;
  g_autoptr (ConyCnnContinual) c = cony_cnn_continual_new (cnn, hop, &error);
  g_assert_no_error (error);
  g_autofree float *all = g_new (float, padded *D);
  memcpy (all, x, n * D * sizeof (float));
  for (gsize i = n * D; i < padded * D; i++)
    all[i] = logf (0.01f);
  float *out = g_new (float, (padded / hop + 2) * OUT);
  gsize made = 0;
  for (gsize at = 0; at + S <= padded; at += S) /* whole blocks only, as the element */
    made += cony_cnn_continual_push (c, all + at * D, S, out + made * OUT);
  *count = made;
  return out;
}

/* Pulls every waiting token and checks it as token @first, @first + 1, ... of @want:
 * its values (bit for bit: the same blocks), PTS base + j hop frames, duration hop
 * frames, DISCONT on token 0. Returns the number pulled. */
static guint
check_tokens (GstHarness *h, const float *want, guint first, guint hop, GstClockTime base)
{
  GstBuffer *buf;
  guint j = first;
  while ((buf = gst_harness_try_pull (h)) != NULL) {
    GstMapInfo map;
    g_assert_true (gst_buffer_map (buf, &map, GST_MAP_READ));
    g_assert_cmpuint (map.size, ==, OUT * sizeof (float));
    g_assert_cmpmem (map.data, map.size, want + (gsize) j * OUT, OUT * sizeof (float));
    g_assert_cmpuint (GST_BUFFER_PTS (buf), ==, base + (GstClockTime) j * hop * 10 * MS);
    g_assert_cmpuint (GST_BUFFER_DURATION (buf), ==, hop * 10 * MS);
    g_assert_cmpuint (GST_BUFFER_OFFSET (buf), ==, j);
    g_assert_cmpint (GST_BUFFER_IS_DISCONT (buf), ==, j == 0);
    gst_buffer_unmap (buf, &map);
    gst_buffer_unref (buf);
    j++;
  }
  return j - first;
}

/* Frames pushed 7 at a time: after each buffer exactly the tokens whose last frame
 * (window + delay) is in are out, LATENCY = window - 1 + delay frames, and each token is
 * libcony's. */
static void
test_stream (void)
{
  const gsize n = 150;
  for (guint hop = S; hop <= 2 * S; hop += S) {
    g_autofree float *x = cony_test_random_floats (n * D, -6, 2, 21);
    gsize count;
    g_autofree float *want = reference (x, n, n, hop, &count);
    GstHarness *h = net_harness ("mode", 1, "stride", hop, NULL);
    gst_harness_set_upstream_latency (h, 0);
    g_assert_cmpuint (gst_harness_query_latency (h), ==, (WIN - 1 + DELAY) * 10 * MS);
    guint out = 0;
    for (gsize at = 0; at < n; at += 7) {
      gsize k = MIN (7, n - at);
      cony_test_push_tokens (h, x, D, at, k, (guint) k, 0, 10 * MS, at == 0);
      gsize in = at + k;
      /* Token j is complete with frame j hop + WIN - 1 + DELAY. */
      guint due = in >= WIN + DELAY ? (guint) ((in - WIN - DELAY) / hop + 1) : 0;
      out += check_tokens (h, want, out, hop, 0);
      g_assert_cmpuint (out, ==, due);
    }
    g_assert_cmpuint (out, ==, count);
    gst_harness_teardown (h);
  }
}

/* The output caps: cnn-mode, and a lookahead of window - hop + 13 frames (what the last
 * row of a token reads past its window); window mode says cnn-mode=window. YAMNet:
 * 221/100 s of lookahead, LATENCY 2.55 s. */
static void
test_caps (void)
{
  struct {
    gint mode;
    guint stride;
    gint la_n, la_d;
  } cases[] = {
    { 1, 8, WIN - 8 + 13, 100 },
    { 1, 16, WIN - 16 + 13, 100 },
    { 0, 8, WIN - 8, 100 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    GstHarness *h = net_harness ("mode", cases[i].mode, "stride", cases[i].stride, NULL);
    GstCaps *caps = gst_pad_get_current_caps (h->sinkpad);
    const GstStructure *s = gst_caps_get_structure (caps, 0);
    gint n, d, want_n = cases[i].la_n, want_d = cases[i].la_d;
    g_assert_true (gst_structure_get_fraction (s, "lookahead", &n, &d));
    g_assert_cmpint (n * want_d, ==, want_n * d);
    g_assert_cmpstr (gst_structure_get_string (s, "cnn-mode"), ==,
        cases[i].mode ? "continual" : "window");
    gst_caps_unref (caps);
    gst_harness_teardown (h);
  }
  char *yamnet = cony_test_model_path ("yamnet", "yamnet.safetensors");
  GstHarness *h = cony_test_harness_new ("conyvggish", yamnet, "mode", 1, NULL);
  gst_harness_set_src_caps_str (h,
      "other/tensors,format=static,num_tensors=1,types=float32,"
      "dimensions=(string)64:1,framerate=100/1");
  gst_harness_set_upstream_latency (h, 0);
  g_assert_cmpuint (gst_harness_query_latency (h), ==, 2550 * MS);
  GstCaps *caps = gst_pad_get_current_caps (h->sinkpad);
  const GstStructure *s = gst_caps_get_structure (caps, 0);
  gint n, d, rn, rd;
  g_assert_true (gst_structure_get_fraction (s, "lookahead", &n, &d));
  g_assert_cmpint (n * 100, ==, 221 * d);
  g_assert_true (gst_structure_get_fraction (s, "framerate", &rn, &rd));
  g_assert_cmpint (rn * 32, ==, 100 * rd); /* a token every 32 frames: stride not set */
  gst_caps_unref (caps);
  gst_harness_teardown (h);
  g_free (yamnet);
}

/* A reset between two streams (DISCONT, flush, GAP): the second's tokens are a fresh
 * stream's, anchored at its first PTS. */
static void
test_reset (void)
{
  const gsize na = 70, nb = 90;
  g_autofree float *a = cony_test_random_floats (na * D, -6, 2, 31);
  g_autofree float *b = cony_test_random_floats (nb * D, -6, 2, 32);
  gsize ca, cb;
  g_autofree float *want_a = reference (a, na, na, S, &ca);
  g_autofree float *want_b = reference (b, nb, nb, S, &cb);
  const GstClockTime tb = 5 * GST_SECOND + 3;
  for (int kind = 0; kind < 3; kind++) {
    GstHarness *h = net_harness ("mode", 1, "stride", S, NULL);
    cony_test_push_tokens (h, a, D, 0, na, 5, 0, 10 * MS, TRUE);
    g_assert_cmpuint (check_tokens (h, want_a, 0, S, 0), ==, ca);
    if (kind == 1)
      cony_test_flush (h);
    else if (kind == 2)
      g_assert_true (gst_harness_push_event (h, gst_event_new_gap (na * 10 * MS, GST_SECOND)));
    cony_test_push_tokens (h, b, D, 0, nb, 3, tb, 10 * MS, kind == 0);
    g_test_message ("reset kind %d", kind);
    g_assert_cmpuint (check_tokens (h, want_b, 0, S, tb), ==, cb);
    gst_harness_teardown (h);
  }
}

/* EOS: as many tokens as window mode gives (complete windows, plus one over the
 * uncovered tail with pad-tail), the frames past the end silent. */
static void
test_eos (void)
{
  struct {
    gsize n;
    gboolean pad_tail;
    guint want;
  } cases[] = {
    { 50, TRUE, 5 },  /* windows at 0, 8, 16, 24 (to 48), a fifth over frames 48-50 */
    { 50, FALSE, 4 }, /* pad-tail=false: the four complete windows */
    { 48, TRUE, 4 },  /* nothing uncovered */
    { 10, TRUE, 1 },  /* shorter than a window */
    { 10, FALSE, 0 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    gsize n = cases[i].n, count;
    g_autofree float *x = cony_test_random_floats (n * D, -6, 2, 41);
    g_autofree float *want = reference (x, n, n + WIN + DELAY + S, S, &count);
    GstHarness *h = net_harness ("mode", 1, "stride", S, "pad-tail", cases[i].pad_tail, NULL);
    cony_test_push_tokens (h, x, D, 0, n, 3, 0, 10 * MS, TRUE);
    g_assert_true (gst_harness_push_event (h, gst_event_new_eos ()));
    g_test_message ("%" G_GSIZE_FORMAT " frames, pad-tail %d", n, cases[i].pad_tail);
    g_assert_cmpuint (check_tokens (h, want, 0, S, 0), ==, cases[i].want);
    g_assert_true (cony_test_event_forwarded (h, GST_EVENT_EOS));
    gst_harness_teardown (h);
  }
}

/* Refused at start: a stride that is not a multiple of the time stride (named). YAMNet's
 * int8 file runs continually on the integer path (precision auto, and int8), float with
 * precision=float. */
static void
test_refused (void)
{
  char *net = cony_test_golden_path ("continual", "net.safetensors");
  GstElement *el = cony_test_element_new ("conyvggish", net, "mode", 1, "stride", 12, NULL);
  g_error_free (cony_test_assert_start_fails (el,
      (const char *[]){ "mode=continual", "time stride, 8 frames", "12 is not", NULL }));
  g_object_set (el, "stride", 16, NULL);
  cony_test_assert_starts (el);
  g_object_set (el, "min-level", -50.0, NULL); /* the level gate would skip frames */
  g_error_free (cony_test_assert_start_fails (el,
      (const char *[]){ "min-level works with mode=window only", NULL }));
  g_object_set (el, "min-level", -G_MAXDOUBLE, NULL);
  gst_object_unref (el);

  g_autofree char *q8 = cony_test_yamnet_int8 ();
  const char *in_use[] = { "int8", "int8", "float" };
  for (gint precision = 0; precision < 3; precision++) {
    GstHarness *h = cony_test_harness_new ("conyvggish", q8, "mode", 1, "precision",
        precision == 2       ? 1
            : precision == 1 ? 2
                             : 0,
        NULL);
    gst_harness_set_src_caps_str (h,
        "other/tensors,format=static,num_tensors=1,types=float32,"
        "dimensions=(string)64:1,framerate=100/1");
    gchar *what = NULL;
    g_object_get (h->element, "precision-in-use", &what, NULL);
    g_assert_nonnull (strstr (what, in_use[precision]));
    g_free (what);
    g_autofree float *x = cony_test_random_floats (300 * 64, -6, 2, 3);
    cony_test_push_tokens (h, x, 64, 0, 300, 10, 0, 10 * MS, TRUE);
    /* frames 0..299: tokens whose window + 160 frames are in: (300 - 256) / 32 + 1 */
    g_assert_cmpuint (gst_harness_buffers_received (h), ==, 2);
    gst_harness_teardown (h);
  }
  g_unlink (q8);
  g_free (net);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/continual/stream", test_stream);
  g_test_add_func ("/continual/caps", test_caps);
  g_test_add_func ("/continual/reset", test_reset);
  g_test_add_func ("/continual/eos", test_eos);
  g_test_add_func ("/continual/refused", test_refused);
  return g_test_run ();
}
