/* Token caps shared by the cony elements; see gstconytokens.h.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#include "gstconytokens.h"

#include <stdlib.h>
#include <string.h>

GstCaps *
gst_cony_tokens_caps_new (const GstConyTokenInfo *info)
{
  gint fps_n = 0, fps_d = 1;
  g_return_val_if_fail (info->dim > 0 && info->tokens_per_buffer > 0, NULL);

  if (info->rate_n > 0 && info->rate_d > 0) {
    if (!gst_util_fraction_multiply (info->rate_n, info->rate_d, 1, (gint) info->tokens_per_buffer,
            &fps_n, &fps_d))
      return NULL;
  }
  gchar *dims = g_strdup_printf ("%u:%u", info->dim, info->tokens_per_buffer);
  /* clang-format off */
  GstCaps *caps = gst_caps_new_simple ("other/tensors",
      "format", G_TYPE_STRING, "static",
      "num_tensors", G_TYPE_INT, 1,
      "types", G_TYPE_STRING, "float32",
      "dimensions", G_TYPE_STRING, dims,
      "framerate", GST_TYPE_FRACTION, fps_n, fps_d, NULL);
  /* clang-format on */
  if (info->lookahead_n != 0 && info->lookahead_d > 0)
    gst_caps_set_simple (caps, "lookahead", GST_TYPE_FRACTION, info->lookahead_n, info->lookahead_d,
        NULL);
  g_free (dims);
  return caps;
}

/* Parses "D[:K[:1...]]" (innermost first). */
static gboolean
gst_cony_tokens_parse_dimensions (const gchar *s, guint *dim, guint *k)
{
  gchar **parts = g_strsplit (s, ":", -1);
  guint n = g_strv_length (parts);
  gboolean ok = n >= 1 && n <= 16;
  guint64 v[16] = { 0 };
  for (guint i = 0; ok && i < n; i++) {
    gchar *end = NULL;
    const gchar *p = g_strstrip (parts[i]);
    v[i] = g_ascii_strtoull (p, &end, 10);
    ok = end != p && *end == '\0' && v[i] >= 1 && v[i] <= G_MAXINT;
    if (ok && i >= 2 && v[i] != 1)
      ok = FALSE;
  }
  g_strfreev (parts);
  if (!ok)
    return FALSE;
  *dim = (guint) v[0];
  *k = n >= 2 ? (guint) v[1] : 1;
  return TRUE;
}

gboolean
gst_cony_tokens_info_from_caps (GstConyTokenInfo *info, const GstCaps *caps, gchar **why)
{
  g_return_val_if_fail (info != NULL && why != NULL, FALSE);
  *why = NULL;
  if (caps == NULL || gst_caps_get_size (caps) != 1 || !gst_caps_is_fixed (caps)) {
    *why = g_strdup ("token caps must be fixed and have one structure");
    return FALSE;
  }
  const GstStructure *s = gst_caps_get_structure (caps, 0);
  if (!gst_structure_has_name (s, "other/tensors")) {
    *why = g_strdup_printf ("expected other/tensors, got %s", gst_structure_get_name (s));
    return FALSE;
  }
  const gchar *format = gst_structure_get_string (s, "format");
  if (format != NULL && strcmp (format, "static") != 0) {
    *why = g_strdup_printf ("expected format=static, got %s", format);
    return FALSE;
  }
  gint num = 1;
  if (gst_structure_has_field (s, "num_tensors")
      && (!gst_structure_get_int (s, "num_tensors", &num) || num != 1)) {
    *why = g_strdup ("expected num_tensors=1");
    return FALSE;
  }
  const gchar *types = gst_structure_get_string (s, "types");
  if (types == NULL || strcmp (types, "float32") != 0) {
    *why = g_strdup_printf ("expected types=float32, got %s", types ? types : "(none)");
    return FALSE;
  }
  const gchar *dims = gst_structure_get_string (s, "dimensions");
  guint dim = 0, k = 0;
  if (dims == NULL || !gst_cony_tokens_parse_dimensions (dims, &dim, &k)) {
    *why = g_strdup_printf ("expected dimensions=D:K (innermost first, positive), got %s",
        dims ? dims : "(none)");
    return FALSE;
  }
  gint fps_n = 0, fps_d = 1;
  if (gst_structure_has_field (s, "framerate")
      && !gst_structure_get_fraction (s, "framerate", &fps_n, &fps_d)) {
    *why = g_strdup ("framerate is not a fraction");
    return FALSE;
  }
  gint la_n = 0, la_d = 1;
  if (gst_structure_has_field (s, "lookahead")
      && (!gst_structure_get_fraction (s, "lookahead", &la_n, &la_d) || la_d <= 0)) {
    *why = g_strdup ("lookahead is not a fraction of seconds");
    return FALSE;
  }
  info->dim = dim;
  info->tokens_per_buffer = k;
  info->lookahead_n = la_n;
  info->lookahead_d = la_d;
  info->rate_n = 0;
  info->rate_d = 1;
  if (fps_n > 0 && fps_d > 0
      && !gst_util_fraction_multiply (fps_n, fps_d, (gint) k, 1, &info->rate_n, &info->rate_d)) {
    *why = g_strdup ("framerate x tokens per buffer overflows");
    return FALSE;
  }
  return TRUE;
}

gboolean
gst_cony_tokens_info_same_tokens (const GstConyTokenInfo *a, const GstConyTokenInfo *b)
{
  return a->dim == b->dim && (gint64) a->rate_n * b->rate_d == (gint64) b->rate_n * a->rate_d;
}

GstClockTime
gst_cony_time_add (GstClockTime t, guint64 d)
{
  if (!GST_CLOCK_TIME_IS_VALID (t))
    return GST_CLOCK_TIME_NONE;
  return d >= GST_CONY_TIME_MAX - t ? GST_CONY_TIME_MAX : t + d;
}

GstClockTime
gst_cony_segment_time (const GstSegment *seg, GstClockTime t, gboolean running)
{
  if (!GST_CLOCK_TIME_IS_VALID (t) || seg->format != GST_FORMAT_TIME)
    return GST_CLOCK_TIME_NONE;
  if (GST_CLOCK_TIME_IS_VALID (seg->stop) && t > seg->stop)
    t = seg->stop;
  if (t < seg->start)
    t = seg->start;
  return running ? gst_segment_to_running_time (seg, GST_FORMAT_TIME, t)
                 : gst_segment_to_stream_time (seg, GST_FORMAT_TIME, t);
}

GstClockTime
gst_cony_time_add_signed (GstClockTime t, gint64 d)
{
  if (d >= 0 || !GST_CLOCK_TIME_IS_VALID (t))
    return gst_cony_time_add (t, (guint64) d);
  guint64 back = (guint64) (-(d + 1)) + 1; /* |d|, G_MININT64 included */
  return back > t ? 0 : t - back;
}

GstClockTime
gst_cony_time_mul (GstClockTime a, guint64 b)
{
  if (!GST_CLOCK_TIME_IS_VALID (a))
    return GST_CLOCK_TIME_NONE;
  return b != 0 && a > GST_CONY_TIME_MAX / b ? GST_CONY_TIME_MAX : a * b;
}

GstClockTime
gst_cony_tokens_time (GstClockTime anchor, guint64 index, gint rate_n, gint rate_d)
{
  g_return_val_if_fail (GST_CLOCK_TIME_IS_VALID (anchor) && rate_n > 0 && rate_d > 0,
      GST_CLOCK_TIME_NONE);
  /* gst_util_uint64_scale gives G_MAXUINT64 on overflow, which saturates too */
  return gst_cony_time_add (anchor,
      gst_util_uint64_scale (index, GST_SECOND * (guint64) rate_d, (guint64) rate_n));
}

gint64
gst_cony_tokens_lookahead_ns (const GstConyTokenInfo *info)
{
  if (info->lookahead_n == 0 || info->lookahead_d <= 0)
    return 0;
  gint64 ns = (gint64) gst_util_uint64_scale (GST_SECOND, ABS ((gint64) info->lookahead_n),
      (guint64) info->lookahead_d);
  return info->lookahead_n < 0 ? -ns : ns;
}

void
gst_cony_tokens_caps_set_source (GstCaps *caps, const gchar *cnn, const gchar *sha256,
    const gchar *output)
{
  const gchar *fields[][2] = {
    { "cnn", cnn },
    { "cnn-sha256", sha256 },
    { "cnn-output", output },
  };
  for (guint i = 0; i < G_N_ELEMENTS (fields); i++)
    if (fields[i][1] != NULL)
      gst_caps_set_simple (caps, fields[i][0], G_TYPE_STRING, fields[i][1], NULL);
}

void
gst_cony_tokens_caps_set_mode (GstCaps *caps, const gchar *mode)
{
  gst_caps_set_simple (caps, "cnn-mode", G_TYPE_STRING, mode, NULL);
}
