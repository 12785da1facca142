#!/usr/bin/env bash
# Classifies a camera (v4l2src) live and prints one line per step: time, label,
# confidence. Without a camera (no /dev/video*), videotestsrc's moving ball stands in.
# Ctrl-C stops.
#
#   pipelines/camera.sh [DEVICE [FRAME_CNN.safetensors [CLASSIFIER.safetensors]]]
#
# Models and options: pipelines/video_lib.sh (CONY_VIDEO_CNN, CONY_VIDEO_CLASSIFIER,
# CONY_VIDEO_FPS, CONY_NUM_BUFFERS) and pipelines/lib.sh (CONY_OPTS, GST_PLUGIN_PATH).
set -euo pipefail
device=${1:-}
[ $# -ge 2 ] && CONY_VIDEO_CNN=$2
[ $# -ge 3 ] && CONY_VIDEO_CLASSIFIER=$3
source "$(dirname "$0")/video_lib.sh"
cony_video_check_models
if [ -z "$device" ]; then
  device=$(ls /dev/video* 2>/dev/null | head -1 || true)
fi
if [ -n "$device" ] && [ -e "$device" ]; then
  src="v4l2src device=$device num-buffers=$CONY_NUM_BUFFERS"
else
  echo "camera.sh: no camera (/dev/video*): using videotestsrc pattern=ball instead" >&2
  src="videotestsrc is-live=true pattern=ball num-buffers=$CONY_NUM_BUFFERS"
fi
# -e: Ctrl-C sends EOS so the last step is printed.
# shellcheck disable=SC2046,SC2086
gst-launch-1.0 -e -m $src ! $(cony_video_chain) ! fakesink sync=false | cony_format
