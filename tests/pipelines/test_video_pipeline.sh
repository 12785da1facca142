#!/usr/bin/env bash
# Pipeline test of the default video model on clips whose label is known:
#   filesrc (a clip of training/video_clips.py, raw RGB) ! rawvideoparse ! videoconvert
#   ! videoscale ! conyframeembed ! conytransformer ! fakesink        (gst-launch-1.0 -m)
# one clip per class (seeds that were never used for training or the held-out set), and
# videotestsrc pattern=snow at another size (videoscale to 32x32) as "noise".
# Checks: one message per frame, the last at the last frame's PTS, and the majority
# label over the steps with a full attention window (8) is the clip's class.
# Needs GST_PLUGIN_PATH (build tree's gst/); $1 = model dir, $2 = training/video_clips.py.
set -uo pipefail
models=${1:?usage: test_video_pipeline.sh MODEL_DIR VIDEO_CLIPS_PY}
clips_py=${2:?usage: test_video_pipeline.sh MODEL_DIR VIDEO_CLIPS_PY}
launch=$(command -v gst-launch-1.0) || { echo "gst-launch-1.0 not found: skipping"; exit 77; }
python=/usr/bin/python3
"$python" -c "import numpy" 2>/dev/null || { echo "no numpy for $python: skipping"; exit 77; }
cnn=$models/frame_cnn.safetensors
clf=$models/classifier.safetensors
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
chain="videoconvert ! videoscale ! conyframeembed model=$cnn ! conytransformer model=$clf ! fakesink"

# check NAME WANT_LABEL N_FRAMES PIPELINE...
check () {
  local name=$1 want=$2 frames=$3; shift 3
  local out
  if ! out=$("$launch" -m "$@" 2>&1); then
    echo "FAIL $name: gst-launch-1.0 failed"; echo "$out" | tail -20; fail=1; return
  fi
  # one "pts label" line per step
  local steps
  steps=$(echo "$out" | sed -nE 's/.*\(element\): conytransformer, .*pts=\(guint64\)([0-9]+).*label=\(string\)([^,]*),.*/\1 \2/p')
  local n last major
  n=$(echo -n "$steps" | grep -c . || true)
  last=$(echo "$steps" | tail -1 | cut -d' ' -f1)
  major=$(echo "$steps" | tail -n +8 | cut -d' ' -f2 | sort | uniq -c | sort -rn | head -1 | awk '{print $2}')
  local want_last=$(( (frames - 1) * 100000000 ))
  if [ "$n" != "$frames" ]; then
    echo "FAIL $name: $n steps, expected $frames"; fail=1
  elif [ "$last" != "$want_last" ]; then
    echo "FAIL $name: last step at $last ns, expected $want_last"; fail=1
  elif [ "$major" != "$want" ]; then
    echo "FAIL $name: majority label '$major', expected '$want'"
    echo "$steps" | cut -d' ' -f2 | sort | uniq -c; fail=1
  else
    echo "ok $name: $n steps, majority label $major ($(echo "$steps" | tail -n +8 | grep -c " $want\$")/$((n - 7)) full-window steps)"
  fi
}

seed=5000
for label in static moving-left moving-right flashing noise; do
  seed=$((seed + 1))
  "$python" "$clips_py" --label "$label" --frames 30 --seed "$seed" -o "$tmp/$label.rgb" || { echo "FAIL: clip generation"; exit 1; }
  # shellcheck disable=SC2086
  check "clip-$label" "$label" 30 filesrc location="$tmp/$label.rgb" \
    ! rawvideoparse format=rgb width=32 height=32 framerate=10/1 ! $chain
done
# shellcheck disable=SC2086
check videotestsrc-snow noise 20 videotestsrc pattern=snow num-buffers=20 \
  ! video/x-raw,width=64,height=48,framerate=10/1 ! $chain
exit $fail
