/* conytransformer's listen, ignore and groups-file (issue 56): the reported classes, their
 * scores folded from libcony's encoder stepped on the same tokens, segments and messages
 * under the group labels, errors naming the bad label. The level gate (conyvggish
 * min-level, conymel's level, conytransformer's gated results): exactly the windows whose
 * samples' mean square is below it, with their exact spans.
 *
 * Model: tests/golden/transformer/small.safetensors (d_in 128, window 8, softmax over
 * speech, music, noise, silence). */
#include "cony/encoder.h"
#include "cony/model.h"
#include "gstconymeta.h"

#include <gst/gst.h>
#include <gst/check/gstharness.h>

#include "gsttestutil.h"
#include "testutil.h"
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#define D 128
#define C 4
#define MS (GST_MSECOND)
#define CAPS \
  "other/tensors,format=static,num_tensors=1,types=float32,dimensions=(string)128:1,framerate=4/1"

static char *tmpdir;

static char *
model_path (void)
{
  return cony_test_golden_path ("transformer", "small.safetensors");
}

static char *
write_file (const char *name, const char *text)
{
  char *path = g_build_filename (tmpdir, name, NULL);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  return path;
}

/* The model's softmax scores of @n tokens, stepped from the start. */
static double *
reference_scores (const float *x, gsize n)
{
  char *path = model_path ();
  ConyModel *model = cony_model_load (path, NULL);
  ConyEncoder *enc = cony_encoder_new (model, -1, NULL);
  double *p = g_new (double, n *C);
  for (gsize t = 0; t < n; t++) {
    float logits[C];
    g_assert_true (cony_encoder_step (enc, x + t * D, logits));
    cony_test_softmax (logits, C, p + t * C);
  }
  cony_encoder_free (enc);
  cony_model_free (model);
  g_free (path);
  return p;
}

typedef double (*Fold) (const double *p, guint i);

/* Runs @n tokens through conytransformer (properties "name", value, ..., NULL; top-k 3,
 * on-change) and checks each step's meta against @fold of the reference scores: the
 * @n_out @want labels, scores, top class and top-k, and that the segment events and
 * messages name the reported labels, a change at each new top label. */
static void
check_view (const char *const *want, guint n_out, Fold fold, const gchar *first_prop, ...)
{
  const gsize n = 24;
  float *x = cony_test_random_floats (n * D, -2.0, 2.0, 41);
  double *ref = reference_scores (x, n);
  char *path = model_path ();
  va_list ap;
  va_start (ap, first_prop);
  GstElement *el = cony_test_element_new_valist ("conytransformer", path, first_prop, ap);
  va_end (ap);
  g_object_set (el, "top-k", 3, NULL);
  gst_util_set_object_arg (G_OBJECT (el), "message-mode", "on-change");
  /* the labels as reported, before and after the model is loaded */
  g_auto (GStrv) before = NULL;
  g_object_get (el, "labels", &before, NULL);
  g_assert_cmpuint (g_strv_length (before), ==, n_out);
  GstHarness *h = cony_test_harness_take (el);
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h, CAPS);
  cony_test_push_tokens (h, x, D, 0, n, 1, 0, 250 * MS, FALSE);
  g_auto (GStrv) after = NULL;
  g_object_get (el, "labels", &after, NULL);
  for (guint i = 0; i < n_out; i++) {
    g_assert_cmpstr (before[i], ==, want[i]);
    g_assert_cmpstr (after[i], ==, want[i]);
  }
  gint prev = -1;
  guint changes = 0;
  for (gsize t = 0; t < n; t++) {
    GstBuffer *buf = gst_harness_pull (h);
    const GstConyClassificationMeta *m = gst_buffer_get_cony_classification_meta (buf);
    g_assert_cmpuint (m->n_scores, ==, n_out);
    gint top = 0;
    for (guint i = 0; i < n_out; i++) {
      double v = fold (ref + t * C, i);
      g_assert_cmpfloat_with_epsilon (m->scores[i], v, 1e-6);
      if (v > fold (ref + t * C, (guint) top))
        top = (gint) i;
    }
    g_assert_cmpint (m->class_id, ==, top);
    g_assert_cmpstr (m->label, ==, want[top]);
    g_assert_cmpuint (m->n_top, ==, MIN (3, n_out));
    g_assert_cmpstr (m->top_labels[0], ==, want[top]);
    for (guint i = 0; i < m->n_top; i++)
      g_assert_cmpstr (m->top_labels[i], ==, want[m->top_ids[i]]);
    if (top != prev) {
      /* an onset of the new top label (and the offset of the old) at this step */
      g_assert_cmpuint (m->n_events, ==, prev < 0 ? 1 : 2);
      g_assert_cmpstr (m->events[m->n_events - 1].label, ==, want[top]);
      g_assert_true (m->events[m->n_events - 1].onset);
      if (prev >= 0)
        g_assert_cmpstr (m->events[0].label, ==, want[prev]);
      GstMessage *msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT);
      g_assert_nonnull (msg);
      const GstStructure *s = gst_message_get_structure (msg);
      g_assert_cmpstr (gst_structure_get_string (s, "label"), ==, want[top]);
      g_assert_cmpstr (gst_structure_get_string (s, "previous_label"), ==,
          prev < 0 ? "" : want[prev]);
      g_assert_cmpuint (gst_value_array_get_size (gst_structure_get_value (s, "scores")), ==,
          n_out);
      gst_message_unref (msg);
      changes++;
    } else {
      g_assert_cmpuint (m->n_events, ==, 0);
    }
    prev = top;
    gst_buffer_unref (buf);
  }
  g_assert_null (gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT));
  g_test_message ("%u label changes over %" G_GSIZE_FORMAT " steps", changes, n);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  g_free (path);
  g_free (ref);
  g_free (x);
}

/* speech 0, music 1, noise 2, silence 3 */
static double
fold_loud_speech_rest (const double *p, guint i)
{
  return i == 0 ? MAX (p[1], p[2]) : i == 1 ? p[0] : p[3];
}

static double
fold_loud_speech_rest_sum (const double *p, guint i)
{
  return i == 0 ? p[1] + p[2] : i == 1 ? p[0] : p[3];
}

static double
fold_ignore_silence (const double *p, guint i)
{
  return p[i];
}

static double
fold_groups_only (const double *p, guint i)
{
  return i == 0 ? MAX (p[1], p[2]) : MAX (p[0], p[3]);
}

static void
test_groups (void)
{
  char *groups = write_file ("home.groups", "# a comment\n\nloud = music; noise\n");
  check_view ((const char *[]){ "loud", "speech", "rest" }, 3, fold_loud_speech_rest, "groups-file",
      groups, "listen", "loud; speech", "other-label", "rest", NULL);
  check_view ((const char *[]){ "loud", "speech", "rest" }, 3, fold_loud_speech_rest_sum,
      "groups-file", groups, "listen", "loud;speech", "other-label", "rest", "group-score", 1,
      NULL);
  /* a groups file alone reports its groups, the rest folded into "other" */
  check_view ((const char *[]){ "loud", "other" }, 2, fold_groups_only, "groups-file", groups,
      NULL);
  g_free (groups);
}

static void
test_ignore (void)
{
  check_view ((const char *[]){ "speech", "music", "noise" }, 3, fold_ignore_silence, "ignore",
      "silence", "other-label", "", NULL);
}

static void
expect_start_error (const char *needle, const gchar *first_prop, ...)
{
  char *path = model_path ();
  va_list ap;
  va_start (ap, first_prop);
  GstElement *el = cony_test_element_new_valist ("conytransformer", path, first_prop, ap);
  va_end (ap);
  g_error_free (cony_test_assert_start_fails (el, (const char *[]){ needle, NULL }));
  gst_object_unref (el);
  g_free (path);
}

static void
test_errors (void)
{
  char *groups = write_file ("bad.groups", "loud = music; noise\nquiet = silence; Silence\n");
  expect_start_error ("bad.groups, line 2: the group 'quiet' names 'Silence', which is not one "
                      "of the model's 4 labels (did you mean 'silence'?)",
      "groups-file", groups, NULL);
  expect_start_error ("listen: 'bark' is neither a group nor one of the model's 4 labels", "listen",
      "speech;bark", NULL);
  expect_start_error ("ignore: 'speech' is also listened to", "listen", "speech", "ignore",
      "speech", NULL);
  expect_start_error ("nonexistent.groups", "groups-file", "/nonexistent.groups", NULL);
  g_free (groups);
}

/* The gate's audio: loud noise (+-0.5, -10.8 dBFS) in [0, 2) and [8, 10) s, quiet (+-0.001,
 * -64.8 dBFS) elsewhere, 12 s at 16 kHz. */
#define RATE 16000
#define SECONDS 12
static float *
gate_audio (void)
{
  GRand *r = g_rand_new_with_seed (56);
  float *x = g_new (float, RATE *SECONDS);
  for (guint i = 0; i < RATE * SECONDS; i++) {
    double t = (double) i / RATE, a = (t < 2.0 || (t >= 8.0 && t < 10.0)) ? 0.5 : 0.001;
    x[i] = (float) g_rand_double_range (r, -a, a);
  }
  g_rand_free (r);
  return x;
}

/* Window i (every 250 ms, 96 frames of 10 ms hops): below -40 dBFS over its 15360 samples. */
static gboolean
window_gated (const float *x, guint i)
{
  double sum = 0.0;
  for (guint j = 0; j < 15360; j++)
    sum += (double) x[4000 * i + j] * x[4000 * i + j];
  return 10.0 * log10 (sum / 15360) < -40.0;
}

/* @data: conyvggish's batch (windows per CNN call): a gated window pushes the batch
 * waiting before it first, so the order and the results are the same. */
static void
test_gate (gconstpointer data)
{
  char *cnn = cony_test_golden_path ("cnn", "small.safetensors");
  char *tr = model_path ();
  gchar *launch = g_strdup_printf ("conymel ! conyvggish model=\"%s\" min-level=-40 batch=%u ! "
                                   "conytransformer model=\"%s\"",
      cnn, GPOINTER_TO_UINT (data), tr);
  GstHarness *h = gst_harness_new_parse (launch);
  g_free (launch);
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h,
      "audio/x-raw,format=F32LE,rate=16000,channels=1,"
      "layout=interleaved");
  float *x = gate_audio ();
  for (guint b = 0; b < SECONDS * 10; b++) {
    GstBuffer *buf = gst_buffer_new_memdup (x + b * 1600, 1600 * sizeof (float));
    GST_BUFFER_PTS (buf) = b * 100 * MS;
    GST_BUFFER_DURATION (buf) = 100 * MS;
    g_assert_cmpint (gst_harness_push (h, buf), ==, GST_FLOW_OK);
  }
  /* windows that fit 12 s: (192000 - 15600) / 4000 + 1 = 45 */
  guint n_gated = 0, fresh = 0;
  gboolean prev_gated = FALSE;
  for (guint i = 0; i < 45; i++) {
    GstBuffer *buf = gst_harness_pull (h);
    const GstConyClassificationMeta *m = gst_buffer_get_cony_classification_meta (buf);
    GstClockTime pts = i * 250 * MS;
    gboolean want = window_gated (x, i);
    g_assert_cmpuint (m->step, ==, i);
    g_assert_cmpuint (m->pts, ==, pts);
    g_assert_cmpint (m->gated, ==, want);
    GstMessage *msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT);
    g_assert_nonnull (msg);
    const GstStructure *s = gst_message_get_structure (msg);
    /* gated (TRUE) is there only for a gated step, and then no class (the result table) */
    gboolean msg_gated = FALSE;
    g_assert_cmpint (gst_structure_has_field (s, "gated"), ==, want);
    g_assert_cmpint (gst_structure_has_field (s, "class_id"), ==, !want);
    if (want)
      g_assert_true (gst_structure_get_boolean (s, "gated", &msg_gated) && msg_gated);
    guint64 ts = 0, dur = 0;
    g_assert_true (gst_structure_get_uint64 (s, "start", &ts));
    g_assert_true (gst_structure_get_uint64 (s, "duration", &dur));
    g_assert_cmpuint (ts, ==, m->window_start);
    g_assert_cmpuint (ts + dur, ==, m->window_end);
    if (want) {
      /* no class; the span is the quiet window's own */
      g_assert_cmpint (m->class_id, ==, -1);
      g_assert_cmpstr (m->label, ==, "");
      g_assert_cmpuint (m->n_scores, ==, 0);
      g_assert_cmpuint (m->n_top, ==, 0);
      g_assert_cmpuint (m->window_start, ==, pts);
      g_assert_cmpuint (m->window_end, ==, pts + 975 * MS);
      g_assert_false (gst_structure_has_field (s, "label"));
      n_gated++;
    } else {
      g_assert_cmpint (m->class_id, >=, 0);
      g_assert_cmpuint (m->n_scores, ==, C);
      g_assert_cmpuint (m->window_end, ==, pts + 975 * MS);
      if (prev_gated) {
        /* the quiet ended the context: the window starts again at this step */
        g_assert_cmpuint (m->window_start, ==, pts);
        g_assert_cmpfloat (m->context_fill, ==, 1.0 / 8);
        fresh++;
      }
    }
    prev_gated = want;
    gst_message_unref (msg);
    gst_buffer_unref (buf);
  }
  g_assert_null (gst_harness_try_pull (h));
  /* loud windows: 0..7 (start < 2 s) and 29..39 (8 s - 0.96 s < start < 10 s) */
  g_assert_cmpuint (n_gated, ==, 45 - 8 - 11);
  g_assert_cmpuint (fresh, ==, 1);
  g_test_message ("%u of 45 windows below the gate", n_gated);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  g_free (x);
  g_free (cnn);
  g_free (tr);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp ("conylisten-XXXXXX", NULL);
  g_test_add_func ("/conylisten/groups", test_groups);
  g_test_add_func ("/conylisten/ignore", test_ignore);
  g_test_add_func ("/conylisten/errors", test_errors);
  g_test_add_data_func ("/conylisten/gate", GUINT_TO_POINTER (1), test_gate);
  g_test_add_data_func ("/conylisten/gate-batch", GUINT_TO_POINTER (8), test_gate);
  int rc = g_test_run ();
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", tmpdir);
  (void) !system (cmd);
  g_free (tmpdir);
  return rc;
}
