/* conytransformer: continual transformer classification of a token stream.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#pragma once
#include <gst/gst.h>
#include <gst/base/gstbasetransform.h>

#include "cony/encoder.h"
#include "cony/labelgroups.h"
#include "cony/model.h"
#include "gstconyelements.h"
#include "gstconymeta.h"
#include "gstconysegments.h"
#include "gstconytokens.h"

G_BEGIN_DECLS

/**
 * GstConyTransformerAttention:
 *
 * Attention variant run in every block (docs/attention.md): -1
 * (%GST_CONY_TRANSFORMER_ATTENTION_MODEL, the variants the model was trained with) or
 * a #ConyAttentionVariant, by the nick libcony's table gives it
 * (cony_attention_variant_name(); `gst-inspect-1.0 conytransformer` lists them). The
 * fixed-landmark variants need a model that carries landmarks.
 */
typedef int GstConyTransformerAttention;
#define GST_CONY_TRANSFORMER_ATTENTION_MODEL (-1)

#define GST_TYPE_CONY_TRANSFORMER_ATTENTION (gst_cony_transformer_attention_get_type ())
GType gst_cony_transformer_attention_get_type (void);

/**
 * GstConyTransformerMessageMode:
 * @GST_CONY_TRANSFORMER_MESSAGE_EVERY_STEP: one message per step whose
 *   score reaches #GstConyTransformer:threshold
 * @GST_CONY_TRANSFORMER_MESSAGE_ON_CHANGE: a message only when the top label
 *   changes, with the running times of the segments
 */
typedef enum
{
  GST_CONY_TRANSFORMER_MESSAGE_EVERY_STEP,
  GST_CONY_TRANSFORMER_MESSAGE_ON_CHANGE,
} GstConyTransformerMessageMode;

#define GST_TYPE_CONY_TRANSFORMER_MESSAGE_MODE (gst_cony_transformer_message_mode_get_type ())
GType gst_cony_transformer_message_mode_get_type (void);

/* #GstConyTransformer:group-score: a #ConyGroupScore (cony/labelgroups.h), "max" or "sum". */
#define GST_TYPE_CONY_TRANSFORMER_GROUP_SCORE (gst_cony_transformer_group_score_get_type ())
GType gst_cony_transformer_group_score_get_type (void);

/* The times of one step (buffer time, ns). */
typedef struct {
  guint64 step;
  GstClockTime pts, tile_end; /* the step's own tokens: [PTS of the first, end of the last) */
  GstClockTime start, end;    /* the input the result covers (gstconytokens.h: lookahead) */
  gdouble fill;               /* context_fill */
  gboolean gated;             /* below conyvggish's level gate: no model step, no class */
} GstConyTransformerStep;

#define GST_TYPE_CONY_TRANSFORMER (gst_cony_transformer_get_type ())
G_DECLARE_FINAL_TYPE (GstConyTransformer, gst_cony_transformer, GST, CONY_TRANSFORMER,
    GstBaseTransform)

struct _GstConyTransformer {
  GstBaseTransform parent;

  /* Properties (object lock). model, attention and labels-file are read on
   * READY->PAUSED; the message settings on every buffer. */
  gchar *model_path;
  GstConyTransformerAttention attention;
  gchar *labels_file;
  gboolean post_messages;
  GstConyTransformerMessageMode message_mode;
  gdouble threshold;
  guint top_k;
  GstConySegmentRule hold; /* min-steps, min-duration */
  gchar *listen, *ignore;  /* ';'-separated labels (cony/labelgroups.h) */
  gchar *groups_file;
  gchar *other_label;
  ConyGroupScore group_score;

  /* Stream state (streaming thread). */
  ConyModel *model;
  ConyEncoder *encoder;
  gchar **labels;      /* n_classes strings, NULL-terminated (object lock: property) */
  gdouble *thresholds; /* n_classes, from the labels/groups file; NAN: the property */
  /* With listen, ignore or groups-file: the reported classes (n_classes of them) are a view
   * of the model's n_model; model_probs holds the model's scores before the fold. */
  ConyLabelView *view;
  guint n_model;
  gfloat *model_probs;
  gboolean multi_label;     /* sigmoid scores (model config output) */
  gint *top_ids;            /* n_classes: the classes of this step, best first */
  const gchar **top_labels; /* n_classes: their labels */
  guint n_classes;
  guint d_in;
  guint window;         /* n, in tokens */
  guint k;              /* tokens per step (the model's tokens_per_step) */
  guint refused_k;      /* tokens per buffer whose caps were refused (error posted once) */
  gfloat *logits;       /* n_model */
  gfloat *probs;        /* n_classes */
  GstClockTime *starts; /* window ring: start time of token i (since the reset) in [i % n] */
  GstConyTokenInfo info;
  gboolean have_info;
  guint refused_dim;       /* token size whose caps were refused (error posted once) */
  gboolean refusal_posted; /* unreadable token caps were named (error posted once) */
  gboolean in_nonfinite;
  gboolean in_overflow; /* the last buffer had steps with non-finite logits */

  /* on-change segments (running times): the top label's (value: its class, -1 none) */
  GstConySegmentTrack seg;
  /* multi-label: a track per label (n_classes; value 1 while on, 0 while off) */
  GstConySegmentTrack *label_seg;
  GstConyClassificationEvent *events; /* n_classes + 2: this step's segment events */
  /* the last step, for the closing message at EOS */
  gboolean have_last;
  GstConyTransformerStep last;
  guint last_top;
  guint64 n_steps; /* steps since the reset, gated ones included (the meta's step) */
};

G_END_DECLS
