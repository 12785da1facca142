"""The cross-fitted video read-out of the fused model (conytrain/av/readout.py, rule 7 of
models/av/EXPERIMENTS.md): folds keep a photograph group whole, each shot's training
scores come from the fit without its fold, and the model trained on scores, composed
back onto the raw video tokens, gives the same logits with every sense present and with
either absent."""

import types
import unittest

import numpy as np
import torch

from conytrain.av import readout, sources
from conytrain.ref.fusion import FusedClassifier


def fake_video(rng, shots=40, steps=4, size=12):
    y = np.arange(shots) % len(sources.CLASSES)
    x = rng.standard_normal((shots, steps, size)).astype(np.float32)
    x[:, :, :len(sources.CLASSES)] += 3 * np.eye(len(sources.CLASSES))[y][:, None, :]
    return {"video": x, "video_cls": np.array([sources.CLASSES[i] for i in y]),
            "video_group": np.array([f"photo{i // 2}" for i in range(shots)])}


def fused(video_size, seed):
    torch.manual_seed(seed)
    inputs = [dict(name="audio", size=6, rate=[4, 1], tolerance_ms=1000),
              dict(name="video", size=video_size, rate=[10, 1], tolerance_ms=500)]
    return FusedClassifier(inputs, [4, 1], d=16, heads=2, ff=32, blocks=1, window=8,
                           landmarks=4, attention="cony", labels=sources.CLASSES).eval()


class ReadoutTest(unittest.TestCase):
    def setUp(self):
        self.data = fake_video(np.random.default_rng(0))
        self.log = []

    def test_folds_keep_groups_whole(self):
        fold = readout.folds_of(self.data["video_group"], 5)
        for g in set(self.data["video_group"]):
            self.assertEqual(len(set(fold[self.data["video_group"] == g])), 1)
        self.assertEqual(sorted(set(fold.tolist())), [0, 1, 2, 3, 4])

    def test_training_scores_are_out_of_fold(self):
        r = readout.Readout(self.data, 5, self.log.append)
        fold = readout.folds_of(self.data["video_group"], 5)
        y = readout.labels_of(self.data["video_cls"])
        x = self.data["video"]
        held = fold == 2
        a, c = readout.fit(x[~held].reshape(-1, 12), np.repeat(y[~held], 4), r.penalty)
        np.testing.assert_allclose(r.train_scores[held], readout.scores(x[held], a, c), atol=1e-4)
        self.assertGreater(r.oof_accuracy, 0.9)   # separable: the read-out generalises
        self.assertIn("out of fold", self.log[-1])

    def test_penalty_is_chosen_from_the_given_grid(self):
        r = readout.Readout(self.data, 5, self.log.append, penalties=(1e-2, 10.0, 1e3))
        tried = [line for line in self.log if line.startswith("video read-out: penalty ")
                 and "out-of-fold step accuracy" in line]
        self.assertEqual(len(tried), 3)
        self.assertIn("penalty 1000,", tried[2])
        self.assertIn(r.penalty, (1e-2, 10.0))   # 1e3 shrinks every weight to nothing
        # a huge penalty flattens the scores: less spread than the chosen fit's
        huge = readout.Readout(self.data, 5, [].append, penalties=(1e3,))
        self.assertLess(huge.train_scores.std(), r.train_scores.std())

    def test_penalty_list_parses_and_rejects(self):
        from conytrain.av import cli
        self.assertEqual(cli.penalty_list("0.001,1,10"), (0.001, 1.0, 10.0))
        for bad in ("", "0.1,x", "0.1,-1", "0"):
            with self.assertRaises(Exception):
                cli.penalty_list(bad)

    def test_composed_model_equals_the_score_model(self):
        r = readout.Readout(self.data, 5, self.log.append)
        small, big = fused(len(sources.CLASSES), 1), fused(12, 2)
        with torch.no_grad():   # a trained absent token is not zero
            small.absent["video"].copy_(torch.randn(len(sources.CLASSES)))
        readout.compose(small, big, r)
        L = 20
        tok = {"audio": torch.randn(L, 6), "video": torch.from_numpy(self.data["video"][:5].reshape(L, 12))}
        sc = {"audio": tok["audio"], "video": torch.from_numpy(readout.scores(tok["video"].numpy(), r.a, r.c))}
        for gone in (None, "audio", "video"):
            pres = {s: torch.full((L,), s != gone) for s in ("audio", "video")}
            torch.testing.assert_close(big.encoder.input_proj(big.join(tok, pres)),
                                       small.encoder.input_proj(small.join(sc, pres)),
                                       atol=1e-5, rtol=0)
            torch.testing.assert_close(big.stream_logits(tok, pres), small.stream_logits(sc, pres),
                                       atol=1e-3, rtol=0)   # float32 through the encoder
        # and the file holds the composed model: 12-d video tokens, the same logits
        self.assertEqual(tuple(big.encoder.input_proj.weight.shape), (16, 6 + 12 + 2))

    def test_sabotaged_composition_differs(self):
        r = readout.Readout(self.data, 5, self.log.append)
        small, big = fused(len(sources.CLASSES), 1), fused(12, 2)
        r.c = r.c * 0   # the bias left out: a different model
        readout.compose(small, big, r)
        r2 = readout.Readout(self.data, 5, self.log.append)
        L = 8
        tok = {"audio": torch.randn(L, 6), "video": torch.from_numpy(self.data["video"][:2].reshape(L, 12))}
        sc = {"audio": tok["audio"], "video": torch.from_numpy(readout.scores(tok["video"].numpy(), r2.a, r2.c))}
        pres = {s: torch.ones(L, dtype=torch.bool) for s in ("audio", "video")}
        diff = (big.stream_logits(tok, pres) - small.stream_logits(sc, pres)).abs().max().item()
        self.assertGreater(diff, 1e-3)

    def test_training_checks_the_composition(self):
        """train_one's guard: a right composition passes, one without the bias raises."""
        from conytrain.av import train as avtrain
        data = dict(self.data)
        rng = np.random.default_rng(1)
        data["audio"] = rng.standard_normal((10, 29, 6)).astype(np.float32)
        data["audio_cls"] = np.array([sources.CLASSES[i % 5] for i in range(10)])
        r = readout.Readout(data, 5, self.log.append)
        small, big = fused(len(sources.CLASSES), 1), fused(12, 2)
        with torch.no_grad():
            small.absent["video"].copy_(torch.randn(len(sources.CLASSES)))
        readout.compose(small, big, r)
        avtrain.check_composed(small, big, r, data, ("audio", "video"), self.log.append)
        self.assertIn("logits within", self.log[-1])
        r.c = r.c * 0
        with self.assertRaises(RuntimeError):
            avtrain.check_composed(small, big, r, data, ("audio", "video"), self.log.append)


if __name__ == "__main__":
    unittest.main()
