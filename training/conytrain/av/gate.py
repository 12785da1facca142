"""Confidence-gated late fusion (models/av/EXPERIMENTS.md, rule 12; the format:
docs/model-format.md, "Fused models", fusion.gate; the function: ref/fusion.py).

The gated fused model's encoder IS an audio model (its input projection's video columns
and video flag column zero, so the video never reaches the encoder), and the picture
enters only through the gate: the train split's linear read-out of the MobileNet
embedding (readout.py, fitted on all train photographs), added to the audio logits with
a weight that the audio model's and the read-out's confidence decide. The gate's six
numbers (scale, 4 feature weights, bias) are fitted on the **val** split only, which the
audio model did not train on: per-step audio logits and read-out scores of val streams
built like the evaluation grid (evalset.scenes/tokens), sound clean or degraded
(build.degrade_split), pictures matched or unrelated; the loss is the mean over those
four cells of each cell's cross-entropy, the clean-unrelated cell weighted by lambda.
"""

import os

import numpy as np
import torch
import torch.nn.functional as F

from conytrain.av import evalset, sources
from conytrain.av.train import load, start_from

VAL_CONDITIONS = ["clean", "degraded0", "degraded1"]
LAMBDAS = (1, 2, 4, 8, 16, 32, 64)   # rule 12: the smallest whose val U margin >= GUARD
GUARD = -0.25                        # points, the worst class of clean sound, unrelated
VAL_STREAMS, VAL_SEED = 100, 12


def val_data(work):
    """The val split as evalset.tokens() reads it: audio (conditions, clips, steps, 1024)
    in VAL_CONDITIONS order."""
    data = load(work, "val")
    deg = np.load(os.path.join(work, "tokens-val-degraded.npz"))["audio"]
    data["audio"] = np.concatenate([data["audio"][None], deg])
    return data


@torch.no_grad()
def val_cells(audio, readout, work, length, log):
    """{(sound, picture): (z (N, C), lv (N, C), labels (N,))} for sound clean/degraded
    and picture matched/unrelated: the audio model's per-step logits (float64) and the
    read-out's log-probabilities on the val streams."""
    data = val_data(work)
    streams = evalset.scenes(data, VAL_STREAMS, length, VAL_SEED)
    model = audio.double()
    cells = {}
    for sound, conds in (("clean", ["clean"]), ("degraded", ["degraded0", "degraded1"])):
        for pic in ("matched", "unrelated"):
            zs, lvs, labs = [], [], []
            for cond in conds:
                for tok, lab in evalset.tokens(data, streams, cond, pic, VAL_CONDITIONS):
                    a = torch.from_numpy(tok["audio"]).double()
                    zs.append(model.stream_logits({"audio": a}, {"audio": torch.ones(len(lab), dtype=torch.bool)}))
                    lvs.append(F.log_softmax(torch.from_numpy(readout.scores(tok["video"], np.float64)), -1))
                    labs.append(torch.from_numpy(lab))
            cells[sound, pic] = (torch.cat(zs), torch.cat(lvs), torch.cat(labs).long())
            log(f"gate: val cell {sound}/{pic}: {len(cells[sound, pic][2])} steps, audio "
                f"{100 * accuracy(cells[sound, pic][0], cells[sound, pic][2]):.1f} %")
    return cells


def accuracy(z, y):
    return float((z.argmax(-1) == y).double().mean())


def class_margins(gate, cell):
    """Points per class: gated minus audio-alone accuracy on @cell."""
    z, lv, y = cell
    out = gate_logits(gate, z, lv)
    return [100 * (float((out[y == c].argmax(-1) == c).double().mean())
                   - float((z[y == c].argmax(-1) == c).double().mean()))
            for c in range(len(sources.CLASSES))]


def gate_logits(gate, z, lv):
    """The gate's output on present steps (ref/fusion.py's formula, the read-out done)."""
    g = torch.sigmoid(gate.features(z, lv) @ gate.weight.double() + gate.bias.double())
    return z + (gate.scale.double() * g).unsqueeze(-1) * lv


def fit(gate, cells, lam):
    """Fits gate.scale, .weight, .bias (float64, L-BFGS from scale 1, weight 0, bias 0)
    to the weighted mean of the four cells' cross-entropies."""
    params = [torch.ones(1, dtype=torch.float64, requires_grad=True),
              torch.zeros(4, dtype=torch.float64, requires_grad=True),
              torch.zeros(1, dtype=torch.float64, requires_grad=True)]
    weights = {k: (lam if k == ("clean", "unrelated") else 1.0) for k in cells}
    total = sum(weights.values())
    opt = torch.optim.LBFGS(params, max_iter=200, history_size=20, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = 0
        for k, (z, lv, y) in cells.items():
            g = torch.sigmoid(gate.features(z, lv) @ params[1] + params[2])
            loss = loss + weights[k] / total * F.cross_entropy(z + (params[0] * g).unsqueeze(-1) * lv, y)
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        gate.scale.copy_(params[0].float())
        gate.weight.copy_(params[1].float())
        gate.bias.copy_(params[2].float())


def choose(gate, cells, lambdas, log):
    """Fits the gate for each lambda in turn and keeps the first whose worst class on
    clean sound with unrelated pictures is at least GUARD points (else the last)."""
    for lam in lambdas:
        fit(gate, cells, lam)
        u = min(class_margins(gate, cells["clean", "unrelated"]))
        rows = {k: 100 * (accuracy(gate_logits(gate, *c[:2]), c[2]) - accuracy(c[0], c[2]))
                for k, c in cells.items()}
        log(f"gate: lambda {lam}: scale {gate.scale.item():.3f} weight "
            f"{[round(w, 3) for w in gate.weight.tolist()]} bias {gate.bias.item():.3f}; val "
            f"U {u:+.2f}, " + ", ".join(f"{s}/{p} {v:+.2f}" for (s, p), v in rows.items()))
        if u >= GUARD:
            return lam
    return lambdas[-1]


def gated_model(audio, make_fused, readout, cells, lambdas, log):
    """The gated fused model: @make_fused() (a FusedClassifier of audio and video with a
    gate on video) starting from @audio, the read-out's A, c in the gate, the gate
    fitted on @cells with the first of @lambdas that passes choose()."""
    model = make_fused()
    start_from(model, audio, log)
    with torch.no_grad():
        model.absent["video"].zero_()   # unused: the video columns are zero
        model.gate.readout_weight.copy_(torch.from_numpy(readout.a).float())
        model.gate.readout_bias.copy_(torch.from_numpy(readout.c).float())
    lam = choose(model.gate, cells, lambdas, log)
    log(f"gate: lambda {lam} chosen on val")
    return model.eval(), lam
