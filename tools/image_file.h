/* Image files (PNG, JPEG, BMP) for the CNN commands, decoded by GStreamer. */
#pragma once
#include <glib.h>

/* TRUE when @path names an image file by its extension (.png, .jpg, .jpeg, .bmp). */
gboolean cony_image_file_is_image (const char *path);
/* Decodes @path to 8-bit RGB (channels 3) or gray (channels 1): *width x *height pixels,
 * rows *stride bytes apart (g_free() the result). NULL with @error naming the file when
 * it cannot be read or decoded. */
guint8 *cony_image_file_load (const char *path, guint channels, guint *width, guint *height,
    gsize *stride, GError **error);
