/* The continual encoder-classifier, stepped k tokens at a time (k = the model's
 * tokens_per_step, 1 for most models; k > 1: e.g. the patches of one video frame, paper
 * IV-C).
 *
 * input projection -> recycling positional encoding (token s gets row s mod T) ->
 * 1 or 2 post-LN encoder blocks -> LayerNorm -> linear classifier; the logits are those
 * of the newest token (k > 1: of the mean over the k newest tokens' rows after the final
 * LayerNorm). With 1 block the block is single-output; with 2 blocks the first
 * is retroactive (its residual, LayerNorms and feed-forward applied to every row of the
 * window) and the second is the windowed single-output counterpart over those rows.
 * What this computes, step by step, is written down in docs/model-format.md. */
#pragma once
#include <glib.h>

#include "cony/model.h"

G_BEGIN_DECLS

typedef struct _ConyEncoder ConyEncoder;

/* @model must outlive the encoder. Refuses (CONY_ERROR_INVALID, naming the window and
 * the bytes) an encoder whose layers and scratch would need more than
 * CONY_MEMORY_BUDGET bytes. @override_variant: -1 for the variants the model
 * was trained with, otherwise a ConyAttentionVariant used in every block (the last block
 * of a 2-block model runs its windowed counterpart). Fails, naming the file, when a
 * fixed-landmark variant is asked of a model without landmarks. */
ConyEncoder *cony_encoder_new (const ConyModel *model, int override_variant, GError **error);
void cony_encoder_free (ConyEncoder *encoder);

/* Feeds one step's k tokens (k × d_in floats, oldest first; k = tokens_per_step, usually
 * 1) and writes n_classes logits. Does not allocate. FALSE when the logits are not all
 * finite (NaN/Inf tokens, or tokens so large that a projection overflows float): the
 * caller must not use them; the encoder has then been reset (cony_encoder_reset()), so
 * no non-finite value stays in its state and the next step is stream index 0. */
gboolean cony_encoder_step (ConyEncoder *encoder, const float *tokens, float *logits);
/* k, the tokens consumed by one step (the model's tokens_per_step). */
int cony_encoder_tokens_per_step (const ConyEncoder *encoder);

/* Forgets the stream: the next token is stream index 0 again. */
void cony_encoder_reset (ConyEncoder *encoder);
/* Steps since the reset (tokens fed = steps × k). */
guint64 cony_encoder_steps (const ConyEncoder *encoder);
/* Tokens in the current window (min(steps × k, n)). */
int cony_encoder_window_fill (const ConyEncoder *encoder);
/* The variant layer @block runs (after any override). */
ConyAttentionVariant cony_encoder_block_variant (const ConyEncoder *encoder, int block);

/* Bytes of state carried between steps: attention layers' state plus the encoder's
 * window of block inputs (2 blocks). Scratch buffers are counted separately. */
gsize cony_encoder_state_bytes (const ConyEncoder *encoder);
gsize cony_encoder_scratch_bytes (const ConyEncoder *encoder);

/* Counted floating-point operations of one step with a full window (multiply and add
 * counted separately), all parts included; a k-token step counts the per-token parts
 * k times. */
double cony_encoder_flops_per_step (const ConyEncoder *encoder);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ConyEncoder, cony_encoder_free)

G_END_DECLS
