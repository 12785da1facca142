#!/usr/bin/env bash
# Rebuilds the VGGish-CNN default audio model shipped in models/audio/ up to run E16
# (2026-11-25; replaced by the YAMNet-token model of training/train_yamnet_audio.sh, see
# models/audio/EXPERIMENTS.md) from a fresh checkout, into out/train-audio/models/:
#
#   training/train_default_audio.sh [--rebuild-dataset] [--models DIR] [-- extra train args]
#
#   1. the labelled clip data sets from Debian packages (training/data/build_audio_dataset.sh):
#      version 9 (--per-class 400 --train-extra 800 --alarm-synth v3 --train-only-version 7)
#      -> out/audio-dataset-v9, the one trained on, and version 7 (the same with
#      --train-only-version 5) -> out/audio-dataset-v7, whose validation recordings
#      (--val-scope all) are held out of version 9 (--val-from); each is skipped when its
#      manifest already exists, unless --rebuild-dataset; needs root for apt-get the first
#      time; version 7 reuses version 9's package cache,
#   2. the `cony` tool (meson + ninja in build-train/, if not built yet),
#   3. four teacher CNNs (training/train_default_audio.py --stages mel,cnn): the recipe below
#      with the CNN 16/32/48/48/64/64 (FC 128/128/32) and 24/48/64/64/96/96 (FC 160/128/32),
#      each with training seeds 11 and 7, in out/train-audio-teachers/,
#   4. training/train_default_audio.py --center-bands 1 --batch-norm 1 --conv … --fc …
#      --distill TEACHERS: log-mel with `cony mel`, the reduced VGGish CNN (widths 24/48/64/64/
#      96/96, FC 160/128/32; each mel band centred over the patch; batch normalisation while
#      training, folded into the convolutions at export) distilled from the four teachers'
#      mean prediction, its embeddings with `cony embed`, the CoNy encoder-classifier (cony,
#      then k-means fixed landmarks and fine-tuning -> cony-fixed): first without the
#      validation recordings, measured on them (out/train-audio-val/), then refit with them
#      (--train-on-val) and exported to --models (out/train-audio/models/),
#   5. training/eval_default_audio.py: held-out per-step accuracy through the C tools,
#      written into MODELS/MODEL.md if there is one.
# Work files go to out/train-audio/ (gitignored). About 4 h on 2 cores (data sets 8 min,
# teachers 80 min, the distilled CNN 35 min and its refit 60-80 min, embeddings 10 min), plus
# the packages' downloads (about 7.5 GB) the first time.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
PY=/usr/bin/python3
# the data sets (version 9, and version 7 for its validation recordings) and cony
source training/audio_prereqs.sh
BUILD=${CONY_BUILD_DIR:-build-train}
MODELS=out/train-audio/models
parse_train_args "$@"

ensure_datasets "$REBUILD"
ensure_cony "$BUILD"

mkdir -p out/train-audio/mel
# every run trains on version 9, bands centred, batch normalisation, and holds out version 7's
# scope-all validation recordings
COMMON=(--dataset "$DATASET" --cony "$BUILD/tools/cony" --center-bands 1 --batch-norm 1
        --val-from "$VAL_DATASET" --val-scope all)
NARROW=(--conv 16,32,48,48,64,64 --fc 128,128)
WIDE=(--conv 24,48,64,64,96,96 --fc 160,128)
# the teachers: both CNN widths with training seeds 11 and 7 (CNN stage only; each skipped
# when its WORK/cnn.pt exists); they share the student's log-mel cache
TEACHERS=()
for teacher in narrow:11 narrow:7 wide:11 wide:7; do
  width=${teacher%%:*}; seed=${teacher##*:}
  work=out/train-audio-teachers/$width-seed$seed
  TEACHERS+=("$work")
  [ -f "$work/cnn.pt" ] && continue
  stamp "training teacher CNN $width, seed $seed"
  mkdir -p "$work"
  ln -sfn ../../train-audio/mel "$work/mel"
  if [ "$width" = narrow ]; then layout=("${NARROW[@]}"); else layout=("${WIDE[@]}"); fi
  "$PY" training/train_default_audio.py "${COMMON[@]}" "${layout[@]}" --train-seed "$seed" \
    --stages mel,cnn --work "$work" --models "$work/models"
done

# the recipe, distilled from the teachers, as it was chosen: trained without the validation
# recordings and measured on them (out/train-audio-val/val.json; MODEL.md's validation numbers)
DISTILL=(--distill "$(IFS=,; echo "${TEACHERS[*]}")")
stamp "training the recipe's validation run, distilled from the teachers"
mkdir -p out/train-audio-val
ln -sfn ../train-audio/mel out/train-audio-val/mel
"$PY" training/train_default_audio.py "${COMMON[@]}" "${WIDE[@]}" --train-seed 11 --threads 2 \
  "${DISTILL[@]}" --work out/train-audio-val --models out/train-audio-val/models "${EXTRA[@]}"
# the shipped model: the same recipe refit on every training recording, the validation
# recordings included (--train-on-val; they learn from their labels only); 1 torch thread,
# as run E16 was
stamp "training the shipped model: the recipe refit on the validation recordings too"
"$PY" training/train_default_audio.py "${COMMON[@]}" "${WIDE[@]}" --train-seed 11 --threads 1 \
  "${DISTILL[@]}" --train-on-val --work out/train-audio --models "$MODELS" "${EXTRA[@]}"

stamp "evaluating (C path)"
"$BUILD/tools/cony" info "$MODELS/transformer.safetensors" >/dev/null
UPDATE=(); [ -f "$MODELS/MODEL.md" ] && UPDATE=(--update-model-md)
# the eight test recordings version 9's train-only packages were chosen for (MODEL.md, Data)
TARGETED='(household/toilet|household/Washing-machine|emergency/firetruck|birds/owl|rodents/squirrel|insects/bee|Sounds/plane|fire/sounds/fire)'
"$PY" training/eval_default_audio.py --dataset "$DATASET" --cony "$BUILD/tools/cony" \
  --models "$MODELS" --cnn "$MODELS/vggish.safetensors" --also-without "$TARGETED" \
  --json out/train-audio/eval.json "${UPDATE[@]}" \
  > out/train-audio/eval.md
cat out/train-audio/eval.md
du -b "$MODELS"/* >&2
stamp "done"
