# Shared by the pipelines/*.sh scripts (sourced, not run).
#
# Environment:
#   CONY_VGGISH       front-end model (default models/audio/vggish.safetensors)
#   CONY_TRANSFORMER  classifier model (default models/audio/transformer.safetensors)
#   CONY_OPTS         extra conytransformer properties, e.g.
#                     "message-mode=on-change threshold=0.6 attention=cony-fixed"
#   GST_PLUGIN_PATH   where libgstcony.so is (default: build/gst of this checkout)
CONY_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CONY_VGGISH=${CONY_VGGISH:-$CONY_ROOT/models/audio/vggish.safetensors}
CONY_TRANSFORMER=${CONY_TRANSFORMER:-$CONY_ROOT/models/audio/transformer.safetensors}
CONY_OPTS=${CONY_OPTS:-}
export GST_PLUGIN_PATH=${GST_PLUGIN_PATH:-$CONY_ROOT/build/gst}

cony_check_models () {
  local m
  for m in "$CONY_VGGISH" "$CONY_TRANSFORMER"; do
    if [ ! -f "$m" ]; then
      echo "$(basename "$0"): model file $m not found (arguments or CONY_VGGISH / CONY_TRANSFORMER)" >&2
      exit 2
    fi
  done
}

# The classifier part of every audio pipeline (word-split on purpose: CONY_OPTS).
# Arguments are extra conyvggish properties (file.sh: batch=64).
cony_chain () {
  echo "audioconvert ! audioresample ! conymel ! conyvggish model=$CONY_VGGISH $*" \
       "! conytransformer name=classifier model=$CONY_TRANSFORMER $CONY_OPTS"
}

# Turns gst-launch-1.0 -m output into one line per step: time (s), label, confidence
# (on-change mode: one line per change; the closing EOS message is skipped). The time is
# the message's stream-time-end: the end of the input the result covers (for the audio
# chain: the last sample of the newest 0.975 s VGGish window), i.e. how far into the
# stream the result has heard (docs/elements.md, "Time spans").
# Error and warning lines go to stderr.
cony_format () {
  sed -nE '
    /eos=\(boolean\)true/d
    /\(element\): conytransformer, /{
      s/.*stream-time-end=\(guint64\)([0-9]+).*label=\(string\)("[^"]*"|[^,]*),.*confidence=\(float\)([-0-9.e]+).*/\1 \2 \3/
      p; d
    }
    /ERROR|WARNING|error|Execution ended/w /dev/stderr
  ' | awk '{ label = $2; for (i = 3; i < NF; i++) label = label " " $i; gsub(/["\\]/, "", label);
             printf "%9.2f s  %-24s %.3f\n", $1 / 1e9, label, $NF; fflush() }'
}
