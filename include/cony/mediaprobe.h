/* Media files checked before decoding: what their headers claim and whether the data
 * those headers announce is all there.
 *
 * Decoders allocate what a header claims before they read the pixels, and most of them
 * say nothing when a file stops early (the missing part comes out grey). These checks
 * read the bytes themselves, allocate nothing in proportion to the claimed size, and let
 * the caller refuse a huge picture before any decoder runs and report a truncated one.
 *
 * Images (cony_image_probe): PNG (chunks to IEND; the image data inflated and counted,
 * not kept), JPEG (markers and entropy-coded data to the end-of-image marker), BMP (the
 * rows an uncompressed bitmap needs), GIF (blocks to the trailer), WebP (the RIFF size).
 * Other formats come back as CONY_MEDIA_UNKNOWN with nothing checked.
 * Ogg (cony_ogg_probe): a complete stream ends with a whole page marked end-of-stream.
 */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

/* The default of cony_image_probe()'s @max_pixels in the `cony` commands (100 Mpx: a
 * 9000x6000 photograph passes; a decoded 100 Mpx picture takes about 1 GB). */
#define CONY_IMAGE_MAX_PIXELS_DEFAULT G_GUINT64_CONSTANT (100000000)
/* The largest @max_pixels accepted (sizes below it cannot overflow 64-bit arithmetic). */
#define CONY_IMAGE_MAX_PIXELS_LIMIT (G_GUINT64_CONSTANT (1) << 40)

typedef enum
{
  CONY_MEDIA_UNKNOWN = 0,
  CONY_MEDIA_PNG,
  CONY_MEDIA_JPEG,
  CONY_MEDIA_BMP,
  CONY_MEDIA_GIF,
  CONY_MEDIA_WEBP,
  CONY_MEDIA_OGG,
} ConyMediaFormat;

typedef struct {
  ConyMediaFormat format;
  const char *format_name; /* "PNG", ...; "unknown" */
  guint64 width, height;   /* as the header claims (images; 0 when unknown) */
  gboolean truncated;      /* the file stops before the data its header announces */
  char missing[256];       /* when truncated: what is missing, in words */
} ConyMediaInfo;

/* Identifies an image by its first bytes and checks it. FALSE with an error
 * (CONY_ERROR_FORMAT) when a recognised format's header is malformed, or
 * (CONY_ERROR_INVALID) when width x height is over @max_pixels (at most
 * CONY_IMAGE_MAX_PIXELS_LIMIT); checked before the image data is read. Otherwise TRUE,
 * with @info->truncated set when the data stops early. Reads only @data. */
gboolean cony_image_probe (const guint8 *data, gsize size, guint64 max_pixels, ConyMediaInfo *info,
    GError **error);

/* An Ogg file: TRUE with @info->format CONY_MEDIA_OGG and @info->truncated when its
 * last page is cut or not marked end-of-stream; FALSE (no error) when @data is not Ogg. */
gboolean cony_ogg_probe (const guint8 *data, gsize size, ConyMediaInfo *info);

G_END_DECLS
