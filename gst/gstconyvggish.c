/* conyvggish: log-mel tokens -> VGG-style embeddings.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * SECTION:element-conyvggish
 * @title: conyvggish
 * @short_description: CNN embeddings or scores of log-mel windows
 *
 * conyvggish runs any network of libcony's CNN engine on sliding windows of
 * the log-mel token stream that #GstConyMel produces, and outputs one token
 * per window: VGG-style networks (3x3 convolutions, max-pools, fully
 * connected layers; VGGish and reduced relatives) and MobileNet-v1 networks
 * (YAMNet: depthwise/pointwise convolutions, a 521-class sigmoid head). The
 * name stays for compatibility. #GstConyVggish:output picks the network's
 * last layer (`scores`, default: VGGish's embedding, YAMNet's 521 scores) or
 * the pooled embedding before its head (`embedding`: YAMNet's 1024-d vector). By default a window is as many frames as
 * the model takes (96, 0.96 s, for VGGish and the shipped models) and a new
 * window starts every 25 frames (0.25 s), the setup of the CoNy papers; the
 * output is then
 * `other/tensors,format=static,num_tensors=1,types=float32,dimensions=128:1,framerate=4/1`.
 *
 * The #GstConyVggish:model property names a CNN safetensors file
 * (docs/model-format.md): torchvggish's state_dict names (features.K.*,
 * embeddings.K.*; training/convert_vggish.py) or a network=mobilenet_v1 file
 * (layers.I.*, e.g. models/yamnet/yamnet.safetensors). It is loaded on
 * READY->PAUSED; a missing or invalid file is an error and the state change
 * fails. Elements (and other loads) of the same unchanged file in one process
 * share one copy of its weights (cony_cnn_load()); the read-only
 * #GstConyVggish:model-users counts them. #GstConyVggish:window, if set, must
 * equal the model's input height, and the input tokens must have the model's
 * input width (64 mel bands).
 *
 * ## Timestamps and latency
 *
 * Window w covers input frames [w*stride, w*stride + window) counted from the
 * last discontinuity. Its PTS is the time of its first frame,
 * anchor + w*stride/token_rate, computed with integer scaling from the frame
 * counter anchored at the PTS of the first buffer after the discontinuity; the
 * duration is one stride. The output caps' `lookahead` (gstconytokens.h) is
 * (window - stride) frames plus the input's lookahead, 29/40 s by default: an
 * embedding covers [PTS, PTS + 0.975 s) of audio, the 15600 samples of its
 * window. The window is complete when its last frame
 * arrives, and that frame's own delay is already in upstream's latency, so
 * the element adds (window - 1) frames to the LATENCY query: 950 ms by
 * default (with conymel's 25 ms, 975 ms = the 15600 samples one window
 * spans).
 *
 * ## Stream behaviour
 *
 * - DISCONT, FLUSH_STOP and caps that change the token dimension or rate
 *   drop the partial window and restart at the new anchor. Caps that only
 *   change the number of tokens per buffer do not.
 * - A GAP on the token stream (there are none after conymel, which turns
 *   audio GAPs into silence frames) restarts the window after the gap and is
 *   forwarded: the log-mel value of silence depends on conymel's log-offset,
 *   which this element cannot know.
 * - NaN/Inf token values are replaced by 0 with a warning posted once per
 *   run of affected buffers; the window moves past them and later outputs
 *   are unaffected.
 * - EOS: every complete window has already been output. Trailing frames
 *   that no window has covered yet (a stream shorter than one window, or the
 *   tail after the last full window) give one more window, padded with
 *   silent frames as YAMNet pads its waveform with zeros: log(mel-log-offset)
 *   of the input caps (conymel's; 0.01, VGGish's, when the caps have none).
 *   So a file of 0.3 s gets one result instead of none. With
 *   #GstConyVggish:pad-tail=false they are dropped, as VGGish does.
 *
 * ## Batching (files)
 *
 * With #GstConyVggish:batch > 1 and an upstream that is not live (a file, a
 * non-live test source: asked with a LATENCY query once per caps), complete
 * windows wait until @batch of them are there, or until a serialized event
 * (EOS, GAP, SEGMENT, caps...) arrives, and run through the CNN in one call:
 * the FC layers then read their weights once per batch instead of once per
 * window, and the conv layers run eight windows per sgemm. With the full-size
 * VGGish on one core, batch=64 ran at about 26x real time against 12x (F32
 * weights) and 16x (F16) with batch=1 (bench/RESULTS.md).
 * Timestamps and values are those of batch=1 (values to float rounding); a
 * flush drops the waiting windows. Live pipelines ignore the property: each
 * window runs as soon as it is complete, so the latency stays window - 1
 * frames.
 *
 * A model file with F16 weights (training/convert_vggish.py --dtype f16) keeps
 * its FC weights in F16 in memory, which nearly halves the per-window time of
 * the FC layers in live pipelines (they read every FC weight per window).
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 audiotestsrc num-buffers=100 ! audioconvert ! audioresample ! conymel preset=yamnet ! conyvggish model=models/yamnet/yamnet.safetensors ! fakesink silent=false -v
 * ]| 6.4 s of a sine tone give 23 score vectors of the shipped YAMNet, one every
 * 0.25 s (the last one padded at EOS).
 * |[
 * gst-launch-1.0 filesrc location=long.wav ! decodebin ! audioconvert ! audioresample ! conymel preset=yamnet ! conyvggish model=models/audio/yamnet-adapted.safetensors output=embedding batch=64 ! fakesink
 * ]| a file's embeddings for the shipped classifier, 64 windows per CNN call.
 * |[
 * gst-launch-1.0 audiotestsrc num-buffers=100 ! audioconvert ! audioresample ! conymel preset=yamnet ! conyvggish model=models/yamnet/yamnet.safetensors mode=continual ! fakesink
 * ]| YAMNet as a streaming CNN (#GstConyVggish:mode): each frame through the network
 * once, a score vector every 0.32 s (docs/continual-cnn.md).
 *
 * The official VGGish (not shipped: training/convert_vggish.py converts the
 * torchvggish weights, and its PCA file) gives the release's 8-bit embeddings
 * with `conymel ! conyvggish model=vggish.safetensors
 * pca-model=vggish_pca.safetensors postprocess=tf`.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstconyvggish.h"
#include "gstconyelement.h"
#include "gstconylevel.h"
#include "cony/mel.h"
#include "cony/safetensors.h"

#include <math.h>
#include <string.h>

GST_DEBUG_CATEGORY_STATIC (gst_cony_vggish_debug);
#define GST_CAT_DEFAULT gst_cony_vggish_debug

#define DEFAULT_PCA_MODEL NULL
#define DEFAULT_POSTPROCESS GST_CONY_VGGISH_POSTPROCESS_NONE
#define DEFAULT_WINDOW 0 /* the model's input height */
#define DEFAULT_STRIDE 25
#define DEFAULT_BATCH 1
#define DEFAULT_PAD_TAIL TRUE
#define DEFAULT_MODE GST_CONY_VGGISH_MODE_WINDOW
#define DEFAULT_MIN_LEVEL (-G_MAXDOUBLE) /* off */

static const GstConyCnnElementInfo cnn_info = {
  .model_blurb = "Path of the CNN safetensors model file (VGG-style or MobileNet-v1); a relative "
                 "name is also looked up in $CONY_MODEL_PATH and DATADIR/gst-cony/models",
  .model_hint = "a CNN file, e.g. the shipped default audio/yamnet-adapted.safetensors "
                "(with conymel preset=yamnet and output=embedding)",
  .output_blurb =
      "Per window: the network's last layer (scores) or the pooled embedding before its head",
  .precision = TRUE,
};

/* The frame store holds this many windows: a window slides by moving `head`, and the
 * frames are moved back to the start only when the store is full. */
#define FRAMES_CAPACITY 4

enum
{
  PROP_0,
  PROP_PCA_MODEL,
  PROP_POSTPROCESS,
  PROP_WINDOW,
  PROP_STRIDE,
  PROP_BATCH,
  PROP_PAD_TAIL,
  PROP_MODE,
  PROP_MIN_LEVEL,
  PROP_CNN, /* GST_CONY_CNN_N_PROPS ids: model, output, model-users, precision(-in-use) */
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink", GST_PAD_SINK,
    GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_CONY_TOKENS_CAPS_STRING));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src", GST_PAD_SRC,
    GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_CONY_TOKENS_CAPS_STRING));

GType
gst_cony_vggish_postprocess_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    { GST_CONY_VGGISH_POSTPROCESS_NONE, "Raw embeddings", "none" },
    { GST_CONY_VGGISH_POSTPROCESS_TF, "PCA + 8-bit, truncated (TensorFlow vggish_postprocess.py)",
        "tf" },
    { GST_CONY_VGGISH_POSTPROCESS_TORCH, "PCA + 8-bit, rounded (torchvggish)", "torch" },
    { 0, NULL, NULL },
  };
  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstConyVggishPostprocess", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

GType
gst_cony_vggish_mode_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    { GST_CONY_VGGISH_MODE_WINDOW, "The CNN on each window, as trained", "window" },
    { GST_CONY_VGGISH_MODE_CONTINUAL, "Every frame through the CNN once (a streaming CNN)",
        "continual" },
    { 0, NULL, NULL },
  };
  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstConyVggishMode", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

#define gst_cony_vggish_parent_class parent_class
G_DEFINE_TYPE (GstConyVggish, gst_cony_vggish, GST_TYPE_ELEMENT);
GST_ELEMENT_REGISTER_DEFINE (conyvggish, "conyvggish", GST_RANK_NONE, GST_TYPE_CONY_VGGISH);

/* ------------------------------------------------------------------------ */

static void gst_cony_vggish_continual_reset (GstConyVggish *self);

static void
gst_cony_vggish_reset_window (GstConyVggish *self)
{
  gst_cony_vggish_continual_reset (self);
  self->anchor = GST_CLOCK_TIME_NONE;
  self->frames_in = 0;
  self->next_start = 0;
  self->head = 0;
  self->n_frames = 0;
  self->next_discont = TRUE;
  self->in_nonfinite = FALSE;
}

/* Postprocesses @n embeddings in self->out (in place) when asked to. */
static gboolean
gst_cony_vggish_postprocess (GstConyVggish *self, gsize n)
{
  GError *error = NULL;
  if (self->pp != GST_CONY_VGGISH_POSTPROCESS_NONE
      && !cony_cnn_postprocess (self->net.cnn, (ConyCnnPostprocess) self->pp, self->out, n,
          self->out, &error)) {
    GST_ELEMENT_ERROR (self, LIBRARY, FAILED, ("Postprocessing failed: %s", error->message),
        (NULL));
    g_clear_error (&error);
    return FALSE;
  }
  return TRUE;
}

/* ---- The level gate (min-level): conymel's per-frame level, averaged over a window. */

static GstFlowReturn gst_cony_vggish_flush_batch (GstConyVggish *self);

/* The window's level meta on @out, when its level is known. */
static void
gst_cony_vggish_add_level (GstBuffer *out, const GstConyVggishWindow *w, gboolean gated)
{
  if (!isnan (w->power))
    gst_buffer_add_cony_level_meta (out, 1, &w->power, &gated);
}

/* Keeps frame @i of @buf's level meta (NAN without one) for the frame stored at @slot. */
static void
gst_cony_vggish_store_power (GstConyVggish *self, const GstConyLevelMeta *level, gsize i,
    const gfloat *slot)
{
  gsize f = (gsize) (slot - self->frames) / self->dim;
  self->powers[f] = level && i < level->n ? level->power[i] : NAN;
}

/* Mean square over the next window's frames (NAN when one of them has no level). */
static gdouble
gst_cony_vggish_window_power (GstConyVggish *self)
{
  gdouble sum = 0.0;
  for (guint i = 0; i < self->win; i++)
    sum += self->powers[self->head + i];
  return sum / self->win;
}

/* Below the gate: no CNN; the batch waiting goes first, then a token of zeros marked
 * gated in its level meta. FALSE when the window is to be classified. */
static gboolean
gst_cony_vggish_gate_window (GstConyVggish *self, const GstConyVggishWindow *w, GstFlowReturn *ret)
{
  GST_OBJECT_LOCK (self);
  gdouble min_level = self->min_level;
  GST_OBJECT_UNLOCK (self);
  if (min_level <= -G_MAXDOUBLE)
    return FALSE;
  if (isnan (w->power)) {
    if (!self->warned_no_level)
      GST_ELEMENT_WARNING (self, STREAM, FORMAT, ("min-level needs the audio level from conymel"),
          ("the input tokens carry no level meta (put conymel right before conyvggish): every "
           "window is classified"));
    self->warned_no_level = TRUE;
    return FALSE;
  }
  if (gst_cony_level_db (w->power) >= min_level)
    return FALSE;
  *ret = gst_cony_vggish_flush_batch (self);
  if (*ret != GST_FLOW_OK)
    return TRUE;
  GstBuffer *out = gst_buffer_new_allocate (NULL, (gsize) self->out_dim * sizeof (gfloat), NULL);
  gst_buffer_memset (out, 0, 0, (gsize) self->out_dim * sizeof (gfloat));
  gboolean discont = w->discont;
  gst_cony_element_stamp (out, w->pts, w->duration, w->offset, 1, &discont);
  gst_cony_vggish_add_level (out, w, TRUE);
  GST_LOG_OBJECT (self, "window at %" GST_TIME_FORMAT ": %.1f dBFS, below the gate",
      GST_TIME_ARGS (w->pts), gst_cony_level_db (w->power));
  *ret = gst_pad_push (self->srcpad, out);
  return TRUE;
}

static GstFlowReturn
gst_cony_vggish_push_embedding (GstConyVggish *self, const gfloat *emb,
    const GstConyVggishWindow *w)
{
  GstBuffer *out = gst_buffer_new_memdup (emb, (gsize) self->out_dim * sizeof (gfloat));
  gboolean discont = w->discont;
  gst_cony_element_stamp (out, w->pts, w->duration, w->offset, 1, &discont);
  gst_cony_vggish_add_level (out, w, FALSE);
  return gst_pad_push (self->srcpad, out);
}

/* Runs the CNN on the windows waiting in the batch (one call) and pushes
 * their embeddings in order. */
static GstFlowReturn
gst_cony_vggish_flush_batch (GstConyVggish *self)
{
  guint n = self->n_pending;
  GstFlowReturn ret = GST_FLOW_OK;
  if (n == 0)
    return GST_FLOW_OK;
  self->n_pending = 0;
  GST_LOG_OBJECT (self, "running a batch of %u windows", n);
  cony_cnn_forward_batch (self->net.cnn, self->pending, n, self->out);
  if (!gst_cony_vggish_postprocess (self, n))
    return GST_FLOW_ERROR;
  for (guint i = 0; i < n && ret == GST_FLOW_OK; i++)
    ret = gst_cony_vggish_push_embedding (self, self->out + (gsize) i * self->out_dim,
        &self->pending_info[i]);
  return ret;
}

/* Windows per CNN call: the batch property in non-live pipelines (asked
 * upstream once per caps), 1 in live ones. */
static guint
gst_cony_vggish_batch_size (GstConyVggish *self)
{
  if (self->bsize <= 1)
    return 1;
  if (!self->live_known) {
    GstQuery *q = gst_query_new_latency ();
    gboolean live = FALSE;
    if (gst_pad_peer_query (self->sinkpad, q))
      gst_query_parse_latency (q, &live, NULL, NULL);
    gst_query_unref (q);
    self->live = live;
    self->live_known = TRUE;
    GST_DEBUG_OBJECT (self, "upstream is %slive: %u window(s) per CNN call", live ? "" : "not ",
        live ? 1 : self->bsize);
  }
  return self->live ? 1 : self->bsize;
}

/* The timing of the token whose window starts at frame @start since the anchor. */
static void
gst_cony_vggish_window_timing (GstConyVggish *self, guint64 start, GstConyVggishWindow *w)
{
  gint rn = self->in_info.rate_n, rd = self->in_info.rate_d;
  GstClockTime t0 = gst_cony_tokens_time (self->anchor, start, rn, rd);
  GstClockTime t1 = gst_cony_tokens_time (self->anchor, start + self->hop, rn, rd);
  w->pts = t0;
  w->duration = t1 - t0;
  w->offset = start / self->hop;
  w->discont = self->next_discont;
  w->power = NAN; /* the level gate's: measured by the window path only */
  self->next_discont = FALSE;
  GST_LOG_OBJECT (self, "window at frame %" G_GUINT64_FORMAT ": %" GST_TIME_FORMAT, start,
      GST_TIME_ARGS (t0));
}

static GstFlowReturn
gst_cony_vggish_run_window (GstConyVggish *self)
{
  GstConyVggishWindow w;
  GstFlowReturn ret = GST_FLOW_OK;

  gst_cony_vggish_window_timing (self, self->next_start, &w);
  w.power = gst_cony_vggish_window_power (self);

  const gfloat *window = self->frames + (gsize) self->head * self->dim;
  guint batch = gst_cony_vggish_batch_size (self);
  if (gst_cony_vggish_gate_window (self, &w, &ret)) {
    /* below the gate: pushed without the CNN */
  } else if (batch <= 1 && self->n_pending == 0) {
    cony_cnn_forward (self->net.cnn, window, self->out);
    ret = gst_cony_vggish_postprocess (self, 1)
        ? gst_cony_vggish_push_embedding (self, self->out, &w)
        : GST_FLOW_ERROR;
  } else {
    gsize wsize = (gsize) self->win * self->dim;
    memcpy (self->pending + self->n_pending * wsize, window, wsize * sizeof (gfloat));
    self->pending_info[self->n_pending++] = w;
    if (self->n_pending >= batch)
      ret = gst_cony_vggish_flush_batch (self);
  }

  /* Slide: the next window starts hop frames on and shares the rest with this one. */
  guint drop = MIN (self->hop, self->win);
  self->head += drop;
  self->n_frames -= drop;
  self->next_start += self->hop;

  return ret;
}

/* Replaces non-finite values by 0 and returns how many there were. */
static gsize
gst_cony_vggish_sanitize (gfloat *data, gsize n)
{
  gsize bad = 0;
  for (gsize i = 0; i < n; i++) {
    if (!isfinite (data[i])) {
      data[i] = 0.0f;
      bad++;
    }
  }
  return bad;
}

/* Warns once per run of buffers with non-finite values. */
static void
gst_cony_vggish_note_nonfinite (GstConyVggish *self, gsize bad, GstClockTime pts)
{
  if (gst_cony_element_run_starts (&self->in_nonfinite, bad > 0))
    GST_ELEMENT_WARNING (self, STREAM, FORMAT, ("Input tokens contain NaN or infinite values"),
        ("%" G_GSIZE_FORMAT " non-finite values in the buffer at %" GST_TIME_FORMAT
         " were replaced by 0",
            bad, GST_TIME_ARGS (pts)));
}

/* The store slot for the next frame of the window; frames move back to the start of
 * the store only when it is full (once per FRAMES_CAPACITY - 1 windows' worth). */
static gfloat *
gst_cony_vggish_next_frame_slot (GstConyVggish *self)
{
  if (self->head + self->n_frames == FRAMES_CAPACITY * self->win) {
    memmove (self->frames, self->frames + (gsize) self->head * self->dim,
        (gsize) self->n_frames * self->dim * sizeof (gfloat));
    memmove (self->powers, self->powers + self->head, self->n_frames * sizeof (gdouble));
    self->head = 0;
  }
  return self->frames + (gsize) (self->head + self->n_frames) * self->dim;
}

/* ---- mode=continual (docs/continual-cnn.md): frames go through the CNN in blocks of
 * the network's time stride, each once; token j (its window: frames [j hop, j hop +
 * window)) comes out when the frames its lookahead reads are in. ---- */

static void
gst_cony_vggish_continual_reset (GstConyVggish *self)
{
  if (self->cc != NULL)
    cony_cnn_continual_reset (self->cc);
  self->n_block = 0;
}

/* Runs the block (full, or padded at EOS) and pushes the tokens it completed. */
static GstFlowReturn
gst_cony_vggish_continual_run_block (GstConyVggish *self)
{
  guint64 first = cony_cnn_continual_get_tokens (self->cc);
  gsize n = cony_cnn_continual_push (self->cc, self->block, self->n_block, self->out);
  GstFlowReturn ret = GST_FLOW_OK;
  self->n_block = 0;
  if (n > 0 && !gst_cony_vggish_postprocess (self, n))
    return GST_FLOW_ERROR;
  for (gsize i = 0; i < n && ret == GST_FLOW_OK; i++) {
    GstConyVggishWindow w;
    gst_cony_vggish_window_timing (self, (first + i) * self->hop, &w);
    ret = gst_cony_vggish_push_embedding (self, self->out + i * self->out_dim, &w);
  }
  return ret;
}

static GstFlowReturn
gst_cony_vggish_continual_chain (GstConyVggish *self, const guint8 *data, gsize n, gsize *bad)
{
  GstFlowReturn ret = GST_FLOW_OK;
  for (gsize i = 0; i < n && ret == GST_FLOW_OK; i++) {
    gfloat *dst = self->block + (gsize) self->n_block * self->dim;
    memcpy (dst, data + i * self->dim * sizeof (gfloat), self->dim * sizeof (gfloat));
    *bad += gst_cony_vggish_sanitize (dst, self->dim);
    self->frames_in++;
    if (++self->n_block == self->cg.time_stride)
      ret = gst_cony_vggish_continual_run_block (self);
  }
  return ret;
}

/* EOS: the tokens window mode would give for these frames (every complete window, and
 * with pad-tail one over the frames no window covered) that are not out yet, their
 * lookahead and any window past the end read as silent frames. */
static void
gst_cony_vggish_continual_drain (GstConyVggish *self)
{
  guint64 n = self->frames_in;
  guint64 want = n >= self->win ? (n - self->win) / self->hop + 1 : 0;
  if (self->tail && n > 0 && (want == 0 || (want - 1) * self->hop + self->win < n))
    want++;
  GstFlowReturn fr = GST_FLOW_OK;
  while (fr == GST_FLOW_OK && cony_cnn_continual_get_tokens (self->cc) < want) {
    while (self->n_block < self->cg.time_stride) {
      gfloat *dst = self->block + (gsize) self->n_block++ * self->dim;
      for (guint i = 0; i < self->dim; i++)
        dst[i] = self->silence;
    }
    fr = gst_cony_vggish_continual_run_block (self);
  }
  GST_DEBUG_OBJECT (self, "EOS: %" G_GUINT64_FORMAT " tokens in all (%s)",
      cony_cnn_continual_get_tokens (self->cc), gst_flow_get_name (fr));
}

/* Sets up the continual stream at start (on the precision in use: the integer path for
 * a quantised file unless precision=float): the hop (stride, or the time stride when not
 * set) and the block. */
static gboolean
gst_cony_vggish_continual_start (GstConyVggish *self, const gchar *model, guint hop)
{
  GError *error = NULL;
  if (self->md != GST_CONY_VGGISH_MODE_CONTINUAL)
    return TRUE;
  if (self->min_level > DEFAULT_MIN_LEVEL) {
    /* a skipped block would leave the layers' rows stale for the windows after it */
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS, ("min-level works with mode=window only"),
        ("mode=continual puts every frame through the CNN once; min-level=%g would skip "
         "some; unset min-level or use mode=window",
            self->min_level));
    return FALSE;
  }
  self->cc = cony_cnn_continual_new (self->net.cnn, hop, &error);
  if (self->cc == NULL) {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS, ("mode=continual: %s", error->message),
        ("model=%s stride=%u", model, hop));
    g_clear_error (&error);
    return FALSE;
  }
  cony_cnn_continual_get_geometry (self->cc, &self->cg);
  self->hop = hop != 0 ? hop : self->cg.time_stride;
  self->block = g_new (gfloat, (gsize) self->cg.time_stride * self->dim);
  self->n_block = 0;
  GST_INFO_OBJECT (self,
      "continual: %u frames per row of the final map, %u rows a window, lookahead %u frames, "
      "hop %u",
      self->cg.time_stride, self->cg.columns, self->cg.lookahead, self->hop);
  return TRUE;
}

/* Frames a token's input reaches past its own duration (the caps' lookahead): the rest
 * of its window and, continual, what its last rows read past the window. */
static gint
gst_cony_vggish_lookahead_frames (GstConyVggish *self)
{
  gint la = (gint) self->win - (gint) self->hop;
  return self->md == GST_CONY_VGGISH_MODE_CONTINUAL ? la + (gint) self->cg.lookahead : la;
}

/* Frames from a token's first frame to the frame that completes it. */
static guint
gst_cony_vggish_latency_frames (GstConyVggish *self)
{
  guint lat = self->win - 1;
  return self->md == GST_CONY_VGGISH_MODE_CONTINUAL ? lat + self->cg.delay : lat;
}

static GstFlowReturn
gst_cony_vggish_chain (GstPad *pad, GstObject *parent, GstBuffer *buf)
{
  GstConyVggish *self = GST_CONY_VGGISH (parent);
  GstFlowReturn ret = GST_FLOW_OK;
  GstMapInfo map;
  gsize token_bytes = (gsize) self->dim * sizeof (gfloat);

  if (!gst_cony_element_check_caps_seen (GST_ELEMENT (self), self->have_info)) {
    gst_buffer_unref (buf);
    return GST_FLOW_NOT_NEGOTIATED;
  }
  gchar *unit = g_strdup_printf ("%u-float tokens", self->dim);
  gboolean mapped = gst_cony_element_map_units (GST_ELEMENT (self), buf, &map, token_bytes, unit,
      NULL);
  g_free (unit);
  if (!mapped) {
    gst_buffer_unref (buf);
    return GST_FLOW_ERROR;
  }

  GstClockTime pts = GST_BUFFER_PTS (buf);
  if (GST_BUFFER_IS_DISCONT (buf) || !GST_CLOCK_TIME_IS_VALID (self->anchor)) {
    GstClockTime anchor = pts;
    if (!GST_CLOCK_TIME_IS_VALID (anchor)) {
      /* No timestamp: continue the previous timeline, or start at 0. */
      anchor = GST_CLOCK_TIME_IS_VALID (self->anchor) ? gst_cony_tokens_time (self->anchor,
                   self->frames_in, self->in_info.rate_n, self->in_info.rate_d)
                                                      : 0;
    }
    if (self->frames_in > 0)
      GST_DEBUG_OBJECT (self, "discontinuity: restarting the window at %" GST_TIME_FORMAT,
          GST_TIME_ARGS (anchor));
    gst_cony_vggish_reset_window (self);
    self->anchor = anchor;
  }

  gsize n = map.size / token_bytes, bad = 0;
  const GstConyLevelMeta *level = gst_buffer_get_cony_level_meta (buf);
  if (self->cc != NULL)
    ret = gst_cony_vggish_continual_chain (self, map.data, n, &bad);
  for (gsize i = 0; i < n && ret == GST_FLOW_OK && self->cc == NULL; i++) {
    guint64 f = self->frames_in++;
    if (f < self->next_start)
      continue; /* stride > window: frames between windows */
    gfloat *dst = gst_cony_vggish_next_frame_slot (self);
    memcpy (dst, map.data + i * token_bytes, token_bytes);
    gst_cony_vggish_store_power (self, level, i, dst);
    bad += gst_cony_vggish_sanitize (dst, self->dim);
    self->n_frames++;
    if (self->n_frames == self->win)
      ret = gst_cony_vggish_run_window (self);
  }
  gst_cony_vggish_note_nonfinite (self, bad, pts);

  gst_buffer_unmap (buf, &map);
  gst_buffer_unref (buf);
  return ret;
}

/* The model's log-mel front end (its "frontend" metadata, read by libcony's
 * cony_mel_config_from_frontend(); VGGish's when absent) against the settings conymel
 * wrote into @caps (mel-* fields; tokens without them are not checked). A difference
 * is a negotiation error naming the setting: the scores would be silently wrong. */
static gboolean
gst_cony_vggish_frontend_matches (GstConyVggish *self, const GstCaps *caps)
{
  const GstStructure *s = gst_caps_get_structure (caps, 0);
  GError *error = NULL;
  ConyMelConfig want;
  gchar *fe_name = NULL;
  gboolean ok;
  gchar *path;

  GST_OBJECT_LOCK (self);
  path = g_strdup (self->net.model);
  GST_OBJECT_UNLOCK (self);
  ConySafetensors *st = cony_safetensors_open (path, &error);
  ok = st != NULL
      && cony_mel_config_from_frontend (cony_safetensors_metadata (st, "frontend"), &want, &fe_name,
          &error);
  if (!ok)
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Cannot read the model's front end"),
        ("%s: %s", path, error->message));
  for (guint i = 0; ok && i < CONY_MEL_N_SETTINGS; i++) {
    const char *name = cony_mel_setting_name (i);
    gchar *field = g_strconcat ("mel-", name, NULL);
    const GValue *v = gst_structure_get_value (s, field);
    gdouble want_v = cony_mel_config_get_setting (&want, i);
    gdouble have = v == NULL       ? want_v
        : G_VALUE_HOLDS_INT (v)    ? g_value_get_int (v)
        : G_VALUE_HOLDS_DOUBLE (v) ? g_value_get_double (v)
                                   : NAN;
    if (!(fabs (have - want_v) <= 1e-9 * MAX (1.0, fabs (want_v)))) {
      GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Front end does not match the model"),
          ("%s: the input has %s=%g but %s was trained with %s=%g (the %s front end: "
           "set conymel preset=%s or conymel %s=%g)",
              name, field, have, path, name, want_v, fe_name, fe_name, name, want_v));
      ok = FALSE;
    }
    g_free (field);
  }
  g_clear_pointer (&st, cony_safetensors_close);
  g_clear_error (&error);
  g_free (fe_name);
  g_free (path);
  return ok;
}

/* Names token caps refused by the sink's CAPS or ACCEPT_CAPS query (types other than
 * float32 never reach the CAPS event): upstream would only say "not-negotiated". */
static gboolean
gst_cony_vggish_sink_query (GstPad *pad, GstObject *parent, GstQuery *query)
{
  GstConyVggish *self = GST_CONY_VGGISH (parent);
  gboolean ok = gst_pad_query_default (pad, parent, query);
  if (self->net.cnn != NULL)
    gst_cony_element_name_token_refusal (GST_ELEMENT (self), &self->refusal_posted, self->dim,
        query);
  return ok;
}

/* An image CNN (RGB input, input_kind "image": the ImageNet MobileNet) would otherwise
 * fail later on the log-mel front end it does not have, pointing at conymel. */
static gboolean
gst_cony_vggish_is_audio_model (GstConyVggish *self, const gchar *model)
{
  const ConyCnn *cnn = self->net.cnn;
  guint c = cony_cnn_get_input_channels (cnn);
  if (c != 3 && g_strcmp0 (cony_cnn_get_metadata (cnn, "input_kind"), "image") != 0)
    return TRUE;
  GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS, ("%s is an image model, not an audio one", model),
      ("it takes %ux%u pictures of %u channels; conyvggish runs 1-channel log-mel CNNs on audio "
       "(e.g. models/audio/yamnet-adapted.safetensors, models/yamnet/yamnet.safetensors): for "
       "images or video use conyframeembed model=%s",
          cony_cnn_get_input_width (cnn), cony_cnn_get_input_height (cnn), c, model));
  return FALSE;
}

static gboolean
gst_cony_vggish_set_sink_caps (GstConyVggish *self, GstCaps *caps)
{
  GstConyTokenInfo info;
  gchar *why = NULL;

  if (!gst_cony_tokens_info_from_caps (&info, caps, &why)) {
    gst_cony_element_refuse_tokens (GST_ELEMENT (self), &self->refusal_posted, self->dim, caps,
        why);
    g_free (why);
    return FALSE;
  }
  if (!gst_cony_vggish_frontend_matches (self, caps))
    return FALSE;
  if (info.dim != self->dim) {
    /* A definite misconfiguration (e.g. conymel n-mels): say so on the bus. */
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Token size does not match the model"),
        ("the model takes %u floats per token (input width x channels), the input has %u",
            self->dim, info.dim));
    return FALSE;
  }
  if (info.rate_n <= 0) {
    gst_cony_element_refuse_tokens (GST_ELEMENT (self), &self->refusal_posted, self->dim, caps,
        "a fixed token rate (framerate > 0) is needed to time-stamp the windows");
    return FALSE;
  }

  gboolean same = self->have_info && gst_cony_tokens_info_same_tokens (&info, &self->in_info)
      && info.lookahead_n == self->in_info.lookahead_n
      && info.lookahead_d == self->in_info.lookahead_d;
  if (self->have_info && !same) {
    GST_DEBUG_OBJECT (self, "token caps changed: restarting the window");
    gst_cony_vggish_reset_window (self);
  }
  self->in_info = info;
  self->have_info = TRUE;
  self->refusal_posted = FALSE;
  gdouble log_offset = 0.01; /* VGGish's, for tokens that do not say */
  gst_structure_get_double (gst_caps_get_structure (caps, 0), "mel-log-offset", &log_offset);
  self->silence = (gfloat) log (log_offset > 0 ? log_offset : 0.01);
  if (same && gst_pad_has_current_caps (self->srcpad))
    return TRUE;

  GstConyTokenInfo out = { self->out_dim, 1, 0, 1, 0, 1 };
  if (!gst_util_fraction_multiply (info.rate_n, info.rate_d, 1, (gint) self->hop, &out.rate_n,
          &out.rate_d))
    return FALSE;
  /* An embedding lasts hop frames but reads window frames, the last of which
   * reads its own lookahead further (gstconytokens.h). */
  gint la_n, la_d;
  if (!gst_util_fraction_multiply (gst_cony_vggish_lookahead_frames (self), 1, info.rate_d,
          info.rate_n, &la_n, &la_d)
      || !gst_util_fraction_add (la_n, la_d, info.lookahead_n, info.lookahead_d, &out.lookahead_n,
          &out.lookahead_d))
    return FALSE;
  GstCaps *src = gst_cony_tokens_caps_new (&out);
  if (src) {
    gst_cony_tokens_caps_set_source (src, self->net.source.name, self->net.source.sha256,
        self->net.source.output);
    gst_cony_tokens_caps_set_mode (src,
        self->md == GST_CONY_VGGISH_MODE_CONTINUAL ? "continual" : "window");
  }
  return gst_cony_element_push_caps (self->srcpad, src);
}

/* EOS: the frames no window has covered yet (the previous window ended win - hop
 * frames into the ones held) as one more window, padded with silent frames
 * (pad-tail), then pushed with any batch; or dropped. */
static void
gst_cony_vggish_drain_tail (GstConyVggish *self)
{
  if (self->cc != NULL) {
    gst_cony_vggish_continual_drain (self);
    return;
  }
  gboolean uncovered = self->n_frames > 0
      && (self->next_start == 0 || (guint64) self->n_frames + self->hop > self->win);
  if (!uncovered || !self->tail || self->net.cnn == NULL) {
    GST_DEBUG_OBJECT (self, "EOS: %u frames of an incomplete window dropped", self->n_frames);
    return;
  }
  GST_DEBUG_OBJECT (self, "EOS: %u frames padded to a window of %u", self->n_frames, self->win);
  while (self->n_frames < self->win) {
    gfloat *dst = gst_cony_vggish_next_frame_slot (self);
    for (guint i = 0; i < self->dim; i++)
      dst[i] = self->silence;
    self->powers[(dst - self->frames) / self->dim] = 0.0; /* padding: silence */
    self->n_frames++;
  }
  GstFlowReturn fr = gst_cony_vggish_run_window (self);
  if (fr == GST_FLOW_OK)
    fr = gst_cony_vggish_flush_batch (self);
  self->n_frames = 0; /* (the slide kept win - hop of the padding) */
  if (fr != GST_FLOW_OK)
    GST_DEBUG_OBJECT (self, "pushing the padded tail window: %s", gst_flow_get_name (fr));
}

static gboolean
gst_cony_vggish_sink_event (GstPad *pad, GstObject *parent, GstEvent *event)
{
  GstConyVggish *self = GST_CONY_VGGISH (parent);

  GST_LOG_OBJECT (self, "event %" GST_PTR_FORMAT, event);
  /* Windows waiting in a batch go out before any serialized event; a flush
   * drops them. */
  if (GST_EVENT_TYPE (event) == GST_EVENT_FLUSH_STOP)
    self->n_pending = 0;
  else if (GST_EVENT_IS_SERIALIZED (event) && self->n_pending > 0) {
    GstFlowReturn fr = gst_cony_vggish_flush_batch (self);
    if (fr != GST_FLOW_OK)
      GST_DEBUG_OBJECT (self, "pushing the batch before %s: %s", GST_EVENT_TYPE_NAME (event),
          gst_flow_get_name (fr));
  }
  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_CAPS: {
      GstCaps *caps;
      gst_event_parse_caps (event, &caps);
      self->live_known = FALSE;
      gboolean ok = self->net.cnn != NULL && gst_cony_vggish_set_sink_caps (self, caps);
      gst_event_unref (event);
      return ok;
    }
    case GST_EVENT_FLUSH_STOP: gst_cony_vggish_reset_window (self); break;
    case GST_EVENT_GAP:
      /* No tokens for a while: the next window starts after the gap. */
      gst_cony_vggish_reset_window (self);
      break;
    case GST_EVENT_EOS: gst_cony_vggish_drain_tail (self); break;
    default: break;
  }
  return gst_pad_event_default (pad, parent, event);
}

/* Own latency: the last frame of a window arrives (window - 1) frames after
 * the window's first frame, whose time is the output PTS. */
static gboolean
gst_cony_vggish_own_latency (GstConyVggish *self, GstClockTime *lat)
{
  if (!self->have_info || self->win == 0)
    return FALSE;
  *lat = gst_util_uint64_scale_ceil ((guint64) gst_cony_vggish_latency_frames (self)
          * (guint64) self->in_info.rate_d,
      GST_SECOND, (guint64) self->in_info.rate_n);
  return TRUE;
}

static gboolean
gst_cony_vggish_src_query (GstPad *pad, GstObject *parent, GstQuery *query)
{
  GstConyVggish *self = GST_CONY_VGGISH (parent);

  if (GST_QUERY_TYPE (query) == GST_QUERY_LATENCY) {
    GstClockTime lat;
    if (!gst_cony_vggish_own_latency (self, &lat))
      lat = GST_CLOCK_TIME_NONE; /* the token rate is not known yet */
    return gst_cony_element_query_latency (GST_ELEMENT (self), self->sinkpad, query, lat);
  }
  return gst_pad_query_default (pad, parent, query);
}

static gboolean
gst_cony_vggish_start (GstElement *element)
{
  GstConyVggish *self = GST_CONY_VGGISH (element);
  GError *error = NULL;
  gchar *model = NULL, *pca;

  GST_OBJECT_LOCK (self);
  pca = g_strdup (self->pca_model);
  self->pp = self->postprocess;
  self->win = self->window;
  self->hop = self->stride;
  self->bsize = self->batch;
  self->tail = self->pad_tail;
  self->md = self->mode;
  guint cc_hop = self->stride_set ? self->stride : 0;
  GST_OBJECT_UNLOCK (self);

  if (!gst_cony_cnn_element_open (element, &self->net, &model))
    goto fail;
  if (!gst_cony_vggish_is_audio_model (self, model))
    goto fail;
  if (self->net.output_in_use == GST_CONY_VGGISH_OUTPUT_EMBEDDING
      && self->pp != GST_CONY_VGGISH_POSTPROCESS_NONE) {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS, ("postprocess needs output=scores"),
        ("the PCA postprocess applies to the network's last layer, not to the embedding"));
    goto fail;
  }
  if (pca != NULL && *pca != '\0' && !cony_cnn_load_pca (self->net.cnn, pca, &error)) {
    GST_ELEMENT_ERROR (self, RESOURCE, OPEN_READ,
        ("Could not load the PCA parameters: %s", error->message), ("pca-model=%s", pca));
    goto fail;
  }
  if (self->pp != GST_CONY_VGGISH_POSTPROCESS_NONE && !cony_cnn_has_pca (self->net.cnn)) {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS, ("postprocess needs PCA parameters"),
        ("%s has no pca_eigen_vectors/pca_means; set pca-model or postprocess=none", model));
    goto fail;
  }
  if (self->win == 0)
    self->win = cony_cnn_get_input_height (self->net.cnn);
  if (cony_cnn_get_input_height (self->net.cnn) != self->win) {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS, ("window does not match the model"),
        ("window=%u frames but %s takes %u frames per example", self->win, model,
            cony_cnn_get_input_height (self->net.cnn)));
    goto fail;
  }
  self->dim = cony_cnn_get_input_width (self->net.cnn)
      * cony_cnn_get_input_channels (self->net.cnn);
  self->out_dim = cony_cnn_get_output_size (self->net.cnn);
  if (!gst_cony_vggish_continual_start (self, model, cc_hop))
    goto fail;
  self->frames = g_new0 (gfloat, (gsize) FRAMES_CAPACITY * self->win * self->dim);
  gsize out_tokens = self->cc ? cony_cnn_continual_max_tokens (self->cc, self->cg.time_stride) : 1;
  self->powers = g_new0 (gdouble, (gsize) FRAMES_CAPACITY * self->win);
  self->warned_no_level = FALSE;
  self->out = g_new0 (gfloat, (gsize) self->out_dim * MAX (self->bsize, out_tokens));
  if (self->bsize > 1) {
    self->pending = g_new (gfloat, (gsize) self->bsize * self->win * self->dim);
    self->pending_info = g_new (GstConyVggishWindow, self->bsize);
  }
  self->n_pending = 0;
  self->live_known = FALSE;
  self->have_info = FALSE;
  self->refusal_posted = FALSE;
  gst_cony_vggish_reset_window (self);
  GST_INFO_OBJECT (self, "loaded %s: %ux%u -> %u, %" G_GUINT64_FORMAT " parameters", model,
      self->win, self->dim, self->out_dim, cony_cnn_get_n_params (self->net.cnn));
  g_free (model);
  g_free (pca);
  return TRUE;

fail:
  g_clear_error (&error);
  g_clear_pointer (&self->cc, cony_cnn_continual_free);
  g_clear_pointer (&self->block, g_free);
  gst_cony_cnn_element_close (element, &self->net);
  g_free (model);
  g_free (pca);
  return FALSE;
}

static void
gst_cony_vggish_stop (GstElement *element)
{
  GstConyVggish *self = GST_CONY_VGGISH (element);
  g_clear_pointer (&self->cc, cony_cnn_continual_free);
  g_clear_pointer (&self->block, g_free);
  gst_cony_cnn_element_close (element, &self->net);
  g_clear_pointer (&self->frames, g_free);
  g_clear_pointer (&self->powers, g_free);
  g_clear_pointer (&self->out, g_free);
  g_clear_pointer (&self->pending, g_free);
  g_clear_pointer (&self->pending_info, g_free);
  self->n_pending = 0;
  self->have_info = FALSE;
  self->refusal_posted = FALSE;
  self->n_frames = 0;
  self->anchor = GST_CLOCK_TIME_NONE;
}

static GstStateChangeReturn
gst_cony_vggish_change_state (GstElement *element, GstStateChange transition)
{
  return gst_cony_element_change_state (element, transition, GST_ELEMENT_CLASS (parent_class),
      gst_cony_vggish_start, gst_cony_vggish_stop);
}

/* ------------------------------------------------------------------------ */

static void
gst_cony_vggish_set_property (GObject *object, guint prop_id, const GValue *value,
    GParamSpec *pspec)
{
  GstConyVggish *self = GST_CONY_VGGISH (object);

  if (!gst_cony_element_property_settable (object, pspec))
    return;

  if (gst_cony_cnn_element_set_property (GST_ELEMENT (self), &self->net, prop_id, value))
    return;
  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_PCA_MODEL:
      g_free (self->pca_model);
      self->pca_model = g_value_dup_string (value);
      break;
    case PROP_POSTPROCESS: self->postprocess = g_value_get_enum (value); break;
    case PROP_WINDOW: self->window = g_value_get_uint (value); break;
    case PROP_STRIDE:
      self->stride = g_value_get_uint (value);
      self->stride_set = TRUE;
      break;
    case PROP_BATCH: self->batch = g_value_get_uint (value); break;
    case PROP_PAD_TAIL: self->pad_tail = g_value_get_boolean (value); break;
    case PROP_MODE: self->mode = g_value_get_enum (value); break;
    case PROP_MIN_LEVEL: self->min_level = g_value_get_double (value); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_vggish_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  GstConyVggish *self = GST_CONY_VGGISH (object);

  if (gst_cony_cnn_element_get_property (GST_ELEMENT (self), &self->net, prop_id, value))
    return;
  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_PCA_MODEL: g_value_set_string (value, self->pca_model); break;
    case PROP_POSTPROCESS: g_value_set_enum (value, self->postprocess); break;
    case PROP_WINDOW: g_value_set_uint (value, self->window); break;
    case PROP_STRIDE: g_value_set_uint (value, self->stride); break;
    case PROP_BATCH: g_value_set_uint (value, self->batch); break;
    case PROP_PAD_TAIL: g_value_set_boolean (value, self->pad_tail); break;
    case PROP_MODE: g_value_set_enum (value, self->mode); break;
    case PROP_MIN_LEVEL: g_value_set_double (value, self->min_level); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_vggish_finalize (GObject *object)
{
  GstConyVggish *self = GST_CONY_VGGISH (object);

  gst_cony_vggish_stop (GST_ELEMENT (self));
  gst_cony_cnn_element_finalize (GST_ELEMENT (self), &self->net);
  g_free (self->pca_model);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_cony_vggish_class_init (GstConyVggishClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  const GParamFlags flags = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY;

  GST_DEBUG_CATEGORY_INIT (gst_cony_vggish_debug, "conyvggish", 0, "VGGish-style embeddings");

  gobject_class->set_property = gst_cony_vggish_set_property;
  gobject_class->get_property = gst_cony_vggish_get_property;
  gobject_class->finalize = gst_cony_vggish_finalize;

  /**
   * GstConyVggish:pca-model:
   *
   * Optional safetensors file with pca_eigen_vectors and pca_means, for models
   * that do not carry them (the official release ships them separately).
   */
  g_object_class_install_property (gobject_class, PROP_PCA_MODEL,
      g_param_spec_string ("pca-model", "PCA model",
          "Optional safetensors file with pca_eigen_vectors and pca_means", DEFAULT_PCA_MODEL,
          flags));
  /**
   * GstConyVggish:postprocess:
   *
   * The official release's PCA + 8-bit postprocess (needs PCA parameters).
   */
  g_object_class_install_property (gobject_class, PROP_POSTPROCESS,
      g_param_spec_enum ("postprocess", "Postprocess",
          "PCA + 8-bit quantisation of the embeddings (values 0..255, still float32)",
          GST_TYPE_CONY_VGGISH_POSTPROCESS, DEFAULT_POSTPROCESS, flags));
  /**
   * GstConyVggish:window:
   *
   * Input frames per window: 0 (the default) takes the model's input height
   * (96 for VGGish, 0.96 s of 10 ms frames); any other value must equal it,
   * or the element fails to start with an error naming both.
   */
  g_object_class_install_property (gobject_class, PROP_WINDOW,
      g_param_spec_uint ("window", "Window",
          "Input frames per window (0 = the model's input height; else must equal it)", 0, 1 << 20,
          DEFAULT_WINDOW, flags));
  /**
   * GstConyVggish:stride:
   *
   * Input frames between the starts of consecutive windows (25 = 0.25 s of
   * 10 ms frames). Windows overlap when stride < window; frames between
   * windows are skipped when stride > window.
   */
  g_object_class_install_property (gobject_class, PROP_STRIDE,
      g_param_spec_uint ("stride", "Stride",
          "Input frames between the starts of consecutive windows", 1, 1 << 20, DEFAULT_STRIDE,
          flags));

  /**
   * GstConyVggish:batch:
   *
   * Windows per CNN call when upstream is not live (files): complete windows
   * wait until @batch of them are there (or a serialized event such as EOS
   * arrives), then run together, so the FC layers read their weights once per
   * batch instead of once per window, and the conv layers share their sgemms
   * (with the full-size VGGish on one core, 1.6-2.3x the throughput at
   * 64). Live pipelines (upstream answers the LATENCY query with live=TRUE)
   * always run each window as it completes, so this adds no latency there.
   * Output values equal batch=1 to float rounding.
   */
  g_object_class_install_property (gobject_class, PROP_BATCH,
      g_param_spec_uint ("batch", "Batch",
          "Windows per CNN call in non-live pipelines (live ones always use 1)", 1, 128,
          DEFAULT_BATCH, flags));
  /**
   * GstConyVggish:pad-tail:
   *
   * At EOS, frames no window has covered yet (a stream shorter than one
   * window, or the tail after the last full one) give one more window padded
   * with silent frames, as YAMNet pads its input (default); false drops them,
   * as VGGish does.
   */
  g_object_class_install_property (gobject_class, PROP_PAD_TAIL,
      g_param_spec_boolean ("pad-tail", "Pad tail",
          "At EOS, one more window over the frames no window covered yet, padded with "
          "silence (YAMNet); false: drop them (VGGish)",
          DEFAULT_PAD_TAIL, flags));
  /**
   * GstConyVggish:min-level:
   *
   * The level gate: a window whose audio is quieter than this (dBFS, the mean square of
   * its samples, 10 log10; a full-scale sine is -3 dBFS) runs no CNN. Its token is pushed
   * all the same, zeros marked as below the gate, with the window's exact times, and
   * conytransformer reports its step as below the gate (`gated`). The level comes from
   * conymel (the mean square of each frame's hop, averaged over the window's frames: its
   * first 0.96 s of 0.975 s for YAMNet), so conymel must feed this element; without it the
   * gate is off and a warning says so. mode=window only: with mode=continual it is an
   * error at start. Default: off. Can be changed while playing.
   */
  g_object_class_install_property (gobject_class, PROP_MIN_LEVEL,
      g_param_spec_double ("min-level", "Minimum level",
          "Windows quieter than this (dBFS) run no CNN and are reported as below the gate "
          "(default: off)",
          -G_MAXDOUBLE, 0.0, DEFAULT_MIN_LEVEL,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING));

  /**
   * GstConyVggish:mode:
   *
   * `window` (default): the CNN on each window, as every shipped model was trained.
   * `continual`: every frame through the CNN once (a streaming CNN, docs/continual-cnn.md):
   * each layer pads time only at the stream's start (and after a discontinuity), so a
   * token differs from its window's per-window result near the window's edges; it runs
   * on the precision in use (the integer path for a quantised file), the stride must be a multiple of the
   * network's time stride (32 frames for YAMNet; when stride is not set, the time
   * stride), a token comes out lookahead frames (157 for YAMNet) past its window, in
   * blocks of the time stride (LATENCY: window - 1 + 160 frames for YAMNet), the output
   * caps say cnn-mode=continual (a classifier trained on window tokens refuses them),
   * and batch is ignored.
   */
  g_object_class_install_property (gobject_class, PROP_MODE,
      g_param_spec_enum ("mode", "Mode",
          "window: the CNN on each window; continual: every frame through the CNN once "
          "(stride a multiple of the network's time stride, 32 frames for YAMNet)",
          GST_TYPE_CONY_VGGISH_MODE, DEFAULT_MODE, flags));

  /**
   * GstConyVggish:model:
   *
   * Path of the safetensors model file (required). Loaded on READY->PAUSED.
   * A relative name not found here is looked up in $CONY_MODEL_PATH and the
   * installed models (e.g. audio/yamnet-adapted.safetensors; docs/elements.md,
   * "Model names").
   */
  /**
   * GstConyVggish:output:
   *
   * What each window gives: `scores` (default), the network's last layer
   * (VGGish and the shipped models: their embedding; YAMNet: its 521 sigmoid
   * scores), or `embedding`, the global average pool that feeds the FC head
   * (YAMNet: 1024-d); a network without one fails to start with an error.
   * The output token's dimension follows (src caps dimensions=N:1).
   */
  /**
   * GstConyVggish:precision:
   *
   * The arithmetic of the CNN: `auto` (default) lets the model file decide:
   * a file converted from an int8 .tflite (YAMNet, by training/convert_tflite.py)
   * records its activations' scales and zero points and runs TFLite's integer inference (int8
   * activations and weights, int32 accumulation, outputs dequantised; its
   * scores are ArmNN's to one int8 step); other files run in float. `float`
   * forces the float engine on the same weights; `int8` fails to start on a
   * file without activation quantisation. See precision-in-use.
   */
  /**
   * GstConyVggish:precision-in-use:
   *
   * What runs once the element has started (NULL before): e.g. "int8, all 30
   * layers (avx2 kernels)", "float (the file has no int8 activation
   * quantisation)".
   */
  gst_cony_cnn_element_install_properties (gobject_class, PROP_CNN, &cnn_info);

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "VGGish embeddings",
      "Filter/Analyzer/Audio",
      "Runs a CNN (VGG-style or MobileNet-v1) on sliding windows of log-mel tokens and outputs one embedding or score vector per window",
      "gst-cony authors");

  element_class->change_state = GST_DEBUG_FUNCPTR (gst_cony_vggish_change_state);
  gst_type_mark_as_plugin_api (GST_TYPE_CONY_VGGISH_POSTPROCESS, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_CONY_VGGISH_OUTPUT, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_CONY_VGGISH_MODE, 0);
}

static void
gst_cony_vggish_init (GstConyVggish *self)
{
  self->sinkpad = gst_pad_new_from_static_template (&sink_template, "sink");
  gst_pad_set_chain_function (self->sinkpad, GST_DEBUG_FUNCPTR (gst_cony_vggish_chain));
  gst_pad_set_event_function (self->sinkpad, GST_DEBUG_FUNCPTR (gst_cony_vggish_sink_event));
  gst_pad_set_query_function (self->sinkpad, GST_DEBUG_FUNCPTR (gst_cony_vggish_sink_query));
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);

  self->srcpad = gst_pad_new_from_static_template (&src_template, "src");
  gst_pad_set_query_function (self->srcpad, GST_DEBUG_FUNCPTR (gst_cony_vggish_src_query));
  gst_pad_use_fixed_caps (self->srcpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);

  self->postprocess = DEFAULT_POSTPROCESS;
  self->window = DEFAULT_WINDOW;
  self->stride = DEFAULT_STRIDE;
  self->batch = DEFAULT_BATCH;
  self->pad_tail = DEFAULT_PAD_TAIL;
  self->mode = DEFAULT_MODE;
  self->min_level = DEFAULT_MIN_LEVEL;
  gst_cony_cnn_element_init (&self->net, PROP_CNN, &cnn_info);
  self->anchor = GST_CLOCK_TIME_NONE;
}
