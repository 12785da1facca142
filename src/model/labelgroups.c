/* Listen lists and label groups (cony/labelgroups.h). */
#include "cony/labelgroups.h"
#include "cony/error.h"
#include "cony/labels.h"

#include <math.h>
#include <string.h>

struct ConyLabelView {
  guint n_labels, n_model;
  char **labels;
  double *thresholds;
  guint *offsets; /* label i folds members[offsets[i] .. offsets[i + 1]) */
  guint *members;
  ConyGroupScore how;
};

static gint
find_label (const char *const *labels, guint n, const char *name)
{
  for (guint i = 0; i < n; i++)
    if (strcmp (labels[i], name) == 0)
      return (gint) i;
  return -1;
}

/* " (did you mean 'Bark'?)" when @name differs from a label only in case, else "". */
static char *
case_hint (const char *const *labels, guint n, const char *name)
{
  for (guint i = 0; i < n; i++)
    if (g_ascii_strcasecmp (labels[i], name) == 0)
      return g_strdup_printf (" (did you mean '%s'?)", labels[i]);
  return g_strdup ("");
}

static gint
find_group (const ConyLabelGroups *groups, const char *name)
{
  for (guint g = 0; groups && g < groups->n_groups; g++)
    if (strcmp (groups->groups[g].name, name) == 0)
      return (gint) g;
  return -1;
}

char **
cony_label_list_split (const char *text)
{
  GPtrArray *out = g_ptr_array_new ();
  g_auto (GStrv) parts = g_strsplit (text ? text : "", ";", -1);
  for (guint i = 0; parts[i]; i++) {
    char *item = g_strstrip (g_strdup (parts[i]));
    if (*item)
      g_ptr_array_add (out, item);
    else
      g_free (item);
  }
  g_ptr_array_add (out, NULL);
  return (char **) g_ptr_array_free (out, FALSE);
}

static void
group_clear (ConyLabelGroup *g)
{
  g_free (g->name);
  g_free (g->members);
}

void
cony_label_groups_free (ConyLabelGroups *groups)
{
  if (groups == NULL)
    return;
  for (guint g = 0; g < groups->n_groups; g++)
    group_clear (&groups->groups[g]);
  g_free (groups->groups);
  g_free (groups);
}

/* "members | 0.3": the threshold after the last '|' into *thr (NAN without one); the
 * members' text is cut there. */
static gboolean
split_threshold (char *rhs, double *thr, const char *where, GError **error)
{
  *thr = NAN;
  char *bar = strrchr (rhs, '|');
  if (bar == NULL)
    return TRUE;
  *bar = '\0';
  g_autofree char *t = g_strstrip (g_strdup (bar + 1));
  char *end = NULL;
  *thr = g_ascii_strtod (t, &end);
  if (end == t || *end != '\0' || !(*thr >= 0.0 && *thr <= 1.0)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: the threshold after '|' is '%s', expected a number from 0 to 1", where, t);
    return FALSE;
  }
  return TRUE;
}

/* One line "name = a; b; c [| T]" into @g; @where names the line in errors. */
static gboolean
parse_group_line (const char *line, const char *where, const char *const *model_labels,
    guint n_model, const ConyLabelGroups *done, ConyLabelGroup *g, GError **error)
{
  const char *eq = strchr (line, '=');
  if (eq == NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: expected 'name = model label; model label; ...', found no '='", where);
    return FALSE;
  }
  g_autofree char *name = g_strstrip (g_strndup (line, eq - line));
  if (!cony_label_check (name, strlen (name), error)) {
    g_prefix_error (error, "%s: the group name ", where);
    return FALSE;
  }
  if (find_group (done, name) >= 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: the group '%s' is defined twice", where,
        name);
    return FALSE;
  }
  g_autofree char *rhs = g_strdup (eq + 1);
  double thr;
  if (!split_threshold (rhs, &thr, where, error))
    return FALSE;
  g_auto (GStrv) items = cony_label_list_split (rhs);
  guint n = g_strv_length (items);
  if (n == 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: the group '%s' names no model label",
        where, name);
    return FALSE;
  }
  g_autofree guint *members = model_labels ? g_new (guint, n) : NULL;
  for (guint i = 0; model_labels && i < n; i++) {
    gint c = find_label (model_labels, n_model, items[i]);
    if (c < 0) {
      g_autofree char *hint = case_hint (model_labels, n_model, items[i]);
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
          "%s: the group '%s' names '%s', which is not one of the model's %u labels%s", where, name,
          items[i], n_model, hint);
      return FALSE;
    }
    members[i] = (guint) c;
  }
  *g = (ConyLabelGroup){ g_steal_pointer (&name), thr, n, g_steal_pointer (&members) };
  return TRUE;
}

ConyLabelGroups *
cony_label_groups_parse (const char *text, gsize len, const char *origin,
    const char *const *model_labels, guint n_model, GError **error)
{
  if (memchr (text, '\0', len) != NULL) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: holds a NUL byte", origin);
    return NULL;
  }
  g_autoptr (ConyLabelGroups) groups = g_new0 (ConyLabelGroups, 1);
  g_autofree char *copy = g_strndup (text, len);
  g_auto (GStrv) lines = g_strsplit (copy, "\n", -1);
  GArray *arr = g_array_new (FALSE, TRUE, sizeof (ConyLabelGroup));
  gboolean ok = TRUE;
  for (guint i = 0; ok && lines[i]; i++) {
    char *line = lines[i];
    if (i == 0 && g_str_has_prefix (line, "\xef\xbb\xbf")) /* a BOM */
      line += 3;
    char *hash = strchr (line, '#');
    if (hash)
      *hash = '\0';
    g_strstrip (line);
    if (*line == '\0')
      continue;
    g_autofree char *where = g_strdup_printf ("%s, line %u", origin, i + 1);
    ConyLabelGroup g;
    /* the groups so far, for the duplicate check */
    groups->groups = (ConyLabelGroup *) arr->data;
    groups->n_groups = arr->len;
    ok = parse_group_line (line, where, model_labels, n_model, groups, &g, error);
    if (ok)
      g_array_append_val (arr, g);
  }
  groups->n_groups = arr->len;
  groups->groups = (ConyLabelGroup *) g_array_free (arr, FALSE);
  if (ok && groups->n_groups == 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: defines no group", origin);
    ok = FALSE;
  }
  return ok ? g_steal_pointer (&groups) : NULL;
}

ConyLabelGroups *
cony_label_groups_load (const char *path, const char *const *model_labels, guint n_model,
    GError **error)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  GError *io_error = NULL;
  if (!g_file_get_contents (path, &text, &len, &io_error)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s", io_error->message);
    g_error_free (io_error);
    return NULL;
  }
  return cony_label_groups_parse (text, len, path, model_labels, n_model, error);
}

/* ------------------------------------------------------------------------ */

void
cony_label_view_free (ConyLabelView *view)
{
  if (view == NULL)
    return;
  g_strfreev (view->labels);
  g_free (view->thresholds);
  g_free (view->offsets);
  g_free (view->members);
  g_free (view);
}

/* Building a view: the reported labels as they are added. */
typedef struct {
  GPtrArray *labels;
  GArray *thresholds, *offsets, *members;
  gboolean *covered; /* model classes reported, themselves or in a group */
  const gboolean *ignored;
} ViewBuilder;

static void
add_label (ViewBuilder *b, const char *name, double thr, const guint *members, guint n)
{
  g_ptr_array_add (b->labels, g_strdup (name));
  g_array_append_val (b->thresholds, thr);
  for (guint i = 0; i < n; i++) {
    if (b->ignored[members[i]])
      continue;
    g_array_append_val (b->members, members[i]);
    b->covered[members[i]] = TRUE;
  }
  guint end = b->members->len;
  g_array_append_val (b->offsets, end);
}

/* Adds the reported label @name: a group (first) or a model label. FALSE when it is
 * neither. */
static gboolean
add_named (ViewBuilder *b, const char *name, const ConyLabelGroups *groups,
    const char *const *model_labels, guint n_model, const double *model_thr)
{
  gint g = find_group (groups, name);
  if (g >= 0) {
    const ConyLabelGroup *grp = &groups->groups[g];
    add_label (b, grp->name, grp->threshold, grp->members, grp->n_members);
    return TRUE;
  }
  gint c = find_label (model_labels, n_model, name);
  if (c < 0)
    return FALSE;
  guint m = (guint) c;
  add_label (b, name, model_thr ? model_thr[c] : NAN, &m, 1);
  return TRUE;
}

static gboolean
unknown_label (const char *list, const char *name, const char *const *model_labels, guint n_model,
    const ConyLabelGroups *groups, GError **error)
{
  g_autofree char *hint = case_hint (model_labels, n_model, name);
  g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
      "%s: '%s' is neither a group%s nor one of the model's %u labels%s", list, name,
      groups ? " of the groups file" : "", n_model, hint);
  return FALSE;
}

/* The ignore list as a per-class mask; ignored groups drop their members. */
static gboolean
mark_ignored (const char *const *ignore, const char *const *listen, const char *const *model_labels,
    guint n_model, const ConyLabelGroups *groups, gboolean *ignored, GError **error)
{
  for (guint i = 0; ignore && ignore[i]; i++) {
    if (listen && g_strv_contains (listen, ignore[i])) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID, "ignore: '%s' is also listened to",
          ignore[i]);
      return FALSE;
    }
    gint g = find_group (groups, ignore[i]);
    gint c = find_label (model_labels, n_model, ignore[i]);
    if (g < 0 && c < 0)
      return unknown_label ("ignore", ignore[i], model_labels, n_model, groups, error);
    for (guint m = 0; g >= 0 && m < groups->groups[g].n_members; m++)
      ignored[groups->groups[g].members[m]] = TRUE;
    if (c >= 0)
      ignored[c] = TRUE;
  }
  return TRUE;
}

ConyLabelView *
cony_label_view_new (const char *const *model_labels, guint n_model, const double *model_thresholds,
    const ConyLabelGroups *groups, const char *const *listen, const char *const *ignore,
    const char *other, ConyGroupScore how, GError **error)
{
  g_autofree gboolean *ignored = g_new0 (gboolean, n_model);
  g_autofree gboolean *covered = g_new0 (gboolean, n_model);
  if (!mark_ignored (ignore, listen, model_labels, n_model, groups, ignored, error))
    return NULL;
  ViewBuilder b = { g_ptr_array_new (), g_array_new (FALSE, FALSE, sizeof (double)),
    g_array_new (FALSE, FALSE, sizeof (guint)), g_array_new (FALSE, FALSE, sizeof (guint)), covered,
    ignored };
  guint zero = 0;
  g_array_append_val (b.offsets, zero);
  gboolean ok = TRUE;
  if (listen && listen[0]) {
    for (guint i = 0; ok && listen[i]; i++) {
      if (g_ptr_array_find_with_equal_func (b.labels, listen[i], g_str_equal, NULL))
        continue; /* named twice: reported once */
      ok = add_named (&b, listen[i], groups, model_labels, n_model, model_thresholds)
          || unknown_label ("listen", listen[i], model_labels, n_model, groups, error);
    }
  } else if (groups) {
    for (guint g = 0; g < groups->n_groups; g++)
      if (!ignore || !g_strv_contains (ignore, groups->groups[g].name))
        add_named (&b, groups->groups[g].name, groups, model_labels, n_model, model_thresholds);
  } else {
    for (guint c = 0; c < n_model; c++)
      if (!ignored[c])
        add_named (&b, model_labels[c], NULL, model_labels, n_model, model_thresholds);
  }
  if (ok && other && *other) {
    GArray *rest = g_array_new (FALSE, FALSE, sizeof (guint));
    for (guint c = 0; c < n_model; c++)
      if (!ignored[c] && !covered[c])
        g_array_append_val (rest, c);
    if (rest->len > 0)
      add_label (&b, other, NAN, (guint *) rest->data, rest->len);
    g_array_free (rest, TRUE);
  }
  if (ok && b.labels->len == 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "the listen and ignore lists leave no label to report");
    ok = FALSE;
  }
  ConyLabelView *view = g_new0 (ConyLabelView, 1);
  view->n_labels = b.labels->len;
  view->n_model = n_model;
  view->how = how;
  g_ptr_array_add (b.labels, NULL);
  view->labels = (char **) g_ptr_array_free (b.labels, FALSE);
  view->thresholds = (double *) g_array_free (b.thresholds, FALSE);
  view->offsets = (guint *) g_array_free (b.offsets, FALSE);
  view->members = (guint *) g_array_free (b.members, FALSE);
  if (!ok) {
    cony_label_view_free (view);
    return NULL;
  }
  return view;
}

guint
cony_label_view_n_labels (const ConyLabelView *view)
{
  return view->n_labels;
}

const char *const *
cony_label_view_labels (const ConyLabelView *view)
{
  return (const char *const *) view->labels;
}

const double *
cony_label_view_thresholds (const ConyLabelView *view)
{
  return view->thresholds;
}

void
cony_label_view_fold (const ConyLabelView *view, const float *model_scores, float *scores)
{
  for (guint i = 0; i < view->n_labels; i++) {
    float v = 0.0f;
    for (guint j = view->offsets[i]; j < view->offsets[i + 1]; j++) {
      float s = model_scores[view->members[j]];
      v = view->how == CONY_GROUP_SCORE_SUM ? v + s : (j == view->offsets[i] || s > v ? s : v);
    }
    scores[i] = view->how == CONY_GROUP_SCORE_SUM && v > 1.0f ? 1.0f : v;
  }
}
