/* The model's JSON config on its own (the part of a model file most worth mutating). */
#include "fuzz.h"
#include "cony/labels.h"
#include "cony/model.h"

#include <string.h>

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *json = g_strndup ((const char *) data, size);
  ConyModelConfig c = { 0 };
  GError *error = NULL;
  if (cony_model_config_parse (json, "fuzz-config", &c, &error)) {
    g_assert (c.n_classes > 0 && c.labels != NULL);
    for (int i = 0; i < c.n_classes; i++)
      g_assert (c.labels[i] != NULL && cony_label_check (c.labels[i], strlen (c.labels[i]), NULL));
    g_assert (c.labels[c.n_classes] == NULL);
  } else {
    fuzz_check_error (error);
  }
  cony_model_config_clear (&c);
  g_free (json);
  return 0;
}
