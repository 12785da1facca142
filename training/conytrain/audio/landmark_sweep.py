#!/usr/bin/python3
"""Accuracy of the default audio task against the landmark count m (issue 29 item 4; the
CoNy paper's Figs. 5-7 on our data).

    nice /usr/bin/python3 training/landmark_sweep.py [--m 2,4,8,16,32] [--seeds 11] \\
        [--splits val,test] [--out out/landmark-sweep] [-- recipe options]

For every m and seed: train_yamnet_audio.py's validation run (the recipe's options, those
after `--` included, with --landmarks m and --train-seed seed) on the cached YAMNet tokens,
exporting the file after phase 1 (trained as `cony`) and after phase 2 (k-means landmarks,
fine-tuned as `cony-fixed`); each file is measured through `cony classify` on the split(s)
with its trained variant and the others that run at that m (PAIRS), each clip after n - 1
tokens of its own recording, full-window steps (train_yamnet_audio.measure). Then `cony
bench attention` at the recipe's sizes gives the µs per step of each variant at each m.

Results accumulate in OUT/sweep.json (a measurement already there is not made again, and
files already trained are kept, so a second call with other --seeds or --splits adds to
it; --bench-only measures the cost alone, `cony classify`'s whole-model µs per step
included); OUT/sweep.md is the table of all of them. --table-only rewrites the table from the
JSON without running anything.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

# (file, variant): the phase-1 file runs the variants without fixed landmarks; the trained
# variant first. `regular` and `nystrom-fixed` compute the same functions as `continual`
# and `cony-fixed`, so they are left out.
PAIRS = (("cony", "cony"), ("cony", "nystrom"), ("cony", "continual"),
         ("cony-fixed", "cony-fixed"), ("cony-fixed", "cony"), ("cony-fixed", "nystrom"),
         ("cony-fixed", "continual"))
BENCH_VARIANTS = ("continual", "cony", "cony-fixed", "nystrom")
SPLITS = ("val", "test")


def int_list(text, what):
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SystemExit(f"landmark_sweep: {what} must be comma-separated integers, got {text!r}")
    if not vals:
        raise SystemExit(f"landmark_sweep: {what} is empty")
    return vals


def parse_args(argv):
    if "--" in argv:
        k = argv.index("--")
        argv, recipe_argv = argv[:k], argv[k + 1:]
    else:
        recipe_argv = []
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", default="2,4,8,16,32", help="landmark counts")
    ap.add_argument("--seeds", default="11", help="training seeds (the recipe's is 11)")
    ap.add_argument("--splits", default="val", help="val, test or val,test")
    ap.add_argument("--out", default="out/landmark-sweep")
    ap.add_argument("--bench-budget", type=float, default=0.3,
                    help="seconds per `cony bench attention` measurement (0: no bench)")
    ap.add_argument("--bench-only", action="store_true",
                    help="only the cost measurements, of the files of the first --seeds run")
    ap.add_argument("--table-only", action="store_true",
                    help="only rewrite OUT/sweep.md from OUT/sweep.json")
    args = ap.parse_args(argv)
    args.m = int_list(args.m, "--m")
    args.seeds = int_list(args.seeds, "--seeds")
    args.splits = [s for s in args.splits.split(",") if s]
    bad = [s for s in args.splits if s not in SPLITS]
    if bad or not args.splits:
        ap.error(f"--splits: {', '.join(bad) or 'none given'}; choose from {', '.join(SPLITS)}")
    args.recipe_argv = recipe_argv
    return args


def recipe():
    """The recipe's module, conytrain.audio.yamnet (training/train_yamnet_audio.py's);
    imported when needed, so that --table-only does without torch."""
    from conytrain.audio import yamnet
    return yamnet


def recipe_args(argv, out):
    """The recipe's options (train_yamnet_audio.build_parser) with the sweep's work files
    under OUT; m and the seed are set per run."""
    r = recipe().build_parser().parse_args(argv)
    for k in ("landmarks", "train_seed", "phase1_models"):
        if f"--{k.replace('_', '-')}" in " ".join(argv):
            raise SystemExit(f"landmark_sweep: --{k.replace('_', '-')} is set by the sweep")
    r.work = out
    torch_threads(r.threads)
    return r


def torch_threads(n):
    import torch
    torch.set_num_threads(max(1, min(2, n)))


def check_m(ms, window):
    bad = [m for m in ms if not 1 <= m <= window]
    if bad:
        raise SystemExit(f"landmark_sweep: m = {bad} outside 1 .. n = {window} (the window)")


def run_one(r, rows, labels, m, seed, splits, out, res=None):
    """One training run (both files; kept from an earlier call when both exist) and the
    measurements res (a JSON-able dict) does not hold yet."""
    ty = recipe()
    work = os.path.join(out, f"m{m}-s{seed}")
    r.landmarks, r.train_seed, r.work = m, seed, work
    r.phase1_models = os.path.join(work, "cony")
    files = {f: os.path.join(work, f, "transformer.safetensors") for f in ("cony", "cony-fixed")}
    res = res or {"m": m, "seed": seed, "eval": {}}
    t0 = time.time()
    if not all(os.path.exists(p) for p in files.values()):
        ty.fit_encoder(r, rows, labels, os.path.dirname(files["cony-fixed"]), "val")
        res["train_seconds"] = round(time.time() - t0)
    for split in splits:
        for f, v in PAIRS:
            key = f"{split}:{f}:{v}"
            if key not in res["eval"]:
                ty.log(f"m {m} seed {seed}: {key}")
                res["eval"][key] = ty.measure(r, rows, labels, files[f],
                                              os.path.join(work, f"{split}-{f}-{v}.json"),
                                              split, None if v == f else v)
    return res


def bench(cony, window, d, heads, m, budget):
    """core and step µs per token of each BENCH_VARIANTS at m (`cony bench attention`)."""
    out = subprocess.run([cony, "bench", "attention", "--window", str(window), "--dim", str(d),
                          "--heads", str(heads), "--landmarks", str(m), "--single-only",
                          "--variants", ",".join(BENCH_VARIANTS), "--budget", str(budget)],
                         check=True, capture_output=True, text=True).stdout
    return parse_bench(out)


def encoder_us(cony, model, stream, variant, tmp, repeats=3):
    """CPU µs per step of the whole model (input projection, block, classifier) through
    `cony classify` with one BLAS thread: the time of len(stream) steps less that of 64
    (the tool's start and the file's load), the least of repeats."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    src, dst = os.path.join(tmp, "bench.npy"), os.path.join(tmp, "bench-logits.npy")
    best = float("inf")
    for _ in range(repeats):
        cpu = []
        for T in (64, len(stream)):
            np.save(src, stream[:T])
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([cony, "classify", "--model", model, "--attention", variant, src,
                            "-o", dst], check=True, env=env, capture_output=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        best = min(best, (cpu[1] - cpu[0]) / (len(stream) - 64) * 1e6)
    return round(best, 2)


def bench_encoders(r, rows, m, seed, out, steps=2048):
    """encoder_us of each file of run (m, seed) with each of its PAIRS' variants, on a
    stream of the first validation clips' tokens."""
    ty = recipe()
    work = os.path.join(out, f"m{m}-s{seed}")
    stream, n = [], 0
    for x in rows:
        if x["split"] == "val" and n < steps + 64:
            stream.append(np.load(ty.token_path(r.cache, x)))
            n += len(stream[-1])
    stream = np.ascontiguousarray(np.concatenate(stream)[:steps + 64], dtype=np.float32)
    return {f"{f}:{v}": encoder_us(r.cony, os.path.join(work, f, "transformer.safetensors"),
                                   stream, v, work)
            for f, v in PAIRS}


def parse_bench(text):
    """{variant: {"core_us", "step_us"}} from `cony bench attention`'s markdown rows."""
    res = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 4 and cells[1].strip("`") in BENCH_VARIANTS and cells[2] == "single":
            res[cells[1].strip("`")] = {"core_us": float(cells[3]), "step_us": float(cells[4])}
    return res


def cell(ev, key):
    e = ev.get(key)
    if not e or "real/all" not in e:
        return "–"
    return "%.1f (%.1f)" % (100 * e["real/class-mean"]["accuracy"], 100 * e["real/all"]["accuracy"])


def table(data):
    """The markdown of every run in data (sweep.json's dict), a table a split, then cost."""
    runs = sorted(data.get("runs", {}).values(), key=lambda x: (x["m"], x["seed"]))
    out = ["# Landmark sweep (training/landmark_sweep.py)", "",
           "Real clips, full-window steps after n - 1 tokens of their own recording, "
           "`cony classify` (C path): **class mean % (per-step %)**. Columns: the file "
           "(trained as) → the variant it ran as; the trained variant first.", ""]
    for split in SPLITS:
        if not any(k.startswith(split + ":") for x in runs for k in x["eval"]):
            continue
        out += [f"Split **{split}**:", "",
                "| m | seed | " + " | ".join(f"{f} → {v}" for f, v in PAIRS) +
                " | synthesised clips: cony-fixed → cony-fixed, per-step % |",
                "|---|---|" + "---|" * (len(PAIRS) + 1)]
        for x in runs:
            synth = x["eval"].get(f"{split}:cony-fixed:cony-fixed", {}).get("synth/all")
            out.append(f"| {x['m']} | {x['seed']} | " +
                       " | ".join(cell(x["eval"], f"{split}:{f}:{v}") for f, v in PAIRS) +
                       " | %s |" % ("%.1f" % (100 * synth["accuracy"]) if synth else "–"))
        out.append("")
    enc = data.get("encoder", {})
    if enc:
        out += ["Whole model µs per step (`cony classify`, CPU time, one BLAS thread, "
                "2048 steps of validation tokens, less the tool's start): file → variant:", "",
                "| m | " + " | ".join(f"{f} → {v}" for f, v in PAIRS) + " |",
                "|---|" + "---|" * len(PAIRS)]
        for m in sorted(enc, key=int):
            out.append(f"| {m} | " + " | ".join(
                "%.1f" % enc[m][f"{f}:{v}"] if f"{f}:{v}" in enc[m] else "–"
                for f, v in PAIRS) + " |")
        out.append("")
    cost = data.get("bench", {})
    if cost:
        out += ["Attention µs per step (`cony bench attention`, n 32, d 64, 4 heads, single "
                "output, one thread, CPU time): core / with projections:", "",
                "| m | " + " | ".join(BENCH_VARIANTS) + " |",
                "|---|" + "---|" * len(BENCH_VARIANTS)]
        for m in sorted(cost, key=int):
            out.append(f"| {m} | " + " | ".join(
                "%.2f / %.2f" % (cost[m][v]["core_us"], cost[m][v]["step_us"])
                if v in cost[m] else "–" for v in BENCH_VARIANTS) + " |")
        out.append("")
    return "\n".join(out)


def load(path):
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {"runs": {}, "bench": {}}


def save(data, out):
    with open(os.path.join(out, "sweep.json"), "w") as f:
        json.dump(data, f, indent=1)
    with open(os.path.join(out, "sweep.md"), "w") as f:
        f.write(table(data))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.makedirs(args.out, exist_ok=True)
    data = load(os.path.join(args.out, "sweep.json"))
    if args.table_only:
        save(data, args.out)
        return data
    ty = recipe()
    r = recipe_args(args.recipe_argv, args.out)
    check_m(args.m, r.window)
    data["recipe"] = vars(r).copy()
    if not os.path.exists(os.path.join(args.out, "tones", "manifest.csv")):
        raise SystemExit(f"landmark_sweep: {args.out}/tones: the recipe's tone clips are missing "
                         "(train_yamnet_audio.py --stages tones, or a link to them)")
    rows, labels = ty.load_rows(r)          # the tones from WORK/tones, WORK = OUT here
    for m in args.m:
        for seed in ([] if args.bench_only else args.seeds):
            name = f"m{m}-s{seed}"
            data["runs"][name] = run_one(r, rows, labels, m, seed, args.splits, args.out,
                                         data["runs"].get(name))
            save(data, args.out)
        if args.bench_budget > 0:
            data["bench"][str(m)] = bench(r.cony, r.window, r.d, r.heads, m, args.bench_budget)
            data.setdefault("encoder", {})[str(m)] = bench_encoders(r, rows, m, args.seeds[0],
                                                                   args.out)
            save(data, args.out)
    print(table(data))
    return data


if __name__ == "__main__":
    main()
