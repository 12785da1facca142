/* Internals of ConyAttention, shared by attention.c and the benchmarks. */
#pragma once
#include "cony/attention.h"
#include "gemv-private.h"

G_BEGIN_DECLS

struct _ConyAttention {
  ConyAttentionConfig cfg;
  int d, heads, hd, n, m;
  float scale;                 /* 1/√hd: every score is scale·(q·k) */

  float *w_in, *b_in;          /* (3d, d), (3d) */
  float *w_out, *b_out;        /* (d, d), (d) */
  ConyGemvMatrix g_in, g_out;  /* w_in, w_out for one-vector products (gemv-private.h) */

  guint64 t;                   /* tokens stepped since reset */
  float *qkv;                  /* this step's projected q, k, v: 3 × d */
  float *heads_out;            /* rows × d, concatenated head outputs */
  float *ring_q, *ring_k, *ring_v;  /* n × d each; token τ lives in slot τ mod n */
  float *k_old, *v_old;        /* the token evicted this step (d each) */
  float *win_q, *win_k, *win_v;     /* n × d, a window laid out oldest first */
  float *win_out;              /* n × d, all rows of a windowed computation */
  float *queries;              /* n × d, the queries of a multi-token step */
  float *scratch;              /* per-head temporaries */
  double *scratch_d;
  gsize scratch_len;

  /* Running exponential sums, one per row: CoRe rows are window queries (n per
   * head), CoNy rows are landmarks (m per head). See rowsum_* in attention.c. */
  int n_rows;
  double *row_offset;          /* (heads, n_rows) */
  double *row_phi;             /* (heads, n_rows) */
  double *row_acc;             /* (heads, n_rows, hd) */
  guint8 *row_stale;           /* (n_rows): rebuild after this step's update */
  guint64 steps_since_resync;

  /* Nyström landmarks (both CoNy variants and the windowed fixed variant). */
  int ml;                      /* landmarks in use (< m only during cony warm-up) */
  float *lm_q, *lm_k;          /* (heads, m, hd) */
  double *pinv;                /* (heads, m, m) pinv of the row-softmax landmark kernel */
  double *sk, *ek;             /* (n, heads, m): score and exp(score − row offset) of
                                  each window key against each landmark */
  double *rcache;              /* (n, heads, m): retroactive B_φΓ⁺ row per window query */
  double *seg_q, *seg_k;       /* (d): sums of the current segment (cony) */
  int seg_count;
  guint64 seg_index;           /* segments completed since the stream start */
};

/* The attention core for the token already projected into a->qkv (no projections):
 * writes cony_attention_output_rows() × d head outputs to a->heads_out. */
void cony_attention_core_step (ConyAttention *a);
/* Projects @x into a->qkv. */
void cony_attention_project (ConyAttention *a, const float *x);

G_END_DECLS
