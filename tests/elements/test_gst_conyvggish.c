/* conyvggish element tests (GstHarness): window/stride timestamps for odd
 * buffer sizes, latency, flush / discont / caps / GAP / EOS behaviour, NaN
 * tokens, wrong caps, missing or bad models, postprocess, batching (non-live
 * appsrc pipeline; ignored behind the live harness).
 *
 * Models: the reduced VGGish of tests/golden/cnn/ (small: 96x64 -> 128 with
 * PCA; odd: 20x12x2 -> 10). Reference outputs come from libcony's engine
 * (cony_cnn_forward on the same frames) and from the torch goldens. */
#include "cony/cnn.h"
#include "cony/npy.h"

#include <gst/gst.h>
#include <gst/check/gstharness.h>

#include "gsttestutil.h"
#include "testutil.h"
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#define D 64
#define OUT 128
#define MS (GST_MSECOND)
#define TOKEN_CAPS(k, rate) \
  "other/tensors,format=static,num_tensors=1,types=float32,dimensions=(string)64:" k \
  ",framerate=" rate

/* Deterministic log-mel-like frames. */
static float *
make_frames (gsize n, guint d, guint32 seed)
{
  return cony_test_random_floats (n * d, -6.0, 2.0, seed);
}

static GstHarness *
new_harness_valist (const char *model_file, const gchar *first_prop, va_list ap)
{
  char *path = cony_test_golden_path ("cnn", model_file);
  GstHarness *h = cony_test_harness_new_valist ("conyvggish", path, first_prop, ap);
  g_free (path);
  return h;
}

/* A harness around a conyvggish on tests/golden/cnn/@model_file with properties
 * "name", value, ..., NULL. */
static GstHarness *
new_harness (const char *model_file, const gchar *first_prop, ...)
{
  va_list ap;
  va_start (ap, first_prop);
  GstHarness *h = new_harness_valist (model_file, first_prop, ap);
  va_end (ap);
  return h;
}

/* new_harness() on the small model, fed one frame per buffer at 100 frames/s; *@cnn
 * gets libcony's engine on the same file, the reference (cony_cnn_free). */
static GstHarness *
small_harness (ConyCnn **cnn, const gchar *first_prop, ...)
{
  va_list ap;
  va_start (ap, first_prop);
  GstHarness *h = new_harness_valist ("small.safetensors", first_prop, ap);
  va_end (ap);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS ("1", "100/1"));
  *cnn = cony_test_load_golden_cnn ("cnn", "small.safetensors");
  return h;
}

/* Checks @buf as window @w: PTS base + w * stride_ns, lasting stride_ns, DISCONT on
 * the first, values those of the engine on frames [w * stride, w * stride + 96) of @x. */
static void
check_window (GstBuffer *buf, ConyCnn *cnn, const float *x, guint w, guint stride,
    GstClockTime base, GstClockTime stride_ns)
{
  float want[OUT];
  GstMapInfo map;
  g_assert_true (gst_buffer_map (buf, &map, GST_MAP_READ));
  g_assert_cmpuint (map.size, ==, OUT * sizeof (float));
  g_assert_cmpuint (GST_BUFFER_PTS (buf), ==, base + w * stride_ns);
  g_assert_cmpuint (GST_BUFFER_DURATION (buf), ==, stride_ns);
  g_assert_cmpint (GST_BUFFER_IS_DISCONT (buf), ==, w == 0);
  cony_cnn_forward (cnn, x + (gsize) w * stride * D, want);
  const float *got = (const float *) map.data;
  for (guint j = 0; j < OUT; j++)
    g_assert_cmpfloat_with_epsilon (got[j], want[j], 1e-5 * MAX (1.0, fabs (want[j])));
  gst_buffer_unmap (buf, &map);
}

/* Pulls every queued output and checks it with check_window(), counting from window 0;
 * returns the number pulled. */
static guint
check_windows (GstHarness *h, ConyCnn *cnn, const float *x, guint stride, GstClockTime base,
    GstClockTime stride_ns)
{
  GstBuffer *buf;
  guint w = 0;
  while ((buf = gst_harness_try_pull (h)) != NULL) {
    check_window (buf, cnn, x, w++, stride, base, stride_ns);
    gst_buffer_unref (buf);
  }
  return w;
}

/* ------------------------------------------------------------------------ */

/* Non-overlapping windows of the torch golden patches give the torch outputs. */
static void
test_matches_torch_golden (void)
{
  ConyNpyArray *x = cony_test_load_golden_npy ("cnn", "small_input.npy");
  ConyNpyArray *want = cony_test_load_golden_npy ("cnn", "small_expected.npy");
  gsize n_patches = x->shape[0];
  g_assert_cmpuint (cony_npy_array_numel (x), ==, n_patches * 96 * D);

  GstHarness *h = new_harness ("small.safetensors", "stride", 96, NULL);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS ("1", "100/1"));
  GstCaps *caps = gst_pad_get_current_caps (h->sinkpad);
  GstCaps *exp = gst_caps_from_string ("other/tensors,format=static,num_tensors=1,"
                                       "types=float32,dimensions=(string)128:1,framerate=25/24");
  g_assert_true (gst_caps_is_subset (caps, exp)); /* + the cnn fields (test_gst_pairing) */
  gst_caps_unref (exp);
  gst_caps_unref (caps);

  cony_test_push_tokens (h, x->data, D, 0, n_patches * 96, 1, 0, 10 * MS, FALSE);
  g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, n_patches);
  for (gsize p = 0; p < n_patches; p++) {
    GstBuffer *buf = gst_harness_pull (h);
    g_assert_cmpuint (GST_BUFFER_PTS (buf), ==, p * 960 * MS);
    g_assert_cmpuint (GST_BUFFER_DURATION (buf), ==, 960 * MS);
    GstMapInfo map;
    gst_buffer_map (buf, &map, GST_MAP_READ);
    const float *got = (const float *) map.data;
    double num = 0, den = 0;
    for (guint j = 0; j < OUT; j++) {
      num = MAX (num, fabs (got[j] - want->data[p * OUT + j]));
      den = MAX (den, fabs (want->data[p * OUT + j]));
    }
    g_assert_cmpfloat (num / den, <, 1e-4);
    gst_buffer_unmap (buf, &map);
    gst_buffer_unref (buf);
  }
  gst_harness_teardown (h);
  cony_npy_array_free (x);
  cony_npy_array_free (want);
}

/* Default window 96 / stride 25 at 100 frames/s: 4/1 output, PTS = start +
 * w * 250 ms, whatever the number of tokens per buffer (7, then 4 after a
 * caps change that only changes K, which must not reset the window). */
static void
test_timestamps_odd_buffers (void)
{
  const guint ks[] = { 1, 7, 37 };
  gsize n = 200;
  float *x = make_frames (n, D, 1);
  ConyCnn *cnn = cony_test_load_golden_cnn ("cnn", "small.safetensors");
  GstClockTime base = 1234567891;

  for (guint i = 0; i < G_N_ELEMENTS (ks); i++) {
    GstHarness *h = new_harness ("small.safetensors", NULL);
    gchar *c = g_strdup_printf (TOKEN_CAPS ("%u", "%u/%u"), ks[i], 100, ks[i]);
    gst_harness_set_src_caps_str (h, c);
    g_free (c);
    GstCaps *caps = gst_pad_get_current_caps (h->sinkpad);
    gint fn, fd;
    gst_structure_get_fraction (gst_caps_get_structure (caps, 0), "framerate", &fn, &fd);
    g_assert_cmpint (fn, ==, 4);
    g_assert_cmpint (fd, ==, 1);
    gst_caps_unref (caps);

    gsize full = n / ks[i] * ks[i];
    cony_test_push_tokens (h, x, D, 0, full, ks[i], base, 10 * MS, FALSE);
    if (full < n) {
      gchar *c2 = g_strdup_printf (TOKEN_CAPS ("%u", "%u/%u"), (guint) (n - full), 100,
          (guint) (n - full));
      GstCaps *caps2 = gst_caps_from_string (c2);
      g_free (c2);
      g_assert_true (gst_pad_push_event (h->srcpad, gst_event_new_caps (caps2)));
      gst_caps_unref (caps2);
      cony_test_push_tokens (h, x, D, full, n - full, ks[i], base + full * 10 * MS, 10 * MS, FALSE);
    }
    guint got = check_windows (h, cnn, x, 25, base, 250 * MS);
    g_assert_cmpuint (got, ==, 1 + (200 - 96) / 25);
    gst_harness_teardown (h);
  }
  cony_cnn_free (cnn);
  g_free (x);
}

/* One stream at 100 frames/s, one frame per buffer, and the windows it gives. */
typedef struct {
  gsize n;
  guint32 seed;
  guint stride; /* the property, in frames */
  guint want;   /* windows */
} StreamCase;

/* Every window of the stream equals the engine run on its own 96 frames, at
 * w * stride frames. */
static void
test_stream (gconstpointer data)
{
  const StreamCase *c = data;
  float *x = make_frames (c->n, D, c->seed);
  ConyCnn *cnn;
  GstHarness *h = small_harness (&cnn, "stride", c->stride, NULL);
  cony_test_push_tokens (h, x, D, 0, c->n, 1, 0, 10 * MS, FALSE);
  g_assert_cmpuint (check_windows (h, cnn, x, c->stride, 0, c->stride * 10 * MS), ==, c->want);
  gst_harness_teardown (h);
  cony_cnn_free (cnn);
  g_free (x);
}

/* A long stream (1000 frames, 37 windows): the window slides through the frame store
 * and is moved back to its start several times. */
static const StreamCase long_stream = { 1000, 3, 25, 1 + (1000 - 96) / 25 };
/* Stride larger than the window: the frames in between are skipped; windows at 0, 150,
 * 300 (the last needs frames up to 395). */
static const StreamCase stride_above_window = { 400, 2, 150, 3 };

static void
test_latency (void)
{
  struct {
    const gchar *caps;
    guint window_model_stride;
    GstClockTime want;
  } cases[] = {
    { TOKEN_CAPS ("1", "100/1"), 25, 950 * MS },  /* 95 frames of 10 ms */
    { TOKEN_CAPS ("1", "100/1"), 96, 950 * MS },  /* the stride does not matter */
    { TOKEN_CAPS ("10", "10/1"), 25, 950 * MS },  /* nor the tokens per buffer */
    { TOKEN_CAPS ("1", "125/2"), 25, 1520 * MS }, /* 95 frames of 16 ms */
    { TOKEN_CAPS ("1", "300/1"), 25, 316666667 }, /* ceil (95 / 300 s) */
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    GstHarness *h = new_harness ("small.safetensors", "stride", cases[i].window_model_stride, NULL);
    gst_harness_set_src_caps_str (h, cases[i].caps);
    gst_harness_set_upstream_latency (h, 0);
    g_assert_cmpuint (gst_harness_query_latency (h), ==, cases[i].want);
    /* conymel's default 25 ms upstream: 975 ms in all = one window of audio. */
    gst_harness_set_upstream_latency (h, 25 * MS);
    g_assert_cmpuint (gst_harness_query_latency (h), ==, cases[i].want + 25 * MS);
    gst_harness_teardown (h);
  }
}

/* What separates two streams in the reset tests. */
typedef enum
{
  RESET_FLUSH,   /* flush-start, flush-stop and a new segment */
  RESET_DISCONT, /* the second stream's first buffer is DISCONT */
  RESET_CAPS,    /* new caps with the second stream's frame rate */
  RESET_GAP,     /* a GAP event between them, which is forwarded too */
} ResetKind;

typedef struct {
  ResetKind kind;
  gsize n_a, n_b;            /* frames in the first / second stream */
  guint k_a, k_b;            /* frames per buffer */
  guint want_a, want_b;      /* windows each gives */
  GstClockTime t_b, frame_b; /* the second stream's first PTS and frame duration */
  guint32 seed_a, seed_b;
} ResetCase;

/* Two streams with a reset between them (the first at 100 frames/s from 0): the
 * partial window of the first is dropped and the second's windows are a fresh
 * element's, re-anchored at its first PTS and timed by its frame rate. */
static void
test_reset (gconstpointer data)
{
  const ResetCase *c = data;
  float *a = make_frames (c->n_a, D, c->seed_a);
  float *b = make_frames (c->n_b, D, c->seed_b);
  ConyCnn *cnn;
  GstHarness *h = small_harness (&cnn, NULL);
  cony_test_push_tokens (h, a, D, 0, c->n_a, c->k_a, 0, 10 * MS, FALSE);
  g_assert_cmpuint (check_windows (h, cnn, a, 25, 0, 250 * MS), ==, c->want_a);
  GstClockTime end_a = c->n_a * 10 * MS;
  if (c->kind == RESET_FLUSH) {
    cony_test_flush (h);
  } else if (c->kind == RESET_GAP) {
    g_assert_true (gst_harness_push_event (h, gst_event_new_gap (end_a, c->t_b - end_a)));
  } else if (c->kind == RESET_CAPS) {
    gchar *rate = g_strdup_printf ("%" G_GUINT64_FORMAT "/1", GST_SECOND / c->frame_b);
    gchar *str = g_strdup_printf (TOKEN_CAPS ("1", "%s"), rate);
    GstCaps *caps = gst_caps_from_string (str);
    g_assert_true (gst_pad_push_event (h->srcpad, gst_event_new_caps (caps)));
    gst_caps_unref (caps);
    g_free (str);
    g_free (rate);
  }
  cony_test_push_tokens (h, b, D, 0, c->n_b, c->k_b, c->t_b, c->frame_b, c->kind == RESET_DISCONT);
  g_assert_cmpuint (check_windows (h, cnn, b, 25, c->t_b, 25 * c->frame_b), ==, c->want_b);
  if (c->kind == RESET_GAP)
    g_assert_true (cony_test_event_forwarded (h, GST_EVENT_GAP));
  gst_harness_teardown (h);
  cony_cnn_free (cnn);
  g_free (a);
  g_free (b);
}

/* A flush in a partial window (170 frames: 3 windows and 74 frames pending). */
static const ResetCase reset_flush = { RESET_FLUSH, 170, 160, 3, 5, 3, 3, 5 * GST_SECOND, 10 * MS,
  4, 3 };
static const ResetCase reset_discont = { RESET_DISCONT, 120, 130, 4, 9, 1, 2, 42 * GST_SECOND + 7,
  10 * MS, 5, 6 };
/* 50 frames/s after the change: one window of the second stream, lasting 25 x 20 ms. */
static const ResetCase reset_caps = { RESET_CAPS, 110, 96, 1, 1, 1, 1, 1100 * MS, 20 * MS, 7, 8 };
static const ResetCase reset_gap = { RESET_GAP, 60, 96, 1, 1, 0, 1, GST_SECOND, 10 * MS, 9, 10 };

/* EOS after @n frames (@pad_tail): the windows out, then EOS forwarded. Frames no
 * window covered give one more window, padded with log(0.01) (the caps name no
 * log-offset: VGGish's) as YAMNet pads its waveform; each must equal the engine on the
 * padded frames. Returns the windows. */
static guint
eos_windows (gsize n, gboolean pad_tail)
{
  const guint padded_len = 96 + 25 * 8;
  g_assert_cmpuint (n, <=, padded_len - 96);
  float *x = make_frames (padded_len, D, 11);
  for (gsize i = n * D; i < padded_len * D; i++)
    x[i] = logf (0.01f);
  ConyCnn *cnn;
  GstHarness *h = small_harness (&cnn, "pad-tail", pad_tail, NULL);
  cony_test_push_tokens (h, x, D, 0, n, 1, 0, 10 * MS, FALSE);
  g_assert_true (gst_harness_push_event (h, gst_event_new_eos ()));
  guint w = check_windows (h, cnn, x, 25, 0, 250 * MS);
  g_assert_true (cony_test_event_forwarded (h, GST_EVENT_EOS));
  gst_harness_teardown (h);
  cony_cnn_free (cnn);
  g_free (x);
  return w;
}

static void
test_eos (void)
{
  /* 130 frames: windows at 0 and 25 (to frame 121), the tail 121-130 in a third at
   * 50, padded with 16 silent frames; dropped with pad-tail=false */
  g_assert_cmpuint (eos_windows (130, TRUE), ==, 3);
  g_assert_cmpuint (eos_windows (130, FALSE), ==, 2);
  /* shorter than one window (0.3 s): one window, 66 frames of it silence */
  g_assert_cmpuint (eos_windows (30, TRUE), ==, 1);
  g_assert_cmpuint (eos_windows (30, FALSE), ==, 0);
  /* 121 frames: the window at 25 ends at the last frame, nothing is left over */
  g_assert_cmpuint (eos_windows (121, TRUE), ==, 2);
  g_assert_cmpuint (eos_windows (96, TRUE), ==, 1);
  g_assert_cmpuint (eos_windows (97, TRUE), ==, 2);
}

/* NaN/Inf tokens: one warning, replaced by zeros, outputs finite and equal
 * to the clean stream's. */
static void
test_nan_tokens (void)
{
  gsize n = 150;
  float *x = make_frames (n, D, 12);
  float *clean = g_memdup2 (x, n * D * sizeof (float));
  for (gsize i = 30 * D; i < 30 * D + 10; i++) {
    x[i] = (i % 2) ? NAN : -INFINITY;
    clean[i] = 0.0f;
  }
  ConyCnn *cnn;
  GstHarness *h = small_harness (&cnn, NULL);
  GstBus *bus = cony_test_attach_bus (h);
  cony_test_push_tokens (h, x, D, 0, n, 1, 0, 10 * MS, FALSE);
  GstMessage *msg = gst_bus_pop_filtered (bus, GST_MESSAGE_WARNING);
  g_assert_nonnull (msg);
  gst_message_unref (msg);
  g_assert_null (gst_bus_pop_filtered (bus, GST_MESSAGE_WARNING));
  g_assert_cmpuint (check_windows (h, cnn, clean, 25, 0, 250 * MS), ==, 1 + (150 - 96) / 25);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  cony_cnn_free (cnn);
  g_free (clean);
  g_free (x);
}

static void
test_wrong_caps_refused (void)
{
  const gchar *bad[] = {
    TOKEN_CAPS ("1", "0/1"), /* no token rate */
    "other/tensors,format=static,num_tensors=1,types=float32,dimensions=(string)32:1,framerate=100/1",
    "other/tensors,format=static,num_tensors=1,types=uint8,dimensions=(string)64:1,framerate=100/1",
    "other/tensors,format=static,num_tensors=1,types=float32,dimensions=(string)64:1:3,framerate=100/1",
    "audio/x-raw,format=F32LE,rate=16000,channels=1,layout=interleaved",
  };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    GstHarness *h = new_harness ("small.safetensors", NULL);
    cony_test_assert_caps_refused (h, bad[i], NULL);
  }
}

/* Token caps it cannot read are named (#46.5), as a CORE/NEGOTIATION error saying what
 * conyvggish takes, what came and what is wrong (a debug line before). */
static void
test_refusal_named (void)
{
  static const struct {
    const char *caps, *message;
  } cases[] = {
    { "other/tensors,format=static,num_tensors=1,types=float32,dimensions=(string)64:0:x,"
      "framerate=100/1",
        "conyvggish takes 64-float tokens (other/tensors, float32, dimensions=64:K), got "
        "other/tensors types=float32 dimensions=64:0:x framerate=100/1: expected dimensions=D:K "
        "(innermost first, positive), got 64:0:x" },
    { "other/tensors,format=static,num_tensors=1,types=uint8,dimensions=(string)64:1,"
      "framerate=100/1",
        "conyvggish takes 64-float tokens (other/tensors, float32, dimensions=64:K), got "
        "other/tensors types=uint8 dimensions=64:1 framerate=100/1: expected types=float32, got "
        "uint8" },
    { TOKEN_CAPS ("1", "0/1"),
        "conyvggish takes 64-float tokens (other/tensors, float32, dimensions=64:K), got "
        "other/tensors types=float32 dimensions=64:1 framerate=0/1: a fixed token rate "
        "(framerate > 0) is needed to time-stamp the windows" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    cony_test_assert_caps_named (new_harness ("small.safetensors", NULL), cases[i].caps, FALSE,
        cases[i].message);
}

/* Missing, unreadable or mismatched models: the state change fails with an
 * error message that carries libcony's explanation. */
static void
test_bad_models (void)
{
  char *npy = cony_test_golden_path ("cnn", "small_input.npy");
  char *small = cony_test_golden_path ("cnn", "small.safetensors");
  char *odd = cony_test_golden_path ("cnn", "odd.safetensors");
  char *image = cony_test_model_path ("imagenet", "mobilenet_v2.safetensors");
  struct {
    const char *model;
    guint window;
    gint postprocess;
    const char *in_message;
    gint output;
  } cases[] = {
    { NULL, 96, 0, "No model", 0 },
    { "/nonexistent/vggish.safetensors", 96, 0, "/nonexistent/vggish.safetensors", 0 },
    { npy, 96, 0, "small_input.npy", 0 },
    { small, 50, 0, "window", 0 },
    { odd, 96, 1, "PCA", 0 },
    { small, 96, 0, "no embedding output", CONY_CNN_OUTPUT_EMBEDDING },
    { image, 96, 0, "is an image model", 0 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    GstElement *el = cony_test_element_new ("conyvggish", cases[i].model, "window", cases[i].window,
        "postprocess", cases[i].postprocess, "output", cases[i].output, NULL);
    g_test_message ("case %u", i);
    g_error_free (cony_test_assert_start_fails (el, (const char *[]){ cases[i].in_message, NULL }));
    /* The element is reusable once the model is fixed. */
    g_object_set (el, "model", small, "window", 96, "postprocess", 0, "output", 0, NULL);
    cony_test_assert_starts (el);
    gst_object_unref (el);
  }
  g_free (npy);
  g_free (small);
  g_free (odd);
  g_free (image);
}

/* postprocess=tf / torch: the engine's postprocess of the embeddings, and
 * the torch goldens to within one quantisation step. */
static void
test_postprocess (void)
{
  const char *names[] = { "tf", "torch" };
  const char *goldens[] = { "small_pp_tf.npy", "small_pp_torch.npy" };
  ConyNpyArray *x = cony_test_load_golden_npy ("cnn", "small_input.npy");
  gsize n_patches = x->shape[0];
  for (guint m = 0; m < 2; m++) {
    ConyNpyArray *want = cony_test_load_golden_npy ("cnn", goldens[m]);
    GstHarness *h = new_harness ("small.safetensors", "stride", 96, "postprocess", (gint) m + 1,
        NULL);
    GEnumClass *ec = g_type_class_ref (g_type_from_name ("GstConyVggishPostprocess"));
    gint pp = -1;
    g_object_get (h->element, "postprocess", &pp, NULL);
    g_assert_cmpstr (g_enum_get_value (ec, pp)->value_nick, ==, names[m]);
    g_type_class_unref (ec);
    gst_harness_set_src_caps_str (h, TOKEN_CAPS ("1", "100/1"));
    cony_test_push_tokens (h, x->data, D, 0, n_patches * 96, 12, 0, 10 * MS, FALSE);
    for (gsize p = 0; p < n_patches; p++) {
      GstBuffer *buf = gst_harness_pull (h);
      GstMapInfo map;
      gst_buffer_map (buf, &map, GST_MAP_READ);
      const float *got = (const float *) map.data;
      for (guint j = 0; j < OUT; j++) {
        g_assert_cmpfloat (got[j], ==, floorf (got[j]));
        g_assert_cmpfloat (got[j], >=, 0.0f);
        g_assert_cmpfloat (got[j], <=, 255.0f);
        g_assert_cmpfloat (fabsf (got[j] - want->data[p * OUT + j]), <=, 1.0f);
      }
      gst_buffer_unmap (buf, &map);
      gst_buffer_unref (buf);
    }
    gst_harness_teardown (h);
    cony_npy_array_free (want);
  }
  cony_npy_array_free (x);
}

/* Any geometry the engine takes: the odd model, 20 frames of 12 x 2; the
 * window is left at its default, so it comes from the model. */
static void
test_other_geometry (void)
{
  GstHarness *h = new_harness ("odd.safetensors", "stride", 5, NULL);
  gst_harness_set_src_caps_str (h,
      "other/tensors,format=static,num_tensors=1,types=float32,"
      "dimensions=(string)24:1,framerate=100/1");
  GstCaps *caps = gst_pad_get_current_caps (h->sinkpad);
  g_assert_cmpstr (gst_structure_get_string (gst_caps_get_structure (caps, 0), "dimensions"), ==,
      "10:1");
  gst_caps_unref (caps);
  float *x = make_frames (30, 24, 13);
  GstBuffer *buf = gst_buffer_new_memdup (x, 30 * 24 * sizeof (float));
  GST_BUFFER_PTS (buf) = 0;
  g_assert_cmpint (gst_harness_push (h, buf), ==, GST_FLOW_OK);
  g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, 3);
  buf = gst_harness_pull (h);
  g_assert_cmpuint (gst_buffer_get_size (buf), ==, 10 * sizeof (float));
  gst_buffer_unref (buf);
  gst_harness_teardown (h);
  g_free (x);
}

/* A MobileNet file (tests/golden/mobilenet: 21 frames of 16 bands, 10 scores, a
 * 24-d embedding): non-overlapping windows of the golden patches give the float64
 * reference's scores or embedding, per the output property; the caps follow. */
static void
test_mobilenet_outputs (void)
{
  ConyNpyArray *x = cony_test_load_golden_npy ("mobilenet", "input.npy");
  const char *nicks[] = { "scores", "embedding" };
  const guint dims[] = { 10, 24 };
  for (guint o = 0; o < 2; o++) {
    g_autofree char *file = g_strdup_printf ("f32_%s.npy", nicks[o]);
    ConyNpyArray *want = cony_test_load_golden_npy ("mobilenet", file);
    GstElement *el = cony_test_element_new ("conyvggish", NULL, NULL);
    g_autofree char *path = cony_test_golden_path ("mobilenet", "f32.safetensors");
    guint stride = 0;
    g_object_get (el, "stride", &stride, NULL);
    g_assert_cmpuint (stride, ==, 25); /* 0.25 s of 10 ms frames */
    gst_util_set_object_arg (G_OBJECT (el), "output", nicks[o]);
    g_object_set (el, "model", path, "stride", 21, NULL);
    GstHarness *h = cony_test_harness_take (el);
    gst_harness_set_src_caps_str (h,
        "other/tensors,format=static,num_tensors=1,"
        "types=float32,dimensions=(string)16:1,framerate=100/1");
    GstCaps *caps = gst_pad_get_current_caps (h->sinkpad);
    g_autofree char *dim = g_strdup_printf ("%u:1", dims[o]);
    g_assert_cmpstr (gst_structure_get_string (gst_caps_get_structure (caps, 0), "dimensions"), ==,
        dim);
    gst_caps_unref (caps);
    gsize n = x->shape[0];
    cony_test_push_tokens (h, x->data, 16, 0, n * 21, 5, 0, 10 * MS, FALSE);
    g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, n);
    for (gsize p = 0; p < n; p++) {
      GstBuffer *buf = gst_harness_pull (h);
      g_assert_cmpuint (GST_BUFFER_PTS (buf), ==, p * 210 * MS);
      GstMapInfo map;
      g_assert_true (gst_buffer_map (buf, &map, GST_MAP_READ));
      g_assert_cmpuint (map.size, ==, dims[o] * sizeof (float));
      double e = cony_test_rel_err ((const float *) map.data, want->data + p * dims[o], dims[o]);
      g_assert_cmpfloat (e, <=, 1e-4);
      gst_buffer_unmap (buf, &map);
      gst_buffer_unref (buf);
    }
    gst_harness_teardown (h);
    cony_npy_array_free (want);
  }
  cony_npy_array_free (x);
}

/* precision=auto runs the int8 YAMNet (the shipped one with its .tflite's activation
 * quantisation) in int8 and precision=float in float, each equal to libcony's engine
 * at that precision (precision-in-use says which); int8 on a float file does not start. */
static void
test_precision (void)
{
  g_autofree char *yam = cony_test_yamnet_int8 ();
  g_autofree float *x = make_frames (96, D, 9);
  const char *nicks[] = { "auto", "float" };
  const char *in_use[] = { "int8, all 30 layers", "float (forced" };
  for (guint i = 0; i < 2; i++) {
    GstElement *el = cony_test_element_new ("conyvggish", yam, NULL);
    gst_util_set_object_arg (G_OBJECT (el), "precision", nicks[i]);
    g_autofree char *before = NULL;
    g_object_get (el, "precision-in-use", &before, NULL);
    g_assert_null (before);
    GstHarness *h = cony_test_harness_take (el);
    gst_harness_set_src_caps_str (h, TOKEN_CAPS ("1", "100/1"));
    g_autofree char *now = NULL;
    g_object_get (h->element, "precision-in-use", &now, NULL);
    g_assert_true (g_str_has_prefix (now, in_use[i]));
    cony_test_push_tokens (h, x, D, 0, 96, 1, 0, 10 * MS, FALSE);
    GstBuffer *buf = gst_harness_pull (h);
    g_autoptr (GError) error = NULL;
    g_autoptr (ConyCnn) cnn = cony_cnn_load (yam, &error);
    g_assert_no_error (error);
    ConyCnnPrecision p = CONY_CNN_PRECISION_AUTO;
    g_assert_true (cony_cnn_precision_from_string (nicks[i], &p));
    g_assert_true (cony_cnn_set_precision (cnn, p, &error));
    float want[521];
    cony_cnn_forward (cnn, x, want);
    GstMapInfo map;
    g_assert_true (gst_buffer_map (buf, &map, GST_MAP_READ));
    g_assert_cmpmem (map.data, map.size, want, sizeof want);
    gst_buffer_unmap (buf, &map);
    gst_buffer_unref (buf);
    gst_harness_teardown (h);
  }
  g_autofree char *small = cony_test_golden_path ("cnn", "small.safetensors");
  GstElement *el = cony_test_element_new ("conyvggish", small, NULL);
  gst_util_set_object_arg (G_OBJECT (el), "precision", "int8");
  g_error_free (cony_test_assert_start_fails (el,
      (const char *[]){ "precision", "needs a quantised model", NULL }));
  gst_object_unref (el);
  g_unlink (yam);
}

static void
on_handoff (GstElement *sink, GstBuffer *buf, GstPad *pad, gpointer data)
{
  g_ptr_array_add ((GPtrArray *) data, gst_buffer_ref (buf));
}

/* batch=4 behind a non-live source (appsrc): windows wait and run four at a
 * time, the last partial batch goes out before EOS with the padded tail window,
 * and every output equals the one-window engine result with the same timestamps. */
static void
test_batch_non_live (void)
{
  /* 1 + (300 - 96) / 25 = 9 full windows: two batches of 4, then at EOS the 9th and
   * the tail (frames 296-299) in a 10th at 225, padded with 21 silent frames */
  gsize n = 300;
  float *x = make_frames (n + 21, D, 21);
  for (gsize i = n * D; i < (n + 21) * D; i++)
    x[i] = logf (0.01f);
  ConyCnn *cnn = cony_test_load_golden_cnn ("cnn", "small.safetensors");
  char *model = cony_test_golden_path ("cnn", "small.safetensors");
  char *desc =
      g_strdup_printf ("appsrc name=src format=time caps=\"" TOKEN_CAPS ("1",
                           "100/1") "\" ! conyvggish name=v batch=4 model=\"%s\" ! fakesink name=sink signal-handoffs=true "
                                    "sync=false",
          model);
  GError *error = NULL;
  GstElement *pipe = gst_parse_launch (desc, &error);
  g_assert_no_error (error);
  GstElement *src = gst_bin_get_by_name (GST_BIN (pipe), "src");
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipe), "sink");
  GstElement *v = gst_bin_get_by_name (GST_BIN (pipe), "v");
  guint batch = 0;
  g_object_get (v, "batch", &batch, NULL);
  g_assert_cmpuint (batch, ==, 4);
  GPtrArray *got = g_ptr_array_new_with_free_func ((GDestroyNotify) gst_buffer_unref);
  g_signal_connect (sink, "handoff", G_CALLBACK (on_handoff), got);
  g_assert_cmpint (gst_element_set_state (pipe, GST_STATE_PLAYING), !=, GST_STATE_CHANGE_FAILURE);
  for (gsize i = 0; i < n; i += 7) {
    gsize k = MIN ((gsize) 7, n - i);
    GstBuffer *buf = gst_buffer_new_memdup (x + i * D, k * D * sizeof (float));
    GST_BUFFER_PTS (buf) = 2 * GST_SECOND + i * 10 * MS;
    GST_BUFFER_DURATION (buf) = k * 10 * MS;
    GstFlowReturn fr;
    g_signal_emit_by_name (src, "push-buffer", buf, &fr);
    gst_buffer_unref (buf);
    g_assert_cmpint (fr, ==, GST_FLOW_OK);
  }
  GstFlowReturn fr;
  g_signal_emit_by_name (src, "end-of-stream", &fr);
  GstBus *bus = gst_element_get_bus (pipe);
  GstMessage *msg = gst_bus_timed_pop_filtered (bus, 60 * GST_SECOND,
      GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  g_assert_nonnull (msg);
  g_assert_cmpint (GST_MESSAGE_TYPE (msg), ==, GST_MESSAGE_EOS);
  gst_message_unref (msg);
  gst_element_set_state (pipe, GST_STATE_NULL);

  g_assert_cmpuint (got->len, ==, 10);
  for (guint w = 0; w < got->len; w++) {
    GstBuffer *buf = got->pdata[w];
    g_assert_cmpuint (GST_BUFFER_OFFSET (buf), ==, w);
    check_window (buf, cnn, x, w, 25, 2 * GST_SECOND, 250 * MS);
  }
  g_ptr_array_unref (got);
  gst_object_unref (bus);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_object_unref (v);
  gst_object_unref (pipe);
  cony_cnn_free (cnn);
  g_free (desc);
  g_free (model);
  g_free (x);
}

/* A live upstream (the harness answers LATENCY with live=TRUE): batch is
 * ignored, each window comes out as soon as it is complete. */
static void
test_batch_live_is_immediate (void)
{
  float *x = make_frames (121, D, 22);
  ConyCnn *cnn;
  GstHarness *h = small_harness (&cnn, "batch", 8, NULL);
  cony_test_push_tokens (h, x, D, 0, 96, 4, 0, 10 * MS, FALSE);
  g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, 1);
  cony_test_push_tokens (h, x, D, 96, 25, 5, 96 * 10 * MS, 10 * MS, FALSE);
  g_assert_cmpuint (check_windows (h, cnn, x, 25, 0, 250 * MS), ==, 2);
  gst_harness_teardown (h);
  cony_cnn_free (cnn);
  g_free (x);
}

/* model is read on READY->PAUSED: set while PLAYING it is refused and the old value
 * reads back; in READY it takes (#31.5). */
static void
test_ready_only_properties (void)
{
  const char *props[] = { "model", "/tmp/other.safetensors", NULL };
  char *path = cony_test_golden_path ("cnn", "small.safetensors");
  cony_test_assert_ready_only_props ("conyvggish", path, TOKEN_CAPS ("1", "100/1"), props);
  g_free (path);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/conyvggish/matches-torch-golden", test_matches_torch_golden);
  g_test_add_func ("/conyvggish/timestamps-odd-buffers", test_timestamps_odd_buffers);
  g_test_add_data_func ("/conyvggish/stride-above-window", &stride_above_window, test_stream);
  g_test_add_data_func ("/conyvggish/long-stream", &long_stream, test_stream);
  g_test_add_func ("/conyvggish/latency", test_latency);
  g_test_add_data_func ("/conyvggish/flush", &reset_flush, test_reset);
  g_test_add_data_func ("/conyvggish/discont", &reset_discont, test_reset);
  g_test_add_data_func ("/conyvggish/caps-change", &reset_caps, test_reset);
  g_test_add_data_func ("/conyvggish/gap", &reset_gap, test_reset);
  g_test_add_func ("/conyvggish/eos", test_eos);
  g_test_add_func ("/conyvggish/nan", test_nan_tokens);
  g_test_add_func ("/conyvggish/wrong-caps-refused", test_wrong_caps_refused);
  g_test_add_func ("/conyvggish/refusal-named", test_refusal_named);
  g_test_add_func ("/conyvggish/bad-models", test_bad_models);
  g_test_add_func ("/conyvggish/postprocess", test_postprocess);
  g_test_add_func ("/conyvggish/other-geometry", test_other_geometry);
  g_test_add_func ("/conyvggish/mobilenet-outputs", test_mobilenet_outputs);
  g_test_add_func ("/conyvggish/precision", test_precision);
  g_test_add_func ("/conyvggish/batch-non-live", test_batch_non_live);
  g_test_add_func ("/conyvggish/batch-live-is-immediate", test_batch_live_is_immediate);
  g_test_add_func ("/conyvggish/ready-only-properties", test_ready_only_properties);
  return g_test_run ();
}
