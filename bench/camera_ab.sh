#!/usr/bin/env bash
# The camera pipeline's CPU share at 10 fps (bench/camera_cpu.py, precision auto: the
# integer path) for two plugin builds alternately, ROUNDS times.
# Usage: bench/camera_ab.sh ROUNDS BUILD_A [BUILD_B]  (build dirs with gst/ inside; B
# defaults to build/). A build of another revision, e.g. main:
#   mkdir -p out/base && git archive main | tar -x -C out/base && bash out/base/scripts/build.sh
set -u
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "usage: bench/camera_ab.sh ROUNDS BUILD_A [BUILD_B]" >&2
  exit 2
fi
R=$1 A=$2 B=${3:-build}
export OPENBLAS_NUM_THREADS=1
echo "== $(date -u) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$R"); do
  for b in "$A" "$B"; do
    GST_PLUGIN_PATH=$PWD/$b/gst /usr/bin/python3 bench/camera_cpu.py --label "$b"
  done
done
echo "== load $(cut -d' ' -f1-3 /proc/loadavg)"
