#!/usr/bin/env bash
# Smoke test of `cony bench attention` with several windows, variants and vcc budgets:
# every requested row is printed with numbers, the error table has every approximating
# variant, the CSV has the same rows, and bad lists are refused by name. (Speed itself
# is measured in bench/RESULTS.md, never asserted here.)
#   test_bench_attention.sh CONY
set -uo pipefail
cony=${1:?usage: test_bench_attention.sh CONY}
fail=0
csv=$(mktemp)
trap 'rm -f "$csv"' EXIT
check() {  # check NAME REGEX: the bench output has a line matching REGEX
  if ! grep -Eq -- "$2" <<<"$out"; then echo "FAIL $1: no line matching /$2/"; fail=1; else echo "ok $1"; fi
}

if ! out=$("$cony" bench attention --windows 16,40 --variants continual,cony-fixed,vcc,regular \
    --vcc-budgets 4,8 --dim 16 --heads 2 --landmarks 2 --budget 0.01 --single-only \
    --error-windows 16 --error-steps 8 --csv "$csv" 2>&1); then
  echo "FAIL bench attention exited non-zero:"; echo "$out"; exit 1
fi
echo "$out"
num='[0-9]+(\.[0-9]+)?'
for n in 16 40; do
  for v in continual cony-fixed "vcc r=4" "vcc r=8" regular; do
    check "n=$n $v" "^\| $n \| \`$v\` \| single \| $num \| $num \| "
  done
done
for v in cony-fixed "vcc r=4" "vcc r=8"; do
  for s in random smooth; do
    check "error $s $v" "^\| 16 \| $s \| \`$v\` \| [0-9.e+-]+ \|$"
  done
done
if [ "$(grep -c '^time,' "$csv")" != 10 ] || [ "$(grep -c '^error,' "$csv")" != 6 ]; then
  echo "FAIL csv: expected 10 time rows and 6 error rows"; cat "$csv"; fail=1
else
  echo "ok csv"
fi

# windows shorter than the 3 rows of q, k, v (a buffer of n·d once overflowed)
if ! out=$("$cony" bench attention --windows 1,2 --variants continual,regular --dim 16 --heads 2 \
    --landmarks 2 --budget 0.01 --single-only 2>&1); then
  echo "FAIL bench attention --windows 1,2 exited non-zero:"; echo "$out"; fail=1
else
  check "n=1 continual" "^\| 1 \| \`continual\` \| single \| $num \| "
  check "n=2 regular" "^\| 2 \| \`regular\` \| single \| $num \| "
fi

if out=$("$cony" bench attention --windows 16,x 2>&1); then
  echo "FAIL bad --windows: exit 0"; fail=1
else
  check "bad --windows named" "--windows: 'x'"
fi
if out=$("$cony" bench attention --variants continual,softmax 2>&1); then
  echo "FAIL bad --variants: exit 0"; fail=1
else
  check "bad --variants named" "unknown variant 'softmax'"
fi
if out=$("$cony" bench attention --windows 16 --tokens /nonexistent/tokens.npy 2>&1); then
  echo "FAIL missing --tokens: exit 0"; fail=1
else
  check "missing --tokens named" "/nonexistent/tokens.npy"
fi
exit $fail
