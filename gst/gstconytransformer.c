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
 * Every token is one step of the continual encoder; the scores of a step
 * come from the newest token's logits: softmax, or one sigmoid per class for
 * models whose config says `output` = sigmoid (multi-label). A buffer with K
 * tokens gets K metas, one per step (field `step` orders them;
 * gst_buffer_get_cony_classification_meta() returns the newest). They live as long
 * as the buffer, so a buffer may carry at most as many steps as fit in 64 MiB of
 * results (about 7 KiB + 100 bytes a class a step with messages: 8533 steps for 4
 * classes, about 1100 for 521, 6 for 100,000); a larger one fails with a STREAM
 * FORMAT error saying how many tokens a buffer may carry. Each
 * carries the top class (`class_id`, `label`, `score`), all `scores`, the
 * #GstConyTransformer:top-k best classes (`top_ids`, `top_labels`), the
 * step's segment events (`events`), `context_fill` and the times:
 *
 * - `pts`: the step's PTS (token i of a buffer: PTS + i x duration / K, or
 *   i / token rate when the buffer has no duration);
 * - `window_start`, `window_end`: the input the result covers, from the
 *   start of the oldest token in the attention window to the end of the
 *   newest token's input (its end + the caps' `lookahead`, gstconytokens.h:
 *   the newest 0.975 s VGGish window for the audio chain), in buffer time;
 *   `running_start`/`running_end` and `stream_start`/`stream_end` the same
 *   in running and stream time.
 *
 * Metas are attached whatever #GstConyTransformer:threshold is.
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
 * `spectrum` do. In `message-mode=every-step` one message per step that
 * reaches its threshold (softmax: the top class its own; sigmoid: any class
 * its own). A message carries the step's result: the fields, under the same names, of
 * the meta's custom mirror and of conyjson's records (`step`, `pts`, `start`, `end`,
 * `class_id`, `label`, `score`, `top`, `events`, ...), all from one table
 * (gstconyresult.h; docs/elements.md, "Result fields", lists them and the names they
 * had before). A step below the level gate has `gated` and no class fields.
 *
 * Thresholds: the labels file may give one per label (`label<TAB>0.7`);
 * others use #GstConyTransformer:threshold (0, the default, means 0.5 for
 * sigmoid models).
 *
 * ## Segments
 *
 * Segments are kept in every mode (their events go on the metas); in
 * `message-mode=on-change` they are the messages. Softmax models have one
 * segment at a time, the top label's: a message when the top label changes
 * (steps below their threshold do not count: they neither change nor
 * extend a label), with the fields above for the step where the new label
 * took over, and `segment_start` (running time of its PTS),
 * `previous_label` ("" for the first), `previous_segment_start`,
 * `previous_segment_end` (running times; NONE for the first). Sigmoid
 * models have a segment per label, open while its score reaches its
 * threshold: an `event` = "onset" message when it rises to it and "offset"
 * when it falls below, with `segment_start` and `segment_end` (NONE for an
 * onset); `label`, `class_id` and `score` are then that label's. Segment
 * times run from the PTS of the first step to the end of the last step's
 * tokens, so consecutive segments tile.
 *
 * #GstConyTransformer:min-steps and #GstConyTransformer:min-duration steady
 * them: a new top label, onset or offset is reported only once it has held that
 * long, at the step that completes the hold, with the times of its first step;
 * shorter runs belong to the segment around them.
 *
 * At EOS, messages close the open segments (softmax: the fields of the last
 * step, `segment_start`, the open label as `previous_label` with its
 * `previous_segment_start`/`_end`; sigmoid: an offset per open label), with
 * `eos` (#gboolean) = TRUE. A reset (FLUSH_STOP, DISCONT, caps change)
 * forgets the open segments without a message.
 *
 * ## Listen lists, label groups, the level gate
 *
 * #GstConyTransformer:groups-file, #GstConyTransformer:listen and
 * #GstConyTransformer:ignore turn the model's classes into the labels a user
 * wants (libcony's cony/labelgroups.h): groups of model labels scored by their
 * highest member, the labels listened to, the rest folded into
 * #GstConyTransformer:other-label. Class ids, scores, top-k, thresholds,
 * segments and messages then follow the reported labels. A token that
 * #GstConyVggish:min-level marked as below the level gate runs no model step:
 * its result has `gated` = TRUE (meta, message, JSON), no class, the gated
 * window's times; the continual state starts again after it
 * (docs/elements.md, "Level gate").
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
 * - A step whose logits are not finite (finite tokens so large that the
 *   model overflows float, e.g. values near FLT_MAX) gets no meta and no
 *   message; the continual state is reset (the next step is step 0) and a
 *   STREAM FAILED warning naming the step is posted once per run of affected
 *   buffers. A NaN is never published as a result.
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 -m autoaudiosrc ! audioconvert ! audioresample ! conymel preset=yamnet ! conyvggish model=models/audio/yamnet-adapted.safetensors output=embedding ! conytransformer model=models/audio/transformer.safetensors ! fakesink
 * ]| classifies the microphone four times a second with the shipped model (YAMNet
 * embeddings) and prints the messages (pipelines/microphone.sh does the same and
 * refuses to run without a microphone, where autoaudiosrc gives silence).
 * |[
 * gst-launch-1.0 -m uridecodebin uri=file:///tmp/a.ogg ! audioconvert ! audioresample ! conymel preset=yamnet ! conyvggish model=models/audio/yamnet-adapted.safetensors output=embedding ! conytransformer model=models/audio/transformer.safetensors message-mode=on-change threshold=0.6 ! fakesink
 * ]| prints a message each time the label of a file changes.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstconytransformer-private.h"
#include "cony/labels.h"
#include "cony/safetensors.h"
#include "gstconyelement.h"
#include "gstconylevel.h"

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
#define DEFAULT_TOP_K 1
#define DEFAULT_MIN_STEPS 1
#define DEFAULT_MIN_DURATION 0
#define DEFAULT_HYSTERESIS 0.0
#define MAX_TOP_K 1024
#define DEFAULT_LISTEN NULL
#define DEFAULT_IGNORE NULL
#define DEFAULT_GROUPS_FILE NULL
#define DEFAULT_OTHER_LABEL "other"
#define DEFAULT_GROUP_SCORE CONY_GROUP_SCORE_MAX

enum
{
  PROP_0,
  PROP_MODEL,
  PROP_ATTENTION,
  PROP_LABELS_FILE,
  PROP_POST_MESSAGES,
  PROP_MESSAGE_MODE,
  PROP_THRESHOLD,
  PROP_TOP_K,
  PROP_MIN_STEPS,
  PROP_MIN_DURATION,
  PROP_HYSTERESIS,
  PROP_LABELS,
  PROP_LISTEN,
  PROP_IGNORE,
  PROP_GROUPS_FILE,
  PROP_OTHER_LABEL,
  PROP_GROUP_SCORE,
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink", GST_PAD_SINK,
    GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_CONY_TOKENS_CAPS_STRING));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src", GST_PAD_SRC,
    GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_CONY_TOKENS_CAPS_STRING));

/* The attention property's enum: "model", then libcony's variant table, so that a new
 * variant needs no change here. */
GType
gst_cony_transformer_attention_get_type (void)
{
  static GType type = 0;
  static GEnumValue values[CONY_ATTENTION_N_VARIANTS + 2];
  if (g_once_init_enter (&type)) {
    values[0] = (GEnumValue){ GST_CONY_TRANSFORMER_ATTENTION_MODEL,
      "The variants the model was trained with", "model" };
    for (int v = 0; v < CONY_ATTENTION_N_VARIANTS; v++)
      values[v + 1] = (GEnumValue){ v, cony_attention_variant_description (v),
        cony_attention_variant_name (v) };
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
    { GST_CONY_TRANSFORMER_MESSAGE_EVERY_STEP, "A message for every step", "every-step" },
    { GST_CONY_TRANSFORMER_MESSAGE_ON_CHANGE,
        "A message per segment event: the top label changes (sigmoid: a label's onset/offset)",
        "on-change" },
    { 0, NULL, NULL },
  };
  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstConyTransformerMessageMode", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

GType
gst_cony_transformer_group_score_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    { CONY_GROUP_SCORE_MAX, "The highest score of the group's members", "max" },
    { CONY_GROUP_SCORE_SUM, "The sum of the members' scores, capped at 1", "sum" },
    { 0, NULL, NULL },
  };
  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstConyTransformerGroupScore", values);
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
gst_cony_transformer_reset_stream (GstConyTransformer *self)
{
  if (self->encoder)
    cony_encoder_reset (self->encoder);
  gst_cony_segment_track_reset (&self->seg, -1);
  for (guint c = 0; self->label_seg && c < self->n_classes; c++)
    gst_cony_segment_track_reset (&self->label_seg[c], 0);
  self->have_last = FALSE;
  self->n_steps = 0;
  self->in_nonfinite = FALSE;
  self->in_overflow = FALSE;
}

/* A step whose logits are not finite: nothing is published for it, and the stream
 * starts again (the encoder has already reset itself); the runs of bad buffers, which
 * rate-limit the warnings, go on. */
static void
gst_cony_transformer_reset_after_overflow (GstConyTransformer *self)
{
  gboolean in_nonfinite = self->in_nonfinite, in_overflow = self->in_overflow;
  gst_cony_transformer_reset_stream (self);
  self->in_nonfinite = in_nonfinite;
  self->in_overflow = in_overflow;
}

/* The listen / ignore / groups-file settings, copied out of the object lock. */
typedef struct {
  gchar *listen, *ignore, *groups_file, *other;
  ConyGroupScore how;
} GstConyTransformerListen;

/* (object lock held) */
static void
gst_cony_transformer_listen_copy (GstConyTransformer *self, GstConyTransformerListen *l)
{
  *l = (GstConyTransformerListen){ g_strdup (self->listen), g_strdup (self->ignore),
    g_strdup (self->groups_file), g_strdup (self->other_label), self->group_score };
}

static void
gst_cony_transformer_listen_clear (GstConyTransformerListen *l)
{
  g_free (l->listen);
  g_free (l->ignore);
  g_free (l->groups_file);
  g_free (l->other);
}

/* The reported classes under @l (cony/labelgroups.h) of the model's @n_model @labels
 * (thresholds @thr or NULL); NULL without error when none of listen, ignore and
 * groups-file is set: the model's classes are reported as they are. */
static ConyLabelView *
gst_cony_transformer_make_view (const GstConyTransformerListen *l, const gchar *const *labels,
    guint n_model, const gdouble *thr, GError **error)
{
  g_autoptr (ConyLabelGroups) groups = NULL;
  g_auto (GStrv) listen = cony_label_list_split (l->listen);
  g_auto (GStrv) ignore = cony_label_list_split (l->ignore);
  gboolean have_groups = l->groups_file != NULL && *l->groups_file != '\0';
  if (!have_groups && listen[0] == NULL && ignore[0] == NULL)
    return NULL;
  if (have_groups) {
    groups = cony_label_groups_load (l->groups_file, labels, n_model, error);
    if (groups == NULL)
      return NULL;
  }
  return cony_label_view_new (labels, n_model, thr, groups, (const char *const *) listen,
      (const char *const *) ignore, l->other, l->how, error);
}

/* The labels before the model is loaded (the labels property in NULL/READY):
 * the labels file's, else those of the model file's config; NULL when
 * neither can be read (the state change will say why). */
static gchar **
gst_cony_transformer_peek_model_labels (const gchar *model_path, const gchar *labels_file)
{
  gchar **labels = NULL;
  if (labels_file != NULL && *labels_file != '\0') {
    guint n = 0;
    return cony_labels_load (labels_file, &n, NULL, NULL);
  }
  if (model_path == NULL || *model_path == '\0')
    return NULL;
  ConySafetensors *st = cony_safetensors_open (model_path, NULL);
  const char *json = st ? cony_safetensors_metadata (st, "config") : NULL;
  ConyModelConfig config;
  if (json && cony_model_config_parse (json, model_path, &config, NULL)) {
    labels = g_strdupv (config.labels);
    cony_model_config_clear (&config);
  }
  if (st)
    cony_safetensors_close (st);
  return labels;
}

/* ... and as reported, under listen / ignore / groups-file (NULL when they are wrong). */
static gchar **
gst_cony_transformer_peek_labels (const gchar *model_path, const gchar *labels_file,
    const GstConyTransformerListen *l)
{
  gchar **labels = gst_cony_transformer_peek_model_labels (model_path, labels_file);
  if (labels == NULL)
    return NULL;
  GError *error = NULL;
  ConyLabelView *view = gst_cony_transformer_make_view (l, (const gchar *const *) labels,
      g_strv_length (labels), NULL, &error);
  if (view == NULL && error == NULL)
    return labels;
  g_strfreev (labels);
  labels = view ? g_strdupv ((gchar **) cony_label_view_labels (view)) : NULL;
  g_clear_error (&error);
  cony_label_view_free (view);
  return labels;
}

static gboolean gst_cony_transformer_stop (GstBaseTransform *trans);

/* listen / ignore / groups-file: replaces *@labels (the model's n_model) and
 * self->thresholds with the reported classes' and sets n_classes to their number.
 * FALSE (an error posted) when a setting names what the model does not have. */
static gboolean
gst_cony_transformer_apply_view (GstConyTransformer *self, const GstConyTransformerListen *l,
    gchar ***labels)
{
  GError *error = NULL;
  self->view = gst_cony_transformer_make_view (l, (const gchar *const *) *labels, self->n_model,
      self->thresholds, &error);
  if (self->view == NULL && error != NULL) {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS,
        ("Could not set up the reported labels: %s", error->message),
        ("listen=%s ignore=%s groups-file=%s", GST_STR_NULL (l->listen), GST_STR_NULL (l->ignore),
            GST_STR_NULL (l->groups_file)));
    g_error_free (error);
    return FALSE;
  }
  if (self->view == NULL)
    return TRUE;
  g_strfreev (*labels);
  *labels = g_strdupv ((gchar **) cony_label_view_labels (self->view));
  self->n_classes = cony_label_view_n_labels (self->view);
  g_free (self->thresholds);
  self->thresholds = g_memdup2 (cony_label_view_thresholds (self->view),
      self->n_classes * sizeof (gdouble));
  self->model_probs = g_new0 (gfloat, self->n_model);
  return TRUE;
}

static gboolean
gst_cony_transformer_start (GstBaseTransform *trans)
{
  GstConyTransformer *self = GST_CONY_TRANSFORMER (trans);
  GError *error = NULL;
  gchar *path, *labels_file;
  GstConyTransformerAttention attention;
  GstConyTransformerListen listen;

  GST_OBJECT_LOCK (self);
  path = g_strdup (self->model_path);
  labels_file = g_strdup (self->labels_file);
  attention = self->attention;
  gst_cony_transformer_listen_copy (self, &listen);
  GST_OBJECT_UNLOCK (self);

  if (!gst_cony_element_find_model (GST_ELEMENT (self), &path,
          "an encoder-classifier file, e.g. the shipped default audio/transformer.safetensors"))
    goto fail;
  self->model = cony_model_load (path, &error);
  if (!gst_cony_element_check_loaded (GST_ELEMENT (self), self->model != NULL, path, error))
    goto fail;
  self->encoder = cony_encoder_new (self->model, (int) attention, &error);
  if (self->encoder == NULL) {
    GEnumValue *ev = g_enum_get_value (g_type_class_peek (GST_TYPE_CONY_TRANSFORMER_ATTENTION),
        attention);
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS,
        ("Could not set up the encoder: %s", error->message),
        ("model=%s attention=%s", path, ev ? ev->value_nick : "?"));
    goto fail;
  }

  const ConyModelConfig *c = &self->model->config;
  self->n_classes = (guint) c->n_classes;
  self->d_in = (guint) c->d_in;
  self->window = (guint) c->window;
  self->k = (guint) cony_encoder_tokens_per_step (self->encoder);
  self->refused_k = 0;
  gchar **labels = NULL;
  if (labels_file != NULL && *labels_file != '\0') {
    guint n = 0;
    labels = cony_labels_load (labels_file, &n, &self->thresholds, &error);
    if (labels == NULL) {
      GST_ELEMENT_ERROR (self, RESOURCE, OPEN_READ,
          ("Could not read the labels file: %s", error->message), ("labels-file=%s", labels_file));
      goto fail;
    }
    if (n != self->n_classes) {
      GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS,
          ("The labels file has %u labels but the model has %u classes", n, self->n_classes),
          ("labels-file=%s (one label per line), model=%s", labels_file, path));
      g_strfreev (labels);
      goto fail;
    }
  } else {
    labels = g_strdupv (c->labels);
  }
  self->n_model = self->n_classes;
  if (!gst_cony_transformer_apply_view (self, &listen, &labels)) {
    g_strfreev (labels);
    goto fail;
  }
  GST_OBJECT_LOCK (self);
  self->labels = labels;
  GST_OBJECT_UNLOCK (self);
  g_object_notify (G_OBJECT (self), "labels");
  self->multi_label = c->output == CONY_OUTPUT_SIGMOID;
  self->top_ids = g_new (gint, self->n_classes);
  self->top_labels = g_new (const gchar *, self->n_classes);
  self->label_seg = g_new (GstConySegmentTrack, self->n_classes);
  self->events = g_new (GstConyClassificationEvent, self->n_classes + 2);

  self->logits = g_new0 (gfloat, self->n_model);
  self->probs = g_new0 (gfloat, self->n_classes);
  self->starts = g_new (GstClockTime, self->window);
  self->have_info = FALSE;
  self->refused_dim = 0;
  self->refusal_posted = FALSE;
  gst_cony_transformer_reset_stream (self);
  GST_INFO_OBJECT (self,
      "loaded %s: d_in %u, %u classes, window %u, %u token(s) per step, "
      "%d block(s), attention %s",
      path, self->d_in, self->n_classes, self->window, self->k, c->blocks,
      cony_attention_variant_name (cony_encoder_block_variant (self->encoder, 0)));
  g_free (path);
  g_free (labels_file);
  gst_cony_transformer_listen_clear (&listen);
  return TRUE;

fail:
  g_clear_error (&error);
  gst_cony_transformer_stop (trans);
  g_free (path);
  g_free (labels_file);
  gst_cony_transformer_listen_clear (&listen);
  return FALSE;
}

static gboolean
gst_cony_transformer_stop (GstBaseTransform *trans)
{
  GstConyTransformer *self = GST_CONY_TRANSFORMER (trans);

  g_clear_pointer (&self->encoder, cony_encoder_free);
  g_clear_pointer (&self->model, cony_model_free);
  GST_OBJECT_LOCK (self);
  g_clear_pointer (&self->labels, g_strfreev);
  GST_OBJECT_UNLOCK (self);
  g_clear_pointer (&self->thresholds, g_free);
  g_clear_pointer (&self->top_ids, g_free);
  g_clear_pointer (&self->top_labels, g_free);
  g_clear_pointer (&self->label_seg, g_free);
  g_clear_pointer (&self->events, g_free);
  g_clear_pointer (&self->logits, g_free);
  g_clear_pointer (&self->probs, g_free);
  g_clear_pointer (&self->model_probs, g_free);
  g_clear_pointer (&self->view, cony_label_view_free);
  g_clear_pointer (&self->starts, g_free);
  self->have_info = FALSE;
  gst_cony_element_trim_heap ();
  return TRUE;
}

/* A classifier that records the CNN it was trained on (frontend.cnn, cnn_sha256,
 * cnn_output, cnn_mode; issues 26, 61) refuses tokens whose caps name another CNN file, by
 * content, another of its outputs, or another mode (a model without cnn_mode was trained
 * on window tokens), saying which property of the CNN element to change. Caps without
 * those fields (appsrc, NNStreamer) pass. */
static gboolean
gst_cony_transformer_token_source_matches (GstConyTransformer *self, const GstCaps *caps)
{
  const ConyModelConfig *c = &self->model->config;
  const GstStructure *s = gst_caps_get_structure (caps, 0);
  const gchar *name = gst_structure_get_string (s, "cnn");
  const gchar *sha = gst_structure_get_string (s, "cnn-sha256");
  const gchar *output = gst_structure_get_string (s, "cnn-output");
  const gchar *mode = gst_structure_get_string (s, "cnn-mode");
  const gchar *want = c->cnn.output ? c->cnn.output : "scores";
  const gchar *want_name = c->cnn.name ? c->cnn.name : "(unnamed CNN)";
  const gchar *want_mode = cony_cnn_ref_mode (&c->cnn);
  if (c->cnn.sha256 == NULL)
    return TRUE;
  gboolean same_cnn = sha == NULL || g_ascii_strcasecmp (sha, c->cnn.sha256) == 0;
  gboolean same_output = output == NULL || strcmp (output, want) == 0;
  gboolean same_mode = mode == NULL || strcmp (mode, want_mode) == 0;
  if (same_cnn && same_output && same_mode)
    return TRUE;
  /* mode= only for continual tokens: conyframeembed has no mode property */
  gchar *fix = !same_cnn ? g_strdup_printf ("give the CNN element model=%s output=%s%s%s",
                   want_name, want, strcmp (want_mode, "window") ? " mode=" : "",
                   strcmp (want_mode, "window") ? want_mode : "")
      : !same_output     ? g_strdup_printf ("set output=%s on the CNN element", want)
                         : g_strdup_printf ("set mode=%s on the CNN element", want_mode);
  GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
      ("The tokens do not come from the CNN the model was trained on"),
      ("the tokens come from %s (SHA-256 %.16s..., output=%s, mode=%s); %s was trained on "
       "the tokens of %s (SHA-256 %.16s..., output=%s, mode=%s): %s (conyvggish or "
       "conyframeembed)",
          name ? name : "(unnamed CNN)", sha ? sha : "(not given)", output ? output : "(not given)",
          mode ? mode : "(not given)", self->model->path, want_name, c->cnn.sha256, want, want_mode,
          fix));
  g_free (fix);
  return FALSE;
}

/* Names token caps refused by the sink's CAPS or ACCEPT_CAPS query (types other than
 * float32 never reach set_caps): upstream would only say "not-negotiated". */
static gboolean
gst_cony_transformer_query (GstBaseTransform *trans, GstPadDirection direction, GstQuery *query)
{
  GstConyTransformer *self = GST_CONY_TRANSFORMER (trans);
  gboolean ok = GST_BASE_TRANSFORM_CLASS (parent_class)->query (trans, direction, query);
  if (direction == GST_PAD_SINK && self->encoder != NULL)
    gst_cony_element_name_token_refusal (GST_ELEMENT (self), &self->refusal_posted, self->d_in,
        query);
  return ok;
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
    gst_cony_element_refuse_tokens (GST_ELEMENT (self), &self->refusal_posted, self->d_in, incaps,
        why);
    g_free (why);
    return FALSE;
  }
  if (!gst_cony_transformer_token_source_matches (self, incaps))
    return FALSE;
  if (info.dim != self->d_in) {
    /* Upstream retries the sticky caps with every buffer: say it once per size. */
    if (self->refused_dim != info.dim)
      GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Token size does not match the model"),
          ("the input has %u floats per token, the model takes d_in = %u", info.dim, self->d_in));
    self->refused_dim = info.dim;
    return FALSE;
  }
  if (info.tokens_per_buffer % self->k != 0) {
    if (self->refused_k != info.tokens_per_buffer)
      GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
          ("Tokens per buffer are not a whole number of model steps"),
          ("the input has %u tokens per buffer (dimensions %u:%u), the model takes "
           "tokens_per_step = %u tokens per step",
              info.tokens_per_buffer, info.dim, info.tokens_per_buffer, self->k));
    self->refused_k = info.tokens_per_buffer;
    return FALSE;
  }
  if (self->have_info && !gst_cony_tokens_info_same_tokens (&info, &self->info)) {
    GST_DEBUG_OBJECT (self, "token caps changed: resetting the continual state");
    gst_cony_transformer_reset_stream (self);
  }
  self->info = info;
  self->have_info = TRUE;
  self->refused_dim = 0;
  self->refused_k = 0;
  self->refusal_posted = FALSE;
  return TRUE;
}

static gboolean
gst_cony_transformer_sink_event (GstBaseTransform *trans, GstEvent *event)
{
  GstConyTransformer *self = GST_CONY_TRANSFORMER (trans);

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_FLUSH_STOP:
      GST_DEBUG_OBJECT (self, "flush: resetting the continual state");
      gst_cony_transformer_reset_stream (self);
      break;
    case GST_EVENT_GAP:
      /* No tokens for a while: the tokens after it do not follow the window. */
      GST_DEBUG_OBJECT (self, "gap: resetting the continual state");
      gst_cony_transformer_reset_stream (self);
      break;
    case GST_EVENT_EOS:
      gst_cony_transformer_push_closed_segments (self);
      gst_cony_transformer_close_segments_at_eos (self);
      break;
    default: break;
  }
  return GST_BASE_TRANSFORM_CLASS (parent_class)->sink_event (trans, event);
}

/* ------------------------------------------------------------------------ */

static gboolean
gst_cony_transformer_all_finite (const gfloat *x, guint n)
{
  for (guint i = 0; i < n; i++)
    if (!isfinite (x[i]))
      return FALSE;
  return TRUE;
}

/* The model's scores of the logits into @probs, in double: softmax (with the
 * maximum subtracted), or one sigmoid per class for multi-label models.
 * Returns the top class. */
static gint
gst_cony_transformer_model_scores (GstConyTransformer *self, gfloat *probs)
{
  gint top = 0;
  for (guint i = 1; i < self->n_model; i++)
    if (self->logits[i] > self->logits[top])
      top = (gint) i;
  if (self->multi_label) {
    for (guint i = 0; i < self->n_model; i++)
      probs[i] = (gfloat) (1.0 / (1.0 + exp (-(double) self->logits[i])));
    return top;
  }
  double max = self->logits[top], sum = 0.0;
  for (guint i = 0; i < self->n_model; i++)
    sum += exp ((double) self->logits[i] - max);
  for (guint i = 0; i < self->n_model; i++)
    probs[i] = (gfloat) (exp ((double) self->logits[i] - max) / sum);
  return top;
}

/* The step's scores into self->probs, folded into the reported classes under listen /
 * ignore / groups-file; returns the top reported class (lowest index on a tie). */
static gint
gst_cony_transformer_compute_scores (GstConyTransformer *self)
{
  if (self->view == NULL)
    return gst_cony_transformer_model_scores (self, self->probs);
  gst_cony_transformer_model_scores (self, self->model_probs);
  cony_label_view_fold (self->view, self->model_probs, self->probs);
  gint top = 0;
  for (guint i = 1; i < self->n_classes; i++)
    if (self->probs[i] > self->probs[top])
      top = (gint) i;
  return top;
}

/* TRUE when class a ranks before class b: higher score, then lower index. */
static inline gboolean
gst_cony_transformer_ranks_before (const gfloat *p, gint a, gint b)
{
  return p[a] > p[b] || (p[a] == p[b] && a < b);
}

/* The @k best classes into self->top_ids / top_labels, best first; returns
 * how many (k, at most the number of classes). O(k x classes). */
guint
gst_cony_transformer_select_top (GstConyTransformer *self, guint k)
{
  k = MIN (k, self->n_classes);
  for (guint j = 0; j < k; j++) {
    gint best = -1;
    for (guint i = 0; i < self->n_classes; i++) {
      if (j > 0 && !gst_cony_transformer_ranks_before (self->probs, self->top_ids[j - 1], (gint) i))
        continue;
      if (best < 0 || gst_cony_transformer_ranks_before (self->probs, (gint) i, best))
        best = (gint) i;
    }
    self->top_ids[j] = best;
    self->top_labels[j] = self->labels[best];
  }
  return k;
}

/* The end of the input behind a step whose tokens end at @tile_end: the
 * tokens' lookahead further (gstconytokens.h), no further than the segment's stop
 * (the tail window padded at EOS reads no input past it), never before @pts. */
static GstClockTime
gst_cony_transformer_input_end (GstConyTransformer *self, GstClockTime pts, GstClockTime tile_end,
    gint64 lookahead)
{
  if (!GST_CLOCK_TIME_IS_VALID (tile_end))
    return GST_CLOCK_TIME_NONE;
  GstClockTime end = gst_cony_time_add_signed (tile_end, lookahead);
  const GstSegment *seg = &GST_BASE_TRANSFORM (self)->segment;
  if (seg->format == GST_FORMAT_TIME && GST_CLOCK_TIME_IS_VALID (seg->stop))
    end = MIN (end, seg->stop);
  return GST_CLOCK_TIME_IS_VALID (pts) && end < pts ? pts : end;
}

/* Attaches step @st's result to @buf: the meta and its custom mirror. */
static void
gst_cony_transformer_attach_result (GstConyTransformer *self, GstBuffer *buf,
    const GstConyTransformerStep *st, gint top, guint n_top, guint n_events)
{
  GstConyClassificationMeta v;
  gst_cony_transformer_fill_result (self, st, top, n_top, n_events, &v);
  GstConyClassificationMeta *meta = gst_buffer_add_cony_classification_meta_full (buf, &v);
  gst_buffer_add_cony_classification_custom_meta (buf, meta);
}

/* Whether the step over tokens @i .. @i + @per of a buffer with level meta @level was below
 * conyvggish's level gate: all of its tokens were. */
static gboolean
gst_cony_transformer_step_gated (const GstConyLevelMeta *level, gsize i, gsize per)
{
  if (level == NULL || i + per > level->n)
    return FALSE;
  for (gsize j = 0; j < per; j++)
    if (!level->gated[i + j])
      return FALSE;
  return TRUE;
}

/* A step below the level gate (@st, times set): no model step, and the continual state
 * starts again after it (the quiet ends the context, as a GAP does); no class, zero
 * scores, and for the segments a step where no class reaches its threshold. */
static guint
gst_cony_transformer_gated_step (GstConyTransformer *self, GstConyTransformerStep *st,
    gdouble threshold, const GstConySegmentRule *hold)
{
  if (cony_encoder_steps (self->encoder) > 0)
    cony_encoder_reset (self->encoder);
  st->gated = TRUE;
  st->fill = 0.0;
  memset (self->probs, 0, self->n_classes * sizeof (gfloat));
  return gst_cony_transformer_update_segments (self, st, 0, threshold, hold);
}

/* Time of token @i of the @k in a buffer at @pts: interpolated over the buffer's
 * duration, else from the token rate; NONE when neither is known (or no PTS). */
static GstClockTime
gst_cony_transformer_token_time (GstConyTransformer *self, GstClockTime pts, GstClockTime dur,
    guint64 i, guint64 k)
{
  if (!GST_CLOCK_TIME_IS_VALID (pts))
    return GST_CLOCK_TIME_NONE;
  if (GST_CLOCK_TIME_IS_VALID (dur))
    return gst_cony_time_add (pts, gst_util_uint64_scale (dur, i, k));
  if (self->info.rate_n > 0)
    return gst_cony_tokens_time (pts, i, self->info.rate_n, self->info.rate_d);
  return GST_CLOCK_TIME_NONE;
}

/* Results a buffer may carry, in bytes: every step's meta, custom meta and (when posted)
 * bus message stay until the buffer (or the message) is freed, so a buffer of many steps
 * of a many-class model held hundreds of MB (#46.2: 81,920 tokens, 272 MB; 100 steps of
 * 100,000 classes, 556 MB with messages). */
#define MAX_BUFFER_RESULT_BYTES ((gsize) 64 << 20)

/* Upper bound of the bytes one step's results hold (6.0 KiB measured for 4 classes, with
 * messages: /results/buffer-memory-bound): the meta copies the scores (4 bytes a
 * class), the custom meta and the message hold them as GValue arrays (24 bytes a value,
 * up to twice that as the arrays grow), the top-k as three such arrays. */
static gsize
gst_cony_transformer_step_result_bytes (guint n_classes, guint n_top, gboolean post)
{
  gsize meta = 3584 + (gsize) n_classes * (4 + 48) + (gsize) n_top * (3 * 48 + 8);
  gsize message = 3584 + (gsize) n_classes * 48 + (gsize) n_top * 3 * 48;
  return meta + (post ? message : 0);
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
  guint top_k;
  GstConySegmentRule hold;

  if (!gst_cony_element_check_caps_seen (GST_ELEMENT (self), self->have_info))
    return GST_FLOW_NOT_NEGOTIATED;
  GST_OBJECT_LOCK (self);
  post = self->post_messages;
  mode = self->message_mode;
  threshold = self->threshold;
  top_k = self->top_k;
  hold = self->hold;
  GST_OBJECT_UNLOCK (self);

  if (GST_BUFFER_IS_DISCONT (buf) && cony_encoder_steps (self->encoder) > 0) {
    GST_DEBUG_OBJECT (self, "discontinuity at %" GST_TIME_FORMAT ": resetting the state",
        GST_TIME_ARGS (GST_BUFFER_PTS (buf)));
    gst_cony_transformer_reset_stream (self);
  }

  /* Read the tokens in place: a mapped buffer still takes metas (transform_ip has it
   * writable), so each step's meta is added while the data stays mapped. */
  gsize step_bytes = token_bytes * self->k;
  gchar *unit = self->k == 1
      ? g_strdup_printf ("%u-float tokens", self->d_in)
      : g_strdup_printf ("steps of %u %u-float tokens (the model's tokens_per_step)", self->k,
          self->d_in);
  gboolean mapped = gst_cony_element_map_units (GST_ELEMENT (self), buf, &map, step_bytes, unit,
      self->k == 1 ? NULL : "Buffer does not hold whole model steps");
  g_free (unit);
  if (!mapped)
    return GST_FLOW_ERROR;
  gsize k = map.size / token_bytes, per = self->k;
  const gfloat *tokens = (const gfloat *) map.data;
  gsize step_result = gst_cony_transformer_step_result_bytes (self->n_classes,
      MIN (top_k, self->n_classes), post);
  gsize max_steps = MAX (MAX_BUFFER_RESULT_BYTES / step_result, 1);
  if (k / per > max_steps) {
    GST_ELEMENT_ERROR (self, STREAM, FORMAT,
        ("A buffer of %" G_GSIZE_FORMAT " steps is more than the %" G_GSIZE_FORMAT
         " whose results fit in %" G_GSIZE_FORMAT " MiB: send at most %" G_GSIZE_FORMAT
         " tokens per buffer",
            k / per, max_steps, MAX_BUFFER_RESULT_BYTES >> 20, max_steps * per),
        ("%u classes, top-k %u, post-messages %d: up to %" G_GSIZE_FORMAT
         " bytes of meta and messages a step; the buffer at %" GST_TIME_FORMAT
         " has %" G_GSIZE_FORMAT " tokens",
            self->n_classes, top_k, post, step_result, GST_TIME_ARGS (GST_BUFFER_PTS (buf)), k));
    gst_buffer_unmap (buf, &map);
    return GST_FLOW_ERROR;
  }

  GstClockTime pts = GST_BUFFER_PTS (buf), dur = GST_BUFFER_DURATION (buf);
  gint64 lookahead = gst_cony_tokens_lookahead_ns (&self->info);
  const GstConyLevelMeta *level = gst_buffer_get_cony_level_meta (buf);
  GPtrArray *messages = NULL;
  guint bad = 0, overflow = 0;
  guint64 overflow_step = 0;
  GstClockTime overflow_pts = GST_CLOCK_TIME_NONE;
  /* One step per `per` consecutive tokens (per = 1 for most models). */
  for (gsize i = 0; i < k; i += per) {
    const gfloat *token = tokens + i * self->d_in;
    /* Without a duration or a rate, the tokens all get the buffer's PTS. */
    GstClockTime t0 = gst_cony_transformer_token_time (self, pts, dur, i, k);
    GstClockTime t1 = gst_cony_transformer_token_time (self, pts, dur, i + per, k);
    if (!GST_CLOCK_TIME_IS_VALID (t0))
      t0 = pts;

    if (gst_cony_transformer_step_gated (level, i, per)) {
      GstConyTransformerStep st = { .step = self->n_steps++,
        .pts = t0,
        .tile_end = t1,
        .start = t0,
        .end = gst_cony_transformer_input_end (self, t0, t1, lookahead) };
      guint n_events = gst_cony_transformer_gated_step (self, &st, threshold, &hold);
      gst_cony_transformer_attach_result (self, buf, &st, 0, 0, n_events);
      self->have_last = TRUE;
      self->last = st;
      if (post)
        gst_cony_transformer_step_messages (self, &st, 0, 0, n_events, mode, threshold, &messages);
      continue;
    }
    if (!gst_cony_transformer_all_finite (token, self->d_in * per)) {
      bad += per;
      continue;
    }

    guint64 step = cony_encoder_steps (self->encoder);
    guint64 first = step * per; /* index of the step's first token since the reset */
    for (gsize j = 0; j < per; j++) {
      GstClockTime tj = j > 0 ? gst_cony_transformer_token_time (self, pts, dur, i + j, k) : t0;
      self->starts[(first + j) % self->window] = GST_CLOCK_TIME_IS_VALID (tj) ? tj : t0;
    }
    if (!cony_encoder_step (self->encoder, token, self->logits)) {
      if (overflow++ == 0) {
        overflow_step = step;
        overflow_pts = t0;
      }
      gst_cony_transformer_reset_after_overflow (self);
      continue;
    }
    guint fill = (guint) cony_encoder_window_fill (self->encoder);
    gint top = gst_cony_transformer_compute_scores (self);
    guint n_top = gst_cony_transformer_select_top (self, top_k);
    GstConyTransformerStep st = {
      .step = self->n_steps++,
      .pts = t0,
      .tile_end = t1,
      .start = self->starts[(first + per - fill) % self->window],
      .end = gst_cony_transformer_input_end (self, t0, t1, lookahead),
      .fill = (gdouble) fill / self->window,
    };
    guint n_events = gst_cony_transformer_update_segments (self, &st, top, threshold, &hold);
    gst_cony_transformer_attach_result (self, buf, &st, top, n_top, n_events);
    GST_LOG_OBJECT (self, "step %" G_GUINT64_FORMAT " at %" GST_TIME_FORMAT ": %s (%.3f)", step,
        GST_TIME_ARGS (t0), self->labels[top], self->probs[top]);

    self->have_last = TRUE;
    self->last = st;
    if (post)
      gst_cony_transformer_step_messages (self, &st, top, n_top, n_events, mode, threshold,
          &messages);
  }
  gst_buffer_unmap (buf, &map);

  if (gst_cony_element_run_starts (&self->in_nonfinite, bad > 0))
    GST_ELEMENT_WARNING (self, STREAM, FORMAT, ("Input tokens contain NaN or infinite values"),
        ("%u of %" G_GSIZE_FORMAT " tokens in the buffer at %" GST_TIME_FORMAT
         " were not classified (the model state is kept)",
            bad, k, GST_TIME_ARGS (pts)));
  if (gst_cony_element_run_starts (&self->in_overflow, overflow > 0))
    GST_ELEMENT_WARNING (self, STREAM, FAILED,
        ("Step %" G_GUINT64_FORMAT " gave non-finite logits: no result for it, the continual "
         "state was reset",
            overflow_step),
        ("%u step(s) of the buffer at %" GST_TIME_FORMAT " (first at %" GST_TIME_FORMAT ") "
         "overflowed float (tokens too large for the model) and were not published",
            overflow, GST_TIME_ARGS (pts), GST_TIME_ARGS (overflow_pts)));

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

  if (!gst_cony_element_property_settable (object, pspec))
    return;

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      g_free (self->model_path);
      self->model_path = g_value_dup_string (value);
      break;
    case PROP_ATTENTION: self->attention = g_value_get_enum (value); break;
    case PROP_LABELS_FILE:
      g_free (self->labels_file);
      self->labels_file = g_value_dup_string (value);
      break;
    case PROP_POST_MESSAGES: self->post_messages = g_value_get_boolean (value); break;
    case PROP_MESSAGE_MODE: self->message_mode = g_value_get_enum (value); break;
    case PROP_THRESHOLD: self->threshold = g_value_get_double (value); break;
    case PROP_TOP_K: self->top_k = g_value_get_uint (value); break;
    case PROP_MIN_STEPS: self->hold.min_steps = g_value_get_uint (value); break;
    case PROP_MIN_DURATION: self->hold.min_duration = g_value_get_uint64 (value); break;
    case PROP_HYSTERESIS: self->hold.hysteresis = g_value_get_double (value); break;
    case PROP_LISTEN:
      g_free (self->listen);
      self->listen = g_value_dup_string (value);
      break;
    case PROP_IGNORE:
      g_free (self->ignore);
      self->ignore = g_value_dup_string (value);
      break;
    case PROP_GROUPS_FILE:
      g_free (self->groups_file);
      self->groups_file = g_value_dup_string (value);
      break;
    case PROP_OTHER_LABEL:
      g_free (self->other_label);
      self->other_label = g_value_dup_string (value);
      break;
    case PROP_GROUP_SCORE: self->group_score = g_value_get_enum (value); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_transformer_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  GstConyTransformer *self = GST_CONY_TRANSFORMER (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL: g_value_set_string (value, self->model_path); break;
    case PROP_ATTENTION: g_value_set_enum (value, self->attention); break;
    case PROP_LABELS_FILE: g_value_set_string (value, self->labels_file); break;
    case PROP_POST_MESSAGES: g_value_set_boolean (value, self->post_messages); break;
    case PROP_MESSAGE_MODE: g_value_set_enum (value, self->message_mode); break;
    case PROP_THRESHOLD: g_value_set_double (value, self->threshold); break;
    case PROP_TOP_K: g_value_set_uint (value, self->top_k); break;
    case PROP_MIN_STEPS: g_value_set_uint (value, self->hold.min_steps); break;
    case PROP_MIN_DURATION: g_value_set_uint64 (value, self->hold.min_duration); break;
    case PROP_HYSTERESIS: g_value_set_double (value, self->hold.hysteresis); break;
    case PROP_LISTEN: g_value_set_string (value, self->listen); break;
    case PROP_IGNORE: g_value_set_string (value, self->ignore); break;
    case PROP_GROUPS_FILE: g_value_set_string (value, self->groups_file); break;
    case PROP_OTHER_LABEL: g_value_set_string (value, self->other_label); break;
    case PROP_GROUP_SCORE: g_value_set_enum (value, self->group_score); break;
    case PROP_LABELS:
      if (self->labels == NULL) {
        /* not loaded yet: read them from the files, outside the lock */
        gchar *model = g_strdup (self->model_path), *file = g_strdup (self->labels_file);
        GstConyTransformerListen l;
        gst_cony_transformer_listen_copy (self, &l);
        GST_OBJECT_UNLOCK (self);
        g_value_take_boxed (value, gst_cony_transformer_peek_labels (model, file, &l));
        gst_cony_transformer_listen_clear (&l);
        g_free (model);
        g_free (file);
        return;
      }
      g_value_set_boxed (value, self->labels);
      break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec); break;
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
  g_free (self->listen);
  g_free (self->ignore);
  g_free (self->groups_file);
  g_free (self->other_label);
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
   * A relative name not found here is looked up in $CONY_MODEL_PATH and the
   * installed models (e.g. audio/transformer.safetensors). Loaded on READY->PAUSED. Like #GstConyTransformer:attention and
   * #GstConyTransformer:labels-file, it can only be changed in NULL or READY:
   * a change in PAUSED or PLAYING is refused (a GST_WARNING in the debug log)
   * and the value in use stays.
   */
  g_object_class_install_property (gobject_class, PROP_MODEL,
      g_param_spec_string ("model", "Model",
          "Path of the cony-encoder-classifier safetensors model file; a relative name is also "
          "looked up in $CONY_MODEL_PATH and DATADIR/gst-cony/models",
          DEFAULT_MODEL, ready));
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
   * equal the model's number of classes, or the state change fails. A line
   * may give its label's threshold after a tab (`dog<TAB>0.7`), as DL
   * Streamer's model-proc does per label; see #GstConyTransformer:threshold.
   */
  g_object_class_install_property (gobject_class, PROP_LABELS_FILE,
      g_param_spec_string ("labels-file", "Labels file",
          "Text file with one label per line, optionally label<TAB>threshold (default: the "
          "labels in the model)",
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
   * `every-step` (default): a message per step; `on-change`: a message per
   * segment event (softmax: the top label changes; sigmoid: a label's onset
   * or offset), with segment running times.
   */
  g_object_class_install_property (gobject_class, PROP_MESSAGE_MODE,
      g_param_spec_enum ("message-mode", "Message mode",
          "When to post messages: every step, or at segment events (label changes, onsets, "
          "offsets)",
          GST_TYPE_CONY_TRANSFORMER_MESSAGE_MODE, DEFAULT_MESSAGE_MODE, playing));
  /**
   * GstConyTransformer:threshold:
   *
   * The threshold (0..1) of every label the labels file gives none: a step
   * is posted (every-step) when its top class reaches its threshold (sigmoid
   * models: when any class reaches its own), and a label's segment counts
   * the steps at or above it. 0 (the default) means 0.5 for sigmoid models.
   * Metas are attached to every step regardless.
   */
  g_object_class_install_property (gobject_class, PROP_THRESHOLD,
      g_param_spec_double ("threshold", "Threshold",
          "Threshold of labels without one in the labels file (0: 0.5 for sigmoid models)", 0.0,
          1.0, DEFAULT_THRESHOLD, playing));
  /**
   * GstConyTransformer:top-k:
   *
   * How many of the best classes, with their labels and scores, every meta
   * and message carries (the meta's top_ids/top_labels, the `top` field of the
   * custom meta, the messages and JSON); at most the number of classes.
   */
  g_object_class_install_property (gobject_class, PROP_TOP_K,
      g_param_spec_uint ("top-k", "Top k",
          "Number of best classes (labels and scores) in every meta and message", 1, MAX_TOP_K,
          DEFAULT_TOP_K, playing));
  /**
   * GstConyTransformer:min-steps:
   *
   * Steadier segments: a new top label (softmax) or a label's onset or offset
   * (sigmoid) is reported only once it has held for this many consecutive
   * counted steps (and #GstConyTransformer:min-duration); a shorter run is
   * flicker and stays in the segment around it. The change is reported at the
   * step that completes the hold, with the segment starting at the run's first
   * step. 1 (default): at once.
   */
  g_object_class_install_property (gobject_class, PROP_MIN_STEPS,
      g_param_spec_uint ("min-steps", "Minimum steps",
          "Steps a new label (or an onset/offset) must hold before it is reported (1: at once)", 1,
          G_MAXUINT, DEFAULT_MIN_STEPS, playing));
  /**
   * GstConyTransformer:min-duration:
   *
   * As #GstConyTransformer:min-steps, in time: a change is reported once the
   * new run spans at least this many nanoseconds, from the PTS of its first step
   * to the end of the current step's tokens (0.25 s steps: 1000000000 = 4
   * steps). Both conditions must hold. 0 (default): no time condition; a run
   * without timestamps never reaches a nonzero duration.
   */
  g_object_class_install_property (gobject_class, PROP_MIN_DURATION,
      g_param_spec_uint64 ("min-duration", "Minimum duration",
          "Nanoseconds a new label (or an onset/offset) must hold before it is reported "
          "(0: no time condition)",
          0, G_MAXUINT64, DEFAULT_MIN_DURATION, playing));
  /**
   * GstConyTransformer:hysteresis:
   *
   * Sigmoid (multi-label) models: a label's segment opens when its score
   * reaches its threshold and closes only when the score falls below its
   * threshold minus this, so a score wavering around the threshold does not
   * toggle it. 0 (default): one threshold. Softmax models ignore it (their
   * segment follows the top label; see #GstConyTransformer:min-steps).
   */
  g_object_class_install_property (gobject_class, PROP_HYSTERESIS,
      g_param_spec_double ("hysteresis", "Hysteresis",
          "Sigmoid models: an open label closes below its threshold minus this (0: one threshold)",
          0.0, 1.0, DEFAULT_HYSTERESIS, playing));
  /**
   * GstConyTransformer:labels:
   *
   * The class labels in class order (the model's, or those of
   * #GstConyTransformer:labels-file, without their thresholds; with
   * #GstConyTransformer:listen, #GstConyTransformer:ignore or
   * #GstConyTransformer:groups-file, the reported labels). Before the
   * model is loaded they are read from the files as set; NULL when neither
   * can be read.
   */
  g_object_class_install_property (gobject_class, PROP_LABELS,
      g_param_spec_boxed ("labels", "Labels",
          "Class labels in class order (from the model, or the labels file)", G_TYPE_STRV,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
  /**
   * GstConyTransformer:listen:
   *
   * The labels that may be reported, separated by ';' (AudioSet's labels hold commas):
   * group names of #GstConyTransformer:groups-file or model labels, reported in this
   * order. Every other class (not ignored) is folded into #GstConyTransformer:other-label.
   * Class ids, scores, top-k, thresholds, segments, messages and JSON records then follow
   * the reported labels (the #GstConyTransformer:labels property lists them). Empty (the
   * default): the groups when there is a groups file, else every class not ignored. A
   * label the model and the groups file do not have fails the state change, naming it.
   */
  g_object_class_install_property (gobject_class, PROP_LISTEN,
      g_param_spec_string ("listen", "Listen",
          "Labels (groups or model labels) that may be reported, ';'-separated; the rest is "
          "folded into other-label (default: all)",
          DEFAULT_LISTEN, ready));
  /**
   * GstConyTransformer:ignore:
   *
   * Labels never reported, separated by ';': model labels, or groups (all their members);
   * their scores count nowhere (not in other, not in a group).
   */
  g_object_class_install_property (gobject_class, PROP_IGNORE,
      g_param_spec_string ("ignore", "Ignore",
          "Labels (model labels or groups) never reported nor folded into others, ';'-separated",
          DEFAULT_IGNORE, ready));
  /**
   * GstConyTransformer:groups-file:
   *
   * A file of label groups, one a line: `smoke_alarm = Smoke detector, smoke alarm; Fire
   * alarm; Beep, bleep` (';' separates model labels, '#' starts a comment, blank lines are
   * ignored, an optional `| 0.3` at the end gives the group's threshold). A group is
   * reported as one label whose score is its members' highest (see
   * #GstConyTransformer:group-score). A model label the model does not have fails the state
   * change, naming the line and the label. Shipped: models/audioset/home.groups,
   * models/imagenet/home.groups.
   */
  g_object_class_install_property (gobject_class, PROP_GROUPS_FILE,
      g_param_spec_string ("groups-file", "Groups file",
          "File of label groups, 'name = model label; model label; ...' a line",
          DEFAULT_GROUPS_FILE, ready));
  /**
   * GstConyTransformer:other-label:
   *
   * The label of the classes neither listened to nor ignored (its score: their highest,
   * or their sum, as a group's); the last reported class. Empty: they are dropped.
   */
  g_object_class_install_property (gobject_class, PROP_OTHER_LABEL,
      g_param_spec_string ("other-label", "Other label",
          "Label of the classes not listened to (empty: drop them)", DEFAULT_OTHER_LABEL, ready));
  /**
   * GstConyTransformer:group-score:
   *
   * A group's (and other's) score: `max` (default), the highest member's, which keeps a
   * sigmoid model's scores comparable with its labels' thresholds; `sum`, the members' sum
   * capped at 1 (for softmax models, the probability of the group).
   */
  g_object_class_install_property (gobject_class, PROP_GROUP_SCORE,
      g_param_spec_enum ("group-score", "Group score",
          "Score of a group from its members': max or sum (capped at 1)",
          GST_TYPE_CONY_TRANSFORMER_GROUP_SCORE, DEFAULT_GROUP_SCORE, ready));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "Continual transformer classifier",
      "Filter/Analyzer",
      "Classifies every token with a continual (Nystrom) transformer and attaches the result "
      "as metadata and bus messages",
      "gst-cony authors");

  trans_class->start = GST_DEBUG_FUNCPTR (gst_cony_transformer_start);
  trans_class->stop = GST_DEBUG_FUNCPTR (gst_cony_transformer_stop);
  trans_class->set_caps = GST_DEBUG_FUNCPTR (gst_cony_transformer_set_caps);
  trans_class->query = GST_DEBUG_FUNCPTR (gst_cony_transformer_query);
  trans_class->sink_event = GST_DEBUG_FUNCPTR (gst_cony_transformer_sink_event);
  trans_class->transform_ip = GST_DEBUG_FUNCPTR (gst_cony_transformer_transform_ip);
  /* The buffers pass through; metas are added, so they must be writable. */
  trans_class->passthrough_on_same_caps = FALSE;
  trans_class->transform_ip_on_passthrough = FALSE;

  gst_cony_classification_meta_get_info ();
  gst_cony_classification_custom_meta_register ();
  gst_type_mark_as_plugin_api (GST_TYPE_CONY_TRANSFORMER_ATTENTION, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_CONY_TRANSFORMER_MESSAGE_MODE, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_CONY_TRANSFORMER_GROUP_SCORE, 0);
}

static void
gst_cony_transformer_init (GstConyTransformer *self)
{
  self->attention = DEFAULT_ATTENTION;
  self->post_messages = DEFAULT_POST_MESSAGES;
  self->message_mode = DEFAULT_MESSAGE_MODE;
  self->threshold = DEFAULT_THRESHOLD;
  self->top_k = DEFAULT_TOP_K;
  self->hold = (GstConySegmentRule){ DEFAULT_MIN_STEPS, DEFAULT_MIN_DURATION, DEFAULT_HYSTERESIS };
  self->other_label = g_strdup (DEFAULT_OTHER_LABEL);
  self->group_score = DEFAULT_GROUP_SCORE;
  gst_cony_segment_track_reset (&self->seg, -1);
  gst_base_transform_set_in_place (GST_BASE_TRANSFORM (self), TRUE);
  gst_base_transform_set_passthrough (GST_BASE_TRANSFORM (self), FALSE);
}
