"""train_default_audio's CNN patches: draw_patch is the plain random slice; augment mixes
another clip's patch in at the asked level, never into silence, and draws the same random
numbers as the code of commit e584712 (random EQ, background noise, time stretch and mixup,
all off there, have since been removed: the shipped recipes' random streams are unchanged)."""

import unittest

import numpy as np

from conytrain.audio import train_default as tda

P = tda.PATCH
ANIMAL, NOISE, SILENCE = 0, 1, 2
CALL_BAND, NOISE_BAND = 5, 60


def one_band_clip(band, frames=200):
    """Log-mel of a clip whose energy (1.0) is all in one mel band."""
    e = np.zeros((frames, tda.N_MELS))
    e[:, band] = 1.0
    return np.log(e + tda.LOG_OFFSET).astype(np.float32)


def noise_to_call_db(patch):
    """How far the noise band sits below the call band in a log-mel patch (dB, mean magnitude
    over the patch); the band shift moves bands by up to 2, so the loudest of the nearby
    bands is taken. NaN where a frequency mask hid the call; -inf where it hid the noise."""
    e = np.maximum(np.exp(patch.astype(np.float64)) - tda.LOG_OFFSET, 0.0).mean(0)
    call = e[CALL_BAND - 2:CALL_BAND + 3].max()
    noise = e[NOISE_BAND - 2:NOISE_BAND + 3].max()
    if call <= 0:
        return np.nan
    return 20 * np.log10(noise / call) if noise > 0 else -np.inf


class Augment(unittest.TestCase):
    def setUp(self):
        self.mels = [one_band_clip(CALL_BAND), one_band_clip(CALL_BAND),
                     one_band_clip(NOISE_BAND), one_band_clip(0) - 30.0]
        self.y = np.array([ANIMAL, ANIMAL, NOISE, SILENCE])
        self.calls = np.stack([self.mels[0][:P]] * 200)

    def run_augment(self, seed=1):
        rng = np.random.default_rng(seed)
        out, labels = tda.augment(self.calls, np.full(200, ANIMAL), self.mels, self.y, SILENCE,
                                  rng, 0.0, np.full(200, -20.0))
        return out, labels, rng

    def test_add_below_sets_the_mean_magnitude_ratio(self):
        e = np.full((P, tda.N_MELS), 2.0)
        other = np.full((P, tda.N_MELS), 7.0)
        mixed = tda.add_below(e, other, 6.0)
        self.assertAlmostEqual(20 * np.log10((mixed - e).mean() / e.mean()), -6.0, places=9)

    def test_random_patch_energy_only_from_accepted_classes(self):
        rng = np.random.default_rng(0)
        for _ in range(50):
            e = tda.random_patch_energy(self.mels, self.y, rng, lambda c: c == NOISE)
            self.assertEqual(e.shape, (P, tda.N_MELS))
            self.assertEqual(int(e.mean(0).argmax()), NOISE_BAND)

    def test_mix_is_12_to_30_db_down_and_draws_the_same_numbers(self):
        out, labels, rng = self.run_augment()
        self.assertTrue(np.all(labels == ANIMAL))
        db = np.array([noise_to_call_db(p) for p in out])
        # only the mix of another clip (12..30 dB down) can bring the noise band in
        db = db[~np.isnan(db)]
        self.assertGreater(len(db), 150)
        self.assertTrue(np.all(db <= -12.0 + 0.1), db.max())
        # what augment gave for these patches and seed with the code of commit e584712
        self.assertAlmostEqual(float(out.astype(np.float64).sum()), -5566950.069579136, delta=1e-3)
        self.assertAlmostEqual(float((out.astype(np.float64) ** 2).sum()), 25630771.53184701,
                               delta=1e-2)
        self.assertEqual(rng.random(), 0.4650183949765281)

    def test_silence_patches_get_nothing_mixed_in(self):
        quiet = np.stack([self.mels[3][:P]] * 20)
        rng = np.random.default_rng(2)
        out, labels = tda.augment(quiet, np.full(20, SILENCE), self.mels, self.y, SILENCE, rng,
                                  0.0, np.full(20, -100.0))
        self.assertTrue(np.all(labels == SILENCE))
        e = np.maximum(np.exp(out.astype(np.float64)) - tda.LOG_OFFSET, 0.0)
        self.assertLess(e[:, :, NOISE_BAND - 2:NOISE_BAND + 3].max(), 1e-6)


class DrawPatch(unittest.TestCase):
    def test_plain_slice_and_the_same_numbers(self):
        # frame t holds t in every band: the patch is a slice at the offset drawn
        m = np.repeat(np.arange(300, dtype=np.float32)[:, None], tda.N_MELS, 1)
        a, b = np.random.default_rng(5), np.random.default_rng(5)
        for _ in range(20):
            patch = tda.draw_patch(m, a)
            t = int(b.integers(0, m.shape[0] - P + 1))
            self.assertTrue(np.array_equal(patch, m[t:t + P]))
        self.assertEqual(a.random(), b.random())


if __name__ == "__main__":
    unittest.main()
