#!/usr/bin/env bash
# `meson install` into a temporary DESTDIR, then use only the installed files:
#  - the plugin is in LIBDIR/gstreamer-1.0 and gst-inspect-1.0 finds conymel there
#    (GST_PLUGIN_PATH), linked against the installed libgstcony-1.0;
#  - a small C application (tests/project/install_app/read_meta.c) builds with
#    `pkg-config gstreamer-cony-1.0` against the installed headers and library, runs
#    the installed plugin and reads the classification meta off the buffers;
#  - `cony` is in BINDIR and `cony info` loads the models installed into DATADIR.
#   test_install.sh BUILD_ROOT SOURCE_ROOT
set -uo pipefail
build=${1:?usage: test_install.sh BUILD_ROOT SOURCE_ROOT}
root=${2:?}
command -v gst-inspect-1.0 >/dev/null || { echo "1..0 # SKIP gst-inspect-1.0 not found"; exit 77; }
command -v pkg-config >/dev/null || { echo "1..0 # SKIP pkg-config not found"; exit 77; }
. "$(dirname "$0")/../tap.sh"
dest=$tmp

if ! meson install -C "$build" --destdir "$dest" --no-rebuild >"$dest/install.log" 2>&1; then
  not_ok "meson install"; tail -20 "$dest/install.log" | sed 's/^/# /'
  tap_done
fi
ok "meson install --destdir"

# The configured directories (absolute; DESTDIR goes in front).
opt () {
  meson introspect --buildoptions "$build" | /usr/bin/python3 -c \
    "import json, sys; print({o['name']: o['value'] for o in json.load(sys.stdin)}['$1'])"
}
prefix=$(opt prefix)
libdir=$prefix/$(opt libdir)
case $(opt libdir) in /*) libdir=$(opt libdir) ;; esac
bindir=$prefix/$(opt bindir)
datadir=$prefix/$(opt datadir)
plugin=$dest$libdir/gstreamer-1.0/libgstcony.so
export LD_LIBRARY_PATH=$dest$libdir   # a real prefix is on the linker's path instead
for f in "$plugin" "$dest$libdir/libgstcony-1.0.so" "$dest$libdir/pkgconfig/gstreamer-cony-1.0.pc" \
         "$dest$prefix/include/gstreamer-1.0/gst/cony/gstconymeta.h" \
         "$dest$prefix/include/gstreamer-1.0/gst/cony/gstconytokens.h" "$dest$bindir/cony" \
         "$dest$datadir/gst-cony/models/audio/transformer.safetensors"; do
  [ -e "$f" ] || missing+=" ${f#"$dest"}"
done
if [ -z "${missing:-}" ]; then ok "plugin, library, headers, .pc, cony, models under $prefix"
else not_ok "not installed:$missing"; fi

# The installed plugin alone (a registry of its own, nothing from the build tree).
out=$(GST_PLUGIN_PATH=$dest$libdir/gstreamer-1.0 GST_REGISTRY=$dest/registry.bin \
      gst-inspect-1.0 conymel 2>&1)
if grep -q "Filename *$plugin" <<<"$out" && grep -q "Log-mel spectrogram" <<<"$out" \
   && grep -q "Binary package *gst-cony" <<<"$out"; then
  ok "gst-inspect-1.0 conymel: the installed plugin ($(echo "$out" | grep 'Origin URL' | xargs))"
else
  not_ok "gst-inspect-1.0 conymel"; echo "$out" | head -20 | sed 's/^/# /'
fi
# (grep reads a here-string: with pipefail, `ldd | grep -q` fails whenever grep exits
# before ldd has written its last line and ldd dies of SIGPIPE)
if grep -q "libgstcony-1.0.so.0 => $dest$libdir/" <<<"$(ldd "$plugin")"; then
  ok "the plugin links the installed libgstcony-1.0"
else
  not_ok "the plugin's libgstcony-1.0"; ldd "$plugin" | sed 's/^/# /'
fi

# A C application built with pkg-config against the installed files only.
# The .pc names the real prefix; a copy points into DESTDIR (PKG_CONFIG_SYSROOT_DIR would
# move gstreamer-1.0's own paths too).
mkdir -p "$dest/pc"
sed "s|^prefix=|prefix=$dest|" "$dest$libdir/pkgconfig/gstreamer-cony-1.0.pc" \
  >"$dest/pc/gstreamer-cony-1.0.pc"
export PKG_CONFIG_PATH=$dest/pc
# shellcheck disable=SC2046
if ! cc -o "$dest/read_meta" "$root/tests/project/install_app/read_meta.c" \
     $(pkg-config --cflags --libs gstreamer-cony-1.0) 2>"$dest/cc.log"; then
  not_ok "cc read_meta.c \$(pkg-config gstreamer-cony-1.0)"; sed 's/^/# /' "$dest/cc.log"
elif ! out=$(GST_PLUGIN_PATH=$dest$libdir/gstreamer-1.0 GST_REGISTRY=$dest/registry.bin \
        "$dest/read_meta" "$root/tests/golden/cnn/small.safetensors" \
        "$root/tests/golden/transformer/small.safetensors" 2>&1); then
  not_ok "read_meta: no classification meta read"; echo "$out" | tail -10 | sed 's/^/# /'
else
  ok "read_meta (pkg-config gstreamer-cony-1.0): $(echo "$out" | wc -l) steps, first '$(echo "$out" | head -1)'"
fi

# cony from bindir on the installed default model.
if out=$("$dest$bindir/cony" info "$dest$datadir/gst-cony/models/audio/transformer.safetensors" 2>&1) \
   && grep -qi "label" <<<"$out"; then
  ok "cony info on the installed audio model"
else
  not_ok "cony info on the installed model"; echo "$out" | tail -5 | sed 's/^/# /'
fi

# Relative model names: the installed cony and plugin look in DATADIR/gst-cony/models
# (compiled in: the configured prefix, not DESTDIR) and then in $CONY_MODEL_PATH, which
# points into DESTDIR here; run from a directory with no models/ in it.
models=$dest$datadir/gst-cony/models
if grep -qx "$datadir/gst-cony/models" <<<"$("$dest$bindir/cony" info --paths)"; then
  ok "cony info --paths names $datadir/gst-cony/models"
else
  not_ok "cony info --paths"; "$dest$bindir/cony" info --paths | sed 's/^/# /'
fi
if out=$(cd "$dest" && CONY_MODEL_PATH=$models "$dest$bindir/cony" info audio/transformer.safetensors 2>&1) \
   && grep -q "^model: *$models/audio/transformer.safetensors" <<<"$out"; then
  ok "cony info audio/transformer.safetensors (a relative name): $models/audio/"
else
  not_ok "cony info on a relative model name"; echo "$out" | tail -5 | sed 's/^/# /'
fi
gst-launch-1.0 -q audiotestsrc num-buffers=20 samplesperbuffer=1600 wave=pink-noise \
  ! audio/x-raw,rate=16000,channels=1 ! wavenc ! filesink location="$dest/clip.wav"
if out=$(cd "$dest" && CONY_MODEL_PATH=$models GST_PLUGIN_PATH=$dest$libdir/gstreamer-1.0 \
        GST_REGISTRY=$dest/registry.bin gst-launch-1.0 -m filesrc location=clip.wav ! wavparse \
        ! audioconvert ! conymel preset=yamnet \
        ! conyvggish model=audio/yamnet-adapted.safetensors output=embedding \
        ! conytransformer model=audio/transformer.safetensors ! fakesink 2>&1) \
   && steps=$(grep -c "(element): conytransformer, .*label=" <<<"$out") && [ "$steps" -ge 5 ]; then
  ok "installed plugin, model=audio/yamnet-adapted.safetensors model=audio/transformer.safetensors: $steps results"
else
  not_ok "installed plugin on relative model names"; echo "$out" | tail -5 | sed 's/^/# /'
fi
# The installed pipelines/ scripts use the installed models (beside them) and plugin.
if out=$(cd "$dest" && GST_PLUGIN_PATH=$dest$libdir/gstreamer-1.0 GST_REGISTRY=$dest/registry.bin \
        bash "$models/../pipelines/file.sh" clip.wav 2>&1) \
   && steps=$(grep -cE '^ +[0-9.]+ s  [a-z]+ +[01]\.[0-9]{3}$' <<<"$out") && [ "$steps" -ge 5 ]; then
  ok "installed pipelines/file.sh: $steps result lines"
else
  not_ok "installed pipelines/file.sh"; echo "$out" | tail -5 | sed 's/^/# /'
fi

tap_done
