/* One-vector matrix products for the per-step hot path (gemv-private.h).
 *
 * One kernel (AVX2/FMA/F16C on x86-64, NEON on 64-bit ARM), instantiated for float32 and
 * float16 storage: blocks of ROWS rows are read side by side (ROWS independent row
 * streams, 16 float accumulators per row), so the loads, not the FMA latency, set the
 * pace. The float16 instance converts each 8 weights to float in a register (F16C or
 * fcvtl, exact) and then does the very same FMAs in the same order as the float32
 * instance, so the two storages give identical sums. */
#include "gemv-private.h"
#include "cpu-private.h"

#include <math.h>
#include <string.h>

#ifdef CONY_CPU_X86
#include <immintrin.h>
#endif
#ifdef CONY_CPU_ARM64
#include <arm_neon.h>
#endif

#define ROWS 4
#define PREFETCH_BYTES 3072 /* how far ahead each row stream prefetches */
/* Matrices of more bytes than this stream from memory, where the hardware prefetcher
 * keeps up and the prefetch instructions only cost (the VGGish FC layers in float16,
 * 100 + 33 + 1 MB: 6.6 ms with them, 6.2 ms without per window, CPU): no software
 * prefetching for them. A step's matrices (well under 1 MB each) come from L3, where
 * it pays. */
#define PREFETCH_MAX_BYTES ((gsize) 8 << 20)

/* ---- float16 <-> float32 ------------------------------------------------------------ */

float
cony_half_to_float (guint16 h)
{
  guint32 sign = (guint32) (h >> 15) << 31, e = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (e == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (e != 0) {
    bits = sign | ((e + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    /* subnormal: mant · 2^-24, renormalised */
    int shift = 0;
    while (!(mant & 0x400)) {
      mant <<= 1;
      shift++;
    }
    bits = sign | ((guint32) (113 - shift) << 23) | ((mant & 0x3ff) << 13);
  }
  float f;
  memcpy (&f, &bits, sizeof f);
  return f;
}

guint16
cony_float_to_half (float f)
{
  guint32 x;
  memcpy (&x, &f, sizeof x);
  guint16 sign = (guint16) ((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) /* Inf, NaN (quiet) */
    return sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u);
  if (x >= 0x477ff000u) /* 65520 and above round to infinity */
    return sign | 0x7c00u;
  if (x < 0x38800000u) /* below 2^-14: a subnormal k · 2^-24, k = round (|f| · 2^24) */
    return sign | (guint16) nearbyintf (fabsf (f) * 16777216.0f);
  x -= 112u << 23;                 /* rebias the exponent */
  x += 0x0fffu + ((x >> 13) & 1u); /* round the 13 dropped bits to nearest even */
  return sign | (guint16) (x >> 13);
}

gboolean
cony_float_to_half_exact (float f, guint16 *h)
{
  guint16 r = cony_float_to_half (f);
  if ((r & 0x7c00u) == 0x7c00u) /* Inf, NaN, or rounded to Inf */
    return FALSE;
  float back = cony_half_to_float (r);
  if (memcmp (&back, &f, sizeof f) != 0)
    return FALSE;
  *h = r;
  return TRUE;
}

/* ---- matrices ------------------------------------------------------------------------ */

static gint f16_enabled = 1;

void
cony_gemv_set_f16_enabled (gboolean enabled)
{
  g_atomic_int_set (&f16_enabled, enabled ? 1 : 0);
}

gboolean
cony_gemv_f16_enabled (void)
{
  return g_atomic_int_get (&f16_enabled) != 0;
}

void
cony_gemv_matrix_init (ConyGemvMatrix *m, const float *w, int rows, int cols, gboolean allow_f16)
{
  m->rows = rows;
  m->cols = cols;
  m->f32 = w;
  m->f16 = NULL;
  m->f16_owned = FALSE;
  if (!allow_f16)
    return;
  gsize n = (gsize) rows * cols;
  guint16 *h = g_new (guint16, n);
  for (gsize i = 0; i < n; i++) {
    if (!cony_float_to_half_exact (w[i], &h[i])) {
      g_free (h);
      return;
    }
  }
  m->f16 = h;
  m->f16_owned = TRUE;
}

void
cony_gemv_matrix_init_f16 (ConyGemvMatrix *m, guint16 *h, int rows, int cols, gboolean take)
{
  m->rows = rows;
  m->cols = cols;
  m->f32 = NULL;
  m->f16 = h;
  m->f16_owned = take;
}

void
cony_gemv_matrix_clear (ConyGemvMatrix *m)
{
  if (m->f16_owned)
    g_free ((gpointer) m->f16);
  m->f16 = NULL;
  m->f16_owned = FALSE;
  m->f32 = NULL;
}

/* ---- portable kernel ----------------------------------------------------------------- */

static inline float
weight_at (const void *w, gsize i, gboolean f16)
{
  return f16 ? cony_half_to_float (((const guint16 *) w)[i]) : ((const float *) w)[i];
}

static inline void
gemv_portable (const void *w, gboolean f16, int rows, int cols, const float *x, float *y)
{
  for (int r = 0; r < rows; r++) {
    gsize base = (gsize) r * cols;
    float lane[8] = { 0 };
    int c = 0;
    for (; c + 8 <= cols; c += 8)
      for (int l = 0; l < 8; l++)
        lane[l] += weight_at (w, base + c + l, f16) * x[c + l];
    float s = ((lane[0] + lane[4]) + (lane[1] + lane[5]))
        + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
    for (; c < cols; c++)
      s += weight_at (w, base + c, f16) * x[c];
    y[r] += s;
  }
}

void
cony_gemv_portable (const ConyGemvMatrix *m, const float *x, float *y)
{
  if (m->f16)
    gemv_portable (m->f16, TRUE, m->rows, m->cols, x, y);
  else
    gemv_portable (m->f32, FALSE, m->rows, m->cols, x, y);
}

/* ---- AVX2 / FMA / F16C kernel -------------------------------------------------------- */

#ifdef CONY_CPU_X86
#define X86_V3 CONY_TARGET_V3
#define X86_V3_INLINE static inline __attribute__ ((always_inline)) CONY_TARGET_V3

X86_V3_INLINE __m256
load8 (const void *w, gsize i, gboolean f16)
{
  if (f16)
    return _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) ((const guint16 *) w + i)));
  return _mm256_loadu_ps ((const float *) w + i);
}

/* y[0..nr) += rows [0, nr) of @w (row stride @cols) · x, nr <= ROWS. */
X86_V3_INLINE void
block_avx2 (const void *w, gboolean f16, gboolean prefetch, int nr, int cols, const float *x,
    float *y)
{
  __m256 a[ROWS][2];
  for (int i = 0; i < ROWS; i++)
    a[i][0] = a[i][1] = _mm256_setzero_ps ();
  int c = 0;
  for (; c + 16 <= cols; c += 16) {
    __m256 x0 = _mm256_loadu_ps (x + c), x1 = _mm256_loadu_ps (x + c + 8);
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) {
      /* each row stream prefetches PREFETCH_BYTES ahead: with the hardware prefetcher
       * alone the loads wait on L3 (the GTZAN step's matrices, Zen 3: float32 25 -> 20 us,
       * float16 14.5 -> 13.4 us) */
      if (prefetch)
        _mm_prefetch ((const char *) w + ((gsize) i * cols + c) * (f16 ? 2 : 4) + PREFETCH_BYTES,
            _MM_HINT_T0);
      a[i][0] = _mm256_fmadd_ps (load8 (w, (gsize) i * cols + c, f16), x0, a[i][0]);
      a[i][1] = _mm256_fmadd_ps (load8 (w, (gsize) i * cols + c + 8, f16), x1, a[i][1]);
    }
  }
  if (c + 8 <= cols) {
    __m256 x0 = _mm256_loadu_ps (x + c);
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++)
      a[i][0] = _mm256_fmadd_ps (load8 (w, (gsize) i * cols + c, f16), x0, a[i][0]);
    c += 8;
  }
  /* four rows' sums in one vector: lane i = Σ of row i's 16 lanes */
  __m256 s01 = _mm256_hadd_ps (_mm256_add_ps (a[0][0], a[0][1]), _mm256_add_ps (a[1][0], a[1][1]));
  __m256 s23 = _mm256_hadd_ps (_mm256_add_ps (a[2][0], a[2][1]), _mm256_add_ps (a[3][0], a[3][1]));
  __m256 s = _mm256_hadd_ps (s01, s23);
  float sum[4];
  _mm_storeu_ps (sum, _mm_add_ps (_mm256_castps256_ps128 (s), _mm256_extractf128_ps (s, 1)));
  for (int i = 0; i < nr; i++) {
    float t = sum[i];
    for (int k = c; k < cols; k++)
      t += (f16 ? _cvtsh_ss (((const guint16 *) w)[(gsize) i * cols + k])
                : ((const float *) w)[(gsize) i * cols + k])
          * x[k];
    y[i] += t;
  }
}

X86_V3_INLINE void
gemv_avx2 (const void *w, gboolean f16, gboolean prefetch, int rows, int cols, const float *x,
    float *y)
{
  gsize esize = f16 ? 2 : 4;
  int r = 0;
  for (; r + ROWS <= rows; r += ROWS)
    block_avx2 ((const char *) w + (gsize) r * cols * esize, f16, prefetch, ROWS, cols, x, y + r);
  for (; r < rows; r++)
    block_avx2 ((const char *) w + (gsize) r * cols * esize, f16, prefetch, 1, cols, x, y + r);
}

/* The kernel's instances: storage (float32, float16) x software prefetching (no, yes). */
typedef void (*GemvKernel) (const void *w, int rows, int cols, const float *x, float *y);
#define GEMV_AVX2_INSTANCE(name, f16, prefetch) \
  static X86_V3 void name (const void *w, int rows, int cols, const float *x, float *y) \
  { \
    gemv_avx2 (w, f16, prefetch, rows, cols, x, y); \
  }
GEMV_AVX2_INSTANCE (gemv_avx2_f32_stream, FALSE, FALSE)
GEMV_AVX2_INSTANCE (gemv_avx2_f32, FALSE, TRUE)
GEMV_AVX2_INSTANCE (gemv_avx2_f16_stream, TRUE, FALSE)
GEMV_AVX2_INSTANCE (gemv_avx2_f16, TRUE, TRUE)
static const GemvKernel gemv_avx2_kernels[2][2] = {
  { gemv_avx2_f32_stream, gemv_avx2_f32 },
  { gemv_avx2_f16_stream, gemv_avx2_f16 },
};

static X86_V3 void
half_expand_f16c (const guint16 *h, gsize n, float *out)
{
  gsize i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps (out + i, load8 (h, i, TRUE));
  for (; i < n; i++)
    out[i] = _cvtsh_ss (h[i]);
}
#endif

/* ---- NEON kernel (64-bit ARM) ------------------------------------------------------- */

#ifdef CONY_CPU_ARM64
/* 8 weights as two float32 vectors (float16: fcvtl, exact). */
static inline __attribute__ ((always_inline)) float32x4x2_t
load8_neon (const void *w, gsize i, gboolean f16)
{
  if (f16) {
    float16x8_t h = vreinterpretq_f16_u16 (vld1q_u16 ((const guint16 *) w + i));
    return (float32x4x2_t){ { vcvt_f32_f16 (vget_low_f16 (h)), vcvt_high_f32_f16 (h) } };
  }
  return (float32x4x2_t){ { vld1q_f32 ((const float *) w + i),
      vld1q_f32 ((const float *) w + i + 4) } };
}

/* y[0..nr) += rows [0, nr) of @w (row stride @cols) · x, nr <= ROWS: the AVX2 kernel's
 * blocking on 4-lane vectors (16 columns a step, four accumulators a row), the same FMAs
 * for both storages. */
static inline __attribute__ ((always_inline)) void
block_neon (const void *w, gboolean f16, int nr, int cols, const float *x, float *y)
{
  float32x4_t a[ROWS][4];
  for (int i = 0; i < ROWS; i++)
    a[i][0] = a[i][1] = a[i][2] = a[i][3] = vdupq_n_f32 (0.0f);
  int c = 0;
  for (; c + 16 <= cols; c += 16) {
    float32x4_t x0 = vld1q_f32 (x + c), x1 = vld1q_f32 (x + c + 4);
    float32x4_t x2 = vld1q_f32 (x + c + 8), x3 = vld1q_f32 (x + c + 12);
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) {
      float32x4x2_t lo = load8_neon (w, (gsize) i * cols + c, f16);
      float32x4x2_t hi = load8_neon (w, (gsize) i * cols + c + 8, f16);
      a[i][0] = vfmaq_f32 (a[i][0], lo.val[0], x0);
      a[i][1] = vfmaq_f32 (a[i][1], lo.val[1], x1);
      a[i][2] = vfmaq_f32 (a[i][2], hi.val[0], x2);
      a[i][3] = vfmaq_f32 (a[i][3], hi.val[1], x3);
    }
  }
  if (c + 8 <= cols) {
    float32x4_t x0 = vld1q_f32 (x + c), x1 = vld1q_f32 (x + c + 4);
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) {
      float32x4x2_t lo = load8_neon (w, (gsize) i * cols + c, f16);
      a[i][0] = vfmaq_f32 (a[i][0], lo.val[0], x0);
      a[i][1] = vfmaq_f32 (a[i][1], lo.val[1], x1);
    }
    c += 8;
  }
  for (int i = 0; i < nr; i++) {
    float t = vaddvq_f32 (vaddq_f32 (vaddq_f32 (a[i][0], a[i][2]), vaddq_f32 (a[i][1], a[i][3])));
    for (int k = c; k < cols; k++)
      t += weight_at (w, (gsize) i * cols + k, f16) * x[k];
    y[i] += t;
  }
}

static void
gemv_neon (const void *w, gboolean f16, int rows, int cols, const float *x, float *y)
{
  gsize esize = f16 ? 2 : 4;
  int r = 0;
  for (; r + ROWS <= rows; r += ROWS)
    block_neon ((const char *) w + (gsize) r * cols * esize, f16, ROWS, cols, x, y + r);
  for (; r < rows; r++)
    block_neon ((const char *) w + (gsize) r * cols * esize, f16, 1, cols, x, y + r);
}
#endif

gboolean
cony_gemv_accelerated (void)
{
#ifdef CONY_CPU_ARM64
  return TRUE;
#else
  return cony_cpu_has_v3 ();
#endif
}

void
cony_gemv (const ConyGemvMatrix *m, const float *x, float *y)
{
#ifdef CONY_CPU_X86
  if (cony_cpu_has_v3 ()) {
    gboolean f16 = m->f16 != NULL;
    gsize bytes = (gsize) m->rows * m->cols * (f16 ? 2 : 4);
    gemv_avx2_kernels[f16][bytes <= PREFETCH_MAX_BYTES](f16 ? (const void *) m->f16
                                                            : (const void *) m->f32,
        m->rows, m->cols, x, y);
    return;
  }
#endif
#ifdef CONY_CPU_ARM64
  if (m->f16)
    gemv_neon (m->f16, TRUE, m->rows, m->cols, x, y);
  else
    gemv_neon (m->f32, FALSE, m->rows, m->cols, x, y);
  return;
#endif
  cony_gemv_portable (m, x, y);
}

void
cony_half_expand (const guint16 *h, gsize n, float *out)
{
#ifdef CONY_CPU_X86
  if (cony_cpu_has_v3 ()) {
    half_expand_f16c (h, n, out);
    return;
  }
#endif
  gsize i0 = 0;
#ifdef CONY_CPU_ARM64
  for (; i0 + 8 <= n; i0 += 8) {
    float32x4x2_t v = load8_neon (h, i0, TRUE);
    vst1q_f32 (out + i0, v.val[0]);
    vst1q_f32 (out + i0 + 4, v.val[1]);
  }
#endif
  for (gsize i = i0; i < n; i++)
    out[i] = cony_half_to_float (h[i]);
}

/* ---- GELU, LayerNorm ------------------------------------------------------------------ */

/* Plain C loops the compiler vectorises, also built for x86-64-v3 (CONY_CLONES). */

#define LN_LANES 8

/* Σ x[i] (or Σ (x[i] − c)² with @square) in double, in LN_LANES independent partial
 * sums so that the additions do not wait on each other. */
static inline double
sum_lanes (const float *x, int d, double c, gboolean square)
{
  double lane[LN_LANES] = { 0 };
  int i = 0;
  for (; i + LN_LANES <= d; i += LN_LANES)
    for (int l = 0; l < LN_LANES; l++) {
      double v = (double) x[i + l] - c;
      lane[l] += square ? v * v : v;
    }
  double s = 0;
  for (int l = 0; l < LN_LANES; l++)
    s += lane[l];
  for (; i < d; i++) {
    double v = (double) x[i] - c;
    s += square ? v * v : v;
  }
  return s;
}

void CONY_CLONES
cony_layer_norm (float *x, int d, const float *w, const float *b, float eps)
{
  double mean = sum_lanes (x, d, 0.0, FALSE) / d;
  double var = sum_lanes (x, d, mean, TRUE) / d, sd = sqrt (var + (double) eps);
  if (G_UNLIKELY (!(sd < 1e15))) {
    /* Rows of ~1e15 and more (huge tokens): x − mean could overflow float and 1/sd be
     * denormal, so normalise in double (a non-finite row stays non-finite). */
    for (int i = 0; i < d; i++)
      x[i] = (float) (((double) x[i] - mean) / sd) * w[i] + b[i];
    return;
  }
  float inv = (float) (1.0 / sd);
  float mf = (float) mean;
  for (int i = 0; i < d; i++)
    x[i] = (x[i] - mf) * inv * w[i] + b[i];
}

/* Cephes' expf steps (as in linalg.c: k = round(v / ln 2), r = v − k·ln 2 in two parts,
 * a degree-6 polynomial, 2^k in the exponent bits) for v in [-87, 0]. */
#define EXP_LOG2E 1.44269504088896341f
#define EXP_ROUND 12582912.0f
#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO -2.12194440e-4f

void CONY_CLONES
cony_gelu (float *x, int n)
{
  /* erfc(z) = t·exp(−z² + P(t)), t = 1/(1 + z/2): the Chebyshev fit of Numerical
   * Recipes (§6.2), relative error < 1.2e-7 for every z >= 0. z is capped at 9
   * (erfc(9) ≈ 4e-37: GELU is x, or 0 to 1e-35, beyond), which keeps exp's argument
   * above -87. One loop of plain arithmetic and integer bit operations, so that the
   * compiler vectorises it (an FP compare or fminf would stop it, -ftrapping-math). */
  const float zmax = 9.0f;
  guint32 zmax_bits;
  memcpy (&zmax_bits, &zmax, sizeof zmax_bits);
  for (int i = 0; i < n; i++) {
    float v = x[i], z = fabsf (v) * (float) M_SQRT1_2;
    guint32 vb, zb;
    memcpy (&vb, &v, sizeof vb);
    memcpy (&zb, &z, sizeof zb);
    zb = zb < zmax_bits ? zb : zmax_bits; /* z >= 0: its bits order like its values */
    memcpy (&z, &zb, sizeof z);
    float u = 1.0f / (1.0f + 0.5f * z);
    /* the polynomials in Estrin's form: short dependency chains, so that consecutive
     * vectors overlap */
    float u2 = u * u, u4 = u2 * u2, u8 = u4 * u4;
    float p = ((-1.26551223f + 1.00002368f * u) + (0.37409196f + 0.09678418f * u) * u2)
        + ((-0.18628806f + 0.27886807f * u) + (-1.13520398f + 1.48851587f * u) * u2) * u4
        + (-0.82215223f + 0.17087277f * u) * u8;
    float a = p - z * z; /* in [-82.3, 0] */
    float k = (a * EXP_LOG2E + EXP_ROUND) - EXP_ROUND;
    float r = a - k * EXP_LN2_HI - k * EXP_LN2_LO;
    float r2 = r * r, r4 = r2 * r2;
    float q = (5.0000001201e-1f + 1.6666665459e-1f * r)
        + (4.1665795894e-2f + 8.3334519073e-3f * r) * r2
        + (1.3981999507e-3f + 1.9875691500e-4f * r) * r4;
    q = q * r2 + r + 1.0f;
    guint32 two_k_bits = (guint32) ((gint32) k + 127) << 23;
    float two_k;
    memcpy (&two_k, &two_k_bits, sizeof two_k);
    float erfc = u * (q * two_k), two_minus = 2.0f - erfc, one_plus_erf;
    /* 1 + erf(x/√2) = erfc(|x|/√2) for x < 0, else 2 − erfc(|x|/√2): picked by the
     * sign bit of x */
    guint32 eb, tb, ob, neg = (guint32) ((gint32) vb >> 31);
    memcpy (&eb, &erfc, sizeof eb);
    memcpy (&tb, &two_minus, sizeof tb);
    ob = (eb & neg) | (tb & ~neg);
    memcpy (&one_plus_erf, &ob, sizeof ob);
    x[i] = 0.5f * v * one_plus_erf;
  }
}
