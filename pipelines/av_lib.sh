# Shared by av_file.sh and av_camera.sh (sourced, not run): the audio and video token
# chains a fused model was trained on, from its config (docs/model-format.md, "Fused
# models": each input's cnn, cnn_output and cnn_mode; a continual audio input runs
# conyvggish mode=continual at the stride of its token rate, docs/continual-cnn.md).
#
# Environment (besides lib.sh's CONY_OPTS and GST_PLUGIN_PATH):
#   CONY_AUDIO_CNN   the audio CNN (default: the audio input's cnn found in models/*/,
#                    else models/yamnet/yamnet.safetensors)
#   CONY_VIDEO_CNN   the video CNN (default: the video input's cnn found in models/*/,
#                    else video_lib.sh's default)
#   CONY_VIDEO_FPS   frames per second fed to the video CNN (default 10)
cony_av_user_video_cnn=${CONY_VIDEO_CNN:-}
source "$(dirname "${BASH_SOURCE[0]}")/video_lib.sh"
# The shipped fused model (models/av/MODEL.md), the scripts' default.
CONY_AV_MODEL=$CONY_ROOT/models/av/av.safetensors

# "NAME CNN OUTPUT MODE" per input of the fused model $1 (CNN "-" when not recorded; MODE
# "window", or "continual stride=FRAMES" from its token rate in 10 ms frames).
cony_fused_inputs () {
  /usr/bin/python3 - "$1" <<'PY'
import json, struct, sys
try:
    with open(sys.argv[1], "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        config = json.loads(json.loads(f.read(n))["__metadata__"]["config"])
    inputs = config["fusion"]["inputs"]
except (OSError, ValueError, KeyError, TypeError, struct.error) as e:
    sys.exit(f"{sys.argv[1]}: not a fused model file ({type(e).__name__}: {e})")
for i in inputs:
    mode = i.get("cnn_mode", "window")
    if mode == "continual":
        n, d = i["rate"]
        mode += f" stride={100 * d // n}"
    print(i["name"], i.get("cnn", "-"), i.get("cnn_output", "scores"), mode)
PY
}

# A CNN file called $1 in models/*/ (empty when none).
cony_find_model () {
  local f
  for f in "$CONY_ROOT"/models/*/"$1"; do
    [ -f "$f" ] && { echo "$f"; return 0; }
  done
  return 0
}

# For the fused model $1: sets cony_av_audio (conyvggish's properties) and cony_av_video
# (conyframeembed's), or says what is wrong and exits 2.
cony_av_setup () {
  local fused=$1 inputs name cnn output mode audio="" video="" audio_out="" video_out=""
  local audio_mode=""
  [ -f "$fused" ] || { echo "$(basename "$0"): model file $fused not found" >&2; exit 2; }
  inputs=$(cony_fused_inputs "$fused") || exit 2
  while read -r name cnn output mode; do
    case $name in
      audio) audio=$(cony_find_model "$cnn"); audio_out=$output
             [ "$mode" = window ] || audio_mode=" mode=$mode" ;;
      video) video=$(cony_find_model "$cnn"); video_out=$output ;;
    esac
  done <<<"$inputs"
  if ! grep -q '^audio ' <<<"$inputs" || ! grep -q '^video ' <<<"$inputs"; then
    echo "$(basename "$0"): $fused has the inputs $(cut -d' ' -f1 <<<"$inputs" | xargs)," \
         "expected audio and video" >&2
    exit 2
  fi
  audio=${CONY_AUDIO_CNN:-${audio:-$CONY_ROOT/models/yamnet/yamnet.safetensors}}
  video=${cony_av_user_video_cnn:-${video:-$CONY_VIDEO_CNN}}
  local m
  for m in "$audio" "$video"; do
    [ -f "$m" ] || { echo "$(basename "$0"): model file $m not found (CONY_AUDIO_CNN / CONY_VIDEO_CNN)" >&2; exit 2; }
  done
  cony_av_audio="model=$audio output=$audio_out$audio_mode"
  cony_av_video="model=$video output=$video_out"
}

# The two token chains into conyfuse "fuse" (word-split on purpose), after a source each.
cony_av_audio_chain () {
  echo "audioconvert ! audioresample ! conymel preset=yamnet ! conyvggish $cony_av_audio"
}
cony_av_video_chain () {
  echo "videoconvert ! videorate ! video/x-raw,framerate=$CONY_VIDEO_FPS/1" \
       "! conyframeembed $cony_av_video"
}
