/* npy and safetensors: round trips and the errors bad files must give. */
#include "cony/error.h"
#include "cony/labels.h"
#include "cony/modelpath.h"
#include "cony/npy.h"
#include "cony/safetensors.h"
#include "testutil.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

static char *tmpdir;

static char *
tmp_path (const char *name)
{
  return g_build_filename (tmpdir, name, NULL);
}

static void
test_npy_round_trip (void)
{
  g_autofree char *path = tmp_path ("a.npy");
  float data[6] = { 1, 2, 3, 4, 5, -6.5f };
  gsize shape[2] = { 2, 3 };
  GError *error = NULL;
  g_assert_true (cony_npy_save (path, data, 2, shape, &error));
  g_assert_no_error (error);
  g_autoptr (ConyNpyArray) a = cony_npy_load (path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (a->ndim, ==, 2);
  g_assert_cmpuint (a->shape[0], ==, 2);
  g_assert_cmpuint (a->shape[1], ==, 3);
  g_assert_cmpmem (a->data, sizeof data, data, sizeof data);

  gsize shape1[1] = { 6 };
  g_assert_true (cony_npy_save (path, data, 1, shape1, &error));
  g_autoptr (ConyNpyArray) b = cony_npy_load (path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (b->ndim, ==, 1);
  g_assert_cmpuint (b->shape[0], ==, 6);
}

static void
write_bytes (const char *path, const void *bytes, gsize len)
{
  GError *error = NULL;
  g_assert_true (g_file_set_contents (path, bytes, len, &error));
}

static void
test_npy_errors (void)
{
  g_autofree char *path = tmp_path ("bad.npy");
  GError *error = NULL;

  g_assert_null (cony_npy_load ("/nonexistent/x.npy", &error));
  g_assert_nonnull (error);
  g_clear_error (&error);

  write_bytes (path, "hello world", 11);
  g_assert_null (cony_npy_load (path, &error));
  cony_test_expect_error (&error, CONY_ERROR_FORMAT, path, NULL);

  /* A valid header promising more data than there is. */
  float data[4] = { 0 };
  gsize shape[1] = { 4 };
  g_assert_true (cony_npy_save (path, data, 1, shape, &error));
  g_autofree char *contents = NULL;
  gsize len;
  g_assert_true (g_file_get_contents (path, &contents, &len, NULL));
  write_bytes (path, contents, len - 3);
  g_assert_null (cony_npy_load (path, &error));
  cony_test_expect_error (&error, CONY_ERROR_FORMAT, "truncated", NULL);

  /* Integer dtype is refused by name. */
  const char *hdr = "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }";
  GString *s = g_string_new_len ("\x93NUMPY\x01\x00", 8);
  g_string_append_c (s, (char) strlen (hdr));
  g_string_append_c (s, 0);
  g_string_append (s, hdr);
  g_string_append_len (s, "\0\0\0\0", 4);
  write_bytes (path, s->str, s->len);
  g_string_free (s, TRUE);
  g_assert_null (cony_npy_load (path, &error));
  cony_test_expect_error (&error, CONY_ERROR_SHAPE, "float32", NULL);
}

/* Writes a float32 .npy file with header shape @shape (its text) and @n_values zeros. */
static void
write_npy_shape (const char *path, const char *shape, gsize n_values)
{
  g_autofree char
      *hdr = g_strdup_printf ("{'descr': '<f4', 'fortran_order': False, 'shape': %s, }\n", shape);
  GString *s = g_string_new_len ("\x93NUMPY\x01\x00", 8);
  g_string_append_c (s, (char) (strlen (hdr) & 0xff));
  g_string_append_c (s, (char) (strlen (hdr) >> 8));
  g_string_append (s, hdr);
  for (gsize i = 0; i < 4 * n_values; i++)
    g_string_append_c (s, 0);
  write_bytes (path, s->str, s->len);
  g_string_free (s, TRUE);
}

/* Shapes that do not describe the data are refused, naming the file and the field:
 * the fuzzer's reproducers (tests/fuzz/regressions/npy/) read past the buffer before. */
static void
test_npy_hostile_shapes (void)
{
  g_autofree char *path = tmp_path ("shape.npy");
  struct {
    const char *shape;
    gsize n_values;
  } cases[] = {
    { "(-1, -1)", 1 },                    /* strtoull took -1 as 2^64 - 1; product 1 */
    { "(4611686018427387905, 4)", 4 },    /* element product wraps to 4 */
    { "(99999999999999999999999,)", 1 },  /* beyond 64 bits */
    { "(4294967296, 4294967296, 2)", 0 }, /* 2^65 elements */
    { "(+3,)", 3 },                       /* not a plain non-negative integer */
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    write_npy_shape (path, cases[i].shape, cases[i].n_values);
    GError *error = NULL;
    g_assert_null (cony_npy_load (path, &error));
    cony_test_expect_error (&error, CONY_ERROR_FORMAT, path, "'shape'");
  }
  /* An empty array and a plain one still load. */
  write_npy_shape (path, "(0, 6)", 0);
  g_autoptr (ConyNpyArray) e = cony_npy_load (path, NULL);
  g_assert_nonnull (e);
  g_assert_cmpuint (cony_npy_array_numel (e), ==, 0);
  write_npy_shape (path, "(2, 3)", 6);
  g_autoptr (ConyNpyArray) a = cony_npy_load (path, NULL);
  g_assert_nonnull (a);
  g_assert_cmpuint (cony_npy_array_numel (a), ==, 6);
}

static void
test_labels (void)
{
  guint n = 0;
  GError *error = NULL;
  g_auto (GStrv) l = cony_labels_parse ("speech\r\nmusic\nnoise\n", 20, "x.txt", &n, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (n, ==, 3);
  g_assert_cmpstr (l[0], ==, "speech");
  g_assert_cmpstr (l[1], ==, "music");
  g_assert_cmpstr (l[2], ==, "noise");
  g_assert_null (l[3]);
  g_auto (GStrv) one = cony_labels_parse ("a", 1, "x.txt", &n, NULL, &error);
  g_assert_cmpuint (n, ==, 1);
  g_assert_cmpstr (one[0], ==, "a"); /* no final newline: the last label still counts */
  g_assert_null (one[1]);

  /* Not text, by line (a NUL used to cut the label there): the one label check refuses */
  static const struct {
    const char *text;
    gsize len;
    const char *where, *what;
  } bad[] = {
    { "speech\nmu\0sic\n", 13, "x.txt, line 2: the label \"mu\" ", "a NUL" },
    { "a\nb\n\xc3x\n", 7, "line 3", "not UTF-8 at byte 0" },
    { "a\nb\xed\xa0\x80x\n", 8, "line 2", "not UTF-8 at byte 1" }, /* a lone surrogate */
    { "a\nb\x1b[31m\n", 9, "line 2", "control character U+001B at byte 1" },
    { "a\rb\n", 4, "line 1", "control character U+000D" },
    { "a\xc2\x85"
      "b",
        4, "line 1", "control character U+0085" },
    { "a\n\nb\n", 5, "line 2", "is empty" },
    { "\t0.5\n", 5, "line 1", "is empty" },
    { "a\xef\xbf\xbe", 4, "line 1", "noncharacter U+FFFE" },
    { "a\tx\n", 4, "line 1", "'x', expected a number from 0 to 1" },
    { "a\t0.5\tb\n", 8, "line 1", "expected a number" },
    { "a\t1.5", 5, "line 1", "expected a number" },
    { "a\t0.5\0", 6, "line 1", "expected a number" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_assert_null (cony_labels_parse (bad[i].text, bad[i].len, "x.txt", &n, NULL, &error));
    g_test_message ("refused: %s", error->message);
    cony_test_expect_error (&error, CONY_ERROR_FORMAT, bad[i].where, bad[i].what);
  }

  /* Quirks, documented in labels.h: a BOM is skipped, blank lines at the end ignored,
   * spaces around a threshold allowed, the label's own spaces kept. */
  const char quirks[] = "\xef\xbb\xbf"
                        "dog\t0.5\ncat\t 0.25\n a b \t0.75 \r\nowl\n\n\r\n";
  double *thr = NULL;
  g_auto (GStrv) q = cony_labels_parse (quirks, sizeof quirks - 1, "q.txt", &n, &thr, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (n, ==, 4);
  g_assert_cmpstr (q[0], ==, "dog");
  g_assert_cmpstr (q[1], ==, "cat");
  g_assert_cmpstr (q[2], ==, " a b ");
  g_assert_cmpstr (q[3], ==, "owl");
  g_assert_cmpfloat (thr[0], ==, 0.5);
  g_assert_cmpfloat (thr[1], ==, 0.25);
  g_assert_cmpfloat (thr[2], ==, 0.75);
  g_assert_true (isnan (thr[3]));
  g_free (thr);

  /* JSON sources: json-glib cuts "\u0000", so it is marked first; "\\u0000" is no NUL */
  g_autofree char *marked = cony_json_mark_nul ("[\"a\\u0000b\", \"c\\\\u0000\", \"\\\\\"]");
  g_assert_cmpstr (marked, ==, "[\"a\\ufdd0b\", \"c\\\\u0000\", \"\\\\\"]");
  g_assert_false (cony_label_check ("a\xef\xb7\x90"
                                    "b",
      5, &error));
  cony_test_expect_error (&error, CONY_ERROR_FORMAT, "\"a", "a NUL (\\u0000, or U+FDD0) at byte 1");
  g_assert_true (cony_label_check ("Émile's café 🐶", strlen ("Émile's café 🐶"), &error));
  g_assert_no_error (error);

  g_assert_null (cony_labels_load ("/nonexistent/labels.txt", &n, NULL, &error));
  cony_test_expect_error (&error, CONY_ERROR_IO, "/nonexistent/labels.txt", NULL);
}

static char *
write_small_safetensors (void)
{
  char *path = tmp_path ("m.safetensors");
  float w[6] = { 1, 2, 3, 4, 5, 6 }, b[2] = { 0.5f, -0.5f };
  gsize ws[2] = { 2, 3 }, bs[1] = { 2 };
  const char *names[] = { "w", "b" };
  const float *data[] = { w, b };
  int ndims[] = { 2, 1 };
  const gsize *shapes[] = { ws, bs };
  const char *meta[] = { "config", "{\"d\": 3}", NULL };
  GError *error = NULL;
  g_assert_true (cony_safetensors_write (path, 2, names, data, ndims, shapes, meta, &error));
  g_assert_no_error (error);
  return path;
}

static void
test_safetensors_round_trip (void)
{
  g_autofree char *path = write_small_safetensors ();
  GError *error = NULL;
  g_autoptr (ConySafetensors) st = cony_safetensors_open (path, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (cony_safetensors_n_tensors (st), ==, 2);
  g_assert_cmpstr (cony_safetensors_metadata (st, "config"), ==, "{\"d\": 3}");
  gsize ws[2] = { 2, 3 };
  g_autofree float *w = cony_safetensors_get_f32 (st, "w", 2, ws, &error);
  g_assert_no_error (error);
  g_assert_cmpfloat (w[5], ==, 6.0f);

  gsize wrong[2] = { 3, 2 };
  g_assert_null (cony_safetensors_get_f32 (st, "w", 2, wrong, &error));
  cony_test_expect_error (&error, CONY_ERROR_SHAPE, "'w'", "(3, 2)");

  g_assert_null (cony_safetensors_get_f32 (st, "missing", 2, ws, &error));
  cony_test_expect_error (&error, CONY_ERROR_MISSING, "missing", NULL);
}

/* A relative model name: as given when it exists here, else the first directory of
 * CONY_MODEL_PATH holding it (empty entries skipped), then the installed models; found
 * nowhere, an error naming every place looked in. cony_safetensors_open() follows it. */
static void
test_model_path (void)
{
  g_autofree char *file = write_small_safetensors (); /* tmpdir/m.safetensors */
  g_autofree char *sub = tmp_path ("sub");
  g_assert_cmpint (g_mkdir_with_parents (sub, 0755), ==, 0);
  g_autofree char *in_sub = g_build_filename (sub, "m.safetensors", NULL);
  g_autofree gchar *bytes = NULL;
  gsize n = 0;
  g_assert_true (g_file_get_contents (file, &bytes, &n, NULL));
  g_assert_true (g_file_set_contents (in_sub, bytes, (gssize) n, NULL));
  GError *error = NULL;

  g_autofree char *env = g_strdup_printf ("::/nonexistent:%s:%s", sub, tmpdir);
  g_setenv ("CONY_MODEL_PATH", env, TRUE);
  g_autofree char *found = cony_model_path_find ("m.safetensors", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (found, ==, in_sub); /* sub comes before tmpdir */
  g_autofree char *abs = cony_model_path_find (file, &error);
  g_assert_cmpstr (abs, ==, file);
  g_auto (GStrv) dirs = cony_model_path_dirs ();
  g_assert_cmpuint (g_strv_length (dirs), ==, 4);
  g_assert_cmpstr (dirs[0], ==, "/nonexistent");
  g_assert_cmpstr (dirs[3], ==, cony_model_path_datadir ());
  g_assert_true (g_str_has_suffix (cony_model_path_datadir (), "/gst-cony/models"));

  g_autoptr (ConySafetensors) st = cony_safetensors_open ("m.safetensors", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (cony_safetensors_path (st), ==, in_sub);

  g_assert_null (cony_model_path_find ("no/such.safetensors", &error));
  cony_test_expect_error (&error, CONY_ERROR_IO, "no/such.safetensors: no such model file", sub);
  g_assert_null (cony_safetensors_open ("no/such.safetensors", &error));
  cony_test_expect_error (&error, CONY_ERROR_IO, cony_model_path_datadir (), NULL);
  g_unsetenv ("CONY_MODEL_PATH");
  g_assert_null (cony_model_path_find ("m.safetensors", &error));
  cony_test_expect_error (&error, CONY_ERROR_IO, "looked in the current directory", NULL);
}

/* Opens @path and, where that works, reads its 2 x 3 tensor "w" (which may fail into
 * @error: a cut inside the data section must still be caught by the tensor offsets).
 * Returns whether it opened. */
static gboolean
open_and_read (const char *path, GError **error)
{
  gsize ws[2] = { 2, 3 };
  ConySafetensors *st = cony_safetensors_open (path, error);
  if (st == NULL)
    return FALSE;
  g_free (cony_safetensors_get_f32 (st, "w", 2, ws, error));
  cony_safetensors_close (st);
  return TRUE;
}

/* Every truncation and every single-byte corruption either loads or fails with an
 * error; none may crash or read out of bounds (run under valgrind/ASan to see). */
static void
test_safetensors_corruption (void)
{
  g_autofree char *path = write_small_safetensors ();
  g_autofree char *bad = tmp_path ("bad.safetensors");
  g_autofree guint8 *orig = NULL;
  gsize len;
  g_assert_true (g_file_get_contents (path, (char **) &orig, &len, NULL));

  for (gsize cut = 0; cut < len; cut++) {
    write_bytes (bad, orig, cut);
    GError *error = NULL;
    if (!open_and_read (bad, &error))
      g_assert_nonnull (error);
    g_clear_error (&error);
  }
  g_autofree guint8 *copy = g_memdup2 (orig, len);
  for (gsize i = 0; i < len; i++) {
    for (int flip = 1; flip < 256; flip <<= 2) {
      memcpy (copy, orig, len);
      copy[i] ^= flip;
      write_bytes (bad, copy, len);
      GError *error = NULL;
      if (!open_and_read (bad, &error)) {
        g_assert_nonnull (error);
        g_assert_nonnull (strstr (error->message, bad));
      }
      g_clear_error (&error);
    }
  }
}

static void
test_safetensors_nan_refused (void)
{
  g_autofree char *path = tmp_path ("nan.safetensors");
  float w[2] = { 1.0f, NAN };
  gsize ws[1] = { 2 };
  const char *names[] = { "w" };
  const float *data[] = { w };
  int ndims[] = { 1 };
  const gsize *shapes[] = { ws };
  GError *error = NULL;
  g_assert_true (cony_safetensors_write (path, 1, names, data, ndims, shapes, NULL, &error));
  g_autoptr (ConySafetensors) st = cony_safetensors_open (path, &error);
  g_assert_no_error (error);
  g_assert_null (cony_safetensors_get_f32 (st, "w", 1, ws, &error));
  cony_test_expect_error (&error, CONY_ERROR_INVALID, "non-finite", NULL);
}

/* A safetensors file with @header as its JSON header and @data_len zero bytes of data. */
static void
write_raw_safetensors (const char *path, const char *header, guint data_len)
{
  guint64 hlen = GUINT64_TO_LE (strlen (header));
  GByteArray *b = g_byte_array_new ();
  g_byte_array_append (b, (const guint8 *) &hlen, 8);
  g_byte_array_append (b, (const guint8 *) header, strlen (header));
  g_byte_array_set_size (b, 8 + strlen (header) + data_len);
  memset (b->data + 8 + strlen (header), 0, data_len);
  write_bytes (path, b->data, b->len);
  g_byte_array_unref (b);
}

/* data_offsets entries that are not integers are refused by name: an array there made
 * json-glib fail an assertion (a GLib critical, fatal in tests), the fuzzer's first
 * safetensors finding (tests/fuzz/regressions/safetensors/). */
static void
test_safetensors_offsets_not_integers (void)
{
  g_autofree char *path = tmp_path ("offsets.safetensors");
  const char *offsets[] = { "[[0], 4]", "[0, {\"a\": 1}]", "[0.5, 4.9]", "[0, null]", "[0]",
    "[\"0\", \"4\"]" };
  for (guint i = 0; i < G_N_ELEMENTS (offsets); i++) {
    g_autofree char *header =
        g_strdup_printf ("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": %s}}",
            offsets[i]);
    write_raw_safetensors (path, header, 4);
    GError *error = NULL;
    g_assert_null (cony_safetensors_open (path, &error));
    cony_test_expect_error (&error, CONY_ERROR_FORMAT, path,
        "tensor 'w': data_offsets must be 2 integers");
  }
}

/* Two tensors sharing bytes are refused with both names (the format forbids it); tensors
 * that touch, and empty tensors anywhere, are fine. */
static void
test_safetensors_overlap (void)
{
  g_autofree char *path = tmp_path ("overlap.safetensors");
  const char *bad[] = { "[0, 8]", "[4, 12]", "[0, 4]", "[2, 6]" };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    guint len = i < 2 ? 2 : 1;
    g_autofree char *header =
        g_strdup_printf ("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                         " \"b\": {\"dtype\": \"F32\", \"shape\": [%u], \"data_offsets\": %s}}",
            len, bad[i]);
    write_raw_safetensors (path, header, 16);
    GError *error = NULL;
    g_assert_null (cony_safetensors_open (path, &error));
    g_test_message ("refused: %s", error->message);
    g_assert_nonnull (strstr (error->message, "'a' [0, 8)"));
    cony_test_expect_error (&error, CONY_ERROR_FORMAT, path, "and 'b' [");
  }
  write_raw_safetensors (path,
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
      " \"e\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 4]},"
      " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}",
      16);
  GError *error = NULL;
  g_autoptr (ConySafetensors) st = cony_safetensors_open (path, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (cony_safetensors_n_tensors (st), ==, 3);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp ("cony-io-XXXXXX", NULL);
  g_test_add_func ("/io/npy/round-trip", test_npy_round_trip);
  g_test_add_func ("/io/npy/errors", test_npy_errors);
  g_test_add_func ("/io/npy/hostile-shapes", test_npy_hostile_shapes);
  g_test_add_func ("/io/labels", test_labels);
  g_test_add_func ("/io/safetensors/round-trip", test_safetensors_round_trip);
  g_test_add_func ("/io/safetensors/corruption", test_safetensors_corruption);
  g_test_add_func ("/io/safetensors/nan-refused", test_safetensors_nan_refused);
  g_test_add_func ("/io/safetensors/offsets-not-integers", test_safetensors_offsets_not_integers);
  g_test_add_func ("/io/safetensors/overlap", test_safetensors_overlap);
  g_test_add_func ("/io/model-path", test_model_path);
  int rc = g_test_run ();
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", tmpdir);
  (void) !system (cmd);
  return rc;
}
