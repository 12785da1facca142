#!/usr/bin/env bash
# Rebuilds the fused audio-video model (models/av/av.safetensors) end to end:
#
#   training/train_av.sh [-- train_av.py args]
#
#   1. the photographs and recordings: `apt-get download` of the Debian bookworm packages
#      training/conytrain/av/sources.py names (about 570 MB; needs the Debian archive),
#      unpacked with dpkg-deb -x into out/av-debs/x/ (each package skipped when there),
#   2. the build (build/: libcony, the plugin, `cony`),
#   3. training/train_av.py: sound clips and camera shots, their YAMNet and MobileNet-v2
#      embeddings (out/av/tokens-*.npz), the fused model and the two single-sense models
#      (seeds 1, 2, 3), the card's table (out/av/eval-run1.json) and the export of seed
#      1's fused model to models/av/.
# About 15 min of data and 30 min of training on the shared 2-core machine.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
debs=out/av-debs
mkdir -p "$debs/pkgs" "$debs/x"
pkgs=$(cd training && /usr/bin/python3 -c 'from conytrain.av import sources; print(" ".join(sources.packages()))')
for p in $pkgs; do   # each package once; new ones are added to an existing unpacked tree
  ls "$debs/pkgs/${p}"_*.deb >/dev/null 2>&1 && continue
  (cd "$debs/pkgs" && apt-get download "$p")
  dpkg-deb -x "$debs/pkgs/${p}"_*.deb "$debs/x"
done
[ -x build/tools/cony ] || bash scripts/build.sh
ninja -C build -j2 >/dev/null
[ "${1:-}" = -- ] && shift
GST_PLUGIN_PATH=$REPO/build/gst /usr/bin/python3 training/train_av.py --root "$debs/x" "$@"
