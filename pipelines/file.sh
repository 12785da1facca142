#!/usr/bin/env bash
# Classifies any media file GStreamer can decode (uridecodebin: WAV, Ogg, MP3, video
# files' audio, ...) as fast as the machine allows, one line per step: time, label,
# confidence.
#
#   pipelines/file.sh FILE|URI [VGGISH.safetensors [TRANSFORMER.safetensors]]
#
# Models and extra options: see pipelines/lib.sh (CONY_VGGISH, CONY_TRANSFORMER, CONY_OPTS).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
{ [ $# -ge 1 ] && [ $# -le 3 ]; } || cony_usage
input=$1
[ $# -ge 2 ] && CONY_VGGISH=$2
[ $# -ge 3 ] && CONY_TRANSFORMER=$3
cony_check_models
# A file without audio stops here with one line (lib.sh, cony_media_input).
cony_media_input "$input"
# A file is not live, so conyvggish runs its CNN on 64 windows at a time (about twice as
# fast; the same results). Messages go to a log first: should the probe have been unable
# to tell, a file without audio makes uridecodebin fail to link (not-linked, delayed
# linking) and still gets one clear line instead.
errlog=$(mktemp)
trap 'rm -f "$errlog"' EXIT
status=0
# shellcheck disable=SC2046
cony_launch -m uridecodebin uri="$cony_uri" ! $(cony_chain batch=64) ! fakesink sync=false \
  2>"$errlog" | cony_format 2>>"$errlog" || status=$?
# (Which of the two messages comes first varies from run to run.)
if [ "$status" != 0 ] && grep -q "Delayed linking failed\|reason not-linked" "$errlog"; then
  echo "file.sh: $input: no audio track (uridecodebin found no stream to link to audioconvert)" >&2
  exit 4
fi
cat "$errlog" >&2
exit "$status"
