#!/usr/bin/env bash
# Event clips end to end (issue 56.3): pipelines/record_events.sh on a file with two
# events (2 s of a 440 Hz sine at 4 s and at 12 s, quiet noise around them; a groups file
# "tone = Sine wave") writes exactly two files named by label and start, each the original
# audio from 1 s (--pre-roll) before its segment to 1 s after it, to the source's buffer
# (0.128 s); its JSON lines (valid against docs/results.schema.json) give two onsets and
# two offsets naming those files. The documented gst-launch recipe (pipelines/README.md:
# a rolling ring of fragments beside the segment records) runs on the same file.
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
