#!/usr/bin/env bash
# What a newcomer meets first:
#  - docs/elements.md has a section for every element of the plugin, naming every property
#    gst-inspect-1.0 lists (GstObject's name/parent aside);
#  - conytransformer is classed Filter/Analyzer (it serves audio and video);
#  - every option of every `cony` command reads in the C locale (no '?' for non-ASCII);
#  - pipelines/file.sh on a file without audio says "no audio track" and exits 4;
#  - an image CNN in the audio chain says so and names conyframeembed; a classifier that
#    does not load is exit 1; the CNN's scores into a classifier trained on its embedding
#    say "set output=embedding";
#  - overlay.py, when textoverlay is missing, names the Debian package that has it.
# Needs GST_PLUGIN_PATH (the build tree's gst/).
#   test_newcomer.sh SOURCE_ROOT CONY_TOOL
set -uo pipefail
root=${1:?usage: test_newcomer.sh SOURCE_ROOT CONY_TOOL}
cony=${2:?}
command -v gst-inspect-1.0 >/dev/null || { echo "1..0 # SKIP gst-inspect-1.0 not found"; exit 77; }
. "$(dirname "$0")/../tap.sh"

# The text of "## ELEMENT" in docs/elements.md, up to the next "## ".
doc_section () {
  awk -v h="## $1" '$0 == h { on = 1; next } /^## / { on = 0 } on' "$root/docs/elements.md"
}

elements=$(gst-inspect-1.0 cony | sed -nE 's/^  (cony[a-z0-9]+): .*/\1/p')
[ -n "$elements" ] || not_ok "gst-inspect-1.0 cony lists no elements"
for e in $elements; do
  section=$(doc_section "$e")
  if [ -z "$section" ]; then
    not_ok "docs/elements.md has no '## $e' section"; continue
  fi
  props=$(gst-inspect-1.0 "$e" | sed -nE 's/^  ([a-z][a-z0-9-]*) +: .*/\1/p' | grep -vx 'name\|parent')
  missing=""
  for p in $props; do
    grep -qF "\`$p\`" <<<"$section" || missing+=" $p"
  done
  if [ -n "$missing" ]; then
    not_ok "docs/elements.md '## $e' lacks properties:$missing"
  else
    ok "docs/elements.md '## $e' names all $(echo "$props" | wc -w) properties"
  fi
done

klass=$(gst-inspect-1.0 conytransformer | sed -nE 's/^ +Klass +//p')
if [ "$klass" = "Filter/Analyzer" ]; then ok "conytransformer Klass $klass"
else not_ok "conytransformer Klass '$klass', expected Filter/Analyzer"; fi

# Option lines of every command's --help in the C locale: GLib turns non-ASCII into '?'.
bad=""
for c in $("$cony" 2>&1 | sed -nE 's/^  ([a-z]+) .*/\1/p'); do
  bad+=$(LC_ALL=C "$cony" "$c" --help 2>&1 | grep -E '^ +-' | grep -F '?' | sed "s/^/$c: /")
done
if [ -z "$bad" ]; then ok "cony COMMAND --help options read in the C locale"
else not_ok "options with non-ASCII text: $bad"; fi

# A video-only file.
if gst-launch-1.0 -q videotestsrc num-buffers=10 ! jpegenc ! matroskamux \
     ! filesink location="$tmp/video.mkv" >/dev/null 2>&1; then
  bash "$root/pipelines/file.sh" "$tmp/video.mkv" "$root/tests/golden/cnn/small.safetensors" \
    "$root/tests/golden/transformer/small.safetensors" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" = 4 ] && grep -q "no audio track" "$tmp/err" && [ "$(wc -l <"$tmp/err")" = 1 ]; then
    ok "file.sh on a video-only file: exit 4, '$(cat "$tmp/err")'"
  else
    not_ok "file.sh on a video-only file: exit $rc"; sed 's/^/# /' "$tmp/err" | head -5
  fi
else
  ok "file.sh on a video-only file # SKIP no jpegenc/matroskamux to make one"
fi

# Errors that name the right fix, with pipelines/README.md's status 1 for a pipeline error:
# an image CNN in the audio chain, a classifier as the CNN, the CNN's scores into a
# classifier trained on its embedding.
gst-launch-1.0 -q audiotestsrc num-buffers=20 ! audio/x-raw,rate=16000,channels=1 ! wavenc \
  ! filesink location="$tmp/a.wav" >/dev/null 2>&1
models=$root/models
bash "$root/pipelines/file.sh" "$tmp/a.wav" "$models/imagenet/mobilenet_v2.safetensors" \
  >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc = 1 ] && grep -q "is an image model" "$tmp/err" && grep -q "use conyframeembed" "$tmp/err" \
   && ! grep -q "preset=vggish\|no cony elements" "$tmp/err"; then
  ok "file.sh with an image CNN: exit 1, '$(grep -o '[^ ]* is an image model.*' "$tmp/err" | head -n1)'"
else
  not_ok "file.sh with an image CNN: exit $rc"; sed 's/^/# /' "$tmp/err" | head -8
fi
bash "$root/pipelines/file.sh" "$tmp/a.wav" "$models/audio/yamnet-adapted.safetensors" \
  "$models/imagenet/mobilenet_v2.safetensors" >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc = 1 ] && grep -q "Could not load the model" "$tmp/err"; then
  ok "file.sh with a CNN as the classifier: exit 1 (not gst-launch-1.0's 255)"
else
  not_ok "file.sh with a CNN as the classifier: exit $rc"; sed 's/^/# /' "$tmp/err" | head -8
fi
gst-launch-1.0 filesrc location="$tmp/a.wav" ! wavparse ! audioconvert ! audioresample \
  ! conymel preset=yamnet ! conyvggish model="$models/audio/yamnet-adapted.safetensors" output=scores \
  ! conytransformer model="$models/audio/transformer.safetensors" ! fakesink >"$tmp/out" 2>&1
if grep -q "set output=embedding on the CNN element" "$tmp/out"; then
  ok "conyvggish output=scores into the shipped classifier: 'set output=embedding'"
else
  not_ok "conyvggish output=scores into the shipped classifier"; grep -i error "$tmp/out" | head -3
fi

# overlay.py's hint when textoverlay is missing.
if gst-inspect-1.0 textoverlay >/dev/null 2>&1; then
  ok "overlay.py's missing-textoverlay hint # SKIP textoverlay is installed"
elif ! /usr/bin/python3 -c 'import gi, numpy' 2>/dev/null; then
  ok "overlay.py's missing-textoverlay hint # SKIP needs python3-gi and numpy"
else
  /usr/bin/python3 "$root/pipelines/overlay.py" test --num-buffers 3 --quiet \
    --output "$tmp/o.mkv" >/dev/null 2>"$tmp/err"
  if grep -q "apt-get install gstreamer1.0-x" "$tmp/err"; then
    ok "overlay.py names gstreamer1.0-x when textoverlay is missing"
  else
    not_ok "overlay.py's hint"; sed 's/^/# /' "$tmp/err" | head -5
  fi
fi

tap_done
