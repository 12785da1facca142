#!/usr/bin/env bash
# Tags audio with the 521 AudioSet labels (models/audioset/: the continual tagger over
# YAMNet embeddings), one line per step (0.25 s) as soon as it is posted: time, then the
# three best labels with their scores.
#
#   pipelines/audioset.sh FILE|URI                      a media file, as fast as it decodes
#   pipelines/audioset.sh [--device NAME | --source 'DESCRIPTION']   live (microphone.sh's
#                                                       sources; Ctrl-C stops)
#
# Models: CONY_YAMNET (default models/yamnet/yamnet.safetensors), CONY_TAGGER (default
# models/audioset/tagger.safetensors); CONY_OPTS: extra conytransformer properties.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
CONY_YAMNET=${CONY_YAMNET:-$CONY_ROOT/models/yamnet/yamnet.safetensors}
CONY_TAGGER=${CONY_TAGGER:-$CONY_ROOT/models/audioset/tagger.safetensors}
for m in "$CONY_YAMNET" "$CONY_TAGGER"; do
  [ -f "$m" ] || { echo "audioset.sh: model file $m not found (CONY_YAMNET / CONY_TAGGER)" >&2; exit 2; }
done

# A sigmoid model posts a step only when some label reaches the threshold (0 means 0.5);
# a tiny one posts every step, so quiet or unfamiliar sound still prints its best three.
chain () {
  echo "audioconvert ! audioresample ! conymel preset=yamnet" \
       "! conyvggish model=$CONY_YAMNET output=embedding $*" \
       "! conytransformer model=$CONY_TAGGER top-k=3 threshold=0.000001 $CONY_OPTS"
}

# gst-launch-1.0 -m lines -> "    1.25 s  Speech 0.951 | Music 0.040 | ...". In the
# message's lists every space and comma inside a label is escaped, so ", " separates
# entries; the time is stream-time-end (lib.sh, cony_format).
format () {
  sed -u -nE '
    /eos=\(boolean\)true/d
    /\(element\): conytransformer, /{
      s/.*stream-time-end=\(guint64\)([0-9]+).*top-labels=\(string\)< (.*) >, top-scores=\(float\)< ([^>]*) >.*/\1\t\2\t\3/
      s/, /|/g
      s/["\\]//g
      p; d
    }
    /ERROR|WARNING|error|Execution ended/w /dev/stderr
  ' | print_steps
}

print_steps () {
  local ns labels scores t line i
  local -a l s
  while IFS=$'\t' read -r ns labels scores; do
    IFS='|' read -r -a l <<<"$labels"
    IFS='|' read -r -a s <<<"$scores"
    printf -v t '%d.%09d' $((ns / 1000000000)) $((ns % 1000000000))
    LC_ALL=C printf -v line '%9.2f s ' "$t"
    for i in "${!l[@]}"; do
      LC_ALL=C printf -v line '%s %s %.3f |' "$line" "${l[i]}" "${s[i]}"
    done
    echo "${line% |}" || return 0
  done
}

case ${1:-} in
  ""|--device|--device=*|--source|--source=*)
    cony_parse_source "$@"
    element=alsasrc
    gst-inspect-1.0 --exists pulsesrc && element=pulsesrc
    src=$(cony_capture_source audio "$element")
    # shellcheck disable=SC2046,SC2086
    cony_launch -e -m $src ! $(chain) ! fakesink sync=true | format ;;
  -*) cony_usage ;;
  *)
    cony_media_input "$1"
    # shellcheck disable=SC2046
    cony_launch -m uridecodebin uri="$cony_uri" ! $(chain batch=64) ! fakesink sync=false | format ;;
esac
