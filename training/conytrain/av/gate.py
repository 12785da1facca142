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

Rule 13 adds a fifth feature, a degradation detector on the audio token (a logistic
regression of the train split's clean clips against their degraded copies, so fitted on
other clips than the gate), keeps the scale positive (s = softplus(s')), and may choose
lambda by the smallest val margin over rule 11's bounds ("margin") instead of rule 12's
guard.
"""

import os

import numpy as np
import torch
import torch.nn.functional as F

from conytrain.av import evalset, readout as ro, sources
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


def detector(work, log, penalty=1.0):
    """(u (1024,), e) float64: a logistic regression of the train split's YAMNet tokens,
    clean (0) against their degraded copies (1) (rule 13), by readout.fit."""
    clean = load(work, "train")["audio"].reshape(-1, 1024)
    deg = np.load(os.path.join(work, "tokens-train-degraded.npz"))["audio"].reshape(-1, 1024)
    x = np.concatenate([clean, deg])
    y = np.concatenate([np.zeros(len(clean), int), np.ones(len(deg), int)])
    a, c = ro.fit(x, y, penalty)
    u, e = a[1] - a[0], c[1] - c[0]
    acc = float((((x @ u + e) > 0) == y).mean())
    log(f"gate: degradation detector on {len(clean)} clean and {len(deg)} degraded train "
        f"tokens: train accuracy {100 * acc:.1f} %")
    return u, float(e)


VAL_CELLS = [(sound, conds, pic) for sound, conds in (("clean", ["clean"]),
                                                       ("degraded", ["degraded0", "degraded1"]))
             for pic in ("matched", "unrelated")]


def val_streams(work, length):
    """[((sound, picture), [(tokens {audio, video}, labels)])]: the val streams of each
    cell (sound clean / degraded, picture matched / unrelated), one draw for all cells."""
    data = val_data(work)
    streams = evalset.scenes(data, VAL_STREAMS, length, VAL_SEED)
    return [((sound, pic), [st for cond in conds
                            for st in evalset.tokens(data, streams, cond, pic, VAL_CONDITIONS)])
            for sound, conds, pic in VAL_CELLS]


@torch.no_grad()
def cell_outputs(model, readout, cell, context=None):
    """(z (N, C), lv (N, C), labels (N,), ctx (N,) or None) of one cell's streams
    [(tokens {audio, video}, labels)] (evalset.tokens): the float64 audio @model's per-step
    logits, the read-out's log-probabilities and, with a @context detector (u, e), its
    probability of a degraded sound."""
    zs, lvs, labs, cs = [], [], [], []
    for tok, lab in cell:
        a = torch.from_numpy(tok["audio"]).double()
        zs.append(model.stream_logits({"audio": a}, {"audio": torch.ones(len(lab), dtype=torch.bool)}))
        lvs.append(F.log_softmax(torch.from_numpy(readout.scores(tok["video"], np.float64)), -1))
        labs.append(torch.from_numpy(lab))
        if context is not None:
            cs.append(torch.sigmoid(a @ torch.from_numpy(context[0]) + context[1]))
    return (torch.cat(zs), torch.cat(lvs), torch.cat(labs).long(), torch.cat(cs) if cs else None)


def val_cells(audio, readout, work, length, log, context=None):
    """{(sound, picture): cell_outputs} for sound clean/degraded and picture
    matched/unrelated on the val streams."""
    model = audio.double()
    cells = {}
    for (sound, pic), cell in val_streams(work, length):
        cells[sound, pic] = cell_outputs(model, readout, cell, context)
        log(f"gate: val cell {sound}/{pic}: {len(cells[sound, pic][2])} steps, audio "
            f"{100 * accuracy(cells[sound, pic][0], cells[sound, pic][2]):.1f} %")
    return cells


def accuracy(z, y):
    return float((z.argmax(-1) == y).double().mean())


def per_class(z, y):
    """Top-1 accuracy of logits @z on the steps of each class (labels @y)."""
    return [float((z[y == c].argmax(-1) == c).double().mean()) for c in range(len(sources.CLASSES))]


def class_margins(gate, cell):
    """Points per class: gated minus audio-alone accuracy on @cell."""
    z, lv, y, ctx = cell
    out = gate_logits(gate, z, lv, ctx)
    return [100 * (b - a) for a, b in zip(per_class(z, y), per_class(out, y))]


def gate_logits(gate, z, lv, ctx=None):
    """The gate's output on present steps (ref/fusion.py's formula, the read-out and the
    context feature done)."""
    g = torch.sigmoid(gate.features(z, lv, ctx) @ gate.weight.double() + gate.bias.double())
    return z + (gate.scale.double() * g).unsqueeze(-1) * lv


SOFTPLUS_ONE = float(np.log(np.e - 1))   # softplus(SOFTPLUS_ONE) = 1


def fit(gate, cells, lam, positive=False):
    """Fits gate.scale, .weight, .bias (float64, L-BFGS from scale 1, weight 0, bias 0)
    to the weighted mean of the four cells' cross-entropies; @positive: scale =
    softplus(s') (rule 13)."""
    nw = gate.weight.numel()
    params = [torch.full((1,), SOFTPLUS_ONE if positive else 1.0, dtype=torch.float64,
                         requires_grad=True),
              torch.zeros(nw, dtype=torch.float64, requires_grad=True),
              torch.zeros(1, dtype=torch.float64, requires_grad=True)]
    scale = (lambda: F.softplus(params[0])) if positive else (lambda: params[0])
    weights = {k: (lam if k == ("clean", "unrelated") else 1.0) for k in cells}
    total = sum(weights.values())
    opt = torch.optim.LBFGS(params, max_iter=200, history_size=20, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = 0
        for k, (z, lv, y, ctx) in cells.items():
            g = torch.sigmoid(gate.features(z, lv, ctx) @ params[1] + params[2])
            loss = loss + weights[k] / total * F.cross_entropy(z + (scale() * g).unsqueeze(-1) * lv, y)
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        gate.scale.copy_(scale().float())
        gate.weight.copy_(params[1].float())
        gate.bias.copy_(params[2].float())


def val_margin(u, rows):
    """Rule 13's "margin": the smallest val margin over rule 11's bounds (U, M, D')."""
    return min(u - evalset.NEED["U"], rows["clean", "matched"] - evalset.NEED["M"],
               rows["degraded", "matched"] - evalset.NEED["D"])


def choose(gate, cells, lambdas, log, choice="guard", positive=False):
    """Fits the gate for each lambda; "guard" (rule 12) keeps the first whose worst class
    on clean sound with unrelated pictures is at least GUARD points (else the last),
    "margin" (rule 13) the one with the largest val_margin()."""
    best = None
    for lam in lambdas:
        fit(gate, cells, lam, positive)
        u = min(class_margins(gate, cells["clean", "unrelated"]))
        rows = {k: 100 * (accuracy(gate_logits(gate, c[0], c[1], c[3]), c[2])
                          - accuracy(c[0], c[2])) for k, c in cells.items()}
        log(f"gate: lambda {lam}: scale {gate.scale.item():.3f} weight "
            f"{[round(w, 3) for w in gate.weight.tolist()]} bias {gate.bias.item():.3f}; val "
            f"U {u:+.2f}, " + ", ".join(f"{s}/{p} {v:+.2f}" for (s, p), v in rows.items()))
        if choice == "guard" and u >= GUARD:
            return lam
        if choice == "margin" and (best is None or val_margin(u, rows) > best[0]):
            best = (val_margin(u, rows), lam)
    if choice == "margin":
        fit(gate, cells, best[1], positive)
        return best[1]
    return lambdas[-1]


def gated_model(audio, make_fused, readout, cells, lambdas, log, choice="guard",
                context=None):
    """The gated fused model: @make_fused() (a FusedClassifier of audio and video with a
    gate on video) starting from @audio, the read-out's A, c in the gate (and the
    @context detector's u, e), the gate fitted on @cells with the lambda choose() picks
    (rule 13, with a context: the scale positive)."""
    model = make_fused()
    start_from(model, audio, log)
    with torch.no_grad():
        model.absent["video"].zero_()   # unused: the video columns are zero
        model.gate.readout_weight.copy_(torch.from_numpy(readout.a).float())
        model.gate.readout_bias.copy_(torch.from_numpy(readout.c).float())
        if context is not None:
            model.gate.context_weight.copy_(torch.from_numpy(context[0]).float())
            model.gate.context_bias.fill_(context[1])
    lam = choose(model.gate, cells, lambdas, log, choice, positive=context is not None)
    log(f"gate: lambda {lam} chosen on val")
    return model.eval(), lam
