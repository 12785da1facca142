#!/usr/bin/env bash
# Sets up, builds and runs every test; the last line is "N passed, N failed".
# Without arguments it also runs the hardening checks, counted in the same line: the
# clang build (build-clang/), the libcony and GstHarness tests under ASan + UBSan + LSan
# (scripts/sanitize.sh --ci, build-asan/), the shared-CNN thread test and 4 concurrent
# pipelines under TSan (build-tsan/) and each fuzz harness for 60 s
# (tests/fuzz/run.sh, build-fuzz/; CONY_FUZZ_SECONDS changes it). CONY_HARDENING=0 skips
# them. Also without arguments: the arm64 cross build and its tests under qemu-user
# (scripts/cross-arm64.sh --test; CONY_ARM64=0 skips it). Arguments go to `meson test`
# for the normal suite only.
#
#   scripts/test.sh [MESON_TEST_ARGUMENTS...]   e.g. --suite libcony, or a test's name
set -uo pipefail
source "$(dirname "$0")/../pipelines/help.sh"
cd "$(dirname "$0")/.."

bash scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }
bash scripts/build.sh || { echo "0 passed, 1 failed"; exit 1; }

meson test -C build --num-processes 2 --print-errorlogs "$@"
status=$?
logs=(build/meson-logs/testlog.json)
extra_failed=0

# hardening STEP COMMAND...: runs one hardening step; a failure counts once more when
# the step left no test log to count (it failed before running its tests)
hardening () {
  local step=$1 log=$2
  shift 2
  rm -f "$log"
  echo "== $step"
  if ! "$@"; then
    status=1
    [ -f "$log" ] || { echo "FAIL $step (no test results)"; extra_failed=$((extra_failed + 1)); }
  fi
  [ -f "$log" ] && logs+=("$log")
}

if [ $# -eq 0 ] && [ "${CONY_HARDENING:-1}" != 0 ]; then
  clang_build () {
    [ -f build-clang/build.ninja ] || CC=clang meson setup build-clang >/dev/null || return 1
    ninja -C build-clang -j 2 >/dev/null || ninja -C build-clang -j 1 | tail -20
    local rc=${PIPESTATUS[0]}
    echo "{\"name\": \"clang-build\", \"result\": \"$([ "$rc" = 0 ] && echo OK || echo FAIL)\"}" \
      >build-clang/clang-build.json
    [ "$rc" = 0 ]
  }
  hardening "clang build" build-clang/clang-build.json clang_build
  rm -f build-asan/meson-logs/sanitize-gst.json
  hardening "sanitizers: libcony" build-asan/meson-logs/sanitize-libcony.json \
    bash scripts/sanitize.sh --ci
  [ -f build-asan/meson-logs/sanitize-gst.json ] && logs+=(build-asan/meson-logs/sanitize-gst.json)
  # The shared CNN weights under ThreadSanitizer (clang: gcc's target_clones resolvers
  # crash under TSan); GLib's slice allocator would look racy to it.
  tsan_shared_cnn () {
    [ -f build-tsan/build.ninja ] || CC=clang meson setup build-tsan -Db_sanitize=thread \
      -Db_lundef=false --buildtype=debugoptimized >/dev/null || return 1
    ninja -C build-tsan -j 2 tests/libcony/test_cnn_shared gst/libgstcony.so \
      tests/elements/test_gst_concurrent \
      >/dev/null || return 1
    # gst_concurrent: 4 pipelines at once with GLib's locks annotated (tests/elements/tsan_glib.c)
    # and reports inside GLib/GStreamer suppressed (tests/tsan.supp, set by its test env)
    G_SLICE=always-malloc TSAN_OPTIONS=halt_on_error=1 OPENBLAS_NUM_THREADS=1 \
      meson test -C build-tsan --no-rebuild --print-errorlogs --logbase tsan cnn_shared \
      gst_concurrent
  }
  hardening "thread sanitizer: shared CNN, concurrent pipelines" build-tsan/meson-logs/tsan.json \
    tsan_shared_cnn
  hardening "fuzz smoke" build-fuzz/meson-logs/fuzz.json \
    env CONY_FUZZ_JOBS=2 bash tests/fuzz/run.sh "${CONY_FUZZ_SECONDS:-60}"
fi

# The arm64 job (issue 58): the cross build (scripts/cross-arm64.sh, build-arm64/) and the
# libcony and GstHarness tests under qemu-user (scripts/test-arm64.sh), counted in the same
# line; CONY_ARM64=0 skips it.
if [ $# -eq 0 ] && [ "${CONY_ARM64:-1}" != 0 ]; then
  hardening "arm64: cross build, tests under qemu-user" build-arm64/meson-logs/arm64.json \
    bash scripts/cross-arm64.sh --test
fi

# Count individual test cases (TAP subtests where a test speaks TAP).
/usr/bin/python3 - "$extra_failed" "${logs[@]}" <<'PY'
import json, re, sys
passed = skipped = 0
failed = int(sys.argv[1])
tap = re.compile(r"^(not ok|ok) \d+(.*)$", re.M)
lines = [l for path in sys.argv[2:] for l in open(path)]
for line in lines:
    if not line.strip():
        continue
    t = json.loads(line)
    res = t.get("result", "")
    cases = tap.findall(t.get("stdout") or "")
    if cases:  # a TAP test: count its cases; a crash after them is one more failure
        for status, rest in cases:
            if "# SKIP" in rest:
                skipped += 1
            elif status == "ok" or "# TODO" in rest:
                passed += 1
            else:
                failed += 1
        if res not in ("OK", "EXPECTEDFAIL", "SKIP") and not any(s == "not ok" for s, _ in cases):
            failed += 1
    elif res in ("OK", "EXPECTEDFAIL"):
        passed += 1
    elif res == "SKIP":
        skipped += 1
    else:
        failed += 1
print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
PY
exit $status
