"""How far the continual CNN (conyvggish mode=continual, docs/continual-cnn.md) is from
per-window YAMNet: per step, top-1 agreement of YAMNet's 521 scores and the cosine of
the 1024-d embeddings, per kind of sound and over all steps.

Both modes run through the built `cony embed` on the same WAV files at the same stride
(32 frames, 0.32 s: the continual hop), so the steps pair one to one (window mode's count;
continual reads silence past the end, as it does at EOS). The per-window side runs twice:
in float (the same arithmetic as the continual CNN: the difference is the semantics alone)
and on the integer path (YAMNet with its .tflite's activation quantisation, as the integer path runs it).

    /usr/bin/python3 training/compare_continual_cnn.py                 # generated clips
    /usr/bin/python3 training/compare_continual_cnn.py --dir out/audio-dataset/test
    /usr/bin/python3 training/compare_continual_cnn.py --dataset out/audio-dataset-heldout \
        --splits test,valx --refs float --json out/continual-compare.json

--dir: every WAV below it, its kind the name of its parent folder. --dataset: the clips of
a data set's manifest (training/data/README.md) in the given splits, their kind
SPLIT:LABEL for the real recordings (SPLIT-synth:LABEL for synthesised clips), with a
line per split. Without either: clips that conytrain.audio.other generates offline
(espeak-ng speech, FluidSynth music, coloured noise, hum, a faint noise floor; seeded)
and tests/golden/yamnet/music.wav.

The 521 scores' top-1 is the arg-max of YAMNet's fc layer on each embedding (sigmoid is
monotonic, so it is the arg-max of `cony embed`'s scores): one `cony embed -e` per file
and mode.
"""
import argparse
import collections
import csv
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from conytrain import REPO
from conytrain.audio import other
from conytrain.golden.check import find_tool

YAMNET = os.path.join(REPO, "models", "yamnet", "yamnet.safetensors")
STRIDE = 32


def embed(tool, model, wav, out, *args):
    subprocess.run([tool, "embed", "-m", model, wav, "-o", out, "--stride", str(STRIDE), *args],
                   check=True, capture_output=True, text=True)
    return np.load(out)


def yamnet_int8(path):
    """models/yamnet with the activation quantisation of its .tflite
    (tests/golden/yamnet/quantization.json, what convert_tflite.py records): the file that
    runs TFLite's integer inference (as tests/testutil.c's cony_test_yamnet_int8)."""
    with open(YAMNET, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    with open(os.path.join(REPO, "tests", "golden", "yamnet", "quantization.json")) as f:
        header.setdefault("__metadata__", {})["quantization"] = f.read().strip()
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob[8 + n:])
    return path


def cosine(a, b):
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    return (a * b).sum(1) / np.maximum(na * nb, 1e-30)


def fc_head():
    """(W, b) of YAMNet's fc layer (521 x 1024), float64."""
    from conytrain import safetensors_io
    from conytrain.ref.mobilenet import fc_layer
    tensors, meta = safetensors_io.load(YAMNET)
    W, b = fc_layer(tensors, meta["layers"].split())
    return np.asarray(W, np.float64), np.asarray(b, np.float64)


def compare_file(tool, int8, wav, tmp, fc, refs=("float", "int8"), continual=YAMNET):
    """Per step of one file, for each per-window reference (float, int8): (top-1 agrees,
    embedding cosine, the reference's top-1); with both, int8 against float too.
    continual: the file the continual side runs (YAMNet, or YAMNet recalibrated for it)."""
    W, b = fc
    runs = {}
    modes = {"continual": (continual, ("--mode", "continual")),
             "float": (YAMNET, ("--precision", "float")),
             "int8": (int8, ("--precision", "int8"))}
    for name in ("continual",) + tuple(refs):
        model, args = modes[name]
        e = embed(tool, model, wav, os.path.join(tmp, name + "_e.npy"), "-e", *args)
        runs[name] = (np.argmax(e @ W.T + b, 1), e)
    c_top, c_e = runs["continual"]
    out = {}
    for ref in refs:
        w_top, w_e = runs[ref]
        assert w_e.shape == c_e.shape, (wav, w_e.shape, c_e.shape)
        out[ref] = (w_top == c_top, cosine(w_e, c_e), w_top)
    if "int8" in refs and "float" in refs:
        # how the two per-window paths differ from each other, for scale
        out["int8-vs-float"] = (runs["int8"][0] == runs["float"][0],
                                cosine(runs["int8"][1], runs["float"][1]), None)
    return out


def dataset_files(dataset, splits):
    """(wav, kind) of the manifest's clips in splits: kind SPLIT:LABEL (real recordings) or
    SPLIT-synth:LABEL (synthesised clips)."""
    files = []
    with open(os.path.join(dataset, "manifest.csv"), newline="") as f:
        for r in csv.DictReader(f):
            if r["split"] in splits:
                tag = r["split"] if r.get("origin", "real") == "real" else r["split"] + "-synth"
                files.append((os.path.join(dataset, r["path"]), f"{tag}:{r['label']}"))
    if not files:
        sys.exit(f"{dataset}: no clips in the splits {', '.join(splits)}")
    return files


def generated_files(tmp, per_kind, seconds, seed):
    clips = other.make_clips(os.path.join(tmp, "clips"), list(other.KINDS),
                             per_kind * len(other.KINDS), seconds, seed,
                             lambda text: print("warning:", text, file=sys.stderr))
    files = [(p, os.path.basename(p).rsplit("_", 1)[1][:-4]) for p in clips]
    files.append((os.path.join(REPO, "tests", "golden", "yamnet", "music.wav"), "music-golden"))
    return files


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", help="WAV files below it (kind: the parent folder's name)")
    ap.add_argument("--per-kind", type=int, default=8, help="generated clips per kind (8)")
    ap.add_argument("--seconds", type=float, default=10.0, help="generated clip length (10)")
    ap.add_argument("--seed", type=int, default=61)
    ap.add_argument("--dataset", help="a data set's folder: the clips of --splits")
    ap.add_argument("--splits", default="test,valx", help="with --dataset (test,valx)")
    ap.add_argument("--refs", default="float,int8",
                    help="the per-window references: float, int8 or both (float,int8)")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--jobs", type=int, default=2, help="files at once (2)")
    ap.add_argument("--continual-cnn", default=YAMNET,
                    help="the file the continual side runs (default YAMNet's own; e.g. it "
                         "recalibrated by training/recalibrate_continual.py)")
    args = ap.parse_args(argv)
    refs = tuple(args.refs.split(","))
    if not refs or set(refs) - {"float", "int8"}:
        ap.error("--refs: float, int8 or float,int8")
    tool = find_tool()
    if tool is None:
        sys.exit("no built cony: meson setup build && ninja -C build")
    with tempfile.TemporaryDirectory() as tmp:
        int8 = yamnet_int8(os.path.join(tmp, "yamnet_int8.safetensors"))
        if args.dataset:
            files = dataset_files(args.dataset, args.splits.split(","))
        elif args.dir:
            files = [(p, os.path.basename(os.path.dirname(p)))
                     for p in sorted(glob.glob(os.path.join(args.dir, "**", "*.wav"),
                                               recursive=True))]
        else:
            files = generated_files(tmp, args.per_kind, args.seconds, args.seed)
        acc = collections.defaultdict(lambda: collections.defaultdict(list))
        top_classes = collections.Counter()
        fc = fc_head()

        def one(i):
            mine = os.path.join(tmp, str(i))
            os.makedirs(mine)
            return compare_file(tool, int8, files[i][0], mine, fc, refs, args.continual_cnn)

        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            for i, res in enumerate(pool.map(one, range(len(files)))):
                kind = files[i][1]
                keys = (kind, "all") + ((kind.split(":")[0] + ":all",) if ":" in kind else ())
                for ref, (agree, cos, top) in res.items():
                    for k in keys:
                        acc[ref][k].append((agree, cos))
                    if ref == refs[0]:
                        top_classes.update(top.tolist())
                if i % 100 == 99:
                    print(f"{i + 1}/{len(files)} files", file=sys.stderr, flush=True)
        print(f"{len(files)} files, stride {STRIDE} frames (0.32 s); continual vs per-window")
        figures = {}
        for ref in [r for r in ("float", "int8", "int8-vs-float") if r in acc]:
            label = {"float": "per-window float", "int8": "per-window int8",
                     "int8-vs-float": "per-window int8 vs per-window float (scale)"}[ref]
            print(f"\n{label}:")
            print(f"  {'kind':14s} {'steps':>6s} {'top-1 agree':>12s} {'cos mean':>9s} "
                  f"{'cos p5':>7s} {'cos min':>8s}")
            for kind in sorted(acc[ref], key=lambda k: (k == "all", k.endswith(":all"), k)):
                agree = np.concatenate([a for a, _ in acc[ref][kind]])
                cos = np.concatenate([c for _, c in acc[ref][kind]])
                print(f"  {kind:14s} {len(agree):6d} {100 * agree.mean():11.1f}%  "
                      f"{cos.mean():9.4f} {np.percentile(cos, 5):7.4f} {cos.min():8.4f}")
                figures.setdefault(ref, {})[kind] = dict(
                    files=len(acc[ref][kind]), steps=len(agree), top1_agree=float(agree.mean()),
                    cos_mean=float(cos.mean()), cos_p5=float(np.percentile(cos, 5)),
                    cos_min=float(cos.min()))
        labels = _labels()
        common = ", ".join(f"{labels[c]} {n}"
                           for c, n in top_classes.most_common(6))
        print(f"\nmost frequent per-window top-1 classes (steps): {common}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(figures, f, indent=1)
    return 0


def _labels():
    with open(YAMNET, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(json.loads(f.read(n))["__metadata__"]["labels"])


if __name__ == "__main__":
    sys.exit(main())
