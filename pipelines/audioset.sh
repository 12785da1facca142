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

# gst-launch-1.0 -m lines -> "    1.25 s  Speech 0.951 | Music 0.040 | ...". The message's
# `top` is a list of class structures, each written escaped (`label\=\(string\)...\,\
# score\=\(float\)...`, a label's own spaces and commas escaped once more); the time is
# stream_end (lib.sh, cony_format: one perl process).
format () {
  perl -ne "$cony_perl_common"'
    next if /eos=\(boolean\)true/;
    if (/\(element\): conytransformer, /) {
      next unless /.*stream_end=\(guint64\)([0-9]+).*top=\(structure\)< (.*?) >, context_fill=/;
      my ($ns, $top, @l, @s) = ($1, $2);
      while ($top =~ /label\\=\\\(string\\\)(.*?)\\,\\ score\\=\\\(float\\\)([-0-9.e]+)/g) {
        push @l, $1 =~ tr/"\\//dr;
        push @s, $2;
      }
      print sprintf("%9s s  ", cony_time($ns)),
        join(" | ", map { sprintf "%s %.3f", $l[$_], $s[$_] } 0 .. $#l), "\n" or exit 0;
    } elsif (/ERROR|WARNING|error|Execution ended/) {
      print STDERR $_;
    }'
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
