/* conyfuse (GstHarness): audio tokens at 4/s against video at 10, 25 and 30 fps, a late
 * input, a stale input, a GAP, EOS on one pad, a flushing seek, the LATENCY answer, a
 * live stream whose camera never delivers, the golden streams of the PyTorch twin, and
 * bad pads/caps/models. The fused model is
 * tests/golden/fusion/b1_cony.safetensors: inputs audio (5 floats, tolerance 500 ms) and
 * video (4 floats, tolerance 300 ms), 4 steps per second, 11-float fused tokens.
 *
 * Token i of the audio carries 1000 + i in every float, of the video 2000 + i, so every
 * fused token tells which tokens it took (or the absent tokens of the model file). */
#include "cony/fusion.h"

#include <gst/gst.h>
#include <gst/check/gstharness.h>
#include <gst/check/gsttestclock.h>

#include "gsttestutil.h"
#include "testutil.h"

#include <string.h>

#define AUDIO_SIZE 5
#define VIDEO_SIZE 4
#define D_OUT 11
#define AUDIO_TOL (500 * GST_MSECOND)
#define VIDEO_TOL (300 * GST_MSECOND)
#define STEP_TIME(s) gst_util_uint64_scale ((s), GST_SECOND, 4)

static char *model_path;
static ConyFusion *fusion;

typedef struct {
  GstElement *el;
  GstHarness *a, *v; /* a also holds the source pad */
} Fuse;

static void
caps_str (char *out, gsize len, guint size, gint fps)
{
  g_snprintf (out, len,
      "other/tensors,format=static,num_tensors=1,types=float32,framerate=%d/1,"
      "dimensions=(string)%u:1",
      fps, size);
}

static void
fuse_new (Fuse *f, gint video_fps)
{
  char caps[256];
  /* latency: queues of up to 60 s per pad, so one thread can push a whole stream */
  f->el = cony_test_element_new ("conyfuse", model_path, "latency", 60 * GST_SECOND, NULL);
  f->a = gst_harness_new_with_element (f->el, "sink_audio", "src");
  f->v = gst_harness_new_with_element (f->el, "sink_video", NULL);
  gst_harness_play (f->a);
  caps_str (caps, sizeof caps, AUDIO_SIZE, 4);
  gst_harness_set_src_caps_str (f->a, caps);
  caps_str (caps, sizeof caps, VIDEO_SIZE, video_fps);
  gst_harness_set_src_caps_str (f->v, caps);
}

static void
fuse_free (Fuse *f)
{
  gst_harness_teardown (f->v);
  gst_harness_teardown (f->a);
  gst_object_unref (f->el);
}

/* Token @index of @size floats (value base + index) at @pts lasting @dur. */
static void
push_token (GstHarness *h, guint size, float base, guint index, GstClockTime pts, GstClockTime dur)
{
  float x[8];
  for (guint j = 0; j < size; j++)
    x[j] = base + (float) index;
  GstBuffer *buf = gst_buffer_new_memdup (x, size * sizeof (float));
  GST_BUFFER_PTS (buf) = pts;
  GST_BUFFER_DURATION (buf) = dur;
  g_assert_cmpint (gst_harness_push (h, buf), ==, GST_FLOW_OK);
}

/* Audio tokens @from .. @to - 1 (4/s). */
static void
push_audio (Fuse *f, guint from, guint to)
{
  for (guint i = from; i < to; i++)
    push_token (f->a, AUDIO_SIZE, 1000, i, STEP_TIME (i), STEP_TIME (i + 1) - STEP_TIME (i));
}

/* Video frames @from .. @to - 1 at @fps. */
static void
push_video (Fuse *f, gint fps, guint from, guint to)
{
  for (guint i = from; i < to; i++) {
    GstClockTime t = gst_util_uint64_scale (i, GST_SECOND, fps);
    push_token (f->v, VIDEO_SIZE, 2000, i, t, gst_util_uint64_scale (i + 1, GST_SECOND, fps) - t);
  }
}

/* What the fused token at @t must take from an input with tokens at @times (@n of them,
 * @gap_from..@gap_to: a GAP; NONE for none) and tolerance @tol: the index of the newest
 * token at or before @t that is fresh and not behind a gap, or -1 (absent). */
static gint
expected_index (const GstClockTime *times, guint n, GstClockTime t, GstClockTime tol,
    GstClockTime gap_from)
{
  gint best = -1;
  for (guint i = 0; i < n; i++)
    if (times[i] <= t)
      best = (gint) i;
  if (best < 0 || t - times[best] > tol)
    return -1;
  if (GST_CLOCK_TIME_IS_VALID (gap_from) && gap_from > times[best] && gap_from <= t)
    return -1;
  return best;
}

/* Checks one part of a fused token: @n floats at @x are token @index (base + index), or
 * the absent token @absent when @index < 0; @flag the matching flag. */
static void
check_part (const float *x, guint n, float base, gint index, const float *absent, float flag,
    guint64 step)
{
  for (guint j = 0; j < n; j++) {
    float want = index >= 0 ? base + (float) index : absent[j];
    if (x[j] != want)
      g_error ("step %" G_GUINT64_FORMAT ": float %u is %g, expected %g (%s)", step, j, x[j], want,
          index >= 0 ? "a token" : "the absent token");
  }
  g_assert_cmpfloat (flag, ==, index >= 0 ? 1.0f : 0.0f);
}

typedef struct {
  GstClockTime *audio, *video; /* token times, running time */
  guint n_audio, n_video;
  GstClockTime audio_gap; /* a GAP on the audio from there (NONE: none) */
  GstClockTime base;      /* running time of step 0 */
  GstClockTime pts0;      /* PTS of step 0 */
} Expect;

static GstClockTime *
times_of (guint from, guint to, gint rate)
{
  GstClockTime *t = g_new (GstClockTime, to - from);
  for (guint i = from; i < to; i++)
    t[i - from] = gst_util_uint64_scale (i, GST_SECOND, rate);
  return t;
}

/* Pulls the fused steps until EOS and checks each against @e; returns their number. */
static guint
pull_and_check (Fuse *f, const Expect *e, guint first_index_audio, guint first_index_video)
{
  GstBuffer *buf = NULL;
  guint64 s = 0;
  while (gst_harness_pull_until_eos (f->a, &buf) && buf) {
    GstClockTime t = e->base + STEP_TIME (s);
    g_assert_cmpuint (GST_BUFFER_PTS (buf), ==, e->pts0 + STEP_TIME (s));
    g_assert_cmpuint (GST_BUFFER_DURATION (buf), ==, STEP_TIME (s + 1) - STEP_TIME (s));
    g_assert_cmpuint (GST_BUFFER_OFFSET (buf), ==, s);
    g_assert_cmpint (GST_BUFFER_IS_DISCONT (buf), ==, s == 0);
    g_assert_cmpuint (gst_buffer_get_size (buf), ==, D_OUT * sizeof (float));
    float x[D_OUT];
    gst_buffer_extract (buf, 0, x, sizeof x);
    gint ai = expected_index (e->audio, e->n_audio, t, AUDIO_TOL, e->audio_gap);
    gint vi = expected_index (e->video, e->n_video, t, VIDEO_TOL, GST_CLOCK_TIME_NONE);
    check_part (x, AUDIO_SIZE, 1000, ai < 0 ? -1 : ai + (gint) first_index_audio,
        fusion->inputs[0].absent, x[9], s);
    check_part (x + AUDIO_SIZE, VIDEO_SIZE, 2000, vi < 0 ? -1 : vi + (gint) first_index_video,
        fusion->inputs[1].absent, x[10], s);
    gst_buffer_unref (buf);
    s++;
  }
  g_assert_null (buf);
  return (guint) s;
}

static void
check_src_caps (Fuse *f)
{
  GstCaps *caps = gst_pad_get_current_caps (f->a->sinkpad);
  g_assert_nonnull (caps);
  GstStructure *st = gst_caps_get_structure (caps, 0);
  g_assert_cmpstr (gst_structure_get_string (st, "dimensions"), ==, "11:1");
  gint n, d;
  g_assert_true (gst_structure_get_fraction (st, "framerate", &n, &d));
  g_assert_cmpint (n * 1, ==, 4 * d);
  /* the longest input token (the audio's 250 ms) ends with the step: no lookahead */
  g_assert_false (gst_structure_has_field (st, "lookahead"));
  gst_caps_unref (caps);
}

/* 5 s of audio at 4/s and video at @fps: every step takes the newest of each. */
static void
run_rates (gint fps)
{
  Fuse f;
  fuse_new (&f, fps);
  push_audio (&f, 0, 20);
  push_video (&f, fps, 0, 5 * fps);
  gst_harness_push_event (f.a, gst_event_new_eos ());
  gst_harness_push_event (f.v, gst_event_new_eos ());
  Expect e = { times_of (0, 20, 4), times_of (0, 5 * fps, fps), 20, 5 * fps, GST_CLOCK_TIME_NONE, 0,
    0 };
  /* the last video frame is at 5 - 1/fps s: steps 0 .. 4.75 s */
  g_assert_cmpuint (pull_and_check (&f, &e, 0, 0), ==, 20);
  check_src_caps (&f);
  g_free (e.audio);
  g_free (e.video);
  fuse_free (&f);
}

static void
test_rates (void)
{
  run_rates (10);
  run_rates (25);
  run_rates (30);
}

/* The video starts 2 s late: the steps before it have the absent video token. */
static void
test_late_input (void)
{
  Fuse f;
  fuse_new (&f, 10);
  push_audio (&f, 0, 16);
  push_video (&f, 10, 20, 40);
  gst_harness_push_event (f.a, gst_event_new_eos ());
  gst_harness_push_event (f.v, gst_event_new_eos ());
  Expect e = { times_of (0, 16, 4), times_of (20, 40, 10), 16, 20, GST_CLOCK_TIME_NONE, 0, 0 };
  g_assert_cmpuint (pull_and_check (&f, &e, 0, 20), ==, 16);
  g_free (e.audio);
  g_free (e.video);
  fuse_free (&f);
}

/* No audio between 1 s and 3 s (no GAP either): its last token stays in for its 500 ms
 * tolerance, then the absent token until 3 s. */
static void
test_stale_input (void)
{
  Fuse f;
  fuse_new (&f, 25);
  push_audio (&f, 0, 5);
  push_video (&f, 25, 0, 50);
  push_audio (&f, 12, 20);
  push_video (&f, 25, 50, 125);
  gst_harness_push_event (f.a, gst_event_new_eos ());
  gst_harness_push_event (f.v, gst_event_new_eos ());
  GstClockTime audio[13];
  for (guint i = 0; i < 13; i++)
    audio[i] = STEP_TIME (i < 5 ? i : i + 7);
  Expect e = { g_memdup2 (audio, sizeof audio), times_of (0, 125, 25), 13, 125, GST_CLOCK_TIME_NONE,
    0, 0 };
  /* audio token k of the array is stream token k (k < 5) or k + 7 */
  GstBuffer *buf = NULL;
  guint s = 0, absent = 0;
  while (gst_harness_pull_until_eos (f.a, &buf) && buf) {
    float x[D_OUT];
    gst_buffer_extract (buf, 0, x, sizeof x);
    gint ai = expected_index (e.audio, 13, STEP_TIME (s), AUDIO_TOL, GST_CLOCK_TIME_NONE);
    check_part (x, AUDIO_SIZE, 1000, ai < 0 ? -1 : (ai < 5 ? ai : ai + 7), fusion->inputs[0].absent,
        x[9], s);
    g_assert_cmpfloat (x[10], ==, 1.0f);
    absent += ai < 0;
    gst_buffer_unref (buf);
    s++;
  }
  g_assert_cmpuint (s, ==, 20);
  g_assert_cmpuint (absent, ==, 5); /* 1.75, 2, 2.25, 2.5, 2.75 s */
  g_free (e.audio);
  g_free (e.video);
  fuse_free (&f);
}

/* A GAP on the audio at 1 s (for 1 s) makes it absent at once, tolerance or not. */
static void
test_gap (void)
{
  Fuse f;
  fuse_new (&f, 10);
  push_audio (&f, 0, 4);
  g_assert_true (gst_harness_push_event (f.a, gst_event_new_gap (GST_SECOND, GST_SECOND)));
  push_audio (&f, 8, 16);
  push_video (&f, 10, 0, 40);
  gst_harness_push_event (f.a, gst_event_new_eos ());
  gst_harness_push_event (f.v, gst_event_new_eos ());
  GstClockTime audio[12];
  for (guint i = 0; i < 12; i++)
    audio[i] = STEP_TIME (i < 4 ? i : i + 4);
  Expect e = { audio, times_of (0, 40, 10), 12, 40, GST_SECOND, 0, 0 };
  GstBuffer *buf = NULL;
  guint s = 0, absent = 0;
  while (gst_harness_pull_until_eos (f.a, &buf) && buf) {
    float x[D_OUT];
    gst_buffer_extract (buf, 0, x, sizeof x);
    gint ai = expected_index (e.audio, 12, STEP_TIME (s), AUDIO_TOL, e.audio_gap);
    check_part (x, AUDIO_SIZE, 1000, ai < 0 ? -1 : (ai < 4 ? ai : ai + 4), fusion->inputs[0].absent,
        x[9], s);
    absent += ai < 0;
    gst_buffer_unref (buf);
    s++;
  }
  g_assert_cmpuint (s, ==, 16);
  g_assert_cmpuint (absent, ==, 4); /* 1, 1.25, 1.5, 1.75 s: the 0.75 s token is cut off */
  g_free (e.video);
  fuse_free (&f);
}

/* The audio ends (EOS) at 1 s; the video goes on to 3 s, and so do the steps, with the
 * absent audio token once its last token is stale. */
static void
test_eos_one_pad (void)
{
  Fuse f;
  fuse_new (&f, 30);
  push_audio (&f, 0, 5);
  gst_harness_push_event (f.a, gst_event_new_eos ());
  push_video (&f, 30, 0, 90);
  gst_harness_push_event (f.v, gst_event_new_eos ());
  Expect e = { times_of (0, 5, 4), times_of (0, 90, 30), 5, 90, GST_CLOCK_TIME_NONE, 0, 0 };
  g_assert_cmpuint (pull_and_check (&f, &e, 0, 0), ==, 12); /* 0 .. 2.75 s */
  fuse_free (&f);
  g_free (e.audio);
  g_free (e.video);
}

/* A flushing seek: forwarded upstream; after the flush the steps restart at step 0
 * (DISCONT) on the new segment's times. */
static void
test_flushing_seek (void)
{
  Fuse f;
  fuse_new (&f, 10);
  push_audio (&f, 0, 8);
  push_video (&f, 10, 0, 20);
  for (guint i = 0; i < 4; i++)
    gst_buffer_unref (gst_harness_pull (f.a));

  GstEvent *seek = gst_event_new_seek (1.0, GST_FORMAT_TIME, GST_SEEK_FLAG_FLUSH, GST_SEEK_TYPE_SET,
      10 * GST_SECOND, GST_SEEK_TYPE_NONE, GST_CLOCK_TIME_NONE);
  guint32 seqnum = gst_event_get_seqnum (seek);
  g_assert_true (gst_harness_push_upstream_event (f.a, seek));
  for (GstHarness **h = (GstHarness *[]){ f.a, f.v, NULL }; *h; h++) {
    GstEvent *up;
    while ((up = gst_harness_pull_upstream_event (*h)) && GST_EVENT_TYPE (up) != GST_EVENT_SEEK)
      gst_event_unref (up); /* reconfigure */
    g_assert_nonnull (up);
    gst_event_unref (up);
    GstEvent *fs = gst_event_new_flush_start (), *fe = gst_event_new_flush_stop (TRUE);
    gst_event_set_seqnum (fs, seqnum);
    gst_event_set_seqnum (fe, seqnum);
    g_assert_true (gst_harness_push_event (*h, fs));
    g_assert_true (gst_harness_push_event (*h, fe));
    GstSegment seg;
    gst_segment_init (&seg, GST_FORMAT_TIME);
    seg.start = seg.time = seg.position = 10 * GST_SECOND;
    GstEvent *segev = gst_event_new_segment (&seg);
    gst_event_set_seqnum (segev, seqnum);
    g_assert_true (gst_harness_push_event (*h, segev));
  }
  cony_test_drop_buffers (f.a);
  /* 2 s from 10 s: tokens 40 .. 47 and frames 100 .. 119 */
  push_audio (&f, 40, 48);
  push_video (&f, 10, 100, 120);
  gst_harness_push_event (f.a, gst_event_new_eos ());
  gst_harness_push_event (f.v, gst_event_new_eos ());
  Expect e = { times_of (0, 8, 4), times_of (0, 20, 10), 8, 20, GST_CLOCK_TIME_NONE, 0,
    10 * GST_SECOND };
  g_assert_cmpuint (pull_and_check (&f, &e, 40, 100), ==, 8);
  g_free (e.audio);
  g_free (e.video);
  fuse_free (&f);
}

/* LATENCY: the largest upstream latency plus the latency property; nothing of its own. */
static void
test_latency (void)
{
  Fuse f;
  fuse_new (&f, 10);
  g_object_set (f.el, "latency", 50 * GST_MSECOND, NULL);
  gst_harness_set_upstream_latency (f.a, 100 * GST_MSECOND);
  gst_harness_set_upstream_latency (f.v, 40 * GST_MSECOND);
  g_assert_cmpuint (gst_harness_query_latency (f.a), ==, 150 * GST_MSECOND);
  fuse_free (&f);
}

/* Live: the camera never delivers. Once the clock passes a step's time plus the latency
 * the step comes anyway, with the absent video token: the stream does not stop. Over
 * 1600 steps (400 s of stream) memory stays bounded: resident memory may not grow by
 * 1 MiB from step 200 on (nothing piles up waiting for the video). */
static void
test_live_missing_input (void)
{
  Fuse f;
  fuse_new (&f, 10);
  g_object_set (f.el, "latency", 0, NULL);
  gst_harness_set_upstream_latency (f.a, 0);
  gst_harness_set_upstream_latency (f.v, 0);
  g_assert_cmpuint (gst_harness_query_latency (f.a), ==, 0); /* live now (harness) */
  glong rss0 = 0;
  for (guint i = 0; i < 1600; i++) {
    if (i == 200)
      rss0 = cony_test_status_kib ("VmRSS");
    push_audio (&f, i, i + 1);
    g_assert_true (gst_harness_crank_single_clock_wait (f.a));
    GstBuffer *buf = gst_harness_pull (f.a);
    g_assert_nonnull (buf);
    float x[D_OUT];
    gst_buffer_extract (buf, 0, x, sizeof x);
    g_assert_cmpuint (GST_BUFFER_PTS (buf), ==, STEP_TIME (i));
    check_part (x, AUDIO_SIZE, 1000, (gint) i, fusion->inputs[0].absent, x[9], i);
    check_part (x + AUDIO_SIZE, VIDEO_SIZE, 2000, -1, fusion->inputs[1].absent, x[10], i);
    gst_buffer_unref (buf);
  }
  glong grown = cony_test_status_kib ("VmRSS") - rss0;
  g_test_message ("RSS from step 200 to 1600: %+ld KiB", grown);
  if (CONY_TEST_CHECK_RSS)
    g_assert_cmpint (grown, <, 1024);
  fuse_free (&f);
}

/* Live, EOS on the video only: frames 0 .. 4 (to 0.4 s), then EOS; the audio goes on and
 * so do the steps, the video present while its last frame is fresh (300 ms), then absent.
 * (latency 1 s: a pad queues up to the latency, and this one thread pushes the frames
 * ahead.) */
static void
test_live_eos_one_pad (void)
{
  Fuse f;
  fuse_new (&f, 10);
  g_object_set (f.el, "latency", GST_SECOND, NULL);
  gst_harness_set_upstream_latency (f.a, 0);
  gst_harness_set_upstream_latency (f.v, 0);
  g_assert_cmpuint (gst_harness_query_latency (f.a), ==, GST_SECOND);
  push_video (&f, 10, 0, 5);
  gst_harness_push_event (f.v, gst_event_new_eos ());
  for (guint i = 0; i < 12; i++) {
    push_audio (&f, i, i + 1);
    GstBuffer *buf = gst_harness_try_pull (f.a);
    if (!buf) {
      g_assert_true (gst_harness_crank_single_clock_wait (f.a));
      buf = gst_harness_pull (f.a);
    }
    float x[D_OUT];
    gst_buffer_extract (buf, 0, x, sizeof x);
    g_assert_cmpuint (GST_BUFFER_PTS (buf), ==, STEP_TIME (i));
    check_part (x, AUDIO_SIZE, 1000, (gint) i, fusion->inputs[0].absent, x[9], i);
    /* the newest frame at step i: min(i * 2.5, 4), fresh for 300 ms */
    guint frame = MIN (i * 10 / 4, 4);
    gboolean fresh = STEP_TIME (i) - frame * 100 * GST_MSECOND <= VIDEO_TOL;
    check_part (x + AUDIO_SIZE, VIDEO_SIZE, 2000, fresh ? (gint) frame : -1,
        fusion->inputs[1].absent, x[10], i);
    gst_buffer_unref (buf);
  }
  fuse_free (&f);
}

/* The golden streams of training/gen_fusion_golden.py (b1_cony: one token per input per
 * step, some absent) as timed streams, an absent token as a GAP at its step: conyfuse's
 * fused tokens are PyTorch's FusedClassifier.join, bit for bit (tests/libcony/test_fusion.c takes
 * the encoder on from there). */
static void
test_golden_streams (void)
{
  g_autoptr (ConyNpyArray) audio = cony_test_load_golden_npy ("fusion", "b1_cony.audio.npy");
  g_autoptr (ConyNpyArray) video = cony_test_load_golden_npy ("fusion", "b1_cony.video.npy");
  g_autoptr (ConyNpyArray) present = cony_test_load_golden_npy ("fusion", "b1_cony.present.npy");
  g_autoptr (ConyNpyArray) fused = cony_test_load_golden_npy ("fusion", "b1_cony.fused.npy");
  guint L = (guint) fused->shape[0];
  Fuse f;
  fuse_new (&f, 4);
  const ConyNpyArray *x[2] = { audio, video };
  GstHarness *h[2] = { f.a, f.v };
  guint size[2] = { AUDIO_SIZE, VIDEO_SIZE };
  for (int i = 0; i < 2; i++) {
    for (guint s = 0; s <= L; s++) { /* one more token: the stream reaches step L - 1 */
      GstClockTime t = STEP_TIME (s), dur = STEP_TIME (s + 1) - t;
      if (s < L && present->data[s * 2 + i] == 0) {
        g_assert_true (gst_harness_push_event (h[i], gst_event_new_gap (t, dur)));
        continue;
      }
      GstBuffer *buf = gst_buffer_new_memdup (x[i]->data + (gsize) MIN (s, L - 1) * size[i],
          size[i] * sizeof (float));
      GST_BUFFER_PTS (buf) = t;
      GST_BUFFER_DURATION (buf) = dur;
      g_assert_cmpint (gst_harness_push (h[i], buf), ==, GST_FLOW_OK);
    }
    gst_harness_push_event (h[i], gst_event_new_eos ());
  }
  GstBuffer *buf = NULL;
  guint s = 0;
  while (gst_harness_pull_until_eos (f.a, &buf) && buf) {
    if (s < L) {
      float got[D_OUT];
      gst_buffer_extract (buf, 0, got, sizeof got);
      g_assert_cmpmem (got, sizeof got, fused->data + (gsize) s * D_OUT, sizeof got);
    }
    gst_buffer_unref (buf);
    s++;
  }
  g_assert_cmpuint (s, ==, L + 1);
  fuse_free (&f);
}

/* Video 10x faster than the audio (40 frames a second against 4 tokens): each step takes
 * the newest frame; the 9 in between are dropped, not queued. */
static void
test_fast_input (void)
{
  run_rates (40);
}

/* Timestamps going backwards on the video: after frames 0 .. 9 (0 .. 0.9 s) come frames
 * stamped 0.3 .. 0.7 s again (values 2100 + i). A token older than the one already
 * taken is dropped: the steps keep the newest frame (0.9 s) instead of going back to
 * an older one, which at 1 s would also be stale (0.7 s: 300 ms tolerance). */
static void
test_backwards_timestamps (void)
{
  Fuse f;
  fuse_new (&f, 10);
  push_video (&f, 10, 0, 10);
  for (guint i = 3; i < 8; i++)
    push_token (f.v, VIDEO_SIZE, 2100, i, gst_util_uint64_scale (i, GST_SECOND, 10),
        100 * GST_MSECOND);
  push_video (&f, 10, 11, 20);
  push_audio (&f, 0, 8);
  gst_harness_push_event (f.a, gst_event_new_eos ());
  gst_harness_push_event (f.v, gst_event_new_eos ());
  GstBuffer *buf = NULL;
  guint s = 0;
  while (gst_harness_pull_until_eos (f.a, &buf) && buf) {
    float x[D_OUT];
    gst_buffer_extract (buf, 0, x, sizeof x);
    /* the newest frame at or before step s (frame 10 never came: 9 is fresh at 1 s) */
    guint frame = s * 10 / 4 == 10 ? 9 : s * 10 / 4;
    check_part (x + AUDIO_SIZE, VIDEO_SIZE, 2000, (gint) frame, fusion->inputs[1].absent, x[10], s);
    gst_buffer_unref (buf);
    s++;
  }
  g_assert_cmpuint (s, ==, 8);
  fuse_free (&f);
}

/* Pads requested and released while PLAYING: the video pad comes 1 s in and goes 2 s in;
 * before and after, the steps carry the absent video token and go on. */
static void
test_pads_while_playing (void)
{
  char caps[256];
  GstElement *el = cony_test_element_new ("conyfuse", model_path, "latency", 60 * GST_SECOND, NULL);
  GstHarness *a = gst_harness_new_with_element (el, "sink_audio", "src");
  gst_harness_play (a);
  caps_str (caps, sizeof caps, AUDIO_SIZE, 4);
  gst_harness_set_src_caps_str (a, caps);
  Fuse f = { el, a, NULL };
  push_audio (&f, 0, 4);
  for (guint s = 0; s < 3; s++) {
    GstBuffer *buf = gst_harness_pull (a);
    float x[D_OUT];
    gst_buffer_extract (buf, 0, x, sizeof x);
    check_part (x + AUDIO_SIZE, VIDEO_SIZE, 2000, -1, fusion->inputs[1].absent, x[10], s);
    gst_buffer_unref (buf);
  }
  f.v = gst_harness_new_with_element (el, "sink_video", NULL);
  caps_str (caps, sizeof caps, VIDEO_SIZE, 10);
  gst_harness_set_src_caps_str (f.v, caps);
  push_video (&f, 10, 8, 20);
  push_audio (&f, 4, 8);
  for (guint s = 3; s < 7; s++) {
    GstBuffer *buf = gst_harness_pull (a);
    float x[D_OUT];
    gst_buffer_extract (buf, 0, x, sizeof x);
    g_assert_cmpuint (GST_BUFFER_OFFSET (buf), ==, s);
    check_part (x + AUDIO_SIZE, VIDEO_SIZE, 2000, s == 3 ? -1 : (gint) (s * 10 / 4),
        fusion->inputs[1].absent, x[10], s);
    gst_buffer_unref (buf);
  }
  gst_harness_teardown (f.v); /* releases the request pad */
  g_assert_cmpint (el->numsinkpads, ==, 1);
  push_audio (&f, 8, 12);
  gst_harness_push_event (a, gst_event_new_eos ());
  GstBuffer *buf = NULL;
  guint s = 7;
  while (gst_harness_pull_until_eos (a, &buf) && buf) {
    float x[D_OUT];
    gst_buffer_extract (buf, 0, x, sizeof x);
    check_part (x, AUDIO_SIZE, 1000, (gint) s, fusion->inputs[0].absent, x[9], s);
    check_part (x + AUDIO_SIZE, VIDEO_SIZE, 2000, -1, fusion->inputs[1].absent, x[10], s);
    gst_buffer_unref (buf);
    s++;
  }
  g_assert_cmpuint (s, ==, 12);
  gst_harness_teardown (a);
  gst_object_unref (el);
}

/* Caps changes mid-stream: the video goes from 10 to 2 frames a second at 1 s. The steps
 * go on (no restart, no DISCONT), each with the newest frame while it is fresh, and the
 * output caps follow: a 500 ms frame reaches 250 ms past a step, so the fused tokens get
 * lookahead 1/4 (before: none). Then tokens of another size: a negotiation error naming
 * the pad and both sizes. */
static void
test_caps_change (void)
{
  Fuse f;
  char caps[256];
  fuse_new (&f, 10);
  GstBus *bus = cony_test_attach_bus (f.a);
  push_video (&f, 10, 0, 10);
  caps_str (caps, sizeof caps, VIDEO_SIZE, 2);
  gst_harness_set_src_caps_str (f.v, caps);
  for (guint i = 2; i < 6; i++)
    push_token (f.v, VIDEO_SIZE, 2000, 100 + i, i * GST_SECOND / 2, GST_SECOND / 2);
  push_audio (&f, 0, 10);
  gst_harness_push_event (f.a, gst_event_new_eos ());
  gst_harness_push_event (f.v, gst_event_new_eos ());
  GstBuffer *buf = NULL;
  guint s = 0;
  while (gst_harness_pull_until_eos (f.a, &buf) && buf) {
    float x[D_OUT];
    gst_buffer_extract (buf, 0, x, sizeof x);
    g_assert_cmpuint (GST_BUFFER_OFFSET (buf), ==, s);
    g_assert_cmpint (GST_BUFFER_IS_DISCONT (buf), ==, s == 0);
    GstClockTime t = STEP_TIME (s);
    /* frames: 0 .. 9 every 100 ms, then 102 .. 105 every 500 ms from 1 s */
    gint frame = t < GST_SECOND ? (gint) (s * 10 / 4) : 100 + (gint) (t / (GST_SECOND / 2));
    if (t >= GST_SECOND && t - (t / (GST_SECOND / 2)) * (GST_SECOND / 2) > VIDEO_TOL)
      frame = -1;
    check_part (x + AUDIO_SIZE, VIDEO_SIZE, 2000, frame, fusion->inputs[1].absent, x[10], s);
    gst_buffer_unref (buf);
    s++;
  }
  g_assert_cmpuint (s, ==, 11); /* to the last frame, 2.5 s */
  GstCaps *out = gst_pad_get_current_caps (f.a->sinkpad);
  gint n = 0, d = 0;
  g_assert_true (gst_structure_get_fraction (gst_caps_get_structure (out, 0), "lookahead", &n, &d));
  g_assert_cmpint (n * 4, ==, d);
  gst_caps_unref (out);
  cony_test_detach_bus (f.a, bus);
  fuse_free (&f);

  /* tokens of another size mid-stream */
  fuse_new (&f, 10);
  bus = cony_test_attach_bus (f.a);
  push_video (&f, 10, 0, 3);
  caps_str (caps, sizeof caps, 7, 10);
  gst_harness_set_src_caps_str (f.v, caps);
  push_audio (&f, 0, 4);
  GstMessage *msg = gst_bus_timed_pop_filtered (bus, 30 * GST_SECOND, GST_MESSAGE_ERROR);
  g_assert_nonnull (msg);
  GError *err = NULL;
  gchar *dbg = NULL;
  gst_message_parse_error (msg, &err, &dbg);
  g_assert_true (g_error_matches (err, GST_CORE_ERROR, GST_CORE_ERROR_NEGOTIATION));
  g_assert_nonnull (strstr (dbg, "sink_video has 7 floats per token"));
  g_error_free (err);
  g_free (dbg);
  gst_message_unref (msg);
  cony_test_detach_bus (f.a, bus);
  fuse_free (&f);
}

/* A live source of tokens for the state-cycle test: pushes a token of @size floats into
 * appsrc @src every 1/@rate s (appsrc stamps it with the running time) until @stop. */
typedef struct {
  GstElement *src;
  guint size;
  gint rate;
  gint stop;
  GThread *thread;
} Feeder;

static gpointer
feeder_run (gpointer data)
{
  Feeder *fd = data;
  float x[8] = { 0 };
  for (guint i = 0; !g_atomic_int_get (&fd->stop); i++) {
    x[0] = (float) i;
    GstFlowReturn ret;
    g_signal_emit_by_name (fd->src, "push-buffer",
        gst_buffer_new_memdup (x, fd->size * sizeof (float)), &ret);
    g_usleep (G_USEC_PER_SEC / fd->rate);
  }
  return NULL;
}

static void
count_step (GstElement *sink, GstBuffer *buf, GstPad *pad, gpointer steps)
{
  (void) sink, (void) buf, (void) pad;
  g_atomic_int_inc ((gint *) steps);
}

/* Waits @wait for an ERROR or WARNING on @bus: none may come. */
static void
assert_no_error (GstBus *bus, GstClockTime wait)
{
  GstMessage *msg = gst_bus_timed_pop_filtered (bus, wait, GST_MESSAGE_ERROR | GST_MESSAGE_WARNING);
  if (msg) {
    GError *err = NULL;
    gchar *dbg = NULL;
    if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR)
      gst_message_parse_error (msg, &err, &dbg);
    else
      gst_message_parse_warning (msg, &err, &dbg);
    g_error ("%s from %s: %s (%s)", GST_MESSAGE_TYPE_NAME (msg), GST_MESSAGE_SRC_NAME (msg),
        err->message, dbg);
  }
}

/* PLAYING <-> PAUSED <-> NULL under load, live: audio tokens 4 a second and video 40 a
 * second (appsrc, fed by threads that never stop) through conyfuse ! conytransformer.
 * 12 rounds of PLAYING (steps come), PAUSED, PLAYING (steps come again), NULL (the model
 * is loaded again on the way up): no error or warning, and resident memory may not grow
 * by 4 MiB from round 2 to the last. */
static void
test_state_cycles_live (void)
{
  gchar *launch =
      g_strdup_printf ("appsrc name=a is-live=true do-timestamp=true format=time max-buffers=8 "
                       "leaky-type=downstream caps=\"other/tensors,format=static,num_tensors=1,"
                       "types=float32,dimensions=(string)5:1,framerate=4/1\" ! f.sink_audio "
                       "appsrc name=v is-live=true do-timestamp=true format=time max-buffers=8 "
                       "leaky-type=downstream caps=\"other/tensors,format=static,num_tensors=1,"
                       "types=float32,dimensions=(string)4:1,framerate=40/1\" ! f.sink_video "
                       "conyfuse name=f model=\"%s\" latency=100000000 ! conytransformer model=\"%s\" "
                       "! fakesink name=out sync=false signal-handoffs=true",
          model_path, model_path);
  GError *error = NULL;
  GstElement *pipe = gst_parse_launch (launch, &error);
  g_assert_no_error (error);
  g_free (launch);
  GstBus *bus = gst_element_get_bus (pipe);
  gint steps = 0;
  GstElement *out = gst_bin_get_by_name (GST_BIN (pipe), "out");
  g_signal_connect (out, "handoff", G_CALLBACK (count_step), &steps);
  gst_object_unref (out);
  Feeder feed[2] = { { gst_bin_get_by_name (GST_BIN (pipe), "a"), AUDIO_SIZE, 4, 0, NULL },
    { gst_bin_get_by_name (GST_BIN (pipe), "v"), VIDEO_SIZE, 40, 0, NULL } };
  for (int i = 0; i < 2; i++)
    feed[i].thread = g_thread_new ("feeder", feeder_run, &feed[i]);
  glong rss2 = 0;
  const guint rounds = 12;
  for (guint r = 0; r < rounds; r++) {
    if (r == 2)
      rss2 = cony_test_status_kib ("VmRSS");
    for (guint half = 0; half < 2; half++) {
      gint before = g_atomic_int_get (&steps);
      gst_element_set_state (pipe, GST_STATE_PLAYING);
      g_assert_cmpint (gst_element_get_state (pipe, NULL, NULL, 5 * GST_SECOND), !=,
          GST_STATE_CHANGE_FAILURE);
      /* 4 steps a second: wait for two (up to 10 s on a loaded machine) */
      for (guint w = 0; w < 500 && g_atomic_int_get (&steps) < before + 2; w++)
        assert_no_error (bus, 20 * GST_MSECOND);
      if (g_atomic_int_get (&steps) < before + 2)
        g_error ("round %u: %d steps in 10 s of PLAYING", r, g_atomic_int_get (&steps) - before);
      gst_element_set_state (pipe, half ? GST_STATE_NULL : GST_STATE_PAUSED);
      g_assert_cmpint (gst_element_get_state (pipe, NULL, NULL, 5 * GST_SECOND), !=,
          GST_STATE_CHANGE_FAILURE);
      assert_no_error (bus, 30 * GST_MSECOND);
    }
  }
  glong grown = cony_test_status_kib ("VmRSS") - rss2;
  g_test_message ("%d steps in %u rounds; RSS from round 2 on: %+ld KiB", steps, rounds, grown);
  if (CONY_TEST_CHECK_RSS)
    g_assert_cmpint (grown, <, 4096);
  for (int i = 0; i < 2; i++) {
    g_atomic_int_set (&feed[i].stop, 1);
    g_thread_join (feed[i].thread);
    gst_object_unref (feed[i].src);
  }
  gst_element_set_state (pipe, GST_STATE_NULL);
  gst_object_unref (bus);
  gst_object_unref (pipe);
}

static void
test_bad_setup (void)
{
  /* a pad that is no input of the model */
  GstElement *el = cony_test_element_new ("conyfuse", model_path, NULL);
  GstPad *pad = gst_element_request_pad_simple (el, "sink_depth");
  g_assert_nonnull (pad);
  GError *err = cony_test_assert_start_fails (el,
      (const char *[]){ "sink_depth", "sink_audio, sink_video", NULL });
  g_error_free (err);
  gst_element_release_request_pad (el, pad);
  gst_object_unref (pad);
  /* pads are requested by input name */
  g_assert_null (gst_element_request_pad_simple (el, "sink_%s"));
  gst_object_unref (el);

  /* no model, an ordinary (not fused) model */
  el = cony_test_element_new ("conyfuse", NULL, NULL);
  g_error_free (cony_test_assert_start_fails (el, (const char *[]){ "model", NULL }));
  gst_object_unref (el);
  g_autofree char *plain = cony_test_golden_path ("model", "b1_regular.safetensors");
  el = cony_test_element_new ("conyfuse", plain, NULL);
  g_error_free (cony_test_assert_start_fails (el,
      (const char *[]){ "b1_regular.safetensors", "not a fused model", NULL }));
  gst_object_unref (el);

  /* tokens of the wrong size */
  el = cony_test_element_new ("conyfuse", model_path, NULL);
  GstHarness *h = gst_harness_new_with_element (el, "sink_video", "src");
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_play (h);
  char caps[256];
  caps_str (caps, sizeof caps, 7, 10);
  gst_harness_set_src_caps_str (h, caps);
  gst_harness_push (h, gst_buffer_new_allocate (NULL, 7 * sizeof (float), NULL));
  /* the caps are checked in the aggregator's thread: wait for its error */
  GstMessage *msg = gst_bus_timed_pop_filtered (bus, 30 * GST_SECOND, GST_MESSAGE_ERROR);
  g_assert_nonnull (msg);
  gchar *dbg = NULL;
  gst_message_parse_error (msg, &err, &dbg);
  g_assert_true (g_error_matches (err, GST_CORE_ERROR, GST_CORE_ERROR_NEGOTIATION));
  g_assert_nonnull (strstr (dbg, "sink_video has 7 floats per token"));
  g_assert_nonnull (strstr (dbg, "takes 4"));
  g_error_free (err);
  g_free (dbg);
  gst_message_unref (msg);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  gst_object_unref (el);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  model_path = cony_test_golden_path ("fusion", "b1_cony.safetensors");
  GError *error = NULL;
  fusion = cony_fusion_load (model_path, &error);
  g_assert_no_error (error);
  g_test_add_func ("/conyfuse/rates", test_rates);
  g_test_add_func ("/conyfuse/late-input", test_late_input);
  g_test_add_func ("/conyfuse/stale-input", test_stale_input);
  g_test_add_func ("/conyfuse/gap", test_gap);
  g_test_add_func ("/conyfuse/eos-one-pad", test_eos_one_pad);
  g_test_add_func ("/conyfuse/flushing-seek", test_flushing_seek);
  g_test_add_func ("/conyfuse/latency", test_latency);
  g_test_add_func ("/conyfuse/live-missing-input", test_live_missing_input);
  g_test_add_func ("/conyfuse/live-eos-one-pad", test_live_eos_one_pad);
  g_test_add_func ("/conyfuse/golden-streams", test_golden_streams);
  g_test_add_func ("/conyfuse/bad-setup", test_bad_setup);
  g_test_add_func ("/conyfuse/fast-input", test_fast_input);
  g_test_add_func ("/conyfuse/backwards-timestamps", test_backwards_timestamps);
  g_test_add_func ("/conyfuse/pads-while-playing", test_pads_while_playing);
  g_test_add_func ("/conyfuse/caps-change", test_caps_change);
  g_test_add_func ("/conyfuse/state-cycles-live", test_state_cycles_live);
  int ret = g_test_run ();
  cony_fusion_free (fusion);
  g_free (model_path);
  return ret;
}
