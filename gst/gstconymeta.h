/* GstConyClassificationMeta: the result of one continual transformer step,
 * attached by conytransformer to the token buffer that produced it.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#pragma once
#include <gst/gst.h>

G_BEGIN_DECLS

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
} GstConyClassificationMeta;

GType gst_cony_classification_meta_api_get_type (void);
#define GST_CONY_CLASSIFICATION_META_API_TYPE (gst_cony_classification_meta_api_get_type ())

const GstMetaInfo *gst_cony_classification_meta_get_info (void);
#define GST_CONY_CLASSIFICATION_META_INFO (gst_cony_classification_meta_get_info ())

/* Adds a meta with the given values; @scores (@n_scores floats) and @label
 * are copied. */
GstConyClassificationMeta *gst_buffer_add_cony_classification_meta (GstBuffer *buffer,
    guint64 step, GstClockTime window_start, GstClockTime window_end, gint class_id,
    const gchar *label, gfloat score, const gfloat *scores, guint n_scores,
    gdouble context_fill);

/* The meta of the newest step on @buffer (highest @step), or NULL. */
GstConyClassificationMeta *gst_buffer_get_cony_classification_meta (GstBuffer *buffer);

/* Number of classification metas on @buffer (one per token step). */
guint gst_buffer_get_n_cony_classification_metas (GstBuffer *buffer);

/**
 * GST_CONY_CLASSIFICATION_CUSTOM_META_NAME:
 *
 * Name of the #GstCustomMeta mirror. Its structure holds the fields
 * step (guint64), window-start, window-end (guint64, ns), class-id (gint),
 * label (string), score (gfloat), context-fill (gdouble) and scores
 * (#GST_TYPE_ARRAY of gfloat). From Python:
 * `buf.get_custom_meta("GstConyClassificationCustomMeta").get_structure()`.
 */
#define GST_CONY_CLASSIFICATION_CUSTOM_META_NAME "GstConyClassificationCustomMeta"

/* Registers the custom meta (idempotent; conytransformer calls it in class_init). */
void gst_cony_classification_custom_meta_register (void);

/* Adds the custom mirror of @meta to @buffer. */
GstCustomMeta *gst_buffer_add_cony_classification_custom_meta (GstBuffer *buffer,
    const GstConyClassificationMeta *meta);

G_END_DECLS
