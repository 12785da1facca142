#!/usr/bin/env bash
# Smoke test of `cony bench fusion`: the three rows (join, encoder step, both) with
# numbers for the golden fused model, and an ordinary model refused by name (speed itself
# is recorded in bench/RESULTS.md, never asserted here); `cony info` lists a fused
# model's inputs.
#   test_bench_fusion.sh CONY SOURCE_ROOT
set -uo pipefail
cony=${1:?usage: test_bench_fusion.sh CONY SOURCE_ROOT}
root=${2:?usage: test_bench_fusion.sh CONY SOURCE_ROOT}
fail=0
if ! out=$("$cony" bench fusion "$root/tests/golden/fusion/b2_conyfixed.safetensors" \
    --seconds 0.01 2>&1); then
  echo "FAIL bench fusion exited non-zero:"; echo "$out"; exit 1
fi
for row in "join" "encoder step" "fused step \\(both\\)"; do
  if grep -Eq "^\| $row \| [0-9]+\.[0-9]+ \| [0-9]+\.[0-9]+ \|$" <<<"$out"; then
    echo "ok row $row"
  else
    echo "FAIL no row '$row' with numbers:"; echo "$out"; fail=1
  fi
done
if grep -q "3 inputs (audio 3, video 4, depth 2), d_in 12" <<<"$out"; then
  echo "ok the model line names the inputs"
else
  echo "FAIL model line: $out"; fail=1
fi
out=$("$cony" bench fusion "$root/tests/golden/model/b1_regular.safetensors" 2>&1)
if [ $? != 0 ] && grep -q "b1_regular.safetensors.*not a fused model" <<<"$out"; then
  echo "ok an ordinary model is refused"
else
  echo "FAIL ordinary model: $out"; fail=1
fi
out=$("$cony" info "$root/tests/golden/fusion/av_pipeline.safetensors" 2>&1)
if grep -q "^fusion: *4/1 steps per second over 2 inputs" <<<"$out" \
  && grep -Eq "^  audio +1024 floats at 4/1 per second, stale after 1000 ms, tokens of yamnet.safetensors embedding$" <<<"$out"; then
  echo "ok cony info lists the fused model's inputs"
else
  echo "FAIL cony info: $out"; fail=1
fi
exit $fail
