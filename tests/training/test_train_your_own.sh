#!/usr/bin/env bash
# training/train_your_own.py on a tiny generated set: three classes (a sine tone, white
# noise, a square-wave buzz; four WAV files each, 2.3-3.5 s, generated here with
# audiotestsrc and sox):
#  - it writes a model that `cony info` loads, with the folder names as labels plus the
#    generated "other" class, and its CNN's SHA-256 in the config, and prints a
#    validation accuracy well above chance;
#  - open set: speech (espeak-ng, a sentence the "other" generator does not speak) and
#    plucked-string music (sox, not the generator's FluidSynth) are "other", not tone/buzz;
#  - --no-other: only the folders' labels;
#  - a file shorter than --window is named in a warning;
#  - a window longer than every file is refused.
# Skipped without python3-torch. Needs GST_PLUGIN_PATH (the build tree's gst/).
#   test_train_your_own.sh SOURCE_ROOT CONY_TOOL
set -uo pipefail
root=${1:?usage: test_train_your_own.sh SOURCE_ROOT CONY_TOOL}
cony=${2:?}
/usr/bin/python3 -c 'import torch, gi' 2>/dev/null || { echo "1..0 # SKIP needs python3-torch and python3-gi"; exit 77; }
. "$(dirname "$0")/../tap.sh"
cnn=$root/models/yamnet/yamnet.safetensors
train=("/usr/bin/python3" "$root/training/train_your_own.py" --cony "$cony" --cnn "$cnn" --epochs 20)

# clip CLASS NAME BUFFERS(0.1 s each) audiotestsrc-properties...
clip () {
  local dir=$tmp/data/$1 name=$2 buffers=$3
  shift 3
  mkdir -p "$dir"
  gst-launch-1.0 -q audiotestsrc num-buffers="$buffers" samplesperbuffer=1600 "$@" \
    ! audio/x-raw,rate=16000,channels=1 ! wavenc ! filesink location="$dir/$name.wav"
}
# Every input is the same on every run: audiotestsrc's noise and sox's pluck draw a fresh
# random seed each time unless told (sox -R), and with twelve files a different noise draw
# trains a different model (plucked strings were "other" on 6 to 17 of 17 steps).
# noise_clip NAME BUFFERS(0.1 s each) VOLUME: a different stretch of sox's one repeatable
# noise for each BUFFERS
noise_clip () {
  local seconds
  seconds=$(echo "$2 / 10" | bc -l)
  mkdir -p "$tmp/data/noise"
  sox -R -n -r 16000 -c 1 -b 16 "$tmp/data/noise/$1.wav" synth "$(echo "2 * $seconds" | bc -l)" \
    whitenoise vol "$3" trim "$seconds" "$seconds"
}
for i in 1 2 3 4; do
  clip tone "t$i" $((20 + i * 3)) wave=sine freq=$((400 + i * 60))
  noise_clip "n$i" $((20 + i * 3)) 0.$((2 + i))
  clip buzz "b$i" $((20 + i * 3)) wave=square freq=$((100 + i * 20)) volume=0.3
done

if ! "${train[@]}" "$tmp/data" -o "$tmp/model.safetensors" >"$tmp/out" 2>"$tmp/err"; then
  not_ok "train_your_own.py failed"; tail -10 "$tmp/err" | sed 's/^/# /'
else
  sed 's/^/# /' "$tmp/out"
  acc=$(sed -nE 's/^validation accuracy .*: ([0-9.]+) % of [0-9]+ steps.*/\1/p' "$tmp/out")
  if [ -n "$acc" ] && [ "$(echo "$acc >= 60" | bc -l)" = 1 ]; then
    ok "trained: validation accuracy $acc % of steps (chance: 33 %)"
  else
    not_ok "validation accuracy '${acc:-not printed}'"
  fi
  info=$("$cony" info "$tmp/model.safetensors" 2>&1)
  want_sha=$(sha256sum "$cnn" | cut -d' ' -f1)
  got_sha=$(PYTHONPATH="$root/training" /usr/bin/python3 -c "
import json; from conytrain import safetensors_io
print(json.loads(safetensors_io.load('$tmp/model.safetensors')[1]['config'])['frontend']['cnn_sha256'])")
  if grep -q "^labels: *buzz, noise, tone, other$" <<<"$info" && [ "$got_sha" = "$want_sha" ]; then
    ok "cony info loads it: labels buzz, noise, tone, other; records the CNN's SHA-256"
  else
    not_ok "model file: labels or CNN record wrong (sha '$got_sha')"; echo "$info" | sed 's/^/# /'
  fi
fi

# Open set: sounds of none of the classes go to "other" (most steps), where a model
# without it can only answer tone, noise or buzz.
espeak-ng -v en-us -s 150 -w "$tmp/speech.wav" \
  "Good evening, here are the news. The weather will be cold and windy tomorrow, with rain."
notes=()
for note in C4 E4 G4 A4 F4 D4 G4 C5 E4 G4 C4 E4 G4 A4; do
  notes+=("$tmp/note${#notes[@]}.wav")
  sox -R -n -r 16000 -c 1 -b 16 "${notes[-1]}" synth 0.35 pluck "$note" pluck "${note%?}3" fade 0 0.35 0.1
done
sox -R "${notes[@]}" "$tmp/music.wav"
for f in speech music; do
  out=$(CONY_AUDIO_PROBE=off bash "$root/pipelines/file.sh" "$tmp/$f.wav" "$cnn" "$tmp/model.safetensors" 2>&1)
  steps=$(grep -cE '^ +[0-9.]+ s ' <<<"$out")
  other=$(grep -cE '^ +[0-9.]+ s  other ' <<<"$out")
  if [ "$steps" -ge 10 ] && [ "$((other * 10))" -ge "$((steps * 8))" ]; then
    ok "$f (not a class of the set): other on $other of $steps steps"
  else
    not_ok "$f: other on $other of $steps steps"; echo "$out" | sort -k3 | uniq -c -f2 | sed 's/^/# /' | head
  fi
done

# A 1.2 s file gives 2 tokens: shorter than a window of 6. (--no-other: the labels are the
# folders' only.)
clip buzz short 12 wave=square freq=150 volume=0.3
if "${train[@]}" "$tmp/data" -o "$tmp/m2.safetensors" --window 6 --epochs 2 --no-other >"$tmp/out" 2>"$tmp/err" \
   && grep -q "shorter than the window of 6 tokens.*short.wav" "$tmp/err"; then
  ok "a file shorter than the window is named: $(grep -o "warning: [0-9]* of [0-9]* files are shorter" "$tmp/err")"
else
  not_ok "no warning for a file shorter than the window"; sed 's/^/# /' "$tmp/err" | tail -5
fi
if grep -q "^labels: *buzz, noise, tone$" <<<"$("$cony" info "$tmp/m2.safetensors" 2>&1)"; then
  ok "--no-other: labels buzz, noise, tone only"
else
  not_ok "--no-other: labels"; "$cony" info "$tmp/m2.safetensors" 2>&1 | grep labels | sed 's/^/# /'
fi

# A window longer than every file: refused with a reason.
"${train[@]}" "$tmp/data" -o "$tmp/m3.safetensors" --window 40 --no-other >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" != 0 ] && grep -q "no training file is as long as the window of 40 tokens" "$tmp/err" \
   && [ ! -e "$tmp/m3.safetensors" ]; then
  ok "a window longer than every file is refused (exit $rc)"
else
  not_ok "--window 40: exit $rc"; sed 's/^/# /' "$tmp/err" | tail -5
fi

tap_done
