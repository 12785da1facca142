/* CNN engine: model files and random networks (see include/cony/cnn.h). */
#include "cnn-private.h"
#include "cony/error.h"
#include "cony/labels.h"
#include "cony/safetensors.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <json-glib/json-glib.h>

/* Torch conv weight (out, in, 3, 3) -> our (9 * in) x out im2col layout. */
static float *
conv_weight_from_torch (const float *t, guint out, guint in)
{
  float *w = g_new (float, (gsize) 9 * in * out);
  for (guint o = 0; o < out; o++)
    for (guint i = 0; i < in; i++)
      for (guint k = 0; k < 9; k++)
        w[((gsize) k * in + i) * out + o] = t[((gsize) o * in + i) * 9 + k];
  return w;
}

/* ---------------------------------------------------------------- loading */

typedef struct {
  guint index;
  gboolean has_w, has_b;
} IndexEntry;

static gint
cmp_index (gconstpointer a, gconstpointer b)
{
  guint x = ((const IndexEntry *) a)->index, y = ((const IndexEntry *) b)->index;
  return x < y ? -1 : x > y;
}

/* Parses "prefix.K.weight" / "prefix.K.bias". */
static gboolean
parse_indexed (const char *name, const char *prefix, guint *index, gboolean *is_weight)
{
  gsize pl = strlen (prefix);
  if (strncmp (name, prefix, pl) != 0 || name[pl] != '.')
    return FALSE;
  const char *p = name + pl + 1;
  /* canonical decimal only: "features.00.weight" would later be looked up as
   * "features.0.weight", which may not exist (a NULL dereference, found by fuzzing) */
  if (!g_ascii_isdigit (*p) || (p[0] == '0' && g_ascii_isdigit (p[1])))
    return FALSE;
  char *end = NULL;
  guint64 v = g_ascii_strtoull (p, &end, 10);
  if (v > 100000)
    return FALSE;
  if (strcmp (end, ".weight") == 0)
    *is_weight = TRUE;
  else if (strcmp (end, ".bias") == 0)
    *is_weight = FALSE;
  else
    return FALSE;
  *index = (guint) v;
  return TRUE;
}

static void
add_index (GArray *arr, guint index, gboolean is_weight)
{
  for (guint i = 0; i < arr->len; i++) {
    IndexEntry *e = &g_array_index (arr, IndexEntry, i);
    if (e->index == index) {
      if (is_weight)
        e->has_w = TRUE;
      else
        e->has_b = TRUE;
      return;
    }
  }
  IndexEntry e = { index, is_weight, !is_weight };
  g_array_append_val (arr, e);
}

static gboolean
meta_uint (const ConySafetensors *st, const char *key, guint def, guint *out, GError **error)
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

static gboolean
meta_bool (const ConySafetensors *st, const char *key, gboolean def, gboolean *out, GError **error)
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
static gboolean
meta_channels (const ConySafetensors *st, const char *key, guint n, gboolean positive, float **out,
    GError **error)
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
static float *
read_bias (const ConySafetensors *st, const char *base, guint n, GError **error)
{
  g_autofree char *name = g_strdup_printf ("%s.bias", base);
  gsize shape[1] = { n };
  return cony_safetensors_get_f32 (st, name, 1, shape, error);
}

static gboolean
read_pca (const ConySafetensors *st, guint d, gboolean required, float **pca_e, float **pca_mu,
    GError **error)
{
  const char *path = cony_safetensors_path (st);
  const char *en = "pca_eigen_vectors", *mn = "pca_means";
  /* Both spellings: one set would go unread (and unchecked). */
  if ((cony_safetensors_find (st, en) || cony_safetensors_find (st, mn))
      && (cony_safetensors_find (st, "pproc.pca_eigen_vectors")
          || cony_safetensors_find (st, "pproc.pca_means"))) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: holds both pca_* and pproc.pca_* tensors; keep one set", path);
    return FALSE;
  }
  if (cony_safetensors_find (st, en) == NULL
      && cony_safetensors_find (st, "pproc.pca_eigen_vectors")) {
    en = "pproc.pca_eigen_vectors";
    mn = "pproc.pca_means";
  }
  const ConyTensorInfo *ei = cony_safetensors_find (st, en);
  const ConyTensorInfo *mi = cony_safetensors_find (st, mn);
  if (ei == NULL && mi == NULL) {
    if (required)
      g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
          "%s: no tensor pca_eigen_vectors (%u, %u) / pca_means (%u)", path, d, d, d);
    return !required;
  }
  if (ei == NULL || mi == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
        "%s: tensor %s is missing (the PCA needs both %s and %s)", path, ei == NULL ? en : mn, en,
        mn);
    return FALSE;
  }
  gsize eshape[2] = { d, d };
  float *e = cony_safetensors_get_f32 (st, en, 2, eshape, error);
  if (e == NULL)
    return FALSE;
  gsize mshape[2] = { d, 1 };
  float *m = cony_safetensors_get_f32 (st, mn, mi->ndim == 2 ? 2 : 1, mshape, error);
  if (m == NULL) {
    g_free (e);
    return FALSE;
  }
  g_free (*pca_e);
  g_free (*pca_mu);
  *pca_e = e;
  *pca_mu = m;
  return TRUE;
}

/* An F16 tensor's values as they are (little-endian in the file); NaN and Inf
 * refused like cony_safetensors_get_f32() does. */
static guint16 *
read_f16 (const char *path, const ConyTensorInfo *ti, GError **error)
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

static void
fill_uniform (float *x, gsize n, float a, guint64 *s)
{
  for (gsize i = 0; i < n; i++)
    x[i] = a * ((float) (splitmix (s) >> 40) * (2.0f / 16777216.0f) - 1.0f);
}

/* ---------------------------------------------------------------- MobileNet-v1 */

static const struct {
  const char *word;
  LayerKind kind;
  guint stride;
} mobilenet_words[] = {
  { "conv3x3s1", LAYER_CONV, 1 },
  { "conv3x3s2", LAYER_CONV, 2 },
  { "dw3x3s1", LAYER_DW, 1 },
  { "dw3x3s2", LAYER_DW, 2 },
  { "conv1x1", LAYER_PW, 1 },
  { "gap", LAYER_GAP, 1 },
  { "fc", LAYER_FC, 1 },
  { "sigmoid", LAYER_SIGMOID, 1 },
};

static char *
shape_str (int ndim, const gsize *shape)
{
  GString *s = g_string_new ("(");
  for (int d = 0; d < ndim; d++)
    g_string_append_printf (s, "%s%" G_GSIZE_FORMAT, d ? ", " : "", shape[d]);
  g_string_append_c (s, ')');
  return g_string_free (s, FALSE);
}

static const char *
dtype_str (ConyDType d)
{
  static const char *names[] = { "F32", "F16", "F64", "I64", "I8" };
  return d < G_N_ELEMENTS (names) ? names[d] : "unsupported";
}

/* @base.weight as float32 in its file layout, checked against @shape (ndim
 * entries; shape[0] == 0 takes the file's count of output channels and
 * returns it there). F32/F16/F64 as they are; I8 times @base.weight_scale, one
 * F32 scale > 0 per output channel (dim 0), which I8 requires and the float
 * dtypes refuse. Non-finite values are refused. */
static float *
read_weight (const ConySafetensors *st, const char *base, int ndim, gsize *shape, GError **error)
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
    g_autofree char *want = shape_str (ndim, shape);
    g_autofree char *got = ti ? shape_str (ti->ndim, ti->shape) : NULL;
    if (shape[0] == 0)
      want[1] = 'N'; /* "(N, ...": any positive count */
    g_set_error (error, CONY_ERROR, ti ? CONY_ERROR_SHAPE : CONY_ERROR_MISSING,
        "%s: tensor %s %s%s, expected shape %s", path, wname, ti ? "has shape " : "is missing",
        ti ? got : "", want);
    return NULL;
  }
  if (ti->dtype != CONY_DTYPE_I8) {
    if (si != NULL) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: tensor %s goes with I8 weights only, but %s is %s", path, sname, wname,
          dtype_str (ti->dtype));
      return NULL;
    }
    if (ti->dtype != CONY_DTYPE_F32 && ti->dtype != CONY_DTYPE_F16 && ti->dtype != CONY_DTYPE_F64) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: tensor %s has dtype %s, expected F32, F16 or I8", path, wname,
          dtype_str (ti->dtype));
      return NULL;
    }
    return cony_safetensors_get_f32 (st, wname, ndim, shape, error);
  }
  if (si == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
        "%s: tensor %s is I8 but its scales %s (F32, shape (%" G_GSIZE_FORMAT
        "), one per output channel) are missing",
        path, wname, sname, shape[0]);
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
  for (gsize i = 0; i < ti->numel; i++)
    w[i] = (float) (gint8) ti->data[i] * scale[i / per];
  return w;
}

/* Where a MobileNet's weights come from: a file, or (st NULL) random numbers. */
typedef struct {
  const ConySafetensors *st;
  guint64 rng;
} WeightSource;

/* Torch-layout weights (@ndim, @shape, shape[0] = 0: the file's count) and the
 * bias of layer @base. Random weights are He-scaled uniform, biases small. */
static gboolean
layer_tensors (WeightSource *src, const char *base, int ndim, gsize *shape, float **w, float **b,
    GError **error)
{
  if (src->st != NULL) {
    *w = read_weight (src->st, base, ndim, shape, error);
    *b = *w ? read_bias (src->st, base, (guint) shape[0], error) : NULL;
    if (*b == NULL)
      g_clear_pointer (w, g_free);
    return *b != NULL;
  }
  gsize n = 1;
  for (int d = 0; d < ndim; d++)
    n *= shape[d];
  *w = g_new (float, n);
  *b = g_new (float, shape[0]);
  fill_uniform (*w, n, sqrtf (6.0f / (n / shape[0])), &src->rng);
  fill_uniform (*b, shape[0], 0.05f, &src->rng);
  return TRUE;
}

/* A pointwise layer whose file weights are I8 also keeps them as int8 (out x in)
 * with their scales: the packed-weight kernel then reads a quarter of the bytes
 * (see pw_forward()). Both were checked by read_weight(). */
static gboolean
keep_int8 (const WeightSource *src, Layer *l, GError **error)
{
  g_autofree char *wname = g_strdup_printf ("%s.weight", l->name);
  g_autofree char *sname = g_strdup_printf ("%s.weight_scale", l->name);
  const ConyTensorInfo *ti = src->st ? cony_safetensors_find (src->st, wname) : NULL;
  if (ti == NULL || ti->dtype != CONY_DTYPE_I8)
    return TRUE;
  gsize shape[1] = { ti->shape[0] };
  l->qscale = cony_safetensors_get_f32 (src->st, sname, 1, shape, error);
  l->q = (gint8 *) g_memdup2 (ti->data, ti->numel);
  return l->qscale != NULL;
}

/* Builds the layers of a MobileNet from its layer words (the `layers` metadata;
 * for random networks each conv3x3/conv1x1/fc word carries its width, "conv1x1:64").
 * Tensors of a file that no layer reads are refused. */
static gboolean
mobilenet_layers (CnnWeights *cnn, WeightSource *src, const char *words, float relu_max,
    GError **error)
{
  g_auto (GStrv) tokens = g_strsplit_set (words, " \t\r\n", -1);
  g_autoptr (GHashTable) used = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  GArray *layers = g_array_new (FALSE, TRUE, sizeof (Layer));
  guint c = cnn->in_c, h = cnn->in_h, w = cnn->in_w, index = 0, pad;
  gboolean ok = TRUE;
  for (char **t = tokens; ok && *t; t++) {
    if (**t == '\0')
      continue;
    g_autofree char *word = g_strdup (*t);
    guint64 width = 0;
    char *colon = strchr (word, ':');
    if (colon != NULL && src->st == NULL) {
      *colon = '\0';
      char *end = NULL;
      width = g_ascii_strtoull (colon + 1, &end, 10);
      if (*end != '\0' || width == 0 || width > 65536)
        width = G_MAXUINT64;
    }
    guint k = 0;
    while (k < G_N_ELEMENTS (mobilenet_words) && strcmp (word, mobilenet_words[k].word) != 0)
      k++;
    LayerKind kind = k < G_N_ELEMENTS (mobilenet_words) ? mobilenet_words[k].kind : LAYER_POOL;
    gboolean wants_width = kind == LAYER_CONV || kind == LAYER_PW || kind == LAYER_FC;
    if (kind == LAYER_POOL || width == G_MAXUINT64
        || (src->st == NULL && wants_width != (width > 0))) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: layer word %u \"%s\" is not a MobileNet layer (expected conv3x3s1, "
          "conv3x3s2, dw3x3s1, dw3x3s2, conv1x1, gap, fc, sigmoid%s)",
          cnn->source, index, *t, src->st ? "" : "; conv and fc words with \":WIDTH\"");
      ok = FALSE;
      break;
    }
    Layer l = { .kind = kind,
      .name = g_strdup_printf ("layers.%u", index),
      .in_c = c,
      .out_c = c,
      .stride = mobilenet_words[k].stride,
      .relu = kind != LAYER_FC,
      .relu_max = relu_max };
    gsize shape[4] = { width, c, 3, 3 };
    float *tw = NULL;
    switch (kind) {
      case LAYER_CONV:
        ok = layer_tensors (src, l.name, 4, shape, &tw, &l.b, error);
        if (ok)
          l.w = conv_weight_from_torch (tw, (guint) shape[0], c);
        h = cnn_same_out (h, l.stride, &pad);
        w = cnn_same_out (w, l.stride, &pad);
        break;
      case LAYER_DW:
        shape[0] = c;
        shape[1] = 1;
        ok = layer_tensors (src, l.name, 4, shape, &tw, &l.b, error);
        if (ok) {
          /* (C, 1, 3, 3) -> 9 x C */
          l.w = g_new (float, (gsize) 9 * c);
          for (guint ch = 0; ch < c; ch++)
            for (guint q = 0; q < 9; q++)
              l.w[(gsize) q * c + ch] = tw[(gsize) ch * 9 + q];
        }
        h = cnn_same_out (h, l.stride, &pad);
        w = cnn_same_out (w, l.stride, &pad);
        break;
      case LAYER_PW:
        shape[2] = shape[3] = 1;
        ok = layer_tensors (src, l.name, 4, shape, &tw, &l.b, error);
        if (ok) {
          /* (out, in, 1, 1) -> in x out */
          guint out = (guint) shape[0];
          l.w = g_new (float, (gsize) c *out);
          for (guint o = 0; o < out; o++)
            for (guint i = 0; i < c; i++)
              l.w[(gsize) i * out + o] = tw[(gsize) o * c + i];
          ok = keep_int8 (src, &l, error);
        }
        break;
      case LAYER_FC:
        shape[1] = (gsize) h * w * c;
        ok = shape[1] <= G_MAXINT && layer_tensors (src, l.name, 2, shape, &l.w, &l.b, error);
        l.in_c = (guint) shape[1];
        h = w = 1;
        break;
      case LAYER_GAP: h = w = 1; break;
      default: break;
    }
    g_free (tw);
    if (ok && (kind == LAYER_CONV || kind == LAYER_PW || kind == LAYER_FC))
      c = l.out_c = (guint) shape[0];
    for (guint s = 0; s < 3 && l.kind != LAYER_GAP && l.kind != LAYER_SIGMOID; s++)
      g_hash_table_add (used,
          g_strdup_printf ("%s.%s", l.name,
              (const char *[]){ "weight", "bias", "weight_scale" }[s]));
    g_array_append_val (layers, l);
    index++;
  }
  cnn->n_layers = layers->len;
  cnn->layers = (Layer *) g_array_free (layers, FALSE);
  if (ok && cnn->n_layers == 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING, "%s: metadata layers lists no layer",
        cnn->source);
    ok = FALSE;
  }
  for (guint i = 0; ok && src->st != NULL && i < cony_safetensors_n_tensors (src->st); i++) {
    const char *name = cony_safetensors_tensor (src->st, i)->name;
    if (!g_hash_table_contains (used, name)) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: unexpected tensor %s (a MobileNet file holds layers.I.weight, .bias "
          "and .weight_scale of the layers its `layers` metadata lists)",
          cnn->source, name);
      ok = FALSE;
    }
  }
  cnn->mobilenet = TRUE;
  return ok;
}

static gboolean
load_mobilenet (CnnWeights *cnn, const ConySafetensors *st, GError **error)
{
  const char *act = cony_safetensors_metadata (st, "activation");
  const char *words = cony_safetensors_metadata (st, "layers");
  float relu_max = 6.0f;
  if (act != NULL && strcmp (act, "relu") == 0)
    relu_max = INFINITY;
  else if (act != NULL && strcmp (act, "relu6") != 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: metadata activation = \"%s\", expected \"relu6\" or \"relu\"", cnn->source, act);
    return FALSE;
  }
  if (words == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
        "%s: a network = mobilenet_v1 file needs the metadata `layers` (its layer list)",
        cnn->source);
    return FALSE;
  }
  WeightSource src = { .st = st };
  return mobilenet_layers (cnn, &src, words, relu_max, error);
}

/* Keeps the file's metadata and parses `labels` (a JSON list of strings, one per
 * score). */
static gboolean
read_labels_and_metadata (CnnWeights *cnn, const ConySafetensors *st, GError **error)
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

CnnWeights *
cnn_weights_load (const char *path, GError **error)
{
  g_autoptr (ConySafetensors) st = cony_safetensors_open (path, error);
  if (st == NULL)
    return NULL;

  g_autoptr (CnnWeights) cnn = cnn_weights_new ();
  cnn->source = g_strdup (path);
  if (!meta_uint (st, "input_height", 96, &cnn->in_h, error)
      || !meta_uint (st, "input_width", 64, &cnn->in_w, error)
      || !meta_uint (st, "input_channels", 1, &cnn->in_c, error)
      || !meta_bool (st, "final_relu", FALSE, &cnn->final_relu, error)
      || !meta_bool (st, "center_height", FALSE, &cnn->center_height, error))
    return NULL;
  if (!meta_channels (st, "input_mean", cnn->in_c, FALSE, &cnn->in_mean, error)
      || !meta_channels (st, "input_std", cnn->in_c, TRUE, &cnn->in_std, error))
    return NULL;
  if (cnn->in_mean != NULL || cnn->in_std != NULL) {
    /* One declared, the other defaults to 0 / 1. */
    if (cnn->in_mean == NULL)
      cnn->in_mean = g_new0 (float, cnn->in_c);
    if (cnn->in_std == NULL) {
      cnn->in_std = g_new (float, cnn->in_c);
      for (guint i = 0; i < cnn->in_c; i++)
        cnn->in_std[i] = 1.0f;
    }
  }
  const char *net = cony_safetensors_metadata (st, "network");
  if (net != NULL) {
    if (strcmp (net, "mobilenet_v1") != 0) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: metadata network = \"%s\", expected \"mobilenet_v1\" (or none for a "
          "VGG-style network)",
          path, net);
      return NULL;
    }
    if (!load_mobilenet (cnn, st, error) || !cnn_finish_geometry (cnn, error)
        || !read_labels_and_metadata (cnn, st, error))
      return NULL;
    return g_steal_pointer (&cnn);
  }
  const char *gp = cony_safetensors_metadata (st, "global_pool");
  if (gp != NULL && strcmp (gp, "avg") == 0)
    cnn->global_pool = TRUE;
  else if (gp != NULL && strcmp (gp, "none") != 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: metadata global_pool = \"%s\", expected \"avg\" or \"none\"", path, gp);
    return NULL;
  }
  /* trailing_pools: max-pools after the last conv (they leave no tensor). */
  guint trailing_meta = G_MAXUINT;
  const char *tp = cony_safetensors_metadata (st, "trailing_pools");
  if (tp != NULL) {
    char *end = NULL;
    guint64 x = g_ascii_strtoull (tp, &end, 10);
    if (end == tp || *end != '\0' || x > 16) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: metadata trailing_pools = \"%s\", expected an integer 0..16", path, tp);
      return NULL;
    }
    trailing_meta = (guint) x;
  }

  /* Sort the tensor names into conv and FC indices; refuse strangers. */
  g_autoptr (GArray) feats = g_array_new (FALSE, FALSE, sizeof (IndexEntry));
  g_autoptr (GArray) embs = g_array_new (FALSE, FALSE, sizeof (IndexEntry));
  for (guint i = 0; i < cony_safetensors_n_tensors (st); i++) {
    const char *name = cony_safetensors_tensor (st, i)->name;
    guint idx;
    gboolean is_w;
    if (parse_indexed (name, "features", &idx, &is_w))
      add_index (feats, idx, is_w);
    else if (parse_indexed (name, "embeddings", &idx, &is_w))
      add_index (embs, idx, is_w);
    else if (strcmp (name, "pca_eigen_vectors") == 0 || strcmp (name, "pca_means") == 0
        || strcmp (name, "pproc.pca_eigen_vectors") == 0 || strcmp (name, "pproc.pca_means") == 0)
      continue;
    else {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: unexpected tensor %s (expected torchvggish names features.K.weight/bias, "
          "embeddings.K.weight/bias, pca_eigen_vectors, pca_means)",
          path, name);
      return NULL;
    }
  }
  g_array_sort (feats, cmp_index);
  g_array_sort (embs, cmp_index);
  GArray *both[2] = { feats, embs };
  const char *prefix[2] = { "features", "embeddings" };
  for (int s = 0; s < 2; s++)
    for (guint i = 0; i < both[s]->len; i++) {
      IndexEntry *e = &g_array_index (both[s], IndexEntry, i);
      if (!e->has_w || !e->has_b) {
        g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING, "%s: tensor %s.%u.%s is missing", path,
            prefix[s], e->index, e->has_w ? "bias" : "weight");
        return NULL;
      }
    }
  if (embs->len == 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
        "%s: no fully connected layer (tensor embeddings.0.weight) found", path);
    return NULL;
  }

  /* Conv/pool list from the features indices. */
  GArray *layers = g_array_new (FALSE, TRUE, sizeof (Layer));
  guint expect_in = cnn->in_c;
  guint next = 0; /* the first index not yet accounted for */
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < feats->len; i++) {
    guint idx = g_array_index (feats, IndexEntry, i).index;
    if (i > 0 && idx < next) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: features.%u directly follows the conv features.%u: torchvggish's layout "
          "puts a ReLU at index %u",
          path, idx, idx - 1, idx);
      ok = FALSE;
      break;
    }
    for (guint p = next; p < idx; p++) {
      Layer pool = { .kind = LAYER_POOL, .name = g_strdup_printf ("features.%u (max-pool)", p) };
      g_array_append_val (layers, pool);
    }
    g_autofree char *base = g_strdup_printf ("features.%u", idx);
    g_autofree char *wname = g_strdup_printf ("%s.weight", base);
    const ConyTensorInfo *ti = cony_safetensors_find (st, wname);
    if (ti->ndim != 4 || ti->shape[2] != 3 || ti->shape[3] != 3 || ti->shape[1] != expect_in
        || ti->shape[0] == 0) {
      g_autoptr (GString) got = g_string_new ("(");
      for (int d = 0; d < ti->ndim; d++)
        g_string_append_printf (got, "%s%" G_GSIZE_FORMAT, d ? ", " : "", ti->shape[d]);
      g_string_append_c (got, ')');
      g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
          "%s: tensor %s has shape %s, expected (out, %u, 3, 3)", path, wname, got->str, expect_in);
      ok = FALSE;
      break;
    }
    guint out = (guint) ti->shape[0];
    gsize shape[4] = { out, expect_in, 3, 3 };
    g_autofree float *tw = cony_safetensors_get_f32 (st, wname, 4, shape, error);
    float *b = tw ? read_bias (st, base, out, error) : NULL;
    if (b == NULL) {
      ok = FALSE;
      break;
    }
    Layer conv = { .kind = LAYER_CONV,
      .name = g_steal_pointer (&base),
      .in_c = expect_in,
      .out_c = out,
      .relu = TRUE,
      .w = conv_weight_from_torch (tw, out, expect_in),
      .b = b };
    g_array_append_val (layers, conv);
    expect_in = out;
    next = idx + 2;
  }

  /* Trailing pools: as many as make the flattened size equal embeddings.0's input. */
  if (ok) {
    guint e0 = g_array_index (embs, IndexEntry, 0).index;
    g_autofree char *wname = g_strdup_printf ("embeddings.%u.weight", e0);
    const ConyTensorInfo *ti = cony_safetensors_find (st, wname);
    if (ti->ndim != 2 || ti->shape[0] == 0) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE, "%s: tensor %s must be 2-D (out, in)", path,
          wname);
      ok = FALSE;
    } else {
      guint h = cnn->in_h, w = cnn->in_w;
      for (guint i = 0; i < layers->len; i++)
        if (g_array_index (layers, Layer, i).kind == LAYER_POOL) {
          h /= 2;
          w /= 2;
        }
      guint trailing = G_MAXUINT;
      g_autoptr (GString) tried = g_string_new (NULL);
      /* With a global average pool the FC input is the channel count whatever the map
       * size, so the number of trailing pools comes from the metadata (default 0). */
      guint p_first = 0, p_last = 15;
      if (trailing_meta != G_MAXUINT || cnn->global_pool)
        p_first = p_last = trailing_meta != G_MAXUINT ? trailing_meta : 0;
      for (guint p = 0; p < p_first && h > 0 && w > 0; p++, h /= 2, w /= 2)
        ;
      for (guint p = p_first; h > 0 && w > 0 && p <= p_last; p++, h /= 2, w /= 2) {
        gsize flat = cnn->global_pool ? expect_in : (gsize) h * w * expect_in;
        g_string_append_printf (tried, "%s%" G_GSIZE_FORMAT " (%ux%ux%u, %u trailing pools)",
            tried->len ? ", " : "", flat, h, w, expect_in, p);
        if (flat == ti->shape[1]) {
          trailing = p;
          break;
        }
      }
      if (trailing == G_MAXUINT && tried->len == 0)
        g_string_append_printf (tried, "nothing (trailing_pools = %u pools the map away)", p_first);
      if (trailing == G_MAXUINT) {
        g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
            "%s: tensor %s has %" G_GSIZE_FORMAT " inputs, expected one of %s for a "
            "%ux%ux%u input",
            path, wname, ti->shape[1], tried->str, cnn->in_h, cnn->in_w, cnn->in_c);
        ok = FALSE;
      }
      for (guint p = 0; ok && p < trailing; p++) {
        Layer pool = { .kind = LAYER_POOL,
          .name = g_strdup_printf ("features.%u (max-pool)", next + p) };
        g_array_append_val (layers, pool);
      }
      if (ok && cnn->global_pool) {
        Layer gap = { .kind = LAYER_GAP, .name = g_strdup ("global average pool") };
        g_array_append_val (layers, gap);
      }
    }
  }

  /* FC layers. */
  for (guint i = 0; ok && i < embs->len; i++) {
    guint idx = g_array_index (embs, IndexEntry, i).index;
    g_autofree char *base = g_strdup_printf ("embeddings.%u", idx);
    g_autofree char *wname = g_strdup_printf ("%s.weight", base);
    const ConyTensorInfo *ti = cony_safetensors_find (st, wname);
    if (ti->ndim != 2 || ti->shape[0] == 0 || ti->shape[1] == 0 || ti->shape[0] > G_MAXINT
        || ti->shape[1] > G_MAXINT) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE, "%s: tensor %s must be 2-D (out, in)", path,
          wname);
      ok = FALSE;
      break;
    }
    gsize shape[2] = { ti->shape[0], ti->shape[1] };
    float *w = NULL;
    guint16 *w16 = NULL;
    if (ti->dtype == CONY_DTYPE_F16)
      w16 = read_f16 (path, ti, error); /* kept in F16: see fc_f16() */
    else
      w = cony_safetensors_get_f32 (st, wname, 2, shape, error);
    float *b = w || w16 ? read_bias (st, base, (guint) shape[0], error) : NULL;
    if (b == NULL) {
      g_free (w);
      g_free (w16);
      ok = FALSE;
      break;
    }
    gboolean last = i + 1 == embs->len;
    gboolean relu = last ? FALSE : g_array_index (embs, IndexEntry, i + 1).index >= idx + 2;
    Layer fc = { .kind = LAYER_FC,
      .name = g_steal_pointer (&base),
      .in_c = (guint) shape[1],
      .out_c = (guint) shape[0],
      .relu = relu,
      .w = w,
      .b = b };
    if (w16 != NULL)
      cony_gemv_matrix_init_f16 (&fc.w16, w16, (int) shape[0], (int) shape[1], TRUE);
    g_array_append_val (layers, fc);
  }

  cnn->n_layers = layers->len;
  cnn->layers = (Layer *) g_array_free (layers, FALSE);
  if (!ok || !cnn_finish_geometry (cnn, error))
    return NULL;
  if (!read_pca (st, cnn->out_dim, FALSE, &cnn->pca_e, &cnn->pca_mu, error)
      || !read_labels_and_metadata (cnn, st, error))
    return NULL;
  return g_steal_pointer (&cnn);
}

gboolean
cnn_read_pca_file (const char *path, guint d, float **e, float **mu, GError **error)
{
  g_autoptr (ConySafetensors) st = cony_safetensors_open (path, error);
  if (st == NULL)
    return FALSE;
  return read_pca (st, d, TRUE, e, mu, error);
}

/* ---------------------------------------------------------------- random */

ConyCnn *
cony_cnn_new_random (const char *layout, guint input_height, guint input_width,
    guint input_channels, guint32 seed, GError **error)
{
  g_return_val_if_fail (layout != NULL, NULL);
  if (input_height == 0 || input_width == 0 || input_channels == 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "random CNN: input size %ux%ux%u is empty",
        input_height, input_width, input_channels);
    return NULL;
  }
  g_autoptr (CnnWeights) cnn = cnn_weights_new ();
  cnn->source = g_strdup_printf ("random CNN \"%s\"", layout);
  cnn->in_h = input_height;
  cnn->in_w = input_width;
  cnn->in_c = input_channels;
  guint64 s = seed;

  /* MobileNet words (CONY_CNN_YAMNET_LAYOUT) instead of VGG widths. */
  const char *first = layout;
  while (g_ascii_isspace (*first))
    first++;
  for (guint k = 0; k < G_N_ELEMENTS (mobilenet_words); k++)
    if (g_str_has_prefix (first, mobilenet_words[k].word)) {
      WeightSource src = { .st = NULL, .rng = seed };
      if (!mobilenet_layers (cnn, &src, layout, 6.0f, error) || !cnn_finish_geometry (cnn, error))
        return NULL;
      return cnn_new (g_steal_pointer (&cnn));
    }

  g_auto (GStrv) tokens = g_strsplit_set (layout, " \t,", -1);
  GArray *layers = g_array_new (FALSE, TRUE, sizeof (Layer));
  gboolean fc = FALSE, ok = TRUE;
  guint c = input_channels, h = input_height, w = input_width, index = 0, fc_index = 0;
  for (char **t = tokens; *t; t++) {
    if (**t == '\0')
      continue;
    if (strcmp (*t, "|") == 0) {
      if (fc) {
        ok = FALSE;
        break;
      }
      fc = TRUE;
      continue;
    }
    if (!fc && strcmp (*t, "G") == 0) {
      Layer gap = { .kind = LAYER_GAP, .name = g_strdup ("global average pool") };
      g_array_append_val (layers, gap);
      cnn->global_pool = TRUE;
      h = w = 1;
      continue;
    }
    if (!fc && strcmp (*t, "M") == 0) {
      Layer pool = { .kind = LAYER_POOL,
        .name = g_strdup_printf ("features.%u (max-pool)", index) };
      g_array_append_val (layers, pool);
      index++;
      h /= 2;
      w /= 2;
      continue;
    }
    char *end = NULL;
    guint64 width = g_ascii_strtoull (*t, &end, 10);
    if (*end != '\0' || width == 0 || width > 65536) {
      ok = FALSE;
      break;
    }
    if (!fc) {
      float a = sqrtf (6.0f / (9.0f * c));
      Layer conv = { .kind = LAYER_CONV,
        .name = g_strdup_printf ("features.%u", index),
        .in_c = c,
        .out_c = (guint) width,
        .relu = TRUE,
        .w = g_new (float, (gsize) 9 * c * width),
        .b = g_new (float, width) };
      fill_uniform (conv.w, (gsize) 9 * c * width, a, &s);
      fill_uniform (conv.b, width, 0.01f, &s);
      g_array_append_val (layers, conv);
      index += 2;
      c = (guint) width;
    } else {
      gsize in = fc_index == 0 ? (gsize) h * w * c : c;
      if (in == 0 || in * width > ((gsize) 1 << 28)) {
        ok = FALSE;
        break;
      }
      float a = sqrtf (6.0f / in);
      Layer l = { .kind = LAYER_FC,
        .name = g_strdup_printf ("embeddings.%u", fc_index),
        .in_c = (guint) in,
        .out_c = (guint) width,
        .relu = TRUE,
        .w = g_new (float, in *width),
        .b = g_new (float, width) };
      fill_uniform (l.w, in * width, a, &s);
      fill_uniform (l.b, width, 0.01f, &s);
      g_array_append_val (layers, l);
      fc_index += 2;
      c = (guint) width;
    }
  }
  if (layers->len > 0 && g_array_index (layers, Layer, layers->len - 1).kind == LAYER_FC)
    g_array_index (layers, Layer, layers->len - 1).relu = FALSE;
  cnn->n_layers = layers->len;
  cnn->layers = (Layer *) g_array_free (layers, FALSE);
  if (!ok) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "random CNN: bad layout \"%s\" (conv widths and M, then |, then FC widths; "
        "FC layers under 2^28 weights)",
        layout);
    return NULL;
  }
  if (!cnn_finish_geometry (cnn, error))
    return NULL;
  return cnn_new (g_steal_pointer (&cnn));
}
