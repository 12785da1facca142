"""Float64 numpy reference of libcony's continual CNN (docs/continual-cnn.md,
include/cony/cnn-continual.h) for MobileNet-v1 files (conytrain/ref/mobilenet.py's nets):
the function src/cnn-continual.c computes, written offline over a whole stream.

    net = mobilenet.load("yamnet.safetensors")
    embeddings, scores = stream(net, frames, hop)   # frames: (T, W) or (T, W, C)

The time axis of the patch is the stream. Every conv-stack layer (those before the
global average pool) is the per-window layer with its time padding only at the start of
the stream: a 3x3 conv or depthwise conv with stride s gets the pad_before rows of zeros
that its SAME padding puts before a window (1 for stride 1, 0 for stride 2 on the even
heights that windows of a multiple of the time stride give) and none after; output row t
reads input rows t s - pad .. t s - pad + 2, all of them real rows of the stream except
the start's zeros. The width keeps its SAME padding. Rows that would need input past the
end of the stream do not exist (yet). Token j is the head on final rows
[j hop / S, j hop / S + K): their mean over rows and width (the gap), then fc, sigmoid.
"""

import numpy as np

from conytrain.ref import mobilenet


def geometry(net):
    """(S, K, per-layer (word, stride, pad_before) of the time layers) of a net; raises
    ValueError when the window is not a multiple of the time stride."""
    h = net["input"][0]
    layers, S = [], 1
    for word, _, _ in net["layers"]:
        if word == "gap" or word == "fc":
            break
        if word.startswith("add@") or word == "linear1x1":
            raise ValueError("residual networks (MobileNet-v2) do not run continually")
        s = int(word[-1]) if word[:5] in ("conv3", "dw3x3") else 1
        pad = 0 if word == "conv1x1" else mobilenet.same_padding(h, s)[1]
        layers.append((word, s, pad))
        h = -(-h // s)
        S *= s
    if net["input"][0] % S:
        raise ValueError(f"window {net['input'][0]} is not a multiple of the time stride {S}")
    return S, net["input"][0] // S, layers


def taps_stream(x, stride, pad):
    """The nine shifted views of x (T, W, C) padded with `pad` zero rows before the
    stream (none after) and SAME in width: [(ky, kx, (rows, OW, C))]."""
    t, w, _ = x.shape
    rows = (t + pad - 3) // stride + 1 if t + pad >= 3 else 0
    ow, left, right = mobilenet.same_padding(w, stride)
    xp = np.pad(x, ((pad, 0), (left, right), (0, 0)))
    return [(ky, kx, xp[ky:ky + stride * (rows - 1) + 1:stride,
                        kx:kx + stride * (ow - 1) + 1:stride, :][:rows])
            for ky in range(3) for kx in range(3)]


def final_rows(net, frames):
    """The final map's rows (R, W', C) of the stream `frames` (T, W[, C])."""
    _, w, c = net["input"]
    x = np.asarray(frames, dtype=np.float64).reshape(-1, w, c)
    if net.get("mean") is not None:
        raise ValueError("input normalisation is not supported in time")
    act = lambda v: np.clip(v, 0.0, net["relu_max"])  # noqa: E731
    _, _, layers = geometry(net)
    for (word, s, pad), (_, wt, b) in zip(layers, net["layers"]):
        if word.startswith("conv3x3"):
            x = act(sum(np.einsum("yxi,oi->yxo", v, wt[:, :, ky, kx])
                        for ky, kx, v in taps_stream(x, s, pad)) + b)
        elif word.startswith("dw3x3"):
            x = act(sum(v * wt[:, 0, ky, kx] for ky, kx, v in taps_stream(x, s, pad)) + b)
        else:
            x = act(np.einsum("yxi,oi->yxo", x, wt[:, :, 0, 0]) + b)
    return x


def head(net, pooled):
    """The layers after the time layers (gap done): fc, sigmoid, softmax."""
    x = pooled
    for word, wt, b in net["layers"]:
        if word == "fc":
            x = wt @ x + b
        elif word == "sigmoid":
            x = 1.0 / (1.0 + np.exp(-x))
        elif word == "softmax":
            e = np.exp(x - x.max())
            x = e / e.sum()
    return x


def stream(net, frames, hop):
    """(embeddings (N, D), scores (N, classes)) of every token the stream gives, float64;
    hop in frames, a multiple of the time stride."""
    S, K, _ = geometry(net)
    if hop <= 0 or hop % S:
        raise ValueError(f"hop {hop} is not a multiple of the time stride {S}")
    rows = final_rows(net, frames)
    step = hop // S
    n = (len(rows) - K) // step + 1 if len(rows) >= K else 0
    emb = np.stack([rows[j * step:j * step + K].mean(axis=(0, 1)) for j in range(n)]) \
        if n else np.zeros((0, rows.shape[-1]))
    scores = np.stack([head(net, e) for e in emb]) if n else np.zeros((0, 0))
    return emb, scores


def lookahead(net):
    """Frames past a window's last frame that its token reads (157 for YAMNet)."""
    S, K, layers = geometry(net)
    last = K - 1
    for word, s, pad in reversed(layers):
        taps = 1 if word == "conv1x1" else 3
        last = last * s - pad + taps - 1
    return last - (net["input"][0] - 1)
