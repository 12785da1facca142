#!/usr/bin/env bash
# Pipeline test of multi-token steps (CoNy paper IV-C, the patches of one frame):
#   videotestsrc ! videoconvert ! videoscale ! conyframeembed patches-x=2 patches-y=2
#   ! conytransformer (a model with tokens_per_step = 4) ! fakesink      (gst-launch-1.0 -m)
# Models: tests/golden/imagecnn/gap.safetensors (22x20 RGB tiles -> 5 floats, so 44x40
# frames) and tests/golden/model/k4_b1_cony_d5.safetensors (d_in 5, n 8, k 4).
# Checks: one message per frame (step i at the frame's PTS, the frame's duration); the
# same frames' tokens dumped with filesink and run through `cony classify` give the same
# class and confidences at every step; a 3x1 grid (3 tokens per frame) is refused with an
# error naming tokens_per_step.
# Needs GST_PLUGIN_PATH (build tree's gst/); $1 = source root, $2 = the cony tool.
set -uo pipefail
root=${1:?usage: test_video_patches_pipeline.sh SOURCE_ROOT CONY_TOOL}
cony=${2:?usage: test_video_patches_pipeline.sh SOURCE_ROOT CONY_TOOL}
launch=$(command -v gst-launch-1.0) || { echo "gst-launch-1.0 not found: skipping"; exit 77; }
python=/usr/bin/python3
"$python" -c "import numpy" 2>/dev/null || { echo "no numpy for $python: skipping"; exit 77; }
cnn=$root/tests/golden/imagecnn/gap.safetensors
clf=$root/tests/golden/model/k4_b1_cony_d5.safetensors
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
frames=12
src="videotestsrc pattern=ball num-buffers=$frames ! video/x-raw,width=64,height=48,framerate=25/1 ! videoconvert ! videoscale"
embed="conyframeembed model=$cnn patches-x=2 patches-y=2"

# shellcheck disable=SC2086
if ! "$launch" -m $src ! $embed ! conytransformer model="$clf" ! fakesink > "$tmp/msgs.txt" 2>&1; then
  echo "FAIL: the patch pipeline failed"; tail -20 "$tmp/msgs.txt"; exit 1
fi
# shellcheck disable=SC2086
if ! "$launch" -q $src ! $embed ! filesink location="$tmp/tokens.raw" > "$tmp/dump.txt" 2>&1; then
  echo "FAIL: the token dump pipeline failed"; tail -20 "$tmp/dump.txt"; exit 1
fi
"$python" - "$tmp" "$frames" <<'EOF' || exit 1
import re, sys
import numpy as np
tmp, frames = sys.argv[1], int(sys.argv[2])
tok = np.fromfile(f"{tmp}/tokens.raw", dtype="<f4")
if tok.size != frames * 4 * 5:
    sys.exit(f"FAIL: {tok.size} floats dumped, expected {frames} frames x 4 patches x 5")
np.save(f"{tmp}/tokens.npy", tok.reshape(frames * 4, 5))
steps = []
for line in open(f"{tmp}/msgs.txt"):
    if "(element): conytransformer," not in line:
        continue
    g = lambda k, t: re.search(rf"\b{k}=\({t}\)([^,;]+)", line).group(1)
    scores = [float(v) for v in re.search(r"scores=\(float\)< ([^>]*) >", line).group(1).split(",")]
    # pts: the frame's; start + duration: the end of the input covered = the frame's end
    pts = int(g("pts", "guint64"))
    steps.append((int(g("step", "guint64")), pts,
                  int(g("start", "guint64")) + int(g("duration", "guint64")) - pts,
                  int(g("class_id", "int")), scores))
if len(steps) != frames:
    sys.exit(f"FAIL: {len(steps)} messages for {frames} frames (expected one per frame)")
for i, (step, ts, dur, cls, _) in enumerate(steps):
    if step != i or ts != i * 40_000_000 or dur != 40_000_000:
        sys.exit(f"FAIL: message {i}: step {step} at {ts} ns for {dur} ns, expected step {i} "
                 f"at {i * 40_000_000} ns for 40000000 ns")
np.save(f"{tmp}/steps.npy", np.array([[c] + s for _, _, _, c, s in steps]))
print(f"ok: {frames} frames -> {len(steps)} steps at the frames' times")
EOF
if ! "$cony" classify --model "$clf" "$tmp/tokens.npy" -o "$tmp/logits.npy" > "$tmp/cls.txt" 2>&1; then
  echo "FAIL: cony classify"; cat "$tmp/cls.txt"; exit 1
fi
"$python" - "$tmp" <<'EOF' || exit 1
import sys
import numpy as np
tmp = sys.argv[1]
logits = np.load(f"{tmp}/logits.npy").astype(np.float64)
got = np.load(f"{tmp}/steps.npy")
if logits.shape[0] != got.shape[0]:
    sys.exit(f"FAIL: cony classify gave {logits.shape[0]} steps, the pipeline {got.shape[0]}")
p = np.exp(logits - logits.max(1, keepdims=True))
p /= p.sum(1, keepdims=True)
err = np.abs(p - got[:, 1:]).max()
if (p.argmax(1) != got[:, 0]).any() or err > 1e-5:
    sys.exit(f"FAIL: pipeline and cony classify differ (max |dp| = {err:.3g})")
print(f"ok: {len(p)} steps equal to cony classify on the dumped tokens (max |dp| = {err:.2g})")
EOF

# 3 tokens per frame for a 4-token-step model: refused, naming the field
# shellcheck source=tests/expect_error.sh
source "$(dirname "$0")/../expect_error.sh"
fail=0
# shellcheck disable=SC2086
expect_error grid-3x1 "tokens_per_step = 4" -q $src ! conyframeembed model="$cnn" patches-x=3 \
  patches-y=1 ! conytransformer model="$clf" ! fakesink
[ "$fail" = 0 ] || exit 1
