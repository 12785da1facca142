#!/usr/bin/python3
"""Per-patch time of YAMNet's MobileNet-v1 in PyTorch, for bench/torch_compare.py frontend, or of
any MobileNet file (--model; the ImageNet MobileNet-v2 for `cony bench image`'s
comparison in bench/RESULTS.md).

The same layers as libcony's CONY_CNN_YAMNET_LAYOUT (or a network=mobilenet_v1 or
mobilenet_v2 file with --model: also linear1x1, add@K and softmax), float32, no autograd, one thread, NCHW, TensorFlow SAME padding as
F.pad before the stride-2 layers (padding=1 in the stride-1 ones), ReLU6. Random
weights unless --model: the values do not change the cost.

    /usr/bin/python3 training/bench_yamnet_torch.py [--patches 50] [--model FILE]

Prints one JSON object: {"ms_per_patch" (wall), "cpu_ms_per_patch" (this thread's CPU
time), "patches"}.
"""

import argparse
import json
import time

import numpy as np
import torch
import torch.nn.functional as F

from conytrain.ref import mobilenet

# CONY_CNN_YAMNET_LAYOUT (include/cony/cnn.h): word, output channels
YAMNET = ([("conv3x3s2", 32)] +
          [(w, c) for s, c in ((1, 64), (2, 128), (1, 128), (2, 256), (1, 256), (2, 512),
                               (1, 512), (1, 512), (1, 512), (1, 512), (1, 512), (2, 1024),
                               (1, 1024))
           for w, c in ((f"dw3x3s{s}", None), ("conv1x1", c))] +
          [("gap", None), ("fc", 521), ("sigmoid", None)])


def random_net():
    g = torch.Generator().manual_seed(1)
    layers, c = [], 1
    for word, out in YAMNET:
        if word.startswith("conv3x3"):
            w = torch.randn(out, c, 3, 3, generator=g) * (2.0 / (9 * c)) ** 0.5
        elif word.startswith("dw3x3"):
            out, w = c, torch.randn(c, 1, 3, 3, generator=g) * (2.0 / 9) ** 0.5
        elif word == "conv1x1":
            w = torch.randn(out, c, 1, 1, generator=g) * (2.0 / c) ** 0.5
        elif word == "fc":
            w = torch.randn(out, c, generator=g) * (1.0 / c) ** 0.5
        else:
            layers.append((word, None, None))
            continue
        layers.append((word, w, torch.zeros(out)))
        c = out
    return layers


def file_net(path):
    """(layers, (H, W, C)) of a network=mobilenet_v1 file, weights as float32."""
    net = mobilenet.load(path)
    return [(word, None if w is None else torch.from_numpy(w.astype(np.float32)),
             None if b is None else torch.from_numpy(b.astype(np.float32)))
            for word, w, b in net["layers"]], net["input"]


def forward(layers, x):
    outs = []
    for word, w, b in layers:
        if word[:-1] in ("conv3x3s", "dw3x3s"):
            s = int(word[-1])
            groups = x.shape[1] if word.startswith("dw") else 1
            if s == 2:
                # TF SAME on even sizes: nothing before, one after
                ph, pw = max(1 - x.shape[2] % 2, 0), max(1 - x.shape[3] % 2, 0)
                x = F.pad(x, (1 - pw, 1, 1 - ph, 1))
                x = F.conv2d(x, w, b, stride=2, groups=groups)
            else:
                x = F.conv2d(x, w, b, padding=1, groups=groups)
            x = F.relu6(x)
        elif word == "conv1x1":
            x = F.relu6(F.conv2d(x, w, b))
        elif word == "linear1x1":
            x = F.conv2d(x, w, b)
        elif word.startswith("add@"):
            x = x + outs[int(word[4:])]
        elif word == "gap":
            x = x.mean(dim=(2, 3))
        elif word == "fc":
            x = F.linear(x, w, b)
        elif word == "softmax":
            x = torch.softmax(x, dim=1)
        else:
            x = torch.sigmoid(x)
        outs.append(x)
    return x


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--patches", type=int, default=50)
    ap.add_argument("--model")
    args = ap.parse_args()
    torch.set_num_threads(1)
    layers, (h, w, c) = file_net(args.model) if args.model else (random_net(), (96, 64, 1))
    x = torch.randn(args.patches, 1, c, h, w, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        for k in range(3):
            out = forward(layers, x[k])
        assert out.shape == (1, 521) or args.model
        t0, c0 = time.perf_counter(), time.thread_time()
        for k in range(args.patches):
            forward(layers, x[k])
        wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    print(json.dumps({"ms_per_patch": wall / args.patches * 1e3,
                      "cpu_ms_per_patch": cpu / args.patches * 1e3, "patches": args.patches}))


if __name__ == "__main__":
    main()
