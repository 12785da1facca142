#!/usr/bin/env bash
# The arm64 test subset under qemu-user, on the cross build of scripts/cross-arm64.sh
# (run that first, or `scripts/cross-arm64.sh --test`). Results in
# build-arm64/meson-logs/arm64.json (scripts/test.sh counts them); arguments go to
# `meson test` instead of the subset (e.g. a test's name).
#
#   scripts/test-arm64.sh [MESON_TEST_ARGUMENTS...]
#
# What runs and why (issue 58; the whole job, install and build included, is meant to fit
# in 15 minutes on 2 cores: from nothing it took 10 min 47 s on a 2-core machine shared
# with six other builds, about 5 of them download and build):
#   libcony   the whole suite: the arithmetic, mel, model, attention, fusion, image and
#             CNN goldens (C equals PyTorch or the references, with x86's tolerances),
#             the shared CNN, the fuzz reproducers, and int8, where the NEON kernels (sdot
#             and plain) equal the portable ones bit for bit and the int8 YAMNet and
#             MobileNet-v2 match ArmNN and the integer reference on both paths
#   gst       the GstHarness element tests, with the arm64 GStreamer plugins from the
#             sysroot; not gst_cycles, which bounds the process's RSS growth: under qemu
#             RSS includes qemu's own translation cache (12.7 MB over its rounds)
# Not run: pipelines, tools, training and project tests (they start host programs,
# gst-launch-1.0 or Python, which cannot load arm64 code).
set -uo pipefail
source "$(dirname "$0")/../pipelines/help.sh"
cd "$(dirname "$0")/.."
sysroot=$PWD/build-arm64-sysroot
[ -f build-arm64/build.ninja ] || { echo "test-arm64: no build-arm64/ (scripts/cross-arm64.sh)" >&2; exit 1; }

# OpenBLAS's threads hang under qemu-user; GStreamer's plugins from the sysroot, scanned
# in the process (the scanner is an arm64 program the emulated process cannot start).
export OPENBLAS_NUM_THREADS=1
export GST_PLUGIN_SYSTEM_PATH=$sysroot/usr/lib/aarch64-linux-gnu/gstreamer-1.0
export GST_REGISTRY_FORK=no

GST=(gst_conymel gst_conyvggish gst_conyframeembed gst_conytransformer gst_frontend
  gst_conyresults gst_pairing gst_shared_cnn gst_conyfuse gst_imagenet gst_conymqttsink
  gst_concurrent)

rm -f build-arm64/meson-logs/arm64.json
echo "== arm64: libcony and GstHarness tests under qemu-user"
mapfile -t LIBCONY < <(meson test -C build-arm64 --list --suite libcony 2>/dev/null \
  | sed -n 's|^gst-cony:libcony / ||p')
args=("$@")
[ $# -gt 0 ] || args=("${LIBCONY[@]}" "${GST[@]}")
# three times the tests' own timeouts: attention's long runs take 220-300 s emulated on a
# busy 2-core machine (its own limit is 300 s)
nice -n 10 meson test -C build-arm64 --no-rebuild --num-processes 2 --print-errorlogs \
  --timeout-multiplier 3 \
  --logbase arm64 "${args[@]}"
