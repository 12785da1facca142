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
from conytrain.ref.fusion import BoundedFusion, FusedClassifier, bounded_logits

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


class GateTest(unittest.TestCase):
    """The confidence gate (ref/fusion.py FusionGate, rule 12): b1_gated's encoder is its
    audio model's, so with the gate shut or the video absent its logits are the audio
    model's; open, the gate changes them; an exported file keeps the gate."""

    def setUp(self):
        torch.set_num_threads(1)
        self.model, self.audio = gen_fusion_golden.gated_models(3200)
        g = torch.Generator().manual_seed(5)
        self.tokens = {"audio": torch.randn(14, 5, generator=g),
                       "video": torch.randn(14, 4, generator=g)}
        self.alone = self.audio.stream_logits({"audio": self.tokens["audio"]},
                                              {"audio": torch.ones(14, dtype=torch.bool)})

    def logits(self, model, video):
        present = {"audio": torch.ones(14, dtype=torch.bool),
                   "video": torch.full((14,), video, dtype=torch.bool)}
        return model.stream_logits(self.tokens, present)

    def test_shut_or_absent_is_the_audio_model(self):
        self.assertGreater((self.logits(self.model, True) - self.alone).abs().max().item(), 0.1)
        self.assertLess((self.logits(self.model, False) - self.alone).abs().max().item(), 1e-5)
        self.model.gate.closed()
        self.assertLess((self.logits(self.model, True) - self.alone).abs().max().item(), 1e-5)

    def test_export_keeps_the_gate(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "g.safetensors")
            export_model(self.model, path)
            tensors, meta = safetensors_io.load(path)
            config = json.loads(meta["config"])
            back = FusedClassifier.from_file_parts(tensors, config)
        self.assertEqual(config["fusion"]["gate"], {"input": "video"})
        self.assertEqual(tensors["fusion.gate.readout.weight"].shape, (3, 4))
        self.assertTrue(torch.allclose(self.logits(back, True), self.logits(self.model, True),
                                       atol=1e-6))

    def test_bad_gate_refused(self):
        inputs = [{"name": "a", "size": 2, "rate": [1, 1], "tolerance_ms": 0}]
        for gate in ({"input": "b"}, {"input": "a", "scale": 2}):
            with self.assertRaisesRegex(ValueError, "gate must be"):
                FusedClassifier(inputs, [1, 1], gate, d=8, heads=2, ff=8, blocks=1, window=4,
                                landmarks=2, attention="cony", labels=["x", "y"])


if __name__ == "__main__":
    unittest.main()


class FusedTrainingTest(unittest.TestCase):
    """Packed windows, random drops and a short training run on a task each sense can
    solve alone: the fused model learns it, and keeps it with either sense absent (1.0
    seen; 0.86 with the audio absent when trained without drops)."""

    def setUp(self):
        torch.set_num_threads(1)

    def test_pack_round_trip(self):
        model = gen_fusion_golden.make_model(gen_fusion_golden.CASES[0], 3)
        tokens = {"audio": torch.randn(2, 5, 5), "video": torch.randn(2, 5, 4)}
        present = {"audio": torch.rand(2, 5) > 0.5, "video": torch.rand(2, 5) > 0.5}
        packed = model.pack(tokens, present)
        t2, p2 = model.unpack(packed)
        for n in model.names:
            self.assertTrue(torch.equal(p2[n], present[n]))
        want = model(tokens, present)
        self.assertTrue(torch.allclose(model.forward_packed(packed), want))

    def test_training_learns_with_a_sense_absent(self):
        from conytrain.fusion_train import DropSampler, PackedModel
        from conytrain.train import WindowSampler, evaluate, train_epochs
        torch.manual_seed(0)
        rng = np.random.default_rng(0)
        N, L, n = 64, 12, 4
        y = rng.integers(0, 2, N)
        sign = (2 * y - 1)[:, None, None].astype(np.float32)
        audio = torch.from_numpy(sign + 0.5 * rng.standard_normal((N, L, 3)).astype(np.float32))
        video = torch.from_numpy(-sign + 0.5 * rng.standard_normal((N, L, 2)).astype(np.float32))
        inputs = [{"name": "audio", "size": 3, "rate": [4, 1], "tolerance_ms": 500},
                  {"name": "video", "size": 2, "rate": [4, 1], "tolerance_ms": 500}]
        model = FusedClassifier(inputs, [4, 1], d=8, heads=2, ff=16, blocks=1, window=n,
                                landmarks=2, attention="regular", labels=["a", "b"])
        ones = torch.ones(N, L, dtype=torch.bool)
        packed = model.pack({"audio": audio, "video": video}, {"audio": ones, "video": ones})
        T = model.config["positional_rows"]
        train = DropSampler(WindowSampler(packed.numpy(), y, n, T, seed=1), model,
                            p_window=0.3, p_step=0.1, seed=2)
        train_epochs(PackedModel(model), train, epochs=4, batches_per_epoch=40,
                     batch_size=32, lr=3e-3, weight_decay=0.0, log=lambda *a: None)
        for absent in (None, "audio", "video"):
            present = {k: ones if k != absent else torch.zeros_like(ones) for k in ("audio", "video")}
            p = model.pack({"audio": audio, "video": video}, present)
            acc = evaluate(PackedModel(model), WindowSampler(p.numpy(), y, n, T, seed=3),
                           batches=4, batch_size=64)
            self.assertGreater(acc, 0.9, f"accuracy {acc} with {absent or 'nothing'} absent")


class BoundedFusionTest(unittest.TestCase):
    """Rule 15's bounded influence (models/av/EXPERIMENTS.md): the output stays within the
    limit of the primary model's log-probabilities, is the primary's where another input is
    absent or the limit 0, and the fused model's log-probabilities for a large limit."""

    def setUp(self):
        torch.manual_seed(15)
        case = gen_fusion_golden.CASES[0]
        self.fused = gen_fusion_golden.make_model(case, 7).double()
        audio = [i for i in case[1] if i["name"] == "audio"]
        self.primary = FusedClassifier(audio, case[2], d=gen_fusion_golden.D,
                                       heads=gen_fusion_golden.HEADS, ff=gen_fusion_golden.FF,
                                       blocks=case[3], window=case[5], landmarks=case[6],
                                       attention=case[4], labels=gen_fusion_golden.LABELS).double()
        L = 12
        self.tokens = {"audio": 3 * torch.randn(L, 5).double(), "video": 3 * torch.randn(L, 4).double()}
        self.present = {"audio": torch.ones(L, dtype=torch.bool),
                        "video": torch.tensor([True] * 8 + [False] * 4)}

    def logprobs(self):
        a = self.primary.stream_logits({"audio": self.tokens["audio"]},
                                       {"audio": self.present["audio"]})
        return torch.log_softmax(a, -1), torch.log_softmax(
            self.fused.stream_logits(self.tokens, self.present), -1)

    def test_within_the_limit(self):
        lp, lf = self.logprobs()
        self.assertGreater(float((lf - lp)[:8].abs().max()), 0.5)   # the limit is binding
        out = BoundedFusion(self.primary, self.fused, 0.5).stream_logits(self.tokens, self.present)
        self.assertLessEqual(float((out - lp).abs().max()), 0.5 + 1e-12)
        moved = (out[:8] - lp[:8]).abs()
        self.assertTrue(bool(((moved - 0.5).abs() < 1e-12).any()))

    def test_absent_and_zero_give_the_primary(self):
        lp, lf = self.logprobs()
        out = BoundedFusion(self.primary, self.fused, 100.0).stream_logits(self.tokens, self.present)
        self.assertTrue(torch.allclose(out[8:], lp[8:], atol=0, rtol=0))    # camera absent
        self.assertTrue(torch.allclose(out[:8], lf[:8], atol=1e-12))        # no binding limit
        zero = BoundedFusion(self.primary, self.fused, 0.0).stream_logits(self.tokens, self.present)
        self.assertTrue(torch.equal(zero, lp))

    def test_refuses_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "first input"):
            BoundedFusion(self.fused, self.fused, 1.0)
        with self.assertRaisesRegex(ValueError, "limit"):
            BoundedFusion(self.primary, self.fused, -1.0)
        with self.assertRaisesRegex(ValueError, "limit"):
            BoundedFusion(self.primary, self.fused, float("nan"))
        self.assertTrue(torch.equal(
            bounded_logits(torch.zeros(1, 3), torch.tensor([[9.0, 0, 0]]), 1.0,
                           torch.tensor([True])),
            torch.log_softmax(torch.zeros(1, 3), -1) + torch.tensor([[1.0, -1.0, -1.0]])))
