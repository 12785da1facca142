/* Labels (cony/labels.h): the one check every class name passes, and labels files. */
#include "cony/labels.h"
#include "cony/error.h"

#include <math.h>
#include <string.h>

/* What json-glib makes of "\u0000": a C string cut there. See cony_json_mark_nul(). */
#define NUL_MARK 0xFDD0

static gboolean
refuse (GError **error, const char *label, gsize len, const char *what)
{
  g_autofree char *shown = g_strndup (label, MIN (len, 60));
  g_autofree char *escaped = g_strescape (shown, NULL);
  g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "\"%s%s\" %s", escaped, len > 60 ? "..." : "",
      what);
  return FALSE;
}

gboolean
cony_label_check (const char *label, gsize len, GError **error)
{
  if (len == 0)
    return refuse (error, label, len, "is empty");
  const char *bad = NULL;
  if (!g_utf8_validate_len (label, len, &bad)) {
    g_autofree char *what = g_strdup_printf ("is not UTF-8 at byte %td (%s)", bad - label,
        *bad == '\0' ? "a NUL" : "an invalid sequence or a lone surrogate");
    return refuse (error, label, len, what);
  }
  for (const char *p = label; p < label + len; p = g_utf8_next_char (p)) {
    gunichar c = g_utf8_get_char (p);
    g_autofree char *what = NULL;
    if (c == NUL_MARK)
      what = g_strdup_printf ("holds a NUL (\\u0000, or U+FDD0) at byte %td", p - label);
    else if (g_unichar_iscntrl (c))
      what = g_strdup_printf ("holds the control character U+%04X at byte %td", c, p - label);
    else if (g_unichar_type (c) == G_UNICODE_UNASSIGNED
        && ((c & 0xFFFE) == 0xFFFE || (c >= 0xFDD0 && c <= 0xFDEF)))
      what = g_strdup_printf ("holds the noncharacter U+%04X at byte %td", c, p - label);
    if (what)
      return refuse (error, label, len, what);
  }
  return TRUE;
}

char *
cony_json_mark_nul (const char *json)
{
  GString *out = g_string_new (NULL);
  for (const char *p = json; *p; p++) {
    if (p[0] == '\\' && strncmp (p + 1, "u0000", 5) == 0) {
      g_string_append (out, "\\ufdd0");
      p += 5;
    } else if (p[0] == '\\' && p[1] != '\0') {
      g_string_append_len (out, p++, 2); /* "\\" stays one escape: "\\u0000" is no NUL */
    } else {
      g_string_append_c (out, *p);
    }
  }
  return g_string_free (out, FALSE);
}

/* The text after the tab: a number from 0 to 1, with spaces around it or not. */
static gboolean
parse_threshold (const char *text, gsize len, double *thr)
{
  if (memchr (text, '\0', len) != NULL)
    return FALSE;
  g_autofree char *copy = g_strstrip (g_strndup (text, len));
  char *end = NULL;
  *thr = g_ascii_strtod (copy, &end);
  return end != copy && *end == '\0' && *thr >= 0.0 && *thr <= 1.0;
}

/* One line without its end: "label" or "label<TAB>threshold". */
static char *
parse_line (const char *line, gsize len, const char *origin, guint number, double *thr,
    GError **error)
{
  const char *tab = memchr (line, '\t', len);
  gsize label_len = tab ? (gsize) (tab - line) : len;
  *thr = NAN;
  if (!cony_label_check (line, label_len, error)) {
    g_prefix_error (error, "%s, line %u: the label ", origin, number);
    return NULL;
  }
  g_autofree char *label = g_strndup (line, label_len);
  if (tab && !parse_threshold (tab + 1, len - label_len - 1, thr)) {
    g_autofree char *cut = g_strndup (tab + 1, len - label_len - 1); /* and at a NUL */
    g_autofree char *shown = g_strescape (cut, NULL);
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s, line %u (%s): the threshold after the tab is '%s'%s, expected a number from 0 to 1",
        origin, number, label, shown, strlen (cut) < len - label_len - 1 ? " and a NUL" : "");
    return NULL;
  }
  return g_steal_pointer (&label);
}

char **
cony_labels_parse (const char *text, gsize len, const char *origin, guint *n_labels,
    double **thresholds, GError **error)
{
  if (len >= 3 && memcmp (text, "\xef\xbb\xbf", 3) == 0) { /* a BOM, as Windows editors write */
    text += 3;
    len -= 3;
  }
  GPtrArray *labels = g_ptr_array_new_with_free_func (g_free);
  GArray *thr = g_array_new (FALSE, FALSE, sizeof (double));
  const char *p = text, *end = text + len;
  while (end > text && (end[-1] == '\n' || end[-1] == '\r')) /* blank lines at the end */
    end--;
  while (p < end) {
    const char *nl = memchr (p, '\n', end - p);
    const char *next = nl ? nl + 1 : end;
    gsize line_len = (nl ? nl : end) - p;
    if (line_len > 0 && p[line_len - 1] == '\r') /* CRLF */
      line_len--;
    double t;
    char *label = parse_line (p, line_len, origin, labels->len + 1, &t, error);
    if (label == NULL) {
      g_ptr_array_free (labels, TRUE);
      g_array_free (thr, TRUE);
      return NULL;
    }
    g_ptr_array_add (labels, label);
    g_array_append_val (thr, t);
    p = next;
  }
  *n_labels = labels->len;
  g_ptr_array_add (labels, NULL);
  if (thresholds != NULL)
    *thresholds = (double *) g_array_free (thr, FALSE);
  else
    g_array_free (thr, TRUE);
  return (char **) g_ptr_array_free (labels, FALSE);
}

char **
cony_labels_load (const char *path, guint *n_labels, double **thresholds, GError **error)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  GError *io_error = NULL;
  if (!g_file_get_contents (path, &text, &len, &io_error)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s", io_error->message);
    g_error_free (io_error);
    return NULL;
  }
  return cony_labels_parse (text, len, path, n_labels, thresholds, error);
}
