#!/usr/bin/env bash
# Configures (once) and builds into build/. Progress ("[12/40] Compiling ...") goes to
# stderr, so a first build (about a minute) is not silent and stdout stays clean for
# scripts/run.sh's results; an up-to-date tree prints nothing. When meson or ninja fails,
# its own error is shown (a missing dependency, a compiler error) and the status is 1.
#
#   scripts/build.sh
set -euo pipefail
source "$(dirname "$0")/../pipelines/help.sh"
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  echo "build: configuring build/ (meson setup; the first build takes about a minute)" >&2
  # meson's chatter is kept out of sight unless it fails: then its last lines say why.
  if ! out=$(meson setup build 2>&1); then
    tail -n 15 <<<"$out" >&2
    echo "build: meson setup failed (above; the whole log: build/meson-logs/meson-log.txt)" >&2
    exit 1
  fi
fi
# One job again if two fail (a memory-starved machine). ninja's errors pass through.
build () {
  ninja -C build -j "$1" 2>&1 | { grep --line-buffered -v '^ninja: \(Entering\|Leaving\|no work\)' >&2 || true; }
}
build 2 || build 1 || { echo "build: ninja -C build failed (the error is above)" >&2; exit 1; }
