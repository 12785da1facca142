/* cony_image_probe / cony_ogg_probe (include/cony/mediaprobe.h) on the image fuzz seeds
 * (tests/fuzz/seeds/image/): each whole file is what its name says and not truncated;
 * every shorter prefix of it is reported, truncated or refused, never passed as whole;
 * sizes over the limit are refused with the claimed size. */
#include "cony/error.h"
#include "cony/mediaprobe.h"

#include <string.h>

typedef struct {
  const char *file;
  ConyMediaFormat format;
  guint64 width, height;
} Seed;

static const Seed seeds[] = {
  { "rgb-8x6.png", CONY_MEDIA_PNG, 8, 6 },
  { "gray16-5x4.png", CONY_MEDIA_PNG, 5, 4 },
  { "palette-7x3.png", CONY_MEDIA_PNG, 7, 3 },
  { "smpte-16x8.jpg", CONY_MEDIA_JPEG, 16, 8 },
  { "topdown-5x3.bmp", CONY_MEDIA_BMP, 5, 3 },
  { "os2-3x2.bmp", CONY_MEDIA_BMP, 3, 2 },
  { "two-2x2.gif", CONY_MEDIA_GIF, 2, 2 },
  { "lossless-4x3.webp", CONY_MEDIA_WEBP, 4, 3 },
  { "extended-10x5.webp", CONY_MEDIA_WEBP, 10, 5 },
};

static guint8 *
read_seed (const char *file, gsize *size)
{
  g_autofree char *path = g_build_filename (g_getenv ("CONY_SOURCE_ROOT"), "tests", "fuzz", "seeds",
      "image", file, NULL);
  gchar *data = NULL;
  g_assert_true (g_file_get_contents (path, &data, size, NULL));
  return (guint8 *) data;
}

static void
test_seeds_and_prefixes (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (seeds); i++) {
    gsize size;
    g_autofree guint8 *data = read_seed (seeds[i].file, &size);
    ConyMediaInfo info;
    GError *error = NULL;
    g_assert_true (cony_image_probe (data, size, 1000, &info, &error));
    g_assert_no_error (error);
    g_assert_cmpint (info.format, ==, seeds[i].format);
    g_assert_cmpuint (info.width, ==, seeds[i].width);
    g_assert_cmpuint (info.height, ==, seeds[i].height);
    g_assert_false (info.truncated);
    /* every prefix: refused or truncated (a BMP's last row padding aside: whole rows) */
    for (gsize n = 0; n < size; n++) {
      if (cony_image_probe (data, n, 1000, &info, &error)) {
        if (info.format == CONY_MEDIA_UNKNOWN)
          continue; /* too short for the magic */
        if (!info.truncated)
          g_error ("%s cut to %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT " bytes passed as whole",
              seeds[i].file, n, size);
        g_assert_cmpstr (info.missing, !=, "");
      } else {
        g_assert_nonnull (error);
        g_clear_error (&error);
      }
    }
    /* over the limit: refused, naming the claimed size */
    if (cony_image_probe (data, size, seeds[i].width * seeds[i].height - 1, &info, &error))
      g_error ("%s passed a limit under its size", seeds[i].file);
    g_autofree char *claim = g_strdup_printf ("%" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT,
        seeds[i].width, seeds[i].height);
    g_assert_error (error, CONY_ERROR, CONY_ERROR_INVALID);
    g_assert_nonnull (strstr (error->message, claim));
    g_clear_error (&error);
  }
}

static void
test_ogg (void)
{
  gsize size;
  g_autofree guint8 *data = read_seed ("tone.ogg", &size);
  ConyMediaInfo info;
  g_assert_true (cony_ogg_probe (data, size, &info));
  g_assert_false (info.truncated);
  for (gsize n = 27; n < size; n += 97) {
    g_assert_true (cony_ogg_probe (data, n, &info));
    g_assert_true (info.truncated);
  }
  g_assert_false (cony_ogg_probe ((const guint8 *) "RIFF....WAVE", 12, &info));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/mediaprobe/seeds-and-prefixes", test_seeds_and_prefixes);
  g_test_add_func ("/mediaprobe/ogg", test_ogg);
  return g_test_run ();
}
