#!/usr/bin/env bash
# Classifies any media file GStreamer can decode (uridecodebin: WAV, Ogg, MP3, video
# files' audio, ...) as fast as the machine allows, one line per step: time, label,
# confidence.
#
#   pipelines/file.sh FILE|URI [VGGISH.safetensors [TRANSFORMER.safetensors]]
#
# Models and extra options: see pipelines/lib.sh (CONY_VGGISH, CONY_TRANSFORMER, CONY_OPTS).
set -euo pipefail
input=${1:?usage: file.sh FILE|URI [VGGISH [TRANSFORMER]]}
[ $# -ge 2 ] && CONY_VGGISH=$2
[ $# -ge 3 ] && CONY_TRANSFORMER=$3
source "$(dirname "$0")/lib.sh"
cony_check_models
case $input in
  *://*) uri=$input ;;
  *) [ -f "$input" ] || { echo "file.sh: $input not found" >&2; exit 2; }
     uri="file://$(cd "$(dirname "$input")" && pwd)/$(basename "$input")" ;;
esac
# A file is not live, so conyvggish runs its CNN on 64 windows at a time (about twice as
# fast; the same results).
# shellcheck disable=SC2046
cony_launch -m uridecodebin uri="$uri" ! $(cony_chain batch=64) ! fakesink sync=false | cony_format
