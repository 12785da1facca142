/* Listen lists and label groups (cony/labelgroups.h): parsing, the view, the fold. */
#include "cony/error.h"
#include "cony/labelgroups.h"

#include <math.h>
#include <string.h>

static const char *const model[] = { "Speech", "Dog", "Bark", "Smoke detector, smoke alarm",
  "Fire alarm", "Beep, bleep", "Music", NULL };
#define N_MODEL 7

static ConyLabelGroups *
parse (const char *text, GError **error)
{
  return cony_label_groups_parse (text, strlen (text), "g.txt", model, N_MODEL, error);
}

static void
test_parse (void)
{
  GError *error = NULL;
  g_autoptr (ConyLabelGroups) g = parse ("\xef\xbb\xbf# home events\n\n"
                                         "smoke_alarm = Smoke detector, smoke alarm; Fire alarm; "
                                         "Beep, bleep  # the beeps too\r\n"
                                         "bark = Bark ; Dog | 0.3\n",
      &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g->n_groups, ==, 2);
  g_assert_cmpstr (g->groups[0].name, ==, "smoke_alarm");
  g_assert_cmpuint (g->groups[0].n_members, ==, 3);
  g_assert_cmpuint (g->groups[0].members[0], ==, 3);
  g_assert_cmpuint (g->groups[0].members[2], ==, 5);
  g_assert_true (isnan (g->groups[0].threshold));
  g_assert_cmpstr (g->groups[1].name, ==, "bark");
  g_assert_cmpuint (g->groups[1].members[1], ==, 1);
  g_assert_cmpfloat (g->groups[1].threshold, ==, 0.3);
}

static void
expect_parse_error (const char *text, const char *fragment)
{
  GError *error = NULL;
  ConyLabelGroups *g = parse (text, &error);
  g_assert_null (g);
  g_assert_error (error, CONY_ERROR, CONY_ERROR_FORMAT);
  if (!strstr (error->message, fragment))
    g_error ("'%s' does not say '%s'", error->message, fragment);
  g_error_free (error);
}

/* Without a model (conymqttsink's discovery reads the names only): the names in order,
 * members not looked up, syntax errors still refused with the line. */
static void
test_parse_names_only (void)
{
  const char *text = "bark = Bark; Dog | 0.3\n# c\nsiren = Not a model label\n";
  GError *error = NULL;
  ConyLabelGroups *g = cony_label_groups_parse (text, strlen (text), "g.txt", NULL, 0, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g->n_groups, ==, 2);
  g_assert_cmpstr (g->groups[0].name, ==, "bark");
  g_assert_cmpuint (g->groups[0].n_members, ==, 2);
  g_assert_null (g->groups[0].members);
  g_assert_cmpstr (g->groups[1].name, ==, "siren");
  cony_label_groups_free (g);
  const char *bad = "bark = Bark\njust a label\n";
  g_assert_null (cony_label_groups_parse (bad, strlen (bad), "g.txt", NULL, 0, &error));
  g_assert_nonnull (strstr (error->message, "g.txt, line 2"));
  g_clear_error (&error);
}

static void
test_parse_errors (void)
{
  expect_parse_error ("a = Dog\nb = Smoke detector; Fire alarm\n",
      "g.txt, line 2: the group 'b' names 'Smoke detector', which is not one of the model's 7 "
      "labels");
  expect_parse_error ("a = bark\n", "(did you mean 'Bark'?)");
  expect_parse_error ("a Dog\n", "line 1: expected 'name = model label");
  expect_parse_error ("a = Dog\na = Bark\n", "the group 'a' is defined twice");
  expect_parse_error ("a = ;\n", "names no model label");
  expect_parse_error (" = Dog\n", "the group name");
  expect_parse_error ("a = Dog | 1.5\n", "the threshold after '|' is '1.5'");
  expect_parse_error ("# nothing\n\n", "defines no group");
}

static ConyLabelView *
view (const ConyLabelGroups *g, const char *listen, const char *ignore, const char *other,
    ConyGroupScore how, GError **error)
{
  g_auto (GStrv) l = cony_label_list_split (listen);
  g_auto (GStrv) i = cony_label_list_split (ignore);
  double thr[N_MODEL] = { 0.6, NAN, NAN, NAN, NAN, NAN, 0.8 };
  return cony_label_view_new (model, N_MODEL, thr, g, (const char *const *) l,
      (const char *const *) i, other, how, error);
}

static void
assert_labels (const ConyLabelView *v, const char *joined)
{
  g_autofree char *got = g_strjoinv (";", (char **) cony_label_view_labels (v));
  g_assert_cmpstr (got, ==, joined);
  g_assert_cmpuint (cony_label_view_n_labels (v), ==,
      g_strv_length ((char **) cony_label_view_labels (v)));
}

static const float scores[N_MODEL] = { 0.1f, 0.2f, 0.7f, 0.4f, 0.5f, 0.3f, 0.05f };

static void
test_view (void)
{
  GError *error = NULL;
  g_autoptr (ConyLabelGroups) g = parse ("smoke_alarm = Smoke detector, smoke alarm; Fire alarm; "
                                         "Beep, bleep\nbark = Bark; Dog | 0.3\n",
      &error);
  g_assert_no_error (error);
  float out[N_MODEL];

  /* groups alone: the groups, the rest (Speech, Music) folded into other */
  g_autoptr (ConyLabelView) v = view (g, NULL, NULL, "other", CONY_GROUP_SCORE_MAX, &error);
  g_assert_no_error (error);
  assert_labels (v, "smoke_alarm;bark;other");
  cony_label_view_fold (v, scores, out);
  g_assert_cmpfloat (out[0], ==, 0.5f);
  g_assert_cmpfloat (out[1], ==, 0.7f);
  g_assert_cmpfloat (out[2], ==, 0.1f);
  g_assert_cmpfloat (cony_label_view_thresholds (v)[1], ==, 0.3);
  g_assert_true (isnan (cony_label_view_thresholds (v)[2]));

  /* sum, capped at 1 */
  g_autoptr (ConyLabelView) s = view (g, NULL, NULL, "", CONY_GROUP_SCORE_SUM, &error);
  g_assert_no_error (error);
  assert_labels (s, "smoke_alarm;bark");
  cony_label_view_fold (s, scores, out);
  g_assert_cmpfloat (out[0], ==, 1.0f);
  g_assert_cmpfloat (fabsf (out[1] - 0.9f), <, 1e-6f);

  /* listen in its order, model labels keep their thresholds; ignore drops Beep from the
   * group and from other */
  g_autoptr (ConyLabelView) l = view (g, "Speech; smoke_alarm", "Beep, bleep; Music", "rest",
      CONY_GROUP_SCORE_MAX, &error);
  g_assert_no_error (error);
  assert_labels (l, "Speech;smoke_alarm;rest");
  cony_label_view_fold (l, scores, out);
  g_assert_cmpfloat (out[0], ==, 0.1f);
  g_assert_cmpfloat (out[1], ==, 0.5f);
  g_assert_cmpfloat (out[2], ==, 0.7f); /* Dog, Bark */
  g_assert_cmpfloat (cony_label_view_thresholds (l)[0], ==, 0.6);

  /* no groups: ignore alone keeps the others in model order, nothing to fold */
  g_autoptr (ConyLabelView)
      i = view (NULL, NULL, "Music;Dog", "other", CONY_GROUP_SCORE_MAX, &error);
  g_assert_no_error (error);
  assert_labels (i, "Speech;Bark;Smoke detector, smoke alarm;Fire alarm;Beep, bleep");
}

static void
expect_view_error (const ConyLabelGroups *g, const char *listen, const char *ignore,
    const char *fragment)
{
  GError *error = NULL;
  ConyLabelView *v = view (g, listen, ignore, "other", CONY_GROUP_SCORE_MAX, &error);
  g_assert_null (v);
  g_assert_error (error, CONY_ERROR, CONY_ERROR_INVALID);
  if (!strstr (error->message, fragment))
    g_error ("'%s' does not say '%s'", error->message, fragment);
  g_error_free (error);
}

static void
test_view_errors (void)
{
  expect_view_error (NULL, "Speech;Cat", NULL,
      "listen: 'Cat' is neither a group nor one of the model's 7 labels");
  expect_view_error (NULL, "speech", NULL, "did you mean 'Speech'?");
  expect_view_error (NULL, NULL, "Meow", "ignore: 'Meow' is neither");
  expect_view_error (NULL, "Dog", "Dog", "ignore: 'Dog' is also listened to");
  expect_view_error (NULL, NULL,
      "Speech;Dog;Bark;Smoke detector, smoke alarm;Fire alarm;"
      "Beep, bleep;Music",
      "leave no label to report");
}

static void
test_split (void)
{
  g_auto (GStrv) a = cony_label_list_split (" Bark ;; Smoke detector, smoke alarm;");
  g_assert_cmpuint (g_strv_length (a), ==, 2);
  g_assert_cmpstr (a[1], ==, "Smoke detector, smoke alarm");
  g_auto (GStrv) b = cony_label_list_split (NULL);
  g_assert_cmpuint (g_strv_length (b), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/labelgroups/parse", test_parse);
  g_test_add_func ("/labelgroups/parse-names-only", test_parse_names_only);
  g_test_add_func ("/labelgroups/parse-errors", test_parse_errors);
  g_test_add_func ("/labelgroups/view", test_view);
  g_test_add_func ("/labelgroups/view-errors", test_view_errors);
  g_test_add_func ("/labelgroups/split", test_split);
  return g_test_run ();
}
