"""The committed mel and CNN golden files are what mel_reference.py and
gen_cnn_golden.py write now."""

import filecmp
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


class FrontendGoldenTest(unittest.TestCase):
    def check(self, script, args, area):
        golden = os.path.join(ROOT, "tests", "golden", area)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, os.path.join(ROOT, "training", script)] + args(tmp),
                           check=True, stdout=subprocess.DEVNULL)
            files = sorted(os.listdir(tmp))
            self.assertEqual(files, sorted(os.listdir(golden)))
            _, mismatch, errors = filecmp.cmpfiles(tmp, golden, files, shallow=False)
            self.assertEqual(mismatch + errors, [])

    def test_mel_golden_up_to_date(self):
        self.check("mel_reference.py", lambda d: ["--out", d], "mel")

    def test_cnn_golden_up_to_date(self):
        self.check("gen_cnn_golden.py", lambda d: [d], "cnn")


if __name__ == "__main__":
    unittest.main()
