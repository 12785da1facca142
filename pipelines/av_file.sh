#!/usr/bin/env bash
# Classifies the audio and the video of a media file together with one fused model
# (conyfuse ! conytransformer, docs/elements.md) and prints one line per fused step: time
# in the file, label, confidence.
#
#   pipelines/av_file.sh FILE [FUSED_MODEL.safetensors]
#
# Audio: conymel preset=yamnet ! conyvggish, video: conyframeembed at CONY_VIDEO_FPS
# (default 10) frames per second, each with the CNN and output the fused model's input
# records (its cnn found in models/*/; pipelines/av_lib.sh). The fused model's inputs
# must be named audio and video (docs/model-format.md, "Fused models"); by default the
# shipped one, models/av/av.safetensors (talking, music, noise, animal, quiet). Options:
# CONY_AUDIO_CNN, CONY_VIDEO_CNN, CONY_OPTS (extra conytransformer properties).
set -euo pipefail
source "$(dirname "$0")/av_lib.sh"
{ [ $# -ge 1 ] && [ $# -le 2 ]; } || cony_usage
file=$1
fused=${2:-$CONY_AV_MODEL}
cony_av_setup "$fused"
[ -f "$file" ] || { echo "av_file.sh: $file not found" >&2; exit 2; }
# In a file (not live) conyfuse waits for tokens on both pads, so a file without one of
# the two tracks would never start: say so (GStreamer's discoverer, pipelines/has_audio.py;
# when it cannot tell, the pipeline runs and speaks for itself).
kinds=$(cd "$CONY_ROOT/pipelines" && /usr/bin/python3 -c \
  'import sys, has_audio; print(" ".join(sorted(set(has_audio.stream_kinds(sys.argv[1], 10)))))' \
  "$file" 2>/dev/null) || kinds=""
for k in audio video; do
  case " $kinds " in
    "  " | *" $k "*) ;;
    *) echo "av_file.sh: $file: no $k track (it has: $kinds)" >&2; exit 4 ;;
  esac
done
# The token queues let one sense run ahead of the other by up to 30 s (YAMNet's first
# token needs 0.975 s of audio): the demuxer feeds both branches from one thread.
tokq="queue max-size-buffers=0 max-size-bytes=0 max-size-time=30000000000"
# shellcheck disable=SC2046,SC2086
cony_launch -m filesrc location="$file" ! decodebin name=d \
  conyfuse name=fuse model="$fused" ! conytransformer name=classifier model="$fused" $CONY_OPTS \
  ! fakesink sync=false \
  d. ! queue ! $(cony_av_audio_chain) ! $tokq ! fuse.sink_audio \
  d. ! queue ! $(cony_av_video_chain) ! $tokq ! fuse.sink_video | cony_format
