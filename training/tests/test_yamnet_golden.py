"""The shipped YAMNet (models/yamnet/yamnet.safetensors) against ArmNN's scores of the
original int8 .tflite (tests/golden/yamnet/, written by training/verify_yamnet_armnn.py):
the float64 evaluation of the converted file must give ArmNN's top-1 on every patch and
no score may differ by more than 0.1 (issue #25). The golden's own sanity: every sound's
expected label is ArmNN's top-1, and the generated patches that do not depend on an
external program (sine, silence) are what the front end computes today."""

import json
import os
import unittest

import numpy as np

from conytrain.audio import yamnet_armnn as verify

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

GOLDEN = os.path.join(ROOT, "tests", "golden", "yamnet")


class YamnetGoldenTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(GOLDEN, "patches.json")) as f:
            cls.info = json.load(f)
        cls.rows = verify.compare(verify.MODEL, GOLDEN)

    def test_sounds_covered(self):
        names = set(self.info["names"])
        self.assertGreaterEqual(len(names - {"test_spectra"}), 6, names)
        self.assertLessEqual({"test_spectra", "speech", "sine440", "pink_noise", "silence",
                              "siren", "music"}, names)

    def test_same_top1_as_armnn(self):
        for k, r in enumerate(self.rows):
            self.assertEqual(r["ref_top"], r["armnn_top"], f"patch {k} ({r['name']}): {r}")

    def test_scores_within_0_1_of_armnn(self):
        worst = max(r["max_diff"] for r in self.rows)
        self.assertLessEqual(worst, verify.TOP1_TOLERANCE)
        self.assertGreater(worst, 0.0)        # the int8 runtime is not bit-identical to float

    def test_armnn_golden_is_sane(self):
        expected = self.info["expected"]
        for r in self.rows:
            self.assertEqual(r["armnn_top"], expected[r["name"]], r)
        first = self.rows[0]
        self.assertEqual(first["name"], "test_spectra")
        self.assertAlmostEqual(first["armnn_score"], 0.9414, places=3)   # coralmicro's own check

    def test_patches_come_from_the_yamnet_front_end(self):
        patches = np.load(os.path.join(GOLDEN, "patches.npy"))
        names = self.info["names"]
        self.assertEqual(self.info["log_offset"], 0.001)
        sine = [p for p, n in zip(patches, names) if n == "sine440"]
        np.testing.assert_allclose(sine, verify.patches_of(verify.sine440(None)), atol=1e-5)
        silence = [p for p, n in zip(patches, names) if n == "silence"]
        np.testing.assert_array_equal(np.unique(silence), np.float32(np.log(0.001)))


if __name__ == "__main__":
    unittest.main()
