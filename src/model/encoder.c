/* The continual encoder-classifier (include/cony/encoder.h, docs/model-format.md). */
#include "cony/encoder.h"
#include "cony/error.h"
#include "cony/fusion.h"
#include "gemv-private.h"
#include "linalg.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

struct _ConyEncoder {
  const ConyModel *model;
  int d_in, d, ff, n, blocks, classes, T;
  int k; /* tokens per step */
  ConyAttention *attn[CONY_MODEL_MAX_BLOCKS];
  ConyAttentionVariant variant[CONY_MODEL_MAX_BLOCKS];
  guint64 steps;
  guint64 tokens; /* tokens fed since the reset = steps · k */
  /* state: the last n block-1 inputs, token of stream index s in slot s mod n */
  float *ring;
  /* scratch, allocated once */
  float *u;    /* (k, d) the step's block-1 inputs */
  float *att;  /* (n, d) attention output rows */
  float *y;    /* (n, d) after residual + LN1 */
  float *h;    /* (n, ff) feed-forward hidden */
  float *z;    /* (n, d) block output */
  float *a2;   /* (d), or (n, d) when k > 1: block-2 attention output */
  float *v2;   /* (2k, d) block-2 vectors */
  float *h2;   /* (k, ff) */
  float *pool; /* (d) mean of the k rows after the final LN */
  /* one-vector products (gemv-private.h): input projection, FF per block, classifier */
  ConyGemvMatrix g_in, g_ff1[CONY_MODEL_MAX_BLOCKS], g_ff2[CONY_MODEL_MAX_BLOCKS], g_cls;
};

static inline void
layer_norm (float *x, int d, const float *w, const float *b)
{
  cony_layer_norm (x, d, w, b, CONY_MODEL_LN_EPS);
}

/* rows × d input @x (row stride d): x <- LN1(x + att) -> y; z = LN2(y + FF(y)).
 * Works in place on @y/@z buffers of the encoder. */
static void
block_tail (ConyEncoder *e, const ConyModelBlock *k, int rows, const float *x, const float *att,
    float *y, float *h, float *z)
{
  int d = e->d, ff = e->ff;
  for (int r = 0; r < rows; r++) {
    float *yr = y + (gsize) r * d;
    const float *xr = x + (gsize) r * d, *ar = att + (gsize) r * d;
    for (int i = 0; i < d; i++)
      yr[i] = xr[i] + ar[i];
    layer_norm (yr, d, k->norm1_weight, k->norm1_bias);
  }
  /* h = GELU(y W1^T + b1) */
  for (int r = 0; r < rows; r++)
    memcpy (h + (gsize) r * ff, k->ff1_bias, sizeof (float) * ff);
  if (rows == 1)
    cony_gemv (&e->g_ff1[k - e->model->block], y, h);
  else
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, rows, ff, d, 1.0f, y, d, k->ff1_weight, d,
        1.0f, h, ff);
  cony_gelu (h, rows * ff);
  /* z = y + h W2^T + b2 */
  for (int r = 0; r < rows; r++) {
    float *zr = z + (gsize) r * d;
    const float *yr = y + (gsize) r * d;
    for (int i = 0; i < d; i++)
      zr[i] = yr[i] + k->ff2_bias[i];
  }
  if (rows == 1)
    cony_gemv (&e->g_ff2[k - e->model->block], h, z);
  else
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, rows, d, ff, 1.0f, h, ff, k->ff2_weight,
        ff, 1.0f, z, d);
  for (int r = 0; r < rows; r++)
    layer_norm (z + (gsize) r * d, d, k->norm2_weight, k->norm2_bias);
}

void
cony_encoder_free (ConyEncoder *e)
{
  if (!e)
    return;
  for (int b = 0; b < CONY_MODEL_MAX_BLOCKS; b++)
    cony_attention_free (e->attn[b]);
  g_free (e->ring);
  g_free (e->u);
  g_free (e->att);
  g_free (e->y);
  g_free (e->h);
  g_free (e->z);
  g_free (e->a2);
  g_free (e->v2);
  g_free (e->h2);
  g_free (e->pool);
  cony_gemv_matrix_clear (&e->g_in);
  cony_gemv_matrix_clear (&e->g_cls);
  for (int b = 0; b < CONY_MODEL_MAX_BLOCKS; b++) {
    cony_gemv_matrix_clear (&e->g_ff1[b]);
    cony_gemv_matrix_clear (&e->g_ff2[b]);
  }
  g_free (e);
}

ConyEncoder *
cony_encoder_new (const ConyModel *model, int override_variant, GError **error)
{
  const ConyModelConfig *c = &model->config;
  if (override_variant >= CONY_ATTENTION_N_VARIANTS || override_variant < -1) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "%s: attention variant %d does not exist",
        model->path, override_variant);
    return NULL;
  }
  g_autoptr (ConyEncoder) e = g_new0 (ConyEncoder, 1);
  e->model = model;
  e->d_in = c->d_in;
  e->d = c->d;
  e->ff = c->ff;
  e->n = c->window;
  e->blocks = c->blocks;
  e->classes = c->n_classes;
  e->T = c->positional_rows;
  e->k = MAX (c->tokens_per_step, 1);
  if (e->k > e->n) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: tokens_per_step = %d is larger than the "
        "window n = %d",
        model->path, e->k, e->n);
    return NULL;
  }
  ConyAttentionConfig ac[CONY_MODEL_MAX_BLOCKS];
  gsize bytes = cony_encoder_scratch_bytes (e)
      + (c->blocks == 2 ? sizeof (float) * (gsize) e->n * e->d : 0);
  for (int b = 0; b < c->blocks; b++) {
    ConyAttentionVariant v = override_variant >= 0 ? (ConyAttentionVariant) override_variant
                                                   : c->attention[b];
    gboolean last_of_two = c->blocks == 2 && b == 1;
    if (last_of_two)
      v = cony_attention_variant_windowed (v);
    e->variant[b] = v;
    if (cony_attention_variant_uses_fixed_landmarks (v) && !model->block[b].has_landmarks) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
          "%s: attention '%s' in block %d needs fixed landmarks, but the file has no "
          "'blocks.%d.attn.q_landmarks'/'k_landmarks' (the model was trained with '%s')",
          model->path, cony_attention_variant_name (v), b, b,
          cony_attention_variant_name (c->attention[b]));
      return NULL;
    }
    /* Block 1 of 2 is retroactive; block 2 of 2 too when a step outputs k > 1 rows (its
     * windowed pass then gives every row, of which the k newest are used). */
    gboolean retro = c->blocks == 2 && (b == 0 || e->k > 1);
    if (cony_attention_variant_single_output_only (v) && retro) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: attention '%s' gives single outputs "
          "only, but block %d of this 2-block model needs every window row (retroactive): "
          "run %s with 1-block models",
          model->path, cony_attention_variant_name (v), b, cony_attention_variant_name (v));
      return NULL;
    }
    ac[b] = cony_model_attention_config (model, b, v, retro);
    gsize layer = cony_attention_config_bytes (&ac[b]);
    if (layer != G_MAXSIZE) /* else cony_attention_new() names the bad size */
      bytes += layer;
  }
  /* The whole encoder within the budget before anything is allocated: the window, d and
   * ff of a small file decide these sizes. */
  if (bytes > CONY_MEMORY_BUDGET) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "%s: window = %d (d = %d, ff = %d, %d block(s)) "
        "would need %" G_GSIZE_FORMAT " bytes (%.1f MiB) of state and scratch, more than the "
        "budget of %" G_GSIZE_FORMAT " bytes",
        model->path, e->n, e->d, e->ff, e->blocks, bytes, bytes / 1048576.0,
        (gsize) CONY_MEMORY_BUDGET);
    return NULL;
  }
  for (int b = 0; b < c->blocks; b++) {
    ConyAttentionWeights w = model->block[b].attn;
    if (!cony_attention_variant_uses_fixed_landmarks (e->variant[b]))
      w.q_landmarks = w.k_landmarks = NULL;
    GError *local = NULL;
    e->attn[b] = cony_attention_new (&ac[b], &w, &local);
    if (!e->attn[b]) {
      g_set_error (error, CONY_ERROR, local->code, "%s: block %d: %s", model->path, b,
          local->message);
      g_error_free (local);
      return NULL;
    }
  }
  gsize n = e->n, d = e->d, ff = e->ff, k = e->k;
  float **scratch[] = { &e->u, &e->att, &e->y, &e->h, &e->z, &e->a2, &e->v2, &e->h2, &e->pool,
    &e->ring };
  gsize counts[] = { k * d, n * d, n * d, n * ff, n * d, k > 1 ? n * d : d, 2 * k * d, k * ff, d,
    e->blocks == 2 ? n * d : 0 };
  for (guint i = 0; i < G_N_ELEMENTS (scratch); i++)
    if (counts[i] && !(*scratch[i] = g_try_new0 (float, counts[i]))) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: out of memory for the encoder's "
          "%" G_GSIZE_FORMAT " bytes of scratch (window = %d)",
          model->path, bytes, e->n);
      return NULL;
    }
  gboolean f16 = cony_gemv_f16_enabled ();
  cony_gemv_matrix_init (&e->g_in, model->input_proj_weight, e->d, e->d_in, f16);
  cony_gemv_matrix_init (&e->g_cls, model->classifier_weight, e->classes, e->d, f16);
  for (int b = 0; b < e->blocks; b++) {
    cony_gemv_matrix_init (&e->g_ff1[b], model->block[b].ff1_weight, e->ff, e->d, f16);
    cony_gemv_matrix_init (&e->g_ff2[b], model->block[b].ff2_weight, e->d, e->ff, f16);
  }
  return g_steal_pointer (&e);
}

void
cony_encoder_reset (ConyEncoder *e)
{
  for (int b = 0; b < e->blocks; b++)
    cony_attention_reset (e->attn[b]);
  e->steps = 0;
  e->tokens = 0;
  if (e->ring)
    memset (e->ring, 0, sizeof (float) * e->n * e->d);
}

guint64
cony_encoder_steps (const ConyEncoder *e)
{
  return e->steps;
}

int
cony_encoder_window_fill (const ConyEncoder *e)
{
  return (int) MIN (e->tokens, (guint64) e->n);
}

int
cony_encoder_tokens_per_step (const ConyEncoder *e)
{
  return e->k;
}

ConyAttentionVariant
cony_encoder_block_variant (const ConyEncoder *e, int block)
{
  return e->variant[CLAMP (block, 0, e->blocks - 1)];
}

gboolean
cony_encoder_step (ConyEncoder *e, const float *tokens, float *logits)
{
  const ConyModel *m = e->model;
  int d = e->d, n = e->n, k = e->k, din = e->d_in;
  guint64 t0 = e->tokens; /* stream index of the step's first token */
  guint64 last = t0 + (guint64) k - 1;

  /* u_i = W_in x_i + b_in + P[(t0 + i) mod T] for the k tokens of the step */
  for (int i = 0; i < k; i++) {
    const float *pos = m->pos_embedding + (gsize) ((t0 + (guint64) i) % (guint64) e->T) * d;
    float *ui = e->u + (gsize) i * d;
    for (int j = 0; j < d; j++)
      ui[j] = m->input_proj_bias[j] + pos[j];
  }
  if (k == 1)
    cony_gemv (&e->g_in, tokens, e->u);
  else
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, k, d, din, 1.0f, tokens, din,
        m->input_proj_weight, din, 1.0f, e->u, d);

  const float *final; /* k rows */
  if (e->blocks == 1) {
    /* single output: one row per new query (the k newest tokens) */
    if (k == 1)
      cony_attention_step (e->attn[0], e->u, e->att);
    else
      cony_attention_step_tokens (e->attn[0], e->u, k, e->att);
    block_tail (e, &m->block[0], k, e->u, e->att, e->y, e->h, e->z);
    final = e->z;
  } else {
    /* Block 1, retroactive: n rows, the last w of which belong to the window's tokens. */
    for (int i = 0; i < k; i++)
      memcpy (e->ring + (gsize) ((t0 + (guint64) i) % (guint64) n) * d, e->u + (gsize) i * d,
          sizeof (float) * d);
    if (k == 1)
      cony_attention_step (e->attn[0], e->u, e->att);
    else
      cony_attention_step_tokens (e->attn[0], e->u, k, e->att);
    int w = (int) MIN (last + 1, (guint64) n);
    /* Gather the window's block inputs oldest first into y (the residual source; the
     * tail adds the attention rows in place), then run the tail on the w real rows. */
    for (int i = 0; i < w; i++) {
      guint64 s = last + 1 - (guint64) w + (guint64) i;
      memcpy (e->y + (gsize) i * d, e->ring + (gsize) (s % (guint64) n) * d, sizeof (float) * d);
    }
    const float *att_rows = e->att + (gsize) (n - w) * d;
    block_tail (e, &m->block[0], w, e->y, att_rows, e->y, e->h, e->z);
    /* Block 2: windowed over the w rows of block 1; the rows of the k newest tokens
     * (k <= w always: a step brings k tokens and k <= n). */
    cony_attention_forward_window (e->attn[1], e->z, w, e->a2);
    const float *a2_rows = k == 1 ? e->a2 : e->a2 + (gsize) (n - k) * d;
    const float *rows = e->z + (gsize) (w - k) * d;
    float *v2 = e->v2, *z2 = e->v2 + (gsize) k * d;
    block_tail (e, &m->block[1], k, rows, a2_rows, v2, e->h2, z2);
    final = z2;
  }

  /* final LN per row (on a copy, so @final stays intact), mean over the k rows, then the
   * classifier. k = 1: the row itself. */
  float *f = e->pool;
  if (k == 1) {
    memcpy (f, final, sizeof (float) * d);
    layer_norm (f, d, m->norm_weight, m->norm_bias);
  } else {
    float *row = e->u; /* u is no longer needed this step */
    memset (f, 0, sizeof (float) * d);
    for (int i = 0; i < k; i++) {
      memcpy (row, final + (gsize) i * d, sizeof (float) * d);
      layer_norm (row, d, m->norm_weight, m->norm_bias);
      for (int j = 0; j < d; j++)
        f[j] += row[j];
    }
    float inv = 1.0f / (float) k;
    for (int j = 0; j < d; j++)
      f[j] *= inv;
  }
  memcpy (logits, m->classifier_bias, sizeof (float) * e->classes);
  cony_gemv (&e->g_cls, f, logits);
  if (m->fusion) /* k = 1 (cony_fusion_read() refuses a gate otherwise) */
    cony_fusion_gate_apply (m->fusion, tokens, logits);
  e->steps++;
  e->tokens += (guint64) k;
  /* Anything non-finite on the way (an overflowing projection, a NaN in a running sum)
   * reaches the logits: every output row depends on the whole state. Nothing of it may
   * stay in the state. */
  if (G_LIKELY (cony_all_finite (logits, e->classes)))
    return TRUE;
  cony_encoder_reset (e);
  return FALSE;
}

gsize
cony_encoder_state_bytes (const ConyEncoder *e)
{
  gsize s = 0;
  for (int b = 0; b < e->blocks; b++)
    if (cony_attention_variant_is_continual (e->variant[b]) || e->blocks == 1 || b == 0)
      s += cony_attention_state_bytes (e->attn[b]);
  if (e->ring)
    s += sizeof (float) * (gsize) e->n * e->d;
  s += sizeof (guint64); /* the step counter = the positional index */
  return s;
}

gsize
cony_encoder_scratch_bytes (const ConyEncoder *e)
{
  gsize n = e->n, d = e->d, ff = e->ff, k = e->k;
  return sizeof (float)
      * (k * d + 3 * n * d + n * ff + (k > 1 ? n * d : d) + 2 * k * d + k * ff + d);
}

/* FLOPs of the SDA for the newest query against a window of n rows, all heads. */
static double
window_query_sda (ConyAttentionVariant v, double n, double H, double hd, double m)
{
  double sm = 3; /* exp, sum, divide per softmax entry */
  double per_head;
  switch (v) {
    case CONY_ATTENTION_NYSTROM:
    case CONY_ATTENTION_NYSTROM_FIXED:
      if (v == CONY_ATTENTION_NYSTROM && n <= m) {
        per_head = 4 * n * hd + sm * n;
        break;
      }
      per_head = 2 * m * n * hd + sm * m * n /* softmax(Q~ K^T) */
          + 2 * m * n * hd                   /* ... V */
          + 2 * m * hd + sm * m              /* softmax(q K~^T) */
          + 2 * m * m + 2 * m * hd;          /* · pinv · (ΔV) */
      if (v == CONY_ATTENTION_NYSTROM)       /* segment means, Γ and its pseudo-inverse */
        per_head += 2 * n * hd + 2 * m * m * hd + sm * m * m + 24 * m * m * m;
      break;
    default: /* regular: one softmax row */ per_head = 4 * n * hd + sm * n; break;
  }
  return H * per_head;
}

double
cony_encoder_flops_per_step (const ConyEncoder *e)
{
  const ConyModelConfig *c = &e->model->config;
  double d = c->d, ff = c->ff, n = c->window, din = c->d_in, cls = c->n_classes, k = e->k;
  double ln = 8 * d; /* mean, var, normalise, affine */
  double tail_row = d + ln + (2 * d * ff + ff) + 8 * ff + (2 * ff * d + d) + d + ln;
  double total = k * (2 * din * d + 2 * d); /* input projection, bias, position */
  /* A k-token step: the attention layers' per-token counts k times (k new rows, k new
   * queries; for the recomputing variants this overstates the shared window work). */
  if (e->blocks == 1) {
    ConyAttentionConfig ac = cony_model_attention_config (e->model, 0, e->variant[0], FALSE);
    ConyAttentionFlops af = cony_attention_flops (&ac);
    total += k * (af.sda + af.projections + tail_row);
  } else {
    ConyAttentionConfig ac = cony_model_attention_config (e->model, 0, e->variant[0], TRUE);
    ConyAttentionFlops af = cony_attention_flops (&ac);
    total += k * (af.sda + af.projections) + n * tail_row;
    /* Block 2 recomputes over the window: k, v of n rows, q of the k newest, out_proj, and
     * the SDA of k queries against the window (counted here: the layer's own count is
     * for a whole recomputed window). */
    total += k * window_query_sda (e->variant[1], n, c->heads, d / c->heads, c->landmarks)
        + (2 * n + k) * (2 * d * d + d) + k * (2 * d * d + d) + k * tail_row;
  }
  total += k * ln + (k > 1 ? k * d : 0) + 2 * d * cls + cls;
  return total;
}
