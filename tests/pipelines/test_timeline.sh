#!/usr/bin/env bash
# pipelines/timeline.py draws a file's log-mel, label track, top-k scores and segments:
#  - the PNG has the size asked for (its IHDR);
#  - its label track: along the image row richest in the labels' colours (which the script
#    prints), the colour runs are white noise's label first, then speech's (a clip of
#    4 s of white noise, then espeak-ng speech), each over a fair share of the track;
#  - progress lines on stderr while the file is read; a missing file is an error.
# Needs python3-gi, python3-matplotlib, espeak-ng and sox, GST_PLUGIN_PATH (build/gst).
#   test_timeline.sh SOURCE_ROOT
set -uo pipefail
root=${1:?usage: test_timeline.sh SOURCE_ROOT}
/usr/bin/python3 -c 'import gi, matplotlib' 2>/dev/null \
  || { echo "1..0 # SKIP needs python3-gi and python3-matplotlib"; exit 77; }
command -v espeak-ng >/dev/null && command -v sox >/dev/null \
  || { echo "1..0 # SKIP needs espeak-ng and sox"; exit 77; }
. "$(dirname "$0")/../tap.sh"

gst-launch-1.0 -q audiotestsrc num-buffers=40 samplesperbuffer=1600 wave=white-noise volume=0.3 \
  ! audio/x-raw,rate=16000,channels=1 ! wavenc ! filesink location="$tmp/noise.wav"
espeak-ng -v en-us -s 150 -w "$tmp/speech_raw.wav" \
  "Good evening. Here are the news of the day, read slowly, so that every word is heard."
sox -V1 "$tmp/speech_raw.wav" -r 16000 -c 1 -b 16 "$tmp/speech.wav" norm -20
sox -V1 "$tmp/noise.wav" "$tmp/speech.wav" "$tmp/clip.wav"

if ! out=$(cd "$tmp" && /usr/bin/python3 "$root/pipelines/timeline.py" clip.wav -o pic.png \
      --width 640 --height 420 --progress-every 0.05 2>"$tmp/err"); then
  not_ok "timeline.py failed"; tail -5 "$tmp/err" | sed 's/^/# /'
  tap_done
fi
echo "# $out"
if check=$(/usr/bin/python3 - "$tmp/pic.png" "$out" <<'PYEOF'
import re, struct, sys
import matplotlib.image as mpimg
import numpy as np
path, out = sys.argv[1], sys.argv[2]
with open(path, "rb") as f:
    head = f.read(24)
assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", "not a PNG"
w, h = struct.unpack(">II", head[16:24])
assert (w, h) == (640, 420), (w, h)
colours = dict(re.findall(r"(\w+) #([0-9a-f]{6})", out.split("colours ", 1)[1]))
assert {"noise", "speech"} <= set(colours), colours
img = np.round(mpimg.imread(path)[:, :, :3] * 255).astype(int)
rgb = {lab: np.array([int(c[i:i + 2], 16) for i in (0, 2, 4)]) for lab, c in colours.items()}
hits = {lab: np.all(img == c, axis=2) for lab, c in rgb.items()}
row = max(range(h), key=lambda y: sum(m[y].sum() for m in hits.values()))
runs = []
for x in range(w):
    lab = next((lab for lab, m in hits.items() if m[row, x]), None)
    if lab and (not runs or runs[-1][0] != lab):
        runs.append([lab, 0])
    if lab:
        runs[-1][1] += 1
track = sum(n for _, n in runs)
assert track > 0.6 * w, f"the label track spans {track} of {w} pixels"
assert runs[0][0] == "noise", runs
share = {lab: sum(n for l, n in runs if l == lab) / track for lab in colours}
assert share["noise"] > 0.25 and share["speech"] > 0.25, share
print(f"{w}x{h}; label track on row {row}: " + " ".join(f"{l}:{n}px" for l, n in runs))
PYEOF
); then
  ok "PNG $check"
else
  not_ok "the picture"; echo "$check" | sed 's/^/# /'
fi
if grep -qE '^timeline.py: [0-9]+ % \([0-9.]+ of [0-9.]+ s\)$' "$tmp/err"; then
  ok "progress on stderr: $(grep -c '%' "$tmp/err") lines"
else
  not_ok "no progress lines"; sed 's/^/# /' "$tmp/err" | head -5
fi
if ! err=$(/usr/bin/python3 "$root/pipelines/timeline.py" "$tmp/nope.wav" -o "$tmp/x.png" 2>&1) \
   && grep -q "nope.wav not found" <<<"$err" && [ ! -e "$tmp/x.png" ]; then
  ok "a missing file: '$err'"
else
  not_ok "a missing file"; echo "$err" | sed 's/^/# /'
fi
tap_done
