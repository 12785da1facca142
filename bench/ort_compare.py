#!/usr/bin/python3
"""libcony's int8 CNNs next to ONNX Runtime's in one run, rounds alternated: YAMNet per
patch (`cony bench int8` against training/bench_yamnet_ort.py) and MobileNet-v2 per image
(`cony bench image` against training/bench_mobilenet_ort.py), each ORT graph checked
against its golden scores first.

usage: bench/ort_compare.py --ort-dir DIR --yamnet-int8 FILE [--rounds R] [--cony PATH]
                            [--patches N] [--images N]

--ort-dir: a directory where `npm install --ignore-scripts onnxruntime-node@1.30.0` ran,
or "python": the `onnxruntime` module of the Python running this script (a machine with
it and no npm; its session options, warm-up and CPU-time rounds are the node script's).
--yamnet-int8: YAMNet with the `quantization` metadata of its .tflite (bench/RESULTS.md,
"int8"). MobileNet-v2 is the shipped models/imagenet/mobilenet_v2.safetensors (TFLite's
uint8 per-tensor model). Both sides one thread, CPU time. Prints a markdown table: per
network the median and smallest of the round medians and the ratio of the medians.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = sys.executable   # the ORT scripts need this Python's numpy (and onnxruntime)


def run(argv, what):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"ort_compare: {what} failed ({' '.join(argv)}):\n{r.stderr.strip()[-2000:]}")
    return r.stdout


def number(pattern, text, what):
    m = re.search(pattern, text)
    if not m:
        sys.exit(f"ort_compare: no {what} in:\n{text}")
    return float(m.group(1))


def ort(script, args, what):
    out = run([PYTHON, os.path.join(ROOT, "training", script)] + args, what)
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ort-dir", required=True)
    ap.add_argument("--yamnet-int8", required=True)
    ap.add_argument("--cony", default=os.path.join(ROOT, "build", "tools", "cony"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--patches", type=int, default=100)
    ap.add_argument("--images", type=int, default=20)
    args = ap.parse_args()
    golden = os.path.join(ROOT, "tests", "golden")
    checks = [ort("bench_yamnet_ort.py", ["--model", args.yamnet_int8, "--ort-dir", args.ort_dir,
                                          "--patches", "1", "--rounds", "1", "--golden",
                                          os.path.join(golden, "yamnet")], "YAMNet ORT check"),
              ort("bench_mobilenet_ort.py", ["--ort-dir", args.ort_dir, "--images", "1",
                                             "--rounds", "1", "--golden",
                                             os.path.join(golden, "imagenet")],
                  "MobileNet-v2 ORT check")]
    if not checks[0]["same_top1_as_armnn"] or not checks[1]["same_top1_as_golden"]:
        sys.exit(f"ort_compare: an ONNX graph disagrees with its golden top-1: {checks}")
    t = {k: [] for k in ("yc", "yo", "mc", "mo")}
    for _ in range(args.rounds):
        out = run([args.cony, "bench", "int8", "--model", args.yamnet_int8, "--rounds", "1",
                   "--patches", str(args.patches)], "cony bench int8")
        t["yc"].append(number(r"int8 \(.*\): min [0-9.]+ ms, median ([0-9.]+) ms", out,
                              "int8 median"))
        t["yo"].append(ort("bench_yamnet_ort.py", ["--model", args.yamnet_int8, "--ort-dir",
                                                   args.ort_dir, "--patches", str(args.patches),
                                                   "--rounds", "1"], "YAMNet ORT")
                       ["cpu_ms_per_patch"])
        out = run([args.cony, "bench", "image", "-n", str(args.images)], "cony bench image")
        t["mc"].append(number(r"\n  network +([0-9.]+) ms", out, "network time"))
        t["mo"].append(ort("bench_mobilenet_ort.py", ["--ort-dir", args.ort_dir, "--images",
                                                      str(args.images), "--rounds", "1"],
                           "MobileNet-v2 ORT")["cpu_ms_per_image"])
    print(f"| int8, 1 core, CPU time ({args.rounds} alternated rounds) | libcony median / min "
          "| ONNX Runtime median / min | libcony faster by (medians) | ORT graph vs golden |")
    print("|---|---|---|---|---|")
    rows = (("YAMNet per patch", "yc", "yo", f"max {checks[0]['max_diff_vs_armnn']:.3f} vs "
             "ArmNN, same top-1"),
            ("MobileNet-v2 224 per image", "mc", "mo",
             f"max {checks[1]['max_diff_vs_golden']:.3f} vs the integer reference, same top-1"))
    for name, c, o, check in rows:
        cm, om = statistics.median(t[c]), statistics.median(t[o])
        print(f"| {name} | {cm:.3f} / {min(t[c]):.3f} ms | {om:.3f} / {min(t[o]):.3f} ms "
              f"| **{om / cm:.2f}×** | {check} |")
    print(f"\nORT {checks[0]['ort']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
