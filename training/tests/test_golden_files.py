"""The committed attention and model golden files are what gen_attention_golden.py and
gen_model_golden.py write now."""

import filecmp
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GOLDEN = os.path.join(ROOT, "tests", "golden", "attention")


class GoldenFilesTest(unittest.TestCase):
    def test_attention_golden_up_to_date(self):
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, os.path.join(ROOT, "training", "gen_attention_golden.py"),
                            tmp], check=True, stdout=subprocess.DEVNULL)
            cases = sorted(os.listdir(tmp))
            self.assertEqual(cases, sorted(os.listdir(GOLDEN)))
            for case in cases:
                files = sorted(os.listdir(os.path.join(tmp, case)))
                match, mismatch, errors = filecmp.cmpfiles(os.path.join(tmp, case),
                                                           os.path.join(GOLDEN, case), files,
                                                           shallow=False)
                self.assertEqual(mismatch + errors, [], case)

    def test_model_golden_up_to_date(self):
        """tests/golden/model (the kK_ multi-token cases included) is reproducible."""
        golden = os.path.join(ROOT, "tests", "golden", "model")
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, os.path.join(ROOT, "training", "gen_model_golden.py"),
                            tmp], check=True, stdout=subprocess.DEVNULL)
            files = sorted(os.listdir(tmp))
            self.assertEqual(files, sorted(os.listdir(golden)))
            self.assertTrue(any(f.startswith("k4_") for f in files))
            match, mismatch, errors = filecmp.cmpfiles(tmp, golden, files, shallow=False)
            self.assertEqual(mismatch + errors, [])


if __name__ == "__main__":
    unittest.main()
