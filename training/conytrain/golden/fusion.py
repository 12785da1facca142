#!/usr/bin/python3
"""Golden files for tests/libcony/test_fusion.c and the conyfuse tests: tiny fused models
(ref/fusion.py), exported, with per-step inputs, presence flags, the fused tokens and the
per-step logits of the windowed (non-continual) PyTorch model in float64.

    /usr/bin/python3 training/gen_fusion_golden.py [OUTDIR]   (default tests/golden/fusion)

For every case NAME it writes NAME.safetensors (the model, F32), NAME.<input>.npy (L, size)
float32 per input, NAME.present.npy (L, inputs) float32 (1 present, 0 absent: the token
of that step is then ignored and the absent token used), NAME.fused.npy (L, d_in) float32
(FusedClassifier.join) and NAME.logits.npy (L, classes) float64 (stream_logits).

av_pipeline.safetensors: random weights over the tokens of the pipelines (YAMNet's 1024-d
embedding, the shipped video CNN's 32 scores), for tests/pipelines/test_av_pipeline.sh.

verify() checks committed files against this script (training/tests/test_fusion.py).
"""

import os

import numpy as np
import torch

from conytrain import REPO
from conytrain.golden import check as golden_check
from conytrain.golden.model import exported
from conytrain.ref.fusion import FusedClassifier

DEFAULT_OUT = os.path.join(REPO, "tests", "golden", "fusion")
D, HEADS, FF, LABELS = 8, 2, 16, ["talking", "music", "quiet"]


def inp(name, size, rate, tolerance_ms, **cnn):
    return dict(name=name, size=size, rate=rate, tolerance_ms=tolerance_ms, **cnn)


# name, inputs, fused rate, blocks, attention, n, m
CASES = [
    ("b1_cony", [inp("audio", 5, [4, 1], 500), inp("video", 4, [10, 1], 300)], [4, 1],
     1, "cony", 6, 2),
    ("b2_conyfixed", [inp("audio", 3, [4, 1], 600), inp("video", 4, [25, 1], 200),
                      inp("depth", 2, [5, 1], 1000)], [5, 1], 2, "cony-fixed", 7, 3),
]
PIPELINE = ("av_pipeline",
            [inp("audio", 1024, [4, 1], 1000, cnn="yamnet.safetensors", cnn_output="embedding"),
             inp("video", 32, [10, 1], 500, cnn="frame_cnn.safetensors")], [4, 1], 1, "cony", 8, 2)


def make_model(case, seed):
    _, inputs, rate, blocks, attention, n, m = case
    torch.manual_seed(seed)
    model = FusedClassifier(inputs, rate, d=D, heads=HEADS, ff=FF, blocks=blocks, window=n,
                            landmarks=m, attention=attention, labels=LABELS)
    with torch.no_grad():
        for name, p in model.named_parameters():   # every part visible in the logits
            if name.endswith("bias") or name.startswith("absent."):
                p.copy_(0.5 * torch.randn_like(p))
            elif name == "encoder.pos_embedding":
                p.copy_(0.5 * torch.randn_like(p))
        for blk in model.encoder.blocks:
            blk.attn.in_proj_weight.mul_(2.0)
            if attention.endswith("-fixed"):
                hd = D // HEADS
                blk.attn.set_landmarks(1.5 * torch.randn(HEADS, m, hd),
                                       1.5 * torch.randn(HEADS, m, hd))
    return model.eval()


def case_streams(case, seed):
    """tokens {name: (L, size) float32}, present {name: (L,) bool}: random drops plus a run
    where the first input is absent and a step where every input is."""
    _, inputs, _, _, _, n, _ = case
    L = 3 * n + 2
    g = torch.Generator().manual_seed(seed)
    tokens = {i["name"]: torch.randn(L, i["size"], generator=g) for i in inputs}
    present = {i["name"]: torch.rand(L, generator=g) > 0.3 for i in inputs}
    present[inputs[0]["name"]][n:n + 4] = False
    for p in present.values():
        p[L - 2] = False
    return tokens, present


def golden_files(say=lambda *a: None):
    torch.set_num_threads(1)
    files = {}
    for i, case in enumerate(CASES):
        name, inputs = case[0], case[1]
        model = make_model(case, 3000 + i)
        tokens, present = case_streams(case, 4000 + i)
        files[name + ".safetensors"] = exported(model)
        for x in inputs:
            files[f"{name}.{x['name']}.npy"] = tokens[x["name"]].numpy()
        files[name + ".present.npy"] = np.stack(
            [present[x["name"]].numpy() for x in inputs], axis=1).astype(np.float32)
        files[name + ".fused.npy"] = model.join(tokens, present).detach().numpy()
        m64 = model.double()
        logits = m64.stream_logits({k: v.double() for k, v in tokens.items()}, present).numpy()
        files[name + ".logits.npy"] = logits
        say(f"{name}: {len(inputs)} inputs, L={len(logits)}, "
            f"logit range [{logits.min():.3f}, {logits.max():.3f}]")
    files[PIPELINE[0] + ".safetensors"] = exported(make_model(PIPELINE, 3100))
    return files


def verify(golden=DEFAULT_OUT):
    """[] when the files under `golden` are what main() writes, else what differs."""
    return golden_check.compare(golden, golden_files())


def main():
    golden_check.write_main(DEFAULT_OUT, golden_files)


if __name__ == "__main__":
    main()
