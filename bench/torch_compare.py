#!/usr/bin/python3
"""libcony next to PyTorch in one run: `cony bench ... --json`, then the same network in
PyTorch (training/bench_*.py), printed side by side (bench/RESULTS.md).

usage: bench/torch_compare.py model [--cony PATH] [--seconds S] [--torch-steps N]
                                    [--blocks LIST] [--variants LIST] [--dtype LIST]
       bench/torch_compare.py frontend [--cony PATH] [--seconds S] [--patches N]
                                       [--yamnet FILE]
       bench/torch_compare.py attention [--cony PATH] [--windows LIST] [--rounds R]
                                        [--torch-steps N]

model:    `cony bench model` (the encoder-classifier at the papers' GTZAN setting, every
          variant) and training/bench_torch_step.py (the windowed model over the last n
          tokens per step: PyTorch has no continual form); speed-up = PyTorch CPU / C CPU.
frontend: `cony bench frontend --no-vggish` (log-mel + YAMNet streaming) and
          training/bench_yamnet_torch.py (the same layers, or --yamnet FILE, in PyTorch).
attention: the exact continual step (`cony bench attention --variants continual
          --single-only`, its core: attention of all heads, projections excluded) and
          training/bench_kv_attention.py (one query over a KV cache in PyTorch), d 192,
          16 heads, rounds alternated; medians of the rounds, ratio = PyTorch / libcony.

Both sides one thread, CPU time of the measuring thread. Prints a markdown table; exits
non-zero, saying which side failed, when either does. `cony` runs PyTorch never: this
script is the one place the two meet.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = sys.executable   # the benches need this Python's torch


def run_json(argv, what):
    """The JSON objects among @argv's stdout lines (lines starting with '{')."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True)
    except OSError as e:
        sys.exit(f"torch_compare: {what} failed ({' '.join(argv)}): {e}")
    if r.returncode != 0:
        sys.exit(f"torch_compare: {what} failed ({' '.join(argv)}):\n{r.stderr.strip()}")
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    if not rows:
        sys.exit(f"torch_compare: {what} printed no JSON rows ({' '.join(argv)})")
    return rows


def compare_model(args):
    cony = [args.cony, "bench", "model", "--json", "--seconds", str(args.seconds)]
    torch = [PYTHON, os.path.join(ROOT, "training", "bench_torch_step.py"),
             "--steps", str(args.torch_steps)]
    for opt in ("blocks", "variants", "dtype"):
        if getattr(args, opt):
            cony += [f"--{opt}", getattr(args, opt)]
            if opt != "dtype":
                torch += [f"--{opt}", getattr(args, opt)]
    c_rows = run_json(cony, "cony bench model")
    # one PyTorch time per (blocks, variant): the reference for both weight storages
    t_rows = {(r["blocks"], r["variant"]): r for r in run_json(torch, "PyTorch (bench_torch_step.py)")}
    print("| blocks | weights | variant | C µs/step wall | C µs/step CPU | MFLOP/step | state KiB "
          "| PyTorch µs/step wall / CPU | speed-up (CPU) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in c_rows:
        t = t_rows.get((c["blocks"], c["variant"]))
        tcol = f"{t['us_per_step']:.1f} / {t['cpu_us_per_step']:.1f}" if t else "-"
        scol = f"{t['cpu_us_per_step'] / c['cpu_us_per_step']:.1f}×" if t else "-"
        print(f"| {c['blocks']} | {c['weights']} | {c['variant']} | {c['us_per_step']:.2f} "
              f"| {c['cpu_us_per_step']:.2f} | {c['mflop_per_step']:.3f} | {c['state_kib']:.1f} "
              f"| {tcol} | {scol} |")


def compare_frontend(args):
    cony = [args.cony, "bench", "frontend", "--no-vggish", "--json", "--vggish-seconds",
            str(args.seconds)]
    torch = [PYTHON, os.path.join(ROOT, "training", "bench_yamnet_torch.py"),
             "--patches", str(args.patches)]
    if args.yamnet:
        cony += ["--yamnet", args.yamnet]
        torch += ["--model", args.yamnet]
    c = [r for r in run_json(cony, "cony bench frontend") if r.get("measure") == "yamnet"][0]
    t = run_json(torch, "PyTorch (bench_yamnet_torch.py)")[0]
    print("| measure | CPU ms per patch |")
    print("|---|---|")
    print(f"| libcony, YAMNet ({c['weights']} weights, {c['patches']} patches) "
          f"| {c['cpu_ms_per_patch']:.2f} ({c['gflops']:.1f} GFLOP/s) |")
    print(f"| PyTorch, same layers (float32, 1 thread, {t['patches']} patches) "
          f"| {t['cpu_ms_per_patch']:.2f}: libcony **{t['cpu_ms_per_patch'] / c['cpu_ms_per_patch']:.2f}×** "
          f"faster |")


def run_checked(argv, what):
    """Runs @argv, exiting with its stderr when it fails."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True)
    except OSError as e:
        sys.exit(f"torch_compare: {what} failed ({' '.join(argv)}): {e}")
    if r.returncode != 0:
        sys.exit(f"torch_compare: {what} failed ({' '.join(argv)}):\n{r.stderr.strip()}")


def compare_attention(args):
    c_us, t_us = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        csv = os.path.join(tmp, "attention.csv")
        for _ in range(args.rounds):
            run_checked([args.cony, "bench", "attention", "--variants", "continual",
                         "--single-only", "--windows", args.windows, "--budget", "0.3",
                         "--csv", csv], "cony bench attention")
            with open(csv) as f:
                for part in (line.strip().split(",") for line in f):
                    if part[0] == "time":  # time,n,variant,form,core_us,step_us,...
                        c_us.setdefault(int(part[1]), []).append(float(part[4]))
            for r in run_json([PYTHON, os.path.join(ROOT, "training", "bench_kv_attention.py"),
                               "--windows", args.windows, "--steps", str(args.torch_steps)],
                              "PyTorch (bench_kv_attention.py)"):
                t_us.setdefault(r["window"], []).append(r["cpu_us_per_step"])
    print(f"| n | libcony `continual` core µs, CPU (median / min of {args.rounds}) "
          "| PyTorch KV-cache µs, CPU (median / min) | libcony faster by (medians) |")
    print("|---|---|---|---|")
    for n in sorted(c_us):
        c, t = c_us[n], t_us.get(n)
        if not t:
            sys.exit(f"torch_compare: PyTorch printed no time for n = {n}")
        cm, tm = statistics.median(c), statistics.median(t)
        print(f"| {n} | {cm:.1f} / {min(c):.1f} | {tm:.1f} / {min(t):.1f} | **{tm / cm:.2f}×** |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["model", "frontend", "attention"])
    ap.add_argument("--cony", default=os.path.join(ROOT, "build", "tools", "cony"))
    ap.add_argument("--seconds", type=float, default=None,
                    help="model: time per C measurement (0.5); frontend: audio seconds (10)")
    ap.add_argument("--torch-steps", type=int, default=200)
    ap.add_argument("--blocks")
    ap.add_argument("--variants")
    ap.add_argument("--dtype")
    ap.add_argument("--patches", type=int, default=40, help="PyTorch patches (at least 3)")
    ap.add_argument("--yamnet")
    ap.add_argument("--windows", default="120,4096", help="attention: windows n")
    ap.add_argument("--rounds", type=int, default=5, help="attention: alternated rounds")
    args = ap.parse_args()
    if args.what == "attention":
        compare_attention(args)
    elif args.what == "model":
        args.seconds = 0.5 if args.seconds is None else args.seconds
        compare_model(args)
    else:
        args.seconds = 10 if args.seconds is None else args.seconds
        compare_frontend(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
