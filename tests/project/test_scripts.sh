#!/usr/bin/env bash
# The scripts a newcomer runs first, with fake programs on PATH where the real ones would
# change the machine:
#  - scripts/build.sh prints meson's own error when `meson setup` fails, and ninja's when
#    the build fails, and exits 1;
#  - scripts/setup.sh counts a package as installed only for the native architecture (or
#    "all"): a foreign-architecture copy is missing, one installed for two is present;
#  - every script in pipelines/ and scripts/ answers --help and -h with its usage (exit 0),
#    and one that needs an argument prints a usage line without it (exit 2, not bash's
#    "line 15: 1: usage");
#  - an installed copy of the scripts whose plugin GStreamer does not find says where it
#    is (GST_PLUGIN_PATH).
#   test_scripts.sh SOURCE_ROOT PLUGIN_DIR
set -uo pipefail
root=${1:?usage: test_scripts.sh SOURCE_ROOT PLUGIN_DIR}
plugin_dir=${2:?}
. "$(dirname "$0")/../tap.sh"
# The fakes below go to $tmp/bin: never anywhere else (an empty $tmp once put a fake
# apt-get in /bin, which is /usr/bin on Debian).
case $tmp in /*/*) [ -d "$tmp" ] ;; *) false ;; esac || { echo "Bail out! scratch '$tmp'"; exit 1; }

# A copy of the two scripts build.sh needs in a tree of its own: build/ is created there.
mkdir -p "$tmp/tree/scripts" "$tmp/tree/pipelines" "$tmp/bin"
cp "$root/scripts/build.sh" "$root/scripts/setup.sh" "$tmp/tree/scripts/"
cp "$root/pipelines/help.sh" "$tmp/tree/pipelines/"

# build.sh, meson setup failing as it does without a -dev package (its error on stdout).
cat >"$tmp/bin/meson" <<'EOF'
#!/bin/sh
echo "The Meson build system"
echo "meson.build:12:0: ERROR: Dependency \"gstreamer-audio-1.0\" not found, tried pkgconfig"
exit 1
EOF
chmod +x "$tmp/bin/meson"
PATH=$tmp/bin:$PATH bash "$tmp/tree/scripts/build.sh" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 1 ] && grep -q 'Dependency "gstreamer-audio-1.0" not found' "$tmp/err" \
   && grep -q "meson setup failed" "$tmp/err"; then
  ok "build.sh shows meson's error: $(grep ERROR "$tmp/err")"
else
  not_ok "build.sh with a failing meson setup: exit $rc"; sed 's/^/# /' "$tmp/err"
fi

# build.sh, the compiler failing under ninja.
cat >"$tmp/bin/meson" <<'EOF'
#!/bin/sh
mkdir -p "$2" && touch "$2/build.ninja"
EOF
cat >"$tmp/bin/ninja" <<'EOF'
#!/bin/sh
echo "../src/audio/mel.c:12:3: error: expected ';' before 'return'"
echo "ninja: build stopped: subcommand failed."
exit 1
EOF
chmod +x "$tmp/bin/meson" "$tmp/bin/ninja"
rm -rf "$tmp/tree/build"
PATH=$tmp/bin:$PATH bash "$tmp/tree/scripts/build.sh" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 1 ] && grep -q "src/audio/mel.c:12:3: error" "$tmp/err" && grep -q "ninja -C build failed" "$tmp/err"; then
  ok "build.sh shows the compiler's error and exits 1"
else
  not_ok "build.sh with a failing ninja: exit $rc"; sed 's/^/# /' "$tmp/err"
fi
[ -s "$tmp/out" ] && not_ok "build.sh wrote to stdout (run.sh's results only): $(head -2 "$tmp/out")"

# setup.sh on an amd64 machine with arm64 as a foreign architecture: libglib2.0-dev is
# installed for both, libopenblas-dev only for arm64, meson is "all", the rest amd64.
rm -f "$tmp/bin/meson" "$tmp/bin/ninja"
sed -n '/^RUNTIME=(/,/^)/p' "$root/scripts/setup.sh" | sed '1d;$d;s/#.*//' | tr ' ' '\n' \
  | grep . | sed 's/$/:amd64/' >"$tmp/db"
sed -i 's/^meson:amd64$/meson:all/;s/^libopenblas-dev:amd64$/libopenblas-dev:arm64/' "$tmp/db"
echo "libglib2.0-dev:arm64" >>"$tmp/db"
cat >"$tmp/bin/dpkg" <<'EOF'
#!/bin/sh
[ "$1" = --print-architecture ] && echo amd64
EOF
# The fake prints the format once per installed NAME:ARCH a pattern matches (a bare name
# matches every architecture, as dpkg-query's own does), ${Status} filled in.
cat >"$tmp/bin/dpkg-query" <<'EOF'
#!/bin/bash
fmt=${2#-f=}
shift 2
found=1
for p in "$@"; do
  case $p in *:*) pat="^$p\$" ;; *) pat="^$p:" ;; esac
  for ((i = $(grep -c "$pat" "$FAKE_DPKG_DB"); i > 0; i--)); do
    printf "${fmt//'${Status}'/install ok installed}"; found=0
  done
done
exit $found
EOF
cat >"$tmp/bin/apt-get" <<'EOF'
#!/bin/sh
echo "$@" >>"$FAKE_APT_LOG"
EOF
printf '#!/bin/sh\nexec "$@"\n' >"$tmp/bin/sudo"
chmod +x "$tmp/bin/"*
PATH=$tmp/bin:$PATH FAKE_DPKG_DB=$tmp/db FAKE_APT_LOG=$tmp/apt-calls \
  bash "$tmp/tree/scripts/setup.sh" --runtime >"$tmp/out" 2>"$tmp/err"
rc=$?
installs=$(grep '^install' "$tmp/apt-calls" 2>/dev/null | tr ' ' '\n' | grep -v '^-' | grep -vx install | xargs)
if [ $rc = 0 ] && [ "$installs" = "libopenblas-dev" ]; then
  ok "setup.sh installs only the package present for a foreign architecture alone ($installs)"
else
  not_ok "setup.sh --runtime: exit $rc, installed '$installs' (expected libopenblas-dev)"
  sed 's/^/# /' "$tmp/err"
fi

# --help, -h and no arguments, script by script (libraries, without "#!", are not run).
needs_args=" file.sh av_file.sh video_file.sh record_events.sh devices.py has_audio.py timeline.py "
for s in "$root"/pipelines/* "$root"/scripts/*; do
  head -n1 "$s" | grep -q '^#!' || continue
  name=$(basename "$s")
  run=(bash "$s")
  case $name in *.py) run=(/usr/bin/python3 "$s") ;; esac
  for h in --help -h; do
    out=$("${run[@]}" "$h" 2>&1)
    rc=$?
    if [ $rc = 0 ] && grep -q "$name" <<<"$out"; then
      ok "$name $h: exit 0, $(wc -l <<<"$out") lines"
    else
      not_ok "$name $h: exit $rc"; head -3 <<<"$out" | sed 's/^/# /'
    fi
  done
  case $needs_args in *" $name "*) ;; *) continue ;; esac
  out=$("${run[@]}" </dev/null 2>&1)
  rc=$?
  if [ $rc = 2 ] && grep -q "^usage: .*$name" <<<"$out" && ! grep -q "line [0-9]*:" <<<"$out"; then
    ok "$name without arguments: exit 2, '$(head -n1 <<<"$out")'"
  else
    not_ok "$name without arguments: exit $rc"; head -3 <<<"$out" | sed 's/^/# /'
  fi
done
out=$(bash "$root/pipelines/av_camera.sh" --audio-source 2>&1)
rc=$?
if [ $rc = 2 ] && grep -q "^usage: pipelines/av_camera.sh" <<<"$out"; then
  ok "av_camera.sh --audio-source without its value: exit 2 with the usage"
else
  not_ok "av_camera.sh --audio-source: exit $rc"; head -3 <<<"$out" | sed 's/^/# /'
fi

# An installed copy (PREFIX/share/gst-cony/pipelines, the plugin in
# PREFIX/lib/ARCH/gstreamer-1.0) run without GST_PLUGIN_PATH: the hint names the directory.
prefix=$tmp/prefix
mkdir -p "$prefix/share/gst-cony" "$prefix/lib/x86_64-linux-gnu/gstreamer-1.0"
cp -r "$root/pipelines" "$prefix/share/gst-cony/"
ln -s "$root/models" "$prefix/share/gst-cony/models"
cp "$plugin_dir/libgstcony.so" "$prefix/lib/x86_64-linux-gnu/gstreamer-1.0/"
gst-launch-1.0 -q audiotestsrc num-buffers=20 ! audio/x-raw,rate=16000,channels=1 ! wavenc \
  ! filesink location="$tmp/a.wav" >/dev/null 2>&1
env -u GST_PLUGIN_PATH GST_REGISTRY="$tmp/registry.bin" CONY_AUDIO_PROBE=off \
  bash "$prefix/share/gst-cony/pipelines/file.sh" "$tmp/a.wav" >"$tmp/out" 2>"$tmp/err"
rc=$?
want="export GST_PLUGIN_PATH=$prefix/lib/x86_64-linux-gnu/gstreamer-1.0"
if [ $rc = 1 ] && grep -qF "$want" "$tmp/err"; then
  ok "installed file.sh without GST_PLUGIN_PATH: '$(grep -o 'GStreamer has no cony.*look' "$tmp/err")'"
else
  not_ok "installed file.sh without GST_PLUGIN_PATH: exit $rc"; sed 's/^/# /' "$tmp/err"
fi

tap_done
