#!/usr/bin/env bash
# Two default-model folders side by side (bench/RESULTS.md, "the default model on the adapted
# YAMNet"): `cony bench pipeline --seconds 600` A, B, A, B, then bench/live_cpu.py with 50 live
# chains in one process, 60 s and 2 s runs (per live stream after start-up = (CPU 60 s -
# CPU 2 s) / (58 s x 50)), A then B, twice.
#   GST_PLUGIN_PATH=build/gst bench/default_model_ab.sh A_DIR B_DIR
# Each DIR holds a transformer.safetensors whose CNN (frontend.cnn) is beside it or in
# models/*/; e.g. models/audio and a folder with an older classifier from git.
set -euo pipefail
cd "$(dirname "$0")/.."
a=${1:?usage: default_model_ab.sh A_DIR B_DIR}
b=${2:?usage: default_model_ab.sh A_DIR B_DIR}
export GST_PLUGIN_PATH=${GST_PLUGIN_PATH:-$PWD/build/gst} OPENBLAS_NUM_THREADS=1
stamp () { echo "== $* $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"; }
for rep in 1 2; do
  for m in "$a" "$b"; do
    stamp "bench pipeline $m rep $rep"
    build/tools/cony bench pipeline --seconds 600 --transformer "$m/transformer.safetensors"
  done
done
for rep in 1 2; do
  for m in "$a" "$b"; do
    for s in 60 2; do
      stamp "live $m ${s}s x50 rep $rep"
      /usr/bin/python3 bench/live_cpu.py --chain-only "$s" "$m/transformer.safetensors" 50
    done
  done
done
