"""landmark_sweep's argument handling, its reading of `cony bench attention` and its table
(no training: --table-only on a made-up sweep.json)."""

import contextlib
import io
import json
import os
import tempfile
import unittest

from conytrain.audio import landmark_sweep as ls

BENCH = """# attention, one step per token: d=64 heads=4 m=8, one thread, CPU time per step
| n | variant | form | core µs | step µs | core vs continual | core vs regular |
|---|---|---|---|---|---|---|
| 32 | `continual` | single | 1.26 | 2.30 | 1.0x |  |
| 32 | `cony` | single | 11.31 | 12.17 | 0.1x |  |
| 32 | `cony` | retroactive | 99.00 | 99.50 | 0.0x |  |
| 32 | `vcc` | single | 3.00 | 4.00 | 0.4x |  |
"""


def measured(class_mean, steps, synth=None):
    e = {"real/all": {"accuracy": steps}, "real/class-mean": {"accuracy": class_mean}}
    if synth is not None:
        e["synth/all"] = {"accuracy": synth}
    return e


def quiet_exit(test, fn, *a):
    """The SystemExit fn raises and what it wrote to stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), test.assertRaises(SystemExit) as cm:
        fn(*a)
    return cm.exception, err.getvalue()


class Arguments(unittest.TestCase):
    def test_lists_and_recipe_options(self):
        a = ls.parse_args(["--m", "2,4,32", "--seeds", "11,12", "--splits", "val,test",
                           "--", "--lr-decay", "1"])
        self.assertEqual(a.m, [2, 4, 32])
        self.assertEqual(a.seeds, [11, 12])
        self.assertEqual(a.splits, ["val", "test"])
        self.assertEqual(a.recipe_argv, ["--lr-decay", "1"])
        self.assertEqual(ls.parse_args([]).m, [2, 4, 8, 16, 32])

    def test_bad_values_are_named(self):
        e, _ = quiet_exit(self, ls.parse_args, ["--m", "8,x"])
        self.assertIn("--m", str(e.code))
        e, err = quiet_exit(self, ls.parse_args, ["--splits", "train"])
        self.assertEqual(e.code, 2)
        self.assertIn("--splits: train", err)
        e, _ = quiet_exit(self, ls.check_m, [2, 40], 32)
        self.assertIn("[40]", str(e.code))
        ls.check_m([1, 32], 32)                 # the window itself is allowed

    def test_sweep_sets_m_and_seed_itself(self):
        for opt in ("--landmarks", "--train-seed"):
            e, _ = quiet_exit(self, ls.recipe_args, [opt, "4"], "unused")
            self.assertIn(opt, str(e.code))


class Tables(unittest.TestCase):
    def test_bench_rows(self):
        b = ls.parse_bench(BENCH)
        self.assertEqual(b, {"continual": {"core_us": 1.26, "step_us": 2.30},
                             "cony": {"core_us": 11.31, "step_us": 12.17}})

    def test_table_only_writes_markdown_of_the_json(self):
        runs = {}
        for m, cm in ((16, 0.90), (2, 0.948)):
            ev = {"val:cony:cony": measured(cm, 0.95),
                  "val:cony-fixed:cony-fixed": measured(cm - 0.01, 0.93, synth=0.977)}
            runs[f"m{m}-s11"] = {"m": m, "seed": 11, "eval": ev}
        data = {"runs": runs, "bench": {"2": ls.parse_bench(BENCH)},
                "encoder": {"16": {"cony:cony": 21.14, "cony-fixed:cony-fixed": 11.7}}}
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "sweep.json"), "w") as f:
                json.dump(data, f)
            ls.main(["--table-only", "--out", d])
            with open(os.path.join(d, "sweep.md")) as f:
                md = f.read()
        rows = [line for line in md.splitlines() if line.startswith("| 2 |") or
                line.startswith("| 16 |")]
        self.assertTrue(rows[0].startswith("| 2 | 11 | 94.8 (95.0) | – | – | 93.8 (93.0) |"),
                        rows[0])
        self.assertTrue(rows[0].endswith("| 97.7 |"), rows[0])
        self.assertTrue(rows[1].startswith("| 16 | 11 | 90.0 (95.0) |"), rows[1])
        self.assertNotIn("Split **test**", md)          # no test measurements given
        self.assertIn("| 2 | 1.26 / 2.30 | 11.31 / 12.17 | – | – |", md)
        self.assertIn("| 16 | 21.1 | – | – | 11.7 | – | – | – |", md)


if __name__ == "__main__":
    unittest.main()
