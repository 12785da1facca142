#include "testutil.h"
#include "cony/error.h"
#include "cony/safetensors.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

char *
cony_test_golden_path (const char *area, const char *file)
{
  const char *root = g_getenv ("CONY_SOURCE_ROOT");
  g_assert_nonnull (root);
  return g_build_filename (root, "tests", "golden", area, file, NULL);
}

char *
cony_test_model_path (const char *dir, const char *file)
{
  const char *root = g_getenv ("CONY_SOURCE_ROOT");
  g_assert_nonnull (root);
  return g_build_filename (root, "models", dir, file, NULL);
}

ConyNpyArray *
cony_test_load_golden_npy (const char *area, const char *file)
{
  g_autofree char *path = cony_test_golden_path (area, file);
  GError *error = NULL;
  ConyNpyArray *a = cony_npy_load (path, &error);
  g_assert_no_error (error);
  return a;
}

double
cony_test_rel_err (const float *got, const float *want, gsize n)
{
  double num = 0, den = 0;
  for (gsize i = 0; i < n; i++) {
    num = MAX (num, fabs ((double) got[i] - want[i]));
    den = MAX (den, fabs ((double) want[i]));
  }
  return den > 0 ? num / den : num;
}

char *
cony_test_copy_safetensors (const char *src, const char *const *meta)
{
  GError *error = NULL;
  ConySafetensors *st = cony_safetensors_open (src, &error);
  g_assert_no_error (error);
  guint n = cony_safetensors_n_tensors (st);
  const char **names = g_new (const char *, n);
  const float **data = g_new (const float *, n);
  int *ndims = g_new (int, n);
  const gsize **shapes = g_new (const gsize *, n);
  for (guint i = 0; i < n; i++) {
    const ConyTensorInfo *t = cony_safetensors_tensor (st, i);
    g_assert_cmpint (t->dtype, ==, CONY_DTYPE_F32);
    names[i] = t->name;
    data[i] = (const float *) t->data;
    ndims[i] = t->ndim;
    shapes[i] = t->shape;
  }
  char *path = NULL;
  int fd = g_file_open_tmp ("cony-test-XXXXXX.safetensors", &path, &error);
  g_assert_no_error (error);
  close (fd);
  g_assert_true (cony_safetensors_write (path, n, names, data, ndims, shapes, meta, &error));
  g_assert_no_error (error);
  g_free (names);
  g_free (data);
  g_free (ndims);
  g_free (shapes);
  cony_safetensors_close (st);
  return path;
}

ConyCnn *
cony_test_load_golden_cnn (const char *area, const char *file)
{
  g_autofree char *path = cony_test_golden_path (area, file);
  GError *error = NULL;
  ConyCnn *cnn = cony_cnn_load (path, &error);
  g_assert_no_error (error);
  g_assert_nonnull (cnn);
  return cnn;
}

void
cony_test_expect_error (GError **error, int code, const char *needle1, const char *needle2)
{
  g_assert_error (*error, CONY_ERROR, code);
  if (needle1)
    g_assert_nonnull (strstr ((*error)->message, needle1));
  if (needle2)
    g_assert_nonnull (strstr ((*error)->message, needle2));
  g_clear_error (error);
}

void
cony_test_expect_cnn_refused (const char *path, int code, const char *needle1, const char *needle2)
{
  GError *error = NULL;
  ConyCnn *cnn = cony_cnn_load (path, &error);
  g_assert_null (cnn);
  g_assert_error (error, CONY_ERROR, code);
  g_test_message ("refused: %s", error->message);
  g_assert_nonnull (strstr (error->message, path));
  cony_test_expect_error (&error, code, needle1, needle2);
}

gboolean
cony_test_remove_tmpdir (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *f;
  while (d && (f = g_dir_read_name (d))) {
    g_autofree char *p = g_build_filename (dir, f, NULL);
    g_unlink (p);
  }
  return g_rmdir (dir) == 0;
}

/* The current test in a subprocess started through @wrapper (meson's exe wrapper of a
 * cross build, e.g. qemu-aarch64-static: without binfmt_misc an emulated program cannot
 * start itself), as g_test_trap_subprocess starts it; its stdout is a message. */
static void
trap_through (const char *wrapper)
{
  g_auto (GStrv) words = NULL;
  g_autoptr (GError) error = NULL;
  g_assert_true (g_shell_parse_argv (wrapper, NULL, &words, &error));
  g_autofree char *self = g_file_read_link ("/proc/self/exe", &error);
  g_assert_no_error (error);
  g_autoptr (GStrvBuilder) b = g_strv_builder_new ();
  g_strv_builder_addv (b, (const char **) words);
  g_strv_builder_add_many (b, self, "-q", "-p", g_test_get_path (), "--GTestSubprocess", NULL);
  g_auto (GStrv) argv = g_strv_builder_end (b);
  g_autofree char *out = NULL;
  int status;
  g_assert_true (g_spawn_sync (NULL, argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, NULL,
      &status, &error));
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, &error))
    g_test_message ("%s: %s; its output:\n%s", g_test_get_path (), error->message, out);
  g_assert_no_error (error);
}

/* Runs the current test again in a subprocess with @var=@value in its environment. */
static void
trap_with_env (const char *var, const char *value)
{
  const char *wrapper = g_getenv ("MESON_EXE_WRAPPER");
  g_setenv (var, value, TRUE);
  if (wrapper != NULL && *wrapper != '\0') {
    trap_through (wrapper);
    g_unsetenv (var);
    return;
  }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_unsetenv (var);
  g_test_trap_assert_passed ();
}

void
cony_test_trap_portable_cnn (void)
{
  trap_with_env ("CONY_CNN_PORTABLE", "1");
}

void
cony_test_trap_cnn_kernels (const char *name)
{
  trap_with_env ("CONY_CNN_KERNELS", name);
}

double
cony_test_rel_err_floor (const float *got, const float *want, gsize n)
{
  double diff = 0.0, scale = 1e-3;
  for (gsize i = 0; i < n; i++) {
    g_assert_true (isfinite (got[i]));
    diff = fmax (diff, fabs ((double) got[i] - want[i]));
    scale = fmax (scale, fabs ((double) want[i]));
  }
  return diff / scale;
}

float *
cony_test_random_floats (gsize n, double lo, double hi, guint32 seed)
{
  float *x = g_new (float, n);
  GRand *r = g_rand_new_with_seed (seed);
  for (gsize i = 0; i < n; i++)
    x[i] = (float) g_rand_double_range (r, lo, hi);
  g_rand_free (r);
  return x;
}

int
cony_test_softmax (const float *logits, int c, double *probs)
{
  int top = 0;
  for (int i = 1; i < c; i++)
    if (logits[i] > logits[top])
      top = i;
  double sum = 0;
  for (int i = 0; i < c; i++)
    sum += exp ((double) logits[i] - logits[top]);
  for (int i = 0; i < c; i++)
    probs[i] = exp ((double) logits[i] - logits[top]) / sum;
  return top;
}

void
cony_test_fill_normal (GRand *rng, float *x, gsize count, double sd)
{
  for (gsize i = 0; i < count; i++)
    x[i] = (float) (g_rand_double_range (rng, -1.0, 1.0) + g_rand_double_range (rng, -1.0, 1.0)
               + g_rand_double_range (rng, -1.0, 1.0))
        * (float) sd;
}

float *
cony_test_normal_tokens (int T, int d, guint32 seed, double sd)
{
  GRand *rng = g_rand_new_with_seed (seed);
  float *x = g_new (float, (gsize) T *d);
  cony_test_fill_normal (rng, x, (gsize) T * d, sd);
  g_rand_free (rng);
  return x;
}

float *
cony_test_smooth_tokens (int T, int d, guint32 seed, double min_period, double max_period)
{
  GRand *rng = g_rand_new_with_seed (seed);
  float *x = g_new (float, (gsize) T *d);
  for (int c = 0; c < d; c++) {
    double period[3], phase[3];
    for (int i = 0; i < 3; i++) {
      period[i] = g_rand_double_range (rng, min_period, max_period);
      phase[i] = g_rand_double_range (rng, 0.0, 2 * G_PI);
    }
    /* three unit sinusoids have variance 3/2 */
    for (int t = 0; t < T; t++)
      x[(gsize) t * d + c] = (float) ((sin (2 * G_PI * t / period[0] + phase[0])
                                          + sin (2 * G_PI * t / period[1] + phase[1])
                                          + sin (2 * G_PI * t / period[2] + phase[2]))
          / sqrt (1.5));
  }
  g_rand_free (rng);
  return x;
}

glong
cony_test_status_kib (const char *field)
{
  g_autofree char *status = NULL;
  g_assert_true (g_file_get_contents ("/proc/self/status", &status, NULL, NULL));
  g_autofree char *key = g_strconcat ("\n", field, ":", NULL);
  const char *p = strstr (status, key);
  g_assert_nonnull (p);
  return strtol (p + strlen (key), NULL, 10);
}

void
cony_test_reset_peak_rss (void)
{
  FILE *f = fopen ("/proc/self/clear_refs", "w"); /* not g_file_set_contents: it renames */
  g_assert_nonnull (f);
  g_assert_cmpint (fputs ("5", f), >=, 0);
  g_assert_cmpint (fclose (f), ==, 0);
}

char *
cony_test_edit_safetensors (const char *src, ConyTestSafetensorsEdit edit, gpointer user)
{
  g_autofree char *bytes = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (src, &bytes, &len, NULL));
  guint64 hlen = GUINT64_FROM_LE (*(guint64 *) bytes);
  g_autoptr (JsonParser) p = json_parser_new ();
  g_assert_true (json_parser_load_from_data (p, bytes + 8, (gssize) hlen, NULL));
  edit (json_node_get_object (json_parser_get_root (p)), bytes + 8 + hlen, user);
  g_autofree char *header = json_to_string (json_parser_get_root (p), FALSE);
  GString *out = g_string_new (NULL);
  guint64 n = strlen (header), padded = (n + 7) / 8 * 8;
  guint64 le = GUINT64_TO_LE (padded);
  g_string_append_len (out, (const char *) &le, 8);
  g_string_append (out, header);
  for (guint64 i = n; i < padded; i++)
    g_string_append_c (out, ' ');
  g_string_append_len (out, bytes + 8 + hlen, (gssize) (len - 8 - hlen));
  char *path = NULL;
  int fd = g_file_open_tmp ("cony-int8-XXXXXX.safetensors", &path, NULL);
  g_assert_cmpint (fd, >=, 0);
  close (fd);
  g_assert_true (g_file_set_contents (path, out->str, (gssize) out->len, NULL));
  g_string_free (out, TRUE);
  return path;
}

static void
set_quantization (JsonObject *header, char *data, gpointer quant)
{
  JsonObject *meta = json_object_get_object_member (header, "__metadata__");
  if (json_object_has_member (meta, "quantization"))
    json_object_remove_member (meta, "quantization");
  if (quant != NULL)
    json_object_set_string_member (meta, "quantization", quant);
}

char *
cony_test_with_quantization (const char *src, const char *quant)
{
  return cony_test_edit_safetensors (src, set_quantization, (gpointer) quant);
}

char *
cony_test_yamnet_int8 (void)
{
  g_autofree char *src = g_build_filename (g_getenv ("CONY_SOURCE_ROOT"), "models", "yamnet",
      "yamnet.safetensors", NULL);
  g_autofree char *json = cony_test_golden_path ("yamnet", "quantization.json");
  g_autofree char *quant = NULL;
  g_assert_true (g_file_get_contents (json, &quant, NULL, NULL));
  return cony_test_with_quantization (src, g_strstrip (quant));
}
