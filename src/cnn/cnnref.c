/* The record of the CNN a classifier or fusion input was trained on (cony/model.h). */
#include "cnnref-private.h"

#include <string.h>

static const char *const cnn_ref_keys[] = { "cnn", "cnn_sha256", "cnn_output", "cnn_mode" };

gboolean
cony_cnn_ref_read (JsonObject *o, ConyCnnRef *ref, const char **bad_key)
{
  const char *v[G_N_ELEMENTS (cnn_ref_keys)] = { NULL };
  /* All keys checked before any is kept: a failed read leaves @ref as it was. */
  for (guint i = 0; i < G_N_ELEMENTS (cnn_ref_keys); i++) {
    JsonNode *n = json_object_get_member (o, cnn_ref_keys[i]);
    if (n == NULL)
      continue;
    if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING) {
      *bad_key = cnn_ref_keys[i];
      return FALSE;
    }
    v[i] = json_node_get_string (n);
  }
  ref->name = g_strdup (v[0]);
  ref->sha256 = g_strdup (v[1]);
  ref->output = g_strdup (v[2]);
  ref->mode = g_strdup (v[3]);
  return TRUE;
}

gboolean
cony_cnn_ref_init_from_file (ConyCnnRef *ref, const char *path, const char *output, GError **error)
{
  char *bytes = NULL;
  gsize n = 0;
  memset (ref, 0, sizeof *ref);
  if (!g_file_get_contents (path, &bytes, &n, error))
    return FALSE;
  ref->sha256 = g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) bytes, n);
  g_free (bytes);
  ref->name = g_path_get_basename (path);
  ref->output = g_strdup (output);
  return TRUE;
}

void
cony_cnn_ref_clear (ConyCnnRef *ref)
{
  g_free (ref->name);
  g_free (ref->sha256);
  g_free (ref->output);
  g_free (ref->mode);
  memset (ref, 0, sizeof *ref);
}

gboolean
cony_cnn_ref_is_embedding (const ConyCnnRef *ref)
{
  return g_strcmp0 (ref->output, "embedding") == 0;
}

const char *
cony_cnn_ref_mode (const ConyCnnRef *ref)
{
  return ref->mode != NULL ? ref->mode : "window";
}
