/* Continual (streaming) CNN: every input frame goes through the network once.
 *
 * The time axis of the input (the height: a log-mel patch's frames) becomes a
 * stream. Each conv-stack layer keeps the last input rows its kernel still needs
 * (3x3 convs and depthwise convs: up to two, 2x2 max-pools: one, 1x1 convs: none)
 * and computes each output row once, as soon as the rows it reads have arrived,
 * with the same kernels as cony_cnn_forward() (src/cnn/cnn-forward.c) on a slab of
 * rows. Each layer pads the time axis only at the start of the stream (its SAME
 * padding before the map: zeros); everywhere else a row sees its real
 * neighbours. The width (mel bands) keeps its SAME padding. A step's output is
 * the network's head on the last window's worth of rows of the final map:
 * averaged (global average pool: YAMNet's embedding and scores) or flattened
 * (VGGish's FC input), as for one window, so on rows whose computation never
 * touched a window edge the two agree. docs/continual-cnn.md has the semantics,
 * the latency and how far the result is from per-window inference.
 *
 * Geometry, for an input of H frames per window and layers of total time stride S
 * (the product of the strides: 32 for YAMNet, 16 for VGGish): H and the hop must
 * be multiples of S; a window holds K = H / S rows of the final map. Token j
 * covers the nominal window of frames [j hop, j hop + H) and reads the frames up
 * to lookahead past its end (157 for YAMNet: each centred 3-tap layer waits for
 * one row of its own, each stride-2 one for one input row) and from history
 * before its start.
 *
 * Supported: VGG-style networks and MobileNet-v1 (YAMNet), on the float engine or on
 * the integer path (a quantised file whose precision is not FLOAT when the stream is
 * made: its quantised layers keep int8 rows, with the per-window path's kernels and
 * TFLite's arithmetic; the start's padding is each layer's input zero point, the real
 * 0). Refused with CONY_ERROR_INVALID: residual adds (MobileNet-v2), center_height and
 * input normalisation (the latter is per window or unused by audio networks), and
 * window or hop sizes that are not multiples of S.
 */
#pragma once
#include "cony/cnn.h"

G_BEGIN_DECLS

typedef struct _ConyCnnContinual ConyCnnContinual;

typedef struct {
  guint time_stride; /* S: input frames per row of the final map */
  guint columns;     /* K: rows of the final map per window */
  guint lookahead;   /* frames after a window's last frame that its token reads */
  guint history;     /* frames before a window's first frame that its token reads */
  /* Frames from a window's last frame until its token is out when the input is
   * pushed in blocks of S frames aligned with the stream start: lookahead rounded
   * up to a multiple of S (160 for YAMNet). */
  guint delay;
} ConyCnnContinualGeometry;

/* The continual geometry of @cnn for @hop frames between tokens (0: checks the
 * network only, hop taken as S). FALSE with @error when the network or the hop
 * cannot run continually (see above). */
gboolean cony_cnn_continual_geometry (const ConyCnn *cnn, guint hop, ConyCnnContinualGeometry *g,
    GError **error);

/* A stream on @cnn (borrowed: it must outlive the stream, and its scratch is used,
 * so one thread at a time) emitting one token every @hop frames. Its output is
 * @cnn's (scores or embedding) at the time of each push; its precision (float or the
 * integer path) is @cnn's when the stream is made: change neither afterwards. */
ConyCnnContinual *cony_cnn_continual_new (ConyCnn *cnn, guint hop, GError **error);
void cony_cnn_continual_free (ConyCnnContinual *c);
void cony_cnn_continual_get_geometry (const ConyCnnContinual *c, ConyCnnContinualGeometry *g);
/* Floats per token (the network's output size). */
guint cony_cnn_continual_get_output_size (const ConyCnnContinual *c);
/* Forgets the stream: the next frame is the first (padded before it) again. */
void cony_cnn_continual_reset (ConyCnnContinual *c);
/* The most tokens one push of @n frames can give. */
gsize cony_cnn_continual_max_tokens (const ConyCnnContinual *c, gsize n);
/* Feeds @n frames (input width x channels floats each, frame after frame) and
 * writes the tokens that became ready to @out, one after the other; returns
 * their number. Tokens come out in order, token j being the
 * cony_cnn_continual_get_tokens()-th since the reset. */
gsize cony_cnn_continual_push (ConyCnnContinual *c, const float *frames, gsize n, float *out);
/* Tokens output since the last reset. */
guint64 cony_cnn_continual_get_tokens (const ConyCnnContinual *c);
/* Frames pushed since the last reset. */
guint64 cony_cnn_continual_get_frames (const ConyCnnContinual *c);
/* Bytes the stream has allocated (its row buffers keep the capacity of the largest
 * push); *@kept (may be NULL) gets the bytes of the rows it holds between pushes, what
 * the next push still reads. The network's weights and scratch are not counted. */
gsize cony_cnn_continual_get_state_bytes (const ConyCnnContinual *c, gsize *kept);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ConyCnnContinual, cony_cnn_continual_free)

G_END_DECLS
