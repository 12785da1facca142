/* Continual CNN: each conv-stack layer computes each output row once, on a slab of
 * its input rows (see include/cony/cnn-continual.h). */
#include "cony/cnn-continual.h"
#include "cnn-private.h"
#include "cony/error.h"

#include <string.h>

/* A run of rows of one map in time order: rows [first, first + n) of the stream
 * (first < 0: the zero padding before the stream's start). */
typedef struct {
  guint8 *buf;
  gsize row;   /* values per row */
  gsize esize; /* bytes per value: 4 (float) or 1 (int8 codes of the integer path) */
  gsize cap;   /* rows allocated */
  gint64 first;
  gsize n;
} Rows;

/* One conv-stack layer in time: output row t reads input rows
 * [t stride - pad, t stride - pad + taps). */
typedef struct {
  Layer *l;
  guint index;
  guint taps, stride, pad;
  gboolean q8;    /* runs on the integer path: int8 rows in and out */
  gint8 pad_code; /* the start's padding: 0, or the input's zero point (the real 0) */
  Rows in;
  gint64 done; /* output rows computed */
} TimeLayer;

struct _ConyCnnContinual {
  ConyCnn *cnn;
  guint hop;
  ConyCnnContinualGeometry g;
  TimeLayer *layers;
  guint n_layers;
  Layer *gap; /* the global average pool after them, or NULL (flattened rows) */
  guint gap_index;
  gboolean gap_q8; /* the pool runs on the integer path: the final rows are int8 */
  Rows final;      /* rows of the final map */
  float *feat;
  gint8 *codes;    /* an integer layer's rows before they are dequantised */
  gsize codes_cap; /* bytes */
  guint64 tokens, frames;
};

/* The conv-stack layers that run in time: those before the global pool (or the
 * head). */
static guint
time_layers (const CnnWeights *w)
{
  guint i = 0;
  while (i < w->first_fc && w->layers[i].kind != LAYER_GAP)
    i++;
  return i;
}

static void
time_shape (const Layer *l, guint *taps, guint *stride, guint *pad)
{
  const CnnLayerClass *k = cnn_layer_class (l->kind);
  *stride = k->stride ? k->stride : l->stride;
  *taps = k->taps;
  *pad = l->pad_top; /* 0 but for the 3x3 layers */
}

static gboolean
refuse (GError **error, const char *source, const char *why)
{
  g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "%s: cannot run continually: %s", source,
      why);
  return FALSE;
}

gboolean
cony_cnn_continual_geometry (const ConyCnn *cnn, guint hop, ConyCnnContinualGeometry *g,
    GError **error)
{
  g_return_val_if_fail (cnn != NULL && g != NULL, FALSE);
  const CnnWeights *w = cnn->w;
  if (w->center_height || w->in_mean != NULL)
    return refuse (error, w->source,
        "center_height and input normalisation are not supported in time");
  guint n = time_layers (w), S = 1;
  for (guint i = 0; i < w->first_fc; i++)
    if (w->layers[i].kind == LAYER_ADD)
      return refuse (error, w->source, "residual adds (MobileNet-v2) are not supported");
  for (guint i = 0; i < n; i++) {
    guint taps, stride, pad;
    time_shape (&w->layers[i], &taps, &stride, &pad);
    S *= stride;
  }
  if (w->in_h % S != 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: cannot run continually: its window of %u frames is not a multiple of its time "
        "stride (%u frames)",
        w->source, w->in_h, S);
    return FALSE;
  }
  if (hop == 0)
    hop = S;
  if (hop % S != 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: a continual hop must be a multiple of the network's time stride, %u frames; "
        "%u is not (the nearest: %u)",
        w->source, S, hop, MAX (S, (hop + S / 2) / S * S));
    return FALSE;
  }
  /* The first and last input frames the last and first window rows read. */
  gint64 last = (gint64) (w->in_h / S) - 1, first = 0;
  for (guint i = n; i-- > 0;) {
    guint taps, stride, pad;
    time_shape (&w->layers[i], &taps, &stride, &pad);
    last = last * stride - pad + taps - 1;
    first = first * stride - pad;
  }
  g->time_stride = S;
  g->columns = w->in_h / S;
  g->lookahead = (guint) (last - (w->in_h - 1));
  g->history = (guint) -first;
  g->delay = (g->lookahead + S - 1) / S * S;
  return TRUE;
}

/* Room for @n more rows; returns where they go. */
static void *
rows_reserve (Rows *r, gsize n)
{
  if (r->n + n > r->cap) {
    r->cap = MAX (r->n + n, 2 * r->cap);
    r->buf = g_realloc (r->buf, r->cap * r->row * r->esize);
  }
  return r->buf + r->n * r->row * r->esize;
}

static const void *
rows_at (const Rows *r, gint64 row)
{
  return r->buf + (gsize) (row - r->first) * r->row * r->esize;
}

/* Drops the rows before stream row @from. */
static void
rows_drop_before (Rows *r, gint64 from)
{
  gsize drop = (gsize) CLAMP (from - r->first, 0, (gint64) r->n);
  gsize bytes = r->row * r->esize;
  if (drop == 0)
    return; /* also an empty buffer without storage: memmove (NULL, ...) is undefined */
  memmove (r->buf, r->buf + drop * bytes, (r->n - drop) * bytes);
  r->n -= drop;
  r->first += drop;
}

/* Starts @r empty at stream row -@pad with @pad rows of zeros before it (int8: of
 * @code, the zero point). */
static void
rows_restart (Rows *r, guint pad, gint8 code)
{
  r->n = 0;
  r->first = -(gint64) pad;
  if (pad > 0) /* an empty buffer has no storage yet: memset (NULL, ...) is undefined */
    memset (rows_reserve (r, pad), r->esize == 1 ? (guint8) code : 0,
        (gsize) pad * r->row * r->esize);
  r->n = pad;
}

void
cony_cnn_continual_reset (ConyCnnContinual *c)
{
  for (guint i = 0; i < c->n_layers; i++) {
    rows_restart (&c->layers[i].in, c->layers[i].pad, c->layers[i].pad_code);
    c->layers[i].done = 0;
  }
  rows_restart (&c->final, 0, 0);
  c->tokens = c->frames = 0;
}

ConyCnnContinual *
cony_cnn_continual_new (ConyCnn *cnn, guint hop, GError **error)
{
  ConyCnnContinualGeometry g;
  if (!cony_cnn_continual_geometry (cnn, hop, &g, error))
    return NULL;
  CnnWeights *w = cnn->w;
  ConyCnnContinual *c = g_new0 (ConyCnnContinual, 1);
  c->cnn = cnn;
  c->hop = hop == 0 ? g.time_stride : hop;
  c->g = g;
  c->n_layers = time_layers (w);
  c->layers = g_new0 (TimeLayer, c->n_layers);
  /* The integer path's layers (the file's quantised prefix, unless precision is float) */
  guint n8 = cnn_int8_active (cnn) ? cnn_int8_layers (w) : 0;
  for (guint i = 0; i < c->n_layers; i++) {
    TimeLayer *t = &c->layers[i];
    t->l = &w->layers[i];
    t->index = i;
    time_shape (t->l, &t->taps, &t->stride, &t->pad);
    t->q8 = i < n8;
    if (t->q8) {
      float sc, osc;
      gint32 zp, ozp;
      cnn_int8_io (cnn, i, &sc, &zp, &osc, &ozp);
      t->pad_code = (gint8) zp;
    }
    t->in.row = (gsize) t->l->in_w * t->l->in_c;
    t->in.esize = t->q8 ? 1 : sizeof (float);
    /* Slabs are shallow copies of the layer: its lazily packed weights must exist
     * before the first copy. */
    cnn_pw_pack (cnn, t->l);
  }
  c->gap = c->n_layers < w->first_fc ? &w->layers[c->n_layers] : NULL;
  c->gap_index = c->n_layers;
  c->gap_q8 = c->gap != NULL && c->gap_index < n8;
  const Layer *lastl = c->n_layers > 0 ? &w->layers[c->n_layers - 1] : NULL;
  c->final.row = lastl != NULL ? (gsize) lastl->out_w * lastl->out_c : (gsize) w->in_w * w->in_c;
  c->final.esize = c->gap_q8 ? 1 : sizeof (float);
  c->feat = g_new (float, w->feat_dim);
  cony_cnn_continual_reset (c);
  return c;
}

void
cony_cnn_continual_free (ConyCnnContinual *c)
{
  if (c == NULL)
    return;
  for (guint i = 0; i < c->n_layers; i++)
    g_free (c->layers[i].in.buf);
  g_free (c->layers);
  g_free (c->final.buf);
  g_free (c->feat);
  g_free (c->codes);
  g_free (c);
}

void
cony_cnn_continual_get_geometry (const ConyCnnContinual *c, ConyCnnContinualGeometry *g)
{
  *g = c->g;
}

guint
cony_cnn_continual_get_output_size (const ConyCnnContinual *c)
{
  return cony_cnn_get_output_size (c->cnn);
}

guint64
cony_cnn_continual_get_tokens (const ConyCnnContinual *c)
{
  return c->tokens;
}

guint64
cony_cnn_continual_get_frames (const ConyCnnContinual *c)
{
  return c->frames;
}

gsize
cony_cnn_continual_max_tokens (const ConyCnnContinual *c, gsize n)
{
  return n / c->hop + 2;
}

/* Scratch for @n bytes of integer codes. */
static gint8 *
codes_reserve (ConyCnnContinual *c, gsize n)
{
  if (c->codes_cap < n) {
    g_free (c->codes);
    c->codes = g_new (gint8, n);
    c->codes_cap = n;
  }
  return c->codes;
}

/* Layer @t on the slab @in (its input rows from the first one its next output reads)
 * into @out rows: the float engine's kernels, or the integer path's, whose last layer
 * before float rows has its codes dequantised as the per-window path does. */
static void
slab_run (ConyCnnContinual *c, TimeLayer *t, Layer *slab, const void *in, Rows *out, gsize n_out)
{
  void *dst = rows_reserve (out, n_out);
  if (!t->q8) {
    cnn_layer_forward (c->cnn, slab, in, dst, 1, FALSE);
    return;
  }
  if (out->esize == 1) {
    cnn_int8_slab (c->cnn, slab, t->index, in, dst);
    return;
  }
  gsize n = n_out * out->row;
  gint8 *codes = codes_reserve (c, n);
  cnn_int8_slab (c->cnn, slab, t->index, in, codes);
  float sc, osc, *f = dst;
  gint32 zp, ozp;
  cnn_int8_io (c->cnn, t->index, &sc, &zp, &osc, &ozp);
  for (gsize j = 0; j < n; j++)
    f[j] = osc * (float) (codes[j] - ozp);
}

/* Computes every output row of @t that its input rows allow, appending them to @out
 * (the next layer's input or the final map), and drops the input rows no later
 * output row reads. */
static void
time_layer_run (ConyCnnContinual *c, TimeLayer *t, Rows *out)
{
  gint64 held_end = t->in.first + (gint64) t->in.n; /* one past the last row held */
  gint64 reach = held_end + t->pad - t->taps;       /* t_max * stride, at most */
  if (reach < 0)
    return;
  gint64 t_max = reach / t->stride;
  if (t_max < t->done)
    return;
  guint n_out = (guint) (t_max - t->done + 1);
  gint64 start = t->done * t->stride - t->pad;
  /* The layer on a slab: n_out output rows from exactly the input rows they read,
   * no padding in time (the start's zeros are rows of the buffer). */
  Layer slab = *t->l;
  slab.in_h = (n_out - 1) * t->stride + t->taps;
  slab.out_h = n_out;
  slab.pad_top = 0;
  slab_run (c, t, &slab, rows_at (&t->in, start), out, n_out);
  out->n += n_out;
  t->done += n_out;
  rows_drop_before (&t->in, t->done * t->stride - t->pad);
}

/* Token @j from final rows [j hop / S, j hop / S + K) into @out. */
static void
emit_token (ConyCnnContinual *c, guint64 j, float *out)
{
  ConyCnn *cnn = c->cnn;
  gint64 row0 = (gint64) (j * (c->hop / c->g.time_stride));
  const void *rows = rows_at (&c->final, row0);
  const float *feat = rows;
  if (c->gap != NULL) { /* the window's global average pool, exactly as per window */
    Layer slab = *c->gap;
    slab.in_h = c->g.columns;
    if (c->gap_q8) { /* its codes dequantised, as the per-window path hands them on */
      guint C = slab.out_c;
      gint8 *codes = codes_reserve (c, C);
      cnn_int8_slab (cnn, &slab, c->gap_index, rows, codes);
      float sc, osc;
      gint32 zp, ozp;
      cnn_int8_io (cnn, c->gap_index, &sc, &zp, &osc, &ozp);
      for (guint k = 0; k < C; k++)
        c->feat[k] = osc * (float) (codes[k] - ozp);
    } else {
      cnn_layer_forward (cnn, &slab, rows, c->feat, 1, FALSE);
    }
    feat = c->feat;
  }
  if (cnn_head_runs (cnn))
    cnn_head_forward (cnn, feat, 1, out);
  else
    memcpy (out, feat, sizeof (float) * cnn->w->feat_dim);
}

static gsize push_piece (ConyCnnContinual *c, const float *frames, gsize n, float *out);

gsize
cony_cnn_continual_push (ConyCnnContinual *c, const float *frames, gsize n, float *out)
{
  g_return_val_if_fail (c != NULL && (n == 0 || frames != NULL), 0);
  /* The integer kernels' scratch holds a few windows' maps: pieces of one window. */
  gsize piece = c->n_layers > 0 && c->layers[0].q8 ? c->cnn->w->in_h : MAX (n, 1);
  gsize made = 0, od = cony_cnn_get_output_size (c->cnn);
  gsize row = c->n_layers > 0 ? c->layers[0].in.row : c->final.row;
  for (gsize at = 0; at < n; at += piece)
    made += push_piece (c, frames + at * row, MIN (piece, n - at), out + made * od);
  return made;
}

static gsize
push_piece (ConyCnnContinual *c, const float *frames, gsize n, float *out)
{
  Rows *in0 = c->n_layers > 0 ? &c->layers[0].in : &c->final;
  if (in0->esize == 1) { /* the integer path's input codes */
    float sc, osc;
    gint32 zp, ozp;
    cnn_int8_io (c->cnn, 0, &sc, &zp, &osc, &ozp);
    cnn_int8_quantize (frames, n * in0->row, sc, zp, rows_reserve (in0, n));
  } else {
    memcpy (rows_reserve (in0, n), frames, n * in0->row * sizeof (float));
  }
  in0->n += n;
  c->frames += n;
  for (guint i = 0; i < c->n_layers; i++)
    time_layer_run (c, &c->layers[i], i + 1 < c->n_layers ? &c->layers[i + 1].in : &c->final);

  gsize made = 0, od = cony_cnn_get_output_size (c->cnn);
  guint step = c->hop / c->g.time_stride;
  gint64 final_end = c->final.first + (gint64) c->final.n;
  while ((gint64) (c->tokens * step) + c->g.columns <= final_end) {
    emit_token (c, c->tokens, out + made * od);
    made++;
    c->tokens++;
  }
  rows_drop_before (&c->final, (gint64) (c->tokens * step));
  return made;
}

gsize
cony_cnn_continual_get_state_bytes (const ConyCnnContinual *c, gsize *kept)
{
  gsize all = sizeof *c + c->n_layers * sizeof (TimeLayer) + c->codes_cap
      + c->cnn->w->feat_dim * sizeof (float),
        held = 0;
  for (guint i = 0; i <= c->n_layers; i++) {
    const Rows *r = i < c->n_layers ? &c->layers[i].in : &c->final;
    all += r->cap * r->row * r->esize;
    held += r->n * r->row * r->esize;
  }
  if (kept != NULL)
    *kept = held;
  return all;
}
