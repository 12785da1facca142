#!/usr/bin/env bash
# Classifies a camera live and prints one line per step, as soon as the element posts
# it: time, label, confidence. Ctrl-C stops.
#
#   pipelines/camera.sh [--device /dev/videoN | --source 'DESCRIPTION'] [FRAME_CNN [CLASSIFIER]]
#
# Source: --device (v4l2src device=...; a bare /dev/videoN first argument works too),
# --source 'any GStreamer source description' (e.g. 'videotestsrc is-live=true
# pattern=ball'), or by default the camera GStreamer's device monitor finds. With no
# camera it says so and exits 3 instead of classifying a stand-in picture.
# Models and options: pipelines/video_lib.sh (CONY_VIDEO_CNN, CONY_VIDEO_CLASSIFIER,
# CONY_VIDEO_FPS, CONY_NUM_BUFFERS) and pipelines/lib.sh (CONY_OPTS, GST_PLUGIN_PATH).
set -euo pipefail
source "$(dirname "$0")/video_lib.sh"
case ${1:-} in /dev/*) set -- --device "$@" ;; esac
cony_parse_source "$@"
shift "$cony_nargs"
[ $# -ge 1 ] && CONY_VIDEO_CNN=$1
[ $# -ge 2 ] && CONY_VIDEO_CLASSIFIER=$2
cony_video_check_models
src=$(cony_capture_source video v4l2src)
[ "$CONY_NUM_BUFFERS" != -1 ] && src="$src num-buffers=$CONY_NUM_BUFFERS"
# -e: Ctrl-C sends EOS so the last step is printed.
# shellcheck disable=SC2046,SC2086
cony_launch -e -m $src ! $(cony_video_chain) ! fakesink sync=false | cony_format
