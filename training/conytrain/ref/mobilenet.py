"""Float64 numpy reference of libcony's MobileNet CNN files (docs/model-format.md,
metadata network = "mobilenet_v1" or "mobilenet_v2"); tests/libcony/test_mobilenet.c checks
src/cnn*.c against it.

    net = load("model.safetensors")          # or from_tensors(tensors, metadata)
    embedding, scores = forward(net, patch)  # patch: (H, W) or (H, W, C), HWC

Layers (the `layers` metadata words, layer i's tensors `layers.{i}.*`, torch layouts):
conv3x3s1/s2 (out, in, 3, 3), dw3x3s1/s2 (C, 1, 3, 3), conv1x1 (out, in, 1, 1), each
followed by the file's activation (ReLU6 by default, or ReLU); gap (mean over H and W);
fc (out, in), no activation; sigmoid; softmax. MobileNet-v2 files add linear1x1 (a 1x1
conv without activation: the inverted residual's projection) and add@K (adds layer K's
output: the residual). Padding is TensorFlow SAME: out = ceil(in / s),
pad_total = max((out - 1) s + 3 - in, 0), pad_total // 2 before, the rest after.
I8 weights are dequantised with `layers.{i}.weight_scale` (one scale per dim-0 index), U8
ones as (q - weight_zero_point) x weight_scale.
The embedding is the gap output (None without a gap before the head); the scores are the
last layer's output.
"""

import json

import numpy as np

from conytrain import safetensors_io

WORDS = ("conv3x3s1", "conv3x3s2", "dw3x3s1", "dw3x3s2", "conv1x1", "gap", "fc", "sigmoid",
         "softmax")
V2_WORDS = ("linear1x1",)           # and add@K
WITH_TENSORS = ("conv3x3s1", "conv3x3s2", "dw3x3s1", "dw3x3s2", "conv1x1", "linear1x1", "fc")
NETWORKS = ("mobilenet_v1", "mobilenet_v2")


def load(path):
    tensors, metadata = safetensors_io.load(path)
    return from_tensors(tensors, metadata)


def dequantised(tensors, base):
    """layers.{i}.weight in float64 (int8 times its per-output-channel scale)."""
    w = tensors[base + ".weight"]
    if w.dtype in (np.int8, np.uint8):
        shape = (-1,) + (1,) * (w.ndim - 1)
        scale = tensors[base + ".weight_scale"].astype(np.float64)
        real = w.astype(np.float64)
        if w.dtype == np.uint8:
            real = real - tensors[base + ".weight_zero_point"].astype(np.float64).reshape(shape)
        return real * scale.reshape(shape)
    if base + ".weight_scale" in tensors:
        raise ValueError(f"{base}.weight_scale on a {w.dtype} weight")
    return w.astype(np.float64)


def fc_layer(tensors, words):
    """(W, b) float32 of the file's fc layer, the scores' layer after the pooled embedding
    (words: the file's layer list); None when it has none."""
    if "fc" not in words:
        return None
    i = words.index("fc")
    return (dequantised(tensors, f"layers.{i}").astype(np.float32),
            tensors[f"layers.{i}.bias"].astype(np.float32))


def quantised(w):
    """The inverse: int8 weights with one float32 scale per output channel (dim 0), max |w|
    over the channel / 127 (an all-zero channel gets a tiny scale and zeros)."""
    flat = np.asarray(w, dtype=np.float64).reshape(w.shape[0], -1)
    scale = np.maximum(np.abs(flat).max(1), 1e-12) / 127.0
    q = np.clip(np.rint(flat / scale[:, None]), -127, 127).astype(np.int8)
    return q.reshape(w.shape), scale.astype(np.float32)


def from_tensors(tensors, metadata):
    network = metadata.get("network")
    if network not in NETWORKS:
        raise ValueError(f"network {network!r} is not one of {NETWORKS}")
    words = metadata["layers"].split()
    layers = []
    for i, word in enumerate(words):
        v2 = word in V2_WORDS or (word.startswith("add@") and word[4:].isdigit()
                                  and int(word[4:]) < i)
        if word not in WORDS and not (v2 and network == "mobilenet_v2"):
            raise ValueError(f"layer word {i} {word!r} is unknown")
        base = f"layers.{i}"
        if word in WITH_TENSORS:
            layers.append((word, dequantised(tensors, base),
                           tensors[base + ".bias"].astype(np.float64)))
        else:
            layers.append((word, None, None))
    act = metadata.get("activation", "relu6")
    if act not in ("relu6", "relu"):
        raise ValueError(f"activation {act!r}")
    labels = json.loads(metadata["labels"]) if "labels" in metadata else None
    mean = std = None
    if "input_mean" in metadata or "input_std" in metadata:
        mean = np.array([float(v) for v in metadata.get("input_mean", "0").split(",")])
        std = np.array([float(v) for v in metadata.get("input_std", "1").split(",")])
    return {
        "mean": mean, "std": std,
        "input": tuple(int(metadata.get(k, d)) for k, d in
                       (("input_height", 96), ("input_width", 64), ("input_channels", 1))),
        "relu_max": 6.0 if act == "relu6" else np.inf,
        "layers": layers,
        "labels": labels,
    }


def same_padding(n, stride):
    """(output size, pad before, pad after) of a 3x3 SAME conv on n positions."""
    out = -(-n // stride)
    total = max((out - 1) * stride + 3 - n, 0)
    return out, total // 2, total - total // 2


def taps(x, stride):
    """The nine shifted views of the zero-padded HWC map x: [(ky, kx, (OH, OW, C))]."""
    h, w, _ = x.shape
    oh, top, bottom = same_padding(h, stride)
    ow, left, right = same_padding(w, stride)
    xp = np.pad(x, ((top, bottom), (left, right), (0, 0)))
    return [(ky, kx, xp[ky:ky + stride * (oh - 1) + 1:stride,
                        kx:kx + stride * (ow - 1) + 1:stride, :])
            for ky in range(3) for kx in range(3)]


def conv3x3(x, w, b, stride):
    out = sum(np.einsum("yxi,oi->yxo", v, w[:, :, ky, kx]) for ky, kx, v in taps(x, stride))
    return out + b


def depthwise3x3(x, w, b, stride):
    return sum(v * w[:, 0, ky, kx] for ky, kx, v in taps(x, stride)) + b


def forward(net, patch):
    """(embedding or None, scores) of one patch, float64."""
    h, w, c = net["input"]
    x = np.asarray(patch, dtype=np.float64).reshape(h, w, c)
    if net.get("mean") is not None:
        x = (x - net["mean"]) / net["std"]
    embedding = None
    act = lambda v: np.clip(v, 0.0, net["relu_max"])  # noqa: E731
    outs = []
    for word, wt, b in net["layers"]:
        if word.startswith("conv3x3"):
            x = act(conv3x3(x, wt, b, int(word[-1])))
        elif word.startswith("dw3x3"):
            x = act(depthwise3x3(x, wt, b, int(word[-1])))
        elif word == "conv1x1":
            x = act(np.einsum("yxi,oi->yxo", x, wt[:, :, 0, 0]) + b)
        elif word == "linear1x1":
            x = np.einsum("yxi,oi->yxo", x, wt[:, :, 0, 0]) + b
        elif word.startswith("add@"):
            x = x + outs[int(word[4:])]
        elif word == "gap":
            x = x.mean(axis=(0, 1))
            embedding = x
        elif word == "fc":
            x = wt @ x.reshape(-1) + b
        elif word == "softmax":
            e = np.exp(x - x.max())
            x = e / e.sum()
        else:
            x = 1.0 / (1.0 + np.exp(-x))
        outs.append(x)
    return embedding, x.reshape(-1)
