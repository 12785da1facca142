"""The committed attention and model golden files are what gen_attention_golden.py and
gen_model_golden.py compute, checked numerically (golden/check.py says why not
byte-for-byte), and an edited golden file is caught."""

import json
import os
import tempfile
import unittest

from conytrain.golden import attention as gen_attention_golden
from conytrain.golden import model as gen_model_golden
from conytrain.golden.check import bumped, edited_copy

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

ATTENTION = os.path.join(ROOT, "tests", "golden", "attention")
MODEL = os.path.join(ROOT, "tests", "golden", "model")
CASE = "nystrom-single-d8h2n6m3"   # one whose draw is not the first


def tensor_edit(name, edit):
    return lambda st: ({**st[0], name: edit(st[0][name])}, st[1])


def metadata_edit(key, edit):
    return lambda st: (st[0], {**st[1], key: edit(st[1][key])})


class GoldenFilesTest(unittest.TestCase):
    def test_attention_golden_up_to_date(self):
        self.assertEqual(gen_attention_golden.verify(ATTENTION), [])

    def test_model_golden_up_to_date(self):
        """tests/golden/model (the kK_ multi-token cases included) is what the script writes."""
        self.assertTrue(any(f.startswith("k4_") for f in os.listdir(MODEL)))
        self.assertEqual(gen_model_golden.verify(MODEL), [])

    def assert_caught(self, verify, golden, rel, edit):
        with tempfile.TemporaryDirectory() as tmp:
            problems = verify(edited_copy(golden, rel, os.path.join(tmp, "g"), edit))
        self.assertTrue(problems, f"an edit of {rel} went unnoticed")

    def test_attention_edits_are_caught(self):
        def window(config):
            return json.dumps({**json.loads(config), "window": 7})
        for rel, edit in [
                (f"{CASE}/expected.npy", bumped),
                (f"{CASE}/expected_window_short.npy", bumped),
                (f"{CASE}/input.npy", bumped),
                (f"{CASE}/weights.safetensors", tensor_edit("in_proj_bias", bumped)),
                (f"{CASE}/weights.safetensors", metadata_edit("config", window)),
                (f"{CASE}/weights.safetensors",
                 metadata_edit("note", lambda n: n.replace("draw 7;", "draw 6;"))),
                (f"{CASE}-extra/input.npy", lambda _: bumped(
                    gen_attention_golden.make_case_tensors(gen_attention_golden.CASES[0])[1]
                    .numpy()))]:
            with self.subTest(rel=rel):
                self.assert_caught(gen_attention_golden.verify, ATTENTION, rel, edit)

    def test_model_edits_are_caught(self):
        for rel, edit in [("b2_cony.logits.npy", bumped),
                          ("b1_nystromfixed@cony-fixed.logits.npy", bumped),
                          ("k4_b1_cony.tokens.npy", bumped),
                          ("b1_conyfixed.safetensors",
                           tensor_edit("blocks.0.attn.q_landmarks", bumped))]:
            with self.subTest(rel=rel):
                self.assert_caught(gen_model_golden.verify, MODEL, rel, edit)


if __name__ == "__main__":
    unittest.main()
