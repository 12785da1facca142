/* Integer requantisation with TensorFlow Lite's semantics (its int8 quantisation
 * specification and reference kernels): real = scale * (q - zero_point), a real
 * multiplier M (e.g. input_scale * filter_scale / output_scale) as a Q31 fixed-point
 * mantissa and a power-of-two exponent, products by "saturating rounding doubling
 * high multiply" then "rounding divide by power of two". Every kernel of the integer
 * CNN (src/cnn/cnn-int8.c, src/qkernels*.c) requantises through these, so the portable and
 * SIMD paths give the same bits; the int8 add of two differently scaled inputs
 * (MobileNet-v2's residuals) is here too. Written from the published semantics. */
#pragma once
#include <glib.h>
#include <math.h>

G_BEGIN_DECLS

/* A real multiplier M = mult * 2^(shift - 31), mult in [2^30, 2^31) (0 for M = 0). */
typedef struct {
  gint32 mult;
  gint32 shift; /* > 0: left shift of the input first; <= 0: rounding right shift after */
} ConyQMul;

/* TFLite's QuantizeMultiplier: frexp, mantissa rounded half away from zero to Q31
 * (a mantissa that rounds up to 2^31 becomes 2^30 with exponent + 1); exponents below
 * -31 give 0. FALSE when M is negative, not finite, or needs a shift over 30. */
static inline gboolean
cony_q_multiplier (double real, ConyQMul *out)
{
  out->mult = 0;
  out->shift = 0;
  if (!(real >= 0.0) || !isfinite (real))
    return FALSE;
  if (real == 0.0)
    return TRUE;
  int e;
  double q = frexp (real, &e);
  gint64 fixed = (gint64) round (q * (double) (G_GINT64_CONSTANT (1) << 31));
  if (fixed == (G_GINT64_CONSTANT (1) << 31)) {
    fixed /= 2;
    e++;
  }
  if (e < -31)
    return TRUE;
  if (e > 30)
    return FALSE;
  out->mult = (gint32) fixed;
  out->shift = e;
  return TRUE;
}

/* round(a * b / 2^31) with ties toward +infinity (gemmlowp's
 * SaturatingRoundingDoublingHighMul: nudge by 2^30 or 1 - 2^30, truncating division,
 * which is the same as flooring (a*b + 2^30) / 2^31); INT32_MIN * INT32_MIN, the one
 * product out of range, saturates to INT32_MAX. */
static inline gint32
cony_q_srdhm (gint32 a, gint32 b)
{
  if (a == G_MININT32 && b == G_MININT32)
    return G_MAXINT32;
  gint64 ab = (gint64) a * (gint64) b;
  gint64 nudge = ab >= 0 ? (1 << 30) : (1 - (1 << 30));
  return (gint32) ((ab + nudge) / (G_GINT64_CONSTANT (1) << 31));
}

/* x / 2^e rounded to nearest, ties away from zero (gemmlowp's RoundingDivideByPOT),
 * 0 <= e <= 31. */
static inline gint32
cony_q_rdivpot (gint32 x, int e)
{
  gint32 mask = (gint32) ((G_GINT64_CONSTANT (1) << e) - 1);
  gint32 rem = x & mask;
  gint32 threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> e) + (rem > threshold ? 1 : 0);
}

/* x * M (TFLite's MultiplyByQuantizedMultiplier, double rounding): a left shift (which
 * wraps like TFLite's int32 product) or, after the high multiply, a rounding right shift. */
static inline gint32
cony_q_mul (gint32 x, ConyQMul m)
{
  int left = m.shift > 0 ? m.shift : 0, right = m.shift > 0 ? 0 : -m.shift;
  gint32 shifted = (gint32) ((guint32) x << left);
  return cony_q_rdivpot (cony_q_srdhm (shifted, m.mult), right);
}

/* An int32 accumulator to int8: times M, plus the output zero point, clamped to
 * [lo, hi] (the fused activation's range inside -128..127). */
static inline gint8
cony_q_requant (gint32 acc, ConyQMul m, gint32 zp, gint32 lo, gint32 hi)
{
  gint32 v = cony_q_mul (acc, m) + zp;
  return (gint8) (v < lo ? lo : v > hi ? hi : v);
}

/* TFLite's AffineQuantize: round(x / scale) (half away from zero, float32 division)
 * plus the zero point, clamped to int8. NaN gives the zero point. */
static inline gint8
cony_q_quantize (float x, float scale, gint32 zp)
{
  float r = roundf (x / scale);
  if (!(r == r))
    return (gint8) CLAMP (zp, -128, 127);
  if (r > 1e6f)
    r = 1e6f;
  if (r < -1e6f)
    r = -1e6f;
  gint32 v = (gint32) r + zp;
  return (gint8) CLAMP (v, -128, 127);
}

/* The int8 range of a fused activation (TFLite's CalculateActivationRangeQuantized):
 * ReLU from the zero point up, ReLU6 up to zp + round(6 / scale); relu_max INFINITY is
 * plain ReLU, and relu FALSE the whole range. */
static inline void
cony_q_act_range (gboolean relu, float relu_max, float scale, gint32 zp, gint32 *lo, gint32 *hi)
{
  *lo = -128;
  *hi = 127;
  if (!relu)
    return;
  *lo = MAX (*lo, zp);
  if (isfinite (relu_max)) {
    /* a tiny scale puts the top far past int8 (and past gint32): cap it first */
    float steps = MIN (roundf (relu_max / scale), 255.0f);
    *hi = MIN (*hi, zp + (gint32) steps);
  }
}

/* The int8 add of two tensors with their own scales (TFLite's ADD: both inputs
 * shifted left by 20 bits, brought to a common scale of twice the larger input scale,
 * summed, and requantised to the output), for MobileNet-v2's residual connections. */
typedef struct {
  gint32 zp1, zp2, zp_out, lo, hi;
  ConyQMul m1, m2, m_out;
} ConyQAdd;

#define CONY_Q_ADD_LEFT_SHIFT 20

/* FALSE when a derived multiplier cannot be represented (scales not finite and > 0). */
static inline gboolean
cony_q_add_init (ConyQAdd *a, float s1, gint32 zp1, float s2, gint32 zp2, float s_out,
    gint32 zp_out, gint32 lo, gint32 hi)
{
  if (!(s1 > 0.0f && s2 > 0.0f && s_out > 0.0f))
    return FALSE;
  double twice_max = 2.0 * MAX ((double) s1, (double) s2);
  a->zp1 = zp1;
  a->zp2 = zp2;
  a->zp_out = zp_out;
  a->lo = lo;
  a->hi = hi;
  return cony_q_multiplier ((double) s1 / twice_max, &a->m1)
      && cony_q_multiplier ((double) s2 / twice_max, &a->m2)
      && cony_q_multiplier (twice_max / ((double) (1 << CONY_Q_ADD_LEFT_SHIFT) * (double) s_out),
          &a->m_out);
}

/* One input's half of the add: (x - zp) shifted left 20 bits, times its multiplier. */
static inline gint32
cony_q_add_input (ConyQMul m, gint32 x, gint32 zp)
{
  return cony_q_mul ((gint32) ((x - zp) * (1 << CONY_Q_ADD_LEFT_SHIFT)), m);
}

static inline gint8
cony_q_add (const ConyQAdd *a, gint8 x1, gint8 x2)
{
  gint32 s1 = cony_q_add_input (a->m1, x1, a->zp1), s2 = cony_q_add_input (a->m2, x2, a->zp2);
  gint32 v = cony_q_mul (s1 + s2, a->m_out) + a->zp_out;
  return (gint8) (v < a->lo ? a->lo : v > a->hi ? a->hi : v);
}

G_END_DECLS
