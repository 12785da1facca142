#!/usr/bin/python3
"""Held-out accuracy of the default audio model in the continual C path.

    /usr/bin/python3 training/eval_default_audio.py [--dataset out/audio-dataset-v7] \\
        [--cony build-train/tools/cony] [--models models/audio] [--update-model-md]

Every test-split clip of the data set (training/data/build_audio_dataset.sh) is run as
its own stream, from a fresh state, through the C tools exactly as the GStreamer
pipeline computes it:

    cony mel CLIP.wav -o mel.npy                       (conymel)
    cony embed --model vggish.safetensors mel.npy      (conyvggish: 96-frame windows
                                                        every 25 frames, no postprocess)
    cony classify --model transformer.safetensors [--attention V] tokens.npy
                                                       (conytransformer: one step per token)

A step is correct when the arg-max of its logits is the clip's label. Steps are split
into warm-up steps (the window holds fewer than n tokens: t < n - 1) and full-window
steps. The headline is the full-window per-step accuracy on the real (not synthesised)
test clips; synthesised test clips are reported separately. Confusion matrices are of
full-window steps. Nothing here is used for training or model selection.

With --update-model-md the results replace the block between the markers
`<!-- eval:begin -->` and `<!-- eval:end -->` of MODELS/MODEL.md.
"""

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

VARIANTS = ("cony-fixed", "nystrom-fixed", "cony", "nystrom", "continual", "regular")


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def model_config(path):
    import struct
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return json.loads(header["__metadata__"]["config"]), set(header)


def evaluate(args):
    with open(os.path.join(args.dataset, "manifest.csv"), newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["split"] == "test"]
    tf_path = os.path.join(args.models, "transformer.safetensors")
    cnn_path = os.path.join(args.models, "vggish.safetensors")
    cfg, tensors = model_config(tf_path)
    labels = cfg["labels"]
    n = cfg["window"]
    trained = cfg["attention"][0]
    variants = [trained] + [v for v in VARIANTS if v != trained]
    if "blocks.0.attn.q_landmarks" not in tensors:
        variants = [v for v in variants if not v.endswith("-fixed")]
    results = {v: [] for v in variants}     # per clip: (label id, origin, pred array)
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="cony-eval-") as tmp:
        mel, tok, lg = (os.path.join(tmp, f) for f in ("mel.npy", "tok.npy", "logits.npy"))
        for r in rows:
            run([args.cony, "mel", os.path.join(args.dataset, r["path"]), "-o", mel])
            run([args.cony, "embed", "--model", cnn_path, mel, "-o", tok])
            for v in variants:
                cmd = [args.cony, "classify", "--model", tf_path, tok, "-o", lg]
                if v != trained:
                    cmd[2:2] = ["--attention", v]
                run(cmd)
                pred = np.load(lg).argmax(1)
                results[v].append((labels.index(r["label"]), r["origin"], pred, r["group"]))
    seconds = time.time() - t0
    return rows, labels, n, trained, variants, results, seconds


def summarise(labels, n, results_v, origin):
    C = len(labels)
    conf = np.zeros((C, C), np.int64)
    warm_ok = warm_all = full_ok = full_all = 0
    per_class = np.zeros((C, 2), np.int64)   # full-window correct, total
    clip_ok = clips = 0
    for y, o, pred, _ in results_v:
        if origin != "all" and o != origin:
            continue
        clips += 1
        t = np.arange(len(pred))
        full = t >= n - 1
        ok = pred == y
        warm_ok += int(ok[~full].sum())
        warm_all += int((~full).sum())
        full_ok += int(ok[full].sum())
        full_all += int(full.sum())
        per_class[y] += (int(ok[full].sum()), int(full.sum()))
        for p in pred[full]:
            conf[y, p] += 1
        clip_ok += int(np.bincount(pred, minlength=C).argmax() == y)
    return dict(clips=clips, full=(full_ok, full_all), warm=(warm_ok, warm_all),
                all=(full_ok + warm_ok, full_all + warm_all), per_class=per_class.tolist(),
                confusion=conf.tolist(), clip_majority=(clip_ok, clips))


def recording_steps(results_v, n):
    """Per source group and class of the real clips (a recording can give clips of two
    classes: its quiet copies are silence): {(group, class): [correct full-window steps,
    all full-window steps, the wrong predictions]}."""
    g = {}
    for y, o, pred, group in results_v:
        if o != "real":
            continue
        full = pred[n - 1:]
        a = g.setdefault((group, y), [0, 0, np.zeros(0, np.int64)])
        a[0] += int((full == y).sum())
        a[1] += len(full)
        a[2] = np.concatenate([a[2], full[full != y]])
    return g


def by_recording_names(results_v, n):
    """{source group: [correct, all]} full-window steps of the real clips."""
    g = {}
    for (group, _), (ok, total, _) in recording_steps(results_v, n).items():
        a = g.setdefault(group, [0, 0])
        a[0] += ok
        a[1] += total
    return g


def by_recording(results_v, n):
    """Full-window steps (correct, total) per source group of the real clips."""
    g = by_recording_names(results_v, n)
    return np.array(list(g.values()), dtype=np.float64).reshape(-1, 2)


def worst_recordings(labels, results_v, n, count=12):
    """Markdown lines: the count recordings with the most wrong full-window steps, and
    what they were heard as."""
    g = recording_steps(results_v, n)
    rows = sorted(g.items(), key=lambda kv: kv[1][0] - kv[1][1])[:count]
    out = ["| recording (source group) | class | wrong / steps | heard as |", "|---|---|---|---|"]
    for (group, y), (ok, total, wrong) in rows:
        if ok == total:
            break
        heard = ", ".join(f"{labels[c]} {k}" for c, k in
                          sorted(zip(*np.unique(wrong, return_counts=True)), key=lambda t: -t[1]))
        out.append(f"| `{group}` | {labels[y]} | {total - ok} / {total} | {heard} |")
    return out


def accuracy_without(results_v, n, pattern):
    """Full-window accuracy (correct, total, recordings left out) on the real clips whose
    source group does not match the regular expression pattern."""
    rx = re.compile(pattern)
    g = by_recording_names(results_v, n)
    kept = [a for k, a in g.items() if not rx.search(k)]
    return sum(a[0] for a in kept), sum(a[1] for a in kept), len(g) - len(kept)


def recording_spread(results_v, n, draws=2000, seed=5):
    """How much the headline depends on which recordings are in the test split: the
    2.5 and 97.5 percentiles of the full-window accuracy over bootstrap resamples of the
    test recordings (groups, drawn with replacement), and the mean of the per-recording
    accuracies (every recording counted once, however many clips it gave)."""
    g = by_recording(results_v, n)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(g), size=(draws, len(g)))
    acc = g[idx, 0].sum(1) / g[idx, 1].sum(1)
    lo, hi = np.percentile(acc, [2.5, 97.5])
    return len(g), 100 * lo, 100 * hi, 100 * float(np.mean(g[:, 0] / g[:, 1]))


def pct(p):
    a, b = p
    return f"{100.0 * a / b:.1f} % ({a}/{b})" if b else "n/a"


def report(labels, n, trained, variants, results, seconds, steps_per_clip, without=None):
    out = []
    S = {v: {o: summarise(labels, n, results[v], o) for o in ("real", "synth", "all")}
         for v in variants}
    h = S[trained]["real"]
    out.append(f"Held-out test split, every clip its own stream from a fresh state, C path "
               f"(`cony mel` -> `cony embed` -> `cony classify`), produced by "
               f"`training/eval_default_audio.py`. Window n = {n} tokens; a {steps_per_clip}-step "
               f"clip has {n - 1} warm-up steps (fewer than n tokens in the window) and "
               f"{steps_per_clip - n + 1} full-window steps.")
    out.append("")
    out.append(f"**Headline ({trained}, the trained variant): {pct(h['full'])} of full-window "
               f"steps correct on {h['clips']} held-out real clips**; "
               f"warm-up steps {pct(h['warm'])}; all steps {pct(h['all'])}.")
    out.append("")
    ng, lo, hi, mean_rec = recording_spread(results[trained], n)
    out.append(f"The clips come from {ng} test recordings (source groups), and the errors "
               f"follow recordings: resampling the recordings (bootstrap, 2000 draws) puts the "
               f"headline between {lo:.1f} and {hi:.1f} % (95 %); counting every recording once, "
               f"the mean per-recording accuracy is {mean_rec:.1f} %.")
    out.append("")
    out.append("Per-step accuracy by attention variant (`cony classify --attention V` on the "
               "same file; the fixed-landmark pair and the continual/regular pair compute the "
               "same function, the others are variants the weights were not trained for):")
    out.append("")
    out.append("| variant | real: full-window steps | real: warm-up steps | real: all steps | "
               "synth: full-window steps | real: clip majority vote |")
    out.append("|---|---|---|---|---|---|")
    for v in variants:
        r, s = S[v]["real"], S[v]["synth"]
        name = f"`{v}`" + (" (trained)" if v == trained else "")
        out.append(f"| {name} | {pct(r['full'])} | {pct(r['warm'])} | {pct(r['all'])} | "
                   f"{pct(s['full'])} | {pct(r['clip_majority'])} |")
    out.append("")
    for o in ("real", "synth"):
        r = S[trained][o]
        out.append(f"Per class, `{trained}`, {o} test clips, full-window steps:")
        out.append("")
        out.append("| class | clips | accuracy |")
        out.append("|---|---|---|")
        counts = {}
        for y, org, _, _ in results[trained]:
            if org == o:
                counts[y] = counts.get(y, 0) + 1
        for c, name in enumerate(labels):
            out.append(f"| {name} | {counts.get(c, 0)} | {pct(tuple(r['per_class'][c]))} |")
        out.append("")
        out.append(f"Confusion matrix, `{trained}`, {o} test clips, full-window steps "
                   f"(rows: true class, columns: predicted):")
        out.append("")
        out.append("| true \\ predicted | " + " | ".join(labels) + " |")
        out.append("|---" * (len(labels) + 1) + "|")
        for c, name in enumerate(labels):
            out.append(f"| {name} | " + " | ".join(str(v) for v in r["confusion"][c]) + " |")
        out.append("")
    if without:
        ok, total, left = accuracy_without(results[trained], n, without)
        out.append(f"Without the {left} test recordings whose source group matches `{without}` "
                   f"(`--also-without`): {pct((ok, total))} of full-window steps.")
        out.append("")
    out.append(f"The recordings with the most wrong full-window steps (`{trained}`):")
    out.append("")
    out += worst_recordings(labels, results[trained], n)
    out.append("")
    out.append(f"(Evaluation wall time {seconds:.0f} s.)")
    return "\n".join(out), S


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default=os.path.join(repo, "out", "audio-dataset-v7"))
    ap.add_argument("--cony", default=os.path.join(repo, "build-train", "tools", "cony"))
    ap.add_argument("--models", default=os.path.join(repo, "models", "audio"))
    ap.add_argument("--json", help="also write the numbers as JSON here")
    ap.add_argument("--update-model-md", action="store_true")
    ap.add_argument("--also-without", metavar="REGEX",
                    help="also report the headline without the test recordings whose source "
                         "group matches REGEX (e.g. those a data set version was aimed at)")
    args = ap.parse_args()
    if args.also_without:
        re.compile(args.also_without)
    rows, labels, n, trained, variants, results, seconds = evaluate(args)
    steps = len(results[trained][0][2])
    text, S = report(labels, n, trained, variants, results, seconds, steps, args.also_without)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(S, f, indent=1)
    if args.update_model_md:
        path = os.path.join(args.models, "MODEL.md")
        with open(path) as f:
            md = f.read()
        b, e = "<!-- eval:begin -->", "<!-- eval:end -->"
        if b not in md or e not in md:
            sys.exit(f"{path}: no {b} ... {e} block to update")
        head, rest = md.split(b, 1)
        _, tail = rest.split(e, 1)
        with open(path, "w") as f:
            f.write(head + b + "\n" + text + "\n" + e + tail)
        print(f"updated {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
