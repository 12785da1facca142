#!/usr/bin/python3
"""Golden files for libcony's MobileNet-v1 networks (tests/libcony/test_mobilenet.c).

Writes into tests/golden/mobilenet/ (or the directory given) one small random MobileNet
(input 21x16x1, odd and even map sizes, both strides, every layer kind:
conv3x3s2 dw3x3s1 conv1x1 dw3x3s2 conv1x1 conv3x3s1 dw3x3s2 conv1x1 gap fc sigmoid;
maps 21x16 -> 11x8 -> 6x4 -> 3x2, 24-d embedding, 10 scores) stored three ways:

  f32.safetensors   F32 weights, ReLU6, with `labels` (10 names) and `frontend` metadata
  f16.safetensors   the weights rounded to F16, activation "relu"
  i8.safetensors    int8 weights with per-output-channel F32 weight_scale, ReLU6
  input.npy                 (4, 21, 16) float32 patches (HWC, C = 1)
  {f32,f16,i8}_embedding.npy (4, 24) and {f32,f16,i8}_scores.npy (4, 10): the float64
                    reference (conytrain/ref/mobilenet.py) on the weights as stored

Weights and inputs are scaled so that ReLU6 clamps at both ends on every layer.

And one small random MobileNet-v2 (network = "mobilenet_v2", input 15x13x3 with
input_mean / input_std, two inverted residual blocks, the first with its residual add@0,
a softmax head: V2_LAYERS) stored two ways:

  v2_f32.safetensors  F32 weights
  v2_u8.safetensors   uint8 weights with per-tensor scale and zero point (TFLite's
                      asymmetric quantisation: weight_scale, weight_zero_point)
  v2_input.npy        (4, 15, 13, 3) float32 images in 0..1 (HWC)
  v2_{f32,u8}_embedding.npy (4, 24), v2_{f32,u8}_scores.npy (4, 10)

and the same network quantised for the integer path (`quantization` metadata: activation
scales and zero points calibrated on the inputs' float maps, int32 biases in
`bias_quantized`), its goldens by the integer reference (conytrain/ref/qmobilenet.py,
TFLite's arithmetic; libcony must equal them bit for bit):

  v2_q8.safetensors   int8 weights, symmetric per output channel (TF2's int8 files)
  v2_qu8.safetensors  uint8 weights per tensor with zero points, and activation zero
                      points of uint8 tensors (TF1's uint8 files, mapped to int8)
  v2_{q8,qu8}_embedding.npy (4, 24), v2_{q8,qu8}_scores.npy (4, 10): dequantised

Usage: /usr/bin/python3 training/gen_mobilenet_golden.py [OUTDIR]
"""

import json
import os

import numpy as np

from conytrain import REPO
from conytrain.golden import check as golden_check
from conytrain.ref import mobilenet, qmobilenet

DEFAULT_OUT = os.path.join(REPO, "tests", "golden", "mobilenet")
# (word, output channels or None)
LAYERS = (("conv3x3s2", 8), ("dw3x3s1", None), ("conv1x1", 12), ("dw3x3s2", None),
          ("conv1x1", 16), ("conv3x3s1", 16), ("dw3x3s2", None), ("conv1x1", 24),
          ("gap", None), ("fc", 10), ("sigmoid", None))
INPUT = (21, 16, 1)
LABELS = [f"class {k}" for k in range(10)]
FRONTEND = {"name": "test", "sample-rate": 16000, "n-mels": 16}
V2_LAYERS = (("conv3x3s2", 8), ("conv1x1", 16), ("dw3x3s1", None), ("linear1x1", 8),
             ("add@0", None), ("conv1x1", 16), ("dw3x3s2", None), ("linear1x1", 12),
             ("conv1x1", 24), ("gap", None), ("fc", 10), ("softmax", None))
V2_INPUT = (15, 13, 3)
V2_META = {"network": "mobilenet_v2", "input_height": str(V2_INPUT[0]),
           "input_width": str(V2_INPUT[1]), "input_channels": str(V2_INPUT[2]),
           "layers": " ".join(word for word, _ in V2_LAYERS),
           "input_mean": "0.5,0.45,0.4", "input_std": "0.25,0.3,0.2"}


def random_tensors(rng, layers=LAYERS, shape_in=INPUT):
    tensors = {}
    h, w, c = shape_in
    for i, (word, out) in enumerate(layers):
        base = f"layers.{i}"
        if word.startswith("conv3x3"):
            shape, fan_in = (out, c, 3, 3), 9 * c
        elif word.startswith("dw3x3"):
            out, shape, fan_in = c, (c, 1, 3, 3), 9
        elif word in ("conv1x1", "linear1x1"):
            shape, fan_in = (out, c, 1, 1), c
        elif word == "fc":
            shape, fan_in = (out, c), c
        else:
            continue
        gain = 0.25 if word == "fc" else 1.6
        tensors[base + ".weight"] = (rng.uniform(-1, 1, shape) * gain * np.sqrt(3.0 / fan_in)
                                     ).astype(np.float32)
        tensors[base + ".bias"] = rng.uniform(-0.5, 0.5, out).astype(np.float32)
        c = out
    return tensors


def quantised(tensors):
    """int8 weights with one scale per output channel (max |w| / 127), biases as they are."""
    out = {}
    for name, v in tensors.items():
        if not name.endswith(".weight"):
            out[name] = v
            continue
        out[name], out[name + "_scale"] = mobilenet.quantised(v)
    return out


def quantised_u8(tensors):
    """uint8 weights with one scale and zero point per tensor (repeated per output
    channel), as TFLite's asymmetric quantisation stores them."""
    out = {}
    for name, v in tensors.items():
        if not name.endswith(".weight"):
            out[name] = v
            continue
        lo, hi = min(float(v.min()), 0.0), max(float(v.max()), 0.0)
        scale = (hi - lo) / 255.0
        zero = int(round(-lo / scale))
        out[name] = np.clip(np.rint(v / scale) + zero, 0, 255).astype(np.uint8)
        out[name + "_scale"] = np.full(v.shape[0], scale, np.float32)
        out[name + "_zero_point"] = np.full(v.shape[0], zero, np.uint8)
    return out


def v2_files(rng, say):
    tensors = random_tensors(rng, V2_LAYERS, V2_INPUT)
    meta = V2_META
    x = rng.uniform(0, 1, (4,) + V2_INPUT).astype(np.float32)
    files = {"v2_input.npy": x}
    for name, t in (("v2_f32", tensors), ("v2_u8", quantised_u8(tensors))):
        net = mobilenet.from_tensors(t, meta)
        outs = [mobilenet.forward(net, image) for image in x]
        emb = np.stack([e for e, _ in outs])
        scores = np.stack([s for _, s in outs])
        assert emb.shape == (4, 24) and scores.shape == (4, 10)
        files[f"{name}.safetensors"] = (t, meta)
        files[f"{name}_embedding.npy"] = emb.astype(np.float32)
        files[f"{name}_scores.npy"] = scores.astype(np.float32)
        say(f"{name}: embedding range {emb.min():.3f}..{emb.max():.3f}, "
            f"scores {scores.min():.3f}..{scores.max():.3f}")
    return files


def layer_outputs(net, x):
    """Each layer's float64 output on image x (the reference's forward, kept per layer)."""
    h, w, c = net["input"]
    v = (np.asarray(x, np.float64).reshape(h, w, c) - net["mean"]) / net["std"]
    outs = []
    for word, wt, b in net["layers"]:
        if word.startswith("conv3x3"):
            v = np.clip(mobilenet.conv3x3(v, wt, b, int(word[-1])), 0, 6)
        elif word.startswith("dw3x3"):
            v = np.clip(mobilenet.depthwise3x3(v, wt, b, int(word[-1])), 0, 6)
        elif word in ("conv1x1", "linear1x1"):
            v = np.einsum("yxi,oi->yxo", v, wt[:, :, 0, 0]) + b
            v = np.clip(v, 0, 6) if word == "conv1x1" else v
        elif word.startswith("add@"):
            v = v + outs[int(word[4:])]
        elif word == "gap":
            v = v.mean(axis=(0, 1))
        elif word == "fc":
            v = wt @ v + b
        else:
            e = np.exp(v - v.max())
            v = e / e.sum()
        outs.append(v)
    return outs


def activation_pair(lo, hi, uint8):
    """(scale, int8 zero point) covering lo..hi (0 included); uint8: a zero point of a
    uint8 tensor (0..255) minus 128, as the converter records it."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = float(np.float32(max(hi - lo, 1e-3) / 255.0))
    zero = int(np.clip(round(-lo / scale), 0, 255)) - 128
    return scale, zero


def integer_file(tensors, meta, x, uint8):
    """The network's weights quantised (int8 per channel, or uint8 per tensor) with the
    `quantization` metadata and `bias_quantized` of an integer .tflite."""
    t = quantised_u8(tensors) if uint8 else quantised(tensors)
    net = mobilenet.from_tensors(t, meta)
    outs = [layer_outputs(net, image) for image in x]
    pairs = []
    for i, (word, _) in enumerate(V2_LAYERS):
        if word == "softmax":
            pairs.append((1.0 / 256.0, -128))
            continue
        v = np.concatenate([o[i].reshape(-1) for o in outs])
        pairs.append(activation_pair(float(v.min()), float(v.max()), uint8))
    s_in = float(np.float32(1.0 / 64.0))       # the normalised input spans about -2..2.5
    return with_quantization(t, meta, s_in, pairs)


def with_quantization(t, meta, s_in, pairs):
    """Quantised weights @t with the activations' (scale, zero point) @pairs (one per
    layer, its output; @s_in the input's scale, zero point 0): the `quantization` metadata
    and each layer's `bias_quantized` (its bias rounded to the accumulator's grid)."""
    q = {"input": [s_in, 0], "layers": [list(p) for p in pairs]}
    s_prev = s_in
    for i in range(len(pairs)):
        base = f"layers.{i}"
        if base + ".weight" in t:
            real = np.float64(s_prev) * t[base + ".weight_scale"].astype(np.float64)
            bq = np.rint(t[base + ".bias"].astype(np.float64) / real).astype(np.int64)
            t[base + ".bias_quantized"] = bq
            t[base + ".bias"] = (bq * real).astype(np.float32)
        s_prev = pairs[i][0]
    return t, dict(meta, quantization=json.dumps(q))


def v2_integer_files(rng, say):
    """v2_q8 / v2_qu8 and their integer goldens (the v2 network and inputs of v2_files)."""
    tensors = random_tensors(rng, V2_LAYERS, V2_INPUT)
    meta = V2_META
    x = rng.uniform(0, 1, (4,) + V2_INPUT).astype(np.float32)
    files = {}
    gap = [w for w, _ in V2_LAYERS].index("gap")
    for name, uint8 in (("v2_q8", False), ("v2_qu8", True)):
        t, m = integer_file(tensors, meta, x, uint8)
        net = qmobilenet.from_tensors(t, m)
        scores, emb = [], []
        for image in x:
            codes, scale, zero = qmobilenet.forward(net, image)
            scores.append(np.float32(scale) * (codes - zero).astype(np.float32))
            codes, scale, zero = qmobilenet.forward(net, image, upto=gap + 1)
            emb.append(np.float32(scale) * (codes - zero).astype(np.float32))
        files[f"{name}.safetensors"] = (t, m)
        files[f"{name}_embedding.npy"] = np.stack(emb)
        files[f"{name}_scores.npy"] = np.stack(scores)
        say(f"{name}: scores {np.min(scores):.3f}..{np.max(scores):.3f}, top-1 "
            f"{np.argmax(scores, 1).tolist()}")
    return files


def golden_files(say=lambda text: None):
    rng = np.random.default_rng(2025)
    tensors = random_tensors(rng)
    base_meta = {"network": "mobilenet_v1", "input_height": str(INPUT[0]),
                 "input_width": str(INPUT[1]), "input_channels": str(INPUT[2]),
                 "layers": " ".join(word for word, _ in LAYERS)}
    variants = {
        "f32": (tensors, dict(base_meta, labels=json.dumps(LABELS),
                              frontend=json.dumps(FRONTEND), source="gen_mobilenet_golden.py")),
        "f16": ({k: v.astype(np.float16) if k.endswith(".weight") else v
                 for k, v in tensors.items()}, dict(base_meta, activation="relu")),
        "i8": (quantised(tensors), dict(base_meta, activation="relu6")),
    }
    x = (rng.standard_normal((4,) + INPUT[:2]) * 3.0).astype(np.float32)
    files = {"input.npy": x}
    for name, (t, meta) in variants.items():
        net = mobilenet.from_tensors(t, meta)
        outs = [mobilenet.forward(net, patch) for patch in x]
        emb = np.stack([e for e, _ in outs])
        scores = np.stack([s for _, s in outs])
        assert emb.shape == (4, 24) and scores.shape == (4, 10)
        assert 0.02 < scores.min() and scores.max() < 0.98, "scores should not saturate"
        files[f"{name}.safetensors"] = (t, meta)
        files[f"{name}_embedding.npy"] = emb.astype(np.float32)
        files[f"{name}_scores.npy"] = scores.astype(np.float32)
        say(f"{name}: embedding range {emb.min():.3f}..{emb.max():.3f}, "
            f"scores {scores.min():.3f}..{scores.max():.3f}")
    files.update(v2_files(np.random.default_rng(2040), say))
    files.update(v2_integer_files(np.random.default_rng(2040), say))
    return files


def clamp_fractions(net, x):
    """Per conv/dw layer: (fraction of outputs clamped at 0, fraction clamped at the top)."""
    h, w, c = net["input"]
    fractions = []
    v = np.asarray(x, dtype=np.float64).reshape(h, w, c)
    for word, wt, b in net["layers"]:
        if word.startswith("conv3x3"):
            v = mobilenet.conv3x3(v, wt, b, int(word[-1]))
        elif word.startswith("dw3x3"):
            v = mobilenet.depthwise3x3(v, wt, b, int(word[-1]))
        elif word == "conv1x1":
            v = np.einsum("yxi,oi->yxo", v, wt[:, :, 0, 0]) + b
        else:
            break
        fractions.append(((v <= 0).mean(), (v >= net["relu_max"]).mean()))
        v = np.clip(v, 0, net["relu_max"])
    return fractions


def verify(golden=DEFAULT_OUT):
    """Messages for every way the files under `golden` differ from what main() writes."""
    return golden_check.compare(golden, golden_files())


def main():
    golden_check.write_main(DEFAULT_OUT, golden_files)


if __name__ == "__main__":
    main()
