# Sourced by training/train_yamnet_audio.sh and training/train_audioset_tagger.sh (from the
# repository root): the labelled clip data sets the recipes train on, the `cony` tool, their
# common options and progress lines.
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
# AUDIO_DATA_VERSION=N trains on data set version N instead (not the default; README and
# build.py --data-version): 12 = version 9 plus version 11's 400 clips of added music and 450
# noise and 300 music clips of fourteen more packages (versions/added_v12.tsv), for training
# only, its validation recordings and test split version 9's (rule 18 of
# models/audio/EXPERIMENTS.md); 13 = version 12 plus validation-only clips of twenty-eight more
# packages (val_v13.tsv, split valx: never trained on; yamnet.py --val-extra measures them);
# 14 = version 9 plus 100 training clips of animal calls mined with YAMNet's AudioSet scores
# from four more packages (added_v14.tsv; rule 33); 15 = version 14 plus 100 training clips of
# alarm tones mined the same way from two more packages (added_v15.tsv; rule 34). A version
# other than 9 reuses version 9's package cache when there is one.
case ${AUDIO_DATA_VERSION:-9} in
  9|12|13|14|15) ;;
  *) echo "AUDIO_DATA_VERSION=${AUDIO_DATA_VERSION}: expected 9, 12, 13, 14 or 15" >&2; exit 2 ;;
esac
DATASET=out/audio-dataset-v${AUDIO_DATA_VERSION:-9}
# version 9's arguments (--per-class 400 --train-extra 800 --alarm-synth v3
# --train-only-version 7) and the added tables of the version
DATA_ARGS=(--data-version "${AUDIO_DATA_VERSION:-9}")
VAL_DATASET=out/audio-dataset-v7
VAL_DATA_ARGS=(--per-class 400 --train-extra 800 --alarm-synth v3 --train-only-version 5)

T0=$(date +%s)
# stamp MESSAGE: a progress line on stderr, "SCRIPT: [SECONDS s] MESSAGE".
stamp () { echo "$(basename "$0" .sh): [$(( $(date +%s) - T0 )) s] $*" >&2; }

# parse_train_args "$@": --rebuild-dataset (REBUILD=1), --models DIR (MODELS), --cache DIR
# (CACHE; only for a script that sets CACHE before), and after -- the trainer's own
# arguments (the array EXTRA); anything else prints the usage and exits 2.
parse_train_args () {
  REBUILD=0
  EXTRA=()
  local usage="usage: $0 [--rebuild-dataset] [--models DIR]${CACHE+ [--cache DIR]} [-- train args]"
  while [ $# -gt 0 ]; do
    case $1 in
      --rebuild-dataset) REBUILD=1 ;;
      --models) MODELS=$2; shift ;;
      --cache) [ -n "${CACHE+set}" ] || { echo "$usage" >&2; exit 2; }; CACHE=$2; shift ;;
      --) shift; EXTRA=("$@"); break ;;
      *) echo "$usage" >&2; exit 2 ;;
    esac
    shift
  done
}

# ensure_train_dataset REBUILD: builds version 9 if its manifest is missing (or with
# REBUILD=1); needs root for apt-get the first time.
ensure_train_dataset () {
  if [ "$1" = 1 ] || [ ! -f "$DATASET/manifest.csv" ]; then
    stamp "building the data set $DATASET"
    if [ "$DATASET" != out/audio-dataset-v9 ] && [ -d out/audio-dataset-v9/.cache ]; then
      mkdir -p "$DATASET"
      [ -e "$DATASET/.cache" ] || ln -s "$(cd out/audio-dataset-v9 && pwd)/.cache" "$DATASET/.cache"
    fi
    bash training/data/build_audio_dataset.sh "$DATASET" "${DATA_ARGS[@]}"
  fi
}

# ensure_datasets REBUILD: ensure_train_dataset, then version 7 the same way; version 7
# reuses version 9's package cache.
ensure_datasets () {
  ensure_train_dataset "$1"
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
