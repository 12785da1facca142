#!/usr/bin/env bash
# Classifies the microphone live and prints one line per step, as soon as the element
# posts it: time, label, confidence. Ctrl-C stops.
#
#   pipelines/microphone.sh [--device NAME | --source 'DESCRIPTION'] [VGGISH [TRANSFORMER]]
#
# Source: --device NAME (a pulsesrc device, see `pipelines/devices.py audio --list`, or
# an alsasrc one where GStreamer's PulseAudio plugin is missing),
# --source 'any GStreamer source description' (e.g. 'audiotestsrc is-live=true' or
# 'filesrc location=a.wav ! decodebin'), or by default the device monitor's default
# microphone. With no microphone it says so and exits 3 (autoaudiosrc would fall back
# to a silent fake source).
# Models and extra options: see pipelines/lib.sh (CONY_VGGISH, CONY_TRANSFORMER, CONY_OPTS).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cony_parse_source "$@"
shift "$cony_nargs"
[ $# -ge 1 ] && CONY_VGGISH=$1
[ $# -ge 2 ] && CONY_TRANSFORMER=$2
cony_check_models
# --device names a PulseAudio source (pulsesrc) where that plugin is installed, else an
# ALSA device (alsasrc, e.g. hw:1,0).
element=alsasrc
gst-inspect-1.0 --exists pulsesrc && element=pulsesrc
src=$(cony_capture_source audio "$element")
# -e: Ctrl-C sends EOS so the last step is printed; sync=true keeps the live pace.
# shellcheck disable=SC2046,SC2086
cony_launch -e -m $src ! $(cony_chain) ! fakesink sync=true | cony_format
