#!/usr/bin/python3
"""Trains the default audio model (models/audio/): a CoNy continual encoder-classifier over
YAMNet embeddings (models/yamnet/, 1024-d, one token every 0.25 s).

    /usr/bin/python3 training/train_yamnet_audio.py --dataset out/audio-dataset-v9 \\
        --val-from out/audio-dataset-v7 --cony build-train/tools/cony \\
        --work out/train-yamnet --cache out/yamnet-cache --models models/audio

training/train_yamnet_audio.sh runs it with the data sets and the evaluation. Stages (all
run by default; --stages picks some):

  tones  training/synth_tones.py -> WORK/tones: steady sines and mains hum at audible
         levels, labelled noise (silence is a level, not the absence of change)
  embed  `cony embed -e` with YAMNet on every clip of the data set and of WORK/tones, once:
         CACHE/<set>/<clip>.npy, (17, 1024) float32, exactly the tokens `conymel
         preset=yamnet ! conyvggish output=embedding` gives; beside each, YAMNet's 521
         per-patch scores (<clip>.scores.npy, float16) from the embedding and the file's fc
         layer, checked against `cony embed` (scores) on a few clips, for a later tagger.
         CACHE/yamnet.json records the CNN's SHA-256; a cache of another CNN is refused.
  val    the encoder trained without the validation recordings (version 7's scope-all
         recordings held out of version 9, as for the models before, and 15 % of the tone
         clips) -> WORK/val/, measured on them through `cony classify` as
         eval_default_audio.py measures the test split (each clip after n - 1 tokens of its
         own recording; full-window steps) -> WORK/val/val.json: the figure the decision
         rule reads (models/audio/EXPERIMENTS.md)
  refit  the same with the validation recordings in the train split -> MODELS/
         transformer.safetensors and labels.txt (the shipped model)
  quantize  (not by default) MODELS/yamnet-adapted.safetensors, adapted earlier, given
         the activation quantisation the refit writes (--adapt-quantization, calibrated on
         the refit's train clips) in place, and MODELS/transformer.safetensors pinned to it

Validation-only clips (data set version 13's split "valx", build.py --data-version 13): never
trained on, in neither stage. Without --val-extra they are left out altogether (a run on
version 13 is a run on version 12); with it, the val stage also measures them, as it measures
the validation clips, into val.json's valx/* keys (per class, class mean, per recording),
and both together into combined/* (per class, the real validation and valx steps; their
class mean is rule 20's decision figure), beside the other figures, which stay the same.
training/compare_yamnet_recipes.py (compare.py) measures several such models at once.

Training (fit_encoder): streams of --clips-per-stream train clips joined token-wise, each
next clip another clip of the same recording (--p-recording; the clip itself when the
recording has one), of the same class (--p-class) or of a random class, with per-token
labels, so that windows of n tokens (longer than a clip) are filled and the model learns
both a steady scene and a change of class. The first clip's class is drawn uniformly.
Windows of n tokens end anywhere in a stream, at random stream offsets; 25 % are warm-up
windows (the first w < n tokens of a stream). Phase 1 as `cony`, then k-means landmarks
(train.fit_block_landmarks) and fine-tuning as `cony-fixed` (CoNy paper IV-B). The
classifier's config records the CNN (frontend.cnn, cnn_sha256, cnn_output). With
--adapt-cnn, each of val and refit first adapts YAMNet's last layers (25 and 26, or from
--adapt-from) to the classes on
its own train clips (audio/adapt.py: the file DIR/yamnet-adapted.safetensors, DIR being
WORK/val or MODELS, and its tokens in WORK/<stage>-tokens), and the encoder is trained on,
measured on and paired with that file; with --cnn-mode continual on the continual CNN's
layer-24 maps (rule 37).
Deterministic with --threads 1 (fixed seeds); with 2 torch threads the encoder's training
differs from run to run (models/audio/EXPERIMENTS.md, rule 38).
"""

import argparse
import copy
import csv
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from conytrain import REPO, TRAINING, safetensors_io
from conytrain.audio import adapt
from conytrain.audio import eval_default as eval_default_audio
from conytrain.audio.own import cnn_frontend
from conytrain.audio.recipe import (carve_validation, carve_validation_groups, log,
                                    read_manifest, refit_on_validation, run,
                                    validation_groups_of)
from conytrain.audio.token_cache import STRIDE, check_cache, token_path
from conytrain.export import export_model
from conytrain.ref.mobilenet import fc_layer
from conytrain.ref.model import ConyEncoderClassifier, save_checkpoint
from conytrain.train import CorruptedWindows, fit_block_landmarks, train_epochs

VAL_EXTRA = "valx"   # the split of validation-only clips (build.py ADDED_SPLIT)


def load_rows(args, carve=True):
    """The data set's clips (with carve: validation recordings of --val-from held out) and
    the tone clips (15 % of them held out), each with its root and cache set name."""
    rows, labels = read_manifest(args.dataset)
    if carve and not getattr(args, "val_extra", False):
        rows = [r for r in rows if r["split"] != VAL_EXTRA]
    if carve:
        rows = carve_validation_groups(
            rows, validation_groups_of(args.val_from, args.val_frac, args.seed, args.val_scope))
    tones, tone_labels = read_manifest(os.path.join(args.work, "tones"))
    if tone_labels != labels:
        raise RuntimeError(f"tones: labels {tone_labels} differ from the data set's {labels}")
    tones = carve_validation(tones, args.val_frac, args.seed, "all")
    sets = [(args.dataset, os.path.basename(os.path.normpath(args.dataset)), rows),
            (os.path.join(args.work, "tones"), "tones", tones)]
    if args.tones_extra:
        # training only and never carved, so the validation tone clips stay the same 60
        extra, _ = read_manifest(os.path.join(args.work, "tones-extra"))
        sets.append((os.path.join(args.work, "tones-extra"), "tones-extra", extra))
    if getattr(args, "events", 0):
        # training only: cut from train clips outside the validation recordings (stage_events)
        events, _ = read_manifest(events_dir(args))
        sets.append((events_dir(args), os.path.basename(events_dir(args)), events))
    for root, name, rs in sets:
        for r in rs:
            r["root"], r["set"] = root, name
    return [r for _, _, rs in sets for r in rs], labels


# ----------------------------------------------------------------------------- tones
def stage_tones(args):
    make_tones(os.path.join(args.work, "tones"), args.tones_train, args.tones_test, 26)
    if args.tones_extra:
        # another seed: none of these is one of the tones' validation or test clips
        make_tones(os.path.join(args.work, "tones-extra"), args.tones_extra, 0, 27)


def make_tones(out, train, test, seed):
    if os.path.exists(os.path.join(out, "manifest.csv")):
        return
    run([sys.executable, os.path.join(TRAINING, "synth_tones.py"), out,
         "--train", str(train), "--test", str(test), "--seed", str(seed)])
    log(f"tones: {train} train, {test} test clips in {out} (seed {seed})")


# ----------------------------------------------------------------------------- events
def events_dir(args):
    """WORK/events-N-sSEED: the --events clips (their cache set is the folder's name)."""
    return os.path.join(args.work, f"events-{args.events}-s{args.events_seed}")


def stage_events(args):
    """--events N: N event-stream clips of alarm and of animal (training/synth_events.py)
    from the data set's train clips left after the validation recordings are held out."""
    out = events_dir(args)
    if os.path.exists(os.path.join(out, "manifest.csv")):
        return
    rows, _ = read_manifest(args.dataset)
    rows = [r for r in rows if r["split"] != VAL_EXTRA]
    rows = carve_validation_groups(
        rows, validation_groups_of(args.val_from, args.val_frac, args.seed, args.val_scope))
    os.makedirs(out, exist_ok=True)
    sources = os.path.join(out, "sources.csv")
    with open(sources, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["root", "path", "label", "group", "source_file"])
        for r in rows:
            if r["split"] == "train":
                w.writerow([os.path.abspath(args.dataset), r["path"], r["label"], r["group"],
                            r.get("source_file", "")])
    run([sys.executable, os.path.join(TRAINING, "synth_events.py"), out, "--sources", sources,
         "--per-class", str(args.events), "--seed", str(args.events_seed)])
    log(f"events: {args.events} clips a class in {out}")


# ----------------------------------------------------------------------------- embed
def yamnet_fc(cnn, need=True):
    """(W, b) of the file's fc layer (float32), the scores' layer after the pooled
    embedding (None without one, unless need)."""
    tensors, meta = safetensors_io.load(cnn)
    fc = fc_layer(tensors, meta["layers"].split())
    if fc is None and need:
        raise RuntimeError(f"{cnn}: no fc layer (AudioSet head) to score the embeddings with")
    return fc


def scores_of(emb, fc):
    W, b = fc
    # clipped: an adapted CNN's embeddings can drive the head far past float32's exp range
    return 1.0 / (1.0 + np.exp(-np.clip(emb @ W.T + b, -80.0, 80.0)))


def embed_mode(args):
    """`cony embed` options of the tokens: the stride, and the CNN's mode (--cnn-mode)."""
    return ["--stride", str(args.stride)] + (
        ["--mode", "continual"] if args.cnn_mode == "continual" else [])


def embed_list(args, pairs, mode):
    """(audio, out.npy) pairs through one `cony embed --list` (the network loaded once: a
    process per clip cost about 0.4 s each), tokens of --drop-tail windows in @mode."""
    lst = pairs[0][1] + ".list"
    with open(lst, "w") as f:
        f.writelines(f"{wav}\t{out}\n" for wav, out in pairs)
    run([args.cony, "embed", "--drop-tail", "-e", "--model", args.cnn, "--stride",
         str(args.stride), "--mode", mode, "--list", lst])
    os.remove(lst)


EMBED_CHUNK = 200     # clips per `cony embed --list`: a job's share, and a resumable unit


def stage_embed(args, rows):
    check_cache(args.cnn, args.cache, stride=args.stride, mode=args.cnn_mode)
    t0 = time.time()
    # a CNN without YAMNet's head (the adapted one) has no scores: the tokens mark a clip
    fc = yamnet_fc(args.cnn, need=False)
    done = ".scores" if fc is not None else ""
    todo = [r for r in rows if not os.path.exists(token_path(args.cache, r, done))]

    def one(chunk):
        outs = [token_path(args.cache, r) for r in chunk]
        for out in outs:
            os.makedirs(os.path.dirname(out), exist_ok=True)
        parts = [out[:-4] + ".part.npy" for out in outs]
        embed_list(args, [(os.path.join(r["root"], r["path"]), part)
                          for r, part in zip(chunk, parts)], args.cnn_mode)
        for r, out, part in zip(chunk, outs, parts):
            os.replace(part, out)
            if fc is not None:
                # written last: its presence marks a finished clip
                np.save(token_path(args.cache, r, ".scores"),
                        scores_of(np.load(out), fc).astype(np.float16))
        return len(chunk)

    chunks = [todo[i:i + EMBED_CHUNK] for i in range(0, len(todo), EMBED_CHUNK)]
    finished = 0
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for k in pool.map(one, chunks):
            finished += k
            if finished % 1000 < k:
                log(f"embed: {finished}/{len(todo)} clips ({time.time() - t0:.0f} s)")
    if fc is None:
        log(f"embed: {len(todo)} clips through cony embed ({time.time() - t0:.0f} s, "
            f"{len(rows) - len(todo)} cached); no fc layer, no scores")
        return
    # the scores from the cached embedding against `cony embed`'s own scores
    worst = 0.0
    tmp = os.path.join(args.work, "scores-check.npy")
    for r in rows[::997]:
        run([args.cony, "embed", "--drop-tail", "--model", args.cnn] + embed_mode(args) +
            [os.path.join(r["root"], r["path"]), "-o", tmp])
        worst = max(worst, float(np.abs(np.load(tmp) - np.load(token_path(
            args.cache, r, ".scores")).astype(np.float32)).max()))
    log(f"embed: {len(todo)} clips through cony embed ({time.time() - t0:.0f} s, "
        f"{len(rows) - len(todo)} cached); scores vs cony embed: max |diff| {worst:.1e}")
    if worst > 2e-3:        # float16 storage: 1e-3 at most near 1
        raise RuntimeError("the cached scores disagree with cony embed's")


# ----------------------------------------------------------------------------- encoder
def cut_window(clips, seq, t0, w):
    """Tokens t0 .. t0 + w - 1 of the stream that joins clips[seq[0]], clips[seq[1]], ...
    (clips: (N, L, E), every clip L tokens): a (w, E) array."""
    L = clips.shape[1]
    first, last = t0 // L, (t0 + w - 1) // L
    x = clips[seq[first:last + 1]].reshape(-1, clips.shape[2])
    return x[t0 - first * L:t0 - first * L + w]


class JoinedSampler:
    """Training windows over streams of joined clips (module docstring), the interface of
    train.WindowSampler: batch(size) -> (x (B, w, E) float32, offsets (B,), targets).
    A subclass picks a stream's clips (stream(): indices into tokens, self.k of them) and
    a window's target (target(seq, t0, w); targets() stacks them into a tensor)."""

    def __init__(self, tokens, groups, window, positional_rows, args, seed):
        self.x = tokens                               # (N, L, E)
        self.n, self.T, self.a = window, positional_rows, args
        self.rng = np.random.default_rng([seed, 3])
        by_group = {}
        for i, g in enumerate(groups):
            by_group.setdefault(g, []).append(i)
        self.same_group = [np.array(by_group[g]) for g in groups]
        self.k = max(args.clips_per_stream, -(-window // tokens.shape[1]) + 1)

    def batch(self, size):
        N, L, E = self.x.shape
        n, rng = self.n, self.rng
        warm = rng.random() < self.a.warmup_fraction
        w = int(rng.integers(1, n)) if warm else n
        xs, offs, ys = [], [], []
        for _ in range(size):
            seq = self.stream()
            t0 = 0 if warm else int(rng.integers(0, self.k * L - n + 1))
            xs.append(cut_window(self.x, seq, t0, w))
            offs.append(0 if warm else int(rng.integers(0, self.T)))
            ys.append(self.target(seq, t0, w))
        return (torch.from_numpy(np.stack(xs).astype(np.float32)),
                torch.tensor(offs, dtype=torch.long), self.targets(ys))


class JoinedWindows(JoinedSampler):
    """Streams of clips of one class, another recording or any class (--p-recording,
    --p-class); a window's target is the class of the clip its newest token is in:
    batch(size) -> (x (B, w, E), offsets (B,), y (B,))."""

    def __init__(self, tokens, y, groups, window, positional_rows, args, seed):
        super().__init__(tokens, groups, window, positional_rows, args, seed)
        self.y = y                                    # (N,)
        self.by_class = [np.flatnonzero(y == c) for c in range(int(y.max()) + 1)]

    def stream(self):
        rng, a = self.rng, self.a
        c = int(rng.integers(len(self.by_class)))
        seq = [int(rng.choice(self.by_class[c]))]
        while len(seq) < self.k:
            u, prev = rng.random(), seq[-1]
            if u < a.p_recording:
                g = self.same_group[prev]
                others = g[g != prev]
                seq.append(int(rng.choice(others)) if len(others) else prev)
            elif u < a.p_recording + a.p_class:
                seq.append(int(rng.choice(self.by_class[self.y[prev]])))
            else:
                c = int(rng.integers(len(self.by_class)))
                seq.append(int(rng.choice(self.by_class[c])))
        return seq

    def target(self, seq, t0, w):
        return self.y[seq[(t0 + w - 1) // self.x.shape[1]]]

    def targets(self, ys):
        return torch.tensor(ys, dtype=torch.long)


def frontend(args):
    """The token front end recorded in the classifier: YAMNet's log-mel (its file's
    frontend metadata), the CNN file's name and SHA-256 (train_your_own.cnn_frontend's
    convention), and which of its outputs the tokens are."""
    fe = cnn_frontend(args.cnn)
    if fe.get("cnn_output") != "embedding":
        raise RuntimeError(f"{args.cnn}: not a MobileNet whose pooled embedding is the token")
    fe.update(patch_frames=96, stride_frames=args.stride, token_seconds=args.stride * 0.01)
    if args.cnn_mode == "continual":
        fe["cnn_mode"] = "continual"
    return fe


class HeadProjection(torch.nn.Module):
    """The input projection through YAMNet's classifier head (--input-head): token e ->
    its 521 logits, standardised over the train tokens, z = (W e + b - mu) / sigma (all
    frozen) -> a learned 521 -> d. Linear, so fold() makes it one plain d_in -> d layer
    and the exported file is an ordinary classifier."""

    def __init__(self, fc, tokens, d):
        super().__init__()
        W, b = fc
        logits = tokens @ W.T + b
        mu, sigma = logits.mean(0), logits.std(0) + 1e-3
        self.register_buffer("W", torch.from_numpy(W / sigma[:, None]).float())
        self.register_buffer("b", torch.from_numpy((b - mu) / sigma).float())
        self.proj = torch.nn.Linear(W.shape[0], d)

    def forward(self, x):
        return self.proj(x @ self.W.T + self.b)

    @torch.no_grad()
    def fold(self):
        lin = torch.nn.Linear(self.W.shape[1], self.proj.out_features)
        lin.weight.copy_(self.proj.weight @ self.W)
        lin.bias.copy_(self.proj.weight @ self.b + self.proj.bias)
        return lin


def fit_encoder(args, rows, labels, models, tag):
    """Trains on the rows of split "train" and exports MODELS/transformer.safetensors
    (checkpoint WORK/TAG.pt)."""
    train = [r for r in rows if r["split"] == "train"]
    if any(r.get("family", "").startswith("val_only") for r in train):
        raise RuntimeError("fit_encoder: a validation-only clip is in the train split")
    torch.manual_seed(args.train_seed)
    tokens = np.stack([np.load(token_path(args.cache, r)) for r in train])
    y = np.array([labels.index(r["label"]) for r in train])
    E = tokens.shape[2]
    model = ConyEncoderClassifier(E, args.d, args.heads, args.ff, 1, args.window,
                                  args.landmarks, "cony", labels,
                                  positional_encoding="learned", frontend=frontend(args),
                                  dropout=args.tf_dropout)
    if args.input_head:
        model.input_proj = HeadProjection(yamnet_fc(args.cnn), tokens.reshape(-1, E),
                                          args.d)
    sampler = JoinedWindows(tokens, y, [r["group"] for r in train], args.window,
                            model.config["positional_rows"], args, args.train_seed)
    log(f"encoder: d {args.d} heads {args.heads} ff {args.ff} n {args.window} "
        f"m {args.landmarks}; {len(train)} train clips, streams of {sampler.k} clips")
    if args.token_swap > 0:
        sampler = CorruptedWindows(sampler, tokens.reshape(-1, E), args.token_swap,
                                   args.train_seed)
    decay = 0.01 if args.lr_decay else None      # cosine to 1 % of each phase's rate
    soft = dict(grad_clip=args.grad_clip or None)
    train_epochs(model, sampler, args.tf_epochs, args.tf_batches, args.tf_batch, args.tf_lr,
                 args.weight_decay, log=log, lr_final=decay and args.tf_lr * decay,
                 label_smoothing=args.label_smoothing, **soft)
    if getattr(args, "phase1_models", None):     # the model as trained with `cony` landmarks
        model.eval()
        phase1 = model
        if args.input_head:                       # export folds the head, training goes on
            phase1 = copy.deepcopy(model)
            phase1.input_proj = phase1.input_proj.fold()
        write_model(phase1, args.phase1_models, labels)
    fit_block_landmarks(model, sampler, 0, args.kmeans_windows, seed=args.train_seed)
    log(f"fixed landmarks by k-means (m = {args.landmarks}); fine-tuning as cony-fixed")
    train_epochs(model, sampler, args.finetune_epochs, args.tf_batches, args.tf_batch,
                 args.tf_lr * 0.3, args.weight_decay, log=log,
                 lr_final=decay and args.tf_lr * 0.3 * decay,
                 label_smoothing=args.label_smoothing, **soft)
    if args.input_head:
        model.input_proj = model.input_proj.fold()
    model.eval()
    os.makedirs(models, exist_ok=True)
    save_checkpoint(model, os.path.join(args.work, tag + ".pt"))
    return write_model(model, models, labels)


def write_model(model, models, labels):
    """MODELS/transformer.safetensors and labels.txt of model; returns the model's path."""
    os.makedirs(models, exist_ok=True)
    path = os.path.join(models, "transformer.safetensors")
    export_model(model, path)
    with open(os.path.join(models, "labels.txt"), "w") as f:
        f.write("\n".join(labels) + "\n")
    log(f"wrote {path} ({os.path.getsize(path)} bytes), labels.txt")
    return path


def measure(args, rows, labels, model, out, split="val", variant=None):
    """Full-window accuracy of the exported model on the validation clips (or those of
    another split, from the cache) through `cony classify` (--attention variant, if given),
    each clip after n - 1 tokens of its own recording (the test protocol of
    eval_default_audio.py) -> out (JSON); per origin and class (figures())."""
    extra = getattr(args, "val_extra", False) and split == "val"
    res = figures(labels, classify_split(args, rows, model, split, variant),
                  classify_split(args, rows, model, VAL_EXTRA, variant) if extra else None)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    for origin in ("real", "synth"):
        if f"{origin}/all" in res:
            log(f"{split} ({origin}, full-window steps): {100 * res[origin + '/all']['accuracy']:.1f} %, "
                f"class mean {100 * res[origin + '/class-mean']['accuracy']:.1f} % | "
                f"{class_parts(res, origin, labels)}")
    for key in (k for k in res if k.startswith("tones/")):
        t = res[key]
        log(f"{split} tone clips ({key[6:]}): {t['correct']}/{t['steps']} steps right "
            f"({100 * t['accuracy']:.1f} %); of {t['clips']} clips "
            f"{t['clips-right-by-majority']} right and {t['clips-silence-by-majority']} "
            "silence by majority")
    if extra:
        log(f"validation-only clips ({VAL_EXTRA}, full-window steps): "
            f"{100 * res[VAL_EXTRA + '/all']['accuracy']:.1f} %, class mean "
            f"{100 * res[VAL_EXTRA + '/class-mean']['accuracy']:.1f} %, per-recording class "
            f"mean {100 * res[VAL_EXTRA + '/recording-class-mean']['accuracy']:.1f} % "
            f"({res[VAL_EXTRA + '/recording-class-mean']['recordings']} recordings) | "
            f"{class_parts(res, VAL_EXTRA, labels)}")
        log(f"combined (real {split} + {VAL_EXTRA}, rule 20): class mean "
            f"{100 * res['combined/class-mean']['accuracy']:.2f} % | "
            f"{class_parts(res, 'combined', labels)}")
    return res


def figures(labels, preds, extra=None):
    """val.json's figures from (row, per-step predictions) of a split's clips: per origin
    and class, class means, the tone clips; with extra, the same of the validation-only
    clips (extra_figures()) and both together (combined())."""
    stats, tones = {}, {}
    for r, pred in preds:
        ok = int((pred == labels.index(r["label"])).sum())
        for key in ((r["origin"], r["label"]), (r["origin"], "all")):
            add_steps(stats, "%s/%s" % key, ok, len(pred))
        if r["set"] == "tones":
            # rule 15 (b): a tone clip's steps labelled noise, and clips silence by majority;
            # rule 23 (b): clips labelled right (noise) by majority
            t = tones.setdefault(r["label"], [0, 0, 0, 0, 0])
            t[0] += ok
            t[1] += len(pred)
            t[2] += int(2 * (pred == labels.index("silence")).sum() > len(pred))
            t[3] += 1
            t[4] += int(2 * ok > len(pred))
    res = rates(stats)
    for label, (ok, steps, silent, clips, right) in sorted(tones.items()):
        res[f"tones/{label}"] = {"correct": ok, "steps": steps, "accuracy": ok / steps,
                                 "clips": clips, "clips-silence-by-majority": silent,
                                 "clips-right-by-majority": right}
    for origin in ("real", "synth"):
        if f"{origin}/all" in res:
            res[f"{origin}/class-mean"] = class_mean(res, origin, labels)
    if extra is not None:
        res.update(extra_figures(labels, extra))
        res.update(combined(res, labels))
    return res


def combined(res, labels):
    """Rule 20's decision figure: per class, the full-window steps of its real validation
    clips and of its validation-only clips together (combined/<class>), and the mean over
    the classes (combined/class-mean)."""
    stats = {}
    for c in labels:
        for key in (f"real/{c}", f"{VAL_EXTRA}/{c}"):
            if key in res:
                add_steps(stats, c, res[key]["correct"], res[key]["steps"])
    out = rates(stats, "combined/")
    out["combined/class-mean"] = class_mean(out, "combined", labels)
    return out


def add_steps(stats, key, ok, steps):
    a = stats.setdefault(key, [0, 0])
    a[0] += ok
    a[1] += steps


def rates(stats, prefix=""):
    """PREFIX<key> -> correct, steps and accuracy of add_steps()'s counts."""
    return {prefix + k: {"correct": v[0], "steps": v[1], "accuracy": v[0] / v[1]}
            for k, v in sorted(stats.items())}


def class_mean(res, prefix, labels):
    """The mean of res's PREFIX/<class> accuracies over the classes it has."""
    per = [res[f"{prefix}/{c}"]["accuracy"] for c in labels if f"{prefix}/{c}" in res]
    return {"accuracy": float(np.mean(per)), "classes": len(per)}


def class_parts(res, prefix, labels):
    return ", ".join("%s %.1f%%" % (c, 100 * res[f"{prefix}/{c}"]["accuracy"])
                     for c in labels if f"{prefix}/{c}" in res)


def split_logits(args, rows, model, split, variant=None, window=None):
    """(row, per-step logits after n - 1 tokens of its own recording) for every clip of
    the split, through `cony classify` (n: window, else --window)."""
    val = [r for r in rows if r["split"] == split]
    tokens = [np.load(token_path(args.cache, r)) for r in val]
    tmp_dir = os.path.join(args.work, "val-tmp")
    os.makedirs(tmp_dir, exist_ok=True)
    for i, stream, c in eval_default_audio.recording_streams(val, tokens, window or args.window):
        yield val[i], eval_default_audio.logits(args.cony, model, stream, tmp_dir, variant)[c:]


def classify_split(args, rows, model, split, variant=None):
    """split_logits()'s clips with their per-step predictions (arg-max)."""
    for r, z in split_logits(args, rows, model, split, variant):
        yield r, z.argmax(1)


def extra_figures(labels, preds):
    """The validation-only clips (split valx; (row, per-step predictions)) measured as
    figures() measures the validation clips: valx/<class>, valx/all, valx/class-mean
    (full-window steps), and per recording (valx/recordings: group -> label, steps right)
    with valx/recording-class-mean, the mean over classes of the recordings' mean accuracy
    (every recording counts the same)."""
    stats, recs = {}, {}
    for r, pred in preds:
        ok = int((pred == labels.index(r["label"])).sum())
        for key in (r["label"], "all"):
            add_steps(stats, key, ok, len(pred))
        g = recs.setdefault(r["group"], {"label": r["label"], "correct": 0, "steps": 0})
        g["correct"] += ok
        g["steps"] += len(pred)
    if not stats:
        raise RuntimeError("--val-extra: the data set has no validation-only clips (split "
                           f"{VAL_EXTRA}; data set version 13)")
    res = rates(stats, VAL_EXTRA + "/")
    res[f"{VAL_EXTRA}/class-mean"] = class_mean(res, VAL_EXTRA, labels)
    for g in recs.values():
        g["accuracy"] = g["correct"] / g["steps"]
    res[f"{VAL_EXTRA}/recordings"] = dict(sorted(recs.items()))
    by_class = {}
    for g in recs.values():
        by_class.setdefault(g["label"], []).append(g["accuracy"])
    res[f"{VAL_EXTRA}/recording-class-mean"] = {
        "accuracy": float(np.mean([np.mean(by_class[c]) for c in labels if c in by_class])),
        "classes": len(by_class), "recordings": len(recs)}
    return res


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="out/audio-dataset-v9")
    ap.add_argument("--val-from", default="out/audio-dataset-v7",
                    help="the data set whose --val-scope validation recordings are held out")
    ap.add_argument("--val-scope", choices=("base", "all"), default="all")
    ap.add_argument("--val-frac", type=float, default=0.15)
    ap.add_argument("--cony", default="build-train/tools/cony")
    ap.add_argument("--cnn", default=os.path.join(REPO, "models", "yamnet", "yamnet.safetensors"))
    ap.add_argument("--work", default="out/train-yamnet")
    ap.add_argument("--cache", default="out/yamnet-cache",
                    help="YAMNet tokens and scores per clip (reused by later runs and taggers)")
    ap.add_argument("--models", default="models/audio")
    ap.add_argument("--stages", default="tones,embed,val,refit")
    ap.add_argument("--cnn-mode", choices=("window", "continual"), default="window",
                    help="how the CNN runs for the tokens: per window (conyvggish mode=window) "
                         "or continual (mode=continual, docs/continual-cnn.md; needs --stride "
                         "a multiple of 32 and a --cache of its own); recorded in the "
                         "classifier's config as cnn_mode (rule 36)")
    ap.add_argument("--stride", type=int, default=STRIDE,
                    help="frames between tokens (25: 0.25 s; continual: a multiple of 32)")
    ap.add_argument("--jobs", type=int, default=2, help="cony embed processes at once")
    ap.add_argument("--seed", type=int, default=20261121, help="the validation split's seed")
    ap.add_argument("--train-seed", type=int, default=11)
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--tones-train", type=int, default=400)
    ap.add_argument("--tones-test", type=int, default=60)
    ap.add_argument("--tones-extra", type=int, default=0,
                    help="this many more training-only tone clips (WORK/tones-extra, seed 27), "
                         "so that tones keep their share of the noise class when noise data "
                         "is added (rule 19)")
    ap.add_argument("--events", type=int, default=0,
                    help="this many training-only event-stream clips of alarm and of animal "
                         "(training/synth_events.py, WORK/events-N-sSEED; rule 30)")
    ap.add_argument("--events-seed", type=int, default=44)
    ap.add_argument("--val-extra", action="store_true",
                    help="keep the data set's validation-only clips (split valx, data set "
                         "version 13) and measure them in the val stage (val.json valx/*); "
                         "they are never trained on, with or without this option")
    # encoder
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=128)
    ap.add_argument("--window", type=int, default=32)
    ap.add_argument("--landmarks", type=int, default=8)
    ap.add_argument("--clips-per-stream", type=int, default=4)
    ap.add_argument("--p-recording", type=float, default=0.5)
    ap.add_argument("--p-class", type=float, default=0.1)
    ap.add_argument("--warmup-fraction", type=float, default=0.25)
    ap.add_argument("--tf-epochs", type=int, default=16)
    ap.add_argument("--finetune-epochs", type=int, default=4)
    ap.add_argument("--tf-batches", type=int, default=100)
    ap.add_argument("--tf-batch", type=int, default=64)
    ap.add_argument("--tf-lr", type=float, default=2e-3)
    ap.add_argument("--lr-decay", type=int, default=0,
                    help="1: each phase's learning rate falls along a half cosine to 1 %% of it")
    ap.add_argument("--weight-decay", type=float, default=1e-2)
    ap.add_argument("--tf-dropout", type=float, default=0.1)
    ap.add_argument("--token-swap", type=float, default=0.0,
                    help="share of each window's tokens replaced by random train tokens")
    ap.add_argument("--kmeans-windows", type=int, default=512)
    ap.add_argument("--input-head", type=int, default=0,
                    help="1: the input projection goes through YAMNet's classifier head "
                         "(HeadProjection), folded into one layer for the export")
    ap.add_argument("--label-smoothing", type=float, default=0.0)
    ap.add_argument("--grad-clip", type=float, default=0.0,
                    help="the encoder's gradient scaled down to this global L2 norm when "
                         "longer (0: not clipped; rule 26)")
    # YAMNet's last layers adapted first (audio/adapt.py, rules 25 and 28)
    ap.add_argument("--adapt-cnn", type=int, default=0,
                    help="1: adapt YAMNet's last layers (--adapt-from) to the classes on the train "
                         "clips' patches first; the encoder is trained on that file's tokens "
                         "and pairs with it (MODELS/yamnet-adapted.safetensors)")
    ap.add_argument("--adapt-from", type=int, default=adapt.FIRST,
                    help="the first adapted layer (25: layers 25 and 26; 23: layers 23 to 26, "
                         "from layer 22's map, rule 28); a depthwise layer, 13 to 25")
    ap.add_argument("--adapt-steps", type=int, default=1500)
    ap.add_argument("--adapt-batch", type=int, default=128, help="patches per step")
    ap.add_argument("--adapt-lr", type=float, default=1e-4,
                    help="the adapted layers' rate (the head's is 10 times it), half cosine to 0")
    ap.add_argument("--adapt-dropout", type=float, default=0.3)
    ap.add_argument("--adapt-also", default="",
                    help="another data set whose validation and valx clips also get the "
                         "adapted CNN's tokens (for compare_yamnet_recipes.py)")
    ap.add_argument("--adapt-quantization", default=adapt.YAMNET_QUANTIZATION,
                    help="the activation quantisation of the layers before the adapted ones "
                         "(JSON as docs/model-format.md's key; default YAMNet's own); the "
                         "adapted layers and the pool are calibrated on the train patches "
                         "(rule 32). none: the adapted file stays float")
    ap.add_argument("--phase1-models", default=None,
                    help="also export the model after phase 1 (trained as cony) to this folder")
    return ap


def parse_args(argv=None):
    """build_parser()'s arguments, with the combinations that cannot work refused."""
    ap = build_parser()
    args = ap.parse_args(argv)
    if not args.val_from:
        ap.error("--val-from: the data set whose validation recordings are held out")
    if args.adapt_cnn and args.input_head:
        ap.error("--adapt-cnn: the adapted CNN has no AudioSet head for --input-head")
    if args.adapt_from != adapt.FIRST and not args.adapt_cnn:
        ap.error("--adapt-from: only with --adapt-cnn 1 (nothing is adapted without it)")
    if args.cnn_mode == "continual" and args.stride % 32:
        ap.error("--cnn-mode continual: --stride must be a multiple of 32 (YAMNet's time stride)")
    if args.adapt_cnn and args.cnn_mode == "window" and args.stride != STRIDE:
        ap.error("--adapt-cnn: adapts on per-window layer-24 maps at stride 25 only")
    if args.adapt_cnn and args.cnn_mode == "continual" and args.adapt_from != adapt.FIRST:
        ap.error("--adapt-cnn with --cnn-mode continual: adapts layers 25 and 26 only "
                 "(--adapt-from 25), on continual layer-24 maps (rule 37)")
    return args


def main():
    args = parse_args()
    torch.set_num_threads(max(1, min(2, args.threads)))
    os.makedirs(args.work, exist_ok=True)
    stages = args.stages.split(",")
    t0 = time.time()
    if "tones" in stages:
        stage_tones(args)
        if args.events:
            stage_events(args)
    if "embed" in stages:         # every clip: needs no validation split
        stage_embed(args, load_rows(args, carve=False)[0])
    rows, labels = load_rows(args)
    if "val" in stages:
        work = os.path.join(args.work, "val")
        mine = adapt.adapted(args, rows, labels, work, "val") if args.adapt_cnn else args
        model = fit_encoder(mine, rows, labels, work, "val")
        measure(mine, rows, labels, model, os.path.join(work, "val.json"))
    if "refit" in stages:
        rows = refit_on_validation(rows)
        mine = adapt.adapted(args, rows, labels, args.models, "refit") if args.adapt_cnn \
            else args
        fit_encoder(mine, rows, labels, args.models, "refit")
    if "quantize" in stages:      # not by default: the refit writes the quantisation itself
        adapt.requantize(args, refit_on_validation(rows), args.models)
    log(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
