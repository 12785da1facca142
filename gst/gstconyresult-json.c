/* The JSON formatter over result structures (gstconyresult.h): conyjson's records, and
 * conymqttsink's when it publishes metas itself. One escaping function, one writer per
 * GValue type; no field is written by hand.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstconyresult.h"

#include <math.h>

void
gst_cony_result_json_append_string (GString *o, const gchar *s)
{
  g_string_append_c (o, '"');
  for (const guchar *p = (const guchar *) (s ? s : ""); *p; p++) {
    switch (*p) {
      case '"': g_string_append (o, "\\\""); break;
      case '\\': g_string_append (o, "\\\\"); break;
      case '\n': g_string_append (o, "\\n"); break;
      case '\r': g_string_append (o, "\\r"); break;
      case '\t': g_string_append (o, "\\t"); break;
      default:
        if (*p < 0x20)
          g_string_append_printf (o, "\\u%04x", *p);
        else
          g_string_append_c (o, (gchar) *p);
    }
  }
  g_string_append_c (o, '"');
}

/* Scores in float precision (7 significant digits); non-finite: null. */
static void
gst_cony_result_json_number (GString *o, gdouble v)
{
  gchar buf[G_ASCII_DTOSTR_BUF_SIZE];
  if (isfinite (v))
    g_string_append (o, g_ascii_formatd (buf, sizeof buf, "%.7g", v));
  else
    g_string_append (o, "null");
}

static void gst_cony_result_json_value (GString *o, const GValue *value);

static void
gst_cony_result_json_array (GString *o, const GValue *value)
{
  g_string_append_c (o, '[');
  for (guint i = 0; i < gst_value_array_get_size (value); i++) {
    if (i > 0)
      g_string_append_c (o, ',');
    gst_cony_result_json_value (o, gst_value_array_get_value (value, i));
  }
  g_string_append_c (o, ']');
}

static void
gst_cony_result_json_value (GString *o, const GValue *value)
{
  GType t = G_VALUE_TYPE (value);

  if (t == G_TYPE_INT)
    g_string_append_printf (o, "%d", g_value_get_int (value));
  else if (t == G_TYPE_UINT)
    g_string_append_printf (o, "%u", g_value_get_uint (value));
  else if (t == G_TYPE_INT64)
    g_string_append_printf (o, "%" G_GINT64_FORMAT, g_value_get_int64 (value));
  else if (t == G_TYPE_UINT64 && g_value_get_uint64 (value) == GST_CLOCK_TIME_NONE)
    g_string_append (o, "null");
  else if (t == G_TYPE_UINT64)
    g_string_append_printf (o, "%" G_GUINT64_FORMAT, g_value_get_uint64 (value));
  else if (t == G_TYPE_FLOAT)
    gst_cony_result_json_number (o, g_value_get_float (value));
  else if (t == G_TYPE_DOUBLE)
    gst_cony_result_json_number (o, g_value_get_double (value));
  else if (t == G_TYPE_BOOLEAN)
    g_string_append (o, g_value_get_boolean (value) ? "true" : "false");
  else if (t == G_TYPE_STRING)
    gst_cony_result_json_append_string (o, g_value_get_string (value));
  else if (t == GST_TYPE_ARRAY)
    gst_cony_result_json_array (o, value);
  else if (t == GST_TYPE_STRUCTURE) {
    g_string_append_c (o, '{');
    gst_cony_result_json_append_fields (o, gst_value_get_structure (value));
    g_string_append_c (o, '}');
  } else {
    /* fractions ("4/1"), lists, ...: GStreamer's own text */
    gchar *text = gst_value_serialize (value);
    gst_cony_result_json_append_string (o, text);
    g_free (text);
  }
}

static gboolean
gst_cony_result_json_member (GQuark field, const GValue *value, gpointer user_data)
{
  GString *o = user_data;
  if (o->len > 0 && o->str[o->len - 1] != '{')
    g_string_append_c (o, ',');
  gst_cony_result_json_append_string (o, g_quark_to_string (field));
  g_string_append_c (o, ':');
  gst_cony_result_json_value (o, value);
  return TRUE;
}

void
gst_cony_result_json_append_fields (GString *o, const GstStructure *s)
{
  gst_structure_foreach (s, gst_cony_result_json_member, o);
}

void
gst_cony_result_json_append_record (GString *o, const gchar *type, const gchar *source,
    const GstStructure *s)
{
  GstStructure *head = gst_structure_new ("record", "type", G_TYPE_STRING, type, NULL);

  g_string_append_c (o, '{');
  if (source)
    gst_structure_set (head, "source", G_TYPE_STRING, source, NULL);
  gst_cony_result_json_append_fields (o, head);
  gst_cony_result_json_append_fields (o, s);
  g_string_append_c (o, '}');
  gst_structure_free (head);
}
