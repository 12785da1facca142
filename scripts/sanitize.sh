#!/usr/bin/env bash
# Builds build-asan (AddressSanitizer + UndefinedBehaviorSanitizer) and runs the libcony
# and gst suites in it: the gtest programs and the GstHarness tests with leak detection,
# then the gst-launch-1.0 / Python pipeline tests with the sanitizer runtime preloaded
# (those programs are not instrumented; the plugin they load is). With --ci (what
# scripts/test.sh runs) only the first two parts, the libcony and GstHarness tests, with
# their results in build-asan/meson-logs/sanitize-*.json for test.sh's count. Extra
# arguments go to `meson test`.
#
#   scripts/sanitize.sh [--ci] [MESON_TEST_ARGUMENTS...]
set -euo pipefail
source "$(dirname "$0")/../pipelines/help.sh"
cd "$(dirname "$0")/.."
ci=0
if [ "${1:-}" = --ci ]; then
  ci=1
  shift
fi
[ -f build-asan/build.ninja ] ||
  meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false --buildtype=debugoptimized
ninja -C build-asan -j 2 >/dev/null || ninja -C build-asan -j 1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# gst-plugin-scanner is not instrumented and cannot load the instrumented plugin: load it
# in the test process instead
export GST_REGISTRY_FORK=no
rm -f build-asan/tests/registry-*.bin   # a registry written by a forked scan lists the plugin as broken
# libcony's programs, then the GstHarness programs; these need the slow unwinder so that
# the suppression of GLib's own allocation (tests/lsan.supp) sees the whole stack
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0
status=0
ASAN_OPTIONS=detect_leaks=1 meson test -C build-asan --num-processes 2 --print-errorlogs \
  --logbase sanitize-libcony --suite libcony "$@" || status=1
# conymqttsink's test exists where meson found libmosquitto. grep reads a here-string:
# piped, `grep -q` may exit before meson has written the list, and with pipefail meson's
# SIGPIPE made the test drop out of the run now and then
mqtt=()
listed=$(meson test -C build-asan --list 2>/dev/null)
grep -q '/ gst_conymqttsink$' <<<"$listed" && mqtt=(gst_conymqttsink)
ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 meson test -C build-asan --num-processes 2 \
  --print-errorlogs --logbase sanitize-gst \
  gst_conymel gst_conyvggish gst_conyframeembed gst_conytransformer gst_conyresults gst_cycles \
  gst_shared_cnn gst_conyfuse gst_conylisten "${mqtt[@]}" "$@" || status=1
[ $ci = 1 ] && exit $status
LD_PRELOAD=$(cc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 \
  meson test -C build-asan --num-processes 1 gst_pipeline gst_pipeline_transformer \
  video_pipeline video_patches_pipeline video_heldout default-audio-model conyjson_pipeline av_pipeline \
  "$@" || status=1
exit $status
