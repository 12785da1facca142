#!/usr/bin/env bash
# Pipeline test: audiotestsrc ! audioconvert ! audioresample ! conymel ! conyvggish ! fakesink
# runs to EOS through gst-launch-1.0 and produces the expected embeddings.
# Needs GST_PLUGIN_PATH (the build tree's gst/) and a model file as $1.
set -uo pipefail
model=${1:?usage: test_gst_pipeline.sh MODEL.safetensors}
launch=$(command -v gst-launch-1.0) || { echo "gst-launch-1.0 not found: skipping"; exit 77; }
fail=0

# run NAME EXPECTED_BUFFERS EXPECTED_LAST_PTS PIPELINE...
run () {
  local name=$1 want=$2 last_pts=$3; shift 3
  local out
  if ! out=$("$launch" -e -v "$@" 2>&1); then
    echo "FAIL $name: gst-launch-1.0 failed"; echo "$out" | tail -20; fail=1; return
  fi
  local chains n last
  chains=$(echo "$out" | grep 'fakesink0: last-message = chain')
  n=$(echo -n "$chains" | grep -c 'chain' || true)
  last=$(echo "$chains" | tail -1 | sed -n 's/.*pts: \([0-9:.]*\), duration: \([0-9:.]*\).*/\1 \2/p')
  if [ "$n" != "$want" ]; then
    echo "FAIL $name: $n embeddings, expected $want"; fail=1
  elif [ "$last" != "$last_pts" ]; then
    echo "FAIL $name: last embedding at '$last', expected '$last_pts'"; fail=1
  elif echo "$chains" | grep -vq '(512 bytes'; then
    echo "FAIL $name: an embedding is not 128 floats"; fail=1
  else
    echo "ok $name: $n embeddings, last at $last"
  fi
}

# 3 s of 44.1 kHz stereo S16: converted, resampled to 16 kHz (48000 samples),
# 298 log-mel frames, windows of 96 every 25 frames: 9 full embeddings, the last
# starting at 8 x 0.25 s and ending at frame 296; at EOS frames 296-297 give a 10th
# at 9 x 0.25 s, padded with silence (pad-tail); pad-tail=false drops them.
run resampled 10 "0:00:02.250000000 0:00:00.250000000" \
  audiotestsrc num-buffers=30 samplesperbuffer=4410 wave=sine freq=440 \
  ! audio/x-raw,format=S16LE,rate=44100,channels=2 \
  ! audioconvert ! audioresample ! conymel ! conyvggish model="$model" \
  ! fakesink silent=false
run resampled-no-pad 9 "0:00:02.000000000 0:00:00.250000000" \
  audiotestsrc num-buffers=30 samplesperbuffer=4410 wave=sine freq=440 \
  ! audio/x-raw,format=S16LE,rate=44100,channels=2 \
  ! audioconvert ! audioresample ! conymel ! conyvggish model="$model" pad-tail=false \
  ! fakesink silent=false
# 0.3 s, shorter than one 0.975 s window: one embedding (at 0), not none.
run short 1 "0:00:00.000000000 0:00:00.250000000" \
  audiotestsrc num-buffers=3 samplesperbuffer=1600 wave=sine freq=440 \
  ! audio/x-raw,rate=16000 ! conymel ! conyvggish model="$model" \
  ! fakesink silent=false

# 102400 samples at 16 kHz in 1024-sample buffers: 638 frames, 22 full embeddings
# (to frame 621) and the padded tail at 22 x 0.25 s.
run native 23 "0:00:05.500000000 0:00:00.250000000" \
  audiotestsrc num-buffers=100 wave=white-noise \
  ! audio/x-raw,rate=16000 ! audioconvert ! audioresample \
  ! conymel frames-per-buffer=4 ! conyvggish model="$model" \
  ! fakesink silent=false

# A missing model fails cleanly (an error, no crash).
if out=$("$launch" audiotestsrc num-buffers=10 ! conymel ! conyvggish model=/nonexistent.safetensors ! fakesink 2>&1); then
  echo "FAIL missing-model: the pipeline ran"; fail=1
elif ! grep -q "Could not load the model" <<<"$out"; then
  echo "FAIL missing-model: no clear error"; echo "$out" | tail -5; fail=1
else
  echo "ok missing-model: refused with a clear error"
fi
exit $fail
