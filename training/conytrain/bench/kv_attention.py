#!/usr/bin/python3
"""Per-step time of single-query attention over a KV cache in PyTorch, for
bench/torch_compare.py attention.

What a PyTorch deployment of the exact continual (CoSi) layer runs per token: the new key
and value written into a cache of the last n tokens (heads, n, hd), then the new query's
scaled dot-product attention over it (matmul, softmax, matmul), float32, one thread, no
autograd. Projections are left out on both sides (libcony's "core" time).

    /usr/bin/python3 training/bench_kv_attention.py [--d 192 --heads 16]
        [--windows 120,4096] [--steps N]

Prints one JSON object per window: {"window", "us_per_step" (wall), "cpu_us_per_step"
(this thread's CPU time), "steps"}.
"""

import argparse
import json
import math
import time

import torch


def step_time(d, heads, n, steps):
    """Wall and CPU seconds per step at window @n."""
    hd = d // heads
    g = torch.Generator().manual_seed(n)
    kc = torch.randn(1, heads, n, hd, generator=g)
    vc = torch.randn(1, heads, n, hd, generator=g)
    qkv = torch.randn(steps + 10, 3, 1, heads, 1, hd, generator=g)
    scale = 1.0 / math.sqrt(hd)
    with torch.no_grad():
        def one(t):
            q, k, v = qkv[t]
            kc[:, :, t % n] = k[:, :, 0]
            vc[:, :, t % n] = v[:, :, 0]
            p = torch.softmax(torch.matmul(q, kc.transpose(-2, -1)) * scale, dim=-1)
            return torch.matmul(p, vc)
        for t in range(10):  # warm-up
            one(t)
        t0, c0 = time.perf_counter(), time.thread_time()
        for t in range(steps):
            one(10 + t)
        return (time.perf_counter() - t0) / steps, (time.thread_time() - c0) / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=192)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--windows", default="120,4096")
    ap.add_argument("--steps", type=int, default=500)
    args = ap.parse_args()
    torch.set_num_threads(1)
    for n in [int(w) for w in args.windows.split(",")]:
        wall, cpu = step_time(args.d, args.heads, n, args.steps)
        print(json.dumps({"window": n, "us_per_step": 1e6 * wall, "cpu_us_per_step": 1e6 * cpu,
                          "steps": args.steps}), flush=True)
    return 0


if __name__ == "__main__":
    main()
