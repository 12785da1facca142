/* Model file lookup: the current directory, $CONY_MODEL_PATH, the installed models. */
#include "cony/modelpath.h"

#include "cony/error.h"

#ifndef CONY_MODEL_DATADIR
#error "CONY_MODEL_DATADIR must be defined by the build (DATADIR/gst-cony/models)"
#endif

const char *
cony_model_path_datadir (void)
{
  return CONY_MODEL_DATADIR;
}

char **
cony_model_path_dirs (void)
{
  GPtrArray *dirs = g_ptr_array_new ();
  const char *env = g_getenv ("CONY_MODEL_PATH");
  if (env != NULL) {
    g_auto (GStrv) parts = g_strsplit (env, G_SEARCHPATH_SEPARATOR_S, -1);
    for (char **p = parts; *p != NULL; p++)
      if (**p != '\0') /* an empty entry (a stray ':') means nothing */
        g_ptr_array_add (dirs, g_strdup (*p));
  }
  g_ptr_array_add (dirs, g_strdup (CONY_MODEL_DATADIR));
  g_ptr_array_add (dirs, NULL);
  return (char **) g_ptr_array_free (dirs, FALSE);
}

char *
cony_model_path_find (const char *name, GError **error)
{
  g_return_val_if_fail (name != NULL, NULL);
  /* Absolute names and names that exist here are taken as given, so every path that
   * worked before still means the same file; the open reports their problems. */
  if (*name == '\0' || g_path_is_absolute (name) || g_file_test (name, G_FILE_TEST_EXISTS))
    return g_strdup (name);
  g_auto (GStrv) dirs = cony_model_path_dirs ();
  for (char **d = dirs; *d != NULL; d++) {
    char *path = g_build_filename (*d, name, NULL);
    if (g_file_test (path, G_FILE_TEST_IS_REGULAR))
      return path;
    g_free (path);
  }
  g_autofree char *looked = g_strjoinv (", ", dirs);
  g_set_error (error, CONY_ERROR, CONY_ERROR_IO,
      "%s: no such model file (looked in the current directory, then %s; "
      "CONY_MODEL_PATH adds directories)",
      name, looked);
  return NULL;
}
