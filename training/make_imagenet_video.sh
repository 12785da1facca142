#!/usr/bin/env bash
# Makes tests/golden/imagenet/photos.webm: 4 s of real photographs for the video pipelines'
# examples and tests, one second (10 frames at 10 fps, 320x240, centre-cropped to 4:3)
# each of google-coral/test_data's cat.bmp, parrot.jpg, hot_dog.jpg (Apache-2.0) and
# opencv-doc's examples/data/baboon.jpg (Debian package opencv-doc; OpenCV's samples,
# Apache-2.0), VP8 in WebM. The MobileNet-v2 calls them Egyptian cat, macaw, hotdog,
# baboon.
#
#   training/make_imagenet_video.sh TEST_DATA_DIR OPENCV_DATA_DIR [OUT.webm]
set -euo pipefail
td=${1:?usage: make_imagenet_video.sh TEST_DATA_DIR OPENCV_DATA_DIR [OUT.webm]}
ocv=${2:?usage: make_imagenet_video.sh TEST_DATA_DIR OPENCV_DATA_DIR [OUT.webm]}
out=${3:-$(dirname "$0")/../tests/golden/imagenet/photos.webm}
still () {
  echo "filesrc location=$1 ! gdkpixbufdec ! videoconvert ! aspectratiocrop aspect-ratio=4/3" \
       "! videoscale ! videoconvert" \
       "! video/x-raw,format=I420,width=320,height=240,pixel-aspect-ratio=1/1,colorimetry=bt601,chroma-site=jpeg" \
       "! imagefreeze num-buffers=10 ! video/x-raw,framerate=10/1 ! c."
}
# shellcheck disable=SC2046
gst-launch-1.0 -q concat name=c \
  ! vp8enc deadline=1 target-bitrate=400000 keyframe-max-dist=10 ! webmmux \
  ! filesink location="$out" \
  $(still "$td/cat.bmp") $(still "$td/parrot.jpg") $(still "$td/hot_dog.jpg") $(still "$ocv/baboon.jpg")
echo "$out: $(stat -c %s "$out") bytes"
