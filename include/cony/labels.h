/* Labels files: one class name per line (LF or CRLF line ends, a final newline optional),
 * as the elements' labels-file property takes them. */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

/* Splits @len bytes of @text into labels; *n_labels receives the count. Text with a NUL
 * byte or that is not UTF-8 is refused (CONY_ERROR_FORMAT, naming @origin and the line).
 * Returns a NULL-terminated array (g_strfreev() it). */
char **cony_labels_parse (const char *text, gsize len, const char *origin, guint *n_labels,
                          GError **error);
/* Reads @path and parses it with cony_labels_parse(). */
char **cony_labels_load (const char *path, guint *n_labels, GError **error);

G_END_DECLS
