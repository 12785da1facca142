#!/usr/bin/env bash
# pipelines/av_file.sh end to end: a 4 s clip with audio (a sine) and video (videotestsrc,
# JPEG in Matroska) through conymel/YAMNet and conyframeembed into conyfuse !
# conytransformer with the random-weight fused model tests/golden/fusion/av_pipeline
# (inputs audio 1024, video 32). Checks one line per fused step, 0.25 s apart (to the printed 0.01 s), the first
# ending where YAMNet's first 0.975 s window ends (the span covers the audio), labels of
# the model; a file without video refused with exit 4 naming it; a fused model whose
# input sizes do not match refused naming a pad and both sizes (whichever pad's caps
# come first), an ordinary model refused; pipelines/av_camera.sh on live test sources, and without a camera.
# $1 = source root. Needs GST_PLUGIN_PATH (build tree's gst/).
set -uo pipefail
root=${1:?usage: test_av_pipeline.sh SOURCE_ROOT}
command -v gst-launch-1.0 >/dev/null || { echo "gst-launch-1.0 not found: skipping"; exit 77; }
for e in matroskamux jpegenc matroskademux jpegdec; do
  gst-inspect-1.0 "$e" >/dev/null 2>&1 || { echo "no $e: skipping"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
model=$root/tests/golden/fusion/av_pipeline.safetensors

gst-launch-1.0 -q videotestsrc num-buffers=60 ! video/x-raw,width=64,height=48,framerate=15/1 \
  ! jpegenc ! queue ! mux. audiotestsrc num-buffers=200 samplesperbuffer=320 \
  ! audio/x-raw,rate=16000,channels=1 ! queue ! mux. matroskamux name=mux \
  ! filesink location="$tmp/av.mkv" || { echo "FAIL: could not make the clip"; exit 1; }
gst-launch-1.0 -q audiotestsrc num-buffers=50 samplesperbuffer=320 \
  ! audio/x-raw,rate=16000,channels=1 ! matroskamux ! filesink location="$tmp/a.mkv"

if ! out=$("$root/pipelines/av_file.sh" "$tmp/av.mkv" "$model" 2>"$tmp/err"); then
  echo "FAIL: av_file.sh failed"; cat "$tmp/err"; exit 1
fi
n=$(echo "$out" | grep -c ' s ')
bad=$(echo "$out" | awk '$3 != "talking" && $3 != "music" && $3 != "quiet"' | head -3)
times=$(echo "$out" | awk '{print $1}')
first=$(echo "$times" | head -1)
gaps=$(echo "$times" | awk 'NR > 1 { d = $1 - p; if (d < 0.235 || d > 0.265) print p " -> " $1 } { p = $1 }')
if [ "$n" -lt 12 ]; then
  echo "FAIL: $n steps for a 4 s clip"; echo "$out"; fail=1
elif [ -n "$bad" ]; then
  echo "FAIL: labels not of the model: $bad"; fail=1
elif [ "$first" != "0.98" ]; then
  echo "FAIL: the first step ends at $first s, expected 0.975 s (YAMNet's first window)"; fail=1
elif [ -n "$gaps" ]; then
  echo "FAIL: steps not 0.25 s apart: $gaps"; fail=1
else
  echo "ok av_file.sh: $n fused steps, 0.25 s apart, first ending at $first s"
fi

out=$("$root/pipelines/av_file.sh" "$tmp/a.mkv" "$model" 2>&1); rc=$?
if [ "$rc" = 4 ] && [[ $out == *"no video track"* ]]; then
  echo "ok: a file without video is refused (exit 4)"
else
  echo "FAIL: audio-only file: exit $rc: $out"; fail=1
fi

out=$("$root/pipelines/av_file.sh" "$tmp/av.mkv" "$root/tests/golden/fusion/b1_cony.safetensors" 2>&1)
rc=$?
re="sink_(audio|video) has [0-9]+ floats per token; input '(audio|video)' of [^ ]*b1_cony.safetensors takes (5|4)"
if [ "$rc" != 0 ] && [[ $out =~ $re ]]; then
  echo "ok: a fused model of other token sizes is refused, naming the pad and sizes"
else
  echo "FAIL: mismatched model: exit $rc: $out"; fail=1
fi
out=$("$root/pipelines/av_file.sh" "$tmp/av.mkv" "$root/tests/golden/model/b1_regular.safetensors" 2>&1)
rc=$?
if [ "$rc" = 2 ] && [[ $out == *"b1_regular.safetensors: not a fused model file"* ]]; then
  echo "ok: an ordinary model is refused (exit 2)"
else
  echo "FAIL: ordinary model: exit $rc: $out"; fail=1
fi

# av_camera.sh live, on live test sources (4 s of audio, 2 s of video: then the video is
# absent and the steps go on), and without a camera: exit 3, no stand-in source.
out=$("$root/pipelines/av_camera.sh" --audio-source 'audiotestsrc is-live=true num-buffers=60' \
  --video-source 'videotestsrc is-live=true pattern=ball num-buffers=20' "$model" 2>"$tmp/err")
n=$(echo "$out" | grep -c ' s ')
if [ "$n" -ge 8 ]; then
  echo "ok av_camera.sh on live test sources: $n fused steps"
else
  echo "FAIL av_camera.sh live: $n steps"; echo "$out"; cat "$tmp/err"; fail=1
fi
if /usr/bin/python3 "$root/pipelines/devices.py" video >/dev/null 2>&1; then
  echo "ok av_camera.sh without a camera # SKIP this machine has one"
else
  out=$("$root/pipelines/av_camera.sh" --audio-source 'audiotestsrc is-live=true' "$model" 2>&1)
  rc=$?
  if [ "$rc" = 3 ] && [[ $out == *"--video-device"* ]]; then
    echo "ok av_camera.sh without a camera: exit 3"
  else
    echo "FAIL av_camera.sh without a camera: exit $rc: $out"; fail=1
  fi
fi
exit $fail
