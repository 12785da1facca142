"""train_default_audio.draw_patch (--time-stretch-p): without stretch it is the plain random
patch, drawing the same random numbers as before the option existed; a stretch by r plays the
patch r times as fast (a ramp in time keeps its values but gets slope r) and leaves each
frame's spectrum a mix of two neighbouring frames; short clips are handled."""

import unittest

import numpy as np

from conytrain.audio import train_default as tda

P = tda.PATCH


def ramp_mel(frames, bands=tda.N_MELS):
    """Frame t holds t in every band, plus the band index times 1000 (a fixed spectrum)."""
    return (np.arange(frames, dtype=np.float32)[:, None]
            + 1000.0 * np.arange(bands, dtype=np.float32)[None, :])


class TimeStretch(unittest.TestCase):
    def test_off_is_the_plain_patch_and_draws_the_same_numbers(self):
        m = ramp_mel(300)
        a, b = np.random.default_rng(5), np.random.default_rng(5)
        for _ in range(20):
            patch = tda.draw_patch(m, a, 0.0)
            t = int(b.integers(0, m.shape[0] - P + 1))
            self.assertTrue(np.array_equal(patch, m[t:t + P]))
        self.assertEqual(a.random(), b.random())

    def test_stretch_one_is_a_plain_slice(self):
        m = ramp_mel(300)
        patch = tda.draw_patch(m, np.random.default_rng(1), 1.0, (1.0, 1.0))
        t0 = int(patch[0, 0])
        self.assertTrue(np.array_equal(patch, m[t0:t0 + P]))

    def test_stretch_changes_the_speed_not_the_spectrum(self):
        m = ramp_mel(500)
        for r in (0.7, 1.0, 1.4):
            for seed in range(5):
                patch = tda.draw_patch(m, np.random.default_rng(seed), 1.0, (r, r))
                self.assertEqual(patch.shape, (P, tda.N_MELS))
                self.assertEqual(patch.dtype, m.dtype)
                slope = np.diff(patch[:, 0])
                want = (round(P * r) - 1) / (P - 1)
                self.assertTrue(np.allclose(slope, want, atol=1e-3), (r, slope[:3], want))
                # every band keeps its own level: the spectrum is not moved
                across = patch - patch[:, :1]
                self.assertTrue(np.allclose(across, 1000.0 * np.arange(tda.N_MELS), atol=1e-2))
                self.assertGreaterEqual(patch.min(), 0.0)
                self.assertLessEqual(patch[:, 0].max(), 499.0)

    def test_random_rates_stay_in_range(self):
        m = ramp_mel(500)
        rng = np.random.default_rng(3)
        rates = []
        for _ in range(400):
            patch = tda.draw_patch(m, rng, 1.0)
            rates.append((patch[-1, 0] - patch[0, 0] + 1) / P)
        self.assertGreaterEqual(min(rates), 0.69)
        self.assertLessEqual(max(rates), 1.41)
        self.assertLess(min(rates), 0.8)      # both ends of the range are drawn
        self.assertGreater(max(rates), 1.25)

    def test_clip_shorter_than_the_stretch(self):
        m = ramp_mel(P + 4)
        rng = np.random.default_rng(0)
        for _ in range(50):
            patch = tda.draw_patch(m, rng, 1.0, (1.4, 1.4))
            self.assertEqual(patch.shape, (P, tda.N_MELS))
            self.assertLessEqual(patch[:, 0].max(), P + 3)


if __name__ == "__main__":
    unittest.main()
