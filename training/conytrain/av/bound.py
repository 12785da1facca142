"""Rule 23's bound (models/av/EXPERIMENTS.md): how far a hard gate on the audio model's
and the picture's confidence can take issue 54's clean goals (U, M) and D when its three
numbers are tuned on the evaluation grid itself. An analysis, not a model: nothing it
computes is exported.

    /usr/bin/python3 -m conytrain.av.bound --work out/av7-continual --tag run36 \\
        --seeds 1,2,3,4,5 [--eval-work out/av-eval --eval-root out/av-eval-debs/x]

Each step's output is z = z_audio + lambda * on * log p_picture, where on = [max
softmax(z_audio) < tau] * [max p_picture > sigma]; with the camera absent it is z_audio.
The audio logits come from the float64 PyTorch twin of each seed's audio model, the
picture's log-probabilities from the train split's read-out (cli.cached_readout), on
rule 11's streams (evalset.scenes, 40 x 96 steps, seed 54) with each stream's continual
YAMNet tokens (evalset.continual_stream_tokens)."""

import argparse
import itertools
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

from conytrain import REPO
from conytrain.av import build, cli, evalset, gate
from conytrain.av import train as avtrain

LAMBDAS = (0.25, 0.5, 1, 2, 4, 8, 16, 64)
TAUS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.01)
SIGMAS = (0, 0.5, 0.7, 0.9)
CELLS = [(cond, pic) for cond in ("clean", "snr0") for pic in ("matched", "unrelated")]


def gated(z, lv, lam, tau, sigma):
    """The rule's logits: @z (N, C) audio logits, @lv (N, C) the picture's
    log-probabilities."""
    on = (F.softmax(z, -1).max(-1).values < tau) & (lv.exp().max(-1).values > sigma)
    return z + lam * on.to(z.dtype).unsqueeze(-1) * lv


def per_class(z, y):
    """[overall, class 0, ..., class C-1] top-1 accuracy of logits @z on labels @y."""
    return [gate.accuracy(z, y)] + gate.per_class(z, y)


def margins(seed_cells, lam, tau, sigma):
    """{cell: [overall, per class] points, fused minus audio}, seed means, for one triple:
    @seed_cells [{cell: (z, lv, y)}] one dict a seed."""
    out = {}
    for cell in CELLS:
        diffs = [np.subtract(per_class(gated(*c[cell][:2], lam, tau, sigma), c[cell][2]),
                             per_class(c[cell][0], c[cell][2])) for c in seed_cells]
        out[cell] = 100 * np.mean(diffs, axis=0)
    return out


def sweep(seed_cells):
    """[(lam, tau, sigma, U, M, D)] over every triple: U the worst class of clean sound
    with an unrelated picture, M clean matched overall, D 0 dB matched overall."""
    rows = []
    for lam, tau, sigma in itertools.product(LAMBDAS, TAUS, SIGMAS):
        m = margins(seed_cells, lam, tau, sigma)
        rows.append((lam, tau, sigma, float(min(m["clean", "unrelated"][1:])),
                     float(m["clean", "matched"][0]), float(m["snr0", "matched"][0])))
    return rows


def grid_cells(audio, readout, data, streams):
    """{(cond, picture): (z, lv, y)} on rule 11's streams for one audio model
    (gate.cell_outputs)."""
    model = audio.double()
    return {(cond, pic): gate.cell_outputs(model, readout,
                                           evalset.tokens(data, streams, cond, pic))[:3]
            for cond, pic in CELLS}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True, help="the run's folder (its TAG-audio-sN.pt)")
    ap.add_argument("--tag", required=True)
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--eval-work", default=os.path.join(REPO, "out", "av-eval"))
    ap.add_argument("--eval-root", default=os.path.join(REPO, "out", "av-eval-debs", "x"))
    ap.add_argument("--cony", default=os.path.join(REPO, "build", "tools", "cony"))
    ap.add_argument("--audio-cnn", default=os.path.join(REPO, "models", "yamnet", "yamnet.safetensors"))
    ap.add_argument("--readout-penalties", default="0.001,0.01,0.1,1,10,100")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    z = np.load(os.path.join(args.eval_work, "evalset.npz"))
    data = {k: z[k] for k in z.files}
    streams = evalset.scenes(data, 40, 96, 54)
    data["stream_audio"] = evalset.continual_stream_tokens(
        args.eval_root, data, streams, args.cony, args.audio_cnn, args.eval_work)
    ro_args = argparse.Namespace(work=args.work, video_readout=5, readout_penalties=[
        float(p) for p in args.readout_penalties.split(",")])
    readout = cli.cached_readout(ro_args, avtrain.load(args.work, "train"))
    seed_cells = []
    for seed in (int(s) for s in args.seeds.split(",")):
        audio = cli.load_model(os.path.join(args.work, f"{args.tag}-audio-s{seed}.pt"))
        seed_cells.append(grid_cells(audio, readout, data, streams))
        build.log(f"bound: seed {seed}'s cells")
    for cell in CELLS:   # the audio model alone, to compare with the run's own grid
        acc = 100 * np.mean([per_class(c[cell][0], c[cell][2]) for c in seed_cells], axis=0)
        build.log(f"bound: audio model {cell[0]}/{cell[1]}: " + " / ".join(f"{v:.1f}" for v in acc))
    rows = sweep(seed_cells)
    path = os.path.join(args.work, f"bound-{args.tag}.json")
    with open(path, "w") as f:
        json.dump({"rows": rows, "seeds": args.seeds}, f)
    both = [r for r in rows if r[3] >= -0.5 and r[4] >= 1.0]
    print(f"{len(rows)} triples; clean U >= -0.5 and M >= +1: {len(both)}")
    print("best M with U >= -0.5:", max((r for r in rows if r[3] >= -0.5), key=lambda r: r[4]))
    print("best U with M >= +1:", max((r for r in rows if r[4] >= 1.0), key=lambda r: r[3],
                                      default=None))
    print("best D:", max(rows, key=lambda r: r[5]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
