"""The shipped ImageNet MobileNet-v2 (models/imagenet/mobilenet_v2.safetensors) against
ArmNN's scores of the original uint8 .tflite (tests/golden/imagenet/, written by
training/verify_imagenet_armnn.py): the float64 numpy reference of the converted file
gives ArmNN's top-1 on every committed frame, its scores are the committed ref.npy, and
no score differs from ArmNN's by more than ARMNN_TOLERANCE; the integer reference
(conytrain/ref/qmobilenet.py, TFLite's integer arithmetic, which libcony's integer path
equals bit for bit: tests/test_gst_imagenet.c) gives the committed int8.npy and ArmNN's
top-1, within INT8_TOLERANCE.

ARMNN_TOLERANCE is the largest difference measured over all 14 frames (0.035 on
grace_hopper), not the 0.02 issue #40 asked for: ArmNN requantises every activation to
uint8 while libcony's float path computes in float. INT8_TOLERANCE (0.066 on
squirrel_cls, 17 output steps) is the integer path's: ArmNN computes each layer in float
and rounds, TFLite's fixed-point requantisation rounds some values the other way, and
MobileNet-v2 amplifies a one-step difference (one input pixel changed by one step moves
the scores by up to 7 steps); see models/imagenet/MODEL.md."""

import json
import os
import shutil
import unittest

import numpy as np

from conytrain import REPO
from conytrain.cnn import imagenet_armnn as verify
from conytrain.ref import mobilenet, qmobilenet

GOLDEN = os.path.join(REPO, "tests", "golden", "imagenet")
MODEL = os.path.join(REPO, "models", "imagenet", "mobilenet_v2.safetensors")
ARMNN_TOLERANCE = 0.036
INT8_TOLERANCE = 0.067


@unittest.skipUnless(shutil.which("gst-launch-1.0"), "gst-launch-1.0 decodes the PNG frames")
class ImagenetGoldenTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(GOLDEN, "frames.json")) as f:
            cls.info = json.load(f)
        cls.names = cls.info["names"]
        frames = [verify.read_frame(os.path.join(GOLDEN, "frames", n + ".png"), 224)
                  for n in cls.names]
        cls.ref = verify.reference_scores(MODEL, frames)
        cls.int8 = verify.integer_scores(MODEL, frames)
        cls.armnn = np.load(os.path.join(GOLDEN, "armnn.npy")).astype(np.float64)
        cls.labels = mobilenet.load(MODEL)["labels"]

    def test_frames(self):
        self.assertEqual(list(self.names), list(verify.GOLDEN_FRAMES))
        self.assertEqual(self.armnn.shape, (len(self.names), 1001))

    def test_same_top1_as_armnn(self):
        for n, r, a, want in zip(self.names, self.ref, self.armnn, self.info["top1"]):
            self.assertEqual(self.labels[int(a.argmax())], want, n)
            self.assertEqual(int(r.argmax()), int(a.argmax()), n)

    def test_scores_near_armnn(self):
        worst = np.abs(self.ref - self.armnn).max()
        self.assertLessEqual(worst, ARMNN_TOLERANCE)

    def test_reference_scores_committed(self):
        np.testing.assert_allclose(self.ref, np.load(os.path.join(GOLDEN, "ref.npy")),
                                   rtol=0, atol=1e-6)

    def test_integer_scores_committed(self):
        np.testing.assert_array_equal(self.int8, np.load(os.path.join(GOLDEN, "int8.npy")))
        for n, q, a in zip(self.names, self.int8, self.armnn):
            self.assertEqual(int(q.argmax()), int(a.argmax()), n)
        self.assertLessEqual(np.abs(self.int8 - self.armnn).max(), INT8_TOLERANCE)

    def test_shipped_quantization(self):
        """The shipped file carries the integer path: the uint8 input (scale 1/128, zero
        point 128) as int8 (zero point 0), every layer quantised, int32 biases."""
        from conytrain import safetensors_io
        tensors, meta = safetensors_io.load(MODEL)
        q = json.loads(meta["quantization"])
        self.assertEqual(q["input"], [1 / 128, 0])
        words = meta["layers"].split()
        self.assertEqual(len(q["layers"]), len(words))
        self.assertTrue(all(s > 0 and -128 <= z <= 127 for s, z in q["layers"]))
        self.assertEqual(q["layers"][-1], [1 / 256, -128])         # the uint8 softmax
        for i, w in enumerate(words):
            if w in mobilenet.WITH_TENSORS:
                self.assertEqual(tensors[f"layers.{i}.bias_quantized"].dtype, np.int64, i)
        self.assertEqual(qmobilenet.load(MODEL)["qinput"], [1 / 128, 0])

    def test_every_measured_frame(self):
        """frames.json keeps every frame's comparison (14 frames, 3 models): the shipped
        model's float and integer paths had ArmNN's top-1 on all of them, within
        ARMNN_TOLERANCE and INT8_TOLERANCE; the int8 per-channel TF2 file's integer path
        too (within its own measured 0.082)."""
        for model, rows in self.info["models"].items():
            self.assertGreaterEqual(len(rows), 14, model)
        for model, float_tol, int_tol in ((verify.SHIPPED, ARMNN_TOLERANCE, INT8_TOLERANCE),
                                          ("tf2_mobilenet_v2_1.0_224_ptq", 0.105, 0.083)):
            for name, row in self.info["models"][model].items():
                armnn_top, ref_top, diff, int_top, int_diff = row
                self.assertEqual(armnn_top, ref_top, name)
                self.assertEqual(armnn_top, int_top, name)
                self.assertLessEqual(diff, float_tol, name)
                self.assertLessEqual(int_diff, int_tol, name)


if __name__ == "__main__":
    unittest.main()
