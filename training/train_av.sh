#!/usr/bin/env bash
# Rebuilds the fused audio-video model (models/av/av.safetensors) end to end:
#
#   training/train_av.sh                       # the shipped recipe (run 25's; on today's
#                                              # sources it is run 31, the shipped file)
#   training/train_av.sh -- [train_av.py args] # one train_av.py call with these args
#   training/train_av.sh --grid                # issue 54's grid of the shipped model
#                                              # (models/av/EXPERIMENTS.md, rule 11; each
#                                              # stream's continual tokens, run 25's audio
#                                              # model of seed 1)
#
#   1. the photographs and recordings: `apt-get download` of the Debian bookworm packages
#      training/conytrain/av/sources.py names for the photo and sound sets the call uses
#      (set 1 of each, 0.56 GB, unless a `--` call names `--photo-set` or `--sound-set`;
#      both sets 2: 1.1 GB; needs the Debian archive),
#      unpacked with dpkg-deb -x into out/av-debs/x/ (each package skipped when there),
#   2. the build (build/: libcony, the plugin, `cony`),
#   3. training/train_av.py (models/av/EXPERIMENTS.md, rules 7, 9, 10 and 14):
#      - run 11: sound clips and camera shots, their per-window YAMNet and MobileNet-v2
#        embeddings (out/av5/tokens-*.npz), and the single-sense models (seeds 1-5; the
#        video one through the cross-fitted read-out); its fused models are trained too,
#        unused;
#      - the continual caches (out/av5-continual/): the same clips' continual YAMNet
#        tokens at the fused step rate, the same video tokens;
#      - run 25: run 11's audio model recipe on them, then run 18's fused recipe: each
#        seed starting from that seed's audio model, the video through the read-out
#        (penalty chosen out of fold on the wider grid), only pictures contradicting,
#        AdamW 3e-4; the card's table (out/av5-continual/eval-run25.json) and the
#        export of seed 1 to models/av/.
# About 15 min of data and 15 min of training on the shared 2-core machine.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
fetch() {   # fetch DIR PACKAGE...: each package once, unpacked into DIR/x
  local debs=$1 p
  shift
  mkdir -p "$debs/pkgs" "$debs/x"
  for p in "$@"; do   # new ones are added to an existing unpacked tree
    ls "$debs/pkgs/${p}"_*.deb >/dev/null 2>&1 && continue
    (cd "$debs/pkgs" && apt-get download "$p")
    dpkg-deb -x "$debs/pkgs/${p}"_*.deb "$debs/x"
  done
}
debs=out/av-debs
# the packages of the sets this call trains on: a `--` call's own --photo-set and --sound-set
if [ "${1:-}" = -- ]; then
  pkgs=$(/usr/bin/python3 training/train_av.py --packages "${@:2}")
else
  pkgs=$(/usr/bin/python3 training/train_av.py --packages)
fi
fetch "$debs" $pkgs
[ -x build/tools/cony ] || bash scripts/build.sh
ninja -C build -j2 >/dev/null
export GST_PLUGIN_PATH=$REPO/build/gst
train=(/usr/bin/python3 training/train_av.py --root "$debs/x")
if [ "${1:-}" = --grid ]; then   # rule 11's grid of the shipped run 25 against its audio model
  fetch out/av-eval-debs $(cd training && /usr/bin/python3 -c \
    'from conytrain.av import evalset; print(" ".join(evalset.PACKAGES))')
  "${train[@]}" --work out/av5 --stages build,evalset
  co=("${train[@]}" --work out/av5-continual --audio-mode continual --seeds 1 --tag run25)
  "${co[@]}" --window-work out/av5 --splits train --stages continual
  "${co[@]}" --kinds audio --stages train
  "${co[@]}" --grid-model models/av/av.safetensors --stages grid
  cd training && exec /usr/bin/python3 -m conytrain.av.evalset ../out/av5-continual/grid-shipped.json
fi
if [ "${1:-}" = -- ]; then
  shift
  exec "${train[@]}" "$@"
fi
seeds=1,2,3,4,5
"${train[@]}" --work out/av5 --seeds $seeds --tag run11 --video-readout 5 --stages build,train
co=("${train[@]}" --work out/av5-continual --audio-mode continual --seeds $seeds --tag run25)
"${co[@]}" --window-work out/av5 --splits train,test --stages continual
"${co[@]}" --kinds audio --stages train
"${co[@]}" --video-readout 5 --readout-penalties 0.001,0.01,0.1,1,10,100 \
  --contra-senses video --start-from-audio --lr 3e-4 --kinds fused --eval-kinds fused,audio \
  --stages train,eval,export
