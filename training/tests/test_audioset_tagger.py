"""train_audioset_tagger.py: the training windows' targets over joined clips, and the
held-out measures (average precision, top-1 flips, the window mean)."""

import types
import unittest

import numpy as np

from conytrain.audio import audioset_tagger as tagger


class JoinedStreamsTest(unittest.TestCase):
    def streams(self, target_mean):
        N, L = 5, 17
        x = np.zeros((N, L, 2), np.float16)
        s = (np.arange(N)[:, None] * 20 + np.arange(L)[None, :]).astype(np.float16)[..., None]
        a = types.SimpleNamespace(clips_per_stream=3, p_recording=0.0, warmup_fraction=0.0,
                                  target_mean=target_mean)
        j = tagger.JoinedStreams(x, s, list("abcde"), 20, 39, a, seed=1)
        j.stream = lambda: [3, 1, 4]
        return j, np.concatenate([s[3], s[1], s[4]])[:, 0].astype(np.float64)

    def test_target_is_the_mean_over_the_newest_tokens(self):
        for k in (1, 4):
            j, full = self.streams(k)
            for _ in range(40):
                state = j.rng.bit_generator.state
                x, off, y = j.batch(1)
                j.rng.bit_generator.state = state      # replay the draws: warm-up test, t0
                j.rng.random()
                end = int(j.rng.integers(0, 3 * 17 - 20 + 1)) + 20
                self.assertEqual(tuple(x.shape), (1, 20, 2))
                self.assertAlmostEqual(y[0, 0].item(), full[max(0, end - k):end].mean(),
                                       places=3)


class MeasuresTest(unittest.TestCase):
    def test_average_precision(self):
        # positives ranked 1st and 3rd: (1/1 + 2/3) / 2
        ap = tagger.average_precision(np.array([0.9, 0.8, 0.7, 0.1]),
                                      np.array([True, False, True, False]))
        self.assertAlmostEqual(ap, (1 + 2 / 3) / 2)

    def test_flips(self):
        self.assertEqual(tagger.flips([np.array([1, 1, 2, 2, 1]), np.array([3])]), 2)

    def test_window_mean(self):
        s = np.arange(10, dtype=np.float64)[:, None]
        m = tagger.window_mean(s, 3)
        np.testing.assert_allclose(m[:, 0], [0, 0.5, 1, 2, 3, 4, 5, 6, 7, 8])


if __name__ == "__main__":
    unittest.main()
