#!/usr/bin/env bash
# Installs everything gst-cony needs on Debian bookworm. Idempotent: packages
# already present are skipped, so a second run costs only a dpkg query.
set -euo pipefail

PACKAGES=(
  build-essential meson ninja-build pkg-config
  libglib2.0-dev libjson-glib-dev
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  libopenblas-dev liblapacke-dev
  libavutil-dev libswresample-dev
  python3 python3-numpy python3-torch
  python3-gi gir1.2-gstreamer-1.0
  espeak-ng sox libsox-fmt-base
  clang libclang-rt-14-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: all dependencies present"
