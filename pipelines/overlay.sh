#!/usr/bin/env bash
# Shows video with the current label drawn on it (textoverlay fed from conytransformer's
# bus messages by pipelines/overlay.py).
#
#   pipelines/overlay.sh [camera|test|FILE] [--output OUT.mkv] [--num-buffers N]
#
# Models: CONY_VIDEO_CNN / CONY_VIDEO_CLASSIFIER (default the ImageNet MobileNet-v2 and the
# continual tagger of models/video-tagger/; CONY_VIDEO_CLASSIFIER=none: per frame); plugin:
# GST_PLUGIN_PATH (default build/gst). See pipelines/overlay.py --help.
set -euo pipefail
source "$(dirname "$0")/help.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
export GST_PLUGIN_PATH=${GST_PLUGIN_PATH:-$root/build/gst}
exec /usr/bin/python3 "$root/pipelines/overlay.py" "$@"
