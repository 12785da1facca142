/* Integer kernels: packing, the portable set and the run-time choice (qkernels.h). */
#include "qkernels.h"

#include "cpu-private.h"

#include <string.h>

static void
split_shifts (const ConyQMul *m, guint n, ConyQOut *o)
{
  for (guint c = 0; c < n; c++) {
    o->mult[c] = m ? m[c].mult : 0;
    o->lshift[c] = m && m[c].shift > 0 ? m[c].shift : 0;
    o->rshift[c] = m && m[c].shift < 0 ? -m[c].shift : 0;
  }
}

void
cony_qout_init (ConyQOut *o, guint n, const ConyQMul *m, gint32 zp, gint32 lo, gint32 hi)
{
  guint np = (n + 15) / 16 * 16;
  o->mult = g_new0 (gint32, np);
  o->lshift = g_new0 (gint32, np);
  o->rshift = g_new0 (gint32, np);
  split_shifts (m, n, o);
  o->zp = zp;
  o->lo = lo;
  o->hi = hi;
}

void
cony_qout_clear (ConyQOut *o)
{
  g_clear_pointer (&o->mult, g_free);
  g_clear_pointer (&o->lshift, g_free);
  g_clear_pointer (&o->rshift, g_free);
}

void
cony_qgemm_init (ConyQGemm *g, guint K, guint N, const gint8 *w, const gint32 *bias,
    const ConyQMul *m, gint32 zp, gint32 lo, gint32 hi)
{
  g->K = K;
  g->Kp = (K + 1) / 2 * 2;
  g->N = N;
  g->Np = (N + 15) / 16 * 16;
  g->b = g_new0 (gint8, (gsize) g->Kp * g->Np);
  for (guint c = 0; c < N; c++) {
    gint8 *panel = g->b + (gsize) (c / 16) * g->Kp * 16;
    guint j = c % 16, col = (j / 8) * 16 + (j % 8) * 2;
    for (guint k = 0; k < K; k++)
      panel[(gsize) (k / 2) * 32 + col + k % 2] = w[(gsize) c * K + k];
  }
  g->bias = g_new0 (gint32, g->Np);
  if (bias != NULL)
    memcpy (g->bias, bias, sizeof (gint32) * N);
  cony_qout_init (&g->out, N, m, zp, lo, hi);
}

void
cony_qgemm_clear (ConyQGemm *g)
{
  g_clear_pointer (&g->b, g_free);
  g_clear_pointer (&g->bias, g_free);
  cony_qout_clear (&g->out);
}

static inline ConyQMul
qout_mul (const ConyQOut *o, guint c)
{
  return (ConyQMul){ o->mult[c], o->lshift[c] > 0 ? o->lshift[c] : -o->rshift[c] };
}

static void
requant_portable (const ConyQOut *o, const gint32 *acc, guint n, gint8 *out)
{
  for (guint c = 0; c < n; c++)
    out[c] = cony_q_requant (acc[c], qout_mul (o, c), o->zp, o->lo, o->hi);
}

/* One row and panel: acc[16] over the packed pairs, plain C (built for x86-64-v3 too,
 * where the compiler vectorises it). */
CONY_CLONES static void
gemm_row_panel (const gint16 *restrict a, const gint8 *restrict p, guint pairs, gint32 *acc)
{
  for (guint kk = 0; kk < pairs; kk++, p += 32) {
    gint32 a0 = a[2 * kk], a1 = a[2 * kk + 1];
    for (guint j = 0; j < 16; j++) {
      const gint8 *w = p + (j / 8) * 16 + (j % 8) * 2;
      acc[j] += a0 * w[0] + a1 * w[1];
    }
  }
}

static void
gemm_portable (const ConyQGemm *g, gsize M, const gint16 *a, gint8 *out, gsize ldo)
{
  gint32 acc[16];
  gint8 q[16];
  for (guint p = 0; p < g->Np / 16; p++) {
    const gint8 *panel = g->b + (gsize) p * g->Kp * 16;
    guint n = MIN (16, g->N - 16 * p);
    for (gsize r = 0; r < M; r++) {
      memcpy (acc, g->bias + 16 * p, sizeof acc);
      gemm_row_panel (a + r * g->Kp, panel, g->Kp / 2, acc);
      ConyQOut o = { g->out.mult + 16 * p, g->out.lshift + 16 * p, g->out.rshift + 16 * p,
        g->out.zp, g->out.lo, g->out.hi };
      requant_portable (&o, acc, n, q);
      memcpy (out + r * ldo + 16 * p, q, n);
    }
  }
}

const ConyQKernels *
cony_qkernels_portable (void)
{
  static const ConyQKernels k = { "portable", gemm_portable, requant_portable };
  return &k;
}

const ConyQKernels *
cony_qkernels_avx2 (void)
{
#ifdef CONY_CPU_X86
  static const ConyQKernels k = { "avx2", cony_qgemm_avx2, cony_qrequant_avx2 };
  return cony_cpu_has_v3 () ? &k : NULL;
#else
  return NULL;
#endif
}

const ConyQKernels *
cony_qkernels (void)
{
  const ConyQKernels *k = cony_cpu_force_portable () ? NULL : cony_qkernels_avx2 ();
  return k ? k : cony_qkernels_portable ();
}
