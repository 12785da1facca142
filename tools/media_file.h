/* Media files for the CNN commands, recognised by their content (GStreamer's typefind,
 * not the file name) and decoded by GStreamer: images (checked first by
 * cony_image_probe(): a huge or truncated picture is refused before decoding) and audio
 * in any format GStreamer decodes. */
#pragma once
#include "cony/mediaprobe.h"

#include <glib.h>

typedef enum
{
  CONY_MEDIA_KIND_NPY,   /* a NumPy .npy array */
  CONY_MEDIA_KIND_WAV,   /* RIFF/WAVE: read by libcony's cony_wav_load_mono() */
  CONY_MEDIA_KIND_IMAGE, /* image/... */
  CONY_MEDIA_KIND_AUDIO, /* anything else GStreamer may decode to audio */
} ConyMediaKind;

/* What @path holds, by its first bytes; *type: GStreamer's media type for it
 * ("image/png", "application/ogg", ...; g_free() it). FALSE with @error naming the file
 * when it cannot be read or nothing recognises its content. */
gboolean cony_media_file_sniff (const char *path, ConyMediaKind *kind, char **type, GError **error);
/* What cony_image_file_load() and cony_audio_file_load_mono() check before decoding,
 * without decoding: @path's media type (*type, g_free() it) and, for images and Ogg,
 * @info (its claimed size, whether it is truncated). FALSE with @error naming the file
 * when it cannot be read, its header is malformed or an image is over @max_pixels. */
gboolean cony_media_file_check (const char *path, guint64 max_pixels, char **type,
    ConyMediaInfo *info, GError **error);
/* Decodes @path to 8-bit RGB (channels 3) or gray (channels 1): *width x *height pixels,
 * rows *stride bytes apart (g_free() the result). Refused (NULL, @error naming the file)
 * when its header claims more than @max_pixels, when it is truncated, or when it cannot
 * be decoded. */
guint8 *cony_image_file_load (const char *path, guint channels, guint64 max_pixels, guint *width,
    guint *height, gsize *stride, GError **error);
/* Decodes the first audio stream of @path to mono float samples at @rate (audioconvert
 * averages the channels, audioresample converts the rate); *n samples (g_free() the
 * result). A file that stops before the end its headers announce is decoded as far as
 * it goes, with a warning on stderr naming it and what is missing. */
float *cony_audio_file_load_mono (const char *path, guint rate, gsize *n, GError **error);
