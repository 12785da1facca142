"""build_audio_dataset's --added-music plan (data set version 11): the clips are cut only from
the music directories of ADDED_MUSIC's four packages (not from their sound effects or other
files), they are training-only extras of their own family, a clip's seed has a tag no other
plan uses, and the plan is a function of the seed."""

import argparse
import os
import subprocess
import tempfile
import unittest
from unittest import mock

from conytrain.data import build as bad


def tone(path, seconds, hz):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    subprocess.run(["sox", "-n", "-r", "16000", "-c", "1", path, "synth", str(seconds), "sine", str(hz)],
                   check=True)


class AddedMusic(unittest.TestCase):
    def make_tree(self, src):
        """Two tracks in each package's music directory, plus decoys beside them: a sound
        effect in another directory, a shell script and a file of another extension."""
        for i, (pkg, sub, rx, _) in enumerate(bad.ADDED_MUSIC):
            ext = ".wav" if rx.endswith(r"\.wav$") else ".ogg"
            for k in range(2):
                tone(os.path.join(src, pkg, sub, "track%d%s" % (k, ext)), 12, 220 + 40 * i + 10 * k)
            tone(os.path.join(src, pkg, sub, "other" + (".ogg" if ext == ".wav" else ".wav")), 12, 330)
            tone(os.path.join(src, pkg, "usr/share/sfx", "boom" + ext), 12, 500)
        open(os.path.join(src, "naev-data", "usr/share/naev/dat/snd/music/checkgain.sh"), "w").close()

    def plan(self, src, seed=20261121, n=16):
        a = argparse.Namespace(seed=seed, out="/tmp/ds", clip_seconds=5.0, jobs=2)
        few = [(pkg, sub, rx, 2) for pkg, sub, rx, _ in bad.ADDED_MUSIC]
        with mock.patch.object(bad, "ADDED_MUSIC", few):
            return bad.plan_added_music(n, bad.Catalogue(src), a)

    def test_music_directories_only_as_training_extras(self):
        with tempfile.TemporaryDirectory() as src:
            self.make_tree(src)
            jobs = self.plan(src)
            self.assertEqual(len(jobs), 16)
            self.assertEqual({(j["label"], j["split"], j["set"], j["family"]) for j in jobs},
                             {("music", "train", "extra", bad.ADDED_MUSIC_FAMILY)})
            files = {j["spec"]["file"] for j in jobs}
            self.assertTrue(all(os.path.basename(f).startswith("track") for f in files), files)
            # every package's tracks are used (16 clips round-robin over 8 files)
            self.assertEqual(len(files), 8)
            self.assertEqual(len({j["group"] for j in jobs}), 8)
            # seed tags 0-2 are the base and extra plans, 4 --synth-music's: 6 is this plan's
            self.assertEqual({j["seed"][3] for j in jobs}, {6})
            self.assertEqual(len({tuple(j["seed"]) for j in jobs}), 16)
            self.assertTrue(all(j["path"].startswith("clips/train/music/music_%s_x" % bad.ADDED_MUSIC_FAMILY)
                                for j in jobs))
            again = self.plan(src)
            self.assertEqual([(j["group"], j["spec"]["starts"]) for j in again],
                             [(j["group"], j["spec"]["starts"]) for j in jobs])

    def test_a_missing_package_is_an_error(self):
        with tempfile.TemporaryDirectory() as src:
            self.make_tree(src)
            os.rename(os.path.join(src, "ardentryst"), os.path.join(src, "elsewhere"))
            with self.assertRaisesRegex(bad.DataError, "ardentryst"):
                self.plan(src)


if __name__ == "__main__":
    unittest.main()
