/* CNN engine: the loader of VGG-style networks (no `network` metadata; see
 * include/cony/cnn.h), and random VGG layouts. */
#include "cnn-private.h"
#include "cony/error.h"
#include "cony/safetensors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* The layers of a VGG-style file (torchvggish names); the common metadata is read. */
gboolean
cnn_vgg_load (CnnWeights *cnn, const ConySafetensors *st, GError **error)
{
  const char *path = cony_safetensors_path (st);
  const char *gp = cony_safetensors_metadata (st, "global_pool");
  if (gp != NULL && strcmp (gp, "avg") == 0)
    cnn->global_pool = TRUE;
  else if (gp != NULL && strcmp (gp, "none") != 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: metadata global_pool = \"%s\", expected \"avg\" or \"none\"", path, gp);
    return FALSE;
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
      return FALSE;
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
      return FALSE;
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
        return FALSE;
      }
    }
  if (embs->len == 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
        "%s: no fully connected layer (tensor embeddings.0.weight) found", path);
    return FALSE;
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
    float *b = tw ? cnn_read_bias (st, base, out, error) : NULL;
    if (b == NULL) {
      ok = FALSE;
      break;
    }
    Layer conv = { .kind = LAYER_CONV,
      .name = g_steal_pointer (&base),
      .in_c = expect_in,
      .out_c = out,
      .relu = TRUE,
      .w = cnn_conv_weight_from_torch (tw, out, expect_in),
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
      w16 = cnn_read_f16 (path, ti, error); /* kept in F16: see fc_f16() */
    else
      w = cony_safetensors_get_f32 (st, wname, 2, shape, error);
    float *b = w || w16 ? cnn_read_bias (st, base, (guint) shape[0], error) : NULL;
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
    return FALSE;
  return read_pca (st, cnn->out_dim, FALSE, &cnn->pca_e, &cnn->pca_mu, error);
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

/* The layers of a random VGG layout (CONY_CNN_VGGISH_LAYOUT's words) on @cnn's input. */
gboolean
cnn_vgg_random (CnnWeights *cnn, const char *layout, guint32 seed, GError **error)
{
  guint64 s = seed;
  g_auto (GStrv) tokens = g_strsplit_set (layout, " \t,", -1);
  GArray *layers = g_array_new (FALSE, TRUE, sizeof (Layer));
  gboolean fc = FALSE, ok = TRUE;
  guint c = cnn->in_c, h = cnn->in_h, w = cnn->in_w, index = 0, fc_index = 0;
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
      cnn_fill_uniform (conv.w, (gsize) 9 * c * width, a, &s);
      cnn_fill_uniform (conv.b, width, 0.01f, &s);
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
      cnn_fill_uniform (l.w, in * width, a, &s);
      cnn_fill_uniform (l.b, width, 0.01f, &s);
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
    return FALSE;
  }
  return cnn_finish_geometry (cnn, error);
}