#!/usr/bin/python3
"""Trains the VGGish default audio model (shipped in models/audio/ up to run E16; since
E53 that is train_yamnet_audio.py's): a reduced VGGish-shaped CNN
that turns 0.96 s log-mel patches into small embeddings, and the CoNy encoder-classifier
that classifies the stream of those embeddings continually.

    /usr/bin/python3 training/train_default_audio.py --dataset out/audio-dataset-v9 \\
        --cony build-train/tools/cony --work out/train-audio --models out/train-audio/models \\
        --center-bands 1 --batch-norm 1 --conv 24,48,64,64,96,96 --fc 160,128 \\
        --val-from out/audio-dataset-v7 --val-scope all --threads 2 \\
        --distill T1,T2,T3,T4

The shipped CNN sees each mel band centred over its patch (--center-bands 1), was trained
with batch normalisation (--batch-norm 1, folded away at export) and is wider than the
defaults of --conv and --fc; its validation recordings are data set version 7's, carved
from every family (--val-from, --val-scope all). It learned from the labels and from four
teacher CNNs (--distill: the WORK directories of earlier runs of the same options without
--distill, --stages mel,cnn, two widths, training seeds 11 and 7).
training/train_default_audio.sh builds data sets 9 and 7, trains the teachers and runs
this (models/audio/MODEL.md).

Stages (all run by default; --stages picks some):

  mel    `cony mel` (libcony's float32 log-mel, the front end the conymel element uses) on
         every clip of the manifest -> WORK/mel/<clip>.npy (frames, 64). A few clips are
         checked against training/mel_reference.py (float64).
  cnn    the CNN, trained as a per-patch classifier (an extra linear head on the
         embedding, dropped at export) on 96-frame patches taken at random frame offsets
         of the train clips, with log-mel-domain augmentation (augment()); written to
         MODELS/vggish.safetensors with the front-end parameters in its metadata.
  pack   instead of cnn (--stages pack,embed,tf,val --pack WORK1,WORK2): the CNNs of
         earlier runs (same data set and validation split, other --train-seed) packed side
         by side into one VGGish-layout CNN whose token is their embeddings concatenated
         (an ensemble in one file the C engine runs; cnn.vggish.pack_side_by_side).
  embed  `cony embed` with that file on every clip (windows of 96 frames every 25
         frames = 0.25 s, postprocess none): the token sequences the transformer sees
         in the C pipeline, WORK/tokens/<clip>.npy (steps, E). A few are checked against
         the torch CNN.
  tf     the encoder-classifier (training/conytrain/ref), frozen CNN: first with continual
         landmarks (`cony`, trained as windowed `nystrom`), then the CoNy paper's
         fixed-landmark phase (k-means on the projected q / k per head, then fine-tuning
         with the landmarks held fixed) -> `cony-fixed`. Training sequences are pairs of
         train clips joined token-wise (same class or not, per-token labels), so the
         model also learns to follow a change of class. Written to
         MODELS/transformer.safetensors (+ labels.txt).

  val    the validation split: a share (--val-frac) of each family's train-split groups
         (whole recordings, speakers, levels), held out from training by
         carve_validation(); per-step accuracy through `cony classify` -> WORK/val.json.

Only train-split clips (less the validation groups) are used for training; nothing is
selected on the test split. Once a recipe has been chosen on the validation split, its
final model is refit with the validation recordings in the train split (--train-on-val),
as the shipped one was.
Deterministic: fixed seeds, single-process data, torch threads as given (1 by default).
The CNN augmentations models/audio/EXPERIMENTS.md tried and rejected (time stretch,
background noise, mixup, random EQ) and the weight average (--cnn-ema) are no longer here;
git history has their code (git log -S time_stretch_p).
"""

import argparse
import csv
import json
import os
import subprocess
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from conytrain import safetensors_io
from conytrain.audio import mel as mel_reference
from conytrain.cnn.vggish import VGGishLike, fold_batch_norm, layout, pack_side_by_side
from conytrain.export import export_model
from conytrain.ref.model import ConyEncoderClassifier, save_checkpoint
from conytrain.train import WindowSampler, fit_block_landmarks, train_epochs

PATCH = 96          # frames per CNN window (0.96 s)
STRIDE = 25         # frames between windows (0.25 s): one token per stride
N_MELS = 64
FRONTEND = dict(kind="audio-logmel-vggish", sample_rate=16000, window_samples=400,
                hop_samples=160, fft=512, n_mels=N_MELS, fmin=125.0, fmax=7500.0,
                log_offset=0.01, patch_frames=PATCH, stride_frames=STRIDE,
                token_seconds=STRIDE * 0.01, postprocess="none")


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def read_manifest(dataset):
    with open(os.path.join(dataset, "manifest.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(dataset, "labels.txt")) as f:
        labels = [line.strip() for line in f if line.strip()]
    for r in rows:
        if r["label"] not in labels:
            raise ValueError(f"manifest: {r['path']}: label {r['label']} not in labels.txt")
    return rows, labels


def carve_validation(rows, frac, seed, scope="base"):
    """Move a share frac of the train split's groups (per class and family: whole source
    recordings, speakers or levels; every synthesised clip is its own group) to a
    validation split "val", used for decisions and reported, never trained on. The test
    split is untouched.

    scope "base": the groups of the data set's first families only (set "base"); the extra
    clips cut from a validation recording (data set --train-extra) become "unused", so the
    split is the same with or without them. It has few noise and alarm recordings (7 and
    2 groups in version 7), which is why it could not rank models on those classes.
    scope "all": the families used for training only (--train-extra) are carved too, and
    every clip of a validation group, base or extra, is a validation clip."""
    if scope not in ("base", "all"):
        raise ValueError(f"carve_validation: scope {scope!r} is neither 'base' nor 'all'")
    rng = np.random.default_rng([seed, 7])
    fam = {}
    for r in rows:
        if r["split"] == "train" and (scope == "all" or r.get("set") != "extra"):
            fam.setdefault((r["label"], r.get("family", "")), set()).add(r["group"])
    val = set()
    for key in sorted(fam):
        gs = sorted(fam[key])
        k = int(round(len(gs) * frac))
        if len(gs) < 3:
            k = 0                   # keep a family with one or two groups whole in train
        for i in rng.permutation(len(gs))[:k]:
            val.add(gs[i])
    for r in rows:
        if r["split"] == "train" and r["group"] in val:
            r["split"] = "unused" if scope == "base" and r.get("set") == "extra" else "val"
    return rows


def validation_groups_of(dataset, frac, seed, scope):
    """The groups carve_validation() holds out of another data set (--val-from)."""
    rows, _ = read_manifest(dataset)
    return {r["group"] for r in carve_validation(rows, frac, seed, scope) if r["split"] == "val"}


def carve_validation_groups(rows, groups):
    """Move every train clip of the given groups (base or extra) to "val": the validation
    recordings of another data set, so that runs on two data sets that share them are
    never trained on those recordings and are measured on them. The base clips are the
    same clips; the extra clips cut from those recordings are the same only where the two
    data sets plan the same extra clips (version 9 holds 959 real clips of the 1121 that
    version 7's scope-all split has, 200 base clips in both)."""
    for r in rows:
        if r["split"] == "train" and r["group"] in groups:
            r["split"] = "val"
    return rows


def refit_on_validation(rows):
    """Move the validation clips into the train split, marked "refit": the final model of a
    recipe already chosen on them learns from every training recording (--train-on-val).
    The test split is untouched."""
    for r in rows:
        if r["split"] == "val":
            r["split"] = "train"
            r["refit"] = True
    return rows


def npy_path(work, kind, clip):
    return os.path.join(work, kind, os.path.splitext(clip)[0] + ".npy")


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")


def read_wav_mono16k(path):
    import wave
    with wave.open(path, "rb") as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2, path
        x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return x.astype(np.float64) / 32768.0


# ----------------------------------------------------------------------------- mel
def stage_mel(args, rows):
    t0 = time.time()
    done = 0
    for r in rows:
        out = npy_path(args.work, "mel", r["path"])
        wav = os.path.join(args.dataset, r["path"])
        if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(wav):
            continue        # computed from this very file before
        os.makedirs(os.path.dirname(out), exist_ok=True)
        run([args.cony, "mel", wav, "-o", out])
        done += 1
    # the C front end against the float64 reference on a few clips (one per class)
    worst = 0.0
    seen = set()
    for r in rows:
        if r["label"] in seen:
            continue
        seen.add(r["label"])
        ref = mel_reference.log_mel(read_wav_mono16k(os.path.join(args.dataset, r["path"])),
                                    **mel_reference.VGGISH)
        c = np.load(npy_path(args.work, "mel", r["path"]))
        if c.shape != ref.shape:
            raise RuntimeError(f"cony mel {r['path']}: shape {c.shape}, reference {ref.shape}")
        worst = max(worst, float(np.abs(c - ref).max()))
    log(f"mel: {done} clips through cony mel ({time.time() - t0:.0f} s); cony mel vs "
        f"mel_reference.py on {len(seen)} clips: max |diff| {worst:.2e}")
    if worst > 1e-3:
        raise RuntimeError(f"cony mel disagrees with mel_reference.py by {worst}")


# ----------------------------------------------------------------------------- cnn
def cnn_layout(args):
    c = [int(v) for v in args.conv.split(",")]
    if len(c) != 6:
        raise ValueError("--conv: six widths (VGGish has six convolutions)")
    conv = (c[0], "M", c[1], "M", c[2], c[3], "M", c[4], c[5], "M")
    fc = tuple(int(v) for v in args.fc.split(",")) + (args.embed,)
    return conv, fc


class PatchClassifier(nn.Module):
    def __init__(self, conv, fc, classes, dropout, center_height=False, batch_norm=False):
        super().__init__()
        self.cnn = VGGishLike(conv, fc, final_relu=False, center_height=center_height,
                              batch_norm=batch_norm)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(fc[-1], classes)

    def forward(self, x):
        e = self.cnn(x)
        return self.head(self.drop(F.relu(e)))


LOG_OFFSET = FRONTEND["log_offset"]


def random_patch_energy(mels, y, rng, accept):
    """The mel energies of a PATCH-frame patch at a random offset of a random clip whose
    class passes accept."""
    i = int(rng.integers(len(mels)))
    while not accept(y[i]):
        i = int(rng.integers(len(mels)))
    m = mels[i]
    t = int(rng.integers(0, m.shape[0] - PATCH + 1))
    return np.maximum(np.exp(m[t:t + PATCH].astype(np.float64)) - LOG_OFFSET, 0.0)


def add_below(e, other, db):
    """The mel energies e with other added, scaled so that its mean magnitude sits db dB
    below e's (mel energies added: an approximation of mixing the waveforms)."""
    ratio = e.mean() / max(other.mean(), 1e-12)
    return e + other * ratio * 10 ** (-db / 20.0)


def augment(xb, yb, mels, y, silence, rng, quiet_frac=0.0, clip_db=None):
    """Augmentation in the log-mel domain, exact where it can be: the mel energies
    (exp(L) - offset) are linear in the waveform's amplitude, so a gain g is
    L' = log(g (exp(L) - offset) + offset). Per patch: a gain of -6..+6 dB; with
    probability 0.5 a patch of another non-silence clip added 12..30 dB down (mel
    energies added: an approximation of mixing the waveforms); a shift of -2..2 mel
    bands (p 0.3); one frequency mask of 1..8 bands and one time mask of 1..16 frames
    (p 0.3 each, filled with the patch's floor). Silence patches get only gain (kept at
    most -58 dBFS + 6 dB, still far below the quietest noise) and no mixing. A share
    quiet_frac of the other patches is scaled down to a silence level (clip_db: the RMS
    level in dBFS of each patch's clip) and relabelled silence."""
    B = xb.shape[0]
    yb = yb.copy()
    e = np.maximum(np.exp(xb.astype(np.float64)) - LOG_OFFSET, 0.0)
    for j in range(B):
        if silence >= 0 and yb[j] != silence and rng.random() < quiet_frac:
            # "the same sound, far away": scaled to a clip level of -90..-58 dBFS RMS,
            # the silence class's range
            e[j] *= 10 ** ((rng.uniform(-90, -58) - clip_db[j]) / 20.0)
            yb[j] = silence
            continue
        e[j] *= 10 ** (rng.uniform(-6, 6) / 20.0)        # mel values are magnitudes
        if yb[j] != silence:
            # the draw of the random EQ that was tried and dropped (models/audio/
            # EXPERIMENTS.md): kept so that every recipe's random stream, and so its
            # models, stay the same
            rng.random()
        if yb[j] != silence and rng.random() < 0.5:
            other = random_patch_energy(mels, y, rng, lambda c: c != silence)
            e[j] = add_below(e[j], other, rng.uniform(12, 30))
    out = np.log(e + LOG_OFFSET)
    for j in range(B):
        if yb[j] == silence:
            continue
        if rng.random() < 0.3:
            k = int(rng.integers(-2, 3))
            if k:
                out[j] = np.roll(out[j], k, axis=1)
                if k > 0:
                    out[j, :, :k] = out[j, :, k:k + 1]
                else:
                    out[j, :, k:] = out[j, :, k - 1:k]
        floor = out[j].min()
        if rng.random() < 0.3:
            w = int(rng.integers(1, 9))
            f0 = int(rng.integers(0, N_MELS - w + 1))
            out[j, :, f0:f0 + w] = floor
        if rng.random() < 0.3:
            w = int(rng.integers(1, 17))
            t0 = int(rng.integers(0, PATCH - w + 1))
            out[j, t0:t0 + w, :] = floor
    return out.astype(np.float32), yb


def draw_patch(m, rng):
    """A patch of PATCH frames of the log-mel m at a random frame offset."""
    n = m.shape[0]
    t = int(rng.integers(0, n - PATCH + 1))
    return m[t:t + PATCH]


def load_mels(args, rows):
    return [np.load(npy_path(args.work, "mel", r["path"])).astype(np.float32) for r in rows]


def stage_cnn(args, rows, labels):
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    train = [r for r in rows if r["split"] == "train"]
    mels = load_mels(args, train)
    y = np.array([labels.index(r["label"]) for r in train])
    silence = labels.index("silence") if "silence" in labels else -1
    clip_db = np.array([20 * np.log10(np.sqrt(np.mean(read_wav_mono16k(
        os.path.join(args.dataset, r["path"])) ** 2)) + 1e-12) for r in train])
    groups = [r["group"] for r in train]
    gcount = {g: groups.count(g) for g in set(groups)}
    draw_p = np.array([1.0 / np.sqrt(gcount[g]) for g in groups])
    for c in np.unique(y):
        draw_p[y == c] /= draw_p[y == c].sum()
    draw_p /= draw_p.sum()
    conv, fc = cnn_layout(args)
    model = PatchClassifier(conv, fc, len(labels), args.cnn_dropout, bool(args.center_bands),
                            bool(args.batch_norm))
    nparams = sum(p.numel() for p in model.cnn.parameters())
    log(f"cnn: conv {conv} fc {fc}: {nparams} parameters; {len(train)} train clips")
    teachers = [load_patch_classifier(w, len(labels)) for w in args.distill.split(",") if w]
    skip = set(f for f in args.distill_skip_families.split(",") if f)
    taught = distillation_mask(train, skip)
    if teachers:
        refit = " and of the validation recordings" if args.train_on_val else ""
        log(f"cnn: distilled from {args.distill} (weight {args.distill_weight}, "
            f"temperature {args.distill_temp}; labels only for {int(len(taught) - taught.sum())} "
            f"clips of {sorted(skip)}{refit})")
    opt = torch.optim.AdamW(model.parameters(), lr=args.cnn_lr, weight_decay=1e-4)
    steps_per_epoch = (len(train) * args.patches_per_clip) // args.cnn_batch
    total = steps_per_epoch * args.cnn_epochs
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, args.cnn_lr, total_steps=total,
                                                pct_start=0.15)

    def draw_batch(idx):
        """One training batch of the clips idx: a patch of each at a random frame offset,
        augmented; the patches, their labels and the smoothed soft targets, as tensors."""
        xb = np.empty((len(idx), PATCH, N_MELS), np.float32)
        for j, i in enumerate(idx):
            xb[j] = draw_patch(mels[i], rng)
        if args.augment:
            xb, yb = augment(xb, y[idx], mels, y, silence, rng, args.quiet_frac, clip_db[idx])
        else:
            yb = y[idx]
        target = np.eye(len(labels), dtype=np.float32)[yb]
        target = torch.from_numpy(target) * 0.95 + 0.05 / len(labels)  # label smoothing
        return torch.from_numpy(xb), torch.from_numpy(yb), target

    for epoch in range(args.cnn_epochs):
        t0 = time.time()
        # each epoch: patches_per_clip patches per clip at random frame offsets
        if args.group_balance:
            # clips drawn with probability ~ 1 / sqrt(clips of its group) within each class,
            # classes equally likely: recordings with many clips count less, rare ones more
            ci = rng.choice(len(train), size=len(train) * args.patches_per_clip, p=draw_p)
        else:
            ci = np.repeat(np.arange(len(train)), args.patches_per_clip)
            rng.shuffle(ci)
        model.train()
        correct = seen = 0
        loss_sum = 0.0
        for s in range(steps_per_epoch):
            idx = ci[s * args.cnn_batch:(s + 1) * args.cnn_batch]
            xb, yb, target = draw_batch(idx)
            logits = model(xb)
            loss = -(target * F.log_softmax(logits, 1)).sum(1)
            if teachers:
                w = args.distill_weight * torch.from_numpy(taught[idx])
                loss = (1.0 - w) * loss + w * distillation_loss(logits, xb, teachers,
                                                                 args.distill_temp, reduce=False)
            loss = loss.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.item() * len(idx)
            correct += (logits.argmax(1) == yb).sum().item()
            seen += len(idx)
        log(f"cnn epoch {epoch + 1}/{args.cnn_epochs}: loss {loss_sum / seen:.4f} "
            f"train patch acc {correct / seen:.3f} ({time.time() - t0:.0f} s)")
    model.eval()
    if args.batch_norm:
        model.cnn = fold_batch_norm(model.cnn)     # the plain layout: cnn.pt and the file agree
    # export first: with --cnn-f16 it rounds the weights in place, and cnn.pt must hold
    # the function the file computes (the embed stage checks one against the other)
    export_cnn(model.cnn, os.path.join(args.models, "vggish.safetensors"), args.cnn_f16)
    torch.save({"state_dict": model.state_dict(), "conv": conv, "fc": fc,
                "center_height": bool(args.center_bands)},
               os.path.join(args.work, "cnn.pt"))


def load_patch_classifier(work, classes):
    """The per-patch classifier (CNN and its training head) an earlier run left in
    WORK/cnn.pt, in eval mode, for use as a teacher."""
    ck = torch.load(os.path.join(work, "cnn.pt"))
    if "head.weight" not in ck["state_dict"]:
        raise ValueError(f"{work}/cnn.pt has no classifier head (a packed CNN?): not a teacher")
    m = PatchClassifier(ck["conv"], ck["fc"], classes, 0.0, ck.get("center_height", False))
    m.load_state_dict(ck["state_dict"])
    return m.eval()


def distillation_mask(train, skip_families):
    """Per train clip, 1 if it learns from the teachers too, 0 if from its label only: the
    clips of families the teachers never heard the like of (skip_families), and the refit
    clips of the recordings they were trained without (refit_on_validation)."""
    return np.array([r.get("family", "") not in skip_families and not r.get("refit")
                     for r in train], np.float32)


def distillation_loss(logits, xb, teachers, temp, reduce=True):
    """Knowledge distillation from an ensemble (Hinton et al. 2015): the teachers see the
    same augmented patches; the target is the mean of their softened distributions
    (softmax at temperature temp), the loss the cross-entropy against the student's
    softened distribution, times temp^2 so its gradient keeps the hard loss's scale.
    reduce=False: one loss per patch."""
    with torch.no_grad():
        target = torch.stack([F.softmax(t(xb) / temp, 1) for t in teachers]).mean(0)
    per_patch = -(target * F.log_softmax(logits / temp, 1)).sum(1) * temp * temp
    return per_patch.mean() if reduce else per_patch


def export_cnn(cnn, path, f16=False):
    """The CNN as a safetensors file libcony loads; f16: every tensor stored as F16, after
    rounding the torch weights to F16 in place, so that torch and the file compute the same
    function (half the bytes; libcony keeps the FC weights in F16)."""
    if f16:
        with torch.no_grad():
            for v in cnn.parameters():
                v.copy_(v.half().float())
    tensors = {k: v.detach().float().numpy() for k, v in cnn.state_dict().items()}
    meta = {"architecture": "vggish", "input_height": str(PATCH), "input_width": str(N_MELS),
            "input_channels": "1", "final_relu": "false",
            "center_height": "true" if cnn.center_height else "false",
            "frontend": json.dumps(FRONTEND, separators=(",", ":"))}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    safetensors_io.save(path, tensors, meta, dtypes={k: "F16" for k in tensors} if f16 else None)
    log(f"wrote {path} ({os.path.getsize(path)} bytes)")


def load_cnn(work):
    ck = torch.load(os.path.join(work, "cnn.pt"))
    cnn = VGGishLike(ck["conv"], ck["fc"], final_relu=False,
                     center_height=ck.get("center_height", False))
    cnn.load_state_dict({k[4:]: v for k, v in ck["state_dict"].items() if k.startswith("cnn.")})
    return cnn.eval()


def stage_pack(args):
    """An ensemble of CNNs trained by earlier runs (--pack WORK1,WORK2,...: their work
    directories, same layout, same validation split) packed side by side into one
    VGGish-layout CNN (cnn.vggish.pack_side_by_side): the token is their embeddings
    concatenated. Written like stage_cnn's output (WORK/cnn.pt, MODELS/vggish.safetensors)."""
    works = args.pack.split(",")
    packed = pack_side_by_side([load_cnn(w) for w in works])
    conv, fc = layout(packed)
    export_cnn(packed, os.path.join(args.models, "vggish.safetensors"), args.cnn_f16)
    torch.save({"state_dict": {"cnn." + k: v for k, v in packed.state_dict().items()},
                "conv": conv, "fc": fc, "packed_from": works,
                "center_height": packed.center_height},
               os.path.join(args.work, "cnn.pt"))
    n = sum(p.numel() for p in packed.parameters())
    log(f"pack: {len(works)} CNNs ({', '.join(works)}) side by side: conv {conv} fc {fc}, "
        f"{n} parameters")


# ----------------------------------------------------------------------------- embed
def stage_embed(args, rows):
    t0 = time.time()
    model_path = os.path.join(args.models, "vggish.safetensors")
    for r in rows:
        out = npy_path(args.work, "tokens", r["path"])
        os.makedirs(os.path.dirname(out), exist_ok=True)
        run([args.cony, "embed", "--drop-tail", "--model", model_path, "--stride", str(STRIDE),
             os.path.join(args.dataset, r["path"]), "-o", out])
    # the C embeddings against the torch CNN on a few clips
    cnn = load_cnn(args.work)
    worst = 0.0
    for r in rows[::97]:
        m = np.load(npy_path(args.work, "mel", r["path"]))
        starts = range(0, m.shape[0] - PATCH + 1, STRIDE)
        with torch.no_grad():
            e = cnn(torch.from_numpy(np.stack([m[s:s + PATCH] for s in starts]))).numpy()
        c = np.load(npy_path(args.work, "tokens", r["path"]))
        if c.shape != e.shape:
            raise RuntimeError(f"cony embed {r['path']}: shape {c.shape}, torch {e.shape}")
        worst = max(worst, float(np.abs(c - e).max() / (np.abs(e).max() + 1e-9)))
    log(f"embed: {len(rows)} clips through cony embed ({time.time() - t0:.0f} s); "
        f"relative max |C - torch| {worst:.2e}")
    if worst > 1e-3:
        raise RuntimeError("cony embed disagrees with the torch CNN")


# ----------------------------------------------------------------------------- transformer
def pair_sequences(tokens, y, count, same_frac, rng):
    """count sequences, each two clips' token sequences joined, with per-token labels.
    same_frac of them join two clips of the same class."""
    L = tokens[0].shape[0]
    by_class = {c: np.flatnonzero(y == c) for c in np.unique(y)}
    xs = np.empty((count, 2 * L, tokens[0].shape[1]), np.float32)
    ys = np.empty((count, 2 * L), np.int64)
    for i in range(count):
        a = int(rng.integers(len(tokens)))
        if rng.random() < same_frac:
            b = int(rng.choice(by_class[y[a]]))
        else:
            b = int(rng.integers(len(tokens)))
        xs[i] = np.concatenate([tokens[a], tokens[b]])
        ys[i, :L] = y[a]
        ys[i, L:] = y[b]
    return xs, ys


class CorruptedWindows:
    """Wraps a WindowSampler: in every training window each token is, with probability p,
    replaced by a token drawn from any train clip (any class), and the window keeps its
    label. The CNN gets its own train clips nearly all right, so clean train tokens teach
    the encoder to trust the newest token; on unseen recordings single tokens are often
    wrong, and the window has to outvote them."""

    def __init__(self, sampler, pool, p, seed):
        self.sampler, self.pool, self.p = sampler, pool, p
        self.rng = np.random.default_rng([seed, 5])

    def batch(self, size):
        x, off, y = self.sampler.batch(size)
        if self.p > 0:
            hit = self.rng.random(x.shape[:2]) < self.p
            k = int(hit.sum())
            if k:
                x = x.clone()
                x[torch.from_numpy(hit)] = torch.from_numpy(
                    self.pool[self.rng.integers(0, len(self.pool), k)])
        return x, off, y


def stage_tf(args, rows, labels):
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed + 1)
    train = [r for r in rows if r["split"] == "train"]
    tokens = [np.load(npy_path(args.work, "tokens", r["path"])) for r in train]
    lens = {t.shape[0] for t in tokens}
    if len(lens) != 1:
        raise RuntimeError(f"clips give different token counts {sorted(lens)}")
    y = np.array([labels.index(r["label"]) for r in train])
    x, yy = pair_sequences(tokens, y, args.pairs, args.same_frac, rng)
    E = x.shape[2]
    model = ConyEncoderClassifier(E, args.d, args.heads, args.ff, 1, args.window,
                                  args.landmarks, "cony", labels,
                                  positional_encoding="learned", frontend=FRONTEND,
                                  dropout=args.tf_dropout)
    T = model.config["positional_rows"]
    sampler = WindowSampler(x, yy, args.window, T, args.warmup_fraction, args.seed)
    if args.token_swap > 0:
        sampler = CorruptedWindows(sampler, np.concatenate(tokens), args.token_swap, args.seed)
    log(f"transformer: d {args.d} heads {args.heads} ff {args.ff} n {args.window} "
        f"m {args.landmarks}; {len(x)} paired sequences of {x.shape[1]} tokens")
    train_epochs(model, sampler, args.tf_epochs, args.tf_batches, args.tf_batch, args.tf_lr,
                 1e-4, log=log)
    os.makedirs(args.models, exist_ok=True)
    model.eval()
    save_checkpoint(model, os.path.join(args.work, "transformer_cony.pt"))
    export_model(model, os.path.join(args.work, "transformer_cony.safetensors"))
    fit_block_landmarks(model, sampler, 0, args.kmeans_windows, seed=args.seed)
    log(f"fixed landmarks by k-means (m = {args.landmarks}, {args.heads} heads); fine-tuning "
        f"as cony-fixed")
    train_epochs(model, sampler, args.finetune_epochs, args.tf_batches, args.tf_batch,
                 args.tf_lr * 0.3, 1e-4, log=log)
    model.eval()
    save_checkpoint(model, os.path.join(args.work, "transformer.pt"))
    path = os.path.join(args.models, "transformer.safetensors")
    export_model(model, path)
    with open(os.path.join(args.models, "labels.txt"), "w") as f:
        f.write("\n".join(labels) + "\n")
    log(f"wrote {path} ({os.path.getsize(path)} bytes), labels.txt")


# ----------------------------------------------------------------------------- validation
def stage_val(args, rows, labels):
    """Per-step accuracy on the validation split (train-split groups held out by
    carve_validation) through the C path (`cony classify` on the `cony embed` tokens, the
    trained variant), full-window steps, per class and origin -> WORK/val.json."""
    val = [r for r in rows if r["split"] == "val"]
    if not val:
        log("val: no validation split (--val-frac 0, or --train-on-val)")
        return
    model = os.path.join(args.models, "transformer.safetensors")
    n = args.window
    stats = {}
    tmp = os.path.join(args.work, "val-logits.npy")
    for r in val:
        run([args.cony, "classify", "--model", model, npy_path(args.work, "tokens", r["path"]),
             "-o", tmp])
        pred = np.load(tmp).argmax(1)[n - 1:]
        ok = int((pred == labels.index(r["label"])).sum())
        for key in ((r["origin"], r["label"]), (r["origin"], "all")):
            a = stats.setdefault("%s/%s" % key, [0, 0])
            a[0] += ok
            a[1] += len(pred)
    out = {k: {"correct": v[0], "steps": v[1], "accuracy": v[0] / v[1]} for k, v in sorted(stats.items())}
    for origin in ("real", "synth"):
        # every class weighs the same, whatever its number of steps (with --val-scope all
        # the quiet recordings' extra clips would make silence a third of the real steps)
        per = [out[f"{origin}/{c}"]["accuracy"] for c in labels if f"{origin}/{c}" in out]
        if per:
            out[f"{origin}/class-mean"] = {"accuracy": float(np.mean(per)), "classes": len(per)}
    with open(os.path.join(args.work, "val.json"), "w") as f:
        json.dump(out, f, indent=1)
    for origin in ("real", "synth"):
        parts = ["%s %.1f%%" % (c, 100 * out["%s/%s" % (origin, c)]["accuracy"])
                 for c in labels if "%s/%s" % (origin, c) in out]
        if "%s/all" % origin in out:
            log(f"val ({origin}, full-window steps, {len([r for r in val if r['origin'] == origin])} "
                f"clips): {100 * out[origin + '/all']['accuracy']:.1f} %, class mean "
                f"{100 * out[origin + '/class-mean']['accuracy']:.1f} % | " + ", ".join(parts))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="out/audio-dataset-v7")
    ap.add_argument("--cony", default="build-train/tools/cony")
    ap.add_argument("--work", default="out/train-audio")
    ap.add_argument("--models", default="out/train-audio/models",
                    help="where the pair goes (models/audio/ holds E53 now: not by default)")
    ap.add_argument("--stages", default="mel,cnn,embed,tf,val")
    ap.add_argument("--seed", type=int, default=20261121)
    ap.add_argument("--train-seed", type=int, default=11,
                    help="seed of the CNN and transformer training only (11: the seed the validation "
                         "split chose for the shipped model, see MODEL.md; --seed fixes the split)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1 or 2; the shipped model was trained with 1)")
    ap.add_argument("--val-frac", type=float, default=0.15,
                    help="share of each family's train groups held out as the validation split")
    ap.add_argument("--val-scope", choices=("base", "all"), default="base",
                    help="which families the validation split is carved from: the first "
                         "families only (base: the shipped model's split) or also those used "
                         "for training only (all: more noise and alarm recordings)")
    ap.add_argument("--val-from", default="",
                    help="DATASET: hold out the validation recordings that --val-scope carves "
                         "from that data set (same seed and share) instead of carving this one: "
                         "every clip of them here is a validation clip")
    ap.add_argument("--train-on-val", action="store_true",
                    help="refit: train on the validation recordings too, once the recipe has "
                         "been chosen on them (refit_on_validation; nothing is left to validate "
                         "on); with --distill their clips learn from their labels only, since "
                         "the teachers were trained without them")
    # CNN
    ap.add_argument("--conv", default="16,32,48,48,64,64")
    ap.add_argument("--fc", default="128,128")
    ap.add_argument("--embed", type=int, default=32, help="embedding size E (token size)")
    ap.add_argument("--cnn-epochs", type=int, default=14)
    ap.add_argument("--patches-per-clip", type=int, default=3)
    ap.add_argument("--cnn-batch", type=int, default=64)
    ap.add_argument("--cnn-lr", type=float, default=3e-3)
    ap.add_argument("--cnn-dropout", type=float, default=0.3)
    ap.add_argument("--no-augment", dest="augment", action="store_false")
    ap.add_argument("--group-balance", type=int, default=1,
                    help="1: draw CNN patches balanced by class and source group (see stage_cnn)")
    ap.add_argument("--quiet-frac", type=float, default=0.05,
                    help="share of non-silence patches scaled to -90..-58 dBFS and labelled silence")
    ap.add_argument("--cnn-f16", type=int, default=0,
                    help="1: store the CNN's weights as F16 (rounded; see export_cnn)")
    ap.add_argument("--pack", default="",
                    help="stage pack: comma-separated work directories of earlier runs whose "
                         "CNNs are packed side by side into this run's CNN (stage_pack)")
    ap.add_argument("--distill", default="",
                    help="comma-separated work directories of earlier runs whose per-patch "
                         "classifiers (WORK/cnn.pt) teach this run's CNN (distillation_loss; "
                         "empty = off)")
    ap.add_argument("--distill-weight", type=float, default=0.7,
                    help="weight of the distillation loss (the hard-label loss gets 1 - it)")
    ap.add_argument("--distill-temp", type=float, default=2.0,
                    help="softmax temperature of the distillation loss")
    ap.add_argument("--center-bands", type=int, default=0,
                    help="1: the CNN sees each mel band minus its mean over the patch (center_height "
                         "in the exported file), so a recording's colouration and level per band "
                         "does not reach it")
    ap.add_argument("--batch-norm", type=int, default=0,
                    help="1: batch normalisation after every convolution while training, folded "
                         "into the convolutions at export (the file has the plain layout)")
    ap.add_argument("--distill-skip-families", default="synth_music",
                    help="comma-separated manifest families whose clips learn from their labels "
                         "only (the teachers never heard such clips)")
    # transformer
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--ff", type=int, default=64)
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--landmarks", type=int, default=4)
    ap.add_argument("--pairs", type=int, default=4000)
    ap.add_argument("--same-frac", type=float, default=0.5)
    ap.add_argument("--warmup-fraction", type=float, default=0.25)
    ap.add_argument("--tf-epochs", type=int, default=12)
    ap.add_argument("--finetune-epochs", type=int, default=4)
    ap.add_argument("--tf-batches", type=int, default=100)
    ap.add_argument("--tf-batch", type=int, default=64)
    ap.add_argument("--tf-lr", type=float, default=2e-3)
    ap.add_argument("--tf-dropout", type=float, default=0.1)
    ap.add_argument("--token-swap", type=float, default=0.25,
                    help="share of the tokens of each transformer training window replaced by "
                         "a random train token (CorruptedWindows; 0 = off, the models before "
                         "data set version 5)")
    ap.add_argument("--kmeans-windows", type=int, default=512)
    args = ap.parse_args()

    torch.set_num_threads(max(1, min(2, args.threads)))
    rows, labels = read_manifest(args.dataset)
    if args.val_from:
        rows = carve_validation_groups(
            rows, validation_groups_of(args.val_from, args.val_frac, args.seed, args.val_scope))
    else:
        rows = carve_validation(rows, args.val_frac, args.seed, args.val_scope)
    if args.train_on_val:
        rows = refit_on_validation(rows)
    if args.train_seed is not None:
        args.seed = args.train_seed       # the validation split is fixed; training varies
    os.makedirs(args.work, exist_ok=True)
    stages = args.stages.split(",")
    t0 = time.time()
    if "mel" in stages:
        stage_mel(args, rows)
    if "cnn" in stages:
        stage_cnn(args, rows, labels)
    if "pack" in stages:
        stage_pack(args)
    if "embed" in stages:
        stage_embed(args, rows)
    if "tf" in stages:
        stage_tf(args, rows, labels)
    if "val" in stages:
        stage_val(args, rows, labels)
    log(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
