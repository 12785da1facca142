"""training/convert_tflite.py: small TFLite flatbuffers built here (python3-flatbuffers'
Builder, an implementation independent of the converter's reader) are converted and
evaluated by the numpy reference (conytrain/ref/mobilenet.py) against a direct NHWC/OHWI
evaluation of the TFLite graph; every refusal path
(unknown and custom operators, bad quantisation, unsupported options, truncated files,
offsets out of range, random corruption) must give a TFLiteError naming the problem.
If the original YAMNet .tflite is present (env YAMNET_TFLITE, default
/work/yamnet_src/yamnet_spectra_in.tflite), its conversion must equal the shipped
models/yamnet/yamnet.safetensors."""

import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

from conytrain import safetensors_io
from conytrain.cnn import convert_tflite
from conytrain.cnn.convert_tflite import TFLiteError
from conytrain.ref import mobilenet

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

try:
    import flatbuffers
except ImportError:          # python3-flatbuffers (scripts/setup.sh installs it)
    flatbuffers = None

FLOAT32, INT32, INT8 = 0, 2, 9
CONV_2D, DEPTHWISE_CONV_2D, DEQUANTIZE, FULLY_CONNECTED = 3, 4, 6, 9
LOGISTIC, RESHAPE, MEAN, SPLIT, QUANTIZE, ADD, MUL = 14, 22, 40, 49, 114, 0, 18
AVERAGE_POOL_2D, SOFTMAX, UINT8 = 1, 25, 3
RELU6 = 3
YAMNET_TFLITE = os.environ.get("YAMNET_TFLITE", "/work/yamnet_src/yamnet_spectra_in.tflite")


# --- a description of a TFLite graph, and its serialisation ----------------------------

class Graph:
    """Lists of tensor and operator dicts that tests can edit before serialise()."""

    def __init__(self):
        self.tensors, self.ops, self.inputs, self.outputs = [], [], [], []
        self.version, self.ident, self.subgraphs = 3, b"TFL3", 1

    def tensor(self, shape, ttype, data=None, scale=None, zero_point=None, qdim=0, name=None):
        self.tensors.append(dict(shape=list(shape), type=ttype, data=data, scale=scale,
                                 zero_point=zero_point, qdim=qdim,
                                 name=name or f"t{len(self.tensors)}"))
        return len(self.tensors) - 1

    def op(self, code, inputs, outputs, opt_type=0, opts=None, custom=None):
        self.ops.append(dict(code=code, inputs=list(inputs), outputs=list(outputs),
                             opt_type=opt_type, opts=opts or {}, custom=custom))
        return len(self.ops) - 1


def _vec_offsets(b, offs):
    b.StartVector(4, len(offs), 4)
    for off in reversed(offs):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


_PREPEND = {"b": "PrependInt8Slot", "B": "PrependUint8Slot", "i": "PrependInt32Slot",
            "f": "PrependFloat32Slot"}


def serialise(g):
    b = flatbuffers.Builder(1024)
    b.ForceDefaults(True)
    # buffers: 0 is the empty sentinel
    buffer_offs, tensor_buffer = [], []
    b.StartObject(3)
    buffer_offs.append(b.EndObject())
    for t in g.tensors:
        if t["data"] is None:
            tensor_buffer.append(0)
            continue
        data = b.CreateByteVector(np.ascontiguousarray(t["data"]).tobytes())
        b.StartObject(3)
        b.PrependUOffsetTRelativeSlot(0, data, 0)
        buffer_offs.append(b.EndObject())
        tensor_buffer.append(len(buffer_offs) - 1)
    tensor_offs = []
    for t, buf in zip(g.tensors, tensor_buffer):
        shape = b.CreateNumpyVector(np.array(t["shape"], "<i4"))
        name = b.CreateString(t["name"])
        quant = None
        if t["scale"] is not None or t["zero_point"] is not None:
            scale = b.CreateNumpyVector(np.array(t["scale"] or [], "<f4"))
            zp = b.CreateNumpyVector(np.array(t["zero_point"] if t["zero_point"] is not None
                                              else [0] * len(t["scale"] or []), "<i8"))
            b.StartObject(7)
            b.PrependUOffsetTRelativeSlot(2, scale, 0)
            b.PrependUOffsetTRelativeSlot(3, zp, 0)
            b.PrependInt32Slot(6, t["qdim"], 0)
            quant = b.EndObject()
        b.StartObject(5)
        b.PrependUOffsetTRelativeSlot(0, shape, 0)
        b.PrependInt8Slot(1, t["type"], 0)
        b.PrependUint32Slot(2, t.get("buffer", buf), 0)
        b.PrependUOffsetTRelativeSlot(3, name, 0)
        if quant is not None:
            b.PrependUOffsetTRelativeSlot(4, quant, 0)
        tensor_offs.append(b.EndObject())
    codes = []
    for o in g.ops:
        key = (o["code"], o["custom"])
        if key not in codes:
            codes.append(key)
    op_offs = []
    for o in g.ops:
        opts = None
        if o["opts"] or o["opt_type"]:
            b.StartObject(max(list(o["opts"]) + [0]) + 1)
            for slot, (fmt, value) in sorted(o["opts"].items()):
                getattr(b, _PREPEND[fmt])(slot, value, 0)
            opts = b.EndObject()
        ins = b.CreateNumpyVector(np.array(o["inputs"], "<i4"))
        outs = b.CreateNumpyVector(np.array(o["outputs"], "<i4"))
        b.StartObject(5)
        b.PrependUint32Slot(0, codes.index((o["code"], o["custom"])), 0)
        b.PrependUOffsetTRelativeSlot(1, ins, 0)
        b.PrependUOffsetTRelativeSlot(2, outs, 0)
        b.PrependUint8Slot(3, o["opt_type"], 0)
        if opts is not None:
            b.PrependUOffsetTRelativeSlot(4, opts, 0)
        op_offs.append(b.EndObject())
    subgraphs = []
    for _ in range(g.subgraphs):
        tv, ov = _vec_offsets(b, tensor_offs), _vec_offsets(b, op_offs)
        iv = b.CreateNumpyVector(np.array(g.inputs, "<i4"))
        outv = b.CreateNumpyVector(np.array(g.outputs, "<i4"))
        b.StartObject(5)
        b.PrependUOffsetTRelativeSlot(0, tv, 0)
        b.PrependUOffsetTRelativeSlot(1, iv, 0)
        b.PrependUOffsetTRelativeSlot(2, outv, 0)
        b.PrependUOffsetTRelativeSlot(3, ov, 0)
        subgraphs.append(b.EndObject())
    code_offs = []
    for code, custom in codes:
        cs = b.CreateString(custom) if custom else None
        b.StartObject(4)
        b.PrependInt8Slot(0, min(code, 127), 0)
        if cs is not None:
            b.PrependUOffsetTRelativeSlot(1, cs, 0)
        b.PrependInt32Slot(2, 1, 0)
        b.PrependInt32Slot(3, code, 0)
        code_offs.append(b.EndObject())
    cv, sv, bv = _vec_offsets(b, code_offs), _vec_offsets(b, subgraphs), _vec_offsets(b, buffer_offs)
    desc = b.CreateString("built by test_convert_tflite")
    b.StartObject(5)
    b.PrependUint32Slot(0, g.version, 0)
    b.PrependUOffsetTRelativeSlot(1, cv, 0)
    b.PrependUOffsetTRelativeSlot(2, sv, 0)
    b.PrependUOffsetTRelativeSlot(3, desc, 0)
    b.PrependUOffsetTRelativeSlot(4, bv, 0)
    b.Finish(b.EndObject(), file_identifier=g.ident)
    return bytes(b.Output())


# --- a tiny YAMNet-shaped network ------------------------------------------------------

H, W, IN_SCALE = 8, 6, 0.05
CHANNELS = [("conv", 3, 2, 4), ("dw", 3, 1, 4), ("conv", 1, 1, 6), ("dw", 3, 2, 6), ("conv", 1, 1, 8)]
CLASSES = 5


def tiny_graph(seed=0):
    """(graph, params): QUANTIZE RESHAPE SPLIT CONV DW CONV DW CONV MEAN FC LOGISTIC DEQUANTIZE
    with int8 per-channel weights and int32 biases; params holds the float weights in TFLite
    layouts for the direct evaluation below."""
    rng = np.random.default_rng(seed)
    g = Graph()
    x = g.tensor([1, H, W], FLOAT32, name="input")
    g.inputs = [x]
    q = g.tensor([1, H, W], INT8, scale=[IN_SCALE], zero_point=[3])
    g.op(QUANTIZE, [x], [q])
    shape = g.tensor([4], INT32, data=np.array([1, H, W, 1], "<i4"))
    r = g.tensor([1, H, W, 1], INT8, scale=[IN_SCALE], zero_point=[3])
    g.op(RESHAPE, [q, shape], [r], 17, {0: ("i", 0)})
    axis = g.tensor([], INT32, data=np.array([3], "<i4"))
    cur = g.tensor([1, H, W, 1], INT8, scale=[IN_SCALE], zero_point=[3])
    g.op(SPLIT, [axis, r], [cur], 35, {0: ("i", 1)})
    params, c_in, h, w = [], 1, H, W
    for kind, k, s, c_out in CHANNELS:
        if kind == "conv":
            wq = rng.integers(-127, 128, (c_out, k, k, c_in)).astype(np.int8)
            qdim, n = 0, c_out
        else:
            wq = rng.integers(-127, 128, (1, k, k, c_in)).astype(np.int8)
            qdim, n = 3, c_in
        ws = rng.uniform(0.002, 0.02, n)
        bias = rng.integers(-3000, 3000, n).astype(np.int32)
        bs = IN_SCALE * ws
        wt = g.tensor(wq.shape, INT8, data=wq, scale=list(ws), zero_point=[0] * n, qdim=qdim)
        bt = g.tensor([n], INT32, data=bias, scale=list(bs), zero_point=[0] * n)
        h, w = -(-h // s), -(-w // s)
        out = g.tensor([1, h, w, n], INT8, scale=[6.0 / 255], zero_point=[-128])
        if kind == "conv":
            g.op(CONV_2D, [cur, wt, bt], [out], 1, {0: ("b", 0), 1: ("i", s), 2: ("i", s),
                                                    3: ("b", RELU6), 4: ("i", 1), 5: ("i", 1)})
        else:
            g.op(DEPTHWISE_CONV_2D, [cur, wt, bt], [out], 2,
                 {0: ("b", 0), 1: ("i", s), 2: ("i", s), 3: ("i", 1), 4: ("b", RELU6),
                  5: ("i", 1), 6: ("i", 1)})
        params.append((kind, s, wq * ws.reshape((-1, 1, 1, 1) if qdim == 0 else (1, 1, 1, -1)),
                       bias * bs))
        cur, c_in = out, n
    axes = g.tensor([2], INT32, data=np.array([1, 2], "<i4"))
    pooled = g.tensor([1, c_in], INT8, scale=[0.02], zero_point=[-128])
    g.op(MEAN, [cur, axes], [pooled], 27, {0: ("b", 0)})
    fw = rng.integers(-127, 128, (CLASSES, c_in)).astype(np.int8)
    fs = 0.03
    fb = rng.integers(-500, 500, CLASSES).astype(np.int32)
    fwt = g.tensor(fw.shape, INT8, data=fw, scale=[fs], zero_point=[0])
    fbt = g.tensor([CLASSES], INT32, data=fb, scale=[0.02 * fs], zero_point=[0])
    logits = g.tensor([1, CLASSES], INT8, scale=[0.1], zero_point=[0])
    g.op(FULLY_CONNECTED, [pooled, fwt, fbt], [logits], 8, {0: ("b", 0)})
    probs = g.tensor([1, CLASSES], INT8, scale=[1 / 256], zero_point=[-128])
    g.op(LOGISTIC, [logits], [probs])
    y = g.tensor([1, CLASSES], FLOAT32, name="output")
    g.op(DEQUANTIZE, [probs], [y])
    g.outputs = [y]
    params.append(("fc", 1, fw * fs, fb * 0.02 * fs))
    return g, params


def direct_forward(params, patch):
    """The tiny graph evaluated in TFLite's own layouts (NHWC activations, OHWI conv and
    1HWC depthwise weights), float64, without the int8 activation rounding."""
    x = patch.reshape(H, W, 1).astype(np.float64)
    for kind, s, wf, bf in params[:-1]:
        k = wf.shape[1]
        oh, ow = -(-x.shape[0] // s), -(-x.shape[1] // s)
        ph = max((oh - 1) * s + k - x.shape[0], 0)
        pw = max((ow - 1) * s + k - x.shape[1], 0)
        xp = np.pad(x, ((ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
        y = np.zeros((oh, ow, wf.shape[0] if kind == "conv" else wf.shape[3]))
        for i in range(k):
            for j in range(k):
                tap = xp[i:i + s * oh:s, j:j + s * ow:s]
                y += tap @ wf[:, i, j, :].T if kind == "conv" else tap * wf[0, i, j, :]
        x = np.clip(y + bf, 0.0, 6.0)
    _, _, wf, bf = params[-1]
    return 1.0 / (1.0 + np.exp(-(wf @ x.mean(axis=(0, 1)) + bf)))


@unittest.skipIf(flatbuffers is None, "python3-flatbuffers is not installed (scripts/setup.sh)")
class ConvertTest(unittest.TestCase):
    def setUp(self):
        self.graph, self.params = tiny_graph()
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def convert(self, g=None, **kw):
        return convert_tflite.convert(serialise(g or self.graph), **kw)

    def refuses(self, g, pattern):
        with self.assertRaisesRegex(TFLiteError, pattern):
            self.convert(g)

    def edited(self):
        return copy.deepcopy(self.graph)

    def op_index(self, g, code, nth=0):
        return [i for i, o in enumerate(g.ops) if o["code"] == code][nth]

    # --- conversions ---
    def test_layers_metadata_and_layouts(self):
        tensors, meta, dtypes = self.convert()
        self.assertEqual(meta["network"], "mobilenet_v1")
        self.assertEqual(meta["layers"], "conv3x3s2 dw3x3s1 conv1x1 dw3x3s2 conv1x1 gap fc sigmoid")
        self.assertEqual((meta["input_height"], meta["input_width"], meta["input_channels"]),
                         ("8", "6", "1"))
        self.assertEqual(meta["activation"], "relu6")
        self.assertEqual(json.loads(meta["frontend"])["log-offset"], 0.001)
        self.assertEqual(tensors["layers.0.weight"].shape, (4, 1, 3, 3))
        self.assertEqual(tensors["layers.1.weight"].shape, (4, 1, 3, 3))
        self.assertEqual(tensors["layers.2.weight"].shape, (6, 4, 1, 1))
        self.assertEqual(tensors["layers.6.weight"].shape, (5, 8))
        self.assertEqual(tensors["layers.6.weight_scale"].tolist(), [np.float32(0.03)] * 5)
        self.assertEqual(dtypes["layers.0.weight"], "I8")
        self.assertNotIn("layers.5.weight", tensors)       # gap has no tensors
        # OHWI -> OIHW: element [o, i, y, x] of the converted tensor is [o, y, x, i] of TFLite's
        wq = self.graph.tensors[self.graph.ops[3]["inputs"][1]]["data"]
        np.testing.assert_array_equal(tensors["layers.0.weight"][2, 0], wq[2, :, :, 0])
        dq = self.graph.tensors[self.graph.ops[4]["inputs"][1]]["data"]
        np.testing.assert_array_equal(tensors["layers.1.weight"][3, 0], dq[0, :, :, 3])

    def test_activation_quantisation(self):
        """--dtype int8 records the input's and each layer output's scale and zero point
        (float32 values, exactly); f32 files and float outputs record none from there on."""
        _, meta, _ = self.convert()
        q = json.loads(meta["quantization"])
        self.assertEqual(q["input"], [float(np.float32(IN_SCALE)), 3])
        relu6 = [float(np.float32(6.0 / 255)), -128]
        self.assertEqual(q["layers"], [relu6] * 5 + [[float(np.float32(0.02)), -128],
                                       [float(np.float32(0.1)), 0], [1 / 256, -128]])
        self.assertNotIn("quantization", self.convert(dtype="f32")[1])
        g = self.edited()                     # a float logits tensor: the table stops there
        fc = g.ops[self.op_index(g, FULLY_CONNECTED)]
        g.tensors[fc["outputs"][0]].update(type=FLOAT32, scale=None, zero_point=None)
        q = json.loads(self.convert(g)[1]["quantization"])
        self.assertEqual(q["layers"][6:], [None, None])

    def check_scores(self, dtype, rtol, atol):
        tensors, meta, dtypes = self.convert(dtype=dtype)
        path = os.path.join(self.tmp.name, "m.safetensors")
        safetensors_io.save(path, tensors, meta, dtypes=dtypes)
        net = mobilenet.load(path)
        rng = np.random.default_rng(3)
        for _ in range(3):
            patch = rng.uniform(-6.9, 3.0, (H, W))
            want = direct_forward(self.params, patch)
            emb, got = mobilenet.forward(net, patch)
            self.assertEqual(emb.shape, (8,))
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)

    def test_int8_file_equals_the_tflite_graph(self):
        self.check_scores("int8", 1e-5, 1e-9)     # the F32 scales are the file's own; F32 biases

    def test_f32_and_f16_files(self):
        self.check_scores("f32", 1e-5, 1e-9)      # float32 rounding of the dequantised weights
        self.check_scores("f16", 0, 5e-3)      # F16 weights: up to 2.4e-4 relative each

    def test_labels(self):
        csv_path = os.path.join(self.tmp.name, "labels.csv")
        with open(csv_path, "w", newline="") as f:
            f.write("index,mid,display_name\r\n" + "".join(
                f'{i},/m/{i},"Name, {i}"\r\n' for i in range(CLASSES)))
        _, meta, _ = self.convert(labels=csv_path)
        self.assertEqual(json.loads(meta["labels"])[4], "Name, 4")
        with open(csv_path, "a") as f:
            f.write("5,/m/5,Extra\n")
        with self.assertRaisesRegex(ValueError, "6 labels for 5 outputs"):
            self.convert(labels=csv_path)

    # --- refusals: operators and options ---
    def test_unknown_operator(self):
        g = self.edited()
        g.ops[self.op_index(g, LOGISTIC)]["code"] = MUL
        self.refuses(g, r"operator 10 \(MUL\): operator not supported")

    def test_custom_operator(self):
        g = self.edited()
        i = self.op_index(g, LOGISTIC)
        g.ops[i].update(code=32, custom="edgetpu-custom-op")
        self.refuses(g, r"operator 10 \(CUSTOM 'edgetpu-custom-op'\)")

    def test_operator_beyond_the_name_table(self):
        g = self.edited()
        g.ops[self.op_index(g, LOGISTIC)]["code"] = 150
        self.refuses(g, r"operator 10 \(builtin operator 150\)")

    def test_split_in_two(self):
        g = self.edited()
        g.ops[self.op_index(g, SPLIT)]["opts"] = {0: ("i", 2)}
        self.refuses(g, r"operator 2 \(SPLIT\): num_splits 2")

    def test_valid_padding_dilation_stride_activation(self):
        for slot, value, pattern in [(0, ("b", 1), "padding VALID"), (4, ("i", 2), "dilation"),
                                     (1, ("i", 3), "strides"), (3, ("b", 1), "RELU differs"),
                                     (3, ("b", 4), "TANH")]:
            g = self.edited()
            g.ops[self.op_index(g, CONV_2D, 1)]["opts"][slot] = value
            self.refuses(g, r"operator 5 \(CONV_2D\): .*" + pattern)

    def test_fc_activation(self):
        g = self.edited()
        g.ops[self.op_index(g, FULLY_CONNECTED)]["opts"] = {0: ("b", RELU6)}
        self.refuses(g, r"operator 9 \(FULLY_CONNECTED\): fused activation RELU6")

    def test_wrong_options_table(self):
        g = self.edited()
        g.ops[self.op_index(g, CONV_2D)]["opt_type"] = 2
        self.refuses(g, r"operator 3 \(CONV_2D\): options of union type 2, expected 1")

    def test_mean_over_other_axes(self):
        g = self.edited()
        axes = g.ops[self.op_index(g, MEAN)]["inputs"][1]
        g.tensors[axes]["data"] = np.array([1, 3], "<i4")
        self.refuses(g, r"operator 8 \(MEAN\): only a mean over H and W")

    def test_not_a_chain(self):
        g = self.edited()
        g.ops[self.op_index(g, DEQUANTIZE)]["inputs"] = [g.ops[self.op_index(g, MEAN)]["outputs"][0]]
        self.refuses(g, r"operator 11 \(DEQUANTIZE\): reads tensor \d+, not the previous operator")

    def test_logistic_not_after_fc(self):
        g = self.edited()
        g.ops.insert(self.op_index(g, MEAN), dict(g.ops[self.op_index(g, LOGISTIC)]))
        mean = self.op_index(g, MEAN)
        g.ops[mean - 1]["inputs"] = list(g.ops[mean - 2]["outputs"])
        g.ops[mean - 1]["outputs"] = list(g.ops[mean - 2]["outputs"])
        self.refuses(g, r"operator 8 \(LOGISTIC\): a logistic is supported only right after")

    def test_depth_multiplier(self):
        g = self.edited()
        i = self.op_index(g, DEPTHWISE_CONV_2D)
        t = g.tensors[g.ops[i]["inputs"][1]]
        t["data"] = np.concatenate([t["data"], t["data"]], axis=3)
        t["shape"] = list(t["data"].shape)
        t["scale"] = t["scale"] * 2
        t["zero_point"] = t["zero_point"] * 2
        self.refuses(g, r"operator 4 \(DEPTHWISE_CONV_2D\): weight \[1, 3, 3, 8\]")

    # --- refusals: quantisation ---
    def weight(self, g, code=CONV_2D, nth=1):
        return g.tensors[g.ops[self.op_index(g, code, nth)]["inputs"][1]]

    def test_nonzero_weight_zero_point(self):
        g = self.edited()
        self.weight(g)["zero_point"][2] = 5
        self.refuses(g, r"operator 5 \(CONV_2D\): .*non-zero weight zero point")

    def test_missing_scales(self):
        g = self.edited()
        self.weight(g)["scale"] = []
        self.refuses(g, r"operator 5 \(CONV_2D\): int8 .* has no quantisation scales")
        g = self.edited()
        w = self.weight(g)
        w["scale"], w["zero_point"] = None, None
        self.refuses(g, r"operator 5 \(CONV_2D\): int8 .* has no quantisation scales")

    def test_scales_on_the_wrong_dimension_or_count(self):
        g = self.edited()
        self.weight(g)["qdim"] = 3
        self.refuses(g, r"6 scales on dimension 3: expected 1 or 6 on dimension 0")
        g = self.edited()
        w = self.weight(g)
        w["scale"], w["zero_point"] = w["scale"][:4], w["zero_point"][:4]
        self.refuses(g, r"4 scales on dimension 0: expected 1 or 6")

    def test_bad_scale_values(self):
        for bad in (0.0, -0.5, float("nan"), float("inf")):
            g = self.edited()
            self.weight(g, DEPTHWISE_CONV_2D, 0)["scale"][1] = bad
            self.refuses(g, r"operator 4 \(DEPTHWISE_CONV_2D\): .*scales must be finite and > 0")

    def test_bias_without_scales(self):
        g = self.edited()
        b = g.tensors[g.ops[self.op_index(g, CONV_2D)]["inputs"][2]]
        b["scale"], b["zero_point"] = None, None
        self.refuses(g, r"operator 3 \(CONV_2D\): int32 bias .* needs 1 or 4 finite scales")

    def test_uint8_weights(self):
        """uint8 asymmetric weights (q - zero point) x scale: kept as U8 with their zero
        points (--dtype auto), the same function as the int8 graph they shift by 128."""
        g = self.edited()
        for nth in range(2):
            w = self.weight(g, nth=nth)
            w["type"] = 3
            w["data"] = (w["data"].astype(np.int16) + 128).astype(np.uint8)
            w["zero_point"] = [128] * len(w["zero_point"])
        tensors, meta, dtypes = self.convert(g, dtype="auto")
        self.assertEqual(dtypes["layers.2.weight"], "U8")
        self.assertEqual(tensors["layers.2.weight_zero_point"].tolist(), [128] * 6)
        path = os.path.join(self.tmp.name, "u8.safetensors")
        safetensors_io.save(path, tensors, meta, dtypes=dtypes)
        patch = np.random.default_rng(4).uniform(-6.9, 3.0, (H, W))
        np.testing.assert_allclose(mobilenet.forward(mobilenet.load(path), patch)[1],
                                   direct_forward(self.params, patch), rtol=1e-5, atol=1e-9)
        self.weight(g)["zero_point"] = [300] * len(self.weight(g)["zero_point"])
        self.refuses(g, r"operator 5 \(CONV_2D\): .*zero points in 0..255")

    # --- refusals: the file itself ---
    def test_not_tflite(self):
        with self.assertRaisesRegex(TFLiteError, "not a TFLite model"):
            convert_tflite.convert(b"\x10\x00\x00\x00GGUF" + bytes(64))
        with self.assertRaisesRegex(TFLiteError, "too short"):
            convert_tflite.convert(b"TFL3")
        g = self.edited()
        g.version = 2
        self.refuses(g, "schema version 2")
        g = self.edited()
        g.subgraphs = 2
        self.refuses(g, "2 subgraphs")

    def test_truncated(self):
        raw = serialise(self.graph)
        for n in list(range(0, 64)) + list(range(64, len(raw), 13)):
            with self.assertRaises(TFLiteError, msg=f"{n} of {len(raw)} bytes"):
                convert_tflite.convert(raw[:n])

    def test_offsets_out_of_range(self):
        raw = bytearray(serialise(self.graph))
        for pos, value, pattern in [(0, 0xFFFFFF00, "outside the file"),
                                    (0, len(raw) - 2, "outside the file")]:
            bad = bytearray(raw)
            bad[pos:pos + 4] = value.to_bytes(4, "little")
            with self.assertRaisesRegex(TFLiteError, pattern):
                convert_tflite.convert(bytes(bad))
        # the root table's vtable pointer sent before the start of the file
        (root,) = np.frombuffer(raw[:4], "<u4")
        bad = bytearray(raw)
        bad[root:root + 4] = int(root + 1000).to_bytes(4, "little", signed=True)
        with self.assertRaisesRegex(TFLiteError, "model: vtable: offset -"):
            convert_tflite.convert(bytes(bad))
        # a vector length far beyond the file (the first tensor's shape vector)
        g = self.edited()
        g.tensors[0]["shape"] = [1, H, 123457]
        raw = bytearray(serialise(g))
        at = raw.find(np.array([1, H, 123457], "<i4").tobytes()) - 4
        raw[at:at + 4] = (10 ** 9).to_bytes(4, "little")
        with self.assertRaisesRegex(TFLiteError, r"shape \(1000000000 elements\).*outside the file"):
            convert_tflite.convert(bytes(raw))
        # a tensor whose buffer index does not exist
        g = self.edited()
        g.tensors[5]["buffer"] = 999
        self.refuses(g, r"tensor 5 \(t5\): buffer 999 does not exist")
        # an operator whose tensor index does not exist
        g = self.edited()
        g.ops[3]["inputs"][1] = 4000
        self.refuses(g, r"operator 3 \(CONV_2D\): tensor index 4000 out of range")

    def test_random_corruption_never_crashes(self):
        raw = serialise(self.graph)
        rng = np.random.default_rng(11)
        refused = 0
        for _ in range(400):
            bad = bytearray(raw)
            for pos in rng.integers(8, len(raw), int(rng.integers(1, 4))):
                bad[pos] = int(rng.integers(0, 256))
            try:
                convert_tflite.convert(bytes(bad))
            except TFLiteError:
                refused += 1
        self.assertGreater(refused, 50)

    def test_command_line_error_is_one_line(self):
        path = os.path.join(self.tmp.name, "cut.tflite")
        with open(path, "wb") as f:
            f.write(serialise(self.graph)[:300])
        p = subprocess.run([sys.executable, os.path.join(ROOT, "training", "convert_tflite.py"), path,
                            "-o", os.path.join(self.tmp.name, "x.safetensors")],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertNotIn("Traceback", p.stderr)
        self.assertRegex(p.stderr, r"^convert_tflite: .*cut.tflite: .*truncated or corrupt\n$")
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "x.safetensors")))


def v2_graph(seed=1):
    """(graph, params): an image classifier as the ImageNet MobileNet-v2s are built: uint8
    (1, 8, 8, 3) input (scale 1/128, zero point 128), CONV 3x3 s2 RELU6, one inverted
    residual block (CONV 1x1 RELU6, DEPTHWISE 3x3 RELU6, CONV 1x1 without activation, ADD
    of the block input), AVERAGE_POOL_2D over the map, CONV 1x1 (the logits), RESHAPE,
    SOFTMAX; float32 weights (params: TFLite layouts)."""
    rng = np.random.default_rng(seed)
    g = Graph()
    x = g.tensor([1, 8, 8, 3], UINT8, scale=[1 / 128], zero_point=[128], name="input")
    g.inputs = [x]
    params = {}

    def conv(cur, name, shape, stride, act, depthwise=False):
        wt = rng.normal(0, 0.5, shape).astype(np.float32)
        bt = rng.normal(0, 0.1, shape[3] if depthwise else shape[0]).astype(np.float32)
        params[name] = (wt, bt)
        h = g.tensors[cur]["shape"][1]
        n = shape[3] if depthwise else shape[0]
        out = g.tensor([1, -(-h // stride), -(-h // stride), n], FLOAT32)
        w_i, b_i = g.tensor(shape, FLOAT32, data=wt), g.tensor([n], FLOAT32, data=bt)
        if depthwise:
            g.op(DEPTHWISE_CONV_2D, [cur, w_i, b_i], [out], 2,
                 {0: ("b", 0), 1: ("i", stride), 2: ("i", stride), 3: ("i", 1),
                  4: ("b", act), 5: ("i", 1), 6: ("i", 1)})
        else:
            g.op(CONV_2D, [cur, w_i, b_i], [out], 1, {0: ("b", 0), 1: ("i", stride),
                                                     2: ("i", stride), 3: ("b", act),
                                                     4: ("i", 1), 5: ("i", 1)})
        return out

    c0 = conv(x, "stem", (4, 3, 3, 3), 2, RELU6)
    e = conv(c0, "expand", (8, 1, 1, 4), 1, RELU6)
    d = conv(e, "dw", (1, 3, 3, 8), 1, RELU6, depthwise=True)
    p = conv(d, "project", (4, 1, 1, 8), 1, 0)
    added = g.tensor([1, 4, 4, 4], FLOAT32)
    g.op(ADD, [p, c0], [added], 11, {0: ("b", 0)})
    pooled = g.tensor([1, 1, 1, 4], FLOAT32)
    g.op(AVERAGE_POOL_2D, [added], [pooled], 5, {0: ("b", 1), 1: ("i", 1), 2: ("i", 1),
                                                 3: ("i", 4), 4: ("i", 4), 5: ("b", 0)})
    logits = conv(pooled, "logits", (CLASSES, 1, 1, 4), 1, 0)
    shape = g.tensor([2], INT32, data=np.array([1, CLASSES], "<i4"))
    flat = g.tensor([1, CLASSES], FLOAT32)
    g.op(RESHAPE, [logits, shape], [flat], 17, {0: ("i", 0)})
    y = g.tensor([1, CLASSES], FLOAT32, name="output")
    g.op(SOFTMAX, [flat], [y], 9, {0: ("f", 1.0)})
    g.outputs = [y]
    return g, params


def v2_direct(params, image):
    """v2_graph evaluated in TFLite's layouts, float64, from uint8 pixels."""
    def conv(x, name, stride, act, depthwise=False):
        wt, bt = (v.astype(np.float64) for v in params[name])
        k = wt.shape[1]
        oh = -(-x.shape[0] // stride)
        pad = max((oh - 1) * stride + k - x.shape[0], 0)
        xp = np.pad(x, ((pad // 2, pad - pad // 2), (pad // 2, pad - pad // 2), (0, 0)))
        y = np.zeros((oh, oh, wt.shape[3] if depthwise else wt.shape[0]))
        for i in range(k):
            for j in range(k):
                tap = xp[i:i + stride * oh:stride, j:j + stride * oh:stride]
                y += tap * wt[0, i, j, :] if depthwise else tap @ wt[:, i, j, :].T
        y += bt
        return np.clip(y, 0.0, 6.0) if act else y

    x = (image.astype(np.float64) - 128.0) / 128.0
    c0 = conv(x, "stem", 2, True)
    y = conv(conv(conv(c0, "expand", 1, True), "dw", 1, True, True), "project", 1, False) + c0
    logits = conv(y.mean(axis=(0, 1)).reshape(1, 1, -1), "logits", 1, False).reshape(-1)
    e = np.exp(logits - logits.max())
    return e / e.sum()


@unittest.skipIf(flatbuffers is None, "python3-flatbuffers is not installed (scripts/setup.sh)")
class ConvertImageTest(unittest.TestCase):
    """An ImageNet-style MobileNet-v2 graph: the mobilenet_v2 words, the image input's
    metadata, and the converted file's function (numpy reference on pixels / 255)."""

    def test_v2_graph(self):
        g, params = v2_graph()
        tensors, meta, dtypes = convert_tflite.convert(serialise(g), dtype="f32", frontend="none")
        self.assertEqual(meta["network"], "mobilenet_v2")
        self.assertEqual(meta["layers"],
                         "conv3x3s2 conv1x1 dw3x3s1 linear1x1 add@0 gap fc softmax")
        self.assertEqual(json.loads(meta["input_quantization"]),
                         {"dtype": "uint8", "scale": 1 / 128, "zero_point": 128})
        self.assertAlmostEqual(float(meta["input_mean"]), 128 / 255)
        self.assertAlmostEqual(float(meta["input_std"]), 128 / 255)
        self.assertEqual((meta["input_kind"], meta["channel_order"]), ("image", "RGB"))
        self.assertNotIn("frontend", meta)
        self.assertEqual(tensors["layers.6.weight"].shape, (CLASSES, 4))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "v2.safetensors")
            safetensors_io.save(path, tensors, meta, dtypes=dtypes)
            net = mobilenet.load(path)
        image = np.random.default_rng(5).integers(0, 256, (8, 8, 3))
        np.testing.assert_allclose(mobilenet.forward(net, image / 255.0)[1],
                                   v2_direct(params, image), rtol=1e-5, atol=1e-7)

    def test_v2_uint8_quantization(self):
        """A uint8 graph (TF1's ImageNet files): every activation's (scale, zero point)
        recorded as int8 (zero point - 128), the input's from the uint8 input tensor, the
        int32 biases as bias_quantized, the uint8 weights kept; --dtype int8, which
        requantises the weights, records neither."""
        g, _ = v2_graph()
        for k, op in enumerate(g.ops):
            out = g.tensors[op["outputs"][0]]
            last = op["code"] == SOFTMAX
            out.update(type=UINT8, scale=[1 / 256 if last else 0.05 + 0.01 * k],
                       zero_point=[0 if last else 100 + k])
        for op in g.ops:
            if op["code"] not in (CONV_2D, DEPTHWISE_CONV_2D):
                continue
            s_in = g.tensors[op["inputs"][0]]["scale"][0]
            w, b = (g.tensors[i] for i in op["inputs"][1:3])
            real = w["data"].astype(np.float64)
            lo, hi = min(real.min(), 0.0), max(real.max(), 0.0)
            sw = (hi - lo) / 255
            zw = int(round(-lo / sw))
            w.update(type=UINT8, scale=[sw], zero_point=[zw],
                     data=np.clip(np.rint(real / sw) + zw, 0, 255).astype(np.uint8))
            q = np.rint(b["data"].astype(np.float64) / (s_in * sw)).astype("<i4")
            b.update(type=INT32, scale=[float(np.float32(s_in * sw))], zero_point=[0], data=q)
        tensors, meta, dtypes = convert_tflite.convert(serialise(g), frontend="none")
        q = json.loads(meta["quantization"])
        self.assertEqual(q["input"], [1 / 128, 0])
        words = meta["layers"].split()
        self.assertEqual(len(q["layers"]), len(words))
        # ops 0-3 conv, 4 add, 5 pool, 6 logits conv (fc; 7 reshape: no word), 8 softmax
        want = [[float(np.float32(0.05 + 0.01 * k)), 100 + k - 128] for k in (0, 1, 2, 3, 4, 5)]
        want += [[float(np.float32(0.05 + 0.01 * 6)), 106 - 128], [1 / 256, -128]]
        self.assertEqual(q["layers"], want)
        for i, word in enumerate(words):
            if word in ("conv3x3s2", "conv1x1", "dw3x3s1", "linear1x1", "fc"):
                self.assertEqual(dtypes[f"layers.{i}.weight"], "U8")
                self.assertEqual(dtypes[f"layers.{i}.bias_quantized"], "I64")
        op = g.ops[0]
        np.testing.assert_array_equal(tensors["layers.0.bias_quantized"],
                                      g.tensors[op["inputs"][2]]["data"])
        tensors, meta, _ = convert_tflite.convert(serialise(g), dtype="int8", frontend="none")
        self.assertNotIn("quantization", meta)
        self.assertFalse(any(k.endswith("bias_quantized") for k in tensors))

    def test_v2_refusals(self):
        g, _ = v2_graph()
        g.ops[4]["opts"][0] = ("b", RELU6)              # ADD with a fused activation
        with self.assertRaisesRegex(TFLiteError, r"operator 4 \(ADD\): a fused activation"):
            convert_tflite.convert(serialise(g), frontend="none")
        g, _ = v2_graph()
        g.ops[5]["opts"][3] = ("i", 2)                  # a 2x2 pool, not the whole map
        with self.assertRaisesRegex(TFLiteError, r"AVERAGE_POOL_2D\): only an average pool"):
            convert_tflite.convert(serialise(g), frontend="none")
        g, _ = v2_graph()
        g.ops[8]["opts"][0] = ("f", 2.0)                # softmax beta 2
        with self.assertRaisesRegex(TFLiteError, r"SOFTMAX\): softmax beta 2"):
            convert_tflite.convert(serialise(g), frontend="none")


@unittest.skipUnless(os.path.exists(YAMNET_TFLITE), f"{YAMNET_TFLITE} is not present (not in the "
                     "repository; see models/yamnet/NOTICE)")
class RealYamnetTest(unittest.TestCase):
    def test_conversion_equals_the_shipped_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "yamnet.safetensors")
            rc = convert_tflite.main([YAMNET_TFLITE, "--labels", os.path.join(ROOT, "models", "yamnet",
                                      "labels.csv"), "-o", out, "--source", SHIPPED_SOURCE,
                                      "--dtype", "int8"])
            self.assertEqual(rc, 0)
            got, got_meta = safetensors_io.load(out)
        want, want_meta = safetensors_io.load(os.path.join(ROOT, "models", "yamnet", "yamnet.safetensors"))
        # the shipped file leaves out the activation quantisation (it stays float: the
        # classifiers pin its bytes); the tests add it from this golden
        with open(os.path.join(ROOT, "tests", "golden", "yamnet", "quantization.json")) as f:
            self.assertEqual(json.loads(got_meta.pop("quantization")), json.load(f))
        self.assertEqual(got_meta, want_meta)
        # the converter also writes the int32 biases; the shipped file (pinned) has none,
        # and the integer path derives them from its F32 biases, exact below 2^24
        for k in [k for k in got if k.endswith(".bias_quantized")]:
            q = got.pop(k)
            self.assertLess(int(np.abs(q).max()), 1 << 24, k)
        self.assertEqual(sorted(got), sorted(want))
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)
        self.assertEqual(sum(v.size for k, v in got.items() if not k.endswith("_scale")), 3729481)


SHIPPED_SOURCE = ("google-coral/coralmicro c9f665b0a8b973d35cb9d383b3e92e9f14b4dd72 "
                  "models/yamnet_spectra_in.tflite")

if __name__ == "__main__":
    unittest.main()
