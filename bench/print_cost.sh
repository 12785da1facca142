#!/usr/bin/env bash
# What printing the results costs against computing them: pipelines/file.sh's
# gst-launch-1.0 (the inference, its -m messages written to a file) and its formatting
# stage (pipelines/lib.sh's cony_format, fed the same messages through a pipe as file.sh
# feeds it), each timed by /usr/bin/time in CPU seconds (user + system), ROUNDS rounds
# alternating; then file.sh as a whole. Medians of the rounds.
#
#   bench/print_cost.sh FILE.wav [ROUNDS=5]
set -euo pipefail
file=${1:?usage: bench/print_cost.sh FILE.wav [ROUNDS]}
rounds=${2:-5}
cd "$(dirname "$0")/.."
source pipelines/lib.sh
cony_check_models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# cpu OUT COMMAND...: COMMAND's stdout into OUT; its CPU seconds on stdout
cpu () {
  local out=$1
  shift
  /usr/bin/time -f '%U %S' -o "$tmp/t" "$@" >"$out" 2>/dev/null || true
  awk '{ print $1 + $2 }' "$tmp/t"
}
for ((r = 0; r < rounds; r++)); do
  # shellcheck disable=SC2046
  cpu "$tmp/messages" gst-launch-1.0 -m filesrc location="$file" ! decodebin \
    ! $(cony_chain batch=64) ! fakesink sync=false >>"$tmp/gst"
  cpu /dev/null bash -c 'source pipelines/lib.sh; cat "$1" | cony_format' _ "$tmp/messages" >>"$tmp/format"
  cpu "$tmp/lines" bash pipelines/file.sh "$file" >>"$tmp/whole"
done
median () { sort -n "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "$(grep -c 'element): conytransformer' "$tmp/messages") messages," \
     "$(wc -c <"$tmp/messages") bytes, $(wc -l <"$tmp/lines") lines printed;" \
     "CPU seconds, median of $rounds rounds:"
echo "  gst-launch-1.0 (inference): $(median "$tmp/gst")"
echo "  cony_format (printing):     $(median "$tmp/format")"
echo "  file.sh as a whole:         $(median "$tmp/whole")"
