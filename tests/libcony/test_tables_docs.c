/* Every row of libcony's tables is documented (issue 55, item 7): each attention variant
 * in docs/attention.md's variant table, each of its own settings in the settings table,
 * and every file HACKING.md's "Where a new thing goes" names exists, so a row added or a
 * file moved without its docs fails here. */
#include "testutil.h"

#include "cony/attention.h"

#include <string.h>

/* The text of @rel (a path below the source root). */
static char *
source_text (const char *rel)
{
  const char *root = g_getenv ("CONY_SOURCE_ROOT");
  g_assert_nonnull (root);
  g_autofree char *path = g_build_filename (root, rel, NULL);
  char *text = NULL;
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  return text;
}

/* Whether @text has a markdown table row starting with the cells @cells ("| a | b |"). */
static gboolean
has_row (const char *text, const char *cells)
{
  g_autofree char *line = g_strconcat ("\n", cells, NULL);
  return strstr (text, line) != NULL;
}

static void
test_variants (void)
{
  g_autofree char *doc = source_text ("docs/attention.md");
  int n = cony_attention_variant_count ();
  g_assert_cmpint (n, >, 0);
  for (int v = 0; v < n; v++) {
    const char *name = cony_attention_variant_name ((ConyAttentionVariant) v);
    g_autofree char *row = g_strdup_printf ("| %d | `%s` |", v, name);
    if (!has_row (doc, row))
      g_error ("docs/attention.md has no variant row \"%s\"", row);
    for (int i = 0; i < cony_attention_variant_n_settings ((ConyAttentionVariant) v); i++) {
      const ConyAttentionSetting *s = cony_attention_variant_setting ((ConyAttentionVariant) v, i);
      g_autofree char *srow = g_strdup_printf ("| `%s` | `%s` |", name, s->key);
      if (!has_row (doc, srow))
        g_error ("docs/attention.md has no settings row \"%s\"", srow);
    }
  }
}

/* The paths in backquotes in HACKING.md's "Where a new thing goes" (those of the source
 * tree, without placeholders such as <kind>) exist. */
static void
test_hacking_paths (void)
{
  g_autofree char *text = source_text ("HACKING.md");
  const char *from = strstr (text, "\n## Where a new thing goes");
  g_assert_nonnull (from);
  const char *to = strstr (from + 1, "\n## ");
  g_autofree char *section = g_strndup (from, to ? (gsize) (to - from) : strlen (from));
  const char *roots[] = { "src/", "include/", "gst/", "tools/", "tests/", "training/", "docs/",
    "pipelines/", "models/" };
  g_auto (GStrv) parts = g_strsplit (section, "`", -1);
  guint checked = 0;
  for (guint i = 1; parts[i] != NULL; i += 2) {
    const char *p = parts[i];
    gboolean rooted = FALSE;
    for (guint r = 0; r < G_N_ELEMENTS (roots); r++)
      rooted = rooted || g_str_has_prefix (p, roots[r]);
    if (!rooted || strpbrk (p, "<>{}* ") != NULL)
      continue;
    const char *root = g_getenv ("CONY_SOURCE_ROOT");
    g_autofree char *path = g_build_filename (root, p, NULL);
    if (!g_file_test (path, G_FILE_TEST_EXISTS))
      g_error ("HACKING.md names %s, which does not exist", p);
    checked++;
  }
  g_assert_cmpuint (checked, >=, 10);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/tables-docs/variants", test_variants);
  g_test_add_func ("/tables-docs/hacking-paths", test_hacking_paths);
  return g_test_run ();
}
