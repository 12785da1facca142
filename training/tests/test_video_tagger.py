"""The continual video tagger (training/train_video_tagger.py, models/video-tagger/): the
PyTorch reference of the shipped file gives the committed logits of
tests/golden/video-tagger/ (which tests/models/test_video_tagger.sh holds `cony classify` to);
the camera sequences are deterministic and cut where their shots say; the evaluation's
flips and settle counts on hand-made label streams."""

import json
import os
import unittest

import numpy as np

from conytrain import REPO, safetensors_io
from conytrain.video import camera, tagger

MODEL = os.path.join(REPO, "models", "video-tagger", "tagger.safetensors")


class GoldenTest(unittest.TestCase):
    def test_torch_logits_equal_the_golden(self):
        x = np.load(os.path.join(tagger.GOLDEN, "tokens.npy"))
        want = np.load(os.path.join(tagger.GOLDEN, "logits.npy"))
        got = tagger.torch_stream_logits(MODEL, x)
        self.assertEqual(got.shape, (len(x), 1001))
        np.testing.assert_allclose(got, want, atol=1e-4 * max(1.0, np.abs(want).max()))

    def test_model_pairs_with_the_imagenet_mobilenet(self):
        config = json.loads(safetensors_io.load(MODEL)[1]["config"])
        cnn = os.path.join(REPO, "models", "imagenet", "mobilenet_v2.safetensors")
        self.assertEqual(config["frontend"]["cnn_output"], "embedding")
        self.assertEqual(config["frontend"]["cnn_sha256"], tagger.sha256(cnn))
        self.assertEqual(config["labels"], json.loads(safetensors_io.load(cnn)[1]["labels"]))


class CameraTest(unittest.TestCase):
    def photos(self):
        rng = np.random.default_rng(0)
        return [("a", rng.uniform(0, 255, (120, 160, 3)).astype(np.float32)),
                ("b", np.full((120, 160, 3), 90.0, np.float32))]

    def test_sequences_are_deterministic_and_cut_as_their_shots_say(self):
        f1, s1 = camera.sequence(self.photos(), 50, np.random.default_rng(3), (10, 20))
        f2, s2 = camera.sequence(self.photos(), 50, np.random.default_rng(3), (10, 20))
        np.testing.assert_array_equal(f1, f2)
        self.assertEqual(s1, s2)
        self.assertEqual(f1.shape, (50, camera.SIZE, camera.SIZE, 3))
        self.assertEqual(sum(n for _, n, _ in s1), 50)
        for (t0, n0, a), (t1, _, b) in zip(s1, s1[1:]):
            self.assertEqual(t0 + n0, t1)
            self.assertNotEqual(a, b)             # a cut always changes the photograph

    def test_sample_of_a_flat_photo_is_flat(self):
        img = np.full((100, 100, 3), 42.0, np.float32)
        np.testing.assert_allclose(camera.sample(img, 50, 50, 30, 16), 42.0)


class EvalTest(unittest.TestCase):
    def test_flips(self):
        self.assertEqual(tagger.flips(np.array([1, 1, 2, 2, 1])), 2)

    def test_settle_steps(self):
        ref = np.array([0] * 10 + [3] * 10)
        top = np.array([0] * 12 + [5, 3, 3, 3, 3, 3, 3, 3])
        # the cut at step 10: 3 holds 5 steps from step 13 on
        self.assertEqual(tagger.settle_steps(top, ref, [(0, 10, "a"), (10, 10, "b")]), [3])
        never = np.zeros(20, np.int64)
        self.assertEqual(tagger.settle_steps(never, ref, [(0, 10, "a"), (10, 10, "b")]), [10])


if __name__ == "__main__":
    unittest.main()
