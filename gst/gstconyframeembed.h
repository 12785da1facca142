/* conyframeembed: video frames -> one CNN embedding token per frame (or one per patch).
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#pragma once
#include <gst/gst.h>
#include <gst/base/gstbasetransform.h>
#include <gst/video/video.h>

#include "cony/cnn.h"
#include "gstconyelements.h"
#include "gstconytokens.h"

G_BEGIN_DECLS

/**
 * GstConyFrameEmbedCrop:
 * @GST_CONY_FRAME_EMBED_CROP_CENTER: the largest centred region with the model's
 *   aspect ratio
 * @GST_CONY_FRAME_EMBED_CROP_NONE: the whole frame (stretched)
 *
 * The region of a frame that is resized to the model's input.
 */
typedef enum
{
  GST_CONY_FRAME_EMBED_CROP_CENTER = 0,
  GST_CONY_FRAME_EMBED_CROP_NONE,
} GstConyFrameEmbedCrop;

#define GST_TYPE_CONY_FRAME_EMBED_CROP (gst_cony_frame_embed_crop_get_type ())
GType gst_cony_frame_embed_crop_get_type (void);

#define GST_TYPE_CONY_FRAME_EMBED (gst_cony_frame_embed_get_type ())
G_DECLARE_FINAL_TYPE (GstConyFrameEmbed, gst_cony_frame_embed, GST, CONY_FRAME_EMBED,
    GstBaseTransform)

struct _GstConyFrameEmbed {
  GstBaseTransform parent;

  /* Properties (object lock), copied into the stream state on READY->PAUSED; the qos
   * property is GstBaseTransform's. */
  gchar *model;
  guint every;
  guint patches_x, patches_y; /* patch grid: columns x rows of model-sized tiles */
  GstConyFrameEmbedCrop crop;
  gint output;    /* GstConyVggishOutput */
  gint precision; /* ConyCnnPrecision */
  gboolean post_messages;

  /* QoS state (object lock): from the last QOS event on the source pad. */
  GstClockTime earliest_time; /* running time before which frames are late */
  gdouble proportion;

  /* Stream state (streaming thread). */
  ConyCnn *cnn;
  GstConyTokenSource source; /* the CNN file, for the token caps */
  guint k;                   /* every, fixed for the run */
  guint px, py;              /* patches_x, patches_y, fixed for the run */
  guint n_patches;           /* px x py tokens per frame */
  guint out_dim;
  GstVideoInfo vinfo;
  gboolean have_info;
  gboolean refusal_posted;    /* the caps refusal was named (cleared by accepted caps, start) */
  guint64 frame_index;        /* frames since the last discontinuity */
  guint64 tokens_out;         /* tokens since the last discontinuity */
  guint64 processed, dropped; /* for QoS messages */
  gboolean next_discont;
  gfloat *in;        /* n_patches x H x W x C inputs of the CNN */
  gfloat *scratch;   /* cony_image_resize()'s, for the negotiated frame size */
  guint crop_mode;   /* ConyImageCrop, fixed for the run */
  gboolean messages; /* post top-1 messages this run */
};

G_END_DECLS
