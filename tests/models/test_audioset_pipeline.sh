#!/usr/bin/env bash
# pipelines/audioset.sh with the shipped tagger (models/audioset/) on generated clips:
# espeak-ng speech must have Speech among the three labels of (nearly) every step, a
# 440 Hz sine Sine wave; every line carries a time and three "label score" entries; the
# live form (--source) prints its steps too.
#   test_audioset_pipeline.sh REPO
# Needs GST_PLUGIN_PATH (the build tree's gst/).
set -uo pipefail
repo=${1:?usage: test_audioset_pipeline.sh REPO}
command -v gst-launch-1.0 >/dev/null || { echo "gst-launch-1.0 not found: skipping"; exit 77; }
command -v espeak-ng >/dev/null || { echo "espeak-ng not found: skipping"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

espeak-ng -w "$tmp/speech.wav" "The quick brown fox jumps over the lazy dog. \
Please remember to switch off the lights before you leave the room." || exit 1
gst-launch-1.0 -q audiotestsrc wave=sine freq=440 volume=0.5 num-buffers=40 \
  samplesperbuffer=1600 ! audio/x-raw,format=S16LE,rate=16000,channels=1 ! wavenc \
  ! filesink location="$tmp/sine.wav" || exit 1

# check NAME LABEL MIN_STEPS < lines: every line well-formed, LABEL in the top 3 of at
# least 90 % of the steps (the first, heard over less than one patch, may differ).
cat >"$tmp/check.py" <<'PYEOF'
import re, sys
name, label, min_steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = sys.stdin.read().splitlines()
entry = re.compile(r"^ *\d+\.\d\d s  (.+)$")
hits = 0
for ln in lines:
    m = entry.match(ln)
    assert m, f"{name}: malformed line {ln!r}"
    parts = [p.strip().rsplit(" ", 1) for p in m.group(1).split(" | ")]
    assert len(parts) == 3, f"{name}: not three labels: {ln!r}"
    scores = [float(s) for _, s in parts]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores), ln
    hits += label in [l for l, _ in parts]
assert len(lines) >= min_steps, f"{name}: {len(lines)} steps, expected >= {min_steps}"
assert hits >= 0.9 * len(lines), f"{name}: {label} in the top 3 of {hits}/{len(lines)} steps"
print(f"ok {name}: {label} in the top 3 of {hits}/{len(lines)} steps; first: {lines[0].strip()}")
PYEOF
check () { /usr/bin/python3 "$tmp/check.py" "$@"; }

run_check () {
  local name=$1 label=$2 min=$3; shift 3
  local out
  if ! out=$(timeout 60 "$repo/pipelines/audioset.sh" "$@" 2>"$tmp/err"); then
    echo "FAIL $name: audioset.sh failed"; tail -5 "$tmp/err"; fail=1; return
  fi
  echo "$out" | check "$name" "$label" "$min" || { echo "$out" | head -5; fail=1; }
}

run_check speech Speech 10 "$tmp/speech.wav"
run_check sine "Sine wave" 12 "$tmp/sine.wav"
# live: 2 s of a sine at the live pace (1 + (200 - 96) / 25 = 5 steps)
run_check live-sine "Sine wave" 4 --source "audiotestsrc is-live=true wave=sine freq=440 \
volume=0.5 num-buffers=20 samplesperbuffer=1600 ! audio/x-raw,rate=16000,channels=1"

exit "$fail"
