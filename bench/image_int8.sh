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
  /usr/bin/python3 - "$p" <<'PY'
import os, subprocess, sys, time
p = sys.argv[1]
pipe = ("videotestsrc is-live=true num-buffers=300 ! video/x-raw,width=640,height=480,"
        "framerate=10/1 ! videoconvert ! videorate ! video/x-raw,framerate=10/1 ! "
        f"conyframeembed model=models/imagenet/mobilenet_v2.safetensors output=embedding precision={p} ! "
        "conytransformer model=models/video-tagger/tagger.safetensors post-messages=false ! fakesink")
t0 = time.monotonic()
proc = subprocess.Popen(["gst-launch-1.0", "-q"] + pipe.split())
_, st, ru = os.wait4(proc.pid, 0)
wall = time.monotonic() - t0
cpu = ru.ru_utime + ru.ru_stime
# 300 frames are 30 s of stream: CPU / 30 s is the share of a core the camera costs
# (start-up included); CPU / wall is lower when the loaded machine stretches the run
print(f"camera pipeline precision={p}: exit {os.waitstatus_to_exitcode(st)}, 300 frames at 10 fps, "
      f"CPU {cpu:.2f} s = {1000 * cpu / 300:.1f} ms per frame = {100 * cpu / 30:.1f} % of one "
      f"core at 10 fps (wall {wall:.2f} s, CPU / wall {100 * cpu / wall:.1f} %)")
PY
done
echo "== load $(cut -d' ' -f1-3 /proc/loadavg)"
