/* Internals of ConyAttention, shared by the attention files and the benchmarks.
 *
 * attention.c is the layer (table of variants, buffers, budget, steps); below it one file
 * per family (attention-windowed.c, attention-continual.c, attention-cony.c,
 * attention-vcc.c) and the kernels they share (attention-kernels.c, attention-rowsum.h,
 * attention-query.c). */
#pragma once
#include "attention-internal.h"
#include "cpu-private.h"
#include "gemv-private.h"

G_BEGIN_DECLS

/* The hot per-step functions are also built for x86-64-v3 (AVX2: four doubles a
 * vector), cpu-private.h's CONY_CLONES. */

typedef struct _ConyVcc ConyVcc;
typedef struct _ConyAttentionVariantInfo ConyAttentionVariantInfo;

struct _ConyAttention {
  ConyAttentionConfig cfg;
  const ConyAttentionVariantInfo *info; /* the row of cfg.variant in attention.c's table */
  int d, heads, hd, n, m;
  float scale; /* 1/√hd: every score is scale·(q·k) */

  float *w_in, *b_in;         /* (3d, d), (3d) */
  float *w_out, *b_out;       /* (d, d), (d) */
  ConyGemvMatrix g_in, g_out; /* w_in, w_out for one-vector products (gemv-private.h) */

  guint64 t;                       /* tokens stepped since reset */
  float *qkv;                      /* this step's projected q, k, v: 3 × d */
  float *heads_out;                /* rows × d, concatenated head outputs */
  float *ring_q, *ring_k, *ring_v; /* n × d each; token τ lives in slot τ mod n */
  float *k_old, *v_old;            /* the token evicted this step (d each) */
  float *win_q, *win_k, *win_v;    /* n × d, a window laid out oldest first */
  float *win_out;                  /* n × d, all rows of a windowed computation */
  float *queries;                  /* n × d, the queries of a multi-token step */
  float *scratch;                  /* per-head temporaries */
  double *scratch_d;
  gsize scratch_len;

  /* Running exponential sums, one per row: CoRe rows are window queries (n per
   * head), CoNy rows are landmarks (m per head). See rowsum_* in attention.c. */
  int n_rows;
  double *row_offset; /* (heads, n_rows) */
  double *row_phi;    /* (heads, n_rows) */
  double *row_acc;    /* (heads, n_rows, hd) */
  guint8 *row_stale;  /* (n_rows): rebuild after this step's update */
  guint64 steps_since_resync;

  /* Nyström landmarks (both CoNy variants and the windowed fixed variant). */
  int ml;                /* landmarks in use (< m only during cony warm-up) */
  float *lm_q, *lm_k;    /* (heads, m, hd) */
  double *pinv;          /* (heads, m, m) pinv of the row-softmax landmark kernel */
  double *sk;            /* (n, heads, m), cony-fixed only: score of each window key
                                  against each landmark (cony rescores its k window) */
  double *rcache;        /* (n, heads, m): retroactive B_φΓ⁺ row per window query */
  double *seg_q, *seg_k; /* (d): sums of the current segment (cony) */
  int seg_count;
  guint64 seg_index; /* segments completed since the stream start */

  ConyVcc *vcc; /* the vcc variant's state (attention-vcc.c), else NULL */
};

/* cony_attention_project(), cony_attention_core_step(): attention-internal.h */

/* What a variant is, keeps and does: one row per variant in attention.c, the only place
 * that lists them. */
typedef enum
{
  CONY_VARIANT_CONTINUAL = 1 << 0,        /* carries state between steps (O(1) new tokens) */
  CONY_VARIANT_LANDMARKS = 1 << 1,        /* uses the config's m landmarks */
  CONY_VARIANT_FIXED_LANDMARKS = 1 << 2,  /* the model's landmarks: needs q/k_landmarks */
  CONY_VARIANT_RING_Q = 1 << 3,           /* keeps the window's queries */
  CONY_VARIANT_RING_Q_RETRO = 1 << 4,     /* ... only when retroactive */
  CONY_VARIANT_RING_K = 1 << 5,           /* keeps the window's keys */
  CONY_VARIANT_RING_V = 1 << 6,           /* keeps the window's values */
  CONY_VARIANT_LANDMARK_ROWS = 1 << 7,    /* a running sum per landmark (m rows) */
  CONY_VARIANT_QUERY_ROWS_RETRO = 1 << 8, /* a running sum per window query when retroactive */
  CONY_VARIANT_KEY_SCORES = 1 << 9,       /* each window key's scores against the landmarks */
  CONY_VARIANT_SEGMENTS = 1 << 10,        /* landmarks are segment means of the stream */
  CONY_VARIANT_SINGLE_OUTPUT = 1 << 11,   /* the newest query's row only, never retroactive */
} ConyAttentionVariantFlags;

struct _ConyAttentionVariantInfo {
  const char *name;        /* as on the command line and in model files */
  const char *description; /* one line, for GStreamer's enum */
  ConyAttentionVariantFlags flags;
  /* the variant computing the same function over a whole window (itself if windowed) */
  ConyAttentionVariant windowed;
  /* Makes the token in a->qkv (already in the rings) part of the state; NULL: the rings
   * are all. */
  void (*advance) (ConyAttention *a);
  /* Head outputs into a->heads_out for the @rows newest queries @Q (single output), or
   * the n window rows (retroactive). */
  void (*emit) (ConyAttention *a, const float *Q, int rows);
  /* Windowed variants: rows [r0, w) over a->win_q/k/v, head outputs to @out (stride d);
   * NULL for the continual ones (their windowed counterpart's is used). */
  void (*forward) (ConyAttention *a, int w, int r0, float *out);
  /* Its own settings (ConyAttentionConfig.settings in this order, at most
   * CONY_ATTENTION_MAX_SETTINGS), ended by a NULL key; NULL: none. Model configs, the
   * command line and docs/model-format.md take them from here. */
  const ConyAttentionSetting *settings;
  /* Optional: why the settings of @c do not go together (model configs and layers),
   * why @c is invalid for this variant, the bytes it allocates beyond the layer's
   * buffers, its own state made / cleared / counted. */
  const char *(*settings_invalid) (const ConyAttentionConfig *c);
  const char *(*invalid) (const ConyAttentionConfig *c);
  gsize (*config_bytes) (const ConyAttentionConfig *c);
  void (*create) (ConyAttention *a);
  void (*reset) (ConyAttention *a);
  gsize (*state_bytes) (const ConyAttention *a);
  /* Counted FLOPs of one step, all heads, SDA only; and the paper's appendix formula. */
  double (*sda_flops) (const ConyAttentionConfig *c);
  double (*paper_flops) (const ConyAttentionConfig *c);
};

const ConyAttentionVariantInfo *cony_attention_variant_info (ConyAttentionVariant variant);

/* Setting @i of @c's variant (its row's order): its value, the default when unset. */
int cony_attention_setting (const ConyAttentionConfig *c, int i);

/* The window once a->t tokens have been stepped: its length, the output row of its
 * oldest token (retroactive outputs have n rows, those before the stream start zero),
 * and the ring slot of its i-th token, oldest first. */
static inline int
cony_attn_window_fill (const ConyAttention *a)
{
  return (int) MIN (a->t, (guint64) a->n);
}

static inline int
cony_attn_window_first_row (const ConyAttention *a, int w)
{
  return a->n - w;
}

static inline int
cony_attn_window_slot (const ConyAttention *a, int w, int i)
{
  return (int) ((a->t - w + i) % a->n);
}

/* Shared kernels (attention-kernels.c). */
/* Query rows of the regular layer scored per sgemm: the score scratch holds this many rows
 * of the window, so it grows as n, not n² (a retroactive window at n = 16384 would need
 * 1 GiB of scores at once). */
#define REGULAR_ROW_CHUNK 64
void cony_attn_softmax_scores (const float *q, const float *K, int ld, int w, int hd, float scale,
    float *s, double *sd);
void cony_attn_regular_head (const float *Q, const float *K, const float *V, int ld, int w, int r0,
    int hd, float scale, float *out, int ldo, float *S, double *Sd);
gboolean cony_attn_landmark_pinv (const ConyAttention *a, const float *Ql, const float *Kl, int ml,
    double *pinv);
void cony_attn_nystrom_head (const ConyAttention *a, const float *Q, const float *K, const float *V,
    int ld, int w, int r0, const float *Ql, const float *Kl, int ml, const double *pinv, float *out,
    int ldo, double *S);
void cony_attn_segment_means (const float *X, int ld, int w, int m, int hd, float *out);

/* One query against a window, every head (attention-query.c): the kernels, slowest
 * first; AUTO picks the fastest this CPU runs. */
typedef enum
{
  CONY_ATTN_QUERY_AUTO,
  CONY_ATTN_QUERY_BLAS,   /* per-head cblas_sgemv, any CPU */
  CONY_ATTN_QUERY_AVX2,   /* 8-row blocks, AVX2/FMA */
  CONY_ATTN_QUERY_AVX512, /* 16-row blocks, AVX-512F */
} ConyAttnQueryKernel;
ConyAttnQueryKernel cony_attn_query_best (void);
/* Floats of scratch the SIMD kernels need for @heads heads over @n rows of @d. */
gsize cony_attn_query_scratch (int heads, int n, int d);
/* out (heads × hd) = softmax(scale · q Kᵀ) V per head, over the @w rows of @K and @V (row
 * stride @ld, head h's columns at h · hd); @sd: w doubles for the overflow fallback
 * (cony_attn_softmax_scores). A scratch shorter than cony_attn_query_scratch() runs the
 * BLAS kernel. FALSE (nothing done) when this CPU cannot run @kernel. */
gboolean cony_attn_single_query (ConyAttnQueryKernel kernel, const float *q, const float *K,
    const float *V, int ld, int w, int heads, int hd, float scale, float *scratch,
    gsize scratch_len, double *sd, float *out);

/* The windowed family (attention-windowed.c). */
void cony_regular_forward (ConyAttention *a, int w, int r0, float *out);
void cony_nystrom_forward (ConyAttention *a, int w, int r0, float *out);
void cony_nystrom_fixed_forward (ConyAttention *a, int w, int r0, float *out);
void cony_windowed_emit (ConyAttention *a, const float *Q, int rows);
double cony_regular_sda_flops (const ConyAttentionConfig *c);
double cony_nystrom_sda_flops (const ConyAttentionConfig *c);
double cony_nystrom_fixed_sda_flops (const ConyAttentionConfig *c);
double cony_regular_paper_flops (const ConyAttentionConfig *c);
double cony_nystrom_paper_flops (const ConyAttentionConfig *c);
double cony_nystrom_fixed_paper_flops (const ConyAttentionConfig *c);

/* The continual family, CoSi / CoRe (attention-continual.c). */
void cony_continual_advance (ConyAttention *a);
void cony_continual_emit (ConyAttention *a, const float *Q, int rows);
double cony_continual_sda_flops (const ConyAttentionConfig *c);
double cony_continual_paper_flops (const ConyAttentionConfig *c);

/* The Continual Nyström family, cony and cony-fixed (attention-cony.c). */
void cony_cony_advance (ConyAttention *a);
void cony_cony_emit (ConyAttention *a, const float *Q, int rows);
void cony_cony_reset (ConyAttention *a);
gsize cony_cony_state_bytes (const ConyAttention *a);
double cony_cony_sda_flops (const ConyAttentionConfig *c);
double cony_cony_fixed_sda_flops (const ConyAttentionConfig *c);
double cony_cony_paper_flops (const ConyAttentionConfig *c);
double cony_cony_fixed_paper_flops (const ConyAttentionConfig *c);

/* The vcc variant (attention-vcc.c), behind the hooks of attention.c's table. */
/* Its settings: budget r, smallest coarse block, exact tail L. */
extern const ConyAttentionSetting cony_vcc_settings[];
/* Why the exact tail is not below the budget, or NULL. */
const char *cony_vcc_settings_invalid (const ConyAttentionConfig *c);
/* Why @c is not a valid vcc layer, or NULL. */
const char *cony_vcc_invalid (const ConyAttentionConfig *c);
/* Makes a->vcc (its bytes are in the budget the layer checked). */
void cony_vcc_create (ConyAttention *a);
void cony_vcc_free (ConyVcc *v);
void cony_vcc_reset (ConyAttention *a);
/* Appends the token in a->qkv (stream position a->t) to the block-local sums. */
void cony_vcc_advance (ConyAttention *a);
/* Head outputs of the @rows queries @Q (rows × d) against the current window. */
void cony_vcc_emit (ConyAttention *a, const float *Q, int rows);
/* Rows [r0, w) of vcc attention over a->win_q/k/v (w rows, oldest first), each query
 * against the whole window; head outputs to @out (stride d). */
void cony_vcc_windowed (ConyAttention *a, int w, int r0, float *out);
gsize cony_vcc_state_bytes (const ConyAttention *a);
/* Every byte cony_vcc_new() allocates for a layer of config @c (for memory budgets). */
gsize cony_vcc_config_bytes (const ConyAttentionConfig *c);
/* Counted FLOPs of one step, all heads (SDA only). */
double cony_vcc_flops (const ConyAttentionConfig *c);
/* Largest |entry| of the stored block-local sums: no entry sums more than one block
 * of tokens, however long the stream (tests). */
double cony_vcc_state_magnitude (const ConyAttention *a);

G_END_DECLS
