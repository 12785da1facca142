#!/usr/bin/python3
"""Golden files for tests/libcony/test_fusion.c and the conyfuse tests: tiny fused models
(ref/fusion.py), exported, with per-step inputs, presence flags, the fused tokens and the
per-step logits of the windowed (non-continual) PyTorch model in float64.

    /usr/bin/python3 training/gen_fusion_golden.py [OUTDIR]   (default tests/golden/fusion)

For every case NAME it writes NAME.safetensors (the model, F32), NAME.<input>.npy (L, size)
float32 per input, NAME.present.npy (L, inputs) float32 (1 present, 0 absent: the token
of that step is then ignored and the absent token used), NAME.fused.npy (L, d_in) float32
(FusedClassifier.join) and NAME.logits.npy (L, classes) float64 (stream_logits).

b1_gated: a gated fused model (fusion.gate on video, models/av/EXPERIMENTS.md rule 12)
built as conytrain/av/gate.py builds one: the encoder of b1_gated_audio.safetensors (a
one-input audio model; its own NAME.audio.npy and NAME.logits.npy) with zero video
columns, and a random read-out and gate, so that the gate is open at some steps and shut
at others; with the gate forced shut its logits are the audio model's. b1_gated_ctx: the
same with the gate's fifth feature, a random detector on the audio token (rule 13).

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
from conytrain.av.train import start_from
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
GATED = ("b1_gated", [inp("audio", 5, [4, 1], 500), inp("video", 4, [10, 1], 300)], [4, 1],
         1, "cony", 6, 2)
GATED_STREAM = 4200
PIPELINE = ("av_pipeline",
            [inp("audio", 1024, [4, 1], 1000, cnn="yamnet.safetensors", cnn_output="embedding"),
             inp("video", 32, [10, 1], 500, cnn="frame_cnn.safetensors")], [4, 1], 1, "cony", 8, 2)


def make_model(case, seed, gate=None):
    _, inputs, rate, blocks, attention, n, m = case
    torch.manual_seed(seed)
    model = FusedClassifier(inputs, rate, gate, d=D, heads=HEADS, ff=FF, blocks=blocks, window=n,
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


def gated_models(seed, context=False):
    """(gated model, the audio model it starts from), GATED's; @context: with the fifth
    feature on the audio token."""
    audio = make_model(GATED[:1] + ([GATED[1][0]],) + GATED[2:], seed)
    model = make_model(GATED, seed + 1, gate={"input": "video", **(
        {"context": "audio"} if context else {})})
    start_from(model, audio, lambda *a: None)
    g = torch.Generator().manual_seed(seed + 2)
    with torch.no_grad():
        model.gate.readout_weight.copy_(2.0 * torch.randn(model.gate.readout_weight.shape, generator=g))
        model.gate.readout_bias.copy_(torch.randn(len(LABELS), generator=g))
        model.gate.weight.copy_(torch.tensor([-8.0, 6.0, 4.0, 2.0, 5.0][:4 + context]))
        if context:
            model.gate.context_weight.copy_(torch.randn(5, generator=g))
            model.gate.context_bias.fill_(0.2)
        model.gate.scale.fill_(1.5)
        model.eval()
        # the bias at the median of w . phi over the golden stream: the gate half open
        tokens, present = case_streams(GATED, GATED_STREAM)
        z = model.encoder.stream_logits(model.join(tokens, present))
        ctx = model.gate.context(tokens["audio"], present["audio"]) if context else None
        t = model.gate.features(z, model.gate.readout(tokens["video"]), ctx) @ model.gate.weight
        model.gate.bias.fill_(-float(t.median()))
    return model, audio.eval()


def case_files(name, model, tokens, present, say):
    """The files of one case: model, inputs, presence, fused tokens, float64 logits."""
    files = {name + ".safetensors": exported(model)}
    for n in model.names:
        files[f"{name}.{n}.npy"] = tokens[n].numpy()
    files[name + ".present.npy"] = np.stack(
        [present[n].numpy() for n in model.names], axis=1).astype(np.float32)
    files[name + ".fused.npy"] = model.join(tokens, present).detach().numpy()
    m64 = model.double()
    logits = m64.stream_logits({k: v.double() for k, v in tokens.items()}, present).numpy()
    files[name + ".logits.npy"] = logits
    say(f"{name}: {len(model.names)} inputs, L={len(logits)}, "
        f"logit range [{logits.min():.3f}, {logits.max():.3f}]")
    return files


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
        tokens, present = case_streams(case, 4000 + i)
        files.update(case_files(case[0], make_model(case, 3000 + i), tokens, present, say))
    gated, audio = gated_models(3200)
    tokens, present = case_streams(GATED, GATED_STREAM)
    files.update(case_files(GATED[0], gated, tokens, present, say))
    files.update(case_files(GATED[0] + "_ctx", gated_models(3200, context=True)[0], tokens,
                            present, say))
    only = {"audio": tokens["audio"]}
    files.update(case_files(GATED[0] + "_audio", audio, only,
                            {"audio": torch.ones(len(tokens["audio"]), dtype=torch.bool)}, say))
    files[PIPELINE[0] + ".safetensors"] = exported(make_model(PIPELINE, 3100))
    return files


def verify(golden=DEFAULT_OUT):
    """[] when the files under `golden` are what main() writes, else what differs."""
    return golden_check.compare(golden, golden_files())


def main():
    golden_check.write_main(DEFAULT_OUT, golden_files)


if __name__ == "__main__":
    main()
