"""build.py --data-version N (conytrain/data/data_versions.py): without it the defaults are those
of before; with it version 9's arguments (each still overridable) and the added tables of the
version, with the clip counts data sets 11-15 were built with (training/data/README.md);
build_audio_dataset.sh --list-packages lists version 9's packages plus exactly those tables'
packages, and refuses a version that does not exist."""

import os
import subprocess
import unittest

from conytrain.data import build as bad
from conytrain.data import data_versions as dv

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                      "build_audio_dataset.sh")
BASE = ("per_class", "train_extra", "alarm_synth", "train_only_version")


def args(*argv):
    a = bad.parse_args(["--src", "s", "--out", "o", *argv])
    return {k: getattr(a, k) for k in BASE}, dv.added_tables(a.data_version)


def listed(*argv):
    out = subprocess.run(["bash", SCRIPT, "--list-packages", *argv], capture_output=True,
                         text=True, check=True).stdout.split("\n")
    return ({line[5:] for line in out if line.startswith("data ")},
            {line[5:] for line in out if line.startswith("tool ")})


class DataVersions(unittest.TestCase):
    def test_without_a_version_the_defaults_are_unchanged(self):
        self.assertEqual(args(), ({"per_class": 120, "train_extra": 0, "alarm_synth": "v2",
                                   "train_only_version": 3}, []))

    def test_a_version_sets_version_9s_arguments_unless_given(self):
        nine = {"per_class": 400, "train_extra": 800, "alarm_synth": "v3", "train_only_version": 7}
        self.assertEqual(args("--data-version", "9"), (nine, []))
        self.assertEqual(args("--data-version", "14", "--per-class", "200")[0],
                         dict(nine, per_class=200))
        with self.assertRaises(SystemExit):
            args("--data-version", "10")

    def test_the_added_tables_of_each_version(self):
        v11 = [(11, {"music": 400})]
        v12 = v11 + [(12, {"noise": 450, "music": 300})]
        v13 = v12 + [(13, {"speech": 48, "music": 111, "noise": 64, "alarm": 72, "animal": 48})]
        v14 = [(14, {"animal": 100})]
        v15 = v14 + [(15, {"alarm": 100})]
        for version, tables in ((11, v11), (12, v12), (13, v13), (14, v14), (15, v15)):
            self.assertEqual(args("--data-version", str(version))[1], tables, version)
            for table, counts in tables:
                classes = {r["class"] for r in dv.read_table(dv.ADDED[table][0])}
                self.assertLessEqual(set(counts), classes, table)

    def test_list_packages(self):
        base, tools = listed()
        self.assertEqual(len(base), 61)   # 66 before the five reserved packages came out
        self.assertEqual(listed("--data-version", "9"), (base, tools))
        self.assertNotIn("libsox-fmt-mp3", tools)
        sizes = {11: 4, 12: 18, 13: 46, 14: 4, 15: 6}
        for version, more in sizes.items():
            data, tools_v = listed("--per-class", "400", "--data-version", str(version))
            self.assertEqual(data - base, set(dv.added_packages(version)), version)
            self.assertEqual(len(data), 61 + more, version)
            self.assertLessEqual(base, data)
            self.assertEqual(tools_v - tools, {"libsox-fmt-mp3"} if version == 15 else set())
        self.assertEqual(set(dv.added_packages(15)) - set(dv.added_packages(14)),
                         {"zabbix-frontend-php", "nagstamon"})
        bad_version = subprocess.run(["bash", SCRIPT, "--list-packages", "--data-version", "10"],
                                     capture_output=True, text=True)
        self.assertEqual(bad_version.returncode, 1)
        self.assertIn("bad --data-version", bad_version.stderr)


if __name__ == "__main__":
    unittest.main()
