/* AVX2 integer kernels (qkernels.h): weights packed as int16 (w - zp), products by
 * vpmaddwd on the int8 inputs widened to int16 (two products summed into int32: no
 * saturation, |x| <= 128, |w - zp| <= 255), and the requantisation of src/qmath.h on 8
 * lanes. Same bits as the portable kernels. */
#include "qkernels.h"

#include "cpu-private.h"

#include <string.h>

#ifdef CONY_CPU_X86
#include <immintrin.h>

/* cony_q_mul on 8 lanes (multipliers >= 0, so the one saturating product never
 * occurs): wrapping left shift; round-half-up high product, floor((x*m + 2^30) / 2^31),
 * from the even and odd lanes' 64-bit products; then the rounding right shift. */
CONY_TARGET_V3 static inline __m256i
q_mul8 (__m256i x, __m256i m, __m256i ls, __m256i rs)
{
  x = _mm256_sllv_epi32 (x, ls);
  const __m256i nudge = _mm256_set1_epi64x (1 << 30);
  __m256i even = _mm256_add_epi64 (_mm256_mul_epi32 (x, m), nudge);
  __m256i odd = _mm256_add_epi64 (_mm256_mul_epi32 (_mm256_srli_epi64 (x, 32),
                                      _mm256_srli_epi64 (m, 32)),
      nudge);
  __m256i hi = _mm256_blend_epi32 (_mm256_srli_epi64 (even, 31), _mm256_slli_epi64 (odd, 1), 0xAA);
  /* rounding divide by 2^rs: ties away from zero */
  __m256i one = _mm256_set1_epi32 (1);
  __m256i mask = _mm256_sub_epi32 (_mm256_sllv_epi32 (one, rs), one);
  __m256i rem = _mm256_and_si256 (hi, mask);
  __m256i neg = _mm256_cmpgt_epi32 (_mm256_setzero_si256 (), hi);
  __m256i thr = _mm256_sub_epi32 (_mm256_srli_epi32 (mask, 1), neg);
  return _mm256_sub_epi32 (_mm256_srav_epi32 (hi, rs), _mm256_cmpgt_epi32 (rem, thr));
}

/* Channels c..c+7 of @o applied to @acc, plus the zero point, clamped. */
CONY_TARGET_V3 static inline __m256i
q_requant8 (const ConyQOut *o, guint c, __m256i acc)
{
  __m256i v = q_mul8 (acc, _mm256_loadu_si256 ((const __m256i *) (o->mult + c)),
      _mm256_loadu_si256 ((const __m256i *) (o->lshift + c)),
      _mm256_loadu_si256 ((const __m256i *) (o->rshift + c)));
  v = _mm256_add_epi32 (v, _mm256_set1_epi32 (o->zp));
  v = _mm256_max_epi32 (v, _mm256_set1_epi32 (o->lo));
  return _mm256_min_epi32 (v, _mm256_set1_epi32 (o->hi));
}

/* 16 int32 (two vectors, in range) as 16 int8 in order. */
CONY_TARGET_V3 static inline __m128i
q_pack16 (__m256i a, __m256i b)
{
  __m256i w = _mm256_permute4x64_epi64 (_mm256_packs_epi32 (a, b), 0xD8);
  return _mm_packs_epi16 (_mm256_castsi256_si128 (w), _mm256_extracti128_si256 (w, 1));
}

CONY_TARGET_V3 void
cony_qrequant_avx2 (const ConyQOut *o, const gint32 *acc, guint n, gint8 *out)
{
  guint c = 0;
  for (; c + 16 <= n; c += 16) {
    __m256i a = q_requant8 (o, c, _mm256_loadu_si256 ((const __m256i *) (acc + c)));
    __m256i b = q_requant8 (o, c + 8, _mm256_loadu_si256 ((const __m256i *) (acc + c + 8)));
    _mm_storeu_si128 ((__m128i *) (out + c), q_pack16 (a, b));
  }
  for (; c < n; c++) {
    ConyQMul m = { o->mult[c], o->lshift[c] > 0 ? o->lshift[c] : -o->rshift[c] };
    out[c] = cony_q_requant (acc[c], m, o->zp, o->lo, o->hi);
  }
}

/* @MR rows (1..4) of one 16-column panel: 2 * MR accumulators, per k pair two widened
 * weight vectors and one broadcast (a[k], a[k+1]) per row. */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) void
gemm_block (const ConyQGemm *g, guint p, const gint16 *a, gsize lda, int MR, gint8 *out, gsize ldo)
{
  __m256i acc[4][2];
  const gint32 *bias = g->bias + 16 * p;
  for (int r = 0; r < MR; r++) {
    acc[r][0] = _mm256_loadu_si256 ((const __m256i *) bias);
    acc[r][1] = _mm256_loadu_si256 ((const __m256i *) (bias + 8));
  }
  const gint16 *w = g->b + (gsize) p * g->Kp * 16;
  guint pairs = g->Kp / 2;
  for (guint kk = 0; kk < pairs; kk++, w += 32) {
    __m256i w0 = _mm256_loadu_si256 ((const __m256i *) w);
    __m256i w1 = _mm256_loadu_si256 ((const __m256i *) (w + 16));
    for (int r = 0; r < MR; r++) {
      gint32 pair;
      memcpy (&pair, a + r * lda + 2 * kk, sizeof pair);
      __m256i x = _mm256_set1_epi32 (pair);
      acc[r][0] = _mm256_add_epi32 (acc[r][0], _mm256_madd_epi16 (x, w0));
      acc[r][1] = _mm256_add_epi32 (acc[r][1], _mm256_madd_epi16 (x, w1));
    }
  }
  guint n = MIN (16, g->N - 16 * p);
  for (int r = 0; r < MR; r++) {
    __m128i q = q_pack16 (q_requant8 (&g->out, 16 * p, acc[r][0]),
        q_requant8 (&g->out, 16 * p + 8, acc[r][1]));
    if (n == 16)
      _mm_storeu_si128 ((__m128i *) (out + r * ldo + 16 * p), q);
    else {
      gint8 tmp[16];
      _mm_storeu_si128 ((__m128i *) tmp, q);
      memcpy (out + r * ldo + 16 * p, tmp, n);
    }
  }
}

/* The depthwise layer, 16 channels at a time in registers: per tap, 16 inputs widened
 * to int16 times the int16 weights (|x| <= 128, |w - zp| <= 255: the int16 product is
 * exact; the input zero point is in the bias), widened to int32 and added; then
 * requantised and packed.
 * Channel counts that are not a multiple of 16 take the portable loop's arithmetic on
 * the rest. */
CONY_TARGET_V3 void
cony_qdw_avx2 (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow, guint stride,
    gint8 *out, gint32 *acc)
{
  guint C = d->C, C16 = C / 16 * 16;
  gsize row = (gsize) in_w * C;
  for (guint y = 0; y < oh; y++)
    for (guint x = 0; x < ow; x++) {
      const gint8 *px = in + (gsize) y * stride * row + (gsize) x * stride * C;
      gint8 *o = out + ((gsize) y * ow + x) * C;
      for (guint c = 0; c < C16; c += 16) {
        __m256i a0 = _mm256_loadu_si256 ((const __m256i *) (d->bias + c));
        __m256i a1 = _mm256_loadu_si256 ((const __m256i *) (d->bias + c + 8));
        for (guint k = 0; k < 9; k++) {
          const gint8 *src = px + (k / 3) * row + (k % 3) * C + c;
          __m256i v = _mm256_cvtepi8_epi16 (_mm_loadu_si128 ((const __m128i *) src));
          __m256i p = _mm256_mullo_epi16 (v,
              _mm256_loadu_si256 ((const __m256i *) (d->w + (gsize) k * C + c)));
          a0 = _mm256_add_epi32 (a0, _mm256_cvtepi16_epi32 (_mm256_castsi256_si128 (p)));
          a1 = _mm256_add_epi32 (a1, _mm256_cvtepi16_epi32 (_mm256_extracti128_si256 (p, 1)));
        }
        _mm_storeu_si128 ((__m128i *) (o + c),
            q_pack16 (q_requant8 (&d->out, c, a0), q_requant8 (&d->out, c + 8, a1)));
      }
      if (C16 < C) {
        for (guint c = C16; c < C; c++) {
          gint32 v = d->bias[c];
          for (guint k = 0; k < 9; k++)
            v += (gint32) px[(k / 3) * row + (k % 3) * C + c] * d->w[(gsize) k * C + c];
          acc[c] = v;
        }
        for (guint c = C16; c < C; c++) {
          ConyQMul m = { d->out.mult[c],
            d->out.lshift[c] > 0 ? d->out.lshift[c] : -d->out.rshift[c] };
          o[c] = cony_q_requant (acc[c], m, d->out.zp, d->out.lo, d->out.hi);
        }
      }
    }
}

/* @M rows of @K int8 widened to int16 rows of @Kp (the odd K's pad 0). */
CONY_TARGET_V3 static void
widen_rows (const gint8 *x, gsize ldx, gsize M, guint K, guint Kp, gint16 *a)
{
  for (gsize r = 0; r < M; r++) {
    const gint8 *src = x + r * ldx;
    gint16 *dst = a + r * Kp;
    guint k = 0;
    for (; k + 16 <= K; k += 16)
      _mm256_storeu_si256 ((__m256i *) (dst + k),
          _mm256_cvtepi8_epi16 (_mm_loadu_si128 ((const __m128i *) (src + k))));
    for (; k < K; k++)
      dst[k] = src[k];
    for (; k < Kp; k++)
      dst[k] = 0;
  }
}

CONY_TARGET_V3 void
cony_qgemm_avx2 (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint8 *out, gsize ldo,
    gint16 *scratch)
{
  gsize lda = g->Kp;
  const gint16 *a = scratch;
  widen_rows (x, ldx, M, g->K, g->Kp, scratch);
  for (guint p = 0; p < g->Np / 16; p++) {
    gsize r = 0;
    for (; r + 4 <= M; r += 4)
      gemm_block (g, p, a + r * lda, lda, 4, out + r * ldo, ldo);
    switch (M - r) {
      case 3: gemm_block (g, p, a + r * lda, lda, 3, out + r * ldo, ldo); break;
      case 2: gemm_block (g, p, a + r * lda, lda, 2, out + r * ldo, ldo); break;
      case 1: gemm_block (g, p, a + r * lda, lda, 1, out + r * ldo, ldo); break;
      default: break;
    }
  }
}
#endif
