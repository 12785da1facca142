/* conyvggish: log-mel tokens -> VGG-style embeddings.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#pragma once
#include <gst/gst.h>

#include "cony/cnn-continual.h"
#include "cony/cnn.h"
#include "gstconycnnelement.h"
#include "gstconyelements.h"
#include "gstconytokens.h"

G_BEGIN_DECLS

/**
 * GstConyVggishPostprocess:
 * @GST_CONY_VGGISH_POSTPROCESS_NONE: raw embeddings
 * @GST_CONY_VGGISH_POSTPROCESS_TF: PCA, clip to [-2, 2], 8-bit quantisation
 *   truncated as TensorFlow's vggish_postprocess.py does (double maths)
 * @GST_CONY_VGGISH_POSTPROCESS_TORCH: the same, rounded half to even in float
 *   maths as torchvggish does
 *
 * The official release's PCA + 8-bit postprocess. Values stay float32 (0..255).
 */
typedef enum
{
  GST_CONY_VGGISH_POSTPROCESS_NONE = CONY_CNN_POSTPROCESS_NONE,
  GST_CONY_VGGISH_POSTPROCESS_TF = CONY_CNN_POSTPROCESS_TF,
  GST_CONY_VGGISH_POSTPROCESS_TORCH = CONY_CNN_POSTPROCESS_TORCH,
} GstConyVggishPostprocess;

#define GST_TYPE_CONY_VGGISH_POSTPROCESS (gst_cony_vggish_postprocess_get_type ())
GType gst_cony_vggish_postprocess_get_type (void);

/**
 * GstConyVggishMode:
 * @GST_CONY_VGGISH_MODE_WINDOW: the CNN on each window, as it was trained
 * @GST_CONY_VGGISH_MODE_CONTINUAL: every frame through the CNN once (docs/continual-cnn.md)
 */
typedef enum
{
  GST_CONY_VGGISH_MODE_WINDOW,
  GST_CONY_VGGISH_MODE_CONTINUAL,
} GstConyVggishMode;

#define GST_TYPE_CONY_VGGISH_MODE (gst_cony_vggish_mode_get_type ())
GType gst_cony_vggish_mode_get_type (void);

/* A complete window's output timing, kept while it waits in a batch. */
typedef struct {
  GstClockTime pts, duration;
  guint64 offset;
  gboolean discont;
  gdouble power; /* mean square of its samples (conymel's level meta); NAN: not known */
} GstConyVggishWindow;

#define GST_TYPE_CONY_VGGISH (gst_cony_vggish_get_type ())
G_DECLARE_FINAL_TYPE (GstConyVggish, gst_cony_vggish, GST, CONY_VGGISH, GstElement)

struct _GstConyVggish {
  GstElement parent;

  GstPad *sinkpad;
  GstPad *srcpad;

  /* The model, output and precision properties, the CNN and its token source. */
  GstConyCnnElement net;

  /* Properties (object lock); copied into the stream state on READY->PAUSED. */
  gchar *pca_model;
  GstConyVggishPostprocess postprocess;
  guint window;
  guint stride;
  guint batch;
  gboolean pad_tail;
  GstConyVggishMode mode;
  gboolean stride_set; /* stride given: continual mode checks it, else takes the time stride */
  gdouble min_level;   /* dBFS; -G_MAXDOUBLE: no gate */

  /* Stream state (streaming thread). */
  GstConyVggishPostprocess pp;
  guint win;     /* frames per window (= the model's input height) */
  guint hop;     /* frames between window starts */
  guint dim;     /* floats per input token (model width x channels) */
  guint out_dim; /* floats per output token */
  GstConyTokenInfo in_info;
  gboolean have_info;
  gboolean refusal_posted; /* unreadable token caps were named (cleared by accepted caps) */
  gint out_rate_n, out_rate_d;
  GstClockTime anchor;      /* time of input frame 0; NONE: re-anchor on the next buffer */
  guint64 frames_in;        /* input frames since the anchor */
  guint64 next_start;       /* input frame index where the next window starts */
  gfloat *frames;           /* FRAMES_CAPACITY x win frames of dim floats */
  guint head;               /* frame (in frames) where the next window starts */
  guint n_frames;           /* frames of the next window received so far */
  gboolean tail;            /* pad-tail at start */
  gfloat silence;           /* a silent log-mel value: log(mel-log-offset) of the caps */
  gfloat *out;              /* out_dim */
  gdouble *powers;          /* the level gate: each stored frame's hop mean square (as frames) */
  gboolean warned_no_level; /* min-level set but the input carries no level (said once) */
  gboolean next_discont;
  gboolean in_nonfinite;
  /* Batching (non-live upstream, batch > 1). */
  guint bsize;               /* the batch property at start */
  gboolean live_known, live; /* upstream liveness, asked once per caps */
  gfloat *pending;           /* bsize x win x dim: complete windows waiting */
  GstConyVggishWindow *pending_info;
  guint n_pending;
  /* mode=continual: the stream on the CNN, its geometry, and the block of time_stride
   * frames being filled (a block runs through the CNN when full). */
  GstConyVggishMode md;
  ConyCnnContinual *cc;
  ConyCnnContinualGeometry cg;
  gfloat *block;
  guint n_block;
};

G_END_DECLS
