#!/usr/bin/env bash
# Runs one libFuzzer harness for $CONY_FUZZ_SECONDS (default 60) seconds:
#   fuzz_one.sh HARNESS NAME SOURCE_ROOT
# Seeds: tests/fuzz/seeds/NAME, tests/fuzz/regressions/NAME and the project's own small
# files of that format; the growing corpus and any reproducer live in
# build-fuzz/fuzz/NAME/. A crash, leak, sanitizer report or timeout fails, naming the
# reproducer and the command that replays it. Called by `meson test --suite fuzz`.
set -uo pipefail
harness=$(realpath "$1") name=$2 src=$3
secs=${CONY_FUZZ_SECONDS:-60}
work=$(dirname "$harness")/../../fuzz/$name
mkdir -p "$work/corpus" "$work/artifacts"
work=$(cd "$work" && pwd)
rm -rf "$work/project-seeds" && mkdir -p "$work/project-seeds"

# The project's own files of this format, small ones only (the fuzzer mutates bytes).
seed_files () {
  case $name in
    npy) find "$src/tests/golden" -name '*.npy' -size -8k ;;
    safetensors) find "$src/tests/golden" -name '*.safetensors' -size -16k ;;
    model) find "$src/tests/golden/model" -name '*.safetensors' -size -16k ;;
    cnn) find "$src/tests/golden/cnn" "$src/tests/golden/imagecnn" "$src/tests/golden/mobilenet" -name '*.safetensors' -size -64k ;;
    labels) find "$src/models" -name 'labels*.txt' ;;
  esac
}
i=0
while read -r f; do
  [ -n "$f" ] && ln -sf "$f" "$work/project-seeds/$((i++))-$(basename "$f")"
done < <(seed_files)
if [ "$name" = model_config ]; then  # the configs inside the golden models
  /usr/bin/python3 - "$src/tests/golden/model" "$work/project-seeds" <<'PY'
import json, pathlib, struct, sys
for p in sorted(pathlib.Path(sys.argv[1]).glob("*.safetensors")):
    b = p.read_bytes()
    n = struct.unpack("<Q", b[:8])[0]
    cfg = json.loads(b[8:8 + n]).get("__metadata__", {}).get("config")
    if cfg:
        (pathlib.Path(sys.argv[2]) / (p.stem + ".json")).write_text(cfg)
PY
fi

dict=()
[ -f "$src/tests/fuzz/$name.dict" ] && dict=(-dict="$src/tests/fuzz/$name.dict")
rm -f "$work"/artifacts/*
log=$work/last-run.log
dirs=("$work/corpus" "$work/project-seeds")
for d in "$src/tests/fuzz/seeds/$name" "$src/tests/fuzz/regressions/$name"; do
  [ -d "$d" ] && dirs+=("$d")
done
nice -n 5 "$harness" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2560 -malloc_limit_mb=2048 \
  -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/artifacts/" "${dict[@]}" \
  "${dirs[@]}" >"$log" 2>&1
rc=$?
grep -E '^#[0-9]+[[:space:]]+DONE|^stat::number_of_executed_units|^stat::peak_rss_mb' "$log"
echo "fuzz $name: $(ls "$work/corpus" | wc -l) corpus inputs"
if [ $rc -ne 0 ] || [ -n "$(ls -A "$work/artifacts")" ]; then
  tail -n 60 "$log"
  for r in "$work"/artifacts/*; do
    [ -e "$r" ] || continue
    echo "fuzz $name: FAILED, reproducer: $r"
    echo "  replay: $harness $r    (copy it to tests/fuzz/regressions/$name/ once fixed)"
  done
  echo "fuzz $name: FAILED (exit $rc), full log: $log"
  exit 1
fi
echo "fuzz $name: ok, ${secs} s"
