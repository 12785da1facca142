#!/usr/bin/env bash
# Packs this build's benchmark binaries for another x86-64 Linux machine that lacks the
# build's libraries (GLib, OpenBLAS, FFmpeg, GStreamer): bench/cpu_kind.sh then runs there
# from a checkout of the same commit, without building.
#
#   bench/carry.sh OUT.tar.xz
#
# OUT holds b/cony, b/cony-bench, b/test_int8, b/test_mobilenet and b/lib/ (every shared
# library they load, except the C library's own, which the other machine's must be at
# least as new as this one's). There, from the checkout:
#
#   tar -xJf OUT.tar.xz -C /tmp && LD_LIBRARY_PATH=/tmp/b/lib \
#     bench/cpu_kind.sh YAMNET_INT8 ORT_DIR /tmp/b
#
# (python3 -c "import tarfile; tarfile.open('OUT.tar.xz').extractall('/tmp')" where tar
# has no xz). About 18 MB.
set -eu
cd "$(dirname "$0")/.."
usage() { sed -n '/^#   bench\/carry.sh/,/^set -eu/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
case ${1:-} in -h|--help) usage; exit 0 ;; esac
[ $# -eq 1 ] || { usage >&2; exit 2; }
out=$(realpath -m "$1")
bins=(build/tools/cony build/tools/cony-bench build/tests/libcony/test_int8
      build/tests/libcony/test_mobilenet)
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "carry: $b is not built (bash scripts/build.sh)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/b/lib"
cp "${bins[@]}" "$tmp/b/"
# name => path of every library the binaries load, but the C library's own
ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  grep -vE '^(libc|libm|libpthread|libdl|librt|ld-linux[^ ]*)\.so' |
  while read -r name path; do cp -L "$path" "$tmp/b/lib/$name"; done
tar -C "$tmp" -cf - b | xz -3 -T2 >"$out"
echo "carry: $out ($(du -h "$out" | cut -f1); $(ls "$tmp/b/lib" | wc -l) libraries)"
