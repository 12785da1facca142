#!/usr/bin/python3
"""libcony next to PyTorch in one run: `cony bench ... --json`, then the same network in
PyTorch (training/bench_*.py), printed side by side (bench/RESULTS.md).

usage: bench/torch_compare.py model [--cony PATH] [--seconds S] [--torch-steps N]
                                    [--blocks LIST] [--variants LIST] [--dtype LIST]
       bench/torch_compare.py frontend [--cony PATH] [--seconds S] [--patches N]
                                       [--yamnet FILE]

model:    `cony bench model` (the encoder-classifier at the papers' GTZAN setting, every
          variant) and training/bench_torch_step.py (the windowed model over the last n
          tokens per step: PyTorch has no continual form); speed-up = PyTorch CPU / C CPU.
frontend: `cony bench frontend --no-vggish` (log-mel + YAMNet streaming) and
          training/bench_yamnet_torch.py (the same layers, or --yamnet FILE, in PyTorch).

Both sides one thread, CPU time of the measuring thread. Prints a markdown table; exits
non-zero, saying which side failed, when either does. `cony` runs PyTorch never: this
script is the one place the two meet.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["model", "frontend"])
    ap.add_argument("--cony", default=os.path.join(ROOT, "build", "tools", "cony"))
    ap.add_argument("--seconds", type=float, default=None,
                    help="model: time per C measurement (0.5); frontend: audio seconds (10)")
    ap.add_argument("--torch-steps", type=int, default=200)
    ap.add_argument("--blocks")
    ap.add_argument("--variants")
    ap.add_argument("--dtype")
    ap.add_argument("--patches", type=int, default=40, help="PyTorch patches (at least 3)")
    ap.add_argument("--yamnet")
    args = ap.parse_args()
    if args.what == "model":
        args.seconds = 0.5 if args.seconds is None else args.seconds
        compare_model(args)
    else:
        args.seconds = 10 if args.seconds is None else args.seconds
        compare_frontend(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
