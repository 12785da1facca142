/* AVX2 integer kernels (qkernels.h): products by vpmaddubsw where its int16 pair sums
 * provably cannot saturate and by vpmaddwd on int16 elsewhere (ConyQPanels8), the
 * depthwise layer on int16, and the requantisation of src/kernels/qmath.h on 8 lanes. Same
 * bits as the portable kernels. */
#include "qkernels.h"

#include "cpu-private.h"

#include <string.h>

#ifdef CONY_CPU_X86
#include <immintrin.h>

/* cony_q_mul of channels c..c+7 of @o on 8 lanes (multipliers >= 0, so the one
 * saturating product never occurs): wrapping left shift (where the layer has one);
 * round-half-up high product, floor((x*m + 2^30) / 2^31), from the even and odd lanes'
 * 64-bit products (the odd lanes' multipliers read one channel further); then the
 * rounding right shift with the precomputed mask and half. */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) __m256i
q_mul8 (const ConyQOut *o, guint c, __m256i x)
{
  if (o->any_left)
    x = _mm256_sllv_epi32 (x, _mm256_loadu_si256 ((const __m256i *) (o->lshift + c)));
  const __m256i nudge = _mm256_set1_epi64x (1 << 30);
  __m256i even = _mm256_add_epi64 (_mm256_mul_epi32 (x,
                                       _mm256_loadu_si256 ((const __m256i *) (o->mult + c))),
      nudge);
  __m256i odd = _mm256_add_epi64 (_mm256_mul_epi32 (_mm256_srli_epi64 (x, 32),
                                      _mm256_loadu_si256 ((const __m256i *) (o->mult + c + 1))),
      nudge);
  __m256i hi = _mm256_blend_epi32 (_mm256_srli_epi64 (even, 31), _mm256_slli_epi64 (odd, 1), 0xAA);
  /* rounding divide by 2^rs: ties away from zero */
  __m256i rem = _mm256_and_si256 (hi, _mm256_loadu_si256 ((const __m256i *) (o->rmask + c)));
  __m256i neg = _mm256_cmpgt_epi32 (_mm256_setzero_si256 (), hi);
  __m256i thr = _mm256_sub_epi32 (_mm256_loadu_si256 ((const __m256i *) (o->rhalf + c)), neg);
  __m256i rs = _mm256_loadu_si256 ((const __m256i *) (o->rshift + c));
  return _mm256_sub_epi32 (_mm256_srav_epi32 (hi, rs), _mm256_cmpgt_epi32 (rem, thr));
}

/* q_mul8_small's constants of channels @c..c+7: the multipliers of the even and of the
 * odd channels, their nudges, the shifts. */
typedef struct {
  __m256i mult_even, mult_odd, nudge_even, nudge_odd, rshift;
} QSmall8;

CONY_TARGET_V3 static inline __attribute__ ((always_inline)) QSmall8
q_small8 (const ConyQOut *o, guint c)
{
  const __m256i *nudge = (const __m256i *) (o->nudge + c);
  return (QSmall8){ _mm256_loadu_si256 ((const __m256i *) (o->mult + c)),
    _mm256_loadu_si256 ((const __m256i *) (o->mult + c + 1)), _mm256_loadu_si256 (nudge),
    _mm256_loadu_si256 (nudge + 1), _mm256_loadu_si256 ((const __m256i *) (o->rshift + c)) };
}

/* q_mul8 where every |x| < 2^29 and every shift is right by rs >= 1 (ConyQGemm's
 * small_acc): the rounding division floor((hi + 2^(rs-1) - [hi < 0]) / 2^rs) with
 * 2^(rs-1) folded into the 64-bit nudge (o->nudge: then hi + 2^(rs-1) < 2^31) and the
 * sign of x for that of hi (they differ only where hi is 0, which rounds to 0 either
 * way): 11 instructions instead of 14. On the constants @k (q_small8). */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) __m256i
q_mul8_small_k (const QSmall8 *k, __m256i x)
{
  __m256i even = _mm256_add_epi64 (_mm256_mul_epi32 (x, k->mult_even), k->nudge_even);
  __m256i odd = _mm256_add_epi64 (_mm256_mul_epi32 (_mm256_srli_epi64 (x, 32), k->mult_odd),
      k->nudge_odd);
  __m256i hi = _mm256_blend_epi32 (_mm256_srli_epi64 (even, 31), _mm256_slli_epi64 (odd, 1), 0xAA);
  return _mm256_srav_epi32 (_mm256_add_epi32 (hi, _mm256_srai_epi32 (x, 31)), k->rshift);
}

CONY_TARGET_V3 static inline __attribute__ ((always_inline)) __m256i
q_mul8_small (const ConyQOut *o, guint c, __m256i x)
{
  QSmall8 k = q_small8 (o, c);
  return q_mul8_small_k (&k, x);
}

/* q_mul8, or q_mul8_small where @small. */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) __m256i
q_scale8 (const ConyQOut *o, gboolean small, guint c, __m256i x)
{
  return small ? q_mul8_small (o, c, x) : q_mul8 (o, c, x);
}

/* Two vectors of 8 scaled values (q_mul8) as 16 int8 in order, plus the zero point,
 * clamped to [lo, hi]: saturated to int16, the zero point added with saturation, then
 * to int8 with saturation and clamped there. Saturation only happens far outside
 * -128..127 - zp, where the clamp gives lo or hi either way: the same as clamping the
 * int32 sum. */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) __m128i
q_out16 (const ConyQOut *o, __m256i a, __m256i b)
{
  __m256i w = _mm256_permute4x64_epi64 (_mm256_packs_epi32 (a, b), 0xD8);
  w = _mm256_adds_epi16 (w, _mm256_set1_epi16 ((gint16) o->zp));
  __m128i q = _mm_packs_epi16 (_mm256_castsi256_si128 (w), _mm256_extracti128_si256 (w, 1));
  q = _mm_max_epi8 (q, _mm_set1_epi8 ((gint8) o->lo));
  return _mm_min_epi8 (q, _mm_set1_epi8 ((gint8) o->hi));
}

CONY_TARGET_V3 void
cony_qrequant_avx2 (const ConyQOut *o, const gint32 *acc, guint n, gint8 *out)
{
  guint c = 0;
  for (; c + 16 <= n; c += 16) {
    __m256i a = q_mul8 (o, c, _mm256_loadu_si256 ((const __m256i *) (acc + c)));
    __m256i b = q_mul8 (o, c + 8, _mm256_loadu_si256 ((const __m256i *) (acc + c + 8)));
    _mm_storeu_si128 ((__m128i *) (out + c), q_out16 (o, a, b));
  }
  for (; c < n; c++) {
    ConyQMul m = { o->mult[c], o->lshift[c] > 0 ? o->lshift[c] : -o->rshift[c] };
    out[c] = cony_q_requant (acc[c], m, o->zp, o->lo, o->hi);
  }
}

/* 16 int32 (two vectors, in range) as 16 int8 in order. */
CONY_TARGET_V3 static inline __m128i
q_pack16 (__m256i a, __m256i b)
{
  __m256i w = _mm256_permute4x64_epi64 (_mm256_packs_epi32 (a, b), 0xD8);
  return _mm_packs_epi16 (_mm256_castsi256_si128 (w), _mm256_extracti128_si256 (w, 1));
}

/* One input's half of the add on 8 int8 (in the low half of @x): (x - zp) << 20,
 * times its multiplier (|x - zp| <= 255: the shift cannot wrap). */
CONY_TARGET_V3 static inline __m256i
q_add_half (const ConyQOut *m, gint32 zp, __m128i x)
{
  __m256i v = _mm256_sub_epi32 (_mm256_cvtepi8_epi32 (x), _mm256_set1_epi32 (zp));
  return q_mul8 (m, 0, _mm256_slli_epi32 (v, CONY_Q_ADD_LEFT_SHIFT));
}

CONY_TARGET_V3 void
cony_qadd_avx2 (const ConyQAddK *k, const gint8 *a, const gint8 *b, gsize n, gint8 *out)
{
  gsize j = 0;
  for (; j + 16 <= n; j += 16) {
    __m128i va = _mm_loadu_si128 ((const __m128i *) (a + j));
    __m128i vb = _mm_loadu_si128 ((const __m128i *) (b + j));
    __m256i s0 = _mm256_add_epi32 (q_add_half (&k->m1, k->add.zp1, va),
        q_add_half (&k->m2, k->add.zp2, vb));
    __m256i s1 = _mm256_add_epi32 (q_add_half (&k->m1, k->add.zp1, _mm_srli_si128 (va, 8)),
        q_add_half (&k->m2, k->add.zp2, _mm_srli_si128 (vb, 8)));
    _mm_storeu_si128 ((__m128i *) (out + j),
        q_out16 (&k->mo, q_mul8 (&k->mo, 0, s0), q_mul8 (&k->mo, 0, s1)));
  }
  for (; j < n; j++)
    out[j] = cony_q_add (&k->add, a[j], b[j]);
}

/* cony_q_quantize on 8 lanes: the same float division, roundf as truncation plus one
 * away from zero where the exact remainder is at least one half, the clamp to +-1e6,
 * the zero point, the int8 clamp, and NaN to the (clamped) zero point. */
CONY_TARGET_V3 static inline __m256i
q_quantize8 (__m256 x, __m256 scale, __m256i zp)
{
  __m256 r = _mm256_div_ps (x, scale);
  __m256 t = _mm256_round_ps (r, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  __m256 sign = _mm256_and_ps (r, _mm256_set1_ps (-0.0f));
  __m256 half = _mm256_cmp_ps (_mm256_andnot_ps (sign, _mm256_sub_ps (r, t)), _mm256_set1_ps (0.5f),
      _CMP_GE_OQ);
  __m256 one = _mm256_or_ps (_mm256_set1_ps (1.0f), sign);
  r = _mm256_add_ps (t, _mm256_and_ps (half, one));
  __m256 nan = _mm256_cmp_ps (r, r, _CMP_UNORD_Q);
  r = _mm256_min_ps (_mm256_max_ps (r, _mm256_set1_ps (-1e6f)), _mm256_set1_ps (1e6f));
  __m256i v = _mm256_add_epi32 (_mm256_cvttps_epi32 (r), zp);
  v = _mm256_blendv_epi8 (v, zp, _mm256_castps_si256 (nan));
  return _mm256_min_epi32 (_mm256_max_epi32 (v, _mm256_set1_epi32 (-128)), _mm256_set1_epi32 (127));
}

CONY_TARGET_V3 void
cony_qquantize_avx2 (const float *x, gsize n, float scale, gint32 zp, gint8 *out)
{
  __m256 s = _mm256_set1_ps (scale);
  __m256i z = _mm256_set1_epi32 (zp);
  gsize i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i a = q_quantize8 (_mm256_loadu_ps (x + i), s, z);
    __m256i b = q_quantize8 (_mm256_loadu_ps (x + i + 8), s, z);
    _mm_storeu_si128 ((__m128i *) (out + i), q_pack16 (a, b));
  }
  for (; i < n; i++)
    out[i] = cony_q_quantize (x[i], scale, zp);
}

/* The inputs of a product, as the kernel reads them: rows in blocks of 6, per block
 * and k quad the 6 rows' 4 values side by side, u = x + 128 as bytes (24 per quad) and
 * as int16 (48 per quad), so that every broadcast is at a constant offset. */
#define QROWS 6
/* How far ahead of the weights being read to prefetch (bytes): the panels of the large
 * layers come from L3 or memory once per product. */
#define PREFETCH 2048

/* One row of a byte-exact quad: broadcast its 4 bytes, vpmaddubsw with the panel's
 * weights, pairs summed into int32 by vpmaddwd with ones, added to the accumulator.
 * Inline assembly: the compiler otherwise spills accumulators in this loop. */
#define BYTE_ROW(off, acc) \
  "vpbroadcastd " off "(%[a]), %%ymm14\n\t" \
  "vpmaddubsw %[w], %%ymm14, %%ymm14\n\t" \
  "vpmaddwd %[one], %%ymm14, %%ymm14\n\t" \
  "vpaddd %%ymm14, %[" acc "], %[" acc "]\n\t"
/* One row of another quad: two int16 pairs times the two weight vectors. */
#define WORD_ROW(off0, off1, acc) \
  "vpbroadcastd " off0 "(%[a]), %%ymm14\n\t" \
  "vpmaddwd %[w0], %%ymm14, %%ymm14\n\t" \
  "vpbroadcastd " off1 "(%[a]), %%ymm15\n\t" \
  "vpmaddwd %[w1], %%ymm15, %%ymm15\n\t" \
  "vpaddd %%ymm14, %[" acc "], %[" acc "]\n\t" \
  "vpaddd %%ymm15, %[" acc "], %[" acc "]\n\t"
#define ACC6 \
  [a0] "+x"(a0), [a1] "+x"(a1), [a2] "+x"(a2), [a3] "+x"(a3), [a4] "+x"(a4), [a5] "+x"(a5)

/* Rows @r and @r + 1's accumulators of the 8 columns from @c requantised: row r's 8
 * int8 in the low half, row r + 1's in the high half. */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) __m128i
requant8x2 (const ConyQGemm *g, guint c, __m256i r0, __m256i r1)
{
  const ConyQOut *o = &g->out;
  return q_out16 (o, q_scale8 (o, g->small_acc, c, r0), q_scale8 (o, g->small_acc, c, r1));
}

/* requant8x2's @q (columns @c..) into @out and @out + @ldo (row stride @ldo); @two
 * FALSE: the first row only. */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) void
put8x2 (const ConyQGemm *g, guint c, __m128i q, gboolean two, gint8 *out, gsize ldo)
{
  guint n = MIN (8, g->N - c);
  if (n == 8) {
    _mm_storel_epi64 ((__m128i *) (out + c), q);
    if (two)
      _mm_storel_epi64 ((__m128i *) (out + ldo + c), _mm_unpackhi_epi64 (q, q));
  } else {
    gint8 tmp[16];
    _mm_storeu_si128 ((__m128i *) tmp, q);
    memcpy (out + c, tmp, n);
    if (two)
      memcpy (out + ldo + c, tmp + 8, n);
  }
}

/* @MR rows of @NV (1 or 2) vectors of accumulators stored at @acc (row r's at 2 r),
 * columns @c.. of @N, requantised into @out (@small: the short rounding): a pass of its
 * own after the products, as put_rows16 on 512-bit registers, a row's 16 columns stored
 * at once. (@o: a local copy of the kernel's ConyQOut, see put16.) */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) void
put_rows8 (const ConyQOut *o, gboolean small, guint c, const __m256i *acc, gsize MR, const int NV,
    guint N, gint8 *out, gsize ldo)
{
  QSmall8 k[2];
  for (int i = 0; i < NV && small; i++)
    k[i] = q_small8 (o, c + 8 * i);
  guint n = MIN (8 * (guint) NV, N - c);
  for (gsize r = 0; r < MR; r++) {
    __m256i v[2];
    for (int i = 0; i < NV; i++) {
      __m256i x = acc[2 * r + i];
      v[i] = small ? q_mul8_small_k (&k[i], x) : q_mul8 (o, c + 8 * i, x);
    }
    __m128i q = q_out16 (o, v[0], NV > 1 ? v[1] : v[0]);
    gint8 *row = out + r * ldo + c;
    if (n == 16)
      _mm_storeu_si128 ((__m128i *) row, q);
    else if (n == 8)
      _mm_storel_epi64 ((__m128i *) row, q);
    else {
      gint8 tmp[16];
      _mm_storeu_si128 ((__m128i *) tmp, q);
      memcpy (row, tmp, n);
    }
  }
}

/* One 8-column panel (qkernels.h, ConyQPanels8) of @blocks blocks of QROWS rows of
 * prepared inputs (@u: bytes, @u16: int16; @blk values per block), one accumulator per
 * row, in assembly; the panel's pointers read once. */
CONY_TARGET_V3 static void
gemm8_blocks (const ConyQGemm *g, guint p, const guint8 *u, const gint16 *u16, gsize blocks,
    gsize blk, gint8 *out, gsize ldo)
{
  ConyQPanel pn = cony_qpanel (g, p);
  const __m256i one = _mm256_set1_epi16 (1);
  for (gsize k = 0; k < blocks; k++, u += blk, u16 += blk, out += QROWS * ldo) {
    __m256i b = _mm256_loadu_si256 ((const __m256i *) pn.bias);
    __m256i a0 = b, a1 = b, a2 = b, a3 = b, a4 = b, a5 = b;
    const gint8 *w8 = pn.w8;
    for (guint i = 0; i < pn.n8; i++, w8 += 32) {
      __m256i w = _mm256_loadu_si256 ((const __m256i *) w8);
      const guint8 *a = u + (gsize) QROWS * 4 * pn.idx[i];
      _mm_prefetch ((const char *) (w8 + PREFETCH), _MM_HINT_T0);
      __asm__(BYTE_ROW ("0", "a0") BYTE_ROW ("4", "a1") BYTE_ROW ("8", "a2") BYTE_ROW ("12", "a3")
                  BYTE_ROW ("16", "a4") BYTE_ROW ("20", "a5")
              : ACC6
              : [a] "r"(a), [w] "x"(w), [one] "x"(one), "m"(*(const guint8 (*)[24]) a)
              : "xmm14");
    }
    const gint16 *w16 = pn.w16;
    for (guint i = pn.n8; i < pn.nq; i++, w16 += 32) {
      __m256i w0 = _mm256_loadu_si256 ((const __m256i *) w16);
      __m256i w1 = _mm256_loadu_si256 ((const __m256i *) (w16 + 16));
      const gint16 *a = u16 + (gsize) QROWS * 4 * pn.idx[i];
      _mm_prefetch ((const char *) (w16 + PREFETCH / 2), _MM_HINT_T0);
      __asm__(WORD_ROW ("0", "4", "a0") WORD_ROW ("8", "12", "a1") WORD_ROW ("16", "20",
          "a2") WORD_ROW ("24", "28", "a3") WORD_ROW ("32", "36", "a4") WORD_ROW ("40", "44", "a5")
              : ACC6
              : [a] "r"(a), [w0] "x"(w0), [w1] "x"(w1), "m"(*(const gint16 (*)[24]) a)
              : "xmm14", "xmm15");
    }
    /* all requantised before the first store, which may alias g's tables (int8): they
     * are read once */
    guint c = 8 * p;
    __m128i q0 = requant8x2 (g, c, a0, a1), q1 = requant8x2 (g, c, a2, a3);
    __m128i q2 = requant8x2 (g, c, a4, a5);
    put8x2 (g, c, q0, TRUE, out, ldo);
    put8x2 (g, c, q1, TRUE, out + 2 * ldo, ldo);
    put8x2 (g, c, q2, TRUE, out + 4 * ldo, ldo);
  }
}

/* The int16 quads of panel @pn on @MR rows of @u16 into @acc: two vpmaddwd a row. */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) void
word_quads (const ConyQPanel *pn, const gint16 *u16, int MR, __m256i *acc)
{
  const gint16 *w16 = pn->w16;
  for (guint i = pn->n8; i < pn->nq; i++, w16 += 32) {
    __m256i w0 = _mm256_loadu_si256 ((const __m256i *) w16);
    __m256i w1 = _mm256_loadu_si256 ((const __m256i *) (w16 + 16));
    const gint16 *a = u16 + (gsize) QROWS * 4 * pn->idx[i];
    for (int r = 0; r < MR; r++) {
      gint32 v0, v1;
      memcpy (&v0, a + 4 * r, sizeof v0);
      memcpy (&v1, a + 4 * r + 2, sizeof v1);
      acc[r] = _mm256_add_epi32 (acc[r], _mm256_madd_epi16 (_mm256_set1_epi32 (v0), w0));
      acc[r] = _mm256_add_epi32 (acc[r], _mm256_madd_epi16 (_mm256_set1_epi32 (v1), w1));
    }
  }
}

/* @MR rows' accumulators of panel @p requantised into @out (row stride @ldo). */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) void
store_rows (const ConyQGemm *g, guint p, const __m256i *acc, int MR, gint8 *out, gsize ldo)
{
  for (int r = 0; r < MR; r += 2)
    put8x2 (g, 8 * p, requant8x2 (g, 8 * p, acc[r], acc[MIN (r + 1, MR - 1)]), r + 1 < MR,
        out + r * ldo, ldo);
}

/* The last @MR (< QROWS) rows, the same arithmetic in intrinsics (inlined for each
 * constant MR, so the accumulators stay in registers). */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) void
gemm8_tail (const ConyQGemm *g, guint p, const guint8 *u, const gint16 *u16, int MR, gint8 *out,
    gsize ldo)
{
  ConyQPanel pn = cony_qpanel (g, p);
  const __m256i one = _mm256_set1_epi16 (1);
  __m256i acc[QROWS];
  for (int r = 0; r < MR; r++)
    acc[r] = _mm256_loadu_si256 ((const __m256i *) pn.bias);
  const gint8 *w8 = pn.w8;
  for (guint i = 0; i < pn.n8; i++, w8 += 32) {
    __m256i w = _mm256_loadu_si256 ((const __m256i *) w8);
    const guint8 *a = u + (gsize) QROWS * 4 * pn.idx[i];
    for (int r = 0; r < MR; r++) {
      gint32 v;
      memcpy (&v, a + 4 * r, sizeof v);
      __m256i t = _mm256_maddubs_epi16 (_mm256_set1_epi32 (v), w);
      acc[r] = _mm256_add_epi32 (acc[r], _mm256_madd_epi16 (t, one));
    }
  }
  word_quads (&pn, u16, MR, acc);
  store_rows (g, p, acc, MR, out, ldo);
}

/* The 9 products' sums of 16 channels of the window whose first tap is at @px (taps at
 * @off) with their tap pairs @w (ConyQDw's w2) plus their bias @bias: the first 8
 * channels in *@lo, the others in *@hi. */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) void
dw16_at (const gint16 *w, const gint32 *bias, const gint8 *px, const gsize *off, __m256i *lo,
    __m256i *hi)
{
  __m256i a0 = _mm256_setzero_si256 (), a1 = a0;
  for (guint k = 0; k < 9; k += 2, w += 32) {
    __m256i v0 = _mm256_cvtepi8_epi16 (_mm_loadu_si128 ((const __m128i *) (px + off[k])));
    __m256i v1 = k < 8
        ? _mm256_cvtepi8_epi16 (_mm_loadu_si128 ((const __m128i *) (px + off[k + 1])))
        : _mm256_setzero_si256 ();
    a0 = _mm256_add_epi32 (a0,
        _mm256_madd_epi16 (_mm256_unpacklo_epi16 (v0, v1),
            _mm256_loadu_si256 ((const __m256i *) w)));
    a1 = _mm256_add_epi32 (a1,
        _mm256_madd_epi16 (_mm256_unpackhi_epi16 (v0, v1),
            _mm256_loadu_si256 ((const __m256i *) (w + 16))));
  }
  *lo = _mm256_add_epi32 (_mm256_permute2x128_si256 (a0, a1, 0x20),
      _mm256_loadu_si256 ((const __m256i *) bias));
  *hi = _mm256_add_epi32 (_mm256_permute2x128_si256 (a0, a1, 0x31),
      _mm256_loadu_si256 ((const __m256i *) (bias + 8)));
}

/* dw16_at's sums @lo and @hi of channels @c..c+15 requantised by @o into @dst: the short
 * rounding on its constants @k (two QSmall8) where @small, else q_mul8's. */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) void
dw16_put (const ConyQOut *o, const gboolean small, const QSmall8 *k, guint c, __m256i lo,
    __m256i hi, gint8 *dst)
{
  __m256i a = small ? q_mul8_small_k (&k[0], lo) : q_mul8 (o, c, lo);
  __m256i b = small ? q_mul8_small_k (&k[1], hi) : q_mul8 (o, c + 8, hi);
  _mm_storeu_si128 ((__m128i *) dst, q_out16 (o, a, b));
}

/* Channels @c..c+15 of output rows @y0..y1-1 (dw16_at), each pixel requantised after the
 * next pixel's products, as dw32_channels: the group's weights and rounding constants
 * stay at fixed places while the pixels go by. (@small: the short rounding, a constant.) */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) void
dw16_channels (const ConyQDw *d, const gint8 *in, gsize row, const gsize *off, guint y0, guint y1,
    guint ow, guint stride, guint c, gint8 *out, const gboolean small)
{
  /* local copies: stores through int8 may alias d's tables */
  const ConyQOut o = d->out;
  const gint16 *w = d->w2 + (gsize) (c / 16) * 5 * 32;
  const gint32 *bias = d->bias + c;
  QSmall8 k[2];
  if (small)
    k[0] = q_small8 (&o, c), k[1] = q_small8 (&o, c + 8);
  guint C = d->C;
  __m256i prev_lo = _mm256_setzero_si256 (), prev_hi = prev_lo;
  gint8 *prev = NULL; /* where the sums kept go */
  for (guint y = y0; y < y1; y++) {
    const gint8 *line = in + (gsize) y * stride * row;
    gint8 *ox = out + (gsize) y * ow * C + c;
    for (guint x = 0; x < ow; x++, ox += C) {
      __m256i lo, hi;
      dw16_at (w, bias, line + (gsize) x * stride * C + c, off, &lo, &hi);
      if (prev)
        dw16_put (&o, small, k, c, prev_lo, prev_hi, prev);
      prev_lo = lo, prev_hi = hi, prev = ox;
    }
  }
  if (prev)
    dw16_put (&o, small, k, c, prev_lo, prev_hi, prev);
}

/* Channels @c0.. of the depthwise layer (cony_qdw_avx2), @c0 a multiple of 16: 16 at a
 * time over bands of output rows (dw16_channels), the channel groups taking turns on a
 * band; a rest of fewer than 16 by the portable loop's arithmetic. */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) void
dw16_layer (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow, guint stride,
    guint c0, gint8 *out, gint32 *acc)
{
  guint C = d->C, C16 = C / 16 * 16;
  gsize row = (gsize) in_w * C, off[10];
  for (guint k = 0; k < 9; k++)
    off[k] = (k / 3) * row + (k % 3) * C;
  guint band = (guint) MAX (1, CONY_QDW_BAND_BYTES / (stride * row));
  for (guint y0 = 0; y0 < oh; y0 += band) {
    guint y1 = MIN (oh, y0 + band);
    for (guint c = c0; c < C16; c += 16)
      if (d->small_acc)
        dw16_channels (d, in, row, off, y0, y1, ow, stride, c, out, TRUE);
      else
        dw16_channels (d, in, row, off, y0, y1, ow, stride, c, out, FALSE);
  }
  if (C16 < C)
    for (guint y = 0; y < oh; y++)
      for (guint x = 0; x < ow; x++)
        cony_qdw_channels (d, in + ((gsize) y * stride * in_w + (gsize) x * stride) * C, row, C16,
            out + ((gsize) y * ow + x) * C, acc);
}

/* The depthwise layer, 16 channels at a time (dw16_layer): the taps in pairs, each
 * pair's two input vectors widened to int16 and interleaved (unpack), times the pair's
 * weights by vpmaddwd (|x| <= 128, |w - zp| <= 255: exact in int32; the input zero point
 * is in the bias), which leaves channels 0-3, 8-11 in one accumulator and 4-7, 12-15 in
 * the other until one lane swap; then requantised and packed. */
CONY_TARGET_V3 void
cony_qdw_avx2 (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow, guint stride,
    gint8 *out, gint32 *acc)
{
  dw16_layer (d, in, in_w, oh, ow, stride, 0, out, acc);
}

/* Row @src's values from @k on (of @K, zero up to @Kq) as u = x + 128, bytes into @u and
 * (@u16 not NULL) int16 into @u16 from @at (its place in the block, QROWS above), a quad
 * at a time. */
CONY_TARGET_V3 static void
prepare_row_from (const gint8 *src, guint k, guint K, guint Kq, gsize at, guint8 *u, gint16 *u16)
{
  gsize step = QROWS * 4;
  for (; k + 4 <= K; k += 4, at += step) {
    guint32 v;
    memcpy (&v, src + k, sizeof v);
    v ^= 0x80808080u;
    memcpy (u + at, &v, sizeof v);
    if (u16)
      _mm_storel_epi64 ((__m128i *) (u16 + at), _mm_cvtepu8_epi16 (_mm_cvtsi32_si128 ((int) v)));
  }
  for (guint t = 0; k < Kq; k++, t++) {
    guint8 v = k < K ? (guint8) (src[k] ^ 0x80) : 0;
    u[at + t] = v;
    if (u16)
      u16[at + t] = v;
  }
}

/* The first @n (2 or 4) quads of the QROWS rows' values @r (+ 128 already), 4 quads a
 * vector, into the layout at @u and (@u16 not NULL) @u16: quad q's rows 0-3 are one
 * 16-byte vector after unpacking, its rows 4-5 the half of another. */
CONY_TARGET_V3 static inline void
interleave_quads (const __m128i *r, int n, guint8 *u, gint16 *u16)
{
  for (int h = 0; h < n / 2; h++) {
    __m128i a = h ? _mm_unpackhi_epi32 (r[0], r[1]) : _mm_unpacklo_epi32 (r[0], r[1]);
    __m128i b = h ? _mm_unpackhi_epi32 (r[2], r[3]) : _mm_unpacklo_epi32 (r[2], r[3]);
    __m128i c = h ? _mm_unpackhi_epi32 (r[4], r[5]) : _mm_unpacklo_epi32 (r[4], r[5]);
    for (int j = 0; j < 2; j++) {
      gsize at = (gsize) QROWS * 4 * (2 * h + j);
      __m128i rows03 = j ? _mm_unpackhi_epi64 (a, b) : _mm_unpacklo_epi64 (a, b);
      __m128i rows45 = j ? _mm_unpackhi_epi64 (c, c) : c;
      _mm_storeu_si128 ((__m128i *) (u + at), rows03);
      _mm_storel_epi64 ((__m128i *) (u + at + 16), rows45);
      if (u16) {
        _mm256_storeu_si256 ((__m256i *) (u16 + at), _mm256_cvtepu8_epi16 (rows03));
        _mm_storeu_si128 ((__m128i *) (u16 + at + 16), _mm_cvtepu8_epi16 (rows45));
      }
    }
  }
}

/* @M rows of @K int8 as u = x + 128 in the kernel's layout (QROWS above): bytes into
 * @u, int16 into @u16 (NULL: none), zero beyond K and M. Full blocks take 16 values (then
 * 8) of each of their rows at a time; the rest a quad at a time. */
CONY_TARGET_V3 static void
prepare_rows (const gint8 *x, gsize ldx, gsize M, guint K, guint Kq, guint8 *u, gint16 *u16)
{
  gsize blocks = (M + QROWS - 1) / QROWS, full = M / QROWS;
  const __m128i flip = _mm_set1_epi8 ((char) 0x80);
  for (gsize b = 0; b < full; b++) {
    const gint8 *src = x + b * QROWS * ldx;
    guint8 *ub = u + b * QROWS * Kq;
    gint16 *ub16 = u16 ? u16 + b * QROWS * Kq : NULL;
    __m128i r[QROWS];
    guint k = 0;
    for (guint n; k + 8 <= K; k += n) {
      n = k + 16 <= K ? 16 : 8;
      for (int i = 0; i < QROWS; i++) {
        const __m128i *p = (const __m128i *) (src + i * ldx + k);
        r[i] = _mm_xor_si128 (n == 16 ? _mm_loadu_si128 (p) : _mm_loadl_epi64 (p), flip);
      }
      interleave_quads (r, n / 4, ub + QROWS * k, ub16 ? ub16 + QROWS * k : NULL);
    }
    if (k < Kq)
      for (int i = 0; i < QROWS; i++)
        prepare_row_from (src + i * ldx, k, K, Kq, QROWS * k + 4 * i, ub, ub16);
  }
  if (M % QROWS) {
    gsize last = (blocks - 1) * QROWS * Kq;
    memset (u + last, 0, QROWS * Kq);
    if (u16)
      memset (u16 + last, 0, QROWS * Kq * sizeof (gint16));
    for (gsize r = full * QROWS; r < M; r++)
      prepare_row_from (x + r * ldx, 0, K, Kq, last + (r % QROWS) * 4, u, u16);
  }
}

/* Whether some quad of @g is int16: the prepared inputs then also need their int16 copy. */
static inline gboolean
has_words (const ConyQGemm *g)
{
  return g->p8.start16[cony_qgemm_panels (g)] > 0;
}

/* Where @M prepared rows go in @scratch (cony_qgemm_scratch): the int16 copy at *@u16 (twice
 * the bytes' size), the bytes after it at *@u; returns the values of a block of QROWS rows. */
static inline gsize
inputs_layout (const ConyQGemm *g, gsize M, gint16 *scratch, guint8 **u, gint16 **u16)
{
  gsize blk = (gsize) QROWS * g->p8.Kq, blocks = (M + QROWS - 1) / QROWS;
  *u16 = scratch;
  *u = (guint8 *) (scratch + blocks * blk);
  return blk;
}

/* @M rows of @x prepared in @scratch (prepare_rows) as inputs_layout places them, the
 * int16 copy only where has_words; returns the values of a block of QROWS rows. */
CONY_TARGET_V3 static inline gsize
prepare_inputs (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint16 *scratch, guint8 **u,
    gint16 **u16)
{
  gsize blk = inputs_layout (g, M, scratch, u, u16);
  prepare_rows (x, ldx, M, g->K, g->p8.Kq, *u, has_words (g) ? *u16 : NULL);
  return blk;
}

/* ConyQGemm's row corrections (row_scale times the sum of a row's u) of the @M rows
 * prepared at @u
 * (@blk bytes a block): in a block, quad q's QROWS rows are dwords 0-5 of the 32 bytes at
 * 4 QROWS q, so vpmaddubsw and vpmaddwd by ones sum each row's quad in its own dword
 * (u <= 255: no saturation); rows past M are zeros there. (The last quad's load reads 8
 * bytes past the inputs, into the scratch's slack.) */
CONY_TARGET_V3 void
cony_qgemm_row_corrections_avx2 (const ConyQGemm *g, gsize M, const guint8 *u, gsize blk,
    gint32 *corr)
{
  const __m256i ones8 = _mm256_set1_epi8 (1), ones16 = _mm256_set1_epi16 (1);
  const __m256i scale = _mm256_set1_epi32 (g->row_scale);
  guint nq = g->p8.Kq / 4;
  for (gsize b = 0; b < (M + QROWS - 1) / QROWS; b++, u += blk) {
    __m256i s = _mm256_setzero_si256 ();
    for (guint q = 0; q < nq; q++) {
      __m256i v = _mm256_loadu_si256 ((const __m256i *) (u + (gsize) QROWS * 4 * q));
      s = _mm256_add_epi32 (s, _mm256_madd_epi16 (_mm256_maddubs_epi16 (v, ones8), ones16));
    }
    gint32 sums[8];
    _mm256_storeu_si256 ((__m256i *) sums, _mm256_mullo_epi32 (s, scale));
    memcpy (corr + b * QROWS, sums, QROWS * sizeof (gint32));
  }
}

/* CALL (n) for the @left (< QROWS) rows after the full blocks, n a constant (so that
 * the always-inline row functions keep their accumulators in registers). */
#define TAIL_ROWS(left, CALL) \
  switch (left) { \
    case 1: CALL (1); break; \
    case 2: CALL (2); break; \
    case 3: CALL (3); break; \
    case 4: CALL (4); break; \
    case 5: CALL (5); break; \
    default: break; \
  }

CONY_TARGET_V3 void
cony_qgemm_avx2 (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint8 *out, gsize ldo,
    gint16 *scratch)
{
  /* bytes only where vpmaddubsw cannot saturate; panels of 8 */
  g_assert (!g->bytes_int8 && g->p8.width == 8 && g->p8.word == 8);
  guint8 *u;
  gint16 *u16;
  gsize blk = prepare_inputs (g, M, x, ldx, scratch, &u, &u16);
  for (guint p = 0; p < cony_qgemm_panels (g); p++) {
    gsize b = M / QROWS, r = b * QROWS;
    gemm8_blocks (g, p, u, u16, b, blk, out, ldo);
#define TAIL(n) gemm8_tail (g, p, u + b * blk, u16 + b * blk, n, out + r * ldo, ldo)
    TAIL_ROWS (M - r, TAIL);
#undef TAIL
  }
}

/* Whether [lo, hi] is narrower than int8, so that a clamp after vpmovsdb changes
 * something (ReLU6 and linear layers keep the whole range: no clamp needed). */
static inline gboolean
q_out_clamps (const ConyQOut *o)
{
  return o->lo > -128 || o->hi < 127;
}

/* pack64_small on 256-bit registers: four vectors of sums @acc requantised by the short
 * rounding on their constants @k, the zero point added to the int16 (q_out16), packed to
 * 32 bytes, 128-bit lane l holding lane l of each vector in turn. */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) __m256i
pack32_small (const ConyQOut *o, const QSmall8 *k, const __m256i acc[4], gboolean clamp)
{
  const __m256i zp = _mm256_set1_epi16 ((gint16) o->zp);
  __m256i r[4];
  for (int j = 0; j < 4; j++)
    r[j] = q_mul8_small_k (&k[j], acc[j]);
  __m256i b = _mm256_packs_epi16 (_mm256_adds_epi16 (_mm256_packs_epi32 (r[0], r[1]), zp),
      _mm256_adds_epi16 (_mm256_packs_epi32 (r[2], r[3]), zp));
  if (clamp)
    b = _mm256_min_epi8 (_mm256_max_epi8 (b, _mm256_set1_epi8 ((gint8) o->lo)),
        _mm256_set1_epi8 ((gint8) o->hi));
  return b;
}

/* vpdpbusd emulated exactly: the even and the odd bytes of each int16 widened apart (u
 * unsigned, w signed), so that each vpmaddwd sums two of a lane's four products. */
CONY_TARGET_V3 static inline __m256i
dot4_emulated (__m256i acc, __m256i u, __m256i w)
{
  const __m256i low = _mm256_set1_epi16 (0x00FF);
  __m256i even = _mm256_madd_epi16 (_mm256_and_si256 (u, low),
      _mm256_srai_epi16 (_mm256_slli_epi16 (w, 8), 8));
  __m256i odd = _mm256_madd_epi16 (_mm256_srli_epi16 (u, 8), _mm256_srai_epi16 (w, 8));
  return _mm256_add_epi32 (acc, _mm256_add_epi32 (even, odd));
}

#define DOT4_LANES 8
#define DOT4_VECS 2
#define DOT4_NAME(x) x##_dot4_emulated
#define DOT4_TARGET CONY_TARGET_V3
#define DOT4(a, u, w) dot4_emulated (a, u, w)
#define DOT2(a, x, w) _mm256_add_epi32 (a, _mm256_madd_epi16 (x, w))
#include "qkernels-dot4.h"

#ifdef CONY_CPU_VNNI
#define DOT4_LANES 8
#define DOT4_VECS 2
#define DOT4_NAME(x) x##_avxvnni
#define DOT4_TARGET __attribute__ ((target ("avx2,fma,f16c,avxvnni")))
#define DOT4(a, u, w) _mm256_dpbusd_avx_epi32 (a, u, w)
/* (not vpdpwssd: with it gcc spills the accumulators of the byte loop) */
#define DOT2(a, x, w) _mm256_add_epi32 (a, _mm256_madd_epi16 (x, w))
#include "qkernels-dot4.h"

#define CONY_TARGET_AVX512 \
  __attribute__ ((target ("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

/* q_mul16's constants of channels @c..c+15 (read once where a loop reuses them). */
typedef struct {
  __m512i lshift, mult_even, mult_odd, rmask, rhalf, rshift;
  gboolean any_left;
} QLong16;

CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) QLong16
q_long16 (const ConyQOut *o, guint c)
{
  return (QLong16){ o->any_left ? _mm512_loadu_si512 (o->lshift + c) : _mm512_setzero_si512 (),
    _mm512_loadu_si512 (o->mult + c), _mm512_loadu_si512 (o->mult + c + 1),
    _mm512_loadu_si512 (o->rmask + c), _mm512_loadu_si512 (o->rhalf + c),
    _mm512_loadu_si512 (o->rshift + c), o->any_left };
}

/* q_mul8 on 16 lanes, on the constants @k: the comparison's mask adds the rounding
 * division's one. */
CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) __m512i
q_mul16_k (const QLong16 *k, __m512i x)
{
  if (k->any_left)
    x = _mm512_sllv_epi32 (x, k->lshift);
  const __m512i nudge = _mm512_set1_epi64 (1 << 30);
  __m512i even = _mm512_add_epi64 (_mm512_mul_epi32 (x, k->mult_even), nudge);
  __m512i odd = _mm512_add_epi64 (_mm512_mul_epi32 (_mm512_srli_epi64 (x, 32), k->mult_odd), nudge);
  __m512i hi = _mm512_mask_blend_epi32 (0xAAAA, _mm512_srli_epi64 (even, 31),
      _mm512_slli_epi64 (odd, 1));
  __m512i rem = _mm512_and_si512 (hi, k->rmask);
  __m512i thr = _mm512_sub_epi32 (k->rhalf, _mm512_srai_epi32 (hi, 31));
  __m512i r = _mm512_srav_epi32 (hi, k->rshift);
  return _mm512_mask_sub_epi32 (r, _mm512_cmpgt_epi32_mask (rem, thr), r, _mm512_set1_epi32 (-1));
}

/* q_mul8 on 16 lanes (channels c..c+15 of @o). */
CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) __m512i
q_mul16 (const ConyQOut *o, guint c, __m512i x)
{
  QLong16 k = q_long16 (o, c);
  return q_mul16_k (&k, x);
}

/* q_mul16_small's constants of channels @c..c+15: the multipliers of the even and of the
 * odd channels, their nudges, the shifts. */
typedef struct {
  __m512i mult_even, mult_odd, nudge_even, nudge_odd, rshift;
} QSmall16;

CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) QSmall16
q_small16 (const ConyQOut *o, guint c)
{
  return (QSmall16){ _mm512_loadu_si512 (o->mult + c), _mm512_loadu_si512 (o->mult + c + 1),
    _mm512_loadu_si512 (o->nudge16 + c), _mm512_loadu_si512 (o->nudge16 + c + 8),
    _mm512_loadu_si512 (o->rshift + c) };
}

/* q_mul8_small on 16 lanes plus the zero point (ConyQGemm's small_acc: |x| < 2^29, every
 * shift right by 1 to 23): 2x times the multiplier puts floor((x m + 2^30) / 2^31) plus
 * the rounding's 2^(rs-1) and zp 2^rs (o->nudge16: their sum times 2^32, plus 2^31) in
 * the high half of each 64-bit lane, whole (below 2^31 in magnitude); one in-lane
 * shuffle, masked to the even lanes, gathers the even channels' among the odd ones';
 * then the sign's -1 and the shift. The zero point's add included, only the two
 * vpmuldq compete with vpdpbusd for its two pipes on Zen 5 (a two-source permute there
 * did too: the 32-deep layer of YAMNet is 3 % faster without it). On the constants @k
 * (q_small16). */
CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) __m512i
q_mul16_small_k (const QSmall16 *k, __m512i x)
{
  __m512i x2 = _mm512_add_epi32 (x, x);
  __m512i even = _mm512_add_epi64 (_mm512_mul_epi32 (x2, k->mult_even), k->nudge_even);
  __m512i odd = _mm512_add_epi64 (_mm512_mul_epi32 (_mm512_srli_epi64 (x2, 32), k->mult_odd),
      k->nudge_odd);
  __m512i hi = _mm512_mask_shuffle_epi32 (odd, 0x5555, even, _MM_PERM_CDAB);
  return _mm512_srav_epi32 (_mm512_add_epi32 (hi, _mm512_srai_epi32 (x, 31)), k->rshift);
}

CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) __m512i
q_mul16_small (const ConyQOut *o, guint c, __m512i x)
{
  QSmall16 k = q_small16 (o, c);
  return q_mul16_small_k (&k, x);
}

/* q_out16 on one vector of 16 as one clamp: q_out16 saturates to int16, adds the zero
 * point, saturates to int8 and clamps to [lo, hi] (within int8), which for lo <= hi is
 * clamp (v, lo - zp, hi - zp) + zp (this, in int32); then the bytes (q_out16_zmm). */
CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) __m512i
q_clamp16 (const ConyQOut *o, __m512i v)
{
  v = _mm512_max_epi32 (v, _mm512_set1_epi32 (o->lo - o->zp));
  v = _mm512_min_epi32 (v, _mm512_set1_epi32 (o->hi - o->zp));
  return _mm512_add_epi32 (v, _mm512_set1_epi32 (o->zp));
}

CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) __m128i
q_out16_zmm (const ConyQOut *o, __m512i v)
{
  return _mm512_cvtepi32_epi8 (q_clamp16 (o, v));
}

/* One input's half of the add on 16 int8 (q_add_half on 16 lanes, constants @k). */
CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) __m512i
q_add_half16 (const QLong16 *k, gint32 zp, __m128i x)
{
  __m512i v = _mm512_sub_epi32 (_mm512_cvtepi8_epi32 (x), _mm512_set1_epi32 (zp));
  return q_mul16_k (k, _mm512_slli_epi32 (v, CONY_Q_ADD_LEFT_SHIFT));
}

/* cony_qadd_avx2 on 16 lanes, the three multipliers' constants in registers (ConyQAddK's
 * are per tensor: every lane holds the same); a tail of fewer than 16 takes the AVX2
 * kernel. */
CONY_TARGET_AVX512 void
cony_qadd_avx512 (const ConyQAddK *k, const gint8 *a, const gint8 *b, gsize n, gint8 *out)
{
  const QLong16 m1 = q_long16 (&k->m1, 0), m2 = q_long16 (&k->m2, 0), mo = q_long16 (&k->mo, 0);
  const ConyQOut o = k->mo; /* a local copy: see put16 */
  gint32 zp1 = k->add.zp1, zp2 = k->add.zp2;
  gsize j = 0;
  for (; j + 16 <= n; j += 16) {
    __m512i s = _mm512_add_epi32 (q_add_half16 (&m1, zp1,
                                      _mm_loadu_si128 ((const __m128i *) (a + j))),
        q_add_half16 (&m2, zp2, _mm_loadu_si128 ((const __m128i *) (b + j))));
    _mm_storeu_si128 ((__m128i *) (out + j), q_out16_zmm (&o, q_mul16_k (&mo, s)));
  }
  if (j < n)
    cony_qadd_avx2 (k, a + j, b + j, n - j, out + j);
}

/* q_out16_zmm after q_mul16_small (the zero point added): the saturating conversion to
 * int8 (vpmovsdb) is the clamp to -128..127, then [lo, hi] on the bytes where @clamp (a
 * constant of the caller: q_out_clamps says when it is needed). */
CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) __m128i
q_out16_small_clamp (const ConyQOut *o, __m512i v, const gboolean clamp)
{
  __m128i q = _mm512_cvtsepi32_epi8 (v);
  if (!clamp)
    return q;
  q = _mm_max_epi8 (q, _mm_set1_epi8 ((gint8) o->lo));
  return _mm_min_epi8 (q, _mm_set1_epi8 ((gint8) o->hi));
}

CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) __m128i
q_out16_small (const ConyQOut *o, __m512i v)
{
  return q_out16_small_clamp (o, v, TRUE);
}

/* 16 accumulators requantised by the short rounding on the constants @k of their
 * columns (q_small16) and stored at @dst. */
CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) void
put16_small_k (const ConyQOut *o, const QSmall16 *k, __m512i acc, gint8 *dst, const gboolean clamp)
{
  _mm_storeu_si128 ((__m128i *) dst, q_out16_small_clamp (o, q_mul16_small_k (k, acc), clamp));
}

/* A block's accumulators whose requantisation waits for the next block's products,
 * of the same panel or the next (512-bit kernels, whole panels, the short rounding, no
 * clamp): in a pass after each block's products the rounding hardly overlapped them;
 * one vector a quad during the next block's, it does (YAMNet's 512-deep layers: 13.2
 * to 12.7 us on Zen 5). Accumulator j is row j / 4's vector j % 4. */
typedef struct {
  __m512i acc[QROWS * 4];
  QSmall16 k[2][4];   /* the short rounding's constants of two panels' four vectors, */
  const QSmall16 *kp; /* those of the kept accumulators */
  const QSmall16 *kn; /* and those of the panel being computed */
  const ConyQOut *o;  /* their requantisation */
  gint8 *out;         /* the kept block's first row, at its panel's first column */
  gsize ldo;
  guint count; /* accumulators kept: 4 times the block's rows, or 0 */
} QDefer16;

CONY_TARGET_AVX512 static inline void
qdefer16_init (QDefer16 *d, const ConyQOut *o, gsize ldo)
{
  d->kp = d->kn = d->k[0];
  d->o = o;
  d->out = NULL;
  d->ldo = ldo;
  d->count = 0;
}

/* The constants of the panel starting at column @c0, in the slot the kept accumulators
 * do not use. */
CONY_TARGET_AVX512 static inline void
qdefer16_panel (QDefer16 *d, const ConyQOut *o, guint c0)
{
  QSmall16 *k = d->k[d->kp == d->k[0] ? 1 : 0];
  for (int v = 0; v < 4; v++)
    k[v] = q_small16 (o, c0 + 16 * v);
  d->kn = k;
}

/* Accumulator @j of @d requantised and stored (put16_small_k, no clamp). */
CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) void
put_deferred16 (const QDefer16 *d, guint j)
{
  put16_small_k (d->o, &d->kp[j % 4], d->acc[j], d->out + (j / 4) * d->ldo + 16 * (j % 4), FALSE);
}

/* Every accumulator still kept in @d requantised. */
CONY_TARGET_AVX512 static inline void
qdefer16_flush (QDefer16 *d)
{
  for (guint j = 0; j < d->count; j++)
    put_deferred16 (d, j);
  d->count = 0;
}

/* One row's 16 accumulators of columns @c..c+15 (all of them outputs) requantised by @o
 * into @out, with the short rounding where @small (ConyQGemm's small_acc). (The kernels
 * pass a local copy of their ConyQOut: their int8 stores could alias it, so its fields
 * would be loaded again for every vector.) */
CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) void
put16 (const ConyQOut *o, gboolean small, guint c, __m512i acc, gint8 *out)
{
  if (small) {
    QSmall16 k = q_small16 (o, c);
    put16_small_k (o, &k, acc, out + c, TRUE);
    return;
  }
  _mm_storeu_si128 ((__m128i *) (out + c), q_out16_zmm (o, q_mul16 (o, c, acc)));
}

/* @MR rows of @NV vectors of accumulators stored at @acc (row r's at 4 r), columns @c..
 * of @N, requantised into @out (@small: ConyQGemm's small_acc, the short rounding
 * q_mul16_small, else q_mul16 and the clamp of q_out16_zmm). A pass of its own after the
 * products, so that the short rounding's constants of the columns stay in registers:
 * with the 24 accumulators still live gcc reloaded and spilled them, and the rounding
 * took longer than the products of a 32-deep layer. 64 whole columns of a row are
 * packed to bytes by two saturating packs within 128-bit lanes and one dword permute
 * (the long rounding clamped to [lo - zp, hi - zp] first and the zero point added, so
 * that the packs' saturation changes nothing), clamped and stored at once. */
CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) void
put_rows16 (const ConyQOut *o, gboolean small, guint c, const __m512i *acc, gsize MR, const int NV,
    guint N, gint8 *out, gsize ldo)
{
  QSmall16 k[4];
  for (int i = 0; i < NV && small; i++)
    k[i] = q_small16 (o, c + 16 * i);
  const gboolean packed = NV == 4 && c + 64 <= N;
  const guint last = MIN (16, N - (c + 16 * (NV - 1))); /* columns of the last vector */
  for (gsize r = 0; r < MR; r++) {
    __m512i v[4];
    for (int i = 0; i < NV; i++) {
      __m512i x = acc[4 * r + i];
      v[i] = small ? q_mul16_small_k (&k[i], x) : q_clamp16 (o, q_mul16 (o, c + 16 * i, x));
    }
    gint8 *row = out + r * ldo + c;
    if (packed) {
      const __m512i order = _mm512_set_epi32 (15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
      __m512i b = _mm512_packs_epi16 (_mm512_packs_epi32 (v[0], v[1]),
          _mm512_packs_epi32 (v[2], v[3]));
      b = _mm512_permutexvar_epi32 (order, b);
      b = _mm512_max_epi8 (b, _mm512_set1_epi8 ((gint8) o->lo));
      _mm512_storeu_si512 (row, _mm512_min_epi8 (b, _mm512_set1_epi8 ((gint8) o->hi)));
      continue;
    }
    for (int i = 0; i < NV; i++) {
      /* vpmovsdb: the short rounding's saturation to int8; the long one is clamped */
      __m128i q = small ? q_out16_small (o, v[i]) : _mm512_cvtepi32_epi8 (v[i]);
      if (i + 1 < NV || last == 16)
        _mm_storeu_si128 ((__m128i *) (row + 16 * i), q);
      else
        _mm_mask_storeu_epi8 (row + 16 * i, (__mmask16) ((1u << last) - 1), q);
    }
  }
}

/* The weights (five tap pairs, the two halves of each) and the bias of channels @c..
 * c+31, held in registers while dw32 runs over every pixel. */
typedef struct {
  __m512i w[10], bias_lo, bias_hi;
} Dw32Chunk;

CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) Dw32Chunk
dw32_chunk (const ConyQDw *d, guint c)
{
  const gint16 *w = d->w4 + (gsize) (c / 32) * 5 * 64;
  Dw32Chunk k;
  for (int i = 0; i < 10; i++)
    k.w[i] = _mm512_loadu_si512 (w + 32 * i);
  k.bias_lo = _mm512_loadu_si512 (d->bias + c);
  k.bias_hi = _mm512_loadu_si512 (d->bias + c + 16);
  return k;
}

/* Channels @c..c+31 (weights @k) of the output pixel whose 3x3 window starts at @px
 * (taps at @off), dw16 on 512-bit registers: each unpack leaves channels 8 l + 0..3
 * (first sum) and 8 l + 4..7 (second) of 128-bit lane l; two lane shuffles put channels
 * c..c+15 in *@lo and c+16..c+31 in *@hi, the bias added. */
CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) void
dw32 (const Dw32Chunk *k, const gint8 *px, const gsize *off, guint c, __m512i *lo, __m512i *hi)
{
  __m512i a0 = _mm512_setzero_si512 (), a1 = a0;
  for (guint t = 0; t < 9; t += 2) {
    __m512i v0 = _mm512_cvtepi8_epi16 (_mm256_loadu_si256 ((const __m256i *) (px + off[t] + c)));
    __m512i v1 = t < 8
        ? _mm512_cvtepi8_epi16 (_mm256_loadu_si256 ((const __m256i *) (px + off[t + 1] + c)))
        : _mm512_setzero_si512 ();
    /* vpdpwssd: vpmaddwd and the sum in one */
    a0 = _mm512_dpwssd_epi32 (a0, _mm512_unpacklo_epi16 (v0, v1), k->w[t]);
    a1 = _mm512_dpwssd_epi32 (a1, _mm512_unpackhi_epi16 (v0, v1), k->w[t + 1]);
  }
  const __m512i first = _mm512_set_epi64 (11, 10, 3, 2, 9, 8, 1, 0);
  const __m512i second = _mm512_set_epi64 (15, 14, 7, 6, 13, 12, 5, 4);
  *lo = _mm512_add_epi32 (_mm512_permutex2var_epi64 (a0, first, a1), k->bias_lo);
  *hi = _mm512_add_epi32 (_mm512_permutex2var_epi64 (a0, second, a1), k->bias_hi);
}

/* Sums @lo and @hi of channels @c..c+31 requantised by @o into @dst (at channel @c):
 * the short rounding on its constants @s0 and @s1 where @small, else put16's. */
CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) void
dw32_put (const ConyQOut *o, gboolean small, const QSmall16 *s0, const QSmall16 *s1, guint c,
    __m512i lo, __m512i hi, gint8 *dst)
{
  if (small) {
    put16_small_k (o, s0, lo, dst, TRUE);
    put16_small_k (o, s1, hi, dst + 16, TRUE);
  } else {
    put16 (o, FALSE, c, lo, dst - c);
    put16 (o, FALSE, c + 16, hi, dst - c);
  }
}

/* Channels @c..c+31 of every output pixel (dw32), each pixel's sums requantised after
 * the next pixel's products: a pixel's sums and rounding are one chain of dependent
 * instructions, which the core overlaps with the next pixel's only where those come
 * first. The weights, bias and short rounding's constants stay in registers. */
CONY_TARGET_AVX512 static void
dw32_channels (const ConyQDw *d, const gint8 *in, gsize row, const gsize *off, guint oh, guint ow,
    guint stride, guint c, gint8 *out)
{
  const ConyQOut o = d->out; /* a local copy: see put16 */
  const gboolean small = d->small_acc;
  const Dw32Chunk k = dw32_chunk (d, c);
  const QSmall16 s0 = q_small16 (&o, c), s1 = q_small16 (&o, c + 16);
  guint C = d->C;
  __m512i prev_lo = _mm512_setzero_si512 (), prev_hi = prev_lo;
  gint8 *prev = NULL; /* where the sums kept go */
  for (guint y = 0; y < oh; y++) {
    const gint8 *line = in + (gsize) y * stride * row;
    gint8 *ox = out + (gsize) y * ow * C + c;
    for (guint x = 0; x < ow; x++, ox += C) {
      __m512i lo, hi;
      dw32 (&k, line + (gsize) x * stride * C, off, c, &lo, &hi);
      if (prev)
        dw32_put (&o, small, &s0, &s1, c, prev_lo, prev_hi, prev);
      prev_lo = lo, prev_hi = hi, prev = ox;
    }
  }
  if (prev)
    dw32_put (&o, small, &s0, &s1, c, prev_lo, prev_hi, prev);
}

/* Four vectors of sums @acc requantised by the short rounding on their constants @k and
 * packed to 64 bytes: 128-bit lane l of the result holds lane l of each vector in turn
 * (ConyQDw's w64 and ConyQGemm's w32 orders are made so that this is output order). */
CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) __m512i
pack64_small (const ConyQOut *o, const QSmall16 *k, const __m512i acc[4], gboolean clamp)
{
  __m512i r[4];
  for (int j = 0; j < 4; j++)
    r[j] = q_mul16_small_k (&k[j], acc[j]);
  __m512i b = _mm512_packs_epi16 (_mm512_packs_epi32 (r[0], r[1]), _mm512_packs_epi32 (r[2], r[3]));
  if (clamp)
    b = _mm512_min_epi8 (_mm512_max_epi8 (b, _mm512_set1_epi8 ((gint8) o->lo)),
        _mm512_set1_epi8 ((gint8) o->hi));
  return b;
}

/* Where a 6-row block's 48 dwords (quad q of row r, r = 0..5, q = 0..7) come from in
 * quad-major order (dword 6 q + r): vector v's lane l takes row pair (r / 2)'s lane
 * 8 (r % 2) + q. PREP_AB indexes rows 0-3 (two vectors, 32 lanes), PREP_C rows 4-5,
 * PREP_FROM_C the lanes that take them. */
static const gint32 PREP_AB[3][16] = { { 0, 8, 16, 24, 0, 0, 1, 9, 17, 25, 0, 0, 2, 10, 18, 26 },
  { 0, 0, 3, 11, 19, 27, 0, 0, 4, 12, 20, 28, 0, 0, 5, 13 },
  { 21, 29, 0, 0, 6, 14, 22, 30, 0, 0, 7, 15, 23, 31, 0, 0 } };
static const gint32 PREP_C[3][16] = { { 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 1, 9, 0, 0, 0, 0 },
  { 2, 10, 0, 0, 0, 0, 3, 11, 0, 0, 0, 0, 4, 12, 0, 0 },
  { 0, 0, 5, 13, 0, 0, 0, 0, 6, 14, 0, 0, 0, 0, 7, 15 } };
static const guint16 PREP_FROM_C[3] = { 0x0c30, 0x30c3, 0xc30c };

/* Rows @r and @r + 1's values @k..k+31 of the block at @src (row stride @ldx) as u =
 * x + 128, one vector. */
CONY_TARGET_AVX512 static inline __m512i
prep_pair (const gint8 *src, gsize ldx, int r, guint k)
{
  __m512i v = _mm512_inserti64x4 (_mm512_castsi256_si512 (
                                      _mm256_loadu_si256 ((const __m256i *) (src + r * ldx + k))),
      _mm256_loadu_si256 ((const __m256i *) (src + (r + 1) * ldx + k)), 1);
  return _mm512_xor_si512 (v, _mm512_set1_epi8 ((char) 0x80));
}

/* prepare_inputs for the 512-bit set: where every quad is bytes and K a multiple of 32,
 * a full block's 32 values a row at a time are one transpose of 6 x 8 dwords into
 * quad-major order, three vectors of two permutes each (PREP_AB, PREP_C), instead of
 * prepare_rows' 16 bytes a row; the last rows and every other product as prepare_inputs. */
CONY_TARGET_AVX512 static gsize
prepare_inputs_zmm (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint16 *scratch,
    guint8 **u, gint16 **u16)
{
  if (has_words (g) || g->K % 32 != 0)
    return prepare_inputs (g, M, x, ldx, scratch, u, u16);
  gsize blk = inputs_layout (g, M, scratch, u, u16), full = M / QROWS;
  __m512i ab[3], c[3];
  for (int v = 0; v < 3; v++) {
    ab[v] = _mm512_loadu_si512 (PREP_AB[v]);
    c[v] = _mm512_loadu_si512 (PREP_C[v]);
  }
  for (gsize b = 0; b < full; b++) {
    const gint8 *src = x + b * QROWS * ldx;
    guint8 *ub = *u + b * blk;
    for (guint k = 0; k < g->K; k += 32) {
      __m512i r01 = prep_pair (src, ldx, 0, k), r23 = prep_pair (src, ldx, 2, k);
      __m512i r45 = prep_pair (src, ldx, 4, k);
      for (int v = 0; v < 3; v++) {
        __m512i o = _mm512_permutex2var_epi32 (r01, ab[v], r23);
        o = _mm512_mask_permutexvar_epi32 (o, PREP_FROM_C[v], c[v], r45);
        _mm512_storeu_si512 (ub + QROWS * k + 64 * v, o);
      }
    }
  }
  if (M > full * QROWS)
    prepare_rows (x + full * QROWS * ldx, ldx, M - full * QROWS, g->K, g->p8.Kq, *u + full * blk,
        NULL);
  return blk;
}

/* The @n values (1 to 4) of a quad at @p, zeros after them. */
static inline gint32
quad_at (const gint8 *p, guint n)
{
  gint32 v = 0;
  if (n == 4)
    memcpy (&v, p, 4);
  else
    memcpy (&v, p, n);
  return v;
}

/* The quads at @q0 and @q1 (@n values each) as u = x + 128: the first in lanes 0-7, the
 * second in 8-15. */
CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) __m512i
k12_quads (const gint8 *q0, const gint8 *q1, guint n)
{
  gint32 a = quad_at (q0, n), b = quad_at (q1, n);
  __m512i v = _mm512_inserti64x4 (_mm512_set1_epi32 (a), _mm256_set1_epi32 (b), 1);
  return _mm512_xor_si512 (v, _mm512_set1_epi8 ((char) 0x80));
}

/* Rows @rows (1 or 2) of packed outputs @b at @dst, @ldo apart. */
CONY_TARGET_AVX512 static inline __attribute__ ((always_inline)) void
k12_store (__m512i b, guint rows, gint8 *dst, gsize ldo)
{
  if (rows == 2 && ldo == 32) {
    _mm512_storeu_si512 (dst, b);
    return;
  }
  _mm256_storeu_si256 ((__m256i *) dst, _mm512_castsi512_si256 (b));
  if (rows == 2)
    _mm256_storeu_si256 ((__m256i *) (dst + ldo), _mm512_extracti64x4_epi64 (b, 1));
}

/* Where row @i of a ConyQRows lies. */
static inline const gint8 *
qrows_at (const ConyQRows *x, gsize i)
{
  return x->x + (i / x->width) * x->row_step + (i % x->width) * x->step;
}

/* The product of ConyQGemm's w32 (K <= 12, N = 32, the short rounding) with the rows @x,
 * two rows at a time: each quad of the two rows broadcast to its half of a vector, one
 * vpdpbusd per quad and vector of columns, each pair requantised after the next pair's
 * products and stored packed. The general kernel's blocks of six rows and 64 columns
 * leave half their vectors empty here and round a block after its few products:
 * YAMNet's first layer. A last quad shorter than four is read value by value, so that
 * nothing past a row's K values is read. */
CONY_TARGET_AVX512 void
cony_qgemm_rows_avx512 (const ConyQGemm *g, gsize M, const ConyQRows *x, gint8 *out, gsize ldo)
{
  g_assert (cony_qgemm_rows_ok (g));
  const ConyQOut o = g->out32; /* a local copy: see put16 */
  const gboolean clamp = q_out_clamps (&o);
  const guint nq = (g->K + 3) / 4;
  __m512i w[12];
  for (guint i = 0; i < 4 * nq; i++)
    w[i] = _mm512_loadu_si512 (g->w32 + (gsize) i * 64);
  QSmall16 k[4];
  for (int j = 0; j < 4; j++)
    k[j] = q_small16 (&o, 16 * j);
  __m512i prev[4];
  gint8 *prev_at = NULL; /* where the sums kept go */
  guint prev_rows = 0;
  for (gsize r = 0; r < M; r += 2) {
    guint rows = M - r >= 2 ? 2 : 1;
    const gint8 *r0 = qrows_at (x, r), *r1 = rows == 2 ? qrows_at (x, r + 1) : r0;
    const gsize qstep = x->quad_step;
    __m512i acc[4];
    for (int j = 0; j < 4; j++)
      acc[j] = _mm512_loadu_si512 (g->bias32 + 16 * j);
    for (guint q = 0; q < nq; q++) {
      __m512i u = k12_quads (r0 + q * qstep, r1 + q * qstep, MIN (4, g->K - 4 * q));
      for (int j = 0; j < 4; j++)
        acc[j] = _mm512_dpbusd_epi32 (acc[j], u, w[4 * q + j]);
    }
    if (prev_at)
      k12_store (pack64_small (&o, k, prev, clamp), prev_rows, prev_at, ldo);
    for (int j = 0; j < 4; j++)
      prev[j] = acc[j];
    prev_at = out + r * ldo, prev_rows = rows;
  }
  if (prev_at)
    k12_store (pack64_small (&o, k, prev, clamp), prev_rows, prev_at, ldo);
}

#define DOT4_LANES 16
#define DOT4_VECS 4
#define DOT4_NAME(x) x##_avx512vnni
#define DOT4_TARGET CONY_TARGET_AVX512
#define DOT4(a, u, w) _mm512_dpbusd_epi32 (a, u, w)
#define DOT2(a, x, w) _mm512_dpwssd_epi32 (a, x, w)
#include "qkernels-dot4.h"
#endif
#endif
