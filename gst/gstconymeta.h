/* GstConyClassificationMeta: the result of one continual transformer step,
 * attached by conytransformer to the token buffer that produced it.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#pragma once
#include <gst/gst.h>

G_BEGIN_DECLS

/**
 * GstConyClassificationEvent:
 * @onset: TRUE when a label's segment opens at this step, FALSE when one
 *   closed (its last step was the previous one)
 * @class_id: the label's class
 * @label: its label (interned)
 * @start: running time at which the segment started (the PTS of its first
 *   step)
 * @end: for a closed segment, running time of the end of its last step's
 *   tokens; #GST_CLOCK_TIME_NONE for an onset
 *
 * A segment event of conytransformer (see docs/elements.md, "Segments"):
 * softmax models have one segment at a time (the top label's), sigmoid
 * models one per label.
 */
typedef struct {
  gboolean onset;
  gint class_id;
  const gchar *label;
  GstClockTime start, end;
} GstConyClassificationEvent;

/**
 * GstConyClassificationMeta:
 * @meta: parent #GstMeta
 * @step: index of the step since the last reset of the continual state
 *   (0 for the first token after start, FLUSH_STOP, DISCONT or a caps change)
 * @window_start: PTS of the oldest token in the attention window
 *   (#GST_CLOCK_TIME_NONE when the input has no timestamps)
 * @window_end: PTS + duration of the newest token (this step's token)
 * @class_id: index of the top-scoring class
 * @label: label of @class_id (interned string, never freed; "" if the model
 *   has no labels)
 * @score: softmax probability of @class_id (0..1)
 * @n_scores: number of classes
 * @scores: softmax probabilities of every class (@n_scores floats, owned by
 *   the meta)
 * @context_fill: tokens in the window / window size n (0 < fill <= 1; 1 once
 *   the window is full)
 * @pts: PTS of the step (of its first token): the buffer time the step is
 *   filed under
 * @running_start: @window_start as running time in the segment
 *   (#GST_CLOCK_TIME_NONE when not TIME or before the segment)
 * @running_end: @window_end as running time
 * @stream_start: @window_start as stream time
 * @stream_end: @window_end as stream time
 * @multi_label: TRUE when @scores are independent sigmoid scores (a
 *   multi-label model, config `output` = sigmoid), FALSE for softmax
 *   probabilities that sum to 1
 * @n_top: number of classes in @top_ids (conytransformer's top-k, at most
 *   @n_scores)
 * @top_ids: the @n_top best classes, best first (owned by the meta); their
 *   scores are @scores[@top_ids[i]]
 * @top_labels: their labels (interned strings; the array is owned by the
 *   meta)
 * @n_events: number of @events
 * @events: the segment events of this step, offsets first (owned by the
 *   meta)
 * @gated: TRUE when the step's audio was below conyvggish's level gate
 *   (min-level): no CNN and no model step ran, so there is no class (@class_id
 *   -1, @label "", no scores, no top-k); the times are the gated window's and
 *   @events may hold the offsets it caused (docs/elements.md, "Level gate")
 *
 * Time span: the result is computed from the input in
 * [@window_start, @window_end): from the start of the oldest token in the
 * attention window to the end of the input of the newest one (its PTS +
 * duration + the caps' `lookahead`, see gstconytokens.h): for VGGish tokens,
 * the newest token's whole 0.975 s of audio.
 *
 * One classification step. The API is tagless and the meta has a copy
 * transform, so it survives queues, gst_buffer_copy(), make-writable copies
 * and audioconvert-style converters. Region copies (a buffer cut into parts)
 * keep it too.
 *
 * A buffer carrying K tokens carries K metas, one per step. They are
 * unordered on the buffer (copies reverse the order); sort by @step, or use
 * gst_buffer_get_cony_classification_meta(), which returns the newest step.
 *
 * Python and other introspection users read the same values from the
 * #GstCustomMeta named #GST_CONY_CLASSIFICATION_CUSTOM_META_NAME (see
 * gst_cony_classification_custom_meta_register()).
 */
typedef struct {
  GstMeta meta;

  guint64 step;
  GstClockTime window_start;
  GstClockTime window_end;
  gint class_id;
  const gchar *label;
  gfloat score;
  guint n_scores;
  gfloat *scores;
  gdouble context_fill;

  GstClockTime pts;
  GstClockTime running_start, running_end;
  GstClockTime stream_start, stream_end;
  gboolean multi_label;
  guint n_top;
  gint *top_ids;
  const gchar **top_labels;
  guint n_events;
  GstConyClassificationEvent *events;
  gboolean gated;
} GstConyClassificationMeta;

GType gst_cony_classification_meta_api_get_type (void);
#define GST_CONY_CLASSIFICATION_META_API_TYPE (gst_cony_classification_meta_api_get_type ())

const GstMetaInfo *gst_cony_classification_meta_get_info (void);
#define GST_CONY_CLASSIFICATION_META_INFO (gst_cony_classification_meta_get_info ())

/* Adds a meta with the given values; @scores (@n_scores floats) and @label
 * are copied. */
GstConyClassificationMeta *gst_buffer_add_cony_classification_meta (GstBuffer *buffer, guint64 step,
    GstClockTime window_start, GstClockTime window_end, gint class_id, const gchar *label,
    gfloat score, const gfloat *scores, guint n_scores, gdouble context_fill);

/* Adds a meta with every field of @values (the GstMeta part is ignored);
 * labels are interned, @scores, @top_ids and @top_labels copied. */
GstConyClassificationMeta *gst_buffer_add_cony_classification_meta_full (GstBuffer *buffer,
    const GstConyClassificationMeta *values);

/* The meta of the newest step on @buffer (highest @step), or NULL. */
GstConyClassificationMeta *gst_buffer_get_cony_classification_meta (GstBuffer *buffer);

/* Number of classification metas on @buffer (one per token step). */
guint gst_buffer_get_n_cony_classification_metas (GstBuffer *buffer);

/**
 * GST_CONY_CLASSIFICATION_CUSTOM_META_NAME:
 *
 * Name of the #GstCustomMeta mirror. Its structure holds the fields of the
 * result table (gstconyresult.h: gst_cony_result_fields()), under the names
 * conyjson writes (docs/results.schema.json) and conytransformer's bus messages
 * carry: step, pts, start, end, ... (docs/elements.md, "Result fields"). From Python:
 * `buf.get_custom_meta("GstConyClassificationCustomMeta").get_structure()`.
 */
#define GST_CONY_CLASSIFICATION_CUSTOM_META_NAME "GstConyClassificationCustomMeta"

/* Registers the custom meta (idempotent; conytransformer calls it in class_init). */
void gst_cony_classification_custom_meta_register (void);

/* Adds the custom mirror of @meta to @buffer. */
GstCustomMeta *gst_buffer_add_cony_classification_custom_meta (GstBuffer *buffer,
    const GstConyClassificationMeta *meta);

/**
 * GST_CONY_SEGMENTS_CLOSED_EVENT_NAME:
 *
 * Structure name of the custom downstream event conytransformer sends
 * before EOS when segments are still open (whatever its message-mode): their
 * offsets, which no buffer carries, so that conyjson (or an application's
 * pad probe) can write them. Fields: `step` (#guint64, the last step) and
 * `events` (#GST_TYPE_ARRAY of `event` structures, as in the custom meta).
 */
#define GST_CONY_SEGMENTS_CLOSED_EVENT_NAME "GstConySegmentsClosed"

/* A GST_EVENT_CUSTOM_DOWNSTREAM carrying @n closing @events after @step. */
GstEvent *gst_cony_segments_closed_event_new (guint64 step,
    const GstConyClassificationEvent *events, guint n);

/* Reads a segments-closed event: TRUE and @step, @events (newly allocated,
 * labels interned; g_free() it) and @n; FALSE for any other event. */
gboolean gst_cony_segments_closed_event_parse (GstEvent *event, guint64 *step,
    GstConyClassificationEvent **events, guint *n);

G_END_DECLS
