#!/usr/bin/env bash
# The last step of a file (issue #57): the tail window padded at EOS reaches past the
# end of an Ogg file, whose segment stops at its duration. pipelines/file.sh must print
# its end as the file's end (5.30 s for 5.3 s of audio), not fail on stream_end =
# NONE (18446744073709551615: "printf: 0.-00000001: invalid number"); lib.sh's printer
# shows a NONE time as "?" instead of failing. $1 = source root.
set -uo pipefail
root=${1:?usage: test_file_tail.sh SOURCE_ROOT}
for e in vorbisenc oggmux; do
  gst-inspect-1.0 "$e" >/dev/null 2>&1 || { echo "1..0 # SKIP no $e"; exit 0; }
done
source "$(dirname "$0")/../tap.sh"

gst-launch-1.0 -q audiotestsrc num-buffers=53 samplesperbuffer=1600 wave=pink-noise \
  ! audio/x-raw,rate=16000,channels=1 ! audioconvert ! vorbisenc ! oggmux \
  ! filesink location="$tmp/clip.ogg"
if timeout 120 "$root/pipelines/file.sh" "$tmp/clip.ogg" >"$tmp/out" 2>"$tmp/err"; then
  last=$(awk '{print $1}' "$tmp/out" | tail -1)
  if [ "$last" = "5.30" ] && ! grep -q "invalid number" "$tmp/err"; then
    ok "file.sh: the padded last step ends at the file's end ($last s)"
  else
    not_ok "file.sh: last step at '$last' s, expected 5.30"
    tail -n 3 "$tmp/out" "$tmp/err" | sed 's/^/# /'
  fi
else
  not_ok "file.sh failed"; tail -5 "$tmp/err" | sed 's/^/# /'
fi

source "$root/pipelines/lib.sh"
msg () { # a gst-launch-1.0 -m line of conytransformer's step message
  echo "Got message #1 from element \"t\" (element): conytransformer, stream_end=(guint64)$1, label=(string)$2, score=(float)$3;"
}
got=$( { msg 1250000000 '"speech"' 0.5; msg 18446744073709551615 music 0.25; } | cony_format)
want=$(printf '%s\n%s' "     1.25 s  speech                   0.500" \
  "        ? s  music                    0.250")
if [ "$got" = "$want" ]; then ok "lib.sh prints a NONE time as ?"
else not_ok "lib.sh on NONE: $got"; fi
tap_done
