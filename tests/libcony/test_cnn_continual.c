/* The continual CNN (include/cony/cnn-continual.h): equal to the float64 numpy reference
 * of the continual function (training/gen_continual_cnn_golden.py), equal to the
 * per-window engine on every row no window edge reaches (YAMNet's layout and a
 * VGG-style one; the integer path bit for bit on YAMNet), independent of how the frames
 * are split into pushes, reset, and the geometry it refuses. */
#include "cnn-private.h"
#include "cony/cnn-continual.h"
#include "cony/error.h"
#include "testutil.h"

#include <json-glib/json-glib.h>

#include <glib/gstdio.h>
#include <string.h>

/* Every token of @c on the @n frames of @x, pushed in pieces of @piece frames (0: a
 * random size each, 1..40); returns them (g_free) and their number in *@count. */
static float *
run_stream (ConyCnnContinual *c, const float *x, gsize n, gsize row, gsize piece, gsize *count)
{
  guint od = cony_cnn_continual_get_output_size (c);
  float *out = g_new (float, cony_cnn_continual_max_tokens (c, n) * od);
  GRand *rng = g_rand_new_with_seed (61);
  gsize made = 0;
  guint64 tokens0 = cony_cnn_continual_get_tokens (c), frames0 = cony_cnn_continual_get_frames (c);
  for (gsize at = 0; at < n;) {
    gsize k = piece ? piece : (gsize) g_rand_int_range (rng, 1, 41);
    k = MIN (k, n - at);
    gsize before = made;
    made += cony_cnn_continual_push (c, x + at * row, k, out + made * od);
    g_assert_cmpuint (made - before, <=, cony_cnn_continual_max_tokens (c, k));
    at += k;
  }
  g_rand_free (rng);
  g_assert_cmpuint (cony_cnn_continual_get_tokens (c) - tokens0, ==, made);
  g_assert_cmpuint (cony_cnn_continual_get_frames (c) - frames0, ==, n);
  *count = made;
  return out;
}

/* The golden stream through the golden net at @hop, as scores and as embeddings, equals
 * the float64 reference within 1e-4 (relative to the largest value). */
static void
check_golden_hop (guint hop)
{
  g_autoptr (ConyCnn) cnn = cony_test_load_golden_cnn ("continual", "net.safetensors");
  g_autoptr (ConyNpyArray) x = cony_test_load_golden_npy ("continual", "stream.npy");
  for (int e = 0; e < 2; e++) {
    g_autofree char *name = g_strdup_printf ("hop%u_%s.npy", hop, e ? "embedding" : "scores");
    g_autoptr (ConyNpyArray) want = cony_test_load_golden_npy ("continual", name);
    g_assert_true (
        cony_cnn_set_output (cnn, e ? CONY_CNN_OUTPUT_EMBEDDING : CONY_CNN_OUTPUT_SCORES, NULL));
    GError *error = NULL;
    g_autoptr (ConyCnnContinual) c = cony_cnn_continual_new (cnn, hop, &error);
    g_assert_no_error (error);
    gsize n;
    g_autofree float *got = run_stream (c, x->data, x->shape[0], x->shape[1], 0, &n);
    g_assert_cmpuint (n, ==, want->shape[0]);
    g_assert_cmpuint (cony_cnn_continual_get_output_size (c), ==, want->shape[1]);
    double err = cony_test_rel_err (got, want->data, n * want->shape[1]);
    g_test_message ("hop %u %s: %" G_GSIZE_FORMAT " tokens, relative error %.2e", hop, name, n,
        err);
    g_assert_cmpfloat (err, <=, 1e-4);
  }
}

/* The integer path of the golden net (q8.safetensors: int8 weights, TFLite's activation
 * quantisation) equals the integer reference (TFLite's arithmetic, continual_cnn.stream_int8)
 * bit for bit, embeddings and scores, at both hops. */
static void
test_golden_int8 (void)
{
  g_autoptr (ConyCnn) cnn = cony_test_load_golden_cnn ("continual", "q8.safetensors");
  g_autoptr (ConyNpyArray) x = cony_test_load_golden_npy ("continual", "stream.npy");
  g_assert_cmpint (cony_cnn_get_precision (cnn), ==, CONY_CNN_PRECISION_INT8);
  for (guint hop = 8; hop <= 16; hop += 8)
    for (int e = 0; e < 2; e++) {
      g_autofree char *name = g_strdup_printf ("q8_hop%u_%s.npy", hop, e ? "embedding" : "scores");
      g_autoptr (ConyNpyArray) want = cony_test_load_golden_npy ("continual", name);
      g_assert_true (
          cony_cnn_set_output (cnn, e ? CONY_CNN_OUTPUT_EMBEDDING : CONY_CNN_OUTPUT_SCORES, NULL));
      GError *error = NULL;
      g_autoptr (ConyCnnContinual) c = cony_cnn_continual_new (cnn, hop, &error);
      g_assert_no_error (error);
      gsize n;
      g_autofree float *got = run_stream (c, x->data, x->shape[0], x->shape[1], 0, &n);
      g_assert_cmpuint (n, ==, want->shape[0]);
      g_test_message ("int8 hop %u %s: %" G_GSIZE_FORMAT " tokens, relative difference %.2e", hop,
          name, n, cony_test_rel_err (got, want->data, n * want->shape[1]));
      g_assert_cmpmem (got, n * want->shape[1] * sizeof (float), want->data,
          n * want->shape[1] * sizeof (float));
    }
}

/* The same on the portable integer kernels (CPUs without AVX2): the same bits. */
static void
test_golden_int8_portable (void)
{
  if (g_test_subprocess ()) {
    g_assert_cmpstr (cony_cnn_get_int8_kernels (), ==, "portable");
    test_golden_int8 ();
    return;
  }
  cony_test_trap_portable_cnn ();
}

static void
test_golden (void)
{
  check_golden_hop (8);
  check_golden_hop (16);
}

/* The conv stack's final map of the per-window engine on one window of @big's height:
 * each time layer as cony_cnn_forward() runs it (its algorithm choice included). */
static float *
window_final_map (ConyCnn *big, const float *x, guint n_time, gsize *rows, gsize *row)
{
  CnnWeights *w = big->w;
  float *cur = g_memdup2 (x, sizeof (float) * cony_cnn_get_input_size (big));
  for (guint i = 0; i < n_time; i++) {
    Layer *l = &w->layers[i];
    float *out = g_new (float, (gsize) l->out_h * l->out_w * l->out_c);
    cnn_layer_forward (big, l, cur, out, 1, TRUE);
    g_free (cur);
    cur = out;
  }
  *rows = w->layers[n_time - 1].out_h;
  *row = (gsize) w->layers[n_time - 1].out_w * w->layers[n_time - 1].out_c;
  return cur;
}

/* Continual tokens of @layout at window @height, on a stream of @big_height frames =
 * the per-window engine on one window of @big_height frames from the stream's start
 * (same weights), on every token whose rows it computes without its bottom edge:
 * the token is the head on those rows (pooled or flattened), whatever the push sizes.
 * To float rounding (seen: up to 7e-7 relative), not bit for bit: the 3x3 convs' im2col
 * products run on OpenBLAS's sgemm, whose kernels change with the number of rows (a slab
 * of one or two rows against a whole window); a row off by one would differ by O(1). */
static void
check_interior (const char *layout, guint height, guint width, guint big_height, guint hop)
{
  GError *error = NULL;
  g_autoptr (ConyCnn) cnn = cony_cnn_new_random (layout, height, width, 1, 7, &error);
  g_assert_no_error (error);
  g_autoptr (ConyCnn) big = cony_cnn_new_random (layout, big_height, width, 1, 7, &error);
  g_assert_no_error (error);
  cony_cnn_set_conv_algorithm (big, CONY_CNN_CONV_IM2COL);
  guint n_time = 0;
  while (n_time < cnn->w->first_fc && cnn->w->layers[n_time].kind != LAYER_GAP)
    n_time++;
  gboolean gap = n_time < cnn->w->first_fc;
  if (gap)
    g_assert_true (cony_cnn_set_output (cnn, CONY_CNN_OUTPUT_EMBEDDING, NULL));
  ConyCnnContinualGeometry g;
  g_assert_true (cony_cnn_continual_geometry (cnn, hop, &g, &error));
  g_assert_no_error (error);

  gsize in_row = width;
  g_autofree float *x = cony_test_random_floats ((gsize) big_height * in_row, -6.0, 2.0, 11);
  gsize rows, row;
  g_autofree float *map = window_final_map (big, x, n_time, &rows, &row);
  /* The per-window rows are the continual ones up to the last row whose input ends
   * inside the window. */
  guint step = hop / g.time_stride;
  gsize interior = 0;
  for (guint r = 0; r < rows; r++) {
    /* Row r is the last of the token whose window starts at frame (r - (K - 1)) S. */
    gint64 last = ((gint64) r - (g.columns - 1)) * g.time_stride + height - 1 + g.lookahead;
    if (last <= (gint64) big_height - 1)
      interior = r + 1;
  }
  g_assert_cmpuint (interior, >=, g.columns + 2 * step);

  guint od = cony_cnn_get_output_size (cnn);
  g_autofree float *want = g_new (float, od);
  g_autofree float *feat = g_new (float, cnn->w->feat_dim);
  for (gsize piece = 0; piece <= 64; piece += 32) { /* random pieces, 32, 64 */
    g_autoptr (ConyCnnContinual) c = cony_cnn_continual_new (cnn, hop, &error);
    g_assert_no_error (error);
    gsize n;
    g_autofree float *got = run_stream (c, x, big_height, in_row, piece, &n);
    g_assert_cmpuint (n, ==, (interior - g.columns) / step + 1);
    for (gsize j = 0; j < n; j++) {
      const float *r0 = map + j * step * row;
      if (gap) { /* gap_forward's sum: double, in row order */
        guint C = cnn->w->layers[n_time].in_c;
        gsize pix = (gsize) g.columns * row / C;
        for (guint k = 0; k < C; k++) {
          double acc = 0;
          for (gsize p = 0; p < pix; p++)
            acc += r0[p * C + k];
          want[k] = (float) (acc / (double) pix);
        }
      } else {
        memcpy (feat, r0, sizeof (float) * cnn->w->feat_dim);
        cnn_head_forward (cnn, feat, 1, want);
      }
      double err = cony_test_rel_err (got + j * od, want, od);
      g_test_message ("%s piece %" G_GSIZE_FORMAT " token %" G_GSIZE_FORMAT ": rel. diff %.3g",
          layout, piece, j, err);
      g_assert_cmpfloat (err, <=, 1e-5);
    }
  }
}

static void
test_interior_yamnet (void)
{
  /* 16 rows of 32 frames; tokens at 2 rows (64 frames) apart. */
  check_interior (CONY_CNN_YAMNET_LAYOUT, 96, 64, 512, 64);
}

static void
test_interior_vgg (void)
{
  /* VGG-style: 3x3 convs, 2x2 pools (time stride 16), flattened into the FC head. */
  check_interior ("8 M 16 M 16 16 M 16 M | 32 10", 96, 64, 400, 32);
}

/* The geometry of YAMNet's layout: 32 frames per row, 3 rows a window, 157 frames of
 * lookahead (delay 160 when pushed per 32 frames), 126 of history. */
static void
test_geometry (void)
{
  GError *error = NULL;
  g_autoptr (ConyCnn) cnn = cony_cnn_new_random (CONY_CNN_YAMNET_LAYOUT, 96, 64, 1, 3, &error);
  g_assert_no_error (error);
  ConyCnnContinualGeometry g;
  g_assert_true (cony_cnn_continual_geometry (cnn, 32, &g, &error));
  g_assert_cmpuint (g.time_stride, ==, 32);
  g_assert_cmpuint (g.columns, ==, 3);
  g_assert_cmpuint (g.lookahead, ==, 157);
  g_assert_cmpuint (g.delay, ==, 160);
  g_assert_cmpuint (g.history, ==, 126);
  /* Pushed per 32 frames, token j comes with frame 32 j + 96 - 1 + 160 (0.25 s hops
   * are refused: not a multiple of 32). */
  g_autoptr (ConyCnnContinual) c = cony_cnn_continual_new (cnn, 32, &error);
  g_assert_no_error (error);
  g_autofree float *x = cony_test_random_floats (32 * 64, -6, 2, 5);
  g_autofree float *out = g_new (float, 4 * cony_cnn_continual_get_output_size (c));
  for (guint b = 0; b < 12; b++) {
    gsize k = cony_cnn_continual_push (c, x, 32, out);
    guint64 frames = cony_cnn_continual_get_frames (c);
    /* Token j is out once frame 32 j + 255 is in. */
    guint64 want = frames >= 256 ? (frames - 256) / 32 + 1 : 0;
    g_assert_cmpuint (cony_cnn_continual_get_tokens (c), ==, want);
    g_assert_cmpuint (k, <=, 1);
  }
  /* The state per stream (float): the rows of a 32-frame block, 1.4 MB; 0.2 MB kept. */
  gsize kept, bytes = cony_cnn_continual_get_state_bytes (c, &kept);
  g_test_message ("state %" G_GSIZE_FORMAT " bytes, %" G_GSIZE_FORMAT " kept", bytes, kept);
  g_assert_cmpuint (bytes, <, 2 << 20);
  g_assert_cmpuint (kept, <, 256 << 10);
  g_assert_cmpuint (kept, >, 0);
  g_assert_false (cony_cnn_continual_geometry (cnn, 25, &g, &error));
  cony_test_expect_error (&error, CONY_ERROR_INVALID, "multiple of the network's time stride, 32",
      "25");
  g_assert_null (cony_cnn_continual_new (cnn, 48, &error));
  cony_test_expect_error (&error, CONY_ERROR_INVALID, "32 frames", "48 is not");
  /* A window that is not a multiple of the time stride. */
  g_autoptr (ConyCnn) odd = cony_cnn_new_random (CONY_CNN_YAMNET_LAYOUT, 100, 64, 1, 3, &error);
  g_assert_no_error (error);
  g_assert_null (cony_cnn_continual_new (odd, 32, &error));
  cony_test_expect_error (&error, CONY_ERROR_INVALID, "window of 100 frames", "(32 frames)");
}

/* After a reset the stream starts again: the same frames in the same pieces give the
 * same tokens, bit for bit, as a fresh stream. */
static void
test_reset (void)
{
  g_autoptr (ConyCnn) cnn = cony_test_load_golden_cnn ("continual", "net.safetensors");
  g_autoptr (ConyNpyArray) x = cony_test_load_golden_npy ("continual", "stream.npy");
  GError *error = NULL;
  g_autoptr (ConyCnnContinual) c = cony_cnn_continual_new (cnn, 8, &error);
  g_assert_no_error (error);
  gsize n1, n2, n3;
  g_autofree float *a = run_stream (c, x->data, x->shape[0], x->shape[1], 0, &n1);
  /* Mid-stream frames change nothing already out; a reset forgets them. */
  g_autofree float *junk = run_stream (c, x->data + 40 * 16, 50, 16, 7, &n3);
  cony_cnn_continual_reset (c);
  g_assert_cmpuint (cony_cnn_continual_get_tokens (c), ==, 0);
  g_autofree float *b = run_stream (c, x->data, x->shape[0], x->shape[1], 0, &n2);
  g_assert_cmpuint (n1, ==, n2);
  g_assert_cmpmem (a, n1 * 10 * sizeof (float), b, n2 * 10 * sizeof (float));
}

/* The big copy's header: input_height @user. */
static void
set_height (JsonObject *header, char *data, gpointer user)
{
  JsonObject *meta = json_object_get_object_member (header, "__metadata__");
  json_object_set_string_member (meta, "input_height", user);
}

/* The integer path (YAMNet with its .tflite's quantisation, TFLite's arithmetic):
 * continual embeddings = the per-window integer layers on one 512-frame window from the
 * stream's start, bit for bit, on every token no window edge reaches (integer products
 * do not depend on the number of rows), whatever the push sizes; and the scores the
 * head gives on them. */
static void
test_interior_int8 (void)
{
  g_autofree char *path = cony_test_yamnet_int8 ();
  g_autofree char *big_path = cony_test_edit_safetensors (path, set_height, (gpointer) "512");
  GError *error = NULL;
  g_autoptr (ConyCnn) cnn = cony_cnn_load_private (path, &error);
  g_assert_no_error (error);
  g_autoptr (ConyCnn) big = cony_cnn_load_private (big_path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (cony_cnn_get_precision (cnn), ==, CONY_CNN_PRECISION_INT8);
  g_assert_true (cony_cnn_set_output (cnn, CONY_CNN_OUTPUT_EMBEDDING, NULL));
  guint n_time = 0;
  while (cnn->w->layers[n_time].kind != LAYER_GAP)
    n_time++;
  const guint hop = 64, H = 512, step = 2;

  /* The per-window integer layers on the whole window: codes in, codes out. */
  g_autofree float *x = cony_test_random_floats ((gsize) H * 64, -6.0, 2.0, 12);
  float sc, osc;
  gint32 zp, ozp;
  cnn_int8_io (big, 0, &sc, &zp, &osc, &ozp);
  gint8 *cur = g_new (gint8, (gsize) H * 64);
  cnn_int8_quantize (x, (gsize) H * 64, sc, zp, cur);
  for (guint i = 0; i < n_time; i++) {
    Layer *l = &big->w->layers[i];
    gint8 *out = g_new (gint8, (gsize) l->out_h * l->out_w * l->out_c);
    cnn_int8_slab (big, l, i, cur, out);
    g_free (cur);
    cur = out;
  }
  const Layer *last = &big->w->layers[n_time - 1];
  gsize row = (gsize) last->out_w * last->out_c;
  Layer gap = cnn->w->layers[n_time];
  cnn_int8_io (cnn, n_time, &sc, &zp, &osc, &ozp);

  for (gsize piece = 0; piece <= 32; piece += 32) {
    g_autoptr (ConyCnnContinual) c = cony_cnn_continual_new (cnn, hop, &error);
    g_assert_no_error (error);
    gsize n;
    g_autofree float *got = run_stream (c, x, H, 64, piece, &n);
    g_assert_cmpuint (n, ==, 5); /* token j reads to frame 64 j + 252: j <= 4 */
    for (gsize j = 0; j < n; j++) {
      gint8 codes[1024];
      float want[1024];
      cnn_int8_slab (cnn, &gap, n_time, cur + j * step * row, codes);
      for (guint k = 0; k < 1024; k++)
        want[k] = osc * (float) (codes[k] - ozp);
      g_assert_cmpmem (got + j * 1024, sizeof want, want, sizeof want);
    }
  }
  g_free (cur);

  /* Scores: the integer head on those embeddings, as per window. */
  g_assert_true (cony_cnn_set_output (cnn, CONY_CNN_OUTPUT_SCORES, NULL));
  g_autoptr (ConyCnnContinual) c = cony_cnn_continual_new (cnn, hop, &error);
  gsize n;
  g_autofree float *scores = run_stream (c, x, H, 64, 0, &n);
  g_assert_true (cony_cnn_set_output (cnn, CONY_CNN_OUTPUT_EMBEDDING, NULL));
  g_autoptr (ConyCnnContinual) e = cony_cnn_continual_new (cnn, hop, &error);
  gsize ne;
  g_autofree float *emb = run_stream (e, x, H, 64, 0, &ne);
  g_assert_true (cony_cnn_set_output (cnn, CONY_CNN_OUTPUT_SCORES, NULL));
  g_autofree float *head = g_new (float, 521 * n);
  cnn_head_forward (cnn, emb, n, head);
  g_assert_cmpmem (scores, n * 521 * sizeof (float), head, n * 521 * sizeof (float));
  g_unlink (path);
  g_unlink (big_path);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cnn-continual/golden", test_golden);
  g_test_add_func ("/cnn-continual/golden-int8", test_golden_int8);
  g_test_add_func ("/cnn-continual/golden-int8-portable", test_golden_int8_portable);
  g_test_add_func ("/cnn-continual/interior-yamnet", test_interior_yamnet);
  g_test_add_func ("/cnn-continual/interior-vgg", test_interior_vgg);
  g_test_add_func ("/cnn-continual/geometry", test_geometry);
  g_test_add_func ("/cnn-continual/reset", test_reset);
  g_test_add_func ("/cnn-continual/interior-int8", test_interior_int8);
  return g_test_run ();
}
