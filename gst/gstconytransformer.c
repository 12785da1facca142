/* conytransformer: continual transformer classification of a token stream.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * SECTION:element-conytransformer
 * @title: conytransformer
 * @short_description: per-token classification with a continual (Nyström) transformer
 *
 * conytransformer runs libcony's continual transformer encoder-classifier
 * one step per incoming token (`other/tensors,format=static,num_tensors=1,
 * types=float32,dimensions=D:K`, see #GstConyVggish and gstconytokens.h) and
 * passes the token buffers through unchanged, each carrying the result of its
 * steps as a #GstConyClassificationMeta (plus a #GstCustomMeta mirror for
 * Python) and, optionally, as element messages on the bus.
 *
 * The #GstConyTransformer:model property names a safetensors model file
 * (docs/model-format.md, written by training/export.py); it is loaded on
 * READY->PAUSED and a missing or invalid file fails the state change with an
 * error carrying libcony's explanation. The token size D must equal the
 * model's `d_in`; other caps are refused with an error naming both numbers.
 *
 * ## Steps and metadata
 *
 * Every token is one step of the continual encoder; the classification of a
 * step is the softmax of the newest token's logits. A buffer with K tokens
 * gets K metas, one per step (field `step` orders them;
 * gst_buffer_get_cony_classification_meta() returns the newest). Meta
 * fields: `step` (index since the last reset), `window_start` (PTS of the
 * oldest token in the attention window), `window_end` (PTS + duration of
 * this token), `class_id`, `label`, `score` (softmax probability of the top
 * class), `scores` (all n_scores probabilities), `context_fill` (tokens in
 * the window / window size). The time of token i of a buffer is the buffer
 * PTS + i x duration / K (or i / token rate when the buffer has no
 * duration). Metas are attached whatever #GstConyTransformer:threshold is.
 *
 * Models with `tokens_per_step` k > 1 (docs/model-format.md; e.g. the k
 * patch tokens of one video frame from `conyframeembed patches-x/patches-y`)
 * take k tokens per step: a buffer of K tokens is K / k steps, each over k
 * consecutive tokens, with one result (meta, message) per step whose time is
 * that of its k tokens together (PTS of the first, end of the last: with one
 * frame per buffer, the frame's PTS and duration). Caps whose K is not a
 * multiple of k are refused (a NEGOTIATION error naming both), and so is a
 * buffer that does not hold a whole number of steps (a STREAM FORMAT error).
 *
 * ## Messages
 *
 * With #GstConyTransformer:post-messages (default), the element posts element
 * messages whose structure is named `conytransformer`, as `level` and
 * `spectrum` do. In `message-mode=every-step` one message per step whose
 * confidence is at least #GstConyTransformer:threshold, with the fields:
 *
 * - `timestamp` (#guint64): PTS of the token (ns)
 * - `stream-time` (#guint64): the PTS as stream time in the current segment
 * - `running-time` (#guint64): the PTS as running time in the current segment
 * - `duration` (#guint64): the token's duration (ns), NONE if unknown
 * - `step` (#guint64): step index since the last reset
 * - `class-id` (#gint): index of the top class
 * - `label` (#gchararray): its label
 * - `confidence` (#gfloat): its softmax probability
 * - `scores` (#GST_TYPE_ARRAY of #gfloat): the probabilities of every class
 *
 * In `message-mode=on-change` a message is posted only when the top label
 * changes (steps below the threshold do not count: they neither change nor
 * extend a label). It has the fields above for the step where the new label
 * took over, and:
 *
 * - `segment-start` (#guint64): running time at which the new label starts
 *   (the start of that step's token)
 * - `previous-label` (#gchararray): the label of the segment that ended, ""
 *   for the first message of a stream
 * - `previous-segment-start`, `previous-segment-end` (#guint64): running
 *   times of the start of the ended segment and of the end of its last
 *   counted token (NONE for the first message)
 *
 * At EOS, a last message closes the open segment: the fields of the last
 * step, `segment-start` of the open segment, its label again as
 * `previous-label` with `previous-segment-start`/`previous-segment-end`, and
 * `eos` (#gboolean) = TRUE. A reset (FLUSH_STOP, DISCONT, caps change)
 * forgets the open segment without a message.
 *
 * ## Stream behaviour
 *
 * - FLUSH_STOP, a DISCONT buffer, a GAP event and caps that change the token
 *   size or rate reset the continual state: the next token is step 0 again.
 *   Caps that only change the number of tokens per buffer do not. The GAP is
 *   forwarded.
 * - EOS: nothing is pending (every token is classified when it arrives); in
 *   on-change mode the closing message is posted, then EOS is forwarded.
 * - LATENCY: the element classifies each token as it arrives and adds
 *   nothing to upstream's latency.
 * - A token with NaN or infinite values is not fed to the model (the state
 *   stays as it was), gets no meta and no message; a warning is posted once
 *   per run of affected buffers. The buffer itself passes unchanged.
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 autoaudiosrc ! audioconvert ! audioresample ! conymel ! conyvggish model=models/audio/vggish.safetensors ! conytransformer model=models/audio/transformer.safetensors ! fakesink -m
 * ]| classifies the microphone four times a second and prints the messages.
 * |[
 * gst-launch-1.0 uridecodebin uri=file:///tmp/a.ogg ! audioconvert ! audioresample ! conymel ! conyvggish model=vggish.safetensors ! conytransformer model=transformer.safetensors message-mode=on-change threshold=0.6 ! fakesink -m
 * ]| prints a message each time the label of a file changes.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstconytransformer.h"

#include <math.h>
#include <string.h>

GST_DEBUG_CATEGORY_STATIC (gst_cony_transformer_debug);
#define GST_CAT_DEFAULT gst_cony_transformer_debug

#define DEFAULT_MODEL NULL
#define DEFAULT_ATTENTION GST_CONY_TRANSFORMER_ATTENTION_MODEL
#define DEFAULT_LABELS_FILE NULL
#define DEFAULT_POST_MESSAGES TRUE
#define DEFAULT_MESSAGE_MODE GST_CONY_TRANSFORMER_MESSAGE_EVERY_STEP
#define DEFAULT_THRESHOLD 0.0

#define MESSAGE_NAME "conytransformer"

enum
{
  PROP_0,
  PROP_MODEL,
  PROP_ATTENTION,
  PROP_LABELS_FILE,
  PROP_POST_MESSAGES,
  PROP_MESSAGE_MODE,
  PROP_THRESHOLD,
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_CONY_TOKENS_CAPS_STRING));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_CONY_TOKENS_CAPS_STRING));

GType
gst_cony_transformer_attention_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_CONY_TRANSFORMER_ATTENTION_MODEL, "The variants the model was trained with", "model"},
    {GST_CONY_TRANSFORMER_ATTENTION_REGULAR, "Regular softmax attention over the window",
        "regular"},
    {GST_CONY_TRANSFORMER_ATTENTION_CONTINUAL, "Continual (CoSi/CoRe) attention", "continual"},
    {GST_CONY_TRANSFORMER_ATTENTION_NYSTROM, "Nystrom, segment-means landmarks", "nystrom"},
    {GST_CONY_TRANSFORMER_ATTENTION_NYSTROM_FIXED, "Nystrom, fixed landmarks",
        "nystrom-fixed"},
    {GST_CONY_TRANSFORMER_ATTENTION_CONY, "Continual Nystrom, continual landmarks", "cony"},
    {GST_CONY_TRANSFORMER_ATTENTION_CONY_FIXED, "Continual Nystrom, fixed landmarks",
        "cony-fixed"},
    {0, NULL, NULL},
  };
  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstConyTransformerAttention", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

GType
gst_cony_transformer_message_mode_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_CONY_TRANSFORMER_MESSAGE_EVERY_STEP, "A message for every step", "every-step"},
    {GST_CONY_TRANSFORMER_MESSAGE_ON_CHANGE, "A message when the top label changes",
        "on-change"},
    {0, NULL, NULL},
  };
  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstConyTransformerMessageMode", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

#define gst_cony_transformer_parent_class parent_class
G_DEFINE_TYPE (GstConyTransformer, gst_cony_transformer, GST_TYPE_BASE_TRANSFORM);
GST_ELEMENT_REGISTER_DEFINE (conytransformer, "conytransformer", GST_RANK_NONE,
    GST_TYPE_CONY_TRANSFORMER);

/* ------------------------------------------------------------------------ */

static void
reset_stream (GstConyTransformer *self)
{
  if (self->encoder)
    cony_encoder_reset (self->encoder);
  self->seg_class = -1;
  self->seg_start = self->seg_end = GST_CLOCK_TIME_NONE;
  self->have_last = FALSE;
  self->in_nonfinite = FALSE;
}

/* Reads one label per line; a final empty line is ignored. */
static gchar **
read_labels (const gchar *path, guint *n, GError **error)
{
  gchar *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, error))
    return NULL;
  gchar **lines = g_strsplit (text, "\n", -1);
  g_free (text);
  guint count = g_strv_length (lines);
  if (count > 0 && lines[count - 1][0] == '\0') {
    g_free (lines[count - 1]);
    lines[--count] = NULL;
  }
  for (guint i = 0; i < count; i++) {
    gsize len = strlen (lines[i]);
    if (len > 0 && lines[i][len - 1] == '\r')
      lines[i][len - 1] = '\0';
  }
  *n = count;
  return lines;
}

static gboolean gst_cony_transformer_stop (GstBaseTransform *trans);

static gboolean
gst_cony_transformer_start (GstBaseTransform *trans)
{
  GstConyTransformer *self = GST_CONY_TRANSFORMER (trans);
  GError *error = NULL;
  gchar *path, *labels_file;
  GstConyTransformerAttention attention;

  GST_OBJECT_LOCK (self);
  path = g_strdup (self->model_path);
  labels_file = g_strdup (self->labels_file);
  attention = self->attention;
  GST_OBJECT_UNLOCK (self);

  if (path == NULL || *path == '\0') {
    GST_ELEMENT_ERROR (self, RESOURCE, NOT_FOUND, ("No model file given"),
        ("set the 'model' property to a cony-encoder-classifier safetensors file"));
    goto fail;
  }
  self->model = cony_model_load (path, &error);
  if (self->model == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, OPEN_READ, ("Could not load the model: %s",
            error->message), ("model=%s", path));
    goto fail;
  }
  self->encoder = cony_encoder_new (self->model, (int) attention, &error);
  if (self->encoder == NULL) {
    GEnumValue *ev = g_enum_get_value (g_type_class_peek (GST_TYPE_CONY_TRANSFORMER_ATTENTION),
        attention);
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS, ("Could not set up the encoder: %s",
            error->message), ("model=%s attention=%s", path, ev ? ev->value_nick : "?"));
    goto fail;
  }

  const ConyModelConfig *c = &self->model->config;
  self->n_classes = (guint) c->n_classes;
  self->d_in = (guint) c->d_in;
  self->window = (guint) c->window;
  self->k = (guint) cony_encoder_tokens_per_step (self->encoder);
  self->refused_k = 0;
  if (labels_file != NULL && *labels_file != '\0') {
    guint n = 0;
    self->labels = read_labels (labels_file, &n, &error);
    if (self->labels == NULL) {
      GST_ELEMENT_ERROR (self, RESOURCE, OPEN_READ, ("Could not read the labels file: %s",
              error->message), ("labels-file=%s", labels_file));
      goto fail;
    }
    if (n != self->n_classes) {
      GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS,
          ("The labels file has %u labels but the model has %u classes", n, self->n_classes),
          ("labels-file=%s (one label per line), model=%s", labels_file, path));
      goto fail;
    }
  } else {
    self->labels = g_strdupv (c->labels);
  }

  self->logits = g_new0 (gfloat, self->n_classes);
  self->probs = g_new0 (gfloat, self->n_classes);
  self->starts = g_new (GstClockTime, self->window);
  self->have_info = FALSE;
  self->refused_dim = 0;
  reset_stream (self);
  GST_INFO_OBJECT (self, "loaded %s: d_in %u, %u classes, window %u, %u token(s) per step, "
      "%d block(s), attention %s", path, self->d_in, self->n_classes, self->window, self->k,
      c->blocks,
      cony_attention_variant_name (cony_encoder_block_variant (self->encoder, 0)));
  g_free (path);
  g_free (labels_file);
  return TRUE;

fail:
  g_clear_error (&error);
  gst_cony_transformer_stop (trans);
  g_free (path);
  g_free (labels_file);
  return FALSE;
}

static gboolean
gst_cony_transformer_stop (GstBaseTransform *trans)
{
  GstConyTransformer *self = GST_CONY_TRANSFORMER (trans);

  g_clear_pointer (&self->encoder, cony_encoder_free);
  g_clear_pointer (&self->model, cony_model_free);
  g_clear_pointer (&self->labels, g_strfreev);
  g_clear_pointer (&self->logits, g_free);
  g_clear_pointer (&self->probs, g_free);
  g_clear_pointer (&self->starts, g_free);
  self->have_info = FALSE;
  return TRUE;
}

/* A classifier that records the CNN it was trained on (frontend.cnn, cnn_sha256,
 * cnn_output; issue 26) refuses tokens whose caps name another CNN file, by content, or
 * another of its outputs. Caps without those fields (appsrc, NNStreamer) pass. */
static gboolean
token_source_matches (GstConyTransformer *self, const GstCaps *caps)
{
  const ConyModelConfig *c = &self->model->config;
  const GstStructure *s = gst_caps_get_structure (caps, 0);
  const gchar *name = gst_structure_get_string (s, "cnn");
  const gchar *sha = gst_structure_get_string (s, "cnn-sha256");
  const gchar *output = gst_structure_get_string (s, "cnn-output");
  const gchar *want = c->cnn_output ? c->cnn_output : "scores";
  if (c->cnn_sha256 == NULL || ((sha == NULL || g_ascii_strcasecmp (sha, c->cnn_sha256) == 0)
          && (output == NULL || strcmp (output, want) == 0)))
    return TRUE;
  GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
      ("The tokens do not come from the CNN the model was trained on"),
      ("the tokens come from %s (SHA-256 %.16s..., output=%s); %s was trained on the tokens "
          "of %s (SHA-256 %.16s..., output=%s)", name ? name : "(unnamed CNN)",
          sha ? sha : "(not given)", output ? output : "(not given)", self->model->path,
          c->cnn_name ? c->cnn_name : "(unnamed CNN)", c->cnn_sha256, want));
  return FALSE;
}

static gboolean
gst_cony_transformer_set_caps (GstBaseTransform *trans, GstCaps *incaps, GstCaps *outcaps)
{
  GstConyTransformer *self = GST_CONY_TRANSFORMER (trans);
  GstConyTokenInfo info;
  gchar *why = NULL;

  if (self->encoder == NULL)
    return FALSE;
  if (!gst_cony_tokens_info_from_caps (&info, incaps, &why)) {
    GST_WARNING_OBJECT (self, "refusing caps %" GST_PTR_FORMAT ": %s", incaps, why);
    g_free (why);
    return FALSE;
  }
  if (!token_source_matches (self, incaps))
    return FALSE;
  if (info.dim != self->d_in) {
    /* Upstream retries the sticky caps with every buffer: say it once per size. */
    if (self->refused_dim != info.dim)
      GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Token size does not match the model"),
          ("the input has %u floats per token, the model takes d_in = %u", info.dim,
              self->d_in));
    self->refused_dim = info.dim;
    return FALSE;
  }
  if (info.tokens_per_buffer % self->k != 0) {
    if (self->refused_k != info.tokens_per_buffer)
      GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
          ("Tokens per buffer are not a whole number of model steps"),
          ("the input has %u tokens per buffer (dimensions %u:%u), the model takes "
              "tokens_per_step = %u tokens per step", info.tokens_per_buffer, info.dim,
              info.tokens_per_buffer, self->k));
    self->refused_k = info.tokens_per_buffer;
    return FALSE;
  }
  if (self->have_info && !gst_cony_tokens_info_same_tokens (&info, &self->info)) {
    GST_DEBUG_OBJECT (self, "token caps changed: resetting the continual state");
    reset_stream (self);
  }
  self->info = info;
  self->have_info = TRUE;
  self->refused_dim = 0;
  self->refused_k = 0;
  return TRUE;
}

static GstStructure *new_step_structure (GstConyTransformer *self, GstClockTime pts,
    GstClockTime duration, guint64 step, gint top);

static gboolean
gst_cony_transformer_sink_event (GstBaseTransform *trans, GstEvent *event)
{
  GstConyTransformer *self = GST_CONY_TRANSFORMER (trans);

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_FLUSH_STOP:
      GST_DEBUG_OBJECT (self, "flush: resetting the continual state");
      reset_stream (self);
      break;
    case GST_EVENT_GAP:
      /* No tokens for a while: the tokens after it do not follow the window. */
      GST_DEBUG_OBJECT (self, "gap: resetting the continual state");
      reset_stream (self);
      break;
    case GST_EVENT_EOS:{
      gboolean post;
      GstConyTransformerMessageMode mode;
      GST_OBJECT_LOCK (self);
      post = self->post_messages;
      mode = self->message_mode;
      GST_OBJECT_UNLOCK (self);
      if (post && mode == GST_CONY_TRANSFORMER_MESSAGE_ON_CHANGE && self->seg_class >= 0
          && self->have_last) {
        GstStructure *s = new_step_structure (self, self->last_pts, self->last_duration,
            self->last_step, self->seg_class);
        gst_structure_set (s, "segment-start", G_TYPE_UINT64, self->seg_start,
            "previous-label", G_TYPE_STRING, self->labels[self->seg_class],
            "previous-segment-start", G_TYPE_UINT64, self->seg_start,
            "previous-segment-end", G_TYPE_UINT64, self->seg_end,
            "eos", G_TYPE_BOOLEAN, TRUE, NULL);
        gst_element_post_message (GST_ELEMENT (self),
            gst_message_new_element (GST_OBJECT (self), s));
        self->seg_class = -1;
      }
      break;
    }
    default:
      break;
  }
  return GST_BASE_TRANSFORM_CLASS (parent_class)->sink_event (trans, event);
}

/* ------------------------------------------------------------------------ */

static gboolean
all_finite (const gfloat *x, guint n)
{
  for (guint i = 0; i < n; i++)
    if (!isfinite (x[i]))
      return FALSE;
  return TRUE;
}

/* Softmax of the logits into self->probs; returns the top class. */
static gint
softmax_top (GstConyTransformer *self)
{
  gint top = 0;
  for (guint i = 1; i < self->n_classes; i++)
    if (self->logits[i] > self->logits[top])
      top = (gint) i;
  double max = self->logits[top], sum = 0.0;
  for (guint i = 0; i < self->n_classes; i++)
    sum += exp ((double) self->logits[i] - max);
  for (guint i = 0; i < self->n_classes; i++)
    self->probs[i] = (gfloat) (exp ((double) self->logits[i] - max) / sum);
  return top;
}

static GstStructure *
new_step_structure (GstConyTransformer *self, GstClockTime pts, GstClockTime duration,
    guint64 step, gint top)
{
  GstSegment *seg = &GST_BASE_TRANSFORM (self)->segment;
  GstClockTime st = GST_CLOCK_TIME_NONE, rt = GST_CLOCK_TIME_NONE;

  if (GST_CLOCK_TIME_IS_VALID (pts) && seg->format == GST_FORMAT_TIME) {
    st = gst_segment_to_stream_time (seg, GST_FORMAT_TIME, pts);
    rt = gst_segment_to_running_time (seg, GST_FORMAT_TIME, pts);
  }
  GstStructure *s = gst_structure_new (MESSAGE_NAME,
      "timestamp", G_TYPE_UINT64, pts,
      "stream-time", G_TYPE_UINT64, st,
      "running-time", G_TYPE_UINT64, rt,
      "duration", G_TYPE_UINT64, duration,
      "step", G_TYPE_UINT64, step,
      "class-id", G_TYPE_INT, top,
      "label", G_TYPE_STRING, self->labels[top],
      "confidence", G_TYPE_FLOAT, self->probs[top], NULL);
  GValue arr = G_VALUE_INIT, v = G_VALUE_INIT;
  g_value_init (&arr, GST_TYPE_ARRAY);
  g_value_init (&v, G_TYPE_FLOAT);
  for (guint i = 0; i < self->n_classes; i++) {
    g_value_set_float (&v, self->probs[i]);
    gst_value_array_append_value (&arr, &v);
  }
  gst_structure_take_value (s, "scores", &arr);
  g_value_unset (&v);
  return s;
}

static GstClockTime
running_time (GstConyTransformer *self, GstClockTime t)
{
  GstSegment *seg = &GST_BASE_TRANSFORM (self)->segment;
  if (!GST_CLOCK_TIME_IS_VALID (t) || seg->format != GST_FORMAT_TIME)
    return GST_CLOCK_TIME_NONE;
  return gst_segment_to_running_time (seg, GST_FORMAT_TIME, t);
}

/* The message for this step, or NULL (not posted yet: outside the lock). */
static GstMessage *
step_message (GstConyTransformer *self, GstClockTime pts, GstClockTime end, guint64 step,
    gint top, GstConyTransformerMessageMode mode, gdouble threshold)
{
  GstClockTime duration = GST_CLOCK_TIME_IS_VALID (pts) && GST_CLOCK_TIME_IS_VALID (end)
      ? end - pts : GST_CLOCK_TIME_NONE;

  if (self->probs[top] < threshold)
    return NULL;
  if (mode == GST_CONY_TRANSFORMER_MESSAGE_EVERY_STEP) {
    GstStructure *s = new_step_structure (self, pts, duration, step, top);
    return gst_message_new_element (GST_OBJECT (self), s);
  }

  GstClockTime rt_start = running_time (self, pts), rt_end = running_time (self, end);
  if (top == self->seg_class) {
    self->seg_end = rt_end;
    return NULL;
  }
  GstStructure *s = new_step_structure (self, pts, duration, step, top);
  gst_structure_set (s, "segment-start", G_TYPE_UINT64, rt_start,
      "previous-label", G_TYPE_STRING, self->seg_class >= 0 ? self->labels[self->seg_class] : "",
      "previous-segment-start", G_TYPE_UINT64, self->seg_start,
      "previous-segment-end", G_TYPE_UINT64, self->seg_end, NULL);
  self->seg_class = top;
  self->seg_start = rt_start;
  self->seg_end = rt_end;
  return gst_message_new_element (GST_OBJECT (self), s);
}

static GstFlowReturn
gst_cony_transformer_transform_ip (GstBaseTransform *trans, GstBuffer *buf)
{
  GstConyTransformer *self = GST_CONY_TRANSFORMER (trans);
  GstMapInfo map;
  gsize token_bytes = (gsize) self->d_in * sizeof (gfloat);
  gboolean post;
  GstConyTransformerMessageMode mode;
  gdouble threshold;

  if (!self->have_info) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, (NULL), ("no caps before the first buffer"));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  GST_OBJECT_LOCK (self);
  post = self->post_messages;
  mode = self->message_mode;
  threshold = self->threshold;
  GST_OBJECT_UNLOCK (self);

  if (GST_BUFFER_IS_DISCONT (buf) && cony_encoder_steps (self->encoder) > 0) {
    GST_DEBUG_OBJECT (self, "discontinuity at %" GST_TIME_FORMAT ": resetting the state",
        GST_TIME_ARGS (GST_BUFFER_PTS (buf)));
    reset_stream (self);
  }

  /* Copy the tokens out: the metas are added to the buffer we read. */
  if (!gst_buffer_map (buf, &map, GST_MAP_READ)) {
    GST_ELEMENT_ERROR (self, RESOURCE, READ, (NULL), ("could not map the input buffer"));
    return GST_FLOW_ERROR;
  }
  gsize step_bytes = token_bytes * self->k;
  if (map.size % step_bytes != 0) {
    if (self->k == 1)
      GST_ELEMENT_ERROR (self, STREAM, FORMAT, (NULL),
          ("buffer of %" G_GSIZE_FORMAT " bytes is not a whole number of %u-float tokens",
              map.size, self->d_in));
    else
      GST_ELEMENT_ERROR (self, STREAM, FORMAT, ("Buffer does not hold whole model steps"),
          ("buffer of %" G_GSIZE_FORMAT " bytes is not a whole number of steps of %u "
              "%u-float tokens (the model's tokens_per_step)", map.size, self->k, self->d_in));
    gst_buffer_unmap (buf, &map);
    return GST_FLOW_ERROR;
  }
  gsize k = map.size / token_bytes, per = self->k;
  gfloat *tokens = g_memdup2 (map.data, map.size);
  gst_buffer_unmap (buf, &map);

  GstClockTime pts = GST_BUFFER_PTS (buf), dur = GST_BUFFER_DURATION (buf);
  GPtrArray *messages = NULL;
  guint bad = 0;
  /* One step per `per` consecutive tokens (per = 1 for most models). */
  for (gsize i = 0; i < k; i += per) {
    const gfloat *token = tokens + i * self->d_in;
    GstClockTime t0 = GST_CLOCK_TIME_NONE, t1 = GST_CLOCK_TIME_NONE;
    if (GST_CLOCK_TIME_IS_VALID (pts)) {
      if (GST_CLOCK_TIME_IS_VALID (dur)) {
        t0 = pts + gst_util_uint64_scale (dur, i, k);
        t1 = pts + gst_util_uint64_scale (dur, i + per, k);
      } else if (self->info.rate_n > 0) {
        t0 = gst_cony_tokens_time (pts, i, self->info.rate_n, self->info.rate_d);
        t1 = gst_cony_tokens_time (pts, i + per, self->info.rate_n, self->info.rate_d);
      } else {
        t0 = pts;
      }
    }

    if (!all_finite (token, self->d_in * per)) {
      bad += per;
      continue;
    }

    guint64 step = cony_encoder_steps (self->encoder);
    guint64 first = step * per;   /* index of the step's first token since the reset */
    for (gsize j = 0; j < per; j++) {
      GstClockTime tj = t0;
      if (j > 0 && GST_CLOCK_TIME_IS_VALID (pts) && GST_CLOCK_TIME_IS_VALID (dur))
        tj = pts + gst_util_uint64_scale (dur, i + j, k);
      else if (j > 0 && GST_CLOCK_TIME_IS_VALID (pts) && self->info.rate_n > 0)
        tj = gst_cony_tokens_time (pts, i + j, self->info.rate_n, self->info.rate_d);
      self->starts[(first + j) % self->window] = tj;
    }
    cony_encoder_step (self->encoder, token, self->logits);
    guint fill = (guint) cony_encoder_window_fill (self->encoder);
    gint top = softmax_top (self);
    GstClockTime wstart = self->starts[(first + per - fill) % self->window];

    GstConyClassificationMeta *meta = gst_buffer_add_cony_classification_meta (buf, step,
        wstart, t1, top, self->labels[top], self->probs[top], self->probs, self->n_classes,
        (gdouble) fill / self->window);
    gst_buffer_add_cony_classification_custom_meta (buf, meta);
    GST_LOG_OBJECT (self, "step %" G_GUINT64_FORMAT " at %" GST_TIME_FORMAT ": %s (%.3f)",
        step, GST_TIME_ARGS (t0), self->labels[top], self->probs[top]);

    self->have_last = TRUE;
    self->last_pts = t0;
    self->last_duration = GST_CLOCK_TIME_IS_VALID (t0) && GST_CLOCK_TIME_IS_VALID (t1)
        ? t1 - t0 : GST_CLOCK_TIME_NONE;
    self->last_step = step;

    if (post) {
      GstMessage *m = step_message (self, t0, t1, step, top, mode, threshold);
      if (m) {
        if (!messages)
          messages = g_ptr_array_new ();
        g_ptr_array_add (messages, m);
      }
    }
  }
  g_free (tokens);

  if (bad > 0 && !self->in_nonfinite)
    GST_ELEMENT_WARNING (self, STREAM, FORMAT, ("Input tokens contain NaN or infinite values"),
        ("%u of %" G_GSIZE_FORMAT " tokens in the buffer at %" GST_TIME_FORMAT
            " were not classified (the model state is kept)", bad, k, GST_TIME_ARGS (pts)));
  self->in_nonfinite = bad > 0;

  if (messages) {
    for (guint i = 0; i < messages->len; i++)
      gst_element_post_message (GST_ELEMENT (self), messages->pdata[i]);
    g_ptr_array_free (messages, TRUE);
  }
  return GST_FLOW_OK;
}

/* ------------------------------------------------------------------------ */

static void
gst_cony_transformer_set_property (GObject *object, guint prop_id, const GValue *value,
    GParamSpec *pspec)
{
  GstConyTransformer *self = GST_CONY_TRANSFORMER (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      g_free (self->model_path);
      self->model_path = g_value_dup_string (value);
      break;
    case PROP_ATTENTION:
      self->attention = g_value_get_enum (value);
      break;
    case PROP_LABELS_FILE:
      g_free (self->labels_file);
      self->labels_file = g_value_dup_string (value);
      break;
    case PROP_POST_MESSAGES:
      self->post_messages = g_value_get_boolean (value);
      break;
    case PROP_MESSAGE_MODE:
      self->message_mode = g_value_get_enum (value);
      break;
    case PROP_THRESHOLD:
      self->threshold = g_value_get_double (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_transformer_get_property (GObject *object, guint prop_id, GValue *value,
    GParamSpec *pspec)
{
  GstConyTransformer *self = GST_CONY_TRANSFORMER (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      g_value_set_string (value, self->model_path);
      break;
    case PROP_ATTENTION:
      g_value_set_enum (value, self->attention);
      break;
    case PROP_LABELS_FILE:
      g_value_set_string (value, self->labels_file);
      break;
    case PROP_POST_MESSAGES:
      g_value_set_boolean (value, self->post_messages);
      break;
    case PROP_MESSAGE_MODE:
      g_value_set_enum (value, self->message_mode);
      break;
    case PROP_THRESHOLD:
      g_value_set_double (value, self->threshold);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_transformer_finalize (GObject *object)
{
  GstConyTransformer *self = GST_CONY_TRANSFORMER (object);

  gst_cony_transformer_stop (GST_BASE_TRANSFORM (self));
  g_free (self->model_path);
  g_free (self->labels_file);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_cony_transformer_class_init (GstConyTransformerClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS (klass);
  const GParamFlags ready = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY;
  const GParamFlags playing = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
      | GST_PARAM_MUTABLE_PLAYING;

  GST_DEBUG_CATEGORY_INIT (gst_cony_transformer_debug, "conytransformer", 0,
      "Continual transformer classification");

  gobject_class->set_property = gst_cony_transformer_set_property;
  gobject_class->get_property = gst_cony_transformer_get_property;
  gobject_class->finalize = gst_cony_transformer_finalize;

  /**
   * GstConyTransformer:model:
   *
   * Path of the safetensors model file (required; docs/model-format.md).
   * Loaded on READY->PAUSED.
   */
  g_object_class_install_property (gobject_class, PROP_MODEL,
      g_param_spec_string ("model", "Model",
          "Path of the cony-encoder-classifier safetensors model file", DEFAULT_MODEL, ready));
  /**
   * GstConyTransformer:attention:
   *
   * Attention variant run instead of the model's own (default: `model`, the
   * variants recorded in the file). The fixed-landmark variants need a model
   * with landmarks; asking for one of a model without them fails the state
   * change.
   */
  g_object_class_install_property (gobject_class, PROP_ATTENTION,
      g_param_spec_enum ("attention", "Attention",
          "Attention variant: the model's own, or one of the libcony variants",
          GST_TYPE_CONY_TRANSFORMER_ATTENTION, DEFAULT_ATTENTION, ready));
  /**
   * GstConyTransformer:labels-file:
   *
   * Text file with one label per line (a final empty line is ignored),
   * replacing the labels stored in the model. The number of labels must
   * equal the model's number of classes, or the state change fails.
   */
  g_object_class_install_property (gobject_class, PROP_LABELS_FILE,
      g_param_spec_string ("labels-file", "Labels file",
          "Text file with one label per line (default: the labels in the model)",
          DEFAULT_LABELS_FILE, ready));
  /**
   * GstConyTransformer:post-messages:
   *
   * Post `conytransformer` element messages on the bus (the meta is attached
   * either way).
   */
  g_object_class_install_property (gobject_class, PROP_POST_MESSAGES,
      g_param_spec_boolean ("post-messages", "Post messages",
          "Post an element message with the classification", DEFAULT_POST_MESSAGES, playing));
  /**
   * GstConyTransformer:message-mode:
   *
   * `every-step` (default): a message per step; `on-change`: a message when
   * the top label changes, with segment running times.
   */
  g_object_class_install_property (gobject_class, PROP_MESSAGE_MODE,
      g_param_spec_enum ("message-mode", "Message mode",
          "When to post messages: every step, or when the top label changes",
          GST_TYPE_CONY_TRANSFORMER_MESSAGE_MODE, DEFAULT_MESSAGE_MODE, playing));
  /**
   * GstConyTransformer:threshold:
   *
   * Minimum confidence (softmax probability of the top class, 0..1) for a
   * step to be posted (every-step) or to count for a label (on-change).
   * Metas are attached to every step regardless.
   */
  g_object_class_install_property (gobject_class, PROP_THRESHOLD,
      g_param_spec_double ("threshold", "Threshold",
          "Minimum confidence of the top class for a step to be posted or counted",
          0.0, 1.0, DEFAULT_THRESHOLD, playing));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "Continual transformer classifier",
      "Filter/Analyzer",
      "Classifies every token with a continual (Nystrom) transformer and attaches the result "
      "as metadata and bus messages", "gst-cony authors");

  trans_class->start = GST_DEBUG_FUNCPTR (gst_cony_transformer_start);
  trans_class->stop = GST_DEBUG_FUNCPTR (gst_cony_transformer_stop);
  trans_class->set_caps = GST_DEBUG_FUNCPTR (gst_cony_transformer_set_caps);
  trans_class->sink_event = GST_DEBUG_FUNCPTR (gst_cony_transformer_sink_event);
  trans_class->transform_ip = GST_DEBUG_FUNCPTR (gst_cony_transformer_transform_ip);
  /* The buffers pass through; metas are added, so they must be writable. */
  trans_class->passthrough_on_same_caps = FALSE;
  trans_class->transform_ip_on_passthrough = FALSE;

  gst_cony_classification_meta_get_info ();
  gst_cony_classification_custom_meta_register ();
  gst_type_mark_as_plugin_api (GST_TYPE_CONY_TRANSFORMER_ATTENTION, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_CONY_TRANSFORMER_MESSAGE_MODE, 0);
}

static void
gst_cony_transformer_init (GstConyTransformer *self)
{
  self->attention = DEFAULT_ATTENTION;
  self->post_messages = DEFAULT_POST_MESSAGES;
  self->message_mode = DEFAULT_MESSAGE_MODE;
  self->threshold = DEFAULT_THRESHOLD;
  self->seg_class = -1;
  gst_base_transform_set_in_place (GST_BASE_TRANSFORM (self), TRUE);
  gst_base_transform_set_passthrough (GST_BASE_TRANSFORM (self), FALSE);
}
