/* CPU feature checks (cpu-private.h). */
#include "cpu-private.h"

#include <string.h>

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
