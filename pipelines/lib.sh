# Shared by the pipelines/*.sh scripts (sourced, not run).
#
# Environment:
#   CONY_VGGISH       front-end CNN (default: the CNN the classifier's config names,
#                     frontend.cnn, beside it or in models/*/ -- models/yamnet/
#                     yamnet.safetensors for the shipped model; vggish.safetensors beside
#                     a classifier that names none; any CNN conyvggish loads)
#   CONY_TRANSFORMER  classifier model (default models/audio/transformer.safetensors)
#   CONY_OPTS         extra conytransformer properties, e.g.
#                     "message-mode=on-change threshold=0.6 attention=cony-fixed"
#   GST_PLUGIN_PATH   where libgstcony.so is (default: build/gst of this checkout; installed
#                     scripts, DATADIR/gst-cony/pipelines, use the installed plugin)
#   CONY_AUDIO_PROBE  "off": file scripts skip asking GStreamer's discoverer whether the
#                     input has audio (cony_media_input) and go straight to the pipeline
source "$(dirname "${BASH_SOURCE[0]}")/help.sh"
CONY_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CONY_VGGISH=${CONY_VGGISH:-}
CONY_TRANSFORMER=${CONY_TRANSFORMER:-$CONY_ROOT/models/audio/transformer.safetensors}
CONY_OPTS=${CONY_OPTS:-}
# (installed, CONY_ROOT is DATADIR/gst-cony: models/ beside pipelines/, no build/)
if [ -d "$CONY_ROOT/build/gst" ]; then
  export GST_PLUGIN_PATH=${GST_PLUGIN_PATH:-$CONY_ROOT/build/gst}
fi

# The CNN the classifier was trained on: its config's frontend "cnn" (a file name) beside
# it or in one of models/*/ (conytransformer refuses another CNN's tokens anyway, naming
# both); vggish.safetensors beside it for a classifier that names none.
cony_default_cnn () {
  local n name f
  # the safetensors header: 8 bytes of length, then the JSON (config escaped inside it)
  n=$(od -An -tu8 -N8 "$CONY_TRANSFORMER" 2>/dev/null | tr -d ' ')
  name=$(head -c $((8 + ${n:-0})) "$CONY_TRANSFORMER" 2>/dev/null | tail -c +9 | tr -d '\\' \
         | grep -ao '"cnn":"[^"]*"' | head -n1 | cut -d'"' -f4)
  name=${name:-vggish.safetensors}
  for f in "$(dirname "$CONY_TRANSFORMER")/$name" "$CONY_ROOT"/models/*/"$name"; do
    [ -f "$f" ] && { echo "$f"; return; }
  done
  echo "$(dirname "$CONY_TRANSFORMER")/$name"
}

# The cony tool of this checkout, else the one on PATH; nothing when there is none.
cony_tool () {
  local cony=$CONY_ROOT/build/tools/cony
  [ -x "$cony" ] || cony=$(command -v cony || true)
  echo "$cony"
}

# A warning for a local file that stops before the end its headers announce (`cony
# probe`: Ogg pages, PNG, JPEG, ...; when a cony is at hand): the results cover only what
# it holds.
cony_warn_truncated () {
  local cony line rc=0
  cony=$(cony_tool)
  [ -n "$cony" ] || return 0
  line=$("$cony" probe "$1" 2>/dev/null) || rc=$?
  [ "$rc" = 3 ] || return 0
  echo "$(basename "$0"): warning: $1 is truncated: ${line#*, truncated: }; the results" \
    "cover only what it holds" >&2
}

# A model name as libcony resolves it (cony_model_path_find(): the current directory,
# $CONY_MODEL_PATH, the installed models), asked of `cony info`; the name unchanged when
# no cony is at hand or nothing is found.
cony_find_model () {
  local cony found=""
  cony=$(cony_tool)
  [ -f "$1" ] || [ -z "$cony" ] || found=$("$cony" info "$1" 2>/dev/null | sed -n '1s/^model: *//p')
  echo "${found:-$1}"
}

cony_check_models () {
  local m
  CONY_TRANSFORMER=$(cony_find_model "$CONY_TRANSFORMER")
  [ -n "$CONY_VGGISH" ] || CONY_VGGISH=$(cony_default_cnn)
  CONY_VGGISH=$(cony_find_model "$CONY_VGGISH")
  for m in "$CONY_VGGISH" "$CONY_TRANSFORMER"; do
    if [ ! -f "$m" ]; then
      echo "$(basename "$0"): model file $m not found (arguments or CONY_VGGISH / CONY_TRANSFORMER)" >&2
      exit 2
    fi
  done
}

# The conymel and conyvggish properties the classifier's tokens were made with, from the
# frontend of its config (train_your_own.py and train_yamnet_audio.py record it): YAMNet's
# log-mel preset, the CNN's pooled embedding as the token, and a continual CNN with its
# stride (cnn_mode, stride_frames; docs/continual-cnn.md). Sets cony_mel_props and
# cony_cnn_props (empty for a VGGish-style front end).
cony_token_props () {
  local head stride
  head=$(head -c 65536 "$CONY_TRANSFORMER" | tr -d '\0\\')
  cony_mel_props="" cony_cnn_props=""
  case $head in *'"frontend":{"name":"yamnet"'*) cony_mel_props=preset=yamnet ;; esac
  case $head in *'"cnn_output":"embedding"'*) cony_cnn_props=output=embedding ;; esac
  case $head in
    *'"cnn_mode":"continual"'*)
      stride=$(printf '%s' "$head" | grep -o '"stride_frames":[0-9]*' | head -1 | cut -d: -f2)
      cony_cnn_props="$cony_cnn_props mode=continual${stride:+ stride=$stride}" ;;
  esac
}

# The classifier part of every audio pipeline (word-split on purpose: CONY_OPTS).
# Arguments are extra conyvggish properties (file.sh: batch=64).
cony_chain () {
  cony_token_props
  echo "audioconvert ! audioresample ! conymel $cony_mel_props" \
       "! conyvggish model=$CONY_VGGISH $cony_cnn_props $*" \
       "! conytransformer name=classifier model=$CONY_TRANSFORMER $CONY_OPTS"
}

# A media FILE or URI given to a file script: sets cony_uri, or says what is wrong and
# exits: 2 when the file does not exist, 4 when it has no audio stream (one line, from
# pipelines/has_audio.py: GStreamer's discoverer, before any pipeline is launched).
# When the probe cannot tell (error, timeout, no python3-gi) the script goes on and its
# pipeline's own errors speak.
cony_media_input () {
  local input=$1 prog msg
  prog=$(basename "$0")
  case $input in
    *://*) cony_uri=$input ;;
    *) [ -f "$input" ] || { echo "$prog: $input not found" >&2; exit 2; }
       cony_uri="file://$(cd "$(dirname "$input")" && pwd)/$(basename "$input")"
       cony_warn_truncated "$input" ;;
  esac
  [ "${CONY_AUDIO_PROBE:-}" != off ] || return 0
  # (a subshell: bash's own "Alarm clock" line for a probe that had to be ended goes
  # into msg too)
  msg=$( (/usr/bin/python3 "$CONY_ROOT/pipelines/has_audio.py" "$input" \
            --label "$prog: $input") 2>&1 >/dev/null ) && return 0
  [ $? != 4 ] || { echo "$msg" >&2; exit 4; }
}

# gst-launch-1.0 with its stdout line-buffered: into a pipe, stdio would otherwise hold
# the messages back in 4 KiB blocks (the first result of a live source after ~30 s).
# When it fails because GStreamer has no cony elements, says where to point it. A
# pipeline that fails to start (a model refused while prerolling) is status 1 like any
# other pipeline error, not gst-launch-1.0's 255.
cony_launch () {
  local status=0
  stdbuf -oL gst-launch-1.0 "$@" || status=$?
  [ $status = 0 ] || cony_plugin_hint
  [ $status != 255 ] || status=1
  return $status
}

# GStreamer looks for plugins in its own directory (/usr/lib/ARCH/gstreamer-1.0) and in
# GST_PLUGIN_PATH: a plugin installed under another prefix, or not built yet, is not
# found ("no element conymel"). Prints what to do, naming the installed plugin's directory
# when these scripts are an installed copy (PREFIX/share/gst-cony/pipelines) with one.
cony_plugin_hint () {
  gst-inspect-1.0 conytransformer >/dev/null 2>&1 && return 0   # (--exists wants version 1.22)
  local dir
  dir=$(ls -d "$CONY_ROOT"/../../lib*/gstreamer-1.0/libgstcony.so \
              "$CONY_ROOT"/../../lib*/*/gstreamer-1.0/libgstcony.so 2>/dev/null | head -n1)
  if [ -n "$dir" ]; then
    dir=$(cd "$(dirname "$dir")" && pwd)
    echo "$(basename "$0"): GStreamer has no cony elements: the plugin is installed in $dir," \
         "where GStreamer does not look; export GST_PLUGIN_PATH=$dir" >&2
  else
    echo "$(basename "$0"): GStreamer has no cony elements (libgstcony.so;" \
         "GST_PLUGIN_PATH=${GST_PLUGIN_PATH:-unset}): build it (scripts/build.sh) or," \
         "installed under a prefix other than /usr, export" \
         "GST_PLUGIN_PATH=PREFIX/lib/ARCH/gstreamer-1.0" >&2
  fi
}

# Turns gst-launch-1.0 -m output into one line per step: time (s), label, score
# (on-change mode: one line per change; the closing EOS message is skipped). The time is
# the message's stream_end: the end of the input the result covers (for the audio
# chain: the last sample of the newest 0.975 s VGGish window), i.e. how far into the
# stream the result has heard (docs/elements.md, "Time spans"), rounded half up from its
# nanoseconds: 0.975 s prints 0.98, and every line is one step after the previous one.
# Error and warning lines go to stderr. One perl process (perl-base is Essential in
# Debian) reads the messages in blocks and prints each line at once ($| = 1): sed -u and
# bash's read took a byte per read() call and cost about as much CPU as the inference
# (bench/RESULTS.md, "Printing the results"). A reader that goes away (| head) ends it
# quietly.
cony_format () {
  perl -ne "$cony_perl_common"'
    next if /eos=\(boolean\)true/;
    if (/\(element\): (?:conytransformer|conyframeembed), /) {
      # (top-level fields only: those of the nested top and events structures are escaped)
      next unless /.*stream_end=\(guint64\)([0-9]+).*label=\(string\)("[^"]*"|[^,]*),.*score=\(float\)([-0-9.e]+)/;
      my ($ns, $label, $conf) = ($1, $2, $3);
      $label =~ tr/"\\//d;
      printf "%9s s  %-24s %.3f\n", cony_time($ns), $label, $conf or exit 0;
    } elsif (/ERROR|WARNING|error|Execution ended/) {
      print STDERR $_;
    }'
}

# The start of every formatter's perl program: output flushed per line, a closed reader
# ends it quietly, cony_time(NANOSECONDS) gives seconds to 0.01 rounded half up (integer
# arithmetic, exact below 2^53 ns); "?" for NONE (2^64 - 1: a span end not known).
# shellcheck disable=SC2016
cony_perl_common='
  BEGIN { $| = 1; $SIG{PIPE} = "IGNORE"; }
  sub cony_time { return "?" if length $_[0] > 18; my $cs = int(($_[0] + 5000000) / 10000000); sprintf "%d.%02d", $cs / 100, $cs % 100 }
'

# "--device NAME" or "--source DESCRIPTION" at the front of a script's arguments:
# sets cony_source (empty when neither is given) and cony_nargs, how many arguments
# were used. The description is split at spaces when launched: no quoted values with
# spaces in them (for files, use file.sh).
cony_parse_source () {
  cony_source=""
  cony_device=""
  cony_nargs=0
  case ${1:-} in
    --source) [ $# -ge 2 ] || cony_usage; cony_source=$2; cony_nargs=2 ;;
    --source=*) cony_source=${1#--source=}; cony_nargs=1 ;;
    --device) [ $# -ge 2 ] || cony_usage; cony_device=$2; cony_nargs=2 ;;
    --device=*) cony_device=${1#--device=}; cony_nargs=1 ;;
  esac
}

# The capture source of @kind (audio|video): --source as given, --device with @element
# (the kind's usual capture element), otherwise the default device the device monitor
# finds; none found: says so and exits 3 instead of classifying a fake source.
cony_capture_source () {
  local kind=$1 element=$2
  if [ -n "$cony_source" ]; then
    echo "$cony_source"
  elif [ -n "$cony_device" ]; then
    echo "$element device=$cony_device"
  elif ! /usr/bin/python3 "$CONY_ROOT/pipelines/devices.py" "$kind"; then
    local example="audiotestsrc is-live=true"
    [ "$kind" = video ] && example="videotestsrc is-live=true pattern=ball"
    echo "$(basename "$0"): give one with --device NAME or --source 'GStreamer source'" \
         "(e.g. --source '$example')" >&2
    exit 3
  fi
}
