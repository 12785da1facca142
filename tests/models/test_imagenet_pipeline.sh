#!/usr/bin/env bash
# The shipped ImageNet MobileNet-v2 end to end, as a user runs it:
#  - pipelines/video_file.sh on tests/golden/imagenet/photos.webm (4 photographs, 1 s each)
#    prints one label per frame: Egyptian cat, macaw, hotdog, baboon, in that order;
#  - pipelines/camera.sh with that file as its --source, and pipelines/overlay.sh writing a
#    labelled video, give the same labels;
#  - cony tag on images: a committed 224x224 PNG frame (used as it is), the same picture as
#    a 300x200 JPEG and a 257x171 BMP (resized, centre-cropped) keep its label; a file
#    that is not an image is refused with a message naming it.
# Needs GST_PLUGIN_PATH (the build tree's gst/), python3-gi.
#   test_imagenet_pipeline.sh SOURCE_ROOT CONY
set -uo pipefail
root=${1:?usage: test_imagenet_pipeline.sh SOURCE_ROOT CONY}
cony=${2:?}
command -v gst-launch-1.0 >/dev/null || { echo "1..0 # SKIP gst-launch-1.0 not found"; exit 77; }
p=$root/pipelines
golden=$root/tests/golden/imagenet
model=$root/models/imagenet/mobilenet_v2.safetensors
# the MobileNet per frame (the pipelines default to the continual tagger over it,
# tests/models/test_video_tagger.sh)
export CONY_VIDEO_CLASSIFIER=none
. "$(dirname "$0")/../tap.sh"

# The distinct labels of a script's "  T s  LABEL  CONF" lines, in order.
labels_of () { sed -nE 's/^ *[0-9.]+ s  (.*[^ ]) +[0-9.]+$/\1/p' | uniq; }
want=$'Egyptian cat\nmacaw\nhotdog, hot dog, red hot\nbaboon'

check_labels () {
  local what=$1 got
  got=$(labels_of <"$tmp/out" | sed 's/ *$//')
  if [ "$got" = "$want" ]; then
    ok "$what: $(wc -l <"$tmp/out") frames, labels $(echo "$got" | paste -sd'|')"
  else
    not_ok "$what: labels '$(echo "$got" | paste -sd'|')'"; tail -5 "$tmp/err" | sed 's/^/# /'
  fi
}

timeout 120 bash "$p/video_file.sh" "$golden/photos.webm" >"$tmp/out" 2>"$tmp/err"
check_labels "video_file.sh photos.webm"

timeout 120 bash "$p/camera.sh" --source "filesrc location=$golden/photos.webm ! decodebin" \
  >"$tmp/out" 2>"$tmp/err"
check_labels "camera.sh --source photos.webm"

if /usr/bin/python3 -c 'import gi' 2>/dev/null; then
  timeout 120 bash "$p/overlay.sh" "$golden/photos.webm" --output "$tmp/labelled.mkv" \
    >"$tmp/out" 2>"$tmp/err"
  check_labels "overlay.sh photos.webm --output"
  if [ -s "$tmp/labelled.mkv" ]; then ok "overlay.sh wrote $(stat -c %s "$tmp/labelled.mkv") bytes"
  else not_ok "overlay.sh wrote no video"; fi
else
  ok "overlay.sh # SKIP python3-gi not installed"
  ok "overlay.sh output # SKIP python3-gi not installed"
fi

# cony tag on images of three formats and sizes.
gst-launch-1.0 -q filesrc location="$golden/frames/cat.png" ! pngdec ! videoconvert ! videoscale \
  ! video/x-raw,width=300,height=200 ! jpegenc quality=95 ! filesink location="$tmp/cat.jpg"
gst-launch-1.0 -q filesrc location="$golden/frames/cat.png" ! pngdec ! videoconvert ! videoscale \
  ! video/x-raw,format=BGR,width=257,height=171 ! filesink location="$tmp/cat.bgr"
/usr/bin/python3 - "$tmp/cat.bgr" "$tmp/cat.bmp" 257 171 <<'PY'
import struct, sys
src, dst, w, h = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
raw = open(src, "rb").read()
row = (w * 3 + 3) & ~3                       # GStreamer's BGR rows are padded to 4 bytes
pixels = b"".join(raw[y * row:y * row + w * 3] + bytes(row - w * 3) for y in reversed(range(h)))
header = struct.pack("<2sIHHI", b"BM", 54 + len(pixels), 0, 0, 54)
info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
open(dst, "wb").write(header + info + pixels)
PY
for img in "$golden/frames/cat.png" "$tmp/cat.jpg" "$tmp/cat.bmp"; do
  out=$("$cony" tag --model "$model" -k 3 "$img" 2>&1)
  if [[ $out == $'0\tEgyptian cat '* ]]; then ok "cony tag $(basename "$img"): ${out//$'\t'/ }"
  else not_ok "cony tag $(basename "$img"): $out"; fi
done
out=$("$cony" info "$model" 2>&1)
if [[ $out == *"input:        image, RGB, quantised as"*'"zero_point": 128'* ]]; then
  ok "cony info names the image input and its quantisation"
else not_ok "cony info: $(echo "$out" | tail -3)"; fi
# the file's activation quantisation selects the integer path; --precision float the
# float engine on the same weights (same label, the float score)
if [[ $out == *"precision:    int8, all 65 layers"* ]]; then ok "cony info: the integer path runs"
else not_ok "cony info precision: $(echo "$out" | grep precision)"; fi
i8=$("$cony" tag --model "$model" -k 1 "$golden/frames/cat.png" 2>&1)
f32=$("$cony" tag --model "$model" -k 1 --precision float "$golden/frames/cat.png" 2>&1)
if [[ $i8 == $'0\tEgyptian cat 0.848' && $f32 == $'0\tEgyptian cat 0.885' ]]; then
  ok "cony tag: integer path ${i8//$'\t'/ }, --precision float ${f32//$'\t'/ }"
else not_ok "cony tag int8 / float: $i8 / $f32"; fi
echo "not an image" >"$tmp/fake.png"
out=$("$cony" tag --model "$model" "$tmp/fake.png" 2>&1)
rc=$?
if [ "$rc" != 0 ] && [[ $out == *fake.png*"cannot decode"* ]]; then ok "cony tag refuses a non-image: $out"
else not_ok "cony tag on a non-image: status $rc, $out"; fi
tap_done
