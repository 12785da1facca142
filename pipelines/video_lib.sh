# Shared by the video pipelines (camera.sh, video_file.sh; sourced, not run).
#
# Environment (besides lib.sh's CONY_OPTS and GST_PLUGIN_PATH):
#   CONY_VIDEO_CNN         frame CNN (default models/video/frame_cnn.safetensors)
#   CONY_VIDEO_CLASSIFIER  classifier (default models/video/classifier.safetensors)
#   CONY_VIDEO_FPS         frames per second fed to the CNN (default 10: the rate the
#                          default model was trained at; videorate drops or repeats
#                          frames to get there)
#   CONY_NUM_BUFFERS       stop after this many source frames (default: run to the end)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
CONY_VIDEO_CNN=${CONY_VIDEO_CNN:-$CONY_ROOT/models/video/frame_cnn.safetensors}
CONY_VIDEO_CLASSIFIER=${CONY_VIDEO_CLASSIFIER:-$CONY_ROOT/models/video/classifier.safetensors}
CONY_VIDEO_FPS=${CONY_VIDEO_FPS:-10}
CONY_NUM_BUFFERS=${CONY_NUM_BUFFERS:--1}

cony_video_check_models () {
  local m
  for m in "$CONY_VIDEO_CNN" "$CONY_VIDEO_CLASSIFIER"; do
    if [ ! -f "$m" ]; then
      echo "$(basename "$0"): model file $m not found (arguments or CONY_VIDEO_CNN / CONY_VIDEO_CLASSIFIER)" >&2
      exit 2
    fi
  done
}

# The classifier part of every video pipeline: any raw video in; videoconvert and
# videoscale produce the model's RGB frame size (conyframeembed's caps query asks for it).
cony_video_chain () {
  echo "videoconvert ! videoscale ! videorate ! video/x-raw,framerate=$CONY_VIDEO_FPS/1" \
       "! conyframeembed model=$CONY_VIDEO_CNN" \
       "! conytransformer name=classifier model=$CONY_VIDEO_CLASSIFIER $CONY_OPTS"
}
