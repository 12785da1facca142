/* Class names, and labels files: one class name per line (LF or CRLF line ends, a final
 * newline optional), as the elements' labels-file property takes them. A line may give
 * the label's own threshold after a tab, "label<TAB>0.7" (as DL Streamer's model-proc
 * gives one per label). */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

/* The one check every label passes, whatever its source (labels files, a model's config,
 * a CNN's metadata): labels end up in GstStructure strings, JSON records and Python str.
 * Refuses (CONY_ERROR_FORMAT) the empty label, bytes that are not UTF-8 (what a lone
 * surrogate escape such as "\ud800" decodes to), a NUL, any control character (Unicode
 * Cc: tab, newline, CR, ESC, DEL, C1) and Unicode noncharacters. The message quotes the
 * label and names what is wrong and where; callers prefix the source and the index. */
gboolean cony_label_check (const char *label, gsize len, GError **error);

/* json-glib gives strings as C strings, so "a\u0000b" would read as "a": returns a copy
 * of @json with each \u0000 escape turned into \ufdd0 (a noncharacter), which
 * cony_label_check() refuses as a NUL. */
char *cony_json_mark_nul (const char *json);

/* Splits @len bytes of @text into labels; *n_labels receives the count. A leading UTF-8
 * BOM is skipped and blank lines at the end are ignored. Each line's label (the text
 * before the first tab, spaces kept) must pass cony_label_check(); the threshold after
 * the tab must be a number from 0 to 1, spaces around it allowed ("a\t0.5", "a\t 0.5"
 * and "a\t0.5 " are the same). Refusals are CONY_ERROR_FORMAT, naming @origin and the
 * line. Returns a NULL-terminated array of the labels without their thresholds
 * (g_strfreev() it). @thresholds (may be NULL) receives one per label, NAN where the line
 * gives none (g_free() it). */
char **cony_labels_parse (const char *text, gsize len, const char *origin, guint *n_labels,
    double **thresholds, GError **error);
/* Reads @path and parses it with cony_labels_parse(). */
char **cony_labels_load (const char *path, guint *n_labels, double **thresholds, GError **error);

G_END_DECLS
