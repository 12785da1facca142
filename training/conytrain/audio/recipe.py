"""What the audio recipes (yamnet.py, adapt.py) share: a data set's manifest, its validation
split (whole recordings held out of training, then refit on), progress lines and tool runs.
Moved here from train_default.py, the VGGish recipe retired on 2026-12-04 (git history has
it: git log -- training/conytrain/audio/train_default.py)."""

import csv
import os
import subprocess
import time

import numpy as np


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def read_manifest(dataset):
    with open(os.path.join(dataset, "manifest.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(dataset, "labels.txt")) as f:
        labels = [line.strip() for line in f if line.strip()]
    for r in rows:
        if r["label"] not in labels:
            raise ValueError(f"manifest: {r['path']}: label {r['label']} not in labels.txt")
    return rows, labels


def carve_validation(rows, frac, seed, scope="base"):
    """Move a share frac of the train split's groups (per class and family: whole source
    recordings, speakers or levels; every synthesised clip is its own group) to a
    validation split "val", used for decisions and reported, never trained on. The test
    split is untouched.

    scope "base": the groups of the data set's first families only (set "base"); the extra
    clips cut from a validation recording (data set --train-extra) become "unused", so the
    split is the same with or without them. It has few noise and alarm recordings (7 and
    2 groups in version 7), which is why it could not rank models on those classes.
    scope "all": the families used for training only (--train-extra) are carved too, and
    every clip of a validation group, base or extra, is a validation clip."""
    if scope not in ("base", "all"):
        raise ValueError(f"carve_validation: scope {scope!r} is neither 'base' nor 'all'")
    rng = np.random.default_rng([seed, 7])
    fam = {}
    for r in rows:
        if r["split"] == "train" and (scope == "all" or r.get("set") != "extra"):
            fam.setdefault((r["label"], r.get("family", "")), set()).add(r["group"])
    val = set()
    for key in sorted(fam):
        gs = sorted(fam[key])
        k = int(round(len(gs) * frac))
        if len(gs) < 3:
            k = 0                   # keep a family with one or two groups whole in train
        for i in rng.permutation(len(gs))[:k]:
            val.add(gs[i])
    for r in rows:
        if r["split"] == "train" and r["group"] in val:
            r["split"] = "unused" if scope == "base" and r.get("set") == "extra" else "val"
    return rows


def validation_groups_of(dataset, frac, seed, scope):
    """The groups carve_validation() holds out of another data set (--val-from)."""
    rows, _ = read_manifest(dataset)
    return {r["group"] for r in carve_validation(rows, frac, seed, scope) if r["split"] == "val"}


def carve_validation_groups(rows, groups):
    """Move every train clip of the given groups (base or extra) to "val": the validation
    recordings of another data set, so that runs on two data sets that share them are
    never trained on those recordings and are measured on them. The base clips are the
    same clips; the extra clips cut from those recordings are the same only where the two
    data sets plan the same extra clips (version 9 holds 959 real clips of the 1121 that
    version 7's scope-all split has, 200 base clips in both)."""
    for r in rows:
        if r["split"] == "train" and r["group"] in groups:
            r["split"] = "val"
    return rows


def refit_on_validation(rows):
    """Move the validation clips into the train split, marked "refit": the final model of a
    recipe already chosen on them learns from every training recording (--train-on-val).
    The test split is untouched."""
    for r in rows:
        if r["split"] == "val":
            r["split"] = "train"
            r["refit"] = True
    return rows


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")

