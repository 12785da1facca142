"""The fused model started from a trained audio model (conytrain/av/train.py start_from,
rule 10 of models/av/EXPERIMENTS.md): before training it gives the audio model's logits
whatever the video, present or absent; a model that does not fit is refused."""

import types
import unittest

import torch

from conytrain.av import cli, sources
from conytrain.av import train as avtrain
from conytrain.ref.fusion import FusedClassifier


def model(inputs, seed, d=16):
    torch.manual_seed(seed)
    return FusedClassifier(inputs, [4, 1], d=d, heads=2, ff=32, blocks=1, window=8,
                           landmarks=4, attention="cony", labels=sources.CLASSES).eval()


AUDIO = dict(name="audio", size=6, rate=[4, 1], tolerance_ms=1000)
VIDEO = dict(name="video", size=5, rate=[10, 1], tolerance_ms=500)


class StartFromTest(unittest.TestCase):
    def setUp(self):
        self.audio = model([AUDIO], 1)
        with torch.no_grad():   # trained-looking parameters, not the init
            for p in self.audio.parameters():
                p.add_(0.1 * torch.randn_like(p))
        self.fused = model([AUDIO, VIDEO], 2)
        self.log = []
        avtrain.start_from(self.fused, self.audio, self.log.append)

    def logits(self, m, tok, pres):
        with torch.no_grad():   # float64: the wider product must not hide in rounding
            return m.double()({k: tok[k].double() for k in m.names},
                              {k: pres[k] for k in m.names})

    def test_starts_as_the_audio_model(self):
        g = torch.Generator().manual_seed(3)
        tok = {"audio": torch.randn(4, 8, 6, generator=g), "video": torch.randn(4, 8, 5, generator=g)}
        for audio_present in (True, False):
            for video_present in (True, False):
                pres = {"audio": torch.full((4, 8), audio_present),
                        "video": torch.full((4, 8), video_present)}
                pres["audio"][:, 3] = False   # one step absent as well
                want = self.logits(self.audio, tok, pres)
                got = self.logits(self.fused, tok, pres)
                torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10)
        self.assertIn("starts from the trained audio model", self.log[-1])

    def test_video_columns_start_at_zero_and_learn(self):
        w = self.fused.encoder.input_proj.weight
        self.assertEqual(float(w[:, 6:11].abs().sum()), 0.0)
        self.assertEqual(float(w[:, 12].abs().sum()), 0.0)   # the video flag
        tok = {"audio": torch.randn(2, 8, 6), "video": torch.randn(2, 8, 5)}
        pres = {"audio": torch.ones(2, 8, dtype=torch.bool), "video": torch.ones(2, 8, dtype=torch.bool)}
        self.fused.train()
        self.fused(tok, pres).sum().backward()
        self.assertGreater(float(w.grad[:, 6:11].abs().sum()), 0.0)

    def test_refuses_a_model_that_does_not_fit(self):
        with self.assertRaisesRegex(ValueError, "does not fit"):
            avtrain.start_from(model([AUDIO, VIDEO], 2), model([AUDIO], 1, d=32), [].append)
        with self.assertRaisesRegex(ValueError, "not one of"):
            avtrain.start_from(model([AUDIO, VIDEO], 2),
                               model([dict(AUDIO, name="mic")], 1), [].append)

    def test_fused_is_trained_last_when_it_starts_from_audio(self):
        args = types.SimpleNamespace(start_from_audio=True)
        self.assertEqual([k for k, _ in cli.stage_order(args)][-1], "fused")
        args.start_from_audio = False
        self.assertEqual([k for k, _ in cli.stage_order(args)], list(cli.SENSES))


if __name__ == "__main__":
    unittest.main()
