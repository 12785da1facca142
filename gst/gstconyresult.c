/* The table of result fields and the GstStructure formatter (gstconyresult.h).
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstconyresult.h"

#include <math.h>

#define MEMBER(type, m) G_STRUCT_OFFSET (type, m), NULL
#define RESULT(m) MEMBER (GstConyClassificationMeta, m)
#define DERIVED(f) -1, f

static void
get_duration (gconstpointer record, GValue *v)
{
  const GstConyClassificationMeta *r = record;
  g_value_init (v, G_TYPE_UINT64);
  g_value_set_uint64 (v,
      GST_CLOCK_TIME_IS_VALID (r->window_start) && GST_CLOCK_TIME_IS_VALID (r->window_end)
          ? r->window_end - r->window_start
          : GST_CLOCK_TIME_NONE);
}

static void
get_output (gconstpointer record, GValue *v)
{
  const GstConyClassificationMeta *r = record;
  g_value_init (v, G_TYPE_STRING);
  g_value_set_static_string (v, r->multi_label ? "sigmoid" : "softmax");
}

static void gst_cony_result_fill (GstStructure *s, const GstConyResultField *fields, guint n,
    gconstpointer record, gboolean gated);

static void
get_top (gconstpointer record, GValue *v)
{
  const GstConyClassificationMeta *r = record;
  guint n_fields;
  const GstConyResultField *fields = gst_cony_result_class_fields (&n_fields);

  g_value_init (v, GST_TYPE_ARRAY);
  for (guint i = 0; i < r->n_top; i++) {
    gint c = r->top_ids[i];
    GstConyResultClass cls = { c, r->top_labels[i],
      c >= 0 && (guint) c < r->n_scores ? r->scores[c] : NAN };
    GstStructure *s = gst_structure_new_empty ("class");
    gst_cony_result_fill (s, fields, n_fields, &cls, FALSE);
    GValue sv = G_VALUE_INIT;
    g_value_init (&sv, GST_TYPE_STRUCTURE);
    g_value_take_boxed (&sv, s);
    gst_value_array_append_and_take_value (v, &sv);
  }
}

static void
get_events (gconstpointer record, GValue *v)
{
  const GstConyClassificationMeta *r = record;
  gst_cony_result_events_value (v, r->events, r->n_events);
}

static void
get_scores (gconstpointer record, GValue *v)
{
  const GstConyClassificationMeta *r = record;
  GValue f = G_VALUE_INIT;

  g_value_init (v, GST_TYPE_ARRAY);
  g_value_init (&f, G_TYPE_FLOAT);
  for (guint i = 0; i < r->n_scores; i++) {
    g_value_set_float (&f, r->scores[i]);
    gst_value_array_append_value (v, &f);
  }
  g_value_unset (&f);
}

/* In output order: docs/results.schema.json's "result" (and "gated") record. */
static const GstConyResultField result_fields[] = {
  { "step", GST_CONY_RESULT_COUNT, GST_CONY_RESULT_ALWAYS, RESULT (step),
      "step index since the last reset" },
  { "pts", GST_CONY_RESULT_TIME, GST_CONY_RESULT_ALWAYS, RESULT (pts), "the step's PTS" },
  { "start", GST_CONY_RESULT_TIME, GST_CONY_RESULT_ALWAYS, RESULT (window_start),
      "start of the input the result covers (buffer time)" },
  { "end", GST_CONY_RESULT_TIME, GST_CONY_RESULT_ALWAYS, RESULT (window_end),
      "its end (buffer time)" },
  { "duration", GST_CONY_RESULT_TIME, GST_CONY_RESULT_ALWAYS, DERIVED (get_duration),
      "end - start" },
  { "running_start", GST_CONY_RESULT_TIME, GST_CONY_RESULT_ALWAYS, RESULT (running_start),
      "start as running time" },
  { "running_end", GST_CONY_RESULT_TIME, GST_CONY_RESULT_ALWAYS, RESULT (running_end),
      "end as running time" },
  { "stream_start", GST_CONY_RESULT_TIME, GST_CONY_RESULT_ALWAYS, RESULT (stream_start),
      "start as stream time" },
  { "stream_end", GST_CONY_RESULT_TIME, GST_CONY_RESULT_ALWAYS, RESULT (stream_end),
      "end as stream time" },
  { "output", GST_CONY_RESULT_STRING, GST_CONY_RESULT_ALWAYS, DERIVED (get_output),
      "\"softmax\" or \"sigmoid\"" },
  { "gated", GST_CONY_RESULT_BOOLEAN, GST_CONY_RESULT_GATED, RESULT (gated),
      "TRUE: below the level gate, no class" },
  { "class_id", GST_CONY_RESULT_INT, GST_CONY_RESULT_CLASSIFIED, RESULT (class_id),
      "the top class (a segment event's class in segment messages)" },
  { "label", GST_CONY_RESULT_STRING, GST_CONY_RESULT_CLASSIFIED, RESULT (label), "its label" },
  { "score", GST_CONY_RESULT_SCORE, GST_CONY_RESULT_CLASSIFIED, RESULT (score), "its score" },
  { "top", GST_CONY_RESULT_CLASSES, GST_CONY_RESULT_CLASSIFIED, DERIVED (get_top),
      "the top-k, best first" },
  { "context_fill", GST_CONY_RESULT_FRACTION, GST_CONY_RESULT_CLASSIFIED, RESULT (context_fill),
      "tokens in the window / n" },
  { "events", GST_CONY_RESULT_EVENTS, GST_CONY_RESULT_ALWAYS, DERIVED (get_events),
      "the step's segment onsets and offsets" },
  { "scores", GST_CONY_RESULT_SCORES, GST_CONY_RESULT_CLASSIFIED, DERIVED (get_scores),
      "every class's score, in class order" },
};

static const GstConyResultField class_fields[] = {
  { "class_id", GST_CONY_RESULT_INT, GST_CONY_RESULT_ALWAYS, MEMBER (GstConyResultClass, class_id),
      "the class" },
  { "label", GST_CONY_RESULT_STRING, GST_CONY_RESULT_ALWAYS, MEMBER (GstConyResultClass, label),
      "its label" },
  { "score", GST_CONY_RESULT_SCORE, GST_CONY_RESULT_ALWAYS, MEMBER (GstConyResultClass, score),
      "its score" },
};

static void
get_event_kind (gconstpointer record, GValue *v)
{
  const GstConyClassificationEvent *e = record;
  g_value_init (v, G_TYPE_STRING);
  g_value_set_static_string (v, e->onset ? "onset" : "offset");
}

static const GstConyResultField event_fields[] = {
  { "event", GST_CONY_RESULT_STRING, GST_CONY_RESULT_ALWAYS, DERIVED (get_event_kind),
      "\"onset\" or \"offset\"" },
  { "class_id", GST_CONY_RESULT_INT, GST_CONY_RESULT_ALWAYS,
      MEMBER (GstConyClassificationEvent, class_id), "the label's class" },
  { "label", GST_CONY_RESULT_STRING, GST_CONY_RESULT_ALWAYS,
      MEMBER (GstConyClassificationEvent, label), "the label" },
  { "segment_start", GST_CONY_RESULT_TIME, GST_CONY_RESULT_ALWAYS,
      MEMBER (GstConyClassificationEvent, start), "running time the segment started" },
  { "segment_end", GST_CONY_RESULT_TIME, GST_CONY_RESULT_ALWAYS,
      MEMBER (GstConyClassificationEvent, end), "running time it ended; NONE for an onset" },
};

const GstConyResultField *
gst_cony_result_fields (guint *n_fields)
{
  *n_fields = G_N_ELEMENTS (result_fields);
  return result_fields;
}

const GstConyResultField *
gst_cony_result_class_fields (guint *n_fields)
{
  *n_fields = G_N_ELEMENTS (class_fields);
  return class_fields;
}

const GstConyResultField *
gst_cony_result_event_fields (guint *n_fields)
{
  *n_fields = G_N_ELEMENTS (event_fields);
  return event_fields;
}

/* The value of a member field: @p points at it, read as @type. */
static void
gst_cony_result_member_value (GstConyResultType type, gconstpointer p, GValue *v)
{
  switch (type) {
    case GST_CONY_RESULT_COUNT:
    case GST_CONY_RESULT_TIME:
      g_value_init (v, G_TYPE_UINT64);
      g_value_set_uint64 (v, *(const guint64 *) p);
      break;
    case GST_CONY_RESULT_INT:
      g_value_init (v, G_TYPE_INT);
      g_value_set_int (v, *(const gint *) p);
      break;
    case GST_CONY_RESULT_STRING:
      g_value_init (v, G_TYPE_STRING);
      g_value_set_string (v, *(const gchar *const *) p ? *(const gchar *const *) p : "");
      break;
    case GST_CONY_RESULT_BOOLEAN:
      g_value_init (v, G_TYPE_BOOLEAN);
      g_value_set_boolean (v, *(const gboolean *) p);
      break;
    case GST_CONY_RESULT_SCORE:
      g_value_init (v, G_TYPE_FLOAT);
      g_value_set_float (v, *(const gfloat *) p);
      break;
    case GST_CONY_RESULT_FRACTION:
      g_value_init (v, G_TYPE_DOUBLE);
      g_value_set_double (v, *(const gdouble *) p);
      break;
    default: g_assert_not_reached ();
  }
}

/* Sets the @n @fields of @record on @s, those present for @gated. */
static void
gst_cony_result_fill (GstStructure *s, const GstConyResultField *fields, guint n,
    gconstpointer record, gboolean gated)
{
  for (guint i = 0; i < n; i++) {
    const GstConyResultField *f = &fields[i];
    GValue v = G_VALUE_INIT;
    if ((f->presence == GST_CONY_RESULT_CLASSIFIED && gated)
        || (f->presence == GST_CONY_RESULT_GATED && !gated))
      continue;
    if (f->offset >= 0)
      gst_cony_result_member_value (f->type, G_STRUCT_MEMBER_P (record, f->offset), &v);
    else
      f->get (record, &v);
    gst_structure_take_value (s, f->name, &v);
  }
}

void
gst_cony_result_set_fields (GstStructure *s, const GstConyClassificationMeta *result)
{
  gst_cony_result_fill (s, result_fields, G_N_ELEMENTS (result_fields), result, result->gated);
}

GstStructure *
gst_cony_result_to_structure (const GstConyClassificationMeta *result, const gchar *name)
{
  GstStructure *s = gst_structure_new_empty (name);
  gst_cony_result_set_fields (s, result);
  return s;
}

void
gst_cony_result_events_value (GValue *value, const GstConyClassificationEvent *events, guint n)
{
  g_value_init (value, GST_TYPE_ARRAY);
  for (guint i = 0; i < n; i++) {
    GstStructure *s = gst_structure_new_empty ("event");
    gst_cony_result_fill (s, event_fields, G_N_ELEMENTS (event_fields), &events[i], FALSE);
    GValue sv = G_VALUE_INIT;
    g_value_init (&sv, GST_TYPE_STRUCTURE);
    g_value_take_boxed (&sv, s);
    gst_value_array_append_and_take_value (value, &sv);
  }
}

gboolean
gst_cony_result_read_event (const GstStructure *s, GstConyClassificationEvent *e)
{
  const gchar *kind = gst_structure_get_string (s, "event");
  const gchar *label = gst_structure_get_string (s, "label");
  guint64 start, end;

  if (kind == NULL || label == NULL || !gst_structure_get_int (s, "class_id", &e->class_id)
      || !gst_structure_get_uint64 (s, "segment_start", &start)
      || !gst_structure_get_uint64 (s, "segment_end", &end))
    return FALSE;
  e->onset = g_str_equal (kind, "onset");
  e->label = g_intern_string (label);
  e->start = start;
  e->end = end;
  return TRUE;
}
