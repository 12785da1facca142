#!/usr/bin/env bash
# Configures (once) and builds into build/. Progress ("[12/40] Compiling ...") goes to
# stderr, so a first build (about a minute) is not silent and stdout stays clean for
# scripts/run.sh's results; an up-to-date tree prints nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  echo "build: configuring build/ (meson setup; the first build takes about a minute)" >&2
  meson setup build >/dev/null
fi
# One job again if two fail (a memory-starved machine).
build () {
  ninja -C build -j "$1" | { grep --line-buffered -v '^ninja: \(Entering\|Leaving\|no work\)' >&2 || true; }
}
build 2 || build 1
