/* The instruction peaks of this CPU's core, measured: per kind of multiply-add
 * instruction the kernels use, a register-only loop with enough independent
 * accumulators that only the instruction's throughput bounds it (`cony bench int8`). */
#pragma once
#include <glib.h>

typedef enum
{
  CONY_PEAK_DPBUSD_ZMM,      /* vpdpbusd zmm (AVX512-VNNI): 64 u8 x s8 MACs */
  CONY_PEAK_DPBUSD_YMM_EVEX, /* vpdpbusd ymm, EVEX (AVX512-VNNI + VL): 32 */
  CONY_PEAK_DPBUSD_YMM_VEX,  /* vpdpbusd ymm, VEX (AVX-VNNI): 32 */
  CONY_PEAK_MADDUBSW_YMM,    /* vpmaddubsw + vpmaddwd by ones + vpaddd (AVX2): 32 */
  CONY_PEAK_MADDWD_YMM,      /* vpmaddwd + vpaddd (AVX2, int16): 16 */
  CONY_PEAK_FMA_ZMM,         /* vfmadd231ps zmm (AVX-512F): 16 fp32 */
  CONY_PEAK_FMA_YMM,         /* vfmadd231ps ymm (FMA): 8 fp32 */
  CONY_PEAK_N
} ConyPeakKind;

/* Short name of @kind ("vpdpbusd zmm", ...). */
const char *cony_peak_name (ConyPeakKind kind);
/* Why @kind cannot be measured on this CPU or build ("no AVX-VNNI", ...), NULL when it
 * can. Nothing is ever emulated. */
const char *cony_peak_missing (ConyPeakKind kind);
/* Multiply-adds per second of @kind on this core: the best stretch of 8 blocks (tens
 * of µs, by the monotonic clock) in @budget seconds, so that what other jobs take of the
 * core is left out, as from the layers' best calls; 0 when cony_peak_missing (@kind). */
double cony_peak_rate (ConyPeakKind kind, double budget);
/* The kind whose throughput bounds the int8 kernel set called @set ("avxvnni",
 * "avx2", ...); FALSE for sets without one (portable C, NEON, unknown names). */
gboolean cony_peak_of_kernels (const char *set, ConyPeakKind *kind);
