/* Kernels of the per-step hot path (src/kernels/gemv.c): one-vector matrix products y += W·x,
 * and the feed-forward GELU and LayerNorm.
 *
 * A continual step multiplies each weight matrix by a single vector, so its time is the
 * time to read the weights. These kernels read several rows at once with AVX2/FMA
 * (chosen at run time; a portable C kernel runs elsewhere), and a matrix whose every
 * weight is exactly a float16 value (a model stored as F16) is read from a float16 copy:
 * half the bytes, converted to float in registers, so the result is bit for bit the one
 * the float32 copy gives. A matrix may also hold float16 weights only (the CNN's F16 FC
 * layers); the half <-> float conversions live here too. */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  int rows, cols;     /* W is rows × cols, row-major, row stride cols */
  const float *f32;   /* the caller's float weights (not owned), or NULL: float16 only */
  const guint16 *f16; /* float16 weights, or NULL (weights not all F16 values) */
  gboolean f16_owned; /* f16 is freed by cony_gemv_matrix_clear() */
} ConyGemvMatrix;

/* Sets up @m for @w; with @allow_f16 and every weight an exact float16 value, also makes
 * the (owned) float16 copy. @w must outlive @m. */
void cony_gemv_matrix_init (ConyGemvMatrix *m, const float *w, int rows, int cols,
    gboolean allow_f16);
/* Sets up @m as a float16-only matrix (f32 == NULL) on @h, rows × cols float16 bits;
 * with @take, @m owns @h (g_free'd by cony_gemv_matrix_clear()), else @h must outlive @m.
 * The CNN's F16 FC layers keep only these (half the memory of float32). */
void cony_gemv_matrix_init_f16 (ConyGemvMatrix *m, guint16 *h, int rows, int cols, gboolean take);
void cony_gemv_matrix_clear (ConyGemvMatrix *m);

/* y[r] += Σ_c W[r, c] · x[c] for every row r. The float16 weights are used when there are
 * some; both storages give identical results. */
void cony_gemv (const ConyGemvMatrix *m, const float *x, float *y);
/* The same with the portable C kernel (what x86 CPUs without AVX2/FMA/F16C run); for
 * tests and CONY_CNN_PORTABLE=1. */
void cony_gemv_portable (const ConyGemvMatrix *m, const float *x, float *y);
/* TRUE when cony_gemv() runs a SIMD kernel on this CPU (AVX2/FMA/F16C, NEON). */
gboolean cony_gemv_accelerated (void);

/* Whether the encoder and attention layers make float16 copies of F16-exact weights
 * (default TRUE). Tests and `cony bench model` turn it off to time/compare the float32
 * storage of the same model; read when a layer is created. */
void cony_gemv_set_f16_enabled (gboolean enabled);
gboolean cony_gemv_f16_enabled (void);

/* @f as float16 bits, rounded to nearest even; beyond the float16 range: ±Inf (NaN
 * stays NaN). */
guint16 cony_float_to_half (float f);
/* @f as float16 bits in @h when it is exactly representable (zero, normal and subnormal
 * float16 values); FALSE otherwise (rounding needed, out of range, Inf, NaN). */
gboolean cony_float_to_half_exact (float f, guint16 *h);
float cony_half_to_float (guint16 h);
/* out[i] = cony_half_to_float (h[i]) for i < @n (F16C where the CPU has it; exact). */
void cony_half_expand (const guint16 *h, gsize n, float *out);

/* x <- GELU(x) = x/2 · (1 + erf(x/√2)) in place, the exact (erf) GELU to float rounding
 * (erfc by a rational-exponential fit of relative error < 1.2e-7, vectorised; within
 * a few float ulps of x/2·(1 + erff(x/√2)), max |error| < 2e-7·max(1, |x|)). */
void cony_gelu (float *x, int n);

/* x <- (x − mean) / √(var + eps) · w + b over the @d entries (mean and biased variance
 * summed in double). */
void cony_layer_norm (float *x, int d, const float *w, const float *b, float eps);

G_END_DECLS
