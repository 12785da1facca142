#!/usr/bin/env bash
# Pipeline test of the whole audio chain through gst-launch-1.0:
#   audiotestsrc ! audioconvert ! audioresample ! conymel ! conyvggish ! conytransformer ! fakesink
# with the reduced VGGish of tests/golden/cnn/ (128-d embeddings) and the tiny 128-d
# classifier of tests/golden/transformer/; then pipelines/print_results.py (bus messages
# and the custom meta read from Python) when python3-gi is installed.
# Needs GST_PLUGIN_PATH (the build tree's gst/).
#   test_gst_pipeline_transformer.sh VGGISH.safetensors TRANSFORMER.safetensors SOURCE_ROOT
set -uo pipefail
vggish=${1:?usage: test_gst_pipeline_transformer.sh VGGISH TRANSFORMER SOURCE_ROOT}
model=${2:?}
root=${3:?}
launch=$(command -v gst-launch-1.0) || { echo "gst-launch-1.0 not found: skipping"; exit 77; }
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 3 s of 44.1 kHz stereo: 10 embeddings (see test_gst_pipeline.sh: 9 full windows and
# the padded tail), 10 steps.
src="audiotestsrc num-buffers=30 samplesperbuffer=4410 wave=sine freq=440 \
  ! audio/x-raw,format=S16LE,rate=44100,channels=2 ! audioconvert ! audioresample ! conymel"

# every-step: one message per step, steps 0..9, 0.25 s apart, and 10 token buffers
# (512 bytes: the tokens pass through) reach the sink.
# shellcheck disable=SC2086
if ! out=$("$launch" -m -v $src ! conyvggish model="$vggish" \
    ! conytransformer model="$model" ! fakesink silent=false 2>&1); then
  echo "FAIL every-step: gst-launch-1.0 failed"; echo "$out" | tail -20; fail=1
else
  msgs=$(echo "$out" | grep '(element): conytransformer, ')
  n=$(echo -n "$msgs" | grep -c 'conytransformer' || true)
  steps=$(echo "$msgs" | sed -nE 's/.*step=\(guint64\)([0-9]+).*/\1/p' | tr '\n' ' ')
  times=$(echo "$msgs" | sed -nE 's/.*pts=\(guint64\)([0-9]+).*/\1/p' | tr '\n' ' ')
  # the span: start = first sample of the oldest window in the attention window (8),
  # start + duration = last sample of the newest (its PTS + 0.975 s)
  starts=$(echo "$msgs" | sed -nE 's/.*, start=\(guint64\)([0-9]+).*/\1/p' | tr '\n' ' ')
  ends=$(echo "$msgs" | sed -nE 's/.*, start=\(guint64\)([0-9]+).*, duration=\(guint64\)([0-9]+).*/\1 \2/p' \
    | while read -r a b; do echo -n "$((a + b)) "; done)
  bufs=$(echo "$out" | grep 'fakesink0: last-message = chain' | grep -c '(512 bytes' || true)
  want_times="" want_starts="" want_ends=""
  for i in 0 1 2 3 4 5 6 7 8 9; do
    want_times+="$((i * 250000000)) "
    want_starts+="$(( (i > 7 ? i - 7 : 0) * 250000000 )) "
    want_ends+="$((i * 250000000 + 975000000)) "
  done
  if [ "$n" != 10 ] || [ "$steps" != "0 1 2 3 4 5 6 7 8 9 " ]; then
    echo "FAIL every-step: $n messages, steps '$steps'"; fail=1
  elif [ "$times" != "$want_times" ]; then
    echo "FAIL every-step: pts '$times'"; fail=1
  elif [ "$starts" != "$want_starts" ] || [ "$ends" != "$want_ends" ]; then
    echo "FAIL every-step: spans start '$starts' end '$ends'"; fail=1
  elif [ "$bufs" != 10 ]; then
    echo "FAIL every-step: $bufs token buffers reached the sink, expected 10"; fail=1
  elif echo "$msgs" | grep -vq 'scores=(float)<.*,.*,.*,.*>'; then
    echo "FAIL every-step: a message lacks the 4 scores"; fail=1
  else
    echo "ok every-step: 10 messages, steps 0..9, 0.25 s apart, spans to PTS + 0.975 s"
  fi
  every_labels=$(echo "$msgs" | sed -nE 's/.*, label=\(string\)([^,]*),.*/\1/p' | tr '\n' ' ')
fi

# on-change: fewer messages, each a change, the last one closing the segment at EOS.
# shellcheck disable=SC2086
if ! out=$("$launch" -m $src ! conyvggish model="$vggish" \
    ! conytransformer model="$model" message-mode=on-change ! fakesink 2>&1); then
  echo "FAIL on-change: gst-launch-1.0 failed"; echo "$out" | tail -20; fail=1
else
  msgs=$(echo "$out" | grep '(element): conytransformer, ')
  labels=$(echo "$msgs" | grep -v 'eos=' | sed -nE 's/.*, label=\(string\)([^,]*),.*/\1/p' | tr '\n' ' ')
  # the changes of the every-step run
  want=$(echo "$every_labels" | tr ' ' '\n' | grep -v '^$' | uniq | tr '\n' ' ')
  if [ "$labels" != "$want" ]; then
    echo "FAIL on-change: labels '$labels', expected the changes of '$every_labels'"; fail=1
  elif [[ "$(tail -n 1 <<< "$msgs")" != *'eos=(boolean)true'* ]]; then
    echo "FAIL on-change: no closing message at EOS"; fail=1
  else
    echo "ok on-change: $(echo -n "$labels" | wc -w) changes ($labels) + closing message"
  fi
fi

# Every attention variant runs the chain (the model has fixed landmarks).
for v in regular continual nystrom nystrom-fixed cony cony-fixed; do
  # shellcheck disable=SC2086
  if ! out=$("$launch" -m $src ! conyvggish model="$vggish" \
      ! conytransformer model="$model" attention=$v ! fakesink 2>&1) \
      || [ "$(echo "$out" | grep -c '(element): conytransformer, ')" != 10 ]; then
    echo "FAIL attention=$v"; echo "$out" | tail -5; fail=1
  else
    echo "ok attention=$v: 10 steps"
  fi
done

# shellcheck source=tests/expect_error.sh
source "$(dirname "$0")/../expect_error.sh"
expect_error missing-model "Could not load the model" \
  audiotestsrc num-buffers=10 ! conymel ! conyvggish model="$vggish" \
  ! conytransformer model=/nonexistent.safetensors ! fakesink
expect_error wrong-model-file "no model config" \
  audiotestsrc num-buffers=10 ! conymel ! conyvggish model="$vggish" \
  ! conytransformer model="$vggish" ! fakesink
expect_error token-size "the input has 64 floats per token, the model takes d_in = 128" \
  audiotestsrc num-buffers=10 ! conymel ! conytransformer model="$model" ! fakesink
# A 44.1 kHz stereo file straight into conymel: the error names the cause (#46.5).
"$launch" -q audiotestsrc num-buffers=5 ! audio/x-raw,rate=44100,channels=2,format=S16LE \
  ! wavenc ! filesink location="$tmp/stereo44.wav"
expect_error caps-named "conymel takes 16000 Hz mono audio (F32LE or S16LE), got 44100 Hz stereo S16LE audio: add audioresample and audioconvert before it" \
  filesrc location="$tmp/stereo44.wav" ! wavparse ! conymel ! fakesink
# model names: none given names the shipped default; a relative name found nowhere says
# where it looked; one found through CONY_MODEL_PATH (from another directory) runs.
expect_error vggish-no-model "set model=a CNN file, e.g. the shipped default audio/yamnet-adapted.safetensors" \
  audiotestsrc num-buffers=10 ! conymel ! conyvggish ! fakesink
expect_error relative-not-found "nowhere/x.safetensors: no such model file (looked in the current directory, then" \
  audiotestsrc num-buffers=10 ! conymel ! conyvggish model="$vggish" \
  ! conytransformer model=nowhere/x.safetensors ! fakesink
mkdir -p "$tmp/models/cnn" "$tmp/models/tr"
cp "$vggish" "$tmp/models/cnn/v.safetensors"; cp "$model" "$tmp/models/tr/t.safetensors"
# shellcheck disable=SC2086
if out=$(cd / && CONY_MODEL_PATH=/nonexistent:$tmp/models "$launch" -m $src \
      ! conyvggish model=cnn/v.safetensors ! conytransformer model=tr/t.safetensors ! fakesink 2>&1) \
   && [ "$(grep -c '(element): conytransformer, ' <<<"$out")" = 10 ]; then
  echo "ok relative model names through CONY_MODEL_PATH: 10 steps"
else
  echo "FAIL relative model names through CONY_MODEL_PATH"; echo "$out" | tail -5; fail=1
fi
# A file shorter than one CNN window (0.5 s < 0.975 s) through pipelines/file.sh and the
# shipped default model: one result (the window padded with silence at EOS), not none.
gst-launch-1.0 -q audiotestsrc num-buffers=5 samplesperbuffer=1600 wave=white-noise volume=0.3 \
  ! audio/x-raw,rate=16000,channels=1 ! wavenc ! filesink location="$tmp/short.wav"
if out=$(CONY_AUDIO_PROBE=off bash "$root/pipelines/file.sh" "$tmp/short.wav" 2>&1) \
   && [ "$(grep -cE '^ +0\.[0-9]+ s  [a-z]+ +[01]\.[0-9]{3}$' <<<"$out")" = 1 ]; then
  echo "ok short file (0.5 s): one result: $(grep -E "^ +0\\." <<<"$out" | xargs)"
else
  echo "FAIL short file: expected one result line"; echo "$out" | tail -5; fail=1
fi
# pipelines/file.sh takes relative model names too (resolved by `cony info`, as libcony does).
if out=$(cd / && CONY_AUDIO_PROBE=off CONY_MODEL_PATH=$tmp/models \
        bash "$root/pipelines/file.sh" "$tmp/short.wav" cnn/v.safetensors tr/t.safetensors 2>&1) \
   && [ "$(grep -cE '^ +0\.[0-9]+ s  [a-z]+ +[01]\.[0-9]{3}$' <<<"$out")" = 1 ]; then
  echo "ok file.sh cnn/v.safetensors tr/t.safetensors (CONY_MODEL_PATH): one result"
else
  echo "FAIL file.sh with relative model names"; echo "$out" | tail -5; fail=1
fi
printf 'a\nb\n' > "$tmp/labels.txt"
expect_error labels-count "2 labels but the model has 4 classes" \
  audiotestsrc num-buffers=10 ! conymel ! conyvggish model="$vggish" \
  ! conytransformer model="$model" labels-file="$tmp/labels.txt" ! fakesink

# Python: results from the bus messages and from the custom meta (GObject introspection).
if /usr/bin/python3 -c 'import gi; gi.require_version("Gst", "1.0"); from gi.repository import Gst' 2>/dev/null; then
  gst-launch-1.0 -q audiotestsrc num-buffers=30 samplesperbuffer=4410 wave=sine freq=440 \
    ! audio/x-raw,format=S16LE,rate=44100,channels=2 ! wavenc ! filesink location="$tmp/a.wav"
  py=("/usr/bin/python3" "$root/pipelines/print_results.py" "$tmp/a.wav" --json
      --vggish "$vggish" --transformer "$model")
  if ! bus=$("${py[@]}" 2>"$tmp/err1") || ! meta=$("${py[@]}" --from-meta 2>"$tmp/err2"); then
    echo "FAIL python: print_results.py failed"; cat "$tmp/err1" "$tmp/err2" | tail -10; fail=1
  else
    check=$(/usr/bin/python3 - "$bus" "$meta" <<'PYEOF'
import json, sys
bus = [json.loads(l) for l in sys.argv[1].splitlines()]
meta = [json.loads(l) for l in sys.argv[2].splitlines()]
assert len(bus) == 10 and len(meta) == 10, (len(bus), len(meta))
for b, m in zip(bus, meta):
    assert b["type"] == m["type"] == "result"
    assert b == m, (b, m)         # the same record from the bus and from the meta
    assert len(b["scores"]) == 4 and abs(sum(b["scores"]) - 1) < 1e-4
    assert m["end"] == b["start"] + b["duration"] == b["pts"] + 975000000
    assert m["stream_end"] == m["end"], (m, b)   # stream time = buffer time here
    assert abs(m["context_fill"] - min(m["step"] + 1, 8) / 8) < 1e-9
print("same")
PYEOF
)
    if [ "$check" != same ]; then
      echo "FAIL python: messages and metas disagree"; fail=1
    else
      echo "ok python: 10 JSON lines from the bus = 10 from the custom meta"
    fi
  fi
else
  echo "skip python: python3-gi / gir1.2-gstreamer-1.0 not installed"
fi
exit $fail
