#!/usr/bin/python3
"""Tiny models for the conytransformer element tests (tests/elements/test_gst_conytransformer.c)
and the gst-launch pipeline test (tests/pipelines/test_gst_pipeline.sh).

    /usr/bin/python3 training/gen_transformer_golden.py [OUTDIR]   (default tests/golden/transformer)

small.safetensors: d_in 128 (the embedding size of the reduced VGGish in tests/golden/cnn),
2 blocks of CoNy attention, window 8, 2 fixed landmarks (so every variant can be selected
with the element's `attention` property), 4 labels. Random weights: the tests compare the
element with libcony's encoder on the same file, not with a trained classifier.
"""

import os
import sys

import torch

from conytrain import REPO
from conytrain.export import export_model
from conytrain.ref.model import ConyEncoderClassifier

LABELS = ["speech", "music", "noise", "silence"]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "tests", "golden",
                                                             "transformer")
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    torch.manual_seed(4242)
    d, heads, m = 16, 2, 2
    model = ConyEncoderClassifier(128, d, heads, 32, 2, 8, m, "cony", labels=LABELS)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.2 * torch.randn_like(p))
            elif name == "pos_embedding":
                p.copy_(0.5 * torch.randn_like(p))
            elif name == "classifier.weight":
                p.mul_(4.0)   # spread the scores so the top class changes now and then
        for blk in model.blocks:
            blk.attn.in_proj_weight.mul_(2.0)
            blk.attn.set_landmarks(1.5 * torch.randn(heads, m, d // heads),
                                   1.5 * torch.randn(heads, m, d // heads))
    model.eval()
    path = os.path.join(out, "small.safetensors")
    export_model(model, path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
