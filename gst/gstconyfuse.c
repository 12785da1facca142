/* conyfuse: time-aligns several token streams into the fused tokens of one model.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * SECTION:element-conyfuse
 * @title: conyfuse
 * @short_description: aligns audio and video tokens into one continual model's steps
 *
 * conyfuse joins token streams (`other/tensors` from conyvggish, conyframeembed or
 * NNStreamer, gstconytokens.h) on running time into the fused tokens of a fused model
 * (docs/model-format.md, "Fused models"), which conytransformer with the same model file
 * then classifies: one continual encoder over both senses.
 *
 * Each input of the model is a request pad `sink_<name>` (e.g. `sink_audio`,
 * `sink_video`). Steps come at the model's fusion rate, on a step counter: step s has
 * PTS t0 + s / rate (running time; t0 = the first token's), exact in nanoseconds. At
 * step time t every input contributes its newest token at or before t; an input whose
 * newest token is older than its tolerance (the model's `tolerance_ms`), that has had a
 * GAP since, that has not started, that has ended (EOS) or that has no pad contributes
 * its learned absent token and a 0 flag instead, so an unplugged camera or a muted
 * microphone degrades the result instead of stopping the stream. The stream ends when
 * every pad is at EOS and the steps have passed the last token.
 *
 * Live sources: conyfuse is a #GstAggregator, so with live inputs a step is produced once
 * every input has a token after its time or, at the latest, when the clock passes the
 * step's time plus the latency (upstream's plus the #GstAggregator:latency property):
 * inputs that have not delivered by then are absent for that step. The LATENCY query is
 * answered by #GstAggregator (upstream's maximum + #GstAggregator:latency); conyfuse adds
 * no delay of its own. Without live inputs the steps wait for data on every pad.
 *
 * Flushing seeks and FLUSH_STOP forget the tokens and restart the step counter (the next
 * step is step 0, marked DISCONT). A caps change that alters an input's token rate
 * forgets that input's newest token; the steps go on and the output caps follow. A token
 * older than one already taken on its pad (timestamps going backwards) is dropped.
 *
 * The output is one fused token per buffer (d_in floats of the model: each input's token
 * or absent token, then one flag per input), `framerate` = the fusion rate, and a
 * `lookahead` that makes a step's time span cover the newest input tokens that may be in
 * it (the longest input token, its duration and lookahead, past the step's end), so
 * conytransformer's `window_start`..`window_end` cover both senses.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 filesrc location=clip.mp4 ! decodebin name=d \
 *   conyfuse name=f model=av.safetensors ! conytransformer model=av.safetensors ! fakesink \
 *   d. ! queue ! audioconvert ! audioresample ! conymel preset=yamnet \
 *      ! conyvggish model=models/yamnet/yamnet.safetensors output=embedding ! f.sink_audio \
 *   d. ! queue ! videoconvert ! videorate ! video/x-raw,framerate=10/1 \
 *      ! conyframeembed model=models/imagenet/mobilenet_v2.safetensors output=embedding ! f.sink_video
 * ]| (pipelines/av_file.sh runs this and prints the fused label per step.)
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstconyfuse.h"
#include "gstconyelement.h"

#include <string.h>

GST_DEBUG_CATEGORY_STATIC (gst_cony_fuse_debug);
#define GST_CAT_DEFAULT gst_cony_fuse_debug

enum
{
  PROP_0,
  PROP_MODEL,
};

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src", GST_PAD_SRC,
    GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_CONY_TOKENS_CAPS_STRING));
static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink_%s", GST_PAD_SINK,
    GST_PAD_REQUEST, GST_STATIC_CAPS (GST_CONY_TOKENS_CAPS_STRING));

/* ------------------------------------------------------------------ the pad */

G_DEFINE_TYPE (GstConyFusePad, gst_cony_fuse_pad, GST_TYPE_AGGREGATOR_PAD);

static void
gst_cony_fuse_pad_forget (GstConyFusePad *pad)
{
  pad->head_index = 0;
  pad->have_newest = FALSE;
  pad->newest_rt = GST_CLOCK_TIME_NONE;
  pad->last_rt = GST_CLOCK_TIME_NONE;
}

static GstFlowReturn
gst_cony_fuse_pad_flush (GstAggregatorPad *aggpad, GstAggregator *agg)
{
  (void) agg;
  gst_cony_fuse_pad_forget (GST_CONY_FUSE_PAD (aggpad));
  return GST_FLOW_OK;
}

static void
gst_cony_fuse_pad_finalize (GObject *object)
{
  g_free (GST_CONY_FUSE_PAD (object)->newest);
  G_OBJECT_CLASS (gst_cony_fuse_pad_parent_class)->finalize (object);
}

static void
gst_cony_fuse_pad_class_init (GstConyFusePadClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = gst_cony_fuse_pad_finalize;
  GST_AGGREGATOR_PAD_CLASS (klass)->flush = gst_cony_fuse_pad_flush;
}

static void
gst_cony_fuse_pad_init (GstConyFusePad *pad)
{
  pad->input = -1;
  gst_cony_fuse_pad_forget (pad);
}

/* ------------------------------------------------------------------ the element */

G_DEFINE_TYPE (GstConyFuse, gst_cony_fuse, GST_TYPE_AGGREGATOR);
GST_ELEMENT_REGISTER_DEFINE (conyfuse, "conyfuse", GST_RANK_NONE, GST_TYPE_CONY_FUSE);

/* The input name of a pad called sink_<name>. */
static const gchar *
gst_cony_fuse_input_name (GstPad *pad)
{
  return GST_OBJECT_NAME (pad) + strlen ("sink_");
}

/* Running time of step @s. */
static GstClockTime
gst_cony_fuse_step_time (GstConyFuse *self, guint64 s)
{
  return gst_cony_tokens_time (self->t0, s, self->fusion->rate_n, self->fusion->rate_d);
}

static void
gst_cony_fuse_reset (GstConyFuse *self)
{
  self->t0 = GST_CLOCK_TIME_NONE;
  self->step = 0;
  self->discont = TRUE;
}

/* The sink pads, each with a reference (g_list_free_full (l, gst_object_unref)): the
 * loops over them call what must not run under the object lock (posting errors, pad
 * locks). */
static gpointer
gst_cony_fuse_ref (gconstpointer object, gpointer unused)
{
  (void) unused;
  return gst_object_ref ((gpointer) object);
}

static GList *
gst_cony_fuse_pads (GstConyFuse *self)
{
  GST_OBJECT_LOCK (self);
  GList *pads = g_list_copy_deep (GST_ELEMENT (self)->sinkpads, gst_cony_fuse_ref, NULL);
  GST_OBJECT_UNLOCK (self);
  return pads;
}

/* Tokens in @buf for @pad (0 when it does not hold whole tokens). */
static guint
gst_cony_fuse_buffer_tokens (GstConyFusePad *pad, GstBuffer *buf, gsize size)
{
  gsize bytes = gst_buffer_get_size (buf), token = size * sizeof (gfloat);
  return bytes % token == 0 ? (guint) (bytes / token) : 0;
}

/* Running time of token @j of the @k in @buf on @pad; NONE when it has none. */
static GstClockTime
gst_cony_fuse_token_rt (GstConyFusePad *pad, GstBuffer *buf, guint j, guint k)
{
  GstClockTime pts = GST_BUFFER_PTS (buf), dur = GST_BUFFER_DURATION (buf);
  if (!GST_CLOCK_TIME_IS_VALID (pts))
    return GST_CLOCK_TIME_NONE;
  if (j > 0 && GST_CLOCK_TIME_IS_VALID (dur))
    pts += gst_util_uint64_scale (dur, j, k);
  else if (j > 0 && pad->info.rate_n > 0)
    pts = gst_cony_tokens_time (pts, j, pad->info.rate_n, pad->info.rate_d);
  return gst_segment_to_running_time (&GST_AGGREGATOR_PAD (pad)->segment, GST_FORMAT_TIME, pts);
}

/* Running time of @pad's next queued token or gap (*@gap), NONE when nothing is queued. A
 * gap without a time counts as now (0). */
static GstClockTime
gst_cony_fuse_pad_next (GstConyFuse *self, GstConyFusePad *pad, gboolean *gap)
{
  GstBuffer *buf = gst_aggregator_pad_peek_buffer (GST_AGGREGATOR_PAD (pad));
  GstClockTime rt = GST_CLOCK_TIME_NONE;
  *gap = FALSE;
  if (!buf)
    return GST_CLOCK_TIME_NONE;
  if (GST_BUFFER_FLAG_IS_SET (buf, GST_BUFFER_FLAG_GAP)) {
    *gap = TRUE;
    rt = gst_cony_fuse_token_rt (pad, buf, 0, 1);
    rt = GST_CLOCK_TIME_IS_VALID (rt) ? rt : 0;
  } else {
    guint k = gst_cony_fuse_buffer_tokens (pad, buf, self->fusion->inputs[pad->input].size);
    rt = k ? gst_cony_fuse_token_rt (pad, buf, pad->head_index, k) : 0;
  }
  gst_buffer_unref (buf);
  return rt;
}

/* Takes @pad's queued tokens at or before @t (the newest is kept); a gap forgets the
 * newest. FALSE (error posted) on a buffer that is not whole tokens. */
static gboolean
gst_cony_fuse_pad_take (GstConyFuse *self, GstConyFusePad *pad, GstClockTime t)
{
  GstAggregatorPad *aggpad = GST_AGGREGATOR_PAD (pad);
  gsize size = self->fusion->inputs[pad->input].size;
  GstBuffer *buf;
  while ((buf = gst_aggregator_pad_peek_buffer (aggpad))) {
    gboolean gap = GST_BUFFER_FLAG_IS_SET (buf, GST_BUFFER_FLAG_GAP);
    guint k = gap ? 1 : gst_cony_fuse_buffer_tokens (pad, buf, size);
    if (k == 0) {
      GST_ELEMENT_ERROR (self, STREAM, FORMAT, ("Buffer does not hold whole tokens"),
          ("%s: %" G_GSIZE_FORMAT " bytes, tokens of %" G_GSIZE_FORMAT " floats",
              GST_PAD_NAME (pad), gst_buffer_get_size (buf), size));
      gst_buffer_unref (buf);
      return FALSE;
    }
    GstClockTime rt = gst_cony_fuse_token_rt (pad, buf, pad->head_index, k);
    if (gap && !GST_CLOCK_TIME_IS_VALID (rt))
      rt = 0;
    if (GST_CLOCK_TIME_IS_VALID (rt) && rt > t) {
      gst_buffer_unref (buf);
      break;
    }
    if (gap) {
      GST_DEBUG_OBJECT (pad, "gap at %" GST_TIME_FORMAT ": absent", GST_TIME_ARGS (rt));
      pad->have_newest = FALSE;
    } else if (GST_CLOCK_TIME_IS_VALID (rt) && GST_CLOCK_TIME_IS_VALID (pad->last_rt)
        && rt < pad->last_rt) {
      /* timestamps went backwards: the newest token stays the one taken */
      GST_DEBUG_OBJECT (pad,
          "dropping a token at %" GST_TIME_FORMAT ", older than %" GST_TIME_FORMAT,
          GST_TIME_ARGS (rt), GST_TIME_ARGS (pad->last_rt));
    } else if (GST_CLOCK_TIME_IS_VALID (rt)) {
      gst_buffer_extract (buf, (gsize) pad->head_index * size * sizeof (gfloat), pad->newest,
          size * sizeof (gfloat));
      pad->have_newest = TRUE;
      pad->newest_rt = pad->last_rt = rt;
    } else {
      GST_DEBUG_OBJECT (pad,
          "dropping a token without a running time (no PTS, or outside "
          "the segment)");
    }
    gst_buffer_unref (buf);
    if (++pad->head_index >= k) {
      pad->head_index = 0;
      gst_aggregator_pad_drop_buffer (aggpad);
    }
  }
  return TRUE;
}

/* The earliest running time of a token queued on any pad, or NONE. */
static GstClockTime
gst_cony_fuse_earliest_queued (GstConyFuse *self)
{
  GstClockTime earliest = GST_CLOCK_TIME_NONE;
  GList *pads = gst_cony_fuse_pads (self);
  for (GList *l = pads; l; l = l->next) {
    gboolean gap;
    GstClockTime rt = gst_cony_fuse_pad_next (self, l->data, &gap);
    if (GST_CLOCK_TIME_IS_VALID (rt) && !gap)
      earliest = GST_CLOCK_TIME_IS_VALID (earliest) ? MIN (earliest, rt) : rt;
  }
  g_list_free_full (pads, gst_object_unref);
  return earliest;
}

/* The caps of the fused tokens: the fusion rate, and a lookahead from the step's end to
 * the latest end its newest input tokens may have (their duration and lookahead, from
 * their caps, else from the model's rate). */
static GstCaps *
gst_cony_fuse_src_caps (GstConyFuse *self)
{
  const ConyFusion *f = self->fusion;
  gint64 period = (gint64) gst_cony_tokens_time (0, 1, f->rate_n, f->rate_d), reach = 0;
  GList *pads = gst_cony_fuse_pads (self);
  for (GList *l = pads; l; l = l->next) {
    GstConyFusePad *pad = l->data;
    if (pad->have_info && pad->info.rate_n > 0)
      reach = MAX (reach,
          (gint64) gst_cony_tokens_time (0, 1, pad->info.rate_n, pad->info.rate_d)
              + gst_cony_tokens_lookahead_ns (&pad->info));
  }
  g_list_free_full (pads, gst_object_unref);
  for (int i = 0; i < f->n_inputs; i++)
    reach = MAX (reach,
        (gint64) gst_cony_tokens_time (0, 1, f->inputs[i].rate_n, f->inputs[i].rate_d));
  gint64 ahead = CLAMP (reach - period, -(gint64) G_MAXINT, (gint64) G_MAXINT);
  GstConyTokenInfo info = {
    .dim = (guint) f->d_out,
    .tokens_per_buffer = 1,
    .rate_n = f->rate_n,
    .rate_d = f->rate_d,
    .lookahead_n = (gint) ahead,
    .lookahead_d = GST_SECOND,
  };
  gint g = gst_util_greatest_common_divisor (info.lookahead_n, info.lookahead_d);
  info.lookahead_n /= g;
  info.lookahead_d /= g;
  return gst_cony_tokens_caps_new (&info);
}

static GstFlowReturn
gst_cony_fuse_update_src_caps (GstAggregator *agg, GstCaps *caps, GstCaps **ret)
{
  GstConyFuse *self = GST_CONY_FUSE (agg);
  if (!self->fusion)
    return GST_AGGREGATOR_FLOW_NEED_DATA;
  GstCaps *ours = gst_cony_fuse_src_caps (self);
  *ret = gst_caps_intersect (ours, caps);
  gst_caps_unref (ours);
  return gst_caps_is_empty (*ret) ? GST_FLOW_NOT_NEGOTIATED : GST_FLOW_OK;
}

/* Step @t's fused token into self->fused: each input's newest token if fresh. */
static void
gst_cony_fuse_join (GstConyFuse *self, GstClockTime t)
{
  const ConyFusion *f = self->fusion;
  const gfloat *tokens[CONY_FUSION_MAX_INPUTS] = { NULL };
  GList *pads = gst_cony_fuse_pads (self);
  for (GList *l = pads; l; l = l->next) {
    GstConyFusePad *pad = l->data;
    if (pad->have_newest && t - pad->newest_rt <= f->inputs[pad->input].tolerance_ns)
      tokens[pad->input] = pad->newest;
  }
  cony_fusion_join (f, tokens, self->fused);
  g_list_free_full (pads, gst_object_unref);
}

/* Takes every pad's tokens up to @t. *@decided: every pad knows its newest token at @t
 * (a later token is queued, it is at EOS, or @timeout); *@all_eos: every pad has ended;
 * *@last: the latest token time taken on any pad. */
static gboolean
gst_cony_fuse_take_all (GstConyFuse *self, GstClockTime t, gboolean timeout, gboolean *decided,
    gboolean *all_eos, GstClockTime *last)
{
  gboolean ok = TRUE;
  *decided = *all_eos = TRUE;
  *last = GST_CLOCK_TIME_NONE;
  GList *pads = gst_cony_fuse_pads (self);
  for (GList *l = pads; ok && l; l = l->next) {
    GstConyFusePad *pad = l->data;
    gboolean gap;
    ok = gst_cony_fuse_pad_take (self, pad, t);
    gboolean eos = gst_aggregator_pad_is_eos (GST_AGGREGATOR_PAD (pad));
    gboolean later = GST_CLOCK_TIME_IS_VALID (gst_cony_fuse_pad_next (self, pad, &gap));
    *decided &= later || eos || timeout;
    *all_eos &= eos;
    if (GST_CLOCK_TIME_IS_VALID (pad->last_rt))
      *last = GST_CLOCK_TIME_IS_VALID (*last) ? MAX (*last, pad->last_rt) : pad->last_rt;
  }
  g_list_free_full (pads, gst_object_unref);
  return ok;
}

static GstFlowReturn
gst_cony_fuse_aggregate (GstAggregator *agg, gboolean timeout)
{
  GstConyFuse *self = GST_CONY_FUSE (agg);
  const ConyFusion *f = self->fusion;
  gboolean decided, all_eos;
  GstClockTime last;

  if (!self->caps_sent) { /* at the start, and after an input's caps changed */
    GstCaps *caps = gst_cony_fuse_src_caps (self);
    GstCaps *current = gst_pad_get_current_caps (agg->srcpad);
    if (!current || !gst_caps_is_equal (current, caps))
      gst_aggregator_set_src_caps (agg, caps);
    gst_clear_caps (&current);
    gst_caps_unref (caps);
    self->caps_sent = TRUE;
  }
  if (!GST_CLOCK_TIME_IS_VALID (self->t0)) {
    self->t0 = gst_cony_fuse_earliest_queued (self);
    if (!GST_CLOCK_TIME_IS_VALID (self->t0)) {
      if (!gst_cony_fuse_take_all (self, 0, FALSE, &decided, &all_eos, &last))
        return GST_FLOW_ERROR;
      return all_eos ? GST_FLOW_EOS : GST_AGGREGATOR_FLOW_NEED_DATA;
    }
    GST_DEBUG_OBJECT (self, "step 0 at running time %" GST_TIME_FORMAT, GST_TIME_ARGS (self->t0));
  }
  GstClockTime t = gst_cony_fuse_step_time (self, self->step);
  if (!gst_cony_fuse_take_all (self, t, timeout, &decided, &all_eos, &last))
    return GST_FLOW_ERROR;
  if (all_eos && (!GST_CLOCK_TIME_IS_VALID (last) || t > last))
    return GST_FLOW_EOS;
  if (!decided)
    return GST_AGGREGATOR_FLOW_NEED_DATA;

  gst_cony_fuse_join (self, t);
  GstClockTime next = gst_cony_fuse_step_time (self, self->step + 1);
  GstSegment *seg = &GST_AGGREGATOR_PAD (agg->srcpad)->segment;
  GstClockTime pts = gst_segment_position_from_running_time (seg, GST_FORMAT_TIME, t);
  GstBuffer *out = gst_buffer_new_memdup (self->fused, (gsize) f->d_out * sizeof (gfloat));
  gst_cony_element_stamp (out, pts, next - t, self->step, 1, &self->discont);
  GST_LOG_OBJECT (self, "step %" G_GUINT64_FORMAT " at %" GST_TIME_FORMAT "%s", self->step,
      GST_TIME_ARGS (t), timeout ? " (timeout)" : "");
  GST_OBJECT_LOCK (self);
  seg->position = GST_CLOCK_TIME_IS_VALID (pts) ? pts + (next - t) : seg->position;
  self->step++;
  GST_OBJECT_UNLOCK (self);
  return gst_aggregator_finish_buffer (agg, out);
}

static GstClockTime
gst_cony_fuse_get_next_time (GstAggregator *agg)
{
  GstConyFuse *self = GST_CONY_FUSE (agg);
  if (!self->fusion)
    return GST_CLOCK_TIME_NONE;
  if (!GST_CLOCK_TIME_IS_VALID (self->t0))
    return gst_cony_fuse_earliest_queued (self);
  return gst_cony_fuse_step_time (self, self->step);
}

static GstFlowReturn
gst_cony_fuse_flush (GstAggregator *agg)
{
  GstConyFuse *self = GST_CONY_FUSE (agg);
  GST_DEBUG_OBJECT (self, "flush: the next step is step 0");
  gst_cony_fuse_reset (self);
  return GST_FLOW_OK;
}

/* Checks a caps string field of the input against what the model recorded. */
static gboolean
gst_cony_fuse_field_matches (const gchar *got, const gchar *want, gboolean base_name)
{
  if (!got || !want)
    return TRUE;
  if (base_name) {
    g_autofree gchar *a = g_path_get_basename (got), *b = g_path_get_basename (want);
    return strcmp (a, b) == 0;
  }
  return g_ascii_strcasecmp (got, want) == 0;
}

static gboolean
gst_cony_fuse_pad_set_caps (GstConyFuse *self, GstConyFusePad *pad, GstCaps *caps)
{
  const ConyFusionInput *in = &self->fusion->inputs[pad->input];
  gchar *why = NULL;
  GstConyTokenInfo info;
  if (!gst_cony_tokens_info_from_caps (&info, caps, &why)) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Input is not a token stream"),
        ("%s: %s", GST_PAD_NAME (pad), why));
    g_free (why);
    return FALSE;
  }
  if ((gint) info.dim != in->size) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Token size does not match the model"),
        ("%s has %u floats per token; input '%s' of %s takes %d", GST_PAD_NAME (pad), info.dim,
            in->name, self->fusion->path, in->size));
    return FALSE;
  }
  const GstStructure *s = gst_caps_get_structure (caps, 0);
  const gchar *cnn = gst_structure_get_string (s, "cnn");
  const gchar *sha = gst_structure_get_string (s, "cnn-sha256");
  const gchar *output = gst_structure_get_string (s, "cnn-output");
  const gchar *mode = gst_structure_get_string (s, "cnn-mode");
  if (!gst_cony_fuse_field_matches (cnn, in->cnn.name, TRUE)
      || !gst_cony_fuse_field_matches (sha, in->cnn.sha256, FALSE)
      || !gst_cony_fuse_field_matches (output, in->cnn.output, FALSE)
      || !gst_cony_fuse_field_matches (mode, in->cnn.sha256 ? cony_cnn_ref_mode (&in->cnn) : NULL,
          FALSE)) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
        ("The tokens do not come from the CNN the model was trained on"),
        ("%s: the tokens come from %s (SHA-256 %s, output=%s, mode=%s); input '%s' of %s was "
         "trained on %s (SHA-256 %s, output=%s, mode=%s)",
            GST_PAD_NAME (pad), cnn ? cnn : "(not given)", sha ? sha : "(not given)",
            output ? output : "(not given)", mode ? mode : "(not given)", in->name,
            self->fusion->path, in->cnn.name ? in->cnn.name : "(not recorded)",
            in->cnn.sha256 ? in->cnn.sha256 : "(not recorded)",
            in->cnn.output ? in->cnn.output : "(not recorded)", cony_cnn_ref_mode (&in->cnn)));
    return FALSE;
  }
  if (info.rate_n > 0
      && gst_util_fraction_compare (info.rate_n, info.rate_d, in->rate_n, in->rate_d) != 0)
    GST_INFO_OBJECT (pad, "%d/%d tokens/s; the model was trained on %d/%d (aligned anyway)",
        info.rate_n, info.rate_d, in->rate_n, in->rate_d);
  if (pad->have_info && !gst_cony_tokens_info_same_tokens (&pad->info, &info))
    gst_cony_fuse_pad_forget (pad);
  pad->info = info;
  pad->have_info = TRUE;
  return TRUE;
}

static gboolean
gst_cony_fuse_sink_event (GstAggregator *agg, GstAggregatorPad *aggpad, GstEvent *event)
{
  GstConyFuse *self = GST_CONY_FUSE (agg);
  if (GST_EVENT_TYPE (event) == GST_EVENT_CAPS && self->fusion
      && GST_CONY_FUSE_PAD (aggpad)->input >= 0) {
    GstCaps *caps;
    gst_event_parse_caps (event, &caps);
    if (!gst_cony_fuse_pad_set_caps (self, GST_CONY_FUSE_PAD (aggpad), caps)) {
      gst_event_unref (event);
      return FALSE;
    }
    self->caps_sent = FALSE; /* the output's lookahead depends on the inputs' rates */
  }
  return GST_AGGREGATOR_CLASS (gst_cony_fuse_parent_class)->sink_event (agg, aggpad, event);
}

static gboolean gst_cony_fuse_tie_pad (GstConyFuse *self, GstConyFusePad *pad);

static GstAggregatorPad *
gst_cony_fuse_create_new_pad (GstAggregator *agg, GstPadTemplate *templ, const gchar *req_name,
    const GstCaps *caps)
{
  (void) caps;
  if (!req_name || !g_str_has_prefix (req_name, "sink_") || strchr (req_name, '%')
      || strlen (req_name) == strlen ("sink_")) {
    GST_WARNING_OBJECT (agg,
        "request pads by name: sink_<input>, the input as the model "
        "names it (e.g. sink_audio), not %s",
        req_name ? req_name : "(no name)");
    return NULL;
  }
  GstConyFusePad *pad = g_object_new (GST_TYPE_CONY_FUSE_PAD, "name", req_name, "direction",
      GST_PAD_SINK, "template", templ, NULL);
  /* requested while running: its input now (the others are tied on start) */
  GstConyFuse *self = GST_CONY_FUSE (agg);
  if (self->fusion && !gst_cony_fuse_tie_pad (self, pad)) {
    gst_object_unref (gst_object_ref_sink (pad));
    return NULL;
  }
  return GST_AGGREGATOR_PAD (pad);
}

static gboolean
gst_cony_fuse_stop (GstAggregator *agg)
{
  GstConyFuse *self = GST_CONY_FUSE (agg);
  GST_OBJECT_LOCK (self);
  g_clear_pointer (&self->fusion, cony_fusion_free);
  GST_OBJECT_UNLOCK (self);
  g_clear_pointer (&self->fused, g_free);
  return TRUE;
}

/* Ties @pad to its input of the loaded model; FALSE (error posted) when it is none. */
static gboolean
gst_cony_fuse_tie_pad (GstConyFuse *self, GstConyFusePad *pad)
{
  const ConyFusion *f = self->fusion;
  pad->input = cony_fusion_input_index (f, gst_cony_fuse_input_name (GST_PAD (pad)));
  if (pad->input < 0) {
    GString *names = g_string_new (NULL);
    for (int i = 0; i < f->n_inputs; i++)
      g_string_append_printf (names, "%ssink_%s", i ? ", " : "", f->inputs[i].name);
    GST_ELEMENT_ERROR (self, CORE, PAD, ("Pad %s is not an input of the model", GST_PAD_NAME (pad)),
        ("%s has the inputs %s", f->path, names->str));
    g_string_free (names, TRUE);
    return FALSE;
  }
  g_free (pad->newest);
  pad->newest = g_new0 (gfloat, f->inputs[pad->input].size);
  pad->have_info = FALSE;
  gst_cony_fuse_pad_forget (pad);
  return TRUE;
}

/* Loads the model and ties every pad to its input. */
static gboolean
gst_cony_fuse_start (GstAggregator *agg)
{
  GstConyFuse *self = GST_CONY_FUSE (agg);
  GError *error = NULL;
  GST_OBJECT_LOCK (self);
  gchar *path = g_strdup (self->model);
  GST_OBJECT_UNLOCK (self);
  gboolean ok = gst_cony_element_find_model (GST_ELEMENT (self), &path, "a fused model file");
  if (ok) {
    ConyFusion *fusion = cony_fusion_load (path, &error);
    ok = gst_cony_element_check_loaded (GST_ELEMENT (self), fusion != NULL, path, error);
    g_clear_error (&error);
    GST_OBJECT_LOCK (self);
    self->fusion = fusion;
    GST_OBJECT_UNLOCK (self);
  }
  g_free (path);
  GList *pads = ok ? gst_cony_fuse_pads (self) : NULL;
  for (GList *l = pads; ok && l; l = l->next)
    ok = gst_cony_fuse_tie_pad (self, l->data);
  g_list_free_full (pads, gst_object_unref);
  if (!ok) {
    gst_cony_fuse_stop (agg);
    return FALSE;
  }
  self->fused = g_new0 (gfloat, self->fusion->d_out);
  self->caps_sent = FALSE;
  gst_cony_fuse_reset (self);
  return TRUE;
}

static void
gst_cony_fuse_set_property (GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec)
{
  GstConyFuse *self = GST_CONY_FUSE (object);
  if (!gst_cony_element_property_settable (object, pspec))
    return;
  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      g_free (self->model);
      self->model = g_value_dup_string (value);
      break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_fuse_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  GstConyFuse *self = GST_CONY_FUSE (object);
  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL: g_value_set_string (value, self->model); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_fuse_finalize (GObject *object)
{
  GstConyFuse *self = GST_CONY_FUSE (object);
  g_free (self->model);
  cony_fusion_free (self->fusion);
  g_free (self->fused);
  G_OBJECT_CLASS (gst_cony_fuse_parent_class)->finalize (object);
}

static void
gst_cony_fuse_class_init (GstConyFuseClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstAggregatorClass *agg_class = GST_AGGREGATOR_CLASS (klass);

  GST_DEBUG_CATEGORY_INIT (gst_cony_fuse_debug, "conyfuse", 0,
      "time alignment of token streams for fused models");

  gobject_class->set_property = gst_cony_fuse_set_property;
  gobject_class->get_property = gst_cony_fuse_get_property;
  gobject_class->finalize = gst_cony_fuse_finalize;

  /**
   * GstConyFuse:model:
   *
   * The fused model file (safetensors, docs/model-format.md "Fused models"): its inputs
   * (pad names, token sizes, tolerances), its step rate and its absent tokens. Give
   * conytransformer the same file. Read on READY->PAUSED.
   */
  g_object_class_install_property (gobject_class, PROP_MODEL,
      g_param_spec_string ("model", "Model",
          "Fused model file (safetensors) whose inputs the "
          "request pads sink_<input> are",
          NULL, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY));

  gst_element_class_add_static_pad_template_with_gtype (element_class, &src_template,
      GST_TYPE_AGGREGATOR_PAD);
  gst_element_class_add_static_pad_template_with_gtype (element_class, &sink_template,
      GST_TYPE_CONY_FUSE_PAD);
  gst_element_class_set_static_metadata (element_class, "Token fusion",
      "Combiner/Analyzer/Audio/Video",
      "Aligns token streams (audio, video) on running time into the steps of one fused "
      "continual model, with a learned absent token for a missing or stale input",
      "gst-cony developers");

  agg_class->aggregate = gst_cony_fuse_aggregate;
  agg_class->get_next_time = gst_cony_fuse_get_next_time;
  agg_class->flush = gst_cony_fuse_flush;
  agg_class->sink_event = gst_cony_fuse_sink_event;
  agg_class->create_new_pad = gst_cony_fuse_create_new_pad;
  agg_class->update_src_caps = gst_cony_fuse_update_src_caps;
  agg_class->start = gst_cony_fuse_start;
  agg_class->stop = gst_cony_fuse_stop;

  gst_type_mark_as_plugin_api (GST_TYPE_CONY_FUSE_PAD, 0);
}

static void
gst_cony_fuse_init (GstConyFuse *self)
{
  self->t0 = GST_CLOCK_TIME_NONE;
}
