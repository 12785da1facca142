/* CNN engine: reading weights and metadata from model files, and random weights;
 * the helpers every network loader uses (see cnn-private.h). */
#include "cnn-private.h"
#include "cony/error.h"
#include "cony/labels.h"
#include "cony/safetensors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <json-glib/json-glib.h>

/* Torch conv weight (out, in, 3, 3) -> our (9 * in) x out im2col layout. */
float *
cnn_conv_weight_from_torch (const float *t, guint out, guint in)
{
  float *w = g_new (float, (gsize) 9 * in * out);
  for (guint o = 0; o < out; o++)
    for (guint i = 0; i < in; i++)
      for (guint k = 0; k < 9; k++)
        w[((gsize) k * in + i) * out + o] = t[((gsize) o * in + i) * 9 + k];
  return w;
}

gboolean
cnn_meta_uint (const ConySafetensors *st, const char *key, guint def, guint *out, GError **error)
{
  const char *v = cony_safetensors_metadata (st, key);
  if (v == NULL) {
    *out = def;
    return TRUE;
  }
  char *end = NULL;
  guint64 x = g_ascii_strtoull (v, &end, 10);
  if (end == v || *end != '\0' || x == 0 || x > 65536) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: metadata %s = \"%s\" is not a positive integer <= 65536", cony_safetensors_path (st),
        key, v);
    return FALSE;
  }
  *out = (guint) x;
  return TRUE;
}

gboolean
cnn_meta_bool (const ConySafetensors *st, const char *key, gboolean def, gboolean *out,
    GError **error)
{
  const char *v = cony_safetensors_metadata (st, key);
  if (v == NULL) {
    *out = def;
    return TRUE;
  }
  if (g_ascii_strcasecmp (v, "true") == 0 || strcmp (v, "1") == 0) {
    *out = TRUE;
    return TRUE;
  }
  if (g_ascii_strcasecmp (v, "false") == 0 || strcmp (v, "0") == 0) {
    *out = FALSE;
    return TRUE;
  }
  g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
      "%s: metadata %s = \"%s\", expected \"true\" or \"false\"", cony_safetensors_path (st), key,
      v);
  return FALSE;
}

/* A per-channel list "a,b,c" (or one value for every channel) of @n floats; NULL in
 * *out when the key is absent. Standard deviations (@positive) must be > 0. */
gboolean
cnn_meta_channels (const ConySafetensors *st, const char *key, guint n, gboolean positive,
    float **out, GError **error)
{
  *out = NULL;
  const char *v = cony_safetensors_metadata (st, key);
  if (v == NULL)
    return TRUE;
  g_auto (GStrv) parts = g_strsplit_set (v, ", \t[]", -1);
  g_autofree float *vals = g_new (float, n);
  guint k = 0;
  for (char **p = parts; *p; p++) {
    if (**p == '\0')
      continue;
    char *end = NULL;
    double x = g_ascii_strtod (*p, &end);
    /* Checked as the float the network uses: 1e39 is finite as a double but Inf as a
     * float, and a std whose reciprocal overflows would scale the input to Inf. */
    float xf = (float) x;
    if (end == *p || *end != '\0' || !isfinite (xf)
        || (positive && !(xf > 0.0f && isfinite (1.0f / xf))) || k >= n) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: metadata %s = \"%s\", expected 1 or %u comma-separated finite numbers%s",
          cony_safetensors_path (st), key, v, n, positive ? " > 0" : "");
      return FALSE;
    }
    vals[k++] = (float) x;
  }
  if (k != 1 && k != n) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: metadata %s = \"%s\" has %u values, expected 1 or %u (one per input channel)",
        cony_safetensors_path (st), key, v, k, n);
    return FALSE;
  }
  for (guint i = k; i < n; i++)
    vals[i] = vals[0];
  *out = g_steal_pointer (&vals);
  return TRUE;
}

/* Reads a 1-D bias of @n floats named @base.bias. */
float *
cnn_read_bias (const ConySafetensors *st, const char *base, guint n, GError **error)
{
  g_autofree char *name = g_strdup_printf ("%s.bias", base);
  gsize shape[1] = { n };
  return cony_safetensors_get_f32 (st, name, 1, shape, error);
}

/* An F16 tensor's values as they are (little-endian in the file); NaN and Inf
 * refused like cony_safetensors_get_f32() does. */
guint16 *
cnn_read_f16 (const char *path, const ConyTensorInfo *ti, GError **error)
{
  guint16 *h = g_new (guint16, MAX (ti->numel, 1));
  for (gsize i = 0; i < ti->numel; i++) {
    guint16 v;
    memcpy (&v, ti->data + 2 * i, 2);
    v = GUINT16_FROM_LE (v);
    if ((v & 0x7c00u) == 0x7c00u) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: tensor '%s' holds a non-finite value at flat index %" G_GSIZE_FORMAT, path, ti->name,
          i);
      g_free (h);
      return NULL;
    }
    h[i] = v;
  }
  return h;
}

/* ---------------------------------------------------------------- random numbers */

static guint64
splitmix (guint64 *s)
{
  guint64 z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void
cnn_fill_uniform (float *x, gsize n, float a, guint64 *s)
{
  for (gsize i = 0; i < n; i++)
    x[i] = a * ((float) (splitmix (s) >> 40) * (2.0f / 16777216.0f) - 1.0f);
}

static const char *
dtype_str (ConyDType d)
{
  static const char *names[] = { "F32", "F16", "F64", "I64", "I8", "U8" };
  return d < G_N_ELEMENTS (names) ? names[d] : "unsupported";
}

/* @base.weight as float32 in its file layout, checked against @shape (ndim
 * entries; shape[0] == 0 takes the file's count of output channels and
 * returns it there). F32/F16/F64 as they are; I8 times @base.weight_scale, one
 * F32 scale > 0 per output channel (dim 0), which I8 requires and the float
 * dtypes refuse. Non-finite values are refused. */
float *
cnn_read_weight (const ConySafetensors *st, const char *base, int ndim, gsize *shape,
    GError **error)
{
  const char *path = cony_safetensors_path (st);
  g_autofree char *wname = g_strdup_printf ("%s.weight", base);
  g_autofree char *sname = g_strdup_printf ("%s.weight_scale", base);
  const ConyTensorInfo *ti = cony_safetensors_find (st, wname);
  const ConyTensorInfo *si = cony_safetensors_find (st, sname);
  if (ti != NULL && shape[0] == 0 && ti->ndim == ndim)
    shape[0] = ti->shape[0];
  if (ti == NULL || ti->ndim != ndim || memcmp (ti->shape, shape, ndim * sizeof (gsize)) != 0
      || shape[0] == 0) {
    g_autofree char *want = cony_safetensors_shape_string (ndim, shape);
    g_autofree char *got = ti ? cony_safetensors_shape_string (ti->ndim, ti->shape) : NULL;
    if (shape[0] == 0)
      want[1] = 'N'; /* "(N, ...": any positive count */
    g_set_error (error, CONY_ERROR, ti ? CONY_ERROR_SHAPE : CONY_ERROR_MISSING,
        "%s: tensor %s %s%s, expected shape %s", path, wname, ti ? "has shape " : "is missing",
        ti ? got : "", want);
    return NULL;
  }
  gboolean quantised = ti->dtype == CONY_DTYPE_I8 || ti->dtype == CONY_DTYPE_U8;
  g_autofree char *zname = g_strdup_printf ("%s.weight_zero_point", base);
  const ConyTensorInfo *zi = cony_safetensors_find (st, zname);
  if ((zi != NULL) != (ti->dtype == CONY_DTYPE_U8)) {
    g_set_error (error, CONY_ERROR, zi ? CONY_ERROR_INVALID : CONY_ERROR_MISSING,
        zi ? "%s: tensor %s goes with U8 weights only, but %s is %s"
           : "%s: tensor %s (U8, one zero point per output channel) is missing for the U8 %s%s",
        path, zname, wname, zi ? dtype_str (ti->dtype) : "");
    return NULL;
  }
  if (!quantised) {
    if (si != NULL) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: tensor %s goes with I8 weights only (or U8), but %s is %s", path, sname, wname,
          dtype_str (ti->dtype));
      return NULL;
    }
    if (ti->dtype != CONY_DTYPE_F32 && ti->dtype != CONY_DTYPE_F16 && ti->dtype != CONY_DTYPE_F64) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: tensor %s has dtype %s, expected F32, F16, I8 or U8", path, wname,
          dtype_str (ti->dtype));
      return NULL;
    }
    return cony_safetensors_get_f32 (st, wname, ndim, shape, error);
  }
  if (si == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
        "%s: tensor %s is %s but its scales %s (F32, shape (%" G_GSIZE_FORMAT
        "), one per output channel) are missing",
        path, wname, dtype_str (ti->dtype), sname, shape[0]);
    return NULL;
  }
  g_autofree float *scale = cony_safetensors_get_f32 (st, sname, 1, shape, error);
  if (scale == NULL)
    return NULL;
  for (gsize o = 0; o < shape[0]; o++)
    if (!(scale[o] > 0.0f)) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: tensor %s holds %g at index %" G_GSIZE_FORMAT ", scales must be > 0", path, sname,
          scale[o], o);
      return NULL;
    }
  gsize per = ti->numel / shape[0];
  float *w = g_new (float, MAX (ti->numel, 1));
  if (ti->dtype == CONY_DTYPE_I8) {
    for (gsize i = 0; i < ti->numel; i++)
      w[i] = (float) (gint8) ti->data[i] * scale[i / per];
    return w;
  }
  /* U8 (TFLite's uint8 asymmetric): (q - zero_point) x scale; q - zp is exact. */
  if (zi->dtype != CONY_DTYPE_U8 || zi->ndim != 1 || zi->shape[0] != shape[0]) {
    g_autofree char *got = cony_safetensors_shape_string (zi->ndim, zi->shape);
    g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
        "%s: tensor %s is %s %s, expected U8 (%" G_GSIZE_FORMAT ")", path, zname,
        dtype_str (zi->dtype), got, shape[0]);
    g_free (w);
    return NULL;
  }
  for (gsize i = 0; i < ti->numel; i++)
    w[i] = (float) ((int) ti->data[i] - (int) zi->data[i / per]) * scale[i / per];
  return w;
}

/* Keeps the file's metadata and parses `labels` (a JSON list of strings, one per
 * score). */
gboolean
cnn_read_labels_and_metadata (CnnWeights *cnn, const ConySafetensors *st, GError **error)
{
  guint n;
  g_autofree const char **keys = cony_safetensors_metadata_keys (st, &n);
  cnn->metadata = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  for (guint i = 0; i < n; i++)
    g_hash_table_insert (cnn->metadata, g_strdup (keys[i]),
        g_strdup (cony_safetensors_metadata (st, keys[i])));
  const char *text = cony_safetensors_metadata (st, "labels");
  if (text == NULL)
    return TRUE;
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autofree char *marked = cony_json_mark_nul (text);
  JsonNode *root = json_parser_load_from_data (parser, marked, -1, NULL)
      ? json_parser_get_root (parser)
      : NULL;
  JsonArray *arr = root && JSON_NODE_HOLDS_ARRAY (root) ? json_node_get_array (root) : NULL;
  guint len = arr ? json_array_get_length (arr) : 0;
  GPtrArray *labels = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < len; i++) {
    JsonNode *e = json_array_get_element (arr, i);
    if (!JSON_NODE_HOLDS_VALUE (e) || json_node_get_value_type (e) != G_TYPE_STRING)
      break;
    g_ptr_array_add (labels, g_strdup (json_node_get_string (e)));
  }
  if (arr == NULL || labels->len != len || len != cnn->out_dim) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: metadata labels must be a JSON list of %u strings (one per output); "
        "it has %s%u",
        cnn->source, cnn->out_dim, arr ? "" : "no list, ", arr ? len : 0);
    g_ptr_array_free (labels, TRUE);
    return FALSE;
  }
  for (guint i = 0; i < len; i++) {
    const char *label = g_ptr_array_index (labels, i);
    if (!cony_label_check (label, strlen (label), error)) {
      g_prefix_error (error, "%s: metadata labels[%u] ", cnn->source, i);
      g_ptr_array_free (labels, TRUE);
      return FALSE;
    }
  }
  g_ptr_array_add (labels, NULL);
  cnn->labels = (char **) g_ptr_array_free (labels, FALSE);
  return TRUE;
}

/* Torch-layout weights (@ndim, @shape, shape[0] = 0: the file's count) and the
 * bias of layer @base. Random weights are He-scaled uniform, biases small. */
gboolean
cnn_layer_tensors (CnnTensorSource *src, const char *base, int ndim, gsize *shape, float **w,
    float **b, GError **error)
{
  if (src->st != NULL) {
    *w = cnn_read_weight (src->st, base, ndim, shape, error);
    *b = *w ? cnn_read_bias (src->st, base, (guint) shape[0], error) : NULL;
    if (*b == NULL)
      g_clear_pointer (w, g_free);
    return *b != NULL;
  }
  gsize n = 1;
  for (int d = 0; d < ndim; d++)
    n *= shape[d];
  *w = g_new (float, n);
  *b = g_new (float, shape[0]);
  cnn_fill_uniform (*w, n, sqrtf (6.0f / (n / shape[0])), &src->rng);
  cnn_fill_uniform (*b, shape[0], 0.05f, &src->rng);
  return TRUE;
}
