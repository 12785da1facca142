#!/usr/bin/python3
"""Convert a MobileNet-v1/v2 TFLite model (YAMNet, ImageNet classifiers) into the safetensors file libcony's CNN
engine loads (docs/model-format.md, "MobileNet-v1 networks").

  /usr/bin/python3 training/convert_tflite.py yamnet_spectra_in.tflite \
      --labels models/yamnet/labels.csv -o models/yamnet/yamnet.safetensors

The .tflite flatbuffer is read by the small reader below, written from TFLite's public
schema (tensorflow/lite/schema/schema.fbs, version 3); no TensorFlow is needed. Every
offset and length is bounds-checked, so a truncated or hostile file is refused with a
TFLiteError (a clear message), never a crash.

The graph must be one chain of these operators (anything else is refused, naming the
operator and its index):
  QUANTIZE, DEQUANTIZE      no-ops (the engine computes in float)
  RESHAPE                   before the first convolution: gives the (1, H, W, C) input;
                            after MEAN: a flatten
  SPLIT with num_splits 1   a no-op
  CONV_2D                   3x3 stride 1/2 -> conv3x3s1/s2; 1x1 stride 1 -> conv1x1
  DEPTHWISE_CONV_2D         3x3 stride 1/2, multiplier 1 -> dw3x3s1/s2
  MEAN over H and W         gap
  FULLY_CONNECTED           fc (no fused activation)
  LOGISTIC                  sigmoid
Convolutions must use SAME padding, equal strides, no dilation, and all the same fused
activation (RELU6 or RELU). Weights: TFLite's conv OHWI and depthwise 1HWC become torch's
(out, in, kh, kw) and (C, 1, kh, kw); int8 weights must be symmetric (zero point 0) with
one scale per output channel (or one per tensor); int32 biases are dequantised to F32
with their own scales (input scale x weight scale).

--dtype auto (default) keeps quantised weights as the file has them (int8 with
layers.{i}.weight_scale, or uint8 with weight_scale and weight_zero_point; float weights
are quantised to int8 symmetric per output channel); int8 stores every weight as int8 per
channel; f16 / f32 store the dequantised weights. When the weights are the file's own and
the graph is integer (a uint8/int8 input or a QUANTIZE of it, uint8/int8 layer outputs),
the `quantization` metadata records the input's and every layer output's activation scale
and zero point (uint8 ones as int8: zero point - 128), so libcony can run TFLite's integer
inference (from the first layer with a float output on, the layers are left to float).
--labels takes a class map CSV (index,mid,display_name; YAMNet's) whose rows
must match the number of outputs. --frontend records the log-mel front end the network
expects (default yamnet; "none" records nothing, which declares VGGish's).
"""

import argparse
import csv
import hashlib
import json
import math
import os
import struct
import sys

import numpy as np

from conytrain import safetensors_io


class TFLiteError(ValueError):
    """A .tflite file that cannot be read or converted (message says why)."""


# --- schema constants (tensorflow/lite/schema/schema.fbs) ------------------------------

OPS = {0: "ADD", 1: "AVERAGE_POOL_2D", 3: "CONV_2D", 4: "DEPTHWISE_CONV_2D", 6: "DEQUANTIZE",
       9: "FULLY_CONNECTED", 14: "LOGISTIC", 22: "RESHAPE", 25: "SOFTMAX", 40: "MEAN",
       49: "SPLIT", 114: "QUANTIZE"}
# The BuiltinOperator enum's names 0..126, so that a refusal names the operator.
BUILTIN_NAMES = """ADD AVERAGE_POOL_2D CONCATENATION CONV_2D DEPTHWISE_CONV_2D DEPTH_TO_SPACE
DEQUANTIZE EMBEDDING_LOOKUP FLOOR FULLY_CONNECTED HASHTABLE_LOOKUP L2_NORMALIZATION L2_POOL_2D
LOCAL_RESPONSE_NORMALIZATION LOGISTIC LSH_PROJECTION LSTM MAX_POOL_2D MUL RELU RELU_N1_TO_1 RELU6
RESHAPE RESIZE_BILINEAR RNN SOFTMAX SPACE_TO_DEPTH SVDF TANH CONCAT_EMBEDDINGS SKIP_GRAM CALL CUSTOM
EMBEDDING_LOOKUP_SPARSE PAD UNIDIRECTIONAL_SEQUENCE_RNN GATHER BATCH_TO_SPACE_ND SPACE_TO_BATCH_ND
TRANSPOSE MEAN SUB DIV SQUEEZE UNIDIRECTIONAL_SEQUENCE_LSTM STRIDED_SLICE BIDIRECTIONAL_SEQUENCE_RNN
EXP TOPK_V2 SPLIT LOG_SOFTMAX DELEGATE BIDIRECTIONAL_SEQUENCE_LSTM CAST PRELU MAXIMUM ARG_MAX
MINIMUM LESS NEG PADV2 GREATER GREATER_EQUAL LESS_EQUAL SELECT SLICE SIN TRANSPOSE_CONV
SPARSE_TO_DENSE TILE EXPAND_DIMS EQUAL NOT_EQUAL LOG SUM SQRT RSQRT SHAPE POW ARG_MIN FAKE_QUANT
REDUCE_PROD REDUCE_MAX PACK LOGICAL_OR ONE_HOT LOGICAL_AND LOGICAL_NOT UNPACK REDUCE_MIN FLOOR_DIV
REDUCE_ANY SQUARE ZEROS_LIKE FILL FLOOR_MOD RANGE RESIZE_NEAREST_NEIGHBOR LEAKY_RELU
SQUARED_DIFFERENCE MIRROR_PAD ABS SPLIT_V UNIQUE CEIL REVERSE_V2 ADD_N GATHER_ND COS WHERE RANK ELU
REVERSE_SEQUENCE MATRIX_DIAG QUANTIZE MATRIX_SET_DIAG ROUND HARD_SWISH IF WHILE
NON_MAX_SUPPRESSION_V4 NON_MAX_SUPPRESSION_V5 SCATTER_ND SELECT_V2 DENSIFY SEGMENT_SUM
BATCH_MATMUL""".split()
_PLACEHOLDER_FOR_GREATER_OP_CODES = 127
TENSOR_TYPES = {0: ("FLOAT32", "<f4"), 1: ("FLOAT16", "<f2"), 2: ("INT32", "<i4"),
                3: ("UINT8", "u1"), 4: ("INT64", "<i8"), 7: ("INT16", "<i2"),
                9: ("INT8", "i1"), 10: ("FLOAT64", "<f8")}
ACTIVATIONS = {0: None, 1: "relu", 3: "relu6"}
ACTIVATION_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
PADDING_SAME = 0
# BuiltinOptions union member of each operator that reads options.
OPTIONS_TYPES = {"CONV_2D": 1, "DEPTHWISE_CONV_2D": 2, "AVERAGE_POOL_2D": 5, "FULLY_CONNECTED": 8,
                 "SOFTMAX": 9, "ADD": 11, "RESHAPE": 17, "MEAN": 27, "SPLIT": 35}

# Field slots (a union takes two: its type, then its value).
MODEL_VERSION, MODEL_OPCODES, MODEL_SUBGRAPHS, MODEL_DESCRIPTION, MODEL_BUFFERS = 0, 1, 2, 3, 4
OPCODE_DEPRECATED, OPCODE_CUSTOM, OPCODE_BUILTIN = 0, 1, 3
SUBGRAPH_TENSORS, SUBGRAPH_INPUTS, SUBGRAPH_OUTPUTS, SUBGRAPH_OPERATORS = 0, 1, 2, 3
TENSOR_SHAPE, TENSOR_TYPE, TENSOR_BUFFER, TENSOR_NAME, TENSOR_QUANT, TENSOR_SPARSITY = 0, 1, 2, 3, 4, 6
QUANT_SCALE, QUANT_ZERO_POINT, QUANT_DETAILS_TYPE, QUANT_DIM = 2, 3, 4, 6
OP_OPCODE, OP_INPUTS, OP_OUTPUTS, OP_OPTIONS_TYPE, OP_OPTIONS = 0, 1, 2, 3, 4
BUFFER_DATA, BUFFER_OFFSET, BUFFER_SIZE = 0, 1, 2

YAMNET_FRONTEND = {"name": "yamnet", "sample-rate": 16000, "window-length": 400,
                   "hop-length": 160, "fft-length": 512, "n-mels": 64, "fmin": 125.0,
                   "fmax": 7500.0, "log-offset": 0.001}
VGGISH_FRONTEND = dict(YAMNET_FRONTEND, name="vggish", **{"log-offset": 0.01})
FRONTENDS = {"yamnet": YAMNET_FRONTEND, "vggish": VGGISH_FRONTEND}


# --- a bounds-checked flatbuffer reader -----------------------------------------------

class Table:
    """A flatbuffer table at byte position pos of buf; `what` names it in errors."""

    def __init__(self, buf, pos, what):
        self.buf, self.pos, self.what = buf, pos, what
        _need(buf, pos, 4, what)
        (soff,) = struct.unpack_from("<i", buf, pos)
        vt = pos - soff
        _need(buf, vt, 4, f"{what}: vtable")
        vt_size, tbl_size = struct.unpack_from("<HH", buf, vt)
        if vt_size < 4 or vt_size % 2:
            raise TFLiteError(f"{what}: bad vtable size {vt_size}")
        _need(buf, vt, vt_size, f"{what}: vtable")
        _need(buf, pos, max(tbl_size, 4), what)
        self.fields = struct.unpack_from(f"<{(vt_size - 4) // 2}H", buf, vt + 4)
        self.size = tbl_size

    def _field(self, slot, width):
        """Absolute position of field `slot` (None if absent), checked to lie inside the table."""
        if slot >= len(self.fields) or self.fields[slot] == 0:
            return None
        off = self.fields[slot]
        if off + width > self.size:
            raise TFLiteError(f"{self.what}: field {slot} lies outside its table")
        return self.pos + off

    def scalar(self, slot, fmt, default=0):
        p = self._field(slot, struct.calcsize(fmt))
        return default if p is None else struct.unpack_from("<" + fmt, self.buf, p)[0]

    def _ref(self, slot):
        p = self._field(slot, 4)
        if p is None:
            return None
        (off,) = struct.unpack_from("<I", self.buf, p)
        if off == 0:
            raise TFLiteError(f"{self.what}: field {slot} has a null offset")
        return p + off

    def table(self, slot, what):
        p = self._ref(slot)
        return None if p is None else Table(self.buf, p, f"{self.what}.{what}")

    def _vector(self, slot, elem_size, what):
        p = self._ref(slot)
        if p is None:
            return None, 0
        _need(self.buf, p, 4, f"{self.what}.{what}")
        (n,) = struct.unpack_from("<I", self.buf, p)
        _need(self.buf, p + 4, n * elem_size, f"{self.what}.{what} ({n} elements)")
        return p + 4, n

    def array(self, slot, dtype, what):
        """A vector of scalars as a numpy array (empty if absent)."""
        dt = np.dtype(dtype)
        start, n = self._vector(slot, dt.itemsize, what)
        if start is None:
            return np.zeros(0, dt)
        return np.frombuffer(self.buf, dt, n, start)

    def tables(self, slot, what):
        start, n = self._vector(slot, 4, what)
        out = []
        for i in range(n):
            p = start + 4 * i
            (off,) = struct.unpack_from("<I", self.buf, p)
            if off == 0:
                raise TFLiteError(f"{self.what}.{what}[{i}]: null offset")
            out.append(Table(self.buf, p + off, f"{self.what}.{what}[{i}]"))
        return out

    def string(self, slot, what):
        start, n = self._vector(slot, 1, what)
        if start is None:
            return ""
        return bytes(self.buf[start:start + n]).decode("utf-8", "replace")


def _need(buf, pos, n, what):
    if pos < 0 or n < 0 or pos + n > len(buf):
        raise TFLiteError(f"{what}: offset {pos} + {n} bytes is outside the file "
                          f"({len(buf)} bytes): truncated or corrupt")


# --- the TFLite model as plain Python objects -----------------------------------------

class Tensor:
    def __init__(self, index, t, buffers, buf):
        self.index = index
        self.name = t.string(TENSOR_NAME, "name")
        self.shape = tuple(int(v) for v in t.array(TENSOR_SHAPE, "<i4", "shape"))
        code = t.scalar(TENSOR_TYPE, "b")
        if code not in TENSOR_TYPES:
            raise TFLiteError(f"tensor {index} ({self.name}): unsupported type {code}")
        self.type, self.dtype = TENSOR_TYPES[code]
        if t.table(TENSOR_SPARSITY, "sparsity") is not None:
            raise TFLiteError(f"tensor {index} ({self.name}): sparse tensors are not supported")
        if any(d < 0 for d in self.shape):
            raise TFLiteError(f"tensor {index} ({self.name}): negative dimension in {self.shape}")
        self.scale = np.zeros(0, np.float32)
        self.zero_point = np.zeros(0, np.int64)
        self.quantized_dimension = 0
        q = t.table(TENSOR_QUANT, "quantization")
        if q is not None:
            if q.scalar(QUANT_DETAILS_TYPE, "B") != 0:
                raise TFLiteError(f"tensor {index} ({self.name}): custom quantization is not supported")
            self.scale = q.array(QUANT_SCALE, "<f4", "scale").astype(np.float64)
            self.zero_point = q.array(QUANT_ZERO_POINT, "<i8", "zero_point")
            self.quantized_dimension = q.scalar(QUANT_DIM, "i")
        b = t.scalar(TENSOR_BUFFER, "I")
        if b >= len(buffers):
            raise TFLiteError(f"tensor {index} ({self.name}): buffer {b} does not exist "
                              f"({len(buffers)} buffers)")
        self.data = _buffer_bytes(buffers[b], buf, f"buffer {b}")

    def constant(self):
        """The tensor's values as a numpy array of its shape, or None if it has no data."""
        if not self.data:
            return None
        count = math.prod(self.shape)
        dt = np.dtype(self.dtype)
        if len(self.data) != count * dt.itemsize:
            raise TFLiteError(f"tensor {self.index} ({self.name}): {len(self.data)} bytes of data "
                              f"for shape {self.shape} of {self.type}")
        return np.frombuffer(self.data, dt).reshape(self.shape)

    def describe(self):
        return f"tensor {self.index} ({self.name}, {self.type} {list(self.shape)})"


def _buffer_bytes(b, buf, what):
    start, n = b._vector(BUFFER_DATA, 1, "data")
    if start is not None:
        return bytes(buf[start:start + n])
    off, size = b.scalar(BUFFER_OFFSET, "Q"), b.scalar(BUFFER_SIZE, "Q")
    if off > 1:     # data stored after the flatbuffer (models over 2 GB)
        _need(buf, off, size, what)
        return bytes(buf[off:off + size])
    return b""


class Operator:
    def __init__(self, index, op, opcodes, n_tensors):
        self.index = index
        k = op.scalar(OP_OPCODE, "I")
        if k >= len(opcodes):
            raise TFLiteError(f"operator {index}: opcode index {k} out of range ({len(opcodes)} codes)")
        self.code, self.name = opcodes[k]
        self.inputs = [int(v) for v in op.array(OP_INPUTS, "<i4", "inputs")]
        self.outputs = [int(v) for v in op.array(OP_OUTPUTS, "<i4", "outputs")]
        for t in self.inputs + self.outputs:
            if not -1 <= t < n_tensors:
                raise TFLiteError(f"operator {index} ({self.name}): tensor index {t} out of range "
                                  f"({n_tensors} tensors)")
        self.options_type = op.scalar(OP_OPTIONS_TYPE, "B")
        self.options = op.table(OP_OPTIONS, "builtin_options")

    def opt(self, slot, fmt, default=0):
        return default if self.options is None else self.options.scalar(slot, fmt, default)

    def label(self):
        return f"operator {self.index} ({self.name})"


def _opcode(c, i):
    custom = c.string(OPCODE_CUSTOM, "custom_code")
    code = max(c.scalar(OPCODE_DEPRECATED, "b"), c.scalar(OPCODE_BUILTIN, "i"))
    if custom:
        return code, f"CUSTOM '{custom}'"
    if code in OPS:
        return code, OPS[code]
    name = BUILTIN_NAMES[code] if 0 <= code < len(BUILTIN_NAMES) else f"builtin operator {code}"
    return code, name


class Model:
    """The first subgraph of a TFLite flatbuffer: tensors, operators, inputs, outputs."""

    def __init__(self, raw):
        buf = memoryview(raw)
        if len(buf) < 8:
            raise TFLiteError(f"file of {len(buf)} bytes is too short for a TFLite model")
        if bytes(buf[4:8]) != b"TFL3":
            raise TFLiteError("not a TFLite model (file identifier is not TFL3)")
        (root,) = struct.unpack_from("<I", buf, 0)
        m = Table(buf, root, "model")
        self.version = m.scalar(MODEL_VERSION, "I")
        if self.version != 3:
            raise TFLiteError(f"schema version {self.version}: only version 3 is supported")
        self.description = m.string(MODEL_DESCRIPTION, "description")
        opcodes = [_opcode(c, i) for i, c in enumerate(m.tables(MODEL_OPCODES, "operator_codes"))]
        buffers = m.tables(MODEL_BUFFERS, "buffers")
        subgraphs = m.tables(MODEL_SUBGRAPHS, "subgraphs")
        if len(subgraphs) != 1:
            raise TFLiteError(f"{len(subgraphs)} subgraphs: only single-subgraph models are supported")
        g = subgraphs[0]
        self.tensors = [Tensor(i, t, buffers, buf) for i, t in enumerate(g.tables(SUBGRAPH_TENSORS, "tensors"))]
        n = len(self.tensors)
        self.operators = [Operator(i, op, opcodes, n)
                          for i, op in enumerate(g.tables(SUBGRAPH_OPERATORS, "operators"))]
        self.inputs = [int(v) for v in g.array(SUBGRAPH_INPUTS, "<i4", "inputs")]
        self.outputs = [int(v) for v in g.array(SUBGRAPH_OUTPUTS, "<i4", "outputs")]
        for t in self.inputs + self.outputs:
            if not 0 <= t < n:
                raise TFLiteError(f"subgraph input/output tensor {t} out of range ({n} tensors)")


# --- mapping the operator chain onto the engine's layers ------------------------------

class Converter:
    def __init__(self, model, dtype):
        self.m, self.dtype = model, dtype
        self.words, self.tensors, self.dtypes = [], {}, {}
        self.input_shape = None          # (H, W, C)
        self.activation = None
        self.shape = None                # current (H, W, C), or (N,) after gap/fc
        self.shapes = {}                 # layer index -> its output shape
        self.input_quant = None          # (scale, zero point) of the int8 input, or None
        self.quant = []                  # per layer word: its int8 output's (scale, zp) or None
        self.requantised = False         # some weights stored otherwise than the file has them
        self.bias_q = {}                 # operator index -> its int32 bias values

    def run(self):
        m = self.m
        if len(m.inputs) != 1 or len(m.outputs) != 1:
            raise TFLiteError(f"{len(m.inputs)} inputs and {len(m.outputs)} outputs: "
                              "expected one of each")
        current = m.inputs[0]
        t_in = m.tensors[current]
        if len(t_in.shape) == 4 and t_in.shape[0] == 1 and min(t_in.shape) >= 1:
            self.input_shape = self.shape = tuple(t_in.shape[1:])     # an image (1, H, W, C)
            self.input_quant = _act_quant(t_in)     # a uint8/int8 image; None if float
        self.layer_of = {current: -1}    # tensor -> index of the layer writing it (-1: input)
        for op in m.operators:
            if op.name not in OPS.values():
                raise TFLiteError(f"{op.label()}: operator not supported by the CNN engine")
            handler = getattr(self, "_op_" + op.name.lower())
            want = OPTIONS_TYPES.get(op.name)
            if want is not None and op.options is not None and op.options_type != want:
                raise TFLiteError(f"{op.label()}: options of union type {op.options_type}, "
                                  f"expected {want}")
            data = current if op.name == "ADD" else self._data_input(op)
            if data != current:
                raise TFLiteError(f"{op.label()}: reads tensor {data}, not the previous operator's "
                                  f"output {current} (only a chain of operators is supported)")
            if len(op.outputs) != 1 or op.outputs[0] < 0:
                raise TFLiteError(f"{op.label()}: expected one output, got {op.outputs}")
            handler(op, current) if op.name == "ADD" else handler(op)
            current = op.outputs[0]
            self.layer_of[current] = len(self.words) - 1
            self.shapes[len(self.words) - 1] = self.shape
        if current != m.outputs[0]:
            raise TFLiteError(f"the last operator writes tensor {current}, not the model output "
                              f"{m.outputs[0]}")
        if not self.words:
            raise TFLiteError("no layers: the model has no convolution or fully connected operator")
        return self.tensors, self.dtypes

    def _data_input(self, op):
        idx = 1 if op.name == "SPLIT" else 0      # SPLIT's inputs are (axis, value)
        if len(op.inputs) <= idx:
            raise TFLiteError(f"{op.label()}: missing its data input")
        return op.inputs[idx]

    def _tensor(self, op, k):
        if len(op.inputs) <= k or op.inputs[k] < 0:
            return None
        return self.m.tensors[op.inputs[k]]

    # no-ops
    def _op_quantize(self, op):
        if not self.words:      # the input's quantisation (kept by RESHAPE and SPLIT)
            self.input_quant = _act_quant(self.m.tensors[op.outputs[0]])

    def _op_dequantize(self, op):
        pass

    def _op_split(self, op):
        if op.opt(0, "i") != 1 or len(op.outputs) != 1:
            raise TFLiteError(f"{op.label()}: num_splits {op.opt(0, 'i')}: only 1 (a no-op) is supported")

    def _op_reshape(self, op):
        t_in, t_out = self.m.tensors[op.inputs[0]], self.m.tensors[op.outputs[0]]
        if math.prod(t_in.shape) != math.prod(t_out.shape):
            raise TFLiteError(f"{op.label()}: {list(t_in.shape)} -> {list(t_out.shape)} changes the size")
        if self.shape is None:
            if len(t_out.shape) != 4 or t_out.shape[0] != 1 or min(t_out.shape) < 1:
                raise TFLiteError(f"{op.label()}: the input must become (1, H, W, C), "
                                  f"got {list(t_out.shape)}")
            self.input_shape = self.shape = tuple(t_out.shape[1:])
        elif len(self.shape) != 1:
            raise TFLiteError(f"{op.label()}: a reshape between convolutions is not supported")

    def _op_mean(self, op):
        self._need_map(op)
        axes = self._tensor(op, 1)
        vals = None if axes is None else axes.constant()
        if vals is None or sorted(int(v) for v in vals.reshape(-1)) != [1, 2]:
            raise TFLiteError(f"{op.label()}: only a mean over H and W (axes 1, 2) is supported")
        self._word(op, "gap")
        self.shape = (self.shape[2],)

    def _op_average_pool_2d(self, op):
        self._need_map(op)
        h, w, c = self.shape
        if (op.opt(3, "i"), op.opt(4, "i")) != (w, h) or op.opt(5, "b") != 0:
            raise TFLiteError(f"{op.label()}: only an average pool over the whole {h}x{w} map "
                              "with no activation (a global average pool) is supported")
        self._word(op, "gap")
        self.shape = (c,)

    def _op_add(self, op, current):
        """A residual add of the current map and an earlier layer's output: add@K."""
        ins = [i for i in op.inputs if i >= 0]
        if len(ins) != 2 or current not in ins:
            raise TFLiteError(f"{op.label()}: expected two inputs, one of them the previous "
                              f"operator's output {current}")
        other = ins[1] if ins[0] == current else ins[0]
        k = self.layer_of.get(other)
        if k is None or k < 0 or self.shapes.get(k) != self.shape or len(self.shape) != 3:
            raise TFLiteError(f"{op.label()}: adds tensor {other}, which is not an earlier "
                              f"layer's feature map of shape {self.shape}")
        if op.opt(0, "b") != 0:
            raise TFLiteError(f"{op.label()}: a fused activation on ADD is not supported")
        self._word(op, f"add@{k}")

    def _op_softmax(self, op):
        if not self.words or self.words[-1] != "fc":
            raise TFLiteError(f"{op.label()}: a softmax is supported only right after the "
                              "fully connected layer")
        beta = op.opt(0, "f", 1.0)
        if beta != 1.0:
            raise TFLiteError(f"{op.label()}: softmax beta {beta}: only 1 is supported")
        self._word(op, "softmax")

    def _op_logistic(self, op):
        if not self.words or self.words[-1] != "fc":
            raise TFLiteError(f"{op.label()}: a logistic is supported only right after the "
                              "fully connected layer")
        self._word(op, "sigmoid")

    def _op_conv_2d(self, op):
        w_t = self._weight_tensor(op, 4)
        o, kh, kw, i = w_t.shape                                            # OHWI
        if self.shape is not None and len(self.shape) == 1 and self.words[-1] == "gap":
            return self._conv_as_fc(op, w_t)
        self._need_map(op)
        act = self._conv_options(op, stride_slot=(1, 2), act_slot=3, dil_slots=(4, 5))
        if (kh, kw) not in ((3, 3), (1, 1)) or i != self.shape[2]:
            raise TFLiteError(f"{op.label()}: weight {list(w_t.shape)}: expected (out, 3, 3, {self.shape[2]}) "
                              f"or (out, 1, 1, {self.shape[2]})")
        (values, scale, zero), bias = self._weight(op, w_t, qdim=0)
        stride = self._stride
        if kh == 1 and stride != 1:
            raise TFLiteError(f"{op.label()}: a 1x1 convolution with stride {stride} is not supported")
        word = "conv1x1" if kh == 1 else f"conv3x3s{stride}"
        if act is None:
            if kh != 1:
                raise TFLiteError(f"{op.label()}: a 3x3 convolution without activation is not "
                                  "supported (only 1x1 ones: linear1x1)")
            word = "linear1x1"
        self._add(op, word, (values.transpose(0, 3, 1, 2), scale, zero), bias, o)

    def _op_depthwise_conv_2d(self, op):
        self._need_map(op)
        if self._conv_options(op, stride_slot=(1, 2), act_slot=4, dil_slots=(5, 6)) is None:
            raise TFLiteError(f"{op.label()}: a depthwise convolution without activation is "
                              "not supported")
        w_t = self._weight_tensor(op, 4)
        _, kh, kw, c = w_t.shape                                            # 1HWC
        if w_t.shape[0] != 1 or (kh, kw) != (3, 3) or c != self.shape[2]:
            raise TFLiteError(f"{op.label()}: weight {list(w_t.shape)}: expected (1, 3, 3, {self.shape[2]}) "
                              "(depth multiplier 1)")
        (values, scale, zero), bias = self._weight(op, w_t, qdim=3)
        self._add(op, f"dw3x3s{self._stride}", (values.transpose(3, 0, 1, 2), scale, zero), bias, c)

    def _op_fully_connected(self, op):
        if self.shape is None or len(self.shape) != 1:
            raise TFLiteError(f"{op.label()}: a fully connected layer must follow the MEAN (gap)")
        act = op.opt(0, "b")
        if act != 0:
            raise TFLiteError(f"{op.label()}: fused activation {ACTIVATION_NAMES.get(act, act)} "
                              "is not supported (only NONE)")
        if op.opt(1, "b") != 0:
            raise TFLiteError(f"{op.label()}: shuffled weights format is not supported")
        w_t = self._weight_tensor(op, 2)                                    # (out, in)
        if w_t.shape[1] != self.shape[0]:
            raise TFLiteError(f"{op.label()}: weight {list(w_t.shape)} does not take {self.shape[0]} inputs")
        weight, bias = self._weight(op, w_t, qdim=0)
        self._add(op, "fc", weight, bias, w_t.shape[0])

    def _conv_as_fc(self, op, w_t):
        """A 1x1 convolution on the 1x1 map a global average pool leaves: a fully connected
        layer (TF1 MobileNets' logits)."""
        if op.opt(3, "b") != 0:
            raise TFLiteError(f"{op.label()}: the 1x1 convolution after the pool must have no "
                              "activation (it is the fully connected head)")
        o, kh, kw, i = w_t.shape
        if (kh, kw) != (1, 1) or i != self.shape[0]:
            raise TFLiteError(f"{op.label()}: weight {list(w_t.shape)} after the pool: expected "
                              f"(out, 1, 1, {self.shape[0]})")
        values, scale, zero = self._weight(op, w_t, qdim=0)[0]
        self._add(op, "fc", (values.reshape(o, i), scale, zero), self._bias(op, o), o)

    # helpers
    def _word(self, op, word):
        self.words.append(word)
        self.quant.append(_act_quant(self.m.tensors[op.outputs[0]]))

    def quantization(self):
        """The `quantization` metadata (docs/model-format.md): the int8 input's and each
        layer output's (scale, zero point) as TFLite carries them (uint8 ones as int8: zero
        point - 128), None from the first float output on; None when the input is not
        quantised or some weights were not kept as the file has them (--dtype int8 on
        uint8 weights requantises them)."""
        if self.input_quant is None or self.quant[0] is None or self.requantised:
            return None
        layers = list(self.quant)
        if None in layers:
            k = layers.index(None)
            layers[k:] = [None] * (len(layers) - k)
        return {"input": list(self.input_quant), "layers": [q and list(q) for q in layers]}

    def _need_map(self, op):
        if self.shape is None:
            raise TFLiteError(f"{op.label()}: the input has no (1, H, W, C) shape yet "
                              "(expected a RESHAPE first)")
        if len(self.shape) != 3:
            raise TFLiteError(f"{op.label()}: needs a feature map, but the previous layer was "
                              f"{self.words[-1]}")

    def _conv_options(self, op, stride_slot, act_slot, dil_slots):
        if op.options is None:
            raise TFLiteError(f"{op.label()}: missing its options")
        if op.opt(0, "b") != PADDING_SAME:
            raise TFLiteError(f"{op.label()}: padding VALID is not supported (only SAME)")
        sw, sh = op.opt(stride_slot[0], "i"), op.opt(stride_slot[1], "i")
        if sw != sh or sw not in (1, 2):
            raise TFLiteError(f"{op.label()}: strides (h {sh}, w {sw}): only equal strides 1 or 2")
        if op.opt(dil_slots[0], "i", 1) != 1 or op.opt(dil_slots[1], "i", 1) != 1:
            raise TFLiteError(f"{op.label()}: dilation is not supported")
        act = op.opt(act_slot, "b")
        if act not in ACTIVATIONS:
            raise TFLiteError(f"{op.label()}: fused activation {ACTIVATION_NAMES.get(act, act)}: "
                              "only RELU6, RELU or NONE")
        self._stride = sw
        name = ACTIVATIONS[act]
        if name is None:
            return None
        if self.activation not in (None, name):
            raise TFLiteError(f"{op.label()}: fused activation {ACTIVATION_NAMES[act]} differs from "
                              f"the earlier layers' {self.activation.upper()} (one activation for "
                              "every layer)")
        self.activation = name
        return name

    def _weight_tensor(self, op, ndim):
        t = self._tensor(op, 1)
        if t is None or len(t.shape) != ndim or min(t.shape) < 1:
            raise TFLiteError(f"{op.label()}: weight must be a non-empty {ndim}-d constant tensor")
        return t

    def _weight(self, op, t, qdim):
        """((values, scales, zero points), bias) of op: int8 values with one scale per output
        channel (zero points None: symmetric), uint8 values with scales and zero points per
        output channel (a per-tensor pair broadcast), or float values and (None, None)."""
        values = t.constant()
        if values is None:
            raise TFLiteError(f"{op.label()}: {t.describe()} is not a constant")
        channels = t.shape[qdim]
        if t.type in ("INT8", "UINT8"):
            weight = (values,) + self._scales(op, t, channels, qdim)
        elif t.type in ("FLOAT32", "FLOAT16"):
            weight = (values.astype(np.float64), None, None)
        else:
            raise TFLiteError(f"{op.label()}: weight {t.describe()}: only INT8, UINT8, FLOAT32 "
                              "or FLOAT16")
        return weight, self._bias(op, channels)

    def _scales(self, op, t, channels, qdim):
        s, z = t.scale, t.zero_point
        if len(s) == 0:
            raise TFLiteError(f"{op.label()}: {t.type.lower()} {t.describe()} has no "
                              "quantisation scales")
        if len(s) not in (1, channels) or (len(s) > 1 and t.quantized_dimension != qdim):
            raise TFLiteError(f"{op.label()}: {t.describe()}: {len(s)} scales on dimension "
                              f"{t.quantized_dimension}: expected 1 or {channels} on dimension {qdim}")
        if not np.all(np.isfinite(s)) or np.any(s <= 0):
            raise TFLiteError(f"{op.label()}: {t.describe()}: scales must be finite and > 0")
        scale = np.broadcast_to(s, (channels,)).astype(np.float64)
        if t.type == "INT8":
            if len(z) not in (0, 1, len(s)) or np.any(z != 0):
                raise TFLiteError(f"{op.label()}: {t.describe()}: non-zero weight zero point "
                                  "(int8 weights must be symmetric)")
            return scale, None
        if len(z) not in (1, len(s)) or np.any(z < 0) or np.any(z > 255):
            raise TFLiteError(f"{op.label()}: {t.describe()}: uint8 weights need 1 or {len(s)} "
                              "zero points in 0..255")
        return scale, np.broadcast_to(z, (channels,)).astype(np.uint8)

    def _bias(self, op, out):
        t = self._tensor(op, 2)
        if t is None:
            return np.zeros(out)
        values = t.constant()
        if values is None or values.shape != (out,):
            raise TFLiteError(f"{op.label()}: bias {t.describe()} must be a constant of shape ({out},)")
        if t.type in ("FLOAT32", "FLOAT16"):
            return values.astype(np.float64)
        if t.type != "INT32":
            raise TFLiteError(f"{op.label()}: bias {t.describe()}: only INT32 or float")
        s = t.scale
        if len(s) not in (1, out) or not np.all(np.isfinite(s)) or np.any(s <= 0):
            raise TFLiteError(f"{op.label()}: int32 bias {t.describe()} needs 1 or {out} finite "
                              "scales > 0")
        if len(t.zero_point) not in (0, 1, len(s)) or np.any(t.zero_point != 0):
            raise TFLiteError(f"{op.label()}: int32 bias {t.describe()}: non-zero zero point")
        self.bias_q[op.index] = values      # the integer path's bias, exactly
        return values.astype(np.float64) * s

    def _add(self, op, word, weight, bias, out):
        values, scale, zero = weight
        i = len(self.words)
        key = f"layers.{i}."
        self._word(op, word)
        if word == "fc":
            self.shape = (out,)
        elif word.startswith(("conv", "dw", "linear")):
            h, w, _ = self.shape
            s = 2 if word.endswith("s2") else 1
            self.shape = (-(-h // s), -(-w // s), out)
        shape = (out,) + (1,) * (values.ndim - 1)
        if not np.all(np.isfinite(values)):
            raise TFLiteError(f"{op.label()}: non-finite weights")
        out_tensors = {"bias": bias}
        keep = self.dtype == "auto" and scale is not None
        if keep and zero is not None:           # uint8 asymmetric, as the file has it
            out_tensors["weight_scale"] = scale
            self.tensors[key + "weight_zero_point"] = zero
            self.dtypes[key + "weight_zero_point"] = "U8"
            self.tensors[key + "weight"] = values.astype(np.uint8)
            self.dtypes[key + "weight"] = "U8"
        elif self.dtype in ("auto", "int8"):
            if scale is None or zero is not None:   # quantise symmetric per output channel
                self.requantised = True             # no longer the file's integer graph
                real = self._real(values, scale, zero, shape)
                peak = np.abs(real).reshape(out, -1).max(axis=1)
                scale = np.where(peak > 0, peak / 127.0, 1.0)
                values = np.rint(real / scale.reshape(shape))
            out_tensors["weight_scale"] = scale
            self.tensors[key + "weight"] = values.astype(np.int8)
            self.dtypes[key + "weight"] = "I8"
        if self.dtype in ("auto", "int8") and op.index in self.bias_q and not self.requantised:
            # the int32 bias itself: a float32 bias of a tiny weight scale loses its low bits
            self.tensors[key + "bias_quantized"] = self.bias_q[op.index].astype(np.int64)
            self.dtypes[key + "bias_quantized"] = "I64"
        else:
            real = self._real(values, scale, zero, shape)
            out_tensors["weight"] = real
            if self.dtype == "f16":
                if np.abs(real).max(initial=0) >= 65520.0:
                    raise TFLiteError(f"{op.label()}: weights outside the F16 range")
                self.dtypes[key + "weight"] = "F16"
        for name, arr in out_tensors.items():
            arr = arr.astype(np.float32)
            if not np.all(np.isfinite(arr)):
                raise TFLiteError(f"{op.label()}: {name} values beyond the float32 range")
            self.tensors[key + name] = arr

    @staticmethod
    def _real(values, scale, zero, shape):
        """Dequantised float64 weights: (q - zero) * scale per output channel."""
        real = values.astype(np.float64)
        if zero is not None:
            real = real - zero.astype(np.float64).reshape(shape)
        if scale is not None:
            real = real * scale.reshape(shape)
        return real


def _act_quant(t):
    """(scale, zero point) of an int8 or uint8 activation tensor with one scale, else None.
    A uint8 tensor becomes the int8 one of the same reals: values and zero point minus 128
    (TFLite's uint8 kernels compute on q - zero point, so the arithmetic is unchanged)."""
    if t.type not in ("INT8", "UINT8") or len(t.scale) != 1 or len(t.zero_point) > 1:
        return None
    s = float(np.float32(t.scale[0]))
    zp = int(t.zero_point[0]) if len(t.zero_point) else 0
    if t.type == "UINT8":
        zp -= 128
    if not (math.isfinite(s) and s > 0 and -128 <= zp <= 127):
        raise TFLiteError(f"{t.describe()}: activation scale {s} / zero point {zp} out of range")
    return (s, zp)


def read_labels(path, count):
    """The labels of a class map CSV (index,mid,display_name; YAMNet's) or of a text file with
    one label per line (ImageNet's imagenet_labels.txt), checked against count."""
    with open(path, newline="", encoding="utf-8") as f:
        text = f.read()
    if not path.endswith(".csv"):
        names = text.splitlines()
        if len(names) != count or any(not n.strip() for n in names):
            raise ValueError(f"{path}: {len(names)} lines for {count} outputs (one non-empty "
                             "label per line)")
        return names
    rows = list(csv.reader(text.splitlines()))
    if not rows or [c.strip() for c in rows[0]] != ["index", "mid", "display_name"]:
        raise ValueError(f"{path}: expected a header index,mid,display_name")
    names = []
    for k, row in enumerate(rows[1:]):
        if len(row) != 3 or row[0] != str(k):
            raise ValueError(f"{path}: row {k + 2}: expected '{k},MID,NAME', got {row}")
        names.append(row[2])
    if len(names) != count:
        raise ValueError(f"{path}: {len(names)} labels for {count} outputs")
    return names


def input_metadata(model, conv):
    """Metadata keys of an image input (1, H, W, 3): its channel order, its quantisation
    (uint8/int8 scale and zero point) as the network sees it, and the same as input_mean /
    input_std on pixels scaled to 0..1 (what conyframeembed feeds: value / 255), so that
    mean = zero_point / 255 and std = 1 / (255 scale). Float inputs get none (they are
    taken as the pixels / 255 in 0..1)."""
    t = model.tensors[model.inputs[0]]
    if len(t.shape) != 4 or t.shape[3] != 3:
        return {}
    meta = {"input_kind": "image", "channel_order": "RGB"}
    if t.type in ("UINT8", "INT8") and len(t.scale) == 1:
        scale, zero = float(t.scale[0]), int(t.zero_point[0]) if len(t.zero_point) else 0
        if t.type == "INT8":
            zero += 128         # an int8 input is the uint8 pixel minus 128
        meta["input_quantization"] = json.dumps({"dtype": "uint8", "scale": scale,
                                                 "zero_point": zero})
        meta["input_mean"] = repr(zero / 255.0)
        meta["input_std"] = repr(1.0 / (255.0 * scale))
    return meta


def convert(raw, dtype="auto", labels=None, frontend="yamnet", source=None):
    """Returns (tensors, metadata, dtypes) for safetensors_io.save, from the .tflite bytes raw.
    An image model's frontend is never recorded."""
    with np.errstate(all="ignore"):     # every value is checked for finiteness instead
        model = Model(raw)
        conv = Converter(model, dtype)
        tensors, dtypes = conv.run()
    h, w, c = conv.input_shape
    v2 = any(word.startswith(("add@", "linear")) for word in conv.words)
    meta = {"network": "mobilenet_v2" if v2 else "mobilenet_v1", "input_height": str(h),
            "input_width": str(w), "input_channels": str(c), "layers": " ".join(conv.words),
            "activation": conv.activation or "relu6"}
    image = input_metadata(model, conv)
    meta.update(image)
    # the integer path (cnn-int8.c) needs the file's own quantised weights
    quant = conv.quantization() if dtype in ("int8", "auto") else None
    if quant is not None:
        meta["quantization"] = json.dumps(quant)
    outputs = conv.shape[0]
    if labels is not None:
        names = read_labels(labels, outputs)
        meta["labels"] = json.dumps(names, ensure_ascii=False)
    if frontend != "none" and not image:
        meta["frontend"] = json.dumps(FRONTENDS[frontend])
    src = source or "a TFLite model"
    meta["source"] = (f"{src} (sha256 {hashlib.sha256(raw).hexdigest()}; "
                      f"'{model.description}'), converted by training/convert_tflite.py "
                      f"--dtype {dtype}")
    return tensors, meta, dtypes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="the .tflite file")
    ap.add_argument("-o", "--output", required=True, help="output .safetensors")
    ap.add_argument("--labels", help="class map CSV (index,mid,display_name), one row per output, "
                    "or a text file with one label per line")
    ap.add_argument("--dtype", choices=("auto", "int8", "f16", "f32"), default="auto",
                    help="weight storage (default auto: quantised weights as the file has them, "
                    "int8 per channel or uint8 with zero points; float ones int8 per channel)")
    ap.add_argument("--frontend", choices=sorted(FRONTENDS) + ["none"], default="yamnet",
                    help="the log-mel front end the network expects (default yamnet)")
    ap.add_argument("--source", help="text for the source metadata (default: the file name)")
    args = ap.parse_args(argv)
    try:
        with open(args.model, "rb") as f:
            raw = f.read()
        tensors, meta, dtypes = convert(raw, args.dtype, args.labels, args.frontend,
                                        args.source or os.path.basename(args.model))
        safetensors_io.save(args.output, tensors, meta, dtypes=dtypes)
    except (ValueError, OSError) as e:       # TFLiteError is a ValueError
        print(f"convert_tflite: {args.model}: {e}", file=sys.stderr)
        return 1
    n = sum(v.size for k, v in tensors.items() if not k.endswith(("weight_scale", "weight_zero_point", "bias_quantized")))
    print(f"{args.output}: {meta['layers'].count(' ') + 1} layers, {n} parameters, "
          f"{args.dtype} weights, {meta['activation']}"
          f"{', labels' if 'labels' in meta else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
