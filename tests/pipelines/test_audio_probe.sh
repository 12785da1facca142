#!/usr/bin/env bash
# pipelines/has_audio.py, which the file scripts ask before launching a pipeline:
#  - files with audio (WAV, Ogg Vorbis, MP3, Matroska video + audio) are said to have it,
#    and file.sh classifies the Matroska one (result lines, status 0);
#  - a video-only file: file.sh, audioset.sh and json.sh print the probe's one line
#    ("(it has: video)", not the not-linked fallback's text), nothing on stdout, exit 4;
#  - CONY_AUDIO_PROBE=off: file.sh's not-linked fallback still gives one line, exit 4;
#  - cannot tell: a file of no known format (zeros) -> 2; a FIFO that nobody writes (a source
#    that never answers) -> the probe ends itself (SIGALRM), neither 0 nor 4.
# Needs GST_PLUGIN_PATH (the build tree's gst/).
#   test_audio_probe.sh SOURCE_ROOT
set -uo pipefail
root=${1:?usage: test_audio_probe.sh SOURCE_ROOT}
command -v gst-launch-1.0 >/dev/null || { echo "1..0 # SKIP gst-launch-1.0 not found"; exit 77; }
. "$(dirname "$0")/../tap.sh"
p=$root/pipelines
cnn=$root/tests/golden/cnn/small.safetensors
model=$root/tests/golden/transformer/small.safetensors

# make_media NAME PIPELINE...: NAME in $tmp from a gst-launch-1.0 description ending in a muxer
# or encoder; a missing element: a SKIP point, status 1.
make_media () {
  local name=$1; shift
  gst-launch-1.0 -q "$@" ! filesink location="$tmp/$name" >/dev/null 2>&1 && return 0
  ok "$name # SKIP could not make it (an encoder or muxer missing)"
  return 1
}
tone="audiotestsrc num-buffers=70 wave=pink-noise ! audioconvert"   # 1.6 s
frames="videotestsrc num-buffers=40 ! video/x-raw,width=160,height=120 ! jpegenc"

# Files with audio: the probe says so (status 0, nothing on stderr).
make_media a.wav $tone ! wavenc
make_media a.ogg $tone ! vorbisenc ! oggmux
make_media a.mp3 $tone ! lamemp3enc
make_media av.mkv $frames ! m. $tone ! vorbisenc ! matroskamux name=m
for f in a.wav a.ogg a.mp3 av.mkv; do
  [ -f "$tmp/$f" ] || continue
  timeout 30 /usr/bin/python3 "$p/has_audio.py" "$tmp/$f" 2>"$tmp/err"
  rc=$?
  if [ "$rc" = 0 ] && [ ! -s "$tmp/err" ]; then ok "has_audio.py $f: has audio"
  else not_ok "has_audio.py $f: status $rc"; sed 's/^/# /' "$tmp/err" | head -5; fi
done
if [ -f "$tmp/av.mkv" ]; then
  timeout 60 bash "$p/file.sh" "file://$tmp/av.mkv" "$cnn" "$model" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" = 0 ] && [ "$(grep -c ' s  ' "$tmp/out")" -ge 1 ] \
     && ! grep -q "no audio" "$tmp/err"; then
    ok "file.sh on a video + audio URI: $(wc -l <"$tmp/out") result lines"
  else
    not_ok "file.sh on a video + audio URI: status $rc"; sed 's/^/# /' "$tmp/err" | head -5
  fi
fi

# A video-only file: the probe's line (the fallback says "uridecodebin found no stream")
# and no pipeline (nothing on stdout).
# expect_no_audio LABEL TEXT COMMAND...: status 4, one stderr line containing TEXT.
expect_no_audio () {
  local label=$1 text=$2; shift 2
  timeout 60 "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" = 4 ] && grep -qF "$text" "$tmp/err" && [ "$(wc -l <"$tmp/err")" = 1 ] \
     && [ ! -s "$tmp/out" ]; then
    ok "$label: exit 4, '$(cat "$tmp/err")'"
  else
    not_ok "$label: exit $rc"; sed 's/^/# /' "$tmp/err" "$tmp/out" | head -5
  fi
}
if make_media v.mkv $frames ! matroskamux; then
  probed="no audio track (it has: video)"
  expect_no_audio "file.sh, video-only file" "file.sh: $tmp/v.mkv: $probed" \
    bash "$p/file.sh" "$tmp/v.mkv" "$cnn" "$model"
  expect_no_audio "file.sh, video-only URI" "$probed" \
    bash "$p/file.sh" "file://$tmp/v.mkv" "$cnn" "$model"
  expect_no_audio "json.sh, video-only file" "$probed" \
    bash "$p/json.sh" "$tmp/v.mkv" "$cnn" "$model"
  if [ -f "$root/models/yamnet/yamnet.safetensors" ] \
     && [ -f "$root/models/audioset/tagger.safetensors" ]; then
    expect_no_audio "audioset.sh, video-only file" "$probed" bash "$p/audioset.sh" "$tmp/v.mkv"
  fi
  expect_no_audio "file.sh, CONY_AUDIO_PROBE=off: the not-linked fallback" \
    "no audio track (uridecodebin found no stream" \
    env CONY_AUDIO_PROBE=off bash "$p/file.sh" "$tmp/v.mkv" "$cnn" "$model"
fi

# Cannot tell: status 2 with the reason, or ended by its own alarm; never "no audio".
head -c 4096 /dev/zero >"$tmp/junk.bin"   # (random bytes could look like MP3 frames)
timeout 30 /usr/bin/python3 "$p/has_audio.py" "$tmp/junk.bin" 2>"$tmp/err"
rc=$?
if [ "$rc" = 2 ] && grep -q "cannot tell" "$tmp/err"; then
  ok "has_audio.py on junk: cannot tell (2)"
else not_ok "has_audio.py on junk: status $rc"; sed 's/^/# /' "$tmp/err" | head -5; fi
mkfifo "$tmp/fifo"
timeout 30 /usr/bin/python3 "$p/has_audio.py" "$tmp/fifo" --timeout 1 2>"$tmp/err"
rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 4 ] && [ "$rc" != 124 ]; then
  ok "has_audio.py on a silent FIFO ended itself (status $rc)"
else
  not_ok "has_audio.py on a silent FIFO: status $rc"; sed 's/^/# /' "$tmp/err" | head -5
fi

tap_done
