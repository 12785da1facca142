#!/usr/bin/env bash
# The shipped fused audio-video model (models/av/av.safetensors) end to end:
#  - `cony classify` on the committed fused tokens of tests/golden/av/scenes.webm equals
#    the committed PyTorch logits of the shipped file (training/train_av.py --stages
#    golden);
#  - pipelines/av_file.sh with its default model labels each of the clip's five scenes
#    (a still photograph with a sound of its kind, 5 s each, all held out of training) as
#    expected: the majority of the steps whose audio window lies in the scene's last 2 s;
#  - av_camera.sh with its default model runs on live test sources;
#  - its audio input takes continual YAMNet tokens (models/av/EXPERIMENTS.md, rule 14):
#    av_file.sh's chain runs conyvggish mode=continual (the checks above), and conyfuse
#    refuses window tokens with it.
# Needs GST_PLUGIN_PATH (the build tree's gst/) and /usr/bin/python3 with numpy.
#   test_av_model.sh SOURCE_ROOT CONY
set -uo pipefail
root=${1:?usage: test_av_model.sh SOURCE_ROOT CONY}
cony=${2:?}
command -v gst-launch-1.0 >/dev/null || { echo "1..0 # SKIP gst-launch-1.0 not found"; exit 77; }
for e in matroskademux webmmux vp8dec vorbisdec; do
  gst-inspect-1.0 "$e" >/dev/null 2>&1 || { echo "1..0 # SKIP no $e"; exit 77; }
done
golden=$root/tests/golden/av
model=$root/models/av/av.safetensors
. "$(dirname "$0")/../tap.sh"

"$cony" classify --model "$model" "$golden/fused.npy" -o "$tmp/logits.npy" 2>"$tmp/err"
d=$(/usr/bin/python3 - "$tmp/logits.npy" "$golden/logits.npy" <<'PY'
import sys
import numpy as np
a, b = np.load(sys.argv[1]).astype(np.float64), np.load(sys.argv[2])
print(f"{np.abs(a - b).max() / max(1.0, np.abs(b).max()):.3g}" if a.shape == b.shape
      else f"shapes {a.shape} vs {b.shape}")
PY
)
if [[ $d =~ ^[0-9.e-]+$ ]] && /usr/bin/python3 -c "import sys; sys.exit(not $d <= 1e-4)"; then
  ok "cony classify = PyTorch logits of the shipped fused model (rel. diff $d)"
else
  not_ok "cony classify vs PyTorch: $d"; tail -3 "$tmp/err" | sed 's/^/# /'
fi

# Scene labels: the printed time of a step is the end of its audio window (0.975 s).
if "$root/pipelines/av_file.sh" "$golden/scenes.webm" >"$tmp/out" 2>"$tmp/err"; then
  verdict=$(/usr/bin/python3 - "$tmp/out" "$golden/scenes.json" <<'PY'
import collections, json, sys
steps = [line.split() for line in open(sys.argv[1]) if " s " in line]
scenes = json.load(open(sys.argv[2]))["scenes"]
bad = []
for s in scenes:
    labels = [st[2] for st in steps if s["end"] - 2.0 <= float(st[0]) <= s["end"]]
    top = collections.Counter(labels).most_common(1)
    got = top[0][0] if top else "nothing"
    print(f"# {s['start']:.0f}-{s['end']:.0f} s: expected {s['label']}, steps {' '.join(labels)}")
    if got != s["label"]:
        bad.append(f"{s['label']} scene labelled {got}")
print("FAIL " + "; ".join(bad) if bad else "OK")
PY
)
  echo "$verdict" | grep '^#'
  if [[ $verdict == *OK ]]; then ok "av_file.sh (default model) labels the five scenes"
  else not_ok "av_file.sh scenes: $(echo "$verdict" | tail -1)"; fi
else
  not_ok "av_file.sh failed"; tail -5 "$tmp/err" | sed 's/^/# /'
fi

out=$("$root/pipelines/av_camera.sh" --audio-source 'audiotestsrc is-live=true num-buffers=60' \
  --video-source 'videotestsrc is-live=true num-buffers=30' 2>"$tmp/err")
steps=$(echo "$out" | grep -c ' s ')
if [ "$steps" -ge 8 ]; then ok "av_camera.sh (default model) on live test sources: $steps fused steps"
else not_ok "av_camera.sh live: $steps steps"; tail -5 "$tmp/err" | sed 's/^/# /'; fi
# `cony info` says which tokens the audio input takes.
if "$cony" info "$model" 2>&1 | grep -Eq '^  audio +1024 floats at 25/8 per second, .* embedding \(mode=continual\)$'; then
  ok "cony info: the audio input takes continual YAMNet tokens at 25/8 per second"
else
  not_ok "cony info does not say mode=continual"; "$cony" info "$model" 2>&1 | sed 's/^/# /'
fi

# Window tokens into the shipped (continual) model: refused, naming both modes.
m=$root/models
line="filesrc location=$golden/scenes.webm ! decodebin name=d conyfuse name=f model=$model
  ! conytransformer model=$model ! fakesink d. ! queue ! audioconvert ! audioresample
  ! conymel preset=yamnet ! conyvggish model=$m/yamnet/yamnet.safetensors output=embedding
  ! queue ! f.sink_audio d. ! queue ! videoconvert ! videorate ! video/x-raw,framerate=10/1
  ! conyframeembed model=$m/imagenet/mobilenet_v2.safetensors output=embedding ! queue
  ! f.sink_video"
# shellcheck disable=SC2086
if gst-launch-1.0 -q $line >"$tmp/window" 2>&1; then
  not_ok "window tokens accepted by the shipped fused model"
elif grep -q "mode=window); input 'audio'.*mode=continual)" "$tmp/window"; then
  ok "window tokens refused by the shipped fused model (trained on continual ones)"
else
  not_ok "window tokens: not the mode refusal"; tail -3 "$tmp/window" | sed 's/^/# /'
fi
tap_done
