# Sourced by training/train_default_audio.sh and training/train_yamnet_audio.sh (from the
# repository root): the labelled clip data sets both recipes train on, and the `cony` tool.
#
# Version 9 (out/audio-dataset-v9) is trained on: 400 clips per class (the data set
# script's default is 120), test split included, plus 800 training clips per class from
# the same train recordings and forty-nine train-only packages: more distinct recordings,
# which a model needs to generalise to unseen recordings. The synthesised alarms are
# generator v3's (ringtones, bells, sirens, beeps through loudspeakers and rooms, over real
# noise). Version 9 = version 7 (without fillets-ng's English sound effects, which versions
# 2-6 labelled speech) with the train-only recordings of versions 3 to 6 and of three more
# packages (training/data/README.md); its test split is version 7's. Version 7
# (out/audio-dataset-v7) gives the validation recordings (--val-scope all), carved from
# every family.
DATASET=out/audio-dataset-v9
DATA_ARGS=(--per-class 400 --train-extra 800 --alarm-synth v3 --train-only-version 7)
# AUDIO_DATA_VERSION=12 selects version 12 instead (not the default; rule 18 of
# models/audio/EXPERIMENTS.md decides): version 9 plus version 11's 400 clips of added music
# and 450 noise and 300 music clips of fourteen more packages (versions/added_v12.tsv), for
# training only; its validation recordings and test split are version 9's. It reuses
# version 9's package cache when there is one.
case ${AUDIO_DATA_VERSION:-9} in
  9) ;;
  12) DATASET=out/audio-dataset-v12
      DATA_ARGS+=(--added-music 400 --added-v12 noise=450,music=300) ;;
  *) echo "AUDIO_DATA_VERSION=${AUDIO_DATA_VERSION}: expected 9 or 12" >&2; exit 2 ;;
esac
VAL_DATASET=out/audio-dataset-v7
VAL_DATA_ARGS=(--per-class 400 --train-extra 800 --alarm-synth v3 --train-only-version 5)

# ensure_datasets REBUILD: builds each data set whose manifest is missing (all with
# REBUILD=1); needs root for apt-get the first time; version 7 reuses version 9's package
# cache. Uses stamp() for progress.
ensure_datasets () {
  if [ "$1" = 1 ] || [ ! -f "$DATASET/manifest.csv" ]; then
    stamp "building the data set $DATASET"
    if [ "$DATASET" != out/audio-dataset-v9 ] && [ -d out/audio-dataset-v9/.cache ]; then
      mkdir -p "$DATASET"
      [ -e "$DATASET/.cache" ] || ln -s "$(cd out/audio-dataset-v9 && pwd)/.cache" "$DATASET/.cache"
    fi
    bash training/data/build_audio_dataset.sh "$DATASET" "${DATA_ARGS[@]}"
  fi
  if [ "$1" = 1 ] || [ ! -f "$VAL_DATASET/manifest.csv" ]; then
    stamp "building the data set $VAL_DATASET (its validation recordings)"
    mkdir -p "$VAL_DATASET"
    [ -e "$VAL_DATASET/.cache" ] || ln -s "$(cd "$DATASET" && pwd)/.cache" "$VAL_DATASET/.cache"
    bash training/data/build_audio_dataset.sh "$VAL_DATASET" "${VAL_DATA_ARGS[@]}"
  fi
}

# ensure_cony BUILD: the cony tool in BUILD (meson + ninja), built or brought up to date.
ensure_cony () {
  if [ ! -x "$1/tools/cony" ]; then
    stamp "building cony in $1"
    [ -d "$1" ] || meson setup "$1" >/dev/null
  fi
  if ! ninja -C "$1" -j2 tools/cony >/dev/null; then
    [ -x "$1/tools/cony" ] || { echo "building cony in $1 failed" >&2; exit 1; }
    echo "warning: rebuilding cony failed; using the existing $1/tools/cony" >&2
  fi
}
