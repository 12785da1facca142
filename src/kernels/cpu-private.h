/* CPU features, in one place: the attribute that builds a hot function twice (x86-64-v3
 * and baseline, the loader picks one), the attribute of hand-written AVX2/FMA/F16C
 * kernels, the run-time checks that pick them (and ARM's dot-product instructions), and
 * the switch that forces the portable kernels (CONY_CNN_PORTABLE=1, read once). */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
/* Hand-written x86-64-v3 kernels can be compiled (gcc and clang). */
#define CONY_CPU_X86 1
#define CONY_TARGET_V3 __attribute__ ((target ("avx2,fma,f16c")))
/* The compiler has the vpdpbusd intrinsics of AVX-VNNI and AVX512-VNNI (gcc 11, clang
 * 12). */
#if (defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11)
#define CONY_CPU_VNNI 1
#endif
#endif

#if defined(__aarch64__) && defined(__GNUC__)
/* 64-bit ARM: NEON (Advanced SIMD) is part of the base architecture; the dot-product
 * instructions (sdot, ARMv8.2) are checked at run time. */
#define CONY_CPU_ARM64 1
#endif

/* Plain C built twice, for x86-64-v3 and the baseline, chosen at load time. Without
 * -ffast-math neither build contracts nor reassociates, so both give the same results.
 * gcc only: clang 14's target_clones does not take "arch=" (its build runs the baseline). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CONY_CLONES __attribute__ ((target_clones ("arch=x86-64-v3", "default")))
#else
#define CONY_CLONES
#endif

/* TRUE when this CPU (and OS) runs AVX2, FMA and F16C, the x86-64-v3 kernels' needs;
 * FALSE elsewhere. Checked once. */
gboolean cony_cpu_has_v3 (void);
/* TRUE when this CPU runs AVX-VNNI (vpdpbusd on VEX-encoded ymm registers). */
gboolean cony_cpu_has_avxvnni (void);
/* TRUE when this CPU runs AVX512-VNNI with AVX512F, BW and VL (vpdpbusd and vpmaddwd on
 * 512-bit registers) and the OS saves the AVX-512 state. */
gboolean cony_cpu_has_avx512vnni (void);
/* TRUE when this CPU runs the Advanced SIMD dot-product instructions (sdot, udot: the
 * kernel's HWCAP_ASIMDDP); FALSE elsewhere. */
gboolean cony_cpu_has_asimddp (void);
/* TRUE when CONY_CNN_PORTABLE=1 was in the environment at the first call: the CNN then
 * runs the portable kernels (tests use it to cover that path). Read once. */
gboolean cony_cpu_force_portable (void);

G_END_DECLS
