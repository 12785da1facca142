"""Rule 23's bound (conytrain/av/bound.py): the gate acts only on steps where the audio
model is unsure and the picture sure, a closed gate leaves every margin 0, and the
margins are fused minus audio, per class and overall, seed means; gate.cell_outputs,
which it shares with the val cells of rule 12, joins a cell's streams."""

import unittest

import numpy as np
import torch

from conytrain.av import bound, gate, sources

C = len(sources.CLASSES)


def onehot_log(cls, sure):
    """Log-probabilities (N, C) putting @sure on each step's class @cls."""
    p = torch.full((len(cls), C), (1 - sure) / (C - 1), dtype=torch.float64)
    p[torch.arange(len(cls)), cls] = sure
    return p.log()


class BoundTest(unittest.TestCase):
    def test_gate_flips_only_unsure_audio_under_a_sure_picture(self):
        y = torch.tensor([0, 1, 2, 3])
        z = onehot_log(torch.tensor([1, 1, 2, 0]), 0.3).clone()   # unsure, wrong twice
        z[2] = onehot_log(torch.tensor([2]), 0.95)[0]              # sure: never gated
        lv = onehot_log(y, 0.9)
        out = bound.gated(z, lv, 16, 0.5, 0.8)
        self.assertEqual(out.argmax(-1).tolist(), [0, 1, 2, 3])
        self.assertTrue(torch.equal(out[2], z[2]))
        unsure_picture = onehot_log(y, 0.5)
        self.assertTrue(torch.equal(bound.gated(z, unsure_picture, 16, 0.5, 0.8), z))

    def test_margins_are_fused_minus_audio_seed_means(self):
        y = torch.tensor([0, 0, 1, 1, 2, 3, 4])
        z = onehot_log(torch.tensor([1, 0, 1, 0, 2, 3, 4]), 0.3)
        lv = onehot_log(y, 0.9)
        cells = {cell: (z, lv, y) for cell in bound.CELLS}
        closed = bound.margins([cells, cells], 64, 0.0, 0.0)
        for cell in bound.CELLS:
            self.assertTrue(np.all(closed[cell] == 0))
        opened = bound.margins([cells], 64, 1.01, 0.0)
        # audio: wrong on steps 0 and 3 (5 of 7 right); gated: all seven
        self.assertAlmostEqual(opened["clean", "matched"][0], 200 / 7)
        self.assertAlmostEqual(opened["clean", "matched"][1], 50.0)   # class 0: 1/2 -> 2/2
        rows = bound.sweep([cells])
        self.assertEqual(len(rows), len(bound.LAMBDAS) * len(bound.TAUS) * len(bound.SIGMAS))

    def test_cell_outputs_join_the_streams_of_a_cell(self):
        class Audio:   # logits = the token's first C values
            def stream_logits(self, tokens, present):
                self.present = present["audio"]
                return tokens["audio"][:, :C]

        class Readout:
            def scores(self, video, dtype):
                return np.asarray(video, dtype)

        rng = np.random.default_rng(3)
        cell = [({"audio": rng.random((n, 8)).astype(np.float32),
                  "video": rng.random((n, C)).astype(np.float32)}, np.arange(n) % C)
                for n in (4, 6)]
        audio = Audio()
        z, lv, y, ctx = gate.cell_outputs(audio, Readout(), cell)
        self.assertEqual(z.dtype, torch.float64)
        self.assertTrue(torch.equal(z, torch.from_numpy(np.concatenate(
            [t["audio"][:, :C] for t, _ in cell])).double()))
        self.assertTrue(torch.allclose(lv.exp().sum(-1), torch.ones(10, dtype=torch.float64)))
        self.assertEqual(y.tolist(), [0, 1, 2, 3, 0, 1, 2, 3, 4, 0])
        self.assertIsNone(ctx)
        self.assertTrue(bool(audio.present.all()))


if __name__ == "__main__":
    unittest.main()
