#!/usr/bin/python3
"""Golden files for tests/libcony/test_model.c: tiny encoder-classifier models, exported, with
the per-step logits of the windowed (non-continual) PyTorch model in float64.

    /usr/bin/python3 training/gen_model_golden.py [OUTDIR]   (default tests/golden/model)

For every case NAME it writes NAME.safetensors (the model, F32), NAME.tokens.npy (L, d_in)
float32 and NAME.logits.npy (L, classes) float64 = ConyEncoderClassifier.stream_logits();
NAME@VARIANT.logits.npy are the logits with the attention overridden to VARIANT.

Cases kK_... are multi-token models (tokens_per_step = K, paper IV-C): L is a multiple
of K and the logits have one row per K-token step (L / K, classes).

verify() checks committed files against this script (training/tests/test_golden_files.py).
"""

import json
import os
import sys
import tempfile

import numpy as np
import torch

from conytrain import REPO, safetensors_io
from conytrain.export import export_model
from conytrain.golden import check as golden_check
from conytrain.ref.attention import project
from conytrain.ref.model import ConyEncoderClassifier

# name, blocks, attention, n, m, positional encoding, overrides[, tokens per step[, d_in]]
CASES = [
    ("b1_regular", 1, "regular", 6, 2, "learned", []),
    ("b1_continual", 1, "continual", 7, 3, "cyclic", ["regular"]),
    ("b1_nystrom", 1, "nystrom", 6, 2, "learned", []),
    ("b1_nystrom_r", 1, "nystrom", 7, 3, "learned", []),
    ("b1_cony", 1, "cony", 6, 2, "learned", []),
    ("b1_cony_r", 1, "cony", 7, 3, "cyclic", []),
    ("b1_conyfixed", 1, "cony-fixed", 7, 3, "learned", ["nystrom-fixed"]),
    ("b1_nystromfixed", 1, "nystrom-fixed", 6, 2, "learned", ["cony-fixed", "continual"]),
    ("b2_regular", 2, "regular", 6, 2, "learned", []),
    ("b2_continual", 2, "continual", 7, 3, "learned", []),
    ("b2_nystrom", 2, "nystrom", 7, 3, "learned", []),
    ("b2_cony", 2, "cony", 6, 2, "learned", []),
    ("b2_cony_r", 2, "cony", 7, 3, "cyclic", []),
    ("b2_conyfixed", 2, "cony-fixed", 6, 3, "learned", ["nystrom-fixed", "cony"]),
    ("b2_nystromfixed", 2, "nystrom-fixed", 7, 2, "learned", []),
    # multi-token steps: n mod k = 0 and != 0, n mod m = 0 and != 0, segments shorter,
    # equal to and longer than a step, k = n
    ("k2_b1_regular", 1, "regular", 6, 2, "learned", ["continual"], 2),
    ("k2_b1_cony", 1, "cony", 8, 4, "learned", [], 2),
    ("k2_b1_cony_r", 1, "cony", 7, 3, "cyclic", [], 2),
    ("k2_b1_conyfixed", 1, "cony-fixed", 7, 3, "learned", ["nystrom-fixed"], 2),
    ("k4_b1_regular", 1, "regular", 6, 2, "learned", ["continual"], 4),
    ("k4_b1_cony", 1, "cony", 8, 2, "learned", [], 4),
    ("k4_b1_cony_r", 1, "cony", 10, 3, "learned", [], 4),
    ("k4_b1_cony_s", 1, "cony", 9, 4, "learned", [], 4),
    ("k4_b1_conyfixed", 1, "cony-fixed", 9, 3, "learned", ["nystrom-fixed"], 4),
    ("k6_b1_cony_full", 1, "cony", 6, 3, "learned", [], 6),
    ("k2_b2_regular", 2, "regular", 7, 2, "learned", ["continual"], 2),
    ("k2_b2_cony", 2, "cony", 6, 2, "learned", [], 2),
    ("k4_b2_conyfixed", 2, "cony-fixed", 8, 3, "cyclic", ["nystrom-fixed"], 4),
    ("k4_b2_cony_r", 2, "cony", 9, 2, "learned", [], 4),
    # d_in 5 = the tests/golden/imagecnn/gap CNN's tokens: the conyframeembed patches-x=2
    # patches-y=2 ! conytransformer pipeline test (tests/pipelines/test_video_patches_pipeline.sh)
    ("k4_b1_cony_d5", 1, "cony", 8, 2, "learned", [], 4, 5),
]

D_IN, D, HEADS, FF, CLASSES = 6, 8, 2, 16, 3
DEFAULT_OUT = os.path.join(REPO, "tests", "golden", "model")


def make_model(blocks, attention, n, m, pe, seed, landmarks=True, k=1, d_in=D_IN):
    torch.manual_seed(seed)
    model = ConyEncoderClassifier(d_in, D, HEADS, FF, blocks, n, m, attention,
                                  labels=[f"class{i}" for i in range(CLASSES)],
                                  positional_encoding=pe, tokens_per_step=k)
    with torch.no_grad():
        # make every part matter: non-trivial LN affines, biases and a visible position
        for name, p in model.named_parameters():
            if name.endswith("norm1.weight") or name.endswith("norm2.weight") or name == "norm.weight":
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn_like(p))
            elif name == "pos_embedding":
                p.copy_(0.5 * torch.randn_like(p))
        for b in range(blocks):
            a = model.blocks[b].attn
            a.in_proj_weight.mul_(2.0)   # sharper attention than the default init
            hd = D // HEADS
            if landmarks:   # only models that run a fixed-landmark variant carry them
                a.set_landmarks(1.5 * torch.randn(HEADS, m, hd), 1.5 * torch.randn(HEADS, m, hd))
    return model


def check_multitoken_rows(model, tokens, k):
    """mha_window(queries=k) equals the last k rows of the retroactive window output."""
    c = model.config
    if c["attention"][0] == "cony":
        return   # held landmarks: covered by the C tests of the core (test_attention)
    n = c["window"]
    u = model.embed(tokens[:n].unsqueeze(0), torch.zeros(1, dtype=torch.long))
    a = model._mha(0, u, False, queries=k)
    r = model._mha(0, u, True)
    assert torch.allclose(a, r[:, -k:], atol=1e-12), "queries=k rows differ from retroactive rows"


def case_model(i):
    """(model in eval mode, float32 tokens (L, d_in)) of CASES[i], from its seeds."""
    name, blocks, attention, n, m, pe, overrides, *rest = CASES[i]
    k = rest[0] if rest else 1
    d_in = rest[1] if len(rest) > 1 else D_IN
    fixed = any(v.endswith("-fixed") for v in [attention] + overrides)
    model = make_model(blocks, attention, n, m, pe, 1000 + i, fixed, k, d_in)
    model.eval()
    L = -(-(3 * n + 2) // k) * k
    g = torch.Generator().manual_seed(2000 + i)
    return model, torch.randn(L, d_in, generator=g).to(torch.float32)


def logit_files(i, model, tokens):
    """{file name: float64 logits} of CASES[i]: its own attention, then each override.
    Turns `model` into float64."""
    name, overrides = CASES[i][0], CASES[i][6]
    m64 = model.double()
    files = {name + ".logits.npy": m64.stream_logits(tokens.double()).numpy()}
    for v in overrides:
        files[f"{name}@{v}.logits.npy"] = m64.stream_logits(tokens.double(), override=v).numpy()
    return files


def load_model(path):
    """The ConyEncoderClassifier of an exported (F32) model file."""
    tensors, meta = safetensors_io.load(path)
    model = ConyEncoderClassifier.from_config(json.loads(meta["config"]))
    state = {k: torch.from_numpy(v) for k, v in tensors.items()}
    for b, block in enumerate(model.blocks):
        if f"blocks.{b}.attn.q_landmarks" in state:   # buffers that are None until set
            block.attn.set_landmarks(state[f"blocks.{b}.attn.q_landmarks"],
                                     state[f"blocks.{b}.attn.k_landmarks"])
    model.load_state_dict(state)
    return model.eval()


def exported(model):
    """(tensors, metadata) of the file export_model writes for `model`."""
    with tempfile.TemporaryDirectory() as tmp:
        export_model(model, os.path.join(tmp, "m.safetensors"))
        return safetensors_io.load(os.path.join(tmp, "m.safetensors"))


def verify(golden=DEFAULT_OUT):
    """Messages for every way the golden files under `golden` are not what main() writes
    ([] when they are): the files are CASES', model files and tokens are the seeded
    draws, the logits are the float64 model of the committed file on the committed
    tokens."""
    torch.set_num_threads(1)
    files = {}
    for i, case in enumerate(CASES):
        name = case[0]
        model, tokens = case_model(i)
        files[name + ".safetensors"] = exported(model)
        files[name + ".tokens.npy"] = tokens.numpy()
        if os.path.isfile(os.path.join(golden, name + ".safetensors")):
            model = load_model(os.path.join(golden, name + ".safetensors"))
        tokens = torch.from_numpy(golden_check.committed(golden, name + ".tokens.npy",
                                                         tokens.numpy()))
        files.update(logit_files(i, model, tokens))
    return golden_check.compare(golden, files)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_OUT
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    for i, (name, blocks, attention, n, m, pe, overrides, *rest) in enumerate(CASES):
        k = rest[0] if rest else 1
        fixed = any(v.endswith("-fixed") for v in [attention] + overrides)
        model, tokens = case_model(i)
        L = len(tokens)
        export_model(model, os.path.join(out, name + ".safetensors"))
        np.save(os.path.join(out, name + ".tokens.npy"), tokens.numpy())
        files = logit_files(i, model, tokens)
        golden_check.write(out, files)
        m64, logits = model, files[name + ".logits.npy"]
        if attention == "cony" and n % m == 0 and k == 1:
            # self-check: where a segment completes (t >= n-1) the held landmarks tile the
            # window, so the stepped model equals the windowed Nystrom model
            ny = m64.stream_logits(tokens.double(), override="nystrom").numpy()
            aligned = [t for t in range(n - 1, L) if (t + 1) % (n // m) == 0]
            err = np.abs(ny[aligned] - logits[aligned]).max()
            assert err < 1e-10, (name, err)
            assert np.abs(ny - logits).max() > 1e-6, name   # and differs elsewhere (stale)
        if k > 1 and not fixed:
            # self-check of the multi-token reference against the one-token model: the
            # k rows of a step are the rows the retroactive attention gives the k newest
            # tokens (checked here for the first block's attention directly)
            check_multitoken_rows(m64, tokens.double(), k)
        print(f"{name}: {blocks} block(s) {attention} n={n} m={m} k={k} L={L} "
              f"logit range [{logits.min():.3f}, {logits.max():.3f}]")


if __name__ == "__main__":
    main()
