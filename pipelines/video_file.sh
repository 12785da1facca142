#!/usr/bin/env bash
# Classifies the video track of a media file (any format GStreamer decodes) as fast as
# it can and prints one line per step: time in the file, label, confidence.
#
#   pipelines/video_file.sh FILE [FRAME_CNN.safetensors [CLASSIFIER.safetensors]]
#
# Models and options: pipelines/video_lib.sh and pipelines/lib.sh; e.g.
#   CONY_OPTS="message-mode=on-change" pipelines/video_file.sh clip.mkv
# prints only the label changes.
set -euo pipefail
source "$(dirname "$0")/video_lib.sh"
{ [ $# -ge 1 ] && [ $# -le 3 ]; } || cony_usage
file=$1
[ $# -ge 2 ] && CONY_VIDEO_CNN=$2
[ $# -ge 3 ] && CONY_VIDEO_CLASSIFIER=$3
cony_video_check_models
[ -f "$file" ] || { echo "video_file.sh: $file not found" >&2; exit 2; }
# decodebin's audio pads (if any) stay unlinked; the video pad goes to the chain.
# shellcheck disable=SC2046
cony_launch -m filesrc location="$file" ! decodebin ! $(cony_video_chain) \
  ! fakesink sync=false | cony_format
