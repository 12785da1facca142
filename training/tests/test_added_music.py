"""build_audio_dataset's added tables (plan_added): version 11's added music clips are cut
only from the music directories of added_music.tsv's four packages (not from their sound
effects or other files); version 12's added clips of noise and music come from the rows
of their class, a noise recording's takes form one group; both are training-only extras of
families of their own, a clip's seed has a tag no other plan uses, and a plan is a function
of the seed that does not change when the other table is planned too."""

import argparse
import os
import subprocess
import tempfile
import unittest
from unittest import mock

from conytrain.data import build as bad

READ_TABLE = bad.read_table  # the real one, before the tests mock it

def tone(path, seconds, hz):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    subprocess.run(["sox", "-n", "-r", "16000", "-c", "1", path, "synth", str(seconds), "sine", str(hz)],
                   check=True)


def with_minimum(name, minimum):
    """The rows of versions/NAME with every minimum replaced (the trees here are small)."""
    return [dict(r, minimum=str(minimum)) for r in READ_TABLE(name)]


# version 12's test table: a music row and two noise rows of two packages
V12_ROWS = [
    dict(**{"class": "music"}, package="pkg-a", directory="usr/share/a/music", regex=r"\.ogg$", minimum="2"),
    dict(**{"class": "noise"}, package="pkg-a", directory="usr/share/a/sounds", regex=r"/engine[0-9]*\.wav$",
         minimum="3"),
    dict(**{"class": "noise"}, package="pkg-b", directory="usr/share/b", regex=r"/(rain|fan)\.ogg$", minimum="2"),
]


def plan_with_tables(read_table, src, counts, version, seed=20261121):
    """build.plan_added over the package trees in @src, its tables read by @read_table."""
    a = argparse.Namespace(seed=seed, out="/tmp/ds", clip_seconds=5.0, jobs=2)
    with mock.patch.object(bad, "read_table", read_table):
        return bad.plan_added(counts, version, bad.Catalogue(src), a)


class AddedMusic(unittest.TestCase):
    def make_tree(self, src):
        """Two tracks in each package's music directory, plus decoys beside them: a sound
        effect in another directory, a shell script and a file of another extension."""
        for i, r in enumerate(READ_TABLE("added_music.tsv")):
            pkg, sub, rx = r["package"], r["directory"], r["regex"]
            ext = ".wav" if rx.endswith(r"\.wav$") else ".ogg"
            for k in range(2):
                tone(os.path.join(src, pkg, sub, "track%d%s" % (k, ext)), 12, 220 + 40 * i + 10 * k)
            tone(os.path.join(src, pkg, sub, "other" + (".ogg" if ext == ".wav" else ".wav")), 12, 330)
            tone(os.path.join(src, pkg, "usr/share/sfx", "boom" + ext), 12, 500)
        open(os.path.join(src, "naev-data", "usr/share/naev/dat/snd/music/checkgain.sh"), "w").close()
        # version 12's test packages: three takes of one engine, rain, a fan, a decoy
        for k in range(3):
            tone(os.path.join(src, "pkg-a/usr/share/a/sounds/engine%d.wav" % (k + 1)), 2, 90 + k)
        tone(os.path.join(src, "pkg-a/usr/share/a/sounds/explosion.wav"), 2, 700)
        for k in range(2):
            tone(os.path.join(src, "pkg-a/usr/share/a/music/song%d.ogg" % k), 12, 440 + k)
        tone(os.path.join(src, "pkg-b/usr/share/b/rain.ogg"), 3, 2000)
        tone(os.path.join(src, "pkg-b/usr/share/b/fan.ogg"), 3, 120)

    def read_table(self, name):
        return V12_ROWS if name == "added_v12.tsv" else with_minimum(name, 2)

    def plan(self, src, counts, version, seed=20261121):
        return plan_with_tables(self.read_table, src, counts, version, seed)

    def test_music_directories_only_as_training_extras(self):
        with tempfile.TemporaryDirectory() as src:
            self.make_tree(src)
            jobs = self.plan(src, {"music": 16}, 11)
            self.assertEqual(len(jobs), 16)
            self.assertEqual({(j["label"], j["split"], j["set"], j["family"]) for j in jobs},
                             {("music", "train", "extra", "train_only_music11")})
            files = {j["spec"]["file"] for j in jobs}
            self.assertTrue(all(os.path.basename(f).startswith("track") for f in files), files)
            # every package's tracks are used (16 clips round-robin over 8 files)
            self.assertEqual(len(files), 8)
            self.assertEqual(len({j["group"] for j in jobs}), 8)
            # seed tags 0-2 are the base and extra plans, 4 --synth-music's: 6 is this plan's
            self.assertEqual({j["seed"][3] for j in jobs}, {6})
            self.assertEqual(len({tuple(j["seed"]) for j in jobs}), 16)
            self.assertTrue(all(j["path"].startswith("clips/train/music/music_train_only_music11_x")
                                for j in jobs))
            again = self.plan(src, {"music": 16}, 11)
            self.assertEqual([(j["group"], j["spec"]["starts"]) for j in again],
                             [(j["group"], j["spec"]["starts"]) for j in jobs])

    def test_version_12_noise_and_music(self):
        with tempfile.TemporaryDirectory() as src:
            self.make_tree(src)
            jobs = self.plan(src, {"noise": 9, "music": 4}, 12)
            self.assertEqual(len(jobs), 13)
            self.assertEqual({(j["label"], j["family"], j["set"], j["added"]) for j in jobs},
                             {("noise", "train_only_noise12", "extra", 12),
                              ("music", "train_only_music12", "extra", 12)})
            noise = [j for j in jobs if j["label"] == "noise"]
            self.assertEqual(len(noise), 9)
            # the engine's three takes are one group; the decoy explosion is never used
            self.assertEqual({j["group"] for j in noise},
                             {"pkg-a:/usr/share/a/sounds/engine", "pkg-b:/usr/share/b/rain",
                              "pkg-b:/usr/share/b/fan"})
            self.assertEqual({j["spec"]["kind"] for j in noise}, {"loop"})
            self.assertTrue(all(j["spec"]["crossfade"] for j in noise))
            self.assertEqual({os.path.basename(j["spec"]["file"]) for j in jobs if j["label"] == "music"},
                             {"song0.ogg", "song1.ogg"})
            # its own seed tag and file names, none shared with version 11's
            self.assertEqual({j["seed"][3] for j in jobs}, {8})
            self.assertTrue(all(os.path.basename(j["path"]).startswith(
                "%s_train_only_%s12_x" % (j["label"], j["label"])) for j in jobs))
            # version 11's clips are other files (its plan has an RNG of its own)
            v11 = self.plan(src, {"music": 16}, 11)
            self.assertFalse({j["path"] for j in v11} & {j["path"] for j in jobs})
            again = self.plan(src, {"noise": 9, "music": 4}, 12)
            self.assertEqual([(j["group"], j["spec"].get("starts"), j["seed"]) for j in again],
                             [(j["group"], j["spec"].get("starts"), j["seed"]) for j in jobs])

    def test_a_missing_package_is_an_error(self):
        with tempfile.TemporaryDirectory() as src:
            self.make_tree(src)
            os.rename(os.path.join(src, "ardentryst"), os.path.join(src, "elsewhere"))
            with self.assertRaisesRegex(bad.DataError, "ardentryst"):
                self.plan(src, {"music": 16}, 11)

    def test_too_few_files_is_an_error(self):
        with tempfile.TemporaryDirectory() as src:
            self.make_tree(src)
            os.remove(os.path.join(src, "pkg-a/usr/share/a/sounds/engine3.wav"))
            with self.assertRaisesRegex(bad.DataError, "at least 3 files for pkg-a noise"):
                self.plan(src, {"noise": 4}, 12)


if __name__ == "__main__":
    unittest.main()
