"""The version-7 rows of conytrain/data/versions/train_only.tsv (data set version 9): the
regexes pick the recordings by name, each into its class, and leave out the ones whose class
is not plain (instruments, toys, silent animals, a second copy of a car horn);
--without-v6-list leaves out only train_only_v6.tsv."""

import os
import tempfile
import unittest

from conytrain.data import build as bad

# each version-7 package's directory (one a package)
DIR = {pkg: sub for rows in bad.TRAIN_ONLY[7].values() for pkg, sub, _, _ in rows}

QABCS_TAKEN = {
    "animal": ["owl", "eagle-owl", "squirrel", "moth", "ladybug", "grasshopper", "wolf", "cat"],
    "noise": ["airplane", "fire", "train", "zipper", "helicopter"],
    "alarm": ["whistle"],
}
QABCS_LEFT_OUT = ["firebird", "snail", "spider", "fish", "piano", "crane", "cheburashka",
                  "catapult", "bicycle", "clock", "owl_desc"]


class TrainOnlyV7(unittest.TestCase):
    def make_tree(self, src):
        def touch(pkg, sub, name):
            p = os.path.join(src, pkg, sub, name)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            open(p, "wb").close()
        # every name the tables expect, so that need() is satisfied, then the decoys
        for label, rows in bad.TRAIN_ONLY[7].items():
            for pkg, sub, rx, minimum in rows:
                for i in range(minimum):
                    touch(pkg, sub, "filler_%s_%d.x" % (label, i))
        for names in QABCS_TAKEN.values():
            for n in names:
                touch("qabcs-data", DIR["qabcs-data"], n + ".ogg")
        for n in QABCS_LEFT_OUT:
            touch("qabcs-data", DIR["qabcs-data"], n + ".ogg")
        for n in ["siren.wav", "police.wav", "honkhonk-hi.wav", "honkhonk-high.wav",
                  "honkhonk-med.wav", "honkhonk-low.wav", "quack.wav", "quackquack.wav",
                  "heavytraffic.wav", "fire.wav", "ignition.wav", "explosion-low.wav", "beep.wav"]:
            touch("micropolis-data", DIR["micropolis-data"], n)
        for n in ["homedecor_bathroom/sounds/homedecor_toilet_flush.ogg",
                  "homedecor_bathroom/sounds/homedecor_shower.ogg",
                  "homedecor_common/sounds/homedecor_faucet.ogg",
                  "fake_fire/sounds/fire_small.ogg", "fake_fire/sounds/fire_extinguish.ogg",
                  "homedecor_electrical/sounds/homedecor_doorbell.ogg",
                  "homedecor_gastronomy/sounds/toaster.ogg"]:
            touch("minetest-mod-homedecor", DIR["minetest-mod-homedecor"], n)

    def picked(self, src, label):
        rows = bad.TRAIN_ONLY[7][label]
        return {os.path.relpath(f, src) for pkg, sub, rx, _ in rows
                for f in bad.find(os.path.join(src, pkg), sub, rx)}

    def test_classes_by_name(self):
        with tempfile.TemporaryDirectory() as src:
            self.make_tree(src)
            got = {c: self.picked(src, c) for c in ("alarm", "animal", "noise")}
            for label, names in QABCS_TAKEN.items():
                for n in names:
                    self.assertIn(os.path.join("qabcs-data", DIR["qabcs-data"], n + ".ogg"), got[label], n)
            everything = set().union(*got.values())
            for n in QABCS_LEFT_OUT:
                self.assertNotIn(os.path.join("qabcs-data", DIR["qabcs-data"], n + ".ogg"), everything, n)
            names = {c: {os.path.basename(p) for p in got[c] if not os.path.basename(p).startswith("filler")}
                     for c in got}
            self.assertEqual(names["alarm"] - {n + ".ogg" for n in QABCS_TAKEN["alarm"]},
                             {"siren.wav", "police.wav", "honkhonk-hi.wav", "honkhonk-med.wav",
                              "honkhonk-low.wav", "homedecor_doorbell.ogg"})
            self.assertTrue({"homedecor_toilet_flush.ogg", "homedecor_shower.ogg", "homedecor_faucet.ogg",
                             "fire_small.ogg", "heavytraffic.wav", "fire.wav", "ignition.wav"} <= names["noise"])
            for n in ("fire_extinguish.ogg", "toaster.ogg", "explosion-low.wav", "beep.wav", "honkhonk-high.wav"):
                self.assertNotIn(n, set().union(*names.values()), n)
            self.assertTrue({"quack.wav", "quackquack.wav"} <= names["animal"])
            # no recording in two classes
            self.assertEqual(len(everything), sum(len(v) for v in got.values()))

    def test_v6_list_in_or_out(self):
        # --without-v6-list (data set version 10) passes v6=None: only the tables count
        with tempfile.TemporaryDirectory() as src:
            self.make_tree(src)
            cat = bad.Catalogue(src)
            saved = bad.TRAIN_ONLY
            bad.TRAIN_ONLY = {7: saved[7]}
            try:
                listed = os.path.join(src, "flightgear-data-base", "horn.wav")
                with_list, pkgs = bad.train_only_files(cat, 7, "alarm", {"alarm": [listed]})
                without, pkgs_without = bad.train_only_files(cat, 7, "alarm", None)
            finally:
                bad.TRAIN_ONLY = saved
            self.assertEqual(sorted(without + [listed]), with_list)
            self.assertIn("flightgear-data-base", pkgs)
            self.assertNotIn("flightgear-data-base", pkgs_without)
            self.assertIn("micropolis-data", pkgs_without)


if __name__ == "__main__":
    unittest.main()
