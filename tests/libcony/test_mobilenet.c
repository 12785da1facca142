/* MobileNet-v1 and -v2 networks in the CNN engine: the float64 numpy reference's goldens
 * (training/gen_mobilenet_golden.py: F32, F16 and I8 weights, embedding and scores; a
 * MobileNet-v2 with F32 and U8 weights),
 * the random YAMNet layout's size, and the files the loader must refuse. */
#include "cony/cnn.h"
#include "cony/error.h"
#include "cony/npy.h"
#include "testutil.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static char *tmpdir;

static ConyCnn *
load_golden (const char *file)
{
  return cony_test_load_golden_cnn ("mobilenet", file);
}

/* @cnn on every example of @x, one at a time and batched, equals the golden @scores
 * and (output=embedding) @emb within 1e-4 relative; leaves the output at scores. */
static void
check_outputs (ConyCnn *cnn, const ConyNpyArray *x, const ConyNpyArray *scores,
    const ConyNpyArray *emb, const char *label)
{
  gsize n = x->shape[0], in = cony_cnn_get_input_size (cnn);
  float out[24];
  g_autofree float *batch = g_new (float, n *G_N_ELEMENTS (out));
  for (int e = 0; e < 2; e++) {
    const ConyNpyArray *want = e ? emb : scores;
    GError *error = NULL;
    g_assert_true (
        cony_cnn_set_output (cnn, e ? CONY_CNN_OUTPUT_EMBEDDING : CONY_CNN_OUTPUT_SCORES, &error));
    g_assert_no_error (error);
    gsize d = cony_cnn_get_output_size (cnn);
    g_assert_cmpuint (d, ==, want->shape[1]);
    g_assert_cmpuint (d, <=, G_N_ELEMENTS (out));
    for (gsize k = 0; k < n; k++) {
      cony_cnn_forward (cnn, x->data + k * in, out);
      double err = cony_test_rel_err (out, want->data + k * d, d);
      g_test_message ("%s example %" G_GSIZE_FORMAT " %s: relative error %.2e", label, k,
          e ? "embedding" : "scores", err);
      g_assert_cmpfloat (err, <=, 1e-4);
    }
    cony_cnn_forward_batch (cnn, x->data, n, batch);
    g_assert_cmpfloat (cony_test_rel_err (batch, want->data, n * d), <=, 1e-4);
  }
  g_assert_true (cony_cnn_set_output (cnn, CONY_CNN_OUTPUT_SCORES, NULL));
  cony_cnn_forward (cnn, x->data, out);
  g_assert_cmpfloat (cony_test_rel_err (out, scores->data, scores->shape[1]), <=, 1e-4);
}

/* A golden network @name.safetensors with its input and its @name_scores.npy and
 * @name_embedding.npy. */
typedef struct {
  ConyCnn *cnn;
  ConyNpyArray *x, *scores, *emb;
} Golden;

static void
golden_load (Golden *g, const char *name, const char *input)
{
  g_autofree char *file = g_strdup_printf ("%s.safetensors", name);
  g_autofree char *sfile = g_strdup_printf ("%s_scores.npy", name);
  g_autofree char *efile = g_strdup_printf ("%s_embedding.npy", name);
  g->cnn = load_golden (file);
  g->x = cony_test_load_golden_npy ("mobilenet", input);
  g->scores = cony_test_load_golden_npy ("mobilenet", sfile);
  g->emb = cony_test_load_golden_npy ("mobilenet", efile);
}

static void
golden_clear (Golden *g)
{
  g_clear_pointer (&g->cnn, cony_cnn_free);
  g_clear_pointer (&g->x, cony_npy_array_free);
  g_clear_pointer (&g->scores, cony_npy_array_free);
  g_clear_pointer (&g->emb, cony_npy_array_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Golden, golden_clear)

static void
check_variant (gconstpointer data)
{
  const char *variant = data;
  g_auto (Golden) g = { 0 };
  golden_load (&g, variant, "input.npy");
  ConyCnn *cnn = g.cnn;

  g_assert_true (cony_cnn_is_mobilenet (cnn));
  g_assert_cmpstr (cony_cnn_get_network_name (cnn), ==, "MobileNet-v1");
  g_assert_cmpuint (cony_cnn_get_input_height (cnn), ==, 21);
  g_assert_cmpuint (cony_cnn_get_input_width (cnn), ==, 16);
  g_assert_cmpuint (cony_cnn_get_input_size (cnn), ==, 21 * 16);
  g_assert_cmpint (cony_cnn_get_output (cnn), ==, CONY_CNN_OUTPUT_SCORES);
  g_assert_cmpuint (cony_cnn_get_output_size (cnn), ==, 10);
  g_assert_cmpuint (cony_cnn_get_embedding_size (cnn), ==, 24);
  /* Parameters and FLOPs counted by hand from the layer list (gen_mobilenet_golden.py). */
  g_assert_cmpuint (cony_cnn_get_n_params (cnn), ==, 3734);
  guint64 cf, ff;
  cony_cnn_get_flops (cnn, &cf, &ff);
  g_assert_cmpuint (cf, ==, 173568);
  g_assert_cmpuint (ff, ==, 480);
  g_autofree char *desc = cony_cnn_describe (cnn);
  g_test_message ("%s", desc);
  g_assert_nonnull (strstr (desc, "conv3x3 stride 2 1 -> 8, out 11x8x8"));
  g_assert_nonnull (strstr (desc, "depthwise3x3 stride 2 16, out 3x2x16"));
  g_assert_nonnull (strstr (desc, "conv1x1 16 -> 24, out 3x2x24"));
  g_assert_nonnull (strstr (desc, "sigmoid, out 10"));
  g_assert_nonnull (strstr (desc, strcmp (variant, "f16") == 0 ? "+ ReLU\n" : "+ ReLU6\n"));

  check_outputs (cnn, g.x, g.scores, g.emb, variant);

  /* F16 FC weights work on the head (the sigmoid is no FC layer): rounding the fc's
   * weights moves the scores by about 2^-11 relative at most. */
  g_assert_false (cony_cnn_get_fc_f16 (cnn));
  g_assert_true (cony_cnn_set_fc_f16 (cnn, TRUE, NULL));
  g_assert_true (cony_cnn_get_fc_f16 (cnn));
  float out[10];
  cony_cnn_forward (cnn, g.x->data, out);
  g_assert_cmpfloat (cony_test_rel_err (out, g.scores->data, 10), <=, 2e-3);
}

/* MobileNet-v2 (network = "mobilenet_v2": linear1x1, add@K, softmax, a normalised
 * 3-channel input) with F32 and U8 (zero-point) weights: the F32 path within 1e-4 of
 * the float64 reference, one example at a time and batched, scores and embedding. */
static void
check_v2 (gconstpointer data)
{
  const char *variant = data;
  g_autofree char *name = g_strdup_printf ("v2_%s", variant);
  g_auto (Golden) g = { 0 };
  golden_load (&g, name, "v2_input.npy");
  ConyCnn *cnn = g.cnn;
  g_assert_true (cony_cnn_is_mobilenet (cnn));
  g_assert_cmpstr (cony_cnn_get_network_name (cnn), ==, "MobileNet-v2");
  g_assert_cmpuint (cony_cnn_get_input_size (cnn), ==, 15 * 13 * 3);
  g_assert_cmpuint (cony_cnn_get_output_size (cnn), ==, 10);
  g_assert_cmpuint (cony_cnn_get_embedding_size (cnn), ==, 24);
  g_autofree char *desc = cony_cnn_describe (cnn);
  g_test_message ("%s", desc);
  g_assert_nonnull (strstr (desc, "conv1x1 16 -> 8, out 8x7x8 (linear)"));
  g_assert_nonnull (strstr (desc, "add layers.0, out 8x7x8"));
  g_assert_nonnull (strstr (desc, "softmax, out 10"));
  g_autofree char *label = g_strdup_printf ("v2 %s", variant);
  check_outputs (cnn, g.x, g.scores, g.emb, label);
}

static void test_int8_pointwise (void);

/* The same goldens with CONY_CNN_PORTABLE=1: pointwise layers on OpenBLAS sgemm
 * instead of the packed-weight kernel (which the layer of 16 outputs uses otherwise),
 * and an I8 pointwise layer (dequantised weights, sgemm). */
static void
test_portable (void)
{
  if (g_test_subprocess ()) {
    check_variant ("f32");
    check_variant ("i8");
    check_v2 ("f32");
    test_int8_pointwise ();
    return;
  }
  cony_test_trap_portable_cnn ();
}

static void
test_labels_metadata (void)
{
  g_autoptr (ConyCnn) cnn = load_golden ("f32.safetensors");
  guint n = 0;
  const char *const *labels = cony_cnn_get_labels (cnn, &n);
  g_assert_cmpuint (n, ==, 10);
  g_assert_cmpstr (labels[3], ==, "class 3");
  g_assert_null (labels[10]);
  g_assert_nonnull (strstr (cony_cnn_get_metadata (cnn, "frontend"), "\"sample-rate\": 16000"));
  g_assert_cmpstr (cony_cnn_get_metadata (cnn, "network"), ==, "mobilenet_v1");
  g_assert_null (cony_cnn_get_metadata (cnn, "nothing"));
  g_autoptr (ConyCnn) i8 = load_golden ("i8.safetensors");
  g_assert_null (cony_cnn_get_labels (i8, &n));
  g_assert_cmpuint (n, ==, 0);
}

static void
test_random_yamnet (void)
{
  GError *error = NULL;
  g_autoptr (ConyCnn) cnn = cony_cnn_new_random (CONY_CNN_YAMNET_LAYOUT, 96, 64, 1, 7, &error);
  g_assert_no_error (error);
  /* YAMNet's published size: 3,729,481 parameters, 69.2 M multiply-adds. */
  g_assert_cmpuint (cony_cnn_get_n_params (cnn), ==, 3729481);
  guint64 cf, ff;
  cony_cnn_get_flops (cnn, &cf, &ff);
  g_assert_cmpuint (cf + ff, ==, 2 * (guint64) 69165056);
  g_assert_cmpuint (cony_cnn_get_output_size (cnn), ==, 521);
  g_assert_cmpuint (cony_cnn_get_embedding_size (cnn), ==, 1024);
  float *x = g_new (float, 96 * 64), *out = g_new (float, 1024);
  for (int i = 0; i < 96 * 64; i++)
    x[i] = sinf (i * 0.37f) * 3.0f;
  cony_cnn_forward (cnn, x, out);
  for (int i = 0; i < 521; i++)
    g_assert_true (out[i] > 0.0f && out[i] < 1.0f);
  g_assert_true (cony_cnn_set_output (cnn, CONY_CNN_OUTPUT_EMBEDDING, NULL));
  cony_cnn_forward (cnn, x, out);
  for (int i = 0; i < 1024; i++)
    g_assert_true (out[i] >= 0.0f && out[i] <= 6.0f);
  g_free (x);
  g_free (out);

  /* A bad MobileNet layout names the word. */
  g_assert_null (cony_cnn_new_random ("conv3x3s2:8 dw3x3s3 gap", 8, 8, 1, 1, &error));
  cony_test_expect_error (&error, CONY_ERROR_INVALID, "dw3x3s3", NULL);
}

static void
test_vgg_has_no_embedding (void)
{
  g_autofree char *path = cony_test_golden_path ("cnn", "small.safetensors");
  GError *error = NULL;
  g_autoptr (ConyCnn) cnn = cony_cnn_load (path, &error);
  g_assert_no_error (error);
  g_assert_false (cony_cnn_is_mobilenet (cnn));
  g_assert_cmpstr (cony_cnn_get_network_name (cnn), ==, "VGG-style");
  g_assert_cmpuint (cony_cnn_get_embedding_size (cnn), ==, 0);
  g_assert_false (cony_cnn_set_output (cnn, CONY_CNN_OUTPUT_EMBEDDING, &error));
  cony_test_expect_error (&error, CONY_ERROR_INVALID, "no embedding", NULL);
  g_assert_cmpuint (cony_cnn_get_output_size (cnn), ==, 128);

  /* A VGG-style network with a global average pool has one (its FC input); the PCA
   * postprocess is refused on it, mode NONE copies it. */
  g_autoptr (ConyCnn) g = cony_cnn_new_random ("6 M 7 G | 5", 8, 6, 1, 3, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (cony_cnn_get_embedding_size (g), ==, 7);
  g_assert_true (cony_cnn_set_output (g, CONY_CNN_OUTPUT_EMBEDDING, &error));
  g_assert_cmpuint (cony_cnn_get_output_size (g), ==, 7);
  float x[48], e[7], copy[7];
  for (int i = 0; i < 48; i++)
    x[i] = cosf (i * 0.3f);
  cony_cnn_forward (g, x, e);
  g_assert_true (cony_cnn_postprocess (g, CONY_CNN_POSTPROCESS_NONE, e, 1, copy, &error));
  g_assert_cmpmem (copy, sizeof copy, e, sizeof e);
  g_assert_false (cony_cnn_postprocess (g, CONY_CNN_POSTPROCESS_TF, e, 1, copy, &error));
  g_assert_error (error, CONY_ERROR, CONY_ERROR_INVALID);
  g_clear_error (&error);
}

/* ---- refusals: a tiny network "conv3x3s2 gap fc" written with chosen dtypes ---- */

typedef struct {
  const char *name, *dtype;
  int ndim;
  gsize shape[4];
  gconstpointer data;
  gsize nbytes;
} Raw;

/* A safetensors file of raw little-endian tensors (any dtype), metadata pairs. */
static char *
write_raw (const char *file, const Raw *t, guint n, const char *const *meta)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  gsize off = 0;
  for (guint i = 0; i < n; i++) {
    json_builder_set_member_name (b, t[i].name);
    json_builder_begin_object (b);
    json_builder_set_member_name (b, "dtype");
    json_builder_add_string_value (b, t[i].dtype);
    json_builder_set_member_name (b, "shape");
    json_builder_begin_array (b);
    for (int d = 0; d < t[i].ndim; d++)
      json_builder_add_int_value (b, (gint64) t[i].shape[d]);
    json_builder_end_array (b);
    json_builder_set_member_name (b, "data_offsets");
    json_builder_begin_array (b);
    json_builder_add_int_value (b, (gint64) off);
    json_builder_add_int_value (b, (gint64) (off + t[i].nbytes));
    json_builder_end_array (b);
    json_builder_end_object (b);
    off += t[i].nbytes;
  }
  json_builder_set_member_name (b, "__metadata__");
  json_builder_begin_object (b);
  for (const char *const *m = meta; *m; m += 2) {
    json_builder_set_member_name (b, m[0]);
    json_builder_add_string_value (b, m[1]);
  }
  json_builder_end_object (b);
  json_builder_end_object (b);
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  g_autofree char *header = json_generator_to_data (gen, NULL);
  GByteArray *bytes = g_byte_array_new ();
  guint64 hl = GUINT64_TO_LE (strlen (header));
  g_byte_array_append (bytes, (const guint8 *) &hl, 8);
  g_byte_array_append (bytes, (const guint8 *) header, strlen (header));
  for (guint i = 0; i < n; i++)
    g_byte_array_append (bytes, t[i].data, t[i].nbytes);
  char *path = g_build_filename (tmpdir, file, NULL);
  g_assert_true (g_file_set_contents (path, (const char *) bytes->data, bytes->len, NULL));
  g_byte_array_unref (bytes);
  return path;
}

static ConyCnn *
load_tmp (const char *path)
{
  GError *error = NULL;
  ConyCnn *cnn = cony_cnn_load (path, &error);
  g_assert_no_error (error);
  return cnn;
}

static void
test_refusals (void)
{
  float cw[36], cb[4] = { 0.1f, -0.1f, 0.2f, 0 }, fw[12], fb[3] = { 0 },
                scale[4] = { 0.01f, 0.02f, 0.03f, 0.04f };
  gint8 cq[36];
  for (int i = 0; i < 36; i++) {
    cw[i] = (i % 7 - 3) * 0.1f;
    cq[i] = (gint8) (i * 7 - 120);
  }
  for (int i = 0; i < 12; i++)
    fw[i] = (i % 5 - 2) * 0.2f;
  const char *words = "conv3x3s2 gap fc";
  const char *meta[] = { "network", "mobilenet_v1", "input_height", "7", "input_width", "6",
    "layers", words, NULL };
  Raw conv_f32 = { "layers.0.weight", "F32", 4, { 4, 1, 3, 3 }, cw, sizeof cw };
  Raw conv_i8 = { "layers.0.weight", "I8", 4, { 4, 1, 3, 3 }, cq, sizeof cq };
  Raw conv_b = { "layers.0.bias", "F32", 1, { 4 }, cb, sizeof cb };
  Raw conv_s = { "layers.0.weight_scale", "F32", 1, { 4 }, scale, sizeof scale };
  Raw fc_w = { "layers.2.weight", "F32", 2, { 3, 4 }, fw, sizeof fw };
  Raw fc_b = { "layers.2.bias", "F32", 1, { 3 }, fb, sizeof fb };

  /* The good ones load: F32, and I8 with its scales (dequantised: q * scale). */
  {
    Raw t[] = { conv_f32, conv_b, fc_w, fc_b };
    g_autofree char *p = write_raw ("good.safetensors", t, 4, meta);
    GError *error = NULL;
    g_autoptr (ConyCnn) cnn = cony_cnn_load (p, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (cony_cnn_get_output_size (cnn), ==, 3);
    g_assert_cmpuint (cony_cnn_get_embedding_size (cnn), ==, 4);
  }
  {
    /* I8 with its scales computes the F32 network with the weights q * scale. */
    float deq[36];
    for (int i = 0; i < 36; i++)
      deq[i] = (float) cq[i] * scale[i / 9];
    Raw c = conv_f32;
    c.data = deq;
    Raw t[] = { conv_i8, conv_b, conv_s, fc_w, fc_b }, t2[] = { c, conv_b, fc_w, fc_b };
    g_autofree char *p = write_raw ("good_i8.safetensors", t, 5, meta);
    g_autofree char *p2 = write_raw ("good_deq.safetensors", t2, 4, meta);
    GError *error = NULL;
    g_autoptr (ConyCnn) q = cony_cnn_load (p, &error);
    g_assert_no_error (error);
    g_autoptr (ConyCnn) f = cony_cnn_load (p2, &error);
    g_assert_no_error (error);
    float x[42], eq[4], ef[4];
    for (int i = 0; i < 42; i++)
      x[i] = sinf (i * 0.9f) * 4.0f;
    g_assert_true (cony_cnn_set_output (q, CONY_CNN_OUTPUT_EMBEDDING, NULL));
    g_assert_true (cony_cnn_set_output (f, CONY_CNN_OUTPUT_EMBEDDING, NULL));
    cony_cnn_forward (q, x, eq);
    cony_cnn_forward (f, x, ef);
    g_assert_cmpfloat (cony_test_rel_err (eq, ef, 4), <=, 1e-6);
    gboolean some = FALSE;
    for (int c2 = 0; c2 < 4; c2++)
      some |= ef[c2] > 0.0f;
    g_assert_true (some);
  }
  /* I8 without its scales. */
  {
    Raw t[] = { conv_i8, conv_b, fc_w, fc_b };
    g_autofree char *p = write_raw ("noscale.safetensors", t, 4, meta);
    cony_test_expect_cnn_refused (p, CONY_ERROR_MISSING, "layers.0.weight_scale", "I8");
  }
  /* A zero scale, a scale with a float weight. */
  {
    float bad[4] = { 0.01f, 0.0f, 0.03f, 0.04f };
    Raw s = conv_s;
    s.data = bad;
    Raw t[] = { conv_i8, conv_b, s, fc_w, fc_b };
    g_autofree char *p = write_raw ("zeroscale.safetensors", t, 5, meta);
    cony_test_expect_cnn_refused (p, CONY_ERROR_INVALID, "layers.0.weight_scale", "> 0");
    Raw t2[] = { conv_f32, conv_b, conv_s, fc_w, fc_b };
    g_autofree char *p2 = write_raw ("floatscale.safetensors", t2, 5, meta);
    cony_test_expect_cnn_refused (p2, CONY_ERROR_INVALID, "layers.0.weight_scale",
        "I8 weights only");
  }
  /* Shapes that do not chain: the FC takes 5 inputs after a 4-channel gap. */
  {
    float fw5[15] = { 0 };
    Raw f = { "layers.2.weight", "F32", 2, { 3, 5 }, fw5, sizeof fw5 };
    Raw t[] = { conv_f32, conv_b, f, fc_b };
    g_autofree char *p = write_raw ("chain.safetensors", t, 4, meta);
    cony_test_expect_cnn_refused (p, CONY_ERROR_SHAPE, "layers.2.weight", "expected shape (3, 4)");
  }
  /* Non-finite weights: F32 Inf, F16 Inf. */
  {
    float inf_w[36];
    memcpy (inf_w, cw, sizeof cw);
    inf_w[20] = INFINITY;
    Raw c = conv_f32;
    c.data = inf_w;
    Raw t[] = { c, conv_b, fc_w, fc_b };
    g_autofree char *p = write_raw ("inf.safetensors", t, 4, meta);
    cony_test_expect_cnn_refused (p, CONY_ERROR_INVALID, "layers.0.weight", "non-finite");
    guint16 h[12] = { 0 };
    h[5] = 0x7c00; /* +Inf */
    Raw f = { "layers.2.weight", "F16", 2, { 3, 4 }, h, sizeof h };
    Raw t2[] = { conv_f32, conv_b, f, fc_b };
    g_autofree char *p2 = write_raw ("inf16.safetensors", t2, 4, meta);
    cony_test_expect_cnn_refused (p2, CONY_ERROR_INVALID, "layers.2.weight", "non-finite");
  }
  /* U8 weights: (q - zero point) x scale, the same network as those floats; a U8 weight
   * without its zero points, and zero points next to I8, are refused. */
  {
    guint8 u[36], zp[4] = { 128, 100, 140, 120 };
    float deq[36];
    for (int i = 0; i < 36; i++) {
      u[i] = (guint8) (i * 7);
      deq[i] = (float) ((int) u[i] - (int) zp[i / 9]) * scale[i / 9];
    }
    Raw c = conv_f32;
    c.data = deq;
    Raw cu = { "layers.0.weight", "U8", 4, { 4, 1, 3, 3 }, u, sizeof u };
    Raw cz = { "layers.0.weight_zero_point", "U8", 1, { 4 }, zp, sizeof zp };
    Raw t[] = { cu, conv_b, conv_s, cz, fc_w, fc_b }, t2[] = { c, conv_b, fc_w, fc_b };
    g_autofree char *p = write_raw ("good_u8.safetensors", t, 6, meta);
    g_autofree char *p2 = write_raw ("good_u8_deq.safetensors", t2, 4, meta);
    g_autoptr (ConyCnn) a = load_tmp (p);
    g_autoptr (ConyCnn) b = load_tmp (p2);
    float x[42], ya[3], yb[3];
    for (int i = 0; i < 42; i++)
      x[i] = (i % 9 - 4) * 0.3f;
    cony_cnn_forward (a, x, ya);
    cony_cnn_forward (b, x, yb);
    for (int i = 0; i < 3; i++)
      g_assert_cmpfloat (ya[i], ==, yb[i]);
    Raw t3[] = { cu, conv_b, conv_s, fc_w, fc_b };
    g_autofree char *p3 = write_raw ("u8_nozp.safetensors", t3, 5, meta);
    cony_test_expect_cnn_refused (p3, CONY_ERROR_MISSING, "layers.0.weight_zero_point",
        "is missing for the U8");
    Raw t4[] = { conv_i8, conv_b, conv_s, cz, fc_w, fc_b };
    g_autofree char *p4 = write_raw ("i8_zp.safetensors", t4, 6, meta);
    cony_test_expect_cnn_refused (p4, CONY_ERROR_INVALID, "weight_zero_point", "U8 weights only");
  }
  /* MobileNet-v2 words in a v1 file; a residual that crosses another; add@K of another
   * shape. */
  {
    float pw[16], pb[4] = { 0 };
    for (int i = 0; i < 16; i++)
      pw[i] = (i % 5 - 2) * 0.1f;
    Raw p1w = { "layers.1.weight", "F32", 4, { 4, 4, 1, 1 }, pw, sizeof pw };
    Raw p1b = { "layers.1.bias", "F32", 1, { 4 }, pb, sizeof pb };
    Raw p2w = { "layers.2.weight", "F32", 4, { 4, 4, 1, 1 }, pw, sizeof pw };
    Raw p2b = { "layers.2.bias", "F32", 1, { 4 }, pb, sizeof pb };
    Raw t[] = { conv_f32, conv_b, p1w, p1b };
    const char *v1[] = { "network", "mobilenet_v1", "input_height", "7", "input_width", "6",
      "layers", "conv3x3s2 linear1x1 add@0", NULL };
    g_autofree char *p = write_raw ("v2words.safetensors", t, 4, v1);
    cony_test_expect_cnn_refused (p, CONY_ERROR_INVALID, "linear1x1", "MobileNet-v1 layer");
    const char *cross[] = { "network", "mobilenet_v2", "input_height", "7", "input_width", "6",
      "layers", "conv3x3s2 linear1x1 add@0 linear1x1 add@1", NULL };
    Raw t2[] = { conv_f32, conv_b, p1w, p1b,
      { "layers.3.weight", "F32", 4, { 4, 4, 1, 1 }, pw, sizeof pw },
      { "layers.3.bias", "F32", 1, { 4 }, pb, sizeof pb } };
    g_autofree char *p2 = write_raw ("cross.safetensors", t2, 6, cross);
    cony_test_expect_cnn_refused (p2, CONY_ERROR_INVALID, "layers.4", "nested residuals");
    const char *ok2[] = { "network", "mobilenet_v2", "input_height", "7", "input_width", "6",
      "layers", "conv3x3s2 linear1x1 linear1x1 add@0", NULL };
    Raw t3[] = { conv_f32, conv_b, p1w, p1b, p2w, p2b };
    g_autofree char *p3 = write_raw ("v2ok.safetensors", t3, 6, ok2);
    g_autoptr (ConyCnn) good = load_tmp (p3);
    g_assert_cmpuint (cony_cnn_get_output_size (good), ==, 4 * 3 * 4);
  }
  /* Unknown layer word; a tensor for a layer without tensors; unknown network;
   * sigmoid not after an FC; unknown activation; labels of the wrong count. */
  {
    Raw t[] = { conv_f32, conv_b, fc_w, fc_b };
    const char *m1[] = { "network", "mobilenet_v1", "input_height", "7", "input_width", "6",
      "layers", "conv3x3s2 maxpool fc", NULL };
    g_autofree char *p1 = write_raw ("word.safetensors", t, 4, m1);
    cony_test_expect_cnn_refused (p1, CONY_ERROR_INVALID, "\"maxpool\"", "dw3x3s2");
    Raw stray = { "layers.1.weight", "F32", 1, { 4 }, cb, sizeof cb };
    Raw t2[] = { conv_f32, conv_b, stray, fc_w, fc_b };
    g_autofree char *p2 = write_raw ("stray.safetensors", t2, 5, meta);
    cony_test_expect_cnn_refused (p2, CONY_ERROR_INVALID, "unexpected tensor layers.1.weight",
        NULL);
    const char *m3[] = { "network", "resnet50", "layers", words, NULL };
    g_autofree char *p3 = write_raw ("net.safetensors", t, 4, m3);
    cony_test_expect_cnn_refused (p3, CONY_ERROR_INVALID, "resnet50", "mobilenet_v1");
    const char *m4[] = { "network", "mobilenet_v1", "input_height", "7", "input_width", "6",
      "layers", "conv3x3s2 sigmoid fc", NULL };
    Raw t4[] = { conv_f32, conv_b, { "layers.2.weight", "F32", 2, { 3, 48 }, NULL, 0 }, fc_b };
    float big[3 * 48] = { 0 };
    t4[2].data = big;
    t4[2].nbytes = sizeof big;
    g_autofree char *p4 = write_raw ("sigmoid.safetensors", t4, 4, m4);
    cony_test_expect_cnn_refused (p4, CONY_ERROR_INVALID, "layers.1", "sigmoid");
    const char *m5[] = { "network", "mobilenet_v1", "input_height", "7", "input_width", "6",
      "layers", words, "activation", "gelu", NULL };
    g_autofree char *p5 = write_raw ("act.safetensors", t, 4, m5);
    cony_test_expect_cnn_refused (p5, CONY_ERROR_INVALID, "activation", "gelu");
    const char *m6[] = { "network", "mobilenet_v1", "input_height", "7", "input_width", "6",
      "layers", words, "labels", "[\"a\", \"b\"]", NULL };
    g_autofree char *p6 = write_raw ("labels.safetensors", t, 4, m6);
    cony_test_expect_cnn_refused (p6, CONY_ERROR_INVALID, "labels", "3 strings");
    /* each label passes the one label check (cony/labels.h), refused by index */
    const char *bad_labels[][2] = { { "[\"a\", \"b\\u0000c\", \"d\"]", "a NUL" },
      { "[\"a\", \"b\", \"\\ud800x\"]", "not UTF-8" },
      { "[\"a\", \"b\\u001b\", \"d\"]", "U+001B" } };
    for (guint i = 0; i < G_N_ELEMENTS (bad_labels); i++) {
      const char *m8[] = { "network", "mobilenet_v1", "input_height", "7", "input_width", "6",
        "layers", words, "labels", bad_labels[i][0], NULL };
      g_autofree char *p8 = write_raw ("badlabel.safetensors", t, 4, m8);
      cony_test_expect_cnn_refused (p8, CONY_ERROR_FORMAT,
          i == 1 ? "metadata labels[2] " : "metadata labels[1] ", bad_labels[i][1]);
    }
    const char *m7[] = { "network", "mobilenet_v1", NULL };
    g_autofree char *p7 = write_raw ("nolayers.safetensors", t, 4, m7);
    cony_test_expect_cnn_refused (p7, CONY_ERROR_MISSING, "layers", NULL);
  }
}

/* A pointwise layer stored I8 keeps int8 panels expanded before each product: the
 * same function, bit for bit, as the file with the dequantised F32 weights. */
static void
test_int8_pointwise (void)
{
  float cw[36], cb[4] = { 0.1f, -0.2f, 0.3f, 0.0f }, pb[32], fw[96], fb[3] = { 0.1f, 0, -0.1f };
  float scale[32], deq[128];
  gint8 q[128];
  for (int i = 0; i < 36; i++)
    cw[i] = sinf (i * 1.3f) * 0.5f;
  for (int o = 0; o < 32; o++) {
    scale[o] = 0.003f * (o + 1);
    pb[o] = cosf (o * 0.7f) * 0.1f;
  }
  for (int i = 0; i < 128; i++) {
    q[i] = (gint8) ((i * 53) % 255 - 127);
    deq[i] = (float) q[i] * scale[i / 4];
  }
  for (int i = 0; i < 96; i++)
    fw[i] = cosf (i * 0.9f) * 0.3f;
  const char *meta[] = { "network", "mobilenet_v1", "input_height", "5", "input_width", "4",
    "layers", "conv3x3s1 conv1x1 gap fc", NULL };
  Raw common[] = {
    { "layers.0.weight", "F32", 4, { 4, 1, 3, 3 }, cw, sizeof cw },
    { "layers.0.bias", "F32", 1, { 4 }, cb, sizeof cb },
    { "layers.1.bias", "F32", 1, { 32 }, pb, sizeof pb },
    { "layers.3.weight", "F32", 2, { 3, 32 }, fw, sizeof fw },
    { "layers.3.bias", "F32", 1, { 3 }, fb, sizeof fb },
  };
  Raw t8[7], t32[6];
  memcpy (t8, common, sizeof common);
  memcpy (t32, common, sizeof common);
  t8[5] = (Raw){ "layers.1.weight", "I8", 4, { 32, 4, 1, 1 }, q, sizeof q };
  t8[6] = (Raw){ "layers.1.weight_scale", "F32", 1, { 32 }, scale, sizeof scale };
  t32[5] = (Raw){ "layers.1.weight", "F32", 4, { 32, 4, 1, 1 }, deq, sizeof deq };
  g_autofree char *p8 = write_raw ("pw_i8.safetensors", t8, 7, meta);
  g_autofree char *p32 = write_raw ("pw_f32.safetensors", t32, 6, meta);
  GError *error = NULL;
  g_autoptr (ConyCnn) a = cony_cnn_load (p8, &error);
  g_assert_no_error (error);
  g_autoptr (ConyCnn) b = cony_cnn_load (p32, &error);
  g_assert_no_error (error);
  float x[3 * 20], sa[3 * 32], sb[3 * 32];
  for (int i = 0; i < 60; i++)
    x[i] = sinf (i * 0.77f) * 3.0f;
  for (int o = 0; o < 2; o++) {
    g_assert_true (cony_cnn_set_output (a, o, NULL) && cony_cnn_set_output (b, o, NULL));
    guint d = cony_cnn_get_output_size (a);
    g_assert_cmpuint (d, ==, o ? 32 : 3);
    cony_cnn_forward_batch (a, x, 3, sa);
    cony_cnn_forward_batch (b, x, 3, sb);
    g_assert_cmpmem (sa, 3 * d * sizeof (float), sb, 3 * d * sizeof (float));
    gboolean some = FALSE;
    for (guint i = 0; i < 3 * d; i++)
      some |= sa[i] != 0.0f;
    g_assert_true (some);
  }
}

/* The engine's tables (issue 55): every layer kind and network row has a name, the
 * names are distinct, docs/model-format.md documents each, and the network rows name
 * what they load, random layouts included. */
static void
test_tables (void)
{
  g_autofree char *doc_path = g_build_filename (g_getenv ("CONY_SOURCE_ROOT"), "docs",
      "model-format.md", NULL);
  g_autofree char *doc = NULL;
  g_assert_true (g_file_get_contents (doc_path, &doc, NULL, NULL));
  guint n = cony_cnn_n_layer_kinds ();
  g_assert_cmpuint (n, >=, 9);
  for (guint i = 0; i < n; i++) {
    const char *name = cony_cnn_layer_kind_name (i);
    g_assert_nonnull (name);
    for (guint j = 0; j < i; j++)
      g_assert_cmpstr (cony_cnn_layer_kind_name (j), !=, name);
    /* its row in the doc's table of layer kinds */
    g_autofree char *cell = g_strdup_printf ("| `%s` |", name);
    if (strstr (doc, cell) == NULL)
      g_error ("layer kind %s: no row \"%s\" in docs/model-format.md", name, cell);
  }
  g_assert_null (cony_cnn_layer_kind_name (n));

  static const char *const networks[][2] = {
    { "MobileNet-v1", "mobilenet_v1" },
    { "MobileNet-v2", "mobilenet_v2" },
    { "VGG-style", NULL },
  };
  g_assert_cmpuint (cony_cnn_n_networks (), ==, G_N_ELEMENTS (networks));
  for (guint i = 0; i < G_N_ELEMENTS (networks); i++) {
    g_assert_cmpstr (cony_cnn_network_name (i), ==, networks[i][0]);
    g_assert_cmpstr (cony_cnn_network_metadata (i), ==, networks[i][1]);
    g_autofree char *cell = g_strdup_printf ("| %s |", networks[i][0]);
    if (strstr (doc, cell) == NULL)
      g_error ("network %s: no row \"%s\" in docs/model-format.md", networks[i][0], cell);
  }
  g_assert_null (cony_cnn_network_name (G_N_ELEMENTS (networks)));
  g_assert_null (cony_cnn_network_metadata (G_N_ELEMENTS (networks)));

  /* Random layouts pick their row from the table: MobileNet words build a v2 (whose
   * words include v1's), VGG widths a VGG-style network. */
  g_autoptr (ConyCnn) mn = cony_cnn_new_random ("conv3x3s2:8 dw3x3s1 conv1x1:16 gap fc:4 softmax",
      16, 16, 1, 1, NULL);
  g_assert_nonnull (mn);
  g_assert_cmpstr (cony_cnn_get_network_name (mn), ==, "MobileNet-v2");
  g_autoptr (ConyCnn) vgg = cony_cnn_new_random ("8 M 16 M | 4", 16, 16, 1, 1, NULL);
  g_assert_nonnull (vgg);
  g_assert_cmpstr (cony_cnn_get_network_name (vgg), ==, "VGG-style");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp ("cony-mobilenet-XXXXXX", NULL);
  g_test_add_data_func ("/mobilenet/golden/f32", "f32", check_variant);
  g_test_add_data_func ("/mobilenet/golden/f16", "f16", check_variant);
  g_test_add_data_func ("/mobilenet/golden/i8", "i8", check_variant);
  g_test_add_data_func ("/mobilenet/golden/v2-f32", "f32", check_v2);
  g_test_add_data_func ("/mobilenet/golden/v2-u8", "u8", check_v2);
  g_test_add_func ("/mobilenet/portable", test_portable);
  g_test_add_func ("/mobilenet/labels-metadata", test_labels_metadata);
  g_test_add_func ("/mobilenet/random-yamnet", test_random_yamnet);
  g_test_add_func ("/mobilenet/vgg-no-embedding", test_vgg_has_no_embedding);
  g_test_add_func ("/mobilenet/refusals", test_refusals);
  g_test_add_func ("/mobilenet/int8-pointwise", test_int8_pointwise);
  g_test_add_func ("/mobilenet/tables", test_tables);
  int ret = g_test_run ();
  if (!cony_test_remove_tmpdir (tmpdir))
    ret = ret ? ret : 1;
  g_free (tmpdir);
  return ret;
}
