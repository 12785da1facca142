#!/usr/bin/env python3
"""Smoke test of `cony bench int8` on the int8 YAMNet (the shipped file with the golden
quantization key, as tests/testutil.c's cony_test_yamnet_int8 makes it): the pointwise
layers in the forward pass, all 13 rows and the total with numbers, and every layer's
time by kind, timed by the monotonic clock, or by the CPU clock with --cpu-clock; a
float-only file is refused.
Speeds are recorded in bench/RESULTS.md, never asserted here.
    test_bench_int8.py CONY SOURCE_ROOT"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile


def with_quantization(src, quant, dst):
    """@src's safetensors with metadata "quantization" = @quant, written to @dst."""
    with open(src, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.setdefault("__metadata__", {})["quantization"] = quant
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data[8 + n:])


def bench(cony, model, *extra):
    return subprocess.run([cony, "bench", "int8", "--model", model, "--patches", "3",
                           "--rounds", "1", *extra], capture_output=True, text=True,
                          timeout=120)


def forward_pass_rows(out):
    """The layer rows of the forward-pass table, and its total row."""
    block = out.split("Pointwise products in the forward pass", 1)[1].split("\n\n", 1)[0]
    row = r"^  (\d+|pointwise) +(\d+x\d+x\d+|all) +(\d+\.\d) µs +(\d+\.\d) GMAC/s +(\d+)% of peak$"
    return [m.groups() for m in re.finditer(row, block, re.M)]


def by_kind_rows(out):
    """{kind: (layers, µs)} of the every-layer table, with its "all" row."""
    if "Every layer in the forward pass by kind" not in out:
        return {}
    block = out.split("Every layer in the forward pass by kind", 1)[1].split("\n\n", 1)[0]
    row = r"^  (\S+) +(\d+) layers +(\d+\.\d) µs"
    return {m.group(1): (int(m.group(2)), float(m.group(3)))
            for m in re.finditer(row, block, re.M)}


def main():
    cony, root = sys.argv[1], sys.argv[2]
    fails = 0
    src = os.path.join(root, "models", "yamnet", "yamnet.safetensors")
    with open(os.path.join(root, "tests", "golden", "yamnet", "quantization.json")) as f:
        quant = f.read().strip()
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "yamnet-int8.safetensors")
        with_quantization(src, quant, model)
        for extra, clock in (((), "monotonic"), (("--cpu-clock",), "thread's CPU")):
            r = bench(cony, model, *extra)
            if r.returncode != 0:
                print(f"FAIL bench int8 {' '.join(extra)} exited {r.returncode}:\n{r.stderr}")
                fails += 1
                continue
            rows = forward_pass_rows(r.stdout)
            layers = [g[0] for g in rows]
            want = [str(n) for n in range(2, 27, 2)] + ["pointwise"]
            numbers = all(float(g[2]) > 0 and float(g[3]) > 0 for g in rows)
            if layers == want and numbers:
                print(f"ok the forward pass's 13 layers and total, {clock} clock")
            else:
                print(f"FAIL forward-pass rows {layers}:\n{r.stdout}")
                fails += 1
            kinds = by_kind_rows(r.stdout)
            want_kinds = {"conv3x3": 1, "depthwise3x3": 13, "conv1x1": 13, "gap": 1, "fc": 1,
                          "sigmoid": 1, "all": 30}
            if ({k: v[0] for k, v in kinds.items()} == want_kinds
                    and all(v[1] > 0 for k, v in kinds.items() if k != "sigmoid")):
                print(f"ok every layer by kind, {clock} clock")
            else:
                print(f"FAIL every-layer rows {kinds}:\n{r.stdout}")
                fails += 1
            if f"Layers timed by the {clock} clock" in r.stdout:
                print(f"ok the {clock} clock is named")
            else:
                print(f"FAIL clock line ({clock}):\n{r.stdout}")
                fails += 1
    r = bench(cony, src)
    if r.returncode != 0 and "needs a quantised model" in r.stderr:
        print("ok a float-only file is refused")
    else:
        print(f"FAIL float-only file: {r.returncode}\n{r.stdout}{r.stderr}")
        fails += 1
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
