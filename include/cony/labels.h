/* Labels files: one class name per line (LF or CRLF line ends, a final newline optional),
 * as the elements' labels-file property takes them. A line may give the label's own
 * threshold after a tab, "label<TAB>0.7" (as DL Streamer's model-proc gives one per label). */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

/* Splits @len bytes of @text into labels; *n_labels receives the count. Text with a NUL
 * byte or that is not UTF-8, and a threshold after a tab that is not a number from 0 to 1,
 * are refused (CONY_ERROR_FORMAT, naming @origin and the line). Returns a NULL-terminated
 * array of the labels without their thresholds (g_strfreev() it). @thresholds (may be
 * NULL) receives one per label, NAN where the line gives none (g_free() it). */
char **cony_labels_parse (const char *text, gsize len, const char *origin, guint *n_labels,
    double **thresholds, GError **error);
/* Reads @path and parses it with cony_labels_parse(). */
char **cony_labels_load (const char *path, guint *n_labels, double **thresholds, GError **error);

G_END_DECLS
