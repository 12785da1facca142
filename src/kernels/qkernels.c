/* Integer kernels: packing, the portable set and the run-time choice (qkernels.h). */
#include "qkernels.h"

#include "cpu-private.h"

#include <string.h>

/* The largest right shift the short rounding takes: with the zero point folded in
 * (q_mul16_small), |zp| 2^rs stays below 2^30. */
#define SMALL_RSHIFT_MAX 23

static void
split_shifts (const ConyQMul *m, guint n, ConyQOut *o)
{
  o->any_left = FALSE;
  for (guint c = 0; c < n; c++) {
    o->mult[c] = m ? m[c].mult : 0;
    o->lshift[c] = m && m[c].shift > 0 ? m[c].shift : 0;
    o->rshift[c] = m && m[c].shift < 0 ? -m[c].shift : 0;
    o->rmask[c] = (gint32) ((G_GINT64_CONSTANT (1) << o->rshift[c]) - 1);
    o->rhalf[c] = o->rmask[c] >> 1;
    o->any_left |= o->lshift[c] > 0;
  }
}

void
cony_qout_init (ConyQOut *o, guint n, const ConyQMul *m, gint32 zp, gint32 lo, gint32 hi)
{
  guint np = (n + 15) / 16 * 16;
  o->mult = g_new0 (gint32, np + 16); /* the AVX2 kernels read odd lanes one further */
  o->lshift = g_new0 (gint32, np);
  o->rshift = g_new0 (gint32, np);
  o->rmask = g_new0 (gint32, np);
  o->rhalf = g_new0 (gint32, np);
  o->nudge = g_new0 (gint64, np);
  o->nudge16 = g_new0 (gint64, np);
  split_shifts (m, n, o);
  for (guint c = 0; c < n; c++) {
    /* channel c's place among its 8: the even ones in lanes 0-3, the odd ones in 4-7 */
    gsize at = c / 8 * 8 + (c % 2) * 4 + (c % 8) / 2;
    gint64 nudge = (G_GINT64_CONSTANT (1) << 30) + (G_GINT64_CONSTANT (1) << (30 + o->rshift[c]));
    o->nudge[at] = nudge;
    /* doubled, and the zero point's zp 2^(rs + 32), for the shifts the short rounding
     * takes (1..SMALL_RSHIFT_MAX; the others never read it) */
    if (o->rshift[c] >= 1 && o->rshift[c] <= SMALL_RSHIFT_MAX)
      o->nudge16[c / 16 * 16 + (c % 2) * 8 + (c % 16) / 2] = 2 * nudge
          + (gint64) zp * (G_GINT64_CONSTANT (1) << (32 + o->rshift[c]));
  }
  o->zp = zp;
  o->lo = lo;
  o->hi = hi;
}

void
cony_qout_clear (ConyQOut *o)
{
  g_clear_pointer (&o->mult, g_free);
  g_clear_pointer (&o->lshift, g_free);
  g_clear_pointer (&o->rshift, g_free);
  g_clear_pointer (&o->rmask, g_free);
  g_clear_pointer (&o->rhalf, g_free);
  g_clear_pointer (&o->nudge, g_free);
  g_clear_pointer (&o->nudge16, g_free);
}

/* Whether every accumulator of @n channels stays below 2^29 in magnitude (biases
 * @bias, weights @w of @K per channel, inputs of magnitude <= @x_max) and every
 * channel of @o shifts right by 1 to SMALL_RSHIFT_MAX: the SIMD kernels' short rounding
 * is then exact (qkernels-avx2.c, q_mul8_small, q_mul16_small). */
static gboolean
small_accumulators (const ConyQOut *o, guint n, const gint32 *bias, const ConyQWeights *w, guint K,
    gint64 x_max)
{
  if (o->any_left)
    return FALSE;
  for (guint c = 0; c < n; c++) {
    gint64 sum = ABS ((gint64) bias[c]);
    for (guint k = 0; k < K; k++)
      sum += x_max * ABS (cony_qweights_at (w, K, c, k));
    if (o->rshift[c] < 1 || o->rshift[c] > SMALL_RSHIFT_MAX || sum >= (1 << 29))
      return FALSE;
  }
  return TRUE;
}

/* bias[c] - in_zp * sum_k (w - zp) for c < N (a zero bias where @bias is NULL): the
 * input zero point's share of every product, taken out once. */
static gint32 *
folded_bias (guint K, guint N, guint np, const ConyQWeights *w, gint32 in_zp, const gint32 *bias)
{
  gint32 *out = g_new0 (gint32, np);
  for (guint c = 0; c < N; c++) {
    gint64 sum = 0;
    for (guint k = 0; k < K; k++)
      sum += cony_qweights_at (w, K, c, k);
    out[c] = (gint32) ((bias ? bias[c] : 0) - (gint64) in_zp * sum);
  }
  return out;
}

/* Whether quad @q of the @width columns from @c0 can be bytes: its weights fit int8 and,
 * unless @dot4 (vpdpbusd sums four products exactly), vpmaddubsw on u in 0..255 cannot
 * saturate on any of its pairs. */
static gboolean
quad_byte_exact (const ConyQWeights *w, guint K, guint N, guint c0, guint width, guint q,
    gboolean dot4)
{
  for (guint c = c0; c < MIN (c0 + width, N); c++)
    for (guint k = 4 * q; k < MIN (4 * q + 4, K); k += 2) {
      gint32 pos = 0, neg = 0;
      for (guint t = k; t < MIN (k + 2, K); t++) {
        gint32 v = cony_qweights_at (w, K, c, t);
        if (v < -128 || v > 127)
          return FALSE;
        pos += MAX (v, 0);
        neg += MAX (-v, 0);
      }
      if (!dot4 && (255 * pos > 32767 || 255 * neg > 32768))
        return FALSE;
    }
  return TRUE;
}

/* Where column @j (of a panel) of quad row @t (0-3) sits among an int16 quad's
 * 4 * width values: its vector (of @word columns), the pair (t / 2), its place. */
static inline gsize
word_at (guint word, guint j, guint t)
{
  return (gsize) (j / word) * 4 * word + (t / 2) * 2 * word + 2 * (j % word) + t % 2;
}

/* Packs @w into g->p8 (qkernels.h, ConyQPanels8) in panels of @width columns, int16
 * vectors of @word. */
static void
pack_panels8 (ConyQGemm *g, const ConyQWeights *w, guint width, guint word)
{
  ConyQPanels8 *p8 = &g->p8;
  guint K = g->K, N = g->N, nq = (K + 3) / 4, np = (N + width - 1) / width;
  gsize quad = 4 * (gsize) width;
  p8->Kq = 4 * nq;
  p8->width = width;
  p8->word = word;
  p8->idx = g_new (guint32, (gsize) np * nq);
  p8->start8 = g_new0 (guint32, np + 1);
  p8->start16 = g_new0 (guint32, np + 1);
  gboolean *exact = g_new (gboolean, (gsize) np * nq);
  for (guint p = 0; p < np; p++) {
    guint n8 = 0;
    for (guint q = 0; q < nq; q++)
      n8 += exact[(gsize) p * nq + q] = g->row_scale != 0
          || quad_byte_exact (w, K, N, width * p, width, q, g->bytes_int8);
    p8->start8[p + 1] = p8->start8[p] + n8;
    p8->start16[p + 1] = p8->start16[p] + nq - n8;
  }
  p8->w8 = g_new0 (gint8, quad * p8->start8[np] + quad);
  p8->w16 = g_new0 (gint16, quad * p8->start16[np] + quad);
  for (guint p = 0; p < np; p++) {
    guint i8 = 0, i16 = 0, n8 = p8->start8[p + 1] - p8->start8[p];
    for (guint q = 0; q < nq; q++) {
      gboolean byte = exact[(gsize) p * nq + q];
      guint i = byte ? i8++ : n8 + i16++;
      p8->idx[(gsize) p * nq + i] = q;
      /* only the quad's own destination is formed: i - n8 wraps for a byte quad */
      gint8 *d8 = byte ? p8->w8 + quad * ((gsize) p8->start8[p] + i) : NULL;
      gint16 *d16 = byte ? NULL : p8->w16 + quad * ((gsize) p8->start16[p] + (i - n8));
      for (guint j = 0; j < width && width * p + j < N; j++)
        for (guint t = 0; t < 4 && 4 * q + t < K; t++) {
          /* w - zp, or w - 128 where the rows are corrected (row_scale = 128 - zp) */
          gint16 v = cony_qweights_at (w, K, width * p + j, 4 * q + t) - g->row_scale;
          if (byte)
            d8[4 * j + t] = (gint8) v;
          else
            d16[word_at (word, j, t)] = v;
        }
    }
  }
  g_free (exact);
}

/* The copy of @n places' weights that the 512-bit kernels sum four to a dword by vpdpbusd
 * (ConyQDw's w64, ConyQGemm's w32): place p holds column @cols[p]'s values @taps[0..11]
 * (w - zp - @shift; a tap below 0 a zero, for an input that is zero too), its quad q at
 * dword p % 16 of vector 12 (p / 64) + 4 q + (p % 64) / 16; into *@wq, with the bias *@bq
 * (@bias_u, for u = x + 128, per column) and the requantisation @oq in place order. Nothing
 * made (NULL, zeros) where @n is 0 or a value does not fit int8. (@K: the values a column
 * has.) */
static void
vnni_quads (const ConyQWeights *w, guint K, const gint8 *taps, guint n, const guint *cols,
    gint32 shift, const gint32 *bias_u, const ConyQMul *m, gint32 zp, gint32 lo, gint32 hi,
    gint8 **wq, gint32 **bq, ConyQOut *oq)
{
  *wq = NULL;
  *bq = NULL;
  memset (oq, 0, sizeof *oq);
  if (n == 0)
    return;
  for (guint p = 0; p < n; p++)
    for (guint k = 0; k < 12; k++) {
      gint32 v = taps[k] < 0 ? 0 : cony_qweights_at (w, K, cols[p], (guint) taps[k]) - shift;
      if (v < -128 || v > 127)
        return;
    }
  g_autofree ConyQMul *mp = g_new (ConyQMul, n);
  *wq = g_new0 (gint8, (gsize) (n + 63) / 64 * 12 * 64);
  *bq = g_new (gint32, n);
  for (guint p = 0; p < n; p++) {
    for (guint k = 0; k < 12; k++)
      if (taps[k] >= 0)
        (*wq)[((gsize) (p / 64) * 12 + (k / 4) * 4 + p % 64 / 16) * 64 + (p % 16) * 4 + k % 4] =
            (gint8) (cony_qweights_at (w, K, cols[p], (guint) taps[k]) - shift);
    (*bq)[p] = bias_u[cols[p]];
    mp[p] = m[cols[p]];
  }
  cony_qout_init (oq, n, mp, zp, lo, hi);
}

/* Column of place @p among 64 in ConyQGemm's w32 order. */
static inline guint
gemm32_column (guint p)
{
  return (p / 4 % 2) * 16 + (p / 16) * 4 + p % 4;
}

/* ConyQGemm's w32, bias32 and out32 (g->bias done) where K <= 12, N = 32 and every
 * weight fits int8. */
static void
gemm_init_k12 (ConyQGemm *g, const ConyQWeights *w, const ConyQMul *m, gint32 zp, gint32 lo,
    gint32 hi)
{
  guint cols[64];
  for (guint p = 0; p < 64; p++)
    cols[p] = gemm32_column (p);
  guint n = g->K <= 12 && g->N == 32 ? 64 : 0;
  gint8 taps[12]; /* the K values in order, zeros after them */
  for (guint k = 0; k < 12; k++)
    taps[k] = k < g->K ? (gint8) k : -1;
  vnni_quads (w, g->K, taps, n, cols, 0, g->bias, m, zp, lo, hi, &g->w32, &g->bias32, &g->out32);
}

/* Whether every channel of @w (@N of them) has the same zero point: TRUE with it in *@zp
 * (0 where there is none). Files may hold a per-tensor zero point once per channel. */
static gboolean
one_zero_point (const ConyQWeights *w, guint N, gint32 *zp)
{
  *zp = w->zp ? w->zp[0] : 0;
  for (guint c = 1; w->zp && w->zp_per_chan && c < N; c++)
    if (w->zp[c] != *zp)
      return FALSE;
  return TRUE;
}

void
cony_qgemm_init (ConyQGemm *g, const ConyQKernels *k, guint K, guint N, const ConyQWeights *w,
    gint32 in_zp, const gint32 *bias, const ConyQMul *m, gint32 zp, gint32 lo, gint32 hi)
{
  g->bytes_int8 = k->dot4;
  gint32 wzp;
  g->row_scale = k->row_corrections && w->is_u8 && one_zero_point (w, N, &wzp) ? 128 - wzp : 0;
  g->K = K;
  g->N = N;
  g->Np = (N + 63) / 64 * 64;
  g->in_zp = in_zp;
  g->bias = folded_bias (K, N, g->Np, w, in_zp + 128, bias);
  g->bias_x = folded_bias (K, N, g->Np, w, in_zp, bias);
  pack_panels8 (g, w, k->panel ? k->panel : 8, k->word ? k->word : 8); /* 0: as NEON's */
  cony_qout_init (&g->out, N, m, zp, lo, hi);
  g->small_acc = small_accumulators (&g->out, N, g->bias, w, K, 255);
  gemm_init_k12 (g, w, m, zp, lo, hi);
}

/* int16 values of scratch the prepared inputs of @M rows take: the AVX2 kernel's inputs
 * as bytes and as int16, rows of Kq in blocks of 6 (even: the row corrections follow). */
static gsize
inputs_scratch (const ConyQGemm *g, gsize M)
{
  gsize rows = (M + 5) / 6 * 6;
  return rows * g->p8.Kq / 2 + rows * g->p8.Kq + 32;
}

gsize
cony_qgemm_scratch (const ConyQGemm *g, gsize M)
{
  /* and the row corrections, int32 */
  return inputs_scratch (g, M) + 2 * ((M + 5) / 6 * 6);
}

gint32 *
cony_qgemm_corrections (const ConyQGemm *g, gsize M, gint16 *scratch)
{
  return (gint32 *) (scratch + inputs_scratch (g, M));
}

void
cony_qgemm_clear (ConyQGemm *g)
{
  g_clear_pointer (&g->bias, g_free);
  g_clear_pointer (&g->bias_x, g_free);
  g_clear_pointer (&g->w32, g_free);
  g_clear_pointer (&g->bias32, g_free);
  cony_qout_clear (&g->out32);
  g_clear_pointer (&g->p8.w8, g_free);
  g_clear_pointer (&g->p8.w16, g_free);
  g_clear_pointer (&g->p8.idx, g_free);
  g_clear_pointer (&g->p8.start8, g_free);
  g_clear_pointer (&g->p8.start16, g_free);
  cony_qout_clear (&g->out);
}

/* The depthwise taps of @w (@C channels) in pairs for vpmaddwd on registers of @G int16
 * (16: 256-bit, ConyQDw's w2; 32: 512-bit, w4), for the first C / G * G channels: per G
 * channels and pair (0, 1) .. (8, -), 2 G int16; channel j of its G goes to the first
 * vector where j % 8 < 4, else the second, in 128-bit lane j / 8 (the order of unpacking
 * two input vectors). */
static gint16 *
dw_tap_pairs (const ConyQWeights *w, guint C, guint G)
{
  gint16 *out = g_new0 (gint16, (gsize) (C + G - 1) / G * 5 * 2 * G);
  for (guint c = 0; c < C / G * G; c++)
    for (guint k = 0; k < 9; k++) {
      guint j = c % G, vec = (j % 8) / 4, at = (j / 8) * 8 + (j % 4) * 2 + k % 2;
      out[((gsize) (c / G) * 5 + k / 2) * 2 * G + vec * G + at] = cony_qweights_at (w, 9, c, k);
    }
  return out;
}

/* Channel of place @p among 64 in ConyQDw's w64 order: lane (p / 4) % 4 and vector p / 16
 * swap places. */
static inline guint
dw64_channel (guint p)
{
  return p / 64 * 64 + (p / 4 % 4) * 16 + (p / 16 % 4) * 4 + p % 4;
}

/* ConyQDw's w64 quads: a column of the window each, its three taps top to bottom (the
 * fourth input byte is zero). */
static const gint8 DW_COLUMN_TAPS[12] = { 0, 3, 6, -1, 1, 4, 7, -1, 2, 5, 8, -1 };

/* ConyQDw's w64, bias64 and out64, where all the taps fit int8 (vpdpbusd's signed
 * operand): every channel, the last group of 64 filled up with the first channels again
 * (32 channels: twice, for two neighbouring pixels), so that a kernel may take whole
 * lanes of it (the 512-bit one 64 channels, the 256-bit ones 32, NEON's 16). */
static void
dw_init_vnni (ConyQDw *d, const ConyQWeights *w, const gint32 *bias, const ConyQMul *m,
    gint32 in_zp, gint32 zp, gint32 lo, gint32 hi)
{
  guint n = (d->C + 63) / 64 * 64;
  g_autofree guint *cols = g_new (guint, n);
  for (guint p = 0; p < n; p++)
    cols[p] = dw64_channel (p) % d->C;
  /* the kernel multiplies u = x + 128 */
  g_autofree gint32 *bias_u = folded_bias (9, d->C, d->C, w, in_zp + 128, bias);
  vnni_quads (w, 9, DW_COLUMN_TAPS, n, cols, 0, bias_u, m, zp, lo, hi, &d->w64, &d->bias64,
      &d->out64);
  /* uint8 taps with one zero point wz that do not fit: as w - 128, plus (128 - wz) times
   * each channel's sum of u (ConyQDw's scale64; 128 itself does not fit int8) */
  gint32 wz;
  d->scale64 = 0;
  if (d->w64 == NULL && w->is_u8 && one_zero_point (w, d->C, &wz) && wz > 0) {
    d->scale64 = 128 - wz;
    vnni_quads (w, 9, DW_COLUMN_TAPS, n, cols, d->scale64, bias_u, m, zp, lo, hi, &d->w64,
        &d->bias64, &d->out64);
  }
}

void
cony_qdw_init (ConyQDw *d, guint C, const ConyQWeights *w, const gint32 *bias, const ConyQMul *m,
    gint32 in_zp, gint32 zp, gint32 lo, gint32 hi)
{
  guint cp = (C + 15) / 16 * 16;
  d->C = C;
  d->zp = in_zp;
  d->w = g_new0 (gint16, (gsize) 9 * cp);
  for (guint c = 0; c < C; c++)
    for (guint k = 0; k < 9; k++)
      d->w[(gsize) k * C + c] = cony_qweights_at (w, 9, c, k);
  d->w2 = dw_tap_pairs (w, C, 16);
  d->w4 = dw_tap_pairs (w, C, 32);
  d->bias = folded_bias (9, C, cp, w, in_zp, bias);
  cony_qout_init (&d->out, C, m, zp, lo, hi);
  dw_init_vnni (d, w, bias, m, in_zp, zp, lo, hi);
  d->small_acc = small_accumulators (&d->out, C, d->bias, w, 9, 128);
}

void
cony_qdw_clear (ConyQDw *d)
{
  g_clear_pointer (&d->w, g_free);
  g_clear_pointer (&d->w2, g_free);
  g_clear_pointer (&d->w4, g_free);
  g_clear_pointer (&d->w64, g_free);
  g_clear_pointer (&d->bias64, g_free);
  cony_qout_clear (&d->out64);
  g_clear_pointer (&d->bias, g_free);
  cony_qout_clear (&d->out);
}

void
cony_qadd_init (ConyQAddK *k, const ConyQAdd *a)
{
  k->add = *a;
  for (int v = -128; v < 128; v++) {
    k->t1[v + 128] = cony_q_add_input (a->m1, v, a->zp1);
    k->t2[v + 128] = cony_q_add_input (a->m2, v, a->zp2);
  }
  ConyQMul m[3][16];
  for (guint c = 0; c < 16; c++) {
    m[0][c] = a->m1;
    m[1][c] = a->m2;
    m[2][c] = a->m_out;
  }
  cony_qout_init (&k->m1, 16, m[0], 0, -128, 127);
  cony_qout_init (&k->m2, 16, m[1], 0, -128, 127);
  cony_qout_init (&k->mo, 16, m[2], a->zp_out, a->lo, a->hi);
}

void
cony_qadd_clear (ConyQAddK *k)
{
  cony_qout_clear (&k->m1);
  cony_qout_clear (&k->m2);
  cony_qout_clear (&k->mo);
}

/* cony_q_add with its input halves read from the tables. */
static void
add_portable (const ConyQAddK *k, const gint8 *a, const gint8 *b, gsize n, gint8 *out)
{
  for (gsize j = 0; j < n; j++) {
    gint32 v = cony_q_mul (k->t1[a[j] + 128] + k->t2[b[j] + 128], k->add.m_out) + k->add.zp_out;
    out[j] = (gint8) CLAMP (v, k->add.lo, k->add.hi);
  }
}

static inline ConyQMul
qout_mul (const ConyQOut *o, guint c)
{
  return (ConyQMul){ o->mult[c], o->lshift[c] > 0 ? o->lshift[c] : -o->rshift[c] };
}

static void
requant_portable (const ConyQOut *o, const gint32 *acc, guint n, gint8 *out)
{
  for (guint c = 0; c < n; c++)
    out[c] = cony_q_requant (acc[c], qout_mul (o, c), o->zp, o->lo, o->hi);
}

/* One row's accumulators of panel @p (its width): every quad, bytes or int16, on
 * u = x + 128. */
static void
gemm_row_panel (const ConyQGemm *g, guint p, const gint8 *x, gint32 *acc)
{
  const ConyQPanels8 *p8 = &g->p8;
  ConyQPanel pn = cony_qpanel (g, p);
  gsize quad = 4 * (gsize) p8->width;
  for (guint i = 0; i < pn.nq; i++) {
    const gint8 *w8 = pn.w8 + quad * i;
    const gint16 *w16 = pn.w16 + quad * (i - pn.n8);
    for (guint t = 0; t < 4 && 4 * pn.idx[i] + t < g->K; t++) {
      gint32 u = x[4 * pn.idx[i] + t] + 128;
      for (guint j = 0; j < p8->width; j++)
        acc[j] += u * (i < pn.n8 ? w8[4 * j + t] : w16[word_at (p8->word, j, t)]);
    }
  }
}

/* ConyQGemm's row_scale times the sum of u = x + 128 over the row @x (its K values). */
static gint32
row_correction (const ConyQGemm *g, const gint8 *x)
{
  gint32 sum = 128 * (gint32) g->K;
  for (guint k = 0; k < g->K; k++)
    sum += x[k];
  return g->row_scale * sum;
}

static void
gemm_portable (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint8 *out, gsize ldo,
    gint16 *scratch)
{
  (void) scratch;
  guint width = g->p8.width;
  gint32 acc[64];
  gint8 q[64];
  for (guint p = 0; p < cony_qgemm_panels (g); p++) {
    guint c = width * p, n = MIN (width, g->N - c);
    ConyQOut o = { .mult = g->out.mult + c,
      .lshift = g->out.lshift + c,
      .rshift = g->out.rshift + c,
      .zp = g->out.zp,
      .lo = g->out.lo,
      .hi = g->out.hi };
    for (gsize r = 0; r < M; r++) {
      memcpy (acc, g->bias + c, sizeof (gint32) * width);
      if (g->row_scale != 0) {
        gint32 corr = row_correction (g, x + r * ldx);
        for (guint j = 0; j < width; j++)
          acc[j] += corr;
      }
      gemm_row_panel (g, p, x + r * ldx, acc);
      requant_portable (&o, acc, n, q);
      memcpy (out + r * ldo + c, q, n);
    }
  }
}

/* One output pixel's C channels: the folded bias plus the 9 taps of x * (w - zp). */
CONY_CLONES static void
dw_pixel (const ConyQDw *d, const gint8 *restrict in, gsize row, gint32 *restrict acc)
{
  guint C = d->C;
  memcpy (acc, d->bias, sizeof (gint32) * C);
  for (guint k = 0; k < 9; k++) {
    const gint8 *restrict src = in + (k / 3) * row + (k % 3) * C;
    const gint16 *restrict w = d->w + (gsize) k * C;
    for (guint c = 0; c < C; c++)
      acc[c] += (gint32) src[c] * w[c];
  }
}

void
cony_qdw_channels (const ConyQDw *d, const gint8 *px, gsize row, guint c0, gint8 *o, gint32 *acc)
{
  guint C = d->C;
  for (guint c = c0; c < C; c++) {
    gint32 v = d->bias[c];
    for (guint k = 0; k < 9; k++)
      v += (gint32) px[(k / 3) * row + (k % 3) * C + c] * d->w[(gsize) k * C + c];
    acc[c] = v;
  }
  for (guint c = c0; c < C; c++)
    o[c] = cony_q_requant (acc[c], qout_mul (&d->out, c), d->out.zp, d->out.lo, d->out.hi);
}

static void
dw_portable (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow, guint stride,
    gint8 *out, gint32 *acc)
{
  gsize row = (gsize) in_w * d->C;
  for (guint y = 0; y < oh; y++)
    for (guint x = 0; x < ow; x++) {
      dw_pixel (d, in + (gsize) y * stride * row + (gsize) x * stride * d->C, row, acc);
      requant_portable (&d->out, acc, d->C, out + ((gsize) y * ow + x) * d->C);
    }
}

static void
quantize_portable (const float *x, gsize n, float scale, gint32 zp, gint8 *out)
{
  for (gsize i = 0; i < n; i++)
    out[i] = cony_q_quantize (x[i], scale, zp);
}

const ConyQKernels *
cony_qkernels_portable (void)
{
  static const ConyQKernels k = { "portable", gemm_portable, requant_portable, dw_portable,
    quantize_portable, add_portable, FALSE, 8, 8, NULL, FALSE };
  return &k;
}

const ConyQKernels *
cony_qkernels_avx2 (void)
{
#ifdef CONY_CPU_X86
  static const ConyQKernels k = { "avx2", cony_qgemm_avx2, cony_qrequant_avx2, cony_qdw_avx2,
    cony_qquantize_avx2, cony_qadd_avx2, FALSE, 8, 8, NULL, FALSE };
  return cony_cpu_has_v3 () ? &k : NULL;
#else
  return NULL;
#endif
}

/* The AVX2 set with a dot-product kernel for its products and depthwise layers (@dw), on
 * panels of @panel columns and int16 vectors of @word. */
#define DOT4_SET(name, gemm, dw, panel, word) \
  { \
    name, gemm, cony_qrequant_avx2, dw, cony_qquantize_avx2, cony_qadd_avx2, TRUE, panel, word, \
        NULL, TRUE \
  }

const ConyQKernels *
cony_qkernels_avx512vnni (void)
{
#ifdef CONY_CPU_VNNI
  /* the products, the depthwise layers and the adds on 512-bit registers */
  static const ConyQKernels k = { "avx512vnni", cony_qgemm_avx512vnni, cony_qrequant_avx2,
    cony_qdw_avx512vnni, cony_qquantize_avx2, cony_qadd_avx512, TRUE, 64, 16,
    cony_qgemm_rows_avx512, TRUE };
  return cony_cpu_has_v3 () && cony_cpu_has_avx512vnni () ? &k : NULL;
#else
  return NULL;
#endif
}

const ConyQKernels *
cony_qkernels_avxvnni (void)
{
#ifdef CONY_CPU_VNNI
  static const ConyQKernels k = DOT4_SET ("avxvnni", cony_qgemm_avxvnni, cony_qdw_avxvnni, 16, 8);
  return cony_cpu_has_v3 () && cony_cpu_has_avxvnni () ? &k : NULL;
#else
  return NULL;
#endif
}

const ConyQKernels *
cony_qkernels_vnni (void)
{
  const ConyQKernels *k = cony_qkernels_avx512vnni ();
  return k ? k : cony_qkernels_avxvnni ();
}

const ConyQKernels *
cony_qkernels_dot4_emulated (void)
{
#ifdef CONY_CPU_X86
  static const ConyQKernels k = DOT4_SET ("avx2-dot4", cony_qgemm_dot4_emulated,
      cony_qdw_dot4_emulated, 16, 8);
  return cony_cpu_has_v3 () ? &k : NULL;
#else
  return NULL;
#endif
}

/* The NEON sets: both run either packing; the dot-product one wants every int8 quad as
 * bytes (sdot), the plain one too (smull on bytes is twice as wide as on int16). */
#define NEON_SET(name, gemm, dw) \
  { \
    name, gemm, cony_qrequant_neon, dw, cony_qquantize_neon, cony_qadd_neon, TRUE, 8, 8, NULL, \
        FALSE \
  }

const ConyQKernels *
cony_qkernels_neon (void)
{
#ifdef CONY_CPU_ARM64
  static const ConyQKernels k = NEON_SET ("neon", cony_qgemm_neon, cony_qdw_neon);
  return &k;
#else
  return NULL;
#endif
}

const ConyQKernels *
cony_qkernels_neon_dotprod (void)
{
#ifdef CONY_CPU_ARM64
  static const ConyQKernels k = NEON_SET ("neon-dotprod", cony_qgemm_neon_dotprod,
      cony_qdw_neon_dotprod);
  return cony_cpu_has_asimddp () ? &k : NULL;
#else
  return NULL;
#endif
}

/* The set CONY_CNN_KERNELS names (NULL when unset): a name this CPU cannot run, or
 * none of the sets', is reported and the choice left to cony_qkernels. */
static const ConyQKernels *
kernels_from_env (void)
{
  const char *want = g_getenv ("CONY_CNN_KERNELS");
  const ConyQKernels *sets[] = { cony_qkernels_portable (), cony_qkernels_avx2 (),
    cony_qkernels_dot4_emulated (), cony_qkernels_avxvnni (), cony_qkernels_avx512vnni (),
    cony_qkernels_neon (), cony_qkernels_neon_dotprod () };
  for (guint i = 0; want != NULL && i < G_N_ELEMENTS (sets); i++)
    if (sets[i] != NULL && strcmp (sets[i]->name, want) == 0)
      return sets[i];
  if (want != NULL)
    g_warning ("CONY_CNN_KERNELS=%s: not a kernel set this CPU runs (portable, avx2, "
               "avx2-dot4, avxvnni, avx512vnni, neon, neon-dotprod where the CPU has them); "
               "choosing as usual",
        want);
  return NULL;
}

const ConyQKernels *
cony_qkernels (void)
{
  /* chosen once: every layer of every forward pass asks, and CPUID traps in a VM */
  static gsize done;
  static const ConyQKernels *k;
  if (g_once_init_enter (&done)) {
    k = kernels_from_env ();
    if (k == NULL && !cony_cpu_force_portable ()) {
      k = cony_qkernels_vnni ();
      k = k ? k : cony_qkernels_avx2 ();
      k = k ? k : cony_qkernels_neon_dotprod ();
      k = k ? k : cony_qkernels_neon ();
    }
    k = k ? k : cony_qkernels_portable ();
    g_once_init_leave (&done, 1);
  }
  return k;
}
