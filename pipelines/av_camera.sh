#!/usr/bin/env bash
# Classifies a camera and a microphone live with one fused model (conyfuse !
# conytransformer, docs/elements.md) and prints one line per fused step as soon as the
# element posts it: time, label, confidence. Ctrl-C stops.
#
#   pipelines/av_camera.sh [--audio-device NAME | --audio-source DESC]
#                          [--video-device /dev/videoN | --video-source DESC] [FUSED_MODEL]
#
# Sources: as microphone.sh and camera.sh take them (a pulsesrc/alsasrc device, a v4l2src
# device, or any GStreamer source description such as 'audiotestsrc is-live=true' or
# 'videotestsrc is-live=true pattern=ball'); by default the device monitor's microphone
# and camera. With no microphone or no camera it says so and exits 3 instead of fusing a
# stand-in. A source that stops later (a camera unplugged) makes that input absent in the
# fused steps; the others go on. Models: by default models/av/av.safetensors; a fused
# model's inputs must be named audio and video; the CNNs and outputs are those its inputs
# record (pipelines/av_lib.sh:
# CONY_AUDIO_CNN, CONY_VIDEO_CNN, CONY_VIDEO_FPS); CONY_OPTS: extra conytransformer
# properties.
set -euo pipefail
source "$(dirname "$0")/av_lib.sh"
audio_source="" audio_device="" video_source="" video_device="" fused=$CONY_AV_MODEL
while [ $# -gt 0 ]; do
  case $1 in
    --audio-source | --audio-device | --video-source | --video-device)
      [ $# -ge 2 ] || cony_usage ;;&
    --audio-source) audio_source=$2; shift 2 ;;
    --audio-device) audio_device=$2; shift 2 ;;
    --video-source) video_source=$2; shift 2 ;;
    --video-device) video_device=$2; shift 2 ;;
    -*) cony_usage ;;
    *) [ $# = 1 ] || cony_usage; fused=$1; shift ;;
  esac
done
cony_av_setup "$fused"
element=alsasrc
gst-inspect-1.0 --exists pulsesrc && element=pulsesrc
# shellcheck disable=SC2034 # read by cony_capture_source (lib.sh)
cony_source=$audio_source cony_device=$audio_device
hint="av_camera.sh: (here: --audio-device/--audio-source, --video-device/--video-source)"
asrc=$(cony_capture_source audio "$element") || { echo "$hint" >&2; exit 3; }
# shellcheck disable=SC2034
cony_source=$video_source cony_device=$video_device
vsrc=$(cony_capture_source video v4l2src) || { echo "$hint" >&2; exit 3; }
# -e: Ctrl-C sends EOS so the last step is printed; sync=true keeps the live pace.
# shellcheck disable=SC2046,SC2086
cony_launch -e -m conyfuse name=fuse model="$fused" \
  ! conytransformer name=classifier model="$fused" $CONY_OPTS ! fakesink sync=true \
  $asrc ! queue ! $(cony_av_audio_chain) ! fuse.sink_audio \
  $vsrc ! queue ! $(cony_av_video_chain) ! fuse.sink_video | cony_format
