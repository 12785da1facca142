#!/usr/bin/python3
"""Per-step time of the encoder-classifier in PyTorch, for bench/torch_compare.py model.

PyTorch has no continual form of this model: a PyTorch deployment computes each step's
logits by running the windowed model (conytrain/ref/model.py, what the papers train) over the
last n tokens. That is what is timed here, float32, no autograd, one thread, random
weights, each variant in its windowed form (continual -> regular, cony -> nystrom,
cony-fixed -> nystrom-fixed).

    /usr/bin/python3 training/bench_torch_step.py [--d-in 128 --d 192 --heads 16 --ff 384
        --window 120 --landmarks 4 --classes 10] [--blocks 1,2] [--variants ...] [--steps N]

Prints one JSON object per line: {"blocks", "variant", "us_per_step" (wall),
"cpu_us_per_step" (this thread's CPU time), "steps"}.
"""

import argparse
import json
import time

import torch

from conytrain.ref.attention import VARIANTS
from conytrain.ref.model import ConyEncoderClassifier


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d-in", type=int, default=128)
    ap.add_argument("--d", type=int, default=192)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--ff", type=int, default=384)
    ap.add_argument("--window", type=int, default=120)
    ap.add_argument("--landmarks", type=int, default=4)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--blocks", default="1,2")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    n = args.window
    stream = torch.randn(n + args.steps + 10, args.d_in)
    for blocks in [int(b) for b in args.blocks.split(",")]:
        for variant in args.variants.split(","):
            model = ConyEncoderClassifier(args.d_in, args.d, args.heads, args.ff, blocks, n,
                                          args.landmarks, variant,
                                          [f"c{i}" for i in range(args.classes)]).eval()
            hd = args.d // args.heads
            for blk in model.blocks:
                blk.attn.set_landmarks(torch.randn(args.heads, args.landmarks, hd),
                                       torch.randn(args.heads, args.landmarks, hd))
            with torch.no_grad():
                for t in range(10):     # warm-up
                    model(stream[t:t + n].unsqueeze(0), torch.tensor([t]))
                t0, c0 = time.perf_counter(), time.thread_time()
                for t in range(args.steps):
                    model(stream[t:t + n].unsqueeze(0), torch.tensor([t]))
                dt, dc = time.perf_counter() - t0, time.thread_time() - c0
            print(json.dumps({"blocks": blocks, "variant": variant,
                              "us_per_step": 1e6 * dt / args.steps,
                              "cpu_us_per_step": 1e6 * dc / args.steps, "steps": args.steps}),
                  flush=True)


if __name__ == "__main__":
    main()
