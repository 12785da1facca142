/* Instruction peaks (bench_peak.h). Each loop keeps 12 independent accumulators, more
 * than latency x throughput of any of these instructions on current cores (vpdpbusd:
 * 4-5 cycles x 2 a cycle), so the loop runs at the instruction's throughput; 8 did
 * not (the old loop read 99.7 GMAC/s where the kernels reached 136). */
#include "bench_peak.h"
#include "cpu-private.h"
#include "bench.h"

#include <string.h>

/* Rounds of 12 instructions per block: 8 blocks between two readings of the monotonic
 * clock (tens of ns) make its cost nothing. (Outside the x86 part: cony_peak_rate is
 * built everywhere.) */
#define ROUNDS 2000

#ifdef CONY_CPU_X86
#include <immintrin.h>

/* clang-format off */
#define ACCS(X) X (a0) X (a1) X (a2) X (a3) X (a4) X (a5) X (a6) X (a7) X (a8) X (a9) \
  X (a10) X (a11)
#define DECL(a) a = zero,
#define SUM(a) + a
/* clang-format on */

/* One block of an intrinsic OP (acc, x, w): 12 accumulators, an empty asm per round
 * (constraint C: "x" for VEX, "v" for EVEX registers) keeping them in registers and
 * every instruction in the loop. */
#define INTRIN_BLOCK(name, target, T, zero_expr, x_expr, w_expr, OP, C) \
  target static gint32 name (void) \
  { \
    T zero = zero_expr, x = x_expr, w = w_expr; \
    T ACCS (DECL) last = zero; \
    for (int r = 0; r < ROUNDS; r++) { \
      a0 = OP (a0, x, w), a1 = OP (a1, x, w), a2 = OP (a2, x, w), a3 = OP (a3, x, w); \
      a4 = OP (a4, x, w), a5 = OP (a5, x, w), a6 = OP (a6, x, w), a7 = OP (a7, x, w); \
      a8 = OP (a8, x, w), a9 = OP (a9, x, w), a10 = OP (a10, x, w), a11 = OP (a11, x, w); \
      __asm__ volatile("" \
                       : "+" C (a0), "+" C (a1), "+" C (a2), "+" C (a3), "+" C (a4), "+" C (a5), \
                       "+" C (a6), "+" C (a7), "+" C (a8), "+" C (a9), "+" C (a10), "+" C (a11), \
                       "+" C (x)); \
    } \
    T s = last ACCS (SUM); \
    gint32 out; \
    memcpy (&out, &s, sizeof out); \
    return out; \
  }

#define FMA256(a, x, w) _mm256_fmadd_ps (x, w, a)
INTRIN_BLOCK (block_fma_ymm, CONY_TARGET_V3, __m256, _mm256_setzero_ps (), _mm256_set1_ps (0.5f),
    _mm256_set1_ps (1e-3f), FMA256, "x")
#define FMA512(a, x, w) _mm512_fmadd_ps (x, w, a)
INTRIN_BLOCK (block_fma_zmm, __attribute__ ((target ("avx512f"))), __m512, _mm512_setzero_ps (),
    _mm512_set1_ps (0.5f), _mm512_set1_ps (1e-3f), FMA512, "v")

#ifdef CONY_CPU_VNNI
/* clang 14's assembler does not take {vex}: the VEX form comes from the intrinsic. */
INTRIN_BLOCK (block_dpbusd_vex, __attribute__ ((target ("avx2,avxvnni"))), __m256i,
    _mm256_setzero_si256 (), _mm256_set1_epi8 (1), _mm256_set1_epi8 (2), _mm256_dpbusd_avx_epi32,
    "x")
INTRIN_BLOCK (block_dpbusd_evex, __attribute__ ((target ("avx2,avx512vnni,avx512vl"))), __m256i,
    _mm256_setzero_si256 (), _mm256_set1_epi8 (1), _mm256_set1_epi8 (2), _mm256_dpbusd_epi32, "v")
INTRIN_BLOCK (block_dpbusd_zmm, __attribute__ ((target ("avx512f,avx512vnni"))), __m512i,
    _mm512_setzero_si512 (), _mm512_set1_epi8 (1), _mm512_set1_epi8 (2), _mm512_dpbusd_epi32, "v")
#endif

/* The AVX2 pairs in assembly, so that the compiler neither hoists nor merges the
 * loop-invariant products: STEP(a) adds one product of %[x] and %[w] to a, ymm15 the
 * temporary (renamed: no dependency between steps), %[one] 16-bit ones. 12
 * accumulators, x, w and one take the other 15 registers. */
/* clang-format off */
#define ASM_BLOCK(name, STEP) \
  CONY_TARGET_V3 static gint32 name (void) \
  { \
    __m256i zero = _mm256_setzero_si256 (), x = _mm256_set1_epi8 (1); \
    __m256i w = _mm256_set1_epi8 (2), one = _mm256_set1_epi16 (1); \
    __m256i ACCS (DECL) last = zero; \
    for (int r = 0; r < ROUNDS; r++) \
      __asm__ volatile ( \
          STEP ("%[a0]") STEP ("%[a1]") STEP ("%[a2]") STEP ("%[a3]") STEP ("%[a4]") \
          STEP ("%[a5]") STEP ("%[a6]") STEP ("%[a7]") STEP ("%[a8]") STEP ("%[a9]") \
          STEP ("%[a10]") STEP ("%[a11]") \
          : [a0] "+x"(a0), [a1] "+x"(a1), [a2] "+x"(a2), [a3] "+x"(a3), [a4] "+x"(a4), \
            [a5] "+x"(a5), [a6] "+x"(a6), [a7] "+x"(a7), [a8] "+x"(a8), [a9] "+x"(a9), \
            [a10] "+x"(a10), [a11] "+x"(a11) \
          : [x] "x"(x), [w] "x"(w), [one] "x"(one) \
          : "xmm15"); \
    __m256i s = last ACCS (SUM); \
    return _mm256_extract_epi32 (s, 0); \
  }

/* vpmaddwd + vpaddd: 16 int16 multiply-adds per step. */
#define STEP_WD(a) "vpmaddwd %[x], %[w], %%ymm15\n\tvpaddd %%ymm15, " a ", " a "\n\t"
/* vpmaddubsw + vpmaddwd by ones + vpaddd: 32 u8 x s8 multiply-adds per step (the AVX2
 * kernel's byte quads; vpmaddubsw saturates in int16, the packing avoids it). */
#define STEP_UBS(a) \
  "vpmaddubsw %[w], %[x], %%ymm15\n\tvpmaddwd %[one], %%ymm15, %%ymm15\n\t" \
  "vpaddd %%ymm15, " a ", " a "\n\t"
/* clang-format on */

ASM_BLOCK (block_maddwd, STEP_WD)
ASM_BLOCK (block_maddubsw, STEP_UBS)
#endif

typedef struct {
  const char *name;
  gint32 (*block) (void);
  double macs; /* multiply-adds per instruction step */
} Peak;

static const Peak peaks[CONY_PEAK_N] = {
#if defined(CONY_CPU_X86) && defined(CONY_CPU_VNNI)
  [CONY_PEAK_DPBUSD_ZMM] = { "vpdpbusd zmm", block_dpbusd_zmm, 64 },
  [CONY_PEAK_DPBUSD_YMM_EVEX] = { "vpdpbusd ymm (EVEX)", block_dpbusd_evex, 32 },
  [CONY_PEAK_DPBUSD_YMM_VEX] = { "vpdpbusd ymm (VEX, AVX-VNNI)", block_dpbusd_vex, 32 },
#else
  [CONY_PEAK_DPBUSD_ZMM] = { "vpdpbusd zmm", NULL, 64 },
  [CONY_PEAK_DPBUSD_YMM_EVEX] = { "vpdpbusd ymm (EVEX)", NULL, 32 },
  [CONY_PEAK_DPBUSD_YMM_VEX] = { "vpdpbusd ymm (VEX, AVX-VNNI)", NULL, 32 },
#endif
#ifdef CONY_CPU_X86
  [CONY_PEAK_MADDUBSW_YMM] = { "vpmaddubsw+vpmaddwd ymm", block_maddubsw, 32 },
  [CONY_PEAK_MADDWD_YMM] = { "vpmaddwd ymm (int16)", block_maddwd, 16 },
  [CONY_PEAK_FMA_ZMM] = { "fp32 FMA zmm", block_fma_zmm, 16 },
  [CONY_PEAK_FMA_YMM] = { "fp32 FMA ymm", block_fma_ymm, 8 },
#else
  [CONY_PEAK_MADDUBSW_YMM] = { "vpmaddubsw+vpmaddwd ymm", NULL, 32 },
  [CONY_PEAK_MADDWD_YMM] = { "vpmaddwd ymm (int16)", NULL, 16 },
  [CONY_PEAK_FMA_ZMM] = { "fp32 FMA zmm", NULL, 16 },
  [CONY_PEAK_FMA_YMM] = { "fp32 FMA ymm", NULL, 8 },
#endif
};

const char *
cony_peak_name (ConyPeakKind kind)
{
  g_return_val_if_fail (kind < CONY_PEAK_N, NULL);
  return peaks[kind].name;
}

const char *
cony_peak_missing (ConyPeakKind kind)
{
  g_return_val_if_fail (kind < CONY_PEAK_N, "unknown kind");
#ifdef CONY_CPU_X86
  if (peaks[kind].block == NULL)
    return "this compiler has no VNNI intrinsics";
  switch (kind) {
    case CONY_PEAK_DPBUSD_ZMM:
    case CONY_PEAK_DPBUSD_YMM_EVEX:
      return cony_cpu_has_avx512vnni () ? NULL : "no AVX512-VNNI with AVX512VL";
    case CONY_PEAK_DPBUSD_YMM_VEX:
      return cony_cpu_has_avxvnni () && cony_cpu_has_v3 () ? NULL : "no AVX-VNNI";
    case CONY_PEAK_FMA_ZMM:
      __builtin_cpu_init ();
      /* libgcc's check includes the OS saving the AVX-512 state */
      return __builtin_cpu_supports ("avx512f") ? NULL : "no AVX-512F";
    default: return cony_cpu_has_v3 () ? NULL : "no AVX2/FMA";
  }
#else
  return "not an x86 CPU";
#endif
}

double
cony_peak_rate (ConyPeakKind kind, double budget)
{
  if (cony_peak_missing (kind) != NULL)
    return 0;
  const Peak *p = &peaks[kind];
  /* the best stretch of 8 blocks (about 25 µs of vpdpbusd zmm), as the layers compared
   * with it are the best of many calls: a rate over the whole budget would also count
   * what other processes took, and a layer could read above its peak */
  double per_stretch = 8 * 12.0 * ROUNDS * p->macs, best = 0;
  double overhead = cony_bench_clock_overhead_s (cony_bench_wall_s);
  volatile gint32 sink = 0;
  for (double t0 = cony_bench_wall_s (); cony_bench_wall_s () - t0 < budget;) {
    double s0 = cony_bench_wall_s ();
    for (int i = 0; i < 8; i++)
      sink += p->block ();
    best = MAX (best, per_stretch / (cony_bench_wall_s () - s0 - overhead));
  }
  (void) sink;
  return best;
}

gboolean
cony_peak_of_kernels (const char *set, ConyPeakKind *kind)
{
  /* avx512vnni runs vpdpbusd on 512-bit registers (src/kernels/qkernels.h) */
  if (strcmp (set, "avx512vnni") == 0)
    *kind = CONY_PEAK_DPBUSD_ZMM;
  else if (strcmp (set, "avxvnni") == 0)
    *kind = CONY_PEAK_DPBUSD_YMM_VEX;
  /* avx2-dot4 runs vpdpbusd's arithmetic in AVX2 instructions: AVX2's bound */
  else if (strcmp (set, "avx2") == 0 || strcmp (set, "avx2-dot4") == 0)
    *kind = CONY_PEAK_MADDUBSW_YMM;
  else
    return FALSE;
  return TRUE;
}
