#!/usr/bin/env bash
# Rebuilds the shipped default audio model (models/audio/) on YAMNet embeddings:
#
#   training/train_yamnet_audio.sh [--rebuild-dataset] [--models DIR] [--cache DIR] [-- train args]
#
#   1. the labelled clip data sets 9 and 7 (training/audio_prereqs.sh, as for the models
#      before; skipped when their manifests exist; AUDIO_DATA_VERSION=12: data set 12
#      instead of 9; AUDIO_DATA_VERSION=13: version 12 with validation-only clips, measured
#      with `-- --val-extra`; 14 and 15: version 9 with mined animal calls, and alarm tones,
#      rules 33 and 34), and the `cony` tool (build-train/),
#   2. training/train_yamnet_audio.py: steady tones and mains hum (noise) beside the data
#      set, YAMNet's tokens once for every clip (`cony embed -e`, cached with YAMNet's
#      per-patch scores in out/yamnet-cache/) and its layer-24 maps (out/yamnet-cache/
#      acts-l25/), YAMNet's layers 25 and 26 adapted to the six classes (the file then
#      given its int8 activation quantisation: YAMNet's scales for layers 0-24, layers
#      25-27 calibrated on the train patches, rule 32; --adapt-quantization none keeps it
#      float) and the encoder trained on that CNN's (float path's) tokens without the
#      validation recordings and measured on them (out/train-yamnet/val/val.json), then both refit with them ->
#      models/audio/yamnet-adapted.safetensors, transformer.safetensors, labels.txt,
#   3. training/eval_default_audio.py: held-out per-step accuracy through the C tools,
#      written into models/audio/MODEL.md.
# Work files go to out/train-yamnet/ (gitignored). 19 min on 2 cores with empty caches and
# the data sets present (2026-11-26: YAMNet's tokens 7.5 min, its layer-24 maps 7 min, the
# validation run 3, the refit 3, the evaluation 2.5), less with the caches filled.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
PY=/usr/bin/python3
source training/audio_prereqs.sh
BUILD=${CONY_BUILD_DIR:-build-train}
MODELS=models/audio
CACHE=out/yamnet-cache
WORK=out/train-yamnet
parse_train_args "$@"

ensure_datasets "$REBUILD"
ensure_cony "$BUILD"

# The shipped model's options (run E74, rules 17, 25 and 26 in models/audio/EXPERIMENTS.md):
# each phase's rate decayed along a half cosine, token swap, strong regularisation, YAMNet's
# last two layers adapted first (1500 steps at 1e-4, the --adapt-* defaults) and the encoder's
# rate halved for their tokens. Arguments after -- come later and override them.
RECIPE=(--lr-decay 1 --token-swap 0.15 --tf-dropout 0.3 --weight-decay 0.05 --label-smoothing 0.1
        --adapt-cnn 1 --tf-lr 1e-3)
stamp "tones, YAMNet tokens, the validation run and the refit"
"$PY" training/train_yamnet_audio.py --dataset "$DATASET" --val-from "$VAL_DATASET" \
  --cony "$BUILD/tools/cony" --work "$WORK" --cache "$CACHE" --models "$MODELS" \
  "${RECIPE[@]}" "${EXTRA[@]}"

stamp "evaluating (C path)"
"$BUILD/tools/cony" info "$MODELS/transformer.safetensors" >/dev/null
UPDATE=(); [ -f "$MODELS/MODEL.md" ] && UPDATE=(--update-model-md)
# the eight test recordings version 9's train-only packages were chosen for (MODEL.md, Data)
TARGETED='(household/toilet|household/Washing-machine|emergency/firetruck|birds/owl|rodents/squirrel|insects/bee|Sounds/plane|fire/sounds/fire)'
"$PY" training/eval_default_audio.py --dataset "$DATASET" --extra-dataset "$WORK/tones" \
  --cony "$BUILD/tools/cony" --models "$MODELS" --also-without "$TARGETED" \
  --json "$WORK/eval.json" "${UPDATE[@]}" > "$WORK/eval.md"
cat "$WORK/eval.md"
du -b "$MODELS"/* >&2
stamp "done"
