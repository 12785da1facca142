/* conyframeembed: video frames -> one CNN embedding token per frame.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * SECTION:element-conyframeembed
 * @title: conyframeembed
 * @short_description: CNN embeddings of video frames as a token stream
 *
 * conyframeembed runs libcony's VGG-style CNN (3x3 convolutions, max-pools,
 * optional global average pool, fully connected layers; include/cony/cnn.h) on
 * video frames and outputs one embedding token per frame (or per #every-th
 * frame), as
 * `other/tensors,format=static,num_tensors=1,types=float32,dimensions=D:1,framerate=F/every`
 * for `conytransformer` or any NNStreamer tensor element.
 *
 * The #GstConyFrameEmbed:model property names the CNN's safetensors file. Its
 * metadata declares the input size (input_height, input_width, input_channels)
 * and the per-channel normalisation (input_mean, input_std); D is the model's
 * output size. The sink pad only accepts frames of exactly that size, RGB for
 * 3-channel models and GRAY8 for 1-channel ones: put `videoconvert !
 * videoscale` in front to get there (the caps query announces the size, so
 * they negotiate it by themselves). Pixel values are divided by 255 before the
 * model's normalisation, so a model sees values in 0..1 as torchvision's
 * ToTensor gives them. The model is loaded on READY->PAUSED; a missing or
 * invalid file is an error and the state change fails.
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
 * OFFSET counts tokens. Frames without a PTS give tokens without one.
 *
 * ## QoS
 *
 * With #GstConyFrameEmbed:qos (default TRUE) the element follows the QOS
 * events from downstream as #GstBaseTransform does: after an event reporting
 * lateness diff at running time t, a frame that is due for embedding but whose
 * running time is not after t + 2 diff (t + diff when early) is not embedded;
 * a QoS message (format BUFFERS, processed/dropped counts) is posted for each
 * one. No token and no GAP event replace it: the skip is visible downstream as
 * a hole in the token timestamps (the next token's PTS is later than the
 * previous PTS + duration), and the frame counter, hence the every-k phase,
 * moves on as if the frame had been embedded.
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
 * gst-launch-1.0 v4l2src ! videoconvert ! videoscale ! conyframeembed model=models/video/frame_cnn.safetensors every=3 ! conytransformer model=models/video/classifier.safetensors ! fakesink
 * ]| a camera classified at a third of its frame rate.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstconyframeembed.h"
#include "gstconyelement.h"

#include <string.h>

GST_DEBUG_CATEGORY_STATIC (gst_cony_frame_embed_debug);
#define GST_CAT_DEFAULT gst_cony_frame_embed_debug

#define DEFAULT_MODEL NULL
#define DEFAULT_EVERY 1
#define DEFAULT_QOS TRUE
#define DEFAULT_PATCHES 1

enum
{
  PROP_0,
  PROP_MODEL,
  PROP_EVERY,
  PROP_QOS,
  PROP_PATCHES_X,
  PROP_PATCHES_Y,
};

#define SINK_CAPS \
  "video/x-raw, format = (string) { RGB, GRAY8 }, width = (int) [ 1, 65536 ], " \
  "height = (int) [ 1, 65536 ], framerate = (fraction) [ 0/1, 2147483647/1 ]"

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS (SINK_CAPS));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_CONY_TOKENS_CAPS_STRING));

#define gst_cony_frame_embed_parent_class parent_class
G_DEFINE_TYPE (GstConyFrameEmbed, gst_cony_frame_embed, GST_TYPE_ELEMENT);
GST_ELEMENT_REGISTER_DEFINE (conyframeembed, "conyframeembed", GST_RANK_NONE,
    GST_TYPE_CONY_FRAME_EMBED);

/* ------------------------------------------------------------------------ */

static void
reset_qos (GstConyFrameEmbed *self)
{
  GST_OBJECT_LOCK (self);
  self->earliest_time = GST_CLOCK_TIME_NONE;
  self->proportion = 1.0;
  GST_OBJECT_UNLOCK (self);
}

static void
reset_stream (GstConyFrameEmbed *self)
{
  self->frame_index = 0;
  self->tokens_out = 0;
  self->next_discont = TRUE;
}

/* The model's frame format. */
static const gchar *
model_format (GstConyFrameEmbed *self)
{
  return cony_cnn_get_input_channels (self->cnn) == 3 ? "RGB" : "GRAY8";
}

static GstClockTime
frame_duration (GstConyFrameEmbed *self, GstBuffer *buf)
{
  if (GST_BUFFER_DURATION_IS_VALID (buf))
    return GST_BUFFER_DURATION (buf);
  if (self->vinfo.fps_n > 0)
    return gst_util_uint64_scale_int (GST_SECOND, self->vinfo.fps_d, self->vinfo.fps_n);
  return GST_CLOCK_TIME_NONE;
}

/* TRUE when QoS says the frame is too late to be worth embedding. */
static gboolean
is_late (GstConyFrameEmbed *self, GstBuffer *buf, GstClockTime *running_time)
{
  GstClockTime pts = GST_BUFFER_PTS (buf), earliest;
  gboolean qos;

  *running_time = GST_CLOCK_TIME_NONE;
  if (!GST_CLOCK_TIME_IS_VALID (pts) || self->segment.format != GST_FORMAT_TIME)
    return FALSE;
  *running_time = gst_segment_to_running_time (&self->segment, GST_FORMAT_TIME, pts);
  GST_OBJECT_LOCK (self);
  qos = self->qos;
  earliest = self->earliest_time;
  GST_OBJECT_UNLOCK (self);
  return qos && GST_CLOCK_TIME_IS_VALID (earliest)
      && GST_CLOCK_TIME_IS_VALID (*running_time) && *running_time <= earliest;
}

static void
post_qos (GstConyFrameEmbed *self, GstBuffer *buf, GstClockTime running_time)
{
  GstClockTime pts = GST_BUFFER_PTS (buf), earliest;
  gdouble proportion;
  GstMessage *msg;

  GST_OBJECT_LOCK (self);
  earliest = self->earliest_time;
  proportion = self->proportion;
  GST_OBJECT_UNLOCK (self);
  msg = gst_message_new_qos (GST_OBJECT_CAST (self), FALSE, running_time,
      gst_segment_to_stream_time (&self->segment, GST_FORMAT_TIME, pts), pts,
      GST_BUFFER_DURATION (buf));
  gst_message_set_qos_values (msg, (gint64) earliest - (gint64) running_time, proportion,
      1000000);
  gst_message_set_qos_stats (msg, GST_FORMAT_BUFFERS, self->processed, self->dropped);
  gst_element_post_message (GST_ELEMENT_CAST (self), msg);
}

/* The frame's tiles, row by row from the top left, one model input (H x W x C,
 * HWC) after the other; one tile when there are no patches. */
static void
frame_to_floats (GstConyFrameEmbed *self, GstVideoFrame *frame)
{
  guint W = cony_cnn_get_input_width (self->cnn), H = cony_cnn_get_input_height (self->cnn);
  guint C = cony_cnn_get_input_channels (self->cnn);
  const guint8 *data = GST_VIDEO_FRAME_PLANE_DATA (frame, 0);
  gint stride = GST_VIDEO_FRAME_PLANE_STRIDE (frame, 0);
  const gfloat scale = 1.0f / 255.0f;
  gsize tile = (gsize) H * W * C;

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

static GstFlowReturn
gst_cony_frame_embed_chain (GstPad *pad, GstObject *parent, GstBuffer *buf)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (parent);
  GstClockTime running_time;
  GstVideoFrame frame;

  if (!self->have_info) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, (NULL), ("no caps before the first buffer"));
    gst_buffer_unref (buf);
    return GST_FLOW_NOT_NEGOTIATED;
  }
  if (GST_BUFFER_IS_DISCONT (buf) && self->frame_index > 0) {
    GST_DEBUG_OBJECT (self, "discontinuity: restarting the frame count");
    reset_stream (self);
  }

  guint64 index = self->frame_index++;
  if (index % self->k != 0) {
    gst_buffer_unref (buf);
    return GST_FLOW_OK;
  }
  if (is_late (self, buf, &running_time)) {
    self->dropped++;
    GST_DEBUG_OBJECT (self, "frame %" G_GUINT64_FORMAT " at %" GST_TIME_FORMAT
        " is late (QoS): not embedded", index, GST_TIME_ARGS (GST_BUFFER_PTS (buf)));
    post_qos (self, buf, running_time);
    gst_buffer_unref (buf);
    return GST_FLOW_OK;
  }

  if (!gst_video_frame_map (&frame, &self->vinfo, buf, GST_MAP_READ)) {
    GST_ELEMENT_ERROR (self, STREAM, FORMAT, (NULL),
        ("could not map a %" G_GSIZE_FORMAT "-byte buffer as a %ux%u %s frame",
            gst_buffer_get_size (buf), GST_VIDEO_INFO_WIDTH (&self->vinfo),
            GST_VIDEO_INFO_HEIGHT (&self->vinfo), model_format (self)));
    gst_buffer_unref (buf);
    return GST_FLOW_ERROR;
  }
  frame_to_floats (self, &frame);
  gst_video_frame_unmap (&frame);
  if (self->n_patches == 1)
    cony_cnn_forward (self->cnn, self->in, self->out);
  else
    cony_cnn_forward_batch (self->cnn, self->in, self->n_patches, self->out);
  self->processed++;

  gsize bytes = (gsize) self->n_patches * self->out_dim * sizeof (gfloat);
  GstBuffer *out = gst_buffer_new_allocate (NULL, bytes, NULL);
  gst_buffer_fill (out, 0, self->out, bytes);
  GstClockTime fdur = frame_duration (self, buf);
  GST_BUFFER_PTS (out) = GST_BUFFER_PTS (buf);
  GST_BUFFER_DTS (out) = GST_CLOCK_TIME_NONE;
  GST_BUFFER_DURATION (out) = GST_CLOCK_TIME_IS_VALID (fdur) ? fdur * self->k : GST_CLOCK_TIME_NONE;
  GST_BUFFER_OFFSET (out) = self->tokens_out;
  GST_BUFFER_OFFSET_END (out) = self->tokens_out + self->n_patches;
  self->tokens_out += self->n_patches;
  if (self->next_discont) {
    GST_BUFFER_FLAG_SET (out, GST_BUFFER_FLAG_DISCONT);
    self->next_discont = FALSE;
  }
  GST_LOG_OBJECT (self, "frame %" G_GUINT64_FORMAT " at %" GST_TIME_FORMAT " embedded", index,
      GST_TIME_ARGS (GST_BUFFER_PTS (out)));
  gst_buffer_unref (buf);
  return gst_pad_push (self->srcpad, out);
}

static gboolean
set_sink_caps (GstConyFrameEmbed *self, GstCaps *caps)
{
  GstVideoInfo info;
  guint W = cony_cnn_get_input_width (self->cnn) * self->px;
  guint H = cony_cnn_get_input_height (self->cnn) * self->py;

  if (!gst_video_info_from_caps (&info, caps)) {
    GST_WARNING_OBJECT (self, "refusing caps %" GST_PTR_FORMAT ": not raw video", caps);
    return FALSE;
  }
  if ((guint) GST_VIDEO_INFO_WIDTH (&info) != W || (guint) GST_VIDEO_INFO_HEIGHT (&info) != H
      || strcmp (gst_video_format_to_string (GST_VIDEO_INFO_FORMAT (&info)),
          model_format (self)) != 0) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Video frames do not match the model"),
        ("the model takes %ux%u %s frames (%ux%u patches of %ux%u), the input is %dx%d %s; "
            "put videoconvert ! videoscale in front", W, H, model_format (self), self->px,
            self->py, cony_cnn_get_input_width (self->cnn), cony_cnn_get_input_height (self->cnn),
            GST_VIDEO_INFO_WIDTH (&info),
            GST_VIDEO_INFO_HEIGHT (&info),
            gst_video_format_to_string (GST_VIDEO_INFO_FORMAT (&info))));
    return FALSE;
  }

  gboolean same_rate = self->have_info && info.fps_n == self->vinfo.fps_n
      && info.fps_d == self->vinfo.fps_d;
  if (self->have_info && !same_rate) {
    GST_DEBUG_OBJECT (self, "frame rate changed: restarting the frame count");
    reset_stream (self);
  }
  self->vinfo = info;
  self->have_info = TRUE;
  if (same_rate && gst_pad_has_current_caps (self->srcpad))
    return TRUE;

  /* rate_n/rate_d: tokens per second (k per frame); the caps carry frames per second */
  GstConyTokenInfo out = { self->out_dim, self->n_patches, 0, 1 };
  if (info.fps_n > 0 && !gst_util_fraction_multiply (info.fps_n, info.fps_d,
          (gint) self->n_patches, (gint) self->k, &out.rate_n, &out.rate_d))
    return FALSE;
  GstCaps *src = gst_cony_tokens_caps_new (&out);
  if (src)
    gst_cony_tokens_caps_set_source (src, &self->source);
  gboolean ok = src != NULL && gst_pad_push_event (self->srcpad, gst_event_new_caps (src));
  if (src)
    gst_caps_unref (src);
  return ok;
}

static gboolean
gst_cony_frame_embed_sink_event (GstPad *pad, GstObject *parent, GstEvent *event)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (parent);

  GST_LOG_OBJECT (self, "event %" GST_PTR_FORMAT, event);
  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_CAPS:{
      GstCaps *caps;
      gst_event_parse_caps (event, &caps);
      gboolean ok = self->cnn != NULL && set_sink_caps (self, caps);
      gst_event_unref (event);
      return ok;
    }
    case GST_EVENT_SEGMENT:
      gst_event_copy_segment (event, &self->segment);
      reset_qos (self);
      break;
    case GST_EVENT_FLUSH_STOP:
      gst_segment_init (&self->segment, GST_FORMAT_TIME);
      reset_stream (self);
      reset_qos (self);
      break;
    default:
      break;
  }
  return gst_pad_event_default (pad, parent, event);
}

/* The caps query announces the model's frame size so videoscale can produce it. */
static gboolean
gst_cony_frame_embed_sink_query (GstPad *pad, GstObject *parent, GstQuery *query)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (parent);

  if (GST_QUERY_TYPE (query) == GST_QUERY_CAPS) {
    GstCaps *filter, *caps = gst_pad_get_pad_template_caps (pad);
    gst_query_parse_caps (query, &filter);
    if (self->cnn != NULL) {
      caps = gst_caps_make_writable (caps);
      gst_caps_set_simple (caps, "format", G_TYPE_STRING, model_format (self),
          "width", G_TYPE_INT, (gint) (cony_cnn_get_input_width (self->cnn) * self->px),
          "height", G_TYPE_INT, (gint) (cony_cnn_get_input_height (self->cnn) * self->py),
          NULL);
    }
    if (filter) {
      GstCaps *tmp = gst_caps_intersect_full (filter, caps, GST_CAPS_INTERSECT_FIRST);
      gst_caps_unref (caps);
      caps = tmp;
    }
    gst_query_set_caps_result (query, caps);
    gst_caps_unref (caps);
    return TRUE;
  }
  return gst_pad_query_default (pad, parent, query);
}

static gboolean
gst_cony_frame_embed_src_event (GstPad *pad, GstObject *parent, GstEvent *event)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (parent);

  if (GST_EVENT_TYPE (event) == GST_EVENT_QOS) {
    GstQOSType type;
    gdouble proportion;
    GstClockTimeDiff diff;
    GstClockTime timestamp;

    gst_event_parse_qos (event, &type, &proportion, &diff, &timestamp);
    GST_OBJECT_LOCK (self);
    self->proportion = proportion;
    if (GST_CLOCK_TIME_IS_VALID (timestamp)) {
      /* Late (diff > 0): the next frame worth showing is about 2 diff ahead. */
      if (diff >= 0)
        self->earliest_time = timestamp + 2 * diff;
      else
        self->earliest_time = (GstClockTimeDiff) timestamp + diff > 0 ? timestamp + diff : 0;
    } else {
      self->earliest_time = GST_CLOCK_TIME_NONE;
    }
    GST_OBJECT_UNLOCK (self);
    GST_DEBUG_OBJECT (self, "QoS: proportion %g, diff %" G_GINT64_FORMAT " at %"
        GST_TIME_FORMAT, proportion, diff, GST_TIME_ARGS (timestamp));
  }
  return gst_pad_event_default (pad, parent, event);
}

static gboolean
start (GstElement *element)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (element);
  GError *error = NULL;
  gchar *model;

  GST_OBJECT_LOCK (self);
  model = g_strdup (self->model);
  self->k = self->every;
  self->px = self->patches_x;
  self->py = self->patches_y;
  self->n_patches = self->px * self->py;
  GST_OBJECT_UNLOCK (self);

  if (model == NULL || *model == '\0') {
    GST_ELEMENT_ERROR (self, RESOURCE, NOT_FOUND, ("No model file given"),
        ("set the 'model' property to an image CNN safetensors file"));
    goto fail;
  }
  self->cnn = cony_cnn_load (model, &error);
  if (self->cnn == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, OPEN_READ, ("Could not load the model: %s",
            error->message), ("model=%s", model));
    goto fail;
  }
  if (!gst_cony_token_source_init (&self->source, model, "scores", &error)) {
    GST_ELEMENT_ERROR (self, RESOURCE, OPEN_READ, ("Could not read the model: %s",
            error->message), ("model=%s", model));
    goto fail;
  }
  guint C = cony_cnn_get_input_channels (self->cnn);
  if (C != 3 && C != 1) {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS, ("The model does not take video frames"),
        ("%s takes %u input channels; conyframeembed feeds RGB (3) or GRAY8 (1)", model, C));
    goto fail;
  }
  self->out_dim = cony_cnn_get_output_size (self->cnn);
  if ((guint64) cony_cnn_get_input_width (self->cnn) * self->px > 65536
      || (guint64) cony_cnn_get_input_height (self->cnn) * self->py > 65536) {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS, ("Patch grid too large"),
        ("%ux%u patches of %ux%u make frames above 65536 pixels a side", self->px, self->py,
            cony_cnn_get_input_width (self->cnn), cony_cnn_get_input_height (self->cnn)));
    goto fail;
  }
  self->in = g_new0 (gfloat, cony_cnn_get_input_size (self->cnn) * self->n_patches);
  self->out = g_new0 (gfloat, (gsize) self->out_dim * self->n_patches);
  self->have_info = FALSE;
  self->processed = self->dropped = 0;
  gst_segment_init (&self->segment, GST_FORMAT_TIME);
  reset_stream (self);
  reset_qos (self);
  GST_INFO_OBJECT (self, "loaded %s: %ux%ux%u -> %u, %" G_GUINT64_FORMAT " parameters, "
      "%ux%u patches per frame", model, cony_cnn_get_input_height (self->cnn),
      cony_cnn_get_input_width (self->cnn), C, self->out_dim, cony_cnn_get_n_params (self->cnn),
      self->px, self->py);
  g_free (model);
  return TRUE;

fail:
  g_clear_error (&error);
  g_clear_pointer (&self->cnn, cony_cnn_free);
  gst_cony_token_source_clear (&self->source);
  g_free (model);
  return FALSE;
}

static void
stop (GstElement *element)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (element);
  g_clear_pointer (&self->cnn, cony_cnn_free);
  gst_cony_token_source_clear (&self->source);
  g_clear_pointer (&self->in, g_free);
  g_clear_pointer (&self->out, g_free);
  self->have_info = FALSE;
}

static GstStateChangeReturn
gst_cony_frame_embed_change_state (GstElement *element, GstStateChange transition)
{
  return gst_cony_element_change_state (element, transition, GST_ELEMENT_CLASS (parent_class),
      start, stop);
}

/* ------------------------------------------------------------------------ */

static void
gst_cony_frame_embed_set_property (GObject *object, guint prop_id, const GValue *value,
    GParamSpec *pspec)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      g_free (self->model);
      self->model = g_value_dup_string (value);
      break;
    case PROP_EVERY:
      self->every = g_value_get_uint (value);
      break;
    case PROP_QOS:
      self->qos = g_value_get_boolean (value);
      break;
    case PROP_PATCHES_X:
      self->patches_x = g_value_get_uint (value);
      break;
    case PROP_PATCHES_Y:
      self->patches_y = g_value_get_uint (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_frame_embed_get_property (GObject *object, guint prop_id, GValue *value,
    GParamSpec *pspec)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      g_value_set_string (value, self->model);
      break;
    case PROP_EVERY:
      g_value_set_uint (value, self->every);
      break;
    case PROP_QOS:
      g_value_set_boolean (value, self->qos);
      break;
    case PROP_PATCHES_X:
      g_value_set_uint (value, self->patches_x);
      break;
    case PROP_PATCHES_Y:
      g_value_set_uint (value, self->patches_y);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_frame_embed_finalize (GObject *object)
{
  GstConyFrameEmbed *self = GST_CONY_FRAME_EMBED (object);

  stop (GST_ELEMENT (self));
  g_free (self->model);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_cony_frame_embed_class_init (GstConyFrameEmbedClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  const GParamFlags flags = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY;

  GST_DEBUG_CATEGORY_INIT (gst_cony_frame_embed_debug, "conyframeembed", 0,
      "CNN embeddings of video frames");

  gobject_class->set_property = gst_cony_frame_embed_set_property;
  gobject_class->get_property = gst_cony_frame_embed_get_property;
  gobject_class->finalize = gst_cony_frame_embed_finalize;

  /**
   * GstConyFrameEmbed:model:
   *
   * Path of the CNN's safetensors file (required; include/cony/cnn.h). Loaded on
   * READY->PAUSED. Its metadata fixes the frame size and normalisation.
   */
  g_object_class_install_property (gobject_class, PROP_MODEL,
      g_param_spec_string ("model", "Model",
          "Path of the image CNN safetensors file (input size and mean/std in its metadata)",
          DEFAULT_MODEL, flags));
  /**
   * GstConyFrameEmbed:every:
   *
   * Embed one frame in @every (frames 0, every, 2 every, ... after each
   * discontinuity); the token rate is the frame rate / @every and a token lasts
   * @every frames.
   */
  g_object_class_install_property (gobject_class, PROP_EVERY,
      g_param_spec_uint ("every", "Every",
          "Embed every k-th frame (token rate = frame rate / k)", 1, 1 << 20, DEFAULT_EVERY,
          flags));
  /**
   * GstConyFrameEmbed:qos:
   *
   * Follow QOS events: frames downstream would get too late are not embedded
   * (a hole in the token timestamps).
   */
  g_object_class_install_property (gobject_class, PROP_QOS,
      g_param_spec_boolean ("qos", "QoS",
          "Skip embedding frames that QoS events report as too late", DEFAULT_QOS,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING));

  /**
   * GstConyFrameEmbed:patches-x:
   *
   * Columns of the patch grid: the frame is @patches-x model inputs wide and
   * each tile is one token (a frame gives patches-x x patches-y tokens).
   */
  g_object_class_install_property (gobject_class, PROP_PATCHES_X,
      g_param_spec_uint ("patches-x", "Patches across",
          "Columns of model-sized tiles per frame, one token each", 1, 64, DEFAULT_PATCHES,
          flags));
  /**
   * GstConyFrameEmbed:patches-y:
   *
   * Rows of the patch grid (see #GstConyFrameEmbed:patches-x).
   */
  g_object_class_install_property (gobject_class, PROP_PATCHES_Y,
      g_param_spec_uint ("patches-y", "Patches down",
          "Rows of model-sized tiles per frame, one token each", 1, 64, DEFAULT_PATCHES, flags));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "Frame embeddings",
      "Filter/Analyzer/Video",
      "Runs a VGG-style CNN on video frames and outputs one embedding token per frame",
      "gst-cony authors");

  element_class->change_state = GST_DEBUG_FUNCPTR (gst_cony_frame_embed_change_state);
}

static void
gst_cony_frame_embed_init (GstConyFrameEmbed *self)
{
  self->sinkpad = gst_pad_new_from_static_template (&sink_template, "sink");
  gst_pad_set_chain_function (self->sinkpad, GST_DEBUG_FUNCPTR (gst_cony_frame_embed_chain));
  gst_pad_set_event_function (self->sinkpad,
      GST_DEBUG_FUNCPTR (gst_cony_frame_embed_sink_event));
  gst_pad_set_query_function (self->sinkpad,
      GST_DEBUG_FUNCPTR (gst_cony_frame_embed_sink_query));
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);

  self->srcpad = gst_pad_new_from_static_template (&src_template, "src");
  gst_pad_set_event_function (self->srcpad, GST_DEBUG_FUNCPTR (gst_cony_frame_embed_src_event));
  gst_pad_use_fixed_caps (self->srcpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);

  self->every = DEFAULT_EVERY;
  self->patches_x = self->patches_y = DEFAULT_PATCHES;
  self->qos = DEFAULT_QOS;
  self->earliest_time = GST_CLOCK_TIME_NONE;
  self->proportion = 1.0;
  gst_segment_init (&self->segment, GST_FORMAT_TIME);
}
