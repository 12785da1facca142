"""train_yamnet_audio's pieces: synth_tones' clips are audible steady tones labelled noise
(never at silence levels), and JoinedWindows' training windows: joined clips with the
label of the window's newest token, streams that continue a recording or a class when
asked to, warm-up windows from a stream's start."""

import argparse
import unittest

import numpy as np

from conytrain.audio.yamnet import JoinedWindows
from conytrain.data import synth_tones

L = 17          # tokens a clip


def opts(**kw):
    a = dict(clips_per_stream=4, p_recording=0.0, p_class=0.0, warmup_fraction=0.0)
    a.update(kw)
    return argparse.Namespace(**a)


def clips(n_per_class=4, classes=3):
    """Token value = clip index, so a window shows which clips it joined."""
    N = n_per_class * classes
    x = np.repeat(np.arange(N, dtype=np.float32)[:, None, None], L, 1)
    y = np.repeat(np.arange(classes), n_per_class)
    groups = [f"g{i // 2}" for i in range(N)]            # two clips a recording
    return x, y, groups


class Tones(unittest.TestCase):
    def test_audible_steady_and_noise(self):
        n = synth_tones.SR * 5
        for i in range(12):
            kind = ("sine", "hum")[i % 2]
            y, detail = synth_tones.clip(np.random.default_rng([26, 0, i]), kind, n)
            level = 20 * np.log10(np.sqrt(np.mean(y ** 2)))
            self.assertGreater(level, -43.0, detail)     # silence is below -58 dBFS
            self.assertLess(level, -11.0, detail)
            # steady: the level of every 0.5 s is within 1 dB of the clip's
            parts = y.reshape(10, -1)
            spread = 20 * np.log10(np.sqrt((parts ** 2).mean(1)) / np.sqrt(np.mean(y ** 2)))
            self.assertLess(np.abs(spread).max(), 1.0, detail)


class Windows(unittest.TestCase):
    def test_label_is_the_newest_tokens_clip(self):
        x, y, groups = clips()
        s = JoinedWindows(x, y, groups, 32, 63, opts(), seed=1)
        for _ in range(5):
            xb, off, yb = s.batch(16)
            self.assertEqual(tuple(xb.shape), (16, 32, 1))
            newest = xb[:, -1, 0].numpy().astype(int)
            self.assertTrue((y[newest] == yb.numpy()).all())
            self.assertTrue(((off >= 0) & (off < 63)).all())
            # 32 tokens of 17-token clips span two or three clips (a clip can follow
            # itself), each a whole run of its tokens
            for w in xb[:, :, 0].numpy().astype(int):
                starts = [k for k, v in enumerate(w) if k == 0 or v != w[k - 1]]
                self.assertLessEqual(len(starts), 3)
                inner = np.diff(starts + [32])[1:-1]
                self.assertTrue((inner % L == 0).all())

    def test_streams_continue_the_recording_or_class(self):
        x, y, groups = clips()
        rec = JoinedWindows(x, y, groups, 32, 63, opts(p_recording=1.0), seed=2)
        for _ in range(20):
            seq = rec.stream()
            self.assertEqual(len({groups[i] for i in seq}), 1)
            self.assertTrue(all(a != b for a, b in zip(seq, seq[1:])))   # the other clip
        cls = JoinedWindows(x, y, groups, 32, 63, opts(p_class=1.0), seed=3)
        for _ in range(20):
            self.assertEqual(len({int(y[i]) for i in cls.stream()}), 1)

    def test_warm_up_windows_start_a_stream(self):
        x, y, groups = clips()
        s = JoinedWindows(x, y, groups, 32, 63, opts(warmup_fraction=1.0), seed=4)
        xb, off, yb = s.batch(8)
        self.assertLess(xb.shape[1], 32)
        self.assertTrue((off == 0).all())


if __name__ == "__main__":
    unittest.main()
