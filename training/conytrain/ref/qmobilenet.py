"""Integer numpy reference of libcony's quantised MobileNet files (metadata `quantization`,
docs/model-format.md): TFLite's integer inference as its reference kernels define it, written
separately from src/cnn/cnn-int8.c and src/kernels/qmath.h so that each checks the other.

    net = load("model.safetensors")
    codes, scale, zero_point = forward(net, image)   # image: (H, W, C) pixels / 255
    scores = scale * (codes - zero_point)

Activations are int8 (uint8 tensors as int8: value and zero point - 128); each layer's
int32 accumulator (int64 here, exact) is requantised with a Q31 multiplier and a shift
(saturating rounding doubling high multiply, then rounding divide by a power of two);
ReLU6 is a clamp; the residual ADD shifts both inputs left 20 bits, scales them to twice the
larger input scale and requantises the sum; the mean over H and W requantises the sum and
then divides by the count (rounding half away from zero); the softmax is computed in float on
the dequantised logits and quantised to the output's grid (ArmNN's reference does the same).
"""

import json

import numpy as np

from conytrain import safetensors_io
from conytrain.ref import mobilenet

ADD_LEFT_SHIFT = 20


def multiplier(real):
    """(mult, shift): real = mult * 2^(shift - 31), mult in [2^30, 2^31) (0 for tiny reals)."""
    if real == 0.0:
        return 0, 0
    q, e = np.frexp(real)
    fixed = int(np.floor(abs(q) * (1 << 31) + 0.5))
    if fixed == 1 << 31:
        fixed //= 2
        e += 1
    if e < -31:
        return 0, 0
    if e > 30:
        raise ValueError(f"multiplier {real} out of range")
    return fixed, int(e)


def scale_by(x, mult, shift):
    """x * mult * 2^(shift - 31) with TFLite's two roundings, element-wise (int64 arrays)."""
    x = np.asarray(x, np.int64)
    mult, shift = np.asarray(mult, np.int64), np.asarray(shift, np.int64)
    x = x << np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    ab = x * mult
    ab = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = np.where(ab >= 0, ab >> 31, -((-ab) >> 31))          # truncating division
    mask = (np.int64(1) << right) - 1
    threshold = (mask >> 1) + (high < 0)
    return (high >> right) + ((high & mask) > threshold)


def quantize(x, scale, zero_point):
    """round(x / scale) half away from zero, plus the zero point, clamped to int8."""
    r = np.asarray(x, np.float64) / np.float64(scale)
    return np.clip(np.sign(r) * np.floor(np.abs(r) + 0.5) + zero_point, -128, 127).astype(np.int64)


def load(path):
    tensors, metadata = safetensors_io.load(path)
    return from_tensors(tensors, metadata)


def _weights(tensors, base):
    """(int64 weights minus their zero points, float64 scales, int64 bias) of layer base."""
    w = tensors[base + ".weight"].astype(np.int64)
    shape = (-1,) + (1,) * (w.ndim - 1)
    if base + ".weight_zero_point" in tensors:
        w = w - tensors[base + ".weight_zero_point"].astype(np.int64).reshape(shape)
    return w, tensors[base + ".weight_scale"].astype(np.float64)


def from_tensors(tensors, metadata):
    if "quantization" not in metadata:
        raise ValueError("the file has no quantization metadata (it runs in float only)")
    net = mobilenet.from_tensors(tensors, metadata)
    q = json.loads(metadata["quantization"])
    layers = []
    for i, (word, _, b) in enumerate(net["layers"]):
        base = f"layers.{i}"
        w = s = bq = None
        if word in mobilenet.WITH_TENSORS:
            w, s = _weights(tensors, base)
            bq = tensors.get(base + ".bias_quantized")
            bq = None if bq is None else bq.astype(np.int64)
        layers.append((word, w, s, bq, b, q["layers"][i]))
    net["qlayers"] = layers
    net["qinput"] = q["input"]
    return net


def _accumulate(word, x, w):
    """int64 sums of x (int64, minus its zero point) times w, exact through float64
    (every partial sum is far below 2^53)."""
    xf, wf = x.astype(np.float64), w.astype(np.float64)
    if word.startswith("conv3x3"):
        acc = mobilenet.conv3x3(xf, wf, 0.0, int(word[-1]))
    elif word.startswith("dw3x3"):
        acc = mobilenet.depthwise3x3(xf, wf, 0.0, int(word[-1]))
    elif word == "fc":
        acc = wf.reshape(wf.shape[0], -1) @ xf.reshape(-1)
    else:
        acc = np.einsum("yxi,oi->yxo", xf, wf[:, :, 0, 0])
    return np.rint(acc).astype(np.int64)


def forward(net, image, upto=None):
    """(int8 codes of the last layer, its scale, its zero point) for one HWC image; upto:
    of layer upto - 1 instead (e.g. the gap's: the embedding)."""
    h, w, c = net["input"]
    x = np.asarray(image, np.float32).reshape(h, w, c)
    if net.get("mean") is not None:
        x = ((x - net["mean"].astype(np.float32)) / net["std"].astype(np.float32)).astype(np.float32)
    s, z = net["qinput"]
    q = quantize(x, np.float32(s), z)
    outs = []
    for layer in net["qlayers"][:upto]:
        q, s, z = step(net, layer, q, s, z, outs)
        outs.append(q)
    return q.reshape(-1), s, z


def step(net, layer, q, s, z, outs, accumulate=_accumulate):
    """One layer of forward(): (codes, scale, zero point) of its output from the codes q of
    its input (scale s, zero point z); outs: the earlier layers' codes (for add@K);
    accumulate(word, x, w): the int64 sums of a layer with weights (the continual CNN's
    reference, continual_cnn.py, passes its own, padded in time only at the start)."""
    word, wt, ws, bq, b, (so, zo) = layer
    if wt is not None:
        real = np.float64(s) * ws
        bias = bq if bq is not None else np.rint(b / real).astype(np.int64)
        acc = accumulate(word, q - z, wt) + bias
        m = [multiplier(float(r / np.float64(so))) for r in real]
        lo, hi = -128, 127
        if word not in ("fc", "linear1x1"):
            lo = max(lo, zo)
            if np.isfinite(net["relu_max"]):
                top = np.float32(net["relu_max"]) / np.float32(so)
                hi = min(hi, zo + int(np.floor(top + np.float32(0.5))))
        q = np.clip(scale_by(acc, [v[0] for v in m], [v[1] for v in m]) + zo, lo, hi)
    elif word.startswith("add@"):
        k = int(word[4:])
        s2, z2 = net["qlayers"][k][5]
        twice = 2.0 * max(s, s2)
        a1 = scale_by((q - z) << ADD_LEFT_SHIFT, *multiplier(s / twice))
        a2 = scale_by((outs[k] - z2) << ADD_LEFT_SHIFT, *multiplier(s2 / twice))
        q = np.clip(scale_by(a1 + a2, *multiplier(twice / ((1 << ADD_LEFT_SHIFT) * so))) + zo,
                    -128, 127)
    elif word == "gap":
        n = q.shape[0] * q.shape[1]
        acc = scale_by((q - z).sum(axis=(0, 1)), *multiplier(s / so))
        acc = np.where(acc > 0, (acc + n // 2) // n, -((-acc + n // 2) // n))
        q = np.clip(acc + zo, -128, 127)
    elif word == "softmax":
        # as src/cnn/cnn-int8.c: float32 exponentials, their sum in float64
        e = np.exp(np.float32(s) * (q - q.max()).astype(np.float32))
        inv = np.float32(1.0 / e.astype(np.float64).sum())
        q = quantize(e * inv, np.float32(so), zo)
    else:
        raise ValueError(f"layer {word} has no integer form here")
    return q, so, zo
