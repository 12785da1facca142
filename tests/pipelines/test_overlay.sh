#!/usr/bin/env bash
# pipelines/overlay.sh --num-buffers N stops after N frames of any source: the labelled
# video it writes (--output, MJPEG in Matroska) has N frames, for a file (30 frames) as
# for the test source; without it the file's 30.
# Needs python3-gi, numpy, jpegenc/matroskamux, GST_PLUGIN_PATH (build/gst).
#   test_overlay.sh SOURCE_ROOT
set -uo pipefail
root=${1:?usage: test_overlay.sh SOURCE_ROOT}
/usr/bin/python3 -c 'import gi, numpy' 2>/dev/null || { echo "1..0 # SKIP needs python3-gi and numpy"; exit 77; }
gst-inspect-1.0 jpegenc >/dev/null 2>&1 && gst-inspect-1.0 matroskamux >/dev/null 2>&1 \
  || { echo "1..0 # SKIP needs jpegenc and matroskamux"; exit 77; }
. "$(dirname "$0")/../tap.sh"

# frames in a Matroska file
frames () {
  gst-launch-1.0 -v filesrc location="$1" ! matroskademux ! fakesink silent=false 2>&1 \
    | grep -c 'fakesink0: last-message = chain'
}
gst-launch-1.0 -q videotestsrc num-buffers=30 pattern=ball ! video/x-raw,width=160,height=120,framerate=10/1 \
  ! jpegenc ! matroskamux ! filesink location="$tmp/in.mkv"
# (the file case three times: identity's eos-after, used before, let 6 or 7 through by
# chance, and one run in five caught it)
for case in "in.mkv 7 7" "in.mkv 7 7" "in.mkv 7 7" "in.mkv 1 1" "in.mkv - 30" "test 5 5"; do
  # shellcheck disable=SC2086
  set -- $case
  args=("$1"); [ "$1" = in.mkv ] && args=("$tmp/in.mkv")
  [ "$2" != - ] && args+=(--num-buffers "$2")
  if (bash "$root/pipelines/overlay.sh" "${args[@]}" --quiet --output "$tmp/out.mkv" >/dev/null 2>"$tmp/err") \
     && got=$(frames "$tmp/out.mkv") && [ "$got" = "$3" ]; then
    ok "overlay.sh $1 --num-buffers $2: $got frames written"
  else
    not_ok "overlay.sh $1 --num-buffers $2: ${got:-no} frames, expected $3"; tail -3 "$tmp/err" | sed 's/^/# /'
  fi
  rm -f "$tmp/out.mkv"; got=
done
tap_done
