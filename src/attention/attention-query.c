/* One query against a window of keys and values, every head at once: the continual
 * single-output step (CoSi), whose cost at long windows is reading the window once.
 *
 * The window is row-major (a row holds every head's hd values), and heads are short
 * (hd = 12 at d 192, 16 heads), so per-head one-vector BLAS calls run a 12-wide dot per
 * row. Here the window is read in blocks of R rows (the vector's lanes: 16 for AVX-512,
 * 8 for AVX2), each block transposed in registers into an L1 buffer of d columns × R
 * rows; a head's R scores are then hd vector FMAs down its columns, and the weighted
 * sum one vector FMA per column into R-lane accumulators, summed across lanes at the
 * end. The softmax terms are cony_exp_batch's, normalised once at the end. Both widths
 * sum each row's products in column order (so they agree to float rounding of the
 * accumulators' lane grouping); the BLAS path remains where neither is available. */
#include "attention-private.h"
#include "linalg.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#ifdef CONY_CPU_X86
#include <immintrin.h>

/* dst[j * 16 + i] = lane j of r[i]: the 16 × 16 transpose (unpack pairs, then quads,
 * then 128-bit lanes twice). */
__attribute__ ((target ("avx512f"))) static inline __attribute__ ((always_inline)) void
q512_transpose (__m512 *r, float *dst)
{
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps (r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps (r[i], r[i + 1]);
  }
  /* u[4g + j], 128-bit lane L: column 4L + j of rows 4g .. 4g + 3 */
  for (int g = 0; g < 16; g += 4) {
    r[g] = _mm512_shuffle_ps (t[g], t[g + 2], 0x44);
    r[g + 1] = _mm512_shuffle_ps (t[g], t[g + 2], 0xEE);
    r[g + 2] = _mm512_shuffle_ps (t[g + 1], t[g + 3], 0x44);
    r[g + 3] = _mm512_shuffle_ps (t[g + 1], t[g + 3], 0xEE);
  }
  for (int j = 0; j < 4; j++) {
    __m512 a0 = _mm512_shuffle_f32x4 (r[j], r[4 + j], 0x88);
    __m512 a1 = _mm512_shuffle_f32x4 (r[j], r[4 + j], 0xDD);
    __m512 b0 = _mm512_shuffle_f32x4 (r[8 + j], r[12 + j], 0x88);
    __m512 b1 = _mm512_shuffle_f32x4 (r[8 + j], r[12 + j], 0xDD);
    _mm512_storeu_ps (dst + (j + 0) * 16, _mm512_shuffle_f32x4 (a0, b0, 0x88));
    _mm512_storeu_ps (dst + (j + 8) * 16, _mm512_shuffle_f32x4 (a0, b0, 0xDD));
    _mm512_storeu_ps (dst + (j + 4) * 16, _mm512_shuffle_f32x4 (a1, b1, 0x88));
    _mm512_storeu_ps (dst + (j + 12) * 16, _mm512_shuffle_f32x4 (a1, b1, 0xDD));
  }
}

/* 16 × 16 tile: dst[j * 16 + i] = src[i * lds + j]. */
__attribute__ ((target ("avx512f"))) static inline __attribute__ ((always_inline)) void
q512_tile (const float *src, gsize lds, float *dst)
{
  __m512 r[16];
  for (int i = 0; i < 16; i++) {
    _mm_prefetch ((const char *) (src + (i + 2 * 16) * lds), _MM_HINT_T0); /* two blocks on */
    r[i] = _mm512_loadu_ps (src + i * lds);
  }
  q512_transpose (r, dst);
}

/* One block of q512_weighted_sum_spread: its @rows rows of @v read in memory order (a
 * long window's values come from L3 or memory, and walking one 16-column chunk down the
 * rows before the next left the prefetchers behind), a sum per chunk over the block's
 * rows in order, then added to its total: the same sums as chunk by chunk. Inlined
 * with a constant @chunks (the papers' d = 192: 12) so the sums stay in registers. */
__attribute__ ((target ("avx512f,fma"))) static inline __attribute__ ((always_inline)) void
q512_spread_block (const float *P16, const float *v, int ld, int rows, int chunks,
    const __m512i *idx, __mmask16 last, __m512 *acc)
{
  __m512 a[64];
#pragma GCC unroll 16
  for (int k = 0; k < chunks; k++)
    a[k] = _mm512_setzero_ps ();
  for (int j = 0; j < rows; j++, v += ld) {
    __m512 p = _mm512_loadu_ps (P16 + 16 * j);
#pragma GCC unroll 16
    for (int k = 0; k < chunks; k++)
      a[k] = _mm512_fmadd_ps (_mm512_permutexvar_ps (idx[k], p),
          _mm512_maskz_loadu_ps (k == chunks - 1 ? last : (__mmask16) 0xFFFF, v + 16 * k), a[k]);
  }
#pragma GCC unroll 16
  for (int k = 0; k < chunks; k++)
    acc[k] = _mm512_add_ps (acc[k], a[k]);
}

/* The weighted sum with at most 16 heads, without transposing the values: per block
 * of 16 rows the heads' terms are transposed instead (P16: a row's terms of every head
 * in one vector), and a vpermps spreads a row's terms over the lanes of each 16 columns
 * (lane c takes head(c)'s). Each lane sums a block's rows in order, then adds the
 * block to its total; the same sums as the transposing kernel to float rounding. FALSE (nothing done) with more than 16 heads. */
__attribute__ ((target ("avx512f,fma"))) static gboolean
q512_weighted_sum_spread (const float *P, const float *V, int ld, int w, int heads, int hd,
    const float *inv, float *out)
{
  static const float zero16[16];
  int d = heads * hd, chunks = (d + 15) / 16;
  if (heads > 16 || chunks > 64)
    return FALSE;
  __m512i idx[64];
  for (int k = 0; k < chunks; k++) {
    gint32 lanes[16];
    for (int j = 0; j < 16; j++)
      lanes[j] = MIN (16 * k + j, d - 1) / hd;
    idx[k] = _mm512_loadu_si512 (lanes);
  }
  __mmask16 last = (__mmask16) ((1u << (d - 16 * (chunks - 1))) - 1);
  float P16[256];
  __m512 acc[64];
  for (int k = 0; k < chunks; k++)
    acc[k] = _mm512_setzero_ps ();
  for (int i0 = 0; i0 < w; i0 += 16) {
    /* past w (the last block) the loads read the next head's terms or the scratch
     * after them: lanes of rows that are never used */
    __m512 r[16];
    for (int h = 0; h < 16; h++)
      r[h] = _mm512_loadu_ps (h < heads ? P + (gsize) h * w + i0 : zero16);
    q512_transpose (r, P16);
    int rows = MIN (16, w - i0);
    const float *v = V + (gsize) i0 * ld;
    if (chunks == 12)
      q512_spread_block (P16, v, ld, rows, 12, idx, last, acc);
    else
      q512_spread_block (P16, v, ld, rows, chunks, idx, last, acc);
  }
  for (int k = 0; k < chunks; k++) {
    __m512 scale = _mm512_permutexvar_ps (idx[k],
        _mm512_maskz_loadu_ps ((__mmask16) ((1u << heads) - 1), inv));
    _mm512_mask_storeu_ps (out + 16 * k, k == chunks - 1 ? last : (__mmask16) 0xFFFF,
        _mm512_mul_ps (acc[k], scale));
  }
  return TRUE;
}

__attribute__ ((target ("avx512f"))) static inline int
q512_nonfinite (__m512 v)
{
  /* v − v is 0 for finite v, NaN for ±Inf and NaN */
  return _mm512_cmp_ps_mask (_mm512_sub_ps (v, v), _mm512_setzero_ps (), _CMP_NEQ_UQ) != 0;
}

/* 2^k for integral k in [-126, 127] */
__attribute__ ((target ("avx512f"))) static inline __m512
q512_pow2 (__m512 k)
{
  return _mm512_castsi512_ps (
      _mm512_slli_epi32 (_mm512_add_epi32 (_mm512_cvttps_epi32 (k), _mm512_set1_epi32 (127)), 23));
}

#define QK_R 16
#define QK_TARGET __attribute__ ((target ("avx512f,fma")))
#define QK_NAME(x) q512_##x
#define VEC __m512
#define V_ZERO _mm512_setzero_ps
#define V_SET1 _mm512_set1_ps
#define V_LOAD _mm512_loadu_ps
#define V_STORE _mm512_storeu_ps
#define V_FMA _mm512_fmadd_ps
#define V_ADD _mm512_add_ps
#define V_SUB _mm512_sub_ps
#define V_MAX _mm512_max_ps
#define V_MIN _mm512_min_ps
#define V_MUL _mm512_mul_ps
#define V_POW2 q512_pow2
#define V_HSUM _mm512_reduce_add_ps
#define V_HMAX _mm512_reduce_max_ps
#define V_NONFINITE q512_nonfinite
#define QK_WEIGHTED_SUM_FAST q512_weighted_sum_spread
#include "attention-query-impl.h"
#undef QK_R
#undef QK_TARGET
#undef QK_NAME
#undef VEC
#undef V_ZERO
#undef V_SET1
#undef V_LOAD
#undef V_STORE
#undef V_FMA
#undef V_ADD
#undef V_SUB
#undef V_MAX
#undef V_MIN
#undef V_MUL
#undef V_POW2
#undef V_HSUM
#undef V_HMAX
#undef V_NONFINITE
#undef QK_WEIGHTED_SUM_FAST

/* 8 × 8 tile: dst[j * 8 + i] = src[i * lds + j]. */
CONY_TARGET_V3 static inline __attribute__ ((always_inline)) void
q256_tile (const float *src, gsize lds, float *dst)
{
  __m256 r[8], t[8];
  for (int i = 0; i < 8; i++) {
    _mm_prefetch ((const char *) (src + (i + 4 * 8) * lds), _MM_HINT_T0); /* four blocks on */
    r[i] = _mm256_loadu_ps (src + i * lds);
  }
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps (r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps (r[i], r[i + 1]);
  }
  for (int g = 0; g < 8; g += 4) {
    r[g] = _mm256_shuffle_ps (t[g], t[g + 2], 0x44);
    r[g + 1] = _mm256_shuffle_ps (t[g], t[g + 2], 0xEE);
    r[g + 2] = _mm256_shuffle_ps (t[g + 1], t[g + 3], 0x44);
    r[g + 3] = _mm256_shuffle_ps (t[g + 1], t[g + 3], 0xEE);
  }
  for (int j = 0; j < 4; j++) {
    _mm256_storeu_ps (dst + j * 8, _mm256_permute2f128_ps (r[j], r[4 + j], 0x20));
    _mm256_storeu_ps (dst + (j + 4) * 8, _mm256_permute2f128_ps (r[j], r[4 + j], 0x31));
  }
}

CONY_TARGET_V3 static inline float
q256_hsum (__m256 v)
{
  __m128 s = _mm_add_ps (_mm256_castps256_ps128 (v), _mm256_extractf128_ps (v, 1));
  s = _mm_add_ps (s, _mm_movehl_ps (s, s));
  return _mm_cvtss_f32 (_mm_add_ss (s, _mm_movehdup_ps (s)));
}

CONY_TARGET_V3 static inline float
q256_hmax (__m256 v)
{
  __m128 s = _mm_max_ps (_mm256_castps256_ps128 (v), _mm256_extractf128_ps (v, 1));
  s = _mm_max_ps (s, _mm_movehl_ps (s, s));
  return _mm_cvtss_f32 (_mm_max_ss (s, _mm_movehdup_ps (s)));
}

CONY_TARGET_V3 static inline int
q256_nonfinite (__m256 v)
{
  return _mm256_movemask_ps (
             _mm256_cmp_ps (_mm256_sub_ps (v, v), _mm256_setzero_ps (), _CMP_NEQ_UQ))
      != 0;
}

CONY_TARGET_V3 static inline __m256
q256_pow2 (__m256 k)
{
  return _mm256_castsi256_ps (
      _mm256_slli_epi32 (_mm256_add_epi32 (_mm256_cvttps_epi32 (k), _mm256_set1_epi32 (127)), 23));
}

#define QK_R 8
#define QK_TARGET CONY_TARGET_V3
#define QK_NAME(x) q256_##x
#define VEC __m256
#define V_ZERO _mm256_setzero_ps
#define V_SET1 _mm256_set1_ps
#define V_LOAD _mm256_loadu_ps
#define V_STORE _mm256_storeu_ps
#define V_FMA _mm256_fmadd_ps
#define V_ADD _mm256_add_ps
#define V_SUB _mm256_sub_ps
#define V_MAX _mm256_max_ps
#define V_MIN _mm256_min_ps
#define V_MUL _mm256_mul_ps
#define V_POW2 q256_pow2
#define V_HSUM q256_hsum
#define V_HMAX q256_hmax
#define V_NONFINITE q256_nonfinite
#include "attention-query-impl.h"
#endif

/* The per-head BLAS products (any CPU). */
static void
single_query_blas (const float *q, const float *K, const float *V, int ld, int w, int heads, int hd,
    float scale, float *s, double *sd, float *out)
{
  for (int h = 0; h < heads; h++) {
    cblas_sgemv (CblasRowMajor, CblasNoTrans, w, hd, scale, K + h * hd, ld, q + h * hd, 1, 0.0f, s,
        1);
    cony_attn_softmax_scores (q + h * hd, K + h * hd, ld, w, hd, scale, s, sd);
    cblas_sgemv (CblasRowMajor, CblasTrans, w, hd, 1.0f, V + h * hd, ld, s, 1, 0.0f, out + h * hd,
        1);
  }
}

gsize
cony_attn_query_scratch (int heads, int n, int d)
{
  /* scores, the block buffer and the accumulators (16 rows of d), the scaled query,
   * the heads' normalisers */
  return (gsize) heads * n + 33 * (gsize) d + heads;
}

ConyAttnQueryKernel
cony_attn_query_best (void)
{
#ifdef CONY_CPU_X86
  static gsize done;
  static ConyAttnQueryKernel best;
  if (g_once_init_enter (&done)) {
    __builtin_cpu_init ();
    /* libgcc's avx512f check includes the OS saving the AVX-512 state */
    best = __builtin_cpu_supports ("avx512f") && cony_cpu_has_v3 () ? CONY_ATTN_QUERY_AVX512
        : cony_cpu_has_v3 ()                                        ? CONY_ATTN_QUERY_AVX2
                                                                    : CONY_ATTN_QUERY_BLAS;
    g_once_init_leave (&done, 1);
  }
  return best;
#else
  return CONY_ATTN_QUERY_BLAS;
#endif
}

gboolean
cony_attn_single_query (ConyAttnQueryKernel kernel, const float *q, const float *K, const float *V,
    int ld, int w, int heads, int hd, float scale, float *scratch, gsize scratch_len, double *sd,
    float *out)
{
  if (kernel == CONY_ATTN_QUERY_AUTO)
    kernel = cony_attn_query_best ();
  if (kernel > cony_attn_query_best ())
    return FALSE; /* not on this CPU */
  if (kernel != CONY_ATTN_QUERY_BLAS
      && scratch_len < cony_attn_query_scratch (heads, w, heads * hd))
    kernel = CONY_ATTN_QUERY_BLAS;
  switch (kernel) {
#ifdef CONY_CPU_X86
    case CONY_ATTN_QUERY_AVX512:
      q512_single_query (q, K, V, ld, w, heads, hd, scale, scratch, sd, out);
      break;
    case CONY_ATTN_QUERY_AVX2:
      q256_single_query (q, K, V, ld, w, heads, hd, scale, scratch, sd, out);
      break;
#endif
    default: single_query_blas (q, K, V, ld, w, heads, hd, scale, scratch, sd, out);
  }
  return TRUE;
}
