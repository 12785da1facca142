#!/usr/bin/env bash
# Rebuilds the continual video tagger (models/video-tagger/tagger.safetensors) end to end:
#
#   training/train_video_tagger.sh [-- train args]
#
#   1. the photographs: `apt-get download opencv-doc python3-skimage python3-sklearn`
#      (Debian bookworm; needs the Debian archive) unpacked with dpkg-deb -x into
#      out/video-photos-debs/ (skipped when there),
#   2. the build (build/: libcony, the plugin, `cony`),
#   3. training/train_video_tagger.py: the camera-like sequences (out/video-tagger/seq/,
#      about 1.5 GB of raw frames), their MobileNet embeddings through conyframeembed,
#      the encoder distilled from the MobileNet's scores, exported to
#      models/video-tagger/, and the held-out figures (out/video-tagger/eval-*.json).
# About 4 min of frames, 4-8 min of embeddings, 3-5 min of training on the shared 2-core
# machine.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
debs=out/video-photos-debs
if [ ! -d "$debs/usr" ]; then
  mkdir -p "$debs/pkgs"
  (cd "$debs/pkgs" && apt-get download opencv-doc python3-skimage python3-sklearn)
  for d in "$debs"/pkgs/*.deb; do dpkg-deb -x "$d" "$debs"; done
fi
[ -x build/tools/cony ] || bash scripts/build.sh
ninja -C build -j2 >/dev/null
[ "${1:-}" = -- ] && shift
GST_PLUGIN_PATH=$REPO/build/gst /usr/bin/python3 training/train_video_tagger.py \
  --photos "$debs" --cony build/tools/cony --work out/video-tagger \
  --models models/video-tagger "$@"
