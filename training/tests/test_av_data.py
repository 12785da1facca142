"""The fused audio-video model's data code (conytrain/av/): the split keeps a stamp's
photograph and sound together and a language's speakers in one split; the scene sampler
labels the last step of a window with its scene's class, never leaves a window without
both senses when told a sense is gone, keeps the other sense truthful then, and packs
tokens in FusedClassifier.pack's layout."""

import unittest

import numpy as np

from unittest import mock

from conytrain.av import build, evalset, sources
from conytrain.av import train as avtrain


def fake_data(rng):
    """Tokens whose first value is the class id: a contradicting span is visible."""
    out = {}
    for sense, size, n, L in (("audio", 6, 10, 29), ("video", 4, 10, 16)):
        x = rng.random((n, L, size)).astype(np.float32)
        cls = np.array([sources.CLASSES[i % 5] for i in range(n)])
        x[:, :, 0] = np.array([i % 5 for i in range(n)])[:, None]
        out[sense], out[f"{sense}_cls"] = x, cls
    return out


class SplitTest(unittest.TestCase):
    def test_stamp_photo_and_sound_share_the_split(self):
        png = f"{sources.TUX}/animals/mammals/dogs/dog.png"
        ogg = f"{sources.TUX}/animals/mammals/dogs/dog.ogg"
        g1 = sources.group_of("animal", "cutout", png)
        g2 = sources.group_of("animal", "sound", ogg)
        self.assertEqual(g1, g2)
        self.assertEqual(sources.split_of(g1), sources.split_of(g2))

    def test_languages_and_takes(self):
        d = f"{sources.TUX}/animals/birds"
        self.assertEqual(sources.group_of("talking", "speech", f"{d}/crow_desc_da.ogg"), "lang:da")
        self.assertEqual(sources.group_of("talking", "speech", f"{d}/crow_desc.ogg"), "lang:en")
        self.assertEqual(sources.split_of("lang:da"), "test")
        a = sources.group_of("noise", "sound", "usr/share/games/lincity-ng/sounds/Water1.wav")
        b = sources.group_of("noise", "sound", "usr/share/games/lincity-ng/sounds/Water5.wav")
        self.assertEqual(a, b)

    def test_photo_set_two_adds_photographs_only(self):
        # set 2 must leave set 1 and every sound alone, so the clips' draws stay the same
        one, rcc_one = sources.sources_of(1)
        two, rcc_two = sources.sources_of(2)
        self.assertEqual(two[:len(one)], one)
        self.assertEqual(rcc_two[:len(rcc_one)], rcc_one)
        self.assertTrue(all(kind == "photo" for _, _, _, kind in two[len(one):]))
        self.assertLess(set(sources.packages(1)), set(sources.packages(2)))
        kpa = sources.KPA
        self.assertEqual(sources.group_of("talking", "photo", f"{kpa}/bar55_2.jpg"),
                         sources.group_of("talking", "photo", f"{kpa}/bar55.jpg"))
        with self.assertRaisesRegex(ValueError, "photo set 3"):
            sources.sources_of(3)

    def test_sound_set_two_adds_music_only(self):
        self.assertEqual(sources.added_sounds(1), [])
        added = sources.added_sounds(2)
        self.assertTrue(all(c == "music" and kind == "sound" for c, _, _, kind in added))
        # never a package of rule 11's grid (singularity-music is its music)
        self.assertFalse({p for _, p, _, _ in added} & set(evalset.PACKAGES))
        self.assertLess(set(sources.packages(2)), set(sources.packages(2, 2)))
        with self.assertRaisesRegex(ValueError, "sound set 3"):
            sources.added_sounds(3)
        self.assertEqual(sources.evenly(list(range(30)), 12),
                         [0, 2, 5, 7, 10, 12, 15, 17, 20, 22, 25, 27])
        self.assertEqual(sources.evenly([3, 4], 12), [3, 4])

    def test_added_clips_leave_set_one_draws_alone(self):
        # set 1's clips and the split's stream after them (build's shots) must not move
        rate = 16000
        tracks = {f"t{i}": np.sin(np.arange(40 * rate) * (i + 1) * 1e-3).astype(np.float32)
                  for i in range(4)}
        item = lambda i, s: dict(cls="music", kind="sound", path=f"t{i}", group=f"g{i}",
                                 split="train", sound_set=s, package="p")
        one = [item(0, 1), item(1, 1)]
        two = one + [item(2, 2), item(3, 2)]
        with mock.patch.object(build, "SPEECH_UTTERANCES", 0), \
                mock.patch.object(build.media, "decode", lambda p: tracks[p]):
            c1, r1 = build.split_clips(one, "train", 5)
            c2, r2 = build.split_clips(two, "train", 5)
        n1 = len(c1)
        self.assertGreater(len(c2), n1)
        self.assertEqual([g for _, g, _ in c2[n1:]], ["g2"] * 3 + ["g3"] * 3)
        for a, b in zip(c1, c2[:n1]):
            np.testing.assert_array_equal(a[2], b[2])
        self.assertEqual(r1.integers(1 << 30), r2.integers(1 << 30))


class SamplerTest(unittest.TestCase):
    def test_labels_and_layout(self):
        rng = np.random.default_rng(0)
        s = avtrain.SceneSampler(fake_data(rng), ("audio", "video"), 8, 15, p_absent=0,
                                 p_contra=0, p_noisy=0, seed=1)
        tok, pres, lab = s.stream(40)
        self.assertEqual(tok["audio"].shape, (40, 6))
        self.assertTrue((tok["audio"][:, 0] == lab).all())      # clean: both senses agree
        self.assertTrue((tok["video"][:, 0] == lab).all())
        x, off, y = s.batch(5)
        self.assertEqual(tuple(x.shape[::2]), (5, 6 + 4 + 2))
        self.assertTrue((x[:, -1, 0].long() == y).all())       # label of the last step

    def test_gone_sense_leaves_the_other_truthful(self):
        rng = np.random.default_rng(0)
        s = avtrain.SceneSampler(fake_data(rng), ("audio", "video"), 8, 15, p_absent=0,
                                 p_contra=1.0, p_noisy=0, seed=2, contra_senses=("video",))
        tok, pres, lab = s.stream(60, gone="audio")
        self.assertFalse(pres["audio"].any())
        self.assertTrue(pres["video"].all())
        self.assertTrue((tok["video"][:, 0] == lab).all())
        tok, pres, lab = s.stream(60)                          # every scene contradicts
        self.assertTrue((tok["audio"][:, 0] == lab).all())
        self.assertFalse((tok["video"][:, 0] == lab).any())

    def test_pack_zeroes_absent_tokens(self):
        tok = {"audio": np.ones((3, 2), np.float32), "video": 2 * np.ones((3, 1), np.float32)}
        pres = {"audio": np.array([True, False, True]), "video": np.array([False, True, True])}
        p = avtrain.pack(tok, pres, ("audio", "video"))
        np.testing.assert_array_equal(p, [[1, 1, 0, 1, 0], [0, 0, 2, 0, 1], [1, 1, 2, 1, 1]])


if __name__ == "__main__":
    unittest.main()
