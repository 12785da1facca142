#!/usr/bin/python3
"""Per-class logit offsets chosen on the old validation recordings only, judged on the
validation-only ones (models/audio/EXPERIMENTS.md rule 31, issue 44).

    /usr/bin/python3 training/calibrate_yamnet.py --dataset out/audio-dataset-v13 \\
        --val-from out/audio-dataset-v7 --cache RUN1/val-tokens --cache RUN2/val-tokens \\
        --work out/compare --json out/r31.json RUN1 RUN2 [--apply MODEL --out FILE]

The members are validation-stage models (train_yamnet_audio.py --stages val; a work folder or
its val/transformer.safetensors); their logits of the validation and valx clips come from
compare_yamnet_recipes.py's cache (WORK/compare-logits) or `cony classify`, as there. One
offset vector b (the first class's entry 0) is chosen for all members together by
coordinate ascent (three sweeps, each class's entry over -3 .. 3 in steps of 0.05; a tie
keeps the entry nearer 0) on the mean over members of the old validation recordings' real
class mean (val.json's real/class-mean) with z + b in place of each step's logits z,
subject to the validation tone clips: at least --min-tone-clips of them noise by majority
and none silence, on every member. The valx clips play no part in the choice; the figures
with and without b are printed for both splits. --apply adds b to a classifier's output
bias (classifier.bias; the arg-max of z + b is what `cony classify` then gives) and writes
it to --out.

--target CLASS,CLASS (rule 35): only those classes' entries move, and the objective is the
members' mean old validation figure of those classes (their mean), subject to the tone
condition and to every other class's figure (members' mean) staying within --max-loss
points of its figure without offsets.
"""

import argparse
import json
import sys

import numpy as np

from conytrain import safetensors_io
from conytrain.audio import compare, yamnet

GRID = np.round(np.arange(-3.0, 3.0001, 0.05), 2)


def shifted(logits, b):
    return {k: z + b for k, z in logits.items()}


def old_val_means(rows, labels, members, b, min_tones):
    """key -> the mean over members of the old validation figure (real/class-mean and
    real/<class>) with offsets b, or None when a member's validation tone clips break the
    tone condition."""
    keys = ["real/class-mean"] + ["real/" + c for c in labels]
    got = {k: [] for k in keys}
    for lg in members:
        res = compare.figures(rows, labels, shifted(lg, b))
        t = res.get("tones/noise", {})
        if t.get("clips-right-by-majority", 0) < min_tones or t.get("clips-silence-by-majority", 0):
            return None
        for k in keys:
            if k in res:
                got[k].append(res[k]["accuracy"])
    return {k: float(np.mean(v)) for k, v in got.items() if v}


def old_val_score(rows, labels, members, b, min_tones, target=None, floor=None):
    """The objective with offsets b: the members' mean old validation class mean, or with
    @target the mean of those classes' figures, where every other class stays at or above
    @floor[class]; -1 when a condition breaks."""
    m = old_val_means(rows, labels, members, b, min_tones)
    if m is None:
        return -1.0
    if not target:
        return m["real/class-mean"]
    if any(m["real/" + c] < f - 1e-12 for c, f in floor.items()):
        return -1.0
    return float(np.mean([m["real/" + c] for c in target]))


def choose(rows, labels, members, min_tones, target=None, max_loss=1.0):
    """Coordinate ascent over GRID (module docstring): the offsets and their score. With
    @target (class names) only their entries move, and the others' old validation figures
    may fall at most @max_loss points."""
    b = np.zeros(len(labels))
    floor = None
    if target:
        base = old_val_means(rows, labels, members, b, min_tones) or {}
        floor = {c: base["real/" + c] - max_loss / 100 for c in labels
                 if c not in target and "real/" + c in base}
    score = lambda trial: old_val_score(rows, labels, members, trial, min_tones, target, floor)
    best = score(b)
    moving = [labels.index(c) for c in target] if target else range(1, len(labels))
    for _ in range(3):
        for c in moving:
            for v in sorted(GRID, key=abs):
                trial = b.copy()
                trial[c] = v
                s = score(trial)
                if s > best + 1e-12:
                    b, best = trial, s
    return b, best


def per_class(res, prefix, labels):
    return {c: 100 * res[f"{prefix}/{c}"]["accuracy"] for c in labels if f"{prefix}/{c}" in res}


def report(rows, labels, members, b):
    """Per member, without and with b: old validation (real) and valx per class, class
    means, tone clips."""
    out = []
    for i, lg in enumerate(members):
        for name, off in (("without", np.zeros(len(labels))), ("with", b)):
            res = compare.figures(rows, labels, shifted(lg, off))
            t = res.get("tones/noise", {})
            out.append({"member": i + 1, "offsets": name,
                        "old-val": per_class(res, "real", labels),
                        "old-val-class-mean": 100 * res["real/class-mean"]["accuracy"],
                        "valx": per_class(res, yamnet.VAL_EXTRA, labels),
                        "valx-class-mean": 100 * res[f"{yamnet.VAL_EXTRA}/class-mean"]["accuracy"],
                        "tone-clips-noise": t.get("clips-right-by-majority", 0),
                        "tone-clips-silence": t.get("clips-silence-by-majority", 0)})
    return out


def apply(model, b, out):
    tensors, meta = safetensors_io.load(model)
    if "classifier.bias" not in tensors or tensors["classifier.bias"].shape != b.shape:
        raise SystemExit(f"calibrate: {model}: no classifier.bias of {len(b)} classes")
    tensors = dict(tensors)
    tensors["classifier.bias"] = (tensors["classifier.bias"] + b).astype(np.float32)
    safetensors_io.save(out, tensors, meta)


def main(argv=None):
    ap = compare.build_parser()
    ap.description = __doc__.splitlines()[0]
    for a in ap._actions:
        if a.dest == "candidates":
            a.metavar, a.help = "MODEL", "validation-stage models (work folders or files)"
        if a.dest == "baseline":
            a.required = False
    ap.add_argument("--min-tone-clips", type=int, default=57)
    ap.add_argument("--target", help="CLASS,CLASS: only these offsets move; their mean old "
                                     "validation figure is the objective (rule 35)")
    ap.add_argument("--max-loss", type=float, default=1.0,
                    help="with --target: points each other class may lose on the old validation")
    ap.add_argument("--apply", help="a classifier whose output bias gets the offsets")
    ap.add_argument("--out", help="where --apply writes the changed classifier")
    opts = ap.parse_args(argv)
    if bool(opts.apply) != bool(opts.out):
        ap.error("--apply and --out go together")
    models = [compare.model_path(m) for m in opts.candidates]
    args = argparse.Namespace(**dict(vars(yamnet.build_parser().parse_args([])), **vars(opts),
                                     val_extra=True))
    args.cache = args.cache or [yamnet.build_parser().parse_args([]).cache]
    yamnet.stage_tones(args)
    rows, labels = yamnet.load_rows(args)
    members = [compare.model_logits(args, rows, labels, m) for m in models]
    target = opts.target.split(",") if opts.target else None
    if target and not set(target) <= set(labels):
        ap.error(f"--target {opts.target}: classes are {', '.join(labels)}")
    b, score = choose(rows, labels, members, opts.min_tone_clips, target, opts.max_loss)
    rep = {"labels": labels, "offsets": b.tolist(), "old-val-score": 100 * score,
           "members": models, "figures": report(rows, labels, members, b)}
    print("offsets: " + ", ".join("%s %+.2f" % (c, v) for c, v in zip(labels, b)))
    for f in rep["figures"]:
        print("member %d %-7s old val %.2f (%s) | valx %.2f (%s) | tones %d noise, %d silence" % (
            f["member"], f["offsets"], f["old-val-class-mean"],
            " / ".join("%.1f" % v for v in f["old-val"].values()), f["valx-class-mean"],
            " / ".join("%.1f" % v for v in f["valx"].values()), f["tone-clips-noise"],
            f["tone-clips-silence"]))
    if opts.json:
        with open(opts.json, "w") as fh:
            json.dump(rep, fh, indent=1)
    if opts.apply:
        apply(opts.apply, b, opts.out)
        print(f"wrote {opts.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
