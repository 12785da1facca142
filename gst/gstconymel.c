/* conymel: audio -> log-mel token stream.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * SECTION:element-conymel
 * @title: conymel
 * @short_description: log-mel spectrogram frames as a token stream
 *
 * conymel turns mono audio into log-mel frames, VGGish-exact by default:
 * 16 kHz, 400-sample (25 ms) periodic Hann windows every 160 samples (10 ms),
 * 512-point real FFT, magnitude, 64 HTK mel bands between 125 and 7500 Hz,
 * natural log(mel + 0.01). Every parameter is a property;
 * #GstConyMel:preset=yamnet selects YAMNet's front end (the same with
 * log(mel + 0.001)).
 *
 * The output is an NNStreamer-compatible token stream
 * (`other/tensors,format=static,num_tensors=1,types=float32,dimensions=64:1,framerate=100/1`),
 * one frame per buffer; #GstConyMel:frames-per-buffer puts K frames in each
 * buffer, announced as `dimensions=64:K` and `framerate=100/K` (buffers per
 * second, as NNStreamer's tensor_converter does with frames-per-tensor).
 *
 * The caps also carry the settings, so that a CNN downstream can check them
 * against the front end its model was trained with (conyvggish does):
 * `mel-sample-rate`, `mel-window-length`, `mel-hop-length`, `mel-fft-length`,
 * `mel-n-mels` (int) and `mel-fmin`, `mel-fmax`, `mel-log-offset` (double).
 *
 * The sink pad accepts F32LE or S16LE mono audio at #GstConyMel:sample-rate
 * only; put audioconvert and audioresample in front for anything else.
 *
 * ## Timestamps and latency
 *
 * Frame k after the last discontinuity covers samples [k*hop, k*hop + window)
 * and its PTS is the time of its FIRST sample: anchor + k*hop/rate, computed
 * with integer scaling from a sample counter anchored at the PTS of the first
 * buffer after the last discontinuity (DISCONT flag, flush, start, or a
 * timestamp jump beyond 40 ms detected by #GstAudioStreamAlign). The duration
 * is one hop, so frames tile the timeline; the caps field `lookahead`
 * (window - hop samples, 3/200 s by default; gstconytokens.h) says that a
 * frame's samples run on past its end. A frame is complete when its last
 * sample arrives, so the element adds (window + (K-1) * hop) / rate to the
 * LATENCY query (25 ms by default).
 *
 * ## Stream behaviour
 *
 * - DISCONT, FLUSH_STOP and a change of input caps drop the buffered samples
 *   and restart framing at the new anchor (complete frames still waiting in a
 *   batch are pushed first, except on flush).
 * - A GAP event is silence: zeros are framed for its duration, so the frame
 *   clock stays exact and downstream sees continuous tokens (a GAP without a
 *   duration is ignored; one before the caps is forwarded as it is).
 * - NaN and ±Inf samples are replaced by 0 (silence) before framing, and a
 *   warning is posted once per run of affected buffers; later frames are
 *   unaffected.
 * - A buffer that is not a whole number of samples (e.g. 3 bytes of S16LE) is
 *   a STREAM FORMAT error, as in the other cony elements.
 * - EOS: samples that do not fill a whole window are dropped (as VGGish does);
 *   a partial batch of complete frames is pushed, with caps announcing the
 *   smaller K, before EOS is forwarded.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 audiotestsrc num-buffers=100 ! audioconvert ! audioresample ! conymel ! fakesink silent=false -v
 * ]| prints one 64-band frame every 10 ms of audio.
 * |[
 * gst-launch-1.0 autoaudiosrc ! audioconvert ! audioresample ! conymel frames-per-buffer=10 ! fakesink
 * ]| the microphone, ten frames per buffer.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstconymel.h"
#include "gstconylevel.h"
#include "gstconytokens.h"
#include "gstconyelement.h"
#include "cony/attention.h" /* CONY_MEMORY_BUDGET */

#include <math.h>
#include <stdlib.h>
#include <string.h>

GST_DEBUG_CATEGORY_STATIC (gst_cony_mel_debug);
#define GST_CAT_DEFAULT gst_cony_mel_debug

/* The log-mel settings' defaults are VGGish's (libcony's cony_mel_config_init_vggish());
 * fft-length 0 means the smallest power of two that holds a window (512 for VGGish). */
#define DEFAULT_FFT_LENGTH 0
#define DEFAULT_FRAMES_PER_BUFFER 1
#define DEFAULT_PRESET GST_CONY_MEL_PRESET_VGGISH

/* Silence from a GAP is framed in chunks of this many samples. */
#define GAP_CHUNK 16384

enum
{
  PROP_0,
  PROP_SAMPLE_RATE,
  PROP_WINDOW_LENGTH,
  PROP_HOP_LENGTH,
  PROP_FFT_LENGTH,
  PROP_N_MELS,
  PROP_FMIN,
  PROP_FMAX,
  PROP_LOG_OFFSET,
  PROP_FRAMES_PER_BUFFER,
  PROP_PRESET,
};

/* The preset enum: libcony's named front ends (cony/mel.h). */
GType
gst_cony_mel_preset_get_type (void)
{
  static GType type = 0;
  static GEnumValue values[CONY_MEL_N_PRESETS + 1];
  if (g_once_init_enter (&type)) {
    for (int p = 0; p < CONY_MEL_N_PRESETS; p++)
      values[p] = (GEnumValue){ p, cony_mel_preset_description (p), cony_mel_preset_name (p) };
    GType t = g_enum_register_static ("GstConyMelPreset", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink", GST_PAD_SINK,
    GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("audio/x-raw, format = (string) { F32LE, S16LE }, "
                     "rate = (int) [ 1, MAX ], channels = (int) 1, layout = (string) interleaved"));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src", GST_PAD_SRC,
    GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_CONY_TOKENS_CAPS_STRING));

#define gst_cony_mel_parent_class parent_class
G_DEFINE_TYPE (GstConyMel, gst_cony_mel, GST_TYPE_ELEMENT);
GST_ELEMENT_REGISTER_DEFINE (conymel, "conymel", GST_RANK_NONE, GST_TYPE_CONY_MEL);

/* ------------------------------------------------------------------------ */

/* Fills @config from the properties (object lock held). */
static void
gst_cony_mel_config_from_properties (GstConyMel *self, ConyMelConfig *config)
{
  cony_mel_config_init_vggish (config);
  config->sample_rate = self->sample_rate;
  config->window_length = self->window_length;
  config->hop_length = self->hop_length;
  if (self->fft_length != 0) {
    config->fft_length = self->fft_length;
  } else {
    guint n = 1;
    while (n < self->window_length && n < (1u << 30))
      n <<= 1;
    config->fft_length = n;
  }
  config->n_mels = self->n_mels;
  config->fmin = self->fmin;
  config->fmax = self->fmax;
  config->log_offset = self->log_offset;
}

/* The configuration and frames per buffer: the stream state's when running, else
 * the properties'. */
static void
gst_cony_mel_current_config (GstConyMel *self, ConyMelConfig *config, guint *fpb)
{
  if (self->mel != NULL) {
    *config = self->config;
    *fpb = self->fpb;
  } else {
    GST_OBJECT_LOCK (self);
    gst_cony_mel_config_from_properties (self, config);
    *fpb = self->frames_per_buffer;
    GST_OBJECT_UNLOCK (self);
  }
}

/* Token caps for the current configuration (gst_cony_mel_current_config), with @k
 * tokens per buffer (0: frames-per-buffer). */
static GstCaps *
gst_cony_mel_make_src_caps (GstConyMel *self, guint k)
{
  GstConyTokenInfo info;
  ConyMelConfig config;
  guint fpb;

  gst_cony_mel_current_config (self, &config, &fpb);
  info.dim = config.n_mels;
  info.tokens_per_buffer = k ? k : fpb;
  /* A frame reads window samples from its PTS but lasts one hop. */
  info.lookahead_n = (gint) config.window_length - (gint) config.hop_length;
  info.lookahead_d = (gint) config.sample_rate;
  if (!gst_util_fraction_multiply ((gint) config.sample_rate, 1, 1, (gint) config.hop_length,
          &info.rate_n, &info.rate_d))
    return NULL;
  GstCaps *caps = gst_cony_tokens_caps_new (&info);
  if (caps != NULL)
    /* clang-format off */
    gst_caps_set_simple (caps,
        "mel-sample-rate", G_TYPE_INT, (gint) config.sample_rate,
        "mel-window-length", G_TYPE_INT, (gint) config.window_length,
        "mel-hop-length", G_TYPE_INT, (gint) config.hop_length,
        "mel-fft-length", G_TYPE_INT, (gint) config.fft_length,
        "mel-n-mels", G_TYPE_INT, (gint) config.n_mels,
        "mel-fmin", G_TYPE_DOUBLE, config.fmin,
        "mel-fmax", G_TYPE_DOUBLE, config.fmax,
        "mel-log-offset", G_TYPE_DOUBLE, config.log_offset, NULL);
  /* clang-format on */
  return caps;
}

/* Maps a fresh output buffer for the next batch (FALSE when allocation fails). */
static gboolean
gst_cony_mel_new_batch (GstConyMel *self)
{
  self->batch = gst_buffer_new_allocate (NULL,
      (gsize) self->fpb * self->config.n_mels * sizeof (gfloat), NULL);
  if (self->batch != NULL && gst_buffer_map (self->batch, &self->batch_map, GST_MAP_WRITE))
    return TRUE;
  g_clear_pointer (&self->batch, gst_buffer_unref);
  GST_ELEMENT_ERROR (self, RESOURCE, NO_SPACE_LEFT, (NULL), ("could not allocate a batch buffer"));
  return FALSE;
}

static void
gst_cony_mel_free_batch (GstConyMel *self)
{
  if (self->batch == NULL)
    return;
  gst_buffer_unmap (self->batch, &self->batch_map);
  g_clear_pointer (&self->batch, gst_buffer_unref);
}

static GstFlowReturn
gst_cony_mel_push_batch (GstConyMel *self)
{
  guint n = self->batch_len;
  guint d = self->config.n_mels;

  if (n == 0)
    return GST_FLOW_OK;
  self->batch_len = 0;

  if (self->src_k != n) {
    if (!gst_cony_element_push_caps (self->srcpad, gst_cony_mel_make_src_caps (self, n))) {
      GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, (NULL),
          ("downstream refused the token caps (%u x %u floats)", n, d));
      return GST_FLOW_NOT_NEGOTIATED;
    }
    self->src_k = n;
  }

  /* The frames are already in the buffer: unmap it, trim a partial batch, send it. */
  GstBuffer *out = self->batch;
  gst_buffer_unmap (out, &self->batch_map);
  self->batch = NULL;
  if (n < self->fpb)
    gst_buffer_set_size (out, (gssize) n * d * sizeof (gfloat));
  gst_buffer_add_cony_level_meta (out, n, self->batch_power, NULL);
  GstClockTime t0 = gst_cony_tokens_time (self->anchor, self->batch_first, self->rate_n,
      self->rate_d);
  GstClockTime t1 = gst_cony_tokens_time (self->anchor, self->batch_first + n, self->rate_n,
      self->rate_d);
  gst_cony_element_stamp (out, t0, t1 - t0, self->batch_first, n, &self->next_discont);
  GST_LOG_OBJECT (self, "pushing %u frame(s) from %" G_GUINT64_FORMAT " at %" GST_TIME_FORMAT, n,
      self->batch_first, GST_TIME_ARGS (t0));
  return gst_pad_push (self->srcpad, out);
}

/* Pops every complete frame, pushing full batches. */
static GstFlowReturn
gst_cony_mel_emit_frames (GstConyMel *self)
{
  GstFlowReturn ret = GST_FLOW_OK;
  guint d = self->config.n_mels;

  while (ret == GST_FLOW_OK && cony_mel_frames_available (self->mel) > 0) {
    if (self->batch == NULL && !gst_cony_mel_new_batch (self))
      return GST_FLOW_ERROR;
    if (self->batch_len == 0)
      self->batch_first = cony_mel_get_next_frame_index (self->mel);
    gfloat *batch = (gfloat *) self->batch_map.data;
    if (!cony_mel_pop_frame (self->mel, batch + (gsize) self->batch_len * d))
      break;
    self->batch_power[self->batch_len] = cony_mel_last_frame_power (self->mel);
    self->batch_len++;
    if (self->batch_len == self->fpb)
      ret = gst_cony_mel_push_batch (self);
  }
  return ret;
}

/* Forgets the samples and the anchor (flush, caps change, stop). */
static void
gst_cony_mel_reset_stream (GstConyMel *self)
{
  if (self->mel)
    cony_mel_reset (self->mel);
  if (self->align)
    gst_audio_stream_align_mark_discont (self->align);
  self->anchor = GST_CLOCK_TIME_NONE;
  self->batch_len = 0;
  self->next_discont = TRUE;
  self->in_nonfinite = FALSE;
}

/* Handles a discontinuity at @anchor: pushes complete frames, restarts framing. */
static GstFlowReturn
gst_cony_mel_restart_at (GstConyMel *self, GstClockTime anchor)
{
  GstFlowReturn ret = GST_FLOW_OK;

  if (GST_CLOCK_TIME_IS_VALID (self->anchor)) {
    GST_DEBUG_OBJECT (self,
        "discontinuity: restarting framing at %" GST_TIME_FORMAT " (%" G_GUINT64_FORMAT
        " samples since the previous anchor)",
        GST_TIME_ARGS (anchor), cony_mel_get_samples_pushed (self->mel));
    ret = gst_cony_mel_push_batch (self);
    cony_mel_reset (self->mel);
    self->next_discont = TRUE;
  }
  self->anchor = anchor;
  return ret;
}

/* Time-stamps the next @n samples (starting at @pts, which may be NONE) and
 * restarts framing on a discontinuity. */
static GstFlowReturn
gst_cony_mel_align_samples (GstConyMel *self, gboolean discont, GstClockTime pts, guint64 n)
{
  GstClockTime out_ts, out_dur;
  guint64 pos;

  if (!GST_CLOCK_TIME_IS_VALID (pts)) {
    /* No timestamp: assume the samples follow on. A stream without any
     * timestamps is stamped from 0. */
    if (GST_CLOCK_TIME_IS_VALID (self->anchor))
      pts = gst_cony_time_add (self->anchor,
          gst_util_uint64_scale (cony_mel_get_samples_pushed (self->mel), GST_SECOND,
              self->config.sample_rate));
    else
      pts = 0;
  }
  if (!GST_CLOCK_TIME_IS_VALID (self->anchor))
    discont = TRUE;
  if (gst_audio_stream_align_process (self->align, discont, pts, (guint) MIN (n, G_MAXUINT),
          &out_ts, &out_dur, &pos))
    return gst_cony_mel_restart_at (self,
        gst_audio_stream_align_get_timestamp_at_discont (self->align));
  return GST_FLOW_OK;
}

/* NaN/Inf samples were replaced by zeros: warn once per run of such buffers. */
static void
gst_cony_mel_note_nonfinite (GstConyMel *self, gsize replaced, GstClockTime pts)
{
  self->n_nonfinite += replaced;
  if (gst_cony_element_run_starts (&self->in_nonfinite, replaced > 0))
    GST_ELEMENT_WARNING (self, STREAM, FORMAT, ("Input audio contains NaN or infinite samples"),
        ("%" G_GSIZE_FORMAT " non-finite samples in the buffer at %" GST_TIME_FORMAT
         " were replaced by 0 (silence)",
            replaced, GST_TIME_ARGS (pts)));
}

static GstFlowReturn
gst_cony_mel_chain (GstPad *pad, GstObject *parent, GstBuffer *buf)
{
  GstConyMel *self = GST_CONY_MEL (parent);
  GstFlowReturn ret;
  GstMapInfo map;

  if (!gst_cony_element_check_caps_seen (GST_ELEMENT (self), self->have_info)) {
    gst_buffer_unref (buf);
    return GST_FLOW_NOT_NEGOTIATED;
  }
  gint bpf = GST_AUDIO_INFO_BPF (&self->info);
  gchar *unit = g_strdup_printf ("%d-byte %s samples", bpf,
      gst_audio_format_to_string (GST_AUDIO_INFO_FORMAT (&self->info)));
  gboolean mapped = gst_cony_element_map_units (GST_ELEMENT (self), buf, &map, bpf, unit, NULL);
  g_free (unit);
  if (!mapped) {
    gst_buffer_unref (buf);
    return GST_FLOW_ERROR;
  }
  gsize n = map.size / bpf;

  ret = gst_cony_mel_align_samples (self, GST_BUFFER_IS_DISCONT (buf), GST_BUFFER_PTS (buf), n);
  if (ret == GST_FLOW_OK && n > 0) {
    if (GST_AUDIO_INFO_FORMAT (&self->info) == GST_AUDIO_FORMAT_S16LE) {
      cony_mel_push_s16 (self->mel, (const gint16 *) map.data, n);
    } else {
      gsize replaced = cony_mel_push (self->mel, (const float *) map.data, n);
      gst_cony_mel_note_nonfinite (self, replaced, GST_BUFFER_PTS (buf));
    }
    ret = gst_cony_mel_emit_frames (self);
  }

  gst_buffer_unmap (buf, &map);
  gst_buffer_unref (buf);
  return ret;
}

/* A GAP is silence: frame zeros up to its end so the frame clock stays exact. */
static GstFlowReturn
gst_cony_mel_handle_gap (GstConyMel *self, GstEvent *event)
{
  GstClockTime ts, dur;
  GstFlowReturn ret;
  guint rate = self->config.sample_rate;

  gst_event_parse_gap (event, &ts, &dur);
  if (!GST_CLOCK_TIME_IS_VALID (ts) || !GST_CLOCK_TIME_IS_VALID (dur) || dur == 0)
    return GST_FLOW_OK;

  guint64 n = gst_util_uint64_scale_round (dur, rate, GST_SECOND);
  ret = gst_cony_mel_align_samples (self, FALSE, ts, n);
  if (ret != GST_FLOW_OK)
    return ret;
  /* Count to the gap's end on the anchored sample clock when it is close to
   * the nominal count (no drift), so gaps never shift later frames. */
  GstClockTime gap_end = gst_cony_time_add (ts, dur);
  if (gap_end > self->anchor) {
    guint64 end = gst_util_uint64_scale_round (gap_end - self->anchor, rate, GST_SECOND);
    guint64 pushed = cony_mel_get_samples_pushed (self->mel);
    if (end > pushed && end - pushed <= n + 1 && end - pushed + 1 >= n)
      n = end - pushed;
  }
  GST_DEBUG_OBJECT (self,
      "GAP at %" GST_TIME_FORMAT " for %" GST_TIME_FORMAT ": framing %" G_GUINT64_FORMAT
      " zero samples",
      GST_TIME_ARGS (ts), GST_TIME_ARGS (dur), n);
  self->in_nonfinite = FALSE;
  ret = GST_FLOW_OK;
  while (n > 0 && ret == GST_FLOW_OK) {
    guint64 chunk = MIN (n, GAP_CHUNK);
    cony_mel_push_silence (self->mel, chunk);
    n -= chunk;
    ret = gst_cony_mel_emit_frames (self);
  }
  return ret;
}

/* Pushes the waiting frames before @what; the event goes on whatever the flow. */
static void
gst_cony_mel_drain (GstConyMel *self, const gchar *what)
{
  GstFlowReturn ret = gst_cony_mel_push_batch (self);
  if (ret != GST_FLOW_OK)
    GST_DEBUG_OBJECT (self, "pushing the last frames before %s: %s", what, gst_flow_get_name (ret));
}

static gboolean
gst_cony_mel_set_sink_caps (GstConyMel *self, GstCaps *caps)
{
  GstAudioInfo info;

  if (!gst_audio_info_from_caps (&info, caps)) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, (NULL),
        ("invalid audio caps %" GST_PTR_FORMAT, caps));
    return FALSE;
  }
  if ((GST_AUDIO_INFO_FORMAT (&info) != GST_AUDIO_FORMAT_F32LE
          && GST_AUDIO_INFO_FORMAT (&info) != GST_AUDIO_FORMAT_S16LE)
      || GST_AUDIO_INFO_CHANNELS (&info) != 1
      || GST_AUDIO_INFO_RATE (&info) != (gint) self->config.sample_rate) {
    GST_WARNING_OBJECT (self,
        "refusing caps %" GST_PTR_FORMAT ": need F32LE or S16LE mono "
        "at %u Hz (use audioconvert ! audioresample)",
        caps, self->config.sample_rate);
    return FALSE;
  }

  if (self->have_info && !gst_audio_info_is_equal (&info, &self->info)) {
    GST_DEBUG_OBJECT (self, "input caps changed: draining and restarting");
    gst_cony_mel_drain (self, "a caps change");
    gst_cony_mel_reset_stream (self);
  }
  self->info = info;
  self->have_info = TRUE;
  self->refusal_posted = FALSE;

  gboolean ok = gst_cony_element_push_caps (self->srcpad, gst_cony_mel_make_src_caps (self, 0));
  if (ok)
    self->src_k = self->fpb;
  return ok;
}

static gboolean
gst_cony_mel_sink_event (GstPad *pad, GstObject *parent, GstEvent *event)
{
  GstConyMel *self = GST_CONY_MEL (parent);
  GstFlowReturn ret;

  GST_LOG_OBJECT (self, "event %" GST_PTR_FORMAT, event);
  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_CAPS: {
      GstCaps *caps;
      gst_event_parse_caps (event, &caps);
      gboolean ok = gst_cony_mel_set_sink_caps (self, caps);
      gst_event_unref (event);
      return ok;
    }
    case GST_EVENT_FLUSH_STOP: gst_cony_mel_reset_stream (self); break;
    case GST_EVENT_EOS:
      if (self->mel != NULL)
        gst_cony_mel_drain (self, "EOS");
      break;
    case GST_EVENT_GAP:
      if (!self->have_info)
        break; /* nothing to frame yet: let downstream see it */
      ret = gst_cony_mel_handle_gap (self, event);
      gst_event_unref (event);
      return ret == GST_FLOW_OK || ret == GST_FLOW_FLUSHING;
    default: break;
  }
  return gst_pad_event_default (pad, parent, event);
}

/* Says what conymel takes and what upstream offers, and which converter is missing:
 * "conymel takes 16000 Hz mono, got 44100 Hz stereo: add audioresample and audioconvert
 * before it". */
static void
gst_cony_mel_name_refusal (GstConyMel *self, const GstCaps *offered, guint rate)
{
  const GstStructure *s = gst_caps_get_structure (offered, 0);
  g_autofree gchar *takes = g_strdup_printf ("%u Hz mono audio (F32LE or S16LE)", rate);
  if (!gst_structure_has_name (s, "audio/x-raw")) {
    g_autofree gchar *got = g_strdup_printf ("%s", gst_structure_get_name (s));
    gst_cony_element_refuse_caps (GST_ELEMENT (self), &self->refusal_posted, takes, got,
        "decode and convert first (decodebin ! audioconvert ! audioresample)", offered);
    return;
  }
  g_autofree gchar *r = gst_cony_element_fixed_field (s, "rate");
  g_autofree gchar *ch = gst_cony_element_fixed_field (s, "channels");
  g_autofree gchar *fmt = gst_cony_element_fixed_field (s, "format");
  gboolean resample = r && (guint) atoi (r) != rate;
  gboolean convert = (ch && atoi (ch) != 1)
      || (fmt && strcmp (fmt, "F32LE") != 0 && strcmp (fmt, "S16LE") != 0);
  GString *got = g_string_new (NULL);
  if (r)
    g_string_append_printf (got, "%s Hz ", r);
  if (ch)
    g_string_append_printf (got, "%s ", atoi (ch) == 1 ? "mono" : atoi (ch) == 2 ? "stereo" : ch);
  if (fmt)
    g_string_append_printf (got, "%s ", fmt);
  g_string_append (got, "audio");
  gst_cony_element_refuse_convertible (GST_ELEMENT (self), &self->refusal_posted, takes, got->str,
      offered, resample, "audioresample", convert, "audioconvert");
  g_string_free (got, TRUE);
}

/* The rate the sink takes: the running configuration's, else the property's. */
static guint
gst_cony_mel_expected_rate (GstConyMel *self)
{
  if (self->mel != NULL)
    return self->config.sample_rate;
  GST_OBJECT_LOCK (self);
  guint rate = self->sample_rate;
  GST_OBJECT_UNLOCK (self);
  return rate;
}

static gboolean
gst_cony_mel_sink_query (GstPad *pad, GstObject *parent, GstQuery *query)
{
  GstConyMel *self = GST_CONY_MEL (parent);
  guint rate = gst_cony_mel_expected_rate (self);
  gboolean ok;

  if (GST_QUERY_TYPE (query) == GST_QUERY_CAPS) {
    GstCaps *caps = gst_caps_make_writable (gst_pad_get_pad_template_caps (pad));
    gst_caps_set_simple (caps, "rate", G_TYPE_INT, (gint) rate, NULL);
    ok = gst_cony_element_answer_caps (query, caps);
  } else {
    ok = gst_pad_query_default (pad, parent, query);
  }
  /* a refusal is named here: upstream's own error would say only "not-negotiated" */
  const GstCaps *offered = gst_cony_element_refused_caps (query);
  if (offered)
    gst_cony_mel_name_refusal (self, offered, rate);
  return ok;
}

/* Own latency: a batch is complete when the last sample of its last frame
 * has arrived, (window + (K - 1) * hop) samples after its PTS. */
static GstClockTime
gst_cony_mel_own_latency (GstConyMel *self)
{
  ConyMelConfig config;
  guint fpb;

  gst_cony_mel_current_config (self, &config, &fpb);
  guint64 samples = config.window_length + (guint64) (fpb - 1) * config.hop_length;
  return gst_util_uint64_scale_ceil (samples, GST_SECOND, config.sample_rate);
}

static gboolean
gst_cony_mel_src_query (GstPad *pad, GstObject *parent, GstQuery *query)
{
  GstConyMel *self = GST_CONY_MEL (parent);

  switch (GST_QUERY_TYPE (query)) {
    case GST_QUERY_LATENCY:
      return gst_cony_element_query_latency (GST_ELEMENT (self), self->sinkpad, query,
          gst_cony_mel_own_latency (self));
    case GST_QUERY_CAPS: {
      GstCaps *caps = gst_pad_get_current_caps (pad);
      if (caps == NULL)
        caps = gst_cony_mel_make_src_caps (self, 0);
      if (caps == NULL)
        caps = gst_pad_get_pad_template_caps (pad);
      return gst_cony_element_answer_caps (query, caps);
    }
    default: return gst_pad_query_default (pad, parent, query);
  }
}

/* The same memory budget as the transformer's (CONY_MEMORY_BUDGET): the log-mel state
 * and one output batch of frames-per-buffer x n-mels floats. Every property is inside
 * its range, but some combinations are not (#46.1: the largest FFT with 4096 bands once
 * made GLib abort on a 34 GB allocation); they fail the state change naming the bytes. */
static gboolean
gst_cony_mel_check_budget (GstConyMel *self)
{
  const ConyMelConfig *c = &self->config;
  gsize state = cony_mel_config_bytes (c);
  gsize batch = (gsize) self->fpb * c->n_mels * sizeof (gfloat);
  if (state + batch <= CONY_MEMORY_BUDGET)
    return TRUE;
  GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS,
      ("The log-mel settings need %" G_GSIZE_FORMAT " bytes (%.1f MiB), more than the budget of "
       "%" G_GSIZE_FORMAT " bytes: lower frames-per-buffer or n-mels",
          state + batch, (state + batch) / 1048576.0, (gsize) CONY_MEMORY_BUDGET),
      ("fft-length=%u window-length=%u n-mels=%u frames-per-buffer=%u: %" G_GSIZE_FORMAT
       " bytes of log-mel state and %" G_GSIZE_FORMAT " of output batch",
          c->fft_length, c->window_length, c->n_mels, self->fpb, state, batch));
  return FALSE;
}

static gboolean
gst_cony_mel_start (GstElement *element)
{
  GstConyMel *self = GST_CONY_MEL (element);
  GError *error = NULL;

  GST_OBJECT_LOCK (self);
  gst_cony_mel_config_from_properties (self, &self->config);
  self->fpb = self->frames_per_buffer;
  g_free (self->batch_power);
  self->batch_power = g_new0 (gdouble, self->fpb);
  GST_OBJECT_UNLOCK (self);

  if (cony_mel_config_validate (&self->config, &error) && !gst_cony_mel_check_budget (self))
    return FALSE;
  g_clear_error (&error); /* cony_mel_new says it again */
  self->mel = cony_mel_new (&self->config, &error);
  if (self->mel == NULL) {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS, ("Invalid log-mel settings: %s", error->message),
        (NULL));
    g_clear_error (&error);
    return FALSE;
  }
  if (!gst_util_fraction_multiply ((gint) self->config.sample_rate, 1, 1,
          (gint) self->config.hop_length, &self->rate_n, &self->rate_d)) {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS, ("Invalid log-mel settings"),
        ("frame rate %u/%u overflows", self->config.sample_rate, self->config.hop_length));
    cony_mel_free (self->mel);
    self->mel = NULL;
    return FALSE;
  }
  self->align = gst_audio_stream_align_new ((gint) self->config.sample_rate, 40 * GST_MSECOND,
      GST_SECOND);
  self->have_info = FALSE;
  self->refusal_posted = FALSE;
  self->src_k = 0;
  self->n_nonfinite = 0;
  gst_cony_mel_reset_stream (self);
  return TRUE;
}

static void
gst_cony_mel_stop (GstElement *element)
{
  GstConyMel *self = GST_CONY_MEL (element);
  g_clear_pointer (&self->mel, cony_mel_free);
  gst_cony_mel_free_batch (self);
  g_clear_pointer (&self->batch_power, g_free);
  g_clear_pointer (&self->align, gst_audio_stream_align_free);
  self->have_info = FALSE;
  self->batch_len = 0;
  self->anchor = GST_CLOCK_TIME_NONE;
}

static GstStateChangeReturn
gst_cony_mel_change_state (GstElement *element, GstStateChange transition)
{
  return gst_cony_element_change_state (element, transition, GST_ELEMENT_CLASS (parent_class),
      gst_cony_mel_start, gst_cony_mel_stop);
}

/* ------------------------------------------------------------------------ */

/* Sets every log-mel property to @preset's value (object lock held), from libcony's
 * presets; fft-length to its default (the window's power of two). */
static void
gst_cony_mel_apply_preset (GstConyMel *self, GstConyMelPreset preset)
{
  self->preset = preset;
  ConyMelConfig c;
  cony_mel_config_init_preset (&c, (ConyMelPreset) preset);
  self->sample_rate = c.sample_rate;
  self->window_length = c.window_length;
  self->hop_length = c.hop_length;
  self->fft_length = DEFAULT_FFT_LENGTH;
  self->n_mels = c.n_mels;
  self->fmin = c.fmin;
  self->fmax = c.fmax;
  self->log_offset = c.log_offset;
}

static void
gst_cony_mel_set_property (GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec)
{
  GstConyMel *self = GST_CONY_MEL (object);

  if (!gst_cony_element_property_settable (object, pspec))
    return;

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_SAMPLE_RATE: self->sample_rate = g_value_get_uint (value); break;
    case PROP_WINDOW_LENGTH: self->window_length = g_value_get_uint (value); break;
    case PROP_HOP_LENGTH: self->hop_length = g_value_get_uint (value); break;
    case PROP_FFT_LENGTH: self->fft_length = g_value_get_uint (value); break;
    case PROP_N_MELS: self->n_mels = g_value_get_uint (value); break;
    case PROP_FMIN: self->fmin = g_value_get_double (value); break;
    case PROP_FMAX: self->fmax = g_value_get_double (value); break;
    case PROP_LOG_OFFSET: self->log_offset = g_value_get_double (value); break;
    case PROP_FRAMES_PER_BUFFER: self->frames_per_buffer = g_value_get_uint (value); break;
    case PROP_PRESET: gst_cony_mel_apply_preset (self, g_value_get_enum (value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_mel_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  GstConyMel *self = GST_CONY_MEL (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_SAMPLE_RATE: g_value_set_uint (value, self->sample_rate); break;
    case PROP_WINDOW_LENGTH: g_value_set_uint (value, self->window_length); break;
    case PROP_HOP_LENGTH: g_value_set_uint (value, self->hop_length); break;
    case PROP_FFT_LENGTH: g_value_set_uint (value, self->fft_length); break;
    case PROP_N_MELS: g_value_set_uint (value, self->n_mels); break;
    case PROP_FMIN: g_value_set_double (value, self->fmin); break;
    case PROP_FMAX: g_value_set_double (value, self->fmax); break;
    case PROP_LOG_OFFSET: g_value_set_double (value, self->log_offset); break;
    case PROP_FRAMES_PER_BUFFER: g_value_set_uint (value, self->frames_per_buffer); break;
    case PROP_PRESET: g_value_set_enum (value, self->preset); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_mel_finalize (GObject *object)
{
  gst_cony_mel_stop (GST_ELEMENT (object));
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_cony_mel_class_init (GstConyMelClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  const GParamFlags flags = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY;
  ConyMelConfig vggish; /* the properties' defaults */
  cony_mel_config_init_vggish (&vggish);

  GST_DEBUG_CATEGORY_INIT (gst_cony_mel_debug, "conymel", 0, "log-mel token stream");

  gobject_class->set_property = gst_cony_mel_set_property;
  gobject_class->get_property = gst_cony_mel_get_property;
  gobject_class->finalize = gst_cony_mel_finalize;

  /**
   * GstConyMel:sample-rate:
   *
   * The only input rate accepted, in Hz; it also places the mel bands.
   * audioresample converts anything else.
   */
  g_object_class_install_property (gobject_class, PROP_SAMPLE_RATE,
      g_param_spec_uint ("sample-rate", "Sample rate",
          "Input sample rate in Hz (the sink pad accepts only this rate)", 1, G_MAXINT,
          vggish.sample_rate, flags));
  /**
   * GstConyMel:window-length:
   *
   * Samples per analysis frame (400 = 25 ms at 16 kHz). The window is a
   * periodic Hann window of this length, at most fft-length (2^18 = 262144).
   */
  g_object_class_install_property (gobject_class, PROP_WINDOW_LENGTH,
      g_param_spec_uint ("window-length", "Window length",
          "Samples per analysis frame (periodic Hann window)", 1, CONY_MEL_MAX_FFT,
          vggish.window_length, flags));
  /**
   * GstConyMel:hop-length:
   *
   * Samples between the starts of consecutive frames (160 = 10 ms at 16 kHz).
   */
  g_object_class_install_property (gobject_class, PROP_HOP_LENGTH,
      g_param_spec_uint ("hop-length", "Hop length",
          "Samples between the starts of consecutive frames", 1, 1 << 20, vggish.hop_length,
          flags));
  /**
   * GstConyMel:fft-length:
   *
   * FFT size, a power of two not smaller than the window; the windowed
   * samples are zero-padded at the end. 0 picks the smallest such power of
   * two (512 for a 400-sample window, as VGGish does). At most 2^18 = 262144
   * (16 ms a frame; FFmpeg's FFT of 2^19 points and more is an O(n^2) transform,
   * minutes a frame). The log-mel state is O(fft-length + n-mels), at most about
   * 20 MiB: only the mel weights that are not zero are kept, whatever n-mels.
   */
  g_object_class_install_property (gobject_class, PROP_FFT_LENGTH,
      g_param_spec_uint ("fft-length", "FFT length",
          "FFT size, a power of two >= window-length (0 = smallest such power of two)", 0,
          CONY_MEL_MAX_FFT, DEFAULT_FFT_LENGTH, flags));
  /**
   * GstConyMel:n-mels:
   *
   * Number of mel bands, which is the token dimension D of the output.
   */
  g_object_class_install_property (gobject_class, PROP_N_MELS,
      g_param_spec_uint ("n-mels", "Mel bands", "Number of mel bands (floats per output token)", 1,
          4096, vggish.n_mels, flags));
  /**
   * GstConyMel:fmin:
   *
   * Lower edge of the lowest mel band, in Hz.
   */
  g_object_class_install_property (gobject_class, PROP_FMIN,
      g_param_spec_double ("fmin", "Lowest frequency", "Lower edge of the lowest mel band in Hz",
          0.0, G_MAXDOUBLE, vggish.fmin, flags));
  /**
   * GstConyMel:fmax:
   *
   * Upper edge of the highest mel band, in Hz; at most half the sample rate.
   */
  g_object_class_install_property (gobject_class, PROP_FMAX,
      g_param_spec_double ("fmax", "Highest frequency",
          "Upper edge of the highest mel band in Hz (at most sample-rate / 2)", 0.0, G_MAXDOUBLE,
          vggish.fmax, flags));
  /**
   * GstConyMel:log-offset:
   *
   * Added to the mel energies before the natural logarithm (VGGish 0.01,
   * YAMNet 0.001). Digital silence gives log(log-offset) in every band.
   */
  g_object_class_install_property (gobject_class, PROP_LOG_OFFSET,
      g_param_spec_double ("log-offset", "Log offset",
          "Added to the mel energies before the natural logarithm", G_MINDOUBLE, G_MAXDOUBLE,
          vggish.log_offset, flags));
  /**
   * GstConyMel:frames-per-buffer:
   *
   * Frames per output buffer (K). The caps announce dimensions=D:K and a
   * framerate of (sample-rate / hop-length) / K buffers per second. The
   * latency grows by (K - 1) hops. A batch takes K x n-mels x 4 bytes: with
   * the log-mel state it must fit in 1 GiB (CONY_MEMORY_BUDGET), so K x n-mels
   * above about 2^28 (e.g. 65536 frames of 4096 bands) fails the state change
   * with an error naming the bytes.
   */
  g_object_class_install_property (gobject_class, PROP_FRAMES_PER_BUFFER,
      g_param_spec_uint ("frames-per-buffer", "Frames per buffer",
          "Frames (tokens) per output buffer", 1, 65536, DEFAULT_FRAMES_PER_BUFFER, flags));
  /**
   * GstConyMel:preset:
   *
   * A named front end: setting it sets sample-rate, window-length,
   * hop-length, fft-length, n-mels, fmin, fmax and log-offset to the preset's
   * values (vggish: the defaults; yamnet: the same with log-offset 0.001).
   * Properties set after it override single values; reading it gives the
   * preset set last.
   */
  g_object_class_install_property (gobject_class, PROP_PRESET,
      g_param_spec_enum ("preset", "Preset",
          "Named front end; sets every log-mel property (later properties override)",
          GST_TYPE_CONY_MEL_PRESET, DEFAULT_PRESET, flags));

  gst_type_mark_as_plugin_api (GST_TYPE_CONY_MEL_PRESET, 0);
  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "Log-mel spectrogram",
      "Filter/Analyzer/Audio",
      "Turns mono audio into log-mel frames (VGGish front end by default) as a token stream",
      "gst-cony authors");

  element_class->change_state = GST_DEBUG_FUNCPTR (gst_cony_mel_change_state);
}

static void
gst_cony_mel_init (GstConyMel *self)
{
  self->sinkpad = gst_pad_new_from_static_template (&sink_template, "sink");
  gst_pad_set_chain_function (self->sinkpad, GST_DEBUG_FUNCPTR (gst_cony_mel_chain));
  gst_pad_set_event_function (self->sinkpad, GST_DEBUG_FUNCPTR (gst_cony_mel_sink_event));
  gst_pad_set_query_function (self->sinkpad, GST_DEBUG_FUNCPTR (gst_cony_mel_sink_query));
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);

  self->srcpad = gst_pad_new_from_static_template (&src_template, "src");
  gst_pad_set_query_function (self->srcpad, GST_DEBUG_FUNCPTR (gst_cony_mel_src_query));
  gst_pad_use_fixed_caps (self->srcpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);

  gst_cony_mel_apply_preset (self, DEFAULT_PRESET);
  self->frames_per_buffer = DEFAULT_FRAMES_PER_BUFFER;
  self->anchor = GST_CLOCK_TIME_NONE;
}
