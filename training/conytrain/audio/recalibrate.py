"""Recalibrating a MobileNet-v1 (YAMNet) for continual inference (issue 61,
docs/continual-cnn.md, "Recalibrated for continual inference").

Per window, every time position of YAMNet's maps is near a window edge: its deepest
layers read far past the 96 frames, and what they read there is SAME padding's zeros. Run
continually, the same layers read real rows instead, and their pre-activations drift:
each layer's per-channel mean and spread differ a little from what the next layer was
trained on. Through 27 layers and ReLU6 that drift adds up: the pooled embeddings of the
two modes have cosine 0.26 on real recordings.

This module matches moments, layer by layer: for each channel c of time layer l, with
(m_w, s_w) the mean and standard deviation of its pre-activation (conv + bias, before
ReLU6) over per-window patches and (m_c, s_c) the same over continual streams whose
earlier layers are already recalibrated,

    z' = a (z - m_c) + m_w,   a = s_w / s_c

which is the same layer with its output channel's weights times a and its bias a (b -
m_c) + m_w. On a file with int8 weights only the per-channel weight scale changes (the
codes stay), the float bias too, and its TFLite int32 bias is written beside it, as the
adapted layers' are. libcony runs the result unchanged, per window or
continually; only continual inference is meant to use it.

    fits = fit(net, streams, hop=32)          # streams: log-mel frames (T, 64) each
    tensors, meta = apply(tensors, meta, fits, note)

    /usr/bin/python3 training/recalibrate_continual.py --cnn models/audio/yamnet-adapted.safetensors \
        --dataset out/audio-dataset-v9 --per-class 50 --out yamnet-recalibrated.safetensors

The statistics come from the clips of one split of a data set (train: the clips the
classifier trains on; never the held-out ones), each clip its own stream, log-mel by the
file's own front end (conytrain.audio.mel, float64).
"""

import argparse
import csv
import json
import os
import random

import numpy as np

from conytrain import safetensors_io
from conytrain.audio import adapt, mel, other
from conytrain.audio.own import sha256
from conytrain.ref import continual_cnn, mobilenet

# A channel whose continual spread is below this (dead under ReLU6's input range) keeps
# its scale: only its mean is moved.
MIN_STD = 1e-3


class Moments:
    """Per-channel count, sum and sum of squares, float64."""

    def __init__(self):
        self.n, self.s, self.ss = 0, 0.0, 0.0

    def add(self, z):
        z = z.reshape(-1, z.shape[-1]).astype(np.float64)
        self.n += z.shape[0]
        self.s = self.s + z.sum(0)
        self.ss = self.ss + (z * z).sum(0)

    def mean_std(self):
        m = self.s / self.n
        return m, np.sqrt(np.maximum(self.ss / self.n - m * m, 0.0))


def time_layers(net):
    """The (word, weight, bias) of the layers before the global pool."""
    n = len(continual_cnn.geometry(net)[2])
    return net["layers"][:n]


def pre_window(word, x, wt, b):
    """A layer's pre-activation on one window's map, SAME padding at both ends."""
    if word.startswith("conv3x3"):
        return mobilenet.conv3x3(x, wt, b, int(word[-1]))
    if word.startswith("dw3x3"):
        return mobilenet.depthwise3x3(x, wt, b, int(word[-1]))
    return np.einsum("yxi,oi->yxo", x, wt[:, :, 0, 0]) + b


def window_moments(net, streams, hop):
    """Moments of every time layer's pre-activation over the windows every `hop` frames
    of each stream (window mode at that stride)."""
    h, w, c = net["input"]
    layers = time_layers(net)
    acc = [Moments() for _ in layers]
    for frames in streams:
        for start in range(0, len(frames) - h + 1, hop):
            x = np.asarray(frames[start:start + h], dtype=np.float64).reshape(h, w, c)
            for moments, (word, wt, b) in zip(acc, layers):
                z = pre_window(word, x, wt, b)
                moments.add(z)
                x = np.clip(z, 0.0, net["relu_max"])
    return acc


def fit(net, streams, hop, window=None):
    """Per time layer (a, m_c, m_w): the recalibration that gives each layer's continual
    pre-activation (its earlier layers recalibrated) the per-window mean and spread per
    channel. window: window_moments() when already computed."""
    _, w, c = net["input"]
    window = window or window_moments(net, streams, hop)
    _, _, geo = continual_cnn.geometry(net)
    xs = [np.asarray(f, dtype=np.float64).reshape(-1, w, c) for f in streams]
    fits = []
    for (word, s, pad), (_, wt, b), win in zip(geo, time_layers(net), window):
        zs = [continual_cnn.time_layer(word, x, wt, s, pad) + b for x in xs]
        cont = Moments()
        for z in zs:
            cont.add(z)
        mc, sc = cont.mean_std()
        mw, sw = win.mean_std()
        a = np.where(sc > MIN_STD, sw / np.maximum(sc, MIN_STD), 1.0)
        fits.append((a, mc, mw))
        xs = [np.clip(a * (z - mc) + mw, 0.0, net["relu_max"]) for z in zs]
    return fits


def recalibrated_net(net, fits):
    """The float64 reference net with the fits folded into its weights and biases."""
    layers = list(net["layers"])
    for i, (a, mc, mw) in enumerate(fits):
        word, wt, b = layers[i]
        shape = (-1,) + (1,) * (wt.ndim - 1)
        layers[i] = (word, wt * a.reshape(shape), a * (b - mc) + mw)
    return dict(net, layers=layers)


def apply(tensors, meta, fits, note):
    """The fits folded into a file's tensors (new dict; float32 weights and biases, int8
    weights through their per-channel scale) and its metadata's `recalibrated` key
    (note, a dict, plus the layers). A file with activation quantisation gets TFLite's
    int32 bias (`bias_quantized`) for every int8 layer: the new bias / (input scale x
    weight scale), rounded (libcony would refuse a float bias off that grid)."""
    tensors = dict(tensors)
    meta = dict(meta)
    quant = json.loads(meta["quantization"]) if "quantization" in meta else None
    for i, (a, mc, mw) in enumerate(fits):
        base = f"layers.{i}"
        w = tensors[base + ".weight"]
        if base + ".weight_scale" in tensors:
            if w.dtype != np.int8:
                raise ValueError(f"{base}: only int8 (symmetric) weights can be rescaled")
            scale = tensors[base + ".weight_scale"].astype(np.float64) * a
            tensors[base + ".weight_scale"] = scale.astype(np.float32)
        else:
            shape = (-1,) + (1,) * (w.ndim - 1)
            tensors[base + ".weight"] = (w.astype(np.float64) * a.reshape(shape)).astype(w.dtype)
        bias = a * (tensors[base + ".bias"].astype(np.float64) - mc) + mw
        tensors[base + ".bias"] = bias.astype(np.float32)
        if quant is not None and base + ".weight_scale" in tensors:
            in_scale = quant["layers"][i - 1][0] if i else quant["input"][0]
            adapt.set_int32_bias(tensors, i, in_scale)
    meta["recalibrated"] = json.dumps(dict(note, layers=[0, len(fits) - 1]))
    return tensors, meta


def log_mel_of(meta):
    """A function from 16 kHz samples to the file's log-mel frames (its `frontend`)."""
    fe = json.loads(meta["frontend"])
    if fe["sample-rate"] != other.SR:
        raise ValueError(f"front end at {fe['sample-rate']} Hz; the clips are {other.SR} Hz")
    kw = dict(sample_rate=fe["sample-rate"], window=fe["window-length"], hop=fe["hop-length"],
              fft=fe["fft-length"], n_mels=fe["n-mels"], fmin=fe["fmin"], fmax=fe["fmax"],
              log_offset=fe["log-offset"])
    return lambda x: mel.log_mel(x, **kw)


def clips_of(dataset, split, per_class, seed):
    """Paths of `per_class` clips of each label of a data set's split, drawn with `seed`."""
    with open(os.path.join(dataset, "manifest.csv"), newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["split"] == split]
    if not rows:
        raise ValueError(f"{dataset}: no clips in split {split!r}")
    random.Random(seed).shuffle(rows)
    by_label = {}
    for r in rows:
        by_label.setdefault(r["label"], []).append(os.path.join(dataset, r["path"]))
    return [p for label in sorted(by_label) for p in by_label[label][:per_class]]


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cnn", required=True, help="MobileNet-v1 file (YAMNet, adapted or not)")
    p.add_argument("--dataset", required=True, help="data set folder with manifest.csv")
    p.add_argument("--split", default="train", help="its split the statistics come from")
    p.add_argument("--per-class", type=int, default=50, help="clips of each label (50)")
    p.add_argument("--seed", type=int, default=1, help="which clips (1)")
    p.add_argument("--hop", type=int, default=32, help="frames between windows and tokens (32)")
    p.add_argument("--out", required=True, help="the recalibrated file")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    tensors, meta = safetensors_io.load(args.cnn)
    net = mobilenet.from_tensors(tensors, meta)
    to_mel = log_mel_of(meta)
    paths = clips_of(args.dataset, args.split, args.per_class, args.seed)
    streams = [to_mel(other.read_wav(p)) for p in paths]
    fits = fit(net, streams, args.hop)
    note = {"for": "continual inference (docs/continual-cnn.md)",
            "from": os.path.basename(args.cnn), "from_sha256": sha256(args.cnn),
            "statistics": f"{len(paths)} clips of "
                          f"{os.path.basename(os.path.normpath(args.dataset))}'s "
                          f"{args.split} split ({args.per_class} a label, seed {args.seed}), "
                          f"windows and tokens every {args.hop} frames",
            "rule": "per channel, the continual pre-activation's mean and std set to the "
                    "per-window ones, layer by layer"}
    tensors, meta = apply(tensors, meta, fits, note)
    safetensors_io.save(args.out, tensors, meta, adapt.dtypes_of(tensors))
    for i, (a, mc, mw) in enumerate(fits):
        print(f"layer {i:2d}: scale median {np.median(a):.3f} (range {a.min():.3f}-{a.max():.3f}), "
              f"mean shift median {np.median(np.abs(mw - mc)):.4f}")
    print(f"wrote {args.out} ({len(paths)} clips)")
    return 0
