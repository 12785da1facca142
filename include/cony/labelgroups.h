/* Listen lists and label groups (issue 56): what a user wants reported out of a model's
 * classes. A groups file names sets of model labels; a listen list picks the labels (model
 * labels or group names) that may be reported, an ignore list drops labels, and everything
 * else is folded into one "other" label (or dropped). The result is a view: the reported
 * labels, their thresholds, and the fold of a step's model scores into theirs. Shared by
 * conytransformer and `cony classify`.
 *
 * Groups file, one group a line ('#' starts a comment, blank lines are ignored):
 *
 *     smoke_alarm = Smoke detector, smoke alarm; Fire alarm; Beep, bleep
 *     bark = Bark; Dog; Bow-wow | 0.3
 *
 * The name before '=' is the reported label; ';' separates the model labels (AudioSet's and
 * ImageNet's labels contain commas); an optional "| T" at the end gives the group's
 * threshold (0 to 1). A model label may be in several groups. */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

/* A group's score from its members': the highest (default), or their sum capped at 1. */
typedef enum
{
  CONY_GROUP_SCORE_MAX = 0,
  CONY_GROUP_SCORE_SUM,
} ConyGroupScore;

typedef struct {
  char *name;
  double threshold; /* NAN: none given */
  guint n_members;
  guint *members; /* model class indices, in the line's order */
} ConyLabelGroup;

typedef struct {
  guint n_groups;
  ConyLabelGroup *groups;
} ConyLabelGroups;

/* Parses a groups file's @len bytes against the model's @n_model @model_labels. Refuses
 * (CONY_ERROR_FORMAT, naming @origin, the line and the label) a line without '=', an empty
 * or invalid name, a name given twice, a model label the model does not have (with the
 * label of another case when there is one), an empty member list, a bad threshold.
 * @model_labels NULL: the syntax and names only, the members not looked up (each
 * group's `members` NULL; for a reader of the names, e.g. conymqttsink's discovery). */
ConyLabelGroups *cony_label_groups_parse (const char *text, gsize len, const char *origin,
    const char *const *model_labels, guint n_model, GError **error);
/* Reads @path and parses it with cony_label_groups_parse(). */
ConyLabelGroups *cony_label_groups_load (const char *path, const char *const *model_labels,
    guint n_model, GError **error);
void cony_label_groups_free (ConyLabelGroups *groups);

/* Splits a list of labels separated by ';' (spaces around each trimmed, empty items
 * dropped): the form of the listen and ignore lists. NULL or "" gives an empty list. */
char **cony_label_list_split (const char *text);

/* The labels a user sees. */
typedef struct ConyLabelView ConyLabelView;

/* The view of a model's @n_model classes (labels @model_labels, thresholds
 * @model_thresholds or NULL; NAN: none) under @groups (may be NULL), @listen and @ignore
 * (NULL-terminated, may be NULL or empty):
 *
 * - ignored labels (model labels or group names) are dropped: never reported, not in
 *   "other", not in a group's score;
 * - the reported labels are @listen's, in its order (each a group name or a model label;
 *   groups first where a name is both); without a listen list, the groups (in the file's
 *   order) when there are any, else every model class not ignored, in model order;
 * - every model class neither ignored nor reported (itself or as a group member) is folded
 *   into one last label @other (its score the fold of theirs, as a group's); NULL or ""
 *   drops them instead.
 *
 * A listened or ignored label that is neither a group nor a model label is refused
 * (CONY_ERROR_INVALID, naming it), and so is one both listened and ignored, and a view that
 * would report nothing. Thresholds: a model label keeps its own, a group has its file's,
 * other has none. */
ConyLabelView *cony_label_view_new (const char *const *model_labels, guint n_model,
    const double *model_thresholds, const ConyLabelGroups *groups, const char *const *listen,
    const char *const *ignore, const char *other, ConyGroupScore how, GError **error);
void cony_label_view_free (ConyLabelView *view);

guint cony_label_view_n_labels (const ConyLabelView *view);
/* The reported labels, NULL-terminated (owned by the view). */
const char *const *cony_label_view_labels (const ConyLabelView *view);
/* Their thresholds (NAN: none), n_labels of them (owned by the view). */
const double *cony_label_view_thresholds (const ConyLabelView *view);
/* Folds a step's @model_scores (n_model) into @scores (n_labels): a model label's own
 * score; a group's (and other's) the max of its members', or their sum capped at 1. */
void cony_label_view_fold (const ConyLabelView *view, const float *model_scores, float *scores);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ConyLabelGroups, cony_label_groups_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (ConyLabelView, cony_label_view_free)

G_END_DECLS
