"""Rule 15 (models/av/EXPERIMENTS.md): bounded picture influence, measured through the
float64 twin (ref/fusion.py's BoundedFusion). The limit L is chosen on the val split
(gate.py's val streams of rule 12, rule 13's "margin"); then rule 11's grid is measured
for every L: the chosen one decides, the others are reported.

    cd training && python3 -m conytrain.av.bounded --work ../out/gate-av5 \
        --fused FUSED.safetensors --audio AUDIO.pt --out ../out/bounded/grid.json
"""

import argparse
import json
import os

import numpy as np
import torch

from conytrain.av import build, evalset, gate
from conytrain.av import train as avtrain
from conytrain.ref.fusion import BoundedFusion, bounded_logits

LIMITS = (0.25, 0.5, 1.0, 2.0, 4.0)   # nats, fixed by rule 15


@torch.no_grad()
def val_cells(audio, fused, work, length, log):
    """{(sound, picture): (z_audio, z_fused, labels)} on gate.py's val streams (sound
    clean / degraded, picture matched / unrelated), float64."""
    audio, fused = audio.double(), fused.double()
    cells = {}
    for key, cell in gate.val_streams(work, length):
        za, zf, labs = [], [], []
        for tok, lab in cell:
            t = {n: torch.from_numpy(tok[n]).double() for n in fused.names}
            p = {n: torch.ones(len(lab), dtype=torch.bool) for n in fused.names}
            za.append(audio.stream_logits({"audio": t["audio"]}, {"audio": p["audio"]}))
            zf.append(fused.stream_logits(t, p))
            labs.append(torch.from_numpy(lab).long())
        cells[key] = (torch.cat(za), torch.cat(zf), torch.cat(labs))
        log(f"bounded: val cell {key[0]}/{key[1]}: {len(cells[key][2])} steps, audio "
            f"{100 * gate.accuracy(cells[key][0], cells[key][2]):.1f} %, "
            f"fused {100 * gate.accuracy(cells[key][1], cells[key][2]):.1f} %")
    return cells


def val_rows(cells, limit):
    """(U, {cell: points over the audio model}) of the bounded output at @limit on val."""
    rows, u = {}, None
    for key, (za, zf, y) in cells.items():
        out = bounded_logits(za, zf, limit, torch.ones(len(y), dtype=torch.bool))
        rows[key] = 100 * (gate.accuracy(out, y) - gate.accuracy(za, y))
        if key == ("clean", "unrelated"):
            u = min(100 * (b - a) for a, b in zip(gate.per_class(za, y), gate.per_class(out, y)))
    return u, rows


def choose(cells, log, limits=LIMITS):
    """Rule 15: the limit with the largest smallest val margin over rule 11's bounds
    (gate.val_margin, rule 13's "margin"); the first of equals."""
    best = None
    for limit in limits:
        u, rows = val_rows(cells, limit)
        m = gate.val_margin(u, rows)
        log(f"bounded: L {limit}: val U {u:+.2f}, " +
            ", ".join(f"{s}/{p} {v:+.2f}" for (s, p), v in rows.items()) + f"; margin {m:+.2f}")
        if best is None or m > best[0]:
            best = (m, limit)
    log(f"bounded: L {best[1]} chosen on val (margin {best[0]:+.2f})")
    return best[1]


def main(argv=None):
    from conytrain.av.cli import load_file, load_model
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True, help="gate.py's work (the val tokens)")
    ap.add_argument("--eval-work", required=True, help="the evaluation set (evalset.npz)")
    ap.add_argument("--fused", required=True, help="the fused model file (.safetensors)")
    ap.add_argument("--audio", required=True, help="the audio model (.pt)")
    ap.add_argument("--out", required=True, help="the grids (JSON), one per limit")
    ap.add_argument("--steps", type=int, default=96)
    ap.add_argument("--streams", type=int, default=40)
    args = ap.parse_args(argv)
    fused, audio = load_file(args.fused), load_model(args.audio)
    chosen = choose(val_cells(audio, fused, args.work, args.steps, build.log), build.log)
    z = np.load(os.path.join(args.eval_work, "evalset.npz"))
    data = {k: z[k] for k in z.files}
    out = {"chosen": chosen}
    for limit in (chosen,) + tuple(x for x in LIMITS if x != chosen):
        models = {"fused": BoundedFusion(audio, fused, limit), "audio": audio}
        cells = evalset.grid(models, data, avtrain.RefPath(), args.streams, args.steps, 54,
                             build.log)
        out[str(limit)] = cells
        build.log(f"bounded: L {limit}{' (chosen)' if limit == chosen else ''}: rule 11 " +
                  ", ".join(f"{k} {v:+.2f}" for k, v in evalset.goals(cells).items()))
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
