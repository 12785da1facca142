/* Continual transformer encoder-classifier models: loading safetensors model files.
 *
 * The file format (tensor names, shapes, the JSON config in __metadata__) is written
 * down in docs/model-format.md. cony_model_load() checks every tensor against the
 * config and refuses bad files with a GError naming the file, the tensor or config key,
 * and what was expected. The weights are copied out of the mapping as float32 (F16
 * storage is converted), so the file is closed when loading returns. */
#pragma once
#include <glib.h>

#include "cony/attention.h"

G_BEGIN_DECLS

#define CONY_MODEL_ARCHITECTURE "cony-encoder-classifier"
#define CONY_MODEL_MAX_BLOCKS 2
#define CONY_MODEL_LN_EPS 1e-5f

typedef enum
{
  CONY_POSITIONAL_LEARNED, /* learned table, trained with random stream offsets */
  CONY_POSITIONAL_CYCLIC,  /* the fixed cyclic encoding, precomputed into the table at export */
} ConyPositionalKind;

/* How scores come from the logits (config key "output"). */
typedef enum
{
  CONY_OUTPUT_SOFTMAX, /* one class per step: probabilities that sum to 1 (default) */
  CONY_OUTPUT_SIGMOID, /* multi-label: each class scored on its own, 0..1 */
} ConyOutputKind;

/* The CNN whose tokens a classifier (or one input of a fused model, fusion.h) was
 * trained on, from the "cnn", "cnn_sha256" and "cnn_output" strings of its config (each
 * NULL when not recorded): the CNN file's name, the SHA-256 of its bytes, and
 * "embedding" when the tokens are its pooled embedding (conyvggish output=embedding)
 * rather than its last layer. CNN elements write their own as the cnn, cnn-sha256 and
 * cnn-output fields of token caps; classifier elements compare those with theirs. */
typedef struct {
  char *name, *sha256, *output;
  char *mode; /* "cnn_mode": "continual" when trained on conyvggish mode=continual tokens */
} ConyCnnRef;

typedef struct {
  int d_in; /* input token size */
  int d;    /* embedding size */
  int heads;
  int ff;              /* feed-forward hidden width */
  int blocks;          /* 1 or 2 */
  int window;          /* n, in tokens */
  int landmarks;       /* m */
  int tokens_per_step; /* k: tokens that enter the window together in one step (paper
                               IV-C, e.g. the patches of one frame); 1 <= k <= n, default 1 */
  ConyAttentionVariant attention[CONY_MODEL_MAX_BLOCKS]; /* trained variant per block */
  ConyPinvMethod pinv;
  int pinv_iterations;
  /* Each variant's own settings (the keys its row lists, e.g. "vcc_budget"), defaults
   * filled in; cony_model_config_attention() hands them to a layer. */
  int attention_settings[CONY_ATTENTION_N_VARIANTS][CONY_ATTENTION_MAX_SETTINGS];
  ConyPositionalKind positional;
  int positional_rows; /* T: token at stream index s gets row s mod T (default: the
                               smallest multiple of k that is >= 2n - 1) */
  int n_classes;
  ConyOutputKind output; /* softmax (default) or sigmoid */
  char **labels;         /* n_classes strings, NULL-terminated */
  char *frontend_json;   /* the "frontend" object of the config as JSON text, or NULL */
  ConyCnnRef cnn;        /* the CNN whose tokens it was trained on (frontend.cnn*) */
  char *config_json;     /* the whole config string as found in the file */
  gboolean has_fusion;   /* a fused model (fusion.h): the config has a "fusion" object */
} ConyModelConfig;

typedef struct {
  ConyAttentionWeights attn; /* in/out projections, optional fixed landmarks */
  gboolean has_landmarks;
  float *norm1_weight, *norm1_bias; /* (d) */
  float *ff1_weight, *ff1_bias;     /* (ff, d), (ff) */
  float *ff2_weight, *ff2_bias;     /* (d, ff), (d) */
  float *norm2_weight, *norm2_bias; /* (d) */
} ConyModelBlock;

struct _ConyFusion;

typedef struct {
  char *path;
  ConyModelConfig config;
  struct _ConyFusion *fusion; /* a fused model's fusion part (fusion.h), else NULL */
  float *input_proj_weight;   /* (d, d_in) */
  float *input_proj_bias;     /* (d) */
  float *pos_embedding;       /* (T, d) */
  ConyModelBlock block[CONY_MODEL_MAX_BLOCKS];
  float *norm_weight, *norm_bias;             /* (d) */
  float *classifier_weight, *classifier_bias; /* (classes, d), (classes) */
  gsize n_parameters;                         /* floats loaded (landmarks and fusion included) */
} ConyModel;

/* @path as cony_model_path_find() resolves it; model->path is the file found. */
ConyModel *cony_model_load (const char *path, GError **error);
void cony_model_free (ConyModel *model);

/* Checks a config parsed from JSON text; @origin names it in errors (a file path). */
gboolean cony_model_config_parse (const char *json, const char *origin, ConyModelConfig *config,
    GError **error);
void cony_model_config_clear (ConyModelConfig *config);

/* Fills @ref for the CNN file @path whose @output ("embedding" or "scores") the tokens
 * are, as a CNN element announces its tokens: base name and SHA-256 of the bytes. FALSE
 * with @error when the file cannot be read (@ref then holds nothing). */
gboolean cony_cnn_ref_init_from_file (ConyCnnRef *ref, const char *path, const char *output,
    GError **error);
/* Frees the strings of @ref and zeroes it (not @ref itself). */
void cony_cnn_ref_clear (ConyCnnRef *ref);
/* TRUE when the tokens are the CNN's pooled embedding rather than its last layer. */
gboolean cony_cnn_ref_is_embedding (const ConyCnnRef *ref);
/* How the CNN ran for the tokens: the recorded cnn_mode, or "window" when none is. */
const char *cony_cnn_ref_mode (const ConyCnnRef *ref);

/* The attention layer config of a model with @config run with @variant: sizes,
 * pseudo-inverse and that variant's own settings. */
ConyAttentionConfig cony_model_config_attention (const ConyModelConfig *config,
    ConyAttentionVariant variant, gboolean retroactive);

/* The attention layer config of block @block_index with @variant (the caller's override
 * or the trained one), as the encoder builds it. */
ConyAttentionConfig cony_model_attention_config (const ConyModel *model, int block_index,
    ConyAttentionVariant variant, gboolean retroactive);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ConyModel, cony_model_free)

G_END_DECLS
