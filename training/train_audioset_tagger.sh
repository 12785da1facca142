#!/usr/bin/env bash
# Rebuilds the continual AudioSet tagger (models/audioset/tagger.safetensors):
#
#   training/train_audioset_tagger.sh [--cache DIR] [--read-only-cache] [-- train args]
#
#   1. the labelled clip data set version 9 (training/audio_prereqs.sh, as for the audio model;
#      skipped when out/audio-dataset-v9/manifest.csv exists) and the `cony` tool
#      (build-train/),
#   2. training/train_audioset_tagger.py: generated sines, YAMNet's tokens and per-patch
#      scores of every clip not yet cached (out/yamnet-cache/, the layout
#      training/train_yamnet_audio.py shares), the encoder distilled from YAMNet's scores,
#      exported to models/audioset/, and its held-out figures (out/train-audioset/eval.json).
# About 15 min on one core with the cache filled; the first time, the embeddings of the
# 7196 clips come first (100 clips a `cony embed --list` call; two passes of them, continual
# and per window at stride 32, took 18 min on the shared 2-core machine, 2026-12-04).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
PY=/usr/bin/python3
source training/audio_prereqs.sh
BUILD=${CONY_BUILD_DIR:-build-train}
CACHE=out/yamnet-cache
ARGS=()
while [ $# -gt 0 ]; do
  case $1 in
    --cache) CACHE=$2; shift ;;
    --read-only-cache) ARGS+=(--read-only-cache) ;;
    --) shift; ARGS+=("$@"); break ;;
    *) echo "usage: $0 [--cache DIR] [--read-only-cache] [-- train args]" >&2; exit 2 ;;
  esac
  shift
done

# the data set exactly as the default audio model's recipe builds it
ensure_train_dataset 0
ensure_cony "$BUILD"

"$PY" training/train_audioset_tagger.py --dataset "$DATASET" --cony "$BUILD/tools/cony" \
  --cache "$CACHE" --work out/train-audioset --models models/audioset "${ARGS[@]}"
