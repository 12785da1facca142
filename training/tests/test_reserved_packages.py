"""No data source names a Debian package reserved for evaluation (DEVELOPERS.md: the name's
MD5 starts with 0, or shared/reserved-packages.txt lists it): the audio data set's package
list for every version, its tables and build.py's families, the fused model's sources and
evaluation set, the video tagger's photographs. Data set 9 and the fused model's data held
sonic-pi-samples, hedgewars-data, tuxmath-data, asterisk-moh-opsound-wav and pinball-data
until 2026-12-04; this test fails if any of them, or any other reserved name, comes back."""

import os
import re
import subprocess
import tempfile
import unittest
from unittest import mock

from conytrain import REPO
from conytrain.av import evalset, sources
from conytrain.data import build as bad
from conytrain.data import reserved

REMOVED = ["sonic-pi-samples", "hedgewars-data", "tuxmath-data", "asterisk-moh-opsound-wav",
           "pinball-data"]


def build_script_packages(version):
    """The data packages build_audio_dataset.sh downloads for a data set version."""
    out = subprocess.run(["bash", os.path.join(REPO, "training", "data", "build_audio_dataset.sh"),
                          "--list-packages", "--data-version", str(version)],
                         check=True, capture_output=True, text=True).stdout
    return [ln.split(" ", 1)[1] for ln in out.splitlines() if ln.startswith("data ")]


class ReservedPackages(unittest.TestCase):
    def test_rule(self):
        # the MD5 half needs no list: every package taken out is caught by it
        self.assertEqual(reserved.reserved(REMOVED + ["tuxpaint-stamps-default"]), REMOVED)
        self.assertFalse(reserved.md5_reserved("frozen-bubble-data"))
        with self.assertRaisesRegex(ValueError, "sonic-pi-samples"):
            reserved.refuse(["frozen-bubble-data", "sonic-pi-samples"])

    def test_listed_names_count_too(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "list.txt")
            with open(path, "w") as f:
                f.write("# comment\nfrozen-bubble-data\n")
            self.assertEqual(reserved.reserved(["frozen-bubble-data", "lomiri-sounds"], path),
                             ["frozen-bubble-data"])

    def test_audio_data_set_versions(self):
        for version in (9, 11, 12, 13, 14, 15):
            pkgs = build_script_packages(version)
            self.assertIn("tuxpaint-stamps-default", pkgs)
            self.assertEqual(reserved.reserved(pkgs), [], "data set version %d" % version)

    def test_audio_tables_and_families(self):
        names = set()
        for table in ("v2_recordings.tsv", "train_only_v6.tsv", "added_music.tsv",
                      "added_v12.tsv", "val_v13.tsv", "added_v14.tsv", "added_v15.tsv"):
            names |= {r["package"] for r in bad.read_table(table)}
        names |= {r[0] for v in bad.TRAIN_ONLY.values() for rs in v.values() for r in rs}
        with open(os.path.join(REPO, "training", "conytrain", "data", "build.py")) as f:
            # every quoted name with a hyphen: packages, and words that are none (harmless)
            names |= set(re.findall(r'"([a-z0-9][a-z0-9.+]*-[a-z0-9.+-]+)"', f.read()))
        self.assertIn("frozen-bubble-data", names)
        self.assertEqual(reserved.reserved(sorted(names)), [])

    def test_mined_tables_took_none(self):
        # the mining logs record packages scanned before the rule was checked; none reserved
        # was taken into a data set, and none may be
        for table in ("mined_v14.tsv", "mined_v15.tsv"):
            rows = bad.read_table(table)
            taken = [r["package"] for r in rows if r["taken"] == "yes"]
            self.assertTrue(taken)
            self.assertEqual(reserved.reserved(taken), [], table)

    def test_fused_and_video_sources(self):
        for photo_set in sources.PHOTO_SETS:
            self.assertEqual(reserved.reserved(sources.packages(photo_set)), [])
        self.assertEqual(reserved.reserved(evalset.PACKAGES), [])
        self.assertEqual(reserved.reserved(["opencv-doc", "python3-skimage", "python3-sklearn"]), [])

    def test_fused_sources_refuse_a_reserved_package(self):
        bad_source = ("music", "sonic-pi-samples", "usr/share/sonic-pi/samples/*.flac", "sound")
        with mock.patch.object(sources, "SOURCES", sources.SOURCES + [bad_source]):
            with self.assertRaisesRegex(ValueError, "sonic-pi-samples"):
                sources.packages()

    def test_cli(self):
        run = lambda *names: subprocess.run(
            ["/usr/bin/python3", "-m", "conytrain.data.reserved", *names],
            cwd=os.path.join(REPO, "training"), capture_output=True, text=True)
        r = run("lomiri-sounds", "hedgewars-data")
        self.assertEqual((r.returncode, r.stdout), (1, "reserved: hedgewars-data\n"))
        self.assertEqual(run("lomiri-sounds").returncode, 0)


if __name__ == "__main__":
    unittest.main()
