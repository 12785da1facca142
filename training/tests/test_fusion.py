"""The fused model's PyTorch twin (conytrain/ref/fusion.py): the committed goldens of
tests/golden/fusion are what gen_fusion_golden.py writes, the join puts absent tokens and
flags where inputs are missing, and an exported file loads back to the same model."""

import json
import os
import tempfile
import unittest

import numpy as np
import torch

from conytrain import safetensors_io
from conytrain.export import export_model
from conytrain.golden import fusion as gen_fusion_golden
from conytrain.ref.fusion import FusedClassifier

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tests", "golden", "fusion")


class FusionTest(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(1)
        self.model = gen_fusion_golden.make_model(gen_fusion_golden.CASES[0], 7)

    def test_golden_up_to_date(self):
        self.assertEqual(gen_fusion_golden.verify(GOLDEN), [])

    def test_join(self):
        tokens = {"audio": torch.ones(3, 5), "video": 2 * torch.ones(3, 4)}
        present = {"audio": torch.tensor([True, False, True]),
                   "video": torch.tensor([False, True, True])}
        f = self.model.join(tokens, present)
        self.assertEqual(tuple(f.shape), (3, 11))
        a, v = self.model.absent["audio"].detach(), self.model.absent["video"].detach()
        self.assertTrue(torch.equal(f[0, :5], torch.ones(5)))
        self.assertTrue(torch.equal(f[0, 5:9], v))
        self.assertTrue(torch.equal(f[1, :5], a))
        self.assertEqual(f[:, 9].tolist(), [1, 0, 1])
        self.assertEqual(f[:, 10].tolist(), [0, 1, 1])

    def test_absent_token_is_learned(self):
        """A loss on steps with the video absent reaches its absent token."""
        tokens = {"audio": torch.randn(1, 4, 5), "video": torch.randn(1, 4, 4)}
        present = {"audio": torch.ones(1, 4, dtype=torch.bool),
                   "video": torch.zeros(1, 4, dtype=torch.bool)}
        self.model(tokens, present).sum().backward()
        self.assertGreater(self.model.absent["video"].grad.abs().sum().item(), 0)
        g = self.model.absent["audio"].grad
        self.assertTrue(g is None or not g.any())   # the audio was present throughout

    def test_export_round_trip(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "f.safetensors")
            export_model(self.model, path)
            tensors, meta = safetensors_io.load(path)
            config = json.loads(meta["config"])
            self.assertEqual(config["d_in"], 11)
            self.assertEqual(config["fusion"]["inputs"][1]["name"], "video")
            self.assertIn("fusion.video.absent", tensors)
            back = FusedClassifier.from_file_parts(tensors, config)
        tokens = {"audio": torch.randn(9, 5), "video": torch.randn(9, 4)}
        present = {"audio": torch.rand(9) > 0.5, "video": torch.rand(9) > 0.5}
        want = self.model.stream_logits(tokens, present)
        got = back.stream_logits(tokens, present)
        self.assertTrue(np.allclose(got.numpy(), want.numpy(), atol=1e-6))

    def test_bad_inputs_refused(self):
        with self.assertRaisesRegex(ValueError, "unique"):
            FusedClassifier([{"name": "a", "size": 2, "rate": [1, 1], "tolerance_ms": 0}] * 2,
                            [1, 1], d=8, heads=2, ff=8, blocks=1, window=4, landmarks=2,
                            attention="cony", labels=["x"])
        with self.assertRaisesRegex(ValueError, "unknown keys"):
            FusedClassifier([{"name": "a", "size": 2, "rate": [1, 1], "tolerance": 0}],
                            [1, 1], d=8, heads=2, ff=8, blocks=1, window=4, landmarks=2,
                            attention="cony", labels=["x"])


if __name__ == "__main__":
    unittest.main()
