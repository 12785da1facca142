#!/usr/bin/env python3
"""Smoke test of `cony bench image`: the shipped int8 MobileNet-v2 gives the per-frame
lines and every layer's time in the forward pass by kind (its 65 layers: 1 conv3x3,
17 depthwise, 34 pointwise, 10 residual adds, the pool, the classifier, the softmax),
whose kinds add up to the total; a float-only network gives the per-frame lines and no
such table (it has no integer layers to time). With --layers, each of the 65 layers in
order, with its kind, output map and channels (MobileNet-v2's known shapes), its time
(the rows adding up to the by-kind total) and, where it has weights, its multiply-adds a
second.
Speeds are recorded in bench/RESULTS.md, never asserted here.
    test_bench_image.py CONY SOURCE_ROOT"""
import os
import re
import subprocess
import sys

from test_bench_int8 import by_kind_rows


def bench(cony, model, *extra):
    return subprocess.run([cony, "bench", "image", "--frames", "2", "--model", model, *extra],
                          capture_output=True, text=True, timeout=120)


def each_layer_rows(out):
    """--layers' rows: index -> (kind, "HxW", in, out, µs, GMAC/s or None)."""
    block = out.split("Each layer in the forward pass", 1)[1] if "Each layer" in out else ""
    row = r"^\s+(\d+)\s+(\S+)\s+(\d+x\d+)\s+(\d+) -> (\d+)\s+([\d.]+)(?:\s+([\d.]+))?\s*$"
    return {int(m[1]): (m[2], m[3], int(m[4]), int(m[5]), float(m[6]),
                        float(m[7]) if m[7] else None)
            for m in re.finditer(row, block, re.M)}


def check_each_layer(cony, model):
    r = bench(cony, model, "--layers")
    rows, kinds = each_layer_rows(r.stdout), by_kind_rows(r.stdout)
    known = {0: ("conv3x3", "112x112", 3, 32), 2: ("conv1x1", "112x112", 32, 16),
             4: ("depthwise3x3", "56x56", 96, 96), 9: ("add", "56x56", 24, 24),
             61: ("conv1x1", "7x7", 320, 1280), 62: ("gap", "1x1", 1280, 1280),
             63: ("fc", "1x1", 1280, 1001)}
    weighted = ("conv3x3", "depthwise3x3", "conv1x1", "fc")
    ok = (r.returncode == 0 and sorted(rows) == list(range(65))
          and all(rows[i][:4] == v for i, v in known.items())
          and all((v[5] is not None and v[5] > 0) == (v[0] in weighted) for v in rows.values())
          and "all" in kinds
          and abs(sum(v[4] for v in rows.values()) - kinds["all"][1]) <= 0.1 * 65)
    if ok:
        print("ok --layers: each of the 65 layers, its shape, time and rate, adding up")
        return 0
    print(f"FAIL --layers ({r.returncode}) rows {rows}:\n{r.stdout}{r.stderr}")
    return 1


def main():
    cony, root = sys.argv[1], sys.argv[2]
    fails = 0
    r = bench(cony, os.path.join(root, "models", "imagenet", "mobilenet_v2.safetensors"))
    kinds = by_kind_rows(r.stdout)
    want = {"conv3x3": 1, "depthwise3x3": 17, "conv1x1": 34, "add": 10, "gap": 1, "fc": 1,
            "softmax": 1, "all": 65}
    parts = sum(v[1] for k, v in kinds.items() if k != "all")
    if (r.returncode == 0 and "  network  " in r.stdout
            and {k: v[0] for k, v in kinds.items()} == want
            and all(v[1] > 0 for k, v in kinds.items() if k not in ("gap", "softmax"))
            and abs(parts - kinds["all"][1]) <= 0.1 * len(want)):
        print("ok MobileNet-v2 int8: per frame, and its 65 layers by kind adding up")
    else:
        print(f"FAIL int8 MobileNet-v2 ({r.returncode}) kinds {kinds}:\n{r.stdout}{r.stderr}")
        fails += 1
    fails += check_each_layer(cony, os.path.join(root, "models", "imagenet",
                                                 "mobilenet_v2.safetensors"))
    r = bench(cony, os.path.join(root, "models", "video", "frame_cnn.safetensors"), "--layers")
    if (r.returncode == 0 and "  network  " in r.stdout and not by_kind_rows(r.stdout)
            and not each_layer_rows(r.stdout)):
        print("ok a float network: per frame, no layer table")
    else:
        print(f"FAIL float network ({r.returncode}):\n{r.stdout}{r.stderr}")
        fails += 1
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
