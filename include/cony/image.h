/* Images to CNN input: crop and resample 8-bit frames to a model's input size.
 *
 * The resampling is an area average: each output pixel is the mean of the source
 * region it covers (fractional pixels weighted by their covered area), computed
 * separably (rows, then columns). Downscaling so averages every source pixel (no
 * aliasing from skipped pixels); upscaling gives each output pixel the source pixel
 * it falls in (or the weighted pair it straddles). A source already at the output
 * size is copied as it is (value / 255, no resampling).
 *
 * Crop policy (ConyImageCrop):
 *   CENTER: the largest centred region with the output's aspect ratio (a 640x480 frame
 *           to a 224x224 input: its central 480x480), so objects keep their shape;
 *   NONE:   the whole frame, stretched to the output's aspect ratio.
 * Values are divided by 255 (0..1, as torchvision's ToTensor; the model's
 * input_mean / input_std then apply inside the CNN).
 */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

typedef enum
{
  CONY_IMAGE_CROP_CENTER = 0,
  CONY_IMAGE_CROP_NONE,
} ConyImageCrop;

/* @src: @height rows of @width pixels of @channels bytes (RGB: 3, gray: 1), rows
 * @stride bytes apart. @out: @out_h x @out_w x @channels floats (HWC) in 0..1.
 * @scratch: NULL, or at least cony_image_scratch_size() floats reused between calls. */
void cony_image_resize (const guint8 *src, guint width, guint height, gsize stride, guint channels,
    ConyImageCrop crop, guint out_w, guint out_h, float *out, float *scratch);
/* Floats of scratch cony_image_resize() needs for these sizes. */
gsize cony_image_scratch_size (guint width, guint height, guint channels, guint out_w, guint out_h);
/* The source region CENTER (or NONE) uses: x0, y0, w, h in source pixels. */
void cony_image_crop_region (guint width, guint height, ConyImageCrop crop, guint out_w,
    guint out_h, guint *x0, guint *y0, guint *w, guint *h);

G_END_DECLS
