"""The AudioSet grouping of rule 21 (conytrain/audio/ontology.py) and the model's
input_groups stage (ref/model.py InputGroups): every group holds the YAMNet classes its
definition names, no class is in two groups, and the stage appends per group the largest
sigmoid score of its rows."""

import csv
import os
import unittest

import numpy as np
import torch

from conytrain import REPO
from conytrain.audio import ontology
from conytrain.ref.model import ConyEncoderClassifier, InputGroups

LABELS = ["speech", "music", "noise", "alarm", "animal", "silence"]


def yamnet_names():
    with open(os.path.join(REPO, "models", "yamnet", "labels.csv"), newline="") as f:
        return [r["display_name"] for r in csv.DictReader(f)]


class Grouping(unittest.TestCase):
    def test_disjoint_and_in_range(self):
        rows = ontology.group_rows(LABELS)
        flat = [j for g in rows for j in g]
        self.assertEqual(len(flat), len(set(flat)))
        self.assertTrue(all(0 <= j < 521 for j in flat))
        self.assertTrue(all(g == sorted(g) for g in rows))

    def test_groups_hold_their_definitions(self):
        names = yamnet_names()
        self.assertEqual(len(names), 521)
        members = {label: {names[j] for j in g}
                   for label, g in zip(LABELS, ontology.group_rows(LABELS))}
        expect = {
            "speech": ["Speech", "Conversation", "Whispering"],
            "music": ["Music", "Singing", "Electronic music", "Piano"],
            # MODEL.md: steady tones and mains hum are noise, never silence
            "noise": ["Sine wave", "Hum", "Mains hum", "Engine", "Toilet flush", "Water",
                      "Crowd", "Walk, footsteps"],
            "alarm": ["Alarm", "Siren", "Beep, bleep", "Church bell", "Doorbell",
                      "Ringtone", "Alarm clock"],
            "animal": ["Animal", "Bird", "Dog", "Insect", "Frog"],
            "silence": ["Silence"],
        }
        for label, want in expect.items():
            for name in want:
                self.assertIn(name, members[label], f"{name} not in {label}")
        # judgement calls left out of every group (EXPERIMENTS.md, rule 21)
        for name in ("Dial tone", "Telephone dialing, DTMF", "Sound effect", "Laughter"):
            self.assertFalse(any(name in m for m in members.values()), name)

    def test_unknown_label_is_refused(self):
        with self.assertRaises(ValueError):
            ontology.group_rows(["speech", "vehicles"])

    def test_input_groups_rows_follow_the_labels(self):
        W = np.arange(521 * 3, dtype=np.float32).reshape(521, 3)
        b = np.arange(521, dtype=np.float32)
        sizes, Wg, bg = ontology.input_groups((W, b), LABELS)
        flat = [j for g in ontology.group_rows(LABELS) for j in g]
        self.assertEqual(sizes, [len(g) for g in ontology.group_rows(LABELS)])
        self.assertTrue(np.array_equal(Wg, W[flat]) and np.array_equal(bg, b[flat]))


class Stage(unittest.TestCase):
    def test_appends_each_groups_largest_score(self):
        torch.manual_seed(3)
        stage = InputGroups(5, [2, 1, 3])
        stage.weight.normal_()
        stage.bias.normal_()
        x = torch.randn(4, 7, 5)
        out = stage(x)
        self.assertEqual(tuple(out.shape), (4, 7, 8))
        self.assertTrue(torch.equal(out[..., :5], x))
        p = torch.sigmoid(x @ stage.weight.T + stage.bias)
        want = torch.stack([p[..., 0:2].amax(-1), p[..., 2], p[..., 3:6].amax(-1)], -1)
        self.assertTrue(torch.allclose(out[..., 5:], want))

    def test_model_config_and_export(self):
        m = ConyEncoderClassifier(5, 8, 2, 16, 1, 4, 2, "cony", ["a", "b", "c"],
                                  input_groups=[2, 1, 3])
        t = m.export_tensors()
        self.assertEqual(m.config["input_groups"], [2, 1, 3])
        self.assertEqual(t["input_prior.weight"].shape, (6, 5))
        self.assertEqual(t["input_proj.weight"].shape, (8, 8))
        plain = ConyEncoderClassifier(5, 8, 2, 16, 1, 4, 2, "cony", ["a", "b", "c"])
        self.assertNotIn("input_groups", plain.config)
        self.assertFalse(any(k.startswith("input_prior") for k in plain.export_tensors()))


if __name__ == "__main__":
    unittest.main()
