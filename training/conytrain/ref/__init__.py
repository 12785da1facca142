"""conytrain.ref (conyref before the package): float64 reference of the attention variants in
docs/attention.md."""

from .attention import (  # noqa: F401
    VARIANTS,
    WINDOWED,
    WEIGHT_NAMES,
    attention_steps,
    cony_held_segments,
    cony_segments,
    merge_heads,
    mha_window,
    nystrom_attention,
    pinv_exact,
    pinv_iterative,
    project,
    pseudo_inverse,
    segment_mean_matrix,
    segment_sizes,
    softmax_attention,
    softmax_kernel,
)
