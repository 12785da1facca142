/* GstConyClassificationMeta and its GstCustomMeta mirror.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstconymeta.h"
#include "gstconyresult.h"

#include <string.h>

GType
gst_cony_classification_meta_api_get_type (void)
{
  static GType type = 0;
  /* No tags: GstBaseTransform and the audio converters copy only tagless
   * metas (or those tagged "audio"), and this result belongs to no media. */
  static const gchar *tags[] = { NULL };

  if (g_once_init_enter (&type)) {
    /* Another copy of this file (an application linking it while the plugin
     * is loaded) may have registered it already. */
    GType t = g_type_from_name ("GstConyClassificationMetaAPI");
    if (t == 0)
      t = gst_meta_api_type_register ("GstConyClassificationMetaAPI", tags);
    g_once_init_leave (&type, t);
  }
  return type;
}

static gboolean
gst_cony_classification_meta_init (GstMeta *meta, gpointer params, GstBuffer *buffer)
{
  GstConyClassificationMeta *m = (GstConyClassificationMeta *) meta;

  m->step = 0;
  m->window_start = GST_CLOCK_TIME_NONE;
  m->window_end = GST_CLOCK_TIME_NONE;
  m->class_id = -1;
  m->label = "";
  m->score = 0.0f;
  m->n_scores = 0;
  m->scores = NULL;
  m->context_fill = 0.0;
  m->pts = GST_CLOCK_TIME_NONE;
  m->running_start = m->running_end = GST_CLOCK_TIME_NONE;
  m->stream_start = m->stream_end = GST_CLOCK_TIME_NONE;
  m->multi_label = FALSE;
  m->n_top = 0;
  m->top_ids = NULL;
  m->top_labels = NULL;
  m->n_events = 0;
  m->events = NULL;
  m->gated = FALSE;
  return TRUE;
}

static void
gst_cony_classification_meta_free (GstMeta *meta, GstBuffer *buffer)
{
  GstConyClassificationMeta *m = (GstConyClassificationMeta *) meta;

  g_clear_pointer (&m->scores, g_free);
  m->n_scores = 0;
  g_clear_pointer (&m->top_ids, g_free);
  g_clear_pointer (&m->top_labels, g_free);
  m->n_top = 0;
  g_clear_pointer (&m->events, g_free);
  m->n_events = 0;
}

static gboolean
gst_cony_classification_meta_transform (GstBuffer *dest, GstMeta *meta, GstBuffer *buffer,
    GQuark type, gpointer data)
{
  GstConyClassificationMeta *m = (GstConyClassificationMeta *) meta;

  /* Whole and region copies keep the result; other transforms (e.g. a
   * video scale) mean nothing to it but, with no tags, never reach us from
   * media converters. */
  if (!GST_META_TRANSFORM_IS_COPY (type))
    return FALSE;
  return gst_buffer_add_cony_classification_meta_full (dest, m) != NULL;
}

const GstMetaInfo *
gst_cony_classification_meta_get_info (void)
{
  static const GstMetaInfo *info = NULL;

  if (g_once_init_enter ((GstMetaInfo **) &info)) {
    const GstMetaInfo *mi = gst_meta_get_info ("GstConyClassificationMeta");
    if (mi == NULL)
      mi = gst_meta_register (GST_CONY_CLASSIFICATION_META_API_TYPE, "GstConyClassificationMeta",
          sizeof (GstConyClassificationMeta), gst_cony_classification_meta_init,
          gst_cony_classification_meta_free, gst_cony_classification_meta_transform);
    g_once_init_leave ((GstMetaInfo **) &info, (GstMetaInfo *) mi);
  }
  return info;
}

GstConyClassificationMeta *
gst_buffer_add_cony_classification_meta_full (GstBuffer *buffer, const GstConyClassificationMeta *v)
{
  GstConyClassificationMeta *m;

  g_return_val_if_fail (GST_IS_BUFFER (buffer), NULL);
  g_return_val_if_fail (gst_buffer_is_writable (buffer), NULL);
  g_return_val_if_fail (v != NULL, NULL);
  g_return_val_if_fail (v->n_scores == 0 || v->scores != NULL, NULL);
  g_return_val_if_fail (v->n_top == 0 || (v->top_ids != NULL && v->top_labels != NULL), NULL);
  g_return_val_if_fail (v->n_events == 0 || v->events != NULL, NULL);

  m = (GstConyClassificationMeta *) gst_buffer_add_meta (buffer, GST_CONY_CLASSIFICATION_META_INFO,
      NULL);
  if (m == NULL)
    return NULL;
  /* every value member at once (a new result field is copied without a line here),
   * then the members that own memory */
  GstMeta head = m->meta;
  *m = *v;
  m->meta = head;
  m->label = g_intern_string (v->label ? v->label : "");
  m->scores = v->n_scores ? g_memdup2 (v->scores, v->n_scores * sizeof (gfloat)) : NULL;
  m->top_ids = NULL;
  m->top_labels = NULL;
  m->events = NULL;
  if (v->n_top > 0) {
    m->top_ids = g_memdup2 (v->top_ids, v->n_top * sizeof (gint));
    m->top_labels = g_new (const gchar *, v->n_top);
    for (guint i = 0; i < v->n_top; i++)
      m->top_labels[i] = g_intern_string (v->top_labels[i] ? v->top_labels[i] : "");
  }
  if (v->n_events > 0) {
    m->events = g_memdup2 (v->events, v->n_events * sizeof (GstConyClassificationEvent));
    for (guint i = 0; i < v->n_events; i++)
      m->events[i].label = g_intern_string (v->events[i].label ? v->events[i].label : "");
  }
  return m;
}

GstConyClassificationMeta *
gst_buffer_add_cony_classification_meta (GstBuffer *buffer, guint64 step, GstClockTime window_start,
    GstClockTime window_end, gint class_id, const gchar *label, gfloat score, const gfloat *scores,
    guint n_scores, gdouble context_fill)
{
  GstConyClassificationMeta v = {
    .step = step,
    .window_start = window_start,
    .window_end = window_end,
    .class_id = class_id,
    .label = label,
    .score = score,
    .n_scores = n_scores,
    .scores = (gfloat *) scores,
    .context_fill = context_fill,
    .pts = GST_CLOCK_TIME_NONE,
    .running_start = GST_CLOCK_TIME_NONE,
    .running_end = GST_CLOCK_TIME_NONE,
    .stream_start = GST_CLOCK_TIME_NONE,
    .stream_end = GST_CLOCK_TIME_NONE,
  };
  return gst_buffer_add_cony_classification_meta_full (buffer, &v);
}

GstConyClassificationMeta *
gst_buffer_get_cony_classification_meta (GstBuffer *buffer)
{
  GstConyClassificationMeta *best = NULL;
  gpointer state = NULL;
  GstMeta *meta;

  g_return_val_if_fail (GST_IS_BUFFER (buffer), NULL);
  while ((meta = gst_buffer_iterate_meta_filtered (buffer, &state,
              GST_CONY_CLASSIFICATION_META_API_TYPE))
      != NULL) {
    GstConyClassificationMeta *m = (GstConyClassificationMeta *) meta;
    if (best == NULL || m->step > best->step)
      best = m;
  }
  return best;
}

guint
gst_buffer_get_n_cony_classification_metas (GstBuffer *buffer)
{
  gpointer state = NULL;
  guint n = 0;

  g_return_val_if_fail (GST_IS_BUFFER (buffer), 0);
  while (gst_buffer_iterate_meta_filtered (buffer, &state, GST_CONY_CLASSIFICATION_META_API_TYPE)
      != NULL)
    n++;
  return n;
}

/* ------------------------------------------------------------------------ */

void
gst_cony_classification_custom_meta_register (void)
{
  static gsize done = 0;
  static const gchar *tags[] = { NULL };

  if (g_once_init_enter (&done)) {
    /* No transform function: GStreamer copies the structure on copy
     * transforms, which is what a result needs. */
    if (gst_meta_get_info (GST_CONY_CLASSIFICATION_CUSTOM_META_NAME) == NULL)
      gst_meta_register_custom (GST_CONY_CLASSIFICATION_CUSTOM_META_NAME, tags, NULL, NULL, NULL);
    g_once_init_leave (&done, 1);
  }
}

GstCustomMeta *
gst_buffer_add_cony_classification_custom_meta (GstBuffer *buffer,
    const GstConyClassificationMeta *meta)
{
  GstCustomMeta *cm;

  g_return_val_if_fail (GST_IS_BUFFER (buffer), NULL);
  g_return_val_if_fail (meta != NULL, NULL);

  gst_cony_classification_custom_meta_register ();
  cm = gst_buffer_add_custom_meta (buffer, GST_CONY_CLASSIFICATION_CUSTOM_META_NAME);
  if (cm == NULL)
    return NULL;
  /* the fields of the result table (gstconyresult.c), as in the bus messages and JSON */
  gst_cony_result_set_fields (gst_custom_meta_get_structure (cm), meta);
  return cm;
}

GstEvent *
gst_cony_segments_closed_event_new (guint64 step, const GstConyClassificationEvent *events, guint n)
{
  GstStructure *s = gst_structure_new (GST_CONY_SEGMENTS_CLOSED_EVENT_NAME, "step", G_TYPE_UINT64,
      step, NULL);
  GValue ev = G_VALUE_INIT;
  gst_cony_result_events_value (&ev, events, n);
  gst_structure_take_value (s, "events", &ev);
  return gst_event_new_custom (GST_EVENT_CUSTOM_DOWNSTREAM, s);
}

gboolean
gst_cony_segments_closed_event_parse (GstEvent *event, guint64 *step,
    GstConyClassificationEvent **events, guint *n)
{
  const GstStructure *s;
  const GValue *arr;

  g_return_val_if_fail (GST_IS_EVENT (event), FALSE);
  if (GST_EVENT_TYPE (event) != GST_EVENT_CUSTOM_DOWNSTREAM)
    return FALSE;
  s = gst_event_get_structure (event);
  if (s == NULL || !gst_structure_has_name (s, GST_CONY_SEGMENTS_CLOSED_EVENT_NAME)
      || !gst_structure_get_uint64 (s, "step", step)
      || (arr = gst_structure_get_value (s, "events")) == NULL || !GST_VALUE_HOLDS_ARRAY (arr))
    return FALSE;
  *n = gst_value_array_get_size (arr);
  *events = g_new0 (GstConyClassificationEvent, MAX (*n, 1));
  for (guint i = 0; i < *n; i++) {
    const GValue *v = gst_value_array_get_value (arr, i);
    if (!GST_VALUE_HOLDS_STRUCTURE (v)
        || !gst_cony_result_read_event (gst_value_get_structure (v), &(*events)[i])) {
      g_clear_pointer (events, g_free);
      return FALSE;
    }
  }
  return TRUE;
}
