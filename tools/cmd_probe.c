/* cony probe: what `cony tag` and `cony embed` check before decoding a media file, for
 * scripts (pipelines/lib.sh warns of a truncated file with it). */
#include "commands.h"
#include "media_file.h"

#include <stdio.h>

int
cony_cmd_probe (int argc, char **argv)
{
  gint64 max_pixels = 0;
  GOptionEntry entries[] = {
    { "max-pixels", 0, 0, G_OPTION_ARG_INT64, &max_pixels,
        "images: refuse a picture whose header claims more pixels (default 100000000)", "N" },
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr (GOptionContext)
      ctx = g_option_context_new ("FILE... - media type, claimed size, truncation");
  g_option_context_set_description (ctx,
      "One line per file: FILE: TYPE (GStreamer's typefind, by content), an image's size as\n"
      "its header claims it, and 'truncated: WHAT IS MISSING' when the file stops before\n"
      "the data its headers announce (PNG, JPEG, BMP, GIF, WebP, Ogg; other formats are\n"
      "not checked). Nothing is decoded.\n"
      "Exit status: 0 all whole, 3 some truncated, 1 some refused (unreadable, not a\n"
      "recognised format, malformed header, image over --max-pixels), 2 usage.\n");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  if (argc < 2 || max_pixels < 0 || (guint64) max_pixels > CONY_IMAGE_MAX_PIXELS_LIMIT) {
    fprintf (stderr, "usage: cony probe [--max-pixels N] FILE...\n");
    return 2;
  }
  int status = 0;
  for (int i = 1; i < argc; i++) {
    g_autofree char *type = NULL;
    ConyMediaInfo info;
    if (!cony_media_file_check (argv[i],
            max_pixels ? (guint64) max_pixels : CONY_IMAGE_MAX_PIXELS_DEFAULT, &type, &info,
            &error)) {
      fprintf (stderr, "cony: %s\n", error->message);
      g_clear_error (&error);
      status = 1;
      continue;
    }
    printf ("%s: %s", argv[i], type);
    if (info.width > 0)
      printf (", %" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT, info.width, info.height);
    if (info.truncated) {
      printf (", truncated: %s", info.missing);
      status = status ? status : 3;
    }
    printf ("\n");
  }
  return status;
}
