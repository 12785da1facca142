#!/usr/bin/env bash
# Smoke test of `cony bench pipeline` with the shipped default audio model: it runs on a
# few seconds of audio and reports every stage, every attention variant, the gst-launch-1.0
# pipeline's real-time factor and its peak memory; a missing model is refused by name.
# Then `cony bench streams` (several chains in one process, live and back to back) reports
# the CPU per stream and streams per core, and refuses bad options and precisions.
# (Speed itself is measured in bench/RESULTS.md, never asserted here.)
#   test_bench_pipeline.sh CONY MODEL_DIR
set -uo pipefail
cony=${1:?usage: test_bench_pipeline.sh CONY MODEL_DIR}
models=${2:?}
fail=0
check() {  # check NAME REGEX: the bench output has a line matching REGEX
  if ! grep -Eq "$2" <<<"$out"; then echo "FAIL $1: no line matching /$2/"; fail=1; else echo "ok $1"; fi
}

if ! out=$("$cony" bench pipeline --seconds 3 \
    --transformer "$models/transformer.safetensors" 2>&1); then
  echo "FAIL bench pipeline exited non-zero:"; echo "$out"; exit 1
fi
echo "$out"
for stage in "log-mel" "CNN \(one window per stride\)" "encoder \(one step per window\)" "whole chain"; do
  check "stage $stage" "^$stage +[0-9.]+ +[0-9]+$"
done
for v in regular continual nystrom nystrom-fixed cony cony-fixed; do
  check "variant $v" "^$v +[0-9]+\.[0-9]+ +[0-9]+$"
done
# no --vggish: the CNN the classifier's config names (the shipped model: its adapted YAMNet)
check "the classifier's CNN" "CNN [^ ]*models/audio/yamnet-adapted\.safetensors "
check "gst real-time factor" "s of audio in [0-9.]+ s wall, [0-9.]+ s CPU: [0-9]+x real time"
check "gst peak memory" "peak resident memory of the gst-launch-1.0 process: [0-9.]+ MiB"

if out=$("$cony" bench pipeline --seconds 1 --no-gst --vggish /nonexistent/vggish.safetensors 2>&1); then
  echo "FAIL missing model: exit 0"; fail=1
elif ! grep -q "/nonexistent/vggish.safetensors" <<<"$out"; then
  echo "FAIL missing model: the error does not name the file: $out"; fail=1
else
  echo "ok missing model refused: $out"
fi
for mode in "" "--fast"; do
  if ! out=$("$cony" bench streams --streams 3 --seconds 1 $mode \
      --transformer "$models/transformer.safetensors" 2>&1); then
    echo "FAIL bench streams $mode exited non-zero:"; echo "$out"; exit 1
  fi
  echo "$out"
  check "streams $mode header" "^# 3 live streams in one process, one thread, 1 s of audio each"
  # the shipped adapted YAMNet carries activation quantisation: integer inference by default
  check "streams $mode CNN" "^# CNN [^ ]*models/audio/yamnet-adapted\.safetensors: int8"
  check "streams $mode windows" "^  12 CNN windows, [0-9.]+ ms of CPU per token"
  check "streams $mode per stream" "^  per live stream: [0-9.]+% of a core$"
  check "streams $mode per core" "^  live streams per core: [0-9]+$"
  check "streams $mode memory" "^  peak resident memory: [0-9.]+ MiB"
done
# the continual CNN (a classifier trained on window tokens: the bench measures cost, it
# does not pair): tokens every 32 frames after the warm-up that its latency needs
if ! out=$("$cony" bench streams --streams 2 --seconds 2 --fast --mode continual \
    --transformer "$models/transformer.safetensors" 2>&1); then
  echo "FAIL bench streams --mode continual exited non-zero:"; echo "$out"; exit 1
fi
echo "$out"
check "streams continual CNN" "^# CNN [^ ]*yamnet-adapted\.safetensors: int8.*, continual \(hop 32 frames; state per stream [0-9.]+ MB\)"
check "streams continual warm-up" "after start-up and 2\.[0-9] s of warm-up"
# 2 streams x 2 s at 100 frames/s: 12 or 13 blocks of 32 frames each, a token a block
check "streams continual tokens" "^  (12|13) CNN tokens, [0-9.]+ ms of CPU per token"
if ! out=$("$cony" bench streams --streams 1 --seconds 1 --precision float \
    --transformer "$models/transformer.safetensors" 2>&1); then
  echo "FAIL bench streams --precision float exited non-zero:"; echo "$out"; exit 1
fi
check "streams --precision float CNN" "^# CNN [^ ]*models/audio/yamnet-adapted\.safetensors: float"
for bad in "--streams 0" "--seconds 0.5" "--precision half" "--mode sometimes" \
    "--mode continual --stride 25"; do
  if out=$("$cony" bench streams --seconds 1 $bad --transformer "$models/transformer.safetensors" 2>&1); then
    echo "FAIL bench streams $bad: exit 0"; fail=1
  else
    echo "ok bench streams $bad refused: $out"
  fi
done
exit $fail
