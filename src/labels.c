/* Labels files (cony/labels.h). */
#include "cony/labels.h"
#include "cony/error.h"

#include <string.h>

char **
cony_labels_parse (const char *text, gsize len, const char *origin, guint *n_labels,
                   GError **error)
{
  /* Labels end up in GstStructure strings and JSON: only text is accepted. */
  const char *nul = memchr (text, '\0', len);
  const char *bad = NULL;
  if (nul != NULL || !g_utf8_validate (text, len, &bad)) {
    const char *at = nul != NULL ? nul : bad;
    guint line = 1;
    for (const char *p = text; p < at; p++)
      line += *p == '\n';
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: line %u is not text (%s)", origin,
                 line, nul != NULL ? "a NUL byte" : "not UTF-8");
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
  *n_labels = count;
  return lines;
}

char **
cony_labels_load (const char *path, guint *n_labels, GError **error)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  GError *io_error = NULL;
  if (!g_file_get_contents (path, &text, &len, &io_error)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s", io_error->message);
    g_error_free (io_error);
    return NULL;
  }
  return cony_labels_parse (text, len, path, n_labels, error);
}
