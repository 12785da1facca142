#!/usr/bin/python3
"""Per-image time of a quantised MobileNet-v2 file (network = mobilenet_v2 with
`quantization` metadata, such as models/imagenet/mobilenet_v2.safetensors, TFLite's
uint8 per-tensor model) in ONNX Runtime's integer kernels, beside `cony bench image`.

    /usr/bin/python3 training/bench_mobilenet_ort.py --ort-dir DIR \\
        [--model models/imagenet/mobilenet_v2.safetensors] [--images 50] [--rounds 5] \\
        [--golden tests/golden/mobilenet]

The graph (conytrain/bench/yamnet_ort.py's protobuf writer, its ONNX Runtime setup:
npm `onnxruntime-node`, one thread, all optimisations): the float HWC image in 0..1
normalised by the file's input_mean / input_std and quantised (QuantizeLinear) with
its input scale; one QLinearConv per conv / depthwise / pointwise layer with the
file's uint8 (or int8) weights, their zero points and scales, the int32 biases of
`bias_quantized`, TensorFlow SAME padding as explicit pads (ReLU6 is the uint8 range
of its outputs, checked); com.microsoft's QLinearAdd for add@K and
QLinearGlobalAveragePool for gap; the FC layer as a 1x1 QLinearConv; the softmax in
float on the dequantised logits, quantised to the file's output grid. Activations are
uint8 (the file's int8 codes + 128). Prints one JSON object: cpu_ms_per_image (median
of the rounds, node's process CPU time), min, the ORT version, and with --golden DIR
the largest |score difference| from the integer reference's golden scores and whether
every top-1 agrees; the images timed are then the golden ones:
  tests/golden/imagenet: frames/*.png and int8.npy (training/verify_imagenet_armnn.py),
      for the shipped models/imagenet/mobilenet_v2.safetensors;
  tests/golden/mobilenet: v2_input.npy and v2_qu8_scores.npy
      (training/gen_mobilenet_golden.py), with --model .../v2_qu8.safetensors.
Without --golden random images are timed.
"""

import argparse
import json
import os
import sys

import numpy as np

from conytrain import REPO, safetensors_io
from conytrain.bench.yamnet_ort import (ONNX_FLOAT, ONNX_INT8, ONNX_INT32, ONNX_UINT8, attr_int,
                                        attr_ints, f_bytes, f_int, node, run_node, same_pads,
                                        tensor, value_info)

MS_DOMAIN = "com.microsoft"
SHIPPED = os.path.join(REPO, "models", "imagenet", "mobilenet_v2.safetensors")


def _per_tensor(v):
    """@v as a scalar when all its entries are equal (per-tensor), else as it is."""
    v = np.asarray(v)
    return v.reshape(-1)[:1].reshape(()) if (v == v.reshape(-1)[0]).all() else v


def build(path, weights="int8"):
    """(ONNX model bytes, (H, W, C), number of scores) of a quantised mobilenet_v2 file;
    @weights "int8": uint8 weights as int8 (value and zero point - 128, the same
    products; ONNX Runtime's u8s8 kernels are its fast x86 path), "uint8": as stored."""
    tensors, meta = safetensors_io.load(path)
    if meta.get("network") != "mobilenet_v2" or "quantization" not in meta:
        raise ValueError(f"{path}: not a quantised mobilenet_v2 file")
    quant = json.loads(meta["quantization"])
    words = meta["layers"].split()
    h, w, c = (int(meta[k]) for k in ("input_height", "input_width", "input_channels"))
    inits, nodes = [], []

    def const(name, v, dtype):
        inits.append(tensor(name, v, dtype))
        return name

    def qparams(name, s, zp):
        """Scale and uint8 zero point (int8 code + 128) initialisers of tensor @name."""
        return [const(name + "_s", np.float32(s), ONNX_FLOAT),
                const(name + "_zp", zp + 128, ONNX_UINT8)]

    x = "input"  # (1, C, H, W) pixels / 255
    if "input_mean" in meta:
        mean = np.array([float(v) for v in meta["input_mean"].split(",")], np.float32)
        std = np.array([float(v) for v in meta["input_std"].split(",")], np.float32)
        shape = (1, -1, 1, 1)
        nodes.append(node("Sub", [x, const("mean", np.broadcast_to(mean, (c,)).reshape(shape),
                                           ONNX_FLOAT)], ["centred"]))
        nodes.append(node("Div", ["centred", const("std", np.broadcast_to(std, (c,)).reshape(
            shape), ONNX_FLOAT)], ["normalised"]))
        x = "normalised"
    nodes.append(node("QuantizeLinear", [x] + qparams("q_in", *quant["input"]), ["q_in"]))
    outs, cur, hh, ww = [], "q_in", h, w  # outs: each layer's output name
    for i, word in enumerate(words):
        so, zo = quant["layers"][i]
        p = f"l{i}"
        if word in ("conv1x1", "linear1x1", "fc") or word[:5] in ("conv3", "dw3x3"):
            wt = tensors[f"layers.{i}.weight"]
            if word == "fc":
                wt = wt.reshape(wt.shape[0], -1, 1, 1)
            if word not in ("fc", "linear1x1") and (zo != -128 or 6.0 / so < 254.5):
                raise ValueError(f"{path}: layer {i}: its ReLU6 is not the uint8 range")
            wzp = tensors.get(f"layers.{i}.weight_zero_point", np.zeros(wt.shape[0], wt.dtype))
            wdt = ONNX_UINT8 if wt.dtype == np.uint8 else ONNX_INT8
            if wdt == ONNX_UINT8 and weights == "int8":  # w - zp unchanged
                wt, wzp, wdt = (wt.astype(np.int16) - 128, wzp.astype(np.int16) - 128,
                                ONNX_INT8)
            attrs = [attr_ints("kernel_shape", wt.shape[2:])]
            if word[:5] in ("conv3", "dw3x3"):
                stride = int(word[-1])
                t, b, oh = same_pads(hh, stride)
                left, r, ow = same_pads(ww, stride)
                attrs += [attr_ints("strides", (stride, stride)),
                          attr_ints("pads", (t, left, b, r))]
                hh, ww = oh, ow
            if word.startswith("dw"):
                attrs.append(attr_int("group", wt.shape[0]))
            inputs = [cur, cur + "_s", cur + "_zp", const(p + "_w", wt, wdt),
                      const(p + "_ws", _per_tensor(tensors[f"layers.{i}.weight_scale"]),
                            ONNX_FLOAT),
                      const(p + "_wzp", _per_tensor(wzp), wdt)] + qparams(p, so, zo)
            inputs.append(const(p + "_b", tensors[f"layers.{i}.bias_quantized"], ONNX_INT32))
            nodes.append(node("QLinearConv", inputs, [p], attrs))
        elif word.startswith("add@"):
            k = outs[int(word[4:])]
            nodes.append(node("QLinearAdd", [cur, cur + "_s", cur + "_zp", k, k + "_s", k + "_zp"]
                              + qparams(p, so, zo), [p], domain=MS_DOMAIN))
        elif word == "gap":
            nodes.append(node("QLinearGlobalAveragePool", [cur, cur + "_s", cur + "_zp"]
                              + qparams(p, so, zo), [p], [attr_int("channels_last", 0)],
                              domain=MS_DOMAIN))
            hh = ww = 1
        elif word == "softmax":
            nodes.append(node("DequantizeLinear", [cur, cur + "_s", cur + "_zp"], ["logits"]))
            nodes.append(node("Flatten", ["logits"], ["logits2"]))
            nodes.append(node("Softmax", ["logits2"], ["probs"], [attr_int("axis", 1)]))
            nodes.append(node("QuantizeLinear", ["probs"] + qparams(p, so, zo), [p]))
            nodes.append(node("DequantizeLinear", [p, p + "_s", p + "_zp"], ["scores"]))
        else:
            raise ValueError(f"{path}: layer {i} ({word}) has no ONNX form here")
        outs.append(p)
        cur = p
    if words[-1] != "softmax":
        raise ValueError(f"{path}: the last layer is {words[-1]}, not softmax")
    classes = tensors[f"layers.{words.index('fc')}.weight"].shape[0]
    graph = (b"".join(f_bytes(1, n) for n in nodes) + f_bytes(2, "mobilenet_v2")
             + b"".join(f_bytes(5, t) for t in inits)
             + f_bytes(11, value_info("input", (1, c, h, w)))
             + f_bytes(12, value_info("scores", (1, classes))))
    opsets = f_bytes(8, f_bytes(1, "") + f_int(2, 13)) + f_bytes(8, f_bytes(1, MS_DOMAIN)
                                                                   + f_int(2, 1))
    model = f_int(1, 7) + f_bytes(2, "gst-cony") + f_bytes(7, graph) + opsets
    return model, (h, w, c), classes


def golden(d):
    """(images (N, H, W, C) in 0..1, golden scores (N, classes)) of golden directory @d."""
    if os.path.exists(os.path.join(d, "v2_input.npy")):
        return (np.load(os.path.join(d, "v2_input.npy")).astype("<f4"),
                np.load(os.path.join(d, "v2_qu8_scores.npy")))
    from PIL import Image
    with open(os.path.join(d, "frames.json")) as f:
        names = json.load(f)["names"]
    x = np.stack([np.asarray(Image.open(os.path.join(d, "frames", n + ".png")).convert("RGB"))
                  for n in names]).astype("<f4") / 255.0
    return x, np.load(os.path.join(d, "int8.npy"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=SHIPPED, help="quantised mobilenet_v2 .safetensors")
    ap.add_argument("--ort-dir", required=True, help="directory with node_modules/onnxruntime-node, "
                    "or \"python\": the onnxruntime module of this Python")
    ap.add_argument("--images", type=int, default=50, help="images per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--weights", choices=("int8", "uint8"), default="int8",
                    help="weight type in the graph (default int8: the file's uint8 values "
                    "and zero points - 128, ONNX Runtime's fast x86 path; same arithmetic)")
    ap.add_argument("--golden", help="tests/golden/imagenet (the shipped model) or "
                    "tests/golden/mobilenet (with --model .../v2_qu8.safetensors): check the "
                    "scores against the integer reference's")
    args = ap.parse_args(argv)
    model, (h, w, c), _ = build(args.model, args.weights)
    want = None
    if args.golden:
        x, want = golden(args.golden)
    else:
        x = np.random.default_rng(11).uniform(0, 1, (8, h, w, c)).astype("<f4")
    res = run_node(model, x.reshape(-1, h, w, c).transpose(0, 3, 1, 2), args.ort_dir,
                   args.images, args.rounds, args.golden)
    if res is None:
        return 1
    scores = res.pop("scores")
    res["cpu_ms_per_image"] = res.pop("cpu_ms_per_patch")
    if args.golden:
        got = np.array(scores)
        res["max_diff_vs_golden"] = float(np.abs(got - want).max())
        res["same_top1_as_golden"] = bool((got.argmax(1) == want.argmax(1)).all())
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
