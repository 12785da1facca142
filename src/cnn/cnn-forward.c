/* CNN engine: the forward pass (see include/cony/cnn.h). */
#include "cnn-private.h"
#include "cony/error.h"
#include "cony/safetensors.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- compute */

/* im2col for a 3x3 conv on an HWC map, SAME padding with @pad_top / @pad_left
 * zeros before the map: row (y * OW + x) of the OH x OW output, column
 * (ky * 3 + kx) * C + c, zero outside the map. */
static void
im2col3x3 (const float *in, const Layer *l, float *col)
{
  guint H = l->in_h, W = l->in_w, C = l->in_c, s = l->stride;
  gsize rowlen = (gsize) 9 * C;
  for (guint y = 0; y < l->out_h; y++)
    for (guint x = 0; x < l->out_w; x++) {
      float *dst = col + ((gsize) y * l->out_w + x) * rowlen;
      for (int ky = 0; ky < 3; ky++) {
        int yy = (int) (y * s) + ky - (int) l->pad_top;
        for (int kx = 0; kx < 3; kx++, dst += C) {
          int xx = (int) (x * s) + kx - (int) l->pad_left;
          if (yy < 0 || yy >= (int) H || xx < 0 || xx >= (int) W)
            memset (dst, 0, sizeof (float) * C);
          else
            memcpy (dst, in + ((gsize) yy * W + xx) * C, sizeof (float) * C);
        }
      }
    }
}

/* x += b per row, then ReLU clamped at @hi (INFINITY: plain ReLU) when @relu. */
CONY_CLONES static void
bias_act (float *x, gsize rows, guint cols, const float *b, gboolean relu, float hi)
{
  for (gsize r = 0; r < rows; r++) {
    float *row = x + r * cols;
    if (relu)
      for (guint c = 0; c < cols; c++) {
        float v = row[c] + b[c];
        v = v > 0.0f ? v : 0.0f;
        row[c] = v < hi ? v : hi;
      }
    else
      for (guint c = 0; c < cols; c++)
        row[c] += b[c];
  }
}

static void
conv_im2col (ConyCnn *cnn, const Layer *l, const float *in, float *out, gsize nb)
{
  gsize HW = (gsize) l->out_h * l->out_w, M = HW * nb, in_map = (gsize) l->in_h * l->in_w * l->in_c;
  guint K = 9 * l->in_c;
  if (cnn->col_cap < M * K) {
    g_free (cnn->col);
    cnn->col = g_new (float, M *K);
    cnn->col_cap = M * K;
  }
  for (gsize e = 0; e < nb; e++)
    im2col3x3 (in + e * in_map, l, cnn->col + e * HW * K);
  cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, (int) M, (int) l->out_c, (int) K, 1.0f,
      cnn->col, (int) K, l->w, (int) l->out_c, 0.0f, out, (int) l->out_c);
  bias_act (out, M, l->out_c, l->b, TRUE, l->relu_max);
}

/* 3x3 depthwise conv, SAME padding, stride 1 or 2: each output pixel's channel
 * vector starts at the bias and adds the in-map taps, channels innermost (the
 * loop the compiler vectorises). */
CONY_CLONES static void
dw_forward (const Layer *l, const float *in, float *out, gsize nb)
{
  guint H = l->in_h, W = l->in_w, C = l->out_c, s = l->stride;
  gsize in_map = (gsize) H * W * C, out_map = (gsize) l->out_h * l->out_w * C;
  float hi = l->relu_max;
  for (gsize e = 0; e < nb; e++, in += in_map, out += out_map)
    for (guint y = 0; y < l->out_h; y++)
      for (guint x = 0; x < l->out_w; x++) {
        float *restrict o = out + ((gsize) y * l->out_w + x) * C;
        memcpy (o, l->b, sizeof (float) * C);
        for (int ky = 0; ky < 3; ky++) {
          int yy = (int) (y * s) + ky - (int) l->pad_top;
          if (yy < 0 || yy >= (int) H)
            continue;
          for (int kx = 0; kx < 3; kx++) {
            int xx = (int) (x * s) + kx - (int) l->pad_left;
            if (xx < 0 || xx >= (int) W)
              continue;
            const float *restrict src = in + ((gsize) yy * W + xx) * C;
            const float *restrict wk = l->w + (gsize) (ky * 3 + kx) * C;
            for (guint c = 0; c < C; c++)
              o[c] += src[c] * wk[c];
          }
        }
        for (guint c = 0; c < C; c++) {
          float v = o[c] > 0.0f ? o[c] : 0.0f;
          o[c] = v < hi ? v : hi;
        }
      }
}

/* panel[i * 16 + j] = q[i * 16 + j] * scale[j], i < rows: one int8 panel as floats. */
CONY_CLONES static void
expand_panel (const gint8 *restrict q, const float *restrict scale, gsize rows,
    float *restrict panel)
{
  for (gsize i = 0; i < rows; i++)
    for (int j = 0; j < 16; j++)
      panel[i * 16 + j] = (float) q[i * 16 + j] * scale[j];
}

void
cnn_pw_pack (ConyCnn *cnn, Layer *l)
{
  guint K = l->in_c, N = l->out_c;
  if (l->kind != LAYER_PW || cnn_kernels ()->wino_gemm == NULL || N % 16 != 0)
    return;
  /* The weights may be shared with other threads' networks: pack once, under the
   * weights' lock; q_packed / wino[0] (read atomically) publish the packed form. */
  if (l->qscale != NULL) { /* qscale, not q: q changes when packed; qscale stays */
    if (g_atomic_int_get (&l->q_packed))
      return;
    pthread_mutex_lock (&cnn->w->lazy);
    if (!l->q_packed) {
      gint8 *pk = g_new (gint8, (gsize) K * N);
      for (guint p = 0; p < N / 16; p++)
        for (guint i = 0; i < K; i++)
          for (guint j = 0; j < 16; j++)
            pk[((gsize) p * K + i) * 16 + j] = l->q[(gsize) (16 * p + j) * K + i];
      g_free (l->q);
      l->q = pk;
      g_atomic_int_set (&l->q_packed, TRUE);
    }
    pthread_mutex_unlock (&cnn->w->lazy);
    return;
  }
  if (g_atomic_pointer_get (&l->wino[0]) != NULL)
    return;
  pthread_mutex_lock (&cnn->w->lazy);
  if (l->wino[0] == NULL) {
    float *pk = g_new (float, (gsize) K *N);
    for (guint p = 0; p < N / 16; p++)
      for (guint i = 0; i < K; i++)
        memcpy (pk + ((gsize) p * K + i) * 16, l->w + (gsize) i * N + 16 * p, 16 * sizeof (float));
    g_atomic_pointer_set (&l->wino[0], pk);
  }
  pthread_mutex_unlock (&cnn->w->lazy);
}

/* 1x1 conv: one product over every pixel of the @nb maps, (pixels x in) (in x out).
 * Where the packed-weight kernel runs (AVX2/FMA, out a multiple of 16), the
 * weights are packed into its 16-column panels once (cnn_pw_pack()): OpenBLAS would
 * repack them on every call, which costs as much as the product itself on YAMNet's
 * small late maps (6 to 24 pixels, up to 1024 x 1024 weights). Weights that
 * came from I8 stay int8 in the panels and each panel is expanded (value x
 * scale, the same floats as the dequantised weights) just before its product:
 * the layer reads a quarter of the bytes, which keeps YAMNet's 3.7 M weights in
 * cache where 15 MB of floats would be evicted between patches. */
static void
pw_forward (ConyCnn *cnn, Layer *l, const float *in, float *out, gsize nb)
{
  gsize M = (gsize) l->in_h * l->in_w * nb;
  guint K = l->in_c, N = l->out_c;
  const CnnKernels *kern = cnn_kernels ();
  cnn_pw_pack (cnn, l);
  if (kern->wino_gemm != NULL && N % 16 == 0 && l->qscale != NULL) {
    if (cnn->panel_cap < (gsize) 16 * K) {
      g_free (cnn->panel);
      cnn->panel = g_new (float, (gsize) 16 * K);
      cnn->panel_cap = (gsize) 16 * K;
    }
    for (guint p = 0; p < N / 16; p++) {
      expand_panel (l->q + (gsize) p * K * 16, l->qscale + 16 * p, K, cnn->panel);
      kern->gemm_panel (M, N, K, in, cnn->panel, out + 16 * p);
    }
  } else if (kern->wino_gemm != NULL && N % 16 == 0) {
    kern->wino_gemm (M, N, K, in, g_atomic_pointer_get (&l->wino[0]), out);
  } else {
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, (int) M, (int) N, (int) K, 1.0f, in,
        (int) K, l->w, (int) N, 0.0f, out, (int) N);
  }
  bias_act (out, M, N, l->b, l->relu, l->relu_max);
}

static void
pool_forward (const Layer *l, const float *in, float *out, gsize nb)
{
  guint C = l->in_c, W = l->in_w;
  for (gsize e = 0; e < nb;
       e++, in += (gsize) l->in_h * W * C, out += (gsize) l->out_h * l->out_w * C)
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

/* A residual: out = in + the map saved at layer add_from (cnn->res). */
static void
add_forward (ConyCnn *cnn, const Layer *l, const float *in, float *out, gsize nb)
{
  gsize n = (gsize) l->out_h * l->out_w * l->out_c * nb;
  for (gsize i = 0; i < n; i++)
    out[i] = in[i] + cnn->res[i];
}

/* The softmax of each of the @n rows of @cols values, with the row's maximum
 * subtracted first (no overflow). */
static void
softmax_rows (const float *in, gsize n, guint cols, float *out)
{
  for (gsize r = 0; r < n; r++, in += cols, out += cols) {
    float mx = in[0];
    for (guint c = 1; c < cols; c++)
      mx = MAX (mx, in[c]);
    double sum = 0.0;
    for (guint c = 0; c < cols; c++)
      sum += out[c] = expf (in[c] - mx);
    float inv = (float) (1.0 / sum);
    for (guint c = 0; c < cols; c++)
      out[c] *= inv;
  }
}

/* cnn->norm = the @nb examples of @input centred (center_height) and normalised
 * (input_mean / input_std), in that order. */
void
cnn_prepare_input (ConyCnn *cnn, const float *input, gsize nb)
{
  guint C = cnn->w->in_c;
  gsize cols = (gsize) cnn->w->in_w * C, plane = cols * cnn->w->in_h;
  memcpy (cnn->norm, input, sizeof (float) * plane * nb);
  if (cnn->w->center_height) {
    double *sum = cnn->col_sum;
    for (gsize e = 0; e < nb; e++) {
      float *x = cnn->norm + e * plane;
      memset (sum, 0, sizeof (double) * cols);
      for (guint h = 0; h < cnn->w->in_h; h++)
        for (gsize j = 0; j < cols; j++)
          sum[j] += x[h * cols + j];
      for (gsize j = 0; j < cols; j++)
        sum[j] /= cnn->w->in_h;
      for (guint h = 0; h < cnn->w->in_h; h++)
        for (gsize j = 0; j < cols; j++)
          x[h * cols + j] -= (float) sum[j];
    }
  }
  if (cnn->w->in_mean != NULL) {
    float *inv = g_alloca (sizeof (float) * C);
    for (guint k = 0; k < C; k++)
      inv[k] = 1.0f / cnn->w->in_std[k];
    for (gsize p = 0; p < plane / C * nb; p++)
      for (guint k = 0; k < C; k++)
        cnn->norm[p * C + k] = (cnn->norm[p * C + k] - cnn->w->in_mean[k]) * inv[k];
  }
}

void
cnn_layer_forward (ConyCnn *cnn, Layer *l, const float *in, float *out, gsize nb, gboolean winograd)
{
  guint tile = winograd && l->kind == LAYER_CONV ? cnn_wino_tile (cnn, l, nb) : 0;
  if (tile != 0)
    cnn_conv_winograd (cnn, l, tile, in, out, nb);
  else if (l->kind == LAYER_CONV)
    conv_im2col (cnn, l, in, out, nb);
  else if (l->kind == LAYER_GAP)
    gap_forward (l, in, out, nb);
  else if (l->kind == LAYER_DW)
    dw_forward (l, in, out, nb);
  else if (l->kind == LAYER_PW)
    pw_forward (cnn, l, in, out, nb);
  else if (l->kind == LAYER_ADD)
    add_forward (cnn, l, in, out, nb);
  else
    pool_forward (l, in, out, nb);
}

/* Runs the conv/pool stack on @nb examples (at most conv_cap); returns the
 * buffer holding their flattened (NHWC) results one after the other. */
static const float *
features_forward (ConyCnn *cnn, const float *input, gsize nb)
{
  const float *cur = input;
  if (cnn->w->in_mean != NULL || cnn->w->center_height) {
    cnn_prepare_input (cnn, input, nb);
    cur = cnn->norm;
  }
  float *bufs[2] = { cnn->act_a, cnn->act_b };
  int which = 0;
  guint first = 0;
  if (cnn_int8_active (cnn)) { /* the integer layers first, their output in act_b */
    first = cnn_int8_features (cnn, cur, nb, bufs[1]);
    cur = first > 0 ? bufs[1] : cur;
  }
  for (guint i = first; i < cnn->w->first_fc; i++) {
    Layer *l = &cnn->w->layers[i];
    float *out = bufs[which];
    cnn_layer_forward (cnn, l, cur, out, nb, TRUE);
    if (l->keep) /* a later residual adds this map */
      memcpy (cnn->res, out, sizeof (float) * l->out_h * l->out_w * l->out_c * nb);
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
 * src/kernels/gemv.c (F16C conversion + FMA where the CPU has them, a portable loop
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
    cnn->fc_w32 = g_new (float, rb *in);
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
  guint first = cnn->w->first_fc;
  if (cnn_int8_active (cnn)) { /* integer head layers, then float ones (if any) */
    first = cnn_int8_head (cnn, in, n, bufs[0]);
    if (first == cnn->w->n_layers)
      memcpy (out, bufs[0], sizeof (float) * n * cnn->w->out_dim);
    cur = first > cnn->w->first_fc ? bufs[0] : cur;
    which = first > cnn->w->first_fc;
  }
  for (guint i = first; i < cnn->w->n_layers; i++) {
    const Layer *l = &cnn->w->layers[i];
    gboolean last = i + 1 == cnn->w->n_layers;
    float *dst = last ? out : bufs[which];
    if (l->kind == LAYER_SIGMOID || l->kind == LAYER_SOFTMAX) {
      if (l->kind == LAYER_SOFTMAX)
        softmax_rows (cur, n, l->out_c, dst);
      else
        for (gsize j = 0; j < n * l->out_c; j++)
          dst[j] = 1.0f / (1.0f + expf (-cur[j]));
      cur = dst;
      which ^= 1;
      continue;
    }
    if (l->w16.f16 != NULL)
      fc_f16 (cnn, l, cur, n, dst);
    else if (n == 1)
      cblas_sgemv (CblasRowMajor, CblasNoTrans, (int) l->out_c, (int) l->in_c, 1.0f, l->w,
          (int) l->in_c, cur, 1, 0.0f, dst, 1);
    else
      cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, (int) n, (int) l->out_c, (int) l->in_c,
          1.0f, cur, (int) l->in_c, l->w, (int) l->in_c, 0.0f, dst, (int) l->out_c);
    bias_act (dst, n, l->out_c, l->b, l->relu || (last && cnn->final_relu), INFINITY);
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
  for (guint i = cnn->w->first_fc; i < cnn->w->n_layers; i++)
    width = MAX (width, MAX ((gsize) cnn->w->layers[i].in_c, (gsize) cnn->w->layers[i].out_c));
  g_free (cnn->fc_a);
  g_free (cnn->fc_b);
  cnn->fc_a = g_new (float, width *n);
  cnn->fc_b = g_new (float, width *n);
  cnn->fc_batch_cap = n;
}

gboolean
cnn_head_runs (const ConyCnn *cnn)
{
  return cnn->w->first_fc < cnn->w->n_layers && cnn->output != CONY_CNN_OUTPUT_EMBEDDING;
}

void
cnn_head_forward (ConyCnn *cnn, const float *feat, gsize n, float *out)
{
  for (gsize start = 0; start < n; start += FC_CHUNK) {
    gsize m = MIN ((gsize) FC_CHUNK, n - start);
    ensure_fc_scratch (cnn, m);
    fc_forward (cnn, feat + start * cnn->w->feat_dim, m, out + start * cnn->w->out_dim);
  }
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
  gsize flat = cnn->w->feat_dim;
  /* Without the head (embedding output, or no FC layers) the conv stack's output is
   * the result. */
  gboolean head = cnn_head_runs (cnn);
  gsize od = cony_cnn_get_output_size (cnn);
  for (gsize start = 0; start < n; start += FC_CHUNK) {
    gsize m = MIN ((gsize) FC_CHUNK, n - start);
    ensure_fc_scratch (cnn, m);
    /* The conv stack conv_batch examples at a time (their tiles or im2col rows
     * share each sgemm); the flattened features gathered so the FC layers see
     * the whole chunk. */
    double w0 = 0, c0 = 0, w1 = 0, c1 = 0;
    if (cnn->profiling)
      clocks (&w0, &c0);
    float *gathered = head ? cnn->fc_b : out + start * od;
    gsize cb = MIN (cnn->w->conv_batch, m);
    cnn_ensure_conv_scratch (cnn, cb);
    for (gsize k = 0; k < m; k += cb) {
      gsize nb = MIN (cb, m - k);
      const float *f = features_forward (cnn, input + (start + k) * in_size, nb);
      memcpy (gathered + k * flat, f, sizeof (float) * flat * nb);
    }
    if (cnn->profiling)
      clocks (&w1, &c1);
    /* fc_forward alternates fc_a/fc_b starting with fc_a: the input in fc_b
     * is read by the first layer, which writes fc_a. */
    if (head)
      fc_forward (cnn, gathered, m, out + start * od);
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
