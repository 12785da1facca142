"""conytrain.train.CorruptedWindows (--token-swap): swapped tokens come from the pool and
nothing else changes; labels are kept; p = 0 changes nothing."""

import unittest

import numpy as np
import torch

from conytrain.train import CorruptedWindows

torch.set_num_threads(1)


class FixedSampler:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def batch(self, size):
        return self.x.clone(), torch.zeros(size, dtype=torch.long), self.y.clone()


class TokenSwap(unittest.TestCase):
    def setUp(self):
        self.x = torch.arange(4 * 8 * 3, dtype=torch.float32).reshape(4, 8, 3) + 1000.0
        self.y = torch.tensor([0, 1, 2, 3])
        self.pool = -np.arange(50 * 3, dtype=np.float32).reshape(50, 3) - 1.0

    def test_off_changes_nothing(self):
        x, _, y = CorruptedWindows(FixedSampler(self.x, self.y), self.pool, 0.0, 1).batch(4)
        self.assertTrue(torch.equal(x, self.x))
        self.assertTrue(torch.equal(y, self.y))

    def test_swapped_tokens_come_from_the_pool_and_labels_stay(self):
        w = CorruptedWindows(FixedSampler(self.x, self.y), self.pool, 0.3, 1)
        pool_rows = {tuple(r) for r in self.pool}
        swapped = kept = 0
        for _ in range(50):
            x, _, y = w.batch(4)
            self.assertTrue(torch.equal(y, self.y))
            same = (x == self.x).all(-1)
            for b, t in zip(*np.nonzero(~same.numpy())):
                self.assertIn(tuple(x[b, t].tolist()), pool_rows)
            swapped += int((~same).sum())
            kept += int(same.sum())
        share = swapped / (swapped + kept)
        self.assertAlmostEqual(share, 0.3, delta=0.05)

    def test_all_swapped(self):
        x, _, _ = CorruptedWindows(FixedSampler(self.x, self.y), self.pool, 1.0, 2).batch(4)
        self.assertTrue(bool((x < 0).all()))


if __name__ == "__main__":
    unittest.main()
