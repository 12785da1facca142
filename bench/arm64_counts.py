#!/usr/bin/python3
"""Multiply-accumulates and NEON multiply instructions per forward pass of an int8 CNN
file (YAMNet patch, MobileNet-v2 frame) on each kernel path of src/kernels/qkernels-neon.c, and
an estimate for a Cortex-A76 (issue 58: qemu's times say nothing about a board).

  bench/arm64_counts.py models/yamnet/yamnet.safetensors models/imagenet/mobilenet_v2.safetensors

Counted from the kernels' structure and the file's own weights, as cony_qgemm_init packs
them for the NEON sets (a quad of 4 k x 8 output channels is bytes when every w - zp
fits int8, else int16):
  neon-dotprod  a byte quad: 2 sdot per row (32 MACs); an int16 quad: 8 smlal per row
  neon          a byte quad: 4 smull + 4 sadalp per row; an int16 quad: 8 smlal per row
  neon-dotprod  depthwise, where ConyQDw's w64 exists (every tap fits int8, or uint8 taps
                with one zero point above 0), each 16 channels: 12 sdot per pixel (a
                window's three columns, four vectors), 24 for uint8 taps (a second sdot a
                column for (128 - zp) x); a rest of fewer than 16 as neon
  neon          depthwise: 2 smlal per tap per 8 channels (4 MACs each)
Loads, broadcasts and the requantisation (about 30 instructions per 8 outputs) are not
counted. The estimate assumes the throughputs of Arm's Cortex-A76 software optimisation
guide (sdot 2 per cycle; smull and smlal 1 per cycle on one pipe, sadalp 1 per cycle on
the other) and the Raspberry Pi 5's 2.4 GHz, every multiply pipe busy: a lower bound of
the time, not a measurement (`cony bench int8` on the board measures)."""
import json
import math
import struct
import sys

import numpy as np

DTYPES = {"I8": np.int8, "U8": np.uint8, "I32": np.int32, "F32": np.float32}


def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__")
    tensors = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        if t["dtype"] in DTYPES:
            tensors[name] = np.frombuffer(data[a:b], DTYPES[t["dtype"]]).reshape(t["shape"])
    return meta, tensors


def weights(tensors, i):
    """w - zp as int64, rows = output channels, columns in the kernels' K order."""
    w = tensors[f"layers.{i}.weight"].astype(np.int64)
    zp = tensors.get(f"layers.{i}.weight_zero_point")
    if zp is not None:
        w = w - zp.astype(np.int64).reshape((-1,) + (1,) * (w.ndim - 1))
    if w.ndim == 4 and w.shape[2:] == (3, 3) and w.shape[1] > 1:  # conv: (ky * 3 + kx) * in + ci
        w = w.transpose(0, 2, 3, 1)
    return w.reshape(w.shape[0], -1)


def quads(w):
    """(byte quads, int16 quads) of the dot-product packing: 8 channels x 4 k each."""
    n, k = w.shape
    pad = np.zeros((math.ceil(n / 8) * 8, math.ceil(k / 4) * 4), np.int64)
    pad[:n, :k] = w
    fits = (pad >= -128) & (pad <= 127)
    q = fits.reshape(pad.shape[0] // 8, 8, pad.shape[1] // 4, 4).all(axis=(1, 3))
    return int(q.sum()), int(q.size - q.sum())


def dw_sdots(tensors, i, wt):
    """sdot per pixel per 16 channels of depthwise layer @i on neon-dotprod (0: its taps
    are not in w64, as qkernels.c's dw_init_vnni decides)."""
    if ((wt >= -128) & (wt <= 127)).all():
        return 12
    zp = tensors.get(f"layers.{i}.weight_zero_point")
    raw = tensors[f"layers.{i}.weight"]
    if raw.dtype == np.uint8 and zp is not None and len(set(zp.ravel().tolist())) == 1 \
            and int(zp.ravel()[0]) > 0:
        return 24
    return 0


def count(path):
    meta, tensors = load(path)
    h, w_ = int(meta["input_height"]), int(meta["input_width"])
    macs = 0
    c = {"sdot": 0, "smull": 0, "sadalp": 0, "smlal_w": 0, "smlal_dw": 0, "sdot_dw": 0,
         "smlal_dw_dot": 0}
    for i, word in enumerate(meta["layers"].split()):
        stride = int(word[-1]) if word[-2:-1] == "s" else 1
        if word.startswith(("conv3x3", "dw3x3")):
            h, w_ = math.ceil(h / stride), math.ceil(w_ / stride)
        if word == "gap":
            h = w_ = 1
        if f"layers.{i}.weight" not in tensors:
            continue
        wt = weights(tensors, i)
        rows = h * w_
        if word.startswith("dw3x3"):
            ch = wt.shape[0]
            macs += rows * ch * 9
            c["smlal_dw"] += rows * math.ceil(ch / 8) * 9 * 2
            sdots = dw_sdots(tensors, i, wt)
            held = ch // 16 * 16 if sdots else 0
            c["sdot_dw"] += rows * held // 16 * sdots
            c["smlal_dw_dot"] += rows * math.ceil((ch - held) / 8) * 9 * 2
            continue
        b, q16 = quads(wt)
        macs += rows * wt.shape[0] * wt.shape[1]
        c["sdot"] += rows * b * 2
        c["smull"] += rows * b * 4
        c["sadalp"] += rows * b * 4
        c["smlal_w"] += rows * q16 * 8
    return macs, c


def main():
    hz = 2.4e9
    print("| file | MACs | path | sdot | smull | sadalp | smlal | multiply instructions "
          "| MACs per instruction | Cortex-A76 estimate (2.4 GHz, lower bound) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path in sys.argv[1:]:
        macs, c = count(path)
        smlal = c["smlal_w"] + c["smlal_dw"]
        smlal_dot = c["smlal_w"] + c["smlal_dw_dot"]
        sdot = c["sdot"] + c["sdot_dw"]
        # sdot: 2/cycle; smull and smlal share one pipe (1/cycle), sadalp the other
        dot_cycles = sdot / 2 + smlal_dot
        neon_cycles = max(c["smull"] + smlal, c["sadalp"])
        for name, n, cyc, cols in (
            ("neon-dotprod", sdot + smlal_dot, dot_cycles, (sdot, 0, 0, smlal_dot)),
            ("neon", c["smull"] + c["sadalp"] + smlal, neon_cycles,
             (0, c["smull"], c["sadalp"], smlal)),
        ):
            print(f"| {path} | {macs / 1e6:.1f} M | {name} | {cols[0] / 1e6:.2f} M | "
                  f"{cols[1] / 1e6:.2f} M | {cols[2] / 1e6:.2f} M | {cols[3] / 1e6:.2f} M | "
                  f"{n / 1e6:.2f} M | {macs / n:.1f} | {cyc / hz * 1e3:.2f} ms |")


if __name__ == "__main__":
    main()
