/* Model files and the continual encoder-classifier: golden logits from the windowed
 * PyTorch model (training/gen_model_golden.py), loader errors, and a byte-flip /
 * truncation sweep over a valid file. */
#include "cony/encoder.h"
#include "cony/error.h"
#include "cony/model.h"
#include "cony/npy.h"
#include "cony/safetensors.h"
#include "gemv-private.h"
#include "testutil.h"

#include <float.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static char *tmpdir;

/* Counting allocations during steps: malloc and friends are wrapped around glibc's
 * (not under AddressSanitizer, which owns them). */
#if defined(__SANITIZE_ADDRESS__)
#define COUNT_ALLOCS 0
#else
#define COUNT_ALLOCS 1
extern void *__libc_malloc (size_t size);
extern void *__libc_calloc (size_t n, size_t size);
extern void *__libc_realloc (void *p, size_t size);
extern void *__libc_memalign (size_t align, size_t size);
static volatile int counting;
static volatile guint64 allocations;
void *malloc (size_t size);
void *calloc (size_t n, size_t size);
void *realloc (void *p, size_t size);
void *
malloc (size_t size)
{
  if (counting)
    allocations++;
  return __libc_malloc (size);
}
void *
calloc (size_t n, size_t size)
{
  if (counting)
    allocations++;
  return __libc_calloc (n, size);
}
void *
realloc (void *p, size_t size)
{
  if (counting)
    allocations++;
  return __libc_realloc (p, size);
}
#endif
static char *golden_dir;

static char *
golden (const char *name)
{
  return g_build_filename (golden_dir, name, NULL);
}

/* Plain write, no fsync (g_file_set_contents syncs, which makes the byte sweep slow). */
static void
write_file (const char *path, const char *bytes, gsize len)
{
  FILE *f = fopen (path, "wb");
  g_assert_nonnull (f);
  g_assert_cmpuint (fwrite (bytes, 1, len, f), ==, len);
  g_assert_cmpint (fclose (f), ==, 0);
}

static char *
tmp_path (const char *name)
{
  return g_build_filename (tmpdir, name, NULL);
}

/* Steps every token of @tokens through a fresh encoder, k = tokens_per_step at a time,
 * and returns the max abs difference to @want (one row per step) over all steps and
 * classes. */
static double
run_against (ConyEncoder *enc, const ConyModel *m, const ConyNpyArray *tokens,
    const ConyNpyArray *want, int *worst_step)
{
  int k = cony_encoder_tokens_per_step (enc), C = m->config.n_classes;
  g_assert_cmpint (k, ==, m->config.tokens_per_step);
  g_assert_cmpint (tokens->shape[0] % k, ==, 0);
  int L = (int) tokens->shape[0] / k, n = m->config.window;
  g_assert_cmpint (tokens->shape[1], ==, m->config.d_in);
  g_assert_cmpint (want->shape[0], ==, L);
  g_assert_cmpint (want->shape[1], ==, C);
  float *logits = g_new (float, C);
  double worst = 0;
  *worst_step = -1;
  cony_encoder_reset (enc);
  for (int t = 0; t < L; t++) {
    cony_encoder_step (enc, tokens->data + (gsize) t * k * m->config.d_in, logits);
    g_assert_cmpuint (cony_encoder_steps (enc), ==, (guint64) t + 1);
    g_assert_cmpint (cony_encoder_window_fill (enc), ==, MIN ((t + 1) * k, n));
    for (int c = 0; c < C; c++) {
      double e = fabs ((double) logits[c] - want->data[(gsize) t * C + c]);
      if (!(e <= worst)) {
        worst = isnan (e) ? INFINITY : e;
        *worst_step = t;
      }
    }
  }
  g_free (logits);
  return worst;
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

static void
test_golden (void)
{
  GError *error = NULL;
  g_autoptr (GDir) dir = g_dir_open (golden_dir, 0, &error);
  g_assert_no_error (error);
  int cases = 0, overrides = 0, failures = 0, multi = 0;
  g_autoptr (GPtrArray) entries = g_ptr_array_new_with_free_func (g_free);
  const char *name;
  while ((name = g_dir_read_name (dir)))
    if (g_str_has_suffix (name, ".logits.npy"))
      g_ptr_array_add (entries, g_strdup (name));
  g_ptr_array_sort (entries, compare_names);
  for (guint e = 0; e < entries->len; e++) {
    const char *entry = g_ptr_array_index (entries, e);
    g_autofree char *stem = g_strndup (entry, strlen (entry) - strlen (".logits.npy"));
    char *at = strchr (stem, '@');
    int override = -1;
    if (at) {
      *at = '\0';
      ConyAttentionVariant v;
      g_assert_true (cony_attention_variant_from_name (at + 1, &v));
      override = (int) v;
      overrides++;
    }
    g_autofree char *mname = g_strconcat (stem, ".safetensors", NULL);
    g_autofree char *tname = g_strconcat (stem, ".tokens.npy", NULL);
    g_autofree char *mpath = golden (mname), *tpath = golden (tname), *lpath = golden (entry);
    g_autoptr (ConyModel) m = cony_model_load (mpath, &error);
    g_assert_no_error (error);
    g_autoptr (ConyNpyArray) tokens = cony_npy_load (tpath, &error);
    g_assert_no_error (error);
    g_autoptr (ConyNpyArray) want = cony_npy_load (lpath, &error);
    g_assert_no_error (error);
    g_autoptr (ConyEncoder) enc = cony_encoder_new (m, override, &error);
    g_assert_no_error (error);
    int step;
    double worst = run_against (enc, m, tokens, want, &step);
    g_test_message ("%s (%d block(s), %s%s%s, n=%d m=%d k=%d): max |C - torch| = %.3g (step %d)",
        entry, m->config.blocks, cony_attention_variant_name (m->config.attention[0]),
        at ? " run as " : "", at ? at + 1 : "", m->config.window, m->config.landmarks,
        m->config.tokens_per_step, worst, step);
    if (m->config.tokens_per_step > 1)
      multi++;
    if (!(worst <= 1e-4)) {
      g_test_message ("FAIL %s: step %d differs from the PyTorch model by %g (> 1e-4)", entry, step,
          worst);
      failures++;
      continue;
    }
    /* the same again after a reset: no state leaks across streams */
    cony_encoder_reset (enc);
    g_assert_cmpuint (cony_encoder_steps (enc), ==, 0);
    double again = run_against (enc, m, tokens, want, &step);
    g_assert_cmpfloat (again, <=, 1e-4);
    g_assert_cmpuint (cony_encoder_state_bytes (enc), >, 0);
    g_assert_cmpfloat (cony_encoder_flops_per_step (enc), >, 0);
    cases++;
  }
  g_assert_cmpint (failures, ==, 0);
  g_assert_cmpint (cases, >=, 15);
  g_assert_cmpint (multi, >=, 14); /* the kK_ cases of gen_model_golden.py */
  g_assert_cmpint (overrides, >=, 4);
}

/* ------------------------------------------------------------------ error cases */

/* A writable copy of a golden model's tensors, to break one thing at a time. */
typedef struct {
  GPtrArray *names;  /* char* */
  GPtrArray *data;   /* float* */
  GArray *ndims;     /* int */
  GPtrArray *shapes; /* gsize* */
  char *config;
} Tensors;

static Tensors *
tensors_from (const char *path)
{
  GError *error = NULL;
  g_autoptr (ConySafetensors) st = cony_safetensors_open (path, &error);
  g_assert_no_error (error);
  Tensors *t = g_new0 (Tensors, 1);
  t->names = g_ptr_array_new_with_free_func (g_free);
  t->data = g_ptr_array_new_with_free_func (g_free);
  t->shapes = g_ptr_array_new_with_free_func (g_free);
  t->ndims = g_array_new (FALSE, FALSE, sizeof (int));
  t->config = g_strdup (cony_safetensors_metadata (st, "config"));
  for (guint i = 0; i < cony_safetensors_n_tensors (st); i++) {
    const ConyTensorInfo *info = cony_safetensors_tensor (st, i);
    g_ptr_array_add (t->names, g_strdup (info->name));
    g_ptr_array_add (t->data,
        cony_safetensors_get_f32 (st, info->name, info->ndim, info->shape, &error));
    g_assert_no_error (error);
    g_ptr_array_add (t->shapes, g_memdup2 (info->shape, sizeof info->shape));
    g_array_append_val (t->ndims, info->ndim);
  }
  return t;
}

static void
tensors_free (Tensors *t)
{
  g_ptr_array_unref (t->names);
  g_ptr_array_unref (t->data);
  g_ptr_array_unref (t->shapes);
  g_array_unref (t->ndims);
  g_free (t->config);
  g_free (t);
}

static int
tensors_index (Tensors *t, const char *name)
{
  for (guint i = 0; i < t->names->len; i++)
    if (strcmp (g_ptr_array_index (t->names, i), name) == 0)
      return (int) i;
  g_error ("no tensor %s", name);
  return -1;
}

static void
tensors_write (Tensors *t, const char *path, const char *config)
{
  const char *meta[] = { "config", config, NULL };
  GError *error = NULL;
  g_assert_true (cony_safetensors_write (path, t->names->len, (const char *const *) t->names->pdata,
      (const float *const *) t->data->pdata, (const int *) t->ndims->data,
      (const gsize *const *) t->shapes->pdata, config ? meta : NULL, &error));
  g_assert_no_error (error);
}

/* Loads @path expecting failure with @code and a message containing every @needles. */
static void
expect_load_error (const char *path, int code, const char *needle1, const char *needle2)
{
  GError *error = NULL;
  ConyModel *m = cony_model_load (path, &error);
  if (m)
    g_error ("%s loaded, expected an error mentioning '%s'", path, needle1);
  g_assert_nonnull (error);
  g_test_message ("%s", error->message);
  g_assert_true (g_error_matches (error, CONY_ERROR, code));
  g_assert_nonnull (strstr (error->message, path));
  if (needle1)
    g_assert_nonnull (strstr (error->message, needle1));
  if (needle2)
    g_assert_nonnull (strstr (error->message, needle2));
  g_error_free (error);
}

/* A copy of the JSON header of the safetensors file contents @bytes; *@hlen gets its
 * length (the little-endian u64 in front of it). */
static char *
header_of (const char *bytes, guint64 *hlen)
{
  *hlen = 0;
  for (int k = 7; k >= 0; k--)
    *hlen = (*hlen << 8) | (guint8) bytes[k];
  return g_strndup (bytes + 8, *hlen);
}

static char *
replace (const char *s, const char *from, const char *to)
{
  g_assert_nonnull (strstr (s, from));
  g_auto (GStrv) parts = g_strsplit (s, from, 2);
  return g_strconcat (parts[0], to, parts[1], NULL);
}

static void
test_load_errors (void)
{
  g_autofree char *src = golden ("b1_conyfixed.safetensors");
  g_autofree char *path = tmp_path ("bad.safetensors");
  Tensors *t = tensors_from (src);

  /* the unmodified copy loads */
  tensors_write (t, path, t->config);
  GError *error = NULL;
  g_autoptr (ConyModel) ok = cony_model_load (path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (ok->config.blocks, ==, 1);
  g_assert_cmpint (ok->config.n_classes, ==, 3);
  g_assert_cmpstr (ok->config.labels[2], ==, "class2");
  g_assert_true (ok->block[0].has_landmarks);

  expect_load_error ("/nonexistent/m.safetensors", CONY_ERROR_IO, "cannot open", NULL);

  /* no config */
  tensors_write (t, path, NULL);
  expect_load_error (path, CONY_ERROR_MISSING, "config", NULL);

  /* config problems: one edit of the config each (@from: NULL, the whole config is @to) */
  static const struct {
    const char *from, *to;
    int code;
    const char *needle1, *needle2;
  } edits[] = {
    { "cony-encoder-classifier", "resnet", CONY_ERROR_INVALID, "architecture", "resnet" },
    { "\"heads\":2", "\"heads\":3", CONY_ERROR_INVALID, "heads", NULL },
    { "\"ff\":16", "\"ff\":\"16\"", CONY_ERROR_FORMAT, "'ff'", "integer" },
    { "\"cony-fixed\"", "\"bogus\"", CONY_ERROR_INVALID, "bogus", NULL },
    { "\"d_in\":6,", "", CONY_ERROR_MISSING, "d_in", NULL },
    { NULL, "{not json", CONY_ERROR_FORMAT, "JSON", NULL },
    { "\"blocks\":1", "\"blocks\":3", CONY_ERROR_INVALID, "blocks", NULL },
  };
  for (guint e = 0; e < G_N_ELEMENTS (edits); e++) {
    g_autofree char *config = edits[e].from ? replace (t->config, edits[e].from, edits[e].to)
                                            : g_strdup (edits[e].to);
    tensors_write (t, path, config);
    expect_load_error (path, edits[e].code, edits[e].needle1, edits[e].needle2);
  }

  /* tokens_per_step: absent = 1; 1 .. n (this model has n = 7); an integer */
  g_assert_cmpint (ok->config.tokens_per_step, ==, 1);
  g_assert_cmpint (ok->config.positional_rows, ==, 13);
  {
    static const char *bad[] = { "0", "-2", "8", "1000000", "\"2\"", "2.5", "true" };
    static const int codes[] = { CONY_ERROR_INVALID, CONY_ERROR_INVALID, CONY_ERROR_INVALID,
      CONY_ERROR_INVALID, CONY_ERROR_FORMAT, CONY_ERROR_FORMAT, CONY_ERROR_FORMAT };
    for (guint b = 0; b < G_N_ELEMENTS (bad); b++) {
      g_autofree char *with = g_strdup_printf ("\"tokens_per_step\":%s,\"labels\"", bad[b]);
      g_autofree char *ck = replace (t->config, "\"labels\"", with);
      tensors_write (t, path, ck);
      expect_load_error (path, codes[b], "tokens_per_step", NULL);
    }
    g_autofree char *ck = replace (t->config, "\"labels\"", "\"tokens_per_step\":7,\"labels\"");
    tensors_write (t, path, ck);
    g_autoptr (ConyModel) km = cony_model_load (path, &error);
    g_assert_no_error (error);
    g_assert_cmpint (km->config.tokens_per_step, ==, 7);
    g_autoptr (ConyEncoder) ke = cony_encoder_new (km, -1, &error);
    g_assert_no_error (error);
    g_assert_cmpint (cony_encoder_tokens_per_step (ke), ==, 7);
    /* without positional_rows: the smallest multiple of k >= 2n - 1 (13 -> 16 for k = 4) */
    g_autofree char *np = replace (t->config, "\"positional_rows\":13,", "\"tokens_per_step\":4,");
    ConyModelConfig cfg;
    g_assert_true (cony_model_config_parse (np, "np", &cfg, &error));
    g_assert_no_error (error);
    g_assert_cmpint (cfg.tokens_per_step, ==, 4);
    g_assert_cmpint (cfg.positional_rows, ==, 16);
    cony_model_config_clear (&cfg);
  }

  /* output: softmax when absent, sigmoid for multi-label models, nothing else */
  g_assert_cmpint (ok->config.output, ==, CONY_OUTPUT_SOFTMAX);
  {
    static const char *outs[] = { "\"softmax\"", "\"sigmoid\"" };
    for (guint i = 0; i < G_N_ELEMENTS (outs); i++) {
      g_autofree char *with = g_strdup_printf ("\"output\":%s,\"labels\"", outs[i]);
      g_autofree char *co = replace (t->config, "\"labels\"", with);
      ConyModelConfig cfg;
      g_assert_true (cony_model_config_parse (co, "out", &cfg, &error));
      g_assert_no_error (error);
      g_assert_cmpint (cfg.output, ==, i == 0 ? CONY_OUTPUT_SOFTMAX : CONY_OUTPUT_SIGMOID);
      cony_model_config_clear (&cfg);
    }
    g_autofree char *cb = replace (t->config, "\"labels\"", "\"output\":\"relu\",\"labels\"");
    tensors_write (t, path, cb);
    expect_load_error (path, CONY_ERROR_INVALID, "output", "relu");
    g_autofree char *cn = replace (t->config, "\"labels\"", "\"output\":1,\"labels\"");
    tensors_write (t, path, cn);
    expect_load_error (path, CONY_ERROR_FORMAT, "'output'", NULL);
  }

  /* the front-end parameters pass through as JSON text; a non-object is refused */
  g_autofree char *c8 = replace (t->config, "\"labels\"",
      "\"frontend\":{\"sample_rate\":16000,"
      "\"patch\":[96,64]},\"labels\"");
  tensors_write (t, path, c8);
  {
    g_autoptr (ConyModel) fm = cony_model_load (path, &error);
    g_assert_no_error (error);
    g_assert_nonnull (fm->config.frontend_json);
    g_assert_nonnull (strstr (fm->config.frontend_json, "\"sample_rate\":16000"));
    g_assert_nonnull (strstr (fm->config.frontend_json, "[96,64]"));
    g_assert_null (ok->config.frontend_json);
  }
  /* the CNN the tokens came from (frontend.cnn*) lands in config.cnn; a non-string is
   * refused by key, and nothing is left behind to leak */
  {
    g_autofree char *cr = replace (t->config, "\"labels\"",
        "\"frontend\":{\"cnn\":\"yamnet.safetensors\",\"cnn_sha256\":\"ab12\","
        "\"cnn_output\":\"embedding\"},\"labels\"");
    ConyModelConfig cfg;
    g_assert_true (cony_model_config_parse (cr, "cr", &cfg, &error));
    g_assert_no_error (error);
    g_assert_cmpstr (cfg.cnn.name, ==, "yamnet.safetensors");
    g_assert_cmpstr (cfg.cnn.sha256, ==, "ab12");
    g_assert_true (cony_cnn_ref_is_embedding (&cfg.cnn));
    cony_model_config_clear (&cfg);
    g_assert_null (cfg.cnn.name);
    g_assert_false (cony_cnn_ref_is_embedding (&ok->config.cnn));
    g_autofree char *cs = replace (t->config, "\"labels\"",
        "\"frontend\":{\"cnn\":\"y\",\"cnn_sha256\":7},\"labels\"");
    g_assert_false (cony_model_config_parse (cs, "cs", &cfg, &error));
    g_assert_error (error, CONY_ERROR, CONY_ERROR_FORMAT);
    g_assert_cmpstr (error->message, ==, "cs: model config: frontend.cnn_sha256 is not a string");
    g_clear_error (&error);
  }
  g_autofree char *c9 = replace (t->config, "\"labels\"", "\"frontend\":7,\"labels\"");
  tensors_write (t, path, c9);
  expect_load_error (path, CONY_ERROR_FORMAT, "frontend", NULL);

  /* a shape that disagrees with the config */
  g_autofree char *c7 = replace (t->config, "\"d_in\":6", "\"d_in\":5");
  tensors_write (t, path, c7);
  expect_load_error (path, CONY_ERROR_SHAPE, "input_proj.weight", "(8, 5)");

  /* a missing tensor */
  int i = tensors_index (t, "blocks.0.ff.2.weight");
  g_autofree char *saved = g_steal_pointer (&t->names->pdata[i]);
  t->names->pdata[i] = g_strdup ("blocks.0.ff.3.weight");
  tensors_write (t, path, t->config);
  expect_load_error (path, CONY_ERROR_FORMAT, "blocks.0.ff.3.weight", "unexpected");
  /* fixed landmarks are required by a cony-fixed model */
  g_free (t->names->pdata[i]);
  t->names->pdata[i] = g_strdup (saved);
  i = tensors_index (t, "blocks.0.attn.q_landmarks");
  g_free (t->names->pdata[i]);
  t->names->pdata[i] = g_strdup ("blocks.0.attn.k_landmarks"); /* duplicate key: JSON keeps one */
  tensors_write (t, path, t->config);
  expect_load_error (path, CONY_ERROR_MISSING, "blocks.0.attn.q_landmarks", "missing");
  g_free (t->names->pdata[i]);
  t->names->pdata[i] = g_strdup ("blocks.0.attn.q_landmarks");

  /* NaN weights */
  i = tensors_index (t, "classifier.bias");
  float *cb = g_ptr_array_index (t->data, i);
  float keep = cb[1];
  cb[1] = NAN;
  tensors_write (t, path, t->config);
  expect_load_error (path, CONY_ERROR_INVALID, "classifier.bias", "non-finite");
  cb[1] = keep;

  /* truncated file */
  tensors_write (t, path, t->config);
  g_autofree char *bytes = NULL;
  gsize len;
  g_assert_true (g_file_get_contents (path, &bytes, &len, NULL));
  g_assert_true (g_file_set_contents (path, bytes, len - 5, NULL));
  expect_load_error (path, CONY_ERROR_FORMAT, "truncated", NULL);

  /* a header that lies about offsets: stretch one tensor's end offset */
  guint64 hlen;
  g_autofree char *header = header_of (bytes, &hlen);
  char *p = strstr (header, "\"norm.bias\"");
  g_assert_nonnull (p);
  p = strstr (p, "\"data_offsets\":[");
  g_assert_nonnull (p);
  p = strchr (p, ',') + 1; /* the end offset digits: bump the first one */
  g_assert_true (g_ascii_isdigit (*p));
  *p = *p == '9' ? '1' : *p + 1;
  memcpy (bytes + 8, header, hlen);
  g_assert_true (g_file_set_contents (path, bytes, len, NULL));
  error = NULL;
  g_assert_null (cony_model_load (path, &error));
  cony_test_expect_error (&error, CONY_ERROR_FORMAT, "norm.bias", NULL);

  tensors_free (t);
}

/* A file with the removed "input_groups" key (rule 21) is refused by name, not run
 * without the prior it was trained with. */
static void
test_input_groups_refused (void)
{
  g_autofree char *src = golden ("b1_cony.safetensors");
  g_autofree char *path = tmp_path ("groups.safetensors");
  Tensors *t = tensors_from (src);
  g_autofree char *config = replace (t->config, "{", "{\"input_groups\":[2,3,1],");
  tensors_write (t, path, config);
  expect_load_error (path, CONY_ERROR_FORMAT, "'input_groups' is no longer supported", "rule 21");
  tensors_free (t);
}

static void check_f16_copy (const char *name);

static void
test_dtype_and_f16 (void)
{
  /* Hand-made files: a model whose classifier.bias is I32, and the same as F16. */
  g_autofree char *src = golden ("b1_regular.safetensors");
  g_autofree char *path = tmp_path ("dtype.safetensors");
  GError *error = NULL;
  g_autofree char *bytes = NULL;
  gsize len;
  g_assert_true (g_file_get_contents (src, &bytes, &len, &error));
  guint64 hlen;
  g_autofree char *header = header_of (bytes, &hlen);
  /* classifier.bias: 3 floats = 12 bytes; call it I32 (4-byte, unsupported here) */
  char *p = strstr (header, "\"classifier.bias\":{\"dtype\":\"F32\"");
  g_assert_nonnull (p);
  p = strstr (p, "F32");
  memcpy (p, "I32", 3);
  memcpy (bytes + 8, header, hlen);
  g_assert_true (g_file_set_contents (path, bytes, len, NULL));
  expect_load_error (path, CONY_ERROR_SHAPE, "classifier.bias", "dtype");
  check_f16_copy ("b1_regular");
}

/* F16 storage of golden case @name: every tensor converted to half, loaded as float32,
 * and the model still matches the golden logits to half precision */
static void
check_f16_copy (const char *name)
{
  GError *error = NULL;
  g_autofree char *src_name = g_strconcat (name, ".safetensors", NULL);
  g_autofree char *src = golden (src_name);
  g_autoptr (ConySafetensors) st = cony_safetensors_open (src, &error);
  g_assert_no_error (error);
  GString *h = g_string_new ("{\"__metadata__\":{\"config\":");
  g_autofree char *cfg_q = g_strescape (cony_safetensors_metadata (st, "config"), NULL);
  g_string_append_printf (h, "\"%s\"}", cfg_q);
  GByteArray *data = g_byte_array_new ();
  for (guint i = 0; i < cony_safetensors_n_tensors (st); i++) {
    const ConyTensorInfo *ti = cony_safetensors_tensor (st, i);
    float *f = cony_safetensors_get_f32 (st, ti->name, ti->ndim, ti->shape, &error);
    g_assert_no_error (error);
    g_string_append_printf (h, ",\"%s\":{\"dtype\":\"F16\",\"shape\":[", ti->name);
    for (int k = 0; k < ti->ndim; k++)
      g_string_append_printf (h, "%s%" G_GSIZE_FORMAT, k ? "," : "", ti->shape[k]);
    g_string_append_printf (h, "],\"data_offsets\":[%u,%" G_GSIZE_FORMAT "]}", data->len,
        data->len + 2 * ti->numel);
    for (gsize k = 0; k < ti->numel; k++) {
      /* round-to-nearest float -> half for normal-range values */
      guint32 bits;
      memcpy (&bits, &f[k], 4);
      guint32 sign = (bits >> 16) & 0x8000;
      int exp = (int) ((bits >> 23) & 0xff) - 127 + 15;
      guint32 mant = bits & 0x7fffff;
      guint16 half;
      if (exp <= 0) {
        half = (guint16) sign; /* tiny values flush to zero */
      } else {
        guint32 r = (guint32) (exp << 10) | (mant >> 13);
        if (mant & 0x1000)
          r++;
        half = (guint16) (sign | r);
      }
      guint16 le = GUINT16_TO_LE (half);
      g_byte_array_append (data, (guint8 *) &le, 2);
    }
    g_free (f);
  }
  g_string_append_c (h, '}');
  while (h->len % 8)
    g_string_append_c (h, ' ');
  guint8 lenb[8];
  for (int k = 0; k < 8; k++)
    lenb[k] = (guint8) ((guint64) h->len >> (8 * k));
  GByteArray *file = g_byte_array_new ();
  g_byte_array_append (file, lenb, 8);
  g_byte_array_append (file, (guint8 *) h->str, h->len);
  g_byte_array_append (file, data->data, data->len);
  g_autofree char *f16 = tmp_path ("f16.safetensors");
  g_assert_true (g_file_set_contents (f16, (char *) file->data, file->len, NULL));
  g_byte_array_unref (file);
  g_byte_array_unref (data);
  g_string_free (h, TRUE);

  g_autoptr (ConyModel) m = cony_model_load (f16, &error);
  g_assert_no_error (error);
  g_autofree char *tname = g_strconcat (name, ".tokens.npy", NULL);
  g_autofree char *lname = g_strconcat (name, ".logits.npy", NULL);
  g_autofree char *tp = golden (tname), *lp = golden (lname);
  g_autoptr (ConyNpyArray) tokens = cony_npy_load (tp, &error);
  g_autoptr (ConyNpyArray) want = cony_npy_load (lp, &error);
  g_autoptr (ConyEncoder) enc = cony_encoder_new (m, -1, &error);
  g_assert_no_error (error);
  int step;
  double worst = run_against (enc, m, tokens, want, &step);
  g_test_message ("F16 copy of %s: max diff %.3g", name, worst);
  g_assert_cmpfloat (worst, <, 0.05);
  g_assert_cmpfloat (worst, >, 0.0);

  /* The F16 model's weights are float16 values, so the step reads its matrices from
   * float16 copies (src/kernels/gemv.c); that computes exactly what the float32 expansion
   * computes: the same logits, bit for bit, at every step, against an encoder made with
   * the float16 copies switched off. */
  ConyGemvMatrix probe;
  cony_gemv_matrix_init (&probe, m->input_proj_weight, m->config.d, m->config.d_in, TRUE);
  g_assert_nonnull (probe.f16);
  cony_gemv_matrix_clear (&probe);
  cony_gemv_matrix_init (&probe, m->block[0].attn.in_proj_weight, 3 * m->config.d, m->config.d,
      TRUE);
  g_assert_nonnull (probe.f16);
  cony_gemv_matrix_clear (&probe);
  int C = m->config.n_classes;
  g_autofree float *a = g_new (float, C), *b = g_new (float, C);
  const int variants[] = { -1, CONY_ATTENTION_CONTINUAL };
  for (guint v = 0; v < G_N_ELEMENTS (variants); v++) {
    g_assert_true (cony_gemv_f16_enabled ());
    g_autoptr (ConyEncoder) e16 = cony_encoder_new (m, variants[v], &error);
    g_assert_no_error (error);
    cony_gemv_set_f16_enabled (FALSE);
    g_autoptr (ConyEncoder) e32 = cony_encoder_new (m, variants[v], &error);
    cony_gemv_set_f16_enabled (TRUE);
    g_assert_no_error (error);
    for (gsize t = 0; t < tokens->shape[0]; t++) {
      const float *x = tokens->data + t * (gsize) m->config.d_in;
      cony_encoder_step (e16, x, a);
      cony_encoder_step (e32, x, b);
      g_assert_cmpmem (a, sizeof (float) * C, b, sizeof (float) * C);
    }
  }
}

static void
test_override_needs_landmarks (void)
{
  g_autofree char *src = golden ("b1_cony.safetensors");
  GError *error = NULL;
  g_autoptr (ConyModel) m = cony_model_load (src, &error);
  g_assert_no_error (error);
  g_assert_false (m->block[0].has_landmarks);
  ConyEncoder *enc = cony_encoder_new (m, CONY_ATTENTION_CONY_FIXED, &error);
  g_assert_null (enc);
  cony_test_expect_error (&error, CONY_ERROR_MISSING, "blocks.0.attn.q_landmarks", src);
  /* every variant without fixed landmarks runs */
  for (int v = 0; v < CONY_ATTENTION_N_VARIANTS; v++) {
    if (cony_attention_variant_uses_fixed_landmarks (v))
      continue;
    g_autoptr (ConyEncoder) e = cony_encoder_new (m, v, &error);
    g_assert_no_error (error);
    g_assert_cmpint (cony_encoder_block_variant (e, 0), ==, v);
  }
}

/* ------------------------------------------------------------------ fuzz */

static int
try_load_and_step (const char *path)
{
  GError *error = NULL;
  ConyModel *m = cony_model_load (path, &error);
  if (!m) {
    g_assert_nonnull (error);
    g_assert_true (error->domain == CONY_ERROR);
    g_assert_nonnull (strstr (error->message, path));
    g_error_free (error);
    return 0;
  }
  g_assert_no_error (error);
  ConyEncoder *enc = cony_encoder_new (m, -1, &error);
  if (enc) {
    float *tok = g_new0 (float, m->config.d_in);
    float *logits = g_new0 (float, m->config.n_classes);
    for (int t = 0; t < 2 * m->config.window + 1; t++) {
      for (int k = 0; k < m->config.d_in; k++)
        tok[k] = (float) sin (t * 1.3 + k);
      cony_encoder_step (enc, tok, logits);
    }
    g_free (tok);
    g_free (logits);
    cony_encoder_free (enc);
  } else {
    g_assert_nonnull (error);
    g_clear_error (&error);
  }
  cony_model_free (m);
  return 1;
}

/* Mutations of a model file: every truncation and every byte flip (all bits, then the
 * low bit) inside the 8-byte length and the JSON header, where the parsing is; inside
 * the tensor data, whose bytes are all alike to the loader, every FUZZ_DATA_STRIDE-th
 * byte. The stride is prime to the 4-byte float and below the smallest tensor's size, so
 * every tensor is hit, in every byte position of its elements (exponents too: NaN and
 * Inf weights). Truncations must be refused; flips give an error or a valid load. */
#define FUZZ_DATA_STRIDE 7

static void
test_fuzz (void)
{
  const char *cases[] = { "b1_conyfixed.safetensors", "b2_cony_r.safetensors" };
  for (guint c = 0; c < G_N_ELEMENTS (cases); c++) {
    g_autofree char *src = golden (cases[c]);
    g_autofree char *path = tmp_path ("fuzz.safetensors");
    g_autofree char *bytes = NULL;
    gsize len;
    g_assert_true (g_file_get_contents (src, &bytes, &len, NULL));
    guint64 header_len;
    g_assert_cmpuint (len, >, 8);
    memcpy (&header_len, bytes, 8);
    header_len = GUINT64_FROM_LE (header_len);
    g_assert_cmpuint (8 + header_len, <, len);
    int loaded = 0, refused = 0, data_loaded = 0;
    for (gsize i = 0; i < len; i += i < 8 + header_len ? 1 : FUZZ_DATA_STRIDE) {
      write_file (path, bytes, i); /* truncated before byte i */
      g_assert_cmpint (try_load_and_step (path), ==, 0);
      refused++;
      for (int k = 0; k < 2; k++) {
        guint8 mask = k ? 0x01 : 0xff;
        bytes[i] ^= mask;
        write_file (path, bytes, len);
        int r = try_load_and_step (path);
        loaded += r;
        refused += !r;
        data_loaded += r && i >= 8 + header_len;
        bytes[i] ^= mask;
      }
    }
    write_file (path, bytes, len - 1);
    g_assert_cmpint (try_load_and_step (path), ==, 0);
    g_test_message ("%s: %" G_GSIZE_FORMAT " bytes (header %" G_GUINT64_FORMAT
                    "), %d mutated loads "
                    "succeeded (%d in the data), %d refused",
        cases[c], len, header_len, loaded, data_loaded, refused);
    g_assert_cmpint (data_loaded, >, 0); /* flips inside weights still load */
    g_assert_cmpint (refused, >, (int) (8 + header_len));
  }
}

static void
test_step_does_not_allocate (void)
{
#if COUNT_ALLOCS
  /* Every variant, including those that take a pseudo-inverse during steps (cony on
   * landmark updates, nystrom every step: the SVD works in stack buffers). */
  const char *cases[] = { "b1_conyfixed", "b2_conyfixed", "b2_regular", "b1_continual",
    "b2_continual", "b1_nystromfixed", "b2_nystromfixed", "b1_cony_r", "b2_cony_r", "b1_nystrom_r",
    "k4_b1_cony_r", "k2_b1_conyfixed", "k4_b2_conyfixed", "k4_b2_cony_r" };
  for (guint c = 0; c < G_N_ELEMENTS (cases); c++) {
    GError *error = NULL;
    g_autofree char *name = g_strconcat (cases[c], ".safetensors", NULL);
    g_autofree char *path = golden (name);
    g_autoptr (ConyModel) m = cony_model_load (path, &error);
    g_assert_no_error (error);
    g_autoptr (ConyEncoder) enc = cony_encoder_new (m, -1, &error);
    g_assert_no_error (error);
    float tok[256] = { 0 }, logits[64];
    g_assert_cmpint (m->config.d_in * m->config.tokens_per_step, <=, 256);
    /* one step first (BLAS initialises its buffers on first use), then count */
    cony_encoder_step (enc, tok, logits);
    allocations = 0;
    counting = 1;
    for (int t = 0; t < 4 * m->config.window; t++) {
      tok[t % (m->config.d_in * m->config.tokens_per_step)] = (float) t / 7.0f;
      cony_encoder_step (enc, tok, logits);
    }
    counting = 0;
    g_test_message ("%s: %" G_GUINT64_FORMAT " allocations in %d steps", cases[c], allocations,
        4 * m->config.window);
    g_assert_cmpuint (allocations, ==, 0);
  }
#else
  g_test_skip ("allocation counting is not available under AddressSanitizer");
#endif
}

/* Replaces tensor @name of @t by zeros of shape (rows, cols) (cols 0: 1-D). */
static void
tensors_zero (Tensors *t, const char *name, gsize rows, gsize cols)
{
  int i = tensors_index (t, name);
  gsize *shape = t->shapes->pdata[i];
  shape[0] = rows;
  if (cols)
    shape[1] = cols;
  g_free (t->data->pdata[i]);
  t->data->pdata[i] = g_new0 (float, rows *MAX (cols, 1));
}

/* A model's say-so must not exhaust memory (#31.1). The reproducer (a tiny file): window =
 * 100000 with a 1-row positional table, once a 40 GB n² allocation and an abort, is
 * refused by the loader naming the window; a window the loader takes (16384) with a
 * feed-forward width that makes the encoder's scratch n·ff floats pass the 1 GiB budget
 * (a 4 MB file) is refused by cony_encoder_new() naming the window and the bytes. */
static void
test_memory_budget (void)
{
  g_autofree char *src = golden ("b1_regular.safetensors");
  g_autofree char *path = tmp_path ("budget.safetensors");
  Tensors *t = tensors_from (src);
  tensors_zero (t, "pos_embedding", 1, 8);
  g_autofree char *c1 = replace (t->config, "\"window\":6", "\"window\":100000");
  g_autofree char *c2 = replace (c1, "\"positional_rows\":11", "\"positional_rows\":1");
  tensors_write (t, path, c2);
  GStatBuf st;
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpint (st.st_size, <, 5000); /* a few KB of weights and config */
  expect_load_error (path, CONY_ERROR_INVALID, "'window' = 100000", "expected [1, 16384]");

  /* the largest window loads and runs with this small model ... */
  g_autofree char *c3 = replace (t->config, "\"window\":6", "\"window\":16384");
  g_autofree char *c4 = replace (c3, "\"positional_rows\":11", "\"positional_rows\":1");
  tensors_write (t, path, c4);
  GError *error = NULL;
  g_autoptr (ConyModel) ok = cony_model_load (path, &error);
  g_assert_no_error (error);
  g_autoptr (ConyEncoder) enc = cony_encoder_new (ok, -1, &error);
  g_assert_no_error (error);
  float tok[6] = { 1, 2, 3, 4, 5, 6 }, logits[3];
  g_assert_true (cony_encoder_step (enc, tok, logits));

  /* ... but not with ff = 65536 */
  tensors_zero (t, "blocks.0.ff.0.weight", 65536, 8);
  tensors_zero (t, "blocks.0.ff.0.bias", 65536, 0);
  tensors_zero (t, "blocks.0.ff.2.weight", 8, 65536);
  g_autofree char *c5 = replace (c4, "\"ff\":16", "\"ff\":65536");
  tensors_write (t, path, c5);
  g_autoptr (ConyModel) big = cony_model_load (path, &error);
  g_assert_no_error (error);
  g_assert_null (cony_encoder_new (big, -1, &error));
  g_assert_error (error, CONY_ERROR, CONY_ERROR_INVALID);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, "window = 16384"));
  g_assert_nonnull (strstr (error->message, "bytes"));
  g_assert_nonnull (strstr (error->message, path));
  g_clear_error (&error);
  tensors_free (t);
}

/* ------------------------------------------------------------------ extreme tokens */

/* Token t of a plain stream (values of order 1). */
static void
plain_token (const ConyModel *m, int t, float *tok)
{
  for (int k = 0; k < m->config.d_in; k++)
    tok[k] = (float) sin (t * 1.3 + k * 0.7);
}

/* Steps @enc over plain tokens [0, steps) into @logits (steps × classes). */
static void
step_plain (ConyEncoder *enc, const ConyModel *m, int steps, float *logits)
{
  g_autofree float *tok = g_new (float, m->config.d_in);
  for (int t = 0; t < steps; t++) {
    plain_token (m, t, tok);
    g_assert_true (cony_encoder_step (enc, tok, logits + (gsize) t * m->config.n_classes));
  }
}

/* Every variant, 1 and 2 blocks, on streams with tokens of 1e19, 1e30, ±FLT_MAX and
 * denormals (issues #30.4, #31.2): a step either gives finite logits or says FALSE
 * (never NaN published); 1e19, 1e30 and denormals stay finite (the float scores that
 * overflow are recomputed in double, LayerNorm of huge rows in double); FLT_MAX
 * overflows the input projection of these models and is reported; afterwards, by the
 * encoder's own reset or an explicit one, plain tokens give exactly a fresh encoder's
 * logits (nothing of the extreme tokens stays in the state). */
static void
test_extreme_tokens (void)
{
  const char *files[] = { "b1_conyfixed.safetensors", "b2_conyfixed.safetensors",
    "b1_cony.safetensors" };
  const float values[] = { 1e19f, -1e19f, 1e30f, FLT_MAX, -FLT_MAX, 1e-40f, FLT_MIN / 4 };
  for (guint f = 0; f < G_N_ELEMENTS (files); f++) {
    GError *error = NULL;
    g_autofree char *path = golden (files[f]);
    g_autoptr (ConyModel) m = cony_model_load (path, &error);
    g_assert_no_error (error);
    int C = m->config.n_classes, din = m->config.d_in, after = 2 * m->config.window + 3;
    g_autofree float *tok = g_new (float, din);
    g_autofree float *logits = g_new (float, C);
    g_autofree float *want = g_new (float, (gsize) after *C);
    g_autofree float *got = g_new (float, (gsize) after *C);
    for (int v = 0; v < CONY_ATTENTION_N_VARIANTS; v++) {
      if (v == CONY_ATTENTION_VCC && m->config.blocks == 2)
        continue; /* vcc is single output: refused for 2-block models */
      if (cony_attention_variant_uses_fixed_landmarks (v) && !m->block[0].has_landmarks)
        continue; /* b1_cony has none */
      g_autoptr (ConyEncoder) fresh = cony_encoder_new (m, v, &error);
      g_assert_no_error (error);
      step_plain (fresh, m, after, want);
      for (guint x = 0; x < G_N_ELEMENTS (values); x++) {
        g_autoptr (ConyEncoder) enc = cony_encoder_new (m, v, &error);
        g_assert_no_error (error);
        step_plain (enc, m, 5, got);
        int reported = 0;
        gboolean ok = TRUE;
        /* three extreme tokens: all entries the value, then alternating signs, then one
         * entry among plain ones */
        for (int e = 0; e < 3; e++) {
          plain_token (m, 5 + e, tok);
          for (int k = 0; k < din; k++)
            if (e < 2 || k == 1)
              tok[k] = e == 1 && k % 2 ? -values[x] : values[x];
          ok = cony_encoder_step (enc, tok, logits);
          reported += !ok;
          for (int c = 0; ok && c < C; c++)
            g_assert_true (isfinite (logits[c]));
        }
        g_test_message ("%s as %s, tokens %g: %d of 3 steps reported", files[f],
            cony_attention_variant_name (v), values[x], reported);
        if (fabsf (values[x]) < 1e31f)
          g_assert_cmpint (reported, ==, 0);
        else
          g_assert_cmpint (reported, >, 0);
        if (ok)
          cony_encoder_reset (enc);
        g_assert_cmpuint (cony_encoder_steps (enc), ==, 0);
        step_plain (enc, m, after, got);
        g_assert_cmpint (memcmp (got, want, sizeof (float) * after * C), ==, 0);
      }
    }
  }
}

/* The config's labels pass the one label check (cony/labels.h), refused by index: a lone
 * surrogate escape gave invalid UTF-8 in every record, "\u0000" cut the label, raw
 * control characters passed. A full load refuses them the same way. */
static void
test_config_labels (void)
{
  g_autofree char *src = golden ("b1_conyfixed.safetensors");
  Tensors *t = tensors_from (src);
  static const struct {
    const char *label, *what;
  } bad[] = {
    { "\"\\ud800x\"", "not UTF-8 at byte 0" },
    { "\"a\\u0000b\"", "a NUL" },
    { "\"a\\nb\"", "U+000A" },
    { "\"a\\tb\"", "U+0009" },
    { "\"a\\rb\"", "U+000D" },
    { "\"\\u001b[1m\"", "U+001B" },
    { "\"\"", "is empty" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autofree char *config = replace (t->config, "\"class1\"", bad[i].label);
    ConyModelConfig c;
    GError *error = NULL;
    g_assert_false (cony_model_config_parse (config, "m.safetensors", &c, &error));
    g_test_message ("refused: %s", error->message);
    cony_test_expect_error (&error, CONY_ERROR_FORMAT, "m.safetensors: model config: labels[1] ",
        bad[i].what);
  }
  /* escapes that are text stay text; "\\u0000" is a backslash and "u0000" */
  g_autofree char *fine = replace (t->config, "\"class1\"", "\"\\ud83d\\udc36 \\\\u0000\"");
  ConyModelConfig c;
  GError *error = NULL;
  g_assert_true (cony_model_config_parse (fine, "m.safetensors", &c, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (c.labels[1], ==, "\xf0\x9f\x90\xb6 \\u0000");
  cony_model_config_clear (&c);

  g_autofree char *path = tmp_path ("labels.safetensors");
  g_autofree char *nul = replace (t->config, "\"class2\"", "\"c\\u0000\"");
  tensors_write (t, path, nul);
  expect_load_error (path, CONY_ERROR_FORMAT, "model config: labels[2] ", "a NUL");
  tensors_free (t);
}

/* A CNN element's record of its file: base name, SHA-256 of the bytes, the output. */
static void
test_cnn_ref_from_file (void)
{
  GError *error = NULL;
  g_autofree char *path = tmp_path ("net.safetensors");
  g_assert_true (g_file_set_contents (path, "abc", 3, NULL));
  ConyCnnRef ref;
  g_assert_true (cony_cnn_ref_init_from_file (&ref, path, "embedding", &error));
  g_assert_no_error (error);
  g_assert_cmpstr (ref.name, ==, "net.safetensors");
  g_assert_cmpstr (ref.sha256, ==,
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  g_assert_true (cony_cnn_ref_is_embedding (&ref));
  cony_cnn_ref_clear (&ref);
  g_autofree char *gone = tmp_path ("missing.safetensors");
  g_assert_false (cony_cnn_ref_init_from_file (&ref, gone, "scores", &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT);
  g_assert_nonnull (strstr (error->message, "missing.safetensors"));
  g_clear_error (&error);
  g_assert_null (ref.name);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  const char *root = g_getenv ("CONY_SOURCE_ROOT");
  golden_dir = g_build_filename (root ? root : ".", "tests", "golden", "model", NULL);
  GError *error = NULL;
  tmpdir = g_dir_make_tmp ("cony-model-XXXXXX", &error);
  g_assert_no_error (error);
  g_test_add_func ("/model/golden", test_golden);
  g_test_add_func ("/model/load-errors", test_load_errors);
  g_test_add_func ("/model/config-labels", test_config_labels);
  g_test_add_func ("/model/input-groups-refused", test_input_groups_refused);
  g_test_add_func ("/model/dtype-and-f16", test_dtype_and_f16);
  g_test_add_func ("/model/override-needs-landmarks", test_override_needs_landmarks);
  g_test_add_func ("/model/step-does-not-allocate", test_step_does_not_allocate);
  g_test_add_func ("/model/fuzz", test_fuzz);
  g_test_add_func ("/model/extreme-tokens", test_extreme_tokens);
  g_test_add_func ("/model/memory-budget", test_memory_budget);
  g_test_add_func ("/model/cnn-ref-from-file", test_cnn_ref_from_file);
  int rc = g_test_run ();
  g_autoptr (GDir) d = g_dir_open (tmpdir, 0, NULL);
  const char *e;
  while (d && (e = g_dir_read_name (d))) {
    g_autofree char *p = g_build_filename (tmpdir, e, NULL);
    g_unlink (p);
  }
  g_rmdir (tmpdir);
  g_free (tmpdir);
  g_free (golden_dir);
  return rc;
}
