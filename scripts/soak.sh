#!/usr/bin/env bash
# Soak (a script, not a test): the audio pipeline at full speed on long streams, with the
# process's resident memory sampled twice a second.
#   scripts/soak.sh [SECONDS_OF_AUDIO=3600] [PIPELINES=20] [SECONDS_EACH=600]
# 1. one pipeline, SECONDS_OF_AUDIO of audio (pink noise with tones, 16 kHz mono) through
#    conymel ! conyvggish ! conytransformer (the shipped classifier, models/audio/, with the
#    CNN and front end its config names: pipelines/lib.sh);
# 2. PIPELINES such chains in one process, SECONDS_EACH of audio each, concurrently.
# Prints, per phase: audio seconds, wall seconds, errors/warnings, results counted, RSS at
# start/peak/end, and the RSS slope (least squares over the middle 80 % of the run, between
# start-up and teardown) in MiB per hour of wall time. Exits non-zero on an error or a failed pipeline.
#
#   scripts/soak.sh --av [SECONDS=3600] [PIPELINES=8]
# The live audio+video soak (issue #57): PIPELINES live fused pipelines (audiotestsrc and
# videotestsrc, is-live, through the chains of pipelines/av_lib.sh into conyfuse !
# conytransformer with the shipped models/av/, records written by conyjson) for SECONDS of
# wall time, in two configurations run at the same time: all PIPELINES in one
# gst-launch-1.0 process, and PIPELINES processes of one pipeline each (so the machine
# carries 2 x PIPELINES pipelines). Every 10 s it samples each process's VmRSS and CPU
# time and each pipeline's records; then stops them with EOS (SIGINT to gst-launch-1.0
# -e) and prints per configuration: errors/warnings, RSS and CPU over time, steps received
# against the 4 a second expected from the elapsed time (lost steps), restarts of the
# step counter. CONY_SOAK_AV=one or many runs one configuration only.
set -uo pipefail
source "$(dirname "$0")/../pipelines/help.sh"
cd "$(dirname "$0")/.."
if [ "${1:-}" = --av ]; then
  shift
  exec bash scripts/soak_av.sh "$@"
fi
audio=${1:-3600} n=${2:-20} each=${3:-600}
bash scripts/build.sh
export GST_PLUGIN_PATH=$PWD/build/gst
source pipelines/lib.sh
cony_check_models
cony_token_props
vggish=$CONY_VGGISH transformer=$CONY_TRANSFORMER
out=$(mktemp -d /tmp/cony-soak-XXXXXX)
status=0

# chain SECONDS INDEX: one source-to-sink chain (batch=64: a file-like, non-live stream)
chain () {
  local buffers=$(( $1 * 10 ))  # 1600 samples = 0.1 s a buffer
  echo "audiotestsrc num-buffers=$buffers samplesperbuffer=1600 wave=pink-noise volume=0.3 \
    ! audio/x-raw,format=S16LE,rate=16000,channels=1 ! audiomixer name=mix$2 \
    ! audioconvert ! audioresample ! conymel $cony_mel_props ! conyvggish model=$vggish $cony_cnn_props batch=64 \
    ! conytransformer model=$transformer ! fakesink sync=false \
    audiotestsrc num-buffers=$buffers samplesperbuffer=1600 wave=sine freq=$((300 + 97 * $2)) volume=0.2 \
    ! audio/x-raw,format=S16LE,rate=16000,channels=1 ! mix$2."
}

# phase NAME AUDIO_SECONDS DESCRIPTION...: runs gst-launch-1.0 -m, samples VmRSS each second
phase () {
  local name=$1 secs=$2
  shift 2
  local log=$out/$name.log rss=$out/$name.rss
  local t0=$SECONDS
  # shellcheck disable=SC2068
  gst-launch-1.0 -m $@ >"$log" 2>&1 &
  local pid=$!
  while kill -0 $pid 2>/dev/null; do
    awk -v t="$(date +%s.%N)" '/^VmRSS:/ { print t, $2 }' /proc/$pid/status >>"$rss" 2>/dev/null
    sleep 0.5
  done
  wait $pid
  local rc=$? wall=$((SECONDS - t0))
  local errors results
  errors=$(grep -cE 'ERROR|WARNING' "$log")
  results=$(grep -c '(element): conytransformer, ' "$log")
  [ $rc -ne 0 ] || [ "$errors" -ne 0 ] && status=1
  /usr/bin/python3 - "$rss" "$name" "$secs" "$wall" "$rc" "$errors" "$results" <<'PY'
import sys
path, name, secs, wall, rc, errors, results = sys.argv[1:]
s = [tuple(map(float, l.split())) for l in open(path) if len(l.split()) == 2]
# steady state: the middle 80 % of the run (not the start-up, not the teardown)
t0, t1 = s[0][0], s[-1][0]
half = [(t, r) for t, r in s if t0 + 0.1 * (t1 - t0) <= t <= t0 + 0.9 * (t1 - t0)]
slope = 0.0
if len(half) >= 2:
    mt = sum(t for t, _ in half) / len(half)
    mr = sum(r for _, r in half) / len(half)
    den = sum((t - mt) ** 2 for t, _ in half)
    slope = sum((t - mt) * (r - mr) for t, r in half) / den if den else 0.0
mib = lambda k: k / 1024
print(f"soak {name}: {secs} s of audio in {wall} s wall, exit {rc}, {errors} error/warning lines, "
      f"{results} results; RSS start {mib(s[0][1]):.1f} MiB, peak {mib(max(r for _, r in s)):.1f}, "
      f"end {mib(s[-1][1]):.1f}; steady-state slope {slope * 3600 / 1024:+.2f} MiB/h wall "
      f"(RSS {mib(min(r for _, r in half)):.1f}-{mib(max(r for _, r in half)):.1f} MiB), "
      f"{len(s)} samples")
PY
  grep -E 'ERROR|WARNING' "$log" | head -5
}

phase single "$audio" "$(chain "$audio" 0)"
desc=""
for i in $(seq 1 "$n"); do desc+=" $(chain "$each" "$i")"; done
phase parallel$n "$((n * each))" "$desc"
echo "soak: logs and RSS samples in $out"
exit $status
