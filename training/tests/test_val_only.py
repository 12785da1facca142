"""Data set version 13's validation-only clips (build.py --data-version 13, val_v13.tsv): the
builder plans them in a split of their own ("valx", set valx, families val_only_<class>13)
with an RNG stream and seed tag of their own, so every clip planned before them stays the
same; a speaker's directory is one speech group. yamnet.py leaves them out unless
--val-extra, never trains on them (the validation stage nor the refit), and with
--val-extra reports them beside the validation figures, which stay exactly the same."""

import argparse
import csv
import json
import os
import struct
import tempfile
import unittest
from unittest import mock

import numpy as np

from conytrain.audio import yamnet
from conytrain.audio.recipe import refit_on_validation
from conytrain.data import build as bad
from test_added_music import plan_with_tables, tone

LABELS = ["speech", "music", "noise", "alarm", "animal", "silence"]


# a validation table of every kind of family: looped alarms, music tracks, two speakers
V13_ROWS = [
    dict(**{"class": "alarm"}, package="pkg-v", directory="usr/share/v/sounds", regex=r"/(beep[0-9]|bell)\.wav$",
         minimum="3"),
    dict(**{"class": "music"}, package="pkg-v", directory="usr/share/v/music", regex=r"\.ogg$", minimum="2"),
    dict(**{"class": "speech"}, package="pkg-s", directory="usr/share/s", regex=r"/(fr|it)/[^/]*\.wav$",
         minimum="6"),
]
V12_ROWS = [
    dict(**{"class": "noise"}, package="pkg-a", directory="usr/share/a", regex=r"/(rain|fan|wind)\.ogg$",
         minimum="3"),
]


class PlanValidationOnly(unittest.TestCase):
    def make_tree(self, src):
        for k in range(2):
            tone(os.path.join(src, "pkg-v/usr/share/v/sounds/beep%d.wav" % (k + 1)), 1, 900 + k)
            tone(os.path.join(src, "pkg-v/usr/share/v/music/song%d.ogg" % k), 12, 440 + k)
        tone(os.path.join(src, "pkg-v/usr/share/v/sounds/bell.wav"), 2, 1200)
        tone(os.path.join(src, "pkg-v/usr/share/v/sounds/explosion.wav"), 1, 80)    # a decoy
        for lang in ("fr", "it", "de"):
            for k in range(3):
                tone(os.path.join(src, "pkg-s/usr/share/s/%s/word%d.wav" % (lang, k)), 0.5, 300 + k)
        for name in ("rain", "fan", "wind"):
            tone(os.path.join(src, "pkg-a/usr/share/a/%s.ogg" % name), 3, 150)

    def read_table(self, name):
        return {"val_v13.tsv": V13_ROWS, "added_v12.tsv": V12_ROWS}[name]

    def plan(self, src, counts, version, seed=20261121):
        return plan_with_tables(self.read_table, src, counts, version, seed)

    def test_own_split_families_and_seed_tag(self):
        with tempfile.TemporaryDirectory() as src:
            self.make_tree(src)
            jobs = self.plan(src, {"alarm": 6, "music": 4, "speech": 4}, 13)
            self.assertEqual(len(jobs), 14)
            self.assertEqual({(j["split"], j["set"], j["added"]) for j in jobs}, {("valx", "valx", 13)})
            self.assertEqual({j["family"] for j in jobs},
                             {"val_only_alarm13", "val_only_music13", "val_only_speech13"})
            self.assertTrue(all(j["path"].startswith("clips/valx/") for j in jobs))
            self.assertEqual({j["seed"][3] for j in jobs}, {9})
            # the beep's takes are one recording; the decoy is never used
            self.assertEqual({j["group"] for j in jobs if j["label"] == "alarm"},
                             {"pkg-v:/usr/share/v/sounds/beep", "pkg-v:/usr/share/v/sounds/bell"})
            # a speaker (directory) is a group; a clip joins utterances of one speaker only
            speech = [j for j in jobs if j["label"] == "speech"]
            self.assertEqual({j["group"] for j in speech},
                             {"pkg-s:/usr/share/s/fr", "pkg-s:/usr/share/s/it"})
            for j in speech:
                self.assertEqual(len(j["spec"]["files"]), bad.ADDED_SPEECH_FILES)
                self.assertEqual({os.path.dirname(f) for f in j["spec"]["files"]},
                                 {os.path.join(src, j["group"].split(":/", 1)[0], j["group"].split(":/", 1)[1])})

    def test_earlier_plans_unchanged(self):
        # version 12's plan is the same whether version 13's is planned before it or not
        # (each table has an RNG of its own), and no clip path is shared
        with tempfile.TemporaryDirectory() as src:
            self.make_tree(src)
            alone = self.plan(src, {"noise": 6}, 12)
            v13 = self.plan(src, {"alarm": 6, "music": 4, "speech": 4}, 13)
            after = self.plan(src, {"noise": 6}, 12)
            key = [(j["path"], j["group"], j["seed"], j["spec"]["file"]) for j in alone]
            self.assertEqual(key, [(j["path"], j["group"], j["seed"], j["spec"]["file"]) for j in after])
            self.assertEqual({j["split"] for j in alone}, {"train"})
            self.assertFalse({j["path"] for j in alone} & {j["path"] for j in v13})

    def test_table_packages_are_new(self):
        v13 = bad.read_table("val_v13.tsv")
        self.assertEqual({r["class"] for r in v13}, set(LABELS) - {"silence"})
        new = {r["package"] for r in v13}
        used = set()
        for name in ("added_music.tsv", "added_v12.tsv", "train_only_v6.tsv", "v2_recordings.tsv"):
            used |= {r["package"] for r in bad.read_table(name)}
        used |= {row[0] for v in bad.TRAIN_ONLY.values() for rs in v.values() for row in rs}
        self.assertTrue(used)
        self.assertFalse(new & used, new & used)
        # nor a package of the first version's families (the test split's packages)
        with open(bad.__file__) as f:
            source = f.read()
        self.assertFalse([p for p in new if '"%s"' % p in source])


def fake_model(path, weights, window=4, frontend=None):
    """A classifier file as fake_cony reads it: a safetensors header whose config has the
    labels, the window and fake_cony's weights (and the frontend, if given)."""
    cfg = {"labels": LABELS, "window": window, "weights": weights}
    if frontend:
        cfg["frontend"] = frontend
    header = json.dumps({"__metadata__": {"config": json.dumps(cfg)}}).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
    return path


def fake_cony(cmd):
    """`cony classify --model MODEL SRC -o OUT` without the C tool: step t's logits are
    sum_k w_k * onehot(token[t, k]), the weights w from fake_model()'s file ([1] when there
    is no such file), so each token says what each model predicts."""
    if cmd[1] != "classify":
        raise AssertionError("fake cony: only classify, not %s" % cmd)
    model, src, out = cmd[cmd.index("--model") + 1], cmd[-3], cmd[-1]
    weights = [1.0]
    if os.path.isfile(model):
        weights = yamnet.eval_default_audio.model_config(model)[0]["weights"]
    x = np.load(src)
    z = np.zeros((len(x), len(LABELS)), dtype=np.float32)
    for k, w in enumerate(weights):
        z[np.arange(len(x)), x[:, k].astype(int)] += w
    np.save(out, z)
    return ""


def write_manifest(root, rows):
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "manifest.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["path", "label", "split", "origin", "group", "family", "set"])
        w.writeheader()
        for r in rows:
            w.writerow(r)
    with open(os.path.join(root, "labels.txt"), "w") as f:
        f.write("\n".join(LABELS) + "\n")


def row(i, label, split, group, family, set_="base"):
    return dict(path="clips/%s/%s/c%03d.wav" % (split, label, i), label=label, split=split,
                origin="real", group=group, family=family, set=set_)


class YamnetValidationOnly(unittest.TestCase):
    """A small data set: train groups (two of them version 7's validation recordings), a
    test clip, validation-only clips of two recordings; tone clips in WORK/tones."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        t = self.tmp.name
        rows, i = [], 0
        for c in ("speech", "alarm"):
            for g in range(4):
                rows.append(row(i, c, "train", "%s-g%d" % (c, g), "fam_" + c))
                i += 1
        rows.append(row(i, "speech", "test", "speech-test", "fam_speech"))
        i += 1
        self.valx = []
        for c, g in (("alarm", "va"), ("alarm", "va"), ("alarm", "vb"), ("speech", "vs")):
            self.valx.append(row(i, c, "valx", g, "val_only_%s13" % c, "valx"))
            i += 1
        self.dataset = os.path.join(t, "audio-dataset-v13")
        write_manifest(self.dataset, rows + self.valx)
        # the --val-from data set: its validation groups are carved from the same groups
        write_manifest(os.path.join(t, "v7"), rows)
        work = os.path.join(t, "work")
        write_manifest(os.path.join(work, "tones"),
                       [row(100 + k, "noise", "train", "tone%d" % k, "tones") for k in range(8)])
        self.args = argparse.Namespace(dataset=self.dataset, val_from=os.path.join(t, "v7"),
                                       val_frac=0.5, seed=20261121, val_scope="all", work=work,
                                       tones_extra=0, cache=os.path.join(t, "cache"), window=4,
                                       cony="cony", val_extra=False, train_seed=11)

    def tearDown(self):
        self.tmp.cleanup()

    def test_left_out_unless_asked_for(self):
        rows, _ = yamnet.load_rows(self.args)
        self.assertFalse([r for r in rows if r["split"] == "valx"])
        # the rows without --val-extra are those of the data set without the valx clips
        write_manifest(self.dataset + "-no-valx", [r for r in self.read() if r["split"] != "valx"])
        plain, _ = yamnet.load_rows(argparse.Namespace(**dict(vars(self.args), dataset=self.dataset + "-no-valx")))
        self.assertEqual([(r["path"], r["split"]) for r in rows], [(r["path"], r["split"]) for r in plain])
        # the embed stage still sees them (their tokens are cached with the rest)
        self.assertEqual(len([r for r in yamnet.load_rows(self.args, carve=False)[0] if r["split"] == "valx"]), 4)

    def read(self):
        with open(os.path.join(self.dataset, "manifest.csv"), newline="") as f:
            return list(csv.DictReader(f))

    def test_never_trained_on(self):
        args = argparse.Namespace(**dict(vars(self.args), val_extra=True))
        rows, _ = yamnet.load_rows(args)
        self.assertEqual(len([r for r in rows if r["split"] == "valx"]), 4)
        self.assertTrue([r for r in rows if r["split"] == "val"])      # the old validation split
        for stage_rows in (rows, refit_on_validation([dict(r) for r in rows])):
            train = [r for r in stage_rows if r["split"] == "train"]
            self.assertTrue(train)
            self.assertFalse([r for r in train if r["family"].startswith("val_only")])
        self.assertEqual(len([r for r in refit_on_validation([dict(r) for r in rows])
                              if r["split"] == "valx"]), 4)
        # and fit_encoder refuses a train split that holds one
        forged = [dict(r, split="train") if r["split"] == "valx" else r for r in rows]
        with self.assertRaisesRegex(RuntimeError, "validation-only"):
            yamnet.fit_encoder(args, forged, LABELS, os.path.join(self.tmp.name, "m"), "val")

    def measure(self, val_extra):
        args = argparse.Namespace(**dict(vars(self.args), val_extra=val_extra))
        rows, labels = yamnet.load_rows(args)
        for r in rows:
            # right on every clip but the second alarm recording of the valx clips
            pred = labels.index(r["label"]) if r["group"] != "vb" else labels.index("noise")
            p = yamnet.token_path(args.cache, r)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            np.save(p, np.full((17, 2), pred, dtype=np.float32))
        out = os.path.join(self.tmp.name, "val-%d.json" % val_extra)
        with mock.patch.object(yamnet.eval_default_audio, "run", fake_cony):
            yamnet.measure(args, rows, labels, "model", out)
        with open(out) as f:
            return json.load(f)

    def test_reported_beside_unchanged_figures(self):
        plain, extra = self.measure(False), self.measure(True)
        self.assertFalse([k for k in plain if k.startswith("valx")])
        self.assertEqual({k: v for k, v in extra.items()
                          if not k.startswith(("valx/", "combined/"))}, plain)
        self.assertEqual(extra["valx/speech"]["accuracy"], 1.0)
        self.assertAlmostEqual(extra["valx/alarm"]["accuracy"], 2 / 3)   # 2 of 3 clips right
        self.assertAlmostEqual(extra["valx/class-mean"]["accuracy"], (1 + 2 / 3) / 2)
        recs = extra["valx/recordings"]
        self.assertEqual(sorted(recs), ["va", "vb", "vs"])
        self.assertEqual((recs["va"]["accuracy"], recs["vb"]["accuracy"]), (1.0, 0.0))
        # every recording counts the same: alarm's two recordings average 0.5
        self.assertAlmostEqual(extra["valx/recording-class-mean"]["accuracy"], (1 + 0.5) / 2)

    def test_combined_class_mean(self):
        # rule 20: per class the real validation clips' and the valx clips' steps together
        # (sum right / sum steps, not the mean of the two rates), then the mean over classes
        res = self.measure(True)
        self.assertEqual((res["real/alarm"]["steps"], res["real/alarm"]["correct"]), (34, 34))
        self.assertEqual((res["valx/alarm"]["steps"], res["valx/alarm"]["correct"]), (51, 34))
        self.assertEqual(res["combined/alarm"], {"correct": 68, "steps": 85, "accuracy": 0.8})
        self.assertEqual(res["combined/speech"]["accuracy"], 1.0)
        self.assertEqual(res["combined/noise"], res["real/noise"])    # tone clips, no valx
        self.assertAlmostEqual(res["combined/class-mean"]["accuracy"], (1 + 1 + 0.8) / 3)
        self.assertEqual(res["combined/class-mean"]["classes"], 3)

    def test_val_extra_without_clips_is_an_error(self):
        write_manifest(self.dataset, [r for r in self.read() if r["split"] != "valx"])
        with self.assertRaisesRegex(RuntimeError, "no validation-only clips"):
            self.measure(True)


if __name__ == "__main__":
    unittest.main()
