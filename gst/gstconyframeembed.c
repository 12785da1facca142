/* conyframeembed: video frames -> one CNN embedding token per frame.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * SECTION:element-conyframeembed
 * @title: conyframeembed
 * @short_description: CNN embeddings of video frames as a token stream
 *
 * conyframeembed runs libcony's CNN engine (VGG-style networks, MobileNet-v1 and
 * MobileNet-v2; include/cony/cnn.h) on video frames and outputs one token per
 * frame (or per #every-th frame): the network's scores or, with
 * #GstConyFrameEmbed:output, its pooled embedding, as
 * `other/tensors,format=static,num_tensors=1,types=float32,dimensions=D:1,framerate=F/every`
 * for `conytransformer` or any NNStreamer tensor element.
 *
 * The #GstConyFrameEmbed:model property names the CNN's safetensors file. Its
 * metadata declares the input size (input_height, input_width, input_channels)
 * and the per-channel normalisation (input_mean, input_std); D is the model's
 * output size. The sink pad takes RGB for 3-channel models and GRAY8 for
 * 1-channel ones, of any size: a frame of another size than the model's input
 * is cropped (#GstConyFrameEmbed:crop, centre by default) and area-averaged to
 * it (include/cony/image.h); one of that size is used as it is (the caps query
 * puts it first). Pixel values are divided by 255 before the
 * model's normalisation, so a model sees values in 0..1 as torchvision's
 * ToTensor gives them. The model is loaded on READY->PAUSED; a missing or
 * invalid file is an error and the state change fails. Elements of the same
 * unchanged file in one process share one copy of its weights (the read-only
 * #GstConyFrameEmbed:model-users counts them).
 *
 * With labelled scores (the ImageNet MobileNet-v2 of models/imagenet/) each
 * embedded frame also posts an element message `conyframeembed` with its top-1
 * (`label`, `class_id`, `score`, the frame's times), see
 * #GstConyFrameEmbed:post-messages: a per-frame classifier.
 *
 * ## Patches
 *
 * With #GstConyFrameEmbed:patches-x and #GstConyFrameEmbed:patches-y (default 1)
 * the frame is a grid of patches-x x patches-y tiles, each of the model's input
 * size (so the frame is patches-x x input_width wide and patches-y x
 * input_height high), and the CNN embeds every tile: a frame gives k =
 * patches-x x patches-y tokens, in one buffer, row by row from the top-left
 * tile, with caps `dimensions=D:k` and the framerate of the frames (buffers),
 * so the token rate is k x that. This is the multi-token input of the CoNy
 * paper (IV-C: the patches of one frame enter the attention window together):
 * `conytransformer` with a model whose `tokens_per_step` is k makes one step
 * per frame. The timestamps below are per frame (per buffer) as without
 * patches.
 *
 * ## Timestamps
 *
 * A token has its frame's PTS, and a duration of #every frame durations (the
 * buffer duration, or 1/framerate when the buffer has none), so with every=k
 * the tokens tile the timeline. Frames are counted from the last discontinuity
 * (DISCONT buffer, FLUSH, caps change): frame i is embedded when i is a
 * multiple of #every. The first token after a discontinuity carries DISCONT;
 * OFFSET counts tokens. Frames without a PTS give tokens without one. With
 * every > 1 and a fixed frame rate, the caps field `lookahead` =
 * -(every - 1) / framerate says that a token's input (one frame) ends
 * before the token does (gstconytokens.h).
 *
 * ## QoS
 *
 * conyframeembed is a #GstBaseTransform, and #GstBaseTransform:qos (on by default
 * here) switches its QoS handling. After a QOS event reporting lateness diff at
 * running time t, a frame that is due for embedding but whose running time is
 * not after t + 2 diff (t + diff when early; the base class itself would use
 * t + diff) is not embedded, and a QoS message (format BUFFERS, processed/dropped
 * counts) is posted for each one. Two things differ from the base class on
 * purpose: frames that are not due (every > 1) are never counted as late, and no
 * token and no DISCONT flag replace a skipped frame (the base class would mark the
 * next buffer DISCONT, which would restart conytransformer's continual state):
 * the skip is visible downstream as a hole in the token timestamps (the next
 * token's PTS is later than the previous PTS + duration), and the frame counter,
 * hence the every-k phase, moves on as if the frame had been embedded.
 *
 * ## Latency
 *
 * A token is output while its frame is processed, with the frame's own PTS:
 * the element adds no latency of its own and answers the LATENCY query with
 * upstream's values (its processing time is not latency in GStreamer's sense;
 * a slow CNN shows up as QoS lateness instead).
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 videotestsrc num-buffers=50 ! videoconvert ! videoscale ! conyframeembed model=models/video/frame_cnn.safetensors ! fakesink silent=false -v
 * ]| 50 frames give 50 tokens.
 * |[
 * gst-launch-1.0 -m v4l2src ! videoconvert ! conyframeembed model=models/imagenet/mobilenet_v2.safetensors ! fakesink
 * ]| a camera's frames labelled with the 1000 ImageNet classes (pipelines/camera.sh).
 * |[
 * gst-launch-1.0 v4l2src ! videoconvert ! videoscale ! conyframeembed model=models/video/frame_cnn.safetensors every=3 ! conytransformer model=models/video/classifier.safetensors ! fakesink
 * ]| a camera classified at a third of its frame rate.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstconyframeembed.h"
#include "gstconyelement.h"
#include "gstconyvggish.h"
#include "cony/image.h"

#include <stdlib.h>
#include <string.h>

GST_DEBUG_CATEGORY_STATIC (gst_cony_frame_embed_debug);
#define GST_CAT_DEFAULT gst_cony_frame_embed_debug

#define DEFAULT_EVERY 1
#define DEFAULT_QOS TRUE
#define DEFAULT_PATCHES 1
#define DEFAULT_CROP GST_CONY_FRAME_EMBED_CROP_CENTER
#define DEFAULT_POST_MESSAGES TRUE

static const GstConyCnnElementInfo cnn_info = {
  .model_blurb = "Path of the image CNN safetensors file (input size and mean/std in its "
                 "metadata); a relative name is also looked up in $CONY_MODEL_PATH and "
                 "DATADIR/gst-cony/models",
  .model_hint = "an image CNN file, e.g. the shipped video/frame_cnn.safetensors",
  .output_blurb = "Tokens: the scores or the pooled embedding",
  .precision = TRUE,
};

enum
{
  PROP_0,
  PROP_EVERY,
  PROP_PATCHES_X,
  PROP_PATCHES_Y,
  PROP_CROP,
  PROP_POST_MESSAGES,
  PROP_CNN, /* GST_CONY_CNN_N_PROPS ids: model, output, model-users, precision(-in-use) */
};

GType
gst_cony_frame_embed_crop_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    { GST_CONY_FRAME_EMBED_CROP_CENTER,
        "The largest centred region with the model's aspect ratio, then resized", "center" },
    { GST_CONY_FRAME_EMBED_CROP_NONE, "The whole frame, resized (stretched) to the model's input",
        "none" },
    { 0, NULL, NULL },
  };
  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstConyFrameEmbedCrop", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

#define SINK_CAPS \
  "video/x-raw, format = (string) { RGB, GRAY8 }, width = (int) [ 1, 65536 ], " \
  "height = (int) [ 1, 65536 ], framerate = (fraction) [ 0/1, 2147483647/1 ]"

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink", GST_PAD_SINK,
    GST_PAD_ALWAYS, GST_STATIC_CAPS (SINK_CAPS));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src", GST_PAD_SRC,
    GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_CONY_TOKENS_CAPS_STRING));

#define gst_cony_frame_embed_parent_class parent_class
G_DEFINE_TYPE (GstConyFrameEmbed, gst_cony_frame_embed, GST_TYPE_BASE_TRANSFORM);
GST_ELEMENT_REGISTER_DEFINE (conyframeembed, "conyframeembed", GST_RANK_NONE,
    GST_TYPE_CONY_FRAME_EMBED);

/* ------------------------------------------------------------------------ */

static void
gst_cony_frame_embed_reset_qos (GstConyFrameEmbed *self)
{
  GST_OBJECT_LOCK (self);
  self->earliest_time = GST_CLOCK_TIME_NONE;
  self->proportion = 1.0;
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_frame_embed_reset_stream (GstConyFrameEmbed *self)
{
  self->frame_index = 0;
  self->tokens_out = 0;
  self->next_discont = TRUE;
}

/* The model's frame format. */
static const gchar *
gst_cony_frame_embed_model_format (GstConyFrameEmbed *self)
{
  return cony_cnn_get_input_channels (self->net.cnn) == 3 ? "RGB" : "GRAY8";
}

/* The frame size the model takes: the tile size times the patch grid. */
static void
gst_cony_frame_embed_frame_size (GstConyFrameEmbed *self, guint *width, guint *height)
{
  *width = cony_cnn_get_input_width (self->net.cnn) * self->px;
  *height = cony_cnn_get_input_height (self->net.cnn) * self->py;
}

/* Token caps for frames at @fps_n/@fps_d (0/1: variable rate). NULL on overflow. */
static GstCaps *
gst_cony_frame_embed_token_caps (GstConyFrameEmbed *self, gint fps_n, gint fps_d)
{
  /* rate_n/rate_d: tokens per second (k per frame); the caps carry frames per second */
  GstConyTokenInfo out = { self->out_dim, self->n_patches, 0, 1, 0, 1 };
  if (fps_n > 0
      && !gst_util_fraction_multiply (fps_n, fps_d, (gint) self->n_patches, (gint) self->k,
          &out.rate_n, &out.rate_d))
    return NULL;
  /* A token lasts `every` frames but embeds only the first: its input ends
   * every - 1 frames before its end (gstconytokens.h). */
  if (fps_n > 0 && self->k > 1
      && !gst_util_fraction_multiply (1 - (gint) self->k, 1, fps_d, fps_n, &out.lookahead_n,
          &out.lookahead_d))
    return NULL;
  GstCaps *caps = gst_cony_tokens_caps_new (&out);
  if (caps)
    gst_cony_tokens_caps_set_source (caps, self->net.source.name, self->net.source.sha256,
        self->net.source.output);
  return caps;
}

/* The frames the model takes, at any rate: its size and format first; without
 * patches, frames of any size after it (resized here, see #GstConyFrameEmbed:crop). */
static GstCaps *
gst_cony_frame_embed_video_caps (GstConyFrameEmbed *self)
{
  GstCaps *any = gst_caps_make_writable (
      gst_pad_get_pad_template_caps (GST_BASE_TRANSFORM_SINK_PAD (self)));
  guint w, h;

  gst_caps_set_simple (any, "format", G_TYPE_STRING, gst_cony_frame_embed_model_format (self),
      NULL);
  GstCaps *caps = gst_caps_copy (any);
  gst_cony_frame_embed_frame_size (self, &w, &h);
  gst_caps_set_simple (caps, "width", G_TYPE_INT, (gint) w, "height", G_TYPE_INT, (gint) h, NULL);
  if (self->n_patches == 1)
    caps = gst_caps_merge (caps, any);
  else
    gst_caps_unref (any);
  return caps;
}

/* Tokens -> video: the model's frames (the caps query announces them, so videoscale
 * produces them). Video -> tokens: the frames the model takes give one token
 * structure per fixed frame rate (any rate otherwise); other frames give nothing.
 * Before the model is loaded: the other pad's template. */
static GstCaps *
gst_cony_frame_embed_transform_caps (GstBaseTransform *trans, GstPadDirection direction,
    GstCaps *caps, GstCaps *filter)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (trans);
  GstCaps *res;

  if (self->net.cnn == NULL) {
    res = gst_pad_get_pad_template_caps (
        direction == GST_PAD_SINK ? trans->srcpad : trans->sinkpad);
  } else if (direction == GST_PAD_SRC) {
    res = gst_cony_frame_embed_video_caps (self);
  } else {
    GstCaps *model = gst_cony_frame_embed_video_caps (self);
    GstCaps *video = gst_caps_intersect (caps, model);
    gst_caps_unref (model);
    res = gst_caps_new_empty ();
    for (guint i = 0; i < gst_caps_get_size (video); i++) {
      gint n, d;
      GstCaps *t = NULL;
      if (gst_structure_get_fraction (gst_caps_get_structure (video, i), "framerate", &n, &d))
        t = gst_cony_frame_embed_token_caps (self, n, d);
      if (t == NULL) {
        /* not a fixed rate: the tokens' rate is not known yet */
        t = gst_cony_frame_embed_token_caps (self, 0, 1);
        gst_caps_set_simple (t, "framerate", GST_TYPE_FRACTION_RANGE, 0, 1, G_MAXINT, 1, NULL);
      }
      res = gst_caps_merge (res, t);
    }
    gst_caps_unref (video);
  }
  if (filter) {
    GstCaps *tmp = gst_caps_intersect_full (filter, res, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref (res);
    res = tmp;
  }
  return res;
}

static gboolean
gst_cony_frame_embed_transform_size (GstBaseTransform *trans, GstPadDirection direction,
    GstCaps *caps, gsize size, GstCaps *othercaps, gsize *othersize)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (trans);

  if (direction != GST_PAD_SINK || self->net.cnn == NULL)
    return FALSE;
  *othersize = (gsize) self->n_patches * self->out_dim * sizeof (gfloat);
  return TRUE;
}

/* Says what the model takes and what upstream offers, and which converter is missing:
 * "conyframeembed takes 448x224 RGB video, got 640x480 I420 video: add videoscale and
 * videoconvert before it" (patches-x=2). */
static void
gst_cony_frame_embed_name_refusal (GstConyFrameEmbed *self, const GstCaps *offered)
{
  const GstStructure *s = gst_caps_get_structure (offered, 0);
  guint W, H;
  gst_cony_frame_embed_frame_size (self, &W, &H);
  const gchar *want = gst_cony_frame_embed_model_format (self);
  /* one tile: any size, resized to the model's; a grid of patches: its size exactly */
  gboolean any_size = self->n_patches == 1;
  g_autofree gchar *takes = any_size
      ? g_strdup_printf ("%s video of any size (resized to %ux%u)", want, W, H)
      : g_strdup_printf ("%ux%u %s video", W, H, want);
  if (!gst_structure_has_name (s, "video/x-raw")) {
    gst_cony_element_refuse_caps (GST_ELEMENT (self), &self->refusal_posted, takes,
        gst_structure_get_name (s), "decode and convert first (decodebin ! videoconvert)", offered);
    return;
  }
  g_autofree gchar *w = gst_cony_element_fixed_field (s, "width");
  g_autofree gchar *h = gst_cony_element_fixed_field (s, "height");
  g_autofree gchar *fmt = gst_cony_element_fixed_field (s, "format");
  gboolean scale = !any_size && ((w && (guint) atoi (w) != W) || (h && (guint) atoi (h) != H));
  gboolean convert = fmt && strcmp (fmt, want) != 0;
  GString *got = g_string_new (NULL);
  if (w || h)
    g_string_append_printf (got, "%sx%s ", w ? w : "?", h ? h : "?");
  if (fmt)
    g_string_append_printf (got, "%s ", fmt);
  g_string_append (got, "video");
  gst_cony_element_refuse_convertible (GST_ELEMENT (self), &self->refusal_posted, takes, got->str,
      offered, scale, "videoscale", convert, "videoconvert");
  g_string_free (got, TRUE);
}

/* Names a refused CAPS or ACCEPT_CAPS query on the sink pad (upstream's own error
 * would only say "not-negotiated"). */
static gboolean
gst_cony_frame_embed_query (GstBaseTransform *trans, GstPadDirection direction, GstQuery *query)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (trans);
  gboolean ok = GST_BASE_TRANSFORM_CLASS (parent_class)->query (trans, direction, query);
  const GstCaps *offered = direction == GST_PAD_SINK && self->net.cnn
      ? gst_cony_element_refused_caps (query)
      : NULL;
  if (offered)
    gst_cony_frame_embed_name_refusal (self, offered);
  return ok;
}

static gboolean
gst_cony_frame_embed_set_caps (GstBaseTransform *trans, GstCaps *incaps, GstCaps *outcaps)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (trans);
  GstVideoInfo info;
  guint W, H;

  if (self->net.cnn == NULL)
    return FALSE;
  gst_cony_frame_embed_frame_size (self, &W, &H);
  if (!gst_video_info_from_caps (&info, incaps)) {
    GST_WARNING_OBJECT (self, "refusing caps %" GST_PTR_FORMAT ": not raw video", incaps);
    return FALSE;
  }
  gboolean size_ok = self->n_patches == 1
      || ((guint) GST_VIDEO_INFO_WIDTH (&info) == W && (guint) GST_VIDEO_INFO_HEIGHT (&info) == H);
  if (!size_ok
      || strcmp (gst_video_format_to_string (GST_VIDEO_INFO_FORMAT (&info)),
             gst_cony_frame_embed_model_format (self))
          != 0) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Video frames do not match the model"),
        ("the model takes %ux%u %s frames (%ux%u patches of %ux%u), the input is %dx%d %s; "
         "put videoconvert ! videoscale in front",
            W, H, gst_cony_frame_embed_model_format (self), self->px, self->py,
            cony_cnn_get_input_width (self->net.cnn), cony_cnn_get_input_height (self->net.cnn),
            GST_VIDEO_INFO_WIDTH (&info), GST_VIDEO_INFO_HEIGHT (&info),
            gst_video_format_to_string (GST_VIDEO_INFO_FORMAT (&info))));
    return FALSE;
  }
  if (self->have_info && (info.fps_n != self->vinfo.fps_n || info.fps_d != self->vinfo.fps_d)) {
    GST_DEBUG_OBJECT (self, "frame rate changed: restarting the frame count");
    gst_cony_frame_embed_reset_stream (self);
  }
  self->vinfo = info;
  self->have_info = TRUE;
  self->refusal_posted = FALSE;
  g_free (self->scratch);
  self->scratch = g_new (gfloat,
      cony_image_scratch_size (GST_VIDEO_INFO_WIDTH (&info), GST_VIDEO_INFO_HEIGHT (&info),
          cony_cnn_get_input_channels (self->net.cnn), W, H));
  if ((guint) GST_VIDEO_INFO_WIDTH (&info) != W || (guint) GST_VIDEO_INFO_HEIGHT (&info) != H)
    GST_INFO_OBJECT (self, "%dx%d frames resized to %ux%u (crop %s)", GST_VIDEO_INFO_WIDTH (&info),
        GST_VIDEO_INFO_HEIGHT (&info), W, H,
        self->crop_mode == CONY_IMAGE_CROP_CENTER ? "center" : "none");
  return TRUE;
}

/* TRUE when QoS says the frame is too late to be worth embedding; then posts the QoS
 * message. The base class's own check would mark the next token DISCONT (which resets
 * conytransformer) and would run before the every-k phase, so it stays idle: the QOS
 * events are kept here (gst_cony_frame_embed_src_event). */
static gboolean
gst_cony_frame_embed_is_late (GstConyFrameEmbed *self, GstBuffer *buf)
{
  GstSegment *segment = &GST_BASE_TRANSFORM (self)->segment;
  GstClockTime pts = GST_BUFFER_PTS (buf), running_time, earliest;
  gdouble proportion;

  if (!GST_CLOCK_TIME_IS_VALID (pts) || segment->format != GST_FORMAT_TIME
      || !gst_base_transform_is_qos_enabled (GST_BASE_TRANSFORM (self)))
    return FALSE;
  running_time = gst_segment_to_running_time (segment, GST_FORMAT_TIME, pts);
  GST_OBJECT_LOCK (self);
  earliest = self->earliest_time;
  proportion = self->proportion;
  GST_OBJECT_UNLOCK (self);
  if (!GST_CLOCK_TIME_IS_VALID (earliest) || !GST_CLOCK_TIME_IS_VALID (running_time)
      || running_time > earliest)
    return FALSE;

  self->dropped++;
  GstMessage *msg = gst_message_new_qos (GST_OBJECT_CAST (self), FALSE, running_time,
      gst_segment_to_stream_time (segment, GST_FORMAT_TIME, pts), pts, GST_BUFFER_DURATION (buf));
  gst_message_set_qos_values (msg, (gint64) earliest - (gint64) running_time, proportion, 1000000);
  gst_message_set_qos_stats (msg, GST_FORMAT_BUFFERS, self->processed, self->dropped);
  gst_element_post_message (GST_ELEMENT_CAST (self), msg);
  return TRUE;
}

/* Counts the frame; hands it to the base class (and so to transform) only when it is
 * due (every k-th since the last discontinuity) and not late. A skipped frame gives no
 * output and no DISCONT: the tokens tile the timeline, or leave a hole for QoS. */
static GstFlowReturn
gst_cony_frame_embed_submit_input_buffer (GstBaseTransform *trans, gboolean is_discont,
    GstBuffer *buf)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (trans);

  if (!gst_cony_element_check_caps_seen (GST_ELEMENT (self), self->have_info)) {
    gst_buffer_unref (buf);
    return GST_FLOW_NOT_NEGOTIATED;
  }
  if (GST_BUFFER_IS_DISCONT (buf) && self->frame_index > 0) {
    GST_DEBUG_OBJECT (self, "discontinuity: restarting the frame count");
    gst_cony_frame_embed_reset_stream (self);
  }
  guint64 index = self->frame_index++;
  if (index % self->k != 0) {
    gst_buffer_unref (buf);
    return GST_FLOW_OK;
  }
  if (gst_cony_frame_embed_is_late (self, buf)) {
    GST_DEBUG_OBJECT (self,
        "frame %" G_GUINT64_FORMAT " at %" GST_TIME_FORMAT " is late (QoS): not embedded", index,
        GST_TIME_ARGS (GST_BUFFER_PTS (buf)));
    gst_buffer_unref (buf);
    return GST_FLOW_OK;
  }
  return GST_BASE_TRANSFORM_CLASS (parent_class)->submit_input_buffer (trans, is_discont, buf);
}

/* The frame's tiles, row by row from the top left, one model input (H x W x C,
 * HWC) after the other; one tile when there are no patches. */
static void
gst_cony_frame_embed_frame_to_floats (GstConyFrameEmbed *self, GstVideoFrame *frame)
{
  guint W = cony_cnn_get_input_width (self->net.cnn), H = cony_cnn_get_input_height (self->net.cnn);
  guint C = cony_cnn_get_input_channels (self->net.cnn);
  const guint8 *data = GST_VIDEO_FRAME_PLANE_DATA (frame, 0);
  gint stride = GST_VIDEO_FRAME_PLANE_STRIDE (frame, 0);
  const gfloat scale = 1.0f / 255.0f;
  gsize tile = (gsize) H * W * C;

  if (self->n_patches == 1) { /* any frame size: cropped and resized (as is at W x H) */
    cony_image_resize (data, GST_VIDEO_FRAME_WIDTH (frame), GST_VIDEO_FRAME_HEIGHT (frame), stride,
        C, self->crop_mode, W, H, self->in, self->scratch);
    return;
  }
  for (guint ty = 0; ty < self->py; ty++)
    for (guint tx = 0; tx < self->px; tx++) {
      gfloat *base = self->in + (gsize) (ty * self->px + tx) * tile;
      for (guint y = 0; y < H; y++) {
        const guint8 *row = data + (gsize) (ty * H + y) * stride + (gsize) tx * W * C;
        gfloat *dst = base + (gsize) y * W * C;
        for (guint i = 0; i < W * C; i++)
          dst[i] = row[i] * scale;
      }
    }
}

static GstClockTime
gst_cony_frame_embed_frame_duration (GstConyFrameEmbed *self, GstBuffer *buf)
{
  if (GST_BUFFER_DURATION_IS_VALID (buf))
    return GST_BUFFER_DURATION (buf);
  if (self->vinfo.fps_n > 0)
    return gst_util_uint64_scale_int (GST_SECOND, self->vinfo.fps_d, self->vinfo.fps_n);
  return GST_CLOCK_TIME_NONE;
}

/* With labelled scores: an element message with the frame's top-1 (a per-frame
 * classifier's result; the fields as conytransformer's messages name them). */
static void
gst_cony_frame_embed_post_top1 (GstConyFrameEmbed *self, GstBuffer *out, const gfloat *scores)
{
  guint n = 0;
  const char *const *labels = cony_cnn_get_labels (self->net.cnn, &n);
  if (!self->messages || labels == NULL || n != self->out_dim || self->n_patches != 1)
    return;
  guint best = 0;
  for (guint i = 1; i < n; i++)
    if (scores[i] > scores[best])
      best = i;
  GstSegment *seg = &GST_BASE_TRANSFORM (self)->segment;
  GstClockTime pts = GST_BUFFER_PTS (out), dur = GST_BUFFER_DURATION (out);
  GstClockTime end = GST_CLOCK_TIME_IS_VALID (pts) && GST_CLOCK_TIME_IS_VALID (dur) ? pts + dur
                                                                                    : pts;
  /* the names of conytransformer's result fields (gstconyresult.c) */
  GstStructure *st = gst_structure_new ("conyframeembed", "start", G_TYPE_UINT64, pts,
      "stream_start", G_TYPE_UINT64, gst_cony_segment_time (seg, pts, FALSE), "running_start",
      G_TYPE_UINT64, gst_cony_segment_time (seg, pts, TRUE), "duration", G_TYPE_UINT64, dur,
      "stream_end", G_TYPE_UINT64, gst_cony_segment_time (seg, end, FALSE), "frame", G_TYPE_UINT64,
      self->frame_index - 1, "class_id", G_TYPE_INT, (gint) best, "label", G_TYPE_STRING,
      labels[best], "score", G_TYPE_FLOAT, scores[best], NULL);
  gst_element_post_message (GST_ELEMENT (self), gst_message_new_element (GST_OBJECT (self), st));
}

/* The output carries no metadata of the frame: transform stamps it. */
static gboolean
gst_cony_frame_embed_copy_metadata (GstBaseTransform *trans, GstBuffer *input, GstBuffer *outbuf)
{
  return TRUE;
}

/* Embeds a due frame straight into the output buffer. */
static GstFlowReturn
gst_cony_frame_embed_transform (GstBaseTransform *trans, GstBuffer *buf, GstBuffer *out)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (trans);
  GstVideoFrame frame;
  GstMapInfo map;

  if (!gst_video_frame_map (&frame, &self->vinfo, buf, GST_MAP_READ)) {
    GST_ELEMENT_ERROR (self, STREAM, FORMAT, (NULL),
        ("could not map a %" G_GSIZE_FORMAT "-byte buffer as a %ux%u %s frame",
            gst_buffer_get_size (buf), GST_VIDEO_INFO_WIDTH (&self->vinfo),
            GST_VIDEO_INFO_HEIGHT (&self->vinfo), gst_cony_frame_embed_model_format (self)));
    return GST_FLOW_ERROR;
  }
  gst_cony_frame_embed_frame_to_floats (self, &frame);
  gst_video_frame_unmap (&frame);
  if (!gst_buffer_map (out, &map, GST_MAP_WRITE)) {
    GST_ELEMENT_ERROR (self, RESOURCE, WRITE, (NULL), ("could not map the output buffer"));
    return GST_FLOW_ERROR;
  }
  if (self->n_patches == 1)
    cony_cnn_forward (self->net.cnn, self->in, (gfloat *) map.data);
  else
    cony_cnn_forward_batch (self->net.cnn, self->in, self->n_patches, (gfloat *) map.data);
  self->processed++;

  GstClockTime fdur = gst_cony_frame_embed_frame_duration (self, buf);
  gst_cony_element_stamp (out, GST_BUFFER_PTS (buf), gst_cony_time_mul (fdur, self->k),
      self->tokens_out, self->n_patches, &self->next_discont);
  gst_cony_frame_embed_post_top1 (self, out, (const gfloat *) map.data);
  gst_buffer_unmap (out, &map);
  self->tokens_out += self->n_patches;
  GST_LOG_OBJECT (self, "frame %" G_GUINT64_FORMAT " at %" GST_TIME_FORMAT " embedded",
      self->frame_index - 1, GST_TIME_ARGS (GST_BUFFER_PTS (out)));
  return GST_FLOW_OK;
}

static gboolean
gst_cony_frame_embed_sink_event (GstBaseTransform *trans, GstEvent *event)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (trans);

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_SEGMENT: gst_cony_frame_embed_reset_qos (self); break;
    case GST_EVENT_FLUSH_STOP:
      gst_cony_frame_embed_reset_stream (self);
      gst_cony_frame_embed_reset_qos (self);
      break;
    default: break;
  }
  return GST_BASE_TRANSFORM_CLASS (parent_class)->sink_event (trans, event);
}

/* QOS events: after lateness diff at running time t, frames up to t + 2 diff (t + diff
 * when early) are late, as video decoders judge it. Forwarded upstream as the base
 * class does, without its own bookkeeping (see gst_cony_frame_embed_is_late). */
static gboolean
gst_cony_frame_embed_src_event (GstBaseTransform *trans, GstEvent *event)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (trans);

  if (GST_EVENT_TYPE (event) != GST_EVENT_QOS)
    return GST_BASE_TRANSFORM_CLASS (parent_class)->src_event (trans, event);

  GstQOSType type;
  gdouble proportion;
  GstClockTimeDiff diff;
  GstClockTime timestamp;
  gst_event_parse_qos (event, &type, &proportion, &diff, &timestamp);
  GST_OBJECT_LOCK (self);
  self->proportion = proportion;
  if (!GST_CLOCK_TIME_IS_VALID (timestamp))
    self->earliest_time = GST_CLOCK_TIME_NONE;
  else if (diff >= 0)
    self->earliest_time = gst_cony_time_add (gst_cony_time_add (timestamp, diff), diff);
  else
    self->earliest_time = gst_cony_time_add_signed (timestamp, diff);
  GST_OBJECT_UNLOCK (self);
  GST_DEBUG_OBJECT (self, "QoS: proportion %g, diff %" G_GINT64_FORMAT " at %" GST_TIME_FORMAT,
      proportion, diff, GST_TIME_ARGS (timestamp));
  return gst_pad_push_event (trans->sinkpad, event);
}

static gboolean gst_cony_frame_embed_stop (GstBaseTransform *trans);

static gboolean
gst_cony_frame_embed_start (GstBaseTransform *trans)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (trans);
  gchar *model = NULL;

  GST_OBJECT_LOCK (self);
  self->k = self->every;
  self->px = self->patches_x;
  self->py = self->patches_y;
  self->n_patches = self->px * self->py;
  self->crop_mode = self->crop == GST_CONY_FRAME_EMBED_CROP_NONE ? CONY_IMAGE_CROP_NONE
                                                                 : CONY_IMAGE_CROP_CENTER;
  gboolean post_messages = self->post_messages;
  GST_OBJECT_UNLOCK (self);

  if (!gst_cony_cnn_element_open (GST_ELEMENT (self), &self->net, &model))
    goto fail;
  self->messages = post_messages && self->net.output_in_use == GST_CONY_VGGISH_OUTPUT_SCORES;
  guint C = cony_cnn_get_input_channels (self->net.cnn);
  if (C != 3 && C != 1) {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS, ("The model does not take video frames"),
        ("%s takes %u input channels; conyframeembed feeds RGB (3) or GRAY8 (1)", model, C));
    goto fail;
  }
  self->out_dim = cony_cnn_get_output_size (self->net.cnn);
  if ((guint64) cony_cnn_get_input_width (self->net.cnn) * self->px > 65536
      || (guint64) cony_cnn_get_input_height (self->net.cnn) * self->py > 65536) {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS, ("Patch grid too large"),
        ("%ux%u patches of %ux%u make frames above 65536 pixels a side", self->px, self->py,
            cony_cnn_get_input_width (self->net.cnn), cony_cnn_get_input_height (self->net.cnn)));
    goto fail;
  }
  self->in = g_new0 (gfloat, cony_cnn_get_input_size (self->net.cnn) * self->n_patches);
  self->have_info = FALSE;
  self->refusal_posted = FALSE;
  self->processed = self->dropped = 0;
  gst_cony_frame_embed_reset_stream (self);
  gst_cony_frame_embed_reset_qos (self);
  GST_INFO_OBJECT (self,
      "loaded %s: %ux%ux%u -> %u, %" G_GUINT64_FORMAT " parameters, "
      "%ux%u patches per frame",
      model, cony_cnn_get_input_height (self->net.cnn), cony_cnn_get_input_width (self->net.cnn), C,
      self->out_dim, cony_cnn_get_n_params (self->net.cnn), self->px, self->py);
  g_free (model);
  return TRUE;

fail:
  gst_cony_frame_embed_stop (trans);
  g_free (model);
  return FALSE;
}

static gboolean
gst_cony_frame_embed_stop (GstBaseTransform *trans)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (trans);
  gst_cony_cnn_element_close (GST_ELEMENT (self), &self->net);
  g_clear_pointer (&self->in, g_free);
  g_clear_pointer (&self->scratch, g_free);
  self->have_info = FALSE;
  self->refusal_posted = FALSE;
  gst_cony_element_trim_heap ();
  return TRUE;
}

/* ------------------------------------------------------------------------ */

static void
gst_cony_frame_embed_set_property (GObject *object, guint prop_id, const GValue *value,
    GParamSpec *pspec)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (object);

  if (!gst_cony_element_property_settable (object, pspec))
    return;

  if (gst_cony_cnn_element_set_property (GST_ELEMENT (self), &self->net, prop_id, value))
    return;
  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_EVERY: self->every = g_value_get_uint (value); break;
    case PROP_PATCHES_X: self->patches_x = g_value_get_uint (value); break;
    case PROP_PATCHES_Y: self->patches_y = g_value_get_uint (value); break;
    case PROP_CROP: self->crop = g_value_get_enum (value); break;
    case PROP_POST_MESSAGES: self->post_messages = g_value_get_boolean (value); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_frame_embed_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (object);

  if (gst_cony_cnn_element_get_property (GST_ELEMENT (self), &self->net, prop_id, value))
    return;
  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_EVERY: g_value_set_uint (value, self->every); break;
    case PROP_PATCHES_X: g_value_set_uint (value, self->patches_x); break;
    case PROP_PATCHES_Y: g_value_set_uint (value, self->patches_y); break;
    case PROP_CROP: g_value_set_enum (value, self->crop); break;
    case PROP_POST_MESSAGES: g_value_set_boolean (value, self->post_messages); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_frame_embed_finalize (GObject *object)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (object);

  gst_cony_frame_embed_stop (GST_BASE_TRANSFORM (self));
  gst_cony_cnn_element_finalize (GST_ELEMENT (self), &self->net);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_cony_frame_embed_class_init (GstConyFrameEmbedClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS (klass);
  const GParamFlags flags = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY;

  GST_DEBUG_CATEGORY_INIT (gst_cony_frame_embed_debug, "conyframeembed", 0,
      "CNN embeddings of video frames");

  gobject_class->set_property = gst_cony_frame_embed_set_property;
  gobject_class->get_property = gst_cony_frame_embed_get_property;
  gobject_class->finalize = gst_cony_frame_embed_finalize;

  /**
   * GstConyFrameEmbed:every:
   *
   * Embed one frame in @every (frames 0, every, 2 every, ... after each
   * discontinuity); the token rate is the frame rate / @every and a token lasts
   * @every frames.
   */
  g_object_class_install_property (gobject_class, PROP_EVERY,
      g_param_spec_uint ("every", "Every", "Embed every k-th frame (token rate = frame rate / k)",
          1, 1 << 20, DEFAULT_EVERY, flags));
  /**
   * GstConyFrameEmbed:patches-x:
   *
   * Columns of the patch grid: the frame is @patches-x model inputs wide and
   * each tile is one token (a frame gives patches-x x patches-y tokens).
   */
  g_object_class_install_property (gobject_class, PROP_PATCHES_X,
      g_param_spec_uint ("patches-x", "Patches across",
          "Columns of model-sized tiles per frame, one token each", 1, 64, DEFAULT_PATCHES, flags));
  /**
   * GstConyFrameEmbed:patches-y:
   *
   * Rows of the patch grid (see #GstConyFrameEmbed:patches-x).
   */
  g_object_class_install_property (gobject_class, PROP_PATCHES_Y,
      g_param_spec_uint ("patches-y", "Patches down",
          "Rows of model-sized tiles per frame, one token each", 1, 64, DEFAULT_PATCHES, flags));
  /**
   * GstConyFrameEmbed:crop:
   *
   * How a frame of another size than the model's input becomes one (without
   * patches): center (default) takes the largest centred region with the model's
   * aspect ratio, none the whole frame; either is then area-averaged to the
   * input size (include/cony/image.h). A frame already at the input size is used
   * as it is.
   */
  g_object_class_install_property (gobject_class, PROP_CROP,
      g_param_spec_enum ("crop", "Crop",
          "Region of a frame of another size that is resized to the model's input",
          GST_TYPE_CONY_FRAME_EMBED_CROP, DEFAULT_CROP, flags));
  /**
   * GstConyFrameEmbed:model:
   *
   * Path of the CNN's safetensors file (required; include/cony/cnn.h). Loaded on
   * READY->PAUSED. Its metadata fixes the frame size and normalisation. A
   * relative name not found here is looked up in $CONY_MODEL_PATH and the
   * installed models (e.g. video/frame_cnn.safetensors).
   */
  /**
   * GstConyFrameEmbed:output:
   *
   * What a token is: the network's last layer (scores: an ImageNet MobileNet's
   * 1001 class probabilities) or the global average pool before its head
   * (embedding: 1280-d for MobileNet-v2; refused for networks without one). The
   * token caps' dimension and cnn-output follow.
   */
  /**
   * GstConyFrameEmbed:precision:
   *
   * The arithmetic of the CNN, as conyvggish's: `auto` (default) lets the file
   * decide: an ImageNet MobileNet converted from a quantised .tflite (the
   * shipped imagenet/mobilenet_v2.safetensors) records its activations'
   * quantisation and runs TFLite's integer inference; other files run in
   * float. `float` forces the float engine; `int8` fails to start on a file
   * without activation quantisation.
   */
  /**
   * GstConyFrameEmbed:precision-in-use:
   *
   * What runs once the element has started (NULL before), e.g. "int8, all 66
   * layers (avx2 kernels)".
   */
  gst_cony_cnn_element_install_properties (gobject_class, PROP_CNN, &cnn_info);
  /**
   * GstConyFrameEmbed:post-messages:
   *
   * With output=scores, a model with labels and no patches: post an element
   * message `conyframeembed` per embedded frame with its top-1 (`start`,
   * `stream_start`, `running_start`, `duration`, `stream_end`, `frame`,
   * `class_id`, `label`, `score`), as a per-frame classifier, with the names of
   * conytransformer's result fields. Default TRUE.
   */
  g_object_class_install_property (gobject_class, PROP_POST_MESSAGES,
      g_param_spec_boolean ("post-messages", "Post messages",
          "Post the top-1 label of each frame (output=scores, models with labels)",
          DEFAULT_POST_MESSAGES, flags));
  gst_type_mark_as_plugin_api (GST_TYPE_CONY_FRAME_EMBED_CROP, 0);

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "Frame embeddings", "Filter/Analyzer/Video",
      "Runs a CNN (VGG-style, MobileNet-v1/v2) on video frames and outputs one token per frame",
      "gst-cony authors");

  trans_class->start = GST_DEBUG_FUNCPTR (gst_cony_frame_embed_start);
  trans_class->stop = GST_DEBUG_FUNCPTR (gst_cony_frame_embed_stop);
  trans_class->transform_caps = GST_DEBUG_FUNCPTR (gst_cony_frame_embed_transform_caps);
  trans_class->transform_size = GST_DEBUG_FUNCPTR (gst_cony_frame_embed_transform_size);
  trans_class->set_caps = GST_DEBUG_FUNCPTR (gst_cony_frame_embed_set_caps);
  trans_class->query = GST_DEBUG_FUNCPTR (gst_cony_frame_embed_query);
  trans_class->submit_input_buffer = GST_DEBUG_FUNCPTR (gst_cony_frame_embed_submit_input_buffer);
  trans_class->copy_metadata = GST_DEBUG_FUNCPTR (gst_cony_frame_embed_copy_metadata);
  trans_class->transform = GST_DEBUG_FUNCPTR (gst_cony_frame_embed_transform);
  trans_class->sink_event = GST_DEBUG_FUNCPTR (gst_cony_frame_embed_sink_event);
  trans_class->src_event = GST_DEBUG_FUNCPTR (gst_cony_frame_embed_src_event);
}

static void
gst_cony_frame_embed_init (GstConyFrameEmbed *self)
{
  self->every = DEFAULT_EVERY;
  self->patches_x = self->patches_y = DEFAULT_PATCHES;
  self->crop = DEFAULT_CROP;
  gst_cony_cnn_element_init (&self->net, PROP_CNN, &cnn_info);
  self->post_messages = DEFAULT_POST_MESSAGES;
  self->earliest_time = GST_CLOCK_TIME_NONE;
  self->proportion = 1.0;
  /* GstBaseTransform's qos property, on by default here. */
  gst_base_transform_set_qos_enabled (GST_BASE_TRANSFORM (self), DEFAULT_QOS);
}
