#!/usr/bin/python3
"""Held-out accuracy of the default audio model in the continual C path.

    /usr/bin/python3 training/eval_default_audio.py [--dataset out/audio-dataset-v9] \\
        [--extra-dataset out/train-yamnet/tones] [--cony build-train/tools/cony] \\
        [--models models/audio] [--update-model-md]

Every test-split clip of the data set (training/data/build_audio_dataset.sh; with
--extra-dataset also that set's test clips, e.g. training/synth_tones.py's) goes
through the C tools exactly as the GStreamer pipeline computes it:

    cony embed -e --model yamnet.safetensors CLIP.wav  (conymel preset=yamnet ! conyvggish
                                                        output=embedding: 96-frame windows
                                                        every 25 frames, 1024-d tokens)
    cony classify --model transformer.safetensors [--attention V] tokens.npy
                                                       (conytransformer: one step per token)

The CNN is the one the classifier's config names (frontend.cnn, checked against
frontend.cnn_sha256), looked up in models/*/ unless --cnn. A step is correct when the
arg-max of its logits is the clip's label. The window (n = 32 tokens, 8 s) is longer than
a clip (17 tokens, 5 s), so the clips are played as streams three ways (streams()):

  recording  (the headline) each clip after n - 1 tokens of context from its own
             recording: the recording's other test clips before it, in clip order, cycled
             (the clip itself repeated when the recording gave only one test clip), as if
             the recording had been playing for a while; all of the clip's steps are
             full-window steps
  fresh      each clip its own stream from a fresh state: every step is a warm-up step
             (fewer than n tokens in the window)
  changing   the real test clips in one stream in a fixed random order: the class changes
             every 5 s; steps by time since the last change

Clips are joined token-wise (a token patch never straddles two clips). The headline is the
full-window per-step accuracy on the real (not synthesised) test clips; synthesised test
clips are reported separately. Confusion matrices are of full-window steps. Nothing here is
used for training or model selection.

With --update-model-md the results replace the block between the markers
`<!-- eval:begin -->` and `<!-- eval:end -->` of MODELS/MODEL.md.
"""

import argparse
import csv
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from conytrain import REPO

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


def read_test_rows(dataset, extra=None, split="test"):
    """The clips of the split (test, or valx: data set 13's validation-only clips) of the
    data set (and of an extra clip set), each with its WAV path."""
    rows = []
    for root in [dataset] + ([extra] if extra else []):
        with open(os.path.join(root, "manifest.csv"), newline="") as f:
            for r in csv.DictReader(f):
                if r["split"] == split:
                    r["wav"] = os.path.join(root, r["path"])
                    rows.append(r)
    return rows


def classifier_cnn(cfg, cnn=None):
    """(path, pooled embedding?) of the CNN the classifier's tokens come from: the file its
    config names (frontend.cnn) in models/*/, or cnn; its SHA-256 must be the recorded one."""
    from conytrain.audio.own import sha256
    fe = cfg.get("frontend") or {}
    if cnn is None:
        name = fe.get("cnn")
        hits = sorted(glob.glob(os.path.join(REPO, "models", "*", name))) if name else []
        if not hits:
            sys.exit(f"eval_default_audio: the classifier names no CNN found in models/*/ "
                     f"(frontend.cnn = {name!r}); give --cnn")
        cnn = hits[0]
    want = fe.get("cnn_sha256")
    if want and sha256(cnn) != want:
        sys.exit(f"eval_default_audio: {cnn} is not the CNN the classifier was trained on "
                 f"(SHA-256 {want[:12]}...)")
    return cnn, fe.get("cnn_output") == "embedding"


def embed_args(cfg):
    """`cony embed` options that give the tokens the classifier was trained on: its
    recorded stride (frames between tokens; 25 when none is recorded) and CNN mode
    (continual when recorded, docs/continual-cnn.md; window otherwise)."""
    fe = cfg.get("frontend") or {}
    out = ["--stride", str(int(fe.get("stride_frames", 25)))]
    if fe.get("cnn_mode") == "continual":
        out += ["--mode", "continual"]
    return out


def context_stream(clips, i, n):
    """The recording protocol: clip i of one recording's clips (token arrays, in clip
    order) after at least n - 1 tokens of context, clips i-1, i-2, ... cycled (clip i
    itself when it is the only one). Returns (stream, context tokens)."""
    ctx, got, j = [], 0, i
    while got < n - 1:
        j = (j - 1) % len(clips)
        ctx.insert(0, clips[j])
        got += len(clips[j])
    return np.concatenate(ctx + [clips[i]]), got


def recording_streams(rows, tokens, n):
    """context_stream() for every clip: rows (with "group") and their token arrays, the
    clips of a recording in row order. Yields (row index, stream, context tokens)."""
    groups = {}
    for i, r in enumerate(rows):
        groups.setdefault(r["group"], []).append(i)
    for i, r in enumerate(rows):
        g = groups[r["group"]]
        stream, c = context_stream([tokens[j] for j in g], g.index(i), n)
        yield i, stream, c


def logits(cony, model, tokens, tmp, variant=None):
    """Per-step logits (steps, classes) of `cony classify` on one stream of tokens from a
    fresh state."""
    src, out = os.path.join(tmp, "stream.npy"), os.path.join(tmp, "logits.npy")
    np.save(src, np.ascontiguousarray(tokens, dtype=np.float32))
    cmd = [cony, "classify", "--model", model, src, "-o", out]
    if variant:
        cmd[2:2] = ["--attention", variant]
    run(cmd)
    return np.load(out)


def classify(cony, model, tokens, tmp, variant=None):
    """Per-step arg-max of logits()."""
    return logits(cony, model, tokens, tmp, variant).argmax(1)


def changing_stream(rows, tokens, labels, seed=5):
    """The real test clips in one stream, in a fixed random order: (tokens, per-token
    label, steps since the last change of clip)."""
    order = np.random.default_rng(seed).permutation(
        [i for i, r in enumerate(rows) if r["origin"] == "real"])
    x = np.concatenate([tokens[i] for i in order])
    y = np.concatenate([np.full(len(tokens[i]), labels.index(rows[i]["label"])) for i in order])
    since = np.concatenate([np.arange(len(tokens[i])) for i in order])
    return x, y, since


def evaluate(args):
    rows = read_test_rows(args.dataset, args.extra_dataset, args.split)
    tf_path = os.path.join(args.models, "transformer.safetensors")
    cfg, tensors = model_config(tf_path)
    cnn, pooled = classifier_cnn(cfg, args.cnn)
    labels = cfg["labels"]
    n = cfg["window"]
    trained = cfg["attention"][0]
    variants = [trained] + [v for v in VARIANTS if v != trained]
    if "blocks.0.attn.q_landmarks" not in tensors:
        variants = [v for v in variants if not v.endswith("-fixed")]
    if args.trained_only:
        variants = [trained]
    results = {v: [] for v in variants}
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="cony-eval-") as tmp, \
            ThreadPoolExecutor(max(1, args.jobs)) as pool:
        def embed(i):
            tok = os.path.join(tmp, f"tok{i}.npy")
            run([args.cony, "embed", "--drop-tail"] + (["-e"] if pooled else []) +
                ["--model", cnn] + embed_args(cfg) + [rows[i]["wav"], "-o", tok])
            return np.load(tok)

        tokens = list(pool.map(embed, range(len(rows))))
        for v in variants:
            override = v if v != trained else None

            def one(job):
                i, stream, c = job
                mine = os.path.join(tmp, f"c{i}")
                os.makedirs(mine, exist_ok=True)
                r = rows[i]
                return dict(y=labels.index(r["label"]), origin=r["origin"], group=r["group"],
                            full=classify(args.cony, tf_path, stream, mine, override)[c:],
                            fresh=classify(args.cony, tf_path, tokens[i], mine, override))

            results[v] = list(pool.map(one, recording_streams(rows, tokens, n)))
        x, y, since = changing_stream(rows, tokens, labels)
        pred = classify(args.cony, tf_path, x, tmp)
        changing = dict(ok=(pred == y)[n - 1:], since=since[n - 1:], clips=int((since == 0).sum()))
    seconds = time.time() - t0
    return rows, labels, n, trained, variants, results, changing, seconds, os.path.relpath(cnn, REPO)


def summarise(labels, n, results_v, origin):
    C = len(labels)
    conf = np.zeros((C, C), np.int64)
    warm_ok = warm_all = full_ok = full_all = fresh_ok = fresh_all = 0
    per_class = np.zeros((C, 2), np.int64)   # full-window correct, total
    clip_ok = clips = 0
    for r in results_v:
        if origin != "all" and r["origin"] != origin:
            continue
        y, full, fresh = r["y"], r["full"], r["fresh"]
        clips += 1
        warm = fresh[:n - 1]
        warm_ok += int((warm == y).sum())
        warm_all += len(warm)
        fresh_ok += int((fresh == y).sum())
        fresh_all += len(fresh)
        full_ok += int((full == y).sum())
        full_all += len(full)
        per_class[y] += (int((full == y).sum()), len(full))
        for p in full:
            conf[y, p] += 1
        clip_ok += int(np.bincount(full, minlength=C).argmax() == y)
    return dict(clips=clips, full=(full_ok, full_all), warm=(warm_ok, warm_all),
                fresh=(fresh_ok, fresh_all), per_class=per_class.tolist(),
                confusion=conf.tolist(), clip_majority=(clip_ok, clips))


def recording_steps(results_v):
    """Per source group and class of the real clips (a recording can give clips of two
    classes: its quiet copies are silence): {(group, class): [correct full-window steps,
    all full-window steps, the wrong predictions]}."""
    g = {}
    for r in results_v:
        if r["origin"] != "real":
            continue
        y, full = r["y"], r["full"]
        a = g.setdefault((r["group"], y), [0, 0, np.zeros(0, np.int64)])
        a[0] += int((full == y).sum())
        a[1] += len(full)
        a[2] = np.concatenate([a[2], full[full != y]])
    return g


def by_recording_names(results_v):
    """{source group: [correct, all]} full-window steps of the real clips."""
    g = {}
    for (group, _), (ok, total, _) in recording_steps(results_v).items():
        a = g.setdefault(group, [0, 0])
        a[0] += ok
        a[1] += total
    return g


def by_recording(results_v):
    """Full-window steps (correct, total) per source group of the real clips."""
    g = by_recording_names(results_v)
    return np.array(list(g.values()), dtype=np.float64).reshape(-1, 2)


def worst_recordings(labels, results_v, count=12):
    """Markdown lines: the count recordings with the most wrong full-window steps, and
    what they were heard as."""
    g = recording_steps(results_v)
    rows = sorted(g.items(), key=lambda kv: kv[1][0] - kv[1][1])[:count]
    out = ["| recording (source group) | class | wrong / steps | heard as |", "|---|---|---|---|"]
    for (group, y), (ok, total, wrong) in rows:
        if ok == total:
            break
        heard = ", ".join(f"{labels[c]} {k}" for c, k in
                          sorted(zip(*np.unique(wrong, return_counts=True)), key=lambda t: -t[1]))
        out.append(f"| `{group}` | {labels[y]} | {total - ok} / {total} | {heard} |")
    return out


def accuracy_without(results_v, pattern):
    """Full-window accuracy (correct, total, recordings left out) on the real clips whose
    source group does not match the regular expression pattern."""
    rx = re.compile(pattern)
    g = by_recording_names(results_v)
    kept = [a for k, a in g.items() if not rx.search(k)]
    return sum(a[0] for a in kept), sum(a[1] for a in kept), len(g) - len(kept)


def recording_spread(results_v, draws=2000, seed=5):
    """How much the headline depends on which recordings are in the test split: the
    2.5 and 97.5 percentiles of the full-window accuracy over bootstrap resamples of the
    test recordings (groups, drawn with replacement), and the mean of the per-recording
    accuracies (every recording counted once, however many clips it gave)."""
    g = by_recording(results_v)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(g), size=(draws, len(g)))
    acc = g[idx, 0].sum(1) / g[idx, 1].sum(1)
    lo, hi = np.percentile(acc, [2.5, 97.5])
    return len(g), 100 * lo, 100 * hi, 100 * float(np.mean(g[:, 0] / g[:, 1]))


def class_mean(summary):
    """The mean over the classes that have steps of their full-window accuracy (%)."""
    per = [100.0 * ok / total for ok, total in summary["per_class"] if total]
    return float(np.mean(per))


def pct(p):
    a, b = p
    return f"{100.0 * a / b:.1f} % ({a}/{b})" if b else "n/a"


def changing_lines(changing, n):
    """Markdown: the changing-stream accuracy of full-window steps by time since the last
    change of clip."""
    ok, since = changing["ok"], changing["since"]
    out = ["| steps since the clip changed | steps | accuracy |", "|---|---|---|"]
    for lo, hi, what in ((0, 4, "0-3 (under 1 s)"), (4, 8, "4-7 (1-2 s)"),
                         (8, 10 ** 9, "8 or more (2 s on)"), (0, 10 ** 9, "all")):
        m = (since >= lo) & (since < hi)
        out.append(f"| {what} | {int(m.sum())} | {pct((int(ok[m].sum()), int(m.sum())))} |")
    return out


def report(labels, n, trained, variants, results, changing, seconds, steps_per_clip, cnn,
           without=None, split="test"):
    out = []
    S = {v: {o: summarise(labels, n, results[v], o) for o in ("real", "synth", "all")}
         for v in variants}
    h = S[trained]["real"]
    out.append(f"Held-out {split} split through the C path (`cony embed -e --model {cnn}` -> "
               f"`cony classify`), produced by `training/eval_default_audio.py`. Window n = {n} "
               f"tokens ({'longer' if n > steps_per_clip else 'not longer'} than a "
               f"{steps_per_clip}-step clip); each clip is scored after "
               f"{n - 1} or more tokens of context from its own recording (its other test clips "
               f"before it, cycled; the clip itself when it is its recording's only one): all "
               f"{steps_per_clip} steps are full-window steps. Warm-up steps: each clip alone "
               f"from a fresh state.")
    out.append("")
    out.append(f"**Headline ({trained}, the trained variant): {pct(h['full'])} of full-window "
               f"steps correct on {h['clips']} held-out real clips**; "
               f"warm-up steps (fresh stream) {pct(h['warm'])}; class mean of full-window "
               f"steps {class_mean(h):.2f} % (the {int(sum(t > 0 for _, t in h['per_class']))} "
               f"classes with clips).")
    out.append("")
    ng, lo, hi, mean_rec = recording_spread(results[trained])
    out.append(f"The clips come from {ng} test recordings (source groups), and the errors "
               f"follow recordings: resampling the recordings (bootstrap, 2000 draws) puts the "
               f"headline between {lo:.1f} and {hi:.1f} % (95 %); counting every recording once, "
               f"the mean per-recording accuracy is {mean_rec:.1f} %.")
    out.append("")
    out.append(f"A changing scene: the {changing['clips']} real test clips in one stream in a "
               f"fixed random order (the class changes every 5 s), `{trained}`, full-window "
               f"steps by time since the change:")
    out.append("")
    out += changing_lines(changing, n)
    out.append("")
    out.append("Per-step accuracy by attention variant (`cony classify --attention V` on the "
               "same file; the fixed-landmark pair and the continual/regular pair compute the "
               "same function, the others are variants the weights were not trained for):")
    out.append("")
    out.append("| variant | real: full-window steps | real: warm-up steps | "
               "synth: full-window steps | real: clip majority vote |")
    out.append("|---|---|---|---|---|")
    for v in variants:
        r, s = S[v]["real"], S[v]["synth"]
        name = f"`{v}`" + (" (trained)" if v == trained else "")
        out.append(f"| {name} | {pct(r['full'])} | {pct(r['warm'])} | "
                   f"{pct(s['full'])} | {pct(r['clip_majority'])} |")
    out.append("")
    for o in ("real", "synth"):
        r = S[trained][o]
        out.append(f"Per class, `{trained}`, {o} test clips, full-window steps:")
        out.append("")
        out.append("| class | clips | accuracy |")
        out.append("|---|---|---|")
        counts = {}
        for x in results[trained]:
            if x["origin"] == o:
                counts[x["y"]] = counts.get(x["y"], 0) + 1
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
        ok, total, left = accuracy_without(results[trained], without)
        out.append(f"Without the {left} test recordings whose source group matches `{without}` "
                   f"(`--also-without`): {pct((ok, total))} of full-window steps.")
        out.append("")
    out.append(f"The recordings with the most wrong full-window steps (`{trained}`):")
    out.append("")
    out += worst_recordings(labels, results[trained])
    out.append("")
    out.append(f"(Evaluation wall time {seconds:.0f} s.)")
    S["changing"] = {"full": (int(changing["ok"].sum()), len(changing["ok"]))}
    return "\n".join(out), S


def main():
    repo = REPO
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default=os.path.join(repo, "out", "audio-dataset-v9"))
    ap.add_argument("--extra-dataset", help="also the test clips of this clip set (e.g. "
                    "training/synth_tones.py's), as synthesised clips")
    ap.add_argument("--cnn", help="the CNN file (default: the one the classifier's config "
                    "names, found in models/*/)")
    ap.add_argument("--cony", default=os.path.join(repo, "build-train", "tools", "cony"))
    ap.add_argument("--models", default=os.path.join(repo, "models", "audio"))
    ap.add_argument("--json", help="also write the numbers as JSON here")
    ap.add_argument("--split", default="test",
                    help="the data set's split to measure: test, or valx (data set 13's "
                         "validation-only recordings, never trained on)")
    ap.add_argument("--jobs", type=int, default=1, help="cony processes at once (1)")
    ap.add_argument("--trained-only", action="store_true",
                    help="only the trained attention variant (the others compute the same "
                         "function or one the weights were not trained for)")
    ap.add_argument("--update-model-md", action="store_true")
    ap.add_argument("--also-without", metavar="REGEX",
                    help="also report the headline without the test recordings whose source "
                         "group matches REGEX (e.g. those a data set version was aimed at)")
    args = ap.parse_args()
    if args.also_without:
        re.compile(args.also_without)
    rows, labels, n, trained, variants, results, changing, seconds, cnn = evaluate(args)
    steps = len(results[trained][0]["fresh"])
    text, S = report(labels, n, trained, variants, results, changing, seconds, steps, cnn,
                     args.also_without, args.split)
    S["class_mean_real_full"] = class_mean(S[trained]["real"])
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
