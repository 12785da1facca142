/* conymel element tests (GstHarness): timestamps for odd buffer sizes, latency,
 * flush / discont / GAP / EOS behaviour, NaN input, caps.
 *
 * The plugin is found through GST_PLUGIN_PATH (set by tests/elements/meson.build). The
 * reference frames come from libcony's whole-signal cony_mel_compute(). */
#include "cony/mel.h"
#include "gstconytokens.h"

#include <gst/gst.h>
#include <gst/check/gstharness.h>

#include "gsttestutil.h"
#include "testutil.h"
#include <math.h>
#include <string.h>

#define RATE 16000
#define N_MELS 64
#define F32_CAPS "audio/x-raw,format=F32LE,rate=16000,channels=1,layout=interleaved"
#define MS (GST_MSECOND)
/* The settings conymel writes into its src caps, VGGish's by default. */
#define MEL_FIELDS(log_offset) \
  ",mel-sample-rate=16000,mel-window-length=400,mel-hop-length=160," \
  "mel-fft-length=512,mel-n-mels=64,mel-fmin=125.0,mel-fmax=7500.0,mel-log-offset=" log_offset

/* Deterministic test signal: a chirp plus noise. */
static float *
make_signal (gsize n, guint32 seed)
{
  float *x = g_new (float, n);
  GRand *r = g_rand_new_with_seed (seed);
  for (gsize i = 0; i < n; i++) {
    double t = (double) i / RATE;
    x[i] = (float) (0.5 * sin (2 * G_PI * (200 + 3000 * t) * t) + 0.1 * (g_rand_double (r) - 0.5));
  }
  g_rand_free (r);
  return x;
}

/* Reference frames of @x with the VGGish configuration (or @config). */
static float *
reference_frames (const ConyMelConfig *config, const float *x, gsize n, gsize *n_frames)
{
  ConyMelConfig vggish;
  GError *error = NULL;
  if (config == NULL) {
    cony_mel_config_init_vggish (&vggish);
    config = &vggish;
  }
  ConyMel *mel = cony_mel_new (config, &error);
  g_assert_no_error (error);
  float *frames = cony_mel_compute (mel, x, n, n_frames);
  cony_mel_free (mel);
  return frames;
}

static GstBuffer *
f32_buffer (const float *x, gsize n, GstClockTime pts)
{
  GstBuffer *buf = gst_buffer_new_memdup (x, n * sizeof (float));
  GST_BUFFER_PTS (buf) = pts;
  GST_BUFFER_DURATION (buf) = gst_util_uint64_scale (n, GST_SECOND, RATE);
  return buf;
}

/* A harness around a conymel with properties "name", value, ..., NULL. */
static GstHarness *
new_harness (const gchar *first_prop, ...)
{
  va_list ap;
  va_start (ap, first_prop);
  GstHarness *h = cony_test_harness_new_valist ("conymel", NULL, first_prop, ap);
  va_end (ap);
  return h;
}

/* Pushes @x from @start in pieces whose sizes cycle through @sizes, with
 * timestamps from the sample count (base + offset / rate). */
static void
push_pieces (GstHarness *h, const float *x, gsize n, const gsize *sizes, guint n_sizes,
    GstClockTime base)
{
  gsize off = 0;
  for (guint i = 0; off < n; i++) {
    gsize len = MIN (sizes[i % n_sizes], n - off);
    GstBuffer *buf = f32_buffer (x + off, len,
        base + gst_util_uint64_scale (off, GST_SECOND, RATE));
    g_assert_cmpint (gst_harness_push (h, buf), ==, GST_FLOW_OK);
    off += len;
  }
}

/* Pulls every queued buffer and checks it against reference frames
 * @ref[first..] with PTS base + k * frame_ns. Returns the number pulled. */
static guint
check_frames (GstHarness *h, const float *ref, gsize n_ref, gsize first, GstClockTime base,
    GstClockTime frame_ns, guint k)
{
  GstBuffer *buf;
  guint n = 0;
  gsize idx = first;
  while ((buf = gst_harness_try_pull (h)) != NULL) {
    GstMapInfo map;
    g_assert_true (gst_buffer_map (buf, &map, GST_MAP_READ));
    g_assert_cmpuint (map.size % (N_MELS * sizeof (float)), ==, 0);
    guint frames = map.size / (N_MELS * sizeof (float));
    g_assert_cmpuint (frames, <=, k);
    g_assert_cmpuint (GST_BUFFER_PTS (buf), ==, base + (idx - first) * frame_ns);
    g_assert_cmpuint (GST_BUFFER_DURATION (buf), ==, frames * frame_ns);
    const float *v = (const float *) map.data;
    for (guint f = 0; f < frames; f++, idx++) {
      g_assert_cmpuint (idx, <, n_ref);
      for (guint j = 0; j < N_MELS; j++)
        g_assert_cmpfloat_with_epsilon (v[f * N_MELS + j], ref[idx * N_MELS + j], 1e-5);
    }
    gst_buffer_unmap (buf, &map);
    gst_buffer_unref (buf);
    n++;
  }
  g_assert_cmpuint (idx, ==, n_ref);
  return n;
}

/* The harness' output caps are conymel's tensors of @dims ("64:K") at @rate with the
 * VGGish settings but for @log_offset. */
static void
check_src_caps (GstHarness *h, const char *dims, const char *rate, const char *log_offset)
{
  GstCaps *caps = gst_pad_get_current_caps (h->sinkpad);
  g_assert_nonnull (caps);
  const char *fmt = "other/tensors,format=static,num_tensors=1,types=float32,"
                    "dimensions=(string)%s,framerate=%s,lookahead=3/200" MEL_FIELDS ("%s");
  gchar *str = g_strdup_printf (fmt, dims, rate, log_offset);
  GstCaps *want = gst_caps_from_string (str);
  g_free (str);
  g_assert_true (gst_caps_is_equal (caps, want));
  gst_caps_unref (want);
  gst_caps_unref (caps);
}

/* Pulls the next buffer: the first of a new stream, DISCONT, at @pts. */
static void
check_restart (GstHarness *h, GstClockTime pts)
{
  GstBuffer *first = gst_harness_try_pull (h);
  g_assert_nonnull (first);
  g_assert_true (GST_BUFFER_IS_DISCONT (first));
  g_assert_cmpuint (GST_BUFFER_PTS (first), ==, pts);
  gst_buffer_unref (first);
}

/* ------------------------------------------------------------------------ */

static void
test_caps_negotiated (void)
{
  GstHarness *h = new_harness (NULL);
  gst_harness_set_src_caps_str (h, F32_CAPS);
  /* lookahead: a frame reads 400 samples (25 ms) but lasts one 160-sample hop */
  check_src_caps (h, "64:1", "100/1", "0.01");

  /* Upstream is asked for the configured rate only. */
  GstCaps *peer = gst_pad_peer_query_caps (h->srcpad, NULL);
  GstStructure *s = gst_caps_get_structure (peer, 0);
  gint rate = 0;
  g_assert_true (gst_structure_get_int (s, "rate", &rate));
  g_assert_cmpint (rate, ==, RATE);
  gst_caps_unref (peer);
  gst_harness_teardown (h);
}

static void
test_wrong_caps_refused (void)
{
  const gchar *bad[] = {
    "audio/x-raw,format=F32LE,rate=44100,channels=1,layout=interleaved",
    "audio/x-raw,format=F32LE,rate=16000,channels=2,layout=interleaved",
    "audio/x-raw,format=S32LE,rate=16000,channels=1,layout=interleaved",
    "other/tensors,format=static,num_tensors=1,types=float32,dimensions=(string)64:1,framerate=100/1",
  };
  float x[500] = { 0 };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    GstHarness *h = new_harness (NULL);
    GstPad *sinkpad = gst_element_get_static_pad (h->element, "sink");
    gst_pad_push_event (h->srcpad, gst_event_new_stream_start ("test"));
    GstCaps *caps = gst_caps_from_string (bad[i]);
    g_assert_false (gst_pad_peer_query_accept_caps (h->srcpad, caps));
    gst_pad_push_event (h->srcpad, gst_event_new_caps (caps));
    gst_caps_unref (caps);
    g_assert_false (gst_pad_has_current_caps (sinkpad));
    GstSegment seg;
    gst_segment_init (&seg, GST_FORMAT_TIME);
    gst_pad_push_event (h->srcpad, gst_event_new_segment (&seg));
    g_assert_cmpint (gst_pad_push (h->srcpad, f32_buffer (x, 500, 0)), ==, GST_FLOW_NOT_NEGOTIATED);
    g_assert_null (gst_harness_try_pull (h));
    gst_object_unref (sinkpad);
    gst_harness_teardown (h);
  }

  /* Data without accepted caps is refused, not processed. */
  GstHarness *h = new_harness (NULL);
  gst_pad_push_event (h->srcpad, gst_event_new_stream_start ("test"));
  GstBus *bus = cony_test_attach_bus (h);
  GstPad *sinkpad = gst_element_get_static_pad (h->element, "sink");
  /* Called directly: the pad itself would already refuse data before a segment. */
  g_assert_cmpint (GST_PAD_CHAINFUNC (
                       sinkpad) (sinkpad, GST_OBJECT (h->element), f32_buffer (x, 500, 0)),
      ==, GST_FLOW_NOT_NEGOTIATED);
  gst_object_unref (sinkpad);
  g_error_free (cony_test_pop_gerror (bus, GST_MESSAGE_ERROR, 0, 0, NULL));
  g_assert_null (gst_harness_try_pull (h));
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
}

/* Refused caps are named (#46.5), not just "not-negotiated": what conymel takes, what
 * upstream offers and which converter to add, as a CORE/NEGOTIATION error, whether
 * upstream asks with a CAPS query (a source negotiating) or sends a CAPS event. */
static void
test_refusal_named (void)
{
  static const struct {
    const char *caps, *message;
  } cases[] = {
    { "audio/x-raw,format=S16LE,rate=44100,channels=2,layout=interleaved",
        "conymel takes 16000 Hz mono audio (F32LE or S16LE), got 44100 Hz stereo S16LE audio: "
        "add audioresample and audioconvert before it" },
    { "audio/x-raw,format=F32LE,rate=16000,channels=2,layout=interleaved",
        "conymel takes 16000 Hz mono audio (F32LE or S16LE), got 16000 Hz stereo F32LE audio: "
        "add audioconvert before it" },
    { "audio/x-raw,format=F32LE,rate=48000,channels=1,layout=interleaved",
        "conymel takes 16000 Hz mono audio (F32LE or S16LE), got 48000 Hz mono F32LE audio: "
        "add audioresample before it" },
    { "video/x-raw,format=RGB,width=4,height=4",
        "conymel takes 16000 Hz mono audio (F32LE or S16LE), got video/x-raw: decode and "
        "convert first (decodebin ! audioconvert ! audioresample)" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    for (guint by_query = 0; by_query < 2; by_query++)
      cony_test_assert_caps_named (new_harness (NULL), cases[i].caps, by_query, cases[i].message);
  /* another rate is named as the one the element takes */
  cony_test_assert_caps_named (new_harness ("sample-rate", 22050, NULL),
      "audio/x-raw,format=S16LE,rate=16000,channels=1,layout=interleaved", TRUE,
      "conymel takes 22050 Hz mono audio (F32LE or S16LE), got 16000 Hz mono S16LE audio: "
      "add audioresample before it");
}

/* Odd buffer sizes (37, 160, 1001 samples) and a start time that is not a
 * multiple of anything: PTS = start + k * 10 ms exactly, duration 10 ms, and
 * frames equal to the whole-signal computation. */
static void
test_timestamps_odd_sizes (void)
{
  const gsize sizes_a[] = { 37, 160, 1001 };
  const gsize sizes_b[] = { 1001 };
  const gsize sizes_c[] = { 37 };
  const gsize *sets[] = { sizes_a, sizes_b, sizes_c };
  const guint n_sets[] = { 3, 1, 1 };
  const GstClockTime bases[] = { 0, 1234567891 };
  gsize n = 16000, n_ref;
  float *x = make_signal (n, 1);
  float *ref = reference_frames (NULL, x, n, &n_ref);
  g_assert_cmpuint (n_ref, ==, 98);

  for (guint b = 0; b < G_N_ELEMENTS (bases); b++) {
    for (guint s = 0; s < G_N_ELEMENTS (sets); s++) {
      GstHarness *h = new_harness (NULL);
      gst_harness_set_src_caps_str (h, F32_CAPS);
      push_pieces (h, x, n, sets[s], n_sets[s], bases[b]);
      /* The first output is flagged DISCONT. */
      check_restart (h, bases[b]);
      guint got = check_frames (h, ref, n_ref, 1, bases[b] + 10 * MS, 10 * MS, 1);
      g_assert_cmpuint (got, ==, 97);
      gst_harness_teardown (h);
    }
  }
  g_free (ref);
  g_free (x);
}

/* A 256-sample hop at 16 kHz is 62.5 frames/s: caps say 125/2 and frame k
 * starts exactly k * 16 ms after the anchor. */
static void
test_fractional_rate (void)
{
  ConyMelConfig config;
  cony_mel_config_init_vggish (&config);
  config.hop_length = 256;
  gsize n = 5000, n_ref;
  float *x = make_signal (n, 2);
  float *ref = reference_frames (&config, x, n, &n_ref);
  g_assert_cmpuint (n_ref, ==, 1 + (5000 - 400) / 256);

  GstHarness *h = new_harness ("hop-length", 256, NULL);
  gst_harness_set_src_caps_str (h, F32_CAPS);
  GstCaps *caps = gst_pad_get_current_caps (h->sinkpad);
  gint fn = 0, fd = 0;
  g_assert_true (
      gst_structure_get_fraction (gst_caps_get_structure (caps, 0), "framerate", &fn, &fd));
  g_assert_cmpint (fn, ==, 125);
  g_assert_cmpint (fd, ==, 2);
  gst_caps_unref (caps);
  const gsize sizes[] = { 37, 1001 };
  push_pieces (h, x, n, sizes, 2, 7 * GST_SECOND);
  check_frames (h, ref, n_ref, 0, 7 * GST_SECOND, 16 * MS, 1);
  gst_harness_teardown (h);
  g_free (ref);
  g_free (x);
}

static void
test_s16_input (void)
{
  gsize n = 4000, n_ref;
  gint16 *s = g_new (gint16, n);
  float *x = g_new (float, n);
  float *sig = make_signal (n, 3);
  for (gsize i = 0; i < n; i++) {
    s[i] = (gint16) lrintf (sig[i] * 30000.0f);
    x[i] = s[i] / 32768.0f;
  }
  float *ref = reference_frames (NULL, x, n, &n_ref);
  GstHarness *h = new_harness (NULL);
  gst_harness_set_src_caps_str (h,
      "audio/x-raw,format=S16LE,rate=16000,channels=1,layout=interleaved");
  GstBuffer *buf = gst_buffer_new_memdup (s, n * sizeof (gint16));
  GST_BUFFER_PTS (buf) = 0;
  g_assert_cmpint (gst_harness_push (h, buf), ==, GST_FLOW_OK);
  check_frames (h, ref, n_ref, 0, 0, 10 * MS, 1);
  gst_harness_teardown (h);
  g_free (ref);
  g_free (sig);
  g_free (x);
  g_free (s);
}

/* frames-per-buffer=10: dimensions 64:10 at 10/1; 98 frames give 9 full
 * buffers and, at EOS, one of 8 frames announced by caps 64:8. */
static void
test_frames_per_buffer_and_eos (void)
{
  gsize n = 16000, n_ref;
  float *x = make_signal (n, 4);
  float *ref = reference_frames (NULL, x, n, &n_ref);
  GstHarness *h = new_harness ("frames-per-buffer", 10, NULL);
  gst_harness_set_src_caps_str (h, F32_CAPS);
  check_src_caps (h, "64:10", "10/1", "0.01");

  const gsize sizes[] = { 1001, 37 };
  push_pieces (h, x, n, sizes, 2, 0);
  g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, 9);
  g_assert_true (gst_harness_push_event (h, gst_event_new_eos ()));
  g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, 10);
  guint got = check_frames (h, ref, n_ref, 0, 0, 10 * MS, 10);
  g_assert_cmpuint (got, ==, 10);

  /* The last caps before EOS announce the 8-frame buffer. */
  GstEvent *ev;
  GstCaps *last_caps = NULL;
  gboolean eos = FALSE;
  while ((ev = gst_harness_try_pull_event (h)) != NULL) {
    if (GST_EVENT_TYPE (ev) == GST_EVENT_CAPS) {
      GstCaps *c;
      gst_event_parse_caps (ev, &c);
      gst_caps_replace (&last_caps, c);
    }
    if (GST_EVENT_TYPE (ev) == GST_EVENT_EOS)
      eos = TRUE;
    gst_event_unref (ev);
  }
  g_assert_true (eos);
  g_assert_nonnull (last_caps);
  g_assert_cmpstr (gst_structure_get_string (gst_caps_get_structure (last_caps, 0), "dimensions"),
      ==, "64:8");
  gst_caps_unref (last_caps);
  gst_harness_teardown (h);
  g_free (ref);
  g_free (x);
}

/* With one frame per buffer, EOS drops the samples that do not fill a window. */
static void
test_eos_drops_partial_window (void)
{
  gsize n = 1000;
  float *x = make_signal (n, 5);
  GstHarness *h = new_harness (NULL);
  gst_harness_set_src_caps_str (h, F32_CAPS);
  gst_harness_push (h, f32_buffer (x, n, 0));
  g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, 4);
  g_assert_true (gst_harness_push_event (h, gst_event_new_eos ()));
  g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, 4);
  gst_harness_teardown (h);
  g_free (x);
}

static void
test_latency (void)
{
  struct {
    const gchar *caps;
    guint rate, window, fpb;
    GstClockTime want;
  } cases[] = {
    { F32_CAPS, 16000, 400, 1, 25 * MS },
    { F32_CAPS, 16000, 400, 10, 115 * MS }, /* 400 + 9 * 160 samples */
    { "audio/x-raw,format=F32LE,rate=44100,channels=1,layout=interleaved", 44100, 400, 1,
        9070295 }, /* ceil (400 / 44100 s) */
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    GstHarness *h = new_harness ("sample-rate", cases[i].rate, "window-length", cases[i].window,
        "frames-per-buffer", cases[i].fpb, "fmax", 7500.0, NULL);
    gst_harness_set_src_caps_str (h, cases[i].caps);
    gst_harness_set_upstream_latency (h, 0);
    g_assert_cmpuint (gst_harness_query_latency (h), ==, cases[i].want);
    gst_harness_set_upstream_latency (h, 7 * MS);
    g_assert_cmpuint (gst_harness_query_latency (h), ==, cases[i].want + 7 * MS);
    gst_harness_teardown (h);
  }
}

/* After a flush, the same input gives the same output, even when the flush
 * interrupted a partial window. */
static void
test_flush_resets (void)
{
  gsize n = 3000, n_ref;
  float *x = make_signal (n, 6);
  float *junk = make_signal (100, 7);
  float *ref = reference_frames (NULL, x, n, &n_ref);
  const gsize sizes[] = { 37, 160, 1001 };
  GstHarness *h = new_harness ("frames-per-buffer", 3, NULL);
  gst_harness_set_src_caps_str (h, F32_CAPS);

  push_pieces (h, x, n, sizes, 3, GST_SECOND);
  gst_harness_push (h,
      f32_buffer (junk, 100, GST_SECOND + gst_util_uint64_scale (n, GST_SECOND, RATE)));
  /* 17 frames in 5 full buffers; the 18th frame and the junk are pending. */
  check_frames (h, ref, 15, 0, GST_SECOND, 10 * MS, 3);

  cony_test_flush (h);

  push_pieces (h, x, n, sizes, 3, GST_SECOND);
  check_restart (h, GST_SECOND);
  check_frames (h, ref, 15, 3, GST_SECOND + 30 * MS, 10 * MS, 3);
  gst_harness_teardown (h);
  g_free (ref);
  g_free (junk);
  g_free (x);
}

/* A DISCONT buffer re-anchors the clock at its PTS and starts framing afresh
 * (no frame mixes samples from both sides). */
static void
test_discont_reanchors (void)
{
  gsize n = 1000, n1, n2;
  float *a = make_signal (n, 8);
  float *b = make_signal (n, 9);
  float *ref_a = reference_frames (NULL, a, n, &n1);
  float *ref_b = reference_frames (NULL, b, n, &n2);
  GstHarness *h = new_harness (NULL);
  gst_harness_set_src_caps_str (h, F32_CAPS);

  gst_harness_push (h, f32_buffer (a, n, 0));
  check_frames (h, ref_a, n1, 0, 0, 10 * MS, 1);

  GstClockTime t = 10 * GST_SECOND + 3;
  GstBuffer *buf = f32_buffer (b, 137, t);
  GST_BUFFER_FLAG_SET (buf, GST_BUFFER_FLAG_DISCONT);
  gst_harness_push (h, buf);
  gst_harness_push (h,
      f32_buffer (b + 137, n - 137, t + gst_util_uint64_scale (137, GST_SECOND, RATE)));
  check_restart (h, t);
  check_frames (h, ref_b, n2, 1, t + 10 * MS, 10 * MS, 1);
  gst_harness_teardown (h);
  g_free (ref_a);
  g_free (ref_b);
  g_free (a);
  g_free (b);
}

/* A change of input format drains and restarts framing at the next buffer:
 * no frame mixes samples from before and after the change. */
static void
test_caps_change_resets (void)
{
  gsize n = 1000, n1, n2;
  float *a = make_signal (n, 14);
  float *sig = make_signal (n, 15);
  gint16 *s = g_new (gint16, n);
  float *b = g_new (float, n);
  for (gsize i = 0; i < n; i++) {
    s[i] = (gint16) lrintf (sig[i] * 20000.0f);
    b[i] = s[i] / 32768.0f;
  }
  float *ref_a = reference_frames (NULL, a, n, &n1);
  float *ref_b = reference_frames (NULL, b, n, &n2);
  GstHarness *h = new_harness ("frames-per-buffer", 3, NULL);
  gst_harness_set_src_caps_str (h, F32_CAPS);
  gst_harness_push (h, f32_buffer (a, n, 0));
  /* 4 frames: one full buffer of 3 now */
  g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, 1);

  GstCaps *caps = gst_caps_from_string (
      "audio/x-raw,format=S16LE,rate=16000,channels=1,layout=interleaved");
  g_assert_true (gst_pad_push_event (h->srcpad, gst_event_new_caps (caps)));
  gst_caps_unref (caps);
  /* the 4th frame was drained by the caps change */
  check_frames (h, ref_a, n1, 0, 0, 10 * MS, 3);

  GstBuffer *buf = gst_buffer_new_memdup (s, n * sizeof (gint16));
  GstClockTime t = gst_util_uint64_scale (n, GST_SECOND, RATE);
  GST_BUFFER_PTS (buf) = t;
  g_assert_cmpint (gst_harness_push (h, buf), ==, GST_FLOW_OK);
  g_assert_true (gst_harness_push_event (h, gst_event_new_eos ()));
  check_restart (h, t);
  check_frames (h, ref_b, n2, 3, t + 30 * MS, 10 * MS, 3);
  gst_harness_teardown (h);
  g_free (ref_a);
  g_free (ref_b);
  g_free (a);
  g_free (b);
  g_free (s);
  g_free (sig);
}

/* A GAP is framed as silence: the output is that of the signal with zeros in
 * the gap, on an unbroken frame clock. */
static void
test_gap_is_silence (void)
{
  gsize n = 1000, gap = 1600, n_ref;
  float *a = make_signal (n, 10);
  float *b = make_signal (n, 11);
  float *all = g_new0 (float, 2 * n + gap);
  memcpy (all, a, n * sizeof (float));
  memcpy (all + n + gap, b, n * sizeof (float));
  float *ref = reference_frames (NULL, all, 2 * n + gap, &n_ref);
  g_assert_cmpuint (n_ref, ==, 21);

  GstHarness *h = new_harness (NULL);
  gst_harness_set_src_caps_str (h, F32_CAPS);
  gst_harness_push (h, f32_buffer (a, n, 0));
  g_assert_true (gst_harness_push_event (h, gst_event_new_gap (62500 * GST_USECOND, 100 * MS)));
  gst_harness_push (h, f32_buffer (b, n, 162500 * GST_USECOND));
  check_frames (h, ref, n_ref, 0, 0, 10 * MS, 1);
  /* Frames entirely inside the gap are digital silence: log(0.01). */
  g_assert_cmpfloat_with_epsilon (ref[8 * N_MELS + 10], logf (0.01f), 1e-5);
  gst_harness_teardown (h);
  g_free (ref);
  g_free (all);
  g_free (a);
  g_free (b);
}

/* Half a second before the end of the 64-bit clock, a second of audio and a GAP
 * running past the end: frame times saturate at GST_CONY_TIME_MAX (they wrapped to 0
 * with anchor + k * hop / rate in unsigned arithmetic), in order, ends included. */
static void
test_clock_end (void)
{
  gsize n = 16000;
  float *x = make_signal (n, 3);
  GstHarness *h = new_harness ("frames-per-buffer", 4, NULL);
  gst_harness_set_src_caps_str (h, F32_CAPS);
  GstBuffer *in = f32_buffer (x, n, GST_CONY_TIME_MAX - 500 * MS);
  GST_BUFFER_DURATION (in) = GST_CLOCK_TIME_NONE; /* PTS + 1 s is past the end */
  g_assert_cmpint (gst_harness_push (h, in), ==, GST_FLOW_OK);
  g_assert_true (
      gst_harness_push_event (h, gst_event_new_gap (GST_CONY_TIME_MAX - 10 * MS, GST_SECOND)));
  GstBuffer *buf;
  GstClockTime prev_end = 0;
  guint frames = 0, at_end = 0;
  while ((buf = gst_harness_try_pull (h)) != NULL) {
    GstClockTime pts = GST_BUFFER_PTS (buf), dur = GST_BUFFER_DURATION (buf);
    g_assert_cmpuint (pts, >=, GST_CONY_TIME_MAX - 500 * MS);
    g_assert_cmpuint (pts, >=, prev_end);
    g_assert_true (GST_CLOCK_TIME_IS_VALID (dur));
    g_assert_cmpuint (dur, <=, GST_CONY_TIME_MAX - pts);
    prev_end = pts + dur;
    frames += gst_buffer_get_size (buf) / (N_MELS * sizeof (float));
    at_end += pts == GST_CONY_TIME_MAX;
    gst_buffer_unref (buf);
  }
  g_test_message ("%u frames, %u buffers stamped at the clock's end", frames, at_end);
  g_assert_cmpuint (frames, >=, 98);
  g_assert_cmpuint (at_end, >, 0);
  gst_harness_teardown (h);
  g_free (x);
}

/* The memory budget (#46.1). The largest FFT with 4096 bands (every value inside its
 * range) once made GLib abort on a 34 GB allocation, and 128 bands took 1.66 GB: the mel
 * weights are kept sparse now, so the largest FFT (2^18 now: FFmpeg's larger ones are
 * O(n^2)) runs in a few tens of MiB whatever n-mels (peak RSS measured over start, two
 * frames and stop; a dense matrix would be 2 GiB for 4096 bands). A batch too large for the budget fails the state change
 * with a LIBRARY/SETTINGS error naming the settings and the bytes, allocating nothing. */
static void
test_memory_budget (void)
{
  const guint n_mels[] = { 4096, 128 };
  gsize n = (1 << 18) + (1 << 16); /* two frames of 2^18 samples, 2^16 apart */
  float *x = make_signal (n, 4);
  for (guint i = 0; i < G_N_ELEMENTS (n_mels); i++) {
    cony_test_reset_peak_rss ();
    glong before = cony_test_status_kib ("VmRSS");
    GstHarness *h = new_harness ("fft-length", 1 << 18, "window-length", 1 << 18, "hop-length",
        1 << 16, "n-mels", n_mels[i], NULL);
    gst_harness_set_src_caps_str (h, F32_CAPS);
    g_assert_cmpint (gst_harness_push (h, f32_buffer (x, n, 0)), ==, GST_FLOW_OK);
    guint frames = 0;
    GstBuffer *buf;
    while ((buf = gst_harness_try_pull (h)) != NULL) {
      frames += gst_buffer_get_size (buf) / (n_mels[i] * sizeof (float));
      gst_buffer_unref (buf);
    }
    g_assert_cmpuint (frames, ==, 2);
    gst_harness_teardown (h);
    glong peak = cony_test_status_kib ("VmHWM") - before;
    g_test_message ("fft-length 2^18, window-length 2^18, n-mels %u: peak RSS +%ld KiB", n_mels[i],
        peak);
    if (CONY_TEST_CHECK_RSS)
      g_assert_cmpint (peak, <, 64 * 1024);
  }
  g_free (x);

  cony_test_reset_peak_rss ();
  glong before = cony_test_status_kib ("VmRSS");
  GstElement *el = cony_test_element_new ("conymel", NULL, "fft-length", 8192, "n-mels", 4096,
      "frames-per-buffer", 65536, NULL);
  GError *err = cony_test_assert_start_fails (el,
      (const char *[]){ "fft-length=8192 window-length=400 n-mels=4096 frames-per-buffer=65536",
          "1073741824 of output batch", NULL });
  g_assert_true (g_error_matches (err, GST_LIBRARY_ERROR, GST_LIBRARY_ERROR_SETTINGS));
  g_assert_nonnull (strstr (err->message, "need 1074"));
  g_assert_nonnull (strstr (err->message, "more than the budget of 1073741824 bytes"));
  g_error_free (err);
  gst_object_unref (el);
  glong peak = cony_test_status_kib ("VmHWM") - before;
  g_test_message ("frames-per-buffer 65536 x n-mels 4096 refused: peak RSS +%ld KiB", peak);
  if (CONY_TEST_CHECK_RSS)
    g_assert_cmpint (peak, <, 16 * 1024);
}

/* NaN and Inf samples: a warning on the bus, replaced by zeros, and the frames
 * after them are those of the clean signal. */
static void
test_nan_samples (void)
{
  gsize n = 4000, n_ref;
  float *x = make_signal (n, 12);
  float *clean = g_memdup2 (x, n * sizeof (float));
  for (gsize i = 500; i < 520; i++) {
    x[i] = (i % 2) ? NAN : INFINITY;
    clean[i] = 0.0f;
  }
  float *ref = reference_frames (NULL, clean, n, &n_ref);

  GstHarness *h = new_harness (NULL);
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h, F32_CAPS);
  const gsize sizes[] = { 1001 };
  push_pieces (h, x, n, sizes, 1, 0);

  GError *err = cony_test_pop_gerror (bus, GST_MESSAGE_WARNING, 0, 0, NULL);
  g_assert_nonnull (strstr (err->message, "NaN"));
  g_error_free (err);
  /* One warning for the run, not one per buffer or sample. */
  g_assert_null (gst_bus_pop_filtered (bus, GST_MESSAGE_WARNING));

  check_frames (h, ref, n_ref, 0, 0, 10 * MS, 1);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  g_free (ref);
  g_free (clean);
  g_free (x);
}

/* preset=yamnet: log(mel + 0.001) (caps say so, frames match libcony with that
 * offset), every other setting VGGish's; a property set after the preset
 * overrides it, and preset=vggish restores every default. */
static void
test_preset_yamnet (void)
{
  gsize n = 8000, n_ref;
  float *x = make_signal (n, 9);
  ConyMelConfig config;
  cony_mel_config_init_vggish (&config);
  config.log_offset = 0.001;
  float *ref = reference_frames (&config, x, n, &n_ref);
  GstHarness *h = new_harness ("preset", 1, NULL);
  gst_harness_set_src_caps_str (h, F32_CAPS);
  check_src_caps (h, "64:1", "100/1", "0.001");
  const gsize sizes[] = { 777 };
  push_pieces (h, x, n, sizes, 1, 0);
  g_assert_cmpuint (check_frames (h, ref, n_ref, 0, 0, 10 * MS, 1), ==, n_ref);
  gst_harness_teardown (h);

  GstElement *el = gst_element_factory_make ("conymel", NULL);
  gdouble offset;
  gint preset;
  g_object_set (el, "n-mels", 40, "preset", 1, "hop-length", 100, NULL);
  g_object_get (el, "log-offset", &offset, "preset", &preset, NULL);
  guint mels, hop;
  g_object_get (el, "n-mels", &mels, "hop-length", &hop, NULL);
  g_assert_cmpfloat (offset, ==, 0.001);
  g_assert_cmpint (preset, ==, 1);
  g_assert_cmpuint (mels, ==, 64); /* set before the preset: reset by it */
  g_assert_cmpuint (hop, ==, 100); /* set after: kept */
  gst_util_set_object_arg (G_OBJECT (el), "preset", "vggish");
  g_object_get (el, "log-offset", &offset, "hop-length", &hop, NULL);
  g_assert_cmpfloat (offset, ==, 0.01);
  g_assert_cmpuint (hop, ==, 160);
  gst_object_unref (el);
  g_free (ref);
  g_free (x);
}

/* Invalid settings fail the state change with an error, not a crash. */
static void
test_bad_settings (void)
{
  /* fmax above 16000 / 2 */
  GstElement *el = cony_test_element_new ("conymel", NULL, "fmax", 9000.0, NULL);
  g_error_free (cony_test_assert_start_fails (el, NULL));
  gst_object_unref (el);
}

/* Buffers that are not a whole number of samples (#31.4: S16 in 3-byte buffers, F32 in
 * 5-byte ones once gave no frames and only a debug line): a STREAM FORMAT error naming
 * the size, the flow fails, nothing is pushed. */
static void
test_partial_samples (void)
{
  const struct {
    const char *format;
    gsize bytes;
  } cases[] = { { "S16LE", 3 }, { "F32LE", 5 }, { "F32LE", 4002 } };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    GstHarness *h = new_harness (NULL);
    GstBus *bus = cony_test_attach_bus (h);
    gchar *caps = g_strdup_printf ("audio/x-raw,format=%s,rate=16000,channels=1,"
                                   "layout=interleaved",
        cases[i].format);
    gst_harness_set_src_caps_str (h, caps);
    g_free (caps);
    GstBuffer *buf = gst_buffer_new_allocate (NULL, cases[i].bytes, NULL);
    gst_buffer_memset (buf, 0, 0, cases[i].bytes);
    GST_BUFFER_PTS (buf) = 0;
    g_assert_cmpint (gst_harness_push (h, buf), ==, GST_FLOW_ERROR);
    gchar *debug = NULL;
    GError *err = cony_test_pop_gerror (bus, GST_MESSAGE_ERROR, GST_STREAM_ERROR,
        GST_STREAM_ERROR_FORMAT, &debug);
    gchar *want = g_strdup_printf ("buffer of %" G_GSIZE_FORMAT " bytes is not a whole number",
        cases[i].bytes);
    g_assert_nonnull (strstr (debug, want));
    g_assert_nonnull (strstr (debug, cases[i].format));
    g_free (want);
    g_free (debug);
    g_error_free (err);
    g_assert_null (gst_harness_try_pull (h));
    cony_test_detach_bus (h, bus);
    gst_harness_teardown (h);
  }
}

/* The framing geometry is read on READY->PAUSED: set while PLAYING it is refused and
 * the old value reads back; in READY it takes (#31.5). */
static void
test_ready_only_properties (void)
{
  const char *props[] = { "hop-length", "320", "n-mels", "40", "fmax", "6000", "sample-rate",
    "8000", NULL };
  cony_test_assert_ready_only_props ("conymel", NULL, F32_CAPS, props);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/conymel/caps-negotiated", test_caps_negotiated);
  g_test_add_func ("/conymel/wrong-caps-refused", test_wrong_caps_refused);
  g_test_add_func ("/conymel/refusal-named", test_refusal_named);
  g_test_add_func ("/conymel/timestamps-odd-sizes", test_timestamps_odd_sizes);
  g_test_add_func ("/conymel/fractional-rate", test_fractional_rate);
  g_test_add_func ("/conymel/s16-input", test_s16_input);
  g_test_add_func ("/conymel/frames-per-buffer-eos", test_frames_per_buffer_and_eos);
  g_test_add_func ("/conymel/eos-partial-window", test_eos_drops_partial_window);
  g_test_add_func ("/conymel/latency", test_latency);
  g_test_add_func ("/conymel/flush", test_flush_resets);
  g_test_add_func ("/conymel/discont", test_discont_reanchors);
  g_test_add_func ("/conymel/caps-change", test_caps_change_resets);
  g_test_add_func ("/conymel/gap", test_gap_is_silence);
  g_test_add_func ("/conymel/clock-end", test_clock_end);
  g_test_add_func ("/conymel/memory-budget", test_memory_budget);
  g_test_add_func ("/conymel/nan", test_nan_samples);
  g_test_add_func ("/conymel/bad-settings", test_bad_settings);
  g_test_add_func ("/conymel/preset-yamnet", test_preset_yamnet);
  g_test_add_func ("/conymel/partial-samples", test_partial_samples);
  g_test_add_func ("/conymel/ready-only-properties", test_ready_only_properties);
  return g_test_run ();
}
