#!/usr/bin/env bash
# The camera side of listen lists and label groups (issue 56.5): pipelines/video_file.sh on
# tests/golden/imagenet/photos.webm (Egyptian cat, macaw, hotdog, baboon; 1 s each) with the
# continual video tagger and the shipped models/imagenet/home.groups reports the groups:
# cat, bird, then other (hotdog and baboon are in no group); with listen="cat;dog",
# other-label="" and threshold=0.3 only cat (the other photographs' steps reach no
# threshold, so they change no segment).
# Needs GST_PLUGIN_PATH (the build tree's gst/).
#   test_imagenet_groups.sh SOURCE_ROOT
set -uo pipefail
root=${1:?usage: test_imagenet_groups.sh SOURCE_ROOT}
command -v gst-launch-1.0 >/dev/null || { echo "1..0 # SKIP gst-launch-1.0 not found"; exit 77; }
. "$(dirname "$0")/../tap.sh"
groups=$root/models/imagenet/home.groups
labels_of () { sed -nE 's/^ *[0-9.]+ s  (.*[^ ]) +[0-9.]+$/\1/p' | sed 's/ *$//' | paste -sd'|'; }

run () {
  local what=$1 want=$2
  shift 2
  if ! CONY_OPTS="groups-file=$groups message-mode=on-change $*" timeout 120 \
      bash "$root/pipelines/video_file.sh" "$root/tests/golden/imagenet/photos.webm" \
      >"$tmp/out" 2>"$tmp/err"; then
    not_ok "$what: video_file.sh failed"; tail -5 "$tmp/err" | sed 's/^/# /'; return
  fi
  local got
  got=$(labels_of <"$tmp/out")
  if [ "$got" = "$want" ]; then ok "$what: $got"
  else not_ok "$what: '$got', expected '$want'"; sed 's/^/# /' "$tmp/out" | head; fi
}

run "home.groups" "cat|bird|other"
run "listen cat;dog, no other, threshold 0.3" "cat" 'listen=cat;dog other-label="" threshold=0.3'
# a label ImageNet does not have is refused, naming it
if CONY_OPTS="groups-file=$groups listen=person" timeout 60 bash "$root/pipelines/video_file.sh" \
    "$root/tests/golden/imagenet/photos.webm" >"$tmp/out" 2>"$tmp/err"; then
  not_ok "listen=person was accepted"
elif grep -q "'person' is neither a group of the groups file nor one of the model's 1001 labels" \
    "$tmp/err"; then
  ok "listen=person is refused, naming it"
else
  not_ok "listen=person: no message naming it"; tail -3 "$tmp/err" | sed 's/^/# /'
fi
tap_done
