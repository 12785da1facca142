/* The fusion part of a model file, read from an open file (not a public API). */
#pragma once
#include "cony/fusion.h"
#include "cony/safetensors.h"

G_BEGIN_DECLS

/* Fills @fusion from @st, whose encoder config @config is already parsed (its d_in must
 * be the fused token size). FALSE with @error naming the file and what was wrong; @fusion
 * then holds nothing to free. */
gboolean cony_fusion_read (const ConySafetensors *st, const ConyModelConfig *config,
    ConyFusion *fusion, GError **error);
/* Frees what cony_fusion_read() put in @fusion (not @fusion itself). */
void cony_fusion_clear (ConyFusion *fusion);

G_END_DECLS
