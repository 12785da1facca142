/* Images to CNN input: crop and area-average resampling (see include/cony/image.h). */
#include "cony/image.h"

#include <math.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

void
cony_image_crop_region (guint width, guint height, ConyImageCrop crop, guint out_w, guint out_h,
    guint *x0, guint *y0, guint *w, guint *h)
{
  *x0 = *y0 = 0;
  *w = width;
  *h = height;
  if (crop != CONY_IMAGE_CROP_CENTER || out_w == 0 || out_h == 0)
    return;
  /* Compared in integers: width / height against out_w / out_h. */
  guint64 a = (guint64) width * out_h, b = (guint64) height * out_w;
  if (a > b) { /* wider than the output: keep the full height */
    *w = MAX (1, (guint) ((b + out_h / 2) / out_h));
    *x0 = (width - *w) / 2;
  } else if (a < b) {
    *h = MAX (1, (guint) ((a + out_w / 2) / out_w));
    *y0 = (height - *h) / 2;
  }
}

gsize
cony_image_scratch_size (guint width, guint height, guint channels, guint out_w, guint out_h)
{
  (void) width;
  return (gsize) height * out_w * channels;
}

/* The taps of an @n_in -> @n_out area average: output i reads source pixels
 * [first[i], first[i] + count[i]) with weights w[i * max_taps + k] (summing to 1). */
typedef struct {
  guint *first, *count;
  float *w;
  guint max_taps;
} Taps;

static void
taps_init (Taps *t, guint n_in, guint n_out)
{
  double s = (double) n_in / n_out;
  t->max_taps = n_in / n_out + 2; /* an interval of length s spans at most ceil(s) + 1 */
  t->first = g_new (guint, n_out);
  t->count = g_new (guint, n_out);
  t->w = g_new0 (float, (gsize) n_out * t->max_taps);
  for (guint i = 0; i < n_out; i++) {
    double lo = i * s, hi = (i + 1) * s;
    guint j0 = (guint) floor (lo), n = 0;
    for (guint j = j0; j < n_in && j < hi && n < t->max_taps; j++, n++) {
      double a = MAX (lo, (double) j), b = MIN (hi, (double) j + 1);
      t->w[(gsize) i * t->max_taps + n] = b > a ? (float) ((b - a) / s) : 0.0f;
    }
    t->first[i] = j0;
    t->count[i] = n;
  }
}

static void
taps_clear (Taps *t)
{
  g_free (t->first);
  g_free (t->count);
  g_free (t->w);
}

/* One row's horizontal pass: each output channel the sum over its taps, in tap order,
 * of weight x pixel, from 0.0f. */
static void
row_any (const guint8 *row, guint channels, const Taps *tx, guint out_w, float *dst)
{
  for (guint x = 0; x < out_w; x++) {
    const guint8 *px = row + (gsize) tx->first[x] * channels;
    const float *w = tx->w + (gsize) x * tx->max_taps;
    for (guint c = 0; c < channels; c++) {
      float acc = 0.0f;
      for (guint k = 0; k < tx->count[x]; k++)
        acc += w[k] * px[(gsize) k * channels + c];
      dst[(gsize) x * channels + c] = acc;
    }
  }
}

#ifdef __SSE2__
/* The 3 bytes at @p and the one after them as 4 floats. */
static inline __m128
pixel4 (const guint8 *p)
{
  gint32 v;
  memcpy (&v, p, sizeof v);
  __m128i z = _mm_setzero_si128 (), x = _mm_cvtsi32_si128 (v);
  return _mm_cvtepi32_ps (_mm_unpacklo_epi16 (_mm_unpacklo_epi8 (x, z), z));
}
#endif

/* row_any for RGB (@cw pixels in the row): the three sums in one pass over the taps,
 * each in the same order (so the same floats, bit for bit: the integer CNN quantises
 * them); with SSE2 the three as lanes of one vector (plain multiply and add, no FMA),
 * where the pixel after the last tap is still in the row. */
static void
row_rgb (const guint8 *row, guint cw, const Taps *tx, guint out_w, float *dst)
{
  for (guint x = 0; x < out_w; x++) {
    const guint8 *px = row + (gsize) tx->first[x] * 3;
    const float *w = tx->w + (gsize) x * tx->max_taps;
    guint n = tx->count[x];
#ifdef __SSE2__
    if (tx->first[x] + n < cw) {
      __m128 acc = _mm_setzero_ps ();
      for (guint k = 0; k < n; k++, px += 3)
        acc = _mm_add_ps (acc, _mm_mul_ps (_mm_set1_ps (w[k]), pixel4 (px)));
      float v[4];
      _mm_storeu_ps (v, acc);
      memcpy (dst + 3 * (gsize) x, v, 3 * sizeof (float));
      continue;
    }
#else
    (void) cw;
#endif
    float r = 0.0f, g = 0.0f, b = 0.0f;
    for (guint k = 0; k < n; k++, px += 3) {
      r += w[k] * px[0];
      g += w[k] * px[1];
      b += w[k] * px[2];
    }
    dst[3 * (gsize) x] = r;
    dst[3 * (gsize) x + 1] = g;
    dst[3 * (gsize) x + 2] = b;
  }
}

void
cony_image_resize (const guint8 *src, guint width, guint height, gsize stride, guint channels,
    ConyImageCrop crop, guint out_w, guint out_h, float *out, float *scratch)
{
  guint x0, y0, cw, ch;
  cony_image_crop_region (width, height, crop, out_w, out_h, &x0, &y0, &cw, &ch);
  const guint8 *base = src + (gsize) y0 * stride + (gsize) x0 * channels;
  const float inv = 1.0f / 255.0f;
  if (cw == out_w && ch == out_h) { /* already the model's size: used as it is */
    for (guint y = 0; y < out_h; y++)
      for (gsize i = 0; i < (gsize) out_w * channels; i++)
        out[(gsize) y * out_w * channels + i] = base[(gsize) y * stride + i] * inv;
    return;
  }
  float *tmp = scratch ? scratch : g_new (float, (gsize) ch *out_w *channels);
  Taps tx, ty;
  taps_init (&tx, cw, out_w);
  taps_init (&ty, ch, out_h);
  /* Rows: ch x cw -> ch x out_w, row by row (sequential reads). */
  for (guint y = 0; y < ch; y++) {
    const guint8 *row = base + (gsize) y * stride;
    float *dst = tmp + (gsize) y * out_w * channels;
    if (channels == 3)
      row_rgb (row, cw, &tx, out_w, dst);
    else
      row_any (row, channels, &tx, out_w, dst);
  }
  /* Columns: ch x out_w -> out_h x out_w, whole rows at a time, then / 255. */
  gsize rowlen = (gsize) out_w * channels;
  for (guint y = 0; y < out_h; y++) {
    float *dst = out + (gsize) y * rowlen;
    const float *w = ty.w + (gsize) y * ty.max_taps;
    memset (dst, 0, rowlen * sizeof (float));
    for (guint k = 0; k < ty.count[y]; k++) {
      const float *line = tmp + (gsize) (ty.first[y] + k) * rowlen;
      float wk = w[k] * inv;
      for (gsize i = 0; i < rowlen; i++)
        dst[i] += wk * line[i];
    }
    /* The weights' float rounding can carry white a few ulps past 1 (1.0000021 for a 5 x
     * 710 picture to 12 x 3); the contract is 0..1, and the weights are never negative. */
    for (gsize i = 0; i < rowlen; i++)
      dst[i] = MIN (dst[i], 1.0f);
  }
  taps_clear (&tx);
  taps_clear (&ty);
  if (scratch == NULL)
    g_free (tmp);
}
