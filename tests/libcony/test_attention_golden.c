/* Attention layers against the float64 reference (training/conytrain/ref).
 *
 * One test per directory under tests/golden/attention/ (written by
 * training/gen_attention_golden.py): the layer described by the "config" metadata of
 * weights.safetensors is stepped through input.npy and every output row is compared to
 * expected.npy; cony_attention_forward_window() over the last n and n - 2 tokens is
 * compared to expected_window.npy and expected_window_short.npy. Error measure, per
 * step (one step's output rows): max |c - e| / max (1, max |e|), at most 1e-4. */
#include "cony/attention.h"
#include "cony/error.h"
#include "cony/npy.h"
#include "cony/safetensors.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#define TOLERANCE 1e-4

typedef struct {
  ConyAttentionConfig config;
  float *w
      [6]; /* in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias, q_landmarks, k_landmarks */
} GoldenLayer;

static void
golden_layer_clear (GoldenLayer *layer)
{
  for (guint i = 0; i < G_N_ELEMENTS (layer->w); i++)
    g_clear_pointer (&layer->w[i], g_free);
}

static gboolean
json_int (JsonObject *obj, const char *key, int *out, const char *path)
{
  JsonNode *node = json_object_get_member (obj, key);
  if (!node || json_node_get_value_type (node) != G_TYPE_INT64) {
    g_test_fail_printf ("%s: config key '%s' missing or not an integer", path, key);
    return FALSE;
  }
  *out = (int) json_node_get_int (node);
  return TRUE;
}

static const char *
json_string (JsonObject *obj, const char *key, const char *path)
{
  JsonNode *node = json_object_get_member (obj, key);
  if (!node || json_node_get_value_type (node) != G_TYPE_STRING) {
    g_test_fail_printf ("%s: config key '%s' missing or not a string", path, key);
    return NULL;
  }
  return json_node_get_string (node);
}

/* Reads the config and weights of a case; FALSE (test marked failed) on any problem. */
static gboolean
load_layer (const char *dir, GoldenLayer *layer)
{
  g_autofree char *path = g_build_filename (dir, "weights.safetensors", NULL);
  GError *error = NULL;
  g_autoptr (ConySafetensors) st = cony_safetensors_open (path, &error);
  g_assert_no_error (error);
  const char *text = cony_safetensors_metadata (st, "config");
  if (!text) {
    g_test_fail_printf ("%s: no 'config' metadata", path);
    return FALSE;
  }
  g_autoptr (JsonParser) parser = json_parser_new ();
  json_parser_load_from_data (parser, text, -1, &error);
  g_assert_no_error (error);
  JsonNode *root = json_parser_get_root (parser);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (root));
  JsonObject *obj = json_node_get_object (root);

  ConyAttentionConfig *c = &layer->config;
  memset (c, 0, sizeof *c);
  const char *variant = json_string (obj, "variant", path);
  const char *pinv = json_string (obj, "pinv", path);
  if (!variant || !pinv || !json_int (obj, "d", &c->d, path)
      || !json_int (obj, "heads", &c->heads, path) || !json_int (obj, "window", &c->window, path)
      || !json_int (obj, "landmarks", &c->landmarks, path)
      || !json_int (obj, "pinv_iterations", &c->pinv_iterations, path))
    return FALSE;
  if (!cony_attention_variant_from_name (variant, &c->variant)) {
    g_test_fail_printf ("%s: unknown variant '%s'", path, variant);
    return FALSE;
  }
  g_assert_cmpstr (cony_attention_variant_name (c->variant), ==, variant);
  if (g_str_equal (pinv, "exact"))
    c->pinv = CONY_PINV_EXACT;
  else if (g_str_equal (pinv, "iterative"))
    c->pinv = CONY_PINV_ITERATIVE;
  else {
    g_test_fail_printf ("%s: unknown pinv '%s'", path, pinv);
    return FALSE;
  }
  c->retroactive = json_object_get_boolean_member_with_default (obj, "retroactive", FALSE);
  /* the variant's own settings by their keys (vcc's); absent: 0, the default */
  for (int i = 0; i < cony_attention_variant_n_settings (c->variant); i++)
    c->settings[i] = (int) json_object_get_int_member_with_default (obj,
        cony_attention_variant_setting (c->variant, i)->key, 0);
  g_assert_true (c->heads > 0 && c->d % c->heads == 0);

  gsize d = c->d, hd = c->d / c->heads;
  const char *names[6] = { "in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias",
    "q_landmarks", "k_landmarks" };
  const gsize shapes[6][3] = { { 3 * d, d }, { 3 * d }, { d, d }, { d },
    { c->heads, c->landmarks, hd }, { c->heads, c->landmarks, hd } };
  const int ndims[6] = { 2, 1, 2, 1, 3, 3 };
  guint n_needed = cony_attention_variant_uses_fixed_landmarks (c->variant) ? 6 : 4;
  for (guint i = 0; i < n_needed; i++) {
    layer->w[i] = cony_safetensors_get_f32 (st, names[i], ndims[i], shapes[i], &error);
    g_assert_no_error (error);
  }
  return TRUE;
}

static ConyNpyArray *
load_npy (const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  GError *error = NULL;
  ConyNpyArray *a = cony_npy_load (path, &error);
  g_assert_no_error (error);
  return a;
}

/* Worst step of max |c - e| / max (1, max |e|), the maxima taken over one step's rows. */
typedef struct {
  double worst_err, worst_c, worst_e, worst_ref;
  gsize worst_step, worst_index; /* index within the step's rows × d values */
  gboolean finite;
} Comparison;

static void
compare_step (Comparison *cmp, const float *got, const float *want, gsize count, gsize step)
{
  double max_diff = 0.0, max_ref = 0.0;
  gsize worst = 0;
  for (gsize i = 0; i < count; i++) {
    if (!isfinite (got[i]))
      cmp->finite = FALSE;
    double diff = fabs ((double) got[i] - (double) want[i]);
    if (!(diff <= max_diff)) { /* also catches NaN */
      max_diff = isnan (diff) ? INFINITY : diff;
      worst = i;
    }
    max_ref = MAX (max_ref, fabs ((double) want[i]));
  }
  double err = max_diff / MAX (1.0, max_ref);
  if (err > cmp->worst_err || (step == 0 && cmp->worst_err == 0.0)) {
    cmp->worst_err = err;
    cmp->worst_step = step;
    cmp->worst_index = worst;
    cmp->worst_c = got[worst];
    cmp->worst_e = want[worst];
    cmp->worst_ref = max_ref;
  }
}

/* Reports and checks one comparison; @d is the row length. */
static void
check (const char *what, const char *name, const Comparison *cmp, int d)
{
  double err = cmp->finite ? cmp->worst_err : INFINITY;
  gsize row = cmp->worst_index / d, col = cmp->worst_index % d;
  g_test_message ("%s %s: relative error %.3g (worst at step %" G_GSIZE_FORMAT
                  " row %" G_GSIZE_FORMAT " col %" G_GSIZE_FORMAT
                  ": got %.7g, expected %.7g; max |expected| of the step %.3g)",
      name, what, err, cmp->worst_step, row, col, cmp->worst_c, cmp->worst_e, cmp->worst_ref);
  if (!(err <= TOLERANCE))
    g_test_fail_printf ("%s %s: relative error %.3g > %g at step %" G_GSIZE_FORMAT
                        " row %" G_GSIZE_FORMAT " col %" G_GSIZE_FORMAT
                        " (got %.7g, expected %.7g)%s",
        name, what, err, TOLERANCE, cmp->worst_step, row, col, cmp->worst_c, cmp->worst_e,
        cmp->finite ? "" : "; non-finite output");
}

static void
test_golden_case (gconstpointer data)
{
  const char *dir = data;
  g_autofree char *name = g_path_get_basename (dir);
  GoldenLayer layer = { 0 };
  if (!load_layer (dir, &layer)) {
    golden_layer_clear (&layer);
    return;
  }
  const ConyAttentionConfig *c = &layer.config;
  const int d = c->d, n = c->window;
  g_autoptr (ConyNpyArray) input = load_npy (dir, "input.npy");
  g_autoptr (ConyNpyArray) expected = load_npy (dir, "expected.npy");
  g_autoptr (ConyNpyArray) expected_window = load_npy (dir, "expected_window.npy");
  g_autoptr (ConyNpyArray) expected_short = load_npy (dir, "expected_window_short.npy");

  const int rows = c->retroactive ? n : 1;
  g_assert_cmpint (input->ndim, ==, 2);
  g_assert_cmpuint (input->shape[1], ==, (gsize) d);
  const gsize T = input->shape[0];
  g_assert_cmpuint (T, >=, (gsize) n);
  g_assert_cmpuint (cony_npy_array_numel (expected), ==, T * rows * d);
  g_assert_cmpuint (cony_npy_array_numel (expected_window), ==, (gsize) rows * d);
  g_assert_cmpuint (cony_npy_array_numel (expected_short), ==, (gsize) rows * d);

  ConyAttentionWeights weights = {
    .in_proj_weight = layer.w[0],
    .in_proj_bias = layer.w[1],
    .out_proj_weight = layer.w[2],
    .out_proj_bias = layer.w[3],
    .q_landmarks = layer.w[4],
    .k_landmarks = layer.w[5],
  };
  GError *error = NULL;
  g_autoptr (ConyAttention) att = cony_attention_new (c, &weights, &error);
  g_assert_no_error (error);
  g_assert_nonnull (att);
  g_assert_cmpint (cony_attention_output_rows (att), ==, rows);

  /* The stream, then the same stream again after a reset. */
  g_autofree float *out = g_new0 (float, (gsize) rows *d);
  for (int pass = 0; pass < 2; pass++) {
    Comparison cmp = { .finite = TRUE };
    g_assert_cmpuint (cony_attention_steps (att), ==, 0);
    for (gsize t = 0; t < T; t++) {
      cony_attention_step (att, input->data + t * d, out);
      compare_step (&cmp, out, expected->data + t * rows * d, (gsize) rows * d, t);
    }
    g_assert_cmpuint (cony_attention_steps (att), ==, T);
    check (pass == 0 ? "steps" : "steps after reset", name, &cmp, d);
    cony_attention_reset (att);
  }

  /* Forward over the last n and n - 2 tokens, with the windowed counterpart. */
  const int sizes[2] = { n, MAX (1, n - 2) };
  ConyNpyArray *wants[2] = { expected_window, expected_short };
  for (int i = 0; i < 2; i++) {
    Comparison cmp = { .finite = TRUE };
    memset (out, 0xff, sizeof (float) * rows * d); /* NaN: rows not written are caught */
    cony_attention_forward_window (att, input->data + (T - sizes[i]) * d, sizes[i], out);
    compare_step (&cmp, out, wants[i]->data, (gsize) rows * d, 0);
    check (i == 0 ? "forward_window(n)" : "forward_window(n-2)", name, &cmp, d);
  }
  /* forward_window does not touch the stream state. */
  g_assert_cmpuint (cony_attention_steps (att), ==, 0);
  golden_layer_clear (&layer);
}

static void
test_golden_present (gconstpointer data)
{
  /* The directory must exist and hold cases: an empty run must not pass silently. */
  g_assert_cmpuint (GPOINTER_TO_UINT (data), >=, 30);
}

static int
compare_paths (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  const char *root = g_getenv ("CONY_SOURCE_ROOT");
  g_autofree char *golden = g_build_filename (root ? root : ".", "tests", "golden", "attention",
      NULL);
  GPtrArray *dirs = g_ptr_array_new_with_free_func (g_free);
  GDir *gdir = g_dir_open (golden, 0, NULL);
  if (gdir) {
    const char *entry;
    while ((entry = g_dir_read_name (gdir))) {
      char *dir = g_build_filename (golden, entry, NULL);
      g_autofree char *st = g_build_filename (dir, "weights.safetensors", NULL);
      if (g_file_test (st, G_FILE_TEST_IS_REGULAR))
        g_ptr_array_add (dirs, dir);
      else
        g_free (dir);
    }
    g_dir_close (gdir);
  }
  g_ptr_array_sort (dirs, compare_paths);
  g_test_add_data_func ("/attention-golden/cases-present", GUINT_TO_POINTER (dirs->len),
      test_golden_present);
  for (guint i = 0; i < dirs->len; i++) {
    g_autofree char *base = g_path_get_basename (dirs->pdata[i]);
    g_autofree char *test_path = g_strconcat ("/attention-golden/", base, NULL);
    g_test_add_data_func (test_path, dirs->pdata[i], test_golden_case);
  }
  int rc = g_test_run ();
  g_ptr_array_unref (dirs);
  return rc;
}
