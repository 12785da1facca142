#!/usr/bin/env bash
# Builds the libFuzzer harnesses into build-fuzz/ (clang, ASan + UBSan, leak detection)
# and runs each for SECONDS (default 60), one after the other:
#   tests/fuzz/run.sh [SECONDS] [NAME...]      e.g. tests/fuzz/run.sh 600 (the long run)
# NAME: npy wav safetensors model model_config cnn labels image fusion cnn_quant
# mobilenet (default all). A finding fails
# the run and prints the reproducer (see fuzz_one.sh); CONY_FUZZ_JOBS=2 runs two at once.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
[ $# -gt 0 ] && shift
all=(npy wav safetensors model model_config cnn labels image fusion cnn_quant mobilenet)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${all[@]}")

if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
    --buildtype=debugoptimized \
    "-Dc_args=['-fsanitize=fuzzer-no-link','-fno-sanitize-recover=all']" >/dev/null
fi
targets=$(printf "tests/fuzz/fuzz_%s " "${names[@]}")
ninja -C build-fuzz $targets >/dev/null || ninja -C build-fuzz -j 1 $targets
export CONY_FUZZ_SECONDS=$secs
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=detect_leaks=1
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0
meson test -C build-fuzz --no-rebuild --suite fuzz --num-processes "${CONY_FUZZ_JOBS:-1}" \
  --print-errorlogs --logbase fuzz $(printf 'fuzz_%s ' "${names[@]}")
