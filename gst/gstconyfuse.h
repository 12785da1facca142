/* conyfuse: time-aligns several token streams into the fused tokens of one model.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#pragma once
#include <gst/gst.h>
#include <gst/base/gstaggregator.h>

#include "cony/fusion.h"
#include "gstconyelements.h"
#include "gstconytokens.h"

G_BEGIN_DECLS

/* One input: a request pad sink_<name>, <name> an input of the model. */
#define GST_TYPE_CONY_FUSE_PAD (gst_cony_fuse_pad_get_type ())
G_DECLARE_FINAL_TYPE (GstConyFusePad, gst_cony_fuse_pad, GST, CONY_FUSE_PAD, GstAggregatorPad)

struct _GstConyFusePad {
  GstAggregatorPad parent;

  /* Streaming thread (the aggregator's source pad task) only. */
  gint input;            /* index in the model's inputs; -1 before start */
  GstConyTokenInfo info; /* from the pad's caps */
  gboolean have_info;
  guint head_index; /* tokens of the queued head buffer already taken */
  gfloat *newest;   /* (size) the newest token taken, if have_newest */
  gboolean have_newest;
  GstClockTime newest_rt; /* its running time */
  GstClockTime last_rt;   /* running time of the last token taken, even if since gone */
  gboolean rate_noted;
};

#define GST_TYPE_CONY_FUSE (gst_cony_fuse_get_type ())
G_DECLARE_FINAL_TYPE (GstConyFuse, gst_cony_fuse, GST, CONY_FUSE, GstAggregator)

struct _GstConyFuse {
  GstAggregator parent;

  /* Property (object lock), read on READY->PAUSED. */
  gchar *model;

  /* Stream state: set on start, used by the source pad task. */
  ConyFusion *fusion;
  gboolean caps_sent;
  GstClockTime t0;  /* running time of step 0; NONE until the first token */
  guint64 step;     /* the next step's index since t0 */
  gboolean discont; /* the next output buffer starts a new stream */
  gfloat *fused;    /* (d_out) */
};

G_END_DECLS
