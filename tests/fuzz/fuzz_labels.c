/* Labels files (the elements' labels-file property), and the same bytes as a groups file
 * (groups-file, cony/labelgroups.h) against a few AudioSet-like labels. */
#include "fuzz.h"
#include "cony/labelgroups.h"
#include "cony/labels.h"

#include <math.h>
#include <string.h>

/* The bytes as a groups file: refused with an error, or groups of valid members whose
 * view folds scores into [0, 1]. */
static void
fuzz_groups (const uint8_t *data, size_t size)
{
  static const char *const model[] = { "Speech", "Dog", "Bark", "Smoke detector, smoke alarm",
    "Fire alarm", NULL };
  GError *error = NULL;
  ConyLabelGroups *g = cony_label_groups_parse ((const char *) data, size, "fuzz-groups", model, 5,
      &error);
  if (g == NULL) {
    fuzz_check_error (error);
    return;
  }
  for (guint i = 0; i < g->n_groups; i++) {
    g_assert (cony_label_check (g->groups[i].name, strlen (g->groups[i].name), NULL));
    for (guint j = 0; j < g->groups[i].n_members; j++)
      g_assert (g->groups[i].members[j] < 5);
  }
  ConyLabelView *v = cony_label_view_new (model, 5, NULL, g, NULL, NULL, "other",
      CONY_GROUP_SCORE_SUM, &error);
  g_assert (v != NULL && error == NULL);
  const float scores[5] = { 0.9f, 0.5f, 0.7f, 0.1f, 1.0f };
  float *out = g_new (float, cony_label_view_n_labels (v));
  cony_label_view_fold (v, scores, out);
  for (guint i = 0; i < cony_label_view_n_labels (v); i++)
    g_assert (out[i] >= 0.0f && out[i] <= 1.0f);
  g_free (out);
  cony_label_view_free (v);
  cony_label_groups_free (g);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  fuzz_groups (data, size);
  guint n = 0;
  GError *error = NULL;
  double *thresholds = NULL;
  char **labels = cony_labels_parse ((const char *) data, size, "fuzz-labels", &n, &thresholds,
      &error);
  if (labels == NULL) {
    fuzz_check_error (error);
    return 0;
  }
  g_assert (g_strv_length (labels) == n);
  /* labels come without their thresholds; a threshold is NAN (none) or in [0, 1] */
  for (guint i = 0; i < n; i++) {
    g_assert (cony_label_check (labels[i], strlen (labels[i]), NULL));
    g_assert (isnan (thresholds[i]) || (thresholds[i] >= 0.0 && thresholds[i] <= 1.0));
  }
  g_free (thresholds);
  g_strfreev (labels);
  return 0;
}
