#!/usr/bin/env bash
# conyjson in gst-launch-1.0 lines:
#   audiotestsrc ! ... ! conymel ! conyvggish ! conytransformer ! conyjson ! filesink location=out.jsonl
# with the reduced VGGish and the tiny classifier of tests/golden/: every line parses as
# JSON; the stream caps come once, first; the results carry the expected steps, spans,
# top-k and segment events; the segment EOS closes is the last line;
# buffers without a meta (conyjson straight after conyvggish) give an empty file. Then
# the labels property read from Python through GObject introspection (skipped without
# python3-gi).
#   test_conyjson_pipeline.sh VGGISH.safetensors TRANSFORMER.safetensors
# Needs GST_PLUGIN_PATH (the build tree's gst/).
set -uo pipefail
vggish=${1:?usage: test_conyjson_pipeline.sh VGGISH TRANSFORMER}
model=${2:?}
launch=$(command -v gst-launch-1.0) || { echo "gst-launch-1.0 not found: skipping"; exit 77; }
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 3 s of 44.1 kHz stereo: 10 VGGish windows (the last padded at EOS), 10 steps (as
# test_gst_pipeline_transformer.sh).
src="audiotestsrc num-buffers=30 samplesperbuffer=4410 wave=white-noise \
  ! audio/x-raw,format=S16LE,rate=44100,channels=2 ! audioconvert ! audioresample ! conymel \
  ! conyvggish model=$vggish"

# shellcheck disable=SC2086
if ! out=$(timeout 60 "$launch" -q $src ! conytransformer model="$model" top-k=3 \
    message-mode=on-change ! conyjson source=noise.wav ! filesink location="$tmp/out.jsonl" 2>&1); then
  echo "FAIL conyjson: gst-launch-1.0 failed"; echo "$out" | tail -10; fail=1
elif ! check=$(/usr/bin/python3 - "$tmp/out.jsonl" <<'PYEOF'
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
assert lines[-1] == "", "the file must end with a newline"
recs = [json.loads(l) for l in lines[:-1]]
assert all(r["source"] == "noise.wav" for r in recs)
# the caps once, first; then the results; then the segment EOS closed
assert [r["type"] for r in recs] == ["stream"] + ["result"] * 10 + ["eos"], [r["type"] for r in recs]
stream, eos, recs = recs[0], recs[-1], recs[1:-1]
st = stream["stream"]
assert st["media"] == "other/tensors" and st["dimensions"] == "128:1", st
assert st["framerate"] == "4/1" and st["lookahead"] == "29/40", st
assert not any("stream" in r for r in recs)
assert [r["step"] for r in recs] == list(range(10)), [r["step"] for r in recs]
open_label = None
for i, r in enumerate(recs):
    assert r["pts"] == i * 250_000_000
    assert r["start"] == max(0, i - 7) * 250_000_000            # window of 8 tokens
    assert r["end"] == r["pts"] + 975_000_000                    # the newest VGGish window
    assert r["duration"] == r["end"] - r["start"]
    assert r["running_end"] == r["end"] and r["stream_end"] == r["end"]
    assert r["output"] == "softmax"
    top = r["top"]
    assert len(top) == 3 and top[0]["label"] == r["label"] and top[0]["score"] == r["score"]
    assert top[0]["score"] >= top[1]["score"] >= top[2]["score"]
    assert len({t["class_id"] for t in top}) == 3
    # on-change segments: an onset whenever the top label changes
    kinds = [e["event"] for e in r["events"]]
    if r["label"] != open_label:
        assert kinds == (["onset"] if open_label is None else ["offset", "onset"]), (i, kinds)
        assert r["events"][-1]["segment_start"] == r["pts"]
        if open_label is not None:
            assert r["events"][0]["label"] == open_label
            assert r["events"][0]["segment_end"] == r["pts"]
        open_label = r["label"]
    else:
        assert kinds == [], (i, kinds)
assert eos["step"] == 9 and len(eos["events"]) == 1, eos
off = eos["events"][0]
assert off["event"] == "offset" and off["label"] == open_label, (off, open_label)
assert off["segment_end"] == recs[-1]["pts"] + 250_000_000, off
print(f"{len(recs)} results")
PYEOF
); then
  echo "FAIL conyjson: the records are wrong"; head -2 "$tmp/out.jsonl"; fail=1
else
  echo "ok conyjson: caps once, $check, spans, top-3, segment events and EOS's offset as expected"
fi

# No meta on the input: nothing written.
# shellcheck disable=SC2086
if ! timeout 60 "$launch" -q $src ! conyjson ! filesink location="$tmp/empty.jsonl" >/dev/null 2>&1 \
    || [ -s "$tmp/empty.jsonl" ]; then
  echo "FAIL conyjson without metas: $(wc -c <"$tmp/empty.jsonl") bytes written"; fail=1
else
  echo "ok conyjson without metas: empty output"
fi

# The labels property from Python.
if /usr/bin/python3 -c 'import gi; gi.require_version("Gst", "1.0"); from gi.repository import Gst' 2>/dev/null; then
  if ! got=$(/usr/bin/python3 - "$model" <<'PYEOF'
import sys
import gi
gi.require_version("Gst", "1.0")
from gi.repository import Gst
Gst.init(None)
el = Gst.ElementFactory.make("conytransformer", None)
assert not el.get_property("labels")   # no model: NULL (None or [] by PyGObject version)
el.set_property("model", sys.argv[1])
before = el.get_property("labels")     # read from the model file
assert el.set_state(Gst.State.PAUSED) != Gst.StateChangeReturn.FAILURE
assert list(before) == list(el.get_property("labels")), before
print(",".join(el.get_property("labels")))
el.set_state(Gst.State.NULL)
PYEOF
  ) || [ "$got" != "speech,music,noise,silence" ]; then
    echo "FAIL labels from Python: '$got'"; fail=1
  else
    echo "ok labels from Python: $got"
  fi
else
  echo "skip labels from Python: python3-gi / gir1.2-gstreamer-1.0 not installed"
fi
exit $fail
