#!/usr/bin/python3
"""What overlay.py draws on the picture: the label's first name and the score (not the
whole ImageNet synonym list), wrapped to the frame so that nothing is cut at its edge:

  - overlay_text() of every label of the shipped ImageNet MobileNet is its first synonym
    and the score;
  - render_text() of each of them, for frames 96, 160, 320 and 640 pixels wide, is no
    wider than the frame less its margins and draws every dot of every character (the
    dots counted against the font's);
  - overlay.sh --bitmap-font on a 96-pixel-wide video of photographs writes its video and
    prints the labels (the drawing callback wraps for that frame).

    test_overlay_label.py SOURCE_ROOT   (GST_PLUGIN_PATH / GST_REGISTRY from meson)
TAP output."""

import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = sys.argv[1]
sys.path.insert(0, os.path.join(ROOT, "pipelines"))
try:
    import numpy  # noqa: F401
    import overlay
except ImportError as e:
    print(f"1..0 # SKIP {e}")
    sys.exit(77)

results = []


def check(ok, what):
    results.append((bool(ok), what))


with open(os.path.join(ROOT, "models", "imagenet", "mobilenet_v2.safetensors"), "rb") as f:
    labels = json.loads(json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))["__metadata__"]["labels"])

texts = {label: overlay.overlay_text(label, 0.876) for label in labels}
bad = [(label, t) for label, t in texts.items() if t != label.split(",")[0].strip() + " 0.88"]
check(not bad, f"overlay_text: the first synonym and the score for all {len(labels)} labels "
      f"(koala: '{texts.get('koala, koala bear, kangaroo bear, native bear, Phascolarctos cinereus')}')"
      + (f"; wrong: {bad[:3]}" if bad else ""))


def dots(text):
    return sum(overlay.FONT.get(ch, overlay.FONT[" "]).count("#") for ch in text.lower())


for frame in (96, 160, 320, 640):
    too_wide, lost, lines = [], [], 0
    for text in texts.values():
        img = overlay.render_text(text, max_width=frame - 16)
        lit = int((img[..., 0] == 255).sum())
        scale = round((lit / dots(text)) ** 0.5) if dots(text) else 1
        if img.shape[1] > frame - 16:
            too_wide.append((text, img.shape[1]))
        if lit != dots(text) * scale * scale:
            lost.append(text)
        lines = max(lines, (img.shape[0] // scale - 2 + 1) // 8)
    check(not too_wide and not lost,
          f"render_text for a {frame}-pixel frame: every label within {frame - 16} pixels, "
          f"every dot drawn (up to {lines} lines)"
          + (f"; too wide: {too_wide[:2]}" if too_wide else "") + (f"; cut: {lost[:2]}" if lost else ""))

with tempfile.TemporaryDirectory() as tmp:
    small = os.path.join(tmp, "small.mkv")
    subprocess.run(["gst-launch-1.0", "-q", "filesrc",
                    f"location={os.path.join(ROOT, 'tests', 'golden', 'imagenet', 'photos.webm')}",
                    "!", "decodebin", "!", "videoconvert", "!", "videoscale", "!",
                    "video/x-raw,width=96,height=96", "!", "jpegenc", "!", "matroskamux", "!",
                    "filesink", f"location={small}"], check=True)
    out = os.path.join(tmp, "out.mkv")
    r = subprocess.run(["bash", os.path.join(ROOT, "pipelines", "overlay.sh"), small, "--bitmap-font",
                        "--num-buffers", "15", "--output", out],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, CONY_VIDEO_CLASSIFIER="none"))
    printed = [line for line in r.stdout.splitlines() if " s  " in line]
    check(r.returncode == 0 and os.path.getsize(out) > 0 and len(printed) >= 10,
          f"overlay.sh --bitmap-font on a 96-pixel-wide video: exit {r.returncode}, "
          f"{len(printed)} labels printed ({printed[0].split(' s  ')[1].rsplit(' ', 1)[0].strip() if printed else '-'})"
          + ("" if r.returncode == 0 else f"; {r.stderr[-300:]!r}"))

for i, (ok, what) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} {what}")
print(f"1..{len(results)}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
