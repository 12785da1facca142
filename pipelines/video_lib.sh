# Shared by the video pipelines (camera.sh, video_file.sh; sourced, not run).
#
# Environment (besides lib.sh's CONY_OPTS and GST_PLUGIN_PATH):
#   CONY_VIDEO_CNN         frame CNN (default models/imagenet/mobilenet_v2.safetensors:
#                          the ImageNet MobileNet-v2, 1000 classes)
#   CONY_VIDEO_CLASSIFIER  classifier over the CNN's tokens, or "none" (the default):
#                          the CNN's own labels per frame (conyframeembed's messages).
#                          The synthetic toy: CONY_VIDEO_CNN=models/video/frame_cnn.safetensors
#                          CONY_VIDEO_CLASSIFIER=models/video/classifier.safetensors
#   CONY_VIDEO_FPS         frames per second fed to the CNN (default 10; videorate drops
#                          or repeats frames to get there)
#   CONY_NUM_BUFFERS       stop after this many source frames (default: run to the end)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
CONY_VIDEO_CNN=${CONY_VIDEO_CNN:-$CONY_ROOT/models/imagenet/mobilenet_v2.safetensors}
CONY_VIDEO_CLASSIFIER=${CONY_VIDEO_CLASSIFIER:-none}
CONY_VIDEO_FPS=${CONY_VIDEO_FPS:-10}
CONY_NUM_BUFFERS=${CONY_NUM_BUFFERS:--1}

cony_video_check_models () {
  local m
  for m in "$CONY_VIDEO_CNN" "$CONY_VIDEO_CLASSIFIER"; do
    if [ "$m" != none ] && [ ! -f "$m" ]; then
      echo "$(basename "$0"): model file $m not found (arguments or CONY_VIDEO_CNN / CONY_VIDEO_CLASSIFIER)" >&2
      exit 2
    fi
  done
}

# The classifier part of every video pipeline: any raw video in; videoconvert gives RGB
# and conyframeembed crops and resizes it to the model's input (crop=center). With
# CONY_VIDEO_CLASSIFIER=none the CNN's labels are the result (one message per frame).
cony_video_chain () {
  echo "videoconvert ! videorate ! video/x-raw,framerate=$CONY_VIDEO_FPS/1" \
       "! conyframeembed model=$CONY_VIDEO_CNN"
  if [ "$CONY_VIDEO_CLASSIFIER" != none ]; then
    echo "! conytransformer name=classifier model=$CONY_VIDEO_CLASSIFIER $CONY_OPTS"
  fi
}
