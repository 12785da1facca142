#!/usr/bin/env bash
# Issue 59's figures on one machine, for bench/RESULTS.md's "current figures" of its CPU
# kind: what the CPU is (lscpu: the kernels libcony picks follow its flags), the integer
# kernels' exactness there (test_int8, test_mobilenet: every kernel set the CPU has
# against the portable one and the golden scores), `cony bench int8` (each pointwise
# layer's share of the measured peak of every kernel set), libcony against ONNX Runtime
# (bench/ort_compare.py, rounds alternated) and the exact attention step at long windows
# against PyTorch's KV cache (bench/torch_compare.py attention).
#
#   bench/cpu_kind.sh YAMNET_INT8 ORT_DIR [BIN_DIR]
#
# YAMNET_INT8: YAMNet with its .tflite's `quantization` metadata (RESULTS.md, "int8");
# ORT_DIR: as ort_compare.py's --ort-dir ("python": this Python's onnxruntime module);
# BIN_DIR: a folder holding cony, cony-bench, test_int8 and test_mobilenet (another
# machine's copy, bench/carry.sh; default: this build). Each part prints as it ends; a part that fails
# is reported and the others still run.
set -u
cd "$(dirname "$0")/.."
usage() { sed -n '/^#   bench\/cpu_kind.sh/,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
case ${1:-} in -h|--help) usage; exit 0 ;; esac
[ $# -ge 2 ] || { usage >&2; exit 2; }
yamnet=$1 ort=$2 bin=${3:-build}
cony=$bin/tools/cony tests=$bin/tests/libcony
[ -x "$bin/cony" ] && cony=$bin/cony tests=$bin   # a flat folder of the binaries
[ -f "$yamnet" ] || { echo "cpu_kind: no YAMNet int8 file $yamnet" >&2; exit 2; }
[ -x "$cony" ] || { echo "cpu_kind: no cony at $cony" >&2; exit 2; }
export CONY_SOURCE_ROOT=$PWD OPENBLAS_NUM_THREADS=1
python=${PYTHON:-python3}
status=0
part() {   # part NAME COMMAND...: runs it, says how it ended
  echo "== $1 ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
  shift
  "$@" || { echo "== FAILED (exit $?): $*"; status=1; }
}
echo "== $(date -u) $(nproc) CPUs"
lscpu | grep -E '^(Model name|CPU family|Model|Thread|Core|Socket|L1d|L2|L3|Hypervisor)' || true
echo "flags: $(grep -m1 -o -w -E 'avx2|avx512f|avx512bw|avx512vl|avx512_vnni|avx_vnni|amx_int8|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
part "test_int8" "$tests/test_int8" --tap
part "test_mobilenet" "$tests/test_mobilenet" --tap
part "cony bench int8" "$cony" bench int8 -m "$yamnet" -n 100 -r 5
part "ort_compare" "$python" bench/ort_compare.py --ort-dir "$ort" --yamnet-int8 "$yamnet" \
  --cony "$cony" --rounds 5
part "torch_compare attention" "$python" bench/torch_compare.py attention --cony "$cony" \
  --windows 120,4096 --rounds 3 --torch-steps 300
exit $status
