/* Images to CNN input: crop and area-average resampling (see include/cony/image.h). */
#include "cony/image.h"

#include <math.h>
#include <string.h>

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

/* Output @i of an @n_in -> @n_out area average: source pixels [*first, *first + count)
 * with weights w[] (summing to 1). Returns count. */
static guint
area_taps (guint i, guint n_in, guint n_out, guint *first, double *w)
{
  double s = (double) n_in / n_out, lo = i * s, hi = (i + 1) * s;
  guint j0 = (guint) floor (lo), count = 0;
  *first = j0;
  for (guint j = j0; j < n_in && j < hi; j++) {
    double a = MAX (lo, (double) j), b = MIN (hi, (double) j + 1);
    if (b > a)
      w[count] = (b - a) / s;
    else
      w[count] = 0.0;
    count++;
  }
  return count;
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
  /* At most ceil(n_in / n_out) + 1 taps per output pixel. */
  gsize max_taps = MAX (cw / out_w, ch / out_h) + 2;
  double *w = g_new (double, max_taps);
  /* Rows: ch x cw -> ch x out_w. */
  for (guint x = 0; x < out_w; x++) {
    guint first, n = area_taps (x, cw, out_w, &first, w);
    for (guint y = 0; y < ch; y++) {
      const guint8 *row = base + (gsize) y * stride;
      float *dst = tmp + ((gsize) y * out_w + x) * channels;
      for (guint c = 0; c < channels; c++) {
        double acc = 0.0;
        for (guint k = 0; k < n; k++)
          acc += w[k] * row[(gsize) (first + k) * channels + c];
        dst[c] = (float) acc;
      }
    }
  }
  /* Columns: ch x out_w -> out_h x out_w, then / 255. */
  gsize rowlen = (gsize) out_w * channels;
  for (guint y = 0; y < out_h; y++) {
    guint first, n = area_taps (y, ch, out_h, &first, w);
    float *dst = out + (gsize) y * rowlen;
    for (gsize i = 0; i < rowlen; i++) {
      double acc = 0.0;
      for (guint k = 0; k < n; k++)
        acc += w[k] * tmp[(gsize) (first + k) * rowlen + i];
      dst[i] = (float) acc * inv;
    }
  }
  g_free (w);
  if (scratch == NULL)
    g_free (tmp);
}
