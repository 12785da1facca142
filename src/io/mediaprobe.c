/* Media files checked before decoding (see include/cony/mediaprobe.h). Every read is
 * bounds-checked against @size; nothing is allocated in proportion to a claimed size. */
#include "cony/mediaprobe.h"
#include "cony/error.h"

#include <string.h>
#include <zlib.h>

static guint32
be32 (const guint8 *p)
{
  return (guint32) p[0] << 24 | (guint32) p[1] << 16 | (guint32) p[2] << 8 | p[3];
}

static guint16
be16 (const guint8 *p)
{
  return (guint16) (p[0] << 8 | p[1]);
}

static guint32
le32 (const guint8 *p)
{
  return (guint32) p[3] << 24 | (guint32) p[2] << 16 | (guint32) p[1] << 8 | p[0];
}

static guint32
le24 (const guint8 *p)
{
  return (guint32) p[2] << 16 | (guint32) p[1] << 8 | p[0];
}

static guint16
le16 (const guint8 *p)
{
  return (guint16) (p[1] << 8 | p[0]);
}

static void G_GNUC_PRINTF (2, 3) truncated (ConyMediaInfo *info, const char *fmt, ...)
{
  /* a second reason follows the first */
  gsize used = info->truncated ? strlen (info->missing) : 0;
  if (used > 0 && used + 2 < sizeof info->missing) {
    memcpy (info->missing + used, "; ", 3);
    used += 2;
  }
  va_list ap;
  va_start (ap, fmt);
  info->truncated = TRUE;
  g_vsnprintf (info->missing + used, sizeof info->missing - used, fmt, ap);
  va_end (ap);
}

#define BAD(...) \
  do { \
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, __VA_ARGS__); \
    return FALSE; \
  } while (0)

/* The size check every format makes as soon as its header gives the size. */
static gboolean
check_size (const ConyMediaInfo *info, guint64 max_pixels, GError **error)
{
  if (info->width == 0 || info->height == 0)
    BAD ("a %s of %" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT " pixels (an empty picture)",
        info->format_name, info->width, info->height);
  guint64 max = MIN (max_pixels, CONY_IMAGE_MAX_PIXELS_LIMIT);
  if (info->width > max || info->height > max || info->width > max / info->height) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "its %s header claims %" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT
        " pixels, over the limit of %" G_GUINT64_FORMAT " pixels (refused before decoding)",
        info->format_name, info->width, info->height, max);
    return FALSE;
  }
  return TRUE;
}

/* ---- PNG ---------------------------------------------------------------------------- */

/* Bytes of inflated image data a PNG of this size and pixel layout holds: per row a
 * filter byte and its packed pixels, per Adam7 pass when interlaced. */
static guint64
png_raw_bytes (guint64 w, guint64 h, guint bits_per_pixel, gboolean interlaced)
{
  static const guint8 pass[7][4] = { { 0, 0, 8, 8 }, { 4, 0, 8, 8 }, { 0, 4, 4, 8 }, { 2, 0, 4, 4 },
    { 0, 2, 2, 4 }, { 1, 0, 2, 2 }, { 0, 1, 1, 2 } };
  if (!interlaced)
    return h * (1 + (w * bits_per_pixel + 7) / 8);
  guint64 total = 0;
  for (guint p = 0; p < 7; p++) {
    guint64 pw = w > pass[p][0] ? (w - pass[p][0] + pass[p][2] - 1) / pass[p][2] : 0;
    guint64 ph = h > pass[p][1] ? (h - pass[p][1] + pass[p][3] - 1) / pass[p][3] : 0;
    if (pw > 0 && ph > 0)
      total += ph * (1 + (pw * bits_per_pixel + 7) / 8);
  }
  return total;
}

/* Bits per pixel of a valid colour type / bit depth pair; 0 for an invalid one. */
static guint
png_bits_per_pixel (guint color, guint depth)
{
  static const guint channels[7] = { 1, 0, 3, 1, 2, 0, 4 };
  gboolean ok = color < 7 && channels[color] != 0
      && (color == 0       ? (depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16)
              : color == 3 ? (depth == 1 || depth == 2 || depth == 4 || depth == 8)
                           : (depth == 8 || depth == 16));
  return ok ? channels[color] * depth : 0;
}

typedef struct {
  z_stream z;
  guint64 want, got;
  gboolean ended, failed;
  guint8 out[16384];
} Inflate;

/* Inflates @len more bytes of the zlib stream, counting (not keeping) what comes out,
 * until @want bytes came out: a compression bomb costs no more than the picture. */
static void
inflate_feed (Inflate *f, const guint8 *data, gsize len)
{
  f->z.next_in = (Bytef *) data;
  while (len > 0 && !f->ended && !f->failed && f->got < f->want) {
    uInt chunk = (uInt) MIN (len, (gsize) G_MAXUINT32 / 2);
    f->z.next_in = (Bytef *) data;
    f->z.avail_in = chunk;
    while (f->z.avail_in > 0 && f->got < f->want) {
      f->z.next_out = f->out;
      f->z.avail_out = (uInt) MIN ((guint64) sizeof f->out, f->want - f->got);
      int rc = inflate (&f->z, Z_NO_FLUSH);
      f->got += (guint64) (f->z.next_out - f->out);
      if (rc == Z_STREAM_END) {
        f->ended = TRUE;
        break;
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR) {
        f->failed = TRUE;
        break;
      }
      if (rc == Z_BUF_ERROR && f->z.next_out == f->out)
        break;
    }
    data += chunk;
    len -= chunk;
  }
}

static gboolean
probe_png (const guint8 *d, gsize size, guint64 max_pixels, ConyMediaInfo *info, GError **error)
{
  if (size < 8 + 8 + 13 + 4)
    BAD ("a PNG cut short inside its header (%" G_GSIZE_FORMAT " bytes)", size);
  if (be32 (d + 8) != 13 || memcmp (d + 12, "IHDR", 4) != 0)
    BAD ("a PNG without its IHDR header chunk");
  const guint8 *h = d + 16;
  info->width = be32 (h);
  info->height = be32 (h + 4);
  guint bpp = png_bits_per_pixel (h[9], h[8]);
  if (info->width > G_MAXINT32 || info->height > G_MAXINT32 || bpp == 0 || h[10] != 0 || h[11] != 0
      || h[12] > 1)
    BAD ("a PNG with an invalid IHDR (size %" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT
         ", colour type %u, bit depth %u, interlace %u)",
        info->width, info->height, h[9], h[8], h[12]);
  if (!check_size (info, max_pixels, error))
    return FALSE;

  Inflate *f = g_new0 (Inflate, 1);
  f->want = png_raw_bytes (info->width, info->height, bpp, h[12] == 1);
  if (inflateInit (&f->z) != Z_OK) {
    g_free (f);
    BAD ("a PNG that zlib cannot start inflating");
  }
  gsize pos = 8;
  gboolean iend = FALSE, bad_len = FALSE;
  char chunk_type[5] = "";
  while (!iend && pos + 8 <= size) {
    guint32 len = be32 (d + pos);
    memcpy (chunk_type, d + pos + 4, 4);
    if ((bad_len = len > G_MAXINT32))
      break; /* a length PNG forbids */
    if ((guint64) pos + 12 + len > size) {
      if (memcmp (chunk_type, "IDAT", 4) == 0) /* what it holds still counts */
        inflate_feed (f, d + pos + 8, size - pos - 8);
      truncated (info, "the file ends inside its %s chunk (at byte %" G_GSIZE_FORMAT ")",
          g_strcanon (chunk_type, G_CSET_a_2_z G_CSET_A_2_Z G_CSET_DIGITS, '?'), size);
      break;
    }
    if (memcmp (chunk_type, "IDAT", 4) == 0)
      inflate_feed (f, d + pos + 8, len);
    iend = memcmp (chunk_type, "IEND", 4) == 0;
    pos += 12 + (gsize) len;
  }
  if (!info->truncated && !iend && !bad_len)
    truncated (info, "the file ends at byte %" G_GSIZE_FORMAT " without the IEND chunk", size);
  if (!f->failed && f->got < f->want) {
    guint64 row = f->want / info->height; /* exact when not interlaced */
    if (h[12] == 0)
      truncated (info,
          "its image data holds %" G_GUINT64_FORMAT " of the %" G_GUINT64_FORMAT
          " rows the header announces",
          f->got / row, info->height);
    else
      truncated (info,
          "its image data holds %" G_GUINT64_FORMAT " of the %" G_GUINT64_FORMAT
          " bytes the header announces",
          f->got, f->want);
  }
  gboolean failed = f->failed && !bad_len;
  char msg[64];
  g_strlcpy (msg, f->z.msg ? f->z.msg : "invalid data", sizeof msg);
  inflateEnd (&f->z);
  g_free (f);
  if (bad_len)
    BAD ("a PNG with a chunk length over 2^31 - 1 at byte %" G_GSIZE_FORMAT, pos);
  if (failed)
    BAD ("a PNG whose compressed image data is corrupt (zlib: %s)", msg);
  return TRUE;
}

/* ---- JPEG --------------------------------------------------------------------------- */

/* Past the entropy-coded data that starts at @pos: the position of the next marker's
 * 0xFF (byte stuffing 0xFF00 and restart markers are part of the data), or @size. */
static gsize
jpeg_skip_scan (const guint8 *d, gsize size, gsize pos)
{
  for (; pos + 1 < size; pos++)
    if (d[pos] == 0xFF && d[pos + 1] != 0x00 && d[pos + 1] != 0xFF
        && !(d[pos + 1] >= 0xD0 && d[pos + 1] <= 0xD7))
      return pos;
  return size;
}

static gboolean
probe_jpeg (const guint8 *d, gsize size, guint64 max_pixels, ConyMediaInfo *info, GError **error)
{
  gsize pos = 2;
  gboolean have_frame = FALSE;
  while (TRUE) {
    /* stray bytes before a marker are skipped, as libjpeg does (with a warning) */
    while (pos < size && d[pos] != 0xFF)
      pos++;
    while (pos < size && d[pos] == 0xFF && pos + 1 < size && d[pos + 1] == 0xFF)
      pos++; /* fill bytes */
    if (pos + 2 > size) {
      truncated (info,
          "the file ends at byte %" G_GSIZE_FORMAT " %s, before the end-of-image marker", size,
          have_frame ? "inside its compressed image data" : "inside its headers");
      break;
    }
    guint8 m = d[pos + 1];
    pos += 2;
    if (m == 0xD9) /* end of image */
      break;
    if (m == 0x01 || (m >= 0xD0 && m <= 0xD7))
      continue; /* markers without a segment */
    if (pos + 2 > size) {
      truncated (info, "the file ends at byte %" G_GSIZE_FORMAT " inside a marker segment", size);
      break;
    }
    guint len = be16 (d + pos);
    if (len < 2)
      BAD ("a JPEG with a marker segment of length %u (byte %" G_GSIZE_FORMAT ")", len, pos);
    if (pos + len > size) {
      truncated (info, "the file ends at byte %" G_GSIZE_FORMAT " inside a marker segment", size);
      break;
    }
    gboolean sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
    if (sof && !have_frame) {
      if (len < 8)
        BAD ("a JPEG with a frame header of %u bytes", len);
      info->height = be16 (d + pos + 3);
      info->width = be16 (d + pos + 5);
      if (!check_size (info, max_pixels, error))
        return FALSE;
      have_frame = TRUE;
    }
    pos += len;
    if (m == 0xDA) { /* start of scan: its entropy-coded data follows */
      if (!have_frame)
        BAD ("a JPEG whose image data comes before its frame header");
      pos = jpeg_skip_scan (d, size, pos);
    }
  }
  if (!have_frame && !info->truncated)
    BAD ("a JPEG without a frame header (no size)");
  if (!have_frame)
    BAD ("a JPEG cut short before its frame header (%" G_GSIZE_FORMAT " bytes)", size);
  return TRUE;
}

/* ---- BMP ---------------------------------------------------------------------------- */

static gboolean
probe_bmp (const guint8 *d, gsize size, guint64 max_pixels, ConyMediaInfo *info, GError **error)
{
  if (size < 26)
    BAD ("a BMP cut short inside its header (%" G_GSIZE_FORMAT " bytes)", size);
  guint32 offset = le32 (d + 10), header = le32 (d + 14);
  guint bpp, compression = 0;
  if (header == 12) { /* OS/2 BITMAPCOREHEADER */
    info->width = le16 (d + 18);
    info->height = le16 (d + 20);
    bpp = le16 (d + 24);
  } else {
    if (header < 40 || size < 34)
      BAD ("a BMP with an unknown header (%u bytes) or cut short inside it", header);
    gint32 w = (gint32) le32 (d + 18), h = (gint32) le32 (d + 22);
    if (w <= 0 || h == 0)
      BAD ("a BMP with an invalid size (%d x %d)", w, h);
    info->width = (guint64) w;
    info->height = h < 0 ? (guint64) (-(gint64) h) : (guint64) h; /* negative: top-down */
    bpp = le16 (d + 28);
    compression = le32 (d + 30);
  }
  if (!check_size (info, max_pixels, error))
    return FALSE;
  if (offset > size) {
    truncated (info, "the file ends at byte %" G_GSIZE_FORMAT " before its pixels (at byte %u)",
        size, offset);
  } else if ((compression == 0 || compression == 3 || compression == 6) && bpp > 0 && bpp <= 64) {
    /* uncompressed rows, each padded to 4 bytes */
    guint64 row = (info->width * bpp + 31) / 32 * 4, have = (size - offset) / row;
    if (have < info->height)
      truncated (info,
          "it holds %" G_GUINT64_FORMAT " of the %" G_GUINT64_FORMAT " rows its header announces",
          have, info->height);
  }
  return TRUE;
}

/* ---- GIF ---------------------------------------------------------------------------- */

/* Past the data sub-blocks starting at @pos (each a length byte and its bytes, ending
 * with a zero length); @size when they run past the end. */
static gsize
gif_skip_blocks (const guint8 *d, gsize size, gsize pos)
{
  while (pos < size && d[pos] != 0)
    pos += 1 + (gsize) d[pos];
  return pos < size ? pos + 1 : size + 1;
}

static gboolean
probe_gif (const guint8 *d, gsize size, guint64 max_pixels, ConyMediaInfo *info, GError **error)
{
  if (size < 13)
    BAD ("a GIF cut short inside its header (%" G_GSIZE_FORMAT " bytes)", size);
  info->width = le16 (d + 6);
  info->height = le16 (d + 8);
  if (!check_size (info, max_pixels, error))
    return FALSE;
  gsize pos = 13 + ((d[10] & 0x80) ? 3 * ((gsize) 2 << (d[10] & 7)) : 0);
  guint frames = 0;
  while (pos < size && d[pos] != 0x3B) {
    if (d[pos] == 0x21) { /* extension: label, sub-blocks */
      pos = gif_skip_blocks (d, size, pos + 2);
    } else if (d[pos] == 0x2C) { /* image: descriptor, colour table, LZW size, sub-blocks */
      if (pos + 10 > size) {
        pos = size;
        break;
      }
      ConyMediaInfo frame = *info;
      frame.width = le16 (d + pos + 5);
      frame.height = le16 (d + pos + 7);
      if (frame.width > 0 && frame.height > 0 && !check_size (&frame, max_pixels, error))
        return FALSE;
      guint8 flags = d[pos + 9];
      pos += 10 + ((flags & 0x80) ? 3 * ((gsize) 2 << (flags & 7)) : 0) + 1;
      pos = gif_skip_blocks (d, size, pos);
      frames++;
    } else {
      BAD ("a GIF with an unknown block 0x%02x at byte %" G_GSIZE_FORMAT, d[pos], pos);
    }
  }
  if (pos >= size)
    truncated (info, "the file ends at byte %" G_GSIZE_FORMAT " %s, before the GIF trailer", size,
        frames > 0 ? "after its first frame" : "before its first frame is complete");
  return TRUE;
}

/* ---- WebP --------------------------------------------------------------------------- */

static gboolean
probe_webp (const guint8 *d, gsize size, guint64 max_pixels, ConyMediaInfo *info, GError **error)
{
  const guint8 *c = d + 12;
  gboolean lossless = size >= 16 && memcmp (c, "VP8L", 4) == 0;
  if (size < (lossless ? 25u : 30u))
    BAD ("a WebP cut short inside its header (%" G_GSIZE_FORMAT " bytes)", size);
  if (memcmp (c, "VP8 ", 4) == 0) {
    info->width = le16 (c + 14) & 0x3FFF;
    info->height = le16 (c + 16) & 0x3FFF;
  } else if (lossless) {
    guint32 bits = le32 (c + 9);
    info->width = (bits & 0x3FFF) + 1;
    info->height = ((bits >> 14) & 0x3FFF) + 1;
  } else if (memcmp (c, "VP8X", 4) == 0) {
    info->width = (guint64) le24 (c + 12) + 1;
    info->height = (guint64) le24 (c + 15) + 1;
  } else {
    BAD ("a WebP with an unknown first chunk");
  }
  if (!check_size (info, max_pixels, error))
    return FALSE;
  guint64 riff = (guint64) le32 (d + 4) + 8;
  if (riff > size)
    truncated (info,
        "it holds %" G_GSIZE_FORMAT " of the %" G_GUINT64_FORMAT " bytes its RIFF header announces",
        size, riff);
  return TRUE;
}

gboolean
cony_image_probe (const guint8 *data, gsize size, guint64 max_pixels, ConyMediaInfo *info,
    GError **error)
{
  static const struct {
    ConyMediaFormat format;
    const char *name, *magic;
    guint offset, len;
    gboolean (*probe) (const guint8 *, gsize, guint64, ConyMediaInfo *, GError **);
  } formats[] = {
    { CONY_MEDIA_PNG, "PNG", "\x89PNG\r\n\x1a\n", 0, 8, probe_png },
    { CONY_MEDIA_JPEG, "JPEG", "\xFF\xD8\xFF", 0, 3, probe_jpeg },
    { CONY_MEDIA_BMP, "BMP", "BM", 0, 2, probe_bmp },
    { CONY_MEDIA_GIF, "GIF", "GIF87a", 0, 6, probe_gif },
    { CONY_MEDIA_GIF, "GIF", "GIF89a", 0, 6, probe_gif },
    { CONY_MEDIA_WEBP, "WebP", "WEBP", 8, 4, probe_webp },
  };
  memset (info, 0, sizeof *info);
  info->format_name = "unknown";
  for (guint i = 0; i < G_N_ELEMENTS (formats); i++) {
    if (size < formats[i].offset + formats[i].len
        || memcmp (data + formats[i].offset, formats[i].magic, formats[i].len) != 0)
      continue;
    if (formats[i].format == CONY_MEDIA_WEBP && memcmp (data, "RIFF", 4) != 0)
      continue;
    info->format = formats[i].format;
    info->format_name = formats[i].name;
    return formats[i].probe (data, size, max_pixels, info, error);
  }
  return TRUE;
}

/* ---- Ogg ---------------------------------------------------------------------------- */

gboolean
cony_ogg_probe (const guint8 *d, gsize size, ConyMediaInfo *info)
{
  memset (info, 0, sizeof *info);
  info->format_name = "unknown";
  if (size < 27 || memcmp (d, "OggS", 4) != 0)
    return FALSE;
  info->format = CONY_MEDIA_OGG;
  info->format_name = "Ogg";
  /* Walk the pages from the start: the last one must be whole and marked end-of-stream
   * (flag 4) for its stream. */
  gsize pos = 0;
  guint8 last_flags = 0;
  while (pos + 27 <= size && memcmp (d + pos, "OggS", 4) == 0) {
    guint n = d[pos + 26];
    if (pos + 27 + n > size)
      break;
    gsize body = 0;
    for (guint i = 0; i < n; i++)
      body += d[pos + 27 + i];
    if (pos + 27 + n + body > size)
      break;
    last_flags = d[pos + 5];
    pos += 27 + n + body;
  }
  if (pos < size)
    truncated (info,
        "the file ends inside an Ogg page at byte %" G_GSIZE_FORMAT
        ", the rest of the stream missing",
        pos);
  else if (!(last_flags & 4))
    truncated (info, "its last Ogg page is not marked end-of-stream, the rest missing");
  return TRUE;
}
