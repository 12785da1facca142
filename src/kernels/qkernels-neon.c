/* NEON integer kernels for 64-bit ARM (qkernels.h): products of int8 bytes by sdot
 * (ARMv8.2's dot-product extension) or by smull + sadalp (ARMv8.0), of the int16 quads
 * by smlal, the depthwise layer by sdot on window columns or by smlal on int16, and
 * src/kernels/qmath.h's requantisation on 4 lanes. The products multiply x itself
 * (-128..127, not u = x + 128: sdot is signed times signed) with ConyQGemm's bias_x.
 * Same bits as the portable kernels. */
#include "qkernels.h"

#include "cpu-private.h"

#include <string.h>

#ifdef CONY_CPU_ARM64
#include <arm_neon.h>

/* cony_q_mul on 4 lanes: the wrapping left shift; sqrdmulh, which is gemmlowp's
 * saturating rounding doubling high product; the rounding right shift by srshl, whose
 * ties go up, after moving negative values one down so that theirs go away from zero
 * (the and with -rshift keeps x's sign only where rshift > 0; the saturating add leaves
 * INT32_MIN, which has no remainder). */
static inline int32x4_t
q_mul4 (int32x4_t x, int32x4_t mult, int32x4_t lshift, int32x4_t rshift)
{
  int32x4_t hi = vqrdmulhq_s32 (vshlq_s32 (x, lshift), mult);
  int32x4_t neg = vnegq_s32 (rshift);
  int32x4_t fix = vshrq_n_s32 (vandq_s32 (hi, neg), 31);
  return vrshlq_s32 (vqaddq_s32 (hi, fix), neg);
}

/* q_mul4 with one multiplier for every lane. */
static inline int32x4_t
q_mul4_by (int32x4_t x, ConyQMul m)
{
  return q_mul4 (x, vdupq_n_s32 (m.mult), vdupq_n_s32 (MAX (m.shift, 0)),
      vdupq_n_s32 (MAX (-m.shift, 0)));
}

/* 8 values (two vectors) plus @zp clamped to [@lo, @hi], as int8. */
static inline int8x8_t
q_narrow8 (int32x4_t a, int32x4_t b, gint32 zp, gint32 lo, gint32 hi)
{
  int32x4_t z = vdupq_n_s32 (zp), l = vdupq_n_s32 (lo), h = vdupq_n_s32 (hi);
  a = vminq_s32 (vmaxq_s32 (vaddq_s32 (a, z), l), h);
  b = vminq_s32 (vmaxq_s32 (vaddq_s32 (b, z), l), h);
  return vmovn_s16 (vcombine_s16 (vmovn_s32 (a), vmovn_s32 (b)));
}

/* Channels @c..c+7 of @o requantised from @a (c..c+3) and @b (c+4..c+7). */
static inline int8x8_t
q_out8 (const ConyQOut *o, guint c, int32x4_t a, int32x4_t b)
{
  a = q_mul4 (a, vld1q_s32 (o->mult + c), vld1q_s32 (o->lshift + c), vld1q_s32 (o->rshift + c));
  b = q_mul4 (b, vld1q_s32 (o->mult + c + 4), vld1q_s32 (o->lshift + c + 4),
      vld1q_s32 (o->rshift + c + 4));
  return q_narrow8 (a, b, o->zp, o->lo, o->hi);
}

void
cony_qrequant_neon (const ConyQOut *o, const gint32 *acc, guint n, gint8 *out)
{
  guint c = 0;
  for (; c + 8 <= n; c += 8)
    vst1_s8 (out + c, q_out8 (o, c, vld1q_s32 (acc + c), vld1q_s32 (acc + c + 4)));
  for (; c < n; c++) {
    ConyQMul m = { o->mult[c], o->lshift[c] > 0 ? o->lshift[c] : -o->rshift[c] };
    out[c] = cony_q_requant (acc[c], m, o->zp, o->lo, o->hi);
  }
}

/* cony_q_quantize on 4 lanes: the same float division, frinta (roundf's ties away from
 * zero), the clamp to +-1e6, the zero point and the int8 clamp; NaN to the zero point. */
static inline int32x4_t
q_quantize4 (float32x4_t x, float32x4_t scale, int32x4_t zp)
{
  float32x4_t r = vrndaq_f32 (vdivq_f32 (x, scale));
  uint32x4_t number = vceqq_f32 (r, r);
  r = vminq_f32 (vmaxq_f32 (r, vdupq_n_f32 (-1e6f)), vdupq_n_f32 (1e6f));
  int32x4_t v = vbslq_s32 (number, vaddq_s32 (vcvtq_s32_f32 (r), zp), zp);
  return vminq_s32 (vmaxq_s32 (v, vdupq_n_s32 (-128)), vdupq_n_s32 (127));
}

void
cony_qquantize_neon (const float *x, gsize n, float scale, gint32 zp, gint8 *out)
{
  float32x4_t s = vdupq_n_f32 (scale);
  int32x4_t z = vdupq_n_s32 (zp);
  gsize i = 0;
  for (; i + 8 <= n; i += 8) {
    int32x4_t a = q_quantize4 (vld1q_f32 (x + i), s, z);
    int32x4_t b = q_quantize4 (vld1q_f32 (x + i + 4), s, z);
    vst1_s8 (out + i, q_narrow8 (a, b, 0, -128, 127));
  }
  for (; i < n; i++)
    out[i] = cony_q_quantize (x[i], scale, zp);
}

/* One input's half of the add on 4 int16 values: (x - zp) << 20 times its multiplier. */
static inline int32x4_t
q_add_half (int16x4_t x, gint32 zp, ConyQMul m)
{
  int32x4_t v = vsubq_s32 (vmovl_s16 (x), vdupq_n_s32 (zp));
  return q_mul4_by (vshlq_n_s32 (v, CONY_Q_ADD_LEFT_SHIFT), m);
}

void
cony_qadd_neon (const ConyQAddK *k, const gint8 *a, const gint8 *b, gsize n, gint8 *out)
{
  const ConyQAdd *q = &k->add;
  gsize j = 0;
  for (; j + 8 <= n; j += 8) {
    int16x8_t va = vmovl_s8 (vld1_s8 (a + j)), vb = vmovl_s8 (vld1_s8 (b + j));
    int32x4_t s0 = vaddq_s32 (q_add_half (vget_low_s16 (va), q->zp1, q->m1),
        q_add_half (vget_low_s16 (vb), q->zp2, q->m2));
    int32x4_t s1 = vaddq_s32 (q_add_half (vget_high_s16 (va), q->zp1, q->m1),
        q_add_half (vget_high_s16 (vb), q->zp2, q->m2));
    vst1_s8 (out + j,
        q_narrow8 (q_mul4_by (s0, q->m_out), q_mul4_by (s1, q->m_out), q->zp_out, q->lo, q->hi));
  }
  for (; j < n; j++)
    out[j] = cony_q_add (q, a[j], b[j]);
}

/* sdot: each int32 lane of @acc plus the four products of its bytes of @a and @b.
 * Inline assembly: the plain NEON kernels share this file and must not be compiled for
 * ARMv8.2 (the compiler could use sdot there); only the neon-dotprod set's kernels run it. The
 * .arch line lets the assembler take sdot (binutils 2.40 refuses ".arch_extension
 * dotprod" on armv8-a); it changes nothing the compiler emits. */
static inline int32x4_t
sdot (int32x4_t acc, int8x16_t a, int8x16_t b)
{
  __asm__(".arch armv8.2-a+dotprod\n\tsdot %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(a), "w"(b));
  return acc;
}

/* Rows of products in blocks of QROWS, each row's 8 columns of a panel in registers. */
#define QROWS 4

/* Row accumulators of one panel: in pair form (pair[j] holds columns 2j and 2j + 1,
 * each as two partial sums: smull + sadalp on a quad, smlal on int16 pairs), and, for
 * sdot, per column (dot[0]: columns 0-3, dot[1]: 4-7). */
typedef struct {
  int32x4_t pair[4], dot[2];
} Acc8;

/* The byte quads of panel @pn on @MR rows of @x (rows @ld apart) into @acc: sdot where
 * @dot, else smull (int8 x int8 fits int16) and sadalp. */
static inline __attribute__ ((always_inline)) void
byte_quads (const ConyQPanel *pn, const gint8 *x, gsize ld, int MR, gboolean dot, Acc8 *acc)
{
  const gint8 *w8 = pn->w8;
  for (guint i = 0; i < pn->n8; i++, w8 += 32) {
    int8x16_t w0 = vld1q_s8 (w8), w1 = vld1q_s8 (w8 + 16);
    const gint8 *a = x + 4 * (gsize) pn->idx[i];
    for (int r = 0; r < MR; r++) {
      gint32 v;
      memcpy (&v, a + r * ld, sizeof v);
      int8x16_t xb = vreinterpretq_s8_s32 (vdupq_n_s32 (v));
      if (dot) {
        acc[r].dot[0] = sdot (acc[r].dot[0], w0, xb);
        acc[r].dot[1] = sdot (acc[r].dot[1], w1, xb);
      } else {
        int8x8_t x8 = vget_low_s8 (xb);
        acc[r].pair[0] = vpadalq_s16 (acc[r].pair[0], vmull_s8 (vget_low_s8 (w0), x8));
        acc[r].pair[1] = vpadalq_s16 (acc[r].pair[1], vmull_s8 (vget_high_s8 (w0), x8));
        acc[r].pair[2] = vpadalq_s16 (acc[r].pair[2], vmull_s8 (vget_low_s8 (w1), x8));
        acc[r].pair[3] = vpadalq_s16 (acc[r].pair[3], vmull_s8 (vget_high_s8 (w1), x8));
      }
    }
  }
}

/* The int16 quads of panel @pn (8 columns' pairs (k, k + 1), then (k + 2, k + 3)) on @MR
 * rows of @x into @acc's pair form: each row's pairs widened and repeated, smlal. */
static inline __attribute__ ((always_inline)) void
word_quads (const ConyQPanel *pn, const gint8 *x, gsize ld, int MR, Acc8 *acc)
{
  const gint16 *w16 = pn->w16;
  for (guint i = pn->n8; i < pn->nq; i++, w16 += 32) {
    int16x8_t w[4] = { vld1q_s16 (w16), vld1q_s16 (w16 + 8), vld1q_s16 (w16 + 16),
      vld1q_s16 (w16 + 24) };
    const gint8 *a = x + 4 * (gsize) pn->idx[i];
    for (int r = 0; r < MR; r++) {
      gint32 v;
      memcpy (&v, a + r * ld, sizeof v);
      int32x2_t x4 = vreinterpret_s32_s16 (
          vget_low_s16 (vmovl_s8 (vreinterpret_s8_s32 (vdup_n_s32 (v))))); /* (x0, x1), (x2, x3) */
      for (int h = 0; h < 2; h++) {
        int16x4_t xp = vreinterpret_s16_s32 (vdup_lane_s32 (x4, 0));
        if (h)
          xp = vreinterpret_s16_s32 (vdup_lane_s32 (x4, 1));
        acc[r].pair[0] = vmlal_s16 (acc[r].pair[0], vget_low_s16 (w[2 * h]), xp);
        acc[r].pair[1] = vmlal_s16 (acc[r].pair[1], vget_high_s16 (w[2 * h]), xp);
        acc[r].pair[2] = vmlal_s16 (acc[r].pair[2], vget_low_s16 (w[2 * h + 1]), xp);
        acc[r].pair[3] = vmlal_s16 (acc[r].pair[3], vget_high_s16 (w[2 * h + 1]), xp);
      }
    }
  }
}

/* @MR (<= QROWS) rows of @x (@ld apart, Kq values readable) times panel @p, requantised
 * into @out (rows @ldo apart). */
static inline __attribute__ ((always_inline)) void
panel_rows (const ConyQGemm *g, guint p, const gint8 *x, gsize ld, int MR, gboolean dot, gint8 *out,
    gsize ldo)
{
  ConyQPanel pn = cony_qpanel (g, p);
  int32x4_t b0 = vld1q_s32 (g->bias_x + 8 * p), b1 = vld1q_s32 (g->bias_x + 8 * p + 4);
  Acc8 acc[QROWS];
  for (int r = 0; r < MR; r++) {
    acc[r].pair[0] = acc[r].pair[1] = acc[r].pair[2] = acc[r].pair[3] = vdupq_n_s32 (0);
    acc[r].dot[0] = b0;
    acc[r].dot[1] = b1;
  }
  byte_quads (&pn, x, ld, MR, dot, acc);
  word_quads (&pn, x, ld, MR, acc);
  guint n = MIN (8, g->N - 8 * p);
  for (int r = 0; r < MR; r++) {
    int32x4_t lo = vaddq_s32 (acc[r].dot[0], vpaddq_s32 (acc[r].pair[0], acc[r].pair[1]));
    int32x4_t hi = vaddq_s32 (acc[r].dot[1], vpaddq_s32 (acc[r].pair[2], acc[r].pair[3]));
    int8x8_t q = q_out8 (&g->out, 8 * p, lo, hi);
    if (n == 8) {
      vst1_s8 (out + r * ldo + 8 * p, q);
    } else {
      gint8 tmp[8];
      vst1_s8 (tmp, q);
      memcpy (out + r * ldo + 8 * p, tmp, n);
    }
  }
}

/* @x's rows as the kernels read them, a whole quad at a time: @x itself where K is a
 * multiple of 4, else copied into @scratch zero-padded to Kq (*@ld: the row stride). */
static const gint8 *
padded_rows (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint16 *scratch, gsize *ld)
{
  guint K = g->K, Kq = g->p8.Kq;
  *ld = ldx;
  if (K == Kq)
    return x;
  gint8 *p = (gint8 *) scratch; /* cony_qgemm_scratch: more than M * Kq bytes */
  for (gsize r = 0; r < M; r++) {
    memcpy (p + r * Kq, x + r * ldx, K);
    memset (p + r * Kq + K, 0, Kq - K);
  }
  *ld = Kq;
  return p;
}

/* The product for every panel, QROWS rows at a time (the rest with a constant row count,
 * so that the accumulators stay in registers). */
static inline __attribute__ ((always_inline)) void
gemm (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint8 *out, gsize ldo,
    gint16 *scratch, gboolean dot)
{
  gsize ld;
  x = padded_rows (g, M, x, ldx, scratch, &ld);
  gsize full = M / QROWS * QROWS;
  for (guint p = 0; p < (g->N + 7) / 8; p++) {
    for (gsize r = 0; r < full; r += QROWS)
      panel_rows (g, p, x + r * ld, ld, QROWS, dot, out + r * ldo, ldo);
    const gint8 *xr = x + full * ld;
    gint8 *o = out + full * ldo;
    switch (M - full) {
      case 1: panel_rows (g, p, xr, ld, 1, dot, o, ldo); break;
      case 2: panel_rows (g, p, xr, ld, 2, dot, o, ldo); break;
      case 3: panel_rows (g, p, xr, ld, 3, dot, o, ldo); break;
      default: break;
    }
  }
}

void
cony_qgemm_neon (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint8 *out, gsize ldo,
    gint16 *scratch)
{
  gemm (g, M, x, ldx, out, ldo, scratch, FALSE);
}

void
cony_qgemm_neon_dotprod (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint8 *out,
    gsize ldo, gint16 *scratch)
{
  gemm (g, M, x, ldx, out, ldo, scratch, TRUE);
}

/* Channels @c0.. of the depthwise layer (@c0 a multiple of 8), 8 at a time: the 9 taps'
 * raw int8 inputs widened to int16 and multiplied by the int16 weights into int32
 * (smlal; the input zero point is in the bias), then requantised; the channels past the
 * last 8 in the portable arithmetic. */
static void
dw_smlal (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow, guint stride, guint c0,
    gint8 *out, gint32 *acc)
{
  guint C = d->C, C8 = C / 8 * 8;
  gsize row = (gsize) in_w * C, off[9];
  for (guint k = 0; k < 9; k++)
    off[k] = (k / 3) * row + (k % 3) * C;
  for (guint y = 0; y < oh; y++)
    for (guint x = 0; x < ow; x++) {
      const gint8 *px = in + (gsize) y * stride * row + (gsize) x * stride * C;
      gint8 *o = out + ((gsize) y * ow + x) * C;
      for (guint c = c0; c < C8; c += 8) {
        int32x4_t lo = vld1q_s32 (d->bias + c), hi = vld1q_s32 (d->bias + c + 4);
        for (guint k = 0; k < 9; k++) {
          int16x8_t v = vmovl_s8 (vld1_s8 (px + off[k] + c));
          int16x8_t w = vld1q_s16 (d->w + (gsize) k * C + c);
          lo = vmlal_s16 (lo, vget_low_s16 (v), vget_low_s16 (w));
          hi = vmlal_high_s16 (hi, v, w);
        }
        vst1_s8 (o + c, q_out8 (&d->out, c, lo, hi));
      }
      if (C8 < C)
        cony_qdw_channels (d, px, row, C8, o, acc);
    }
}

void
cony_qdw_neon (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow, guint stride,
    gint8 *out, gint32 *acc)
{
  dw_smlal (d, in, in_w, oh, ow, stride, 0, out, acc);
}

/* Input column @at (the window's top row; rows @row bytes apart) of 16 channels as quads
 * of its three rows and a zero, channels 4 j .. 4 j + 3 in @v[j] (a 16-byte lane of
 * ConyQDw's w64 holds its quads in this order). */
static inline void
dw_column16 (const gint8 *at, gsize row, int8x16_t v[4])
{
  const int8x16_t zero = vdupq_n_s8 (0);
  int8x16_t r0 = vld1q_s8 (at), r1 = vld1q_s8 (at + row), r2 = vld1q_s8 (at + 2 * row);
  int16x8_t lo01 = vreinterpretq_s16_s8 (vzip1q_s8 (r0, r1));
  int16x8_t lo2 = vreinterpretq_s16_s8 (vzip1q_s8 (r2, zero));
  int16x8_t hi01 = vreinterpretq_s16_s8 (vzip2q_s8 (r0, r1));
  int16x8_t hi2 = vreinterpretq_s16_s8 (vzip2q_s8 (r2, zero));
  v[0] = vreinterpretq_s8_s16 (vzip1q_s16 (lo01, lo2));
  v[1] = vreinterpretq_s8_s16 (vzip2q_s16 (lo01, lo2));
  v[2] = vreinterpretq_s8_s16 (vzip1q_s16 (hi01, hi2));
  v[3] = vreinterpretq_s8_s16 (vzip2q_s16 (hi01, hi2));
}

/* Channels @c..c+15 of output rows @y0..y1-1 by sdot on ConyQDw's w64 (the 16-byte lane
 * (c % 64) / 16 of its vectors; raw x, the input zero point in the bias; uint8 taps as
 * w - 128 with a second sdot a column for scale64 times its x): each input column made
 * into quads once for the windows that share it, three at stride 1, two at stride 2. */
static void
dw16_dot (const ConyQDw *d, const gint8 *in, gsize row, guint y0, guint y1, guint ow, guint stride,
    guint c, gint8 *out)
{
  const guint C = d->C;
  const gint8 *wq = d->w64 + (gsize) (c / 64) * 12 * 64 + c % 64;
  int8x16_t w[12];
  for (int i = 0; i < 12; i++)
    w[i] = vld1q_s8 (wq + (gsize) i * 64);
  const int8x16_t s = vdupq_n_s8 ((gint8) d->scale64);
  const gboolean scaled = d->scale64 != 0;
  for (guint y = y0; y < y1; y++) {
    const gint8 *line = in + (gsize) y * stride * row + c;
    gint8 *o = out + (gsize) y * ow * C + c;
    int8x16_t col[3][4]; /* the window's columns */
    dw_column16 (line, row, col[0]);
    dw_column16 (line + C, row, col[1]);
    for (guint x = 0; x < ow; x++, o += C) {
      const gint8 *at = line + (gsize) x * stride * C;
      if (x > 0) { /* the columns this window shares with the one before */
        for (int j = 0; j < 4; j++)
          col[0][j] = col[stride == 1 ? 1 : 2][j];
        if (stride == 1)
          for (int j = 0; j < 4; j++)
            col[1][j] = col[2][j];
        else
          dw_column16 (at + C, row, col[1]);
      }
      dw_column16 (at + 2 * C, row, col[2]);
      int32x4_t a[4];
      for (int j = 0; j < 4; j++)
        a[j] = vld1q_s32 (d->bias + c + 4 * j);
      for (int kx = 0; kx < 3; kx++)
        for (int j = 0; j < 4; j++) {
          a[j] = sdot (a[j], col[kx][j], w[4 * kx + j]);
          if (scaled)
            a[j] = sdot (a[j], col[kx][j], s);
        }
      vst1_s8 (o, q_out8 (&d->out, c, a[0], a[1]));
      vst1_s8 (o + 8, q_out8 (&d->out, c + 8, a[2], a[3]));
    }
  }
}

/* The depthwise layer with ARMv8.2's sdot where ConyQDw's w64 exists: 16 channels at a
 * time over bands of output rows (dw16_dot, the groups taking turns on a band); the rest,
 * or all without w64, as cony_qdw_neon. */
void
cony_qdw_neon_dotprod (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow,
    guint stride, gint8 *out, gint32 *acc)
{
  guint C = d->C, n = d->w64 == NULL ? 0 : C / 16 * 16;
  gsize row = (gsize) in_w * C;
  guint band = (guint) MAX (1, CONY_QDW_BAND_BYTES / (stride * row));
  for (guint y0 = 0; y0 < oh && n > 0; y0 += band)
    for (guint c = 0; c < n; c += 16)
      dw16_dot (d, in, row, y0, MIN (oh, y0 + band), ow, stride, c, out);
  if (n < C)
    dw_smlal (d, in, in_w, oh, ow, stride, n, out, acc);
}
#endif
