/* conytransformer element tests (GstHarness): metas and messages against
 * libcony's encoder stepped directly on the same tokens, meta copies,
 * flush / DISCONT / caps resets, NaN tokens, on-change messages, latency,
 * bad models, labels files.
 *
 * Model: tests/golden/transformer/small.safetensors (training/gen_transformer_golden.py:
 * d_in 128, 2 CoNy blocks, window 8, fixed landmarks, 4 labels). */
#include "cony/encoder.h"
#include "cony/model.h"
#include "gstconymeta.h"

#include <gst/gst.h>
#include <gst/check/gstharness.h>

#include "gsttestutil.h"
#include "testutil.h"
#include <glib/gstdio.h>
#include <float.h>
#include <math.h>
#include <string.h>

#define D 128
#define C 4
#define N 8
#define MS (GST_MSECOND)
#define TOKEN_CAPS(k, rate) \
  "other/tensors,format=static,num_tensors=1,types=float32,dimensions=(string)128:" k \
  ",framerate=" rate

static const char *labels[C] = { "speech", "music", "noise", "silence" };

static char *
model_path (void)
{
  return cony_test_golden_path ("transformer", "small.safetensors");
}

/* The reference: libcony's encoder on the same file. */
typedef struct {
  ConyModel *model;
  ConyEncoder *enc;
} Ref;

static Ref *
ref_new (int variant)
{
  Ref *r = g_new0 (Ref, 1);
  char *path = model_path ();
  GError *error = NULL;
  r->model = cony_model_load (path, &error);
  g_assert_no_error (error);
  r->enc = cony_encoder_new (r->model, variant, &error);
  g_assert_no_error (error);
  g_free (path);
  return r;
}

static void
ref_free (Ref *r)
{
  cony_encoder_free (r->enc);
  cony_model_free (r->model);
  g_free (r);
}

/* Steps @r with @token; writes softmax probabilities, returns the top class. */
static int
ref_step (Ref *r, const float *token, double *probs)
{
  float logits[C];
  cony_encoder_step (r->enc, token, logits);
  return cony_test_softmax (logits, C, probs);
}

/* Deterministic embedding-like tokens. */
static float *
make_tokens (gsize n, guint32 seed)
{
  return cony_test_random_floats (n * D, -2.0, 2.0, seed);
}

/* A harness around a conytransformer on the small model with properties "name", value,
 * ..., NULL. */
static GstHarness *
new_harness (const gchar *first_prop, ...)
{
  char *path = model_path ();
  va_list ap;
  va_start (ap, first_prop);
  GstHarness *h = cony_test_harness_new_valist ("conytransformer", path, first_prop, ap);
  va_end (ap);
  g_free (path);
  return h;
}

/* What most tests run on: tokens, the reference encoder, and a harness with a bus of its
 * own fed one token per buffer at 4 tokens/s. */
typedef struct {
  float *x;
  Ref *r;
  GstHarness *h;
  GstBus *bus;
} Fixture;

/* @n tokens from @seed, the reference with the model's variant, and a harness with
 * properties "name", value, ..., NULL. */
static void
fixture_open (Fixture *f, gsize n, guint32 seed, const gchar *first_prop, ...)
{
  char *path = model_path ();
  va_list ap;
  va_start (ap, first_prop);
  f->h = cony_test_harness_new_valist ("conytransformer", path, first_prop, ap);
  va_end (ap);
  g_free (path);
  f->bus = cony_test_attach_bus (f->h);
  gst_harness_set_src_caps_str (f->h, TOKEN_CAPS ("1", "4/1"));
  f->x = make_tokens (n, seed);
  f->r = ref_new (-1);
}

static void
fixture_close (Fixture *f)
{
  cony_test_detach_bus (f->h, f->bus);
  gst_harness_teardown (f->h);
  ref_free (f->r);
  g_free (f->x);
}

/* A harness around a conytransformer on the small model, its attention property set to
 * @nick (parsed as gst-launch would). */
static GstHarness *
attention_harness (const char *nick)
{
  char *path = model_path ();
  GstElement *el = cony_test_element_new ("conytransformer", path, NULL);
  g_free (path);
  gst_util_set_object_arg (G_OBJECT (el), "attention", nick);
  return cony_test_harness_take (el);
}

/* Every attention variant: its property nick and libcony's variant. */
static const struct {
  const char *nick;
  int variant;
} variants[] = {
  { "regular", CONY_ATTENTION_REGULAR },
  { "continual", CONY_ATTENTION_CONTINUAL },
  { "nystrom", CONY_ATTENTION_NYSTROM },
  { "nystrom-fixed", CONY_ATTENTION_NYSTROM_FIXED },
  { "cony", CONY_ATTENTION_CONY },
  { "cony-fixed", CONY_ATTENTION_CONY_FIXED },
};

static gint
cmp_step (gconstpointer a, gconstpointer b)
{
  const GstConyClassificationMeta *x = *(GstConyClassificationMeta *const *) a;
  const GstConyClassificationMeta *y = *(GstConyClassificationMeta *const *) b;
  return x->step < y->step ? -1 : x->step > y->step;
}

/* The buffer's classification metas sorted by step. */
static GPtrArray *
metas_of (GstBuffer *buf)
{
  GPtrArray *a = g_ptr_array_new ();
  gpointer state = NULL;
  GstMeta *m;
  while ((m = gst_buffer_iterate_meta_filtered (buf, &state, GST_CONY_CLASSIFICATION_META_API_TYPE))
      != NULL)
    g_ptr_array_add (a, m);
  g_ptr_array_sort (a, cmp_step);
  return a;
}

/* Checks one meta against the reference step of token @x (stream index
 * @step, which started at @base, tokens @tok_ns apart). */
static void
check_meta (const GstConyClassificationMeta *m, Ref *r, const float *x, guint64 step,
    GstClockTime base, GstClockTime tok_ns)
{
  double probs[C];
  int top = ref_step (r, x, probs);
  g_assert_cmpuint (m->step, ==, step);
  guint64 fill = MIN (step + 1, N);
  g_assert_cmpuint (m->window_start, ==, base + (step + 1 - fill) * tok_ns);
  g_assert_cmpuint (m->window_end, ==, base + (step + 1) * tok_ns);
  g_assert_cmpint (m->class_id, ==, top);
  g_assert_cmpstr (m->label, ==, labels[top]);
  g_assert_cmpuint (m->n_scores, ==, C);
  for (int i = 0; i < C; i++)
    g_assert_cmpfloat_with_epsilon (m->scores[i], probs[i], 1e-6);
  g_assert_cmpfloat (m->score, ==, m->scores[top]);
  g_assert_cmpfloat (m->context_fill, ==, (double) fill / N);
  g_assert_cmpuint (m->pts, ==, base + step * tok_ns);
  g_assert_false (m->multi_label);
  g_assert_cmpuint (m->n_top, ==, 1);
  g_assert_cmpint (m->top_ids[0], ==, top);
  g_assert_cmpstr (m->top_labels[0], ==, labels[top]);
}

/* Pulls every queued buffer; checks the data is unchanged and the metas
 * (one per token) match the reference. Returns the tokens seen. */
static gsize
check_outputs (GstHarness *h, Ref *r, const float *x, guint64 first_step, GstClockTime base,
    GstClockTime tok_ns)
{
  GstBuffer *buf;
  gsize t = 0;
  while ((buf = gst_harness_try_pull (h)) != NULL) {
    GstMapInfo map;
    g_assert_true (gst_buffer_map (buf, &map, GST_MAP_READ));
    gsize k = map.size / (D * sizeof (float));
    g_assert_cmpint (memcmp (map.data, x + t * D, map.size), ==, 0);
    gst_buffer_unmap (buf, &map);
    GPtrArray *metas = metas_of (buf);
    g_assert_cmpuint (metas->len, ==, k);
    for (gsize i = 0; i < k; i++)
      check_meta (metas->pdata[i], r, x + (t + i) * D, first_step + t + i, base, tok_ns);
    /* The newest step is what the getter returns. */
    g_assert_true (gst_buffer_get_cony_classification_meta (buf) == metas->pdata[k - 1]);
    g_ptr_array_free (metas, TRUE);
    /* The custom mirror: same values, readable without the C struct. */
    GstCustomMeta *cm = gst_buffer_get_custom_meta (buf, GST_CONY_CLASSIFICATION_CUSTOM_META_NAME);
    g_assert_nonnull (cm);
    const GstStructure *s = gst_custom_meta_get_structure (cm);
    guint64 step;
    gint cls;
    g_assert_true (gst_structure_get_uint64 (s, "step", &step));
    g_assert_true (gst_structure_get_int (s, "class_id", &cls));
    g_assert_cmpuint (gst_value_array_get_size (gst_structure_get_value (s, "scores")), ==, C);
    g_assert_nonnull (gst_structure_get_string (s, "label"));
    g_assert_cmpuint (step, >=, first_step + t);
    g_assert_cmpuint (step, <, first_step + t + k);
    gst_buffer_unref (buf);
    t += k;
  }
  return t;
}

/* ------------------------------------------------------------------------ */

/* Every output buffer carries one meta per token, equal to the encoder's
 * step; K = 1, 3 and 8 tokens per buffer (odd last buffer included). */
static void
test_meta_matches_encoder (void)
{
  const guint ks[] = { 1, 3, 8 };
  gsize n = 29;
  float *x = make_tokens (n, 1);
  for (guint i = 0; i < G_N_ELEMENTS (ks); i++) {
    Ref *r = ref_new (-1);
    GstHarness *h = new_harness (NULL);
    gchar *c = g_strdup_printf (TOKEN_CAPS ("%u", "4/%u"), ks[i], ks[i]);
    gst_harness_set_src_caps_str (h, c);
    g_free (c);
    GstClockTime base = 3 * GST_SECOND + 17;
    cony_test_push_tokens (h, x, D, 0, n, ks[i], base, 250 * MS, FALSE);
    g_assert_cmpuint (check_outputs (h, r, x, 0, base, 250 * MS), ==, n);
    gst_harness_teardown (h);
    ref_free (r);
  }
  g_free (x);
}

/* Buffers without a duration: token times from the caps' token rate. */
static void
test_times_from_rate (void)
{
  float *x = make_tokens (6, 2);
  Ref *r = ref_new (-1);
  GstHarness *h = new_harness (NULL);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS ("2", "2/1"));
  for (guint b = 0; b < 3; b++) {
    GstBuffer *buf = gst_buffer_new_memdup (x + b * 2 * D, 2 * D * sizeof (float));
    GST_BUFFER_PTS (buf) = b * 500 * MS;
    g_assert_cmpint (gst_harness_push (h, buf), ==, GST_FLOW_OK);
  }
  g_assert_cmpuint (check_outputs (h, r, x, 0, 0, 250 * MS), ==, 6);
  gst_harness_teardown (h);
  ref_free (r);
  g_free (x);
}

/* The attention property overrides the model's variant. */
static void
test_attention_override (void)
{
  float *x = make_tokens (12, 3);
  for (guint i = 0; i < G_N_ELEMENTS (variants); i++) {
    Ref *r = ref_new (variants[i].variant);
    GstHarness *h = attention_harness (variants[i].nick);
    gst_harness_set_src_caps_str (h, TOKEN_CAPS ("1", "4/1"));
    cony_test_push_tokens (h, x, D, 0, 12, 1, 0, 250 * MS, FALSE);
    g_assert_cmpuint (check_outputs (h, r, x, 0, 0, 250 * MS), ==, 12);
    gst_harness_teardown (h);
    ref_free (r);
  }
  g_free (x);
}

/* Messages: one per step, exact timestamps, stream and running time from the
 * segment, scores as a GstValueArray of floats. */
static void
test_messages (void)
{
  gsize n = 11;
  Fixture f;
  fixture_open (&f, n, 4, NULL);
  /* A segment starting at 10 s, base 2 s, stream time 100 s. */
  cony_test_push_segment (f.h, 10 * GST_SECOND, 100 * GST_SECOND, 2 * GST_SECOND);
  cony_test_push_tokens (f.h, f.x, D, 0, n, 1, 10 * GST_SECOND, 250 * MS, FALSE);

  for (gsize t = 0; t < n; t++) {
    GstMessage *msg = gst_bus_pop_filtered (f.bus, GST_MESSAGE_ELEMENT);
    g_assert_nonnull (msg);
    g_assert_true (GST_MESSAGE_SRC (msg) == GST_OBJECT (f.h->element));
    const GstStructure *s = gst_message_get_structure (msg);
    g_assert_true (gst_structure_has_name (s, "conytransformer"));
    guint64 ts, st, rt, dur, step;
    gint cls;
    gfloat conf;
    g_assert_true (gst_structure_get (s, "start", G_TYPE_UINT64, &ts, "stream_start", G_TYPE_UINT64,
        &st, "running_start", G_TYPE_UINT64, &rt, "duration", G_TYPE_UINT64, &dur, "step",
        G_TYPE_UINT64, &step, "class_id", G_TYPE_INT, &cls, "score", G_TYPE_FLOAT, &conf, NULL));
    /* The span: from the oldest token in the window to the end of this one
     * (no lookahead in these caps); pts: this token's. */
    guint64 first = t + 1 - MIN (t + 1, N), pts, st_end, rt_end;
    g_assert_cmpuint (ts, ==, 10 * GST_SECOND + first * 250 * MS);
    g_assert_cmpuint (st, ==, 100 * GST_SECOND + first * 250 * MS);
    g_assert_cmpuint (rt, ==, 2 * GST_SECOND + first * 250 * MS);
    g_assert_cmpuint (dur, ==, (t + 1 - first) * 250 * MS);
    g_assert_true (gst_structure_get (s, "pts", G_TYPE_UINT64, &pts, "stream_end", G_TYPE_UINT64,
        &st_end, "running_end", G_TYPE_UINT64, &rt_end, NULL));
    g_assert_cmpuint (pts, ==, 10 * GST_SECOND + t * 250 * MS);
    g_assert_cmpuint (st_end, ==, 100 * GST_SECOND + (t + 1) * 250 * MS);
    g_assert_cmpuint (rt_end, ==, 2 * GST_SECOND + (t + 1) * 250 * MS);
    g_assert_cmpuint (step, ==, t);
    double probs[C];
    int top = ref_step (f.r, f.x + t * D, probs);
    g_assert_cmpint (cls, ==, top);
    g_assert_cmpstr (gst_structure_get_string (s, "label"), ==, labels[top]);
    g_assert_cmpfloat_with_epsilon (conf, probs[top], 1e-6);
    const GValue *arr = gst_structure_get_value (s, "scores");
    g_assert_true (GST_VALUE_HOLDS_ARRAY (arr));
    g_assert_cmpuint (gst_value_array_get_size (arr), ==, C);
    for (int i = 0; i < C; i++) {
      const GValue *v = gst_value_array_get_value (arr, i);
      g_assert_true (G_VALUE_HOLDS_FLOAT (v));
      g_assert_cmpfloat_with_epsilon (g_value_get_float (v), probs[i], 1e-6);
    }
    g_assert_false (gst_structure_has_field (s, "segment_start"));
    gst_message_unref (msg);
  }
  g_assert_null (gst_bus_pop_filtered (f.bus, GST_MESSAGE_ELEMENT));
  fixture_close (&f);
}

/* post-messages=false: metas, no messages; threshold filters messages only. */
static void
test_post_messages_threshold (void)
{
  gsize n = 40;
  float *x = make_tokens (n, 5);
  /* post-messages=false */
  GstHarness *h = new_harness ("post-messages", FALSE, NULL);
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS ("1", "4/1"));
  cony_test_push_tokens (h, x, D, 0, n, 1, 0, 250 * MS, FALSE);
  g_assert_null (gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT));
  g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, n);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);

  /* threshold 0.5: messages exactly for the steps whose confidence >= 0.5 */
  Ref *r = ref_new (-1);
  h = new_harness ("threshold", 0.5, NULL);
  bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS ("1", "4/1"));
  cony_test_push_tokens (h, x, D, 0, n, 1, 0, 250 * MS, FALSE);
  guint want = 0, below = 0;
  for (gsize t = 0; t < n; t++) {
    double probs[C];
    int top = ref_step (r, x + t * D, probs);
    if (probs[top] < 0.5) {
      below++;
      continue;
    }
    want++;
    GstMessage *msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT);
    g_assert_nonnull (msg);
    guint64 step;
    g_assert_true (gst_structure_get_uint64 (gst_message_get_structure (msg), "step", &step));
    g_assert_cmpuint (step, ==, t);
    gst_message_unref (msg);
  }
  g_assert_null (gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT));
  /* the data must exercise both sides of the threshold */
  g_assert_cmpuint (want, >, 0);
  g_assert_cmpuint (below, >, 0);
  /* every buffer still has its meta */
  g_assert_cmpuint (gst_harness_buffers_in_queue (h), ==, n);
  GstBuffer *buf;
  while ((buf = gst_harness_try_pull (h)) != NULL) {
    g_assert_nonnull (gst_buffer_get_cony_classification_meta (buf));
    gst_buffer_unref (buf);
  }
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  ref_free (r);
  g_free (x);
}

/* The next on-change message (the caller unrefs it): its step, segment-start and the
 * previous segment's start and end. */
static GstMessage *
pop_change (GstBus *bus, guint64 *step, guint64 *seg_start, guint64 *pstart, guint64 *pend)
{
  GstMessage *msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT);
  g_assert_nonnull (msg);
  g_assert_true (gst_structure_get (gst_message_get_structure (msg), "step", G_TYPE_UINT64, step,
      "segment_start", G_TYPE_UINT64, seg_start, "previous_segment_start", G_TYPE_UINT64, pstart,
      "previous_segment_end", G_TYPE_UINT64, pend, NULL));
  return msg;
}

/* on-change: a message exactly where the top label changes, carrying the
 * segment running times; a closing message at EOS. */
static void
test_on_change (void)
{
  gsize n = 60;
  Fixture f;
  fixture_open (&f, n, 6, NULL);
  gst_util_set_object_arg (G_OBJECT (f.h->element), "message-mode", "on-change");
  cony_test_push_segment (f.h, 0, 0, GST_SECOND);
  cony_test_push_tokens (f.h, f.x, D, 0, n, 2, 0, 250 * MS, FALSE);
  g_assert_true (gst_harness_push_event (f.h, gst_event_new_eos ()));

  int prev = -1;
  GstClockTime prev_start = GST_CLOCK_TIME_NONE, prev_end = GST_CLOCK_TIME_NONE;
  guint changes = 0;
  for (gsize t = 0; t < n; t++) {
    double probs[C];
    int top = ref_step (f.r, f.x + t * D, probs);
    GstClockTime rt0 = GST_SECOND + t * 250 * MS, rt1 = rt0 + 250 * MS;
    if (top == prev) {
      prev_end = rt1;
      continue;
    }
    guint64 step, seg_start, pstart, pend;
    GstMessage *msg = pop_change (f.bus, &step, &seg_start, &pstart, &pend);
    const GstStructure *s = gst_message_get_structure (msg);
    g_assert_cmpuint (step, ==, t);
    g_assert_cmpstr (gst_structure_get_string (s, "label"), ==, labels[top]);
    g_assert_cmpuint (seg_start, ==, rt0);
    g_assert_cmpstr (gst_structure_get_string (s, "previous_label"), ==,
        prev >= 0 ? labels[prev] : "");
    g_assert_cmpuint (pstart, ==, prev_start);
    g_assert_cmpuint (pend, ==, prev_end);
    g_assert_false (gst_structure_has_field (s, "eos"));
    gst_message_unref (msg);
    prev = top;
    prev_start = rt0;
    prev_end = rt1;
    changes++;
  }
  /* the closing message */
  GstMessage *msg = gst_bus_pop_filtered (f.bus, GST_MESSAGE_ELEMENT);
  g_assert_nonnull (msg);
  const GstStructure *s = gst_message_get_structure (msg);
  gboolean eos = FALSE;
  guint64 pstart, pend;
  g_assert_true (gst_structure_get (s, "eos", G_TYPE_BOOLEAN, &eos, "previous_segment_start",
      G_TYPE_UINT64, &pstart, "previous_segment_end", G_TYPE_UINT64, &pend, NULL));
  g_assert_true (eos);
  g_assert_cmpstr (gst_structure_get_string (s, "previous_label"), ==, labels[prev]);
  g_assert_cmpuint (pstart, ==, prev_start);
  g_assert_cmpuint (pend, ==, GST_SECOND + n * 250 * MS);
  gst_message_unref (msg);
  g_assert_null (gst_bus_pop_filtered (f.bus, GST_MESSAGE_ELEMENT));
  /* the data must have a few changes and fewer messages than steps */
  g_assert_cmpuint (changes, >=, 3);
  g_assert_cmpuint (changes, <, n);
  fixture_close (&f);
}

/* on-change with a threshold: steps below it neither change nor extend the
 * label, so a segment ends at its last confident token. */
static void
test_on_change_threshold (void)
{
  gsize n = 60;
  const double thr = 0.6;
  Fixture f;
  fixture_open (&f, n, 17, "threshold", thr, NULL);
  gst_util_set_object_arg (G_OBJECT (f.h->element), "message-mode", "on-change");
  cony_test_push_tokens (f.h, f.x, D, 0, n, 1, 0, 250 * MS, FALSE);

  int prev = -1;
  GstClockTime prev_start = GST_CLOCK_TIME_NONE, prev_end = GST_CLOCK_TIME_NONE;
  guint changes = 0, skipped = 0, gaps = 0;
  for (gsize t = 0; t < n; t++) {
    double probs[C];
    int top = ref_step (f.r, f.x + t * D, probs);
    GstClockTime rt0 = t * 250 * MS, rt1 = rt0 + 250 * MS;
    if (probs[top] < thr) {
      skipped++;
      continue;
    }
    if (top == prev) {
      gaps += prev_end != rt0;
      prev_end = rt1;
      continue;
    }
    GstMessage *msg = gst_bus_pop_filtered (f.bus, GST_MESSAGE_ELEMENT);
    g_assert_nonnull (msg);
    const GstStructure *s = gst_message_get_structure (msg);
    guint64 step, pstart, pend;
    gfloat conf;
    g_assert_true (gst_structure_get (s, "step", G_TYPE_UINT64, &step, "score", G_TYPE_FLOAT, &conf,
        "previous_segment_start", G_TYPE_UINT64, &pstart, "previous_segment_end", G_TYPE_UINT64,
        &pend, NULL));
    g_assert_cmpuint (step, ==, t);
    g_assert_cmpfloat (conf, >=, thr);
    g_assert_cmpuint (pstart, ==, prev_start);
    g_assert_cmpuint (pend, ==, prev_end);
    gst_message_unref (msg);
    prev = top;
    prev_start = rt0;
    prev_end = rt1;
    changes++;
  }
  g_assert_null (gst_bus_pop_filtered (f.bus, GST_MESSAGE_ELEMENT));
  /* the data must cover the cases: skipped steps, changes, and a segment
   * extended across a skipped step */
  g_assert_cmpuint (skipped, >, 0);
  g_assert_cmpuint (changes, >=, 2);
  g_assert_cmpuint (gaps, >, 0);
  fixture_close (&f);
}

/* on-change with a hold (min-steps / min-duration), against the rule stated over
 * runs of equal top labels: a run of another label than the reported one is reported
 * at its K-th step, its segment starting at its first step; the reported segment ends
 * where that run starts (shorter runs in between are its own); at EOS it ends at the
 * last step. Tokens 250 ms apart from running time 1 s. */
static void
check_hold (const gchar *prop, guint64 value, guint K, gsize n, guint32 seed)
{
  Fixture f;
  fixture_open (&f, n, seed, NULL);
  if (g_str_equal (prop, "min-steps"))
    g_object_set (f.h->element, prop, (guint) value, NULL);
  else
    g_object_set (f.h->element, prop, value, NULL);
  gst_util_set_object_arg (G_OBJECT (f.h->element), "message-mode", "on-change");
  cony_test_push_segment (f.h, 0, 0, GST_SECOND);
  cony_test_push_tokens (f.h, f.x, D, 0, n, 1, 0, 250 * MS, FALSE);
  g_assert_true (gst_harness_push_event (f.h, gst_event_new_eos ()));

  int top[200];
  g_assert_cmpuint (n, <=, G_N_ELEMENTS (top));
  for (gsize t = 0; t < n; t++) {
    double probs[C];
    top[t] = ref_step (f.r, f.x + t * D, probs);
  }
#define RT(i) (GST_SECOND + (i) *250 * MS)
  int cur = -1;
  GstClockTime cur_start = GST_CLOCK_TIME_NONE;
  guint reported = 0, flicker = 0;
  for (gsize s = 0, e; s < n; s = e) {
    for (e = s + 1; e < n && top[e] == top[s];)
      e++;
    if (top[s] == cur)
      continue;
    if (e - s < K) {
      flicker += cur >= 0;
      continue;
    }
    guint64 step, seg_start, pstart, pend;
    GstMessage *msg = pop_change (f.bus, &step, &seg_start, &pstart, &pend);
    const GstStructure *st = gst_message_get_structure (msg);
    g_assert_cmpuint (step, ==, s + K - 1);
    g_assert_cmpstr (gst_structure_get_string (st, "label"), ==, labels[top[s]]);
    g_assert_cmpuint (seg_start, ==, RT (s));
    g_assert_cmpstr (gst_structure_get_string (st, "previous_label"), ==,
        cur >= 0 ? labels[cur] : "");
    g_assert_cmpuint (pstart, ==, cur_start);
    g_assert_cmpuint (pend, ==, cur >= 0 ? RT (s) : GST_CLOCK_TIME_NONE);
    gst_message_unref (msg);
    cur = top[s];
    cur_start = RT (s);
    reported++;
  }
  GstMessage *msg = gst_bus_pop_filtered (f.bus, GST_MESSAGE_ELEMENT);
  g_assert_nonnull (msg);
  const GstStructure *st = gst_message_get_structure (msg);
  g_assert_true (gst_structure_has_field (st, "eos"));
  g_assert_cmpstr (gst_structure_get_string (st, "previous_label"), ==, labels[cur]);
  guint64 pstart, pend;
  g_assert_true (gst_structure_get (st, "previous_segment_start", G_TYPE_UINT64, &pstart,
      "previous_segment_end", G_TYPE_UINT64, &pend, NULL));
  g_assert_cmpuint (pstart, ==, cur_start);
  g_assert_cmpuint (pend, ==, RT (n));
  gst_message_unref (msg);
  g_assert_null (gst_bus_pop_filtered (f.bus, GST_MESSAGE_ELEMENT));
#undef RT
  /* the data must hold reported changes and suppressed flicker */
  g_assert_cmpuint (reported, >=, 2);
  g_assert_cmpuint (flicker, >=, 2);
  fixture_close (&f);
}

static void
test_on_change_hold (void)
{
  check_hold ("min-steps", 3, 3, 120, 6);
  /* 250 ms steps: 700 ms and 750 ms both take 3 steps (2 span only 500 ms) */
  check_hold ("min-duration", 700 * MS, 3, 120, 6);
  check_hold ("min-duration", 750 * MS, 3, 120, 6);
  check_hold ("min-steps", 2, 2, 120, 6);
}

/* The meta survives gst_buffer_copy, a region copy, make_writable and a
 * queue; the custom mirror too. */
static void
test_meta_survives_copies (void)
{
  float *x = make_tokens (3, 7);
  char *path = model_path ();
  gchar *launch = g_strdup_printf ("conytransformer model=\"%s\" ! queue", path);
  GstHarness *h = gst_harness_new_parse (launch);
  g_free (launch);
  g_free (path);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS ("3", "4/3"));
  cony_test_push_tokens (h, x, D, 0, 3, 3, 0, 250 * MS, FALSE);
  GstBuffer *out = gst_harness_pull (h);
  g_assert_cmpuint (gst_buffer_get_n_cony_classification_metas (out), ==, 3);
  GstConyClassificationMeta *m = gst_buffer_get_cony_classification_meta (out);
  g_assert_nonnull (m);
  g_assert_cmpuint (m->step, ==, 2);

  GstBuffer *copies[3];
  copies[0] = gst_buffer_copy (out);
  copies[1] = gst_buffer_copy_region (out, GST_BUFFER_COPY_ALL, 0, D * sizeof (float));
  gst_buffer_ref (out);
  copies[2] = gst_buffer_make_writable (out); /* a copy: @out is shared */
  g_assert_true (copies[2] != out);
  for (guint i = 0; i < 3; i++) {
    g_assert_cmpuint (gst_buffer_get_n_cony_classification_metas (copies[i]), ==, 3);
    GstConyClassificationMeta *c = gst_buffer_get_cony_classification_meta (copies[i]);
    g_assert_nonnull (c);
    g_assert_true (c != m);
    g_assert_cmpuint (c->step, ==, m->step);
    g_assert_cmpuint (c->window_start, ==, m->window_start);
    g_assert_cmpuint (c->window_end, ==, m->window_end);
    g_assert_cmpint (c->class_id, ==, m->class_id);
    g_assert_cmpstr (c->label, ==, m->label);
    g_assert_cmpfloat (c->score, ==, m->score);
    g_assert_cmpuint (c->n_scores, ==, C);
    g_assert_true (c->scores != m->scores);
    g_assert_cmpmem (c->scores, C * sizeof (float), m->scores, C * sizeof (float));
    g_assert_cmpfloat (c->context_fill, ==, m->context_fill);
    GstCustomMeta *cm = gst_buffer_get_custom_meta (copies[i],
        GST_CONY_CLASSIFICATION_CUSTOM_META_NAME);
    g_assert_nonnull (cm);
    g_assert_nonnull (gst_structure_get_string (gst_custom_meta_get_structure (cm), "label"));
    gst_buffer_unref (copies[i]);
  }
  gst_buffer_unref (out);
  gst_harness_teardown (h);
  g_free (x);
}

/* Through audioconvert (a GstBaseTransform copying tagless metas to a new
 * output buffer): the meta added on a token buffer is kept. */
static void
test_meta_survives_audioconvert (void)
{
  GstHarness *h = gst_harness_new_parse ("audioconvert");
  gst_harness_set_caps_str (h, "audio/x-raw,format=F32LE,rate=16000,channels=1,layout=interleaved",
      "audio/x-raw,format=S16LE,rate=16000,channels=1,layout=interleaved");
  GstBuffer *buf = gst_buffer_new_allocate (NULL, 160 * sizeof (float), NULL);
  gst_buffer_memset (buf, 0, 0, 160 * sizeof (float));
  float scores[C] = { 0.1f, 0.2f, 0.3f, 0.4f };
  GstConyClassificationMeta *m = gst_buffer_add_cony_classification_meta (buf, 7, 0, GST_SECOND, 3,
      "silence", 0.4f, scores, C, 0.5);
  gst_buffer_add_cony_classification_custom_meta (buf, m);
  GstBuffer *out = gst_harness_push_and_pull (h, buf);
  g_assert_cmpuint (gst_buffer_get_size (out), ==, 160 * 2);
  GstConyClassificationMeta *c = gst_buffer_get_cony_classification_meta (out);
  g_assert_nonnull (c);
  g_assert_cmpuint (c->step, ==, 7);
  g_assert_cmpstr (c->label, ==, "silence");
  g_assert_cmpfloat (c->scores[2], ==, 0.3f);
  g_assert_nonnull (gst_buffer_get_custom_meta (out, GST_CONY_CLASSIFICATION_CUSTOM_META_NAME));
  gst_buffer_unref (out);
  gst_harness_teardown (h);
}

/* What separates two streams in the reset tests. */
typedef enum
{
  RESET_FLUSH,   /* flush-start, flush-stop and a new segment */
  RESET_DISCONT, /* the second stream's first buffer is DISCONT */
  RESET_GAP,     /* a GAP event between them, which is forwarded too */
} ResetKind;

typedef struct {
  ResetKind kind;
  gsize n_a, n_b;   /* tokens in the first / second stream */
  guint k_a, k_b;   /* tokens per buffer */
  GstClockTime t_b; /* the second stream's first PTS (the first starts at 0) */
  guint32 seed_a, seed_b;
} ResetCase;

/* Two streams with a reset between them: the second gives the outputs of a fresh
 * element (steps from 0, the encoder's outputs from a reset state) at its own times. */
static void
test_reset (gconstpointer data)
{
  const ResetCase *c = data;
  float *a = make_tokens (c->n_a, c->seed_a);
  float *b = make_tokens (c->n_b, c->seed_b);
  Ref *r = ref_new (-1);
  GstHarness *h = new_harness (NULL);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS ("1", "4/1"));
  gboolean discont = c->kind == RESET_DISCONT;
  cony_test_push_tokens (h, a, D, 0, c->n_a, c->k_a, 0, 250 * MS, discont);
  g_assert_cmpuint (check_outputs (h, r, a, 0, 0, 250 * MS), ==, c->n_a);
  if (c->kind == RESET_FLUSH)
    cony_test_flush (h);
  else if (c->kind == RESET_GAP)
    g_assert_true (gst_harness_push_event (h,
        gst_event_new_gap (c->n_a * 250 * MS, c->t_b - c->n_a * 250 * MS)));
  cony_encoder_reset (r->enc);
  cony_test_push_tokens (h, b, D, 0, c->n_b, c->k_b, c->t_b, 250 * MS, discont);
  g_assert_cmpuint (check_outputs (h, r, b, 0, c->t_b, 250 * MS), ==, c->n_b);
  if (c->kind == RESET_GAP)
    g_assert_true (cony_test_event_forwarded (h, GST_EVENT_GAP));
  gst_harness_teardown (h);
  ref_free (r);
  g_free (a);
  g_free (b);
}

static const ResetCase reset_flush = { RESET_FLUSH, 13, 20, 1, 1, 5 * GST_SECOND, 9, 8 };
static const ResetCase reset_discont = { RESET_DISCONT, 10, 15, 1, 3, 42 * GST_SECOND + 7, 10, 11 };
static const ResetCase reset_gap = { RESET_GAP, 5, 10, 1, 2, 2250 * MS, 15, 16 };

/* A token-rate change resets; a change of K alone does not. */
static void
test_caps_change (void)
{
  float *x = make_tokens (12, 12);
  Ref *r = ref_new (-1);
  GstHarness *h = new_harness (NULL);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS ("1", "4/1"));
  cony_test_push_tokens (h, x, D, 0, 4, 1, 0, 250 * MS, FALSE);
  GstCaps *caps = gst_caps_from_string (TOKEN_CAPS ("2", "2/1"));
  g_assert_true (gst_pad_push_event (h->srcpad, gst_event_new_caps (caps)));
  gst_caps_unref (caps);
  cony_test_push_tokens (h, x, D, 4, 4, 2, GST_SECOND, 250 * MS, FALSE);
  g_assert_cmpuint (check_outputs (h, r, x, 0, 0, 250 * MS), ==, 8);

  caps = gst_caps_from_string (TOKEN_CAPS ("1", "10/1"));
  g_assert_true (gst_pad_push_event (h->srcpad, gst_event_new_caps (caps)));
  gst_caps_unref (caps);
  cony_encoder_reset (r->enc);
  cony_test_push_tokens (h, x, D, 0, 12, 1, 7 * GST_SECOND, 100 * MS, FALSE);
  g_assert_cmpuint (check_outputs (h, r, x, 0, 7 * GST_SECOND, 100 * MS), ==, 12);
  gst_harness_teardown (h);
  ref_free (r);
  g_free (x);
}

/* NaN / Inf tokens: one warning, the token is not stepped (no meta), the
 * other tokens of the buffer and later ones equal the clean stream without
 * the bad tokens. */
static void
test_nan_tokens (void)
{
  gsize n = 12;
  float *x = make_tokens (n, 13);
  x[4 * D + 5] = NAN;
  x[5 * D] = INFINITY;
  Ref *r = ref_new (-1);
  GstHarness *h = new_harness (NULL);
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS ("3", "4/3"));
  cony_test_push_tokens (h, x, D, 0, n, 3, 0, 250 * MS, FALSE);
  /* one warning, and messages for the 10 good tokens only */
  GstMessage *msg;
  guint n_msgs = 0, n_warnings = 0;
  while ((msg = gst_bus_pop (bus)) != NULL) {
    n_msgs += GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ELEMENT;
    n_warnings += GST_MESSAGE_TYPE (msg) == GST_MESSAGE_WARNING;
    gst_message_unref (msg);
  }
  g_assert_cmpuint (n_warnings, ==, 1);
  g_assert_cmpuint (n_msgs, ==, n - 2);

  guint64 step = 0;
  for (guint b = 0; b < 4; b++) {
    GstBuffer *buf = gst_harness_pull (h);
    /* the data passes unchanged, bad values included */
    GstMapInfo map;
    gst_buffer_map (buf, &map, GST_MAP_READ);
    g_assert_cmpint (memcmp (map.data, x + b * 3 * D, 3 * D * sizeof (float)), ==, 0);
    gst_buffer_unmap (buf, &map);
    GPtrArray *metas = metas_of (buf);
    guint j = 0;
    for (guint i = 0; i < 3; i++) {
      gsize t = b * 3 + i;
      if (t == 4 || t == 5)
        continue;
      GstConyClassificationMeta *m = metas->pdata[j++];
      double probs[C];
      int top = ref_step (r, x + t * D, probs);
      g_assert_cmpuint (m->step, ==, step);
      g_assert_cmpuint (m->window_end, ==, (t + 1) * 250 * MS);
      g_assert_cmpint (m->class_id, ==, top);
      for (int c = 0; c < C; c++)
        g_assert_cmpfloat_with_epsilon (m->scores[c], probs[c], 1e-6);
      step++;
    }
    g_assert_cmpuint (metas->len, ==, j);
    g_ptr_array_free (metas, TRUE);
    gst_buffer_unref (buf);
  }
  g_assert_cmpuint (step, ==, n - 2);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  ref_free (r);
  g_free (x);
}

/* Tokens of FLT_MAX, 1e19, 1e30 and denormals, every attention variant (#31.2, #30.4):
 * the FLT_MAX token overflows the model (its logits are not finite): one STREAM FAILED
 * warning naming the step, no meta and no message for it, and the stream starts again
 * (step 0); every published score is finite, and from there on the metas equal a fresh
 * encoder's on the tokens after the overflow (1e19, 1e30 and denormal tokens stay finite). */
static void
test_extreme_tokens (void)
{
  const gsize n = 20, bad = 5;
  float *x = make_tokens (n, 41);
  for (int i = 0; i < D; i++) {
    x[bad * D + i] = FLT_MAX;
    x[(bad + 2) * D + i] = i % 2 ? -1e19f : 1e19f;
    x[(bad + 4) * D + i] = 1e30f;
    x[(bad + 6) * D + i] = 1e-40f;
  }
  for (guint v = 0; v < G_N_ELEMENTS (variants); v++) {
    Ref *r = ref_new (variants[v].variant);
    GstHarness *h = attention_harness (variants[v].nick);
    GstBus *bus = cony_test_attach_bus (h);
    gst_harness_set_src_caps_str (h, TOKEN_CAPS ("1", "4/1"));
    cony_test_push_tokens (h, x, D, 0, n, 1, 0, 250 * MS, FALSE);

    GstMessage *msg;
    guint n_msgs = 0, n_warnings = 0;
    while ((msg = gst_bus_pop (bus)) != NULL) {
      if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_WARNING) {
        GError *err = NULL;
        gst_message_parse_warning (msg, &err, NULL);
        g_assert_true (g_error_matches (err, GST_STREAM_ERROR, GST_STREAM_ERROR_FAILED));
        g_assert_nonnull (strstr (err->message, "Step 5 "));
        g_error_free (err);
        n_warnings++;
      } else if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ELEMENT) {
        const GValue *conf = gst_structure_get_value (gst_message_get_structure (msg), "score");
        g_assert_nonnull (conf);
        g_assert_true (isfinite (g_value_get_float (conf)));
        n_msgs++;
      }
      gst_message_unref (msg);
    }
    g_assert_cmpuint (n_warnings, ==, 1);
    g_assert_cmpuint (n_msgs, ==, n - 1);

    for (gsize t = 0; t < n; t++) {
      GstBuffer *buf = gst_harness_pull (h);
      GPtrArray *metas = metas_of (buf);
      if (t < bad) {
        g_assert_cmpuint (metas->len, ==, 1);
      } else if (t == bad) {
        g_assert_cmpuint (metas->len, ==, 0);
      } else {
        /* a fresh stream from the token after the overflow */
        g_assert_cmpuint (metas->len, ==, 1);
        GstConyClassificationMeta *m = metas->pdata[0];
        double probs[C];
        int top = ref_step (r, x + t * D, probs);
        g_assert_cmpuint (m->step, ==, t - bad - 1);
        g_assert_cmpint (m->class_id, ==, top);
        for (int c = 0; c < C; c++) {
          g_assert_true (isfinite (m->scores[c]));
          g_assert_cmpfloat_with_epsilon (m->scores[c], probs[c], 1e-6);
        }
      }
      g_ptr_array_free (metas, TRUE);
      gst_buffer_unref (buf);
    }
    cony_test_detach_bus (h, bus);
    gst_harness_teardown (h);
    ref_free (r);
  }
  g_free (x);
}

/* Overflowing steps: one warning per run of affected buffers (two FLT_MAX buffers in a
 * row: one), a new run warns again; each names its step, none gets a meta. */
static void
test_overflow_warnings (void)
{
  const gboolean huge[] = { FALSE, TRUE, TRUE, FALSE, TRUE };
  const guint64 want_step[] = { 0, G_MAXUINT64, G_MAXUINT64, 0, G_MAXUINT64 };
  gsize n = G_N_ELEMENTS (huge);
  Fixture f;
  fixture_open (&f, n, 43, NULL);
  for (gsize t = 0; t < n; t++)
    for (int i = 0; huge[t] && i < D; i++)
      f.x[t * D + i] = FLT_MAX;
  cony_test_push_tokens (f.h, f.x, D, 0, n, 1, 0, 250 * MS, FALSE);
  for (guint w = 0; w < 2; w++) {
    GError *err = cony_test_pop_gerror (f.bus, GST_MESSAGE_WARNING, 0, 0, NULL);
    g_assert_nonnull (strstr (err->message, "Step 1 gave non-finite logits"));
    g_error_free (err);
  }
  g_assert_null (gst_bus_pop_filtered (f.bus, GST_MESSAGE_WARNING));
  for (gsize t = 0; t < n; t++) {
    GstBuffer *buf = gst_harness_pull (f.h);
    GPtrArray *metas = metas_of (buf);
    g_assert_cmpuint (metas->len, ==, huge[t] ? 0 : 1);
    if (!huge[t])
      g_assert_cmpuint (((GstConyClassificationMeta *) metas->pdata[0])->step, ==, want_step[t]);
    g_ptr_array_free (metas, TRUE);
    gst_buffer_unref (buf);
  }
  fixture_close (&f);
}

/* model, attention and labels-file are read on READY->PAUSED: set while PLAYING they
 * are refused (the old value reads back: what runs), in READY they take (#31.5). */
static void
test_ready_only_properties (void)
{
  const char *props[] = { "model", "/tmp/other.safetensors", "attention", "regular", "labels-file",
    "/tmp/labels.txt", NULL };
  char *path = model_path ();
  cony_test_assert_ready_only_props ("conytransformer", path, TOKEN_CAPS ("1", "4/1"), props);
  g_free (path);
}

/* The element adds nothing to upstream's latency. */
static void
test_latency (void)
{
  GstHarness *h = new_harness (NULL);
  gst_harness_set_src_caps_str (h, TOKEN_CAPS ("1", "4/1"));
  gst_harness_set_upstream_latency (h, 0);
  g_assert_cmpuint (gst_harness_query_latency (h), ==, 0);
  gst_harness_set_upstream_latency (h, 975 * MS);
  g_assert_cmpuint (gst_harness_query_latency (h), ==, 975 * MS);
  gst_harness_teardown (h);
}

/* A token size other than the model's d_in: refused, and the error names
 * both numbers. */
/* Token caps it cannot read (garbage dimensions, another type) are named (#46.5): a
 * CORE/NEGOTIATION error with what conytransformer takes, what came and what is wrong. */
static void
test_refusal_named (void)
{
  static const struct {
    const char *dims, *types, *message;
  } cases[] = {
    { "0:1", "float32",
        "conytransformer takes 128-float tokens (other/tensors, float32, dimensions=128:K), got "
        "other/tensors types=float32 dimensions=0:1 framerate=4/1: expected dimensions=D:K "
        "(innermost first, positive), got 0:1" },
    { "128:-3", "float32",
        "conytransformer takes 128-float tokens (other/tensors, float32, dimensions=128:K), got "
        "other/tensors types=float32 dimensions=128:-3 framerate=4/1: expected dimensions=D:K "
        "(innermost first, positive), got 128:-3" },
    { "128:1", "float64",
        "conytransformer takes 128-float tokens (other/tensors, float32, dimensions=128:K), got "
        "other/tensors types=float64 dimensions=128:1 framerate=4/1: expected types=float32, got "
        "float64" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autofree char *caps = g_strdup_printf ("other/tensors,format=static,num_tensors=1,"
                                             "types=%s,dimensions=(string)%s,framerate=4/1",
        cases[i].types, cases[i].dims);
    cony_test_assert_caps_named (new_harness (NULL), caps, FALSE, cases[i].message);
  }
}

static void
test_wrong_dimension (void)
{
  GstHarness *h = new_harness (NULL);
  GstBus *bus = cony_test_attach_bus (h);
  GstPad *sinkpad = gst_element_get_static_pad (h->element, "sink");
  gst_pad_push_event (h->srcpad, gst_event_new_stream_start ("test"));
  GstCaps *caps = gst_caps_from_string ("other/tensors,format=static,num_tensors=1,"
                                        "types=float32,dimensions=(string)64:1,framerate=100/1");
  gst_pad_push_event (h->srcpad, gst_event_new_caps (caps));
  gst_caps_unref (caps);
  g_assert_false (gst_pad_has_current_caps (sinkpad));
  cony_test_pop_negotiation_error (bus, (const char *[]){ "64", "128", NULL });
  GstSegment seg;
  gst_segment_init (&seg, GST_FORMAT_TIME);
  gst_pad_push_event (h->srcpad, gst_event_new_segment (&seg));
  GstBuffer *buf = gst_buffer_new_allocate (NULL, 64 * sizeof (float), NULL);
  g_assert_cmpint (gst_pad_push (h->srcpad, buf), ==, GST_FLOW_NOT_NEGOTIATED);
  /* the push retried the caps: refused again, but the error is not repeated */
  g_assert_null (gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR));
  gst_object_unref (sinkpad);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
}

/* ------------------------------------------------------------------------ */
/* Multi-token steps: a model with tokens_per_step = 4 (tests/golden/model/
 * k4_b1_cony_r: d_in 6, n = 10, m = 3, 3 classes) fed one 4-token "frame"
 * per buffer, then two frames per buffer. */

#define KD 6
#define KK 4
#define KN 10
#define KC 3

static char *
k4_model_path (void)
{
  return cony_test_golden_path ("model", "k4_b1_cony_r.safetensors");
}

static GstHarness *
k4_harness (void)
{
  char *path = k4_model_path ();
  GstHarness *h = cony_test_harness_new ("conytransformer", path, NULL);
  g_free (path);
  return h;
}

static void
test_multitoken_steps (void)
{
  const gsize frames = 9;
  const GstClockTime base = 2 * GST_SECOND + 3, fdur = 100 * MS;
  float *x = cony_test_random_floats (frames * KK * KD, -2.0, 2.0, 77);

  /* the reference: libcony's encoder, 4 tokens per step */
  GError *error = NULL;
  char *path = k4_model_path ();
  ConyModel *model = cony_model_load (path, &error);
  g_assert_no_error (error);
  g_free (path);
  g_assert_cmpint (model->config.tokens_per_step, ==, KK);
  ConyEncoder *enc = cony_encoder_new (model, -1, &error);
  g_assert_no_error (error);

  GstHarness *h = k4_harness ();
  GstBus *bus = cony_test_attach_bus (h);
  /* frames 0..4: one frame (4 tokens) per buffer, 10 frames/s */
  gst_harness_set_src_caps_str (h,
      "other/tensors,format=static,num_tensors=1,types=float32,"
      "dimensions=(string)6:4,framerate=10/1");
  for (gsize f = 0; f < 5; f++) {
    GstBuffer *buf = gst_buffer_new_memdup (x + f * KK * KD, KK * KD * sizeof (float));
    GST_BUFFER_PTS (buf) = base + f * fdur;
    GST_BUFFER_DURATION (buf) = fdur;
    g_assert_cmpint (gst_harness_push (h, buf), ==, GST_FLOW_OK);
  }
  /* frames 5..8: two frames per buffer (the same token rate: the state is kept) */
  gst_harness_set_src_caps_str (h,
      "other/tensors,format=static,num_tensors=1,types=float32,"
      "dimensions=(string)6:8,framerate=5/1");
  for (gsize f = 5; f + 1 < frames; f += 2) {
    GstBuffer *buf = gst_buffer_new_memdup (x + f * KK * KD, 2 * KK * KD * sizeof (float));
    GST_BUFFER_PTS (buf) = base + f * fdur;
    GST_BUFFER_DURATION (buf) = 2 * fdur;
    g_assert_cmpint (gst_harness_push (h, buf), ==, GST_FLOW_OK);
  }

  guint64 step = 0;
  GstBuffer *buf;
  while ((buf = gst_harness_try_pull (h)) != NULL) {
    GPtrArray *metas = metas_of (buf);
    gsize tokens = gst_buffer_get_size (buf) / (KD * sizeof (float));
    g_assert_cmpuint (metas->len, ==, tokens / KK); /* one result per 4 tokens */
    for (guint i = 0; i < metas->len; i++, step++) {
      const GstConyClassificationMeta *m = metas->pdata[i];
      float logits[KC];
      double probs[KC];
      cony_encoder_step (enc, x + step * KK * KD, logits);
      int top = cony_test_softmax (logits, KC, probs);
      g_assert_cmpuint (m->step, ==, step);
      g_assert_cmpint (m->class_id, ==, top);
      for (int c = 0; c < KC; c++)
        g_assert_cmpfloat_with_epsilon (m->scores[c], probs[c], 1e-6);
      /* the window: the last min(4 (step + 1), 10) tokens; token j of frame f starts at
       * frame PTS + j x 25 ms */
      guint64 fed = KK * (step + 1), fill = MIN (fed, KN), oldest = fed - fill;
      g_assert_cmpfloat (m->context_fill, ==, (double) fill / KN);
      g_assert_cmpuint (m->window_start, ==,
          base + (oldest / KK) * fdur + (oldest % KK) * fdur / KK);
      g_assert_cmpuint (m->window_end, ==, base + (step + 1) * fdur);
    }
    g_ptr_array_free (metas, TRUE);
    gst_buffer_unref (buf);
  }
  g_assert_cmpuint (step, ==, frames); /* 9 frames, 9 steps */

  /* one message per step: pts the frame's; timestamp + duration the window's
   * span, to the end of the frame */
  guint64 msgs = 0;
  GstMessage *msg;
  while ((msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT)) != NULL) {
    const GstStructure *st = gst_message_get_structure (msg);
    if (gst_structure_has_name (st, "conytransformer")) {
      guint64 ts, dur, s, pts;
      g_assert_true (gst_structure_get_uint64 (st, "start", &ts));
      g_assert_true (gst_structure_get_uint64 (st, "duration", &dur));
      g_assert_true (gst_structure_get_uint64 (st, "step", &s));
      g_assert_true (gst_structure_get_uint64 (st, "pts", &pts));
      g_assert_cmpuint (s, ==, msgs);
      guint64 fed = KK * (s + 1), oldest = fed - MIN (fed, KN);
      g_assert_cmpuint (pts, ==, base + s * fdur);
      g_assert_cmpuint (ts, ==, base + (oldest / KK) * fdur + (oldest % KK) * fdur / KK);
      g_assert_cmpuint (ts + dur, ==, base + (s + 1) * fdur);
      msgs++;
    }
    gst_message_unref (msg);
  }
  g_assert_cmpuint (msgs, ==, frames);

  /* a buffer that is not a whole number of steps: a stream error naming k */
  GstBuffer *bad = gst_buffer_new_memdup (x, 6 * KD * sizeof (float));
  GST_BUFFER_PTS (bad) = base + 20 * fdur;
  g_assert_cmpint (gst_harness_push (h, bad), ==, GST_FLOW_ERROR);
  gchar *dbg = NULL;
  g_error_free (cony_test_pop_gerror (bus, GST_MESSAGE_ERROR, GST_STREAM_ERROR,
      GST_STREAM_ERROR_FORMAT, &dbg));
  g_assert_nonnull (strstr (dbg, "tokens_per_step"));
  g_free (dbg);

  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  cony_encoder_free (enc);
  cony_model_free (model);
  g_free (x);
}

/* Caps whose tokens per buffer are not a multiple of the model's k are refused
 * with an error naming both. */
static void
test_multitoken_caps_refused (void)
{
  const char *bad[] = { "6:1", "6:3", "6:6" };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    gchar *cs = g_strdup_printf ("other/tensors,format=static,num_tensors=1,types=float32,"
                                 "dimensions=(string)%s,framerate=10/1",
        bad[i]);
    cony_test_assert_caps_refused (k4_harness (), cs,
        (const char *[]){ "tokens_per_step = 4", NULL });
    g_free (cs);
  }
}

static void
expect_start_error (const char *model, const char *attention, const char *labels_file,
    const char *in_message)
{
  GstElement *el = cony_test_element_new ("conytransformer", model, "labels-file", labels_file,
      NULL);
  if (attention)
    gst_util_set_object_arg (G_OBJECT (el), "attention", attention);
  g_error_free (cony_test_assert_start_fails (el, (const char *[]){ in_message, NULL }));
  /* reusable once fixed */
  char *good = model_path ();
  g_object_set (el, "model", good, "labels-file", NULL, NULL);
  gst_util_set_object_arg (G_OBJECT (el), "attention", "model");
  g_free (good);
  cony_test_assert_starts (el);
  gst_object_unref (el);
}

/* Missing, invalid or unsuitable models: the state change fails with an
 * error carrying libcony's message. */
static void
test_bad_models (void)
{
  char *cnn = cony_test_golden_path ("cnn", "small.safetensors");
  char *npy = cony_test_golden_path ("cnn", "small_input.npy");
  char *nolandmarks = cony_test_golden_path ("model", "b1_regular.safetensors");
  char *dir = g_dir_make_tmp ("conytransformer-XXXXXX", NULL);
  char *trunc = g_build_filename (dir, "truncated.safetensors", NULL);
  gchar *data;
  gsize len;
  char *good = model_path ();
  g_assert_true (g_file_get_contents (good, &data, &len, NULL));
  g_assert_true (g_file_set_contents (trunc, data, len / 2, NULL));
  g_free (data);

  expect_start_error (NULL, NULL, NULL, "No model");
  expect_start_error ("/nonexistent/transformer.safetensors", NULL, NULL,
      "/nonexistent/transformer.safetensors");
  expect_start_error (npy, NULL, NULL, "small_input.npy");
  expect_start_error (cnn, NULL, NULL, "small.safetensors");
  expect_start_error (trunc, NULL, NULL, "truncated.safetensors");
  expect_start_error (nolandmarks, "cony-fixed", NULL, "b1_regular.safetensors");

  g_unlink (trunc);
  g_rmdir (dir);
  g_free (good);
  g_free (trunc);
  g_free (dir);
  g_free (nolandmarks);
  g_free (npy);
  g_free (cnn);
}

/* labels-file: replaces the model's labels; a count mismatch or a missing
 * file fails the state change. */
static void
test_labels_file (void)
{
  char *dir = g_dir_make_tmp ("conytransformer-XXXXXX", NULL);
  char *good = g_build_filename (dir, "good.txt", NULL);
  char *bad = g_build_filename (dir, "bad.txt", NULL);
  char *missing = g_build_filename (dir, "missing.txt", NULL);
  const char *mine[C] = { "a b", "c", "d", "e" };
  /* a BOM (as Windows editors write) is no part of the first label */
  g_assert_true (g_file_set_contents (good,
      "\xef\xbb\xbf"
      "a b\r\nc\nd\ne\n",
      -1, NULL));
  g_assert_true (g_file_set_contents (bad, "a\nb\nc\n", -1, NULL));
  char *model = model_path ();

  expect_start_error (model, NULL, bad, "3 labels but the model has 4 classes");
  expect_start_error (model, NULL, missing, "missing.txt");
  /* every label passes libcony's one label check, named by line */
  g_assert_true (g_file_set_contents (bad, "a\nb\x1b[0m\nc\nd\n", -1, NULL));
  expect_start_error (model, NULL, bad,
      "line 2: the label \"b\\033[0m\" holds the control character U+001B");

  Fixture f;
  fixture_open (&f, 9, 14, "labels-file", good, NULL);
  g_auto (GStrv) read = NULL;
  g_object_get (f.h->element, "labels", &read, NULL);
  g_assert_cmpuint (g_strv_length (read), ==, C);
  for (guint i = 0; i < C; i++)
    g_assert_cmpstr (read[i], ==, mine[i]);
  cony_test_push_tokens (f.h, f.x, D, 0, 9, 1, 0, 250 * MS, FALSE);
  for (guint t = 0; t < 9; t++) {
    double probs[C];
    int top = ref_step (f.r, f.x + t * D, probs);
    GstBuffer *buf = gst_harness_pull (f.h);
    g_assert_cmpstr (gst_buffer_get_cony_classification_meta (buf)->label, ==, mine[top]);
    gst_buffer_unref (buf);
    GstMessage *msg = gst_bus_pop_filtered (f.bus, GST_MESSAGE_ELEMENT);
    g_assert_cmpstr (gst_structure_get_string (gst_message_get_structure (msg), "label"), ==,
        mine[top]);
    gst_message_unref (msg);
  }
  fixture_close (&f);
  g_unlink (good);
  g_unlink (bad);
  g_rmdir (dir);
  g_free (model);
  g_free (good);
  g_free (bad);
  g_free (missing);
  g_free (dir);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/conytransformer/meta-matches-encoder", test_meta_matches_encoder);
  g_test_add_func ("/conytransformer/times-from-rate", test_times_from_rate);
  g_test_add_func ("/conytransformer/attention-override", test_attention_override);
  g_test_add_func ("/conytransformer/messages", test_messages);
  g_test_add_func ("/conytransformer/post-messages-threshold", test_post_messages_threshold);
  g_test_add_func ("/conytransformer/on-change", test_on_change);
  g_test_add_func ("/conytransformer/on-change-threshold", test_on_change_threshold);
  g_test_add_func ("/conytransformer/on-change-hold", test_on_change_hold);
  g_test_add_func ("/conytransformer/meta-survives-copies", test_meta_survives_copies);
  g_test_add_func ("/conytransformer/meta-survives-audioconvert", test_meta_survives_audioconvert);
  g_test_add_data_func ("/conytransformer/flush", &reset_flush, test_reset);
  g_test_add_data_func ("/conytransformer/discont", &reset_discont, test_reset);
  g_test_add_data_func ("/conytransformer/gap", &reset_gap, test_reset);
  g_test_add_func ("/conytransformer/caps-change", test_caps_change);
  g_test_add_func ("/conytransformer/nan", test_nan_tokens);
  g_test_add_func ("/conytransformer/extreme-tokens", test_extreme_tokens);
  g_test_add_func ("/conytransformer/overflow-warnings", test_overflow_warnings);
  g_test_add_func ("/conytransformer/ready-only-properties", test_ready_only_properties);
  g_test_add_func ("/conytransformer/latency", test_latency);
  g_test_add_func ("/conytransformer/wrong-dimension", test_wrong_dimension);
  g_test_add_func ("/conytransformer/refusal-named", test_refusal_named);
  g_test_add_func ("/conytransformer/bad-models", test_bad_models);
  g_test_add_func ("/conytransformer/labels-file", test_labels_file);
  g_test_add_func ("/conytransformer/multitoken/steps", test_multitoken_steps);
  g_test_add_func ("/conytransformer/multitoken/caps-refused", test_multitoken_caps_refused);
  return g_test_run ();
}
