#!/usr/bin/env bash
# The main job: sets up, builds, and classifies an audio clip with the shipped default
# model through GStreamer (conymel preset=yamnet ! conyvggish model=models/audio/
# yamnet-adapted.safetensors output=embedding ! conytransformer model=models/audio/
# transformer.safetensors: pipelines/file.sh takes the CNN and its settings from the
# classifier's config), printing one line per step: time, label, confidence.
#
#   scripts/run.sh            # a generated demo clip (speech, then music, then an alarm)
#   scripts/run.sh FILE|URI   # any media file GStreamer can decode
set -euo pipefail
source "$(dirname "$0")/../pipelines/help.sh"
cd "$(dirname "$0")/.."
# Setup and build chatter goes to stderr: stdout is the results only.
bash scripts/setup.sh --runtime >&2
bash scripts/build.sh >&2
[ $# -le 1 ] || cony_usage
input=${1:-}
if [ -z "$input" ]; then
  bash scripts/make_demo_clip.sh out/demo.wav >&2
  input=out/demo.wav
  echo "# out/demo.wav: speech 0-7 s, music 7-15 s, alarm 15-20 s" >&2
fi
exec bash pipelines/file.sh "$input"
