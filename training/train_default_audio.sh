#!/usr/bin/env bash
# Rebuilds the shipped default audio model (models/audio/) from a fresh checkout:
#
#   training/train_default_audio.sh [--rebuild-dataset] [--models DIR] [-- extra train args]
#
#   1. the labelled clip data set from Debian packages (training/data/build_audio_dataset.sh
#      --per-class 400 --train-extra 800 --alarm-synth v3 --train-only-version 5): version 7
#      -> out/audio-dataset-v7; skipped when its manifest already exists, unless
#      --rebuild-dataset; needs root for apt-get the first time,
#   2. the `cony` tool (meson + ninja in build-train/, if not built yet),
#   3. training/train_default_audio.py --center-bands 1: log-mel with `cony mel`, the reduced
#      VGGish CNN (each mel band centred over the patch), its embeddings with `cony embed`,
#      the CoNy encoder-classifier (cony, then k-means fixed landmarks and fine-tuning ->
#      cony-fixed), export to models/audio/,
#   4. training/eval_default_audio.py: held-out per-step accuracy through the C tools,
#      written into models/audio/MODEL.md.
# Work files go to out/train-audio/ (gitignored). About 50 min on 2 cores (data set 16 min,
# CNN 22 min, embeddings 5 min), plus the packages' downloads (about 3.5 GB) the first time.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
PY=/usr/bin/python3
# 400 clips per class (the data set script's default is 120), test split included, plus 800
# training clips per class from the same train recordings and twenty-one train-only packages:
# more distinct recordings, which the CNN needs to generalise to unseen recordings. The
# synthesised alarms are generator v3's (ringtones, bells, sirens, beeps through loudspeakers
# and rooms, over real noise). Version 7 is version 5 without fillets-ng's English sound
# effects, which versions 2-6 labelled speech (training/data/README.md).
DATASET=out/audio-dataset-v7
DATA_ARGS=(--per-class 400 --train-extra 800 --alarm-synth v3 --train-only-version 5)
BUILD=${CONY_BUILD_DIR:-build-train}
MODELS=models/audio
REBUILD=0
EXTRA=()
while [ $# -gt 0 ]; do
  case $1 in
    --rebuild-dataset) REBUILD=1 ;;
    --models) MODELS=$2; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "usage: $0 [--rebuild-dataset] [--models DIR] [-- train args]" >&2; exit 2 ;;
  esac
  shift
done

T0=$(date +%s)
stamp() { echo "train_default_audio: [$(( $(date +%s) - T0 )) s] $*" >&2; }

if [ "$REBUILD" = 1 ] || [ ! -f "$DATASET/manifest.csv" ]; then
  stamp "building the data set $DATASET"
  bash training/data/build_audio_dataset.sh "$DATASET" "${DATA_ARGS[@]}"
fi

if [ ! -x "$BUILD/tools/cony" ]; then
  stamp "building cony in $BUILD"
  [ -d "$BUILD" ] || meson setup "$BUILD" >/dev/null
fi
if ! ninja -C "$BUILD" -j2 tools/cony >/dev/null; then
  [ -x "$BUILD/tools/cony" ] || { echo "train_default_audio: building cony failed" >&2; exit 1; }
  echo "train_default_audio: warning: rebuilding cony failed; using the existing $BUILD/tools/cony" >&2
fi

stamp "training"
mkdir -p out
"$PY" training/train_default_audio.py --dataset "$DATASET" --cony "$BUILD/tools/cony" \
  --center-bands 1 --work out/train-audio --models "$MODELS" "${EXTRA[@]}"

stamp "evaluating (C path)"
"$BUILD/tools/cony" info "$MODELS/transformer.safetensors" >/dev/null
UPDATE=(); [ -f "$MODELS/MODEL.md" ] && UPDATE=(--update-model-md)
"$PY" training/eval_default_audio.py --dataset "$DATASET" --cony "$BUILD/tools/cony" \
  --models "$MODELS" --json out/train-audio/eval.json "${UPDATE[@]}" > out/train-audio/eval.md
cat out/train-audio/eval.md
du -b "$MODELS"/* >&2
stamp "done"
