"""The data set builder's version tables (conytrain/data/versions/*.tsv) are well formed:
known classes, kinds and versions, regexes that compile, positive minimums, every family's
recordings listed, and the row counts of the tables the shipped data sets were built from."""

import re
import unittest

from conytrain.data import build as bad


class VersionTables(unittest.TestCase):
    def check_pattern(self, pkg, sub, rx, minimum):
        re.compile(rx)
        self.assertGreaterEqual(minimum, 1, pkg)
        self.assertFalse(sub.startswith("/") or sub.endswith("/"), sub)

    def test_train_only(self):
        # versions 3, 4, 5 and 7 (6 is train_only_v6.tsv); version 4's speech is the prompt set
        self.assertEqual(sorted(bad.TRAIN_ONLY), [3, 4, 5, 7])
        rows = [r for v in bad.TRAIN_ONLY.values() for rs in v.values() for r in rs]
        self.assertEqual(len(rows), 50)   # 53 before the three reserved rows came out
        self.assertTrue(set().union(*bad.TRAIN_ONLY.values()) <= set(bad.CLASSES))
        for row in rows:
            self.check_pattern(*row)
        self.assertEqual(bad.TRAIN_ONLY4_SPEECH[0], "asterisk-core-sounds-en-wav")

    def test_added(self):
        # version 11's music and version 12's noise and music (plan_added's tables), version
        # 13's validation-only recordings, version 14's mined animal calls, version 15's mined
        # alarm tones; each table its own RNG stream
        self.assertEqual(sorted(bad.ADDED), [11, 12, 13, 14, 15])
        self.assertEqual(len({stream for _, stream in bad.ADDED.values()}), 5)
        self.assertEqual(bad.ADDED_SPLIT, {13: "valx"})
        v11 = bad.read_table("added_music.tsv")
        self.assertEqual([r["package"] for r in v11],
                         ["hyperrogue-music", "naev-data", "ardentryst", "etw-data"])
        self.assertEqual({r["class"] for r in v11}, {"music"})
        v12 = bad.read_table("added_v12.tsv")
        self.assertEqual(len(v12), 17)
        self.assertEqual({r["class"] for r in v12}, {"noise", "music"})
        self.assertEqual(len({r["package"] for r in v12}), 14)
        # no package of version 12 was used before
        self.assertFalse({r["package"] for r in v12} & {r["package"] for r in v11})
        for r in v11 + v12:
            self.check_pattern(*bad.pattern_row(r))
        self.assertTrue(all(r["licence"] for r in v12))

    def test_added_v14(self):
        # four mined packages, animal calls only, none used by an earlier table
        v14 = bad.read_table("added_v14.tsv")
        self.assertEqual([r["package"] for r in v14],
                         ["ufoai-sound", "brainparty-data", "flare-game", "trophy-data"])
        self.assertEqual({r["class"] for r in v14}, {"animal"})
        before = {r["package"] for name in ("added_music.tsv", "added_v12.tsv", "val_v13.tsv",
                                            "train_only_v6.tsv", "v2_recordings.tsv")
                  for r in bad.read_table(name)}
        before |= {r[0] for v in bad.TRAIN_ONLY.values() for rs in v.values() for r in rs}
        self.assertFalse({r["package"] for r in v14} & before)
        for r in v14:
            self.check_pattern(*bad.pattern_row(r))
            self.assertTrue(r["licence"])
        # every package mined is recorded, and those taken are added_v14.tsv's
        mined = bad.read_table("mined_v14.tsv")
        self.assertEqual(len(mined), 68)
        self.assertEqual(sum(int(r["scored"]) for r in mined), 1683)
        self.assertEqual(sum(int(r["candidates"]) for r in mined), 28)
        self.assertEqual({r["package"] for r in mined if r["taken"] == "yes"},
                         {r["package"] for r in v14})
        self.assertFalse({r["package"] for r in mined} & before)
        self.assertNotIn(14, bad.ADDED_SPLIT)

    def test_mined_v15(self):
        # every package mined for alarms after version 14 is recorded once, none used before
        mined = bad.read_table("mined_v15.tsv")
        self.assertEqual(len(mined), 153)
        self.assertEqual(len({r["package"] for r in mined}), 153)
        self.assertEqual(sum(int(r["scored"]) for r in mined), 1087)
        self.assertEqual(sum(int(r["candidates"]) for r in mined), 21)
        self.assertEqual({r["package"] for r in mined if r["taken"] == "yes"},
                         {"zabbix-frontend-php", "nagstamon"})
        before = {r["package"] for name in ("added_music.tsv", "added_v12.tsv", "val_v13.tsv",
                                            "train_only_v6.tsv", "v2_recordings.tsv",
                                            "added_v14.tsv", "mined_v14.tsv")
                  for r in bad.read_table(name)}
        before |= {r[0] for v in bad.TRAIN_ONLY.values() for rs in v.values() for r in rs}
        self.assertFalse({r["package"] for r in mined} & before)

    def test_added_v15(self):
        # the two packages kept from mined_v15.tsv, alarm tones only, none used before
        v15 = bad.read_table("added_v15.tsv")
        self.assertEqual([r["package"] for r in v15], ["zabbix-frontend-php", "nagstamon"])
        self.assertEqual({r["class"] for r in v15}, {"alarm"})
        mined = bad.read_table("mined_v15.tsv")
        self.assertEqual({r["package"] for r in mined if r["taken"] == "yes"},
                         {r["package"] for r in v15})
        self.assertEqual(sum(int(r["minimum"]) for r in v15), 4)
        for r in v15:
            self.check_pattern(*bad.pattern_row(r))
            self.assertTrue(r["licence"])
        self.assertNotIn(15, bad.ADDED_SPLIT)
        # an MP3's group is its stem, as a WAV's
        class Cat:
            rel = staticmethod(lambda f: f)
        for f in ("p:/a/alarm_high.mp3", "p:/a/alarm_high.wav", "p:/a/alarm_high2.ogg"):
            self.assertEqual(bad.stem_group(Cat, f), "p:/a/alarm_high")

    def test_version_2(self):
        fams = bad.read_table("v2_families.tsv")
        recs = bad.read_table("v2_recordings.tsv")
        self.assertEqual(len(fams), 5)   # hedgewars_music (reserved) came out
        self.assertEqual(len(recs), 15)
        names = [f["family"] for f in fams]
        self.assertEqual(len(set(names)), len(names))
        self.assertEqual({r["family"] for r in recs}, set(names))
        for f in fams:
            self.assertIn(f["class"], bad.CLASSES)
            self.assertIn(f["kind"], ("long", "loop"))
            self.assertGreater(float(f["weight"]), 0.0)
            # the manifest's package column names every package the family's files come from
            pkgs = {r["package"] for r in recs if r["family"] == f["family"]}
            self.assertEqual(set(f["package"].split("+")), pkgs, f["family"])
            if f["kind"] == "loop":
                self.assertLessEqual(float(f["gap_min"]), float(f["gap_max"]))
                self.assertIn(f["crossfade"], ("0", "1"))
        for r in recs:
            self.check_pattern(r["package"], r["directory"], r["regex"], int(r["minimum"]))
            self.assertTrue(r["what"])


if __name__ == "__main__":
    unittest.main()
