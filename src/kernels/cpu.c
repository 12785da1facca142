/* CPU feature checks (cpu-private.h). */
#include "cpu-private.h"

#include <string.h>

#ifdef CONY_CPU_ARM64
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#ifdef CONY_CPU_X86
#include <cpuid.h>

/* F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not
 * know "f16c". Only asked after AVX2, whose check includes the OS saving YMM state. */
static gboolean
cpu_has_f16c (void)
{
  unsigned int a, b, c, d;
  return __get_cpuid (1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
#endif

gboolean
cony_cpu_has_v3 (void)
{
#ifdef CONY_CPU_X86
  static gsize done;
  static gboolean have;
  if (g_once_init_enter (&done)) {
    __builtin_cpu_init ();
    have = __builtin_cpu_supports ("avx2") && __builtin_cpu_supports ("fma") && cpu_has_f16c ();
    g_once_init_leave (&done, 1);
  }
  return have;
#else
  return FALSE;
#endif
}

#ifdef CONY_CPU_X86
/* XCR0, the state the OS saves (0 without OSXSAVE). */
static guint64
cpu_xcr0 (void)
{
  unsigned int a, b, c, d, lo, hi;
  if (!__get_cpuid (1, &a, &b, &c, &d) || (c & bit_OSXSAVE) == 0)
    return 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((guint64) hi << 32) | lo;
}
#endif

gboolean
cony_cpu_has_avxvnni (void)
{
#ifdef CONY_CPU_X86
  unsigned int a, b, c, d;
  /* leaf 7 sub-leaf 1, EAX bit 4; YMM state saved (XCR0 bits 1, 2) */
  return __get_cpuid_count (7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0
      && (cpu_xcr0 () & 0x6) == 0x6;
#else
  return FALSE;
#endif
}

gboolean
cony_cpu_has_avx512vnni (void)
{
#ifdef CONY_CPU_X86
  unsigned int a, b, c, d;
  /* leaf 7: AVX512F (EBX 16), AVX512BW (EBX 30), AVX512VL (EBX 31), AVX512_VNNI (ECX
   * 11); opmask, upper ZMM and ZMM16-31 state saved (XCR0 bits 5-7) besides YMM (1, 2) */
  const unsigned int fbwvl = (1u << 16) | (1u << 30) | (1u << 31);
  return __get_cpuid_count (7, 0, &a, &b, &c, &d) && (b & fbwvl) == fbwvl && (c & (1u << 11)) != 0
      && (cpu_xcr0 () & 0xE6) == 0xE6;
#else
  return FALSE;
#endif
}

gboolean
cony_cpu_has_asimddp (void)
{
#ifdef CONY_CPU_ARM64
  unsigned long hw = getauxval (AT_HWCAP);
  return (hw & HWCAP_ASIMD) != 0 && (hw & HWCAP_ASIMDDP) != 0;
#else
  return FALSE;
#endif
}

gboolean
cony_cpu_force_portable (void)
{
  static gsize done;
  static gboolean portable;
  if (g_once_init_enter (&done)) {
    const char *env = g_getenv ("CONY_CNN_PORTABLE");
    portable = env != NULL && strcmp (env, "1") == 0;
    g_once_init_leave (&done, 1);
  }
  return portable;
}
