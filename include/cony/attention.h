/* Multi-head attention layers stepped one token at a time.
 *
 * One ConyAttention per attention layer. cony_attention_step() takes the newest
 * token and returns either one output row (single output) or the n rows of the
 * window (retroactive). The variants and their exact semantics are written down in
 * docs/attention.md. */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

typedef enum
{
  CONY_ATTENTION_REGULAR,       /* softmax attention recomputed over the window */
  CONY_ATTENTION_CONTINUAL,     /* Continual Transformers: CoSi / CoRe */
  CONY_ATTENTION_NYSTROM,       /* Nyströmformer, segment-means landmarks, recomputed */
  CONY_ATTENTION_NYSTROM_FIXED, /* Nyström with fixed landmarks, recomputed */
  CONY_ATTENTION_CONY,          /* Continual Nyström, continual landmarks (paper IV-A) */
  CONY_ATTENTION_CONY_FIXED,    /* Continual Nyström, fixed landmarks (paper IV-B) */
  CONY_ATTENTION_VCC,           /* VIP-token centric compression of the window, the newest
                                    query as the VIP token (VCC paper §6.5 (2)) */
  CONY_ATTENTION_N_VARIANTS
} ConyAttentionVariant;

typedef enum
{
  CONY_PINV_EXACT,     /* Moore-Penrose via SVD (LAPACK) */
  CONY_PINV_ITERATIVE, /* Nyströmformer's iteration */
} ConyPinvMethod;

/* The most settings one variant owns (ConyAttentionConfig.settings). */
#define CONY_ATTENTION_MAX_SETTINGS 4

typedef struct {
  ConyAttentionVariant variant;
  int d;                /* embedding size */
  int heads;            /* d % heads == 0 */
  int window;           /* n, tokens in the attention window */
  int landmarks;        /* m, for the Nyström variants */
  gboolean retroactive; /* n output rows instead of one */
  ConyPinvMethod pinv;
  int pinv_iterations; /* for CONY_PINV_ITERATIVE; 0 means 6 */
  int resync_interval; /* steps between exact resynchronisations of long-lived
                             running sums; 0 means the default (see attention-cony.c) */
  /* The variant's own settings (e.g. vcc's budget), laid out as its row lists them
   * (cony_attention_variant_setting()); 0 means the setting's default. Set and read
   * them by key: cony_attention_config_set(), cony_attention_config_get(). */
  int settings[CONY_ATTENTION_MAX_SETTINGS];
} ConyAttentionConfig;

/* A setting one variant owns: @key in model configs (docs/model-format.md), on the
 * command line --@key with '-' for '_' (cony attention --vcc-budget). */
typedef struct {
  const char *key;
  const char *help; /* one line, for --help and docs */
  const char *arg;  /* the value's name in --help ("R") */
  int def;          /* what 0 (unset) means, and a model config's default */
  int lo, hi;       /* the range a model config accepts */
} ConyAttentionSetting;

/* Weights are copied by cony_attention_new(); the caller keeps ownership. */
typedef struct {
  const float *in_proj_weight;  /* (3d, d): [W_q; W_k; W_v] */
  const float *in_proj_bias;    /* (3d) */
  const float *out_proj_weight; /* (d, d) */
  const float *out_proj_bias;   /* (d) */
  const float *q_landmarks;     /* (heads, m, hd), fixed-landmark variants only */
  const float *k_landmarks;     /* (heads, m, hd) */
} ConyAttentionWeights;

typedef struct _ConyAttention ConyAttention;

/* The variants, from libcony's table (docs/attention.md has each): variants 0 …
 * count - 1. Their names are as on the command line and in model files. */
int cony_attention_variant_count (void);
const char *cony_attention_variant_name (ConyAttentionVariant variant);
/* Every name, "a, b or c" (for --help and errors); free with g_free(). */
char *cony_attention_variant_names (void);
/* One line saying what the variant is (GStreamer's enum of the element shows it). */
const char *cony_attention_variant_description (ConyAttentionVariant variant);
gboolean cony_attention_variant_from_name (const char *name, ConyAttentionVariant *variant);
gboolean cony_attention_variant_is_continual (ConyAttentionVariant variant);
gboolean cony_attention_variant_uses_fixed_landmarks (ConyAttentionVariant variant);
/* The variant a model trained with @variant is computed with over a whole window
 * (continual -> regular, cony -> nystrom, cony-fixed -> nystrom-fixed; vcc is its own
 * windowed form: its output depends on the window's tokens only). */
ConyAttentionVariant cony_attention_variant_windowed (ConyAttentionVariant variant);
/* TRUE for a variant that computes the newest query's row only (no retroactive layer,
 * so not the first block of a 2-block model). */
gboolean cony_attention_variant_single_output_only (ConyAttentionVariant variant);

/* The variant's own settings: how many, and the i-th (NULL beyond). */
int cony_attention_variant_n_settings (ConyAttentionVariant variant);
const ConyAttentionSetting *cony_attention_variant_setting (ConyAttentionVariant variant, int i);
/* Sets @key of @config's variant; FALSE (nothing set) when that variant has no such
 * setting. The layer checks the value (cony_attention_new()). */
gboolean cony_attention_config_set (ConyAttentionConfig *config, const char *key, int value);
/* The value of @key of @config's variant, its default when unset; FALSE when the
 * variant has no such setting. */
gboolean cony_attention_config_get (const ConyAttentionConfig *config, const char *key, int *value);
/* Why the variant's settings of @config do not go together (e.g. vcc's exact tail not
 * below its budget), or NULL. */
const char *cony_attention_config_settings_invalid (const ConyAttentionConfig *config);

/* The most a layer serves: the state grows with the window (n·d floats per kept ring,
 * n·heads·m sums for cony), the m×m pseudo-inverse works on the stack; within these the
 * memory budget (CONY_MEMORY_BUDGET) decides. 16384 is the longest window benchmarked. */
#define CONY_ATTENTION_MAX_DIM 16384
#define CONY_ATTENTION_MAX_WINDOW 16384
#define CONY_ATTENTION_MAX_LANDMARKS 128
/* Bytes one layer, and one encoder with all its layers, may allocate. A config asking
 * for more is refused before anything is allocated, so that no model can exhaust the
 * host's memory by its say-so. */
#define CONY_MEMORY_BUDGET ((gsize) 1 << 30)

/* Bytes cony_attention_new() allocates for @config (weights' copies, state, scratch);
 * G_MAXSIZE for sizes beyond the limits above or otherwise invalid. */
gsize cony_attention_config_bytes (const ConyAttentionConfig *config);

/* Checks sizes (d % heads, window >= 1, 1 <= landmarks, the limits above, the memory
 * budget, ...) and returns a layer in its start state, or NULL with @error set naming
 * the bad parameter (and, over budget, the bytes). Fixed landmarks whose kernel has no
 * finite pseudo-inverse are refused (CONY_ERROR_NUMERIC). */
ConyAttention *cony_attention_new (const ConyAttentionConfig *config,
    const ConyAttentionWeights *weights, GError **error);
void cony_attention_free (ConyAttention *attention);
const ConyAttentionConfig *cony_attention_get_config (const ConyAttention *attention);

/* Forgets every token seen: the next step is step 0 of a new stream. */
void cony_attention_reset (ConyAttention *attention);

/* Rows written by a step: 1, or n when retroactive. */
int cony_attention_output_rows (const ConyAttention *attention);

/* Feeds token @x (d floats); writes cony_attention_output_rows() × d floats to @out. */
void cony_attention_step (ConyAttention *attention, const float *x, float *out);

/* Multi-token step (paper IV-C, e.g. the patches of one video frame): @count tokens
 * (count × d, 1 <= count <= n) enter the window together. Single output: writes the
 * outputs of the @count newest queries against the resulting window (count × d, oldest
 * first), so each new query also sees the keys that arrived with it; retroactive: the
 * n rows. With count = 1 this is cony_attention_step(). */
void cony_attention_step_tokens (ConyAttention *attention, const float *x, int count, float *out);

/* Non-continual attention over a whole window @x (w × d, 1 <= w <= n, oldest first),
 * computed with the windowed counterpart of the layer's variant, independent of the
 * layer's stream state. Writes the last row (single output) or n rows, zero-padded at
 * the front (retroactive). Used for the last block of stacked encoders. */
void cony_attention_forward_window (ConyAttention *attention, const float *x, int w, float *out);

/* Tokens stepped since the last reset. */
guint64 cony_attention_steps (const ConyAttention *attention);

/* Bytes of state kept between steps (windows, running sums, landmarks, caches), as
 * allocated: the real figure, not the paper's asymptotic one. */
gsize cony_attention_state_bytes (const ConyAttention *attention);

typedef struct {
  double sda;         /* counted FLOPs of the scaled dot-product attention per step, all heads,
                          averaged over a landmark period where it varies */
  double projections; /* in/out projections per step */
  double paper;       /* the paper's appendix formula for this variant (SDA only), with the
                          paper's convention d = full embedding size treated as one head;
                          0 where the paper gives none */
} ConyAttentionFlops;

ConyAttentionFlops cony_attention_flops (const ConyAttentionConfig *config);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ConyAttention, cony_attention_free)

G_END_DECLS
