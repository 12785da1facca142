/* INTERNAL hooks into ConyAttention, for libcony's own benchmarks (`cony bench
 * attention` times the attention core apart from the projections). Not part of the
 * public API: they follow the implementation and may change with it. Beside its users
 * in src/; tools/cmd_bench_attention.c reaches it as ../src/ (until the benchmarks move). */
#pragma once
#include "cony/attention.h"

G_BEGIN_DECLS

/* Projects @x into the layer's q, k, v buffer (cony_attention_qkv_buffer()). */
void cony_attention_project (ConyAttention *a, const float *x);
/* The attention core for the token already projected into the q, k, v buffer (no
 * projections): advances the state and writes cony_attention_output_rows() × d head
 * outputs to the head-output buffer. */
void cony_attention_core_step (ConyAttention *a);
/* The layer's q, k, v buffer of the current token: 3·d floats, fixed for its lifetime. */
float *cony_attention_qkv_buffer (ConyAttention *a);

G_END_DECLS
