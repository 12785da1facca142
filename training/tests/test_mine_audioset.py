"""training/mine_audioset.py (issue 44, rule 33): the alarm and animal groups are YAMNet's own
AudioSet classes, `cony tag` lines parse into window scores, and a file is a candidate only
above the threshold and above the other group, Speech and Music; build.py --reuse hard-links
only the clips an earlier build planned identically."""

import csv
import os
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from conytrain.data import mine_audioset as mine  # noqa: E402
from conytrain.data import build as bad  # noqa: E402

LABELS = mine.read_labels(os.path.join(HERE, "..", "..", "models", "yamnet", "labels.csv"))


class Groups(unittest.TestCase):
    def test_groups_are_yamnet_classes(self):
        alarm, animal = mine.groups(LABELS)
        self.assertEqual(len(alarm), len(mine.ALARM))
        names = {LABELS[i] for i in animal}
        self.assertIn("Dog", names)
        self.assertIn("Cricket", names)
        self.assertNotIn("Cowbell", names)
        self.assertNotIn("Siren", names)
        self.assertFalse(set(alarm) & set(animal))

    def test_unknown_class_is_named(self):
        with self.assertRaisesRegex(mine.MineError, "'Alarm' is not among"):
            mine.groups([n for n in LABELS if n != "Alarm"])


class Candidates(unittest.TestCase):
    def scores(self, windows):
        s = np.zeros((len(windows), len(LABELS)), np.float32)
        for k, w in enumerate(windows):
            for name, v in w.items():
                s[k, LABELS.index(name)] = v
        return s

    def row(self, windows, threshold=0.5):
        alarm, animal = mine.groups(LABELS)
        return mine.summarise(self.scores(windows), LABELS, alarm, animal, threshold)

    def test_parse_tag_lines(self):
        text = "0\t0.00 s\tDog 0.900\tBark 0.500\n1\t0.48 s\tDog 0.700\tAnimal 0.600\n"
        s = mine.parse_tag(text, LABELS)
        self.assertEqual(s.shape, (2, len(LABELS)))
        self.assertAlmostEqual(float(s[0, LABELS.index("Bark")]), 0.5, places=6)
        self.assertAlmostEqual(float(s[1, LABELS.index("Animal")]), 0.6, places=6)
        self.assertEqual(mine.parse_tag("", LABELS).shape, (0, len(LABELS)))

    def test_mean_over_windows_against_the_threshold(self):
        r = self.row([{"Dog": 0.9}, {"Cat": 0.3}])
        self.assertAlmostEqual(r["animal"], 0.6, places=5)
        self.assertEqual(r["candidate"], "animal")
        self.assertEqual(self.row([{"Dog": 0.9}, {"Cat": 0.05}])["candidate"], "")
        self.assertEqual(self.row([{"Siren": 0.8, "Alarm": 0.6}])["candidate"], "alarm")

    def test_speech_music_or_other_group_above_is_no_candidate(self):
        self.assertEqual(self.row([{"Dog": 0.7, "Speech": 0.8}])["candidate"], "")
        self.assertEqual(self.row([{"Ringtone": 0.7, "Music": 0.9}])["candidate"], "")
        self.assertEqual(self.row([{"Dog": 0.7, "Telephone": 0.8}])["candidate"], "alarm")
        self.assertEqual(self.row([])["candidate"], "")


class Reuse(unittest.TestCase):
    def test_links_only_identical_plans(self):
        with tempfile.TemporaryDirectory() as tmp:
            old, new = os.path.join(tmp, "old"), os.path.join(tmp, "new")
            rows = []
            for k, fam in enumerate(("fam_a", "fam_b")):
                path = "clips/train/animal/animal_%s_%04d.wav" % (fam, k)
                os.makedirs(os.path.dirname(os.path.join(old, path)), exist_ok=True)
                open(os.path.join(old, path), "wb").write(b"RIFF%d" % k)
                rows.append(dict(path=path, label="animal", source_file="p:/x", split="train",
                                 duration="5.000", origin="real", package="p", group="g%d" % k,
                                 family=fam, detail="", set="base"))
            with open(os.path.join(old, "manifest.csv"), "w", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)
            jobs = [dict(path=r["path"], path_abs=os.path.join(new, r["path"]), label="animal",
                         split="train", group=r["group"], family=r["family"]) for r in rows]
            jobs[1]["group"] = "other"      # planned differently: rendered, not linked
            jobs.append(dict(path="clips/train/animal/new.wav", label="animal", split="train",
                             group="g9", family="fam_c", set="extra",
                             path_abs=os.path.join(new, "clips/train/animal/new.wav")))
            got = bad.reuse_clips(jobs, old)
            self.assertEqual(list(got), [rows[0]["path"]])
            self.assertEqual(got[rows[0]["path"]], rows[0])
            self.assertEqual(os.stat(jobs[0]["path_abs"]).st_ino,
                             os.stat(os.path.join(old, rows[0]["path"])).st_ino)
            self.assertFalse(os.path.exists(jobs[1]["path_abs"]))
            with self.assertRaisesRegex(bad.DataError, "no manifest.csv"):
                bad.reuse_clips(jobs, new)


if __name__ == "__main__":
    unittest.main()
