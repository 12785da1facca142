#!/usr/bin/env bash
# Before/after A/B of K live streams in one process (bench/RESULTS.md, "One copy of the
# CNN per process"): bench/live_cpu.py --chain-only on two builds of the plugin,
# interleaved, each with its own GStreamer registry file.
#   bench/shared_cnn_ab.sh /ABS/BEFORE/build/gst rss|cpu   (AFTER: this tree's build/gst)
# rss: 5 s runs, K = 1, 10, 50, twice; cpu: 60 s and 2 s runs, K = 50 then 20, twice
# (per live stream after start-up = (CPU 60 s - CPU 2 s) / (58 s x K)).
set -uo pipefail
cd "$(dirname "$0")/.."
before_dir=${1:?usage: shared_cnn_ab.sh BEFORE_GST_DIR rss|cpu}
phase=${2:?}
TF=models/audio/transformer.safetensors
reg=$(mktemp -d)
trap 'rm -rf "$reg"' EXIT
one () { # before|after seconds streams
  local dir
  if [ "$1" = before ]; then dir=$before_dir; else dir=$PWD/build/gst; fi
  echo "== $1 seconds=$2 streams=$3 $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  GST_REGISTRY=$reg/$1.bin GST_PLUGIN_PATH=$dir nice /usr/bin/python3 bench/live_cpu.py --chain-only "$2" $TF "$3"
}
if [ "$phase" = rss ]; then
  for rep in 1 2; do for k in 1 10 50; do for b in before after; do one $b 5 $k; done; done; done
elif [ "$phase" = cpu ]; then
  for k in 50 20; do for rep in 1 2; do for b in before after; do one $b 60 $k; one $b 2 $k; done; done; done
fi
