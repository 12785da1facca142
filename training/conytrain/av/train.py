"""Training and evaluating the fused audio-video model (models/av/) and its single-sense
baselines on the token caches of build.py.

Streams are scenes joined by hard cuts (both senses cut at once): a scene is one class,
6 to 24 steps (1.5 to 6 s at 4 steps a second), its audio a run of one clip's tokens of
that class, its video a run of one or two camera shots of photographs of that class. For
the fused model each training scene is, at random, left clean or has one sense absent
(a muted microphone, an unplugged camera: its flags 0), noisy (Gaussian noise on its
tokens) or contradicting (that sense, one of --contra-senses, from a scene of another
class; the label stays the scene's, from the other sense); single steps lose a sense too (conytrain.fusion_train's
DropSampler). The single-sense models see their sense of the same scenes, with the same
noise, never absent.

Evaluation: fixed test streams of clean scenes (test clips and test photographs only);
per-step top-1 accuracy of the fused model with both senses, with audio only (the video
flagged absent at every step) and with video only, and of the single-sense models on the
same steps.
"""

import copy
import json
import os
import subprocess
import tempfile

import numpy as np
import torch

from conytrain import train as ctrain
from conytrain.av import sources
from conytrain.av.readout import compose
from conytrain.fusion_train import DropSampler, PackedModel
from conytrain.ref.fusion import FusedClassifier

SCENE = (6, 24)                     # scene length in steps
AUDIO_SIZE, VIDEO_SIZE = 1024, 1280


def load(work, split):
    z = np.load(os.path.join(work, f"tokens-{split}.npz"))
    return {k: z[k] for k in z.files}


class SceneSampler:
    """Packed windows (FusedClassifier.pack layout) of random scene streams.

    senses: ("audio", "video") for the fused model, ("audio",) or ("video",) for a
    single-sense one; p: per-scene probabilities of absent / noisy / contradicting per
    sense (absent and contradicting only with two senses)."""

    def __init__(self, data, senses, window, positional_rows, p_absent=0.15, p_noisy=0.1,
                 p_contra=0.1, noise=(0.5, 1.5), warmup_fraction=0.1, seed=0,
                 contra_senses=("audio", "video"), p_window=0.0, p_degraded=0.0):
        self.d, self.senses = data, tuple(senses)
        self.p_degraded = p_degraded if "audio" in self.senses else 0.0
        if self.p_degraded > 0 and "audio_degraded" not in data:
            raise ValueError("p_degraded needs data['audio_degraded'] (build.degrade_split)")
        self.p_window = p_window
        self.contra_senses = tuple(contra_senses)
        self.n, self.T, self.warm = window, positional_rows, warmup_fraction
        self.p_absent, self.p_noisy, self.p_contra, self.noise = p_absent, p_noisy, p_contra, noise
        self.rng = np.random.default_rng(seed)
        self.by_class = {s: [np.nonzero(data[f"{s}_cls"] == c)[0] for c in sources.CLASSES]
                         for s in ("audio", "video")}
        for s in self.senses:
            for c, idx in zip(sources.CLASSES, self.by_class[s]):
                if len(idx) == 0:
                    raise ValueError(f"no {s} tokens of class {c}")
        self.std = {s: data[s].reshape(-1, data[s].shape[-1]).std(0) for s in ("audio", "video")}

    def span(self, sense, cls, L, degraded=False):
        """L consecutive tokens of `sense` of class cls (two runs joined when one clip or
        shot is shorter than L: a camera cut inside the scene); degraded: the sound from
        a degraded copy of its clip (rule 11)."""
        out, need = [], L
        while need > 0:
            idx = self.by_class[sense][cls]
            i = idx[self.rng.integers(len(idx))]
            copies = self.d.get("audio_degraded")
            seq = (copies[self.rng.integers(len(copies))][i] if degraded else self.d[sense][i])
            k = min(need, len(seq))
            t0 = int(self.rng.integers(0, len(seq) - k + 1))
            out.append(seq[t0:t0 + k])
            need -= k
        return np.concatenate(out)

    def scene(self, cls, L, corrupt=True, gone=None):
        """tokens {sense: (L, size)}, present {sense: (L,) bool} of one scene of class cls;
        gone: a sense absent for the whole window (then no sense contradicts: the one
        left is the truth)."""
        deg = self.p_degraded > 0 and corrupt and self.rng.random() < self.p_degraded
        tok = {s: self.span(s, cls, L, deg and s == "audio") for s in self.senses}
        present = {s: np.ones(L, bool) for s in self.senses}
        if gone is not None:
            present[gone][:] = False
        if not corrupt:
            return tok, present
        two = len(self.senses) == 2
        u = self.rng.random()
        if gone is not None:
            pass
        elif two and u < 2 * self.p_absent:                  # one sense absent
            present[self.senses[int(u < self.p_absent)]][:] = False
        elif two and u < 2 * self.p_absent + self.p_contra:  # one sense contradicts
            s = self.contra_senses[int(self.rng.integers(len(self.contra_senses)))]
            other = (cls + 1 + int(self.rng.integers(len(sources.CLASSES) - 1))) % len(sources.CLASSES)
            tok[s] = self.span(s, other, L)
        for s in self.senses:
            if self.rng.random() < self.p_noisy:
                sigma = self.rng.uniform(*self.noise)
                tok[s] = tok[s] + sigma * self.std[s] * self.rng.standard_normal(tok[s].shape)
        return tok, present

    def stream(self, length, corrupt=True, gone=None):
        """A stream of scenes: tokens, present, labels (length,) int."""
        toks = {s: [] for s in self.senses}
        pres = {s: [] for s in self.senses}
        labels, total = [], 0
        while total < length:
            cls = int(self.rng.integers(len(sources.CLASSES)))
            L = int(self.rng.integers(SCENE[0], SCENE[1] + 1))
            t, p = self.scene(cls, L, corrupt, gone)
            for s in self.senses:
                toks[s].append(t[s])
                pres[s].append(p[s])
            labels.append(np.full(L, cls))
            total += L
        cut = lambda a: np.concatenate(a)[total - length:]   # the stream's last `length` steps
        return ({s: cut(toks[s]).astype(np.float32) for s in self.senses},
                {s: cut(pres[s]) for s in self.senses}, cut(labels))

    def batch(self, size):
        warm = self.n > 1 and self.rng.random() < self.warm
        w = int(self.rng.integers(1, self.n)) if warm else self.n
        xs, offs, ys = [], [], []
        for _ in range(size):
            gone = None
            if self.p_window > 0 and self.rng.random() < self.p_window:   # (run 1 drew none)
                gone = self.senses[int(self.rng.integers(2))]
            tok, pres, lab = self.stream(w, gone=gone)
            xs.append(pack(tok, pres, self.senses))
            offs.append(0 if warm else int(self.rng.integers(0, self.T)))
            ys.append(lab[-1])
        return (torch.from_numpy(np.stack(xs)), torch.tensor(offs, dtype=torch.long),
                torch.tensor(ys, dtype=torch.long))


def pack(tok, pres, senses):
    """FusedClassifier.pack in numpy: tokens (zeros where absent), then the flags."""
    parts = [np.where(pres[s][:, None], tok[s], 0).astype(np.float32) for s in senses]
    return np.concatenate(parts + [pres[s][:, None].astype(np.float32) for s in senses], 1)


def sha256(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def make_model(senses, args, video_size=VIDEO_SIZE, gate=None):
    continual = getattr(args, "audio_mode", "window") == "continual"
    cnn = {"audio": (AUDIO_SIZE, [25, 8] if continual else [4, 1], 1000, args.audio_cnn),
           "video": (video_size, [10, 1], 500, args.video_cnn)}
    inputs = [dict(name=s, size=cnn[s][0], rate=cnn[s][1], tolerance_ms=cnn[s][2],
                   cnn=os.path.basename(cnn[s][3]), cnn_sha256=sha256(cnn[s][3]),
                   cnn_output="embedding") for s in senses]
    for i in inputs:   # rule 14: conyfuse refuses tokens of the other mode
        if i["name"] == "audio" and continual:
            i["cnn_mode"] = "continual"
    torch.manual_seed(args.train_seed)
    return FusedClassifier(inputs, [4, 1], gate, d=args.d, heads=args.heads, ff=args.ff, blocks=1,
                           window=args.window, landmarks=args.landmarks, attention="cony",
                           labels=sources.CLASSES, dropout=args.dropout)


def train_one(senses, data, args, log, readout=None, start=None):
    """The model of @senses trained on @data; with a video sense and a @readout
    (readout.Readout), trained on its scores and composed back onto the video tokens.
    @start: a trained single-sense FusedClassifier the model starts from (start_from())."""
    def initial(video_size=VIDEO_SIZE):
        model = make_model(senses, args, video_size)
        if start is not None:
            start_from(model, start, log)
        return model

    if readout is not None and "video" in senses:
        small = train_on(initial(len(sources.CLASSES)), readout.training_data(data), senses,
                         args, log)
        big = compose(small, make_model(senses, args), readout)
        check_composed(small, big, readout, data, senses, log)
        return big
    return train_on(initial(), data, senses, args, log)


@torch.no_grad()
def start_from(model, single, log):
    """Loads a trained single-sense model @single into the fused @model (models/av/
    EXPERIMENTS.md, rule 10): the encoder, classifier and position rows as they are; of
    the input projection, the sense's token and flag columns and the bias; the sense's
    absent token. The other sense's columns start at zero, so with it present or absent
    the model starts out giving the single-sense model's logits."""
    (name,) = single.names
    if name not in model.names:
        raise ValueError(f"start model's input {name!r} is not one of {model.names}")
    dst, src = model.state_dict(), single.state_dict()
    for k, v in src.items():
        if k == "encoder.input_proj.weight" or k.startswith("absent."):
            continue
        if k not in dst or dst[k].shape != v.shape:
            raise ValueError(f"start model's {k} {tuple(v.shape)} does not fit the fused "
                             f"model ({tuple(dst[k].shape) if k in dst else 'absent'})")
        dst[k].copy_(v)
    w, sw = dst["encoder.input_proj.weight"], src["encoder.input_proj.weight"]
    i = model.names.index(name)
    at, size = sum(model.sizes[:i]), model.sizes[i]
    w.zero_()
    w[:, at:at + size] = sw[:, :size]
    w[:, sum(model.sizes) + i] = sw[:, size]
    dst[f"absent.{name}"].copy_(src[f"absent.{name}"])
    log(f"fused model starts from the trained {name} model")


def train_on(model, data, senses, args, log):
    T = model.config["positional_rows"]
    two = len(senses) == 2
    sampler = SceneSampler(data, senses, args.window, T, p_absent=args.p_absent if two else 0,
                           p_contra=args.p_contra if two else 0, p_noisy=args.p_noisy,
                           seed=args.train_seed, contra_senses=args.contra_senses.split(","),
                           p_window=args.p_window if two and args.truthful_window else 0.0,
                           p_degraded=getattr(args, "p_degraded", 0.0))
    if two:   # whole windows here or in the scene sampler (--truthful-window)
        sampler = DropSampler(sampler, model, p_step=args.p_step, seed=args.train_seed,
                              p_window=0.0 if args.truthful_window else args.p_window)
    ctrain.train_epochs(PackedModel(model), sampler, args.epochs, args.batches, args.batch,
                        args.lr, args.weight_decay, log=log, lr_final=args.lr * 0.01,
                        label_smoothing=0.1, grad_clip=1.0)
    return model.eval()


def check_composed(small, big, readout, data, senses, log, tolerance=1e-4):
    """The composed model on tokens = the read-out model on their scores, with every
    sense present and with each absent (rule 7)."""
    tok, _, _ = SceneSampler(data, senses, 1, 1, seed=0).stream(96, corrupt=False)
    raw = {s: torch.from_numpy(tok[s]).double() for s in senses}
    sc = dict(raw)
    if "video" in sc:
        sc["video"] = torch.from_numpy(readout.scores(tok["video"], np.float64))
    small64, big64 = copy.deepcopy(small).double(), copy.deepcopy(big).double()
    worst = 0.0
    for gone in (None,) + (tuple(senses) if len(senses) == 2 else ()):
        pres = {s: torch.full((96,), s != gone) for s in senses}
        d = (small64.stream_logits(sc, pres) - big64.stream_logits(raw, pres)).abs().max().item()
        worst = max(worst, d)
    log(f"composed onto the video tokens: logits within {worst:.2e} of the read-out model's "
        "(float64)")
    if worst > tolerance:
        raise RuntimeError(f"composed model differs by {worst:.2e} (> {tolerance})")


def test_streams(data, count, length, seed):
    """Fixed clean test streams: [(tokens {audio, video}, labels)]."""
    s = SceneSampler(data, ("audio", "video"), 1, 1, seed=seed)
    out = []
    for _ in range(count):
        tok, _, lab = s.stream(length, corrupt=False)
        out.append((tok, lab))
    return out


class CPath:
    """Per-step top-1 of a model in the C path: the model exported to WORK, each stream's
    fused tokens (FusedClassifier.join: an absent input's learned token and flag 0, as
    conyfuse emits them) through `cony classify` (the continual encoder conytransformer
    runs; tests/models/test_av_model.sh checks it equals the PyTorch twin)."""

    def __init__(self, cony, work):
        self.cony, self.work = cony, work

    @torch.no_grad()
    def tops(self, model, streams, present_senses):
        from conytrain.export import export_model
        tops = []
        # files of this call only: two evaluations may share WORK
        with tempfile.TemporaryDirectory(dir=self.work, prefix="eval-") as tmp:
            path = os.path.join(tmp, "model.safetensors")
            export_model(model, path)
            x, out = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
            for tok, lab in streams:
                L = len(lab)
                t = {n: torch.from_numpy(tok[n]) for n in model.names}
                p = {n: torch.full((L,), n in present_senses, dtype=torch.bool) for n in model.names}
                np.save(x, model.join(t, p).numpy().astype(np.float32))
                subprocess.run([self.cony, "classify", "-m", path, "-o", out, x], check=True)
                tops.append(np.load(out).argmax(-1))
        return np.concatenate(tops)


class RefPath:
    """CPath's per-step top-1 through the PyTorch twin in float64 (stream_logits)."""

    @torch.no_grad()
    def tops(self, model, streams, present_senses):
        m = copy.deepcopy(model).double()
        tops = []
        for tok, lab in streams:
            t = {n: torch.from_numpy(tok[n]).double() for n in m.names}
            p = {n: torch.full((len(lab),), n in present_senses, dtype=torch.bool) for n in m.names}
            tops.append(m.stream_logits(t, p).argmax(-1).numpy())
        return np.concatenate(tops)


def scores(top, streams):
    """(accuracy, {class: accuracy on its steps}) of per-step top-1 against the streams."""
    lab = np.concatenate([lab for _, lab in streams])
    return float((top == lab).mean()), {
        name: float((top[lab == c] == c).mean()) for c, name in enumerate(sources.CLASSES)}


ROWS = [("fused, both senses", "fused", ("audio", "video")),
        ("fused, audio only", "fused", ("audio",)),
        ("fused, video only", "fused", ("video",)),
        ("audio model", "audio", ("audio",)),
        ("video model", "video", ("video",))]


def evaluate(models, streams, cpath):
    """The card's table: {row: accuracy, "per class": {row: {class: accuracy}}}, of the
    rows whose kind of model is in @models."""
    out, per = {}, {}
    for row, kind, senses in ROWS:
        if kind not in models:
            continue
        out[row], per[row] = scores(cpath.tops(models[kind], streams, senses), streams)
    out["per class"] = per
    return out


def save_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
