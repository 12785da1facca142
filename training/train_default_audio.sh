#!/usr/bin/env bash
# Rebuilds the shipped default audio model (models/audio/) from a fresh checkout:
#
#   training/train_default_audio.sh [--rebuild-dataset] [--models DIR] [-- extra train args]
#
#   1. the labelled clip data sets from Debian packages (training/data/build_audio_dataset.sh
#      --per-class 400 --train-extra 800 --alarm-synth v3): version 7 (--train-only-version 5)
#      -> out/audio-dataset-v7, the one the model is trained and evaluated on, and the
#      teachers' versions 5 and 6 (--keep-mislabelled, --train-only-version 5 / 6) ->
#      out/audio-dataset-v5, -v6, sharing version 7's package cache; each skipped when its
#      manifest already exists, unless --rebuild-dataset; needs root for apt-get the first time,
#   2. the `cony` tool (meson + ninja in build-train/, if not built yet),
#   3. three teacher CNNs (training/train_default_audio.py --stages mel,cnn, the plain recipe,
#      training seed 11) on versions 7, 5 and 6 -> out/train-teacher-v7, -v5, -v6 (two at a
#      time; skipped where WORK/cnn.pt exists),
#   4. training/train_default_audio.py on version 7 with --distill (the teachers): log-mel
#      with `cony mel`, the reduced VGGish CNN, its embeddings with `cony embed`, the CoNy
#      encoder-classifier (cony, then k-means fixed landmarks and fine-tuning -> cony-fixed),
#      export to models/audio/,
#   5. training/eval_default_audio.py: held-out per-step accuracy through the C tools,
#      written into models/audio/MODEL.md.
# Work files go to out/train-audio/ (gitignored). About 2 h 30 min on 2 cores (teachers
# 50 min, the distilled CNN 45 min, data sets 35 min), plus the packages' downloads (about
# 7.5 GB) the first time.
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
COMMON=(--per-class 400 --train-extra 800 --alarm-synth v3)
# the teachers (models/audio/MODEL.md): the plain recipe on versions 7, 5 and 6
TEACHER_DATA=(v7 v5 v6)
declare -A BUILD_ARGS=(
  [v7]="--train-only-version 5"
  [v5]="--train-only-version 5 --keep-mislabelled"
  [v6]="--train-only-version 6 --keep-mislabelled"
)
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

for v in "${TEACHER_DATA[@]}"; do
  dir=out/audio-dataset-$v
  if [ "$REBUILD" = 1 ] || [ ! -f "$dir/manifest.csv" ]; then
    if [ "$v" != v7 ] && [ ! -e "$dir/.cache" ]; then
      # one download of the packages serves all three versions
      mkdir -p "$dir"
      ln -s "$REPO/$DATASET/.cache" "$dir/.cache"
    fi
    stamp "building the data set $dir"
    # shellcheck disable=SC2086
    bash training/data/build_audio_dataset.sh "$dir" "${COMMON[@]}" ${BUILD_ARGS[$v]}
  fi
done

if [ ! -x "$BUILD/tools/cony" ]; then
  stamp "building cony in $BUILD"
  [ -d "$BUILD" ] || meson setup "$BUILD" >/dev/null
fi
if ! ninja -C "$BUILD" -j2 tools/cony >/dev/null; then
  [ -x "$BUILD/tools/cony" ] || { echo "train_default_audio: building cony failed" >&2; exit 1; }
  echo "train_default_audio: warning: rebuilding cony failed; using the existing $BUILD/tools/cony" >&2
fi

train_teacher() {
  local work=out/train-teacher-$1
  [ -f "$work/cnn.pt" ] && return 0
  "$PY" training/train_default_audio.py --dataset "out/audio-dataset-$1" --cony "$BUILD/tools/cony" \
    --stages mel,cnn --work "$work" --models "$work/models" > "$work.log" 2>&1 \
    || { echo "train_default_audio: teacher $1 failed, see $work.log" >&2; return 1; }
}
stamp "training the teachers (logs: out/train-teacher-*.log)"
mkdir -p out
train_teacher v7 & p7=$!
train_teacher v5 & p5=$!
wait $p7 && wait $p5
train_teacher v6

stamp "training the distilled model"
"$PY" training/train_default_audio.py --dataset "$DATASET" --cony "$BUILD/tools/cony" \
  --distill out/train-teacher-v7,out/train-teacher-v5,out/train-teacher-v6 \
  --work out/train-audio --models "$MODELS" "${EXTRA[@]}"

stamp "evaluating (C path)"
"$BUILD/tools/cony" info "$MODELS/transformer.safetensors" >/dev/null
UPDATE=(); [ -f "$MODELS/MODEL.md" ] && UPDATE=(--update-model-md)
"$PY" training/eval_default_audio.py --dataset "$DATASET" --cony "$BUILD/tools/cony" \
  --models "$MODELS" --json out/train-audio/eval.json "${UPDATE[@]}" > out/train-audio/eval.md
cat out/train-audio/eval.md
du -b "$MODELS"/* >&2
stamp "done"
