/* VGG-style CNN engine: Winograd / im2col + OpenBLAS sgemm, F16 FC weights (see include/cony/cnn.h). */
#include "cony/cnn.h"
#include "cony/error.h"
#include "cony/safetensors.h"
#include "cpu-private.h"
#include "gemv-private.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum {
  LAYER_CONV,   /* 3x3 SAME conv + ReLU */
  LAYER_POOL,   /* 2x2 max-pool, stride 2 */
  LAYER_FC,     /* fully connected (+ ReLU when relu) */
  LAYER_GAP,    /* global average pool: H x W x C -> 1 x 1 x C */
} LayerKind;

typedef struct {
  LayerKind kind;
  char *name;            /* "features.3", "embeddings.0", "pool" */
  guint in_h, in_w, in_c;
  guint out_h, out_w, out_c;   /* for FC: out_h = out_w = 1, out_c = width */
  gboolean relu;
  /* CONV: w is (9 * in_c) x out_c row-major, row = (ky * 3 + kx) * in_c + ci.
   * FC:   w is out x in row-major (torch layout). */
  float *w;
  float *b;
  ConyGemvMatrix w16;    /* FC with F16 weights only: w16.f16 (w is then NULL), see fc_f16() */
  float *wino[2];        /* CONV, Winograd F(2x2) / F(4x4): n*n x in_c x out_c (made on first use) */
  gboolean wino_packed[2];   /* wino[] in 16-column panels for the wino_gemm kernel */
} Layer;

struct _ConyCnn {
  char *source;          /* file name or "random" (for messages) */
  guint in_h, in_w, in_c;
  guint out_dim;
  gboolean final_relu;
  Layer *layers;
  guint n_layers;
  guint first_fc;        /* index of the first FC layer */

  float *pca_e;          /* D x D [out, in] */
  float *pca_mu;         /* D */

  /* Scratch. */
  gsize max_act;         /* largest activation (floats) of one example */
  gsize conv_batch;      /* examples a batch runs through the conv stack together */
  gsize conv_cap;        /* examples the conv scratch (act, col, norm, Winograd) holds */
  gsize max_col;         /* largest im2col matrix (floats) of one example */
  gsize col_cap;         /* floats allocated in col (made when an im2col layer runs) */
  float *act_a, *act_b, *col;
  gsize fc_batch_cap;    /* examples the FC scratch holds */
  float *fc_a, *fc_b;
  float *fc_w32;         /* F16 FC weights expanded for a batch, fc_w32_cap floats */
  gsize fc_w32_cap;

  gboolean profiling;
  ConyCnnProfile prof;

  ConyCnnConvAlgorithm conv_algo;
  gsize max_wv, max_wm;  /* Winograd scratch: n*n x tiles x Cin, n*n x tiles x Cout */
  gsize max_ch;          /* widest conv layer (channels) */
  float *wv, *wm, *wt;

  /* Input normalisation (x - mean[c]) / std[c], from input_mean / input_std; NULL when
   * the file declares none. norm is the normalised copy of one example. */
  float *in_mean, *in_std, *norm;
  /* center_height: each input column (one width position and channel: a mel band)
   * has its mean over the input's height (the patch's frames) removed first;
   * col_sum (in_w * in_c) is its scratch, made with norm. */
  gboolean center_height;
  double *col_sum;
  gboolean global_pool;
};

#define FC_CHUNK 128
/* forward_batch runs up to this many examples through each conv layer at once
 * (their tiles share each product, so the weights are read once per batch). */
#define CONV_BATCH 8
/* AUTO uses F(4x4,3x3) on layers whose map has at least this many 4x4 tiles. */
#define WINO4_MIN_TILES 24
/* Batched F16 FC layers expand at most this many weights (8 MB) at a time. */
#define FC_F16_BLOCK ((gsize) 1 << 21)

/* ---------------------------------------------------------------- helpers */

static void
layer_clear (Layer *l)
{
  g_free (l->name);
  g_free (l->w);
  g_free (l->b);
  cony_gemv_matrix_clear (&l->w16);
  g_free (l->wino[0]);
  g_free (l->wino[1]);
}

void
cony_cnn_free (ConyCnn *cnn)
{
  if (cnn == NULL)
    return;
  for (guint i = 0; i < cnn->n_layers; i++)
    layer_clear (&cnn->layers[i]);
  g_free (cnn->layers);
  g_free (cnn->source);
  g_free (cnn->pca_e);
  g_free (cnn->pca_mu);
  g_free (cnn->act_a);
  g_free (cnn->act_b);
  g_free (cnn->col);
  g_free (cnn->fc_a);
  g_free (cnn->fc_b);
  g_free (cnn->fc_w32);
  g_free (cnn->wv);
  g_free (cnn->wm);
  g_free (cnn->wt);
  g_free (cnn->in_mean);
  g_free (cnn->in_std);
  g_free (cnn->norm);
  g_free (cnn->col_sum);
  g_free (cnn);
}

/* Scratch of the conv stack for @nb examples at once. */
static void
ensure_conv_scratch (ConyCnn *cnn, gsize nb)
{
  if (cnn->conv_cap >= nb)
    return;
  g_free (cnn->act_a);
  g_free (cnn->act_b);
  g_free (cnn->norm);
  cnn->act_a = g_new (float, nb * cnn->max_act);
  cnn->act_b = g_new (float, nb * cnn->max_act);
  cnn->norm = cnn->in_mean != NULL || cnn->center_height
                  ? g_new (float, nb * cnn->in_h * cnn->in_w * cnn->in_c) : NULL;
  if (cnn->center_height && cnn->col_sum == NULL)
    cnn->col_sum = g_new (double, (gsize) cnn->in_w * cnn->in_c);
  /* Winograd buffers: reallocated at this size on first use. */
  g_clear_pointer (&cnn->wv, g_free);
  g_clear_pointer (&cnn->wm, g_free);
  g_clear_pointer (&cnn->wt, g_free);
  cnn->conv_cap = nb;
}

/* Fills in every layer's geometry from the input size; checks that the FC
 * input matches the flattened conv output. */
static gboolean
finish_geometry (ConyCnn *cnn, GError **error)
{
  guint h = cnn->in_h, w = cnn->in_w, c = cnn->in_c;
  gboolean flat = FALSE;
  cnn->max_act = (gsize) h * w * c;
  cnn->max_col = 0;
  cnn->first_fc = cnn->n_layers;
  for (guint i = 0; i < cnn->n_layers; i++) {
    Layer *l = &cnn->layers[i];
    l->in_h = h;
    l->in_w = w;
    if (l->kind == LAYER_CONV) {
      if (l->in_c != c) {
        g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
                     "%s: tensor %s.weight has %u input channels, expected %u", cnn->source,
                     l->name, l->in_c, c);
        return FALSE;
      }
      cnn->max_col = MAX (cnn->max_col, (gsize) h * w * 9 * c);
      /* Winograd scratch for either tile size. */
      gsize tiles2 = (gsize) ((h + 1) / 2) * ((w + 1) / 2);
      gsize tiles4 = (gsize) ((h + 3) / 4) * ((w + 3) / 4);
      gsize planes = MAX (16 * tiles2, 36 * tiles4);
      cnn->max_wv = MAX (cnn->max_wv, planes * c);
      cnn->max_wm = MAX (cnn->max_wm, planes * l->out_c);
      cnn->max_ch = MAX (cnn->max_ch, (gsize) MAX (c, l->out_c));
      c = l->out_c;
    } else if (l->kind == LAYER_POOL) {
      l->in_c = c;
      l->out_c = c;
      if (h < 2 || w < 2) {
        g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
                     "%s: max-pool at %s gets a %ux%u map, too small to pool (input %ux%u)",
                     cnn->source, l->name, h, w, cnn->in_h, cnn->in_w);
        return FALSE;
      }
      h /= 2;
      w /= 2;
    } else if (l->kind == LAYER_GAP) {
      l->in_c = c;
      l->out_c = c;
      h = w = 1;
    } else {
      if (!flat) {
        cnn->first_fc = i;
        flat = TRUE;
      }
      gsize in = (gsize) h * w * c;
      if (l->in_c != in) {
        g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
                     "%s: tensor %s.weight has %u inputs, expected %" G_GSIZE_FORMAT
                     " (%ux%ux%u)", cnn->source, l->name, l->in_c, in, h, w, c);
        return FALSE;
      }
      h = w = 1;
      c = l->out_c;
    }
    if (l->kind != LAYER_FC) {
      l->out_h = h;
      l->out_w = w;
    } else {
      l->out_h = l->out_w = 1;
    }
    cnn->max_act = MAX (cnn->max_act, (gsize) h * w * c);
  }
  if (!flat) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
                 "%s: no fully connected layer (tensor embeddings.K.weight) found", cnn->source);
    return FALSE;
  }
  cnn->out_dim = c;
  /* Scratch sizes come from the file (input size metadata, channel widths): refuse
   * absurd ones instead of failing an allocation. */
  gsize limit = (gsize) 1 << 28;   /* floats = 1 GiB per buffer */
  if (cnn->max_act > limit || cnn->max_col > limit || cnn->max_wv > limit || cnn->max_wm > limit) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
                 "%s: a %ux%ux%u input needs scratch buffers over 1 GiB; refusing the model",
                 cnn->source, cnn->in_h, cnn->in_w, cnn->in_c);
    return FALSE;
  }
  for (guint i = 0; i + 1 < cnn->n_layers; i++)
    if (cnn->layers[i].kind == LAYER_FC && cnn->layers[i + 1].kind != LAYER_FC) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
                   "%s: %s is followed by a conv or pool layer", cnn->source,
                   cnn->layers[i].name);
      return FALSE;
    }
  /* Batched conv scratch stays under 256 MB per buffer. */
  gsize biggest = MAX (MAX (cnn->max_act, cnn->max_col), MAX (cnn->max_wv, cnn->max_wm));
  cnn->conv_batch = CLAMP (((gsize) 1 << 26) / MAX (biggest, 1), 1, CONV_BATCH);
  ensure_conv_scratch (cnn, 1);
  return TRUE;
}

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
                 "%s: metadata %s = \"%s\" is not a positive integer <= 65536",
                 cony_safetensors_path (st), key, v);
    return FALSE;
  }
  *out = (guint) x;
  return TRUE;
}

static gboolean
meta_bool (const ConySafetensors *st, const char *key, gboolean def, gboolean *out,
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
               "%s: metadata %s = \"%s\", expected \"true\" or \"false\"",
               cony_safetensors_path (st), key, v);
  return FALSE;
}

/* A per-channel list "a,b,c" (or one value for every channel) of @n floats; NULL in
 * *out when the key is absent. Standard deviations (@positive) must be > 0. */
static gboolean
meta_channels (const ConySafetensors *st, const char *key, guint n, gboolean positive,
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
    if (end == *p || *end != '\0' || !isfinite (x) || (positive && !(x > 0.0)) || k >= n) {
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
read_pca (ConyCnn *cnn, const ConySafetensors *st, gboolean required, GError **error)
{
  const char *path = cony_safetensors_path (st);
  const char *en = "pca_eigen_vectors", *mn = "pca_means";
  if (cony_safetensors_find (st, en) == NULL && cony_safetensors_find (st, "pproc.pca_eigen_vectors")) {
    en = "pproc.pca_eigen_vectors";
    mn = "pproc.pca_means";
  }
  const ConyTensorInfo *ei = cony_safetensors_find (st, en);
  const ConyTensorInfo *mi = cony_safetensors_find (st, mn);
  if (ei == NULL && mi == NULL) {
    if (required)
      g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
                   "%s: no tensor pca_eigen_vectors (%u, %u) / pca_means (%u)", path,
                   cnn->out_dim, cnn->out_dim, cnn->out_dim);
    return !required;
  }
  if (ei == NULL || mi == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING, "%s: tensor %s is missing (the PCA needs both %s and %s)",
                 path, ei == NULL ? en : mn, en, mn);
    return FALSE;
  }
  guint d = cnn->out_dim;
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
  g_free (cnn->pca_e);
  g_free (cnn->pca_mu);
  cnn->pca_e = e;
  cnn->pca_mu = m;
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
                   "%s: tensor '%s' holds a non-finite value at flat index %" G_GSIZE_FORMAT,
                   path, ti->name, i);
      g_free (h);
      return NULL;
    }
    h[i] = v;
  }
  return h;
}

ConyCnn *
cony_cnn_load (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  g_autoptr (ConySafetensors) st = cony_safetensors_open (path, error);
  if (st == NULL)
    return NULL;

  g_autoptr (ConyCnn) cnn = g_new0 (ConyCnn, 1);
  cnn->source = g_strdup (path);
  if (!meta_uint (st, "input_height", 96, &cnn->in_h, error) ||
      !meta_uint (st, "input_width", 64, &cnn->in_w, error) ||
      !meta_uint (st, "input_channels", 1, &cnn->in_c, error) ||
      !meta_bool (st, "final_relu", FALSE, &cnn->final_relu, error) ||
      !meta_bool (st, "center_height", FALSE, &cnn->center_height, error))
    return NULL;
  if (!meta_channels (st, "input_mean", cnn->in_c, FALSE, &cnn->in_mean, error) ||
      !meta_channels (st, "input_std", cnn->in_c, TRUE, &cnn->in_std, error))
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
    else if (strcmp (name, "pca_eigen_vectors") == 0 || strcmp (name, "pca_means") == 0 ||
             strcmp (name, "pproc.pca_eigen_vectors") == 0 || strcmp (name, "pproc.pca_means") == 0)
      continue;
    else {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
                   "%s: unexpected tensor %s (expected torchvggish names features.K.weight/bias, "
                   "embeddings.K.weight/bias, pca_eigen_vectors, pca_means)", path, name);
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
  guint next = 0;   /* the first index not yet accounted for */
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < feats->len; i++) {
    guint idx = g_array_index (feats, IndexEntry, i).index;
    if (i > 0 && idx < next) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
                   "%s: features.%u directly follows the conv features.%u: torchvggish's layout "
                   "puts a ReLU at index %u", path, idx, idx - 1, idx);
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
    if (ti->ndim != 4 || ti->shape[2] != 3 || ti->shape[3] != 3 || ti->shape[1] != expect_in ||
        ti->shape[0] == 0) {
      g_autoptr (GString) got = g_string_new ("(");
      for (int d = 0; d < ti->ndim; d++)
        g_string_append_printf (got, "%s%" G_GSIZE_FORMAT, d ? ", " : "", ti->shape[d]);
      g_string_append_c (got, ')');
      g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
                   "%s: tensor %s has shape %s, expected (out, %u, 3, 3)", path, wname, got->str,
                   expect_in);
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
    Layer conv = { .kind = LAYER_CONV, .name = g_steal_pointer (&base), .in_c = expect_in,
                   .out_c = out, .relu = TRUE, .w = conv_weight_from_torch (tw, out, expect_in),
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
      g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE, "%s: tensor %s must be 2-D (out, in)",
                   path, wname);
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
        g_string_append_printf (tried, "nothing (trailing_pools = %u pools the map away)",
                                p_first);
      if (trailing == G_MAXUINT) {
        g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
                     "%s: tensor %s has %" G_GSIZE_FORMAT " inputs, expected one of %s for a "
                     "%ux%ux%u input", path, wname, ti->shape[1], tried->str, cnn->in_h,
                     cnn->in_w, cnn->in_c);
        ok = FALSE;
      }
      for (guint p = 0; ok && p < trailing; p++) {
        Layer pool = { .kind = LAYER_POOL, .name = g_strdup_printf ("features.%u (max-pool)", next + p) };
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
    if (ti->ndim != 2 || ti->shape[0] == 0 || ti->shape[1] == 0 || ti->shape[0] > G_MAXINT ||
        ti->shape[1] > G_MAXINT) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE, "%s: tensor %s must be 2-D (out, in)",
                   path, wname);
      ok = FALSE;
      break;
    }
    gsize shape[2] = { ti->shape[0], ti->shape[1] };
    float *w = NULL;
    guint16 *w16 = NULL;
    if (ti->dtype == CONY_DTYPE_F16)
      w16 = read_f16 (path, ti, error);   /* kept in F16: see fc_f16() */
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
    Layer fc = { .kind = LAYER_FC, .name = g_steal_pointer (&base), .in_c = (guint) shape[1],
                 .out_c = (guint) shape[0], .relu = relu, .w = w, .b = b };
    if (w16 != NULL)
      cony_gemv_matrix_init_f16 (&fc.w16, w16, (int) shape[0], (int) shape[1], TRUE);
    g_array_append_val (layers, fc);
  }

  cnn->n_layers = layers->len;
  cnn->layers = (Layer *) g_array_free (layers, FALSE);
  if (!ok || !finish_geometry (cnn, error))
    return NULL;
  if (!read_pca (cnn, st, FALSE, error))
    return NULL;
  return g_steal_pointer (&cnn);
}

gboolean
cony_cnn_load_pca (ConyCnn *cnn, const char *path, GError **error)
{
  g_return_val_if_fail (cnn != NULL && path != NULL, FALSE);
  g_autoptr (ConySafetensors) st = cony_safetensors_open (path, error);
  if (st == NULL)
    return FALSE;
  return read_pca (cnn, st, TRUE, error);
}

/* ---------------------------------------------------------------- random */

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
  g_autoptr (ConyCnn) cnn = g_new0 (ConyCnn, 1);
  cnn->source = g_strdup_printf ("random CNN \"%s\"", layout);
  cnn->in_h = input_height;
  cnn->in_w = input_width;
  cnn->in_c = input_channels;
  guint64 s = seed;

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
      Layer pool = { .kind = LAYER_POOL, .name = g_strdup_printf ("features.%u (max-pool)", index) };
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
      Layer conv = { .kind = LAYER_CONV, .name = g_strdup_printf ("features.%u", index),
                     .in_c = c, .out_c = (guint) width, .relu = TRUE,
                     .w = g_new (float, (gsize) 9 * c * width), .b = g_new (float, width) };
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
      Layer l = { .kind = LAYER_FC, .name = g_strdup_printf ("embeddings.%u", fc_index),
                  .in_c = (guint) in, .out_c = (guint) width, .relu = TRUE,
                  .w = g_new (float, in * width), .b = g_new (float, width) };
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
  if (!finish_geometry (cnn, error))
    return NULL;
  return g_steal_pointer (&cnn);
}

/* ---------------------------------------------------------------- getters */

guint cony_cnn_get_input_height (const ConyCnn *cnn) { g_return_val_if_fail (cnn, 0); return cnn->in_h; }
guint cony_cnn_get_input_width (const ConyCnn *cnn) { g_return_val_if_fail (cnn, 0); return cnn->in_w; }
guint cony_cnn_get_input_channels (const ConyCnn *cnn) { g_return_val_if_fail (cnn, 0); return cnn->in_c; }
guint cony_cnn_get_output_size (const ConyCnn *cnn) { g_return_val_if_fail (cnn, 0); return cnn->out_dim; }

gsize
cony_cnn_get_input_size (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, 0);
  return (gsize) cnn->in_h * cnn->in_w * cnn->in_c;
}

guint64
cony_cnn_get_n_params (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, 0);
  guint64 n = 0;
  for (guint i = 0; i < cnn->n_layers; i++) {
    const Layer *l = &cnn->layers[i];
    if (l->kind == LAYER_CONV)
      n += (guint64) 9 * l->in_c * l->out_c + l->out_c;
    else if (l->kind == LAYER_FC)
      n += (guint64) l->in_c * l->out_c + l->out_c;
  }
  return n;
}

void
cony_cnn_get_flops (const ConyCnn *cnn, guint64 *conv_flops, guint64 *fc_flops)
{
  g_return_if_fail (cnn != NULL);
  guint64 cf = 0, ff = 0;
  for (guint i = 0; i < cnn->n_layers; i++) {
    const Layer *l = &cnn->layers[i];
    if (l->kind == LAYER_CONV)
      cf += (guint64) 2 * l->in_h * l->in_w * 9 * l->in_c * l->out_c;
    else if (l->kind == LAYER_FC)
      ff += (guint64) 2 * l->in_c * l->out_c;
  }
  if (conv_flops)
    *conv_flops = cf;
  if (fc_flops)
    *fc_flops = ff;
}

char *
cony_cnn_describe (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, NULL);
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "input %ux%ux%u (HWC)\n", cnn->in_h, cnn->in_w, cnn->in_c);
  if (cnn->center_height)
    g_string_append (s, "center: each column's mean over the height removed\n");
  if (cnn->in_mean != NULL) {
    g_string_append (s, "normalise (x - mean) / std per channel:");
    for (guint c = 0; c < cnn->in_c && c < 8; c++)
      g_string_append_printf (s, " (%g, %g)", cnn->in_mean[c], cnn->in_std[c]);
    g_string_append (s, cnn->in_c > 8 ? " ...\n" : "\n");
  }
  for (guint i = 0; i < cnn->n_layers; i++) {
    const Layer *l = &cnn->layers[i];
    gboolean relu = l->relu || (l->kind == LAYER_FC && i + 1 == cnn->n_layers && cnn->final_relu);
    switch (l->kind) {
    case LAYER_CONV:
      g_string_append_printf (s, "%-24s conv3x3 %u -> %u, out %ux%ux%u + ReLU\n", l->name,
                              l->in_c, l->out_c, l->out_h, l->out_w, l->out_c);
      break;
    case LAYER_POOL:
      g_string_append_printf (s, "%-24s maxpool2x2, out %ux%ux%u\n", l->name, l->out_h,
                              l->out_w, l->out_c);
      break;
    case LAYER_FC:
      g_string_append_printf (s, "%-24s fc %u -> %u%s%s\n", l->name, l->in_c, l->out_c,
                              relu ? " + ReLU" : "", l->w16.f16 ? " (F16 weights)" : "");
      break;
    case LAYER_GAP:
      g_string_append_printf (s, "%-24s mean over %ux%u, out 1x1x%u\n", l->name, l->in_h,
                              l->in_w, l->out_c);
      break;
    }
  }
  g_string_append_printf (s, "%" G_GUINT64_FORMAT " parameters%s\n", cony_cnn_get_n_params (cnn),
                          cnn->pca_e ? ", PCA postprocess available" : "");
  return g_string_free (s, FALSE);
}

gboolean
cony_cnn_get_final_relu (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  return cnn->final_relu;
}

void
cony_cnn_set_final_relu (ConyCnn *cnn, gboolean final_relu)
{
  g_return_if_fail (cnn != NULL);
  cnn->final_relu = final_relu;
}

gboolean
cony_cnn_get_normalization (const ConyCnn *cnn, const float **mean, const float **std)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  if (mean)
    *mean = cnn->in_mean;
  if (std)
    *std = cnn->in_std;
  return cnn->in_mean != NULL;
}

gboolean
cony_cnn_get_center_height (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  return cnn->center_height;
}

gboolean
cony_cnn_get_global_pool (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  return cnn->global_pool;
}

gboolean
cony_cnn_has_pca (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  return cnn->pca_e != NULL;
}

/* ---------------------------------------------------------------- compute */

/* im2col for a 3x3 SAME conv on an HWC map: row (y * W + x), column
 * (ky * 3 + kx) * C + c, zero outside the map. */
static void
im2col3x3 (const float *in, guint H, guint W, guint C, float *col)
{
  gsize rowlen = (gsize) 9 * C;
  for (guint y = 0; y < H; y++)
    for (guint x = 0; x < W; x++) {
      float *dst = col + ((gsize) y * W + x) * rowlen;
      for (int ky = 0; ky < 3; ky++) {
        int yy = (int) y + ky - 1;
        for (int kx = 0; kx < 3; kx++, dst += C) {
          int xx = (int) x + kx - 1;
          if (yy < 0 || yy >= (int) H || xx < 0 || xx >= (int) W)
            memset (dst, 0, sizeof (float) * C);
          else
            memcpy (dst, in + ((gsize) yy * W + xx) * C, sizeof (float) * C);
        }
      }
    }
}

static void
bias_act (float *x, gsize rows, guint cols, const float *b, gboolean relu)
{
  for (gsize r = 0; r < rows; r++) {
    float *row = x + r * cols;
    if (relu)
      for (guint c = 0; c < cols; c++) {
        float v = row[c] + b[c];
        row[c] = v > 0.0f ? v : 0.0f;
      }
    else
      for (guint c = 0; c < cols; c++)
        row[c] += b[c];
  }
}

/* ---- Winograd product kernel (AVX2/FMA) ---- */

#ifdef CONY_CPU_X86
#include <immintrin.h>
#define CNN_HAVE_WINO_KERNEL 1

/* Winograd products out (T x K, row stride K) = v (T x cin, row stride cin) U,
 * with U packed in panels of 16 columns: up[p * 16 * cin + c * 16 + j] =
 * U[c][16 p + j] (K a multiple of 16). The packing is done once when the
 * weights are transformed, where OpenBLAS would repack U on every call: with
 * VGGish's few tiles per window (24 for conv4 in F(2x2)) that repacking costs
 * as much as the product. Blocks of 6 rows x 16 columns: 12 accumulators, 2
 * weight loads and 6 broadcasts per 12 FMAs. */
#define WG_MR 6
__attribute__ ((always_inline)) CONY_TARGET_V3 static inline void
wg_block (const int mr, const float *v, gsize cin, const float *up, float *out, gsize ldo)
{
  __m256 acc[WG_MR][2];
  for (int i = 0; i < WG_MR; i++)
    acc[i][0] = acc[i][1] = _mm256_setzero_ps ();
  for (gsize c = 0; c < cin; c++) {
    __m256 b0 = _mm256_loadu_ps (up + 16 * c), b1 = _mm256_loadu_ps (up + 16 * c + 8);
    for (int i = 0; i < WG_MR; i++)
      if (i < mr) {
        __m256 a = _mm256_broadcast_ss (v + i * cin + c);
        acc[i][0] = _mm256_fmadd_ps (a, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps (a, b1, acc[i][1]);
      }
  }
  for (int i = 0; i < WG_MR; i++)
    if (i < mr) {
      _mm256_storeu_ps (out + i * ldo, acc[i][0]);
      _mm256_storeu_ps (out + i * ldo + 8, acc[i][1]);
    }
}

CONY_TARGET_V3 static void
wino_gemm_avx2 (gsize T, gsize K, gsize cin, const float *v, const float *up, float *out)
{
  for (gsize p = 0; p < K / 16; p++) {
    const float *panel = up + p * 16 * cin;
    float *o = out + 16 * p;
    gsize t = 0;
    for (; t + WG_MR <= T; t += WG_MR)
      wg_block (6, v + t * cin, cin, panel, o + t * K, K);
    switch (T - t) {
    case 5: wg_block (5, v + t * cin, cin, panel, o + t * K, K); break;
    case 4: wg_block (4, v + t * cin, cin, panel, o + t * K, K); break;
    case 3: wg_block (3, v + t * cin, cin, panel, o + t * K, K); break;
    case 2: wg_block (2, v + t * cin, cin, panel, o + t * K, K); break;
    case 1: wg_block (1, v + t * cin, cin, panel, o + t * K, K); break;
    default: break;
    }
  }
}
#endif

typedef struct {
  gboolean portable;   /* FC products with the portable gemv (cony_gemv_portable) */
  /* Winograd products on packed weights (NULL: OpenBLAS sgemm), see wino_gemm_avx2. */
  void (*wino_gemm) (gsize T, gsize K, gsize cin, const float *v, const float *up, float *out);
} CnnKernels;

/* The kernels this CPU runs; CONY_CNN_PORTABLE=1 (cony_cpu_force_portable) forces
 * the portable ones (tests use it to cover that path): then the FC layers use the
 * portable gemv and the Winograd products use OpenBLAS. */
static const CnnKernels *
cnn_kernels (void)
{
  static CnnKernels k;
  static gsize done;
  if (g_once_init_enter (&done)) {
    k.portable = cony_cpu_force_portable ();
#ifdef CNN_HAVE_WINO_KERNEL
    if (!k.portable && cony_cpu_has_v3 ())
      k.wino_gemm = wino_gemm_avx2;
#endif
    g_once_init_leave (&done, 1);
  }
  return &k;
}

/* ---- Winograd F(m x m, 3x3), m = 2 or 4 ----
 * One mechanism for both tile sizes: with n = m + 2 and the interpolation
 * points a_0..a_{n-2} plus infinity,
 *   Y = A^T [ (G g G^T) . (B^T d B) ] A,
 *   A^T[i][j] = a_j^i (last column: 1 in the last row only),
 *   G[j][k]   = a_j^k / f_j, f_j = prod_{l != j} (a_j - a_l) (last row: 0 0 1),
 *   B^T       = f_j times the inverse of the Vandermonde matrix V[s][j] = a_j^s
 *               on the finite points, plus the row that removes the a^{n-1} term.
 * Points {0, 1, -1} give the usual F(2x2,3x3); F(4x4,3x3) uses {0, 1, -1, 1/2, -1/2}
 * (every coefficient of A and B a power of two times a small integer; float32
 * error about 2e-6 relative for 256 input channels, against 4e-7 for F(2x2)).
 * The matrices are computed in double once. Per layer, the n*n elementwise
 * products summed over input channels are n*n sgemms (tiles x Cin) (Cin x Cout):
 * 16 multiplications per 4 outputs (2.25x fewer than direct) for F(2x2), 36 per
 * 16 (4x fewer) for F(4x4), at the price of 36/9 = 4x larger transformed
 * weights and fewer, larger-overhead tiles. */

#define WINO_MAX_N 6

typedef struct {
  guint m, n;
  /* Sparse rows: nnz[r] terms, column idx[r][t] with coefficient coef[r][t]. */
  int bt_nnz[WINO_MAX_N], bt_idx[WINO_MAX_N][WINO_MAX_N];
  float bt_coef[WINO_MAX_N][WINO_MAX_N];
  int at_nnz[WINO_MAX_N], at_idx[WINO_MAX_N][WINO_MAX_N];
  float at_coef[WINO_MAX_N][WINO_MAX_N];
  double g[WINO_MAX_N][3];
} WinoMats;

static void
wino_mats_compute (guint m, WinoMats *w)
{
  static const double pts2[] = { 0, 1, -1 }, pts4[] = { 0, 1, -1, 0.5, -0.5 };
  const double *a = m == 2 ? pts2 : pts4;
  guint n = m + 2, p = n - 1;   /* p finite points */
  double at[WINO_MAX_N][WINO_MAX_N] = { { 0 } }, bt[WINO_MAX_N][WINO_MAX_N] = { { 0 } };
  double f[WINO_MAX_N], v[WINO_MAX_N][2 * WINO_MAX_N];
  memset (w, 0, sizeof *w);
  w->m = m;
  w->n = n;
  for (guint j = 0; j < p; j++) {
    f[j] = 1.0;
    for (guint l = 0; l < p; l++)
      if (l != j)
        f[j] *= a[j] - a[l];
  }
  for (guint i = 0; i < m; i++) {
    for (guint j = 0; j < p; j++)
      at[i][j] = pow (a[j], i);
    at[i][p] = i == m - 1;
  }
  for (guint j = 0; j < p; j++)
    for (int k = 0; k < 3; k++)
      w->g[j][k] = pow (a[j], k) / f[j];
  w->g[p][0] = w->g[p][1] = 0.0;
  w->g[p][2] = 1.0;
  /* Invert V[s][j] = a_j^s by Gauss-Jordan with partial pivoting (p <= 5). */
  for (guint s = 0; s < p; s++)
    for (guint j = 0; j < p; j++) {
      v[s][j] = pow (a[j], s);
      v[s][p + j] = s == j;
    }
  for (guint c = 0; c < p; c++) {
    guint piv = c;
    for (guint r = c + 1; r < p; r++)
      if (fabs (v[r][c]) > fabs (v[piv][c]))
        piv = r;
    for (guint k = 0; k < 2 * p; k++) {
      double t = v[c][k];
      v[c][k] = v[piv][k];
      v[piv][k] = t;
    }
    double d = v[c][c];
    for (guint k = 0; k < 2 * p; k++)
      v[c][k] /= d;
    for (guint r = 0; r < p; r++)
      if (r != c) {
        double e = v[r][c];
        for (guint k = 0; k < 2 * p; k++)
          v[r][k] -= e * v[c][k];
      }
  }
  /* X = V^{-1} (v[.][p..]); B^T[j][l] = f_j X[j][l]; last row cancels a^{n-1}. */
  for (guint j = 0; j < p; j++)
    for (guint l = 0; l < p; l++)
      bt[j][l] = f[j] * v[j][p + l];
  for (guint l = 0; l < n; l++) {
    double s = l == p ? 1.0 : 0.0;
    if (l < p)
      for (guint j = 0; j < p; j++)
        s -= pow (a[j], p) * v[j][p + l];
    bt[p][l] = s;
  }
  for (guint r = 0; r < n; r++) {
    for (guint c = 0; c < n; c++) {
      double x = nearbyint (bt[r][c] * 64.0) / 64.0;   /* exact dyadic values */
      if (x != 0.0) {
        w->bt_idx[r][w->bt_nnz[r]] = (int) c;
        w->bt_coef[r][w->bt_nnz[r]++] = (float) x;
      }
    }
    if (r < m)
      for (guint c = 0; c < n; c++)
        if (at[r][c] != 0.0) {
          w->at_idx[r][w->at_nnz[r]] = (int) c;
          w->at_coef[r][w->at_nnz[r]++] = (float) at[r][c];
        }
  }
}

static const WinoMats *
wino_mats (guint m)
{
  static WinoMats mats[2];
  static gsize done[2];
  int k = m == 4;
  if (g_once_init_enter (&done[k])) {
    wino_mats_compute (m, &mats[k]);
    g_once_init_leave (&done[k], 1);
  }
  return &mats[k];
}

/* d[c] = sum_t coef[t] * s[idx[t]][c], vectorised over c. */
static inline void
lincomb (float *restrict d, gsize len, int nnz, const float *coef, const int *idx,
         const float *const *s)
{
  const float *s0 = s[idx[0]], *s1 = nnz > 1 ? s[idx[1]] : NULL;
  const float *s2 = nnz > 2 ? s[idx[2]] : NULL, *s3 = nnz > 3 ? s[idx[3]] : NULL;
  float c0 = coef[0], c1 = nnz > 1 ? coef[1] : 0, c2 = nnz > 2 ? coef[2] : 0;
  float c3 = nnz > 3 ? coef[3] : 0;

  switch (nnz) {
  case 1:
    for (gsize c = 0; c < len; c++)
      d[c] = c0 * s0[c];
    return;
  case 2:
    for (gsize c = 0; c < len; c++)
      d[c] = c0 * s0[c] + c1 * s1[c];
    return;
  case 3:
    for (gsize c = 0; c < len; c++)
      d[c] = c0 * s0[c] + c1 * s1[c] + c2 * s2[c];
    return;
  default:
    for (gsize c = 0; c < len; c++)
      d[c] = c0 * s0[c] + c1 * s1[c] + c2 * s2[c] + c3 * s3[c];
    for (int t = 4; t < nnz; t++) {
      const float *st = s[idx[t]];
      float ct = coef[t];
      for (gsize c = 0; c < len; c++)
        d[c] += ct * st[c];
    }
  }
}

/* Which tile size a layer uses (0: not Winograd). */
static guint
wino_tile (const ConyCnn *cnn, const Layer *l, gsize nb)
{
  switch (cnn->conv_algo) {
  case CONY_CNN_CONV_IM2COL:
    return 0;
  case CONY_CNN_CONV_WINOGRAD:
    return 2;
  case CONY_CNN_CONV_WINOGRAD4:
    return 4;
  default:
    break;
  }
  if (l->in_c < 16)
    return 0;
  /* F(4x4) when the map (times the examples run together) gives enough tiles
   * for its 4x larger transformed weights to pay off (measured on VGGish, one
   * window: conv2 and conv3, not conv4). */
  gsize tiles4 = (gsize) ((l->in_h + 3) / 4) * ((l->in_w + 3) / 4) * nb;
  return tiles4 >= WINO4_MIN_TILES ? 4 : 2;
}

static void
winograd_weights (Layer *l, guint m)
{
  const WinoMats *wm = wino_mats (m);
  guint n = wm->n, in = l->in_c, out = l->out_c;
  gsize plane = (gsize) in * out;
  float *u = g_new (float, (gsize) n * n * plane);
  for (guint i = 0; i < in; i++)
    for (guint o = 0; o < out; o++) {
      double g[3][3], gg[WINO_MAX_N][3];
      for (int ky = 0; ky < 3; ky++)
        for (int kx = 0; kx < 3; kx++)
          g[ky][kx] = l->w[((gsize) (ky * 3 + kx) * in + i) * out + o];
      for (guint r = 0; r < n; r++)
        for (int c = 0; c < 3; c++)
          gg[r][c] = wm->g[r][0] * g[0][c] + wm->g[r][1] * g[1][c] + wm->g[r][2] * g[2][c];
      for (guint r = 0; r < n; r++)
        for (guint c = 0; c < n; c++)
          u[(gsize) (r * n + c) * plane + (gsize) i * out + o] =
              (float) (gg[r][0] * wm->g[c][0] + gg[r][1] * wm->g[c][1] + gg[r][2] * wm->g[c][2]);
    }
  /* Panels of 16 output channels for the packed-weight kernel. */
  l->wino_packed[m == 4] = FALSE;
  if (cnn_kernels ()->wino_gemm != NULL && out % 16 == 0) {
    float *pk = g_new (float, (gsize) n * n * plane);
    for (guint k = 0; k < n * n; k++)
      for (guint p = 0; p < out / 16; p++)
        for (guint i = 0; i < in; i++)
          memcpy (pk + (gsize) k * plane + ((gsize) p * in + i) * 16,
                  u + (gsize) k * plane + (gsize) i * out + 16 * p, 16 * sizeof (float));
    g_free (u);
    u = pk;
    l->wino_packed[m == 4] = TRUE;
  }
  l->wino[m == 4] = u;
}

/* @nb examples (HWC maps one after the other): their tiles share each sgemm.
 * The transforms are channel-vector loops: built for x86-64-v3 too (AVX2/FMA,
 * 8 floats per instruction instead of SSE2's 4), chosen at load time. */
CONY_CLONES static void
conv_winograd (ConyCnn *cnn, Layer *l, guint m, const float *in, float *out, gsize nb)
{
  const WinoMats *wm = wino_mats (m);
  guint n = wm->n, nn = n * n;
  guint H = l->in_h, W = l->in_w, C = l->in_c, K = l->out_c;
  guint th = (H + m - 1) / m, tw = (W + m - 1) / m;
  gsize T1 = (gsize) th * tw, T = T1 * nb, map_in = (gsize) H * W * C, map_out = (gsize) H * W * K;
  if (l->wino[m == 4] == NULL)
    winograd_weights (l, m);
  if (cnn->wv == NULL) {
    cnn->wv = g_new (float, cnn->conv_cap * cnn->max_wv);
    cnn->wm = g_new (float, cnn->conv_cap * cnn->max_wm);
    cnn->wt = g_new (float, 2 * WINO_MAX_N * WINO_MAX_N * cnn->max_ch);
  }
  float *V = cnn->wv, *M = cnn->wm;
  gsize vplane = T * C, mplane = T * K;
  float *zeros = g_alloca (sizeof (float) * C);
  memset (zeros, 0, sizeof (float) * C);
  float *t = cnn->wt;

  /* Input transform: V[r*n+s][tile][c] = (B^T d B)[r][s], channels innermost. */
  for (gsize e = 0; e < nb; e++)
  for (guint ty = 0; ty < th; ty++)
    for (guint tx = 0; tx < tw; tx++) {
      gsize tile = e * T1 + (gsize) ty * tw + tx;
      const float *in_e = in + e * map_in;
      const float *px[WINO_MAX_N * WINO_MAX_N];   /* column-major: px[q * n + r] */
      for (guint r = 0; r < n; r++)
        for (guint q = 0; q < n; q++) {
          int y = (int) (m * ty + r) - 1, x = (int) (m * tx + q) - 1;
          px[q * n + r] = (y < 0 || y >= (int) H || x < 0 || x >= (int) W)
                              ? zeros : in_e + ((gsize) y * W + x) * C;
        }
      /* t[r][q] = sum_l B^T[r][l] d[l][q]  (t stored row-major: t + (r*n+q)*C). */
      const float *trow[WINO_MAX_N];
      for (guint r = 0; r < n; r++)
        for (guint q = 0; q < n; q++)
          lincomb (t + (gsize) (r * n + q) * C, C, wm->bt_nnz[r], wm->bt_coef[r], wm->bt_idx[r],
                   px + q * n);
      /* V[r][s] = sum_q t[r][q] B^T[s][q]. */
      for (guint r = 0; r < n; r++) {
        for (guint q = 0; q < n; q++)
          trow[q] = t + (gsize) (r * n + q) * C;
        for (guint s = 0; s < n; s++)
          lincomb (V + (gsize) (r * n + s) * vplane + tile * C, C, wm->bt_nnz[s], wm->bt_coef[s],
                   wm->bt_idx[s], trow);
      }
    }

  /* n*n products (T x C) (C x K). */
  gsize uplane = (gsize) C * K;
  const float *U = l->wino[m == 4];
  if (l->wino_packed[m == 4]) {
    const CnnKernels *kern = cnn_kernels ();
    for (guint k = 0; k < nn; k++)
      kern->wino_gemm (T, K, C, V + k * vplane, U + k * uplane, M + k * mplane);
  } else {
    for (guint k = 0; k < nn; k++)
      cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, (int) T, (int) K, (int) C, 1.0f,
                   V + k * vplane, (int) C, U + k * uplane, (int) K, 0.0f, M + k * mplane,
                   (int) K);
  }

  /* Output transform, bias, ReLU; output channels innermost. */
  float *u = t, *yv = t + (gsize) WINO_MAX_N * WINO_MAX_N * K;
  const float *b = l->b;
  for (gsize e = 0; e < nb; e++)
  for (guint ty = 0; ty < th; ty++)
    for (guint tx = 0; tx < tw; tx++) {
      gsize tile = e * T1 + (gsize) ty * tw + tx;
      float *out_e = out + e * map_out;
      const float *mcol[WINO_MAX_N * WINO_MAX_N];   /* column-major: mcol[q * n + j] */
      for (guint j = 0; j < n; j++)
        for (guint q = 0; q < n; q++)
          mcol[q * n + j] = M + (gsize) (j * n + q) * mplane + tile * K;
      /* u[i][q] = sum_j A^T[i][j] M[j][q]. */
      for (guint i = 0; i < m; i++)
        for (guint q = 0; q < n; q++)
          lincomb (u + (gsize) (i * n + q) * K, K, wm->at_nnz[i], wm->at_coef[i], wm->at_idx[i],
                   mcol + q * n);
      guint y0 = m * ty, x0 = m * tx;
      for (guint i = 0; i < m && y0 + i < H; i++) {
        const float *urow[WINO_MAX_N];
        for (guint q = 0; q < n; q++)
          urow[q] = u + (gsize) (i * n + q) * K;
        for (guint p = 0; p < m && x0 + p < W; p++) {
          /* y[i][p] = sum_q u[i][q] A^T[p][q] + b, ReLU. */
          lincomb (yv, K, wm->at_nnz[p], wm->at_coef[p], wm->at_idx[p], urow);
          float *o = out_e + ((gsize) (y0 + i) * W + x0 + p) * K;
          for (guint k = 0; k < K; k++) {
            float v = yv[k] + b[k];
            o[k] = v > 0.0f ? v : 0.0f;
          }
        }
      }
    }
}

static void
conv_im2col (ConyCnn *cnn, const Layer *l, const float *in, float *out, gsize nb)
{
  gsize HW = (gsize) l->in_h * l->in_w, M = HW * nb;
  guint K = 9 * l->in_c;
  if (cnn->col_cap < M * K) {
    g_free (cnn->col);
    cnn->col = g_new (float, M * K);
    cnn->col_cap = M * K;
  }
  for (gsize e = 0; e < nb; e++)
    im2col3x3 (in + e * HW * l->in_c, l->in_h, l->in_w, l->in_c, cnn->col + e * HW * K);
  cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, (int) M, (int) l->out_c, (int) K, 1.0f,
               cnn->col, (int) K, l->w, (int) l->out_c, 0.0f, out, (int) l->out_c);
  bias_act (out, M, l->out_c, l->b, TRUE);
}

static void
pool_forward (const Layer *l, const float *in, float *out, gsize nb)
{
  guint C = l->in_c, W = l->in_w;
  for (gsize e = 0; e < nb; e++, in += (gsize) l->in_h * W * C, out += (gsize) l->out_h * l->out_w * C)
  for (guint y = 0; y < l->out_h; y++)
    for (guint x = 0; x < l->out_w; x++) {
      const float *a = in + ((gsize) (2 * y) * W + 2 * x) * C;
      const float *b = a + C;
      const float *c = a + (gsize) W * C;
      const float *d = c + C;
      float *o = out + ((gsize) y * l->out_w + x) * C;
      for (guint k = 0; k < C; k++) {
        float m = MAX (a[k], b[k]);
        m = MAX (m, c[k]);
        o[k] = MAX (m, d[k]);
      }
    }
}

static void
gap_forward (const Layer *l, const float *in, float *out, gsize nb)
{
  guint C = l->in_c;
  gsize n = (gsize) l->in_h * l->in_w;
  double *acc = g_alloca (sizeof (double) * C);
  for (gsize e = 0; e < nb; e++, in += n * C, out += C) {
  memset (acc, 0, sizeof (double) * C);
  for (gsize p = 0; p < n; p++)
    for (guint k = 0; k < C; k++)
      acc[k] += in[p * C + k];
  for (guint k = 0; k < C; k++)
    out[k] = (float) (acc[k] / (double) n);
  }
}

/* cnn->norm = the @nb examples of @input centred (center_height) and normalised
 * (input_mean / input_std), in that order. */
static void
prepare_input (ConyCnn *cnn, const float *input, gsize nb)
{
  guint C = cnn->in_c;
  gsize cols = (gsize) cnn->in_w * C, plane = cols * cnn->in_h;
  memcpy (cnn->norm, input, sizeof (float) * plane * nb);
  if (cnn->center_height) {
    double *sum = cnn->col_sum;
    for (gsize e = 0; e < nb; e++) {
      float *x = cnn->norm + e * plane;
      memset (sum, 0, sizeof (double) * cols);
      for (guint h = 0; h < cnn->in_h; h++)
        for (gsize j = 0; j < cols; j++)
          sum[j] += x[h * cols + j];
      for (gsize j = 0; j < cols; j++)
        sum[j] /= cnn->in_h;
      for (guint h = 0; h < cnn->in_h; h++)
        for (gsize j = 0; j < cols; j++)
          x[h * cols + j] -= (float) sum[j];
    }
  }
  if (cnn->in_mean != NULL) {
    float *inv = g_alloca (sizeof (float) * C);
    for (guint k = 0; k < C; k++)
      inv[k] = 1.0f / cnn->in_std[k];
    for (gsize p = 0; p < plane / C * nb; p++)
      for (guint k = 0; k < C; k++)
        cnn->norm[p * C + k] = (cnn->norm[p * C + k] - cnn->in_mean[k]) * inv[k];
  }
}

/* Runs the conv/pool stack on @nb examples (at most conv_cap); returns the
 * buffer holding their flattened (NHWC) results one after the other. */
static const float *
features_forward (ConyCnn *cnn, const float *input, gsize nb)
{
  const float *cur = input;
  if (cnn->in_mean != NULL || cnn->center_height) {
    prepare_input (cnn, input, nb);
    cur = cnn->norm;
  }
  float *bufs[2] = { cnn->act_a, cnn->act_b };
  int which = 0;
  for (guint i = 0; i < cnn->first_fc; i++) {
    Layer *l = &cnn->layers[i];
    float *out = bufs[which];
    guint tile = l->kind == LAYER_CONV ? wino_tile (cnn, l, nb) : 0;
    if (tile != 0)
      conv_winograd (cnn, l, tile, cur, out, nb);
    else if (l->kind == LAYER_CONV)
      conv_im2col (cnn, l, cur, out, nb);
    else if (l->kind == LAYER_GAP)
      gap_forward (l, cur, out, nb);
    else
      pool_forward (l, cur, out, nb);
    cur = out;
    which ^= 1;
  }
  return cur;
}

/* ---- FC layers with F16 weights ----
 * When a model file stores an FC weight in F16 (or after cony_cnn_set_fc_f16()),
 * the layer keeps the F16 values only (half the bytes of F32) and computes with
 * them expanded to float32 in registers: the result is the F32 network with those
 * weights, to float rounding. One example: the float16 matrix-vector product of
 * src/gemv.c (F16C conversion + FMA where the CPU has them, a portable loop
 * otherwise). A batch: blocks of rows expanded to F32 in scratch, then sgemm.
 * See fc_f16(). */

/* FC layer with F16 weights on n examples: dst (n x out) = src (n x in) W^T. */
static void
fc_f16 (ConyCnn *cnn, const Layer *l, const float *src, gsize n, float *dst)
{
  gsize in = l->in_c, out = l->out_c;
  if (n == 1) {
    memset (dst, 0, out * sizeof *dst);
    if (cnn_kernels ()->portable)
      cony_gemv_portable (&l->w16, src, dst);
    else
      cony_gemv (&l->w16, src, dst);
    return;
  }
  /* Rows expanded in blocks of at most FC_F16_BLOCK floats, each block used by
   * every example. */
  gsize rb = MAX ((gsize) 16, FC_F16_BLOCK / in);
  rb = MIN (rb, out);
  if (cnn->fc_w32 == NULL || cnn->fc_w32_cap < rb * in) {
    g_free (cnn->fc_w32);
    cnn->fc_w32 = g_new (float, rb * in);
    cnn->fc_w32_cap = rb * in;
  }
  for (gsize r0 = 0; r0 < out; r0 += rb) {
    gsize r = MIN (rb, out - r0);
    cony_half_expand (l->w16.f16 + r0 * in, r * in, cnn->fc_w32);
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, (int) n, (int) r, (int) in, 1.0f, src,
                 (int) in, cnn->fc_w32, (int) in, 0.0f, dst + r0, (int) out);
  }
}

static void
fc_forward (ConyCnn *cnn, const float *in, gsize n, float *out)
{
  const float *cur = in;
  float *bufs[2] = { cnn->fc_a, cnn->fc_b };
  int which = 0;
  for (guint i = cnn->first_fc; i < cnn->n_layers; i++) {
    const Layer *l = &cnn->layers[i];
    gboolean last = i + 1 == cnn->n_layers;
    float *dst = last ? out : bufs[which];
    if (l->w16.f16 != NULL)
      fc_f16 (cnn, l, cur, n, dst);
    else if (n == 1)
      cblas_sgemv (CblasRowMajor, CblasNoTrans, (int) l->out_c, (int) l->in_c, 1.0f, l->w,
                   (int) l->in_c, cur, 1, 0.0f, dst, 1);
    else
      cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, (int) n, (int) l->out_c,
                   (int) l->in_c, 1.0f, cur, (int) l->in_c, l->w, (int) l->in_c, 0.0f, dst,
                   (int) l->out_c);
    bias_act (dst, n, l->out_c, l->b, l->relu || (last && cnn->final_relu));
    cur = dst;
    which ^= 1;
  }
}

static void
ensure_fc_scratch (ConyCnn *cnn, gsize n)
{
  if (cnn->fc_batch_cap >= n)
    return;
  gsize width = 0;
  for (guint i = cnn->first_fc; i < cnn->n_layers; i++)
    width = MAX (width, MAX ((gsize) cnn->layers[i].in_c, (gsize) cnn->layers[i].out_c));
  g_free (cnn->fc_a);
  g_free (cnn->fc_b);
  cnn->fc_a = g_new (float, width * n);
  cnn->fc_b = g_new (float, width * n);
  cnn->fc_batch_cap = n;
}

static void
clocks (double *wall, double *cpu)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  *wall = ts.tv_sec + ts.tv_nsec * 1e-9;
  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
  *cpu = ts.tv_sec + ts.tv_nsec * 1e-9;
}

void
cony_cnn_forward (ConyCnn *cnn, const float *input, float *out)
{
  cony_cnn_forward_batch (cnn, input, 1, out);
}

void
cony_cnn_forward_batch (ConyCnn *cnn, const float *input, gsize n, float *out)
{
  g_return_if_fail (cnn != NULL);
  g_return_if_fail (n == 0 || (input != NULL && out != NULL));
  gsize in_size = cony_cnn_get_input_size (cnn);
  const Layer *fc0 = &cnn->layers[cnn->first_fc];
  gsize flat = fc0->in_c;
  for (gsize start = 0; start < n; start += FC_CHUNK) {
    gsize m = MIN ((gsize) FC_CHUNK, n - start);
    ensure_fc_scratch (cnn, m);
    /* The conv stack conv_batch examples at a time (their tiles or im2col rows
     * share each sgemm); the flattened features gathered so the FC layers see
     * the whole chunk. */
    double w0 = 0, c0 = 0, w1 = 0, c1 = 0;
    if (cnn->profiling)
      clocks (&w0, &c0);
    float *gathered = cnn->fc_b;
    gsize cb = MIN (cnn->conv_batch, m);
    ensure_conv_scratch (cnn, cb);
    for (gsize k = 0; k < m; k += cb) {
      gsize nb = MIN (cb, m - k);
      const float *f = features_forward (cnn, input + (start + k) * in_size, nb);
      memcpy (gathered + k * flat, f, sizeof (float) * flat * nb);
    }
    if (cnn->profiling)
      clocks (&w1, &c1);
    /* fc_forward alternates fc_a/fc_b starting with fc_a: the input in fc_b
     * is read by the first layer, which writes fc_a. */
    fc_forward (cnn, gathered, m, out + start * cnn->out_dim);
    if (cnn->profiling) {
      double w2, c2;
      clocks (&w2, &c2);
      cnn->prof.conv_wall += w1 - w0;
      cnn->prof.conv_cpu += c1 - c0;
      cnn->prof.fc_wall += w2 - w1;
      cnn->prof.fc_cpu += c2 - c1;
      cnn->prof.examples += m;
    }
  }
}

gboolean
cony_cnn_get_fc_f16 (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  for (guint i = cnn->first_fc; i < cnn->n_layers; i++)
    if (cnn->layers[i].w16.f16 == NULL)
      return FALSE;
  return TRUE;
}

gboolean
cony_cnn_set_fc_f16 (ConyCnn *cnn, gboolean f16, GError **error)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  if (f16) {
    /* Check the range first so that a refusal changes nothing. */
    for (guint i = cnn->first_fc; i < cnn->n_layers; i++) {
      const Layer *l = &cnn->layers[i];
      gsize n = (gsize) l->in_c * l->out_c;
      for (gsize j = 0; l->w != NULL && j < n; j++)
        if (!(fabsf (l->w[j]) < 65520.0f)) {
          g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
                       "%s: tensor %s.weight holds %g at flat index %" G_GSIZE_FORMAT
                       ", outside the F16 range", cnn->source, l->name, l->w[j], j);
          return FALSE;
        }
    }
  }
  for (guint i = cnn->first_fc; i < cnn->n_layers; i++) {
    Layer *l = &cnn->layers[i];
    gsize n = (gsize) l->in_c * l->out_c;
    if (f16 && l->w != NULL) {
      guint16 *h = g_new (guint16, n);
      for (gsize j = 0; j < n; j++)
        h[j] = cony_float_to_half (l->w[j]);
      cony_gemv_matrix_init_f16 (&l->w16, h, (int) l->out_c, (int) l->in_c, TRUE);
      g_clear_pointer (&l->w, g_free);
    } else if (!f16 && l->w16.f16 != NULL) {
      l->w = g_new (float, n);
      cony_half_expand (l->w16.f16, n, l->w);
      cony_gemv_matrix_clear (&l->w16);
    }
  }
  return TRUE;
}

void
cony_cnn_set_conv_algorithm (ConyCnn *cnn, ConyCnnConvAlgorithm algorithm)
{
  g_return_if_fail (cnn != NULL);
  g_return_if_fail (algorithm <= CONY_CNN_CONV_WINOGRAD4);
  cnn->conv_algo = algorithm;
}

ConyCnnConvAlgorithm
cony_cnn_get_conv_algorithm (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, CONY_CNN_CONV_AUTO);
  return cnn->conv_algo;
}

void
cony_cnn_set_profiling (ConyCnn *cnn, gboolean enable)
{
  g_return_if_fail (cnn != NULL);
  cnn->profiling = enable;
  memset (&cnn->prof, 0, sizeof cnn->prof);
}

void
cony_cnn_get_profile (const ConyCnn *cnn, ConyCnnProfile *profile)
{
  g_return_if_fail (cnn != NULL && profile != NULL);
  *profile = cnn->prof;
}

/* ---------------------------------------------------------------- PCA */

gboolean
cony_cnn_postprocess (const ConyCnn *cnn, ConyCnnPostprocess mode, const float *emb, gsize n,
                      float *out, GError **error)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  g_return_val_if_fail (n == 0 || (emb != NULL && out != NULL), FALSE);
  guint d = cnn->out_dim;
  if (mode == CONY_CNN_POSTPROCESS_NONE) {
    if (out != emb && n > 0)
      memmove (out, emb, sizeof (float) * n * d);
    return TRUE;
  }
  if (mode != CONY_CNN_POSTPROCESS_TF && mode != CONY_CNN_POSTPROCESS_TORCH) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "%s: unknown postprocess mode %d",
                 cnn->source, (int) mode);
    return FALSE;
  }
  if (cnn->pca_e == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
                 "%s: the PCA postprocess needs tensors pca_eigen_vectors (%u, %u) and "
                 "pca_means (%u), which the model does not have", cnn->source, d, d, d);
    return FALSE;
  }
  double *centred = g_new (double, d);
  float *centred_f = g_new (float, d);
  for (gsize r = 0; r < n; r++) {
    const float *e = emb + r * d;
    float *o = out + r * d;
    if (mode == CONY_CNN_POSTPROCESS_TF) {
      /* vggish_postprocess.py: float64 maths, then astype(uint8) truncation. */
      for (guint i = 0; i < d; i++)
        centred[i] = (double) e[i] - (double) cnn->pca_mu[i];
      for (guint j = 0; j < d; j++) {
        const float *row = cnn->pca_e + (gsize) j * d;
        double p = 0.0;
        for (guint i = 0; i < d; i++)
          p += (double) row[i] * centred[i];
        p = CLAMP (p, -2.0, 2.0);
        o[j] = (float) floor ((p + 2.0) * (255.0 / 4.0));
      }
    } else {
      /* torchvggish: float32 maths, torch.round (half to even). */
      for (guint i = 0; i < d; i++)
        centred_f[i] = e[i] - cnn->pca_mu[i];
      for (guint j = 0; j < d; j++) {
        const float *row = cnn->pca_e + (gsize) j * d;
        float p = 0.0f;
        for (guint i = 0; i < d; i++)
          p += row[i] * centred_f[i];
        p = CLAMP (p, -2.0f, 2.0f);
        o[j] = rintf ((p + 2.0f) * (255.0f / 4.0f));
      }
    }
  }
  g_free (centred);
  g_free (centred_f);
  return TRUE;
}
