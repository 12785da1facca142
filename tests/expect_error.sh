# shellcheck shell=bash disable=SC2154,SC2034
# Sourced by the pipeline tests. expect_error NAME TEXT PIPELINE...: gst-launch-1.0 ($launch)
# refuses PIPELINE cleanly (no crash) with TEXT in its output; otherwise it says FAIL and sets
# fail=1. gst-launch-1.0 1.22 can hang after an error posted from a streaming thread before
# its main loop runs (its bus sync handler quits a loop not yet running, which
# g_main_loop_run() then ignores; 1 run in 10-15 here, with any element), so the run is
# bounded and a run stopped by the timeout after printing TEXT passes.
expect_error () {
  local name=$1 text=$2 out rc; shift 2
  out=$(timeout 20 "$launch" "$@" 2>&1); rc=$?
  if [ $rc -eq 124 ] && grep -q -- "$text" <<<"$out"; then
    echo "ok $name: refused ('$text'; gst-launch-1.0 hung after the error and was stopped)"
  elif [ $rc -eq 0 ]; then
    echo "FAIL $name: the pipeline ran"; fail=1
  elif [ $rc -gt 128 ] && [ $rc -lt 255 ]; then
    echo "FAIL $name: crashed (exit $rc)"; echo "$out" | tail -5; fail=1
  elif ! grep -q -- "$text" <<<"$out"; then
    echo "FAIL $name: no '$text' in the error"; echo "$out" | tail -5; fail=1
  else
    echo "ok $name: refused ('$text')"
  fi
}
