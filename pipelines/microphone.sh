#!/usr/bin/env bash
# Classifies the microphone (autoaudiosrc) live and prints one line per step:
# time, label, confidence. Ctrl-C stops.
#
#   pipelines/microphone.sh [VGGISH.safetensors [TRANSFORMER.safetensors]]
#
# Models and extra options: see pipelines/lib.sh (CONY_VGGISH, CONY_TRANSFORMER, CONY_OPTS).
set -euo pipefail
[ $# -ge 1 ] && CONY_VGGISH=$1
[ $# -ge 2 ] && CONY_TRANSFORMER=$2
source "$(dirname "$0")/lib.sh"
cony_check_models
# -e: Ctrl-C sends EOS so the last step is printed; sync=true keeps the live pace.
# shellcheck disable=SC2046
gst-launch-1.0 -e -m autoaudiosrc ! $(cony_chain) ! fakesink sync=true | cony_format
