#!/usr/bin/env bash
# Builds build-asan (AddressSanitizer + UndefinedBehaviorSanitizer) and runs the libcony
# and gst suites in it: the gtest programs and the GstHarness tests with leak detection,
# then the gst-launch-1.0 / Python pipeline tests with the sanitizer runtime preloaded
# (those programs are not instrumented; the plugin they load is). Not part of CI: run it
# now and then, and before a release. Extra arguments go to `meson test`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build-asan/build.ninja ] ||
  meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false --buildtype=debugoptimized
ninja -C build-asan
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# gst-plugin-scanner is not instrumented and cannot load the instrumented plugin: load it
# in the test process instead
export GST_REGISTRY_FORK=no
rm -f build-asan/tests/registry-*.bin   # a registry written by a forked scan lists the plugin as broken
# libcony's programs, then the GstHarness programs; these need the slow unwinder so that
# the suppression of GLib's own allocation (tests/lsan.supp) sees the whole stack
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0
ASAN_OPTIONS=detect_leaks=1 meson test -C build-asan --num-processes 1 --suite libcony "$@"
ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 meson test -C build-asan --num-processes 1 \
  gst_conymel gst_conyvggish gst_conyframeembed gst_conytransformer gst_conyresults "$@"
LD_PRELOAD=$(cc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 \
  meson test -C build-asan --num-processes 1 gst_pipeline gst_pipeline_transformer \
  video_pipeline video_patches_pipeline video_heldout default-audio-model conyjson_pipeline "$@"
