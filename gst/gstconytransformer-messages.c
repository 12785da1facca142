/* conytransformer's results beyond the meta: label segments (onset/offset with the
 * min-steps / min-duration / hysteresis rules of gstconysegments.c), the bus messages
 * of every message mode, and what EOS closes (gstconytransformer-private.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstconytransformer-private.h"
#include "gstconyresult.h"

#include <math.h>
#include <string.h>

/* The threshold of class @c: the labels file's, else the property's; for
 * multi-label models an unset threshold (0) is 0.5, a binary classifier's
 * decision boundary. */
static gdouble
gst_cony_transformer_class_threshold (GstConyTransformer *self, guint c, gdouble threshold)
{
  if (self->thresholds && !isnan (self->thresholds[c]))
    return self->thresholds[c];
  if (self->multi_label && threshold <= 0.0)
    return 0.5;
  return threshold;
}

/* @t (buffer time) as running time (or stream time) in the current segment, clamped
 * into it (gst_cony_segment_time()). */
GstClockTime
gst_cony_transformer_segment_time (GstConyTransformer *self, GstClockTime t, gboolean running)
{
  return gst_cony_segment_time (&GST_BASE_TRANSFORM (self)->segment, t, running);
}

void
gst_cony_transformer_fill_result (GstConyTransformer *self, const GstConyTransformerStep *st,
    gint cls, guint n_top, guint n_events, GstConyClassificationMeta *r)
{
  *r = (GstConyClassificationMeta){
    .step = st->step,
    .window_start = st->start,
    .window_end = st->end,
    .class_id = st->gated ? -1 : cls,
    .label = st->gated ? "" : self->labels[cls],
    .score = st->gated ? 0.0f : self->probs[cls],
    .n_scores = st->gated ? 0 : self->n_classes,
    .scores = self->probs,
    .gated = st->gated,
    .context_fill = st->fill,
    .pts = st->pts,
    .running_start = gst_cony_transformer_segment_time (self, st->start, TRUE),
    .running_end = gst_cony_transformer_segment_time (self, st->end, TRUE),
    .stream_start = gst_cony_transformer_segment_time (self, st->start, FALSE),
    .stream_end = gst_cony_transformer_segment_time (self, st->end, FALSE),
    .multi_label = self->multi_label,
    .n_top = st->gated ? 0 : n_top,
    .top_ids = self->top_ids,
    .top_labels = self->top_labels,
    .n_events = n_events,
    .events = self->events,
  };
}

/* The message structure of step @st: its result (gstconyresult.h) naming class @cls
 * (the top class, or the label of a segment event), with the step's @n_events events
 * and @n_top best classes. */
static GstStructure *
gst_cony_transformer_new_step_structure (GstConyTransformer *self, const GstConyTransformerStep *st,
    gint cls, guint n_top, guint n_events)
{
  GstConyClassificationMeta r;
  gst_cony_transformer_fill_result (self, st, cls, n_top, n_events, &r);
  return gst_cony_result_to_structure (&r, MESSAGE_NAME);
}

static void
gst_cony_transformer_add_message (GstConyTransformer *self, GPtrArray **messages, GstStructure *s)
{
  if (*messages == NULL)
    *messages = g_ptr_array_new ();
  g_ptr_array_add (*messages, gst_message_new_element (GST_OBJECT (self), s));
}

/* every-step: is the step posted? Softmax: its top class reaches its
 * threshold; multi-label: any class reaches its own. */
static gboolean
gst_cony_transformer_step_passes (GstConyTransformer *self, gint top, gdouble threshold)
{
  if (!self->multi_label)
    return self->probs[top] >= gst_cony_transformer_class_threshold (self, (guint) top, threshold);
  for (guint c = 0; c < self->n_classes; c++)
    if (self->probs[c] >= gst_cony_transformer_class_threshold (self, c, threshold))
      return TRUE;
  return FALSE;
}

/* Segment bookkeeping of a step (whatever the message mode), into
 * self->events; returns how many. Softmax: one segment at a time, the top
 * label's, changed by steps whose top label differs and reaches its threshold
 * (steps below do not count) once the new label has held for @hold (min-steps,
 * min-duration; shorter runs stay in the segment around them). Sigmoid: a
 * segment per label, open while its score reaches its threshold, with the same
 * hold for onsets and offsets. Segments are in token time (from the PTS of their
 * first step to the end of their last step's tokens), so consecutive ones tile.
 * Offsets come first, then onsets, in class order. */
guint
gst_cony_transformer_update_segments (GstConyTransformer *self, const GstConyTransformerStep *st,
    gint top, gdouble threshold, const GstConySegmentRule *hold)
{
  GstClockTime rt_start = gst_cony_transformer_segment_time (self, st->pts, TRUE);
  GstClockTime rt_end = gst_cony_transformer_segment_time (self, st->tile_end, TRUE);
  GstConyClassificationEvent *ev = self->events;
  GstConySegment ended;

  if (!self->multi_label) {
    if (st->gated
        || self->probs[top] < gst_cony_transformer_class_threshold (self, (guint) top, threshold)
        || !gst_cony_segment_track_step (&self->seg, top, rt_start, rt_end, hold, &ended))
      return 0;
    guint n = 0;
    if (ended.value >= 0)
      ev[n++] = (GstConyClassificationEvent){ FALSE, ended.value, self->labels[ended.value],
        ended.start, ended.end };
    ev[n++] = (GstConyClassificationEvent){ TRUE, top, self->labels[top], self->seg.seg.start,
      GST_CLOCK_TIME_NONE };
    return n;
  }
  /* Offsets from the front, onsets from the back (at most one event per label), then
   * the onsets moved behind the offsets in class order. */
  guint n_off = 0, n_on = 0, cap = self->n_classes + 2;
  for (guint c = 0; c < self->n_classes; c++) {
    GstConySegmentTrack *t = &self->label_seg[c];
    gdouble thr = gst_cony_transformer_class_threshold (self, c, threshold);
    if (t->seg.value == 1) /* hysteresis: an open label closes lower than it opened */
      thr -= hold->hysteresis;
    gint on = !st->gated && self->probs[c] >= thr;
    if (!gst_cony_segment_track_step (t, on, rt_start, rt_end, hold, &ended))
      continue;
    if (on)
      ev[cap - 1 - n_on++] = (GstConyClassificationEvent){ TRUE, (gint) c, self->labels[c],
        t->seg.start, GST_CLOCK_TIME_NONE };
    else
      ev[n_off++] = (GstConyClassificationEvent){ FALSE, (gint) c, self->labels[c], ended.start,
        ended.end };
  }
  memmove (ev + n_off, ev + cap - n_on, n_on * sizeof *ev);
  for (guint i = 0; i < n_on / 2; i++) {
    GstConyClassificationEvent tmp = ev[n_off + i];
    ev[n_off + i] = ev[n_off + n_on - 1 - i];
    ev[n_off + n_on - 1 - i] = tmp;
  }
  return n_off + n_on;
}

/* The on-change message of a softmax step whose top label took over
 * (@on; @off: the segment that ended, or NULL). */
static GstStructure *
gst_cony_transformer_change_structure (GstConyTransformer *self, const GstConyTransformerStep *st,
    guint n_top, guint n_events, const GstConyClassificationEvent *on,
    const GstConyClassificationEvent *off)
{
  GstStructure *s = gst_cony_transformer_new_step_structure (self, st, on->class_id, n_top,
      n_events);
  gst_structure_set (s, "segment_start", G_TYPE_UINT64, on->start, "previous_label", G_TYPE_STRING,
      off ? off->label : "", "previous_segment_start", G_TYPE_UINT64,
      off ? off->start : GST_CLOCK_TIME_NONE, "previous_segment_end", G_TYPE_UINT64,
      off ? off->end : GST_CLOCK_TIME_NONE, NULL);
  return s;
}

/* The on-change message of one label's segment event (sigmoid models): the step's
 * result for that label, and the event's own fields (event, class_id, label,
 * segment_start, segment_end: those of an `events` entry). */
static GstStructure *
gst_cony_transformer_label_event_structure (GstConyTransformer *self,
    const GstConyTransformerStep *st, guint n_top, guint n_events,
    const GstConyClassificationEvent *e)
{
  GstStructure *s = gst_cony_transformer_new_step_structure (self, st, e->class_id, n_top,
      n_events);
  GValue ev = G_VALUE_INIT;
  gst_cony_result_events_value (&ev, e, 1);
  const GstStructure *es = gst_value_get_structure (gst_value_array_get_value (&ev, 0));
  for (gint i = 0; i < gst_structure_n_fields (es); i++) {
    const gchar *name = gst_structure_nth_field_name (es, i);
    gst_structure_set_value (s, name, gst_structure_get_value (es, name));
  }
  g_value_unset (&ev);
  return s;
}

void
gst_cony_transformer_step_messages (GstConyTransformer *self, const GstConyTransformerStep *st,
    gint top, guint n_top, guint n_events, GstConyTransformerMessageMode mode, gdouble threshold,
    GPtrArray **messages)
{
  if (mode == GST_CONY_TRANSFORMER_MESSAGE_EVERY_STEP) {
    if (st->gated || gst_cony_transformer_step_passes (self, top, threshold))
      gst_cony_transformer_add_message (self, messages,
          gst_cony_transformer_new_step_structure (self, st, top, n_top, n_events));
  } else if (self->multi_label) {
    for (guint i = 0; i < n_events; i++)
      gst_cony_transformer_add_message (self, messages,
          gst_cony_transformer_label_event_structure (self, st, n_top, n_events, &self->events[i]));
  } else if (n_events > 0) {
    const GstConyClassificationEvent *on = &self->events[n_events - 1];
    gst_cony_transformer_add_message (self, messages,
        gst_cony_transformer_change_structure (self, st, n_top, n_events, on,
            n_events > 1 ? &self->events[0] : NULL));
  }
}

/* EOS in on-change mode: messages closing the open segment(s), with the
 * fields of the last step and eos = TRUE. */
void
gst_cony_transformer_close_segments_at_eos (GstConyTransformer *self)
{
  gboolean post;
  GstConyTransformerMessageMode mode;
  guint top_k;
  GPtrArray *messages = NULL;

  GST_OBJECT_LOCK (self);
  post = self->post_messages;
  mode = self->message_mode;
  top_k = self->top_k;
  GST_OBJECT_UNLOCK (self);
  if (!post || mode != GST_CONY_TRANSFORMER_MESSAGE_ON_CHANGE || !self->have_last)
    return;
  guint n_top = gst_cony_transformer_select_top (self, top_k);
  /* (a run that had not held yet at EOS belongs to the segment before it) */
  if (self->multi_label) {
    for (guint c = 0; c < self->n_classes; c++) {
      const GstConySegment *seg = gst_cony_segment_track_close (&self->label_seg[c]);
      if (seg->value != 1)
        continue;
      GstConyClassificationEvent e = { FALSE, (gint) c, self->labels[c], seg->start, seg->end };
      GstStructure *s = gst_cony_transformer_label_event_structure (self, &self->last, n_top, 0,
          &e);
      gst_structure_set (s, "eos", G_TYPE_BOOLEAN, TRUE, NULL);
      gst_cony_transformer_add_message (self, &messages, s);
      gst_cony_segment_track_reset (&self->label_seg[c], 0);
    }
  } else if (gst_cony_segment_track_close (&self->seg)->value >= 0) {
    const GstConySegment *seg = &self->seg.seg;
    GstStructure *s = gst_cony_transformer_new_step_structure (self, &self->last, seg->value, n_top,
        0);
    gst_structure_set (s, "segment_start", G_TYPE_UINT64, seg->start, "previous_label",
        G_TYPE_STRING, self->labels[seg->value], "previous_segment_start", G_TYPE_UINT64,
        seg->start, "previous_segment_end", G_TYPE_UINT64, seg->end, "eos", G_TYPE_BOOLEAN, TRUE,
        NULL);
    gst_cony_transformer_add_message (self, &messages, s);
    gst_cony_segment_track_reset (&self->seg, -1);
  }
  for (guint i = 0; messages && i < messages->len; i++)
    gst_element_post_message (GST_ELEMENT (self), messages->pdata[i]);
  if (messages)
    g_ptr_array_free (messages, TRUE);
}

/* EOS, any message mode: the offsets of the segments still open go
 * downstream in a custom event before EOS (gstconymeta.h), since no buffer
 * carries them: conyjson writes them. Before the on-change messages, which
 * close the segments. */
void
gst_cony_transformer_push_closed_segments (GstConyTransformer *self)
{
  GstConyClassificationEvent *ev = self->events; /* scratch: n_classes + 2 */
  guint n = 0;

  if (!self->have_last || ev == NULL)
    return;
  /* (a run that had not held yet at EOS belongs to the segment before it) */
  if (self->multi_label) {
    for (guint c = 0; c < self->n_classes; c++) {
      const GstConySegment *seg = gst_cony_segment_track_close (&self->label_seg[c]);
      if (seg->value == 1)
        ev[n++] = (GstConyClassificationEvent){ FALSE, (gint) c, self->labels[c], seg->start,
          seg->end };
    }
  } else {
    const GstConySegment *seg = gst_cony_segment_track_close (&self->seg);
    if (seg->value >= 0)
      ev[n++] = (GstConyClassificationEvent){ FALSE, seg->value, self->labels[seg->value],
        seg->start, seg->end };
  }
  if (n > 0)
    gst_pad_push_event (GST_BASE_TRANSFORM_SRC_PAD (self),
        gst_cony_segments_closed_event_new (self->last.step, ev, n));
}
