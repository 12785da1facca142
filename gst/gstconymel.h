/* conymel: audio -> log-mel token stream.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#pragma once
#include <gst/gst.h>
#include <gst/audio/audio.h>

#include "cony/mel.h"
#include "gstconyelements.h"

G_BEGIN_DECLS

#define GST_TYPE_CONY_MEL (gst_cony_mel_get_type ())
G_DECLARE_FINAL_TYPE (GstConyMel, gst_cony_mel, GST, CONY_MEL, GstElement)

/* Named front ends: setting #GstConyMel:preset sets every log-mel property. */
typedef enum
{
  GST_CONY_MEL_PRESET_VGGISH = CONY_MEL_PRESET_VGGISH, /* log(mel + 0.01) */
  GST_CONY_MEL_PRESET_YAMNET = CONY_MEL_PRESET_YAMNET, /* log(mel + 0.001), otherwise VGGish's */
} GstConyMelPreset;

#define GST_TYPE_CONY_MEL_PRESET (gst_cony_mel_preset_get_type ())
GType gst_cony_mel_preset_get_type (void);

struct _GstConyMel {
  GstElement parent;

  GstPad *sinkpad;
  GstPad *srcpad;

  /* Properties (object lock). Copied into the stream state on READY->PAUSED. */
  guint sample_rate;
  guint window_length;
  guint hop_length;
  guint fft_length; /* 0: smallest power of two >= window_length */
  guint n_mels;
  gdouble fmin;
  gdouble fmax;
  gdouble log_offset;
  guint frames_per_buffer;
  GstConyMelPreset preset; /* the preset set last */

  /* Stream state (streaming thread; created in READY->PAUSED). */
  ConyMel *mel;
  ConyMelConfig config;
  guint fpb;           /* frames per output buffer */
  gint rate_n, rate_d; /* frames per second (sample_rate / hop, reduced) */
  GstAudioInfo info;
  gboolean have_info;
  gboolean refusal_posted; /* the caps refusal was named (cleared by accepted caps, stop) */
  GstAudioStreamAlign *align;
  GstClockTime anchor;   /* time of sample 0 of the mel counter; NONE: not anchored */
  GstBuffer *batch;      /* the next output buffer (fpb x n_mels floats), mapped */
  GstMapInfo batch_map;  /* frames are popped straight into batch_map.data */
  guint batch_len;       /* frames in batch */
  guint64 batch_first;   /* frame index (since anchor) of batch[0] */
  gdouble *batch_power;  /* fpb: each batched frame's hop mean square (the level meta) */
  guint src_k;           /* tokens per buffer in the caps last pushed (0: none) */
  gboolean next_discont; /* flag the next output buffer DISCONT */
  gboolean in_nonfinite; /* the previous buffer had NaN/Inf samples */
  guint64 n_nonfinite;   /* samples replaced since start */
};

G_END_DECLS
