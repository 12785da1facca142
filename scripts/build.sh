#!/usr/bin/env bash
# Configures (once) and builds into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  meson setup build >/dev/null
fi
ninja -C build -j 2 >/dev/null || ninja -C build -j 1
