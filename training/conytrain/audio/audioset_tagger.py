#!/usr/bin/python3
"""Trains the continual AudioSet tagger (models/audioset/): a CoNy encoder over YAMNet
embeddings (1024-d, one token every 0.25 s) with YAMNet's 521 outputs, distilled from
YAMNet's own per-patch scores.

    /usr/bin/python3 training/train_audioset_tagger.py --dataset out/audio-dataset-v9 \\
        --cony build-train/tools/cony --cache out/yamnet-cache --work out/train-audioset \\
        --models models/audioset

training/train_audioset_tagger.sh runs it. Stages (all by default; --stages picks some):

  sines  WORK/sines/: steady sine clips (no data set has pure tones; YAMNet has a
         "Sine wave" class), train split only
  embed  YAMNet's tokens (`cony embed -e`) and per-patch scores (sigmoid of the file's fc
         layer on each token) for every clip still missing from the cache:
         CACHE/<set>/<clip>.npy (17, 1024) float32 and <clip>.scores.npy (17, 521) float16,
         the layout training/train_yamnet_audio.py writes, so one cache serves both recipes.
         --read-only-cache refuses to add to a cache (a shared one) instead.
         --cnn-mode continual --stride 32: the tokens are the continual CNN's
         (docs/continual-cnn.md) in CACHE, and the truth stays per-window YAMNet: its
         tokens and scores at the same stride in --truth-cache, patch j on the frames of
         continual token j (EXPERIMENTS.md, rule 4).
  train  streams of --clips-per-stream train clips joined token-wise (each next clip
         another clip of the same recording with --p-recording, else a random clip), windows
         of n tokens ending anywhere in a stream at a random stream offset (--warmup-fraction
         of them warm-up windows, the first w < n tokens), the target YAMNet's 521 scores of
         the window's newest token (with --target-mean K their mean over the newest K
         tokens), loss binary cross-entropy against them (soft targets).
         Phase 1 as `cony`, then k-means landmarks (train.fit_block_landmarks) and fine-tuning
         as `cony-fixed`. Exported with config "output": "sigmoid" and YAMNet's display names
         as labels -> MODELS/tagger.safetensors.
  eval   the exported file through `cony classify` on the test split: each test recording
         (source group) one stream of its test clips in manifest order; against YAMNet's
         per-patch scores: top-1 agreement, mAP, top-1 flips per minute -> WORK/eval.json and
         the table printed (models/audioset/MODEL.md quotes it).

Deterministic: fixed seeds, torch threads as given.
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import time
import wave
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import torch.nn.functional as F

from conytrain import REPO, safetensors_io
from conytrain.audio.own import cnn_frontend
from conytrain.audio.token_cache import STRIDE, check_cache, token_path
from conytrain.audio.yamnet import JoinedSampler, embed_list, scores_of, yamnet_fc
from conytrain.export import export_model
from conytrain.ref.model import ConyEncoderClassifier, save_checkpoint
from conytrain.train import distill_epochs, train_then_fix_landmarks

T0 = time.time()


def log(msg):
    print(f"train_audioset_tagger: [{time.time() - T0:.0f} s] {msg}", file=sys.stderr, flush=True)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")


# ----------------------------------------------------------------------------- data
def read_rows(root):
    """The clips of a data set folder (manifest.csv: path, split, group), with their root
    and cache set name (the folder's name)."""
    path = os.path.join(root, "manifest.csv")
    if not os.path.exists(path):
        raise RuntimeError(f"{path}: no manifest (build the data set first)")
    name = os.path.basename(os.path.normpath(root))
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["root"], r["set"] = root, name
    return rows


def stage_sines(args):
    """Steady sines, 5 s at 16 kHz: log-spaced 100-4000 Hz, peak level -30 to -3 dBFS,
    a few with a little white noise; train split, one recording each."""
    out = os.path.join(args.work, "sines")
    if os.path.exists(os.path.join(out, "manifest.csv")):
        return
    os.makedirs(os.path.join(out, "clips"), exist_ok=True)
    rng = np.random.default_rng(args.seed + 5)
    t = np.arange(5 * 16000) / 16000.0
    rows = []
    for i in range(args.sines):
        f = float(np.exp(rng.uniform(np.log(100), np.log(4000))))
        a = 10 ** (rng.uniform(-30, -3) / 20)
        x = a * np.sin(2 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
        if i % 4 == 3:
            x += a * 0.03 * rng.standard_normal(t.size)
        name = f"clips/sine_{i:03d}.wav"
        with wave.open(os.path.join(out, name), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16000)
            w.writeframes(np.clip(x * 32767, -32768, 32767).astype("<i2").tobytes())
        rows.append({"path": name, "split": "train", "group": f"sine{i}",
                     "detail": f"{f:.0f} Hz, peak {20 * np.log10(a):.1f} dBFS"})
    with open(os.path.join(out, "manifest.csv"), "w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    log(f"sines: {len(rows)} clips in {out}")


def stage_embed(args, rows):
    write = lambda cache: not (cache == args.cache and args.read_only_cache)
    for cache in sorted({args.cache_of(r) for r in rows}):
        check_cache(args.cnn, cache, write(cache), args.stride, args.cnn_mode)
    if args.cnn_mode != "window":
        for cache in sorted({args.truth_of(r) for r in rows}):
            check_cache(args.cnn, cache, write(cache), args.stride)
    todo = [r for r in rows if not os.path.exists(token_path(args.truth_of(r), r, ".scores"))]
    if not todo:
        log(f"embed: all {len(rows)} clips cached")
        return
    shared = [r for r in todo if args.cache_of(r) == args.cache]
    if shared and args.read_only_cache:
        raise RuntimeError(f"{args.cache}: {len(shared)} clips not cached (e.g. "
                           f"{token_path(args.cache, shared[0])}) and --read-only-cache")
    fc = yamnet_fc(args.cnn)
    t0 = time.time()

    def one(chunk):
        wavs = [os.path.join(r["root"], r["path"]) for r in chunk]
        outs = [token_path(args.cache_of(r), r) for r in chunk]
        truths = [token_path(args.truth_of(r), r) for r in chunk]
        for path in set(outs + truths):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        if truths != outs:
            embed_list(args, list(zip(wavs, outs)), args.cnn_mode)
        embed_list(args, list(zip(wavs, truths)), "window")
        for r, truth in zip(chunk, truths):
            np.save(token_path(args.truth_of(r), r, ".scores"),  # written last: marks done
                    scores_of(np.load(truth), fc).astype(np.float16))
        return len(chunk)

    chunks = [todo[i:i + 100] for i in range(0, len(todo), 100)]
    done = 0
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for k in pool.map(one, chunks):
            done += k
            if done % 1000 < k:
                log(f"embed: {done}/{len(todo)} clips ({time.time() - t0:.0f} s)")
    log(f"embed: {len(todo)} clips through cony embed ({time.time() - t0:.0f} s)")


def load_split(args, rows, split):
    rs = [r for r in rows if r["split"] == split]
    x = np.stack([np.load(token_path(args.cache_of(r), r)).astype(np.float16) for r in rs])
    s = np.stack([np.load(token_path(args.truth_of(r), r, ".scores")) for r in rs])
    if x.shape[:2] != s.shape[:2]:
        raise RuntimeError(f"tokens {x.shape} and truth {s.shape} do not pair step by step")
    return rs, x, s


# ----------------------------------------------------------------------------- training
class JoinedStreams(JoinedSampler):
    """Streams of any clips or another of the same recording (--p-recording); a window's
    target is YAMNet's mean scores (module docstring): batch(size) -> (x (B, w, E) float32,
    offsets (B,), target scores (B, C) float32)."""

    def __init__(self, x, s, groups, window, positional_rows, args, seed):
        super().__init__(x, groups, window, positional_rows, args, seed)
        self.s = s                             # x (N, L, E), s (N, L, C) float16

    def stream(self):
        rng = self.rng
        seq = [int(rng.integers(len(self.x)))]
        while len(seq) < self.k:
            g = self.same_group[seq[-1]]
            if rng.random() < self.a.p_recording and len(g) > 1:
                seq.append(int(rng.choice(g[g != seq[-1]])))
            else:
                seq.append(int(rng.integers(len(self.x))))
        return seq

    def target(self, seq, t0, w):
        """The mean of YAMNet's scores over the newest --target-mean tokens of the stream."""
        L = self.x.shape[1]
        last = (t0 + w - 1) // L
        lo = max(0, t0 + w - self.a.target_mean)
        s = self.s[seq[lo // L:last + 1]].reshape(-1, self.s.shape[2])
        return s[lo - lo // L * L:t0 + w - lo // L * L].astype(np.float32).mean(0)

    def targets(self, ys):
        return torch.from_numpy(np.stack(ys).astype(np.float32))


def train_epochs(model, sampler, epochs, batches, batch, lr, weight_decay, clip=1.0):
    """AdamW on the BCE against YAMNet's scores (train.distill_epochs: cosine decay from
    lr to 0, gradients clipped to norm `clip`; a constant 2e-3 diverged after 12 epochs,
    EXPERIMENTS.md run 1)."""
    distill_epochs(model, sampler, epochs, batches, batch, lr, weight_decay,
                   F.binary_cross_entropy_with_logits, log, "BCE", "YAMNet's", clip)


def frontend(args):
    """YAMNet's front end, the CNN file's name and SHA-256, and its output the tokens are."""
    fe = cnn_frontend(args.cnn)
    fe.update(cnn_output="embedding", patch_frames=96, stride_frames=args.stride,
              token_seconds=round(args.stride * 0.01, 6))
    if args.cnn_mode != "window":
        fe["cnn_mode"] = args.cnn_mode       # conyvggish/cony refuse the other mode's tokens
    return fe


def stage_train(args, rows, labels):
    torch.manual_seed(args.train_seed)
    train, x, s = load_split(args, rows, "train")
    log(f"train: {len(train)} clips, {x.shape[0] * x.shape[1]} tokens")
    model = ConyEncoderClassifier(x.shape[2], args.d, args.heads, args.ff, 1, args.window,
                                  args.landmarks, "cony", labels,
                                  positional_encoding="learned", frontend=frontend(args),
                                  dropout=args.dropout)
    # start from the mean score of each label: the rare ones (most) need not be learnt down
    p = np.clip(s.reshape(-1, s.shape[2]).astype(np.float64).mean(0), 1e-4, 1 - 1e-4)
    with torch.no_grad():
        model.classifier.bias.copy_(torch.tensor(np.log(p / (1 - p)), dtype=torch.float32))
    sampler = JoinedStreams(x, s, [r["group"] for r in train], args.window,
                            model.config["positional_rows"], args, args.train_seed)
    log(f"encoder: d {args.d} heads {args.heads} ff {args.ff} n {args.window} "
        f"m {args.landmarks}; streams of {sampler.k} clips")
    train_then_fix_landmarks(model, sampler, args, train_epochs, log)
    model.config["output"] = "sigmoid"
    os.makedirs(args.models, exist_ok=True)
    save_checkpoint(model, os.path.join(args.work, "tagger.pt"))
    path = os.path.join(args.models, "tagger.safetensors")
    export_model(model, path, args.dtype)
    log(f"wrote {path} ({os.path.getsize(path)} bytes)")


# ----------------------------------------------------------------------------- evaluation
def average_precision(score, positive):
    """AP of ranking by score (descending) for binary truth: mean precision at each
    positive's rank."""
    order = np.argsort(-score, kind="stable")
    hit = positive[order].astype(np.float64)
    ranks = np.arange(1, len(hit) + 1)
    return float((np.cumsum(hit) / ranks)[hit > 0].mean())


def flips(top1_streams):
    return sum(int((t[1:] != t[:-1]).sum()) for t in top1_streams)


def window_mean(s, n):
    """Each step's mean of the scores over its window (the last n tokens): the plain
    running average a continual model should beat or match."""
    c = np.cumsum(np.vstack([np.zeros((1, s.shape[1])), s]), 0)
    lo = np.maximum(0, np.arange(len(s)) - n + 1)
    return (c[1:] - c[lo]) / (np.arange(len(s)) + 1 - lo)[:, None]


def stage_eval(args, rows, labels, model_path):
    test = [r for r in rows if r["split"] == "test"]
    by_rec = {}
    for r in test:
        by_rec.setdefault((r["set"], r["group"]), []).append(r)
    tmp = os.path.join(args.work, "eval-tmp")
    os.makedirs(tmp, exist_ok=True)
    n = json.loads(safetensors_io.load(model_path)[1]["config"])["window"]
    P, Y, M, C = [], [], [], []                 # model, YAMNet, YAMNet's window mean, class
    for rs in by_rec.values():
        x = np.concatenate([np.load(token_path(args.cache_of(r), r)) for r in rs])
        y = np.concatenate([np.load(token_path(args.truth_of(r), r, ".scores"))
                            for r in rs]).astype(np.float32)
        src, out = os.path.join(tmp, "in.npy"), os.path.join(tmp, "out.npy")
        np.save(src, x.astype(np.float32))
        run([args.cony, "classify", "--model", model_path, src, "-o", out])
        P.append(1.0 / (1.0 + np.exp(-np.load(out).astype(np.float64))))
        Y.append(y)
        M.append(window_mean(y, n))
        C.append(np.concatenate([[r.get("label", "?")] * len(np.load(
            token_path(args.truth_of(r), r, ".scores"), mmap_mode="r")) for r in rs]))
    res = {"recordings": len(P), "steps": int(sum(len(p) for p in P)),
           "minutes": sum(len(p) for p in P) * args.stride * 0.01 / 60,
           "step_seconds": args.stride * 0.01}
    yall = np.concatenate(Y)
    pos = yall >= 0.5
    scored = np.flatnonzero(pos.any(0))
    for name, S in (("tagger", P), ("yamnet-window-mean", M)):
        sall = np.concatenate(S)
        top = [s.argmax(1) for s in S]
        agree = np.concatenate([t == y.argmax(1) for t, y in zip(top, Y)])
        per_rec = [float(np.mean(t == y.argmax(1))) for t, y in zip(top, Y)]
        aps = {labels[c]: average_precision(sall[:, c], pos[:, c]) for c in scored}
        res[name] = {"top1_agreement": float(agree.mean()),
                     "top1_agreement_recording_mean": float(np.mean(per_rec)),
                     "mAP": float(np.mean(list(aps.values()))),
                     "mAP_10": float(np.mean([aps[labels[c]] for c in scored
                                              if pos[:, c].sum() >= 10])),
                     "AP": aps,
                     "top3_contains_yamnet_top1": float(np.mean(np.concatenate(
                         [(np.argsort(-s, 1)[:, :3] == y.argmax(1)[:, None]).any(1)
                          for s, y in zip(S, Y)]))),
                     "flips_per_minute": flips(top) / res["minutes"]}
    res["yamnet"] = {"flips_per_minute": flips([y.argmax(1) for y in Y]) / res["minutes"]}
    res["mAP_labels"] = len(scored)
    res["positives"] = int(pos.sum())
    res["positives_per_label"] = {labels[c]: int(pos[:, c].sum()) for c in scored}
    # top-1 agreement per class of the data set (the clips' own labels)
    cls = np.concatenate(C)
    yt, pt = yall.argmax(1), np.concatenate(P).argmax(1)
    res["top1_agreement_by_class"] = {c: float(np.mean(pt[cls == c] == yt[cls == c]))
                                      for c in sorted(set(cls))}
    miss = {}
    for a, b in zip(yt[pt != yt], pt[pt != yt]):
        miss[(labels[a], labels[b])] = miss.get((labels[a], labels[b]), 0) + 1
    res["disagreements"] = [{"yamnet": a, "tagger": b, "steps": k} for (a, b), k in
                            sorted(miss.items(), key=lambda kv: -kv[1])[:12]]
    with open(os.path.join(args.work, "eval.json"), "w") as f:
        json.dump(res, f, indent=1)
    t, m = res["tagger"], res["yamnet-window-mean"]
    print(f"test split: {res['recordings']} recordings, {res['steps']} steps "
          f"({res['minutes']:.1f} min); mAP over the {len(scored)} labels YAMNet scores >= 0.5 "
          f"somewhere ({res['positives']} positives); mAP10: the "
          f"{int((pos.sum(0) >= 10).sum())} labels with at least 10 positive steps\n")
    print("| | top-1 = YAMNet's (steps) | per-recording mean | YAMNet's top-1 in top 3 "
          "| mAP | mAP10 | top-1 flips / min |")
    print("|---|---|---|---|---|---|---|")
    for name, r in (("tagger (C, cony-fixed)", t), ("YAMNet's window mean", m)):
        print(f"| {name} | {100 * r['top1_agreement']:.1f} % | "
              f"{100 * r['top1_agreement_recording_mean']:.1f} % | "
              f"{100 * r['top3_contains_yamnet_top1']:.1f} % | {r['mAP']:.3f} | "
              f"{r['mAP_10']:.3f} | "
              f"{r['flips_per_minute']:.1f} |")
    print(f"| YAMNet per patch | — | — | — | — | — | {res['yamnet']['flips_per_minute']:.1f} |")
    print("\ntop-1 agreement by the data set's class: " + ", ".join(
        f"{c} {100 * v:.1f} %" for c, v in res["top1_agreement_by_class"].items()))
    print("most frequent disagreements (YAMNet -> tagger, steps): " + "; ".join(
        f"{d['yamnet']} -> {d['tagger']} {d['steps']}" for d in res["disagreements"][:8]))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", action="append",
                    help="data set folder (manifest.csv; repeatable; default "
                         "out/audio-dataset-v9)")
    ap.add_argument("--cony", default="build-train/tools/cony")
    ap.add_argument("--cnn", default=os.path.join(REPO, "models", "yamnet", "yamnet.safetensors"))
    ap.add_argument("--work", default="out/train-audioset")
    ap.add_argument("--cache", default="out/yamnet-cache",
                    help="YAMNet tokens and scores of the data sets' clips")
    ap.add_argument("--cnn-mode", choices=("window", "continual"), default="window",
                    help="the tokens' CNN mode (continual: docs/continual-cnn.md, recorded "
                         "as the tagger's cnn_mode; needs --truth-cache)")
    ap.add_argument("--stride", type=int, default=STRIDE,
                    help="frames between tokens (25: 0.25 s; continual: a multiple of 32)")
    ap.add_argument("--truth-cache", help="with --cnn-mode continual: per-window YAMNet's "
                    "tokens and scores at --stride, the targets and the held-out truth")
    ap.add_argument("--read-only-cache", action="store_true",
                    help="never write into --cache (a shared one): fail if clips are missing")
    ap.add_argument("--models", default="models/audioset")
    ap.add_argument("--stages", default="sines,embed,train,eval")
    ap.add_argument("--jobs", type=int, default=2, help="cony embed processes at once")
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--train-seed", type=int, default=11)
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--sines", type=int, default=120, help="sine clips (0: none)")
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=256)
    ap.add_argument("--window", type=int, default=120)
    ap.add_argument("--landmarks", type=int, default=8)
    ap.add_argument("--clips-per-stream", type=int, default=9)
    ap.add_argument("--p-recording", type=float, default=0.6)
    ap.add_argument("--warmup-fraction", type=float, default=0.25)
    ap.add_argument("--target-mean", type=int, default=4,
                    help="target: YAMNet's scores averaged over this many newest tokens "
                         "(1: the newest patch's own)")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--finetune-epochs", type=int, default=8)
    ap.add_argument("--batches", type=int, default=100, help="batches per epoch")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=1e-2)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--kmeans-windows", type=int, default=512)
    ap.add_argument("--dtype", default="f32", choices=("f32", "f16"))
    args = ap.parse_args()
    if args.cnn_mode == "continual" and (args.stride % 32 or not args.truth_cache):
        ap.error("--cnn-mode continual needs --stride a multiple of 32 and --truth-cache")
    datasets = args.dataset or ["out/audio-dataset-v9"]

    torch.set_num_threads(max(1, args.threads))
    os.makedirs(args.work, exist_ok=True)
    stages = args.stages.split(",")
    own = os.path.join(args.work, "cache")      # the sines' tokens: never in a shared cache
    sines = os.path.join(args.work, "sines")
    args.cache_of = lambda r: own if r["root"] == sines else args.cache
    truth = args.truth_cache or args.cache
    own_truth = own if truth == args.cache else own + "-truth"
    args.truth_of = lambda r: own_truth if r["root"] == sines else truth
    _, meta = safetensors_io.load(args.cnn)
    labels = json.loads(meta["labels"])
    if "sines" in stages and args.sines > 0:
        stage_sines(args)
    rows = [r for d in datasets for r in read_rows(d)]
    if args.sines > 0 and os.path.exists(os.path.join(sines, "manifest.csv")):
        rows += read_rows(sines)
    if "embed" in stages:
        stage_embed(args, rows)
    if "train" in stages:
        stage_train(args, rows, labels)
    if "eval" in stages:
        stage_eval(args, rows, labels, os.path.join(args.models, "tagger.safetensors"))
    log("done")


if __name__ == "__main__":
    main()
