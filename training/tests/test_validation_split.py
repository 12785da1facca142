"""conytrain.audio.recipe.carve_validation: whole groups move from train to val, the test
split is untouched; scope "base" carves the first families only (their extra clips become
"unused"), scope "all" also carves the families used for training only; carve_validation_groups
(--val-from) holds out another data set's validation groups, every clip of them;
refit_on_validation moves them back into train, marked refit, the test split untouched."""

import copy
import unittest

from conytrain.audio.recipe import (carve_validation, carve_validation_groups,
                                    refit_on_validation)


def manifest():
    """Two classes; per class a base family (10 groups, 2 base and 1 extra clip each) and a
    train-only family (20 groups, extra clips only); a few test clips."""
    rows = []
    for label in ("noise", "alarm"):
        for g in range(10):
            for k, s in enumerate(("base", "base", "extra")):
                rows.append(dict(path=f"{label}/b{g}_{k}.wav", label=label, family=f"{label}_base",
                                 group=f"{label}:b{g}", split="train", set=s))
        for g in range(20):
            rows.append(dict(path=f"{label}/t{g}.wav", label=label, family=f"{label}_train_only",
                             group=f"{label}:t{g}", split="train", set="extra"))
        rows.append(dict(path=f"{label}/test.wav", label=label, family=f"{label}_base",
                         group=f"{label}:test", split="test", set="base"))
    return rows


def groups(rows, split):
    return {r["group"] for r in rows if r["split"] == split}


class ValidationSplit(unittest.TestCase):
    def check_common(self, before, after):
        self.assertEqual([r["path"] for r in before], [r["path"] for r in after])
        self.assertFalse(groups(after, "val") & groups(after, "train"), "a group in val and train")
        for b, a in zip(before, after):
            if b["split"] == "test":
                self.assertEqual(a["split"], "test")
        for label in ("noise", "alarm"):
            self.assertTrue(any(r["split"] == "val" and r["label"] == label for r in after),
                            f"no {label} validation clip")

    def test_base_scope_carves_the_first_families_only(self):
        before = manifest()
        after = carve_validation(copy.deepcopy(before), 0.2, 5)
        self.check_common(before, after)
        for r in after:
            if r["family"].endswith("train_only"):
                self.assertEqual(r["split"], "train")
            elif r["group"] in groups(after, "val") or r["split"] == "unused":
                # a validation recording: its base clips are val, its extra clip unused
                self.assertEqual(r["split"], "val" if r["set"] == "base" else "unused")
        self.assertEqual(len(groups(after, "val")), 4)       # 20 % of 10 groups, two classes

    def test_all_scope_also_carves_the_train_only_families(self):
        before = manifest()
        after = carve_validation(copy.deepcopy(before), 0.2, 5, scope="all")
        self.check_common(before, after)
        val = groups(after, "val")
        self.assertEqual(len(val), 12)                       # 20 % of 10 + 20 groups, two classes
        self.assertEqual(sum(1 for g in val if ":t" in g), 8)
        self.assertFalse(any(r["split"] == "unused" for r in after))
        for r in after:
            if r["group"] in val:
                self.assertEqual(r["split"], "val")         # base and extra clips alike

    def test_same_seed_same_split_and_base_scope_is_the_default(self):
        a = carve_validation(manifest(), 0.2, 5)
        b = carve_validation(manifest(), 0.2, 5, scope="base")
        self.assertEqual([r["split"] for r in a], [r["split"] for r in b])
        c = carve_validation(manifest(), 0.2, 6, scope="all")
        d = carve_validation(manifest(), 0.2, 6, scope="all")
        self.assertEqual([r["split"] for r in c], [r["split"] for r in d])

    def test_validation_groups_of_another_data_set(self):
        # the other data set has the same recordings plus a train-only family of its own;
        # its validation groups are held out here whole, nothing else moves
        other = carve_validation(manifest(), 0.2, 5, scope="all")
        held = groups(other, "val")
        before = manifest()
        for g in range(5):
            before.append(dict(path=f"noise/n{g}.wav", label="noise", family="noise_new",
                               group=f"noise:n{g}", split="train", set="extra"))
        after = carve_validation_groups(copy.deepcopy(before), held)
        self.check_common(before, after)
        self.assertEqual(groups(after, "val"), held)
        for b, a in zip(before, after):
            self.assertEqual(a["split"], "val" if b["split"] == "train" and b["group"] in held
                             else b["split"])

    def test_unknown_scope_is_refused_by_name(self):
        with self.assertRaisesRegex(ValueError, "everything"):
            carve_validation(manifest(), 0.2, 5, scope="everything")

    def test_refit_trains_on_the_validation_clips_and_never_on_test(self):
        rows = [dict(path="a.wav", group="g1", split="train"),
                dict(path="b.wav", group="g2", split="val"),
                dict(path="c.wav", group="g3", split="test"),
                dict(path="d.wav", group="g4", split="valx")]
        rows = refit_on_validation(rows)
        self.assertEqual([r["split"] for r in rows], ["train", "train", "test", "valx"])
        self.assertEqual([r.get("refit", False) for r in rows], [False, True, False, False])


if __name__ == "__main__":
    unittest.main()
