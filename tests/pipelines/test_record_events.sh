#!/usr/bin/env bash
# Event clips end to end (issue 56.3): pipelines/record_events.sh on a file with two
# events (2 s of a 440 Hz sine at 4 s and at 12 s, quiet noise around them; a groups file
# "tone = Sine wave") writes exactly two files named by label and start, each the original
# audio from 1 s (--pre-roll) before its segment to 1 s after it, to the source's buffer
# (0.128 s); its JSON lines (valid against docs/results.schema.json) give two onsets and
# two offsets naming those files; with a 10 fps video track beside the sound, two .mkv
# clips holding exactly the frames of their clips. The documented gst-launch recipe
# (pipelines/README.md: a rolling ring of fragments beside the segment records) runs on
# the same file.
#   test_record_events.sh SOURCE_ROOT
set -uo pipefail
root=${1:?usage: test_record_events.sh SOURCE_ROOT}
command -v gst-launch-1.0 >/dev/null || { echo "1..0 # SKIP gst-launch-1.0 not found"; exit 77; }
command -v sox >/dev/null || { echo "1..0 # SKIP sox not found"; exit 77; }
/usr/bin/python3 -c 'import gi, numpy' 2>/dev/null || { echo "1..0 # SKIP python3-gi or numpy missing"; exit 77; }
. "$(dirname "$0")/../tap.sh"

sox -R -n -r 16000 -c 1 -b 16 "$tmp/two.wav" synth 4 whitenoise vol 0.003 : \
  synth 2 sine 440 vol 0.5 : synth 6 whitenoise vol 0.003 : synth 2 sine 440 vol 0.5 : \
  synth 4 whitenoise vol 0.003
printf '# the test'"'"'s one group\ntone = Sine wave\n' >"$tmp/tone.groups"

if timeout 120 bash "$root/pipelines/record_events.sh" "$tmp/two.wav" --out "$tmp/clips" \
    --groups-file "$tmp/tone.groups" --pre-roll 1 --post-roll 1 >"$tmp/events.jsonl" \
    2>"$tmp/err"; then
  ok "record_events.sh ran: $(wc -l <"$tmp/events.jsonl") JSON lines, $(ls "$tmp/clips" | paste -sd' ')"
else
  not_ok "record_events.sh failed"; tail -5 "$tmp/err" | sed 's/^/# /'
fi

for f in "$tmp"/clips/*.mka; do
  [ -f "$f" ] && gst-launch-1.0 -q filesrc location="$f" ! matroskademux ! audioconvert \
    ! audio/x-raw,format=S16LE ! wavenc ! filesink location="${f%.mka}.wav"
done

cat >"$tmp/check.py" <<'PYEOF'
import glob, json, os, sys, wave
import numpy as np
tmp, schema_path = sys.argv[1:3]
def point(ok, text):
    print(f"{1 if ok else 0} {text}")
recs = [json.loads(l) for l in open(os.path.join(tmp, "events.jsonl"))]
events = [e for r in recs for e in r["events"]]
files = sorted(os.path.basename(f) for f in glob.glob(os.path.join(tmp, "clips", "*.mka")))
onsets = [e for e in events if e["event"] == "onset"]
offsets = [e for e in events if e["event"] == "offset"]
point(len(files) == 2 and all(f.startswith("tone-") for f in files),
      f"two files named by label and time: {files}")
point(len(onsets) == 2 and len(offsets) == 2
      and sorted(os.path.basename(e["file"]) for e in onsets) == files
      and [e["file"] for e in onsets] == [e["file"] for e in offsets],
      "two onsets and two offsets, each naming its segment's file")
point(all(os.path.basename(e["file"]) == f"tone-{e['segment_start'] / 1e9:09.3f}.mka"
          for e in onsets), "each file is named by its segment's start")
try:
    import jsonschema
    v = jsonschema.Draft202012Validator(json.load(open(schema_path)))
    bad = [next(iter(v.iter_errors(r))).message for r in recs if not v.is_valid(r)]
    point(not bad, f"the {len(recs)} records validate against the schema {bad[:1]}")
except ImportError:
    point(True, "schema # SKIP python3-jsonschema not installed")
tones = [(4.0, 6.0), (12.0, 14.0)]
for on, off in zip(onsets, offsets):
    path = on["file"][:-4] + ".wav"
    w = wave.open(path)
    x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2") / 32768.0
    loud = np.flatnonzero(np.abs(x) > 0.1)
    src_on = min(tones, key=lambda t: abs(t[0] - on["segment_start"] / 1e9))[0]
    clip_start = src_on - loud[0] / 16000          # where the clip starts in the source
    clip_end = clip_start + len(x) / 16000
    want_start = on["segment_start"] / 1e9 - 1.0
    want_end = off["segment_end"] / 1e9 + 1.0
    ok = (0 <= clip_start - want_start < 0.13 and 0 <= clip_end - want_end < 0.13
          and 1.9 < (loud[-1] - loud[0]) / 16000 < 2.1)
    point(ok, f"{os.path.basename(path)}: the source's [{clip_start:.3f}, {clip_end:.3f}) s for "
          f"the segment [{want_start + 1:.3f}, {want_end - 1:.3f}) s with 1 s before and after, "
          f"the whole 2 s tone inside")
PYEOF
while read -r good text; do
  if [ "$good" = 1 ]; then ok "$text"; else not_ok "$text"; fi
done < <(/usr/bin/python3 "$tmp/check.py" "$tmp" "$root/docs/results.schema.json" 2>&1 \
         | sed -E 's/^([^01])/0 \1/')

# With video: the same sound beside a 10 fps test video in Matroska gives two .mkv clips,
# each with exactly the frames whose time falls in its clip.
if gst-launch-1.0 -q -e filesrc location="$tmp/two.wav" ! wavparse ! audioconvert ! vorbisenc \
    ! queue ! mux. videotestsrc num-buffers=180 pattern=ball \
    ! video/x-raw,width=160,height=120,framerate=10/1 ! vp8enc deadline=1 ! queue ! mux. \
    matroskamux name=mux ! filesink location="$tmp/av.mkv" 2>"$tmp/err" \
  && timeout 120 bash "$root/pipelines/record_events.sh" "$tmp/av.mkv" --out "$tmp/vclips" \
    --groups-file "$tmp/tone.groups" --pre-roll 1 --post-roll 1 >"$tmp/vevents.jsonl" \
    2>"$tmp/err"; then
  ok "record_events.sh on audio and video: $(ls "$tmp/vclips" | paste -sd' ')"
else
  not_ok "record_events.sh on audio and video failed"; tail -5 "$tmp/err" | sed 's/^/# /'
fi
/usr/bin/python3 - "$tmp" >"$tmp/vcheck" 2>&1 <<'PYEOF'
import json, os, subprocess, sys
tmp = sys.argv[1]
recs = [json.loads(l) for l in open(os.path.join(tmp, "vevents.jsonl"))]
ons = [e for r in recs for e in r["events"] if e["event"] == "onset"]
offs = [e for r in recs for e in r["events"] if e["event"] == "offset"]
files = sorted(os.listdir(os.path.join(tmp, "vclips")))
print(f"{int(len(files) == 2 and all(f.endswith('.mkv') for f in files))} two .mkv clips: {files}")
for on, off in zip(ons, offs):
    out = subprocess.run(["gst-launch-1.0", "-v", "filesrc", f"location={on['file']}", "!",
                          "matroskademux", "!", "vp8dec", "!", "identity", "silent=false", "!",
                          "fakesink"], capture_output=True, text=True, timeout=60).stdout
    pts = [sum(float(x) * m for x, m in zip(t.split(":"), (3600, 60, 1)))
           for t in __import__("re").findall(r"pts: ([0-9:.]+)", out)]
    t0, t1 = on["segment_start"] / 1e9 - 1, off["segment_end"] / 1e9 + 1
    want = [f / 10 for f in range(180) if t0 <= f / 10 + 1e-9 < t1]
    good = len(pts) == len(want) and all(abs(a - b) < 1e-6 for a, b in zip(pts, want))
    print(f"{int(good)} {os.path.basename(on['file'])}: {len(pts)} frames "
          f"{pts[0] if pts else None}-{pts[-1] if pts else None} s, the {len(want)} frames of "
          f"[{t0:.2f}, {t1:.2f}) s")
PYEOF
while read -r good text; do
  if [ "$good" = 1 ]; then ok "$text"; else not_ok "$text"; fi
done < <(sed -E 's/^([^01])/0 \1/' "$tmp/vcheck")

# The gst-launch recipe of pipelines/README.md: segment records beside a ring of 5 s
# fragments of the original audio (the last 24 kept).
mkdir -p "$tmp/ring"
m=$root/models
if (cd "$tmp" && GST_PLUGIN_PATH=${GST_PLUGIN_PATH:-$root/build/gst} timeout 120 \
    gst-launch-1.0 -q -e filesrc location=two.wav ! decodebin ! audioconvert ! audioresample \
    ! tee name=t \
    t. ! queue ! audioconvert ! audioresample ! conymel preset=yamnet \
      ! conyvggish model="$m/yamnet/yamnet.safetensors" output=embedding \
      ! conytransformer model="$m/audioset/tagger.safetensors" groups-file=tone.groups \
        message-mode=on-change threshold=0.3 min-steps=2 ! conyjson ! filesink location=events.jsonl \
    t. ! queue ! audioconvert ! audio/x-raw,format=S16LE ! ring.audio_%u \
    splitmuxsink name=ring location=ring/%05d.mka muxer-factory=matroskamux \
      max-size-time=5000000000 max-files=24) 2>"$tmp/err"; then
  frags=$(ls "$tmp/ring" | wc -l)
  onsets=$(grep -o '"event":"onset","class_id":0,"label":"tone"' "$tmp/events.jsonl" | wc -l)
  if [ "$frags" -eq 4 ] && [ "$onsets" -eq 2 ]; then
    ok "the gst-launch recipe: $frags fragments of 5 s, $onsets onsets of tone"
  else
    not_ok "the gst-launch recipe: $frags fragments (want 4), $onsets onsets (want 2)"
  fi
else
  not_ok "the gst-launch recipe failed"; tail -5 "$tmp/err" | sed 's/^/# /'
fi
tap_done
