#!/usr/bin/env bash
# Installs everything gst-cony needs on Debian bookworm. Idempotent: packages
# already present are skipped, so a second run costs only a dpkg query.
#
#   scripts/setup.sh             # everything: build, run, tests and training/ (torch)
#   scripts/setup.sh --runtime   # only building and running the elements and pipelines/
#                                # (what scripts/run.sh needs: no torch, no test services)
set -euo pipefail
source "$(dirname "$0")/../pipelines/help.sh"

# Build and run: the elements (libmosquitto for conymqttsink), the CLI, pipelines/
# (python3-gi; GstPbutils for has_audio.py) and the demo clip's tools.
RUNTIME=(
  build-essential meson ninja-build pkg-config
  libglib2.0-dev libjson-glib-dev
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good webp-pixbuf-loader
  libopenblas-dev liblapacke-dev
  libavutil-dev libswresample-dev zlib1g-dev libmosquitto-dev
  python3 python3-gi gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0
  espeak-ng sox libsox-fmt-base
  python3-flatbuffers
)
# Tests and training/: the reference and training stack (torch), FluidSynth and its GM sound
# font (the music of train_your_own.py's "other" class and the data set's), matplotlib
# (pipelines/timeline.py's pictures), Pillow (the fused model's photographs,
# training/conytrain/av), numpy (overlay.py's bitmap font too), the MQTT broker of
# conymqttsink's tests and mosquitto_sub (the docs' subscriber), openssl (their throwaway
# TLS certificates), jsonschema (the result
# schema's test), and
# clang with its sanitizer runtime (test.sh's clang build and libFuzzer smoke run) and
# clang-format (the format test).
FULL=(
  python3-numpy python3-torch
  fluidsynth fluid-soundfont-gm
  python3-matplotlib python3-pil
  mosquitto mosquitto-clients python3-paho-mqtt python3-jsonschema openssl
  clang libclang-rt-14-dev clang-format
)

PACKAGES=("${RUNTIME[@]}")
case ${1:-} in
  --runtime) ;;
  "") PACKAGES+=("${FULL[@]}") ;;
  *) cony_usage ;;
esac

# Installed for this machine's architecture, or architecture-independent ("all"): a copy
# for a foreign architecture (multiarch) does not count, and a library installed for two
# architectures is one "install ok installed" line here, not a status that matches nothing.
arch=$(dpkg --print-architecture)
installed () {
  local status
  status=$(dpkg-query -W -f='${Status}\n' "$1:$arch" "$1:all" 2>/dev/null || true)
  grep -qx 'install ok installed' <<<"$status"   # no pipe: see sanitize.sh
}

missing=()
for p in "${PACKAGES[@]}"; do
  installed "$p" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: all dependencies present" >&2
