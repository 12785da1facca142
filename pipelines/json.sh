#!/usr/bin/env bash
# Prints the classification of a media file, the microphone or a test tone as JSON
# lines, records of docs/results.schema.json (as conyjson's: a "result" per step with
# step, span, class_id, label, score, top, scores, ...), through
# pipelines/print_results.py (python3-gi, gir1.2-gstreamer-1.0).
#
#   pipelines/json.sh [FILE|URI|mic|test] [VGGISH.safetensors [TRANSFORMER.safetensors]]
#
# Extra print_results.py options go in CONY_JSON_OPTS (e.g. "--from-meta" or
# "--message-mode on-change --threshold 0.6").
set -euo pipefail
input=${1:-test}
[ $# -ge 2 ] && CONY_VGGISH=$2
[ $# -ge 3 ] && CONY_TRANSFORMER=$3
source "$(dirname "$0")/lib.sh"
cony_check_models
# shellcheck disable=SC2086
exec /usr/bin/python3 "$CONY_ROOT/pipelines/print_results.py" "$input" --json \
  --vggish "$CONY_VGGISH" --transformer "$CONY_TRANSFORMER" ${CONY_JSON_OPTS:-}
