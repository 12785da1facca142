/* Labels files (cony/labels.h). */
#include "cony/labels.h"
#include "cony/error.h"

#include <math.h>
#include <string.h>

/* Cuts each "label<TAB>threshold" line at the tab and stores the threshold in @thr
 * (NAN when the line has none). */
static gboolean
split_thresholds (char **lines, guint n, const char *origin, double *thr, GError **error)
{
  for (guint i = 0; i < n; i++) {
    char *tab = strchr (lines[i], '\t');
    thr[i] = NAN;
    if (tab == NULL)
      continue;
    *tab = '\0';
    char *end = NULL;
    double t = g_ascii_strtod (tab + 1, &end);
    if (end == tab + 1 || *end != '\0' || !(t >= 0.0 && t <= 1.0)) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
          "%s, line %u (%s): the threshold "
          "after the tab is '%s', expected a number from 0 to 1",
          origin, i + 1, lines[i], tab + 1);
      return FALSE;
    }
    thr[i] = t;
  }
  return TRUE;
}

char **
cony_labels_parse (const char *text, gsize len, const char *origin, guint *n_labels,
    double **thresholds, GError **error)
{
  /* Labels end up in GstStructure strings and JSON: only text is accepted. */
  const char *nul = memchr (text, '\0', len);
  const char *bad = NULL;
  if (nul != NULL || !g_utf8_validate (text, len, &bad)) {
    const char *at = nul != NULL ? nul : bad;
    guint line = 1;
    for (const char *p = text; p < at; p++)
      line += *p == '\n';
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: line %u is not text (%s)", origin, line,
        nul != NULL ? "a NUL byte" : "not UTF-8");
    return NULL;
  }
  g_autofree char *copy = g_strndup (text, len);
  char **lines = g_strsplit (copy, "\n", -1);
  guint count = g_strv_length (lines);
  if (count > 0 && lines[count - 1][0] == '\0') {
    g_free (lines[count - 1]);
    lines[--count] = NULL;
  }
  for (guint i = 0; i < count; i++) {
    gsize l = strlen (lines[i]);
    if (l > 0 && lines[i][l - 1] == '\r')
      lines[i][l - 1] = '\0';
  }
  double *thr = g_new (double, MAX (count, 1));
  if (!split_thresholds (lines, count, origin, thr, error)) {
    g_free (thr);
    g_strfreev (lines);
    return NULL;
  }
  if (thresholds != NULL)
    *thresholds = thr;
  else
    g_free (thr);
  *n_labels = count;
  return lines;
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
