#!/usr/bin/python3
"""Per-patch time of a quantised MobileNet-v1 file (YAMNet with its `quantization`
metadata) in ONNX Runtime's int8 kernels, for bench/RESULTS.md beside `cony bench int8`.

    /usr/bin/python3 training/bench_yamnet_ort.py --model YAMNET_INT8.safetensors \\
        --ort-dir DIR [--patches 200] [--rounds 7] [--golden tests/golden/yamnet]

Writes the network as an ONNX graph (our own protobuf writer below, no onnx package):
QuantizeLinear of the (1, 1, H, W) input, one QLinearConv per conv / depthwise /
pointwise layer with the file's int8 weights, per-channel scales, int32 biases and the
activation scales and zero points of its `quantization` metadata (ReLU6 is the int8
range itself: YAMNet's outputs have zero point -128 and scale 6/255), TensorFlow SAME
padding as explicit pads (activations as uint8 = int8 + 128 by default, ONNX Runtime's
fast x86 path; --activations int8 keeps them int8); then DequantizeLinear, GlobalAveragePool, the FC layer as a
float Gemm (dequantised weights) and Sigmoid (1.5 % of the multiply-adds). ONNX Runtime
runs it through its Node.js binding (npm `onnxruntime-node`, installed with
`npm install --ignore-scripts onnxruntime-node@1.30.0` into DIR: the CPU library is in
the package), one intra-op and one inter-op thread, sequential, all graph
optimisations. Prints one JSON object: cpu_ms_per_patch (median of the rounds, this
process's CPU time), min, the ORT version, and with --golden the largest |score
difference| from ArmNN's golden scores and whether every top-1 agrees (so the timed
graph is known to compute YAMNet).
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

from conytrain import safetensors_io

# --- a minimal protobuf writer for the ONNX messages used here --------------------------


def _varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field, wire):
    return _varint((field << 3) | wire)


def f_int(field, v):
    return _key(field, 0) + _varint(int(v))


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return _key(field, 2) + _varint(len(b)) + b


def f_float(field, v):
    return _key(field, 5) + struct.pack("<f", v)


ONNX_FLOAT, ONNX_UINT8, ONNX_INT8, ONNX_INT32, ONNX_INT64 = 1, 2, 3, 6, 7
_NP = {ONNX_FLOAT: "<f4", ONNX_UINT8: "u1", ONNX_INT8: "i1", ONNX_INT32: "<i4", ONNX_INT64: "<i8"}


def tensor(name, arr, dtype):
    # astype, not ascontiguousarray: that makes a scalar 1-D, which QLinearAdd refuses
    arr = np.asarray(arr).astype(_NP[dtype], order="C")
    msg = b"".join(f_int(1, d) for d in arr.shape)
    return msg + f_int(2, dtype) + f_bytes(8, name) + f_bytes(9, arr.tobytes())


def attr_ints(name, values):
    return f_bytes(1, name) + b"".join(f_int(8, v) for v in values) + f_int(20, 7)


def attr_int(name, value):
    return f_bytes(1, name) + f_int(3, value) + f_int(20, 2)


def node(op, inputs, outputs, attrs=(), domain=None):
    msg = b"".join(f_bytes(1, i) for i in inputs) + b"".join(f_bytes(2, o) for o in outputs)
    msg += f_bytes(4, op) + b"".join(f_bytes(5, a) for a in attrs)
    return msg + (f_bytes(7, domain) if domain else b"")


def value_info(name, dims, elem=ONNX_FLOAT):
    shape = b"".join(f_bytes(1, f_int(1, d)) for d in dims)
    return f_bytes(1, name) + f_bytes(2, f_bytes(1, f_int(1, elem) + f_bytes(2, shape)))


# --- the graph ----------------------------------------------------------------------------


def same_pads(size, stride):
    """(before, after) of TensorFlow SAME padding for a 3x3 kernel."""
    out = -(-size // stride)
    total = max((out - 1) * stride + 3 - size, 0)
    return total // 2, total - total // 2, out


def build(path, activations="uint8"):
    """(ONNX model bytes, (H, W, C)) of a quantised network=mobilenet_v1 file; uint8
    activations are the int8 ones plus 128 (zero points too: the same arithmetic)."""
    act, shift = (ONNX_UINT8, 128) if activations == "uint8" else (ONNX_INT8, 0)
    tensors, meta = safetensors_io.load(path)
    if "quantization" not in meta:
        raise ValueError(f"{path}: no quantization metadata (an int8 file from "
                         "training/convert_tflite.py is needed)")
    quant = json.loads(meta["quantization"])
    words = meta["layers"].split()
    h, w, c = (int(meta[k]) for k in ("input_height", "input_width", "input_channels"))
    inits, nodes = [], []

    def scalar(name, v, dtype):
        inits.append(tensor(name, np.array(v), dtype))
        return name

    s_in, zp_in = quant["input"]
    nodes.append(node("QuantizeLinear", ["input", scalar("in_s", s_in, ONNX_FLOAT),
                                         scalar("in_zp", zp_in + shift, act)], ["q0"]))
    cur, cur_s, cur_zp, hh, ww = "q0", "in_s", "in_zp", h, w
    for i, word in enumerate(words):
        if word == "gap":
            break
        q = quant["layers"][i]
        if q is None:
            raise ValueError(f"{path}: layer {i} is not quantised")
        wt = tensors[f"layers.{i}.weight"]
        ws = tensors[f"layers.{i}.weight_scale"].astype(np.float64)
        s_prev = float(np.float32(quant["input"][0] if i == 0 else quant["layers"][i - 1][0]))
        bias = np.rint(tensors[f"layers.{i}.bias"].astype(np.float64) / (s_prev * ws))
        out_c = wt.shape[0]
        attrs = [attr_ints("kernel_shape", wt.shape[2:])]
        if word != "conv1x1":
            stride = int(word[-1])
            t, b, oh = same_pads(hh, stride)
            l, r, ow = same_pads(ww, stride)
            attrs += [attr_ints("strides", (stride, stride)), attr_ints("pads", (t, l, b, r))]
            hh, ww = oh, ow
        if word.startswith("dw"):
            attrs.append(attr_int("group", out_c))
        p = f"l{i}"
        inits += [tensor(p + "_w", wt, ONNX_INT8), tensor(p + "_ws", ws, ONNX_FLOAT),
                  tensor(p + "_wzp", np.zeros(out_c), ONNX_INT8),
                  tensor(p + "_b", bias, ONNX_INT32)]
        scalar(p + "_ys", q[0], ONNX_FLOAT)
        scalar(p + "_yzp", q[1] + shift, act)
        nodes.append(node("QLinearConv", [cur, cur_s, cur_zp, p + "_w", p + "_ws", p + "_wzp",
                                          p + "_ys", p + "_yzp", p + "_b"], [p], attrs))
        cur, cur_s, cur_zp = p, p + "_ys", p + "_yzp"
    nodes.append(node("DequantizeLinear", [cur, cur_s, cur_zp], ["map"]))
    nodes.append(node("GlobalAveragePool", ["map"], ["pooled"]))
    nodes.append(node("Flatten", ["pooled"], ["emb"]))
    fc = words.index("fc")
    fw = tensors[f"layers.{fc}.weight"].astype(np.float64) * \
        tensors[f"layers.{fc}.weight_scale"].astype(np.float64)[:, None]
    inits += [tensor("fc_w", fw, ONNX_FLOAT), tensor("fc_b", tensors[f"layers.{fc}.bias"],
                                                      ONNX_FLOAT)]
    nodes.append(node("Gemm", ["emb", "fc_w", "fc_b"], ["logits"], [attr_int("transB", 1)]))
    nodes.append(node("Sigmoid", ["logits"], ["scores"]))
    graph = (b"".join(f_bytes(1, n) for n in nodes) + f_bytes(2, "mobilenet")
             + b"".join(f_bytes(5, t) for t in inits)
             + f_bytes(11, value_info("input", (1, c, h, w)))
             + f_bytes(12, value_info("scores", (1, fw.shape[0]))))
    opset = f_bytes(1, "") + f_int(2, 13)
    model = f_int(1, 7) + f_bytes(2, "gst-cony") + f_bytes(7, graph) + f_bytes(8, opset)
    return model, (h, w, c)


NODE_SCRIPT = r"""
const ort = require('onnxruntime-node');
const fs = require('fs');
(async () => {
  const [model, patchesFile, n, rounds, golden, dims] = process.argv.slice(2);
  const shape = dims.split(',').map(Number);
  const opt = { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential',
                graphOptimizationLevel: 'all' };
  const s = await ort.InferenceSession.create(model, opt);
  const raw = fs.readFileSync(patchesFile);
  const all = new Float32Array(raw.buffer, raw.byteOffset, raw.length / 4);
  const per = shape.reduce((a, b) => a * b, 1), count = all.length / per;
  const feed = k => ({ input: new ort.Tensor('float32', all.slice((k % count) * per,
                                                                   (k % count + 1) * per),
                                             shape) });
  for (let k = 0; k < 10; k++) await s.run(feed(k));
  const ms = [];
  for (let r = 0; r < +rounds; r++) {
    const c0 = process.cpuUsage();
    for (let k = 0; k < +n; k++) await s.run(feed(k));
    const c = process.cpuUsage(c0);
    ms.push((c.user + c.system) / 1000 / +n);
  }
  const scores = [];
  if (golden === '1')
    for (let k = 0; k < count; k++) scores.push(Array.from((await s.run(feed(k))).scores.data));
  ms.sort((a, b) => a - b);
  console.log(JSON.stringify({ cpu_ms_per_patch: ms[Math.floor(ms.length / 2)], min: ms[0],
                               rounds: ms, ort: ort.env.versions.common, scores }));
})();
"""


def run_python(model, x, patches, rounds, golden):
    """run_node through ONNX Runtime's Python binding (the `onnxruntime` module, where a
    machine has it and no npm): the same session options, warm-up and CPU-time rounds
    (this process's CPU time: one intra-op thread, so ORT's alone while it runs)."""
    import time
    import onnxruntime as ort
    opt = ort.SessionOptions()
    opt.intra_op_num_threads = opt.inter_op_num_threads = 1
    opt.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opt.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    s = ort.InferenceSession(model, opt, providers=["CPUExecutionProvider"])
    feeds = [{"input": np.ascontiguousarray(v[None], np.float32)} for v in x]
    for k in range(10):
        s.run(None, feeds[k % len(feeds)])
    ms = []
    for _ in range(rounds):
        c0 = time.process_time()
        for k in range(patches):
            s.run(None, feeds[k % len(feeds)])
        ms.append((time.process_time() - c0) * 1e3 / patches)
    ms.sort()
    out = {"cpu_ms_per_patch": ms[len(ms) // 2], "min": ms[0], "rounds": ms,
           "ort": ort.__version__ + " (Python)", "scores": []}
    if golden:
        out["scores"] = [s.run(["scores"], f)[0].reshape(-1).tolist() for f in feeds]
    return out


def run_node(model, x, ort_dir, patches, rounds, golden):
    """ONNX Runtime on @model (bytes) fed the float32 inputs @x (count, then the graph's
    input shape without its batch of 1): the node script's JSON (scores with @golden), or
    None after printing node's error. @ort_dir "python": run_python instead."""
    if ort_dir == "python":
        return run_python(model, x, patches, rounds, golden)
    with tempfile.TemporaryDirectory() as tmp:
        onnx = os.path.join(tmp, "m.onnx")
        with open(onnx, "wb") as f:
            f.write(model)
        np.ascontiguousarray(x, "<f4").tofile(os.path.join(tmp, "patches.f32"))
        script = os.path.join(tmp, "run.js")
        with open(script, "w") as f:
            f.write(NODE_SCRIPT)
        env = dict(os.environ, NODE_PATH=os.path.join(ort_dir, "node_modules"))
        dims = ",".join(str(d) for d in (1,) + tuple(x.shape[1:]))
        r = subprocess.run(["node", script, onnx, os.path.join(tmp, "patches.f32"),
                            str(patches), str(rounds), "1" if golden else "0", dims],
                           capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print(f"ONNX Runtime (node) failed: {r.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="quantised MobileNet-v1 .safetensors")
    ap.add_argument("--ort-dir", required=True, help="directory with node_modules/onnxruntime-node, "
                    "or \"python\": the onnxruntime module of this Python")
    ap.add_argument("--patches", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--activations", choices=("uint8", "int8"), default="uint8",
                    help="activation type in the graph (default uint8, ONNX Runtime's fast "
                    "x86 path; int8 is the same arithmetic)")
    ap.add_argument("--golden", help="tests/golden/yamnet: check the scores against ArmNN's")
    args = ap.parse_args(argv)
    model, (h, w, c) = build(args.model, args.activations)
    if args.golden:
        x = np.load(os.path.join(args.golden, "patches.npy")).astype("<f4")
    else:
        x = np.random.default_rng(11).uniform(-6.9, 1.9, (64, h, w)).astype("<f4")
    res = run_node(model, x.reshape(-1, 1, h, w), args.ort_dir, args.patches, args.rounds,
                   args.golden)
    if res is None:
        return 1
    scores = res.pop("scores")
    if args.golden:
        got = np.array(scores)
        want = np.load(os.path.join(args.golden, "armnn_scores.npy"))
        res["max_diff_vs_armnn"] = float(np.abs(got - want).max())
        res["same_top1_as_armnn"] = bool((got.argmax(1) == want.argmax(1)).all())
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
