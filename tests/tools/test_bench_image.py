#!/usr/bin/env python3
"""Smoke test of `cony bench image`: the shipped int8 MobileNet-v2 gives the per-frame
lines and every layer's time in the forward pass by kind (its 65 layers: 1 conv3x3,
17 depthwise, 34 pointwise, 10 residual adds, the pool, the classifier, the softmax),
whose kinds add up to the total; a float-only network gives the per-frame lines and no
such table (it has no integer layers to time).
Speeds are recorded in bench/RESULTS.md, never asserted here.
    test_bench_image.py CONY SOURCE_ROOT"""
import os
import subprocess
import sys

from test_bench_int8 import by_kind_rows


def bench(cony, model):
    return subprocess.run([cony, "bench", "image", "--frames", "2", "--model", model],
                          capture_output=True, text=True, timeout=120)


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
    r = bench(cony, os.path.join(root, "models", "video", "frame_cnn.safetensors"))
    if r.returncode == 0 and "  network  " in r.stdout and not by_kind_rows(r.stdout):
        print("ok a float network: per frame, no layer table")
    else:
        print(f"FAIL float network ({r.returncode}):\n{r.stdout}{r.stderr}")
        fails += 1
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
