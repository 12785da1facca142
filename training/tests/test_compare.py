"""compare_yamnet_recipes.py (conytrain.audio.compare): a rule round's figures from each
model's kept `cony classify` logits, the same as val.json's (yamnet.measure with
--val-extra); ensembles as the mean of the members' softmax probabilities; the seed-pair
differences against a baseline. On test_val_only's small data set with a fake `cony
classify` whose logits come from the tokens."""

import contextlib
import io
import json
import os
import unittest
from unittest import mock

import numpy as np

from conytrain.audio import compare, yamnet
import test_val_only as base
from test_val_only import fake_cony, fake_model


class Compare(unittest.TestCase):
    setUp = base.YamnetValidationOnly.setUp
    tearDown = base.YamnetValidationOnly.tearDown

    def fill_cache(self):
        """Per clip 17 tokens of four values, the classes fake_cony's weights pick from:
        0: the label, but noise on the valx recording vb (as test_val_only); 1: the label;
        2 and 3: two wrong classes."""
        args = argparse_with(self.args, val_extra=True)
        rows, labels = yamnet.load_rows(args)
        for r in rows:
            y = labels.index(r["label"])
            first = labels.index("noise") if r["group"] == "vb" else y
            p = yamnet.token_path(args.cache, r)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            np.save(p, np.tile([first, y, (y + 1) % 6, (y + 2) % 6], (17, 1)).astype(np.float32))
        return args, rows, labels

    def model(self, name, weights):
        return fake_model(os.path.join(self.tmp.name, name + ".safetensors"), weights)

    def run_compare(self, *argv, cony=fake_cony):
        a = self.args
        out = os.path.join(self.tmp.name, "report.json")
        text = io.StringIO()
        with mock.patch.object(yamnet.eval_default_audio, "run", cony), \
                contextlib.redirect_stdout(text):
            compare.main(["--dataset", a.dataset, "--val-from", a.val_from, "--val-frac",
                          str(a.val_frac), "--cache", a.cache, "--work", a.work, "--json", out]
                         + list(argv))
        with open(out) as f:
            return json.load(f), text.getvalue()

    def test_figures_are_val_json(self):
        # compare's figures of a model are exactly what yamnet.measure writes to val.json
        args, rows, labels = self.fill_cache()
        m = self.model("x", [1, 0, 0, 0])           # right but on valx recording vb
        out = os.path.join(self.tmp.name, "val.json")
        with mock.patch.object(yamnet.eval_default_audio, "run", fake_cony):
            yamnet.measure(args, rows, labels, m, out)
        with open(out) as f:
            val = json.load(f)
        report, _ = self.run_compare("--baseline", "X", "X=" + m)
        self.assertEqual(report["classifiers"]["X.1"]["figures"], val)
        self.assertAlmostEqual(val["combined/class-mean"]["accuracy"], (1 + 1 + 0.8) / 3)
        self.assertAlmostEqual(report["classifiers"]["X.1"]["headline"]["combined"],
                               100 * (1 + 1 + 0.8) / 3)

    def test_ensemble_is_mean_softmax(self):
        self.fill_cache()
        right = self.model("a", [0, 5, 0, 0])       # the label, sure: p = e^5 / (e^5 + 5)
        wrong = self.model("b", [0, 0, 5.5, 5.4])   # a wrong class, torn between two
        report, text = self.run_compare("--baseline", "E", "--ensembles", f"E={right},{wrong}")
        h = {k: v["headline"]["combined"] for k, v in report["classifiers"].items()}
        self.assertEqual((h["E.1"], h["E.2"]), (100.0, 0.0))
        # mean softmax: label (0.967 + 0.002) / 2 = 0.485 beats the wrong class's
        # (0.007 + 0.521) / 2 = 0.264; the mean of the logits would pick the wrong class
        # (2.75 against 2.5)
        self.assertEqual(h["E.ens"], 100.0)
        self.assertEqual(report["candidates"]["E"]["ensemble-over-members"]["combined"], 50.0)
        self.assertIn("| E.ens | **100.00** |", text)
        # and its probabilities are the members' mean
        z_right, z_wrong = np.zeros((1, 6)), np.zeros((1, 6))
        z_right[0, 1] = 5
        z_wrong[0, [2, 3]] = [5.5, 5.4]
        p = np.exp(compare.ensemble_logits([{"k": z_right}, {"k": z_wrong}])["k"][0])
        want = (np.exp(5) / (np.exp(5) + 5) + 1 / (np.exp(5.5) + np.exp(5.4) + 4)) / 2
        self.assertAlmostEqual(p[1], want, places=6)
        self.assertAlmostEqual(p.sum(), 1.0, places=5)

    def test_seed_pairs_against_baseline(self):
        self.fill_cache()
        x = self.model("x", [1, 0, 0, 0])           # 100 (1 + 1 + 0.8) / 3 = 93.33
        right = self.model("r", [0, 1, 0, 0])       # 100
        wrong = self.model("w", [0, 0, 1, 0])       # 0
        report, text = self.run_compare("--baseline", "B", f"C={right},{x}", f"B={x},{wrong}")
        a = report["candidates"]["C"]["against-baseline"]
        # paired in the order given: right - x, x - wrong
        self.assertEqual(len(a["seed-pairs"]), 2)
        self.assertAlmostEqual(a["seed-pairs"][0], 100 - 280 / 3)
        self.assertAlmostEqual(a["seed-pairs"][1], 280 / 3)
        self.assertEqual(a["pairs-favouring"], 2)
        self.assertAlmostEqual(a["mean-difference"]["combined"], (100 + 280 / 3) / 2 - 280 / 6)
        self.assertNotIn("against-baseline", report["candidates"]["B"])
        self.assertIn("(+6.67, +93.33; 2 of 2 favour C)", text)
        # the logits are kept under each file's SHA-256: a second round classifies nothing
        kept = os.listdir(os.path.join(self.args.work, "compare-logits"))
        self.assertEqual(len(kept), 3)

        def no_cony(cmd):
            raise AssertionError("classified again: %s" % cmd)
        again, _ = self.run_compare("--baseline", "C", f"C={right},{x}", f"B={x},{wrong}",
                                    cony=no_cony)
        self.assertEqual(again["classifiers"], report["classifiers"])
        self.assertAlmostEqual(again["candidates"]["B"]["against-baseline"]["seed-pairs"][0],
                               -a["seed-pairs"][0])

    def test_each_model_reads_its_cnns_cache(self):
        # with several --cache, a model's tokens come from the cache of its CNN (an adapted
        # YAMNet brings its own): here cache b's tokens make the same weights right on vb
        args, rows, labels = self.fill_cache()
        other = os.path.join(self.tmp.name, "cache-b")
        for r in rows:
            x = np.load(yamnet.token_path(args.cache, r))
            x[:, 0] = x[:, 1]
            p = yamnet.token_path(other, r)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            np.save(p, x)
        models = {}
        for cache, sha in ((args.cache, "a" * 64), (other, "b" * 64), (None, "c" * 64)):
            if cache:
                with open(os.path.join(cache, "yamnet.json"), "w") as f:
                    json.dump({"cnn_sha256": sha}, f)
            models[sha[0]] = fake_model(os.path.join(self.tmp.name, sha[0] + ".safetensors"),
                                        [1, 0, 0, 0], frontend={"cnn_sha256": sha})
        report, _ = self.run_compare("--cache", other, "--baseline", "A",
                                     "A=" + models["a"], "B=" + models["b"])
        h = {k: v["headline"]["combined"] for k, v in report["classifiers"].items()}
        self.assertAlmostEqual(h["A.1"], 100 * (1 + 1 + 0.8) / 3)
        self.assertEqual(h["B.1"], 100.0)
        with self.assertRaisesRegex(SystemExit, "no --cache holds tokens of its CNN"):
            self.run_compare("--cache", other, "--baseline", "C", "C=" + models["c"])

    def test_pairs_are_in_order(self):
        h = [{k: 0 for k in compare.HEADLINE} for _ in range(4)]
        for d, v in zip(h, (95.0, 94.0, 94.5, 94.5)):
            d["combined"] = v
        a = compare.against(h[:2], h[2:])
        self.assertEqual(a["seed-pairs"], [0.5, -0.5])
        self.assertEqual(a["pairs-favouring"], 1)
        self.assertEqual(a["mean-difference"]["combined"], 0.0)

    def test_bad_candidates(self):
        self.fill_cache()
        m = self.model("x", [1, 0, 0, 0])
        with self.assertRaisesRegex(SystemExit, "NAME=MODEL"):
            compare.parse_candidate(m)
        with self.assertRaisesRegex(SystemExit, "no such classifier file"):
            compare.parse_candidate("A=" + os.path.join(self.tmp.name, "nothing"))
        # a work folder stands for its validation-stage model
        os.makedirs(os.path.join(self.tmp.name, "run", "val"))
        inside = os.path.join(self.tmp.name, "run", "val", "transformer.safetensors")
        os.rename(m, inside)
        self.assertEqual(compare.parse_candidate("A=" + os.path.join(self.tmp.name, "run")),
                         ("A", [inside]))
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            self.run_compare("--baseline", "Z", "A=" + os.path.join(self.tmp.name, "run"))


def argparse_with(args, **kw):
    return type(args)(**dict(vars(args), **kw))


if __name__ == "__main__":
    unittest.main()
