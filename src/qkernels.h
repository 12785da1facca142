/* Integer kernels of the int8 CNN (src/cnn-int8.c): a portable C set and an AVX2 set
 * (src/qkernels-avx2.c), chosen at run time. Both accumulate exactly in int32 and
 * requantise with src/qmath.h's arithmetic, so they give the same bits (tests check). */
#pragma once
#include "qmath.h"

G_BEGIN_DECLS

/* Requantisation of one layer's outputs, per output channel (arrays padded to a
 * multiple of 16 channels): acc * M[c] + zp clamped to [lo, hi]. lshift/rshift are
 * ConyQMul's shift split into its left (> 0) and right (>= 0) parts. */
typedef struct {
  gint32 *mult, *lshift, *rshift;
  gint32 zp, lo, hi;
} ConyQOut;

/* Weights of a product (pixels x K) (K x N), packed once: N in panels of 16 columns,
 * K in pairs (odd K padded with a zero row); per panel and pair 32 bytes, columns
 * 0..7 then 8..15, each column's two k values side by side (the operand order of
 * vpmaddwd after vpmovsxbw). Columns past N are zero. */
typedef struct {
  guint K, Kp, N, Np; /* Kp = K rounded up to even, Np = N rounded up to 16 */
  gint8 *b;           /* Np / 16 panels of Kp * 16 bytes */
  gint32 *bias;       /* Np */
  ConyQOut out;
} ConyQGemm;

/* A 3x3 depthwise layer: weights 9 x C (tap ky * 3 + kx), int32 biases and the
 * requantisation of its C channels (arrays padded to a multiple of 16), and the input's
 * zero point. */
typedef struct {
  guint C;
  gint16 *w;
  gint32 *bias;
  ConyQOut out;
  gint32 zp;
} ConyQDw;

typedef struct {
  const char *name; /* "avx2", "portable" */
  /* out (M x N int8, row stride ldo) = requant (a (M x Kp int16, row stride Kp) B + bias). */
  void (*gemm) (const ConyQGemm *g, gsize M, const gint16 *a, gint8 *out, gsize ldo);
  /* out[c] = requant (acc[c]) for c < n (channel c uses o's entries c). */
  void (*requant) (const ConyQOut *o, const gint32 *acc, guint n, gint8 *out);
  /* out (oh x ow x C) = the depthwise layer on a map padded so that every tap exists:
   * output (y, x) reads in[((y * stride + ky) * in_w + x * stride + kx) * C + c]
   * (@in_w: the padded width); @acc: C int32 of scratch. */
  void (*dw) (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow, guint stride,
      gint8 *out, gint32 *acc);
} ConyQKernels;

const ConyQKernels *cony_qkernels_portable (void);
/* The AVX2 set, NULL where the CPU (or the build) has no AVX2. */
const ConyQKernels *cony_qkernels_avx2 (void);
/* The set the CNN runs: AVX2 where available unless CONY_CNN_PORTABLE=1. */
const ConyQKernels *cony_qkernels (void);

/* Fills @g from int8 weights @w (N x K row-major: output channel c's K weights),
 * int32 @bias (N, NULL: zero) and per-channel multipliers @m (N). */
void cony_qgemm_init (ConyQGemm *g, guint K, guint N, const gint8 *w, const gint32 *bias,
    const ConyQMul *m, gint32 zp, gint32 lo, gint32 hi);
void cony_qgemm_clear (ConyQGemm *g);
/* @o for @n channels (arrays padded to a multiple of 16; @m NULL: zeros). */
void cony_qout_init (ConyQOut *o, guint n, const ConyQMul *m, gint32 zp, gint32 lo, gint32 hi);
void cony_qout_clear (ConyQOut *o);
/* @d for C channels from int8 weights @w (C x 9, torch's (C, 1, 3, 3)), @bias (C) and
 * multipliers @m (C). */
void cony_qdw_init (ConyQDw *d, guint C, const gint8 *w, const gint32 *bias, const ConyQMul *m,
    gint32 in_zp, gint32 zp, gint32 lo, gint32 hi);
void cony_qdw_clear (ConyQDw *d);

/* The AVX2 kernels (qkernels-avx2.c), built where the compiler can. */
void cony_qgemm_avx2 (const ConyQGemm *g, gsize M, const gint16 *a, gint8 *out, gsize ldo);
void cony_qrequant_avx2 (const ConyQOut *o, const gint32 *acc, guint n, gint8 *out);
void cony_qdw_avx2 (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow, guint stride,
    gint8 *out, gint32 *acc);

G_END_DECLS
