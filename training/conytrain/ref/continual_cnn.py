"""Float64 numpy reference of libcony's continual CNN (docs/continual-cnn.md,
include/cony/cnn-continual.h) for MobileNet-v1 files (conytrain/ref/mobilenet.py's nets):
the function src/cnn/cnn-continual.c computes, written offline over a whole stream.

    net = mobilenet.load("yamnet.safetensors")
    embeddings, scores = stream(net, frames, hop)   # frames: (T, W) or (T, W, C)
    embeddings, scores = stream_int8(qmobilenet.load("q.safetensors"), frames, hop)

The time axis of the patch is the stream. Every conv-stack layer (those before the
global average pool) is the per-window layer with its time padding only at the start of
the stream: a 3x3 conv or depthwise conv with stride s gets the pad_before rows of zeros
that its SAME padding puts before a window (1 for stride 1, 0 for stride 2 on the even
heights that windows of a multiple of the time stride give) and none after; output row t
reads input rows t s - pad .. t s - pad + 2, all of them real rows of the stream except
the start's zeros. The width keeps its SAME padding. Rows that would need input past the
end of the stream do not exist (yet). Token j is the head on final rows
[j hop / S, j hop / S + K): their mean over rows and width (the gap), then fc, sigmoid.
stream_int8() is the same function on the integer path of a quantised file.
"""

import numpy as np

from conytrain.ref import mobilenet, qmobilenet


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


def time_layer(word, x, wt, stride, pad):
    """The sums of a layer with weights over the stream x (T, W, C), float64, no bias."""
    if word.startswith("conv3x3"):
        return sum(np.einsum("yxi,oi->yxo", v, wt[:, :, ky, kx])
                   for ky, kx, v in taps_stream(x, stride, pad))
    if word.startswith("dw3x3"):
        return sum(v * wt[:, 0, ky, kx] for ky, kx, v in taps_stream(x, stride, pad))
    return np.einsum("yxi,oi->yxo", x, wt[:, :, 0, 0])


def final_rows(net, frames, every=False):
    """The final map's rows (R, W', C) of the stream `frames` (T, W[, C]); every: the list
    of every time layer's rows instead."""
    _, w, c = net["input"]
    x = np.asarray(frames, dtype=np.float64).reshape(-1, w, c)
    if net.get("mean") is not None:
        raise ValueError("input normalisation is not supported in time")
    _, _, layers = geometry(net)
    outs = []
    for (word, s, pad), (_, wt, b) in zip(layers, net["layers"]):
        x = np.clip(time_layer(word, x, wt, s, pad) + b, 0.0, net["relu_max"])
        outs.append(x)
    return outs if every else x


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


def stream_int8(qnet, frames, hop):
    """The integer path (conytrain/ref/qmobilenet.py, TFLite's arithmetic) of the same
    function: (embeddings, scores) dequantised as libcony hands them on, float32. The time
    padding at the start is each layer's input zero point (0 after subtracting it)."""
    S, K, layers = geometry(qnet)
    if hop <= 0 or hop % S:
        raise ValueError(f"hop {hop} is not a multiple of the time stride {S}")
    _, w, c = qnet["input"]
    s, z = qnet["qinput"]
    q = qmobilenet.quantize(np.asarray(frames, np.float32).reshape(-1, w, c), np.float32(s), z)
    for (word, st, pad), layer in zip(layers, qnet["qlayers"]):
        def accumulate(word, x, wt, st=st, pad=pad):
            sums = time_layer(word, x.astype(np.float64), wt.astype(np.float64), st, pad)
            return np.rint(sums).astype(np.int64)
        q, s, z = qmobilenet.step(qnet, layer, q, s, z, [], accumulate)
    step = hop // S
    n = (len(q) - K) // step + 1 if len(q) >= K else 0
    gap = len(layers)
    emb, scores = [], []
    for j in range(n):
        e, se, ze = qmobilenet.step(qnet, qnet["qlayers"][gap], q[j * step:j * step + K], s, z, [])
        emb.append(np.float32(se) * (e - ze).astype(np.float32))
        y, sy, zy = e, se, ze
        for layer in qnet["qlayers"][gap + 1:]:
            y, sy, zy = qmobilenet.step(qnet, layer, y, sy, zy, [])
        scores.append(np.float32(sy) * (y - zy).astype(np.float32))
    return np.array(emb, np.float32), np.array(scores, np.float32)
