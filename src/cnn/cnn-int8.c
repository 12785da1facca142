/* The integer path of the CNN engine (cnn-private.h): TFLite's integer semantics for
 * MobileNet-v1 and -v2 files converted from a quantised .tflite (YAMNet, the ImageNet
 * MobileNets). Activations are int8 with the per-tensor scale and zero point the file
 * records (metadata `quantization`; uint8 tensors as int8, zero point - 128), weights
 * int8 per output channel or uint8 with zero points (packed once by qkernels.c), biases
 * int32, accumulation in int32, and every output requantised by src/kernels/qmath.h
 * (fixed-point multiplier and shift); ReLU6 is the clamp of the output range. Layers:
 * 3x3 conv (im2col), depthwise 3x3, pointwise, the residual ADD (TFLite's: left shift
 * 20, one multiplier per input, one for the sum), the mean over H and W (TFLite's
 * integer MEAN), fully connected, the logistic as a 256-entry table computed in float
 * (TFLite's int8 LUT kernel, what ArmNN computes too) and the softmax in float on the
 * dequantised logits, quantised to its output (ArmNN's; TFLite's to one step). */
#include "cnn-private.h"

#include "cony/error.h"
#include "qkernels.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

typedef struct _CnnQLayer {
  float in_scale, out_scale;
  gint32 in_zp, out_zp;
  ConyQGemm gemm; /* CONV (K = 9 * in_c, im2col order), PW, FC */
  /* CONV of one channel where the kernel set reads rows in place (gemm_rows): each
   * kernel row a quad, its fourth weight zero (K = 12); else zeros */
  ConyQGemm rows;
  ConyQDw dw;     /* DW */
  ConyQMul gap_m; /* GAP: in_scale / out_scale */
  ConyQAddK *add; /* ADD: the map plus layer add_from's saved output */
  gint8 lut[256]; /* SIGMOID: output of input q at [q + 128] */
} QLayer;

struct _CnnInt8 {
  guint n; /* layers 0 .. n-1 run in int8 */
  float in_scale;
  gint32 in_zp;
  QLayer *layers;
  /* Per example, [0] for the layers before the FC head, [1] for the head: */
  gsize max_act[2]; /* int8 bytes of the largest map */
  gsize max_a[2];   /* int16 values of the largest product operand */
  gsize max_col;    /* int8 bytes of the largest im2col matrix (one example) */
  gsize max_keep;   /* int8 bytes of the largest map a residual add reads later */
};

/* Bytes after the im2col matrix that im2col_narrow's last copies may write. */
#define COL_SLACK 16

struct _CnnInt8Scratch {
  gsize act_cap, a_cap, col_cap, res_cap; /* bytes in qa and qb, values in a, bytes */
  gint8 *qa, *qb, *col, *res;             /* res: the saved map of a residual */
  gint8 *map;                             /* a depthwise layer's padded input map */
  gsize map_cap;
  gint16 *a;
  gint32 *acc;
};

/* ---------------------------------------------------------------- loading */

/* @node as a number (*@integer: only an integer literal), else FALSE: the json-glib
 * getters assert on arrays and objects and read strings as 0. */
static gboolean
read_number (JsonNode *node, gboolean integer, double *out)
{
  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node))
    return FALSE;
  GType t = json_node_get_value_type (node);
  if (t == G_TYPE_INT64)
    *out = (double) json_node_get_int (node);
  else if (t == G_TYPE_DOUBLE && !integer)
    *out = json_node_get_double (node);
  else
    return FALSE;
  return TRUE;
}

static gboolean
read_pair (JsonNode *node, float *scale, gint32 *zp)
{
  if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node))
    return FALSE;
  JsonArray *a = json_node_get_array (node);
  double s, z;
  if (json_array_get_length (a) != 2 || !read_number (json_array_get_element (a, 0), FALSE, &s)
      || !read_number (json_array_get_element (a, 1), TRUE, &z))
    return FALSE;
  /* the scale is used as a float: 4e123 is a finite double but an infinite float */
  float fs = (float) s;
  if (!(fs > 0.0f) || !isfinite (fs) || z < -128 || z > 127)
    return FALSE;
  *scale = fs;
  *zp = (gint32) z;
  return TRUE;
}

/* @l's weights as the file has them (I8, or U8 with one zero point per output
 * channel: TFLite's uint8 asymmetric weights) into @qw, and their F32 scales; FALSE
 * with @error. The tensors were checked by the float loader (cnn_read_weight). */
static gboolean
file_weights (const ConySafetensors *st, const Layer *l, ConyQWeights *qw, gint32 **zp,
    float **scale, GError **error)
{
  g_autofree char *wname = g_strdup_printf ("%s.weight", l->name);
  g_autofree char *sname = g_strdup_printf ("%s.weight_scale", l->name);
  g_autofree char *zname = g_strdup_printf ("%s.weight_zero_point", l->name);
  const ConyTensorInfo *ti = cony_safetensors_find (st, wname);
  const ConyTensorInfo *zi = cony_safetensors_find (st, zname);
  if (ti == NULL || (ti->dtype != CONY_DTYPE_I8 && ti->dtype != CONY_DTYPE_U8)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: %s is quantised (metadata quantization) but %s is not I8 or U8: the integer "
        "path needs the file's quantised weights",
        cony_safetensors_path (st), l->name, wname);
    return FALSE;
  }
  gsize shape[1] = { l->out_c };
  *scale = cony_safetensors_get_f32 (st, sname, 1, shape, error);
  if (*scale == NULL)
    return FALSE;
  *qw = (ConyQWeights){ ti->data, ti->dtype == CONY_DTYPE_U8, NULL, FALSE };
  if (qw->is_u8) {
    *zp = g_new (gint32, l->out_c);
    for (guint c = 0; c < l->out_c; c++)
      (*zp)[c] = zi->data[c];
    qw->zp = *zp;
    qw->zp_per_chan = TRUE;
  }
  return TRUE;
}

/* The file's int32 biases (layers.I.bias_quantized, I64 holding int32 values), or
 * NULL (none, or with @error: malformed). */
static gint32 *
file_bias (const ConySafetensors *st, const Layer *l, GError **error)
{
  g_autofree char *name = g_strdup_printf ("%s.bias_quantized", l->name);
  const ConyTensorInfo *ti = cony_safetensors_find (st, name);
  if (ti == NULL)
    return NULL;
  if (ti->dtype != CONY_DTYPE_I64 || ti->ndim != 1 || ti->shape[0] != l->out_c) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE, "%s: tensor %s must be I64 (%u)",
        cony_safetensors_path (st), name, l->out_c);
    return NULL;
  }
  gint32 *b = g_new (gint32, l->out_c);
  for (guint c = 0; c < l->out_c; c++) {
    gint64 v;
    memcpy (&v, ti->data + 8 * c, 8);
    if (v < G_MININT32 || v > G_MAXINT32) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: %s[%u] = %" G_GINT64_FORMAT " is outside int32", cony_safetensors_path (st), name, c,
          v);
      g_free (b);
      return NULL;
    }
    b[c] = (gint32) v;
  }
  return b;
}

/* Per channel: the int32 bias (the file's bias_quantized, or else its float bias
 * divided by in_scale x w_scale, exact for biases of up to 24 bits) and the
 * multiplier in_scale x w_scale / out_scale. */
static gboolean
bias_and_multipliers (const ConySafetensors *st, const Layer *l, const QLayer *q,
    const float *wscale, gint32 *bias, ConyQMul *m, GError **error)
{
  g_autofree gint32 *given = file_bias (st, l, error);
  if (given == NULL && error != NULL && *error != NULL)
    return FALSE;
  for (guint c = 0; c < l->out_c; c++) {
    double s = (double) q->in_scale * (double) wscale[c];
    double b = (double) l->b[c] / s;
    if (given == NULL && (!(fabs (b - round (b)) <= 0.25) || fabs (b) > 1e9)) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: %s.bias[%u] = %g is not an int32 bias at scale input x weight (%g): the "
          "quantization metadata does not fit the weights",
          cony_safetensors_path (st), l->name, c, l->b[c], s);
      return FALSE;
    }
    bias[c] = given ? given[c] : (gint32) round (b);
    if (!cony_q_multiplier (s / (double) q->out_scale, &m[c])) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: %s: requantisation multiplier %g out of range", cony_safetensors_path (st), l->name,
          s / q->out_scale);
      return FALSE;
    }
  }
  return TRUE;
}

/* CONV weights in the product's (N x K) order: from torch's (out, in, 3, 3) to
 * K = (ky * 3 + kx) * in + ci (im2col's columns). */
static gint8 *
gemm_weights (const Layer *l, const void *data)
{
  const gint8 *t = data; /* int8 or uint8 bytes, moved as they are */
  guint C = l->in_c, K = 9 * C;
  gint8 *w = g_new (gint8, (gsize) K * l->out_c);
  for (guint o = 0; o < l->out_c; o++)
    for (guint ci = 0; ci < C; ci++)
      for (guint q = 0; q < 9; q++)
        w[(gsize) o * K + q * C + ci] = t[((gsize) o * C + ci) * 9 + q];
  return w;
}

/* A weighted layer's file weights, their scales and zero points, its int32 biases and
 * multipliers, and its output range (the activation's clamp when @clamp). */
typedef struct {
  ConyQWeights qw;
  float *ws;
  gint32 *wzp, *bias;
  ConyQMul *m;
  gint32 lo, hi;
} FileLayer;

static void
file_layer_clear (FileLayer *f)
{
  g_free (f->ws);
  g_free (f->wzp);
  g_free (f->bias);
  g_free (f->m);
}

static gboolean
file_layer (const ConySafetensors *st, const Layer *l, const QLayer *q, gboolean clamp,
    FileLayer *f, GError **error)
{
  f->lo = -128;
  f->hi = 127;
  if (clamp)
    cony_q_act_range (l->relu, l->relu_max, q->out_scale, q->out_zp, &f->lo, &f->hi);
  if (!file_weights (st, l, &f->qw, &f->wzp, &f->ws, error))
    return FALSE;
  f->bias = g_new (gint32, l->out_c);
  f->m = g_new (ConyQMul, l->out_c);
  return bias_and_multipliers (st, l, q, f->ws, f->bias, f->m, error);
}

/* A one-channel 3x3 CONV's weights @w (9 a row) as quads, one a kernel row, each
 * fourth weight the channel's zero point (zero once it is taken off). */
static gint8 *
row_quad_weights (const Layer *l, const ConyQWeights *w)
{
  gint8 *out = g_new (gint8, (gsize) 12 * l->out_c);
  const gint8 *t = w->data; /* int8 or uint8 bytes, moved as they are */
  for (guint o = 0; o < l->out_c; o++)
    for (guint k = 0; k < 12; k++) {
      gint32 zp = w->zp == NULL ? 0 : w->zp[w->zp_per_chan ? o : 0];
      out[(gsize) o * 12 + k] = k % 4 < 3 ? t[(gsize) o * 9 + k / 4 * 3 + k % 4] : (gint8) zp;
    }
  return out;
}

/* q->rows for a one-channel CONV whose kernel set reads rows in place, where it runs. */
static void
load_rows (const Layer *l, QLayer *q, const FileLayer *f)
{
  const ConyQKernels *k = cony_qkernels ();
  if (k->gemm_rows == NULL || l->in_c != 1)
    return;
  g_autofree gint8 *quads = row_quad_weights (l, &f->qw);
  ConyQWeights qw = f->qw;
  qw.data = quads;
  cony_qgemm_init (&q->rows, k, 12, l->out_c, &qw, q->in_zp, f->bias, f->m, q->out_zp, f->lo,
      f->hi);
  if (!cony_qgemm_rows_ok (&q->rows)) {
    cony_qgemm_clear (&q->rows);
    memset (&q->rows, 0, sizeof q->rows);
  }
}

/* A CONV (@im2col: K = 9 in), PW or FC layer's weights packed for the product, with
 * their biases and multipliers. */
static gboolean
load_gemm (const ConySafetensors *st, const Layer *l, QLayer *q, gboolean clamp, gboolean im2col,
    GError **error)
{
  FileLayer f = { 0 };
  gboolean ok = file_layer (st, l, q, clamp, &f, error);
  if (ok) {
    g_autofree gint8 *conv = im2col ? gemm_weights (l, f.qw.data) : NULL;
    if (conv != NULL)
      f.qw.data = conv;
    guint K = im2col ? 9 * l->in_c : l->in_c;
    cony_qgemm_init (&q->gemm, cony_qkernels (), K, l->out_c, &f.qw, q->in_zp, f.bias, f.m,
        q->out_zp, f.lo, f.hi);
    if (im2col)
      load_rows (l, q, &f);
  }
  file_layer_clear (&f);
  return ok;
}

/* Per example, [0] for the layers before the FC head, [1] for the head. */
static int
part (const CnnWeights *w, guint i)
{
  return i >= w->first_fc;
}

gboolean
cnn_int8_load_conv (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8, guint i,
    GError **error)
{
  const Layer *l = &w->layers[i];
  QLayer *q = &q8->layers[i];
  gsize pixels = (gsize) l->out_h * l->out_w;
  if (!load_gemm (st, l, q, TRUE, TRUE, error))
    return FALSE;
  q8->max_a[part (w, i)] = MAX (q8->max_a[part (w, i)], cony_qgemm_scratch (&q->gemm, pixels));
  q8->max_col = MAX (q8->max_col, pixels * q->gemm.K);
  return TRUE;
}

gboolean
cnn_int8_load_pw (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8, guint i,
    GError **error)
{
  const Layer *l = &w->layers[i];
  QLayer *q = &q8->layers[i];
  gsize pixels = (gsize) l->out_h * l->out_w;
  if (!load_gemm (st, l, q, TRUE, FALSE, error))
    return FALSE;
  q8->max_a[part (w, i)] = MAX (q8->max_a[part (w, i)], cony_qgemm_scratch (&q->gemm, pixels));
  return TRUE;
}

gboolean
cnn_int8_load_fc (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8, guint i,
    GError **error)
{
  QLayer *q = &q8->layers[i];
  if (!load_gemm (st, &w->layers[i], q, FALSE, FALSE, error))
    return FALSE;
  q8->max_a[part (w, i)] = MAX (q8->max_a[part (w, i)], cony_qgemm_scratch (&q->gemm, 1));
  return TRUE;
}

/* DW: the weights for the depthwise kernel. */
gboolean
cnn_int8_load_dw (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8, guint i,
    GError **error)
{
  const Layer *l = &w->layers[i];
  QLayer *q = &q8->layers[i];
  FileLayer f = { 0 };
  gboolean ok = file_layer (st, l, q, TRUE, &f, error);
  if (ok)
    cony_qdw_init (&q->dw, l->out_c, &f.qw, f.bias, f.m, q->in_zp, q->out_zp, f.lo, f.hi);
  file_layer_clear (&f);
  return ok;
}

/* TFLite's integer mean: the sum times in/out scale, then divided by the count (its
 * average pool, same scales: a multiplier of 1). */
gboolean
cnn_int8_load_gap (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8, guint i,
    GError **error)
{
  QLayer *q = &q8->layers[i];
  if (!cony_q_multiplier ((double) q->in_scale / (double) q->out_scale, &q->gap_m)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "%s: %s: mean multiplier out of range",
        cony_safetensors_path (st), w->layers[i].name);
    return FALSE;
  }
  return TRUE;
}

/* The map so far (in) plus layer add_from's output, as TFLite's ADD. */
gboolean
cnn_int8_load_add (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8, guint i,
    GError **error)
{
  const Layer *l = &w->layers[i];
  QLayer *q = &q8->layers[i];
  const QLayer *from = &q8->layers[l->add_from];
  ConyQAdd add;
  if (!cony_q_add_init (&add, q->in_scale, q->in_zp, from->out_scale, from->out_zp, q->out_scale,
          q->out_zp, -128, 127)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: %s: add multipliers out of range (scales %g, %g -> %g)", cony_safetensors_path (st),
        l->name, q->in_scale, from->out_scale, q->out_scale);
    return FALSE;
  }
  q->add = g_new (ConyQAddK, 1);
  cony_qadd_init (q->add, &add);
  return TRUE;
}

gboolean
cnn_int8_load_sigmoid (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8, guint i,
    GError **error)
{
  QLayer *q = &q8->layers[i];
  for (int v = -128; v < 128; v++) {
    float x = q->in_scale * (float) (v - q->in_zp);
    q->lut[v + 128] = cony_q_quantize (1.0f / (1.0f + expf (-x)), q->out_scale, q->out_zp);
  }
  return TRUE;
}

/* In float on the dequantised row (softmax_q): nothing to load. */
gboolean
cnn_int8_load_softmax (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8, guint i,
    GError **error)
{
  return TRUE;
}

/* Layer @i of @w into q8->layers[i] (whose scales and zero points are set; the layers
 * before it are loaded). */
static gboolean
load_layer (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8, guint i, GError **error)
{
  const Layer *l = &w->layers[i];
  const CnnLayerClass *k = cnn_layer_class (l->kind);
  if (k->int8_load == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: %s cannot run in int8 (no integer kernel)", cony_safetensors_path (st), l->name);
    return FALSE;
  }
  return k->int8_load (st, w, q8, i, error);
}

static void
qlayer_clear (QLayer *q)
{
  cony_qgemm_clear (&q->gemm);
  cony_qgemm_clear (&q->rows);
  cony_qdw_clear (&q->dw);
  if (q->add != NULL)
    cony_qadd_clear (q->add);
  g_clear_pointer (&q->add, g_free);
}

CnnInt8 *
cnn_int8_ref (CnnInt8 *q)
{
  return g_atomic_rc_box_acquire (q);
}

static void
int8_clear (gpointer p)
{
  CnnInt8 *q = p;
  for (guint i = 0; i < q->n; i++)
    qlayer_clear (&q->layers[i]);
  g_free (q->layers);
}

void
cnn_int8_unref (CnnInt8 *q)
{
  if (q != NULL)
    g_atomic_rc_box_release_full (q, int8_clear);
}

static gsize
map_size (const Layer *l, gboolean out)
{
  return out ? (gsize) l->out_h * l->out_w * l->out_c : (gsize) l->in_h * l->in_w * l->in_c;
}

/* The metadata is {"input": [scale, zp], "layers": [[scale, zp] or null, ...]}, one
 * entry per layer (its output); the integer prefix ends at the first null. */
gboolean
cnn_int8_load (CnnWeights *w, const ConySafetensors *st, GError **error)
{
  const char *text = cony_safetensors_metadata (st, "quantization");
  if (text == NULL)
    return TRUE;
  const char *path = cony_safetensors_path (st);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonNode *root = json_parser_load_from_data (parser, text, -1, NULL)
      ? json_parser_get_root (parser)
      : NULL;
  JsonObject *o = root && JSON_NODE_HOLDS_OBJECT (root) ? json_node_get_object (root) : NULL;
  JsonNode *layers = o ? json_object_get_member (o, "layers") : NULL;
  CnnInt8 *q = g_atomic_rc_box_new0 (CnnInt8);
  if (o == NULL || !read_pair (json_object_get_member (o, "input"), &q->in_scale, &q->in_zp)
      || layers == NULL || !JSON_NODE_HOLDS_ARRAY (layers)
      || json_array_get_length (json_node_get_array (layers)) != w->n_layers) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: metadata quantization must be {\"input\": [scale, zero_point], \"layers\": "
        "[[scale, zero_point] or null, one per layer (%u)]} with scales > 0 (finite as "
        "float32) and zero points in -128..127",
        path, w->n_layers);
    cnn_int8_unref (q);
    return FALSE;
  }
  JsonArray *la = json_node_get_array (layers);
  q->layers = g_new0 (QLayer, w->n_layers);
  float scale = q->in_scale;
  gint32 zp = q->in_zp;
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < w->n_layers; i++) {
    JsonNode *e = json_array_get_element (la, i);
    if (JSON_NODE_HOLDS_NULL (e))
      break;
    QLayer *ql = &q->layers[i];
    const Layer *l = &w->layers[i];
    ql->in_scale = scale;
    ql->in_zp = zp;
    if (!read_pair (e, &ql->out_scale, &ql->out_zp)) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: metadata quantization: layers[%u] must be [scale > 0, zero point in "
          "-128..127] or null",
          path, i);
      ok = FALSE;
      break;
    }
    q->n = i + 1;                         /* cleared by int8_clear from here on */
    ok = load_layer (st, w, q, i, error); /* with its kernel's scratch sizes */
    scale = ql->out_scale;
    zp = ql->out_zp;
    int h = part (w, i);
    q->max_act[h] = MAX (q->max_act[h], MAX (map_size (l, FALSE), map_size (l, TRUE)));
    q->max_a[h] = MAX (q->max_a[h], (gsize) l->out_c); /* DW's int32 channels */
    if (l->keep)
      q->max_keep = MAX (q->max_keep, map_size (l, TRUE));
  }
  for (guint i = q->n; ok && i < w->n_layers; i++)
    if (!JSON_NODE_HOLDS_NULL (json_array_get_element (la, i))) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: metadata quantization: layers[%u] follows a null (float) layer: only a "
          "prefix of the layers can be integer",
          path, i);
      ok = FALSE;
    }
  if (!ok || q->n == 0) {
    cnn_int8_unref (q);
    return ok;
  }
  w->q8 = q;
  return TRUE;
}

/* ---------------------------------------------------------------- forward */

gboolean
cnn_int8_active (const ConyCnn *cnn)
{
  return cnn->w->q8 != NULL && cnn->precision != CONY_CNN_PRECISION_FLOAT;
}

void
cnn_int8_scratch_free (ConyCnn *cnn)
{
  CnnInt8Scratch *s = cnn->q8s;
  if (s == NULL)
    return;
  g_free (s->qa);
  g_free (s->qb);
  g_free (s->res);
  g_free (s->map);
  g_free (s->col);
  g_free (s->a);
  g_free (s->acc);
  g_free (s);
  cnn->q8s = NULL;
}

/* The scratch for @nb examples of the layers before the head (@head FALSE) or of the
 * head; acc is made once (its size does not grow with examples), the depthwise map
 * when a layer first needs it. */
static CnnInt8Scratch *
scratch (ConyCnn *cnn, gsize nb, gboolean head)
{
  const CnnInt8 *q = cnn->w->q8;
  CnnInt8Scratch *s = cnn->q8s;
  if (s == NULL) {
    s = cnn->q8s = g_new0 (CnnInt8Scratch, 1);
    s->acc = g_new (gint32, MAX (q->max_a[0], q->max_a[1]) + 16);
  }
  gsize act = q->max_act[head] * nb, a = q->max_a[head] * nb + 16;
  if (s->act_cap < act) {
    g_free (s->qa);
    g_free (s->qb);
    s->qa = g_new (gint8, act);
    s->qb = g_new (gint8, act);
    s->act_cap = act;
  }
  gsize res = head ? 0 : q->max_keep * nb;
  if (s->res_cap < res) {
    g_free (s->res);
    s->res = g_new (gint8, res);
    s->res_cap = res;
  }
  gsize col = head ? 0 : q->max_col * nb + COL_SLACK;
  if (s->col_cap < col) {
    g_free (s->col);
    s->col = g_new (gint8, col);
    s->col_cap = col;
  }
  if (s->a_cap < a) {
    g_free (s->a);
    s->a = g_new (gint16, a);
    s->a_cap = a;
  }
  return s;
}

/* @n (= 3 C) bytes of one kernel row, @src inside the map: a fixed-size copy for
 * the RGB input (C = 3), which the compiler inlines. */
static inline void
copy_taps (gint8 *dst, const gint8 *src, guint n)
{
  if (n == 9)
    memcpy (dst, src, 9);
  else
    memcpy (dst, src, n);
}

/* im2col_q for one input channel (YAMNet's log-mel patch): the nine taps of each pixel
 * copied one by one, the padding's where a tap falls outside. The generic loop spent
 * about 26 cycles a pixel on its per-row checks, as long as the product after it. */
static void
im2col_one (const Layer *l, const QLayer *q, const gint8 *in, gint8 *col)
{
  guint s = l->stride, K = q->gemm.K;
  int W = (int) l->in_w, H = (int) l->in_h;
  gint8 zp = (gint8) q->in_zp;
  for (guint y = 0; y < l->out_h; y++) {
    const gint8 *rows[3];
    for (int ky = 0; ky < 3; ky++) {
      int yy = (int) (y * s) + ky - (int) l->pad_top;
      rows[ky] = yy >= 0 && yy < H ? in + (gsize) yy * W : NULL;
    }
    gboolean all_rows = rows[0] && rows[1] && rows[2];
    gint8 *dst = col + (gsize) y * l->out_w * K;
    for (guint x = 0; x < l->out_w; x++, dst += K) {
      int x0 = (int) (x * s) - (int) l->pad_left;
      if (all_rows && x0 >= 0 && x0 + 2 < W) {
        for (int t = 0; t < 9; t++)
          dst[t] = rows[t / 3][x0 + t % 3];
        continue;
      }
      for (int t = 0; t < 9; t++) {
        int xx = x0 + t % 3;
        dst[t] = rows[t / 3] && xx >= 0 && xx < W ? rows[t / 3][xx] : zp;
      }
    }
  }
}

/* col (rows x K) = the 3x3 SAME neighbourhoods of one int8 map, the padding at the
 * input's zero point (the real value 0, as in TFLite). A kernel row inside the map is
 * 3 C contiguous bytes on both sides. */
static void
im2col_q (const Layer *l, const QLayer *q, const gint8 *in, gint8 *col)
{
  guint C = l->in_c, s = l->stride, K = q->gemm.K;
  if (C == 1) {
    im2col_one (l, q, in, col);
    return;
  }
  for (guint y = 0; y < l->out_h; y++)
    for (guint x = 0; x < l->out_w; x++) {
      gint8 *row = col + ((gsize) y * l->out_w + x) * K;
      int x0 = (int) (x * s) - (int) l->pad_left;
      gboolean whole = x0 >= 0 && x0 + 2 < (int) l->in_w;
      for (int ky = 0; ky < 3; ky++) {
        int yy = (int) (y * s) + ky - (int) l->pad_top;
        gint8 *dst = row + ky * 3 * C;
        if (yy < 0 || yy >= (int) l->in_h) {
          memset (dst, (gint8) q->in_zp, 3 * C);
          continue;
        }
        const gint8 *src = in + (gsize) yy * l->in_w * C;
        if (whole) {
          copy_taps (dst, src + (gsize) x0 * C, 3 * C);
          continue;
        }
        for (int kx = 0; kx < 3; kx++) {
          int xx = x0 + kx;
          gboolean inside = xx >= 0 && xx < (int) l->in_w;
          for (guint c = 0; c < C; c++)
            dst[kx * C + c] = inside ? src[(gsize) xx * C + c] : (gint8) q->in_zp;
        }
      }
    }
}

#define GAP_CHUNK 256 /* channels summed at a time: one pass per pixel row, vectorised */

/* TFLite's mean of @w channels from their sums over @n pixels: times in/out scale, then
 * divided by the count rounding half away from zero, plus the output zero point. The
 * division in double truncates exactly as the integer one: for |x| < 2^31 and n < 2^22 a
 * quotient that is not whole lies at least 1/n from the next whole number, more than
 * double rounding can move it (|x / n| 2^-53 < 2^-22). Built for x86-64-v3 too. */
static CONY_CLONES void
gap_finish (const QLayer *q, const gint32 *sums, guint w, gint32 n, gint8 *out)
{
  ConyQMul m = q->gap_m;
  gint32 in_zp = q->in_zp, out_zp = q->out_zp, half = n / 2;
  double dn = (double) n;
  gboolean exact = n < (1 << 22);
  for (guint k = 0; k < w; k++) {
    gint32 acc = cony_q_mul (sums[k] - n * in_zp, m);
    gint32 x = acc > 0 ? acc + half : acc - half;
    acc = exact ? (gint32) ((double) x / dn) : x / n;
    acc += out_zp;
    out[k] = (gint8) CLAMP (acc, -128, 127);
  }
}

static void
gap_q (const Layer *l, const QLayer *q, const gint8 *in, gint8 *out)
{
  gint32 n = (gint32) (l->in_h * l->in_w);
  gint32 sums[GAP_CHUNK];
  /* the channels' sums pixel by pixel, in contiguous runs (the integer sum is the same in
   * any order) */
  for (guint c = 0; c < l->in_c; c += GAP_CHUNK) {
    guint w = MIN (GAP_CHUNK, l->in_c - c);
    memset (sums, 0, sizeof sums);
    for (gint32 p = 0; p < n; p++) {
      const gint8 *px = in + (gsize) p * l->in_c + c;
      for (guint k = 0; k < w; k++)
        sums[k] += px[k];
    }
    gap_finish (q, sums, w, n, out + c);
  }
}

/* One map copied with its SAME padding (the zero point) into s->map (grown as needed):
 * the rows and columns @l's windows read, plus @extra columns on the right; its width
 * in pixels in *@width. */
static const gint8 *
padded_map (const Layer *l, const QLayer *q, const gint8 *in, guint extra, CnnInt8Scratch *s,
    guint *width)
{
  gsize C = l->in_c;
  guint st = l->stride, ph = (l->out_h - 1) * st + 3, pw = (l->out_w - 1) * st + 3 + extra;
  gsize row = (gsize) pw * C;
  if (s->map_cap < ph * row) {
    g_free (s->map);
    s->map_cap = ph * row;
    s->map = g_new (gint8, s->map_cap);
  }
  /* the map's columns inside the padded width: [pad_left, pad_left + cols) */
  guint cols = MIN (l->in_w, pw - MIN (l->pad_left, pw));
  for (guint y = 0; y < ph; y++) {
    gint8 *dst = s->map + y * row;
    gint64 iy = (gint64) y - l->pad_top;
    if (iy < 0 || iy >= l->in_h) {
      memset (dst, (gint8) q->in_zp, row);
      continue;
    }
    memset (dst, (gint8) q->in_zp, l->pad_left * C);
    memcpy (dst + l->pad_left * C, in + (gsize) iy * l->in_w * C, cols * C);
    memset (dst + (l->pad_left + cols) * C, (gint8) q->in_zp, (pw - l->pad_left - cols) * C);
  }
  *width = pw;
  return s->map;
}

/* The depthwise layer on one padded map: one kernel call for the whole map. */
static void
dw_padded (const ConyQKernels *k, const Layer *l, const QLayer *q, const gint8 *in, gint8 *out,
    CnnInt8Scratch *s)
{
  guint pw;
  const gint8 *map = padded_map (l, q, in, 0, s, &pw);
  k->dw (&q->dw, map, pw, l->out_h, l->out_w, l->stride, out, s->acc);
}

/* A one-channel CONV by the kernel set's gemm_rows (q->rows): each window's three kernel
 * rows read as quads straight from the padded map (one more column for the last
 * window's fourth values), no im2col. */
static void
conv_rows (const ConyQKernels *k, const Layer *l, const QLayer *q, const gint8 *in, gint8 *out,
    CnnInt8Scratch *s)
{
  guint pw, st = l->stride;
  const gint8 *map = padded_map (l, q, in, 1, s, &pw);
  ConyQRows rows = { map, st, l->out_w, (gsize) st * pw, pw };
  k->gemm_rows (&q->rows, (gsize) l->out_h * l->out_w, &rows, out, l->out_c);
}

/* im2col_q for a few input channels (3 C <= COL_SLACK: MobileNet-v2's RGB input) from
 * the padded map: a kernel row is one COL_SLACK-byte copy, its 3 C bytes and what
 * follows, which the next copy overwrites (the last pixel's spill lands in the column
 * buffer's slack; the map's extra columns keep the reads inside it). The generic loop's
 * per-row checks and variable-size copies cost about 80 us on MobileNet-v2's first
 * layer, half of it. */
static void
im2col_narrow (const Layer *l, const QLayer *q, const gint8 *in, gint8 *col, CnnInt8Scratch *s)
{
  guint C = l->in_c, st = l->stride, K = q->gemm.K, pw;
  const gint8 *map = padded_map (l, q, in, (COL_SLACK + C - 1) / C - 3, s, &pw);
  gsize row = (gsize) pw * C;
  for (guint y = 0; y < l->out_h; y++) {
    const gint8 *src = map + (gsize) y * st * row;
    gint8 *dst = col + (gsize) y * l->out_w * K;
    for (guint x = 0; x < l->out_w; x++, src += st * C, dst += K)
      for (guint ky = 0; ky < 3; ky++)
        memcpy (dst + ky * 3 * C, src + ky * row, COL_SLACK);
  }
}

/* The softmax of one row of @n int8 logits, in float on their dequantised values
 * (max subtracted first) and quantised to the output's grid: what ArmNN's reference
 * computes; TFLite's integer softmax agrees to one output step. @tmp: @n floats. */
static void
softmax_q (const QLayer *q, const gint8 *in, guint n, gint8 *out, float *tmp)
{
  gint8 mx = in[0];
  for (guint c = 1; c < n; c++)
    mx = MAX (mx, in[c]);
  double sum = 0.0;
  for (guint c = 0; c < n; c++)
    sum += tmp[c] = expf (q->in_scale * (float) (in[c] - mx));
  float inv = (float) (1.0 / sum);
  for (guint c = 0; c < n; c++)
    out[c] = cony_q_quantize (tmp[c] * inv, q->out_scale, q->out_zp);
}

/* The rows' run hooks: layer @l (the layer, or a slab copy of it) with its integer
 * parameters @q on @nb examples of @in into @out. */
void
cnn_int8_run_conv (const Layer *l, const QLayer *q, CnnInt8Scratch *s, const gint8 *in, gsize nb,
    gint8 *out)
{
  const ConyQKernels *k = cony_qkernels ();
  gsize in_map = map_size (l, FALSE), pixels = (gsize) l->out_h * l->out_w;
  if (q->rows.w32 != NULL) {
    for (gsize e = 0; e < nb; e++)
      conv_rows (k, l, q, in + e * in_map, out + e * pixels * l->out_c, s);
    return;
  }
  for (gsize e = 0; e < nb; e++) {
    gint8 *col = s->col + e * pixels * q->gemm.K;
    if (l->in_c > 1 && 3 * l->in_c <= COL_SLACK)
      im2col_narrow (l, q, in + e * in_map, col, s);
    else
      im2col_q (l, q, in + e * in_map, col);
  }
  k->gemm (&q->gemm, pixels * nb, s->col, q->gemm.K, out, l->out_c, s->a);
}

/* PW on every pixel; FC (out 1 x 1) on each example. */
void
cnn_int8_run_gemm (const Layer *l, const QLayer *q, CnnInt8Scratch *s, const gint8 *in, gsize nb,
    gint8 *out)
{
  const ConyQKernels *k = cony_qkernels ();
  gsize pixels = (gsize) l->out_h * l->out_w;
  k->gemm (&q->gemm, nb * pixels, in, q->gemm.K, out, l->out_c, s->a);
}

void
cnn_int8_run_dw (const Layer *l, const QLayer *q, CnnInt8Scratch *s, const gint8 *in, gsize nb,
    gint8 *out)
{
  const ConyQKernels *k = cony_qkernels ();
  gsize in_map = map_size (l, FALSE), out_map = map_size (l, TRUE);
  for (gsize e = 0; e < nb; e++)
    dw_padded (k, l, q, in + e * in_map, out + e * out_map, s);
}

void
cnn_int8_run_gap (const Layer *l, const QLayer *q, CnnInt8Scratch *s, const gint8 *in, gsize nb,
    gint8 *out)
{
  gsize in_map = map_size (l, FALSE), out_map = map_size (l, TRUE);
  for (gsize e = 0; e < nb; e++)
    gap_q (l, q, in + e * in_map, out + e * out_map);
}

void
cnn_int8_run_sigmoid (const Layer *l, const QLayer *q, CnnInt8Scratch *s, const gint8 *in, gsize nb,
    gint8 *out)
{
  gsize in_map = map_size (l, FALSE);
  for (gsize j = 0; j < in_map * nb; j++)
    out[j] = q->lut[in[j] + 128];
}

void
cnn_int8_run_add (const Layer *l, const QLayer *q, CnnInt8Scratch *s, const gint8 *in, gsize nb,
    gint8 *out)
{
  const ConyQKernels *k = cony_qkernels ();
  gsize in_map = map_size (l, FALSE);
  k->add (q->add, in, s->res, in_map * nb, out);
}

void
cnn_int8_run_softmax (const Layer *l, const QLayer *q, CnnInt8Scratch *s, const gint8 *in, gsize nb,
    gint8 *out)
{
  gsize in_map = map_size (l, FALSE);
  for (gsize e = 0; e < nb; e++)
    softmax_q (q, in + e * in_map, l->in_c, out + e * in_map, (float *) s->acc);
}

/* Layer @i (geometry @l: the layer, or a slab copy of it) on @nb examples of @in into
 * @out. */
static void
run_layer (const CnnWeights *w, const Layer *l, guint i, CnnInt8Scratch *s, const gint8 *in,
    gsize nb, gint8 *out)
{
  cnn_layer_class (l->kind)->int8_run (l, &w->q8->layers[i], s, in, nb, out);
  if (l->keep) /* a later residual adds this map */
    memcpy (s->res, out, map_size (l, TRUE) * nb);
}

void
cnn_set_int8_layer_hook (ConyCnn *cnn, CnnInt8LayerHook hook, gpointer data)
{
  cnn->int8_hook = hook;
  cnn->int8_hook_data = data;
}

/* Layers @from .. @to - 1 on @nb examples of float @in (quantised with @scale / @zp),
 * the last output dequantised into @dst. */
static void
run_range (ConyCnn *cnn, guint from, guint to, const float *in, float scale, gint32 zp, gsize nb,
    float *dst)
{
  const CnnWeights *w = cnn->w;
  CnnInt8Scratch *s = scratch (cnn, nb, from >= w->first_fc);
  gsize n_in = (from == 0 ? (gsize) w->in_h * w->in_w * w->in_c
                          : map_size (&w->layers[from - 1], TRUE))
      * nb;
  cony_qkernels ()->quantize (in, n_in, scale, zp, s->qa);
  gint8 *cur = s->qa, *next = s->qb;
  for (guint i = from; i < to; i++) {
    if (cnn->int8_hook)
      cnn->int8_hook (i, FALSE, nb, cnn->int8_hook_data);
    run_layer (w, &w->layers[i], i, s, cur, nb, next);
    if (cnn->int8_hook)
      cnn->int8_hook (i, TRUE, nb, cnn->int8_hook_data);
    gint8 *t = cur;
    cur = next;
    next = t;
  }
  const QLayer *last = &w->q8->layers[to - 1];
  gsize n_out = map_size (&w->layers[to - 1], TRUE) * nb;
  for (gsize j = 0; j < n_out; j++)
    dst[j] = last->out_scale * (float) (cur[j] - last->out_zp);
}

guint
cnn_int8_features (ConyCnn *cnn, const float *in, gsize nb, float *dst)
{
  guint to = MIN (cnn->w->q8->n, cnn->w->first_fc);
  if (to == 0)
    return 0;
  run_range (cnn, 0, to, in, cnn->w->q8->in_scale, cnn->w->q8->in_zp, nb, dst);
  return to;
}

guint
cnn_int8_head (ConyCnn *cnn, const float *in, gsize n, float *dst)
{
  const CnnWeights *w = cnn->w;
  guint from = w->first_fc;
  if (w->q8->n <= from || from == 0)
    return from;
  const QLayer *prev = &w->q8->layers[from - 1];
  run_range (cnn, from, w->q8->n, in, prev->out_scale, prev->out_zp, n, dst);
  return w->q8->n;
}

guint
cnn_int8_layers (const CnnWeights *w)
{
  return w->q8 ? w->q8->n : 0;
}

/* ---------------------------------------------------------------- API */

gboolean
cony_cnn_set_precision (ConyCnn *cnn, ConyCnnPrecision precision, GError **error)
{
  g_return_val_if_fail (cnn != NULL, FALSE);
  if ((guint) precision > CONY_CNN_PRECISION_INT8) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "%s: unknown precision %d", cnn->w->source,
        (int) precision);
    return FALSE;
  }
  if (precision == CONY_CNN_PRECISION_INT8 && cnn->w->q8 == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: precision int8 needs a quantised model (metadata quantization, written by "
        "training/convert_tflite.py from a quantised .tflite); this one runs in float only",
        cnn->w->source);
    return FALSE;
  }
  cnn->precision = precision;
  return TRUE;
}

ConyCnnPrecision
cony_cnn_get_precision (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, CONY_CNN_PRECISION_FLOAT);
  return cnn_int8_active (cnn) ? CONY_CNN_PRECISION_INT8 : CONY_CNN_PRECISION_FLOAT;
}

guint
cony_cnn_get_int8_layers (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, 0);
  return cnn_int8_active (cnn) ? cnn->w->q8->n : 0;
}

guint
cony_cnn_get_quantized_layers (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, 0);
  return cnn_int8_layers (cnn->w);
}

const char *
cony_cnn_get_int8_kernels (void)
{
  return cony_qkernels ()->name;
}

static const char *const precision_names[] = { "auto", "float", "int8" };

gboolean
cony_cnn_precision_from_string (const char *name, ConyCnnPrecision *precision)
{
  for (guint i = 0; name != NULL && i < G_N_ELEMENTS (precision_names); i++)
    if (strcmp (name, precision_names[i]) == 0) {
      *precision = (ConyCnnPrecision) i;
      return TRUE;
    }
  return FALSE;
}

char *
cony_cnn_describe_precision (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, NULL);
  guint q = cnn_int8_layers (cnn->w), n = cnn->w->n_layers;
  if (q == 0)
    return g_strdup ("float (the file has no int8 activation quantisation)");
  if (!cnn_int8_active (cnn))
    return g_strdup_printf ("float (forced; the file quantises %u of %u layers)", q, n);
  if (q == n)
    return g_strdup_printf ("int8, all %u layers (%s kernels)", n, cony_cnn_get_int8_kernels ());
  return g_strdup_printf ("int8 for layers 0-%u, float for the %u after them (%s kernels)", q - 1,
      n - q, cony_cnn_get_int8_kernels ());
}

void
cnn_int8_slab (ConyCnn *cnn, const Layer *l, guint i, const gint8 *in, gint8 *out)
{
  /* Room for four windows' maps: a slab is at most a block of rows plus two. */
  run_layer (cnn->w, l, i, scratch (cnn, 4, FALSE), in, 1, out);
}

void
cnn_int8_io (const ConyCnn *cnn, guint i, float *in_scale, gint32 *in_zp, float *out_scale,
    gint32 *out_zp)
{
  const QLayer *q = &cnn->w->q8->layers[i];
  *in_scale = q->in_scale;
  *in_zp = q->in_zp;
  *out_scale = q->out_scale;
  *out_zp = q->out_zp;
}

void
cnn_int8_quantize (const float *x, gsize n, float scale, gint32 zp, gint8 *out)
{
  cony_qkernels ()->quantize (x, n, scale, zp, out);
}
