/* Token caps shared by the cony elements.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A token stream follows NNStreamer's static tensor convention, so NNStreamer
 * elements can consume it without linking against us:
 *
 *   other/tensors, format=static, num_tensors=1, types=float32,
 *                  dimensions=D:K, framerate=F
 *
 * - dimensions are innermost first: D floats per token (64 mel bands, 128
 *   embedding values, ...), K tokens per buffer (1 by default). A buffer is
 *   K x D float32 values, token after token. Trailing ":1" dimensions (as
 *   NNStreamer writes up to rank 4) are accepted when parsing.
 * - framerate is BUFFERS per second, as in NNStreamer (tensor_converter with
 *   frames-per-tensor K announces rate / K). The TOKEN rate is F x K. It is
 *   a fraction in general: 16 kHz with a 160-sample hop gives 100/1 tokens/s,
 *   a 256-sample hop 125/2; VGGish windows every 25 frames give 4/1.
 *
 * Timestamps: token i after the last discontinuity has
 *   PTS = anchor + i / token_rate   (gst_cony_tokens_time(), integer scaling)
 * and duration = PTS(i + 1) - PTS(i), so tokens tile the timeline exactly and
 * nothing is ever accumulated in floating point.
 *
 * Input span: a token is computed from input (audio samples, a video frame)
 * that starts at its PTS but need not end at PTS + duration: a VGGish
 * embedding, one every 0.25 s, looks at 0.975 s of audio. The optional caps
 * field `lookahead` (fraction, seconds, may be negative) says by how much a
 * token's input outlasts its duration: token i covers exactly
 *   [PTS(i), PTS(i) + duration(i) + lookahead)
 * conymel: window - hop samples (15 ms); conyvggish: its own (window - stride)
 * frames plus its input's lookahead (710 + 15 = 725 ms); conyframeembed:
 * -(every - 1) frames (a token lasts `every` frames but embeds the first).
 * Absent (NNStreamer sources): 0, the token covers its own duration.
 * A step of k tokens covers [PTS of its first, end of its last + lookahead),
 * which also holds for the k patch tokens of one frame.
 */
#pragma once
#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_CONY_TOKENS_CAPS_STRING \
  "other/tensors, format = (string) static, num_tensors = (int) 1, " \
  "types = (string) float32, framerate = (fraction) [ 0/1, 2147483647/1 ]"

typedef struct {
  guint dim;                     /* floats per token (innermost dimension) */
  guint tokens_per_buffer;       /* second dimension */
  gint rate_n, rate_d;           /* tokens per second; 0/1 when unknown */
  gint lookahead_n, lookahead_d; /* input past a token's end, seconds (caps `lookahead`); 0/1 */
} GstConyTokenInfo;

/* Fixed caps for @info. NULL when the buffer rate overflows a fraction. */
GstCaps *gst_cony_tokens_caps_new (const GstConyTokenInfo *info);

/* Parses fixed token caps. On failure returns FALSE and sets *@why (g_free). */
gboolean gst_cony_tokens_info_from_caps (GstConyTokenInfo *info, const GstCaps *caps, gchar **why);

/* TRUE when both describe the same tokens (dimension and token rate), whatever
 * the number of tokens per buffer. */
gboolean gst_cony_tokens_info_same_tokens (const GstConyTokenInfo *a, const GstConyTokenInfo *b);

/* The lookahead in nanoseconds, signed (0 when the caps had none). */
gint64 gst_cony_tokens_lookahead_ns (const GstConyTokenInfo *info);

/* Times near the end of the 64-bit clock: every sum of times in the elements goes
 * through these, which saturate at GST_CONY_TIME_MAX (the last valid clock time)
 * instead of wrapping, so that start <= end holds for any PTS. NONE stays NONE. */
#define GST_CONY_TIME_MAX (GST_CLOCK_TIME_NONE - 1)
GstClockTime gst_cony_time_add (GstClockTime t, guint64 d);
/* t + d for a signed @d, clamped to [0, GST_CONY_TIME_MAX]. */
GstClockTime gst_cony_time_add_signed (GstClockTime t, gint64 d);
/* a * b, saturating likewise (a frame duration times k frames); NONE stays NONE. */
GstClockTime gst_cony_time_mul (GstClockTime a, guint64 b);

/* Buffer time @t as running time (@running) or stream time in the TIME segment @seg,
 * @t first clamped into the segment's [start, stop]: a result's span that reaches past
 * the segment (the tail window padded at EOS) ends where the segment does instead of
 * being NONE. NONE when @t is NONE or @seg is not in TIME. */
GstClockTime gst_cony_segment_time (const GstSegment *seg, GstClockTime t, gboolean running);

/* anchor + index * rate_d / rate_n seconds, in integer nanoseconds (rounded
 * down; saturating, as gst_cony_time_add()). @anchor must be valid and @rate_n > 0. */
GstClockTime gst_cony_tokens_time (GstClockTime anchor, guint64 index, gint rate_n, gint rate_d);

/* Where tokens come from, for pairing a classifier with the CNN it was trained on
 * (docs/model-format.md): writes the CNN file's base name @cnn, the SHA-256 of its
 * bytes (hex) @sha256 and which output the tokens are, @output ("embedding": the pooled
 * embedding; "scores": the last layer), into @caps as the fields cnn, cnn-sha256 and
 * cnn-output, each only when not NULL. conyvggish and conyframeembed announce their
 * tokens so; conytransformer and conyfuse compare them with their model's record. */
void gst_cony_tokens_caps_set_source (GstCaps *caps, const gchar *cnn, const gchar *sha256,
    const gchar *output);
/* How the CNN ran (conyvggish mode): "window" (on each window) or "continual" (a
 * streaming CNN, docs/continual-cnn.md), into @caps as the field cnn-mode. A classifier
 * compares it with its model's cnn_mode ("window" when not recorded). */
void gst_cony_tokens_caps_set_mode (GstCaps *caps, const gchar *mode);

G_END_DECLS
