#!/usr/bin/env bash
# Issue 40/42 image benchmark: cony bench image (int8 and float in one run) and PyTorch
# float32 of the same graph, alternately twice; then the camera pipeline at 10 fps
# (CPU time / wall time) with precision auto (int8) and float.
set -u
cd "$(dirname "$0")/.."  # run from anywhere: bench/image_int8.sh
export OPENBLAS_NUM_THREADS=1 GST_PLUGIN_PATH=$PWD/build/gst
M=models/imagenet/mobilenet_v2.safetensors
echo "== $(date -u) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
grep -m1 "model name" /proc/cpuinfo
for r in 1 2; do
  ./build/tools/cony bench image -n 20
  /usr/bin/python3 training/bench_yamnet_torch.py --model $M --patches 20 2>&1 | tail -3
done
for p in auto float; do
  /usr/bin/python3 bench/camera_cpu.py --precision $p
done
echo "== load $(cut -d' ' -f1-3 /proc/loadavg)"
