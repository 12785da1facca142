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

--dir: every WAV below it, its kind the name of its parent folder. Without it: clips that
conytrain.audio.other generates offline (espeak-ng speech, FluidSynth music, coloured
noise, hum, a faint noise floor; seeded) and tests/golden/yamnet/music.wav.
"""
import argparse
import collections
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

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


def compare_file(tool, int8, wav, tmp):
    runs = {}
    for name, model, args in (("continual", YAMNET, ("--mode", "continual")),
                              ("float", YAMNET, ("--precision", "float")),
                              ("int8", int8, ("--precision", "int8"))):
        runs[name] = (embed(tool, model, wav, os.path.join(tmp, name + "_s.npy"), *args),
                      embed(tool, model, wav, os.path.join(tmp, name + "_e.npy"), "-e", *args))
    c_s, c_e = runs["continual"]
    out = {}
    for ref in ("float", "int8"):
        w_s, w_e = runs[ref]
        assert w_s.shape == c_s.shape, (wav, w_s.shape, c_s.shape)
        out[ref] = (np.argmax(w_s, 1) == np.argmax(c_s, 1), cosine(w_e, c_e),
                    np.argmax(w_s, 1))
    # how the two per-window paths differ from each other, for scale
    out["int8-vs-float"] = (np.argmax(runs["int8"][0], 1) == np.argmax(runs["float"][0], 1),
                            cosine(runs["int8"][1], runs["float"][1]), None)
    return out


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
    args = ap.parse_args(argv)
    tool = find_tool()
    if tool is None:
        sys.exit("no built cony: meson setup build && ninja -C build")
    with tempfile.TemporaryDirectory() as tmp:
        int8 = yamnet_int8(os.path.join(tmp, "yamnet_int8.safetensors"))
        if args.dir:
            files = [(p, os.path.basename(os.path.dirname(p)))
                     for p in sorted(glob.glob(os.path.join(args.dir, "**", "*.wav"),
                                               recursive=True))]
        else:
            files = generated_files(tmp, args.per_kind, args.seconds, args.seed)
        acc = collections.defaultdict(lambda: collections.defaultdict(list))
        top_classes = collections.Counter()
        for path, kind in files:
            for ref, (agree, cos, top) in compare_file(tool, int8, path, tmp).items():
                for k in (kind, "all"):
                    acc[ref][k].append((agree, cos))
                if ref == "float":
                    top_classes.update(top.tolist())
        print(f"{len(files)} files, stride {STRIDE} frames (0.32 s); continual vs per-window")
        for ref in ("float", "int8", "int8-vs-float"):
            label = {"float": "per-window float", "int8": "per-window int8",
                     "int8-vs-float": "per-window int8 vs per-window float (scale)"}[ref]
            print(f"\n{label}:")
            print(f"  {'kind':14s} {'steps':>6s} {'top-1 agree':>12s} {'cos mean':>9s} "
                  f"{'cos p5':>7s} {'cos min':>8s}")
            for kind in sorted(acc[ref], key=lambda k: (k == "all", k)):
                agree = np.concatenate([a for a, _ in acc[ref][kind]])
                cos = np.concatenate([c for _, c in acc[ref][kind]])
                print(f"  {kind:14s} {len(agree):6d} {100 * agree.mean():11.1f}%  "
                      f"{cos.mean():9.4f} {np.percentile(cos, 5):7.4f} {cos.min():8.4f}")
        labels = _labels()
        common = ", ".join(f"{labels[c]} {n}"
                           for c, n in top_classes.most_common(6))
        print(f"\nmost frequent per-window top-1 classes (steps): {common}")
    return 0


def _labels():
    with open(YAMNET, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(json.loads(f.read(n))["__metadata__"]["labels"])


if __name__ == "__main__":
    sys.exit(main())
