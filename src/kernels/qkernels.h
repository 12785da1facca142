/* Integer kernels of the int8 CNN (src/cnn/cnn-int8.c): a portable C set, AVX2 and VNNI sets
 * (src/kernels/qkernels-avx2.c) and NEON sets for 64-bit ARM (src/kernels/qkernels-neon.c), chosen at run
 * time. All accumulate exactly in int32 and requantise with src/kernels/qmath.h's arithmetic, so
 * they give the same bits (tests check). */
#pragma once
#include "qmath.h"

G_BEGIN_DECLS

/* Requantisation of one layer's outputs, per output channel (arrays padded to a
 * multiple of 16 channels, mult by 16 more): acc * M[c] + zp clamped to [lo, hi].
 * lshift/rshift are ConyQMul's shift split into its left (> 0) and right (>= 0) parts;
 * rmask = 2^rshift - 1 and rhalf = rmask / 2 are the rounding division's constants,
 * precomputed for the SIMD kernels. */
typedef struct {
  gint32 *mult, *lshift, *rshift, *rmask, *rhalf;
  /* The short rounding's 64-bit nudges (q_mul8_small in qkernels-avx2.c), per 8
   * channels the even ones' then the odd ones': 2^30 + 2^(30 + rshift) (rshift >= 1). */
  gint64 *nudge;
  /* Per 16 channels for 512-bit registers, the even ones' 8 then the odd ones' 8: twice
   * those nudges plus zp 2^(32 + rshift) (q_mul16_small; 0 where it does not apply). */
  gint64 *nudge16;
  gint32 zp, lo, hi;
  gboolean any_left; /* some channel has lshift > 0 */
} ConyQOut;

/* Weights as a file stores them: @n rows (output channels) of K values each, int8 or
 * uint8, real = scale * (w - zero point), the zero point per tensor or per channel.
 * The packers subtract the zero point once (w - zp in -255..255, kept in int16), so
 * TFLite's int8 per-channel (symmetric, zp 0) and uint8 per-tensor (asymmetric) weights
 * run in the same kernels. Zero points must lie in the type's range. */
typedef struct {
  const void *data;     /* gint8 or guint8, row-major (channel c's K values at c * K) */
  gboolean is_u8;       /* uint8 values, else int8 */
  const gint32 *zp;     /* NULL: all 0; else zp[0] (per tensor) or zp[c] (per channel) */
  gboolean zp_per_chan; /* zp holds one entry per output channel */
} ConyQWeights;

/* w - zp of channel @c's value @k (of @K per channel). */
static inline gint16
cony_qweights_at (const ConyQWeights *w, guint K, guint c, guint k)
{
  gsize i = (gsize) c * K + k;
  gint32 v = w->is_u8 ? ((const guint8 *) w->data)[i] : ((const gint8 *) w->data)[i];
  return (gint16) (v - (w->zp ? w->zp[w->zp_per_chan ? c : 0] : 0));
}

/* A product out (M x N) = requant ((x - in_zp) (M x K) W^T + bias), W from ConyQWeights,
 * packed once for the kernel set that runs it: N in panels of 8 columns (the AVX2, NEON
 * and emulated sets) or of a set's wider panel (ConyQKernels' panel: 16 for AVX-VNNI, 64
 * for AVX512-VNNI: a row's accumulators are two or four vectors), K in quads of 4
 * (zero-padded), the inputs taken as u = x + 128 in 0..255, so the bias folds in both
 * shifts (bias - (in_zp + 128) * sum_k (w - zp)). A panel's quad is byte-exact when its
 * weights fit int8 and (for vpmaddubsw, not for the dot-product sets) vpmaddubsw cannot
 * saturate on any column's pair (k, k + 1) whatever u is: 255 * (the pair's positive
 * weights) <= 32767 and 255 * (its negative weights' magnitudes) <= 32768. Those are kept
 * as bytes (column j's 4 at 4 j), the others as int16: per vector of @word columns (8 or
 * 16), its columns' (k, k + 1) pairs then their (k + 2, k + 3) pairs, for two vpmaddwd:
 * exact either way (|u| <= 255, |w - zp| <= 255: pair sums fit int32). For YAMNet's int8
 * weights 42-95 % of the quads are bytes for vpmaddubsw, all of them for vpdpbusd. */
typedef struct {
  guint Kq;         /* K rounded up to a multiple of 4 */
  guint width;      /* columns a panel: 8, 16 or 64 */
  guint word;       /* columns an int16 vector: 8 or 16 (width is a multiple) */
  gint8 *w8;        /* the byte-exact quads, panel after panel, 4 * width bytes each */
  gint16 *w16;      /* the others, 4 * width int16 each */
  guint32 *idx;     /* panel p's quads at p * Kq / 4: the byte-exact ones, then the others */
  guint32 *start8;  /* per panel (+ 1): its first quad in w8 */
  guint32 *start16; /* per panel (+ 1): its first quad in w16 */
} ConyQPanels8;

typedef struct {
  guint K, N, Np; /* Np = N rounded up to 64 */
  gint32 *bias;   /* Np, both shifts folded in (above) */
  gint32 *bias_x; /* Np, for kernels that multiply x itself: bias - in_zp * sum_k (w - zp) */
  gint32 in_zp;
  ConyQPanels8 p8;
  ConyQOut out;
  /* every |accumulator| < 2^29, every channel's shift a right shift of 1 to 23: the
   * SIMD kernels may requantise with the short rounding (qkernels-avx2.c) */
  gboolean small_acc;
  /* packed for a dot-product kernel set (ConyQKernels' dot4): every quad whose weights
   * fit int8 is bytes, whatever vpmaddubsw would make of it (the NEON kernels run either
   * packing) */
  gboolean bytes_int8;
  /* Not 0 where the weights are uint8 with one zero point zp (per tensor, or the same
   * for every channel) and the set adds row corrections (ConyQKernels'
   * row_corrections): every quad is bytes, as w - 128 (fits
   * int8 whatever w), and since (w - zp) u = (w - 128) u + (128 - zp) u, each row's
   * accumulators start from the bias plus row_scale = 128 - zp times the sum of the
   * row's u (the kernels sum their prepared inputs: cony_qgemm_row_corrections_avx2). */
  gint32 row_scale;
  /* The 512-bit VNNI kernel's copy of a product of K <= 12 and N = 32 whose weights fit
   * int8 (else NULL), as YAMNet's first convolution (the nine taps of one channel), which
   * it runs two rows at a time: per quad (up to 3) four vectors; in 128-bit lane l of
   * vector v, dword i holds column 16 (l % 2) + 4 v + i's four weights, lanes 0-1 for the
   * first row, 2-3 for the second (packing the four sums to bytes gives the two rows'
   * columns in order). bias32 and out32: the bias and requantisation in that order. */
  gint8 *w32;
  gint32 *bias32;
  ConyQOut out32;
} ConyQGemm;

/* A 3x3 depthwise layer: weights w - zp as int16, 9 x C (tap ky * 3 + kx), int32 biases
 * with the input zero point folded in (bias - in_zp * sum of the 9 taps: the kernels
 * multiply raw int8 inputs, |x (w - zp)| <= 128 * 255 fits int16), and the
 * requantisation of its C channels (arrays padded to a multiple of 16). */
typedef struct {
  guint C;
  gint16 *w;
  /* The AVX2 kernel's copy: per 16 channels, the taps in pairs (0, 1) .. (6, 7), (8, -)
   * as vpmaddwd operands, each pair 32 int16: channels 0-3 and 8-11, then 4-7 and 12-15,
   * every channel's two taps side by side (the order of unpacking two input vectors). */
  gint16 *w2;
  /* The AVX-512 kernel's copy: per 32 channels the same pairs, 64 int16 each: in the
   * first vector channels 8 l + 0..3 of each 128-bit lane l, in the second 8 l + 4..7
   * (the order of unpacking two 512-bit input vectors). */
  gint16 *w4;
  /* The VNNI kernels' copy where every tap fits int8 (else NULL), for every channel, the
   * last group of 64 filled up with the first channels (32 channels: twice, for two
   * neighbouring pixels): per 64, the
   * window's three columns, taps (0, 3, 6), (1, 4, 7) and (2, 5, 8) and a zero byte, four
   * vectors each, a channel's column one dword as vpdpbusd multiplies it; vector j holds
   * channels 16 l + 4 j .. 16 l + 4 j + 3 in 128-bit lane l (the order unpacking a
   * column's three input rows gives; packing the four sums to bytes restores channel
   * order). bias64 and out64: the bias for u = x + 128 and the requantisation
   * of those channels in the same order. The 256-bit kernels read each vector's halves,
   * lanes 0-1 and 2-3, as channels 0-31 and 32-63 of its 64, in the same order; NEON's
   * sdot kernel each 16-byte lane l, channels 16 l + 4 j .. 16 l + 4 j + 3 of vector j. */
  gint8 *w64;
  gint32 *bias64;
  ConyQOut out64;
  /* Not 0 where w64 holds uint8 taps with one zero point wz as w - 128 (those as w - wz
   * do not fit int8): scale64 = 128 - wz, and the kernel adds scale64 times each
   * channel's sum of u over its taps, (w - wz) u = (w - 128) u + (128 - wz) u. */
  gint32 scale64;
  gint32 *bias;
  ConyQOut out;
  gint32 zp;          /* the input's zero point (the value of the padding) */
  gboolean small_acc; /* as ConyQGemm's */
} ConyQDw;

/* Input bytes a band of output rows of a depthwise kernel may read (dw16_layer, the NEON
 * ones): the channel groups take turns on a band, whose input rows then stay in L1 (a
 * pass over a map larger than L2 per group would read it from L3 C / 16 times). */
#define CONY_QDW_BAND_BYTES 16384

/* TFLite's ADD of two int8 tensors (qmath.h, ConyQAdd), prepared for the kernels:
 * the portable one reads each input's half from a table (t1[q + 128], t2[q + 128]),
 * the AVX2 and AVX-512 ones compute all three products on 8 or 16 lanes (m1, m2, mo:
 * each multiplier for 16 channels; mo also holds the output's zero point and clamp). */
typedef struct {
  ConyQAdd add;
  gint32 t1[256], t2[256];
  ConyQOut m1, m2, mo;
} ConyQAddK;

/* Panel @p's weights: the byte-exact quads @w8 (@n8 of them) and the others @w16, the
 * quad indices @idx (@nq), the bias (for u = x + 128). */
typedef struct {
  const gint8 *w8;
  const gint16 *w16;
  const guint32 *idx;
  const gint32 *bias;
  guint n8, nq;
} ConyQPanel;

static inline ConyQPanel
cony_qpanel (const ConyQGemm *g, guint p)
{
  const ConyQPanels8 *p8 = &g->p8;
  gsize nq = p8->Kq / 4, quad = 4 * (gsize) p8->width;
  return (ConyQPanel){ p8->w8 + quad * p8->start8[p], p8->w16 + quad * p8->start16[p],
    p8->idx + p * nq, g->bias + (gsize) p8->width * p, p8->start8[p + 1] - p8->start8[p],
    (guint) nq };
}

/* Whether a set's gemm_rows can run @g: K <= 12, N = 32 with every weight int8 (its w32
 * copy) and the short rounding. */
static inline gboolean
cony_qgemm_rows_ok (const ConyQGemm *g)
{
  return g->w32 != NULL && g->small_acc;
}

/* The number of panels of @g. */
static inline guint
cony_qgemm_panels (const ConyQGemm *g)
{
  return (g->N + g->p8.width - 1) / g->p8.width;
}

/* Rows of a product read in place: row i = y width + x (x < width) starts at
 * @x + y row_step + x step, and its quad q (four values) at quad_step q from there. A
 * matrix is one wide row of steps ldx and quads 4 apart; a 3x3 convolution of one
 * channel, each kernel row a quad (its fourth weight zero), reads its windows straight
 * from the padded map: width its output width, step its stride, row_step stride map
 * rows, quad_step one map row. */
typedef struct {
  const gint8 *x;
  gsize step, width, row_step, quad_step;
} ConyQRows;

typedef struct {
  /* "avxvnni", "avx512vnni", "avx2", "avx2-dot4", "neon-dotprod", "neon", "portable" */
  const char *name;
  /* out (M x N int8, row stride ldo) = the product of x (M x K int8, row stride ldx);
   * @scratch: cony_qgemm_scratch (g, M) int16 values the kernel may overwrite. */
  void (*gemm) (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint8 *out, gsize ldo,
      gint16 *scratch);
  /* out[c] = requant (acc[c]) for c < n (channel c uses o's entries c). */
  void (*requant) (const ConyQOut *o, const gint32 *acc, guint n, gint8 *out);
  /* out (oh x ow x C) = the depthwise layer on a map padded so that every tap exists:
   * output (y, x) reads in[((y * stride + ky) * in_w + x * stride + kx) * C + c]
   * (@in_w: the padded width); @acc: C int32 of scratch. */
  void (*dw) (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow, guint stride,
      gint8 *out, gint32 *acc);
  /* out[i] = cony_q_quantize (x[i], scale, zp) for i < n. */
  void (*quantize) (const float *x, gsize n, float scale, gint32 zp, gint8 *out);
  /* out[i] = cony_q_add (&k->add, a[i], b[i]) for i < n. */
  void (*add) (const ConyQAddK *k, const gint8 *a, const gint8 *b, gsize n, gint8 *out);
  /* gemm is a 4-byte dot-product kernel (qkernels-dot4.h, NEON's): its ConyQGemm must be
   * packed for it (cony_qgemm_init with this set) */
  gboolean dot4;
  /* the columns of its panels and of its int16 vectors (ConyQPanels8; 0: 8) */
  guint panel, word;
  /* out (M x 32, rows @ldo apart) = the product of @g (cony_qgemm_rows_ok) with the rows
   * @x read in place; NULL in the sets without it */
  void (*gemm_rows) (const ConyQGemm *g, gsize M, const ConyQRows *x, gint8 *out, gsize ldo);
  /* its gemm adds ConyQGemm's row corrections (row_scale): uint8 weights with one zero
   * point are packed all bytes for it */
  gboolean row_corrections;
} ConyQKernels;

const ConyQKernels *cony_qkernels_portable (void);
/* The AVX2 set, NULL where the CPU (or the build) has no AVX2. */
const ConyQKernels *cony_qkernels_avx2 (void);
/* The VNNI set this CPU runs best: AVX512-VNNI's ("avx512vnni": vpdpbusd on 512-bit
 * registers, panels of 64 columns; needs AVX512F/BW/VL), else AVX-VNNI's ("avxvnni":
 * 256-bit, panels of 16); the other kernels AVX2's. NULL where the CPU (or the build)
 * has neither. */
const ConyQKernels *cony_qkernels_vnni (void);
/* Each VNNI set by itself, NULL where this CPU lacks it (tests, benchmarks). */
const ConyQKernels *cony_qkernels_avx512vnni (void);
const ConyQKernels *cony_qkernels_avxvnni (void);
/* The AVX-VNNI set's product kernel with vpdpbusd emulated exactly in AVX2
 * ("avx2-dot4"): slower than the AVX2 set, it runs the dot-product kernels' code on CPUs
 * without VNNI (tests); NULL without AVX2. */
const ConyQKernels *cony_qkernels_dot4_emulated (void);
/* The NEON set of 64-bit ARM (ARMv8.0: products by smull + sadalp), NULL elsewhere. */
const ConyQKernels *cony_qkernels_neon (void);
/* The NEON set with the dot-product instruction sdot (ARMv8.2's dotprod extension,
 * HWCAP_ASIMDDP) for its products, NULL where the CPU (or the build) has none. */
const ConyQKernels *cony_qkernels_neon_dotprod (void);
/* The set the CNN runs: the one CONY_CNN_KERNELS names (tests, benchmarks), else VNNI,
 * else AVX2, else NEON with sdot, else NEON, where available, unless
 * CONY_CNN_PORTABLE=1. */
const ConyQKernels *cony_qkernels (void);

/* Fills @g, packed for the kernels @k, from weights @w (N channels of K), the input zero
 * point @in_zp, int32 @bias (N, NULL: zero), per-channel multipliers @m (N) and the
 * output's zero point and clamp. (uint8 activations: pass x - 128 and zero points - 128,
 * the same reals.) The portable kernels run any packing. */
void cony_qgemm_init (ConyQGemm *g, const ConyQKernels *k, guint K, guint N, const ConyQWeights *w,
    gint32 in_zp, const gint32 *bias, const ConyQMul *m, gint32 zp, gint32 lo, gint32 hi);
/* int16 values of scratch the kernels need for @M rows of @g. */
gsize cony_qgemm_scratch (const ConyQGemm *g, gsize M);
/* Where the row corrections (ConyQGemm's row_scale) of @M rows lie in a kernel's
 * @scratch (cony_qgemm_scratch), rounded up to whole blocks of 6 rows. */
gint32 *cony_qgemm_corrections (const ConyQGemm *g, gsize M, gint16 *scratch);
void cony_qgemm_clear (ConyQGemm *g);
/* @o for @n channels (arrays padded to a multiple of 16; @m NULL: zeros). */
void cony_qout_init (ConyQOut *o, guint n, const ConyQMul *m, gint32 zp, gint32 lo, gint32 hi);
void cony_qout_clear (ConyQOut *o);
/* @d for C channels from weights @w (C channels of 9, torch's (C, 1, 3, 3)), @bias (C)
 * and multipliers @m (C). */
void cony_qdw_init (ConyQDw *d, guint C, const ConyQWeights *w, const gint32 *bias,
    const ConyQMul *m, gint32 in_zp, gint32 zp, gint32 lo, gint32 hi);
void cony_qdw_clear (ConyQDw *d);
/* Channels @c0..C-1 of one output pixel of @d in the portable loop's arithmetic (the
 * SIMD kernels' remainder): the window at @px (rows @row apart), @acc scratch. */
void cony_qdw_channels (const ConyQDw *d, const gint8 *px, gsize row, guint c0, gint8 *o,
    gint32 *acc);
/* @k for the add @a (cony_q_add_init done). */
void cony_qadd_init (ConyQAddK *k, const ConyQAdd *a);
void cony_qadd_clear (ConyQAddK *k);

/* The AVX2 kernels (qkernels-avx2.c), built where the compiler can. */
void cony_qgemm_avx2 (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint8 *out, gsize ldo,
    gint16 *scratch);
/* The dot-product kernels (qkernels-dot4.h), on a ConyQGemm packed with bytes_int8. */
void cony_qgemm_dot4_emulated (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint8 *out,
    gsize ldo, gint16 *scratch);
void cony_qgemm_avxvnni (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint8 *out,
    gsize ldo, gint16 *scratch);
void cony_qgemm_avx512vnni (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint8 *out,
    gsize ldo, gint16 *scratch);
void cony_qrequant_avx2 (const ConyQOut *o, const gint32 *acc, guint n, gint8 *out);
void cony_qquantize_avx2 (const float *x, gsize n, float scale, gint32 zp, gint8 *out);
void cony_qgemm_row_corrections_avx2 (const ConyQGemm *g, gsize M, const guint8 *u, gsize blk,
    gint32 *corr);
void cony_qadd_avx2 (const ConyQAddK *k, const gint8 *a, const gint8 *b, gsize n, gint8 *out);
void cony_qadd_avx512 (const ConyQAddK *k, const gint8 *a, const gint8 *b, gsize n, gint8 *out);
void cony_qdw_avx2 (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow, guint stride,
    gint8 *out, gint32 *acc);
void cony_qdw_avx512vnni (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow,
    guint stride, gint8 *out, gint32 *acc);
void cony_qdw_avxvnni (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow,
    guint stride, gint8 *out, gint32 *acc);
void cony_qdw_dot4_emulated (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow,
    guint stride, gint8 *out, gint32 *acc);
void cony_qgemm_rows_avx512 (const ConyQGemm *g, gsize M, const ConyQRows *x, gint8 *out,
    gsize ldo);
/* The NEON kernels (qkernels-neon.c), built for 64-bit ARM. */
void cony_qgemm_neon (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint8 *out, gsize ldo,
    gint16 *scratch);
void cony_qgemm_neon_dotprod (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint8 *out,
    gsize ldo, gint16 *scratch);
void cony_qrequant_neon (const ConyQOut *o, const gint32 *acc, guint n, gint8 *out);
void cony_qquantize_neon (const float *x, gsize n, float scale, gint32 zp, gint8 *out);
void cony_qadd_neon (const ConyQAddK *k, const gint8 *a, const gint8 *b, gsize n, gint8 *out);
void cony_qdw_neon_dotprod (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow,
    guint stride, gint8 *out, gint32 *acc);
void cony_qdw_neon (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow, guint stride,
    gint8 *out, gint32 *acc);

G_END_DECLS
