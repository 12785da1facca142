/* Images to CNN input (include/cony/image.h): the crop region of each policy, the area
 * average against a direct double-precision sum over covered areas, a frame already at
 * the output size copied as it is, row strides with padding, gray frames. */
#include "cony/image.h"

#include <math.h>
#include <string.h>

/* The pixel values of a test frame: every byte different along rows and channels. */
static guint8 *
make_frame (guint w, guint h, guint c, gsize stride)
{
  guint8 *f = g_malloc0 (stride * h);
  for (guint y = 0; y < h; y++)
    for (guint x = 0; x < w; x++)
      for (guint k = 0; k < c; k++)
        f[(gsize) y * stride + (gsize) x * c + k] = (guint8) ((x * 7 + y * 13 + k * 91) % 256);
  /* padding bytes hold values that must never be read */
  for (guint y = 0; y < h; y++)
    memset (f + (gsize) y * stride + (gsize) w * c, 0xEE, stride - (gsize) w * c);
  return f;
}

/* Output pixel (ox, oy) channel k by definition: the mean of the crop region's pixels
 * weighted by the area of each that the output pixel covers. */
static double
reference (const guint8 *f, gsize stride, guint c, guint x0, guint y0, guint cw, guint ch, guint ow,
    guint oh, guint ox, guint oy, guint k)
{
  double sx = (double) cw / ow, sy = (double) ch / oh, acc = 0.0;
  for (guint y = 0; y < ch; y++) {
    double wy = MIN (y + 1.0, (oy + 1) * sy) - MAX ((double) y, oy * sy);
    if (wy <= 0)
      continue;
    for (guint x = 0; x < cw; x++) {
      double wx = MIN (x + 1.0, (ox + 1) * sx) - MAX ((double) x, ox * sx);
      if (wx > 0)
        acc += wx * wy * f[(gsize) (y0 + y) * stride + (gsize) (x0 + x) * c + k];
    }
  }
  return acc / (sx * sy) / 255.0;
}

static void
check_resize (guint w, guint h, guint c, gsize stride, ConyImageCrop crop, guint ow, guint oh)
{
  g_autofree guint8 *f = make_frame (w, h, c, stride);
  g_autofree float *out = g_new (float, (gsize) ow *oh *c);
  g_autofree float *scratch = g_new (float, cony_image_scratch_size (w, h, c, ow, oh));
  guint x0, y0, cw, ch;
  cony_image_crop_region (w, h, crop, ow, oh, &x0, &y0, &cw, &ch);
  for (int with_scratch = 0; with_scratch < 2; with_scratch++) {
    cony_image_resize (f, w, h, stride, c, crop, ow, oh, out, with_scratch ? scratch : NULL);
    double worst = 0.0;
    for (guint oy = 0; oy < oh; oy++)
      for (guint ox = 0; ox < ow; ox++)
        for (guint k = 0; k < c; k++) {
          double want = reference (f, stride, c, x0, y0, cw, ch, ow, oh, ox, oy, k);
          worst = MAX (worst, fabs (out[((gsize) oy * ow + ox) * c + k] - want));
        }
    g_test_message ("%ux%ux%u stride %" G_GSIZE_FORMAT " crop %d -> %ux%u: max error %.2g", w, h, c,
        stride, crop, ow, oh, worst);
    g_assert_cmpfloat (worst, <, 1e-5);
  }
}

static void
test_crop_region (void)
{
  guint x0, y0, w, h;
  /* 640x480 to a square: the central 480x480 */
  cony_image_crop_region (640, 480, CONY_IMAGE_CROP_CENTER, 224, 224, &x0, &y0, &w, &h);
  g_assert_cmpuint (x0, ==, 80);
  g_assert_cmpuint (y0, ==, 0);
  g_assert_cmpuint (w, ==, 480);
  g_assert_cmpuint (h, ==, 480);
  /* portrait 341x512 to a square: the central 341 rows */
  cony_image_crop_region (341, 512, CONY_IMAGE_CROP_CENTER, 224, 224, &x0, &y0, &w, &h);
  g_assert_cmpuint (x0, ==, 0);
  g_assert_cmpuint (y0, ==, 85);
  g_assert_cmpuint (w, ==, 341);
  g_assert_cmpuint (h, ==, 341);
  /* none: the whole frame */
  cony_image_crop_region (640, 480, CONY_IMAGE_CROP_NONE, 224, 224, &x0, &y0, &w, &h);
  g_assert_cmpuint (x0 + y0, ==, 0);
  g_assert_cmpuint (w, ==, 640);
  g_assert_cmpuint (h, ==, 480);
  /* already the output's aspect: the whole frame */
  cony_image_crop_region (448, 448, CONY_IMAGE_CROP_CENTER, 224, 224, &x0, &y0, &w, &h);
  g_assert_cmpuint (w, ==, 448);
  g_assert_cmpuint (h, ==, 448);
}

/* An RGB frame gives, channel by channel, the same floats bit for bit as each channel
 * resized alone as a gray frame (the general loop): the integer CNN quantises these
 * values, so the RGB pass must not change their arithmetic. */
static void
test_rgb_equals_gray (void)
{
  const guint w = 640, h = 480, ow = 224, oh = 224;
  g_autofree guint8 *f = make_frame (w, h, 3, (gsize) w * 3);
  g_autofree guint8 *g = g_new (guint8, (gsize) w * h);
  g_autofree float *rgb = g_new (float, (gsize) ow *oh * 3);
  g_autofree float *gray = g_new (float, (gsize) ow *oh);
  GRand *r = g_rand_new_with_seed (5);
  for (guint i = 0; i < w * h * 3; i++) /* not a smooth pattern: every tap counts */
    f[i] = (guint8) g_rand_int_range (r, 0, 256);
  g_rand_free (r);
  for (int crop = 0; crop < 2; crop++) {
    ConyImageCrop cp = crop ? CONY_IMAGE_CROP_CENTER : CONY_IMAGE_CROP_NONE;
    cony_image_resize (f, w, h, (gsize) w * 3, 3, cp, ow, oh, rgb, NULL);
    for (guint k = 0; k < 3; k++) {
      for (guint i = 0; i < w * h; i++)
        g[i] = f[3 * i + k];
      cony_image_resize (g, w, h, w, 1, cp, ow, oh, gray, NULL);
      for (guint i = 0; i < ow * oh; i++)
        g_assert_true (memcmp (&rgb[3 * i + k], &gray[i], sizeof (float)) == 0);
    }
  }
}

/* A frame at the output size is the pixels / 255 exactly, padding ignored. */
static void
test_same_size_as_is (void)
{
  const guint w = 13, h = 7, c = 3;
  const gsize stride = 44; /* 39 bytes of pixels, 5 of padding */
  g_autofree guint8 *f = make_frame (w, h, c, stride);
  g_autofree float *out = g_new (float, w *h *c);
  cony_image_resize (f, w, h, stride, c, CONY_IMAGE_CROP_CENTER, w, h, out, NULL);
  for (guint y = 0; y < h; y++)
    for (guint i = 0; i < w * c; i++)
      g_assert_cmpfloat (out[y * w * c + i], ==, f[y * stride + i] * (1.0f / 255.0f));
}

/* Downscaling by whole and fractional factors, upscaling, odd sizes, padded strides,
 * both crops, RGB and gray. */
static void
test_area_average (void)
{
  check_resize (8, 6, 3, 24, CONY_IMAGE_CROP_NONE, 4, 3);       /* 2x: 2x2 block means */
  check_resize (31, 17, 3, 96, CONY_IMAGE_CROP_CENTER, 7, 7);   /* odd, padded, crop */
  check_resize (33, 29, 3, 100, CONY_IMAGE_CROP_NONE, 10, 9);   /* fractional factors */
  check_resize (5, 4, 3, 16, CONY_IMAGE_CROP_NONE, 11, 9);      /* upscaling */
  check_resize (45, 23, 1, 48, CONY_IMAGE_CROP_CENTER, 12, 12); /* gray, crop */
  check_resize (23, 45, 3, 72, CONY_IMAGE_CROP_CENTER, 9, 9);   /* portrait crop */
}

/* A uniform frame stays uniform (the weights of every output pixel sum to 1). */
static void
test_uniform (void)
{
  const guint w = 37, h = 21;
  g_autofree guint8 *f = g_malloc (w * h * 3);
  memset (f, 200, w * h * 3);
  g_autofree float *out = g_new (float, 16 * 16 * 3);
  cony_image_resize (f, w, h, w * 3, 3, CONY_IMAGE_CROP_NONE, 16, 16, out, NULL);
  for (guint i = 0; i < 16 * 16 * 3; i++)
    g_assert_cmpfloat (fabsf (out[i] - 200.0f / 255.0f), <, 1e-6f);
}

/* White stays at most 1.0 (the documented 0..1) however the taps' float rounding adds
 * up: a 5 x 710 white RGB picture to 12 x 3 gave 1.0000021 (fuzz_image). */
static void
test_white_at_most_one (void)
{
  static const guint sizes[][4] = { { 5, 710, 12, 3 }, { 4097, 3, 224, 224 }, { 9000, 6, 224, 224 },
    { 1, 1, 224, 224 }, { 640, 480, 224, 224 } };
  for (guint s = 0; s < G_N_ELEMENTS (sizes); s++) {
    guint w = sizes[s][0], h = sizes[s][1], ow = sizes[s][2], oh = sizes[s][3];
    for (guint c = 1; c <= 3; c += 2) {
      g_autofree guint8 *f = g_malloc ((gsize) w * h * c);
      memset (f, 255, (gsize) w * h * c);
      g_autofree float *out = g_new (float, (gsize) ow *oh *c);
      for (int crop = 0; crop < 2; crop++) {
        cony_image_resize (f, w, h, (gsize) w * c, c, crop, ow, oh, out, NULL);
        for (gsize i = 0; i < (gsize) ow * oh * c; i++)
          if (!(out[i] <= 1.0f && out[i] > 0.9999f))
            g_error ("%ux%u x%u to %ux%u (crop %d): out[%" G_GSIZE_FORMAT "] = %.9g", w, h, c, ow,
                oh, crop, i, out[i]);
      }
    }
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/image/crop-region", test_crop_region);
  g_test_add_func ("/image/same-size-as-is", test_same_size_as_is);
  g_test_add_func ("/image/area-average", test_area_average);
  g_test_add_func ("/image/uniform", test_uniform);
  g_test_add_func ("/image/white-at-most-one", test_white_at_most_one);
  g_test_add_func ("/image/rgb-equals-gray", test_rgb_equals_gray);
  return g_test_run ();
}
