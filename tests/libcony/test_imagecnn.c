/* CNN engine, image side: 3-channel input, per-channel mean/std normalisation,
 * global average pooling and torchvision-layout VGG weights converted by
 * training/convert_vgg_torchvision.py, against torch float64 goldens
 * (training/gen_imagecnn_golden.py); the metadata errors. */
#include "cony/cnn.h"
#include "cony/error.h"
#include "cony/npy.h"
#include "testutil.h"
#include "cony/safetensors.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

static char *tmpdir;

static ConyCnn *
load_model (const char *file)
{
  return cony_test_load_golden_cnn ("imagecnn", file);
}

/* Runs @name's input through the model with every conv algorithm, one example at a time
 * and batched, and compares with torch. */
static void
check_case (const char *name, guint h, guint w, guint d)
{
  g_autofree char *mf = g_strdup_printf ("%s.safetensors", name);
  g_autofree char *xf = g_strdup_printf ("%s_input.npy", name);
  g_autofree char *yf = g_strdup_printf ("%s_expected.npy", name);
  g_autoptr (ConyCnn) cnn = load_model (mf);
  g_autoptr (ConyNpyArray) x = cony_test_load_golden_npy ("imagecnn", xf);
  g_autoptr (ConyNpyArray) want = cony_test_load_golden_npy ("imagecnn", yf);
  g_autofree char *desc = cony_cnn_describe (cnn);
  g_test_message ("%s:\n%s", name, desc);
  g_assert_cmpuint (cony_cnn_get_input_height (cnn), ==, h);
  g_assert_cmpuint (cony_cnn_get_input_width (cnn), ==, w);
  g_assert_cmpuint (cony_cnn_get_input_channels (cnn), ==, 3);
  g_assert_cmpuint (cony_cnn_get_output_size (cnn), ==, d);
  g_assert_true (cony_cnn_get_normalization (cnn, NULL, NULL));
  gsize n = x->shape[0];
  g_assert_cmpuint (x->ndim, ==, 4);
  g_assert_cmpuint (x->shape[1] * x->shape[2] * x->shape[3], ==, cony_cnn_get_input_size (cnn));
  g_assert_cmpuint (want->shape[0], ==, n);
  g_assert_cmpuint (want->shape[1], ==, d);

  const ConyCnnConvAlgorithm algos[] = { CONY_CNN_CONV_AUTO, CONY_CNN_CONV_IM2COL,
    CONY_CNN_CONV_WINOGRAD, CONY_CNN_CONV_WINOGRAD4 };
  g_autofree float *out = g_new (float, n *d);
  for (guint a = 0; a < G_N_ELEMENTS (algos); a++) {
    cony_cnn_set_conv_algorithm (cnn, algos[a]);
    for (gsize i = 0; i < n; i++)
      cony_cnn_forward (cnn, x->data + i * cony_cnn_get_input_size (cnn), out + i * d);
    double e1 = cony_test_rel_err (out, want->data, n * d);
    memset (out, 0, sizeof (float) * n * d);
    cony_cnn_forward_batch (cnn, x->data, n, out);
    double e2 = cony_test_rel_err (out, want->data, n * d);
    g_test_message ("%s algo %d: rel err single %.2e batch %.2e", name, (int) algos[a], e1, e2);
    g_assert_cmpfloat (e1, <, 1e-5);
    g_assert_cmpfloat (e2, <, 1e-5);
  }
}

static void
test_gap (void)
{
  check_case ("gap", 20, 22, 5);
  g_autoptr (ConyCnn) cnn = load_model ("gap.safetensors");
  g_assert_true (cony_cnn_get_global_pool (cnn));
  const float *mean, *std;
  g_assert_true (cony_cnn_get_normalization (cnn, &mean, &std));
  g_assert_cmpfloat_with_epsilon (mean[1], 0.5f, 1e-7);
  g_assert_cmpfloat_with_epsilon (std[2], 0.3f, 1e-7);
  g_autofree char *desc = cony_cnn_describe (cnn);
  g_assert_nonnull (strstr (desc, "global average pool"));
  g_assert_nonnull (strstr (desc, "features.7 (max-pool)")); /* declared trailing pool */
}

static void
test_torchvision (void)
{
  check_case ("tv", 32, 32, 10);
  g_autoptr (ConyCnn) cnn = load_model ("tv.safetensors");
  g_assert_false (cony_cnn_get_global_pool (cnn));
  g_assert_false (cony_cnn_get_final_relu (cnn));
}

static void
test_torchvision_keep2 (void)
{
  check_case ("tv_keep2", 32, 32, 24);
  g_autoptr (ConyCnn) cnn = load_model ("tv_keep2.safetensors");
  g_assert_true (cony_cnn_get_final_relu (cnn));
}

/* Normalisation is exactly (x - mean) / std: shifting the input of a model by its mean
 * and scaling by std gives the output of the same weights without normalisation. */
static void
test_normalisation_identity (void)
{
  g_autofree char *path = cony_test_golden_path ("imagecnn", "gap.safetensors");
  GError *error = NULL;
  g_autoptr (ConySafetensors) st = cony_safetensors_open (path, &error);
  g_assert_no_error (error);
  guint nt = cony_safetensors_n_tensors (st);
  g_autoptr (GPtrArray) names = g_ptr_array_new ();
  g_autoptr (GPtrArray) data = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GArray) ndims = g_array_new (FALSE, FALSE, sizeof (int));
  g_autoptr (GPtrArray) shapes = g_ptr_array_new ();
  for (guint i = 0; i < nt; i++) {
    const ConyTensorInfo *t = cony_safetensors_tensor (st, i);
    g_ptr_array_add (names, (gpointer) t->name);
    g_ptr_array_add (data, cony_safetensors_get_f32 (st, t->name, t->ndim, t->shape, &error));
    g_assert_no_error (error);
    g_array_append_val (ndims, t->ndim);
    g_ptr_array_add (shapes, (gpointer) t->shape);
  }
  const char *meta[] = { "input_height", "20", "input_width", "22", "input_channels", "3",
    "global_pool", "avg", "trailing_pools", "1", NULL };
  g_autofree char *plain = g_build_filename (tmpdir, "plain.safetensors", NULL);
  g_assert_true (cony_safetensors_write (plain, nt, (const char *const *) names->pdata,
      (const float *const *) data->pdata, (int *) ndims->data, (const gsize *const *) shapes->pdata,
      meta, &error));
  g_assert_no_error (error);
  g_autoptr (ConyCnn) norm = load_model ("gap.safetensors");
  g_autoptr (ConyCnn) raw = cony_cnn_load (plain, &error);
  g_assert_no_error (error);
  g_assert_false (cony_cnn_get_normalization (raw, NULL, NULL));
  g_autoptr (ConyNpyArray) x = cony_test_load_golden_npy ("imagecnn", "gap_input.npy");
  gsize in = cony_cnn_get_input_size (norm);
  const float mean[3] = { 0.4f, 0.5f, 0.3f }, std[3] = { 0.25f, 0.2f, 0.3f };
  g_autofree float *xn = g_new (float, in);
  for (gsize p = 0; p < in; p++)
    xn[p] = (x->data[p] - mean[p % 3]) / std[p % 3];
  float a[5], b[5];
  cony_cnn_forward (norm, x->data, a);
  cony_cnn_forward (raw, xn, b);
  g_assert_cmpfloat (cony_test_rel_err (a, b, 5), <, 1e-6);
}

/* A random network with a "G" layout entry: its FC input is the channel count, so
 * the parameter count does not depend on the input size. */
static void
test_random_gap (void)
{
  GError *error = NULL;
  g_autoptr (ConyCnn) a = cony_cnn_new_random ("4 M 6 G | 5", 8, 8, 3, 7, &error);
  g_assert_no_error (error);
  g_assert_true (cony_cnn_get_global_pool (a));
  g_assert_cmpuint (cony_cnn_get_output_size (a), ==, 5);
  /* FC input is the channel count whatever the input size. */
  g_autoptr (ConyCnn) b = cony_cnn_new_random ("4 M 6 G | 5", 30, 18, 3, 7, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (cony_cnn_get_n_params (a), ==, cony_cnn_get_n_params (b));
}

static char *
write_meta_variant (const char *file, const char *const *meta)
{
  g_autofree char *path = cony_test_golden_path ("imagecnn", "gap.safetensors");
  GError *error = NULL;
  g_autoptr (ConySafetensors) st = cony_safetensors_open (path, &error);
  g_assert_no_error (error);
  guint nt = cony_safetensors_n_tensors (st);
  const char **names = g_new (const char *, nt);
  float **data = g_new (float *, nt);
  int *ndims = g_new (int, nt);
  const gsize **shapes = g_new (const gsize *, nt);
  for (guint i = 0; i < nt; i++) {
    const ConyTensorInfo *t = cony_safetensors_tensor (st, i);
    names[i] = t->name;
    data[i] = cony_safetensors_get_f32 (st, t->name, t->ndim, t->shape, &error);
    ndims[i] = t->ndim;
    shapes[i] = t->shape;
  }
  char *out = g_build_filename (tmpdir, file, NULL);
  g_assert_true (cony_safetensors_write (out, nt, names, (const float *const *) data, ndims, shapes,
      meta, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < nt; i++)
    g_free (data[i]);
  g_free (names);
  g_free (data);
  g_free (ndims);
  g_free (shapes);
  return out;
}

static void
test_bad_metadata (void)
{
#define BASE "input_height", "20", "input_width", "22", "input_channels", "3"
  /* Each refused with the error code and naming the key (or tensor) at fault. */
  static const struct {
    const char *meta[5]; /* after BASE; NULL-terminated */
    int code;
    const char *needle;
  } refused[] = {
    { { "global_pool", "avg", "input_mean", "0.1,0.2", NULL }, CONY_ERROR_INVALID, "input_mean" },
    { { "global_pool", "avg", "input_std", "0.1,0,0.2", NULL }, CONY_ERROR_INVALID, "input_std" },
    { { "global_pool", "avg", "input_mean", "a,b,c", NULL }, CONY_ERROR_INVALID, "input_mean" },
    { { "global_pool", "mean", NULL }, CONY_ERROR_INVALID, "global_pool" },
    { { "global_pool", "avg", "trailing_pools", "x", NULL }, CONY_ERROR_INVALID, "trailing_pools" },
    /* Without the global pool, one trailing pool leaves a 5x5x12 map, not 12 values. */
    { { "trailing_pools", "1", NULL }, CONY_ERROR_SHAPE, "embeddings.0.weight" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (refused); i++) {
    const char *meta[12] = { BASE };
    for (guint k = 0; refused[i].meta[k] != NULL; k++)
      meta[6 + k] = refused[i].meta[k];
    g_autofree char *name = g_strdup_printf ("m%u.safetensors", i + 1);
    g_autofree char *p = write_meta_variant (name, meta);
    cony_test_expect_cnn_refused (p, refused[i].code, refused[i].needle, NULL);
  }
  /* Too many trailing pools for a 20x22 input. */
  const char *m7[] = { BASE, "global_pool", "avg", "trailing_pools", "5", NULL };
  g_autofree char *p7 = write_meta_variant ("m7.safetensors", m7);
  GError *error = NULL;
  g_assert_null (cony_cnn_load (p7, &error));
  g_assert_nonnull (error);
  g_test_message ("refused: %s", error->message);
  g_clear_error (&error);
  /* One value for all channels is fine. */
  const char *m8[] = { BASE, "global_pool", "avg", "trailing_pools", "1", "input_mean", "0.5",
    "input_std", "2", NULL };
  g_autofree char *p8 = write_meta_variant ("m8.safetensors", m8);
  g_autoptr (ConyCnn) ok = cony_cnn_load (p8, &error);
  g_assert_no_error (error);
  const float *mean, *std;
  g_assert_true (cony_cnn_get_normalization (ok, &mean, &std));
  g_assert_cmpfloat (mean[2], ==, 0.5f);
  g_assert_cmpfloat (std[0], ==, 2.0f);
#undef BASE
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp ("cony-imagecnn-XXXXXX", NULL);
  g_test_add_func ("/imagecnn/gap", test_gap);
  g_test_add_func ("/imagecnn/torchvision", test_torchvision);
  g_test_add_func ("/imagecnn/torchvision-keep2", test_torchvision_keep2);
  g_test_add_func ("/imagecnn/normalisation-identity", test_normalisation_identity);
  g_test_add_func ("/imagecnn/random-gap", test_random_gap);
  g_test_add_func ("/imagecnn/bad-metadata", test_bad_metadata);
  int ret = g_test_run ();
  if (!cony_test_remove_tmpdir (tmpdir))
    ret = ret ? ret : 1;
  g_free (tmpdir);
  return ret;
}
