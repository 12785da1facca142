#!/usr/bin/python3
"""Measures a decision rule's candidates in one command (models/audio/EXPERIMENTS.md, rules
20 to 24): validation-stage models of several training seeds per recipe, on the validation
and validation-only clips (data set version 13, split valx), through `cony classify`.

    /usr/bin/python3 training/compare_yamnet_recipes.py --dataset out/audio-dataset-v13 \\
        --val-from out/audio-dataset-v7 --cache out/yamnet-cache --cony build-train/tools/cony \\
        --work out/compare --baseline E66 --ensembles --json out/compare/rule.json \\
        E65=out/e65-s14,out/e65-s15,out/e65-s16 E66=out/e66-s14,out/e66-s15,out/e66-s16

A candidate is NAME=MODEL[,MODEL...]: its members, each a classifier file or a work folder
with val/transformer.safetensors (train_yamnet_audio.py --stages val). Every member's
logits of every validation and valx clip come from `cony classify` once, as
train_yamnet_audio.py's val stage measures (each clip after n - 1 tokens of its own
recording; full-window steps), and are kept in WORK/compare-logits/ under the file's
SHA-256, so a second comparison of the same files (another baseline, another candidate
beside them) classifies nothing again. WORK/tones holds the tone clips' manifest (made as
the tones stage makes it when missing); the tokens come from CACHE, or, with several
--cache, from the one whose CNN (its yamnet.json) is the member's (its config's
frontend cnn_sha256): models on an adapted YAMNet (--adapt-cnn) bring their own.

Per member, the figures are those `train_yamnet_audio.py --val-extra` writes to val.json
(yamnet.figures() on the same predictions): the combined class mean (rule 20), per class,
the old validation class mean, the valx class mean, the validation tone clips' steps
labelled noise and clips labelled noise and silence by majority (rule 23 (b)). With
--ensembles, also each candidate's members as one classifier, the mean of their softmax
probabilities per step (rule 24). Printed as markdown: the table, each candidate's mean
over its members, and against --baseline the difference of the means and the seed-pair
differences of the combined class mean (members paired in the order given); --json writes
all of it.
"""

import argparse
import hashlib
import json
import os
import sys

import numpy as np

from conytrain.audio import eval_default, yamnet
from conytrain.audio.own import sha256

SPLITS = ("val", yamnet.VAL_EXTRA)
# the headline figures of one classifier (points or counts), in the table's order
HEADLINE = ("combined", "old-val", "valx", "tone-steps", "tone-clips", "tone-silence")


def model_path(text):
    """A classifier file, or a work folder's val/transformer.safetensors."""
    if os.path.isdir(text):
        text = os.path.join(text, "val", "transformer.safetensors")
    if not os.path.isfile(text):
        raise SystemExit(f"compare: {text}: no such classifier file (give a file or a work "
                         "folder with val/transformer.safetensors)")
    return text


def parse_candidate(text):
    """NAME=MODEL[,MODEL...] -> (name, [model paths])."""
    name, sep, models = text.partition("=")
    if not sep or not name or not models:
        raise SystemExit(f"compare: {text!r}: a candidate is NAME=MODEL[,MODEL...]")
    return name, [model_path(m) for m in models.split(",") if m]


def clip_key(r):
    return f"{r['split']}|{r['set']}|{r['path']}"


def protocol_id(args, rows, window):
    """What a clip's logits depend on besides the model: its stream (the clips of each
    recording in the split, in order), the window and the tokens' cache."""
    streams = [(clip_key(r), r["group"]) for r in rows if r["split"] in SPLITS]
    text = json.dumps([window, os.path.realpath(args.cache), streams])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def model_logits(args, rows, labels, model):
    """clip key -> (steps, classes) logits of every validation and valx clip, from
    WORK/compare-logits/ or through `cony classify` (then kept there)."""
    cfg, _ = eval_default.model_config(model)
    if cfg.get("labels") != labels:
        raise SystemExit(f"compare: {model}: labels {cfg.get('labels')} differ from the data "
                         f"set's {labels}")
    window = cfg["window"]
    args = argparse.Namespace(**dict(vars(args), cache=cache_for(args, cfg, model)))
    path = os.path.join(args.work, "compare-logits",
                        f"{sha256(model)}-{protocol_id(args, rows, window)}.npz")
    if os.path.exists(path):
        with np.load(path) as f:
            return {k: f[k] for k in f.files}
    got = {}
    for split in SPLITS:
        for r, z in yamnet.split_logits(args, rows, model, split, window=window):
            got[clip_key(r)] = z
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.savez(path + ".tmp.npz", **got)
    os.replace(path + ".tmp.npz", path)        # a stopped run leaves no half cache
    yamnet.log(f"compare: {model}: {len(got)} clips through cony classify -> {path}")
    return got


def cache_for(args, cfg, model):
    """The --cache holding tokens of the CNN the model was trained on."""
    want = cfg.get("frontend", {}).get("cnn_sha256")
    if len(args.cache) == 1:
        return args.cache[0]
    for cache in args.cache:
        with open(os.path.join(cache, "yamnet.json")) as f:
            if want is None or json.load(f).get("cnn_sha256") == want:
                return cache
    raise SystemExit(f"compare: {model}: no --cache holds tokens of its CNN "
                     f"({cfg.get('frontend', {}).get('cnn')}, SHA-256 {want})")


def softmax(z):
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def ensemble_logits(members):
    """The members as one classifier: per clip, the log of the mean of their softmax
    probabilities (its arg-max is the mean's)."""
    return {k: np.log(np.mean([softmax(m[k]) for m in members], 0)) for k in members[0]}


def figures(rows, labels, logits):
    """val.json's figures (yamnet.figures()) of one classifier's logits."""
    def preds(split):
        return [(r, logits[clip_key(r)].argmax(1)) for r in rows if r["split"] == split]
    return yamnet.figures(labels, preds("val"), preds(yamnet.VAL_EXTRA))


def headline(res):
    """HEADLINE's figures of figures()'s result: class means in points, tones in counts."""
    t = res.get("tones/noise", {})
    return {"combined": 100 * res["combined/class-mean"]["accuracy"],
            "old-val": 100 * res["real/class-mean"]["accuracy"],
            "valx": 100 * res[f"{yamnet.VAL_EXTRA}/class-mean"]["accuracy"],
            "tone-steps": t.get("correct", 0), "tone-clips": t.get("clips-right-by-majority", 0),
            "tone-silence": t.get("clips-silence-by-majority", 0)}


def mean_headline(heads):
    return {k: float(np.mean([h[k] for h in heads])) for k in HEADLINE}


def against(cand, base):
    """A candidate against the baseline (lists of members' headline()s, in the order given):
    the difference of the means of every figure, and the seed-pair differences of the
    combined class mean (the first members paired, the second, ...; as many pairs as the
    shorter list has members)."""
    mc, mb = mean_headline(cand), mean_headline(base)
    pairs = [c["combined"] - b["combined"] for c, b in zip(cand, base)]
    return {"mean-difference": {k: mc[k] - mb[k] for k in HEADLINE},
            "seed-pairs": pairs, "pairs-favouring": sum(p > 0 for p in pairs)}


def compare(args, candidates, rows, labels):
    """The JSON report: per classifier (members NAME.1, NAME.2, ...; with --ensembles
    NAME.ens) the file(s), val.json's figures and the headline; per candidate the members'
    mean and, against the baseline, against()'s differences."""
    logits, report = {}, {"classifiers": {}, "candidates": {}, "baseline": args.baseline}
    for name, models in candidates:
        for i, m in enumerate(models):
            logits[m] = logits.get(m) or model_logits(args, rows, labels, m)
            res = figures(rows, labels, logits[m])
            report["classifiers"][f"{name}.{i + 1}"] = {
                "files": [m], "figures": res, "headline": headline(res)}
        if args.ensembles and len(models) > 1:
            res = figures(rows, labels, ensemble_logits([logits[m] for m in models]))
            report["classifiers"][f"{name}.ens"] = {
                "files": models, "figures": res, "headline": headline(res)}
    members = {name: [report["classifiers"][f"{name}.{i + 1}"]["headline"]
                      for i in range(len(models))] for name, models in candidates}
    for name, _ in candidates:
        c = report["candidates"][name] = {"members": len(members[name]),
                                          "mean": mean_headline(members[name])}
        if name != args.baseline:
            c["against-baseline"] = against(members[name], members[args.baseline])
        if f"{name}.ens" in report["classifiers"]:
            ens = report["classifiers"][f"{name}.ens"]["headline"]
            c["ensemble-over-members"] = {k: ens[k] - c["mean"][k] for k in HEADLINE}
    return report


def markdown(report, labels):
    """The report as markdown tables."""
    cols = ["combined class mean"] + labels + ["old val class mean", "valx class mean",
                                               "tone steps noise", "tone clips noise by majority",
                                               "tone clips silence by majority"]
    out = ["| classifier | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, c in report["classifiers"].items():
        res, h = c["figures"], c["headline"]
        t = res.get("tones/noise", {"steps": 0, "clips": 0})
        per = ["%.1f" % (100 * res[f"combined/{x}"]["accuracy"]) if f"combined/{x}" in res
               else "-" for x in labels]
        out.append("| " + " | ".join(
            [name, "**%.2f**" % h["combined"]] + per +
            ["%.2f" % h["old-val"], "%.2f" % h["valx"], "%d/%d" % (h["tone-steps"], t["steps"]),
             "%d of %d" % (h["tone-clips"], t["clips"]), "%d" % h["tone-silence"]]) + " |")
    out += ["", "| candidate | members | mean combined | mean old val | mean valx | "
            "mean tone steps | mean tone clips | against the baseline (%s): combined, "
            "seed pairs | ensemble over its members' mean |" % report["baseline"],
            "|---" * 9 + "|"]
    for name, c in report["candidates"].items():
        m = c["mean"]
        vs = "baseline"
        if "against-baseline" in c:
            a = c["against-baseline"]
            vs = "%+.2f (%s; %d of %d favour %s)" % (
                a["mean-difference"]["combined"], ", ".join("%+.2f" % p for p in a["seed-pairs"]),
                a["pairs-favouring"], len(a["seed-pairs"]), name)
        ens = c.get("ensemble-over-members")
        out.append("| %s | %d | %.2f | %.2f | %.2f | %.1f | %.1f | %s | %s |" % (
            name, c["members"], m["combined"], m["old-val"], m["valx"], m["tone-steps"],
            m["tone-clips"], vs, "%+.2f" % ens["combined"] if ens else "-"))
    out += [""] + ["%s = %s" % (name, ", ".join(c["files"]))
                   for name, c in report["classifiers"].items()]
    return "\n".join(out)


def build_parser():
    d = yamnet.build_parser().parse_args([])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("candidates", nargs="+", metavar="NAME=MODEL[,MODEL...]")
    ap.add_argument("--baseline", required=True, help="the candidate the others are set against")
    ap.add_argument("--ensembles", action="store_true",
                    help="also each candidate's members as one classifier (mean softmax)")
    ap.add_argument("--json", help="write the report (every figure) here")
    ap.add_argument("--dataset", default="out/audio-dataset-v13",
                    help="a data set with validation-only clips (split valx, version 13)")
    ap.add_argument("--val-from", default=d.val_from,
                    help="the data set whose --val-scope validation recordings are held out")
    ap.add_argument("--val-scope", choices=("base", "all"), default=d.val_scope)
    ap.add_argument("--val-frac", type=float, default=d.val_frac)
    ap.add_argument("--seed", type=int, default=d.seed, help="the validation split's seed")
    ap.add_argument("--cony", default=d.cony)
    ap.add_argument("--cache", action="append",
                    help="YAMNet tokens per clip (train_yamnet_audio.py's embed stage; "
                         f"default {d.cache}); given several times, each model's tokens "
                         "come from the one of its CNN")
    ap.add_argument("--work", default="out/compare",
                    help="WORK/tones (the tone clips' manifest), WORK/compare-logits (kept "
                         "logits), temporary files")
    return ap


def main(argv=None):
    ap = build_parser()
    opts = ap.parse_args(argv)
    candidates = [parse_candidate(c) for c in opts.candidates]
    names = [n for n, _ in candidates]
    if len(set(names)) != len(names):
        ap.error(f"candidates: a name given twice ({names})")
    if opts.baseline not in names:
        ap.error(f"--baseline {opts.baseline}: not one of the candidates {names}")
    # train_yamnet_audio.py's options with these data options, as its val stage with --val-extra
    args = argparse.Namespace(**dict(vars(yamnet.build_parser().parse_args([])), **vars(opts),
                                     val_extra=True))
    args.cache = args.cache or [yamnet.build_parser().parse_args([]).cache]
    os.makedirs(args.work, exist_ok=True)
    yamnet.stage_tones(args)                   # WORK/tones, unless its manifest is there
    rows, labels = yamnet.load_rows(args)
    missing = [(c, r) for c in args.cache for r in rows if r["split"] in SPLITS
               and not os.path.exists(yamnet.token_path(c, r))]
    if missing:
        c, r = missing[0]
        ap.error(f"--cache {c}: no tokens for {len(missing)} clips (e.g. "
                 f"{yamnet.token_path(c, r)}); run train_yamnet_audio.py "
                 "--stages tones,embed with these data options first")
    if not [r for r in rows if r["split"] == yamnet.VAL_EXTRA]:
        ap.error(f"--dataset {args.dataset}: no validation-only clips (split "
                 f"{yamnet.VAL_EXTRA}; data set version 13)")
    report = compare(args, candidates, rows, labels)
    print(markdown(report, labels))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
