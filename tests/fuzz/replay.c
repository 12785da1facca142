/* Runs a harness on saved inputs (files, or every file of a directory) in a normal
 * build: the fuzzers' reproducers and seeds as regression tests. TAP output. */
#include "fuzz.h"

#include <string.h>

static int count;

static int
compare_paths (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

static void
replay_file (const char *path)
{
  gchar *bytes = NULL;
  gsize len = 0;
  GError *error = NULL;
  if (!g_file_get_contents (path, &bytes, &len, &error)) {
    printf ("not ok %d - %s: %s\n", ++count, path, error->message);
    g_error_free (error);
    return;
  }
  LLVMFuzzerTestOneInput ((const uint8_t *) bytes, len);
  printf ("ok %d - %s\n", ++count, path);
  fflush (stdout);
  g_free (bytes);
}

int
main (int argc, char **argv)
{
  for (int i = 1; i < argc; i++) {
    GDir *dir = g_dir_open (argv[i], 0, NULL);
    if (dir == NULL) {
      replay_file (argv[i]);
      continue;
    }
    GPtrArray *names = g_ptr_array_new_with_free_func (g_free);
    for (const char *n; (n = g_dir_read_name (dir)) != NULL;)
      g_ptr_array_add (names, g_build_filename (argv[i], n, NULL));
    g_dir_close (dir);
    g_ptr_array_sort (names, compare_paths);
    for (guint k = 0; k < names->len; k++)
      replay_file (names->pdata[k]);
    g_ptr_array_unref (names);
  }
  printf ("1..%d\n", count);
  return 0;
}
