#!/usr/bin/env bash
# scripts/run.sh as the README's first command: its stdout is result lines only
# ("    0.98 s  speech                   0.873"), the setup and build chatter goes to
# stderr. Runs run.sh on a 3 s tone when the build tree under test is SOURCE_ROOT/build
# (run.sh builds there; elsewhere it would start a second full build: skipped).
#   test_run_stdout.sh SOURCE_ROOT BUILD_ROOT
set -uo pipefail
root=${1:?usage: test_run_stdout.sh SOURCE_ROOT BUILD_ROOT}
build=${2:?}
. "$(dirname "$0")/../tap.sh"

bash "$root/scripts/setup.sh" --runtime >"$tmp/out" 2>"$tmp/err"
if [ ! -s "$tmp/out" ] && grep -q '^setup: ' "$tmp/err"; then
  ok "setup.sh: nothing on stdout, '$(head -1 "$tmp/err")' on stderr"
else
  not_ok "setup.sh wrote to stdout: $(head -3 "$tmp/out" | tr '\n' '|')"
fi

if [ "$(cd "$build" && pwd -P)" != "$(cd "$root" && pwd -P)/build" ]; then
  ok "run.sh stdout # SKIP the build tree is not $root/build"
  tap_done
fi
gst-launch-1.0 -q audiotestsrc num-buffers=30 samplesperbuffer=1600 wave=sine freq=440 \
  ! audio/x-raw,rate=16000,channels=1 ! wavenc ! filesink location="$tmp/tone.wav"
timeout 120 bash "$root/scripts/run.sh" "$tmp/tone.wav" >"$tmp/out" 2>"$tmp/err"
rc=$?
lines=$(wc -l <"$tmp/out")
other=$(grep -cvE '^ +[0-9]+\.[0-9]{2} s  [^ ]+ +[0-9]\.[0-9]{3}$' "$tmp/out")
if [ "$rc" = 0 ] && [ "$lines" -ge 5 ] && [ "$other" = 0 ]; then
  ok "run.sh FILE: status 0, $lines result lines and nothing else on stdout"
else
  not_ok "run.sh FILE: status $rc, $lines lines, $other not results"
  grep -vE '^ +[0-9]+\.[0-9]{2} s  ' "$tmp/out" | head -5 | sed 's/^/# stdout: /'
  tail -5 "$tmp/err" | sed 's/^/# stderr: /'
fi
tap_done
