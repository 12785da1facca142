/* One SIMD width of attention-query.c's kernel, included once per width with QK_R (rows
 * per block, the vector's lanes), QK_TARGET, QK_NAME and the V_* vector operations
 * defined, and optionally QK_WEIGHTED_SUM_FAST, a weighted sum tried first (FALSE: not
 * for this shape). See attention-query.c for the algorithm. */

/* T[c * QK_R + r] = X[r * ld + c] for r < QK_R, c < cols. */
QK_TARGET static void
QK_NAME (transpose_rows) (const float *X, gsize ld, int cols, float *T)
{
  int c = 0;
  for (; c + QK_R <= cols; c += QK_R)
    QK_NAME (tile) (X + c, ld, T + (gsize) c * QK_R);
  for (; c < cols; c++)
    for (int r = 0; r < QK_R; r++)
      T[(gsize) c * QK_R + r] = X[(gsize) r * ld + c];
}

/* S[h * w + i] = Σ_c∈h qs[c] · K[i, c]: QK_R window rows at a time, transposed so that
 * each lane sums one row's products in column order. */
QK_TARGET static void
QK_NAME (
    scores) (const float *qs, const float *K, int ld, int w, int heads, int hd, float *S, float *T)
{
  int d = heads * hd, full = w - w % QK_R;
  for (int i0 = 0; i0 < full; i0 += QK_R) {
    QK_NAME (transpose_rows) (K + (gsize) i0 * ld, ld, d, T);
    for (int h = 0, c = 0; h < heads; h++) {
      VEC a = V_ZERO ();
      for (int e = 0; e < hd; e++, c++)
        a = V_FMA (V_SET1 (qs[c]), V_LOAD (T + (gsize) c * QK_R), a);
      V_STORE (S + (gsize) h * w + i0, a);
    }
  }
  for (int i = full; i < w; i++)
    for (int h = 0, c = 0; h < heads; h++) {
      float a = 0.0f;
      for (int e = 0; e < hd; e++, c++)
        a = fmaf (qs[c], K[(gsize) i * ld + c], a);
      S[(gsize) h * w + i] = a;
    }
}

/* exp of each lane, cony_exp_batch's operations (the same bits) for finite lanes. */
QK_TARGET static inline VEC
QK_NAME (exp) (VEC x)
{
  VEC v = V_MIN (V_MAX (x, V_SET1 (CONY_EXP_LO)), V_SET1 (CONY_EXP_HI));
  VEC k = V_SUB (V_ADD (V_MUL (v, V_SET1 (CONY_EXP_LOG2E)), V_SET1 (CONY_EXP_ROUND)),
      V_SET1 (CONY_EXP_ROUND));
  VEC r = V_SUB (V_SUB (v, V_MUL (k, V_SET1 (CONY_EXP_LN2_HI))),
      V_MUL (k, V_SET1 (CONY_EXP_LN2_LO)));
  VEC p = V_SET1 (cony_exp_poly[0]);
  for (int j = 1; j < 6; j++)
    p = V_ADD (V_MUL (p, r), V_SET1 (cony_exp_poly[j]));
  p = V_ADD (V_ADD (V_MUL (V_MUL (p, r), r), r), V_SET1 (1.0f));
  return V_MUL (p, V_POW2 (k));
}

/* x[i] <- exp(x[i] - max) over the @w scores of one head; returns 1 / their sum, or 0
 * when a score is not finite (nothing changed then). */
QK_TARGET static float
QK_NAME (softmax_terms) (float *x, int w)
{
  int i = 0, bad = 0;
  float max = -INFINITY;
  VEC vmax = V_SET1 (-INFINITY);
  for (; i + QK_R <= w; i += QK_R) {
    VEC v = V_LOAD (x + i);
    bad |= V_NONFINITE (v);
    vmax = V_MAX (vmax, v);
  }
  max = V_HMAX (vmax);
  for (; i < w; i++) {
    bad |= !isfinite (x[i]);
    max = fmaxf (max, x[i]);
  }
  if (bad)
    return 0.0f;
  VEC vm = V_SET1 (max), vs = V_ZERO ();
  for (i = 0; i + QK_R <= w; i += QK_R) {
    VEC e = QK_NAME (exp) (V_SUB (V_LOAD (x + i), vm));
    V_STORE (x + i, e);
    vs = V_ADD (vs, e);
  }
  for (int j = i; j < w; j++)
    x[j] -= max;
  cony_exp_batch (x + i, w - i);
  float sum = V_HSUM (vs);
  for (; i < w; i++)
    sum += x[i];
  return 1.0f / sum;
}

/* out[c] = Σ_i P[head(c), i] · V[i, c] · inv[head(c)]: the block's rows transposed as
 * for the scores, one accumulator of QK_R lanes per column (@acc, QK_R · d floats). */
QK_TARGET static void
QK_NAME (weighted_sum) (const float *P, const float *V, int ld, int w, int heads, int hd,
    const float *inv, float *T, float *acc, float *out)
{
  int d = heads * hd, full = w - w % QK_R;
  for (int c = 0; c < d; c++)
    V_STORE (acc + (gsize) c * QK_R, V_ZERO ());
  for (int i0 = 0; i0 < full; i0 += QK_R) {
    QK_NAME (transpose_rows) (V + (gsize) i0 * ld, ld, d, T);
    for (int h = 0, c = 0; h < heads; h++) {
      VEC p = V_LOAD (P + (gsize) h * w + i0);
      for (int e = 0; e < hd; e++, c++) {
        float *a = acc + (gsize) c * QK_R;
        V_STORE (a, V_FMA (p, V_LOAD (T + (gsize) c * QK_R), V_LOAD (a)));
      }
    }
  }
  for (int h = 0, c = 0; h < heads; h++)
    for (int e = 0; e < hd; e++, c++) {
      float o = V_HSUM (V_LOAD (acc + (gsize) c * QK_R));
      for (int i = full; i < w; i++)
        o = fmaf (P[(gsize) h * w + i], V[(gsize) i * ld + c], o);
      out[c] = o * inv[h];
    }
}

QK_TARGET static void
QK_NAME (single_query) (const float *q, const float *K, const float *V, int ld, int w, int heads,
    int hd, float scale, float *scratch, double *sd, float *out)
{
  int d = heads * hd;
  float *S = scratch, *T = S + (gsize) heads * w, *acc = T + (gsize) QK_R * d;
  float *qs = acc + (gsize) QK_R * d, *inv = qs + d;
  for (int c = 0; c < d; c++)
    qs[c] = scale * q[c];
  QK_NAME (scores) (qs, K, ld, w, heads, hd, S, T);
  for (int h = 0; h < heads; h++) {
    float *s = S + (gsize) h * w;
    inv[h] = QK_NAME (softmax_terms) (s, w);
    if (inv[h] == 0.0f) { /* overflowing scores: the shared kernel's double fallback */
      cony_attn_softmax_scores (q + h * hd, K + h * hd, ld, w, hd, scale, s, sd);
      inv[h] = 1.0f;
    }
  }
#ifdef QK_WEIGHTED_SUM_FAST
  if (QK_WEIGHTED_SUM_FAST (S, V, ld, w, heads, hd, inv, out))
    return;
#endif
  QK_NAME (weighted_sum) (S, V, ld, w, heads, hd, inv, T, acc, out);
}
