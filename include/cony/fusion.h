/* Fused models: one continual encoder-classifier over several token streams (e.g. the
 * audio and the video of one scene).
 *
 * A fused model file is an ordinary encoder-classifier file (model.h) whose config has a
 * "fusion" object declaring its inputs and whose tensors include one learned "absent"
 * token per input (docs/model-format.md, "Fused models"). One fused step joins, per
 * input, its newest token (or, when the input is missing or stale, its absent token)
 * into one token of the encoder's d_in floats:
 *
 *   [ x_0 (size_0) | x_1 (size_1) | ... | flag_0 | flag_1 | ... ]   flag_i = 1 present, 0 absent
 *
 * so the encoder's input projection, applied to that concatenation, is the sum of one
 * projection per input (its column block) plus a learned bias per absent input (the
 * flag columns): the per-input projection, then the encoder.
 *
 * Optionally ("gate" in the config's fusion object, tensors fusion.gate.*) a confidence
 * gate adds one input's own evidence after the encoder: a linear read-out v = A x + c of
 * that input's token x, weighted per step by g = sigmoid(w . phi + b) from the encoder's
 * and the read-out's confidence,
 *
 *   logits += flag * scale * g * log_softmax(v),  phi = [max p, H(p)/ln C, max q, sum p q]
 *
 * (p = softmax(logits), q = softmax(v)); an absent or stale input (flag 0) adds nothing.
 * With a "context" input phi has a fifth feature, flag_ctx * sigmoid(u . x_ctx + e).
 * cony_encoder_step() applies it, so every caller of a fused model gets it. */
#pragma once
#include <glib.h>

#include "cony/model.h"

G_BEGIN_DECLS

#define CONY_FUSION_MAX_INPUTS 8
#define CONY_FUSION_MAX_NAME 32
/* Tensors of a fused file that belong to the fusion, not the encoder. */
#define CONY_FUSION_TENSOR_PREFIX "fusion."

typedef struct {
  char *name;           /* [a-z][a-z0-9_]*, unique; conyfuse's pad is sink_<name> */
  int size;             /* floats per token */
  int offset;           /* where its token starts in the fused token */
  int rate_n, rate_d;   /* the token rate it was trained with, per second */
  guint64 tolerance_ns; /* a token older than this (relative to the step) is stale */
  ConyCnnRef cnn;       /* the CNN whose tokens it was trained on (model.h) */
  float *absent;        /* (size): the learned token of a missing or stale input */
} ConyFusionInput;

#define CONY_FUSION_GATE_FEATURES 4 /* without a context input; 5 with one */
#define CONY_FUSION_GATE_MAX_CLASSES 256
/* Tensors of the gate: fusion.gate.<name> */
#define CONY_FUSION_GATE_PREFIX CONY_FUSION_TENSOR_PREFIX "gate."

typedef struct {
  int input;             /* the gated input's index */
  int context;           /* the context input's index, or -1 */
  int classes;           /* the model's classes (<= CONY_FUSION_GATE_MAX_CLASSES) */
  float *readout_weight; /* (classes, size of the input): A */
  float *readout_bias;   /* (classes): c */
  float *context_weight; /* (size of the context input): u */
  float context_bias;    /* e */
  int n_features;        /* 4, or 5 with a context */
  float weight[CONY_FUSION_GATE_FEATURES + 1], bias, scale;
} ConyFusionGate;

typedef struct _ConyFusion {
  char *path;
  int rate_n, rate_d; /* fused steps per second */
  int n_inputs;
  ConyFusionInput inputs[CONY_FUSION_MAX_INPUTS];
  int d_out;            /* floats per fused token = the model's d_in = sum of sizes + n_inputs */
  ConyFusionGate *gate; /* NULL: no gate */
  gsize n_parameters;   /* floats of the absent tokens and the gate */
} ConyFusion;

/* Loads and checks the fusion part of @path (the encoder part is cony_model_load()'s).
 * A file without "fusion" in its config, or with a bad one (unknown keys' values, sizes
 * that do not add up to d_in, a missing or misshapen absent token), is refused with an
 * error naming the file and what was wrong. */
ConyFusion *cony_fusion_load (const char *path, GError **error);
void cony_fusion_free (ConyFusion *fusion);

/* Index of the input called @name, or -1. */
int cony_fusion_input_index (const ConyFusion *fusion, const char *name);

/* Writes one fused token (d_out floats) to @out: input i contributes tokens[i] (size_i
 * floats), or its absent token when tokens[i] is NULL, and its flag. */
void cony_fusion_join (const ConyFusion *fusion, const float *const *tokens, float *out);

/* Adds the gate's term to @logits (the gate's classes) for the fused token @token
 * (d_out floats, cony_fusion_join()'s layout). Nothing when the model has no gate or the
 * gated input's flag is 0. Does not allocate. */
void cony_fusion_gate_apply (const ConyFusion *fusion, const float *token, float *logits);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ConyFusion, cony_fusion_free)

G_END_DECLS
