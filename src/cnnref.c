/* The record of the CNN a classifier or fusion input was trained on (cony/model.h). */
#include "cnnref-private.h"

#include <string.h>

static const char *const cnn_ref_keys[] = { "cnn", "cnn_sha256", "cnn_output" };

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
  return TRUE;
}

void
cony_cnn_ref_clear (ConyCnnRef *ref)
{
  g_free (ref->name);
  g_free (ref->sha256);
  g_free (ref->output);
  memset (ref, 0, sizeof *ref);
}

gboolean
cony_cnn_ref_is_embedding (const ConyCnnRef *ref)
{
  return g_strcmp0 (ref->output, "embedding") == 0;
}
