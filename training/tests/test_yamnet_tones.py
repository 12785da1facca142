"""The steady-tone clips in yamnet.py: measure() counts the validation tone clips' steps
labelled noise, the clips labelled silence by majority (rule 15 (b)) and those labelled
noise by majority (rule 23 (b)) into val.json's tones/<label>, and --tones-extra adds
training-only tone clips that leave the validation tone clips as they were (rule 19)."""

import argparse
import json
import os
import unittest
from unittest import mock

import numpy as np

from conytrain.audio import yamnet
import test_val_only as base
from test_val_only import row, write_manifest


class YamnetTones(unittest.TestCase):
    """test_val_only's small data set and fake `cony classify` (the token says the class)."""
    setUp = base.YamnetValidationOnly.setUp
    tearDown = base.YamnetValidationOnly.tearDown

    def fill_cache(self, args, rows, predict):
        """Tokens whose first value is the class the fake classifier will say, per step."""
        for r in rows:
            p = yamnet.token_path(args.cache, r)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            np.save(p, np.array([[predict(r, t), 0] for t in range(17)], dtype=np.float32))

    def test_tone_counts(self):
        rows, labels = yamnet.load_rows(self.args)
        val_tones = [r for r in rows if r["set"] == "tones" and r["split"] == "val"]
        self.assertGreaterEqual(len(val_tones), 2)
        silent = val_tones[0]["group"]          # all silence
        half = val_tones[1]["group"]            # 12 of 17 steps alarm: wrong, not silence

        def predict(r, t):
            if r["group"] == silent:
                return labels.index("silence")
            if r["group"] == half and t < 12:
                return labels.index("alarm")
            return labels.index(r["label"])

        self.fill_cache(self.args, rows, predict)
        out = os.path.join(self.tmp.name, "val.json")
        with mock.patch.object(yamnet.eval_default_audio, "run", base.fake_cony):
            yamnet.measure(self.args, rows, labels, "model", out)
        with open(out) as f:
            t = json.load(f)["tones/noise"]
        steps = sum(len(np.load(yamnet.token_path(self.args.cache, r))) for r in val_tones)
        self.assertEqual(t["clips"], len(val_tones))
        self.assertEqual(t["clips-silence-by-majority"], 1)
        # rule 23 (b): the silent clip and the mostly-alarm clip are not noise by majority
        self.assertEqual(t["clips-right-by-majority"], len(val_tones) - 2)
        # every step is a full-window step: measure() gives each clip window - 1 tokens of context first
        self.assertEqual(t["steps"], steps)
        self.assertEqual(t["correct"], t["steps"] - 17 - 12)

    def test_tones_extra_are_training_only(self):
        work = self.args.work
        write_manifest(os.path.join(work, "tones-extra"),
                       [row(200 + k, "noise", "train", "extra-tone%d" % k, "tones") for k in range(5)])
        plain, _ = yamnet.load_rows(self.args)
        more, _ = yamnet.load_rows(argparse.Namespace(**dict(vars(self.args), tones_extra=5)))
        extra = [r for r in more if r["set"] == "tones-extra"]
        self.assertEqual(len(extra), 5)
        self.assertTrue(all(r["split"] == "train" for r in extra))
        key = [(r["set"], r["path"], r["split"]) for r in plain]
        self.assertEqual([(r["set"], r["path"], r["split"]) for r in more if r["set"] != "tones-extra"], key)


if __name__ == "__main__":
    unittest.main()
