"""training/data/train_only_v6.tsv and build_audio_dataset.train_only_v6(): the list is well
formed (known classes, relative paths, no file twice, nothing shorter than 0.8 s), and the
loader finds every listed file of an extracted tree, by class, and names a missing one."""

import csv
import os
import re
import tempfile
import unittest

from conytrain.data import build as bad


def rows():
    with open(bad.TRAIN_ONLY6_LIST, newline="") as f:
        return list(csv.DictReader((line for line in f if not line.startswith("#")), delimiter="\t"))


class TrainOnlyList(unittest.TestCase):
    def test_well_formed(self):
        rs = rows()
        self.assertGreater(len(rs), 300)
        seen = set()
        for r in rs:
            self.assertIn(r["class"], bad.CLASSES, r)
            self.assertFalse(r["path"].startswith(("/", "./")), r)
            self.assertNotIn("..", r["path"].split("/"), r)
            self.assertGreaterEqual(float(r["seconds"]), 0.8, r)
            self.assertTrue(r["licence"], r)
            key = (r["package"], r["path"])
            self.assertNotIn(key, seen)
            seen.add(key)
        # every class but silence gets something; alarms are what the data set lacks most
        by_class = {c: sum(r["class"] == c for r in rs) for c in bad.CLASSES}
        for c in ("speech", "music", "noise", "alarm", "animal"):
            self.assertGreater(by_class[c], 0, c)

    def test_loader_finds_files_and_names_a_missing_one(self):
        rs = rows()
        with tempfile.TemporaryDirectory() as src:
            for r in rs:
                p = os.path.join(src, r["package"], r["path"])
                os.makedirs(os.path.dirname(p), exist_ok=True)
                open(p, "wb").close()
            got = bad.train_only_v6(bad.Catalogue(src))
            self.assertEqual(sum(len(v) for v in got.values()), len(rs))
            alarm = sorted(os.path.relpath(f, src) for f in got["alarm"])
            want = sorted(os.path.join(r["package"], r["path"]) for r in rs if r["class"] == "alarm")
            self.assertEqual(alarm, want)
            gone = rs[len(rs) // 2]
            os.remove(os.path.join(src, gone["package"], gone["path"]))
            with self.assertRaisesRegex(bad.DataError, "train_only_v6.tsv: %s of package %s is not extracted"
                                        % (re.escape(gone["path"]), re.escape(gone["package"]))):
                bad.train_only_v6(bad.Catalogue(src))


if __name__ == "__main__":
    unittest.main()
