"""training/conytrain/data/synth_music.py and build_audio_dataset's --synth-music plan: the MIDI files
are well formed (header, tracks, every note ended) in every style, a clip is a function of
its seed, the colouring does what it says, and the planned clips are training-only extras
that leave the other clips' seeds alone."""

import argparse
import os
import struct
import tempfile
import unittest

import numpy as np

from conytrain.data import build as bad
from conytrain.data import synth_music as sm


def read_vlq(data, i):
    v = 0
    while True:
        b = data[i]
        i += 1
        v = (v << 7) | (b & 0x7F)
        if not b & 0x80:
            return v, i


def parse_midi(path):
    """(format, division, [[(tick, status, data bytes)]]) of a file without running status."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"MThd", "no MThd"
    hlen, fmt, ntracks, division = struct.unpack(">IHHH", data[4:14])
    assert hlen == 6
    i, tracks = 14, []
    for _ in range(ntracks):
        assert data[i:i + 4] == b"MTrk", "no MTrk at %d" % i
        (n,) = struct.unpack(">I", data[i + 4:i + 8])
        j, end, tick, events = i + 8, i + 8 + n, 0, []
        while j < end:
            delta, j = read_vlq(data, j)
            tick += delta
            status = data[j]
            if status == 0xFF:
                length = data[j + 2]
                events.append((tick, status, data[j + 1:j + 3 + length]))
                j += 3 + length
            else:
                size = 2 if status & 0xF0 in (0xC0, 0xD0) else 3
                events.append((tick, status, data[j + 1:j + size]))
                j += size
        assert j == end, "track length mismatch"
        tracks.append(events)
        i = end
    assert i == len(data), "trailing bytes"
    return fmt, division, tracks


class MidiFiles(unittest.TestCase):
    def test_variable_length_quantities(self):
        for v, want in [(0, b"\x00"), (127, b"\x7f"), (128, b"\x81\x00"), (0x3FFF, b"\xff\x7f"),
                        (0x200000, b"\x81\x80\x80\x00")]:
            self.assertEqual(sm.vlq(v), want)
            self.assertEqual(read_vlq(want, 0), (v, len(want)))

    def test_every_style_writes_a_well_formed_file(self):
        seen = set()
        with tempfile.TemporaryDirectory() as d:
            for seed in range(200):
                style, tempo, tracks = sm.compose(np.random.default_rng(seed), 6.5)
                if style in seen:
                    continue
                seen.add(style)
                path = os.path.join(d, style + ".mid")
                sm.write_midi(path, tempo, tracks)
                fmt, division, parsed = parse_midi(path)
                self.assertEqual((fmt, division), (1, sm.TPQ))
                self.assertEqual(len(parsed), 1 + len(tracks))
                tempo_ev = [e for e in parsed[0] if e[1] == 0xFF and e[2][0] == 0x51]
                self.assertAlmostEqual(60e6 / int.from_bytes(tempo_ev[0][2][2:], "big"), tempo, delta=0.01)
                notes = 0
                for events in parsed:
                    self.assertEqual(events[-1][1:], (0xFF, b"\x2f\x00"), "end of track last")
                    on = {}
                    for tick, status, data in events:
                        key = (status & 0x0F, data[0]) if status < 0xF0 else None
                        if status & 0xF0 == 0x90:
                            on[key] = on.get(key, 0) + 1
                            notes += 1
                        elif status & 0xF0 == 0x80:
                            on[key] -= 1
                            self.assertGreaterEqual(on[key], 0, "note off without note on")
                    self.assertFalse(any(on.values()), "%s: notes left sounding" % style)
                self.assertGreater(notes, 10, style)
        self.assertEqual(seen, set(sm.STYLES))


@unittest.skipUnless(os.path.isfile(sm.SOUNDFONT), "no %s (fluid-soundfont-gm)" % sm.SOUNDFONT)
class Rendering(unittest.TestCase):
    def test_a_clip_is_a_function_of_its_seed(self):
        with tempfile.TemporaryDirectory() as d:
            a, da = sm.render_synth_music(np.random.default_rng(5), 2.0, d, bad.sox_decode)
            b, db = sm.render_synth_music(np.random.default_rng(5), 2.0, d, bad.sox_decode)
            c, _ = sm.render_synth_music(np.random.default_rng(6), 2.0, d, bad.sox_decode)
            self.assertEqual(os.listdir(d), [], "temporary files left")
        self.assertEqual(len(a), 32000)
        self.assertEqual(da, db)
        self.assertTrue(np.array_equal(a, b))
        self.assertFalse(np.array_equal(a, c[:len(a)]))
        self.assertGreater(bad.db(bad.rms(a)), -50.0, "a silent clip")


class Colouring(unittest.TestCase):
    def rng_choosing(self, saturate, band):
        """An rng whose first uniform draws decide saturate and band as asked."""
        for seed in range(1000):
            r = np.random.default_rng(seed)
            s = r.random() < sm.SATURATE_P
            if s:
                r.uniform()
            if s == saturate and (r.random() < sm.BAND_LIMIT_P) == band:
                return np.random.default_rng(seed)
        raise AssertionError("no seed")

    def test_overdrive_keeps_the_peak_and_band_limit_empties_the_outside(self):
        t = np.arange(16000) / 16000.0
        x = 0.3 * np.sin(2 * np.pi * 220 * t) + 0.05 * np.sin(2 * np.pi * 7800 * t)
        y, post = sm.colour(self.rng_choosing(True, False), x.copy())
        self.assertIn("drive=", post)
        self.assertAlmostEqual(np.abs(y).max(), np.abs(x).max(), delta=0.02)
        self.assertGreater(np.abs(y - x).max(), 0.01)
        y, post = sm.colour(self.rng_choosing(False, True), x.copy())
        self.assertIn("band=", post)
        hi = float(post.split("-")[-1].split()[0])
        spec = np.abs(np.fft.rfft(y))
        f = np.fft.rfftfreq(len(y), 1 / 16000)
        self.assertLess(spec[f > hi + 1].max(), 1e-6 * spec.max())
        y, post = sm.colour(self.rng_choosing(False, False), x.copy())
        self.assertEqual(post, "")
        self.assertTrue(np.array_equal(y, x))


class Plan(unittest.TestCase):
    def test_training_only_extras_with_their_own_seeds(self):
        a = argparse.Namespace(seed=20261121, out="/tmp/ds", clip_seconds=5.0)
        jobs = bad.plan_synth_music(7, a)
        self.assertEqual(len(jobs), 7)
        self.assertEqual({(j["label"], j["split"], j["set"], j["family"]) for j in jobs},
                         {("music", "train", "extra", "synth_music")})
        self.assertEqual(len({j["group"] for j in jobs}), 7)
        self.assertEqual(len({tuple(j["seed"]) for j in jobs}), 7)
        # seed tags 0-2 are the base train/test and extra plans: 4 is this plan's own
        self.assertEqual({j["seed"][3] for j in jobs}, {4})
        self.assertTrue(all(j["path"].startswith("clips/train/music/music_synth_music_x") for j in jobs))


if __name__ == "__main__":
    unittest.main()
