#!/usr/bin/env bash
# Writes a known demo clip for the default audio model: out/demo.wav (16 kHz mono PCM16, 20 s)
#
#   scripts/make_demo_clip.sh [OUT.wav]
#
#   0 - 7 s    speech : English sentences spoken by espeak-ng (generated here)
#   7 - 15 s   music  : frozen-bubble-data, frozen-mainzik-1p.ogg from 60 s on (a track of the
#                       data set's test split, so the model never trained on it)
#  15 - 20 s   alarm  : sound-theme-freedesktop, phone-outgoing-busy.oga repeated (test split)
#
# Everything comes from Debian packages: sox, libsox-fmt-base and espeak-ng are installed with
# apt-get if missing (needs root); the two data packages are only downloaded (`apt-get download`)
# into out/.demo-cache and the two files unpacked from them, never installed. If the data set
# build (training/data/build_audio_dataset.sh) already unpacked them, that copy is used.
# The output is the same byte for byte from run to run (sox -R, no dither).
# Licences: frozen-bubble-data GPL-2; sound-theme-freedesktop phone-* GPL-2+; espeak-ng GPL-3+.
set -euo pipefail
source "$(dirname "$0")/../pipelines/help.sh"

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-$REPO/out/demo.wav}
CACHE=$REPO/out/.demo-cache
DATASET_SRC=$REPO/out/audio-dataset/.cache/src
MUSIC_PKG=frozen-bubble-data
MUSIC_FILE=usr/share/games/frozen-bubble/snd/frozen-mainzik-1p.ogg
ALARM_PKG=sound-theme-freedesktop
ALARM_FILE=usr/share/sounds/freedesktop/stereo/phone-outgoing-busy.oga

die() { echo "make_demo_clip: error: $*" >&2; exit 1; }

need=()
command -v sox >/dev/null || need+=(sox)
command -v espeak-ng >/dev/null || need+=(espeak-ng)
dpkg -s libsox-fmt-base >/dev/null 2>&1 || need+=(libsox-fmt-base)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  echo "make_demo_clip: installing ${need[*]}" >&2
  $SUDO apt-get install -y --no-install-recommends "${need[@]}" >/dev/null \
    || { $SUDO apt-get update >/dev/null && $SUDO apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; } \
    || die "apt-get install ${need[*]} failed"
fi

# fetch_file PACKAGE PATH -> prints the local path of PATH from PACKAGE
fetch_file() {
  local pkg=$1 path=$2
  if [ -f "$DATASET_SRC/$pkg/$path" ]; then echo "$DATASET_SRC/$pkg/$path"; return; fi
  if [ ! -f "$CACHE/$pkg/$path" ]; then
    mkdir -p "$CACHE/$pkg"
    local deb
    deb=$(ls "$CACHE"/"${pkg}"_*.deb 2>/dev/null | head -n1 || true)
    if [ -z "$deb" ]; then
      (cd "$CACHE" && apt-get download "$pkg" >/dev/null 2>&1) \
        || { apt-get update >/dev/null 2>&1 || true; (cd "$CACHE" && apt-get download "$pkg" >/dev/null); } \
        || die "apt-get download $pkg failed"
      deb=$(ls "$CACHE"/"${pkg}"_*.deb | head -n1)
    fi
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$CACHE/$pkg" "./$path" \
      || die "$deb has no $path"
  fi
  echo "$CACHE/$pkg/$path"
}

music=$(fetch_file "$MUSIC_PKG" "$MUSIC_FILE")
alarm=$(fetch_file "$ALARM_PKG" "$ALARM_FILE")
mkdir -p "$(dirname "$OUT")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
FMT=(-r 16000 -c 1 -b 16 -e signed-integer)

espeak-ng -v en-us -s 160 -w "$tmp/speech_raw.wav" \
  "This is a short test of the continual transformer. It listens to the sound, a quarter of a \
second at a time, and says what it hears. First, a voice; then, some music; and at the end, \
an alarm that keeps ringing."
sox -V1 -R -D "$tmp/speech_raw.wav" "${FMT[@]}" "$tmp/speech.wav" norm -20 pad 0 7 trim 0 7
sox -R -D "$music" "${FMT[@]}" "$tmp/music.wav" trim 60 8 norm -18
sox -R -D "$alarm" "${FMT[@]}" "$tmp/alarm1.wav"
sox -R -D "$tmp/alarm1.wav" "$tmp/alarm1.wav" "$tmp/alarm1.wav" "$tmp/alarm1.wav" "$tmp/alarm1.wav" \
  "$tmp/alarm1.wav" "$tmp/alarm1.wav" "$tmp/alarm1.wav" "$tmp/alarm_rep.wav"
sox -R -D "$tmp/alarm_rep.wav" "${FMT[@]}" "$tmp/alarm.wav" trim 0 5 norm -18
sox -R -D "$tmp/speech.wav" "$tmp/music.wav" "$tmp/alarm.wav" "${FMT[@]}" "$OUT"
echo "make_demo_clip: wrote $OUT ($(soxi -D "$OUT") s): speech 0-7 s, music 7-15 s, alarm 15-20 s" >&2
