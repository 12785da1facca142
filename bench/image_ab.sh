#!/usr/bin/env bash
# Before / after of the image CNN in one process (bench/image_ab.c): libcony of git
# revision BASE (default main) and of this worktree's build/, each linked into a shared
# object, run frame by frame alternately on the same frames, so that both see the same
# load. Usage: bench/image_ab.sh [FRAMES [BASE [MODEL]]]  (run scripts/build.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
FRAMES=${1:-40} BASE=${2:-main} MODEL=${3:-models/imagenet/mobilenet_v2.safetensors}
OUT=out/image_ab
rev=$(git rev-parse --short "$BASE")
mkdir -p $OUT
if [ ! -f $OUT/base-$rev.so ]; then
  rm -rf $OUT/src && mkdir -p $OUT/src
  git archive "$rev" | tar -x -C $OUT/src
  meson setup $OUT/src/build $OUT/src >/dev/null
  ninja -C $OUT/src/build src/libcony.a >/dev/null
fi
LIBS=$(pkg-config --libs glib-2.0 json-glib-1.0 openblas lapacke libavutil libswresample)
so () { # libcony.a -> a shared object that binds its own symbols
  cc -shared -Wl,-Bsymbolic -o "$2" -Wl,--whole-archive "$1" -Wl,--no-whole-archive $LIBS -lm
}
[ -f $OUT/base-$rev.so ] || so $OUT/src/build/src/libcony.a $OUT/base-$rev.so
so build/src/libcony.a $OUT/new.so
cc -O2 -o $OUT/image_ab bench/image_ab.c $(pkg-config --cflags --libs glib-2.0) -ldl
echo "== $(date -u) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); A = $BASE ($rev), B = build/"
OPENBLAS_NUM_THREADS=1 $OUT/image_ab $OUT/base-$rev.so $OUT/new.so "$MODEL" "$FRAMES"
echo "== load $(cut -d' ' -f1-3 /proc/loadavg)"
