/* Internals of ConyAttention, shared by attention.c and the benchmarks. */
#pragma once
#include "cony/attention-internal.h"
#include "cpu-private.h"
#include "gemv-private.h"

G_BEGIN_DECLS

/* The hot per-step functions are also built for x86-64-v3 (AVX2: four doubles a
 * vector), cpu-private.h's CONY_CLONES. */

typedef struct _ConyVcc ConyVcc;

struct _ConyAttention {
  ConyAttentionConfig cfg;
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

/* cony_attention_project(), cony_attention_core_step(): cony/attention-internal.h */

/* The vcc variant (attention-vcc.c), behind the hooks of attention.c. */
/* Why @c is not a valid vcc layer, or NULL. */
const char *cony_vcc_invalid (const ConyAttentionConfig *c);
/* Fills in the defaults of the vcc fields of @c. */
void cony_vcc_resolve_config (ConyAttentionConfig *c);
ConyVcc *cony_vcc_new (const ConyAttention *a);
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
