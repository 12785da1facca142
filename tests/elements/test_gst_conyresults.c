/* How results leave conytransformer (GstHarness): the exact input span of each
 * result through the real audio chain and with a negative lookahead, top-k,
 * the labels property, per-label thresholds from the labels file, and sigmoid
 * (multi-label) models with per-label onset/offset segments; conyjson's
 * records; the custom meta, the bus message and conyjson's record of a step agree
 * (the result table), and the docs name every result field.
 *
 * Models: tests/golden/cnn/small.safetensors (a VGGish-layout CNN, 96x64 ->
 * 128) and tests/golden/transformer/small.safetensors (d_in 128, window 8, 4
 * labels); the sigmoid model is that file with "output":"sigmoid" written into
 * its config. */
#include "cony/encoder.h"
#include "cony/model.h"
#include "gstconymeta.h"
#include "gstconyresult.h"
#include "gstconytokens.h"

#include <gst/gst.h>
#include <gst/check/gstharness.h>
#include <json-glib/json-glib.h>

#include "gsttestutil.h"
#include "testutil.h"
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#define D 128
#define C 4
#define N 8
#define MS (GST_MSECOND)
#define TOKEN_CAPS \
  "other/tensors,format=static,num_tensors=1,types=float32," \
  "dimensions=(string)128:1,framerate=4/1"

static const char *labels[C] = { "speech", "music", "noise", "silence" };

static char *
model_path (void)
{
  return cony_test_golden_path ("transformer", "small.safetensors");
}

/* A copy of the small model whose config says "output":"sigmoid" (the
 * safetensors header grows; the tensor offsets are relative to its end). */
static char *
sigmoid_model_path (const char *dir)
{
  char *src = model_path (), *data = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (src, &data, &len, NULL));
  g_free (src);
  guint64 hlen = GUINT64_FROM_LE (*(guint64 *) data);
  char *header = g_strndup (data + 8, hlen);
  const char *from = "\\\"labels\\\":";
  char *at = strstr (header, from);
  g_assert_nonnull (at);
  GString *h = g_string_new_len (header, at - header);
  g_string_append (h, "\\\"output\\\":\\\"sigmoid\\\",");
  g_string_append (h, at);
  g_strchomp (h->str);
  h->len = strlen (h->str);
  while (h->len % 8 != 0)
    g_string_append_c (h, ' ');
  guint64 le = GUINT64_TO_LE ((guint64) h->len);
  GByteArray *out = g_byte_array_new ();
  g_byte_array_append (out, (guint8 *) &le, 8);
  g_byte_array_append (out, (guint8 *) h->str, h->len);
  g_byte_array_append (out, (guint8 *) data + 8 + hlen, len - 8 - hlen);
  char *path = g_build_filename (dir, "sigmoid.safetensors", NULL);
  g_assert_true (g_file_set_contents (path, (char *) out->data, out->len, NULL));
  g_byte_array_free (out, TRUE);
  g_string_free (h, TRUE);
  g_free (header);
  g_free (data);
  return path;
}

/* Logits of libcony's encoder on @n tokens (@n x C). */
static float *
reference_logits (const float *x, gsize n)
{
  char *path = model_path ();
  GError *error = NULL;
  ConyModel *model = cony_model_load (path, &error);
  g_assert_no_error (error);
  ConyEncoder *enc = cony_encoder_new (model, -1, &error);
  g_assert_no_error (error);
  float *logits = g_new (float, n *C);
  for (gsize i = 0; i < n; i++)
    cony_encoder_step (enc, x + i * D, logits + i * C);
  cony_encoder_free (enc);
  cony_model_free (model);
  g_free (path);
  return logits;
}

static float *
make_tokens (gsize n, guint32 seed)
{
  return cony_test_random_floats (n * D, -2.0, 2.0, seed);
}

static GstHarness *
new_harness (const char *model, const gchar *first_prop, ...)
{
  va_list ap;
  va_start (ap, first_prop);
  GstHarness *h = cony_test_harness_new_valist ("conytransformer", model, first_prop, ap);
  va_end (ap);
  return h;
}

static guint64
get_u64 (const GstStructure *s, const char *field)
{
  guint64 v = 0;
  g_assert_true (gst_structure_get_uint64 (s, field, &v));
  return v;
}

/* ------------------------------------------------------------------------ */

/* The audio chain conymel ! conyvggish ! conytransformer: a result covers
 * from the first sample of the oldest VGGish window in the attention window
 * to the last sample of the newest window (96 frames of 25 ms, 10 ms apart:
 * 975 ms after its PTS), exactly, in buffer, running and stream time. */
static void
test_span_audio_chain (void)
{
  char *cnn = cony_test_golden_path ("cnn", "small.safetensors");
  char *tr = model_path ();
  gchar *launch = g_strdup_printf ("conymel ! conyvggish model=\"%s\" ! "
                                   "conytransformer name=t model=\"%s\"",
      cnn, tr);
  GstHarness *h = gst_harness_new_parse (launch);
  g_free (launch);
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h,
      "audio/x-raw,format=F32LE,rate=16000,channels=1,"
      "layout=interleaved");
  /* segment: starts at 7 s, stream time 100 s, base (running time) 2 s */
  const GstClockTime base = 7 * GST_SECOND;
  cony_test_push_segment (h, base, 100 * GST_SECOND, 2 * GST_SECOND);
  /* 4 s of noise in 100 ms buffers */
  GRand *r = g_rand_new_with_seed (5);
  for (guint b = 0; b < 40; b++) {
    float x[1600];
    for (guint i = 0; i < 1600; i++)
      x[i] = (float) g_rand_double_range (r, -0.5, 0.5);
    GstBuffer *buf = gst_buffer_new_memdup (x, sizeof x);
    GST_BUFFER_PTS (buf) = base + b * 100 * MS;
    GST_BUFFER_DURATION (buf) = 100 * MS;
    if (b == 0)
      GST_BUFFER_FLAG_SET (buf, GST_BUFFER_FLAG_DISCONT);
    g_assert_cmpint (gst_harness_push (h, buf), ==, GST_FLOW_OK);
  }
  g_rand_free (r);

  /* windows start every 250 ms; the last one that fits 4 s of audio
   * (15600 samples from its start) is number (64000 - 15600) / 4000 = 12 */
  guint64 step = 0;
  GstBuffer *buf;
  while ((buf = gst_harness_try_pull (h)) != NULL) {
    GstConyClassificationMeta *m = gst_buffer_get_cony_classification_meta (buf);
    g_assert_nonnull (m);
    g_assert_cmpuint (m->step, ==, step);
    guint64 oldest = step + 1 - MIN (step + 1, N);
    GstClockTime pts = base + step * 250 * MS, start = base + oldest * 250 * MS;
    GstClockTime end = pts + 975 * MS;
    g_assert_cmpuint (GST_BUFFER_PTS (buf), ==, pts);
    g_assert_cmpuint (m->pts, ==, pts);
    g_assert_cmpuint (m->window_start, ==, start);
    g_assert_cmpuint (m->window_end, ==, end);
    g_assert_cmpuint (m->running_start, ==, start - base + 2 * GST_SECOND);
    g_assert_cmpuint (m->running_end, ==, end - base + 2 * GST_SECOND);
    g_assert_cmpuint (m->stream_start, ==, start - base + 100 * GST_SECOND);
    g_assert_cmpuint (m->stream_end, ==, end - base + 100 * GST_SECOND);
    gst_buffer_unref (buf);
    step++;
  }
  g_assert_cmpuint (step, ==, 13);

  /* the messages: level's contract, timestamp + duration = the span */
  GstMessage *msg;
  guint64 n = 0;
  while ((msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT)) != NULL) {
    const GstStructure *s = gst_message_get_structure (msg);
    if (gst_structure_has_name (s, "conytransformer")) {
      guint64 oldest = n + 1 - MIN (n + 1, N);
      GstClockTime pts = base + n * 250 * MS, start = base + oldest * 250 * MS;
      g_assert_cmpuint (get_u64 (s, "step"), ==, n);
      g_assert_cmpuint (get_u64 (s, "pts"), ==, pts);
      g_assert_cmpuint (get_u64 (s, "start"), ==, start);
      g_assert_cmpuint (get_u64 (s, "duration"), ==, pts + 975 * MS - start);
      g_assert_cmpuint (get_u64 (s, "running_start"), ==, start - base + 2 * GST_SECOND);
      g_assert_cmpuint (get_u64 (s, "running_end"), ==, pts + 975 * MS - base + 2 * GST_SECOND);
      g_assert_cmpuint (get_u64 (s, "stream_start"), ==, start - base + 100 * GST_SECOND);
      g_assert_cmpuint (get_u64 (s, "stream_end"), ==, pts + 975 * MS - base + 100 * GST_SECOND);
      n++;
    }
    gst_message_unref (msg);
  }
  g_assert_cmpuint (n, ==, 13);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  g_free (cnn);
  g_free (tr);
}

/* The tail window padded at EOS reaches past the segment's stop (issue #57: a 5 min
 * 23 s OGG ended with stream-time-end = NONE, 18446744073709551615): its span ends at
 * the stop, the end of the input it read, in buffer, running and stream time. 3.3 s of
 * audio in a segment that stops there: 10 full windows, then the padded window at
 * 2.5 s, which would end at 3.475 s. */
static void
test_span_segment_stop (void)
{
  char *cnn = cony_test_golden_path ("cnn", "small.safetensors");
  char *tr = model_path ();
  gchar *launch = g_strdup_printf ("conymel ! conyvggish model=\"%s\" ! "
                                   "conytransformer name=t model=\"%s\"",
      cnn, tr);
  GstHarness *h = gst_harness_new_parse (launch);
  g_free (launch);
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h,
      "audio/x-raw,format=F32LE,rate=16000,channels=1,"
      "layout=interleaved");
  const GstClockTime base = 7 * GST_SECOND, stop = base + 3300 * MS;
  GstSegment seg;
  gst_segment_init (&seg, GST_FORMAT_TIME);
  seg.start = base;
  seg.stop = stop;
  seg.time = 100 * GST_SECOND;
  seg.base = 2 * GST_SECOND;
  g_assert_true (gst_harness_push_event (h, gst_event_new_segment (&seg)));
  GRand *r = g_rand_new_with_seed (6);
  for (guint b = 0; b < 33; b++) {
    float x[1600];
    for (guint i = 0; i < 1600; i++)
      x[i] = (float) g_rand_double_range (r, -0.5, 0.5);
    GstBuffer *buf = gst_buffer_new_memdup (x, sizeof x);
    GST_BUFFER_PTS (buf) = base + b * 100 * MS;
    GST_BUFFER_DURATION (buf) = 100 * MS;
    g_assert_cmpint (gst_harness_push (h, buf), ==, GST_FLOW_OK);
  }
  g_rand_free (r);
  g_assert_true (gst_harness_push_event (h, gst_event_new_eos ()));

  guint64 step = 0;
  GstBuffer *buf;
  while ((buf = gst_harness_try_pull (h)) != NULL) {
    GstConyClassificationMeta *m = gst_buffer_get_cony_classification_meta (buf);
    g_assert_nonnull (m);
    GstClockTime pts = base + step * 250 * MS, end = MIN (pts + 975 * MS, stop);
    g_assert_cmpuint (m->pts, ==, pts);
    g_assert_cmpuint (m->window_end, ==, end);
    g_assert_cmpuint (m->running_end, ==, end - base + 2 * GST_SECOND);
    g_assert_cmpuint (m->stream_end, ==, end - base + 100 * GST_SECOND);
    gst_buffer_unref (buf);
    step++;
  }
  g_assert_cmpuint (step, ==, 11);

  GstMessage *msg;
  guint64 n = 0;
  while ((msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT)) != NULL) {
    const GstStructure *s = gst_message_get_structure (msg);
    if (gst_structure_has_name (s, "conytransformer")) {
      GstClockTime end = MIN (base + n * 250 * MS + 975 * MS, stop);
      g_assert_cmpuint (get_u64 (s, "start") + get_u64 (s, "duration"), ==, end);
      g_assert_cmpuint (get_u64 (s, "running_end"), ==, end - base + 2 * GST_SECOND);
      g_assert_cmpuint (get_u64 (s, "stream_end"), ==, end - base + 100 * GST_SECOND);
      n++;
    }
    gst_message_unref (msg);
  }
  g_assert_cmpuint (n, ==, 11);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  g_free (cnn);
  g_free (tr);
}

/* A negative lookahead (conyframeembed every=2: a token lasts two frames
 * but embeds the first): the span ends with the embedded frame. */
static void
test_span_negative_lookahead (void)
{
  char *path = model_path ();
  GstHarness *h = new_harness (path, NULL);
  g_free (path);
  gst_harness_set_src_caps_str (h,
      "other/tensors,format=static,num_tensors=1,"
      "types=float32,dimensions=(string)128:1,framerate=5/1,lookahead=(fraction)-1/10");
  float *x = make_tokens (3, 9);
  cony_test_push_tokens (h, x, D, 0, 3, 1, 40 * MS, 200 * MS, FALSE);
  for (guint i = 0; i < 3; i++) {
    GstBuffer *buf = gst_harness_pull (h);
    GstConyClassificationMeta *m = gst_buffer_get_cony_classification_meta (buf);
    g_assert_cmpuint (m->pts, ==, 40 * MS + i * 200 * MS);
    g_assert_cmpuint (m->window_start, ==, 40 * MS);
    g_assert_cmpuint (m->window_end, ==, 40 * MS + i * 200 * MS + 100 * MS);
    gst_buffer_unref (buf);
  }
  gst_harness_teardown (h);
  g_free (x);
}

/* Near the end of the 64-bit clock times saturate at GST_CONY_TIME_MAX instead of
 * wrapping: a PTS a second before the end, tokens interpolated over a duration that
 * runs past it (or from the token rate) and a lookahead still give ordered spans,
 * token times and message times (end = PTS + duration + lookahead used to wrap to
 * start > end). */
static void
test_clock_end (void)
{
  const GstClockTime MAX = GST_CONY_TIME_MAX;
  g_assert_cmpuint (MAX, ==, G_MAXUINT64 - 1);
  g_assert_cmpuint (gst_cony_time_add (MAX - 5, 10), ==, MAX);
  g_assert_cmpuint (gst_cony_time_add (MAX - 5, G_MAXUINT64), ==, MAX);
  g_assert_cmpuint (gst_cony_time_add (MAX - 5, 4), ==, MAX - 1);
  g_assert_cmpuint (gst_cony_time_add (GST_CLOCK_TIME_NONE, 1), ==, GST_CLOCK_TIME_NONE);
  g_assert_cmpuint (gst_cony_time_add_signed (5, -10), ==, 0);
  g_assert_cmpuint (gst_cony_time_add_signed (5, G_MININT64), ==, 0);
  g_assert_cmpuint (gst_cony_time_add_signed (MAX - 1, G_MAXINT64), ==, MAX);
  g_assert_cmpuint (gst_cony_time_mul (GST_SECOND, G_MAXUINT64 / 2), ==, MAX);
  g_assert_cmpuint (gst_cony_time_mul (GST_CLOCK_TIME_NONE, 0), ==, GST_CLOCK_TIME_NONE);

  char *path = model_path ();
  float *x = make_tokens (N, 5);
  for (guint with_duration = 0; with_duration < 2; with_duration++) {
    GstHarness *h = new_harness (path, NULL);
    GstBus *bus = cony_test_attach_bus (h);
    gst_harness_set_src_caps_str (h, TOKEN_CAPS ",lookahead=(fraction)3/4");
    GstBuffer *in = gst_buffer_new_memdup (x, N * D * sizeof (float));
    GST_BUFFER_PTS (in) = MAX - GST_SECOND;
    GST_BUFFER_DURATION (in) = with_duration ? 2 * GST_SECOND : GST_CLOCK_TIME_NONE;
    g_assert_cmpint (gst_harness_push (h, in), ==, GST_FLOW_OK);
    GstBuffer *buf = gst_harness_pull (h);
    gpointer state = NULL;
    GstMeta *meta;
    GstClockTime prev = 0;
    guint steps = 0;
    while ((meta = gst_buffer_iterate_meta_filtered (buf, &state,
                GST_CONY_CLASSIFICATION_META_API_TYPE))) {
      GstConyClassificationMeta *m = (GstConyClassificationMeta *) meta;
      g_assert_cmpuint (m->pts, >=, prev);
      g_assert_cmpuint (m->pts, >=, MAX - GST_SECOND);
      g_assert_cmpuint (m->window_start, <=, m->pts);
      g_assert_cmpuint (m->pts, <=, m->window_end);
      g_assert_cmpuint (m->window_end, <=, MAX);
      g_assert_cmpuint (m->running_start, <=, m->running_end);
      g_assert_cmpuint (m->running_end, <=, MAX);
      prev = m->pts;
      steps++;
    }
    g_assert_cmpuint (steps, ==, N);
    gst_buffer_unref (buf);
    /* the last token's time saturated: with a duration, 8 tokens over 2 s from 1 s
     * before the end put tokens 4..7 at the end; at 4 tokens/s only the end + lookahead */
    for (guint i = 0; i < N; i++) {
      GstMessage *msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT);
      g_assert_nonnull (msg);
      const GstStructure *st = gst_message_get_structure (msg);
      guint64 t = get_u64 (st, "start"), d = get_u64 (st, "duration");
      g_assert_cmpuint (d, <=, 3 * GST_SECOND);
      g_assert_cmpuint (t + d, ==, get_u64 (st, "running_end"));
      g_assert_cmpuint (get_u64 (st, "running_start"), <=, get_u64 (st, "running_end"));
      if (i == N - 1)
        g_assert_cmpuint (get_u64 (st, "running_end"), ==, MAX);
      gst_message_unref (msg);
    }
    cony_test_detach_bus (h, bus);
    gst_harness_teardown (h);
  }
  g_free (x);
  g_free (path);
}

/* Per-buffer memory is bounded (#46.2): each step's meta, custom meta and message live
 * as long as the buffer, so a 10 MB buffer of 81,920 tokens held 272 MB (487 MB with the
 * messages). A buffer of more steps than fit in 64 MiB of results is refused (STREAM
 * FORMAT, saying how many tokens a buffer may carry); one at the limit is classified
 * with the peak resident memory measured. */
static void
test_buffer_memory_bound (void)
{
  char *path = model_path ();
  GstHarness *h = new_harness (path, NULL);
  g_free (path);
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS);
  const gsize big = 81920;
  float *x = make_tokens (big, 21);
  GstBuffer *in = gst_buffer_new_memdup (x, big * D * sizeof (float));
  GST_BUFFER_PTS (in) = 0;
  g_assert_cmpint (gst_harness_push (h, in), ==, GST_FLOW_ERROR);
  GError *err = cony_test_pop_gerror (bus, GST_MESSAGE_ERROR, GST_STREAM_ERROR,
      GST_STREAM_ERROR_FORMAT, NULL);
  g_test_message ("%s", err->message);
  g_assert_nonnull (strstr (err->message, "A buffer of 81920 steps is more than the "));
  const char *at = strstr (err->message, "send at most ");
  g_assert_nonnull (at);
  gsize limit = g_ascii_strtoull (at + strlen ("send at most "), NULL, 10);
  g_error_free (err);
  g_assert_cmpuint (limit, >, 1000);
  g_assert_cmpuint (limit, <, big);
  g_assert_null (gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT)); /* nothing classified */

  /* at the limit: classified, the results within the bound */
  cony_test_reset_peak_rss ();
  glong before = cony_test_status_kib ("VmRSS");
  in = gst_buffer_new_memdup (x, limit * D * sizeof (float));
  GST_BUFFER_PTS (in) = 0;
  GST_BUFFER_DURATION (in) = limit * 250 * MS;
  g_assert_cmpint (gst_harness_push (h, in), ==, GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull (h);
  glong peak = cony_test_status_kib ("VmHWM") - before;
  gpointer state = NULL;
  guint metas = 0;
  while (gst_buffer_iterate_meta_filtered (out, &state, GST_CONY_CLASSIFICATION_META_API_TYPE))
    metas++;
  g_assert_cmpuint (metas, ==, limit);
  gst_buffer_unref (out);
  guint messages = 0;
  GstMessage *msg;
  while ((msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT)) != NULL) {
    messages++;
    gst_message_unref (msg);
  }
  g_assert_cmpuint (messages, ==, limit);
  glong tokens_kib = (glong) (limit * D * sizeof (float) / 1024);
  g_test_message ("%" G_GSIZE_FORMAT " steps a buffer at most; peak RSS +%ld KiB with them "
                  "(%ld KiB of it the tokens): %.1f KiB of results a step",
      limit, peak, tokens_kib, (double) (peak - tokens_kib) / limit);
  if (CONY_TEST_CHECK_RSS)
    g_assert_cmpint (peak - tokens_kib, <, 64 * 1024 + 8 * 1024);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  g_free (x);
}

/* top-k: the k best classes, best first, with labels and scores, in the
 * meta, the custom meta and the messages. */
static void
test_top_k (void)
{
  const gsize n = 10;
  float *x = make_tokens (n, 11);
  float *logits = reference_logits (x, n);
  char *path = model_path ();
  GstHarness *h = new_harness (path, "top-k", 3, NULL);
  g_free (path);
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS);
  cony_test_push_tokens (h, x, D, 0, n, 1, 0, 250 * MS, FALSE);
  for (gsize t = 0; t < n; t++) {
    double p[C];
    cony_test_softmax (logits + t * C, C, p);
    /* the expected order: by score, descending */
    int order[C] = { 0, 1, 2, 3 };
    for (int i = 0; i < C; i++)
      for (int j = i + 1; j < C; j++)
        if (p[order[j]] > p[order[i]]) {
          int tmp = order[i];
          order[i] = order[j];
          order[j] = tmp;
        }
    GstBuffer *buf = gst_harness_pull (h);
    GstConyClassificationMeta *m = gst_buffer_get_cony_classification_meta (buf);
    g_assert_cmpuint (m->n_top, ==, 3);
    g_assert_cmpint (m->class_id, ==, order[0]);
    for (int i = 0; i < 3; i++) {
      g_assert_cmpint (m->top_ids[i], ==, order[i]);
      g_assert_cmpstr (m->top_labels[i], ==, labels[order[i]]);
    }
    GstCustomMeta *cm = gst_buffer_get_custom_meta (buf, GST_CONY_CLASSIFICATION_CUSTOM_META_NAME);
    const GstStructure *cs = gst_custom_meta_get_structure (cm);
    const GValue *cl = gst_structure_get_value (cs, "top");
    g_assert_cmpuint (gst_value_array_get_size (cl), ==, 3);
    g_assert_cmpstr (gst_structure_get_string (gst_value_get_structure (
                                                   gst_value_array_get_value (cl, 2)),
                         "label"),
        ==, labels[order[2]]);
    g_assert_cmpstr (gst_structure_get_string (cs, "output"), ==, "softmax");
    gst_buffer_unref (buf);

    GstMessage *msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT);
    const GstStructure *s = gst_message_get_structure (msg);
    const GValue *top = gst_structure_get_value (s, "top");
    g_assert_cmpuint (gst_value_array_get_size (top), ==, 3);
    for (int i = 0; i < 3; i++) {
      const GstStructure *e = gst_value_get_structure (gst_value_array_get_value (top, i));
      gint id;
      gfloat score;
      g_assert_true (
          gst_structure_get (e, "class_id", G_TYPE_INT, &id, "score", G_TYPE_FLOAT, &score, NULL));
      g_assert_cmpint (id, ==, order[i]);
      g_assert_cmpstr (gst_structure_get_string (e, "label"), ==, labels[order[i]]);
      g_assert_cmpfloat_with_epsilon (score, p[order[i]], 1e-6);
    }
    gst_message_unref (msg);
  }
  /* more than the classes: all of them */
  g_object_set (h->element, "top-k", 10, NULL);
  cony_test_push_tokens (h, x, D, 0, 1, 1, 10 * 250 * MS, 250 * MS, FALSE);
  GstBuffer *buf = gst_harness_pull (h);
  g_assert_cmpuint (gst_buffer_get_cony_classification_meta (buf)->n_top, ==, C);
  gst_buffer_unref (buf);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  g_free (logits);
  g_free (x);
}

/* The labels property: the model's labels, or the labels file's (without
 * the thresholds), before (read from the files) and after the model is
 * loaded; NULL without a readable model. */
static void
test_labels_property (void)
{
  char *path = model_path ();
  GstElement *el = gst_element_factory_make ("conytransformer", NULL);
  gchar **got = NULL;
  g_object_get (el, "labels", &got, NULL);
  g_assert_null (got);
  g_object_set (el, "model", "/nonexistent.safetensors", NULL);
  g_object_get (el, "labels", &got, NULL);
  g_assert_null (got);
  g_object_set (el, "model", path, NULL);
  g_object_get (el, "labels", &got, NULL);
  g_assert_cmpuint (g_strv_length (got), ==, C);
  g_assert_cmpstr (got[3], ==, labels[3]);
  g_strfreev (got);
  g_assert_cmpint (gst_element_set_state (el, GST_STATE_PAUSED), !=, GST_STATE_CHANGE_FAILURE);
  g_object_get (el, "labels", &got, NULL);
  g_assert_cmpuint (g_strv_length (got), ==, C);
  for (int i = 0; i < C; i++)
    g_assert_cmpstr (got[i], ==, labels[i]);
  g_strfreev (got);
  gst_element_set_state (el, GST_STATE_NULL);

  char *dir = g_dir_make_tmp ("conyresults-XXXXXX", NULL);
  char *file = g_build_filename (dir, "labels.txt", NULL);
  g_assert_true (g_file_set_contents (file, "a\t0.5\nb b\nc\t1\nd\t0\n", -1, NULL));
  g_object_set (el, "labels-file", file, NULL);
  const char *want[] = { "a", "b b", "c", "d", NULL };
  g_object_get (el, "labels", &got, NULL);
  g_assert_cmpstrv (got, want);
  g_strfreev (got);
  g_assert_cmpint (gst_element_set_state (el, GST_STATE_PAUSED), !=, GST_STATE_CHANGE_FAILURE);
  g_object_get (el, "labels", &got, NULL);
  g_assert_cmpstrv (got, want);
  g_strfreev (got);
  gst_element_set_state (el, GST_STATE_NULL);
  gst_object_unref (el);
  g_unlink (file);
  g_rmdir (dir);
  g_free (file);
  g_free (dir);
  g_free (path);
}

/* Writes @text as labels.txt in @dir. */
static char *
write_labels (const char *dir, const char *text)
{
  char *file = g_build_filename (dir, "labels.txt", NULL);
  g_assert_true (g_file_set_contents (file, text, -1, NULL));
  return file;
}

/* Thresholds per label (label<TAB>threshold): in every-step mode a step is
 * posted when its top class reaches its own threshold, the threshold
 * property standing in for labels without one; a bad threshold fails the
 * state change naming the line. */
static void
test_thresholds_file (void)
{
  const gsize n = 40;
  float *x = make_tokens (n, 13);
  float *logits = reference_logits (x, n);
  char *dir = g_dir_make_tmp ("conyresults-XXXXXX", NULL);
  /* speech and noise with their own; music and silence get the property's 0.45 */
  char *file = write_labels (dir, "speech\t0.6\nmusic\nnoise\t0.3\nsilence\n");
  const double thr[C] = { 0.6, 0.45, 0.3, 0.45 };
  char *path = model_path ();
  GstHarness *h = new_harness (path, "labels-file", file, "threshold", 0.45, NULL);
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS);
  cony_test_push_tokens (h, x, D, 0, n, 1, 0, 250 * MS, FALSE);
  guint posted = 0, skipped = 0;
  GstMessage *msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT);
  for (gsize t = 0; t < n; t++) {
    double p[C];
    cony_test_softmax (logits + t * C, C, p);
    int top = 0;
    for (int i = 1; i < C; i++)
      if (p[i] > p[top])
        top = i;
    if (p[top] < thr[top]) {
      skipped++;
      continue;
    }
    g_assert_nonnull (msg);
    const GstStructure *s = gst_message_get_structure (msg);
    g_assert_cmpuint (get_u64 (s, "step"), ==, t);
    g_assert_cmpstr (gst_structure_get_string (s, "label"), ==, labels[top]);
    gst_message_unref (msg);
    msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT);
    posted++;
  }
  g_assert_null (msg);
  g_test_message ("%u steps posted, %u below their label's threshold", posted, skipped);
  g_assert_cmpuint (posted, >, 0);
  g_assert_cmpuint (skipped, >, 0);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  g_free (file);

  /* a threshold that is not a number from 0 to 1 */
  const char *bad[] = { "speech\t1.5\nmusic\nnoise\nsilence\n",
    "speech\nmusic\tx\nnoise\nsilence\n" };
  const char *line[] = { "line 1 (speech)", "line 2 (music)" };
  for (guint b = 0; b < G_N_ELEMENTS (bad); b++) {
    file = write_labels (dir, bad[b]);
    GstElement *el = cony_test_element_new ("conytransformer", path, "labels-file", file, NULL);
    GError *err = cony_test_assert_start_fails (el, NULL);
    g_test_message ("%s", err->message);
    g_assert_nonnull (strstr (err->message, line[b]));
    g_assert_nonnull (strstr (err->message, "threshold"));
    g_error_free (err);
    gst_object_unref (el);
    g_unlink (file);
    g_free (file);
  }
  g_rmdir (dir);
  g_free (dir);
  g_free (path);
  g_free (logits);
  g_free (x);
}

typedef struct {
  gboolean onset;
  int cls;
  guint64 step;
  GstClockTime start, end; /* running time; end for offsets only */
  gboolean eos;
} Event;

/* Events in the order the element gives them: by step, offsets first, in class order;
 * the EOS offsets last. */
static gint
event_order (gconstpointer pa, gconstpointer pb)
{
  const Event *a = pa, *b = pb;
  if (a->eos != b->eos)
    return a->eos - b->eos;
  if (a->step != b->step)
    return a->step < b->step ? -1 : 1;
  if (a->onset != b->onset)
    return a->onset - b->onset;
  return a->cls - b->cls;
}

/* Sigmoid models: scores are per-class sigmoids; in on-change mode each
 * label opens a segment when its score reaches its threshold and closes it
 * when it falls below: onset/offset messages with exact running times
 * (segment-start = running time of the first step's PTS, segment-end = the
 * end of the last step's token), offsets closed at EOS. With a hold (@hold =
 * @hold_value: K steps) onsets and offsets wait for K steps of the new state; with
 * @hyst > 0 (K = 1) an open label closes only below its threshold - @hyst. */
static void
check_sigmoid_segments (const gchar *hold, guint64 hold_value, guint K, double hyst)
{
  const gsize n = 40;
  float *x = make_tokens (n, 17);
  float *logits = reference_logits (x, n);
  char *dir = g_dir_make_tmp ("conyresults-XXXXXX", NULL);
  char *sig = sigmoid_model_path (dir);

  /* per-class thresholds at each class's median score, so labels toggle */
  double thr[C];
  for (int c = 0; c < C; c++) {
    double v[40];
    for (gsize t = 0; t < n; t++)
      v[t] = 1.0 / (1.0 + exp (-(double) logits[t * C + c]));
    for (gsize i = 0; i < n; i++)
      for (gsize j = i + 1; j < n; j++)
        if (v[j] < v[i]) {
          double tmp = v[i];
          v[i] = v[j];
          v[j] = tmp;
        }
    /* between two scores, rounded so the text round-trips */
    thr[c] = floor ((v[n / 2 - 1] + v[n / 2]) / 2 * 1e6) / 1e6;
  }
  GString *text = g_string_new (NULL);
  for (int c = 0; c < C; c++)
    g_string_append_printf (text, "%s\t%.6f\n", labels[c], thr[c]);
  char *file = write_labels (dir, text->str);
  g_string_free (text, TRUE);

  /* the expected events, from the runs of each label's on/off sequence: a run of the
   * other state than the reported one is reported at its K-th step (onset from its
   * first step; offset ending there), shorter runs are the reported state's */
  const GstClockTime base = 5 * GST_SECOND, rbase = GST_SECOND;
  GArray *want = g_array_new (FALSE, FALSE, sizeof (Event));
  guint flicker = 0, held_by_hyst = 0;
  g_assert_true (hyst == 0 || K == 1);
  for (int c = 0; c < C; c++) {
    gboolean b[40], cur = FALSE;
    GstClockTime on_start = 0;
    for (gsize t = 0; t < n; t++) {
      double p = 1.0 / (1.0 + exp (-(double) logits[t * C + c]));
      b[t] = p >= (t > 0 && b[t - 1] ? thr[c] - hyst : thr[c]);
      held_by_hyst += b[t] && p < thr[c];
    }
    for (gsize r = 0, e; r < n; r = e) {
      for (e = r + 1; e < n && b[e] == b[r];)
        e++;
      if (b[r] == cur)
        continue;
      if (e - r < K) {
        flicker++;
        continue;
      }
      Event ev = { b[r], c, r + K - 1, b[r] ? rbase + r * 250 * MS : on_start,
        b[r] ? GST_CLOCK_TIME_NONE : rbase + r * 250 * MS, FALSE };
      g_array_append_val (want, ev);
      cur = b[r];
      on_start = rbase + r * 250 * MS;
    }
    if (cur) {
      Event ev = { FALSE, c, n - 1, on_start, rbase + n * 250 * MS, TRUE };
      g_array_append_val (want, ev);
    }
  }
  g_array_sort (want, event_order);
  if (K > 1)
    g_assert_cmpuint (flicker, >=, 2);
  if (hyst > 0) /* the data must hold labels kept open by the hysteresis */
    g_assert_cmpuint (held_by_hyst, >=, 2);
  g_assert_cmpuint (want->len, >, K > 1 ? C : 2 * C);

  GstHarness *h = new_harness (sig, "labels-file", file, "message-mode", 1, "top-k", 2, NULL);
  if (g_str_equal (hold, "min-steps"))
    g_object_set (h->element, hold, (guint) hold_value, NULL);
  else
    g_object_set (h->element, hold, hold_value, NULL);
  g_object_set (h->element, "hysteresis", hyst, NULL);
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS);
  cony_test_push_segment (h, base, 0, rbase);
  cony_test_push_tokens (h, x, D, 0, n, 1, base, 250 * MS, FALSE);
  /* the meta: sigmoid scores, multi_label, this step's segment events */
  guint w = 0;
  for (gsize t = 0; t < n; t++) {
    GstBuffer *buf = gst_harness_pull (h);
    GstConyClassificationMeta *m = gst_buffer_get_cony_classification_meta (buf);
    g_assert_true (m->multi_label);
    for (int c = 0; c < C; c++)
      g_assert_cmpfloat_with_epsilon (m->scores[c], 1.0 / (1.0 + exp (-(double) logits[t * C + c])),
          1e-6);
    g_assert_cmpuint (m->n_top, ==, 2);
    g_assert_cmpfloat (m->scores[m->top_ids[0]], >=, m->scores[m->top_ids[1]]);
    for (guint i = 0; i < m->n_events; i++, w++) {
      const Event *e = &g_array_index (want, Event, w);
      g_assert_cmpuint (e->step, ==, t);
      g_assert_cmpint (m->events[i].onset, ==, e->onset);
      g_assert_cmpstr (m->events[i].label, ==, labels[e->cls]);
      g_assert_cmpuint (m->events[i].start, ==, e->start);
      g_assert_cmpuint (m->events[i].end, ==, e->onset ? GST_CLOCK_TIME_NONE : e->end);
    }
    gst_buffer_unref (buf);
  }
  /* every event but the EOS offsets was on a meta */
  while (w < want->len)
    g_assert_true (g_array_index (want, Event, w++).eos);
  g_assert_true (gst_harness_push_event (h, gst_event_new_eos ()));

  guint i = 0;
  GstMessage *msg;
  while ((msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT)) != NULL) {
    const GstStructure *s = gst_message_get_structure (msg);
    g_assert_cmpuint (i, <, want->len);
    const Event *e = &g_array_index (want, Event, i);
    const char *ev = gst_structure_get_string (s, "event");
    g_assert_cmpstr (ev, ==, e->onset ? "onset" : "offset");
    g_assert_cmpstr (gst_structure_get_string (s, "label"), ==, labels[e->cls]);
    g_assert_cmpuint (get_u64 (s, "step"), ==, e->step);
    g_assert_cmpuint (get_u64 (s, "segment_start"), ==, e->start);
    if (!e->onset)
      g_assert_cmpuint (get_u64 (s, "segment_end"), ==, e->end);
    gboolean eos = FALSE;
    gst_structure_get_boolean (s, "eos", &eos);
    g_assert_cmpint (eos, ==, e->eos);
    g_assert_cmpstr (gst_structure_get_string (s, "output"), ==, "sigmoid");
    gst_message_unref (msg);
    i++;
  }
  g_assert_cmpuint (i, ==, want->len);
  g_test_message ("%u onset/offset events", i);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  g_array_free (want, TRUE);
  g_unlink (file);
  g_unlink (sig);
  g_rmdir (dir);
  g_free (file);
  g_free (sig);
  g_free (dir);
  g_free (logits);
  g_free (x);
}

/* The next output buffer of @h as one JSON line of record type @type:
 * its object (owned by *@parser; unref it and unref *@buf). */
static JsonObject *
pull_json_record (GstHarness *h, const gchar *type, JsonParser **parser, GstBuffer **buf)
{
  GstMapInfo map;
  GError *error = NULL;

  *buf = gst_harness_pull (h);
  g_assert_nonnull (*buf);
  g_assert_true (gst_buffer_map (*buf, &map, GST_MAP_READ));
  g_assert_cmpuint (map.size, >, 1);
  g_assert_cmpint (map.data[map.size - 1], ==, '\n');
  g_assert_null (memchr (map.data, '\n', map.size - 1)); /* one line */
  *parser = json_parser_new ();
  g_assert_true (
      json_parser_load_from_data (*parser, (const gchar *) map.data, (gssize) map.size, &error));
  g_assert_no_error (error);
  gst_buffer_unmap (*buf, &map);
  JsonObject *o = json_node_get_object (json_parser_get_root (*parser));
  g_assert_cmpstr (json_object_get_string_member (o, "type"), ==, type);
  g_assert_cmpstr (json_object_get_string_member (o, "source"), ==, "unit-test");
  return o;
}

/* A "stream" record with the token caps' fields and @lookahead. */
static void
check_stream_record (GstHarness *h, const gchar *lookahead)
{
  JsonParser *parser;
  GstBuffer *buf;
  JsonObject *o = pull_json_record (h, "stream", &parser, &buf);
  JsonObject *st = json_object_get_object_member (o, "stream");
  g_assert_cmpstr (json_object_get_string_member (st, "media"), ==, "other/tensors");
  g_assert_cmpstr (json_object_get_string_member (st, "dimensions"), ==, "128:1");
  g_assert_cmpstr (json_object_get_string_member (st, "framerate"), ==, "4/1");
  g_assert_cmpstr (json_object_get_string_member (st, "lookahead"), ==, lookahead);
  g_assert_cmpint (json_object_get_int_member (st, "num_tensors"), ==, 1);
  g_object_unref (parser);
  gst_buffer_unref (buf);
}

static void
test_sigmoid_segments (void)
{
  check_sigmoid_segments ("min-steps", 1, 1, 0);
  check_sigmoid_segments ("min-steps", 2, 2, 0);
  check_sigmoid_segments ("min-duration", 600 * MS, 3, 0);
  check_sigmoid_segments ("min-steps", 1, 1, 0.1);
}

/* conyjson: a "stream" record with the stream's caps first and after a caps
 * change (not on every line); one "result" object per result,
 * newline-terminated, with the span, the top-k, the segment events and the
 * scores; labels escaped; at EOS an "eos" record with the offset of the
 * open segment; buffers without a meta give nothing. */
static void
test_json_records (void)
{
  const gsize n = 10;
  float *x = make_tokens (n, 19);
  float *logits = reference_logits (x, n);
  char *dir = g_dir_make_tmp ("conyresults-XXXXXX", NULL);
  /* labels that need escaping */
  char *file = write_labels (dir, "sp\"eech\nmu\\sic\nno ise\nsilence\n");
  const char *names[C] = { "sp\"eech", "mu\\sic", "no ise", "silence" };
  char *path = model_path ();
  gchar *launch = g_strdup_printf ("conytransformer model=\"%s\" labels-file=\"%s\" top-k=2 "
                                   "message-mode=on-change ! conyjson source=unit-test scores=true",
      path, file);
  GstHarness *h = gst_harness_new_parse (launch);
  g_free (launch);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS ",lookahead=(fraction)29/40");
  GstCaps *out_caps = gst_pad_get_current_caps (h->sinkpad);
  g_assert_true (
      gst_structure_has_name (gst_caps_get_structure (out_caps, 0), "application/x-json"));
  gst_caps_unref (out_caps);
  const GstClockTime base = 3 * GST_SECOND;
  cony_test_push_segment (h, base, 50 * GST_SECOND, GST_SECOND);
  cony_test_push_tokens (h, x, D, 0, n, 1, base, 250 * MS, FALSE);

  int prev_top = -1;
  check_stream_record (h, "29/40");
  for (gsize t = 0; t < n; t++) {
    JsonParser *parser;
    GstBuffer *buf;
    JsonObject *o = pull_json_record (h, "result", &parser, &buf);
    g_assert_false (json_object_has_member (o, "stream"));
    double p[C];
    cony_test_softmax (logits + t * C, C, p);
    int top = 0, second = -1;
    for (int i = 1; i < C; i++)
      if (p[i] > p[top])
        top = i;
    for (int i = 0; i < C; i++)
      if (i != top && (second < 0 || p[i] > p[second]))
        second = i;
    guint64 oldest = t + 1 - MIN (t + 1, N);
    GstClockTime pts = base + t * 250 * MS, start = base + oldest * 250 * MS;
    GstClockTime end = pts + 975 * MS;
    g_assert_cmpuint (GST_BUFFER_PTS (buf), ==, pts);
    g_assert_cmpint (json_object_get_int_member (o, "step"), ==, t);
    g_assert_cmpint (json_object_get_int_member (o, "pts"), ==, pts);
    g_assert_cmpint (json_object_get_int_member (o, "start"), ==, start);
    g_assert_cmpint (json_object_get_int_member (o, "end"), ==, end);
    g_assert_cmpint (json_object_get_int_member (o, "duration"), ==, end - start);
    g_assert_cmpint (json_object_get_int_member (o, "running_start"), ==,
        start - base + GST_SECOND);
    g_assert_cmpint (json_object_get_int_member (o, "running_end"), ==, end - base + GST_SECOND);
    g_assert_cmpint (json_object_get_int_member (o, "stream_start"), ==,
        start - base + 50 * GST_SECOND);
    g_assert_cmpint (json_object_get_int_member (o, "stream_end"), ==,
        end - base + 50 * GST_SECOND);
    g_assert_cmpstr (json_object_get_string_member (o, "output"), ==, "softmax");
    g_assert_cmpint (json_object_get_int_member (o, "class_id"), ==, top);
    g_assert_cmpstr (json_object_get_string_member (o, "label"), ==, names[top]);
    g_assert_cmpfloat_with_epsilon (json_object_get_double_member (o, "score"), p[top], 1e-6);
    g_assert_cmpfloat (json_object_get_double_member (o, "context_fill"), ==,
        (double) MIN (t + 1, N) / N);
    JsonArray *tk = json_object_get_array_member (o, "top");
    g_assert_cmpuint (json_array_get_length (tk), ==, 2);
    JsonObject *t1 = json_array_get_object_element (tk, 1);
    g_assert_cmpint (json_object_get_int_member (t1, "class_id"), ==, second);
    g_assert_cmpstr (json_object_get_string_member (t1, "label"), ==, names[second]);
    g_assert_cmpfloat_with_epsilon (json_object_get_double_member (t1, "score"), p[second], 1e-6);
    JsonArray *sc = json_object_get_array_member (o, "scores");
    g_assert_cmpuint (json_array_get_length (sc), ==, C);
    for (int i = 0; i < C; i++)
      g_assert_cmpfloat_with_epsilon (json_array_get_double_element (sc, i), p[i], 1e-6);
    /* on-change segments: an onset when the top label changes, after the
     * offset of the previous one */
    JsonArray *ev = json_object_get_array_member (o, "events");
    guint want_events = top == prev_top ? 0 : prev_top < 0 ? 1 : 2;
    g_assert_cmpuint (json_array_get_length (ev), ==, want_events);
    if (want_events > 0) {
      JsonObject *on = json_array_get_object_element (ev, want_events - 1);
      g_assert_cmpstr (json_object_get_string_member (on, "event"), ==, "onset");
      g_assert_cmpstr (json_object_get_string_member (on, "label"), ==, names[top]);
      g_assert_cmpint (json_object_get_int_member (on, "segment_start"), ==,
          pts - base + GST_SECOND);
      g_assert_true (json_object_get_null_member (on, "segment_end"));
    }
    if (want_events == 2) {
      JsonObject *off = json_array_get_object_element (ev, 0);
      g_assert_cmpstr (json_object_get_string_member (off, "event"), ==, "offset");
      g_assert_cmpstr (json_object_get_string_member (off, "label"), ==, names[prev_top]);
      g_assert_cmpint (json_object_get_int_member (off, "segment_end"), ==,
          pts - base + GST_SECOND);
    }
    prev_top = top;
    g_object_unref (parser);
    gst_buffer_unref (buf);
  }
  g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, 0);

  /* new caps (another lookahead): a new stream record, then the result */
  gst_harness_set_src_caps_str (h, TOKEN_CAPS ",lookahead=(fraction)0/1");
  cony_test_push_segment (h, base, 50 * GST_SECOND, GST_SECOND); /* (the harness pushed one) */
  GstClockTime last_pts = base + n * 250 * MS;
  cony_test_push_tokens (h, x, D, 0, 1, 1, last_pts, 250 * MS, FALSE);
  check_stream_record (h, "0/1");
  JsonParser *parser;
  GstBuffer *buf;
  JsonObject *o = pull_json_record (h, "result", &parser, &buf);
  gchar *last_label = g_strdup (json_object_get_string_member (o, "label"));
  guint64 last_step = json_object_get_int_member (o, "step");
  g_object_unref (parser);
  gst_buffer_unref (buf);

  /* EOS: the open segment's offset, ending with the last step's token */
  g_assert_true (gst_harness_push_event (h, gst_event_new_eos ()));
  o = pull_json_record (h, "eos", &parser, &buf);
  g_assert_cmpint (json_object_get_int_member (o, "step"), ==, last_step);
  JsonArray *ev = json_object_get_array_member (o, "events");
  g_assert_cmpuint (json_array_get_length (ev), ==, 1);
  JsonObject *off = json_array_get_object_element (ev, 0);
  g_assert_cmpstr (json_object_get_string_member (off, "event"), ==, "offset");
  g_assert_cmpstr (json_object_get_string_member (off, "label"), ==, last_label);
  g_assert_cmpint (json_object_get_int_member (off, "segment_end"), ==,
      last_pts + 250 * MS - base + GST_SECOND);
  g_free (last_label);
  g_object_unref (parser);
  gst_buffer_unref (buf);
  g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, 0);
  gst_harness_teardown (h);

  /* a buffer without a classification meta: no output */
  h = gst_harness_new ("conyjson");
  gst_harness_set_src_caps_str (h, TOKEN_CAPS);
  cony_test_push_tokens (h, x, D, 0, 3, 1, 0, 250 * MS, FALSE);
  g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, 0);
  gst_harness_teardown (h);

  g_unlink (file);
  g_rmdir (dir);
  g_free (file);
  g_free (dir);
  g_free (path);
  g_free (logits);
  g_free (x);
}

/* ------------------------------------------------------------------------ */
/* One result, three outputs (issue #55): the custom meta, the bus message and
 * conyjson's record of the same step carry the same fields, named and ordered as the
 * result table (gstconyresult.c), with the same values; the C meta agrees with them. */

/* @v (a custom meta or message value) equals the JSON node @n: numbers (floats to the
 * 7 digits JSON keeps), strings, booleans, NONE times as null, arrays and structures
 * member by member. */
static void
assert_value_is_json (const gchar *field, const GValue *v, JsonNode *n)
{
  GType t = G_VALUE_TYPE (v);
  if (t == G_TYPE_UINT64 && g_value_get_uint64 (v) == GST_CLOCK_TIME_NONE) {
    g_assert_true (JSON_NODE_HOLDS_NULL (n));
  } else if (t == G_TYPE_UINT64) {
    g_assert_cmpint (json_node_get_int (n), ==, (gint64) g_value_get_uint64 (v));
  } else if (t == G_TYPE_INT) {
    g_assert_cmpint (json_node_get_int (n), ==, g_value_get_int (v));
  } else if (t == G_TYPE_STRING) {
    g_assert_cmpstr (json_node_get_string (n), ==, g_value_get_string (v));
  } else if (t == G_TYPE_BOOLEAN) {
    g_assert_cmpint (json_node_get_boolean (n), ==, g_value_get_boolean (v));
  } else if (t == G_TYPE_FLOAT || t == G_TYPE_DOUBLE) {
    double x = t == G_TYPE_FLOAT ? g_value_get_float (v) : g_value_get_double (v);
    g_assert_cmpfloat (fabs (json_node_get_double (n) - x), <=, 1e-6 * fabs (x) + 1e-12);
  } else if (t == GST_TYPE_ARRAY) {
    JsonArray *a = json_node_get_array (n);
    g_assert_cmpuint (json_array_get_length (a), ==, gst_value_array_get_size (v));
    for (guint i = 0; i < gst_value_array_get_size (v); i++)
      assert_value_is_json (field, gst_value_array_get_value (v, i), json_array_get_element (a, i));
  } else if (t == GST_TYPE_STRUCTURE) {
    const GstStructure *s = gst_value_get_structure (v);
    JsonObject *o = json_node_get_object (n);
    g_assert_cmpuint (json_object_get_size (o), ==, gst_structure_n_fields (s));
    for (gint i = 0; i < gst_structure_n_fields (s); i++) {
      const gchar *name = gst_structure_nth_field_name (s, i);
      g_assert_true (json_object_has_member (o, name));
      assert_value_is_json (name, gst_structure_get_value (s, name),
          json_object_get_member (o, name));
    }
  } else {
    g_error ("field %s: unexpected type %s", field, g_type_name (t));
  }
}

/* The fields of @s are those of the result table present for a result (gated or
 * not), in its order. */
static void
assert_table_fields (const GstStructure *s, gboolean gated)
{
  guint n;
  const GstConyResultField *f = gst_cony_result_fields (&n);
  gint at = 0;
  for (guint i = 0; i < n; i++) {
    if ((f[i].presence == GST_CONY_RESULT_CLASSIFIED && gated)
        || (f[i].presence == GST_CONY_RESULT_GATED && !gated))
      continue;
    g_assert_cmpint (at, <, gst_structure_n_fields (s));
    g_assert_cmpstr (gst_structure_nth_field_name (s, at++), ==, f[i].name);
  }
  g_assert_cmpint (at, ==, gst_structure_n_fields (s));
}

/* The C meta's members agree with the structure's fields. */
static void
assert_meta_is_structure (const GstConyClassificationMeta *m, const GstStructure *s)
{
  g_assert_cmpuint (get_u64 (s, "step"), ==, m->step);
  g_assert_cmpuint (get_u64 (s, "pts"), ==, m->pts);
  g_assert_cmpuint (get_u64 (s, "start"), ==, m->window_start);
  g_assert_cmpuint (get_u64 (s, "end"), ==, m->window_end);
  g_assert_cmpuint (get_u64 (s, "duration"), ==, m->window_end - m->window_start);
  g_assert_cmpuint (get_u64 (s, "running_start"), ==, m->running_start);
  g_assert_cmpuint (get_u64 (s, "running_end"), ==, m->running_end);
  g_assert_cmpuint (get_u64 (s, "stream_start"), ==, m->stream_start);
  g_assert_cmpuint (get_u64 (s, "stream_end"), ==, m->stream_end);
  g_assert_cmpstr (gst_structure_get_string (s, "output"), ==,
      m->multi_label ? "sigmoid" : "softmax");
  gint cls;
  gfloat score;
  gdouble fill;
  g_assert_true (gst_structure_get (s, "class_id", G_TYPE_INT, &cls, "score", G_TYPE_FLOAT, &score,
      "context_fill", G_TYPE_DOUBLE, &fill, NULL));
  g_assert_cmpint (cls, ==, m->class_id);
  g_assert_cmpfloat (score, ==, m->score);
  g_assert_cmpfloat (fill, ==, m->context_fill);
  g_assert_cmpstr (gst_structure_get_string (s, "label"), ==, m->label);
  const GValue *sc = gst_structure_get_value (s, "scores");
  g_assert_cmpuint (gst_value_array_get_size (sc), ==, m->n_scores);
  for (guint i = 0; i < m->n_scores; i++)
    g_assert_cmpfloat (g_value_get_float (gst_value_array_get_value (sc, i)), ==, m->scores[i]);
  const GValue *top = gst_structure_get_value (s, "top");
  g_assert_cmpuint (gst_value_array_get_size (top), ==, m->n_top);
  for (guint i = 0; i < m->n_top; i++) {
    const GstStructure *e = gst_value_get_structure (gst_value_array_get_value (top, i));
    g_assert_true (
        gst_structure_get (e, "class_id", G_TYPE_INT, &cls, "score", G_TYPE_FLOAT, &score, NULL));
    g_assert_cmpint (cls, ==, m->top_ids[i]);
    g_assert_cmpstr (gst_structure_get_string (e, "label"), ==, m->top_labels[i]);
    g_assert_cmpfloat (score, ==, m->scores[m->top_ids[i]]);
  }
  const GValue *ev = gst_structure_get_value (s, "events");
  g_assert_cmpuint (gst_value_array_get_size (ev), ==, m->n_events);
  for (guint i = 0; i < m->n_events; i++) {
    const GstStructure *e = gst_value_get_structure (gst_value_array_get_value (ev, i));
    GstConyClassificationEvent got;
    g_assert_true (gst_cony_result_read_event (e, &got));
    g_assert_cmpint (got.onset, ==, m->events[i].onset);
    g_assert_cmpint (got.class_id, ==, m->events[i].class_id);
    g_assert_cmpstr (got.label, ==, m->events[i].label);
    g_assert_cmpuint (got.start, ==, m->events[i].start);
    g_assert_cmpuint (got.end, ==, m->events[i].end);
  }
}

static void
test_three_outputs (void)
{
  const gsize n = 12;
  float *x = make_tokens (n, 23);
  char *path = model_path ();
  /* threshold 0, every step: a message for each step */
  GstHarness *h = new_harness (path, "top-k", 3, NULL);
  g_free (path);
  GstHarness *json = gst_harness_new_parse ("conyjson source=unit-test scores=true");
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS);
  gst_harness_set_src_caps_str (json, TOKEN_CAPS);
  const GstClockTime base = 2 * GST_SECOND;
  cony_test_push_segment (h, base, 40 * GST_SECOND, GST_SECOND);
  cony_test_push_tokens (h, x, D, 0, n, 1, base, 250 * MS, FALSE);

  guint n_events = 0;
  for (gsize t = 0; t < n; t++) {
    GstBuffer *buf = gst_harness_pull (h);
    const GstConyClassificationMeta *m = gst_buffer_get_cony_classification_meta (buf);
    GstCustomMeta *cm = gst_buffer_get_custom_meta (buf, GST_CONY_CLASSIFICATION_CUSTOM_META_NAME);
    g_assert_nonnull (m);
    g_assert_nonnull (cm);
    const GstStructure *cs = gst_custom_meta_get_structure (cm);
    GstMessage *msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT);
    g_assert_nonnull (msg);
    const GstStructure *ms = gst_message_get_structure (msg);

    /* names: the table's, in order, in both structures */
    assert_table_fields (cs, FALSE);
    assert_table_fields (ms, FALSE);
    assert_meta_is_structure (m, cs);
    /* the message's values are the custom meta's */
    for (gint i = 0; i < gst_structure_n_fields (cs); i++) {
      const gchar *name = gst_structure_nth_field_name (cs, i);
      g_assert_cmpint (gst_value_compare (gst_structure_get_value (cs, name),
                           gst_structure_get_value (ms, name)),
          ==, GST_VALUE_EQUAL);
    }
    /* conyjson's record: type, source, then exactly those fields with those values */
    gst_harness_push (json, gst_buffer_ref (buf));
    JsonParser *parser;
    GstBuffer *line;
    if (t == 0) { /* the stream record comes first */
      pull_json_record (json, "stream", &parser, &line);
      g_object_unref (parser);
      gst_buffer_unref (line);
    }
    JsonObject *o = pull_json_record (json, "result", &parser, &line);
    GList *members = json_object_get_members (o);
    g_assert_cmpstr (members->data, ==, "type");
    g_assert_cmpstr (members->next->data, ==, "source");
    GList *l = members->next->next;
    for (gint i = 0; i < gst_structure_n_fields (cs); i++, l = l->next) {
      const gchar *name = gst_structure_nth_field_name (cs, i);
      g_assert_nonnull (l);
      g_assert_cmpstr (l->data, ==, name);
      assert_value_is_json (name, gst_structure_get_value (cs, name),
          json_object_get_member (o, name));
    }
    g_assert_null (l);
    g_list_free (members);
    n_events += m->n_events;
    g_object_unref (parser);
    gst_buffer_unref (line);
    gst_message_unref (msg);
    gst_buffer_unref (buf);
  }
  g_assert_cmpuint (n_events, >, 0); /* the events arrays were compared with content */
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (json);
  gst_harness_teardown (h);
  g_free (x);
}

/* Every result field (and every field of a `top` and an `events` entry) is in
 * docs/results.schema.json and docs/elements.md. */
static void
test_fields_documented (void)
{
  const GstConyResultField *(*tables[]) (guint *) = { gst_cony_result_fields,
    gst_cony_result_class_fields, gst_cony_result_event_fields };
  const char *docs[] = { "results.schema.json", "elements.md" };
  for (guint d = 0; d < G_N_ELEMENTS (docs); d++) {
    char *file = g_build_filename (g_getenv ("CONY_SOURCE_ROOT"), "docs", docs[d], NULL);
    char *text = NULL;
    g_assert_true (g_file_get_contents (file, &text, NULL, NULL));
    for (guint t = 0; t < G_N_ELEMENTS (tables); t++) {
      guint n;
      const GstConyResultField *f = tables[t](&n);
      g_assert_cmpuint (n, >, 0);
      for (guint i = 0; i < n; i++) {
        char *quoted = g_strdup_printf (d == 0 ? "\"%s\"" : "`%s`", f[i].name);
        if (strstr (text, quoted) == NULL)
          g_error ("%s does not document the result field %s", file, quoted);
        g_free (quoted);
      }
    }
    g_free (text);
    g_free (file);
  }
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/results/span-audio-chain", test_span_audio_chain);
  g_test_add_func ("/results/span-segment-stop", test_span_segment_stop);
  g_test_add_func ("/results/span-negative-lookahead", test_span_negative_lookahead);
  g_test_add_func ("/results/clock-end", test_clock_end);
  g_test_add_func ("/results/buffer-memory-bound", test_buffer_memory_bound);
  g_test_add_func ("/results/top-k", test_top_k);
  g_test_add_func ("/results/labels-property", test_labels_property);
  g_test_add_func ("/results/thresholds-file", test_thresholds_file);
  g_test_add_func ("/results/sigmoid-segments", test_sigmoid_segments);
  g_test_add_func ("/results/json-records", test_json_records);
  g_test_add_func ("/results/three-outputs", test_three_outputs);
  g_test_add_func ("/results/fields-documented", test_fields_documented);
  return g_test_run ();
}
