/* Image and Ogg files as `cony tag` / `cony embed` check them before decoding
 * (cony_image_probe, cony_ogg_probe), and the crop and area-average resize the picture
 * then goes through (cony_image_resize). The decoding itself is GStreamer's plugins
 * (gdk-pixbuf, libjpeg, libpng), not ours. */
#include "fuzz.h"
#include "cony/image.h"
#include "cony/mediaprobe.h"

#include <math.h>
#include <string.h>

/* The pixel limit: small enough that counting a PNG's rows stays fast. */
#define MAX_PIXELS (1 << 16)

static void
check_info (const ConyMediaInfo *info)
{
  g_assert (info->format_name != NULL);
  g_assert (
      !info->truncated || (info->missing[0] != '\0' && g_utf8_validate (info->missing, -1, NULL)));
}

/* Resizes a picture of the probed size, its pixels taken from the input's bytes, to an
 * output size and crop the input's last bytes pick: every value in [0, 1]. */
static void
resize (const ConyMediaInfo *info, const uint8_t *data, size_t size)
{
  guint w = (guint) info->width, h = (guint) info->height;
  guint8 last = data[size - 1], prev = size > 1 ? data[size - 2] : 0;
  guint channels = (last & 1) ? 3 : 1, out_w = 1 + (last >> 2) % 64, out_h = 1 + prev % 64;
  gsize stride = (gsize) w * channels + (prev >> 6);
  ConyImageCrop crop = (last & 2) ? CONY_IMAGE_CROP_NONE : CONY_IMAGE_CROP_CENTER;
  guint8 *pixels = g_malloc (stride * h);
  for (gsize i = 0; i < stride * h; i++)
    pixels[i] = data[i % size];
  float *out = g_new (float, (gsize) out_w *out_h *channels);
  float *scratch = g_new (float, cony_image_scratch_size (w, h, channels, out_w, out_h));
  cony_image_resize (pixels, w, h, stride, channels, crop, out_w, out_h, out,
      (last & 4) ? scratch : NULL);
  for (gsize i = 0; i < (gsize) out_w * out_h * channels; i++)
    g_assert (out[i] >= -1e-6f && out[i] <= 1.0f + 1e-6f);
  g_free (scratch);
  g_free (out);
  g_free (pixels);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  ConyMediaInfo info;
  GError *error = NULL;
  if (!cony_image_probe (data, size, MAX_PIXELS, &info, &error)) {
    fuzz_check_error (g_steal_pointer (&error));
  } else {
    check_info (&info);
    if (info.format != CONY_MEDIA_UNKNOWN) {
      g_assert (info.width > 0 && info.height > 0 && info.width * info.height <= MAX_PIXELS);
      if (!info.truncated && size > 0)
        resize (&info, data, size);
    }
  }
  /* the tightest limit the header must still be measured against */
  if (!cony_image_probe (data, size, 1, &info, &error))
    fuzz_check_error (g_steal_pointer (&error));
  else
    g_assert (info.format == CONY_MEDIA_UNKNOWN || (info.width == 1 && info.height == 1));
  if (cony_ogg_probe (data, size, &info))
    check_info (&info);
  return 0;
}
