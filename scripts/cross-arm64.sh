#!/usr/bin/env bash
# Cross-builds libcony, the plugin and `cony` for 64-bit ARM into build-arm64/ (issue 58).
# Idempotent: a second run only rebuilds what changed.
#
#   scripts/cross-arm64.sh          # install what is missing, unpack the sysroot, build
#   scripts/cross-arm64.sh --test   # the same, then the arm64 test subset under qemu-user
#                                   # (scripts/test-arm64.sh; results in
#                                   # build-arm64/meson-logs/testlog-arm64.json)
#
# The native (amd64) packages are never replaced: the cross compiler and qemu-user are
# native packages (apt-get install), while the arm64 libraries are only downloaded
# (`apt-get download`) and unpacked with `dpkg-deb -x` into build-arm64-sysroot/, which the
# cross file (cross/aarch64-linux-gnu.ini) points pkg-config, the linker and qemu at.
# Installing them as arm64 packages would not work: bookworm's amd64 and arm64
# libgstreamer-plugins-base1.0-dev cannot be installed side by side.
set -euo pipefail
source "$(dirname "$0")/../pipelines/help.sh"
cd "$(dirname "$0")/.."
root=$PWD
sysroot=$root/build-arm64-sysroot
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo

case ${1:-} in
  "" | --test) ;;
  *) cony_usage ;;
esac

# The build machine's tools, installed for its own architecture (or "all").
native=$(dpkg --print-architecture)
missing=()
for p in crossbuild-essential-arm64 qemu-user-static; do
  status=$(dpkg-query -W -f='${Status} ${Architecture}\n' "$p" 2>/dev/null || true)
  grep -qxE "install ok installed ($native|all)" <<<"$status" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "cross-arm64: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# The arm64 package index (adding the architecture installs nothing).
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq >&2
fi
if [ -z "$(apt-cache madison libc6:arm64 2>/dev/null)" ]; then
  $SUDO apt-get update -qq >&2
fi

# What to unpack: the arm64 build dependencies (scripts/setup.sh's libraries) and the
# GStreamer plugins the element tests use, with every arm64 package apt would install
# for them (its simulation; native packages it would touch are not ours). Mesa's
# drivers and LLVM are left out: nothing here links or loads them; so are the C library's
# headers and linker scripts (libc6-dev), which the cross toolchain has: its libc.so
# names /lib/... paths the linker would look up outside the sysroot.
WANT=(
  libglib2.0-dev libjson-glib-dev libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
  libopenblas-dev liblapacke-dev libavutil-dev libswresample-dev libmosquitto-dev
  gstreamer1.0-plugins-base gstreamer1.0-plugins-good
)
SKIP='^(libc6-dev|linux-libc-dev|libllvm[0-9]+|libz3-4|libgl1-mesa-dri|libglx-mesa0|libegl-mesa0|pkgconf|pkg-config|pkgconf-bin)$'
mapfile -t debs < <(apt-get -s install --no-install-recommends "${WANT[@]/%/:arm64}" 2>/dev/null \
  | awk '$1 == "Inst" && $2 ~ /:arm64$/ { v = $3; gsub(/[()]/, "", v); sub(/:arm64$/, "", $2);
         print $2 "=" v }' | grep -Ev "${SKIP%\$}=" || true)
if [ ${#debs[@]} -eq 0 ]; then
  echo "cross-arm64: apt cannot resolve the arm64 packages (apt-get -s install ${WANT[*]/%/:arm64})" >&2
  exit 1
fi
mkdir -p "$sysroot/debs"
stamp=$sysroot/unpacked.txt
touch "$stamp"
todo=()
for d in "${debs[@]}"; do
  grep -qxF "$d" "$stamp" || todo+=("$d")
done
if [ ${#todo[@]} -gt 0 ]; then
  echo "cross-arm64: downloading and unpacking ${#todo[@]} arm64 packages into $sysroot" >&2
  (cd "$sysroot/debs" && apt-get download -qq "${todo[@]/=/:arm64=}" 2>&1 \
    | grep -v "unsandboxed as root" >&2 || true)
  for d in "${todo[@]}"; do
    name=${d%%=*} version=${d#*=}
    file=$(ls "$sysroot/debs/${name}_${version//:/%3a}_"*.deb 2>/dev/null | head -1)
    [ -n "$file" ] || { echo "cross-arm64: $name ($version) was not downloaded" >&2; exit 1; }
    dpkg-deb -x "$file" "$sysroot"
    echo "$d" >>"$stamp"
  done
  rm -f "$sysroot"/debs/*.deb
fi

# Absolute symlinks (/lib/ld-linux-aarch64.so.1 -> /lib/aarch64-linux-gnu/...) made
# relative, so they stay inside the sysroot for the linker and for qemu -L.
find "$sysroot" -type l -lname '/*' -print0 | while IFS= read -r -d '' link; do
  ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$sysroot$(readlink "$link")")" "$link"
done
# The links Debian's update-alternatives makes when OpenBLAS is installed (a postinst,
# which dpkg-deb -x does not run): BLAS and LAPACK from OpenBLAS's pthread build.
lib=$sysroot/usr/lib/aarch64-linux-gnu
for so in libblas.so.3 liblapack.so.3 libopenblas.so.0 libblas.so liblapack.so libopenblas.so; do
  [ -e "$lib/openblas-pthread/$so" ] && ln -sfn "openblas-pthread/$so" "$lib/$so"
done
pcs=$lib/openblas-pthread/pkgconfig
ln -sfn "$pcs/openblas.pc" "$lib/pkgconfig/openblas.pc"
ln -sfn "$pcs/blas-openblas.pc" "$lib/pkgconfig/blas.pc"
ln -sfn "$pcs/lapack-openblas.pc" "$lib/pkgconfig/lapack.pc"

# The sysroot's absolute path for the cross file (its `sysroot` constant).
printf "[constants]\nsysroot = '%s'\n" "$sysroot" >"$sysroot/paths.ini"

if [ ! -f build-arm64/build.ninja ]; then
  meson setup build-arm64 --cross-file "$sysroot/paths.ini" \
    --cross-file cross/aarch64-linux-gnu.ini >"$sysroot/setup.log" 2>&1 || {
    tail -30 "$sysroot/setup.log" >&2
    exit 1
  }
fi
nice -n 10 ninja -C build-arm64 -j 2 >&2
echo "cross-arm64: built build-arm64/ (aarch64): $(file -b build-arm64/tools/cony | cut -d, -f1-2)" >&2

if [ "${1:-}" = --test ]; then
  exec bash scripts/test-arm64.sh
fi
