/* CNN engine: torch float64 goldens (training/gen_cnn_golden.py), the PCA
 * postprocess in both forms, and the errors bad model files must give. */
#include "cony/cnn.h"
#include "cony/error.h"
#include "cony/mel.h"
#include "cony/npy.h"
#include "testutil.h"
#include "cony/safetensors.h"

#include <glib/gstdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static char *tmpdir;

static ConyCnn *
load_model (const char *file)
{
  return cony_test_load_golden_cnn ("cnn", file);
}

/* max |got - want| / max |want| */
static void
test_small_forward (void)
{
  g_autoptr (ConyCnn) cnn = load_model ("small.safetensors");
  g_autoptr (ConyNpyArray) x = cony_test_load_golden_npy ("cnn", "small_input.npy");
  g_autoptr (ConyNpyArray) want = cony_test_load_golden_npy ("cnn", "small_expected.npy");
  g_assert_cmpuint (cony_cnn_get_input_height (cnn), ==, 96);
  g_assert_cmpuint (cony_cnn_get_input_width (cnn), ==, 64);
  g_assert_cmpuint (cony_cnn_get_input_channels (cnn), ==, 1);
  g_assert_cmpuint (cony_cnn_get_input_size (cnn), ==, 96 * 64);
  g_assert_cmpuint (cony_cnn_get_output_size (cnn), ==, 128);
  g_assert_false (cony_cnn_get_final_relu (cnn));
  g_assert_true (cony_cnn_has_pca (cnn));
  g_assert_cmpuint (cony_cnn_get_n_params (cnn), ==, 49664);
  g_autofree char *desc = cony_cnn_describe (cnn);
  g_test_message ("%s", desc);
  /* Pools inferred at torchvggish's indices, including the trailing one. */
  g_assert_nonnull (strstr (desc, "features.2 (max-pool)"));
  g_assert_nonnull (strstr (desc, "features.10 (max-pool)"));
  g_assert_nonnull (strstr (desc, "features.15 (max-pool)"));
  g_assert_null (strstr (desc, "features.7 (max-pool)"));

  gsize n = x->shape[0];
  g_assert_cmpuint (n, ==, 4);
  float out[128];
  static const ConyCnnConvAlgorithm algos[] = { CONY_CNN_CONV_AUTO, CONY_CNN_CONV_IM2COL,
    CONY_CNN_CONV_WINOGRAD, CONY_CNN_CONV_WINOGRAD4 };
  g_assert_cmpint (cony_cnn_get_conv_algorithm (cnn), ==, CONY_CNN_CONV_AUTO);
  for (guint a = 0; a < G_N_ELEMENTS (algos); a++) {
    cony_cnn_set_conv_algorithm (cnn, algos[a]);
    for (gsize k = 0; k < n; k++) {
      cony_cnn_forward (cnn, x->data + k * 96 * 64, out);
      double e = cony_test_rel_err (out, want->data + k * 128, 128);
      g_test_message ("conv algorithm %d, example %" G_GSIZE_FORMAT ": relative error %.2e",
          algos[a], k, e);
      g_assert_cmpfloat (e, <, 1e-4);
    }
  }
  cony_cnn_set_conv_algorithm (cnn, CONY_CNN_CONV_AUTO);

  /* Batched == one by one (within float rounding: sgemm vs sgemv). */
  g_autofree float *batch = g_new (float, n * 128);
  cony_cnn_forward_batch (cnn, x->data, n, batch);
  g_assert_cmpfloat (cony_test_rel_err (batch, want->data, n * 128), <, 1e-4);

  /* final_relu on: the ReLU of the same values. */
  cony_cnn_set_final_relu (cnn, TRUE);
  g_assert_true (cony_cnn_get_final_relu (cnn));
  cony_cnn_forward (cnn, x->data, out);
  gboolean some_zero = FALSE;
  for (int i = 0; i < 128; i++) {
    float w = MAX (want->data[i], 0.0f);
    g_assert_cmpfloat (fabsf (out[i] - w), <=, 1e-4 * 0.5);
    some_zero |= out[i] == 0.0f;
  }
  g_assert_true (some_zero);
}

static void
test_odd_layout (void)
{
  g_autoptr (ConyCnn) cnn = load_model ("odd.safetensors");
  g_autoptr (ConyNpyArray) x = cony_test_load_golden_npy ("cnn", "odd_input.npy");
  g_autoptr (ConyNpyArray) want = cony_test_load_golden_npy ("cnn", "odd_expected.npy");
  g_assert_cmpuint (cony_cnn_get_input_height (cnn), ==, 20);
  g_assert_cmpuint (cony_cnn_get_input_width (cnn), ==, 12);
  g_assert_cmpuint (cony_cnn_get_input_channels (cnn), ==, 2);
  g_assert_cmpuint (cony_cnn_get_output_size (cnn), ==, 10);
  g_assert_true (cony_cnn_get_final_relu (cnn));
  g_assert_false (cony_cnn_has_pca (cnn));
  g_autofree char *desc = cony_cnn_describe (cnn);
  g_assert_nonnull (strstr (desc, "features.7 (max-pool)"));
  g_assert_nonnull (strstr (desc, "features.8 (max-pool)"));
  float out[3 * 10];
  cony_cnn_forward_batch (cnn, x->data, 3, out);
  g_assert_cmpfloat (cony_test_rel_err (out, want->data, 30), <, 1e-4);
  cony_cnn_set_conv_algorithm (cnn, CONY_CNN_CONV_WINOGRAD); /* 2- and 4-channel layers too */
  cony_cnn_forward_batch (cnn, x->data, 3, out);
  g_assert_cmpfloat (cony_test_rel_err (out, want->data, 30), <, 1e-4);
  cony_cnn_set_conv_algorithm (cnn, CONY_CNN_CONV_WINOGRAD4);
  cony_cnn_forward_batch (cnn, x->data, 3, out);
  g_assert_cmpfloat (cony_test_rel_err (out, want->data, 30), <, 1e-4);

  guint64 conv, fc;
  cony_cnn_get_flops (cnn, &conv, &fc);
  g_assert_cmpuint (conv, ==,
      2ull * (20 * 12 * 9 * 2 * 4 + 10 * 6 * 9 * 4 * 6 + 10 * 6 * 9 * 6 * 6));
  g_assert_cmpuint (fc, ==, 2ull * (12 * 16 + 16 * 10));
}

static void
test_postprocess (void)
{
  g_autoptr (ConyCnn) cnn = load_model ("small.safetensors");
  g_autoptr (ConyNpyArray) emb = cony_test_load_golden_npy ("cnn", "small_expected.npy");
  g_autoptr (ConyNpyArray) tf = cony_test_load_golden_npy ("cnn", "small_pp_tf.npy");
  g_autoptr (ConyNpyArray) th = cony_test_load_golden_npy ("cnn", "small_pp_torch.npy");
  gsize n = emb->shape[0] * 128;
  g_autofree float *out = g_new (float, n);
  GError *error = NULL;

  g_assert_true (cony_cnn_postprocess (cnn, CONY_CNN_POSTPROCESS_TF, emb->data, 4, out, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (out, n * sizeof (float), tf->data, n * sizeof (float));

  /* float32 sums in a different order than torch's: allow a flip at a rounding
   * boundary, but at most one. */
  g_assert_true (cony_cnn_postprocess (cnn, CONY_CNN_POSTPROCESS_TORCH, emb->data, 4, out, &error));
  guint flips = 0, differ_tf = 0;
  for (gsize i = 0; i < n; i++) {
    g_assert_cmpfloat (fabsf (out[i] - th->data[i]), <=, 1.0f);
    flips += out[i] != th->data[i];
    differ_tf += out[i] != tf->data[i];
    g_assert_cmpfloat (out[i], >=, 0.0f);
    g_assert_cmpfloat (out[i], <=, 255.0f);
    g_assert_cmpfloat (out[i], ==, rintf (out[i]));
  }
  g_assert_cmpuint (flips, <=, 1);
  g_assert_cmpuint (differ_tf, >, 50); /* the two forms really differ */

  /* In place, and NONE copies. */
  g_autofree float *copy = g_memdup2 (emb->data, n * sizeof (float));
  g_assert_true (cony_cnn_postprocess (cnn, CONY_CNN_POSTPROCESS_TF, copy, 4, copy, &error));
  g_assert_cmpmem (copy, n * sizeof (float), tf->data, n * sizeof (float));
  g_assert_true (cony_cnn_postprocess (cnn, CONY_CNN_POSTPROCESS_NONE, emb->data, 4, out, &error));
  g_assert_cmpmem (out, n * sizeof (float), emb->data, n * sizeof (float));

  /* No PCA: a clear error. */
  g_autoptr (ConyCnn) odd = load_model ("odd.safetensors");
  float e[10] = { 0 }, o[10];
  g_assert_false (cony_cnn_postprocess (odd, CONY_CNN_POSTPROCESS_TORCH, e, 1, o, &error));
  cony_test_expect_error (&error, CONY_ERROR_MISSING, "pca_eigen_vectors", NULL);
}

/* --- bad files: rewrite small.safetensors with one change ------------------- */

typedef struct {
  GPtrArray *names;
  GPtrArray *data; /* float* (owned) */
  GArray *ndims;
  GPtrArray *shapes; /* gsize[8] (owned) */
} TensorSet;

static void
set_free (TensorSet *s)
{
  g_ptr_array_unref (s->names);
  g_ptr_array_unref (s->data);
  g_array_unref (s->ndims);
  g_ptr_array_unref (s->shapes);
}

static TensorSet
read_set (const char *file)
{
  g_autofree char *path = cony_test_golden_path ("cnn", file);
  GError *error = NULL;
  g_autoptr (ConySafetensors) st = cony_safetensors_open (path, &error);
  g_assert_no_error (error);
  TensorSet s = { g_ptr_array_new_with_free_func (g_free), g_ptr_array_new_with_free_func (g_free),
    g_array_new (FALSE, FALSE, sizeof (int)), g_ptr_array_new_with_free_func (g_free) };
  for (guint i = 0; i < cony_safetensors_n_tensors (st); i++) {
    const ConyTensorInfo *t = cony_safetensors_tensor (st, i);
    float *d = cony_safetensors_get_f32 (st, t->name, t->ndim, t->shape, &error);
    g_assert_no_error (error);
    g_ptr_array_add (s.names, g_strdup (t->name));
    g_ptr_array_add (s.data, d);
    g_array_append_val (s.ndims, t->ndim);
    g_ptr_array_add (s.shapes, g_memdup2 (t->shape, sizeof t->shape));
  }
  return s;
}

static int
set_find (TensorSet *s, const char *name)
{
  for (guint i = 0; i < s->names->len; i++)
    if (strcmp (s->names->pdata[i], name) == 0)
      return (int) i;
  g_assert_not_reached ();
}

static char *
write_set (TensorSet *s, const char *file, const char *const *meta)
{
  char *path = g_build_filename (tmpdir, file, NULL);
  GError *error = NULL;
  g_assert_true (cony_safetensors_write (path, s->names->len, (const char *const *) s->names->pdata,
      (const float *const *) s->data->pdata, (int *) s->ndims->data,
      (const gsize *const *) s->shapes->pdata, meta, &error));
  g_assert_no_error (error);
  return path;
}

static void
test_bad_models (void)
{
  cony_test_expect_cnn_refused ("/nonexistent/model.safetensors", CONY_ERROR_IO, NULL, NULL);

  /* Missing bias. */
  {
    TensorSet s = read_set ("small.safetensors");
    int i = set_find (&s, "features.6.bias");
    g_ptr_array_remove_index (s.names, i);
    g_ptr_array_remove_index (s.data, i);
    g_array_remove_index (s.ndims, i);
    g_ptr_array_remove_index (s.shapes, i);
    g_autofree char *p = write_set (&s, "nobias.safetensors", NULL);
    cony_test_expect_cnn_refused (p, CONY_ERROR_MISSING, "features.6.bias", NULL);
    set_free (&s);
  }
  /* Conv with the wrong number of input channels (shape lie, same bytes). */
  {
    TensorSet s = read_set ("small.safetensors");
    gsize *sh = s.shapes->pdata[set_find (&s, "features.3.weight")];
    sh[0] = 32; /* (16, 8, 3, 3) -> (32, 4, 3, 3) */
    sh[1] = 4;
    g_autofree char *p = write_set (&s, "badconv.safetensors", NULL);
    cony_test_expect_cnn_refused (p, CONY_ERROR_SHAPE, "features.3.weight", "(out, 8, 3, 3)");
    set_free (&s);
  }
  /* FC input that no number of pools explains. */
  {
    TensorSet s = read_set ("small.safetensors");
    gsize *sh = s.shapes->pdata[set_find (&s, "embeddings.0.weight")];
    sh[0] = 48; /* (32, 768) -> (48, 512) */
    sh[1] = 512;
    g_autofree char *p = write_set (&s, "badfc.safetensors", NULL);
    cony_test_expect_cnn_refused (p, CONY_ERROR_SHAPE, "embeddings.0.weight",
        "768 (6x4x32, 1 trailing pools)");
    set_free (&s);
  }
  /* Bias of the wrong length. */
  {
    TensorSet s = read_set ("small.safetensors");
    int i = set_find (&s, "embeddings.2.bias");
    ((gsize *) s.shapes->pdata[i])[0] = 16;
    g_autofree char *p = write_set (&s, "badbias.safetensors", NULL);
    cony_test_expect_cnn_refused (p, CONY_ERROR_SHAPE, "embeddings.2.bias", "32");
    set_free (&s);
  }
  /* A stranger tensor (torchaudio's prefix). */
  {
    TensorSet s = read_set ("odd.safetensors");
    int i = set_find (&s, "features.0.weight");
    g_free (s.names->pdata[i]);
    s.names->pdata[i] = g_strdup ("features_network.0.weight");
    g_autofree char *p = write_set (&s, "stranger.safetensors", NULL);
    cony_test_expect_cnn_refused (p, CONY_ERROR_INVALID, "features_network.0.weight", NULL);
    set_free (&s);
  }
  /* Metadata: wrong input size for the weights, bad values. */
  {
    TensorSet s = read_set ("small.safetensors");
    const char *m1[] = { "input_height", "64", NULL };
    g_autofree char *p1 = write_set (&s, "meta1.safetensors", m1);
    cony_test_expect_cnn_refused (p1, CONY_ERROR_SHAPE, "embeddings.0.weight",
        "for a 64x64x1 input");
    const char *m2[] = { "final_relu", "maybe", NULL };
    g_autofree char *p2 = write_set (&s, "meta2.safetensors", m2);
    cony_test_expect_cnn_refused (p2, CONY_ERROR_INVALID, "final_relu", NULL);
    const char *m3[] = { "input_width", "-3", NULL };
    g_autofree char *p3 = write_set (&s, "meta3.safetensors", m3);
    cony_test_expect_cnn_refused (p3, CONY_ERROR_INVALID, "input_width", NULL);
    /* Finite as a double, not as the float the network uses (issue #30). */
    const char *m5[] = { "input_mean", "1e39", NULL };
    g_autofree char *p5 = write_set (&s, "meta5.safetensors", m5);
    cony_test_expect_cnn_refused (p5, CONY_ERROR_INVALID, "input_mean", NULL);
    const char *m6[] = { "input_std", "1e-45", NULL }; /* 1 / std overflows */
    g_autofree char *p6 = write_set (&s, "meta6.safetensors", m6);
    cony_test_expect_cnn_refused (p6, CONY_ERROR_INVALID, "input_std", NULL);
    const char *m4[] = { "global_pool", "max", NULL }; /* only avg / none exist */
    g_autofree char *p4 = write_set (&s, "meta4.safetensors", m4);
    cony_test_expect_cnn_refused (p4, CONY_ERROR_INVALID, "global_pool", NULL);
    set_free (&s);
  }
  /* A NaN weight. */
  {
    TensorSet s = read_set ("small.safetensors");
    ((float *) s.data->pdata[set_find (&s, "embeddings.4.weight")])[7] = NAN;
    g_autofree char *p = write_set (&s, "nan.safetensors", NULL);
    GError *error = NULL;
    g_assert_null (cony_cnn_load (p, &error));
    g_assert_nonnull (error);
    g_assert_nonnull (strstr (error->message, "embeddings.4.weight"));
    g_clear_error (&error);
    set_free (&s);
  }
  /* Inf weights (issue #30: the loader must refuse them like NaN), in a conv
   * layer, an FC layer and the PCA. */
  {
    static const char *const where[] = { "features.3.weight", "embeddings.0.bias", "pca_means" };
    for (guint k = 0; k < G_N_ELEMENTS (where); k++) {
      TensorSet s = read_set ("small.safetensors");
      ((float *) s.data->pdata[set_find (&s, where[k])])[1] = k == 1 ? -INFINITY : INFINITY;
      g_autofree char *p = write_set (&s, "inf.safetensors", NULL);
      cony_test_expect_cnn_refused (p, CONY_ERROR_INVALID, where[k], "non-finite");
      set_free (&s);
    }
  }
  /* Both PCA spellings: the second set would go unread. */
  {
    TensorSet s = read_set ("small.safetensors");
    int i = set_find (&s, "pca_means");
    g_ptr_array_add (s.names, g_strdup ("pproc.pca_means"));
    g_ptr_array_add (s.data, g_memdup2 (s.data->pdata[i], 128 * sizeof (float)));
    g_array_append_val (s.ndims, g_array_index (s.ndims, int, i));
    g_ptr_array_add (s.shapes, g_memdup2 (s.shapes->pdata[i], 8 * sizeof (gsize)));
    g_autofree char *p = write_set (&s, "pca2.safetensors", NULL);
    cony_test_expect_cnn_refused (p, CONY_ERROR_INVALID, "pproc.pca_", NULL);
    set_free (&s);
  }
  /* An F16 FC weight that is +Inf (the FC layers keep F16 weights as they are). */
  {
    g_autofree char *src = cony_test_golden_path ("cnn", "small_f16.safetensors");
    g_autofree char *bytes = NULL;
    gsize len = 0;
    g_assert_true (g_file_get_contents (src, &bytes, &len, NULL));
    GError *error = NULL;
    g_autoptr (ConySafetensors) st = cony_safetensors_open (src, &error);
    g_assert_no_error (error);
    const ConyTensorInfo *ti = cony_safetensors_find (st, "embeddings.2.weight");
    g_assert_true (ti != NULL && ti->dtype == CONY_DTYPE_F16);
    /* The tensor's bytes in the file: the mapping holds the file as it is. */
    const char *at = memmem (bytes, len, ti->data, ti->nbytes);
    g_assert_nonnull (at);
    guint16 inf = GUINT16_TO_LE (0x7c00);
    memcpy (bytes + (at - bytes) + 2 * 5, &inf, 2);
    g_autofree char *p = g_build_filename (tmpdir, "inf16.safetensors", NULL);
    g_assert_true (g_file_set_contents (p, bytes, len, NULL));
    cony_test_expect_cnn_refused (p, CONY_ERROR_INVALID, "embeddings.2.weight", "non-finite");
  }
  /* PCA of the wrong size. */
  {
    TensorSet s = read_set ("small.safetensors");
    ((gsize *) s.shapes->pdata[set_find (&s, "pca_means")])[0] = 64;
    g_autofree char *p = write_set (&s, "badpca.safetensors", NULL);
    cony_test_expect_cnn_refused (p, CONY_ERROR_SHAPE, "pca_means", NULL);
    set_free (&s);
  }
  /* Truncated file. */
  {
    g_autofree char *src = cony_test_golden_path ("cnn", "small.safetensors");
    g_autofree char *contents = NULL;
    gsize len;
    g_assert_true (g_file_get_contents (src, &contents, &len, NULL));
    g_autofree char *p = g_build_filename (tmpdir, "trunc.safetensors", NULL);
    g_assert_true (g_file_set_contents (p, contents, len / 2, NULL));
    GError *error = NULL;
    g_assert_null (cony_cnn_load (p, &error));
    g_assert_error (error, CONY_ERROR, CONY_ERROR_FORMAT);
    g_clear_error (&error);
  }
}

static void
test_separate_pca_and_random (void)
{
  /* The PCA from another file. */
  g_autoptr (ConyCnn) cnn = load_model ("small.safetensors");
  TensorSet s = read_set ("small.safetensors");
  TensorSet pca = { g_ptr_array_new_with_free_func (g_free),
    g_ptr_array_new_with_free_func (g_free), g_array_new (FALSE, FALSE, sizeof (int)),
    g_ptr_array_new_with_free_func (g_free) };
  const char *names[] = { "pca_eigen_vectors", "pca_means" };
  for (int k = 0; k < 2; k++) {
    int i = set_find (&s, names[k]);
    g_ptr_array_add (pca.names, g_strdup (k == 0 ? "pproc.pca_eigen_vectors" : "pproc.pca_means"));
    g_ptr_array_add (pca.data, g_steal_pointer (&s.data->pdata[i]));
    int nd = k == 0 ? 2 : 2;
    g_array_append_val (pca.ndims, nd);
    gsize *sh = g_new0 (gsize, 8);
    sh[0] = 128;
    sh[1] = k == 0 ? 128 : 1; /* pproc.pca_means is (128, 1) in torchvggish */
    g_ptr_array_add (pca.shapes, sh);
  }
  g_autofree char *p = write_set (&pca, "pca.safetensors", NULL);
  g_autoptr (ConyCnn) odd = load_model ("odd.safetensors");
  GError *error = NULL;
  g_assert_false (cony_cnn_load_pca (odd, p, &error)); /* 10-d model, 128-d PCA */
  g_assert_error (error, CONY_ERROR, CONY_ERROR_SHAPE);
  g_clear_error (&error);
  g_assert_true (cony_cnn_load_pca (cnn, p, &error));
  g_assert_no_error (error);
  g_autoptr (ConyNpyArray) emb = cony_test_load_golden_npy ("cnn", "small_expected.npy");
  g_autoptr (ConyNpyArray) tf = cony_test_load_golden_npy ("cnn", "small_pp_tf.npy");
  float out[4 * 128];
  g_assert_true (cony_cnn_postprocess (cnn, CONY_CNN_POSTPROCESS_TF, emb->data, 4, out, &error));
  g_assert_cmpmem (out, sizeof out, tf->data, sizeof out);
  set_free (&s);
  set_free (&pca);

  /* The full-size layout's parameter count; a tiny random net runs. */
  g_autoptr (ConyCnn) r = cony_cnn_new_random ("4 M 8 M | 16 8", 16, 8, 1, 1, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (cony_cnn_get_output_size (r), ==, 8);
  g_assert_cmpuint (cony_cnn_get_n_params (r), ==,
      4 * 9 + 4 + 8 * 4 * 9 + 8 + 4 * 2 * 8 * 16 + 16 + 16 * 8 + 8);
  float in[16 * 8], o8[8];
  for (int i = 0; i < 16 * 8; i++)
    in[i] = sinf (i * 0.37f);
  cony_cnn_forward (r, in, o8);
  for (int i = 0; i < 8; i++)
    g_assert_true (isfinite (o8[i]));
  g_assert_null (cony_cnn_new_random ("4 X | 3", 16, 8, 1, 1, &error));
  g_assert_error (error, CONY_ERROR, CONY_ERROR_INVALID);
  g_clear_error (&error);
  /* Absurd sizes are refused, not allocated. */
  g_assert_null (cony_cnn_new_random ("4 | 3", 40000, 40000, 1, 1, &error));
  g_assert_error (error, CONY_ERROR, CONY_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_null (
      cony_cnn_new_random ("64 M M M M M M M M M M M M | 3", 30000, 30000, 1, 1, &error));
  cony_test_expect_error (&error, CONY_ERROR_INVALID, "1 GiB", NULL);
}

/* The full-size network with converted official weights, when present
 * (CONY_VGGISH_MODEL, else models/vggish.safetensors): VGGish's smoke test, a
 * 3 s 1 kHz sine at 16 kHz, 3 examples of 96 frames (hop 96), checked on the
 * mean and std of the embeddings with rtol 0.1 (values from vggish.md). */
static void
test_official_vggish (void)
{
  const char *env = g_getenv ("CONY_VGGISH_MODEL");
  g_autofree char *path = env
      ? g_strdup (env)
      : g_build_filename (g_getenv ("CONY_SOURCE_ROOT"), "models", "vggish.safetensors", NULL);
  if (!g_file_test (path, G_FILE_TEST_EXISTS)) {
    g_test_skip (
        "no converted official VGGish (set CONY_VGGISH_MODEL or add models/vggish.safetensors)");
    return;
  }
  GError *error = NULL;
  g_autoptr (ConyCnn) cnn = cony_cnn_load (path, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (cony_cnn_get_n_params (cnn), ==, 72141184);
  ConyMelConfig c;
  cony_mel_config_init_vggish (&c);
  g_autoptr (ConyMel) mel = cony_mel_new (&c, &error);
  g_assert_no_error (error);
  gsize n = 3 * 16000, frames = 0;
  g_autofree float *x = g_new (float, n);
  for (gsize i = 0; i < n; i++)
    x[i] = (float) sin (2 * G_PI * 1000.0 * i / 16000.0);
  g_autofree float *y = cony_mel_compute (mel, x, n, &frames);
  g_assert_cmpuint (frames, ==, 298);
  float emb[3 * 128], pp[3 * 128];
  for (int k = 0; k < 3; k++)
    cony_cnn_forward (cnn, y + k * 96 * 64, emb + k * 128);
  double mean = 0, var = 0;
  for (int i = 0; i < 384; i++)
    mean += emb[i] / 384.0;
  for (int i = 0; i < 384; i++)
    var += (emb[i] - mean) * (emb[i] - mean) / 384.0;
  gboolean relu = cony_cnn_get_final_relu (cnn);
  double want_mean = relu ? 0.131 : 0.000657, want_std = relu ? 0.238 : 0.343;
  g_test_message ("embedding mean %.6f std %.4f (expected %.6f %.4f)", mean, sqrt (var), want_mean,
      want_std);
  g_assert_cmpfloat (fabs (mean - want_mean), <=, 0.1 * fabs (want_mean));
  g_assert_cmpfloat (fabs (sqrt (var) - want_std), <=, 0.1 * want_std);
  if (cony_cnn_has_pca (cnn)) {
    g_assert_true (cony_cnn_postprocess (cnn, CONY_CNN_POSTPROCESS_TF, emb, 3, pp, &error));
    double pm = 0, pv = 0;
    for (int i = 0; i < 384; i++)
      pm += pp[i] / 384.0;
    for (int i = 0; i < 384; i++)
      pv += (pp[i] - pm) * (pp[i] - pm) / 384.0;
    double wm = relu ? 123.0 : 126.0, ws = relu ? 75.0 : 89.3;
    g_test_message ("postprocessed mean %.2f std %.2f (expected %.1f %.1f)", pm, sqrt (pv), wm, ws);
    g_assert_cmpfloat (fabs (pm - wm), <=, 0.1 * wm);
    g_assert_cmpfloat (fabs (sqrt (pv) - ws), <=, 0.1 * ws);
  }
}

/* Winograd F(2x2) and F(4x4) (and the AUTO mix) agree with im2col on maps
 * with odd heights and widths (partial output tiles at the bottom and right
 * edges), odd channel counts, and maps smaller than one tile; the 16- and
 * 32-channel layers take the packed-weight kernel (tile counts not multiples
 * of its 6-row blocks), the others OpenBLAS. */
static void
test_conv_algorithms_odd_sizes (void)
{
  static const guint geo[][3] = { { 11, 7, 3 }, { 6, 10, 2 }, { 2, 3, 5 }, { 17, 13, 1 },
    { 9, 9, 17 } };
  static const ConyCnnConvAlgorithm algos[] = { CONY_CNN_CONV_WINOGRAD, CONY_CNN_CONV_WINOGRAD4,
    CONY_CNN_CONV_AUTO };
  for (guint g = 0; g < G_N_ELEMENTS (geo); g++) {
    GError *error = NULL;
    guint h = geo[g][0], w = geo[g][1], c = geo[g][2];
    g_autoptr (ConyCnn) cnn = cony_cnn_new_random ("5 19 M 16 32 | 9", h, w, c, 3 + g, &error);
    g_assert_no_error (error);
    gsize n = (gsize) h * w * c;
    g_autofree float *in = g_new (float, n);
    for (gsize i = 0; i < n; i++)
      in[i] = cosf (i * 1.3f) + 0.2f;
    float a[9], b[9];
    cony_cnn_set_conv_algorithm (cnn, CONY_CNN_CONV_IM2COL);
    cony_cnn_forward (cnn, in, a);
    gboolean nonzero = FALSE;
    for (int i = 0; i < 9; i++)
      nonzero |= a[i] != 0.0f;
    g_assert_true (nonzero);
    for (guint k = 0; k < G_N_ELEMENTS (algos); k++) {
      cony_cnn_set_conv_algorithm (cnn, algos[k]);
      g_assert_cmpint (cony_cnn_get_conv_algorithm (cnn), ==, algos[k]);
      cony_cnn_forward (cnn, in, b);
      double e = cony_test_rel_err (b, a, 9);
      g_test_message ("%ux%ux%u algorithm %d: %.2e relative to im2col", h, w, c, algos[k], e);
      g_assert_cmpfloat (e, <, 1e-5);
    }
  }
}

/* F16 FC weights from a file: kept in F16, same function as torch on the
 * F16-rounded weights, and the same as their exact F32 expansion. */
static void
fc_f16_golden (void)
{
  g_autoptr (ConyCnn) cnn = load_model ("small_f16.safetensors");
  g_autoptr (ConyNpyArray) x = cony_test_load_golden_npy ("cnn", "small_input.npy");
  g_autoptr (ConyNpyArray) want = cony_test_load_golden_npy ("cnn", "small_f16_expected.npy");
  g_autoptr (ConyNpyArray) want32 = cony_test_load_golden_npy ("cnn", "small_expected.npy");
  g_assert_true (cony_cnn_get_fc_f16 (cnn));
  g_autofree char *desc = cony_cnn_describe (cnn);
  g_assert_nonnull (strstr (desc, "fc 768 -> 32 + ReLU (F16 weights)"));
  gsize n = x->shape[0];
  g_autofree float *out = g_new (float, n * 128), *batch = g_new (float, n * 128);
  g_autofree float *out32 = g_new (float, n * 128);
  for (gsize k = 0; k < n; k++)
    cony_cnn_forward (cnn, x->data + k * 96 * 64, out + k * 128);
  double e16 = cony_test_rel_err (out, want->data, n * 128);
  /* The F16 golden really is another function than the F32 one. */
  double e_other = cony_test_rel_err (want->data, want32->data, n * 128);
  g_test_message ("F16 weights: %.2e relative to torch; F16 vs F32 goldens differ by %.2e", e16,
      e_other);
  g_assert_cmpfloat (e16, <, 1e-5);
  g_assert_cmpfloat (e_other, >, 1e-5);
  cony_cnn_forward_batch (cnn, x->data, n, batch);
  g_assert_cmpfloat (cony_test_rel_err (batch, want->data, n * 128), <, 1e-5);

  GError *error = NULL;
  g_assert_true (cony_cnn_set_fc_f16 (cnn, FALSE, &error));
  g_assert_no_error (error);
  g_assert_false (cony_cnn_get_fc_f16 (cnn));
  for (gsize k = 0; k < n; k++)
    cony_cnn_forward (cnn, x->data + k * 96 * 64, out32 + k * 128);
  g_assert_cmpfloat (cony_test_rel_err (out32, out, n * 128), <, 1e-6);
}

/* Random network with odd FC sizes (row counts not a multiple of 4, column
 * counts with 16-, 8- and scalar tails). */
static void
fc_f16_random (void)
{
  GError *error = NULL;
  g_autoptr (ConyCnn) cnn = cony_cnn_new_random ("5 M 7 | 37 13 7", 9, 7, 3, 11, &error);
  g_assert_no_error (error);
  const gsize in_size = 9 * 7 * 3, nb = 5;
  float x[5 * 9 * 7 * 3];
  for (gsize i = 0; i < nb * in_size; i++)
    x[i] = sinf (i * 0.71f) + 0.3f;
  float a[5 * 7], b[5 * 7], c[5 * 7], d[5 * 7], e[5 * 7];
  cony_cnn_forward_batch (cnn, x, nb, a);
  g_assert_false (cony_cnn_get_fc_f16 (cnn));
  g_assert_true (cony_cnn_set_fc_f16 (cnn, TRUE, &error));
  g_assert_no_error (error);
  g_assert_true (cony_cnn_get_fc_f16 (cnn));
  for (gsize k = 0; k < nb; k++)
    cony_cnn_forward (cnn, x + k * in_size, b + k * 7);
  cony_cnn_forward_batch (cnn, x, nb, c);
  /* Rounding the weights changed the function a little. */
  double er = cony_test_rel_err (b, a, nb * 7);
  g_test_message ("F16-rounded FC weights: %.2e relative to F32", er);
  g_assert_cmpfloat (er, >, 0.0);
  g_assert_cmpfloat (er, <, 5e-3);
  g_assert_cmpfloat (cony_test_rel_err (c, b, nb * 7), <, 1e-6); /* batch == one by one */
  /* Expanded to F32: the same function. */
  g_assert_true (cony_cnn_set_fc_f16 (cnn, FALSE, &error));
  g_assert_false (cony_cnn_get_fc_f16 (cnn));
  cony_cnn_forward_batch (cnn, x, nb, d);
  g_assert_cmpfloat (cony_test_rel_err (d, b, nb * 7), <, 1e-6);
  /* F16 -> F32 -> F16 is exact: the same values as the first F16 run. */
  g_assert_true (cony_cnn_set_fc_f16 (cnn, TRUE, &error));
  for (gsize k = 0; k < nb; k++)
    cony_cnn_forward (cnn, x + k * in_size, e + k * 7);
  g_assert_cmpmem (e, sizeof e, b, sizeof b);
}

static void
test_fc_f16 (void)
{
  fc_f16_golden ();
  fc_f16_random ();

  /* A weight outside the F16 range: refused, nothing changed. */
  TensorSet s = read_set ("odd.safetensors");
  ((float *) s.data->pdata[set_find (&s, "embeddings.0.weight")])[5] = 1e5f;
  const char *meta[] = { "input_height", "20", "input_width", "12", "input_channels", "2", NULL };
  g_autofree char *path = write_set (&s, "big.safetensors", meta);
  set_free (&s);
  GError *error = NULL;
  g_autoptr (ConyCnn) cnn = cony_cnn_load (path, &error);
  g_assert_no_error (error);
  g_assert_false (cony_cnn_set_fc_f16 (cnn, TRUE, &error));
  cony_test_expect_error (&error, CONY_ERROR_INVALID, "embeddings.0", NULL);
  g_assert_false (cony_cnn_get_fc_f16 (cnn));
}

/* The same with the portable kernels (what CPUs without F16C run). */
static void
test_fc_f16_portable (void)
{
  if (g_test_subprocess ()) {
    fc_f16_golden ();
    fc_f16_random ();
    return;
  }
  cony_test_trap_portable_cnn ();
}

/* forward_batch runs up to 8 examples through each conv layer together (their
 * tiles in one sgemm): 11 examples (8 + 3) equal 11 single calls with every
 * algorithm. */
static void
test_batch_equals_single (void)
{
  GError *error = NULL;
  g_autoptr (ConyCnn) cnn = cony_cnn_new_random ("6 M 20 21 | 9 5", 10, 8, 2, 17, &error);
  g_assert_no_error (error);
  const gsize in_size = 10 * 8 * 2, nb = 11;
  g_autofree float *x = g_new (float, nb *in_size);
  for (gsize i = 0; i < nb * in_size; i++)
    x[i] = sinf (i * 0.37f) * 1.5f + 0.1f;
  static const ConyCnnConvAlgorithm algos[] = { CONY_CNN_CONV_AUTO, CONY_CNN_CONV_IM2COL,
    CONY_CNN_CONV_WINOGRAD, CONY_CNN_CONV_WINOGRAD4 };
  float single[11 * 5], batch[11 * 5];
  for (guint a = 0; a < G_N_ELEMENTS (algos); a++) {
    cony_cnn_set_conv_algorithm (cnn, algos[a]);
    for (gsize k = 0; k < nb; k++)
      cony_cnn_forward (cnn, x + k * in_size, single + k * 5);
    memset (batch, 0, sizeof batch);
    cony_cnn_forward_batch (cnn, x, nb, batch);
    double e = cony_test_rel_err (batch, single, nb * 5);
    g_test_message ("algorithm %d: batch vs single %.2e", algos[a], e);
    g_assert_cmpfloat (e, <, 1e-5);
  }
}

/* center_height = "true": each column (width position and channel) minus its
 * mean over the height before the network; equal to the plain model on inputs
 * centred here, blind to a constant added per column, batched as single, and
 * a value other than true/false is refused by name. */
static void
test_center_height (void)
{
  TensorSet s = read_set ("odd.safetensors");
  static const char *const meta[] = { "input_height", "20", "input_width", "12", "input_channels",
    "2", "final_relu", "true", "center_height", "true", NULL };
  g_autofree char *path = write_set (&s, "centered.safetensors", meta);
  GError *error = NULL;
  g_autoptr (ConyCnn) centred = cony_cnn_load (path, &error);
  g_assert_no_error (error);
  g_autoptr (ConyCnn) plain = load_model ("odd.safetensors");
  g_assert_true (cony_cnn_get_center_height (centred));
  g_assert_false (cony_cnn_get_center_height (plain));
  g_autofree char *desc = cony_cnn_describe (centred);
  g_assert_nonnull (strstr (desc, "center"));

  g_autoptr (ConyNpyArray) x = cony_test_load_golden_npy ("cnn", "odd_input.npy");
  const gsize H = 20, cols = 12 * 2, plane = H * cols, n = 3;
  g_autofree float *xc = g_new (float, n *plane);
  g_autofree float *shifted = g_new (float, n *plane);
  for (gsize e = 0; e < n; e++)
    for (gsize j = 0; j < cols; j++) {
      double m = 0;
      for (gsize h = 0; h < H; h++)
        m += x->data[e * plane + h * cols + j];
      m /= H;
      for (gsize h = 0; h < H; h++) {
        gsize i = e * plane + h * cols + j;
        xc[i] = (float) (x->data[i] - m);
        shifted[i] = x->data[i] + 3.0f * sinf (j * 1.7f + e); /* a level per column */
      }
    }
  float want[3 * 10], got[3 * 10], batch[3 * 10];
  cony_cnn_forward_batch (plain, xc, n, want);
  for (gsize e = 0; e < n; e++)
    cony_cnn_forward (centred, x->data + e * plane, got + e * 10);
  g_assert_cmpfloat (cony_test_rel_err (got, want, 30), <, 1e-5);
  cony_cnn_forward_batch (centred, shifted, n, batch);
  g_assert_cmpfloat (cony_test_rel_err (batch, want, 30), <, 1e-4);
  /* the plain model does see the offsets */
  cony_cnn_forward_batch (plain, shifted, n, batch);
  g_assert_cmpfloat (cony_test_rel_err (batch, want, 30), >, 1e-2);

  static const char *const bad[] = { "input_height", "20", "input_width", "12", "input_channels",
    "2", "center_height", "maybe", NULL };
  g_autofree char *bad_path = write_set (&s, "center-bad.safetensors", bad);
  cony_test_expect_cnn_refused (bad_path, CONY_ERROR_INVALID, "center_height", "maybe");
  set_free (&s);
}

/* "features.00.weight" was taken for layer 0 and then looked up as "features.0.weight":
 * a NULL dereference, found by the CNN fuzzer (tests/fuzz/regressions/cnn/). Only the
 * canonical index is a layer tensor; this one is a stranger. */
static void
test_index_leading_zero (void)
{
  TensorSet s = read_set ("odd.safetensors");
  int i = set_find (&s, "features.0.weight");
  g_free (s.names->pdata[i]);
  s.names->pdata[i] = g_strdup ("features.00.weight");
  g_autofree char *p = write_set (&s, "leading-zero.safetensors", NULL);
  cony_test_expect_cnn_refused (p, CONY_ERROR_INVALID, "unexpected tensor features.00.weight",
      NULL);
  set_free (&s);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp ("cony-cnn-XXXXXX", NULL);
  g_test_add_func ("/cnn/small-forward", test_small_forward);
  g_test_add_func ("/cnn/odd-layout", test_odd_layout);
  g_test_add_func ("/cnn/conv-algorithms-odd-sizes", test_conv_algorithms_odd_sizes);
  g_test_add_func ("/cnn/postprocess", test_postprocess);
  g_test_add_func ("/cnn/bad-models", test_bad_models);
  g_test_add_func ("/cnn/index-leading-zero", test_index_leading_zero);
  g_test_add_func ("/cnn/separate-pca-and-random", test_separate_pca_and_random);
  g_test_add_func ("/cnn/official-vggish", test_official_vggish);
  g_test_add_func ("/cnn/batch-equals-single", test_batch_equals_single);
  g_test_add_func ("/cnn/fc-f16", test_fc_f16);
  g_test_add_func ("/cnn/fc-f16-portable", test_fc_f16_portable);
  g_test_add_func ("/cnn/center-height", test_center_height);
  int ret = g_test_run ();
  if (!cony_test_remove_tmpdir (tmpdir))
    ret = ret ? ret : 1;
  g_free (tmpdir);
  return ret;
}
