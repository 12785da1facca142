/* CNN engine: the forward pass (see include/cony/cnn.h): the input's normalisation, the
 * conv stack and the head, each layer run by its row of the layer table (cnn-layers.c),
 * batching and profiling. */
#include "cnn-private.h"
#include "cony/error.h"
#include "cony/safetensors.h"

#include <string.h>
#include <time.h>

CONY_CLONES void
cnn_bias_act (float *x, gsize rows, guint cols, const float *b, gboolean relu, float hi)
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

/* @w's means and their 1 / std for each value of an input row (in_w * in_c floats each,
 * the channels repeating): the normalisation then runs as one plain loop over a row. */
float *
cnn_norm_row_new (const CnnWeights *w)
{
  gsize cols = (gsize) w->in_w * w->in_c;
  float *row = g_new (float, 2 * cols);
  for (gsize j = 0; j < cols; j++) {
    row[j] = w->in_mean[j % w->in_c];
    row[cols + j] = 1.0f / w->in_std[j % w->in_c];
  }
  return row;
}

/* The @h rows of @cols values at @x centred on their column means (center_height's). */
static void
center_columns (float *x, guint h, gsize cols, double *sum)
{
  memset (sum, 0, sizeof (double) * cols);
  for (guint r = 0; r < h; r++)
    for (gsize j = 0; j < cols; j++)
      sum[j] += x[r * cols + j];
  for (gsize j = 0; j < cols; j++)
    sum[j] /= h;
  for (guint r = 0; r < h; r++)
    for (gsize j = 0; j < cols; j++)
      x[r * cols + j] -= (float) sum[j];
}

/* cnn->norm = the @nb examples of @input centred (center_height) and normalised
 * (input_mean / input_std), in that order; without centring, read from @input in the
 * same pass that normalises (no copy first). */
static void
cnn_prepare_input (ConyCnn *cnn, const float *input, gsize nb)
{
  const CnnWeights *w = cnn->w;
  gsize cols = (gsize) w->in_w * w->in_c, rows = (gsize) w->in_h * nb;
  const float *src = input;
  if (w->center_height) {
    memcpy (cnn->norm, input, sizeof (float) * cols * rows);
    for (gsize e = 0; e < nb; e++)
      center_columns (cnn->norm + e * cols * w->in_h, w->in_h, cols, cnn->col_sum);
    src = cnn->norm;
  }
  if (w->in_mean == NULL)
    return;
  const float *mean = cnn->norm_row, *inv = cnn->norm_row + cols;
  for (gsize r = 0; r < rows; r++) {
    const float *x = src + r * cols;
    float *y = cnn->norm + r * cols;
    for (gsize j = 0; j < cols; j++)
      y[j] = (x[j] - mean[j]) * inv[j];
  }
}

void
cnn_layer_forward (ConyCnn *cnn, Layer *l, const float *in, float *out, gsize nb, gboolean winograd)
{
  cnn_layer_class (l->kind)->forward (cnn, l, in, out, nb, winograd ? CNN_FORWARD_WINOGRAD : 0);
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
    Layer *l = &cnn->w->layers[i];
    gboolean last = i + 1 == cnn->w->n_layers;
    float *dst = last ? out : bufs[which];
    cnn_layer_class (l->kind)->forward (cnn, l, cur, dst, n,
        last && cnn->final_relu ? CNN_FORWARD_RELU : 0);
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
