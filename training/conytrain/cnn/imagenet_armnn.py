#!/usr/bin/python3
"""Independent verification of converted ImageNet MobileNets against ArmNN (issue #40).

  /usr/bin/python3 training/verify_imagenet_armnn.py TEST_DATA_DIR [--photos DIR] \
      [--out tests/golden/imagenet]

TEST_DATA_DIR holds google-coral/test_data's files (fetched, never needed at run time):
mobilenet_v2_1.0_224_quant.tflite, tf2_mobilenet_v2_1.0_224_ptq.tflite,
mobilenet_v1_0.5_160_quant.tflite, imagenet_labels.txt and the test images listed in
IMAGES. --photos adds photographs of our own (the opencv-doc images listed in PHOTOS).

Each image is decoded by GStreamer (gst-launch-1.0: gdkpixbufdec, which reads BMP too), centre-cropped to a
square and scaled to the model's input (videoscale's default bilinear), and written as
a PNG frame; every model then sees exactly those frames (224x224 for MobileNet-v2,
160x160 for MobileNet-v1 0.5). Each .tflite runs on ArmNN's CpuRef backend (Debian's
python3-pyarmnn: uint8/int8 tensors, each layer computed in float on the dequantised
inputs and quantised again) and is converted by convert_tflite.py, whose file runs through
the float64 numpy reference (conytrain/ref/mobilenet.py: libcony's float path) and the
integer numpy reference (conytrain/ref/qmobilenet.py: TFLite's integer arithmetic, which
libcony's integer path equals bit for bit). The golden directory gets:

  frames/NAME.png      the GOLDEN_FRAMES at 224x224 (RGB)
  armnn.npy            (N, 1001) float32 ArmNN's dequantised scores of SHIPPED on them
  ref.npy              (N, 1001) float32 the float64 reference's scores of the converted file
  int8.npy             (N, 1001) float32 the integer reference's dequantised scores
  frames.json          the golden frames' names and top-1 labels, and per model and frame
                       (all of them): ArmNN's, the float reference's and the integer
                       reference's top-1 and the largest score differences from ArmNN

The check (issue #40): the same top-1 as ArmNN on every frame (float and integer), scores
within SCORE_TOLERANCE reported. training/tests/test_imagenet_golden.py and the C tests
read only the committed golden (CI has no ArmNN).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from conytrain import REPO, armnn, safetensors_io
from conytrain.cnn import convert_tflite
from conytrain.ref import mobilenet, qmobilenet

GOLDEN = os.path.join(REPO, "tests", "golden", "imagenet")
SCORE_TOLERANCE = 0.02
MODELS = {"mobilenet_v2_1.0_224_quant": 224, "tf2_mobilenet_v2_1.0_224_ptq": 224,
          "mobilenet_v1_0.5_160_quant": 160}
SHIPPED = "mobilenet_v2_1.0_224_quant"        # models/imagenet/mobilenet_v2.safetensors
# The frames whose golden is committed (small); every frame is compared and reported.
GOLDEN_FRAMES = ("cat", "grace_hopper", "parrot", "baboon")
IMAGES = ("cat.bmp", "bird.bmp", "grace_hopper.bmp", "dragonfly.bmp", "sunflower.bmp",
          "missvickie_potato_chips.bmp", "parrot.jpg", "owl.jpg", "hot_dog.jpg")
PHOTOS = ("apple.jpg", "baboon.jpg", "butterfly.jpg", "orange.jpg", "squirrel_cls.jpg")


def _gst(args):
    subprocess.run(["gst-launch-1.0", "-q"] + args, check=True, stdout=subprocess.DEVNULL)


def make_frame(src, size, out_png):
    """src (any image GStreamer decodes) -> out_png: the centred square, scaled to size."""
    _gst(["filesrc", f"location={src}", "!", "gdkpixbufdec", "!", "videoconvert", "!",
          "aspectratiocrop", "aspect-ratio=1/1", "!", "videoconvert", "!", "videoscale", "!",
          f"video/x-raw,format=RGB,width={size},height={size},pixel-aspect-ratio=1/1", "!",
          "pngenc", "!", "filesink", f"location={out_png}"])


def read_frame(png, size):
    """A PNG frame as (size, size, 3) uint8 RGB (decoded by GStreamer)."""
    with tempfile.NamedTemporaryFile(suffix=".rgb") as raw:
        _gst(["filesrc", f"location={png}", "!", "pngdec", "!", "videoconvert", "!",
              f"video/x-raw,format=RGB,width={size},height={size}", "!", "filesink",
              f"location={raw.name}"])
        data = np.fromfile(raw.name, np.uint8)
    if data.size != size * size * 3:
        raise ValueError(f"{png}: {data.size} bytes of RGB, expected {size}x{size}x3")
    return data.reshape(size, size, 3)


def armnn_scores(tflite, frames):
    """Dequantised scores of the .tflite on ArmNN's CpuRef backend, one row per frame."""
    return np.stack(armnn.run_tflite(tflite, [f[None] for f in frames])).astype(np.float32)


def reference_scores(model_path, frames):
    """Scores of the converted file by the float64 reference, frames as pixels / 255."""
    net = mobilenet.load(model_path)
    return np.stack([mobilenet.forward(net, f.astype(np.float64) / 255.0)[1] for f in frames])


def integer_scores(model_path, frames):
    """Dequantised scores of the converted file by the integer reference."""
    net = qmobilenet.load(model_path)
    rows = []
    for f in frames:
        codes, scale, zero = qmobilenet.forward(net, f.astype(np.float32) / np.float32(255.0))
        rows.append(np.float32(scale) * (codes - zero).astype(np.float32))
    return np.stack(rows)


def convert(tflite, labels, out):
    with open(tflite, "rb") as f:
        raw = f.read()
    tensors, meta, dtypes = convert_tflite.convert(raw, "auto", labels, "none",
                                                   os.path.basename(tflite))
    safetensors_io.save(out, tensors, meta, dtypes=dtypes)


def compare(names, armnn, ref, q, labels):
    """Per-frame rows: name, the three top-1 labels and scores, max |score difference| of
    the float and the integer reference from ArmNN."""
    return [dict(name=n, armnn_top=labels[int(a.argmax())], ref_top=labels[int(r.argmax())],
                 int_top=labels[int(i.argmax())], armnn_score=float(a.max()),
                 ref_score=float(r.max()), int_score=float(i.max()),
                 max_diff=float(np.abs(a.astype(np.float64) - r).max()),
                 int_diff=float(np.abs(a.astype(np.float64) - i).max()))
            for n, a, r, i in zip(names, armnn, ref, q)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("test_data", help="directory with google-coral/test_data's files")
    ap.add_argument("--photos", help="directory with our own photographs (PHOTOS)")
    ap.add_argument("--out", default=GOLDEN, help="golden directory to write")
    args = ap.parse_args(argv)
    sources = [(os.path.splitext(n)[0], os.path.join(args.test_data, n)) for n in IMAGES]
    if args.photos:
        sources += [(os.path.splitext(n)[0], os.path.join(args.photos, n)) for n in PHOTOS]
    names = [n for n, _ in sources]
    labels_path = os.path.join(args.test_data, "imagenet_labels.txt")
    labels = open(labels_path, encoding="utf-8").read().splitlines()
    golden = [names.index(n) for n in GOLDEN_FRAMES]
    summary = {"names": list(GOLDEN_FRAMES), "models": {}}
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for size in sorted(set(MODELS.values())):
            d = os.path.join(tmp, f"frames_{size}")
            os.makedirs(d)
            for n, src in sources:
                make_frame(src, size, os.path.join(d, n + ".png"))
        os.makedirs(os.path.join(args.out, "frames"), exist_ok=True)
        for n in GOLDEN_FRAMES:
            shutil.copy(os.path.join(tmp, "frames_224", n + ".png"),
                        os.path.join(args.out, "frames", n + ".png"))
        for model, size in MODELS.items():
            frames = [read_frame(os.path.join(tmp, f"frames_{size}", n + ".png"), size)
                      for n in names]
            conv = os.path.join(tmp, model + ".safetensors")
            convert(os.path.join(args.test_data, model + ".tflite"), labels_path, conv)
            armnn = armnn_scores(os.path.join(args.test_data, model + ".tflite"), frames)
            ref = reference_scores(conv, frames)
            q = integer_scores(conv, frames)
            if model == SHIPPED:
                np.save(os.path.join(args.out, "armnn.npy"), armnn[golden])
                np.save(os.path.join(args.out, "ref.npy"), ref[golden].astype(np.float32))
                np.save(os.path.join(args.out, "int8.npy"), q[golden])
                summary["top1"] = [labels[int(armnn[i].argmax())] for i in golden]
            rows = compare(names, armnn, ref, q, labels)
            summary["models"][model] = {
                r["name"]: [r["armnn_top"], r["ref_top"], round(r["max_diff"], 4), r["int_top"],
                            round(r["int_diff"], 4)] for r in rows}
            print(f"{model}:")
            for r in rows:
                flag = "" if r["armnn_top"] == r["ref_top"] == r["int_top"] else "   TOP-1 DIFFERS"
                print(f"  {r['name']:28s} ArmNN {r['armnn_top'][:24]:24s} {r['armnn_score']:.3f}"
                      f"   float64 {r['ref_score']:.3f} max|d| {r['max_diff']:.4f}"
                      f"   int8 {r['int_score']:.3f} max|d| {r['int_diff']:.4f}{flag}")
            for kind in ("max_diff", "int_diff"):
                worst = max(r[kind] for r in rows)
                over = sum(r[kind] > SCORE_TOLERANCE for r in rows)
                print(f"  {'float' if kind == 'max_diff' else 'int8'}: {len(rows)} frames, max "
                      f"|score difference| {worst:.4f}, {over} over {SCORE_TOLERANCE}")
            ok &= all(r["armnn_top"] == r["ref_top"] == r["int_top"] for r in rows)
    with open(os.path.join(args.out, "frames.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
